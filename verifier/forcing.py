"""Forcing predicate outcomes in instrumented copies (never in emitted code).

Random inputs rarely flip some predicates (BART's fp16 overflow guard fires only when
hidden states overflow). To test both outcomes, the verifier instruments the ORIGINAL
source, wrapping the rewritten predicate ``P`` at line ``L`` as ``force(P, L)``, applies
the rule's rewrite to that instrumented copy, and runs both with the predicate forced to
True and to False. ``force`` returns ``P`` unchanged unless a value is being forced, so
the instrumented copies behave exactly like their sources otherwise.
"""
from __future__ import annotations

import builtins
import contextlib
import re
from functools import lru_cache

import libcst as cst
import torch

_FORCED: dict[int, bool] = {}
_SEEN: dict[int, set] = {}


def force(pred, line: int):
    """``pred``, or a 0-dim bool tensor holding the forced outcome for ``line``."""
    if line in _FORCED:  # forced runs are not evidence of natural coverage
        value = _FORCED[line]
        if isinstance(pred, torch.Tensor) and pred.numel() == 1:
            # computed from pred, not a constant: under torch.compile a constant predicate
            # would let the graph fold the branch (and a failing check) at trace time
            p = pred.reshape(()).bool()
            return torch.logical_or(p, torch.ones_like(p)) if value else torch.logical_and(p, torch.zeros_like(p))
        return torch.tensor(value, device=pred.device if isinstance(pred, torch.Tensor) else None)
    if torch.compiler.is_compiling():  # bool(pred) would break the graph; nothing to record
        return torch.tensor(pred) if isinstance(pred, bool) else pred
    try:
        _SEEN.setdefault(line, set()).add(bool(pred))
    except Exception:  # a traced value under compile: nothing to record
        pass
    # `force(not x, L)`: a Python bool becomes a 0-dim tensor, so the rewrite's tensor ops
    # (logical_not, where) apply to the instrumented copy as they do to the tensor form
    return torch.tensor(pred) if isinstance(pred, bool) else pred


# Instrumented copies call ``__mend_force__(P, L)``: a name in builtins (set here, when the
# verifier is loaded) that Dynamo inlines like any Python function, so a compiled
# instrumented copy forces its predicate inside the graph (``__import__`` is untraceable).
builtins.__mend_force__ = force


@contextlib.contextmanager
def forced(line: int, value: bool):
    _FORCED[line] = value
    try:
        yield
    finally:
        _FORCED.pop(line, None)


def seen(line: int) -> set:
    return set(_SEEN.get(line, set()))


def reset() -> None:
    _SEEN.clear()


class _Wrap(cst.CSTTransformer):
    def __init__(self, module: cst.Module, line: int, last_and: bool = False) -> None:
        from libcst.metadata import MetadataWrapper, PositionProvider

        self.line = line
        self.last_and = last_and
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # freshly parsed, shared with no one
        self.positions = self.wrapper.resolve(PositionProvider)
        self.done = False
        self.ternary = None   # the conditional expression `y = a if p else b` on the line, if any

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        # `NAME = A if P else B` / `return A if P else B`: the ternary is the whole value
        if self.positions[node].start.line == self.line and len(node.body) == 1:
            value = getattr(node.body[0], "value", None)
            if isinstance(value, cst.IfExp) and not value.lpar and isinstance(node.body[0], (cst.Assign, cst.Return)):
                self.ternary = value
        return True

    def leave_IfExp(self, original: cst.IfExp, updated: cst.IfExp):
        if self.done or original is not self.ternary or self.last_and:
            return updated
        self.done = True
        call = cst.parse_expression(f"__mend_force__(_, {self.line})")
        return updated.with_changes(test=call.with_changes(args=[cst.Arg(updated.test), call.args[1]]))

    def leave_If(self, original: cst.If, updated: cst.If):
        if self.done or self.positions[original].start.line != self.line:
            return updated
        call = cst.parse_expression(f"__mend_force__(_, {self.line})")
        test = updated.test
        if self.last_and:
            # `py_test and tensor_test`: force only the tensor part; the Python part
            # (a dtype or config check) keeps deciding whether the branch exists at all
            if not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)):
                return updated
            self.done = True
            forced = call.with_changes(args=[cst.Arg(test.right), call.args[1]])
            return updated.with_changes(test=test.with_changes(right=forced))
        self.done = True
        return updated.with_changes(test=call.with_changes(args=[cst.Arg(test), call.args[1]]))


@lru_cache(maxsize=32)
def instrument(code: str, line: int, last_and: bool = False) -> str | None:
    """``code`` with the ``if`` test at ``line`` (or the test of the conditional expression
    that is the whole value of the statement there: ``y = a if p else b``) wrapped in
    ``force``; None if no such test starts there. With ``last_and``, only the last operand of a top-level ``and`` is wrapped.
    Line numbers are unchanged. (A pure function of its arguments, so cached: the pipeline
    asks it several times per site, and parsing a 2,000-line library file with positions
    takes seconds.)"""
    lines = code.splitlines()
    # an `if`/`elif` statement always begins its line, and a ternary's line holds ` if `:
    # anything else is answered without parsing
    if not 0 < line <= len(lines) or not (re.match(r"(el)?if\b", lines[line - 1].lstrip())
                                          or " if " in lines[line - 1]):
        return None
    wrap = _Wrap(cst.parse_module(code), line, last_and)
    out = wrap.wrapper.visit(wrap)
    return out.code if wrap.done else None
