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


def guard_text(t: str, x: str, m: str, others: list[str], rows: bool = False) -> str:
    """When the in-place ``torch.where`` writes what ``x[m] = f(x[m])`` writes (decided by
    Dynamo at trace time: types, dtypes, strides and devices are guarded, no break); the
    original statement runs otherwise. helper-51 found each clause's counterexample:

    * ``x`` a real floating tensor, every operand read through the mask of its dtype: an int
      ``x`` with ``f`` float made ``index_put_`` raise (a dtype mismatch) where ``where`` promotes
      and ``copy_`` truncates silently; complex ``*`` is not correctly rounded, so ``f(x)[m]`` and
      ``f(x[m])`` differed by an ulp;
    * no zero stride (``min(x.stride(), default=1) > 0``): ``index_put_`` into an expanded tensor
      warns and writes, ``copy_`` raises (overlapping memory: exactly its check, zero strides);
    * the mask a plain bool tensor of ``x``'s shape (the row form: its leading sizes) on ``x``'s
      device: a ``(B,)`` mask given for a ``(B, B)`` ``x`` selects rows, ``where`` broadcasts it
      over columns; a uint8/long mask indexes positions; indexing accepts a CPU mask for a CUDA
      ``x``, ``where`` does not. A mask written as a comparison is a bool of the broadcast shape;
      the tensors it reads must be on ``x``'s device."""
    same = "".join(f" and type({y}) is {t}.Tensor and {y}.dtype == {x}.dtype" for y in others)
    if dotted(cst.parse_expression(m)) is not None:
        shape = f"{x}.shape[:{m}.dim()]" if rows else f"{x}.shape"
        mask = (f" and type({m}) is {t}.Tensor and {m}.dtype == {t}.bool and {m}.device == {x}.device"
                f" and {m}.shape == {shape}")
    else:   # a comparison of names and numbers: every tensor it reads on x's device (read once more)
        names = [n for n in dict.fromkeys(_names(cst.parse_expression(m))) if n != x]
        mask = "".join(f" and (type({n}) is not {t}.Tensor or {n}.device == {x}.device)" for n in names)
    return (f"type({x}) is {t}.Tensor and {x}.is_floating_point() and min({x}.stride(), default=1) > 0"
            f"{mask}{same}")


def _names(node: cst.CSTNode) -> list[str]:
    """The dotted names an expression reads (``self.keep``, ``m``), outermost first."""
    name = dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    if name is not None:
        return [name]
    return [n for child in node.children for n in _names(child)]


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
    guard = guard_text(t, x, m, [y for y in plan.operands if y != x], rows)
    # the original statement, as written, where the guard fails
    kept = plan.line.with_changes(leading_lines=[])
    new = cst.parse_statement(f"if {guard}:\n    {x}.copy_({t}.where({sel}, {f}, {x}))  # mend: mask-update\n"
                              f"else:\n    pass\n")
    new = new.with_changes(leading_lines=plan.line.leading_lines,
                           orelse=new.orelse.with_changes(body=new.orelse.body.with_changes(body=[kept])))
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
        {"kind": "mask-update-guarded", "target": x, "pred": m, "expr": f, "selection": sel, "torch": t, "rows": rows,
         "operands": [y for y in plan.operands if y != x], "original": was},
    ]
    return RewriteResult(new_module.code, (line, line),
                         f"`{was}` -> `{x}.copy_({t}.where({sel}, {f}, {x}))` under a guard (a plain floating tensor "
                         "without zero strides, operands of its dtype, the mask on its device), the original "
                         "otherwise", obligations)
