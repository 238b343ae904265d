"""Rule: deferred side effects (GraphMend paper §4, "[Defer]").

``print``, logger methods and ``warnings.warn`` inside the compiled region are captured
where they occur (tensor arguments snapshotted) and replayed after the compiled call in
the original order. The statement is rewritten into a call of :mod:`mend.runtime`: under
``torch.compile`` the snapshots leave the graph as graph outputs and a store Dynamo replays
right after the graph call performs them (an ordinary, cacheable FX graph, no install
step); when a check that can fail inside the graph follows the call in its function
(``torch._assert_async``, ``torch._check*``, ``assert``, ``if <tensor test>: raise``), the call
is emitted ``ordered=True`` and stays at its position as the ordered operator
``mend::capture``, so a failing check shows what eager showed under the eager and aot_eager
backends, not reliably under inductor (that graph bypasses Inductor's FX graph cache). Both
forms are unsafe fixes (FIX_SAFETY below)::

    print("pre-scale:", h)              ->  _mend_rt.defer_print("pre-scale:", h)
    logger.warning_once("msg %s", n)    ->  _mend_rt.defer_log(logger, "warning_once", "msg %s", n)
    warnings.warn("old", FutureWarning) ->  _mend_rt.defer_warn("old", FutureWarning)
    print(f"h={h:.3f}")                 ->  _mend_rt.defer_print(_mend_rt.fmt("h={:.3f}", h))

An ``if`` on a tensor test whose whole body is one such call (an overflow or NaN
diagnostic) becomes one conditional call, its ``if`` line a comment so the call keeps its
line (``conditional.py``; obligation ``deferred-if-predicate``)::

    if (h.abs() > 1e4).any():           ->  # mend: deferred-side-effects (was: if ...:)
        warnings.warn("overflow")            _mend_rt.defer_warn_if((h.abs() > 1e4).any(), "overflow")

The test is evaluated first, as the ``if`` did; the replay performs the call exactly when
its snapshot is true. The arguments now run either way, so they must be constants, names
bound on every path, or formats over them (declined with the reason otherwise).

An f-string or ``"...".format(...)`` argument becomes a lazy ``fmt(template, *values)``:
Dynamo cannot format a tensor inside the graph, and the values are snapshotted instead. A
positional ``"..." % values`` argument becomes ``pct(template, values)`` (:func:`mend.lazy.pct`:
a tensor's ``%s``/``%r``/``%a`` field formatted at replay, every other field now with ``%``).
An argument after a formatted one that calls a module method, a submodule or an in-place op
declines: the original formatted its text before that call ran (helper-101). A
builtin ``repr(t)`` / ``str(t)`` argument is ``f"{t!r}"`` / ``f"{t!s}"`` and becomes
``fmt("{!r}", t)`` / ``fmt("{!s}", t)`` (not when the module binds the name). A
``t.item()`` that is a whole argument, a whole f-string field or a ``.format``/``%``
argument (``print("norm", h.norm().item())``, ``f"{loss.item():.4f}"``,
``logger.info("loss %f", loss.item())``; the scan files such a break under print-logging)
becomes ``item(t)`` (a builtin ``float(t)`` / ``int(t)`` there: ``item(t, float)`` /
``item(t, int)``; ``int`` of a floating tensor is still read at the call, where ``int(nan)``
raises): the number is read from ``t``'s snapshot at replay, the same number
(``lazy-item-equals-item``); eagerly ``item(t)`` is ``t.item()`` where the original read it,
and a tensor that is not one element raises there with ``.item()``'s own error.
``import mend.runtime as _mend_rt`` is added (another name when that one is taken) on the
line of the last leading import, so no line moves and replayed warnings and log records
name the original lines. ``mend.runtime.install(model)`` (or ``capture()``) is optional:
it buffers the effects until the outermost call returns or raises.

Declined, with the reason, when:

* the call's value is used (``x = print(...)``, ``return warnings.warn(...)``, inside an
  expression): a deferred call has no value to give;
* ``print(..., file=...)`` writes to something other than ``sys.stdout``/``sys.stderr``,
  or keywords are unpacked with ``**`` (the stream cannot be checked);
* an argument has side effects (in-place tensor methods, container mutators, ``:=``,
  ``next()``, ``print()``...) or reads a tensor value on the host (``.tolist()``,
  ``.numpy()``, or ``.item()`` feeding Python code inside the arguments:
  ``round(t.item(), 3)``): a break of its own that deferral does not remove;
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
from mend.rules.deferred_side_effects.rewrite import ordered, raiser_declined, rewrite
from mend.rules.deferred_side_effects.screen import ALIAS, NAME, RUNTIME, match

FIX_SAFETY = """\
An unsafe fix (applied with ``--unsafe-fixes``), since 2026-12-06: on a call that raises
after the deferred call, the output shown can differ from eager's (lost, or under inductor shown
where eager never reached it); neither form is exact on every input.

Emitted after the differential test (compiled without ``mend.runtime.install``, as users run it),
with these documented differences:

* the replayed form (the default) loses the call's output when an operator later in the same graph
  raises at run time (an index out of range in ``gather``/``embedding``/``x[idx]``, an in-graph
  check, an integer division, a factorization), since the graph never returns to store the
  replay. Verification traces the graphs of the example run (eval without grad, training with
  grad: ``verifier/replay_raisers.py``) and refutes this form when such an operator follows the
  call; with none seen, ``replayed-on-exception`` is checked by that **observation**, which other
  inputs, guards and modes do not share (helper-65: a raiser reached only from a buffer's state,
  in a branch on ``self.training``, in an operator the name screen missed), so the fix is unsafe;
* the ordered form (``ordered=True``: ``mend::capture`` at the call's position), chosen when a
  check follows the call in its function or when the replayed form is refuted, is exact under the
  eager and aot_eager backends, but inductor keeps the capture in order neither with a check (it
  fused a following check with a buffer update into a kernel that ran before the capture,
  helper-65) nor with a kernel that raises (it ran a capture before an earlier gather's index
  error surfaced, helper-62): ``replayed-on-exception`` is unknown;
* the output is also lost when Dynamo fails while tracing that graph (an input of the wrong
  shape: the effect is not shown before the error, where the original's graph break showed it;
  found by a held-out review, cases 316 and 342), and lines differ from the original's only when
  another rewrite above the call changed the line count.

The differences show only on a call that raises after the deferred call. The paper rows'
loggers (T5, BART, Pegasus, BioGPT) are followed by embedding lookups in their graphs, so they
get the ordered form.

The obligations are claims about ``mend.runtime``, not about the site's values (the only
facts read are the traces of its graphs), and every one is a check, not a per-site proof: the replay keeps program order
(``order-preserved``), what was shown before an exception is what eager showed
(``replayed-on-exception``; ``mechanism`` says which form, ``proofs/dse_graph_replay.smt2``
for the post-graph replay; with the trace's observation, or unknown for the ordered form), a tensor argument is shown as it was at the call,
before later in-place updates (``snapshot-before-mutation``), the lazy
``fmt(template, *values)`` renders as the f-string did (``lazy-format-equals-fstring``),
and a ``*_once`` logger method is replayed through the same cached method
(``once-per-process``). Each rests on a lemma about the capture buffer proved once under
``proofs/`` (``dse_*.smt2``) and on a screen of the runtime when it is discharged
(the post-graph store is performed by the module's ``torch.compiler.disable``d
``__setattr__`` and each snapshot is ``t.detach().clone()``; for ordered calls
``mend::capture`` writes nothing, is registered as an ordered effect and clones each
tensor). ``warning-identity`` (same category, message, filename and line) rests on how the
rewrite calls ``warnings.warn``. No obligation is required at every level.

Never inference-only: the rewrite does not touch values or gradients. Only graphs holding
an ordered call bypass Inductor's FX graph cache (torch 2.13, see ``mend/runtime.py``).
"""

OBLIGATION_KINDS = frozenset({"order-preserved", "replayed-on-exception", "snapshot-before-mutation",
                              "lazy-format-equals-fstring", "lazy-item-equals-item", "once-per-process",
                              "warning-identity", "deferred-if-predicate"})

RULE = Rule(
    name=NAME,
    categories=("print-logging", "data-dependent-branch"),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=frozenset(),
    needs_facts=True,   # the trace of the replaying graph (replayed-on-exception)
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
    fallback=ordered,
    fallback_when=raiser_declined,
)

__all__ = ["ALIAS", "DECLINE_EXAMPLES", "FIX_EXAMPLES", "NAME", "NOOP_EXAMPLES", "RULE", "RUNTIME", "Decline", "Match",
           "RewriteResult", "example_line", "match", "rewrite"]
