"""constant-buffer's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after, the site: the class's first line, where the
rewrite's span starts), DECLINE (source, a substring of the reason, the site), NOOP (source
the rule leaves unchanged on every line)."""
from __future__ import annotations

from mend.rules._base import DeclineExample


def example_line(source: str) -> int | None:
    """The line of an example's site: its first ``class`` line."""
    for i, text in enumerate(source.splitlines(), 1):
        if text.startswith("class "):
            return i
    return None


# transformers 5.x EncodecConv1d (modeling_encodec.py:82-176), trimmed to what the rule reads:
# 0-d int64 buffers from Python ints, a float32 ceil of a ratio, reflect padding that branches
# on a padding (`if length <= max_pad`: 27 graph breaks in hf:newest/encodec)
ENCODEC = '''import torch
from torch import nn


class Conv1d(nn.Module):
    def __init__(self, cin, cout, kernel_size, stride=1, dilation=1, causal=False):
        super().__init__()
        self.causal = causal
        self.conv = nn.Conv1d(cin, cout, kernel_size, stride, dilation=dilation)
        kernel_size = self.conv.kernel_size[0]
        stride = torch.tensor(self.conv.stride[0], dtype=torch.int64)
        dilation = self.conv.dilation[0]
        # Effective kernel size with dilations.
        kernel_size = torch.tensor((kernel_size - 1) * dilation + 1, dtype=torch.int64)
        self.stride = nn.Buffer(stride, persistent=False)
        self.kernel_size = nn.Buffer(kernel_size, persistent=False)
        self.padding_total = nn.Buffer(kernel_size - stride, persistent=False)

    def _get_extra_padding_for_conv1d(self, hidden_states: torch.Tensor) -> torch.Tensor:
        length = hidden_states.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        ideal_length = n_frames * self.stride + self.kernel_size - self.padding_total
        return ideal_length - length

    @staticmethod
    def _pad1d(hidden_states, paddings, mode="zero", value=0.0):
        length = hidden_states.shape[-1]
        padding_left, padding_right = paddings
        if mode != "reflect":
            return nn.functional.pad(hidden_states, paddings, mode, value)
        max_pad = max(padding_left, padding_right)
        extra_pad = 0
        if length <= max_pad:
            extra_pad = max_pad - length + 1
            hidden_states = nn.functional.pad(hidden_states, (0, extra_pad))
        padded = nn.functional.pad(hidden_states, paddings, mode, value)
        end = padded.shape[-1] - extra_pad
        return padded[..., :end]

    def forward(self, hidden_states):
        """Pads, then convolves."""
        extra_padding = self._get_extra_padding_for_conv1d(hidden_states)
        if self.causal:
            hidden_states = self._pad1d(hidden_states, (self.padding_total, extra_padding), mode="reflect")
        else:
            padding_right = self.padding_total // 2
            padding_left = self.padding_total - padding_right
            hidden_states = self._pad1d(hidden_states, (padding_left, padding_right + extra_padding), mode="reflect")
        return self.conv(hidden_states)
'''

# mimi's form (modeling_mimi.py:282-292): buffers registered with register_buffer, and
# attributes derived from a buffer (`self.padding_right = self.padding_total // 2`)
MIMI = '''import torch
import torch.nn.functional as F
from torch import nn


class CausalConv(nn.Module):
    def __init__(self, kernel_size, stride):
        super().__init__()
        self.conv = nn.Conv1d(4, 4, kernel_size, stride)
        stride = torch.tensor(stride, dtype=torch.long)
        kernel = torch.tensor(kernel_size, dtype=torch.long)
        self.register_buffer("stride", stride, persistent=False)
        self.register_buffer("kernel", kernel, persistent=False)
        self.padding_total = nn.Buffer(kernel - stride, persistent=False)
        self.padding_right = self.padding_total // 2
        self.padding_left = self.padding_total - self.padding_right

    def forward(self, x):
        n = torch.ceil((x.shape[-1] - self.kernel + self.padding_total) / self.stride).to(torch.int64)
        extra = n * self.stride + self.kernel - self.padding_total - x.shape[-1]
        x = F.pad(x, (self.padding_left, self.padding_right + extra))
        return self.conv(x)
'''


# the exact texts after the rewrite (reviewed by hand; regenerate only with the rule's change)
ENCODEC_AFTER = 'import torch\nfrom torch import nn\n\n\nclass Conv1d(nn.Module):\n    def __init__(self, cin, cout, kernel_size, stride=1, dilation=1, causal=False):\n        super().__init__()\n        self.causal = causal\n        self.conv = nn.Conv1d(cin, cout, kernel_size, stride, dilation=dilation)\n        kernel_size = self.conv.kernel_size[0]\n        _mend_int_stride = self.conv.stride[0]\n        stride = torch.tensor(_mend_int_stride, dtype=torch.int64)\n        dilation = self.conv.dilation[0]\n        # Effective kernel size with dilations.\n        _mend_int_kernel_size = (kernel_size - 1) * dilation + 1\n        kernel_size = torch.tensor(_mend_int_kernel_size, dtype=torch.int64)\n        self.stride = nn.Buffer(stride, persistent=False)\n        self.kernel_size = nn.Buffer(kernel_size, persistent=False)\n        self.padding_total = nn.Buffer(kernel_size - stride, persistent=False)\n        # mend: constant-buffer -- the int buffers above as Python ints (twins), read by `forward` instead of the buffers\n        _mend_int_exact = all(type(v) is int and -2**15 < v < 2**15 for v in (_mend_int_kernel_size, _mend_int_stride))\n        self._mend_int_stride = _mend_int_stride if _mend_int_exact else None\n        self._mend_int_kernel_size = _mend_int_kernel_size if _mend_int_exact else None\n        self._mend_int_padding_total = _mend_int_kernel_size - _mend_int_stride if _mend_int_exact else None\n        self._mend_int_ok = _mend_int_exact and self._mend_int_stride >= 1\n\n    def _get_extra_padding_for_conv1d(self, hidden_states: torch.Tensor) -> torch.Tensor:\n        length = hidden_states.shape[-1]\n        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1\n        n_frames = torch.ceil(n_frames).to(torch.int64) - 1\n        ideal_length = n_frames * self.stride + self.kernel_size - self.padding_total\n        return ideal_length - length\n\n    @staticmethod\n    def _pad1d(hidden_states, paddings, mode="zero", value=0.0):\n        length = hidden_states.shape[-1]\n        padding_left, padding_right = paddings\n        if mode != "reflect":\n            return nn.functional.pad(hidden_states, paddings, mode, value)\n        max_pad = max(padding_left, padding_right)\n        extra_pad = 0\n        if length <= max_pad:\n            extra_pad = max_pad - length + 1\n            hidden_states = nn.functional.pad(hidden_states, (0, extra_pad))\n        padded = nn.functional.pad(hidden_states, paddings, mode, value)\n        end = padded.shape[-1] - extra_pad\n        return padded[..., :end]\n\n    def forward(self, hidden_states):\n        """Pads, then convolves."""\n        if not torch.jit.is_scripting():  # mend: constant-buffer\n            if type(self) is Conv1d and getattr(self, "_mend_int_ok", False):\n                return self._mend_int_forward(hidden_states)\n        extra_padding = self._get_extra_padding_for_conv1d(hidden_states)\n        if self.causal:\n            hidden_states = self._pad1d(hidden_states, (self.padding_total, extra_padding), mode="reflect")\n        else:\n            padding_right = self.padding_total // 2\n            padding_left = self.padding_total - padding_right\n            hidden_states = self._pad1d(hidden_states, (padding_left, padding_right + extra_padding), mode="reflect")\n        return self.conv(hidden_states)\n\n    # mend: constant-buffer -- `forward` on the Python twins of the int buffers (see `forward`)\n    def _mend_int_forward(self, hidden_states):\n        """Pads, then convolves."""\n        extra_padding = self._mend_int__get_extra_padding_for_conv1d(hidden_states)\n        if self.causal:\n            hidden_states = self._pad1d(hidden_states, (self._mend_int_padding_total, extra_padding), mode="reflect")\n        else:\n            padding_right = self._mend_int_padding_total // 2\n            padding_left = self._mend_int_padding_total - padding_right\n            hidden_states = self._pad1d(hidden_states, (padding_left, padding_right + extra_padding), mode="reflect")\n        return self.conv(hidden_states)\n\n    # mend: constant-buffer -- `_get_extra_padding_for_conv1d` on the Python twins of the int buffers (see `forward`)\n    def _mend_int__get_extra_padding_for_conv1d(self, hidden_states: torch.Tensor):\n        length = hidden_states.shape[-1]\n        n_frames = (lambda _mend_int_a, _mend_int_s: (_mend_int_a + _mend_int_s - 1) // _mend_int_s + 1 if -2**22 < _mend_int_a < 2**22 and 0 < _mend_int_s <= 64 and torch.get_default_dtype() in (torch.float32, torch.float64) else int(torch.ceil((length - self.kernel_size + self.padding_total) / self.stride + 1).to(torch.int64)))((length - self._mend_int_kernel_size + self._mend_int_padding_total), self._mend_int_stride) - 1\n        ideal_length = n_frames * self._mend_int_stride + self._mend_int_kernel_size - self._mend_int_padding_total\n        return ideal_length - length\n'
MIMI_AFTER = 'import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass CausalConv(nn.Module):\n    def __init__(self, kernel_size, stride):\n        super().__init__()\n        self.conv = nn.Conv1d(4, 4, kernel_size, stride)\n        _mend_int_stride = stride\n        stride = torch.tensor(_mend_int_stride, dtype=torch.long)\n        _mend_int_kernel = kernel_size\n        kernel = torch.tensor(_mend_int_kernel, dtype=torch.long)\n        self.register_buffer("stride", stride, persistent=False)\n        self.register_buffer("kernel", kernel, persistent=False)\n        self.padding_total = nn.Buffer(kernel - stride, persistent=False)\n        self.padding_right = self.padding_total // 2\n        self.padding_left = self.padding_total - self.padding_right\n        # mend: constant-buffer -- the int buffers above as Python ints (twins), read by `forward` instead of the buffers\n        _mend_int_exact = all(type(v) is int and -2**15 < v < 2**15 for v in (_mend_int_kernel, _mend_int_stride))\n        self._mend_int_stride = _mend_int_stride if _mend_int_exact else None\n        self._mend_int_kernel = _mend_int_kernel if _mend_int_exact else None\n        self._mend_int_padding_total = _mend_int_kernel - _mend_int_stride if _mend_int_exact else None\n        self._mend_int_padding_right = self._mend_int_padding_total // 2 if _mend_int_exact else None\n        self._mend_int_padding_left = self._mend_int_padding_total - self._mend_int_padding_right if _mend_int_exact else None\n        self._mend_int_ok = _mend_int_exact and self._mend_int_stride >= 1\n\n    def forward(self, x):\n        if not torch.jit.is_scripting():  # mend: constant-buffer\n            if type(self) is CausalConv and getattr(self, "_mend_int_ok", False):\n                return self._mend_int_forward(x)\n        n = torch.ceil((x.shape[-1] - self.kernel + self.padding_total) / self.stride).to(torch.int64)\n        extra = n * self.stride + self.kernel - self.padding_total - x.shape[-1]\n        x = F.pad(x, (self.padding_left, self.padding_right + extra))\n        return self.conv(x)\n\n    # mend: constant-buffer -- `forward` on the Python twins of the int buffers (see `forward`)\n    def _mend_int_forward(self, x):\n        n = (lambda _mend_int_a, _mend_int_s: (_mend_int_a + _mend_int_s - 1) // _mend_int_s if -2**22 < _mend_int_a < 2**22 and 0 < _mend_int_s <= 64 and torch.get_default_dtype() in (torch.float32, torch.float64) else int(torch.ceil((x.shape[-1] - self.kernel + self.padding_total) / self.stride).to(torch.int64)))((x.shape[-1] - self._mend_int_kernel + self._mend_int_padding_total), self._mend_int_stride)\n        extra = n * self._mend_int_stride + self._mend_int_kernel - self._mend_int_padding_total - x.shape[-1]\n        x = F.pad(x, (self._mend_int_padding_left, self._mend_int_padding_right + extra))\n        return self.conv(x)\n'


FIX_EXAMPLES: list[tuple] = [
    (ENCODEC, ENCODEC_AFTER),
    (MIMI, MIMI_AFTER),
]


def _swap(source: str, old: str, new: str) -> str:
    assert old in source, old
    return source.replace(old, new)


DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # trap: a buffer written after construction; the twin would go stale
    DeclineExample(ENCODEC + "\n    def reset(self):\n        self.stride.fill_(2)\n", "writes in place"),
    DeclineExample(ENCODEC + "\n    def grow(self):\n        self.kernel_size = self.kernel_size + 1\n",
                   "writes `kernel_size`"),
    # ... and in forward, the typing sees the same write first
    DeclineExample(_swap(ENCODEC, "        return self.conv(hidden_states)\n",
                         "        self.stride.fill_(2)\n        return self.conv(hidden_states)\n"),
                   "`.fill_()` is called on it"),
    # transformers 5's `_init_weights` re-sets the buffers with init.copy_: a value other than the
    # one `__init__` registered declines (the same value is allowed: tests/test_rule_constant_buffer.py)
    DeclineExample(ENCODEC + "\n\ndef _init_weights(module):\n    stride = torch.tensor(module.conv.stride[0] + 1, "
                   "dtype=torch.int64)\n    init.copy_(module.stride, stride)\n", "not the value `__init__` registered"),
    # trap: the buffer meets a tensor (promotion and broadcasting are the tensor's, not an int's)
    DeclineExample(_swap(ENCODEC, "        return self.conv(hidden_states)\n",
                         "        return self.conv(hidden_states) * self.stride\n"),
                   "outside `+ - *`"),
    # trap: a 0-d tensor index is advanced indexing (a copy), an int index a view
    DeclineExample(_swap(ENCODEC, "        return padded[..., :end]\n", "        return padded[..., end]\n"),
                   "advanced indexing"),
    # the buffer's device is read: an int has none
    DeclineExample(_swap(ENCODEC, "        length = hidden_states.shape[-1]\n        n_frames",
                         "        length = hidden_states.shape[-1]\n        dev = self.stride.device\n        n_frames"),
                   "an attribute is read from it"),
    # trap: an offset outside the ceil lemma's [-8, 8]
    DeclineExample(_swap(ENCODEC, "/ self.stride + 1\n", "/ self.stride + 9\n"), "outside the lemma's"),
    # a persistent buffer is loaded from checkpoints: its value is not the constructor's
    DeclineExample(ENCODEC.replace("persistent=False", "persistent=True"), "registers no non-persistent buffer"),
    # the buffer's name as a string: read or written by name (getattr, state-dict code)
    DeclineExample(_swap(ENCODEC, "        return self.conv(hidden_states)\n",
                         "        getattr(self, \"stride\")\n        return self.conv(hidden_states)\n"),
                   "may name the buffer"),
    # an `__init__` that may return before the twins are set
    DeclineExample(_swap(ENCODEC, "        self.causal = causal\n", "        self.causal = causal\n        if cin == 0:\n"
                         "            return\n"), "returns early"),
    # a float buffer is not an int: nothing to twin
    DeclineExample(ENCODEC.replace("dtype=torch.int64", "dtype=torch.float32"), "registers no non-persistent"),
    # the value leaves the class: what the callee does with a 0-d tensor is not seen
    DeclineExample(_swap(ENCODEC, "        return self.conv(hidden_states)\n",
                         "        print(self.stride)\n        return self.conv(hidden_states)\n"),
                   "passed to `print`"),
]

NOOP_EXAMPLES: list[str] = [
    # a float buffer used in tensor arithmetic: not an int constant
    '''import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Buffer(torch.tensor(0.5), persistent=False)

    def forward(self, x):
        if x.shape[-1] > 2:
            x = x[..., :2]
        return x * self.scale
''',
]

# registered inline, no local (`self.register_buffer("B", torch.tensor(E, dtype=torch.int64), ...)`):
# the twin is made on the line before each registration, which then reads it
INLINE = 'import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Conv(nn.Module):\n    def __init__(self, cin, cout, kernel_size, stride):\n        super().__init__()\n        self.conv = nn.Conv1d(cin, cout, kernel_size, stride)\n        self.register_buffer("stride", torch.tensor(self.conv.stride[0], dtype=torch.int64), persistent=False)\n        self.register_buffer("kernel_size", torch.tensor(self.conv.kernel_size[0], dtype=torch.int64),\n                             persistent=False)\n        self.register_buffer("padding_total", torch.tensor(self.conv.kernel_size[0] - self.conv.stride[0],\n                                                           dtype=torch.int64), persistent=False)\n\n    def forward(self, x):\n        pad = self.padding_total\n        if pad > 0:\n            x = F.pad(x, (pad, 0))\n        return self.conv(x)\n'
INLINE_AFTER = 'import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Conv(nn.Module):\n    def __init__(self, cin, cout, kernel_size, stride):\n        super().__init__()\n        self.conv = nn.Conv1d(cin, cout, kernel_size, stride)\n        _mend_int_inline_stride = self.conv.stride[0]\n        self.register_buffer("stride", torch.tensor(_mend_int_inline_stride, dtype=torch.int64), persistent=False)\n        _mend_int_inline_kernel_size = self.conv.kernel_size[0]\n        self.register_buffer("kernel_size", torch.tensor(_mend_int_inline_kernel_size, dtype=torch.int64),\n                             persistent=False)\n        _mend_int_inline_padding_total = self.conv.kernel_size[0] - self.conv.stride[0]\n        self.register_buffer("padding_total", torch.tensor(_mend_int_inline_padding_total,\n                                                           dtype=torch.int64), persistent=False)\n        # mend: constant-buffer -- the int buffers above as Python ints (twins), read by `forward` instead of the buffers\n        _mend_int_exact = all(type(v) is int and -2**15 < v < 2**15 for v in (_mend_int_inline_kernel_size, _mend_int_inline_padding_total, _mend_int_inline_stride))\n        self._mend_int_stride = _mend_int_inline_stride if _mend_int_exact else None\n        self._mend_int_kernel_size = _mend_int_inline_kernel_size if _mend_int_exact else None\n        self._mend_int_padding_total = _mend_int_inline_padding_total if _mend_int_exact else None\n        self._mend_int_ok = _mend_int_exact\n\n    def forward(self, x):\n        if not torch.jit.is_scripting():  # mend: constant-buffer\n            if type(self) is Conv and getattr(self, "_mend_int_ok", False):\n                return self._mend_int_forward(x)\n        pad = self.padding_total\n        if pad > 0:\n            x = F.pad(x, (pad, 0))\n        return self.conv(x)\n\n    # mend: constant-buffer -- `forward` on the Python twins of the int buffers (see `forward`)\n    def _mend_int_forward(self, x):\n        pad = self._mend_int_padding_total\n        if pad > 0:\n            x = F.pad(x, (pad, 0))\n        return self.conv(x)\n'
FIX_EXAMPLES.append((INLINE, INLINE_AFTER))
