"""CPU benchmark of mend: original vs mended models, side by side, in one run.

    pip install -c constraints.txt -e '.[bench]'
    python benchmarks/run_cpu.py                 # the paper rows (hf: catalogue), < 30 min on 2 cores
    python benchmarks/run_cpu.py --rows hf:t5 --quick
    python benchmarks/run_cpu.py --rows cases    # ../shared/cases (not part of the 30-minute run)

Writes benchmarks/results/cpu.json (raw numbers, machine), cpu.md (tables) and
cpu_breaks.png, cpu_ratios.png. What is measured: benchmarks/README.md and _harness.py.
Run nothing else on the machine meanwhile: the fresh processes use one intra-op thread
(torch.set_num_threads(1), OMP_NUM_THREADS=1) and the timings assume idle cores.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402


def parser(device: str = "cpu") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="paper",
                   help="paper (default: the 12 hf: catalogue rows), cases (../shared/cases), all, or a comma "
                        "list of hf:NAME, case:PREFIX, FILE.py")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 cold-cache and 1 warm-cache process per variant, 3 warm-up and 10 timed "
                        "calls, batch sizes 1 and 2, no extra verification levels")
    p.add_argument("--cold", type=int, help="cold-cache processes per variant and row (at most; default 3)")
    p.add_argument("--warm", type=int, help="warm-cache processes per variant and row (at most; default 3)")
    p.add_argument("--steady-procs", type=int, help="processes per variant that time the steady state: the first "
                   "cold-cache one, then that many minus one warm-cache ones, original and mended alternating; "
                   "the ratio is of the medians of their medians (default 1)")
    p.add_argument("--iters", type=int, help="timed calls per steady-state / throughput phase (default 50)")
    p.add_argument("--warmup", type=int, help="untimed calls before timing (default 10)")
    p.add_argument("--batch-sizes", help="comma list of batch multipliers (default 1,8)")
    p.add_argument("--budget-min", type=float,
                   help="stop adding repetitions when the run would exceed this (default 28 on CPU); the first "
                        "repetition of every row always runs")
    p.add_argument("--backend", default="inductor")
    p.add_argument("--mode", default=None, help="torch.compile mode")
    p.add_argument("--out", default=str(H.HERE / "results"), help="results folder (default benchmarks/results)")
    p.add_argument("--name", default=device, help="file prefix of the results (default: %(default)s)")
    p.add_argument("--keep-work", help="keep mended sources, inductor caches and raw outputs in this folder")
    p.add_argument("--scan-mended", action="store_true", help="also `mend scan` the mended model (overlay)")
    p.add_argument("--no-verify-levels", action="store_true", help="time only the default `mend fix`")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help="run `mend fix --unsafe-fixes` (apply the verified fixes labelled unsafe too: every deferred "
                        "print/log/warning is one since 2026-12-06)")
    p.add_argument("--install-runtime", action="store_true",
                   help="also mend.runtime.install(model) on mended models that defer side effects (buffer and "
                        "replay after the call; costs a Dynamo frame callback per call). "
                        "mend.validation_runtime.install is always applied where the mended code needs it")
    return p


def config_from(ns, device: str = "cpu") -> H.Config:
    cfg = H.Config(name=ns.name, device=device, backend=ns.backend, mode=ns.mode, out_dir=ns.out,
                   keep_work=ns.keep_work, scan_mended=ns.scan_mended, verify_levels=not ns.no_verify_levels,
                   install_runtime=ns.install_runtime, unsafe_fixes=getattr(ns, "unsafe_fixes", False))
    if device != "cpu":
        cfg.threads = None
    if ns.quick:
        cfg.cold_procs, cfg.warm_procs, cfg.warmup, cfg.iters, cfg.batch_sizes = 1, 1, 3, 10, (1, 2)
        cfg.max_timed_s, cfg.verify_levels = 1.0, False
    cfg.budget_s = 28 * 60 if device == "cpu" else None
    for attr, val in (("cold_procs", ns.cold), ("warm_procs", ns.warm), ("iters", ns.iters), ("warmup", ns.warmup),
                      ("steady_procs", ns.steady_procs)):
        if val is not None:
            setattr(cfg, attr, val)
    if ns.batch_sizes:
        cfg.batch_sizes = tuple(int(b) for b in ns.batch_sizes.split(","))
    if ns.budget_min is not None:
        cfg.budget_s = ns.budget_min * 60 if ns.budget_min > 0 else None
    return cfg


def main(argv: list[str] | None = None) -> int:
    ns = parser("cpu").parse_args(argv)
    cfg = config_from(ns, "cpu")
    rows = H.resolve_rows(ns.rows)
    t0 = time.perf_counter()
    print(f"benchmarks: {len(rows)} row(s), {cfg.cold_procs} cold-cache + {cfg.warm_procs} warm-cache processes per "
          f"variant at most, budget {cfg.budget_s / 60 if cfg.budget_s else 0:.0f} min; results in {cfg.out_dir}",
          flush=True)
    doc = H.run(rows, cfg, log=lambda m: print(m, flush=True))
    print(f"benchmarks: done in {(time.perf_counter() - t0) / 60:.1f} min: "
          f"{Path(cfg.out_dir) / (cfg.name + '.md')}", flush=True)
    return 1 if any(r.get("errors") for r in doc["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
