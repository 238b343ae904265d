"""Encoders for a one-time setup's first check hoisted into its caller: ``G(args)``, where
``G`` begins with ``if P: return``, becomes ``if not P[args]: G(args)``. Checks, never
solver queries per site; the general lemma is ``proofs/sg_hoisted_check.smt2`` (cited).

* ``guard-hoisted`` (check, a static screen of the version before and the mended file with
  :mod:`ast`, independent of the rule's LibCST screen): ``G`` is a module-level ``def``, its
  name bound nowhere else in the module, not decorated, not async, not a generator; its first
  statement (after a docstring) is ``if P: return`` (or ``return None``) with no ``else``;
  ``P`` holds only names, constants, attribute reads, ``not``/``and``/``or``, ``is``/``is
  not`` and calls of ``getattr``/``hasattr``/``isinstance``/``callable`` (not rebound in the
  module); the mended ``if`` at the line tests exactly ``not (G is _mend_setup_guard_G and
  (gate and P))`` with ``G``'s parameters replaced by the call's arguments, the gate requiring
  each value ``P`` tests for truth to be a bool or None first (each a name or a literal, the
  call binding to ``G``'s signature; a parameter the check reads but the call omits has a
  literal default), its body is the call alone, the caller binds neither the alias nor the
  other names ``P`` reads; ``_mend_setup_guard_G = G`` is the statement right after ``G``'s
  ``def`` and the alias's one binding (so the test holds only while the called name is that
  ``def``: a ``G`` monkeypatched from outside, or a caller's own ``G``, is called as before);
  and the mended file, with every such ``if`` replaced by its call and the alias removed, is
  the version before, node for node. With the lemma, the call statement and the hoisted form
  run the same code.
* ``guard-read-plain`` (check, observed on the example run where the hoisted check runs):
  each object whose attribute the check reads has no class attribute of that name (no
  property or descriptor), ``__getattribute__`` is ``object``'s and ``__getattr__`` is absent
  or ``torch.nn.Module``'s; a class-level default only when it is a plain value. (The values
  the check tests for truth need no observation: the emitted gate requires them to be bools or
  None before their truth is taken.) So reading the check twice, or once, has no effect.
"""
from __future__ import annotations

import ast
import builtins

from verifier.effects import dotted_name
from verifier.encoders.base import Ctx, names_bound_by
from verifier.outcomes import Outcome, check_refuted, checked, unknown

LEMMA = "proofs/sg_hoisted_check.smt2"
PURE_CALLS = frozenset({"getattr", "hasattr", "callable"})
READERS = frozenset({"getattr", "hasattr"})
OBJECT_GETATTRIBUTE = frozenset({"?.object.__getattribute__", "builtins.object.__getattribute__"})
MODULE_GETATTR = "torch.nn.modules.module.Module.__getattr__"
PLAIN_KINDS = frozenset({"num", "none", "str"})


def _dump(node: ast.AST) -> str:
    return ast.dump(node, include_attributes=False)


def _bound_in(tree: ast.AST) -> list[str]:
    return [n for node in ast.walk(tree) for n in names_bound_by(node)]


def _own(fn: ast.FunctionDef):
    """Nodes of ``fn``'s own body (nested functions, lambdas and classes left out)."""
    todo = list(fn.body)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.append(child)


def _shape_ok(node: ast.AST) -> str | None:
    if isinstance(node, (ast.Name, ast.Constant)):
        return None
    if isinstance(node, ast.Attribute):
        return _shape_ok(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _shape_ok(node.operand)
    if isinstance(node, ast.BoolOp):
        return next(filter(None, map(_shape_ok, node.values)), None)
    if isinstance(node, ast.Compare):
        if not all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return "a comparison other than `is`/`is not`"
        if len(node.ops) != 1 or not any(isinstance(x, ast.Constant) and x.value is None
                                         for x in (node.left, *node.comparators)):
            return "an identity comparison with something other than `None` (Dynamo may not guard it)"
        return next(filter(None, map(_shape_ok, [node.left, *node.comparators])), None)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PURE_CALLS \
            and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
        if node.func.id in READERS and not (len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                                            and isinstance(node.args[1].value, str)):
            return f"`{ast.unparse(node)}` (an attribute read by a computed name)"
        return next(filter(None, map(_shape_ok, node.args)), None)
    return f"`{ast.unparse(node)}`"


def _guarded(before: ast.Module, name: str) -> tuple[ast.FunctionDef, ast.expr] | str:
    """(G, P), or why ``name`` is not a function that begins with an early return."""
    fns = [s for s in before.body if isinstance(s, ast.FunctionDef) and s.name == name]
    if len(fns) != 1:
        return f"`{name}` is not one module-level def"
    if _bound_in(before).count(name) != 1 or any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
                                                 for n in ast.walk(before)):
        return f"`{name}` is bound more than once in the module (or a star import may bind it)"
    fn = fns[0]
    if fn.decorator_list:
        return f"`{name}` is decorated"
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in _own(fn)):
        return f"`{name}` is a generator"
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) \
        and isinstance(fn.body[0].value.value, str) else fn.body
    while body and isinstance(body[0], (ast.Global, ast.Nonlocal)):
        body = body[1:]   # declarations run nothing
    first = body[0] if body else None
    if not (isinstance(first, ast.If) and not first.orelse and len(first.body) == 1
            and isinstance(first.body[0], ast.Return)
            and (first.body[0].value is None or (isinstance(first.body[0].value, ast.Constant)
                                                 and first.body[0].value.value is None))):
        return f"`{name}` does not begin with `if ...: return`"
    why = _shape_ok(first.test)
    if why:
        return f"the first check of `{name}` holds {why}"
    star = {p.arg for p in filter(None, (fn.args.vararg, fn.args.kwarg))}
    read = star & {n.id for n in ast.walk(first.test) if isinstance(n, ast.Name)}
    if read:
        return f"the first check of `{name}` reads `{sorted(read)[0]}`, its *args or **kwargs"
    return fn, first.test


# names through which a module may rebind a function, its defaults or a builtin unseen by a
# binding screen (helper-41/43); any of them in the module refutes
NAMESPACE_ACCESS = frozenset({"globals", "vars", "__globals__", "f_globals", "_getframe", "__import__", "importlib",
                              "__builtins__", "__defaults__", "__kwdefaults__", "__code__", "__dict__", "exec", "eval"})
SETTERS = frozenset({"setattr", "__setattr__"})


def _params(fn: ast.FunctionDef) -> set[str]:
    """Every parameter name, ``*args``/``**kwargs`` included."""
    a = fn.args
    return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]}


def _namespace_access(tree: ast.Module, name: str) -> str | None:
    sys_names = {a.asname or "sys" for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                 if a.name == "sys"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in NAMESPACE_ACCESS:
            return node.id
        if isinstance(node, ast.Attribute):
            if node.attr in NAMESPACE_ACCESS:
                return node.attr
            if node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id in sys_names:
                return "sys.modules"
            if node.attr == name and isinstance(node.ctx, (ast.Store, ast.Del)):
                return f"{ast.unparse(node)} = ..."
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "modules" for a in node.names):
            return "sys.modules"
        if isinstance(node, ast.Call):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if fn in SETTERS and not (len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                                      and node.args[1].value != name):
                return f"{fn}(...)"
    return None


def _binding(fn: ast.FunctionDef, call: ast.Call) -> dict[str, ast.expr] | str:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = dict(zip([p.arg for p in positional][len(positional) - len(a.defaults):], a.defaults))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    if any(isinstance(x, ast.Starred) for x in call.args) or any(k.arg is None for k in call.keywords):
        return "a starred argument"
    if len(call.args) > len(positional) and a.vararg is None:
        return "too many positional arguments"
    out = {p.arg: v for p, v in zip(positional, call.args)}
    named = {p.arg for p in [*a.args, *a.kwonlyargs]}
    for k in call.keywords:
        if k.arg not in named and a.kwarg is None:
            return f"an unknown keyword `{k.arg}`"
        if k.arg in out:
            return f"`{k.arg}` given twice"
        if k.arg in named:
            out[k.arg] = k.value
    for p in [*positional, *a.kwonlyargs]:
        if p.arg not in out:
            if p.arg not in defaults:
                return f"the required parameter `{p.arg}` missing"
            out[p.arg] = defaults[p.arg]
    return out


class _Sub(ast.NodeTransformer):
    def __init__(self, values):
        self.values = values

    def visit_Name(self, node):
        return self.values.get(node.id, node)


def _always_bound(value: ast.expr, inner: ast.AST | None) -> bool:
    """A constant, or a parameter of the innermost function around the call that nothing in it
    deletes (a local may be unbound: skipping the call would skip its UnboundLocalError)."""
    if isinstance(value, ast.Constant):
        return True
    if not isinstance(value, ast.Name) or not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            or value.id not in _params(inner):
        return False
    return not any(isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Del)
                   for n in ast.walk(inner))


def _gate(check: ast.expr) -> ast.expr | None:
    """The hoisted test the rule must emit for ``check``: ``check`` when it takes no value's
    truth (attributes of constants aside); ``type(T) is bool and T`` for ``T``; ``T is None or
    (type(T) is bool and not T)`` for ``not T``; None otherwise (refused: a gate over several
    parts would change which parts are evaluated). Each implies the check, runs no user code
    (``is`` never dispatches) and evaluates what the check does, in its order."""
    parts = []
    for part in _truth_parts(check):
        root = part
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Constant):
            parts.append(part)
    if not parts:
        return check
    if len(parts) > 1:
        return None

    def is_bool(t):
        return ast.Compare(ast.Call(ast.Name("type", ast.Load()), [t], []), [ast.Is()], [ast.Name("bool", ast.Load())])
    (t,) = parts
    if check is t:
        return ast.BoolOp(ast.And(), [is_bool(t), t])
    if isinstance(check, ast.UnaryOp) and isinstance(check.op, ast.Not) and check.operand is t:
        return ast.BoolOp(ast.Or(), [ast.Compare(t, [ast.Is()], [ast.Constant(None)]),
                                     ast.BoolOp(ast.And(), [is_bool(t), ast.UnaryOp(ast.Not(), t)])])
    return None


def alias_of(name: str) -> str:
    """The module-level name bound to ``G`` right after its ``def``, which the hoisted test
    compares the called name with (the rule's spelling, re-derived here)."""
    return f"_mend_setup_guard_{name}"


def _alias_at(tree: ast.Module, name: str, bound: list[str]) -> int | None:
    """The index in ``tree.body`` of ``<alias> = <name>`` when it is the statement right after
    ``name``'s ``def`` and the alias's one binding in the module (``bound``: the names ``tree``
    binds, :func:`_bound_in`), else None."""
    alias = alias_of(name)
    at = next((i for i, s in enumerate(tree.body) if isinstance(s, ast.FunctionDef) and s.name == name), None)
    nxt = tree.body[at + 1] if at is not None and at + 1 < len(tree.body) else None
    if not (isinstance(nxt, ast.Assign) and len(nxt.targets) == 1 and isinstance(nxt.targets[0], ast.Name)
            and nxt.targets[0].id == alias and isinstance(nxt.value, ast.Name) and nxt.value.id == name):
        return None
    return at + 1 if bound.count(alias) == 1 else None


def _hoisted_form(node: ast.AST, fn: ast.FunctionDef, check: ast.expr,
                  inner: ast.AST | None = None) -> tuple[ast.Call, set[str]] | str | None:
    """For an ``if`` in the mended file: (the call, the names the check reads that are not
    arguments) when it is ``if not P[args]: G(args)``; a reason when it is that shape with
    another test or arguments; None when it is not a hoisted call of ``G`` at all."""
    if not (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Call)
            and isinstance(node.body[0].value.func, ast.Name) and node.body[0].value.func.id == fn.name
            and isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
        return None
    call = node.body[0].value
    bound = _binding(fn, call)
    if isinstance(bound, str):
        return f"the call at line {call.lineno} does not bind to `{fn.name}`: {bound}"
    values = [*call.args, *(k.value for k in call.keywords)]
    if inner is not None and not all(_always_bound(v, inner) for v in values):
        return (f"an argument at line {call.lineno} is neither a constant nor a parameter of the function around "
                "the call")
    params = _params(fn)
    used = {n.id for n in ast.walk(check) if isinstance(n, ast.Name)} & params
    if not all(any(bound[p] is v for v in values) or isinstance(bound[p], ast.Constant) for p in used):
        return f"the check reads a parameter whose default is not a constant (call at line {call.lineno})"
    import copy

    expected = _gate(_Sub({p: bound[p] for p in used}).visit(copy.deepcopy(check)))
    if expected is None:
        return (f"the first check of `{fn.name}` tests a value's truth beside other tests: no hoisted form keeps its "
                "order of evaluation")
    expected = ast.BoolOp(ast.And(), [ast.Compare(ast.Name(fn.name, ast.Load()), [ast.Is()],
                                                  [ast.Name(alias_of(fn.name), ast.Load())]), expected])
    if _dump(expected) != _dump(node.test.operand):
        return (f"the test at line {node.lineno} is not `not ({ast.unparse(expected)})` (the called name is still "
                f"`{fn.name}`'s def, and the first check of `{fn.name}` with its parameters replaced by the call's "
                "arguments holds)")
    free = {n.id for n in ast.walk(check) if isinstance(n, ast.Name)} - params
    return call, free


def _enclosing(tree: ast.Module, target: ast.AST) -> tuple[ast.AST | None, ast.AST | None]:
    """(outermost function holding ``target``, innermost one)."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and any(x is target for x in ast.walk(n))]
    if not funcs:
        return None, None
    inner = min(funcs, key=lambda f: sum(1 for _ in ast.walk(f)))
    outer = max(funcs, key=lambda f: sum(1 for _ in ast.walk(f)))
    return outer, inner


def _truth_parts(node: ast.expr) -> list[ast.expr]:
    """The parts of a check whose ``bool()`` Python takes (not / and / or operands, down to
    what is a bool already: a comparison, ``hasattr``, ``callable``)."""
    if isinstance(node, ast.UnaryOp):
        return _truth_parts(node.operand)
    if isinstance(node, ast.BoolOp):
        return [p for v in node.values for p in _truth_parts(v)]
    if isinstance(node, ast.Compare) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                                         and node.func.id in PURE_CALLS - {"getattr"}):
        return []
    return [node]


def _valid_site(after: ast.Module, node: ast.AST, fn: ast.FunctionDef, check: ast.expr) -> tuple | str | None:
    """(the call, the names the check reads from the module) for an ``if`` of the mended file
    that is a correct hoisted call of ``fn``; a reason when it is that shape but wrong; None
    when it is no hoisted call of ``fn``."""
    caller, inner = _enclosing(after, node)
    if caller is None:
        return None
    form = _hoisted_form(node, fn, check, inner)
    if not isinstance(form, tuple):
        return form
    call, free = form
    declared = {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
    local = (free & set(_bound_in(fn))) - declared - _params(fn) - PURE_CALLS
    if local:
        return (f"the check reads `{sorted(local)[0]}`, which `{fn.name}` assigns (a local there; hoisted, it would "
                "mean the module's global)")
    clash = (free - PURE_CALLS | {alias_of(fn.name)}) & set(_bound_in(caller))
    if clash:
        return f"the caller binds `{sorted(clash)[0]}`, which the check reads from the module"
    if free & set(dir(builtins)) - PURE_CALLS:
        return f"the check reads the builtin(s) {sorted(free & set(dir(builtins)) - PURE_CALLS)}"
    return call, free


def hoisted(ob: dict, ctx: Ctx) -> Outcome:
    name, line = ob.get("function"), ob.get("line")
    if not ctx.code or not ctx.before or not name or not isinstance(line, int):
        return unknown("the mended source, the version before, the function or the line is not recorded")
    try:
        before, after = ast.parse(ctx.before), ast.parse(ctx.code)
    except SyntaxError as exc:
        return unknown(f"a version does not parse: {exc}")
    by = (f"a static screen (ast) of the version before and the mended file: `{name}` and its first check, the "
          f"hoisted `if` at line {line}, and the rest of the file node for node")
    found = _guarded(before, name)
    if isinstance(found, str):
        return check_refuted(by, found)
    fn, check = found
    bound_before, bound_after = _bound_in(before), _bound_in(after)   # each a walk of the whole file
    shadowed = [b for b in (*PURE_CALLS, "type", "bool") if b in bound_before or b in bound_after]
    if shadowed:
        return check_refuted(by, f"`{shadowed[0]}` is rebound in the module")
    space = _namespace_access(before, name) or _namespace_access(after, name)
    if space:
        return check_refuted(by, f"the module uses `{space}`, through which `{name}` may be rebound")
    mended_fn = _guarded(after, name)
    if isinstance(mended_fn, str) or _dump(mended_fn[0]) != _dump(fn):
        return check_refuted(by, f"`{name}` in the mended file is not the version before's")
    alias = alias_of(name)
    at = _alias_at(after, name, bound_after)
    if at is None:
        return check_refuted(by, f"the mended file does not bind `{alias} = {name}` once, right after `{name}`'s def "
                                 "(the function the hoisted test compares the called name with)")
    had_alias = alias in bound_before
    if had_alias and _alias_at(before, name, bound_before) is None:
        return check_refuted(by, f"the version before binds `{alias}` otherwise")
    site = [n for n in ast.walk(after) if isinstance(n, ast.If) and n.lineno == line]
    if len(site) != 1 or _enclosing(after, site[0])[0] is None:
        return check_refuted(by, f"line {line} of the mended file is not an `if` inside a function")
    form = _valid_site(after, site[0], fn, check)
    if not isinstance(form, tuple):
        return check_refuted(by, form or f"line {line} of the mended file is not `if not <check>: {name}(...)`")
    call, _ = form
    # every other hoisted-looking call of the file must pass the same checks (helper-45: one
    # added in another caller, whose local shadows the flag, was undone unchecked)
    valid = set()
    for node in ast.walk(after):
        if isinstance(node, ast.If) and _hoisted_form(node, fn, check) is not None:
            other = _valid_site(after, node, fn, check)
            if not isinstance(other, tuple):
                return check_refuted(by, f"the hoisted call at line {node.lineno}: {other}")
            valid.add(node.lineno)

    class Undo(ast.NodeTransformer):
        def visit_If(self, node):
            self.generic_visit(node)
            return node.body[0] if node.lineno in valid else node
    undone = Undo().visit(ast.parse(ctx.code))
    if not had_alias:
        del undone.body[at]
    if _dump(undone) != _dump(before):
        # (a certificate of a file with other rewrites compares with the original file: what
        # else changed is not shown here -- unknown, never passed: helper-44 slipped an edit
        # of another function past a comparison of the caller alone)
        return unknown("with every hoisted check replaced by its call, the mended file is not the version before: "
                       "the file holds other changes, which this check does not cover")
    rest = "the rest of the mended file is the version before, node for node"
    return checked(by, [f"`{name}` (line {fn.lineno}) begins with `if {ast.unparse(check)}: return`, is bound once "
                        "in the module, not decorated, not async, not a generator",
                        f"the hoisted test at line {line} is that check with `{name}`'s parameters replaced by the "
                        f"call's arguments (names or constants; the call `{ast.unparse(call)}` binds to its "
                        "signature), and the caller shadows none of the names it reads",
                        rest, "no `globals()`, `sys.modules`, `__globals__`, `__defaults__`, `__builtins__`, `setattr` by a computed "
                        "or the function's name, or store to an attribute of that name, in the module (no rebinding "
                        "unseen by the binding screen)",
                        "the hoisted test is the check, or `type(T) is bool and T` / `T is None or (type(T) is "
                        "bool and not T)` for a check `T` / `not T`: it implies the check, runs no user code and "
                        "evaluates what the check does, in its order; identity is compared with None only",
                        "the check's reads run no code (guard-read-plain, when it reads any)",
                        f"the hoisted test first compares the called name with `{alias}`, bound to `{name}` once, "
                        f"right after its def: a `{name}` replaced from outside the module, or a caller's own, is "
                        "called as before"], [LEMMA])


def _read_of(text: str) -> str | None:
    """The dotted name whose value a truth-tested part of the check is: ``o.a`` for ``o.a``
    and for ``getattr(o, "a", d)``."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        head = dotted_name(node.args[0])
        return f"{head}.{node.args[1].value}" if head else None
    return dotted_name(node)


def read_plain(ob: dict, ctx: Ctx) -> Outcome:
    facts = ctx.facts or {}
    names = facts.get("names", {})
    by = ("the observation of the example run where the hoisted check runs (verifier/facts.py): the class "
          "attributes and access methods of each object the check reads, and the values it tests")
    if not facts.get("hits"):
        return unknown("the hoisted check did not run on the example (no observation)")
    found = []
    for obj, attr in ob.get("reads") or []:
        got = names.get(f"{obj}.__class__.__getattribute__")
        if not got:
            return unknown(f"`type({obj})` was not observed at the hoisted check")
        if got.get("qualname") not in OBJECT_GETATTRIBUTE:
            return check_refuted(by, f"`type({obj}).__getattribute__` is {got.get('qualname')}, not object's")
        hook = names.get(f"{obj}.__class__.__getattr__")
        if hook and hook.get("qualname") != MODULE_GETATTR:
            return check_refuted(by, f"`type({obj}).__getattr__` is {hook.get('qualname')}: a read may run code")
        cls_attr = names.get(f"{obj}.__class__.{attr}")
        if cls_attr is not None and cls_attr.get("kind") not in PLAIN_KINDS:
            # a class-level default that is a bool, an int, None or a string is read without
            # running code (helper-42); a property, a descriptor or any other object may not be
            return check_refuted(by, f"`type({obj}).{attr}` is a {cls_attr.get('kind')} "
                                     f"({cls_attr.get('type') or cls_attr.get('qualname', '')}): a class attribute "
                                     "that is not a plain value (a property or descriptor runs code when read)")
        value = names.get(f"{obj}.{attr}")
        found.append(f"`{obj}.{attr}`: " + (f"a {value.get('kind')}" if value else "absent (observed: the read "
                                                                                      "failed)"))
    for text in ob.get("truth") or []:
        dotted = _read_of(text)
        value = names.get(dotted) if dotted else None
        if value is not None and value.get("kind") not in ("num", "none"):
            return check_refuted(by, f"`{text}` is a {value.get('kind')} ({value.get('type', '')}): its truth value "
                                     "may run a user's `__bool__`")
    return checked(by, [*found, "no class attribute of those names but a plain value (no property or descriptor); "
                               "`__getattribute__` is object's; `__getattr__` absent or torch.nn.Module's (observed)",
                        "each tested value is a bool, an int or None, or absent (the literal default) (observed)"])


ENCODERS = {"guard-hoisted": hoisted, "guard-read-plain": read_plain}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset({"guard-read-plain"})
