"""item-operand: :func:`rewrite`, ``x = T.item()`` -> ``x = T.detach().reshape(()).clone()``,
with its proof obligations, or a decline."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, annotated_line, code_of
from mend.rules.item_operand.screen import NAME, Plan, inline_screen, screen


def new_value(plan: Plan) -> str:
    """The kept tensor: detached (``.item()`` carries no gradient), 0-d (a 1-element tensor of
    any rank would broadcast), and a copy (an in-place write to T after this line must not
    reach the value, as it does not reach the Python number)."""
    return f"{code_of(plan.tensor)}.detach().reshape(()).clone()"


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with ``x = T.item()`` on ``line`` kept as a 0-d tensor (see the package docstring)."""
    wrapper = MetadataWrapper(module)
    plan = screen(wrapper, line)
    if isinstance(plan, Decline):
        inline = inline_screen(wrapper, line)
        if inline is None:
            return plan
        if isinstance(inline, Decline):
            return inline
        return _rewrite_inline(wrapper, line, inline)
    pos = wrapper.resolve(PositionProvider)
    new_line, old = annotated_line(plan.line, f"{plan.name} = {new_value(plan)}", NAME)
    tree = wrapper.module.visit(Replace(plan.line, new_line))
    uses, obligations = _obligations(plan, line, pos)
    detail = f"`{old}` -> `{plan.name} = {new_value(plan)}` ({plan.name} stays a 0-d tensor; {len(uses)} use(s))"
    return RewriteResult(tree.code, (line, line), detail, obligations)


def _obligations(plan: Plan, line: int, pos) -> tuple[list[dict], list[dict]]:
    """(uses, obligations): each use's other operand, observed where it is read (its line)."""
    tensor = code_of(plan.tensor)
    uses = [{"value": code_of(u.other), "op": u.op, "line": pos[u.other].start.line} for u in plan.uses]
    return uses, [
        {"kind": "item-operand-tensor", "expr": tensor, "line": line},
        {"kind": "item-operand-keep-type", "expr": tensor, "line": line, "uses": uses},
        {"kind": "item-operand-exact", "expr": tensor, "line": line, "uses": uses},
    ]


def _rewrite_inline(wrapper: MetadataWrapper, line: int, plan: Plan) -> RewriteResult:
    """``... / T.item()`` -> ``... / T.detach().reshape(()).clone()`` on ``line``, in place."""
    pos = wrapper.resolve(PositionProvider)
    was = code_of(plan.call).strip()
    new = cst.parse_expression(new_value(plan)).with_changes(lpar=plan.call.lpar, rpar=plan.call.rpar)
    stmt = plan.line.visit(Replace(plan.call, new))
    text = code_of(stmt.body[0]).strip()
    new_line, _ = annotated_line(plan.line, text, NAME)
    tree = wrapper.module.visit(Replace(plan.line, new_line))
    _, obligations = _obligations(plan, line, pos)
    return RewriteResult(tree.code, (line, line), f"`{was}` -> `{new_value(plan)}` (a 0-d tensor, used in place)",
                         obligations)
