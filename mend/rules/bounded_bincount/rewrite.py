"""bounded-bincount: the rewrite. ``torch.bincount(I, minlength=M)``, with ``I`` the indices of
an argmax/argmin/max/min/topk along a dimension of ``X``, becomes an immediately called
lambda that counts with ``torch.zeros(M).scatter_add_(0, I, ones)`` (a static output shape)
when ``I`` is 1-D, ``M`` a Python int and ``M >= X.shape[d]``, and calls ``torch.bincount``
otherwise. Dynamo decides the guard at trace time (ranks, ints and sizes), so it adds no break
(measured: a router's tokens-per-expert count, 2 -> 1 graphs, torch 2.13)."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, statement_at
from mend.rules.bounded_bincount.screen import NAME, Plan, screen


def guarded(plan: Plan) -> str:
    """The guarded replacement of the bincount call, as source."""
    t, m = plan.torch_name, code_of(plan.minlength).strip()
    count = f"{t}.zeros(m, dtype={t}.int64, device=i.device).scatter_add_(0, i, {t}.ones_like(i))"
    if plan.inline is not None:
        p = plan.inline
        return (f"(lambda x, m: (lambda i: {count} if i.dim() == 1 and type(m) is int and m >= x{p.bound} "
                f"else {t}.bincount(i, minlength=m))({p.text}))({code_of(p.x).strip()}, {m})")
    name, p = plan.local
    return (f"(lambda i, m, n: {count} if i.dim() == 1 and type(m) is int and m >= n "
            f"else {t}.bincount(i, minlength=m))({code_of(plan.indices).strip()}, {m}, {p.x.value}{p.bound})")


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
    detail = (f"`{was}` -> `zeros(minlength).scatter_add_` when the indices are 1-D and minlength an int of at least "
              f"{code_of(bound.x).strip()}{bound.bound} (the indices lie below it), else bincount")
    obligation = {"kind": "bincount-in-range", "torch": plan.torch_name, "expr": was, "mended": text,
                  "form": "inline" if plan.inline is not None else "local"}
    return RewriteResult(new.code, (line, end), detail, [obligation])
