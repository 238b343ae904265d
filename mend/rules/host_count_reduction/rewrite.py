"""host-count-reduction: :func:`rewrite`, a site -> the new module and its proof obligations, or
a decline."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of as _code
from mend.rules.host_count_reduction.screen import _count_expr, _screen


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """Rewrite the counting loop reported at ``line`` of ``module`` (see the module docstring)."""
    wrapper = MetadataWrapper(module)
    plan = _screen(wrapper, line)
    if isinstance(plan, Decline):
        return plan
    pos = wrapper.resolve(PositionProvider)
    span = (pos[plan.loop].start.line, pos[plan.loop].end.line)
    shift = span[1] - span[0]
    n = plan.counter
    if plan.form == "sum":   # `n = sum(...)` in one statement: its value becomes the count, the line kept
        assign = plan.loop.body[0]
        tree = wrapper.module.visit(Replace(assign.value, cst.parse_expression(_count_expr(plan))))
    else:
        new = cst.parse_statement(f"{n} = {n} + {_count_expr(plan)}\n").with_changes(
            leading_lines=plan.loop.leading_lines)
        tree = wrapper.module.visit(Replace(plan.loop, new))
    use_lines = sorted({pos[stmt].start.line - shift for _, stmt in plan.uses})
    values = [_code(other) for other, _ in plan.uses]
    # each use's other operand, where it is read (the line of the operand itself: a line
    # event there precedes its load)
    uses = [{"value": _code(other), "line": pos[other].start.line - shift} for other, _ in plan.uses]
    line = span[0]     # the count statement's line in the mended code: the loop's
    tensor = _code(plan.tensor)
    c = _code(plan.threshold)
    detail = (f"host counting loop over `{tensor}.tolist()` -> `{n} = {n} + {_count_expr(plan)}` "
              f"({n} becomes a 0-d int64 tensor)") if plan.form == "loop" else (
        f"host count `sum(...)` over `{tensor}.tolist()` -> `{n} = {_count_expr(plan)}` ({n} becomes a 0-d int64 "
        "tensor)")
    obligations = [
        {"kind": "count-tolist-1d", "expr": tensor, "line": line},
        {"kind": "count-compare-exact", "expr": tensor, "op": plan.op, "threshold": c,
         "threshold_value": plan.threshold_value, "line": line},
        {"kind": "count-sum-exact", "init": plan.init, "step": plan.step},
        {"kind": "count-uses-keep-type", "expr": tensor, "values": values, "lines": use_lines, "line": line,
         "uses": uses},
        {"kind": "count-no-gradient", "expr": tensor},
    ]
    return RewriteResult(tree.code, span, detail, obligations,
                         edge_values=[plan.threshold_value] if plan.threshold_value is not None else [])


# --- examples (Fixit style): FIX (before, exact after) and DECLINE (source, reason) -----------
