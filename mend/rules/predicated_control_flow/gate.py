"""Gradient gates: a ``torch.where`` side whose gradient can be non-finite off its guarded
domain (``log``, ``/``, ``norm`` at 0: the ``finite-gradient`` obligations of :mod:`.screen`)
reads every input through ``_mend_gate(K, v)``, ``K`` the condition under which the side is
selected. ``_mend_gate`` is ``torch.where(K, v, v.detach())`` for a tensor that requires grad:
the same values, but autograd's ``where`` backward (``where(K, grad, 0)``, derivatives.yaml)
stops an untaken side's NaN/inf gradient at the gate, so the rewrite stays usable in training
instead of inference-only (the "double where" of JAX's FAQ, applied to the side's inputs, so no
safe value per op is needed). Proof: ``proofs/pcf_gate_gradient.smt2``; the verifier's
``gradient-gated`` check re-reads the mended source (verifier/encoders/gradient_gate.py)."""
from __future__ import annotations

import libcst as cst

from mend.rules._common import add_helpers
from verifier.encoders.gradient_gate import GATE_HELPER as CANONICAL_GATE
from mend.rules.predicated_control_flow.env import _code, _Env

GATE = "_mend_gate"

GATE_HELPER = CANONICAL_GATE   # added once to a module with a gated side; the verifier compares it verbatim
_FREE = {"True", "False", "None", "self", GATE}


def _self_chain(node: cst.BaseExpression) -> bool:
    """``self.a``, ``self.a.b``, ``self.a[0]``: state read through ``self``."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return isinstance(node, cst.Name) and node.value == "self"


class _Gate(cst.CSTTransformer):
    """Wrap every input of a side (a local or global name, a ``self.`` read) in the gate.
    Module names (``torch``, ``F``, ``math``), called builtins and keyword names stay."""

    def __init__(self, env: _Env, keep: cst.BaseExpression):
        super().__init__()
        self.env, self.keep = env, keep

    def _wrap(self, node: cst.BaseExpression) -> cst.Call:
        return cst.Call(func=cst.Name(GATE), args=[cst.Arg(self.keep), cst.Arg(node.with_changes(lpar=[], rpar=[]))],
                        lpar=node.lpar, rpar=node.rpar)

    def visit_Name(self, node: cst.Name) -> bool:
        return False

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        if original.value in _FREE or self.env.qualified(original.value) is not None:
            return updated
        return self._wrap(updated)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return False

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute):
        if _self_chain(original):
            return self._wrap(original)
        if self.env.qualified(_code(original)) is not None:   # torch.float16, math.pi
            return original
        return original.with_changes(value=original.value.visit(self))

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        return not _self_chain(node)

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript):
        return self._wrap(original) if _self_chain(original) else updated

    def visit_Call(self, node: cst.Call) -> bool:
        return False

    def leave_Call(self, original: cst.Call, updated: cst.Call):
        func = original.func
        if isinstance(func, cst.Attribute) and self.env.qualified(_code(func)) is None:
            func = func.with_changes(value=func.value.visit(self))   # a method: its receiver is an input
        args = [a.with_changes(value=a.value.visit(self)) for a in original.args]
        return original.with_changes(func=func, args=args)


def gate(value: cst.BaseExpression, keep: cst.BaseExpression, env: _Env) -> cst.BaseExpression:
    """``value`` with each input read through ``_mend_gate(keep, ...)``."""
    return value.visit(_Gate(env, keep))


def keep_condition(preds: list[cst.Name], i: int, env: _Env) -> cst.BaseExpression:
    """The condition under which arm ``i`` of ``where(P0, A0, where(P1, A1, ..., An))`` is
    selected: ``not P0 and ... and Pi`` (the else arm: every ``not Pj``), folded left as
    ``torch.logical_and`` -- the form the verifier derives from the selection's nesting."""
    parts: list[cst.BaseExpression] = [env.torch_call("logical_not", p) for p in preds[:i]]
    if i < len(preds):
        parts.append(preds[i])
    out = parts[0]
    for p in parts[1:]:
        out = env.torch_call("logical_and", out, p)
    return out


def gateable(side_obligations: list[dict], assigns: list[str], temps: set[str], env: _Env) -> bool:
    """Whether an arm is gated: it carries a ``finite-gradient`` obligation, calls no submodule
    (whose parameters a gate on its inputs cannot reach: ``untaken-side-runs``), binds no setup
    temporary (computed outside the selection, so ungated), and ``torch`` is the module's own
    name for torch (the helper reads it)."""
    kinds = {ob["kind"] for ob in side_obligations}
    return "finite-gradient" in kinds and "untaken-side-runs" not in kinds and not (set(assigns) & temps) \
        and env.torch == "torch"


def add_helper(module: cst.Module) -> cst.Module:
    """``module`` with :data:`GATE_HELPER` after its imports, unless it is there already."""
    if any(isinstance(s, cst.FunctionDef) and s.name.value == GATE for s in module.body):
        return module
    return add_helpers(module, GATE_HELPER)
