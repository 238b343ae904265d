"""Edge values drawn from a rewrite's constants (a comparison's threshold): where a
comparison that miscounts does so. Used by the differential test (:mod:`verifier.differential`)."""
from __future__ import annotations

import torch


def edge_values_for(dtype: torch.dtype, constants) -> list:
    """Edge values a tensor of ``dtype`` gets from a rewrite's constants (a comparison's
    threshold C): C, C rounded to ``dtype`` and that value's neighbours (``torch.nextafter``)
    for floating dtypes; floor and ceiling of C and their neighbours, within range, for
    integer dtypes. A comparison that miscounts does so there."""
    out: list = []
    for c in constants:
        if isinstance(c, bool) or not isinstance(c, (int, float)) or c != c or c in (float("inf"), float("-inf")):
            continue
        if dtype.is_floating_point:
            vals = [float(c)]
            try:
                r = torch.tensor(float(c), dtype=dtype)
                up, down = torch.tensor(float("inf"), dtype=dtype), torch.tensor(float("-inf"), dtype=dtype)
                vals += [r.item(), torch.nextafter(r, up).item(), torch.nextafter(r, down).item()]
            except (RuntimeError, TypeError, OverflowError):
                pass
        elif dtype == torch.bool:
            vals = [False, True]
        elif not dtype.is_complex:
            import math

            info = torch.iinfo(dtype)
            lo, hi = math.floor(c), math.ceil(c)
            vals = [v for v in (lo - 1, lo, hi, hi + 1) if info.min <= v <= info.max]
        else:
            continue
        for v in vals:
            if not any(v == o and type(v) is type(o) and str(v) == str(o) for o in out):
                out.append(v)
    return out


def with_edge_values(example: tuple, constants) -> tuple | None:
    """``example`` with the leading elements of each tensor (rank >= 1) set to the edge values
    of ``constants`` for its dtype, cycled; None when no tensor changes."""
    changed, out = False, []
    for t in example:
        vals = edge_values_for(t.dtype, constants) if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.numel() else []
        if vals:
            flat = t.detach().clone().reshape(-1)
            for i in range(min(flat.numel(), max(len(vals), 1))):
                flat[i] = vals[i % len(vals)]
            out.append(flat.reshape(t.shape))
            changed = True
        else:
            out.append(t)
    return tuple(out) if changed else None
