import json
import os
import platform
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from mend.cli import main

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
