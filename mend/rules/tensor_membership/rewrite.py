"""tensor-membership: the rewrite. The test ``v in t`` becomes ``(v == t).any()`` (``v not
in t``: ``not (v == t).any()``), the expression ``Tensor.__contains__`` evaluates before
its ``.item()``, and the ``if`` is then predicated as a data-dependent branch
(:mod:`mend.rules.predicated_control_flow`, with all of its screens and obligations)."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules import predicated_control_flow as pcf
from mend.rules.predicated_control_flow import FORCING_HOOK
from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, dotted
from mend.rules.tensor_membership.screen import NAME, combined, if_with_ancestors, membership


def _unhook(test: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.Call | None]:
    """(the test, the verifier's ``__mend_force__(test, L)`` call around it or None)."""
    if isinstance(test, cst.Call) and code_of(test).startswith(FORCING_HOOK) and test.args:
        return test.args[0].value, test
    return test, None


def _convert(test: cst.BaseExpression, typed: bool = False) -> tuple[cst.BaseExpression, str, str, dict] | None:
    """``v in t`` (also inside the verifier's ``__mend_force__(v in t, L)``) as
    ``(v == t).any()``: (new test, original source, new source, obligation), or None when
    ``test`` is not one membership test on a non-literal container. ``typed``: as
    ``((v == t).any() if <t a plain tensor and v a tensor, int, float or bool> else v in t)``,
    any other type (a list container, a string or numpy element) taking ``in`` itself
    (helper-59: the bare ``(v == t).any()`` raised AttributeError for a list); the operands are
    read twice there, so each must be a name or an attribute chain (a property's effect would
    show in the state the verifier observes, or in the output it compares), else None."""
    test, hook = _unhook(test)
    parts = membership(test)
    if parts is None:
        return None
    elem, cont, negated = parts
    if not typed:
        new = f"({elem} == {cont}).any()"
    elif any(dotted(cst.parse_expression(x)) is None for x in (elem, cont)):
        return None
    else:
        new = (f"(({elem} == {cont}).any() if type({cont}) is torch.Tensor and (type({elem}) is torch.Tensor "
               f"or type({elem}) in (int, float, bool)) else {elem} in {cont})")
    new = f"{'not ' if negated else ''}{new}"
    expr = cst.parse_expression(new)
    if hook is not None:
        expr = hook.with_changes(args=[cst.Arg(expr), *hook.args[1:]])
    return expr, code_of(test).strip(), new, {"kind": "membership-any", "lhs": elem, "rhs": cont}


def _plain(obligation: dict, bound: frozenset[str]) -> bool:
    """Both operands are attributes, or names in ``bound`` (bound on every path to the chain):
    reading them cannot raise. The rewritten chain evaluates an ``elif``'s test even where the
    ``if`` before it was true, so an operand that indexes or calls (``elif ids[4] in
    self.special``, helper-36: IndexError where the original never read it), or a local bound
    only under a condition (``if self.use_pad: pad = 0`` ... ``elif pad not in ids``, helper-37:
    UnboundLocalError), is left to the predicated rule, which declines it."""
    for k in ("lhs", "rhs"):
        name = dotted(cst.parse_expression(obligation[k]))
        if name is None or ("." not in name and name not in bound):
            return False
    return True


def _bound(node: cst.If, ancestors: list[cst.CSTNode]) -> frozenset[str]:
    """Names bound on every path to ``node``: the enclosing function's parameters and the
    targets of plain assignments at its body's top level before the statement holding it."""
    fns = [i for i, a in enumerate(ancestors) if isinstance(a, cst.FunctionDef)]
    if not fns:
        return frozenset()
    fn = ancestors[fns[-1]]
    # ancestors[i + 1] is the function's IndentedBlock, ancestors[i + 2] the body statement
    holder = (ancestors + [node])[fns[-1] + 2]
    params = fn.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for stmt in fn.body.body:
        if stmt is holder:
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    names |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
    return frozenset(names)


def _chain(node: cst.If, head: bool = True, bound: frozenset[str] = frozenset()) -> tuple[cst.If, list[tuple[str, str, dict]]]:
    """The ``if`` with the membership tests of its ``elif`` chain converted (an ``elif`` of
    another kind, or whose operands are not plain names, is left to the predicated rule), and
    (old, new, obligation) per test."""
    done: list[tuple[str, str, dict]] = []
    orelse = node.orelse
    if isinstance(orelse, cst.If):
        orelse, done = _chain(orelse, head=False, bound=bound)
    converted = _convert(node.test)
    if converted is None or not (head or _plain(converted[3], bound)):
        return node.with_changes(orelse=orelse), done
    expr, old, new, obligation = converted
    if not head:   # evaluated on every call now: its element must not fail to broadcast (membership-any)
        obligation = {**obligation, "elif": True}
    return node.with_changes(test=expr, orelse=orelse), [(old, new, obligation), *done]


def _tensor_test(module: cst.Module, line: int):
    """(module with the tests rewritten, [(original test, new test, obligation), ...], (the
    original ``if``, the ``if`` with its tests rewritten)) or a Decline. The ``if`` on ``line`` must be a membership test; so may its ``elif``s be (a
    chain of memberships, helper-34's case: its ``elif v not in t`` was a Python-level check
    to the predicated rule)."""
    found = if_with_ancestors(module, line)
    if found is None:
        return Decline(NAME, f"no `if` starts on line {line}")
    node, ancestors = found
    test, _ = _unhook(node.test)
    if membership(test) is None:
        return Decline(NAME, combined(test) or f"the test `{code_of(test).strip()[:60]}` is not one `v in t` on a tensor")
    new_node, tests = _chain(node, bound=_bound(node, ancestors))
    return module.visit(Replace(node, new_node)), tests, (node, new_node)


class _KeepOriginal(cst.CSTTransformer):
    """The ``if`` the ``torch.cond`` form keeps under ``else:`` for the runs it does not cover,
    back to the original ``v in t``: with autograd on, the kept ``if (v == t).any():`` broke
    the graph where ``v in t`` made Dynamo run the frame eagerly, 0 graphs (+1 eager frame) -> 2
    (helper-85 F8); now the original runs exactly as before, whatever the operand types. The
    copy is found by structure (the converted ``if`` with its body, alone under the ``else:``
    of an ``if`` that tests ``is_compiling()``), not by text (helper-34: a substitution also
    rewrote a hand-written ``if (tok == ids).any():`` elsewhere)."""

    def __init__(self, original: cst.If, converted: cst.If):
        self.original = original.with_changes(leading_lines=[])
        self.converted = converted.with_changes(leading_lines=[])
        self.kept = 0

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        orelse = updated_node.orelse
        body = orelse.body.body if isinstance(orelse, cst.Else) and isinstance(orelse.body, cst.IndentedBlock) else ()
        if len(body) != 1 or not isinstance(body[0], cst.If) or not m.findall(
                updated_node.test, m.Attribute(attr=m.Name("is_compiling"))):
            return updated_node
        if not body[0].with_changes(leading_lines=[]).deep_equals(self.converted):
            return updated_node
        self.kept += 1
        kept = self.original.with_changes(leading_lines=body[0].leading_lines)
        return updated_node.with_changes(orelse=orelse.with_changes(body=orelse.body.with_changes(body=[kept])))


def _keep_original(result: RewriteResult, pair: tuple[cst.If, cst.If]) -> RewriteResult:
    """``result`` with the kept ``if`` (if any) testing the original membership again."""
    keep = _KeepOriginal(*pair)
    code = cst.parse_module(result.code).visit(keep).code
    if keep.kept:
        result.code = code
        result.detail += " (the kept if tests the original membership)"
    return result


def _only_raises(module: cst.Module, line: int) -> bool:
    """The ``if`` on ``line`` has no ``else``/``elif`` and its body is one ``raise``."""
    found = if_with_ancestors(module, line)
    node = found[0] if found else None
    body = node.body.body if node is not None and isinstance(node.body, cst.IndentedBlock) else []
    return node is not None and node.orelse is None and len(body) == 1 and \
        isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 and isinstance(body[0].body[0], cst.Raise)


def _typed_test(module: cst.Module, line: int):
    """(module, tests) with the ``if v in t`` on ``line`` as :func:`_convert`'s typed test, or
    None when it is not one membership whose operands are names or attribute chains."""
    found = if_with_ancestors(module, line)
    converted = _convert(found[0].test, typed=True) if found is not None else None
    if converted is None:
        return None
    expr, old, new, obligation = converted
    return module.visit(Replace(found[0], found[0].with_changes(test=expr))), [(old, new, obligation)]


def _annotate(result: RewriteResult, tests: list[tuple[str, str, dict]]) -> RewriteResult:
    """The predicated rule's result as this rule's: ``membership-any`` per rewritten test
    first, the tests' rewrites in the detail, and the rule's own name and the original tests
    in the emitted comments (the ``if`` the ``torch.cond`` form keeps is restored by
    :func:`_keep_original`, by structure)."""
    result.obligations = [ob for _, _, ob in tests] + result.obligations
    result.detail = "; ".join(f"`{old}` -> `{new}`" for old, new, _ in tests) + f"; {result.detail}"
    for old, new, _ in tests:
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
    mended, tests, pair = found
    result = pcf.rewrite(mended, line, form=form)
    if isinstance(result, Decline) and form is None and _only_raises(module, line):
        # `if v in t: raise E(msg)`: a branch that only raises is predicated validation's, not a
        # selection's -- the test as `(v == t).any()` where the operands' types make it the
        # same (else `v in t` itself, helper-59), the raise as `torch._assert_async`
        from mend.rules import predicated_validation as pv

        typed = _typed_test(module, line)
        checked = pv.rewrite(typed[0], line) if typed is not None else Decline(
            NAME, "an operand of the membership is not a name or an attribute chain (it would be read twice)")
        if not isinstance(checked, Decline):
            return _annotate(checked, typed[1])
        result = Decline(result.rule, f"{result.reason}; nor can its check move into the graph: {checked.reason}")
    if isinstance(result, Decline):
        said = ", ".join(f"`{old}` is `{new}`" for old, new, _ in tests)
        return Decline(NAME, f"{said} on a tensor, but the branch cannot be predicated: {result.reason}")
    return _annotate(_keep_original(result, pair), tests)


def alternatives(module: cst.Module, line: int) -> list[RewriteResult]:
    """The predicated rule's other forms of the same site (``torch.cond`` / ``torch.where``),
    each with ``membership-any``; empty when there are none. Never raises."""
    try:
        found = _tensor_test(module, line)
        if isinstance(found, Decline):
            return []
        mended, tests, pair = found
        return [_annotate(_keep_original(alt, pair), tests) for alt in pcf.alternatives(mended, line)]
    except Exception:  # noqa: BLE001 - an alternative is optional; the rule's own rewrite stands
        return []
