"""setup-guard: which sites the rule takes, why it declines the others, and :func:`match`, a
scan's verdict on a located site.

A site qualifies when the break sits in a module-level function ``G`` that begins with an
early return (``if P: return``), or in a function that ``G`` reaches after that check through
plain-name calls of the same module (at most :data:`MAX_DEPTH` calls deep), and ``G`` is
called as a statement of its own. The screen reads the whole module with LibCST and imports
nothing; the verifier screens the mended file again on its own (``guard-hoisted``)."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._bindings import bindings
from mend.rules._common import code_of, dotted, find_all, one_line

NAME = "setup-guard"
MAX_DEPTH = 4
# builtins a hoisted check may call: each reads, none writes (an attribute read is the only
# code they can run, and the attribute reads are observed; isinstance is left out: a
# metaclass's __instancecheck__ may run anything)
PURE_BUILTINS = frozenset({"getattr", "hasattr", "callable"})
# attribute-reading builtins: (object, "name") is read
READERS = frozenset({"getattr", "hasattr"})


@dataclass
class CallSite:
    line: cst.SimpleStatementLine   # the statement line holding ``G(args)`` alone
    call: cst.Call
    start: int                      # its line in the module
    check: str                      # P with G's parameters replaced by the call's arguments
    reads: list[tuple[str, str]]    # (object name at the call, attribute) the check reads


@dataclass
class Plan:
    module: cst.Module              # the module the nodes below belong to
    guarded: cst.FunctionDef        # G
    guard_line: int                 # the line of G's ``if P: return``
    check: cst.BaseExpression       # P
    sites: list[CallSite]           # G's statement calls to hoist the check into


def _generic(category: str = "hook-or-lock") -> Decline:
    from mend.taxonomy import UNFIXABLE_REASONS

    return Decline(None, UNFIXABLE_REASONS[category])


def _positions(module: cst.Module):
    wrapper = MetadataWrapper(module)
    return wrapper, wrapper.resolve(PositionProvider)


def _top_functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}


def _body(fn: cst.FunctionDef) -> list:
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    if body and m.matches(body[0], m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString()
                                                                       | m.ConcatenatedString())])):
        body = body[1:]   # the docstring
    while body and m.matches(body[0], m.SimpleStatementLine(body=[m.Global() | m.Nonlocal()])):
        body = body[1:]   # declarations: they run nothing
    return body


def early_return(fn: cst.FunctionDef) -> cst.If | None:
    """``fn``'s first statement (after a docstring) when it is ``if P: return`` / ``return
    None`` with no ``else``, else None."""
    body = _body(fn)
    first = body[0] if body else None
    if not isinstance(first, cst.If) or first.orelse is not None or not isinstance(first.body, cst.IndentedBlock):
        return None
    inner = first.body.body
    if len(inner) != 1 or not m.matches(inner[0], m.SimpleStatementLine(
            body=[m.Return(value=None) | m.Return(value=m.Name("None"))])):
        return None
    return first


def _own_nodes(fn: cst.FunctionDef):
    """The nodes of ``fn``'s own body, nested functions, lambdas and classes left out."""
    out = []

    class V(cst.CSTVisitor):
        def on_visit(self, node):
            if node is not fn and isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            out.append(node)
            return True
    fn.visit(V())
    return out


def _params(fn: cst.FunctionDef) -> tuple[list[cst.Param], list[cst.Param], bool, bool]:
    """(positional params in order, keyword-only params, has *args, has **kwargs)."""
    p = fn.params
    star = isinstance(p.star_arg, cst.Param)
    return [*p.posonly_params, *p.params], list(p.kwonly_params), star, p.star_kwarg is not None


def _free_names(expr: cst.CSTNode) -> list[str]:
    """The names ``expr`` reads (an attribute's or a keyword's own name is not a read)."""
    skip = {id(a.attr) for a in m.findall(expr, m.Attribute())} | {
        id(a.keyword) for a in m.findall(expr, m.Arg()) if a.keyword is not None}
    if isinstance(expr, cst.Name):
        return [expr.value]
    return [n.value for n in m.findall(expr, m.Name()) if id(n) not in skip]


def check_shape(expr: cst.BaseExpression) -> str | None:
    """Why ``expr`` is not a check the rule hoists, else None: names, attribute reads,
    constants, ``not``/``and``/``or``, ``is``/``is not`` and calls of :data:`PURE_BUILTINS`
    (an ``==`` may run a user's ``__eq__``; any other call may write)."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.SimpleString)):
        return None
    if isinstance(expr, cst.Attribute):
        return check_shape(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return check_shape(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return check_shape(expr.left) or check_shape(expr.right)
    if isinstance(expr, cst.Comparison):
        if not all(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in expr.comparisons):
            return "it compares with an operator other than `is`/`is not` (which may run a user's `__eq__`)"
        sides = [expr.left, *(t.comparator for t in expr.comparisons)]
        if len(sides) != 2 or not any(isinstance(x, cst.Name) and x.value == "None" for x in sides):
            # helper-45: Dynamo traces `x is _last` on a tensor as a constant, without a guard
            return "it compares identity with something other than `None` (Dynamo may not guard that identity)"
        return check_shape(expr.left) or next(filter(None, (check_shape(t.comparator) for t in expr.comparisons)),
                                              None)
    if isinstance(expr, cst.Call):
        if not isinstance(expr.func, cst.Name) or expr.func.value not in PURE_BUILTINS:
            return f"it calls `{code_of(expr.func)}`, which may have effects"
        if any(a.star or a.keyword is not None for a in expr.args):
            return "it passes starred or keyword arguments"
        if expr.func.value in READERS and (len(expr.args) < 2 or not isinstance(expr.args[1].value, cst.SimpleString)):
            return (f"it reads an attribute by a computed name (`{code_of(expr).strip()}`): which attribute is read, "
                    "and whether that read runs code, cannot be observed")
        return next(filter(None, (check_shape(a.value) for a in expr.args)), None)
    return f"it holds `{code_of(expr)}`, which the rule does not evaluate twice"


def _reads(expr: cst.BaseExpression) -> list[tuple[str, str]]:
    """(object, attribute) for every attribute ``expr`` reads: ``o.a``, ``getattr(o, "a", d)``,
    ``hasattr(o, "a")`` (``o`` a dotted name)."""
    out = []
    for node in m.findall(expr, m.Attribute() | m.Call()):
        if isinstance(node, cst.Attribute):
            owner = dotted(node.value)
            if owner:
                out.append((owner, node.attr.value))
        elif isinstance(node.func, cst.Name) and node.func.value in READERS and len(node.args) >= 2:
            owner, key = dotted(node.args[0].value), node.args[1].value
            if owner and isinstance(key, cst.SimpleString):   # check_shape admits no other key
                out.append((owner, key.evaluated_value))
    return out


def truth_tested(expr: cst.BaseExpression) -> list[str]:
    """The parts of a check whose truth value Python takes (``bool()``, which may run a
    user's ``__bool__``): the check itself and the operands of ``not``/``and``/``or``, down
    to what is not a boolean result already (a comparison, ``hasattr``, ``callable``)."""
    if isinstance(expr, cst.UnaryOperation):
        return truth_tested(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return truth_tested(expr.left) + truth_tested(expr.right)
    if isinstance(expr, cst.Comparison) or (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)
                                            and expr.func.value in PURE_BUILTINS - {"getattr"}):
        return []
    return [one_line(code_of(expr))]


def gated(check: str) -> str | None:
    """The hoisted test for ``check``: ``check`` itself when it takes no value's truth (an
    attribute of a literal aside); ``type(T) is bool and T`` for ``T``, ``T is None or
    (type(T) is bool and not T)`` for ``not T``; None for any other check that takes a
    value's truth (declined). The test implies ``check`` and runs no user code (``is`` never
    dispatches: helper-45's metaclass ``__eq__`` answered a ``type(T) in (...)`` gate); where
    ``T`` is another object it is False, so the call runs and the function's own check takes
    that object's truth once, as before (helper-43/44); and it evaluates what ``check`` does, in
    the same order (a gate over several parts lost ``and``/``or`` short-circuits: helper-45)."""
    expr = cst.parse_expression(check)
    parts = [t for t in truth_tested(expr) if not _rooted_in_literal(t)]
    if not parts:
        return check
    if len(parts) > 1:
        return None
    (t,) = parts
    if one_line(code_of(expr)) == t:
        return f"type({t}) is bool and {t}"
    if isinstance(expr, cst.UnaryOperation) and one_line(code_of(expr.expression)) == t:
        return f"{t} is None or (type({t}) is bool and not {t})"
    return None


def _rooted_in_literal(part: str) -> bool:
    """``(1).imag``: an attribute of a literal, whose truth runs no user code."""
    expr = cst.parse_expression(part)
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return _literal(expr)


class _Substitute(cst.CSTTransformer):
    """Replace parameter names by argument expressions (attribute and keyword names kept)."""

    def __init__(self, values: dict[str, cst.BaseExpression]):
        self.values = values

    def leave_Name(self, original_node, updated_node):
        value = self.values.get(original_node.value, updated_node)
        if isinstance(value, (cst.Integer, cst.Float)):   # `(1).imag`, not `1.imag` (helper-41)
            return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return value

    def leave_Attribute(self, original_node, updated_node):
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node, updated_node):
        return updated_node.with_changes(keyword=original_node.keyword)


def bind_call(fn: cst.FunctionDef, call: cst.Call) -> dict[str, cst.BaseExpression] | str:
    """Parameter -> argument (or the literal default) for ``call`` of ``fn``, or why the call
    cannot be shown to bind (then skipping it could lose the TypeError it raises)."""
    positional, kwonly, star, starstar = _params(fn)
    if any(a.star for a in call.args):
        return "it passes `*`/`**` arguments"
    out: dict[str, cst.BaseExpression] = {}
    pos = [a for a in call.args if a.keyword is None]
    if len(pos) > len(positional) and not star:
        return "it passes more positional arguments than the function takes"
    for param, arg in zip(positional, pos):
        out[param.name.value] = arg.value
    names = {p.name.value: p for p in [*positional, *kwonly]}
    posonly = {p.name.value for p in fn.params.posonly_params}
    for arg in (a for a in call.args if a.keyword is not None):
        key = arg.keyword.value
        if key not in names or key in posonly:
            if starstar and key not in posonly:
                continue
            return f"it passes a keyword `{key}` the function does not take"
        if key in out:
            return f"it passes `{key}` twice"
        out[key] = arg.value
    for name, param in names.items():
        if name not in out:
            if param.default is None:
                return f"it does not pass the required parameter `{name}`"
            out[name] = param.default
    return out


LITERAL_NAMES = frozenset({"None", "True", "False"})


def _literal(node: cst.BaseExpression) -> bool:
    """A literal: its value is fixed where it is written (a default evaluated at ``def`` time
    equals it at the call; a name there would be read again, later: helper-41)."""
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)) or (
        isinstance(node, cst.Name) and node.value in LITERAL_NAMES)


def _params_of(fn: cst.FunctionDef) -> set[str]:
    """Every parameter name of ``fn``, ``*args``/``**kwargs`` included."""
    p = fn.params
    extra = [p.star_arg] if isinstance(p.star_arg, cst.Param) else []
    extra += [p.star_kwarg] if p.star_kwarg is not None else []
    return {q.name.value for q in [*p.posonly_params, *p.params, *p.kwonly_params, *extra]}


def _always_bound(node: cst.BaseExpression, caller: cst.FunctionDef) -> bool:
    """A literal, or a parameter of ``caller`` that nothing in it deletes: evaluating it again,
    or not at all, changes nothing and cannot raise (a local may be unbound, and skipping
    the call would skip its UnboundLocalError: helper-41)."""
    if _literal(node):
        return True
    if not isinstance(node, cst.Name) or node.value not in _params_of(caller):
        return False
    return not any(isinstance(t, cst.Name) and t.value == node.value
                   for d in m.findall(caller, m.Del()) for t in m.findall(d, m.Name()))


def _function_of(stack: list[cst.CSTNode]) -> cst.FunctionDef | None:
    """The outermost function in ``stack`` (its whole subtree is the caller's scope chain)."""
    return next((n for n in stack if isinstance(n, cst.FunctionDef)), None)


def _innermost(stack: list[cst.CSTNode]) -> cst.FunctionDef | None:
    return next((n for n in reversed(stack) if isinstance(n, cst.FunctionDef)), None)


# ways to rebind a module's function, its defaults or its builtins without a binding the
# screen sees (helper-41: `globals()["G"] = wrap(G)`; helper-43: `f.__globals__[...]`,
# `sys._getframe().f_globals`, `G.__defaults__ = ...`, `__builtins__ = {...}`): any of these
# names anywhere in the module (as a name or an attribute), or `modules` of `sys`, declines
NAMESPACE_ACCESS = frozenset({"globals", "vars", "__globals__", "f_globals", "_getframe", "__import__",
                              "importlib", "__builtins__", "__defaults__", "__kwdefaults__", "__code__", "__dict__",
                              "exec", "eval"})
SETTERS = frozenset({"setattr", "__setattr__"})


def namespace_access(mod: cst.Module, name: str = "") -> str | None:
    """The first name in ``mod`` through which it may rebind the function ``name`` or a
    builtin (:data:`NAMESPACE_ACCESS`, ``sys.modules`` under any spelling, an attribute store
    ``X.<name> = ...`` (the module imported under another name), a ``setattr`` whose name is
    ``name`` or not a literal), else None."""
    for node in find_all(mod, m.AssignTarget() | m.AugAssign() | m.AnnAssign()):
        target = node.target
        if isinstance(target, cst.Attribute) and target.attr.value == name:
            return f"{code_of(target)} = ..."
    for call in find_all(mod, m.Call()):
        fn = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", None)
        if fn in SETTERS:
            key = call.args[1].value if len(call.args) >= 2 else None
            if not isinstance(key, cst.SimpleString) or key.evaluated_value == name:
                return f"{fn}({', '.join(code_of(a.value) for a in call.args[:2])}, ...)"
    sys_names = {a.asname.name.value if a.asname else "sys" for imp in find_all(mod, m.Import())
                 for a in imp.names if (dotted(a.name) or "") == "sys" and (a.asname is None or
                                                                                isinstance(a.asname.name, cst.Name))}
    for imp in find_all(mod, m.ImportFrom()):
        if (dotted(imp.module) if imp.module else "") == "sys" and not isinstance(imp.names, cst.ImportStar) \
                and any(a.name.value == "modules" for a in imp.names if isinstance(a.name, cst.Name)):
            return "sys.modules"
    for node in find_all(mod, m.Attribute()):
        if node.attr.value == "modules" and isinstance(node.value, cst.Name) and node.value.value in sys_names:
            return "sys.modules"
    return next((n.value for n in find_all(mod, m.Name()) if n.value in NAMESPACE_ACCESS), None)


def _binds(scope: cst.CSTNode) -> set[str]:
    """Every name ``scope`` (a function, nested scopes included) binds."""
    return set(bindings(cst.Module(body=[scope])) if isinstance(scope, cst.FunctionDef) else ())


class _Calls(cst.CSTVisitor):
    """Calls of plain names, with the ancestors of each."""

    def __init__(self):
        self.stack: list[cst.CSTNode] = []
        self.calls: list[tuple[cst.Call, list[cst.CSTNode]]] = []

    def on_visit(self, node):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
            self.calls.append((node, list(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node):
        self.stack.pop()


def alias_of(name: str) -> str:
    """The module-level name the rewrite binds to ``G`` right after its ``def``: the hoisted
    test compares the called name with it, so a ``G`` replaced from outside the module (a
    monkeypatch, ``mock.patch``) or a caller's own binding of the name is called as before."""
    return f"_mend_setup_guard_{name}"


def hoisted_test(name: str, check: str) -> str:
    """The hoisted test (without the leading ``not``): the called name is still the function
    whose check is hoisted, and the gated check holds."""
    return f"{name} is {alias_of(name)} and ({check})"


def alias_problem(mod: cst.Module, fn: cst.FunctionDef, binds: dict) -> str | None:
    """Why the alias of ``fn`` cannot be bound, or None. ``binds`` is :func:`bindings` of
    ``mod``. Bound already, it must be bound only by ``<alias> = <G>`` as the statement right
    after ``G``'s ``def`` (an earlier rewrite); unbound, the statement after ``G`` (if any) must
    be preceded by a blank line, which the alias takes (no line moves)."""
    alias, name = alias_of(fn.name.value), fn.name.value
    at = next(i for i, s in enumerate(mod.body) if s is fn)
    nxt = mod.body[at + 1] if at + 1 < len(mod.body) else None
    if alias in binds:
        if len(binds[alias]) == 1 and m.matches(nxt, m.SimpleStatementLine(body=[m.Assign(
                targets=[m.AssignTarget(target=m.Name(alias))], value=m.Name(name))])):
            return None
        return f"the module binds `{alias}` otherwise, the name the rewrite would bind to `{name}`"
    if nxt is None or (nxt.leading_lines and nxt.leading_lines[0].comment is None):
        return None
    return (f"no blank line follows `{name}`'s `def` to hold `{alias} = {name}` (the alias the hoisted test "
            "compares with): a new line would move every line below it")


def _hoisted_already(stmt_line: cst.SimpleStatementLine, stack: list, check: str) -> bool:
    """The call is the whole body of an ``if not (<hoisted test>):`` (a hoisted check of the same text)."""
    at = next((i for i, n in enumerate(stack) if n is stmt_line), None)
    parent = stack[at - 1] if at is not None and at >= 1 else None
    grand = stack[at - 2] if at is not None and at >= 2 else None
    if not isinstance(parent, cst.IndentedBlock) or not isinstance(grand, cst.If) or len(parent.body) != 1:
        return False
    test = grand.test
    if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
        return False
    inner = test.expression
    text = code_of(inner.with_changes(lpar=[], rpar=[])) if hasattr(inner, "lpar") else code_of(inner)
    name = stmt_line.body[0].value.func.value
    return one_line(text) == one_line(hoisted_test(name, check))


def _chain(funcs: dict[str, cst.FunctionDef], pos, site_fn: cst.FunctionDef, line: int, calls):
    """The nearest function that begins with an early return and reaches the site after it:
    ``site_fn`` itself when ``line`` follows its check, else a caller (by plain name, in this
    module) whose call toward the site follows its check. (function, its ``if``) or None."""
    frontier, seen = [(site_fn, line)], {site_fn.name.value}
    for _ in range(MAX_DEPTH + 1):
        nxt = []
        for fn, at in frontier:
            guard = early_return(fn)
            if guard is not None and at > pos[guard].end.line:
                return fn, guard
            for call, stack in calls:
                if call.func.value != fn.name.value:
                    continue
                caller = _function_of(stack)
                if caller is None or caller.name.value not in funcs or funcs[caller.name.value] is not caller:
                    continue   # a method or nested function: not followed
                if caller.name.value not in seen:
                    seen.add(caller.name.value)
                    nxt.append((caller, pos[call].start.line))
        frontier = nxt
    return None


def _method_decline(mod: cst.Module, pos, line: int) -> Decline | None:
    """The rule's own reason when the break sits after a method's one-time check."""
    for cls in (s for s in mod.body if isinstance(s, cst.ClassDef)):
        for meth in (s for s in cls.body.body if isinstance(s, cst.FunctionDef)):
            guard = early_return(meth)
            if guard is not None and pos[guard].end.line < line <= pos[meth].end.line:
                return Decline(NAME, f"`{cls.name.value}.{meth.name.value}` begins with a one-time check, but it is "
                                     f"a method: `self.{meth.name.value}()` may reach a subclass's override, so the "
                                     "check is not hoisted (call the model once eagerly before torch.compile "
                                     "instead, so that the first trace sees the setup done)")
    return None


def plan(module: cst.Module, line: int) -> Plan | Decline:
    """The rule's plan for a break on ``line`` of ``module``, or a Decline with the reason."""
    wrapper, pos = _positions(module)
    mod = wrapper.module
    funcs = _top_functions(mod)
    site_fn = next((f for f in funcs.values() if pos[f].start.line <= line <= pos[f].end.line), None)
    if site_fn is None:
        return _method_decline(mod, pos, line) or _generic()
    visitor = _Calls()
    mod.visit(visitor)
    found = _chain(funcs, pos, site_fn, line, visitor.calls)
    if found is None:
        return _generic()
    fn, guard = found
    name = fn.name.value
    where = f"`{name}` (defined at line {pos[fn].start.line})"
    binds = bindings(mod)
    if len(binds.get(name, [])) != 1 or "*" in binds:
        return Decline(NAME, f"{where} begins with a one-time check, but its name is bound more than once in the "
                             "module: a call may reach another function")
    space = namespace_access(mod, name)
    if space:
        return Decline(NAME, f"{where} begins with a one-time check, but the module uses `{space}`, through "
                             "which it may rebind the function, its defaults or a builtin the check calls")
    clash = alias_problem(mod, fn, binds)
    if clash:
        return Decline(NAME, f"{where} begins with a one-time check, but {clash}")
    if fn.decorators or fn.asynchronous is not None:
        return Decline(NAME, f"{where} is decorated or async: calling it may not run its first check first")
    if any(isinstance(n, (cst.Yield, cst.Await)) for n in _own_nodes(fn)):
        return Decline(NAME, f"{where} is a generator: calling it runs none of its body")
    why = check_shape(guard.test)
    if why:
        return Decline(NAME, f"{where} begins with `if {code_of(guard.test).strip()}: return`, but {why}")
    params = _params_of(fn)
    names = _free_names(guard.test)
    read = set(names)
    star = {q.name.value for q in (fn.params.star_arg, fn.params.star_kwarg) if isinstance(q, cst.Param)}
    if star & read:
        return Decline(NAME, f"{where} begins with `if {code_of(guard.test).strip()}: return`, which reads "
                             f"`{sorted(star & read)[0]}`, its *args or **kwargs: the call's arguments do not spell it")
    free = [n for n in names if n not in params]
    for n in [*free, "type", "bool"]:
        if (n in PURE_BUILTINS or n in ("type", "bool")) and n in binds:
            return Decline(NAME, f"`{n}` is rebound in the module")
    declared = {g.name.value for node in m.findall(fn, m.Global()) for g in node.names}
    local = sorted((set(free) & _binds(fn)) - declared - PURE_BUILTINS)
    if local:
        return Decline(NAME, f"{where} begins with a check that reads `{local[0]}`, a local of the function (it "
                             "assigns it): hoisted, the name would mean the module's global (helper-43)")

    sites, hoisted, reasons = [], [], []
    for call, stack in visitor.calls:
        if call.func.value != name:
            continue
        at = pos[call].start.line
        caller = _function_of(stack)
        if caller is fn:
            continue   # a recursive call runs the check anyway
        stmt = next((n for n in reversed(stack) if isinstance(n, cst.SimpleStatementLine)), None)
        if (stmt is None or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr)
                or stmt.body[0].value is not call):
            reasons.append(f"line {at}: the call's value is used (only a call standing alone as a statement is "
                           "guarded)")
            continue
        if caller is None:
            reasons.append(f"line {at}: the call is at module level (runs once, at import)")
            continue
        bound = bind_call(fn, call)
        if isinstance(bound, str):
            reasons.append(f"line {at}: {bound}")
            continue
        inner = _innermost(stack)
        if not all(_always_bound(a.value, inner) for a in call.args):
            reasons.append(f"line {at}: an argument is neither a literal nor a parameter of `{inner.name.value}`, "
                           "and the hoisted check would skip evaluating it (a read that may run code, or a local "
                           "that may be unbound)")
            continue
        used = read & params
        passed = {id(a.value) for a in call.args}
        if not all(id(bound[p]) in passed or _literal(bound[p]) for p in used):
            reasons.append(f"line {at}: the check reads a parameter whose default is not a literal (a default "
                           "is evaluated once, at `def`; the hoisted check would read it at the call)")
            continue
        clash = [n for n in [*free, alias_of(name)] if n in _binds(caller)]
        if clash:
            reasons.append(f"line {at}: the caller binds `{clash[0]}`, which the check reads as a global")
            continue
        check = code_of(guard.test.visit(_Substitute({p: bound[p] for p in used})))
        check = one_line(check)
        gate = gated(check)
        if gate is None:
            reasons.append(f"line {at}: the check `{check}` combines a value it tests for truth with other tests; "
                           "hoisted behind a bool-or-None gate it could evaluate other parts than the original "
                           "(only `flag`, `not flag` or tests without a truth value are hoisted)")
            continue
        check = gate
        if _hoisted_already(stmt, stack, check):
            hoisted.append(at)
            continue
        reads = _reads(cst.parse_expression(check))
        sites.append(CallSite(stmt, call, at, check, reads))
    if not sites:
        if hoisted:
            return Decline(NAME, f"the first check of {where} is already hoisted into its caller (line "
                                 f"{', '.join(map(str, hoisted))}): from the second call on, Dynamo guards on it "
                                 "and compiles the caller without this break; the first call still runs the "
                                 "one-time setup, and breaks there")
        return Decline(NAME, f"{where} begins with a one-time check, but no call of it can take the check: "
                             + ("; ".join(reasons[:3]) or "it is not called in this module (the rule rewrites the "
                                                         "calls in the module that defines the function)"))
    return Plan(mod, fn, pos[guard].start.line, guard.test, sites)


def match(loc: Located) -> Match | Decline:
    """A scan's verdict on a located site: the plan's, without building the new module."""
    if loc.module is None:
        return _generic()
    res = plan(loc.module, loc.line)
    if isinstance(res, Decline):
        return res
    lines = ", ".join(str(s.start) for s in res.sites)
    return Match(NAME, f"hoist the first check of `{res.guarded.name.value}` (line {res.guard_line}) into its "
                       f"caller (line {lines}): later calls skip the one-time setup without a break (`mend fix` "
                       "emits it only where a compiled call then runs fewer graphs)")
