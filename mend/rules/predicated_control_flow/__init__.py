"""Rule: predicated control flow (GraphMend, arXiv 2509.16248, §4 "[Where]").

A data-dependent ``if``/``else`` on a tensor predicate becomes one graph-native selection,
``torch.where(pred, a, b)``, and a tensor ``a and b`` / ``a or b`` / ``not a`` becomes
``torch.logical_and`` / ``torch.logical_or`` / ``torch.logical_not``.

Rewrites (``examples.py``):

* if/else (or an elif chain) assigning the same names -> one ``torch.where`` per name
  (nested for elif), the predicates evaluated once into fresh ``_mend_pred_<n>`` names
  when more than one selection reads them;
* if without else, its targets defined before -> ``x = torch.where(p, a, x)``;
* both sides ``return`` (also ``if p: return a`` followed by ``return b``) ->
  ``return torch.where(p, a, b)``; tuples of one length on every side (``return h, m``) ->
  one ``torch.where`` per element (a tuple on one side only declines);
* ``if <Python test> and <tensor test>:`` without else -> ``if <Python test>:`` around
  the selection; an ``elif`` site whose chain starts with a Python test -> ``else:``
  around it;
* a test that binds a name with ``:=`` as the first thing it evaluates (``if (m :=
  h.mean()) > 0:``) -> the binding on the line before the ``if``, then the rewrite of
  ``if m > 0:``: the same program (an ``elif`` test, or a binding evaluated after another
  part of the test, which may raise first, declines with the reason);
* a name assigned on one side only and used nowhere else (a setup temporary) is kept as
  a plain assignment before the selection;
* a branch-local Python scalar (issue 10, transformers' fp16 overflow guards, written
  several times in one ``forward``: ``clamp_value = torch.finfo(h.dtype).max - 1000``):
  assigned once on one side and read later there, named by no test and no other side, dead
  after the ``if`` (every later path rebinds it before a read), and computed from literals,
  dtypes and ``torch.finfo``/``torch.iinfo`` only -- kept before the selection too
  (``scalars.py``). The test's global ``.any()``/``.all()`` is kept: an elementwise
  ``torch.where(torch.isinf(h), ...)`` would clamp only the inf elements, where the original
  clamps the whole tensor. Declined with the reason: such a scalar read after the ``if``,
  or a temporary of that kind that is a tensor op or a call (it may have an effect);
* setup that GraphMend hoists (the LongRoPE frequency update of transformers'
  ``modeling_rope_utils``): a memoised initialisation ``if not hasattr(self, "k"):
  self.k = self.init_fn(...)`` under its five conditions (no ``else``; ``self.k``
  definitely assigned; the rest of its body neutral; ``self.k`` read nowhere but by the
  selection; the initialiser pure and unable to raise -- a ``self.<attr>(...)`` call that
  is neither a method nor a submodule is accepted here only, as the obligations
  ``hoisted-setup-pure`` / ``hoisted-setup-cannot-raise``) and an idempotent device move
  ``self.a = self.a.to(d)`` (obligation ``idempotent-device-move``) run first, on every
  path;
* every side ending with ``self.register_buffer("<same name>", v_i, <same other args>)``
  -> one call on ``torch.where(p, v_1, v_2)`` (obligations: same shape and dtype; the
  buffer is a new tensor, no longer an alias of ``v_i``: ``paired-call-value-not-aliased``);
* ``torch.cond`` where running the untaken side is the problem: a side calls a submodule
  (the paper's rule), or applies an op whose gradient is non-finite off the domain the
  predicate guards (shared/cases 012, ``if s > 0: y = torch.sqrt(s)``). Emitted as
  ``if torch.compiler.is_compiling() and (pred).numel() == 1: y = torch.cond(pred, lambda:
  a, lambda: b)`` with the original ``if`` kept otherwise; a side that may alias an input
  gets ``.clone()`` unless something later writes to it in place (declined); when the
  sides read different parameters, the cond runs only without autograd;
* the autocast-guarded form (``autocast.py``, ``Rule.fallback``), tried only when the
  differential test's autocast leg refutes the form above: ``if torch.is_autocast_enabled("cpu")
  or ... ("cuda") or ... ("xpu") or ... ("mps"):`` keeps the original ``if`` verbatim, the form above in
  its ``else``. Under autocast a side can compute in bfloat16 and the other in float32 (shared
  case 004's projection with float32 buffers), so the original returns either dtype and no one
  selection can; the break stays under autocast only (obligation ``autocast-keeps-original``).

Declines (``unchanged_examples.py``): a side that mutates state (other than the hoistable
setup above), raises, returns early while the other falls through, assigns ``None``,
draws random numbers, calls something that might not be pure, holds a nested compound
statement, setup that fails one of the hoisting conditions, trailing calls that differ in
name or arguments, a site inside a ``while`` loop, or a branch in a ``for`` loop that holds
``break``/``continue``, or that skips a call of the loop's item (an MoE expert: torch.where
would run every expert, cf. shared/cases 006) when the loop is not over an attribute of ``self``;
over one (``for e, expert in enumerate(self.experts)``, a ModuleDict's ``.values()`` or
``.items()``), that branch takes torch.cond, whose guard reaches the items through the iterable. A branch inside a ``for`` loop is otherwise
predicated alike on each iteration (Dynamo unrolls the loop; the frame it skipped compiles
again: helper-60's per-layer rescale, 0 -> 1 graph); the proofs read one iteration's facts, so
``loop-facts-agree`` (required, an observation: the fix is unsafe) checks that every iteration
showed the same kind, dtype, shape and device of each name the branch reads. What the source cannot decide
is returned as proof obligations (see the fix safety statement).

The package: ``env.py`` (what the parts share), ``screen.py`` (what may run
speculatively, tensor logic), ``branches.py`` (the arms of a chain), ``hoisting.py``
(setup moved above the selection), ``scalars.py`` (branch-local Python scalars, liveness
after the ``if``, the finiteness-test obligation), ``where.py`` and ``cond.py`` (the two planners),
``rewrite.py`` (:func:`rewrite`; :func:`match`, which runs the rewrite on the located site
so the two agree; :func:`first_site`), ``examples.py`` and ``unchanged_examples.py``.
"""
from __future__ import annotations

from mend.rules._base import Decline, Match, RewriteResult, Rule
from mend.rules.predicated_control_flow.branches import branches
from mend.rules.predicated_control_flow.cond import COND_TAKEN_SIDE_ONLY
from mend.rules.predicated_control_flow.env import NAME
from mend.rules.predicated_control_flow.examples import FIX_EXAMPLES
from mend.rules.predicated_control_flow.hoisting import is_device_move, memo_slot
from mend.rules.predicated_control_flow.autocast import declined_for_autocast
from mend.rules.predicated_control_flow.rewrite import alternatives, autocast_guarded, first_site, match, rewrite
from mend.rules.predicated_control_flow.screen import FORCING_HOOK
from mend.rules.predicated_control_flow.unchanged_examples import DECLINE_EXAMPLES, NOOP_EXAMPLES

FIX_SAFETY = """\
Safe when every obligation is proved at its general tier and the gradients are bit-exact;
unsafe (``--unsafe-fixes``) when a proof needs the example's sizes, an obligation is
unknown, or the gradients agree only within tolerance. Emitted only after verification: the rewrite changes which code runs (``torch.where``
evaluates both sides), so it rests on proof obligations and the differential test, never
on the static screen alone. At ``--verify standard`` a refuted ``finite-gradient`` makes
the rewrite inference-only.

The static screen declines what it can see is unsafe (the declines above). What the
source cannot decide is returned as obligations. Decided by Z3 over the facts of one run
of the candidate on the example input, under the assumptions recorded with each proof:
equal shapes and dtypes of the two sides (``same-shape``, ``same-dtype``), a one-element
predicate (``single-element-predicate``; a test not statically bool, ``if n_pad:``, is
emitted as ``n_pad != 0``, which is ``bool(n_pad)`` for one element of any dtype: NaN true,
-0.0 false; where the predicate's rank follows its inputs' ranks, as ``if gate:`` on a 0-d input
does, it is proved only at the example's sizes, an unsafe fix: a gate of another rank makes the
original raise where ``torch.where`` broadcasts, helper-60), bool operands of tensor logic (``bool-operand``), an
untaken side that cannot raise (``untaken-side-cannot-raise``; ``fall-through-cannot-raise``
for the statements after an early ``return``, required at every level: an adversarial review's
``if (t < 0).any(): return ...`` guarded the ``nll_loss`` after it), finite gradients through
the untaken side (``finite-gradient``), and the selection's IEEE equality with the
original branch (``where-equals-ite``, one per selected name); for ``torch.cond``, its
predicate and branch types (``cond-predicate``, ``cond-branch-types``). Resting on checks,
not on a solver: a submodule called on the untaken side writes no state
(``untaken-side-runs``, ``cond-side-pure``: the effect analysis of operator schemas and
module types), the hoisted LongRoPE setup (``hoisted-setup-pure``,
``hoisted-setup-cannot-raise``, ``idempotent-device-move``; its inputs being the module's
configuration is observed on the example only), a cond output that is not an alias
(``cond-output-not-aliased``, a screen of later uses), a merged ``register_buffer`` value
(``paired-call-value-not-aliased``), and torch.cond's semantics (``cond-taken-side-only``,
``cond-no-autograd``; ``cond-modules-unhooked``: a side that calls ``self.<...>`` or a parameter
runs under torch.cond only when ``_mend_cond_ready(...)`` finds no module hook, global or on any
submodule, no quantized module and no submodule in training mode: helper-88 found a feature-capture
hook, pruning and dynamic quantization added after mend ran made the compiled call raise, helper-94
a BatchNorm in training under no_grad whose running statistics Inductor's cond dropped), and the autocast-guarded form's kept ``if`` (``autocast-keeps-original``:
a screen of both versions; autocast on a device type other than cpu and cuda is not guarded). A finiteness test (``isinf``/``isfinite``/``isnan``) moved into the
graph that computes its tensor carries ``finiteness-test-precision``: Inductor computes a
fused float16/bfloat16 producer in float32 without rounding, so an overflow the graph
break used to materialise can be missed (measured on torch 2.13: the mended guard does not
fire under Inductor, it does in eager and aot_eager); on float16 it is unknown, so such a
fix is unsafe, and the differential test under Inductor still judges it.

Gradient gates (``gate.py``): a ``torch.where`` side with a ``finite-gradient`` obligation that
calls no submodule and binds no setup temporary reads each input through ``_mend_gate(K, v)``
(``torch.where(K, v, v.detach())`` for a tensor that requires grad, under autograd; the value
itself otherwise), ``K`` the side's path condition. Its finite-gradient obligations become one
``gradient-gated`` per gated value: a static screen of the mended source (every input gated on
the selection's path condition, the helper verbatim) citing ``proofs/pcf_gate_gradient.smt2``
(proved once: the inputs' gradient equals the original branch's for any backward of the sides).
Such a rewrite is usable in training; under ``torch.no_grad()`` the gates trace to nothing.
A gated rewrite keeps the original ``if`` for an eager call under anomaly detection (``if not
torch.compiler.is_compiling() and torch.is_anomaly_enabled():``, ``anomaly-keeps-original``, a
static screen): the untaken side's backward still runs, with a zero gradient, and anomaly
detection raised "SqrtBackward0 returned nan values" there (helper-88 F2). The test breaks the
graph under Dynamo, hence only outside torch.compile; compiled with ``backend="eager"`` and
anomaly detection on, the difference remains, and so it does in eager when anomaly detection
is enabled around ``backward()`` only (helper-104 B1): a gated rewrite is therefore unsafe
(``verifier.levels.CAVEATS``), applied with ``--unsafe-fixes``.

Inference-only: at ``--verify standard`` a refuted ``finite-gradient`` does not decline;
the rewrite is marked ``inference-only`` (a gradient through the untaken side may be NaN,
``0 * inf``). No obligation is required at every level: ``--verify fast`` runs the screen
and a short differential test only. The ``torch.cond`` form runs only under
``torch.compile`` with a one-element predicate (the original ``if`` runs otherwise), and,
when the sides read different parameters, only without autograd, so the graph break stays
in training there.
"""

OBLIGATION_KINDS = frozenset({
    "same-shape", "same-dtype", "single-element-predicate", "bool-operand",
    "untaken-side-cannot-raise", "fall-through-cannot-raise", "finite-gradient", "gradient-gated", "untaken-side-runs",
    "where-equals-ite",
    "idempotent-device-move", "paired-call-value-not-aliased", "hoisted-setup-pure", "hoisted-setup-cannot-raise",
    "cond-predicate", "cond-branch-types", "cond-sides-trace", "cond-output-not-aliased", "cond-side-pure", "cond-taken-side-only",
    "cond-no-autograd", "cond-modules-unhooked", "finiteness-test-precision", "autocast-keeps-original",
    "anomaly-keeps-original",
    "loop-facts-agree",
})

RULE = Rule(
    name=NAME,
    categories=("data-dependent-branch",),
    match=match,
    rewrite=rewrite,
    example_line=first_site,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=frozenset({"fall-through-cannot-raise", "loop-facts-agree"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
    alternatives=alternatives,
    fallback=autocast_guarded,
    fallback_when=declined_for_autocast,
)

__all__ = ["COND_TAKEN_SIDE_ONLY", "alternatives", "autocast_guarded", "DECLINE_EXAMPLES", "FIX_EXAMPLES", "FORCING_HOOK", "NAME", "NOOP_EXAMPLES", "RULE",
           "Decline", "Match", "RewriteResult", "branches", "first_site", "is_device_move", "match", "memo_slot",
           "rewrite"]
