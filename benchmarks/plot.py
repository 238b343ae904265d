"""Plots of a benchmark result (matplotlib, headless).

    python benchmarks/plot.py benchmarks/results/cpu.json

writes, beside the JSON, ``<name>_breaks.png`` (graph breaks before / after per row, the
paper's count as a marker) and ``<name>_ratios.png`` (original / mended ratios of cold
start with a cold and a warm cache and of steady-state latency; > 1: mended is faster).
``run_cpu.py`` and ``run_gpu.py`` call :func:`plot_all` themselves.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401


def _label(row: str) -> str:
    return row.split(":", 1)[1] if row.startswith(("hf:", "case:")) else Path(row).stem


def plot_breaks(doc: dict, path: Path) -> None:
    rows = [r for r in doc["rows"] if r.get("counts", {}).get("breaks_before") is not None]
    names = [_label(r["row"]) for r in rows]
    before = [r["counts"]["breaks_before"] for r in rows]
    after = [r["counts"]["breaks_after"] for r in rows]
    paper = [(r.get("paper") or {}).get("breaks") for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(rows) + 2), 4))
    w = 0.38
    ax.bar([i - w / 2 for i in x], before, w, label="before (mend scan)", color="#c44e52")
    ax.bar([i + w / 2 for i in x], after, w, label="after mend fix", color="#55a868")
    px = [i - w / 2 for i, p in zip(x, paper) if p is not None]
    ax.scatter(px, [p for p in paper if p is not None], marker="_", s=400, color="black", zorder=3,
               label="paper's count (before)")
    for i, (b, a) in enumerate(zip(before, after)):
        ax.text(i + w / 2, a + 0.1, str(a), ha="center", va="bottom", fontsize=8)
        ax.text(i - w / 2, b + 0.1, str(b), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=35, ha="right")
    ax.set_ylabel("graph breaks")
    ax.set_ylim(0, max(before + [p for p in paper if p is not None] + [1]) * 1.15)
    cfg = doc["config"]
    ax.set_title(f"Graph breaks before / after mend fix (torch {doc['machine'].get('torch_version')}, {cfg['device']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_ratios(doc: dict, path: Path) -> None:
    rows = [r for r in doc["rows"] if r.get("cold_start")]
    names = [_label(r["row"]) for r in rows]
    series = [
        ("cold start, cold cache", [r["cold_start"]["cold"]["ratio"] for r in rows], "#4c72b0"),
        ("cold start, warm cache", [r["cold_start"]["warm"]["ratio"] for r in rows], "#8172b2"),
        ("steady-state latency", [r["steady_state"]["ratio"] for r in rows], "#dd8452"),
    ]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows) + 2), 4))
    w = 0.8 / len(series)
    for k, (label, vals, color) in enumerate(series):
        xs = [i - 0.4 + w * (k + 0.5) for i in x]
        pts = [(a, v) for a, v in zip(xs, vals) if v]
        # bars grow from 1 on a log axis: up = mended faster, down = mended slower
        ax.bar([a for a, _ in pts], [v - 1 for _, v in pts], w, bottom=1, label=label, color=color)
        for a, v in pts:
            ax.text(a, v * (1.03 if v >= 1 else 0.97), f"{v:.2f}", ha="center", va="bottom" if v >= 1 else "top",
                    fontsize=7)
    ax.set_yscale("log")
    vals = [v for _, vs, _ in series for v in vs if v]
    lo, hi = (min(0.8, min(vals) / 1.25), max(1.25, max(vals) * 1.25)) if vals else (0.5, 2.0)
    ax.set_ylim(lo, hi)
    ticks = [t for t in (0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 5, 10) if lo <= t <= hi]
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{t:g}" for t in ticks])
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=35, ha="right")
    ax.set_ylabel("original / mended time  (> 1: mended faster)")
    cfg = doc["config"]
    ax.set_title(f"Original / mended ({cfg['device']}, {cfg['backend']}{', ' + cfg['mode'] if cfg.get('mode') else ''})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_all(doc: dict, out: Path, name: str) -> list[str]:
    out = Path(out)
    paths = [out / f"{name}_breaks.png", out / f"{name}_ratios.png"]
    plot_breaks(doc, paths[0])
    plot_ratios(doc, paths[1])
    return [str(p) for p in paths]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = Path(argv[1])
    doc = json.loads(path.read_text())
    for p in plot_all(doc, path.parent, doc["config"]["name"]):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
