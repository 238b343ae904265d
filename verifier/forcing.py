"""Forcing predicate outcomes in instrumented copies (never in emitted code).

Random inputs rarely flip some predicates (BART's fp16 overflow guard fires only when
hidden states overflow). To test both outcomes, the verifier instruments the ORIGINAL
source, wrapping the rewritten predicate ``P`` at line ``L`` as ``force(P, L)``, applies
the rule's rewrite to that instrumented copy, and runs both with the predicate forced to
True and to False. ``force`` returns ``P`` unchanged unless a value is being forced, so
the instrumented copies behave exactly like their sources otherwise.

An ``assert`` is instrumented too: ``assert P, msg`` as ``assert force(P, L), msg``, and
``assert A and B, msg`` operand by operand, ``assert force(A, "L&0") and force(B, "L&1"),
msg``: operand ``j`` is reached only when the ones before it held, so :func:`settings` forces
those True (an ``if``/``elif`` chain's earlier tests are forced False instead).
"""
from __future__ import annotations

import builtins
import contextlib
import re
from functools import lru_cache

import libcst as cst
import torch

_FORCED: dict[int | str, bool] = {}
_SEEN: dict[int | str, set] = {}


def and_key(line: int, j: int) -> str:
    """The forcing key of operand ``j`` of the ``assert A and B ...`` starting on ``line``."""
    return f"{line}&{j}"


def settings(keys: list) -> list[dict]:
    """The forcings to run, natural first: each key forced True and False, with what must
    hold to reach it -- an ``elif`` test's earlier tests (int keys, in chain order) False, an
    ``and`` operand's earlier operands (:func:`and_key`) True."""
    out = [{}]
    for k, key in enumerate(keys):
        if isinstance(key, str):   # an assert's: operand j of an `and` after the ones before it held
            line, _, j = key.partition("&")
            before = {and_key(int(line), i): True for i in range(int(j or 0))}
        else:
            before = {prev: False for prev in keys[:k] if not isinstance(prev, str)}
        out += [{**before, key: v} for v in (True, False)]
    return out


def force(pred, line: int | str):
    """``pred``, or a 0-dim bool tensor holding the forced outcome for ``line``. An
    ``assert``'s test (a str key) that is not a tensor stays a Python bool: Dynamo compiles
    ``assert <tensor>`` itself, into a check that raises RuntimeError, not AssertionError."""
    python_test = isinstance(line, str) and not isinstance(pred, torch.Tensor)
    if line in _FORCED:  # forced runs are not evidence of natural coverage
        value = _FORCED[line]
        if python_test:
            return value
        if isinstance(pred, torch.Tensor) and pred.numel() == 1:
            # computed from pred, not a constant: under torch.compile a constant predicate
            # would let the graph fold the branch (and a failing check) at trace time
            p = pred.reshape(()).bool()
            return torch.logical_or(p, torch.ones_like(p)) if value else torch.logical_and(p, torch.zeros_like(p))
        return torch.tensor(value, device=pred.device if isinstance(pred, torch.Tensor) else None)
    if torch.compiler.is_compiling():  # bool(pred) would break the graph; nothing to record
        return torch.tensor(pred) if isinstance(pred, bool) and not python_test else pred
    try:
        _SEEN.setdefault(line, set()).add(bool(pred))
    except Exception:  # a traced value under compile: nothing to record
        pass
    # `force(not x, L)`: a Python bool becomes a 0-dim tensor, so the rewrite's tensor ops
    # (logical_not, where) apply to the instrumented copy as they do to the tensor form
    return torch.tensor(pred) if isinstance(pred, bool) and not python_test else pred


# Instrumented copies call ``__mend_force__(P, L)``: a name in builtins (set here, when the
# verifier is loaded) that Dynamo inlines like any Python function, so a compiled
# instrumented copy forces its predicate inside the graph (``__import__`` is untraceable).
builtins.__mend_force__ = force


@contextlib.contextmanager
def forced(line: int | str, value: bool):
    _FORCED[line] = value
    try:
        yield
    finally:
        _FORCED.pop(line, None)


@contextlib.contextmanager
def forced_all(setting: dict):
    """Every forcing of one :func:`settings` entry at once."""
    with contextlib.ExitStack() as stack:
        for key, value in setting.items():
            stack.enter_context(forced(key, value))
        yield


def seen(line: int | str) -> set:
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

    def leave_Assert(self, original: cst.Assert, updated: cst.Assert):
        if self.done or self.last_and or self.positions[original].start.line != self.line:
            return updated
        self.done = True
        test = updated.test
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and not test.lpar:
            operands = _and_operands(test)
            wrapped = [self._hook(op, repr(and_key(self.line, j))) for j, op in enumerate(operands)]
            chain = wrapped[0]
            for op in wrapped[1:]:
                chain = cst.BooleanOperation(left=chain, operator=cst.And(), right=op)
            return updated.with_changes(test=chain)
        return updated.with_changes(test=self._hook(test, repr(str(self.line))))

    def _hook(self, expr: cst.BaseExpression, key: str) -> cst.Call:
        call = cst.parse_expression(f"__mend_force__(_, {key})")
        return call.with_changes(args=[cst.Arg(expr.with_changes(lpar=[], rpar=[]) if _parenthesized(expr) else expr),
                                       call.args[1]])

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


def _parenthesized(expr: cst.BaseExpression) -> bool:
    return bool(getattr(expr, "lpar", None))


def _and_operands(test: cst.BooleanOperation) -> list[cst.BaseExpression]:
    """The operands of an unparenthesized ``A and B and C`` chain, in order (``or`` inside
    an operand, or a parenthesized ``(A and B)``, stays one operand)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and not test.lpar:
        return _and_operands(test.left) + _and_operands(test.right)
    return [test]


def forced_keys(code: str, line: int) -> list:
    """The forcing keys :func:`instrument` wrote for the statement on ``line``: an
    ``assert``'s (a str: its operands' of ``A and B``), else ``[line]``."""
    keys = re.findall(rf"__mend_force__\(.*?, '({line}(?:&\d+)?)'\)", code)
    return list(dict.fromkeys(keys)) or [line]


@lru_cache(maxsize=32)
def instrument(code: str, line: int, last_and: bool = False) -> str | None:
    """``code`` with the ``if`` test at ``line`` (or the test of the conditional expression
    that is the whole value of the statement there: ``y = a if p else b``, or an ``assert``'s
    test, an ``and`` chain's operands each: :func:`forced_keys`) wrapped in ``force``; None if
    no such test starts there. With ``last_and``, only the last operand of a top-level ``and``
    of an ``if`` is wrapped.
    Line numbers are unchanged. (A pure function of its arguments, so cached: the pipeline
    asks it several times per site, and parsing a 2,000-line library file with positions
    takes seconds.)"""
    lines = code.splitlines()
    # an `if`/`elif` statement always begins its line, and a ternary's line holds ` if `:
    # anything else is answered without parsing
    if not 0 < line <= len(lines) or not (re.match(r"(el)?if\b|assert\b", lines[line - 1].lstrip())
                                          or " if " in lines[line - 1]):
        return None
    wrap = _Wrap(cst.parse_module(code), line, last_and)
    out = wrap.wrapper.visit(wrap)
    return out.code if wrap.done else None
