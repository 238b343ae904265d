"""Encoders for statements hoisted out of a branch and calls merged across it (the
LongRoPE pattern): all checks.

* ``idempotent-device-move``: the hoisted statement is ``x.to(device)`` (static screen);
  its idempotence is the lemma ``proofs/pcf_idempotent_device_move.smt2``;
* ``paired-call-value-not-aliased``: no in-place write to the merged value or its buffer
  in the mended file (static screen; the merge is ``proofs/pcf_paired_call_merge.smt2``);
* ``hoisted-setup-pure``: the effect analysis of the initialiser's source;
* ``hoisted-setup-cannot-raise``: observed to complete on the example run.
"""
from __future__ import annotations

import ast

from verifier.effects import dotted_name as _dotted
from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown


def _callee(call: str) -> str | None:
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    return _dotted(node.func) if isinstance(node, ast.Call) else None


def idempotent_move(ob: dict, ctx: Ctx) -> Outcome:
    expr = ob.get("expr") or ""
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return unknown(f"`{expr}` does not parse")
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"):
        return unknown(f"`{expr}` is not a `.to(...)` call")
    return checked(f"the static screen of the hoisted statement: `{expr}` is a `.to(...)` call",
                   [f"`{expr}` is Tensor.to(device): returns the tensor itself when already there, "
                    "else a copy with equal contents"], ["proofs/pcf_idempotent_device_move.smt2"])


def paired_not_aliased(ob: dict, ctx: Ctx) -> Outcome:
    values = ob.get("values", [])
    targets = [v for v in values if v.startswith("self.")]
    writes = ob.get("inplace_writes", ["the mended file was not screened"])
    if writes:
        return unknown("in-place writes could observe the alias: " + "; ".join(writes[:3]))
    return checked("the static screen of the mended file (verifier/effects.py inplace_writes_to): no in-place "
                   "write to " + (", ".join(f"`{t}`" for t in targets) or "the merged values"),
                   ["no in-place write to " + ", ".join(f"`{t}`" for t in targets) + " in the mended file",
                    "no other module writes these attributes"], ["proofs/pcf_paired_call_merge.smt2"])


def hoisted_pure(ob: dict, ctx: Ctx) -> Outcome:
    name = _callee(ob.get("call", ""))
    f = ctx.facts.get("names", {}).get(name or "")
    if not f or f.get("kind") != "callable" or "effects" not in f:
        return unknown(f"no source-level effect analysis of `{name}` (not observed as a Python function)")
    effects = f["effects"]
    by = f"the effect analysis (verifier/effects.py) of the source of `{name}` ({f['qualname']})"
    assumptions = [f"`{name}` is {f['qualname']}; screened from its source (verifier/effects.py)"] + \
        list(f.get("assumptions", []))
    if effects:
        return check_refuted(by, "; ".join(effects[:3]), assumptions)
    return checked(by, assumptions)


def hoisted_cannot_raise(ob: dict, ctx: Ctx) -> Outcome:
    slot = ob.get("slot", "")
    seen = ctx.facts.get("names", {}).get(slot)
    if not seen or ctx.facts.get("raised"):
        return unknown(f"the hoisted statement was not seen to complete on the example run (`{slot}` not set)")
    stmt = " ".join(ob.get("stmt", "").split())[:120]
    return checked(f"the observation on the example run: `{stmt}` completed (`{slot}` is set)",
                   [f"`{stmt}` completed on the example run (observed: `{slot}` is set)",
                    "its inputs are the module's configuration, the input's device and constants: the same on "
                    "every call (not checked beyond the example)"])


ENCODERS = {
    "idempotent-device-move": idempotent_move,
    "paired-call-value-not-aliased": paired_not_aliased,
    "hoisted-setup-pure": hoisted_pure,
    "hoisted-setup-cannot-raise": hoisted_cannot_raise,
}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset({"hoisted-setup-cannot-raise", "hoisted-setup-pure"})   # the example run
