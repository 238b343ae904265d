"""Batch targets (issue 13): globs, every factory of a module, catalogue patterns; one
combined report; a failing target is recorded and the batch goes on."""
import json
import shutil
import textwrap

import pytest

from mend.errors import TargetError
from mend.targets.batch import expand
from tests.conftest import FIXTURES


def test_catalogue_patterns_expand_in_catalogue_order():
    from mend.targets.hf import CATALOGUE

    assert expand(["hf:*"]) == [f"hf:{n}" for n in CATALOGUE]
    assert expand(["hf:bart*"]) == ["hf:bart", "hf:bart@fp16"]
    assert expand(["hf:t5", "hf:t*"]) == ["hf:t5"]  # duplicates dropped, first kept
    newest = expand(["hf:newest/*"])
    assert newest and all(s.startswith("hf:newest/") for s in newest)
    assert not any(s.startswith("hf:newest/") for s in expand(["hf:*"]))


def test_patterns_matching_nothing_are_errors():
    with pytest.raises(TargetError, match="matches no catalogue row"):
        expand(["hf:nothing*"])
    with pytest.raises(TargetError, match="matches no Python file"):
        expand(["no/such/*.py"])


def test_file_globs_and_module_factories(tmp_path, monkeypatch):
    (tmp_path / "zoo" / "deep").mkdir(parents=True)
    for rel in ("zoo/a.py", "zoo/b.py", "zoo/deep/c.py"):
        shutil.copy(FIXTURES / "clean.py", tmp_path / rel)
    (tmp_path / "zoo" / "notes.txt").write_text("x")
    (tmp_path / "factories.py").write_text(textwrap.dedent("""\
        from os.path import join          # imported: not a factory
        def small(width=4): ...
        def large(*args, **kwargs): ...
        def needs(model_dir): ...         # a required argument: not a factory
        def _private(): ...
        class Config: ...
        """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert expand(["zoo/*.py"]) == ["zoo/a.py", "zoo/b.py"]
    assert expand(["zoo/**/*.py"]) == ["zoo/a.py", "zoo/b.py", "zoo/deep/c.py"]
    assert expand(["factories:*"]) == ["factories:small", "factories:large"]
    with pytest.raises(TargetError, match="cannot import module `nosuchmod`"):
        expand(["nosuchmod:*"])


def test_batch_scan_reports_all_and_goes_on_after_a_failure(tmp_path, run_mend, monkeypatch):
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "a.py")
    shutil.copy(FIXTURES / "clean.py", tmp_path / "b.py")
    shutil.copy(FIXTURES / "bad_syntax.py", tmp_path / "c.py")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_mend("scan", "*.py", "--json")
    assert code == 2  # the worst result: a target failed
    docs = json.loads(out)
    assert [(d["target"], d.get("graph_break_count"), "error" in d) for d in docs] == \
        [("a.py", 1, False), ("b.py", 0, False), ("c.py", None, True)]
    assert "does not parse" in docs[2]["error"] and "3 targets: 2 scanned, 1 failed" in err
    # each scanned target's own build-and-scan time (s), for a zoo's slowest models
    assert all(d["seconds"] > 0 for d in docs[:2]) and "seconds" not in docs[2]
    code, out, _ = run_mend("scan", "*.py", "--sarif")
    run = json.loads(out)["runs"][0]
    assert code == 2 and len(run["results"]) == 1
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["properties"]["target"] == "c.py" and run["invocations"][0]["executionSuccessful"] is False
    code, _, _ = run_mend("scan", "a.py", "b.py")  # no failure: the fixable break decides
    assert code == 1


def test_batch_fix_writes_each_target_under_out_and_one_report(tmp_path, run_mend, monkeypatch):
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "a.py")
    shutil.copy(FIXTURES / "bad_syntax.py", tmp_path / "c.py")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_mend("fix", "a.py", "c.py")
    assert code == 2 and "a batch needs --out DIR" in err
    code, out, err = run_mend("fix", "*.py", "--out", "out", "--json")
    assert code == 2, err
    docs = json.loads(out)
    assert docs == json.loads((tmp_path / "out" / "report.json").read_text())
    assert [d["target"] for d in docs] == ["a.py", "c.py"] and "does not parse" in docs[1]["error"]
    assert [r["rule"] for r in docs[0]["rewrites"]] == ["predicated-control-flow"]
    assert docs[0]["seconds"] > 0 and "seconds" not in docs[1]
    assert (tmp_path / "out" / "a.py" / "a.py").is_file() and (tmp_path / "out" / "a.py" / "review.html").is_file()
    assert (tmp_path / "a.py").read_text() == (FIXTURES / "branch_where.py").read_text()  # never touched
