"""The command line: output formats, exit codes and bad input."""
import json

import pytest

from tests.conftest import FIXTURES


def test_exit_1_when_fixable_and_table(run_mend):
    code, out, _ = run_mend("scan", str(FIXTURES / "branch_where.py"))
    assert code == 1
    assert "2 graphs, 1 graph break (1 fixable) at 1 site" in out and "branch_where.py:12" in out


def test_the_table_shows_indexing_as_written(run_mend):
    # source and reasons are code: `h[h > 0]` is not rich markup (it used to print `h *= 2`)
    code, out, _ = run_mend("scan", str(FIXTURES / "mask_update" / "scale.py"))
    assert code == 1
    assert "h[h > 0] *= 2" in " ".join(out.split())


def test_exit_0_when_nothing_fixable(run_mend):
    assert run_mend("scan", str(FIXTURES / "clean.py"))[0] == 0
    assert run_mend("scan", str(FIXTURES / "loop_branch.py"))[0] == 0


def test_json_output(scan_json):
    code, doc = scan_json(str(FIXTURES / "mixed.py"))
    assert code == 1
    assert doc["schema_version"] == "1.0"
    # the branch resumes straight into warnings.warn, a resume that builds no graph:
    # explain would say 3
    assert (doc["graph_break_count"], doc["graph_count"], doc["explain_graph_break_count"]) == (4, 4, 3)
    site = doc["sites"][0]
    assert site["file"] == "tests/fixtures/mixed.py" or site["file"].endswith("tests/fixtures/mixed.py")
    assert {"file", "line", "category", "gb_type", "count", "fixable_by", "reason"} <= set(site)


def test_sarif_output(run_mend, monkeypatch):
    monkeypatch.chdir(FIXTURES.parents[1])
    code, out, _ = run_mend("scan", str(FIXTURES / "mixed.py"), "--sarif")
    assert code == 1
    doc = json.loads(out)
    assert doc["version"] == "2.1.0"
    results = doc["runs"][0]["results"]
    assert len(results) == 4
    rule_ids = [r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]]
    for res in results:
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
        assert res["level"] in ("warning", "note")
        assert res["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
        # relative to the run's %SRCROOT% (the cwd), which the run describes
        assert res["locations"][0]["physicalLocation"]["artifactLocation"] == {
            "uri": "tests/fixtures/mixed.py", "uriBaseId": "%SRCROOT%"}
    assert doc["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")
    # every break of mixed.py is fixable (a warning); an unfixable one is a note
    assert {r["level"] for r in results} == {"warning"}
    code, out, _ = run_mend("scan", str(FIXTURES / "membership_returned.py"), "--sarif")
    assert [r["level"] for r in json.loads(out)["runs"][0]["results"]] == ["note"]


def test_list_targets(run_mend):
    code, out, _ = run_mend("scan", "--list-targets")
    assert code == 0
    for name in ("hf:t5", "hf:bart@fp16", "hf:grounding-dino", "hf:longformer", "hf:phi3"):
        assert name in out


@pytest.mark.parametrize("spec, needle", [
    ("bad_syntax.py", "bad_syntax.py:3: does not parse"),
    ("bad_import.py", "No module named 'a_module_that_does_not_exist'"),
    ("no_model.py", "defines no `Model`"),
    ("bad_factory.py:factory", "must return (model, args)"),
    ("bad_factory.py:factory_not_module", "not a torch.nn.Module"),
    ("bad_factory.py:missing", "has no callable `missing`"),
    ("wrong_shape.py", "rejected its example inputs"),
    ("does_not_exist.py", "no such file"),
])
def test_bad_input_is_one_clear_error(run_mend, spec, needle):
    code, out, err = run_mend("scan", str(FIXTURES / spec))
    assert code == 2
    assert needle in err.replace("\n", " ") or needle in " ".join(err.split())
    assert "Traceback" not in err and out == ""


def test_bad_module_and_catalogue_names(run_mend):
    code, _, err = run_mend("scan", "no_such_pkg.sub:factory")
    assert code == 2 and "cannot import module `no_such_pkg.sub`" in err
    code, _, err = run_mend("scan", "hf:not-a-model")
    assert code == 2 and "not-a-model" in err and "t5" in err


def test_debug_shows_traceback(run_mend):
    code, _, err = run_mend("scan", str(FIXTURES / "wrong_shape.py"), "--debug")
    assert code == 2 and "Traceback" in err


def test_no_target(run_mend):
    code, _, err = run_mend("scan")
    assert code == 2 and "no TARGET" in err


_RUN = "import atexit, sys\nfrom mend import cli\natexit.register(lambda: print('handler ran'))\n" \
       "sys.argv = ['mend'] + sys.argv[1:]\ncli.run()\n"


@pytest.mark.parametrize("args, code, where, text", [
    (["--version"], 0, "stdout", "mend, version"),
    (["scan", "missing_model.py"], 2, "stderr", "missing_model.py"),
    (["scan", "--no-such-option"], 2, "stderr", "No such option"),
])
def test_the_command_keeps_exit_codes_output_and_exit_handlers(tmp_path, args, code, where, text):
    """`mend` (mend.cli:run) skips the interpreter's teardown: its exit code, what it
    printed (to a pipe) and the exit handlers (the warm worker's stop) are still main's."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _RUN, *args], capture_output=True, text=True, cwd=tmp_path,
                         timeout=300)
    assert run.returncode == code and text in getattr(run, where)
    assert run.stdout.rstrip().endswith("handler ran")


def test_fix_keeps_dynamos_own_warnings_off_stderr_and_reads_a_torch_alias(tmp_path):
    """helper-67: Dynamo's "Graph break from `Tensor.item()`, consider setting ..." warning,
    from mend's verification compiles, reached the user's stderr; `mend` sets
    TORCH_LOGS=-dynamo,-inductor unless the user set it. The fixture counts nonzero's rows
    under `import torch as th`, which item-operand rewrites to `th.count_nonzero`."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    model = tmp_path / "model.py"
    shutil.copy(Path(__file__).parent / "fixtures" / "nonzero_count_torch_alias.py", model)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", _RUN, "fix", str(model), "--unsafe-fixes"], capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "breaks 1 -> 0" in run.stdout and "th.count_nonzero(mask)" in run.stdout
    assert "consider setting" not in run.stderr and "torch/_dynamo" not in run.stderr, run.stderr


def test_a_reason_names_the_users_lines_not_the_partly_mended_files():
    # helper-86: a reason from a later round said "line 28", the partly mended file's line,
    # where the user's line 28 was another statement
    from mend.pipeline.records import original_lines

    original = "def f(x):\n    y = x.item()\n    return y\n"
    current = "_T = {}\n\n\ndef f(x):\n    y = x.item()\n    return y\n"
    assert original_lines("read in place (line 5); see line 99", current, original) == \
        "read in place (line 2); see line 99"
    assert original_lines("line 5", original, original) == "line 5"
