"""The encoders, grouped by construct, and the registry that maps an obligation kind to its
encoder (``KINDS``). The verifier never names a rule: a kind is what it encodes.

* :mod:`.where`: a selection as ``torch.where`` (shapes, dtypes, IEEE values, gradients);
* :mod:`.cond`: a selection as ``torch.cond``;
* :mod:`.hoisting`: hoisted setup and merged calls (LongRoPE);
* :mod:`.capture`: deferred side effects (``mend::capture``);
* :mod:`.assert_async`: a raise moved into the graph as ``torch._assert_async``;
* :mod:`.counting`: a host counting loop as a tensor count;
* :mod:`.host_check`: a host-reading tensor check kept in the graph.

``CHECKS``: the kinds whose encoder is a check (a static screen, the effect analysis or an
observation) and never a solver query; every other kind is encoded as an SMT query (whose
outcome is still ``checked`` when its negated claim is false before solving). A kind that
is not in ``KINDS`` has no encoding: it is unknown and declines at every level.
"""
from __future__ import annotations

from typing import Callable

from verifier.encoders import assert_async, capture, cond, counting, hoisting, host_check, where
from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome

Encoder = Callable[[dict, Ctx], Outcome]
GROUPS = (where, cond, hoisting, capture, assert_async, counting, host_check)


def _registry() -> tuple[dict[str, Encoder], frozenset]:
    kinds: dict[str, Encoder] = {}
    checks: set[str] = set()
    for group in GROUPS:
        for kind, fn in group.ENCODERS.items():
            if kind in kinds:
                raise RuntimeError(f"obligation kind {kind} has two encoders ({group.__name__})")
            kinds[kind] = fn
        if not group.CHECKS <= set(group.ENCODERS):
            raise RuntimeError(f"{group.__name__}: CHECKS names kinds it does not encode")
        checks |= group.CHECKS
    return kinds, frozenset(checks)


KINDS, CHECKS = _registry()
SOLVER_KINDS = frozenset(KINDS) - CHECKS


def encoder_for(kind: str) -> Encoder | None:
    return KINDS.get(kind)


__all__ = ["CHECKS", "Ctx", "Encoder", "KINDS", "SOLVER_KINDS", "encoder_for"]
