"""Choosing one rewrite of a branch site: keep the graph break, ``torch.where`` or ``torch.cond``.

The verifier decides which candidates are legal; :func:`mend.cost.choose` ranks only those
(keeping the break is always one). The rule's own rewrite is verified first, as without a
choice; an alternative form (``Rule.alternatives``) is verified only when the cost model,
given the candidates verified so far and the alternative as if verified, would pick it (or,
for ``measure``, time it). Scores are per candidate, so the choice is the one that verifying
every candidate first and choosing then gives. What was not verified is recorded with why.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import libcst as cst

from mend.cost import CANDIDATES, choose, decide_measured
from mend.pipeline.records import Declined, Rewrite
from mend.rules import Decline

UNSAFE = "an unsafe fix, verified but not applied without --unsafe-fixes: "


@dataclass
class Verified:
    """One candidate after verification: ``outcome`` ``(Rewrite, code)`` or a Declined;
    ``costs`` what the facts run counted (``verification.facts.costs``, taken out of the
    facts), ``devices`` the model's devices, ``staged`` the executor's staging of it."""

    outcome: tuple[Rewrite, str] | Declined
    costs: dict | None = None
    devices: list[str] | None = None
    staged: dict | None = None


def observation(v: Verified) -> dict | None:
    """The site observation :func:`mend.cost.choose` reads, from a verified candidate's
    counts (None when the facts run counted nothing)."""
    c = v.costs
    if not c or c.get("pred") is None or not c.get("sides"):
        return None
    return {"pred": c["pred"], "sides": c["sides"], "p_true": None,
            "device": "cuda" if "cuda" in (v.devices or []) else "cpu"}


def _refusal(v: Verified, unsafe_fixes: bool) -> Declined | None:
    """Why the candidate cannot be emitted: the verifier declined it, or it is unsafe and
    --unsafe-fixes is off (today's withheld record), else None."""
    if isinstance(v.outcome, Declined):
        return v.outcome
    rw = v.outcome[0]
    if rw.safety["label"] != "safe" and not unsafe_fixes:
        return Declined.withheld(rw.site, rw.rule, UNSAFE, rw.safety)
    return None


def _refusals(refused: dict[str, Declined], own: str, ruled: dict[str, str] | None = None) -> Declined:
    """The site's decline when every candidate was refused: a withheld unsafe fix first (it
    applies with --unsafe-fixes, which the user should hear), else the rule's own form's; the
    other forms' reasons follow it, each named (helper-102's m45: only torch.cond's dtype
    counterexample was shown, not that torch.where's untaken ``x // d`` divides by zero). ``ruled``:
    the forms the rule declined before verification, with why (helper-104), said last."""
    order = sorted(refused, key=lambda f: (refused[f].safety != "unsafe", f != own))
    first = refused[order[0]]
    others = [f"torch.{f}: {refused[f].reason}" for f in order[1:]] + [f"torch.{f}: {why}" for f, why in
                                                                        sorted((ruled or {}).items())]
    if not others:
        return first
    rest = "; ".join(others)
    return dataclasses.replace(first, reason=f"torch.{order[0]}: {first.reason}; also declined, {rest}")


def _unobserved(res, verify: str) -> str | None:
    """Why the site was not observed when that is not ``--verify fast`` (choose's default)."""
    if verify == "fast":
        return None
    if res.cost_parts is None:
        return ("the rule does not split this site into one predicate and two sides (an elif chain, a Python-level "
                "guard, hoisted setup or a paired call)")
    return "the example run did not reach the site's parts, so they could not be counted"


def choose_rewrite(verify_fn, ex, rule, site, current: str, res, first: Verified, *, where: str, rel: str,
                   files: dict[str, str], method: str, verify: str, unsafe_fixes: bool):
    """The site's outcome after choosing among keep and its verified rewrites:
    ``(Rewrite with choice, mended text)``, or a Declined (with ``choice``) when the break
    is kept. ``first``: the rule's own candidate ``res``, verified; ``verify_fn(res, form)``
    verifies an alternative (staging it in ``ex``)."""
    module = cst.parse_module(current)
    cands = {res.form: res}
    for alt in rule.alternatives(module, site.line):
        if alt.form in CANDIDATES and alt.form not in cands:
            cands[alt.form] = alt
    declined: dict[str, str] = {}
    for form in CANDIDATES[1:]:
        if form not in cands:
            other = rule.rewrite(module, site.line, form=form)
            if isinstance(other, Decline):
                declined[form] = f"the rule declines it: {other.reason}"
    done: dict[str, Verified] = {}
    refused: dict[str, Declined] = {}
    obs = None
    skips = bool(getattr(site, "frame_skipped", False))

    def record(form: str, v: Verified) -> None:
        nonlocal obs
        done[form] = v
        obs = obs or observation(v)
        why = _refusal(v, unsafe_fixes)
        if why is not None:
            refused[form], declined[form] = why, why.reason

    def ok() -> list[str]:
        return [f for f in done if f not in refused]

    record(res.form, first)
    unverified: dict[str, dict] = {}
    for form in [f for f in cands if f not in done]:
        pretend = choose(obs, ok() + [form], res.form, method, declined=declined, unobserved=_unobserved(res, verify),
                         skips_frame=skips)
        if pretend["chosen"] == form or form in (pretend.get("measure") or []):
            record(form, verify_fn(cands[form], form))
        else:
            entry = dict(next(e for e in pretend["candidates"] if e["name"] == form))
            entry.update(verified=None, note=f"not verified: predicted slower than {pretend['chosen']}"
                         if pretend["method"] != "always" else
                         f"not verified: the rule's rewrite ({pretend['chosen']}) is taken without a prediction")
            unverified[form] = entry
    rec = choose(obs, ok(), res.form, method, declined=declined, unobserved=_unobserved(res, verify), skips_frame=skips)
    if unverified:
        rec["candidates"] = sorted([*rec["candidates"], *unverified.values()], key=lambda e: CANDIDATES.index(e["name"]))
    if rec.get("measure") and len(rec["measure"]) == 2:
        codes = {n: current if n == "keep" else done[n].outcome[1] for n in rec["measure"]}
        try:
            rec = decide_measured(rec, ex.time_candidates(rel, codes, files))
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot be timed: the prediction stands
            rec["reason"] += f"; timing failed ({type(exc).__name__}: {str(exc)[:120]}), so the prediction stands"
    for e in rec["candidates"]:  # withheld (unsafe without --unsafe-fixes): say so, and whether it was tested
        why = refused.get(e["name"])
        if why is not None and why.safety == "unsafe":
            if why.reason.startswith(UNSAFE):
                e.update(verified=True, withheld=True)
            else:  # withheld before its differential test (mend.pipeline._verify)
                e.update(verified=None, withheld=True, note="an unsafe fix by its obligations: not tested or applied "
                                                            "without --unsafe-fixes")
    chosen = rec["chosen"]
    if chosen == "keep":
        if not ok() and not unverified:  # nothing verified, nothing left untried: every refusal, said
            ruled = {f: why for f, why in declined.items() if f not in refused}   # forms the rule itself declined
            return dataclasses.replace(_refusals(refused, res.form, ruled), choice=rec)
        if not ok():  # the rule's form was refused; the other was predicted slower than keep
            slower = ", ".join(sorted(unverified))
            why = refused.get(res.form) or next(iter(refused.values()))
            rec["reason"] = (f"{slower} predicted slower than keeping the break, so not verified; the rule's "
                             f"{res.form} was not emitted: {why.reason}")
        return Declined(where, site.fixable_by, f"kept the graph break: {rec['reason']}", choice=rec)
    v = done[chosen]
    if v.staged is not None:  # an alternative may have been staged after it
        ex.restore(v.staged)
    rw, code = v.outcome
    return dataclasses.replace(rw, choice=rec), code
