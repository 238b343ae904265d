"""The value model: an expression's elements in the Z3 FloatingPoint sort of their dtype
(float32 ``(_ FloatingPoint 8 24)``, float16, bfloat16, float64; NaN, +-inf and -0.0
included; never reals), integers as bit-vectors, Booleans as Bool; and reverse-mode
gradients with PyTorch's backward formulas (:meth:`ValueEval.grads`).

Reductions and calls without a value model become fresh symbols keyed by their source,
flagged as an over-approximation (``overapprox``): a counterexample through one may not be
realisable, so the encoders report it unknown.
"""
from __future__ import annotations

import ast
import copy
import math
from dataclasses import dataclass, field
from typing import Any

import z3

from verifier.dtypes import DTC, FP_FORMAT, INT_BITS, INTS, RNE, fp_sort, promote_py
from verifier.effects import dotted_name as _dotted
from verifier.ops import CAST as _CAST, CLAMPS as _CLAMPS, clamp_bounds as _clamp_bounds
from verifier.shapes import _expr
from verifier.smt import Unsupported


@dataclass
class V:
    """An element value: FP term (float dtypes), bit-vector (ints), Bool (bool)."""

    term: Any
    dtype: str          # "float32"..., "int64"..., "bool", or "pyfloat"/"pyint"/"pybool"
    back: list = field(default_factory=list)   # [(child V, fn(g) -> child's gradient)]
    leaf: str | None = None
    key: str = ""
    narrow: tuple | None = None   # a Python float read from a tensor (`.item()`): (the tensor's term, its dtype)



class ValueEval:
    """Element-wise IEEE model of an expression, for the dtypes observed on the example run.

    Reductions and calls without a value model become fresh symbols keyed by their source
    (the same source gives the same symbol), flagged as an over-approximation: a
    counterexample that uses one may not be realisable, so it makes the result unknown.
    """

    def __init__(self, facts: dict, defs: dict[str, str]):
        self.facts = facts.get("names", {}) if facts else {}
        self.defs = defs
        self.leaves: dict[str, V] = {}
        self.fresh: dict[str, V] = {}
        self.overapprox: list[str] = []
        self.assume: list[tuple[Any, str | None]] = []
        self.depth = 0
        # sources of tensors whose comparisons with a Python number are modelled exactly (a compiled
        # lowering that keeps the number in double) instead of rounding the number to the tensor's dtype
        self.exact_sources: set[str] = set()

    def leaf(self, dotted: str) -> V:
        if dotted in self.leaves:
            return self.leaves[dotted]
        f = self.facts.get(dotted)
        if f is None:
            if dotted in self.defs and self.depth < 8:
                self.depth += 1
                try:
                    v = self.eval(_expr(self.defs[dotted]))
                finally:
                    self.depth -= 1
                self.leaves[dotted] = v
                return v
            raise Unsupported(f"nothing is known about `{dotted}` where the rewrite runs")
        k = f["kind"]
        if k == "tensor":
            dt = f["dtype"]
            if dt in FP_FORMAT:
                v = V(z3.FP(f"{dotted}[i]", fp_sort(dt)), dt, leaf=dotted)
            elif dt in INT_BITS:
                v = V(z3.BitVec(f"{dotted}[i]", INT_BITS[dt]), dt, leaf=dotted)
            elif dt == "bool":
                v = V(z3.Bool(f"{dotted}[i]"), "bool", leaf=dotted)
            else:
                raise Unsupported(f"dtype {dt}")
            self.assume.append((z3.BoolVal(True), f"`{dotted}` is a {dt} tensor (observed); values: every {dt} value"))
        elif k == "num":
            if f["cat"] == "float":
                val = f["value"]
                const = dotted.startswith("self.") or dotted.isupper()
                if const and isinstance(val, float):
                    v = V(val, "pyfloat")
                    self.assume.append((z3.BoolVal(True), f"`{dotted}` == {val!r} (module/global constant, observed)"))
                else:
                    v = V(z3.FP(dotted, z3.Float64()), "pyfloat", leaf=dotted)
            elif f["cat"] == "int":
                if dotted.startswith("self."):
                    v = V(f["value"], "pyint")
                    self.assume.append((z3.BoolVal(True), f"`{dotted}` == {f['value']} (module constant, observed)"))
                else:
                    v = V(z3.BitVec(dotted, 64), "pyint", leaf=dotted)
            else:
                v = V(z3.Bool(dotted), "pybool", leaf=dotted)
        else:
            raise Unsupported(f"`{dotted}` ({k}) has no value model")
        self.leaves[dotted] = v
        return v

    def fresh_of(self, node: ast.AST, dtype: str) -> V:
        key = ast.unparse(node)
        if key in self.fresh:
            return self.fresh[key]
        name = f"<{key}>"
        if dtype in FP_FORMAT:
            t = z3.FP(name, fp_sort(dtype))
        elif dtype in INT_BITS:
            t = z3.BitVec(name, INT_BITS[dtype])
        else:
            t = z3.Bool(name)
        v = V(t, dtype, key=key)
        self.fresh[key] = v
        self.overapprox.append(key)
        return v

    # conversions ---------------------------------------------------------------------------
    def common(self, vals: list[V]) -> str:
        tens = [v.dtype for v in vals if not v.dtype.startswith("py")]
        if tens:
            cur = tens[0]
            for d in tens[1:]:
                cur = promote_py(cur, d)
            if cur == "bool" and any(v.dtype == "pyfloat" for v in vals):
                return "float32"
            if cur in INTS | {"bool"} and any(v.dtype == "pyfloat" for v in vals):
                return "float32"
            if cur == "bool" and any(v.dtype == "pyint" for v in vals):
                return "int64"
            return cur
        if any(v.dtype == "pyfloat" for v in vals):
            return "float64"
        if any(v.dtype == "pyint" for v in vals):
            return "int64"
        return "bool"

    def to(self, v: V, dt: str):
        t, src = v.term, v.dtype
        if dt in FP_FORMAT:
            srt = fp_sort(dt)
            if src == "pyfloat":
                if isinstance(t, float):
                    return z3.FPVal(t, srt)
                return t if t.sort() == srt else z3.fpFPToFP(RNE, t, srt)
            if src == "pyint":
                if isinstance(t, int):
                    return z3.FPVal(float(t), srt)
                return z3.fpSignedToFP(RNE, t, srt)
            if src in FP_FORMAT:
                return t if src == dt else z3.fpFPToFP(RNE, t, srt)
            if src in INT_BITS:
                return (z3.fpUnsignedToFP if src == "uint8" else z3.fpSignedToFP)(RNE, t, srt)
            if src in ("bool", "pybool"):
                return z3.If(t, z3.FPVal(1.0, srt), z3.FPVal(0.0, srt))
        if dt in INT_BITS:
            bits = INT_BITS[dt]
            if src == "pyint":
                return z3.BitVecVal(t, bits) if isinstance(t, int) else z3.Extract(bits - 1, 0, t)
            if src in INT_BITS:
                have = INT_BITS[src]
                if have == bits:
                    return t
                if have > bits:
                    return z3.Extract(bits - 1, 0, t)
                return (z3.ZeroExt if src == "uint8" else z3.SignExt)(bits - have, t)
            if src in ("bool", "pybool"):
                return z3.If(t, z3.BitVecVal(1, bits), z3.BitVecVal(0, bits))
            raise Unsupported(f"{src} -> {dt} conversion")
        if dt == "bool":
            return self.truth(v)
        raise Unsupported(f"{src} -> {dt} conversion")

    def truth(self, v: V):
        """``bool(t)`` of a one-element tensor / number: nonzero (NaN is true)."""
        t = v.term
        if v.dtype in ("bool", "pybool"):
            return t
        if v.dtype in FP_FORMAT:
            return z3.Not(z3.fpIsZero(t))
        if v.dtype == "pyfloat":
            return z3.BoolVal(t != 0.0) if isinstance(t, float) else z3.Not(z3.fpIsZero(t))
        if v.dtype in INT_BITS:
            return t != 0
        if v.dtype == "pyint":
            return z3.BoolVal(t != 0) if isinstance(t, int) else t != 0
        raise Unsupported("truth of a non-number")

    # expressions ---------------------------------------------------------------------------
    def eval(self, node: ast.AST, *, py_logic: bool = True) -> V:
        self.py_logic = py_logic
        meth = getattr(self, f"v_{type(node).__name__}", None)
        if meth is None:
            raise Unsupported(f"`{ast.unparse(node)}` has no value model")
        return meth(node)

    def v_Name(self, node):
        if node.id in ("True", "False"):
            return V(z3.BoolVal(node.id == "True"), "pybool")
        return self.leaf(node.id)

    def v_Attribute(self, node):
        d = _dotted(node)
        if d and (d in self.facts or d in self.defs):
            return self.leaf(d)
        if isinstance(node.value, ast.Call) and _dotted(node.value.func) in ("torch.finfo",) and node.attr in ("max", "min"):
            arg = node.value.args[0] if node.value.args else None
            if isinstance(arg, ast.Attribute) and arg.attr == "dtype":
                dt = self.facts.get(_dotted(arg.value) or "", {}).get("dtype")
                if dt in FP_FORMAT:
                    import torch

                    fi = torch.finfo(getattr(torch, dt))
                    return V(float(fi.max if node.attr == "max" else fi.min), "pyfloat")
        raise Unsupported(f"`{ast.unparse(node)}` has no value model")

    def v_Subscript(self, node):
        base = self.eval(node.value)
        if base.dtype.startswith("py"):
            raise Unsupported(f"`{ast.unparse(node)}`")
        # an element of the base, not the one `base` stands for: a fresh value (over-approximation)
        el = self.fresh_of(node, base.dtype)
        out = V(el.term, base.dtype, key=el.key)
        if base.dtype in FP_FORMAT:
            out.back = [(base, lambda g: g)]
        return out

    def v_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            return V(z3.BoolVal(v), "pybool")
        if isinstance(v, int):
            return V(v, "pyint")
        if isinstance(v, float):
            return V(v, "pyfloat")
        raise Unsupported(f"constant {v!r}")

    def v_UnaryOp(self, node):
        x = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return V(z3.Not(self.truth(x)), "pybool")
        if isinstance(node.op, ast.USub):
            if x.dtype == "pyfloat" and isinstance(x.term, float):
                return V(-x.term, "pyfloat")
            if x.dtype == "pyint" and isinstance(x.term, int):
                return V(-x.term, "pyint")
            if x.dtype in FP_FORMAT or x.dtype == "pyfloat":
                out = V(z3.fpNeg(x.term), x.dtype)
                out.back = [(x, lambda g: z3.fpNeg(g))]
                return out
            if x.dtype in INT_BITS or x.dtype == "pyint":
                return V(-x.term, x.dtype)
        if isinstance(node.op, ast.Invert) and x.dtype == "bool":
            return V(z3.Not(x.term), "bool")
        raise Unsupported(f"`{ast.unparse(node)}`")

    def v_BoolOp(self, node):
        vals = [self.eval(v) for v in node.values]
        ts = [self.truth(v) for v in vals]
        return V(z3.And(*ts) if isinstance(node.op, ast.And) else z3.Or(*ts), "pybool")

    def v_Compare(self, node):
        left = self.eval(node.left)
        out = []
        lnode = node.left
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp)
            exact = bool(self.exact_sources) and (ast.unparse(lnode) in self.exact_sources
                                                  or ast.unparse(comp) in self.exact_sources)
            out.append(self.compare(type(op).__name__, left, right, exact=exact))
            left, lnode = right, comp
        return V(z3.And(*out) if len(out) > 1 else out[0], "bool" if not all(v.dtype.startswith("py") for v in (left,)) else "pybool")

    def compare(self, op: str, a: V, b: V, exact: bool = False):
        py_a, py_b = a.dtype.startswith("py"), b.dtype.startswith("py")
        if (py_a and py_b and a.dtype != b.dtype and "pyfloat" in (a.dtype, b.dtype)) or (exact and py_a != py_b):
            return self.exact_compare(op, a, b)   # Python compares int with float exactly
        dt = self.common([a, b])
        if dt == "float64" and a.dtype.startswith("py") and b.dtype.startswith("py"):
            dt = "float64"
        x, y = self.to(a, dt), self.to(b, dt)
        if dt in FP_FORMAT:
            return {"Eq": lambda: z3.fpEQ(x, y), "NotEq": lambda: z3.Not(z3.fpEQ(x, y)), "Lt": lambda: z3.fpLT(x, y),
                    "LtE": lambda: z3.fpLEQ(x, y), "Gt": lambda: z3.fpGT(x, y), "GtE": lambda: z3.fpGEQ(x, y)}[op]()
        if dt in INT_BITS:
            unsigned = dt == "uint8"
            lt = z3.ULT if unsigned else (lambda p, q: p < q)
            le = z3.ULE if unsigned else (lambda p, q: p <= q)
            return {"Eq": lambda: x == y, "NotEq": lambda: x != y, "Lt": lambda: lt(x, y), "LtE": lambda: le(x, y),
                    "Gt": lambda: lt(y, x), "GtE": lambda: le(y, x)}[op]()
        if dt == "bool":
            if op in ("Eq", "NotEq"):
                return (x == y) if op == "Eq" else (x != y)
        raise Unsupported(f"comparison of {dt}")

    def _int64(self, v: V):
        t, src = v.term, v.dtype
        if src in ("bool", "pybool"):
            return z3.If(t, z3.BitVecVal(1, 64), z3.BitVecVal(0, 64))
        if src == "pyint":
            if isinstance(t, int):
                if not -2 ** 63 <= t < 2 ** 63:
                    raise Unsupported(f"the Python int {t} does not fit in int64")
                return z3.BitVecVal(t, 64)
            return t
        bits = INT_BITS[src]
        return t if bits == 64 else (z3.ZeroExt if src == "uint8" else z3.SignExt)(64 - bits, t)

    def exact_compare(self, op: str, a: V, b: V):
        """``a <op> b`` on the exact values (Python's int/float comparison; NaN compares unequal to all)."""
        floats = {"pyfloat", *FP_FORMAT}
        if a.dtype not in floats and b.dtype not in floats:  # integers and bools: 64-bit, signed
            x, y = self._int64(a), self._int64(b)
            return {"Eq": lambda: x == y, "NotEq": lambda: x != y, "Lt": lambda: x < y, "LtE": lambda: x <= y,
                    "Gt": lambda: x > y, "GtE": lambda: x >= y}[op]()
        fp = {"Eq": z3.fpEQ, "NotEq": lambda p, q: z3.Not(z3.fpEQ(p, q)), "Lt": z3.fpLT, "LtE": z3.fpLEQ,
              "Gt": z3.fpGT, "GtE": z3.fpGEQ}[op]
        if a.dtype in floats and b.dtype in floats:  # both exact in float64
            return fp(self._float(a, "float64"), self._float(b, "float64"))
        if a.dtype not in floats:  # the integer on the right: mirror the operator
            a, b = b, a
            op = {"Lt": "Gt", "LtE": "GtE", "Gt": "Lt", "GtE": "LtE"}.get(op, op)
        # float x vs integer n, in a float format F holding x exactly: no F lies strictly between
        # RTN(n) and RTP(n), so x < n <=> x < RTP(n), x <= n <=> x <= RTN(n), x > n <=> x > RTN(n),
        # x >= n <=> x >= RTP(n), x == n <=> x == RTN(n) == RTP(n) (NaN: all false but !=)
        fmt = a.narrow[1] if a.narrow else a.dtype if a.dtype in FP_FORMAT else "float64"
        x = a.narrow[0] if a.narrow else self._float(a, fmt)
        if b.dtype in ("bool", "pybool"):
            n = self._float(b, fmt)
            return {"Eq": z3.fpEQ, "NotEq": lambda p, q: z3.Not(z3.fpEQ(p, q)), "Lt": z3.fpLT, "LtE": z3.fpLEQ,
                    "Gt": z3.fpGT, "GtE": z3.fpGEQ}[op](x, n)
        bv = self._int64(b)
        lo, hi = z3.fpSignedToFP(z3.RTN(), bv, fp_sort(fmt)), z3.fpSignedToFP(z3.RTP(), bv, fp_sort(fmt))
        return {"Lt": lambda: z3.fpLT(x, hi), "LtE": lambda: z3.fpLEQ(x, lo), "Gt": lambda: z3.fpGT(x, lo),
                "GtE": lambda: z3.fpGEQ(x, hi), "Eq": lambda: z3.And(z3.fpEQ(x, lo), z3.fpEQ(lo, hi)),
                "NotEq": lambda: z3.Not(z3.And(z3.fpEQ(x, lo), z3.fpEQ(lo, hi)))}[op]()

    def _float(self, v: V, fmt: str):
        """``v`` in float format ``fmt``, exactly (a float of a narrower format, a bool)."""
        srt = fp_sort(fmt)
        t, src = v.term, v.dtype
        if src in ("bool", "pybool"):
            return z3.If(t, z3.FPVal(1.0, srt), z3.FPVal(0.0, srt))
        if src == "pyfloat" and isinstance(t, float):
            return z3.FPVal(t, srt)
        if t.sort() == srt:
            return t
        return z3.fpFPToFP(RNE, t, srt)

    def v_BinOp(self, node):
        a, b = self.eval(node.left), self.eval(node.right)
        op = type(node.op).__name__
        return self.arith(op, a, b, node)

    def arith(self, op: str, a: V, b: V, node) -> V:
        if op in ("BitAnd", "BitOr") and a.dtype in ("bool", "pybool") and b.dtype in ("bool", "pybool"):
            return V(z3.And(a.term, b.term) if op == "BitAnd" else z3.Or(a.term, b.term), "bool")
        dt = self.common([a, b])
        if op == "Div" and dt not in FP_FORMAT:
            dt = "float32" if not (a.dtype.startswith("py") and b.dtype.startswith("py")) else "float64"
        if dt in FP_FORMAT:
            x, y = self.to(a, dt), self.to(b, dt)
            if op == "Add":
                out = V(z3.fpAdd(RNE, x, y), dt)
                out.back = [(a, lambda g: g), (b, lambda g: g)]
            elif op == "Sub":
                out = V(z3.fpSub(RNE, x, y), dt)
                out.back = [(a, lambda g: g), (b, lambda g: z3.fpNeg(g))]
            elif op == "Mult":
                out = V(z3.fpMul(RNE, x, y), dt)
                out.back = [(a, lambda g: z3.fpMul(RNE, g, y)), (b, lambda g: z3.fpMul(RNE, g, x))]
            elif op == "Div":
                q = z3.fpDiv(RNE, x, y)
                out = V(q, dt)
                out.back = [(a, lambda g: z3.fpDiv(RNE, g, y)),
                            (b, lambda g: z3.fpNeg(z3.fpMul(RNE, g, z3.fpDiv(RNE, q, y))))]
            elif op == "Pow" and isinstance(b.term, int) and b.dtype == "pyint" and 0 <= b.term <= 4:
                n = b.term
                acc = z3.FPVal(1.0, fp_sort(dt))
                for _ in range(n):
                    acc = z3.fpMul(RNE, acc, x)
                prev = z3.FPVal(1.0, fp_sort(dt))
                for _ in range(max(n - 1, 0)):
                    prev = z3.fpMul(RNE, prev, x)
                out = V(acc, dt)
                out.back = [(a, lambda g, prev=prev: z3.fpMul(RNE, z3.fpMul(RNE, g, z3.FPVal(float(n), fp_sort(dt))), prev))]
            else:
                raise Unsupported(f"`{ast.unparse(node)}`: {op} has no IEEE model")
            return out
        if dt in INT_BITS or dt == "int64":
            x, y = self.to(a, dt), self.to(b, dt)
            if op == "Add":
                return V(x + y, dt)
            if op == "Sub":
                return V(x - y, dt)
            if op == "Mult":
                return V(x * y, dt)
            raise Unsupported(f"integer {op}")
        raise Unsupported(f"`{ast.unparse(node)}` on {dt}")

    def v_Call(self, node):
        fname = _dotted(node.func) or ""
        last = fname.rsplit(".", 1)[-1] if fname else (node.func.attr if isinstance(node.func, ast.Attribute) else "")
        is_method = isinstance(node.func, ast.Attribute) and not (fname.startswith(("torch.", "F.", "math.")))
        if is_method:
            recv = node.func.value
            args = [recv] + list(node.args)
        else:
            args = list(node.args)
        kw = {k.arg: k.value for k in node.keywords}
        if last == "item" and is_method and len(args) == 1 and not node.keywords:
            # Tensor.item(): an integer's value, a float's value widened to float64, a bool
            x = self.eval(args[0])
            if x.dtype.startswith("py"):
                raise Unsupported(f"`{ast.unparse(node)}`: `.item()` of a Python number")
            if x.dtype in FP_FORMAT:
                return V(x.term if x.dtype == "float64" else z3.fpFPToFP(RNE, x.term, z3.Float64()), "pyfloat",
                         narrow=(x.term, x.dtype))
            if x.dtype in INT_BITS:
                bits = INT_BITS[x.dtype]
                t = x.term if bits == 64 else (z3.ZeroExt if x.dtype == "uint8" else z3.SignExt)(64 - bits, x.term)
                return V(t, "pyint")
            return V(x.term, "pybool")
        if last in ("any", "all", "sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "count_nonzero"):
            x = self.eval(args[0])
            dt = "bool" if last in ("any", "all") else (x.dtype if x.dtype in FP_FORMAT else
                                                        "int64" if last in ("sum", "prod", "count_nonzero") else x.dtype)
            if x.dtype == "bool" and last in ("sum", "prod"):
                dt = "int64"
            out = self.fresh_of(node, dt)
            if x.dtype in FP_FORMAT and dt in FP_FORMAT:
                res = out
                out = V(res.term, dt, key=res.key)
                out.back = [(x, lambda g: g)]      # sum/mean: each element gets g (times 1/n)
            return out
        if last in ("logical_and", "logical_or", "logical_xor"):
            a, b = self.eval(args[0]), self.eval(args[1])
            ta, tb = self.truth(a), self.truth(b)
            return V({"logical_and": z3.And, "logical_or": z3.Or, "logical_xor": z3.Xor}[last](ta, tb), "bool")
        if last == "logical_not":
            return V(z3.Not(self.truth(self.eval(args[0]))), "bool")
        if last in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
            x = self.eval(args[0])
            out = "pybool" if fname.startswith("math.") else "bool"   # math.isnan gives a Python bool
            if x.dtype == "pyfloat" and not z3.is_expr(x.term):     # a Python constant
                return V(z3.BoolVal(getattr(math, last)(x.term)), out)
            if x.dtype not in FP_FORMAT and x.dtype != "pyfloat":   # an integer or bool is always finite
                return V(z3.BoolVal(last == "isfinite"), out)
            t = x.term                                              # a float tensor, or a float64 from .item()
            return V({"isnan": lambda: z3.fpIsNaN(t), "isinf": lambda: z3.fpIsInf(t),
                      "isfinite": lambda: z3.Not(z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t))),
                      "isposinf": lambda: z3.And(z3.fpIsInf(t), z3.fpIsPositive(t)),
                      "isneginf": lambda: z3.And(z3.fpIsInf(t), z3.fpIsNegative(t))}[last](), out)
        if last in ("eq", "ne", "lt", "le", "gt", "ge"):
            a, b = self.eval(args[0]), self.eval(args[1])
            op = {"eq": "Eq", "ne": "NotEq", "lt": "Lt", "le": "LtE", "gt": "Gt", "ge": "GtE"}[last]
            return V(self.compare(op, a, b), "bool")
        if last == "pow" and len(args) == 2:
            return self.arith("Pow", self.eval(args[0]), self.eval(args[1]), node)
        if fname in ("float", "int") and len(args) == 1 and not node.keywords and not isinstance(args[0], ast.Constant):
            x = self.eval(args[0])   # int() of an int or bool, float() of a float: the same number
            if fname == "int" and x.dtype in ("pyint", "pybool"):
                return V(self._int64(x), "pyint")
            if fname == "float" and x.dtype == "pyfloat":
                return x
            raise Unsupported(f"`{ast.unparse(node)}` of a {x.dtype} (only int() of an int, float() of a float)")
        if fname in ("float", "int") and len(args) == 1 and isinstance(args[0], ast.Constant):
            val = args[0].value
            try:
                return V(float(val), "pyfloat") if fname == "float" else V(int(val), "pyint")
            except (TypeError, ValueError) as exc:
                raise Unsupported(f"`{ast.unparse(node)}`") from exc
        if last in ("add", "sub", "mul", "div"):
            a, b = self.eval(args[0]), self.eval(args[1])
            return self.arith({"add": "Add", "sub": "Sub", "mul": "Mult", "div": "Div"}[last], a, b, node)
        if last in ("sqrt", "rsqrt", "log", "log2", "log10", "log1p", "reciprocal", "abs", "neg", "relu", "square",
                    "exp", "tanh", "sigmoid", "sign", "sgn"):
            return self.unary(last, self.eval(args[0]), node)
        if last in _CLAMPS:
            x = self.eval(args[0])
            lo, hi = _clamp_bounds(last, args, kw)
            if x.dtype not in FP_FORMAT:
                raise Unsupported("clamp of a non-float")
            t = x.term
            inside = []
            for bound, is_lo in ((lo, True), (hi, False)):
                if bound is None:
                    continue
                b = self.eval(bound)
                if b.dtype not in ("pyfloat", "pyint", "pybool", x.dtype):
                    # a tensor bound of another dtype promotes (a float16 x and a float32 bound give
                    # float32 when the bound has dims): not modelled (helper-104)
                    raise Unsupported(f"clamp of a {x.dtype} tensor at a {b.dtype} bound")
                bv = self.to(b, x.dtype)
                # a NaN bound gives NaN (torch.tensor([1.]).clamp_min(nan) is nan, measured)
                if is_lo:
                    inside.append(z3.fpGEQ(x.term, bv))
                    t = z3.If(z3.fpIsNaN(t), t, z3.If(z3.fpIsNaN(bv), bv, z3.If(z3.fpLT(t, bv), bv, t)))
                else:
                    inside.append(z3.fpLEQ(x.term, bv))
                    t = z3.If(z3.fpIsNaN(t), t, z3.If(z3.fpIsNaN(bv), bv, z3.If(z3.fpGT(t, bv), bv, t)))
            out = V(t, x.dtype)
            zero = z3.FPVal(0.0, fp_sort(x.dtype))
            cond = z3.And(*inside) if inside else z3.BoolVal(True)
            out.back = [(x, lambda g: z3.If(cond, g, zero))]
            return out
        if last == "where":
            c, a, b = self.eval(args[0]), self.eval(args[1]), self.eval(args[2])
            dt = self.common([a, b])
            ca = self.truth(c)
            x, y = self.to(a, dt), self.to(b, dt)
            out = V(z3.If(ca, x, y), dt)
            if dt in FP_FORMAT:
                zero = z3.FPVal(0.0, fp_sort(dt))
                out.back = [(a, lambda g: z3.If(ca, g, zero)), (b, lambda g: z3.If(ca, zero, g))]
            return out
        if last in ("float", "half", "double", "bfloat16", "to", "detach", "clone", "contiguous", "reshape", "view",
                    "transpose", "permute", "unsqueeze", "squeeze", "flatten", "expand", "t"):
            x = self.eval(args[0])
            dt = x.dtype
            if last in _CAST:
                dt = _CAST[last]
            elif last == "to":
                for a in list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]:
                    a = self._static_choice(a)
                    d = _dotted(a) or ""
                    if d.startswith("torch.") and d.split(".")[1] in DTC:
                        dt = d.split(".")[1]
            if dt == x.dtype:
                return x
            out = V(self.to(x, dt), dt)
            if dt in FP_FORMAT and x.dtype in FP_FORMAT:
                out.back = [(x, lambda g: z3.fpFPToFP(RNE, g, fp_sort(x.dtype)))]
            return out
        raise Unsupported(f"`{ast.unparse(node)}` has no IEEE model")

    def _static_choice(self, node: ast.AST) -> ast.AST:
        """``A if X.is_floating_point() else B`` as Python decides it from ``X``'s dtype (a trace-time
        fact: Dynamo guards on dtype), the node itself otherwise."""
        while isinstance(node, ast.IfExp) and isinstance(node.test, ast.Call) and not node.test.args \
                and isinstance(node.test.func, ast.Attribute) and node.test.func.attr == "is_floating_point":
            node = node.body if self.eval(node.test.func.value).dtype in FP_FORMAT else node.orelse
        return node

    def unary(self, name: str, x: V, node) -> V:
        if x.dtype not in FP_FORMAT:
            if name in ("abs", "neg") and x.dtype in INT_BITS:
                return V(z3.If(x.term < 0, -x.term, x.term) if name == "abs" else -x.term, x.dtype)
            if name in ("sign", "sgn") and x.dtype in INT_BITS:
                return V(z3.If(x.term < 0, -1, z3.If(x.term > 0, 1, 0)), x.dtype)
            raise Unsupported(f"`{name}` of {x.dtype}")
        s = fp_sort(x.dtype)
        t = x.term
        zero = z3.FPVal(0.0, s)

        def c(v):
            return z3.FPVal(v, s)
        if name == "sqrt":
            r = z3.fpSqrt(RNE, t)
            back = lambda g: z3.fpDiv(RNE, g, z3.fpMul(RNE, c(2.0), r))  # noqa: E731  g / (2 * result)
        elif name == "rsqrt":
            r = z3.fpDiv(RNE, c(1.0), z3.fpSqrt(RNE, t))
            back = lambda g: z3.fpMul(RNE, z3.fpMul(RNE, c(-0.5), g), z3.fpMul(RNE, r, z3.fpMul(RNE, r, r)))  # noqa: E731
        elif name == "log":
            r = self.fresh_of(node, x.dtype).term
            back = lambda g: z3.fpDiv(RNE, g, t)  # noqa: E731
        elif name in ("log2", "log10"):
            r = self.fresh_of(node, x.dtype).term
            k = c(math.log(2.0) if name == "log2" else math.log(10.0))
            back = lambda g: z3.fpDiv(RNE, g, z3.fpMul(RNE, t, k))  # noqa: E731
        elif name == "log1p":
            r = self.fresh_of(node, x.dtype).term
            back = lambda g: z3.fpDiv(RNE, g, z3.fpAdd(RNE, t, c(1.0)))  # noqa: E731
        elif name == "reciprocal":
            r = z3.fpDiv(RNE, c(1.0), t)
            back = lambda g: z3.fpMul(RNE, z3.fpNeg(g), z3.fpMul(RNE, r, r))  # noqa: E731
        elif name == "abs":
            r = z3.fpAbs(t)
            sgn = z3.If(z3.fpIsNaN(t), t, z3.If(z3.fpGT(t, zero), c(1.0), z3.If(z3.fpLT(t, zero), c(-1.0), zero)))
            back = lambda g: z3.fpMul(RNE, g, sgn)  # noqa: E731
        elif name in ("sign", "sgn"):   # measured on torch 2.13 (CPU eager, vectorised or not, inductor):
            # NaN -> +0.0 and -0.0 -> +0.0, not NaN and -0.0; its backward is zeros (sign_backward)
            r = z3.If(z3.fpGT(t, zero), c(1.0), z3.If(z3.fpLT(t, zero), c(-1.0), zero))
            back = lambda g: zero  # noqa: E731
        elif name == "neg":
            r = z3.fpNeg(t)
            back = lambda g: z3.fpNeg(g)  # noqa: E731
        elif name == "relu":
            r = z3.If(z3.fpGT(t, zero), t, z3.If(z3.fpIsNaN(t), t, zero))
            back = lambda g: z3.If(z3.fpGT(r, zero), g, zero)  # noqa: E731  threshold_backward
        elif name == "square":
            r = z3.fpMul(RNE, t, t)
            back = lambda g: z3.fpMul(RNE, z3.fpMul(RNE, g, c(2.0)), t)  # noqa: E731
        elif name == "exp":
            r = self.fresh_of(node, x.dtype).term
            self.assume.append((z3.Or(z3.fpIsNaN(r), z3.fpGEQ(r, zero)), None))
            back = lambda g: z3.fpMul(RNE, g, r)  # noqa: E731
        elif name in ("tanh", "sigmoid"):
            r = self.fresh_of(node, x.dtype).term
            lo = -1.0 if name == "tanh" else 0.0
            self.assume.append((z3.Or(z3.And(z3.fpIsNaN(t), z3.fpIsNaN(r)),
                                      z3.And(z3.Not(z3.fpIsNaN(t)), z3.fpGEQ(r, c(lo)), z3.fpLEQ(r, c(1.0)))), None))
            if name == "tanh":
                back = lambda g: z3.fpMul(RNE, g, z3.fpSub(RNE, c(1.0), z3.fpMul(RNE, r, r)))  # noqa: E731
            else:
                back = lambda g: z3.fpMul(RNE, g, z3.fpMul(RNE, r, z3.fpSub(RNE, c(1.0), r)))  # noqa: E731
        else:
            raise Unsupported(name)
        out = V(r, x.dtype)
        out.back = [(x, back)]
        return out

    def grads(self, root: V, g) -> dict[str, Any]:
        """Reverse mode from ``root`` with upstream ``g``: ``{leaf: gradient term}``."""
        acc: dict[str, Any] = {}
        order: list[V] = []
        seen: set[int] = set()

        def topo(v):
            if id(v) in seen:
                return
            seen.add(id(v))
            for child, _ in v.back:
                topo(child)
            order.append(v)
        topo(root)
        gmap = {id(root): g}
        for v in reversed(order):
            gv = gmap.get(id(v))
            if gv is None:
                continue
            if v.leaf and v.dtype in FP_FORMAT:
                acc[v.leaf] = gv if v.leaf not in acc else z3.fpAdd(RNE, acc[v.leaf], gv)
            for child, fn in v.back:
                if child.dtype not in FP_FORMAT:
                    continue
                cg = fn(gv)
                if cg.sort() != fp_sort(child.dtype):
                    cg = z3.fpFPToFP(RNE, cg, fp_sort(child.dtype))
                prev = gmap.get(id(child))
                gmap[id(child)] = cg if prev is None else z3.fpAdd(RNE, prev, cg)
        return acc


# -- the obligations ---------------------------------------------------------------------------



class _Logical(ast.NodeTransformer):
    """Python ``and``/``or``/``not`` -> ``torch.logical_*`` (the rule's tensor logic)."""

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = "logical_and" if isinstance(node.op, ast.And) else "logical_or"
        out = node.values[0]
        for v in node.values[1:]:
            out = ast.Call(func=ast.Attribute(ast.Name("torch"), fn), args=[out, v], keywords=[])
        return out

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.Call(func=ast.Attribute(ast.Name("torch"), "logical_not"), args=[node.operand], keywords=[])
        return node


def to_logical(node: ast.AST) -> ast.AST:
    return ast.fix_missing_locations(_Logical().visit(copy.deepcopy(node)))
