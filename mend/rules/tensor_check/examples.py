"""tensor-check's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample
from mend.rules.tensor_check.screen import DEFAULT_MESSAGE


def example_line(source: str) -> int:
    """The line of an example's site: its first `_check_tensor_all` line."""
    for i, text in enumerate(source.splitlines(), 1):
        if "_check_tensor_all(" in text or text.strip().startswith("check_all("):
            return i
    raise ValueError("no check in example")


_MSG = repr(DEFAULT_MESSAGE)

FIX_EXAMPLES: list[tuple[str, str]] = [
    # transformers 5.x torch_compilable_check (transformers/utils/import_utils.py:1993): the
    # traced branch of one shared helper breaks llava, paligemma, qwen2_vl...
    (
        '''import torch


def torch_compilable_check(cond, msg, error_type=ValueError):
    if is_tracing():
        if isinstance(cond, torch.Tensor):
            torch._check_tensor_all(cond)
        else:
            torch._check(cond)
        return
''',
        f'''import torch


def torch_compilable_check(cond, msg, error_type=ValueError):
    if is_tracing():
        if isinstance(cond, torch.Tensor):
            if isinstance(cond, torch.Tensor) and cond.dtype == torch.bool and cond.device.type == 'cpu':
                torch._assert_async(cond._is_all_true(), {_MSG})  # mend: tensor-check (was: torch._check_tensor_all(cond))
            else:
                torch._check_tensor_all(cond)
        else:
            torch._check(cond)
        return
''',
    ),
    # `torch` imported under another name, a comment line above kept
    (
        '''import torch as th


def check_rows(x, valid):
    # every row must be valid
    th._check_tensor_all(valid)
    return x * 2
''',
        f'''import torch as th


def check_rows(x, valid):
    # every row must be valid
    if isinstance(valid, th.Tensor) and valid.dtype == th.bool and valid.device.type == 'cpu':
        th._assert_async(valid._is_all_true(), {_MSG})  # mend: tensor-check (was: th._check_tensor_all(valid))
    else:
        th._check_tensor_all(valid)
    return x * 2
''',
    ),
    # a call written over several lines (an adversarial review crashed the first version)
    (
        '''import torch


def f(x, m):
    torch._check_tensor_all(
        m
    )
    return x
''',
        f'''import torch


def f(x, m):
    if isinstance(m, torch.Tensor) and m.dtype == torch.bool and m.device.type == 'cpu':
        torch._assert_async(m._is_all_true(), {_MSG})  # mend: tensor-check (was: torch._check_tensor_all(m))
    else:
        torch._check_tensor_all(m)
    return x
''',
    ),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # a string message, not a callable: torch 2.13 raises TypeError when the check fails
    # (helper-68's c08), which the reason says, rather than calling it a non-constant callable
    ('''import torch


def f(x):
    torch._check_tensor_all(x > 0, "x must be positive")
    return x
''', "the message is a string, not a callable"),
    # the message callable runs only when the check fails: its text is not known at trace time
    ('''import torch


def f(x):
    torch._check_tensor_all(x > 0, lambda: f"bad {x}")
    return x
''', "message callable"),
    # the hoisted condition's new local would show in locals()
    ('''import torch


def f(x):
    torch._check_tensor_all(x > 0)
    return locals()
''', "reads its own locals"),
    # helper-47: Python state changed before the check (a set grown, a counter advanced) is lost
    # when the check fails inside the compiled graph
    ('''import torch

SEEN = set()


def f(x, valid):
    SEEN.add(tuple(x.shape))
    torch._check_tensor_all(valid)
    return x
''', "changes state"),
    ('''import itertools

import torch

IDS = itertools.count()


def f(x, valid):
    n = next(IDS)
    torch._check_tensor_all(valid)
    return x * n
''', "changes state"),
    # helper-47: a caller in the module catches the failure, or changes state around the call
    ('''import torch

FAILED = {"count": 0}


def validate(ids, vocab):
    ok = ids < vocab
    torch._check_tensor_all(ok)


def forward(ids):
    try:
        validate(ids, 10)
    except RuntimeError:
        FAILED["count"] += 1
        raise
    return ids
''', "inside a `try`"),
    ('''import torch


def check_mask(mask):
    torch._check_tensor_all(mask)


def forward(x, mask, cache):
    cache.append(x)
    check_mask(mask)
    return x
''', "which calls `check_mask`, changes state"),
    # helper-50 (predicated-validation's twin): a grad-mode context around the check
    ('''import torch


def f(x, valid):
    with torch.no_grad():
        torch._check_tensor_all(valid)
    return x * 2
''', "under `torch.no_grad()`"),
    # imported by name, with no `import torch` for the rewrite's own calls
    ('''from torch import _check_tensor_all


def f(x, valid):
    _check_tensor_all(valid)
    return x * 2
''', "does not `import torch`"),
    # the handler would not see a failure raised when the compiled graph returns (adversarial review)
    ('''import torch


def lookup(emb, ids, vocab):
    in_range = ids < vocab
    try:
        torch._check_tensor_all(in_range)
    except RuntimeError:
        ids = ids.clamp(0, vocab - 1)
    return emb(ids)
''', "`try` around the check"),
    # state written before or after the check would be applied differently on a failing call
    ('''import torch


class Count(torch.nn.Module):
    def forward(self, x, m):
        self.calls += 1
        torch._check_tensor_all(m)
        return x
''', "changes state"),
    ('''import torch


def f(x, m):
    y = x * 2
    torch._check_tensor_all(m)
    x.add_(1)
    return y
''', "changes state"),
    ('''import torch


def f(xs, ms):
    for m in ms:
        torch._check_tensor_all(m)
    return xs
''', "inside a loop"),
    ('''import torch


def f(mask):
    torch._check_tensor_all(cond=mask)
    return mask
''', "first positional argument"),
    ('''import torch


def f(mask):
    torch._check_tensor_all(mask); y = mask.sum()
    return y
''', "shares its line"),
    ('''import torch


def f(mask):
    torch._check_tensor_all(mask)  # all rows valid
    return mask
''', "comment"),
    # adversarial review (fresh locals): `+x` is `torch.positive(x)`, which returns x itself, so
    # `h += 1.0` writes the caller's input; aot_eager would drop that write on a failing check
    ('''import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        h = +x
        h += 1.0
        ok = h > 0
        torch._check_tensor_all(ok)
        return h
''', "changes state"),
    # adversarial review: `self.get_buffer(...)` is a method returning module state, not a submodule
    ('''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("num_invalid", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        seen = self.get_buffer("num_invalid")
        seen += (x < 0).sum()
        ok = x >= 0
        torch._check_tensor_all(ok)
        return self.lin(x)
''', "changes state"),
]

FIX_EXAMPLES += [
    # a computed condition, read three times by the rewrite: bound to a local first, evaluated
    # once where the call evaluated it; a constant message callable becomes the message (a
    # generalisation probe); an attribute (maybe a property) is read once the same way
    (
        '''import torch


def f(x):
    torch._check_tensor_all(x > 0, lambda: "x must be positive")
    return x
''',
        '''import torch


def f(x):
    _mend_check_cond = x > 0
    if isinstance(_mend_check_cond, torch.Tensor) and _mend_check_cond.dtype == torch.bool and _mend_check_cond.device.type == 'cpu':
        torch._assert_async(_mend_check_cond._is_all_true(), 'x must be positive')  # mend: tensor-check (was: torch._check_tensor_all(x > 0, lambda: "x must be positive"))
    else:
        torch._check_tensor_all(_mend_check_cond, lambda: "x must be positive")
    return x
''',
    ),
    (
        '''import torch


class Gate(torch.nn.Module):
    def forward(self, x):
        torch._check_tensor_all(self.valid)
        return x * 2
''',
        f'''import torch


class Gate(torch.nn.Module):
    def forward(self, x):
        _mend_check_cond = self.valid
        if isinstance(_mend_check_cond, torch.Tensor) and _mend_check_cond.dtype == torch.bool and _mend_check_cond.device.type == 'cpu':
            torch._assert_async(_mend_check_cond._is_all_true(), {_MSG})  # mend: tensor-check (was: torch._check_tensor_all(self.valid))
        else:
            torch._check_tensor_all(_mend_check_cond)
        return x * 2
''',
    ),
]

# helper-47: a second check of the same function binds its own local (it was declined, "already
# uses the name", after the first was rewritten)
FIX_EXAMPLES += [
    (
        '''import torch


def f(x, _mend_check_cond):
    torch._check_tensor_all(x > 0)
    return x
''',
        f'''import torch


def f(x, _mend_check_cond):
    _mend_check_cond_2 = x > 0
    if isinstance(_mend_check_cond_2, torch.Tensor) and _mend_check_cond_2.dtype == torch.bool and _mend_check_cond_2.device.type == 'cpu':
        torch._assert_async(_mend_check_cond_2._is_all_true(), {_MSG})  # mend: tensor-check (was: torch._check_tensor_all(x > 0))
    else:
        torch._check_tensor_all(_mend_check_cond_2)
    return x
''',
    ),
]

# helper-47: the check imported from torch by name (`from torch import _check_tensor_all`)
FIX_EXAMPLES += [
    (
        '''import torch
from torch import _check_tensor_all as check_all


def f(x, valid):
    check_all(valid)
    return x * 2
''',
        f'''import torch
from torch import _check_tensor_all as check_all


def f(x, valid):
    if isinstance(valid, torch.Tensor) and valid.dtype == torch.bool and valid.device.type == 'cpu':
        torch._assert_async(valid._is_all_true(), {_MSG})  # mend: tensor-check (was: check_all(valid))
    else:
        check_all(valid)
    return x * 2
''',
    ),
]

# helper-78's c01: a message formatting attributes is formatted inside the graph, under a guard on
# each attribute's exact type (an int, float, str or bool formats without running user code)
FIX_EXAMPLES += [
    (
        '''import torch


class Embed(torch.nn.Module):
    def forward(self, ids):
        torch._check_tensor_all(ids < self.config.vocab, lambda: f"ids must be < {self.config.vocab!r}")
        return ids * 2
''',
        '''import torch


class Embed(torch.nn.Module):
    def forward(self, ids):
        _mend_check_cond = ids < self.config.vocab
        if isinstance(_mend_check_cond, torch.Tensor) and _mend_check_cond.dtype == torch.bool and _mend_check_cond.device.type == 'cpu' and type(self.config.vocab) in (int, bool):
            torch._assert_async(_mend_check_cond._is_all_true(), f"ids must be < {self.config.vocab!r}")  # mend: tensor-check (was: torch._check_tensor_all(ids < self.config.vocab, lambda: f"ids must be < {self.config.vocab!r}"))
        else:
            torch._check_tensor_all(_mend_check_cond, lambda: f"ids must be < {self.config.vocab!r}")
        return ids * 2
''',
    ),
]

DECLINE_EXAMPLES += [
    # a format spec may raise for some types (`{s:.2f}` of a str)
    ('''import torch


class Embed(torch.nn.Module):
    def forward(self, ids):
        torch._check_tensor_all(ids < 3, lambda: f"scale {self.scale:.2f}")
        return ids
''', "with a format spec"),
    # a property would run on every call
    ('''import torch


class Embed(torch.nn.Module):
    @property
    def vocab(self):
        return 16

    def forward(self, ids):
        torch._check_tensor_all(ids < 3, lambda: f"ids must be < {self.vocab}")
        return ids
''', "the class defines `vocab`"),
    # helper-82's A2: a field read only by the message (a step counter) would add a guard on its
    # value, recompiling at every call where the original compiled once
    ('''import torch


class Embed(torch.nn.Module):
    def forward(self, ids):
        torch._check_tensor_all(ids < 3, lambda: f"ids must be < 3 at step {self.step}")
        return ids
''', "the check's condition does not read"),
    # a local's value may be a tensor
    ('''import torch


class Embed(torch.nn.Module):
    def forward(self, ids):
        n = ids.max()
        torch._check_tensor_all(ids < 3, lambda: f"max id {n}")
        return ids
''', "not an attribute `self.<name>`"),
]

NOOP_EXAMPLES: list[str] = [
    # torch._check on a Python bool/SymBool traces: nothing to rewrite
    '''import torch


def f(x, n):
    torch._check(n >= 0)
    return x[:n]
''',
]
