"""What several rules ask of a local name's reads in a function: every read with whether a
nested scope captures it (:class:`NameWalk`), the statement a read sits in
(:func:`statement_of`), and how a read uses the value, in words (:func:`use_kind`)."""
from __future__ import annotations

import libcst as cst

# calls that read a function's locals by name: a screen of the names' reads cannot see them
DYNAMIC_SCOPE = {"locals", "vars", "eval", "exec", "globals"}


class NameWalk(cst.CSTVisitor):
    """Every Name node of ``names`` in a function, with the enclosing nested scope if any."""

    def __init__(self, names: set[str]):
        self.names = names
        self.found: list[tuple[cst.Name, bool]] = []
        self.depth = 0

    def _enter(self, node) -> bool:
        self.depth += 1
        return True

    def _leave(self, node) -> None:
        self.depth -= 1

    visit_FunctionDef = visit_Lambda = visit_ClassDef = _enter
    leave_FunctionDef = leave_Lambda = leave_ClassDef = _leave

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.found.append((node, self.depth > 0))


def statement_of(node: cst.CSTNode, parents) -> cst.CSTNode:
    cur = node
    while cur in parents and not isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        cur = parents[cur]
    return cur


def use_kind(name: cst.Name, parents) -> str:
    """How a later read of a value uses it, in words."""
    parent = parents.get(name)
    while isinstance(parent, (cst.LeftParen, cst.RightParen)):
        parent = parents.get(parent)
    if isinstance(parent, cst.Return):
        return "returned directly"
    negated = isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)
    tested = isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is name
    if isinstance(parent, cst.BooleanOperation) or negated or tested:
        return "used as a truth value (`if`, `while`, `and`, `or`, `not`: Python control flow)"
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
        return "compared"
    if isinstance(parent, cst.Arg):
        return "passed to a call"
    if isinstance(parent, cst.FormattedStringExpression):
        return "formatted into a string"
    if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del)):
        return "reassigned or deleted"
    if isinstance(parent, cst.Assign):
        return "stored (`... = n`)"
    if isinstance(parent, cst.Subscript) or isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice)):
        return "used as an index or slice bound"
    if isinstance(parent, cst.BinaryOperation):
        return "an operand of an operator other than +, - and *"
    if isinstance(parent, cst.UnaryOperation):
        return "negated or inverted on its own"
    return f"used as part of a {type(parent).__name__}" if parent is not None else "used"
