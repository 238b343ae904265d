"""Prototype (research only): deferral whose compiled form is an ordinary graph.

Under torch.compile each deferred call appends an entry -- (kind, target, args, kwargs,
site) with every tensor argument detached+cloned -- to a tuple held in the module
attribute ``pending`` of THIS module, whose class is swapped for a ModuleType subclass
with a ``__setattr__``.  Dynamo does not run that ``__setattr__`` while tracing; it
records the attribute store as a side effect and replays it as STORE_ATTR in the compiled
frame's bytecode after the graph returned -- which calls ``__setattr__`` for real: the
entries are performed there, in program order, before any later Python of that frame.
Eagerly, each call acts at once.
"""
import sys, types, builtins, logging, warnings
import torch

STATS = {"replays": 0, "setattr_calls": 0}


class _FlushingModule(types.ModuleType):
    @torch.compiler.disable  # the replay must not be traced by Dynamo (it runs inside the compiled frame)
    def __setattr__(self, name, value):
        if name == "pending":
            STATS["setattr_calls"] += 1
            if not torch.compiler.is_compiling():
                for entry in value:
                    _perform(*entry)
                return  # never stored: stays () so the trace-time read (and its guard) holds
        types.ModuleType.__setattr__(self, name, value)


_self = sys.modules[__name__]
pending = ()
_self.__class__ = _FlushingModule


@torch._dynamo.assume_constant_result
def _site():
    """(filename, lineno, funcname) of the user frame that called defer_* (trace time only)."""
    try:
        stack = torch._guards.TracingContext.extract_stack()
    except Exception:
        return None
    for fs in reversed(stack):
        if fs.filename != __file__:
            return (fs.filename, fs.lineno or 0, fs.name)
    return None


def _snap(a):
    if isinstance(a, torch.Tensor):
        return a.detach().clone()
    if type(a) in (tuple, list):
        return type(a)(_snap(x) for x in a)
    return a


def _push(entry):
    _self.pending = _self.pending + (entry,)


def _module_globals(filename):
    for mod in list(sys.modules.values()):
        if getattr(mod, "__file__", None) == filename:
            return vars(mod)
    return None


def _perform(kind, target, args, kwargs, site):
    STATS["replays"] += 1
    if kind == "print":
        builtins.print(*args, **kwargs)
    elif kind == "log":
        logger, method = target
        level = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}[method]
        if not logger.isEnabledFor(level):
            return
        msg, *margs = args
        fn, lno, func = site if site else ("(unknown file)", 0, "(unknown function)")
        rec = logger.makeRecord(logger.name, level, fn, lno, msg, tuple(margs), None, func,
                                kwargs.get("extra"), None)
        logger.handle(rec)
    elif kind == "warn":
        message, category = args
        if site is None:
            warnings.warn(message, category, stacklevel=2)
            return
        fn, lno, _ = site
        g = _module_globals(fn) or {}
        if isinstance(message, Warning):
            category = type(message)
        warnings.warn_explicit(message, category or UserWarning, fn, lno,
                               g.get("__name__", "<string>"), g.setdefault("__warningregistry__", {}))


def defer_print(*args, **kwargs):
    if torch.compiler.is_compiling():
        _push(("print", None, _snap(args), kwargs, None))
        return
    builtins.print(*args, **kwargs)


def defer_log(logger, method, *args, **kwargs):
    if torch.compiler.is_compiling():
        _push(("log", (logger, method), _snap(args), kwargs, _site()))
        return
    getattr(logger, method)(*args, stacklevel=2, **kwargs)


def defer_warn(message, category=None, stacklevel=1):
    if torch.compiler.is_compiling():
        _push(("warn", None, (_snap(message), category), {}, _site()))
        return
    warnings.warn(message, category, stacklevel + 1)
