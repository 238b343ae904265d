"""item-operand's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

import re

from mend.rules._base import DeclineExample

_READ = re.compile(r"^\w+\s*=\s*.*\.item\(\)\)?\s*(#.*)?$")   # `int(T.item())` too


def example_line(source: str) -> int:
    """The line of an example's site: its first ``x = T.item()`` (or ``x = int(T.item())``)."""
    for i, text in enumerate(source.splitlines(), 1):
        if _READ.match(text.strip()):
            return i
    raise ValueError("no `x = T.item()` in example")


_HEAD = '''import torch
from torch import nn


class Pool(nn.Module):
'''

FIX_EXAMPLES: list[tuple[str, str]] = [
    # a masked mean divided by the count read back as a number (mean pooling)
    (_HEAD + '''    def forward(self, h, mask):
        n = mask.sum().item()  # tokens kept
        pooled = (h * mask[..., None]).sum(dim=1)
        return pooled / n
''', _HEAD + '''    def forward(self, h, mask):
        n = mask.sum().item() if torch.jit.is_scripting() else (mask.sum().item() if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else mask.sum().detach().reshape(()).clone())  # mend: item-operand (was: n = mask.sum().item()) # tokens kept
        pooled = (h * mask[..., None]).sum(dim=1)
        return pooled / n
'''),
    # a scale on the left of `*`, a comparison, and `-` with the number first
    (_HEAD + '''    def forward(self, h, t):
        s = t.max().item()
        y = s * h
        keep = h > s
        return (s - y) * keep
''', _HEAD + '''    def forward(self, h, t):
        s = t.max().item() if torch.jit.is_scripting() else (t.max().item() if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else t.max().detach().reshape(()).clone())  # mend: item-operand (was: s = t.max().item())
        y = s * h
        keep = h > s
        return (s - y) * keep
'''),
    # read in place: a learned temperature divided by as a number (held-out review case 307); the
    # value meets `logits` at once, so it stays a detached 0-d tensor right there
    (_HEAD + '''    def forward(self, logits):
        return logits / self.log_t.exp().item()
''', _HEAD + '''    def forward(self, logits):
        return logits / (self.log_t.exp().item() if torch.jit.is_scripting() else (self.log_t.exp().item() if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else self.log_t.exp().detach().reshape(()).clone()))  # mend: item-operand (was: return logits / self.log_t.exp().item())
''', 7),
    # a count of nonzero's rows (a dynamic-shape operator, then a host number) normalising a sum:
    # the same count, 0-d int64, from count_nonzero
    (_HEAD + '''    def forward(self, h, mask):
        n = len(mask.nonzero())
        total = h.sum()
        return total / n
''', _HEAD + '''    def forward(self, h, mask):
        n = torch.count_nonzero(mask).item() if torch.jit.is_scripting() else (torch.count_nonzero(mask).item() if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else torch.count_nonzero(mask).detach().reshape(()).clone())  # mend: item-operand (was: n = len(mask.nonzero()))
        total = h.sum()
        return total / n
''', 7),
    # a Python number a tensor test chooses (helper-72's b05): a 0-d tensor chosen by torch.where,
    # float64 since 0.1 is no float32 (torch.where(c, 0.1, 0.3) would be float32: the trap)
    (_HEAD + '''    def forward(self, h):
        scale = 0.1 if h.mean() > 0 else 0.3
        return h * scale
''', _HEAD + '''    def forward(self, h):
        scale = (0.1 if h.mean() > 0 else 0.3) if torch.jit.is_scripting() else ((0.1 if h.mean() > 0 else 0.3) if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else (torch.where(_mend_p.reshape(()).bool(), torch.tensor(0.1, dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64)) if type(_mend_p := h.mean() > 0) is torch.Tensor and _mend_p.numel() == 1 else (0.1 if _mend_p else 0.3)))  # mend: item-operand (was: scale = 0.1 if h.mean() > 0 else 0.3)
        return h * scale
''', 7),
    # its statement form, with ints: one line (float32 where both values are float32 values)
    (_HEAD + '''    def forward(self, h):
        if torch.isnan(h).any():
            k = 2
        else:
            k = -3
        return h * k
''', _HEAD + '''    def forward(self, h):
        # if torch.isnan(h).any():
        #     k = 2
        # else:
        k = (2 if torch.isnan(h).any() else -3) if torch.jit.is_scripting() else ((2 if torch.isnan(h).any() else -3) if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else (torch.where(_mend_p.reshape(()).bool(), torch.tensor(2, dtype=torch.int64), torch.tensor(-3, dtype=torch.int64)) if type(_mend_p := torch.isnan(h).any()) is torch.Tensor and _mend_p.numel() == 1 else (2 if _mend_p else -3)))  # mend: item-operand (was: the `if` above)
        return h * k
''', 7),
    # an if/elif/else chain of constants (helper-73's c05): nested torch.where; the elif's test is a
    # comparison of a name with a literal, which may run where the original did not reach it
    (_HEAD + '''    def forward(self, h):
        m = h.abs().amax()
        if m > 10:
            s = 0.125
        elif m > 1:
            s = 0.5
        else:
            s = 1.0
        return h * s
''', _HEAD + '''    def forward(self, h):
        m = h.abs().amax()
        # if m > 10:
        #     s = 0.125
        # elif m > 1:
        #     s = 0.5
        # else:
        s = (0.125 if m > 10 else 0.5 if m > 1 else 1.0) if torch.jit.is_scripting() else ((0.125 if m > 10 else 0.5 if m > 1 else 1.0) if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else (torch.where(_mend_p0.reshape(()).bool(), torch.tensor(0.125, dtype=torch.float32), torch.where(_mend_p1.reshape(()).bool(), torch.tensor(0.5, dtype=torch.float32), torch.tensor(1.0, dtype=torch.float32))) if type(_mend_p0 := m > 10) is torch.Tensor and _mend_p0.numel() == 1 and type(_mend_p1 := m > 1) is torch.Tensor and _mend_p1.numel() == 1 else (0.125 if _mend_p0 else 0.5 if m > 1 else 1.0)))  # mend: item-operand (was: the `if` above)
        return h * s
''', 8),
    # `int(T.item())` (helper-73's c08): the same int for an integer T; a float T is refuted from
    # its observed dtype (int() truncates)
    (_HEAD + '''    def forward(self, h, mask):
        n = int(mask.sum().item())
        total = h.sum(dim=1)
        return total / n
''', _HEAD + '''    def forward(self, h, mask):
        n = int(mask.sum().item()) if torch.jit.is_scripting() else (int(mask.sum().item()) if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or torch.get_default_dtype() != torch.float32 else mask.sum().detach().reshape(()).clone())  # mend: item-operand (was: n = int(mask.sum().item()))
        total = h.sum(dim=1)
        return total / n
''', 7),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # TRAP (helper-71): the read buffer written in place after the read; eager keeps the copy,
    # aot_eager and inductor in training gave backward the written value (x.grad doubled)
    (_HEAD + '''    def forward(self, x):
        t = self.temp.item()
        self.temp.mul_(0.5)
        return x / t
''', "written in place"),
    (_HEAD + '''    def forward(self, x):
        y = x / self.temp.item()
        self.temp[...] = 1.0
        return y
''', "written in place"),
    # read under autocast(enabled=False), used outside it, where autocast may be on (helper-38:
    # the guard saw autocast off and kept a 0-d float32 tensor; bfloat16 logits met it)
    (_HEAD + '''    def forward(self, h, t):
        with torch.autocast("cpu", enabled=False):
            s = t.max().item()
        return (h * s).relu()
''', "used outside it"),
    # the number steers Python control flow: a tensor there is a branch on a tensor
    (_HEAD + '''    def forward(self, h, t):
        s = t.max().item()
        if s > 0:
            h = h * 2
        return h
''', "with a Python literal"),
    # a flag steering Python control flow (longformer's `is_global_attn = ....any().item()`)
    (_HEAD + '''    def forward(self, h, mask):
        is_global = mask.any().item()
        if is_global:
            h = h * 2
        return h
''', "used as a truth value"),
    # divided by a literal: the quotient would become a tensor (helper-71: once explained as a
    # division by a tensor)
    (_HEAD + '''    def forward(self, h, t):
        n = t.sum().item()
        return h * (n / 3)
''', "with a Python literal"),
    # x / tensor: Tensor.__rtruediv__ is reciprocal() * x, torch.div rounds once
    (_HEAD + '''    def forward(self, h, t):
        s = t.sum().item()
        return s / h
''', "divides by a tensor"),
    # a Python literal meets the number: double arithmetic before the tensor sees it
    (_HEAD + '''    def forward(self, h, t):
        s = t.sum().item()
        return h / (s + 1e-6)
''', "with a Python literal"),
    # passed to a call (a size, a format, a list)
    (_HEAD + '''    def forward(self, h, t):
        n = t.sum().item()
        return h.new_zeros(n)
''', "passed to a call"),
    # returned: the caller sees a tensor where it saw a number
    (_HEAD + '''    def forward(self, h, t):
        n = t.sum().item()
        return n
''', "returned directly"),
    # bound twice: a later read may see the other binding
    (_HEAD + '''    def forward(self, h, t):
        n = t.sum().item()
        h = h * n
        n = 2
        return h * n
''', "reassigned or deleted"),
    # captured by a closure
    (_HEAD + '''    def forward(self, h, t):
        n = t.sum().item()
        f = lambda v: v * n
        return f(h)
''', "captured by a nested function"),
    # a power: pow with a Python exponent takes fast paths (sqrt for 0.5: -0.0 differs)
    (_HEAD + '''    def forward(self, h, t):
        p = t.mean().item()
        return h ** p
''', "an operand of an operator"),
    # under `and`/`or`: the operand may not be evaluated where facts are observed
    (_HEAD + '''    def forward(self, h, t, flag: bool):
        s = t.mean().item()
        return flag and h * s
''', "sits under `and`/`or`"),
    # read in place with the number on the left of `/`: __rtruediv__ rounds twice
    DeclineExample(_HEAD + '''    def forward(self, h, t):
        return t.sum().item() / h
''', "Tensor.__rtruediv__", 7),
    # a count of nonzero's rows where the module rebinds `len`: maybe not the builtin
    DeclineExample("len = max\n" + _HEAD + '''    def forward(self, h, mask):
        n = len(mask.nonzero())
        return h * n
''', "binds `len`", 8),
    # a chosen number used as a Python number (a call's argument): no tensor may take its place
    (_HEAD + '''    def forward(self, h):
        p = 0.1 if h.mean() > 0 else 0.0
        return nn.functional.dropout(h, p)
''', "is passed to a call", 7),
    # the statement form with a comment inside, which the one line would drop
    (_HEAD + '''    def forward(self, h):
        if h.mean() > 0:
            k = 2  # positive
        else:
            k = 1
        return h * k
''', "has comments inside", 7),
    # an elif test that calls something: it would run where the original did not reach it
    (_HEAD + '''    def forward(self, h):
        if h.abs().amax() > 10:
            s = 0.125
        elif h.sum() > 0:
            s = 0.5
        else:
            s = 1.0
        return h * s
''', "would run even where the original did not reach it", 7),
    # `int` rebound in the module: `int(...)` may not be the builtin
    (_HEAD + '''    def forward(self, h, mask):
        n = int(mask.sum().item())
        return h * n


int = float
''', "binds `int`", 7),
    # a star import may rebind `int` too (helper-76: a helper module's `int` differed for |v| >= 100)
    (_HEAD.replace("from torch import nn", "from torch import nn\nfrom helpers import *") + '''    def forward(self, h, mask):
        n = int(mask.sum().item())
        return h * n
''', "star-imports", 8),
]

NOOP_EXAMPLES: list[str] = [
    # `as_tuple=True` gives one tensor per dimension: its `len` is the rank, not a count
    _HEAD + '''    def forward(self, h, mask):
        n = len(mask.nonzero(as_tuple=True))
        return h * n
''',
    # the second dimension of nonzero's rows is the rank
    _HEAD + '''    def forward(self, h, mask):
        n = mask.nonzero().shape[1]
        return h * n
''',
    # a tensor kept as a tensor: nothing to do
    _HEAD + '''    def forward(self, h, t):
        s = t.max()
        return h * s
''',
]
