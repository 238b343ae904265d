"""tensor-check beyond its examples (tests/test_rules.py): an inline condition bound to a local
first and a constant message callable (a generalisation probe found both declined), end to end
and in the verifier's re-check of the hoisting."""
import pytest
import torch

from tests.conftest import FIXTURES
from tests.test_fresh_guard import _load
from verifier.encoders.base import Ctx
from verifier.encoders.host_check import check_equivalent


def test_an_inline_condition_with_a_constant_message_is_fixed_end_to_end(tmp_path):
    from mend.pipeline import fix

    res = fix(str(FIXTURES / "tensor_check_inline.py"), unsafe_fixes=True, max_examples=5)
    assert [rw["rule"] for rw in res.rewrites] == ["tensor-check"], [d.to_json() for d in res.declined]
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    check = next(o for o in res.rewrites[0]["obligations"] if o["kind"] == "check-equivalent")
    assert check["result"] == "checked" and check["hoisted"] == "mask.sum(-1) > 0"
    path = tmp_path / "mended_check.py"
    path.write_text(res.mended)
    mod = _load(path, "_tc_inline")
    feats = torch.randn(2, 3, 8)
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        compiled = torch.compile(mod.Model().eval(), backend=backend)
        with pytest.raises(RuntimeError, match="^every row needs one valid token$"):
            compiled(feats, torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
        assert compiled(feats, torch.ones(2, 3)).shape == (2, 8)


def test_the_verifier_rechecks_the_hoisted_condition_and_the_message():
    from mend.pipeline import fix

    res = fix(str(FIXTURES / "tensor_check_inline.py"), unsafe_fixes=True, max_examples=3)
    ob = dict(next(o for o in res.rewrites[0]["obligations"] if o["kind"] == "check-equivalent"))
    ob.pop("result", None)
    assert check_equivalent(ob, Ctx({}, {}, res.mended)).result == "checked"
    # the local bound to another expression than the call's: not the original check
    moved = res.mended.replace("_mend_check_cond = mask.sum(-1) > 0", "_mend_check_cond = mask.sum(-1) >= 0")
    assert check_equivalent(ob, Ctx({}, {}, moved)).result == "unknown"
    # a message other than the original callable's text: refuted on a failing probe
    other = res.mended.replace("'every row needs one valid token'", "'another text'")
    assert check_equivalent(ob, Ctx({}, {}, other)).result == "refuted"
    # helper-47: without the device test, a meta tensor passes where the original raises
    no_device = res.mended.replace(" and _mend_check_cond.device.type == 'cpu'", "")
    assert no_device != res.mended
    got = check_equivalent(ob, Ctx({}, {}, no_device))
    assert got.result == "refuted" and "meta" in got.counterexample, got
