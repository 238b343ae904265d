"""Rule: predicated control flow (GraphMend paper §4, "[Where]").

A data-dependent ``if``/``else`` on a tensor predicate becomes one graph-native selection,
``torch.where(pred, a, b)`` when both sides are pure and agree in shape and dtype.

Fix safety: declined when a branch mutates state, leaves early, the two sides differ in
None-ness, or the site sits in a loop (Dynamo skipped the frame; predicating would run
the untaken side every iteration, cf. shared/cases 006).
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules import Decline, Match
from mend.rules._effects import assigned_name, has_out_kwarg, inplace_call, simple_statements
from mend.taxonomy import call_name

NAME = "predicated-control-flow"


def branches(node: cst.If) -> list[tuple[cst.BaseExpression | None, cst.BaseSuite]]:
    """``[(test, body), ..., (None, else_body)]`` for an if/elif/else chain."""
    out = []
    cur: cst.If | cst.Else | None = node
    while isinstance(cur, cst.If):
        out.append((cur.test, cur.body))
        cur = cur.orelse
    if isinstance(cur, cst.Else):
        out.append((None, cur.body))
    return out


def is_device_move(stmt) -> bool:
    """``self.a = self.a.to(device)``: idempotent; may be hoisted out of a branch."""
    return bool(m.matches(stmt, m.Assign(
        targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))],
        value=m.Call(func=m.Attribute(attr=m.Name("to"))))) and
        stmt.targets[0].target.deep_equals(stmt.value.func.value))


def is_memo_init(stmt) -> bool:
    """``if not hasattr(self, "k"): self.k... = init(...)``: a memoised initialisation."""
    return bool(m.matches(stmt, m.If(
        test=m.UnaryOperation(operator=m.Not(), expression=m.Call(func=m.Name("hasattr"))),
        orelse=None)))


def _check_branch(body) -> tuple[set[str], bool, set[str]] | Decline:
    """(assigned names, returns?, names assigned None) or a Decline."""
    names: set[str] = set()
    nones: set[str] = set()
    returns = False
    for stmt in body.body:
        if isinstance(stmt, cst.If) and is_memo_init(stmt):
            continue
        if not isinstance(stmt, cst.SimpleStatementLine):
            return Decline(NAME, f"a branch holds a nested `{type(stmt).__name__.lower()}` statement")
        for small in stmt.body:
            op = inplace_call(small)
            if op:
                return Decline(NAME, f"a branch mutates a tensor in place (`{op}`)")
            if has_out_kwarg(small):
                return Decline(NAME, "a branch writes through `out=`")
            if isinstance(small, cst.Return):
                returns = True
            elif isinstance(small, cst.Pass):
                pass
            elif (name := assigned_name(small)) is not None:
                names.add(name)
                if m.matches(small.value, m.Name("None")):
                    nones.add(name)
            elif is_device_move(small):
                pass
            elif isinstance(small, cst.Expr) and (call_name(small.value) or "").endswith("register_buffer"):
                pass
            elif isinstance(small, (cst.AugAssign,)) or (isinstance(small, cst.Assign)):
                target = small.target if isinstance(small, cst.AugAssign) else small.targets[0].target
                code = cst.Module([]).code_for_node(target)
                return Decline(NAME, f"a branch mutates state (`{code}`)")
            elif isinstance(small, cst.Raise):
                return Decline(NAME, "a branch raises")
            elif isinstance(small, (cst.Global, cst.Nonlocal)):
                return Decline(NAME, "a branch declares global/nonlocal state")
            else:
                code = cst.Module([]).code_for_node(small)
                return Decline(NAME, f"a branch runs `{code.strip()[:60]}` for its effect")
    return names, returns, nones


def match(loc: Located) -> Match | Decline:
    """Static screen of a data-dependent branch site (no verification yet)."""
    if loc.in_loop:
        return Decline(NAME, "the branch sits inside a loop, so Dynamo skipped the whole frame; predicating it "
                             "would evaluate the skipped side on every iteration (cost, inf*0 NaNs)")
    node = loc.node
    if isinstance(node, cst.If):
        arms = branches(node)
        results = []
        for _, body in arms:
            res = _check_branch(body)
            if isinstance(res, Decline):
                return res
            results.append(res)
        if len(arms) == 1:
            results.append((set(), False, set()))  # the implicit empty else
        returns = {r[1] for r in results}
        if returns == {True, False}:
            return Decline(NAME, "a branch leaves early (`return`) while the other falls through")
        for nones in (r[2] for r in results):
            if nones:
                name = sorted(nones)[0]
                return Decline(NAME, f"the two sides differ in None-ness (`{name}` becomes None on one side)")
        return Match(NAME, "if/else -> torch.where or torch.cond")
    if m.findall(node, m.BooleanOperation()):
        return Match(NAME, "tensor `and`/`or` -> torch.logical_and/logical_or")
    return Decline(NAME, "the tensor's truth value is taken in a form the rule does not rewrite")
