"""Restore the original exception of checks that mend rewrote into ``torch._assert_async``.

The rule ``predicated-validation`` turns ``if cond: raise E(msg)`` into
``torch._assert_async(<not cond>, f"mend-trap:{__name__}:_MEND_TRAPS.<id>")`` and keeps
``lambda: E(msg)`` under ``<id>`` in the module-level table ``_MEND_TRAPS``. A failing
check surfaces as ``RuntimeError("mend-trap:...")`` -- synchronously in eager, and at the
end of the compiled call under the eager, aot_eager and inductor backends (torch 2.13,
CPU; the message is kept exactly). This module maps that error back to ``E(msg)``.

The mapping must happen outside the compiled region: a ``try``/``except`` inside it is
traced by Dynamo and never sees the error the graph raises at run time, and forward hooks
cannot replace an exception (``always_call`` hooks' own errors are silenced). So
:func:`install` gives the top-level module a ``forward`` whose frame Dynamo skips (its code
object marked, :func:`mend._wrap._skipped`): it calls the model's own ``forward``, whose frame
Dynamo still compiles, and translates the error on the way out. Works for
``torch.compile(model)``, ``model.compile()``, ``torch._dynamo.explain(model)`` and plain
eager calls, with no extra graph break and no compiled wrapper frame. A compiled *caller*
(``torch.compile(lambda x: model(x) * 2)``, a compiled parent module) calls that ``forward``
rather than inline it -- it first calls a disabled no-op (:func:`mend._wrap.barrier`) -- so
the restoring ``try`` runs there too, at the price of a graph break at the call.

Lookup is exact, never a guess: the marker names the module (``__name__``) and table; the
table is found, by that name, in the globals of a frame of the traceback (the mended
check's own module), else in the globals of the model's classes, else in ``sys.modules``.
When no table, or two different ones at the first of those that holds the id, answer for
it, the RuntimeError is left as it is, with a note saying why.

The restored exception is raised outside the handler of the RuntimeError, so its
``__context__`` is what eager's was; it carries one note naming the marker (shown in
tracebacks), the only difference from eager's.

Not restored: CUDA (``_assert_async`` drops the message and raises a fatal device-side
assert, pytorch#131491); a check reached from a module that was called directly rather
than through the installed top-level module.
"""
from __future__ import annotations

import functools
import re
import sys
from types import ModuleType
from typing import Any, Callable

import torch

from mend import _wrap

def order_checks() -> None:
    """Make ``torch._assert_async`` an ordered side effect under ``torch.compile``.

    Called by :mod:`mend.runtime` when Dynamo first traces an ``ordered=True`` deferred
    call (one a check follows in its function). Without this, nothing orders a check
    against the ``mend::capture`` nodes of such calls:
    Inductor's post-grad passes and scheduler move the ``mend::capture`` nodes of deferred
    prints across it, and fuse two checks into one kernel, so a failing forward could
    replay a print that eager never reached, lose one it did, or raise the second of two
    failing checks (torch 2.13, measured). Registered ``ORDERED``, every check is threaded
    through AOT autograd's effect tokens together with ``mend::capture``, as torch itself
    does for ``aten::_linalg_check_errors`` (``torch/_higher_order_ops/effects.py``); a
    check then runs as its own kernel, in program order. Its value semantics do not change.
    Cost: like every graph with effect tokens, such graphs bypass Inductor's FX graph cache
    ("Can't cache HigherOrderOperator: with_effects"; pytorch#194499 opens it for
    ``_linalg_check_errors``), so it is done only once an ordered call exists: graphs with
    checks only, or with deferred calls replayed after the graph, stay cacheable.
    """
    try:
        from torch._higher_order_ops.effects import _EffectType, _get_effect, _register_effectful_op
    except ImportError:  # pragma: no cover - older torch
        return
    for op in (torch.ops.aten._assert_async.default, torch.ops.aten._assert_async.msg):
        if _get_effect(op) is None:
            _register_effectful_op(op, _EffectType.ORDERED)


# the module is any `__name__` (`mended-model`, `01_model` load by path: a review found them unrestored;
# `my model`, `a:b`: helper-85), up to the first `:_MEND_TRAPS`
MARKER_RE = re.compile(r"mend-trap:(?P<module>.+?):(?P<table>_MEND_TRAPS\w*)\.(?P<key>[0-9a-f]{12})")
_INSTALLED = "_mend_validation_base"


def _globals_of(owner: Any) -> list[dict]:
    """Module globals of the code behind ``owner``: for a module, every function defined on
    the classes of its submodules; for a function, its own (through ``__wrapped__``)."""
    out: list[dict] = []

    def add(value: Any) -> None:
        g = getattr(getattr(value, "__func__", value), "__globals__", None)
        if isinstance(g, dict) and not any(g is h for h in out):
            out.append(g)

    if isinstance(owner, torch.nn.Module):
        for sub in owner.modules():
            for klass in type(sub).__mro__:
                for value in vars(klass).values():
                    add(value)
    else:
        seen = 0
        while owner is not None and seen < 8:
            add(owner)
            owner, seen = getattr(owner, "__wrapped__", None), seen + 1
    return out


def _candidates(module: str, table: str, err: BaseException, model: Any) -> list[list[dict]]:
    """The trap tables that the marker's (module, table) could name, most specific first: those
    of the frames the error passed through (the mended check's own module), then those of the
    model's code, then ``sys.modules``. A file loaded twice under one name has two tables whose
    exception classes differ (helper-85's F3): the raising frame's is the one that answers."""
    tiers: list[list[dict]] = [[], [], []]

    def add(tier: int, g: dict | None) -> None:
        if g is not None and g.get("__name__") == module and isinstance(g.get(table), dict):
            if not any(g[table] is f for f in tiers[tier]):
                tiers[tier].append(g[table])

    tb = err.__traceback__
    while tb is not None:
        add(0, tb.tb_frame.f_globals)
        tb = tb.tb_next
    for g in _globals_of(model) if model is not None else ():
        add(1, g)
    mod = sys.modules.get(module)
    add(2, vars(mod) if isinstance(mod, ModuleType) else None)
    return [t for t in tiers if t]


def _describe(exc: BaseException) -> tuple:
    return type(exc), repr(exc.args)


# never traced: Dynamo reached this handler while tracing a restoring forward and iterated a
# module's globals (`vars(mod)`) as another thread changed them ("dictionary changed size during
# iteration", a flaky InternalTorchDynamoError in CI); run eagerly it computes the same
@torch.compiler.disable
def restore(err: BaseException, model: Any = None) -> BaseException | None:
    """The original exception for a RuntimeError carrying a mend-trap marker, else None.

    ``model`` (a module or function) widens the search for the trap table to the globals
    of its code. When the marker is present but cannot be resolved, a note is added to
    ``err`` and None is returned: the error is left as it is rather than guessed at.
    """
    if not isinstance(err, RuntimeError) or not err.args:
        return None
    match = MARKER_RE.search(str(err))
    if match is None:
        return None
    module, table, key = match.group("module", "table", "key")
    restored, why = [], None
    for tier in _candidates(module, table, err, model):
        for tab in tier:
            factory = tab.get(key)
            if factory is None:
                continue
            try:
                exc = factory()
                if isinstance(exc, type) and issubclass(exc, BaseException):
                    exc = exc()
            except Exception as exc_err:  # the factory itself failed: do not guess
                why = f"building the original exception failed: {type(exc_err).__name__}: {exc_err}"
                continue
            if isinstance(exc, BaseException):
                restored.append(exc)
        if restored or why:   # the most specific tier that holds the key decides
            break
    if restored and len({_describe(e) for e in restored}) == 1:
        exc = restored[0]
        exc.add_note(f"(restored by mend.validation_runtime from torch._assert_async marker {match.group(0)})")
        return exc
    if restored:
        why = "two trap tables answer for it with different exceptions"
    _note(err, f"mend: could not restore the original exception for {match.group(0)}: "
               f"{why or f'no table {table} in module {module} holds it (is the mended module imported?)'}")
    return None


def _note(err: BaseException, text: str) -> None:
    if text not in getattr(err, "__notes__", ()):
        err.add_note(text)


def restoring(fn: Callable) -> Callable:
    """Wrap a function (or a ``torch.compile``d function) so mend traps raise their original
    exception. The wrapper runs outside the compiled region."""
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RuntimeError as err:
            restored, tb = restore(err, fn), err.__traceback__
            if restored is None:
                raise
        raise restored.with_traceback(tb)   # outside the handler: __context__ is what eager's was

    return functools.wraps(fn)(torch.compiler.disable(run, recursive=False))


def _restoring_forward(base_forward: Callable) -> Callable:
    def forward(self, *args, **kwargs):
        _wrap.barrier()   # a compiled caller calls this frame rather than inline it (and its `try`)
        try:
            return base_forward(self, *args, **kwargs)  # this frame is the one Dynamo compiles
        except RuntimeError as err:
            restored, tb = restore(err, self), err.__traceback__
            if restored is None:
                raise
        # raised outside the handler, so the exception's __context__ is the one eager's had (the
        # exception being handled by the caller, if any), not the RuntimeError it replaces
        raise restored.with_traceback(tb)

    return forward


def install(model: torch.nn.Module) -> torch.nn.Module:
    """Make ``model`` raise the original exception of every mend trap reached from its
    ``forward``, in eager and compiled calls alike. Idempotent; returns ``model``.

    Install it on the module you call (the top level): installing on submodules would put
    a Dynamo-skipped frame inside the compiled region. An ``OptimizedModule``
    (``torch.compile(model)``) is handled through the module it wraps. The instance's class
    is replaced by a same-named subclass: ``isinstance``, ``state_dict`` and ``deepcopy``
    are unaffected; pickling the whole module (rather than its state_dict) is not supported.
    """
    return _wrap.install(model, _INSTALLED, _restoring_forward)


def uninstall(model: torch.nn.Module) -> torch.nn.Module:
    """Undo :func:`install` (only when it is the outermost class swap)."""
    return _wrap.uninstall(model, _INSTALLED)
