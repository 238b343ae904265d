"""tensor-check: the rewrite. ``torch._check_tensor_all(cond)`` reads the condition on the host
(``cond._is_all_true().item()``), which breaks the graph on torch 2.13; the same check as
``torch._assert_async(cond.all(), msg)`` stays in the graph and raises the same
``RuntimeError(msg)``. The original call is kept for a condition that is not a bool tensor,
where it raises its ``TypeError``."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, statement_at
from mend.rules.tensor_check.screen import DEFAULT_MESSAGE, MESSAGE_TYPES, NAME, screen


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the check on ``line`` moved into the graph, or a Decline."""
    wrapper, found = statement_at(module, line)
    if found is None:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return plan
    t = plan.torch_name
    source = code_of(plan.cond).strip()
    hoisted = not isinstance(plan.cond, cst.Name)
    cond = plan.hoisted if hoisted else source
    message = DEFAULT_MESSAGE if plan.message is None else plan.message
    text = plan.message_format or repr(message)
    typed = "".join(f" and type({f}) in {MESSAGE_TYPES}" for f in plan.fields)   # formatting them cannot raise
    extra = "" if plan.message_arg is None else ", " + code_of(plan.message_arg).strip().rstrip(",")
    callee = code_of(plan.call.func).strip()
    call = f"{callee}({cond}{extra})"   # the original call, on the (hoisted) condition
    was = f"{callee}({source}{extra})"
    # `_is_all_true()` is what `_check_tensor_all` reduces with (a subclass may override `all()`)
    block = cst.parse_statement(
        f"if isinstance({cond}, {t}.Tensor) and {cond}.dtype == {t}.bool and {cond}.device.type == 'cpu'{typed}:\n"
        f"    {t}._assert_async({cond}._is_all_true(), {text})  # mend: tensor-check (was: {was})\n"
        f"else:\n"
        f"    {call}\n")
    if hoisted:   # evaluated once, where the call evaluated it
        first = cst.parse_statement(f"{plan.hoisted} = {source}\n").with_changes(leading_lines=plan.line.leading_lines)
        replacement = cst.FlattenSentinel([first, block])
    else:
        replacement = block.with_changes(leading_lines=plan.line.leading_lines)
    new_module = wrapper.module.visit(Replace(plan.line, replacement))
    check = {"kind": "check-equivalent", "call": "torch._check_tensor_all", "expr": cond, "message": message}
    if plan.message is not None or plan.fields:
        check["message_callable"] = True
    if plan.message_format is not None:
        check.update(message=plan.message_format, message_fields=list(plan.fields), message_is_format=True)
    if hoisted:
        check["hoisted"] = source
    # another in-graph check in the file (predicated-validation's, made earlier in the run): inductor
    # may report the later of two that fail on one call (helper-93's F1)
    first = {"kind": "first-failure-wins", "note": "the first failing check in program order is reported: one "
             "torch._assert_async in the file"}
    obligations = [check, {"kind": "state-unchanged-on-raise", "expr": cond}, {"kind": "cpu-only", "expr": cond}, first]
    return RewriteResult(new_module.code, (line, line),
                         f"`{was}` -> `torch._assert_async({cond}._is_all_true(), ...)` under a bool-tensor guard"
                         + (f" (the condition bound to `{plan.hoisted}` first)" if hoisted else ""), obligations)
