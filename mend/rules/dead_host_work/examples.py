"""dead-host-work's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample

_SITES = ("jit.isinstance(", "repr(", "str(", "random.", ".bind(")


def example_line(source: str) -> int:
    """The line of an example's site: the first line holding one of the rule's constructs."""
    for i, text in enumerate(source.splitlines(), 1):
        if any(s in text for s in _SITES) and not text.lstrip().startswith(("#", "import", "from", "def ")):
            return i
    raise ValueError("no site in example")


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
    if type(h) is not torch.Tensor:  # mend: dead-host-work (a plain tensor's repr() is pure; `dbg` is never read)
        dbg = repr(h)
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
    if type(h) is not torch.Tensor:  # mend: dead-host-work (a plain tensor's str() is pure; `text` is never read)
        text = str(h)  # debugging
    return h + 1
'''),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
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
    # transformers 5.24 select_hidden_states (utils/output_capturing.py:298): bind validates the call
    ('''import inspect


def select(func):
    signature = inspect.signature(func)

    def wrapper(self, *args, **kwargs):
        arguments = signature.bind(self, *args, **kwargs)
        arguments.apply_defaults()
        kwargs["output_hidden_states"] = arguments.arguments["vision_feature_layer"]
        return func(self, *args, **kwargs)
    return wrapper
''', "precomputed lookup"),
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
