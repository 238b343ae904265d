"""setup-guard: the rewrite. Each statement ``G(args)`` of the module becomes::

    if not (G is _mend_setup_guard_G and (<G's first check, G's parameters replaced by args>)):  # mend: ...
        G(args)

and ``_mend_setup_guard_G = G`` takes the blank line right after ``G``'s ``def`` (no line
moves): a ``G`` replaced from outside the module, or a caller's own ``G``, is not the function
whose check was hoisted, and is called as before. In the check, a value the check tests for truth must first be a bool (``type(T) is bool and T``;
``T is None or (type(T) is bool and not T)`` for ``not T``): another object makes the hoisted
test False, and ``G``'s own check then takes its truth as before (no ``__bool__`` runs twice or
early).

The check moves into the caller's frame, where Dynamo evaluates it while tracing and guards
on what it read: once the setup has run, the guard fails, the caller is compiled again (one
recompilation) and the new code skips the call, so it no longer splits the caller's graph."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import code_of
from mend.rules.setup_guard.screen import NAME, alias_of, hoisted_test, one_line, plan


def _with_alias(module: cst.Module, name: str) -> cst.Module:
    """``module`` with ``_mend_setup_guard_G = G`` on the blank line that follows ``G``'s
    ``def`` (kept as it is when an earlier rewrite put it there); at the end of the file when
    ``G`` is the last statement (the plan declined a ``G`` followed by no blank line)."""
    at = next(i for i, s in enumerate(module.body) if isinstance(s, cst.FunctionDef) and s.name.value == name)
    body = list(module.body)
    alias = alias_of(name)
    stmt = cst.parse_statement(f"{alias} = {name}  # mend: {NAME} (the function whose first check is hoisted)\n")
    if at + 1 < len(body):
        nxt = body[at + 1]
        if m.matches(nxt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name(alias))])])):
            return module
        lines = list(nxt.leading_lines)   # the plan made sure lines[0] is blank (alias_problem)
        body[at + 1:at + 2] = [stmt, nxt.with_changes(leading_lines=lines[1:])]
        return module.with_changes(body=body)
    footer = list(module.footer)
    if footer and footer[0].comment is None:
        footer = footer[1:]
    return module.with_changes(body=[*body, stmt], footer=footer)


class _Swap(cst.CSTTransformer):
    """Replace statement lines (by identity) in one pass."""

    def __init__(self, swaps: dict):
        self.swaps = swaps

    def on_leave(self, original_node, updated_node):
        return self.swaps.get(id(original_node), updated_node)


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the first check of the function the break on ``line`` sits under
    hoisted into each of its statement calls, or a Decline."""
    res = plan(module, line)
    if isinstance(res, Decline):
        return res
    name = res.guarded.name.value
    obligations, swaps = [], {}
    for shift, site in enumerate(sorted(res.sites, key=lambda s: s.start)):
        call = one_line(code_of(site.call))
        test = f"not ({hoisted_test(name, site.check)})"
        note = f"# mend: {NAME} (was: {call}; the first check of `{name}`, line {res.guard_line}, hoisted)"
        block = cst.parse_statement(f"if {test}:  {note}\n    {call}\n", config=res.module.config_for_parsing)
        indented = block.body.with_changes(body=[site.line.with_changes(leading_lines=[])])
        block = block.with_changes(body=indented, leading_lines=site.line.leading_lines)
        swaps[id(site.line)] = block
        # each hoisted check adds one line above its call: the mended `if` is `shift` lines lower
        obligations.append({"kind": "guard-hoisted", "line": site.start + shift, "function": name, "call": call,
                            "check": site.check, "lemmas": ["proofs/sg_hoisted_check.smt2"]})
    new = _with_alias(res.module.visit(_Swap(swaps)), name)
    # the attributes the checks read, observed where the hoisted check runs (a check that reads
    # none needs no observation: the values it tests for truth are gated to bools first, so no
    # user __bool__ runs there)
    reads = sorted({r for s in res.sites for r in s.reads})
    if reads:
        values = [v for obj, attr in reads for v in (f"{obj}.__class__.{attr}", f"{obj}.__class__.__getattribute__",
                                                     f"{obj}.__class__.__getattr__", f"{obj}.{attr}")]
        obligations.append({"kind": "guard-read-plain", "reads": [list(r) for r in reads], "values": values})
    lines = [s.start for s in res.sites]
    return RewriteResult(new.code, (min(lines), max(lines)),
                         f"the first check of `{name}` (`if {code_of(res.check).strip()}: return`, line "
                         f"{res.guard_line}) hoisted into its call{'s' if len(lines) > 1 else ''} (line "
                         f"{', '.join(map(str, lines))})", obligations)
