"""The class swap behind :func:`mend.runtime.install` and :func:`mend.validation_runtime.install`.

Both give the instance a same-named subclass whose ``forward`` Dynamo skips (its code
object marked, as ``torch.compiler.disable(..., recursive=False)`` would) and which calls the model's own
``forward``, the frame Dynamo compiles: what the wrapper does runs outside the compiled
region, with no extra graph break. The two compose in either order; each is idempotent
and undone only while it is the outermost swap.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

# Wrapper = (base forward) -> forward
Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]
_SUBCLASSES: dict[tuple[type, str], type] = {}


def _skipped(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its frame run by CPython, not Dynamo, and the frames it calls still compiled:
    ``torch.compiler.disable(fn, recursive=False)``'s meaning, without its wrapper, which Dynamo
    compiles as a frame of its own with a graph break at the call: measured, 0.16 ms added to
    every compiled call (a 20-layer MLP: 0.10 -> 0.26 ms; hf:biogpt's steady state 0.72x by it,
    benchmarks/steady_paired.py). The wrapper where ``torch._dynamo.eval_frame.skip_code`` is missing."""
    try:
        from torch._dynamo.eval_frame import skip_code
    except ImportError:  # pragma: no cover - depends on the torch release
        return torch.compiler.disable(fn, recursive=False)
    # a frame Dynamo starts is skipped; a compiled *caller* would still inline ``fn``
    # (`torch.compile(lambda x: m(x) * 2)`): each wrapper therefore first calls a disabled
    # function (:func:`barrier`), which Dynamo cannot inline, so it calls ``fn`` instead
    # (an adversarial review found the restoring `try` traced and never run without it)
    skip_code(fn.__code__)
    return fn


@torch.compiler.disable
def barrier() -> None:
    """Nothing, out of Dynamo's reach: a wrapper that calls it first is never inlined into a
    compiled caller (Dynamo breaks the graph before the call and calls the wrapper)."""


def _subclass(base: type, marker: str, wrap: Wrapper) -> type:
    key = (base, marker)
    if key not in _SUBCLASSES:
        forward = functools.update_wrapper(wrap(base.forward), base.forward)
        namespace = {"forward": _skipped(forward), marker: base,
                     "__module__": base.__module__, "__qualname__": base.__qualname__}
        _SUBCLASSES[key] = type(base.__name__, (base,), namespace)
    return _SUBCLASSES[key]


def _target(model: Any) -> torch.nn.Module:
    target = getattr(model, "_orig_mod", model)  # an OptimizedModule: the module it wraps
    if not isinstance(target, torch.nn.Module):
        raise TypeError(f"install() needs an nn.Module, got {type(model).__name__}")
    return target


def install(model: Any, marker: str, wrap: Wrapper) -> Any:
    """Swap ``model``'s class for the wrapped subclass unless ``marker`` is already in its
    MRO. Returns ``model``. Raises TypeError when it is not an ``nn.Module``."""
    target = _target(model)
    if not any(marker in vars(k) for k in type(target).__mro__):
        target.__class__ = _subclass(type(target), marker, wrap)
    return model


def uninstall(model: Any, marker: str) -> Any:
    """Undo :func:`install` when its swap is the outermost one; otherwise do nothing."""
    target = _target(model)
    base = vars(type(target)).get(marker)
    if base is not None:
        target.__class__ = base
    return model
