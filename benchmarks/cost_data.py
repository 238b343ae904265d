"""Collect the cost model's training data: time keep / torch.where / torch.cond per branch site.

Usage::

    python benchmarks/cost_data.py [--limit N] [--quick] [--out mend/cost/data/cpu.jsonl]

Each **synthetic site** is a module ``forward(x, s)``: ``h = x * 1.5 + 0.5``, then a
branch on a tensor predicate of ``h`` and ``s`` that selects ``y`` from two side
expressions, then ``return y * 2.0``. What varies: the shape of ``x`` (rows x width), the
dtype, the predicate, the two sides (pointwise chains, clamps, softmax, layer norm,
matmuls, linear layers), and the fraction of the timed inputs that take the true side.
The **family** of a site is its pair of side expressions (``pw3|mlp``): evaluation holds
families out, so a test site's code never appears in training. Its **kind** is the kind of
its costlier side (``pointwise``, ``reduction``, ``matmul``) or ``guard`` (an fp16-style
overflow guard: ``isinf(...).any()`` selecting a clamp or nothing); sites are sampled
evenly by kind and results are reported by kind.

The three variants are the source ``mend`` emits: the original ``if``/``else`` (Dynamo
breaks the graph at it), ``y = torch.where(p, a, b)`` and mend's guarded ``torch.cond``.
Each is compiled with ``torch.compile`` (Inductor) on one intra-op thread, warmed up on both
branch outcomes, checked to give the same output as the others, then timed in interleaved
rounds (variant order rotated every round) over a fixed input schedule; a variant's time is
the median per-call time over rounds (ms). The site observation (the model's input
features) is taken by the same code ``mend fix`` uses at a real site
(:func:`verifier.opcount.count_expr` on fake tensors).

The run records the machine, torch version, roofline peaks (measured in the same run) and
the 1-minute load average at start and end in ``<out stem>.meta.json``. Nothing else may
run during it: 2 cores, and timings are only comparable within one quiet run.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PREDICATES = {  # name -> (expression, s that makes it true, s that makes it false)
    "mean": ("(h.mean() + s) > 0", 1e3, -1e3),
    "anyinf": ("torch.isinf(h * s).any()", float("inf"), 1.0),
    "amax": ("(h.abs().amax() * s) > 1.0", 1e6, 0.0),
    "flag": ("s > 0", 1.0, -1.0),
}
SIDES = {  # name -> (expression, family)
    "id": ("h", "pointwise"),
    "scale": ("h * 0.5", "pointwise"),
    "clamp": ("torch.clamp(h, min=-3.0, max=3.0)", "pointwise"),
    "pw3": ("torch.tanh(h) * 2.0 + torch.sigmoid(h)", "pointwise"),
    "pw8": ("torch.tanh(torch.sin(h) * torch.cos(h) + h.exp().clamp(max=10.0)) * torch.sigmoid(h * 3.0) "
            "- torch.relu(h)", "pointwise"),
    "softmax": ("torch.softmax(h, dim=-1)", "reduction"),
    "norm": ("F.layer_norm(h, (h.shape[-1],))", "reduction"),
    "matmul": ("h @ self.w", "matmul"),
    "mlp": ("F.gelu(self.lin(h))", "matmul"),
    "mlp2": ("self.lin(F.gelu(self.lin(h)))", "matmul"),
}
_RANK = {"pointwise": 0, "reduction": 1, "matmul": 2}
ROWS = (1, 16, 128, 1024)
WIDTHS = (32, 128, 512)
DTYPES = ("float32", "bfloat16")
P_TRUE = (0.0, 0.5, 1.0)

HEADER = '''import torch
import torch.nn.functional as F


class Site(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.w = torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x, s):
        h = x * 1.5 + 0.5
'''


def variant_source(kind: str, pred: str, a: str, b: str) -> str:
    """The module source of one variant: ``keep`` (the branch), ``where`` or ``cond`` (as
    mend emits them, predicated_control_flow/where.py and cond.py)."""
    branch = (f"        if {pred}:\n            y = {a}\n        else:\n            y = {b}\n")
    if kind == "keep":
        body = branch
    elif kind == "where":
        body = f"        y = torch.where({pred}, {a}, {b})\n"
    elif kind == "cond":  # a side that is an input gets .clone(), as mend's cond planner emits
        ca, cb = (f"{v}.clone()" if v == "h" else v for v in (a, b))
        body = (f"        if torch.compiler.is_compiling() and ({pred}).numel() == 1:\n"
                f"            y = torch.cond({pred}, lambda: {ca}, lambda: {cb})\n"
                "        else:\n" + "\n".join("    " + ln for ln in branch.splitlines()) + "\n")
    else:
        raise ValueError(kind)
    return HEADER + body + "        return y * 2.0\n"


def family(pred: str, a: str, b: str) -> str:
    if pred == "anyinf" and {a, b} <= {"clamp", "id"}:
        return "guard"
    return max((SIDES[a][1], SIDES[b][1]), key=_RANK.get)


def all_sites(seed: int = 0) -> list[dict]:
    """Every site of the grid, in a fixed shuffled order (so a --limit run still covers
    every family)."""
    sites = []
    for pred, (a, b), rows, width, dtype, p in itertools.product(
            PREDICATES, itertools.combinations(SIDES, 2), ROWS, WIDTHS, DTYPES, P_TRUE):
        sites.append({"pred": pred, "a": a, "b": b, "rows": rows, "width": width, "dtype": dtype, "p": p})
    for pred, rows, width, dtype, p in itertools.product(("anyinf",), ROWS, WIDTHS, DTYPES, P_TRUE):
        sites.append({"pred": pred, "a": "clamp", "b": "id", "rows": rows, "width": width, "dtype": dtype, "p": p})
    # bfloat16 matmuls run unvectorised on this CPU (~100x float32): keep those sites small
    sites = [s for s in sites if not (s["dtype"] == "bfloat16" and "matmul" in (SIDES[s["a"]][1], SIDES[s["b"]][1])
                                      and s["rows"] * s["width"] ** 2 > 128 * 128 ** 2)]
    random.Random(seed).shuffle(sites)
    for s in sites:
        s["id"] = f"{s['pred']}-{s['a']}-{s['b']}-{s['rows']}x{s['width']}-{s['dtype']}-p{s['p']}"
        s["kind"] = family(s["pred"], s["a"], s["b"])
        s["family"] = f"{s['a']}|{s['b']}"
    return sites


def stratified(sites: list[dict], per_family: int) -> list[dict]:
    """The first ``per_family`` sites of each family (the grid is already shuffled),
    interleaved so that a run cut short still covers every family."""
    by: dict[str, list[dict]] = {}
    for s in sites:
        by.setdefault(s["kind"], []).append(s)
    picked = [fam[:per_family] for fam in by.values()]
    return [s for group in itertools.zip_longest(*picked) for s in group if s is not None]


def _load(src: str, folder: Path, name: str):
    import importlib.util

    path = folder / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def observe(site: dict, model, x, s) -> dict:
    """The site observation mend fix would record (mend.cost.features)."""
    import torch
    import torch.nn.functional as F

    from verifier.opcount import count_expr

    g = {"torch": torch, "F": F}
    loc = {"self": model, "x": x, "s": s, "h": x * 1.5 + 0.5}
    pred = PREDICATES[site["pred"]][0]
    return {"pred": count_expr(pred, g, loc), "sides": [count_expr(SIDES[site["a"]][0], g, loc),
                                                         count_expr(SIDES[site["b"]][0], g, loc)],
            "p_true": site["p"], "device": "cpu"}


def time_site(site: dict, folder: Path, rounds: int = 9, schedule_len: int = 8) -> dict:
    """Compile and time the three variants of ``site``; the dataset row."""
    import torch

    torch._dynamo.reset()
    dtype = getattr(torch, site["dtype"])
    pred, true_s, false_s = PREDICATES[site["pred"]]
    a, b = SIDES[site["a"]][0], SIDES[site["b"]][0]
    torch.manual_seed(0)
    x = torch.randn(site["rows"], site["width"], dtype=dtype)
    n_true = round(site["p"] * schedule_len)
    schedule = [torch.tensor(true_s if i < n_true else false_s, dtype=dtype) for i in range(schedule_len)]
    random.Random(1).shuffle(schedule)
    models, fns = {}, {}
    compile_s = {}
    for kind in ("keep", "where", "cond"):
        mod = _load(variant_source(kind, pred, a, b), folder, f"site_{kind}")
        torch.manual_seed(0)
        m = mod.Site(site["width"]).to(dtype).eval()
        models[kind] = m
        t0 = time.perf_counter()
        fns[kind] = torch.compile(m)
        with torch.no_grad():
            for s in (torch.tensor(true_s, dtype=dtype), torch.tensor(false_s, dtype=dtype)) * 2:
                fns[kind](x, s)
        compile_s[kind] = round(time.perf_counter() - t0, 3)
    with torch.no_grad():  # the variants agree (a harness bug would otherwise teach the model noise)
        for s in (torch.tensor(true_s, dtype=dtype), torch.tensor(false_s, dtype=dtype)):
            ref = fns["keep"](x, s)
            for kind in ("where", "cond"):
                got = fns[kind](x, s)
                if not torch.allclose(ref.float(), got.float(), rtol=2e-2, atol=2e-2, equal_nan=True):
                    raise RuntimeError(f"{site['id']}: {kind} differs from keep")

    def run(kind):
        f = fns[kind]
        for s in schedule:
            f(x, s)

    with torch.no_grad():
        t0 = time.perf_counter()
        run("keep")
        once = time.perf_counter() - t0
        number = max(1, int(0.004 / max(once, 1e-6)))  # each measurement >= ~4 ms
        per = {k: [] for k in fns}
        kinds = list(fns)
        for r in range(rounds):
            order = kinds[r % 3:] + kinds[:r % 3]
            for kind in order:
                t0 = time.perf_counter()
                for _ in range(number):
                    run(kind)
                per[kind].append((time.perf_counter() - t0) / (number * schedule_len) * 1e3)
    obs = observe(site, models["keep"], x, schedule[0])
    times = {k: round(statistics.median(v), 6) for k, v in per.items()}
    spread = {k: round((statistics.quantiles(v, n=4)[2] - statistics.quantiles(v, n=4)[0]) / statistics.median(v), 4)
              for k, v in per.items()}
    return {"id": site["id"], "family": site["family"], "kind": site["kind"], "source": "synthetic",
            "site": {k: site[k] for k in ("pred", "a", "b", "rows", "width", "dtype", "p")},
            "obs": obs, "times_ms": times, "iqr_rel": spread, "compile_s": compile_s}


def reobserve(path: Path) -> int:
    """Recompute the ``obs`` of every synthetic row of ``path`` from its site (the features
    changed; the timings stay)."""
    import torch

    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    for row in rows:
        if row.get("source") != "synthetic":
            continue
        site = {**row["site"], "id": row["id"]}
        dtype = getattr(torch, site["dtype"])
        mod = _load(variant_source("keep", PREDICATES[site["pred"]][0], SIDES[site["a"]][0], SIDES[site["b"]][0]),
                    Path(tempfile.mkdtemp(prefix="mend-cost-")), "site_keep")
        torch.manual_seed(0)
        model = mod.Site(site["width"]).to(dtype).eval()
        x = torch.randn(site["rows"], site["width"], dtype=dtype)
        row["obs"] = observe(site, model, x, torch.tensor(PREDICATES[site["pred"]][1], dtype=dtype))
        row["kind"] = family(site["pred"], site["a"], site["b"])
        row["family"] = f"{site['a']}|{site['b']}"
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return 0


def real_sites() -> list[Path]:
    """Files with a real branch site: the shared cases' data-dependent branches and this
    repository's branch fixtures (those the rule rewrites are kept by :func:`time_file_site`)."""
    out = sorted((REPO / "tests" / "fixtures").glob("*.py"))
    shared = REPO.parent / "shared" / "cases"
    if shared.is_dir():
        out += sorted(shared.glob("0*.py"))
    return out


def time_file_site(path: Path, folder: Path, rounds: int = 9) -> dict | None:
    """Time keep / where / cond of the first predicated branch of a file target
    (``Model``, ``get_inputs()``), as mend's rule rewrites it; None when the rule rewrites
    no site there. The observation is the facts run's (``mend fix``'s own code path), with
    the taken-branch frequency unknown, as at a real site."""
    import libcst as cst
    import torch

    from mend.rules.predicated_control_flow import RULE
    from mend.rules.predicated_control_flow.rewrite import rewrite
    from verifier.facts import facts_in_process

    src = path.read_text()
    try:
        line = RULE.example_line(src)
    except Exception:  # noqa: BLE001 - not parseable as a site file
        return None
    if line is None:
        return None
    forms = {}
    for form in ("where", "cond"):
        res = rewrite(cst.parse_module(src), line, form=form)
        if not hasattr(res, "code") or res.cost_parts is None:
            continue
        forms[form] = res
    if "where" not in forms:
        return None
    torch._dynamo.reset()
    codes = {"keep": src, **{f: r.code for f, r in forms.items()}}
    mods, fns = {}, {}
    for kind, code in codes.items():
        mods[kind] = _load(code, folder, f"case_{kind}")
    torch.manual_seed(0)
    args = mods["keep"].get_inputs()
    args = args if isinstance(args, tuple) else (args,)
    for kind, mod in mods.items():
        torch.manual_seed(0)
        fns[kind] = torch.compile(mod.Model().eval())
    with torch.no_grad():
        ref = fns["keep"](*args)
        for kind in list(fns):
            fns[kind](*args)
            got = fns[kind](*args)
            if not torch.allclose(torch.as_tensor(ref).float(), torch.as_tensor(got).float(), rtol=1e-4, atol=1e-5,
                                  equal_nan=True):
                raise RuntimeError(f"{path.name}: {kind} differs from keep")
        t0 = time.perf_counter()
        fns["keep"](*args)
        number = max(1, int(0.004 / max(time.perf_counter() - t0, 1e-6)))
        per = {k: [] for k in fns}
        kinds = list(fns)
        for r in range(rounds):
            for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                t0 = time.perf_counter()
                for _ in range(number):
                    fns[kind](*args)
                per[kind].append((time.perf_counter() - t0) / number * 1e3)
    res = forms["where"]
    file = folder / "case_where.py"

    def build():
        torch.manual_seed(0)
        return mods["where"].Model().eval()
    facts, _ = facts_in_process(build, str(file), args, {}, [], src, res.code, costs=res.cost_parts)
    costs = facts.get("costs")
    if costs is None:
        raise RuntimeError(f"{path.name}: the facts run did not observe the site")
    obs = {"pred": costs["pred"], "sides": costs["sides"], "p_true": None, "device": "cpu"}
    return {"id": f"case:{path.stem}", "family": f"case:{path.stem}", "kind": "case", "source": "case",
            "site": {"file": str(path.relative_to(REPO.parent)), "line": line},
            "default": (RULE.rewrite(cst.parse_module(src), line).form or "where"),
            "obs": obs, "times_ms": {k: round(statistics.median(v), 6) for k, v in per.items()},
            "iqr_rel": {k: round((statistics.quantiles(v, n=4)[2] - statistics.quantiles(v, n=4)[0])
                                 / statistics.median(v), 4) for k, v in per.items()}}


def load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "mend" / "cost" / "data" / "cpu.jsonl"))
    ap.add_argument("--limit", type=int, default=None, help="time only the first N sites of the shuffled grid")
    ap.add_argument("--per-family", type=int, default=None, help="time N sites of each family")
    ap.add_argument("--quick", action="store_true", help="3 rounds, 4 sites (a smoke run)")
    ap.add_argument("--resume", action="store_true", help="keep the rows already in --out and add the others")
    ap.add_argument("--cases", action="store_true", help="also time the real branch sites of tests/fixtures and "
                                                         "../shared/cases (each its own family)")
    ap.add_argument("--only-cases", action="store_true", help="time only the real branch sites")
    ap.add_argument("--reobserve", action="store_true", help="recompute every row's site observation in --out "
                                                             "(fake tensors only: no timing, no compile)")
    args = ap.parse_args(argv)
    if args.reobserve:
        return reobserve(Path(args.out))

    import torch

    torch.set_num_threads(1)
    from mend.cost.roofline import machine, measure

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sites = all_sites()
    if args.per_family:
        sites = stratified(sites, args.per_family)
    limit = 4 if args.quick else args.limit
    if limit is not None:
        sites = sites[:limit]
    done = set()
    if args.resume and out.exists():
        done = {json.loads(ln)["id"] for ln in out.read_text().splitlines() if ln.strip()}
    elif out.exists():
        out.unlink()
    t_start, load_start = time.time(), load1()
    peaks = measure("cpu")
    failed = []
    if args.only_cases:
        sites = []
    with tempfile.TemporaryDirectory(prefix="mend-cost-") as tmp:
        if args.cases or args.only_cases:
            for path in real_sites():
                if f"case:{path.stem}" in done:
                    continue
                try:
                    row = time_file_site(path, Path(tmp), rounds=3 if args.quick else 9)
                except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                    failed.append({"id": f"case:{path.stem}", "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                    print(f"{path.name}: FAILED {failed[-1]['error']}", flush=True)
                    continue
                if row is None:
                    continue
                with out.open("a") as fh:
                    fh.write(json.dumps(row, sort_keys=True) + "\n")
                print(f"{path.name}: {row['times_ms']}", flush=True)
        for i, site in enumerate(sites):
            if site["id"] in done:
                continue
            try:
                row = time_site(site, Path(tmp), rounds=3 if args.quick else 9)
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                failed.append({"id": site["id"], "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                print(f"[{i + 1}/{len(sites)}] {site['id']}: FAILED {failed[-1]['error']}", flush=True)
                continue
            with out.open("a") as fh:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
            t = row["times_ms"]
            print(f"[{i + 1}/{len(sites)}] {site['id']}: keep {t['keep']:.4f} where {t['where']:.4f} "
                  f"cond {t['cond']:.4f} ms", flush=True)
    meta = {"machine": machine(), "torch": torch.__version__, "python": sys.version.split()[0],
            "intra_op_threads": 1, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": round(time.time() - t_start),
            "load_1min_start": load_start, "load_1min_end": load1(), "peaks": peaks, "sites_in_grid": len(all_sites()),
            "sites_timed": sum(1 for ln in out.read_text().splitlines() if ln.strip()) if out.exists() else 0,
            "failed": failed,
            "command": "python benchmarks/cost_data.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    out.with_name(out.stem + ".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
