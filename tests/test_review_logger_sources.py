"""Review of the trace-time logger read (mend/_tracing.py, 9888c51): cases where the compiled
mended call differed from eager, on torch 2.13 and/or 2.11. Each test failed on the reviewed
tree and passes since the fix (a helper's adversarial review, 2026-12-04)."""
from __future__ import annotations

import logging

import pytest
import torch

import mend.runtime as rt
from tests.test_runtime_replay import _Records


def _logger(name):
    lg = logging.getLogger(name)
    lg.setLevel(logging.INFO)
    lg.propagate = False
    handler = _Records()
    lg.addHandler(handler)
    return lg, handler


def _eager_then_compiled(fn, handler, fullgraph=False):
    handler.seen.clear()
    fn(torch.ones(2))
    eager = list(handler.seen)
    handler.seen.clear()
    torch._dynamo.reset()
    torch.compile(fn, backend="eager", fullgraph=fullgraph)(torch.ones(2))
    return eager, list(handler.seen)


_CONST_LOGGER, _CONST_HANDLER = _logger("mend_review.constant_source")


@torch._dynamo.assume_constant_result
def _get_logger():
    return _CONST_LOGGER


def test_a_logger_with_a_constant_source_compiles():
    """Dynamo gives a logger returned by an ``assume_constant_result`` function a
    ``ConstantSource``, whose ``make_guard`` raises NotImplementedError: it was an internal
    Dynamo error (a crash). Now a source that cannot be guarded is not taken and the call is
    performed as written; the records are eager's. Known limit: Dynamo then compiles
    ``defer_log`` as a frame of its own, which defers the call with no traced user line, so
    the replayed record names ``mend/runtime.py`` instead of this file."""
    def f(x):
        rt.defer_log(_get_logger(), "info", "acr %s", x.sum())
        return x + 1

    eager, compiled = _eager_then_compiled(f, _CONST_HANDLER)
    assert [r[:3] for r in compiled] == [r[:3] for r in eager] == [("mend_review.constant_source", "INFO", "acr tensor(2.)")]
    assert eager[0][3:] == ("test_review_logger_sources.py", f.__code__.co_firstlineno + 1, "f")


def test_the_logging_module_as_target_is_deferred_in_one_graph():
    """``logging.warning(...)`` is rewritten to ``defer_log(logging, "warning", ...)``
    (the rule's own example). Before 9888c51 it was deferred with no graph break; 9888c51
    kept only a ``logging.Logger``, so the module was performed as written (graph breaks,
    ``fullgraph=True`` raised). A constant target is handed over as before."""
    handler = _Records()
    logging.root.addHandler(handler)
    try:
        def f(x):
            rt.defer_log(logging, "warning", "rows %d sum %s", x.shape[0], x.sum())
            return x + 1

        eager, compiled = _eager_then_compiled(f, handler, fullgraph=True)
    finally:
        logging.root.removeHandler(handler)
    assert compiled == eager


_ADAPTED, _ADAPTED_HANDLER = _logger("mend_review.adapter")
_ADAPTER = logging.LoggerAdapter(_ADAPTED, {"k": 1})


def test_an_adapter_performed_as_written_is_attributed_to_the_callers_line():
    """The fallback of a ``LoggerAdapter`` runs ``_as_logger(logger)`` under Dynamo; on torch
    2.11 its isinstance() on the adapter's inner ``LoggingLoggerVariable`` is unsupported, the
    graph broke inside ``defer_log`` and the record named mend/runtime.py ``defer_log``
    instead of this line (2.11). The call as written now runs in ``_log_now``, never traced,
    which skips mend's and Dynamo's frames by ``stacklevel``."""
    def f(x):
        rt.defer_log(_ADAPTER, "info", "adapter %s", x.sum())
        return x + 1

    eager, compiled = _eager_then_compiled(f, _ADAPTED_HANDLER)
    assert compiled == eager


def test_an_adapter_call_survives_strict_export():
    """The original ``adapter.info(...)`` exports (strict); the mended call raises Unsupported
    on torch 2.11 (the same isinstance() in the fallback; and 2.11 answers
    ``torch.compiler.is_exporting()`` True under torch.compile too, so export is read from
    Dynamo's own flag)."""
    class M(torch.nn.Module):
        def forward(self, x):
            rt.defer_log(_ADAPTER, "info", "adapter %s", x.sum())
            return x + 1

    torch.export.export(M(), (torch.ones(2),), strict=True)


class _Tagged(logging.Logger):
    def info(self, msg, *args, **kwargs):
        kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 1
        super().info("[tagged] " + msg, *args, **kwargs)


def test_a_logger_subclass_override_of_the_method_is_honoured():
    """A ``setLoggerClass`` subclass overriding ``info``: eager calls the override, the replay
    (``_log_at``: makeRecord + handle) bypassed it and logged the untagged text (before
    9888c51 too). Now a logger class that overrides the method or a step the replay stands in
    for is performed as written."""
    old = logging.getLoggerClass()
    logging.setLoggerClass(_Tagged)
    try:
        lg = logging.getLogger("mend_review.tagged")
    finally:
        logging.setLoggerClass(old)
    lg.setLevel(logging.INFO)
    lg.propagate = False
    handler = _Records()
    lg.addHandler(handler)

    def f(x):
        rt.defer_log(lg, "info", "sum %s", x.sum())
        return x + 1

    eager, compiled = _eager_then_compiled(f, handler)
    assert compiled == eager
    assert eager[0][2].startswith("[tagged]")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([__file__, "-q"]))
