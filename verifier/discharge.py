"""Discharge obligations: record what each encoding reads from the mended file in the
obligation itself (:func:`enrich`), run each kind's encoder (:mod:`verifier.encoders`),
and return each obligation with its typed outcome (:class:`verifier.outcomes.Outcome`)
as JSON: its own data plus the result fields (``RESULT_FIELDS``)."""
from __future__ import annotations

import time

import z3

from verifier.encoders import KINDS, Ctx
from verifier.encoders.assert_async import assert_async_references, trap_entry
from verifier.outcomes import Outcome, unknown
from verifier.smt import TIMEOUT_MS, Unsupported, solver_version

# the fields discharge adds to an obligation; the rest is the obligation's own data
RESULT_FIELDS = ("result", "status", "smtlib", "assumptions", "tier", "arithmetic", "seconds", "solver_seconds",
                 "counterexample", "reason", "solver", "timeout_ms", "use", "checked_by", "lemmas", "lemma_sha256")


def no_encoding(kind: str) -> Outcome:
    return unknown(f"no encoding for obligations of kind `{kind}` (declined at every level)")


def enrich(obligations: list[dict], code: str | None) -> list[dict]:
    """Record what an obligation's encoding reads from the mended file in the obligation
    itself (trap table entry, number of checks, in-place writes), so that a certificate can
    be re-encoded from its own data."""
    if code is None:
        return obligations
    from verifier.effects import inplace_writes_to

    first = next((o for o in obligations if o.get("kind") == "raises-iff-original"), None)
    out = []
    for ob in obligations:
        ob = dict(ob)
        k = ob["kind"]
        if k in ("raises-iff-original", "restore-at-boundary") and first is not None:
            ob.setdefault("trap", first.get("trap"))
            entry = trap_entry(code, ob.get("trap") or "")
            ob.setdefault("restored", list(entry) if entry else None)
        elif k == "condition-is-tensor" and first is not None:
            ob.setdefault("asserts", first.get("asserts"))
        elif k == "first-failure-wins":
            ob.setdefault("checks_in_file", assert_async_references(code))
        elif k == "paired-call-value-not-aliased":
            targets = [v for v in ob.get("values", []) if v.startswith("self.")]
            ob.setdefault("inplace_writes", inplace_writes_to(code, targets + [ob.get("call", "").split("(")[0]]))
        out.append(ob)
    return out


def obligation_data(result: dict) -> dict:
    """An obligation as the rule (and :func:`enrich`) stated it, without its result."""
    return {k: v for k, v in result.items() if k not in RESULT_FIELDS}


def discharge_one(ob: dict, ctx: Ctx) -> Outcome:
    """The outcome of one (enriched) obligation: its kind's encoder, or unknown when the kind
    has no encoding or the encoding does not cover it."""
    fn = KINDS.get(ob.get("kind"))
    if fn is None:
        return no_encoding(ob.get("kind"))
    try:
        return fn(ob, ctx)
    except Unsupported as exc:
        return unknown(str(exc))
    except z3.Z3Exception as exc:
        return unknown(f"encoding failed: {exc}")


def discharge(obligations: list[dict], *, facts: dict | None, code: str | None = None, before: str | None = None,
              defs: dict | None = None, timeout_ms: int = TIMEOUT_MS) -> list[dict]:
    """Each obligation with its outcome, SMT-LIB query (solver outcomes) or what checked it,
    and its assumptions."""
    ctx = Ctx(facts or {"names": {}, "self": {}}, defs or {}, code, before, timeout_ms, obligations)
    out = []
    for ob in enrich(obligations, code):
        t0 = time.perf_counter()
        res = discharge_one(ob, ctx).to_json()
        res["solver_seconds"] = res.get("seconds") or 0.0
        res["seconds"] = round(time.perf_counter() - t0, 4)     # encoding and solving
        out.append({**ob, **res, "solver": solver_version(), "timeout_ms": timeout_ms})
    return out
