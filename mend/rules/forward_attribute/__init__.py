"""Rule: a module attribute converted and written back in ``forward`` (issue 10, kind 5).

transformers 5.24's ``CTRLModel.forward`` (``transformers/models/ctrl/modeling_ctrl.py:319``)
does ``self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)``
on every call. ``pos_encoding`` is an ``nn.Buffer``: when the conversion changes nothing,
``Tensor.to`` returns the stored tensor itself, still flagged ``_is_buffer``, and
``nn.Module.__setattr__`` re-registers it (``register_buffer(name, value, value.persistent)``);
Dynamo breaks there ("Unsupported python_type() call", innermost frame in
``torch/nn/modules/module.py``; the site is the assignment, the innermost frame outside torch).
ctrl: 3 graphs.

The rewrite::

    pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)
    if pos_encoding is not self.pos_encoding:
        self.pos_encoding = pos_encoding

Dynamo decides ``is not`` on two tensors at trace time (object identity, guarded), with no
break: one graph in both cases, measured on torch 2.13 with ``torch._dynamo.explain`` (an
``nn.Buffer`` module: float32 input 2 -> 1 graphs; float64 input 1 -> 1, the store traced).

The trap (measured): the plain-local rewrite (``pos_encoding = self.pos_encoding.to(...)``
and no store) drops the write. After a call with float64 ``inputs_embeds`` the original
leaves the buffer float64 (``named_buffers()``, ``state_dict`` when persistent, the next
call), the plain local leaves it float32. The guarded store happens exactly when the
conversion returned a new object, i.e. whenever the original's store changed anything; the
store it leaves out puts back the object already there, a no-op for ``nn.Module.__setattr__``
(same ``_buffers`` entry, same persistence, no hook). So every read of ``self.X`` anywhere --
later in the same method, in other methods, properties, helpers and submodules during or
after the call -- sees what it saw before, and later reads in the method are left as they
are (no read is redirected to the local, so a write between them and the site cannot be
missed). Aliasing (``a = self.X`` before the write) keeps the old object either way.

Declined: a right-hand side that is not a conversion of the same attribute (``.to``,
``.type``, ``.float()``, ``.double()``, ``.half()``, ``.bfloat16()``, ``.cpu()``, ``.cuda()``,
``.contiguous()``) or passes ``copy=``; a write inside a loop (Dynamo skips the frame) or a
nested function; the attribute written again (or ``del``) in the same method; a class in the
file that overrides ``__setattr__``, ``__getattr__``, ``__getattribute__``, ``__delattr__``,
``register_buffer`` or ``register_parameter``, or binds the name in its body (a class
attribute, method or property, e.g. a subclass override): then a read may run code and the
rewrite reads twice; a Parameter (``nn.Parameter`` / ``register_parameter`` for the name); a
global buffer/parameter registration hook installed in the file; the name registered as a
buffer twice; other statements or a comment on the line. A ``try`` or ``with`` around the
write is kept: the conversion runs once, at the same point, and raises as before.
"""
from __future__ import annotations

from mend.rules._base import Rule
from mend.rules.forward_attribute.examples import DECLINE_EXAMPLES, FIX_EXAMPLES, NOOP_EXAMPLES, example_line
from mend.rules.forward_attribute.rewrite import rewrite
from mend.rules.forward_attribute.screen import CONVERSIONS, NAME, match

FIX_SAFETY = """\
Emitted after verification; needs no runtime: the attribute holds the same object after
the mended statements as after the original write, on every call, and the write still
happens whenever it changed anything (a dtype or device conversion), so module state after
a call is the original's (the differential test compares every buffer after each call).

Proved by Z3 (``attribute-write-kept``, an SMT query over an uninterpreted sort of objects,
built from the mended and the original statements): the stored object is the same on every
path; the plain-local rewrite (no store) is refuted there. Resting on checks: at the site,
``self.X`` is a tensor and not a Parameter, no class attribute or descriptor is named X,
and ``__setattr__``, ``__getattr__``, ``register_buffer`` are ``nn.Module``'s (observed on
the example run, ``attribute-access-plain``); a static screen of the mended file
(``attribute-screen``: no access hook, no global registration hook, the local is fresh,
the other reads and writes of the attribute listed). Assumed: no global buffer
registration hook installed outside the file.

Never inference-only: identity of a stored tensor does not touch gradients.
"""

RULE = Rule(
    name=NAME,
    categories=("module-attribute-write",),
    match=match,
    rewrite=rewrite,
    example_line=example_line,
    obligation_kinds=frozenset({"attribute-write-kept", "attribute-access-plain", "attribute-screen"}),
    required_kinds=frozenset({"attribute-write-kept", "attribute-access-plain", "attribute-screen"}),
    needs_facts=True,
    fix_safety=FIX_SAFETY,
    doc=__doc__,
    fix_examples=FIX_EXAMPLES,
    decline_examples=DECLINE_EXAMPLES,
    noop_examples=NOOP_EXAMPLES,
)

__all__ = ["CONVERSIONS", "NAME", "RULE", "match", "rewrite"]
