"""Rule: dead or debug-only host work in forward (issue 10, kind 8).

Measured on torch 2.13 (CPU) with ``torch._dynamo.explain`` and ``fullgraph=True`` on tiny
modules; only what breaks is rewritten:

==========================================  ==============================================  =========
construct                                   break on torch 2.13 (gb_type)                   verdict
==========================================  ==============================================  =========
``torch.jit.isinstance(x, T)`` (any T)      Attempted to call function marked as skipped    rewritten
                                            (torch.jit is in Dynamo's MOD_SKIPLIST)         for plain T
``r = repr(t)``                             repr() on tensor                                rewritten
``r = str(t)``                              Failed to trace builtin operator                when r is
                                                                                            never read
``r = f"{t}"``                              none (traces)                                   --
``r = f"...{t!r}..."``                      repr() on tensor                                as repr(t)
``r = f"{repr(t)}"`` read under a flag      repr() on tensor                                under flag
``p = np.random.uniform(0, 1)``             Data dependent operator (torch._numpy's         declined
                                            ``.item()``; in a layer loop: frame skipped)
``p = random.uniform(0, 1)``                none in eval; Data-dependent branching on       declined
                                            ``p < layerdrop`` in training (other category)
``signature.bind(self, *a, **kw)``          none in a tiny module; on llava (hf:newest):    rewritten
                                            mapping proxy affected by dictionary mutation   to a checked
                                            (inspect.py:3081, after a kwargs mutation       lookup that
                                            earlier in the trace; the frame is skipped)     falls back
==========================================  ==============================================  =========

**torch.jit.isinstance -> isinstance.** ``torch._jit_internal._isinstance`` (torch 2.13)
recurses into a tuple target, checks element types of anything with a ``typing.get_origin``
(``List[int]``, ``Optional[T]``, ``Dict[K, V]``) with ``container_checker``, raises
RuntimeError for a raw ``list``/``dict``/``tuple``/``typing.List``... and for a target that is
itself a ``collections.abc.Container`` but not a tuple (an Enum class: ``EnumMeta`` defines
``__contains__``), and otherwise returns ``isinstance(obj, target_type)``. So the rewrite is
exact only for a target that is a plain class, or a tuple of plain classes: the rule admits a
fixed list (``int float bool str bytes complex`` not rebound in the module, and ``torch.Tensor``,
``torch.nn.Module``, ``torch.nn.Parameter``, ``torch.device``, ``torch.dtype``, ``torch.Size``,
``torch.Generator``) and declines typing generics, raw containers (also inside a tuple: the
recursion reaches them only for some objects) and every other name (it may be an Enum or a
typing alias). It declines where ``isinstance`` itself is rebound in the module.

**Unused repr(t) / str(t).** ``r = repr(t)`` whose ``r`` is never read (no load, ``del``,
``global``/``nonlocal``, nor ``locals()``/``vars()``/``eval``/``exec``/``sys._getframe`` in the
function, nested functions included) becomes::

    if type(t) is not torch.Tensor or t.layout is not torch.strided or t.is_nested or t.dtype not in (<12 dtypes>):
        r = repr(t)

An f-string whose every field is ``{t!r}`` or ``{t!s}`` of one local ``t`` (no format spec,
no ``=``) is the same text, ``repr(t)``/``str(t)`` between constants, and is taken alike
(helper-68's c29). The dtypes are those whose repr formats without raising or warning (float16/bfloat16/32/64,
complex64/128, uint8, int8/16/32/64, bool): a bits8 or uint1..uint7 tensor's repr raises
NotImplementedError, complex32's warns (helper-70). Declined too: a module that star-imports
(``type`` or ``torch`` may be rebound) or can read a caller's locals anywhere (a frame attribute
such as ``sys._getframe(1).f_locals``, ``inspect.stack``, an introspection builtin: a helper
the forward calls would see the local; helper-70); a callee in another module doing so is an
assumption, recorded. For an exact ``torch.Tensor``, ``Tensor.__repr__`` formats under ``no_grad`` and writes no
state, and its text is never read, so skipping it changes nothing; the guard is decided by
Dynamo at trace time (no break). A tensor subclass (whose ``__repr__`` may have effects: the
trap), a Parameter or a non-tensor still runs the original statement. ``t`` must be a plain
local name (an attribute may be a property, which the guard would read twice). A repr whose
text is printed or logged is the deferred-side-effects rule's job: declined here.

**A debug text read only under a flag** (helper-92's c30): ``r = <text of t>`` followed
directly by ``if <flag>:``, with ``r`` read only inside that ``if``'s body (not its test, not
its ``else``, nowhere else in the function, no ``locals()``). The text is ``repr(t)``/``str(t)``
or an f-string whose fields are ``{t!r}``/``{t!s}``, ``repr(t)``, ``str(t)``, ``t.shape``,
``tuple(t.shape)``/``list(t.shape)``, ``t.dtype``, ``t.device``, ``t.ndim``, ``t.size()``,
``t.dim()``, ``t.numel()`` of one tensor local, with no format spec (``{h:.2f}`` raises for a
tensor of several elements); the flag is a name or attribute chain, or ``not``/``and``/``or``
of them (a call may have effects the moved text would see), whose attributes no class of the
module defines as a method, property or other non-literal class-level value, nor overrides
``__getattr__``/``__getattribute__`` (helper-90: a property flag that set print options changed
the text; a class in another module is an assumption)::

    if <not a plain tensor: the repr guard above>:
        r = <text of t>            # as before, before the flag
    if <flag>:
        if not (<the same guard>):
            r = <text of t>        # a plain tensor: computed where it is read
        <the body, as written>

With the flag false Dynamo decides both guards at trace time: no break. The verifier's
``debug-text-deferred`` rebuilds the expected function from the original and compares the
mended one whole; the differential test forces the flag both ways (stdout compared).

**Declined: RNG drawn every call, used only under ``self.training and ...``** (a LayerDrop
written with ``np.random``/``random``). Moving the draw under ``if self.training`` leaves the
global NumPy/Python random stream one draw behind per layer and call in eval: any later
consumer of that stream (data augmentation, sampling, a seeded test) sees different numbers.
That is an observable change, not a fix; shared case 047 (the Python-random LayerDrop) is
recorded as not fixable for the same reason. Transformers' PyTorch models already write the
draw as ``if self.training: p = torch.rand([])``, which is the hand fix.

**``inspect.Signature.bind`` in a decorator's hot path** (transformers 5.24
``select_hidden_states``, ``output_capturing.py:298``; the break is in the stdlib's
``inspect.py``, located at the caller's line): bind iterates the signature's parameter
mappingproxy, which Dynamo refuses after any dict mutation earlier in the trace. bind also
validates the call (too many positional arguments, unknown or duplicate keywords, missing
required ones) and raises its own TypeError, so a plain lookup would not do. The rewrite reads a
table from the signature once, where the decorator runs (``_mend_bind_<S> =
_mend_bind_table(S)`` after ``S = inspect.signature(F)``), and at the call asks
``_mend_bound(table, K, (self, *args), kwargs, _MEND_UNBOUND)`` for ``arguments[K]``. The lookup
answers only calls it can show bind accepts: no more positional arguments than positional
parameters, no keyword that duplicates one, names no parameter (without ``**kwargs``) or names a
positional-only one, and every required parameter given. It answers with exactly what bind
puts there (the keyword, the positional argument, or the default). Every other call runs the
original ``bind``/``apply_defaults``/``arguments[K]`` unchanged, its TypeError included.
Shape screen: ``A = S.bind(<names>, *<name>, **<name>)``, then ``A.apply_defaults()``, then one
statement reading ``A.arguments[K]`` once (``K`` a name or string); ``A`` used nowhere else;
``S`` bound once in the enclosing function by ``inspect.signature(...)`` and not rebound in the
wrapper. Without ``apply_defaults`` (a defaulted argument is then missing, a KeyError), with a
keyword argument to bind, or with the signature computed at the call, it declines.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.dead_host_work.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.dead_host_work.rewrite import flag_line, rewrite
from mend.rules.dead_host_work.screen import NAME, match

FIX_SAFETY = """\
Emitted after verification; needs no runtime: each rewrite removes host work whose result is
the same (torch.jit.isinstance of a plain class is builtin isinstance) or never read (the repr
of a plain tensor), in eager mode and compiled, for training and inference.

Resting on screens, not on a solver (all ``checked``): the target of ``torch.jit.isinstance``
is a plain class on the installed torch (a type or tuple of types, no ``typing.get_origin``,
not a raw container, not a ``collections.abc.Container``) and the installed
``torch._jit_internal._isinstance`` is the implementation reviewed for torch 2.13 (its source
hash), and builtin ``isinstance`` is not rebound in the mended module
(``jit-isinstance-plain``); the assigned local is never read in the function, nested scopes
and frame introspection included (``local-never-read``); the mended guard is exactly
``if type(t) is not torch.Tensor:`` around the original statement, and the installed
``Tensor.__repr__``/``torch._tensor_str`` are the ones reviewed (``plain-tensor-repr-pure``).

The bind lookup rests on a check, not a proof (``bind-lookup-agrees``): the two helpers, taken
from the mended file, agree with the installed ``inspect.Signature.bind`` on every signature of
up to four parameters of every kind and every call of up to one extra positional argument and
two keywords (verifier/encoders/bind_lookup.py); the mended call site falls back to ``bind``
when the lookup returns the sentinel.

Assumed, not checked: no TorchFunctionMode/TorchDispatchMode that observes the formatting
ops of a repr is active around the forward (with one, the original's repr is visible to the
mode, the mended code's is not). Never inference-only: neither rewrite touches a gradient.
"""

RULE = Rule(
    name=NAME,
    categories=("debug-host-work",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"jit-isinstance-plain", "local-never-read", "plain-tensor-repr-pure", "debug-text-deferred",
                                "bind-lookup-agrees"}),
    required_kinds=frozenset({"jit-isinstance-plain", "local-never-read", "plain-tensor-repr-pure", "debug-text-deferred",
                              "bind-lookup-agrees"}),
    needs_facts=False,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
    forced_line=flag_line,
)

__all__ = ["NAME", "RULE", "match", "rewrite"]
