"""Which names a module binds, and how: shared by the rules that must know a name is the
library's own (``np`` bound only by ``import numpy as np``, ``torch`` by ``import torch``)
and that no builtin their rewrite calls is rebound."""
from __future__ import annotations

import libcst as cst

from mend.rules._common import code_of, dotted

def _target_names(node: cst.CSTNode | None) -> list[str]:
    """Names bound by an assignment target (``a``, ``a, (b, *c)``); attributes and items bind none."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for el in node.elements for n in _target_names(el.value)]
    if isinstance(node, cst.StarredElement):
        return _target_names(node.value)
    return []


class _Bindings(cst.CSTVisitor):
    """Every name a module binds, anywhere, with what binds it: ``("import", "numpy",
    top_level)`` for ``import numpy as NAME``, ``("other", code)`` for anything else."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.top = {id(s) for s in module.body}
        self.stack: list[cst.CSTNode] = []
        self.names: dict[str, list[tuple]] = {}

    def _add(self, name: str, how: tuple) -> None:
        self.names.setdefault(name, []).append(how)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        other = ("other", type(node).__name__)
        if isinstance(node, cst.Import):
            top = len(self.stack) >= 2 and id(self.stack[-2]) in self.top
            for alias in node.names:
                full = dotted(alias.name) or ""
                if alias.asname is not None:
                    for n in _target_names(alias.asname.name):
                        self._add(n, ("import", full, top))
                else:
                    root = full.split(".")[0]
                    self._add(root, ("import", root if "." not in full else full + " (package)", top))
        elif isinstance(node, cst.ImportFrom):
            if isinstance(node.names, cst.ImportStar):
                self._add("*", other)
            else:
                for alias in node.names:
                    n = alias.asname.name if alias.asname is not None else alias.name
                    for name in _target_names(n) if isinstance(n, cst.Name) else [code_of(n)]:
                        self._add(name, other)
        elif isinstance(node, cst.AssignTarget):
            for n in _target_names(node.target):
                self._add(n, other)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            for n in _target_names(node.target):
                self._add(n, other)
        elif isinstance(node, (cst.For, cst.CompFor)):
            for n in _target_names(node.target):
                self._add(n, other)
        elif isinstance(node, cst.NamedExpr):
            for n in _target_names(node.target):
                self._add(n, other)
        elif isinstance(node, cst.AsName):
            for n in _target_names(node.name):
                if not isinstance(self.stack[-2] if len(self.stack) > 1 else None, cst.ImportAlias):
                    self._add(n, other)
        elif isinstance(node, cst.Param):
            self._add(node.name.value, other)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._add(node.name.value, other)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                self._add(item.name.value, other)
        elif isinstance(node, cst.Del):
            for n in _target_names(node.target):
                self._add(n, other)
        elif isinstance(node, (cst.MatchAs, cst.MatchStar)) and node.name is not None:
            self._add(node.name.value, other)   # `case name:` binds (helper-43)
        elif isinstance(node, cst.MatchMapping) and node.rest is not None:
            self._add(node.rest.value, other)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def bindings(module: cst.Module) -> dict[str, list[tuple]]:
    visitor = _Bindings(module)
    module.visit(visitor)
    return visitor.names


def module_alias(binds: dict[str, list[tuple]], name: str, module_name: str) -> bool:
    """``name`` is bound only by ``import MODULE [as name]``, at least once at the top level."""
    how = binds.get(name, [])
    return bool(how) and "*" not in binds and all(h[0] == "import" and h[1] == module_name for h in how) and any(
        h[2] for h in how)


def aliases(binds: dict[str, list[tuple]], module_name: str) -> set[str]:
    return {n for n in binds if module_alias(binds, n, module_name)}
