"""predicated-validation's examples of ``assert A and B, msg``, split into one check per operand
(helper-78's c02); added to :data:`~mend.rules.predicated_validation.examples.FIX_EXAMPLES` and
``DECLINE_EXAMPLES``."""
from __future__ import annotations

AND_FIX_EXAMPLES: list[tuple[str, str]] = [
    # two tensor tests: each its own guarded check, the same AssertionError restored
    (
        '''import torch


def f(x, p):
    assert torch.all(p >= 0) and torch.all(p <= 1), "p must be in [0, 1]"
    return x * p
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a49d1118f01a": lambda: AssertionError("p must be in [0, 1]"),
    "9f951ad960bc": lambda: AssertionError("p must be in [0, 1]"),
}


def f(x, p):
    if __debug__:
        _mend_cond = torch.all(p >= 0)
        if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized:
            torch._assert_async(_mend_cond, f"mend-trap:{__name__}:_MEND_TRAPS.a49d1118f01a")
        else:
            assert _mend_cond, "p must be in [0, 1]"
        _mend_cond_2 = torch.all(p <= 1)
        if torch.compiler.is_compiling() and type(_mend_cond_2) is torch.Tensor and _mend_cond_2.numel() == 1 and _mend_cond_2.device.type == 'cpu' and _mend_cond_2.layout == torch.strided and not _mend_cond_2.is_quantized:
            torch._assert_async(_mend_cond_2, f"mend-trap:{__name__}:_MEND_TRAPS.9f951ad960bc")
        else:
            assert _mend_cond_2, "p must be in [0, 1]"
    return x * p
''',
    ),
    # a Python-level operand stays a plain assert (Dynamo decides it at trace time); a `not`
    # operand asserts its negation; no message: none restored
    (
        '''import torch


def f(ids):
    assert ids is not None and (ids >= 0).all() and not (ids >= 1024).any()
    return ids * 2
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "bbc62b584630": lambda: AssertionError(),
    "1cac51d3ff75": lambda: AssertionError(),
}


def f(ids):
    if __debug__:
        assert ids is not None
        _mend_cond = (ids >= 0).all()
        if torch.compiler.is_compiling() and type(_mend_cond) is torch.Tensor and _mend_cond.numel() == 1 and _mend_cond.device.type == 'cpu' and _mend_cond.layout == torch.strided and not _mend_cond.is_quantized:
            torch._assert_async(_mend_cond, f"mend-trap:{__name__}:_MEND_TRAPS.bbc62b584630")
        else:
            assert _mend_cond
        _mend_cond_2 = (ids >= 1024).any()
        if torch.compiler.is_compiling() and type(_mend_cond_2) is torch.Tensor and _mend_cond_2.numel() == 1 and _mend_cond_2.device.type == 'cpu' and _mend_cond_2.layout == torch.strided and not _mend_cond_2.is_quantized and _mend_cond_2.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64):
            torch._assert_async(
                torch.logical_not(_mend_cond_2),
                f"mend-trap:{__name__}:_MEND_TRAPS.1cac51d3ff75",
            )
        else:
            assert not _mend_cond_2
    return ids * 2
''',
    ),
]

AND_DECLINE_EXAMPLES: list[tuple[str, str]] = [
    # the second operand indexes: Python skips it when the first fails, the graph computes it
    ('''import torch
def f(idx, table):
    assert (idx < table.shape[0]).all() and (table[idx] > 0).all(), "bad index"
    return table[idx]
''', "its indexing (`table[idx]`) may raise"),
    # a reduction over a dim that may be out of range
    ('''import torch
def f(p):
    assert torch.all(p >= 0) and (p <= 1).all(1).all(), "p must be in [0, 1]"
    return p
''', "passes other arguments than the one tensor"),
    # a call the screen cannot show total
    ('''import torch
def f(p):
    assert torch.all(p >= 0) and torch.all(p.max() <= 1), "p must be in [0, 1]"
    return p
''', "it calls `p.max`"),
    ('''import torch
def f(p):
    assert torch.all(p >= 0) or torch.all(p <= 1), "p"
    return p
''', "the condition is an `or`"),
    # helper-81's c07b: the first operand guards the shapes the second combines; traced on every
    # call, `x * mask` of shapes that do not broadcast is a hard error where Python raised the assert
    ('''import torch
def f(x, mask):
    assert (torch.tensor(mask.shape) == torch.tensor(x.shape)).all() and torch.all(x * mask >= 0), "shapes"
    return x * mask
''', "combines two values that may be tensors"),
    # helper-81: `x.mT` of a 1-D tensor raises, `x.T` warns
    ('''import torch
def f(x):
    assert torch.all(x >= 0) and torch.all(x.mT <= 1), "x"
    return x
''', "an attribute of a value"),
]
