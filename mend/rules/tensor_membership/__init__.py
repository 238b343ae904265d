"""Rule: membership tests on a tensor (issue 10, kind 6: "``v in tensor`` becomes a tensor
predicate").

``if v in t:`` with a tensor ``t`` calls ``Tensor.__contains__``, which is
``bool((v == t).any().item())``: on torch 2.13 the ``.item()`` breaks the graph inside
torch's own code ("Unsupported Tensor.item() call"), Dynamo cannot resume there and runs
the rest of the function eagerly. The rule rewrites the test to ``(v == t).any()``
(``v not in t``: ``not (v == t).any()``), the very expression ``__contains__`` evaluates,
and predicates the ``if`` with :mod:`mend.rules.predicated_control_flow` (``torch.where``,
or ``torch.cond`` where a side must not run speculatively), whose screens, declines and
obligations all apply::

    if self.mask_token_id in input_ids:          h = torch.where(
        h = h + self.bias                   ->       (self.mask_token_id == input_ids).any(), h + self.bias, h)

Traps, and how each is handled:

* ``in`` on a Python container (``mode in ("a", "b")``, a dict of kwargs): a literal
  container is left alone; any other container must be a tensor where the test runs
  (``membership-any``, observed on the example run: refuted for a list, and for a tensor
  subclass, which may override ``__contains__``).
* The element: ``Tensor.__contains__`` raises RuntimeError for an element that is neither a
  tensor nor a number (``None``, a string), where ``(v == t).any()`` would raise another
  error or none: the element must be a tensor or a number on the example run.
* ``torch.where`` runs both sides: every screen of the predicated rule applies (effects,
  raising sides, non-finite gradients) and its decline is reported with the membership.
* An ``elif`` chain: each test that is one membership becomes its tensor predicate too
  (one ``membership-any`` each), and the verifier forces every test of the chain both ways.
* A branch that only raises (``if v in t: raise E(msg)``) is no selection: it goes to
  predicated validation's form (``torch._assert_async`` behind its CPU guard, the original
  raise as the fallback, ``E(msg)`` restored at the boundary), with its obligations and
  ``membership-any``; a formatted message declines, naming both reasons. The test is
  ``((v == t).any() if type(t) is torch.Tensor and (type(v) is torch.Tensor or type(v) in
  (int, float, bool)) else v in t)``: helper-59 found the bare ``(v == t).any()`` raised
  AttributeError for a list container and compared a numpy or ``None`` element where
  ``__contains__`` raises. Its operands are read twice, so each must be a name or an attribute
  chain; the verifier does not encode the conditional (``raises-iff-original`` and
  ``condition-is-tensor`` are unknown: declined at ``--verify strict``). The restored exception
  is raised outside the restoring handler, so its ``__context__`` is eager's (the exception a
  caller's ``except`` block was handling, if any; since 2026-12-06).
* Not taken: a membership combined with other tests (``v in t and h.sum() > 0``), a
  membership whose Python bool is returned or stored (``return token in ids``: its callers
  would get a tensor), a membership inside a loop (the frame is skipped).
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.predicated_control_flow import RULE as _PCF
from mend.rules.predicated_validation import RULE as _PV
from mend.rules.tensor_membership.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.tensor_membership.rewrite import alternatives, rewrite
from mend.rules.tensor_membership.screen import NAME, match

FIX_SAFETY = """\
Unsafe (applied with --unsafe-fixes): the rewrite rests on the operand types observed on
the example run (``membership-any``): the container is a tensor and the element a tensor or
a number, so ``v in t`` is the truth of ``(v == t).any()`` by the installed torch's
``Tensor.__contains__`` (a screen of its source). A later call with a list container or a
string element would behave differently.

Everything else is the predicated rule's (predicated validation's, for a branch that only
raises): its obligations on the branch with the predicate
``(v == t).any()`` (shapes, dtypes, values under IEEE semantics, gradients) and its
differential test, which forces both outcomes of the original ``if``.
"""

RULE = Rule(
    name=NAME,
    categories=("item-tolist",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=_PCF.obligation_kinds | _PV.obligation_kinds | {"membership-any"},
    required_kinds=_PCF.required_kinds | _PV.required_kinds | {"membership-any"},
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
    alternatives=alternatives,
)

__all__ = ["NAME", "RULE", "alternatives", "match", "rewrite"]
