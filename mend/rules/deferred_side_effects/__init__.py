"""Rule: deferred side effects (GraphMend paper §4, "[Defer]").

``print``, logger methods and ``warnings.warn`` inside the compiled region are captured
where they occur (tensor arguments snapshotted) and replayed after the compiled call in
the original order, also when the forward raises. The statement is rewritten into a call
of :mod:`mend.runtime`, which does the capture inside the graph with no break (a custom
operator registered as an ordered effect) and the replay outside it::

    print("pre-scale:", h)              ->  _mend_rt.defer_print("pre-scale:", h)
    logger.warning_once("msg %s", n)    ->  _mend_rt.defer_log(logger, "warning_once", "msg %s", n)
    warnings.warn("old", FutureWarning) ->  _mend_rt.defer_warn("old", FutureWarning)
    print(f"h={h:.3f}")                 ->  _mend_rt.defer_print(_mend_rt.fmt("h={:.3f}", h))

An f-string or ``"...".format(...)`` argument becomes a lazy ``fmt(template, *values)``:
Dynamo cannot format a tensor inside the graph, and the values are snapshotted instead.
``import mend.runtime as _mend_rt`` is added (another name when that one is taken).
The model must be run through ``mend.runtime.install(model)`` (or ``capture()``) for the
replay to happen after the call; without it the effects run from inside the graph, at
their own position, with the same output.

Declined, with the reason, when:

* the call's value is used (``x = print(...)``, ``return warnings.warn(...)``, inside an
  expression): a deferred call has no value to give;
* ``print(..., file=...)`` writes to something other than ``sys.stdout``/``sys.stderr``,
  or keywords are unpacked with ``**`` (the stream cannot be checked);
* an argument has side effects (in-place tensor methods, container mutators, ``:=``,
  ``next()``, ``print()``...) or reads a tensor value on the host (``.item()``,
  ``.tolist()``, ``.numpy()``): a break of its own that deferral does not remove;
* ``logger.exception`` or ``exc_info=``/``stack_info=``: they record the exception or stack
  current at the call, which is gone at replay;
* the logger is computed inside the compiled region (``logging.getLogger(...).info``,
  ``self.loggers[0].info``), or ``print`` / ``warnings`` is not the builtin / standard
  module in this file;
* the call sits in a ``try`` block (an error it raises, e.g. under the warnings filter
  ``"error"``, would no longer be caught there) or in a non-torch ``with`` block (the
  context, e.g. ``warnings.catch_warnings()`` or ``redirect_stdout``, ends before the
  replay), or outside a function;
* an f-string uses ``=``, nested format specs, or an escape that produces a brace.
"""
from __future__ import annotations

from mend.rules._base import Decline, Match, RewriteResult, Rule
from mend.rules.deferred_side_effects.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.deferred_side_effects.rewrite import rewrite
from mend.rules.deferred_side_effects.screen import ALIAS, NAME, RUNTIME, match

FIX_SAFETY = """\
Labelled safe when every obligation is checked by the runtime screens and lemmas and the
differential test is bit-exact (``mend fix`` applies it by default). Emitted after the differential test, with documented differences: a warning's filename
and line point at the mended source, and the replay after the compiled call (also when it
raises) needs ``mend.runtime.install(model)`` or ``capture()``; without it the effects
run inside the graph, at their own position, with the same output.

The obligations are claims about ``mend.runtime``, not about the site's values (no facts
are read), and every one is a check, not a per-site proof: the replay keeps program order
(``order-preserved``), what was captured before an exception is replayed before it
propagates (``replayed-on-exception``), a tensor argument is shown as it was at the call,
before later in-place updates (``snapshot-before-mutation``), the lazy
``fmt(template, *values)`` renders as the f-string did (``lazy-format-equals-fstring``),
and a ``*_once`` logger method is replayed through the same cached method
(``once-per-process``). Each rests on a lemma about the capture buffer proved once under
``proofs/`` (``dse_*.smt2``) and on a screen of the runtime when it is discharged
(``mend::capture`` writes nothing and is registered as an ordered effect; its body clones
each tensor). ``warning-identity`` (same category and message; filename and line may
differ) rests on how the rewrite calls ``warnings.warn``. No obligation is required at
every level.

Never inference-only: the rewrite does not touch values or gradients. Graphs holding a
capture bypass Inductor's FX graph cache (torch 2.13, see ``mend/runtime.py``).
"""

OBLIGATION_KINDS = frozenset({"order-preserved", "replayed-on-exception", "snapshot-before-mutation",
                              "lazy-format-equals-fstring", "once-per-process", "warning-identity"})

RULE = Rule(
    name=NAME,
    categories=("print-logging",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=frozenset(),
    needs_facts=False,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["ALIAS", "DECLINE_EXAMPLES", "FIX_EXAMPLES", "NAME", "NOOP_EXAMPLES", "RULE", "RUNTIME", "Decline", "Match",
           "RewriteResult", "example_line", "match", "rewrite"]
