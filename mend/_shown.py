"""How :mod:`mend.runtime` shows a replayed tensor snapshot as the original tensor printed:
``grad_fn=<...>``, ``requires_grad=True`` and ``Parameter containing:`` come from the traced
tensor's autograd metadata, which the snapshot (a graph output) no longer has."""
from __future__ import annotations

import threading
from typing import Any

import torch


def _grad_fn_name(t: torch.Tensor) -> str | None:
    fn = t.grad_fn
    if fn is None:
        return None
    name = type(fn).__name__
    if name == "Error":  # autograd's placeholder node: Dynamo's fake, not what eager shows
        return None
    return fn.name().rsplit("::", 1)[-1] if name == "CppFunction" else name  # as torch._tensor_str


# torch's print options (torch.set_printoptions), read at a deferred call and restored at its replay
_PRINT_OPTION_NAMES = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")


def print_options() -> tuple:
    """torch's print options now, in :data:`_PRINT_OPTION_NAMES` order (traced by Dynamo:
    read in a trace, each is guarded)."""
    import torch._tensor_str as tensor_str

    return tuple(getattr(tensor_str.PRINT_OPTS, n) for n in _PRINT_OPTION_NAMES)


def print_options_kwargs(options: tuple) -> dict:
    """``options`` as keyword arguments of ``torch._tensor_str.printoptions``."""
    return dict(zip(_PRINT_OPTION_NAMES, options))


class _Shown:
    """A snapshot of a non-leaf tensor that prints as the tensor did (``grad_fn=<...>``).

    The snapshot itself is detached; ``str``/``repr``/``format``/``float``/``int`` behave
    as on the original tensor, other attributes are the snapshot's.
    """

    __slots__ = ("tensor", "grad_fn_name")

    def __init__(self, tensor: torch.Tensor, grad_fn_name: str) -> None:
        self.tensor = tensor
        self.grad_fn_name = grad_fn_name

    def __str__(self) -> str:
        return _repr_with_suffix(self.tensor, f"grad_fn=<{self.grad_fn_name}>")

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        if self.tensor.dim() == 0:  # as Tensor.__format__
            return self.tensor.item().__format__(spec)
        return object.__format__(self, spec)

    def __float__(self) -> float:
        return float(self.tensor)

    def __int__(self) -> int:
        return int(self.tensor)

    def __index__(self) -> int:
        return self.tensor.__index__()

    def __getattr__(self, name: str) -> Any:
        if name in _Shown.__slots__:
            raise AttributeError(name)
        return getattr(self.tensor, name)


_SUFFIX_LOCK = threading.Lock()


def _repr_with_suffix(t: torch.Tensor, suffix: str) -> str:
    """``repr(t)`` with one more suffix, placed as ``torch._tensor_str`` places ``grad_fn``."""
    import torch._tensor_str as tensor_str

    if t.layout != torch.strided:
        return repr(t)
    me = threading.get_ident()
    with _SUFFIX_LOCK:
        original = tensor_str._add_suffixes

        def add_suffixes(text, suffixes, indent, force_newline):
            if threading.get_ident() == me:
                suffixes = [*suffixes, suffix]
            return original(text, suffixes, indent, force_newline)

        tensor_str._add_suffixes = add_suffixes
        try:
            return torch.Tensor.__repr__(t)
        finally:
            tensor_str._add_suffixes = original


def _as_shown(t: torch.Tensor, show: tuple | None) -> Any:
    """The replayed value of a captured tensor: prints like the original did."""
    if show is None:
        return t
    grad_fn, leaf_requires_grad, is_param, requires_grad = show
    if is_param:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if grad_fn is not None:
        return _Shown(t, grad_fn)
    if leaf_requires_grad:
        return t.requires_grad_(True)
    return t
