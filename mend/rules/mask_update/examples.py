"""mask-update's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample


def example_line(source: str) -> int:
    """The line of an example's site: its first line that writes through a subscript."""
    for i, text in enumerate(source.splitlines(), 1):
        if any(f"] {op}= " in text for op in ("", "*", "+", "-", "/", "**", "//", "%")):
            return i
    raise ValueError("no masked update in example")


FIX_EXAMPLES: list[tuple[str, str]] = [
    # an fp16 overflow repair: inf becomes the largest finite value of its sign (sign is exact and
    # total, NaN -> 0 on every kernel path; helper-64's c93)
    (
        'import torch\n\n\ndef f(h, inf):\n    h[inf] = h[inf].sign() * 65504.0\n    return h\n',
        'import torch\n\n\ndef f(h, inf):\n    if type(h) is torch.Tensor and h.is_floating_point() and not h.is_nested and all(_mend_s > 0 for _mend_s in h.stride()) and all(h.stride(_mend_i) * h.shape[_mend_i] <= h.stride(_mend_j) or h.stride(_mend_j) * h.shape[_mend_j] <= h.stride(_mend_i) for _mend_i in range(h.dim()) for _mend_j in range(_mend_i) if h.shape[_mend_i] > 1 and h.shape[_mend_j] > 1) and type(inf) is torch.Tensor and inf.dtype == torch.bool and inf.device == h.device and h.device.type != "meta" and inf.shape == h.shape and not (torch.is_grad_enabled() and h.requires_grad):\n        h.copy_(torch.where(inf, h.sign() * 65504.0, h))  # mend: mask-update\n    else:\n        h[inf] = h[inf].sign() * 65504.0\n    return h\n',
    ),
    # a comment on the update's line stays with the original statement, kept as the guard's fallback
    (
        'import torch\n\n\ndef f(x, m):\n    x[m] = x[m] * 2.0  # double the selected\n    return x\n',
        'import torch\n\n\ndef f(x, m):\n    if type(x) is torch.Tensor and x.is_floating_point() and not x.is_nested and all(_mend_s > 0 for _mend_s in x.stride()) and all(x.stride(_mend_i) * x.shape[_mend_i] <= x.stride(_mend_j) or x.stride(_mend_j) * x.shape[_mend_j] <= x.stride(_mend_i) for _mend_i in range(x.dim()) for _mend_j in range(_mend_i) if x.shape[_mend_i] > 1 and x.shape[_mend_j] > 1) and type(m) is torch.Tensor and m.dtype == torch.bool and m.device == x.device and x.device.type != "meta" and m.shape == x.shape and not (torch.is_grad_enabled() and x.requires_grad):\n        x.copy_(torch.where(m, x * 2.0, x))  # mend: mask-update\n    else:\n        x[m] = x[m] * 2.0  # double the selected\n    return x\n',
    ),
    # a Python-number attribute (bound only in __init__, to no tensor): it broadcasts against the
    # whole tensor as against the selected elements; confirmed a number on the example run
    # (mask-update-scalar, an observation)
    (
        '''import torch
from torch import nn


class Damp(nn.Module):
    def __init__(self, scale=0.5):
        super().__init__()
        self.scale = scale

    def forward(self, h):
        h[h > 0] *= self.scale
        return h
''',
        '''import torch
from torch import nn


class Damp(nn.Module):
    def __init__(self, scale=0.5):
        super().__init__()
        self.scale = scale

    def forward(self, h):
        _mend_mask = h > 0
        if type(h) is torch.Tensor and h.is_floating_point() and not h.is_nested and all(_mend_s > 0 for _mend_s in h.stride()) and all(h.stride(_mend_i) * h.shape[_mend_i] <= h.stride(_mend_j) or h.stride(_mend_j) * h.shape[_mend_j] <= h.stride(_mend_i) for _mend_i in range(h.dim()) for _mend_j in range(_mend_i) if h.shape[_mend_i] > 1 and h.shape[_mend_j] > 1) and type(_mend_mask) is torch.Tensor and _mend_mask.dtype == torch.bool and _mend_mask.device == h.device and h.device.type != "meta" and _mend_mask.shape == h.shape and not (torch.is_grad_enabled() and h.requires_grad):
            h.copy_(torch.where(_mend_mask, h * self.scale, h))  # mend: mask-update
        else:
            h[h > 0] *= self.scale
        return h
''',
    ),
    (
        '''import torch


def scale_positive(x, mask):
    x[mask] = x[mask] * 2.0 + 1.0
    return x
''',
        '''import torch


def scale_positive(x, mask):
    if type(x) is torch.Tensor and x.is_floating_point() and not x.is_nested and all(_mend_s > 0 for _mend_s in x.stride()) and all(x.stride(_mend_i) * x.shape[_mend_i] <= x.stride(_mend_j) or x.stride(_mend_j) * x.shape[_mend_j] <= x.stride(_mend_i) for _mend_i in range(x.dim()) for _mend_j in range(_mend_i) if x.shape[_mend_i] > 1 and x.shape[_mend_j] > 1) and type(mask) is torch.Tensor and mask.dtype == torch.bool and mask.device == x.device and x.device.type != "meta" and mask.shape == x.shape and not (torch.is_grad_enabled() and x.requires_grad):
        x.copy_(torch.where(mask, x * 2.0 + 1.0, x))  # mend: mask-update
    else:
        x[mask] = x[mask] * 2.0 + 1.0
    return x
''',
    ),
    # an augmented update with the mask computed in place; the mask is read once (it was read
    # once by the original too, before the write)
    (
        '''import torch


def boost(h):
    h = h + 1
    h[h > 1] *= 2
    return h - 1
''',
        '''import torch


def boost(h):
    h = h + 1
    _mend_mask = h > 1
    if type(h) is torch.Tensor and h.is_floating_point() and not h.is_nested and all(_mend_s > 0 for _mend_s in h.stride()) and all(h.stride(_mend_i) * h.shape[_mend_i] <= h.stride(_mend_j) or h.stride(_mend_j) * h.shape[_mend_j] <= h.stride(_mend_i) for _mend_i in range(h.dim()) for _mend_j in range(_mend_i) if h.shape[_mend_i] > 1 and h.shape[_mend_j] > 1) and type(_mend_mask) is torch.Tensor and _mend_mask.dtype == torch.bool and _mend_mask.device == h.device and h.device.type != "meta" and _mend_mask.shape == h.shape and not (torch.is_grad_enabled() and h.requires_grad):
        h.copy_(torch.where(_mend_mask, h * 2, h))  # mend: mask-update
    else:
        h[h > 1] *= 2
    return h - 1
''',
    ),
    # another tensor read through the same mask, clamp with numeric bounds, torch as `th`
    (
        '''import torch as th


def mix(x, y, keep):
    # keep the selected elements of y, clamped
    x[keep] = th.clamp(y[keep] - x[keep], min=-1.0, max=1.0)
    return x
''',
        '''import torch as th


def mix(x, y, keep):
    # keep the selected elements of y, clamped
    if type(x) is th.Tensor and x.is_floating_point() and not x.is_nested and all(_mend_s > 0 for _mend_s in x.stride()) and all(x.stride(_mend_i) * x.shape[_mend_i] <= x.stride(_mend_j) or x.stride(_mend_j) * x.shape[_mend_j] <= x.stride(_mend_i) for _mend_i in range(x.dim()) for _mend_j in range(_mend_i) if x.shape[_mend_i] > 1 and x.shape[_mend_j] > 1) and type(keep) is th.Tensor and keep.dtype == th.bool and keep.device == x.device and x.device.type != "meta" and keep.shape == x.shape and type(y) is th.Tensor and y.dtype == x.dtype and y.shape == x.shape and y.device == x.device and not (th.is_grad_enabled() and (x.requires_grad or y.requires_grad)):
        x.copy_(th.where(keep, th.clamp(y - x, min=-1.0, max=1.0), x))  # mend: mask-update
    else:
        x[keep] = th.clamp(y[keep] - x[keep], min=-1.0, max=1.0)
    return x
''',
    ),
    (
        '''import torch


def shrink(x, m):
    x[m] -= x[m].abs() * 0.5
    return x
''',
        '''import torch


def shrink(x, m):
    if type(x) is torch.Tensor and x.is_floating_point() and not x.is_nested and all(_mend_s > 0 for _mend_s in x.stride()) and all(x.stride(_mend_i) * x.shape[_mend_i] <= x.stride(_mend_j) or x.stride(_mend_j) * x.shape[_mend_j] <= x.stride(_mend_i) for _mend_i in range(x.dim()) for _mend_j in range(_mend_i) if x.shape[_mend_i] > 1 and x.shape[_mend_j] > 1) and type(m) is torch.Tensor and m.dtype == torch.bool and m.device == x.device and x.device.type != "meta" and m.shape == x.shape and not (torch.is_grad_enabled() and x.requires_grad):
        x.copy_(torch.where(m, x.clone() - (x.clone().abs() * 0.5), x))  # mend: mask-update
    else:
        x[m] -= x[m].abs() * 0.5
    return x
''',
    ),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # trap: torch.where(m, sqrt(x), x) has gradient NaN at x = -1 off the mask (0 * inf)
    ('''import torch


def f(x, m):
    x[m] = torch.sqrt(x[m])
    return x
''', "`sqrt` on the whole tensor"),
    ('''import torch


def f(x, m):
    x[m] = x[m].log()
    return x
''', "`log` on the whole tensor"),
    # trap: a vectorised transcendental kernel on the whole tensor vs on the gathered elements
    ('''import torch


def f(x, m):
    x[m] = torch.sigmoid(x[m])
    return x
''', "not exactly rounded"),
    # trap: an integer floor division raises on a zero divisor that the mask excluded
    ('''import torch


def f(x, y, m):
    x[m] = x[m] // y[m]
    return x
''', "integer zero divisor"),
    # trap: a tensor not read through the mask broadcasts against the selected elements
    ('''import torch


def f(x, m, bias):
    x[m] = x[m] + bias
    return x
''', "is not indexed by the mask"),
    ('''import torch


def f(x, y, m, n):
    x[m] = x[m] + y[n] * 2
    return x
''', "is not indexed by the mask `m`"),
    # a property or a module attribute: the rule only writes plain local names
    ('''import torch


class M(torch.nn.Module):
    def forward(self, x, m):
        self.buf[m] = self.buf[m] * 2
        return x
''', "not a plain local name"),
    ('''import torch


def f(x, m, k):
    x[m.bool()] = x[m.bool()] * 2
    return x
''', "is not a name, a comparison"),
    ('''import torch


def f(x, m):
    x[m] = x[m] * 2; y = x + 1
    return y
''', "shares its line"),
    ('''import torch


def f(x, m):
    x[m] **= 2
    return x
''', "is not `+= -= *= /=`"),
]

DECLINE_EXAMPLES += [
    # trap: an attribute the class binds to a tensor (a buffer, a torch.* value, or in forward)
    # may have the selected elements' shape
    ('''import torch
from torch import nn


class Damp(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.ones(4)
        self.register_buffer("shift", torch.zeros(4))

    def forward(self, h):
        h[h > 0] *= self.scale
        return h
''', "`self.scale` is not indexed by the mask"),
    ('''import torch
from torch import nn


class Damp(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.zeros(4))
        self.shift = 0.0

    def forward(self, h):
        h[h > 0] += self.shift
        return h
''', "`self.shift` is not indexed by the mask"),
    ('''import torch
from torch import nn


class Damp(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 0.5

    def forward(self, h, g):
        self.scale = g.mean()
        h[h > 0] *= self.scale
        return h
''', "`self.scale` is not indexed by the mask"),
]

NOOP_EXAMPLES: list[str] = [
    # the rule's own output: the original statement kept as the guard's fallback is not rewritten again
    FIX_EXAMPLES[1][1],
    # `x[m] = 0.0` and masked_fill trace without a break on torch 2.13: nothing to rewrite
    '''import torch


def f(x, m):
    x[m] = 0.0
    y = x.masked_fill(m, 1.0)
    return y
''',
    # a slice write is not a mask update
    '''import torch


def f(x):
    x[:, 0] = x[:, 0] * 2
    return x
''',
]
