"""Benchmark rows from the newest transformers release, in a separate environment (issue 5).

    python benchmarks/run_newest.py                       # 7 rows, ~20 min on 2 cores (quick settings)
    python benchmarks/run_newest.py --models ctrl,led --budget-min 10
    python benchmarks/run_newest.py --render-only         # newest.md again from newest.json

One command, two steps:

1. **environment** (any Python 3.10+): creates or reuses ``benchmarks/.venv-newest``
   (git-ignored). It is an isolated venv (no ``--system-site-packages``) with torch 2.13.0
   CPU (``torch==2.13.0+cpu``: from the PyTorch CPU index when reachable, otherwise from
   pip's configured indexes / find-links), mend's own dependencies, the newest
   ``transformers`` from PyPI (``pip install --upgrade transformers``, so every run takes
   the current release; ``--no-upgrade`` keeps the installed one) and this repository
   (``pip install --no-deps -e .``). Only when no torch 2.13.0 CPU wheel can be installed
   is the venv recreated with ``--system-site-packages``, taking the system's torch, with
   transformers still installed into (and shadowing the system's in) the venv; the results
   say which.
2. **measurement** (re-executed inside the venv): the rows of :mod:`mend.targets.hf_newest`
   (``hf:newest/NAME``: deberta, longformer, led, big_bird, bigbird_pegasus, ctrl,
   reformer; small configs, random weights) go through the shared harness
   (``benchmarks/_harness.py``, as ``run_cpu.py``): ``mend scan --json``, ``mend fix --json
   --out DIR``, then, for rows where mend emitted a verified rewrite, original vs mended
   in fresh processes: cold start with a cold and a warm Inductor cache, steady state,
   Dynamo events, one intra-op thread, ratios from the same run, medians.

Defaults are the harness's ``--quick`` settings so that the seven rows fit in ~20 minutes on
a 2-core machine: 1 cold-cache and 1 warm-cache process per variant, 3 warm-up and 10 timed
calls, batch size 1 only, no extra verification levels, an 18-minute budget for step 2.
``--full`` uses the harness defaults (3 + 3 processes, 50 calls, batch sizes 1 and 8).

Writes ``benchmarks/results/newest.json`` (every raw number, the machine, the environment
and the exact transformers version) and ``newest.md`` (summary table, what mend left and
why in mend's own words, then the harness's detailed tables).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as H  # noqa: E402

VENV = H.HERE / ".venv-newest"
TORCH = "2.13.0"
TORCH_SPEC = f"torch=={TORCH}+cpu"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# issue 5's seven rows, then issue 10's eight (vision-language, audio, MoE)
MODELS = ["deberta", "longformer", "led", "big_bird", "bigbird_pegasus", "ctrl", "reformer",
          "xlm", "flaubert", "llava", "paligemma", "qwen2_vl", "switch_transformers", "vilt", "encodec"]


# ----------------------------------------------------------------------------------------
# step 1: the environment


def _venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def _py(python: Path, code: str) -> str | None:
    p = subprocess.run([str(python), "-W", "ignore", "-c", code], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def _pip(python: Path, *args: str, log) -> bool:
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args]
    log("env: " + " ".join(cmd[2:]))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        log("env:   failed: " + H._last_line(p.stderr))
    return p.returncode == 0


def _reachable(url_host: str, timeout: float = 5.0) -> bool:
    try:
        socket.create_connection((url_host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _mend_deps() -> list[str]:
    import tomllib

    deps = tomllib.loads((H.REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [d for d in deps if not d.replace(" ", "").startswith("torch")]


def _torch_version(python: Path) -> str | None:
    return _py(python, "import torch; print(torch.__version__)")


def ensure_env(upgrade: bool, recreate: bool, log) -> dict:
    """Create or reuse the venv; return what it holds (versions, how torch got there)."""
    import shutil

    t0 = time.perf_counter()
    py = _venv_python()
    cfg = VENV / "pyvenv.cfg"
    if recreate and VENV.exists():
        shutil.rmtree(VENV)
    torch_source = None
    if not py.exists():
        log(f"env: creating {VENV} (isolated: no system site-packages)")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not (_torch_version(py) or "").startswith(TORCH):
        if _reachable("download.pytorch.org"):
            ok = _pip(py, TORCH_SPEC, "--extra-index-url", CPU_INDEX, log=log)
            torch_source = f"{TORCH_SPEC} via {CPU_INDEX}" if ok else None
        else:
            log(f"env: {CPU_INDEX} is unreachable; trying pip's configured indexes / find-links")
        if torch_source is None and _pip(py, TORCH_SPEC, log=log):
            torch_source = f"{TORCH_SPEC} via pip's configured indexes / find-links (CPU index unreachable)"
        if torch_source is None:
            sys_torch = _torch_version(Path(sys.executable))
            if not (sys_torch or "").startswith(TORCH):
                raise SystemExit(f"run_newest: cannot install {TORCH_SPEC} and the system torch is {sys_torch}")
            log(f"env: no {TORCH_SPEC} wheel installable: recreating the venv with --system-site-packages "
                f"(system torch {sys_torch})")
            shutil.rmtree(VENV)
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
            torch_source = f"system site-packages (torch {sys_torch}); no {TORCH_SPEC} wheel was installable"
    have_tf = _py(py, "import transformers; print(transformers.__version__)")
    if upgrade or have_tf is None:
        # --upgrade: the newest release, shadowing any transformers from system site-packages
        if not _pip(py, "--upgrade", "transformers", *_mend_deps(), log=log):
            raise SystemExit("run_newest: installing transformers / mend's dependencies failed")
    if _py(py, "import mend, sys; print(mend.__file__)") != str(H.REPO / "mend" / "__init__.py"):
        if not _pip(py, "--no-deps", "-e", str(H.REPO), log=log):
            raise SystemExit("run_newest: pip install --no-deps -e . failed")
    info = json.loads(_py(py, "import json, sys, torch, transformers, mend; print(json.dumps({"
                          "'python': sys.executable, 'torch': torch.__version__, 'torch_file': torch.__file__, "
                          "'transformers': transformers.__version__, 'transformers_file': transformers.__file__, "
                          "'mend_file': mend.__file__}))") or "{}")
    if not info:
        raise SystemExit(f"run_newest: {py} cannot import torch, transformers and mend")
    text = cfg.read_text() if cfg.is_file() else ""
    info["venv"] = str(VENV.relative_to(H.REPO))
    info["system_site_packages"] = "include-system-site-packages = true" in text
    info["torch_source"] = torch_source or ("already installed in the venv" if not info["system_site_packages"]
                                            else "system site-packages")
    info["pip_freeze"] = (subprocess.run([str(py), "-m", "pip", "freeze", "--disable-pip-version-check"],
                                         capture_output=True, text=True).stdout.split())
    info["setup_s"] = time.perf_counter() - t0
    log(f"env: ready in {info['setup_s']:.0f} s: torch {info['torch']}, transformers {info['transformers']} "
        f"({'with' if info['system_site_packages'] else 'no'} system site-packages)")
    return info


# ----------------------------------------------------------------------------------------
# step 2: the measurement (inside the venv)


def config_from(ns) -> H.Config:
    cfg = H.Config(name="newest", device="cpu", out_dir=ns.out, keep_work=ns.keep_work, verify_levels=False,
                   unsafe_fixes=ns.unsafe_fixes)
    if not ns.full:  # the harness's --quick settings, batch size 1 only
        cfg.cold_procs, cfg.warm_procs, cfg.warmup, cfg.iters, cfg.batch_sizes = 1, 1, 3, 10, (1,)
        cfg.max_timed_s = 1.0
    if ns.batch_sizes:
        cfg.batch_sizes = tuple(int(b) for b in ns.batch_sizes.split(","))
    if ns.counts_only:  # scan and fix only: graphs, breaks, rewrites, reasons (no fresh timing processes)
        cfg.cold_procs = cfg.warm_procs = 0
    cfg.budget_s = ns.budget_min * 60 if ns.budget_min > 0 else None
    return cfg


def _short(path: str | None) -> str:
    return (path or "?").split("site-packages/")[-1]


def summarize_row(r: dict) -> dict:
    """One summary line of a harness row: counts, what is left (by category), ratios."""
    c = r.get("counts") or {}
    left = r.get("remaining_sites") or []
    cats = Counter()
    for s in left:
        cats[s.get("category") or "?"] += s.get("count") or 1
    cs = r.get("cold_start") or {}
    st = r.get("steady_state") or {}
    return {
        "row": r["row"], "model": r["row"].split("/", 1)[-1],
        "graphs_before": c.get("graphs_before"), "graphs_after": c.get("graphs_after"),
        "breaks_before": c.get("breaks_before"), "breaks_after": c.get("breaks_after"),
        "fixable": c.get("fixable"), "fixed": c.get("fixed"), "rewrites": c.get("rewrites"),
        "unsafe_rewrites": c.get("unsafe_rewrites"), "withheld": c.get("withheld"),
        "steady_before": c.get("steady_before"), "steady_after": c.get("steady_after"),
        "rules": dict(Counter(x["rule"] for x in r.get("rewrites") or [])),
        "left_by_category": dict(cats.most_common()),
        "cold_ratio": (cs.get("cold") or {}).get("ratio"), "warm_ratio": (cs.get("warm") or {}).get("ratio"),
        "steady_ratio": st.get("ratio"),
        "outputs_agree": (r.get("output_agreement") or {}).get("allclose"),
        "not_timed": r.get("not_timed") or r.get("skipped"),
        "errors": r.get("errors") or [],
    }


def newest_markdown(doc: dict) -> str:
    """newest.md: the summary table, what mend left and why, then the harness's tables."""
    env, mach = doc.get("environment") or {}, doc.get("machine") or {}
    f = H._f
    L = ["# mend on the newest transformers release (CPU)", "",
         f"transformers **{env.get('transformers', mach.get('transformers_version'))}**, torch "
         f"{env.get('torch', mach.get('torch_version'))} ({env.get('torch_source', '?')}), in `{env.get('venv', '?')}` "
         f"({'with' if env.get('system_site_packages') else 'without'} system site-packages). "
         f"Run {doc.get('started', '?')}, {(doc.get('wall_s') or 0) / 60:.1f} min (environment setup "
         f"{(env.get('setup_s') or 0) / 60:.1f} min more); machine {mach.get('cpu_model', '?')}, "
         f"{mach.get('cpu_count')} CPUs, one intra-op thread. Command: `python benchmarks/run_newest.py"
         + (f" {doc['argv']}" if doc.get("argv") else "") + "`.", ""]
    for n in doc.get("notes", []):
        L += [f"**Note:** {n}", ""]
    L += ["Ratios are original / mended time from the same run (> 1: mended is faster); cold start = fresh "
          "process to the first compiled call's return, medians over `n` processes (see the detailed tables).", "",
          "Graphs are those a first compiled call compiles (a fresh model, as `torch._dynamo.explain` counts); "
          "*second call* is how many graphs a second call runs, once first-call work (transformers' lazily "
          "installed output-capturing hooks) is done. *rewrites* counts the applied ones, with how many are "
          "labelled unsafe (applied because of `--unsafe-fixes`, when the command line has it).", "",
          "| model | graphs before → after | second call before → after | breaks before → after | fixed | "
          "rewrites (unsafe), by rule | left, by category | cold start ratio, cold cache | warm cache | "
          "steady-state ratio | outputs agree |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in doc.get("summary", []):
        left = ", ".join(f"{k} ×{v}" for k, v in s["left_by_category"].items()) or "none"
        timed = s.get("not_timed")
        rat = [f(s.get(k)) if not timed else "not timed" for k in ("cold_ratio", "warm_ratio", "steady_ratio")]
        agree = {True: "yes", False: "**no**", None: "—"}[s.get("outputs_agree")]
        rules = ", ".join(f"{k} ×{v}" for k, v in (s.get("rules") or {}).items())
        rw = f"{f(s['rewrites'], '{}')} ({f(s.get('unsafe_rewrites'), '{}')})" + (f": {rules}" if rules else "")
        L.append(f"| {s['model']} | {f(s['graphs_before'], '{}')} → {f(s['graphs_after'], '{}')} | "
                 f"{f(s.get('steady_before'), '{}')} → {f(s.get('steady_after'), '{}')} | "
                 f"{f(s['breaks_before'], '{}')} → {f(s['breaks_after'], '{}')} | {f(s['fixed'], '{}')} | "
                 f"{rw} | {left} | {rat[0]} | {rat[1]} | {rat[2]} | {agree} |")
    total = Counter()
    for s in doc.get("summary", []):
        total.update(s["left_by_category"])
    if total:
        L += ["", f"Left over all rows ({sum(total.values())} breaks), by mend's category: "
              + ", ".join(f"{k} {v}" for k, v in total.most_common()) + "."]
    untimed = [s for s in doc.get("summary", []) if s.get("not_timed")]
    if untimed:
        L += ["", "Not timed: " + "; ".join(f"{s['model']} ({s['not_timed']})" for s in untimed) + ". Where mend "
              "emitted no verified rewrite the mended model is the original, and a ratio would be 1 by construction."]
    L += ["", "## What mend left, and why (mend's own reasons)", ""]
    for r in doc.get("rows", []):
        sites = r.get("remaining_sites")
        model = r["row"].split("/", 1)[-1]
        if sites is None:
            L += [f"* **{model}**: no `mend fix` result ({'; '.join(r.get('errors') or ['not run'])})."]
            continue
        if not sites:
            L += [f"* **{model}**: nothing left."]
            continue
        L.append(f"* **{model}**:")
        for s in sites:
            where = f"{_short(s.get('file'))}:{s.get('line')}"
            why = s.get("reason") or "no reason given"
            if s.get("fixable_by") and "but its rewrite was declined" not in why:  # matched, not emitted
                why = f"`{s['fixable_by']}` matches ({why}) but its rewrite was declined (below)"
            L.append(f"  * `{where}` ({s.get('function')}) `{(s.get('source') or '').strip()[:80]}` — "
                     f"{s.get('category')} ×{s.get('count')}: {why}"
                     + (" (frame skipped)" if s.get("frame_skipped") else ""))
        for d in r.get("declined") or []:
            L.append(f"  * declined rewrite `{d.get('rule')}` at `{_short(d.get('site'))}`: {d.get('reason')}")
    detail = H.markdown(doc).splitlines()
    detail = [("#" + ln if ln.startswith("#") else ln) for ln in detail[1:] if not ln.startswith("Plots: ")
              or any(Path(doc.get("config", {}).get("out_dir", ".")).glob("newest_*.png"))]
    L += ["", "## Detailed tables (the shared harness, as in cpu.md)", ""] + detail
    return "\n".join(L) + "\n"


def measure(ns, env: dict, log) -> int:
    cfg = config_from(ns)
    rows = [H.Row(f"hf:newest/{m}", f"hf:newest/{m}", "hf") for m in ns.models.split(",") if m]
    unknown = [m for m in ns.models.split(",") if m and m not in MODELS]
    if unknown:
        raise SystemExit(f"run_newest: unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    log(f"newest: {len(rows)} row(s), {cfg.cold_procs} cold + {cfg.warm_procs} warm process(es) per variant at "
        f"most, budget {(cfg.budget_s or 0) / 60:.0f} min, transformers {env.get('transformers')}")
    notes = [f"quick settings (the default): {cfg.cold_procs} cold-cache and {cfg.warm_procs} warm-cache process "
             f"per variant, {cfg.warmup} warm-up and {cfg.iters} timed calls, batch sizes "
             f"{', '.join(map(str, cfg.batch_sizes))}; `--full` for the harness defaults"] if not ns.full else []
    doc = H.run(rows, cfg, log=log, extra_notes=notes)
    doc["environment"] = env
    doc["argv"] = " ".join(a for a in ns.argv_outer)
    doc["summary"] = [summarize_row(r) for r in doc["rows"]]
    out = Path(cfg.out_dir)
    (out / "newest.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / "newest.md").write_text(newest_markdown(doc))
    for s in doc["summary"]:
        log(f"[{s['model']}] breaks {s['breaks_before']} -> {s['breaks_after']}; left {s['left_by_category']}; "
            f"ratios cold {H._f(s['cold_ratio'])} warm {H._f(s['warm_ratio'])} steady {H._f(s['steady_ratio'])}")
    return 1 if any(r.get("errors") for r in doc["rows"]) else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help="comma list (default: all fifteen)")
    p.add_argument("--counts-only", action="store_true",
                   help="scan and fix each row, no timing: graphs, breaks, rewrites and reasons only")
    p.add_argument("--unsafe-fixes", action="store_true",
                   help="run `mend fix --unsafe-fixes` (apply the verified fixes labelled unsafe too)")
    p.add_argument("--budget-min", type=float, default=18.0,
                   help="budget of the measurement step in minutes (default 18; 0: none); the first row always runs")
    p.add_argument("--full", action="store_true", help="the harness defaults instead of the quick settings")
    p.add_argument("--batch-sizes", help="comma list of batch multipliers (default 1; --full: 1,8)")
    p.add_argument("--out", default=str(H.HERE / "results"), help="results folder (default benchmarks/results)")
    p.add_argument("--keep-work", help="keep mended sources, inductor caches and raw outputs in this folder")
    p.add_argument("--no-upgrade", action="store_true", help="reuse the venv's transformers, do not ask PyPI")
    p.add_argument("--recreate-env", action="store_true", help="delete and recreate benchmarks/.venv-newest")
    p.add_argument("--env-only", action="store_true", help="set up the environment and stop")
    p.add_argument("--render-only", action="store_true",
                   help="rewrite OUT/newest.md from OUT/newest.json (no environment, no measurement)")
    p.add_argument("--_in-env", dest="in_env", help=argparse.SUPPRESS)  # JSON file of step 1's findings
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns = parser().parse_args(argv)
    log = lambda m: print(m, flush=True)  # noqa: E731
    if ns.render_only:
        out = Path(ns.out)
        (out / "newest.md").write_text(newest_markdown(json.loads((out / "newest.json").read_text())))
        return 0
    if ns.in_env:
        ns.argv_outer = [a for a in argv if not a.startswith("--_in-env") and a != ns.in_env]
        return measure(ns, json.loads(Path(ns.in_env).read_text()), log)
    t0 = time.perf_counter()
    env = ensure_env(upgrade=not ns.no_upgrade, recreate=ns.recreate_env, log=log)
    env["host_python"] = f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"
    if ns.env_only:
        print(json.dumps({k: v for k, v in env.items() if k != "pip_freeze"}, indent=1))
        return 0
    env_file = VENV / "run_newest_env.json"
    env_file.write_text(json.dumps(env))
    py = _venv_python()
    rc = subprocess.run([str(py), str(Path(__file__).resolve()), *argv, "--_in-env", str(env_file)],
                        cwd=str(H.REPO), env={**os.environ, "PYTHONNOUSERSITE": "1"}).returncode
    log(f"run_newest: done in {(time.perf_counter() - t0) / 60:.1f} min (rc {rc})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
