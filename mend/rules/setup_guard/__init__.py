"""Rule: a one-time setup's first check, hoisted into its caller (issue 10, kinds 8 and 9).

transformers 5.24 installs its output-capturing hooks lazily, on the first call that asks for
hidden states or attentions (``utils/output_capturing.py``)::

    def maybe_install_capturing_hooks(model):
        if getattr(model, "_output_capturing_hooks_installed", False):   # first check
            return
        with _hook_installation_lock:             # Dynamo breaks here (a threading lock)
            ...
            install_all_output_capturing_hooks(model)   # register_forward_hook: breaks too

called as ``maybe_install_capturing_hooks(self)`` from the ``capture_outputs`` wrapper of
every model's forward. Under ``torch.compile`` the first call breaks inside it, so Dynamo
splits the *caller* at the call and compiles the code around it without the check: the
guards of those frames say nothing about the flag, and every later call still leaves the
graph to call the (now trivial) function. Measured (torch 2.13, CPU; hf:newest/llava,
mended by the other rules): 5 graphs on the first call and 5 on every later one.

The rewrite copies the callee's first check to each call written as a statement::

    if not (maybe_install_capturing_hooks is _mend_setup_guard_maybe_install_capturing_hooks
            and (type(getattr(self, "_output_capturing_hooks_installed", False)) is bool
                 and getattr(self, "_output_capturing_hooks_installed", False))):
        maybe_install_capturing_hooks(self)

and binds ``_mend_setup_guard_maybe_install_capturing_hooks = maybe_install_capturing_hooks``
on the blank line right after the function's ``def`` (no line moves; declined when no blank
line follows it). The identity test makes the skip conditional on the called name still being
that ``def``: a function replaced from outside its module (a monkeypatch, ``mock.patch``), or
a caller's own binding of the name, is called as before (the rule's earlier versions assumed
no such replacement).

The gate (helper-44) takes the flag's truth only when it is a bool (``not flag`` becomes
``flag is None or (type(flag) is bool and not flag)``): a flag that another module, or
``object.__setattr__``, sets to an object whose ``__bool__`` has effects or changes makes the
hoisted test False, and the callee's own check then takes that object's truth once, as the
original does (tested: an expiring hook set, 12 calls, the same outputs and truth tests; the
ungated form loses the hooks). ``is`` never dispatches (helper-45: a metaclass ``__eq__``
answered an earlier ``type(T) in (bool, type(None))`` gate). A check that tests a value's truth
beside other tests is declined (a gate over several parts evaluated names the original's
``or`` skipped: helper-45), and identity is compared only with ``None`` (helper-45: Dynamo
traced ``x is _last`` on a tensor as a constant, with no guard).

Dynamo evaluates it in the caller's frame and guards on the attribute. The first call runs
the setup as before (its breaks stay: registering a hook cannot be traced); on the next call
the guard fails, the caller is compiled once more, and the new code skips the call. Measured
on a two-layer module (``tests/fixtures/setup_guard.py``): first call 2 graphs, later calls
2 before and 1 after. It needs no runtime and leaves the callee as it is.

When the break sits deeper (``register_forward_hook`` in a function the guarded one calls,
here ``install_output_capuring_hook``, transformers' spelling), the screen follows plain-name calls of the same
module up to :data:`~mend.rules.setup_guard.screen.MAX_DEPTH` levels to the nearest function
that begins with the check; once hoisted, such a site is declined as "already hoisted" (it
breaks on the first call only).

Why it is exact (``proofs/sg_hoisted_check.smt2``): the hoisted test implies the check, so
where it holds ``G`` would return at once and skipping the call changes nothing; where it does
not, ``G`` runs as before, its own check included, from the same state. That needs the check to read without
effects (evaluated twice on the first call, once after): only names, literals, attribute
reads, ``not``/``and``/``or``, ``is``/``is not`` and ``getattr``/``hasattr`` (with a literal
name)/``callable`` are admitted (not ``isinstance``: a metaclass's ``__instancecheck__`` may run
anything), and the attributes read are observed to be plain (no property or descriptor, a
class-level default only when it is a bool, int, string or None, no ``__getattribute__`` of the
class's own; the values it tests for truth are gated to bools or None). The call's arguments must be literals or
parameters of the function around the call that it never deletes (evaluating them, or not,
changes nothing and cannot raise: a local may be unbound), and must bind to ``G``'s signature
(a call that raises TypeError is not skipped); a parameter the check reads and the call omits
needs a literal default (a default is evaluated at ``def``). ``G`` must be a plain module-level
``def`` bound once in the module, with no ``globals()``/``vars()``/``sys.modules`` there (a
rebinding through them is not a visible binding), not decorated (a decorator runs first, or may
not run the body), not a generator (calling one runs nothing), not async, and its check must not
read its ``*args``/``**kwargs``; the caller must not bind a global the check reads. A method
(``self.setup()``) is declined: a subclass may override it. helper-41's adversarial models
(``*args`` read by the check, a default that is a name, ``globals()[...] =``, an unbound local
argument, an integer literal argument) are declined or handled now
(``tests/test_rule_setup_guard.py``, the rule's examples).

Compiled, the original ignores a hook registered after its first trace when nothing makes
Dynamo recompile (the hooked layer's graph was traced without it); the mended caller
recompiles and runs it, as eager does (helper-41/42). The differential test compares the
mended model, eager and compiled, with the *eager* original.

Declined: a call whose value is used (``h = G(x)``), a check with ``==`` (a user's ``__eq__``)
or another call, an argument with reads of its own (``G(self.inner)``), the name rebound in
the module, an already hoisted call. Without a guarded function the break keeps the
hook-or-lock reason (call the model once eagerly before compiling).
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.setup_guard.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.setup_guard.rewrite import rewrite
from mend.rules.setup_guard.screen import NAME, match

FIX_SAFETY = """\
Emitted after verification; needs no runtime: the mended call site runs the callee exactly
when the callee would do more than return, so every call does what it did, in eager mode and
compiled, for training and inference; compiled, the caller recompiles once after the setup.

Proved once, as a lemma (``proofs/sg_hoisted_check.smt2``, Z3, cited by ``guard-hoisted``):
for a pure hoisted test H that implies the check P, ``if not H: G()`` and ``G()`` leave the
same state and raise the same exception on every state (without ``H => P`` the query is sat).
Resting on a static screen (``guard-hoisted``, ast, of the version before and the mended
file): the callee, its first check, the hoisted test being the gated check with the call's
arguments, the call binding to the signature, the rest of the file unchanged node for node (a
certificate of a file with other changes re-checks as unknown, never passed: helper-44).
Resting on an observation (``guard-read-plain``: the objects the check reads have no property,
descriptor or ``__getattribute__`` of their own), so a rewrite whose check reads an attribute
is an ``unsafe`` fix -- the common case, ``getattr(model, "_flag", False)``; a check of globals
and arguments only (``if _done:``, ``if handle is not None:``) is ``safe``.

The hoisted test holds only while the called name is still the function whose check was
hoisted (``G is _mend_setup_guard_G``, the alias bound right after the ``def``): a ``G``
replaced from outside its module while the model runs is called as before. Assumed, not
checked: no other thread sets the flag between the hoisted check and the call (the callee
checks again under its lock, as before), and nothing outside the module rebinds the alias.
Never inference-only.
"""

RULE = Rule(
    name=NAME,
    categories=("hook-or-lock",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"guard-hoisted", "guard-read-plain"}),
    required_kinds=frozenset({"guard-hoisted", "guard-read-plain"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["NAME", "RULE", "match", "rewrite"]
