"""Encoder for a conditional deferred effect: ``if P: <print/log/warn call>`` became
``<rt>.defer_*_if(P, ...)`` (mend's deferred-side-effects, ``conditional.py``). A check:

* ``deferred-if-predicate``: (1) a source screen of the runtime: the ``_if`` entry points
  decide ``bool(P)`` first and return without effect when it is false; a snapshot of a
  one-element tensor ``P`` is the first tensor of its site and the replay performs the call
  only when it is true; (2) a static screen of the mended source against the original: the
  statement at the line is one ``defer_*_if`` call whose first argument is the original
  ``if`` test on the line above (the ``if`` line is now a comment, so the call keeps its
  line), and each other argument cannot raise or have an effect when evaluated where the
  original did not evaluate it: a constant, a name bound on every path to the call (a
  parameter; a name assigned by a plain earlier statement of the function's own body and
  deleted nowhere; a module-level name the function does not bind), or an f-string (no
  format spec) or the runtime's lazy ``fmt(template, ...)`` over those.
"""
from __future__ import annotations

import ast
import functools

from verifier.effects import runtime_screen
from verifier.encoders.base import Ctx, names_bound_by
from verifier.outcomes import Outcome, check_refuted, checked, unknown

BY = ("the source screen of the runtime (the `_if` calls decide `bool(P)` first; the replay performs a conditional "
      "site only when its first snapshot is true) and a static screen of the mended call against the original `if`")
_RUNTIME = [("_decide", "return bool(when)"), ("_print", "if decided is False:"), ("_log", "if decided is False:"),
            ("_warn", "if decided is False:"), ("_record", "tensors.insert(0, when)"),
            ("_perform", "_perform_site(site, tensors, ints)"), ("_perform_site", "if site.conditional:"),
            ("_perform_site", "if not bool(tensors[0]):")]


def _at(tree: ast.AST, line: int, kind):
    return next((n for n in ast.walk(tree) if isinstance(n, kind) and n.lineno == line), None)


def _function_of(tree: ast.AST, node: ast.AST):
    funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             and f.lineno <= node.lineno <= f.end_lineno]
    return max(funcs, key=lambda f: f.lineno) if funcs else None


def _binds(node: ast.AST, name: str) -> bool:
    """Whether ``node`` binds or unbinds ``name`` (a store or del, ``except ... as``, a match
    capture, an import, a def or class, global/nonlocal)."""
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return node.name == name
    if isinstance(node, ast.MatchMapping):
        return node.rest == name
    if isinstance(node, ast.ExceptHandler):
        return node.name == name
    return name in names_bound_by(node)


@functools.lru_cache(maxsize=4)
def _scopes(source: str):
    """``(ast tree, symtable)`` of a module's source, parsed once per source (a rewrite asks
    about each argument's name, and the check again)."""
    import symtable

    return ast.parse(source), symtable.symtable(source, "<mended>", "exec")


def why_unbound(source: str, line: int, name: str) -> str | None:
    """Why ``name`` may be unbound (or rebound) where the statement on ``line`` runs, read with
    Python's own scoping (``symtable``): None for a parameter of the innermost function never
    bound again there; a local bound once, by a plain assignment in the function's own body
    before that statement; a module-level name bound by a top-level statement and deleted
    nowhere; a builtin the module does not bind. A free (closure) name is never accepted."""
    import builtins

    tree, module_table = _scopes(source)
    funcs = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             and f.lineno <= line <= f.end_lineno]
    if not funcs:
        return "the call is not inside a function"
    func = max(funcs, key=lambda f: f.lineno)

    def find(table):
        if table.get_type() == "function" and table.get_name() == func.name and table.get_lineno() == func.lineno:
            return table
        return next((t for t in map(find, table.get_children()) if t is not None), None)

    table = find(module_table)
    if table is None:
        return f"the scope of `{func.name}` was not found"
    try:
        sym = table.lookup(name)
    except KeyError:
        return f"`{name}` is not read in `{func.name}`"
    own = {id(a) for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs, func.args.vararg,
                           func.args.kwarg] if a is not None}
    sites = [n for n in ast.walk(func) if n is not func and id(n) not in own and _binds(n, name)]
    if sym.is_free() or sym.is_nonlocal() or sym.is_declared_global():
        return f"`{name}` is a closure or declared global/nonlocal name, bound elsewhere on some paths"
    if sym.is_parameter():
        return None if not sites else f"the parameter `{name}` is bound again in the function"
    if sym.is_local():
        holder = next((s for s in func.body if s.lineno <= line <= s.end_lineno), None)
        first = [s for s in func.body[:func.body.index(holder)] if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in s.targets)] if holder is not None else []
        return None if len(sites) == 1 and first and first[0].targets[0] in sites else \
            f"`{name}` may be unbound where the call is (bound other than once, by a plain assignment before it)"
    top = [s for s in tree.body if any(_binds(n, name) for n in ([s] if not isinstance(s, ast.Assign) else s.targets))]
    dels = [n for n in ast.walk(tree) if isinstance(n, ast.Delete) and any(_binds(t, name) for t in n.targets)]
    anywhere = [n for n in ast.walk(tree) if _binds(n, name)]
    if dels:
        return f"`{name}` is deleted somewhere in the module"
    if top and all(isinstance(s, (ast.Assign, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) for s in top):
        return None
    if not anywhere and hasattr(builtins, name):
        return None
    return f"`{name}` is not bound by a top-level statement of the module"


def _safe_arg(value: ast.expr, source: str, line: int) -> bool:
    """Whether evaluating ``value`` on ``line`` cannot raise or have an effect: a constant, a name
    bound on every path (:func:`why_unbound`), an f-string without format specs or the runtime's
    lazy ``fmt`` over those."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Name):
        return why_unbound(source, line, value.id) is None
    if isinstance(value, ast.JoinedStr):
        return all(isinstance(p, ast.Constant) or (isinstance(p, ast.FormattedValue) and p.format_spec is None
                                                   and _safe_arg(p.value, source, line)) for p in value.values)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "fmt" \
            and isinstance(value.func.value, ast.Name) and _runtime_alias(_scopes(source)[0], value.func.value.id) \
            and value.args and isinstance(value.args[0], ast.Constant) and isinstance(value.args[0].value, str):
        # the runtime's lazy format: the template and values are kept, formatted at replay only
        return all(_safe_arg(a, source, line) for a in [*value.args[1:], *(k.value for k in value.keywords)])
    return False


def _runtime_alias(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` is bound in the module only by ``import mend.runtime as name``."""
    binds = [n for n in ast.walk(tree) if name in names_bound_by(n)]
    return bool(binds) and all(isinstance(n, ast.Import) and any(a.name == "mend.runtime" and a.asname == name
                                                                   for a in n.names) for n in binds)


def deferred_if(ob: dict, ctx: Ctx) -> Outcome:
    ok, text = runtime_screen(_RUNTIME)
    if not ok:
        return unknown(f"deferred-if-predicate rests on a runtime fact that does not hold here: {text}")
    if not ctx.code or not ctx.before:
        return unknown("no mended or original source to screen")
    try:
        new, old = ast.parse(ctx.code), ast.parse(ctx.before)
    except SyntaxError as exc:
        return unknown(f"a source does not parse ({exc})")
    line = ob.get("line")
    stmt = _at(new, line, ast.Expr)
    original = _at(old, line - 1 if isinstance(line, int) else None, ast.If)
    if stmt is None or not isinstance(stmt.value, ast.Call) or not isinstance(stmt.value.func, ast.Attribute) \
            or stmt.value.func.attr not in ("defer_print_if", "defer_log_if", "defer_warn_if") or not stmt.value.args:
        return check_refuted(BY, f"line {line} of the mended source is not one defer_*_if(...) call")
    call = stmt.value
    if original is None or original.orelse or len(original.body) != 1 or original.body[0].lineno != line:
        return check_refuted(BY, f"the original has no `if` on line {line - 1} whose one statement is on line {line}")
    if ast.dump(call.args[0]) != ast.dump(original.test):
        return check_refuted(BY, f"the call's first argument `{ast.unparse(call.args[0])}` is not the original test "
                                 f"`{ast.unparse(original.test)}`")
    if _function_of(new, stmt) is None:
        return check_refuted(BY, "the call is not inside a function")
    rest = call.args[1:] + [k.value for k in call.keywords]   # a logger too: evaluated either way now
    bad = next((a for a in rest if isinstance(a, ast.Starred) or not _safe_arg(a, ctx.code, stmt.lineno)), None)
    if bad is not None:
        return check_refuted(BY, f"the argument `{ast.unparse(bad)}` may raise or be unbound where the original "
                                 "`if` did not evaluate it")
    return checked(f"{BY} ({text})",
                   ["`if P:` evaluates `bool(P)` (Python's truth test) exactly once; the snapshot "
                    "`P.detach().clone()` has P's value, so its bool is the same",
                    "a tensor P of another size than one element is read where the call is, as the `if` read "
                    "it (a graph break, or the same RuntimeError)"])


ENCODERS = {"deferred-if-predicate": deferred_if}
CHECKS = frozenset(ENCODERS)
