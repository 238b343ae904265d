"""Abstract values of the shape model (:class:`M`) and the transfer functions of the
submodules it knows (``nn.Linear``, ``nn.LayerNorm``/``RMSNorm``, pointwise activations):
what a call of one gives, and the preconditions (``ev.pre``) whose failure makes it raise."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from verifier.dtypes import DTC, DTYPES, is_float
from verifier.smt import Unsupported


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
    # a tensor's layout: the empty set when it is contiguous, a set of leaf names when it is
    # contiguous if those leaves are (their layout is an observation), None when it may not be
    # contiguous (after a transpose, permute, expand or a strided index: strides are not modelled)
    layout: frozenset | None = frozenset()

    @property
    def rank(self) -> int:
        return len(self.shape)


def _num(cat, ival=None, fval=None) -> M:
    return M("num", cat=cat, ival=ival, fval=fval)


def builtin_call(ev, name: str, args: list[M], what: str) -> M:
    """``abs``/``min``/``max`` of numbers, ``float``/``int`` (``float("-inf")`` keeps its value,
    which :func:`scalar_fits` reads) and ``len`` of a tensor."""
    if name in ("abs", "min", "max") and all(a.kind == "num" for a in args):
        return _num("float" if any(a.cat == "float" for a in args) else "int")
    if name == "float":
        text = args[0].name if len(args) == 1 and args[0].kind == "str" else None
        try:
            return _num("float", fval=float(text) if text is not None else None)
        except ValueError:
            raise Unsupported(f"float({text!r}) raises ValueError") from None
    if name == "int":
        return _num("int")
    if name == "len" and args and args[0].kind == "tensor":
        if args[0].rank == 0:
            ev.pre.append((z3.BoolVal(False), f"len() of a 0-dim tensor raises ({what})"))
            return _num("int")
        return _num("int", args[0].shape[0])
    raise Unsupported(f"builtin `{name}`")


def finfo_call(ev, args: list[M], kwargs: dict, what: str) -> M:
    """``torch.finfo(d)``: its dtype kept, so that ``.max``/``.min`` say what they are."""
    d = args[0] if args else kwargs.get("type")
    if d is None or d.kind != "dtype" or d.dtype is None:
        raise Unsupported("torch.finfo of an unknown dtype")
    ev.pre.append((is_float(d.dtype), f"torch.finfo needs a floating dtype ({what})"))
    return M("finfo", dtype=d.dtype)


def module_call(ev, mod: M, args, kwargs, what) -> M:
    f = mod.fact
    t = f["type"]
    if not str(f.get("defined_in", "")).startswith("torch.nn.modules."):
        # helper-95 m26: a subclass named `Linear` (peft's lora.Linear) computes as it likes
        raise Unsupported(f"submodule `{mod.name}` ({t}) is not torch.nn's own class, whose transfer function this is")
    if not args or args[0].kind != "tensor":
        raise Unsupported(f"{t} called without a tensor")
    x = args[0]
    if t in ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Identity", "LeakyReLU", "ELU", "Softplus", "Mish",
             "Hardtanh", "Hardswish", "Dropout"):
        return M("tensor", shape=list(x.shape), dtype=x.dtype)
    if t == "Linear":
        w = f.get("weight")
        if x.rank == 0:
            ev.pre.append((z3.BoolVal(False), f"{t} of a 0-dim tensor raises ({what})"))
            return M("tensor", shape=[], dtype=x.dtype)
        ev.pre.append((x.shape[-1] == f["in_features"], f"last size is in_features={f['in_features']} in `{what}`"))
        if w:   # the weight's dtype is module state: model.to(dtype) changes it after mend ran
            wdt = ev.dtype_of(f"{mod.name}.weight", w["dtype"], True, True)
            ev.pre.append((x.dtype == wdt, f"input dtype equals the weight's (observed {w['dtype']}) in `{what}`"))
        # F.linear raises unless the dtypes are equal: a value it returns has the input's dtype
        return M("tensor", shape=list(x.shape[:-1]) + [z3.IntVal(f["out_features"])], dtype=x.dtype)
    if t in ("LayerNorm", "RMSNorm"):
        ns = f.get("normalized_shape") or []
        for i, n in enumerate(reversed(ns)):
            if i < x.rank:
                ev.pre.append((x.shape[-1 - i] == n, f"trailing sizes match normalized_shape in `{what}`"))
        ev.pre.append((is_float(x.dtype), f"{t} needs a floating input ({what})"))
        return M("tensor", shape=list(x.shape), dtype=x.dtype)
    raise Unsupported(f"submodule `{mod.name}` ({t}) has no shape transfer function")


def size_query(ev, name: str, x: M | None, args, kwargs, what: str) -> M | None:
    """``numel()``/``nelement()`` (the product of the sizes), ``dim()``/``ndimension()`` (the rank)
    and ``size()``/``size(d)`` of a tensor: Python ints known at trace time, as ``.shape`` is
    (helper-102's m28: ``labels.numel() - n`` was unknown, so host-count-reduction gave a wrong
    reason); None for any other call. Raises Unsupported for arguments other than a literal dim."""
    if x is None or x.kind != "tensor" or name not in ("numel", "nelement", "dim", "ndimension", "size"):
        return None
    given = len(args) - 1 + len(kwargs)
    d = ev._dim_arg(args, kwargs, 1) if name == "size" and given else None
    if given > (name == "size") or set(kwargs) - {"dim"} or (given and (not isinstance(d, int) or x.rank == 0)):
        raise Unsupported(f"`{what or name}` with arguments other than a literal dim")
    if name == "size":
        return M("shape", shape=list(x.shape)) if d is None else _num("int", x.shape[ev._norm_dim(d, x.rank, what)])
    return _num("int", numel(x.shape) if name in ("numel", "nelement") else z3.IntVal(x.rank))


def numel(shape):
    """The number of elements of a tensor of ``shape`` (symbolic sizes): their product, a z3 term."""
    n = z3.IntVal(1)
    for d in shape:
        n = n * d
    return n


# the largest finite value of each floating dtype (torch.finfo(d).max)
_FMAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}
_IRANGE = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
           "int64": (-2**63, 2**63 - 1)}


def scalar_fits(ev, v: M, dt, op: str, what: str, promoted: bool = False) -> None:
    """Adds to ``ev.pre`` that the Python number ``v`` (a clamp bound, a masked_fill value)
    converts to the dtype term ``dt`` without overflow: ATen raises "value cannot be converted to
    type c10::Half without overflow" (measured on torch 2.13: ``clamp_min`` of a float16 tensor
    at -1e5, ``masked_fill`` of a float16 tensor with -1e9, ``clamp`` of an int8 tensor at 300;
    inf and NaN convert to any floating dtype, to no integer one). A value the model does not
    know fits only float64; at the observed tier a local's observed value decides, said as an
    assumption (helper-104's B2: an unbounded clamp_min proved a float16 side that raised).
    ``promoted``: ``dt`` is a result type ``v`` took part in, so a float ``v`` makes it floating."""
    if v is None or v.kind != "num" or v.cat == "bool":
        return
    names = [n for n in DTYPES if not (promoted and v.cat == "float" and n not in _FMAX and n != "float64")]
    fits = {name: z3.simplify(_fits(ev, v, name, what)) for name in names}
    parts = [z3.Implies(dt == DTC[name], f) for name, f in fits.items() if not z3.is_true(f)]
    if not parts:   # fits every dtype: nothing for a solver
        return
    ev.pre.append((z3.And(*parts), f"{op}: the Python number converts to the result's dtype without overflow "
                                   f"(a float16 tensor and 1e5 raise) ({what})"))


def _fits(ev, v: M, name: str, what: str):
    if name in ("bool", "float64"):
        return z3.BoolVal(True)
    if isinstance(v.owner, tuple) and v.owner[0] == "finfo":   # torch.finfo(d).max (or -max, eps, ...)
        _, attr, d = v.owner
        if attr not in ("max", "min"):
            return z3.BoolVal(True)   # eps, tiny: magnitudes below 1, which every dtype converts
        if name not in _FMAX:
            return z3.BoolVal(False)
        return z3.Or(*[d == DTC[w] for w in _FMAX if _FMAX[w] <= _FMAX[name]])
    if v.cat == "int":
        known = v.ival is not None and z3.is_int_value(z3.simplify(v.ival))
        if known and not -2**63 <= z3.simplify(v.ival).as_long() < 2**63:
            return z3.BoolVal(False)   # beyond int64: OverflowError or "cannot be converted" (helper-105 F8)
        if name in ("float32", "bfloat16", "int64"):
            return z3.BoolVal(True)   # a size or literal within int64, whose range these hold
        lo, hi = _IRANGE.get(name, (-_FMAX["float16"], _FMAX["float16"]))
        return z3.And(v.ival >= lo, v.ival <= hi) if v.ival is not None else z3.BoolVal(False)
    f = v.fval
    if f is None and ev.tier == "observed" and v.fact is not None and isinstance(v.fact.get("value"), float):
        f = v.fact["value"]
        ev.assume.append((z3.BoolVal(True), f"`{v.name}` is {f!r}, its observed value, in `{what}`"))
    if f is None:
        return z3.BoolVal(False)
    if f != f or f in (float("inf"), float("-inf")):
        return z3.BoolVal(name in _FMAX)
    if name in _FMAX:
        return z3.BoolVal(abs(f) <= _FMAX[name])
    lo, hi = _IRANGE[name]
    return z3.BoolVal(lo <= f <= hi)


# raise on a bool tensor (NotImplementedError or RuntimeError, measured on torch 2.13); frac on any integer
_BOOL_RAISES = {"abs", "neg", "negative", "relu", "floor", "ceil", "round", "trunc", "frac", "positive", "fix"}
# the dtypes each dtype converts into without overflow (masked_fill's value tensor): every value fits
_WIDER = {"bool": ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"),
          "uint8": ("int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"),
          "int8": ("int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"),
          "int16": ("int32", "int64", "float16", "bfloat16", "float32", "float64"),
          "int32": ("int64", "bfloat16", "float32", "float64"), "int64": ("bfloat16", "float32", "float64"),
          "float16": ("bfloat16", "float32", "float64"), "bfloat16": ("float32", "float64"), "float32": ("float64",)}


def unary_pre(ev, name: str, x: M, what: str) -> None:
    """Raise preconditions of a same-dtype unary op (helper-105 F3)."""
    if name in _BOOL_RAISES:
        ev.pre.append((x.dtype != DTC["bool"], f"`{name}` of a bool tensor raises ({what})"))
    if name == "frac":
        ev.pre.append((is_float(x.dtype), f"`frac` of an integer tensor raises ({what})"))


def binary_pre(ev, op: str, a: M, b: M, rt, what: str) -> None:
    """Raise preconditions of ``a <op> b`` on tensors (helper-105 F2, F3, measured): ``-`` with a
    bool operand; an integer ``**`` at a negative Python int ("Integers to negative integer powers
    are not allowed")."""
    if op == "-":
        for v in (a, b):
            ok = v.dtype != DTC["bool"] if v.kind == "tensor" else z3.BoolVal(v.cat != "bool")
            ev.pre.append((ok, f"`-` with a bool operand raises ({what})"))
    if op == "**" and b.kind == "num" and b.cat == "int":
        text = f"an integer `**` at a negative exponent raises ({what})"
        ev.pre.append((is_float(rt) if b.ival is None else z3.Or(is_float(rt), b.ival >= 0), text))
        ev.value_pre.add(text)


def hypot_pre(ev, a: M, b: M, what: str) -> None:
    """``hypot`` of integer or bool tensors raises NotImplementedError (measured)."""
    for v in (a, b):
        if v.kind == "tensor":
            ev.pre.append((is_float(v.dtype), f"`hypot` of an integer tensor raises ({what})"))


def fill_tensor_pre(ev, value: M, x: M, what: str) -> None:
    """``masked_fill(mask, value)`` with a tensor ``value``: 0-dim only, and its dtype must convert
    to ``x``'s without overflow for every value it may hold (helper-105 F1, F5: a 0-d int64
    -1e9 into a float16 tensor raised where the model had proved it)."""
    ev.pre.append((z3.BoolVal(value.rank == 0), f"masked_fill takes a 0-dim value tensor ({what})"))
    wider = [z3.And(value.dtype == DTC[s], z3.Or(*[x.dtype == DTC[d] for d in ds])) for s, ds in _WIDER.items()]
    ev.pre.append((z3.Or(value.dtype == x.dtype, *wider),
                   f"masked_fill's value tensor converts to the tensor's dtype without overflow ({what})"))


def correction_of(name: str, kwargs: dict) -> int:
    """std/var's correction (1 by default; ``unbiased=False`` is 0): fewer than ``correction + 1``
    elements warn "degrees of freedom is <= 0" (helper-105 F6)."""
    if "correction" in kwargs:
        c = kwargs["correction"]
        if c.kind != "num" or c.cat != "int" or c.ival is None or not z3.is_int_value(z3.simplify(c.ival)):
            raise Unsupported(f"`{name}` with a correction that is not a literal int")
        return z3.simplify(c.ival).as_long()
    if "unbiased" in kwargs:
        u = kwargs["unbiased"]
        if u.kind != "num" or u.cat != "bool" or u.ival is None:
            raise Unsupported(f"`{name}` with unbiased= that is not a literal")
        return 1 if z3.is_true(z3.simplify(u.ival)) else 0
    return 1


def signed(v: M, out: M, node) -> M:
    """``out`` (``-v`` or ``+v`` of a number) keeping what :func:`scalar_fits` reads of ``v``: a
    finfo magnitude, and a local's observed value with its sign."""
    import ast

    out.owner = v.owner if isinstance(v.owner, tuple) else None
    if v.fact is not None and isinstance(v.fact.get("value"), float):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        out.fact, out.name = {**v.fact, "value": sign * v.fact["value"]}, ast.unparse(node)
    return out


def concat(ev, name: str, x: M, args, kwargs, what: str) -> M:
    """``torch.cat``/``stack`` of a literal list of tensors: equal ranks, equal sizes outside the
    dim (all of them for stack), one result dtype (``ev.result_type``)."""
    seq = x if x.kind == "seq" else None
    if seq is None or not seq.items or any(t.kind != "tensor" for t in seq.items):
        raise Unsupported(f"`{name}` of something other than a literal list of tensors")
    ts = seq.items
    d = ev._dim_arg(args, kwargs, 1) or 0
    r0 = ts[0].rank
    if name == "stack":
        d = ev._norm_dim(d, r0 + 1, what)
        for t in ts[1:]:
            if t.rank != r0:
                ev.pre.append((z3.BoolVal(False), f"stack of tensors of different ranks ({what})"))
            else:
                ev.pre.append((z3.And(*[a == b for a, b in zip(ts[0].shape, t.shape)]) if r0 else z3.BoolVal(True),
                                 f"stack needs equal shapes ({what})"))
        shape = list(ts[0].shape[:d]) + [z3.IntVal(len(ts))] + list(ts[0].shape[d:])
        return M("tensor", shape=shape, dtype=ev.result_type(ts), layout=_cat_layout(shape))
    if r0 == 0:
        ev.pre.append((z3.BoolVal(False), f"cat of 0-dim tensors raises ({what})"))
        return M("tensor", shape=[], dtype=ts[0].dtype)
    d = ev._norm_dim(d, r0, what)
    total = ts[0].shape[d]
    for t in ts[1:]:
        if t.rank != r0:
            ev.pre.append((z3.BoolVal(False), f"cat of tensors of different ranks ({what})"))
            continue
        ev.pre.append((z3.And(*[a == b for i, (a, b) in enumerate(zip(ts[0].shape, t.shape)) if i != d] or [z3.BoolVal(True)]),
                         f"cat needs equal sizes outside dim {d} ({what})"))
        total = total + t.shape[d]
    shape = list(ts[0].shape)
    shape[d] = total
    return M("tensor", shape=shape, dtype=ev.result_type(ts), layout=_cat_layout(shape))


def _cat_layout(shape: list):
    """cat/stack follow their inputs' suggested memory format: a contiguous (N, C, 1, 1) tensor can
    have channels_last strides, and `torch.cat([x, x], -1)` of it is not contiguous (helper-106,
    measured): a result of 4 or more dims may not be contiguous."""
    return None if len(shape) >= 4 else frozenset()
