"""Encoders for a host counting loop over ``.tolist()``:
``n = n0; for s in T.tolist(): if s <op> C: n += k``  ->  ``n = n + k * (T <op> C).sum()``.

Self-contained: each obligation reads only its own fields and the facts of the example run
(T's dtype, rank and device; the other operands of later uses of n), so a certificate
re-encodes it from its own data. General lemma: ``proofs/hc_compare_exact.smt2``. Facts are
per line (:func:`verifier.facts.watched_lines` -> ``trace_facts(watch=...)``): T's names
where the count runs (the obligation's ``line``), each use operand's names where that use
runs (``uses``), every hit and every call, all alike (:func:`_hc_view`); facts without
per-line observations (given by hand) are used as given.

Solver encoders: ``count-compare-exact`` (every element value of T's dtype, IEEE and
bit-vectors), ``count-sum-exact`` (int64 against exact integers), ``count-uses-keep-type``
(type promotion). Checks: ``count-tolist-1d`` (T's rank, observed) and
``count-no-gradient`` (observed on torch at discharge time).
"""
from __future__ import annotations

import dataclasses

import math
from typing import Any

import z3

from verifier.dtypes import DTC, FP_FORMAT, INT_BITS, RNE, as_name, combine, fp_sort, promote
from verifier.encoders.base import Ctx, Query, assumption_texts, decide
from verifier.facts import fact_key, names_in
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.shapes import ShapeEval, _expr
from verifier.smt import Unsupported, fmt_value, model_text

HC_COUNT_BITS = 48           # counts (elements of a 1-D tensor) below 2**48
_HC_EXACT = z3.FPSort(15, 113)   # binary128: holds every int64 and every float64 exactly
_HC_FP = {">": z3.fpGT, ">=": z3.fpGEQ, "<": z3.fpLT, "<=": z3.fpLEQ, "==": z3.fpEQ,
          "!=": lambda a, b: z3.Not(z3.fpEQ(a, b))}
_HC_SIGNED = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
              "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
_HC_UNSIGNED = {">": z3.UGT, ">=": z3.UGE, "<": z3.ULT, "<=": z3.ULE, "==": lambda a, b: a == b,
                "!=": lambda a, b: a != b}
_HC_UNSIGNED_DTYPES = {"uint8", "bool"}


def _fact_words(f: dict) -> str:
    k = f.get("kind")
    if k == "tensor":
        return f"a {len(f.get('shape', []))}-D {f.get('dtype')} tensor on {f.get('device')}"
    if k == "num":
        return f"a Python {f.get('cat')}"
    if k == "unavailable":
        return "not readable there"
    return f"a {f.get('type') or k}"


class _HcFacts(Exception):
    """The observations at a line cannot be used (never hit, or they disagree)."""


def _hc_view(ctx: Ctx, text: str, line) -> dict:
    """The facts of the names ``text`` reads, observed at ``line`` only (every hit, every call),
    which must agree on kind, dtype, rank and device. Facts without per-line observations
    (given by hand, not traced) are used as they are."""
    facts = ctx.facts or {}
    if not isinstance(line, int) or "at" not in facts:
        return facts
    key = str(line)
    at = facts["at"].get(key)
    if not at or not (facts.get("at_hits") or {}).get(key):
        raise _HcFacts(f"line {line} of the rewritten code did not run on the example run: nothing is observed where "
                       f"`{text}` is read (where the rewrite keeps the original under a guard, such as the count of a "
                       "float16/bfloat16 tensor against a threshold not exact there, the example took the original)")
    names = {}
    for name in sorted(names_in([text])):
        obs = at.get(name) or []
        if len({fact_key(o) for o in obs}) > 1:
            raise _HcFacts(f"the observations of `{name}` at line {line} disagree (every hit and every call is "
                           "observed): it is " + " and ".join(_fact_words(o) for o in obs[:3]))
        if obs and obs[0].get("kind") != "unavailable":
            names[name] = obs[0]
    return {"names": names, "self": {}}


def _hc_observed(ctx: Ctx, text: str, line=None):
    """(abstract value, dtype name or None, assumptions, the ShapeEval that evaluated it: its
    ``assume`` and ``sym_dims``) of ``text`` at ``line`` on the example run."""
    view = _hc_view(ctx, text, line)
    se = ShapeEval(view, {} if "at" in (ctx.facts or {}) else ctx.defs, "observed", strict_dtypes=True)
    mv = se.eval(_expr(text))
    dtype = None
    if mv.kind == "tensor":
        s = z3.Solver()
        s.add(*[a for a, _ in se.assume])
        if s.check() == z3.sat:
            dtype = as_name(s.model().eval(mv.dtype, model_completion=True))
    texts = assumption_texts(se.assume)
    if isinstance(line, int) and "at" in (ctx.facts or {}):
        texts.append(f"the facts of `{text}` are those observed at line {line} on every hit and every call, "
                     "all alike")
    return mv, dtype, texts, se


def _hc_devices(ctx: Ctx, text: str, line=None) -> set:
    facts = _hc_view(ctx, text, line).get("names", {})
    return {facts[n].get("device") for n in names_in([text]) if facts.get(n, {}).get("kind") == "tensor"}


def _hc_compare_terms(dtype: str, op: str, c) -> tuple[Any, list, str]:
    """(element symbol, [(compute model, torch result)], Python result) for ``s <op> c``."""
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        raise Unsupported(f"the threshold {c!r} is not an int or float")
    if isinstance(c, float) and not math.isfinite(c):
        raise Unsupported("the threshold is not finite")
    if dtype in FP_FORMAT:
        if isinstance(c, int) and float(c) != c:
            raise Unsupported(f"the int threshold {c} is not exact as a float64")
        sort = fp_sort(dtype)
        x = z3.FP("s", sort)
        c64 = z3.FPVal(float(c), z3.Float64())
        py = _HC_FP[op](z3.fpToFP(RNE, x, z3.Float64()), c64)       # tolist(): exact float64; Python: double compare
        models = [(f"in {dtype}, C rounded to {dtype} (RNE)", _HC_FP[op](x, z3.fpToFP(RNE, c64, sort)))]
        if dtype in ("float16", "bfloat16"):
            f32 = z3.Float32()
            models.append(("in float32 after upcasting, C rounded to float32 (CPU kernels, inductor)",
                           _HC_FP[op](z3.fpToFP(RNE, x, f32), z3.fpToFP(RNE, c64, f32))))
        return x, models, py
    if dtype in INT_BITS or dtype == "bool":
        bits = INT_BITS.get(dtype, 1)
        unsigned = dtype in _HC_UNSIGNED_DTYPES
        x = z3.BitVec("s", bits)
        if isinstance(c, int):
            if abs(c) >= 2 ** 64:
                raise Unsupported("the int threshold does not fit in 64 bits")
            wide = 80
            xw = z3.ZeroExt(wide - bits, x) if unsigned else z3.SignExt(wide - bits, x)
            py = _HC_SIGNED[op](xw, z3.BitVecVal(c, wide))           # Python ints: exact
            if dtype == "bool":   # result_type(bool tensor, int) = int64; C converted with wrap-around
                t = _HC_SIGNED[op](z3.ZeroExt(63, x), z3.BitVecVal(c % 2 ** 64, 64))
                return x, [("in int64 (bool promoted), C converted to int64 (wraps)", t)], py
            cmp = _HC_UNSIGNED if unsigned else _HC_SIGNED
            t = cmp[op](x, z3.Extract(bits - 1, 0, z3.BitVecVal(c, wide)))
            return x, [(f"in {dtype}, C converted to {dtype} (wraps, measured)", t)], py
        # float C with an integer/bool tensor: result_type is the default float dtype (float32)
        to = z3.fpUnsignedToFP if unsigned else z3.fpSignedToFP
        exact = to(RNE, x, _HC_EXACT)                                 # every int64 is exact in binary128
        py = _HC_FP[op](exact, z3.fpToFP(RNE, z3.FPVal(c, z3.Float64()), _HC_EXACT))   # Python int vs float: exact
        f32 = z3.Float32()
        t = _HC_FP[op](to(RNE, x, f32), z3.fpToFP(RNE, z3.FPVal(c, z3.Float64()), f32))
        return x, [(f"in float32 (result_type of a {dtype} tensor and a Python float), both rounded (RNE)", t)], py
    raise Unsupported(f"dtype {dtype} is outside the encoded dtypes")


def compare_exact(ob: dict, ctx: Ctx) -> Outcome:
    """For every element value s of T's dtype: Python's ``s <op> C`` on tolist()'s number equals
    torch's elementwise ``T <op> C`` (under each compute model listed)."""
    expr, op, c = ob["expr"], ob["op"], ob.get("threshold_value")
    if op not in _HC_FP:
        return unknown(f"comparison `{op}` is not encoded")
    try:
        mv, dtype, texts, _ = _hc_observed(ctx, expr, ob.get("line"))
    except _HcFacts as exc:
        return unknown(str(exc))
    except Unsupported as exc:
        return unknown(f"the dtype of `{expr}` is not known where the rewrite runs: {exc}")
    if dtype is None:
        return unknown(f"`{expr}` is not shown to be a torch.Tensor of known dtype on the example run "
                        f"(it is {'a tensor of unknown dtype' if mv.kind == 'tensor' else 'a ' + str(mv.kind)})")
    if c is None:
        # a Python-number attribute (`self.min_len`): its value where the loop runs, observed
        try:
            seen = _hc_view(ctx, ob.get("threshold") or "", ob.get("line")).get("names", {}).get(ob.get("threshold"))
        except _HcFacts as exc:
            return unknown(str(exc))
        if not seen or seen.get("kind") != "num" or seen.get("cat") not in ("int", "float") \
                or not isinstance(seen.get("value"), (int, float)):
            return unknown(f"the threshold `{ob.get('threshold')}` was not observed as a finite Python int or float "
                           f"where the loop runs (observed: {_fact_words(seen) if seen else 'nothing'})")
        c = seen["value"]
        texts = texts + [f"`{ob.get('threshold')}` == {c!r} on every call (a module attribute, observed)"]
    # with the threshold counted on the tensor under autocast too (no guard emitted: an
    # attribute, or a literal exact there), T may be computed in float16/bfloat16 (helper-38)
    dtypes = [dtype] + ([d for d in _AUTOCAST_FLOATS if d != dtype]
                        if ob.get("autocast") == "counted" and dtype in _AUTOCAST_FLOATS else [])
    first = None
    for d in dtypes:
        out = _compare_in(ob, ctx, d, op, c, texts, observed=d == dtype)
        if out.result not in ("proved", "checked"):
            return out
        first = first or out
    if len(dtypes) > 1:
        first = dataclasses.replace(first, assumptions=tuple(first.assumptions) + (
            "the same claim is proved with T in " + ", ".join(dtypes[1:]) + " (separate queries: autocast may compute "
            "T there)",))
    return first


_AUTOCAST_FLOATS = ("float32", "bfloat16", "float16")


def _compare_in(ob: dict, ctx: Ctx, dtype: str, op: str, c, texts: list[str], observed: bool) -> Outcome:
    """:func:`compare_exact`'s query with T's elements of ``dtype`` (the observed one, or one
    autocast may compute T in)."""
    expr = ob["expr"]
    try:
        x, models, py = _hc_compare_terms(dtype, op, c)
    except Unsupported as exc:
        return unknown(str(exc))

    def build():
        return Query([], [z3.Or(*[py != t for _, t in models])],
                     texts + [f"`{expr}` has dtype {dtype} on every call (observed)" if observed else
                              f"under torch.autocast `{expr}` is computed in {dtype} (one dtype autocast may give it)",
                              "Tensor.tolist() gives each element's exact value (float64 for floating dtypes, int for "
                              "integer dtypes, bool)",
                              "torch compares " + "; or ".join(d for d, _ in models)], (x, models, py))

    def describe(model, extra):
        x, models, py = extra
        val = fmt_value(model.eval(x, model_completion=True))
        got = [str(z3.is_true(model.eval(t, model_completion=True))) for _, t in models]
        return (f"s = {val} ({dtype}): Python `s {op} {ob.get('threshold')}` is "
                f"{z3.is_true(model.eval(py, model_completion=True))}, torch `{expr} {op} {ob.get('threshold')}` gives "
                f"{' / '.join(got)}; the threshold is not exact in {dtype if dtype in FP_FORMAT else 'the promoted dtype'}"
                + ("" if observed else f" (under torch.autocast, which may compute `{expr}` in {dtype})"))
    arith = (f"IEEE 754 in Z3's FloatingPoint theory, RNE ({dtype}, float64, float32; binary128 for exact int/float "
             "comparison); integers as bit-vectors; never reals")
    return decide("count-compare-exact", [("observed", build)], ctx, arith, describe,
                  fixed_by="the IEEE model gives Python's and torch's comparison the same term")


def sum_exact(ob: dict, ctx: Ctx) -> Outcome:
    n0, k = ob.get("init"), ob.get("step")
    if not isinstance(n0, int) or not isinstance(k, int) or abs(n0) >= 2 ** 63 or abs(k) >= 2 ** 63:
        return unknown("the initial value and the increment must be int64 literals")
    count = z3.BitVec("count", 64)

    def build():
        torch_n = z3.BitVecVal(n0, 64) + z3.BitVecVal(k, 64) * count        # int64, wraps
        exact = z3.BitVecVal(n0, 160) + z3.BitVecVal(k, 160) * z3.ZeroExt(96, count)   # Python int: no wrap
        return Query([z3.ULT(count, z3.BitVecVal(2 ** HC_COUNT_BITS, 64))], [z3.SignExt(96, torch_n) != exact],
                     [f"the count is below 2^{HC_COUNT_BITS} (a 1-D tensor has fewer elements)",
                      "the sum of a bool tensor is int64 and counts exactly (integer addition below 2^63)",
                      f"the original adds {k} once per counted element to the Python int {n0}"], None)
    return decide("count-sum-exact", [("bounded count", build)], ctx,
                  "64-bit bit-vectors (int64, wrapping) against 160-bit bit-vectors (exact)",
                  fixed_by="the bit-vector model gives the int64 and the exact count the same term")


def use_operands(ctx: Ctx, uses: list) -> list:
    """Each later use's other operand (``{"value", "line"}``) as ``(text, " (line N)", abstract
    value, its ShapeEval, the facts view)``, from the facts observed where that use runs; raises
    _HcFacts (not observed there, or observations disagree) or Unsupported (not modelled)."""
    out = []
    for u in uses:
        v, line = u.get("value"), u.get("line")
        where = f" (line {line})" if isinstance(line, int) else ""
        try:
            view = _hc_view(ctx, v, line)
            se = ShapeEval(view, {} if "at" in (ctx.facts or {}) else ctx.defs, "observed", strict_dtypes=True)
            mv = se.eval(_expr(v))
        except _HcFacts as exc:
            raise _HcFacts(f"the other operand `{v}` of a later use{where}: {exc}") from None
        except Unsupported as exc:
            raise Unsupported(f"the other operand `{v}` of a later use{where} is not known: {exc}") from None
        out.append((v, where, mv, se, view))
    return out


def keep_type_terms(operands: list, wrapped: str, kept: str, dev_t: set, what: str, results: list | None = None):
    """``(premises, differs, texts, bad)`` for each use's other operand (:func:`use_operands`): a
    Python number typed ``wrapped`` (ATen's wrapped number: lowest priority) against a 0-d
    ``kept`` tensor (yields only to a dimensioned tensor of its category; two 0-d tensors
    promote). ``differs``: one term per use, true when the result dtypes differ; ``bad``: uses
    that meet no tensor, or a tensor on another device than ``what`` (``dev_t``, not the CPU).
    ``results``, when given, gets ``(operand, dtype term with the number, with the tensor)`` per use."""
    premises, differs, texts, bad = [], [], [], []
    for v, where, mv, se, view in operands:
        if mv.kind != "tensor":
            bad.append(f"`{v}`{where} (a Python {mv.cat or mv.kind})")
            continue
        premises += [a for a, _ in se.assume]
        texts += [t for t in assumption_texts(se.assume) if t not in texts]
        texts.append(f"`{v}` is a {mv.rank}-D tensor where it is used{where}, on every hit and call (observed)")
        original = combine(mv.dtype, DTC[wrapped])
        mended = combine(mv.dtype, DTC[kept]) if mv.rank >= 1 else promote(mv.dtype, DTC[kept])
        differs.append(original != mended)
        if results is not None:
            results.append((v, original, mended))
        dev_v = {f.get("device") for n, f in view.get("names", {}).items()
                 if n in names_in([v]) and f.get("kind") == "tensor"}
        if dev_t and dev_t != {"cpu"} and dev_v != dev_t:
            bad.append(f"`{v}`{where} on {', '.join(sorted(d for d in dev_v if d)) or 'another device'}, {what} on "
                       f"{', '.join(sorted(d for d in dev_t if d))}")
    return premises, differs, texts, bad


def uses_keep_type(ob: dict, ctx: Ctx) -> Outcome:
    """Each later use ``n <op> v`` (op in +, -, *): a Python int n and a 0-d int64 tensor n give
    the same result dtype (ATen: a Python number and a 0-d tensor both yield to a dimensioned
    tensor of the same category; two 0-d tensors promote) and compatible devices. ``v``'s facts
    are those observed where that use runs (``uses``: value and line), on every hit."""
    expr = ob.get("expr", "")
    uses = ob.get("uses")
    if not isinstance(uses, list):
        uses = [{"value": v, "line": None} for v in ob.get("values") or []]
    try:
        dev_t = _hc_devices(ctx, expr, ob.get("line"))
    except _HcFacts as exc:
        return unknown(str(exc))
    try:
        operands = use_operands(ctx, uses)
    except (_HcFacts, Unsupported) as exc:
        return unknown(str(exc))
    premises, differs, texts, bad = keep_type_terms(operands, "int64", "int64", dev_t, "the count")
    if bad:
        return check_refuted("the observation on the example run: each later use's other operand, where it runs",
                             "a later use combines the count with " + ", ".join(bad[:3])
                             + ": the result would change type (a tensor instead of a Python number, or another dtype) "
                             "or mix devices", texts)
    if not differs:
        return checked("the obligation's own data (the rule's screen of the function): no later use of the counter",
                       ["no later use of the counter"])

    def build():
        return Query(premises, [z3.Or(*differs)], texts + [
            "the count is on " + (", ".join(sorted(d for d in dev_t if d)) or "the iterated tensor's device")
            + " (observed); a CPU 0-d tensor combines with tensors on any device"], None)

    def describe(model, extra):
        return (model_text(model) + ": a 0-d integer tensor operand keeps its dtype with a Python int but is "
                "promoted to int64 by a 0-d int64 count")
    return decide("count-uses-keep-type", [("observed", build)], ctx,
                  "PyTorch type promotion (torch.promote_types table, ATen combine_categories) over a DType datatype",
                  describe, fixed_by="the dtype model gives every later use the same result dtype term with a Python "
                                     "int and with the 0-d int64 count")


def tolist_1d(ob: dict, ctx: Ctx) -> Outcome:
    """T is 1-D where the count runs, on every hit and call: ``tolist()`` yields numbers (an
    observation of the example run; the claim is about T's rank, fixed by what was seen)."""
    expr = ob["expr"]
    try:
        mv, dtype, texts, _ = _hc_observed(ctx, expr, ob.get("line"))
    except _HcFacts as exc:
        return unknown(str(exc))
    except Unsupported as exc:
        return unknown(f"the rank of `{expr}` is not known where the rewrite runs: {exc}")
    observed = mv.rank if mv.kind == "tensor" else -1
    seen = f"{observed}-D" if observed >= 0 else f"not a tensor ({mv.kind})"
    by = f"the observation on the example run: the rank of `{expr}` where the count runs, on every hit and call"
    texts = texts + [f"`{expr}` is {seen} on every call, as on the example run (observed)",
                     "tolist() of a 1-D tensor is a list of Python numbers; of a 0-D tensor a number and of "
                     "an n-D tensor (n >= 2) nested lists, on which the original loop raises TypeError"]
    if observed < 0:
        return check_refuted(by, f"`{expr}` is not a tensor on the example run: `.tolist()` and the tensor "
                                 "comparison differ", texts)
    if observed != 1:
        return check_refuted(by, f"`{expr}` is {observed}-D on the example run: its tolist() does not yield numbers "
                                 "(the original compares lists: an ordering raises TypeError, == or list.count "
                                 "matches none), while the tensor count compares elements",
                             texts)
    return checked(by + " (1-D)", texts)


def no_gradient(ob: dict, ctx: Ctx) -> Outcome:
    """The count carries no gradient, like the Python int it replaces: observed on this
    torch (a comparison of a tensor that requires grad, and its sum, do not require grad)."""
    import torch

    x = torch.ones(2, requires_grad=True)
    with torch.enable_grad():
        flags = [(x > 0).requires_grad, (x > 0).sum().requires_grad, (x <= 0).sum().requires_grad]
    by = f"the observation on torch {torch.__version__} at discharge time: comparisons have no derivative"
    assumptions = ["a Python int from tolist() comparisons carries no gradient",
                   "aten comparison ops (gt, ge, lt, le, eq, ne) have no derivative: their bool result and its "
                   "sum have requires_grad=False"]
    if any(flags):
        return check_refuted(by, "a comparison of a tensor that requires grad requires grad on this torch", assumptions)
    return checked(by, assumptions)


ENCODERS = {
    "count-tolist-1d": tolist_1d,
    "count-compare-exact": compare_exact,
    "count-sum-exact": sum_exact,
    "count-uses-keep-type": uses_keep_type,
    "count-no-gradient": no_gradient,
}
CHECKS = frozenset({"count-tolist-1d", "count-no-gradient"})
OBSERVED = frozenset({"count-tolist-1d"})   # the rank seen on the example run
