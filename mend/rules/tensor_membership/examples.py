"""tensor-membership's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py``
is generated: FIX (before, the exact text after), DECLINE (source, a substring of the
reason), NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample


def example_line(source: str) -> int | None:
    """The line of an example's site: its first ``if``/``elif`` line with `` in ``."""
    for i, text in enumerate(source.splitlines(), 1):
        if text.lstrip().startswith(("if ", "elif ")) and " in " in text:
            return i
    return None


_HEAD = '''import torch
from torch import nn


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.bias = nn.Parameter(torch.full((8,), 0.5))
        self.mask_token_id = 3

    def forward(self, input_ids):
        h = self.emb(input_ids)
'''

FIX_EXAMPLES = [
    # a learned bias added when the [MASK] token occurs (shared/cases-style membership test)
    (
        _HEAD + '''        if self.mask_token_id in input_ids:
            h = h + self.bias
        return h
''',
        _HEAD + '''        h = torch.where((self.mask_token_id == input_ids).any(), h + self.bias, h)  # mend: tensor-membership (was: if self.mask_token_id in input_ids)
        return h
''',
    ),
    # `not in`, an else side, an element that is an expression
    (
        '''import torch


def pad_bias(ids, h, pad):
    if pad + 1 not in ids:
        y = h * 2.0
    else:
        y = h
    return y
''',
        '''import torch


def pad_bias(ids, h, pad):
    y = torch.where(torch.logical_not(((pad + 1) == ids).any()), h * 2.0, h)  # mend: tensor-membership (was: if pad + 1 not in ids)
    return y
''',
    ),    # an elif chain of memberships: each test a tensor predicate (helper-34's case 4)
    (
        '''import torch


def route(ids, h, mask_id, pad_id):
    if mask_id in ids:
        h = h * 2
    elif pad_id not in ids:
        h = h - 1
    return h
''',
        '''import torch


def route(ids, h, mask_id, pad_id):
    h = torch.where((mask_id == ids).any(), h * 2, torch.where(torch.logical_not((pad_id == ids).any()), h - 1, h))  # mend: tensor-membership (was: if mask_id in ids)
    return h
''',
    ),
]

DECLINE_EXAMPLES = [
    # the branch itself cannot be predicated: the predicated rule's reason, named
    DeclineExample(
        _HEAD + '''        if self.mask_token_id in input_ids:
            print("masked")
        return h
''',
        "cannot be predicated",
    ),
    # a membership combined with another test: only a test that is one `v in t` is taken
    DeclineExample(
        _HEAD + '''        if self.mask_token_id in input_ids and h.sum() > 0:
            h = h + self.bias
        return h
''',
        "combines a membership test with other tests",
    ),
]

NOOP_EXAMPLES = [
    # Python's own membership: a literal container
    '''def pick(mode, x):
    if mode in ("a", "b"):
        x = x + 1
    return x
''',
]

# `if v in t: raise E(msg)`: a branch that only raises is predicated validation's (the test as
# `(v == t).any()` where the operands' types make it the same, else `v in t` itself; the raise as
# `torch._assert_async`, the exception restored at the boundary)
_RAISES = _HEAD + '''        if self.mask_token_id in input_ids:
            raise ValueError("the [MASK] token is not allowed here")
        return h
'''
FIX_EXAMPLES.append((_RAISES, 'import torch\nfrom torch import nn\n\n# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns\n# by mend.validation_runtime.install(model).\n_MEND_TRAPS = {\n    "6aba3c5e7b62": lambda: ValueError("the [MASK] token is not allowed here"),\n}\n\n\nclass Embed(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.emb = nn.Embedding(16, 8)\n        self.bias = nn.Parameter(torch.full((8,), 0.5))\n        self.mask_token_id = 3\n\n    def forward(self, input_ids):\n        h = self.emb(input_ids)\n        _mend_cond = (self.mask_token_id == input_ids).any() if type(input_ids) is torch.Tensor and (type(self.mask_token_id) is torch.Tensor or type(self.mask_token_id) in (int, float, bool)) else self.mask_token_id in input_ids\n        if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == \'cpu\' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):\n            torch._assert_async(\n                torch.logical_not(_mend_cond),\n                f"mend-trap:{__name__}:_MEND_TRAPS.6aba3c5e7b62",\n            )\n        elif _mend_cond:\n            raise ValueError("the [MASK] token is not allowed here")\n        return h\n'))
DECLINE_EXAMPLES.append(DeclineExample(
    # a formatted message: predicated validation restores only a literal one, so neither form applies
    _RAISES.replace('"the [MASK] token is not allowed here"', 'f"token {self.mask_token_id} is not allowed"'),
    "nor can its check move into the graph"))
DECLINE_EXAMPLES.append(DeclineExample(
    # an operand that calls: the typed test reads each operand twice (helper-59's review)
    _RAISES.replace("self.mask_token_id in input_ids", "self.mask_token_id in input_ids.flatten()"),
    "not a name or an attribute chain"))
