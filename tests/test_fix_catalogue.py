"""mend fix on hf: catalogue rows (torch 2.13.0, transformers 4.52.4), and the import
overlay that loads the mended copies. Each row takes about a minute on 2 cores."""
import json
import subprocess
import sys
import textwrap

import pytest

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(transformers.__version__ != "4.52.4",
                                reason="break sites and counts are pinned to transformers 4.52.4")


@pytest.fixture(scope="module")
def t5_fixed(tmp_path_factory):
    from click.testing import CliRunner

    from mend.cli import main

    out = tmp_path_factory.mktemp("mended")
    result = CliRunner().invoke(main, ["fix", "hf:t5", "--out", str(out), "--json", "--examples", "4",
                                       "--unsafe-fixes"])
    assert result.exit_code == 0, result.stderr
    return out, json.loads(result.stdout)


def test_t5_goes_to_zero_breaks(t5_fixed):
    out, doc = t5_fixed
    assert (doc["before"]["graph_break_count"], doc["after"]["graph_break_count"]) == (3, 0)
    (rw,) = doc["rewrites"]
    assert rw["rule"] == "deferred-side-effects" and rw["file"] == "transformers/models/t5/modeling_t5.py"
    # embedding lookups follow the warning in its graph: the ordered form, an unsafe fix (a failing
    # lookup could change what is printed before the error under inductor)
    assert rw["safety"]["label"] == "unsafe" and "ordered=True" in rw["diff"]
    assert (out / "transformers/models/t5/modeling_t5.py").is_file()
    assert len(list((out / "certificates").glob("*.json"))) == 1


def test_overlay_runner_loads_the_mended_copy(t5_fixed, tmp_path):
    out, _ = t5_fixed
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import torch
        import transformers.models.t5.modeling_t5 as m
        from mend.targets.hf import build
        model, args, kwargs = build("t5")
        with torch.no_grad():
            ex = torch._dynamo.explain(model)(*args, **kwargs)
        print(m.__file__)
        print("graphs", ex.graph_count, "breaks", ex.graph_break_count)
    """))
    proc = subprocess.run([sys.executable, "-m", "mend.run", "--overlay", str(out), str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-2].startswith(str(out.resolve())) and lines[-1] == "graphs 1 breaks 0"


@pytest.mark.parametrize("name, before", [("bart@fp16", 6), ("phi3", 5)])
def test_catalogue_rows_fixed(name, before):
    from mend.fix import fix

    res = fix(f"hf:{name}", unsafe_fixes=True, max_examples=4)
    assert res.before.graph_break_count == before
    assert res.after.graph_break_count == 0
    for rw in res.rewrites:
        ev = rw["evidence"]
        branch = bool(ev["predicate_outcomes"])  # a forced predicate: forced under compile too
        assert ev["passed"] and ev["modes"] == (["eager", "compiled:inductor"] + ["compiled:eager-backend/forced"] * branch
                                                + ["eager/autocast(<the inputs' device>, bfloat16)/example"])
        for outcome in ev["predicate_outcomes"].values():
            assert outcome["forced"] == [False, True]
