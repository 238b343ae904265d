"""Discharge a rewrite's proof obligations with Z3: encode, solve, record.

Each obligation a rule returns (``{"kind": "same-shape", "lhs": ..., "rhs": ...}``) is
encoded as an SMT query whose assertions are the *negation* of the claim under recorded
assumptions, built with z3's Python API and kept as SMT-LIB 2 text. Results are
three-valued:

* ``proved``: the query is ``unsat`` -- the claim holds for every value of its symbols;
* ``refuted``: ``sat`` -- the model is a counterexample (shown in words);
* ``unknown``: the solver timed out, or the obligation is outside what is encoded
  (``reason`` says which).

What is encoded (the models are the ones of ``proofs/``):

* tensors' shapes as symbolic integer dims (rank as observed on the example run), with
  transfer functions for broadcasting elementwise ops, matmul/linear, reductions,
  reshape/view/transpose/permute, cat/stack, softmax and constant indexing; a failed
  precondition of any op is a raise;
* dtypes as a finite datatype with PyTorch's promotion table (``torch.promote_types``) and
  ATen's category rules for 0-dim tensors and Python numbers;
* values element-wise in the Z3 FloatingPoint sort of the tensor's dtype (float32
  ``(_ FloatingPoint 8 24)``, float16, bfloat16, float64; NaN, +-inf, -0.0 included; never
  reals), integers as bit-vectors, and PyTorch's backward formulas for the gradient of an
  untaken side;
* the runtimes' protocols (capture/replay buffers, snapshots, trap tables) as sequences,
  arrays and strings, instantiated with what the mended file holds.

Facts -- dtypes, ranks, observed sizes, module types -- come from running the mended
candidate once on the example input and reading the locals where the rewritten statement
runs (:func:`trace_facts`). Each proof first tries the most general assumptions (any
floating dtype, independent symbolic sizes) and narrows to what was observed only when
that fails; the assumptions used are recorded with the query.
"""
from __future__ import annotations

import ast
import inspect
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from verifier.effects import dotted_name as _dotted

TIMEOUT_MS = 2000
RESULTS = ("proved", "refuted", "unknown")
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
FLOATS = {"float16", "bfloat16", "float32", "float64"}
INTS = {"uint8", "int8", "int16", "int32", "int64"}
FP_FORMAT = {"float16": (5, 11), "bfloat16": (8, 8), "float32": (8, 24), "float64": (11, 53)}
INT_BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}


def solver_version() -> str:
    return f"z3 {z3.get_full_version()}"


# -- solving -------------------------------------------------------------------------------


class Unsupported(Exception):
    """The obligation (or a part of it) is outside what is encoded: result unknown."""


@dataclass
class Solved:
    status: str          # "unsat" | "sat" | "unknown"
    smtlib: str
    seconds: float
    model: Any = None
    reason_unknown: str | None = None


def solve(assertions: list, *, timeout_ms: int = TIMEOUT_MS, comments: list[str] = ()) -> Solved:
    """Check ``assertions`` (the negated claim plus assumptions) with a timeout."""
    s = z3.Solver()
    s.set("timeout", int(timeout_ms))
    for a in assertions:
        s.add(a)
    text = "".join(f"; {c}\n" for c in comments for c in c.splitlines()) + s.to_smt2()
    t0 = time.perf_counter()
    res = s.check()
    dt = time.perf_counter() - t0
    model = s.model() if res == z3.sat else None
    return Solved(str(res), text, dt, model, s.reason_unknown() if res == z3.unknown else None)


def replay(smtlib: str, *, timeout_ms: int = TIMEOUT_MS) -> str:
    """Solve recorded SMT-LIB text afresh: "unsat", "sat" or "unknown"."""
    s = z3.Solver()
    s.set("timeout", int(timeout_ms))
    s.from_string(smtlib)
    return str(s.check())


def result_of(status: str) -> str:
    return {"unsat": "proved", "sat": "refuted"}.get(status, "unknown")


# -- dtypes ----------------------------------------------------------------------------------

DT, _DT_CONSTS = z3.EnumSort("DType", DTYPES)
DTC = dict(zip(DTYPES, _DT_CONSTS))


def _promote_table() -> dict:
    import torch

    return {(a, b): str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
            for a in DTYPES for b in DTYPES}


_PROMO: dict | None = None


def promote_py(a: str, b: str) -> str:
    global _PROMO
    if _PROMO is None:
        _PROMO = _promote_table()
    return _PROMO[(a, b)]


def _as_name(d) -> str | None:
    d = z3.simplify(d)
    for n, c in DTC.items():
        if z3.eq(d, c):
            return n
    return None


_PROMO_FN = None


def promote(a, b):
    """PyTorch's promote_types on DType terms (folded when both are constants)."""
    global _PROMO_FN
    na, nb = _as_name(a), _as_name(b)
    if na and nb:
        return DTC[promote_py(na, nb)]
    if _PROMO_FN is None:
        arr = z3.K(DT, z3.K(DT, DTC["float64"]))
        for x in DTYPES:
            row = z3.K(DT, DTC["float64"])
            for y in DTYPES:
                row = z3.Store(row, DTC[y], DTC[promote_py(x, y)])
            arr = z3.Store(arr, DTC[x], row)
        _PROMO_FN = arr
    return z3.Select(z3.Select(_PROMO_FN, a), b)


def is_float(d):
    return z3.Or(*[d == DTC[f] for f in sorted(FLOATS)])


def is_int(d):
    return z3.Or(*[d == DTC[f] for f in sorted(INTS)])


def combine(higher, lower):
    """ATen's combine_categories(higher, lower) (no complex dtypes)."""
    return z3.If(is_float(higher), higher,
                 z3.If(z3.Or(higher == DTC["bool"], is_float(lower)), promote(higher, lower), higher))


DEFAULT_FOR_CAT = {"float": "float32", "int": "int64", "bool": "bool"}


# -- facts -----------------------------------------------------------------------------------


def summarize(value: Any, depth: int = 0) -> dict:
    """A JSON-able description of a runtime value (no tensor contents)."""
    import types

    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
                "device": value.device.type, "param": isinstance(value, torch.nn.Parameter)}
    if isinstance(value, bool):
        return {"kind": "num", "cat": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "num", "cat": "int", "value": value}
    if isinstance(value, float):
        return {"kind": "num", "cat": "float", "value": value if math.isfinite(value) else repr(value)}
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value).replace("torch.", "")}
    if isinstance(value, torch.device):
        return {"kind": "device", "value": value.type}
    if isinstance(value, str):
        return {"kind": "str", "value": value[:200]}
    if value is None:
        return {"kind": "none"}
    if isinstance(value, types.ModuleType):
        return {"kind": "pymodule", "value": value.__name__}
    if isinstance(value, torch.nn.Module):
        from verifier.effects import module_effects

        effects, assumptions = module_effects(value)
        info = {"kind": "module", "type": type(value).__name__, "training": value.training,
                "pure": not effects, "effects": effects[:5], "assumptions": assumptions[:12]}
        for attr in ("in_features", "out_features", "normalized_shape", "num_embeddings", "embedding_dim", "dim"):
            v = getattr(value, attr, None)
            if isinstance(v, (int, tuple)):
                info[attr] = list(v) if isinstance(v, tuple) else v
        w = getattr(value, "weight", None)
        if isinstance(w, torch.Tensor):
            info["weight"] = summarize(w)
        return info
    if callable(value):
        out = {"kind": "callable", "qualname": f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"}
        if inspect.isfunction(value):
            from verifier.effects import function_purity

            out["effects"], out["assumptions"] = function_purity(value)
        return out
    if isinstance(value, (tuple, list)) and depth < 1 and len(value) <= 8:
        return {"kind": "seq", "items": [summarize(v, depth + 1) for v in value]}
    return {"kind": "other", "type": type(value).__name__}




def names_in(exprs: list[str]) -> set[str]:
    """Dotted names read by ``exprs`` (``h``, ``self.proj``, ``self.config.x``, ``torch``)."""
    out: set[str] = set()
    for e in exprs:
        try:
            tree = ast.parse(e.strip(), mode="eval")
        except SyntaxError:
            continue
        funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            d = _dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
            if d:
                parts = d.split(".")
                # a called attribute is a method (`h.sum`), except `self.<attr>` (a submodule
                # or a function held in an attribute)
                upto = len(parts) - 1 if id(node) in funcs and len(parts) > 1 and not (
                    parts[0] == "self" and len(parts) == 2) else len(parts)
                for i in range(1, upto + 1):
                    out.add(".".join(parts[:i]))
    return out


def _lookup(frame, dotted: str):
    head, *rest = dotted.split(".")
    if head in frame.f_locals:
        value = frame.f_locals[head]
    elif head in frame.f_globals:
        value = frame.f_globals[head]
    else:
        import builtins

        if not hasattr(builtins, head):
            raise KeyError(dotted)
        value = getattr(builtins, head)
    for attr in rest:
        value = getattr(value, attr)  # attribute reads only (properties of modules/configs)
    return value


def fact_key(summary: dict) -> str:
    """What observations of one name must agree on: kind, dtype, rank and device of a
    tensor; category of a number; the summary itself otherwise (sizes and values may vary)."""
    k = summary.get("kind")
    if k == "tensor":
        return json.dumps(["tensor", summary.get("dtype"), len(summary.get("shape", [])), summary.get("device")])
    if k == "num":
        return json.dumps(["num", summary.get("cat")])
    if k == "seq":
        return json.dumps(["seq", [fact_key(i) for i in summary.get("items", [])]])
    if k == "module":
        return json.dumps({**summary, "weight": fact_key(summary["weight"]) if "weight" in summary else None},
                          sort_keys=True, default=str)
    return json.dumps({a: b for a, b in summary.items() if a != "value" or k in ("dtype", "device", "pymodule")},
                      sort_keys=True, default=str)


def trace_facts(run: Callable[[], Any], file: str, lines: list[int], names: set[str],
                watch: dict[int, list[str]] | None = None) -> dict:
    """Run ``run()`` once, reading ``names`` in the frames of ``file`` at each of ``lines``
    (before the line executes). Later lines override earlier ones; the first call of the
    function wins. Returns ``{"names": {dotted: summary}, "hits": n, "self": {attr: module summary}}``.

    ``watch`` (``line -> dotted names``): besides, every observation of those names at that
    line, in every frame and on every hit, goes to ``"at": {line: {name: [summary per
    distinct fact_key]}}`` (a name that cannot be read there: ``{"kind": "unavailable"}``)
    with ``"at_hits": {line: n}``; nothing overrides anything there."""
    target = os.path.realpath(file)
    wanted = set(lines)
    facts: dict = {"names": {}, "hits": 0, "self": {}}
    first: list = []
    watch = {int(k): list(v) for k, v in (watch or {}).items()}
    if watch:
        facts["at"], facts["at_hits"] = {}, {}

    def observe(frame, ln):
        key = str(ln)
        facts["at_hits"][key] = facts["at_hits"].get(key, 0) + 1
        rec = facts["at"].setdefault(key, {})
        for name in watch[ln]:
            try:
                s = summarize(_lookup(frame, name))
            except Exception:  # noqa: BLE001 - not defined here
                s = {"kind": "unavailable"}
            seen = rec.setdefault(name, [])
            if fact_key(s) not in {fact_key(o) for o in seen} and len(seen) < 16:
                seen.append(s)

    def local(frame, event, arg):
        if event == "line" and watch and frame.f_lineno in watch:
            observe(frame, frame.f_lineno)
        if event == "line" and frame.f_lineno in wanted:
            if first and first[0] is not frame:
                return local
            if not first:
                first.append(frame)
            facts["hits"] += 1
            for name in names:
                try:
                    facts["names"][name] = summarize(_lookup(frame, name))
                except Exception:  # noqa: BLE001 - not defined here
                    continue
            me = frame.f_locals.get("self")
            import torch

            if isinstance(me, torch.nn.Module) and not facts["self"]:
                for attr, sub in me.named_children():
                    facts["self"][attr] = summarize(sub)
        return local

    same: dict[str, bool] = {}

    def glob(frame, event, arg):
        name = frame.f_code.co_filename
        hit = same.get(name)
        if hit is None:
            hit = same[name] = os.path.realpath(name) == target
        return local if hit and event == "call" else None

    old = sys.gettrace()
    sys.settrace(glob)
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the facts before the failure still count
        facts["raised"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        sys.settrace(old)
    return facts


def changed_lines(before: str, after: str) -> list[int]:
    """1-based lines of ``after`` that are new or changed relative to ``before``."""
    import difflib

    out = []
    sm = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, _, _, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(j1 + 1, j2 + 1))
    return out


def obligation_exprs(obligations: list[dict]) -> list[str]:
    out = []
    for ob in obligations:
        for key in ("expr", "lhs", "rhs", "pred", "guard", "call", "raises_when", "asserts", "target"):
            v = ob.get(key)
            if isinstance(v, str):
                out.append(v)
        for v in ob.get("values", []) if isinstance(ob.get("values"), list) else []:
            if isinstance(v, str):
                out.append(v)
    return out


def temp_defs(code: str, lines: list[int]) -> dict[str, str]:
    """``name -> expression`` for single-name assignments on ``lines`` of ``code`` (the
    setup temporaries a rewrite keeps before the selection)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    wanted = set(lines)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno in wanted and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                out[t.id] = ast.unparse(node.value)
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Call):
                for i, el in enumerate(t.elts):
                    if isinstance(el, (ast.Name, ast.Attribute)) and _dotted(el):
                        out[_dotted(el)] = f"({ast.unparse(node.value)})[{i}]"
    return out


# -- symbolic shapes and dtypes ---------------------------------------------------------------


@dataclass
class M:
    """Abstract value: a tensor (symbolic shape, dtype term), a Python number, ..."""

    kind: str
    shape: list | None = None
    dtype: Any = None
    cat: str | None = None
    ival: Any = None
    fval: float | None = None
    fact: dict | None = None
    name: str | None = None
    items: list | None = None
    owner: Any = None

    @property
    def rank(self) -> int:
        return len(self.shape)


def _num(cat, ival=None, fval=None) -> M:
    return M("num", cat=cat, ival=ival, fval=fval)


_UNARY_FLOAT = {"sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
                "tanh", "sigmoid", "erf", "erfc", "erfinv", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                "acosh", "atanh", "reciprocal", "digamma", "lgamma", "logit", "gelu", "silu", "softplus", "mish",
                "arcsin", "arccos", "arctan", "arctanh", "arccosh", "arcsinh"}
_UNARY_SAME = {"abs", "neg", "negative", "relu", "sign", "sgn", "floor", "ceil", "round", "trunc", "frac", "clone",
               "detach", "contiguous", "nan_to_num", "square", "positive", "leaky_relu", "hardtanh", "relu6",
               "elu", "selu", "celu", "hardswish", "hardsigmoid", "tril", "triu", "fix"}
_UNARY_BOOL = {"isnan", "isinf", "isfinite", "isposinf", "isneginf", "logical_not", "signbit", "isreal"}
_BINARY = {"add": "+", "sub": "-", "subtract": "-", "mul": "*", "multiply": "*", "div": "/", "divide": "/",
           "true_divide": "/", "floor_divide": "//", "remainder": "%", "fmod": "%", "pow": "**",
           "maximum": "max", "minimum": "min", "atan2": "atan2", "hypot": "atan2", "float_power": "**",
           "xlogy": "*", "copysign": "*"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "greater": ">", "less": "<",
            "greater_equal": ">=", "less_equal": "<=", "not_equal": "!=", "logical_and": "and",
            "logical_or": "or", "logical_xor": "xor", "isclose": "==", "bitwise_and": "&", "bitwise_or": "|"}
_REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "prod", "any", "all", "norm", "std", "var", "nansum",
           "nanmean", "argmax", "argmin", "count_nonzero", "logsumexp"}
_SHAPE_SAME_DTYPE = {"reshape", "view", "transpose", "permute", "t", "unsqueeze", "squeeze", "flatten", "expand",
                     "swapaxes", "movedim", "mT", "T"}
_CAST = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "long": "int64",
         "int": "int32", "short": "int16", "bool": "bool", "byte": "uint8", "char": "int8"}
_NAMESPACES = {"torch": "torch", "torch.nn.functional": "F", "math": "math", "builtins": "builtins",
               "torch.special": "torch", "torch.linalg": "torch"}


class ShapeEval:
    """Evaluate an expression (Python AST) to an abstract value, collecting the
    preconditions (``pre``) whose failure makes some op raise."""

    def __init__(self, facts: dict, defs: dict[str, str], tier: str, *, strict_dtypes: bool = False):
        self.facts = facts.get("names", {}) if facts else {}
        self.self_modules = facts.get("self", {}) if facts else {}
        self.defs = defs
        self.tier = tier            # "general" | "equal-sizes" | "observed"
        self.strict_dtypes = strict_dtypes
        self.pre: list[tuple[Any, str]] = []
        self.assume: list[tuple[Any, str]] = []
        self.leaves: dict[str, M] = {}
        self.sym_dims: list[tuple[Any, int, str]] = []  # (var, observed, leaf)
        self.state_dims: dict[int, str] = {}             # size -> a module-state dim of that size
        self.depth = 0

    # leaves -----------------------------------------------------------------------------
    def leaf(self, dotted: str) -> M:
        if dotted in self.leaves:
            return self.leaves[dotted]
        f = self.facts.get(dotted)
        if f is None and dotted.startswith("self.") and dotted.count(".") == 1:
            f = self.self_modules.get(dotted.split(".")[1])
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
            dt = z3.Const(f"{dotted}.dtype", DT)
            obs = f["dtype"]
            if obs not in DTC:
                raise Unsupported(f"`{dotted}` has dtype {obs}, outside the encoded dtypes")
            if self.strict_dtypes or obs == "bool":
                self.assume.append((dt == DTC[obs], f"`{dotted}` is a {obs} tensor (observed)"))
            elif obs in FLOATS:
                self.assume.append((is_float(dt), f"`{dotted}` is a floating-point tensor (observed {obs}; any floating dtype)"))
            else:
                self.assume.append((is_int(dt), f"`{dotted}` is an integer tensor (observed {obs}; any integer dtype)"))
            return M("tensor", shape=dims, dtype=dt, name=dotted, fact=f)
        if k == "num":
            cat = f["cat"]
            if cat == "int":
                if dotted.startswith("self."):
                    return _num("int", z3.IntVal(f["value"]))
                return _num("int", z3.Int(dotted))
            if cat == "float":
                val = f["value"] if isinstance(f["value"], float) else None
                return _num("float", fval=val if dotted.startswith("self.") or dotted.isupper() else None)
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
        return meth(node)

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
                return _num("float")
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
            return _num("int" if v.cat == "bool" else v.cat, fval=-v.fval if v.fval is not None and isinstance(node.op, ast.USub) else None)
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
        n = z3.IntVal(1)
        for d in v.shape:
            n = n * d
        self.pre.append((n == 1, f"bool() of `{what}` needs exactly one element"))

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

    def binary(self, op: str, a: M, b: M, what: str) -> M:
        if a.kind == "num" and b.kind == "num":
            if a.cat == "float" or b.cat == "float" or op == "/":
                return _num("float")
            if op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                return _num("bool")
            if a.cat == b.cat == "int" and a.ival is not None and b.ival is not None and op in ("+", "-", "*"):
                return _num("int", {"+": a.ival + b.ival, "-": a.ival - b.ival, "*": a.ival * b.ival}[op])
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
        if op in ("//", "%"):
            self.pre.append((is_float(rt), f"integer `{op}` raises on a zero divisor ({what}); not value-modelled"))
        if op == "**" and not (b.kind == "num" and b.cat in ("int", "float")):
            self.pre.append((is_float(rt), f"integer `**` with a tensor exponent may raise on negative exponents ({what})"))
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
        return self.binary(op, a, b, ast.unparse(node))

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
        self.eval(node.test)
        a, b = self.eval(node.body), self.eval(node.orelse)
        if a.kind == b.kind == "num":
            return _num(a.cat if a.cat == b.cat else "float")
        raise Unsupported("a conditional expression over tensors")

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
            if isinstance(p, ast.Constant) and isinstance(p.value, int) or (
                    isinstance(p, ast.UnaryOp) and isinstance(p.op, ast.USub) and isinstance(p.operand, ast.Constant)):
                i = ast.literal_eval(p)
                self.pre.append((z3.And(-size <= i, i < size), f"index {i} within size in `{ast.unparse(node)}`"))
                dim += 1
                continue
            if isinstance(p, ast.Slice) and p.step is None:
                def bound(e, default):
                    if e is None:
                        return default
                    v = ast.literal_eval(e) if isinstance(e, (ast.Constant, ast.UnaryOp)) else None
                    if not isinstance(v, int):
                        raise Unsupported(f"slice bound `{ast.unparse(e)}`")
                    z = z3.IntVal(v)
                    return z3.If(z < 0, z3.If(z + size < 0, 0, z + size), z3.If(z > size, size, z))
                lo, hi = bound(p.lower, z3.IntVal(0)), bound(p.upper, size)
                out.append(z3.If(hi > lo, hi - lo, 0))
                dim += 1
                continue
            raise Unsupported(f"index `{ast.unparse(p)}` (tensor or computed indices are not modelled)")
        out.extend(base.shape[dim:])
        return M("tensor", shape=out, dtype=base.dtype)

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
            return self.module_call(func, args, kwargs, what)
        if func.kind == "callable":
            q = func.name
            if q.startswith("builtins."):
                return self.call(q.split(".", 1)[1], args, kwargs, what, ns="builtins")
            raise Unsupported(f"call of `{q}`, whose effect and result are not modelled")
        raise Unsupported(f"call of a {func.kind}")

    def module_call(self, mod: M, args, kwargs, what) -> M:
        f = mod.fact
        t = f["type"]
        if not args or args[0].kind != "tensor":
            raise Unsupported(f"{t} called without a tensor")
        x = args[0]
        if t in ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Identity", "LeakyReLU", "ELU", "Softplus", "Mish",
                 "Hardtanh", "Hardswish", "Dropout"):
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
        if t == "Linear":
            w = f.get("weight")
            if x.rank == 0:
                self.pre.append((z3.BoolVal(False), f"{t} of a 0-dim tensor raises ({what})"))
                return M("tensor", shape=[], dtype=x.dtype)
            self.pre.append((x.shape[-1] == f["in_features"], f"last size is in_features={f['in_features']} in `{what}`"))
            if w:
                self.pre.append((x.dtype == DTC[w["dtype"]], f"input dtype equals the weight's ({w['dtype']}) in `{what}`"))
            return M("tensor", shape=list(x.shape[:-1]) + [z3.IntVal(f["out_features"])],
                     dtype=DTC[w["dtype"]] if w else x.dtype)
        if t in ("LayerNorm", "RMSNorm"):
            ns = f.get("normalized_shape") or []
            for i, n in enumerate(reversed(ns)):
                if i < x.rank:
                    self.pre.append((x.shape[-1 - i] == n, f"trailing sizes match normalized_shape in `{what}`"))
            self.pre.append((is_float(x.dtype), f"{t} needs a floating input ({what})"))
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
        raise Unsupported(f"submodule `{mod.name}` ({t}) has no shape transfer function")

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
        if ns == "math":
            return _num("float")
        if ns == "builtins":
            if name in ("abs", "min", "max") and all(a.kind == "num" for a in args):
                return _num("float" if any(a.cat == "float" for a in args) else "int")
            if name == "float":
                return _num("float")
            if name == "int":
                return _num("int")
            if name == "len" and args and args[0].kind == "tensor":
                if args[0].rank == 0:
                    self.pre.append((z3.BoolVal(False), f"len() of a 0-dim tensor raises ({what})"))
                    return _num("int")
                return _num("int", args[0].shape[0])
            raise Unsupported(f"builtin `{name}`")
        if name == "finfo":
            d = args[0] if args else kwargs.get("type")
            if d is None or d.kind != "dtype" or d.dtype is None:
                raise Unsupported("torch.finfo of an unknown dtype")
            self.pre.append((is_float(d.dtype), f"torch.finfo needs a floating dtype ({what})"))
            return M("finfo")
        if name == "tensor" and not method and args and args[0].kind == "num":
            d = kwargs.get("dtype")
            dt = d.dtype if d is not None and d.kind == "dtype" else DTC[DEFAULT_FOR_CAT[args[0].cat]]
            return M("tensor", shape=[], dtype=dt)
        x = args[0] if args else None
        if x is None or x.kind != "tensor":
            if name in _COMPARE or name in _BINARY:
                pass
            elif x is not None and x.kind == "seq" and name in ("cat", "concat", "concatenate", "stack"):
                pass
            else:
                raise Unsupported(f"`{name}` on a {x.kind if x else 'missing argument'}")
        if name in _UNARY_FLOAT:
            return M("tensor", shape=list(x.shape), dtype=z3.If(is_float(x.dtype), x.dtype, DTC["float32"]))
        if name in _UNARY_SAME:
            if name in ("neg", "negative"):
                self.pre.append((x.dtype != DTC["bool"], f"negating a bool tensor raises ({what})"))
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
        if name in _UNARY_BOOL:
            return M("tensor", shape=list(x.shape), dtype=DTC["bool"])
        if name == "clamp" or name == "clip":
            lo = kwargs.get("min", args[1] if len(args) > 1 else None)
            hi = kwargs.get("max", args[2] if len(args) > 2 else None)
            ops = [x] + [v for v in (lo, hi) if v is not None and v.kind != "none"]
            shape = self.broadcast([v.shape if v.kind == "tensor" else [] for v in ops], what)
            self.pre.append((z3.BoolVal(len(ops) > 1), f"clamp needs min or max ({what})"))
            return M("tensor", shape=shape, dtype=self.result_type(ops))
        if name in _BINARY:
            other = kwargs.get("other", args[1] if len(args) > 1 else None)
            if other is None:
                other = kwargs.get("exponent")
            if other is None:
                raise Unsupported(f"`{name}` without a second operand")
            return self.binary(_BINARY[name], x, other, what)
        if name in _COMPARE:
            other = kwargs.get("other", args[1] if len(args) > 1 else None)
            return self.binary(_COMPARE[name], x, other, what)
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
        if name in _REDUCE:
            dim = self._dim_arg(args, kwargs, 1)
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
            if name in ("max", "min") and dim is not None:
                raise Unsupported(f"`{name}(dim)` returns (values, indices)")
            if dim is None:
                if name in ("max", "min", "amax", "amin", "argmax", "argmin"):
                    n = z3.IntVal(1)
                    for d in x.shape:
                        n = n * d
                    self.pre.append((n > 0, f"`{name}` of an empty tensor raises ({what})"))
                return M("tensor", shape=[], dtype=dt)
            dims = [dim] if isinstance(dim, int) else dim
            nd = {self._norm_dim(d, x.rank, what) for d in dims}
            shape = [(z3.IntVal(1) if i in nd else s) for i, s in enumerate(x.shape) if keep or i not in nd]
            return M("tensor", shape=shape, dtype=dt)
        if name in ("softmax", "log_softmax"):
            d = self._dim_arg(args, kwargs, 1)
            if d is None:
                raise Unsupported("softmax without dim")
            self._norm_dim(d, x.rank, what)
            self.pre.append((is_float(x.dtype), f"softmax of an integer tensor raises ({what})"))
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
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
            mask, val = args[1], args[2]
            self.pre.append((mask.dtype == DTC["bool"], f"masked_fill needs a bool mask ({what})"))
            shape = self.broadcast([x.shape, mask.shape], what)
            self.pre.append((z3.And(*[a == b for a, b in zip(shape, x.shape)]) if len(shape) == x.rank else z3.BoolVal(False),
                             f"the mask broadcasts to the tensor's shape ({what})"))
            return M("tensor", shape=list(x.shape), dtype=x.dtype)
        if name in ("cat", "concat", "concatenate", "stack"):
            seq = x if x.kind == "seq" else None
            if seq is None or not seq.items or any(t.kind != "tensor" for t in seq.items):
                raise Unsupported(f"`{name}` of something other than a literal list of tensors")
            ts = seq.items
            d = self._dim_arg(args, kwargs, 1) or 0
            r0 = ts[0].rank
            if name == "stack":
                d = self._norm_dim(d, r0 + 1, what)
                for t in ts[1:]:
                    if t.rank != r0:
                        self.pre.append((z3.BoolVal(False), f"stack of tensors of different ranks ({what})"))
                    else:
                        self.pre.append((z3.And(*[a == b for a, b in zip(ts[0].shape, t.shape)]) if r0 else z3.BoolVal(True),
                                         f"stack needs equal shapes ({what})"))
                shape = list(ts[0].shape[:d]) + [z3.IntVal(len(ts))] + list(ts[0].shape[d:])
            else:
                if r0 == 0:
                    self.pre.append((z3.BoolVal(False), f"cat of 0-dim tensors raises ({what})"))
                    return M("tensor", shape=[], dtype=ts[0].dtype)
                d = self._norm_dim(d, r0, what)
                total = ts[0].shape[d]
                for t in ts[1:]:
                    if t.rank != r0:
                        self.pre.append((z3.BoolVal(False), f"cat of tensors of different ranks ({what})"))
                        continue
                    self.pre.append((z3.And(*[a == b for i, (a, b) in enumerate(zip(ts[0].shape, t.shape)) if i != d] or [z3.BoolVal(True)]),
                                     f"cat needs equal sizes outside dim {d} ({what})"))
                    total = total + t.shape[d]
                shape = list(ts[0].shape)
                shape[d] = total
            return M("tensor", shape=shape, dtype=self.result_type(ts))
        raise Unsupported(f"`{name}` has no transfer function")

    def shape_op(self, name, x: M, args, kwargs, what="") -> M:
        r = x.rank
        s = list(x.shape)
        if name in ("t",):
            if r > 2:
                self.pre.append((z3.BoolVal(False), f".t() of a tensor with more than 2 dims raises ({what})"))
            return M("tensor", shape=s[::-1], dtype=x.dtype)
        if name == "mT":
            return M("tensor", shape=s[:-2] + s[-2:][::-1], dtype=x.dtype)
        if name in ("transpose", "swapaxes"):
            a, b = self._dim_arg(args, kwargs, 0, "dim0"), self._dim_arg(args, kwargs, 1, "dim1")
            a, b = self._norm_dim(a, r, what), self._norm_dim(b, r, what)
            if r:
                s[a], s[b] = s[b], s[a]
            return M("tensor", shape=s, dtype=x.dtype)
        if name == "permute":
            dims = [self._dim_arg([a], {}, 0) for a in args] if len(args) != 1 or args[0].kind != "seq" else \
                self._dim_arg(args, {}, 0)
            if sorted(d % max(r, 1) for d in dims) != list(range(r)):
                self.pre.append((z3.BoolVal(False), f"permute dims are not a permutation ({what})"))
                return M("tensor", shape=s, dtype=x.dtype)
            return M("tensor", shape=[s[d % r] for d in dims], dtype=x.dtype)
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
            numel = z3.IntVal(1)
            for d in s:
                numel = numel * d
            if name == "expand":
                if minus is not None:
                    raise Unsupported("expand(-1)")
                sh = self.broadcast([s, out], what)
                self.pre.append((z3.And(*[a == b for a, b in zip(sh, out)]), f"expand sizes ({what})"))
                return M("tensor", shape=out, dtype=x.dtype)
            known = z3.IntVal(1)
            for d in out:
                if d is not None:
                    known = known * d
            if minus is None:
                self.pre.append((known == numel, f"`{name}` keeps the number of elements ({what})"))
            else:
                q = z3.Int(f"_{name}_inferred_{len(self.pre)}")
                self.pre.append((z3.And(known > 0, q * known == numel), f"`{name}` sizes divide the number of elements ({what})"))
                out[minus] = q
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


@dataclass
class V:
    """An element value: FP term (float dtypes), bit-vector (ints), Bool (bool)."""

    term: Any
    dtype: str          # "float32"..., "int64"..., "bool", or "pyfloat"/"pyint"/"pybool"
    back: list = field(default_factory=list)   # [(child V, fn(g) -> child's gradient)]
    leaf: str | None = None
    key: str = ""


def fp_sort(dtype: str):
    e, s = FP_FORMAT[dtype]
    return z3.FPSort(e, s)


RNE = z3.RNE()


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
                return z3.fpFPToFP(RNE, t, srt)
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
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp)
            out.append(self.compare(type(op).__name__, left, right))
            left = right
        return V(z3.And(*out) if len(out) > 1 else out[0], "bool" if not all(v.dtype.startswith("py") for v in (left,)) else "pybool")

    def compare(self, op: str, a: V, b: V):
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
            if x.dtype not in FP_FORMAT:
                return V(z3.BoolVal(last == "isfinite"), "bool")
            t = x.term
            return V({"isnan": lambda: z3.fpIsNaN(t), "isinf": lambda: z3.fpIsInf(t),
                      "isfinite": lambda: z3.Not(z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t))),
                      "isposinf": lambda: z3.And(z3.fpIsInf(t), z3.fpIsPositive(t)),
                      "isneginf": lambda: z3.And(z3.fpIsInf(t), z3.fpIsNegative(t))}[last](), "bool")
        if last in ("eq", "ne", "lt", "le", "gt", "ge"):
            a, b = self.eval(args[0]), self.eval(args[1])
            op = {"eq": "Eq", "ne": "NotEq", "lt": "Lt", "le": "LtE", "gt": "Gt", "ge": "GtE"}[last]
            return V(self.compare(op, a, b), "bool")
        if last == "pow" and len(args) == 2:
            return self.arith("Pow", self.eval(args[0]), self.eval(args[1]), node)
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
                    "exp", "tanh", "sigmoid"):
            return self.unary(last, self.eval(args[0]), node)
        if last in ("clamp", "clip"):
            x = self.eval(args[0])
            lo = kw.get("min", args[1] if len(args) > 1 else None)
            hi = kw.get("max", args[2] if len(args) > 2 else None)
            if x.dtype not in FP_FORMAT:
                raise Unsupported("clamp of a non-float")
            t = x.term
            inside = []
            for bound, is_lo in ((lo, True), (hi, False)):
                if bound is None:
                    continue
                bv = self.to(self.eval(bound), x.dtype)
                if is_lo:
                    inside.append(z3.fpGEQ(x.term, bv))
                    t = z3.If(z3.fpIsNaN(t), t, z3.If(z3.fpLT(t, bv), bv, t))
                else:
                    inside.append(z3.fpLEQ(x.term, bv))
                    t = z3.If(z3.fpIsNaN(t), t, z3.If(z3.fpGT(t, bv), bv, t))
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

    def unary(self, name: str, x: V, node) -> V:
        if x.dtype not in FP_FORMAT:
            if name in ("abs", "neg") and x.dtype in INT_BITS:
                return V(z3.If(x.term < 0, -x.term, x.term) if name == "abs" else -x.term, x.dtype)
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


@dataclass
class Ctx:
    rule: str
    facts: dict
    defs: dict
    code: str | None = None          # the mended candidate
    before: str | None = None        # the version before the rewrite
    timeout_ms: int = TIMEOUT_MS
    obligations: list = field(default_factory=list)


def _assumption_texts(assume) -> list[str]:
    out = []
    for _, text in assume:
        if text and text not in out:
            out.append(text)
    return out


def _decide(kind: str, tiers: list[tuple[str, Callable[[], tuple[list, list[str], Any]]]], ctx: Ctx,
            arithmetic: str, describe=None, overapprox: Callable[[], list] | None = None) -> dict:
    """Try each tier (most general first). Each tier builds (assertions, assumptions, extra);
    the first unsat proves; sat at the last tier refutes (unknown when the model relies on an
    over-approximation); unknown anywhere stops with unknown."""
    last = None
    total = 0.0
    for tier_name, build in tiers:
        assertions, assumptions, extra = build()
        comments = [f"mend obligation: {kind} ({ctx.rule})", f"tier: {tier_name}"] + \
            [f"assumption: {a}" for a in assumptions] + [f"arithmetic: {arithmetic}",
                                                         "query: the negated claim; unsat = proved"]
        solved = solve(assertions, timeout_ms=ctx.timeout_ms, comments=comments)
        total += solved.seconds
        last = (solved, assumptions, tier_name, extra)
        if solved.status != "sat":
            break
    solved, assumptions, tier_name, extra = last
    result = result_of(solved.status)
    out = {"result": result, "status": solved.status, "smtlib": solved.smtlib, "assumptions": assumptions,
           "tier": tier_name, "arithmetic": arithmetic, "seconds": round(total, 4), "counterexample": None,
           "reason": None}
    if solved.status == "unknown":
        out["reason"] = f"solver returned unknown ({solved.reason_unknown})" + (
            f" within {ctx.timeout_ms} ms" if "timeout" in str(solved.reason_unknown) or "canceled" in str(solved.reason_unknown) else "")
    if solved.status == "sat":
        cex = describe(solved.model, extra) if describe else _model_text(solved.model)
        over = overapprox() if overapprox else []
        if over:
            out["result"] = "unknown"
            out["reason"] = ("a counterexample exists only in the over-approximation of "
                             + ", ".join(f"`{o}`" for o in over[:3]) + " (not shown to be realisable)")
        out["counterexample"] = cex
    return out


def _model_text(model, limit: int = 8) -> str:
    if model is None:
        return ""
    parts = []
    for d in model.decls():
        if d.arity() != 0:
            continue
        v = model[d]
        txt = _fmt_value(v)
        if txt is None:
            continue
        parts.append(f"{d.name()} = {txt}")
    parts.sort(key=lambda p: (p.startswith("_"), p.startswith("<"), p))
    return ", ".join(parts[:limit])


def _fmt_value(v) -> str | None:
    try:
        if z3.is_fp_value(v):
            if v.isNaN():
                return "nan"
            if v.isInf():
                return "-inf" if v.isNegative() else "inf"
            if v.isZero():
                return "-0.0" if v.isNegative() else "0.0"
            r = z3.simplify(z3.fpToReal(v))
            return repr(float(r.numerator_as_long()) / float(r.denominator_as_long()))
        if z3.is_int_value(v):
            return str(v.as_long())
        if z3.is_bv_value(v):
            return str(v.as_signed_long())
        if z3.is_true(v) or z3.is_false(v):
            return str(z3.is_true(v))
        if v.sort() == DT:
            return str(v)
    except Exception:  # noqa: BLE001
        return str(v)
    return None


def _shape_tiers(ctx: Ctx, build: Callable[[ShapeEval], tuple[list, Any]]) -> list:
    """Tiers for shape/dtype claims: general (independent sizes, dtype categories), equal
    sizes (sizes equal on the example stay equal), observed (the example's sizes and dtypes)."""
    def make(tier: str):
        def run():
            ev = ShapeEval(ctx.facts, ctx.defs, tier, strict_dtypes=(tier == "observed"))
            claim_neg, extra = build(ev)
            assertions = [a for a, _ in ev.assume]
            texts = _assumption_texts(ev.assume)
            if tier in ("equal-sizes", "observed") and ev.sym_dims:
                if tier == "observed":
                    assertions += [d == n for d, n, _ in ev.sym_dims]
                    texts.append("sizes are the example's: " + ", ".join(f"{d}={n}" for d, n, _ in ev.sym_dims))
                else:
                    by: dict[int, list] = {}
                    for d, n, _ in ev.sym_dims:
                        by.setdefault(n, []).append(d)
                    eqs = [(g[0], x) for g in by.values() for x in g[1:]]
                    assertions += [a == b for a, b in eqs]
                    if eqs:
                        texts.append("sizes equal on the example are equal: " + ", ".join(f"{a} = {b}" for a, b in eqs))
                    fixed = [(g[0], n) for n, g in by.items() if n in ev.state_dims]
                    assertions += [a == n for a, n in fixed]
                    if fixed:
                        texts.append("sizes equal to a module-state size on the example are that size: " + ", ".join(
                            f"{a} = {n} ({ev.state_dims[n]})" for a, n in fixed))
            assertions.append(claim_neg)
            return assertions, texts, (ev, extra)
        return run
    return [("general", make("general")), ("equal-sizes", make("equal-sizes")), ("observed", make("observed"))]


def _describe_shape(model, extra) -> str:
    return _model_text(model)


def _numel(shape):
    n = z3.IntVal(1)
    for d in shape:
        n = n * d
    return n


def _same_shape_neg(a: M, b: M):
    if a.kind != "tensor" or b.kind != "tensor":
        if a.kind == b.kind == "num":
            return z3.BoolVal(False)
        raise Unsupported(f"shapes of a {a.kind} and a {b.kind}")
    if a.rank != b.rank:
        return z3.BoolVal(True)
    return z3.Not(z3.And(*[x == y for x, y in zip(a.shape, b.shape)])) if a.rank else z3.BoolVal(False)


def ob_same_shape(ob: dict, ctx: Ctx) -> dict:
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        ok = z3.And(*[p for p, _ in ev.pre]) if ev.pre else z3.BoolVal(True)
        # where both sides evaluate (the original's taken side did), their shapes differ
        return z3.And(ok, _same_shape_neg(a, b)), (a, b)
    return _decide("same-shape", _shape_tiers(ctx, build), ctx, "linear/nonlinear integer arithmetic over symbolic sizes")


def ob_same_dtype(ob: dict, ctx: Ctx) -> dict:
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        da = a.dtype if a.kind == "tensor" else DTC[DEFAULT_FOR_CAT[a.cat]] if a.kind == "num" else None
        db = b.dtype if b.kind == "tensor" else DTC[DEFAULT_FOR_CAT[b.cat]] if b.kind == "num" else None
        if da is None or db is None:
            raise Unsupported("dtype of a non-tensor side")
        return da != db, (a, b)
    return _decide("same-dtype", _shape_tiers(ctx, build), ctx,
                   "PyTorch type promotion (torch.promote_types table, ATen combine_categories) over a DType datatype")


def ob_cannot_raise(ob: dict, ctx: Ctx) -> dict:
    pres: list = []

    def build(ev: ShapeEval):
        ev.eval(_expr(ob["expr"]))
        pres[:] = [t for _, t in ev.pre]
        return z3.Not(z3.And(*[p for p, _ in ev.pre])) if ev.pre else z3.BoolVal(False), None

    def describe(model, extra):
        ev = extra[0]
        failing = [t for p, t in ev.pre if z3.is_false(model.eval(p, model_completion=True))]
        return "; ".join(failing[:3]) + (" with " + _model_text(model) if _model_text(model) else "")
    return _decide("untaken-side-cannot-raise", _shape_tiers(ctx, build), ctx,
                   "preconditions of each op (broadcasting, matmul/linear sizes, dims, dtypes) over symbolic sizes",
                   describe)


def ob_single_element(ob: dict, ctx: Ctx) -> dict:
    def build(ev: ShapeEval):
        p = ev.eval(_expr(ob["pred"]))
        conds = [q for q, t in ev.pre if t and t.startswith("bool() of")]
        if p.kind == "num":
            if not conds:
                raise Unsupported("the predicate is a Python value")
            return z3.Or(*[z3.Not(c) for c in conds]), p
        return z3.Or(_numel(p.shape) != 1, *[z3.Not(c) for c in conds]), p
    return _decide("single-element-predicate", _shape_tiers(ctx, build), ctx, "nonlinear integer arithmetic (numel)")


def ob_bool_predicate(ob: dict, ctx: Ctx) -> dict:
    def build(ev: ShapeEval):
        p = ev.eval(_expr(ob.get("pred") or ob.get("expr")))
        if p.kind != "tensor":
            raise Unsupported("the predicate is not a tensor")
        return p.dtype != DTC["bool"], p
    return _decide(ob["kind"], _shape_tiers(ctx, build), ctx, "PyTorch dtypes (DType datatype)")


def _value_tiers(ctx: Ctx, build: Callable[[ValueEval, bool], tuple[list, list]]):
    def make(finite: bool):
        def run():
            ev = ValueEval(ctx.facts, ctx.defs)
            claim, extra = build(ev, finite)
            texts = _assumption_texts(ev.assume)
            if finite:
                texts.append("leaf values are finite (no NaN/inf reaches the untaken side)")
            return [a for a, _ in ev.assume] + claim, texts, (ev, extra)
        return run
    return [("every-value", make(False)), ("finite-leaves", make(True))]


def _fp_arith(ctx: Ctx) -> str:
    dts = sorted({f["dtype"] for f in ctx.facts.get("names", {}).values() if f.get("kind") == "tensor"} & set(FP_FORMAT))
    fmts = ", ".join(f"{d} (_ FloatingPoint {FP_FORMAT[d][0]} {FP_FORMAT[d][1]})" for d in dts) or "none"
    return (f"IEEE 754 in Z3's FloatingPoint theory, RNE: {fmts}; each op rounded in the tensor's dtype "
            "(PyTorch's CPU kernels compute float16/bfloat16 in float32 and round once); never reals")


def ob_finite_gradient(ob: dict, ctx: Ctx) -> dict:
    guard = ob.get("guard")

    def build(ev: ValueEval, finite: bool):
        side = ev.eval(_expr(ob["expr"]))
        if side.dtype not in FP_FORMAT:
            raise Unsupported("the side is not a floating tensor")
        if guard is None:
            raise Unsupported("no guard recorded")
        taken = ev.truth(ev.eval(_expr(guard)))
        s = fp_sort(side.dtype)
        g = z3.FP("upstream_grad", s)
        grads = ev.grads(side, g)
        if not grads:
            raise Unsupported("no floating leaf under the op")
        bad = z3.Or(*[z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)) for t in grads.values()])
        claim = [z3.Not(taken), z3.fpIsZero(g), bad]
        if finite:
            for name, leaf in ev.leaves.items():
                if leaf.dtype in FP_FORMAT and leaf.leaf:
                    claim.append(z3.Not(z3.Or(z3.fpIsNaN(leaf.term), z3.fpIsInf(leaf.term))))
        return claim, grads
    out = _decide("finite-gradient", _value_tiers(ctx, build), ctx,
                  _fp_arith(ctx) + "; PyTorch backward formulas, zero upstream gradient on the untaken side",
                  overapprox=lambda: [])
    if out["result"] == "refuted":
        out["use"] = "inference-only"
    return out


def ob_where_equals_ite(ob: dict, ctx: Ctx) -> dict:
    """The selection: ``if p: y = a else: y = b`` vs ``y = torch.where(p', a, b)``, element by
    element in the target dtype, with p' the rewritten predicate (logical ops)."""
    def build(ev: ValueEval, finite: bool):
        pred = _expr(ob["pred"])
        p_orig = ev.truth(ev.eval(pred))
        p_new = ev.truth(ev.eval(_to_logical(pred)))
        dts = [_dtype_of(ev, ob[k], ctx) for k in ("lhs", "rhs")]
        if None in dts:
            raise Unsupported("the dtype of a side is not known")
        a = z3.FP("a[i]", fp_sort(dts[0])) if dts[0] in FP_FORMAT else z3.Const("a[i]", _sort_of(dts[0]))
        b = z3.FP("b[i]", fp_sort(dts[1])) if dts[1] in FP_FORMAT else z3.Const("b[i]", _sort_of(dts[1]))
        if dts[0] != dts[1]:
            return [z3.BoolVal(True)], dts     # the selection changes the result's dtype
        original = z3.If(p_orig, a, b)
        mended = z3.If(p_new, a, b)   # where: 0-dim condition broadcast, same dtype: no conversion
        return [original != mended], dts
    def describe(model, extra):
        dts = extra[1]
        if dts[0] != dts[1]:
            return (f"the sides are {dts[0]} and {dts[1]}: torch.where gives {promote_py(dts[0], dts[1])} "
                    "on both outcomes, the original keeps each side's dtype")
        return _model_text(model)
    return _decide("where-equals-ite", _value_tiers(ctx, build)[:1], ctx,
                   _fp_arith(ctx) + "; structural equality (=): bit-identical up to NaN payload", describe)


def _sort_of(dtype: str):
    if dtype in FP_FORMAT:
        return fp_sort(dtype)
    if dtype in INT_BITS:
        return z3.BitVecSort(INT_BITS[dtype])
    return z3.BoolSort()


def _dtype_of(ev: ValueEval, text: str, ctx: Ctx) -> str | None:
    se = ShapeEval(ctx.facts, ctx.defs, "observed", strict_dtypes=True)
    try:
        m = se.eval(_expr(text))
    except Unsupported:
        return None
    if m.kind != "tensor":
        return None
    s = z3.Solver()
    s.add(*[a for a, _ in se.assume])
    if s.check() != z3.sat:
        return None
    return _as_name(s.model().eval(m.dtype, model_completion=True))


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


def _to_logical(node: ast.AST) -> ast.AST:
    import copy

    return ast.fix_missing_locations(_Logical().visit(copy.deepcopy(node)))


def ob_bool_operand_truth(ob: dict, ctx: Ctx) -> dict:
    def build(ev: ValueEval, finite: bool):
        x = ev.eval(_expr(ob.get("expr") or ob.get("pred")))
        py = ev.truth(x)
        if x.dtype in FP_FORMAT:
            torch_bool = z3.Not(z3.fpEQ(x.term, z3.FPVal(0.0, fp_sort(x.dtype))))
        elif x.dtype in INT_BITS:
            torch_bool = x.term != 0
        else:
            torch_bool = x.term
        return [py != torch_bool], None
    return _decide(ob["kind"], _value_tiers(ctx, build)[:1], ctx, _fp_arith(ctx) + "; truth = nonzero (NaN true)")


def ob_raises_iff(ob: dict, ctx: Ctx) -> dict:
    table = ob.get("restored")

    def build(ev: ValueEval, finite: bool):
        orig = ev.truth(ev.eval(_expr(ob["raises_when"])))
        holds = ev.truth(ev.eval(_expr(ob["asserts"])))
        mended = z3.Not(holds)           # _assert_async(t) raises iff not truth(t)
        exc_o, msg_o = z3.String("original.type"), z3.String("original.message")
        exc_t, msg_t = z3.String("restored.type"), z3.String("restored.message")
        claim = [exc_o == z3.StringVal(ob.get("exception", "")), msg_o == z3.StringVal(_msg(ob)),
                 exc_t == z3.StringVal(table[0] if table else ""), msg_t == z3.StringVal(table[1] if table else ""),
                 z3.Or(orig != mended, exc_o != exc_t, msg_o != msg_t)]
        return claim, table
    if table is None:
        return {"result": "unknown", "status": None, "smtlib": None, "assumptions": [], "arithmetic": None,
                "reason": f"the trap entry {ob.get('trap')} is not in the mended file", "counterexample": None,
                "seconds": 0.0, "tier": None}
    return _decide("raises-iff-original", _value_tiers(ctx, build)[:1], ctx,
                   _fp_arith(ctx) + "; integers as bit-vectors; reductions as uninterpreted values shared by both "
                   "conditions; exception type and message as strings from the raise and the mended trap table")


def _msg(ob: dict) -> str:
    m = ob.get("message")
    return m if isinstance(m, str) else json.dumps(ob.get("args"))


def _trap_entry(code: str, trap: str) -> tuple[str, str] | None:
    """(exception name, message) of ``_MEND_TRAPS.<key>`` in the mended file."""
    table, _, key = trap.partition(".")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == table for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and k.value == key and isinstance(v, ast.Lambda) \
                        and isinstance(v.body, ast.Call):
                    name = _dotted(v.body.func) or ""
                    args = v.body.args
                    if len(args) == 1 and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                        return name.rsplit(".", 1)[-1], args[0].value
                    return name.rsplit(".", 1)[-1], json.dumps([ast.literal_eval(a) for a in args]) if all(
                        isinstance(a, ast.Constant) for a in args) else ast.unparse(v.body)
    return None


def ob_condition_is_tensor(ob: dict, ctx: Ctx) -> dict:
    asserts = ob.get("asserts")
    if not asserts:
        return _unknown("no asserted condition recorded")

    def build(ev: ShapeEval):
        p = ev.eval(_expr(asserts))
        if p.kind != "tensor":
            return z3.BoolVal(True), p
        return _numel(p.shape) != 1, p
    return _decide("condition-is-tensor", _shape_tiers(ctx, build), ctx, "nonlinear integer arithmetic (numel)")


def _unknown(reason: str) -> dict:
    return {"result": "unknown", "status": None, "smtlib": None, "assumptions": [], "arithmetic": None,
            "reason": reason, "counterexample": None, "seconds": 0.0, "tier": None}


# protocol obligations: the runtimes' designs instantiated at the site ------------------------


def _protocol(kind: str, ctx: Ctx, build: Callable[[], list], assumptions: list[str], arithmetic: str) -> dict:
    return _decide(kind, [("protocol", lambda: (build(), assumptions, None))], ctx, arithmetic)


def ob_order_preserved(ob: dict, ctx: Ctx) -> dict:
    E = z3.DeclareSort("Effect")
    S = z3.SeqSort(E)
    out, buf, eager = z3.Const("out", S), z3.Const("buf", S), z3.Const("eager_out", S)
    e = z3.Const("site_effect", E)
    pre, post = z3.Const("before", S), z3.Const("after", S)

    def build():
        # eager: before ++ [e] ++ after; deferred: each capture appends, the scope exit replays
        eager_trace = z3.Concat(pre, z3.Unit(e), post)
        buf1 = z3.Concat(pre, z3.Unit(e))
        buf2 = z3.Concat(buf1, post)
        replayed = z3.Concat(out, buf2)
        return [eager == z3.Concat(out, eager_trace), replayed != eager]
    assumptions = [_ordered_effect_assumption(), "effects outside the deferred calls are not interleaved within the scope"]
    return _protocol("order-preserved", ctx, build, assumptions, "sequences of uninterpreted effects")


def _ordered_effect_assumption() -> str:
    from verifier.effects import capture_is_ordered

    ok, text = capture_is_ordered()
    return text


def ob_replayed_on_exception(ob: dict, ctx: Ctx) -> dict:
    E = z3.DeclareSort("Effect")
    S = z3.SeqSort(E)
    out, buf, shown = z3.Const("out", S), z3.Const("buf", S), z3.Const("eager_shown", S)
    e = z3.Const("effect_before_raise", E)

    def build():
        # invariant eager_shown = out ++ buf; each effect before the raise extends both; the
        # scope's finally replays buf when the exception passes: nothing captured is lost
        return [shown == z3.Concat(out, buf),
                z3.Not(z3.And(z3.Concat(shown, z3.Unit(e)) == z3.Concat(out, z3.Concat(buf, z3.Unit(e))),
                              z3.Concat(out, buf) == shown))]
    assumptions = [f"the scope that replays is active: {ob.get('requires', 'mend.runtime.install(model)')}",
                   "the replay runs in the scope's finally (mend.runtime.capture / install)"]
    return _protocol("replayed-on-exception", ctx, build, assumptions, "sequences of uninterpreted effects")


def ob_snapshot(ob: dict, ctx: Ctx) -> dict:
    F = z3.Float32()
    H = z3.ArraySort(z3.IntSort(), z3.ArraySort(z3.IntSort(), F))
    heap0 = z3.Const("heap0", H)
    src, snap, i, j = z3.Ints("src snap i j")
    v = z3.FP("v", F)
    names = ob.get("values") or []

    def build():
        h1 = z3.Store(heap0, snap, z3.Select(heap0, src))
        h2 = z3.Store(h1, src, z3.Store(z3.Select(h1, src), i, v))
        return [snap != src, z3.Select(z3.Select(h2, snap), j) != z3.Select(z3.Select(heap0, src), j)]
    from verifier.effects import capture_clones

    assumptions = [capture_clones()[1], "shown values: " + (", ".join(f"`{n}`" for n in names) or "none")]
    return _protocol("snapshot-before-mutation", ctx, build, assumptions,
                     "heap of storages (arrays), float32 elements, structural equality")


def ob_lazy_format(ob: dict, ctx: Ctx) -> dict:
    T = z3.DeclareSort("Value")
    render = z3.Function("render", T, z3.StringSort())
    at_call, snap = z3.Const("value_at_call", T), z3.Const("snapshot", T)

    def build():
        return [snap == at_call, render(snap) != render(at_call)]
    return _protocol("lazy-format-equals-fstring", ctx, build,
                     ["the lazy format renders the snapshot with the f-string's own format spec (mend.runtime.fmt)",
                      "formats: " + ", ".join(ob.get("formats", []))], "uninterpreted rendering of equal values")


def ob_once_per_process(ob: dict, ctx: Ctx) -> dict:
    Msg = z3.StringSort()
    seen = z3.Array("seen", Msg, z3.BoolSort())
    m = z3.String("message")

    def build():
        eager_emits = z3.Not(z3.Select(seen, m))
        replay_emits = z3.Not(z3.Select(seen, m))   # the replay calls the same lru_cache'd method
        return [eager_emits != replay_emits]
    return _protocol("once-per-process", ctx, build,
                     [f"the replay calls `{ob.get('method', 'warning_once')}` itself (its lru_cache holds `seen`)"],
                     "array of seen messages")


def ob_warning_identity(ob: dict, ctx: Ctx) -> dict:
    c, m = z3.String("category"), z3.String("message")

    def build():
        return [z3.Or(c != c, m != m)]
    return _protocol("warning-identity", ctx, build,
                     ["filename and line may differ (those of the mended source; documented)"], "strings")


def ob_same_result_when_passing(ob: dict, ctx: Ctx) -> dict:
    from verifier.effects import op_writes

    writes = op_writes("aten::_assert_async")
    T = z3.DeclareSort("Value")
    f = z3.Function("rest_of_forward", T, T)
    x = z3.Const("x", T)

    def build():
        # the assert returns nothing and writes nothing: the rest of the forward sees x unchanged
        x_after = x if not writes else z3.Const("x_after", T)
        return [f(x) != f(x_after)]
    return _protocol("same-result-when-passing", ctx, build,
                     [f"aten::_assert_async writes no argument (schema: {', '.join(writes) or 'no (a!) annotation'})"],
                     "uninterpreted rest of the forward")


def ob_first_failure(ob: dict, ctx: Ctx) -> dict:
    n = ob.get("checks_in_file")
    if n != 1:
        return _unknown(f"{n} checks in the mended file: which failure is reported first is measured, not proved")
    k = z3.Int("checks_in_file")

    def build():
        return [k == 1, z3.Not(k == 1)]   # one check: the first failure is the only one
    return _protocol("first-failure-wins", ctx, build, ["one torch._assert_async in the mended file"], "integers")


def ob_restore_at_boundary(ob: dict, ctx: Ctx) -> dict:
    entry, trap = ob.get("restored"), ob.get("trap")
    if not entry:
        return _unknown("the trap table entry is not in the mended file")
    key = z3.String("marker")
    tbl = z3.Function("table", z3.StringSort(), z3.StringSort())

    def build():
        return [tbl(key) == z3.StringVal(entry[0] + ": " + entry[1]), tbl(key) != z3.StringVal(entry[0] + ": " + entry[1])]
    return _protocol("restore-at-boundary", ctx, build,
                     [f"the caller calls the module mend.validation_runtime.install was applied to (marker {trap})"],
                     "strings")


def ob_state_unchanged(ob: dict, ctx: Ctx) -> dict:
    mods = ctx.facts.get("self", {}) if ctx.facts else {}
    impure = [f"self.{k}: {'; '.join(v.get('effects') or ['no effect model'])[:200]}" for k, v in mods.items()
              if v.get("kind") == "module" and not v.get("pure")]
    if impure:
        res = _unknown("submodules that may write state run in the same function: " + " | ".join(impure[:3]))
        return res
    screened = sorted({a for v in mods.values() for a in v.get("assumptions", [])})
    W = z3.SetSort(z3.StringSort())
    writes = z3.Const("writes_after_check", W)

    def build():
        return [writes == z3.EmptySet(z3.StringSort()), writes != z3.EmptySet(z3.StringSort())]
    return _protocol("state-unchanged-on-raise", ctx, build,
                     ["the function writes no state after the check (the rule's screen)",
                      "its submodules write no state: torch.nn modules by type and mode, others by screening "
                      "their forward (verifier/effects.py): " + (", ".join(sorted(mods)) or "none"),
                      "callers inlined into the same graph do not write module state after this call"]
                     + screened[:10],
                     "sets of written locations")


def ob_cpu_only(ob: dict, ctx: Ctx) -> dict:
    devs = sorted({f.get("device") for f in ctx.facts.get("names", {}).values() if f.get("kind") == "tensor"}) if ctx.facts else []
    if not devs:
        return _unknown("no tensor was observed at the check")
    cpu = z3.Bool("on_cpu")

    def build():
        return [cpu == z3.BoolVal(devs == ["cpu"]), z3.Not(cpu)]
    return _protocol("cpu-only", ctx, build, [f"tensors at the check are on {', '.join(devs)} (observed)"], "Booleans")


def ob_untaken_runs(ob: dict, ctx: Ctx) -> dict:
    call = ob.get("call", "")
    d = _dotted(_expr(call).func) if isinstance(_expr(call), ast.Call) else None
    f = (ctx.facts.get("names", {}).get(d) or ctx.facts.get("self", {}).get((d or "").split(".")[-1])) if d else None
    if not f or f.get("kind") != "module":
        return _unknown(f"no module was observed for `{d}`")
    if not f.get("pure"):
        return _unknown(f"`{d}` ({f.get('type')}) may write state: " + "; ".join(f.get("effects") or ["no effect model"])[:200])
    w = z3.Bool("call_writes_state")

    def build():
        return [w == z3.BoolVal(False), w]
    return _protocol("untaken-side-runs", ctx, build,
                     [f"`{d}` ({f.get('type')}, training={f.get('training')}) writes no state: torch.nn modules by "
                      "type and mode, others by screening their forward (verifier/effects.py)"]
                     + list(f.get("assumptions", []))[:10], "Booleans")


def ob_idempotent_move(ob: dict, ctx: Ctx) -> dict:
    Dev, Con = z3.DeclareSort("Device"), z3.DeclareSort("Contents")
    a_dev, a_val, d = z3.Const("a.device", Dev), z3.Const("a.contents", Con), z3.Const("d", Dev)

    def to(dev, val, target):
        return z3.If(dev == target, dev, target), val

    def build():
        d1, v1 = to(a_dev, a_val, d)
        d2, v2 = to(d1, v1, d)
        return [z3.Not(z3.And(d2 == d1, v2 == v1, v1 == a_val))]
    return _protocol("idempotent-device-move", ctx, build,
                     [f"`{ob.get('expr')}` is Tensor.to(device): returns the tensor itself when already there, "
                      "else a copy with equal contents"], "uninterpreted devices and contents")


def ob_paired_not_aliased(ob: dict, ctx: Ctx) -> dict:
    values = ob.get("values", [])
    targets = [v for v in values if v.startswith("self.")]
    writes = ob.get("inplace_writes", ["the mended file was not screened"])
    if writes:
        return {**_unknown("in-place writes could observe the alias: " + "; ".join(writes[:3]))}
    F = z3.Float32()
    A = z3.ArraySort(z3.IntSort(), F)
    v, buf_orig = z3.Const("v", A), z3.Const("buffer_alias", A)

    def build():
        # no write reaches v or the buffer afterwards: alias and copy hold the same elements forever
        return [buf_orig == v, z3.Not(v == buf_orig)]
    return _protocol("paired-call-value-not-aliased", ctx, build,
                     ["no in-place write to " + ", ".join(f"`{t}`" for t in targets) + " in the mended file",
                      "no other module writes these attributes"], "arrays of float32")


# predicated control flow as torch.cond (mend/rules/predicated_control_flow.py:_rewrite_cond) ----


def ob_cond_predicate(ob: dict, ctx: Ctx) -> dict:
    """torch.cond's predicate is a single-element bool tensor: never a Python bool (which
    torch.cond specialises on), never a float or multi-element tensor."""
    def build(ev: ShapeEval):
        p = ev.eval(_expr(ob["pred"]))
        if p.kind != "tensor":
            return z3.BoolVal(True), p      # a Python value would reach torch.cond
        return z3.Or(_numel(p.shape) != 1, p.dtype != DTC["bool"]), p

    def describe(model, extra):
        p = extra[1]
        return "the predicate is a Python value, not a tensor" if p.kind != "tensor" else _model_text(model)
    return _decide("cond-predicate", _shape_tiers(ctx, build), ctx,
                   "PyTorch dtypes (DType datatype) and nonlinear integer arithmetic (numel)", describe)


def ob_cond_branch_types(ob: dict, ctx: Ctx) -> dict:
    """The two branch outputs agree in structure (each one tensor) and dtype (PyTorch
    promotion rules), as torch.cond requires; shapes are a separate same-shape obligation."""
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        if a.kind != "tensor" or b.kind != "tensor":
            if {a.kind, b.kind} <= {"tensor", "num"}:
                return z3.BoolVal(True), (a, b)     # a Python number: torch.cond returns tensors only
            raise Unsupported(f"structure of a {a.kind} and a {b.kind}")
        return a.dtype != b.dtype, (a, b)

    def describe(model, extra):
        a, b = extra[1]
        if a.kind != "tensor" or b.kind != "tensor":
            return "a side is a Python number, not a tensor: the branch outputs differ in structure"
        return _model_text(model)
    return _decide("cond-branch-types", _shape_tiers(ctx, build), ctx,
                   "pytree structure (one tensor per name) and PyTorch type promotion (torch.promote_types table, "
                   "ATen combine_categories) over a DType datatype", describe)


def ob_cond_not_aliased(ob: dict, ctx: Ctx) -> dict:
    """No branch output is an input of the cond or a view of one (torch.cond rejects that,
    even in eager). Storages are an uninterpreted sort; a fresh value or a clone is a new
    storage; a clone replaces an alias only when nothing observes the lost aliasing."""
    values, treatment = ob.get("values", []), ob.get("treatment", [])
    if not values or len(values) != len(treatment):
        return _unknown("the branch values and their treatment are not recorded")
    observers = ob.get("observers", [])
    if "clone" in treatment and observers:
        return {**_unknown("the lost aliasing of a clone could be observed: " + "; ".join(observers[:3]))}
    if "clone" in treatment and "observers" not in ob:
        return _unknown("the code after the site was not screened for in-place writes and escapes")
    St = z3.DeclareSort("Storage")
    reads = sorted(names_in(values)) or ["input"]
    ins = [z3.Const(f"storage({n})", St) for n in reads]
    outs = [z3.Const(f"storage(out_{i})", St) for i in range(len(values))]

    def build():
        # each output is allocated by its op (or .clone()): distinct from every input's storage
        return [z3.Distinct(o, *ins) for o in outs] + [z3.Or(*[o == i for o in outs for i in ins])]
    assumptions = []
    for v, t in zip(values, treatment):
        if t == "clone":
            assumptions.append(f"`{v}` allocates new storage (Tensor.clone); nothing after the site writes in place "
                               f"or lets {', '.join('`%s`' % w for w in ob.get('watched', []))} escape (source screen)")
        else:
            assumptions.append(f"`{v}` is computed by ops that allocate their result (no view, no identity op: "
                               "a submodule returning its input fails torch.cond's alias check when traced)")
    return _protocol("cond-output-not-aliased", ctx, build, assumptions, "uninterpreted storages")


def ob_cond_side_pure(ob: dict, ctx: Ctx) -> dict:
    """A submodule called in a cond branch writes no state (Dynamo traces both branches)."""
    res = ob_untaken_runs(ob, ctx)
    if res.get("smtlib"):
        res["smtlib"] = res["smtlib"].replace("untaken-side-runs", "cond-side-pure")
    return res


def ob_cond_no_autograd(ob: dict, ctx: Ctx) -> dict:
    """The cond is guarded by ``not torch.is_grad_enabled()``: it never runs under autograd,
    where its backward would give tensors the if leaves without gradient a zero gradient."""
    compiling, grad, runs = z3.Bool("is_compiling"), z3.Bool("is_grad_enabled"), z3.Bool("cond_runs")

    def build():
        return [runs == z3.And(compiling, z3.Not(grad)), z3.And(runs, grad)]   # negated: cond runs with autograd
    return _protocol("cond-no-autograd", ctx, build,
                     ["the emitted guard is `torch.compiler.is_compiling() and not torch.is_grad_enabled()` "
                      "(Dynamo guards on the grad mode, so each mode gets its own graph)", ob.get("why") or ""],
                     "Booleans")


def ob_cond_taken_side_only(ob: dict, ctx: Ctx) -> dict:
    """torch.cond runs only the selected branch, so the where-only obligations about the
    untaken side (finite-gradient, untaken-side-cannot-raise, untaken-side-runs) are waived."""
    p, runs_t, runs_f = z3.Bool("pred"), z3.Bool("true_branch_runs"), z3.Bool("false_branch_runs")

    def build():
        return [runs_t == p, runs_f == z3.Not(p),                       # cond(p, f, g) = ite(p, f(), g())
                z3.Or(z3.And(p, runs_f), z3.And(z3.Not(p), runs_t))]   # negated: the untaken side runs
    return _protocol("cond-taken-side-only", ctx, build,
                     [ob.get("why") or "torch.cond evaluates only the branch its predicate selects",
                      "measured on torch 2.13: eager, aot_eager and inductor; gradients through the untaken side "
                      "are not computed"], "Booleans")


def _callee(call: str) -> str | None:
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return None
    return _dotted(node.func) if isinstance(node, ast.Call) else None


def ob_hoisted_pure(ob: dict, ctx: Ctx) -> dict:
    name = _callee(ob.get("call", ""))
    f = ctx.facts.get("names", {}).get(name or "")
    if not f or f.get("kind") != "callable" or "effects" not in f:
        return _unknown(f"no source-level effect analysis of `{name}` (not observed as a Python function)")
    effects = f["effects"]
    W = z3.SetSort(z3.StringSort())
    writes = z3.Const("writes_of_initialiser", W)
    found = z3.EmptySet(z3.StringSort())
    for e in effects:
        found = z3.SetAdd(found, z3.StringVal(e))

    def build():
        return [writes == found, writes != z3.EmptySet(z3.StringSort())]
    res = _protocol("hoisted-setup-pure", ctx, build,
                    [f"`{name}` is {f['qualname']}; screened from its source (verifier/effects.py)"]
                    + list(f.get("assumptions", [])), "sets of written locations")
    if res["result"] == "refuted":
        res["counterexample"] = "; ".join(effects[:3])
    return res


def ob_hoisted_cannot_raise(ob: dict, ctx: Ctx) -> dict:
    slot = ob.get("slot", "")
    seen = ctx.facts.get("names", {}).get(slot)
    if not seen or ctx.facts.get("raised"):
        return _unknown(f"the hoisted statement was not seen to complete on the example run (`{slot}` not set)")
    Args = z3.DeclareSort("Arguments")
    raises = z3.Function("raises", Args, z3.BoolSort())
    a0, a = z3.Const("arguments_on_example", Args), z3.Const("arguments", Args)

    def build():
        return [z3.Not(raises(a0)), a == a0, raises(a)]
    stmt = " ".join(ob.get("stmt", "").split())[:120]
    return _protocol("hoisted-setup-cannot-raise", ctx, build,
                     [f"`{stmt}` completed on the example run (observed: `{slot}` is set)",
                      "its inputs are the module's configuration, the input's device and constants: the same on "
                      "every call (not checked beyond the example)"], "uninterpreted raise predicate")


# -- host-count-reduction: host counting loops over `.tolist()` ------------------------------------
# `n = n0; for s in T.tolist(): if s <op> C: n += k`  ->  `n = n + k * (T <op> C).sum()`.
# Self-contained: each obligation reads only its own fields and the facts of the example run
# (T's dtype, rank and device; the other operands of later uses of n), so a certificate
# re-encodes it from its own data. General lemma: proofs/hc_compare_exact.smt2.
# Facts are per line (``watched_lines`` -> trace_facts ``watch``): T's names where the count
# runs (the obligation's ``line``), each use operand's names where that use runs (``uses``),
# every hit and every call, all alike (:func:`_hc_view`); facts without per-line observations
# (given by hand) are used as given. count-compare-exact, count-tolist-1d and
# count-uses-keep-type are required at every level (ALWAYS_REQUIRED).

HC_COUNT_BITS = 48           # counts (elements of a 1-D tensor) below 2**48
_HC_EXACT = z3.FPSort(15, 113)   # binary128: holds every int64 and every float64 exactly
_HC_FP = {">": z3.fpGT, ">=": z3.fpGEQ, "<": z3.fpLT, "<=": z3.fpLEQ, "==": z3.fpEQ,
          "!=": lambda a, b: z3.Not(z3.fpEQ(a, b))}
_HC_SIGNED = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
              "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
_HC_UNSIGNED = {">": z3.UGT, ">=": z3.UGE, "<": z3.ULT, "<=": z3.ULE, "==": lambda a, b: a == b,
                "!=": lambda a, b: a != b}
_HC_UNSIGNED_DTYPES = {"uint8", "bool"}


def _fact_words(f: dict) -> str:
    k = f.get("kind")
    if k == "tensor":
        return f"a {len(f.get('shape', []))}-D {f.get('dtype')} tensor on {f.get('device')}"
    if k == "num":
        return f"a Python {f.get('cat')}"
    if k == "unavailable":
        return "not readable there"
    return f"a {f.get('type') or k}"


def watched_lines(obligations: list[dict]) -> dict[int, list[str]]:
    """``line -> names`` the tracer observes at that line only, on every hit and every call
    (:func:`trace_facts` ``watch``): host-count-reduction's iterated tensor where the count
    runs, each later use's other operand where that use runs."""
    out: dict[int, set] = {}
    for o in obligations:
        if o.get("kind") not in HC_KINDS:
            continue
        if isinstance(o.get("line"), int) and isinstance(o.get("expr"), str):
            out.setdefault(o["line"], set()).update(names_in([o["expr"]]))
        for u in o.get("uses") or []:
            if isinstance(u, dict) and isinstance(u.get("line"), int) and isinstance(u.get("value"), str):
                out.setdefault(u["line"], set()).update(names_in([u["value"]]))
    return {k: sorted(v) for k, v in sorted(out.items())}


class _HcFacts(Exception):
    """The observations at a line cannot be used (never hit, or they disagree)."""


def _hc_view(ctx: Ctx, text: str, line) -> dict:
    """The facts of the names ``text`` reads, observed at ``line`` only (every hit, every call),
    which must agree on kind, dtype, rank and device. Facts without per-line observations
    (given by hand, not traced) are used as they are."""
    facts = ctx.facts or {}
    if not isinstance(line, int) or "at" not in facts:
        return facts
    key = str(line)
    at = facts["at"].get(key)
    if not at or not (facts.get("at_hits") or {}).get(key):
        raise _HcFacts(f"line {line} did not run on the example run: nothing is observed where `{text}` is read")
    names = {}
    for name in sorted(names_in([text])):
        obs = at.get(name) or []
        if len({fact_key(o) for o in obs}) > 1:
            raise _HcFacts(f"the observations of `{name}` at line {line} disagree (every hit and every call is "
                           "observed): it is " + " and ".join(_fact_words(o) for o in obs[:3]))
        if obs and obs[0].get("kind") != "unavailable":
            names[name] = obs[0]
    return {"names": names, "self": {}}


def _hc_observed(ctx: Ctx, text: str, line=None):
    """(abstract value, dtype name or None, assumptions) of ``text`` at ``line`` on the example run."""
    view = _hc_view(ctx, text, line)
    se = ShapeEval(view, {} if "at" in (ctx.facts or {}) else ctx.defs, "observed", strict_dtypes=True)
    mv = se.eval(_expr(text))
    dtype = None
    if mv.kind == "tensor":
        s = z3.Solver()
        s.add(*[a for a, _ in se.assume])
        if s.check() == z3.sat:
            dtype = _as_name(s.model().eval(mv.dtype, model_completion=True))
    texts = _assumption_texts(se.assume)
    if isinstance(line, int) and "at" in (ctx.facts or {}):
        texts.append(f"the facts of `{text}` are those observed at line {line} on every hit and every call, "
                     "all alike")
    return mv, dtype, texts


def _hc_devices(ctx: Ctx, text: str, line=None) -> set:
    facts = _hc_view(ctx, text, line).get("names", {})
    return {facts[n].get("device") for n in names_in([text]) if facts.get(n, {}).get("kind") == "tensor"}


def ob_hc_tolist_1d(ob: dict, ctx: Ctx) -> dict:
    expr = ob["expr"]
    try:
        mv, dtype, texts = _hc_observed(ctx, expr, ob.get("line"))
    except _HcFacts as exc:
        return _unknown(str(exc))
    except Unsupported as exc:
        return _unknown(f"the rank of `{expr}` is not known where the rewrite runs: {exc}")
    observed = mv.rank if mv.kind == "tensor" else -1
    rank = z3.Int(f"{expr}.dim()")

    def build():
        seen = f"{observed}-D" if observed >= 0 else f"not a tensor ({mv.kind})"
        return ([rank == observed, rank != 1],
                texts + [f"`{expr}` is {seen} on every call, as on the example run (observed)",
                         "tolist() of a 1-D tensor is a list of Python numbers; of a 0-D tensor a number and of "
                         "an n-D tensor (n >= 2) nested lists, on which the original loop raises TypeError"], None)

    def describe(model, extra):
        if observed < 0:
            return f"`{expr}` is not a tensor on the example run: `.tolist()` and the tensor comparison differ"
        return (f"`{expr}` is {observed}-D on the example run: its tolist() does not yield numbers (the original "
                "raises TypeError comparing them), while the tensor count does not raise")
    return _decide("count-tolist-1d", [("observed", build)], ctx, "integers (rank)", describe)


def _hc_compare_terms(dtype: str, op: str, c) -> tuple[Any, list, str]:
    """(element symbol, [(compute model, torch result)], Python result) for ``s <op> c``."""
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        raise Unsupported(f"the threshold {c!r} is not an int or float")
    if isinstance(c, float) and not math.isfinite(c):
        raise Unsupported("the threshold is not finite")
    if dtype in FP_FORMAT:
        if isinstance(c, int) and float(c) != c:
            raise Unsupported(f"the int threshold {c} is not exact as a float64")
        sort = fp_sort(dtype)
        x = z3.FP("s", sort)
        c64 = z3.FPVal(float(c), z3.Float64())
        py = _HC_FP[op](z3.fpToFP(RNE, x, z3.Float64()), c64)       # tolist(): exact float64; Python: double compare
        models = [(f"in {dtype}, C rounded to {dtype} (RNE)", _HC_FP[op](x, z3.fpToFP(RNE, c64, sort)))]
        if dtype in ("float16", "bfloat16"):
            f32 = z3.Float32()
            models.append(("in float32 after upcasting, C rounded to float32 (CPU kernels, inductor)",
                           _HC_FP[op](z3.fpToFP(RNE, x, f32), z3.fpToFP(RNE, c64, f32))))
        return x, models, py
    if dtype in INT_BITS or dtype == "bool":
        bits = INT_BITS.get(dtype, 1)
        unsigned = dtype in _HC_UNSIGNED_DTYPES
        x = z3.BitVec("s", bits)
        if isinstance(c, int):
            if abs(c) >= 2 ** 64:
                raise Unsupported("the int threshold does not fit in 64 bits")
            wide = 80
            xw = z3.ZeroExt(wide - bits, x) if unsigned else z3.SignExt(wide - bits, x)
            py = _HC_SIGNED[op](xw, z3.BitVecVal(c, wide))           # Python ints: exact
            if dtype == "bool":   # result_type(bool tensor, int) = int64; C converted with wrap-around
                t = _HC_SIGNED[op](z3.ZeroExt(63, x), z3.BitVecVal(c % 2 ** 64, 64))
                return x, [("in int64 (bool promoted), C converted to int64 (wraps)", t)], py
            cmp = _HC_UNSIGNED if unsigned else _HC_SIGNED
            t = cmp[op](x, z3.Extract(bits - 1, 0, z3.BitVecVal(c, wide)))
            return x, [(f"in {dtype}, C converted to {dtype} (wraps, measured)", t)], py
        # float C with an integer/bool tensor: result_type is the default float dtype (float32)
        to = z3.fpUnsignedToFP if unsigned else z3.fpSignedToFP
        exact = to(RNE, x, _HC_EXACT)                                 # every int64 is exact in binary128
        py = _HC_FP[op](exact, z3.fpToFP(RNE, z3.FPVal(c, z3.Float64()), _HC_EXACT))   # Python int vs float: exact
        f32 = z3.Float32()
        t = _HC_FP[op](to(RNE, x, f32), z3.fpToFP(RNE, z3.FPVal(c, z3.Float64()), f32))
        return x, [(f"in float32 (result_type of a {dtype} tensor and a Python float), both rounded (RNE)", t)], py
    raise Unsupported(f"dtype {dtype} is outside the encoded dtypes")


def ob_hc_compare_exact(ob: dict, ctx: Ctx) -> dict:
    """For every element value s of T's dtype: Python's ``s <op> C`` on tolist()'s number equals
    torch's elementwise ``T <op> C`` (under each compute model listed)."""
    expr, op, c = ob["expr"], ob["op"], ob.get("threshold_value")
    if op not in _HC_FP:
        return _unknown(f"comparison `{op}` is not encoded")
    try:
        mv, dtype, texts = _hc_observed(ctx, expr, ob.get("line"))
    except _HcFacts as exc:
        return _unknown(str(exc))
    except Unsupported as exc:
        return _unknown(f"the dtype of `{expr}` is not known where the rewrite runs: {exc}")
    if dtype is None:
        return _unknown(f"`{expr}` is not shown to be a torch.Tensor of known dtype on the example run "
                        f"(it is {'a tensor of unknown dtype' if mv.kind == 'tensor' else 'a ' + str(mv.kind)})")
    x, models, py = _hc_compare_terms(dtype, op, c)

    def build():
        return ([z3.Or(*[py != t for _, t in models])],
                texts + [f"`{expr}` has dtype {dtype} on every call (observed)",
                         "Tensor.tolist() gives each element's exact value (float64 for floating dtypes, int for "
                         "integer dtypes, bool)",
                         "torch compares " + "; or ".join(d for d, _ in models)], (x, models, py))

    def describe(model, extra):
        x, models, py = extra
        val = _fmt_value(model.eval(x, model_completion=True))
        got = [str(z3.is_true(model.eval(t, model_completion=True))) for _, t in models]
        return (f"s = {val} ({dtype}): Python `s {op} {ob.get('threshold')}` is "
                f"{z3.is_true(model.eval(py, model_completion=True))}, torch `{expr} {op} {ob.get('threshold')}` gives "
                f"{' / '.join(got)}; the threshold is not exact in {dtype if dtype in FP_FORMAT else 'the promoted dtype'}")
    arith = (f"IEEE 754 in Z3's FloatingPoint theory, RNE ({dtype}, float64, float32; binary128 for exact int/float "
             "comparison); integers as bit-vectors; never reals")
    return _decide("count-compare-exact", [("observed", build)], ctx, arith, describe)


def ob_hc_sum_exact(ob: dict, ctx: Ctx) -> dict:
    n0, k = ob.get("init"), ob.get("step")
    if not isinstance(n0, int) or not isinstance(k, int) or abs(n0) >= 2 ** 63 or abs(k) >= 2 ** 63:
        return _unknown("the initial value and the increment must be int64 literals")
    count = z3.BitVec("count", 64)

    def build():
        torch_n = z3.BitVecVal(n0, 64) + z3.BitVecVal(k, 64) * count        # int64, wraps
        exact = z3.BitVecVal(n0, 160) + z3.BitVecVal(k, 160) * z3.ZeroExt(96, count)   # Python int: no wrap
        return ([z3.ULT(count, z3.BitVecVal(2 ** HC_COUNT_BITS, 64)), z3.SignExt(96, torch_n) != exact],
                [f"the count is below 2^{HC_COUNT_BITS} (a 1-D tensor has fewer elements)",
                 "the sum of a bool tensor is int64 and counts exactly (integer addition below 2^63)",
                 f"the original adds {k} once per counted element to the Python int {n0}"], None)
    return _decide("count-sum-exact", [("bounded count", build)], ctx,
                   "64-bit bit-vectors (int64, wrapping) against 160-bit bit-vectors (exact)")


def ob_hc_uses(ob: dict, ctx: Ctx) -> dict:
    """Each later use ``n <op> v`` (op in +, -, *): a Python int n and a 0-d int64 tensor n give
    the same result dtype (ATen: a Python number and a 0-d tensor both yield to a dimensioned
    tensor of the same category; two 0-d tensors promote) and compatible devices. ``v``'s facts
    are those observed where that use runs (``uses``: value and line), on every hit."""
    expr = ob.get("expr", "")
    uses = ob.get("uses")
    if not isinstance(uses, list):
        uses = [{"value": v, "line": None} for v in ob.get("values") or []]
    try:
        dev_t = _hc_devices(ctx, expr, ob.get("line"))
    except _HcFacts as exc:
        return _unknown(str(exc))
    premises, differs, texts, bad = [], [], [], []
    for u in uses:
        v, line = u.get("value"), u.get("line")
        where = f" (line {line})" if isinstance(line, int) else ""
        try:
            view = _hc_view(ctx, v, line)
            se = ShapeEval(view, {} if "at" in (ctx.facts or {}) else ctx.defs, "observed", strict_dtypes=True)
            mv = se.eval(_expr(v))
        except _HcFacts as exc:
            return _unknown(f"the other operand `{v}` of a later use{where}: {exc}")
        except Unsupported as exc:
            return _unknown(f"the other operand `{v}` of a later use{where} is not known: {exc}")
        if mv.kind != "tensor":
            bad.append(f"`{v}`{where} (a Python {mv.cat or mv.kind})")
            continue
        premises += [a for a, _ in se.assume]
        texts += [t for t in _assumption_texts(se.assume) if t not in texts]
        texts.append(f"`{v}` is a {mv.rank}-D tensor where it is used{where}, on every hit and call (observed)")
        original = combine(mv.dtype, DTC["int64"])        # Python int: a wrapped number, lowest priority
        mended = combine(mv.dtype, DTC["int64"]) if mv.rank >= 1 else promote(mv.dtype, DTC["int64"])
        differs.append(original != mended)
        dev_v = {f.get("device") for n, f in view.get("names", {}).items()
                 if n in names_in([v]) and f.get("kind") == "tensor"}
        if dev_t and dev_t != {"cpu"} and dev_v != dev_t:
            bad.append(f"`{v}`{where} on {', '.join(sorted(d for d in dev_v if d)) or 'another device'}, the count on "
                       f"{', '.join(sorted(d for d in dev_t if d))}")

    def build():
        if bad:
            return [z3.BoolVal(True)], texts, None
        if not differs:
            return [z3.BoolVal(False)], ["no later use of the counter"], None
        return premises + [z3.Or(*differs)], texts + [
            "the count is on " + (", ".join(sorted(d for d in dev_t if d)) or "the iterated tensor's device")
            + " (observed); a CPU 0-d tensor combines with tensors on any device"], None

    def describe(model, extra):
        if bad:
            return ("a later use combines the count with " + ", ".join(bad[:3])
                    + ": the result would change type (a tensor instead of a Python number, or another dtype) "
                    "or mix devices")
        return (_model_text(model) + ": a 0-d integer tensor operand keeps its dtype with a Python int but is "
                "promoted to int64 by a 0-d int64 count")
    return _decide("count-uses-keep-type", [("observed", build)], ctx,
                   "PyTorch type promotion (torch.promote_types table, ATen combine_categories) over a DType datatype",
                   describe)


def ob_hc_no_gradient(ob: dict, ctx: Ctx) -> dict:
    orig, mended = z3.Bool("python_count.requires_grad"), z3.Bool("tensor_count.requires_grad")

    def build():
        return [orig == z3.BoolVal(False), mended == z3.BoolVal(False), z3.Or(orig != mended, mended)]
    return _protocol("count-no-gradient", ctx, build,
                     ["a Python int from tolist() comparisons carries no gradient",
                      "aten comparison ops (gt, ge, lt, le, eq, ne) have no derivative: their bool result and its "
                      "sum have requires_grad=False (measured on torch 2.13)"], "Booleans")


HC_KINDS = {
    "count-tolist-1d": ob_hc_tolist_1d,
    "count-compare-exact": ob_hc_compare_exact,
    "count-sum-exact": ob_hc_sum_exact,
    "count-uses-keep-type": ob_hc_uses,
    "count-no-gradient": ob_hc_no_gradient,
}


KINDS: dict[str, Callable[[dict, Ctx], dict]] = {
    "same-shape": ob_same_shape,
    "same-dtype": ob_same_dtype,
    "untaken-side-cannot-raise": ob_cannot_raise,
    "single-element-predicate": ob_single_element,
    "bool-predicate": ob_bool_predicate,
    "bool-operand": ob_bool_operand_truth,
    "finite-gradient": ob_finite_gradient,
    "where-equals-ite": ob_where_equals_ite,
    "untaken-side-runs": ob_untaken_runs,
    "cond-predicate": ob_cond_predicate,
    "cond-branch-types": ob_cond_branch_types,
    "cond-output-not-aliased": ob_cond_not_aliased,
    "cond-side-pure": ob_cond_side_pure,
    "cond-taken-side-only": ob_cond_taken_side_only,
    "cond-no-autograd": ob_cond_no_autograd,
    "idempotent-device-move": ob_idempotent_move,
    "paired-call-value-not-aliased": ob_paired_not_aliased,
    "hoisted-setup-pure": ob_hoisted_pure,
    "hoisted-setup-cannot-raise": ob_hoisted_cannot_raise,
    "order-preserved": ob_order_preserved,
    "replayed-on-exception": ob_replayed_on_exception,
    "snapshot-before-mutation": ob_snapshot,
    "lazy-format-equals-fstring": ob_lazy_format,
    "once-per-process": ob_once_per_process,
    "warning-identity": ob_warning_identity,
    "raises-iff-original": ob_raises_iff,
    "same-result-when-passing": ob_same_result_when_passing,
    "first-failure-wins": ob_first_failure,
    "state-unchanged-on-raise": ob_state_unchanged,
    "cpu-only": ob_cpu_only,
    "condition-is-tensor": ob_condition_is_tensor,
    "restore-at-boundary": ob_restore_at_boundary,
    **HC_KINDS,
}

# the fields discharge adds to an obligation; the rest is the obligation's own data
RESULT_FIELDS = ("result", "status", "smtlib", "assumptions", "tier", "arithmetic", "seconds", "solver_seconds",
                 "counterexample", "reason", "solver", "timeout_ms", "use")


def enrich(obligations: list[dict], code: str | None) -> list[dict]:
    """Record what an obligation's encoding reads from the mended file in the obligation
    itself (trap table entry, number of checks, in-place writes), so that a certificate can
    be re-encoded from its own data."""
    if code is None:
        return obligations
    from verifier.effects import inplace_writes_to

    first = next((o for o in obligations if o.get("kind") == "raises-iff-original"), None)
    out = []
    for ob in obligations:
        ob = dict(ob)
        k = ob["kind"]
        if k in ("raises-iff-original", "restore-at-boundary") and first is not None:
            ob.setdefault("trap", first.get("trap"))
            entry = _trap_entry(code, ob.get("trap") or "")
            ob.setdefault("restored", list(entry) if entry else None)
        elif k == "condition-is-tensor" and first is not None:
            ob.setdefault("asserts", first.get("asserts"))
        elif k == "first-failure-wins":
            ob.setdefault("checks_in_file", code.count("torch._assert_async("))
        elif k == "paired-call-value-not-aliased":
            targets = [v for v in ob.get("values", []) if v.startswith("self.")]
            ob.setdefault("inplace_writes", inplace_writes_to(code, targets + [ob.get("call", "").split("(")[0]]))
        out.append(ob)
    return out


def obligation_data(result: dict) -> dict:
    """An obligation as the rule (and :func:`enrich`) stated it, without its result."""
    return {k: v for k, v in result.items() if k not in RESULT_FIELDS}


ADDED_KINDS = {"where-equals-ite"}   # obligations the verifier adds to the rule's (see expand)


def expand(rule: str, obligations: list[dict]) -> list[dict]:
    """The rule's obligations plus those the verifier adds: for each selection of
    predicated control flow, the IEEE equivalence of ``where`` and the original branch."""
    out = [dict(o) for o in obligations]
    if rule == "predicated-control-flow":
        preds = [o["pred"] for o in obligations if o["kind"] == "single-element-predicate"]
        if preds:
            for o in obligations:
                if o["kind"] == "same-dtype":
                    item = {"kind": "where-equals-ite", "target": o["target"], "lhs": o["lhs"], "rhs": o["rhs"],
                            "pred": preds[0]}
                    if item not in out:
                        out.append(item)
    return out


def discharge(rule: str, obligations: list[dict], *, facts: dict | None, code: str | None = None,
              before: str | None = None, defs: dict | None = None, timeout_ms: int = TIMEOUT_MS) -> list[dict]:
    """Each obligation of ``rule`` with its result, SMT-LIB query and assumptions."""
    ctx = Ctx(rule, facts or {"names": {}, "self": {}}, defs or {}, code, before, timeout_ms, obligations)
    out = []
    for ob in enrich(expand(rule, obligations), code):
        kind = ob["kind"]
        t0 = time.perf_counter()
        try:
            if kind in KINDS:
                res = KINDS[kind](ob, ctx)
            else:
                res = _unknown(f"no encoding for obligations of kind `{kind}`")
        except Unsupported as exc:
            res = _unknown(str(exc))
        except z3.Z3Exception as exc:
            res = _unknown(f"encoding failed: {exc}")
        res["solver_seconds"] = res.get("seconds") or 0.0
        res["seconds"] = round(time.perf_counter() - t0, 4)     # encoding and solving
        out.append({**ob, **res, "solver": solver_version(), "timeout_ms": timeout_ms})
    return out


# -- levels ----------------------------------------------------------------------------------

LEVELS = ("fast", "standard", "strict")
STRICT_MIN_EXAMPLES = 20
STRICT_MIN_EXAMPLES_INSTALLED = 8
# obligations a rule's rewrite needs PROVED at every level, fast included (unknown or refuted
# declines, naming the obligation): those without which the rewrite is wrong on ordinary inputs
ALWAYS_REQUIRED: dict[str, frozenset] = {
    "host-count-reduction": frozenset({"count-compare-exact", "count-tolist-1d", "count-uses-keep-type"}),
}


def required_kinds(rule: str | None) -> frozenset:
    """The obligation kinds ``rule`` needs proved at every level (every rule's, when ``rule``
    is None: the kinds are each rule's own)."""
    if rule is None:
        return frozenset().union(*ALWAYS_REQUIRED.values())
    return ALWAYS_REQUIRED.get(rule, frozenset())


def verdict(results: list[dict], level: str, rule: str | None = None) -> tuple[bool, str | None, str]:
    """(accepted, reason when declined, use) for a discharged rewrite at ``level``.

    Every level: the rule's ALWAYS_REQUIRED obligations proved. strict: every obligation
    proved. standard: nothing refuted (a refuted finite-gradient only makes the rewrite
    inference-only). fast: Z3 is not consulted beyond the always-required obligations.
    """
    use = "inference-only" if any(r["kind"] == "finite-gradient" and r["result"] == "refuted" for r in results) \
        else "training and inference"
    required = required_kinds(rule)
    must = [r for r in results if r["kind"] in required and r["result"] != "proved"]
    if must:
        return False, f"required at every level ({level}): " + "; ".join(_why(r) for r in must[:4]) + (
            f" (+{len(must) - 4} more)" if len(must) > 4 else ""), use
    if level == "fast":
        return True, None, use
    if level == "strict":
        bad = [r for r in results if r["result"] != "proved"]
        if bad:
            return False, "strict: " + "; ".join(_why(r) for r in bad[:4]) + (
                f" (+{len(bad) - 4} more)" if len(bad) > 4 else ""), use
        return True, None, use
    bad = [r for r in results if r["result"] == "refuted" and r["kind"] != "finite-gradient"]
    if bad:
        return False, "; ".join(_why(r) for r in bad[:3]), use
    return True, None, use


def _why(r: dict) -> str:
    what = r.get("lhs") and f" `{r['lhs']}` vs `{r['rhs']}`" or (r.get("expr") and f" `{r['expr']}`") or \
        (r.get("pred") and f" `{r['pred']}`") or ""
    if r["result"] == "refuted":
        extra = f"; counterexample: {r['counterexample']}" if r.get("counterexample") else ""
        if r["kind"] == "finite-gradient":
            extra += " (inference-only)"
        return f"obligation {r['kind']}{what} refuted{extra}"
    return f"obligation {r['kind']}{what} unknown ({r.get('reason') or 'not decided'})"


# -- facts out of process (installed packages: the mended copy needs the import overlay) -------


def facts_main(request_path: str) -> int:
    import torch

    req = json.loads(open(request_path).read())
    if req.get("overlay"):
        from mend.overlay import activate

        activate(req["overlay"])
    torch.set_num_threads(1)
    from mend.targets import load_target

    target = load_target(req["target"])
    import importlib.util

    spec = importlib.util.find_spec(req["module"])
    file = spec.origin if spec else req["file"]
    model = target.model

    def run():
        with torch.no_grad():
            model(*target.args, **target.kwargs)
    facts = trace_facts(run, file, req["lines"], set(req["names"]), watch=req.get("watch"))
    with open(req["out"], "w") as fh:
        json.dump(facts, fh)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "facts":
        sys.exit(facts_main(sys.argv[2]))
    print("usage: python -m verifier.obligations facts REQUEST.json", file=sys.stderr)
    sys.exit(2)


# -- entry points for mend fix -------------------------------------------------------------------

NEEDS_FACTS = {"predicated-control-flow", "predicated-validation", "host-count-reduction"}


def _names_and_lines(obligations: list[dict], before: str, code: str) -> tuple[list[int], set[str], dict]:
    lines = changed_lines(before, code)
    defs = temp_defs(code, changed_lines(before, code))
    names = names_in(obligation_exprs(obligations) + list(defs.values()))
    return lines, names, defs


def facts_in_process(path, module_name: str, init: tuple, args: tuple, kwargs: dict, obligations: list[dict],
                     before: str, code: str) -> tuple[dict, dict]:
    """Facts for a FILE.py candidate: build its Model and trace one example run."""
    import contextlib
    import io
    import warnings

    import torch

    from mend.targets import load_file_module

    lines, names, defs = _names_and_lines(obligations, before, code)
    watch = watched_lines(obligations)
    mod = load_file_module(path, module_name)
    torch.manual_seed(0)
    model = (init(mod) if callable(init) else mod.Model(*init)).eval()  # init: a maker, or Model's arguments

    def run():
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(*args, **kwargs)
    return trace_facts(run, str(path), lines, names, watch=watch), defs


def facts_out_of_process(spec: str, overlay: str, rel: str, obligations: list[dict], before: str, code: str,
                         tmp) -> tuple[dict, dict]:
    """Facts for a candidate inside an installed package: a fresh interpreter with the overlay."""
    import subprocess
    from pathlib import Path

    lines, names, defs = _names_and_lines(obligations, before, code)
    req = Path(tmp) / f"facts_{abs(hash((rel, code))) % 10**8}.json"
    out = req.with_suffix(".out")
    req.write_text(json.dumps({"target": spec, "overlay": overlay, "module": rel[:-3].replace("/", "."),
                               "file": str(Path(overlay) / rel), "lines": lines, "names": sorted(names),
                               "watch": {str(k): v for k, v in watched_lines(obligations).items()},
                               "out": str(out)}))
    from verifier.worker import worker_env

    proc = subprocess.run([sys.executable, "-m", "verifier.obligations", "facts", str(req)], capture_output=True,
                          text=True, env=worker_env(), cwd=str(Path(__file__).resolve().parents[1]))
    if proc.returncode != 0 or not out.is_file():
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"names": {}, "self": {}, "hits": 0, "error": tail}, defs
    return json.loads(out.read_text()), defs


def check_rewrite(rule: str, obligations: list[dict], *, level: str, before: str, code: str,
                  facts: dict | None, defs: dict | None, timeout_ms: int = TIMEOUT_MS) -> dict:
    """Discharge and judge one candidate: ``{"obligations", "accepted", "reason", "use", "seconds"}``."""
    t0 = time.perf_counter()
    if level == "fast":
        required = required_kinds(rule)
        todo = expand(rule, obligations)
        done = iter(discharge(rule, [o for o in todo if o["kind"] in required], facts=facts, code=code,
                              before=before, defs=defs, timeout_ms=timeout_ms) if required else [])
        results = [next(done) if o["kind"] in required else
                   {**o, "result": "unknown", "status": None, "smtlib": None, "assumptions": [],
                    "reason": "not discharged (--verify fast)", "solver": solver_version(),
                    "timeout_ms": timeout_ms} for o in todo]
    else:
        results = discharge(rule, obligations, facts=facts, code=code, before=before, defs=defs,
                            timeout_ms=timeout_ms)
    ok, reason, use = verdict(results, level, rule)
    return {"obligations": results, "accepted": ok, "reason": reason, "use": use,
            "seconds": round(time.perf_counter() - t0, 3)}


def prove(rule: str, obligations: list[dict], *, level: str, before: str, code: str,
          facts_fn: Callable[[], tuple[dict, dict]], timeout_ms: int = TIMEOUT_MS) -> dict:
    """Facts (when the rule needs them and ``level`` is not fast), discharge, verdict.

    Returns check_rewrite's dict plus ``verification`` (level, use, solver, seconds, facts,
    defs: what a certificate records) and ``failed`` (kinds not proved / refuted).
    """
    t0 = time.perf_counter()
    facts, defs = {"names": {}, "self": {}}, {}
    if (level != "fast" or required_kinds(rule)) and rule in NEEDS_FACTS:
        try:
            facts, defs = facts_fn()
        except Exception as exc:  # noqa: BLE001 - no facts: the obligations needing them stay unknown
            facts = {"names": {}, "self": {}, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    out = check_rewrite(rule, obligations, level=level, before=before, code=code, facts=facts, defs=defs,
                        timeout_ms=timeout_ms)
    out["verification"] = {"level": level, "use": out["use"], "solver": solver_version(),
                           "seconds": round(time.perf_counter() - t0, 3), "facts": facts, "defs": defs}
    bad = ("refuted",) if level == "standard" else ("refuted", "unknown")
    required = required_kinds(rule)
    out["failed"] = [r["kind"] for r in out["obligations"]
                     if (level != "fast" and r["result"] in bad) or (r["kind"] in required and r["result"] != "proved")]
    return out


def examples_for(level: str, requested: int, installed: bool) -> int:
    """Hypothesis examples per candidate at ``level``: strict raises it to its stated
    minimum, fast caps it at 5."""
    if level == "strict":
        return max(requested, STRICT_MIN_EXAMPLES_INSTALLED if installed else STRICT_MIN_EXAMPLES)
    if level == "fast":
        return min(requested, 5)
    return requested
