"""Rule: predicated validation (GraphMend paper §4, "[Trap]").

``if <tensor cond>: raise E(msg)`` and a tensor ``assert cond, msg`` become one
``torch._assert_async`` inside the graph. The original exception is kept, verbatim, in a
module-level table of factories (``_MEND_TRAPS = {"<id>": lambda: E(msg)}``); the assert
carries the marker ``mend-trap:<module>:<table>.<id>`` as its message, and
:mod:`mend.validation_runtime` (``install(model)``) turns the ``RuntimeError`` carrying
that marker back into ``E(msg)`` where the call returns, outside the compiled region.

Measured on torch 2.13 (CPU): ``_assert_async`` raises ``RuntimeError(msg)`` with the
message intact in eager and under the eager, aot_eager and inductor backends (also with
``dynamic=True``, ``fullgraph=True``, ``cpp_wrapper``). The marker is exact there; on CUDA
the message is dropped and the failure is a fatal device-side assert (pytorch#131491), so
the restore is CPU-only (an obligation of every fix).

Declined, with the reason, when:

* the message is formatted from runtime values (f-string, ``%``, ``.format``, a name):
  restoring it needs the values on the host at the point of failure (shared case 023);
* the function containing the check also changes state anywhere (in-place tensor ops,
  ``out=``, attribute/item writes, ``x += ...``, container mutators): with the check
  inside the graph, inductor runs later in-place updates before the failed assert
  surfaces, and aot_eager drops earlier ones (it applies mutations after the graph), so
  the failing call would leave different state than eager (measured; case 023);
* the condition is an ``and``/``or`` (short-circuit evaluation), binds a name (walrus),
  or is computed from shapes and literals only (Dynamo already decides it at trace time);
* the statement is ``assert <cond>[, "literal"]`` without a leading ``not``: Dynamo lowers
  that form to ``_assert_async`` itself (no break; shared cases 021/024), so only
  ``assert not <cond>[, "literal"]`` is rewritten;
* a ``try``/non-torch ``with`` encloses the check in the function (a local handler would
  see a RuntimeError instead of ``E``), the check sits in a loop or outside a function,
  the raise has a ``from`` clause, the ``if`` has an ``else``/``elif`` or does more than
  raise, the exception is built from a local name, or a comment would be dropped.
"""
from __future__ import annotations

from mend.rules._base import Decline, Match, RewriteResult, Rule
from mend.rules.predicated_validation.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.predicated_validation.rewrite import rewrite
from mend.rules.predicated_validation.screen import MARKER, NAME, TABLE, constant_message, match

FIX_SAFETY = """\
Emitted after verification, with a documented difference: install
``mend.validation_runtime.install(model)`` on the module you call, or a failing check
raises ``RuntimeError("mend-trap:...")`` instead of the original exception. The restore
is CPU-only: on CUDA ``_assert_async`` drops the message (pytorch#131491).

Decided by Z3 over the facts of one run of the candidate: the mended check fails exactly
when the original raised, and the trap table restores the same exception type and message
(``raises-iff-original``, over IEEE / bit-vector values of the condition), and the
condition is a one-element tensor (``condition-is-tensor``). Resting on checks, not on a
solver: the forward changes no module state, observed in eval and in training mode with
its submodules screened by the effect analysis (``state-unchanged-on-raise``, required at
every level, ``--verify fast`` included); the code after a passing check computes the same
result (``same-result-when-passing``); the exception is restored at the call boundary
from the trap table entry (``restore-at-boundary``); the tensors at the check are on the
CPU (``cpu-only``, observed); and the first failing check in program order is reported
(``first-failure-wins``: exact with one check in the file, otherwise measured on the
eager, aot_eager and inductor backends, not a documented guarantee).

Never inference-only: a check has no gradient.
"""

OBLIGATION_KINDS = frozenset({"raises-iff-original", "same-result-when-passing", "first-failure-wins",
                              "restore-at-boundary", "state-unchanged-on-raise", "condition-is-tensor", "cpu-only"})

RULE = Rule(
    name=NAME,
    categories=("raise-assert",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=frozenset({"state-unchanged-on-raise"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["DECLINE_EXAMPLES", "FIX_EXAMPLES", "MARKER", "NAME", "NOOP_EXAMPLES", "RULE", "TABLE", "Decline", "Match",
           "RewriteResult", "constant_message", "example_line", "match", "rewrite"]
