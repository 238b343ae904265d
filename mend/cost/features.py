"""Features of the candidates of one branch site, from a site observation.

A **site observation** (JSON) is what :mod:`verifier.opcount` saw of the branch's parts,
evaluated on fake tensors where the branch runs::

    {"pred": counts, "sides": [counts of the true side, counts of the false side],
     "p_true": float | None,   # taken-branch frequency, when observed
     "device": "cpu" | "cuda"}

``counts`` is :func:`verifier.opcount.count`'s dict (``flops`` and ``flops_by_dtype``,
``bytes`` and ``bytes_by_category``, ``out_bytes``, ``ops`` by category); a part that could
not be evaluated has ``flops: None``: the site is then not :func:`complete`, and the
learned model is not used on it (the roofline decides).

Candidates: ``keep`` (the graph break stays: the predicate is synced to the host, then the
taken side runs in a second graph), ``where`` (both sides run, one graph, a select per
output) and ``cond`` (``torch.cond``: one graph, the taken side runs). :func:`totals`
gives each candidate's work for the roofline (FLOPs, bytes, graphs, host syncs);
:func:`work` its feature vector for the learned model (work by operator category and
dtype, and which candidate it is).
"""
from __future__ import annotations

CANDIDATES = ("keep", "where", "cond")
FEATURES = ("keep", "where", "cond", "mm_gflop_f32", "mm_gflop_low", "pointwise_gb", "reduction_gb", "copy_gb",
            "select_gb", "boundary_gb", "low_precision_gb", "matmul_calls", "matmul_calls_low")


def _num(counts: dict | None, key: str) -> float | None:
    if not counts or counts.get(key) is None:
        return None
    return float(counts[key])


def complete(obs: dict) -> bool:
    """Every part of the site was counted."""
    parts = [obs.get("pred"), *(obs.get("sides") or [])]
    return len(parts) == 3 and all(_num(p, "bytes") is not None for p in parts)


def _parts(obs: dict, name: str) -> tuple[float, list[tuple[dict, float]]]:
    """``(p, [(counts, runs), ...])`` for the predicate and the two sides: ``runs`` is how
    often candidate ``name`` runs the part -- the predicate always, each side always under
    ``where`` and by the taken-branch frequency ``p`` (0.5 when not observed) otherwise."""
    p = obs.get("p_true")
    p = 0.5 if p is None else float(p)
    t, f = obs.get("sides") or [None, None]
    both = name == "where"
    return p, [(obs.get("pred") or {}, 1.0), (t or {}, 1.0 if both else p), (f or {}, 1.0 if both else 1 - p)]


def totals(obs: dict, name: str) -> dict:
    """The work of candidate ``name`` on the site: ``{"flops", "flops_by_dtype", "bytes",
    "graphs", "syncs", "conds"}``; missing parts count 0 (:func:`complete` says whether any is)."""
    p, parts = _parts(obs, name)
    (pred, _), (t, wt), (f, wf) = parts
    get = lambda c, k: _num(c, k) or 0.0
    out = {k: get(pred, k) + (wt * get(t, k) + wf * get(f, k)) for k in ("flops", "bytes")}
    if name == "where":  # the select reads both values and writes one
        out["bytes"] += 3 * max(get(t, "out_bytes"), get(f, "out_bytes"))
    if name == "cond":   # the taken branch's output is materialised as the cond's result
        out["bytes"] += p * get(t, "out_bytes") + (1 - p) * get(f, "out_bytes")
    by: dict[str, float] = {}
    for c, runs in parts:
        for d, v in (c.get("flops_by_dtype") or {}).items():
            by[d] = by.get(d, 0.0) + runs * v
    out["flops_by_dtype"] = by
    out["graphs"] = 2 if name == "keep" else 1
    out["syncs"] = 1 if name == "keep" else 0
    out["conds"] = 1 if name == "cond" else 0
    return out


def work(obs: dict, name: str) -> dict[str, float]:
    """Candidate ``name``'s work on the site, the learned model's inputs (order: FEATURES).

    Units: the indicators are 1.0 for the candidate itself (their weights are its fixed
    cost: launches, the host sync of a break, the cond's dispatch); FLOPs in GFLOP, bytes
    in GB (so fitted weights are in ms per unit). A side's work is weighted by how often it
    runs: always under ``where``, with the taken-branch frequency under ``keep`` and
    ``cond`` (0.5 when not observed)."""
    p, parts = _parts(obs, name)
    t, f = parts[1][0], parts[2][0]
    vec = dict.fromkeys(FEATURES, 0.0)
    vec[name] = 1.0
    for c, runs in parts:
        for d, v in (c.get("flops_by_dtype") or {}).items():
            key = "mm_gflop_low" if d in ("bfloat16", "float16") else "mm_gflop_f32"
            vec[key] += runs * v / 1e9
        vec["low_precision_gb"] += runs * c.get("bytes_low_precision", 0) / 1e9
        # each matmul is its own (extern) kernel, with a fixed cost; a low-precision one more so on CPU
        calls = float((c.get("ops") or {}).get("matmul", 0))
        low = any(d in ("bfloat16", "float16") for d in (c.get("flops_by_dtype") or {}))
        vec["matmul_calls_low" if low else "matmul_calls"] += runs * calls
        cats = c.get("bytes_by_category") or {}
        vec["pointwise_gb"] += runs * cats.get("pointwise", 0) / 1e9
        vec["reduction_gb"] += runs * cats.get("reduction", 0) / 1e9
        vec["copy_gb"] += runs * (cats.get("copy", 0) + cats.get("other", 0) + cats.get("matmul", 0)) / 1e9
    outs = [float(t.get("out_bytes") or 0), float(f.get("out_bytes") or 0)]
    if name == "keep":  # the break materialises the branch's input and output (no fusion across it)
        vec["boundary_gb"] = 2 * max(outs) / 1e9
    if name == "where":
        vec["select_gb"] = 3 * max(outs) / 1e9
    elif name == "cond":
        vec["select_gb"] = (p * outs[0] + (1 - p) * outs[1]) / 1e9
    return vec


def vector(obs: dict, name: str) -> list[float]:
    """:func:`work` as a list in FEATURES order."""
    v = work(obs, name)
    return [v[k] for k in FEATURES]
