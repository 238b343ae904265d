"""Issue 10: the fp16 overflow guards transformers writes (``if h.dtype == torch.float16 and
torch.isinf(h).any(): clamp_value = torch.finfo(h.dtype).max - 1000; h = torch.clamp(h, ...)``
and the ``not torch.isfinite(h).all()`` form), several to a function, so ``clamp_value`` is a
branch-local Python scalar named elsewhere: predicated-control-flow hoists it before the
selection, keeps the global ``.any()``/``.all()``, and labels the fix unsafe because Inductor
may compute a float16 producer in float32 and miss the overflow (measured: see
verifier/encoders/finiteness_precision.py)."""
from __future__ import annotations

import importlib.util

import libcst as cst
import torch

from mend.fix import fix
from mend.rules import RewriteResult
from mend.rules import predicated_control_flow as pcf
from tests.conftest import FIXTURES
from verifier import obligations as O

FIXTURE = FIXTURES / "fp16_guard.py"


def _load(code: str, name: str):
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    exec(compile(code, f"<{name}>", "exec"), mod.__dict__)
    return mod


def _inputs():
    base = torch.randn(2, 8, generator=torch.Generator().manual_seed(3)).half()
    one_inf = base.clone()
    one_inf[1, 2] = float("inf")  # one element only: the whole tensor is clamped, as the original does
    big = base.clone()
    big[0, 0] = 40000.0  # overflows to inf in the first product
    big[1, 1] = 32500.0  # 65000: finite, but above finfo.max - 1000, clamped only when some element is inf
    overflow_late = base.clone()
    overflow_late[0, 5] = 20000.0  # finite after the first product, inf after the second (gain2 = 2 there)
    neg = base.clone()
    neg[0, 4] = -float("inf")
    return [base, one_inf, big, overflow_late, neg]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and torch.equal(a.isnan(), b.isnan()) and torch.equal(
        torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))


def test_both_sites_rewrite_with_the_global_predicate_kept():
    src = FIXTURE.read_text()
    code = src
    for _ in range(2):
        res = pcf.rewrite(cst.parse_module(code), pcf.first_site(code))
        assert isinstance(res, RewriteResult), res
        assert any(o["kind"] == "finiteness-test-precision" and o["expr"] == "h" for o in res.obligations)
        code = res.code
    assert "torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)" in code
    assert "torch.where(torch.logical_not(torch.isfinite(h).all()), torch.clamp(" in code
    assert "torch.where(torch.isinf(h)," not in code and "torch.isfinite(h)," not in code  # never elementwise
    assert code.count("clamp_value = torch.finfo(h.dtype).max - 1000") == 2
    before = _load(src, "fp16_before").Model().eval()
    after = _load(code, "fp16_after").Model().eval()
    after.load_state_dict(before.state_dict())
    with torch.no_grad():
        for x in _inputs():
            assert _same(before(x), after(x)), x
    # the test can fail: an elementwise predicate (not what the rule emits) clamps only the
    # inf elements and leaves 65000 unclamped
    wrong = _load(code.replace("torch.isinf(h).any()", "torch.isinf(h)"), "fp16_wrong").Model().eval()
    with torch.no_grad():
        assert not all(_same(before(x), wrong(x)) for x in _inputs())


def test_fix_drops_the_graph_count_and_keeps_outputs():
    res = fix(str(FIXTURE), unsafe_fixes=True, max_examples=5)
    assert res.before.graph_count == 3
    assert res.after.graph_count < res.before.graph_count
    mine = [r for r in res.rewrites if r.rule == "predicated-control-flow"]
    assert mine
    for r in mine:  # float16 under Inductor: never a safe fix
        assert r.safety["label"] == "unsafe"
        assert any("finiteness-test-precision" in why for why in r.safety["reasons"])
    code = res.mended
    assert ".any()" in code and "torch.where(torch.isinf(h)," not in code
    before = _load(FIXTURE.read_text(), "fp16_orig").Model().eval()
    after = _load(code, "fp16_mended").Model().eval()
    after.load_state_dict(before.state_dict())
    with torch.no_grad():
        for x in _inputs():
            assert _same(before(x), after(x)), x


def test_inductor_misses_a_fused_float16_overflow_which_is_why_the_fix_is_unsafe():
    """The measured trap behind ``finiteness-test-precision``: with the guard's producer
    (``x * g``) in the same graph, Inductor computes it in float32 and the mended guard
    never fires; the original (a break at the ``if``) and eager do."""
    def mended(x, g):
        h = x * g
        if h.dtype == torch.float16:
            clamp_value = torch.finfo(h.dtype).max - 1000
            h = torch.where(torch.isinf(h).any(), torch.clamp(h, min=-clamp_value, max=clamp_value), h)
        return h * 0.5

    x = torch.ones(2, 8).half()
    x[0, 3] = 40000.0
    g = torch.full((8,), 2.0).half()
    torch._dynamo.reset()
    try:
        compiled = torch.compile(mended, backend="inductor")(x, g)
    finally:
        torch._dynamo.reset()
    assert mended(x, g)[0, 3].item() == 32256.0  # eager: inf, clamped to 64512, halved
    assert compiled[0, 3].item() == 40000.0, "Inductor now rounds fused float16 intermediates: revisit the encoder"


def _tensor(dtype):
    return {"kind": "tensor", "dtype": dtype, "shape": [2, 8], "device": "cpu", "param": False}


def test_the_precision_encoder_decides_from_the_observed_dtype():
    ob = {"kind": "finiteness-test-precision", "expr": "h", "test": "torch.isinf(h)"}
    for dtype, result in (("float16", "unknown"), ("bfloat16", "unknown"), ("float32", "checked"),
                          ("float64", "checked"), ("int64", "unknown")):
        facts = {"names": {"h": _tensor(dtype)}, "self": {}}
        r = O.discharge([ob], facts=facts, code=None)[0]
        assert r["result"] == result, (dtype, r)
        if result == "checked":  # an observation, never a proof
            assert dtype in r["checked_by"] and r["smtlib"] is None
        elif dtype == "float16":
            assert "Inductor" in r["reason"]
    r = O.discharge([ob], facts={"names": {}, "self": {}}, code=None)[0]
    assert r["result"] == "unknown" and "not observed" in r["reason"]
