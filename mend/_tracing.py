"""Trace-time helpers of :mod:`mend.runtime`: what Dynamo is tracing (the user frames, the
logger a deferred call names, whether a higher-order operator's body is being traced).

Each runs while Dynamo traces -- inside an ``assume_constant_result`` function or a
``comptime`` callback -- never in the compiled graph.
"""
from __future__ import annotations

import logging
import sys
from typing import Any

import torch

TRACED_LOGGER = -2   # a logger_id meaning: the logger take_logger() read at trace time
_taken: list = [None]


def trace_stack(skip: str) -> tuple | None:
    """The user frames Dynamo is tracing at the current call, innermost first, without the
    frames of file ``skip``.

    Each is ``(filename, lineno, function, module globals or None)``. From
    ``torch._guards.TracingContext.extract_stack()`` (the stack Dynamo reports break
    sites with); used only to attribute replayed warnings and log records to the
    original line. None when unavailable.
    """
    try:
        stack = torch._guards.TracingContext.extract_stack()
    except Exception:  # pragma: no cover - private API moved
        return None
    frames = []
    for fs in reversed(stack):
        if fs.filename == skip:
            continue
        frames.append((fs.filename, fs.lineno or 0, fs.name, _module_globals(fs.filename)))
    return tuple(frames) or None


def _module_globals(filename: str) -> dict | None:
    for mod in list(sys.modules.values()):
        if getattr(mod, "__file__", None) == filename:
            return vars(mod)
    return None


def resolve_logger(ident: int) -> Any:
    """The ``logging.Logger`` with this ``id``, among the loggers ``logging.getLogger`` made."""
    for lg in (logging.root, *logging.Logger.manager.loggerDict.values()):
        if id(lg) == ident and isinstance(lg, logging.Logger):
            return lg
    return None


def take_logger(var: Any) -> None:
    """At trace time (a ``comptime`` callback; ``var`` its ``ComptimeVar``): keep the
    ``logging.Logger`` Dynamo's variable holds, guarded by identity (ID_MATCH, as Dynamo
    guards ``id()`` of a logger on torch >= 2.12), or None when the variable holds no logger
    or has no source to guard.

    torch 2.11's Dynamo answers neither ``isinstance()`` nor ``id()`` on a logger (its
    ``LoggingLoggerVariable`` has no ``python_type``): a deferred log call broke the graph
    there (measured on an H200, benchmarks/results/gpu.md). Reading the variable here works
    the same on every release of the declared range.
    """
    from torch._dynamo.guards import GuardBuilder, install_guard

    vt = var._i_will_not_complain_if_bc_breaks_VariableTracker()
    value, source = getattr(vt, "value", None), getattr(vt, "source", None)
    _taken[0] = value if isinstance(value, logging.Logger) and source is not None else None
    if _taken[0] is not None:
        install_guard(source.make_guard(GuardBuilder.ID_MATCH))


@torch._dynamo.assume_constant_result
def took_logger() -> bool:
    """Whether :func:`take_logger` kept a logger (a trace-time constant)."""
    return _taken[0] is not None


def taken_logger_id() -> int | None:
    """The ``id`` of the logger :func:`take_logger` kept, which is then forgotten."""
    value, _taken[0] = _taken[0], None
    return None if value is None else id(value)


def in_subgraph() -> bool:
    """Whether Dynamo is tracing the body of a higher-order operator (not the root graph)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        return not tx.output.is_root_tracer()
    except Exception:  # pragma: no cover - private API moved: the safe answer
        return True
