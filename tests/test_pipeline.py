"""The one pipeline (mend.pipeline): both executors, typed records, and the three bugs
issue 9 found by reading the code (each has a regression test here)."""
from __future__ import annotations

import ast
import json
import shutil
import sys
from pathlib import Path

import pytest

from mend.pipeline import fix
from mend.pipeline.records import Declined, Rewrite

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_verifier_imports_nothing_from_mend():
    """Alive2's separation: the verifier checks what it is given; it never imports mend."""
    offenders = [(str(p.relative_to(ROOT)), name) for p in sorted((ROOT / "verifier").rglob("*.py"))
                 for name in _imports(p) if name == "mend" or name.startswith("mend.")]
    assert offenders == []


def test_no_module_is_huge():
    """One reason to change per module: nothing in mend/ or verifier/ grows past ~800 lines."""
    big = {str(p.relative_to(ROOT)): n for d in ("mend", "verifier") for p in (ROOT / d).rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 850}
    assert big == {}


def test_declined_record_needs_site_and_reason():
    with pytest.raises(ValueError):
        Declined("", "predicated-control-flow", "why")
    with pytest.raises(TypeError):
        Rewrite(rule="r", file="f", site="f:1")  # a record with a missing field fails where it is built
    d = Declined("m.py:3", None, "because")
    assert d.to_json() == {"site": "m.py:3", "rule": None, "reason": "because"} and d["reason"] == "because"


def test_site_outside_the_target_file_is_declined_with_its_site(run_mend, tmp_path, monkeypatch):
    """Bug: the sibling-module path recorded file/line but no site; text output read d['site']."""
    shutil.copytree(FIXTURES / "sibling_break", tmp_path / "sib")
    monkeypatch.syspath_prepend(str(tmp_path / "sib"))
    sys.modules.pop("mend_sibling_break_helper", None)
    try:
        res = fix(str(tmp_path / "sib" / "model.py"), unsafe_fixes=True, max_examples=2)
        assert res.rewrites == [] and res.mended == res.original
        (d,) = [d for d in res.declined if "outside the target's own file" in d.reason]
        assert d.site.endswith("mend_sibling_break_helper.py:12") and d.rule == "deferred-side-effects"
        sys.modules.pop("mend_sibling_break_helper", None)
        code, out, err = run_mend("fix", "--unsafe-fixes", str(tmp_path / "sib" / "model.py"), "--examples", "2")
        assert code == 0, err
        assert "declined  " in out and "mend_sibling_break_helper.py:12" in out
        sys.modules.pop("mend_sibling_break_helper", None)
        code, out, err = run_mend("fix", "--unsafe-fixes", str(tmp_path / "sib" / "model.py"), "--examples", "2", "--json")
        doc = json.loads(out)
        assert all("site" in d for d in doc["declined"]) and doc["declined"]
    finally:
        sys.modules.pop("mend_sibling_break_helper", None)


@pytest.mark.slow
def test_file_factory_with_keyword_inputs_for_a_transformers_model(tmp_path):
    """Bug: FILE.py:FACTORY refused a factory returning keyword inputs, the first thing a new
    user meets with a transformers model called as model(input_ids=..., attention_mask=...).
    The differential test draws keyword tensors as it draws positional ones."""
    pytest.importorskip("transformers")
    shutil.copy(FIXTURES / "hf_kwargs_factory.py", tmp_path / "hf_kwargs_factory.py")
    res = fix(f"{tmp_path / 'hf_kwargs_factory.py'}:make", unsafe_fixes=True, max_examples=3)
    assert res.executor == "in-process"
    (rw,) = res.rewrites
    assert rw.rule == "predicated-control-flow" and "torch.where(h.sum() > 0, h * 2.0, h - 1.0)" in res.mended
    ev = rw.evidence
    assert ev["passed"] and ev["examples"] >= 3
    (outcomes,) = ev["predicate_outcomes"].values()
    assert outcomes["forced"] == [False, True]
    assert "compiled:inductor/eval" in ev["modes"] and "eager/train" in ev["modes"]


def test_keyword_inputs_are_drawn_and_compared():
    """The differential test sees a difference that only a keyword input can reveal."""
    import torch

    from verifier.differential import differential_test

    class Orig(torch.nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    class Wrong(torch.nn.Module):
        def forward(self, x, *, scale):
            return x * scale.clamp(min=0)  # differs only where a drawn scale is negative

    ev = differential_test(Orig(), Wrong(), (torch.ones(3),), example_kwargs={"scale": torch.ones(3)},
                           max_examples=20, compiled=False)
    assert not ev.passed and "differ" in ev.reason
    ok = differential_test(Orig(), Orig(), (torch.ones(3),), example_kwargs={"scale": torch.ones(3)},
                           max_examples=5, compiled=False)
    assert ok.passed


@pytest.mark.slow
def test_module_factory_certificate_reruns_through_the_overlay(tmp_path, monkeypatch, run_mend):
    """Bug: cert verify --rerun chose its path by target.startswith('hf:'), so MODULE:FACTORY
    certificates could not be re-run. The certificate names its executor; --rerun asks it."""
    pkg = tmp_path / "mend_rerun_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
        "        h = self.fc(x)\n        if h.sum() > 0:\n            y = h * 2.0\n        else:\n"
        "            y = h - 1.0\n        return y\n")
    (tmp_path / "mend_rerun_build.py").write_text(
        "import torch\n\nfrom mend_rerun_pkg.model import Block\n\n\ndef make():\n"
        "    torch.manual_seed(0)\n    return Block(), (torch.randn(2, 4),)\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_mend("fix", "--unsafe-fixes", "mend_rerun_build:make", "--examples", "3", "--out", "out")
    assert code == 0, err
    (cert,) = (tmp_path / "out" / "certificates").glob("*.json")
    doc = json.loads(cert.read_text())
    assert doc["executor"] == "overlay" and doc["target"] == "mend_rerun_build:make"
    code, out, err = run_mend("cert", "verify", str(cert), "--rerun")
    assert code == 0, out + err
    assert "rerun:" in out and "eager and compiled agree" in out
    # a semantic change with the hash resealed: only the rerun can notice
    from verifier import certs

    mended = tmp_path / "out" / "mend_rerun_pkg" / "model.py"
    mended.write_text(mended.read_text().replace("h * 2.0", "h * 2.5"))
    doc["sha256_mended"] = certs.sha256_file(mended)
    cert.write_text(certs.dumps(certs.seal({k: v for k, v in doc.items() if k != "digest"})))
    code, out, _ = run_mend("cert", "verify", str(cert), "--rerun")
    assert code == 1 and "--rerun: the differential test fails" in out


def test_fix_json_stays_parseable_with_a_noisy_target(run_mend):
    """What the target prints while mend loads and runs it goes to stderr, not into --json."""
    code, out, err = run_mend("fix", "--unsafe-fixes", str(FIXTURES / "noisy.py"), "--json", "--examples", "2")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"before", "after", "rewrites", "declined", "unfixable", "diff"}


def test_identical_statements_keep_their_own_original_lines():
    """helper-70: two identical `msg = f"{h!r}"` (lines 13 and 15) were both reported as :13
    once a rewrite above had moved the second; the nearest original line is taken."""
    from mend.pipeline.executors import _orig_line

    original = "a\nmsg = f'{h!r}'\nb\nmsg = f'{h!r}'\n"
    assert _orig_line(original, "msg = f'{h!r}'", 5) == 4   # moved down one line by a rewrite above
    assert _orig_line(original, "msg = f'{h!r}'", 2) == 2
    assert _orig_line(original, "gone = 1", 7) == 7


def test_a_rewrite_that_frees_an_eager_frame_is_provisional(tmp_path):
    """helper-70's W2: fixing the break Dynamo could not resume after raises the graph count
    from 0 (+1 eager frame) to 2; it is kept only if the rewrites after it bring the count back
    to the original's (with --unsafe-fixes: 1 graph), and undone, with the reason, otherwise."""
    from tests.conftest import FIXTURES

    path = str(FIXTURES / "frame_skip_then_count.py")
    res = fix(path, unsafe_fixes=True, max_examples=3)
    assert (res.before.graph_count, res.before.frames_skipped) == (0, 1)
    assert (res.after.graph_count, res.after.graph_break_count) == (1, 0)
    assert sorted(r.rule for r in res.rewrites) == ["dead-host-work", "host-count-reduction"]
    kept = fix(path, max_examples=3)
    assert kept.rewrites == [] and kept.mended == kept.original
    assert (kept.after.graph_count, kept.after.frames_skipped) == (0, 1)
    (undone,) = [d for d in kept.declined if d.rule == "dead-host-work"]
    assert "let a frame Dynamo ran eagerly compile again" in undone.reason
