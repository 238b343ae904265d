"""What ``__init__`` reads that the module may change later, for the constant-buffer encoders
(:mod:`verifier.encoders.constant_buffer`): the leaves a registered value reads (``self.conv.stride``),
and the writes that reach them, directly or through an alias (``conv = self.conv; conv.stride = ...``,
``sizes = self.sizes; sizes[0] = k``: helper-58)."""
from __future__ import annotations

import ast


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name), None)


def _method(klass: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((f for f in klass.body if isinstance(f, ast.FunctionDef) and f.name == name), None)


def _chain(node: ast.AST, root: str | None = None) -> list[str] | None:
    """``self.a[0].b`` -> ``["a", "b"]`` (items and calls stepped over), or None if not rooted
    in a name (in the name ``root``, when given)."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        else:
            node = node.value if isinstance(node, ast.Subscript) else node.func
    rooted = isinstance(node, ast.Name) and (root is None or node.id == root)
    return list(reversed(parts)) if rooted else None


def _leaf_writes(tree: ast.Module, value: ast.AST, cname: str) -> str | None:
    """A ``self.a.b`` leaf of ``value`` (or a prefix, ``.a``) that may change after ``__init__``,
    or None: assigned (an item of it too: ``self.lengths[0] = n``), deleted, or the receiver of
    a method call (``.append``) anywhere in the module outside ``cname.__init__``; in another
    class's ``__init__`` only a one-level ``self.a = ...`` is that instance's own (``self.c.limit
    = 16`` in a parent's ``__init__`` is not); a leaf that is a property or method of a class of
    the module is computed, not stored (fourth review)."""
    chains = [c for n in ast.walk(value) if isinstance(n, ast.Attribute)
              for c in [_chain(n, "self")] if c]
    prefixes = {tuple(c[:k]) for c in chains for k in range(1, len(c) + 1)}
    defined = {f.name for k in ast.walk(tree) if isinstance(k, ast.ClassDef) for f in k.body
               if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    computed = sorted({p for c in chains for p in c} & defined)
    if computed:
        return f"`self.{computed[0]}`, a property or method of a class of the module (computed on each read)"
    klass = _class(tree, cname)
    own_init = _method(klass, "__init__") if klass else None
    skip = {id(x) for x in ast.walk(own_init)} if own_init is not None else set()
    inits = {id(x) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "__init__"
             for x in ast.walk(f)}

    # any stretch of a leaf chain: a write reaching it through an alias (`conv = self.conv;
    # conv.stride = (s,)`) names only its tail (helper-58)
    stretches = {tuple(c[i:j]) for c in chains for i in range(len(c)) for j in range(i + 1, len(c) + 1)}

    def hit(parts: list[str] | None, anywhere: bool = False) -> str | None:
        for k in range(1, len(parts or []) + 1):
            if tuple(parts[-k:]) in prefixes:
                return f"`self.{'.'.join(parts[-k:])}`, which the module changes after `__init__`"
            if anywhere and tuple(parts[-k:]) in stretches:
                return f"`{'.'.join(parts[-k:])}` of `self.{'.'.join(next(c for c in chains if _has(c, parts[-k:])))}`" \
                       ", which the module may change after `__init__` (through another name)"
        return None

    # names bound to a value reaching a leaf (`sizes = self.sizes`): a write through them is one to it
    aliases = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign) and id(n) not in skip
               and _plain_chain(n.value) for t in n.targets if isinstance(t, ast.Name) and
               hit(_chain(n.value), anywhere=True)}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            for t in node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]:
                if id(node) in inits and isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                        t.value.id == "self":
                    continue    # another class's own attribute, set as it is built
                if _root_name(t) in aliases and (not isinstance(t, ast.Name) or isinstance(node, ast.AugAssign)):
                    return f"`{ast.unparse(t)}`, written at line {node.lineno} through an alias of what `__init__` reads"
                for leaf in ast.walk(t):
                    if isinstance(leaf, (ast.Attribute, ast.Subscript)):
                        rooted_self = _chain(leaf, "self") is not None
                        found = hit(_chain(leaf), anywhere=not rooted_self)
                        if found:
                            return found
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and id(node) not in inits:
            if _root_name(node.func.value) in aliases and (node.func.attr in _MUTATORS or (
                    node.func.attr.endswith("_") and not node.func.attr.endswith("__"))):
                return f"`{ast.unparse(node.func.value)[:60]}`, which `{ast.unparse(node)[:60]}` (line {node.lineno}) " \
                       "may change through an alias of what `__init__` reads"
            found = hit(_chain(node.func.value))
            if found:
                return found
    return None


_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "sort",
             "reverse", "__setitem__", "__delitem__", "__setattr__", "__iadd__", "__isub__", "__imul__"}


def _plain_chain(node: ast.AST) -> bool:
    """``a.b[0].c``: attributes and constant subscripts of a name, no call (a call's result is
    not the object the chain names)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def _has(chain: list[str], part: list[str]) -> bool:
    n = len(part)
    return any(chain[i:i + n] == list(part) for i in range(len(chain) - n + 1))


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None
