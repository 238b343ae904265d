"""Regression tests from a user test of `mend scan`: loading targets (fresh model, quiet
stdout, imports, any suffix, eval mode, clear errors), multi-line sites, categories and
skip reasons, SARIF locations."""
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from mend.errors import TargetError
from mend.report import _artifact_location
from mend.scan import scan
from mend.targets import load_target
from tests.conftest import FIXTURES, SHARED_CASES


def _scan(spec):
    return scan(load_target(str(FIXTURES / spec)))


# ---------------------------------------------------------------- loading targets

def test_scan_sees_the_first_call():
    # the eager check runs on a throwaway build: the scanned model has never run
    target = load_target(str(FIXTURES / "first_call.py"))
    assert target.model.step == 0
    r = scan(target)
    (site,) = r.sites
    assert r.graph_break_count == 1 and site.category == "print-logging" and site.line == 14


def test_rebuild_is_fresh():
    target = load_target(str(FIXTURES / "first_call.py"))
    target.model(*target.args)
    fresh = target.rebuild()
    assert fresh.model.step == 0 and fresh.model is not target.model
    assert torch.equal(fresh.model.fc.weight, target.model.fc.weight)  # same seed, same weights


@pytest.mark.parametrize("suffix", ["", ":factory"])
def test_user_prints_stay_off_stdout(run_mend, suffix):
    code, out, err = run_mend("scan", str(FIXTURES / "noisy.py") + suffix, "--json")
    assert code == 1
    assert json.loads(out)["graph_break_count"] == 1
    assert "noisy: importing" in err  # shown to the user, on stderr


def test_sarif_stays_parseable_with_noisy_target(run_mend):
    code, out, _ = run_mend("scan", str(FIXTURES / "noisy.py"), "--sarif")
    assert code == 1 and json.loads(out)["version"] == "2.1.0"


def test_file_imports_its_siblings():
    path_before = list(sys.path)
    try:
        r = _scan("sibling/model.py")
        assert r.graph_break_count == 0
        assert sys.path == path_before  # the file's directory is on sys.path only while loading
    finally:
        sys.modules.pop("mend_sibling_helper", None)


def test_module_factory_imports_from_the_current_directory(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "mixed.py", tmp_path / "mend_cwd_module.py")
    monkeypatch.chdir(tmp_path)
    # as under the `mend` console script: the cwd is not on sys.path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    try:
        r = scan(load_target("mend_cwd_module:factory"))
        assert r.graph_break_count == 4
    finally:
        sys.modules.pop("mend_cwd_module", None)


@pytest.mark.parametrize("name, spec_suffix", [("model.txt", ""), ("x.py.bak", ""), ("x.py.bak", ":factory")])
def test_any_file_suffix_loads(tmp_path, monkeypatch, name, spec_suffix):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as for most users (not PYTHONDONTWRITEBYTECODE)
    shutil.copy(FIXTURES / "mixed.py", tmp_path / name)
    r = scan(load_target(str(tmp_path / name) + spec_suffix))
    assert r.graph_break_count == 4
    assert not list(tmp_path.glob("__pycache__/*"))  # no bytecode cache shared with model.py


def test_directory_target_is_one_clear_error(run_mend):
    code, out, err = run_mend("scan", str(FIXTURES))
    assert code == 2 and out == ""
    assert "is a directory" in " ".join(err.split())


def test_factory_model_is_in_eval_mode_like_file_targets():
    file_target = load_target(str(FIXTURES / "train_only.py"))
    factory_target = load_target(str(FIXTURES / "train_only.py") + ":factory")
    assert not file_target.model.training and not factory_target.model.training
    assert scan(file_target).sites == scan(factory_target).sites == []  # the training-only print does not run


def test_get_inputs_returning_none_names_the_file():
    with pytest.raises(TargetError, match=r"inputs_none\.py: get_inputs\(\) must return a tuple of inputs, got NoneType"):
        load_target(str(FIXTURES / "inputs_none.py"))


def test_missing_constructor_args_hint_get_init_inputs():
    with pytest.raises(TargetError, match=r"needs_init_args\.py.*missing 1 required positional argument.*get_init_inputs\(\)"):
        load_target(str(FIXTURES / "needs_init_args.py"))


# ---------------------------------------------------------------- sites and categories

def test_multiline_if_is_one_site_at_its_header():
    # Dynamo reports lines 14 and 15 (the two conditions); the site is the `if (` statement
    r = _scan("multiline_if.py")
    (site,) = r.sites
    assert (site.line, site.source, site.column, site.count) == (13, "if (", 8, 2)
    assert site.category == "data-dependent-branch" and site.located.kind == "If"


def test_print_whose_value_is_used_is_print_logging():
    by_line = {s.line: s for s in _scan("effects_in_context.py").sites}
    site = by_line[27]
    assert site.source == 'ok = print("computed")'
    assert site.category == "print-logging" and site.fixable_by is None


def test_break_under_context_manager_is_categorised_by_the_inner_break():
    by_line = {s.line: s for s in _scan("effects_in_context.py").sites}
    site = by_line[29]
    assert site.gb_type == "Failed to trace builtin operator" and site.category == "print-logging"
    assert site.frame_skipped and site.skip_reason.startswith("Dynamo could not resume after this break")
    assert "Graph break encountered" not in site.reason and "Graph break encountered" not in site.skip_reason


def test_raise_under_compilation_is_counted_with_a_readable_reason():
    r = _scan("effects_in_context.py:raising")
    (site,) = r.sites
    assert r.graph_count == 0 and r.graph_break_count == 1 and site.count == 1  # never zero breaks
    assert site.frame_skipped and "Graph break encountered" not in site.reason
    assert site.reason.startswith("Dynamo could not resume after this break and ran the rest of the function eagerly")


@pytest.mark.skipif(not (SHARED_CASES / "042_while_fixed_point.py").is_file(), reason="../shared/cases is absent")
def test_skipped_frame_always_has_a_skip_reason():
    r = scan(load_target(str(SHARED_CASES / "042_while_fixed_point.py")))
    skipped = [s for s in r.sites if s.frame_skipped]
    assert skipped and all(s.skip_reason for s in skipped)
    assert all(s.reason.startswith(s.skip_reason) for s in skipped)


# ---------------------------------------------------------------- SARIF locations

def test_sarif_locations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bases = {}
    assert _artifact_location(str(tmp_path / "my model.py"), bases) == {"uri": "my%20model.py", "uriBaseId": "%SRCROOT%"}
    module_file = str(Path(torch.nn.modules.module.__file__).resolve())
    if "site-packages" in module_file:
        assert _artifact_location(module_file, bases) == {"uri": "torch/nn/modules/module.py",
                                                          "uriBaseId": "SITE_PACKAGES"}
        assert bases["SITE_PACKAGES"]["uri"].startswith("file:///")
    assert _artifact_location("/elsewhere/a b.py", bases) == {"uri": "file:///elsewhere/a%20b.py"}
    assert bases["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_a_tensor_guarded_flag_is_python_state_mutation(tmp_path):
    # `self._warned = True` under a tensor test is a flag, like shared case 013's counter; a
    # tensor stored on the module is not a flag and stays a data-dependent branch
    from mend.locate import locate
    from mend.taxonomy import categorize

    path = tmp_path / "flags.py"
    path.write_text("def f(self, h):\n"
                    "    if (h.abs() > 6.5e4).any():\n        self._warned = True\n"
                    "    if h.sum() > 0:\n        self.mode = 'pos'\n"
                    "    if h.sum() > 0:\n        self.steps += 1\n"
                    "    if h.sum() > 0:\n        self.last = h\n"
                    "    if h.sum() > 0:\n        h = h * 2\n"
                    "    return h\n")
    got = [categorize("Data-dependent branching", locate(str(path), line)) for line in (2, 4, 6, 8, 10)]
    assert got == ["python-state-mutation"] * 3 + ["data-dependent-branch"] * 2


def test_a_print_formatting_a_tensor_repr_is_print_logging(tmp_path):
    # `print(f"{s!r}")` breaks at "repr() on tensor": the print is the effect, and the
    # deferred-side-effects rule takes it; a bare `r = repr(t)` is not a print
    from mend.locate import locate
    from mend.taxonomy import categorize

    path = tmp_path / "reprs.py"
    path.write_text("def f(s):\n    print(f'scale={s!r}')\n    r = repr(s)\n    return r\n")
    assert categorize("repr() on tensor", locate(str(path), 2)) == "print-logging"
    assert categorize("repr() on tensor", locate(str(path), 3)) != "print-logging"


def test_hook_registration_and_a_lock_are_named_with_the_eager_warm_up_advice(tmp_path):
    # transformers 5's output capturing installs hooks on the first call, under a threading lock
    # (utils/output_capturing.py): llava's last breaks; other `with` statements and calls stay "other"
    from mend.locate import locate
    from mend.rules import match_site
    from mend.taxonomy import categorize

    path = tmp_path / "hooks.py"
    path.write_text("def f(model, m, ctx, hook):\n"
                    "    with _hook_installation_lock:\n        pass\n"
                    "    m.register_forward_hook(hook)\n"
                    "    with ctx:\n        pass\n"
                    "    m.register_buffer('b', None)\n")
    got = [categorize(g, locate(str(path), line)) for g, line in (
        ("Unsupported context manager", 2), ("setattr() on unsupported type", 4),
        ("Unsupported context manager", 5), ("setattr() on unsupported type", 7))]
    assert got == ["hook-or-lock", "hook-or-lock", "other", "other"]
    assert "once eagerly before torch.compile" in match_site("hook-or-lock", locate(str(path), 2)).reason


def test_an_exception_raised_under_tracing_is_named_with_the_compile_only_branch_hint(tmp_path):
    # hf:newest/switch_transformers: `attention_mask[:, None, None, :]` raised TypeError under
    # tracing (a branch on is_torchdynamo_compiling() left the mask None), gb0088 "Observed
    # exception"; it was reported as "other: no rule handles this kind of graph break"
    from mend.locate import locate
    from mend.rules import match_site
    from mend.taxonomy import categorize

    path = tmp_path / "traced.py"
    path.write_text("def f(mask):\n    return mask[:, None]\n")
    assert categorize("Observed exception", locate(str(path), 2)) == "traced-exception"
    assert categorize("Unsupported context manager", locate(str(path), 2)) == "other"
    reason = match_site("traced-exception", locate(str(path), 2)).reason
    assert "ran the whole function eagerly" in reason and "is_torchdynamo_compiling()" in reason


def test_a_membership_test_on_a_tensor_is_named_as_such():
    # generalisation probe: `if v in t:` was reported with the generic item-tolist reason
    from mend.scan import scan
    from mend.targets import load_target
    from tests.conftest import FIXTURES

    doc = scan(load_target(str(FIXTURES / "membership_branch.py")))
    (site,) = doc.sites
    assert site.category == "item-tolist" and site.fixable_by == "tensor-membership"
    assert "`self.eos_id in input_ids` -> `(self.eos_id == input_ids).any()`" in site.reason
    # a membership whose Python bool a helper returns is not rewritten, and is named as such
    doc = scan(load_target(str(FIXTURES / "membership_returned.py")))
    (site,) = doc.sites
    assert site.category == "item-tolist" and site.fixable_by is None
    assert "`token in ids` is a membership test on a tensor" in site.reason and "returned" in site.reason


def test_a_ring_buffer_is_not_called_a_0d_buffer():
    # generalisation probe: scalar-tensor's decline listed a 3-d ring buffer as a "0-d tensor buffer"
    import libcst as cst

    from mend.rules.scalar_tensor.screen import _tensor_buffers

    klass = cst.parse_module(
        "class S(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.register_buffer('buf', torch.zeros(1, 2, 12))\n"
        "        self.register_buffer('offset', torch.tensor(0))\n"
        "        v = torch.tensor(5)\n        self.limit = nn.Buffer(v, persistent=False)\n"
        "        self.table = nn.Buffer(torch.tensor([1, 2]))\n").body[0]
    assert _tensor_buffers(klass, {"torch"}) == ["limit", "offset"]


def test_an_early_exit_on_a_tensor_test_is_a_data_dependent_loop(tmp_path):
    # a hidden-case probe: `for ...: if (cum >= 1).all(): break` was filed as a branch
    from mend.locate import locate
    from mend.taxonomy import categorize

    path = tmp_path / "halt.py"
    path.write_text("def f(h, cum):\n    for _ in range(6):\n        if (cum >= 1).all():\n            break\n"
                    "        if cum.sum() > 3: break\n        if cum.any():\n            h = h + 1\n"
                    "            break\n        else:\n            pass\n    return h\n")
    got = [categorize("Data-dependent branching", locate(str(path), line)) for line in (3, 5, 6)]
    assert got == ["data-dependent-loop", "data-dependent-loop", "data-dependent-branch"]


def test_a_data_pointer_comparison_is_an_unsupported_builtin_with_its_reason(tmp_path):
    # a hidden-case probe: `if positions.data_ptr() != self._cached_ptr:` ("Data pointer
    # comparison") was "other: no rule handles this kind of graph break"
    from mend.locate import locate
    from mend.rules import match_site
    from mend.taxonomy import categorize

    path = tmp_path / "ptr.py"
    path.write_text("def f(self, positions):\n    if positions.data_ptr() != self._cached_ptr:\n        pass\n")
    loc = locate(str(path), 2)
    assert categorize("Data pointer comparison", loc) == "unsupported-builtin"
    assert "data_ptr()" in match_site("unsupported-builtin", loc).reason


def test_a_dtype_swap_through_data_says_why_it_stays(tmp_path):
    """helper-78's c18: `self.pos.data = self.pos.data.to(x.dtype)` in forward was reported as
    'no rule handles this kind of graph break'."""
    path = tmp_path / "data_swap.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.pos = nn.Parameter(torch.ones(6, 1, dtype=torch.float64), "
                    "requires_grad=False)\n\n    def forward(self, x):\n        self.pos.data = self.pos.data.to(x.dtype)\n"
                    "        return x + self.pos\n\n\ndef get_inputs():\n    return (torch.randn(2, 6, 4),)\n")
    (site,) = scan(load_target(str(path))).sites
    assert site.category == "other" and site.line == 11
    assert "`.data`" in site.reason and "persists in the module" in site.reason
