"""The learned part of the cost model: a linear cost model over candidate work, fitted two ways.

Each candidate ``c`` of a site has a work vector ``phi(c)`` (:func:`mend.cost.features.work`:
which candidate it is, matmul GFLOP by dtype, GB moved by operator category, the select's
bytes). The model predicts ``t(c) = theta . phi(c)`` (ms) and ranks the site's candidates
by it. Two fitters (both in plain torch, float64, full batch, fixed steps from zero, so the
same data gives the same weights):

* ``regression``: non-negative least squares on relative error, ``sum ((t_hat - t) / t)^2``,
  solved by Lawson and Hanson's active-set method: every weight is a cost per unit, so none may be negative
  (Inductor's AutoHeuristic and classic analytical models: a few learned constants);
* ``pairwise``: TpuGraphs' (NeurIPS 2023) pairwise ranking loss -- the logistic loss of
  ``s(a) - s(b)`` against which of the two candidates of a site was measured slower, each
  pair weighted by ``|log(t_a / t_b)|`` (a near-tie teaches little), features scaled by
  their RMS, plus an L2 penalty.

``benchmarks/cost_model.py`` evaluates both on held-out families and ships the better one
in ``mend/cost/model.json`` with its kind, weights, the peaks of the machine the data came
from and the data's SHA-256.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from mend.cost.features import CANDIDATES, FEATURES, vector

HERE = Path(__file__).parent
ARTIFACT = HERE / "model.json"
DATA = HERE / "data" / "cpu.jsonl"
META = HERE / "data" / "cpu.meta.json"
KINDS = ("regression", "pairwise")
STEPS = 4000


def load_rows(path: Path = DATA) -> list[dict]:
    """The dataset's sites (one JSON object a line)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def data_hash(path: Path = DATA) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _names(row: dict) -> list[str]:
    return [n for n in CANDIDATES if n in row["times_ms"]]


def _nnls(A, b, max_iter: int = 200):
    """Lawson and Hanson's active-set NNLS (Solving Least Squares Problems, 1974, ch. 23):
    ``argmin ||A x - b||`` subject to ``x >= 0``, exact up to float64, deterministic."""
    import torch

    n = A.shape[1]
    x = torch.zeros(n, dtype=torch.float64)
    passive = torch.zeros(n, dtype=torch.bool)
    for _ in range(max_iter):
        w = A.T @ (b - A @ x)
        cand = (~passive) & (w > 1e-12)
        if not bool(cand.any()):
            break
        passive[int(torch.where(cand, w, torch.tensor(-1.0, dtype=torch.float64)).argmax())] = True
        while True:
            idx = torch.nonzero(passive).flatten()
            z = torch.zeros(n, dtype=torch.float64)
            z[idx] = torch.linalg.lstsq(A[:, idx], b[:, None], driver="gelsd").solution[:, 0]
            if bool((z[idx] > 0).all()):
                x = z
                break
            neg = idx[z[idx] <= 0]
            alpha = float(torch.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
    return x


def _fit_regression(rows: list[dict], steps: int):
    """Non-negative least squares on relative error (:func:`_nnls`)."""
    import torch

    X = torch.tensor([vector(r["obs"], n) for r in rows for n in _names(r)], dtype=torch.float64)
    t = torch.tensor([r["times_ms"][n] for r in rows for n in _names(r)], dtype=torch.float64)
    A = X / t[:, None]                   # relative error: (X theta - t) / t = A theta - 1
    return _nnls(A, torch.ones(len(t), dtype=torch.float64)), torch.ones(X.shape[1], dtype=torch.float64)


def _fit_pairwise(rows: list[dict], steps: int, l2: float = 1e-3, lr: float = 0.5):
    import torch

    diffs, labels, weights = [], [], []
    for r in rows:
        names, times = _names(r), r["times_ms"]
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                diffs.append([x - y for x, y in zip(vector(r["obs"], a), vector(r["obs"], b))])
                labels.append(1.0 if times[a] > times[b] else 0.0)
                weights.append(abs(math.log(times[a] / times[b])))
    X = torch.tensor(diffs, dtype=torch.float64)
    y, wt = torch.tensor(labels, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)
    scale = X.pow(2).mean(0).sqrt()
    scale[scale == 0] = 1.0
    Xs = X / scale
    w = torch.zeros(X.shape[1], dtype=torch.float64)
    norm = float(wt.sum()) or 1.0
    for _ in range(steps):
        p = torch.sigmoid((Xs @ w).clamp(-30, 30))
        w = w - lr * (Xs.T @ (wt * (p - y)) / norm + l2 * w)
    return w, scale


def train(rows: list[dict], kind: str = "regression", *, steps: int = STEPS) -> dict:
    """Fit the model of ``kind`` on ``rows`` (dataset sites); the artifact's model fields.
    Raises ValueError for an unknown kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown cost model kind {kind!r}: one of {', '.join(KINDS)}")
    w, scale = (_fit_regression if kind == "regression" else _fit_pairwise)(rows, steps)
    return {"kind": kind, "features": list(FEATURES), "weights": [round(float(v), 10) for v in w],
            "scale": [round(float(v), 10) for v in scale], "steps": steps}


def scores(model: dict, obs: dict, names: list[str]) -> dict[str, float]:
    """Each candidate's score: predicted ms for ``regression``, a ranking score (lower:
    faster) for ``pairwise``. Raises ValueError when the artifact's features are not this
    code's (retrain: ``python benchmarks/cost_model.py --write-artifact``)."""
    if model["features"] != list(FEATURES):
        raise ValueError("the cost model artifact was trained on other features; retrain it "
                         "(python benchmarks/cost_model.py --write-artifact)")
    w, scale = model["weights"], model["scale"]
    return {n: sum(x / s * c for x, s, c in zip(vector(obs, n), scale, w)) for n in names}


def invalid(model) -> str | None:
    """Why ``model`` (a loaded artifact) cannot be used, else None: not an object, a
    missing or mistyped field, features other than this code's, non-finite weights."""
    if not isinstance(model, dict):
        return "it is not a JSON object"
    if model.get("kind") not in KINDS:
        return f"unknown kind {model.get('kind')!r}"
    if model.get("features") != list(FEATURES):
        return "it was trained on other features (retrain: python benchmarks/cost_model.py --write-artifact)"
    for key in ("weights", "scale"):
        v = model.get(key)
        if not isinstance(v, list) or len(v) != len(FEATURES) or not all(
                isinstance(x, (int, float)) and math.isfinite(x) for x in v) or (key == "scale" and 0 in v):
            return f"`{key}` is not {len(FEATURES)} finite numbers"
    peaks = model.get("peaks")
    if not isinstance(peaks, dict) or not all(isinstance(peaks.get(k), (int, float)) and peaks[k] > 0
                                              for k in ("peak_flops", "bandwidth", "launch")):
        return "`peaks` is missing or not positive numbers"
    return None


def load_model(path: Path = ARTIFACT) -> dict | None:
    """The shipped artifact, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
