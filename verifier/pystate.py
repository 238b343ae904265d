"""Python state a call may change outside the module: the globals of the code the model runs
and the non-tensor arguments (a list the caller passes in, a dict it keeps).

Compiled, Dynamo replays a Python side effect (``cache.append(x)``, ``STATS["n"] += 1``) after
the graph has run; when an operation inside the graph raises (a check moved into the graph,
``torch._assert_async``), the replay never happens, where the original's graph break ran the
effect before raising. helper-47 lost an append to a caller's list, a counter in an ``except``
handler and a global dict's entry that way, with the same exception and message, and with
buffers, outputs and the module's own attributes all equal. :func:`observe` in
:mod:`verifier.differential` now records both kinds of state, and :func:`compare` compares them.

Globals are compared by *which names, bound before the call, changed* during it (not their values: the original
and the mended module are separate module objects, whose counters may have run a different
number of times across the differential test's extra runs). Arguments are deep-copied before
each observation, so their states after the call are compared whole."""
from __future__ import annotations

import copy
import itertools
import types

import torch

BIG = 1000   # a container this long is fingerprinted by type and length only (cost per call)


def fresh_argument(value):
    """A private copy of a non-tensor argument (a list of tensors: the tensors cloned), so that
    each observation starts from the same state; the value itself where it cannot be copied."""
    if isinstance(value, (list, dict, set)):
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001 - an uncopyable object is passed as it is
            return value
    return value


def fingerprint(value, skeleton) -> object:
    """A comparable summary of a global's value: ``skeleton`` (tensors as placeholders) for
    lists, tuples and dicts; sorted element summaries for sets; ``repr`` for an
    ``itertools.count`` (its next value); the type alone for anything else."""
    if isinstance(value, (set, frozenset)):
        if len(value) > BIG:
            return (type(value).__name__, len(value))
        return (type(value).__name__, tuple(sorted(repr(skeleton(e)) for e in value)))
    if isinstance(value, (list, tuple, dict)) and len(value) > BIG:
        return (type(value).__name__, len(value))
    if isinstance(value, itertools.count):
        return ("itertools.count", repr(value))
    if isinstance(value, torch.Tensor):
        # rebound (another object) or changed in place (its version counter): helper-50's
        # `global _LAST; _LAST = h` before a failing check
        return ("tensor", id(value), value._version)
    return skeleton(value)


def relaxed(attributes: list, drop: str) -> list:
    """:func:`verifier.differential.attributes` for a compiled-against-eager comparison: without
    the entry ``drop`` (the RNG state) and with floats' values left out (Inductor may round a
    number read from a tensor)."""
    def strip(skel):
        if isinstance(skel, tuple):
            if len(skel) == 3 and skel[:2] == ("builtins", "float"):
                return ("builtins", "float")
            return tuple(strip(x) for x in skel)
        return skel
    return [(key, strip(value)) for key, value in attributes if key != drop]


def _data(value) -> bool:
    """A value whose change is program state (not code, not a module, not a class)."""
    return not isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
                                  types.MethodType))


def global_spaces(module) -> list[tuple[dict, set[str]]]:
    """The global namespaces of the ``forward`` functions of ``module`` and its submodules,
    torch's own modules left out, each with the names its own code uses (:func:`referenced`,
    about 0.1 ms for a transformers modeling module: computed per observation, not cached)."""
    spaces, seen = [], set()
    if not isinstance(module, torch.nn.Module):
        return spaces
    for sub in module.modules():
        fn = getattr(type(sub).forward, "__globals__", None)
        if not isinstance(fn, dict) or id(fn) in seen:
            continue
        seen.add(id(fn))
        name = fn.get("__name__", "") or ""
        if name == "torch" or name.startswith("torch."):
            continue
        spaces.append((fn, referenced(fn)))
    return spaces


def _code_names(code: types.CodeType, out: set) -> None:
    out.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_names(const, out)


def referenced(space: dict) -> set[str]:
    """The global names the module's own code reads or writes: the ``co_names`` of its
    functions and of its classes' methods (nested code included). A name only Dynamo's
    generated code uses (``sub_intern_0``, ``took_logger``: bound while it traces mend's
    runtime, and rebound when it recompiles) is not program state."""
    out: set = set()
    for name, value in list(space.items()):
        if name.startswith("__"):
            continue   # Dynamo's own functions (__compiled_fn_*, __resume_at_*)
        members = vars(value).values() if isinstance(value, type) else (value,)
        for member in members:
            member = getattr(member, "__func__", member)   # staticmethod / classmethod
            code = getattr(member, "__code__", None)
            if isinstance(code, types.CodeType) and getattr(member, "__globals__", None) is space:
                _code_names(code, out)
    return out


def snapshot(spaces: list[tuple[dict, set[str]]], skeleton) -> dict:
    """``name -> fingerprint`` for the data globals of :func:`global_spaces` that the module's
    own code names (dunder names, where Dynamo keeps its compiled code, left out)."""
    out = {}
    for space, names in spaces:
        for key, value in list(space.items()):
            if key.startswith("__") or key not in names or not _data(value):
                continue
            try:
                out[key] = fingerprint(value, skeleton)
            except Exception:  # noqa: BLE001 - an object whose summary fails is compared by type
                out[key] = (type(value).__module__, type(value).__qualname__)
    return out


def changed(before: dict, after: dict) -> tuple[str, ...]:
    """The global names, bound before the call, whose value changed or went during it. A name
    that appears is left out: Dynamo binds its own helpers in the frame's globals while it
    traces (``__compiled_fn_*`` and, tracing mend's runtime, plain ints such as
    ``took_logger``), in the compiled version only."""
    return tuple(sorted(k for k in before if before[k] != after.get(k)))
