"""The verification levels: what a candidate's obligations must show to be emitted.

* every level: a kind with no encoder declines (fail closed); the kinds the caller marks
  ``required`` (a rule's ``required_kinds``) must be established -- ``proved``, or
  ``checked`` where the encoder is a check -- fast included;
* ``fast``: only the required kinds are discharged;
* ``standard``: nothing refuted (a refuted ``finite-gradient`` makes the rewrite
  inference-only instead); unknown passes (a timeout, an uncovered op), except no encoding;
* ``strict``: every obligation ``proved``, or ``checked`` by what the result names (listed
  in the verification record as ``checked``: kind, checked_by, lemmas); unknown declines.

Entry point: :func:`prove` (facts, discharge, verdict). The verifier never names a rule:
the caller passes ``required`` and ``needs_facts``.
"""
from __future__ import annotations

import time
from typing import Callable

from verifier.discharge import discharge, no_encoding
from verifier.encoders import KINDS, OBSERVED
from verifier.smt import TIMEOUT_MS, solver_version

LEVELS = ("fast", "standard", "strict")
STRICT_MIN_EXAMPLES = 20
STRICT_MIN_EXAMPLES_INSTALLED = 8
ESTABLISHED = ("proved", "checked")


def _more(items: list, n: int) -> str:
    return f" (+{len(items) - n} more)" if len(items) > n else ""


def verdict(results: list[dict], level: str, *, required=frozenset()) -> tuple[bool, str | None, str]:
    """(accepted, reason when declined, use) for a discharged rewrite at ``level``."""
    use = "inference-only" if any(r["kind"] == "finite-gradient" and r["result"] == "refuted" for r in results) \
        else "training and inference"
    unencoded = [r for r in results if r["kind"] not in KINDS]
    if unencoded:
        return False, f"not encoded ({level}): " + "; ".join(_why(r) for r in unencoded[:4]) + _more(unencoded, 4), use
    must = [r for r in results if r["kind"] in required and r["result"] not in ESTABLISHED]
    if must:
        return False, f"required at every level ({level}): " + "; ".join(_why(r) for r in must[:4]) + _more(must, 4), use
    if level == "fast":
        return True, None, use
    if level == "strict":
        bad = [r for r in results if r["result"] not in ESTABLISHED]
        if bad:
            return False, "strict: " + "; ".join(_why(r) for r in bad[:4]) + _more(bad, 4), use
        return True, None, use
    bad = [r for r in results if r["result"] == "refuted" and r["kind"] != "finite-gradient"]
    if bad:
        return False, "; ".join(_why(r) for r in bad[:3]), use
    return True, None, use


def _why(r: dict) -> str:
    what = r.get("lhs") and f" `{r['lhs']}` vs `{r['rhs']}`" or (r.get("expr") and f" `{r['expr']}`") or \
        (r.get("pred") and f" `{r['pred']}`") or ""
    if r["result"] == "refuted":
        extra = f"; counterexample: {r['counterexample']}" if r.get("counterexample") else ""
        if r["kind"] == "finite-gradient":
            extra += " (inference-only)"
        return f"obligation {r['kind']}{what} refuted{extra}"
    return f"obligation {r['kind']}{what} unknown ({r.get('reason') or 'not decided'})"


def failed_kinds(results: list[dict], level: str, *, required=frozenset()) -> list[str]:
    """The kinds that keep a candidate from ``level`` (refuted at standard, not established
    at strict; required kinds not established and kinds without an encoder at every level)."""
    bad = ("refuted",) if level == "standard" else ("refuted", "unknown")
    return [r["kind"] for r in results
            if r["kind"] not in KINDS or (level != "fast" and r["result"] in bad)
            or (r["kind"] in required and r["result"] not in ESTABLISHED)]


# proof tiers whose premises are facts of the example run or an assumption on the inputs
CONDITIONAL_TIERS = {"equal-sizes": "the example's equal sizes stay equal", "observed": "the example's sizes, dtypes, values and layouts",
                     "finite-leaves": "finite leaf values"}
SAFE, UNSAFE = "safe", "unsafe"
# checks that hold as stated but leave a documented difference, which a safe fix may not have
CAVEATS = {"anomaly-keeps-original": "the original if runs under anomaly detection enabled during the forward call "
                                     "only: enabled around backward() alone (or compiled with backend='eager'), the "
                                     "gated side's backward step still returns NaN and anomaly detection raises where "
                                     "the original's did not (helper-104)"}


def fix_safety(results: list[dict], evidence: dict | None, use: str = "training and inference") -> dict:
    """The fix safety of a verified rewrite (issue 10, after ruff's fix applicability):
    ``{"label": "safe" | "unsafe", "reasons": [...]}``.

    ``safe``: every obligation ``proved`` unconditionally (a general tier) or ``checked`` by
    a screen of the code or a cited lemma, the differential test bit-exact in eager, outputs
    and gradients, and usable in training. ``unsafe`` -- applied only with
    ``--unsafe-fixes`` -- names what it rests on: an obligation unknown; a proof whose
    premises are facts of the example run (:data:`CONDITIONAL_TIERS`); a check that is an
    observation (``verifier.encoders.OBSERVED``); gradients equal only within tolerance
    (``evidence["max_gradient_error"]``, s.a. :func:`verifier.differential.gradient_tolerance`);
    inference-only use."""
    reasons = []
    for r in results:
        kind, res = r["kind"], r["result"]
        if res == "unknown":
            reasons.append(f"{kind} is unknown ({r.get('reason') or 'not decided'})")
        elif res in ("proved", "checked") and r.get("tier") in CONDITIONAL_TIERS:
            # `checked` at a conditional tier: the encoding is trivially true only with its premises
            reasons.append(f"{kind} is {res} assuming {CONDITIONAL_TIERS[r['tier']]} (tier {r['tier']})")
        elif res == "checked" and kind in CAVEATS:
            reasons.append(CAVEATS[kind])
        elif res == "checked" and kind in OBSERVED:
            reasons.append(f"{kind} rests on an observation, not a proof ({r.get('checked_by') or 'observed'})")
        elif res == "refuted" and kind != "finite-gradient":
            reasons.append(f"{kind} is refuted")
    if use == "inference-only":
        reasons.append("inference-only: a gradient may be non-finite where the original's is finite")
    err = (evidence or {}).get("max_gradient_error") or 0.0
    if err:
        reasons.append(f"gradients agree within tolerance, not bit-exact (largest difference {err:.3g})")
    return {"label": UNSAFE if reasons else SAFE, "reasons": reasons}


def checked_list(results: list[dict]) -> list[dict]:
    """What the verification record lists as checked (not proved): kind, checked_by, lemmas."""
    return [{"kind": r["kind"], "checked_by": r.get("checked_by"), **({"lemmas": r["lemmas"]} if r.get("lemmas") else {})}
            for r in results if r["result"] == "checked"]


def check_rewrite(obligations: list[dict], *, level: str, before: str, code: str, facts: dict | None,
                  defs: dict | None, required=frozenset(), timeout_ms: int = TIMEOUT_MS) -> dict:
    """Discharge and judge one candidate: ``{"obligations", "accepted", "reason", "use", "seconds"}``."""
    t0 = time.perf_counter()
    if level == "fast":
        todo = [dict(o) for o in obligations]
        done = iter(discharge([o for o in todo if o["kind"] in required], facts=facts, code=code, before=before,
                              defs=defs, timeout_ms=timeout_ms) if required else [])
        results = []
        for o in todo:
            if o["kind"] in required:
                results.append(next(done))
            else:
                res = no_encoding(o["kind"]).to_json() if o["kind"] not in KINDS else {
                    "result": "unknown", "status": None, "smtlib": None, "assumptions": [],
                    "reason": "not discharged (--verify fast)"}
                results.append({**o, **res, "solver": solver_version(), "timeout_ms": timeout_ms})
    else:
        results = discharge(obligations, facts=facts, code=code, before=before, defs=defs, timeout_ms=timeout_ms)
    ok, reason, use = verdict(results, level, required=required)
    return {"obligations": results, "accepted": ok, "reason": reason, "use": use,
            "seconds": round(time.perf_counter() - t0, 3)}


def prove(obligations: list[dict], *, level: str, before: str, code: str,
          facts_fn: Callable[[], tuple[dict, dict]], required=frozenset(), needs_facts: bool = True,
          timeout_ms: int = TIMEOUT_MS) -> dict:
    """Facts (when ``needs_facts`` and the level discharges anything), discharge, verdict.

    ``required``: the kinds that must be established at every level; ``needs_facts``: the
    obligations read facts from a run of the candidate (``facts_fn() -> (facts, defs)``).
    Returns check_rewrite's dict plus ``verification`` (level, use, solver, seconds, facts,
    defs, checked: what a certificate records) and ``failed`` (the kinds that decline or
    would decline at ``level``).
    """
    t0 = time.perf_counter()
    required = frozenset(required)
    facts, defs = {"names": {}, "self": {}}, {}
    # at fast only the required kinds this rewrite carries are discharged: no run without one
    if needs_facts and (level != "fast" or required & {o.get("kind") for o in obligations}):
        try:
            facts, defs = facts_fn()
        except Exception as exc:  # noqa: BLE001 - no facts: the obligations needing them stay unknown
            facts = {"names": {}, "self": {}, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    out = check_rewrite(obligations, level=level, before=before, code=code, facts=facts, defs=defs,
                        required=required, timeout_ms=timeout_ms)
    out["verification"] = {"level": level, "use": out["use"], "solver": solver_version(),
                           "seconds": round(time.perf_counter() - t0, 3), "facts": facts, "defs": defs,
                           "checked": checked_list(out["obligations"])}
    out["failed"] = failed_kinds(out["obligations"], level, required=required)
    return out


def examples_for(level: str, requested: int, installed: bool) -> int:
    """Hypothesis examples per candidate at ``level``: strict raises it to its stated
    minimum, fast caps it at 5."""
    if level == "strict":
        return max(requested, STRICT_MIN_EXAMPLES_INSTALLED if installed else STRICT_MIN_EXAMPLES)
    if level == "fast":
        return min(requested, 5)
    return requested
