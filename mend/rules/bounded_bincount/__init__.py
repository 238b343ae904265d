"""Rule: a bincount whose indices provably lie below ``minlength`` (issue 10, dynamic-shape
operators; MoE load statistics).

``torch.bincount(I, minlength=M)`` has the data-dependent length ``max(M, max(I) + 1)``, so
Dynamo breaks the graph there ("Dynamic shape operator"). In a router's load statistic the
indices are the ``argmax`` (or ``topk``/``max`` indices) over the ``E`` expert logits, so
every index is below ``E`` and, with ``M >= E``, the length is always ``M``: counting with
``torch.zeros(M, dtype=torch.int64).scatter_add(0, I, torch.ones_like(I))`` gives the same
int64 tensor with a static shape. torchtitan switched its MoE to ``torch.histc`` for this
reason (pytorch/torchtitan#1204's family); shared/cases-style reproduction: a router's
``torch.bincount(top1, minlength=E)``, 2 -> 1 graphs.

The rewrite keeps bincount wherever the static facts do not hold::

    (lambda _mend_x: (lambda _mend_i, _mend_n, _mend_m:
        torch.zeros(_mend_m, dtype=torch.int64, device=_mend_i.device)
             .scatter_add(0, _mend_i, torch.ones_like(_mend_i))
        if type(_mend_i) is torch.Tensor and _mend_i.dim() == 1 and _mend_i.device.type != 'meta'
           and type(_mend_m) is int and _mend_m < 2**63 and type(_mend_n) is int
           and not torch.compiler.is_exporting() and _mend_m >= _mend_n
        else torch.bincount(_mend_i, minlength=_mend_m))(
            _mend_x.argmax(dim=d),
            _mend_x.shape[d] if type(_mend_x) is torch.Tensor and _mend_x.dim() > D else None,
            M))(X)

(``D`` is ``d``, or ``-d - 1`` for a negative ``d``: ``x.shape[d]`` is read only where it
exists.) The indices are made first, then the bound is read, then ``M``: the original made the
indices before reading ``M``, and a minlength whose evaluation changes ``X`` in place (a
property with a side effect) must not move the bound (helper-52). Where the indices are bound
on the line just before (``top = logits.argmax(-1)``), the count passes them, the bound read on
the tensor and ``M``: ``(lambda _mend_i, _mend_n, _mend_m: ...)(top, BOUND(logits), M)``. The
method form ``I.bincount(minlength=M)`` keeps the method in the fallback (a subclass may
override it). The count is out of place: an in-place ``scatter_add_`` into the unbatched
``zeros`` failed under ``torch.func.vmap`` with batched indices; ``bincount`` has no meta kernel,
so on the meta device the original call runs and raises (helper-52). The guard is decided by
Dynamo at trace time (types, a rank, a device, an int, a size: guards, no break); under
``torch.jit.trace`` (deprecated) it is decided once, on the example, and recorded (a
``TracerWarning``), like any Python branch. Under ``torch.export`` the original bincount runs
(``m >= n`` on a dimension declared free would be a range guard strict export rejects), and a
minlength of 2**63 or more keeps bincount's own error (helper-55). ``torch.jit.script`` cannot
compile the lambdas: where the original scripted, the rewrite reports it (TorchScript is
deprecated; ``evidence.torchscript``).

Taken: the indices of ``X.argmax(dim=d)`` / ``argmin`` (or without ``dim``: below
``X.numel()``), ``X.max(d)[1]`` / ``.indices`` / ``min``, ``X.topk(k, dim=d)[1]`` /
``.indices`` (``dim`` -1 by default), each also as ``torch.f(X, ...)``, optionally made 1-D by
``.flatten()``, ``.view(-1)`` or ``.reshape(-1)``; ``minlength`` a literal, a name or an
attribute chain.

Traps, each handled:

* indices of unknown origin (token ids, a routing table): may exceed ``M``; bincount then
  grows, ``scatter_add_`` would raise. Declined: the provenance must be visible.
* ``weights=``: the counts become float64 sums (another dtype, rounding): declined.
* ``torch.max(a, b)[1]``: the elementwise maximum's second row, not indices; a ``dim`` must
  be an integer literal.
* between the binding of the indices and the count, code could rebind or reshape the
  bounding tensor in place (``logits.t_()``): the binding must be the statement just before,
  the bounding tensor a plain name, and nothing in the count's statement evaluated first.
* ``M`` smaller than the dimension, a non-int ``M``, indices of rank 2 (bincount raises), a
  0-d ``X`` whose indices were flattened (``x.shape[-1]`` would raise IndexError), a tensor
  subclass or a NumPy array (its ``argmax`` may report other ids): the guard falls back to
  bincount, so the behaviour is the original's (an adversarial review found the last three).
* the lambda's parameters are ``_mend_``-prefixed, and a call naming ``_mend_...`` declines: a
  user's ``topk(m, ...)`` must not read the lambda's ``m`` (a review); an unbound
  ``torch.Tensor.topk(p, k)`` and a reshape other than to 1-D (``view(torch.int32)`` casts)
  decline.
* names: ``torch`` bound only by ``import torch [as t]``; ``type`` and ``int`` not bound in the
  module.

Declined and left: ``nonzero``/``unique``/masked selection (data-dependent output shapes).
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.bounded_bincount.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.bounded_bincount.rewrite import rewrite
from mend.rules.bounded_bincount.screen import NAME, match

FIX_SAFETY = """\
Emitted after verification; needs no runtime: where the guard holds, the static-length
count equals bincount's, value for value, dtype and device; elsewhere bincount runs.

Proved once (``proofs/bb_bincount_scatter.smt2``, Z3, unsat): when every index lies in
``[0, n)`` and ``n <= m``, bincount's length ``max(m, max + 1)`` is ``m`` and no index is out of
bounds for ``scatter_add_`` into ``m`` slots; the counts are both the number of indices equal
to each slot (int64 sums of ones, exact). Resting on a static screen of the mended source
(``bincount-in-range``): the guard is the one the lemma needs, and the indices are those of
an argmax/argmin/max/min/topk over the very dimension the guard reads (PyTorch's documented
semantics: indices lie in ``[0, size)``, NaN included; corroborated by a probe of the
installed torch with NaN and infinities).

Never inference-only: the counts are integers, with no gradient.
"""

RULE = Rule(
    name=NAME,
    categories=("dynamic-shape-op",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"bincount-in-range"}),
    required_kinds=frozenset({"bincount-in-range"}),
    needs_facts=False,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["NAME", "RULE", "match", "rewrite"]
