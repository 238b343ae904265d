"""Rule: tensor checks that read the condition on the host (issue 10, kind 1).

``torch._check_tensor_all(cond)`` evaluates ``cond._is_all_true().item()``: on torch 2.13
Dynamo traces it into ``Tensor.item()`` and breaks the graph. transformers 5's
``torch_compilable_check`` (``transformers/utils/import_utils.py:1993``) calls it on the
branch taken only while tracing, so one shared line breaks most vision-language models
(llava, paligemma, qwen2_vl; measured 4 -> 1 graphs on paligemma by hand).

The rewrite keeps the check in the graph::

    if isinstance(cond, torch.Tensor) and cond.dtype == torch.bool and cond.device.type == 'cpu':
        torch._assert_async(cond._is_all_true(), "<torch's default message>")
    else:
        torch._check_tensor_all(cond)

The check may also be spelled by the name a top-level ``from torch import _check_tensor_all
[as NAME]`` binds (the fallback keeps that spelling; the new calls use the module's ``torch``,
and a module without ``import torch`` is declined).

The device test keeps the original call off the CPU: on CUDA ``_assert_async`` is a
device-side assert without the message, and on the meta device the original raises ("cannot
be called on meta tensors") where ``_assert_async`` passes (helper-47).

``torch._assert_async(t, msg)`` raises ``RuntimeError(msg)`` in eager and under the eager,
aot_eager and inductor backends (measured on CPU, torch 2.13), and ``_check_tensor_all``
without a message raises ``RuntimeError`` with ``torch._check_with``'s default text: the
same exception, same message. The guard is decided by Dynamo at trace time (dtype and type
are guarded), so it adds no break; a condition that is not a bool tensor keeps the original
call and its ``TypeError`` (the naive ``_assert_async(cond.all())`` would pass silently on
an int64 tensor of ones: the trap). The rewrite lands in a shared library file, which the
import overlay serves to every model that imports it.

``_is_all_true()`` is the reduction ``_check_tensor_all`` itself uses (a tensor subclass may
override ``all()``).

Compiled, a failing check inside the graph surfaces only when the graph has run: state
written before it in the same graph is lost (aot_eager, inductor), state written after it
may happen anyway (inductor), and a ``try`` around it no longer catches it (found by an
adversarial review). So the rule declines a check in a function that changes any state
(the static screen predicated validation uses), inside a ``try``, a non-torch ``with`` or a
loop; under a grad-mode context (``with torch.no_grad()``, ``@torch.no_grad()``: failing inside
the graph, it left grad mode off for the process under the eager backend, helper-50); where a
function or method it calls changes state, or a caller in the same module wraps the call in a
``try``/``with`` or changes state itself (``mend/rules/_in_graph_checks.py``; helper-47 and
helper-50). Callers in other modules are covered by the state observation of the example run
only (an assumption recorded with ``state-unchanged-on-raise``), and the differential test
compares the Python state a call leaves outside the module too (``verifier/pystate.py``).

A condition that is not a plain local name (an expression; an attribute may be a property)
is bound to the local ``_mend_check_cond`` (``_mend_check_cond_2``, ... for a later check of the
same function) on the line before, evaluated once where the call
evaluated it (the rewrite reads the condition three times); the verifier re-checks that the
local is bound to the call's expression right before the check. A message callable
``lambda: "<constant text>"`` becomes the message (its text is known); the fallback keeps it.
So does ``lambda: f"... {self.vocab} ... {self.config.name!r}"`` (helper-78's c01), fields of
``self.<a>`` or ``self.<a>.<b>`` without a format spec: it is formatted inside the graph under a
guard on each attribute's exact type (``type(self.vocab) in (int, bool)``), whose formatting runs
no user code and cannot raise; Dynamo folds it to a constant and guards the values (measured on
torch 2.13: one graph, a changed value recompiles with the new text). Another type keeps the
original call: a str is pasted into inductor's C++ unescaped (a backslash garbled the message, a
quote failed the compile) and a float may be traced as a symbolic float the f-string cannot format
(helper-82). Each attribute must also be read by the function outside the message, so the message
adds no guard the compiled function lacks (a step counter read only there recompiled at every
call, helper-82). The verifier's probes give each attribute an int, str, float, bool, a
list, None, a tensor and an int subclass whose formatting raises (a check that passes must not
format it). The mended check reads the attributes on every call where the original read them only
on failure: that they exist is observed on the example run.

Also declined: any other message callable (its text exists only when the check fails), a
keyword condition, a function that reads its own locals (``locals()``...), other statements
or a comment on the line.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.tensor_check.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.tensor_check.rewrite import rewrite
from mend.rules.tensor_check.screen import DEFAULT_MESSAGE, NAME, match

FIX_SAFETY = """\
An unsafe fix (applied with ``--unsafe-fixes``): it rests on the observed module state and
devices of the example run, and on probe runs of the installed torch. Emitted after verification; needs no runtime: the mended check raises the original
RuntimeError with the original message, in eager mode and compiled. On CUDA
``_assert_async`` is a device-side assert (its message dropped, pytorch#131491), so the
rewrite is only emitted when the tensors at the check are on the CPU (``cpu-only``).

Resting on checks, not on a solver: for every probe condition (empty, all true, one
false, 0-d, 2-d bool tensors; an int64 tensor; a Python bool) the mended construct and
``torch._check_tensor_all`` raise the same exception type and message, or both pass,
observed on the installed torch (``check-equivalent``); the forward changes no module
state, observed in eval and training mode (``state-unchanged-on-raise``, required at every
level: a check inside the graph may let a later state update run before it fails); the
tensors at the check are on the CPU (``cpu-only``, observed); the file holds no other in-graph
check (``first-failure-wins``, a static count: inductor reported the later of two checks of one
graph that failed on the same call, helper-93, so a second check in the file declines).

Never inference-only: a check has no gradient.
"""

RULE = Rule(
    name=NAME,
    categories=("tensor-check",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"check-equivalent", "state-unchanged-on-raise", "cpu-only", "first-failure-wins"}),
    required_kinds=frozenset({"check-equivalent", "state-unchanged-on-raise", "cpu-only"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["DEFAULT_MESSAGE", "NAME", "RULE", "match", "rewrite"]
