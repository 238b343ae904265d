"""The dtype model: PyTorch's dtypes as a Z3 enumeration, ``torch.promote_types`` as a
table, ATen's category rules (``combine_categories``) for 0-dim tensors and Python
numbers, and each floating dtype's IEEE format."""
from __future__ import annotations

import z3

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
FLOATS = {"float16", "bfloat16", "float32", "float64"}
INTS = {"uint8", "int8", "int16", "int32", "int64"}
FP_FORMAT = {"float16": (5, 11), "bfloat16": (8, 8), "float32": (8, 24), "float64": (11, 53)}
INT_BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}
DEFAULT_FOR_CAT = {"float": "float32", "int": "int64", "bool": "bool"}

DT, _DT_CONSTS = z3.EnumSort("DType", DTYPES)
DTC = dict(zip(DTYPES, _DT_CONSTS))
RNE = z3.RNE()


def fp_sort(dtype: str):
    e, s = FP_FORMAT[dtype]
    return z3.FPSort(e, s)


def sort_of(dtype: str):
    """The Z3 sort of one element of ``dtype``: FloatingPoint, bit-vector or Bool."""
    if dtype in FP_FORMAT:
        return fp_sort(dtype)
    if dtype in INT_BITS:
        return z3.BitVecSort(INT_BITS[dtype])
    return z3.BoolSort()


def _promote_table() -> dict:
    import torch

    return {(a, b): str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
            for a in DTYPES for b in DTYPES}


_PROMO: dict | None = None


def promote_py(a: str, b: str) -> str:
    global _PROMO
    if _PROMO is None:
        _PROMO = _promote_table()
    return _PROMO[(a, b)]


def as_name(d) -> str | None:
    """The dtype name of a DType term that simplifies to a constant, else None."""
    d = z3.simplify(d)
    for n, c in DTC.items():
        if z3.eq(d, c):
            return n
    return None


_PROMO_FN = None


def promote(a, b):
    """PyTorch's promote_types on DType terms (folded when both are constants)."""
    global _PROMO_FN
    na, nb = as_name(a), as_name(b)
    if na and nb:
        return DTC[promote_py(na, nb)]
    if _PROMO_FN is None:
        arr = z3.K(DT, z3.K(DT, DTC["float64"]))
        for x in DTYPES:
            row = z3.K(DT, DTC["float64"])
            for y in DTYPES:
                row = z3.Store(row, DTC[y], DTC[promote_py(x, y)])
            arr = z3.Store(arr, DTC[x], row)
        _PROMO_FN = arr
    return z3.Select(z3.Select(_PROMO_FN, a), b)


def is_float(d):
    return z3.Or(*[d == DTC[f] for f in sorted(FLOATS)])


def is_int(d):
    return z3.Or(*[d == DTC[f] for f in sorted(INTS)])


def combine(higher, lower):
    """ATen's combine_categories(higher, lower) (no complex dtypes)."""
    return z3.If(is_float(higher), higher,
                 z3.If(z3.Or(higher == DTC["bool"], is_float(lower)), promote(higher, lower), higher))
