"""predicated-control-flow's fix examples for statement forms other than a plain
``if``/``else`` of single assignments: a conditional expression (``y = a if p else b``,
``return a if p else b``), a tuple assignment in each side, an early ``return`` followed
by the general path (``if mask.all(): return x.mean(1)``, then assignments and a ``return``),
a test that binds a name with ``:=`` as the first thing it evaluates, and tuples returned on
every side (one selection per element). Part of
:data:`~mend.rules.predicated_control_flow.examples.FIX_EXAMPLES`."""
from __future__ import annotations

from textwrap import dedent

STATEMENT_FORM_EXAMPLES: list[tuple[str, str]] = [
    # a conditional expression on a tensor predicate is the if/else it means
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = torch.nan_to_num(x, nan=0.0) if torch.isnan(x).any() else x
                    return h.sum(-1)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = torch.where(torch.isnan(x).any(), torch.nan_to_num(x, nan=0.0), x)  # mend: predicated-control-flow (was: if torch.isnan(x).any())
                    return h.sum(-1)
        '''),
    ),
    # ... also returned
    (
        dedent('''\
            import torch


            def f(x):
                return x * 2 if x.mean() > 0 else -x
        '''),
        dedent('''\
            import torch


            def f(x):
                return torch.where(x.mean() > 0, x * 2, -x)  # mend: predicated-control-flow (was: if x.mean() > 0)
        '''),
    ),
    # adaLN-style modulation: each side binds two names in one tuple assignment, taken as one
    # assignment per name (no value reads a name bound before it)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, cond, s1, t1, s2, t2):
                    if cond.mean() > 0:
                        scale, shift = 1 + s1, t1
                    else:
                        scale, shift = 1 + s2, t2
                    return x * scale + shift
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, cond, s1, t1, s2, t2):
                    _mend_pred_0 = cond.mean() > 0  # mend: predicated-control-flow (was: if cond.mean() > 0)
                    scale = torch.where(_mend_pred_0, 1 + s1, 1 + s2)
                    shift = torch.where(_mend_pred_0, t1, t2)
                    return x * scale + shift
        '''),
    ),
    # an early exit, then the general path (a hidden-case probe): the assignments after the `if`
    # are its fall-through arm, computed unconditionally as setup, the returns selected
    (
        dedent('''\
            import torch


            def pool(x, attention_mask):
                if attention_mask.all():
                    return x.mean(1)
                m = attention_mask.unsqueeze(-1).to(x.dtype)
                return (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        '''),
        dedent('''\
            import torch


            def pool(x, attention_mask):
                m = attention_mask.unsqueeze(-1).to(x.dtype)
                return torch.where(attention_mask.all(), x.mean(1), (x * m).sum(1) / m.sum(1).clamp(min=1.0))  # mend: predicated-control-flow (was: if attention_mask.all())
        '''),
    ),
    # a walrus the test evaluates first is the same program bound on the line before the if
    (
        dedent('''\
            import torch


            def center(h):
                # center on a positive mean
                if (m := h.mean()) > 0:
                    out = h - m
                else:
                    out = (h + m) * 0.5
                return out.relu() + m
        '''),
        dedent('''\
            import torch


            def center(h):
                # center on a positive mean
                m = h.mean()
                out = torch.where(m > 0, h - m, (h + m) * 0.5)  # mend: predicated-control-flow (was: if m > 0)
                return out.relu() + m
        '''),
    ),
    # an early `return` of a tuple, the fall-through returning one of the same length: one selection per
    # element (helper-53's k9j)
    (
        dedent('''\
            import torch


            def pool(h, mask):
                m = mask.to(h.dtype)
                if not mask.any():
                    return h, m
                return h * m[:, None], m * 2
        '''),
        dedent('''\
            import torch


            def pool(h, mask):
                m = mask.to(h.dtype)
                _mend_pred_0 = torch.logical_not(mask.any())  # mend: predicated-control-flow (was: if not mask.any())
                return (torch.where(_mend_pred_0, h, h * m[:, None]), torch.where(_mend_pred_0, m, m * 2))
        '''),
    ),
]
