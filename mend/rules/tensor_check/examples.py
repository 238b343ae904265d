"""tensor-check's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample
from mend.rules.tensor_check.screen import DEFAULT_MESSAGE


def example_line(source: str) -> int:
    """The line of an example's site: its first `_check_tensor_all` line."""
    for i, text in enumerate(source.splitlines(), 1):
        if "_check_tensor_all(" in text:
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
            if isinstance(cond, torch.Tensor) and cond.dtype == torch.bool:
                torch._assert_async(cond.all(), {_MSG})  # mend: tensor-check (was: torch._check_tensor_all(cond))
            else:
                torch._check_tensor_all(cond)
        else:
            torch._check(cond)
        return
''',
    ),
    # an attribute condition, `torch` imported under another name, a comment line above kept
    (
        '''import torch as th


class Gate(th.nn.Module):
    def forward(self, x):
        # every row must be valid
        th._check_tensor_all(self.valid)
        return x * 2
''',
        f'''import torch as th


class Gate(th.nn.Module):
    def forward(self, x):
        # every row must be valid
        if isinstance(self.valid, th.Tensor) and self.valid.dtype == th.bool:
            th._assert_async(self.valid.all(), {_MSG})  # mend: tensor-check (was: th._check_tensor_all(self.valid))
        else:
            th._check_tensor_all(self.valid)
        return x * 2
''',
    ),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # the message callable runs only when the check fails: its text is not known at trace time
    ('''import torch


def f(x):
    torch._check_tensor_all(x > 0, lambda: f"bad {x}")
    return x
''', "message callable"),
    # a computed condition would be evaluated three times by the rewrite
    ('''import torch


def f(x):
    torch._check_tensor_all(x > 0)
    return x
''', "not a plain name or attribute"),
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
]

NOOP_EXAMPLES: list[str] = [
    # torch._check on a Python bool/SymBool traces: nothing to rewrite
    '''import torch


def f(x, n):
    torch._check(n >= 0)
    return x[:n]
''',
]
