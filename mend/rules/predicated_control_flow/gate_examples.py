"""predicated-control-flow's FIX examples for gradient gates (gate.py): a torch.where side
whose gradient can be non-finite off its domain reads its inputs through ``_mend_gate``."""
from __future__ import annotations

from textwrap import dedent

from verifier.encoders.gradient_gate import GATE_HELPER

HELPER = GATE_HELPER.lstrip("\n")   # the helper the rewrite adds after the imports, verbatim

GATE_EXAMPLES: list[tuple[str, str]] = [
    # shared/cases 012 (trap): the sqrt side reads `s` through a gate on `s > 0`, so the untaken side's 0 * inf gradient stops there (gradient-gated);
    # an eager call under anomaly detection runs the original if (its check would see the untaken side's NaN step)
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
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn
        ''') + "\n\n" + HELPER + dedent('''\


            class Model(nn.Module):
                def forward(self, s):
                    if not torch.compiler.is_compiling() and torch.is_anomaly_enabled():  # mend: anomaly detection checks every backward step, the gated side's too, so under it the original if runs
                        if s > 0:
                            y = torch.sqrt(s)
                        else:
                            y = s
                    else:
                        _mend_pred_0 = s > 0  # mend: predicated-control-flow (was: if s > 0)
                        y = torch.where(_mend_pred_0, torch.sqrt(_mend_gate(_mend_pred_0, s)), s)
                    return y
        '''),
    ),
    # an elif chain guarding log(0): each gated side on its own path condition (not P0 and P1 for the elif); a parameter read through self is gated too; the helper is added once
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.ones(6))

                def forward(self, p):
                    if p.min() > 0:
                        ent = -(p * p.log() * self.w).sum()
                    elif p.max() > 0.999:
                        ent = p.log1p().sum()
                    else:
                        ent = (p * p).sum()
                    return ent
        '''),
        dedent('''\
            import torch
            from torch import nn
        ''') + "\n\n" + HELPER + dedent('''\


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.ones(6))

                def forward(self, p):
                    if not torch.compiler.is_compiling() and torch.is_anomaly_enabled():  # mend: anomaly detection checks every backward step, the gated side's too, so under it the original if runs
                        if p.min() > 0:
                            ent = -(p * p.log() * self.w).sum()
                        elif p.max() > 0.999:
                            ent = p.log1p().sum()
                        else:
                            ent = (p * p).sum()
                    else:
                        _mend_pred_0 = p.min() > 0  # mend: predicated-control-flow (was: if p.min() > 0)
                        _mend_pred_1 = p.max() > 0.999
                        ent = torch.where(_mend_pred_0, -(_mend_gate(_mend_pred_0, p) * _mend_gate(_mend_pred_0, p).log() * _mend_gate(_mend_pred_0, self.w)).sum(), torch.where(_mend_pred_1, _mend_gate(torch.logical_and(torch.logical_not(_mend_pred_0), _mend_pred_1), p).log1p().sum(), (p * p).sum()))
                    return ent
        '''),
    ),
    # an early exit (`if p: return a`, then its fall-through `y = ...; return y`): under anomaly detection the original
    # if and the fall-through it absorbed are kept together, verbatim (helper-102's m03 was declined: the form kept the if alone)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if (h > 0).all():
                        return h.sqrt()
                    y = h.abs() + 1
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn
        ''') + "\n\n" + HELPER + dedent('''\


            class Model(nn.Module):
                def forward(self, h):
                    if not torch.compiler.is_compiling() and torch.is_anomaly_enabled():  # mend: anomaly detection checks every backward step, the gated side's too, so under it the original if runs
                        if (h > 0).all():
                            return h.sqrt()
                        y = h.abs() + 1
                        return y
                    else:
                        _mend_pred_0 = (h > 0).all()  # mend: predicated-control-flow (was: if (h > 0).all())
                        y = h.abs() + 1
                        return torch.where(_mend_pred_0, _mend_gate(_mend_pred_0, h).sqrt(), y)
        '''),
    ),
]
