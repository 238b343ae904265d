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


PY_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "update", "setdefault", "clear", "remove",
                "discard", "register_buffer", "register_parameter", "register_module", "add_module"}


def state_change(function: cst.FunctionDef) -> str | None:
    """The first statement of ``function`` that changes state, as code, else None."""
    for stmt in m.findall(function.body, m.SimpleStatementLine()):
        for small in stmt.body:
            if inplace_call(small) or has_out_kwarg(small) or m.findall(
                    small, m.Arg(keyword=m.Name("inplace"), value=m.Name("True"))):
                return code_of(small).strip()
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            elif isinstance(small, cst.AugAssign):
                return code_of(small).strip()
            elif isinstance(small, cst.Del):
                targets = [small.target]
            elif isinstance(small, (cst.Global, cst.Nonlocal)):
                return code_of(small).strip()
            for target in targets:
                if m.findall(target, m.Attribute() | m.Subscript()) and not isinstance(target, cst.Name):
                    return code_of(small).strip()
            for call in m.findall(small, m.Call()):
                name = dotted(call.func) or ""
                if name in ("setattr", "delattr", "object.__setattr__") or name.split(".")[-1] in PY_MUTATORS:
                    return code_of(small).strip()
    return None


def enclosing_handler(inner: list[cst.CSTNode]) -> str | None:
    """The first handler among ``inner`` (the statements between a function and a site) that
    would see an exception differently once it is raised inside a compiled graph: ``"try"``
    for a ``try``, the item's source for a ``with`` that is not a ``torch.`` context; None."""
    for node in inner:
        if isinstance(node, cst.Try):
            return "try"
        if isinstance(node, cst.With):
            for item in node.items:
                ctx = item.item.func if isinstance(item.item, cst.Call) else item.item
                if not (dotted(ctx) or "").startswith("torch."):
                    return code_of(item.item).strip()
    return None
