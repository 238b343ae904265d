"""Rule: int buffers of a module used as Python numbers (issue 10, kind 2, the buffer form).

transformers 5.x ``EncodecConv1d`` (``modeling_encodec.py:82``; mimi, pocket_tts's tokenizer
and others copy it) keeps its stride, effective kernel size and total padding as 0-d int64
buffers made from Python ints in ``__init__``, computes the padding in ``forward`` with them,
and ``_pad1d`` branches on it (``if length <= max_pad``) and pads with it: a tensor read back
on the host at every conv layer (hf:newest/encodec: 27 of its 28 breaks, 29 graphs). The
same numbers as Python ints give the same pads with no host read.

``torch.tensor(E)`` without a dtype is taken too: int64 for an int ``E``; any other ``E`` fails the
twins' ``type(v) is int`` check at run time and the original body runs (helper-100 m41).
A buffer registered inline, ``self.register_buffer("B", torch.tensor(E, dtype=torch.int64),
persistent=False)`` (or ``nn.Buffer(...)`` of it), with no local, is taken as if written with one:
its twin ``_mend_int_inline_B = E`` is made on the line before, and the registration reads it.

The rewrite keeps the buffers (a user may read them, ``state_dict`` does not see them) and
adds Python **twins** computed from the same expressions, once, in ``__init__``::

    _mend_int_stride = self.conv.stride[0]
    stride = torch.tensor(_mend_int_stride, dtype=torch.int64)
    ...
    _mend_int_exact = all(type(v) is int and -2**15 < v < 2**15 for v in (_mend_int_kernel_size, _mend_int_stride))
    self._mend_int_stride = _mend_int_stride if _mend_int_exact else None
    self._mend_int_padding_total = _mend_int_kernel_size - _mend_int_stride if _mend_int_exact else None
    self._mend_int_ok = _mend_int_exact and self._mend_int_stride >= 1

``forward`` starts with ``if not torch.jit.is_scripting(): if type(self) is C and getattr(self,
"_mend_int_ok", False): return self._mend_int_forward(...)`` (TorchScript compiles only the other
side of ``is_scripting()``, so ``torch.jit.script`` still takes the original), a **mirror**: a copy of ``forward`` (and of every method it
calls that reads a buffer) reading the twins where the original reads the buffers. The
original body stays for a module whose twins are not exact ints, and for a subclass (which
may override what the mirror calls). Dynamo folds both tests at trace time.

The float32 ceil of a ratio (``torch.ceil((length - k + p) / s + 1).to(torch.int64)``) becomes
the exact ``-(-(length - k + p) // s) + 1`` under the guard ``|a| < 2**22 and 0 < s <= 64``
and a float32/float64 default dtype, where ``proofs/cb_ceil_ratio.smt2`` shows the two
equal; outside it, the mirror reads the original's own value (``int(torch.ceil(...))``:
exact, and a graph break, as before). The ratio's own statement is dropped from the mirror
(the screen made sure nothing else reads it).

Traps, and how each is handled:

* **a buffer written after construction** (``self.stride.fill_(2)``, an assignment, ``del``,
  ``.data``, ``setattr``/``getattr`` by name, an ``_apply`` override): the twin would go
  stale. Any such write in the module declines (static screen, again in the verifier);
  writes from outside the module are an assumption stated in the certificate.
* **a 0-d tensor is not an int everywhere**: the mirror is taken only where every use of a
  buffer value is ``+ - *``, ``// k``, unary ``-``, ``max``/``min``, a comparison in an
  ``if`` test, a slice bound, ``F.pad``'s pad tuple, a ``return``, or a parameter of another
  method of the class typed the same way. A tensor operand (promotion, broadcasting), an
  index (``x[t]`` is advanced indexing: a copy; ``x[i]`` a view), an attribute read
  (``.device``), a call outside the class, a loop, ``with`` or ``try`` decline.
* **int64 wraps, Python ints do not**: every number the mirror computes is proved within
  int64 for twins below 2^15 and sizes below 2^44 (``int-terms-in-range``).
* **float32 rounding**: above 2^24 the ceil of a float32 ratio differs from exact ints
  (length 16,777,217 pads -1, the exact form 1): the guard keeps the exact form to
  |a| < 2^22, where the lemma holds, and reads the original's value beyond.
* **twins that are not ints** (a float, a bool, a numpy int, a tensor ``E``):
  ``torch.tensor(2.7, dtype=torch.int64)`` truncates; the twins are then ``None`` and the
  original runs.
* **a subclass** overriding a mirrored method: ``type(self) is C`` sends it to the
  original; an attribute assigned with a mirrored method's name anywhere in the module (an
  instance attribute shadowing it) declines. A method replaced on one instance from outside the
  module is an assumption stated.
* **transformers 5 re-sets the buffers** in ``_init_weights`` (``init.copy_(module.stride,
  stride)``, from the same expressions as ``__init__``): allowed when the value written, its
  locals substituted, is the very expression ``__init__`` registered; any other value declines.
* **a buffer that escapes** (mimi's streaming cache appends ``padding_total`` to a list) goes to
  code the screen does not follow: ``int-buffers-unwritten`` is then unknown and the fix
  **unsafe** (applied only with ``--unsafe-fixes``).

Found by an adversarial review and declined since (``tests/fixtures/constant_buffer_review/``):
``int / buffer`` (``Tensor.__rtruediv__`` is ``reciprocal(s) * a``: two float32 roundings, so a
ratio needs a tensor numerator); a buffer compared with a float (float32 in the original) or a
0-d uint8 tensor (the int wraps, the int64 tensor does not); a ratio put in a tuple or passed to
a method; a method called on a buffer value (``self.k.item()``); the ceil of a ratio anywhere
but ``n = torch.ceil(n).to(torch.int64) [+- k]`` on the statement after the ratio (an in-place
``x.transpose_()`` between them changes ``x.shape``); the buffer's tensor local aliased or
written in ``__init__`` (``nn.Buffer`` shares its storage); ``self.buffers()``/``_buffers``; a
helper of one's own named ``...Buffer``; a positional-only ``forward`` (now passed on right).
A second review found 27 more (``tests/fixtures/constant_buffer_review2/``), all declined now:
aliases of a buffer written in place (``limit = self.max_len; limit -= m``), kept as a second
handle (``self._limit = self.max_len``) or registered as a view; ``copy_`` of a parameter that
happens to be named like ``__init__``'s; ``out=`` a buffer; ``getattr`` by a computed name,
``vars(m)["_buffers"]``, a global buffer-registration hook, ``Module.type()`` in the module, a
base in the module overriding ``register_buffer``; a buffer inside an f-string, a set, a dict
or as a key; a ``return`` inside ``with``, a generator, a closure; a literal beyond int64; a
ratio whose numerator calls a function (the fallback evaluates it again) or that gets two
offsets (each float32 addition rounds); a class not at the module's top level, a class-body
alias of a method, a local ``import torch``, a local named like the rewrite's own names.
A third review found 14 more (``tests/fixtures/constant_buffer_review3/``), declined now or, for
an escape, unsafe: ``type``/``all`` bound where the rewrite calls them, the class name rebound or
decorated, the class patched from outside, an ``init.constant_`` re-reading an attribute the
module changes, a re-set through a bfloat16 tensor or a function of the module's own named
``copy_``, a mangled ``__name``, an instance attribute shadowing a method the mirror calls, an
alias through a factory's result, a numerator reading a local (the fallback would divide an int),
size arithmetic overflowing int64 (now in the range proof).
A fifth review, of the inline form (helper-58, ``tests/fixtures/constant_buffer_review5/``), found
seven rewrites that changed behaviour through the older screens, declined now or, for an escape,
unsafe: a holder the screen did not see (``self.a, self.b = Conv(), Conv()``, ``enc = Conv();
self.enc = enc``, ``self.add_module("enc", ...)``, an annotated assignment); a write through an
alias by subscript (``p = cfg.padding_total; p[...] = 0``, a config-like name too), ``out=`` or an
in-place function; an attribute ``__init__`` reads changed through an alias (``conv = self.conv;
conv.stride = (s,)``, ``sizes = self.sizes; sizes[0] = k``) before an ``init.constant_`` re-set;
``locals()``/``eval`` in a mirrored method. A value spanning lines, a buffer name that is no
identifier (a crash) and a positional ``persistent=False`` (a needless decline) are handled.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.constant_buffer.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.constant_buffer.rewrite import rewrite
from mend.rules.constant_buffer.screen import CATEGORY, NAME, match, plan_for, takes

FIX_SAFETY = """\
Emitted when every obligation is established: every number the mirror computes is proved
within int64 (Z3), the ceil of each ratio rests on a lemma proved once by Z3
(``proofs/cb_ceil_ratio.smt2``, over reals under the IEEE rounding bound), and the guards
those proofs assume and the buffers' constancy are checked by static screens of the mended
module; the differential test compares outputs and gradients.

Proved by Z3: ``int-terms-in-range`` -- each ``+ - *``, ``// k``, ``max``/``min`` and ceil the
mirror computes lies within int64 for twins in (-2^15, 2^15) and sizes in [0, 2^44], so the
original's int64 tensors compute the same numbers.

Resting on checks: ``ceil-ratio-exact`` (the guard's domain, |a| < 2^22, s in [1, 64],
offsets within [-8, 8], float32 and float64, is inside the lemma's; the lemma is cross-checked
by enumerating every (a, s) with torch in ``tests/test_constant_buffer.py``),
``int-guards-emitted`` (a static screen: the twins' int and range check, the divisors'
``>= 1``, the dispatch in ``forward`` and each ratio's guard are in the emitted code, and
each twin is, through ``__init__``'s locals, the very value its buffer is registered from,
which is the original's), and
``int-buffers-unwritten`` (a static screen: no statement of the module writes a twinned
attribute after ``__init__``).

Assumed, and stated in the certificate: code outside the module (a caller, a subclass in
another file, ``Module.type()``, ``to_empty()``, ``torch.func.functional_call``, loading on the
meta device) does not change the buffers or replace a mirrored method on an instance; the
attributes the twins are computed from keep their values until ``_init_weights`` re-sets the
buffers; tensor sizes stay below 2^44; eager division is IEEE on every device. Where a buffer
escapes to code the screen does not follow, ``int-buffers-unwritten`` is unknown and the fix
is **unsafe**. The typing of the mirror (which uses of a buffer are
number-like) is the rule's static analysis; the differential test is the independent
check of it.

Never inference-only: the twins carry no gradient (the buffers are integers).
"""

KINDS = frozenset({"int-terms-in-range", "ceil-ratio-exact", "int-buffers-unwritten", "int-guards-emitted"})

RULE = Rule(
    name=NAME,
    categories=(CATEGORY,),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=KINDS,
    # int-buffers-unwritten may be unknown (a buffer escapes to code the screen does not follow):
    # the fix is then unsafe, not declined
    required_kinds=KINDS - {"ceil-ratio-exact", "int-buffers-unwritten"},
    needs_facts=False,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["CATEGORY", "NAME", "RULE", "match", "plan_for", "rewrite", "takes"]
