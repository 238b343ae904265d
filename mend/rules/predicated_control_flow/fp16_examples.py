"""predicated-control-flow's FIX examples for issue 10's fp16 overflow guards (T5, LED,
DETR shapes in transformers 5.24), kept apart from :mod:`.examples` for size."""
from __future__ import annotations

from textwrap import dedent

FP16_GUARD_EXAMPLES: list[tuple[str, str]] = [
    # issue 10, T5/LongT5/Pix2Struct's fp16 guard (`isinf(h).any()`), its second site (the first already mended): `clamp_value`, named elsewhere in the function but dead after the `if`, is a branch-local Python scalar hoisted before the selection, which keeps the global `.any()`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.ff = nn.Linear(8, 8)

                def forward(self, h):
                    # clamp inf values to enable fp16 training
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if torch.isinf(h).any())
                    h = h + self.ff(h)
                    # clamp inf values to enable fp16 training
                    if h.dtype == torch.float16 and torch.isinf(h).any():
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.ff = nn.Linear(8, 8)

                def forward(self, h):
                    # clamp inf values to enable fp16 training
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if torch.isinf(h).any())
                    h = h + self.ff(h)
                    # clamp inf values to enable fp16 training
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if torch.isinf(h).any())
                    return h
        '''),
    ),
    # issue 10, LED/BART 5.x's fp16 guard (`not isfinite(h).all()`): `clamp_value` is rebound by the next statement before any read, so it is dead after the `if`; the global `.all()` stays
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc2 = nn.Linear(8, 8)

                def forward(self, h):
                    residual = h
                    h = residual + self.fc2(h)
                    if h.dtype == torch.float16 and not torch.isfinite(h).all():
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.logical_not(torch.isfinite(h).all()), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if not torch.isfinite(h).all())
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc2 = nn.Linear(8, 8)

                def forward(self, h):
                    residual = h
                    h = residual + self.fc2(h)
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.logical_not(torch.isfinite(h).all()), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if not torch.isfinite(h).all())
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.logical_not(torch.isfinite(h).all()), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if not torch.isfinite(h).all())
                    return h
        '''),
    ),
    # issue 10, DETR's training-only guard (`if self.training: if not isfinite(h).all()`): the selection goes inside the Python-level `if`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mlp = nn.Linear(8, 8)

                def forward(self, hidden_states):
                    residual = hidden_states
                    hidden_states = residual + self.mlp(hidden_states)

                    if self.training:
                        if not torch.isfinite(hidden_states).all():
                            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
                            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

                    return hidden_states
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mlp = nn.Linear(8, 8)

                def forward(self, hidden_states):
                    residual = hidden_states
                    hidden_states = residual + self.mlp(hidden_states)

                    if self.training:
                        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
                        hidden_states = torch.where(torch.logical_not(torch.isfinite(hidden_states).all()), torch.clamp(hidden_states, min=-clamp_value, max=clamp_value), hidden_states)  # mend: predicated-control-flow (was: if not torch.isfinite(hidden_states).all())

                    return hidden_states
        '''),
    ),
    # the Python-level guard held in a local (`fp16 = h.dtype == torch.float16`, every binding of it a static test): it stays an `if`, as the inline form does
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    fp16 = h.dtype == torch.float16
                    if fp16 and not torch.isfinite(h).all():
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    fp16 = h.dtype == torch.float16
                    if fp16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.logical_not(torch.isfinite(h).all()), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if not torch.isfinite(h).all())
                    return h
        '''),
    ),
]
