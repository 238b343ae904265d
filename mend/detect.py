"""Detection: run a target under TorchDynamo and record every graph break.

``torch._dynamo.explain`` reports ``graph_count - 1`` as the break count, which misses
breaks whose resumed code builds no graph and frames that Dynamo skips whole (a break
inside a ``for``/``while`` loop gives ``graph_count=0``; see shared/notes). We instead
hook the one place where Dynamo logs a graph break
(``InstructionTranslatorBase.log_graph_break``) and count each logged break, keeping
its ``gb_type`` (the key of ``torch/_dynamo/graph_break_registry.json``), message and
user stack. Graphs are counted by a pass-through backend.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import sysconfig
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch
import torch._dynamo

from mend.errors import MendError, TargetError
from mend.targets import Target

LOOP_GB_TYPE = "graph break in loop"


@dataclass(frozen=True)
class Frame:
    """One user frame: absolute ``file``, 1-based ``line``, ``function`` and source text."""

    file: str
    line: int
    function: str
    source: str


@dataclass
class BreakEvent:
    """One graph break as Dynamo logged it.

    ``gb_type`` is the break's cause; for a frame skipped because of a break in a loop it
    is the cause of that inner break, and ``frame_skipped`` is True. ``stack`` runs from
    the outermost user frame to the innermost.
    """

    gb_type: str
    message: str
    stack: list[Frame]
    frame_skipped: bool = False
    skip_reason: str | None = None
    compile_id: str = ""
    weight: int = 1  # breaks attributed to this event (see DetectResult.graph_break_count)
    op: str = ""     # the ATen operator a "Data dependent operator" break names (its debug context)

    @property
    def site(self) -> Frame | None:
        """The innermost frame outside torch itself and outside Python's standard library:
        the line a rewrite would change (a break inside ``inspect.Signature.bind`` is the
        caller's ``signature.bind(...)`` line)."""
        for fr in reversed(self.stack):
            if not _in_torch(fr.file) and not _in_stdlib(fr.file):
                return fr
        return self.stack[-1] if self.stack else None


@dataclass
class DetectResult:
    """Graphs and breaks of one compiled call. ``graph_count`` counts FX graphs compiled;
    ``events`` holds every logged graph break, in order."""

    graph_count: int
    events: list[BreakEvent] = field(default_factory=list)
    explain_break_count: int | None = None  # graph_count - 1, what explain() would say
    compiled_error: str | None = None
    steady_graph_count: int | None = None   # graphs run by a second call (None: it failed)

    @property
    def graph_break_count(self) -> int:
        """The honest break count: ``max(graph_count - 1, logged breaks)``.

        ``graph_count - 1`` (explain's count) sees every split that resumed into a new
        graph, including the second split a break inside a nested call causes in its
        caller (the call is peeled off into its own frame). The logged breaks see what
        that misses: breaks whose resumed code builds no graph and frames Dynamo skipped
        whole. Neither undercounts the other, so the larger is a lower bound of both.
        """
        return sum(e.weight for e in self.events)


_TORCH_DIR = os.path.dirname(torch.__file__)


def _in_torch(path: str) -> bool:
    return path.startswith(_TORCH_DIR)


_STDLIB_DIR = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def _in_stdlib(path: str) -> bool:
    """A file of Python's standard library (not a package installed under it)."""
    path = os.path.abspath(path)
    return path.startswith(_STDLIB_DIR) and site_packages_root(path) is None


@lru_cache(maxsize=1)
def gb_registry() -> dict[str, str]:
    """Map gb_type -> registry id (``GB0001``...), from torch's graph_break_registry.json."""
    path = Path(torch._dynamo.__file__).with_name("graph_break_registry.json")
    try:
        data = json.loads(path.read_text())
    except OSError:
        return {}
    return {entry[0]["Gb_type"]: gb_id for gb_id, entry in data.items() if entry}


def _frames(stack) -> list[Frame]:
    out = []
    for fs in stack or []:
        out.append(Frame(os.path.abspath(fs.filename), int(fs.lineno or 0), fs.name, (fs.line or "").strip()))
    return out


def _cause(exc):
    """For a wrapper break (a loop-skip, a break under a context manager), the break
    inside it that caused it."""
    inner = exc.__cause__ or exc.__context__
    return inner if inner is not None and hasattr(inner, "gb_type") else None


# How Dynamo's log reason starts when it gives up on the rest of a frame
_SKIP_PREFIXES = ("Failed to handle graph break gracefully", "Encountered graph break that we cannot resume")
_LOOP_SKIP = "graph break inside a for/while loop: Dynamo skipped the whole frame and ran it eagerly"
_RESUME_SKIP = "Dynamo could not resume after this break and ran the rest of the function eagerly"
_CONTEXT_GB_TYPE = "Graph break under GenericContextWrappingVariable"


def _skip_reason(gb_type: str) -> str:
    """Why Dynamo ran (part of) a frame eagerly, in words; never None for a skipped frame."""
    if gb_type == LOOP_GB_TYPE:
        return _LOOP_SKIP
    if gb_type == _CONTEXT_GB_TYPE:
        return _RESUME_SKIP + " (the break is inside a `with` block of a context manager Dynamo cannot resume in)"
    return _RESUME_SKIP


def _inner_gb_type(exc, reason: str) -> str | None:
    """The gb_type a wrapper break's text names first: its message, or the text after
    "Graph break encountered:", starts with the inner break's gb_type."""
    texts = [str(getattr(exc, "msg", "") or ""), reason.partition("Graph break encountered:")[2]]
    for text in texts:
        first = text.strip().splitlines()[:1]
        if first and first[0].strip() in gb_registry():
            return first[0].strip()
    return None


@contextlib.contextmanager
def record_graph_breaks(events: list[BreakEvent]):
    """Patch Dynamo's graph-break logger to append a BreakEvent per logged break."""
    from torch._dynamo import symbolic_convert as sc

    original = getattr(sc.InstructionTranslatorBase, "log_graph_break", None)
    if original is None:  # pragma: no cover - depends on the torch release
        raise MendError(f"torch {torch.__version__}: no Dynamo graph-break hook; mend supports torch 2.11-2.14")

    def hook(self, code_options, reason, exc):
        cid = torch._guards.CompileContext.current_compile_id()
        # restart_analysis re-traces a frame (same frame_id and frame_compile_id) and logs the
        # same break again; such a re-log is not a second break
        cid_key = f"{cid.frame_id}/{cid.frame_compile_id}" if cid is not None else ""
        if not getattr(exc, "logged", False):
            stack = getattr(exc, "real_stack", None)
            if stack is None:
                stack = torch._guards.TracingContext.extract_stack()
            gb_type = getattr(exc, "gb_type", type(exc).__name__)
            skipped = bool(getattr(exc, "skip_frame", False)) or reason.startswith(_SKIP_PREFIXES)
            skip_reason = None
            if skipped:
                skip_reason = _skip_reason(gb_type)
                # wrapper breaks ("graph break in loop", a break under a user context manager)
                # name the break inside them first; categorise by that one
                inner = _cause(exc)
                if inner is not None:
                    gb_type = inner.gb_type
                    stack = getattr(inner, "real_stack", None) or stack
                else:
                    gb_type = _inner_gb_type(exc, reason) or gb_type
            msg = str(getattr(exc, "msg", "") or reason).strip().splitlines()
            event = BreakEvent(gb_type, msg[0] if msg else gb_type, _frames(stack), skipped, skip_reason, cid_key)
            op = next((t.split(":", 1)[1].strip() for t in msg if t.strip().startswith("Developer debug context:")), "")
            event.op = op if op.startswith("aten.") else ""
            if skipped and len(event.stack) > 1:
                # the break is in a callee, which Dynamo compiles as its own frame and logs
                # again there: the skip is reported on the site, the break counted once
                event.weight = 0
            if not any(e.compile_id == cid_key and e.gb_type == event.gb_type and e.stack == event.stack
                       for e in events):
                events.append(event)
        return original(self, code_options, reason, exc)

    sc.InstructionTranslatorBase.log_graph_break = hook
    try:
        yield
    finally:
        sc.InstructionTranslatorBase.log_graph_break = original


def detect(target: Target, *, grad: bool = False) -> DetectResult:
    """Compile ``target.model`` with TorchDynamo and run it once on the example inputs.

    The model's own stdout, logging and warnings are swallowed. Raises TargetError when
    the compiled call fails where eager ran (that is reported, not hidden).
    Runs under ``torch.no_grad()`` unless ``grad`` (the paper's setting is eval + no_grad).
    """
    torch._dynamo.reset()
    events: list[BreakEvent] = []
    graphs = 0

    runs = [0]

    def counting_backend(gm, example_inputs):
        nonlocal graphs
        graphs += 1
        forward = gm.forward

        def run(*a, **k):  # counts graphs run, for the steady state of a second call
            runs[0] += 1
            return forward(*a, **k)
        return run

    compiled = torch.compile(target.model, backend=counting_backend)
    error = None
    with record_graph_breaks(events), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)  # the model's own logging (handlers hold the real stderr)
        try:
            with (contextlib.nullcontext() if grad else torch.no_grad()):
                compiled(*target.args, **target.kwargs)
        except Exception as exc:  # reported below, the scan still shows what was found
            error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        finally:
            logging.disable(logging.NOTSET)
    first = graphs  # a second call may compile more graphs (recompiles): they are not the first call's
    steady = None if error is not None else _second_call(compiled, target, grad, runs)
    graphs = first
    torch._dynamo.reset()
    if error is not None and not events and graphs == 0:
        raise TargetError(f"{target.spec}: the compiled model failed where eager ran: {error}")
    _count_skips_not_relogged(events)
    _attribute_surplus(events, graphs)
    return DetectResult(graphs, events, graphs - 1, error, steady)


def _second_call(compiled, target: Target, grad: bool, runs: list) -> int | None:
    """Graphs run by a second call of the compiled model: the steady state, once first-call
    work is done (transformers installs its output-capturing hooks lazily, on the first
    call, and the second call recompiles without those breaks). None when it raises."""
    runs[0] = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        try:
            with (contextlib.nullcontext() if grad else torch.no_grad()):
                compiled(*target.args, **target.kwargs)
        except Exception:  # noqa: BLE001 - the steady state is then unknown, not an error
            return None
        finally:
            logging.disable(logging.NOTSET)
    return runs[0]


def _count_skips_not_relogged(events: list[BreakEvent]) -> None:
    """A skip caused by a break in a callee is counted where the callee's own frame logs
    the break again (weight 0 on the skip). When no such log came (Dynamo never compiled
    the callee on its own, e.g. an exception's ``__init__`` during a ``raise``), count it
    on the skip, or the frame would be reported with zero breaks."""
    def where(e):
        return (e.site.file, e.site.line) if e.site else None

    for e in events:
        if e.frame_skipped and e.weight == 0 and not any(o.weight and where(o) == where(e) for o in events):
            e.weight = 1


def _attribute_surplus(events: list[BreakEvent], graphs: int) -> None:
    """When more graphs were split off than breaks were logged, the surplus comes from
    breaks inside nested calls (the caller is split before and after the call); give it
    to those events, outermost first, so site counts add up to the honest total."""
    surplus = (graphs - 1) - sum(e.weight for e in events)
    nested = [e for e in events if len(e.stack) > 1 and e.weight] or [e for e in events if e.weight]
    i = 0
    while surplus > 0 and nested:
        nested[i % len(nested)].weight += 1
        surplus -= 1
        i += 1


def site_packages_root(path: str) -> str | None:
    """The site-packages directory ``path`` is installed under, else None."""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    roots |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    for root in sorted(roots, key=len, reverse=True):
        root = os.path.abspath(root)
        if path.startswith(root + os.sep):
            return root
    return None


def display_path(path: str) -> str:
    """A path as users know it: relative to its site-packages root when inside an
    installed package (``transformers/models/t5/modeling_t5.py``), else relative to the
    working directory when below it, else absolute."""
    root = site_packages_root(path)
    if root is not None:
        return os.path.relpath(path, root)
    cwd = os.getcwd()
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path


def in_site_packages(path: str) -> bool:
    """True for files of installed packages, which mend never edits in place."""
    return any(part in ("site-packages", "dist-packages") for part in Path(path).parts)
