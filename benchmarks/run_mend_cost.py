"""What ``mend`` itself costs: scan and fix wall time and peak memory per catalogue row,
before and after warm workers, and batch throughput locally and on a local Ray cluster.

Each measurement is one fresh ``mend`` process timed by this one (:func:`_harness.run_proc`:
wall time, peak RSS of the process or of any process it waited for, CPU time, and the CPU
the rest of the machine used meanwhile), with its own empty ``TORCHINDUCTOR_CACHE_DIR``
(a fresh machine: nothing compiled before; the processes of one ``mend`` run share it).
mend's own cache (``MEND_CACHE_DIR``: the C++ compiler's vector-ISA answers) is a folder of
this run, filled once before the rows by the warm server's probe (timed, as a user's first
run pays it) and read by every later process:

* ``scan``: ``mend scan ROW --json``;
* ``fix fresh``: ``mend fix ROW --out D --json`` with ``MEND_WORKERS=fresh MEND_JOBS=1``,
  every verification run a new interpreter, one after another (the path before warm
  workers, kept as the reference);
* ``fix warm``: the same command as users run it (a warm worker forks each run, two at a
  time); ``--strict`` adds ``--verify strict`` (warm);
* the two fix JSON outputs are compared with timings (``seconds``, ``solver_seconds``) and
  the output folder removed: verdicts, rewrites, obligations and certificates must be equal;
* ``batch``: ``mend scan ROWS... --json`` and ``mend fix ROWS... --out D`` as one command,
  and with ``--ray`` the same on a local Ray cluster (``ray.init`` inside ``mend``; the
  cluster's start is counted): targets per minute, and each target's own time inside the
  batch (its ``seconds`` in the combined report: the imports and the warm server are paid
  once per batch, as a model zoo in CI pays them).

Ratios (fresh / warm) are within one run; the fresh and warm processes of a row alternate.
Run nothing else on the machine meanwhile: each record carries ``foreign_cpu_s``.

    python benchmarks/run_mend_cost.py                       # 12 catalogue rows, ~60 min on 2 cores
    python benchmarks/run_mend_cost.py --rows hf:t5,hf:bart --no-batch
    python benchmarks/run_mend_cost.py --rows hf:t5,hf:bart,hf:whisper --batch-rows hf:t5,hf:bart --ray
    python benchmarks/run_mend_cost.py --ray                  # also the Ray batches

Results: ``benchmarks/results/mend_cost.{json,md}`` (``--name``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import HERE, Config, machine_info, resolve_rows, run_proc  # noqa: E402

TIMING_KEYS = {"seconds", "solver_seconds"}


def _env(cache: Path, **extra: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               TORCHINDUCTOR_CACHE_DIR=str(cache), TRANSFORMERS_VERBOSITY="error", **extra)
    env.pop("RAY_ADDRESS", None)
    return env


def _mend(*args: str) -> list[str]:
    return [sys.executable, "-m", "mend.cli", *args]


def normalised(doc, out_dir: str):
    """``doc`` without timings and with the output folder replaced, for the identity check."""
    if isinstance(doc, dict):
        return {k: normalised(v, out_dir) for k, v in doc.items() if k not in TIMING_KEYS}
    if isinstance(doc, list):
        return [normalised(v, out_dir) for v in doc]
    if isinstance(doc, str):
        return doc.replace(out_dir, "<OUT>")
    return doc


def _certificates(out: Path) -> dict:
    """Every certificate under ``out`` (path -> JSON without timings and digests)."""
    certs = {}
    for path in sorted(out.rglob("certificates/*.json")):
        doc = json.loads(path.read_text())
        doc.pop("digest", None)
        certs[str(path.relative_to(out))] = normalised(doc, str(out))
    return certs


def _record(p, extra: dict | None = None) -> dict:
    return {"wall_s": round(p.wall_s, 2), "peak_rss_mb": round(p.peak_rss_mb), "rc": p.rc, "cpu_s": round(p.cpu_s, 1),
            "foreign_cpu_s": None if p.foreign_cpu_s is None else round(p.foreign_cpu_s, 1),
            **({"error": p.stderr.strip().splitlines()[-1][:300]} if p.rc not in (0, 1) and p.stderr.strip() else {}),
            **(extra or {})}


def measure_row(spec: str, work: Path, strict: bool, log) -> dict:
    row: dict = {"row": spec}
    slug = spec.replace(":", "_").replace("@", "_").replace("/", "_")
    with tempfile.TemporaryDirectory(dir=work) as cache:
        p = run_proc(_mend("scan", spec, "--json"), env=_env(Path(cache)), timeout=1800)
        row["scan"] = _record(p)
    log(f"  scan {row['scan']['wall_s']:.1f} s")
    docs = {}
    variants = [("fix fresh", {"MEND_WORKERS": "fresh", "MEND_JOBS": "1"}, []), ("fix warm", {}, [])]
    if strict:
        variants.append(("fix strict", {}, ["--verify", "strict"]))
    for name, extra, flags in variants:
        out = work / f"{slug}-{name.replace(' ', '-')}"
        shutil.rmtree(out, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=work) as cache:
            p = run_proc(_mend("fix", spec, "--out", str(out), "--json", *flags), env=_env(Path(cache), **extra),
                         timeout=3600)
        rec = _record(p)
        if p.rc == 0:
            doc = json.loads(p.stdout)
            rec["rewrites"], rec["declined"] = len(doc["rewrites"]), len(doc["declined"])
            rec["breaks"] = [doc["before"]["graph_break_count"], doc["after"]["graph_break_count"]]
            docs[name] = (normalised(doc, str(out)), _certificates(out))
        row[name] = rec
        shutil.rmtree(out, ignore_errors=True)
        log(f"  {name} {rec['wall_s']:.1f} s, {rec['peak_rss_mb']} MB, rc {rec['rc']}")
    if "fix fresh" in docs and "fix warm" in docs:
        row["identical"] = {"json": docs["fix fresh"][0] == docs["fix warm"][0],
                            "certificates": docs["fix fresh"][1] == docs["fix warm"][1]}
        row["ratio_fresh_over_warm"] = round(row["fix fresh"]["wall_s"] / row["fix warm"]["wall_s"], 2)
    return row


def measure_batches(specs: list[str], work: Path, ray: bool, log) -> dict:
    out: dict = {}
    runs = [("scan local", ["scan", *specs, "--json"]), ("fix local", ["fix", *specs, "--out", "{out}", "--json"])]
    if ray:
        runs += [("scan ray", ["scan", *specs, "--json", "--ray"]),
                 ("fix ray", ["fix", *specs, "--out", "{out}", "--json", "--ray"])]
    results = {}
    for name, args in runs:
        folder = work / f"batch-{name.replace(' ', '-')}"
        shutil.rmtree(folder, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=work) as cache:
            p = run_proc(_mend(*[a.replace("{out}", str(folder)) for a in args]), env=_env(Path(cache)), timeout=7200)
        rec = _record(p, {"targets": len(specs),
                          "targets_per_min": round(len(specs) / (p.wall_s / 60), 2)})
        try:
            docs = json.loads(p.stdout)
        except ValueError:
            docs = None
        if docs is not None:
            docs = docs if isinstance(docs, list) else [docs]
            # each target's own time inside the batch (the imports and the warm server paid once)
            rec["per_target_s"] = {d["target"]: d.get("seconds") for d in docs}
            times = [t for t in rec["per_target_s"].values() if t is not None]
            rec["median_per_target_s"] = round(statistics.median(times), 1) if times else None
            results[name] = normalised(docs, str(folder))
        out[name] = rec
        shutil.rmtree(folder, ignore_errors=True)
        log(f"  batch {name}: {rec['wall_s']:.1f} s, {rec['targets_per_min']} targets/min, rc {rec['rc']}")
    for verb in ("scan", "fix"):
        if f"{verb} local" in results and f"{verb} ray" in results:
            out[f"{verb} ray"]["identical_to_local"] = results[f"{verb} local"] == results[f"{verb} ray"]
    return out


def _median(rows: list[dict], key: str, field: str = "wall_s"):
    xs = [r[key][field] for r in rows if key in r and r[key]["rc"] in (0, 1)]
    return round(statistics.median(xs), 1) if xs else None


def markdown(doc: dict) -> str:
    rows = doc["rows"]
    m = doc["machine"]
    lines = ["# What mend costs (`benchmarks/run_mend_cost.py`)", "",
             f"Machine: {m.get('cpu_model')}, {m.get('cpus_usable')} usable cores, {m.get('mem_total_gb')} GB, "
             f"torch {m.get('torch_version')}, transformers {m.get('transformers_version')}, commit "
             f"{(m.get('git_commit') or '')[:10]}{' (dirty)' if m.get('git_dirty') else ''}; started {doc['started']}, "
             f"{doc['minutes']:.0f} min. Every `mend` process starts with an empty `TORCHINDUCTOR_CACHE_DIR`."
             + (f" mend's own cache (`MEND_CACHE_DIR`, the vector-ISA answers) was filled once before the rows, in "
                f"{doc['mend_cache_fill']['wall_s']} s (a user's first run pays this once per machine)."
                if doc.get("mend_cache_fill") else ""), "",
             "| row | scan s | fix fresh s | fix warm s | fresh/warm | strict s | peak RSS MB (warm) | rewrites | "
             "identical JSON / certificates | foreign CPU s (warm) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    def cell(r: dict, k: str, f: str = "wall_s") -> str:
        return "—" if k not in r else (f"{r[k][f]}" + ("" if r[k]["rc"] in (0, 1) else f" (rc {r[k]['rc']})"))

    for r in rows:
        ident = r.get("identical")
        lines.append(f"| {r['row']} | {cell(r, 'scan')} | {cell(r, 'fix fresh')} | {cell(r, 'fix warm')} | "
                     f"{r.get('ratio_fresh_over_warm', '—')} | {cell(r, 'fix strict')} | {cell(r, 'fix warm', 'peak_rss_mb')} | "
                     f"{r.get('fix warm', {}).get('rewrites', '—')} | "
                     f"{'—' if ident is None else ('yes' if ident['json'] else 'NO') + ' / ' + ('yes' if ident['certificates'] else 'NO')} | "
                     f"{r.get('fix warm', {}).get('foreign_cpu_s', '—')} |")
    med = {k: _median(rows, k) for k in ("scan", "fix fresh", "fix warm", "fix strict")}
    rss = max((r[k]["peak_rss_mb"] for r in rows for k in ("scan", "fix fresh", "fix warm", "fix strict") if k in r),
              default=None)
    text = {k: "—" if v is None else f"{v} s" for k, v in med.items()}
    lines += ["", f"Medians over the rows: scan {text['scan']}, fix fresh {text['fix fresh']}, fix warm "
              f"{text['fix warm']}, strict {text['fix strict']}; largest peak RSS {rss} MB.", ""]
    if doc.get("batches"):
        lines += ["| batch | targets | wall s | targets/min | median s per target, inside the batch | peak RSS MB | "
                  "identical to local |", "|---|---|---|---|---|---|---|"]
        for name, b in doc["batches"].items():
            lines.append(f"| `mend {name}` | {b['targets']} | {b['wall_s']} | {b['targets_per_min']} | "
                         f"{b.get('median_per_target_s') or '—'} | {b['peak_rss_mb']} | "
                         f"{'—' if 'identical_to_local' not in b else ('yes' if b['identical_to_local'] else 'NO')} |")
        if any(name.endswith("ray") for name in doc["batches"]):
            lines += ["", "On Ray, peak RSS is the driver's alone (Ray's workers are not its children) and the workers' "
                      "CPU counts as foreign; the cluster's start and stop are in the wall time."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="paper", help="paper (the 12 hf: rows) or a comma list (hf:t5,...)")
    ap.add_argument("--strict", action="store_true", help="also time --verify strict (warm)")
    ap.add_argument("--no-batch", action="store_true", help="skip the batch runs")
    ap.add_argument("--batch-rows", default=None, help="the batches' rows (default: --rows)")
    ap.add_argument("--no-rows", action="store_true", help="only the batch runs")
    ap.add_argument("--name", default="mend_cost", help="results file name (NAME.json, NAME.md)")
    ap.add_argument("--ray", action="store_true", help="also run the batches on a local Ray cluster")
    ap.add_argument("--out", default=str(HERE / "results"), help="results folder")
    args = ap.parse_args(argv)
    specs = [r.spec for r in resolve_rows(args.rows)]
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.time()
    doc = {"schema_version": "1.0", "started": started, "machine": machine_info(Config()),
           "loadavg_start": os.getloadavg(), "rows": [], "batches": {}}
    with tempfile.TemporaryDirectory(prefix="mend-cost-") as work_name:
        work = Path(work_name)
        os.environ["MEND_CACHE_DIR"] = str(work / "mend-cache")  # _env passes it on
        with tempfile.TemporaryDirectory(dir=work) as cache:
            p = run_proc([sys.executable, "-c", "import mend._warm as w; w._probe_vec_isa()"], env=_env(Path(cache)),
                         timeout=600)
        doc["mend_cache_fill"] = _record(p)
        for spec in [] if args.no_rows else specs:
            print(spec, flush=True)
            doc["rows"].append(measure_row(spec, work, args.strict, lambda s: print(s, flush=True)))
        if not args.no_batch:
            batch = [r.spec for r in resolve_rows(args.batch_rows)] if args.batch_rows else specs
            doc["batches"] = measure_batches(batch, work, args.ray, lambda s: print(s, flush=True))
    doc["minutes"] = (time.time() - t0) / 60
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{args.name}.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
