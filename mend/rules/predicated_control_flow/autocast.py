"""The autocast-guarded form: the original ``if`` under ``torch.autocast``, the selection
outside it.

Autocast changes the dtype an op computes in at run time (``nn.Linear`` gives bfloat16, a
``torch.minimum`` with a float32 buffer float32), so two sides of one dtype without it can
differ under it. The original ``if`` then returns bfloat16 on one outcome and float32 on the
other, which no single ``torch.where`` (it promotes) or ``torch.cond`` (it needs one dtype)
can reproduce. When the differential test's autocast leg refutes the rule's form for that
reason, this form keeps the original ``if`` under autocast (the graph break stays there) and
the verified selection everywhere else. Dynamo folds ``torch.is_autocast_enabled(...)`` and
guards on autocast's state (``GLOBAL_STATE changed: autocast(cpu)_enabled`` recompiles,
measured on torch 2.13), so outside autocast the graph has no break. PyTorch doc: "Automatic
Mixed Precision package - torch.amp"; found by helper-38 (shared case 004's projection).
"""
from __future__ import annotations

import libcst as cst

from mend.rules._common import AUTOCAST_DEVICES, autocast_on
from mend.rules.predicated_control_flow.env import NAME, _Declined, _Env

NOTE = "# mend: autocast computes the sides in other dtypes, so under it the original if runs"


def guard_expr(env: _Env) -> cst.BaseExpression:
    """``torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps")``."""
    return cst.parse_expression(autocast_on(env.torch))


def guard(node: cst.If, pairs, env: _Env):
    """``pairs`` (the planner's ``[(node, new statements)]``) with the new statements under
    ``else:`` of ``if <autocast on>: <node, verbatim>``, and the obligation
    ``autocast-keeps-original`` added to ``env.obligations``. An early exit's fall-through
    (``if p: return a`` then ``t = ...; return b``, which the plan folds into the selection) is
    kept with it, verbatim. Raises _Declined when the plan replaces more than those statements
    (an ``elif`` site rewrites its whole chain)."""
    new, kept = _keep_under(node, pairs, guard_expr(env), NOTE, "autocast-guarded")
    env.obligations.append({"kind": "autocast-keeps-original", "original": kept, "devices": list(AUTOCAST_DEVICES)})
    return [(node, [new]), *((old, []) for old, _ in pairs[1:])]


def anomaly_guard(node: cst.If, pairs, env: _Env):
    """``pairs`` with the new statements under ``else:`` of ``if torch.is_anomaly_enabled():
    <node, verbatim>``, and ``anomaly-keeps-original`` added: a gated side's backward still runs
    on the untaken path (its gradient is zeroed by the gate), and where it is non-finite there
    (``sqrt`` of a negative) anomaly detection raises "returned nan values" where the original
    ``if`` never ran it (helper-88 F2). ``torch.is_anomaly_enabled()`` breaks the graph under
    Dynamo ("torch.* op returned non-Tensor", torch 2.13), so it is asked only outside
    ``torch.compile``: a compiled call runs the selection (with an AOT backend its backward is one
    autograd node, whose outputs are the gated, finite gradients). Raises _Declined as
    :func:`guard`."""
    note = "# mend: anomaly detection checks every backward step, the gated side's too, so under it the original if runs"
    test = cst.parse_expression(f"not {env.torch}.compiler.is_compiling() and {env.torch}.is_anomaly_enabled()")
    new, kept = _keep_under(node, pairs, test, note, "anomaly-guarded")
    env.obligations.append({"kind": "anomaly-keeps-original", "original": kept})
    return [(node, [new]), *((old, []) for old, _ in pairs[1:])]


def _keep_under(node: cst.If, pairs, test: cst.BaseExpression, note: str, what: str) -> tuple[cst.If, str]:
    """(``if <test>: <node and the fall-through it absorbed, verbatim> else: <the planner's new
    statements>``, the kept statements' code). The planner's other pairs may only delete the
    statements after ``node`` that made its else arm (an early exit's fall-through): kept after
    ``node`` they run exactly as before, and the kept run still ends in their ``return``."""
    if pairs[0][0] is not node:
        raise _Declined(f"the {what} form keeps one if and what follows it, and this site is an `elif` whose "
                        "whole chain is rewritten")
    if any(new for _, new in pairs[1:]):
        raise _Declined(f"the {what} form needs a plan that replaces the if (and its fall-through) alone, and "
                        "this one also moves setup")
    tail = [old for old, _ in pairs[1:]]
    stmts = list(pairs[0][1])
    # the if's own comments go above the guard; what the planner added (the cond note) stays
    lead, n = list(node.leading_lines), len(node.leading_lines)
    own = list(stmts[0].leading_lines)
    stmts[0] = stmts[0].with_changes(leading_lines=own[n:] if own[:n] == lead else own)
    original = [node.with_changes(leading_lines=[]), *tail]
    header = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(note))
    return cst.If(test=test, body=cst.IndentedBlock(body=original, header=header),
                  orelse=cst.Else(body=cst.IndentedBlock(body=stmts)), leading_lines=lead), cst.Module(original).code


def declined_for_autocast(reason: str) -> bool:
    """Whether a verifier's decline is the differential test's autocast leg (the only one
    this form can answer: outside autocast it is the rule's own form). The prefix is the one
    :func:`verifier.legs.under_autocast` and the overlay's autocast runs give their messages;
    matched here rather than imported, so that loading the rules does not import torch."""
    return "under autocast(" in reason


__all__ = ["NAME", "anomaly_guard", "declined_for_autocast", "guard", "guard_expr"]
