"""dead-host-work's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample

_SITES = ("jit.isinstance(", "repr(", "str(", "random.", ".bind(", "!r")


def example_line(source: str) -> int:
    """The line of an example's site: the first line holding one of the rule's constructs."""
    for i, text in enumerate(source.splitlines(), 1):
        if any(s in text for s in _SITES) and not text.lstrip().startswith(("#", "import", "from", "def ")):
            return i
    raise ValueError("no site in example")


# transformers 5.24 select_hidden_states (utils/output_capturing.py:298) in small: the fix
# example below, and the base of the signature-bind declines (each changes one thing)
_BIND_BEFORE = '''import inspect


def select(func):
    signature = inspect.signature(func)

    def wrapper(self, *args, **kwargs):
        arguments = signature.bind(self, *args, **kwargs)
        arguments.apply_defaults()
        kwargs["output_hidden_states"] = arguments.arguments["vision_feature_layer"]
        return func(self, *args, **kwargs)
    return wrapper
'''


def _variant(base: str, old: str, new: str) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def _bind_variant(old: str, new: str) -> str:
    return _variant(_BIND_BEFORE, old, new)


_BIND_AFTER = '''import inspect


_MEND_UNBOUND = object()  # mend: dead-host-work -- the lookup's "not decided here: call bind"


def _mend_bind_table(signature):
    """The parameters of ``signature`` as constants (built once, where the decorator runs), or
    None -- every call then goes to bind -- unless it is a plain, well-ordered inspect.Signature
    (a subclass may override bind; ``__validate_parameters__=False`` may disorder the kinds)."""
    if type(signature).__module__ != "inspect" or type(signature).__qualname__ != "Signature":
        return None
    params = list(signature.parameters.values())
    order = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD")
    kinds = [order.index(p.kind.name) for p in params]
    positional_defaults = [p.default is not p.empty for p in params if kinds[params.index(p)] < 2]
    if (kinds != sorted(kinds) or any(a and not b for a, b in zip(positional_defaults, positional_defaults[1:]))
            or type(signature.parameters).__name__ != "mappingproxy"):
        return None
    positional = tuple(p.name for p in params if p.kind.name in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"))
    keyword = frozenset(p.name for p in params if p.kind.name in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"))
    required = tuple(p.name for p in params
                     if p.default is p.empty and p.kind.name not in ("VAR_POSITIONAL", "VAR_KEYWORD"))
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    var_keyword = any(p.kind.name == "VAR_KEYWORD" for p in params)
    return positional, keyword, required, defaults, var_keyword


def _mend_bound(table, name, args, kwargs, unbound):
    """``signature.bind(*args, **kwargs)``, defaults applied, ``.arguments[name]`` -- or
    ``unbound`` when this call is not one it decides (the caller then runs ``bind`` itself)."""
    if table is None or type(name) is not str:
        return unbound
    positional, keyword, required, defaults, var_keyword = table
    if len(args) > len(positional) or name not in keyword:
        return unbound
    given = positional[:len(args)]
    for key in kwargs:
        if key in given or (key not in keyword and (not var_keyword or key in positional)):
            return unbound
    for key in required:
        if key not in given and key not in kwargs:
            return unbound
    if name in kwargs:
        return kwargs[name]
    if name in given:
        return args[given.index(name)]
    return defaults[name]


def select(func):
    signature = inspect.signature(func)
    _mend_bind_signature = _mend_bind_table(signature)  # mend: dead-host-work

    def wrapper(self, *args, **kwargs):
        _mend_value = _mend_bound(_mend_bind_signature, "vision_feature_layer", (self, *args), kwargs, _MEND_UNBOUND)  # mend: dead-host-work (was: signature.bind)
        if _mend_value is _MEND_UNBOUND:  # not decided: bind validates the call
            arguments = signature.bind(self, *args, **kwargs)
            arguments.apply_defaults()
            _mend_value = arguments.arguments["vision_feature_layer"]
        kwargs["output_hidden_states"] = _mend_value
        return func(self, *args, **kwargs)
    return wrapper
'''


# a debug text read only under its flag: the base of the debug-text declines (each changes one thing)
_DEBUG_BEFORE = '''import torch


class Block(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        msg = f"out: {repr(h)}"
        if self.debug:
            print(msg)
        return h.relu()
'''


def _debug_variant(old: str, new: str) -> str:
    return _variant(_DEBUG_BEFORE, old, new)


FIX_EXAMPLES: list[tuple] = [
    # a plain class: torch.jit.isinstance is builtin isinstance (Dynamo skips torch.jit: one break)
    ('''import torch


class Gate(torch.nn.Module):
    def forward(self, x, scale):
        y = x * 2
        if torch.jit.isinstance(scale, torch.Tensor):
            y = y * scale
        return y
''', '''import torch


class Gate(torch.nn.Module):
    def forward(self, x, scale):
        y = x * 2
        if isinstance(scale, torch.Tensor):  # mend: dead-host-work (was: torch.jit.isinstance)
            y = y * scale
        return y
'''),
    # a tuple of builtin classes, torch under an alias, in an expression statement
    ('''import torch as th


def f(x, n):
    ok = th.jit.isinstance(n, (int, float)) and n > 0
    return x * 2 if ok else x
''', '''import torch as th


def f(x, n):
    ok = isinstance(n, (int, float)) and n > 0  # mend: dead-host-work (was: th.jit.isinstance)
    return x * 2 if ok else x
'''),
    # a debug repr never read: skipped for a plain tensor, kept for anything else (a subclass's
    # __repr__ may have effects)
    ('''import torch


def f(x):
    h = x * 2
    dbg = repr(h)
    return h + 1
''', '''import torch


def f(x):
    h = x * 2
    if type(h) is not torch.Tensor or h.layout is not torch.strided or h.is_nested or h.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool):  # mend: dead-host-work (a plain tensor's repr() is pure; `dbg` is never read)
        dbg = repr(h)
    return h + 1
'''),
    # the same repr through an f-string's `!r` (helper-68's c29): `f"{h!r}"` is `repr(h)`
    ('''import torch


def f(x):
    h = x * 2
    msg = f"h = {h!r}"
    return h + 1
''', '''import torch


def f(x):
    h = x * 2
    if type(h) is not torch.Tensor or h.layout is not torch.strided or h.is_nested or h.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool):  # mend: dead-host-work (a plain tensor's repr() is pure; `msg` is never read)
        msg = f"h = {h!r}"
    return h + 1
'''),
    ('''import torch


def f(x):
    h = x * 2
    # a comment kept above
    text = str(h)  # debugging
    return h + 1
''', '''import torch


def f(x):
    h = x * 2
    # a comment kept above
    if type(h) is not torch.Tensor or h.layout is not torch.strided or h.is_nested or h.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool):  # mend: dead-host-work (a plain tensor's str() is pure; `text` is never read)
        text = str(h)  # debugging
    return h + 1
'''),
    # transformers 5.24 select_hidden_states (utils/output_capturing.py:298): bind iterates the signature's
    # mappingproxy, which Dynamo refuses after a dict mutation; a table read once where the decorator runs,
    # and bind kept for every call the lookup does not decide (bind-lookup-agrees)
    (_BIND_BEFORE, _BIND_AFTER),
    # the signature's local named otherwise (`sig`): it is a signature because the decorator binds it
    # to inspect.signature(...) (an adversarial helper's decorator)
    (_bind_variant("    signature = inspect.signature(func)", "    sig = inspect.signature(func)").replace(
        "signature.bind(", "sig.bind("),
     _BIND_AFTER.replace("    signature = inspect.signature(func)", "    sig = inspect.signature(func)")
     .replace("_mend_bind_signature = _mend_bind_table(signature)", "_mend_bind_sig = _mend_bind_table(sig)")
     .replace("_mend_bound(_mend_bind_signature,", "_mend_bound(_mend_bind_sig,").replace("(was: signature.bind)",
                                                                                          "(was: sig.bind)")
     .replace("arguments = signature.bind(", "arguments = sig.bind(")),
    # a plain torch class imported by name (`from torch import Tensor`, bound by that import alone)
    ('''import torch
from torch import Tensor


def add_bias(x, bias):
    if torch.jit.isinstance(bias, Tensor):
        x = x + bias
    return x
''', '''import torch
from torch import Tensor


def add_bias(x, bias):
    if isinstance(bias, Tensor):  # mend: dead-host-work (was: torch.jit.isinstance)
        x = x + bias
    return x
'''),
    # a debug text read only under the flag right after it (helper-92's c30): computed there for a
    # plain tensor, before the flag (as written) otherwise; a false flag leaves no break
    ('''import torch


class Block(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        msg = f"block out: {repr(h)} shape={tuple(h.shape)} {h.dtype}"
        if self.debug:
            print(msg)
        return h.relu()
''', '''import torch


class Block(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        if type(h) is not torch.Tensor or h.layout is not torch.strided or h.is_nested or h.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool):  # mend: dead-host-work (`msg` is read only under `if self.debug:`; a plain tensor's text is pure)
            msg = f"block out: {repr(h)} shape={tuple(h.shape)} {h.dtype}"
        if self.debug:
            if not (type(h) is not torch.Tensor or h.layout is not torch.strided or h.is_nested or h.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)):
                msg = f"block out: {repr(h)} shape={tuple(h.shape)} {h.dtype}"
            print(msg)
        return h.relu()
'''),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # a name imported from torch and rebound in the module is not that class
    ('''import torch
from torch import Tensor

Tensor = list


def add_bias(x, bias):
    if torch.jit.isinstance(bias, Tensor):
        x = x + bias
    return x
''', "not a known plain class"),
    # TRAP: a typing generic: torch.jit.isinstance checks the element types, isinstance cannot
    ('''import torch
from typing import List


def f(x, sizes):
    if torch.jit.isinstance(sizes, List[int]):
        return x.view(sizes)
    return x
''', "typing generic"),
    ('''import torch
from typing import Optional


def f(x, m):
    if torch.jit.isinstance(m, Optional[torch.Tensor]):
        return x
    return x * 2
''', "typing generic"),
    # TRAP: a raw container: torch.jit.isinstance raises RuntimeError, isinstance returns a bool
    ('''import torch


def f(x, sizes):
    if torch.jit.isinstance(sizes, list):
        return x
    return x * 2
''', "container type"),
    # TRAP: a raw container reached only for some objects inside a tuple
    ('''import torch


def f(x, n):
    if torch.jit.isinstance(n, (int, dict)):
        return x
    return x * 2
''', "container type"),
    # TRAP: a user class may be an Enum (its metaclass makes it a Container: jit.isinstance raises)
    ('''import torch
from mypkg import Mode


def f(x, mode):
    if torch.jit.isinstance(mode, Mode):
        return x
    return x * 2
''', "not a known plain class"),
    ('''import torch


def isinstance(a, b):
    return True


def f(x, n):
    if torch.jit.isinstance(n, int):
        return x
    return x * 2
''', "`isinstance` is rebound"),
    ('''import torch


def f(x, n):
    if torch.jit.isinstance(n, target_type=int):
        return x
    return x * 2
''', "two positional arguments"),
    # the repr's text is used (a log of it is deferred-side-effects' job)
    ('''import torch
import logging
logger = logging.getLogger(__name__)


def f(x):
    h = x * 2
    text = repr(h)
    logger.debug(text)
    return h
''', "`text` is read"),
    # an f-string field with a format spec can raise (a spec a tensor cannot take): not dropped
    ('''import torch


def f(x):
    h = x * 2
    msg = f"{h!r:>200}"
    return h
''', "format spec"),
    # an f-string formatting two names: the guard would test one
    ('''import torch


def f(x, y):
    h = x * 2
    msg = f"{h!r} {y!r}"
    return h
''', "more than one name"),
    # TRAP: locals() can read the "unused" local
    ('''import torch


def f(x):
    h = x * 2
    text = repr(h)
    return h, locals()
''', "`locals()` can read every local"),
    # an attribute argument may be a property: the guard would read it twice
    ('''import torch


class M(torch.nn.Module):
    def forward(self, x):
        r = repr(self.weight)
        return x
''', "not one plain local name"),
    # TRAP (shared case 047): the RNG draw advances the global stream even in eval; drawing only
    # in training changes what every later consumer of np.random / random sees
    ('''import numpy as np
import torch


class Encoder(torch.nn.Module):
    def forward(self, x):
        for layer in self.layers:
            dropout_probability = np.random.uniform(0, 1)
            if self.training and dropout_probability < self.layerdrop:
                continue
            x = layer(x)
        return x
''', "random stream"),
    ('''import random
import torch


class Encoder(torch.nn.Module):
    def forward(self, x):
        for layer in self.layers:
            dropout_probability = random.uniform(0, 1)
            if self.training and dropout_probability < self.layerdrop:
                continue
            x = layer(x)
        return x
''', "random stream"),
    # TRAP: without apply_defaults a defaulted argument is missing from `.arguments` (KeyError), which a
    # lookup returning the default would hide
    (_bind_variant("        arguments.apply_defaults()\n", ""), "apply_defaults()` does not follow it"),
    # the bound arguments are used again: the fast path would leave them unbound
    (_bind_variant("        return func(self, *args, **kwargs)", "        return func(*arguments.args, **arguments.kwargs)"),
     "is used elsewhere in the function"),
    # the signature is computed at the call (each call may see another function)
    (_bind_variant("signature.bind(", "inspect.signature(func).bind("), "on a name"),
    # TRAP: the signature is rebound after the table would be read from it
    (_bind_variant("    return wrapper\n", "    signature = inspect.signature(wrapper)\n    return wrapper\n"),
     "is not bound once"),
    # bind given a keyword argument: not modelled by the lookup
    (_bind_variant("*args, **kwargs)\n        arguments.apply", "*args, flag=True, **kwargs)\n        arguments.apply"),
     "a keyword argument"),
    # TRAP: the text is read after the flag's `if` too: with the flag false it would be unbound
    (_debug_variant('        return h.relu()\n',
                    '        return h.relu(), msg\n'), 'outside the body of the `if`'),
    # TRAP: a statement between the text and the flag may change the tensor or the flag
    (_debug_variant('        if self.debug:\n',
                    '        h.add_(1)\n        if self.debug:\n'), 'not `if <flag>:`'),
    # a flag that calls: its evaluation may have effects the moved text would then see
    (_debug_variant('        if self.debug:\n',
                    '        if self.debug_on(h):\n'), 'not `if <flag>:`'),
    # TRAP: a format spec can raise (`{h:.2f}` on a tensor of more than one element)
    (_debug_variant('        msg = f"out: {repr(h)}"\n',
                    '        msg = f"out: {repr(h)} {h.sum():.2f}"\n'), 'format spec'),
    # another object's formatting may have effects
    (_debug_variant('        msg = f"out: {repr(h)}"\n',
                    '        msg = f"out: {repr(h)} {self.stats}"\n'), '`self.stats`'),
    # TRAP: a flag that is a property may change what the text shows (helper-90: print options set in its getter)
    (_debug_variant('    def forward(self, x):\n',
                    '    @property\n    def debug(self):\n        return False\n\n    def forward(self, x):\n'),
     'defines at class level'),
    # the text read in the flag's `else`: computed there only before the flag
    (_debug_variant('        return h.relu()\n',
                    '        else:\n            self.last = msg\n        return h.relu()\n'), 'outside the body'),
]

NOOP_EXAMPLES: list[str] = [
    # builtin isinstance traces; an f-string of a tensor does not break on torch 2.13
    '''import torch


def f(x, n):
    tag = f"{x}"
    if isinstance(n, int):
        return x * n
    return x
''',
    # the LayerDrop as transformers' torch models write it: the draw is already training-only
    '''import torch


class Encoder(torch.nn.Module):
    def forward(self, x):
        for layer in self.layers:
            if self.training:
                p = torch.rand([])
                if p < self.layerdrop:
                    continue
            x = layer(x)
        return x
''',
]
