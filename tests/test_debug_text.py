"""dead-host-work's debug-text form (helper-92's c30): a text of a tensor read only under the
flag right after it moves under the flag for a plain tensor. Through mend.fix.fix (the flag
forced both ways in the differential test), the mended file run with the flag on and off, and
the verifier's screen (``debug-text-deferred``) against tampered mended files."""
from __future__ import annotations

import contextlib
import io

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.rules.dead_host_work.examples import FIX_EXAMPLES, example_line
from mend.rules.dead_host_work.rewrite import rewrite
from mend.targets import load_file_module
from tests.conftest import FIXTURES
from verifier.encoders.base import Ctx
from verifier.encoders.debug_text import debug_text_deferred


def test_the_debug_text_moves_under_its_flag(tmp_path):
    res = fix(str(FIXTURES / "debug_text.py"), max_examples=5)
    (rw,) = res.rewrites
    assert rw["rule"] == "dead-host-work" and rw["safety"]["label"] == "safe"
    assert (res.before.graph_count, res.after.graph_count, res.after.graph_break_count) == (2, 1, 0)
    assert rw["evidence"]["passed"] and rw["evidence"]["predicate_outcomes"]["16"]["forced"] == [False, True]
    assert [(o["kind"], o["result"]) for o in rw["obligations"]] == [("debug-text-deferred", "checked")]
    mended = tmp_path / "debug_text.py"
    mended.write_text(res.mended)
    orig, new = load_file_module(FIXTURES / "debug_text.py", "_dt_orig"), load_file_module(mended, "_dt_new")
    (x,) = orig.get_inputs()
    for debug in (False, True):   # the flag on prints the same text; off prints nothing
        torch.manual_seed(0)
        a = orig.Model(debug)
        b = new.Model(debug)
        b.load_state_dict(a.state_dict())
        outs = []
        for model in (a, b):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                y = model(x)
            outs.append((y, buf.getvalue()))
        assert torch.equal(outs[0][0], outs[1][0]) and outs[0][1] == outs[1][1]
        assert ("block out: tensor(" in outs[0][1]) == debug


def _example():
    before, after = FIX_EXAMPLES[-1]
    res = rewrite(cst.parse_module(before), example_line(before))
    assert res.code == after
    return before, res


def test_the_screen_accepts_the_rewrite():
    before, res = _example()
    (ob,) = res.obligations
    assert debug_text_deferred(ob, Ctx({}, {}, res.code, before)).result == "checked"


@pytest.mark.parametrize("old, new, words", [
    # the late computation dropped: with the flag on, `msg` would be unbound
    ("            if not (", "            if (", "everything else unchanged"),
    ("            print(msg)\n", "            print(msg)\n        print(msg)\n", "everything else unchanged"),
    ("        if self.debug:\n", "        if not self.debug:\n", "everything else unchanged"),
])
def test_the_screen_refutes_a_tampered_rewrite(old, new, words):
    before, res = _example()
    assert old in res.code
    out = debug_text_deferred(res.obligations[0], Ctx({}, {}, res.code.replace(old, new, 1), before))
    assert out.result == "refuted" and words in out.counterexample, out


def test_the_screen_refutes_a_text_read_after_the_flag():
    before, res = _example()
    read_after = before.replace("        return h.relu()\n", "        return h.relu(), msg\n")
    out = debug_text_deferred(res.obligations[0], Ctx({}, {}, res.code, read_after))
    assert out.result == "refuted" and "outside the flag's body" in out.counterexample


def test_a_nested_tensor_keeps_the_text_before_the_flag(tmp_path):
    """helper-90: a nested tensor is strided too, but `tuple(h.shape)` raises for it; the guard
    took it for a plain tensor and the mended call returned where the original raised."""
    before, res = _example()
    assert "h.is_nested" in res.code
    (tmp_path / "orig.py").write_text(before)
    (tmp_path / "mended.py").write_text(res.code)
    outcomes = []
    for name in ("orig", "mended"):
        block = load_file_module(tmp_path / f"{name}.py", f"_dt_nested_{name}").Block()
        block.debug = False
        x = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(1, 3)])
        try:
            block(x)
            outcomes.append("returned")
        except Exception as exc:   # noqa: BLE001 - the exception is what is compared
            outcomes.append((type(exc).__name__, str(exc).splitlines()[0]))
    assert outcomes[0] == outcomes[1] and outcomes[0] != "returned"
