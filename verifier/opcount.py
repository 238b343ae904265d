"""What an expression would compute, observed without computing it: its aten operators,
FLOPs and bytes, from one evaluation on fake tensors.

The cost model of issue 12 (``mend.cost``) reads these as static features of each side of a
branch (TpuGraphs, NeurIPS 2023: features of the graph, not timings). The expression is
evaluated under ``FakeTensorMode`` (the tensors it names become fake ones: shapes, dtypes
and devices, no data; an in-place operator or ``out=`` is refused, since on torch 2.13 an
in-place op on a real tensor inside the mode writes the real tensor), inside ``torch.utils.flop_counter.FlopCounterMode`` and a dispatch
mode that records every aten operator. Nothing is executed on real data, so no value
changes; an expression whose Python code writes state could still write it, so callers
evaluate only what the rule's screen and the effect analysis let run speculatively
(:func:`evaluable`).

An operator whose output shape depends on data (``nonzero``, ``.item()``) cannot run on fake
tensors: the result then says ``"data_dependent": True`` and counts what ran before it.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any, Callable

from verifier.effects import _EFFECT_METHODS

# operator categories (the Kaggle "Fast or Slow?" winners count op kinds per configuration)
CATEGORIES = ("matmul", "reduction", "pointwise", "view", "copy", "other")
_MATMUL = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "dot", "mv", "convolution", "linear",
           "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
           "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention", "einsum"}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "any", "all", "prod", "var", "std", "var_mean",
              "norm", "linalg_vector_norm", "_softmax", "_log_softmax", "logsumexp", "cumsum", "cumprod",
              "argmax", "argmin", "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit_no_training"}
_COPY = {"clone", "copy_", "_to_copy", "contiguous", "zeros", "ones", "full", "empty", "arange", "zeros_like",
         "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full", "new_empty", "scalar_tensor",
         "lift_fresh", "_local_scalar_dense", "empty_strided", "cat", "stack", "index", "gather", "scatter"}


def category(func) -> str:
    """The category of an aten overload (``torch.ops.aten.add.Tensor`` -> ``pointwise``)."""
    import torch

    name = func.__name__.split(".")[0] if hasattr(func, "__name__") else str(func)
    base = getattr(func, "_overloadpacket", None)
    base = base.__name__ if base is not None else name
    if base in _MATMUL:
        return "matmul"
    if base in _REDUCTION:
        return "reduction"
    if getattr(func, "is_view", False) or base in {"view", "reshape", "_unsafe_view", "expand", "alias",
                                                    "detach", "t", "permute", "transpose"}:
        return "view"
    if base in _COPY:
        return "copy"
    if torch.Tag.pointwise in getattr(func, "tags", ()):
        return "pointwise"
    return "other"


def _nbytes(value) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def count(fn: Callable[[], Any]) -> dict:
    """Run ``fn()`` on fake tensors and count what it dispatches.

    Returns ``{"ops": {category: n}, "flops": float (FlopCounterMode's count: 2 per
    multiply-add, matmuls and convolutions only), "flops_by_dtype": {dtype: float} (the
    same, by the dtype of each operator's output), "bytes": int (each non-view operator's
    tensor inputs plus outputs: an upper bound on memory traffic without fusion),
    "bytes_by_category": {category: int} (the same, by operator category),
    "bytes_low_precision": int (the same, of operators with a float16/bfloat16 output),
    "out_bytes": int (the value's own tensors), "data_dependent": bool, "error": str|None}``.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import FlopCounterMode

    ops = {c: 0 for c in CATEGORIES}
    moved = [0]
    by_dtype: dict[str, float] = {}
    by_cat = {c: 0 for c in CATEGORIES}
    low = [0]

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = flops.get_total_flops()  # FlopCounterMode sits below this mode: it counts in func()
            out = func(*args, **(kwargs or {}))
            done = flops.get_total_flops() - before
            first = next((t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)), None)
            if done:
                key = str(first.dtype).replace("torch.", "") if first is not None else "unknown"
                by_dtype[key] = by_dtype.get(key, 0.0) + float(done)
            cat = category(func)
            ops[cat] += 1
            if cat != "view":
                flat, _ = tree_flatten((args, kwargs or {}))
                n = sum(_nbytes(a) for a in flat) + _nbytes(tree_flatten(out)[0])
                moved[0] += n
                by_cat[cat] += n
                if first is not None and first.dtype in (torch.bfloat16, torch.float16):
                    low[0] += n
            return out

    result: dict = {"ops": ops, "flops": 0.0, "bytes": 0, "out_bytes": 0, "data_dependent": False, "error": None}
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    flops = FlopCounterMode(display=False)
    try:
        with fake, flops, _Count(), torch.no_grad():
            value = fn()
        result["out_bytes"] = _nbytes(tree_flatten(value)[0])
    except Exception as exc:  # noqa: BLE001 - what could not run on fake tensors is reported, not raised
        from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

        dd = (DataDependentOutputException, DynamicOutputShapeException)
        result["data_dependent"] = isinstance(exc, dd) or "data-dependent" in str(exc).lower() \
            or "data dependent" in str(exc).lower()
        result["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
    result["flops"] = float(flops.get_total_flops())
    result["flops_by_dtype"] = by_dtype
    result["bytes_by_category"] = by_cat
    result["bytes_low_precision"] = int(low[0])
    result["bytes"] = int(moved[0])
    return result


_WRITING_DUNDERS = {"__setitem__", "__delitem__", "__setattr__", "__delattr__", "__iadd__", "__isub__", "__imul__",
                    "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
                    "__ilshift__", "__irshift__", "__imatmul__"}


def _callee_parts(func: ast.AST) -> list[str]:
    """Every attribute and name along a callee (``torch.ops.aten.add_.Tensor`` -> all five)."""
    parts = []
    while True:
        if isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        elif isinstance(func, ast.Subscript):
            func = func.value
        elif isinstance(func, ast.Call):
            func = func.func
        else:
            if isinstance(func, ast.Name):
                parts.append(func.id)
            return parts


def evaluable(expr: str, names: dict[str, Any]) -> str | None:
    """Why ``expr`` must not be evaluated speculatively with ``names`` bound, else None: a
    call on a module that the effect analysis does not find pure (it could store a fake
    tensor into real state)."""
    import torch

    from verifier.effects import dotted_name, module_effects

    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        return f"does not parse ({exc.msg})"
    for node in ast.walk(tree):
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return f"holds a {type(node).__name__}"
        if isinstance(node, ast.Call):
            parts = _callee_parts(node.func)
            for part in parts:
                if (part.endswith("_") and not part.endswith("__")) or part in _WRITING_DUNDERS:
                    return f"calls {part}, an in-place operator"

            for kw in node.keywords:
                if kw.arg == "out" or (kw.arg == "inplace" and not (isinstance(kw.value, ast.Constant)
                                                                    and kw.value.value is False)):
                    return f"passes {kw.arg}=, which writes a tensor"
            func, index = node.func, None
            if isinstance(func, ast.Subscript) and isinstance(func.slice, ast.Constant):
                func, index = func.value, func.slice.value   # self.blocks[1](h)
            dotted = dotted_name(func)
            if dotted is None and index is None and isinstance(func, ast.Attribute):
                continue  # a method of a computed value, `(h * 2).sum()`: its name was screened above
            if dotted is None:
                return f"calls `{ast.unparse(node.func)}`, a callee this screen cannot resolve"
            head, *rest = dotted.split(".")
            obj = names.get(head)
            for part in rest:
                obj = inspect.getattr_static(obj, part, None) if not isinstance(obj, torch.nn.Module) \
                    else getattr(obj, part, None)
            if isinstance(func, ast.Attribute) and rest and func.attr in _EFFECT_METHODS:
                owner = names.get(head)
                for part in rest[:-1]:
                    owner = getattr(owner, part, None)
                if isinstance(owner, (list, dict, set, bytearray)):  # xs.append(h): writes the container
                    return f"calls {dotted}, which writes a {type(owner).__name__}"
            if index is not None:
                if not isinstance(obj, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)):
                    return f"calls `{ast.unparse(node.func)}`, an indexed callee that is not a module container"
                try:
                    obj = obj[index]
                except (IndexError, KeyError, TypeError):
                    return f"calls `{ast.unparse(node.func)}`, which does not exist"
            if isinstance(obj, torch.nn.Module):
                effects, _ = module_effects(obj)
                if effects:
                    return f"calls {dotted}, which may write state ({effects[0]})"
    return None


def count_expr(expr: str, global_ns: dict, local_ns: dict) -> dict:
    """:func:`count` of ``eval(expr)`` in the given namespaces, or ``{"error": why}`` when
    :func:`evaluable` refuses it."""
    names = {**global_ns, **local_ns}
    why = evaluable(expr, names)
    if why is not None:
        return {"ops": None, "flops": None, "bytes": None, "out_bytes": None, "data_dependent": False,
                "error": f"not evaluated: {why}"}
    code = compile(expr, "<mend cost>", "eval")
    return count(lambda: eval(code, global_ns, _faked(local_ns)))  # noqa: S307 - the site's own expression


def _faked(local_ns: dict) -> dict:
    """The locals with every tensor replaced by a fake one (inside the active fake mode),
    so no real tensor bound to a name is reachable by the expression: a second guard
    besides :func:`evaluable`'s screen of in-place calls."""
    import torch
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode()
    out = dict(local_ns)
    if mode is None:
        return out
    for k, v in local_ns.items():
        if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
            out[k] = mode.from_tensor(v)
    return out


def add_counts(parts: list[dict]) -> dict:
    """The sum of several :func:`count` results (a side that assigns several names); any
    part not evaluated makes the sum not evaluated, with that part's error."""
    out = {"ops": {c: 0 for c in CATEGORIES}, "flops": 0.0, "flops_by_dtype": {}, "bytes": 0, "out_bytes": 0,
           "data_dependent": False, "error": None}
    for p in parts:
        if p.get("flops") is None:
            return {**p}
        for c in CATEGORIES:
            out["ops"][c] += (p.get("ops") or {}).get(c, 0)
        for k in ("flops", "bytes", "out_bytes"):
            out[k] += p[k]
        out["bytes_low_precision"] = out.get("bytes_low_precision", 0) + p.get("bytes_low_precision", 0)
        for c, v in (p.get("bytes_by_category") or {}).items():
            out.setdefault("bytes_by_category", {})[c] = out.get("bytes_by_category", {}).get(c, 0) + v
        for d, v in (p.get("flops_by_dtype") or {}).items():
            out.setdefault("flops_by_dtype", {})[d] = out.get("flops_by_dtype", {}).get(d, 0.0) + v
        out["data_dependent"] |= bool(p.get("data_dependent"))
        out["error"] = out["error"] or p.get("error")
    return out
