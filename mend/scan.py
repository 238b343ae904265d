"""Scan: detect -> locate -> classify -> match, deduplicated by source site.

The result is what ``mend scan`` prints and what ``mend fix`` plans from.
"""
from __future__ import annotations

import hashlib
import linecache
import os
import re
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from mend import __version__
from mend.detect import BreakEvent, DetectResult, detect, display_path, gb_registry, site_packages_root
from mend.locate import Located, locate
from mend.rules import Decline, match_site
from mend.taxonomy import OTHER_REASONS, categorize
from mend.targets import Target

SCHEMA_VERSION = "1.0"


@dataclass
class Site:
    """One break site (file:line) with every break Dynamo logged there.

    ``file`` is absolute; ``display_file`` is relative to site-packages or the cwd.
    ``count`` is how many breaks hit the site in the scanned call.
    """

    file: str
    line: int
    column: int
    function: str
    source: str
    gb_type: str
    message: str
    category: str
    fixable_by: str | None
    reason: str
    count: int = 0
    frame_skipped: bool = False
    skip_reason: str | None = None
    stack: list = field(default_factory=list)
    located: Located | None = field(default=None, repr=False)
    excluded: bool = False          # [tool.mend] exclude matches its file
    baselined: bool | None = None   # with a baseline: whether the site is in it

    @property
    def display_file(self) -> str:
        return display_path(self.file)

    @property
    def package(self) -> str | None:
        """The installed package the site is in (``transformers``), None for the user's
        own tree (mend's ``--only-user`` scope)."""
        return library_package(self.file)

    @property
    def origin(self) -> str:
        """``"library"`` for a file of an installed package or the standard library, else ``"user"``."""
        return "user" if self.package is None else "library"

    @property
    def qualname(self) -> str:
        """The enclosing function as written in the source (``Model.forward``), from the
        located statement; Dynamo's ``function`` of a resumed frame
        (``torch_dynamo_resume_in_forward_at_35``) names the break before it instead."""
        import libcst as cst

        if self.located is not None:
            names = [a.name.value for a in self.located.ancestors if isinstance(a, (cst.ClassDef, cst.FunctionDef))]
            if names:
                return ".".join(names)
        m = re.fullmatch(r"torch_dynamo_resume_in_(.+)_at_\d+", self.function)
        return m.group(1) if m else self.function

    @property
    def statement_hash(self) -> str:
        """A hash of the site's statement, normalised (formatting and comments dropped; a
        compound statement by its header): what a baseline entry keys on, with file and
        function, so that edits elsewhere in the file keep it (no line number in it)."""
        return statement_hash(self.located, self.source)

    def to_json(self) -> dict:
        return {
            "file": self.display_file,
            "line": self.line,
            "column": self.column,
            "function": self.function,
            "source": self.source,
            "category": self.category,
            "gb_type": self.gb_type,
            "gb_id": gb_registry().get(self.gb_type),
            "message": self.message,
            "count": self.count,
            "qualname": self.qualname,
            "origin": self.origin,
            "package": self.package,
            "statement_hash": self.statement_hash,
            "fixable_by": self.fixable_by,
            "reason": self.reason,
            "frame_skipped": self.frame_skipped,
            "skip_reason": self.skip_reason,
            "stack": [{"file": display_path(f.file), "line": f.line, "function": f.function} for f in self.stack],
            **({"excluded": True} if self.excluded else {}),
            **({"baselined": self.baselined} if self.baselined is not None else {}),
        }


@dataclass
class ScanResult:
    """Graphs, the honest break count and the deduplicated sites of one target."""

    target: str
    graph_count: int
    sites: list[Site]
    explain_break_count: int
    compiled_error: str | None = None
    steady_graph_count: int | None = None  # graphs a second call runs (first-call work done)
    seconds: float | None = None  # building and scanning (s), set by the CLI for a batch report

    @property
    def graph_break_count(self) -> int:
        return sum(s.count for s in self.sites)

    @property
    def frames_skipped(self) -> int:
        """Sites where Dynamo ran the rest of the frame eagerly (a break inside a loop, or
        one it could not resume after)."""
        return sum(1 for s in self.sites if s.frame_skipped)

    @property
    def fixable(self) -> list[Site]:
        return [s for s in self.sites if s.fixable_by]

    def to_json(self) -> dict:
        import torch

        return {
            "schema_version": SCHEMA_VERSION,
            "mend_version": __version__,
            "torch_version": torch.__version__,
            "target": self.target,
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "explain_graph_break_count": self.explain_break_count,
            "fixable_break_count": sum(s.count for s in self.fixable),
            "frames_skipped": self.frames_skipped,
            "compiled_error": self.compiled_error,
            "steady_graph_count": self.steady_graph_count,
            "sites": [s.to_json() for s in self.sites],
        }


def library_package(file: str) -> str | None:
    """The top-level package of an installed file (site-packages), ``"python"`` for the
    standard library, None for a file of the user's tree."""
    root = site_packages_root(file)
    if root is not None:
        rel = Path(os.path.relpath(file, root)).parts
        name = rel[0] if rel else "?"
        return name[:-3] if name.endswith(".py") else name
    stdlib = sysconfig.get_paths()["stdlib"]
    if file.startswith(os.path.abspath(stdlib) + os.sep):
        return "python"
    return None


def statement_hash(loc: Located | None, source: str) -> str:
    """sha256 (16 hex digits) of a statement's normalised text: ``ast.unparse`` of the
    statement (an ``if``/``while``/``for``/``with`` by its header alone), else the source
    line with whitespace collapsed when it does not parse alone."""
    import ast

    import libcst as cst

    text = " ".join(source.split())
    if loc is not None:
        node = loc.node
        if isinstance(node, (cst.If, cst.While)):
            text = f"{type(node).__name__.lower()} {_normal(loc.code(node.test))}"
        elif isinstance(node, cst.For):
            text = f"for {_normal(loc.code(node.target))} in {_normal(loc.code(node.iter))}"
        elif isinstance(node, cst.With):
            text = "with " + ", ".join(_normal(loc.code(i.item)) for i in node.items)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Try)):
            try:
                text = ast.unparse(ast.parse(loc.code().strip()))
            except SyntaxError:
                pass
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _normal(expr: str) -> str:
    import ast

    try:
        return ast.unparse(ast.parse(expr.strip(), mode="eval"))
    except SyntaxError:
        return " ".join(expr.split())


def _position(ev: BreakEvent) -> tuple[str, int, str, Located | None]:
    """(file, line, source line, located statement) of a break's site.

    Dynamo reports the line of the instruction that broke, which for a multi-line
    statement (`if (` ... `):`, a call spread over lines) can be a continuation line;
    the site is the statement, so report its start line and first source line.
    """
    fr = ev.site
    if fr is None:
        return "<unknown>", 0, "", None
    loc = locate(fr.file, fr.line)
    if loc is None or loc.line == fr.line:
        return fr.file, fr.line, fr.source, loc
    return fr.file, loc.line, linecache.getline(fr.file, loc.line).strip(), loc


def _reason_with_skip(reason: str, skip_reason: str | None, fixable_by: str | None) -> str:
    return f"{skip_reason}; {reason}" if skip_reason and fixable_by is None else reason


def _site_from_event(ev: BreakEvent) -> Site:
    file, line, source, loc = _position(ev)
    function = ev.site.function if ev.site else "?"
    category = categorize(ev.gb_type, loc, ev.op)
    verdict = match_site(category, loc)
    if isinstance(verdict, Decline):
        fixable_by, reason = None, OTHER_REASONS.get(ev.gb_type, verdict.reason) if category == "other" else \
            verdict.reason
        if verdict.rule:
            reason = f"{verdict.rule} declines: {reason}"
    else:
        fixable_by, reason = verdict.rule, verdict.detail
    if ev.frame_skipped:
        reason = _reason_with_skip(reason, ev.skip_reason, fixable_by)
    return Site(file, line, loc.column if loc else 0, function, source, ev.gb_type, ev.message, category,
                fixable_by, reason, 0, ev.frame_skipped, ev.skip_reason, list(ev.stack), loc)


def sites_from(result: DetectResult) -> list[Site]:
    """Deduplicate break events by statement (file, start line), keeping first-seen order
    and hit counts."""
    by_key: dict[tuple[str, int], Site] = {}
    for ev in result.events:
        file, line, _, _ = _position(ev)
        if (file, line) not in by_key:
            by_key[(file, line)] = _site_from_event(ev)
        site = by_key[(file, line)]
        site.count += ev.weight
        if ev.frame_skipped and not site.frame_skipped:
            # a later event at the same site skipped the frame (a loop re-tried after the
            # first break): the site says so, with why
            site.frame_skipped, site.skip_reason = True, ev.skip_reason
            site.reason = _reason_with_skip(site.reason, ev.skip_reason, site.fixable_by)
    return list(by_key.values())


def scan(target: Target) -> ScanResult:
    """Run ``target`` under TorchDynamo and classify every graph break site."""
    result = detect(target)
    return ScanResult(target.spec, result.graph_count, sites_from(result), result.explain_break_count,
                      result.compiled_error, result.steady_graph_count)
