"""Lazy values of deferred calls (:mod:`mend.runtime`): ``fmt(template, *values)`` for an
f-string or ``str.format`` argument, ``pct(template, values)`` for a ``template % values`` one, and ``item(t)`` for a ``t.item()`` / ``float(t)`` /
``int(t)`` argument, so that a tensor is snapshotted where the call is and formatted or read
at replay. What formatting would raise is raised where the call is (``_check_specs``)."""
from __future__ import annotations

import re
import string
from typing import Any

import torch

__all__ = ["Fmt", "Item", "fmt", "item", "pct"]


class Fmt:
    """A lazily formatted string: ``template.format(*args, **kwargs)`` at replay.

    The rule rewrites an f-string argument (``f"h={h:.2f}"``) into
    ``fmt("h={:.2f}", h)`` so that a tensor in it is snapshotted instead of being
    formatted inside the graph (which Dynamo cannot do). ``str()`` gives the text.
    """

    def __init__(self, template: str, *args: Any, **kwargs: Any) -> None:
        self.template = template
        self.args = args
        self.kwargs = kwargs
        _check_specs(template, args, kwargs)

    def __str__(self) -> str:
        return self.template.format(*[_materialize(a) for a in self.args],
                                    **{k: _materialize(v) for k, v in self.kwargs.items()})

    __repr__ = __str__


fmt = Fmt


@torch.compiler.assume_constant_result
def _spec_fields(template: str) -> tuple:
    """``(key, spec)`` of each field of ``template`` with a format spec and no conversion,
    ``key`` a positional index or a keyword (fields such as ``{0.shape}`` are left out).
    A constant of the trace (``torch.compiler.assume_constant_result``): a str parse only."""
    out, auto = [], 0
    for _, name, spec, conv in string.Formatter().parse(template):
        if name is None:
            continue
        if name == "":
            key, auto = auto, auto + 1
        elif name.isdigit():
            key = int(name)
        elif name.isidentifier():
            key = name
        else:
            continue
        if spec and not conv and "{" not in spec:
            out.append((key, spec))
    return tuple(out)


@torch.compiler.assume_constant_result
def _spec_error(kind: str, spec: str) -> str:
    """``"ValueError:<message>"`` (or TypeError) that ``format`` of a Python value of ``kind``
    (``float``, ``int``, ``bool``, ``complex``, ``str``, ``list``) raises for ``spec``, else ``""``. Run in
    plain Python while Dynamo traces (a constant of the trace): Dynamo's own ``format`` of a
    constant ignores an invalid spec (``format(0.0, "d")`` gave ``'0.0'`` while tracing, an
    adversarial helper found)."""
    proto = {"float": 0.0, "int": 0, "bool": False, "complex": 0j, "str": "", "list": []}[kind]
    try:
        format(proto, spec)
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}:{exc}"
    return ""


def _kind(value: torch.Tensor, cast: Any = None) -> str:
    """The Python type name a 0-d tensor's number has (``cast``: float/int applied to it; for
    :func:`tolist`, a list unless the tensor is 0-d)."""
    if cast is tolist:
        return _kind(value) if value.dim() == 0 else "list"
    if cast is not None:
        return cast.__name__
    return "bool" if value.dtype == torch.bool else "complex" if value.is_complex() else \
        "float" if value.is_floating_point() else "int"


def _check_specs(template: str, args: tuple, kwargs: dict) -> None:
    """Raise now what formatting at replay would raise for a field's spec, as the f-string
    raised where it was (before the rest of the graph changed any state): a spec on a tensor
    that is not a plain 0-d ``Tensor`` (``TypeError: unsupported format string passed to
    Tensor.__format__``), or a spec the value's Python type rejects (``{:d}`` of a float
    tensor, which formats its ``.item()``; an :class:`Item` field formats its number). Spec
    errors depend on the type, not the value, so the type decides: no host read, no break."""
    for key, spec in _spec_fields(template):
        if isinstance(key, int):
            value = args[key] if key < len(args) else None
        else:
            value = kwargs.get(key)
        kind = None
        if isinstance(value, Item):
            kind = _kind(value.tensor, value.cast)
        elif isinstance(value, torch.Tensor):
            if value.dim() != 0 or type(value) is not torch.Tensor:
                object.__format__(value, spec)
            kind = _kind(value)
        elif type(value) in (int, float, bool, complex, str):
            kind = type(value).__name__
        err = _spec_error(kind, spec) if kind is not None else ""
        if err:
            name, _, message = err.partition(":")
            raise (ValueError if name == "ValueError" else TypeError)(message)


# one %-conversion (printf-style String Formatting, Python docs): key, flags, width, precision,
# length modifier (ignored by Python), conversion
_PCT = re.compile(r"%(\([^)]*\))?([-#0 +]*)(\*|\d+)?(?:\.(\*|\d*))?[hlL]?(.)", re.S)


@torch.compiler.assume_constant_result
def _pct_fields(template: str) -> tuple | None:
    """``template`` (a %-format) as ``(text, flags, width, precision, conv)`` tuples, ``text`` the
    literal before the conversion (``%%`` is text; precision None when not given); None for a mapping key (``%(name)s``), a ``*``
    width or precision, or anything Python's ``%`` would reject (the original's ``%`` then runs
    as it was). A constant of the trace (``torch.compiler.assume_constant_result``): a str parse only."""
    out, text, pos = [], "", 0
    for mt in _PCT.finditer(template):
        text += template[pos:mt.start()]
        pos = mt.end()
        key, flags, width, prec, conv = mt.groups()
        if mt.group(0) == "%%":
            text += "%"
            continue
        if key is not None or width == "*" or prec == "*" or conv not in "diouxXeEfFgGcrsa":
            return None
        out.append((text, flags, width or "", prec, conv))
        text = ""
    if "%" in template[pos:]:
        return None   # an incomplete conversion (`"50%"`): ValueError, raised by the original's `%`
    return tuple(out), text + template[pos:]


def pct(template: str, values: Any) -> Any:
    """``template % values`` for a deferred call's argument (``print("step %d loss %s" % (n,
    loss))``, whose ``%`` on a tuple holding a tensor Dynamo cannot trace: helper-100 m27), as a
    :class:`Fmt`: a ``%s``/``%r``/``%a`` field (flags ``-`` only) of a tensor becomes ``{!s:>W.P}`` of
    the tensor itself, snapshotted and formatted at replay (``str(t)`` is what ``%s`` gives); every other field
    is formatted now with ``%``, in order, as the original formatted it (its errors raised here;
    a tensor there is read on the host, as the original read it). Anything else (a mapping key,
    ``*``, an argument count that does not match) runs the original ``%`` here."""
    args = values if isinstance(values, tuple) else (values,)   # `%` unpacks a tuple (a subclass too)
    parsed = _pct_fields(template)
    if parsed is None or len(parsed[0]) != len(args):
        return template % values
    out, pieces = "", []
    for (text, flags, width, prec, conv), value in zip(parsed[0], args):
        out += text.replace("{", "{{").replace("}", "}}")
        if conv in "rsa" and set(flags) <= {"-"} and isinstance(value, torch.Tensor):
            # a tensor only: str() of another object (its own __str__, a dict holding tensors) is read
            # now, where the original read it (helper-101: a __str__ reading state changed later)
            align = ("<" if flags else ">") if width else ""
            spec = align + width + ("" if prec is None else "." + (prec or "0"))   # `%.s`: precision 0
            out += "{!" + conv + (":" + spec if spec else "") + "}"
            pieces.append(value)
        else:
            out += "{}"
            pieces.append(("%" + flags + width + ("" if prec is None else "." + prec) + conv) % (value,))
    return Fmt(out + parsed[1].replace("{", "{{").replace("}", "}}"), *pieces)


class Item:
    """``t.item()`` (``cast`` None) or ``float(t)`` / ``int(t)``, taken at replay from the
    snapshot of ``t``: the same Python number.

    The rule rewrites a ``t.item()`` argument of a deferred call (``print(t.item())``,
    ``f"{t.item():.4f}"``, a logger's ``%``-argument, ``f"{int(mask.sum())}"``) into
    ``item(t)`` / ``item(t, int)``, so the tensor is snapshotted instead of read on the host
    inside the graph (the graph break). A tensor that is not one element raises here, where
    the original raised, with its message."""

    __slots__ = ("tensor", "cast")

    def __init__(self, tensor: torch.Tensor, cast: Any = None) -> None:
        if tensor.numel() != 1 and cast is not tolist:
            tensor.item() if cast is None else cast(tensor)   # the original's RuntimeError/ValueError
        self.tensor = tensor
        self.cast = cast

    def value(self) -> Any:
        return self.tensor.item() if self.cast is None else self.cast(self.tensor)


def tolist(t: torch.Tensor) -> Any:
    """``t.tolist()``: the ``cast`` :func:`item` takes for a deferred ``t.tolist()`` argument
    (``print("tokens per expert", counts.tolist())``): the nested list (a number for a 0-d
    tensor) read at replay from the snapshot of ``t``, the same values."""
    return t.tolist()


def item(x: Any, cast: Any = None) -> Any:
    """``x.item()`` (``cast(x)``: ``float``/``int``/:func:`tolist`) deferred to replay when ``x`` is a tensor and
    Dynamo is tracing (:class:`Item`); eagerly, or for anything else (a NumPy scalar, a Python
    number), now, where the original read it (a later argument of the same call that writes
    ``x`` cannot change it). ``int`` of a floating tensor is read now too: ``int(nan)`` raises,
    and only the value tells."""
    if isinstance(x, torch.Tensor) and torch.compiler.is_compiling() and not (
            cast is int and (x.is_floating_point() or x.is_complex())):
        # a copy where the call reads it: a later argument of the same call may write x in
        # place (print(t.item(), self.bump(t))), and the snapshot is taken after all arguments
        return Item(x.detach().clone() if x.numel() == 1 or cast is tolist else x, cast)
    return x.item() if cast is None else cast(x)


def _materialize(value: Any) -> Any:
    """What a deferred call gets for one argument: an :class:`Item`'s number, a :class:`Fmt`'s
    text, anything else as it is."""
    if isinstance(value, Item):
        return value.value()
    return str(value) if isinstance(value, Fmt) else value
