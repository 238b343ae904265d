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


def test_an_elif_chain_of_memberships_is_predicated_whole():
    """helper-34's case 4: the `elif v not in t` of a chain was a Python-level check to the
    predicated rule, and the chain was declined. Each test of the chain is now a tensor
    predicate, with its own membership-any, verified forcing both outcomes of each."""
    res = fix(str(HERE / "elif_chain.py"), max_examples=5, unsafe_fixes=True)
    (rw,) = res.rewrites
    assert (res.before.graph_count, res.after.graph_count, res.after.frames_skipped) == (0, 1, 0)
    members = [o for o in rw["obligations"] if o["kind"] == "membership-any"]
    assert [(o["lhs"], o["result"]) for o in members] == [("self.mask_token_id", "checked"), ("self.pad_id", "checked")]
    assert "torch.logical_not((self.pad_id == input_ids).any())" in res.mended
    assert sorted(rw["evidence"]["predicate_outcomes"]) == ["17", "19"]


def test_a_chain_the_predicated_rule_declines_names_its_reason():
    """The same chain with a parameter used on one side only: `torch.where` gives it a zero
    gradient where eager gives None, and `torch.cond` takes no elif chain. The reason names
    both memberships and those, not a Python-level check."""
    source = (HERE / "elif_chain.py").read_text().replace("h = h * 2", "h = h + self.bias")
    source = source.replace("super().__init__()", "super().__init__()\n        self.bias = nn.Parameter(torch.ones(8))")
    line = source.splitlines().index("        if self.mask_token_id in input_ids:") + 1
    res = tm.rewrite(cst.parse_module(source), line, form="cond")
    assert not hasattr(res, "code"), res
    assert "`self.pad_id not in input_ids` is `not (self.pad_id == input_ids).any()`" in res.reason
    assert "elif chain" in res.reason and "Python-level" not in res.reason


def test_an_elif_membership_that_can_raise_is_not_evaluated_unconditionally():
    """helper-36: `elif ids[4] in self.special` was rewritten into a chain that reads `ids[4]`
    on every call (IndexError where the original's `if` held); `elif marks in ids` with a
    tensor `marks` could fail to broadcast there. An indexing operand is left to the
    predicated rule; a tensor element of an elif is refuted."""
    source = (HERE / "elif_chain.py").read_text().replace("self.pad_id not in input_ids", "input_ids[0, 4] in self.ids")
    line = source.splitlines().index("        if self.mask_token_id in input_ids:") + 1
    res = tm.rewrite(cst.parse_module(source), line)
    assert not hasattr(res, "code") and "Python-level" in res.reason, res
    source = (HERE / "elif_chain.py").read_text()
    res = tm.rewrite(cst.parse_module(source), 17)
    (_, ob) = [o for o in res.obligations if o["kind"] == "membership-any"]
    assert ob["elif"] is True
    facts = {"self.pad_id": _t(shape=(3,)), "input_ids": _t()}
    (r,) = O.discharge([ob], facts={"names": facts, "self": {}}, code=res.code, before=source)
    assert r["result"] == "refuted" and "broadcast" in r["counterexample"]
    facts["self.pad_id"] = {"kind": "num", "cat": "int", "value": 0}
    (r,) = O.discharge([ob], facts={"names": facts, "self": {}}, code=res.code, before=source)
    assert r["result"] == "checked"


def test_an_untaken_arm_that_draws_random_numbers_is_declined():
    """helper-37: outputs agreed, but the where-chain ran the noisy arm on every call, so torch's RNG
    stream shifted for all later code. The differential test compares the RNG state after the call."""
    res = fix(str(FIXTURES / "tensor_membership" / "rng_untaken_helper.py"), unsafe_fixes=True,
              verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    assert any("RNG state differs after the call" in d.reason for d in res.declined), [d.reason for d in res.declined]


def test_the_rng_state_after_the_call_is_compared():
    import torch

    from verifier.differential import Mismatch, compare, observe

    class Draws(torch.nn.Module):
        def forward(self, x):
            torch.rand(3)
            return x * 2

    class NoDraw(torch.nn.Module):
        def forward(self, x):
            return x * 2

    x = torch.ones(2)
    assert compare(observe(NoDraw(), (x,), {}, grad=False), observe(NoDraw(), (x,), {}, grad=False), exact=True) == 0
    with pytest.raises(Mismatch, match="RNG state differs"):
        compare(observe(NoDraw(), (x,), {}, grad=False), observe(Draws(), (x,), {}, grad=False), exact=True)


def test_an_elif_operand_bound_only_under_a_condition_is_left_alone():
    """helper-37: `if self.use_pad: pad = 0` before the chain; `elif pad not in ids` is not
    converted (UnboundLocalError on every call of the where-chain when the flag is off); the same
    name bound unconditionally is converted."""
    res = fix(str(FIXTURES / "tensor_membership" / "elif_unbound_local.py"), unsafe_fixes=True,
              verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    res = fix(str(FIXTURES / "tensor_membership" / "elif_bound_local.py"), unsafe_fixes=True,
              verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert "`pad not in ids` -> `not (pad == ids).any()`" in rw["detail"]


def test_a_membership_that_raises_becomes_a_check_in_the_graph(tmp_path):
    """`if v in t: raise E(msg)`: predicated validation's form on `(v == t).any()` -- one graph,
    the same outputs, and the original exception (type and message) where the check fails,
    eager and compiled."""
    import torch

    from mend import validation_runtime
    from mend.targets import load_file_module

    res = fix(str(FIXTURES / "membership_raise.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert rw["rule"] == tm.NAME and not res.declined
    kinds = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert kinds["membership-any"] == kinds["guarded-check"] == "checked"
    assert (res.before.graph_count, res.after.graph_count) == (0, 1)
    path = tmp_path / "membership_raise.py"
    path.write_text(res.mended)
    orig, mended = load_file_module(FIXTURES / "membership_raise.py", "_mr_a"), load_file_module(path, "_mr_b")
    torch.manual_seed(0)
    a = orig.Model().eval()
    b = mended.Model().eval()
    b.load_state_dict(a.state_dict())
    b = validation_runtime.install(b)
    ok, bad = orig.get_inputs()[0], torch.tensor([[1, 3, 4]])
    torch._dynamo.reset()
    for model in (b, torch.compile(b, backend="eager")):
        assert torch.equal(model(ok), a(ok))
        with pytest.raises(ValueError) as got:
            model(bad)
        assert got.value.args == ("padding is not supported here",)   # a note says it was restored
    with pytest.raises(ValueError) as want:
        a(bad)
    assert want.value.args == ("padding is not supported here",)


@pytest.mark.parametrize("element, ids", [
    (3, [1, 2, 4]), (3, [1, 3]), (3, (1, 3)),                  # a list or tuple container: Python's `in`
    ("a", "tensor"), (None, "tensor"), ([3], "tensor"),        # an element `__contains__` refuses
    (3, "tensor"), (3.0, "tensor"), (True, "tensor"), (7, "tensor"),
])
def test_the_raise_form_takes_in_itself_for_other_operand_types(element, ids):
    """helper-59: the bare `(v == t).any()` raised AttributeError for a list container and
    compared a numpy or None element where `Tensor.__contains__` raises; the test now takes
    `(v == t).any()` only for a plain tensor container and a tensor or number element."""
    import torch

    from mend.rules.tensor_membership.examples import _RAISES

    after = next(ex.after for ex in tm.RULE.fix_examples if ex.before == _RAISES)
    outs = []
    for src in (_RAISES, after):
        ns: dict = {}
        exec(compile(src, "<tm>", "exec"), ns)
        torch.manual_seed(0)
        model = ns["Embed"]().eval()
        model.mask_token_id = element
        x = torch.tensor([[1, 3, 4]]) if ids == "tensor" else ids
        try:
            outs.append(("ok", model(x)))
        except Exception as exc:  # noqa: BLE001 - the exception is what is compared
            # the mended check raises the marker RuntimeError (restored by the runtime, not
            # installed here) where the original raises ValueError: compare what fails, not how
            outs.append(("raised", type(exc).__name__ if "mend-trap" not in str(exc) else "ValueError",
                         str(exc) if "mend-trap" not in str(exc) else "the [MASK] token is not allowed here"))
    a, b = outs
    assert a[0] == b[0] and (a[1:] == b[1:] if a[0] == "raised" else torch.equal(a[1], b[1])), (a, b)


def test_the_kept_if_tests_the_original_membership_and_autograd_adds_no_graph(tmp_path):
    """helper-85 F8: the cond form's kept `if` tested `(v == t).any()`, and with autograd on
    (where the cond does not run) the frame Dynamo had run eagerly compiled as 2 graphs and a
    break, 0 (+1 eager frame) -> 2. The kept `if` is now the original, and the grad mode is
    tested first, so with autograd on Dynamo traces none of the guard: the same count."""
    from mend.detect import detect
    from mend.scan import sites_from
    from mend.targets import load_target

    source = (HERE / "mask_token.py").read_text()
    res = tm.rewrite(cst.parse_module(source), example_line(source), form="cond")
    assert hasattr(res, "code"), res
    lines = [ln.strip() for ln in res.code.splitlines()]
    guard = next(ln for ln in lines if "torch.cond" not in ln and "is_compiling()" in ln)
    assert guard.startswith("if not torch.is_grad_enabled() and torch.compiler.is_compiling() and")
    i = lines.index("else:")
    assert lines[i + 1:i + 3] == ["if self.mask_token_id in input_ids:", "h = h + self.bias"]
    assert "if (self.mask_token_id == input_ids).any():" not in lines

    def graphs(path):
        result = detect(load_target(str(path)), grad=True)
        return result.graph_count + sum(1 for s in sites_from(result) if s.frame_skipped)

    mended = tmp_path / "mask_token.py"
    mended.write_text(res.code)
    assert graphs(mended) == graphs(HERE / "mask_token.py") == 1
