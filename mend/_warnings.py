"""Where a replayed warning is attributed and whether the warnings filters may raise it:
helpers of :mod:`mend.runtime`'s ``defer_warn`` (kept apart to keep that module short)."""
from __future__ import annotations

import sys
from typing import Any

import torch


def _beyond(where: tuple, levels: int) -> tuple | None:
    """The live frame ``levels`` above the outermost traced frame of ``where`` (the compiled
    frame, which is running the replay), as ``(filename, lineno, function, globals)``, or None
    if it is not on the stack. Counted as ``warnings.warn`` counts, skipping importlib's
    internal frames (CPython's ``_next_external_frame``)."""
    filename, _, func, _ = where[-1]
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_filename == filename and frame.f_code.co_name == func):
        frame = frame.f_back
    for _ in range(levels):
        frame = frame.f_back if frame is not None else None
        while frame is not None and "importlib" in frame.f_code.co_filename and "_bootstrap" in frame.f_code.co_filename:
            frame = frame.f_back
    if frame is None:
        return None
    return frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, frame.f_globals


@torch.compiler.assume_constant_result
def _warn_raises(category: Any, filters: tuple) -> bool:
    """Whether the warnings filters in force while Dynamo traces may turn a warning of
    ``category`` into an exception (action ``"error"``: ``-W error``, pytest's
    ``filterwarnings = error``). Then the call is not deferred: raised at replay, after the
    graph, the exception would follow state the graph wrote (a buffer, a cache) that eager
    never wrote (an adversarial helper's case).

    ``filters``: ``(action, category)`` of every filter, in order, read in the trace, so
    Dynamo guards them: filters changed after compiling make it trace again. Decided from
    them alone, conservatively: any ``"error"`` filter of this category or a base counts, even
    behind a filter that would match first, because a filter's message and module patterns
    are not guarded (Dynamo cannot read a compiled regex), and a filter told apart only by
    them (``filterwarnings("error", message=...)`` replacing another) must not be missed (an
    adversarial helper's case: the warning was raised after the buffer write)."""
    category = category if isinstance(category, type) and issubclass(category, Warning) else UserWarning
    return any(action == "error" and issubclass(category, cat) for action, cat in filters)
