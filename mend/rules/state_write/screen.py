"""state-write: which sites the rule takes (``X[:, a:b] = v`` with tensor bounds, ``b`` written
as ``a + L``), why it declines the others (a Python number stored on the module, bounds
that cannot be proved in range), and :func:`match`, a scan's verdict on a located site.

The analysis reads the module with :mod:`ast` (positions are the source's lines)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from mend.locate import Located
from mend.rules._base import Decline, Match

NAME = "state-write"
CATEGORY = "state-write"
SCALAR_CALLS = ("int", "float", "bool")

DECLINE_SCALAR_STATE = (
    "storing the tensor (or a buffer `copy_`) instead of the Python number changes the attribute's type for every "
    "reader: `isinstance(v, float)`, JSON, `+=` accumulation, `range(self.n)`, and as a buffer `named_buffers()`, "
    "`.to()`/`.half()` (which would round it) and `int64 * 0-d float64` promotion (float64, where the number gives "
    "float32); no exact rewrite exists without a caller-side change")
BOUNDS_REASON = "bounds not provably in range: slicing clamps, narrow raises"


@dataclass
class Plan:
    stmt: ast.Assign
    target: str           # the written tensor (`self.cache`)
    value: str            # the value written (`k`)
    dim: int
    start: str            # the slice's lower bound as written (`start`)
    length: str           # L as evaluated at the write (`k.shape[1]`)
    start_expanded: str   # definitions substituted, for the proof
    length_expanded: str
    guards: list[str] = field(default_factory=list)
    torch_names: list[str] = field(default_factory=lambda: ["torch"])


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_size(node: ast.AST) -> bool:
    from verifier.encoders.state_write import is_size
    return is_size(node)


def torch_names(tree: ast.Module) -> list[str]:
    names = {"torch"}
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "torch" and a.asname}
    return sorted(names)


def scalar_state_write(stmt: ast.AST) -> bool:
    """``self.X = <t>.item()`` / ``self.X = int(...)`` (``float``, ``bool``): a Python number
    stored on the module."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return False
    t, v = stmt.targets[0], stmt.value
    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
        return False
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("item", "tolist"):
        return True
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in SCALAR_CALLS


def bounded_slice_write(stmt: ast.AST) -> bool:
    """An assignment whose single target is a subscript holding a slice with a non-literal bound."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)):
        return False
    sl = stmt.targets[0].slice
    parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    return any(isinstance(p, ast.Slice) and any(b is not None and not isinstance(b, ast.Constant)
                                                for b in (p.lower, p.upper)) for p in parts)


class _Scope:
    """Bindings of one function: how often each name is bound, and the top-level definition."""

    def __init__(self, fn: ast.FunctionDef) -> None:
        self.fn = fn
        self.count: dict[str, int] = {}
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs:
            self.count[a.arg] = self.count.get(a.arg, 0) + 1
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.count[node.id] = self.count.get(node.id, 0) + 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
                self.count[node.name] = self.count.get(node.name, 0) + 1
        self.defs: dict[str, ast.Assign] = {}
        for stmt in fn.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.defs[stmt.targets[0].id] = stmt

    def definition(self, name: str, before: int) -> ast.Assign | None:
        d = self.defs.get(name)
        if d is not None and self.count.get(name) == 1 and d.lineno < before:
            return d
        return None

    def stable(self, name: str) -> bool:
        """Bound at most once (a parameter or one assignment)."""
        return self.count.get(name, 0) <= 1


class _Expand(ast.NodeTransformer):
    """Substitute each local name by its (single, top-level, earlier) definition."""

    def __init__(self, scope: _Scope, before: int) -> None:
        self.scope, self.before = scope, before
        self.used: list[int] = []
        self.unstable: list[str] = []

    def visit_Name(self, node: ast.Name):
        d = self.scope.definition(node.id, self.before)
        if d is not None:
            self.used.append(d.lineno)
            return self.visit(ast.parse(ast.unparse(d.value), mode="eval").body)
        if not self.scope.stable(node.id):
            self.unstable.append(node.id)
        return node


def _expand(node: ast.AST, scope: _Scope, before: int) -> tuple[str, list[int], list[str]]:
    e = _Expand(scope, before)
    out = e.visit(ast.parse(ast.unparse(node), mode="eval").body)
    return ast.unparse(out), e.used, e.unstable


def _int_only(node: ast.AST, scope: _Scope, before: int) -> bool:
    """A Python int by construction: int literals, sizes, ``+ - *`` and names defined so."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if _is_size(node):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _int_only(node.operand, scope, before)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        return _int_only(node.left, scope, before) and _int_only(node.right, scope, before)
    if isinstance(node, ast.Name):
        d = scope.definition(node.id, before)
        return d is not None and _int_only(d.value, scope, before)
    return False


# calls that may run between the bounds' definitions and the write: they read and return,
# and change no tensor or module (anything else may shrink or replace the cache, or change a
# bound in place: helper-48's `self.kv.evict(keep)`, `maybe_shrink(self, w)`)
PURE_BUILTINS = frozenset({"min", "max", "len", "int", "abs", "isinstance", "range"})
PURE_METHODS = frozenset({"clamp", "clamp_min", "clamp_max", "size", "dim", "numel", "to", "long", "int", "item",
                          "min", "max", "sum", "any", "all", "clone", "detach", "view", "reshape", "contiguous"})


def _writes_between(fn: ast.FunctionDef, lo: int, hi: int, tnames: list[str]) -> str | None:
    """The first statement strictly between lines ``lo`` and ``hi`` that may change module
    or tensor state: an attribute/subscript store, an augmented assignment (``c += L`` on a
    tensor alias of a bound changes it in place: helper-48), and any call but ``torch.f`` (no
    trailing ``_``), a pure builtin or a pure tensor method."""
    # an exception built for a `raise`: the write never follows it
    raising = {id(n) for r in ast.walk(fn) if isinstance(r, ast.Raise) for n in ast.walk(r)}
    for node in ast.walk(fn):
        line = getattr(node, "lineno", None)
        if line is None or not lo < line < hi or id(node) in raising:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(not isinstance(t, ast.Name) for t in targets):
                return ast.unparse(node)
        if isinstance(node, ast.AugAssign):
            return ast.unparse(node)
        if isinstance(node, ast.Call):
            name = _dotted(node.func) or ""
            head, _, last = name.rpartition(".")
            if last.endswith("_") or name in ("setattr", "delattr"):
                return ast.unparse(node)
            if (head in tnames or name in PURE_BUILTINS) or (isinstance(node.func, ast.Attribute)
                                                             and node.func.attr in PURE_METHODS and head != "self"):
                continue
            return ast.unparse(node)
    return None


def _in_loop(fn: ast.FunctionDef, stmt: ast.stmt) -> bool:
    """``stmt`` sits in a ``for``/``while`` of ``fn``: what follows it in the loop runs before
    its next iteration, unscreened (helper-48: the cache replaced after the write)."""
    return any(isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and n is not stmt
               and any(x is stmt for x in ast.walk(n)) for n in ast.walk(fn))


def _guards(fn: ast.FunctionDef, before: int, tnames: list[str]) -> list[tuple[ast.AST, int]]:
    """Conditions that hold at a write on ``before`` when it is reached: top-level
    ``assert C``, ``torch._check(C)`` and ``if C: raise`` (no else) earlier in the function."""
    out = []
    for stmt in fn.body:
        if stmt.lineno >= before:
            break
        if isinstance(stmt, ast.Assert):
            out.append((stmt.test, stmt.lineno))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args and \
                (_dotted(stmt.value.func) or "") in {f"{t}._check" for t in tnames}:
            out.append((stmt.value.args[0], stmt.lineno))
        elif isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 and \
                isinstance(stmt.body[0], ast.Raise):
            out.append((ast.UnaryOp(ast.Not(), stmt.test), stmt.lineno))
    return out


def analyse(source: str, line: int) -> Plan | Decline:
    """The rewrite plan for the statement starting on ``line`` of ``source``, or why not."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return Decline(NAME, "the source does not parse")
    fn = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            if fn is None or node.lineno > fn.lineno:
                fn = node
    stmt = None
    for node in ast.walk(fn if fn is not None else tree):
        if isinstance(node, ast.stmt) and node.lineno == line:
            stmt = node
            break
    if stmt is None:
        return Decline(NAME, f"no statement starts on line {line}")
    if scalar_state_write(stmt):
        return Decline(NAME, DECLINE_SCALAR_STATE)
    if not bounded_slice_write(stmt):
        return Decline(NAME, "the statement is not a slice write `X[..., a:b] = v` with tensor bounds")
    if fn is None:
        return Decline(NAME, "the write is not inside a function")
    if stmt.end_lineno != line:
        return Decline(NAME, "the write spans several lines")
    if _in_loop(fn, stmt):
        return Decline(NAME, "the write sits in a loop: what the loop runs after it (a cache replaced or shrunk) "
                             "would change the bounds before the next write, and no screen covers that")
    if sum(1 for s in ast.walk(tree) if isinstance(s, ast.stmt) and s.lineno == line) != 1:
        return Decline(NAME, "the write shares its line with other statements")
    tgt = stmt.targets[0]
    target, value = _dotted(tgt.value), _dotted(stmt.value)
    if target is None:
        return Decline(NAME, "the written tensor is not a name or attribute")
    if value is None:
        return Decline(NAME, "the value written is not a plain name or attribute (the rewrite would evaluate it "
                       "after the bounds, not before)")
    parts = tgt.slice.elts if isinstance(tgt.slice, ast.Tuple) else [tgt.slice]
    bounded = [i for i, p in enumerate(parts) if isinstance(p, ast.Slice)
               and (p.lower is not None or p.upper is not None or p.step is not None)]
    if len(bounded) != 1:
        return Decline(NAME, "more than one dimension is sliced with bounds")
    dim = bounded[0]
    for i, p in enumerate(parts):
        if i != dim and not (isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None):
            return Decline(NAME, f"index `{ast.unparse(p)}` around the bounded slice: only `:` is supported "
                           "(an Ellipsis, None or an index moves the dimension)")
    sl = parts[dim]
    if sl.step is not None:
        return Decline(NAME, "the slice has a step")
    if sl.lower is None or sl.upper is None:
        return Decline(NAME, "the slice has no start or no end: its length is not a Python int")
    start = sl.lower
    if _dotted(start) is None:
        return Decline(NAME, f"the start `{ast.unparse(start)}` is not a plain name or attribute")
    scope = _Scope(fn)
    # the end: `a + L` (directly, or a local bound once to it)
    end = sl.upper
    while isinstance(end, ast.Name) and scope.definition(end.id, line) is not None:
        end = scope.definition(end.id, line).value
    length = None
    if isinstance(end, ast.BinOp) and isinstance(end.op, ast.Add):
        if ast.unparse(end.left) == ast.unparse(start):
            length = end.right
        elif ast.unparse(end.right) == ast.unparse(start):
            length = end.left
    if length is None:
        return Decline(NAME, f"the end `{ast.unparse(sl.upper)}` is not written as the start plus a length")
    if not _int_only(length, scope, line):
        return Decline(NAME, f"the length `{ast.unparse(length)}` is not a Python int by construction (sizes, int "
                       "literals): narrow needs an int length")
    for n in ast.walk(length):
        if isinstance(n, ast.Name) and not scope.stable(n.id):
            return Decline(NAME, f"`{n.id}` in the length is bound more than once")
    if isinstance(start, ast.Name) and not scope.stable(start.id):
        return Decline(NAME, f"the start `{start.id}` is bound more than once in the function")
    start_x, used_s, unstable = _expand(start, scope, line)
    length_x, used_l, unstable_l = _expand(length, scope, line)
    if unstable or unstable_l:
        return Decline(NAME, f"`{(unstable + unstable_l)[0]}` in the bounds is bound more than once")
    tnames = torch_names(tree)
    guards, used_g = [], []
    from verifier.encoders.state_write import Terms, Unsupported
    for cond, gline in _guards(fn, line, tnames):
        text, used, bad = _expand(cond, scope, line)
        if bad:
            continue
        try:
            Terms(tnames).condition(ast.parse(text, mode="eval").body)
        except (Unsupported, SyntaxError):
            continue
        guards.append(text)
        used_g += [gline] + used
    used_lines = used_s + used_l + used_g
    if used_lines:
        write = _writes_between(fn, min(used_lines), line, tnames)
        if write is not None:
            return Decline(NAME, f"`{write}` runs between the bounds' definitions or guards and the write: the "
                           "values they describe may have changed")
    length_text = ast.unparse(length)
    return Plan(stmt, target, value, dim, ast.unparse(start), length_text, start_x, length_x, guards, tnames)


def decide_bounds(plan: Plan) -> Decline | None:
    """Decline unless Z3 proves ``0 <= a``, ``0 <= L``, ``a + L <= size`` (static: no facts)."""
    from verifier.encoders.state_write import prove_bounds

    result, detail = prove_bounds(plan.start_expanded, plan.length_expanded, f"{plan.target}.shape[{plan.dim}]",
                                  plan.guards, plan.torch_names)
    if result == "proved":
        return None
    if result == "refuted":
        return Decline(NAME, f"{BOUNDS_REASON} (e.g. {detail})")
    return Decline(NAME, f"{BOUNDS_REASON} ({detail})")


def match(loc: Located) -> Match | Decline:
    plan = analyse(loc.module.code, loc.line)
    if isinstance(plan, Decline):
        return plan
    bad = decide_bounds(plan)
    if bad is not None:
        return bad
    return Match(NAME, f"`{plan.target}[..., {plan.start}:...] = {plan.value}` -> "
                 f"`{plan.target}.narrow({plan.dim}, {plan.start}, {plan.length}).copy_({plan.value})` "
                 "(bounds proved in range)")
