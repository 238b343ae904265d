"""helper-85's F1 and F2: predicated-validation's guarded forms keep the original check for any
tensor its in-graph form cannot compute on. F1: ``torch.logical_not`` has no CPU kernel for
uint16/32/64 (nor float8, complex32), where ``bool(C)`` works: the negated form's guard now
names the dtypes. F2: the ``.item()`` forms had no guard at all (a two-element tensor passed
under inductor, a Python int and uint16 raised other errors): each tensor read through
``.item()`` is bound once and guarded like the condition."""
from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from mend import validation_runtime as vr
from mend.fix import fix
from tests.conftest import FIXTURES
from verifier.encoders.assert_async import guarded_check, guarded_item_check
from verifier.encoders.base import Ctx

DIR = FIXTURES / "guard_dtype"


def _load(code: str, name: str, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _outcome(fn, *args):
    try:
        out = fn(*args)
        return ("ok", out.detach().clone()) if isinstance(out, torch.Tensor) else ("ok", out)
    except Exception as exc:  # behaviour under comparison
        return ("raised", type(exc).__name__, str(exc).split("\n")[0])


def _same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] != "ok":
        return a[1:] == b[1:]
    return a[1].dtype == b[1].dtype and torch.allclose(a[1], b[1], rtol=0, atol=0, equal_nan=True)   # equal, NaN = NaN


@pytest.fixture(scope="module")
def mended(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("guard_dtype")
    out = {}
    for name in ("u16flag", "itemle", "isfinite", "f64_bound", "f32_bound", "int_cast", "two_dtypes", "lp_range",
                 "lp_isinf", "two_exceptions"):
        res = fix(str(DIR / f"{name}.py"), unsafe_fixes=True, max_examples=3)
        assert len(res.rewrites) == (2 if name == "int_cast" else 1), (name, [d.reason for d in res.declined])
        if name == "two_exceptions":   # F4: the second check, restoring another exception, is declined
            assert any("in either order" in d.reason for d in res.declined), [d.reason for d in res.declined]
        out[name] = (_load((DIR / f"{name}.py").read_text(), f"gd_{name}_o", tmp),
                     _load(res.mended, f"gd_{name}_m", tmp), res)
    return out


CASES = {
    "u16flag": [(torch.randn(2, 4), torch.tensor([0], dtype=dt)) for dt in (torch.uint16, torch.uint32, torch.uint64)]
    + [(torch.randn(2, 4), torch.tensor([3], dtype=torch.uint16)), (torch.randn(2, 4), torch.tensor([2]))],
    "itemle": [(torch.randn(2, 6), torch.tensor([4, 9])), (torch.randn(2, 6), torch.tensor([4, 5])),
               (torch.randn(2, 6), 4), (torch.randn(2, 6), torch.tensor([4], dtype=torch.uint16)),
               (torch.randn(2, 6), torch.tensor([9])), (torch.randn(2, 6), torch.tensor([4]))],
    "isfinite": [(torch.randn(2, 3, 4), torch.randn(2, 3, 4)), (torch.randn(3, 4), torch.full((3, 4), float("nan"))),
                 (torch.randn(3, 4), torch.randn(3, 4))],
    # helper-87's F1, F2: torch compares a float32 tensor with a float bound, and an int64 one with a
    # float, in float32; Python compares the .item() values exactly
    "f64_bound": [(torch.full((2, 4), 0.1, dtype=torch.float32),), (torch.full((2, 4), 0.1, dtype=torch.float64),),
                  (torch.full((2, 4), 0.05, dtype=torch.float64),), (torch.full((2, 4), 0.2, dtype=torch.float64),)],
    # float32/float16/bfloat16 compared in float64 (0.1 as a float32 is above 0.1, as a float16 below)
    "f32_bound": [(torch.full((2, 4), 0.1, dtype=dt),) for dt in (torch.float32, torch.float16, torch.bfloat16)]
    + [(torch.full((2, 4), 0.09999999),), (torch.full((2, 4), float("nan")),), (torch.full((2, 4), float("-inf")),),
       (torch.full((2, 4), -0.0),), (torch.tensor([[0.05, 0.1000001]]).repeat(2, 2),),
       (torch.full((2, 4), 0.1, dtype=torch.float64),), (torch.zeros(2, 4, dtype=torch.int64),)],
    "int_cast": [(torch.randn(2, 4),), (torch.full((2, 4), float("nan")),), (torch.full((2, 4), 3e5),),
                 (torch.full((2, 4), float("inf")),), (torch.randn(2, 4, dtype=torch.float64),),
                 (torch.full((2, 4), 2.0, dtype=torch.float16),), (torch.full((2, 4), 3e5, dtype=torch.bfloat16),),
                 (torch.full((2, 4), 6e4, dtype=torch.float16),)],
    # helper-91's F1-F4 under inductor: float16/bfloat16/int8 T keep the original check
    "lp_range": [(torch.tensor([[2.015625, 0, 0, 0], [0, -1.9765625, 0, 0]], dtype=torch.bfloat16),),
                 (torch.tensor([[2.015625, 0, 0, 0], [0, -1.9921875, 0, 0]], dtype=torch.bfloat16),),
                 (torch.tensor([[-128, 5, 7, 2]], dtype=torch.int8),), (torch.tensor([[2.0, 0, 0, 0], [0, -1.99, 0, 0]]),),
                 (torch.tensor([[2.0, 0, 0, 0], [0, -2.0, 0, 0]]),)],
    "lp_isinf": [(torch.tensor([[64.0, 0, 0, 0], [0, -1.0, 0, 0]], dtype=torch.float16),),
                 (torch.tensor([[1e36, 0, 0, 0], [0, -1.0, 0, 0]]),), (torch.tensor([[1.0, 0, 0, 0], [0, -1.0, 0, 0]]),)],
    "two_exceptions": [(torch.full((2, 4), 2.0, dtype=dt), -torch.ones(3, dtype=dt2))
                       for dt in (torch.float32, torch.float16, torch.float64) for dt2 in (torch.float32, torch.int64)]
    + [(torch.full((2, 4), 0.5), -torch.ones(3)), (torch.full((2, 4), 2.0), torch.ones(3))],
    "two_dtypes": [(torch.randn(2, 4), torch.tensor([16777219]), torch.tensor([16777220.0])),
                   (torch.randn(2, 4), torch.tensor([1, 2]), torch.tensor([3, 4])),
                   (torch.randn(2, 4), torch.tensor([5, 2]), torch.tensor([3, 4]))],
}


@pytest.mark.parametrize("backend", [None, "eager", "inductor"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_inputs_the_in_graph_form_cannot_take_run_the_original_check(mended, name, backend):
    orig_mod, mended_mod, _ = mended[name]
    torch.manual_seed(0)
    a, b = orig_mod.Model().eval(), mended_mod.Model().eval()
    b.load_state_dict(a.state_dict())
    vr.install(b)
    torch._dynamo.reset()
    fn = b if backend is None else torch.compile(b, backend=backend)
    for args in CASES[name]:
        want, got = _outcome(a, *args), _outcome(fn, *args)
        assert _same(want, got), (args, want, got)


def test_the_verifier_refutes_a_guard_without_its_dtypes_or_a_changed_fallback(mended):
    for name, check, kind in (("u16flag", guarded_check, "guarded-check"),
                              ("itemle", guarded_item_check, "guarded-item-check")):
        res = mended[name][2]
        (rw,) = res.rewrites
        ob = next(o for o in rw["obligations"] if o["kind"] == kind)
        assert ob["result"] == "checked", ob
        code = res.mended
        assert check(ob, Ctx({}, {}, code)).result == "checked"
        if name == "u16flag":
            weak = code.replace(" and _mend_cond.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, "
                                "torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64)", "")
        else:   # the exact-comparison clause widened to int8, which inductor computed unwrapped (helper-91)
            weak = code.replace("(torch.bool, torch.int64) and", "(torch.bool, torch.int8, torch.int64) and")
        assert weak != code and check(ob, Ctx({}, {}, weak)).result == "refuted"
    # the comparison without its cast to int64/float64 (in the file and in what mend recorded): torch
    # would round the bound to the tensor's dtype
    code = mended["itemle"][2].mended
    bare = code.replace("_mend_item.to(torch.float64 if _mend_item.is_floating_point() else torch.int64)", "_mend_item")
    recv = ob["locals"][0][1]
    unwidened = {**ob, "asserts": ob["asserts"].replace(
        f"{recv}.to(torch.float64 if {recv}.is_floating_point() else torch.int64)", recv)}
    assert unwidened["asserts"] != ob["asserts"]
    found = guarded_item_check(unwidened, Ctx({}, {}, bare))
    assert bare != code and found.result == "refuted" and "without `.to(" in (found.reason or found.counterexample or ""), found
    res = mended["itemle"][2]
    ob = next(o for o in res.rewrites[0]["obligations"] if o["kind"] == "guarded-item-check")
    for old, new in (("assert _mend_item.item() <= x.size(1)", "assert _mend_item.item() < x.size(1)"),
                     ("_mend_item = keep\n", "_mend_item = keep + 0\n")):
        tampered = res.mended.replace(old, new)
        assert tampered != res.mended and guarded_item_check(ob, Ctx({}, {}, tampered)).result == "refuted", old


def test_a_chain_reading_item_after_its_first_comparison_is_declined():
    # helper-87's F3: `0 <= lo.min().item() <= hi.max().item()`: Python skips `hi.max()` when the
    # first comparison fails (an empty `hi` raised in the guarded form)
    import libcst as cst

    from mend.rules import Decline
    from mend.rules import predicated_validation as pv

    src = (DIR / "chain_short_circuit.py").read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.strip().startswith("assert"))
    res = pv.rewrite(cst.parse_module(src), line)
    assert isinstance(res, Decline) and "after its first comparison" in res.reason, res


def test_an_int_tensor_against_a_float_bound_is_never_compared_in_the_graph():
    # helper-87's F2: `ids.max().item() >= 1e9` on int64 ids: torch compares in float32, so
    # 999999990 passed as 1e9; the guard admits only int64 against ints (float64 against floats),
    # so here the original test always runs and nothing is gained: not emitted, saying why
    res = fix(str(DIR / "int_vs_float.py"), unsafe_fixes=True, max_examples=3)
    # either check may decline it first (a fresh-clone CI run on 1c3ee2e got the second): nothing
    # gained, or the unguarded comparison's raises-iff-original refuted at 999999968 (float32)
    reason = res.declined[0].reason if res.declined else ""
    assert not res.rewrites and ("removes no graph break" in reason or (
        "raises-iff-original refuted" in reason and "99999" in reason)), res.declined
