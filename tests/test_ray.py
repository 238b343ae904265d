"""Batches on Ray (issue 13): ``mend scan``/``mend fix`` ``--ray`` run each target as a Ray
task on a local 2-CPU cluster and give the local run's results: the same combined JSON (but
for timings), in the order of the specs; a task whose worker dies is retried once, then
recorded as failed; without --ray nothing imports ray."""
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed (pip install -c constraints.txt -e '.[ray]'; "
                               "CI gets it with .[dev])")

# the only fields of a report that differ between two runs: each target's time in a batch,
# each obligation's and each verification's (certificates record them too, and their digest
# covers them)
TIMINGS = {"seconds", "solver_seconds"}


def untimed(doc):
    """``doc`` without its timing fields (and, in a certificate, the digest over them)."""
    if isinstance(doc, dict):
        return {k: untimed(v) for k, v in doc.items() if k not in TIMINGS | {"digest"}}
    if isinstance(doc, list):
        return [untimed(v) for v in doc]
    return doc


def first_difference(a, b, path="") -> str | None:
    """Where two JSON documents first differ (a key path and both values), for a readable
    failure; None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}: only in {'the first' if k in a else 'the second'}"
            found = first_difference(a[k], b[k], f"{path}/{k}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := first_difference(x, y, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {a!r:.300} != {b!r:.300}"


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster (2 CPUs, no dashboard) for the module; its GCS address."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed")
    import ray

    # the worker's logs stay in Ray's log files: a late line must not land in another
    # test's captured stdout
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture
def zoo(tmp_path, monkeypatch):
    """A folder of small targets, the working directory (the specs are relative to it)."""
    for name in ("branch_where.py", "clean.py", "nested_logger.py", "bad_syntax.py", "ray_targets.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def attempts(zoo: Path, name: str) -> int:
    path = zoo / f"{name}.attempts"
    return len(path.read_text().splitlines()) if path.exists() else 0


@needs_ray
def test_scan_batch_on_ray_gives_the_local_report_in_spec_order(cluster, zoo, run_mend):
    # the first target sleeps while it builds: its task finishes after the others
    specs = ["ray_targets.py:slow", "clean.py", "bad_syntax.py", "branch_where.py"]
    local = run_mend("scan", *specs, "--json")
    on_ray = run_mend("scan", *specs, "--json", "--ray")
    assert local[0] == on_ray[0] == 2, on_ray[2]  # bad_syntax.py failed: exit 2 both ways
    docs = json.loads(on_ray[1])
    assert [d["target"] for d in docs] == specs
    # a target's seconds: the only timing; no host
    assert untimed(docs) == untimed(json.loads(local[1])), first_difference(untimed(docs), untimed(json.loads(local[1])))
    assert [d.get("graph_break_count") for d in docs] == [1, 0, None, 1] and "does not parse" in docs[2]["error"]
    assert "4 targets: 3 scanned, 1 failed" in on_ray[2]
    assert attempts(zoo, "slow") == 2 * 2  # built twice (eager check, scan) locally and on Ray
    sarif = run_mend("scan", *specs, "--sarif", "--ray"), run_mend("scan", *specs, "--sarif")
    assert json.loads(sarif[0][1]) == json.loads(sarif[1][1]) and sarif[0][0] == 2


@needs_ray
def test_fix_batch_on_ray_writes_what_the_local_batch_writes(cluster, zoo, run_mend):
    specs = ["branch_where.py", "nested_logger.py"]
    code, out, err = run_mend("fix", *specs, "--out", "out", "--json")
    assert code == 0, err
    local = {p.relative_to(zoo / "out").as_posix(): p.read_bytes() for p in (zoo / "out").rglob("*") if p.is_file()}
    shutil.rmtree(zoo / "out")
    code, ray_out, err = run_mend("fix", *specs, "--out", "out", "--json", "--ray")
    assert code == 0, err
    on_ray = {p.relative_to(zoo / "out").as_posix(): p.read_bytes() for p in (zoo / "out").rglob("*") if p.is_file()}
    assert sorted(on_ray) == sorted(local) and "branch_where.py/certificates/branch_where.1.predicated-control-flow.json" \
        in on_ray and "nested_logger.py/review.html" in on_ray
    report = json.loads(on_ray["report.json"])
    assert report == json.loads(ray_out) and [d["target"] for d in report] == specs
    local_report = json.loads(local["report.json"])
    assert untimed(report) == untimed(local_report), first_difference(untimed(report), untimed(local_report))
    assert report[0]["out_dir"] == str(zoo / "out" / "branch_where.py")  # the driver's folder, not the node's
    for rel in on_ray:
        if rel.endswith(".json"):
            assert untimed(json.loads(on_ray[rel])) == untimed(json.loads(local[rel])), rel
        elif rel.endswith(".py"):
            assert on_ray[rel] == local[rel], rel  # the mended files, byte for byte
    cert = zoo / "out" / "branch_where.py" / "certificates" / "branch_where.1.predicated-control-flow.json"
    assert json.loads(cert.read_text())["paths"]["original"] == "../../../branch_where.py"
    assert run_mend("cert", "verify", str(cert))[0] == 0  # hashes and seal hold where the driver wrote it
    page = on_ray["branch_where.py/review.html"].decode()
    assert f'data-path="{cert}"' in page and "mend-ray-" not in page  # no node's temporary folder


@needs_ray
def test_dead_worker_is_retried_once_then_recorded_and_the_batch_goes_on(cluster, zoo, run_mend):
    # a target error is recorded as locally and not retried; a dying worker is retried once
    specs = ["ray_targets.py:dies", "ray_targets.py:raises", "clean.py"]
    local = json.loads(run_mend("scan", *specs[1:], "--json")[1])  # `dies` would end this process
    assert attempts(zoo, "raises") == 1
    # a separate driver that connects to the cluster by its address; its stdout stays JSON
    # although Ray prints its `(raylet) A worker died ...` messages there
    run = subprocess.run([sys.executable, "-m", "mend.cli", "scan", *specs, "--json", "--ray", cluster],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr
    docs = json.loads(run.stdout)
    assert [d["target"] for d in docs] == specs and untimed(docs[1:]) == untimed(local)
    assert "error" in docs[0] and "sites" not in docs[0]
    assert docs[0]["error"].startswith("ray_targets.py:dies: worker died (after 1 retry): WorkerCrashedError: ")
    assert "factory ray_targets.py:raises failed" in docs[1]["error"] and "no such checkpoint" in docs[1]["error"]
    assert attempts(zoo, "dies") == 2 and attempts(zoo, "raises") == 1 + 1
    assert "3 targets: 1 scanned, 2 failed" in run.stderr


@needs_ray
def test_without_ray_flag_nothing_imports_ray(zoo):
    code = textwrap.dedent("""\
        import sys
        from click.testing import CliRunner
        import mend.cli
        assert "ray" not in sys.modules, "import mend.cli"
        result = CliRunner().invoke(mend.cli.main, ["scan", "clean.py", "branch_where.py", "--json"])
        print(result.exit_code, len(__import__("json").loads(result.stdout)), "ray" in sys.modules)
        """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "2", "False"]


def test_ray_not_installed_is_a_clear_error(zoo, run_mend, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code, _, err = run_mend("scan", "clean.py", "branch_where.py", "--ray")
    assert code == 2 and "pip install 'graphmend[ray]'" in err


def test_ray_option_values(zoo, run_mend):
    # `--ray` takes the next word as its ADDRESS: a target there is named as the mistake
    code, _, err = run_mend("scan", "--ray", "clean.py")
    assert code == 2 and "'clean.py' is not a Ray address" in err and "give --ray after the targets" in err
    code, _, err = run_mend("fix", "clean.py", "--ray")  # a batch of one: it needs --out DIR too
    assert code == 2 and "--ray (a batch of one target) needs --out DIR" in err
