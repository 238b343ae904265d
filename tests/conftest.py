import json
import os
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
