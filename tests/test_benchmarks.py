"""Smoke test of the benchmark harness (benchmarks/): one tiny fixture, --quick, one
cold-cache process per variant, no warm-cache process. Checks the result files and the
shape and sanity of the JSON, never the timings themselves."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FIXTURE = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        print("[bench-smoke] hidden computed")
        return self.fc2(h)


def get_inputs():
    return (torch.randn(2, 8, generator=torch.Generator().manual_seed(0)),)
'''


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    target = tmp / "bench_smoke_model.py"
    target.write_text(FIXTURE)
    out = tmp / "results"
    cmd = [sys.executable, str(REPO / "benchmarks" / "run_cpu.py"), "--rows", str(target), "--quick", "--warm", "0",
           "--out", str(out), "--name", "smoke", "--budget-min", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out, json.loads((out / "smoke.json").read_text())


def test_result_files(smoke):
    out, _ = smoke
    md = (out / "smoke.md").read_text()
    assert "## Graph breaks" in md and "## Cold start" in md and "## mend's own cost" in md
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib not installed: no plots (pip install '.[bench]')")
    assert (out / "smoke_breaks.png").stat().st_size > 1000
    assert (out / "smoke_ratios.png").stat().st_size > 1000


def test_json_shape_and_sanity(smoke):
    _, doc = smoke
    assert doc["schema_version"] == "1.0"
    assert {"config", "machine", "rows", "loadavg_start", "loadavg_end", "wall_s"} <= set(doc)
    assert doc["machine"]["torch_version"] and doc["machine"]["cpu_count"] >= 1
    assert doc["config"]["threads"] == 1 and doc["config"]["backend"] == "inductor"
    (row,) = doc["rows"]
    assert not row["errors"]

    c = row["counts"]  # a constant print: one break, fixed by deferred-side-effects
    assert (c["graphs_before"], c["breaks_before"], c["fixable"]) == (2, 1, 1)
    assert (c["graphs_after"], c["breaks_after"], c["fixed"], c["fully_fixed"]) == (1, 0, 1, True)
    assert c["scan_agrees"] is True
    assert c["dynamo_graphs_original"] == 2 and c["dynamo_graphs_mended"] == 1

    for step in ("scan", "fix"):
        cost = row["mend_cost"][step]
        assert cost["rc"] in (0, 1) and cost["wall_s"] > 0 and cost["peak_rss_mb"] > 10

    cold = row["cold_start"]["cold"]
    for v in ("original", "mended"):
        s = cold[v]
        assert s["n"] == 1 and not s["errors"]
        assert 0 < s["median_s"] < 300
        ph = s["median_phases_s"]
        assert all(ph[k] >= 0 for k in ("interpreter_start", "imports", "build", "first_call"))
        assert sum(ph.values()) == pytest.approx(s["median_s"], rel=1e-6)
        ev = s["first_call_events"][0]
        assert ev["eager_fallback_frames"] == 0 and ev["recompiles"] == 0
    assert cold["ratio"] == pytest.approx(cold["original"]["median_s"] / cold["mended"]["median_s"])
    assert row["cold_start"]["warm"]["original"]["n"] == 0  # --warm 0

    st = row["steady_state"]
    for v in ("original", "mended"):
        assert st[v]["median_s"] > 0 and st[v]["n"] >= 5
        assert st[v]["timed_events"]["recompiles"] == 0
        assert st[v]["p10_s"] <= st[v]["median_s"] <= st[v]["p90_s"]
    assert set(row["throughput"]) == {"1", "2"}
    for b in ("1", "2"):
        t = row["throughput"][b]
        for v in ("original", "mended"):
            assert t[v]["samples_per_s"] > 0 and t[v]["batch_rows"] == 2 * int(b)
            assert t[v]["timed_events"]["recompiles"] == 0
    assert row["output_agreement"]["allclose"] is True
