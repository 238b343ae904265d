"""Rule: numpy on Python constants (issue 10, kind 3).

``np.sum`` / ``np.max`` / ``np.min`` of a Python list of ints, ``np.prod`` of a list or tuple of
ints (a patch size's flatten width, ``int(np.prod(self.patch_size))``), ``np.lcm`` / ``np.gcd``
of two Python ints: Dynamo traces numpy as tensors, so a constant becomes a 0-d tensor, and a shape built from it
(``np.zeros((n, np.sum(plan[: k + 1])))`` in big_bird's and bigbird_pegasus'
``_bigbird_block_rand_mask_with_head``) breaks the graph ("Data dependent operator"). The
exact Python function on the same operands is a constant Dynamo folds: big_bird 11 -> 1
graphs by hand, with bit-identical outputs.

The rewrite keeps the numpy call wherever the operands are not what the Python function
assumes (``torch.Size``, a shape such as ``h.shape[1:]``, is admitted by ``prod`` where the
module binds ``torch`` by ``import torch`` alone)::

    (lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31
               and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(X)
    (lambda v: math.prod(v) if (type(v) is list or type(v) is tuple [or type(v) is torch.Size]) and 0 < len(v) < 2**31
               and all([type(e) is int and 0 < e < 2**31 for e in v]) and math.prod(v) < 2**63
               else np.prod(v))(X)
    (lambda a, b: math.lcm(a, b) if type(a) is int and type(b) is int
                  and -2**31 < a < 2**31 and -2**31 < b < 2**31 else np.lcm(a, b))(A, B)

``np.max`` / ``np.min`` take sum's guard (a non-empty list of ints in ``(-2**31, 2**31)``):
``np.max([])`` raises a ValueError with numpy's message, ``max([])`` with another, and a float
element makes numpy's result float64 where ``max`` keeps the element.

``math`` is the standard library's: bound by ``import math`` alone, or unbound, in which
case ``import math`` is appended to the module's last top-level import line (no line moves);
a module that binds ``math`` otherwise is declined.

The operands are evaluated once, as before. Dynamo decides the guard at trace time on
constants: no break (measured on torch 2.13: big_bird 11 -> 1 graphs with the guard, as
with the bare ``sum``).

Traps, each handled:

* ``np.sum([])`` is float64 ``0.0``, ``sum([])`` the int ``0``: ``np.zeros((n, np.sum([])))``
  raises TypeError, the bare rewrite would not. The guard needs a non-empty list; a literal
  ``[]`` is declined.
* floats, bools, numpy scalars (``np.int64`` elements), arrays and tensors: ``np.sum``
  rounds, promotes or reduces arrays where ``sum`` does not. The guard admits only elements
  whose type is exactly ``int`` (not ``bool``, not ``np.int64``) and only a ``list``; an
  operand visibly an array or tensor (``np.array(...)``, a name assigned from one), a float
  or string literal, or a tuple literal is declined.
* ``np.prod`` wraps too (``np.prod([2**40, 2**40])`` is 0), and its empty product is float64
  ``1.0``: the guard takes only a non-empty list or tuple of positive ints whose exact
  product is below ``2**63``, so every partial product, in any order, is an int64
  (``numpy-int64-exact``); zero, negative and bool elements keep ``np.prod``.
* int64 wrap-around: ``np.sum`` of ints and ``np.lcm`` compute in int64 and wrap
  (``np.lcm(2**40, 3**30)`` is negative); Python is exact. Under the guard's bounds no
  int64 operation overflows, proved by Z3 per site (``numpy-int64-exact``, bit-vector
  arithmetic), so numpy and Python give the same value.
* the result's type: ``np.int64`` before, ``int`` after. Only consumers that treat both
  alike are admitted: the shape of ``np.zeros/ones/empty/full`` and the size of
  ``torch.zeros/ones/empty/full``, an element of ``torch.reshape``'s shape sequence (perceiver's
  ``torch.reshape(x, [b, np.prod(x.shape[1:-1]), c])``; a bare number there declines),
  ``range()``, ``int()``, ``float()`` (both round the integer once: helper-64), and a comparison
  (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``) with integer literals, sizes (``x.shape[k]``,
  ``x.size(k)``, ``x.ndim``, ``x.dim()``, ``x.numel()``) or ``len()`` whose result is only tested for
  truth: an ``if``/``elif``/``while``/``assert`` test or a conditional expression's, under
  ``not``/``and``/``or`` at most (``if np.sum(plan) > x.shape[1]:``; np.bool_ and bool test alike,
  and equal integers compare alike). Such a test is not forced both ways by the verifier: no
  branch changes, and its outcome is the original's on every input. A comparison kept as a value
  (``big = np.sum(plan) > 4`` read later, or returned), by ``is``/``in``, or with an operand of
  unknown type (``> x.sum()``, ``> n``) is declined.
* a size of a ``.view()``/``.reshape()`` method call (helper-78's c14, an MoE's
  ``h.view(-1, np.sum(self.split_sizes))``): a tensor's take np.int64 and int alike (through
  ``__index__``), and so does an array's ``reshape``; an array's ``view`` does not, it reads
  ``np.int64(3)`` as a dtype (the verifier's probe refuted the first version of this consumer
  on it). The sizes are separate arguments, every other one an integer literal, size or
  ``len()`` (a TypeError names every argument's type: ``got (float, numpy.int64)``), or one
  tuple or list, the only argument. That the receiver is a tensor rests on the method's name:
  ``numpy-method-receiver`` is left unknown, an unsafe fix.
* a truth value only: ``if np.min(sizes):``, ``if not m:`` (np.int64 and int of one value test
  alike; helper-79).
* a size read (``x.shape[k]``, ``x.size(k)``, ``x.ndim``, ``x.dim()``, ``x.numel()``, ``k`` an
  integer literal: ``x.shape[i]`` may be a slice, a torch.Size that np.int64 compares
  elementwise and int not at all, helper-79) is an int only where ``x`` is a tensor or an array,
  which its spelling cannot show: a fix that compares or combines the value with one carries a
  ``numpy-size-operands`` obligation left unknown, so it is an unsafe fix (``--unsafe-fixes``);
  integer literals and ``len()`` (always an int) need nothing.
* int arithmetic on the way to such a consumer: ``+``, ``-``, ``*``, ``//``, ``%`` with integer
  literals, sizes, ``len()`` and the value itself, into a local bound once (at most 3 locals
  deep): ``multiple = np.lcm(w, c)``, ``pad = (multiple - h.shape[1] % multiple) % multiple``,
  ``F.pad(h, (0, 0, 0, int(pad)))`` (helper-78's c12). ``np.int64`` wraps around and divides by
  zero with a RuntimeWarning (giving 0) where Python is exact or raises ZeroDivisionError, so
  the verifier bounds every step by interval arithmetic from the guard's bounds (a size or
  ``len()`` taken as any non-negative int64) and refutes a step that may leave int64 or a
  divisor that may be 0; ``np.lcm``/``np.gcd`` whose result reaches arithmetic take positive
  operands only (``0 < a < 2**31``), so the result is at least 1. A size times the value is
  therefore refuted (sizes are bounded by int64 alone). Other arithmetic (``/``, ``**``, a
  name of unknown type), assignments (later code may test
  ``isinstance(x, np.integer)``) and a returned value are declined.
* a local: ``width = np.sum(plan)`` on one line, ``torch.zeros(n, width)`` on a later one (the
  break is reported at the read). The binding's call is rewritten only when it is the name's
  one binding in the function (no reassignment, loop or comprehension target, walrus,
  ``del``, parameter, ``global``/``nonlocal``), nothing in the module can read it by name
  (``locals``/``vars``/``eval``/``exec``/``__builtins__`` named at all, ``grab = locals``
  included; a frame or closure attribute such as ``sys._getframe``, ``f_locals``,
  ``__closure__``, ``cell_contents``; an import of ``inspect``, ``builtins`` or
  ``traceback``: an adversarial review read the local through each; a callee in another
  module doing so, and a frame reached through ``getattr`` with a computed name, stay
  assumptions), and every read of the name is one of the consumers
  above; one other read (``type(width)``, arithmetic, a return) declines. The verifier
  re-derives the reads from the mended source, at every occurrence of the guarded
  expression. The span runs from the binding to the site.
* a bare number is a torch size only as a positional size of ``zeros``/``ones``/``empty``:
  ``torch.full(n, v)`` and ``size=n`` want a sequence and raise a TypeError naming the
  argument's type (``numpy.int64`` before, ``int`` after), so they decline (a review).
* names: ``np`` must be bound only by ``import numpy as np`` at the top level (``import
  jax.numpy as np`` declines); ``sum``, ``type``, ``list``, ``tuple``, ``int``, ``len``, ``all``,
  ``max``, ``min`` must not be bound where the guard would see them: at the top level, in the
  site's function or a function, lambda or comprehension around it, in a class body around it
  with no function between, by ``global``/``nonlocal`` anywhere, or through a star import. A
  parameter or local of another function cannot reach the guard (helper-79's c09: ``def
  clamp(x, min=0.0, max=1.0)`` elsewhere declined every site of the file). ``math`` must be
  bound only by ``import math``, or not at all (the rewrite then imports it).

Declined and left: reformer's ``_get_least_common_mult_chunk_len`` returns ``np.lcm(...)``:
the break is reported at its callers (``input_shape[-1] % lcm != 0``, data-dependent
branching), and ``math.lcm`` there would hand every caller an ``int`` where it had an
``np.int64``; the rule screens consumers within the statement only, so it declines a
returned result.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.numpy_constants.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.numpy_constants.rewrite import rewrite
from mend.rules.numpy_constants.screen import NAME, match

FIX_SAFETY = """\
Emitted after verification; needs no runtime: where the guard holds, the Python result has
the value numpy computes, and the consumer treats the int as it treated the np.int64;
elsewhere the original numpy call runs.

Proved: for the guard written in the mended source (its bounds read back from it), int64
accumulation of a sum or a product, and numpy's int64 lcm/gcd formula, cannot overflow, so they equal
the exact integers Python computes (``numpy-int64-exact``, Z3 bit-vectors, unsat). Resting
on checks: each replaced call still sits where its result only sizes an allocation, a
``range()``, an ``int()`` or a ``float()``, or is compared with ints for truth only (a static
screen of the mended source), and those consumers give identical results for np.int64 and int
on the installed numpy and torch (observed:
``numpy-result-consumer``); the guard is decided by Dynamo at trace time (measured, and the
pipeline's graph count). Both are required at every level.

Never inference-only: the values are integers, with no gradient.
"""

RULE = Rule(
    name=NAME,
    categories=("numpy-constant",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"numpy-int64-exact", "numpy-result-consumer", "numpy-size-operands",
                                "numpy-method-receiver"}),
    required_kinds=frozenset({"numpy-int64-exact", "numpy-result-consumer"}),
    needs_facts=False,
    branch_outcomes=False,     # a test's numpy call becomes its exact Python value: no branch changes
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["NAME", "RULE", "match", "rewrite"]
