"""The solver wrapper: solve a query with a timeout and keep its SMT-LIB 2 text, replay
recorded text, map z3's answer to an outcome, show a model in words.

Nothing here knows what an obligation is about; :mod:`verifier.encoders` builds the
queries, :mod:`verifier.outcomes` types the results.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import z3

TIMEOUT_MS = 2000


class Unsupported(Exception):
    """The obligation (or a part of it) is outside what is encoded: result unknown."""


class TierUnknown(Unsupported):
    """This tier of a ladder cannot decide (it lacks a fact a later tier assumes, such as a
    tensor's observed layout): :func:`verifier.encoders.base.decide` tries the next tier, and
    at the last one it is unknown like any :class:`Unsupported`."""


def solver_version() -> str:
    return f"z3 {z3.get_full_version()}"


@dataclass
class Solved:
    status: str          # "unsat" | "sat" | "unknown"
    smtlib: str
    seconds: float
    model: Any = None
    reason_unknown: str | None = None


_LET = re.compile(r"[?$]x\d+")


def normalize_smt(text: str) -> str:
    """SMT-LIB text with z3's let-binding names (``?x123``, ``$x45``) renamed in order of
    first appearance (``?v1``, ``$v2``): they come from z3's internal term ids, which depend
    on what else the process built (a query built after others, in a long-lived Ray worker,
    printed other names than in a fresh process)."""
    names: dict[str, str] = {}

    def sub(m):
        return names.setdefault(m.group(0), f"{m.group(0)[0]}v{len(names) + 1}")
    return _LET.sub(sub, text)


def solve(assertions: list, *, timeout_ms: int = TIMEOUT_MS, comments: list[str] = ()) -> Solved:
    """Check ``assertions`` (the negated claim plus assumptions) with a timeout."""
    # A fresh context per query: in z3's shared main context the search depends on every
    # term built before (measured: a 0.04 s refutation timed out after the lemma replays
    # had run in the same process), so the answer would depend on what ran earlier.
    ctx = z3.Context()
    s = z3.Solver(ctx=ctx)
    s.set("timeout", int(timeout_ms))
    for a in assertions:
        s.add(a.translate(ctx))
    text = "".join(f"; {c}\n" for c in comments for c in c.splitlines()) + normalize_smt(s.to_smt2())
    t0 = time.perf_counter()
    res = s.check()
    dt = time.perf_counter() - t0
    model = s.model().translate(assertions[0].ctx) if res == z3.sat else None
    return Solved(str(res), text, dt, model, s.reason_unknown() if res == z3.unknown else None)


def replay(smtlib: str, *, timeout_ms: int = TIMEOUT_MS) -> str:
    """Solve recorded SMT-LIB text afresh: "unsat", "sat" or "unknown"."""
    s = z3.Solver(ctx=z3.Context())
    s.set("timeout", int(timeout_ms))
    s.from_string(smtlib)
    return str(s.check())


def result_of(status: str) -> str:
    """The outcome a solver answer gives: unsat proves the claim, sat refutes it."""
    return {"unsat": "proved", "sat": "refuted"}.get(status, "unknown")


def fixed_false(terms: list, *, identity: bool = False) -> bool:
    """Whether the conjunction of ``terms`` is false by the constants Python put in it,
    before any reasoning: a literal ``False`` and its Boolean combinations (``And(ok,
    False)``). A query built from such a claim has its answer fixed in Python (the ``if``
    that chose the constant decided it), so it proves nothing. With ``identity``, also
    ``t != t`` and ``not (t == t)`` for syntactically identical terms (symbolic evaluation
    that built one term twice); ``z3.simplify`` is never used: its theory rewrites are the
    solver's work."""
    return any(_ident(t, identity) is False for t in terms)


def _ident(t, identity: bool):
    """True / False when ``t`` is decided by its constants (and, with ``identity``, by term
    identity) alone, else None."""
    if z3.is_true(t):
        return True
    if z3.is_false(t):
        return False
    if z3.is_not(t):
        v = _ident(t.arg(0), identity)
        return None if v is None else not v
    if z3.is_and(t) or z3.is_or(t):
        vals = [_ident(c, identity) for c in t.children()]
        if z3.is_and(t):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    if identity and z3.is_eq(t) and z3.eq(t.arg(0), t.arg(1)):
        return True
    if identity and z3.is_distinct(t) and t.num_args() == 2 and z3.eq(t.arg(0), t.arg(1)):
        return False
    return None


def model_text(model, limit: int = 8) -> str:
    """The constants of a model, in words (``h.shape[1] = 3, s[i] = nan``)."""
    if model is None:
        return ""
    parts = []
    for d in model.decls():
        if d.arity() != 0:
            continue
        txt = fmt_value(model[d])
        if txt is None:
            continue
        parts.append(f"{d.name()} = {txt}")
    parts.sort(key=lambda p: (p.startswith("_"), p.startswith("<"), p))
    return ", ".join(parts[:limit])


def fmt_value(v) -> str | None:
    try:
        if z3.is_fp_value(v):
            if v.isNaN():
                return "nan"
            if v.isInf():
                return "-inf" if v.isNegative() else "inf"
            if v.isZero():
                return "-0.0" if v.isNegative() else "0.0"
            r = z3.simplify(z3.fpToReal(v))
            return repr(float(r.numerator_as_long()) / float(r.denominator_as_long()))
        if z3.is_int_value(v):
            return str(v.as_long())
        if z3.is_bv_value(v):
            return str(v.as_signed_long())
        if z3.is_true(v) or z3.is_false(v):
            return str(z3.is_true(v))
        if isinstance(v.sort(), z3.DatatypeSortRef):   # an enumeration value (DType)
            return str(v)
    except Exception:  # noqa: BLE001
        return str(v)
    return None
