"""Encoders for a 1-element tensor read back as ``L[0]`` and replaced, where a run-time test
holds, by the Python int it was made from (vits' ``torch.IntTensor([n])[0]`` slice bound)::

    S = E
    L = torch.IntTensor([S])
    ... (S if type(S) is int and LO <= S < HI else L[0]) ...

* ``scalar-index-exact`` (Z3, integers): every int the test admits, ``LO <= S < HI``, is held
  exactly by the constructor's integer dtype (``IntTensor``: int32; ``LongTensor``: int64),
  so ``L[0]`` is a 0-d CPU tensor whose value is ``S``;
* ``scalar-index-guarded`` (check, static screen of the mended module): the function binds
  ``S`` once, to the recorded value, on the line before the one binding of ``L``, a statement
  at the top of the function; every read of ``L`` is ``L[0]``, after that line, as the
  fallback of exactly that test; nothing captures ``S`` or ``L``; the function reads no locals
  by name; ``type`` and ``int`` are the builtins;
* ``scalar-index-slice-only`` (check, static screen): every guarded read is a slice's lower or
  upper bound, in the function or through a parameter of a module-level function (defined
  once, undecorated, never rebound) used only as a slice's lower or upper bound there -- where
  ``__index__`` reads a 0-d integer tensor and the int alike;
* ``scalar-index-receivers-observed`` (check, observation): each sliced container is a plain
  ``torch.Tensor`` on every hit of its line in the example run (a user class's ``__getitem__``
  could look at the bound's type).
"""
from __future__ import annotations

import ast

import z3

from verifier.encoders.base import Ctx, Query, decide
from verifier.scopes import stores as _stores
from verifier.outcomes import Outcome, check_refuted, checked, unknown

# the integer dtype (bits) each legacy constructor gives a Python int (always a CPU tensor;
# `torch.tensor` follows the default device, where a meta tensor's `[0]` is not a number)
WIDTH = {"IntTensor": 32, "LongTensor": 64}
_SCREEN = "static screen of the mended module"
_READERS = {"locals", "vars", "eval", "exec"}
_FRAME = {"f_locals", "_getframe", "currentframe", "f_back"}


def int_of(text: str) -> int | None:
    """The value of an integer expression of literals, unary minus, ``+ - * **``; else None."""
    def ev(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow)):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and not 0 <= b <= 128:
                raise ValueError("exponent")
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(type(node.op)) if \
                not isinstance(node.op, ast.Pow) else a ** b
        raise ValueError(ast.dump(node))
    try:
        return ev(ast.parse(str(text), mode="eval").body)
    except (SyntaxError, ValueError, TypeError):
        return None


def exact(ob: dict, ctx: Ctx) -> Outcome:
    ctor, lo, hi = ob.get("ctor"), int_of(ob.get("lo")), int_of(ob.get("hi"))
    if ctor not in WIDTH or lo is None or hi is None:
        return unknown(f"the constructor `{ctor}` or the range [{ob.get('lo')}, {ob.get('hi')}) is not encoded")
    w = WIDTH[ctor]
    n = z3.Int("n")

    def build():
        return Query([n >= lo, n < hi], [z3.Or(n < -(2 ** (w - 1)), n > 2 ** (w - 1) - 1)],
                     [f"`torch.{ctor}([n])` of a Python int n holds it as a {w}-bit signed integer (torch's dtype for "
                      "it), exactly when n is in that range (it raises beyond); a 0-d integer tensor's `__index__` "
                      "returns its value"])

    return decide("scalar-index-exact", [("int-range", build)], ctx,
                  f"exact integers (Z3 Int); int{w} is [-2^{w - 1}, 2^{w - 1} - 1]")


def _parents(tree: ast.AST) -> dict:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


_DYNAMIC = {"globals", "_getframe", "currentframe", "f_locals", "f_back", "f_globals"}


def _dynamic(tree: ast.Module, ctor: ast.AST) -> str | None:
    """Why the module may rebind what the rewrite names, or read a frame, at run time: it names
    ``globals``, a frame attribute or ``sys.modules``; the constructor's root name is bound
    other than by top-level imports, or has an attribute assigned."""
    root = ctor.value.id if isinstance(ctor, ast.Attribute) and isinstance(ctor.value, ast.Name) else None
    if root is None:
        return "the constructor is not `<name>.<constructor>`"
    for n in ast.walk(tree):
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else None
        if name in _DYNAMIC or isinstance(n, ast.Attribute) and ast.unparse(n) == "sys.modules":
            return f"the module names `{ast.unparse(n)}` (line {n.lineno}): a frame or a global may change at run time"
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)) and \
                isinstance(n.value, ast.Name) and n.value.id == root:
            return f"the module assigns `{root}.{n.attr}` (line {n.lineno})"
    imports = sum(1 for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)) for a in s.names
                  if (a.asname or a.name.split(".")[0]) == root)
    if _stores(tree, root) != imports:
        return f"`{root}` is bound other than by a top-level import"
    return None


def _frame_reader(fn: ast.AST) -> str | None:
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id in _READERS or isinstance(n, ast.Attribute) and n.attr in _FRAME:
            return f"`{n.id if isinstance(n, ast.Name) else '.' + n.attr}` (line {n.lineno}) can read the locals by name"
    return None


def _captures(fn: ast.AST, names: set[str]) -> str | None:
    for inner in ast.walk(fn):
        if inner is not fn and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            hit = {n.id for n in ast.walk(inner) if isinstance(n, ast.Name)} & names
            if hit:
                return f"`{sorted(hit)[0]}` is captured by a nested scope at line {inner.lineno}"
    return None


def _is_test(test: ast.AST, snap: str, lo: int, hi: int) -> bool:
    """``type(S) is int and LO <= S < HI``, exactly."""
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and len(test.values) == 2):
        return False
    kind, rng = test.values
    ok_type = isinstance(kind, ast.Compare) and len(kind.ops) == 1 and isinstance(kind.ops[0], ast.Is) and \
        isinstance(kind.left, ast.Call) and isinstance(kind.left.func, ast.Name) and kind.left.func.id == "type" and \
        len(kind.left.args) == 1 and not kind.left.keywords and isinstance(kind.left.args[0], ast.Name) and \
        kind.left.args[0].id == snap and isinstance(kind.comparators[0], ast.Name) and kind.comparators[0].id == "int"
    ok_range = isinstance(rng, ast.Compare) and len(rng.ops) == 2 and isinstance(rng.ops[0], ast.LtE) and \
        isinstance(rng.ops[1], ast.Lt) and isinstance(rng.comparators[0], ast.Name) and \
        rng.comparators[0].id == snap and int_of(ast.unparse(rng.left)) == lo and \
        int_of(ast.unparse(rng.comparators[1])) == hi
    return ok_type and ok_range


def _guarded_reads(ob: dict, ctx: Ctx):
    """(tree, function, parents, the guarded reads) of the mended module, or why the form is
    not as recorded (a str)."""
    fname, line, local, snap, ctor = (ob.get(k) for k in ("function", "line", "local", "snapshot", "ctor"))
    lo, hi = int_of(ob.get("lo")), int_of(ob.get("hi"))
    if not (fname and isinstance(line, int) and local and snap and ctor in WIDTH and ctx.code) or None in (lo, hi):
        return "the function, line, local, snapshot, constructor, range or mended source is not recorded"
    try:
        tree = ast.parse(ctx.code)
    except SyntaxError as exc:
        return f"the mended module does not parse: {exc}"
    fns = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == fname
           and f.lineno <= line <= (f.end_lineno or f.lineno)]
    if len(fns) != 1:
        return f"no single function `{fname}` holds line {line}"
    fn = fns[0]
    body = fn.body
    at = next((i for i, s in enumerate(body) if s.lineno == line), None)
    if at is None or at == 0:
        return f"line {line} is not a statement at the top of `{fname}` after the snapshot"
    bind, prev = body[at], body[at - 1]
    inline = ob.get("form") == "inline"
    value = bind.value if isinstance(bind, ast.Assign) else None
    made = value.orelse.value if inline and isinstance(value, ast.IfExp) and \
        isinstance(value.orelse, ast.Subscript) else value
    if not (isinstance(bind, ast.Assign) and len(bind.targets) == 1 and isinstance(bind.targets[0], ast.Name)
            and bind.targets[0].id == local and isinstance(made, ast.Call) and isinstance(made.func, ast.Attribute)
            and made.func.attr == ctor and len(made.args) == 1 and not made.keywords
            and isinstance(made.args[0], (ast.List, ast.Tuple)) and len(made.args[0].elts) == 1
            and isinstance(made.args[0].elts[0], ast.Name) and made.args[0].elts[0].id == snap):
        return f"line {line} is not `{local} = <torch>.{ctor}([{snap}])`" + ("[0] behind the test" if inline else "")
    try:
        want = ast.dump(ast.parse(str(ob.get("value")), mode="eval").body)
    except SyntaxError:
        return "the recorded value does not parse"
    if not (isinstance(prev, ast.Assign) and len(prev.targets) == 1 and isinstance(prev.targets[0], ast.Name)
            and prev.targets[0].id == snap and ast.dump(prev.value) == want):
        return f"the statement before line {line} is not `{snap} = {ob.get('value')}`"
    for name in (local, snap):
        if _stores(fn, name, skip=fn) != 1:
            return f"`{name}` is bound more than once in `{fname}` (or declared global/nonlocal)"
    why = _captures(fn, {local, snap}) or _frame_reader(fn)
    if why:
        return why
    for b in ("type", "int"):
        if _stores(tree, b):
            return f"`{b}` is bound in the module (any scope): the test may not read the builtin"
    hazard = _dynamic(tree, made.func)
    if hazard:
        return hazard
    if fn.decorator_list:
        return f"`{fname}` is decorated: what runs is not the function as written"
    if any(isinstance(n, ast.NamedExpr) for n in ast.walk(fn)):
        return f"`{fname}` binds a name with `:=`"
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return "the module has a `from ... import *`, which may rebind `type`, `int` or a callee"
    parents = _parents(fn)
    if inline:
        sub = value.orelse
        if not (isinstance(sub.slice, ast.Constant) and type(sub.slice.value) is int and sub.slice.value == 0
                and isinstance(value.body, ast.Name) and value.body.id == snap and _is_test(value.test, snap, lo, hi)):
            return f"line {line} is not `{local} = ({snap} if <the test> else <torch>.{ctor}([{snap}])[0])`"
        return tree, fn, parents, [value]
    reads = []
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, ast.Load)):
            continue
        sub, ifexp = parents.get(n), parents.get(parents.get(n))
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and type(sub.slice.value) is int
                and sub.slice.value == 0 and isinstance(ifexp, ast.IfExp) and ifexp.orelse is sub):
            return f"`{local}` is read at line {n.lineno} other than as `{local}[0]`, the fallback of a test"
        if not (isinstance(ifexp.body, ast.Name) and ifexp.body.id == snap and _is_test(ifexp.test, snap, lo, hi)):
            return (f"the test at line {n.lineno} is not `type({snap}) is int and {ob.get('lo')} <= {snap} < "
                    f"{ob.get('hi')}` selecting `{snap}`")
        if n.lineno <= line:
            return f"`{local}` is read at line {n.lineno}, not after its binding (line {line})"
        reads.append(ifexp)
    if not reads:
        return f"`{local}[0]` is never read"
    return tree, fn, parents, reads


def guarded(ob: dict, ctx: Ctx) -> Outcome:
    got = _guarded_reads(ob, ctx)
    if isinstance(got, str):
        return check_refuted(_SCREEN + ": the snapshot, the binding and the test at every read", got)
    return checked(_SCREEN + ": the snapshot, the binding and the test at every read",
                   [f"{len(got[3])} read(s) of `{ob.get('local')}[0]`, each behind the test; code in another module "
                    "reading the function's frame is not seen"])


def _stmt_line(node: ast.AST, parents: dict) -> int:
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(node)
    return node.lineno


def _slice_container(node: ast.AST, parents: dict):
    p = parents.get(node)
    if isinstance(p, ast.Slice) and node is not p.step:
        holder = parents.get(p)
        if isinstance(holder, ast.Tuple):
            holder = parents.get(holder)
        if isinstance(holder, ast.Subscript):
            return holder.value
    return None


def _callee_param(tree, fn, call: ast.Call, node: ast.AST) -> tuple[ast.FunctionDef, str] | str:
    if not isinstance(call.func, ast.Name):
        return f"a guarded read at line {node.lineno} is passed to `{ast.unparse(call.func)}`, not a module function"
    name = call.func.id
    defs = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name]
    if len(defs) != 1 or _stores(tree, name, skip=defs[0]) or _stores(fn, name, skip=fn):
        return f"`{name}` is not one module-level function, defined once and never rebound"
    callee = defs[0]
    if callee.decorator_list:
        return f"`{name}` is decorated"
    if node in call.args:
        pos = call.args.index(node)
        if any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
            return f"a star argument comes before the guarded read in the call of `{name}`"
        positional = callee.args.posonlyargs + callee.args.args
        if pos >= len(positional):
            return f"the guarded read is not bound to a named parameter of `{name}`"
        return callee, positional[pos].arg
    kw = next((k for k in call.keywords if k.value is node), None)
    if kw is None or kw.arg is None or kw.arg not in {a.arg for a in callee.args.args + callee.args.kwonlyargs}:
        return f"the guarded read is not bound to a named parameter of `{name}`"
    return callee, kw.arg


def slice_uses(ob: dict, ctx: Ctx) -> list[tuple[str, int]] | str:
    """``(container, line)`` of every slice a guarded read bounds -- directly, through a local
    bound once to it, or through a callee's parameter -- or why a read is not a slice bound."""
    got = _guarded_reads(ob, ctx)
    if isinstance(got, str):
        return got
    tree, fn, parents, reads = got
    out: list = []
    for ifexp in reads:
        holder = parents.get(ifexp)
        if isinstance(holder, ast.Assign) and holder.value is ifexp and len(holder.targets) == 1 and \
                isinstance(holder.targets[0], ast.Name):
            name = holder.targets[0].id
            if _stores(fn, name, skip=fn) != 1 or _captures(fn, {name}):
                return f"`{name}`, bound to a guarded read, is bound again or captured"
            loads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
            for n in loads:
                why = _sink(tree, fn, parents, n, out)
                if why:
                    return why
            if not loads:
                return f"`{name}` is never read"
            continue
        why = _sink(tree, fn, parents, ifexp, out)
        if why:
            return why
    return out


def _sink(tree, fn, parents: dict, node: ast.AST, out: list) -> str | None:
    """Why ``node`` (the value) is not a slice bound, directly or through a callee's parameter;
    None, with each slice's ``(container, line)`` added to ``out``, when it is."""
    container = _slice_container(node, parents)
    if container is not None:
        out.append((ast.unparse(container), _stmt_line(node, parents)))
        return None
    call = parents.get(node)
    if isinstance(call, ast.keyword):
        call = parents.get(call)
    if not isinstance(call, ast.Call) or call.func is node:
        return f"the value read at line {node.lineno} is neither a slice bound nor a call's argument"
    target = _callee_param(tree, fn, call, node)
    if isinstance(target, str):
        return target
    callee, param = target
    if any(isinstance(n, ast.NamedExpr) for n in ast.walk(callee)):
        return f"`{callee.name}` binds a name with `:=`"
    if _stores(callee, param, skip=callee) != 1:
        return f"`{callee.name}`'s parameter `{param}` is bound again"
    why = _captures(callee, {param}) or _frame_reader(callee)
    if why:
        return f"in `{callee.name}`: {why}"
    cparents = _parents(callee)
    for n in (n for n in ast.walk(callee) if isinstance(n, ast.Name) and n.id == param):
        container = _slice_container(n, cparents)
        if container is None:
            return f"`{param}` is used at line {n.lineno} of `{callee.name}` other than as a slice's bound"
        out.append((ast.unparse(container), _stmt_line(n, cparents)))
    return None


def slice_only(ob: dict, ctx: Ctx) -> Outcome:
    by = _SCREEN + ": every guarded read, and every use of a parameter it is passed to, is a slice's lower or upper bound"
    got = slice_uses(ob, ctx)
    if isinstance(got, str):
        return check_refuted(by, got)
    return checked(by, [f"{len(got)} slice bound(s); a callee rebound from another module at run time is not seen"])


def receivers_observed(ob: dict, ctx: Ctx) -> Outcome:
    by = "observation of the example run: each sliced container's type on every hit of its line"
    got = slice_uses(ob, ctx)
    if isinstance(got, str):
        return unknown(f"the slice bounds are not as screened: {got}")
    at, hits = (ctx.facts or {}).get("at") or {}, (ctx.facts or {}).get("at_hits") or {}
    for container, line in got:
        if not isinstance(ast.parse(container, mode="eval").body, ast.Name):
            return unknown(f"`{container}` (line {line}) is not a name whose type is observed")
        seen = (at.get(str(line)) or {}).get(container)
        if not hits.get(str(line)) or not seen:
            return unknown(f"`{container}` was not observed at line {line}")
        if any(s.get("kind") == "unavailable" for s in seen):
            return unknown(f"`{container}` could not be read where line {line} starts (bound later in the statement, "
                           "or inside a comprehension): its type is not observed")
        bad = [s for s in seen if s.get("kind") != "tensor" or s.get("subclass")]
        if bad:
            what = bad[0].get("subclass") or bad[0].get("kind")
            return check_refuted(by, f"`{container}` at line {line} is a {what}, not a plain tensor: its "
                                 "`__getitem__` may read a slice bound's type")
    return checked(by, ["the containers' types on the example run stand for every run"])


ENCODERS = {"scalar-index-exact": exact, "scalar-index-guarded": guarded, "scalar-index-slice-only": slice_only,
            "scalar-index-receivers-observed": receivers_observed}
CHECKS = frozenset({"scalar-index-guarded", "scalar-index-slice-only", "scalar-index-receivers-observed"})
OBSERVED = frozenset({"scalar-index-receivers-observed"})
