"""Encoders for a scalar read kept as a tensor: ``x = T.item()`` -> ``x = T.detach().reshape(()).clone()``,
where every later use of ``x`` is ``v <op> x`` / ``x <op> v`` with ``v`` a tensor and ``op`` one
of ``+ - * / // %`` or a comparison (``x / v`` excluded by the rule's screen: Tensor.__rtruediv__
computes ``v.reciprocal() * x``).

Self-contained: each obligation reads only its own fields and the facts observed on the
example run, per line (T's names where the read runs, each operand's names where its use
runs; :func:`verifier.facts.watched_lines`).

* ``item-operand-tensor`` (check, observed): T is a torch.Tensor with one element where the
  read runs, on every hit and call.
* ``item-operand-keep-type`` (solver, dtype model): every use gives the same result dtype with
  the Python number as with the 0-d tensor, and the devices combine. ATen's result_type
  (``c10/core/ScalarType.h`` combine_categories; ``TensorIterator``): a Python number is a
  *wrapped number* whose dtype is its category's default (float -> the default dtype, int ->
  int64, bool -> bool); a 0-d tensor keeps its dtype and yields only to a dimensioned tensor of
  the same or a higher category. ``int32 tensor * float64 0-d`` is float64 where ``* 2.5`` is
  float32: refuted.
* ``item-operand-exact`` (solver, IEEE): the operand's value reaches the arithmetic unchanged.
  ``.item()`` gives T's exact value; ATen converts a Python-number operand and a 0-d tensor
  operand to the common dtype C with one rounding each (identical), except where C is float16
  or bfloat16: kernels there may compute in float32 ("opmath") from the scalar's *original*
  value, while a 0-d tensor on the device is cast to C first. Proved for every value of T's
  dtype that converting it to C is exact (then both paths see the same number); refuted with
  the value otherwise (``h_fp16 * x`` with x from a float32 tensor: 0.1 is not a float16).
  Lemmas: ``proofs/io_exact_operand.smt2`` (exact -> one operand), ``io_exact_operand_inexact.smt2``
  (the paths differ without it).
"""
from __future__ import annotations

import ast
import math

import re

import z3

from verifier.dtypes import DEFAULT_FOR_CAT, DTC, FLOATS, FP_FORMAT, INT_BITS, RNE, combine, fp_sort
from verifier.encoders.base import Ctx, Query, decide
from verifier.encoders.counting import _HcFacts, _hc_devices, _hc_observed, _hc_view, keep_type_terms, use_operands
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.smt import Unsupported, fmt_value, model_text

_REDUCED = ("float16", "bfloat16")
_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")   # a name or attribute chain: its facts are observed
_WIDE = z3.FPSort(15, 113)   # binary128: every int64 and every float64 value exactly


def _category(dtype: str) -> str:
    return "float" if dtype in FLOATS else "bool" if dtype == "bool" else "int"


def _default_float() -> str:
    import torch

    return str(torch.get_default_dtype()).replace("torch.", "")


def _wrapped(dtype: str) -> str:
    """The dtype ATen gives the Python number ``.item()`` returns for a ``dtype`` tensor."""
    cat = _category(dtype)
    return _default_float() if cat == "float" else DEFAULT_FOR_CAT[cat]


def _read(ctx: Ctx, ob: dict):
    """(abstract value of T, its dtype name, assumptions, its ShapeEval) where the read runs;
    raises _HcFacts / Unsupported with the reason."""
    mv, dtype, texts, se = _hc_observed(ctx, ob.get("expr", ""), ob.get("line"))
    if mv.kind != "tensor" or dtype is None:
        raise _HcFacts(f"`{ob.get('expr')}` is not shown to be a torch.Tensor of known dtype where `.item()` "
                       f"reads it (it is {'a tensor of unknown dtype' if mv.kind == 'tensor' else 'a ' + str(mv.kind)})")
    return mv, dtype, texts, se


def _subclass_read(expr: str, ctx: Ctx, line=None) -> tuple[str, str] | None:
    """(name, class) of a name or attribute in ``expr`` observed as a tensor subclass where it
    is read, else None."""
    names = _hc_view(ctx, expr, line).get("names") or {}
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)):
            seen = names.get(ast.unparse(node)) or {}
            if seen.get("subclass"):
                return ast.unparse(node), seen["subclass"]
    return None


def tensor_read(ob: dict, ctx: Ctx) -> Outcome:
    """T is a 1-element torch.Tensor where the read runs (observed: every hit and call alike)."""
    expr = ob.get("expr", "")
    by = f"the observation on the example run: `{expr}` where `.item()` reads it, on every hit and call"
    try:
        sub = _subclass_read(expr, ctx, ob.get("line"))
    except _HcFacts as exc:   # the observations at the line disagree: nothing to decide from
        return unknown(str(exc))
    if sub:
        # helper-35: the kept 0-d tensor carried the subclass (its __torch_function__) into the
        # result, where the Python number gave a plain tensor
        return check_refuted(by, f"`{sub[0]}` is a tensor subclass ({sub[1]}) on the example run: kept a tensor, "
                                 "the read would carry the subclass into the result, where `.item()` gives a number")
    counted = _counted_kind(ctx, ob)
    if counted is not None:   # helper-66: "a ndarray, which is not modelled" did not say what goes wrong
        return check_refuted(by, f"`{ob['count_of']}` is {counted} on the example run, not a torch.Tensor: its "
                                 "`nonzero()` is no tensor of rows (a NumPy array's is a tuple of one index array per "
                                 "dimension, whose `len` is the rank), so `torch.count_nonzero` would not count alike")
    try:
        mv, dtype, texts, se = _read(ctx, ob)
    except (_HcFacts, Unsupported) as exc:
        return unknown(str(exc))
    numel = z3.IntVal(1)
    for d in mv.shape:
        numel = numel * d
    s = z3.Solver()
    s.add(*[a for a, _ in se.assume])
    s.add(*[d == n for d, n, _ in se.sym_dims])     # the sizes observed on the example run
    s.add(numel != 1)
    if ob.get("int_of") and dtype not in INT_BITS:   # `int(T.item())`
        return check_refuted(by, f"`{expr}` is {dtype} on the example run: `int()` of its `.item()` "
                                 + ("turns a bool into 0 or 1" if dtype == "bool" else "truncates toward zero (and "
                                    "raises on NaN and inf)") + ", which the kept 0-d tensor would not", texts)
    texts = texts + [f"`{expr}` is a {mv.rank}-D {dtype} tensor with one element where it is read (observed)"]
    if ob.get("int_of"):
        texts.append(f"`int()` of the `.item()` of a {dtype} tensor is that same Python int")
    if s.check() != z3.unsat:
        return check_refuted(by, f"`{expr}` does not have exactly one element on the example run: `.item()` raises "
                                 "there, the kept tensor would broadcast", texts)
    return checked(by, texts)


def keep_type(ob: dict, ctx: Ctx) -> Outcome:
    """Every use gives the same result dtype with the Python number and with the 0-d tensor, and
    the devices combine (a 0-d CPU tensor meets tensors on any device; another device's only
    its own)."""
    plain = [u.get("value") for u in ob.get("uses") or [] if not _NAME.match(str(u.get("value")))]
    if plain:
        return unknown(f"the other operand `{plain[0]}` is not a plain name: its dtype and rank would be modelled, "
                       "not observed")
    try:
        _, dtype, texts, _ = _read(ctx, ob)
        uses = use_operands(ctx, ob.get("uses") or [])
        dev_t = _hc_devices(ctx, ob.get("expr", ""), ob.get("line"))
        dtype, texts, _ = _kept(ob, dtype, texts)
    except (_HcFacts, Unsupported) as exc:
        return unknown(str(exc))
    wrapped = _wrapped(dtype)
    divides = sorted({u.get("op") for u in ob.get("uses") or []} & {"/", "//", "%"})
    if divides and dev_t and dev_t != {"cpu"}:
        return check_refuted("the observation on the example run: the read tensor's device",
                             f"the value is on {', '.join(sorted(d for d in dev_t if d))} and a use is `{divides[0]}`: "
                             "CUDA divides by a CPU scalar (the Python number) as a * (1/b), by a device tensor as "
                             "a / b (ATen div_true_kernel_cuda / div_floor_kernel_cuda), which may differ in the "
                             "last bit", texts)
    results: list = []
    premises, differs, more, bad = keep_type_terms(uses, wrapped, dtype, dev_t, "the value", results)
    number = f"`.item()` of a {dtype} tensor" if "kept" not in ob else "the chosen literal"
    texts = texts + [f"{number} is a Python {_category(dtype)}; ATen types it as {wrapped} "
                     "(a wrapped number: the default dtype of its category)"] + more
    if _category(dtype) == "float":
        texts.append(f"torch's default dtype is {wrapped} where the model runs, as at verification "
                     "(torch.set_default_dtype elsewhere would type the Python number otherwise)")
    by = "the observation on the example run: each use's other operand, where it runs"
    if bad:
        return check_refuted(by, "a later use combines the value with " + ", ".join(bad[:3]), texts)
    if not differs:
        return unknown("no later use of the value was given")

    def build():
        return Query(premises, [z3.Or(*differs)], texts + [
            "the value is on " + (", ".join(sorted(d for d in dev_t if d)) or "the read tensor's device")
            + " (observed); a CPU 0-d tensor combines with tensors on any device"], results)

    def describe(model, extra):
        # helper-35: "with the Python number (int64) ... with a 0-d int64 tensor" read as no difference
        for v, original, mended in extra or ():
            a, b = (str(model.eval(t, model_completion=True)) for t in (original, mended))
            if a != b:
                return (model_text(model) + f": the use with `{v}` computes in {a} with the Python number "
                        f"(typed {wrapped}, a wrapped number) but in {b} with a 0-d {dtype} tensor")
        return model_text(model) + ": a use's result dtype differs between the Python number and the 0-d tensor"
    return decide("item-operand-keep-type", [("observed", build)], ctx,
                  "PyTorch type promotion (torch.promote_types table, ATen combine_categories) over a DType datatype",
                  describe, fixed_by="the dtype model gives every use the same result dtype term with the Python "
                                     "number and with the 0-d tensor")


def _kept(ob: dict, dtype: str, texts: list) -> tuple[str, list, list | None]:
    """(the kept tensor's dtype, texts, the chosen literals or None): the read tensor's dtype, or
    for ``x = A if P else B`` (``kept``: the literals' 0-d tensor dtype; P is the read tensor)
    the one the rewrite names, checked against the literals (:func:`_values`): float64 holds
    every Python float, float32 only its own values, int64 every Python int the screen admits.
    Raises Unsupported otherwise."""
    kept = ob.get("kept")
    if kept is None:
        return dtype, texts, _values(ob, dtype)
    if kept not in ("float64", "float32", "int64"):
        raise Unsupported(f"a choice kept as {kept} is not modelled")
    values = _values(ob, kept)
    return kept, texts + [f"the value is one of the literals {', '.join(map(str, ob.get('values') or []))}, "
                          f"chosen by `{ob.get('expr')}` (bool of a one-element tensor: nonzero, NaN included, as "
                          f"`.bool()` casts) and kept as a 0-d {kept} tensor"], values


def _values(ob: dict, kept: str) -> list | None:
    """The chosen literals (``values``: their Python reprs) when ``kept`` holds each exactly
    (float64 every float, float32 those a binary32 round trip keeps, int64 ints within
    range); None without ``values``. Raises Unsupported otherwise."""
    if "values" not in ob:
        return None
    out = []
    for text in ob["values"]:
        value = ast.literal_eval(text) if text not in ("inf", "-inf") else float(text)
        ok = isinstance(value, int) and kept == "int64" and -2 ** 63 <= value < 2 ** 63 or \
            isinstance(value, float) and (kept == "float64" or kept == "float32" and _f32_exact(value))
        if not ok or isinstance(value, bool):
            raise Unsupported(f"the literal {text} is not held exactly by a 0-d {kept} tensor")
        out.append(value)
    return out


def _f32_exact(value: float) -> bool:
    fp = z3.FPVal(value, z3.Float64())
    return z3.is_true(z3.simplify(z3.fpToFP(RNE, z3.fpToFP(RNE, fp, z3.Float32()), z3.Float64()) == fp))


def _const(value, sym):
    """``value`` as a Z3 constant of ``sym``'s sort (a float sort or a bit-vector)."""
    if z3.is_fp(sym):
        return z3.FPVal(value, sym.sort())
    return z3.BitVecVal(value, sym.size())


def _exact_in(dtype: str, target: str):
    """(symbol, term true when the symbol's value converts to ``target`` exactly) for ``dtype``."""
    if dtype in FP_FORMAT:
        x = z3.FP("e", fp_sort(dtype))
        back = z3.fpToFP(RNE, z3.fpToFP(RNE, x, fp_sort(target)), fp_sort(dtype))
        return x, z3.Or(z3.fpIsNaN(x), back == x)
    bits = INT_BITS.get(dtype, 1)
    x = z3.BitVec("e", bits)
    to = z3.fpUnsignedToFP if dtype in ("uint8", "bool") else z3.fpSignedToFP
    return x, z3.fpToFP(RNE, to(RNE, x, fp_sort(target)), _WIDE) == to(RNE, x, _WIDE)


def _counted_fact(ctx: Ctx, ob: dict) -> dict | None:
    """The fact of the counted T (``count_of``, a name or attribute) where the count is read, else None."""
    name = ob.get("count_of")
    if not name or not _NAME.match(name):
        return None
    try:
        return (_hc_view(ctx, name, ob.get("line")).get("names") or {}).get(name)
    except _HcFacts:
        return None


def _counted_kind(ctx: Ctx, ob: dict) -> str | None:
    """What the counted T was on the example run when it was observed and is not a torch.Tensor,
    else None."""
    fact = _counted_fact(ctx, ob)
    if not fact or fact.get("kind") in ("tensor", "unavailable", None):
        return None
    return f"a {fact.get('type') or fact.get('cat') or fact.get('kind')}"


def _count_bound(ctx: Ctx, ob: dict) -> int | None:
    """The number of elements of T for a count of its nonzero elements, from its sizes observed
    where the count is read, else None."""
    fact = _counted_fact(ctx, ob) or {}
    shape = fact.get("shape") if fact.get("kind") == "tensor" else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(shape)


def exact(ob: dict, ctx: Ctx) -> Outcome:
    """For every use whose common dtype is float16/bfloat16: every value of T's dtype converts to
    it exactly (so the float32 'opmath' path and the cast-first path see one number)."""
    try:
        _, dtype, texts, _ = _read(ctx, ob)
        uses = use_operands(ctx, ob.get("uses") or [])
        dtype, texts, values = _kept(ob, dtype, texts)
    except (_HcFacts, Unsupported) as exc:
        return unknown(str(exc))
    wrapped = _wrapped(dtype)
    reduced, claims = [], []
    for v, where, mv, se, _ in uses:
        if mv.kind != "tensor":
            return unknown(f"the other operand `{v}`{where} is not a tensor")
        s = z3.Solver()
        s.add(*[a for a, _ in se.assume])
        if s.check() != z3.sat:
            return unknown(f"the facts of `{v}`{where} are inconsistent")
        common = str(s.model().eval(combine(mv.dtype, DTC[wrapped]), model_completion=True))
        if common in _REDUCED and common not in reduced:
            reduced.append(common)
    texts = texts + [f"`.item()` gives the exact value of the {dtype} element" if values is None else
                     f"the kept 0-d {dtype} tensor holds the chosen literal ({', '.join(ob['values'])}) exactly",
                     "ATen converts a Python-number operand and a 0-d tensor operand to the common dtype with one "
                     "rounding each, or reads them in float32 ('opmath') where the common dtype is float16 or "
                     "bfloat16; the opmath of float32, float64 and integer dtypes is the dtype itself"]
    if not reduced:
        return checked("the dtype model on the observed facts: no use computes in float16 or bfloat16, so each "
                       "operand is converted once, alike", texts)
    if dtype == "bool":
        return checked("0 and 1 are exact in every floating dtype", texts)
    syms, premises, tier = [], [], "every value"
    numel = _count_bound(ctx, ob)
    for c in reduced:
        x, ok = _exact_in(dtype, c)
        claims.append(z3.Not(ok))
        syms.append((x, c))
        if numel is not None:   # a count of nonzero elements: 0..numel(T), not every int64 (helper-66)
            premises += [x >= 0, x <= numel]
        if values is not None:   # a choice of literals: those values only
            premises.append(z3.Or(*[x == _const(v, x) for v in values]))
    if values is not None:
        tier = "the chosen literals"
    if numel is not None:
        tier = "observed"
        texts = texts + [f"the value is a count of nonzero elements of `{ob['count_of']}`: 0 to its {numel} elements "
                         "(the example's sizes)"]

    def build():
        return Query(premises, [z3.Or(*claims)], texts + [f"a use computes in {', '.join(reduced)}"], syms)

    def describe(model, extra):
        x, c = extra[0]
        return (f"e = {fmt_value(model.eval(x, model_completion=True))} ({dtype}) is not exact in {c}: the Python "
                f"number meets a {c} tensor in float32 on some kernels, a 0-d {dtype} tensor may be cast to {c} first")
    return decide("item-operand-exact", [(tier, build)], ctx,
                  "IEEE 754 in Z3's FloatingPoint theory, RNE; integers as bit-vectors, exact in binary128",
                  describe)


ENCODERS = {
    "item-operand-tensor": tensor_read,
    "item-operand-keep-type": keep_type,
    "item-operand-exact": exact,
}
CHECKS = frozenset({"item-operand-tensor"})
OBSERVED = frozenset({"item-operand-tensor"})
