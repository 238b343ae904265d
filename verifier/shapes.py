"""The shape model: evaluate an expression (Python AST) over abstract values -- tensors with
symbolic integer sizes (rank as observed) and a DType term, Python numbers, modules --
collecting the preconditions (``pre``) whose failure makes some op raise.

Transfer functions: broadcasting elementwise ops, comparisons, matmul/``@``/linear,
``nn.Linear``/``nn.LayerNorm``, reductions (``dim``, ``keepdim``), reshape/view/flatten/
transpose/permute/unsqueeze, cat/stack, softmax, where, masked_fill and constant
indexing/slicing. Anything else raises :class:`verifier.smt.Unsupported` (unknown).
"""
from __future__ import annotations

import ast
import math
from dataclasses import replace
from typing import Any, Callable

import z3

from verifier.dtypes import DEFAULT_FOR_CAT, DTC, DT, FLOATS, combine, is_float, is_int, promote
from verifier.effects import dotted_name as _dotted
from verifier.ops import BINARY as _BINARY, CAST as _CAST, COMPARE as _COMPARE, NAMESPACES as _NAMESPACES
from verifier.ops import REDUCE as _REDUCE, SHAPE_SAME_DTYPE as _SHAPE_SAME_DTYPE, UNARY_BOOL as _UNARY_BOOL
from verifier.ops import CLAMPS as _CLAMPS, UNARY_FLOAT as _UNARY_FLOAT, UNARY_SAME as _UNARY_SAME, clamp_bounds as _clamp_bounds
from verifier.module_shapes import M, _num, binary_pre, builtin_call, correction_of, fill_tensor_pre, finfo_call
from verifier.module_shapes import concat, hypot_pre, module_call, numel, scalar_fits, signed, size_query, unary_pre
from verifier.layout import index_layout, need_contiguous, result_layout
from verifier.smt import Unsupported


class ShapeEval:
    """Evaluate an expression (Python AST) to an abstract value, collecting the
    preconditions (``pre``) whose failure makes some op raise."""

    def __init__(self, facts: dict, defs: dict[str, str], tier: str, *, strict_dtypes: bool = False,
                 uniform: Callable[[str, bool], bool] | None = None, dense: frozenset = frozenset()):
        self.facts = facts.get("names", {}) if facts else {}
        self.self_modules = facts.get("self", {}) if facts else {}
        self.defs = defs
        self.tier = tier            # "general" | "equal-sizes" | "observed"
        self.strict_dtypes = strict_dtypes
        self.pre: list[tuple[Any, str]] = []
        # the texts of preconditions on values (a zero integer divisor), which fail only when the op
        # runs; the others (sizes, ranks, dtypes) fail when it is traced on fake tensors too
        self.value_pre: set[str] = set()
        self.assume: list[tuple[Any, str]] = []
        self.leaves: dict[str, M] = {}
        self.sym_dims: list[tuple[Any, int, str]] = []  # (var, observed, leaf)
        self.state_dims: dict[int, str] = {}             # size -> a module-state dim of that size
        self.depth = 0
        # uniform(dotted, is_parameter): whether the floating tensor `dotted` has the one floating
        # dtype a runtime guard checks every such tensor shares (torch.cond's `_mend_cond_ready`)
        self.uniform = uniform
        self.one_float = None
        self.dense = dense   # tensors a runtime guard checks contiguous (torch.cond's `_mend_cond_ready(dense=...)`)
        self._seen: list[M] = []   # the values evaluated directly under the node being evaluated

    # leaves -----------------------------------------------------------------------------
    def leaf(self, dotted: str) -> M:
        if dotted in self.leaves:
            return self.leaves[dotted]
        f = self.facts.get(dotted)
        if f is None and dotted.startswith("self.") and dotted.count(".") == 1:
            f = self.self_modules.get(dotted.split(".")[1])
        if f is not None and self.uniform is not None and dotted in self.defs and not self.uniform(dotted, False):
            f = None    # a temporary the guard does not check: its definition, over what the guard checks
        if f is None:
            if dotted in self.defs and self.depth < 8:
                self.depth += 1
                try:
                    v = self.eval(ast.parse(self.defs[dotted], mode="eval").body)
                finally:
                    self.depth -= 1
                self.leaves[dotted] = v
                return v
            raise Unsupported(f"nothing is known about `{dotted}` where the rewrite runs")
        v = self.from_fact(dotted, f)
        self.leaves[dotted] = v
        return v

    def dtype_of(self, dotted: str, obs: str, state: bool, param: bool = False):
        """The dtype term of the tensor ``dotted`` observed as ``obs``, with its assumption:
        the observed dtype (strict tier), else its category (any floating dtype, ...) or, under
        ``uniform``, the one floating dtype its guard checks."""
        dt = z3.Const(f"{dotted}.dtype", DT)
        if obs not in DTC:
            raise Unsupported(f"`{dotted}` has dtype {obs}, outside the encoded dtypes")
        if self.strict_dtypes or (obs == "bool" and state):
            self.assume.append((dt == DTC[obs], f"`{dotted}` is a {obs} tensor (observed)"))
        elif obs == "bool":   # a mask may arrive as 0/1 integers, where x[m] indexes (helper-37)
            self.assume.append((z3.Or(dt == DTC["bool"], is_int(dt)),
                                f"`{dotted}` is a bool or integer tensor (observed bool; an input mask may be 0/1 "
                                "integers)"))
        elif obs in FLOATS and self.uniform is not None and self.uniform(dotted, param):
            if self.one_float is None:
                self.one_float = z3.Const("guarded floating dtype", DT)
                self.assume.append((is_float(self.one_float), None))
            self.assume.append((dt == self.one_float, f"`{dotted}` has the floating dtype shared by every floating "
                                f"tensor the guard checks (observed {obs}; any floating dtype)"))
        elif obs in FLOATS:
            self.assume.append((is_float(dt), f"`{dotted}` is a floating-point tensor (observed {obs}; any floating dtype)"))
        else:
            self.assume.append((is_int(dt), f"`{dotted}` is an integer tensor (observed {obs}; any integer dtype)"))
        return dt

    def from_fact(self, dotted: str, f: dict) -> M:
        k = f["kind"]
        if k == "tensor":
            state = dotted.startswith("self.")
            dims = []
            for i, n in enumerate(f["shape"]):
                if state:
                    dims.append(z3.IntVal(n))
                    self.state_dims.setdefault(n, f"{dotted}.shape[{i}]")
                else:
                    d = z3.Int(f"{dotted}.shape[{i}]")
                    self.assume.append((d >= 0, None))
                    self.sym_dims.append((d, n, dotted))
                    dims.append(d)
            if state and f["shape"]:
                self.assume.append((z3.BoolVal(True), f"module state `{dotted}` has its observed shape {tuple(f['shape'])}"))
            dt = self.dtype_of(dotted, f["dtype"], state, bool(f.get("param")))
            # the layout is an observation (facts written before it was recorded: not known); module
            # state is taken as observed (as its shape), another tensor's only at the observed tier
            layout = (frozenset() if state else frozenset({dotted})) if f.get("contiguous") else None
            if dotted in self.dense:
                layout = frozenset()
                self.assume.append((z3.BoolVal(True), f"`{dotted}` is contiguous: the guard checks it, else the `if` runs"))
            return M("tensor", shape=dims, dtype=dt, name=dotted, fact=f, layout=layout)
        if k == "num":
            cat = f["cat"]
            if cat == "int":
                if dotted.startswith("self."):
                    return _num("int", z3.IntVal(f["value"]))
                return _num("int", z3.Int(dotted))
            if cat == "float":
                val = f["value"] if isinstance(f["value"], float) else None
                out = _num("float", fval=val if dotted.startswith("self.") or dotted.isupper() else None)
                out.fact, out.name = f, dotted   # the observed value, read only where a check says so
                return out
            return _num("bool")
        if k == "dtype":
            return M("dtype", dtype=DTC.get(f["value"]) if f["value"] in DTC else None, name=f["value"])
        if k == "pymodule":
            return M("ns", name=_NAMESPACES.get(f["value"], f["value"]))
        if k == "module":
            return M("module", fact=f, name=dotted)
        if k == "none":
            return M("none")
        if k == "device":
            return M("device", name=f["value"])
        if k == "str":
            return M("str", name=f["value"])
        if k == "callable":
            return M("callable", name=f["qualname"], fact=f)
        if k == "seq":
            return M("seq", items=[self.from_fact(f"{dotted}[{i}]", it) for i, it in enumerate(f["items"])])
        raise Unsupported(f"`{dotted}` is a {f.get('type', k)}, which is not modelled")

    # expressions ------------------------------------------------------------------------
    def eval(self, node: ast.AST) -> M:
        meth = getattr(self, f"e_{type(node).__name__}", None)
        if meth is None:
            raise Unsupported(f"`{ast.unparse(node)}` ({type(node).__name__}) is not modelled")
        outer, self._seen = self._seen, []
        try:
            out = meth(node)
        finally:
            seen, self._seen = self._seen, outer
        if out.kind == "tensor":
            out = result_layout(node, out, seen)
        outer.append(out)
        return out

    def e_Expression(self, node):
        return self.eval(node.body)

    def e_Name(self, node):
        if node.id in ("True", "False"):
            return _num("bool", z3.BoolVal(node.id == "True"))
        if node.id == "None":
            return M("none")
        return self.leaf(node.id)

    def e_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            return _num("bool", z3.BoolVal(v))
        if isinstance(v, int):
            return _num("int", z3.IntVal(v))
        if isinstance(v, float):
            return _num("float", fval=v)
        if isinstance(v, str):
            return M("str", name=v)
        if v is None:
            return M("none")
        if v is Ellipsis:
            return M("ellipsis")
        raise Unsupported(f"constant {v!r}")

    def e_Attribute(self, node):
        d = _dotted(node)
        if d and (d in self.facts or d in self.defs):
            return self.leaf(d)
        base = self.eval(node.value)
        a = node.attr
        if base.kind == "ns":
            if base.name == "torch" and a in DTC:
                return M("dtype", dtype=DTC[a], name=a)
            if base.name == "torch" and a in ("float", "half", "double", "long", "int", "bool"):
                return M("dtype", dtype=DTC[_CAST[a]], name=_CAST[a])
            if base.name == "math" and a in ("inf", "nan", "pi", "e"):
                return _num("float", fval=getattr(math, a))
            return M("fn", name=f"{base.name}.{a}")
        if base.kind == "tensor":
            if a == "dtype":
                return M("dtype", dtype=base.dtype)
            if a == "shape":
                return M("shape", shape=list(base.shape))
            if a in ("ndim",):
                return _num("int", z3.IntVal(base.rank))
            if a in ("T", "mT"):
                return self.shape_op("t" if a == "T" else "mT", base, [], {})
            if a in ("device",):
                return M("device")
            if a in ("requires_grad", "is_cuda"):
                return _num("bool")
            return M("method", name=a, owner=base)
        if base.kind == "finfo":
            if a in ("max", "min", "eps", "tiny", "smallest_normal"):
                out = _num("float")
                out.owner = ("finfo", a, base.dtype)   # what the value is, for scalar_fits
                return out
            if a == "bits":
                return _num("int")
        if base.kind == "module":
            if d and d.startswith("self."):
                raise Unsupported(f"nothing is known about `{d}`")
            return M("method", name=a, owner=base)
        if base.kind in ("num", "str", "seq", "shape"):
            return M("method", name=a, owner=base)
        raise Unsupported(f"attribute `.{a}` of a {base.kind}")

    def e_UnaryOp(self, node):
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            if v.kind == "tensor":
                self.need_single(v, f"not {ast.unparse(node.operand)}")
            return _num("bool")
        if v.kind == "num":
            if isinstance(node.op, ast.USub) and v.cat == "int" and v.ival is not None:
                return _num(v.cat, -v.ival)
            out = _num("int" if v.cat == "bool" else v.cat, fval=-v.fval if v.fval is not None and isinstance(node.op, ast.USub) else None)
            return signed(v, out, node) if isinstance(node.op, (ast.USub, ast.UAdd)) else out
        if v.kind != "tensor":
            raise Unsupported(f"unary op on a {v.kind}")
        if isinstance(node.op, ast.USub):
            self.pre.append((v.dtype != DTC["bool"], f"`-` of a bool tensor raises ({ast.unparse(node)})"))
            return M("tensor", shape=list(v.shape), dtype=v.dtype)
        if isinstance(node.op, ast.Invert):
            self.pre.append((z3.Not(is_float(v.dtype)), f"`~` of a floating tensor raises ({ast.unparse(node)})"))
            return M("tensor", shape=list(v.shape), dtype=v.dtype)
        return v

    def need_single(self, v: M, what: str) -> None:
        self.pre.append((numel(v.shape) == 1, f"bool() of `{what}` needs exactly one element"))

    # broadcasting and promotion -----------------------------------------------------------
    def broadcast(self, shapes: list[list], what: str) -> list:
        r = max((len(s) for s in shapes), default=0)
        out = []
        for i in range(r):
            dims = [s[i - (r - len(s))] for s in shapes if i >= r - len(s)]
            cur = dims[0]
            for d in dims[1:]:
                self.pre.append((z3.Or(cur == d, cur == 1, d == 1), f"sizes broadcast in `{what}`"))
                cur = z3.If(cur == 1, d, cur)
            out.append(cur)
        return out

    def result_type(self, vals: list[M]):
        groups = {2: [], 1: [], 0: []}
        for v in vals:
            if v.kind == "tensor":
                groups[2 if v.rank > 0 else 1].append(v.dtype)
            elif v.kind == "num":
                groups[0].append(DTC[DEFAULT_FOR_CAT[v.cat]])
            else:
                raise Unsupported(f"a {v.kind} operand")
        res = []
        for k in (2, 1, 0):
            if groups[k]:
                cur = groups[k][0]
                for d in groups[k][1:]:
                    cur = promote(cur, d)
                res.append(cur)
            else:
                res.append(None)
        dim_r, zero_r, wrapped_r = res
        low = wrapped_r if zero_r is None else (zero_r if wrapped_r is None else combine(zero_r, wrapped_r))
        if dim_r is None:
            return low
        return dim_r if low is None else combine(dim_r, low)

    def binary(self, op: str, a: M, b: M, what: str, literal: bool = False) -> M:
        """``a <op> b``; ``literal``: ``b`` is written as a literal in the source."""
        if a.kind == "num" and b.kind == "num":
            if a.cat == "float" or b.cat == "float" or op == "/":
                return _num("float")
            if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                return _num("bool")
            if a.cat == b.cat == "int" and a.ival is not None and b.ival is not None and op in ("+", "-", "*"):
                return _num("int", {"+": a.ival + b.ival, "-": a.ival - b.ival, "*": a.ival * b.ival}[op])
            if op == "**" and all(v.ival is not None and z3.is_int_value(z3.simplify(v.ival)) for v in (a, b)):
                return _num("int", z3.IntVal(z3.simplify(a.ival).as_long() ** min(max(z3.simplify(b.ival).as_long(), 0), 256)))
            return _num("int")
        for v in (a, b):
            if v.kind not in ("tensor", "num"):
                raise Unsupported(f"`{what}` on a {v.kind}")
        shape = self.broadcast([v.shape if v.kind == "tensor" else [] for v in (a, b)], what)
        if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or", "xor"):
            if op in ("&", "|"):
                pass
            return M("tensor", shape=shape, dtype=DTC["bool"])
        rt = self.result_type([a, b])
        if op in ("&", "|", "^"):
            self.pre.append((z3.Not(is_float(rt)), f"bitwise `{op}` on floating tensors raises ({what})"))
            return M("tensor", shape=shape, dtype=rt)
        if op in ("/", "atan2"):
            rt = z3.If(is_float(rt), rt, DTC["float32"])
        if op in ("//", "%"):   # a Python int divisor is modelled (a literal: decided; an input: free)
            known = b.kind == "num" and b.cat == "int" and b.ival is not None and (literal or self.tier == "observed")
            if known and z3.is_int_value(b.ival) and not literal:
                # module state can change after the example (helper-62: an annealed period reaching 0), so its
                # value decides only at the observed tier: the fix is then unsafe
                self.assume.append((z3.BoolVal(True), f"the divisor in `{what}` is {b.ival}, module state as observed"))
            text = f"integer `{op}` raises on a zero divisor ({what})" + (
                "" if known else "; a tensor divisor's values are not modelled")
            self.pre.append((z3.Or(is_float(rt), b.ival != 0) if known else is_float(rt), text))
            self.value_pre.add(text)
        binary_pre(self, op, a, b, rt, what)
        if op == "**" and not (b.kind == "num" and b.cat in ("int", "float")):
            text = f"integer `**` with a tensor exponent may raise on negative exponents ({what})"
            self.pre.append((is_float(rt), text))
            self.value_pre.add(text)
        return M("tensor", shape=shape, dtype=rt)

    def e_BinOp(self, node):
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
               ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.MatMult: "@"}
        op = ops.get(type(node.op))
        a, b = self.eval(node.left), self.eval(node.right)
        if op == "@":
            return self.matmul(a, b, ast.unparse(node))
        if a.kind == "shape" and b.kind == "shape" and op == "+":
            return M("shape", shape=a.shape + b.shape)
        return self.binary(op, a, b, ast.unparse(node), literal=isinstance(node.right, ast.Constant))

    def e_Compare(self, node):
        ops = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
               ast.Is: "is", ast.IsNot: "is", ast.In: "in", ast.NotIn: "in"}
        left = self.eval(node.left)
        out = None
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp)
            o = ops[type(op)]
            if o in ("is", "in"):
                raise Unsupported("`is`/`in` tests are not modelled")
            if left.kind == "dtype" or right.kind == "dtype":
                r = _num("bool")
            else:
                r = self.binary(o, left, right, ast.unparse(node))
            out = r if out is None else self.binary("and", out, r, ast.unparse(node))
            left = right
        return out

    def e_BoolOp(self, node):
        vals = [self.eval(v) for v in node.values]
        for v, src in zip(vals, node.values):
            if v.kind == "tensor":
                self.need_single(v, ast.unparse(src))
        # Python's and/or return one operand; in an `if` test only the truth value matters
        return _num("bool") if all(v.kind == "num" for v in vals) else M("tensor", shape=[], dtype=DTC["bool"])

    def e_Tuple(self, node):
        return M("seq", items=[self.eval(e) for e in node.elts])

    e_List = e_Tuple

    def e_IfExp(self, node):
        t = node.test   # `A if X.is_floating_point() else B` over dtypes: the one X's dtype picks
        if isinstance(t, ast.Call) and not t.args and getattr(t.func, "attr", None) == "is_floating_point":
            x, a, b = self.eval(t.func.value), self.eval(node.body), self.eval(node.orelse)
            if x.kind == "tensor" and a.kind == b.kind == "dtype" and None not in (x.dtype, a.dtype, b.dtype):
                return M("dtype", dtype=z3.If(is_float(x.dtype), a.dtype, b.dtype))
        self.eval(node.test)
        a, b = self.eval(node.body), self.eval(node.orelse)
        if a.kind == b.kind == "num":
            return _num(a.cat if a.cat == b.cat else "float")
        raise Unsupported("a conditional expression over tensors")

    def python_int(self, node: ast.AST):
        """The z3 Int of ``node`` when it is a Python int (a literal, or a name or expression
        the facts show is one: ``e`` of ``for e, expert in enumerate(...)``, ``e + 1``), else
        None: a tensor index selects, it does not drop a dim."""
        if isinstance(node, (ast.Constant, ast.UnaryOp)):
            try:
                v = ast.literal_eval(node)
            except ValueError:
                v = None
            if isinstance(v, int) and not isinstance(v, bool):
                return z3.IntVal(v)
        if isinstance(node, ast.Slice) or isinstance(node, ast.Constant) and not isinstance(node.value, int):
            return None
        try:
            v = self.eval(node)
        except Unsupported:
            return None
        return v.ival if v.kind == "num" and v.cat == "int" and v.ival is not None else None

    def e_Subscript(self, node):
        base = self.eval(node.value)
        idx = node.slice
        if base.kind in ("shape", "seq"):
            items = base.shape if base.kind == "shape" else base.items
            if isinstance(idx, ast.Constant) and isinstance(idx.value, int):
                i = idx.value
                if not -len(items) <= i < len(items):
                    raise Unsupported(f"index {i} out of range")
                it = items[i]
                return _num("int", it) if base.kind == "shape" else it
            if isinstance(idx, ast.Slice) and base.kind == "shape":
                lo = idx.lower.value if isinstance(idx.lower, ast.Constant) else None
                hi = idx.upper.value if isinstance(idx.upper, ast.Constant) else None
                if (idx.lower is None or lo is not None) and (idx.upper is None or hi is not None) and idx.step is None:
                    return M("shape", shape=items[lo:hi])
            raise Unsupported(f"subscript `{ast.unparse(node)}`")
        if base.kind != "tensor":
            raise Unsupported(f"subscript of a {base.kind}")
        parts = list(idx.elts) if isinstance(idx, ast.Tuple) else [idx]
        n_real = sum(1 for p in parts if not (isinstance(p, ast.Constant) and p.value in (None, Ellipsis)))
        if n_real > base.rank:
            self.pre.append((z3.BoolVal(False), f"too many indices in `{ast.unparse(node)}`"))
        out, dim = [], 0
        for p in parts:
            if isinstance(p, ast.Constant) and p.value is None:
                out.append(z3.IntVal(1))
                continue
            if isinstance(p, ast.Constant) and p.value is Ellipsis:
                skip = base.rank - n_real
                out.extend(base.shape[dim:dim + skip])
                dim += skip
                continue
            size = base.shape[dim] if dim < base.rank else z3.IntVal(0)
            i = self.python_int(p)
            if i is not None:   # x[0], x[-1], x[e] for a Python int e (a loop's index): the dim goes
                self.pre.append((z3.And(-size <= i, i < size), f"index {ast.unparse(p)} within size in "
                                                               f"`{ast.unparse(node)}`"))
                dim += 1
                continue
            if isinstance(p, ast.Slice) and p.step is None:
                def bound(e, default, size=size):
                    if e is None:
                        return default
                    z = self.python_int(e)
                    if z is None:
                        raise Unsupported(f"slice bound `{ast.unparse(e)}`")
                    return z3.If(z < 0, z3.If(z + size < 0, 0, z + size), z3.If(z > size, size, z))
                lo, hi = bound(p.lower, z3.IntVal(0)), bound(p.upper, size)
                out.append(z3.If(hi > lo, hi - lo, 0))
                dim += 1
                continue
            raise Unsupported(f"index `{ast.unparse(p)}` (tensor or computed indices are not modelled)")
        out.extend(base.shape[dim:])
        return M("tensor", shape=out, dtype=base.dtype, layout=index_layout(parts, base.rank, n_real))

    # calls ------------------------------------------------------------------------------
    def e_Call(self, node):
        func = self.eval(node.func)
        args = [self.eval(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise Unsupported("`*args` calls are not modelled")
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords if k.arg}
        what = ast.unparse(node)
        if func.kind == "method":
            owner = func.owner
            if owner.kind == "tensor":
                return self.call(func.name, [owner, *args], kwargs, what, method=True)
            if owner.kind == "module":
                raise Unsupported(f"method `.{func.name}` of a module")
            raise Unsupported(f"method `.{func.name}` of a {owner.kind}")
        if func.kind == "fn":
            ns, _, name = func.name.rpartition(".")
            return self.call(name, args, kwargs, what, ns=ns)
        if func.kind == "module":
            return module_call(self, func, args, kwargs, what)
        if func.kind == "callable":
            q = func.name
            if q.startswith("builtins."):
                return self.call(q.split(".", 1)[1], args, kwargs, what, ns="builtins")
            raise Unsupported(f"call of `{q}`, whose effect and result are not modelled")
        raise Unsupported(f"call of a {func.kind}")

    def _dim_arg(self, args, kwargs, pos, name="dim"):
        v = kwargs.get(name, args[pos] if len(args) > pos else None)
        if v is None or v.kind == "none":
            return None
        if v.kind == "num" and v.ival is not None:
            iv = z3.simplify(v.ival)
            if z3.is_int_value(iv):
                return iv.as_long()
        if v.kind == "seq":
            out = []
            for it in v.items:
                iv = z3.simplify(it.ival) if it.kind == "num" and it.ival is not None else None
                if iv is None or not z3.is_int_value(iv):
                    raise Unsupported("computed dims")
                out.append(iv.as_long())
            return out
        raise Unsupported(f"`{name}` is not a literal")

    def _norm_dim(self, d: int, rank: int, what: str) -> int:
        if not -max(rank, 1) <= d < max(rank, 1):
            self.pre.append((z3.BoolVal(False), f"dim {d} out of range in `{what}`"))
            return 0
        return d % max(rank, 1)

    def call(self, name: str, args: list[M], kwargs: dict, what: str, *, method: bool = False, ns: str = "torch") -> M:
        """The transfer function of ``name`` (a torch function, a Tensor method when
        ``method``, a builtin or a math function) applied to abstract ``args``."""
        if ns == "math":
            return _num("float")
        if ns == "builtins":
            return builtin_call(self, name, args, what)
        if name == "finfo":
            return finfo_call(self, args, kwargs, what)
        if name == "tensor" and not method and args and args[0].kind == "num":
            d = kwargs.get("dtype")
            dt = d.dtype if d is not None and d.kind == "dtype" else DTC[DEFAULT_FOR_CAT[args[0].cat]]
            return M("tensor", shape=[], dtype=dt)
        x = args[0] if args else None
        if x is None or x.kind != "tensor":
            seq_op = x is not None and x.kind == "seq" and name in ("cat", "concat", "concatenate", "stack")
            if not (name in _COMPARE or name in _BINARY or seq_op):
                kind = {"num": "Python number", "seq": "sequence"}.get(x.kind, x.kind) if x else "missing argument"
                raise Unsupported(f"`{what or name}` with a {kind} as its first argument is not modelled (only tensor "
                                  "operations are)")
        sized = size_query(self, name, x, args, kwargs, what)
        if sized is not None:
            return sized
        for group in (self._elementwise, self._conversion, self._reduction, self._structural):
            out = group(name, x, args, kwargs, what, method)
            if out is not None:
                return out
        raise Unsupported(f"`{name}` has no transfer function")

    def _elementwise(self, name, x, args, kwargs, what, method) -> M | None:
        """Unary ops, clamp (clamp_min, clamp_max), binary ops and comparisons (broadcasting, promotion)."""
        if name in _UNARY_FLOAT:
            return M("tensor", shape=list(x.shape), dtype=z3.If(is_float(x.dtype), x.dtype, DTC["float32"]))
        if name in _UNARY_SAME:
            unary_pre(self, name, x, what)
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
        if name in _UNARY_BOOL:
            return M("tensor", shape=list(x.shape), dtype=DTC["bool"])
        if name in _CLAMPS:
            lo, hi = _clamp_bounds(name, args, kwargs)
            ops = [x] + [v for v in (lo, hi) if v is not None and v.kind != "none"]
            shape = self.broadcast([v.shape if v.kind == "tensor" else [] for v in ops], what)
            self.pre.append((z3.BoolVal(len(ops) > 1), f"clamp needs min or max ({what})"))
            rt = self.result_type(ops)
            for bound in ops[1:]:
                scalar_fits(self, bound, rt, name, what, promoted=True)
            if any(b.kind == "num" and b.cat == "bool" for b in ops[1:]):   # measured: NotImplementedError
                self.pre.append((rt != DTC["bool"], f"`{name}` of a bool tensor at a Python bool raises ({what})"))
            return M("tensor", shape=shape, dtype=rt)
        if name in _BINARY:
            other = kwargs.get("other", args[1] if len(args) > 1 else None)
            if name == "hypot" and other is not None:
                hypot_pre(self, x, other, what)
            if other is None:
                other = kwargs.get("exponent")
            if other is None:
                raise Unsupported(f"`{name}` without a second operand")
            mode = kwargs.get("rounding_mode")
            if _BINARY[name] == "/" and mode is not None and mode.kind != "none":
                # div(rounding_mode="floor"/"trunc") keeps integer dtypes: result_type, as `//`
                return self.binary("//", x, other, what)
            return self.binary(_BINARY[name], x, other, what)
        if name in _COMPARE:
            other = kwargs.get("other", args[1] if len(args) > 1 else None)
            return self.binary(_COMPARE[name], x, other, what)
        return None

    def _conversion(self, name, x, args, kwargs, what, method) -> M | None:
        """Casts, ``.to``, ``type_as`` and the ``*_like`` constructors."""
        if name in _CAST and method:
            return M("tensor", shape=list(x.shape), dtype=DTC[_CAST[name]])
        if name == "to":
            targets = [a for a in args[1:]] + [v for k, v in kwargs.items() if k in ("dtype", "device", "other")]
            dt = x.dtype
            for a in targets:
                if a.kind == "dtype" and a.dtype is not None:
                    dt = a.dtype
                elif a.kind == "tensor":
                    dt = a.dtype
                elif a.kind in ("device", "str", "num"):
                    continue
                else:
                    raise Unsupported(f"`.to({a.kind})`")
            return M("tensor", shape=list(x.shape), dtype=dt)
        if name == "type_as":
            return M("tensor", shape=list(x.shape), dtype=args[1].dtype)
        if name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"):
            d = kwargs.get("dtype")
            return M("tensor", shape=list(x.shape), dtype=d.dtype if d is not None and d.kind == "dtype" else x.dtype)
        return None

    def _reduction(self, name, x, args, kwargs, what, method) -> M | None:
        """Reductions (``dim``, ``keepdim``) and softmax."""
        if name in ("softmax", "log_softmax"):
            d = self._dim_arg(args, kwargs, 1)
            if d is None:
                raise Unsupported("softmax without dim")
            if len(args) > 2 or set(kwargs) - {"dim", "dtype"}:
                raise Unsupported(f"`{name}` with arguments that are not modelled")
            self._norm_dim(d, x.rank, what)
            dt = x.dtype
            if "dtype" in kwargs:   # helper-95 m04: `softmax(h, dim=-1, dtype=torch.float32)` is float32 for a bf16 h
                if kwargs["dtype"].kind != "dtype" or kwargs["dtype"].dtype is None:
                    raise Unsupported(f"`{name}` with a dtype= that is not a literal dtype")
                dt = kwargs["dtype"].dtype
            self.pre.append((is_float(dt), f"softmax of an integer tensor raises ({what})"))
            return M("tensor", shape=list(x.shape), dtype=dt)
        if name not in _REDUCE:
            return None
        # positional (dim, keepdim) only where torch's signature is that: norm's first is p, std's
        # and var's second is unbiased
        positional = 1 if name == "norm" else 2 if name in ("std", "var") else 3
        if len(args) > positional or set(kwargs) - {"dim", "keepdim", "dtype", "p", "unbiased", "correction"}:
            raise Unsupported(f"`{name}` with arguments that are not modelled")
        dim = self._dim_arg(args, kwargs, 1)
        if dim == []:
            raise Unsupported(f"`{name}` over an empty list of dims")   # torch 2.13 reduces over every dim
        keep_v = kwargs.get("keepdim", args[2] if len(args) > 2 else None)
        keep = False
        if keep_v is not None:
            if keep_v.kind != "num" or keep_v.cat != "bool" or keep_v.ival is None:
                raise Unsupported("keepdim is not a literal")
            keep = z3.is_true(z3.simplify(keep_v.ival))
        if name in ("any", "all"):
            dt = DTC["bool"]
        elif name in ("argmax", "argmin", "count_nonzero"):
            dt = DTC["int64"]
        elif name in ("sum", "prod", "nansum"):
            dt = z3.If(is_float(x.dtype), x.dtype, DTC["int64"])
        elif name in ("mean", "std", "var", "norm", "nanmean", "logsumexp"):
            self.pre.append((is_float(x.dtype), f"`{name}` of an integer tensor raises ({what})"))
            dt = x.dtype
        else:
            dt = x.dtype
        if "dtype" in kwargs:   # `sum(dtype=torch.float32)`: the result has the dtype asked for
            d = kwargs["dtype"]
            if d.kind != "dtype" or d.dtype is None or name not in ("sum", "prod", "nansum", "mean", "nanmean"):
                raise Unsupported(f"`{name}` with dtype=")
            dt = d.dtype
        if name in ("max", "min") and dim is not None:
            raise Unsupported(f"`{name}(dim)` returns (values, indices)")
        if dim is None:
            if name in ("max", "min", "amax", "amin", "argmax", "argmin"):
                self.pre.append((numel(x.shape) > 0, f"`{name}` of an empty tensor raises ({what})"))
            if name == "logsumexp":
                self.pre.append((z3.BoolVal(False), f"logsumexp without dim raises TypeError ({what})"))
            if name in ("std", "var"):   # too few elements: a UserWarning (degrees of freedom <= 0)
                self.pre.append((numel(x.shape) > correction_of(name, kwargs), f"`{name}` of too few elements warns ({what})"))
            return M("tensor", shape=[], dtype=dt)
        dims = [dim] if isinstance(dim, int) else dim
        nd = {self._norm_dim(d, x.rank, what) for d in dims}
        sizes = [x.shape[i] for i in sorted(nd)] if x.rank else [z3.IntVal(1)]
        if name in ("amax", "amin", "argmax", "argmin"):   # helper-104 B3: IndexError over an empty dim
            self.pre.append((z3.And(*[n > 0 for n in sizes]), f"`{name}` over an empty dim raises ({what})"))
        if name in ("std", "var"):
            self.pre.append((numel(sizes) > correction_of(name, kwargs), f"`{name}` over too few elements warns ({what})"))
        shape = [(z3.IntVal(1) if i in nd else s) for i, s in enumerate(x.shape) if keep or i not in nd]
        return M("tensor", shape=shape, dtype=dt)

    def _structural(self, name, x, args, kwargs, what, method) -> M | None:
        """Shape ops, matmul/linear, where, masked_fill, cat/stack."""
        if name in _SHAPE_SAME_DTYPE:
            return self.shape_op(name, x, args[1:], kwargs, what)
        if name in ("matmul", "mm", "bmm"):
            return self.matmul(x, args[1], what)
        if name == "linear":
            w = args[1] if len(args) > 1 else kwargs["weight"]
            out = self.matmul(x, self.shape_op("t", w, [], {}, what), what)
            b = kwargs.get("bias", args[2] if len(args) > 2 else None)
            if b is not None and b.kind == "tensor":
                out = self.binary("+", out, b, what)
            return out
        if name == "where":
            c = x
            a, b = args[1], args[2]
            self.pre.append((c.dtype == DTC["bool"], f"torch.where needs a bool condition ({what})"))
            shape = self.broadcast([v.shape if v.kind == "tensor" else [] for v in (c, a, b)], what)
            return M("tensor", shape=shape, dtype=self.result_type([a, b]))
        if name == "masked_fill":
            mask, value = args[1], args[2]
            self.pre.append((mask.dtype == DTC["bool"], f"masked_fill needs a bool mask ({what})"))
            scalar_fits(self, value, x.dtype, name, what)
            if value.kind == "tensor":
                fill_tensor_pre(self, value, x, what)
            shape = self.broadcast([x.shape, mask.shape], what)
            self.pre.append((z3.And(*[a == b for a, b in zip(shape, x.shape)]) if len(shape) == x.rank else z3.BoolVal(False),
                             f"the mask broadcasts to the tensor's shape ({what})"))
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
        if name in ("cat", "concat", "concatenate", "stack"):
            return concat(self, name, x, args, kwargs, what)
        return None

    def shape_op(self, name, x: M, args, kwargs, what="") -> M:
        r = x.rank
        s = list(x.shape)
        moved = M("tensor", shape=s, dtype=x.dtype, layout=None)   # a view with other strides: may not be contiguous
        if name in ("t",):
            if r > 2:
                self.pre.append((z3.BoolVal(False), f".t() of a tensor with more than 2 dims raises ({what})"))
            return replace(moved, shape=s[::-1]) if r == 2 else M("tensor", shape=s, dtype=x.dtype)
        if name == "mT":
            if r < 2:   # helper-106: "tensor.mT is only supported on matrices or batches of matrices"
                self.pre.append((z3.BoolVal(False), f".mT of a tensor with fewer than 2 dims raises ({what})"))
            return replace(moved, shape=s[:-2] + s[-2:][::-1])
        if name in ("transpose", "swapaxes"):
            a, b = self._dim_arg(args, kwargs, 0, "dim0"), self._dim_arg(args, kwargs, 1, "dim1")
            a, b = self._norm_dim(a, r, what), self._norm_dim(b, r, what)
            if r:
                s[a], s[b] = s[b], s[a]
            return moved if a != b else M("tensor", shape=s, dtype=x.dtype)
        if name == "permute":
            dims = [self._dim_arg([a], {}, 0) for a in args] if len(args) != 1 or args[0].kind != "seq" else \
                self._dim_arg(args, {}, 0)
            if sorted(d % max(r, 1) for d in dims) != list(range(r)):
                self.pre.append((z3.BoolVal(False), f"permute dims are not a permutation ({what})"))
                return M("tensor", shape=s, dtype=x.dtype)
            order = [d % r for d in dims] if r else []
            return M("tensor", shape=[s[d] for d in order], dtype=x.dtype, layout=None if order != sorted(order) else frozenset())
        if name == "unsqueeze":
            d = self._dim_arg(args, kwargs, 0)
            d = d % (r + 1) if -(r + 1) <= d <= r else self._norm_dim(d, r + 1, what)
            return M("tensor", shape=s[:d] + [z3.IntVal(1)] + s[d:], dtype=x.dtype)
        if name == "squeeze":
            d = self._dim_arg(args, kwargs, 0)
            if d is None:
                raise Unsupported("squeeze() without a dim depends on which sizes are 1")
            d = self._norm_dim(d, r, what)
            if r == 0:
                return M("tensor", shape=[], dtype=x.dtype)
            raise Unsupported("squeeze(dim) keeps or drops the dim depending on its size")
        if name == "flatten":
            a = self._dim_arg(args, kwargs, 0, "start_dim") or 0
            b = self._dim_arg(args, kwargs, 1, "end_dim")
            b = -1 if b is None else b
            if r == 0:
                return M("tensor", shape=[z3.IntVal(1)], dtype=x.dtype)
            a, b = self._norm_dim(a, r, what), self._norm_dim(b, r, what)
            n = z3.IntVal(1)
            for d in s[a:b + 1]:
                n = n * d
            return M("tensor", shape=s[:a] + [n] + s[b + 1:], dtype=x.dtype)
        if name in ("reshape", "view", "expand"):
            sizes = args
            if len(args) == 1 and args[0].kind in ("seq", "shape"):
                sizes = args[0].items if args[0].kind == "seq" else [_num("int", d) for d in args[0].shape]
            out, minus = [], None
            for i, v in enumerate(sizes):
                if v.kind != "num" or v.ival is None:
                    raise Unsupported(f"`{name}` with a computed size")
                iv = z3.simplify(v.ival)
                if z3.is_int_value(iv) and iv.as_long() == -1:
                    minus = i
                    out.append(None)
                else:
                    out.append(v.ival)
            count = numel(s)
            if name == "expand":
                if minus is not None:
                    raise Unsupported("expand(-1)")
                sh = self.broadcast([s, out], what)
                self.pre.append((z3.And(*[a == b for a, b in zip(sh, out)]), f"expand sizes ({what})"))
                return replace(moved, shape=out)
            if name == "view":
                need_contiguous(self, x, what)
            known = numel([d for d in out if d is not None])
            if minus is None:
                self.pre.append((known == count, f"`{name}` keeps the number of elements ({what})"))
            else:
                # the -1 size is numel / known, a term (a free variable here let the solver pick a wrong one: helper-105 F7)
                self.pre.append((z3.And(known > 0, count % known == 0), f"`{name}` sizes divide the number of elements ({what})"))
                out[minus] = count / known
            return M("tensor", shape=out, dtype=x.dtype)
        if name == "movedim":
            raise Unsupported("movedim")
        raise Unsupported(f"`{name}`")

    def matmul(self, a: M, b: M, what: str) -> M:
        if a.kind != "tensor" or b.kind != "tensor":
            raise Unsupported("matmul of non-tensors")
        self.pre.append((a.dtype == b.dtype, f"matmul operands have one dtype ({what})"))
        if a.rank == 0 or b.rank == 0:
            self.pre.append((z3.BoolVal(False), f"matmul of a 0-dim tensor raises ({what})"))
            return M("tensor", shape=[], dtype=a.dtype)
        sa, sb = list(a.shape), list(b.shape)
        if a.rank == 1 and b.rank == 1:
            self.pre.append((sa[0] == sb[0], f"inner sizes agree in `{what}`"))
            return M("tensor", shape=[], dtype=a.dtype)
        drop_a = a.rank == 1
        drop_b = b.rank == 1
        if drop_a:
            sa = [z3.IntVal(1)] + sa
        if drop_b:
            sb = sb + [z3.IntVal(1)]
        self.pre.append((sa[-1] == sb[-2], f"inner sizes agree in `{what}`"))
        batch = self.broadcast([sa[:-2], sb[:-2]], what)
        out = batch + ([] if drop_a else [sa[-2]]) + ([] if drop_b else [sb[-1]])
        return M("tensor", shape=out, dtype=a.dtype)


def _expr(text: str) -> ast.AST:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise Unsupported(f"cannot parse `{text}`") from exc


# -- element values (IEEE) ---------------------------------------------------------------------
