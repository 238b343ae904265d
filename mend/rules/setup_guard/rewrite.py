"""setup-guard: the rewrite. Each statement ``G(args)`` of the module becomes::

    if not (<G's first check, G's parameters replaced by args>):  # mend: setup-guard (...)
        G(args)

where a value the check tests for truth must first be a bool (``type(T) is bool and T``;
``T is None or (type(T) is bool and not T)`` for ``not T``): another object makes the hoisted
test False, and ``G``'s own check then takes its truth as before (no ``__bool__`` runs twice or
early).

The check moves into the caller's frame, where Dynamo evaluates it while tracing and guards
on what it read: once the setup has run, the guard fails, the caller is compiled again (one
recompilation) and the new code skips the call, so it no longer splits the caller's graph."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import code_of
from mend.rules.setup_guard.screen import NAME, one_line, plan


def _needs_parens(check: str) -> bool:
    expr = cst.parse_expression(check)
    return isinstance(expr, (cst.BooleanOperation, cst.Comparison, cst.UnaryOperation))


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
        test = f"not ({site.check})" if _needs_parens(site.check) else f"not {site.check}"
        note = f"# mend: {NAME} (was: {call}; the first check of `{name}`, line {res.guard_line}, hoisted)"
        block = cst.parse_statement(f"if {test}:  {note}\n    {call}\n", config=res.module.config_for_parsing)
        indented = block.body.with_changes(body=[site.line.with_changes(leading_lines=[])])
        block = block.with_changes(body=indented, leading_lines=site.line.leading_lines)
        swaps[id(site.line)] = block
        # each hoisted check adds one line above its call: the mended `if` is `shift` lines lower
        obligations.append({"kind": "guard-hoisted", "line": site.start + shift, "function": name, "call": call,
                            "check": site.check, "lemmas": ["proofs/sg_hoisted_check.smt2"]})
    new = res.module.visit(_Swap(swaps))
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
