"""predicated-control-flow's fix examples (Fixit / pyupgrade style), (before, the exact text
after), from which ``tests/test_rules.py`` is generated. The site is the line
:func:`~mend.rules.predicated_control_flow.rewrite.first_site` picks. The examples the rule
leaves unchanged (declines and no-ops) are in :mod:`.unchanged_examples`."""
from __future__ import annotations

from textwrap import dedent

from mend.rules.predicated_control_flow.fp16_examples import FP16_GUARD_EXAMPLES
from mend.rules.predicated_control_flow.form_examples import STATEMENT_FORM_EXAMPLES
from mend.rules.predicated_control_flow.cond_examples import COND_TEMP_EXAMPLES
from mend.rules.predicated_control_flow.gate_examples import GATE_EXAMPLES

FIX_EXAMPLES: list[tuple[str, str]] = [
    # shared/cases 001: if without else, the target defined before
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 16, threshold: float = 0.25):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.threshold = threshold

                def forward(self, x):
                    h = self.proj(x)
                    if h.pow(2).mean() > self.threshold:
                        h = h * 0.5
                    return torch.relu(h)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 16, threshold: float = 0.25):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.threshold = threshold

                def forward(self, x):
                    h = self.proj(x)
                    h = torch.where(h.pow(2).mean() > self.threshold, h * 0.5, h)  # mend: predicated-control-flow (was: if h.pow(2).mean() > self.threshold)
                    return torch.relu(h)
        '''),
    ),
    # shared/cases 002: masked_fill only when there is padding (comments inside the if are kept)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, scores, pad_mask):
                    if (pad_mask == 0).any():
                        # hide padded keys
                        scores = scores.masked_fill(pad_mask[:, None, :] == 0, float("-inf"))
                    return scores.softmax(dim=-1)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, scores, pad_mask):
                    # hide padded keys
                    scores = torch.where((pad_mask == 0).any(), scores.masked_fill(pad_mask[:, None, :] == 0, float("-inf")), scores)  # mend: predicated-control-flow (was: if (pad_mask == 0).any())
                    return scores.softmax(dim=-1)
        '''),
    ),
    # shared/cases 004, line 37: tensor `and`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = (action >= self.low).all() and (action <= self.high).all()
                    return inside
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = torch.logical_and((action >= self.low).all(), (action <= self.high).all())  # mend: predicated-control-flow (was: (action >= self.low).all() and (action <= self.high).all())
                    return inside
        '''),
    ),
    # shared/cases 004, line 38: `if not inside`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = torch.logical_and((action >= self.low).all(), (action <= self.high).all())
                    if not inside:
                        action = torch.maximum(torch.minimum(action, self.high), self.low)
                    return action
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = torch.logical_and((action >= self.low).all(), (action <= self.high).all())
                    action = torch.where(torch.logical_not(inside), torch.maximum(torch.minimum(action, self.high), self.low), action)  # mend: predicated-control-flow (was: if not inside)
                    return action
        '''),
    ),
    # if/else assigning two names: the predicate is evaluated once, reads stay in order
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, y):
                    # gate on the sign of the sum
                    if x.sum() > 0:  # positive
                        a = x * 2
                        b = y + a
                    else:
                        b = y - x
                        a = x
                    return a, b
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, y):
                    # gate on the sign of the sum
                    # positive
                    _mend_pred_0 = x.sum() > 0  # mend: predicated-control-flow (was: if x.sum() > 0)
                    a = torch.where(_mend_pred_0, x * 2, x)
                    b = torch.where(_mend_pred_0, y + a, y - x)
                    return a, b
        '''),
    ),
    # elif chain -> nested torch.where
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.mean() > 1:
                        y = x * 3
                    elif x.mean() < -1:
                        y = -x
                    else:
                        y = x + 1
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    y = torch.where(x.mean() > 1, x * 3, torch.where(x.mean() < -1, -x, x + 1))  # mend: predicated-control-flow (was: if x.mean() > 1)
                    return y
        '''),
    ),
    # both sides return
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if (x > 0).all():
                        return x * 3
                    else:
                        return x - 1
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    return torch.where((x > 0).all(), x * 3, x - 1)  # mend: predicated-control-flow (was: if (x > 0).all())
        '''),
    ),
    # `if p: return a` followed by `return b`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = torch.tanh(x)
                    if h.abs().max() > 0.5:
                        return h * 0.5
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = torch.tanh(x)
                    return torch.where(h.abs().max() > 0.5, h * 0.5, h)  # mend: predicated-control-flow (was: if h.abs().max() > 0.5)
        '''),
    ),
    # `import torch as th`: the alias is reused
    (
        dedent('''\
            import torch as th


            def clip(x):
                h = x + 1
                if (h < 0).any():
                    h = th.relu(h)
                return h
        '''),
        dedent('''\
            import torch as th


            def clip(x):
                h = x + 1
                h = th.where((h < 0).any(), th.relu(h), h)  # mend: predicated-control-flow (was: if (h < 0).any())
                return h
        '''),
    ),
    # no `import torch` (only `from torch import nn`): it is added
    (
        dedent('''\
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = x + 1
                    if (h < 0).any() or not (h < 100).all():
                        h = h.clamp(0, 100)
                    return h
        '''),
        dedent('''\
            from torch import nn
            import torch


            class Model(nn.Module):
                def forward(self, x):
                    h = x + 1
                    h = torch.where(torch.logical_or((h < 0).any(), torch.logical_not((h < 100).all())), h.clamp(0, 100), h)  # mend: predicated-control-flow (was: if (h < 0).any() or not (h < 100).all())
                    return h
        '''),
    ),
    # a Python-level guard `and` a tensor test (BART's fp16 clamp): the guard stays an `if`; the setup temporary `clamp_value` runs before the selection
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16 and (
                        torch.isinf(h).any() or torch.isnan(h).any()
                    ):
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.logical_or(torch.isinf(h).any(), torch.isnan(h).any()), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if torch.isinf(h).any() or torch.isnan(h).any())
                    return h
        '''),
    ),
    # an `elif` site after a Python-level test -> `else:` around the selection
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, mask=None):
                    if mask is None:
                        y = x
                    elif mask.all():
                        y = x * 2
                    else:
                        y = x.masked_fill(mask, 0.0)
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, mask=None):
                    if mask is None:
                        y = x
                    else:
                        y = torch.where(mask.all(), x * 2, x.masked_fill(mask, 0.0))  # mend: predicated-control-flow (was: elif mask.all())
                    return y
        '''),
    ),
    # a chained comparison on a tensor
    (
        dedent('''\
            import torch


            def in_unit_interval(x):
                ok = 0 < x.mean() < 1
                return ok
        '''),
        dedent('''\
            import torch


            def in_unit_interval(x):
                ok = torch.logical_and(0 < x.mean(), x.mean() < 1)  # mend: predicated-control-flow (was: 0 < x.mean() < 1)
                return ok
        '''),
    ),
    # the LongRoPE frequency update (transformers modeling_rope_utils): the memoised initialisation
    # and the device move are hoisted above one register_buffer whose value is selected
    (
        dedent('''\
            import torch
            from torch import nn


            def init_freq(dim, device, seq_len=None):
                factor = 2.0 if seq_len else 1.0
                exponents = torch.arange(0, dim, 2, device=device).float() / dim
                return 1.0 / (factor * 10000 ** exponents), factor


            def frequency_update(self, position_ids, device):
                """Long frequencies past the short limit, short ones otherwise."""
                seq_len = torch.max(position_ids) + 1
                if seq_len > self.short_limit:
                    if not hasattr(self, "long_freq"):
                        self.long_freq, _ = self.freq_fn(self.dim, device, seq_len=self.short_limit + 1)
                    self.register_buffer("freq", self.long_freq, persistent=False)
                else:
                    # keep the copy on the input's device
                    self.short_freq = self.short_freq.to(device)
                    self.register_buffer("freq", self.short_freq, persistent=False)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, short_limit: int = 4):
                    super().__init__()
                    self.dim, self.short_limit = dim, short_limit
                    self.freq_fn = init_freq
                    freq, _ = init_freq(dim, None)
                    self.register_buffer("freq", freq, persistent=False)
                    self.short_freq = self.freq

                def forward(self, x, position_ids):
                    frequency_update(self, position_ids, x.device)
                    angles = position_ids[..., None].float() * self.freq
                    return x * torch.cos(angles)
        '''),
        dedent('''\
            import torch
            from torch import nn


            def init_freq(dim, device, seq_len=None):
                factor = 2.0 if seq_len else 1.0
                exponents = torch.arange(0, dim, 2, device=device).float() / dim
                return 1.0 / (factor * 10000 ** exponents), factor


            def frequency_update(self, position_ids, device):
                """Long frequencies past the short limit, short ones otherwise."""
                seq_len = torch.max(position_ids) + 1
                if not hasattr(self, "long_freq"):
                    self.long_freq, _ = self.freq_fn(self.dim, device, seq_len=self.short_limit + 1)
                # keep the copy on the input's device
                self.short_freq = self.short_freq.to(device)
                self.register_buffer("freq", torch.where(seq_len > self.short_limit, self.long_freq, self.short_freq), persistent=False)  # mend: predicated-control-flow (was: if seq_len > self.short_limit)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, short_limit: int = 4):
                    super().__init__()
                    self.dim, self.short_limit = dim, short_limit
                    self.freq_fn = init_freq
                    freq, _ = init_freq(dim, None)
                    self.register_buffer("freq", freq, persistent=False)
                    self.short_freq = self.freq

                def forward(self, x, position_ids):
                    frequency_update(self, position_ids, x.device)
                    angles = position_ids[..., None].float() * self.freq
                    return x * torch.cos(angles)
        '''),
    ),
    # the same pattern in a class: memoised table, device move, paired register_buffer
    (
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, limit: float = 1.0):
                    super().__init__()
                    self.dim, self.limit = dim, limit
                    self.table_fn = ramp
                    self.register_buffer("table", torch.ones(dim), persistent=False)
                    self.base_table = self.table

                def forward(self, x):
                    if x.abs().amax() > self.limit:
                        if not hasattr(self, "wide_table"):
                            self.wide_table = self.table_fn(self.dim, 2.0)
                        self.register_buffer("table", self.wide_table, persistent=False)
                    else:
                        self.base_table = self.base_table.to(x.device)
                        self.register_buffer("table", self.base_table, persistent=False)
                    return x * self.table
        '''),
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, limit: float = 1.0):
                    super().__init__()
                    self.dim, self.limit = dim, limit
                    self.table_fn = ramp
                    self.register_buffer("table", torch.ones(dim), persistent=False)
                    self.base_table = self.table

                def forward(self, x):
                    if not hasattr(self, "wide_table"):
                        self.wide_table = self.table_fn(self.dim, 2.0)
                    self.base_table = self.base_table.to(x.device)
                    self.register_buffer("table", torch.where(x.abs().amax() > self.limit, self.wide_table, self.base_table), persistent=False)  # mend: predicated-control-flow (was: if x.abs().amax() > self.limit)
                    return x * self.table
        '''),
    ),
    # a memoised initialisation on one side of a plain selection
    (
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 6, cap: float = 2.0):
                    super().__init__()
                    self.dim, self.cap = dim, cap
                    self.weight_fn = ramp

                def forward(self, x):
                    if x.abs().max() > self.cap:
                        if not hasattr(self, "damp"):
                            self.damp = self.weight_fn(self.dim, 0.5)
                        y = x * self.damp
                    else:
                        y = x
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 6, cap: float = 2.0):
                    super().__init__()
                    self.dim, self.cap = dim, cap
                    self.weight_fn = ramp

                def forward(self, x):
                    if not hasattr(self, "damp"):
                        self.damp = self.weight_fn(self.dim, 0.5)
                    y = torch.where(x.abs().max() > self.cap, x * self.damp, x)  # mend: predicated-control-flow (was: if x.abs().max() > self.cap)
                    return y
        '''),
    ),
    # a predicate not statically a bool tensor: `if gate:` reads bool(gate), `gate != 0` for one element of any
    # dtype (held-out case 343: an int count); the submodule call runs speculatively (untaken-side-runs)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, x, gate):
                    h = x * 2.0
                    if gate:
                        h = self.proj(h)
                    return torch.relu(h)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, x, gate):
                    h = x * 2.0
                    h = torch.where(gate != 0, self.proj(h), h)  # mend: predicated-control-flow (was: if gate)
                    return torch.relu(h)
        '''),
    ),
    # tensor `and` whose left operand is not statically a bool tensor (bool-operand)
    (
        dedent('''\
            import torch


            def forward(h, mask, scale):
                if mask and scale > 1:
                    h = h * scale
                return h
        '''),
        dedent('''\
            import torch


            def forward(h, mask, scale):
                h = torch.where(torch.logical_and(mask, scale > 1), h * scale, h)  # mend: predicated-control-flow (was: if mask and scale > 1)
                return h
        '''),
    ),
]

FIX_EXAMPLES += [
    # a branch inside a `for` loop, predicated alike on each iteration (helper-60's per-layer
    # rescale; `loop-facts-agree` checks that every iteration showed the same facts)
    (
        '''import torch


def rescale(layers, h):
    for layer in layers:
        h = layer(h)
        if h.abs().max() > 10.0:
            h = h * 0.1
    return h
''',
        '''import torch


def rescale(layers, h):
    for layer in layers:
        h = layer(h)
        h = torch.where(h.abs().max() > 10.0, h * 0.1, h)  # mend: predicated-control-flow (was: if h.abs().max() > 10.0)
    return h
''',
    ),
]
FIX_EXAMPLES += FP16_GUARD_EXAMPLES
FIX_EXAMPLES += STATEMENT_FORM_EXAMPLES
FIX_EXAMPLES += GATE_EXAMPLES
FIX_EXAMPLES += COND_TEMP_EXAMPLES
