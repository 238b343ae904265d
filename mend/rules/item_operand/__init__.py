"""Rule: a scalar read whose number only meets tensors -> keep it a 0-d tensor (issue 10, kind 2).

::

    n = mask.sum().item()              n = mask.sum().item() if <autocast on> else mask.sum().detach().reshape(()).clone()
    return pooled / n          ->      return pooled / n

(``<autocast on>`` is ``torch.is_autocast_enabled(d)`` for d in cpu, cuda, xpu, mps, or
``torch.get_default_dtype() != torch.float32``: the proofs type a Python float as float32. The whole
is the else side of ``T.item() if torch.jit.is_scripting() else (...)``, so that
``torch.jit.script`` of the mended module compiles the original read.)

``Tensor.item()`` moves the value to the host as a Python number: a graph break on torch
2.13 ("Unsupported Tensor.item() call with capture_scalar_outputs=False"), and a device sync.
When every later use of the number is an operand of ``+ - * / // %`` or of one comparison
whose other operand is a tensor, the number never reaches Python code: the rewrite keeps it
a tensor, outside ``torch.autocast``. It is *detached* (a Python number carries no
gradient), *0-d* (a 1-element tensor of rank >= 1 would broadcast) and *copied* (an in-place
write to ``T`` after the read must not change it, as it cannot change the number). This is host-count-reduction's 0-d count,
generalised to any scalar read.

What makes it exact (proof obligations, discharged by ``verifier/encoders/item_operand.py``):

* ``item-operand-tensor`` (check, observed): ``T`` is a torch.Tensor with exactly one element
  where the read runs, on every hit and call (a NumPy scalar's ``.item()`` would not be
  rewritable; ``reshape(())`` raises where ``.item()`` does, with another message);
* ``item-operand-keep-type`` (Z3, dtype model): every use has the same result dtype with the
  Python number (ATen types it as its category's default: float32, int64 or bool) and with
  a 0-d tensor of ``T``'s dtype, and the devices combine. Refuted: ``int32 tensor * x`` with
  ``x`` from a float64 ``T`` (float32 with the number, float64 with the 0-d tensor); a 0-d
  int32 operand meeting an int64 read (int32 against int64); a CUDA ``T`` meeting a CPU tensor;
* ``item-operand-exact`` (Z3, IEEE): where a use computes in float16 or bfloat16, every value
  of ``T``'s dtype converts to it exactly. Kernels there may compute in float32 from a Python
  scalar's original value while a 0-d tensor on the device is cast to float16 first (two
  roundings): ``h_fp16 * x`` with ``x`` from a float32 ``T`` is refuted (0.1). For float32,
  float64 and integer common dtypes both operands are converted once, identically.

A count of ``nonzero``'s rows bound to a name (``n = len(T.nonzero())``, ``T.nonzero().shape[0]``,
``T.nonzero().size(0)``, ``torch.nonzero(T)`` alike; ``as_tuple=False`` at most) is the number of
nonzero elements of T, a Python int: Dynamo breaks at ``nonzero`` (a data-dependent output shape),
and the taxonomy files the site under item-tolist. It is read as ``torch.count_nonzero(T).item()``
(the same count, NaN counted, ±0.0 not; PyTorch's docs of both operators) and takes the same
screen and obligations, so ``torch.count_nonzero(T)``, a 0-d int64 tensor, is kept. ``as_tuple=True``
(one tensor per dimension: ``len`` is the rank), ``.shape[1]`` and a module that rebinds ``len``
are left alone; a T that is not a torch.Tensor (a NumPy array's ``nonzero()`` is a tuple) fails
``item-operand-tensor``. ``item-operand-exact`` knows the count lies in 0..numel(T) when T is a
name with observed sizes (tier ``observed``): every count of a 2048-element T is exact in
float16, a 2049-element T's count 2049 is the counterexample (helper-66 had been shown a negative
one).

``x = int(T.item())`` is read as ``x = T.item()`` (helper-73's c08): for an integer T (not bool)
``int()`` returns the int ``.item()`` gives; ``item-operand-tensor`` refutes a float T (int()
truncates toward zero and raises on NaN and inf) or a bool T (0 or 1) from the observed dtype.

A number a tensor test chooses, ``x = A if P else B`` or its statement form ``if P: x = A`` /
``else: x = B`` with A and B numeric literals of one kind (helper-72's b05: ``scale = 0.1 if
h.mean() > 0 else 0.3``), breaks the graph at ``bool(P)`` (a data-dependent branch; the taxonomy
files it there, and this rule serves that category too). Under the same screen of its uses it
becomes ``torch.where(_mend_p.reshape(()).bool(), torch.tensor(A, dtype=D), torch.tensor(B, dtype=D))
if type(_mend_p := P) is torch.Tensor and _mend_p.numel() == 1 else (A if _mend_p else B)``:
``bool`` of a one-element tensor is ``!= 0`` with NaN true, as the ``.bool()`` cast gives, and a
test that is a Python value at run time (``flag and t > 0`` with the flag off, a float argument:
helper-74) takes the original choice. The statement form keeps its lines: the ``if`` becomes
comments and the statement sits on its last line (warnings and log records name lines).
D is int64 for ints, float32 where both floats are float32 values, else float64 (a Python
float is a double; ``torch.where(P, 0.1, 0.3)`` would be float32 and round 0.1: the trap). The
same obligations apply, with P as the read tensor (``item-operand-tensor``: one element) and
D as the kept dtype; ``item-operand-exact`` is proved over the literals. A 0-d float32
loss times a chosen 0.1 is refuted (two 0-d tensors promote to float64); the statement form
with a comment inside, or a test over several lines, is declined. TorchScript cannot parse ``:=``:
``torch.jit.script`` then compiles the original module (reported; TorchScript is deprecated). An ``if``/``elif``/``else`` chain
(or ``A if P else B if Q else C``) becomes nested ``torch.where``: every test then runs, so
each ``elif`` test must be one comparison of names, attributes and numeric literals (it runs no
code of its own), and each test is observed to be a one-element tensor; an ``elif`` is never
rewritten apart from its chain.

A read used in place (``return logits / self.log_t.exp().item()``, held-out review case 307)
becomes ``logits / (self.log_t.exp().item() if <autocast on> else self.log_t.exp().detach().reshape(()).clone())``
on its own line, under the
same screen of its one use and the same obligations; a line with several ``.item()`` reads
is declined.

Inside ``torch.autocast`` the read stays ``.item()`` (the original, with its graph break): there
a use may compute in bfloat16/float16 where the dtypes were observed in float32, and Inductor
casts a 0-d float32 operand to bfloat16 before comparing where eager reads the Python number's
value (helper-35: 86 of 262144 comparisons differed). Dynamo folds the test to a constant and
guards autocast's state and the default dtype (torch 2.13's GLOBAL_STATE guard), so each side compiles on its own; the
differential test runs both models under ``torch.autocast(<device>, bfloat16)`` too, eager and
Inductor.

The screen (static) takes ``x = T.item()`` only as a whole statement in a function, with
``x`` a plain local bound nowhere else (not a parameter, not global/nonlocal, not captured
by a nested function or class, no ``locals()``/``eval``...), and every read of ``x`` a direct
operand of one such operator or comparison whose other operand is no literal and does not
read ``x``, alone on its line, outside ``and``/``or``/``if-else``/comprehensions. Declined,
with the reason, when a read is anything else: returned, passed to a call (a size, a
format), stored, compared in an ``if``/chained comparison, an index or slice bound (the
break would move, not go), ``x ** v`` (pow's Python-scalar fast paths: ``sqrt`` for 0.5
gives -0.0 where pow gives +0.0), ``x / v`` (``Tensor.__rtruediv__`` computes
``v.reciprocal() * x``: two roundings where ``torch.div`` has one), or meets a Python
literal (``h / (x + 1e-6)``: the sum would be done in float64 by Python, in ``T``'s dtype
by torch).
"""
from __future__ import annotations

from mend.rules._base import Decline, Match, RewriteResult, Rule
from mend.rules.item_operand.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.item_operand.rewrite import rewrite
from mend.rules.item_operand.screen import CATEGORY, NAME, match

FIX_SAFETY = """\
An unsafe fix (applied with ``--unsafe-fixes``): ``item-operand-tensor`` is an observation of
the example run (the read tensor has one element), and the dtype and exactness proofs are
over the dtypes and devices observed where each use runs (tier ``observed``). A documented
difference: the value is a 0-d tensor instead of a Python number, which only the screened
uses (tensor operands) read; inside ``torch.autocast`` the original ``.item()`` runs. Not
matched: under Inductor in training, AOTAutograd gives the original a zero gradient for ``T``'s
inputs where eager (and the mended code, compiled or not) gives None (helper-35; Inductor's own
departure from eager, which the mended code does not reproduce).

Proved by Z3 over the observed facts: each use's result dtype is unchanged
(``item-operand-keep-type``) and, where a use computes in float16/bfloat16, the read's value
is exact there (``item-operand-exact``). Checked, not proved: ``T`` is a one-element tensor
(``item-operand-tensor``). Gradients: none flow through the value in either version (the
kept tensor is detached); the differential test compares them.
"""

OBLIGATION_KINDS = frozenset({"item-operand-tensor", "item-operand-keep-type", "item-operand-exact"})

RULE = Rule(
    name=NAME,
    categories=(CATEGORY, "data-dependent-branch"),   # a Python number a tensor test chooses
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=OBLIGATION_KINDS,
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["CATEGORY", "DECLINE_EXAMPLES", "FIX_EXAMPLES", "NAME", "NOOP_EXAMPLES", "RULE", "Decline", "Match",
           "RewriteResult", "example_line", "match", "rewrite"]
