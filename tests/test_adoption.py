"""Issue 14: the Python API, baselines, [tool.mend], user vs library sites, the pytest helper."""
import importlib.util
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import mend
from mend import baseline as bl
from mend import config as cfg
from mend.errors import MendError
from mend.testing import assert_no_new_graph_breaks
from tests.conftest import FIXTURES, SHARED_CASES


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_adopt_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- the Python API ---------------------------------------------------------------------------

def test_scan_model_on_a_module_the_user_holds():
    mod = _load(FIXTURES / "branch_where.py")
    r = mend.scan_model(mod.Model(), *mod.get_inputs())
    assert (r.graph_count, r.graph_break_count) == (2, 1)
    (site,) = r.sites
    assert (site.line, site.category, site.fixable_by, site.origin, site.package) == \
        (12, "data-dependent-branch", "predicated-control-flow", "user", None)
    assert site.qualname == "Model.forward"
    doc = r.to_json()
    assert doc["sites"][0]["origin"] == "user" and doc["graph_break_count"] == 1


def test_scan_model_passes_keyword_inputs():
    class Gate(torch.nn.Module):
        def forward(self, x, *, scale):
            if (x * scale).sum() > 0:
                return x + 1
            return x

    r = mend.scan_model(Gate(), torch.ones(3), scale=torch.tensor(2.0))
    assert r.graph_break_count == 1 and r.sites[0].qualname.endswith("Gate.forward")


def test_scan_model_counts_a_clean_model_as_clean():
    mod = _load(FIXTURES / "clean.py")
    r = mend.scan_model(mod.Model(4), torch.randn(2, 4))
    assert (r.graph_count, r.graph_break_count, r.sites) == (1, 0, [])


def test_library_sites_name_their_package(tmp_path):
    # a site in an installed package: the transformers t5 logger row
    pytest.importorskip("transformers")
    from mend.scan import library_package
    import transformers

    f = str(Path(transformers.__file__).with_name("modeling_utils.py"))
    assert library_package(f) == "transformers"
    assert library_package(os.__file__) == "python"
    assert library_package(str(tmp_path / "model.py")) is None


def test_fix_model_rejects_a_factory_it_cannot_import_again():
    with pytest.raises(MendError, match="module-level factory"):
        mend.fix_model(lambda: None)


def test_fix_model_names_a_file_factory_by_path():
    from mend.api import spec_of

    mod = _load(FIXTURES / "hf_kwargs_factory.py")
    name = next(n for n, v in vars(mod).items() if callable(v) and getattr(v, "__module__", "") == mod.__name__
                and not isinstance(v, type))
    assert spec_of(getattr(mod, name)) == f"{(FIXTURES / 'hf_kwargs_factory.py').resolve()}:{name}"


# --- baselines ----------------------------------------------------------------------------------

def _project(tmp_path: Path, model: str = "branch_where.py") -> Path:
    shutil.copy(FIXTURES / model, tmp_path / "model.py")
    return tmp_path / "model.py"


def test_baseline_keys_survive_edits_elsewhere_and_reformatting(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    code, _, err = run_mend("scan", "model.py", "--baseline", "b.json", "--update-baseline")
    assert code == 0 and "wrote 1 site" in err
    entry = json.loads((tmp_path / "b.json").read_text())["entries"][0]
    assert (entry["file"], entry["function"], entry["line"]) == ("model.py", "Model.forward", 12)
    # lines move, the statement is reformatted and commented: still the same entry
    text = model.read_text().replace("        h = self.fc(x)\n", "        # moved\n\n        h = self.fc(x)\n")
    model.write_text(text.replace("if h.sum() > 0:", "if (h.sum()  >  0):  # reformatted"))
    code, _, err = run_mend("scan", "model.py", "--baseline", "b.json")
    assert code == 0, err
    assert "0 new break site(s), 1 in the baseline, 0 baseline entries removable" in err


def _baselined_then_a_new_print(tmp_path, run_mend, monkeypatch) -> None:
    """The model's break baselined, then a new one added at line 16 (a print)."""
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    assert run_mend("scan", "model.py", "--baseline", "b.json", "--update-baseline")[0] == 0
    model.write_text(model.read_text().replace("        return h\n", "        print('h', h.shape)\n        return h\n"))


def test_a_new_break_fails_and_only_it_is_named(tmp_path, run_mend, monkeypatch):
    _baselined_then_a_new_print(tmp_path, run_mend, monkeypatch)
    code, out, err = run_mend("scan", "model.py", "--baseline", "b.json", "--json")
    assert code == 1
    new = [ln for ln in err.splitlines() if ln.startswith("mend: new graph break")]
    assert len(new) == 1 and "model.py:16" in new[0] and "print-logging" in new[0], err
    sites = json.loads(out)["sites"]
    assert sorted((s["line"], s["baselined"]) for s in sites) == [(12, True), (16, False)]


def test_a_fixed_break_is_reported_removable(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _project(tmp_path)
    assert run_mend("scan", "model.py", "--baseline", "b.json", "--update-baseline")[0] == 0
    model.write_text(model.read_text().replace("if h.sum() > 0:", "if True:"))
    code, _, err = run_mend("scan", "model.py", "--baseline", "b.json")
    assert code == 0
    assert "fixed, removable from the baseline: model.py in Model.forward (was line 12" in err


def test_identical_statements_count(tmp_path):
    # two identical breaking statements in one function are two entries with one key
    from mend.scan import scan
    from mend.targets import load_target

    src = textwrap.dedent("""\
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                print(x.shape)
                x = x + 1
                print(x.shape)
                return x
        def get_inputs():
            return (torch.ones(2),)
        """)
    (tmp_path / "m.py").write_text(src)
    sites = scan(load_target(str(tmp_path / "m.py"))).sites
    assert len({bl.key(s) for s in sites}) == 1 and len(sites) == 2
    one = bl.entries(sites[:1])
    cmp = bl.compare(sites, one)
    assert (len(cmp.new), len(cmp.known), cmp.removable) == (1, 1, [])


def test_bad_baseline_is_a_clear_error_before_compiling(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    (tmp_path / "b.json").write_text("{not json")
    code, _, err = run_mend("scan", "model.py", "--baseline", "b.json")
    assert code == 2 and "b.json: cannot be read as a baseline" in err
    (tmp_path / "b.json").write_text('{"schema": "other", "entries": []}')
    code, _, err = run_mend("scan", "model.py", "--baseline", "b.json")
    assert code == 2 and "not a mend baseline" in err
    code, _, err = run_mend("scan", "model.py", "--baseline", "missing.json")
    assert code == 2 and "no such baseline" in err
    code, _, err = run_mend("scan", "model.py", "--update-baseline")
    assert code == 2 and "--update-baseline needs --baseline" in err


def test_baseline_write_is_atomic_and_refuses_read_only(tmp_path):
    target = tmp_path / "b.json"
    target.write_text("keep")
    target.chmod(0o444)  # read-only by its mode bits (root's os.access would still say writable)
    with pytest.raises(bl.BaselineError, match="read-only"):
        bl.write(target, [])
    assert target.read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_sarif_carries_the_baseline_state(tmp_path, run_mend, monkeypatch):
    _baselined_then_a_new_print(tmp_path, run_mend, monkeypatch)
    code, out, _ = run_mend("scan", "model.py", "--baseline", "b.json", "--sarif")
    assert code == 1
    states = sorted((r["locations"][0]["physicalLocation"]["region"]["startLine"], r["baselineState"])
                    for r in json.loads(out)["runs"][0]["results"])
    assert states == [(12, "unchanged"), (16, "new")]


# --- [tool.mend] ----------------------------------------------------------------------------------

def _pyproject(tmp_path: Path, body: str) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.mend]\n" + textwrap.dedent(body))


def test_config_targets_and_baseline_are_read_from_pyproject(tmp_path, run_mend, monkeypatch):
    _project(tmp_path)
    _pyproject(tmp_path, 'targets = ["model.py"]\nbaseline = "mend-baseline.json"\n')
    sub = tmp_path / "src"
    sub.mkdir()
    monkeypatch.chdir(sub)  # found from a folder below, paths relative to pyproject.toml
    code, _, err = run_mend("scan", "--update-baseline")
    assert code == 0 and (tmp_path / "mend-baseline.json").is_file(), err
    code, _, err = run_mend("scan")
    assert code == 0 and "1 in the baseline" in err
    conf = cfg.load()
    assert conf.targets == [str(tmp_path / "model.py")] and conf.baseline == tmp_path / "mend-baseline.json"


def test_cli_flags_override_the_config(tmp_path, run_mend, monkeypatch):
    _project(tmp_path)
    _pyproject(tmp_path, 'targets = ["model.py"]\nexclude = ["model.py"]\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_mend("scan", "--json")
    assert code == 0 and json.loads(out)["sites"][0]["excluded"] is True  # excluded: nothing counts
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "other.py")
    code, _, _ = run_mend("scan", "other.py")  # a TARGET on the command line replaces `targets`
    assert code == 1


def test_unknown_key_is_an_error_naming_it(tmp_path, run_mend, monkeypatch):
    _project(tmp_path)
    _pyproject(tmp_path, 'targets = ["model.py"]\nbaselin = "b.json"\n')
    monkeypatch.chdir(tmp_path)
    code, _, err = run_mend("scan")
    assert code == 2 and "unknown key 'baselin'" in err and "pyproject.toml" in err


@pytest.mark.parametrize("body, needle", [
    ('verify = "paranoid"\n', "verify"),
    ('targets = "model.py"\n', "targets"),
    ('rules = ["no-such-rule"]\n', "unknown rule 'no-such-rule'"),
    ('only_user = "yes"\n', "only_user"),
    ('targets = [\n', "cannot be read as TOML"),
])
def test_bad_values_are_errors(tmp_path, body, needle):
    _pyproject(tmp_path, body)
    with pytest.raises(cfg.ConfigError, match="pyproject.toml") as exc:
        cfg.load(tmp_path)
    assert needle in str(exc.value)


def test_no_config_is_the_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    conf = cfg.load(tmp_path)
    assert conf.path is None and conf.targets == [] and conf.rules is None


def test_rules_setting_keeps_other_rules_from_rewriting(tmp_path, run_mend, monkeypatch):
    _project(tmp_path)
    _pyproject(tmp_path, 'targets = ["model.py"]\nrules = ["deferred-side-effects"]\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = run_mend("fix", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["rewrites"] == []
    assert [d["reason"] for d in doc["declined"]] == [
        "the rule predicated-control-flow is not enabled ([tool.mend] rules: deferred-side-effects)"]


def test_only_user_scopes_the_exit_code(tmp_path):
    from mend.scan import Site

    user = Site(str(tmp_path / "m.py"), 3, 0, "forward", "x", "t", "m", "other", "predicated-control-flow", "r", 1)
    import transformers

    lib = Site(str(Path(transformers.__file__)), 3, 0, "forward", "y", "t", "m", "other", None, "r", 1)
    assert (user.origin, lib.origin, lib.package) == ("user", "library", "transformers")


# --- the pytest helper --------------------------------------------------------------------------------

def test_helper_fails_with_the_site_then_passes_once_baselined(tmp_path, monkeypatch):
    monkeypatch.delenv("MEND_UPDATE_BASELINE", raising=False)
    mod = _load(FIXTURES / "branch_where.py")
    base = tmp_path / "b.json"
    with pytest.raises(AssertionError) as exc:
        assert_no_new_graph_breaks(mod.Model(), *mod.get_inputs(), baseline=base)
    msg = str(exc.value)
    assert "1 new graph break site(s)" in msg and "branch_where.py:12" in msg and "data-dependent-branch" in msg
    monkeypatch.setenv("MEND_UPDATE_BASELINE", "1")
    assert_no_new_graph_breaks(mod.Model(), *mod.get_inputs(), baseline=base)  # records it
    monkeypatch.delenv("MEND_UPDATE_BASELINE")
    r = assert_no_new_graph_breaks(mod.Model(), *mod.get_inputs(), baseline=base)
    assert r.graph_break_count == 1


def test_plugin_fixture_and_options_in_a_pytest_run(tmp_path):
    """The pytest11 plugin in a real pytest run: the first run fails naming the site, the
    --mend-update-baseline run passes and writes the baseline, the third run passes."""
    import subprocess

    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "branch_model.py")
    (tmp_path / "test_model.py").write_text(textwrap.dedent("""\
        from branch_model import Model, get_inputs
        from mend.testing import assert_no_new_graph_breaks

        def test_no_new_breaks(mend_baseline):
            assert_no_new_graph_breaks(Model(), *get_inputs(), baseline=mend_baseline)
        """))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmend_baseline = mend-baseline.json\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MEND_UPDATE_BASELINE", None)

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    first = run()
    assert first.returncode == 1 and "branch_model.py:12" in first.stdout, first.stdout[-2000:]
    second = run("--mend-update-baseline")
    assert second.returncode == 0, second.stdout[-2000:]
    assert json.loads((tmp_path / "mend-baseline.json").read_text())["entries"][0]["function"] == "Model.forward"
    third = run()
    assert third.returncode == 0, third.stdout[-2000:]


@pytest.mark.skipif(not (SHARED_CASES / "001_energy_gate_branch.py").is_file(), reason="../shared/cases is absent")
def test_done_when_case_001(tmp_path, monkeypatch):
    monkeypatch.delenv("MEND_UPDATE_BASELINE", raising=False)
    mod = _load(SHARED_CASES / "001_energy_gate_branch.py")
    r = mend.scan_model(mod.Model(), *mod.get_inputs())
    assert r.graph_break_count == 1 and [(s.line, s.category) for s in r.sites] == [(34, "data-dependent-branch")]
    with pytest.raises(AssertionError, match="001_energy_gate_branch.py:34"):
        assert_no_new_graph_breaks(mod.Model(), *mod.get_inputs(), baseline=tmp_path / "b.json")
    bl.write(tmp_path / "b.json", r.sites)
    assert_no_new_graph_breaks(mod.Model(), *mod.get_inputs(), baseline=tmp_path / "b.json")


# --- regressions from the adversarial review ---------------------------------------------------

def test_update_on_a_subset_keeps_the_other_targets_entries(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "a.py")
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "b.py")
    assert run_mend("scan", "a.py", "b.py", "--baseline", "bl.json", "--update-baseline")[0] == 0
    assert run_mend("scan", "a.py", "--baseline", "bl.json", "--update-baseline")[0] == 0
    files = sorted(e["file"] for e in json.loads((tmp_path / "bl.json").read_text())["entries"])
    assert files == ["a.py", "b.py"]
    code, _, err = run_mend("scan", "a.py", "--baseline", "bl.json")  # b.py was not scanned: not removable
    assert code == 0 and "0 baseline entries removable" in err
    shutil.copy(FIXTURES / "bad_syntax.py", tmp_path / "c.py")
    code, _, err = run_mend("scan", "a.py", "c.py", "--baseline", "bl.json", "--update-baseline")
    assert code == 2 and "was not updated" in err
    assert len(json.loads((tmp_path / "bl.json").read_text())["entries"]) == 2


def test_baseline_outside_the_tree_holds_from_any_folder(tmp_path, run_mend, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "ci").mkdir()
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "src" / "m.py")
    monkeypatch.chdir(tmp_path)
    assert run_mend("scan", "src/m.py", "--baseline", "ci/b.json", "--update-baseline")[0] == 0
    assert json.loads((tmp_path / "ci" / "b.json").read_text())["entries"][0]["file"] == "../src/m.py"
    monkeypatch.chdir(tmp_path / "src")
    code, _, err = run_mend("scan", "m.py", "--baseline", "../ci/b.json")
    assert code == 0 and "1 in the baseline" in err


def test_exclude_is_relative_to_the_pyproject(tmp_path, run_mend, monkeypatch):
    (tmp_path / "tests").mkdir()
    shutil.copy(FIXTURES / "branch_where.py", tmp_path / "tests" / "m.py")
    _pyproject(tmp_path, 'exclude = ["tests/*"]\n')
    monkeypatch.chdir(tmp_path / "tests")
    assert run_mend("scan", "m.py")[0] == 0


def test_config_errors_keep_their_brackets_and_bad_tables_are_errors(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _pyproject(tmp_path, 'verfy = "strict"\n')
    code, _, err = run_mend("scan", "x.py")
    assert code == 2 and "[tool.mend] has unknown key 'verfy'" in err
    (tmp_path / "pyproject.toml").write_text("[tool]\nmend = 3\n")
    code, _, err = run_mend("scan", "x.py")
    assert code == 2 and "[tool.mend] must be a table" in err and "internal error" not in err
    (tmp_path / "pyproject.toml").write_text("tool = 1\n")
    assert cfg.load(tmp_path).path is None


def test_configured_module_targets_import_from_the_project_root(tmp_path, run_mend, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "models.py").write_text(textwrap.dedent("""\
        import torch
        class M(torch.nn.Module):
            def forward(self, x):
                return x + 1
        def build():
            return M(), (torch.ones(2),)
        """))
    _pyproject(tmp_path, 'targets = ["pkg.models:build"]\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    code, out, err = run_mend("scan", "--json")
    assert code == 0 and json.loads(out)["graph_break_count"] == 0, err


def test_update_baseline_to_an_unwritable_place_fails_before_scanning(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    code, _, err = run_mend("scan", "model.py", "--baseline", "no/such/dir/b.json", "--update-baseline")
    assert code == 2 and "does not exist" in err and "graph" not in err


def test_flags_switch_config_booleans_off(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    _pyproject(tmp_path, 'only_user = true\nunsafe_fixes = true\n')
    assert run_mend("scan", "model.py", "--no-only-user")[0] == 1
    assert "No such option" not in run_mend("fix", "model.py", "--no-unsafe-fixes", "--examples", "1", "--json")[2]


def test_baseline_marks_reach_every_target_that_shares_a_site(tmp_path, run_mend, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _project(tmp_path)
    assert run_mend("scan", "model.py", "--baseline", "b.json", "--update-baseline")[0] == 0
    code, out, _ = run_mend("scan", "model.py", str(tmp_path / "model.py"), "--baseline", "b.json", "--json")
    docs = json.loads(out)
    assert code == 0 and len(docs) == 2 and all(d["sites"][0]["baselined"] is True for d in docs)


def test_a_new_copy_of_a_known_statement_is_the_one_named(tmp_path):
    from mend.scan import scan
    from mend.targets import load_target

    src = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n{body}        return x\n" \
          "def get_inputs():\n    return (torch.ones(2),)\n"
    (tmp_path / "m.py").write_text(src.format(body="        x = x + 1\n        print('step')\n"))
    old = bl.entries(scan(load_target(str(tmp_path / "m.py"))).sites)
    # a second copy added further down: the entry stays with the copy at its recorded line
    # (an ambiguous key -- a copy inserted above shifts the old one -- cannot be told apart
    # by lines; the count, and so the exit code, is right either way)
    (tmp_path / "m.py").write_text(src.format(
        body="        x = x + 1\n        print('step')\n        x = x * 2\n        print('step')\n"))
    sites = scan(load_target(str(tmp_path / "m.py"))).sites
    cmp = bl.compare(sites, old)
    assert [s.line for s in cmp.new] == [7] and [s.line for s in cmp.known] == [5]


def test_concurrent_adds_keep_every_site(tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add_one, args=(str(tmp_path / "b.json"), i)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    assert len(bl.read(tmp_path / "b.json")) == 6


def _add_one(path: str, i: int) -> None:
    from mend.scan import Site

    site = Site(f"/tmp/m{i}.py", 3, 0, "forward", f"print({i})", "t", "m", "print-logging", None, "r", 1)
    bl.add(Path(path), [site])


def test_fix_model_from_a_module_outside_the_working_directory_uses_its_file(tmp_path, monkeypatch):
    from mend.api import spec_of

    (tmp_path / "pkgdir").mkdir()
    (tmp_path / "pkgdir" / "onpath_mod_adopt.py").write_text("def make():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkgdir"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    import onpath_mod_adopt

    assert spec_of(onpath_mod_adopt.make) == f"{(tmp_path / 'pkgdir' / 'onpath_mod_adopt.py').resolve()}:make"


def test_scan_model_says_when_eager_fails_too():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x @ torch.ones(3, 3)

    from mend.errors import TargetError

    with pytest.raises(TargetError, match="fails in eager mode too"):
        mend.scan_model(Bad(), torch.ones(4, 16))
