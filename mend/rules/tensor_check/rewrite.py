"""tensor-check: the rewrite. ``torch._check_tensor_all(cond)`` reads the condition on the host
(``cond._is_all_true().item()``), which breaks the graph on torch 2.13; the same check as
``torch._assert_async(cond.all(), msg)`` stays in the graph and raises the same
``RuntimeError(msg)``. The original call is kept for a condition that is not a bool tensor,
where it raises its ``TypeError``."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, statement_at
from mend.rules.tensor_check.screen import DEFAULT_MESSAGE, NAME, screen


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the check on ``line`` moved into the graph, or a Decline."""
    wrapper, found = statement_at(module, line)
    if found is None:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return plan
    cond, t = code_of(plan.cond).strip(), plan.torch_name
    call = f"{t}._check_tensor_all({cond})"  # the screen admits no other argument
    # `_is_all_true()` is what `_check_tensor_all` reduces with (a subclass may override `all()`)
    block = cst.parse_statement(
        f"if isinstance({cond}, {t}.Tensor) and {cond}.dtype == {t}.bool:\n"
        f"    {t}._assert_async({cond}._is_all_true(), {DEFAULT_MESSAGE!r})  # mend: tensor-check (was: {call})\n"
        f"else:\n"
        f"    {call}\n")
    block = block.with_changes(leading_lines=plan.line.leading_lines)
    new_module = wrapper.module.visit(Replace(plan.line, block))
    obligations = [
        {"kind": "check-equivalent", "call": "torch._check_tensor_all", "expr": cond, "message": DEFAULT_MESSAGE},
        {"kind": "state-unchanged-on-raise", "expr": cond},
        {"kind": "cpu-only", "expr": cond},
    ]
    return RewriteResult(new_module.code, (line, line),
                         f"`{call}` -> `torch._assert_async({cond}._is_all_true(), ...)` "
                         "under a bool-tensor guard", obligations)
