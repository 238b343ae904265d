"""The fallback cost estimate: a roofline with peaks measured once per machine.

``cost (s) = max(FLOPs / peak_flops, bytes / bandwidth) + (graphs + conds) * launch + syncs * sync``

FLOPs count per dtype against that dtype's measured matmul peak (``peak_flops_by_dtype``).

(Williams, Waterman, Patterson, "Roofline", CACM 2009; the per-graph launch term is the
issue-12 formula). ``peak_flops`` (FLOP/s) is a float32 matmul's, ``bandwidth`` (B/s) a
large tensor copy's, ``launch`` (s) the call of a compiled one-op graph, ``sync`` (s) what a
graph break adds beyond a second launch (leaving the graph, a host read of the predicate,
the resume function's guards). :func:`measure` takes them (a few seconds, mostly one
``torch.compile``); :func:`peaks` caches them per machine in
``$MEND_CACHE_DIR`` (default ``~/.cache/mend``) as ``roofline-<host>-<device>.json``.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time

from mend.cost.features import totals
from mend.files import cache_dir, write_cache


def estimate(obs: dict, name: str, peaks: dict) -> float:
    """The roofline cost (s) of candidate ``name`` on a site observation."""
    t = totals(obs, name)
    by_peak = peaks.get("peak_flops_by_dtype") or {}
    flop_s = t["flops"] / peaks["peak_flops"]
    if t["flops_by_dtype"]:  # a bfloat16 matmul on a CPU without AMX runs far below the float32 peak
        flop_s = sum(v / by_peak.get(d, peaks["peak_flops"]) for d, v in t["flops_by_dtype"].items())
    compute = max(flop_s, t["bytes"] / peaks["bandwidth"])
    return compute + (t["graphs"] + t["conds"]) * peaks["launch"] + t["syncs"] * peaks["sync"]


def _median_s(fn, repeat: int = 15, number: int = 20) -> float:
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs)


def measure(device: str = "cpu") -> dict:
    """Measure the peaks on this machine (one intra-op thread on CPU, as the dataset's
    timings use). Returns ``{"peak_flops", "bandwidth", "launch", "sync", "device",
    "machine"}``; FLOP/s, B/s, s, s."""
    import torch

    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        n = 512
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        mm = _median_s(lambda: (a @ b, sync()), repeat=7, number=5)
        by_dtype = {"float32": 2 * n ** 3 / mm}
        for dt in (torch.bfloat16, torch.float16):
            m = 256
            a2, b2 = torch.randn(m, m, device=device, dtype=dt), torch.randn(m, m, device=device, dtype=dt)
            by_dtype[str(dt).replace("torch.", "")] = 2 * m ** 3 / _median_s(
                lambda a2=a2, b2=b2: (a2 @ b2, sync()), 5, 3)
        big = torch.randn(1 << 22, device=device)
        copy = _median_s(lambda: (big.clone(), sync()), repeat=7, number=5)
        x = torch.randn(8, device=device)

        def one(v):
            return v + 1

        def broken(v):
            y = v + 1
            if y.sum() > -1e30:  # always true: the break, then one resumed graph
                return y * 2
            return y * 3

        torch._dynamo.reset()
        f1, f2 = torch.compile(one), torch.compile(broken)
        launch = _median_s(lambda: (f1(x), sync()))
        brk = _median_s(lambda: (f2(x), sync()))
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()
    return {"peak_flops": 2 * n ** 3 / mm, "peak_flops_by_dtype": by_dtype, "bandwidth": 2 * big.numel() * 4 / copy, "launch": launch,
            "sync": max(brk - 2 * launch, 0.0), "device": device, "machine": machine()}


def machine() -> str:
    """A short description of this machine: host, processor, cores."""
    return f"{platform.node()} {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip()


def peaks(device: str = "cpu") -> dict:
    """This machine's peaks for ``device``: read from the cache, else measured and cached.
    An unreadable cache is measured again; an unwritable one is not fatal."""
    path = cache_dir() / f"roofline-{platform.node() or 'host'}-{device}.json"
    try:
        doc = json.loads(path.read_text())
        if all(isinstance(doc.get(k), (int, float)) for k in ("peak_flops", "bandwidth", "launch", "sync")):
            return doc
    except (OSError, ValueError):
        pass
    doc = measure(device)
    write_cache(path, json.dumps(doc, indent=1))
    return doc
