"""Encoder for a membership test on a tensor made a tensor predicate: ``if v in t:`` ->
``torch.where((v == t).any(), ...)`` (issue 10, kind 6).

* ``membership-any`` (a check: a screen of the installed torch's source, and the operand
  types observed on the example run). ``Tensor.__contains__`` is
  ``bool((element == self).any().item())`` when ``element`` is a tensor or a number
  (``numbers.Number``, ``SymInt``...) and raises RuntimeError for anything else (torch
  2.13, ``torch/_tensor.py``). Where ``t`` is a tensor and ``v`` a tensor or a number,
  ``v in t`` is therefore the truth of ``(v == t).any()``, the same comparison evaluated in
  the same order (``v``, then ``t``). Both must be plain tensors (or Parameters), not
  subclasses, which may override ``__contains__`` or ``==``. The types are those of the example run: an
  observation, so a rewrite resting on it is an unsafe fix (a later call may pass a list,
  whose ``in`` is Python's, or a string element, which the original rejects).
"""
from __future__ import annotations

import inspect

from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.shapes import ShapeEval, _expr
from verifier.smt import Unsupported

BY = ("a screen of the installed torch's Tensor.__contains__ source and the operand types observed on the "
      "example run where the test runs")
# the line of Tensor.__contains__ the rewrite stands for, and the types it admits
_CONTAINS = "(element == self).any().item()"


def _torch_contains() -> str | None:
    """Why the installed ``Tensor.__contains__`` is not the form the rewrite copies, else None."""
    import torch

    try:
        src = inspect.getsource(torch.Tensor.__contains__)
    except (OSError, TypeError) as exc:
        return f"the source of torch.Tensor.__contains__ could not be read ({exc})"
    if _CONTAINS not in src.replace("  ", " ") or "torch.Tensor, Number" not in src:
        return f"torch.Tensor.__contains__ of torch {torch.__version__} is not `bool({_CONTAINS})` for tensors and numbers"
    return None


def _kind(text: str, ctx: Ctx) -> str | None:
    """``tensor``, ``num``, ``tensor subclass X`` or None (not known) for the expression
    ``text`` on the example run."""
    seen = ((ctx.facts or {}).get("names") or {}).get(text)
    if seen is not None:   # a name as observed (a string, None, a list: kinds the shape model has no term for)
        return f"tensor subclass {seen['subclass']}" if seen.get("subclass") else seen.get("kind")
    try:
        return ShapeEval(ctx.facts, ctx.defs, "observed").eval(_expr(text)).kind
    except (Unsupported, SyntaxError, KeyError):
        return None


def membership(ob: dict, ctx: Ctx) -> Outcome:
    why = _torch_contains()
    if why:
        return unknown(why)
    elem, cont = ob["lhs"], ob["rhs"]
    k_cont, k_elem = _kind(cont, ctx), _kind(elem, ctx)
    if k_cont is None:
        return unknown(f"the type of `{cont}` was not observed where the test runs")
    if k_cont != "tensor":
        # a list's or a tensor subclass's own __contains__ (helper-34's `Vocab`), not torch's
        return check_refuted(BY, f"`{cont}` is a {k_cont}, not a plain tensor: `in` is that type's own membership "
                                 "test, not torch.Tensor.__contains__")
    if k_elem is None:
        return unknown(f"the type of `{elem}` was not observed where the test runs")
    if k_elem not in ("tensor", "num"):   # a subclass element may override `==`
        return check_refuted(BY, f"`{elem}` is a {k_elem}: Tensor.__contains__ raises RuntimeError for it, where "
                                 f"`({elem} == {cont}).any()` would not")
    if ob.get("elif") and k_elem != "num":
        # helper-36: `elif marks in ids` now runs where the `if` before it was true, and a
        # tensor element of another size raises there a broadcast error the original never met
        return check_refuted(BY, f"`{elem}` is a tensor in an `elif` test, which the rewrite evaluates on every "
                                 "call: where the original never reached it, a tensor of another size would raise "
                                 "a broadcast error (only a Python number element is admitted there)")
    return checked(BY, [f"Tensor.__contains__ is `bool({_CONTAINS})` for a tensor or number element (source screen)",
                        f"`{cont}` is a tensor and `{elem}` a {'tensor' if k_elem == 'tensor' else 'Python number'} "
                        "on the example run (observed; a later call may pass other types)"])


ENCODERS = {"membership-any": membership}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset(ENCODERS)   # the operand types on the example run
