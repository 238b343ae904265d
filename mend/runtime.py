"""Deferred side effects: capture ``print``/logging/``warnings`` inside a compiled region,
replay them outside it, in program order.

This is the runtime half of the "deferred side effects" rule
(:mod:`mend.rules.deferred_side_effects`). The idea is GraphMend's "[Defer]" transformation
(Kashmira et al., arXiv 2509.16248, §4): effects are buffered with their tensor
arguments cloned where they occur, and replayed after the graph in program order, also
when the forward raises; flushing happens outside the compiled region because a
``try/finally`` inside it makes Dynamo give up on the frame.

How it works (torch 2.13, measured; see ``tests/test_rule_deferred_effects.py``):

* **Eager** (``torch.compiler.is_compiling()`` is False): ``defer_*`` first replays
  anything still pending, then performs the effect at once. A mended module run eagerly
  prints, logs and warns exactly when, and as, the original does.
* **Compiled**: Dynamo inlines ``defer_*``. The constant part of the call (message,
  logger, category, constant arguments) is interned once per trace by :func:`_intern`
  (``torch._dynamo.assume_constant_result``: it runs at trace time, and the key it
  returns is a constant of the graph). What varies per call -- tensors and (symbolic)
  ints -- goes to the custom operator ``mend::capture``, registered as an ``ORDERED``
  effect, so neither AOT autograd nor Inductor drops or reorders it. It sits in the graph
  like any other operator: no graph break under the eager, aot_eager and inductor
  backends, also inside a child module's ``forward`` (where
  ``reorderable_logging_functions`` silently drops calls), also with ``dynamic=True``.
  The operator runs at the position of the original call, so it sees a tensor before any
  later in-place update, and clones it.

  - Inside a capture scope (:func:`install`, :func:`capture`) the operator appends the
    snapshot to a per-thread buffer, replayed when the scope exits, normally or by an
    exception -- the paper's design: no formatting, host sync or I/O inside the graph.
  - Outside any scope it performs the effect immediately, from inside the graph, at its
    own position. The output is the same; only the formatting happens mid-graph.

Replayed tensors print as the originals did: Dynamo's fake tensors carry the autograd
metadata the run-time ones lack, so the operator's fake kernel notes each tensor's
``grad_fn`` name / ``requires_grad`` / ``Parameter``-ness at trace time, and the replay
shows ``tensor(..., grad_fn=<AddmmBackward0>)`` exactly as eager would.

Differences from eager that remain (documented, and tested where they matter):

* ``warnings``: category and message are identical, and so is the once-per-location
  bookkeeping of the default filter (the replay uses ``warn_explicit`` with the traced
  line and its module's registry). The filename and line are those of the mended source
  (one line below the original when the rewrite added an import). A ``stacklevel``
  reaching past the compiled frame is attributed to this module. Under
  ``simplefilter("error")`` a deferred warning raises when the scope exits instead of at
  its line (same exception; when the forward also raised, it is chained to it).
* ``logging``: message, level, logger and arguments are identical; a replayed standard
  method (``info``, ``warning``...) reports the mended source line as ``pathname`` /
  ``lineno`` / ``funcName``; ``exc_info``/``stack_info`` are not supported (the rule
  declines them). A ``logging.Logger`` that ``logging.getLogger`` did not make cannot be
  found again at trace time: the call then runs as written (a graph break, as before).
* Output produced by code that is *not* deferred (the eager code of another graph
  break) within a scope is not held back, so it can overtake buffered effects.
* A ``grad_fn`` that Dynamo's fake tensors do not know (its placeholder ``Error`` node,
  seen when Dynamo re-traces a frame after an uncaught exception) is not shown.
* The operator runs Python: CUDA graphs (``mode="reduce-overhead"``) cannot capture it.
* A graph holding a capture threads AOT autograd's effect tokens, and such graphs bypass
  Inductor's FX graph cache (torch 2.13: "Can't cache HigherOrderOperator: with_effects"):
  a warm-cache cold start compiles them again (see benchmarks/README.md).
"""
from __future__ import annotations

import builtins
import contextlib
import logging
import sys
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from mend import _wrap
from mend.validation_runtime import order_checks

__all__ = ["defer_print", "defer_log", "defer_warn", "fmt", "flush", "install", "uninstall", "capture", "pending"]

# Logger methods whose record location can be attributed to the original call site
# (methods that log directly; ``warning_once``-style wrappers log from their own frame).
_STANDARD_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "fatal", "log"})

# Layout tokens (see _flatten/_rebuild).
_TENSOR, _SYM, _CONST, _FMT, _SIZE, _SEQ, _DICT = "T", "S", "C", "F", "Z", "L", "D"
# ``file=sys.stdout`` / ``sys.stderr`` of a deferred print, resolved again at replay.
_STDOUT, _STDERR = "<sys.stdout>", "<sys.stderr>"


class Fmt:
    """A lazily formatted string: ``template.format(*args, **kwargs)`` at replay.

    The rule rewrites an f-string argument (``f"h={h:.2f}"``) into
    ``fmt("h={:.2f}", h)`` so that a tensor in it is snapshotted instead of being
    formatted inside the graph (which Dynamo cannot do). ``str()`` gives the text.
    """

    def __init__(self, template: str, *args: Any, **kwargs: Any) -> None:
        self.template = template
        self.args = args
        self.kwargs = kwargs

    def __str__(self) -> str:
        return self.template.format(*[_materialize(a) for a in self.args],
                                    **{k: _materialize(v) for k, v in self.kwargs.items()})

    __repr__ = __str__


fmt = Fmt


@dataclass
class _Site:
    """What one traced call site needs at replay, besides its tensors and sizes."""

    kind: str  # "print" | "log" | "warn"
    target: Any  # the logger (log), None otherwise
    method: str | None
    layout: tuple
    consts: tuple
    names: tuple  # keyword names, in order, after the positional arguments
    where: tuple | None = None  # ((filename, lineno, funcname, globals), ...) innermost first
    shows: list | None = None  # per tensor: (grad_fn name, leaf requiring grad, Parameter, requires_grad)


_SITES: list[_Site] = []
_FILE_GLOBALS: dict[str, dict] = {}


@dataclass
class _State(threading.local):
    depth: int = 0
    pending: list = field(default_factory=list)


_STATE = _State()


# --------------------------------------------------------------------------- tracing


def _trace_stack() -> tuple | None:
    """The user frames Dynamo is tracing at the current call, innermost first.

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
        if fs.filename == __file__:
            continue
        frames.append((fs.filename, fs.lineno or 0, fs.name, _module_globals(fs.filename)))
    return tuple(frames) or None


def _module_globals(filename: str) -> dict | None:
    for mod in list(sys.modules.values()):
        if getattr(mod, "__file__", None) == filename:
            return vars(mod)
    return None


def _resolve_logger(ident: int) -> Any:
    """The ``logging.Logger`` with this ``id``, among the loggers ``logging.getLogger`` made."""
    for lg in (logging.root, *logging.Logger.manager.loggerDict.values()):
        if id(lg) == ident and isinstance(lg, logging.Logger):
            return lg
    return None


@torch._dynamo.assume_constant_result
def _intern(kind: str, method: Any, layout: tuple, names: tuple, logger_id: int | None,
            target: Any, *consts: Any) -> int:
    """Record a call site's constant part at trace time; the returned key is a graph constant.

    Dynamo hands a ``logging.Logger`` to no function, so the caller passes its ``id`` and
    the logger is found again here. Returns -1 when it cannot be (a logger not made by
    ``logging.getLogger``): the caller then performs the call itself (a graph break, as
    without the rewrite).
    """
    if logger_id is not None:
        target = _resolve_logger(logger_id)
        if target is None:
            return -1
    _SITES.append(_Site(kind, target, method, layout, consts, names, _trace_stack()))
    return len(_SITES) - 1


@torch.library.custom_op("mend::capture", mutates_args=())
def _capture(key: int, tensors: list[torch.Tensor], ints: list[int], anchor: torch.Tensor) -> None:
    """The graph node of a deferred effect: snapshot into the buffer, or perform now.

    ``anchor`` (an empty tensor, unused) gives the node a device. Inductor's scheduler
    flushes the kernels it has fused so far before an extern kernel only when that kernel
    has a device (``Scheduler.codegen``, torch 2.13); a deviceless node lets the CPU
    backend emit the pending fused kernel after this node, while the buffers that kernel
    reads were already freed before it: ``UnboundLocalError`` in the generated code, or
    work of the original code moved across the effect (measured on hf:marian).
    """
    if _STATE.depth > 0:
        _STATE.pending.append((key, [t.detach().clone() for t in tensors], list(ints)))
    else:
        _perform(key, list(tensors), list(ints))


@_capture.register_fake
def _capture_fake(key, tensors, ints, anchor):
    """Shape function; also notes how each tensor prints (``grad_fn=<...>``).

    Dynamo's fake tensors carry autograd metadata; the tensors the operator gets at run
    time do not (AOT autograd runs the forward without it). The first call for a key is
    Dynamo's, later ones (AOT autograd's) have no autograd metadata and are ignored.
    """
    site = _SITES[key] if 0 <= key < len(_SITES) else None
    if site is not None and site.shows is None:
        site.shows = [(_grad_fn_name(t), bool(t.requires_grad and t.is_leaf), isinstance(t, torch.nn.Parameter),
                       bool(t.requires_grad)) for t in tensors]
    return None


def _grad_fn_name(t: torch.Tensor) -> str | None:
    fn = t.grad_fn
    if fn is None:
        return None
    name = type(fn).__name__
    if name == "Error":  # autograd's placeholder node: Dynamo's fake, not what eager shows
        return None
    return fn.name().rsplit("::", 1)[-1] if name == "CppFunction" else name  # as torch._tensor_str


def _register_ordered_effect() -> None:
    """Mark ``mend::capture`` as an ordered side effect (kept, never reordered or deduplicated).

    ``CustomOpDef.register_effect`` on torch 2.13; the private registry before it.
    """
    try:
        from torch._library.effects import EffectType

        _capture.register_effect(EffectType.ORDERED)
    except (ImportError, AttributeError):  # pragma: no cover - older torch
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

        _register_effectful_op(torch.ops.mend.capture.default, _EffectType.ORDERED)


_register_ordered_effect()
order_checks()  # captures and checks in one token chain: a failing check replays exactly what eager showed


def _flatten(value: Any, layout: list, tensors: list, ints: list, consts: list) -> None:
    """Split one argument into graph values (tensors, symbolic ints) and constants.

    Plain lists, tuples and dicts are looked into (a tensor or a size in them is captured
    too); any other object is a constant of the trace. Traced by Dynamo: only type tests
    and list appends.
    """
    if isinstance(value, torch.Tensor):
        layout.append(_TENSOR)
        tensors.append(value)
    elif type(value) is int:  # also a SymInt under dynamic shapes (int subclasses stay constants)
        layout.append(_SYM)
        ints.append(value)
    elif isinstance(value, torch.Size):
        layout.append((_SIZE, len(value)))
        for dim in value:
            layout.append(_SYM)
            ints.append(dim)
    elif type(value) in (list, tuple):
        layout.append((_SEQ, type(value) is list, len(value)))
        for item in value:
            _flatten(item, layout, tensors, ints, consts)
    elif type(value) is dict:
        layout.append((_DICT, len(value)))
        for k in value:
            layout.append(_CONST)
            consts.append(k)
            _flatten(value[k], layout, tensors, ints, consts)
    elif isinstance(value, Fmt):
        layout.append((_FMT, len(value.args), tuple(value.kwargs)))
        consts.append(value.template)
        for a in value.args:
            _flatten(a, layout, tensors, ints, consts)
        for k in value.kwargs:
            _flatten(value.kwargs[k], layout, tensors, ints, consts)
    else:
        layout.append(_CONST)
        consts.append(value)


def _record(kind: str, target: Any, method: str | None, args: tuple, kwargs: dict) -> bool:
    """Put one deferred call into the graph. False when it must be performed directly."""
    layout: list = []
    tensors: list = []
    ints: list = []
    consts: list = []
    for a in args:
        _flatten(a, layout, tensors, ints, consts)
    for k in kwargs:
        _flatten(kwargs[k], layout, tensors, ints, consts)
    logger_id = None
    if isinstance(target, logging.Logger):
        logger_id = id(target)  # guarded by ID_MATCH
        target = None
    key = _intern(kind, method, tuple(layout), tuple(kwargs), logger_id, target, *consts)
    if key < 0:
        return False
    _capture(key, tensors, ints, torch.empty(0))
    return True


# --------------------------------------------------------------------------- replay


def _materialize(value: Any) -> Any:
    return str(value) if isinstance(value, Fmt) else value


def _rebuild(site: _Site, tensors: list, ints: list) -> tuple[list, dict]:
    tokens = iter(site.layout)
    ts, ns, cs = iter(tensors), iter(ints), iter(site.consts)

    def one() -> Any:
        tok = next(tokens)
        if tok == _TENSOR:
            return next(ts)
        if tok == _SYM:
            return next(ns)
        if tok == _CONST:
            return next(cs)
        if tok[0] == _SIZE:
            return torch.Size([one() for _ in range(tok[1])])
        if tok[0] == _SEQ:
            items = [one() for _ in range(tok[2])]
            return items if tok[1] else tuple(items)
        if tok[0] == _DICT:
            return {one(): one() for _ in range(tok[1])}
        template = next(cs)
        fargs = [one() for _ in range(tok[1])]
        fkw = {k: one() for k in tok[2]}
        return str(Fmt(template, *fargs, **fkw))

    values = []
    with contextlib.suppress(StopIteration):
        while True:
            values.append(one())
    n = len(values) - len(site.names)
    return values[:n], dict(zip(site.names, values[n:]))


def _as_logger(target: Any) -> logging.Logger | None:
    """The ``logging.Logger`` a call on ``target`` logs through (``logging.info`` -> root)."""
    if target is logging:
        return logging.root
    if isinstance(target, logging.LoggerAdapter):
        return _as_logger(target.logger)
    return target if isinstance(target, logging.Logger) else None


@contextlib.contextmanager
def _located(logger: logging.Logger | None, where: tuple | None, stacklevel: int) -> Iterator[None]:
    """Attribute a replayed record to the traced call site instead of this module."""
    if where is None or logger is None:
        yield
        return
    frame = where[min(max(stacklevel, 1), len(where)) - 1]

    def find_caller(stack_info: bool = False, stacklevel: int = 1):
        return frame[0], frame[1], frame[2], None

    logger.findCaller = find_caller  # instance attribute, removed below
    try:
        yield
    finally:
        del logger.findCaller


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


def _perform(key: int, tensors: list, ints: list) -> None:
    site = _SITES[key]
    shows = site.shows or [None] * len(tensors)
    tensors = [_as_shown(t.detach(), show) for t, show in zip(tensors, shows)]
    args, kwargs = _rebuild(site, tensors, ints)
    if site.kind == "print":
        f = kwargs.get("file")
        if isinstance(f, str) and f in (_STDOUT, _STDERR):  # the stream current at replay
            kwargs["file"] = sys.stdout if f == _STDOUT else sys.stderr
        builtins.print(*args, **kwargs)
    elif site.kind == "log":
        method = getattr(site.target, site.method)
        if site.method in _STANDARD_LOG_METHODS:
            with _located(_as_logger(site.target), site.where, kwargs.get("stacklevel", 1)):
                method(*args, **kwargs)
        else:
            method(*args, **kwargs)
    else:
        message, category, stacklevel, source = args
        _warn_at(message, category, stacklevel, source, site.where)


def _warn_at(message: Any, category: Any, stacklevel: int, source: Any, where: tuple | None) -> None:
    """``warnings.warn`` as if called from the traced frame ``stacklevel`` levels up."""
    if where is None or stacklevel > len(where) or stacklevel < 1:
        warnings.warn(message, category, stacklevel=2, source=source)
        return
    filename, lineno, _, g = where[stacklevel - 1]
    if g is None:  # a module loaded outside sys.modules: one registry per file
        g = _FILE_GLOBALS.setdefault(filename, {"__name__": filename.rsplit("/", 1)[-1].removesuffix(".py")})
    if isinstance(message, Warning):
        category = message.__class__
    elif category is None:
        category = UserWarning
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise TypeError(f"category must be a Warning subclass, not '{type(category).__name__}'")
    module = g.get("__name__", "<string>")
    registry = g.setdefault("__warningregistry__", {})
    # no module_globals: with them CPython's warn_explicit asks the module's loader for the
    # source line before it consults the registry -- the whole file read and decoded on every
    # call (0.4 ms for transformers' modeling_utils.py, hf:layoutlmv3). warnings.warn passes none.
    warnings.warn_explicit(message, category, filename, lineno, module, registry, None, source)


# --------------------------------------------------------------------------- public API


def defer_print(*args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None,
                flush: bool = False) -> None:
    """``print(*args, sep=sep, end=end, file=file, flush=flush)``, deferred under torch.compile.

    ``file`` may be None, ``sys.stdout`` or ``sys.stderr`` (resolved again at replay).
    """
    if torch.compiler.is_compiling():
        stream = _STDOUT if file is sys.stdout else _STDERR if file is sys.stderr else file
        if _record("print", None, None, args, {"sep": sep, "end": end, "file": stream, "flush": flush}):
            return
    _drain()
    builtins.print(*[_materialize(a) for a in args], sep=sep, end=end, file=file, flush=flush)


def defer_log(logger: Any, method: str, *args: Any, **kwargs: Any) -> None:
    """``getattr(logger, method)(*args, **kwargs)``, deferred under torch.compile.

    Keeps ``%``-style arguments for the logger to format. Methods such as transformers'
    ``warning_once`` (an ``lru_cache``) are replayed through the same method, so they stay
    once per process.
    """
    if torch.compiler.is_compiling():
        if _record("log", logger, method, args, kwargs):
            return
    _drain()
    args = tuple(_materialize(a) for a in args)
    if method in _STANDARD_LOG_METHODS and _as_logger(logger) is not None:
        kwargs = dict(kwargs, stacklevel=kwargs.get("stacklevel", 1) + 1)  # skip this frame
    getattr(logger, method)(*args, **kwargs)


def defer_warn(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None) -> None:
    """``warnings.warn(message, category, stacklevel, source)``, deferred under torch.compile."""
    if torch.compiler.is_compiling():
        if _record("warn", None, None, (message, category, stacklevel, source), {}):
            return
    _drain()
    warnings.warn(_materialize(message), category, stacklevel + 1, source)


def pending() -> int:
    """How many captured effects wait for :func:`flush` on this thread."""
    return len(_STATE.pending)


def _drain() -> None:
    while _STATE.pending:
        key, tensors, ints = _STATE.pending.pop(0)
        try:
            _perform(key, tensors, ints)
        except BaseException:
            # eager would have stopped at this effect: later ones never happened
            _STATE.pending.clear()
            raise


def flush() -> None:
    """Replay every captured effect, in program order, and empty the buffer.

    Called by :func:`install`'s hook and :func:`capture` when the outermost call ends,
    normally or by an exception; calling it by hand is also safe.
    """
    _drain()


@torch.compiler.disable
def _enter() -> None:
    _STATE.depth += 1


@torch.compiler.disable
def _exit() -> None:
    _STATE.depth = max(_STATE.depth - 1, 0)
    if _STATE.depth == 0:
        flush()


@contextlib.contextmanager
def capture() -> Iterator[None]:
    """Buffer deferred effects inside the block; replay them when it exits, even by an exception.

    ``with mend.runtime.capture(): out = compiled_model(x)``
    """
    _enter()
    try:
        yield
    finally:
        _exit()


_INSTALLED = "_mend_runtime_base"


def _scoped_forward(base_forward: Any) -> Any:
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        _enter()
        try:
            return base_forward(self, *args, **kwargs)  # this frame is the one Dynamo compiles
        finally:
            _exit()  # replays, also when forward raised

    return forward


def install(model: torch.nn.Module) -> torch.nn.Module:
    """Buffer the deferred effects of every call of ``model`` and replay them when it returns
    or raises. Idempotent; returns ``model``.

    The instance's class is replaced by a same-named subclass whose ``forward`` Dynamo
    skips (``torch.compiler.disable(..., recursive=False)``); it opens a capture scope and
    calls the model's own ``forward``, whose frame Dynamo compiles, so the replay runs
    outside the compiled region with no extra graph break, for ``torch.compile(model)``,
    ``model.compile()``, ``torch._dynamo.explain(model)`` and eager calls alike (the
    mechanism of :mod:`mend.validation_runtime`, which composes with this one).

    Install it on the module you call. Reached from inside a compiled region (a submodule
    of a compiled model, or a model called by a compiled function), the skipped
    ``forward`` is a graph break (measured); leave such modules uninstalled: their
    deferred effects then run from inside the graph, with the same output.
    An ``OptimizedModule`` is handled through the module it wraps.
    """
    return _wrap.install(model, _INSTALLED, _scoped_forward)


def uninstall(model: torch.nn.Module) -> torch.nn.Module:
    """Undo :func:`install` (only when it is the outermost class swap)."""
    return _wrap.uninstall(model, _INSTALLED)
