"""What every encoder shares: the context it reads (facts, setup temporaries, the mended
code), the tiered decision (most general assumptions first), and the tiers for shape and
value claims.

An encoder is ``fn(obligation: dict, ctx: Ctx) -> Outcome``. A solver encoder builds
:class:`Query` objects -- premises (assumptions as terms), the *negated* claim, the
assumptions in words -- and calls :func:`decide`; a check encoder returns
:func:`verifier.outcomes.checked` (or ``check_refuted`` / ``unknown``) without a query.
"""
from __future__ import annotations

import ast

from dataclasses import dataclass, field
from typing import Any, Callable

import z3
from z3.z3util import get_vars

from verifier.dtypes import FP_FORMAT
from verifier.outcomes import Outcome, checked
from verifier.shapes import ShapeEval
from verifier.smt import TIMEOUT_MS, TierUnknown, fixed_false, model_text, result_of, solve
from verifier.values import ValueEval


@dataclass
class Ctx:
    facts: dict
    defs: dict
    code: str | None = None          # the mended candidate
    before: str | None = None        # the version before the rewrite
    timeout_ms: int = TIMEOUT_MS
    obligations: list = field(default_factory=list)


@dataclass
class Query:
    premises: list            # assumptions, as terms
    claim: list               # the negated claim (conjunction)
    assumptions: list[str]    # the assumptions, in words
    extra: Any = None         # what describe() reads


def assumption_texts(assume) -> list[str]:
    out = []
    for _, text in assume:
        if text and text not in out:
            out.append(text)
    return out


def decide(kind: str, tiers: list[tuple[str, Callable[[], Query]]], ctx: Ctx, arithmetic: str, describe=None,
           overapprox: Callable[[], list] | None = None, fixed_by: str | None = None, lemmas=(),
           witness_values: tuple[int, ...] = ()) -> Outcome:
    """Try each tier (most general first): the first unsat proves; sat at the last tier
    refutes (unknown when the model relies on an over-approximation); unknown anywhere stops
    with unknown. A tier whose negated claim is ``False`` before solving proves nothing: the
    outcome is ``checked`` by what built it (``fixed_by``, citing ``lemmas``).

    ``witness_values``: when the last tier is unknown (nonlinear integer arithmetic with
    ``%`` often is), the same query is solved again with its integer constants fixed to
    these corner values (:func:`_witnesses`); a sat there is a counterexample the solver
    confirmed, recorded with the fixing equalities, so it refutes. It never proves."""
    last = None
    total = 0.0
    for i, (tier_name, build) in enumerate(tiers):
        try:
            q = build()
        except TierUnknown:
            if i < len(tiers) - 1:
                continue   # a fact only a later tier assumes (a layout as observed)
            raise
        if fixed_false(q.claim):
            by = fixed_by or "the encoding itself: the negated claim is false before any solving"
            return checked(by, q.assumptions, lemmas, tier=tier_name, arithmetic=arithmetic)
        comments = [f"mend obligation: {kind}", f"tier: {tier_name}"] + \
            [f"assumption: {a}" for a in q.assumptions] + [f"arithmetic: {arithmetic}",
                                                           "query: the negated claim; unsat = proved"]
        solved = solve(q.premises + q.claim, timeout_ms=ctx.timeout_ms, comments=comments)
        total += solved.seconds
        last = (solved, q, tier_name)
        if solved.status == "unknown" and witness_values and i == len(tiers) - 1:
            for fix, words in _witnesses(q.premises + q.claim, witness_values):
                w = solve(q.premises + q.claim + fix, timeout_ms=min(ctx.timeout_ms, 500),
                          comments=comments + [f"witness: {words} (the general query was unknown)"])
                total += w.seconds
                if w.status == "sat":
                    last = (w, Query(q.premises + fix, q.claim, q.assumptions + [f"witness: {words}"], q.extra),
                            tier_name)
                    break
        if solved.status != "sat":
            break
    solved, q, tier_name = last
    result, reason, cex = result_of(solved.status), None, None
    if solved.status == "unknown":
        why = str(solved.reason_unknown)
        reason = f"solver returned unknown ({why})" + (
            f" within {ctx.timeout_ms} ms" if "timeout" in why or "canceled" in why else "")
    if solved.status == "sat":
        cex = describe(solved.model, q.extra) if describe else model_text(solved.model)
        over = overapprox() if overapprox else []
        if over:
            result = "unknown"
            reason = ("a counterexample exists only in the over-approximation of "
                      + ", ".join(f"`{o}`" for o in over[:3]) + " (not shown to be realisable)")
    return Outcome(result, status=solved.status, smtlib=solved.smtlib, assumptions=tuple(q.assumptions),
                   tier=tier_name, arithmetic=arithmetic, seconds=round(total, 4), counterexample=cex, reason=reason)


def _witnesses(terms: list, values: tuple[int, ...], limit: int = 48):
    """Corner assignments of the integer constants in ``terms``: each value for all of them
    at once, then each constant at each value with the others at the first value."""
    names = sorted({str(v): v for t in terms for v in get_vars(t) if v.sort() == z3.IntSort()}.items())
    if not names:
        return
    seen, n = set(), 0
    combos = [tuple(v for _ in names) for v in values] + \
        [tuple(v if j == k else values[0] for j in range(len(names))) for k in range(len(names)) for v in values]
    for combo in combos:
        if combo in seen or n >= limit:
            continue
        seen.add(combo)
        n += 1
        yield [var == val for (_, var), val in zip(names, combo)], ", ".join(f"{k} = {v}" for (k, _), v in zip(names, combo))


def shape_tiers(ctx: Ctx, build: Callable[[ShapeEval], tuple[Any, Any]], *,
                uniform: Callable[[str, bool], bool] | None = None, observed: bool = True,
                dense: frozenset = frozenset()) -> list:
    """Tiers for shape/dtype claims: general (independent sizes, dtype categories), equal
    sizes (sizes equal on the example stay equal), observed (the example's sizes, dtypes and local Python values;
    left out when ``observed`` is False). ``build(ev) -> (negated claim, extra)``;
    ``uniform``, ``dense``: see :class:`ShapeEval`."""
    def make(tier: str):
        def run():
            ev = ShapeEval(ctx.facts, ctx.defs, tier, strict_dtypes=(tier == "observed"), uniform=uniform, dense=dense)
            claim_neg, extra = build(ev)
            premises = [a for a, _ in ev.assume]
            texts = assumption_texts(ev.assume)
            if tier in ("equal-sizes", "observed") and ev.sym_dims:
                if tier == "observed":
                    premises += [d == n for d, n, _ in ev.sym_dims]
                    texts.append("sizes are the example's: " + ", ".join(f"{d}={n}" for d, n, _ in ev.sym_dims))
                else:
                    by: dict[int, list] = {}
                    for d, n, _ in ev.sym_dims:
                        by.setdefault(n, []).append(d)
                    eqs = [(g[0], x) for g in by.values() for x in g[1:]]
                    premises += [a == b for a, b in eqs]
                    if eqs:
                        texts.append("sizes equal on the example are equal: " + ", ".join(f"{a} = {b}" for a, b in eqs))
                    fixed = [(g[0], n) for n, g in by.items() if n in ev.state_dims]
                    premises += [a == n for a, n in fixed]
                    if fixed:
                        texts.append("sizes equal to a module-state size on the example are that size: " + ", ".join(
                            f"{a} = {n} ({ev.state_dims[n]})" for a, n in fixed))
            return Query(premises, [claim_neg], texts, (ev, extra))
        return run
    return [("general", make("general")), ("equal-sizes", make("equal-sizes"))] + (
        [("observed", make("observed"))] if observed else [])


def value_tiers(ctx: Ctx, build: Callable[[ValueEval, bool], tuple[list, Any]]):
    """Tiers for value claims: every IEEE value, then finite leaves. ``build(ev, finite) ->
    (negated claim terms, extra)``; ``finite`` adds its own premises to the claim list."""
    def make(finite: bool):
        def run():
            ev = ValueEval(ctx.facts, ctx.defs)
            claim, extra = build(ev, finite)
            texts = assumption_texts(ev.assume)
            if finite:
                texts.append("leaf values are finite (no NaN/inf reaches the untaken side)")
            return Query([a for a, _ in ev.assume], list(claim), texts, (ev, extra))
        return run
    return [("every-value", make(False)), ("finite-leaves", make(True))]


def fp_arith(ctx: Ctx) -> str:
    dts = sorted({f["dtype"] for f in ctx.facts.get("names", {}).values() if f.get("kind") == "tensor"} & set(FP_FORMAT))
    fmts = ", ".join(f"{d} (_ FloatingPoint {FP_FORMAT[d][0]} {FP_FORMAT[d][1]})" for d in dts) or "none"
    return (f"IEEE 754 in Z3's FloatingPoint theory, RNE: {fmts}; each op rounded in the tensor's dtype "
            "(PyTorch's CPU kernels compute float16/bfloat16 in float32 and round once); never reals")


def names_bound_by(node: ast.AST) -> list[str]:
    """The names one AST node binds in its scope: a stored/deleted name, a def or class, a
    parameter, an import's names, ``global``/``nonlocal``, an ``except ... as`` name, a
    ``match`` capture."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]      # `case name:` binds (helper-43)
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.Module, ast.ClassDef, *_FUNCTION_SCOPES, *_COMPREHENSIONS)


def _binding_scope(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    """The scope ``node``'s binding lands in: a def's or class's name in the scope around it, a
    parameter in its function, a comprehension's target in the comprehension, a walrus target
    in the nearest function or module (PEP 572), anything else in the nearest scope."""
    up = parents.get(id(node))
    if isinstance(node, ast.arg):
        while up is not None and not isinstance(up, _FUNCTION_SCOPES):
            up = parents.get(id(up))
        return up
    walrus = isinstance(up, ast.NamedExpr) and up.target is node
    while up is not None and not (isinstance(up, _SCOPES) and not (walrus and isinstance(up, _COMPREHENSIONS))):
        up = parents.get(id(up))
    return up


def bound_in_reach(tree: ast.Module, targets: list[ast.AST], names) -> list[str]:
    """Of ``names`` (builtins an expression calls), those a binding could make mean something
    else at one of ``targets``: bound in the module's scope, in a function, lambda or
    comprehension around a target (the target's own nodes aside: a guard lambda's parameters),
    in a class around it with no function in between (a method does not see its class's
    names), by ``global``/``nonlocal`` anywhere, or any name at all where the module
    star-imports or names ``globals``/``vars``/``locals``/``builtins``. A parameter or local of another function cannot reach the target (helper-79's
    c09: ``def clamp(x, min=0.0, max=1.0)`` elsewhere declined every site)."""
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    inside = {id(n) for t in targets for n in ast.walk(t)}
    reach = {id(tree)}
    for target in targets:
        up, crossed = parents.get(id(target)), False
        while up is not None:
            if isinstance(up, (*_FUNCTION_SCOPES, *_COMPREHENSIONS)):
                reach.add(id(up))
                crossed = crossed or isinstance(up, _FUNCTION_SCOPES)
            elif isinstance(up, ast.ClassDef) and not crossed:
                reach.add(id(up))
            up = parents.get(id(up))
    out = set()
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) or (
                isinstance(node, ast.Name) and node.id in ("globals", "vars", "locals", "__builtins__", "builtins")) \
                or (isinstance(node, ast.Import) and any(a.name == "builtins" for a in node.names)):
            return sorted(set(names))   # any name, by a computed one: `globals()["sum"] = ...` (helper-87)
        bound = [n for n in names_bound_by(node) if n in names]
        if bound and (isinstance(node, (ast.Global, ast.Nonlocal)) or id(_binding_scope(node, parents)) in reach):
            out |= set(bound)
    return sorted(out)


def in_tree(tree: ast.Module, node: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` of ``node``'s type at its position (``node`` from another parse of
    the same source); empty when there are none."""
    at = (type(node), getattr(node, "lineno", None), getattr(node, "col_offset", None))
    return [n for n in ast.walk(tree) if (type(n), getattr(n, "lineno", None), getattr(n, "col_offset", None)) == at]
