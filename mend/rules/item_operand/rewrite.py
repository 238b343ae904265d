"""item-operand: :func:`rewrite`, ``x = T.item()`` -> ``x = T.detach().reshape(()).clone()``,
with its proof obligations, or a decline."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, annotated_line, code_of
from mend.rules.item_operand.screen import NAME, Plan, screen


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
        return plan
    pos = wrapper.resolve(PositionProvider)
    new_line, old = annotated_line(plan.line, f"{plan.name} = {new_value(plan)}", NAME)
    tree = wrapper.module.visit(Replace(plan.line, new_line))
    tensor = code_of(plan.tensor)
    # each use's other operand, observed where it is read (the operand's own line)
    uses = [{"value": code_of(u.other), "op": u.op, "line": pos[u.other].start.line} for u in plan.uses]
    detail = f"`{old}` -> `{plan.name} = {new_value(plan)}` ({plan.name} stays a 0-d tensor; {len(uses)} use(s))"
    obligations = [
        {"kind": "item-operand-tensor", "expr": tensor, "line": line},
        {"kind": "item-operand-keep-type", "expr": tensor, "line": line, "uses": uses},
        {"kind": "item-operand-exact", "expr": tensor, "line": line, "uses": uses},
    ]
    return RewriteResult(tree.code, (line, line), detail, obligations)
