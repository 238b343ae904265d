"""numpy-constants' examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample


def example_line(source: str) -> int:
    """The line of an example's site: its first line calling a numpy sum, prod, lcm or gcd (an
    example whose site is a statement starting on an earlier line gives it explicitly)."""
    for i, text in enumerate(source.splitlines(), 1):
        if any(f".{f}(" in text for f in ("sum", "prod", "lcm", "gcd", "max", "min")) and "import" not in text:
            return i
    raise ValueError("no numpy call in example")


FIX_EXAMPLES: list[tuple] = [
    # transformers perceiver (modeling_perceiver.py:2292): an element of torch.reshape's shape sequence reads
    # np.int64 and int alike (through __index__; observed by the verifier's probe)
    (
        '''import numpy as np
import torch


def flatten_index_dims(x):
    return torch.reshape(x, [x.shape[0], np.prod(x.shape[1:-1]), x.shape[-1]])
''',
        '''import numpy as np
import torch; import math


def flatten_index_dims(x):
    return torch.reshape(x, [x.shape[0], (lambda v: math.prod(v) if (type(v) is list or type(v) is tuple or type(v) is torch.Size) and 0 < len(v) < 2**31 and all([type(e) is int and 0 < e < 2**31 for e in v]) and math.prod(v) < 2**63 else np.prod(v))(x.shape[1:-1]), x.shape[-1]])  # mend: numpy-constants (was: np.prod(x.shape[1:-1]))
''',
    ),
    # big_bird / bigbird_pegasus `_bigbird_block_rand_mask_with_head` (modeling_big_bird.py:907): the
    # real site; the slice may be empty, the plan may hold numpy ints: the guard keeps np.sum then
    (
        'import numpy as np\n\n\ndef rand_mask(num_blocks, num_heads, plan_num_rand_blocks, max_plan_idx):\n    rand_attn = [\n        np.zeros((num_blocks, np.sum(plan_num_rand_blocks[: max_plan_idx + 1])), dtype=np.int32)\n        for i in range(num_heads)\n    ]\n    return rand_attn\n',
        'import numpy as np\n\n\ndef rand_mask(num_blocks, num_heads, plan_num_rand_blocks, max_plan_idx):\n    rand_attn = [\n        np.zeros((num_blocks, (lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(plan_num_rand_blocks[: max_plan_idx + 1])), dtype=np.int32)\n        for i in range(num_heads)\n    ]  # mend: numpy-constants (was: np.sum(plan_num_rand_blocks[: max_plan_idx + 1]))\n    return rand_attn\n',
        5,
    ),
    # float() as the consumer: float(np.int64(k)) and float(k) round k once, alike (helper-64's c13)
    (
        'import numpy as np\n\n\ndef scale(h, lengths):\n    return h * float(np.sum(lengths))\n',
        'import numpy as np\n\n\ndef scale(h, lengths):\n    return h * float((lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(lengths))  # mend: numpy-constants (was: np.sum(lengths))\n',
    ),
    # numpy under another name, and int() as the consumer (big_bird's training path, :926)
    (
        'import numpy as onp\n\n\ndef count(plan, k):\n    return int(onp.sum(plan[:k]))\n',
        'import numpy as onp\n\n\ndef count(plan, k):\n    return int((lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else onp.sum(v))(plan[:k]))  # mend: numpy-constants (was: onp.sum(plan[:k]))\n',
    ),
    # a size of a tensor's `.view()` through a local (helper-78's c14, an MoE's split sizes): a tensor's and
    # an array's view/reshape take np.int64 and int alike; the receiver's type rests on the method's name
    # (numpy-method-receiver, unknown: an unsafe fix)
    (
        'import numpy as np\nimport torch\n\n\ndef f(h, split_sizes):\n    total = np.sum(split_sizes)\n    return torch.split(h.view(-1, total), split_sizes, dim=-1)\n',
        'import numpy as np\nimport torch\n\n\ndef f(h, split_sizes):\n    total = (lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(split_sizes)  # mend: numpy-constants (was: np.sum(split_sizes))\n    return torch.split(h.view(-1, total), split_sizes, dim=-1)\n',
        7,
    ),
    # one tuple of sizes, the only argument of `.reshape()`
    (
        'import numpy as np\n\n\ndef f(h, sizes):\n    return h.reshape((h.shape[0], np.sum(sizes)))\n',
        'import numpy as np\n\n\ndef f(h, sizes):\n    return h.reshape((h.shape[0], (lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(sizes)))  # mend: numpy-constants (was: np.sum(sizes))\n',
    ),
    # another function's `max=` parameter and a class attribute `min` cannot reach the guard in forward
    # (helper-79's c09: every site of the file declined)
    (
        'import numpy as np\nimport torch\n\n\ndef clamp(x, min=0.0, max=1.0):\n    return x.clamp(min, max)\n\n\nclass Model(torch.nn.Module):\n    min = 0.0\n\n    def forward(self, x):\n        return torch.zeros(x.shape[0], np.max(self.widths))\n',
        'import numpy as np\nimport torch\n\n\ndef clamp(x, min=0.0, max=1.0):\n    return x.clamp(min, max)\n\n\nclass Model(torch.nn.Module):\n    min = 0.0\n\n    def forward(self, x):\n        return torch.zeros(x.shape[0], (lambda v: max(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.max(v))(self.widths))  # mend: numpy-constants (was: np.max(self.widths))\n',
    ),
    # np.lcm sizing a torch allocation (not reformer's returned lcm, which is declined)
    (
        'import math\n\nimport numpy as np\nimport torch\n\n\ndef pad(x, a, b):\n    return torch.zeros(x.shape[0], np.lcm(a, b))\n',
        'import math\n\nimport numpy as np\nimport torch\n\n\ndef pad(x, a, b):\n    return torch.zeros(x.shape[0], (lambda a, b: math.lcm(a, b) if type(a) is int and type(b) is int and -2**31 < a < 2**31 and -2**31 < b < 2**31 else np.lcm(a, b))(a, b))  # mend: numpy-constants (was: np.lcm(a, b))\n',
    ),
    # np.lcm without `import math` in the module: the import is added to the last import line (no line moves)
    (
        'import numpy as np\n\n\ndef f(a, b, n):\n    return np.zeros((n, np.lcm(a, b)))\n',
        'import numpy as np; import math\n\n\ndef f(a, b, n):\n    return np.zeros((n, (lambda a, b: math.lcm(a, b) if type(a) is int and type(b) is int and -2**31 < a < 2**31 and -2**31 < b < 2**31 else np.lcm(a, b))(a, b)))  # mend: numpy-constants (was: np.lcm(a, b))\n',
    ),
    # a ViT/MAE-style patchify: the flatten width from np.prod of the constant patch size, read by int();
    # the guard needs positive ints and an exact product below 2**63 (np.prod wraps in int64)
    (
        'import numpy as np\nimport torch\n\n\nclass Patchify(torch.nn.Module):\n    def __init__(self, patch_size=(4, 4)):\n        super().__init__()\n        self.patch_size = patch_size\n\n    def forward(self, x):\n        patch_dim = int(np.prod(self.patch_size)) * x.shape[1]\n        return x.reshape(x.shape[0], -1, patch_dim)\n',
        'import numpy as np\nimport torch; import math\n\n\nclass Patchify(torch.nn.Module):\n    def __init__(self, patch_size=(4, 4)):\n        super().__init__()\n        self.patch_size = patch_size\n\n    def forward(self, x):\n        patch_dim = int((lambda v: math.prod(v) if (type(v) is list or type(v) is tuple or type(v) is torch.Size) and 0 < len(v) < 2**31 and all([type(e) is int and 0 < e < 2**31 for e in v]) and math.prod(v) < 2**63 else np.prod(v))(self.patch_size)) * x.shape[1]  # mend: numpy-constants (was: np.prod(self.patch_size))\n        return x.reshape(x.shape[0], -1, patch_dim)\n',
    ),
    # np.prod sizing a torch allocation, `import math` already there
    (
        'import math\n\nimport numpy as np\nimport torch\n\n\ndef buf(x, dims):\n    return torch.zeros(x.shape[0], np.prod(dims))\n',
        'import math\n\nimport numpy as np\nimport torch\n\n\ndef buf(x, dims):\n    return torch.zeros(x.shape[0], (lambda v: math.prod(v) if (type(v) is list or type(v) is tuple or type(v) is torch.Size) and 0 < len(v) < 2**31 and all([type(e) is int and 0 < e < 2**31 for e in v]) and math.prod(v) < 2**63 else np.prod(v))(dims))  # mend: numpy-constants (was: np.prod(dims))\n',
    ),
    # range() as the consumer, in a loop header
    (
        'import numpy as np\n\n\ndef rows(plan):\n    out = []\n    for i in range(np.sum(plan)):\n        out.append(i)\n    return out\n',
        'import numpy as np\n\n\ndef rows(plan):\n    out = []\n    for i in range((lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(plan)):\n        out.append(i)\n    return out\n',
    ),
    # a comparison with a size in an `if` test: only its truth is used (np.bool_ and bool alike)
    (
        'import numpy as np\n\n\ndef f(x, plan):\n    if np.sum(plan) > x.shape[1]:\n        x = x * 2\n    return x\n',
        'import numpy as np\n\n\ndef f(x, plan):\n    if (lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(plan) > x.shape[1]:\n        x = x * 2\n    return x\n',
    ),
    # np.max of a list of window sizes sizing an allocation
    (
        'import numpy as np\nimport torch\n\n\ndef pad(h, windows):\n    return torch.zeros(h.shape[0], np.max(windows))\n',
        'import numpy as np\nimport torch\n\n\ndef pad(h, windows):\n    return torch.zeros(h.shape[0], (lambda v: max(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.max(v))(windows))  # mend: numpy-constants (was: np.max(windows))\n',
    ),
    # a local read only in tests (a conditional expression's, under `and`; a `while`'s, under `not`)
    (
        'import numpy as np\n\n\ndef f(h, sizes):\n    smallest = np.min(sizes)\n    scale = 0.5 if smallest >= 3 and h.ndim == 2 else 1.0\n    while not smallest < -1:\n        break\n    return h * scale\n',
        'import numpy as np\n\n\ndef f(h, sizes):\n    smallest = (lambda v: min(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.min(v))(sizes)  # mend: numpy-constants (was: np.min(sizes))\n    scale = 0.5 if smallest >= 3 and h.ndim == 2 else 1.0\n    while not smallest < -1:\n        break\n    return h * scale\n',
        6,
    ),
    # padding to a multiple of lcm(window, chunk) (longformer/reformer style): the value goes through int
    # arithmetic with a size into a local read by int(); lcm's guard then takes positive operands only (a
    # divisor of 0 gives numpy 0 and a RuntimeWarning, Python a ZeroDivisionError)
    (
        'import math\n\nimport numpy as np\nimport torch.nn.functional as F\n\n\ndef pad_to_chunks(h, window, chunk):\n    multiple = np.lcm(window, chunk)\n    pad = (multiple - h.shape[1] % multiple) % multiple\n    return F.pad(h, (0, 0, 0, int(pad)))\n',
        'import math\n\nimport numpy as np\nimport torch.nn.functional as F\n\n\ndef pad_to_chunks(h, window, chunk):\n    multiple = (lambda a, b: math.lcm(a, b) if type(a) is int and type(b) is int and 0 < a < 2**31 and 0 < b < 2**31 else np.lcm(a, b))(window, chunk)  # mend: numpy-constants (was: np.lcm(window, chunk))\n    pad = (multiple - h.shape[1] % multiple) % multiple\n    return F.pad(h, (0, 0, 0, int(pad)))\n',
        10,
    ),
    # a local bound once by the numpy call and read only as an allocation's size: the break is
    # reported where it is read (line 7); the binding's line is rewritten, the span covers both
    (
        'import numpy as np\nimport torch\n\n\ndef pad(x, plan):\n    width = np.sum(plan[:2])\n    z = torch.zeros(x.shape[0], width)\n    return torch.cat([x, z], dim=1), [np.zeros((2, width)) for _ in plan]\n',
        'import numpy as np\nimport torch\n\n\ndef pad(x, plan):\n    width = (lambda v: sum(v) if type(v) is list and 0 < len(v) < 2**31 and all([type(e) is int and -2**31 < e < 2**31 for e in v]) else np.sum(v))(plan[:2])  # mend: numpy-constants (was: np.sum(plan[:2]))\n    z = torch.zeros(x.shape[0], width)\n    return torch.cat([x, z], dim=1), [np.zeros((2, width)) for _ in plan]\n',
        7,
    ),
]
DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # `.view()`/`.reshape()` given the sizes by keyword, or a tuple beside other arguments: not read as sizes
    DeclineExample('import numpy as np\n\n\ndef f(h, sizes):\n    return h.reshape(shape=(-1, np.sum(sizes)))\n', "an element of a tuple or list that is not the shape", line=5),
    DeclineExample('import numpy as np\n\n\ndef f(h, sizes):\n    return h.view((-1, np.sum(sizes)), 2)\n', "an element of a tuple or list that is not the shape", line=5),
    # a bare size beside an argument of unknown type: a TypeError there names every argument's type
    DeclineExample('import numpy as np\n\n\ndef f(h, sizes, k):\n    return h.view(k, np.sum(sizes))\n', "an argument of `h.view`", line=5),
    # torch.reshape's shape is a sequence: a bare number there is not what the rule admits
    DeclineExample('''import numpy as np
import torch


def f(x, dims):
    return torch.reshape(x, np.prod(dims))
''', "an argument of `torch.reshape`", line=6),
    # a local read elsewhere as a number: `type(width)` would see int where it saw np.int64
    DeclineExample('''import numpy as np
import torch


def f(x, plan):
    width = np.sum(plan)
    z = torch.zeros(x.shape[0], width)
    return z, type(width)
''', "also read by an argument of `type`", line=7),
    # the local is bound twice: a read may see the other value
    DeclineExample('''import numpy as np
import torch


def f(x, plan, wide):
    width = np.sum(plan)
    if wide:
        width = width * 2
    return torch.zeros(x.shape[0], width)
''', "bound more than once", line=9),
    # locals() may read the local as the np.int64 it was
    DeclineExample('''import numpy as np
import torch


def f(x, plan):
    width = np.sum(plan)
    z = torch.zeros(x.shape[0], width)
    return z, locals()
''', "locals()", line=7),

    # trap: np.sum of floats rounds and gives float64 (np.zeros of it raises TypeError)
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.sum([1.5, 2.5])))
''', "not an integer"),
    # trap: np.sum([]) is float64 0.0, sum([]) the int 0
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.sum([])))
''', "empty list"),
    # np.sum of an array is array arithmetic (int64, wraps), not a constant
    ('''import numpy as np


def f(plan, n):
    counts = np.array(plan)
    return np.zeros((n, np.sum(counts)))
''', "is an array or tensor"),
    # ... and of a tensor
    ('''import numpy as np


def f(t, n):
    return np.zeros((n, np.sum(t.numpy())))
''', "is an array or tensor"),
    # trap: the result feeds arithmetic, where np.int64 wraps and int does not
    ('''import numpy as np


def f(plan):
    return np.sum(plan) * 2**40
''', "feeds arithmetic"),
    # trap: the comparison's np.bool_ is kept as a value (returned), not only tested
    ('''import numpy as np


def f(x, plan):
    big = np.sum(plan) > 4
    return x * 2, big
''', "kept as a value"),
    # trap: compared with a tensor, np.int64 and int may give other types (or raise otherwise)
    ('''import numpy as np


def f(x, plan):
    if np.sum(plan) > x.sum():
        x = x * 2
    return x
''', "not an integer literal, a size"),
    # trap: `x.size()` alone is a torch.Size: numpy compares it elementwise, an int raises TypeError
    ('''import numpy as np


def f(x, plan):
    if np.sum(plan) > x.size():
        x = x * 2
    return x
''', "not an integer literal, a size"),
    # `is` compares identity: an int and an np.int64 are never the same object
    ('''import numpy as np


def f(x, plan):
    if np.max(plan) is 3:
        x = x * 2
    return x
''', "by `is`, `in`"),
    # trap: np.max([]) and max([]) both raise ValueError, with other messages
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.max([])))
''', "empty list"),
    # trap: np.min of floats returns float64 where min keeps the element
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.min([2.5, 3])))
''', "not an integer"),
    # the guard calls `max`, rebound here
    ('''import numpy as np

max = np.amax


def f(plan, n):
    return np.zeros((n, np.max(plan)))
''', "binds `max`"),
    # arithmetic with a name of unknown type on the way to int()
    ('''import numpy as np


def f(h, window, chunk, n):
    multiple = np.lcm(window, chunk)
    pad = (multiple - h.shape[1] % multiple) % n
    return int(pad)
''', "arithmetic with `n`", 7),
    # the derived local is returned: np.int64 and int would leave the function
    ('''import numpy as np


def f(h, window, chunk):
    multiple = np.lcm(window, chunk)
    pad = (multiple - h.shape[1] % multiple) % multiple
    return pad
''', "read by the return value", 7),
    # the derived local is bound twice
    ('''import numpy as np


def f(h, window, chunk):
    multiple = np.lcm(window, chunk)
    pad = (multiple - h.shape[1] % multiple) % multiple
    pad = pad + 1
    return int(pad)
''', "bound more than once", 8),
    # trap: a later `isinstance(total, np.integer)` would see int
    ('''import numpy as np


def f(plan):
    total = np.sum(plan)
    return isinstance(total, np.integer)
''', "feeds an assignment"),
    # reformer `_get_least_common_mult_chunk_len` (modeling_reformer.py:169): its callers get the result
    ('''import math

import numpy as np


def least_common_mult_chunk_len(config):
    return np.lcm(config.lsh_attn_chunk_length, config.local_attn_chunk_length)
''', "feeds the return value"),
    # `global sum` in another function rebinds the module's name, which the guard sees
    DeclineExample('import numpy as np\n\n\ndef f(plan, n):\n    return np.zeros((n, np.sum(plan)))\n\n\ndef g():\n    global sum\n    sum = len\n', "binds `sum` where the rewritten expression would see it", line=5),
    # a comprehension variable around the site
    DeclineExample('import numpy as np\n\n\ndef f(plans, n):\n    return [np.zeros((n, np.max(plan))) for max in plans for plan in max]\n', "binds `max`", line=5),
    # a builtin the rewrite calls is rebound in the module
    ('''import numpy as np


def f(plan, n, type=None):
    return np.zeros((n, np.sum(plan)))
''', "binds `type`"),
    ('''import numpy as np

sum = np.sum


def f(plan, n):
    return np.zeros((n, np.sum(plan)))
''', "binds `sum`"),
    # `np` is not numpy here (numpy itself is `onp`)
    ('''import numpy as onp
import jax.numpy as np


def f(plan, n):
    return onp.zeros((n, np.sum(plan)))
''', "is not bound to numpy"),
    # an axis or dtype changes what np.sum computes
    ('''import numpy as np


def f(plan, n):
    return np.zeros((n, np.sum(plan, axis=0)))
''', "exactly 1 positional operand"),
    # math.lcm needs the standard library's `math`: here a parameter is named `math`
    ('''import numpy as np


def f(a, b, n, math=None):
    return np.zeros((n, np.lcm(a, b)))
''', "binds `math` otherwise"),
    # trap: np.prod(()) is float64 1.0, math.prod(()) the int 1
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.prod(())))
''', "empty tuple"),
    # trap: np.prod of floats is float64
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.prod([2.0, 3])))
''', "not an integer"),
    # trap: the product feeds arithmetic, where np.int64 wraps and int does not
    ('''import numpy as np


def f(shape):
    return np.prod(shape) * 4
''', "feeds the return value"),
    # the prod guard calls `tuple`, rebound here
    ('''import numpy as np

tuple = list


def f(dims, n):
    return np.zeros((n, np.prod(dims)))
''', "binds `tuple`"),
    # the guard admits lists only
    ('''import numpy as np


def f(n):
    return np.zeros((n, np.sum((1, 2))))
''', "is a tuple"),
    # np.zeros' second positional argument is the dtype, not a size
    ('''import numpy as np


def f(plan, n):
    return np.zeros(n, np.sum(plan))
''', "feeds an argument of `np.zeros`"),
]

NOOP_EXAMPLES: list[str] = [
    # tensor and method sums trace: nothing to rewrite
    '''import numpy as np
import torch


def f(x, plan):
    n = len(plan)
    y = x.sum() + torch.sum(x)
    return np.zeros((n, 2)), y
''',
]
