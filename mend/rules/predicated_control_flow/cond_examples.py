"""predicated-control-flow's fix examples for the ``torch.cond`` form: a submodule call on each side, and setup temporaries
(bound before the cond, read by the branch lambdas through their closures). Part of
:data:`~mend.rules.predicated_control_flow.examples.FIX_EXAMPLES`."""
from __future__ import annotations

from textwrap import dedent

COND_TEMP_EXAMPLES: list[tuple[str, str]] = [
    # torch.cond: the untaken side must not run (see cond.py)
    # torch.cond: a submodule call on each side must not run speculatively (GraphMend: cond when a side calls);
    # the sides read different parameters, so cond runs only without autograd (zero vs None gradients)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.mlp_a = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
                    self.mlp_b = nn.Linear(dim, dim)

                def forward(self, h):
                    if h.mean() > 0:
                        y = self.mlp_a(h)
                    else:
                        y = self.mlp_b(h)
                    return y + h
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                for root in roots:
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                return True


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.mlp_a = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
                    self.mlp_b = nn.Linear(dim, dim)

                def forward(self, h):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (h.mean() > 0).numel() == 1 and _mend_cond_ready(self, getattr(self, "mlp_a", None), getattr(self, "mlp_b", None)):  # mend: predicated-control-flow (was: if h.mean() > 0)
                        y = torch.cond(h.mean() > 0, lambda: self.mlp_a(h), lambda: self.mlp_b(h))
                    else:
                        if h.mean() > 0:
                            y = self.mlp_a(h)
                        else:
                            y = self.mlp_b(h)
                    return y + h
        '''),
    ),
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


            def _mend_cond_ready(*roots):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                for root in roots:
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                return True


            class Model(nn.Module):
                def __init__(self, dim: int = 4):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, h, feats):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (h.mean() > 0).numel() == 1 and _mend_cond_ready(self, getattr(self, "proj", None)):  # mend: predicated-control-flow (was: if h.mean() > 0)
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
