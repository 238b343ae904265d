"""bounded-bincount: the rewrite. ``torch.bincount(I, minlength=M)``, with ``I`` the indices of
an argmax/argmin/max/min/topk along a dimension of ``X``, becomes an immediately called
lambda that counts with ``torch.zeros(M).scatter_add(0, I, ones)`` (a static output shape)
when ``I`` is 1-D, ``M`` a Python int and ``M >= X.shape[d]``, and calls ``torch.bincount``
otherwise. Dynamo decides the guard at trace time (ranks, ints and sizes), so it adds no break
(measured: a router's tokens-per-expert count, 2 -> 1 graphs, torch 2.13)."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, statement_at
from mend.rules.bounded_bincount.screen import NAME, PARAM_I, PARAM_M, PARAM_N, PARAM_X, Plan, Provenance, screen


def bound_text(t: str, x: str, p: Provenance) -> str:
    """The size the indices lie below, read on ``x`` right after the indices are made (before
    minlength, whose evaluation might change ``x`` in place: a property with a side effect,
    helper-52), or None where ``x`` is not a plain tensor having the dimension (a subclass may
    override argmax; a 0-d ``x`` with flattened indices: reviews)."""
    has_dim = "" if p.dim is None else f" and {x}.dim() > {p.dim if p.dim >= 0 else -p.dim - 1}"
    return f"{x}{p.bound} if type({x}) is {t}.Tensor{has_dim} else None"


def guard_text(t: str) -> str:
    """The condition under which the static-length count equals bincount: plain 1-D indices off
    the meta device (bincount has no meta kernel: the original raises there, helper-52), an int
    minlength below 2**63 (above, ``zeros`` and ``bincount`` raise different errors), and
    minlength covering the bound read on the tensor the indices came from. Under ``torch.export``
    the original bincount runs: ``m >= n`` on a dimension declared free (``Dim("e")``) would add a
    range guard on it, which strict export rejects (helper-55); the comparison is not reached there."""
    m, i, n = PARAM_M, PARAM_I, PARAM_N
    return (f"type({i}) is {t}.Tensor and {i}.dim() == 1 and {i}.device.type != 'meta' and type({m}) is int"
            f" and {m} < 2**63 and type({n}) is int and not {t}.compiler.is_exporting() and {m} >= {n}")


def method_form(call: cst.Call, torch_name: str) -> bool:
    """``I.bincount(minlength=M)``: the fallback keeps the method (a subclass may override it)."""
    return isinstance(call.func, cst.Attribute) and code_of(call.func.value).strip() != torch_name


def guarded(plan: Plan) -> str:
    """The guarded replacement of the bincount call, as source. The indices are made first, then
    the bound is read, then minlength, as the original read the indices before minlength::

        (lambda _mend_x: (lambda _mend_i, _mend_n, _mend_m: COUNT if GUARD else FALLBACK)(
            INDICES(_mend_x), BOUND(_mend_x), M))(X)                       # inline
        (lambda _mend_i, _mend_n, _mend_m: ...)(I, BOUND(X), M)            # I bound the line before

    The count is out of place (``zeros(m).scatter_add``): an in-place write into an unbatched
    ``zeros`` fails under ``torch.func.vmap`` with batched indices (helper-52)."""
    t, m = plan.torch_name, code_of(plan.minlength).strip()
    x, mm, i, n = PARAM_X, PARAM_M, PARAM_I, PARAM_N
    count = f"{t}.zeros({mm}, dtype={t}.int64, device={i}.device).scatter_add(0, {i}, {t}.ones_like({i}))"
    fallback = f"{i}.bincount(minlength={mm})" if method_form(plan.call, t) else f"{t}.bincount({i}, minlength={mm})"
    p = plan.inline or plan.local[1]
    inner = f"(lambda {i}, {n}, {mm}: {count} if {guard_text(t)} else {fallback})"
    if plan.inline is not None:
        return f"(lambda {x}: {inner}({p.text}, {bound_text(t, x, p)}, {m}))({code_of(p.x).strip()})"
    return f"{inner}({code_of(plan.indices).strip()}, {bound_text(t, p.x.value, p)}, {m})"


class _Mark(Replace):
    """Replace the call, and note the rule on its line (unless the line has a comment)."""

    def __init__(self, target, replacement, line: cst.CSTNode, note: str) -> None:
        super().__init__(target, replacement)
        self.line, self.note = line, note

    def on_leave(self, original_node, updated_node):
        if original_node is self.line and isinstance(updated_node, cst.SimpleStatementLine) and \
                updated_node.trailing_whitespace.comment is None:
            return updated_node.with_changes(trailing_whitespace=updated_node.trailing_whitespace.with_changes(
                whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(self.note)))
        return super().on_leave(original_node, updated_node)


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the bincount call of the statement on ``line`` counted into a tensor of
    static length under a guard, or a Decline."""
    wrapper, found = statement_at(module, line)
    if found is None:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return Decline(NAME, plan.reason) if plan.rule is None else plan
    text = guarded(plan)
    if "\n" in code_of(plan.call).strip():
        return Decline(NAME, "the bincount call spans several lines; the rewrite would join them and move every "
                       "later line of the file")
    was = " ".join(code_of(plan.call).split())
    new = wrapper.module.visit(_Mark(plan.call, cst.parse_expression(text), ancestors[-1], f"# mend: {NAME} (was: {was})"))
    end = line + wrapper.module.code_for_node(node).strip("\n").count("\n")
    bound = plan.inline or plan.local[1]
    detail = (f"`{was}` -> `zeros(minlength).scatter_add` when the indices are 1-D and minlength an int of at least "
              f"{code_of(bound.x).strip()}{bound.bound} (the indices lie below it), else bincount")
    obligation = {"kind": "bincount-in-range", "torch": plan.torch_name, "expr": was, "mended": text,
                  "form": "inline" if plan.inline is not None else "local"}
    return RewriteResult(new.code, (line, end), detail, [obligation])
