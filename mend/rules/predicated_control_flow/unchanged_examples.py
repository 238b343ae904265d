"""predicated-control-flow's examples of source it leaves unchanged, from which
``tests/test_rules.py`` is generated: DECLINE (source, a substring of the reason it must
give; the site is the line
:func:`~mend.rules.predicated_control_flow.rewrite.first_site` picks) and NOOP (source left
unchanged on every line). The fix examples are in :mod:`.examples`."""
from __future__ import annotations

from textwrap import dedent

from mend.rules.predicated_control_flow.examples import FIX_EXAMPLES

DECLINE_EXAMPLES: list[tuple[str, str]] = [
    # a tuple on one side and a single value on the other: no element-by-element selection
    (
        dedent('''\
            import torch


            def pool(h, mask):
                if not mask.any():
                    return h, mask
                return h * 2
        '''),
        "the sides return tuples of different lengths, or a tuple on one side only",
    ),
    # an early exit whose general path does more than assign names and return (here a call for
    # its effect): the fall-through arm is not taken
    (
        dedent('''\
            import torch


            def pool(x, attention_mask, seen):
                if attention_mask.all():
                    return x.mean(1)
                seen.append(1)
                return x.sum(1)
        '''),
        "a branch leaves early (`return`) while the other falls through",
    ),
    # a walrus evaluated after another part of the test (`h.amax()` runs first, and raises
    # first on an empty h): not hoisted, and the reason names it
    (
        dedent('''\
            import torch


            def center(h):
                if h.amax() > 2 * (m := h.mean()):
                    out = h - m
                else:
                    out = h * 0.5
                return out
        '''),
        "the test binds `m` with `:=`",
    ),
    # ... or in an elif test, which runs only when the if's test fails
    (
        dedent('''\
            import torch


            def center(h, m):
                if h.sum() > 0:
                    out = h
                elif (m := h.mean()) > 0:
                    out = h - m
                else:
                    out = h * 0.5
                return out, m
        '''),
        "the test binds `m` with `:=`",
    ),
    # a ternary whose sides differ in None-ness, as its if/else would
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h, mask):
                    mask = None if mask.all() else mask
                    return h, mask
        '''),
        'None',
    ),
    # trap: a swap builds its tuple from the old bindings; one assignment per name would not
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, a, b):
                    if x.sum() > 0:
                        a, b = b, a * 2
                    return a + b
        '''),
        'reads `a`, bound before it',
    ),
    # unpacking a call's result: not one value per name in the source
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, a, b):
                    if x.sum() > 0:
                        a, b = x.chunk(2)
                    return a + b
        '''),
        'several names at once',
    ),
    # 008: a side sets the mask to None
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h, mask):
                    if mask.all():
                        mask = None
                    return h, mask
        '''),
        'None',
    ),
    # 006's kind over a list passed in: the branch skips a call of the loop's item, which torch.where would run and
    # torch.cond's guard cannot reach (the loop is not over an attribute of self)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, gates, experts):
                    out = torch.zeros_like(x)
                    for e, expert in enumerate(experts):
                        gate = gates[:, e:e + 1]
                        if gate.any():
                            out = out + gate * expert(x)
                    return out
        '''),
        "skips a call of the loop's item",
    ),
    # a branch in a `while` loop, or one that leaves a `for` loop's iteration, is not predicated
    (
        dedent('''\
            import torch


            def f(h, n):
                i = 0
                while i < n:
                    h = h * 2
                    if h.abs().max() > 10.0:
                        h = h * 0.1
                    i += 1
                return h
        '''),
        "inside a `while` loop",
    ),
    (
        dedent('''\
            import torch


            def f(hs):
                out = hs[0]
                for h in hs:
                    if h.abs().max() > 10.0:
                        continue
                    out = out + h
                return out
        '''),
        "holds `break`/`continue`",
    ),
    # 013: a Python counter bumped in the branch
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    norm = h.norm()
                    if not torch.isfinite(norm):
                        self.skipped_steps += 1
                        return torch.zeros_like(h)
                    return h / norm
        '''),
        'self.skipped_steps',
    ),
    # an in-place tensor update
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h.add_(1)
                return h
        '''),
        'in place (`add_`)',
    ),
    # a call made for its effect
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    print("positive")
                    h = h * 2
                return h
        '''),
        'for its effect',
    ),
    # an attribute write
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.sum() > 0:
                        self.cache = h
                    return h
        '''),
        'mutates state (`self.cache`)',
    ),
    # one side returns, the other rebinds a name the returning side reads, then returns: the
    # fall-through arm's assignment would run first and change what the early return gives
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    return h
                h = h * 2
                return h
        '''),
        'the code after the `if` that becomes the other side) assigns `h`',
    ),
    # a name with no value on the untaken side
    (
        dedent('''\
            import torch


            def f(x):
                if x.sum() > 0:
                    y = x * 2
                return y
        '''),
        'no prior definition',
    ),
    # a nested compound statement
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    for _ in range(3):
                        h = h * 2
                return h
        '''),
        'nested `for`',
    ),
    # an unknown function
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h = helper(h)
                return h
        '''),
        'might not be pure',
    ),
    # a method of the model
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def scale(self, h):
                    return h * 2

                def forward(self, h):
                    if h.sum() > 0:
                        h = self.scale(h)
                    return h
        '''),
        'the method `self.scale`',
    ),
    # random numbers on the untaken side
    (
        dedent('''\
            import torch
            import torch.nn.functional as F


            def f(h):
                if h.sum() > 0:
                    h = F.dropout(h, 0.1)
                return h
        '''),
        'random numbers',
    ),
    # a dropout submodule
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.drop = nn.Dropout(0.1)

                def forward(self, h):
                    if h.sum() > 0:
                        h = self.drop(h)
                    return h
        '''),
        'not pure in training mode',
    ),
    # a Python-level test under `or`
    (
        dedent('''\
            import torch


            def f(h, mask):
                if mask is None or mask.any():
                    h = h * 2
                return h
        '''),
        'Python-level test',
    ),
    # paired calls on different buffer names
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        self.register_buffer("pos_table", x * 2, persistent=False)
                    else:
                        self.register_buffer("neg_table", x, persistent=False)
                    return x
        '''),
        "on different names ('pos_table', 'neg_table')",
    ),
    # the memoised attribute is read elsewhere in the function
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.sum() > 0:
                        if not hasattr(self, "k"):
                            self.k = h
                        h = h * 2
                    if hasattr(self, "k"):
                        h = h + self.k
                    return h
        '''),
        'also read elsewhere in the function',
    ),
    # the memoised attribute is used elsewhere in the module
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def reset(self):
                    del self.scale_cache

                def forward(self, x):
                    if x.amax() > 1:
                        if not hasattr(self, "scale_cache"):
                            self.scale_cache = self.scale_fn(4)
                        y = x * self.scale_cache
                    else:
                        y = x
                    return y
        '''),
        'also used elsewhere in the module',
    ),
    # an `else` on the memoised initialisation
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        if not hasattr(self, "gain"):
                            self.gain = self.gain_fn(4)
                        else:
                            self.gain = self.gain * 2
                        y = x * self.gain
                    else:
                        y = x
                    return y
        '''),
        'has an `else`',
    ),
    # another statement of the side has an effect
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, steps):
                    if steps.max() > self.limit:
                        if not hasattr(self, "long_table"):
                            self.long_table = self.table_fn(self.dim)
                        self.calls = self.calls + 1
                        self.register_buffer("table", self.long_table, persistent=False)
                    else:
                        self.register_buffer("table", self.short_table, persistent=False)
                    return self.table
        '''),
        'mutates state (`self.calls`)',
    ),
    # the initialiser is a method of the class
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def build_table(self, n):
                    return torch.ones(n)

                def forward(self, x):
                    if x.sum() > 0:
                        if not hasattr(self, "cached"):
                            self.cached = self.build_table(4)
                        y = x * self.cached
                    else:
                        y = x
                    return y
        '''),
        'calls the method `self.build_table`',
    ),
    # the initialiser is a submodule
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(8, 4)

                def forward(self, x, ids):
                    if x.sum() > 0:
                        if not hasattr(self, "bias_row"):
                            self.bias_row = self.embed(ids)
                        y = x + self.bias_row
                    else:
                        y = x
                    return y
        '''),
        'a submodule (nn.Embedding)',
    ),
    # the memoised slot is not definitely assigned
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        if not hasattr(self, "offset"):
                            if self.training:
                                self.offset = self.offset_fn(4)
                        y = x + self.offset
                    else:
                        y = x
                    return y
        '''),
        'not definitely assigned',
    ),
    # the initialiser may raise
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, n):
                    if x.sum() > 0:
                        if not hasattr(self, "window"):
                            self.window = self.window_fn(self.size // n)
                        y = x * self.window
                    else:
                        y = x
                    return y
        '''),
        'which may raise',
    ),
    # only one side registers a buffer
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        y = x * 2
                        self.register_buffer("last", y, persistent=False)
                    else:
                        y = x
                    return y
        '''),
        'only one side ends with `self.register_buffer(...)`',
    ),
    # the moved attribute is read on the other side
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        self.base = self.base.to(x.device)
                        y = x * self.base
                    else:
                        y = x + self.base
                    return y
        '''),
        '`self.base` is read on the other side',
    ),
    # a scalar read out of the graph
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h = h / h.sum().item()
                return h
        '''),
        '`.item()`',
    ),
    # two Python constants
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    scale = 2.0
                else:
                    scale = 1.0
                return h * scale
        '''),
        'Python constant',
    ),
    # augmented assignment
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h += 1
                return h
        '''),
        'mutates state (`h += ...`)',
    ),
    # torch.cond needed, but not applicable (see cond.py)
    # torch.cond needed (log-domain guard), but the sides differ in dtype
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.min() > 0:
                        y = torch.log(x)
                    else:
                        y = x.half()
                    return y
        '''),
        'different dtypes',
    ),
    # torch.cond needed (sqrt-domain guard), but the aliased output is mutated in place afterwards
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, s):
                    if s > 0:
                        y = torch.sqrt(s)
                    else:
                        y = s
                    s.mul_(2)
                    return y * 1.0
        '''),
        'mutated in place later',
    ),
    # torch.cond needed (a submodule call), but one side is None
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mlp = nn.Linear(4, 4)

                def forward(self, h):
                    if h.mean() > 0:
                        y = self.mlp(h)
                    else:
                        y = None
                    return h, y
        '''),
        'None',
    ),
    # torch.cond needed (a submodule call), but a side prints
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mlp = nn.Linear(4, 4)

                def forward(self, h):
                    if h.mean() > 0:
                        print("large activations")
                        y = self.mlp(h)
                    else:
                        y = h * 0.5
                    return y
        '''),
        'for its effect',
    ),
    # issue 10: a branch-local Python scalar read after the `if` (defined before it): hoisting would change that read
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    clamp_value = 1e4
                    if h.dtype == torch.float16 and torch.isinf(h).any():
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    return h / clamp_value
        '''),
        'read after the `if`',
    ),
    # issue 10: the same, the read in a later `if`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16 and torch.isinf(h).any():
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    if h.dtype == torch.float16:
                        h = h * (1.0 / clamp_value)
                    return h
        '''),
        'read after the `if`',
    ),
    # issue 10: the branch-local temporary is a tensor op, not a Python scalar
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16 and torch.isinf(h).any():
                        clamp_value = h.abs().amax() - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    h = h * 2
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)
                    return h
        '''),
        'is not a Python scalar (it calls `h.abs().amax`',
    ),
    # issue 10: the branch-local temporary calls a method (which prints): it may have an effect
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16 and torch.isinf(h).any():
                        clamp_value = self.limit(h.dtype)
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    h = h * 2
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)
                    return h

                def limit(self, dtype):
                    print("limit")
                    return torch.finfo(dtype).max - 1000
        '''),
        'is not a Python scalar (it calls `self.limit`',
    ),
]

# No-op examples: source left unchanged on every line. Python-level tests (Dynamo folds
# them), a selection that is already graph-native, and the rule's own torch.where output
# (its torch.cond output keeps the original `if` for eager, and its gated output for an eager call
# under anomaly detection: each a site again).
NOOP_EXAMPLES: list[str] = [
    dedent('''\
        import torch
        from torch import nn


        class Model(nn.Module):
            def forward(self, x, mask=None):
                if mask is None:
                    mask = torch.ones_like(x)
                if self.training:
                    x = x * 2.0
                return x * mask
    '''),
    dedent('''\
        import torch


        def forward(x, y):
            keep = x > 0
            return torch.where(keep, x, y)
    '''),
    # issue 10: an elementwise predicate the user wrote is theirs to keep (the rule never
    # produces one from a global `.any()`)
    dedent('''\
        import torch
        from torch import nn


        class Model(nn.Module):
            def forward(self, h):
                clamp_value = torch.finfo(h.dtype).max - 1000
                h = torch.where(torch.isinf(h), torch.clamp(h, min=-clamp_value, max=clamp_value), h)
                return h
    '''),
    *(after for _, after in FIX_EXAMPLES if "torch.cond(" not in after and "is_anomaly_enabled" not in after),
]
