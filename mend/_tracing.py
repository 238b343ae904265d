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
_taken: list = [0]


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


NOT_TAKEN, LOGGER, CONSTANT = 0, 1, 2   # what take_logger found
# what a replay (mend.runtime._log_at: makeRecord + handle) does in place of the method: a
# logger class that overrides any of these (or the method) is performed as written
_REPLAYED_AS = ("_log", "makeRecord", "handle", "isEnabledFor", "findCaller")


def plain_logger(cls: type, method: str, instance: Any = None) -> bool:
    """Whether logger class ``cls`` takes ``method`` and the steps a replay stands in for
    from ``logging.Logger`` itself (a ``setLoggerClass`` subclass that overrides ``info``
    or ``findCaller`` would be bypassed by the replay), and ``instance``, when given, sets
    none of them as its own attribute (``mock.patch.object(logger, "info")``)."""
    names = (method, *_REPLAYED_AS)
    if instance is not None and any(name in getattr(instance, "__dict__", {}) for name in names):
        return False
    return all(getattr(cls, name, None) is getattr(logging.Logger, name, None) for name in names)


def take_logger(var: Any, method: str) -> None:
    """At trace time (a ``comptime`` callback; ``var`` the ``ComptimeVar`` of the call's
    target): keep a ``logging.Logger`` whose class is :func:`plain_logger` for ``method``,
    guarded by identity (ID_MATCH, as Dynamo guards ``id()`` of a logger on torch >= 2.12);
    or note that the target is the ``logging`` module (``logging.warning(...)``), which is
    handed over as it is; else nothing (a ``LoggerAdapter``, a logger whose
    source cannot be guarded): the call is then performed as written.

    torch 2.11's Dynamo answers neither ``isinstance()`` nor ``id()`` on a logger (its
    ``LoggingLoggerVariable`` has no ``python_type``): a deferred log call broke the graph
    there (measured on an H200, benchmarks/results/gpu.md). Reading the variable here works
    the same on every release of the declared range.
    """
    from torch._dynamo.guards import GuardBuilder, install_guard

    _taken[0] = NOT_TAKEN
    if var.is_python_constant():
        # the logging module (logging.warning -> root); another module or class named like
        # a logger (absl's logging) is performed as written: its calls are not Logger's
        _taken[0] = CONSTANT if var.as_python_constant() is logging else NOT_TAKEN
        return
    vt = var._i_will_not_complain_if_bc_breaks_VariableTracker()
    value, source = getattr(vt, "value", None), getattr(vt, "source", None)
    if not isinstance(value, logging.Logger) or source is None or not plain_logger(type(value), method):
        return
    try:
        guard = source.make_guard(GuardBuilder.ID_MATCH)
    except Exception:  # noqa: BLE001 - a source with no guard (ConstantSource): as written
        return
    install_guard(guard)
    _taken[0] = value


@torch._dynamo.assume_constant_result
def took_logger() -> int:
    """What :func:`take_logger` found: NOT_TAKEN, LOGGER or CONSTANT (a trace-time constant)."""
    return LOGGER if isinstance(_taken[0], logging.Logger) else _taken[0]


def taken_logger_id() -> int | None:
    """The ``id`` of the logger :func:`take_logger` kept, which is then forgotten."""
    value, _taken[0] = _taken[0], NOT_TAKEN
    return id(value) if isinstance(value, logging.Logger) else None


@torch._dynamo.assume_constant_result
def dynamo_exporting() -> bool:
    """Whether Dynamo is tracing for ``torch.export`` (strict): torch 2.11's Dynamo answers
    ``torch.compiler.is_exporting()`` True under a plain ``torch.compile`` too."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        return bool(InstructionTranslator.current_tx().export)
    except Exception:  # pragma: no cover - private API moved: not exporting
        return False


def in_subgraph() -> bool:
    """Whether Dynamo is tracing the body of a higher-order operator (not the root graph)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        return not tx.output.is_root_tracer()
    except Exception:  # pragma: no cover - private API moved: the safe answer
        return True
