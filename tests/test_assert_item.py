"""predicated-validation on `assert T.item() <op> E` (xlm/flaubert `get_masks`): the `.item()`
host read becomes a cast to int64/float64 inside `torch._assert_async`, and raises-iff-original
proves the tensor comparison equal to Python's comparison of the host value -- or the rewrite is
declined.

Adversarial cases: the comparisons where dropping `.item()` without the cast changes the result
(measured here first: float32 near 2**24, float16 rounding of the bound, int32 wrap-around), a multi-element
tensor, NaN, `python -O`, a function that mutates state; and one fixture that `mend fix` fixes
end to end."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
import torch

from mend import validation_runtime as vr
from mend.fix import fix
from mend.rules import Decline
from mend.rules import predicated_validation as pv
from mend.taxonomy import categorize
from mend.locate import locate
from tests.conftest import FIXTURES
from verifier import obligations as O

ITEM_GB = "Unsupported Tensor.item() call with capture_scalar_outputs=False"


def _tensor(dtype, shape=(3,)):
    return {"kind": "tensor", "dtype": dtype, "shape": list(shape), "device": "cpu", "param": False}


def _facts(**names):
    return {"names": {"torch": {"kind": "pymodule", "value": "torch"}, **names}, "self": {}}


INT = {"kind": "num", "cat": "int", "value": 8}


def _mend(src: str):
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.strip().startswith("assert"))
    return pv.rewrite(cst.parse_module(src), line)


def _discharge(src: str, facts: dict) -> dict:
    res = _mend(src)
    assert isinstance(res, pv.RewriteResult), res
    out = O.discharge(res.obligations, facts=facts, code=res.code)
    return {r["kind"]: r for r in out}


def _src(cond: str, args: str = "t, n") -> str:
    return f"import torch\n\n\ndef f({args}):\n    assert {cond}\n    return t\n"


# --- the traps, measured: dropping `.item()` is not always the same comparison -------------------

def test_measured_traps():
    big = torch.tensor(16777216.0)                       # float32: 16777217 rounds to 2**24
    assert (big.item() < 16777217) is True and bool(big < 16777217) is False
    assert (big.item() == 16777217) is False and bool(big == 16777217) is True
    half = torch.tensor(1.0, dtype=torch.float16)        # the bound is rounded to float16 in eager
    assert (half.item() < 1.0001) is True and bool(half < 1.0001) is False
    i32 = torch.tensor(5, dtype=torch.int32)             # the bound wraps to int32
    assert (i32.item() == 2 ** 32 + 5) is False and bool(i32 == 2 ** 32 + 5) is True
    nan = torch.tensor(float("nan"))                     # NaN: the assert fails both ways
    assert (nan.item() <= 8) is False and bool(nan <= 8) is False
    with pytest.raises(RuntimeError):                    # more than one element: both raise RuntimeError
        torch.tensor([1, 2]).item()
    with pytest.raises(RuntimeError):
        bool(torch.tensor([1, 2]) <= 8)


# --- the verifier: proves the exact cases, never the traps --------------------------------------

def test_int64_lengths_proved():
    r = _discharge(_src("t.max().item() <= n"), _facts(t=_tensor("int64"), n=INT))
    assert r["raises-iff-original"]["result"] == "proved"
    assert r["condition-is-tensor"]["result"] == "proved"
    assert r["raises-iff-original"]["items"] == ["t.max()"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_float_lengths_against_an_int_not_proved(dtype):
    # float32 lengths near 2**24: `t < n` rounds n to float32, `t.item() < n` does not
    r = _discharge(_src("t.max().item() < n"), _facts(t=_tensor(dtype), n=INT))
    assert r["raises-iff-original"]["result"] != "proved"


WIDE = "t.max().to(torch.float64 if t.max().is_floating_point() else torch.int64)"


def _uncast(src: str, facts: dict) -> dict:
    """raises-iff-original on the rewrite's comparison with its widening cast removed."""
    res = _mend(src)
    ob = res.obligations[0]
    assert WIDE in ob["asserts"], ob["asserts"]
    (r,) = O.discharge([dict(ob, asserts=ob["asserts"].replace(WIDE, "t.max()"))], facts=facts, code=res.code)
    return r


def test_float16_bound_rounding_refuted_without_the_cast():
    src, facts = _src("t.max().item() < 0.1"), _facts(t=_tensor("float16"))
    assert _discharge(src, facts)["raises-iff-original"]["result"] == "proved"
    r = _uncast(src, facts)
    assert r["result"] == "refuted" and "0.0999755859375" in r["counterexample"]


def test_float32_equality_with_an_inexact_constant_refuted_without_the_cast():
    src, facts = _src("t.max().item() == 0.1"), _facts(t=_tensor("float32"))
    assert _discharge(src, facts)["raises-iff-original"]["result"] == "proved"
    assert _uncast(src, facts)["result"] == "refuted"


def test_int32_wraparound_refuted_without_the_cast():
    src, facts = _src("t.max().item() <= n"), _facts(t=_tensor("int32"), n=INT)
    assert _discharge(src, facts)["raises-iff-original"]["result"] == "proved"
    assert _uncast(src, facts)["result"] == "refuted"


def test_multi_element_tensor_refuted():
    # `.item()` of several elements raises; `_assert_async` of several raises another error
    r = _discharge(_src("t.item() <= n"), _facts(t=_tensor("int64", (3,)), n=INT))
    assert r["condition-is-tensor"]["result"] == "refuted"


def test_chained_comparison_proved():
    r = _discharge(_src("0 <= t.max().item() < n"), _facts(t=_tensor("int64"), n=INT))
    assert r["raises-iff-original"]["result"] == "proved"
    assert f"torch.logical_and(0 <= {WIDE}, {WIDE} < n)" in r["raises-iff-original"]["asserts"]


def test_item_on_both_sides_of_different_dtypes_not_proved():
    src = "import torch\n\n\ndef f(t, u):\n    assert t.max().item() <= u.max().item()\n    return t\n"
    r = _discharge(src, _facts(t=_tensor("float32"), u=_tensor("int64")))
    assert r["raises-iff-original"]["result"] == "unknown"
    assert "different dtypes" in r["raises-iff-original"]["reason"]


def test_compared_with_a_tensor_not_proved():
    r = _discharge(_src("t.max().item() <= n"), _facts(t=_tensor("int64"), n=_tensor("int64", ())))
    assert r["raises-iff-original"]["result"] == "unknown"


def test_wrong_mended_condition_refuted():
    res = _mend(_src("t.max().item() <= n"))
    ob = dict(res.obligations[0], asserts=f"{WIDE} < n")
    (r,) = O.discharge([ob], facts=_facts(t=_tensor("int64"), n=INT), code=res.code)
    assert r["result"] == "refuted"


# --- the screens -------------------------------------------------------------------------------

def test_state_changing_function_declined():
    src = textwrap.dedent('''\
        import torch


        class M(torch.nn.Module):
            def forward(self, lengths, slen):
                assert lengths.max().item() <= slen
                self.buf.add_(1)
                return lengths
        ''')
    res = _mend(src)
    assert isinstance(res, Decline) and "changes state" in res.reason


def test_module_level_function_screens(tmp_path):
    """`get_masks` is a module-level function inside an `else:` arm: no loop, no try/with, no state."""
    path = FIXTURES / "assert_item.py"
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "assert lengths" in t)
    loc = locate(str(path), line)
    assert categorize(ITEM_GB, loc) == "raise-assert"
    assert not isinstance(pv.match(loc), Decline)
    res = pv.rewrite(cst.parse_module(path.read_text()), line)
    assert isinstance(res, pv.RewriteResult)
    assert res.obligations[0]["raises_when"] == "not (lengths.max().item() <= slen)"


def test_taxonomy_leaves_other_item_sites_alone(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import torch\n\n\ndef f(t, n):\n    k = t.max().item()\n    assert k <= n\n"
                   "    assert t.max().item()\n    return t[:k]\n")
    assert categorize(ITEM_GB, locate(str(src), 5)) == "item-tolist"
    # the bare truth of one read is an item assert too (a generalisation probe): its tensor's
    # truth value is the number's, NaN included
    assert categorize(ITEM_GB, locate(str(src), 7)) == "raise-assert"


# --- behaviour of the mended code: eager, compiled, python -O ------------------------------------

def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def mended(tmp_path_factory):
    src = (FIXTURES / "assert_item.py").read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "assert lengths" in t)
    res = pv.rewrite(cst.parse_module(src), line)
    tmp = tmp_path_factory.mktemp("assert_item")
    (tmp / "orig_ai.py").write_text(src)
    (tmp / "mended_ai.py").write_text(res.code)
    return tmp, _load(tmp / "orig_ai.py", "_ai_orig"), _load(tmp / "mended_ai.py", "_ai_mended")


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as exc:  # behaviour under comparison
        return "raised", type(exc), str(exc)


def test_mended_fixture_same_behaviour_eager_and_compiled(mended):
    _, orig_mod, mended_mod = mended
    torch.manual_seed(0)
    orig = orig_mod.Model().eval()
    new = mended_mod.Model().eval()
    new.load_state_dict(orig.state_dict())
    vr.install(new)
    x, lengths = orig_mod.get_inputs()
    bad = torch.tensor([6, 9])
    for backend in (None, "eager", "aot_eager"):
        torch._dynamo.reset()
        fn = new if backend is None else torch.compile(new, backend=backend)
        a, b = _outcome(orig, x, lengths), _outcome(fn, x, lengths)
        assert a[0] == b[0] == "ok" and torch.equal(a[1], b[1])
        a, b = _outcome(orig, x, bad), _outcome(fn, x, bad)
        assert a[:2] == b[:2] == ("raised", AssertionError), (backend, a, b)


def test_python_O_strips_both(mended):
    tmp, _, _ = mended
    for name in ("orig_ai", "mended_ai"):
        code = (f"import sys; sys.path.insert(0, {str(tmp)!r}); import torch, {name} as m\n"
                "x, _ = m.get_inputs()\n"
                "print(m.Model()(x, torch.tensor([6, 9])).shape)\n")
        out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "torch.Size([2, 6, 8])" in out.stdout


# --- end to end: mend fix --------------------------------------------------------------------

def test_mend_fix_end_to_end(tmp_path):
    res = fix(str(FIXTURES / "assert_item.py"), unsafe_fixes=True, max_examples=5)
    rules = [rw["rule"] for rw in res.rewrites]
    assert rules == ["predicated-validation"], (rules, [d.to_json() for d in res.declined])
    assert res.after.graph_count < res.before.graph_count
    assert res.after.graph_break_count == 0
    kinds = {r["kind"]: r["result"] for r in res.rewrites[0]["obligations"]}
    assert kinds["raises-iff-original"] == "proved" and kinds["condition-is-tensor"] == "proved"
    path = tmp_path / "mended_e2e.py"
    path.write_text(res.mended)
    mod = _load(path, "_ai_e2e")
    model = vr.install(mod.Model().eval())
    x, _ = mod.get_inputs()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager")
    with pytest.raises(AssertionError):
        compiled(x, torch.tensor([6, 9]))
    assert compiled(x, torch.tensor([6, 4])).shape == (2, 6, 8)


def test_the_bare_truth_of_an_item_read_is_fixed_end_to_end(tmp_path):
    res = fix(str(FIXTURES / "assert_item_truth.py"), unsafe_fixes=True, max_examples=5)
    assert [rw["rule"] for rw in res.rewrites] == ["predicated-validation"], [d.to_json() for d in res.declined]
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    path = tmp_path / "mended_truth.py"
    path.write_text(res.mended)
    mod = _load(path, "_ai_truth")
    model = vr.install(mod.Model().eval())
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager")
    with pytest.raises(AssertionError, match="input_ids out of vocabulary"):
        compiled(torch.tensor([[1, 2, 10]]))
    assert compiled(torch.tensor([[1, 2, 3]])).shape == (1, 8)


@pytest.mark.parametrize("which", ["validation", "deferred"])
def test_an_installed_runtime_adds_no_compiled_frame(which):
    # the runtimes' forward was torch.compiler.disable(..., recursive=False): Dynamo compiled
    # that wrapper as a frame of its own, with a graph break at the call -- 3 frames instead of
    # 1, and 0.16 ms added to every compiled call (benchmarks/steady_paired.py found it)
    from torch._dynamo.utils import counters

    import mend.runtime as rt

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.lin(x))

    torch._dynamo.reset()
    counters.clear()
    model = (vr if which == "validation" else rt).install(M().eval())
    compiled = torch.compile(model, backend="eager")
    with torch.no_grad():
        compiled(torch.randn(2, 8))
        compiled(torch.randn(2, 8))
    assert dict(counters["frames"]) == {"total": 1, "ok": 1}


@pytest.mark.parametrize("caller", ["lambda", "parent", "decorated"])
def test_the_exception_is_restored_when_a_compiled_caller_calls_the_installed_model(tmp_path, caller):
    # an adversarial review: with the installed forward only marked skipped, a compiled caller
    # inlined it, traced its `try`, and a failing check raised RuntimeError('mend-trap:...')
    res = fix(str(FIXTURES / "assert_item_truth.py"), unsafe_fixes=True, max_examples=3)
    path = tmp_path / f"mended_caller_{caller}.py"
    path.write_text(res.mended)
    mod = _load(path, f"_ai_caller_{caller}")
    model = vr.install(mod.Model().eval())
    torch._dynamo.reset()
    if caller == "lambda":
        fn = torch.compile(lambda ids: model(ids) * 2, backend="aot_eager")
    elif caller == "parent":
        class Parent(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.child = model

            def forward(self, ids):
                return self.child(ids) + 1
        fn = torch.compile(Parent(), backend="aot_eager")
    else:
        @torch.compile(backend="aot_eager")
        def fn(ids):
            return model(ids).sum()
    with pytest.raises(AssertionError, match="input_ids out of vocabulary"):
        fn(torch.tensor([[1, 2, 10]]))
    fn(torch.tensor([[1, 2, 3]]))


def test_torch_assert_on_a_tensor_is_fixed_end_to_end(tmp_path):
    # a hidden-case probe: `torch._assert(C, "msg")` broke as "Data dependent operator" and was
    # reported as a dynamic-shape op; it is `assert C, "msg"`, so the assert's rewrite applies
    res = fix(str(FIXTURES / "torch_assert_lengths.py"), unsafe_fixes=True, max_examples=5)
    assert [rw["rule"] for rw in res.rewrites] == ["predicated-validation"], [d.to_json() for d in res.declined]
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    assert res.before.sites[0].category == "raise-assert"
    path = tmp_path / "mended_torch_assert.py"
    path.write_text(res.mended)
    mod = _load(path, "_ta_e2e")
    model = vr.install(mod.Model().eval())
    x, _ = mod.get_inputs()
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        compiled = torch.compile(model, backend=backend)
        with pytest.raises(AssertionError) as info:
            compiled(x, torch.tensor([3.0, 0.0]))
        assert str(info.value) == "lengths must be positive"   # the message as the original's (a note aside)
        assert compiled(x, torch.tensor([3.0, 2.0])).shape == (2, 8)


def test_torch_assert_keeps_the_call_for_all_but_a_one_element_plain_tensor(tmp_path):
    # an adversarial review: torch._assert is `if not C: raise AssertionError(msg)` (python -O does
    # not strip it), takes Python bools, dispatches __torch_function__, and a C of several
    # elements raises "ambiguous" where an inlined _assert_async did not under inductor
    res = pv.rewrite(cst.parse_module(_TA), 5)
    path = tmp_path / "ta_kept.py"
    path.write_text(res.code)
    mod = _load(path, "_ta_kept")

    class Logged(torch.Tensor):
        seen = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.seen.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    for fn in (lambda c: mod.check(c), torch.compile(lambda c: mod.check(c), backend="aot_eager")):
        torch._dynamo.reset()
        assert fn(True) == 1
        # compiled, Dynamo may add its "from user code" appendix (the original's own message has it
        # when False is the first call, not after a True: measured), so the first line is compared
        with pytest.raises(AssertionError) as info:
            fn(False)
        assert str(info.value).split("\n")[0] == "positive"
        with pytest.raises(RuntimeError, match="ambiguous"):
            fn(torch.tensor([True, False]))
    # eager, without mend.validation_runtime.install: a one-element CPU tensor raises the original
    # exception (the condition starts with torch.compiler.is_compiling(); helper-102 found the marker)
    with pytest.raises(AssertionError, match="^positive$"):
        mod.check(torch.tensor(False))
    Logged.seen.clear()
    assert mod.check(torch.tensor(True).as_subclass(Logged)) == 1 and "_assert" in Logged.seen
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import ta_kept as m\n"
            "try:\n    m.check(False)\nexcept AssertionError as e:\n    print('raised', e)\n")
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=300)
    assert "raised positive" in out.stdout, out.stderr[-2000:]


_TA = """import torch


def check(c):
    torch._assert(c, "positive")
    return 1
"""
