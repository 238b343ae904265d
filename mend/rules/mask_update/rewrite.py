"""mask-update: the rewrite. ``x[mask] = f(x[mask])`` gathers the masked elements
(``nonzero``: a data-dependent size) and scatters them back (``index_put_``), which breaks
the graph on torch 2.13 ("Dynamic shape operator"); ``x.copy_(torch.where(mask, f(x), x))``
computes the same elements on fixed shapes and writes them into ``x`` in place, as the
original does (a view, a parameter or another name aliasing ``x`` sees the same write)."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, dotted, statement_at
from mend.rules.mask_update.screen import NAME, screen


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the masked update on ``line`` as an in-place ``torch.where``, or a Decline."""
    return _rewrite(module, line, rows=False)


def rows(module: cst.Module, line: int) -> RewriteResult | Decline | None:
    """The row-mask form, which ``mend fix`` verifies when :func:`rewrite`'s is declined: a
    mask of ``x.shape[:k]`` (``h[keep] = h[keep] * 2`` with a ``(B,)`` mask on ``(B, D)``, a
    held-out review's case 336) selects whole rows, while ``torch.where`` broadcasts from the
    right (and, where ``B == D``, silently selects columns). The mask is given trailing
    singleton dims first: ``m.reshape(m.shape + (1,) * (x.dim() - m.dim()))``, the identity
    for a mask of ``x``'s shape, under ``mask-leading-shape`` (``m.shape == x.shape[:m.dim()]``,
    exactly where ``x[m]`` indexes). None when the mask is not a name or attribute (an
    expression is read once more by this form)."""
    return _rewrite(module, line, rows=True)


def _rewrite(module: cst.Module, line: int, rows: bool) -> RewriteResult | Decline | None:
    wrapper, found = statement_at(module, line)
    if found is None:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return plan
    x, m, f, t = plan.target, plan.mask, plan.new_value, plan.torch_name
    if rows and dotted(cst.parse_expression(m)) is None:
        return None
    sel = f"{m}.reshape({m}.shape + (1,) * ({x}.dim() - {m}.dim()))" if rows else m
    was = code_of(node).strip()
    new = cst.parse_statement(f"{x}.copy_({t}.where({sel}, {f}, {x}))  # mend: mask-update (was: {was})\n")
    new = new.with_changes(leading_lines=plan.line.leading_lines)
    new_module = wrapper.module.visit(Replace(plan.line, new))
    obligations = [
        {"kind": "bool-predicate", "pred": m},
        {"kind": "mask-leading-shape", "lhs": m, "rhs": x} if rows else {"kind": "same-shape", "lhs": m, "rhs": x},
        *[{"kind": "same-shape", "lhs": y, "rhs": x} for y in plan.operands if y != x],
        {"kind": "mask-update-elementwise", "expr": f, "operands": list(plan.operands), "torch": t,
         **({"scalars": list(plan.scalars)} if plan.scalars else {})},
        *([{"kind": "mask-update-scalar", "scalars": list(plan.scalars)}] if plan.scalars else []),
        {"kind": "untaken-side-cannot-raise", "expr": f},
        # elementwise claims: the element a row mask selects is the one its broadcast selects
        {"kind": "mask-update-select", "pred": m, "expr": f, "target": x},
        {"kind": "mask-update-finite-gradient", "guard": m, "expr": f},
    ]
    return RewriteResult(new_module.code, (line, line),
                         f"`{was}` -> `{x}.copy_({t}.where({sel}, {f}, {x}))`", obligations)
