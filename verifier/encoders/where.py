"""Encoders for a selection: ``if p: y = a else: y = b`` -> ``y = torch.where(p', a, b)``.

Solver encoders over the shape model (``same-shape``, ``same-dtype``,
``untaken-side-cannot-raise``, ``single-element-predicate``, ``bool-predicate``) and the
value model (``bool-operand``, ``finite-gradient``, ``where-equals-ite``); one check
(``untaken-side-runs``: the effect analysis of the submodule the untaken side calls).
"""
from __future__ import annotations

import ast

import z3

from verifier.dtypes import DEFAULT_FOR_CAT, DTC, FP_FORMAT, INT_BITS, as_name, fp_sort, promote_py, sort_of
from verifier.effects import dotted_name as _dotted
from verifier.facts import candidate_line
from verifier.encoders.base import Ctx, decide, fp_arith, shape_tiers, value_tiers
from verifier.module_shapes import numel
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.shapes import M, ShapeEval, _expr
from verifier.smt import Unsupported, model_text
from verifier.values import ValueEval, to_logical

SAME_SHAPE_TERMS = "the shape transfer functions give both sides the same symbolic shape (no solver query needed)"


def _same_shape_neg(a: M, b: M):
    if a.kind != "tensor" or b.kind != "tensor":
        if a.kind == b.kind == "num":
            return z3.BoolVal(False)
        raise Unsupported(f"shapes of a {a.kind} and a {b.kind}")
    if a.rank != b.rank:
        return z3.BoolVal(True)
    return z3.Not(z3.And(*[x == y for x, y in zip(a.shape, b.shape)])) if a.rank else z3.BoolVal(False)


def same_shape(ob: dict, ctx: Ctx) -> Outcome:
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        ok = z3.And(*[p for p, _ in ev.pre]) if ev.pre else z3.BoolVal(True)
        # where both sides evaluate (the original's taken side did), their shapes differ
        return z3.And(ok, _same_shape_neg(a, b)), (a, b)
    return decide("same-shape", shape_tiers(ctx, build), ctx, "linear/nonlinear integer arithmetic over symbolic sizes",
                  fixed_by=SAME_SHAPE_TERMS)


def same_dtype(ob: dict, ctx: Ctx) -> Outcome:
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        da = a.dtype if a.kind == "tensor" else DTC[DEFAULT_FOR_CAT[a.cat]] if a.kind == "num" else None
        db = b.dtype if b.kind == "tensor" else DTC[DEFAULT_FOR_CAT[b.cat]] if b.kind == "num" else None
        if da is None or db is None:
            raise Unsupported("dtype of a non-tensor side")
        return da != db, (a, b)
    return decide("same-dtype", shape_tiers(ctx, build), ctx,
                  "PyTorch type promotion (torch.promote_types table, ATen combine_categories) over a DType datatype",
                  fixed_by="the dtype model gives both sides the same dtype term (no solver query needed)")


def raise_query(expr: str, traced_only: bool = False):
    """``(build, describe)`` for :func:`decide` over shape tiers: whether a precondition of an op
    of ``expr`` can fail, and which failed in a counterexample. ``traced_only``: only those that
    fail when the op is traced on fake tensors (sizes, ranks, dtypes), not those on values."""
    def build(ev: ShapeEval):
        ev.eval(_expr(expr))
        pre = [(p, t) for p, t in ev.pre if not (traced_only and t in ev.value_pre)]
        return (z3.Not(z3.And(*[p for p, _ in pre])) if pre else z3.BoolVal(False)), pre

    def describe(model, extra):
        failing = [t for p, t in extra[1] if z3.is_false(model.eval(p, model_completion=True))]
        return "; ".join(failing[:3]) + (" (at " + model_text(model) + ")" if model_text(model) else "")
    return build, describe


def cannot_raise(ob: dict, ctx: Ctx) -> Outcome:
    build, describe = raise_query(ob["expr"])
    return decide("untaken-side-cannot-raise", shape_tiers(ctx, build), ctx,
                  "preconditions of each op (broadcasting, matmul/linear sizes, dims, dtypes) over symbolic sizes",
                  describe, fixed_by="the shape transfer functions: no op of the side has a precondition that can fail")


def _rank_follows_inputs(pred: str, ctx: Ctx) -> str | None:
    """Why the predicate has one element only at the example's ranks, else None. The shape tiers
    make sizes symbolic but keep ranks, so `if gate:` on a 0-d input was "proved" for every size
    while a gate of shape (8,) makes the original raise and `torch.where` broadcast (helper-60).
    Each tensor, module state included, gets one more (leading) dimension: a predicate whose rank
    moves with it is single-element only at the ranks the example had."""
    def bump(table: dict) -> dict:
        return {k: {**f, "shape": [2, *f["shape"]]} if isinstance(f, dict) and f.get("kind") == "tensor" else f
                for k, f in table.items()}
    # module state too: a buffer replaced by one of another shape (helper-62: `x.sum() > self.t`, t of shape (1,))
    bumped = {**ctx.facts, "names": bump(ctx.facts.get("names") or {}), "self": bump(ctx.facts.get("self") or {})}
    try:
        a = ShapeEval(ctx.facts, ctx.defs, "general").eval(_expr(pred))
        b = ShapeEval(bumped, ctx.defs, "general").eval(_expr(pred))
    except Unsupported as exc:
        return f"the predicate's rank with inputs of other ranks is not known ({exc}): ranks are the example's"
    if a.kind == "tensor" and (b.kind != "tensor" or b.rank != a.rank):
        return ("the predicate's rank follows its inputs' ranks (one more input dimension gives it "
                f"{b.rank if b.kind == 'tensor' else 'no tensor'} dimension(s)): ranks are the example's, and an "
                "input of another rank would make the original raise where torch.where broadcasts")
    return None


def single_element(ob: dict, ctx: Ctx) -> Outcome:
    rank_why = _rank_follows_inputs(ob["pred"], ctx)

    def build(ev: ShapeEval):
        if rank_why:
            ev.assume.append((z3.BoolVal(True), rank_why))
        p = ev.eval(_expr(ob["pred"]))
        conds = [q for q, t in ev.pre if t and t.startswith("bool() of")]
        if p.kind == "num":
            if not conds:
                raise Unsupported("the predicate is a Python value")
            return z3.Or(*[z3.Not(c) for c in conds]), p
        return z3.Or(numel(p.shape) != 1, *[z3.Not(c) for c in conds]), p
    tiers = shape_tiers(ctx, build)
    if rank_why:   # the general and equal-sizes tiers keep the example's ranks: only the observed tier is honest
        tiers = [t for t in tiers if t[0] == "observed"]
    return decide("single-element-predicate", tiers, ctx, "nonlinear integer arithmetic (numel)",
                  fixed_by="the shape transfer functions give the predicate exactly one element for every size")


def bool_predicate(ob: dict, ctx: Ctx) -> Outcome:
    def build(ev: ShapeEval):
        p = ev.eval(_expr(ob.get("pred") or ob.get("expr")))
        if p.kind != "tensor":
            raise Unsupported("the predicate is not a tensor")
        return p.dtype != DTC["bool"], p
    return decide(ob["kind"], shape_tiers(ctx, build), ctx, "PyTorch dtypes (DType datatype)",
                  fixed_by="the dtype model gives the predicate the bool dtype (no solver query needed)")


def bool_operand_truth(ob: dict, ctx: Ctx) -> Outcome:
    def build(ev: ValueEval, finite: bool):
        x = ev.eval(_expr(ob.get("expr") or ob.get("pred")))
        py = ev.truth(x)
        if x.dtype in FP_FORMAT:
            torch_bool = z3.Not(z3.fpEQ(x.term, z3.FPVal(0.0, fp_sort(x.dtype))))
        elif x.dtype in INT_BITS:
            torch_bool = x.term != 0
        else:
            torch_bool = x.term
        return [py != torch_bool], None
    return decide(ob["kind"], value_tiers(ctx, build)[:1], ctx, fp_arith(ctx) + "; truth = nonzero (NaN true)",
                  fixed_by="the truth model gives Python's truth and the tensor's bool conversion the same term")


def finite_gradient(ob: dict, ctx: Ctx) -> Outcome:
    guard = ob.get("guard")

    def build(ev: ValueEval, finite: bool):
        side = ev.eval(_expr(ob["expr"]))
        if side.dtype not in FP_FORMAT:
            raise Unsupported("the side is not a floating tensor")
        if guard is None:
            raise Unsupported("no guard recorded")
        taken = ev.truth(ev.eval(_expr(guard)))
        s = fp_sort(side.dtype)
        g = z3.FP("upstream_grad", s)
        grads = ev.grads(side, g)
        if not grads:
            raise Unsupported("no floating leaf under the op")
        bad = z3.Or(*[z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)) for t in grads.values()])
        claim = [z3.Not(taken), z3.fpIsZero(g), bad]
        if finite:
            for leaf in ev.leaves.values():
                if leaf.dtype in FP_FORMAT and leaf.leaf:
                    claim.append(z3.Not(z3.Or(z3.fpIsNaN(leaf.term), z3.fpIsInf(leaf.term))))
        return claim, grads
    out = decide("finite-gradient", value_tiers(ctx, build), ctx,
                 fp_arith(ctx) + "; PyTorch backward formulas, zero upstream gradient on the untaken side",
                 overapprox=lambda: [],
                 fixed_by="PyTorch's backward formulas give the untaken side a gradient that is finite by construction")
    return out.with_(use="inference-only") if out.result == "refuted" else out


def _dtype_of(text: str, ctx: Ctx) -> str | None:
    se = ShapeEval(ctx.facts, ctx.defs, "observed", strict_dtypes=True)
    try:
        m = se.eval(_expr(text))
    except Unsupported:
        return None
    if m.kind != "tensor":
        return None
    s = z3.Solver()
    s.add(*[a for a, _ in se.assume])
    if s.check() != z3.sat:
        return None
    return as_name(s.model().eval(m.dtype, model_completion=True))


_WHERE_LEMMA = {"float32": "pcf_where_ite_fp32", "float16": "pcf_where_ite_fp16", "bfloat16": "pcf_where_ite_bf16",
                "float64": "pcf_where_ite_fp64"}


def where_equals_ite(ob: dict, ctx: Ctx) -> Outcome:
    """The selection: ``if p: y = a else: y = b`` vs ``y = torch.where(p', a, b)``, element by
    element in the target dtype, with p' the rewritten predicate (logical ops)."""
    dts = [_dtype_of(ob[k], ctx) if isinstance(ob.get(k), str) else None for k in ("lhs", "rhs")]

    def build(ev: ValueEval, finite: bool):
        pred = _expr(ob["pred"])
        p_orig = ev.truth(ev.eval(pred))
        p_new = ev.truth(ev.eval(to_logical(pred)))
        if None in dts:
            raise Unsupported("the dtype of a side is not known")
        a = z3.FP("a[i]", fp_sort(dts[0])) if dts[0] in FP_FORMAT else z3.Const("a[i]", sort_of(dts[0]))
        b = z3.FP("b[i]", fp_sort(dts[1])) if dts[1] in FP_FORMAT else z3.Const("b[i]", sort_of(dts[1]))
        if dts[0] != dts[1]:
            return [z3.BoolVal(True)], dts     # the selection changes the result's dtype
        original = z3.If(p_orig, a, b)
        mended = z3.If(p_new, a, b)   # where: 0-dim condition broadcast, same dtype: no conversion
        return [original != mended], dts

    def describe(model, extra):
        d = extra[1]
        if d[0] != d[1]:
            return (f"the sides are {d[0]} and {d[1]}: torch.where gives {promote_py(d[0], d[1])} "
                    "on both outcomes, the original keeps each side's dtype")
        return model_text(model)
    lemma = _WHERE_LEMMA.get(dts[0]) if dts[0] == dts[1] else None
    return decide("where-equals-ite", value_tiers(ctx, build)[:1], ctx,
                  fp_arith(ctx) + "; structural equality (=): bit-identical up to NaN payload", describe,
                  fixed_by="the rewritten predicate has the original's truth value term for term (the value model of "
                           "torch.logical_* is Python's and/or/not), and both sides have one dtype, so the selection is "
                           f"the lemma that torch.where equals the if/else in {dts[0]}",
                  lemmas=[f"proofs/{lemma}.smt2"] if lemma else [])


def untaken_runs(ob: dict, ctx: Ctx) -> Outcome:
    """The submodule the untaken side calls writes no state (it now runs on both outcomes):
    the effect analysis of the observed module (verifier/effects.py)."""
    call = ob.get("call", "")
    node = _expr(call)
    func = node.func if isinstance(node, ast.Call) else None
    while isinstance(func, ast.Subscript):   # self.experts[e](x): one of the container's modules, whose
        func = func.value                    # effect analysis covers every module under it
    d = _dotted(func) if func is not None else None
    f = (ctx.facts.get("names", {}).get(d) or ctx.facts.get("self", {}).get((d or "").split(".")[-1])) if d else None
    if not f or f.get("kind") != "module":
        return unknown(f"no module was observed for `{d or ast.unparse(node.func if func is not None else node)}`")
    if not f.get("pure"):
        return unknown(f"`{d}` ({f.get('type')}) may write state: " + "; ".join(f.get("effects") or ["no effect model"])[:200])
    return checked(f"the effect analysis (verifier/effects.py) of `{d}` as observed on the example run: "
                   f"{f.get('type')}, training={f.get('training')}, writes no state",
                   [f"`{d}` ({f.get('type')}, training={f.get('training')}) writes no state: torch.nn modules by "
                    "type and mode, others by screening their forward (verifier/effects.py)"]
                   + list(f.get("assumptions", []))[:10])


def loop_facts_agree(ob: dict, ctx: Ctx) -> Outcome:
    """A branch inside a loop: what the proofs read (one iteration's facts) must be what every
    iteration showed at the branch's line (observed on the example run: ``trace_facts`` watch)."""
    line = ob.get("line")
    line = str(candidate_line(ctx.before, ctx.code, line) if isinstance(line, int) else line)
    seen = (ctx.facts.get("at") or {}).get(line)
    hits = (ctx.facts.get("at_hits") or {}).get(line, 0)
    if not seen or not hits:
        return unknown(f"the branch's line {line} was not observed on the example run")
    shapes = (ctx.facts.get("at_shapes") or {}).get(line) or {}
    differ = sorted(name for name, facts in seen.items() if len(facts) > 1 or len(shapes.get(name) or []) > 1)
    if differ:
        return check_refuted("the observation of every iteration at the branch (verifier/facts.py watch)",
                             f"`{differ[0]}` differs between iterations (shapes seen: "
                             f"{shapes.get(differ[0]) or 'n/a'}; {len(seen[differ[0]])} distinct kind/dtype/rank/device): "
                             "the proofs, which read one iteration, do not cover the others")
    return checked(f"the observation of the example run: all {hits} iterations showed the same kind, dtype, shape "
                   f"and device of {', '.join(f'`{n}`' for n in sorted(seen)) or 'no name'} at line {line}",
                   ["other inputs give every iteration facts alike too (an observation of one run, not a proof); "
                    "Dynamo unrolls the loop, each iteration's branch predicated alike"])


ENCODERS = {
    "same-shape": same_shape,
    "same-dtype": same_dtype,
    "untaken-side-cannot-raise": cannot_raise,
    # the statements after an early `return`, now run on every call: the predicate often guards
    # exactly what they need (`if (t < 0).any(): return ...` before `nll_loss(logp, t)`), so the
    # rule requires this one established (an adversarial review)
    "fall-through-cannot-raise": cannot_raise,
    "single-element-predicate": single_element,
    "bool-predicate": bool_predicate,
    "bool-operand": bool_operand_truth,
    "finite-gradient": finite_gradient,
    "where-equals-ite": where_equals_ite,
    "untaken-side-runs": untaken_runs,
    "loop-facts-agree": loop_facts_agree,
}
CHECKS = frozenset({"untaken-side-runs", "loop-facts-agree"})
OBSERVED = frozenset({"untaken-side-runs", "loop-facts-agree"})   # observed on the example run
