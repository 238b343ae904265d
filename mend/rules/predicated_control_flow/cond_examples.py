"""predicated-control-flow's fix examples for the ``torch.cond`` form with setup temporaries
(bound before the cond, read by the branch lambdas through their closures). Part of
:data:`~mend.rules.predicated_control_flow.examples.FIX_EXAMPLES`."""
from __future__ import annotations

from textwrap import dedent

COND_TEMP_EXAMPLES: list[tuple[str, str]] = [
    # torch.cond with a setup temporary (a VLM's image-token merge, helper-78's c21): `mask` is bound before the
    # cond, on every path as in the torch.where form, and the branch lambda reads it through its closure
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 4):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, h, feats):
                    if h.mean() > 0:
                        mask = (h > 0).any(-1, keepdim=True)
                        h = torch.where(mask, self.proj(feats), h)
                    else:
                        h = h * 2.0
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 4):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, h, feats):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (h.mean() > 0).numel() == 1:  # mend: predicated-control-flow (was: if h.mean() > 0)
                        mask = (h > 0).any(-1, keepdim=True)
                        h = torch.cond(h.mean() > 0, lambda: torch.where(mask, self.proj(feats), h), lambda: h * 2.0)
                    else:
                        if h.mean() > 0:
                            mask = (h > 0).any(-1, keepdim=True)
                            h = torch.where(mask, self.proj(feats), h)
                        else:
                            h = h * 2.0
                    return h
        '''),
    ),
]
