"""forward-attribute's examples (Fixit / pyupgrade style), from which ``tests/test_rules.py`` is
generated: FIX (before, the exact text after), DECLINE (source, a substring of the reason),
NOOP (source the rule leaves unchanged on every line)."""
from __future__ import annotations

import re

from mend.rules._base import DeclineExample

_WRITE = re.compile(r"^\s*self\.(\w+)(\s*:[^=]+)?\s*=\s*self\.\1\.")


def example_line(source: str) -> int:
    """The line of an example's site: its first ``self.X = self.X.<...>`` line, else its
    first assignment to a ``self.`` attribute inside ``forward``."""
    lines = source.splitlines()
    for i, text in enumerate(lines, 1):
        if _WRITE.match(text):
            return i
    in_forward = False
    for i, text in enumerate(lines, 1):
        if "def forward(" in text:
            in_forward = True
        elif in_forward and re.match(r"^\s*self\.\w+\s*=", text):
            return i
    raise ValueError("no attribute write in example")


_HEAD = '''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_encoding = nn.Buffer(torch.randn(16, 4), persistent=False)

'''

FIX_EXAMPLES: list[tuple[str, str]] = [
    # transformers 5.24 ctrl (CTRLModel.forward, modeling_ctrl.py:319), trimmed; the trap: the
    # plain local (no store) leaves the buffer float32 after a float64 call, the original float64
    (
        _HEAD + '''    def forward(self, position_ids, inputs_embeds):
        device = inputs_embeds.device
        # `self.pos_encoding` won't be sent to the correct device and dtype along the model
        self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)
        pos_embeds = self.pos_encoding[position_ids, :]
        return inputs_embeds + pos_embeds
''',
        _HEAD + '''    def forward(self, position_ids, inputs_embeds):
        device = inputs_embeds.device
        # `self.pos_encoding` won't be sent to the correct device and dtype along the model
        pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype)  # mend: forward-attribute (was: self.pos_encoding = self.pos_encoding.to(device=device, dtype=inputs_embeds.dtype))
        if pos_encoding is not self.pos_encoding:
            self.pos_encoding = pos_encoding
        pos_embeds = self.pos_encoding[position_ids, :]
        return inputs_embeds + pos_embeds
''',
    ),
    # the name is taken in the method: a fresh local; an alias taken before the write keeps the
    # old object in both versions; the attribute read by another method (it sees the same state)
    (
        _HEAD + '''    def forward(self, x):
        pos_encoding = x * 2
        old = self.pos_encoding
        self.pos_encoding = self.pos_encoding.float()
        return pos_encoding + self.pos_encoding[:2] + old[:2]

    def table(self):
        return self.pos_encoding
''',
        _HEAD + '''    def forward(self, x):
        pos_encoding = x * 2
        old = self.pos_encoding
        pos_encoding_ = self.pos_encoding.float()  # mend: forward-attribute (was: self.pos_encoding = self.pos_encoding.float())
        if pos_encoding_ is not self.pos_encoding:
            self.pos_encoding = pos_encoding_
        return pos_encoding + self.pos_encoding[:2] + old[:2]

    def table(self):
        return self.pos_encoding
''',
    ),
    # inside a try: the conversion raises where it did
    (
        _HEAD + '''    def forward(self, x):
        try:
            self.pos_encoding = self.pos_encoding.to(x.dtype)
        except RuntimeError:
            pass
        return x + self.pos_encoding[:2]
''',
        _HEAD + '''    def forward(self, x):
        try:
            pos_encoding = self.pos_encoding.to(x.dtype)  # mend: forward-attribute (was: self.pos_encoding = self.pos_encoding.to(x.dtype))
            if pos_encoding is not self.pos_encoding:
                self.pos_encoding = pos_encoding
        except RuntimeError:
            pass
        return x + self.pos_encoding[:2]
''',
    ),
]

# helper-48: a chain of conversions, and `type_as`, return the stored tensor when nothing changes
FIX_EXAMPLES += [
    (
        _HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.device).to(x.dtype)
        return x + self.pos_encoding[: x.shape[0]]
''',
        _HEAD + '''    def forward(self, x):
        pos_encoding = self.pos_encoding.to(x.device).to(x.dtype)  # mend: forward-attribute (was: self.pos_encoding = self.pos_encoding.to(x.device).to(x.dtype))
        if pos_encoding is not self.pos_encoding:
            self.pos_encoding = pos_encoding
        return x + self.pos_encoding[: x.shape[0]]
''',
    ),
    (
        _HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.type_as(x)
        return x + self.pos_encoding[: x.shape[0]]
''',
        _HEAD + '''    def forward(self, x):
        pos_encoding = self.pos_encoding.type_as(x)  # mend: forward-attribute (was: self.pos_encoding = self.pos_encoding.type_as(x))
        if pos_encoding is not self.pos_encoding:
            self.pos_encoding = pos_encoding
        return x + self.pos_encoding[: x.shape[0]]
''',
    ),
]

DECLINE_EXAMPLES: list[DeclineExample | tuple] = [
    # helper-49 (nllb_moe's router): a submodule converted and stored back
    ('''import torch
from torch import nn


class Router(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(4, 2)

    def forward(self, x):
        self.classifier = self.classifier.to(x.dtype)
        return self.classifier(x)
''', "is a submodule"),
    # a conversion chain with a call that is not a conversion in it
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.clone().to(x.dtype)
        return x + self.pos_encoding[: x.shape[0]]
''', "not a conversion"),
    # not a conversion of the same attribute: the new value is always a new object
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding * 2
        return x
''', "not a conversion"),
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = x.to(torch.float32)
        return x
''', "not a conversion"),
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype, copy=True)
        return x
''', "copy="),
    # a Parameter: a converted plain tensor cannot be stored there
    ('''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        self.scale = self.scale.to(x.dtype)
        return x * self.scale
''', "Parameter"),
    # a property (reads run code; the rewrite reads twice)
    ('''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self._table = torch.randn(4)

    @property
    def table(self):
        return self._table

    @table.setter
    def table(self, value):
        self._table = value * 2

    def forward(self, x):
        self.table = self.table.to(x.dtype)
        return x + self.table
''', "binds `table`"),
    # a subclass overriding the attribute with a class attribute
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype)
        return x + self.pos_encoding[:2]


class Fixed(Model):
    pos_encoding = None
''', "binds `pos_encoding`"),
    # __setattr__ overridden: the skipped store would have run it
    (_HEAD + '''    def __setattr__(self, name, value):
        self.__dict__.setdefault("writes", []).append(name)
        super().__setattr__(name, value)

    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype)
        return x + self.pos_encoding[:2]
''', "defines `__setattr__`"),
    # in a loop: Dynamo skips the frame
    (_HEAD + '''    def forward(self, xs):
        for x in xs:
            self.pos_encoding = self.pos_encoding.to(x.dtype)
        return xs
''', "inside a loop"),
    # written again / deleted in the same method
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype)
        y = x + self.pos_encoding[:2]
        del self.pos_encoding
        return y
''', "written again"),
    # a global hook sees every buffer store
    ('''import torch
from torch import nn

torch.nn.modules.module.register_module_buffer_registration_hook(lambda m, n, t: t)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos_encoding = nn.Buffer(torch.randn(16, 4))

    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype)
        return x + self.pos_encoding[:2]
''', "register_module_buffer_registration_hook"),
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype); y = x * 2
        return y
''', "shares its line"),
    (_HEAD + '''    def forward(self, x):
        self.pos_encoding = self.pos_encoding.to(x.dtype)  # keep in sync
        return x
''', "comment"),
    # a plain value written to an attribute in forward: not this rule's shape
    (_HEAD + '''    def forward(self, x):
        self.calls = 1
        return x
''', "not a conversion"),
]

NOOP_EXAMPLES: list[str] = [
    # a local conversion: nothing written back
    _HEAD + '''    def forward(self, x):
        pos_encoding = self.pos_encoding.to(x.dtype)
        return x + pos_encoding[:2]
''',
]
