"""host-count-reduction: :func:`rewrite`, a site -> the new module and its proof obligations, or
a decline."""
from __future__ import annotations

import math
import struct

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import AUTOCAST_DEVICES, Replace, add_import, autocast_on, code_of as _code, torch_name
from mend.rules.host_count_reduction.screen import _count_expr, _screen


NOTE = "# mend: the tensor may be float16/bfloat16 (autocast, a half model), where the threshold is not exact"


def exact_under_autocast(value) -> bool:
    """Whether the threshold ``value`` is exactly a float16 and a bfloat16 number, so that a tensor autocast computes in either compares with
    it as Python compares the element (``tolist()`` is exact): 0.5, 2, 300 yes; 0.1 no, and
    neither is 1.0009765625 (float32-exact: helper-38 counted 191 vs 190 under bfloat16) or 1e4
    (10 significant bits, bfloat16 has 8)."""
    if isinstance(value, bool):
        return True
    try:
        f = float(value)
        half = struct.unpack("<e", struct.pack("<e", f))[0]
        single = struct.unpack("<f", struct.pack("<f", f))[0]
    except (OverflowError, struct.error):
        return False
    if f != value or math.isnan(f):
        return False
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    return half == f and single == f and bits & 0xFFFF == 0   # bfloat16: float32's upper 16 bits


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """Rewrite the counting loop reported at ``line`` of ``module`` (see the module docstring)."""
    wrapper = MetadataWrapper(module)
    plan = _screen(wrapper, line)
    if isinstance(plan, Decline):
        return plan
    pos = wrapper.resolve(PositionProvider)
    span = (pos[plan.loop].start.line, pos[plan.loop].end.line)
    n = plan.counter
    if plan.form == "sum":   # `n = sum(...)` in one statement: its value becomes the count
        assign = plan.loop.body[0]
        new = plan.loop.with_changes(body=[assign.with_changes(value=cst.parse_expression(_count_expr(plan))),
                                           *plan.loop.body[1:]])
    else:
        new = cst.parse_statement(f"{n} = {n} + {_count_expr(plan)}\n").with_changes(
            leading_lines=plan.loop.leading_lines)
    old_lines = span[1] - span[0] + 1
    new_lines = cst.Module([]).code_for_node(new.with_changes(leading_lines=[])).count("\n")
    # a literal threshold inexact in float16/bfloat16: the loop kept under autocast; an
    # attribute's value is observed, so count-compare-exact proves it in those dtypes too
    guarded = plan.threshold_value is not None and not exact_under_autocast(plan.threshold_value)
    if guarded:   # the loop verbatim under autocast, the count outside it (see autocast_guard)
        torch, add = torch_name(wrapper.module)
        test = autocast_on(torch)
        if isinstance(plan.tensor, cst.Name):   # a model cast to half precision too (helper-40: .bfloat16())
            test += f" or {plan.tensor.value}.dtype in ({torch}.float16, {torch}.bfloat16)"
        new = cst.If(test=cst.parse_expression(test),
                     body=cst.IndentedBlock([plan.loop.with_changes(leading_lines=[])], header=cst.TrailingWhitespace(
                         whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(NOTE))),
                     orelse=cst.Else(cst.IndentedBlock([new.with_changes(leading_lines=[])])),
                     leading_lines=plan.loop.leading_lines)
    tree = wrapper.module.visit(Replace(plan.loop, new))
    if guarded and add:
        tree = add_import(tree, "import torch", same_line=True)
    # lines in the mended code: the count statement's, and how far the lines after it moved
    line = span[0] + (old_lines + 2 if guarded else 0)
    moved = (old_lines + 2 + new_lines if guarded else new_lines) - old_lines
    use_lines = sorted({pos[stmt].start.line + moved for _, stmt in plan.uses})
    values = [_code(other) for other, _ in plan.uses]
    # each use's other operand, where it is read (the line of the operand itself: a line
    # event there precedes its load)
    uses = [{"value": _code(other), "line": pos[other].start.line + moved} for other, _ in plan.uses]
    tensor = _code(plan.tensor)
    c = _code(plan.threshold)
    detail = (f"host counting loop over `{tensor}.tolist()` -> `{n} = {n} + {_count_expr(plan)}` "
              f"({n} becomes a 0-d int64 tensor)") if plan.form == "loop" else (
        f"host count `{' '.join(_code(plan.loop).split())[:80]}` -> `{n} = {_count_expr(plan)}` ({n} becomes a "
        "0-d int64 tensor)")
    obligations = [
        {"kind": "count-tolist-1d", "expr": tensor, "line": line},
        {"kind": "count-compare-exact", "expr": tensor, "op": plan.op, "threshold": c,
         "threshold_value": plan.threshold_value, "line": line, "autocast": "kept" if guarded else "counted"},
        {"kind": "count-sum-exact", "init": plan.init, "step": plan.step},
        {"kind": "count-uses-keep-type", "expr": tensor, "values": values, "lines": use_lines, "line": line,
         "uses": uses},
        {"kind": "count-no-gradient", "expr": tensor},
    ]
    if guarded:
        detail += f"; under autocast (cpu, cuda, xpu, mps) the {'loop' if plan.form == 'loop' else 'statement'} is kept: " + (
            f"{c} is not exact in float16 and bfloat16, where autocast (or a half model) may compute `{tensor}`")
        obligations.append({"kind": "autocast-keeps-original", "original": cst.Module([plan.loop]).code.lstrip("\n"),
                            "devices": list(AUTOCAST_DEVICES)})
    return RewriteResult(tree.code, span, detail, obligations,
                         edge_values=[plan.threshold_value] if plan.threshold_value is not None else [])


# --- examples (Fixit style): FIX (before, exact after) and DECLINE (source, reason) -----------
