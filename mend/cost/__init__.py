"""Choosing among verified candidates of one site by predicted cost (issue 12).

A data-dependent branch can stay a graph break (``keep``), become ``torch.where`` or
``torch.cond``. The verifier decides which rewrites are legal; this package only ranks the
ones it accepted, and keeping the break is always a candidate. Methods (``--choose``):

* ``model`` (default): the learned pairwise ranker (:mod:`mend.cost.ranker`, artifact
  ``model.json``); it falls back to ``roofline`` when a part of the site could not be
  observed or the device is not the one the model was trained on;
* ``roofline``: :mod:`mend.cost.roofline` with this machine's measured peaks;
* ``always``: GraphMend's policy, the rule's own rewrite whenever one verified;
* ``measure``: time the two best-ranked candidates on the user's inputs (the pipeline
  does the timing and calls :func:`decide_measured`).

Sources: TpuGraphs (Phothilimthana et al., NeurIPS 2023 Datasets and Benchmarks), the
Kaggle "Google - Fast or Slow?" winners, Inductor's AutoHeuristic.
"""
from __future__ import annotations

from mend.cost.features import CANDIDATES, complete
from mend.cost.ranker import invalid, load_model, scores
from mend.cost.roofline import estimate, peaks

METHODS = ("model", "roofline", "always", "measure")

__all__ = ["CANDIDATES", "METHODS", "choose", "decide_measured"]


def _entry(name: str, verified: bool | None, note: str | None = None) -> dict:
    out = {"name": name, "verified": verified, "predicted_ms": None, "roofline_ms": None}
    if note:
        out["note"] = note
    return out


def choose(obs: dict | None, verified: list[str], default: str, method: str = "model", *,
           declined: dict[str, str] | None = None, local_peaks: dict | None = None,
           unobserved: str | None = None, skips_frame: bool = False) -> dict:
    """Pick one of ``["keep", *verified]`` for a site.

    ``obs``: the site observation (:mod:`mend.cost.features`), None when none was made (at
    ``--verify fast`` no run observes the site). ``verified``: the rewrites the verifier
    accepted (``"where"``, ``"cond"``); ``default``: the rule's own choice among them (what
    ``always`` takes). ``declined``: candidates the verifier or the rule refused, with why.
    ``unobserved``: why ``obs`` is None, when the caller knows (the default blames
    ``--verify fast``). ``local_peaks``: the roofline peaks to use (default: for ``model``, those of the
    machine the model's data came from; for ``roofline``, this machine's, measured once
    and cached by :func:`mend.cost.roofline.peaks`). Returns the JSON record of the choice::

        {"method": used, "chosen": name, "reason": str,
         "candidates": [{"name", "verified", "predicted_ms", "roofline_ms", "score"?, "note"?}]}

    ``predicted_ms`` is the learned model's predicted time of the site (ms; a ``pairwise``
    model gives a ``score`` instead, lower is faster); ``roofline_ms`` the roofline
    estimate of the site alone (ms). For
    ``measure`` the record ranks the candidates and sets ``"measure": [two names]``; the
    caller times them and calls :func:`decide_measured`. ``skips_frame``: the break sits in a
    loop, so Dynamo skips the whole frame and runs it eagerly (``graph_count`` 0): keeping it
    costs the frame's compilation, which the site's own counts do not see, so ``keep`` is not
    ranked against a verified rewrite (issue 10, kind 9: fix the root cause so the frame
    compiles again). Raises ValueError for an unknown method.
    """
    if method not in METHODS:
        raise ValueError(f"--choose {method}: choose one of {', '.join(METHODS)}")
    names = ["keep", *[n for n in CANDIDATES if n in verified]]
    entries = {n: _entry(n, True if n != "keep" else None) for n in names}
    for n, why in (declined or {}).items():
        if n not in entries:
            entries[n] = _entry(n, False, why)
    record = {"method": method, "chosen": None, "reason": "", "candidates": []}

    def done(chosen: str, reason: str, used: str | None = None) -> dict:
        record["chosen"], record["reason"] = chosen, reason
        if used:
            record["method"] = used
        record["candidates"] = [entries[n] for n in CANDIDATES if n in entries]
        return record

    if len(names) == 1 and (obs is None or method == "always"):
        return done("keep", "no rewrite of this site verified, so the graph break stays")
    if skips_frame and len(names) > 1:
        entries["keep"]["note"] = ("not ranked: the break is in a loop, so Dynamo skips the whole frame and runs it "
                                   "eagerly; keeping it costs the frame's compilation, which the site's counts miss")
        names = names[1:]
        if len(names) == 1:
            return done(names[0], f"the only verified rewrite ({names[0]}); {entries['keep']['note']}")
    if method == "always":
        pick = default if default in names else names[1]
        return done(pick, f"--choose always: the rule's rewrite ({pick}) whenever it verified (GraphMend's policy)")
    if obs is None:
        pick = default if default in names else names[1]
        why = unobserved or "the site was not observed (no facts run at --verify fast)"
        return done(pick, f"{why}, so no cost could be predicted; the rule's rewrite ({pick}) is emitted",
                    used="always")
    device = obs.get("device") or "cpu"
    model = load_model() if method in ("model", "measure") else None
    unusable = invalid(model) if model is not None else None
    if unusable:
        model = None
    # the model's own roofline uses the peaks of the machine its data came from, so a
    # default run never times anything and chooses the same on every machine
    lp = local_peaks or (model["peaks"] if model and device in model.get("devices", ["cpu"]) else peaks(device))
    for n in names:
        entries[n]["roofline_ms"] = round(estimate(obs, n, lp) * 1e3, 6)
    why_not = None
    if model is None and method != "roofline":
        why_not = f"the cost model artifact is unusable: {unusable}" if unusable else "the cost model artifact is missing"
    elif model is not None and not complete(obs):
        why_not = "a part of the site could not be evaluated on fake tensors"
    elif model is not None and device not in model.get("devices", ["cpu"]):
        why_not = f"the model was trained on {', '.join(model.get('devices', ['cpu']))}, not {device}"
    if len(names) == 1:  # keep's own prediction stays on record beside the refused forms
        if method == "roofline" or why_not:
            record["method"] = "roofline"
        else:
            sc = scores(model, obs, names)
            entries["keep"]["predicted_ms" if model["kind"] == "regression" else "score"] = round(sc["keep"], 6)
        return done("keep", "no rewrite of this site verified, so the graph break stays")
    if method == "roofline" or why_not:
        ranked = sorted(names, key=lambda n: (entries[n]["roofline_ms"], CANDIDATES.index(n)))
        fall = f"{why_not}, so the roofline decides: " if why_not else ""
        rec = done(ranked[0], fall + _explain(ranked, entries, "roofline_ms", "ms"), used="roofline")
    else:
        sc = scores(model, obs, names)
        key, unit = ("predicted_ms", "ms") if model["kind"] == "regression" else ("score", "")
        for n in names:
            entries[n][key] = round(sc[n], 6)
        ranked = sorted(names, key=lambda n: (sc[n], CANDIDATES.index(n)))
        rec = done(ranked[0], f"the cost model ({model['kind']}) predicts " + _explain(ranked, entries, key, unit),
                   used="model")
    if method == "measure":
        rec["method"] = "measure"
        rec["measure"] = ranked[:2]
    return rec


def _explain(ranked: list[str], entries: dict, key: str, unit: str) -> str:
    parts = [f"{n} {entries[n][key]:.4g}{' ' + unit if unit else ''}" for n in ranked]
    what = "ranking scores, lower is faster: " if key == "score" else ""
    return f"{ranked[0]} cheapest ({what}{'; '.join(parts)})"


def decide_measured(record: dict, times_ms: dict[str, float]) -> dict:
    """``record`` (from :func:`choose` with ``measure``) after the caller timed its two
    candidates on the user's inputs (``times_ms``: median steady-state ms per call): the
    measured faster one wins, whatever was predicted."""
    for e in record["candidates"]:
        if e["name"] in times_ms:
            e["measured_ms"] = round(times_ms[e["name"]], 6)
    best = min(times_ms, key=lambda n: (times_ms[n], CANDIDATES.index(n)))
    parts = "; ".join(f"{n} {times_ms[n]:.4g} ms" for n in sorted(times_ms, key=times_ms.get))
    override = "" if best == record["chosen"] else f" (the prediction was {record['chosen']})"
    record["chosen"] = best
    record["reason"] = f"measured on the target's inputs: {best} fastest ({parts}){override}"
    return record
