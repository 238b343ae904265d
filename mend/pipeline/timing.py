"""``mend fix --choose measure``: the steady-state time of a mended model on the target's inputs.

The cost model ranks a site's candidates; ``measure`` times the two it ranks best on the
user's own inputs and keeps the faster (:func:`mend.cost.decide_measured`). Each candidate's
model is compiled with Inductor, warmed up (compilation and recompilations excluded), then
called :data:`CALLS` times under ``torch.no_grad()`` with one intra-op thread, as the cost
model's data was measured; the median of those calls is its time.
"""
from __future__ import annotations

import statistics
import time

WARMUP = 3
CALLS = 21


def steady_ms(model, args: tuple, kwargs: dict, *, warmup: int = WARMUP, calls: int = CALLS) -> float:
    """Median wall time (ms) of one call of ``torch.compile(model)`` (Inductor) on ``args``
    and ``kwargs`` (deep copies: the caller's inputs are never touched) after ``warmup``
    calls; one intra-op thread. Raises what the model raises."""
    import torch

    import copy

    # the candidate runs on its own copy: a forward that updates an input in place must not
    # change the examples that later sites and the after-scan use (adversarial review)
    args, kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model.eval())
        sync = torch.cuda.synchronize if any(
            isinstance(v, torch.Tensor) and v.is_cuda for v in [*args, *kwargs.values()]) else (lambda: None)
        with torch.no_grad():
            for _ in range(warmup):
                compiled(*args, **kwargs)
            sync()
            runs = []
            for _ in range(calls):
                t0 = time.perf_counter()
                compiled(*args, **kwargs)
                sync()
                runs.append((time.perf_counter() - t0) * 1e3)
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()
    return statistics.median(runs)
