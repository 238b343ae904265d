"""Does the code ``mend fix`` emits on torch 2.13 remove the same graph breaks on another torch
of the declared range? (A lent GPU with torch 2.11 showed that it need not: mend.runtime's
deferred log call broke the graph there; benchmarks/results/gpu.md.)

For each target (file targets: ``../shared/cases`` by default, or the paths given), runs
``mend fix TARGET --out DIR --json [--unsafe-fixes]`` with this interpreter, and for every
target with a rewrite counts the graphs of the original and of the mended file with
``torch._dynamo.explain``, each in a fresh process, under this interpreter and under
``--other`` (a Python whose torch is another release, with this tree importable)::

    python benchmarks/torch_range.py --other /path/to/venv211/bin/python [--unsafe-fixes] [FILE.py ...]

Prints one JSON line per target and writes ``--out`` (JSON). Measurements (Dynamo's counts),
not proofs; nothing is timed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_COUNT = r'''
import json, sys
sys.path.insert(0, sys.argv[2])
import torch
from mend.targets import load_target
t = load_target(sys.argv[1])
if hasattr(t.model, "eval"):
    t.model.eval()
try:
    with torch.no_grad():
        e = torch._dynamo.explain(t.model)(*t.args, **t.kwargs)
    res = {"graphs": e.graph_count, "breaks": [str(b.reason).splitlines()[0][:90] for b in e.break_reasons]}
except Exception as exc:
    res = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:150] if str(exc) else ''}"}
print("RESULT " + json.dumps({**res, "torch": torch.__version__}))
'''


def count(python: str, path: Path) -> dict:
    """Graph count of file target ``path`` under ``python`` (a fresh process)."""
    p = subprocess.run([python, "-c", _COUNT, str(path), str(ROOT)], capture_output=True, text=True, timeout=600)
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:150]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", help="FILE.py targets (default: every ../shared/cases file)")
    ap.add_argument("--other", required=True, help="a Python whose torch is another release")
    ap.add_argument("--unsafe-fixes", action="store_true")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "mend-torch-range.json"))
    ns = ap.parse_args(argv)
    targets = [Path(t) for t in ns.targets] or sorted((ROOT.parent / "shared" / "cases").glob("[0-9]*.py"))
    rows, differ = [], 0
    for target in targets:
        out = Path(tempfile.mkdtemp(prefix="mend-range-"))
        p = subprocess.run([sys.executable, "-m", "mend.cli", "fix", str(target), "--out", str(out), "--json",
                            *(["--unsafe-fixes"] if ns.unsafe_fixes else [])], capture_output=True, text=True, cwd=ROOT)
        try:
            rules = sorted({r["rule"] for r in json.loads(p.stdout)["rewrites"]})
        except (json.JSONDecodeError, KeyError):
            rows.append({"target": target.name, "fix_error": p.stderr.strip()[-200:]})
            continue
        if not rules:
            continue
        rec = {"target": target.name, "rules": rules}
        for label, python in (("this", sys.executable), ("other", ns.other)):
            rec[label] = {"original": count(python, target), "mended": count(python, out / target.name)}
        graphs = {k: (rec[k]["original"].get("graphs"), rec[k]["mended"].get("graphs")) for k in ("this", "other")}
        rec["same_counts"] = graphs["this"] == graphs["other"] and None not in graphs["this"]
        differ += not rec["same_counts"]
        rows.append(rec)
        print(json.dumps({"target": target.name, "rules": rules, **graphs, "same": rec["same_counts"]}), flush=True)
    Path(ns.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
