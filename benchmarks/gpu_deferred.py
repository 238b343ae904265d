"""Deferred effects under CUDA graphs (issue 11): one prepared check for a lent GPU.

    python3 benchmarks/run_gpu.py deferred --out "$OUT"        # on the GPU machine, ~2 min

Needs only torch and this tree (``mend/runtime.py`` imports torch alone). The model is
:data:`ORIGINAL`, a block that prints a tensor and logs a statistic in forward; :data:`MENDED`
is exactly what ``mend fix`` emits for it (``tests/test_gpu_deferred.py`` checks that). It
compiles both with Inductor under ``mode="reduce-overhead"`` and reports:

* whether CUDA graphs were used for the mended graph: Inductor's ``cudagraph_skips``
  counter and any "skipping cudagraphs" log line (none expected: the graph is ordinary);
* that each of ``--replays`` calls, on fresh inputs, prints and logs exactly what eager
  prints for the same inputs (the snapshots are graph outputs, read after each replay);
* cold start (fresh process, empty cache), warm start (fresh process, same cache) and
  steady state (median ms over ``--iters`` calls, after warm-up) of original and mended,
  each a ratio original / mended within this run.

Writes ``deferred_gpu.json`` and ``deferred_gpu.md`` to ``--out``. ``--device cpu`` runs the
same steps without CUDA graphs (for testing the script; the CUDA-graph check then reads
"not on CUDA").
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ORIGINAL = '''import logging

import torch
from torch import nn

logger = logging.getLogger("mend_gpu.block")


class Block(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.fc1(x).relu()
        print("hidden norm", h.norm())
        h = self.fc2(h)
        logger.warning("out mean %.5f rows %d", h.mean(), h.shape[0])
        return x + h
'''

MENDED = '''import logging

import torch
from torch import nn; import mend.runtime as _mend_rt

logger = logging.getLogger("mend_gpu.block")


class Block(nn.Module):
    def __init__(self, dim=256):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.fc1(x).relu()
        _mend_rt.defer_print("hidden norm", h.norm())
        h = self.fc2(h)
        _mend_rt.defer_log(logger, "warning", "out mean %.5f rows %d", h.mean(), h.shape[0])
        return x + h
'''

# one fresh process: build, compile, first call; prints one JSON line
_PROCESS = r'''
import json, sys, time, importlib.util
t0 = time.perf_counter()
import torch
from torch._dynamo.utils import counters
path, device, mode = sys.argv[1], sys.argv[2], sys.argv[3]
spec = importlib.util.spec_from_file_location("block_mod", path); mod = importlib.util.module_from_spec(spec)
sys.modules["block_mod"] = mod; spec.loader.exec_module(mod)
torch.manual_seed(0)
model = mod.Block().to(device).eval()
compiled = torch.compile(model, mode=mode if device == "cuda" else None)
x = torch.randn(8, 256, device=device)
with torch.no_grad():
    compiled(x)
if device == "cuda":
    torch.cuda.synchronize()
print("RESULT " + json.dumps({"s": time.perf_counter() - t0,
                              "cache": {k: v for k, v in counters["inductor"].items() if "cache" in k}}))
'''


def _write(folder: Path) -> tuple[Path, Path]:
    (folder / "orig").mkdir(parents=True, exist_ok=True)
    (folder / "mended").mkdir(parents=True, exist_ok=True)
    orig, mended = folder / "orig" / "block.py", folder / "mended" / "block.py"
    orig.write_text(ORIGINAL)
    mended.write_text(MENDED)
    return orig, mended


def _load(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _fresh(path: Path, device: str, mode: str, cache: Path) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-c", _PROCESS, str(path), device, mode], capture_output=True, text=True,
                       env=env, timeout=400)
    if p.returncode != 0:
        return {"error": p.stderr[-1500:]}
    return json.loads(p.stdout.rpartition("RESULT ")[2])


def _observed(fn, x) -> tuple[str, list[str]]:
    """(stdout, log messages) of one call."""
    import contextlib
    import io
    import logging

    out, seen = io.StringIO(), []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    log = logging.getLogger("mend_gpu.block")
    handler = Keep()
    log.addHandler(handler)
    try:
        with contextlib.redirect_stdout(out):
            fn(x)
    finally:
        log.removeHandler(handler)
    return out.getvalue(), seen


_NUMBER = r"-?\d+(?:\.(\d+))?(?:e([-+]?\d+))?"


def _within_last_digit(want: tuple[str, list[str]], got: tuple[str, list[str]]) -> bool:
    """The same text, except numbers that differ by at most one unit in their last printed
    digit: Inductor reduces in another order than eager (``h.norm()`` computed inside the
    compiled graph rounds differently in the last bits), which the 4 printed decimals show
    only when a value lies on a rounding boundary."""
    import re

    def parts(text: str):
        # the text with each number replaced by "#", and each number with the size of one unit
        # in its last printed digit (0 for an integer)
        nums = [(m.group(0), 10.0 ** (int(m.group(2) or 0) - len(m.group(1) or "")) if m.group(1) or m.group(2) else 0.0)
                for m in re.finditer(_NUMBER, text)]
        return re.sub(_NUMBER, "#", text), nums

    for a, b in zip([want[0], *want[1]], [got[0], *got[1]], strict=False):
        (ta, na), (tb, nb) = parts(a), parts(b)
        if ta != tb or len(na) != len(nb):
            return False
        for (x, unit), (y, _) in zip(na, nb, strict=True):
            if abs(float(x) - float(y)) > unit * 1.000001:
                return False
    return len(want[1]) == len(got[1])


def _steady_ms(fn, x, iters: int, sync) -> float:
    import contextlib
    import io
    import logging

    logging.getLogger("mend_gpu.block").disabled = True
    times = []
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(10):
            fn(x)
        sync()
        for _ in range(iters):
            t = time.perf_counter()
            fn(x)
            sync()
            times.append((time.perf_counter() - t) * 1e3)
    logging.getLogger("mend_gpu.block").disabled = False
    return statistics.median(times)


def run(out: Path, device: str = "cuda", replays: int = 20, iters: int = 200, mode: str = "reduce-overhead",
        processes: bool = True) -> dict:
    """Run every check; returns (and writes) the results. Raises RuntimeError when CUDA is asked
    for and absent."""
    import logging

    import torch
    from torch._dynamo.utils import counters

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: run with --device cpu to test the script")
    out.mkdir(parents=True, exist_ok=True)
    if str(REPO) not in sys.path:  # the mended block imports mend.runtime; mend need not be installed
        sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="mend-gpu-deferred-"))
    orig_path, mended_path = _write(work)
    orig_mod, mended_mod = _load(orig_path, "_gpu_block_orig"), _load(mended_path, "_gpu_block_mended")
    torch.manual_seed(0)
    ref = orig_mod.Block().to(device).eval()
    mended = mended_mod.Block().to(device).eval()
    mended.load_state_dict(ref.state_dict())
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    skip_lines: list[str] = []

    class Skips(logging.Handler):
        def emit(self, record):
            if "skipping cudagraphs" in record.getMessage():
                skip_lines.append(record.getMessage()[:300])

    handler = Skips()
    for name in ("torch._inductor", "torch._inductor.cudagraph_trees", "torch._inductor.utils"):
        logging.getLogger(name).addHandler(handler)
    torch._dynamo.reset()
    counters.clear()
    compile_mode = mode if device == "cuda" else None
    compiled = torch.compile(mended, mode=compile_mode, fullgraph=True)
    mismatches, calls = [], []
    gen = torch.Generator(device="cpu").manual_seed(1)
    with torch.no_grad():
        for i in range(replays):
            x = torch.randn(8, 256, generator=gen).to(device)
            want = _observed(ref, x)
            got = _observed(compiled, x)
            sync()
            calls.append(got)
            if got != want:
                mismatches.append({"call": i, "eager": want, "compiled": got})
    cudagraph_skips = dict(counters["inductor"]).get("cudagraph_skips", 0)
    res: dict = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__,
        "mode": compile_mode, "replays": replays,
        "replays_equal_to_eager": replays - len(mismatches), "mismatches": mismatches[:3],
        "replays_within_last_digit": replays - sum(not _within_last_digit(m["eager"], m["compiled"]) for m in mismatches),
        "cudagraphs": ("not on CUDA" if device != "cuda" else
                       "used" if not cudagraph_skips and not skip_lines else "skipped"),
        "cudagraph_skips": cudagraph_skips, "skip_log": skip_lines[:5],
    }
    for name in ("torch._inductor", "torch._inductor.cudagraph_trees", "torch._inductor.utils"):
        logging.getLogger(name).removeHandler(handler)
    with torch.no_grad():
        x = torch.randn(8, 256, generator=gen).to(device)
        torch._dynamo.reset()
        orig_c = torch.compile(ref, mode=compile_mode)
        mended_c = torch.compile(mended, mode=compile_mode)
        res["steady_ms"] = {"original": _steady_ms(orig_c, x, iters, sync), "mended": _steady_ms(mended_c, x, iters, sync)}
    res["steady_ratio"] = res["steady_ms"]["original"] / res["steady_ms"]["mended"]
    if processes:
        starts: dict = {}
        for label, path in (("original", orig_path), ("mended", mended_path)):
            cache = work / f"cache_{label}"
            starts[label] = {"cold": _fresh(path, device, mode, cache), "warm": _fresh(path, device, mode, cache)}
        res["starts"] = starts
        for phase in ("cold", "warm"):
            o, m = starts["original"][phase], starts["mended"][phase]
            if "s" in o and "s" in m:
                res[f"{phase}_start_ratio"] = o["s"] / m["s"]
    (out / "deferred_gpu.json").write_text(json.dumps(res, indent=2, default=str))
    (out / "deferred_gpu.md").write_text(_markdown(res))
    return res


def _markdown(res: dict) -> str:
    lines = [f"# Deferred effects under CUDA graphs ({res['device']}, torch {res['torch']}, mode {res['mode']})", "",
             f"* CUDA graphs for the mended graph: **{res['cudagraphs']}** (cudagraph_skips {res['cudagraph_skips']}"
             + (f"; log: {res['skip_log'][0]}" if res["skip_log"] else "") + ")",
             f"* replays whose printed and logged output equals eager's: **{res['replays_equal_to_eager']} of "
             f"{res['replays']}** (the rest, if any, differ only by one unit in a number's last printed digit: "
             f"**{res['replays_within_last_digit']} of {res['replays']}** within that; Inductor reduces in another "
             "order than eager)",
             f"* steady state: original {res['steady_ms']['original']:.3f} ms, mended {res['steady_ms']['mended']:.3f} ms,"
             f" ratio **{res['steady_ratio']:.2f}**"]
    for phase in ("cold", "warm"):
        if f"{phase}_start_ratio" in res:
            o, m = res["starts"]["original"][phase], res["starts"]["mended"][phase]
            lines.append(f"* {phase} start: original {o['s']:.2f} s, mended {m['s']:.2f} s, ratio "
                         f"**{res[f'{phase}_start_ratio']:.2f}**; FX graph cache original {o['cache']}, "
                         f"mended {m['cache']}")
    return "\n".join(lines) + "\n"
