"""Abstract values of the shape model (:class:`M`) and the transfer functions of the
submodules it knows (``nn.Linear``, ``nn.LayerNorm``/``RMSNorm``, pointwise activations):
what a call of one gives, and the preconditions (``ev.pre``) whose failure makes it raise."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from verifier.dtypes import is_float
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

    @property
    def rank(self) -> int:
        return len(self.shape)


def _num(cat, ival=None, fval=None) -> M:
    return M("num", cat=cat, ival=ival, fval=fval)


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
    return _num("int", _numel(x.shape) if name in ("numel", "nelement") else z3.IntVal(x.rank))


def _numel(shape):
    n = z3.IntVal(1)
    for d in shape:
        n = n * d
    return n
