"""Rule: predicated validation (GraphMend paper §4, "[Trap]").

``if <tensor cond>: raise E(msg)`` and a tensor ``assert cond, msg`` become one
``torch._assert_async`` inside the graph. The original exception is kept, verbatim, in a
module-level table of factories (``_MEND_TRAPS = {"<id>": lambda: E(msg)}``); the assert
carries the marker ``mend-trap:<module>:<table>.<id>`` as its message, and
:mod:`mend.validation_runtime` (``install(model)``) turns the ``RuntimeError`` carrying
that marker back into ``E(msg)`` where the call returns, outside the compiled region.

The condition is bound to a local where the check read it, and only a one-element plain CPU
tensor goes into the graph; anything else runs the original check, unchanged::

    _mend_cond = C
    if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' \
            and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized \
            and _mend_cond.dtype in (torch.bool, ..., torch.float64):   # only with logical_not
        torch._assert_async(torch.logical_not(_mend_cond), MARKER)   # `if not C`: (_mend_cond, MARKER)
    elif _mend_cond:                                                  # `if not C`: elif not _mend_cond:
        raise E(msg)                                                  # the original raise, as written

(``assert not C, msg`` the same inside ``if __debug__:``, its fallback ``assert not _mend_cond,
msg``). Dynamo decides the guard at trace time, so it adds no break. helper-50 found the
unguarded form changed behaviour on inputs unlike the example: a Python number (``if scale < 0``
called with ``0.5``: ``_assert_async`` raised TypeError) and a condition of several elements
(Python raised "Boolean value of Tensor with more than one value is ambiguous", Inductor's
``_assert_async`` returned); helper-81 a one-element sparse or quantized tensor (``_assert_async``
has no kernel for it: NotImplementedError), now kept out by its layout; helper-85 a uint16/32/64,
float8 or complex32 flag (``logical_not`` has no CPU kernel for it, where ``bool(C)`` works), kept
out of the negated form by its dtype (bool, uint8, int8/16/32/64, float16/bfloat16/32/64).
``guarded-check`` (a static screen of the mended file) re-reads the local, the guard, the asserted
truth and the fallback from it.

Measured on torch 2.13 (CPU): ``_assert_async`` raises ``RuntimeError(msg)`` with the
message intact in eager and under the eager, aot_eager and inductor backends (also with
``dynamic=True``, ``fullgraph=True``, ``cpp_wrapper``). The marker is exact there; on CUDA
the message is dropped and the failure is a fatal device-side assert (pytorch#131491), so
the restore is CPU-only (an obligation of every fix).

``torch._assert(C, "literal")`` on a tensor ``C`` is ``if not C: raise AssertionError("literal")``
(torch/__init__.py, not stripped by ``python -O``); Dynamo breaks on the call ("Data dependent
operator"). It becomes ``(lambda _mend_c: torch._assert_async(_mend_c, MARKER) if
torch.compiler.is_compiling() and type(_mend_c) is torch.Tensor and _mend_c.numel() == 1 and _mend_c.device.type == 'cpu' and _mend_c.layout == torch.strided and not _mend_c.is_quantized else torch._assert(_mend_c,
"literal"))(C)``: a Python bool, a tensor subclass (``__torch_function__``), a tensor of several
elements or one off the CPU keeps the call (an adversarial review found each changed by a first version, which had also assumed
``-O`` stripped it). Positional arguments only; a message that is not a string literal declines.

``assert T.item() <op> E`` (xlm/flaubert ``get_masks``: ``assert lengths.max().item() <= slen``;
either side, chains ``a < T.item() < b`` as ``torch.logical_and``, ``.item()`` on both sides) is
rewritten with ``.item()`` replaced by a widening cast, ``T.to(torch.float64 if T.is_floating_point()
else torch.int64)``: the host read is the break, and Dynamo would lower a plain
``assert T <= E`` to ``_assert_async`` itself, raising RuntimeError where the original raised
AssertionError, so the trap form restores it. Traps (measured, torch 2.13 CPU), each left to
``raises-iff-original``, which models ``.item()`` (an integer's value; a float's value widened to
float64; Python's exact int/float comparison) against the tensor comparison both as eager does it
(``E`` rounded to the operand's dtype) and exactly (inductor with an unspecialised float): without
the cast, float32 near 2**24 (``tensor(16777216.) < 16777217`` is False, ``.item()`` gives True),
float16/bfloat16 rounding of the bound and int32/uint8 wrap-around of the bound were refuted;
a ``T`` with more than one element (``.item()`` raises) -- ``condition-is-tensor`` refutes it;
NaN fails both forms; ``python -O`` strips both (``if __debug__:``); two ``T`` of different dtypes,
or ``E`` a tensor: unknown. Declined statically: ``.item()`` used in arithmetic or outside a
comparison, a receiver that calls anything but pure tensor methods, a chain with a computed bound.
Guarded too (helper-85's F2: unguarded, a two-element ``T`` passed under inductor, and a Python
int or a uint16 tensor raised other errors): each ``T`` read through ``.item()`` is bound once,
``_mend_item = T`` (the receivers are pure, so reading it first changes nothing), and the tensor
condition runs in the graph only when every such local is a one-element plain CPU tensor and,
for a comparison, where the comparison is Python's exact one by construction: it compares each
tensor cast to int64 (an int64 or bool tensor, against ints in int64) or to float64 (a float32
or float64 tensor, against floats and ints of at most 2**53), casts that hold every value
exactly -- torch alone would round (a float32 tensor against ``0.1`` compares in float32,
helper-87); an int tensor against a float, or an int beyond those ranges, keeps the original
check (an int64 one against ``1e9``); a literal number's clause is decided when the rewrite is
made; a truth value or ``math.isnan`` takes the same four dtypes. float16, bfloat16, int8, int16
(and the other integer widths) keep the original check: inductor fused the ops computing such a
``T`` with the check and skipped ``T``'s rounding or wrap-around in its dtype, which the
original's graph output keeps (helper-91: ``(x.max() - x.min()).item() < 4.0`` on bfloat16,
``math.isinf((x.abs().max() * 1024).item())`` on float16, ``q.min().abs().item() > 100`` on int8).
``int(T.item())`` / ``float(T.item())`` as a compared operand (builtins the module does not rebind) keep only the integer / float branch of the guard: there
the cast gives the same number (elsewhere int() truncates and raises on NaN, float() rounds
beyond 2**53), and the value model takes int() of an int and float() of a float as the identity. The
original test runs on the same locals otherwise. A chain that reads ``.item()`` after its first
comparison declines (Python skips it when that one fails: helper-87)
(``else: assert _mend_item.item() <= slen``). ``guarded-item-check`` re-reads that form from the
mended file.

Declined, with the reason, when:

* the message is formatted at run time, not a literal (f-string, ``%``, ``.format``, a
  name): restoring it needs the values it reads, tensors or sizes, at the boundary (shared
  case 023);
* the function containing the check also changes state anywhere (in-place tensor ops,
  ``out=``, attribute/item writes, ``x += ...``, container mutators): with the check
  inside the graph, inductor runs later in-place updates before the failed assert
  surfaces, and aot_eager drops earlier ones (it applies mutations after the graph), so
  the failing call would leave different state than eager (measured; case 023);
* a function or method of the module that the check's function calls changes state
  (followed three calls deep: helper-50's ``self._keep(h)`` stashing a tensor, a helper's
  ``global``), or the check runs under a grad-mode context (``with torch.no_grad()``,
  ``@torch.no_grad()``: failing inside the graph under the eager backend, it left grad mode
  off for the process, helper-50);
* the condition is an ``or``, or an ``if``'s ``and`` (short-circuit evaluation), binds a name (walrus),
  or is computed from shapes and literals only (Dynamo already decides it at trace time);
* the statement is ``assert <cond>[, "literal"]`` without a leading ``not``: Dynamo lowers
  that form to ``_assert_async`` itself (no break; shared cases 021/024), so only
  ``assert not <cond>[, "literal"]`` is rewritten;
* a ``try`` with a handler around a call in another function of the file (a parent module calling
  ``self.child(x)``): until ``mend.validation_runtime`` restores the exception at the outermost
  module, the mended check raises ``RuntimeError('mend-trap:...')``, eager mode included, which an
  ``except AssertionError`` there no longer catches (helper-81's c01b, c09b);
* a ``try``/non-torch ``with`` encloses the check in the function (a local handler would
  see a RuntimeError instead of ``E``), the check sits in a loop or outside a function,
  the raise has a ``from`` clause, the ``if`` does more than raise, the exception is built
  from a local name, or a comment would be dropped.

``assert A and B, msg`` (helper-78's c02; Dynamo breaks on ``A``'s truth) is ``assert A, msg`` then
``assert B, msg``: Python evaluates ``B`` only when ``A`` held, and both raise the same
``AssertionError``. Each tensor operand takes the guarded form with its own local and trap id (the
same exception restored, so ``first-failure-wins`` is checked), a Python-level one (shapes, ``is
None``, ``isinstance``) stays a plain ``assert`` that Dynamo decides at trace time. Inside one graph
a later operand is computed even where an earlier check fails (the assert is asynchronous), so
every operand after a tensor one must pass a static screen (``speculated-operands``, re-checked by
the verifier): Dynamo traces it on every call, so a tensor error there is a hard error at trace
time. Admitted: names, attribute chains of ``self``/``torch``, number literals, arithmetic and
comparisons with a number on one side (a literal, a full reduction, or a ``self`` attribute the
example run saw as a Python number: two tensors may not broadcast, helper-81's c07b), and
one-tensor predicates and reductions without a ``dim``; indexing (``table[idx]``, guarded by the
first operand), an attribute of a value (``x.mT``), another call, a ``dim``, ``@`` or ``in``
declines. A total Python-level operand (``p.dim() == 2``, ``isinstance``, ``is None``; no indexing)
is decided at trace time like any Python code and stays a plain ``assert``. Measured (c02): 2 -> 1 graphs, each operand failing
raises the same AssertionError eager and under eager/aot_eager/inductor (tests/test_assert_and.py).

An arm of an ``if``/``elif``/``else`` chain is taken when every arm above it only raises: the
chain is first split (``screen.split_chain``), ``elif`` becoming a second ``if`` and a final
``else:`` its own statements, which is exact because a raise always leaves the chain (an arm
above that does more declines; the split is covered by the differential test, not by a proof).
Arms that raise different exceptions: the first moves into the graph and the later ones decline
(``first-failure-wins``: inductor may report the later of two checks that fail on one call,
helper-91), unless every arm restores the same exception.
"""
from __future__ import annotations

from mend.rules._base import Decline, Match, RewriteResult, Rule
from mend.rules.predicated_validation.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.predicated_validation.rewrite import rewrite
from mend.rules.predicated_validation.screen import MARKER, NAME, TABLE, constant_message, match

FIX_SAFETY = """\
An unsafe fix (applied with ``--unsafe-fixes``): it rests on the observed module state and
devices of the example run. Emitted after verification, with a documented difference: install
``mend.validation_runtime.install(model)`` on the module you call, or a failing check under
``torch.compile`` raises ``RuntimeError("mend-trap:...")`` instead of the original exception.
Eager (not compiling) runs the original check itself, exactly: the guard of an ``if``/``raise``
or an ``assert`` starts with ``torch.compiler.is_compiling()``, which Dynamo folds at trace time
(helper-102 found the eager exception changed without the restore, before that clause), and
the ``torch._assert(C, msg)`` form's condition starts with it too. Under torch.compile a
failing ``torch._assert`` on a Python ``False`` after a ``True`` now carries Dynamo's "from user
code" appendix in its message, as the original's does when ``False`` is the first call (the
original's, after a ``True``, does not: measured, torch 2.13). The restore
is CPU-only: on CUDA ``_assert_async`` drops the message (pytorch#131491).

Decided by Z3 over the facts of one run of the candidate: the mended check fails exactly
when the original raised, and the trap table restores the same exception type and message
(``raises-iff-original``, over IEEE / bit-vector values of the condition), and the
condition is a one-element tensor (``condition-is-tensor``). Resting on checks, not on a
solver: the forward changes no module state, observed in eval and in training mode with
its submodules screened by the effect analysis (``state-unchanged-on-raise``, required at
every level, ``--verify fast`` included). A submodule that writes into an object passed to
it (xlm's and flaubert's attention updating the KV cache it is given) is an effect too:
Dynamo replays such Python writes after the graph returns, so a failing check undoes the ones
made after it, as eager never reached them, but equally the ones made before it, anywhere in
the graph (a module in a list attribute, a hook, a decorator, a caller), which eager did make;
and a cache whose ``update()`` writes a tensor in place (StaticCache) is written by inductor
before the failed assert surfaces (measured, and an adversarial review's 11 counterexamples;
tests/test_argument_writes.py). The exception is an object made in the call itself
(``if cache is None: cache = DynamicCache(...)`` before the check, as xlm and flaubert do):
the rewrite then keeps the original check for a cache passed in, and in training, and moves it
into the graph only under ``_mend_fresh_cache = cache is None and not self.training`` (a Python
bool, so a Dynamo guard). The verifier accepts the submodules' writes when each goes only into
parameters that receive that new object at every call and are reached in no other way (not
called before the check, by ``.forward``, through an alias, from another method or a parent
module in the file: ``fresh.py``, a static screen), and when Dynamo's own record of the graph
holding the check, compiled in eval mode with and without grad, shows no write to a Python
object that existed before the call, no random draw and no tensor written in place
(``verifier/traced_effects.py``; an observation of the trace, resting on a private Dynamo API).
That record is what the second adversarial review's 17 counterexamples lacked (a constructor
writing a global, a deque, a caller's list, a closure or a class attribute, only with grad
enabled; ``__new__`` returning a shared object): each shows up in it. It covers the traced path
only: inputs Dynamo compiles to other guards are an assumption, stated in the certificate.
A third and fourth review (2026-12-04) found, and the rule now declines: torch's global grad or
autocast mode set in the file outside a ``with`` (static screen) or in the check's graph (Dynamo
puts ``_set_grad_enabled`` in the graph and sets the final mode after it returns), a random draw
whose dead result Dynamo drops before AOTAutograd (read in Dynamo's graph now), and a ``__del__``
on the made object's class in the file (the single graph never materializes the object). Left
as stated assumptions, each shown by a review model: a helper writing state only for other
shapes, a parent module compiled around the model, a finalizer on a class defined in another
file, ``lengths`` passed as a numpy array in eager mode (``_assert_async`` wants a tensor), and
meta-device tensors (outside ``cpu-only``). Also stated, not screened (helper-54): a forward
hook registered from outside the file (``model.lin.register_forward_hook(lambda m, i, o:
seen.append(o))``) runs inside the check's graph, and Dynamo replays its Python effects after
the graph returns, so on a compiled call whose check fails the hook's effect for that call is
lost (eager and a passing call are unchanged); the example run has no such hook to observe.
Under ``torch.func.vmap`` a batched tensor passes the guard (its type is ``torch.Tensor``) and
``_assert_async`` has no batching rule: the original fails on every input ("data-dependent control
flow"), the mended check too, with another message (helper-83's n04).
For ``if``/``raise`` and ``assert not``, the check goes into the graph only for a one-element
plain CPU tensor, the original check running otherwise (``guarded-check``, a static screen of
the mended file). The code after a passing check computes the same result (``same-result-when-passing``); the
exception is restored at the call boundary from the trap table entry (``restore-at-boundary``);
the tensors at the check are on the CPU (``cpu-only``, observed); and the first failing check
in program order is reported
(``first-failure-wins``: exact with one check in the file, or with several that all restore the
same exception; several checks restoring different exceptions are refuted, since inductor ran a
later check of one graph first -- helper-91's F4 -- so the second such check in a file declines).

Line numbers move: the trap table is inserted after the module's imports and the guarded check
takes more lines than the ``if``/``raise`` it replaces, so a log record, a warning or a traceback
from a line below either names a later line than eager's, even in eager mode (helper-64's c11:
a ``logger.warning`` record's ``lineno`` went from 15 to 21). No obligation covers it.

Never inference-only: a check has no gradient.
"""

OBLIGATION_KINDS = frozenset({"raises-iff-original", "same-result-when-passing", "first-failure-wins",
                              "restore-at-boundary", "state-unchanged-on-raise", "condition-is-tensor", "cpu-only",
                              "guarded-check", "guarded-item-check", "speculated-operands"})

RULE = Rule(
    name=NAME,
    categories=("raise-assert",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=OBLIGATION_KINDS,
    required_kinds=frozenset({"state-unchanged-on-raise", "guarded-check", "guarded-item-check"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["DECLINE_EXAMPLES", "FIX_EXAMPLES", "MARKER", "NAME", "NOOP_EXAMPLES", "RULE", "TABLE", "Decline", "Match",
           "RewriteResult", "constant_message", "example_line", "match", "rewrite"]
