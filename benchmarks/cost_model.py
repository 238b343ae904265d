"""Train and evaluate the cost model from the committed timings; optionally write the artifact.

Usage::

    python benchmarks/cost_model.py [--repeats 5] [--write-artifact] [--no-plot]

Evaluation (issue 12; TpuGraphs' metrics): leave one family out -- train on every other
family, rank the held-out family's sites -- and repeat ``--repeats`` times with the
training sites resampled (bootstrap, seeded), because a ranker's tau moves by about 0.1
from retraining alone (the Kaggle "Fast or Slow?" write-ups). Per method:

* **Kendall tau** between predicted and measured order of a site's candidates (mean over
  sites);
* **pairwise accuracy** over all pairs of candidates of a site, and over the decisive
  pairs (measured times more than 5% apart);
* **slowdown** of the chosen candidate against the measured best of its site,
  ``t_chosen / t_best - 1``: mean and p95.

Methods: the two fitters of :mod:`mend.cost.ranker` (``regression``, ``pairwise``); the roofline (the dataset machine's peaks); always rewrite (the rule's
default form: ``torch.cond`` when a side calls a submodule, else ``torch.where``); never
rewrite (keep the break); random (20 seeds). Reads ``mend/cost/data/cpu.jsonl`` and its
``.meta.json``; writes ``benchmarks/results/cost_model.{md,json,png}`` and, with
``--write-artifact``, ``mend/cost/model.json`` (the fitter with the lower held-out mean
slowdown, trained on every site). Times nothing.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import random
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mend.cost.features import CANDIDATES  # noqa: E402
from mend.cost.ranker import ARTIFACT, DATA, KINDS, data_hash, load_rows, scores, train  # noqa: E402
from mend.cost.roofline import estimate  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
DECISIVE = 0.05


def names_of(row: dict) -> list[str]:
    return [n for n in CANDIDATES if n in row["times_ms"]]


def rule_default(row: dict) -> str:
    """The rule's own form for the site: cond when a side calls a submodule (self.lin)."""
    site = row.get("site") or {}
    submodule = any(s in ("mlp", "mlp2") for s in (site.get("a"), site.get("b")))
    return row.get("default") or ("cond" if submodule and "cond" in row["times_ms"] else "where")


def rankings(method: str, row: dict, model: dict | None, peaks: dict, rng: random.Random) -> list[str]:
    """The method's order of the site's candidates, predicted fastest first."""
    names = names_of(row)
    if method in KINDS:
        sc = scores(model[method], row["obs"], names)
        return sorted(names, key=lambda n: (sc[n], CANDIDATES.index(n)))
    if method == "roofline":
        return sorted(names, key=lambda n: (estimate(row["obs"], n, peaks), CANDIDATES.index(n)))
    if method == "always":
        d = rule_default(row)
        return [d] + [n for n in names if n not in (d, "keep")] + ["keep"]
    if method == "never":
        return ["keep"] + [n for n in names if n != "keep"]
    if method == "random":
        out = list(names)
        rng.shuffle(out)
        return out
    raise ValueError(method)


def site_metrics(order: list[str], times: dict[str, float]) -> dict:
    pos = {n: i for i, n in enumerate(order)}
    conc = disc = dec_ok = dec_n = 0
    for a, b in itertools.combinations(order, 2):
        measured_a_faster = times[a] < times[b]
        predicted_a_faster = pos[a] < pos[b]
        ok = measured_a_faster == predicted_a_faster
        conc += ok
        disc += not ok
        if abs(math.log(times[a] / times[b])) > math.log(1 + DECISIVE):
            dec_n += 1
            dec_ok += ok
    best = min(times.values())
    return {"tau": (conc - disc) / (conc + disc), "pairs": conc + disc, "correct": conc, "dec_n": dec_n,
            "dec_ok": dec_ok, "slowdown": times[order[0]] / best - 1}


def aggregate(per_site: list[dict]) -> dict:
    slow = sorted(m["slowdown"] for m in per_site)
    p95 = slow[min(len(slow) - 1, math.ceil(0.95 * len(slow)) - 1)] if slow else None
    pairs = sum(m["pairs"] for m in per_site)
    dec = sum(m["dec_n"] for m in per_site)
    return {"sites": len(per_site), "tau": statistics.fmean(m["tau"] for m in per_site),
            "pairwise_accuracy": sum(m["correct"] for m in per_site) / pairs,
            "decisive_accuracy": (sum(m["dec_ok"] for m in per_site) / dec) if dec else None,
            "mean_slowdown": statistics.fmean(slow), "p95_slowdown": p95}


METHODS = (*KINDS, "roofline", "always", "never", "random")


FOLDS = 5


def fold_of(family: str) -> int:
    """A family's fold, stable across runs and machines."""
    return int(hashlib.sha256(family.encode()).hexdigest(), 16) % FOLDS


def evaluate(rows: list[dict], peaks: dict, repeats: int) -> dict:
    """Grouped cross-validation by family (a family's sites are all in one fold, so a
    test site's family is never trained on), metrics per method; each repeat a bootstrap
    retrain. ``per_family`` reports each family's sites while their fold was held out."""
    families = sorted({r["family"] for r in rows})
    folds = sorted({fold_of(f) for f in families})
    runs = {m: [] for m in METHODS}
    kinds = sorted({r.get("kind", r["family"]) for r in rows})
    per_family = {k: {m: [] for m in METHODS} for k in kinds}
    for rep in range(repeats):
        rng = random.Random(rep)
        site_ms = {m: [] for m in METHODS}
        for fold in folds:
            test = [r for r in rows if fold_of(r["family"]) == fold]
            pool = [r for r in rows if fold_of(r["family"]) != fold]
            boot = [pool[rng.randrange(len(pool))] for _ in pool] if rep else pool  # repeat 0: all of it
            model = {k: train(boot, k) for k in KINDS}
            for m in METHODS:
                ms = [site_metrics(rankings(m, r, model, peaks, rng), r["times_ms"]) for r in test]
                site_ms[m] += ms
                for kind in sorted({r.get("kind", r["family"]) for r in test}):
                    per_family[kind][m].append(aggregate([x for x, r in zip(ms, test)
                                                          if r.get("kind", r["family"]) == kind]))
        for m in METHODS:
            runs[m].append(aggregate(site_ms[m]))
    summary = {}
    for m in METHODS:
        summary[m] = {}
        for k in ("tau", "pairwise_accuracy", "decisive_accuracy", "mean_slowdown", "p95_slowdown"):
            vals = [r[k] for r in runs[m] if r[k] is not None]
            summary[m][k] = {"mean": statistics.fmean(vals), "sd": statistics.pstdev(vals),
                             "min": min(vals), "max": max(vals)}
    fam_summary = {f: {m: {k: statistics.fmean(x[k] for x in per_family[f][m] if x[k] is not None)
                           for k in ("pairwise_accuracy", "mean_slowdown", "tau")}
                       for m in METHODS} for f in kinds}
    sizes = {k: sum(r.get("kind", r["family"]) == k for r in rows) for k in kinds}
    return {"summary": summary, "per_family": fam_summary, "family_sizes": sizes, "repeats": repeats,
            "families": len(families), "folds": len(folds)}


def best_counts(rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        t = r["times_ms"]
        b = min(t, key=t.get)
        out[b] = out.get(b, 0) + 1
    return out


def markdown(doc: dict) -> str:
    s, meta = doc["eval"]["summary"], doc["meta"]
    fmt = lambda d, pct=False: (f"{d['mean'] * 100:.1f}% ± {d['sd'] * 100:.1f}" if pct
                               else f"{d['mean']:.3f} ± {d['sd']:.3f}")
    lines = [
        "# Cost model: keep the break, torch.where or torch.cond", "",
        f"Data: `{doc['data']}` ({doc['n_sites']} sites, SHA-256 `{doc['data_sha256'][:16]}…`), "
        f"timed by `{meta.get('command', 'benchmarks/cost_data.py')}` on {meta.get('machine')} "
        f"({meta.get('date')}, {meta.get('seconds')} s, torch {meta.get('torch')}, one intra-op thread, "
        f"1-min load {meta.get('load_1min_start')} at start / {meta.get('load_1min_end')} at end).",
        f"Fastest candidate per site (measured): {doc['best_counts']}.", "",
        f"Evaluation: {doc['eval']['families']} families (a site's pair of side expressions) in "
        f"{doc['eval']['folds']} folds, each fold held out in turn; {doc['eval']['repeats']} retrains (the first on "
        "all other folds' sites, the others on bootstrap resamples); mean ± sd over retrains. "
        "Slowdown: chosen candidate's time over the site's measured best, minus 1. "
        f"Decisive pairs: measured times more than {DECISIVE:.0%} apart.", "",
        "| method | Kendall τ | pairwise accuracy | decisive-pair accuracy | mean slowdown | p95 slowdown |",
        "|---|---|---|---|---|---|"]
    for m in METHODS:
        r = s[m]
        lines.append(f"| {m} | {fmt(r['tau'])} | {fmt(r['pairwise_accuracy'])} | {fmt(r['decisive_accuracy'])} | "
                     f"{fmt(r['mean_slowdown'], True)} | {fmt(r['p95_slowdown'], True)} |")
    lines += ["", "By kind of site (its costlier side), each site scored while its family was held out; "
              "mean over retrains: pairwise accuracy / mean slowdown.", "",
              "| kind | sites | " + " | ".join(METHODS) + " |", "|---|---|" + "---|" * len(METHODS)]
    for f, by in doc["eval"]["per_family"].items():
        cells = [f"{by[m]['pairwise_accuracy']:.3f} / {by[m]['mean_slowdown'] * 100:.1f}%" for m in METHODS]
        lines.append(f"| {f} | {doc['eval']['family_sizes'][f]} | " + " | ".join(cells) + " |")
    dw, k = doc["done_when"], doc["shipped"]
    lines += ["", "## Against the issue's targets", "",
              f"Shipped: the `{k}` fitter (lower held-out mean slowdown), trained on every site.", "",
              f"- pairwise accuracy ≥ 0.9 on held-out families: {s[k]['pairwise_accuracy']['mean']:.3f} "
              f"({'met' if dw['accuracy'] else 'not met'})",
              f"- mean slowdown ≤ 2%: {s[k]['mean_slowdown']['mean'] * 100:.2f}% "
              f"({'met' if dw['slowdown'] else 'not met'})",
              f"- the model beats the roofline (mean slowdown): {'yes' if dw['model_beats_roofline'] else 'no'}",
              f"- the roofline beats always-rewrite (mean slowdown): {'yes' if dw['roofline_beats_always'] else 'no'}",
              "", "![methods](cost_model.png)", ""]
    return "\n".join(lines)


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = doc["eval"]["summary"]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, key, label, scale in ((axes[0], "pairwise_accuracy", "pairwise accuracy", 1),
                                  (axes[1], "mean_slowdown", "mean slowdown vs measured best (%)", 100)):
        vals = [s[m][key]["mean"] * scale for m in METHODS]
        errs = [s[m][key]["sd"] * scale for m in METHODS]
        ax.bar(METHODS, vals, yerr=errs, color=["#2b6cb0", "#4299e1", "#718096", "#dd6b20", "#a0aec0", "#cbd5e0"])
        ax.set_title(label, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    axes[0].axhline(0.9, ls="--", c="k", lw=0.8)
    axes[1].axhline(2.0, ls="--", c="k", lw=0.8)
    fig.suptitle(f"held-out families, {doc['eval']['repeats']} retrains, {doc['n_sites']} sites", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def shipped_kind(ev: dict) -> str:
    """The fitter with the lower held-out mean slowdown (pairwise accuracy breaks a tie)."""
    s = ev["summary"]
    return min(KINDS, key=lambda k: (s[k]["mean_slowdown"]["mean"], -s[k]["pairwise_accuracy"]["mean"]))


def build_artifact(rows: list[dict], meta: dict, kind: str) -> dict:
    """The shipped model: trained on every site, with what it came from."""
    return {**train(rows, kind), "peaks": meta["peaks"], "devices": ["cpu"],
            "trained_on": meta.get("machine"), "torch": meta.get("torch"), "data": "mend/cost/data/cpu.jsonl",
            "data_sha256": data_hash(DATA), "n_sites": len(rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--write-artifact", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--data", default=str(DATA), help="a dataset other than the committed one (not with "
                                                      "--write-artifact); its meta is <stem>.meta.json")
    args = ap.parse_args(argv)
    data = Path(args.data)
    if args.write_artifact and data.resolve() != DATA.resolve():
        ap.error("--write-artifact trains on the committed dataset only")
    rows, meta = load_rows(data), json.loads(data.with_name(data.stem + ".meta.json").read_text())
    ev = evaluate(rows, meta["peaks"], args.repeats)
    s = ev["summary"]
    kind = shipped_kind(ev)
    shown = data.resolve().relative_to(REPO) if data.resolve().is_relative_to(REPO) else data
    doc = {"shipped": kind, "n_sites": len(rows), "data": str(shown), "data_sha256": data_hash(data), "meta": meta, "eval": ev,
           "best_counts": best_counts(rows),
           "done_when": {"accuracy": s[kind]["pairwise_accuracy"]["mean"] >= 0.9,
                         "slowdown": s[kind]["mean_slowdown"]["mean"] <= 0.02,
                         "model_beats_roofline": s[kind]["mean_slowdown"]["mean"] < s["roofline"]["mean_slowdown"]["mean"],
                         "roofline_beats_always": s["roofline"]["mean_slowdown"]["mean"] < s["always"]["mean_slowdown"]["mean"]}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cost_model.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    (RESULTS / "cost_model.md").write_text(markdown(doc))
    if not args.no_plot:
        plot(doc, RESULTS / "cost_model.png")
    if args.write_artifact:
        ARTIFACT.write_text(json.dumps(build_artifact(rows, meta, kind), indent=1, sort_keys=True) + "\n")
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
