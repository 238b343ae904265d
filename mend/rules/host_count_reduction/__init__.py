"""Rule: host-side counting loop over ``.tolist()`` -> a tensor count (shared case 031).

::

    n = 0                              n = 0
    for s in T.tolist():       ->      n = n + (T > C).sum()        # k * (...) when k != 1
        if s > C:
            n += 1

The same count in one statement is taken too, with the same obligations (``init`` 0:
Python's ``sum`` starts there): ``n = sum(k for s in T.tolist() if s <cmp> C)``,
``n = sum(s <cmp> C for s in T.tolist())`` (bools summed) and
``n = len([s for s in T.tolist() if s <cmp> C])`` become ``n = k * (T <cmp> C).sum()``; the
module must not bind ``sum``/``len``, and the comprehension has one plain ``for`` (a
hidden-case probe wrote the count so). A bare test ``if s`` is ``s != 0`` and ``if not s`` is
``s == 0`` (a number's truth; NaN is true in both), and ``n = T.tolist().count(C)`` with a
numeric literal, ``True`` or ``False`` C is ``sum(1 for s in T.tolist() if s == C)``
(``list.count`` tests ``s is C or s == C``, and for a literal the identity implies equality;
True is 1): helper-68's c32 and c33.

``T.tolist()`` moves every element to the host as a Python number (a graph break:
"Tensor.tolist() with non-integer tensor"); the loop then counts in Python. The rewrite
counts on the tensor, so the loop and the break disappear. The count becomes a 0-d int64
tensor instead of a Python int.

What makes it exact (proof obligations, discharged by ``verifier/obligations.py``, section
"host-count-reduction"; general lemma in ``proofs/hc_compare_exact.smt2``):

* ``count-compare-exact``: Python compares each element's exact value (``tolist()`` turns
  float16/bfloat16/float32 into the same float64) with C; torch compares in the promoted
  dtype after converting C to it (float C and a float tensor: the tensor's dtype; float C
  and an integer/bool tensor: float32; int C and an integer tensor: the tensor's dtype,
  wrapping). Proved for every element value of T's dtype (NaN, +-inf, -0.0 included)
  when C is exact there, refuted with a counterexample otherwise (C = 0.1 on float32:
  s = fp32(0.1) is > 0.1 in Python, not in torch). T's dtype is the example run's. C may
  be a Python-number attribute of the module (``l >= self.min_len``: bound only in
  ``__init__``, to no tensor or module): its value is the one observed where the loop runs
  (an assumption recorded with the proof; the fix is unsafe like every fix of this rule).
* Under ``torch.autocast`` T may be computed in float16/bfloat16 (a linear layer's output),
  where torch rounds C to that dtype and Python compares the exact value (helper-38: C = 1 +
  2**-10, 191 vs 190). A literal C that is not exact in both is answered by keeping the loop
  there: ``if <autocast on>:`` (``torch.is_autocast_enabled(d)`` for cpu, cuda, xpu, mps; and,
  when T is a name, ``or T.dtype in (torch.float16, torch.bfloat16)``: a half model) around
  the original loop, the count in its ``else`` (obligation ``autocast-keeps-original``, a
  screen; Dynamo folds the test, so no break remains outside autocast). Otherwise (an
  attribute C, or a literal exact there) ``count-compare-exact`` is also proved with T in
  float32, bfloat16 and float16, and refuted when C is not exact there.
* ``count-tolist-1d``: T is 1-D (observed; recorded as an assumption). ``tolist()`` of a
  2-D tensor yields lists and ``list > C`` raises TypeError in the original.
* ``count-sum-exact``: the int64 sum of the bool tensor, scaled and added to the int
  literal, equals the Python int (bit-vector arithmetic, counts below 2^48).
* ``count-uses-keep-type``: every later use of ``n`` is an operand of ``+``, ``-`` or ``*``
  whose other operand is a tensor; a Python int there and a 0-d int64 tensor give the same
  dtype (ATen's promotion categories; observed dtypes and ranks) and the same device.
* ``count-no-gradient``: comparisons are not differentiable; neither count carries a
  gradient.

The facts (T's dtype, rank, device; each use operand's kind, dtype, rank) are observed on
the example run at one line each -- T where the count runs (the loop's line), each use's
other operand where that use reads it -- on every hit of the line and every call of the
function (``trace_facts(watch=...)``); the observations must agree (kind, dtype, rank,
device), else the obligation is unknown with the disagreement as reason. T must be shown to
be a torch.Tensor. ``count-compare-exact``, ``count-tolist-1d`` and ``count-uses-keep-type``
are required at every level, ``--verify fast`` included (the rule's ``required_kinds``;
the comparison and the uses proved by Z3, the rank checked): unknown or refuted declines, naming the
obligation. The threshold is exposed as ``RewriteResult.edge_values`` for the differential
test (drawn as C, C rounded to the input's dtype and its neighbours).

Declined, with the reason, when: the loop body does anything but one
``if s <cmp> C: n += <int literal>`` (an else/elif arm, break/continue, other statements,
a chained or non-numeric comparison, a threshold that is neither a literal nor a
Python-number attribute, a non-literal increment), the loop has
an ``else``, iterates anything but ``<expr>.tolist()``, sits in another loop or outside a
function, the loop variable is read after the loop (Python leaves it bound), ``n`` is not
initialised to an int literal in the same block before the loop or is assigned between,
``n`` or the loop variable is captured by a nested function or declared global/nonlocal,
a later use of ``n`` is anything but an operand of ``+``/``-``/``*`` with a non-literal
other operand (returned, compared, formatted, passed to a call, stored, reassigned...) or is
the left operand of ``*`` (``n * h``: a 0-d tensor there is cast to a float16/bfloat16 ``h``'s
dtype first, 1001 becoming 1000, where a Python ``n`` met ``h`` in float32; helper-70), a
use shares its line with another statement or its statement binds with ``:=`` (facts are
observed per line), the loop holds a comment the rewrite would drop, T goes through NumPy
(``.numpy()``: the count would be a NumPy integer), or a name T reads (a ``self.``
attribute of it) is bound, deleted or written into (attribute/item assignment, ``setattr``)
anywhere from the counter's initialisation to the end of the function -- conservatively,
whether or not that statement runs: the facts observed where the count runs might not
describe the value the loop iterates on other inputs.
"""
from __future__ import annotations

from mend.rules._base import Decline, Match, RewriteResult, Rule
from mend.rules.host_count_reduction.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.host_count_reduction.rewrite import rewrite
from mend.rules.host_count_reduction.screen import CATEGORY, NAME, match

FIX_SAFETY = """\
An unsafe fix (applied with ``--unsafe-fixes``): its proofs are over the facts observed
where the count runs (tier ``observed``) and ``count-tolist-1d`` is an observation. Emitted only when the count is shown exact: ``count-compare-exact`` and
``count-uses-keep-type`` proved by Z3 and ``count-tolist-1d`` checked, at every level,
``--verify fast`` included. A documented difference: the count becomes a 0-d int64
tensor instead of a Python int, which only ``+``/``-``/``*`` with a tensor may read.

Proved by Z3 over the facts observed where the count runs (T's dtype, rank, device, on
every hit of the loop's line) and where each later use reads its other operand: Python's
comparison of each element agrees with torch's for every value of T's dtype, NaN, +-inf
and -0.0 included (``count-compare-exact``; C = 0.1 on float32 is refuted); each later use
keeps its result dtype and device (``count-uses-keep-type``); the int64 sum equals the
Python count below 2^48 elements (``count-sum-exact``). Checked, not proved: T is 1-D
(``count-tolist-1d``: its rank is observed, and recorded as an assumption), and the count
carries no gradient (``count-no-gradient``: comparisons are not differentiable). The facts describe the example
run; the screen declines any binding or write of what T reads between the counter's
initialisation and the end of the function, so that they describe the value the loop
iterates.

Never inference-only: the count has no gradient in either version.
"""

OBLIGATION_KINDS = frozenset({"count-tolist-1d", "count-compare-exact", "count-sum-exact", "count-uses-keep-type",
                              "count-no-gradient", "autocast-keeps-original"})

RULE = Rule(
    name=NAME,
    categories=(CATEGORY,),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=frozenset({"count-compare-exact", "count-tolist-1d", "count-uses-keep-type"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["CATEGORY", "DECLINE_EXAMPLES", "FIX_EXAMPLES", "NAME", "NOOP_EXAMPLES", "RULE", "Decline", "Match",
           "RewriteResult", "example_line", "match", "rewrite"]
