"""state-write: the rewrite. ``X[:, a:a + L] = v`` with a tensor ``a`` reads the bounds with
``Tensor.item()`` (a graph break); ``X.narrow(d, a, L).copy_(v)`` writes the same view in
place without reading them, once the bounds are proved in range (:func:`screen.decide_bounds`)."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, annotated_line
from mend.rules.state_write.screen import NAME, analyse, decide_bounds


class _Find(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int) -> None:
        self.line, self.found = line, None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        if self.found is None and self.get_metadata(PositionProvider, node).start.line == self.line:
            self.found = node
        return True


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the slice write on ``line`` as ``narrow(...).copy_(...)``, or a Decline."""
    plan = analyse(module.code, line)
    if isinstance(plan, Decline):
        return plan
    bad = decide_bounds(plan)
    if bad is not None:
        return bad
    wrapper = MetadataWrapper(module)
    finder = _Find(line)
    wrapper.visit(finder)
    if finder.found is None or len(finder.found.body) != 1:
        return Decline(NAME, f"no single statement on line {line}")
    old_line = finder.found
    # expand first: a value that does not broadcast raises slice assignment's own message (expand_inplace)
    view = f"{plan.target}.narrow({plan.dim}, {plan.start}, {plan.length})"
    new = f"{view}.copy_({plan.value}.expand_as({view}))"
    new_line, old = annotated_line(old_line, new, NAME)
    new_module = wrapper.module.visit(Replace(old_line, new_line))
    obligations = [
        {"kind": "slice-write-in-range", "start": plan.start_expanded, "length": plan.length_expanded,
         "size": f"{plan.target}.shape[{plan.dim}]", "guards": list(plan.guards), "torch_names": plan.torch_names},
        {"kind": "slice-write-operands", "line": line, "expr": f"({plan.target}, {plan.value}, {plan.start})",
         "target": plan.target, "value": plan.value, "start_name": plan.start, "dim": plan.dim},
    ]
    return RewriteResult(new_module.code, (line, line), f"`{old}` -> `{new}` (bounds proved in range)", obligations)
