"""Encoders for a cache write with tensor slice bounds, ``X[:, a:b] = v`` rewritten to
``X.narrow(d, a, L).copy_(v)`` (``b`` is ``a + L``, ``L`` a Python int).

Slice assignment reads ``a`` and ``b`` with ``__index__`` (``Tensor.item()``: a graph
break), then clamps them (a negative start counts from the end, an end past the size is
cut) and broadcasts ``v`` to the slice; ``narrow`` wraps a negative start but raises on an
end past the size (measured on torch 2.13: ``x[:, 10:11] = v`` on a size-10 dim is a
silent no-op, ``narrow(1, 10, 1)`` a RuntimeError). Inside the range both are the same
view and the same ``copy_`` (the same ``CopySlices`` autograd node, the same dtype cast,
the same leaf-in-place error).

* ``slice-write-in-range`` (Z3, integers): ``0 <= a``, ``0 <= L`` and ``a + L <= S`` (``S``
  the target's size along ``d``) for every value of the unknown leaves (a buffer such as
  ``self.pos`` is any int64), every size in [0, 2^62], under the guards recorded with the
  obligation (``assert``/``torch._check`` comparisons and ``if ...: raise`` on the path
  before the write). Every ``+ - *`` result wraps to int64 (tensor arithmetic); ``%`` by a
  non-zero modulus is over-approximated by its range (``[0, M)`` for ``M > 0``, Python and
  torch floor semantics); ``clamp``/``min``/``max``/``torch.minimum``/``torch.maximum``
  are exact (``clamp`` with ``min > max`` gives ``max``, as torch does).
* ``slice-write-operands`` (check, observation of the example run at the write's line, on
  every hit): the target and the value are tensors, the value's rank is at most the
  target's (slice assignment strips leading 1-sized dims of the value, ``copy_`` does not),
  the target's rank exceeds ``d``, and the start is a 0-d int64 tensor or a Python int
  (``narrow`` rejects a 1-element 1-d or an int32-wrapped start differently).
"""
from __future__ import annotations

import ast
from functools import lru_cache

import z3

from verifier.encoders.base import Ctx, Query, decide
from verifier.outcomes import Outcome, check_refuted, checked, unknown

SIZE_BOUND = 2 ** 62


class Unsupported(Exception):
    pass


def _wrap64(x):
    return (x + 2 ** 63) % (2 ** 64) - 2 ** 63


def is_size(node: ast.AST) -> bool:
    """``X.shape[i]`` or ``X.size(i)`` with a literal ``i``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        idx = node.slice
        return isinstance(idx, ast.Constant) or (isinstance(idx, ast.UnaryOp) and isinstance(idx.operand, ast.Constant))
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size"
            and len(node.args) == 1 and not node.keywords)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class Terms:
    """Integer terms of bound expressions; leaves shared by their source text."""

    def __init__(self, torch_names=("torch",)) -> None:
        self.env: dict[str, z3.ArithRef] = {}
        self.premises: list = []
        self.fresh = 0
        self.torch_names = set(torch_names)

    def leaf(self, text: str, size: bool):
        if text not in self.env:
            v = self.env[text] = z3.Int(text)
            if size:
                self.premises += [v >= 0, v <= SIZE_BOUND]
            else:
                self.premises += [v >= -(2 ** 63), v <= 2 ** 63 - 1]
        return self.env[text]

    def _clamp(self, x, lo, hi):
        if lo is not None:
            x = z3.If(x < lo, lo, x)
        if hi is not None:
            x = z3.If(x > hi, hi, x)
        return x

    def term(self, node: ast.AST):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return z3.IntVal(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _wrap64(-self.term(node.operand))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = self.term(node.left), self.term(node.right)
            r = a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
            return _wrap64(r)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            self.term(node.left)  # encoded (its leaves exist), its value over-approximated away
            m = self.term(node.right)
            self.fresh += 1
            r = z3.Int(f"mod{self.fresh}")
            # a zero modulus raises before the write, in both versions
            self.premises += [m != 0, z3.If(m > 0, z3.And(r >= 0, r < m), z3.And(r <= 0, r > m))]
            return r
        if isinstance(node, ast.Call):
            fn = node.func
            kw = {k.arg: k.value for k in node.keywords}
            if set(kw) - {"min", "max"}:
                raise Unsupported(f"`{ast.unparse(node)}`: keywords other than min=/max=")
            name = _dotted(fn) or ""
            root, _, last = name.rpartition(".")
            if last in ("clamp", "clip"):
                if root in self.torch_names:
                    args = list(node.args)
                else:
                    args = [fn.value] + list(node.args)
                if not args or len(args) > 3:
                    raise Unsupported(f"`{ast.unparse(node)}`")
                lo = args[1] if len(args) > 1 else kw.get("min")
                hi = args[2] if len(args) > 2 else kw.get("max")
                if lo is None and hi is None:
                    raise Unsupported(f"`{ast.unparse(node)}` has no bound")
                x = self.term(args[0])
                return self._clamp(x, None if lo is None or _none(lo) else self.term(lo),
                                   None if hi is None or _none(hi) else self.term(hi))
            if (name in ("min", "max") or (root in self.torch_names and last in ("minimum", "maximum"))) \
                    and len(node.args) >= 2 and not kw and (name in ("min", "max") or len(node.args) == 2):
                terms = [self.term(a) for a in node.args]
                acc = terms[0]
                lower = last in ("min", "minimum")
                for t in terms[1:]:
                    acc = z3.If(t < acc, t, acc) if lower else z3.If(t > acc, t, acc)
                return acc
        if is_size(node):
            text = ast.unparse(node)
            if isinstance(node, ast.Call):  # `X.size(i)` is `X.shape[i]`
                text = f"{ast.unparse(node.func.value)}.shape[{ast.unparse(node.args[0])}]"
            return self.leaf(text, True)
        text = _dotted(node)
        if text is not None:
            return self.leaf(text, False)
        raise Unsupported(f"`{ast.unparse(node)}` is outside the encoded bound grammar")

    def condition(self, node: ast.AST):
        """A guard as a Boolean term: comparisons, ``and``/``or``/``not``."""
        if isinstance(node, ast.BoolOp):
            parts = [self.condition(v) for v in node.values]
            return z3.And(*parts) if isinstance(node.op, ast.And) else z3.Or(*parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return z3.Not(self.condition(node.operand))
        if isinstance(node, ast.Compare):
            out, left = [], self.term(node.left)
            for op, comp in zip(node.ops, node.comparators):
                right = self.term(comp)
                ops = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
                       ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
                if type(op) not in ops:
                    raise Unsupported(f"`{ast.unparse(node)}`: comparison `{type(op).__name__}`")
                out.append(ops[type(op)](left, right))
                left = right
            return z3.And(*out)
        raise Unsupported(f"the guard `{ast.unparse(node)}` is outside the encoded grammar")


def _none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def bounds_query(start: str, length: str, size: str, guards=(), torch_names=("torch",)):
    """(premises, negated claim, assumptions) for ``0 <= start, 0 <= length, start + length
    <= size`` under ``guards`` (each a condition that holds at the write: an ``assert``/
    ``torch._check`` condition, or the negation of an ``if ...: raise`` test)."""
    t = Terms(torch_names)
    a = t.term(ast.parse(start, mode="eval").body)
    n = t.term(ast.parse(length, mode="eval").body)
    s = t.term(ast.parse(size, mode="eval").body)
    guard_terms = [t.condition(ast.parse(g, mode="eval").body) for g in guards]
    claim = z3.Or(a < 0, n < 0, a + n > s)
    assumptions = ["every size (`.shape[i]`, `.size(i)`) is in [0, 2^62]; every other leaf (a buffer, a tensor, "
                   "an int) is any int64 value",
                   "tensor `+ - *` wraps to int64; `%` by a non-zero modulus lies in [0, M) for M > 0 (floor "
                   "semantics), its dividend otherwise unconstrained"]
    if guards:
        assumptions.append("the guards on the path to the write hold there (each raises otherwise; an `assert` "
                           "runs, i.e. Python without -O): " + "; ".join(f"`{g}`" for g in guards))
    return t.premises + guard_terms, claim, assumptions


def prove_bounds(start: str, length: str, size: str, guards=(), torch_names=("torch",),
                 timeout_ms: int = 5000) -> tuple[str, str | None]:
    """Memoised (the same site gets the same answer and counterexample in a process): ``("proved", None)``, ``("refuted", counterexample)`` or ``("unknown", why)`` -- the
    static decision a rule can take before emitting (the pipeline records the query)."""
    return _prove(start, length, size, tuple(guards), tuple(torch_names), timeout_ms)


@lru_cache(maxsize=256)
def _prove(start, length, size, guards, torch_names, timeout_ms):
    try:
        premises, claim, _ = bounds_query(start, length, size, guards, torch_names)
    except (SyntaxError, Unsupported) as exc:
        return "unknown", str(exc)
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*premises, claim)
    r = s.check()
    if r == z3.unsat:
        return "proved", None
    if r == z3.sat:
        model = s.model()
        return "refuted", ", ".join(f"{d.name()}={model[d]}" for d in model.decls() if not d.name().startswith("mod"))
    return "unknown", str(s.reason_unknown())


def in_range(ob: dict, ctx: Ctx) -> Outcome:
    start, length, size = ob.get("start"), ob.get("length"), ob.get("size")
    if not all(isinstance(x, str) for x in (start, length, size)):
        return unknown("the bounds of the write are not recorded")
    try:
        premises, claim, assumptions = bounds_query(start, length, size, ob.get("guards") or (),
                                                    ob.get("torch_names") or ("torch",))
    except (SyntaxError, Unsupported) as exc:
        return unknown(f"the bounds are not encoded: {exc}")

    def build():
        return Query(premises, [claim], assumptions)

    return decide("slice-write-in-range", [("every-value", build)], ctx,
                  "integers (Z3 Int), tensor arithmetic wrapped to int64")


def _seen(ctx: Ctx, line, name: str):
    at = (ctx.facts or {}).get("at") or {}
    rec = at.get(str(line))
    if rec is None or not (ctx.facts.get("at_hits") or {}).get(str(line)):
        return None
    return rec.get(name)


def operands(ob: dict, ctx: Ctx) -> Outcome:
    line, target, value, start, dim = ob.get("line"), ob.get("target"), ob.get("value"), ob.get("start_name"), \
        ob.get("dim")
    by = ("observation of the example run at the write's line, every hit: operand kinds, ranks and dtypes "
          "(slice assignment strips leading 1-sized value dims, copy_ does not; narrow takes a 0-d integral start)")
    if not isinstance(line, int) or not isinstance(dim, int):
        return unknown("the write's line or dimension is not recorded")
    tgt, val, st = _seen(ctx, line, target), _seen(ctx, line, value), _seen(ctx, line, start)
    if not tgt or not val or not st:
        return unknown(f"`{target}`, `{value}` or `{start}` was not observed at line {line}")
    for t in tgt:
        if t.get("kind") != "tensor" or len(t.get("shape", [])) <= dim:
            return check_refuted(by, f"`{target}` is {t.get('kind')} of rank {len(t.get('shape', []))}, not a tensor "
                                 f"of rank > {dim}")
    rank = min(len(t["shape"]) for t in tgt)
    for v in val:
        if v.get("kind") != "tensor":
            return check_refuted(by, f"the value `{value}` is a {v.get('kind')}: narrow(...).copy_ needs a tensor")
        if len(v.get("shape", [])) > rank:
            return check_refuted(by, f"the value `{value}` has rank {len(v['shape'])} > the target's {rank}: slice "
                                 "assignment strips its leading 1-sized dims, copy_ raises")
    for s in st:
        ok = (s.get("kind") == "tensor" and s.get("dtype") == "int64" and s.get("shape") == []) or \
             (s.get("kind") == "num" and s.get("cat") == "int")
        if not ok:
            return check_refuted(by, f"the start `{start}` is {s.get('kind')} {s.get('dtype', s.get('cat'))} "
                                 f"{s.get('shape', '')}: not a 0-d int64 tensor or a Python int")
    return checked(by, [f"observed at line {line} on {len(tgt)} hit(s); other calls may pass other operands"])


ENCODERS = {"slice-write-in-range": in_range, "slice-write-operands": operands}
CHECKS = frozenset({"slice-write-operands"})
OBSERVED = frozenset({"slice-write-operands"})
