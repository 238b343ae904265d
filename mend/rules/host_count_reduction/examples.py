"""host-count-reduction's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line). The site is the line
:func:`example_line` picks, unless an example names its own."""
from __future__ import annotations


def example_line(source: str) -> int:
    """The line of an example's site: its first `for` line over `.tolist()`, else its first `for`
    or line summing a comprehension (`n = sum(1 for s in ...)`)."""
    lines = [(i, t) for i, t in enumerate(source.splitlines(), 1) if t.lstrip().startswith("for ")
             or " for " in t and ("sum(" in t or "len([" in t) or ".tolist().count(" in t]
    if not lines:
        raise ValueError("no loop in example")
    return next((i for i, t in lines if ".tolist()" in t), lines[0][0])


FIX_EXAMPLES: list[tuple[str, str]] = [
    # a number's truth is `!= 0` (NaN true in both): `if v` counts the nonzero elements
    # (helper-68's c32)
    ('''import torch


def forward(self, x, keep):
    k = sum(1 for v in keep.tolist() if v)
    return x * k
''', '''import torch


def forward(self, x, keep):
    k = (keep != 0).sum()
    return x * k
'''),
    # list.count(C) of a literal C is the count of `s == C` (its `s is C` implies it); True is 1
    # (helper-68's c33)
    ('''import torch


def forward(self, x, flags):
    c = flags.tolist().count(True)
    return x * c
''', '''import torch


def forward(self, x, flags):
    c = (flags == 1).sum()
    return x * c
'''),
    # the count as one `sum` over a generator (a hidden-case probe): Python's sum starts at 0
    ('''import torch


def forward(self, x, lengths):
    n_long = sum(1 for l in lengths.tolist() if l > 5)
    return x * n_long
''', '''import torch


def forward(self, x, lengths):
    n_long = (lengths > 5).sum()
    return x * n_long
'''),
    # the comparison summed as bools; the list-length form; a step of 2
    ('''import torch


def forward(self, x, scores):
    hits = sum(s >= 0.5 for s in scores.tolist())
    return x - hits
''', '''import torch


def forward(self, x, scores):
    hits = (scores >= 0.5).sum()
    return x - hits
'''),
    ('''import torch


def forward(self, x, ids):
    n = len([i for i in ids.tolist() if i != 0])
    return x * n
''', '''import torch


def forward(self, x, ids):
    n = (ids != 0).sum()
    return x * n
'''),
    ('''import torch


def forward(self, x, ids):
    n = sum(2 for i in ids.tolist() if i < 3)
    return x * n
''', '''import torch


def forward(self, x, ids):
    n = 2 * (ids < 3).sum()
    return x * n
'''),
    # the threshold a Python-number attribute (bound only in __init__, to no tensor): its value is
    # read on the example run by count-compare-exact
    ('''import torch
from torch import nn


class Keep(nn.Module):
    def __init__(self, min_len=3):
        super().__init__()
        self.min_len = min_len

    def forward(self, x, lengths):
        n = 0
        for l in lengths.tolist():
            if l >= self.min_len:
                n += 1
        return x * n
''', '''import torch
from torch import nn


class Keep(nn.Module):
    def __init__(self, min_len=3):
        super().__init__()
        self.min_len = min_len

    def forward(self, x, lengths):
        n = 0
        n = n + (lengths >= self.min_len).sum()
        return x * n
'''),
    # shared case 031: a comment above the loop is kept
    ('''import torch


def forward(self, x):
    scores = torch.sigmoid(self.fc(x)).squeeze(-1)
    n_confident = 0
    # count the confident ones
    for s in scores.tolist():
        if s > 0.5:
            n_confident += 1
    return scores * n_confident
''', '''import torch


def forward(self, x):
    scores = torch.sigmoid(self.fc(x)).squeeze(-1)
    n_confident = 0
    # count the confident ones
    n_confident = n_confident + (scores > 0.5).sum()
    return scores * n_confident
'''),
    # a threshold not exact in bfloat16/float16 (helper-38): the loop kept under autocast, where
    # the scores may be computed in those dtypes; the comment stays above both
    ('''import torch


def forward(self, x):
    scores = self.fc(x).squeeze(-1)
    n_big = 0
    # count the big ones
    for s in scores.tolist():
        if s > 1.0009765625:
            n_big += 1
    return scores * n_big
''', '''import torch


def forward(self, x):
    scores = self.fc(x).squeeze(-1)
    n_big = 0
    # count the big ones
    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or scores.dtype in (torch.float16, torch.bfloat16):  # mend: the tensor may be float16/bfloat16 (autocast, a half model), where the threshold is not exact
        for s in scores.tolist():
            if s > 1.0009765625:
                n_big += 1
    else:
        n_big = n_big + (scores > 1.0009765625).sum()
    return scores * n_big
'''),
    # `C <cmp> s` is normalised; step 2; a use on the right of `-`
    ('''import torch


def f(logits, h):
    hits = 3
    for v in logits.float().tolist():
        if 0.25 >= v:
            hits += 2
    return h - hits
''', '''import torch


def f(logits, h):
    hits = 3
    hits = hits + 2 * (logits.float() <= 0.25).sum()
    return h - hits
'''),
    # an int tensor counted against an int; statements between init and loop that read n
    ('''import torch


class M(torch.nn.Module):
    def forward(self, ids, emb):
        nnz = 0
        base = emb * nnz
        for t in ids.tolist():
            if t != 0:
                nnz += 1
        return base + emb * nnz
''', '''import torch


class M(torch.nn.Module):
    def forward(self, ids, emb):
        nnz = 0
        base = emb * nnz
        nnz = nnz + (ids != 0).sum()
        return base + emb * nnz
'''),
    # a negative threshold, `<=`, an unused counter after the loop
    ('''import torch


def f(x):
    low = 0
    for s in x[0].tolist():
        if s <= -1.5:
            low += 1
    return x
''', '''import torch


def f(x):
    low = 0
    low = low + (x[0] <= -1.5).sum()
    return x
'''),
    # `==` against an integer-valued float; the use is an operand of `*` inside a call's argument
    ('''import torch


def f(mask, h):
    n = 0
    for m in mask.tolist():
        if m == 1.0:
            n += 1
    return torch.relu(h * n)
''', '''import torch


def f(mask, h):
    n = 0
    n = n + (mask == 1.0).sum()
    return torch.relu(h * n)
'''),
    # `<` with an int threshold on a float tensor, two uses
    ('''import torch


def f(x, y):
    small = 0
    for s in x.tolist():
        if s < 2:
            small += 1
    a = x * small
    return a + y * small
''', '''import torch


def f(x, y):
    small = 0
    small = small + (x < 2).sum()
    a = x * small
    return a + y * small
'''),
]

DECLINE_EXAMPLES: list[tuple[str, str]] = [
    # TRAP (helper-70): the count on the left of `*`: a 0-d int64 tensor there is cast to a
    # bfloat16 operand's dtype first (1001 becomes 1000), where the Python int met it in float32
    ('''import torch


def f(mask, h):
    n = sum(1 for v in mask.tolist() if v)
    return n * h
''', "on the left of `*`"),
    # list.count of a computed value (NaN is never a literal, but `float("nan")` is found by
    # identity only): declined
    ('''import torch


def forward(self, x, ids, pad):
    n = ids.tolist().count(pad)
    return x * n
''', "not a numeric literal, True or False"),
    # the count returned: its callers would get a tensor where they got an int
    ('''import torch


def forward(self, x, ids):
    n = ids.tolist().count(1)
    return n
''', "operand"),
    # a threshold that is a property: its getter ran once per element, the tensor count reads it
    # once (an adversarial review's getter had an effect)
    ("""import torch
from torch import nn


class Keep(nn.Module):
    def __init__(self):
        super().__init__()
        self.thr = 5

    @property
    def thr(self):
        return self._thr

    @thr.setter
    def thr(self, v):
        self._thr = v

    def forward(self, x, lengths):
        n = sum(1 for s in lengths.tolist() if s > self.thr)
        return x * n
""", "a Python-number attribute of the module"),
    # the comprehension forms: `sum` rebound, two `for`s, an element that is not a literal, a use
    ('''import torch

sum = torch.sum


def forward(self, x, ids):
    n = sum(1 for i in ids.tolist() if i > 0)
    return x * n
''', "binds `sum`"),
    ('''import torch


def forward(self, x, ids):
    n = sum(1 for row in ids.tolist() for i in row if i > 0)
    return x * n
''', "not one plain `for s in T.tolist()`"),
    ('''import torch


def forward(self, x, ids):
    n = sum(i for i in ids.tolist() if i > 0)
    return x * n
''', "is not `sum(<int literal>"),
    ('''import torch


def forward(self, x, ids):
    n = sum(1 for i in ids.tolist() if i > 0)
    return n
''', "returned"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return n
''', "returned directly"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    if n > 2:
        x = x * 2
    return x
''', "compared"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x[:n]
''', "index or slice"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    print(f"{n} confident")
    return x
''', "formatted"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return torch.zeros(n)
''', "passed to a call"),
    ('''import torch
def f(self, x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    self.count = n
    return x
''', "stored"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * (n + 1)
''', "Python literal"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
        else:
            n -= 1
    return x * n
''', "else/elif"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
            break
    return x * n
''', "break"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    else:
        n = 0
    return x * n
''', "`else` branch"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        print(s)
        if s > 0.5:
            n += 1
    return x * n
''', "not a single"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * n + s
''', "read after the loop"),
    ('''import torch
def f(x, y):
    n = 0
    n = y.shape[0]
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * n
''', "starts as"),
    ('''import torch
def f(x):
    n = 0
    x, n = x * 2, 1
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * n
''', "assigned between"),
    ('''import torch
def f(x):
    n = 0.0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * n
''', "not an int literal"),
    ('''import torch
def f(x):
    n = 0
    for s in list(x):
        if s > 0.5:
            n += 1
    return x * n
''', "not `<tensor>.tolist()`"),
    ('''import torch
def f(x, w):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += w
    return x * n
''', "not an int literal"),
    ('''import torch
def f(x, thr):
    n = 0
    for s in x.tolist():
        if s > thr:
            n += 1
    return x * n
''', "numeric literal"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if 0.1 < s < 0.9:
            n += 1
    return x * n
''', "one comparison"),
    ('''import torch
def f(xs):
    out = []
    for x in xs:
        n = 0
        for s in x.tolist():
            if s > 0.5:
                n += 1
        out.append(x * n)
    return out
''', "inside another loop"),
    ('''import torch
def f(x):
    n = 0
    get = lambda: n
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * get()
''', "captured"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():  # host loop, see issue 12
        if s > 0.5:
            n += 1
    return x * n
''', "comment"),
]

# No-op examples: source left unchanged on every line: a loop over a Python range, and the
# rule's own output (the count on the tensor is not a site).
DECLINE_EXAMPLES += [
    # a registered buffer (a tensor) is not a Python-number threshold
    ('''import torch
from torch import nn


class Keep(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("min_len", torch.tensor(3))

    def forward(self, x, lengths):
        n = 0
        for l in lengths.tolist():
            if l >= self.min_len:
                n += 1
        return x * n
''', "a Python-number attribute"),
]

NOOP_EXAMPLES: list[str] = [
    '''import torch


def f(x):
    n = 0
    for i in range(3):
        n += i
    return x * n
''',
    *(after for _, after in FIX_EXAMPLES),
]
