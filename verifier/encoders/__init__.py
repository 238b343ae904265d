"""The encoders, grouped by construct, and the registry that maps an obligation kind to its
encoder (``KINDS``). The verifier never names a rule: a kind is what it encodes.

* :mod:`.where`: a selection as ``torch.where`` (shapes, dtypes, IEEE values, gradients);
* :mod:`.cond`: a selection as ``torch.cond``;
* :mod:`.hoisting`: hoisted setup and merged calls (LongRoPE);
* :mod:`.capture`: deferred side effects (``mend::capture``); :mod:`.capture_if`: one under a tensor test;
* :mod:`.assert_async`: a raise moved into the graph as ``torch._assert_async``;
* :mod:`.counting`: a host counting loop as a tensor count;
* :mod:`.host_check`: a host-reading tensor check kept in the graph;
* :mod:`.numpy_constants`: numpy on Python constants made exact Python arithmetic;
* :mod:`.scalar_index`: a 1-element tensor's ``L[0]`` read as the int it was made from, behind a test;
* :mod:`.item_operand`: a scalar read (``.item()``) kept as a 0-d tensor;
* :mod:`.bounded_bincount`: a bincount of in-range indices counted into a static length;
* :mod:`.gradient_gate`: a torch.where side whose inputs are gated on its path condition;
* :mod:`.membership`: ``v in t`` on a tensor as the predicate ``(v == t).any()``;
* :mod:`.autocast_guard`: the original ``if`` kept under ``torch.autocast``;
* :mod:`.setup_guard`: a one-time setup's first check hoisted into its caller.

``OBSERVED``: the checks that rest on an observation (of the example run, or of probes
run on the installed torch) rather than on a screen of the code or a proved lemma: a
rewrite resting on one is an ``unsafe`` fix (:func:`verifier.levels.fix_safety`).

``CHECKS``: the kinds whose encoder is a check (a static screen, the effect analysis or an
observation) and never a solver query; every other kind is encoded as an SMT query (whose
outcome is still ``checked`` when its negated claim is false before solving). A kind that
is not in ``KINDS`` has no encoding: it is unknown and declines at every level.
"""
from __future__ import annotations

from typing import Callable

from verifier.encoders import assert_async, capture, cond, counting, forward_attribute, hoisting, host_check, where
from verifier.encoders import scalar_tensor
from verifier.encoders import scalar_index
from verifier.encoders import numpy_constants
from verifier.encoders import dead_host_work
from verifier.encoders import debug_text
from verifier.encoders import mask_update
from verifier.encoders import state_write
from verifier.encoders import finiteness_precision
from verifier.encoders import bind_lookup
from verifier.encoders import constant_buffer
from verifier.encoders import item_operand
from verifier.encoders import bounded_bincount
from verifier.encoders import gradient_gate
from verifier.encoders import capture_if
from verifier.encoders import membership
from verifier.encoders import autocast_guard
from verifier.encoders import setup_guard
from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome

Encoder = Callable[[dict, Ctx], Outcome]
GROUPS = (where, cond, hoisting, capture, assert_async, counting, host_check, forward_attribute, scalar_tensor, scalar_index,
          numpy_constants, dead_host_work, debug_text, mask_update, state_write, finiteness_precision, bind_lookup,
          constant_buffer, item_operand, bounded_bincount, gradient_gate, capture_if, membership, autocast_guard,
          setup_guard)


def _registry() -> tuple[dict[str, Encoder], frozenset, frozenset]:
    kinds: dict[str, Encoder] = {}
    checks: set[str] = set()
    observed: set[str] = set()
    for group in GROUPS:
        for kind, fn in group.ENCODERS.items():
            if kind in kinds:
                raise RuntimeError(f"obligation kind {kind} has two encoders ({group.__name__})")
            kinds[kind] = fn
        if not group.CHECKS <= set(group.ENCODERS):
            raise RuntimeError(f"{group.__name__}: CHECKS names kinds it does not encode")
        checks |= group.CHECKS
        observed |= getattr(group, "OBSERVED", frozenset())
        if not observed <= checks:
            raise RuntimeError(f"{group.__name__}: OBSERVED names kinds that are not checks")
    return kinds, frozenset(checks), frozenset(observed)


KINDS, CHECKS, OBSERVED = _registry()
SOLVER_KINDS = frozenset(KINDS) - CHECKS


def encoder_for(kind: str) -> Encoder | None:
    return KINDS.get(kind)


__all__ = ["CHECKS", "Ctx", "Encoder", "KINDS", "OBSERVED", "SOLVER_KINDS", "encoder_for"]
