"""state-write's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

import re

from mend.rules._base import DeclineExample

_SLICE_WRITE = re.compile(r"^[\w.]+\[.*:.*\]\s*=[^=]")
_SCALAR_STORE = re.compile(r"^self\.\w+(\[[^\]]*\])?\s*=\s*.*(\.item\(\)|\bint\(|\bfloat\()")


def example_line(source: str) -> int:
    """The line of an example's site: its first slice write or scalar store on ``self``."""
    for i, text in enumerate(source.splitlines(), 1):
        s = text.strip()
        if _SLICE_WRITE.match(s) or _SCALAR_STORE.match(s):
            return i
    raise ValueError("no write in example")


_HEAD = '''import torch
from torch import nn


class Cache(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 16, 4))
        self.register_buffer("pos", torch.tensor(0))

'''

FIX_EXAMPLES: list[tuple[str, str]] = [
    # a ring-style write clamped into the cache, with the length guarded: provable
    (_HEAD + '''    def forward(self, k):
        if k.shape[1] > self.cache.shape[1]:
            raise ValueError("chunk longer than the cache")
        start = self.pos.clamp(0, self.cache.shape[1] - k.shape[1])
        end = start + k.shape[1]
        self.cache[:, start:end] = k
        return self.cache * 2
''', _HEAD + '''    def forward(self, k):
        if k.shape[1] > self.cache.shape[1]:
            raise ValueError("chunk longer than the cache")
        start = self.pos.clamp(0, self.cache.shape[1] - k.shape[1])
        end = start + k.shape[1]
        self.cache.narrow(1, start, k.shape[1]).copy_(k.expand_as(self.cache.narrow(1, start, k.shape[1])))  # mend: state-write (was: self.cache[:, start:end] = k)
        return self.cache * 2
'''),
    # `%` into a fixed window, the end inline, `torch._check` on sizes, a function's local cache
    ('''import torch


def write(cache, k, pos):
    n = k.size(1)
    torch._check(n <= 4)
    torch._check(cache.shape[2] > 3)
    start = pos % (cache.shape[2] - 3)
    cache[:, :, start:start + n] = k
    return cache
''', '''import torch


def write(cache, k, pos):
    n = k.size(1)
    torch._check(n <= 4)
    torch._check(cache.shape[2] > 3)
    start = pos % (cache.shape[2] - 3)
    cache.narrow(2, start, n).copy_(k.expand_as(cache.narrow(2, start, n)))  # mend: state-write (was: cache[:, :, start:start + n] = k)
    return cache
'''),
]

_GUARDED = _HEAD + '''    def forward(self, k, flag: bool = False):
        if k.shape[1] > self.cache.shape[1]:
            raise ValueError("chunk longer than the cache")
        start = self.pos.clamp(0, self.cache.shape[1] - k.shape[1])
        end = start + k.shape[1]
        {between}
        self.cache[:, start:end] = k
        return self.cache * 2
'''

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # helper-48: a call between the bounds and the write may shrink or replace the cache (a
    # method of an attribute, a free function), or change a bound in place through an alias
    (_GUARDED.format(between="self.kv.evict(k.shape[1])"), "runs between the bounds"),
    (_GUARDED.format(between="maybe_shrink(self, 8)"), "runs between the bounds"),
    (_GUARDED.format(between="cursor = start\n        if flag:\n            cursor += k.shape[1]"),
     "runs between the bounds"),
    # helper-48: in a loop, what follows the write (the cache replaced) runs before the next one
    (_HEAD + '''    def forward(self, ks, evict: bool = False):
        start = self.pos.clamp(0, self.cache.shape[1] - 1)
        end = start + 1
        for k in ks.split(1, dim=1):
            self.cache[:, start:end] = k
            if evict:
                self.cache = self.cache[:, :-1].clone()
        return self.cache * 2
''', "sits in a loop"),
    # the KV-cache write as usually written: `self.pos` is any value, the end may pass the size
    (_HEAD + '''    def forward(self, k):
        start = self.pos
        end = start + k.shape[1]
        self.cache[:, start:end] = k
        return self.cache * 2
''', "bounds not provably in range: slicing clamps, narrow raises"),
    # clamped, but a chunk longer than the cache makes the clamp's max negative (clamp gives max)
    (_HEAD + '''    def forward(self, k):
        start = self.pos.clamp(0, self.cache.shape[1] - k.shape[1])
        self.cache[:, start:start + k.shape[1]] = k
        return self.cache * 2
''', "bounds not provably in range"),
    # a negative start: slicing counts from the end (a shorter slice), narrow wraps and writes
    (_HEAD + '''    def forward(self, k):
        if k.shape[1] > 4:
            raise ValueError("chunk too long")
        start = self.pos.clamp(-4, 8)
        self.cache[:, start:start + k.shape[1]] = k
        return self.cache
''', "bounds not provably in range"),
    # a length that is not the value's: `+ 8` passes the size for start near 16
    (_HEAD + '''    def forward(self, k):
        start = self.pos.clamp(0, 12)
        self.cache[:, start:start + 8] = k
        return self.cache
''', "bounds not provably in range"),
    # the end is a tensor of its own: no int length
    (_HEAD + '''    def forward(self, k, end):
        start = self.pos
        self.cache[:, start:end] = k
        return self.cache
''', "not written as the start plus a length"),
    # state changes between the clamp and the write
    (_HEAD + '''    def forward(self, k):
        if k.shape[1] > self.cache.shape[1]:
            raise ValueError("chunk longer than the cache")
        start = self.pos.clamp(0, self.cache.shape[1] - k.shape[1])
        self.cache = torch.zeros(2, 4, 4)
        self.cache[:, start:start + k.shape[1]] = k
        return self.cache
''', "runs between the bounds' definitions"),
    # an Ellipsis moves the dimension
    (_HEAD + '''    def forward(self, k):
        start = self.pos.clamp(0, 0)
        self.cache[..., start:start + 1] = k
        return self.cache
''', "only `:` is supported"),
    # the value is an expression: the rewrite would evaluate it after the bounds
    (_HEAD + '''    def forward(self, k):
        start = self.pos.clamp(0, 0)
        self.cache[:, start:start + 1] = k * 2
        return self.cache
''', "not a plain name or attribute"),
    # a Python number kept on the module for the next call (issue 10 kind 7 (a))
    ('''import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.t = 1.0

    def forward(self, x):
        y = x * self.t
        self.t = x.sum().item()
        return y
''', "changes the attribute's type for every reader"),
    ('''import torch
from torch import nn


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x, n):
        self.step = int(n)
        return x * 2
''', "changes the attribute's type"),
    # shared case 020: a float metric logged into a dict (the stored type would change)
    ('''import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.fc = nn.Linear(dim, 1)
        self.logged = {}

    def forward(self, x, target):
        pred = self.fc(x).squeeze(-1)
        loss = F.mse_loss(pred, target)
        self.logged["train_loss"] = float(loss.detach())
        return loss * 0.5
''', "not a slice write"),
]

NOOP_EXAMPLES: list[str] = [
    # a 0-d tensor index (index_put) and Python-int bounds compile without a break
    _HEAD + '''    def forward(self, k, n: int):
        self.cache[:, self.pos] = k[:, 0]
        y = k * 2
        return self.cache.sum() + y.sum()
''',
]
