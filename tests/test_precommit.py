"""pre-commit and CI: the `mend-scan` hook through `pre-commit try-repo` on a temporary git
repository, and the documented GitHub Actions job (docs/github-actions/mend.yml) parsed and
its scan command run in a temporary project.

Both use [tool.mend] (targets, baseline) from the temporary project's pyproject.toml, and a
model with one graph break that the baseline holds; adding a second break must fail them.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "docs" / "github-actions" / "mend.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
BIN = Path(sys.executable).parent  # `mend` of the environment under test

MODEL = '''\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        if h.pow(2).mean() > 0.25:
            h = h * 0.5
        return torch.relu(h)


def get_inputs():
    return (torch.randn(2, 8, generator=torch.Generator().manual_seed(0)),)
'''
OLD_LINE = 12  # the `if` on a tensor value
# A second break above the first: the old one moves down a line and must stay in the baseline.
NEW_MODEL = MODEL.replace("        h = self.proj(x)\n", '        h = self.proj(x)\n        print("projected")\n')
NEW_LINE = 12  # the print

PYPROJECT = '''\
[project]
name = "tiny-model"
version = "0.0.1"

[tool.mend]
targets = ["model.py"]
baseline = "mend-baseline.json"
'''


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1",
               PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    return env


def _run(cmd, cwd, env, **kw):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, **kw)


def _git(cwd, env, *args):
    out = _run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd, env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _project(tmp_path, env):
    """A git repository holding pyproject.toml ([tool.mend]), model.py and its baseline."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(PYPROJECT)
    (proj / "model.py").write_text(MODEL)
    _git(proj, env, "init", "-q")
    upd = _run([str(BIN / "mend"), "scan", "--update-baseline"], proj, env)
    assert upd.returncode == 0, upd.stdout + upd.stderr
    assert (proj / "mend-baseline.json").is_file()
    _git(proj, env, "add", "-A")
    _git(proj, env, "commit", "-q", "-m", "model with one baselined break")
    return proj


def _hook_repo(tmp_path, env):
    """The repository to try: this checkout when git tracks its .pre-commit-hooks.yaml.

    `pre-commit try-repo PATH` uses a repository's uncommitted changes to tracked files but
    not untracked files; before the hooks file is committed (or outside a git checkout) a
    one-commit repository holding the working tree's hooks file stands in. With
    `language: system` that file is all pre-commit takes from the repository.
    """
    tracked = _run(["git", "ls-files", "--error-unmatch", HOOKS.name], REPO, env)
    if tracked.returncode == 0:
        return REPO
    repo = tmp_path / "hooks-repo"
    repo.mkdir()
    shutil.copy(HOOKS, repo / HOOKS.name)
    _git(repo, env, "init", "-q")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "hooks")
    return repo


def test_hooks_file_declares_mend_scan():
    hooks = {h["id"]: h for h in yaml.safe_load(HOOKS.read_text())}
    hook = hooks["mend-scan"]
    assert (hook["entry"], hook["language"], hook["pass_filenames"], hook["types"]) == (
        "mend scan", "system", False, ["python"])
    assert hook["name"] and hook["description"]


def test_hook_passes_on_baselined_break_and_fails_on_a_new_one(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (dev extra)")
    env = _env(tmp_path)
    proj = _project(tmp_path, env)
    try_repo = [sys.executable, "-m", "pre_commit", "try-repo", str(_hook_repo(tmp_path, env)),
                "mend-scan", "--all-files", "--verbose"]

    ok = _run(try_repo, proj, env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.search(r"mend scan \(new graph breaks\)\.+Passed", ok.stdout), ok.stdout

    (proj / "model.py").write_text(NEW_MODEL)
    _git(proj, env, "add", "-A")  # staged, as a commit would have it
    bad = _run(try_repo, proj, env)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"mend scan \(new graph breaks\)\.+Failed", bad.stdout), bad.stdout
    # the new site is named as new; the baselined one (moved a line down) is not
    assert re.search(rf"new graph break model\.py:{NEW_LINE}\b", bad.stdout), bad.stdout
    assert not re.search(rf"new graph break model\.py:{OLD_LINE + 1}\b", bad.stdout), bad.stdout


# -- the GitHub Actions job -------------------------------------------------------------

def _steps():
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    return job["steps"]


def _scan_step(steps):
    (step,) = [s for s in steps if s.get("id") == "scan"]  # the `if:`s read steps.scan.outputs
    assert "mend scan" in step["run"], step
    return step


def _upload_step(steps):
    (step,) = [s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    return step


def _sarif_name(scan_step):
    m = re.search(r"mend scan\b[^\n>]*--sarif[^\n>]*--baseline\s+(\S+)[^\n>]*>\s*(\S+)", scan_step["run"])
    assert m, scan_step["run"]
    return m.group(1), m.group(2)


def _condition(expr, exit_code):
    """Evaluate a step's `if:` of the forms this workflow uses, for a scan exit code."""
    py = (expr.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
          .replace("steps.scan.outputs.exit_code", repr(str(exit_code))))
    assert re.fullmatch(r"[\sA-Za-z()'0-9=!]*", py), expr  # nothing but what is replaced above
    return eval(py, {"__builtins__": {}}, {})  # our own workflow's expression


def _bash(step, cwd, env):
    """Run a step's `run:` as GitHub runs `shell: bash`."""
    assert step.get("shell") == "bash", step
    return _run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd, env)


def test_workflow_scans_with_the_baseline_and_uploads_that_sarif():
    steps = _steps()
    scan, upload = _scan_step(steps), _upload_step(steps)
    baseline, sarif = _sarif_name(scan)
    assert baseline == "mend-baseline.json"
    assert upload["with"]["sarif_file"] == sarif
    assert steps.index(scan) < steps.index(upload)
    assert any(s.get("uses", "").startswith("actions/checkout@") for s in steps[:steps.index(scan)])


def test_workflow_scan_command_gives_sarif_and_the_exit_code_it_expects(tmp_path):
    env = _env(tmp_path)
    proj = _project(tmp_path, env)
    steps = _steps()
    scan, upload = _scan_step(steps), _upload_step(steps)
    (fail,) = [s for s in steps if s is not scan and "exit" in s.get("run", "")]
    _, sarif_name = _sarif_name(scan)

    for model, expected in ((MODEL, 0), (NEW_MODEL, 1)):
        (proj / "model.py").write_text(model)
        out_file = tmp_path / f"github_output_{expected}"
        out_file.write_text("")
        ran = _bash(scan, proj, {**env, "GITHUB_OUTPUT": str(out_file)})
        assert ran.returncode == 0, ran.stderr  # the step keeps the code for later
        outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines())
        assert outputs["exit_code"] == str(expected), ran.stderr

        doc = json.loads((proj / sarif_name).read_text())
        assert doc["version"] == "2.1.0"
        states = {r["locations"][0]["physicalLocation"]["region"]["startLine"]: r.get("baselineState")
                  for r in doc["runs"][0]["results"]}
        assert states == ({NEW_LINE: "new", OLD_LINE + 1: "unchanged"} if expected else {OLD_LINE: "unchanged"})

        assert _condition(upload["if"], outputs["exit_code"]) is True  # uploaded either way
        assert _condition(fail["if"], outputs["exit_code"]) is (expected != 0)
        if expected:
            failed = _bash(fail, proj, {**env, "MEND_EXIT": outputs["exit_code"]})
            assert failed.returncode == expected, failed.stdout + failed.stderr

    # an error (exit 2) writes no SARIF worth uploading, and fails the job
    assert _condition(upload["if"], 2) is False and _condition(fail["if"], 2) is True
