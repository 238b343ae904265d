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
           "--out", str(out), "--name", "smoke", "--budget-min", "0", "--unsafe-fixes"]
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

    c = row["counts"]  # a constant print: one break, fixed by deferred-side-effects (unsafe: --unsafe-fixes)
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


def _load(name: str):
    """benchmarks/NAME.py as a module (its own folder importable, as when run as a script)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


def test_newest_table_writer_on_a_fake_result():
    """benchmarks/run_newest.py's summary and newest.md on a tiny fake document (no venv, no network)."""
    rn = _load("run_newest")
    left = {"file": "/v/lib/python3.11/site-packages/transformers/models/x/modeling_x.py", "line": 12,
            "function": "forward", "source": "n = int(mask.sum().item())", "category": "item-tolist", "count": 2,
            "fixable_by": None, "reason": "the tensor value leaves the graph as a Python number", "frame_skipped": False}
    timed = {"row": "hf:newest/led", "errors": [], "remaining_sites": [left, {**left, "category": "generator", "count": 1}],
             "declined": [{"rule": "deferred-side-effects", "site": "x.py:3", "reason": "nested"}],
             "counts": {"graphs_before": 5, "graphs_after": 4, "breaks_before": 5, "breaks_after": 3, "fixable": 2,
                        "fixed": 2, "rewrites": 1},
             "cold_start": {"cold": {"original": {"median_s": 2.0, "n": 1, "errors": []},
                                     "mended": {"median_s": 1.0, "n": 1, "errors": []}, "ratio": 2.0},
                            "warm": {"original": {"median_s": None, "n": 0, "errors": []},
                                     "mended": {"median_s": None, "n": 0, "errors": []}, "ratio": None}},
             "steady_state": {"original": {"median_s": 0.003}, "mended": {"median_s": 0.002}, "ratio": 1.5},
             "throughput": {}, "output_agreement": {"allclose": True, "max_abs_diff": 0.0}}
    untimed = {"row": "hf:newest/ctrl", "errors": [], "remaining_sites": [], "counts": {"breaks_before": 0},
               "not_timed": "mend fix emitted no verified rewrite"}
    doc = {"config": {"name": "newest", "device": "cpu", "backend": "inductor", "batch_sizes": [1], "threads": 1,
                      "out_dir": "/nonexistent"},
           "machine": {"cpu_count": 2}, "started": "now", "wall_s": 60.0, "loadavg_start": [0.0], "loadavg_end": [0.0],
           "notes": ["quick settings"], "rows": [timed, untimed],
           "environment": {"transformers": "9.9.9", "torch": "2.13.0+cpu", "venv": "benchmarks/.venv-newest",
                           "system_site_packages": False, "torch_source": "test", "setup_s": 1.0}}
    doc["summary"] = [rn.summarize_row(r) for r in doc["rows"]]
    s = doc["summary"][0]
    assert s["model"] == "led" and s["left_by_category"] == {"item-tolist": 2, "generator": 1}
    assert (s["breaks_before"], s["breaks_after"], s["fixed"], s["cold_ratio"], s["steady_ratio"]) == (5, 3, 2, 2.0, 1.5)
    md = rn.newest_markdown(doc)
    assert "transformers **9.9.9**" in md
    # second-call counts and the unsafe count are absent from this fake row: shown as —
    assert "| led | 5 → 4 | — → — | 5 → 3 | 2 | 1 (—) | item-tolist ×2, generator ×1 | 2.00 | — | 1.50 | yes |" in md
    assert "| ctrl |" in md and "not timed" in md and "* **ctrl**: nothing left." in md
    assert "`transformers/models/x/modeling_x.py:12` (forward)" in md and "leaves the graph as a Python number" in md
    assert "declined rewrite `deferred-side-effects`" in md
    assert "## Detailed tables" in md and "Plots:" not in md


def test_mend_cost_identity_check_and_table_on_a_fake_result():
    """benchmarks/run_mend_cost.py: the fresh/warm identity ignores timings and the output
    folder and nothing else; the table's medians and cells (no mend run)."""
    rc = _load("run_mend_cost")
    doc = {"rewrites": [{"obligations": [{"kind": "k", "seconds": 1.5, "result": "checked"}],
                         "verification": {"seconds": 2.0, "solver_seconds": 0.1}, "file": "/tmp/o1/x.py"}]}
    other = {"rewrites": [{"obligations": [{"kind": "k", "seconds": 9.0, "result": "checked"}],
                           "verification": {"seconds": 3.0, "solver_seconds": 0.2}, "file": "/tmp/o2/x.py"}]}
    assert rc.normalised(doc, "/tmp/o1") == rc.normalised(other, "/tmp/o2")
    changed = {"rewrites": [{"obligations": [{"kind": "k", "seconds": 1.5, "result": "proved"}],
                             "verification": {"seconds": 2.0}, "file": "/tmp/o1/x.py"}]}
    assert rc.normalised(changed, "/tmp/o1") != rc.normalised(other, "/tmp/o2")

    def rec(wall, rss=500, rc_=0):
        return {"wall_s": wall, "peak_rss_mb": rss, "rc": rc_, "cpu_s": wall, "foreign_cpu_s": 0.1}
    rows = [{"row": "hf:a", "scan": rec(10.0), "fix fresh": rec(100.0), "fix warm": {**rec(50.0), "rewrites": 1},
             "identical": {"json": True, "certificates": True}, "ratio_fresh_over_warm": 2.0},
            {"row": "hf:b", "scan": rec(20.0, 700), "fix fresh": rec(90.0), "fix warm": {**rec(70.0, 0, 2), "rewrites": 0},
             "identical": {"json": False, "certificates": True}, "ratio_fresh_over_warm": 1.29}]
    md = rc.markdown({"rows": rows, "machine": {"cpu_model": "X", "cpus_usable": 2}, "started": "now", "minutes": 3.0,
                      "batches": {"scan ray": {**rec(30.0), "targets": 2, "targets_per_min": 4.0,
                                               "median_per_target_s": 9.5, "identical_to_local": True}}})
    assert "scan 15.0 s, fix fresh 95.0 s, fix warm 50.0 s, strict —; largest peak RSS 700 MB" in md
    assert "| hf:b | 20.0 | 90.0 | 70.0 (rc 2) | 1.29 |" in md and "NO / yes" in md
    assert "| `mend scan ray` | 2 | 30.0 | 4.0 | 9.5 | 500 | yes |" in md and "driver's alone" in md


def test_the_paired_steady_state_interval_brackets_the_ratio_and_flags_only_a_clear_slowdown():
    from benchmarks.steady_paired import THRESHOLD, _bootstrap, render

    same = [1.0, 1.1, 0.9, 1.05, 0.95] * 20
    assert _bootstrap(same, same) == (1.0, 1.0)
    slower = [t * 1.25 for t in same]  # mended 25% slower on every pair
    low, high = _bootstrap(same, slower)
    assert low <= 0.8 <= high < THRESHOLD
    noisy = [1.0, 3.0] * 50  # a ratio near 1 with a wide spread is not "slower beyond noise"
    low, high = _bootstrap(noisy, list(reversed(noisy)))
    assert low < 1.0 < high
    doc = {"machine": {"platform": "p", "cpus": 2, "python": "3.11", "torch": "2.13.0", "load_1min_end": 0.5},
           "started": "s", "minutes": 1.0, "threshold": THRESHOLD,
           "rows": [{"row": "hf:x", "mended_modules": ["a.b"], "outputs_equal": True, "pairs": 100, "original_ms": 1.0,
                     "mended_ms": 1.25, "ratio": 0.8, "ci95": [0.78, 0.82], "slower_beyond_noise": True},
                    {"row": "hf:y", "error": "no rewrite emitted"}]}
    table = render(doc)
    assert "| hf:x | `a.b` | yes | 100 | 1.000 | 1.250 | **0.800** | 0.780–0.820 | **yes** |" in table
    assert "| hf:y | — |" in table and "not measured: no rewrite emitted" in table
    gpu = dict(doc, machine={**doc["machine"], "device": "cuda", "mode": "reduce-overhead", "device_name": "NVIDIA H200",
                             "transformers": "4.52.4"})
    assert "NVIDIA H200, transformers 4.52.4, each call synchronised, a CUDA-graph step marked" in render(gpu)
    assert "one intra-op thread" in table and "mode default" in table


def test_the_paired_steady_state_takes_a_bundles_mended_modules(tmp_path, monkeypatch):
    """On the GPU machine mend does not run: the mended sources come from run_gpu.py's bundle."""
    from benchmarks import steady_paired as sp

    monkeypatch.setattr(sp, "ROOT", tmp_path)
    bundled = {"hf:t5": {"mended_dir": "b/rows/t5/mended"}, "hf:phi3": {"mended_dir": None}}
    assert sp._mended_dir("hf:t5", bundled, tmp_path, {}) == (tmp_path / "b/rows/t5/mended", None)
    assert sp._mended_dir("hf:phi3", bundled, tmp_path, {}) == (None, "no rewrite emitted")
    assert sp._mended_dir("hf:x", bundled, tmp_path, {}) == (None, "not in the bundle")


def test_the_torch_range_check_counts_a_file_targets_graphs():
    """benchmarks/torch_range.py counts graphs in a fresh process of the given Python."""
    from benchmarks import torch_range
    from tests.conftest import FIXTURES

    res = torch_range.count(sys.executable, FIXTURES / "first_call_split.py")
    assert res["graphs"] == 2 and len(res["breaks"]) == 1 and res["torch"].startswith("2.")
    assert "error" in torch_range.count(sys.executable, FIXTURES / "bad_syntax.py")
