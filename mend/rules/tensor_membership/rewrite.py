"""tensor-membership: the rewrite. The test ``v in t`` becomes ``(v == t).any()`` (``v not
in t``: ``not (v == t).any()``), the expression ``Tensor.__contains__`` evaluates before
its ``.item()``, and the ``if`` is then predicated as a data-dependent branch
(:mod:`mend.rules.predicated_control_flow`, with all of its screens and obligations)."""
from __future__ import annotations

import libcst as cst

from mend.rules import predicated_control_flow as pcf
from mend.rules.predicated_control_flow import FORCING_HOOK
from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of
from mend.rules.tensor_membership.screen import NAME, combined, if_at, membership


def _tensor_test(module: cst.Module, line: int):
    """(module with the test rewritten, original test, new test, obligation) or a Decline."""
    node = if_at(module, line)
    if node is None:
        return Decline(NAME, f"no `if` starts on line {line}")
    test, hook = node.test, None
    if isinstance(test, cst.Call) and code_of(test).startswith(FORCING_HOOK) and test.args:
        # the verifier's instrumented copy, `__mend_force__(v in t, L)`: rewrite inside the hook
        test, hook = test.args[0].value, test
    parts = membership(test)
    if parts is None:
        return Decline(NAME, combined(test) or f"the test `{code_of(test).strip()[:60]}` is not one `v in t` on a tensor")
    elem, cont, negated = parts
    new = f"{'not ' if negated else ''}({elem} == {cont}).any()"
    expr = cst.parse_expression(new)
    if hook is not None:
        expr = hook.with_changes(args=[cst.Arg(expr), *hook.args[1:]])
    mended = module.visit(Replace(node, node.with_changes(test=expr)))
    return mended, code_of(test).strip(), new, {"kind": "membership-any", "lhs": elem, "rhs": cont}


def _annotate(result: RewriteResult, old: str, new: str, obligation: dict) -> RewriteResult:
    """The predicated rule's result as this rule's: ``membership-any`` first, the test's
    rewrite in the detail, and the rule's own name and the original test in the emitted
    comment. (The ``if`` the ``torch.cond`` form keeps for eager runs tests ``(v == t).any()``:
    restoring ``v in t`` there by a text substitution also rewrote an identical line
    elsewhere in the file, found by helper-34; the two are equal under ``membership-any``.)"""
    result.obligations = [obligation, *result.obligations]
    result.detail = f"`{old}` -> `{new}`; {result.detail}"
    for kw in ("if", "elif"):
        result.code = result.code.replace(f"# mend: {pcf.NAME} (was: {kw} {new})",
                                          f"# mend: {NAME} (was: {kw} {old})", 1)
    return result


def rewrite(module: cst.Module, line: int, form: str | None = None) -> RewriteResult | Decline:
    """Predicate the ``if v in t:`` on ``line`` as ``torch.where((v == t).any(), ...)`` (or
    ``torch.cond``; ``form`` as in :func:`mend.rules.predicated_control_flow.rewrite`).
    Returns the new module with the predicated rule's obligations plus ``membership-any``,
    or a :class:`Decline` with the reason (the predicated rule's own, when the branch cannot
    be predicated). Raises ValueError for an unknown ``form``."""
    found = _tensor_test(module, line)
    if isinstance(found, Decline):
        return found
    mended, old, new, obligation = found
    result = pcf.rewrite(mended, line, form=form)
    if isinstance(result, Decline):
        return Decline(NAME, f"`{old}` is `{new}` on a tensor, but the branch cannot be predicated: {result.reason}")
    return _annotate(result, old, new, obligation)


def alternatives(module: cst.Module, line: int) -> list[RewriteResult]:
    """The predicated rule's other forms of the same site (``torch.cond`` / ``torch.where``),
    each with ``membership-any``; empty when there are none. Never raises."""
    try:
        found = _tensor_test(module, line)
        if isinstance(found, Decline):
            return []
        mended, old, new, obligation = found
        return [_annotate(alt, old, new, obligation) for alt in pcf.alternatives(mended, line)]
    except Exception:  # noqa: BLE001 - an alternative is optional; the rule's own rewrite stands
        return []
