"""Run the scan and fix suites against each torch release in the declared range.

    nox -s torch                 # every release below, one virtual environment each
    nox -s "torch(2.11.0)"       # one release
    nox -s torch -- -x           # arguments after -- go to pytest

Each session installs that torch first, then the project with its `dev` extra under
`constraints.txt` with the torch pin taken out (the file pins torch==2.13.0, the
development and CI version) and the session's torch pinned instead, so nothing else
moves. Where Dynamo breaks a graph changes between releases, so a failure here can mean
a different count, not a bug: the README's support statement records what passed last.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent

# The releases of pyproject's `torch>=2.11,<2.15` that install on this project's machines.
TORCH_RELEASES = ["2.11.0", "2.12.1", "2.13.0", "2.14.1"]

# Scan (fixtures, the shared acceptance cases) and fix (pipeline, CLI, targets): about
# three minutes per release on one core.
SUITES = ["tests/test_scan_fixtures.py", "tests/test_shared_cases.py", "tests/test_fix.py",
          # the runtime that mended code imports: a deferred log call broke the graph on 2.11
          "tests/test_runtime_replay.py"]

nox.options.sessions = ["torch"]
nox.options.reuse_existing_virtualenvs = True


def constraints_for(torch_release: str, constraints: Path = ROOT / "constraints.txt") -> str:
    """Return the text of `constraints` with its torch pin replaced by ``torch==torch_release``.

    Raises FileNotFoundError when `constraints` is absent.
    """
    kept = [line for line in constraints.read_text().splitlines()
            if not re.match(r"\s*torch\s*(?:[=<>!~;\[]|$)", line)]
    return "\n".join([*kept, f"torch=={torch_release}", ""])


@nox.session(venv_backend="venv")
@nox.parametrize("torch_release", [nox.param(r, id=r) for r in TORCH_RELEASES])
def torch(session: nox.Session, torch_release: str) -> None:
    """Install `torch_release`, then the project, and run SUITES (posargs go to pytest)."""
    session.install(f"torch=={torch_release}")
    with tempfile.TemporaryDirectory() as tmp:
        pins = Path(tmp) / "constraints.txt"
        pins.write_text(constraints_for(torch_release))
        session.install("-c", str(pins), "-e", ".[dev]")
    session.run("python", "-c", "import torch; print('torch', torch.__version__)")
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES, *session.posargs, env=env)
