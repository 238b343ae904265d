"""Encoders for a function that returned ``torch.tensor(E)`` of a Python int, rewritten to
return ``E`` itself (a 0-d int64 tensor becomes a Python int at every caller).

* ``scalar-value-int64`` (Z3, integers): ``E`` -- sizes, int parameters, int literals,
  ``min``/``max`` and ``+ - *`` -- lies within int64 for every size in [0, B] and every int
  leaf in [-B, B], so ``torch.tensor(E)`` is an exact int64 (it raises beyond int64).
* ``scalar-use-same`` (Z3, int64-wrapped integers against exact integers): every use chain computes the
  same number with the 0-d int64 tensor (wrapping int64 arithmetic, each Python int operand
  converted to int64) as with the Python int (exact): the slice bound, index, ``clamp``
  bound or comparison operand, and, in tensor arithmetic, every scalar operand where it meets
  the tensor. Leaves are classed as tensors or ints by the observation at the use's line.
* ``scalar-use-promotion`` (check, observation): a tensor operand a use meets is one the
  int and the 0-d int64 tensor promote alike: dimensioned (a 0-d tensor does not promote
  it, neither does an int), or 0-d of a dtype both leave alone (int64, floating, complex,
  bool: bool + int64 is int64 both ways). A 0-d int32/int16/int8/uint8 operand is a
  counterexample (0-d int32 + 0-d int64 is int64, + int is int32).
* ``scalar-leaves-observed`` (check, observation): at the return line, on every hit, each
  size receiver is a tensor and each int parameter a Python int (not a bool: ``torch.tensor``
  of a bool is a bool tensor), the first observed value within the bound.
* ``scalar-callers-screened`` (check, static screen): in the mended module every reference
  to the function is a direct call bound to a local name, ``__all__`` does not export it, and
  no other ``.py`` file of its package (found from the observed ``__name__``) names it.
"""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import z3

from verifier.encoders.base import Ctx, Query, decide
from verifier.outcomes import Outcome, check_refuted, checked, unknown

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_LOW_INTS = {"int32", "int16", "int8", "uint8", "uint16", "uint32"}


class _Unsupported(Exception):
    pass


def wrap64(x):
    """``x`` wrapped to int64 (two's complement), as an integer term."""
    return (x + 2 ** 63) % (2 ** 64) - 2 ** 63


def _leaf_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _leaf_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _value_term(node: ast.AST, env: dict, premises: list, bound: int):
    """E as an exact integer term; size leaves in [0, B], int leaves in [-B, B]."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return z3.IntVal(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value_term(node.operand, env, premises, bound)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a, b = _value_term(node.left, env, premises, bound), _value_term(node.right, env, premises, bound)
        return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
            and len(node.args) >= 2 and not node.keywords:
        terms = [_value_term(a, env, premises, bound) for a in node.args]
        acc = terms[0]
        for t in terms[1:]:
            # Python's min/max keep the first of equal values: the value is the same either way
            acc = z3.If(t < acc, t, acc) if node.func.id == "min" else z3.If(t > acc, t, acc)
        return acc
    text = ast.unparse(node)
    is_size = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size") or \
        (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape")
    if isinstance(node, ast.Attribute) and _leaf_name(node):   # `self.window`: an int leaf (observed)
        text = _leaf_name(node)
    if is_size or isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and _leaf_name(node)):
        if text not in env:
            v = env[text] = z3.Int(text)
            premises.append((v >= 0) if is_size else (v >= -bound))
            premises.append(v <= bound)
        return env[text]
    raise _Unsupported(f"`{text}` is outside the encoded value grammar")


def _value_assumptions(bound: int) -> list[str]:
    return [f"every size is in [0, 2^{bound.bit_length() - 1}] and every int leaf in [-2^{bound.bit_length() - 1}, "
            f"2^{bound.bit_length() - 1}] (no tensor dimension or module constant reaches 2^{bound.bit_length() - 1})",
            "the size leaves are Python ints (`.size(k)`/`.shape[k]` of a tensor; observed: scalar-leaves-observed) "
            "and the int leaves are Python ints (observed)"]


def value_int64(ob: dict, ctx: Ctx) -> Outcome:
    expr, bound = ob.get("expr"), int(ob.get("bound") or 2 ** 48)
    try:
        tree = ast.parse(expr, mode="eval").body
        premises: list = []
        term = _value_term(tree, {}, premises, bound)
    except (SyntaxError, TypeError, _Unsupported) as exc:
        return unknown(f"the value `{expr}` is not encoded: {exc}")

    def build():
        return Query(premises, [z3.Or(term < INT64_MIN, term > INT64_MAX)], _value_assumptions(bound))

    return decide("scalar-value-int64", [("bounded-leaves", build)], ctx,
                  "exact integers (Z3 Int); int64 is [-2^63, 2^63 - 1]")


def _observed(ctx: Ctx, line, name: str) -> list[dict] | None:
    at = (ctx.facts or {}).get("at") or {}
    rec = at.get(str(line))
    if rec is None or not (ctx.facts.get("at_hits") or {}).get(str(line)):
        return None
    return rec.get(name)


def _kind_of(seen: list[dict] | None) -> str | None:
    """``tensor``, ``int`` or None (not observed, mixed, or another kind)."""
    if not seen:
        return None
    kinds = {("tensor" if s.get("kind") == "tensor" else "int" if s.get("kind") == "num" and s.get("cat") == "int"
              else "other") for s in seen}
    return kinds.pop() if len(kinds) == 1 and kinds != {"other"} else None


class _UseEval:
    """A use chain evaluated twice: with the 0-d int64 tensor (64-bit vectors, wrapping)
    and with the Python int (exact). Collects the numbers that must agree."""

    def __init__(self, ctx: Ctx, line, locals_: set, value_int, premises: list, env: dict, bound: int):
        self.ctx, self.line, self.locals, self.value = ctx, line, locals_, value_int
        self.premises, self.env, self.bound = premises, env, bound
        self.must_agree: list = []      # (bitvector term, int term, what)
        self.must_fit: list = []        # int terms that must lie within int64 (converted to a tensor's int64)
        self.tensor_leaves: list[str] = []

    def leaf(self, name: str):
        if name in self.locals:
            return "t", self.value, self.value  # exact: the value is within int64
        kind = _kind_of(_observed(self.ctx, self.line, name))
        if kind == "tensor":
            self.tensor_leaves.append(name)
            return "tensor", None, None
        if kind == "int":
            key = f"{name}@{self.line}"
            if key not in self.env:
                v = self.env[key] = z3.Int(key)
                self.premises += [v >= -self.bound, v <= self.bound]
            return "py", None, self.env[key]
        raise _Unsupported(f"`{name}` at line {self.line} was not observed as one tensor or Python int kind")

    def eval(self, node: ast.AST):
        """(kind, bitvector term of the tensor version or None, int term of the int version)."""
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return "py", None, z3.IntVal(node.value)
        name = _leaf_name(node)
        if name is not None:
            return self.leaf(name)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            k, bv, iv = self.eval(node.operand)
            return k, (wrap64(-bv) if bv is not None else None), (-iv if iv is not None else None)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = self.eval(node.left), self.eval(node.right)

            def op(x, y):
                return x + y if isinstance(node.op, ast.Add) else x - y if isinstance(node.op, ast.Sub) else x * y

            if a[0] == "tensor" or b[0] == "tensor":
                for side in (a, b):
                    self.settle(side, ast.unparse(node))
                return "tensor", None, None
            if a[0] == "py" and b[0] == "py":
                return "py", None, op(a[2], b[2])
            bva = a[1] if a[0] == "t" else self.to_bv(a[2])
            bvb = b[1] if b[0] == "t" else self.to_bv(b[2])
            return "t", wrap64(op(bva, bvb)), op(a[2], b[2])
        raise _Unsupported(f"`{ast.unparse(node)}` is outside the encoded use grammar")

    def to_bv(self, iv):
        self.must_fit.append(iv)  # a Python int meeting an int64 tensor is converted to int64 (raises beyond)
        return iv

    def settle(self, side, where: str) -> None:
        """A scalar operand that meets a tensor (or ends the chain): both versions must give the same number."""
        kind, bv, iv = side
        if kind == "t":
            self.must_agree.append((bv, iv, where))
        elif kind == "py":
            self.must_fit.append(iv)


def use_same(ob: dict, ctx: Ctx) -> Outcome:
    bound = int(ob.get("bound") or 2 ** 48)
    uses = ob.get("uses") or []
    if not uses:
        return unknown("no uses recorded")
    premises: list = []
    env: dict = {}
    try:
        value = _value_term(ast.parse(ob["value"], mode="eval").body, env, premises, bound)
    except (SyntaxError, KeyError, _Unsupported) as exc:
        return unknown(f"the value is not encoded: {exc}")
    premises += [value >= INT64_MIN, value <= INT64_MAX]  # scalar-value-int64
    claims, roles = [], []
    for u in uses:
        if u.get("role") == "clamp-input":
            continue
        ev = _UseEval(ctx, u.get("line"), set(ob.get("locals") or []), value, premises, env, bound)
        try:
            res = ev.eval(ast.parse(u["value"], mode="eval").body)
        except (SyntaxError, KeyError, _Unsupported) as exc:
            return unknown(f"use `{u.get('value')}`: {exc}")
        role = u.get("role")
        if role in ("index", "clamp-bound", "compare"):
            if res[0] == "tensor":
                return unknown(f"use `{u['value']}` ({role}) reads a tensor operand: outside what is encoded")
            ev.settle(res, u["value"])
        elif res[0] != "tensor":
            return unknown(f"use `{u['value']}` in tensor arithmetic meets no tensor operand (observed): the result "
                           "would be a Python int instead of a tensor")
        for bv, iv, _ in ev.must_agree:
            claims.append(bv != iv)
        for iv in ev.must_fit:
            claims.append(z3.Or(iv < INT64_MIN, iv > INT64_MAX))
        roles.append(f"{u['value']} ({role}, line {u.get('line')})")
    if not claims:
        return checked("the use screen: every use reads the value only through the tensor it meets, with no "
                       "number to compare", [f"uses: {'; '.join(roles)}"])

    def build():
        texts = _value_assumptions(bound) + ["the value is within int64 (scalar-value-int64)",
                                             "leaf kinds (tensor / Python int) as observed at each use's line",
                                             "uses: " + "; ".join(roles)]
        return Query(list(premises), [z3.Or(*claims)], texts)

    return decide("scalar-use-same", [("bounded-leaves", build)], ctx,
                  "0-d int64 tensor arithmetic as integers wrapped to int64 after every operation (two's "
                  "complement), the int version as exact integers (Z3 Int); a Python int meeting an int64 tensor "
                  "must fit int64", witness_values=(bound, -bound, 0, 1, -1, 2, 3))


def use_promotion(ob: dict, ctx: Ctx) -> Outcome:
    by = ("observation of the example run at each use's line (every hit): the tensor operands a use meets, "
          "against ATen's promotion rule (a dimensioned tensor is not promoted by a 0-d tensor or a Python int of "
          "the same or a lower category; 0-d operands are promoted by a 0-d int64 tensor, not by an int)")
    uses = ob.get("uses") or []
    seen_any = False
    for u in uses:
        try:
            tree = ast.parse(u["value"], mode="eval").body
        except (SyntaxError, KeyError):
            return unknown(f"use `{u.get('value')}` is not parseable")
        names = {n for n in (_leaf_name(x) for x in ast.walk(tree)) if n} - set(ob.get("locals") or [])
        # only the outermost names (an attribute chain's prefixes are not leaves)
        names = {n for n in names if not any(o != n and o.startswith(n + ".") for o in names)}
        tensors = []
        for name in sorted(names):
            seen = _observed(ctx, u.get("line"), name)
            if seen is None:
                return unknown(f"`{name}` was not observed at line {u.get('line')}")
            seen_any = True
            for s in seen:
                if s.get("kind") == "tensor":
                    tensors.append((name, s))
        role = u.get("role")
        if role in ("index", "clamp-bound", "compare") and tensors:
            return check_refuted(by, f"`{tensors[0][0]}` in the {role} `{u['value']}` is a tensor: the bound would "
                                 "not be a plain number")
        if role in ("tensor-arith", "clamp-input") and not tensors:
            return check_refuted(by, f"`{u['value']}` meets no tensor (observed): with the int it would be a Python "
                                 "number instead of a tensor")
        for name, s in tensors:
            if not s.get("shape") and s.get("dtype") in _LOW_INTS:
                return check_refuted(by, f"`{name}` is a 0-d {s['dtype']} tensor: a 0-d int64 tensor promotes it to "
                                     f"int64, a Python int keeps {s['dtype']}")
            if s.get("device") not in ("cpu", "cuda", "mps", "xpu", "meta", None):
                return unknown(f"`{name}` is on {s.get('device')}: outside what is checked")
        if role == "tensor-arith" and len({s.get("dtype") for _, s in tensors}) > 1:
            return unknown(f"`{u['value']}` mixes tensors of dtypes {sorted({s.get('dtype') for _, s in tensors})}")
    if not seen_any:
        # every use is the bare value (a slice bound `h[:n]`, an index): it meets no operand
        # to promote (a tensor-arith use without one is refuted above)
        return checked("the uses as written: each is the value alone (a slice bound or an index), meeting no "
                       "other operand", ["uses: " + "; ".join(str(u.get("value")) for u in uses[:6])])
    return checked(by, ["operands as observed on the example run (kinds, ranks, dtypes on every hit)"])


def leaves_observed(ob: dict, ctx: Ctx) -> Outcome:
    by = "observation of the example run at the return line (every hit and call)"
    line, bound = ob.get("line"), int(ob.get("bound") or 2 ** 48)
    for name in ob.get("tensors") or []:
        seen = _observed(ctx, line, name)
        if not seen:
            return unknown(f"`{name}` was not observed at line {line}")
        bad = [s for s in seen if s.get("kind") != "tensor"]
        if bad:
            return check_refuted(by, f"`{name}` is a {bad[0].get('kind')}, not a tensor: its `.size()` may not be an int")
    for name in ob.get("ints") or []:
        seen = _observed(ctx, line, name)
        if not seen:
            return unknown(f"`{name}` was not observed at line {line}")
        bad = [s for s in seen if not (s.get("kind") == "num" and s.get("cat") == "int")]
        if bad:
            what = bad[0].get("cat") or bad[0].get("kind")
            return check_refuted(by, f"`{name}` is a {what}, not a Python int: `torch.tensor` of it is not an int64 "
                                 "tensor" + (" (a bool gives a bool tensor)" if what == "bool" else ""))
        big = [s for s in seen if isinstance(s.get("value"), int) and abs(s["value"]) > bound]
        if big:
            return check_refuted(by, f"`{name}` = {big[0]['value']} is beyond the bound 2^{bound.bit_length() - 1}")
    return checked(by, ["the first observed value of each int stands for the others (values are not kept per hit)"])


def _module_refs(code: str, fname: str) -> str | None:
    """Why the mended module references ``fname`` other than by direct calls bound to a local."""
    tree = ast.parse(code)
    direct = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and \
                node.value.func.id == fname:
            direct.add(id(node.value.func))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if fname in ast.unparse(node.value):
                return f"`__all__` names `{fname}`"
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == fname and id(node) not in direct:
            return f"`{fname}` is referenced at line {node.lineno} other than by a direct call bound to a local"
        if isinstance(node, ast.Attribute) and node.attr == fname:
            return f"`.{fname}` is read as an attribute at line {node.lineno}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fname and \
                node not in tree.body:
            return f"`{fname}` is also defined as a nested function at line {node.lineno}"
    return None


def callers_screened(ob: dict, ctx: Ctx) -> Outcome:
    fname = ob.get("function")
    if not fname or not ctx.code:
        return unknown("the function or the mended source is not recorded")
    by = ("static screen: the mended module's references to the function (direct calls bound to a local, not in "
          "`__all__`) and a text search of the other .py files of its package for the name")
    why = _module_refs(ctx.code, fname)
    if why:
        return check_refuted(by, why)
    seen = _observed(ctx, ob.get("line"), "__name__") or []
    names = {s.get("value") for s in seen if s.get("kind") == "str"}
    if len(names) != 1:
        return unknown("the module's `__name__` was not observed at the return line")
    modname = names.pop()
    package, _, _ = modname.rpartition(".")
    if not package:
        return checked(by, [f"`{modname}` is a top-level module, not part of a package: no other file of a package "
                            "to screen (the scan's matcher screens the files next to it)"])
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as exc:
        return unknown(f"the package `{package}` could not be found: {exc}")
    locations = list(getattr(spec, "submodule_search_locations", None) or []) if spec else []
    if not locations:
        return unknown(f"the package `{package}` has no directory to screen")
    own = modname.rpartition(".")[2] + ".py"
    pattern = re.compile(rf"\b{re.escape(fname)}\b")
    for folder in locations:
        for other in sorted(Path(folder).glob("*.py")):
            if other.name == own:
                continue
            try:
                text = other.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return unknown(f"{other} could not be read")
            if pattern.search(text):
                return check_refuted(by, f"{other.name} in `{package}` names `{fname}`: it may import the function "
                                     "and rely on its tensor result")
    return checked(by, [f"package `{package}` ({', '.join(locations)}): a static screen; code that imports the "
                        "function from outside the package (or by a computed name) is not seen"])


def local_screened(ob: dict, ctx: Ctx) -> Outcome:
    """``scalar-local-screened`` (the local form, ``L = torch.tensor(E)`` -> ``L = E``): in the
    mended module the function binds ``L`` once, to ``E``, on the recorded line; no nested
    function, lambda or class names ``L``; the function reads no locals by name (``locals()``,
    ``vars()``, ``eval``, ``exec``, a frame or closure attribute). A callee in another module
    reading its caller's frame stays an assumption."""
    fname, local, line, value = ob.get("function"), ob.get("local"), ob.get("line"), ob.get("value")
    if not (fname and local and isinstance(line, int) and value and ctx.code):
        return unknown("the function, local, line, value or mended source is not recorded")
    by = "static screen of the mended module: the local's one binding, its captures and frame reads in the function"
    try:
        tree, want = ast.parse(ctx.code), ast.dump(ast.parse(value, mode="eval").body)
    except SyntaxError as exc:
        return unknown(f"could not parse: {exc}")
    fns = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == fname
           and f.lineno <= line <= (f.end_lineno or f.lineno)]
    if len(fns) != 1:
        return check_refuted(by, f"no single function `{fname}` holds line {line}")
    fn = fns[0]
    binds = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, (ast.Store,
                                                                                                        ast.Del))]
    binds += [a for a in ast.walk(fn.args) if isinstance(a, ast.arg) and a.arg == local]
    at = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.lineno == line and len(n.targets) == 1
          and isinstance(n.targets[0], ast.Name) and n.targets[0].id == local]
    if len(binds) != 1 or len(at) != 1 or ast.dump(at[0].value) != want:
        return check_refuted(by, f"`{local}` is not bound once in `{fname}`, to `{value}` on line {line}")
    for inner in ast.walk(fn):
        if inner is not fn and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) \
                and any(isinstance(n, ast.Name) and n.id == local for n in ast.walk(inner)):
            return check_refuted(by, f"`{local}` is captured by a nested scope at line {inner.lineno}")
        if isinstance(inner, (ast.Global, ast.Nonlocal)) and local in inner.names:
            return check_refuted(by, f"`{local}` is declared global/nonlocal")
        if isinstance(inner, ast.Name) and inner.id in ("locals", "vars", "eval", "exec"):
            return check_refuted(by, f"`{inner.id}` (line {inner.lineno}) can read `{local}` by name")
        if isinstance(inner, ast.Attribute) and inner.attr in ("f_locals", "_getframe", "currentframe", "f_back"):
            return check_refuted(by, f"`.{inner.attr}` (line {inner.lineno}) can read the frame's locals")
    return checked(by, [f"`{local}` is read only in `{fname}` (a callee in another module reading its caller's frame "
                        "is not seen)"])


ENCODERS = {"scalar-value-int64": value_int64, "scalar-use-same": use_same, "scalar-use-promotion": use_promotion,
            "scalar-leaves-observed": leaves_observed, "scalar-callers-screened": callers_screened,
            "scalar-local-screened": local_screened}
CHECKS = frozenset({"scalar-use-promotion", "scalar-leaves-observed", "scalar-callers-screened",
                    "scalar-local-screened"})
OBSERVED = frozenset({"scalar-use-promotion", "scalar-leaves-observed"})
