"""numpy-constants: the rewrite. Each ``np.sum(X)`` / ``np.prod(X)`` / ``np.lcm(A, B)`` /
``np.gcd(A, B)`` the screen admits becomes an immediately called lambda (its operands
evaluated once, as before) that computes the exact Python result when every operand is a
Python int in ``(-2**31, 2**31)`` (a non-empty list of such ints for ``sum``; a non-empty
list or tuple of ints in ``(0, 2**31)`` whose exact product is below ``2**63`` for
``prod``), and calls the original numpy function otherwise. Dynamo decides the guard at
trace time on constants, so it adds no break (measured: big_bird 11 -> 1 graphs on torch
2.13; ``int(np.prod(self.patch_size))`` 2 -> 1). When the module does not bind ``math``,
``import math`` is added to its last top-level import line, so no line moves."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import add_import, code_of, statement_at
from mend.rules.numpy_constants.screen import (BOUND_TEXT, FUNCS, LIST_FUNCS, MAX_LEN_TEXT, NAME, PROD_BOUND_TEXT,
                                              Site, screen)


def guarded(site: Site) -> str:
    """The guarded replacement of one numpy call, as source."""
    np_, b = site.np_name, BOUND_TEXT
    ops = ", ".join(code_of(o).strip() for o in site.operands)
    if site.func in LIST_FUNCS:
        return (f"(lambda v: {site.func}(v) if type(v) is list and 0 < len(v) < {MAX_LEN_TEXT} and "
                f"all([type(e) is int and -{b} < e < {b} for e in v]) else {np_}.{site.func}(v))({ops})")
    if site.func == "prod":
        # a shape (`h.shape[1:]`) is a torch.Size, a tuple subclass: admitted by its exact type
        kinds = "type(v) is list or type(v) is tuple" + (f" or type(v) is {site.size_type}" if site.size_type else "")
        return (f"(lambda v: math.prod(v) if ({kinds}) and 0 < len(v) < {MAX_LEN_TEXT} "
                f"and all([type(e) is int and 0 < e < {b} for e in v]) and math.prod(v) < {PROD_BOUND_TEXT} "
                f"else {np_}.prod(v))({ops})")
    repl = FUNCS[site.func][1]
    lo = "0" if site.positive else f"-{b}"     # positive operands: the result (>= 1) may divide
    return (f"(lambda a, b: {repl}(a, b) if type(a) is int and type(b) is int and {lo} < a < {b} and "
            f"{lo} < b < {b} else {np_}.{site.func}(a, b))({ops})")


class _ReplaceCalls(cst.CSTTransformer):
    """Replace the calls (by identity) and mark the statement line holding the first one."""

    def __init__(self, table: dict[int, cst.BaseExpression], was: str) -> None:
        self.table, self.was, self.done = table, was, False
        self.hits: list[bool] = []

    def visit_SimpleStatementLine(self, node) -> bool:
        self.hits.append(False)
        return True

    def leave_SimpleStatementLine(self, original_node, updated_node):
        hit = self.hits.pop()
        if hit and not self.done:
            self.done = True
            if updated_node.trailing_whitespace.comment is None:
                return updated_node.with_changes(trailing_whitespace=updated_node.trailing_whitespace.with_changes(
                    whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(f"# mend: {NAME} (was: {self.was})")))
        return updated_node

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.table:
            if self.hits:
                self.hits[-1] = True
            return self.table[id(original_node)]
        return super().on_leave(original_node, updated_node)


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the numpy calls of the statement on ``line`` made exact Python
    arithmetic under a guard, or a Decline."""
    wrapper, found = statement_at(module, line, compound=True)
    if found is None:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return plan
    table, obligations, was = {}, [], []
    for site in plan.sites:
        text = guarded(site)
        table[id(site.call)] = cst.parse_expression(text).with_changes(lpar=site.call.lpar, rpar=site.call.rpar) \
            if site.call.lpar else cst.parse_expression(text)
        original = " ".join(code_of(site.call).split())
        was.append(original)
        ops = [code_of(o).strip() for o in site.operands]
        obligations.append({"kind": "numpy-int64-exact", "op": site.func, "numpy": site.np_name,
                            "expr": original, "operands": ops, "mended": text})
        obligations.append({"kind": "numpy-result-consumer", "op": site.func, "numpy": site.np_name,
                            "expr": original, "mended": text, "consumer": site.consumer})
        if site.sizes:   # taken to be ints (tensor sizes) by their spelling alone: left unknown, an unsafe fix
            obligations.append({"kind": "numpy-size-operands", "op": site.func, "expr": original,
                                "sizes": list(site.sizes)})
        if site.receivers:   # taken to be tensors or arrays by the method's name alone: unknown, an unsafe fix
            obligations.append({"kind": "numpy-method-receiver", "op": site.func, "expr": original,
                                "receivers": list(site.receivers)})
    new = wrapper.module.visit(_ReplaceCalls(table, "; ".join(was)))
    if plan.import_math:
        new = add_import(new, "import math", same_line=True)
    end = line if isinstance(node, cst.BaseCompoundStatement) else \
        line + module.code_for_node(node).strip("\n").count("\n")
    if plan.statement is not node:
        # a local's binding on another line (`width = np.sum(plan)`, read at the site): the
        # span runs from the first of the two statements to the last
        where = wrapper.resolve(PositionProvider)[plan.statement]
        line, end = min(line, where.start.line), max(end, where.end.line)
    detail = "; ".join(f"`{w}` -> `{FUNCS[s.func][1]}` when every operand is a Python int in "
                       f"{'(0, 2**31) with a product below 2**63' if s.func == 'prod' else '(0, 2**31)' if s.positive else '(-2**31, 2**31)'}, "
                       f"else the numpy call ({s.consumer})" for w, s in zip(was, plan.sites))
    if plan.import_math:
        detail += "; `import math` added to the last top-level import line"
    return RewriteResult(new.code, (line, end), detail, obligations)
