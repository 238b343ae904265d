"""Static, conservative checks on LibCST statements shared by the rule matchers (a module
whose name starts with ``_`` is not a rule: discovery skips it).

These are syntactic screens. The verifier (``verifier/``) decides purity from operator
schemas; a matcher only rejects what is obviously out of scope.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m


_EMPTY = cst.Module([])


def code_of(node: cst.CSTNode) -> str:
    """Source text of ``node`` (default formatting of an empty module)."""
    return _EMPTY.code_for_node(node)


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        return ".".join([node.value, *reversed(parts)])
    return None


def simple_statements(block) -> list[cst.BaseSmallStatement] | None:
    """The small statements of a block, or None when it holds a compound statement."""
    out = []
    for stmt in block.body if hasattr(block, "body") else block:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        out.extend(stmt.body)
    return out


def inplace_call(node: cst.CSTNode) -> str | None:
    """The name of an in-place tensor method called anywhere in ``node`` (``add_``...)."""
    for call in m.findall(node, m.Call(func=m.Attribute())):
        attr = call.func.attr.value
        if attr.endswith("_") and not attr.endswith("__") and not attr.startswith("_"):
            return attr
    return None


def has_out_kwarg(node: cst.CSTNode) -> bool:
    return bool(m.findall(node, m.Arg(keyword=m.Name("out"))))


def assigned_name(stmt: cst.BaseSmallStatement) -> str | None:
    """``x`` for ``x = ...`` (single plain-name target), else None."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name):
        return stmt.targets[0].target.value
    if isinstance(stmt, cst.AnnAssign) and isinstance(stmt.target, cst.Name) and stmt.value is not None:
        return stmt.target.value
    return None


class Replace(cst.CSTTransformer):
    """Replace one node (by identity) wherever it sits in the tree."""

    def __init__(self, target: cst.CSTNode, replacement: cst.CSTNode):
        self.target, self.replacement = target, replacement

    def on_leave(self, original_node, updated_node):
        return self.replacement if original_node is self.target else updated_node
