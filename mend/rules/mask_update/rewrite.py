"""mask-update: the rewrite. ``x[mask] = f(x[mask])`` gathers the masked elements
(``nonzero``: a data-dependent size) and scatters them back (``index_put_``), which breaks
the graph on torch 2.13 ("Dynamic shape operator"); ``x.copy_(torch.where(mask, f(x), x))``
computes the same elements on fixed shapes and writes them into ``x`` in place, as the
original does (a view, a parameter or another name aliasing ``x`` sees the same write)."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, dotted, fresh_local, locals_readers, statement_at
from mend.rules.mask_update.screen import NAME, screen


MASK = "_mend_mask"   # the local an expression mask is bound to (fresh in the function)


def no_overlap(x: str) -> str:
    """True when no two elements of ``x`` share memory: for every two dimensions of size > 1,
    one's stride is at least the other's stride times its size (``stride[i] * size[i] <=
    stride[j]`` or the reverse). That is the sorted chain ``stride[k+1] >= stride[k] *
    size[k]`` (strides > 0: the reverse of an ascending pair cannot hold), from which by
    induction ``stride[k+1]`` exceeds every offset the smaller dimensions reach. Sufficient,
    not necessary. No ``sorted``/``min(default=)``: with dynamic shapes (Dynamo's automatic
    dynamic, after a second size) Dynamo cannot sort symbolic sizes and broke the graph there;
    pairwise comparisons become guards on the sizes (measured, torch 2.13)."""
    return (f"all({x}.stride(_mend_i) * {x}.shape[_mend_i] <= {x}.stride(_mend_j) or {x}.stride(_mend_j) * "
            f"{x}.shape[_mend_j] <= {x}.stride(_mend_i) for _mend_i in range({x}.dim()) for _mend_j in range(_mend_i) "
            f"if {x}.shape[_mend_i] > 1 and {x}.shape[_mend_j] > 1)")


def no_zero_stride(x: str) -> str:
    """No zero stride (``min(default=)`` broke the graph under dynamic shapes)."""
    return f"all(_mend_s > 0 for _mend_s in {x}.stride())"


def guard_text(t: str, x: str, m: str, others: list[str], rows: bool = False) -> str:
    """When the in-place ``torch.where`` writes what ``x[m] = f(x[m])`` writes (decided by
    Dynamo at trace time: types, dtypes, shapes, strides and devices are guarded, no break);
    the original statement runs otherwise. ``m`` is a name: an expression mask is bound to a
    local first. helper-51 and helper-54 found each clause's counterexample:

    * ``x`` a real floating tensor: an int ``x`` with ``f`` float made ``index_put_`` raise (a
      dtype mismatch) where ``where`` promotes and ``copy_`` truncates silently; complex ``*`` is
      not correctly rounded, so ``f(x)[m]`` and ``f(x[m])`` differed by an ulp;
    * no zero stride (:func:`no_zero_stride`): ``index_put_`` into an expanded tensor
      warns and writes, ``copy_`` raises (overlapping memory: exactly its check, zero strides);
    * no other overlap (:func:`no_overlap`): in a sliding window (``base.unfold(0, 3, 1)``,
      strides (1, 1)) ``copy_`` writes the unselected elements back over memory the selected ones
      share, and its own overlap check does not see it (helper-66);
    * the mask a plain bool tensor of ``x``'s shape (the row form: its leading sizes) on ``x``'s
      device: a ``(B,)`` mask for a ``(B, B)`` ``x`` selects rows, ``where`` broadcast it over
      columns (also when written ``score > 0`` or ``~keep``); a long mask indexes positions;
      indexing accepts a CPU mask for a CUDA ``x``, ``where`` does not;
    * ``x`` not nested: a nested tensor has no strides, so the stride clause raised RuntimeError
      where the original's boolean index raised NotImplementedError (helper-88 F4);
    * ``x`` not on the meta device: a boolean index there raises NotImplementedError (no meta
      kernel for ``nonzero``), where the selection returned (helper-85 F5);
    * every other tensor read through the mask of ``x``'s shape, dtype and device: ``y[m]``
      with a ``(B,)`` or 0-d ``y`` raises IndexError, ``where`` broadcast it;
    * last (it reads ``.requires_grad`` of tensors the clauses before made sure of): neither ``x``
      nor any tensor read through the mask requires grad where autograd records. Under inductor
      (and aot_eager, for a buffer) backward raised "modified by an inplace operation" after the
      ``copy_`` into a graph input, a view of one or a buffer of a value that requires grad, where
      the original's ran (helper-102: ``x`` an activation; helper-103: a buffer or an input updated
      from ``h[m]``, ``h`` requiring grad)."""
    shape = f"{x}.shape[:{m}.dim()]" if rows else f"{x}.shape"
    same = "".join(f" and type({y}) is {t}.Tensor and {y}.dtype == {x}.dtype and {y}.shape == {x}.shape"
                   f" and {y}.device == {x}.device" for y in others)
    return (f"type({x}) is {t}.Tensor and {x}.is_floating_point() and not {x}.is_nested and {no_zero_stride(x)}"
            f" and {no_overlap(x)} and type({m}) is {t}.Tensor and {m}.dtype == {t}.bool and {m}.device == {x}.device"
            f" and {x}.device.type != \"meta\" and {m}.shape == {shape}{same} and {no_grad(t, x, others)}")


def no_grad(t: str, x: str, others: list[str]) -> str:
    """The guard's last clause: nothing the update reads requires grad while autograd records."""
    grads = " or ".join(f"{v}.requires_grad" for v in (x, *others))
    return f"not ({t}.is_grad_enabled() and {'(' + grads + ')' if others else grads})"


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
    others = [y for y in plan.operands if y != x]
    expression = dotted(cst.parse_expression(m)) is None   # `score > 0`, `~keep`: not a name
    if rows and expression:
        return None
    function = next(a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef))
    if expression and locals_readers(function):
        return Decline(NAME, "the function reads its own locals (`locals()`, `vars()`, `eval`, `exec`): binding the "
                             "mask expression to a new local, as the rewrite does, would show there")
    was = code_of(node).strip()
    # an expression mask (`score > 0`, `~keep`) is bound to a local, so that the guard reads
    # what the selection uses (a comparison of names: evaluated once more than the original,
    # which reads it on both sides, without effect)
    local = fresh_local(function, MASK) if expression else None
    gm = local or m
    sel = f"{gm}.reshape({gm}.shape + (1,) * ({x}.dim() - {gm}.dim()))" if rows else gm
    guard = guard_text(t, x, gm, others, rows)
    # the original statement, as written, where the guard fails
    kept = plan.line.with_changes(leading_lines=[])
    new = cst.parse_statement(f"if {guard}:\n    {x}.copy_({t}.where({sel}, {f}, {x}))  # mend: mask-update\n"
                              f"else:\n    pass\n")
    new = new.with_changes(orelse=new.orelse.with_changes(body=new.orelse.body.with_changes(body=[kept])))
    stmts = [new] if local is None else [cst.parse_statement(f"{local} = {m}\n"), new]
    stmts[0] = stmts[0].with_changes(leading_lines=plan.line.leading_lines)
    new_module = wrapper.module.visit(Replace(plan.line, cst.FlattenSentinel(stmts)))
    obligations = [
        {"kind": "bool-predicate", "pred": m},
        {"kind": "mask-leading-shape", "lhs": m, "rhs": x} if rows else {"kind": "same-shape", "lhs": m, "rhs": x},
        *[{"kind": "same-shape", "lhs": y, "rhs": x} for y in others],
        {"kind": "mask-update-elementwise", "expr": f, "operands": list(plan.operands), "torch": t,
         **({"scalars": list(plan.scalars)} if plan.scalars else {})},
        *([{"kind": "mask-update-scalar", "scalars": list(plan.scalars)}] if plan.scalars else []),
        {"kind": "untaken-side-cannot-raise", "expr": f},
        # elementwise claims: the element a row mask selects is the one its broadcast selects
        {"kind": "mask-update-select", "pred": m, "expr": f, "target": x},
        {"kind": "mask-update-finite-gradient", "guard": m, "expr": f},
        {"kind": "mask-update-guarded", "target": x, "pred": m, "expr": f, "selection": sel, "torch": t, "rows": rows,
         "operands": others, "original": was, **({"bound": local} if local else {})},
    ]
    return RewriteResult(new_module.code, (line, line),
                         f"`{was}` -> `{x}.copy_({t}.where({sel}, {f}, {x}))` under a guard (a plain floating tensor "
                         "without zero strides, a bool mask and operands of its shape and device), the original "
                         "otherwise" + (f"; the mask bound to `{local}` first" if local else ""), obligations)
