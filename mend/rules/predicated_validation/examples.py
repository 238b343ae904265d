"""predicated-validation's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line). The site is the line
:func:`example_line` picks, unless an example names its own."""
from __future__ import annotations

from mend.rules._base import DeclineExample
from mend.rules.predicated_validation.and_examples import AND_DECLINE_EXAMPLES, AND_FIX_EXAMPLES


def example_line(source: str) -> int:
    """The line of an example's site: its first `if`/`assert` line."""
    for i, text in enumerate(source.splitlines(), 1):
        if text.lstrip().startswith(("if ", "assert ")):
            return i
    raise ValueError("no check in example")


FIX_EXAMPLES: list[tuple[str, str] | tuple[str, str, int]] = [
    # transformers grounding_dino (modeling_grounding_dino.py:608); a comment above the check is kept
    (
        '''import torch


def check(shapes, seq_len):
    # the encoder must see every level
    if (shapes[:, 0] * shapes[:, 1]).sum() != seq_len:
        raise ValueError(
            "Make sure to align the spatial shapes with the sequence length"
        )
    return shapes.sum()
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a95c7a120d13": lambda: ValueError("Make sure to align the spatial shapes with the sequence length"),
}


def check(shapes, seq_len):
    # the encoder must see every level
    _mend_cond = (shapes[:, 0] * shapes[:, 1]).sum() != seq_len
    if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        torch._assert_async(
            torch.logical_not(_mend_cond),
            f"mend-trap:{__name__}:_MEND_TRAPS.a95c7a120d13",
        )
    elif _mend_cond:
        raise ValueError(
            "Make sure to align the spatial shapes with the sequence length"
        )
    return shapes.sum()
''',
    ),
    # `if not X: raise` asserts X itself; `torch` is imported when missing
    (
        '''"""A module without torch imported."""
from math import sqrt


class Scale:
    def forward(self, x):
        if not (x >= 0).all():
            raise ValueError("inputs must be non-negative")
        return x.sqrt() * sqrt(2.0)
''',
        '''"""A module without torch imported."""
from math import sqrt
import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "5a336280999b": lambda: ValueError("inputs must be non-negative"),
}


class Scale:
    def forward(self, x):
        _mend_cond = (x >= 0).all()
        if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized:
            torch._assert_async(_mend_cond, f"mend-trap:{__name__}:_MEND_TRAPS.5a336280999b")
        elif not _mend_cond:
            raise ValueError("inputs must be non-negative")
        return x.sqrt() * sqrt(2.0)
''',
    ),
    # `assert not X`: Dynamo does not lower it; `if __debug__:` keeps `python -O` semantics
    (
        '''import torch


def forward(x):
    assert not torch.isnan(x).any(), "NaN in input"
    return x * 2
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "df2b3e53d6cf": lambda: AssertionError("NaN in input"),
}


def forward(x):
    if __debug__:
        _mend_cond = torch.isnan(x).any()
        if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
            torch._assert_async(
                torch.logical_not(_mend_cond),
                f"mend-trap:{__name__}:_MEND_TRAPS.df2b3e53d6cf",
            )
        else:
            assert not _mend_cond, "NaN in input"
    return x * 2
''',
    ),
    # a bare exception class; a name that is not a trap table is not reused
    (
        '''import torch

_MEND_TRAPS = 3


def forward(x):
    if x.abs().max() > 1e4:
        raise OverflowError
    return x
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS_1 = {
    "dcd377fca00b": lambda: OverflowError,
}

_MEND_TRAPS = 3


def forward(x):
    _mend_cond = x.abs().max() > 1e4
    if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        torch._assert_async(
            torch.logical_not(_mend_cond),
            f"mend-trap:{__name__}:_MEND_TRAPS_1.dcd377fca00b",
        )
    elif _mend_cond:
        raise OverflowError
    return x
''',
    ),
    # a second check in a module already mended: its table is extended
    (
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a95c7a120d13": lambda: ValueError("Make sure to align the spatial shapes with the sequence length"),
}


class Block(torch.nn.Module):
    def forward(self, x, mask):
        if mask.sum() == 0:
            raise ValueError("the mask selects nothing")
        return x * mask
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a95c7a120d13": lambda: ValueError("Make sure to align the spatial shapes with the sequence length"),
    "cfb23de8c9ea": lambda: ValueError("the mask selects nothing"),
}


class Block(torch.nn.Module):
    def forward(self, x, mask):
        _mend_cond = mask.sum() == 0
        if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
            torch._assert_async(
                torch.logical_not(_mend_cond),
                f"mend-trap:{__name__}:_MEND_TRAPS.cfb23de8c9ea",
            )
        elif _mend_cond:
            raise ValueError("the mask selects nothing")
        return x * mask
''',
    ),
    # transformers xlm/flaubert `get_masks` (modeling_xlm.py:66): the host read `.item()` is the break;
    # it is dropped (an int64 tensor compares with an int exactly) and the bare assert's AssertionError kept
    (
        '''import torch


def get_masks(slen, lengths, padding_mask=None):
    alen = torch.arange(slen, dtype=torch.long, device=lengths.device)
    if padding_mask is not None:
        mask = padding_mask
    else:
        assert lengths.max().item() <= slen
        mask = alen < lengths[:, None]
    return mask
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "cf71528b33bc": lambda: AssertionError(),
}


def get_masks(slen, lengths, padding_mask=None):
    alen = torch.arange(slen, dtype=torch.long, device=lengths.device)
    if padding_mask is not None:
        mask = padding_mask
    else:
        if __debug__:
            _mend_item = lengths.max()
            if torch.compiler.is_compiling() and type(_mend_item) is torch.Tensor and _mend_item.numel() == 1 and _mend_item.device.type == 'cpu' and _mend_item.layout == torch.strided and not _mend_item.is_quantized and ((_mend_item.dtype in (torch.bool, torch.int64) and type(slen) is int and -2**63 <= slen < 2**63) or (_mend_item.dtype in (torch.float32, torch.float64) and (type(slen) is float or (type(slen) is int and -2**53 <= slen <= 2**53)))):
                torch._assert_async(
                    _mend_item.to(torch.float64 if _mend_item.is_floating_point() else torch.int64) <= slen,
                    f"mend-trap:{__name__}:_MEND_TRAPS.cf71528b33bc",
                )
            else:
                assert _mend_item.item() <= slen
        mask = alen < lengths[:, None]
    return mask
''',
        9,
    ),
    # a chained comparison: Python's `a < t < b` on tensors would call bool(); logical_and instead
    (
        '''import torch


def check(t, lo, hi):
    assert lo <= t.float().mean().item() < hi, "mean out of range"
    return t
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "38418e5de728": lambda: AssertionError("mean out of range"),
}


def check(t, lo, hi):
    if __debug__:
        _mend_item = t.float().mean()
        if torch.compiler.is_compiling() and type(_mend_item) is torch.Tensor and _mend_item.numel() == 1 and _mend_item.device.type == 'cpu' and _mend_item.layout == torch.strided and not _mend_item.is_quantized and ((_mend_item.dtype in (torch.bool, torch.int64) and type(lo) is int and -2**63 <= lo < 2**63 and type(hi) is int and -2**63 <= hi < 2**63) or (_mend_item.dtype in (torch.float32, torch.float64) and (type(lo) is float or (type(lo) is int and -2**53 <= lo <= 2**53)) and (type(hi) is float or (type(hi) is int and -2**53 <= hi <= 2**53)))):
            torch._assert_async(
                torch.logical_and(lo <= _mend_item.to(torch.float64 if _mend_item.is_floating_point() else torch.int64), _mend_item.to(torch.float64 if _mend_item.is_floating_point() else torch.int64) < hi),
                f"mend-trap:{__name__}:_MEND_TRAPS.38418e5de728",
            )
        else:
            assert lo <= _mend_item.item() < hi, "mean out of range"
    return t
''',
    ),
    # xlm/flaubert (transformers 5.x): layers write the cache they are given; the check moves into the
    # graph only for a cache made in this call, in eval mode (fresh.py), the original kept otherwise
    (
        '''import torch
from torch import nn


class Encoder(nn.Module):
    def forward(self, x, lengths, cache=None):
        slen = x.size(1)
        if cache is None:
            cache = Cache(len(self.layers))
        assert lengths.max().item() <= slen
        for i in range(len(self.layers)):
            x = self.layers[i](x, cache=cache)
        return x
''',
        '''import torch
from torch import nn

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "3906a76e693e": lambda: AssertionError(),
}


class Encoder(nn.Module):
    def forward(self, x, lengths, cache=None):
        slen = x.size(1)
        _mend_fresh_cache = cache is None and not self.training  # mend: predicated-validation (the check below is in the graph only for a `cache` made here, in eval mode)
        if cache is None:
            cache = Cache(len(self.layers))
        if not _mend_fresh_cache:
            assert lengths.max().item() <= slen
        elif __debug__:
            _mend_item = lengths.max()
            if torch.compiler.is_compiling() and type(_mend_item) is torch.Tensor and _mend_item.numel() == 1 and _mend_item.device.type == 'cpu' and _mend_item.layout == torch.strided and not _mend_item.is_quantized and ((_mend_item.dtype in (torch.bool, torch.int64) and type(slen) is int and -2**63 <= slen < 2**63) or (_mend_item.dtype in (torch.float32, torch.float64) and (type(slen) is float or (type(slen) is int and -2**53 <= slen <= 2**53)))):
                torch._assert_async(
                    _mend_item.to(torch.float64 if _mend_item.is_floating_point() else torch.int64) <= slen,
                    f"mend-trap:{__name__}:_MEND_TRAPS.3906a76e693e",
                )
            else:
                assert _mend_item.item() <= slen
        for i in range(len(self.layers)):
            x = self.layers[i](x, cache=cache)
        return x
''',
        10,
    ),
    # torchvision / torchaudio style `torch._assert` on a tensor condition: torch runs
    # `if not C: raise AssertionError(msg)` (not stripped by `python -O`), and Dynamo breaks on it
    # ("Data dependent operator"); anything but a one-element plain tensor keeps the call
    (
        'import torch\n\n\ndef check_lengths(x, lengths):\n    torch._assert((lengths > 0).all(), "lengths must be positive")\n    return x.sum(1) / lengths\n',
        'import torch\n\n# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns\n# by mend.validation_runtime.install(model).\n_MEND_TRAPS = {\n    "6bee0e236287": lambda: AssertionError("lengths must be positive"),\n}\n\n\ndef check_lengths(x, lengths):\n    (lambda _mend_c: torch._assert_async(_mend_c, f"mend-trap:{__name__}:_MEND_TRAPS.6bee0e236287") if torch.compiler.is_compiling() and type(_mend_c) is torch.Tensor and _mend_c.numel() == 1 and _mend_c.device.type == \'cpu\' and _mend_c.layout == torch.strided and not _mend_c.is_quantized else torch._assert(_mend_c, "lengths must be positive"))((lengths > 0).all())\n    return x.sum(1) / lengths\n',
        5,
    ),
    # if/elif/else: a raise always leaves, so `elif` is a second `if` and `else:` its statements
    (
        '''import torch


def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    elif x.isnan().any():
        x = x.nan_to_num()
    else:
        x = -x
    return x
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "2031ff3b8316": lambda: ValueError("positive"),
}


def f(x):
    _mend_cond = x.sum() > 0
    if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        torch._assert_async(
            torch.logical_not(_mend_cond),
            f"mend-trap:{__name__}:_MEND_TRAPS.2031ff3b8316",
        )
    elif _mend_cond:
        raise ValueError("positive")
    if x.isnan().any():
        x = x.nan_to_num()
    else:
        x = -x
    return x
''',
    ),
    # the second arm of a chain of raises (reported at its own line)
    (
        '''import torch


def f(x, n):
    if x.dim() != 2:
        raise ValueError("2-d only")
    elif x.isnan().any():
        raise ValueError("nan")
    else:
        y = x * n
    return y
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "418fec3e6a5b": lambda: ValueError("nan"),
}


def f(x, n):
    if x.dim() != 2:
        raise ValueError("2-d only")
    _mend_cond = x.isnan().any()
    if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
        torch._assert_async(
            torch.logical_not(_mend_cond),
            f"mend-trap:{__name__}:_MEND_TRAPS.418fec3e6a5b",
        )
    elif _mend_cond:
        raise ValueError("nan")
    y = x * n
    return y
''',
        7,
    ),
    # a NaN-loss check read through `.item()` (helper-61): math.isfinite of the float64 the tensor
    # widens to is torch.isfinite of the tensor; an if/raise is not under `if __debug__:` (-O keeps it)
    (
        '''import math

import torch


def check(loss):
    if not math.isfinite(loss.item()):
        raise FloatingPointError("non-finite loss")
    return loss
''',
        '''import math

import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "1679b3f9cacb": lambda: FloatingPointError("non-finite loss"),
}


def check(loss):
    _mend_item = loss
    if torch.compiler.is_compiling() and type(_mend_item) is torch.Tensor and _mend_item.numel() == 1 and _mend_item.device.type == 'cpu' and _mend_item.layout == torch.strided and not _mend_item.is_quantized and _mend_item.dtype in (torch.bool, torch.int64, torch.float32, torch.float64):
        torch._assert_async(
            torch.isfinite(_mend_item),
            f"mend-trap:{__name__}:_MEND_TRAPS.1679b3f9cacb",
        )
    elif not math.isfinite(_mend_item.item()):
        raise FloatingPointError("non-finite loss")
    return loss
''',
    ),
    # `int(T.item())`: int() of an integer's value is that value, so the guard admits integer and bool
    # dtypes only (int() of a float truncates, and raises on NaN)
    (
        '''import torch


def check_hidden(h):
    assert int(h.isnan().sum().item()) == 0, "nan in hidden states"
    return h
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "368787637da4": lambda: AssertionError("nan in hidden states"),
}


def check_hidden(h):
    if __debug__:
        _mend_item = h.isnan().sum()
        if torch.compiler.is_compiling() and type(_mend_item) is torch.Tensor and _mend_item.numel() == 1 and _mend_item.device.type == 'cpu' and _mend_item.layout == torch.strided and not _mend_item.is_quantized and (_mend_item.dtype in (torch.bool, torch.int64)):
            torch._assert_async(
                _mend_item.to(torch.float64 if _mend_item.is_floating_point() else torch.int64) == 0,
                f"mend-trap:{__name__}:_MEND_TRAPS.368787637da4",
            )
        else:
            assert int(_mend_item.item()) == 0, "nan in hidden states"
    return h
''',
    ),
]

DECLINE_EXAMPLES: list[tuple[str, str] | DeclineExample] = [
    # `int` bound by the module: `int(T.item())` may not be the builtin's conversion
    ('''import torch
from numpy import int


def f(h):
    assert int(h.isnan().sum().item()) == 0
    return h
''',
     "`int` may not be the builtin here"),
    # helper-93's F4: rebound through the module's namespace, which no binding names
    ('''import numpy as np
import torch

globals()["float"] = np.float32


def f(x):
    if float(x.abs().max().item()) > 10000.0:
        raise ValueError("input too large")
    return x
''', "`float` may not be the builtin here"),
    # helper-50: under a grad-mode context, a check failing inside the graph left grad mode off
    # for the rest of the process (the eager backend); a decorator the same
    ('''import torch
def f(h):
    with torch.no_grad():
        if torch.isnan(h).any():
            raise ValueError("nan in hidden states")
    return h * 2
''', "under `torch.no_grad()`"),
    ('''import torch
@torch.no_grad()
def f(h):
    if torch.isnan(h).any():
        raise ValueError("nan in hidden states")
    return h * 2
''', "under `@torch.no_grad()`"),
    # helper-50: a method the function calls stashes a tensor on the module before the check
    ('''import torch
class M(torch.nn.Module):
    def _keep(self, h):
        self.last_hidden = h.detach()

    def forward(self, h):
        self._keep(h)
        if torch.isnan(h).any():
            raise ValueError("nan in hidden states")
        return h * 2
''', "`_keep`: self.last_hidden"),
    # torch._assert with a formatted message: restoring it needs the values it reads
    DeclineExample('import torch\n\n\ndef f(x, lengths):\n    torch._assert((lengths > 0).all(), f"bad {lengths}")\n    return x\n',
                   "torch._assert message is not a string literal", line=5),
    # the message as a keyword
    DeclineExample('import torch\n\n\ndef f(x, lengths):\n    torch._assert((lengths > 0).all(), message="m")\n    return x\n',
                   "exactly a condition and a message, positionally", line=5),
    # shared case 023: the message formats tensor values
    ('''import torch
def f(loss, target):
    if torch.isnan(loss):
        raise RuntimeError(f"NaN loss (target mean {target.mean()})")
    return loss
''', "formatted at run time"),
    ('''import torch
def f(x):
    if x.sum() < 0:
        raise ValueError("negative total: {}".format(x.sum()))
    return x
''', "formatted at run time"),
    ('''import torch
def f(x):
    assert not x.isnan().any(), "NaN at %d" % x.isnan().nonzero()[0]
    return x
''', "formatted at run time"),
    # an adversarial review: the global grad mode set before the check (Dynamo sets the final
    # mode after the graph returns; a failing check left grad on where eager left it off)
    ('''import torch
class M(torch.nn.Module):
    def forward(self, x):
        torch.set_grad_enabled(False)
        if (x < -100).any():
            raise ValueError("too small")
        return x
''', "sets torch's global state"),
    # shared case 023 without the f-string: state updated after the check
    ('''import torch
class M(torch.nn.Module):
    def forward(self, loss):
        if torch.isnan(loss):
            raise RuntimeError("NaN loss")
        self.num_updates.add_(1)
        self.loss_ema = 0.9 * self.loss_ema + 0.1 * loss
        return loss
''', "changes state"),
    ('''import torch
class M(torch.nn.Module):
    def forward(self, x):
        self.calls += 1
        if x.sum() > 1e6:
            raise OverflowError("too large")
        return x
''', "changes state"),
    ('''import torch
def f(x, cache):
    if torch.isinf(x).any():
        raise ValueError("inf")
    cache.append(x)
    return x
''', "changes state"),
    # plain tensor asserts: Dynamo lowers them itself (shared cases 021, 024)
    ('''import torch
def f(probs):
    assert torch.all(probs >= 0)
    return probs.log()
''', "nothing to rewrite"),
    ('''import torch
def f(x, n):
    assert x.shape[-2] == n, "bad shape"
    return x
''', "nothing to rewrite"),
    ('''import torch
def f(x):
    if x.shape[0] * x.shape[1] != 16:
        raise ValueError("need 16 elements")
    return x
''', "shapes and literals only"),
    # `math` must be the standard library's for math.isnan(T.item()) to be torch.isnan(T)
    ('''import torch
import numpy as math
def f(loss):
    if math.isnan(loss.item()):
        raise ValueError("nan")
    return loss
''', "`math` is not bound only by `import math`"),
    # an if/elif chain is split only where every arm above the site only raises (split_chain)
    DeclineExample('''import torch
def f(x):
    if x.sum() > 0:
        x = -x
    elif x.isnan().any():
        raise ValueError("nan")
    return x
''', "earlier arm of the if/elif chain does more than raise", line=5),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    # x is not positive here
    else:
        x = -x
    return x
''', "comment on the `else:` line"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    else: x = -x
    return x
''', "written on the `else` line"),
    ('''import torch
import logging
def f(x):
    if x.sum() > 0:
        logging.error("positive")
        raise ValueError("positive")
    return x
''', "does more than raise"),
    ('''import torch
def f(xs):
    for x in xs:
        if x.sum() > 0:
            raise ValueError("positive")
    return xs
''', "inside a loop"),
    ('''import torch
def f(x):
    try:
        if x.sum() > 0:
            raise ValueError("positive")
    except ValueError:
        x = -x
    return x
''', "`try`"),
    ('''import torch
import contextlib
def f(x):
    with contextlib.suppress(ValueError):
        if x.sum() > 0:
            raise ValueError("positive")
    return x
''', "whose exit would see"),
    ('''import torch
def f(x, y):
    if x.sum() > 0 or y.sum() > 0:
        raise ValueError("positive")
    return x
''', "`and`/`or`"),
    ('''import torch
def f(x):
    if (total := x.sum()) > 0:
        raise ValueError("positive")
    return total
''', "binds a name"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise ValueError("positive") from None
    return x
''', "`from` clause"),
    # the matcher is syntactic: only the rewrite's scope analysis sees that `error` is a parameter
    DeclineExample('''import torch
def f(x, error=ValueError):
    if x.sum() > 0:
        raise error("positive")
    return x
''', "not a module-level or builtin name", static=False),
    ('''import torch
class M(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            raise self.Error("positive")
        return x
''', "read from the instance"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise  # re-raise
    return x
''', "bare `raise`"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        # upstream: keep in sync with the C++ check
        raise ValueError("positive")
    return x
''', "comment"),
    ('''import torch
import torch.nn.functional as F
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    return F.relu(x, inplace=True)
''', "changes state"),
    ('''import torch
@torch.jit.script
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    return x
''', "TorchScript"),
    ('''import torch
if torch.ones(1).sum() > 0:
    raise ValueError("positive")
''', "not inside a function"),
    # `assert T.item() <op> E`: only that form; the equivalence itself is the verifier's (raises-iff-original
    # models `.item()`: float32 near 2**24, float16 rounding, int32 wrap-around are refuted there)
    ('''import torch
def f(t, n):
    assert t.sum().item() + 1 <= n
    return t
''', "used in arithmetic"),
    ('''import torch
def f(t):
    assert t.item() in (1, 2)
    return t
''', "outside a comparison"),
    # .item() of a several-element tensor raises its own message; the tensor check would not
    ('''import torch
def f(t, n):
    assert (t < n).item(), "in range"
    return t
''', "not a full reduction"),
    ('''import torch
def f(x, n):
    assert helper(x).item() <= n
    return x
''', "may have side effects"),
    ('''import torch
def f(x, t):
    assert x[t.argmax().item()].item() > 0
    return x
''', "inside the tensor expression"),
    ('''import torch
def f(t, x):
    assert 0 <= t.max().item() < x.size(1)
    return t
''', "chained comparison with a computed bound"),
    ('''import torch
class M(torch.nn.Module):
    def forward(self, lengths, slen):
        assert lengths.max().item() <= slen
        self.calls += 1
        return lengths
''', "changes state"),
    ('''import torch
def f(xs, n):
    for x in xs:
        assert x.max().item() <= n
    return xs
''', "inside a loop"),
    ('''import torch
def f(t, n):
    assert t.max().item() <= n, f"max {t.max().item()} > {n}"
    return t
''', "formatted at run time"),
    # adversarial review (fresh locals): `+x` returns x itself, so `h.clamp_` writes the input
    ('''import torch
def f(x):
    h = +x
    h.clamp_(min=0.0)
    assert h.max().item() <= 10.0
    return h
''', "changes state"),
    # a message formatted from a size (helper-72's r09): formatting the size into the graph's
    # message on every call would specialize it under dynamic shapes (helper-75)
    ('''import torch
def f(x):
    if (x.abs() > 1e4).any():
        raise ValueError("activation overflow in a batch of %d rows" % x.shape[0])
    return x + 1
''', "makes Dynamo specialize the size"),
    # ... while an in-place update of a tensor the function allocated is not a state change
]

FIX_EXAMPLES += AND_FIX_EXAMPLES
DECLINE_EXAMPLES += AND_DECLINE_EXAMPLES

# No-op examples: source left unchanged on every line: checks Dynamo already handles (an
# `assert` without `not` it lowers itself, a shape check it decides at trace time), and the
# rule's own output (the `_assert_async` and its `if __debug__:` guard are not sites).
NOOP_EXAMPLES: list[str] = [
    '''import torch


def f(x):
    assert (x > 0).all(), "x must be positive"
    if x.shape[0] != 2:
        raise ValueError("a batch of two")
    return x.log()
''',
    *(ex[1] for ex in FIX_EXAMPLES),
]
