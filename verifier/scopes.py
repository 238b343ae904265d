"""Name bindings in Python source, for the static screens (no z3, no torch: ``mend``'s rules
import it at start-up too)."""
from __future__ import annotations

import ast


def stores(tree: ast.AST, name: str, skip=None) -> int:
    """How many times ``tree`` binds ``name`` (assignments, deletions, imports, ``except``
    names, defs and classes, parameters, ``match`` captures; ``skip``, a node, is not counted itself); a
    ``global``/``nonlocal`` of it counts 99."""
    count = 0
    for n in ast.walk(tree):
        if n is skip:
            continue
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)) or \
                isinstance(n, ast.arg) and n.arg == name or \
                isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name or \
                isinstance(n, ast.ExceptHandler) and n.name == name or \
                isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name or \
                isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name == name or \
                isinstance(n, ast.MatchMapping) and n.rest == name:   # `case type:` binds too
            count += 1
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            count += 99
    return count
