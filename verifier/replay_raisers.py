"""Operators that can raise at run time after a deferred call, in the graph that replays it.

A deferred print/log/warning (the runtime's post-graph replay) leaves the graph as a snapshot
that Dynamo stores into the runtime module's ``_replay`` after the graph call returns. When an
operator later in the same graph raises at run time -- an index out of range in ``gather``,
``embedding`` or ``x[idx]``, an in-graph ``_assert_async``, an integer division by zero, a
failed Cholesky -- the graph never returns, so the store never happens and the output eager
showed before the error is lost (helper-61: ``print`` then a ``gather`` whose index goes out of
range for one mask pattern). The ordered form (``mend::capture``) performs the call at its
position instead.

:func:`replay_raisers` compiles the model with a recording backend and, for every graph whose
side effects store ``_replay`` on the runtime module, lists the operators that can raise on
tensor values found after the deferred call's first invocation (:func:`_after_call`; a node
records the frames it was traced in: ``meta["stack_trace"]``). Conservative: a graph holding
no node of that function is searched whole. An operator before the call is harmless: when it
raises, eager never reached the call either.

The ordered form (``ordered=True``: ``mend::capture`` performs the call at its position) is
searched the other way (:func:`_capture_at`): an operator that can raise *before* the capture,
in the graph that holds it. Eager raised there and never made the call; the capture is an
ordered effect, ordered with the in-graph checks (``_assert_async``, registered ordered by
the runtime) but not with a kernel that raises on its values, and inductor ran a later capture
before an earlier gather's index error surfaced (helper-62). Checks before it are therefore
not counted; a capture whose arguments depend on the raiser is counted all the same (on CUDA
an index error surfaces asynchronously, after the capture).

Evidence kind: an observation of Dynamo's trace on the example inputs, in eval mode without
grad and in training mode with grad (other guards give other graphs), with a fixed list of operators that raise on values (a name screen, not a proof that
they raise); private Dynamo API (``InstructionTranslator.current_tx().output.side_effects``),
measured on torch 2.13.
"""
from __future__ import annotations

import re

from verifier.traced_effects import _target_name, compiled_call

RUNTIME = "mend.runtime"   # the module whose ``_replay`` store marks a deferred call (by name only)

# torch functions/methods (Dynamo graph, by ``__name__`` or method name) that raise on some tensor
# values at run time: an index out of range, an in-graph check, a failed factorization
_RAISES = {"gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
           "index_select", "index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_",
           "index_put", "index_put_", "take", "take_along_dim", "put", "put_", "embedding", "embedding_bag",
           "nll_loss", "cross_entropy", "multi_margin_loss", "multinomial", "one_hot", "bincount",
           "repeat_interleave", "masked_scatter", "masked_scatter_", "cholesky", "cholesky_ex", "cholesky_solve",
           "cholesky_inverse", "inverse", "inv", "solve", "lu_factor", "triangular_solve", "_assert_async",
           "_assert_scalar", "_assert", "_functional_assert_async", "_check", "_check_tensor_all",
           # helper-65: loss functions that check their inputs' range, histograms, segment and
           # index reductions, a sorter's range, a distribution's parameters
           "binary_cross_entropy", "ctc_loss", "multilabel_margin_loss", "nll_loss2d", "nll_loss_nd",
           "histc", "histogram", "segment_reduce", "index_reduce", "index_reduce_", "searchsorted", "normal",
           "bernoulli", "poisson", "index", "_unsafe_index", "_index_put_impl_"}
_INT_DIVISION = {"floordiv", "mod", "floor_divide", "remainder", "fmod", "__floordiv__", "__mod__", "__rfloordiv__",
                 "__rmod__", "div", "ifloordiv", "imod", "__ifloordiv__", "__imod__", "floor_divide_", "remainder_",
                 "fmod_", "div_"}
_MODULES = {"Embedding", "EmbeddingBag", "CrossEntropyLoss", "NLLLoss", "MultiMarginLoss"}
_FRAME = re.compile(r'File "(.+?)", line (\d+), in (\S+)')


def _value(arg):
    return arg.meta.get("example_value") if hasattr(arg, "meta") else None


def _int_tensor(arg) -> bool:
    v = _value(arg)
    return getattr(v, "dtype", None) is not None and not v.dtype.is_floating_point and not v.dtype.is_complex \
        and str(v.dtype) != "torch.bool"


def _flat(args) -> list:
    out = []
    for a in args:
        out += _flat(a) if isinstance(a, (list, tuple)) else [a]
    return out


def _raiser(gm, node) -> str | None:
    """Why ``node`` can raise on tensor values at run time, else None."""
    import operator

    if node.op == "call_module":
        kind = type(gm.get_submodule(node.target)).__name__
        return f"nn.{kind}" if kind in _MODULES else None
    if node.op not in ("call_function", "call_method"):
        return None
    target, name = node.target, _target_name(node)
    namespace = getattr(target, "namespace", None)   # an OpOverload / OpOverloadPacket called directly
    if namespace is not None and namespace not in ("aten", "prims", "mend"):   # mend::capture raises nothing
        return f"the custom operator {target} (its kernel may raise)"
    if namespace is not None:
        name = name.split(".")[0]   # `gather.default` -> `gather`
    if name in _RAISES or "linalg" in str(getattr(target, "__module__", "") or ""):
        return name
    args = list(node.args) + list(node.kwargs.values())
    if target in (operator.getitem, operator.setitem) or name in ("__getitem__", "__setitem__"):
        index = _flat(list(node.args[1:2]))
        if any(_int_tensor(a) for a in index):
            return "indexing with an integer tensor"
    if name in _INT_DIVISION:
        tensors = [a for a in args if getattr(_value(a), "dtype", None) is not None]
        if tensors and all(_int_tensor(a) for a in tensors) and (
                name != "div" or node.kwargs.get("rounding_mode") is not None):
            return f"integer {name}"
    return None


def _frames(node) -> list[tuple[str, int, str]]:
    return [(f, int(n), fn) for f, n, fn in _FRAME.findall(node.meta.get("stack_trace") or "")]


def _lines_in(frames, site: dict) -> list[int]:
    """The lines of ``frames`` that lie in the site's function (or a Dynamo resume of it): its
    name, and its lines (``first``..``last``) when the site gives them, since another function of
    that name in the same file (every module's ``forward``) is not it (helper-65)."""
    fn_, file = site["function"], site["file"]
    first, last = site.get("first") or 0, site.get("last") or 0
    return [n for f, n, fn in frames if f == file and (fn == fn_ or fn.startswith(f"torch_dynamo_resume_in_{fn_}_at_"))
            and (not last or first <= n <= last)]


def _after_call(nodes, frames, site: dict) -> int:
    """The index of the first node that runs after the deferred call (at ``site["line"]`` of
    ``site["function"]``) in its first invocation: the first node traced in the function after
    that line, or the first one outside it once it was entered (it returned). Program order is
    graph order, and every invocation of the call comes at or after this point, so counting from
    it is conservative. 0 (the whole graph) when no node of the function is found. Placeholders
    carry the frame of their first use, not a position: skipped."""
    line, entered = site.get("line"), False
    for i, (node, fr) in enumerate(zip(nodes, frames)):
        if node.op in ("placeholder", "get_attr", "output"):
            continue
        here = _lines_in(fr, site)
        if here:
            # in a loop, a later iteration runs the lines of the body above the call after it
            if line is None or here[-1] > line or site.get("loop"):
                return i
            entered = True
        elif entered:
            return i
    return len(nodes) if entered else 0


_CHECKS = {"_assert_async", "_assert_scalar", "_assert", "_functional_assert_async", "_check", "_check_tensor_all"}


def _capture_at(nodes, frames, site: dict) -> int | None:
    """The index of the first ``mend::capture`` node traced in the site's function at or after
    its line (the ordered call's own capture; a later call's capture only widens the search, as
    does a call spanning lines), else None."""
    for i, (node, fr) in enumerate(zip(nodes, frames)):
        if node.op == "call_function" and str(node.target).startswith("mend.capture"):
            here = _lines_in(fr, site)
            if here and (site.get("line") is None or max(here) >= site["line"]):
                return i
    return None


def _replays(tx) -> bool:
    side = tx.output.side_effects
    for var in side._get_modified_vars():
        module = getattr(var, "value", None)
        if type(var).__name__ == "PythonModuleVariable" and getattr(module, "__name__", "") == RUNTIME \
                and "_replay" in side.store_attr_mutations.get(var, {}):
            return True
    return False


def site_key(site: dict) -> str:
    """``"<function>:<line>"`` (``"<function>"`` without a line): a deferred call's key in
    :func:`replay_raisers`' ``raisers``, from the site or from its obligation."""
    return site["function"] + (f":{site['line']}" if site.get("line") else "")


def replay_raisers(model, args: tuple, kwargs: dict, sites: list[dict]) -> dict:
    """Compile ``model`` (a backend that records and runs the Dynamo graph as traced) and call it
    once on the example inputs in eval mode without grad, then once in training mode with grad.
    ``sites``: ``[{"file", "function", "line", "mechanism", "first", "last", "loop"}]``, the deferred
    calls' files, functions and lines, ``"ordered"`` for the ordered form (searched before its
    capture; else after the replayed call), the function's lines (``first``..``last``: tells it from
    another function of the same name in the file) and whether a loop encloses the call (then the
    whole function counts as after it). Returns ``{"graphs": n, "replay_graphs": k,
    "ordered_graphs": m, "raisers": {"<function>:<line>": ["<op> (<file>:<line>)", ...]},
    "error": str | None}``; an ordered site whose capture no graph holds has no key in ``raisers``.
    Dynamo's caches are reset before and after; the model's mode is restored. Raises nothing."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    replayed = [s for s in sites if s.get("mechanism", "replay") != "ordered"]
    ordered = [s for s in sites if s.get("mechanism") == "ordered"]
    found: dict[str, list[str]] = {site_key(s): [] for s in replayed}
    counts = {"graphs": 0, "replay_graphs": 0, "ordered_graphs": 0}

    def note(site, gm, node, fr, skip=frozenset()):
        why = _raiser(gm, node)
        if why and why not in skip:
            where = f"{fr[-1][0].rsplit('/', 1)[-1]}:{fr[-1][1]}" if fr else "?"
            found.setdefault(site_key(site), []).append(f"{why} ({where})")

    def backend(gm, _inputs):
        counts["graphs"] += 1
        nodes = list(gm.graph.nodes)
        frames = [_frames(n) for n in nodes]
        at = {site_key(s): _capture_at(nodes, frames, s) for s in ordered}
        if any(i is not None for i in at.values()):
            counts["ordered_graphs"] += 1
        for site in ordered:   # an operator that raises before the capture: eager never made the call
            if at[site_key(site)] is not None:
                found.setdefault(site_key(site), [])
                for node, fr in zip(nodes[:at[site_key(site)]], frames):
                    note(site, gm, node, fr, skip=_CHECKS)
        if not replayed or not _replays(InstructionTranslator.current_tx()):
            return gm.forward
        counts["replay_graphs"] += 1
        for site in replayed:
            start = _after_call(nodes, frames, site)
            for node, fr in zip(nodes[start:], frames[start:]):
                note(site, gm, node, fr)
        return gm.forward

    error = compiled_call(model, backend, args, kwargs)   # eval mode, no grad
    # and in training mode with grad: a branch on self.training may add an operator (helper-65)
    error = compiled_call(model, backend, args, kwargs, train=True, grad=True) or error
    return {**counts, "raisers": {k: list(dict.fromkeys(v))[:8] for k, v in found.items()}, "error": error}
