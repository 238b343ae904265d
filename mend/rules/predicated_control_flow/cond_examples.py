"""predicated-control-flow's fix examples for the ``torch.cond`` form: a guarded domain (sqrt, log), a view cloned on
the other side, a submodule call on each side, setup temporaries
(bound before the cond, read by the branch lambdas through their closures, or bound inside a side's lambda when they
must not run speculatively), and an early ``return``. Part of
:data:`~mend.rules.predicated_control_flow.examples.FIX_EXAMPLES`."""
from __future__ import annotations

from textwrap import dedent

COND_TEMP_EXAMPLES: list[tuple[str, str]] = [
    # torch.cond: shared/cases 012's kind -- the test guards sqrt's domain; `else: y = t` is cloned (never mutated, never escapes)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, t):
                    if t > 0:
                        y = torch.sqrt(t)
                    else:
                        y = t
                    return y * 2.0
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def forward(self, t):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if torch.compiler.is_compiling() and (t > 0).numel() == 1 and _mend_cond_ready(dense=(t,)):  # mend: predicated-control-flow (was: if t > 0)
                        y = torch.cond(t > 0, lambda: torch.sqrt(t), lambda: t.clone())
                    else:
                        if t > 0:
                            y = torch.sqrt(t)
                        else:
                            y = t
                    return y * 2.0
        '''),
    ),
    # torch.cond: a log-domain guard assigning two names, one cond per name (a tuple-valued cond's backward fails on torch 2.13)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.min() > 0:
                        y = torch.log(x)
                        z = y * 2.0
                    else:
                        y = x * 0.0
                        z = x + 1.0
                    return y + z
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def forward(self, x):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (x.min() > 0).numel() == 1 and _mend_cond_ready(dense=(x,)):  # mend: predicated-control-flow (was: if x.min() > 0)
                        _mend_pred_0 = x.min() > 0
                        y = torch.cond(_mend_pred_0, lambda: torch.log(x), lambda: x * 0.0)
                        z = torch.cond(_mend_pred_0, lambda: y * 2.0, lambda: x + 1.0)
                    else:
                        if x.min() > 0:
                            y = torch.log(x)
                            z = y * 2.0
                        else:
                            y = x * 0.0
                            z = x + 1.0
                    return y + z
        '''),
    ),
    # torch.cond: a view (`h[:, :4]`) on the other side is cloned; cond outputs must not alias its inputs
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(4, 4)

                def forward(self, h):
                    if (h > 0).all():
                        out = self.head(h)
                    else:
                        out = h[:, :4]
                    return torch.relu(out)
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(4, 4)

                def forward(self, h):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and ((h > 0).all()).numel() == 1 and _mend_cond_ready(self, getattr(self, "head", None), dense=(h,)):  # mend: predicated-control-flow (was: if (h > 0).all())
                        out = torch.cond((h > 0).all(), lambda: self.head(h), lambda: h[:, :4].clone())
                    else:
                        if (h > 0).all():
                            out = self.head(h)
                        else:
                            out = h[:, :4]
                    return torch.relu(out)
        '''),
    ),
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


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.mlp_a = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
                    self.mlp_b = nn.Linear(dim, dim)

                def forward(self, h):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (h.mean() > 0).numel() == 1 and _mend_cond_ready(self, getattr(self, "mlp_a", None), getattr(self, "mlp_b", None), dense=(h,)):  # mend: predicated-control-flow (was: if h.mean() > 0)
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


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def __init__(self, dim: int = 4):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)

                def forward(self, h, feats):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (h.mean() > 0).numel() == 1 and _mend_cond_ready(self, getattr(self, "proj", None), dense=(h, feats)):  # mend: predicated-control-flow (was: if h.mean() > 0)
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
    # torch.cond for `if p: return a` with the code after it as the false side (an adaptive layer norm skipping
    # zero-variance rows, helper-92's m02): `h` holds rsqrt, whose gradient is inf off the tested domain, so it is
    # bound inside the false lambda and computed only when that side is taken; the original if and the code after it
    # stay, after the cond's own if
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.to_shift = nn.Linear(dim, dim)
                    self.to_scale = nn.Linear(dim, dim)

                def forward(self, x, c):
                    shift, scale = self.to_shift(c), self.to_scale(c)
                    centered = x - x.mean(-1, keepdim=True)
                    var = centered.pow(2).mean(-1, keepdim=True)
                    if (var == 0).any():
                        return centered * (1 + scale) + shift
                    h = centered * var.rsqrt()
                    return h * (1 + scale) + shift
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.to_shift = nn.Linear(dim, dim)
                    self.to_scale = nn.Linear(dim, dim)

                def forward(self, x, c):
                    shift, scale = self.to_shift(c), self.to_scale(c)
                    centered = x - x.mean(-1, keepdim=True)
                    var = centered.pow(2).mean(-1, keepdim=True)
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if not torch.is_grad_enabled() and torch.compiler.is_compiling() and ((var == 0).any()).numel() == 1 and _mend_cond_ready(centered, scale, shift, var, dense=(x, c)):  # mend: predicated-control-flow (was: if (var == 0).any())
                        return torch.cond((var == 0).any(), lambda: centered * (1 + scale) + shift, lambda: (lambda h: h * (1 + scale) + shift)(centered * var.rsqrt()))
                    if (var == 0).any():
                        return centered * (1 + scale) + shift
                    h = centered * var.rsqrt()
                    return h * (1 + scale) + shift
        '''),
    ),
    # a setup temporary with a non-finite gradient off the tested domain (log): bound inside its side's lambda,
    # `(lambda lx: lx * lx)(torch.log(x))`, value first as the statements ran; both sides read only `x`, so the
    # cond also runs with autograd on
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.min() > 0:
                        lx = torch.log(x)
                        y = lx * lx
                    else:
                        y = x * 0.5
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def forward(self, x):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if torch.compiler.is_compiling() and (x.min() > 0).numel() == 1 and _mend_cond_ready(dense=(x,)):  # mend: predicated-control-flow (was: if x.min() > 0)
                        y = torch.cond(x.min() > 0, lambda: (lambda lx: lx * lx)(torch.log(x)), lambda: x * 0.5)
                    else:
                        if x.min() > 0:
                            lx = torch.log(x)
                            y = lx * lx
                        else:
                            y = x * 0.5
                    return y
        '''),
    ),
    # shared case 006's kind: an MoE loop over self's experts skipping an expert no token is routed to. torch.where
    # would run every expert (an unused one may overflow to inf); torch.cond runs only the taken side, its guard reaching
    # the experts through the loop's iterable; `out`, returned, is copied on the false side: a local every binding of
    # which allocates (Dynamo skipped the whole frame before: 0 graphs -> 1)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, gates):
                    out = torch.zeros_like(x)
                    for e, expert in enumerate(self.experts):
                        gate = gates[:, e:e + 1]
                        if gate.any():
                            out = out + gate * expert(x)
                    return out
        '''),
        dedent('''\
            import torch
            from torch import nn


            def _mend_cond_ready(*roots, dense=()):  # mend: predicated-control-flow -- torch.cond only for modules it can trace
                hooks = torch.nn.modules.module
                if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
                        or hooks._global_backward_pre_hooks):
                    return False
                dtypes = set()
                for i, root in enumerate((*dense, *roots)):
                    found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
                    for mod in found:
                        if not isinstance(mod, (torch.Tensor, torch.nn.Module, int, float, str, torch.dtype, type(None))):
                            return False
                        if isinstance(mod, torch.Tensor):
                            if i < len(dense) and not mod.is_contiguous():
                                return False
                            if mod.is_floating_point():
                                dtypes.add(mod.dtype)
                        for sub in mod.modules() if isinstance(mod, torch.nn.Module) else ():
                            if sub.training:
                                return False
                            if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                                return False
                            if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                                    ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                                return False
                            for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                                if not t.is_contiguous():
                                    return False
                                if t.is_floating_point():
                                    dtypes.add(t.dtype)
                            for key, v in sub.__dict__.items():
                                if key in ("_parameters", "_buffers", "_modules"):
                                    continue
                                if isinstance(v, torch.Tensor):
                                    if v.is_floating_point():
                                        dtypes.add(v.dtype)
                                elif isinstance(v, torch.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                                        isinstance(e, (torch.Tensor, torch.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                                    return False
                return len(dtypes) <= 1


            class Model(nn.Module):
                def forward(self, x, gates):
                    out = torch.zeros_like(x)
                    for e, expert in enumerate(self.experts):
                        gate = gates[:, e:e + 1]
                        # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                        # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                        if not torch.is_grad_enabled() and torch.compiler.is_compiling() and (gate.any()).numel() == 1 and _mend_cond_ready(getattr(self, "experts", None), gate, out, dense=(x, gates)):  # mend: predicated-control-flow (was: if gate.any())
                            out = torch.cond(gate.any(), lambda: out + gate * expert(x), lambda: out.clone())
                        else:
                            if gate.any():
                                out = out + gate * expert(x)
                    return out
        '''),
    ),
]
