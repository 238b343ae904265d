"""Locate a Dynamo break site (file, line) in the source with LibCST position metadata.

This is the join between a break report and the node a rule rewrites (LibCST's
``PositionProvider``; see shared/notes/style-anchors.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


@dataclass
class Located:
    """The innermost statement covering a line, with its ancestors (outermost first).

    ``node`` is a LibCST statement (``If``, ``While``, ``Assign``, ``Expr``...); ``column``
    is 0-based; ``in_loop`` tells whether a ``for``/``while`` of the same function
    encloses it (Dynamo then skips the whole frame on a break).
    """

    file: str
    line: int
    column: int
    end_line: int
    node: cst.CSTNode
    ancestors: list[cst.CSTNode]
    module: cst.Module

    @property
    def kind(self) -> str:
        return type(self.node).__name__

    @property
    def function(self) -> cst.FunctionDef | None:
        for anc in reversed(self.ancestors):
            if isinstance(anc, cst.FunctionDef):
                return anc
        return None

    @property
    def in_loop(self) -> bool:
        for anc in reversed(self.ancestors):
            if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(anc, (cst.For, cst.While)):
                return True
        return False

    def code(self, node: cst.CSTNode | None = None) -> str:
        return self.module.code_for_node(node if node is not None else self.node)


class _StatementIndex(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.entries: list[tuple[int, int, int, cst.CSTNode, tuple]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            pos = self.get_metadata(PositionProvider, node)
            self.entries.append((pos.start.line, pos.end.line, pos.start.column, node, tuple(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


@lru_cache(maxsize=64)
def _index(path: str, mtime: float):
    source = Path(path).read_text(encoding="utf-8")
    wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)  # freshly parsed
    visitor = _StatementIndex()
    wrapper.visit(visitor)
    return wrapper.module, visitor.entries


def parse_index(path: str):
    """(module, entries) for ``path``; cached on (path, mtime). Raises libcst.ParserSyntaxError."""
    return _index(path, Path(path).stat().st_mtime)


def header_parts(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The parts of a statement Dynamo runs at its line: the whole small statement, or a
    compound statement's header (its test, iterable or ``with`` items; its body holds
    statements of their own)."""
    if isinstance(node, cst.BaseCompoundStatement):
        parts = [getattr(node, a) for a in ("test", "iter") if getattr(node, a, None) is not None]
        return parts + list(getattr(node, "items", ()))
    return [node]


def locate(path: str, line: int) -> Located | None:
    """The innermost statement that starts on ``line``, else the innermost one covering it.

    A compound statement (``if``/``while``) is preferred over the statements of its body
    only when it starts on that line, because Dynamo reports a branch at its header line.
    Returns None when the file cannot be read or parsed.
    """
    try:
        module, entries = parse_index(path)
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
        return None
    starting = [e for e in entries if e[0] == line]
    covering = starting or [e for e in entries if e[0] <= line <= e[1]]
    if not covering:
        return None
    # innermost: the one with the deepest ancestor chain; for `if` headers the compound
    # statement itself starts on the line, its body statements usually do not
    start, end, col, node, ancestors = max(covering, key=lambda e: len(e[4]))
    if starting:
        start, end, col, node, ancestors = min(starting, key=lambda e: len(e[4]))
    return Located(path, start, col, end, node, list(ancestors), module)


def line_of(path: str, node: cst.CSTNode) -> int | None:
    """Start line of a statement node obtained from :func:`locate` on the same file."""
    _, entries = parse_index(path)
    for start, _end, _col, n, _anc in entries:
        if n is node:
            return start
    return None
