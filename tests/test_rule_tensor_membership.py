"""tensor-membership: the obligation on adversarial facts, and a fixture through
mend.fix.fix (``tests/fixtures/tensor_membership/``). The examples' generated tests are in
``tests/test_rules.py``."""
from __future__ import annotations

import libcst as cst
import pytest

from mend.fix import fix
from mend.rules import tensor_membership as tm
from mend.rules.tensor_membership.examples import FIX_EXAMPLES, example_line
from tests.conftest import FIXTURES
from verifier import obligations as O

HERE = FIXTURES / "tensor_membership"


def _t(dtype="int64", shape=(2, 4)):
    return {"kind": "tensor", "dtype": dtype, "shape": list(shape), "device": "cpu", "param": False}


def _membership(names: dict):
    source = FIX_EXAMPLES[0][0]
    res = tm.rewrite(cst.parse_module(source), example_line(source))
    (ob,) = [o for o in res.obligations if o["kind"] == "membership-any"]
    assert (ob["lhs"], ob["rhs"]) == ("self.mask_token_id", "input_ids")
    (r,) = O.discharge([ob], facts={"names": names, "self": {}}, code=res.code, before=source)
    return r


def test_membership_holds_for_a_tensor_and_a_number():
    r = _membership({"self.mask_token_id": {"kind": "num", "cat": "int", "value": 3}, "input_ids": _t()})
    assert r["result"] == "checked" and "observed" in " ".join(r["assumptions"])


@pytest.mark.parametrize("names, result", [
    # a list container: `in` is the list's own membership, not a tensor test
    ({"self.mask_token_id": {"kind": "num", "cat": "int", "value": 3}, "input_ids": {"kind": "list", "items": []}},
     "refuted"),
    # a string element: Tensor.__contains__ raises RuntimeError, `("a" == t).any()` does not
    ({"self.mask_token_id": {"kind": "str", "value": "a"}, "input_ids": _t()}, "refuted"),
    # not observed: never established
    ({"input_ids": _t()}, "unknown"),
])
def test_membership_is_not_established_for_other_types(names, result):
    assert _membership(names)["result"] == result


def test_membership_if_compiles_the_frame_again_as_an_unsafe_fix():
    """`if self.mask_token_id in input_ids:` breaks inside Tensor.__contains__, where Dynamo
    cannot resume: the frame ran eagerly (0 graphs). The rewrite compiles it as one graph,
    verified on both outcomes; it rests on observed operand types, so it is unsafe."""
    res = fix(str(HERE / "mask_token.py"), max_examples=5)
    assert res.rewrites == [] and res.before.frames_skipped == 1
    (d,) = res.declined
    assert d["rule"] == "tensor-membership" and "unsafe fix" in d["reason"] and "membership-any" in d["reason"]
    res = fix(str(HERE / "mask_token.py"), max_examples=5, unsafe_fixes=True)
    (rw,) = res.rewrites
    assert rw["rule"] == "tensor-membership" and rw["safety"]["label"] == "unsafe"
    assert (res.before.graph_count, res.after.graph_count, res.after.frames_skipped) == (0, 1, 0)
    assert rw["evidence"]["passed"] and rw["evidence"]["predicate_outcomes"]["14"]["forced"] == [False, True]
    assert "torch.cond((self.mask_token_id == input_ids).any()" in res.mended or \
        "torch.where((self.mask_token_id == input_ids).any()" in res.mended


def test_a_tensor_subclass_container_is_refuted():
    """helper-34: a `class Vocab(torch.Tensor)` overriding `__contains__` was recorded as a
    plain tensor, and the rewrite was emitted; the facts now name the subclass."""
    import torch

    from verifier.facts import summarize

    class Vocab(torch.Tensor):
        def __contains__(self, v):
            return bool(self.flatten()[0] == v)

    seen = summarize(torch.tensor([3, 5]).as_subclass(Vocab))
    assert seen["subclass"].endswith("Vocab") and "subclass" not in summarize(torch.tensor([3, 5]))
    r = _membership({"self.mask_token_id": {"kind": "num", "cat": "int", "value": 3}, "input_ids": seen})
    assert r["result"] == "refuted" and "subclass" in r["counterexample"]


def test_the_cond_form_changes_no_other_line():
    """helper-34: restoring `if v in t:` in the kept eager branch was a text substitution over
    the whole module, which also rewrote a hand-written `if (tok == ids).any():` elsewhere."""
    source = '''import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, h, ids, tok):
        if tok in ids:
            h = self.proj(h)
        return h.mean(1)

    def any_hit(self, tok, ids):
        if (tok == ids).any():
            return 1
        return 0
'''
    for form in ("cond", "where"):
        res = tm.rewrite(cst.parse_module(source), 11, form=form)
        assert hasattr(res, "code"), res
        new, old = res.code.splitlines(), source.splitlines()
        assert new[-4:] == old[-4:], form   # any_hit unchanged
