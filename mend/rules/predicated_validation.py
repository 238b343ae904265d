"""Rule: predicated validation (GraphMend paper §4, "[Trap]").

``if <tensor cond>: raise E(msg)`` becomes ``torch._assert_async`` in the graph; the
original exception type and message are restored where the compiled call returns.
A message that formats tensor values (an f-string) is declined: its text needs the
values on the host at the point of failure.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules import Decline, Match

NAME = "predicated-validation"


def constant_message(exc: cst.BaseExpression | None) -> bool | None:
    """True for ``E`` / ``E()`` / ``E("literal")``; False for formatted messages."""
    if exc is None:
        return False
    if isinstance(exc, (cst.Name, cst.Attribute)):
        return True
    if not isinstance(exc, cst.Call):
        return False
    return all(isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString)) and a.keyword is None
               and not m.findall(a.value, m.FormattedString()) for a in exc.args)


def match(loc: Located) -> Match | Decline:
    node = loc.node
    if loc.in_loop:
        return Decline(NAME, "the check sits inside a loop, so Dynamo skipped the whole frame")
    if isinstance(node, cst.If):
        if node.orelse is not None:
            return Decline(NAME, "the raising `if` has an else/elif arm")
        stmts = node.body.body
        raise_stmt = stmts[0].body[0] if stmts and isinstance(stmts[0], cst.SimpleStatementLine) else None
        if len(stmts) != 1 or not isinstance(raise_stmt, cst.Raise):
            return Decline(NAME, "the guarded body does more than raise")
        if not constant_message(raise_stmt.exc):
            return Decline(NAME, "the exception message is formatted from runtime values (f-string or "
                                 "expression); restoring it would need the tensor values on the host")
        return Match(NAME, "if/raise -> torch._assert_async, exception type restored outside the graph")
    if isinstance(node, cst.Assert):
        if node.msg is not None and not isinstance(node.msg, (cst.SimpleString, cst.ConcatenatedString)):
            return Decline(NAME, "the assert message is formatted from runtime values")
        return Match(NAME, "assert -> torch._assert_async, AssertionError restored outside the graph")
    return Decline(NAME, "the check is not an `if ...: raise` or `assert` statement")
