"""mend fix on single-file targets: rewrites verified, emitted, declined with reasons."""
import dataclasses
import json
import shutil
import stat

import jsonschema

from mend.fix import certificate, fix
from mend.report import schema
from tests.conftest import FIXTURES


def test_branch_fixed_and_verified():
    res = fix(str(FIXTURES / "branch_where.py"), unsafe_fixes=True, max_examples=10)
    assert (res.before.graph_break_count, res.after.graph_break_count) == (1, 0)
    assert res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == "predicated-control-flow"
    assert rw["evidence"]["passed"] and rw["evidence"]["predicate_outcomes"]["12"]["forced"] == [False, True]
    assert "torch.where(h.sum() > 0, h * 2.0, h - 1.0)" in res.mended
    jsonschema.validate(certificate(res, rw), schema("certificate"))


def test_mixed_fixes_all_four_rules():
    res = fix(str(FIXTURES / "mixed.py"), unsafe_fixes=True, max_examples=4)
    fixed = {int(rw["site"].rsplit(":", 1)[1]): rw["rule"] for rw in res.rewrites}
    # 18, the warnings.warn after the check, was declined while mend::capture crashed
    # Inductor's code generation (a deviceless extern kernel; see mend.runtime._capture);
    # 19, `scale = h.abs().max().item()` only divides `h`: kept a 0-d tensor (item-operand)
    assert fixed == {15: "deferred-side-effects", 16: "predicated-validation", 18: "deferred-side-effects",
                     19: "item-operand"}
    assert "compiled:inductor/eval" in res.rewrites[-1]["evidence"]["modes"]
    assert (res.before.graph_count, res.after.graph_count) == (4, 1) and res.after.sites == []


def test_a_rule_that_raises_declines_its_site_and_the_run_goes_on(monkeypatch):
    """A bug in one rule (an exception from its rewrite) is that site's decline, named as an
    internal error; the other sites are still fixed and nothing of the failing rule is emitted."""
    from mend.rules import RULES

    def broken(module, line):
        raise ValueError("boom")

    monkeypatch.setitem(RULES, "item-operand", dataclasses.replace(RULES["item-operand"], rewrite=broken))
    res = fix(str(FIXTURES / "mixed.py"), unsafe_fixes=True, max_examples=3)
    assert {rw["rule"] for rw in res.rewrites} == {"deferred-side-effects", "predicated-validation"}
    (d,) = [d for d in res.declined if d["rule"] == "item-operand"]
    assert "internal error" in d["reason"] and "ValueError: boom" in d["reason"]
    assert ".item()" in res.mended


def test_loop_branch_is_left_alone():
    res = fix(str(FIXTURES / "loop_branch.py"), unsafe_fixes=True, max_examples=5)
    assert res.rewrites == [] and res.mended == res.original


def test_cli_diff_by_default_does_not_touch_the_file(run_mend, tmp_path):
    src = tmp_path / "m.py"
    shutil.copy(FIXTURES / "branch_where.py", src)
    before = src.read_text()
    code, out, _ = run_mend("fix", str(src), "--examples", "5")
    header, diff = out.split("\n", 1)
    # one header line per rewrite, with its fix safety, then the unified diff
    assert code == 0 and header.startswith(f"# mend: [safe] {src}:") and "predicated-control-flow" in header
    assert diff.startswith(f"--- {src}\n+++ {src}\n") and "+        h = torch.where(" in diff
    assert src.read_text() == before


def test_cli_write_is_atomic_and_writes_certificates(run_mend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "m.py"
    shutil.copy(FIXTURES / "branch_where.py", src)
    code, out, err = run_mend("fix", "--unsafe-fixes", str(src), "--write", "--examples", "5")
    assert code == 0, err
    assert "torch.where(" in src.read_text()
    certs = list((tmp_path / "mended" / "certificates").glob("*.json"))
    assert len(certs) == 1
    jsonschema.validate(json.loads(certs[0].read_text()), schema("certificate"))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".mend")]  # no temp file left
    # the original is gone, but undoing the certificate's diff gives it back (helper-89: the note
    # said only the mended file's hash was checked)
    code, out, err = run_mend("cert", "verify", str(certs[0]))
    assert code == 0, out + err
    assert "rebuilt by undoing the certificate's diff" in out and "only the mended file's hash" not in out


def test_cli_read_only_file_is_an_error_and_unchanged(run_mend, tmp_path, monkeypatch):
    src = tmp_path / "m.py"
    shutil.copy(FIXTURES / "branch_where.py", src)
    src.chmod(stat.S_IRUSR)
    code, _, err = run_mend("fix", "--unsafe-fixes", str(src), "--write", "--examples", "5")
    assert code == 2 and "read-only" in err
    assert src.read_text() == (FIXTURES / "branch_where.py").read_text()


def test_cli_json_shape(run_mend):
    code, out, _ = run_mend("fix", "--unsafe-fixes", str(FIXTURES / "branch_where.py"), "--json", "--examples", "5")
    assert code == 0
    doc = json.loads(out)
    jsonschema.validate(doc, schema("fix"))
    jsonschema.validate(doc["before"], schema("scan"))
    jsonschema.validate(doc["after"], schema("scan"))
    assert doc["after"]["graph_break_count"] == 0


def test_cli_json_lists_unfixable_breaks(run_mend):
    """helper-36: a site the predicated rule declines when matching (a nested `if`) had its
    reason only in `after.sites`; the JSON now lists it under `unfixable`, with the original line,
    as the text report does."""
    code, out, _ = run_mend("fix", str(FIXTURES / "nested_branch_unfixable.py"), "--json", "--examples", "5")
    assert code == 0
    doc = json.loads(out)
    jsonschema.validate(doc, schema("fix"))
    assert [r["rule"] for r in doc["rewrites"]] == ["predicated-control-flow"] and doc["declined"] == []
    (left,) = doc["unfixable"]
    assert left["site"].endswith("nested_branch_unfixable.py:14") and left["category"] == "data-dependent-branch"
    assert "predicated-control-flow declines" in left["reason"]


def test_a_lost_torchscript_compile_is_reported(run_mend):
    """mend's runtime calls are not TorchScript: the original module scripts, the mended one does
    not. Reported in the evidence and as a note (TorchScript is deprecated), not a decline."""
    code, out, _ = run_mend("fix", "--unsafe-fixes", str(FIXTURES / "first_call.py"), "--json", "--examples", "5")
    assert code == 0
    (rw,) = json.loads(out)["rewrites"]
    assert rw["rule"] == "deferred-side-effects" and rw["evidence"]["torchscript"].startswith("lost: ")
    code, out, _ = run_mend("fix", "--unsafe-fixes", str(FIXTURES / "first_call.py"), "--examples", "5")
    assert code == 0 and "torch.jit.script compiled the original module, not the mended one" in out


def test_cli_out_dir(run_mend, tmp_path):
    code, _, _ = run_mend("fix", "--unsafe-fixes", str(FIXTURES / "branch_where.py"), "--out", str(tmp_path / "o"), "--examples", "5")
    assert code == 0
    assert "torch.where(" in (tmp_path / "o" / "branch_where.py").read_text()
    assert "torch.where(" not in (FIXTURES / "branch_where.py").read_text()


def test_file_factory_target_is_fixed_through_its_factory():
    res = fix(str(FIXTURES / "mixed.py") + ":factory", unsafe_fixes=True, max_examples=3)
    assert {int(rw["site"].rsplit(":", 1)[1]) for rw in res.rewrites} == {15, 16, 18, 19}
    assert all(rw["evidence"]["passed"] for rw in res.rewrites)
    assert (res.before.graph_break_count, res.after.graph_break_count) == (4, 0)
    assert res.file == (FIXTURES / "mixed.py").resolve()


def test_file_factory_with_keyword_inputs_is_verified(tmp_path):
    """A factory returning keyword inputs is fixed like one returning positional inputs."""
    src = tmp_path / "kw.py"
    src.write_text("import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x, *, scale):\n"
                   "        if scale.sum() > 0:\n            y = x + scale\n        else:\n            y = x - scale\n"
                   "        return y\n\n\ndef make():\n    return M(), (torch.randn(2, 3),), {'scale': torch.ones(2, 3)}\n")
    res = fix(f"{src}:make", unsafe_fixes=True, max_examples=4)
    (rw,) = res.rewrites
    assert "torch.where(scale.sum() > 0, x + scale, x - scale)" in res.mended
    assert rw["evidence"]["passed"] and list(rw["evidence"]["predicate_outcomes"].values())[0]["forced"] == [False, True]


def test_module_factory_target_fixes_the_users_module_in_place(tmp_path, monkeypatch, run_mend):
    """MODULE:FACTORY: the site is in a module of the user's package; verified through the
    import overlay in fresh interpreters; --write replaces that module atomically."""
    pkg = tmp_path / "mend_modfix_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
        "        h = self.fc(x)\n        if h.sum() > 0:\n            y = h * 2.0\n        else:\n"
        "            y = h - 1.0\n        return y\n")
    (tmp_path / "mend_modfix_build.py").write_text(
        "import torch\n\nfrom mend_modfix_pkg.model import Block\n\n\ndef make():\n"
        "    return Block(), (torch.randn(2, 4),)\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_mend("fix", "--unsafe-fixes", "mend_modfix_build:make", "--examples", "3", "--write")
    assert code == 0, err
    assert "breaks 1 -> 0" in out
    assert "torch.where(h.sum() > 0, h * 2.0, h - 1.0)" in (pkg / "model.py").read_text()
    assert list((tmp_path / "mended" / "certificates").glob("model.1.predicated-control-flow.json"))


def test_sites_past_the_round_limit_are_declined_not_dropped():
    """mixed.py has four fixable sites; with two rounds, two are rewritten and the other two
    are declined as not attempted (they were once listed fixable and then in neither list)."""
    res = fix(str(FIXTURES / "mixed.py"), unsafe_fixes=True, max_examples=3, max_rounds=2)
    assert len(res.rewrites) == 2
    left = [d for d in res.declined if "round limit" in d["reason"]]
    assert len(left) == 2 and all("--max-rounds" in d["reason"] for d in left)
    done = {rw["site"] for rw in res.rewrites}
    assert not done & {d["site"] for d in left}
    # helper-83: labelled in the user's file at its original lines, not in a rescan's scratch copy
    before = {f"{s.display_file}:{s.line}" for s in res.before.sites}
    assert {d["site"] for d in left} <= before, (left, before)


def test_sites_past_the_time_limit_are_declined_not_dropped():
    """A limit already passed when the first candidate would be tried: nothing is verified, and
    each of mixed.py's four fixable sites is declined as not attempted, naming the limit."""
    res = fix(str(FIXTURES / "mixed.py"), unsafe_fixes=True, max_examples=3, time_limit=1e-6)
    assert res.rewrites == [] and res.mended == res.original
    left = [d for d in res.declined if "time limit of this target was reached" in d["reason"]]
    assert len(left) == 4 and all("--time-limit" in d["reason"] for d in left), res.declined
    assert all("nothing was rewritten before it" in d["reason"] for d in left)   # no mended file to rerun on


def test_the_time_limit_option_is_checked_and_documented(run_mend):
    code, out, err = run_mend("fix", str(FIXTURES / "mixed.py"), "--time-limit", "0.5")
    assert code == 2 and "0.5" in err   # below its minimum: click names the option
    code, out, err = run_mend("fix", "--help")
    assert "--time-limit SECONDS" in out
