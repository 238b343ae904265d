"""Which names a module binds, and how: shared by the rules that must know a name is the
library's own (``np`` bound only by ``import numpy as np``, ``torch`` by ``import torch``)
and that no builtin their rewrite calls is rebound."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._common import code_of, dotted, find_all, target_names

_target_names = target_names   # the rules import it from here too


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


# names through which a module can rebind any global or builtin by a computed name
_NAMESPACE_WRITERS = frozenset({"globals", "vars", "locals", "__builtins__", "builtins"})
_FUNCTION_SCOPES = (cst.FunctionDef, cst.Lambda)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_SCOPES = (cst.Module, cst.ClassDef, *_FUNCTION_SCOPES, *_COMPREHENSIONS)


class _ScopedBindings(_Bindings):
    """:class:`_Bindings`, each binding with the scope it lands in (``None``: ``global`` or
    ``nonlocal``, which reach another scope), and the ancestors of one node."""

    def __init__(self, module: cst.Module, target: cst.CSTNode) -> None:
        super().__init__(module)
        self.target = target
        self.scoped: list[tuple[str, cst.CSTNode | None]] = []
        self.path: list[cst.CSTNode] = []

    def _add(self, name: str, how: tuple) -> None:
        super()._add(name, how)
        node = self.stack[-1]
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            self.scoped.append((name, None))
            return
        if isinstance(node, _FUNCTION_SCOPES + (cst.ClassDef,)):
            outer = self.stack[:-1]       # a def's or class's name binds around it
        else:
            outer = self.stack
        if isinstance(node, cst.Param):
            scope = next(s for s in reversed(outer) if isinstance(s, _FUNCTION_SCOPES))
        elif isinstance(node, cst.NamedExpr):   # PEP 572: a comprehension's walrus binds outside it
            scope = next(s for s in reversed(outer) if isinstance(s, _SCOPES) and not isinstance(s, _COMPREHENSIONS))
        else:
            scope = next(s for s in reversed(outer) if isinstance(s, _SCOPES))
        self.scoped.append((name, scope))

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self.target:
            self.path = list(self.stack)
        return super().on_visit(node)


def bound_in_reach(module: cst.Module, target: cst.CSTNode, names) -> list[str]:
    """Of ``names`` (builtins a rewrite at ``target`` calls), those a binding could make mean
    something else there: bound in the module's scope, in a function, lambda or comprehension
    around ``target``, in a class around it with no function in between (a method does not see
    its class's names), by ``global``/``nonlocal`` anywhere, or every name where the module
    star-imports or names ``globals``/``vars``/``locals``/``builtins`` at all (helper-87:
    ``globals()["sum"] = math.fsum``). A parameter or local of another function cannot reach it (helper-79's c09:
    ``def clamp(x, min=0.0, max=1.0)`` elsewhere in the file declined every numpy site)."""
    visitor = _ScopedBindings(module, target)
    module.visit(visitor)
    if "*" in visitor.names or any(n.value in _NAMESPACE_WRITERS for n in find_all(module, m.Name())):
        return sorted(set(names))   # `globals()["sum"] = ...`, `builtins.max = ...` (helper-87)
    reach, crossed = {id(module)}, False
    for up in reversed(visitor.path):
        if isinstance(up, (*_FUNCTION_SCOPES, *_COMPREHENSIONS)):
            reach.add(id(up))
            crossed = crossed or isinstance(up, _FUNCTION_SCOPES)
        elif isinstance(up, cst.ClassDef) and not crossed:
            reach.add(id(up))
    return sorted({name for name, scope in visitor.scoped if name in names and (scope is None or id(scope) in reach)})
