"""Rule: boolean-mask updates (issue 10, kind 6).

``x[mask] = f(x[mask])`` gathers the masked elements (a data-dependent size) and writes
them back with ``index_put_``; on torch 2.13 both halves break the graph ("Dynamic shape
operator", counted twice at the line; ``x[mask] *= 2`` once). ``x[mask] = 0.0`` and
``x.masked_fill(mask, v)`` already trace without a break: the rule leaves them alone.

The rewrite computes ``f`` on the whole tensor and selects, in place, under a guard that
keeps the original statement wherever the two could differ::

    if type(x) is torch.Tensor and x.is_floating_point() and not x.is_nested and <no zero stride>
            and <no two elements of x share memory> and type(mask) is torch.Tensor and mask.dtype == torch.bool
            and mask.device == x.device and x.device.type != "meta" and mask.shape == x.shape [and type(y) is torch.Tensor
            and y.dtype == x.dtype and y.shape == x.shape and y.device == x.device, for each other
            tensor y read through the mask] and not (torch.is_grad_enabled() and (x.requires_grad [or y.requires_grad])):
        x.copy_(torch.where(mask, f(x), x))  # mend: mask-update
    else:
        x[mask] = f(x[mask])                 # the original, as written

A mask written as an expression (``score > 0``, ``~keep``) is bound to a fresh local
(``_mend_mask``) on the line before, and the guard and the selection read that local.
Adversarial reviews found each clause's counterexample to a form without it: an expanded
``x`` (zero strides: ``index_put_`` warns and writes, ``copy_`` refuses overlapping memory),
a sliding window ``base.unfold(0, 3, 1)`` (strides (1, 1): ``copy_`` wrote unselected elements
back over memory selected ones share, helper-66; the clause, ``rewrite.no_overlap``, asks of
every two dimensions of size > 1 that one's stride step past the other's extent: pairwise, with
no ``sorted`` nor ``min(default=)``, which broke the graph under dynamic shapes, Dynamo's
automatic dynamic after a second size),
an int ``x`` with a float ``f`` (``index_put_`` raises on the dtype mismatch, ``where``
promoted and ``copy_`` truncated silently), a complex ``x`` (complex ``*`` is not correctly
rounded: an ulp apart), a ``(B,)`` mask for a ``(B, B)`` ``x``, also written ``score > 0`` or
``~keep`` (rows selected, ``where`` broadcast it over columns), a long mask (positions), and
a ``(B,)`` or 0-d ``y`` read as ``y[m]`` (IndexError in the original, a broadcast in
``where``) (helper-51, helper-54; the first four on a fix labelled safe). Dynamo decides the
guard at trace time, so it adds no break; ``mask-update-guarded`` (a static screen of the
mended file) re-reads it, the binding and the kept original. Still different:
under ``torch.func.vmap`` the original raises (no batching rule for a boolean index) where the
mended update runs.

``copy_`` keeps the original's aliasing: ``x`` is written in place, so a view of ``x``,
the tensor ``x`` views, or another name bound to it see the same write (rebinding
``x = torch.where(...)`` would not). Where ``x`` or a tensor read through the mask requires grad,
with grad enabled, the original statement runs: backward raised after the ``copy_`` into a graph
input, a view of one or a buffer, of a value that requires grad, where the original's ran
(helper-102 under inductor, ``x`` an activation; helper-103 under aot_eager and inductor, a
buffer or an input updated from ``h[m]``). The rewrite serves inference (``no_grad``,
``inference_mode``) and updates of tensors that do not require grad. ``y[mask]`` inside ``f`` becomes ``y`` (another tensor of ``x``'s shape).

Traps, and how each is handled:

* ``f`` off the mask: it now runs on every element. Only exactly rounded elementwise
  operators that cannot raise are admitted (``+ - * /``, unary ``-``, ``abs``, ``neg``,
  ``relu``, ``sign``/``sgn`` (-1, 0 or 1; NaN gives 0 and -0.0 gives +0.0, measured on torch
  2.13 eager, vectorised or not, and inductor; a zero gradient), ``clamp``/``clip`` with numeric
  bounds); ``sqrt``, ``log``, ``rsqrt``,
  ``reciprocal``, ``**`` are declined (NaN/inf off the mask and, worse,
  ``torch.where``'s zero gradient times an infinite derivative is NaN: grad NaN at
  ``x = -1`` for ``sqrt``); ``//`` and ``%`` are declined (an integer zero divisor off the
  mask raises). Division is admitted, but its gradient off the mask is proved finite or the
  rewrite declines (``mask-update-finite-gradient``: ``x / y`` at ``y = 0`` refutes).
* Transcendental kernels (``exp``, ``tanh``, ``sigmoid``, ``gelu``...) are declined: the
  vectorised kernel over the whole tensor and the kernel over the gathered elements can
  differ by an ulp (measured on torch 2.13 CPU for ``sigmoid`` and ``gelu``).
* Operands not read through the mask (``x[m] + bias``) broadcast against the selected
  elements, not the whole tensor: declined, except a Python number, which broadcasts alike:
  ``self.<attr>`` that the class binds only in ``__init__`` to no tensor or module, or a
  local bound only to numeric expressions (``x[m] *= self.scale``), confirmed a Python int or
  float on the example run (``mask-update-scalar``, an observation: the fix is unsafe).
* The mask's shape: indexing with a mask of ``x.shape[:k]`` selects rows, while
  ``torch.where`` broadcasts from the right (with ``B == D``, a ``(B,)`` mask would select
  columns): the mask must have ``x``'s shape (``same-shape``), and be a bool tensor
  (``bool-predicate``: a uint8/long index selects positions). When that is refuted and the
  mask is a name or attribute, the row-mask form is verified instead (case 336)::

      h[keep] = h[keep] * 2   ->   h.copy_(torch.where(keep.reshape(keep.shape + (1,) * (h.dim() - keep.dim())), h * 2, h))

  under ``mask-leading-shape`` (``keep.shape == h.shape[:keep.dim()]``, proved over the
  sizes), exactly where ``h[keep]`` indexes.
* dtypes: ``index_put_`` raises when ``f``'s dtype is not ``x``'s (an int ``x`` with a
  float ``f``; an augmented ``x[m] *= 2.5`` on ints raises a cast error), where
  ``torch.where`` would promote and ``copy_`` cast back: ``mask-update-select`` refutes.
* The mask expression is read once by the rewrite and twice by ``x[m] = f(x[m])`` (both
  before the write): it must be a name or a comparison of names and numbers (or ``~ & |``
  of those), never a call or an attribute.

Not handled here: ``v in tensor`` (rule tensor-membership, which rewrites an ``if`` whose
whole test is one).
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.mask_update.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.mask_update.rewrite import rewrite, rows
from mend.rules.mask_update.screen import NAME, match

FIX_SAFETY = """\
Emitted after verification: ``x.copy_(torch.where(mask, f(x), x))`` writes the same
elements into the same tensor as ``x[mask] = f(x[mask])``, in place. Labelled unsafe
whenever a proof uses the example's sizes (a separate ``mask`` input has ``x``'s shape only
on the example run: tier equal-sizes) or finite leaf values (the gradient claim).

Proved (Z3): the mask is a bool tensor and has ``x``'s shape (in the row-mask form, ``x``'s
leading sizes: ``mask-leading-shape``; unsafe when the mask is an input, as above), every operand read through
the mask has ``x``'s shape, ``f`` on whole tensors cannot raise (shape preconditions), the
selection equals the original element by element with ``f`` and ``x`` of one dtype
(``mask-update-select``, refuted when the original's ``index_put_`` would raise on a
dtype mismatch), and off the mask the gradient through ``f`` is finite
(``mask-update-finite-gradient``, refuted -> declined, never inference-only).

Resting on an observation: an operand not read through the mask (``self.scale``) is a
Python number (``mask-update-scalar``); its value is the observed one in the value model.

Resting on a check: the guarded form (``mask-update-guarded``, a static screen of the
mended file: the guard's clauses, the in-place where as its body, the original statement as
its ``else``). ``f`` is built only from exactly rounded elementwise operators that
cannot raise (``mask-update-elementwise``, a screen of the mended expression), so that
``f(x)[mask]`` is ``f(x[mask])`` bit for bit.
"""

RULE = Rule(
    name=NAME,
    categories=("mask-update",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"bool-predicate", "same-shape", "mask-leading-shape", "mask-update-elementwise",
                                "untaken-side-cannot-raise", "mask-update-select", "mask-update-finite-gradient",
                                "mask-update-scalar", "mask-update-guarded"}),
    required_kinds=frozenset({"bool-predicate", "same-shape", "mask-leading-shape", "mask-update-elementwise",
                              "untaken-side-cannot-raise", "mask-update-select", "mask-update-finite-gradient",
                              "mask-update-scalar", "mask-update-guarded"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
    fallback=rows,
)

__all__ = ["NAME", "RULE", "match", "rewrite", "rows"]
