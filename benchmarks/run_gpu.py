"""CUDA benchmark of mend: the CPU benchmark's rows on a GPU, Inductor with
``mode="reduce-overhead"`` (CUDA graphs), in one call of under 8 minutes.

The GPU machine this project is sometimes lent has torch 2.11, transformers 5.x and no
network, and mend's own work (scan, fix, verification) is CPU work. So the run has two steps:

1. here, on a CPU machine with the project installed (``pip install -e '.[bench]'``)::

       python benchmarks/run_gpu.py prepare            # paper rows; --rows as in run_cpu.py

   runs ``mend scan`` and ``mend fix --out`` for every row (timed: mend's cost), and writes a
   bundle to ``benchmarks/.gpu/`` (git-ignored by its own .gitignore): the mended sources,
   the counts, and wheels of transformers 4.52.4 and the versions of huggingface-hub and
   tokenizers it accepts (``pip download``, for CPython 3.12 on x86-64 Linux).

2. on the GPU machine, from the repository root (the bundle travels with the tree; with the
   device tool: ``carry: ["benchmarks/.gpu"]``)::

       python3 benchmarks/run_gpu.py measure --out "$OUT"

   installs the wheels into a private folder (``pip --no-index --target``) when the
   machine's transformers is not 4.52.4, then measures every row as the CPU run does:
   cold start (cold and warm Inductor/Triton cache), steady state, throughput, Dynamo
   events -- plus CUDA-graph skips, since mend's deferred-effect operator runs Python and
   CUDA graphs cannot capture it. A budget (default 6.5 min) stops it from starting
   measurements that would not finish in time; what it skipped is in the results.

Writes ``gpu.json``, ``gpu.md``, ``gpu_breaks.png``, ``gpu_ratios.png`` to ``--out``.

3. ``python3 benchmarks/run_gpu.py deferred --out "$OUT"`` (needs torch only, ~2 min):
   deferred effects under CUDA graphs -- that the mended graph is CUDA-graphed, that every
   replay prints and logs what eager does, and cold/warm/steady ratios
   (:mod:`gpu_deferred`).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402

BUNDLE = H.HERE / ".gpu"
WHEELS = ["transformers==4.52.4", "huggingface-hub>=0.30.0,<1.0", "tokenizers>=0.21,<0.22"]


def prepare(ns) -> int:
    rows = H.resolve_rows(ns.rows)
    bundle = Path(ns.bundle)
    shutil.rmtree(bundle / "rows", ignore_errors=True)
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / ".gitignore").write_text("*\n")
    cfg = H.Config(name="gpu-prepare", verify_levels=not ns.no_verify_levels)
    default_level, levels = H.verify_levels()
    levels = levels if cfg.verify_levels else []
    out = {"prepared_on": H.machine_info(cfg), "prepared": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "verify_levels": {"default": default_level, "timed_too": levels}, "order": [r.key for r in rows], "rows": {}}
    for row in rows:
        t = time.perf_counter()
        prep = H.prepare_row(row, cfg, bundle / "rows", levels, default_level)
        if row.kind == "file":  # the original travels too: ../shared does not
            orig = bundle / "rows" / row.slug / "original" / Path(row.spec).name
            orig.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(row.spec, orig)
            prep["spec"] = str(orig.relative_to(H.REPO))
        if prep.get("mended_dir"):
            prep["mended_dir"] = str(Path(prep["mended_dir"]).relative_to(H.REPO))
        out["rows"][row.key] = prep
        c = prep.get("counts", {})
        print(f"[{row.key}] breaks {c.get('breaks_before')} -> {c.get('breaks_after')} "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
    (bundle / "bundle.json").write_text(json.dumps(out, indent=1))
    if not ns.no_wheels:
        whl = bundle / "whl"
        shutil.rmtree(whl, ignore_errors=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
               "--implementation", "cp", "-d", str(whl)]
        for plat in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"):
            cmd += ["--platform", plat]
        for spec in WHEELS:
            r = subprocess.run(cmd + [spec], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"pip download {spec} failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
                return 2
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file()) / 2**20
    print(f"bundle: {bundle} ({size:.1f} MiB). On the GPU machine: python3 benchmarks/run_gpu.py measure --out \"$OUT\" "
          f"(device tool: carry [\"{bundle.relative_to(H.REPO)}\"])")
    return 0


def _ensure_transformers(bundle: Path) -> str | None:
    """Make transformers 4.52.4 importable by the child processes; returns a note or None."""
    from importlib import metadata

    try:
        have = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        have = None
    if have == "4.52.4":
        return None
    wheels = sorted((bundle / "whl").glob("*.whl"))
    if not wheels:
        return f"transformers {have} here and no wheels in the bundle: rows may not build"
    site = Path("/tmp/mend-bench-site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--upgrade", "--target", str(site), *map(str, wheels)], capture_output=True, text=True)
    if r.returncode != 0:
        return f"installing the bundled wheels failed: {r.stderr.strip()[-300:]}"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    return f"transformers 4.52.4 loaded from the bundled wheels (the machine has {have})"


def measure(ns) -> int:
    import torch

    if not torch.cuda.is_available() and not ns.allow_cpu:
        print("run_gpu.py measure: no CUDA device (use run_cpu.py on CPU)", file=sys.stderr)
        return 2
    bundle = Path(ns.bundle)
    if not (bundle / "bundle.json").is_file():
        print(f"run_gpu.py measure: no bundle at {bundle}: run `python benchmarks/run_gpu.py prepare` first, "
              "on a CPU machine with the project installed", file=sys.stderr)
        return 2
    data = json.loads((bundle / "bundle.json").read_text())
    prepared = {}
    for key, prep in data["rows"].items():
        prep = dict(prep)
        if prep.get("mended_dir"):
            prep["mended_dir"] = str(H.REPO / prep["mended_dir"])
        if prep["kind"] == "file":
            prep["spec"] = str(H.REPO / prep["spec"])
        prepared[key] = prep
    keys = data["order"]
    if ns.rows:
        wanted = [k.strip() for k in ns.rows.split(",") if k.strip()]
        wanted = [k if ":" in k else f"hf:{k}" for k in wanted]
        missing = [k for k in wanted if k not in prepared]
        if missing:
            print(f"run_gpu.py measure: not in the bundle: {', '.join(missing)}", file=sys.stderr)
            return 2
        keys = wanted
    rows = [H.Row(k, prepared[k]["spec"], prepared[k]["kind"]) for k in keys]
    note = _ensure_transformers(bundle)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = H.Config(name=ns.name, device=device, backend=ns.backend, mode=ns.mode or None, threads=None,
                   cold_procs=ns.cold, warm_procs=ns.warm, warmup=10, iters=ns.iters, max_timed_s=2.0,
                   batch_sizes=tuple(int(b) for b in ns.batch_sizes.split(",")), budget_s=ns.budget_min * 60,
                   proc_timeout_s=300.0, verify_levels=False, out_dir=ns.out, install_runtime=ns.install_runtime)
    t0 = time.perf_counter()
    print(f"run_gpu: {len(rows)} row(s) on {device}, mode {cfg.mode}, budget {ns.budget_min} min", flush=True)
    doc = H.run(rows, cfg, prepared=prepared, log=lambda m: print(m, flush=True),
                extra_notes=[n for n in (note, "mend's cost (scan, fix) and the counts were measured on the CPU "
                                         f"machine that prepared the bundle ({data['prepared']}, torch "
                                         f"{data['prepared_on'].get('torch_version')}), not on this one") if n],
                extra_doc={"verify_levels": data.get("verify_levels"), "prepared_on": data.get("prepared_on")})
    print(f"run_gpu: done in {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    return 1 if any(r.get("errors") for r in doc["rows"]) else 0


def session(ns) -> int:
    """One lent-GPU call: the paired steady state (``steady_paired.py``, CUDA graphs), the
    deferred-effect check, then ``measure`` with the time left. Each phase is a child process
    with its own time limit, so one that fails or overruns leaves the others' results; after
    each phase ``results.tgz`` under ``--out`` is rewritten (the device tool returns at most
    8 files)."""
    import tarfile

    deadline = time.time() + ns.minutes * 60
    out = Path(ns.out)
    res = Path(tempfile.mkdtemp(prefix="mend-gpu-session-"))
    note = _ensure_transformers(Path(ns.bundle))
    log = [f"transformers: {note or 'the machine has 4.52.4'}"]
    here = [sys.executable, str(Path(__file__).resolve())]
    # --device cpu tests this script without CUDA (no CUDA graphs there: default mode)
    cuda = ns.device == "cuda"
    mode = ["--mode", "reduce-overhead" if cuda else ""]
    phases = [
        ("steady", [sys.executable, str(H.HERE / "steady_paired.py"), "--bundle", ns.bundle, "--device", ns.device,
                    *(mode if cuda else []), "--rows", ns.rows, "--pairs", str(ns.pairs), "--name", "steady_gpu",
                    "--out", str(res / "steady"), "--budget-min", str(ns.steady_min)], ns.steady_min * 60 + 90),
        ("deferred", here + ["deferred", "--out", str(res / "deferred"), "--device", ns.device], ns.deferred_s),
        ("measure", here + ["measure", "--out", str(res / "measure"), "--rows", ns.rows, "--cold", "1", "--warm", "1",
                            *mode, *([] if cuda else ["--allow-cpu"]), "--budget-min", "{budget}"], None),
    ]
    rc = 0
    for name, cmd, limit in phases:
        left = deadline - time.time()
        if limit is None:  # the last phase takes what is left, less a margin for its own start
            limit = left - 20
            cmd = [c.replace("{budget}", f"{max(limit - 40, 0) / 60:.2f}") for c in cmd]
        limit = min(limit, left - 10)
        if limit < 30:
            log.append(f"{name}: not started ({left:.0f} s left)")
            continue
        t0 = time.time()
        (res / name).mkdir(parents=True, exist_ok=True)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=H.REPO)
            verdict = f"rc {p.returncode}"
            rc = rc or p.returncode
            text = p.stdout + p.stderr
        except subprocess.TimeoutExpired as exc:
            verdict, rc = f"stopped at its limit ({limit:.0f} s)", rc or 124
            text = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        (res / name / "log.txt").write_text(text)
        log.append(f"{name}: {verdict}, {time.time() - t0:.0f} s")
        print(log[-1], "\n", text[-1500:], flush=True)
        (res / "session.txt").write_text("\n".join(log) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out / "results.tgz.part", "w:gz") as tar:
            tar.add(res, arcname="gpu-session")
        os.replace(out / "results.tgz.part", out / "results.tgz")
    print("\n".join(log), flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("prepare", help="on a CPU machine: scan + fix every row, write the bundle")
    pp.add_argument("--rows", default="paper")
    pp.add_argument("--bundle", default=str(BUNDLE))
    pp.add_argument("--no-wheels", action="store_true", help="do not download the transformers 4.52.4 wheels")
    pp.add_argument("--no-verify-levels", action="store_true")
    pm = sub.add_parser("measure", help="on the GPU machine: measure the bundled rows")
    pm.add_argument("--rows", default=None, help="subset of the bundled rows (default: all, in order)")
    pm.add_argument("--bundle", default=str(BUNDLE))
    pm.add_argument("--out", default=str(H.HERE / "results"))
    pm.add_argument("--name", default="gpu")
    pm.add_argument("--backend", default="inductor")
    pm.add_argument("--mode", default="reduce-overhead")
    pm.add_argument("--cold", type=int, default=2, help="cold-cache processes per variant (at most)")
    pm.add_argument("--warm", type=int, default=2, help="warm-cache processes per variant (at most)")
    pm.add_argument("--iters", type=int, default=100)
    pm.add_argument("--batch-sizes", default="1,8")
    pm.add_argument("--budget-min", type=float, default=6.5,
                    help="no measurement is started that would end past this (default 6.5: the call, wheel "
                         "install included, ends within 8 minutes)")
    pm.add_argument("--install-runtime", action="store_true")
    pm.add_argument("--allow-cpu", action="store_true", help="run the measure step without CUDA (testing only)")
    pd = sub.add_parser("deferred", help="on the GPU machine: deferred effects under CUDA graphs (issue 11; "
                                         "needs torch only, ~2 min)")
    pd.add_argument("--out", default=str(H.HERE / "results"))
    pd.add_argument("--device", default="cuda", help="cpu: test the script without CUDA graphs")
    pd.add_argument("--replays", type=int, default=20)
    pd.add_argument("--iters", type=int, default=200)
    ps = sub.add_parser("session", help="on the GPU machine: steady (paired), deferred, then measure, in one call")
    ps.add_argument("--out", required=True)
    ps.add_argument("--bundle", default=str(BUNDLE))
    ps.add_argument("--rows", default="hf:t5,hf:whisper,hf:bart,hf:bart@fp16,hf:longformer,hf:layoutlmv3,hf:marian,"
                                      "hf:biogpt,hf:pegasus,hf:blenderbot")
    ps.add_argument("--minutes", type=float, default=9.0, help="the whole session, wheel install included")
    ps.add_argument("--steady-min", type=float, default=3.0)
    ps.add_argument("--deferred-s", type=float, default=150.0)
    ps.add_argument("--pairs", type=int, default=200)
    ps.add_argument("--device", default="cuda", help="cpu: test the session without CUDA")
    ns = p.parse_args(argv)
    if ns.cmd == "session":
        return session(ns)
    if ns.cmd == "deferred":
        import gpu_deferred

        res = gpu_deferred.run(Path(ns.out), ns.device, ns.replays, ns.iters)
        print((Path(ns.out) / "deferred_gpu.md").read_text())
        return 0 if res["replays_within_last_digit"] == res["replays"] and res["cudagraphs"] != "skipped" else 1
    return prepare(ns) if ns.cmd == "prepare" else measure(ns)


if __name__ == "__main__":
    sys.exit(main())
