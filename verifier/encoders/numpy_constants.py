"""Encoders for numpy on Python constants made exact Python arithmetic under a guard
(``np.sum`` / ``np.max`` / ``np.min`` -> ``sum`` / ``max`` / ``min``, ``np.prod`` -> ``math.prod``,
``np.lcm`` / ``np.gcd`` -> ``math.lcm`` / ``math.gcd``).

The guarded expression is read back from the mended source (an immediately called lambda
that computes the Python result when its guard holds and calls the numpy function
otherwise); its bounds are the constants written in that guard, not the rewrite's intent.

* ``numpy-int64-exact`` (solver): under the guard, numpy's int64 arithmetic cannot wrap, so
  it computes the exact integer Python computes. For ``sum``: an inductive step over the
  accumulation, in integer arithmetic with int64 wrap-around written as
  ``((x + 2**63) mod 2**64) - 2**63``: if the running sum of ``k`` elements is within
  ``k * M`` (``M`` the guard's element bound), adding one more guarded element wraps to the
  exact sum and stays within ``(k + 1) * M``, for every ``k`` below the guard's length bound;
  the list is non-empty (``np.sum([])`` is float64). For ``max``/``min``: every admitted element
  converts to int64 exactly and the list is non-empty, so numpy picks the same element by the
  same order. For ``prod``: every element is a
  positive int below the guard's bound and the exact product below the guard's product
  bound (at most ``2**63``); a step multiplies a partial product ``p >= 1`` that is an int64
  exactly by an element ``e``, with the rest of the product ``r >= 1``, so
  ``1 <= p * e <= p * e * r``: the step cannot wrap, in any order of multiplication (every
  subset's product is at most the whole's). For ``lcm``: numpy's formula
  ``abs(a / gcd * b)`` with ``gcd >= 1`` dividing ``a`` (``gcd == 0`` only for ``a == b == 0``,
  where both give 0): the operands and the product fit int64 and ``abs`` cannot overflow.
  For ``gcd``: ``abs`` of either operand cannot overflow (Euclid on non-negative int64 values
  only shrinks them). Unsat is a proof.
* ``numpy-result-consumer`` (check): the rewrite returns an ``int`` where numpy returned an
  ``np.int64``. A static screen of the mended source checks that the guarded expression sits
  where its value only sizes ``np.zeros/ones/empty/full`` or ``torch.zeros/ones/empty/full``,
  is the argument of ``range()``, ``int()`` or ``float()``, or is compared (``==``, ``<``, ...) with
  ints (literals, sizes, ``len()``) where only the comparison's truth is used (an if, while,
  assert or conditional test: np.bool_ and bool test alike), and that the module binds none of the
  builtins the expression calls; then the consumer is run on the installed numpy and torch
  with ``np.int64(3)`` and ``3`` and the results compared (shape, dtype, values, type).
"""
from __future__ import annotations

import ast
import operator

import z3

from verifier.encoders.base import Ctx, Query, bound_in_reach, decide, in_tree, names_bound_by
from verifier.outcomes import Outcome, check_refuted, checked, unknown

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
_BUILTINS = ("sum", "type", "list", "tuple", "int", "len", "all", "max", "min")
_LIST_OPS = ("sum", "max", "min")     # reductions of a list of ints under sum's guard
_TIMEOUT_FLOOR_MS = 10000   # the lcm query is non-linear: give it room over the default


def wrap64(x):
    """The int64 value of the exact integer ``x`` (two's complement wrap-around)."""
    return (x + 2 ** 63) % 2 ** 64 - 2 ** 63


# -- reading the guard back from the mended source -----------------------------------------

class _Unreadable(Exception):
    pass


def _const(node: ast.AST) -> int:
    """An integer constant written as literals and ``+ - * **``."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _const(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow)):
        a, b = _const(node.left), _const(node.right)
        if isinstance(node.op, ast.Pow):
            if not 0 <= b <= 256 or abs(a) > 2 ** 16:
                raise _Unreadable("exponent out of range")
            return a ** b
        return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
    raise _Unreadable(f"`{ast.unparse(node)}` is not an integer constant")


def _is_call(node, func: str, args: list[str]) -> bool:
    return (isinstance(node, ast.Call) and ast.unparse(node.func) == func and not node.keywords
            and [ast.unparse(a) for a in node.args] == args)


def _type_is(node, var: str, typ: str) -> bool:
    return (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Is)
            and _is_call(node.left, "type", [var]) and ast.unparse(node.comparators[0]) == typ)


def _open_range(node, var_src: str) -> tuple[int, int]:
    """``LO < X < HI`` with constant bounds -> (LO, HI)."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 2
            and all(isinstance(o, ast.Lt) for o in node.ops) and ast.unparse(node.comparators[0]) == var_src):
        raise _Unreadable(f"`{ast.unparse(node)}` is not `LO < {var_src} < HI`")
    return _const(node.left), _const(node.comparators[1])


def _and_terms(node) -> list:
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return list(node.values)
    return [node]


def read_guard(call: ast.Call, op: str, np_name: str) -> dict:
    """The bounds of a guarded call ``(lambda ...: PY if GUARD else NP)(operands)``."""
    lam = call.func
    if not (isinstance(lam, ast.Lambda) and isinstance(lam.body, ast.IfExp)):
        raise _Unreadable("not an immediately called lambda with a conditional body")
    params = [a.arg for a in lam.args.args]
    if lam.args.vararg or lam.args.kwarg or lam.args.kwonlyargs or lam.args.defaults or lam.args.posonlyargs:
        raise _Unreadable("the lambda takes more than plain parameters")
    body, test, orelse = lam.body.body, lam.body.test, lam.body.orelse
    terms = _and_terms(test)
    if op in (*_LIST_OPS, "prod"):
        if len(params) != 1 or len(call.args) != 1:
            raise _Unreadable(f"{op} takes one operand")
        v = params[0]
        python = "math.prod" if op == "prod" else op
        if not _is_call(body, python, [v]) or not _is_call(orelse, f"{np_name}.{op}", [v]):
            raise _Unreadable(f"the branches are not `{python}(v)` / `np.{op}(v)`")
    if op in _LIST_OPS:
        if len(terms) != 3 or not _type_is(terms[0], v, "list"):
            raise _Unreadable("the guard is not `type(v) is list and LO < len(v) < N and all([...])`")
        len_lo, len_hi = _open_range(terms[1], f"len({v})")
        lo, hi = _element_range(terms[2], v)
        return {"len_lo": len_lo, "len_hi": len_hi, "lo": lo, "hi": hi}
    if op == "prod":
        kinds = terms[0]
        if not (len(terms) == 4 and isinstance(kinds, ast.BoolOp) and isinstance(kinds.op, ast.Or)
                and len(kinds.values) in (2, 3) and _type_is(kinds.values[0], v, "list")
                and _type_is(kinds.values[1], v, "tuple")
                and (len(kinds.values) == 2 or _type_is(kinds.values[2], v, "torch.Size"))):
            raise _Unreadable("the guard is not `(type(v) is list or type(v) is tuple) and LO < len(v) < N and "
                              "all([...]) and math.prod(v) < P`")
        len_lo, len_hi = _open_range(terms[1], f"len({v})")
        lo, hi = _element_range(terms[2], v)
        last = terms[3]
        if not (isinstance(last, ast.Compare) and len(last.ops) == 1 and isinstance(last.ops[0], ast.Lt)
                and _is_call(last.left, "math.prod", [v])):
            raise _Unreadable("the product test is not `math.prod(v) < P`")
        return {"len_lo": len_lo, "len_hi": len_hi, "lo": lo, "hi": hi, "prod_hi": _const(last.comparators[0]),
                "torch_size": len(kinds.values) == 3}
    if op in ("lcm", "gcd"):
        if len(params) != 2 or len(call.args) != 2:
            raise _Unreadable(f"{op} takes two operands")
        a, b = params
        if not _is_call(body, f"math.{op}", [a, b]) or not _is_call(orelse, f"{np_name}.{op}", [a, b]):
            raise _Unreadable(f"the branches are not `math.{op}(a, b)` / `np.{op}(a, b)`")
        if len(terms) != 4 or not (_type_is(terms[0], a, "int") and _type_is(terms[1], b, "int")):
            raise _Unreadable("the guard is not `type(a) is int and type(b) is int and LO < a < HI and LO < b < HI`")
        a_lo, a_hi = _open_range(terms[2], a)
        b_lo, b_hi = _open_range(terms[3], b)
        return {"a_lo": a_lo, "a_hi": a_hi, "b_lo": b_lo, "b_hi": b_hi}
    raise _Unreadable(f"np.{op} is not encoded")


def _element_range(every, v: str) -> tuple[int, int]:
    """``all([type(e) is int and LO < e < HI for e in v])`` -> (LO, HI)."""
    if not (isinstance(every, ast.Call) and ast.unparse(every.func) == "all" and len(every.args) == 1
            and not every.keywords and isinstance(every.args[0], ast.ListComp)):
        raise _Unreadable("the element test is not `all([... for e in v])`")
    comp = every.args[0]
    if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
        raise _Unreadable("the element test has more than one plain `for`")
    gen = comp.generators[0]
    if not isinstance(gen.target, ast.Name) or ast.unparse(gen.iter) != v:
        raise _Unreadable("the element test does not iterate the operand")
    e = gen.target.id
    el = _and_terms(comp.elt)
    if len(el) != 2 or not _type_is(el[0], e, "int"):
        raise _Unreadable("the element test is not `type(e) is int and LO < e < HI`")
    return _open_range(el[1], e)


def find_guarded(code: str, mended: str) -> tuple[ast.Call, dict] | None:
    """The first guarded call ``mended`` in the mended source, with each node's parent."""
    hit = find_all_guarded(code, mended)
    return (hit[0][0], hit[1]) if hit is not None else None


def find_all_guarded(code: str, mended: str) -> tuple[list[ast.Call], dict] | None:
    """Every guarded call ``mended`` in the mended source (a check must hold at each: the
    obligation does not say which one the rewrite made), with each node's parent."""
    try:
        tree = ast.parse(code)
        want = ast.dump(ast.parse(mended, mode="eval").body)
    except SyntaxError:
        return None
    parents: dict[int, ast.AST] = {}
    found = []
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Lambda) and ast.dump(node) == want:
            found.append(node)
    return (found, parents) if found else None


# -- numpy-int64-exact -------------------------------------------------------------------

def _sum_query(g: dict) -> Query:
    lo, hi, len_lo, len_hi = g["lo"], g["hi"], g["len_lo"], g["len_hi"]
    m = max(-lo - 1, hi - 1, 0)                    # |e| <= m for every admitted element
    s, e, k, n = z3.Ints("partial_sum element k length")
    premises = [n > len_lo, n < len_hi]           # the length the guard admits
    step = wrap64(wrap64(s) + wrap64(e))           # numpy: int64 + int64 in int64
    in_step = [e > lo, e < hi, k >= 0, k < n, s <= k * m, s >= -k * m]   # the induction hypothesis
    claim = z3.Or(n < 1,                           # empty: np.sum([]) is float64 0.0
                  z3.And(*in_step, z3.Or(
                      wrap64(e) != e,              # the element converts to int64 exactly
                      wrap64(s) != s,              # the partial sum is an int64 exactly
                      step != s + e,               # the int64 addition does not wrap
                      s + e > (k + 1) * m, s + e < -(k + 1) * m)))   # the invariant holds after the step
    texts = [f"guard read from the mended source: a list, {len_lo} < len < {len_hi}, every element of type int "
             f"with {lo} < e < {hi}",
             "np.asarray of Python ints in int64 range is int64 (observed), and numpy adds them in int64",
             f"induction over the accumulation: the empty sum is 0 (within 0 * {m}); the step is the query",
             "numpy may add in any order (pairwise): int64 addition is associative and commutative modulo 2**64, "
             "so the order cannot change a result that does not wrap"]
    return Query(premises, [claim], texts)


def _extreme_query(g: dict, op: str) -> Query:
    e, n = z3.Ints("element length")
    premises = [n > g["len_lo"], n < g["len_hi"], e > g["lo"], e < g["hi"]]   # what the guard admits
    claim = z3.Or(n < 1,               # empty: np.max([]) raises, with another message than max([])
                  wrap64(e) != e)      # an element does not convert to int64 exactly
    texts = [f"guard read from the mended source: a list, {g['len_lo']} < len < {g['len_hi']}, every element of "
             f"type int with {g['lo']} < e < {g['hi']}",
             f"np.asarray of Python ints in int64 range is int64 (observed); np.{op} then picks one element by the "
             f"int64 order, which is the integers' order when every element is an int64 exactly: the query"]
    return Query(premises, [claim], texts)


def _prod_query(g: dict) -> Query:
    p, e, r, n = z3.Ints("partial_product element rest length")
    premises = [n > g["len_lo"], n < g["len_hi"],                          # the length the guard admits
                e > g["lo"], e < g["hi"], r >= 1, p >= 1, wrap64(p) == p,   # the induction hypothesis
                p * e * r < g["prod_hi"]]
    claim = z3.Or(n < 1,                     # empty: np.prod([]) is float64 1.0
                  wrap64(e) != e,            # the element converts to int64 exactly
                  p * e < 1,                 # the partial products stay >= 1 ...
                  p * e > p * e * r,         # ... and at most the whole product
                  wrap64(p * e) != p * e)    # the int64 multiplication does not wrap
    texts = [f"guard read from the mended source: a list or tuple, {g['len_lo']} < len < {g['len_hi']}, every "
             f"element of type int with {g['lo']} < e < {g['hi']}, and the exact product below {g['prod_hi']}",
             "np.asarray of Python ints in int64 range is int64 (observed), and numpy multiplies them in int64",
             "induction over the multiplication: the empty product is 1; the step is the query (r: the product of "
             "the elements not yet multiplied, >= 1)",
             "numpy may multiply in any order: with every element >= 1, every partial product of any subset is at "
             "most the whole product, so no order wraps"]
    return Query(premises, [claim], texts)


def _lcm_query(g: dict, op: str) -> Query:
    a, b, gcd, q = z3.Ints("a b gcd quotient")
    premises = [a > g["a_lo"], a < g["a_hi"], b > g["b_lo"], b < g["b_hi"]]
    claim = [wrap64(a) != a, wrap64(b) != b, a == INT64_MIN, b == INT64_MIN]   # operands and their abs
    texts = [f"guard read from the mended source: type(a) is int and type(b) is int, {g['a_lo']} < a < {g['a_hi']}, "
             f"{g['b_lo']} < b < {g['b_hi']}",
             "numpy's gcd: abs of both operands, then Euclid on non-negative int64 values (remainders only shrink)"]
    if op == "lcm":
        premises += [gcd >= 1, a == gcd * q]
        claim += [wrap64(q * b) != q * b, q * b == INT64_MIN]
        texts += ["numpy's lcm: gcd == 0 ? 0 : abs(a / gcd * b); gcd == 0 only for a == b == 0 (both give 0), "
                  "else gcd >= 1 divides a, so the C division is exact (quotient q)",
                  "math.lcm(a, b) is abs(a * b) // gcd(a, b) = abs(q * b) exactly"]
    return Query(premises, [z3.Or(*claim)], texts)


def _numpy_int64_observed() -> str | None:
    import numpy as np

    if np.asarray([1, -1]).dtype != np.int64 or np.sum([1, 2]).dtype != np.int64 \
            or np.prod((2, 3)).dtype != np.int64 or np.max([1, 2]).dtype != np.int64 or np.min([1, 2]).dtype != np.int64:
        return f"numpy {np.__version__}: a list of Python ints is not reduced in int64 here"
    return None


def int64_exact(ob: dict, ctx: Ctx) -> Outcome:
    op, np_name, mended = ob.get("op"), ob.get("numpy"), ob.get("mended")
    if not ctx.code or not mended or op not in (*_LIST_OPS, "prod", "lcm", "gcd") or not np_name:
        return unknown("the mended source or the guarded expression is not recorded")
    hit = find_guarded(ctx.code, mended)
    if hit is None:
        return unknown("the guarded expression was not found in the mended source")
    try:
        g = read_guard(hit[0], op, np_name)
    except _Unreadable as exc:
        return unknown(f"the guard in the mended source is outside what is encoded: {exc}")
    if any(abs(v) > 2 ** 70 for v in g.values()):
        return unknown("the guard's bounds are beyond what is encoded")
    if np_name not in _module_aliases(ast.parse(ctx.code), "numpy"):
        return unknown(f"`{np_name}` is not bound to numpy alone in the mended source: the fallback is not numpy's")
    if g.get("torch_size") and "torch" not in _module_aliases(ast.parse(ctx.code), "torch"):
        return unknown("`torch` is not bound to torch alone in the mended source: the guard's `torch.Size` may be "
                       "another type")
    if op == "prod" and (g["lo"] < 0 or g["prod_hi"] > 2 ** 63):
        return unknown("the prod guard admits a non-positive element or a product beyond int64: not encoded")
    env = _numpy_int64_observed()
    if env:
        return unknown(env)
    build = {"sum": lambda: _sum_query(g), "prod": lambda: _prod_query(g), "max": lambda: _extreme_query(g, op),
             "min": lambda: _extreme_query(g, op)}.get(op, lambda: _lcm_query(g, op))
    slow = ctx.timeout_ms if op == "sum" else max(ctx.timeout_ms, _TIMEOUT_FLOOR_MS)
    local = Ctx(ctx.facts, ctx.defs, ctx.code, ctx.before, slow, ctx.obligations)
    return decide("numpy-int64-exact", [("guard", build)], local,
                  "unbounded integers (Z3 Int), int64 wrap-around as ((x + 2**63) mod 2**64) - 2**63")


# -- numpy-result-consumer ---------------------------------------------------------------

def _module_aliases(tree: ast.Module, module: str) -> set[str]:
    """Names bound only by ``import MODULE [as NAME]`` (at least once at the top level)."""
    how: dict[str, list[tuple]] = {}
    top = {id(s) for s in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                name = a.asname or a.name.split(".")[0]
                what = a.name if a.asname or "." not in a.name else a.name + " (package)"
                how.setdefault(name, []).append((what, id(node) in top))
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                how.setdefault(a.asname or a.name, []).append(("from", False))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            how.setdefault(node.id, []).append(("other", False))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            how.setdefault(node.name, []).append(("other", False))
        elif isinstance(node, ast.arg):
            how.setdefault(node.arg, []).append(("other", False))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for n in node.names:
                how.setdefault(n, []).append(("other", False))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            how.setdefault(node.name, []).append(("other", False))
    return {n for n, hs in how.items() if all(h[0] == module for h in hs) and any(h[1] for h in hs)}


_ALLOC = ("zeros", "ones", "empty", "full")
_RESHAPE_METHODS = ("view", "reshape")


_ORDER_OPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _int_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _int_term(node: ast.AST) -> bool:
    """An int by its spelling: a signed integer literal, ``X.shape[k]``, ``X.ndim``,
    ``X.size(k)``/``X.dim()``/``X.numel()``, ``len(X)``."""
    if _int_literal(node):
        return True
    if isinstance(node, ast.Subscript):   # a literal index: `x.shape[i]` may be a slice (helper-79)
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and _int_literal(node.slice)
    if isinstance(node, ast.Attribute):
        return node.attr == "ndim"
    if isinstance(node, ast.Call) and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
        if isinstance(node.func, ast.Name):
            return node.func.id == "len" and len(node.args) == 1
        # `x.size()` alone is a torch.Size, which numpy compares elementwise where int raises
        return isinstance(node.func, ast.Attribute) and node.func.attr in ("size", "dim", "numel") \
            and len(node.args) == (1 if node.func.attr == "size" else 0) and all(_int_literal(a) for a in node.args)
    return False


def truth_comparison(node: ast.AST, parents: dict) -> bool:
    """``node`` is an operand of ``==``/``!=``/``<``/``<=``/``>``/``>=`` comparisons with int terms
    only, whose result is only tested for truth: the test of an if, while, assert or
    conditional expression, possibly under ``not``/``and``/``or``."""
    comp = parents.get(id(node))
    if not (isinstance(comp, ast.Compare) and all(isinstance(o, _ORDER_OPS) for o in comp.ops)):
        return False
    if not all(_int_term(e) for e in (comp.left, *comp.comparators) if e is not node):
        return False
    return truth_only(comp, parents)


def truth_only(node: ast.AST, parents: dict) -> bool:
    """``node``'s value is only tested for truth: the test of an if, while, assert or conditional
    expression, possibly under ``not``/``and``/``or``."""
    child, up = node, parents.get(id(node))
    while isinstance(up, ast.BoolOp) or (isinstance(up, ast.UnaryOp) and isinstance(up.op, ast.Not)):
        child, up = up, parents.get(id(up))
    return isinstance(up, (ast.If, ast.While, ast.IfExp, ast.Assert)) and up.test is child


# int arithmetic between the value and its consumer (``pad = (m - n % m) % m``): np.int64 and
# int agree where no int64 step overflows and no divisor is 0, decided on intervals
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_MAX_DEPTH = 3


def value_interval(g: dict, op: str) -> tuple[int, int]:
    """The closed interval the guarded result lies in, from the guard's bounds ``g``."""
    if op in ("sum", "max", "min"):
        lo, hi = g["lo"] + 1, g["hi"] - 1
        if op != "sum":
            return lo, hi
        n = [g["len_lo"] + 1, g["len_hi"] - 1]
        return min(k * lo for k in n), max(k * hi for k in n)
    if op == "prod":
        return 1, g["prod_hi"] - 1
    a, b = max(abs(g["a_lo"] + 1), abs(g["a_hi"] - 1)), max(abs(g["b_lo"] + 1), abs(g["b_hi"] - 1))
    positive = g["a_lo"] >= 0 and g["b_lo"] >= 0     # both operands >= 1: the result is >= 1
    return (1 if positive else 0), (a * b if op == "lcm" else max(a, b))


def _interval(node: ast.AST, names: dict, leaves: dict) -> tuple[int, int] | str:
    """The closed interval of an int expression over the value (``leaves``: node id -> interval;
    ``names``: its locals -> interval), integer literals and sizes (a size or ``len()`` is a
    non-negative int64); a str saying why not, where a step may leave int64 or divide by 0."""
    if id(node) in leaves:
        return leaves[id(node)]
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        a, b = _interval(node.left, names, leaves), _interval(node.right, names, leaves)
        if isinstance(a, str) or isinstance(b, str):
            return a if isinstance(a, str) else b
        op = _ARITH[type(node.op)]
        if op in ("//", "%") and b[0] <= 0 <= b[1]:
            return (f"the divisor `{ast.unparse(node.right)}` may be 0 (bounds [{b[0]}, {b[1]}]): numpy gives 0 with a "
                    "RuntimeWarning where Python raises ZeroDivisionError")
        corners = [(x, y) for x in a for y in b]
        if op == "+":
            r = (a[0] + b[0], a[1] + b[1])
        elif op == "-":
            r = (a[0] - b[1], a[1] - b[0])
        elif op == "*":
            r = (min(x * y for x, y in corners), max(x * y for x, y in corners))
        elif op == "//":   # monotone in each operand where the divisor keeps one sign: the corners bound it
            r = (min(x // y for x, y in corners), max(x // y for x, y in corners))
        else:              # Python's and numpy's remainder take the divisor's sign
            r = (0, b[1] - 1) if b[0] > 0 else (b[0] + 1, 0)
        for lo, hi in (a, b, r):
            if lo < INT64_MIN or hi > INT64_MAX:
                return (f"`{ast.unparse(node)}` may leave int64 (bounds [{r[0]}, {r[1]}]): numpy wraps around or "
                        "raises where Python computes the exact integer")
        return r
    if _int_literal(node):
        v = ast.literal_eval(node)
        return v, v
    if _int_term(node):
        return 0, INT64_MAX
    return f"`{ast.unparse(node)}` is not built from integer literals, sizes, len() and the value"


def follow(node: ast.AST, parents: dict, np_names: set[str], torch_names: set[str], names: dict, leaves: dict,
           depth: int = 0) -> list[tuple[str, str]] | str:
    """The consumers the value at ``node`` reaches (:func:`consumer_of`), through int arithmetic
    (each step bounded by :func:`_interval`) and locals bound to it once; a str saying why not."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.BinOp) and type(parent.op) in _ARITH:
        bounds = _interval(parent, names, leaves)
        if isinstance(bounds, str):
            return bounds
        got = follow(parent, parents, np_names, torch_names, names, {**leaves, id(parent): bounds}, depth)
        return got if isinstance(got, str) else [("builtins", "arith"), *got]
    if isinstance(parent, ast.Assign) and isinstance(node, ast.BinOp) and parent.value is node:
        reads = local_reads(parent, node, parents)
        if isinstance(reads, str):
            return reads
        if depth >= _MAX_DEPTH:
            return f"`{reads[0].id}` is more than {_MAX_DEPTH} locals away from the numpy call"
        inner = {**names, reads[0].id: leaves[id(node)]}
        out = []
        for read in reads:
            got = follow(read, parents, np_names, torch_names, inner, leaves, depth + 1)
            if isinstance(got, str):
                return got
            out += got
        return out
    got = consumer_of(node, parents, np_names, torch_names)
    if got is None:
        return (f"`{ast.unparse(node)}` (line {getattr(node, 'lineno', '?')}) goes to `{type(parent).__name__}`, not to "
                "an allocation's shape, range(), int(), float(), a comparison with ints tested for truth only, or int "
                "arithmetic on the way to one: an int there may differ from np.int64")
    return [got]


def consumer_of(call: ast.Call, parents: dict, np_names: set[str], torch_names: set[str]) -> tuple[str, str] | None:
    """(library, consumer) when the guarded ``call`` only sizes an allocation, is an element of
    ``torch.reshape``'s shape sequence, is the argument of ``range()`` / ``int()`` / ``float()``, or
    is compared with ints for truth only (:func:`truth_comparison`), else None."""
    if truth_comparison(call, parents):
        return "builtins", "compare"
    if truth_only(call, parents):
        return "builtins", "truth"
    parent = parents.get(id(call))
    holder, node = None, call
    if isinstance(parent, (ast.Tuple, ast.List)):
        node, parent = parent, parents.get(id(parent))
        holder = "sequence"
    if isinstance(parent, ast.keyword):
        kw, call_node = parent.arg, parents.get(id(parent))
        position = None
    elif isinstance(parent, ast.Call) and node in parent.args:
        kw, call_node, position = None, parent, parent.args.index(node)
    else:
        return None
    if not isinstance(call_node, ast.Call) or any(isinstance(a, ast.Starred) for a in call_node.args):
        return None
    name = ast.unparse(call_node.func)
    root, _, last = name.rpartition(".")
    if isinstance(call_node.func, ast.Attribute) and last in _RESHAPE_METHODS and not call_node.keywords \
            and root.partition(".")[0] not in np_names | torch_names and kw is None:
        # a size of a method call `h.view(-1, n)`, every other argument an int by its spelling (a
        # TypeError names each argument's type), or `h.view((-1, n))`, the tuple alone (the
        # receiver's type is the rewrite's numpy-method-receiver obligation, not decided here)
        if holder is None:
            return ("method", last) if all(a is node or _int_term(a) for a in call_node.args) else None
        return ("method", last) if len(call_node.args) == 1 else None
    if root in np_names and last in _ALLOC and (position == 0 or kw == "shape"):
        return "numpy", last
    if root in torch_names and last == "reshape":
        # an element of the shape sequence (perceiver: `torch.reshape(x, [b, np.prod(x.shape[1:-1]), c])`)
        return ("torch", "reshape") if holder == "sequence" and (position == 1 or kw == "shape") else None
    if root in torch_names and last in _ALLOC:
        # a bare number is a size only as one of zeros/ones/empty's positional sizes; `full`'s
        # size and the `size=` keyword want a sequence (TypeError naming the type otherwise)
        if holder is None and (last == "full" or position is None):
            return None
        if (last == "full" and position == 0) or (last != "full" and (position is not None or kw == "size")):
            return "torch", last
        return None
    if holder is None and kw is None and name in ("int", "float") and len(call_node.args) == 1 \
            and not call_node.keywords:
        return "builtins", name
    if holder is None and kw is None and name == "range" and 1 <= len(call_node.args) <= 3 and not call_node.keywords:
        return "builtins", "range"
    return None


_INTROSPECTION = ("locals", "vars", "eval", "exec")
# what reads a frame's locals by name other than those builtins: a frame object, a closure
# cell, the builtins module (an adversarial review reached the local through each)
_FRAME_ATTRS = ("_getframe", "currentframe", "f_locals", "f_back", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                "__closure__", "cell_contents", "getouterframes", "getinnerframes")
_FRAME_MODULES = ("inspect", "builtins", "traceback", "__builtins__")


def frame_reader(tree: ast.Module) -> str | None:
    """Where the module can read a frame's locals other than by calling locals()/vars()/eval()/
    exec() by name: those builtins named at all (an alias: ``grab = locals``), a frame or
    closure attribute, the inspect/builtins/traceback modules. Callees in other modules stay an
    assumption."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _INTROSPECTION + ("__builtins__",):
            return f"`{node.id}` (line {node.lineno})"
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
            return f"`.{node.attr}` (line {node.lineno})"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any((n or "").split(".")[0] in _FRAME_MODULES for n in names):
                return f"an import of {', '.join(n for n in names if n)} (line {node.lineno})"
    return None


def local_reads(assign: ast.Assign, value: ast.AST, parents: dict) -> list[ast.Name] | str:
    """The reads of the local that ``assign`` (``NAME = value``) binds, in its function; or
    why they cannot be followed: another target, a nested scope, a second binding of the
    name anywhere in the function (a parameter, loop target, walrus, ``del``, ``global``, a
    match capture). What reads locals by name (``locals()``, a frame) is :func:`frame_reader`'s."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name) or assign.value is not value:
        return "the guarded expression is assigned, but not to one plain name"
    name = assign.targets[0].id
    scope = parents.get(id(assign))
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                        ast.ClassDef, ast.Module)):
        scope = parents.get(id(scope))
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"`{name} = ...` is not a local of a function: other code may read it"
    bound = 0
    for node in ast.walk(scope):
        if node is scope:
            bound += sum(1 for a in ast.walk(node.args) if isinstance(a, ast.arg) and a.arg == name)
            continue
        bound += names_bound_by(node).count(name)
        if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name == name:
            bound += 1
        if isinstance(node, ast.MatchMapping) and node.rest == name:
            bound += 1
    if bound != 1:
        return f"`{name}` is bound {bound} times in the function: a read may see another value"
    reads = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return reads or f"`{name}` is never read"


def _observe(lib: str, fn: str) -> str | None:
    """Run the consumer with np.int64(3) and 3: None when the results are identical, else how they differ."""
    import numpy as np
    import torch

    def same(x, y) -> bool:
        if type(x) is not type(y):
            return False
        if isinstance(x, np.ndarray):
            return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y)
        if isinstance(x, torch.Tensor):
            return x.shape == y.shape and x.dtype == y.dtype and (fn == "empty" or torch.equal(x, y))
        return x == y

    for n in (np.int64(3), np.int64(0)):
        i = int(n)
        if lib == "numpy":
            f = getattr(np, fn)
            extra = (1.5,) if fn == "full" else ()
            pairs = [(f((2, n), *extra), f((2, i), *extra)), (f(n, *extra), f(i, *extra))]
        elif lib == "method":
            # a tensor's method, and a numpy array's `reshape`, sizes as arguments and as one tuple
            # (an array's `view` reads its argument as a dtype: `a.view(np.int64(3))` is a view,
            # `a.view(3)` a TypeError; the rule takes `.view`'s receiver to be a tensor)
            pairs = []
            for obj in (torch.arange(2.0 * i), *((np.arange(2.0 * i),) if fn == "reshape" else ())):
                m = getattr(obj, fn)
                for args_n, args_i in (((2, n), (2, i)), (((n, 2),), ((i, 2),)), ((-1, n), (-1, i))):
                    got = []
                    for args in (args_n, args_i):
                        try:
                            got.append(m(*args))
                        except Exception as exc:  # the same error both ways is what is compared
                            got.append((type(exc), str(exc)))
                    pairs.append(tuple(got))
        elif lib == "torch" and fn == "reshape":
            t = torch.arange(2.0 * i)
            pairs = [(torch.reshape(t, (2, n)), torch.reshape(t, (2, i))), (torch.reshape(t, [n, 2]),
                                                                            torch.reshape(t, [i, 2]))]
        elif lib == "torch":
            f = getattr(torch, fn)
            pairs = [(f((2, n), 1.5), f((2, i), 1.5))] if fn == "full" else [(f((2, n)), f((2, i))), (f(2, n), f(2, i))]
        elif fn == "arith":
            # +, -, *, //, % of np.int64 and int, either side, in int64 range: the same integer
            for f in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod):
                for k in (2, -3, 7):
                    for x, y, ix, iy in ((n, k, i, k), (k, n, k, i)):
                        if iy == 0:
                            continue
                        if int(f(x, y)) != f(ix, iy):
                            return f"{f.__name__}({x!r}, {y!r}) is {f(x, y)!r}, not {f(ix, iy)} as for ints"
            pairs = []
        elif fn == "truth":
            if bool(n) != bool(i):
                return f"bool(np.int64({i})) is {bool(n)}, bool({i}) is {bool(i)}"
            pairs = []
        elif fn == "compare":
            # only the truth is used: bool() of np.bool_ and of bool, for every operator, both orders
            ks = (i - 1, i, i + 1, -1, 2 ** 40, 2 ** 70, -2 ** 70)
            for f in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
                for k in ks:
                    if bool(f(n, k)) != bool(f(i, k)) or bool(f(k, n)) != bool(f(k, i)):
                        return f"{f.__name__}(np.int64({i}), {k}) is not {f(i, k)} as for {i}"
            pairs = []
        elif fn in ("int", "float"):
            cast = int if fn == "int" else float
            pairs = [(cast(n), cast(i))]
            if type(pairs[0][0]) is not type(pairs[0][1]):
                return f"{fn}() gives {type(pairs[0][0]).__name__} for np.int64({i}) and {type(pairs[0][1]).__name__}"
        else:
            pairs = [(list(range(n)), list(range(i))), (list(range(1, n + 2, 2)), list(range(1, i + 2, 2)))]
        for x, y in pairs:
            if not same(x, y):
                return f"{lib}.{fn} gives {x!r} for np.int64({i}) and {y!r} for {i}"
    return None


def at_every_occurrence(code: str | None, mended: str | None, check) -> Outcome:
    """``check(call, parents, tree)`` at every occurrence of the guarded expression ``mended``
    in the mended source (the obligation does not say which one the rewrite made): the first
    outcome that is not ``checked``, else the first."""
    if not code or not mended:
        return unknown("the mended source or the guarded expression is not recorded")
    hit = find_all_guarded(code, mended)
    if hit is None:
        return unknown("the guarded expression was not found in the mended source")
    calls, parents = hit
    tree = ast.parse(code)
    outcomes = [check(call, parents, tree) for call in calls]
    return next((o for o in outcomes if o.result != "checked"), outcomes[0])


def result_consumer(ob: dict, ctx: Ctx) -> Outcome:
    return at_every_occurrence(ctx.code, ob.get("mended"),
                               lambda call, parents, tree: _consumer_outcome(ob, call, parents, tree))


def _consumer_outcome(ob: dict, call: ast.Call, parents: dict, tree: ast.Module) -> Outcome:
    mended = ob.get("mended")
    by = ("static screen of the mended source: the guarded expression's value only sizes a numpy/torch "
          "allocation or a `.view()`/`.reshape()` call, is the argument of range()/int()/float(), which convert it with operator.index/int/float "
          "(np.int64 and int alike), or is compared with ints or tested for truth only; no builtin it calls is "
          "rebound; "
          "corroborated by a probe of that consumer on the installed numpy and torch with np.int64 and int")
    np_names, torch_names = _module_aliases(tree, "numpy"), _module_aliases(tree, "torch")
    where = parents.get(id(call))
    try:
        bounds = value_interval(read_guard(call, ob.get("op"), ob.get("numpy")), ob.get("op"))
    except (_Unreadable, KeyError) as exc:
        return check_refuted(by, f"the guard's bounds cannot be read from the mended source: {exc}")
    if isinstance(where, ast.Assign):
        # `width = <guarded>`: every read of the local is the consumer
        reads = local_reads(where, call, parents)
        if isinstance(reads, str):
            return check_refuted(by, reads)
        reader = frame_reader(tree)
        if reader:
            return check_refuted(by, f"the module can read the local `{reads[0].id}` through {reader}, which sees "
                                 "the int where it saw np.int64")
        got_all = []
        for n in reads:
            got = follow(n, parents, np_names, torch_names, {n.id: bounds}, {})
            if isinstance(got, str):
                return check_refuted(by, got)
            got_all += got
        by += f" (through the local `{reads[0].id}`, bound once and read only there)"
    else:
        got_all = follow(call, parents, np_names, torch_names, {}, {id(call): bounds})
        if isinstance(got_all, str):
            return check_refuted(by, got_all)
    if ("builtins", "arith") in got_all:
        by += ("; every int arithmetic step on the way is bounded from the guard's bounds (interval arithmetic, "
               "sizes and len() taken as non-negative int64 values): no step leaves int64 and no divisor can be 0")
    # the guard's own lambda in `tree` (a parse of its own: found by position), else every lambda
    lambdas = in_tree(tree, call.func) or [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
    # a binding in reach of the guard's lambda (not another function's parameter: helper-79's c09)
    rebound = bound_in_reach(tree, lambdas, _BUILTINS + tuple(b for b in ("range", "float")
                                                             if ("builtins", b) in got_all))
    if rebound:
        return check_refuted(by, f"the module binds `{rebound[0]}`, which the guarded expression calls as a builtin")
    if ob.get("numpy") not in np_names:
        return check_refuted(by, f"`{ob.get('numpy')}` is not bound to numpy alone in the mended source")
    if "type(v) is torch.Size" in mended and "torch" not in torch_names:
        return check_refuted(by, "`torch` is not bound by `import torch` alone in the mended source (the guard "
                             "admits its `torch.Size`)")
    if ob.get("op") in ("prod", "lcm", "gcd") and "math" not in _module_aliases(tree, "math"):
        return check_refuted(by, "`math` is not bound by `import math` alone in the mended source")
    for each in dict.fromkeys(got_all):
        differs = _observe(*each)
        if differs:
            return check_refuted(by, differs)
    import numpy as np
    import torch

    return checked(by, ["consumer: " + ", ".join(f"{a}.{b}" for a, b in dict.fromkeys(got_all)),
                        f"observed on numpy {np.__version__}, torch {torch.__version__}"])


def method_receiver(ob: dict, ctx: Ctx) -> Outcome:
    """``numpy-method-receiver``: the value sizes ``X.view(...)``/``X.reshape(...)``, which a
    tensor (and an array's ``reshape``) takes np.int64 and int alike (the consumer obligation
    observes it); that ``X`` is one is read from the method's name alone, so this stays unknown
    and the fix is labelled unsafe."""
    receivers = ", ".join(f"`{r}`" for r in ob.get("receivers") or ()) or "the receiver"
    return unknown(f"{receivers} taken to be a tensor (or, for `.reshape`, a numpy array) by the method's name "
                   "alone: an object of another type whose method tells np.int64 from int would behave differently "
                   "(a numpy array's `.view` reads np.int64(3) as a dtype and raises TypeError on 3); the "
                   "differential test observed the example inputs only")


def size_operands(ob: dict, ctx: Ctx) -> Outcome:
    """``numpy-size-operands``: the size reads a comparison or arithmetic step meets
    (``x.shape[1]``, ``x.size(0)``, ``x.ndim``, ``x.numel()``) are ints only where ``x`` is a
    tensor or an array; nothing here establishes that (an object whose ``.shape[1]`` is a
    torch.Size compares with np.int64 elementwise and with int not at all: helper-79), so the
    obligation stays unknown and the fix is labelled unsafe."""
    sizes = ", ".join(f"`{s}`" for s in ob.get("sizes") or ()) or "size reads"
    return unknown(f"{sizes} taken to be ints (tensor sizes) by their spelling alone: an object whose size read is "
                   "not an int (a torch.Size, a tensor, a float) would compare or combine differently with np.int64 "
                   "than with int; the differential test observed the example inputs only")


ENCODERS = {"numpy-int64-exact": int64_exact, "numpy-result-consumer": result_consumer,
            "numpy-size-operands": size_operands, "numpy-method-receiver": method_receiver}
CHECKS = frozenset({"numpy-result-consumer"})
