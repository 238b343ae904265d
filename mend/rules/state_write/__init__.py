"""Rule: scalar state and cache writes (issue 10, kind 7).

A KV-cache style write with tensor slice bounds::

    start = self.pos.clamp(0, self.cache.shape[1] - k.shape[1])
    self.cache[:, start:start + k.shape[1]] = k

reads ``start`` and the end with ``__index__`` (``Tensor.item()``): on torch 2.13 that
breaks the graph ("Unsupported Tensor.item() call with capture_scalar_outputs=False"), and
Dynamo cannot resume inside a store, so it runs the rest of the frame eagerly. The rewrite::

    self.cache.narrow(1, start, k.shape[1]).copy_(k)

takes the tensor start without reading it (one graph where the start is a buffer or input
itself, measured; a computed start such as ``self.pos.clamp(...)`` is still read, "Data
dependent operator" on the same line, and the pipeline then declines the rewrite as removing
no break: helper-48) and writes the same view
of the same storage in place: the same ``copy_``, the same ``CopySlices`` autograd node, the
same dtype cast, the same error on a leaf that requires grad (measured). It is exact only
inside the range, so the rule emits it only when Z3 proves ``0 <= start``, ``0 <= L`` and
``start + L <= X.shape[d]`` from how the bounds are defined (``clamp``, ``min``/``max``,
``%``, sizes, literals) and the guards before the write (``assert``, ``torch._check``,
``if ...: raise``); a buffer such as ``self.pos`` is any int64 value. Otherwise it declines:
"bounds not provably in range: slicing clamps, narrow raises".

Traps, and how each is handled (all measured on torch 2.13, CPU):

* an end past the size: slicing clamps it; with ``L = 1`` at ``start == size`` the slice is
  empty and ``k`` broadcasts to it, a silent no-op, where ``narrow`` raises RuntimeError
  (``start > size``: IndexError) -- declined unless the bounds are proved;
* a negative start: slicing counts it from the end and the slice is shorter (a shape
  RuntimeError), ``narrow`` wraps it and writes -- declined unless ``0 <= start`` is proved;
* a value longer than the slice, or of higher rank: slice assignment strips leading 1-sized
  dims of the value, ``copy_`` does not: ``slice-write-operands`` observes ranks (refuted
  when the value's rank exceeds the target's); a longer value raises RuntimeError in both;
* a 1-element 1-d or a float start: slicing accepts the first, ``narrow`` only a 0-d
  integral tensor; an int32 start wraps at 32 bits where the proof models int64: the start
  must be observed a 0-d int64 tensor or a Python int;
* an ``Ellipsis``/``None``/index around the slice, a step, a second bounded dimension, a
  value that is an expression (the rewrite would evaluate it after the bounds): declined;
* state written between the bounds' definitions or guards and the write (an attribute
  store, an in-place call, a ``self.`` call): declined, the proof's values may be stale;
* a Python number stored on the module (``self.t = t.item()``, ``self.step = int(n)``,
  shared case 020's ``self.logged[k] = float(loss)``): declined. A 0-d tensor or a buffer
  ``copy_`` changes the attribute's type for every reader (``isinstance``, JSON, ``+=``,
  ``range``), a buffer joins ``named_buffers()`` even with ``persistent=False``, follows
  ``.half()`` (rounding the value) and promotes differently (``int64 tensor * 0-d float64``
  is float64, ``* float`` float32); there is no exact local rewrite.

``X[:, pos] = k`` with a 0-d tensor ``pos`` and the same writes with Python ints compile
without a break on torch 2.13 (measured): nothing to do.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.state_write.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.state_write.rewrite import rewrite
from mend.rules.state_write.screen import BOUNDS_REASON, CATEGORY, NAME, analyse, match

FIX_SAFETY = """\
An unsafe fix (applied with ``--unsafe-fixes``): the bounds are proved, the operands'
kinds and ranks rest on an observation of the example run. Needs no runtime.

Proved by Z3 (``slice-write-in-range``, required at every level): ``0 <= start``,
``0 <= L`` and ``start + L <= X.shape[d]`` for every int64 value of the unknown leaves and
every size in [0, 2^62], tensor arithmetic wrapped to int64, under the guards on the path
(an ``assert`` counts only when Python runs without ``-O``: recorded as an assumption).
In that range ``X[..., a:a+L] = v`` and ``X.narrow(d, a, L).copy_(v)`` are the same view and
the same ``copy_`` (identical values, dtype cast, storage, autograd node: measured).

Resting on checks (``slice-write-operands``, observed at the write on every hit, required):
the target and value are tensors, the value's rank is at most the target's, and the start
is a 0-d int64 tensor or a Python int.

Never inference-only: the gradient is the same ``CopySlices``.
"""

RULE = Rule(
    name=NAME,
    categories=(CATEGORY,),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"slice-write-in-range", "slice-write-operands"}),
    required_kinds=frozenset({"slice-write-in-range", "slice-write-operands"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["BOUNDS_REASON", "NAME", "RULE", "analyse", "match", "rewrite"]
