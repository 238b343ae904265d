"""Encoder for a finiteness test (``isinf``/``isfinite``/``isnan``/``isposinf``/``isneginf``)
that a rewrite moves into the same graph as the computation of the tensor it tests.

Before the rewrite the ``if`` on that test was a graph break, so the tensor was an output
of one graph, materialised in its own dtype, and the test ran on those values. After it,
Inductor may fuse the producer into the test's kernel; with
``torch._inductor.config.emulate_precision_casts = False`` (the default) a float16 or
bfloat16 intermediate is computed in float32 there and never rounded. An overflow to
``inf`` that eager (and the original, at its break) sees is then missed. Measured on torch
2.13 (CPU): ``h = x * g`` (float16, ``x = 40000``, ``g = 2``) followed by ``torch.where(
torch.isinf(h).any(), torch.clamp(h, ...), h) * 0.5`` gives 40000 under Inductor and 32256 in
eager, aot_eager and the original; ``emulate_precision_casts = True`` gives 32256.

* ``finiteness-test-precision`` (check, an observation of the example run): the tested
  tensor (``expr``) is float32 or float64 -- Inductor computes those in their own precision
  -> ``checked`` (resting on the observed dtype: an unsafe fix); float16 / bfloat16 ->
  ``unknown`` with the reason above (an unsafe fix, applied only with ``--unsafe-fixes``;
  the differential test under Inductor still judges it); not observed, or not a floating
  tensor -> ``unknown``.
"""
from __future__ import annotations

from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, checked, unknown

REDUCED = {"float16", "bfloat16"}
FULL = {"float32", "float64"}


def finiteness_precision(ob: dict, ctx: Ctx) -> Outcome:
    expr = ob.get("expr")
    fact = ((ctx.facts or {}).get("names") or {}).get(expr) if isinstance(expr, str) else None
    if not isinstance(fact, dict) or fact.get("kind") != "tensor":
        return unknown(f"the dtype of `{expr}` was not observed on the example run")
    dtype = fact.get("dtype")
    if dtype in REDUCED:
        return unknown(f"`{ob.get('test', 'the finiteness test')}` reads `{expr}`, a {dtype} tensor: under Inductor "
                       "(emulate_precision_casts=False, the default) a fused producer is computed in float32 and "
                       "never rounded, so an overflow to inf the graph break used to materialise can be missed")
    if dtype in FULL:
        return checked(f"the dtype of `{expr}` observed on the example run ({dtype}): Inductor computes {dtype} "
                       f"intermediates in {dtype}, so the finiteness test sees the values eager does",
                       assumptions=[f"`{expr}` is {dtype} on every call, as on the example run"])
    return unknown(f"`{expr}` is a {dtype} tensor; a finiteness test of it is not decided")


ENCODERS = {"finiteness-test-precision": finiteness_precision}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset(ENCODERS)   # rests on the dtype observed on the example run
