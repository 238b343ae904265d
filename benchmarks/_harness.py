"""Shared code of the benchmark harness (``run_cpu.py``, ``run_gpu.py``).

For each row (a target ``mend`` can fix) the original and the mended model are measured
side by side, in the same run, by the same code:

* **mend's cost**: wall time and peak resident memory of ``mend scan TARGET --json`` and
  ``mend fix TARGET --out DIR --json`` (each verification level ``mend fix --help`` offers),
  each a fresh process timed by the parent; peak memory is ``ru_maxrss`` from ``wait4``,
  i.e. the largest resident set of that process or of any process it started and waited
  for (the verification workers), not their sum.
* **counts**: graphs and graph breaks before and after, fixable breaks, from ``mend fix``'s
  JSON (its ``before`` and ``after`` scans) and checked against ``mend scan`` of the
  original and against Dynamo's own ``unique_graphs`` counter in the benchmark processes.
* **cold start**: the wall time from just before a fresh Python process is spawned to the
  return of its first compiled call (``torch.compile(model)(**inputs)`` under
  ``torch.no_grad()``; CUDA synchronised), measured with ``time.perf_counter``
  (CLOCK_MONOTONIC, shared by both processes). It covers interpreter start, importing
  torch and transformers (and ``mend.overlay`` + the mended modules for the mended
  model), building the model with random weights (nothing is read from disk), Dynamo
  tracing, the backend compile and the first run. Each process gets its own
  ``TORCHINDUCTOR_CACHE_DIR``: *cold cache* = an empty new folder; *warm cache* = the
  folder a previous process of the same variant filled (Inductor's FX graph cache,
  AOTAutograd cache, compiled kernels). Dynamo tracing is never cached. Python's
  ``__pycache__`` and the OS page cache are warm in both cases.
* **steady state**: after the first call, ``warmup`` more calls, then ``iters`` calls each
  timed alone; the median (and p10/p90) of those.
* **throughput**: the example inputs repeated ``B`` times along dim 0, for each ``B`` in
  ``batch_sizes``; a warm-up (which compiles the new shape) then ``iters`` timed calls;
  samples per second = rows of dim 0 / median latency.
* **Dynamo events** beside every timing: compiles, recompiles, guard failures and frames
  that fell back to eager *during the timed calls*, from ``torch._dynamo.utils.counters``,
  ``guard_failures`` and the compilation metrics.

Ratios are original / mended of times (> 1: the mended model is faster); for throughput the
same orientation (mended samples/s / original samples/s).

The child side of every fresh process is this file run as a script:
``python benchmarks/_harness.py child REQUEST.json``.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = "1.0"

# The paper rows, in the catalogue's order (hf: names).
PAPER_ROWS = ["t5", "biogpt", "blenderbot", "marian", "pegasus", "phi3", "whisper", "bart", "bart@fp16",
              "layoutlmv3", "longformer", "grounding-dino"]

# The GraphMend paper's published numbers (arXiv 2509.16248; shared/notes/torch-2.13-facts.md).
# breaks: the paper's break count; fixed_pct: percentage of breaks fixed, where the notes give
# it; cold_ratio: the paper's cold-start ratio, where the notes give it (none so far).
PAPER = {
    "t5": {"row": "t5", "breaks": 3},
    "whisper": {"row": "whisper", "breaks": 3},
    "bart@fp16": {"row": "bart (fp16)", "breaks": 7},
    "bart": {"row": "bart (fp16 count)", "breaks": 7, "note": "the paper's count is for fp16: compare bart@fp16"},
    "marian": {"row": "marian (fp16 count)", "breaks": 6, "note": "the paper's count is for fp16; this row is fp32"},
    "biogpt": {"row": "biogpt", "breaks": 2},
    "blenderbot": {"row": "blenderbot", "breaks": 3},
    "pegasus": {"row": "pegasus", "breaks": 2},
    "layoutlmv3": {"row": "layoutlmv3", "breaks": 2},
    "phi3": {"row": "phi-4-mini", "breaks": 5, "note": "our row: Phi-3 with LongRoPE (the same rope code)"},
    "longformer": {"row": "longformer", "breaks": 5, "fixed_pct": 40},
    "grounding-dino": {"row": "grounding-dino", "breaks": 17, "fixed_pct": 58},
}


# ----------------------------------------------------------------------------------------
# configuration and rows


@dataclass
class Config:
    name: str = "cpu"                 # file prefix of the results
    device: str = "cpu"
    backend: str = "inductor"
    mode: str | None = None           # torch.compile mode ("reduce-overhead" on CUDA)
    threads: int | None = 1           # intra-op threads in the fresh processes (CPU)
    cold_procs: int = 3               # cold-cache processes per variant (at most)
    warm_procs: int = 3               # warm-cache processes per variant (at most)
    steady_procs: int = 1             # processes per variant that time the steady state: the first
                                      # cold-cache one, then warm-cache ones (original and mended alternate)
    warmup: int = 10                  # untimed calls after the first, before timing
    iters: int = 50                   # timed calls (steady state and each batch size)
    max_timed_s: float = 3.0          # stop timing a phase after this many seconds (>= 5 calls)
    batch_sizes: tuple = (1, 8)
    budget_s: float | None = None     # whole run; extra repetitions are skipped past it
    proc_timeout_s: float = 900.0
    verify_levels: bool = True        # time `mend fix --verify LEVEL` for each level offered
    scan_mended: bool = False         # also run `mend scan` on the mended model (overlay)
    install_runtime: bool = False     # mend.runtime.install(model) when the mended code defers effects
    out_dir: str = str(HERE / "results")
    keep_work: str | None = None      # keep mended sources and caches in this folder
    unsafe_fixes: bool = False        # `mend fix --unsafe-fixes`: apply the fixes labelled unsafe too


@dataclass
class Row:
    key: str          # "hf:t5", "case:014_print_const_debug", "file:/path/x.py"
    spec: str         # what mend takes: "hf:t5" or a file path
    kind: str         # "hf" or "file"

    @property
    def name(self) -> str:
        return self.key.split(":", 1)[1] if self.kind == "hf" else Path(self.spec).stem

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "_", self.key)


def shared_cases_dir() -> Path | None:
    for cand in (REPO.parent / "shared" / "cases", REPO / "shared" / "cases"):
        if cand.is_dir():
            return cand
    return None


def resolve_rows(spec: str) -> list[Row]:
    """``paper`` (default), ``cases`` (every ../shared/cases file), ``all``, or a comma list
    of ``hf:NAME``, ``NAME``, ``case:PREFIX`` and file paths."""
    rows: list[Row] = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        if part == "paper":
            rows += [Row(f"hf:{n}", f"hf:{n}", "hf") for n in PAPER_ROWS]
        elif part in ("cases", "all"):
            if part == "all":
                rows += [Row(f"hf:{n}", f"hf:{n}", "hf") for n in PAPER_ROWS]
            cases = shared_cases_dir()
            if cases is None:
                print("benchmarks: ../shared/cases not found: no case rows", file=sys.stderr)
                continue
            rows += [Row(f"case:{p.stem}", str(p), "file") for p in sorted(cases.glob("[0-9]*.py"))]
        elif part.startswith("case:"):
            cases = shared_cases_dir()
            hits = sorted(cases.glob(f"{part[5:]}*.py")) if cases else []
            if not hits:
                raise SystemExit(f"benchmarks: no shared case matches {part!r}")
            rows += [Row(f"case:{p.stem}", str(p), "file") for p in hits]
        elif part.startswith("hf:") or part in PAPER:
            name = part[3:] if part.startswith("hf:") else part
            rows.append(Row(f"hf:{name}", f"hf:{name}", "hf"))
        elif part.endswith(".py") and Path(part).is_file():
            rows.append(Row(f"file:{Path(part).resolve()}", str(Path(part).resolve()), "file"))
        else:
            raise SystemExit(f"benchmarks: unknown row {part!r} (paper, cases, all, hf:NAME, case:PREFIX, FILE.py)")
    seen, out = set(), []
    for r in rows:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


# ----------------------------------------------------------------------------------------
# fresh processes


@dataclass
class Proc:
    rc: int
    wall_s: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    t0: float            # perf_counter just before the spawn
    timed_out: bool = False
    cpu_s: float = 0.0   # user + system CPU time of the process and its waited-for descendants
    foreign_cpu_s: float | None = None  # CPU time the rest of the machine used meanwhile


def _busy_s() -> float | None:
    """CPU seconds all CPUs spent busy since boot (/proc/stat), steal included."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq = f[:7]
    steal = f[7] if len(f) > 7 else 0
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run_proc(cmd: list[str], env: dict | None = None, timeout: float = 900.0, cwd: Path = REPO) -> Proc:
    """Spawn ``cmd`` in its own process group; wall time and peak RSS (wait4's ru_maxrss:
    the largest of the process and the descendants it waited for)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        busy0 = _busy_s()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(cwd), start_new_session=True)
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)  # our own child's group
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        busy1 = _busy_s()
        cpu = ru.ru_utime + ru.ru_stime
        foreign = max(0.0, busy1 - busy0 - cpu) if busy0 is not None and busy1 is not None else None
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Proc(p.returncode, wall, ru.ru_maxrss / 1024.0, out.read(), err.read(), t0, timed_out, cpu, foreign)


def child_env(cfg: Config, cache_dir: Path | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONWARNINGS"] = "ignore"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["TRANSFORMERS_VERBOSITY"] = "error"
    if cfg.device == "cpu" and cfg.threads:
        env["OMP_NUM_THREADS"] = str(cfg.threads)
        env["MKL_NUM_THREADS"] = str(cfg.threads)
    if cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
        env["TRITON_CACHE_DIR"] = str(cache_dir / "triton")
        env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "1"
        env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "1"
    return env


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:400] if lines else "(no output)"


# ----------------------------------------------------------------------------------------
# mend's side: scan, fix, counts


def _mend_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mend.cli", *args]


def verify_levels() -> tuple[str, list[str]]:
    """(default level, the other levels) of ``mend fix --verify``, from its --help;
    ("default", []) when the installed mend has no such option."""
    p = subprocess.run(_mend_cmd("fix", "--help"), capture_output=True, text=True, cwd=str(REPO))
    text = " ".join(p.stdout.split())
    m = re.search(r"--verify \[([A-Za-z0-9_|-]+)\]", text)
    if not m:
        return "default", []
    levels = m.group(1).split("|")
    d = re.search(r"--verify \[[^\]]*\].*?\[default: ([A-Za-z0-9_-]+)\]", text)
    default = d.group(1) if d and d.group(1) in levels else "default"
    return default, [lv for lv in levels if lv != default]


def _fix(row: Row, cfg: Config, out: Path, env: dict, level: str | None = None) -> tuple[dict, dict | None, str]:
    """One timed ``mend fix ROW --out OUT --json [--verify LEVEL]``: (cost, JSON or None, stderr tail)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = _mend_cmd("fix", row.spec, "--out", str(out), "--json") + (["--verify", level] if level else []) + \
        (["--unsafe-fixes"] if cfg.unsafe_fixes else [])
    p = run_proc(cmd, env=env, timeout=cfg.proc_timeout_s)
    cost = {"wall_s": p.wall_s, "peak_rss_mb": p.peak_rss_mb, "rc": p.rc, "cpu_s": p.cpu_s,
            "foreign_cpu_s": p.foreign_cpu_s}
    doc = None
    if p.rc == 0:
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            pass
    if doc is not None:
        cost["breaks_after"] = doc["after"]["graph_break_count"]
        cost["rewrites"] = len(doc.get("rewrites", []))
    return cost, doc, _last_line(p.stderr)


def measure_levels(row: Row, prep: dict, cfg: Config, work: Path, levels: list[str]) -> None:
    """Time ``mend fix --verify LEVEL`` for each non-default level (mend's cost per level)."""
    env = child_env(cfg, None)
    for level in levels:
        out = work / row.slug / f"mended-{level}"
        cost, doc, err = _fix(row, cfg, out, env, level)
        cost["level"] = level
        prep["mend_cost"][f"fix --verify {level}"] = cost
        if doc is None:
            prep["errors"].append(f"mend fix --verify {level} failed (rc {cost['rc']}): {err}")
        shutil.rmtree(out, ignore_errors=True)


def prepare_row(row: Row, cfg: Config, work: Path, levels: list[str] = (), default_level: str = "default") -> dict:
    """Scan and fix ``row`` (and time the other verification ``levels``); the mended
    sources (default level) land under ``work/<slug>/mended``."""
    rdir = work / row.slug
    rdir.mkdir(parents=True, exist_ok=True)
    env = child_env(cfg, None)
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1")
    res: dict = {"row": row.key, "spec": row.spec, "kind": row.kind, "mend_cost": {}, "errors": []}

    p = run_proc(_mend_cmd("scan", row.spec, "--json"), env=env, timeout=cfg.proc_timeout_s)
    res["mend_cost"]["scan"] = {"wall_s": p.wall_s, "peak_rss_mb": p.peak_rss_mb, "rc": p.rc, "cpu_s": p.cpu_s,
                                "foreign_cpu_s": p.foreign_cpu_s}
    scan_doc = None
    if p.rc in (0, 1):
        scan_doc = json.loads(p.stdout)
    else:
        res["errors"].append(f"mend scan failed (rc {p.rc}): {_last_line(p.stderr)}")

    mended = rdir / "mended"
    cost, fix_doc, err = _fix(row, cfg, mended, env)
    res["mend_cost"]["fix"] = {**cost, "level": default_level}
    if fix_doc is None:
        res["errors"].append(f"mend fix failed (rc {cost['rc']}): {err}")
    if levels:
        measure_levels(row, res, cfg, work, list(levels))

    files = sorted(str(f.relative_to(mended)) for f in mended.rglob("*.py")) if mended.is_dir() else []
    code = "".join((mended / f).read_text() for f in files)
    res["mended_files"] = files
    res["mended_dir"] = str(mended) if files else None
    res["uses_runtime"] = "mend.runtime" in code
    res["uses_validation_runtime"] = "_MEND_TRAPS" in code or "mend-trap" in code
    res["counts"] = counts_from(scan_doc, fix_doc)
    if fix_doc is not None:
        res["rewrites"] = [{"rule": r["rule"], "site": r["site"], "safety": (r.get("safety") or {}).get("label"),
                            "choice": _choice(r.get("choice")), "mechanism": _mechanism(r)}
                           for r in fix_doc.get("rewrites", [])]
        res["declined"] = [{"rule": d.get("rule"), "site": d.get("site") or f"{d.get('file')}:{d.get('line')}",
                            "reason": d.get("reason"), "safety": d.get("safety"), "choice": _choice(d.get("choice"))}
                           for d in fix_doc.get("declined", [])]
        # the breaks left after the fix, with mend's own reason for each (why no rule applies)
        res["remaining_sites"] = [{k: s.get(k) for k in ("file", "line", "function", "source", "category", "count",
                                                          "fixable_by", "reason", "frame_skipped")}
                                  for s in fix_doc["after"].get("sites", [])]
    if cfg.scan_mended and res["mended_dir"]:
        res["scan_mended"] = scan_with_overlay(row, res["mended_dir"], cfg, env)
        res["counts"]["after_scan_agrees"] = (res["scan_mended"] or {}).get("graph_break_count") == res["counts"].get("breaks_after")
    return res


def _mechanism(rewrite: dict) -> str | None:
    """How a deferred-effect rewrite defers: "replay" (after the graph call, an ordinary graph)
    or "ordered" (mend::capture, ordered with a check; that graph bypasses the FX graph cache)."""
    return next((o["mechanism"] for o in rewrite.get("obligations", []) if o.get("mechanism")), None)


def mechanisms_line(rows: list[dict]) -> str | None:
    """How often the catalogue needed the ordered (uncacheable) form, in words."""
    counts = {"replay": 0, "ordered": 0}
    ordered_rows = []
    for r in rows:
        for x in r.get("rewrites") or []:
            if x.get("mechanism") in counts:
                counts[x["mechanism"]] += 1
                if x["mechanism"] == "ordered" and r["row"] not in ordered_rows:
                    ordered_rows.append(r["row"])
    if not sum(counts.values()):
        return None
    return (f"Deferred-effect rewrites: {counts['replay']} replayed after the graph call (an ordinary, cacheable "
            f"graph), {counts['ordered']} ordered with a check that follows (mend::capture: that graph bypasses "
            f"the FX graph cache)" + (f", on {', '.join(ordered_rows)}" if ordered_rows else "") + ".")


def _choice(choice: dict | None) -> dict | None:
    """The cost model's choice at a branch site, as the benchmark records it."""
    return None if not choice else {"chosen": choice.get("chosen"), "method": choice.get("method")}


def choices_cell(r: dict) -> str:
    """The chosen candidates of a row's branch sites (keep / where / cond, by method), or
    a dash when no branch site was rewritten or kept (or the run predates the cost model)."""
    picks = [x["choice"] for x in (r.get("rewrites") or []) + (r.get("declined") or []) if x.get("choice")]
    if not picks:
        return "—"
    counts: dict[str, int] = {}
    for c in picks:
        key = f"{c['chosen']} ({c['method']})"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(counts.items()))


def scan_with_overlay(row: Row, mended_dir: str, cfg: Config, env: dict) -> dict | None:
    """``mend scan`` of the mended model (hf rows: overlay; file rows: the mended file)."""
    if row.kind == "hf":
        code = ("import sys; from mend.overlay import activate; activate(sys.argv[1]); "
                "from mend.cli import main; main(['scan', sys.argv[2], '--json'])")
        cmd = [sys.executable, "-c", code, mended_dir, row.spec]
    else:
        cmd = _mend_cmd("scan", str(Path(mended_dir) / Path(row.spec).name), "--json")
    p = run_proc(cmd, env=env, timeout=cfg.proc_timeout_s)
    if p.rc not in (0, 1):
        return None
    doc = json.loads(p.stdout)
    return {"graph_count": doc["graph_count"], "graph_break_count": doc["graph_break_count"],
            "fixable_break_count": doc.get("fixable_break_count"), "wall_s": p.wall_s}


def counts_from(scan_doc: dict | None, fix_doc: dict | None) -> dict:
    c: dict = {}
    if scan_doc is not None:
        c.update(scan_graphs=scan_doc["graph_count"], scan_breaks=scan_doc["graph_break_count"],
                 scan_fixable=scan_doc.get("fixable_break_count"))
    if fix_doc is not None:
        b, a = fix_doc["before"], fix_doc["after"]
        c.update(graphs_before=b["graph_count"], graphs_after=a["graph_count"],
                 steady_before=b.get("steady_graph_count"), steady_after=a.get("steady_graph_count"),
                 unsafe_rewrites=sum(1 for r in fix_doc.get("rewrites", []) if (r.get("safety") or {}).get("label")
                                     == "unsafe"),
                 withheld=sum(1 for d in fix_doc.get("declined", []) if d.get("safety")),
                 breaks_before=b["graph_break_count"], breaks_after=a["graph_break_count"],
                 fixable=b.get("fixable_break_count", sum(s["count"] for s in b["sites"] if s.get("fixable_by"))),
                 rewrites=len(fix_doc.get("rewrites", [])), declined=len(fix_doc.get("declined", [])))
        c["fixed"] = c["breaks_before"] - c["breaks_after"]
        c["fully_fixed"] = c["breaks_after"] == 0
        c["fixed_pct"] = 100.0 * c["fixed"] / c["breaks_before"] if c["breaks_before"] else None
        if scan_doc is not None:
            c["scan_agrees"] = (scan_doc["graph_break_count"] == c["breaks_before"]
                                and scan_doc["graph_count"] == c["graphs_before"])
    return c


# ----------------------------------------------------------------------------------------
# benchmark processes (parent side)


def _request(row: Row, prep: dict, variant: str, cfg: Config, steady: bool, out: Path, save_output: Path | None) -> dict:
    mended = variant == "mended"
    return {
        "kind": row.kind, "name": row.name if row.kind == "hf" else None,
        "path": (str(Path(prep["mended_dir"]) / Path(row.spec).name) if mended else row.spec) if row.kind == "file" else None,
        "overlay": prep["mended_dir"] if mended and row.kind == "hf" else None,
        "install_runtime": bool(mended and prep.get("uses_runtime") and cfg.install_runtime),
        "install_validation_runtime": bool(mended and prep.get("uses_validation_runtime")),
        "device": cfg.device, "backend": cfg.backend, "mode": cfg.mode, "threads": cfg.threads,
        "steady": steady, "warmup": cfg.warmup, "iters": cfg.iters, "max_timed_s": cfg.max_timed_s,
        "batch_sizes": list(cfg.batch_sizes), "out": str(out),
        "save_output": str(save_output) if save_output else None,
    }


def run_bench_proc(row: Row, prep: dict, variant: str, cfg: Config, cache_dir: Path, steady: bool,
                   tag: str, save_output: Path | None = None, timeout: float | None = None) -> dict:
    """One fresh process: cold start (+ steady state and throughput when ``steady``)."""
    rdir = Path(prep["_work"])
    req_path, out_path = rdir / f"{tag}.req.json", rdir / f"{tag}.out.json"
    req_path.write_text(json.dumps(_request(row, prep, variant, cfg, steady, out_path, save_output)))
    cache_dir.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    p = run_proc([sys.executable, str(HERE / "_harness.py"), "child", str(req_path)], env=child_env(cfg, cache_dir),
                 timeout=timeout or cfg.proc_timeout_s)
    rec: dict = {"variant": variant, "tag": tag, "rc": p.rc, "process_wall_s": p.wall_s, "peak_rss_mb": p.peak_rss_mb,
                 "loadavg_1m_before": load0, "cpu_s": p.cpu_s, "foreign_cpu_s": p.foreign_cpu_s,
                 "foreign_cores": p.foreign_cpu_s / p.wall_s if p.foreign_cpu_s is not None and p.wall_s else None}
    if p.rc != 0 or not out_path.is_file():
        rec["error"] = ("timed out" if p.timed_out else f"rc {p.rc}") + f": {_last_line(p.stderr)}"
        return rec
    doc = json.loads(out_path.read_text())
    ts = doc.pop("timestamps")
    rec["cold_start_s"] = ts["first_call_done"] - p.t0
    rec["phases_s"] = {"interpreter_start": ts["script_start"] - p.t0,
                       "imports": ts["imported"] - ts["script_start"],
                       "build": ts["built"] - ts["imported"],
                       "first_call": ts["first_call_done"] - ts["built"]}
    rec.update(doc)
    return rec


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize(rec_list: list[dict]) -> dict:
    ok = [r for r in rec_list if "cold_start_s" in r]
    return {"n": len(ok), "median_s": _median([r["cold_start_s"] for r in ok]),
            "all_s": [r["cold_start_s"] for r in ok],
            "median_phases_s": {k: _median([r["phases_s"][k] for r in ok]) for k in
                                ("interpreter_start", "imports", "build", "first_call")} if ok else None,
            "peak_rss_mb": _median([r["peak_rss_mb"] for r in ok]),
            "first_call_events": [r.get("first_call_events") for r in ok],
            "errors": [r["error"] for r in rec_list if "error" in r]}


def compare_outputs(a: Path, b: Path) -> dict | None:
    if not (a.is_file() and b.is_file()):
        return None
    import torch

    ta, tb = torch.load(a, weights_only=False), torch.load(b, weights_only=False)
    if len(ta) != len(tb):
        return {"same_structure": False}
    worst, ok = 0.0, True
    for x, y in zip(ta, tb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return {"same_structure": False}
        if x.is_floating_point():
            d = (x.double() - y.double()).abs()
            d = d[torch.isfinite(d)]
            worst = max(worst, float(d.max()) if d.numel() else 0.0)
            tol = 1e-2 if x.dtype in (torch.float16, torch.bfloat16) else 1e-4
            ok = ok and bool(torch.allclose(x.double(), y.double(), rtol=tol, atol=tol, equal_nan=True))
        else:
            ok = ok and bool(torch.equal(x, y))
    return {"same_structure": True, "tensors": len(ta), "max_abs_diff": worst, "allclose": ok}


# ----------------------------------------------------------------------------------------
# the run


def machine_info(cfg: Config) -> dict:
    info = {"platform": platform.platform(), "machine": platform.machine(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "hostname_hash": hash(platform.node()) & 0xFFFF}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_total_gb"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    from importlib import metadata

    for pkg in ("torch", "transformers", "graphmend"):
        try:
            info[f"{pkg}_version"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            info[f"{pkg}_version"] = None
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=str(REPO)).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True, cwd=str(REPO)).stdout.strip()
        info["git_commit"], info["git_dirty"] = rev or None, bool(dirty)
    except OSError:
        pass
    info["intra_op_threads"] = cfg.threads
    return info


def _row_measure_plan(cfg: Config) -> tuple[list, list]:
    """(first, extra): lists of (cache, rep) pairs, each run for the original then the mended
    model. ``first`` runs with each row's scan and fix: one cold-cache process per variant,
    which also measures steady state and throughput. ``extra`` runs afterwards, round-robin
    over the rows, while the budget lasts: two warm-cache processes (cheap), then (added in
    run()) the other verification levels of mend fix, the remaining warm-cache processes,
    then the further cold-cache ones."""
    first = [("cold", 0)] if cfg.cold_procs > 0 else []
    extra = [("warm", rep) for rep in range(cfg.warm_procs)] if first else []
    extra += [("cold", rep) for rep in range(1, cfg.cold_procs)]
    return first, extra


def run(rows: list[Row], cfg: Config, prepared: dict | None = None, log=print, extra_notes: list[str] = (),
        extra_doc: dict | None = None) -> dict:
    """Measure every row; write ``<out>/<name>.json``, ``.md`` and the plots; return the document.

    ``prepared`` maps row keys to prepare_row() results made elsewhere (the GPU run takes
    them from a CPU machine); otherwise each row is scanned and fixed here. With a budget,
    a row whose first measurements would not fit is skipped, and so is any further
    repetition; the document says which.
    """
    t_start = time.perf_counter()
    deadline = t_start + cfg.budget_s if cfg.budget_s else None
    work_ctx = None
    if cfg.keep_work:
        work = Path(cfg.keep_work)
        work.mkdir(parents=True, exist_ok=True)
    else:
        work_ctx = tempfile.TemporaryDirectory(prefix="mend-bench-")
        work = Path(work_ctx.name)
    doc = {"schema_version": SCHEMA_VERSION, "config": asdict(cfg), "machine": machine_info(cfg),
           "loadavg_start": os.getloadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "rows": [],
           "notes": list(extra_notes)}
    if cfg.device == "cpu" and os.getloadavg()[0] > 0.7 * (os.cpu_count() or 1):
        doc["notes"].append(f"the machine was busy when the run started (1-min load {os.getloadavg()[0]:.2f} on "
                            f"{os.cpu_count()} CPUs): timings are contaminated")
    default_level, levels = verify_levels() if prepared is None else ("default", [])
    levels = levels if cfg.verify_levels else []
    doc["verify_levels"] = {"default": default_level, "timed_too": levels}
    doc.update(extra_doc or {})
    try:
        results = {}
        first, extra = _row_measure_plan(cfg)
        row_cost: list[float] = []
        # pass 1: counts, mend's cost, and one cold-cache process per variant (+ steady state)
        for row in rows:
            t_row = time.perf_counter()
            if deadline and row_cost and time.perf_counter() + statistics.mean(row_cost) > deadline:
                log(f"[{row.key}] skipped: the budget ({cfg.budget_s:.0f} s) would be exceeded")
                results[row.key] = {"row": row.key, "skipped": "budget: not measured", "errors": []}
                continue
            if prepared is not None and row.key not in prepared:
                results[row.key] = {"row": row.key, "skipped": "not in the prepared bundle", "errors": []}
                continue
            log(f"[{row.key}] scan + fix ..." if prepared is None else f"[{row.key}] from the bundle")
            prep = dict(prepared[row.key]) if prepared else prepare_row(row, cfg, work, (), default_level)
            (work / row.slug).mkdir(parents=True, exist_ok=True)
            prep["_work"] = str(work / row.slug)
            prep["measurements"] = {"cold": {"original": [], "mended": []}, "warm": {"original": [], "mended": []}}
            results[row.key] = prep
            c = prep.get("counts", {})
            log(f"[{row.key}] breaks {c.get('breaks_before')} -> {c.get('breaks_after')}; "
                f"scan {prep['mend_cost'].get('scan', {}).get('wall_s', 0):.1f} s, "
                f"fix {prep['mend_cost'].get('fix', {}).get('wall_s', 0):.1f} s")
            if not first:
                prep["not_timed"] = "counts only: no timing was asked for"
                row_cost.append(time.perf_counter() - t_row)
                continue
            if not prep.get("mended_dir"):
                prep["not_timed"] = "mend fix emitted no verified rewrite: the mended model is the original"
                log(f"[{row.key}] not timed: {prep['not_timed']}")
                row_cost.append(time.perf_counter() - t_row)
                continue
            for cache, rep in first:
                for variant in ("original", "mended"):
                    _measure(row, prep, cfg, work, cache, variant, rep, log, deadline)
            row_cost.append(time.perf_counter() - t_row)
        # pass 2, round-robin over the rows while the budget lasts: warm-cache processes, the
        # other verification levels of mend fix, more warm-cache and cold-cache processes
        if levels:
            extra.insert(sum(1 for c, _ in extra[:2] if c == "warm"), ("levels", 0))
        for cache, rep in extra:
            for row in rows:
                prep = results[row.key]
                if cache == "levels":
                    if "mend_cost" not in prep or prepared is not None:
                        continue
                    est = prep["mend_cost"]["fix"]["wall_s"] * len(levels) + 5.0
                    if deadline and time.perf_counter() + est > deadline:
                        prep.setdefault("skipped_repetitions", []).append("fix --verify " + "/".join(levels))
                        continue
                    log(f"[{row.key}] mend fix --verify {', '.join(levels)} ...")
                    measure_levels(row, prep, cfg, work, levels)
                    continue
                if "measurements" not in prep or prep.get("not_timed"):
                    continue
                if cache == "warm" and not all(prep["measurements"]["cold"][v] and "error" not in prep["measurements"]["cold"][v][0]
                                               for v in ("original", "mended")):
                    continue
                est = _estimate(prep, cache, "original") + _estimate(prep, cache, "mended")
                if deadline and time.perf_counter() + est > deadline:
                    prep.setdefault("skipped_repetitions", []).append(f"{cache}-cache #{rep}")
                    continue
                for variant in ("original", "mended"):
                    _measure(row, prep, cfg, work, cache, variant, rep, log, deadline)
        for row in rows:
            doc["rows"].append(_finish_row(results[row.key], cfg))
        names = {rec.get("device_name") for r in results.values() for c in (r.get("measurements") or {}).values()
                 for recs in c.values() for rec in recs if rec.get("device_name")}
        if names:
            doc["device_name"] = ", ".join(sorted(names))
    finally:
        doc["loadavg_end"] = os.getloadavg()
        doc["wall_s"] = time.perf_counter() - t_start
        if work_ctx is not None:
            work_ctx.cleanup()
    foreign = [rec["foreign_cores"] for r in doc["rows"] for c in (r.get("raw") or {}).values() for recs in c.values()
               for rec in recs if rec.get("foreign_cores") is not None]
    if foreign:
        doc["foreign_cores_max"] = max(foreign)
        doc["foreign_cores_median"] = statistics.median(foreign)
        if cfg.device == "cpu" and max(foreign) > 0.25:
            doc["notes"].append(f"other processes used CPU during the measurements (on average over a process: up to "
                                f"{max(foreign):.2f} cores, median {statistics.median(foreign):.2f}; from /proc/stat "
                                "minus the benchmark's own CPU time): those timings are contaminated")
    if any(r.get("skipped_repetitions") or r.get("skipped") for r in doc["rows"]):
        doc["notes"].append("some measurements were skipped to stay within the budget "
                            f"({cfg.budget_s / 60:.0f} min): each row's n says how many processes it got")
    write_results(doc, cfg)
    return doc


def _estimate(prep: dict, cache: str, variant: str) -> float:
    """Seconds one more process of this kind is expected to take (the slowest so far)."""
    recs = prep["measurements"][cache][variant] or prep["measurements"]["cold"][variant]
    walls = [r.get("cold_start_s", r["process_wall_s"]) + 2.0 for r in recs]
    return max(walls) if walls else 60.0


def _measure(row: Row, prep: dict, cfg: Config, work: Path, cache: str, variant: str, rep: int, log,
             deadline: float | None = None) -> None:
    rdir = work / row.slug
    if cache == "cold":
        cache_dir = rdir / f"cache-{variant}-cold{rep}"
        steady = rep == 0
    else:
        cache_dir = rdir / f"cache-{variant}-cold0"  # filled by the first cold-cache process
        steady = rep < cfg.steady_procs - 1
        if not prep["measurements"]["cold"][variant] or "error" in prep["measurements"]["cold"][variant][0]:
            return
    save = rdir / f"output-{variant}.pt" if (cache == "cold" and rep == 0) else None
    timeout = cfg.proc_timeout_s
    if deadline is not None:  # a hung process must not carry the run past its budget
        timeout = max(60.0, min(timeout, deadline - time.perf_counter() + 60.0))
    rec = run_bench_proc(row, prep, variant, cfg, cache_dir, steady, f"{variant}-{cache}{rep}", save, timeout)
    prep["measurements"][cache][variant].append(rec)
    if "error" in rec:
        log(f"[{row.key}] {variant} {cache}-cache #{rep}: ERROR {rec['error']}")
    else:
        extra = ""
        if steady and rec.get("steady"):
            extra = f", steady {rec['steady']['median_s'] * 1e3:.2f} ms"
        log(f"[{row.key}] {variant:8s} {cache}-cache #{rep}: cold start {rec['cold_start_s']:.2f} s "
            f"(first call {rec['phases_s']['first_call']:.2f} s){extra}")
    if cache == "cold" and rep > 0:
        shutil.rmtree(cache_dir, ignore_errors=True)


def _finish_row(prep: dict, cfg: Config) -> dict:
    out = {k: v for k, v in prep.items() if not k.startswith("_") and k not in ("measurements", "mended_dir")}
    out["paper"] = PAPER.get(prep["row"][3:]) if prep["row"].startswith("hf:") else None
    m = prep.get("measurements")
    if not m or prep.get("not_timed"):
        return out
    work = Path(prep["_work"])
    out["raw"] = m
    s = {}
    for cache in ("cold", "warm"):
        s[cache] = {v: summarize(m[cache][v]) for v in ("original", "mended")}
        s[cache]["ratio"] = _ratio(s[cache]["original"]["median_s"], s[cache]["mended"]["median_s"])
    out["cold_start"] = s
    first = {v: (m["cold"][v][0] if m["cold"][v] else {}) for v in ("original", "mended")}
    st = {v: first[v].get("steady") for v in ("original", "mended")}
    # with several steady-state processes (--steady-procs): the median of their medians, so
    # one process's placement on the cores does not decide the ratio
    procs = {v: [r["steady"]["median_s"] for c in ("cold", "warm") for r in m[c][v] if (r.get("steady") or {})
                 .get("median_s")] for v in ("original", "mended")}
    if all(len(p) > 1 for p in procs.values()):
        st = {v: {**(st[v] or {}), "median_s": statistics.median(procs[v]), "process_medians_s": procs[v],
                  "n_procs": len(procs[v])} for v in ("original", "mended")}
    out["steady_state"] = {**st, "ratio": _ratio((st["original"] or {}).get("median_s"),
                                                  (st["mended"] or {}).get("median_s"))}
    if all(len(p) > 1 for p in procs.values()):
        pairs = [o / n for o, n in zip(procs["original"], procs["mended"]) if n]
        out["steady_state"]["pair_ratios"] = pairs
    tp = {}
    for b in cfg.batch_sizes:
        o = (first["original"].get("throughput") or {}).get(str(b))
        n = (first["mended"].get("throughput") or {}).get(str(b))
        tp[str(b)] = {"original": o, "mended": n,
                      "ratio": _ratio((n or {}).get("samples_per_s"), (o or {}).get("samples_per_s"))}
    out["throughput"] = tp
    out["output_agreement"] = compare_outputs(work / "output-original.pt", work / "output-mended.pt")
    # Dynamo's graph count in the benchmark processes, against mend's scans
    c = out.get("counts", {})
    for v, key in (("original", "graphs_before"), ("mended", "graphs_after")):
        ev = (first[v].get("first_call_events") or {})
        if ev.get("unique_graphs") is not None and c.get(key) is not None:
            c[f"dynamo_graphs_{v}"] = ev["unique_graphs"]
            c[f"dynamo_graphs_{v}_agrees"] = ev["unique_graphs"] == c[key]
    return out


# ----------------------------------------------------------------------------------------
# results: JSON + Markdown (+ plots, benchmarks/plot.py)


def write_results(doc: dict, cfg: Config) -> None:
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{cfg.name}.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / f"{cfg.name}.md").write_text(markdown(doc))
    try:
        sys.path.insert(0, str(HERE))
        import plot

        doc["plots"] = plot.plot_all(doc, out, cfg.name)
    except ImportError as exc:
        doc["plots"] = []
        print(f"benchmarks: no plots ({exc}); pip install '.[bench]'", file=sys.stderr)
    finally:
        if sys.path and sys.path[0] == str(HERE):
            sys.path.pop(0)


def _label(key: str) -> str:
    return f"file:{Path(key[5:]).name}" if key.startswith("file:") else key


def _f(x, fmt="{:.2f}", none="—"):
    return none if x is None else fmt.format(x)


def _ev(rec_or_phase: dict | None) -> str:
    """recompiles/guard failures/eager fallbacks during the timed calls."""
    if not rec_or_phase:
        return "—"
    e = rec_or_phase.get("timed_events") or rec_or_phase.get("first_call_events") or {}
    if not e:
        return "—"
    s = f"{e.get('recompiles', 0)}/{e.get('guard_failures', 0)}/{e.get('eager_fallback_frames', 0)}"
    calls = (rec_or_phase.get("n") or 0)
    if e.get("frames_processed") and "timed_events" in rec_or_phase:
        s += f" ({e['frames_processed'] / calls if calls else e['frames_processed']:.0f} frame/call seen by Dynamo)"
    if e.get("cudagraph_skips"):
        s += f" cg-skip {e['cudagraph_skips']}"
    return s


def _cold_ev(summary: dict) -> str:
    evs = [e for e in summary.get("first_call_events", []) if e]
    if not evs:
        return "—"
    keys = ("recompiles", "guard_failures", "eager_fallback_frames")
    return "/".join(str(max(e.get(k, 0) for e in evs)) for k in keys)


def _cache(summary: dict) -> str:
    """FX graph cache hits / misses / bypasses in the first call of the first process."""
    evs = [e for e in summary.get("first_call_events", []) if e]
    if not evs:
        return "—"
    e = evs[0]
    return f"{e.get('fxgraph_cache_hit', 0)}/{e.get('fxgraph_cache_miss', 0)}/{e.get('fxgraph_cache_bypass', 0)}"


def markdown(doc: dict) -> str:
    cfg, mach = doc["config"], doc["machine"]
    L = [f"# mend benchmark: {cfg['name']} ({cfg['device']}, backend {cfg['backend']}"
         + (f", mode {cfg['mode']}" if cfg.get("mode") else "") + ")", ""]
    L.append(f"Run {doc['started']}, {doc['wall_s'] / 60:.1f} min. Machine: {mach.get('cpu_model', '?')}, "
             f"{mach.get('cpu_count')} CPUs, {mach.get('mem_total_gb')} GB; {mach.get('platform')}; Python "
             f"{mach.get('python')}, torch {mach.get('torch_version')}, transformers {mach.get('transformers_version')}, "
             f"mend {mach.get('graphmend_version')} ({(mach.get('git_commit') or '?')[:10]}"
             f"{', dirty tree' if mach.get('git_dirty') else ''}). Intra-op threads: {cfg.get('threads')}. "
             f"1-min load average at start / end: {doc['loadavg_start'][0]:.2f} / {doc['loadavg_end'][0]:.2f}.")
    if doc.get("device_name"):
        L.append(f"Device: {doc['device_name']}.")
    L.append("")
    for n in doc.get("notes", []):
        L.append(f"**Note:** {n}")
        L.append("")
    L += ["Ratios are original / mended time (> 1: mended is faster). `ev` = recompiles / guard failures / "
          "frames that fell back to eager during the timed calls (for cold start: during the first call, worst "
          "process). See benchmarks/README.md for exactly what is measured.", ""]

    L += ["## Graph breaks: ours beside the paper's", "",
          "| row | paper row | paper breaks | paper % fixed | graphs before → after | breaks before → after | "
          "fixable | fixed | fully fixed | % fixed | agrees with `mend scan` | Dynamo graphs orig / mended |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        c, p = r.get("counts", {}), r.get("paper") or {}
        agree = {True: "yes", False: "**no**", None: "—"}[c.get("scan_agrees")]
        dg = (f"{_f(c.get('dynamo_graphs_original'), '{}')} / {_f(c.get('dynamo_graphs_mended'), '{}')}"
              + ("" if c.get("dynamo_graphs_original_agrees", True) and c.get("dynamo_graphs_mended_agrees", True)
                 else " (differs)"))
        L.append(f"| {_label(r['row'])} | {p.get('row', '—')} | {_f(p.get('breaks'), '{}')} | {_f(p.get('fixed_pct'), '{}%')} | "
                 f"{_f(c.get('graphs_before'), '{}')} → {_f(c.get('graphs_after'), '{}')} | "
                 f"{_f(c.get('breaks_before'), '{}')} → {_f(c.get('breaks_after'), '{}')} | {_f(c.get('fixable'), '{}')} | "
                 f"{_f(c.get('fixed'), '{}')} | {'yes' if c.get('fully_fixed') else ('no' if c else '—')} | "
                 f"{_f(c.get('fixed_pct'), '{:.0f}%')} | {agree} | {dg} |")
    notes = [(r["row"], r["paper"]["note"]) for r in doc["rows"] if (r.get("paper") or {}).get("note")]
    if notes:
        L.append("")
        L += [f"* {_label(row)}: {note}." for row, note in notes]
    L += ["", "The paper's cold-start ratios are not in this project's notes, so no column for them is filled.", ""]

    mech = mechanisms_line(doc["rows"])
    L += ["## Cold start (fresh process: imports, build, torch.compile, first call)", "",
          *([mech, ""] if mech else []),
          "| row | cold cache: original s | mended s | ratio | n | ev | warm cache: original s | mended s | ratio | n | ev | "
          "warm: FX graph cache hit/miss/bypass orig; mended | first call (compile) orig / mended s, cold cache |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        cs = r.get("cold_start")
        if not cs:
            L.append(f"| {_label(r['row'])} | {r.get('not_timed') or r.get('skipped') or '—'} ||||||||||||")
            continue
        c, w = cs["cold"], cs["warm"]
        fc = [((c[v].get("median_phases_s") or {}).get("first_call")) for v in ("original", "mended")]
        L.append(f"| {_label(r['row'])} | {_f(c['original']['median_s'])} | {_f(c['mended']['median_s'])} | **{_f(c['ratio'])}** | "
                 f"{c['original']['n']}/{c['mended']['n']} | {_cold_ev(c['original'])}; {_cold_ev(c['mended'])} | "
                 f"{_f(w['original']['median_s'])} | {_f(w['mended']['median_s'])} | **{_f(w['ratio'])}** | "
                 f"{w['original']['n']}/{w['mended']['n']} | {_cold_ev(w['original'])}; {_cold_ev(w['mended'])} | "
                 f"{_cache(w['original'])}; {_cache(w['mended'])} | {_f(fc[0])} / {_f(fc[1])} |")
    L.append("")

    bs = [str(b) for b in cfg["batch_sizes"]]
    L += ["## Steady state and throughput (after warm-up)", "",
          "`chosen` = the candidate the cost model chose at each branch site (keep the break, torch.where, "
          "torch.cond; mend/cost), beside the measured steady-state ratio of the whole model.", "",
          "| row | chosen | steady orig ms | mended ms | ratio | ev orig; mended | "
          + " | ".join(f"B={b} orig / mended samples/s | ratio | ev" for b in bs) + " | outputs agree (max abs diff) |",
          "|---|---|---|---|---|---|" + "---|---|---|" * len(bs) + "---|"]
    for r in doc["rows"]:
        st = r.get("steady_state")
        if not st:
            continue
        o, m = st.get("original") or {}, st.get("mended") or {}
        ms = lambda d: _f(d["median_s"] * 1e3, "{:.3f}") if d.get("median_s") else "—"
        spread = (f" (n={o.get('n_procs')}; per pair {min(st['pair_ratios']):.2f}-{max(st['pair_ratios']):.2f})"
                  if st.get("pair_ratios") else "")
        cells = [choices_cell(r), ms(o), ms(m), f"**{_f(st.get('ratio'))}**{spread}", f"{_ev(o)}; {_ev(m)}"]
        for b in bs:
            t = r["throughput"].get(b) or {}
            to, tm = t.get("original") or {}, t.get("mended") or {}
            cells += [f"{_f(to.get('samples_per_s'), '{:.1f}')} / {_f(tm.get('samples_per_s'), '{:.1f}')}",
                      f"**{_f(t.get('ratio'))}**", f"{_ev(to)}; {_ev(tm)}"]
        agr = r.get("output_agreement") or {}
        cells.append("—" if not agr else ("yes" if agr.get("allclose") else "**no**")
                     + (f" ({agr['max_abs_diff']:.1e})" if "max_abs_diff" in agr else ""))
        L.append(f"| {_label(r['row'])} | " + " | ".join(cells) + " |")
    L.append("")

    dl = (doc.get("verify_levels") or {}).get("default", "default")
    L += ["## mend's own cost (fresh process each; peak = largest RSS of the process or a worker it ran)", "",
          f"| row | scan s | scan peak MB | fix s (--verify {dl}, the default) | fix peak MB | other verification levels: "
          "s / peak MB / breaks after | rewrites | declined |",
          "|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        mc = r.get("mend_cost", {})
        sc, fx = mc.get("scan", {}), mc.get("fix", {})
        lv = ", ".join(f"{k[len('fix --verify '):]}: {v['wall_s']:.1f} s / {v['peak_rss_mb']:.0f} MB / "
                       f"{_f(v.get('breaks_after'), '{}')}"
                       for k, v in mc.items() if k.startswith("fix --verify"))
        lv = lv or ("skipped (budget)" if any(x.startswith("fix --verify") for x in r.get("skipped_repetitions", []))
                    else "not timed")
        L.append(f"| {_label(r['row'])} | {_f(sc.get('wall_s'), '{:.1f}')} | {_f(sc.get('peak_rss_mb'), '{:.0f}')} | "
                 f"{_f(fx.get('wall_s'), '{:.1f}')} | {_f(fx.get('peak_rss_mb'), '{:.0f}')} | {lv} | "
                 f"{len(r.get('rewrites', []))} | {len(r.get('declined', []))} |")
    errs = [(_label(r["row"]), e) for r in doc["rows"] for e in r.get("errors", [])]
    errs += [(_label(r["row"]), e) for r in doc["rows"] for cache in ("cold", "warm")
             for v in ("original", "mended") for e in ((r.get("cold_start") or {}).get(cache, {}).get(v, {}).get("errors", []))]
    if errs:
        L += ["", "## Errors", ""] + [f"* {row}: {e}" for row, e in errs]
    plots = [f"{cfg['name']}_breaks.png", f"{cfg['name']}_ratios.png"]
    L += ["", "Plots: " + ", ".join(f"[{p}]({p})" for p in plots), ""]
    return "\n".join(L)


# ----------------------------------------------------------------------------------------
# child side: one fresh process


def _flatten(x, out: list) -> list:
    import torch

    if isinstance(x, torch.Tensor):
        out.append(x.detach().cpu())
    elif isinstance(x, dict):
        for v in x.values():
            _flatten(v, out)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    return out


class _Events:
    """Dynamo's bookkeeping, read before and after a phase."""

    def __init__(self):
        import collections

        import torch._dynamo.utils as du

        self.du = du
        if isinstance(getattr(du, "_compilation_metrics", None), collections.deque):
            du._compilation_metrics = collections.deque(du._compilation_metrics, maxlen=1_000_000)

    def snap(self) -> dict:
        du = self.du
        c = du.counters
        metrics = du.get_compilation_metrics() if hasattr(du, "get_compilation_metrics") else []
        return {
            "frames_total": c["frames"]["total"], "frames_ok": c["frames"]["ok"],
            "unique_graphs": c["stats"]["unique_graphs"],
            "compiles": len(metrics),
            "recompiles": sum(1 for m in metrics if getattr(m, "recompile_reason", None)),
            "failed_compiles": sum(1 for m in metrics if getattr(m, "fail_type", None)),
            "guard_failures": sum(len(v) for v in getattr(du, "guard_failures", {}).values()),
            "graph_break_counter": sum(c["graph_break"].values()),
            "fxgraph_cache_hit": c["inductor"]["fxgraph_cache_hit"], "fxgraph_cache_miss": c["inductor"]["fxgraph_cache_miss"],
            "fxgraph_cache_bypass": c["inductor"]["fxgraph_cache_bypass"],
            "aot_cache_hit": c["aot_autograd"]["autograd_cache_hit"], "aot_cache_miss": c["aot_autograd"]["autograd_cache_miss"],
            "aot_cache_bypass": c["aot_autograd"]["autograd_cache_bypass"],
            "cudagraph_skips": c["inductor"]["cudagraph_skips"],
        }

    @staticmethod
    def delta(a: dict, b: dict) -> dict:
        d = {k: b[k] - a[k] for k in a}
        # frames that Dynamo's callback saw (each a cache miss: compiled, skipped or failed) and
        # those whose compile failed, so that they ran eagerly
        d["eager_fallback_frames"] = (b["frames_total"] - b["frames_ok"]) - (a["frames_total"] - a["frames_ok"])
        d["frames_processed"] = d.pop("frames_total")
        d.pop("frames_ok")
        return d


def _build(req: dict):
    import torch

    if req["kind"] == "hf":
        from mend.targets import build_hf  # hf:NAME and hf:newest/NAME (run_newest.py)

        model, args, kwargs = build_hf(req["name"])
        return model, tuple(args), dict(kwargs)
    from mend.targets import load_file_module

    path = Path(req["path"])
    mod = load_file_module(path, "_mend_bench_target")
    init = tuple(mod.get_init_inputs()) if hasattr(mod, "get_init_inputs") else ()
    torch.manual_seed(0)
    model = mod.Model(*init).eval()
    args = mod.get_inputs()
    args = (args,) if isinstance(args, torch.Tensor) else tuple(args)
    return model, args, {}


def _to(x, device):
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _repeat(x, b: int):
    import torch

    if isinstance(x, torch.Tensor):
        return x.repeat(b, *([1] * (x.dim() - 1))) if x.dim() >= 1 else x
    if isinstance(x, dict):
        return {k: _repeat(v, b) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_repeat(v, b) for v in x)
    return x


def _dim0(args, kwargs) -> int:
    import torch

    for x in list(args) + list(kwargs.values()):
        if isinstance(x, torch.Tensor) and x.dim() >= 1:
            return x.shape[0]
    return 1


def _time_calls(fn, args, kwargs, sync, iters: int, max_s: float) -> list[float]:
    times: list[float] = []
    t_end = time.perf_counter() + max_s
    for _ in range(iters):
        t = time.perf_counter()
        fn(*args, **kwargs)
        sync()
        times.append(time.perf_counter() - t)
        if len(times) >= 5 and time.perf_counter() > t_end:
            break
    return times


def _stats(times: list[float]) -> dict:
    s = sorted(times)
    q = lambda p: s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]
    return {"median_s": statistics.median(s), "p10_s": q(0.1), "p90_s": q(0.9), "mean_s": statistics.fmean(s),
            "n": len(s)}


def child_main(req_path: str) -> int:
    ts = {"script_start": time.perf_counter()}
    req = json.loads(Path(req_path).read_text())
    if req.get("overlay"):
        from mend.overlay import activate

        activate(req["overlay"])
    import torch

    if req["device"] == "cpu" and req.get("threads"):
        torch.set_num_threads(req["threads"])
    if req["kind"] == "hf":
        import transformers  # noqa: F401  (lazy: the model's module is imported by the build)
    ts["imported"] = time.perf_counter()
    events = _Events()

    model, args, kwargs = _build(req)
    if req.get("install_validation_runtime"):
        from mend import validation_runtime

        validation_runtime.install(model)
    if req.get("install_runtime"):
        from mend import runtime

        runtime.install(model)
    dev = torch.device(req["device"])
    model = model.to(dev)
    args, kwargs = _to(args, dev), _to(kwargs, dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    ts["built"] = time.perf_counter()

    opts = {"backend": req["backend"]}
    if req.get("mode"):
        opts["mode"] = req["mode"]
    compiled = torch.compile(model, **opts)
    e0 = events.snap()
    with torch.no_grad():
        out = compiled(*args, **kwargs)
        sync()
    ts["first_call_done"] = time.perf_counter()
    e1 = events.snap()
    doc: dict = {"timestamps": ts, "first_call_events": {**_Events.delta(e0, e1), "unique_graphs": e1["unique_graphs"]},
                 "torch_version": torch.__version__, "threads": torch.get_num_threads(),
                 "device_name": torch.cuda.get_device_name() if dev.type == "cuda" else None}
    try:
        import torch._inductor.config as ic

        doc["inductor_compile_threads"] = ic.compile_threads
    except Exception:  # noqa: BLE001
        pass
    if req.get("save_output"):
        torch.save(_flatten(out, []), req["save_output"])

    if req.get("steady"):
        with torch.no_grad():
            a = events.snap()
            for _ in range(req["warmup"]):
                compiled(*args, **kwargs)
            sync()
            b = events.snap()
            times = _time_calls(compiled, args, kwargs, sync, req["iters"], req["max_timed_s"])
            c = events.snap()
            doc["steady"] = {**_stats(times), "warmup_events": _Events.delta(a, b), "timed_events": _Events.delta(b, c)}
            base = _dim0(args, kwargs)
            tp = {}
            for bsz in req["batch_sizes"]:
                if bsz == 1:
                    st = doc["steady"]
                    tp["1"] = {"batch_rows": base, "median_s": st["median_s"], "samples_per_s": base / st["median_s"],
                               "timed_events": st["timed_events"], "same_as": "steady"}
                    continue
                bargs, bkw = _repeat(args, bsz), _repeat(kwargs, bsz)
                try:
                    a = events.snap()
                    t0 = time.perf_counter()
                    compiled(*bargs, **bkw)
                    sync()
                    first = time.perf_counter() - t0
                    for _ in range(req["warmup"]):
                        compiled(*bargs, **bkw)
                    sync()
                    b = events.snap()
                    times = _time_calls(compiled, bargs, bkw, sync, req["iters"], req["max_timed_s"])
                    c = events.snap()
                except Exception as exc:  # noqa: BLE001  a model that rejects the repeated inputs
                    tp[str(bsz)] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
                    continue
                st = _stats(times)
                rows = base * bsz
                tp[str(bsz)] = {"batch_rows": rows, **st, "samples_per_s": rows / st["median_s"],
                                "first_call_s": first, "warmup_events": _Events.delta(a, b), "timed_events": _Events.delta(b, c)}
            doc["throughput"] = tp
    doc["since_start_events"] = {k: v for k, v in _Events.delta({k: 0 for k in e1}, events.snap()).items()}
    Path(req["out"]).write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        sys.exit(child_main(sys.argv[2]))
    print("usage: python benchmarks/_harness.py child REQUEST.json (the runners are run_cpu.py / run_gpu.py)",
          file=sys.stderr)
    sys.exit(2)
