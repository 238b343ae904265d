"""tensor-check: which sites the rule takes (a ``torch._check_tensor_all`` statement), why it
declines the others, and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted

NAME = "tensor-check"
CHECK_CALLS = {"torch._check_tensor_all"}

# torch._check_with's message when none is given (torch/__init__.py, torch 2.11-2.14): the
# rewrite raises exactly this RuntimeError; the verifier observes that it still is
DEFAULT_MESSAGE = ("Expected cond to be True, but got False. (Could this error message be improved? If so, please "
                   "report an enhancement request to PyTorch.)")


@dataclass
class Plan:
    line: cst.SimpleStatementLine   # the statement line holding the check
    call: cst.Call
    cond: cst.BaseExpression
    torch_name: str                 # how the module spells `torch` (`torch`, `th`)


def _pure_read(expr: cst.BaseExpression) -> bool:
    """A name or attribute chain: evaluating it again reads the same object (no call, no index)."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name)


def torch_aliases(module: cst.Module | None) -> set[str]:
    """The names ``torch`` is bound to by the module's top-level imports (``import torch as th``)."""
    names = {"torch"}
    for stmt in module.body if module is not None else ():
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if dotted(alias.name) == "torch" and alias.asname is not None:
                        names.add(alias.asname.name.value)
    return names


def _check_call(node: cst.CSTNode, aliases: set[str]) -> cst.Call | None:
    if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
        name = dotted(node.value.func) or ""
        root, _, rest = name.partition(".")
        if root in aliases and "torch." + rest in CHECK_CALLS:
            return node.value
    return None


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    call = _check_call(node, torch_aliases(module))
    if call is None:
        return Decline(NAME, "the statement is not a `torch._check_tensor_all(cond)` call")
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.SimpleStatementLine) or len(parent.body) != 1:
        return Decline(NAME, "the check shares its line with other statements")
    if parent.trailing_whitespace.comment is not None:
        return Decline(NAME, "a comment on the check's line would be dropped")
    args = list(call.args)
    if not args or args[0].keyword is not None or args[0].star:
        return Decline(NAME, "the condition is not passed as the first positional argument")
    if len(args) > 1:
        # a message callable runs only when the check fails, on the host; its text cannot be
        # known when the graph is traced
        return Decline(NAME, "the check has a message callable, whose text is computed only when the check fails")
    cond = args[0].value
    if not _pure_read(cond):
        return Decline(NAME, f"the condition `{code_of(cond)}` is not a plain name or attribute: the rewrite reads it "
                       "up to three times (dtype guard, assert, fallback)")
    root = dotted(call.func).split(".")[0]
    return Plan(parent, call, cond, root)


def match(loc: Located) -> Match | Decline:
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    return Match(NAME, "torch._check_tensor_all -> torch._assert_async (same RuntimeError and message), "
                 "bool-dtype guard keeps the original call otherwise")
