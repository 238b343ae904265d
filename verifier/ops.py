"""PyTorch operator names, grouped by what their result is (shared by the shape and value
models): a new op name is added here."""
from __future__ import annotations

from typing import Any

UNARY_FLOAT = {"sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
                "tanh", "sigmoid", "erf", "erfc", "erfinv", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                "acosh", "atanh", "reciprocal", "digamma", "lgamma", "logit", "gelu", "silu", "softplus", "mish",
                "arcsin", "arccos", "arctan", "arctanh", "arccosh", "arcsinh"}
UNARY_SAME = {"abs", "neg", "negative", "relu", "sign", "sgn", "floor", "ceil", "round", "trunc", "frac", "clone",
               "detach", "contiguous", "nan_to_num", "square", "positive", "leaky_relu", "hardtanh", "relu6",
               "elu", "selu", "celu", "hardswish", "hardsigmoid", "tril", "triu", "fix"}
UNARY_BOOL = {"isnan", "isinf", "isfinite", "isposinf", "isneginf", "logical_not", "signbit", "isreal"}
BINARY = {"add": "+", "sub": "-", "subtract": "-", "mul": "*", "multiply": "*", "div": "/", "divide": "/",
           "true_divide": "/", "floor_divide": "//", "remainder": "%", "fmod": "%", "pow": "**",
           "maximum": "max", "minimum": "min", "atan2": "atan2", "hypot": "atan2", "float_power": "**",
           "xlogy": "*", "copysign": "*"}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "greater": ">", "less": "<",
            "greater_equal": ">=", "less_equal": "<=", "not_equal": "!=", "logical_and": "and",
            "logical_or": "or", "logical_xor": "xor", "isclose": "==", "bitwise_and": "&", "bitwise_or": "|"}
REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "prod", "any", "all", "norm", "std", "var", "nansum",
           "nanmean", "argmax", "argmin", "count_nonzero", "logsumexp"}
SHAPE_SAME_DTYPE = {"reshape", "view", "transpose", "permute", "t", "unsqueeze", "squeeze", "flatten", "expand",
                     "swapaxes", "movedim", "mT", "T"}
CAST = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "bfloat16", "long": "int64",
         "int": "int32", "short": "int16", "bool": "bool", "byte": "uint8", "char": "int8"}
NAMESPACES = {"torch": "torch", "torch.nn.functional": "F", "math": "math", "builtins": "builtins",
               "torch.special": "torch", "torch.linalg": "torch"}

CLAMPS = {"clamp", "clip", "clamp_min", "clamp_max"}


def clamp_bounds(name: str, args: list, kwargs: dict) -> tuple[Any, Any]:
    """(min, max) of a clamp call, each None where not given: ``clamp(x, min, max)`` and
    ``clip`` take both (positional or ``min=``/``max=``), ``clamp_min(x, min)`` only a lower and
    ``clamp_max(x, max)`` only an upper bound (``args[0]`` is ``x``). PyTorch doc: torch.clamp."""
    first = args[1] if len(args) > 1 else None
    if name == "clamp_min":
        return kwargs.get("min", first), None
    if name == "clamp_max":
        return None, kwargs.get("max", first)
    return kwargs.get("min", first), kwargs.get("max", args[2] if len(args) > 2 else None)
