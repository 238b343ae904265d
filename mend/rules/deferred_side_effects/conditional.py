"""deferred-side-effects under a tensor test: ``if P: <print/logger/warnings.warn call>``.

The branch breaks the graph (``bool(P)`` reads a tensor on the host) only to decide whether
the effect happens. It becomes one call, ``<rt>.defer_print_if(P, ...)`` (``defer_log_if``,
``defer_warn_if``): ``P`` is evaluated first, as the ``if`` evaluated it; under
torch.compile a one-element tensor ``P`` is snapshotted with the arguments and the replay
performs the call exactly when ``bool(P)`` is true (:func:`mend.runtime.defer_print_if`).

What changes is that the call's arguments are now evaluated when ``P`` is false too, so
they must be unable to raise or have an effect there: each is a constant, a name bound on
every path to the ``if`` (a parameter, a name assigned by an earlier top-level statement of
the function, or a module-level name the function does not assign), or an f-string over such names (formatted lazily, at replay, only when ``P`` holds; a
``%``-format would be applied at the call, so it declines). The
``if`` line becomes a comment, so the call keeps the line it had (warnings and log records
name the original line). Declined with the reason otherwise: an ``else``/``elif``, a body
of more than one statement, a test spanning lines, another argument.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._common import code_of as _code
from mend.rules.deferred_side_effects.screen import NAME, _effect_in, _kind
from verifier.encoders.capture_if import why_unbound

_CONSTANTS = (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)


def conditional_site(found: tuple | None):
    """``(if node, its ancestors, the body's call statement)`` when ``found`` (``statement_at``'s
    ``(node, ancestors)``) is an ``if`` whose whole body is one print/logger/warnings.warn
    statement; else None."""
    if found is None or not isinstance(found[0], cst.If):
        return None
    node = found[0]
    if found[1] and isinstance(found[1][-1], cst.If) and found[1][-1].orelse is node:
        return None   # an `elif`: it runs only when the tests before it fail
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    expr = body[0].body[0]
    if not (isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call) and _kind(expr.value) is not None):
        return None
    return node, found[1], body[0]


def unhoist(module: cst.Module, node: cst.If, stmt: cst.SimpleStatementLine) -> cst.Module:
    """``module`` with the ``if`` replaced by its body statement, the ``if`` line a comment."""
    note = cst.EmptyLine(comment=cst.Comment(f"# mend: {NAME} (was: if {' '.join(_code(node.test).split())}:)"))
    new = stmt.with_changes(leading_lines=[*node.leading_lines, note, *stmt.leading_lines])

    class Swap(cst.CSTTransformer):
        def on_leave(self, original, updated):
            return new if original is node else updated

    return module.visit(Swap())


def screen(module: cst.Module, node: cst.If, ancestors: list, stmt: cst.SimpleStatementLine,
           positions_ok: bool, line: int) -> str | None:
    """Why ``if P: CALL`` cannot become ``defer_*_if(P, ...)``, or None."""
    if node.orelse is not None:
        return "the `if` has an `else`/`elif`: both arms would have to be deferred"
    if not positions_ok:
        return "the `if` test spans several lines: the call could not keep its line"
    if stmt.leading_lines and any(ln.comment is None for ln in stmt.leading_lines):
        return "a blank line separates the `if` from its call: the call could not keep its line"
    effect = _effect_in(node.test)
    if effect:
        return f"the test has an effect ({effect})"
    if not any(isinstance(a, cst.FunctionDef) for a in ancestors):
        return "the `if` is not inside a function"
    call = stmt.body[0].value
    if any(a.keyword is not None and a.keyword.value == "stacklevel" for a in call.args):
        return "`stacklevel=` names a caller frame, which the replay cannot attribute as eager does"
    if isinstance(call.func, cst.Attribute) and _kind(call) == "log":
        why = _unconditional(call.func.value, module, line)
        if why:
            return f"the logger `{_code(call.func.value)}` would be evaluated when the test is false too, and {why}"
    for arg in call.args:
        if arg.star:
            return f"an argument is unpacked (`{_code(arg.value)}`)"
        why = _unconditional(arg.value, module, line)
        if why:
            return (f"the call's argument `{_code(arg.value)}` would be evaluated when the test is false too, and "
                    f"{why}; only constants, names bound on every path and f-strings over them are")
    return None


def _unconditional(value: cst.BaseExpression, module: cst.Module, line: int) -> str | None:
    """Why evaluating ``value`` where the original did not could raise or have an effect."""
    if isinstance(value, _CONSTANTS) or m.matches(value, m.Name("True") | m.Name("False") | m.Name("None")):
        return None
    if isinstance(value, cst.FormattedString):
        for part in value.parts:
            if isinstance(part, cst.FormattedStringExpression):
                if part.format_spec or part.equal:
                    return "a formatted field with a format spec (not evaluated lazily here)"
                why = _unconditional(part.expression, module, line)
                if why:
                    return why
        return None
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Modulo):
        return "a `%`-format is applied where the call is (`\"%d\" % t` raises for a tensor of several elements)"
    if isinstance(value, cst.Name):
        return why_unbound(module.code, line, value.value)
    return f"`{_code(value)}` is neither a constant nor a name (it may raise, e.g. on an empty or missing value)"
