import json
import os
import platform
import tempfile
from pathlib import Path

# Inductor compiles in this process, not in a pool of compile subprocesses per pytest-xdist worker
# (2 by default on 2 cores): set before torch is imported. Fresh-clone CI runs on 2 cores saw one
# end-to-end test a run fail inside a worker and pass alone -- a candidate's Inductor pass failing
# once and not on Hypothesis's replay, a tensor-check candidate not verified -- never reproduced
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from mend.cli import main  # noqa: E402

# Each pytest-xdist worker compiles with its own Inductor cache folder (kept between runs,
# so a second run is warm): no worker reads a cache entry another one is writing, and no
# other torch on the machine shares it
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"mend-tests-inductor-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"))

# mend fix chooses a branch's rewrite by predicted cost (mend.cost); where the roofline decides,
# it reads this machine's peaks, measured once (~15 s) and cached in $MEND_CACHE_DIR. The tests
# read these fixed peaks instead, so no test times anything and every machine chooses alike
TEST_PEAKS = {"peak_flops": 5e10, "bandwidth": 1e10, "launch": 2e-5, "sync": 5e-5, "device": "cpu",
              "machine": "fixed test peaks (tests/conftest.py)"}
COST_CACHE = Path(tempfile.gettempdir()) / f"mend-tests-cost-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
COST_CACHE.mkdir(parents=True, exist_ok=True)
for _device in ("cpu", "cuda"):
    (COST_CACHE / f"roofline-{platform.node() or 'host'}-{_device}.json").write_text(json.dumps(TEST_PEAKS))
os.environ["MEND_CACHE_DIR"] = str(COST_CACHE)

FIXTURES = Path(__file__).parent / "fixtures"

# The files that take longest (measured: fresh-clone CI, 2 workers, 2026-12-08), collected first:
# `-n auto --dist loadfile` hands out whole files in collection order, and one of these last
# (alphabetically test_workers is) left a worker idle for ~45 s of a ~17 min run
HEAVY_FIRST = ("test_cond_inner_temps.py", "test_fix_catalogue.py", "test_rule_deferred_effects.py", "test_fix.py",
               "test_workers.py")


def pytest_collection_modifyitems(items):
    heavy = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: heavy.get(item.path.name, len(heavy)))   # stable: the rest keep their order
SHARED_CASES = Path(__file__).resolve().parents[2] / "shared" / "cases"


@pytest.fixture
def run_mend():
    """Run the CLI in-process; returns (exit_code, stdout, stderr)."""

    def run(*args):
        result = CliRunner().invoke(main, list(args))
        return result.exit_code, result.stdout, result.stderr

    return run


@pytest.fixture
def scan_json(run_mend):
    def scan(spec):
        code, out, err = run_mend("scan", spec, "--json")
        assert code in (0, 1), err
        return code, json.loads(out)

    return scan


def fix_in_own_process(src: Path, tmp_path: Path, *options: str) -> tuple[dict, str]:
    """``mend fix SRC --unsafe-fixes --json OPTIONS`` in a fresh process, as a user runs it:
    (the JSON report, the mended text; None when nothing was rewritten)."""
    import subprocess
    import sys

    out_dir = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "mend", "fix", str(src), "--unsafe-fixes", *options, "--json",
                          "--out", str(out_dir)], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert run.returncode == 0, run.stderr[-2000:]
    mended = out_dir / src.name
    return json.loads(run.stdout), mended.read_text() if mended.exists() else None


def _equal(x, y) -> bool:
    """Bit-equal tensors, or tuples/lists of them element by element."""
    import torch

    if isinstance(x, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y))
    return torch.equal(x, y)


def load_pair(original: Path, mended_src: str, tmp_path: Path, tag: str, *, seed: int | None = None):
    """``(original module, original Model, mended Model)`` of a fixture (``Model``, ``get_inputs``)
    and its mended source (written under ``tmp_path``): both in eval mode, the mended one with the
    original's weights; ``seed`` seeds torch before the models are built."""
    import torch

    from mend.targets import load_file_module

    mended = tmp_path / original.name
    mended.write_text(mended_src)
    a_mod, b_mod = load_file_module(original, f"_{tag}_a"), load_file_module(mended, f"_{tag}_b")
    if seed is not None:
        torch.manual_seed(seed)
    a, b = a_mod.Model().eval(), b_mod.Model().eval()
    b.load_state_dict(a.state_dict())
    return a_mod, a, b


def assert_one_graph_and_same_outputs(original: Path, mended_src: str, tmp_path: Path, tag: str) -> None:
    """The mended source of a fixture (``Model``, ``get_inputs``) returns the original's outputs
    bit for bit, eager and compiled (eager backend), and compiles to one graph without a break."""
    import torch

    a_mod, a, b = load_pair(original, mended_src, tmp_path, tag, seed=0)
    args = a_mod.get_inputs()
    with torch.no_grad():
        ref = a(*args)
        assert _equal(ref, b(*args))
        torch._dynamo.reset()
        explain = torch._dynamo.explain(b)(*args)
        assert (explain.graph_count, explain.graph_break_count) == (1, 0)
        assert _equal(ref, torch.compile(b, backend="eager")(*args))
