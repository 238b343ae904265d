"""Tensor layouts for the shape model (:class:`verifier.shapes.ShapeEval`): whether a tensor is
known contiguous, which is what ``view`` needs (it raises "view size is not compatible with
input tensor's size and stride" where the strides do not fit; ``reshape`` copies instead).

Strides themselves are not modelled. :attr:`verifier.module_shapes.M.layout` is the empty set
for a tensor known contiguous, a set of leaf names for one contiguous if those leaves are (their
layout is an observation of the example), and None for one that may not be contiguous (after a
transpose, permute, expand or strided index; ``.contiguous()`` makes it contiguous again).
Found by helper-105 (F4): ``x.t().view(n)`` on a torch.where side had been proved.
"""
from __future__ import annotations

import ast
from dataclasses import replace

import z3

from verifier.module_shapes import M
from verifier.smt import TierUnknown, Unsupported


def result_layout(node: ast.AST, out: M, seen: list[M]) -> M:
    """``out`` (the tensor ``node`` evaluates to) with its layout: ``.contiguous()`` (or any call
    with ``memory_format=torch.contiguous_format``) is contiguous, a call with another
    ``memory_format`` may not be; any other result is contiguous when the tensors it was computed from (``seen``:
    the values evaluated directly under ``node``) are, a conservative rule (TensorIterator gives
    an elementwise result its inputs' stride order), unless its own op set it to None."""
    fmt = next((k.value for k in node.keywords if k.arg == "memory_format"), None) if isinstance(node, ast.Call) else None
    if fmt is not None:   # helper-106: `x.contiguous(memory_format=torch.channels_last)`, `clone`, `to`, `*_like`
        layout = frozenset() if isinstance(fmt, ast.Attribute) and fmt.attr == "contiguous_format" else None
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "contiguous" \
            and not node.args:
        layout = frozenset()
    else:
        layout = out.layout
        # a method's tensor (`x.t().abs()`: the owner) and a literal list's tensors (`torch.cat([a, b])`)
        inputs = [v.owner if v.kind == "method" and isinstance(v.owner, M) else v for v in seen]
        inputs += [it for v in seen if v.kind == "seq" for it in v.items or []]
        for v in inputs:
            if v.kind == "tensor" and v is not out:
                layout = None if layout is None or v.layout is None else layout | v.layout
    return out if layout == out.layout else replace(out, layout=layout)   # never mutate: a cached leaf


def index_layout(parts: list[ast.expr], rank: int, n_real: int) -> frozenset | None:
    """The layout of ``x[parts]`` for a contiguous ``x`` of rank ``rank`` (``n_real`` indices
    that are not None or ``...``): contiguous after leading integer indices, then one slice, then
    whole dims (``x[0, 2:5, :]``); None (may not be) otherwise (``x[:, 1:]``, ``x[1:3, 0]``)."""
    state = "ints"
    for p in parts:
        if isinstance(p, ast.Constant) and p.value is None:
            continue
        if isinstance(p, ast.Constant) and p.value is Ellipsis:
            state = "whole" if rank - n_real and state == "ints" else state
        elif isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None:
            state = "whole" if state == "ints" else state
        elif isinstance(p, ast.Slice) and state == "ints":
            state = "sliced"
        elif isinstance(p, ast.Slice) or state != "ints":
            return None
    return frozenset()


def need_contiguous(ev, x: M, what: str) -> None:
    """``view`` is shown not to raise only on a tensor known contiguous. Raises
    :class:`Unsupported` where ``x`` may not be, and :class:`TierUnknown` where it is contiguous if
    leaves are, which only the observed tier assumes (and says so in ``ev.assume``)."""
    if x.layout is None:
        why = "after a transpose, permute, expand, strided index, memory_format= or a cat of 4+ dims" if x.fact is None else \
            "its layout was not recorded" if "contiguous" not in x.fact else "it was not contiguous on the example"
        raise Unsupported(f"`{what}` views a tensor that may not be contiguous ({why}): strides are not "
                          "modelled, and view raises where they do not fit")
    if x.layout and ev.tier != "observed":
        raise TierUnknown(f"`{what}` needs strides that fit: " + ", ".join(f"`{n}`" for n in sorted(x.layout))
                          + " may be non-contiguous for every layout this tier allows")
    for leaf in sorted(x.layout):
        ev.assume.append((z3.BoolVal(True), f"`{leaf}` is contiguous, as on the example (`{what}` needs strides that fit)"))
