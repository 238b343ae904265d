"""verifier/obligations.py: each obligation kind proved, refuted with a counterexample, or
unknown; timeouts are unknown and block --verify strict."""
import shutil

import pytest
import torch
import z3

from mend.fix import fix
from tests.conftest import FIXTURES, SHARED_CASES
from verifier import obligations as O


def tensor(dtype="float32", shape=(2, 5), device="cpu"):
    return {"kind": "tensor", "dtype": dtype, "shape": list(shape), "device": device, "param": False}


def facts(**names):
    out = {"torch": {"kind": "pymodule", "value": "torch"}}
    out.update({k.replace("__", "."): v for k, v in names.items()})
    return {"names": out, "self": {}}


def one(kind, f, rule="predicated-control-flow", code=None, **data):
    (res,) = [r for r in O.discharge(rule, [{"kind": kind, **data}], facts=f, code=code) if r["kind"] == kind]
    return res


# -- value-level selection: where == ite, bit for bit, in the target dtype --------------------

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_where_equals_ite_proved_in_fp_theory_of_the_dtype(dtype):
    f = facts(h=tensor(dtype))
    obs = [{"kind": "single-element-predicate", "pred": "h.sum() > 0 and not (h.mean() < -1.0)"},
           {"kind": "same-dtype", "target": "h", "lhs": "h * 2.0", "rhs": "h - 1.0"}]
    res = {r["kind"]: r for r in O.discharge("predicated-control-flow", obs, facts=f)}
    r = res["where-equals-ite"]
    assert r["result"] == "proved" and r["status"] == "unsat"
    e, s = O.FP_FORMAT[dtype]
    assert f"(_ FloatingPoint {e} {s})" in r["smtlib"] and "Real" not in r["smtlib"]
    assert "never reals" in r["arithmetic"]
    assert O.replay(r["smtlib"]) == "unsat"


def test_dtype_change_is_refuted_with_counterexample():  # shared/cases 010
    f = facts(h=tensor("float32", (3, 8)))
    r = one("same-dtype", f, target="h", lhs="h.half()", rhs="h")
    assert r["result"] == "refuted" and "h.dtype = float32" in r["counterexample"]


def test_dtype_proved_for_every_floating_dtype():
    f = facts(h=tensor("float16"), clamp_value={"kind": "num", "cat": "float", "value": 64504.0})
    r = one("same-dtype", f, target="h", lhs="torch.clamp(h, min=-clamp_value, max=clamp_value)", rhs="h")
    assert r["result"] == "proved" and r["tier"] == "general"
    assert any("any floating dtype" in a for a in r["assumptions"])


def test_dtype_unknown_without_facts():
    r = one("same-dtype", {"names": {}, "self": {}}, target="h", lhs="h * 2", rhs="h")
    assert r["result"] == "unknown" and "nothing is known about `h`" in r["reason"] and r["smtlib"] is None


# -- shapes ----------------------------------------------------------------------------------

def test_same_shape_elementwise_proved_for_symbolic_sizes():
    f = facts(h=tensor(shape=(2, 5, 16)))
    r = one("same-shape", f, target="h", lhs="torch.relu(h * 0.5 + 1.0).transpose(0, 1).transpose(1, 0)", rhs="h")
    assert r["result"] == "proved" and r["tier"] == "general"
    assert "|h.shape[2]|" in r["smtlib"]


def test_cat_changes_shape_refuted():  # shared/cases 009
    f = facts(h=tensor(shape=(2, 5, 16)), img=tensor(shape=(2, 3, 16)))
    r = one("same-shape", f, target="h", lhs="torch.cat([img, h], dim=1)", rhs="h")
    assert r["result"] == "refuted" and "img.shape[1] = 3" in r["counterexample"]


def test_reductions_reshape_softmax_matmul_transfer():
    f = facts(x=tensor(shape=(2, 3, 4)), w=tensor(shape=(4, 6)))
    assert one("same-shape", f, target="y", lhs="(x @ w).sum(dim=-1)", rhs="x.reshape(2, 12)[:, :3]")["result"] == "proved"
    assert one("same-shape", f, target="y", lhs="x.softmax(dim=-1).permute(2, 0, 1)[0]",
               rhs="x[..., 0]")["result"] == "proved"


def test_single_element_predicate():
    f = facts(h=tensor(shape=(2, 5)))
    assert one("single-element-predicate", f, pred="h.sum() > 0")["result"] == "proved"
    r = one("single-element-predicate", f, pred="h > 0")
    assert r["result"] == "refuted" and r["counterexample"]


def test_untaken_side_cannot_raise():
    f = facts(h=tensor(shape=(2, 3)), self__bias=tensor(shape=(5,)))
    r = one("untaken-side-cannot-raise", f, expr="h + self.bias", guard="h.sum() > 0")
    assert r["result"] == "refuted" and "sizes broadcast" in r["counterexample"]
    ok = one("untaken-side-cannot-raise", facts(h=tensor(shape=(2, 3))), expr="torch.clamp(h * 2.0, min=-1.0)",
             guard="h.sum() > 0")
    assert ok["result"] == "proved"


def test_bool_predicate_refuted_for_a_float_test():
    r = one("bool-predicate", facts(h=tensor("float32", ())), pred="h")
    assert r["result"] == "refuted"


# -- gradients (shared/cases 012) -------------------------------------------------------------

def test_finite_gradient_refuted_for_unguarded_sqrt():
    f = facts(s=tensor(shape=()))
    r = one("finite-gradient", f, expr="torch.sqrt(s)", op="sqrt", guard="s > 0")
    assert r["result"] == "refuted" and "s[i] = " in r["counterexample"] and r["use"] == "inference-only"
    ok, reason, use = O.verdict([r], "strict")
    assert not ok and "finite-gradient" in reason and use == "inference-only"
    ok, reason, use = O.verdict([r], "standard")
    assert ok and use == "inference-only"


def test_finite_gradient_proved_for_guarded_sqrt():
    f = facts(s=tensor(shape=()))
    r = one("finite-gradient", f, expr="torch.sqrt(torch.where(s > 0, s, 1.0))", op="sqrt", guard="s > 0")
    assert r["result"] == "proved"


def test_log_gradient_refuted_only_at_zero():
    r = one("finite-gradient", facts(s=tensor(shape=())), expr="torch.log(s)", op="log", guard="s > 0")
    assert r["result"] == "refuted" and "s[i] = 0.0" in r["counterexample"]


# -- validation and deferred effects ----------------------------------------------------------

CODE = '''import torch
_MEND_TRAPS = {
    "abc123abc123": lambda: ValueError("bad shapes"),
}
def f(a, n):
    torch._assert_async((a[:, 0] * a[:, 1]).sum() == n, "mend-trap:m:_MEND_TRAPS.abc123abc123")
'''


def test_raises_iff_original_with_restored_message():
    f = facts(a=tensor("int64", (4, 2)), n={"kind": "num", "cat": "int", "value": 8})
    ob = {"kind": "raises-iff-original", "exception": "ValueError", "message": "bad shapes", "args": ["bad shapes"],
          "raises_when": "(a[:, 0] * a[:, 1]).sum() != n", "asserts": "(a[:, 0] * a[:, 1]).sum() == n",
          "trap": "_MEND_TRAPS.abc123abc123"}
    (r,) = O.discharge("predicated-validation", [ob], facts=f, code=CODE)
    assert r["result"] == "proved" and r["restored"] == ["ValueError", "bad shapes"]
    (bad,) = O.discharge("predicated-validation", [{**ob, "message": "other"}], facts=f, code=CODE)
    assert bad["result"] == "refuted"
    (neg,) = O.discharge("predicated-validation", [{**ob, "asserts": "(a[:, 0] * a[:, 1]).sum() != n"}],
                         facts=f, code=CODE)
    assert neg["result"] == "refuted"


def test_protocol_obligations_are_proved_with_assumptions():
    obs = [{"kind": "order-preserved"}, {"kind": "replayed-on-exception", "requires": "mend.runtime.install(model)"},
           {"kind": "snapshot-before-mutation", "values": ["x"]}, {"kind": "once-per-process", "method": "warning_once"}]
    res = O.discharge("deferred-side-effects", obs, facts=None)
    assert [r["result"] for r in res] == ["proved"] * 4
    assert any("ORDERED" in a for a in res[0]["assumptions"])
    assert any("clone" in a for a in res[2]["assumptions"])


def test_unknown_kind_is_unknown():
    (r,) = O.discharge("deferred-side-effects", [{"kind": "something-new"}], facts=None)
    assert r["result"] == "unknown" and "no encoding" in r["reason"]


# -- timeouts ---------------------------------------------------------------------------------

def _hard_query():
    x, y = z3.BitVecs("x y", 64)
    # factor a 62-bit semiprime: far beyond 1 ms
    return [x * y == 3_037_000_493 * 1_518_500_249, z3.UGT(x, 1), z3.UGT(y, 1), z3.ULT(x, 2**32), z3.ULT(y, 2**32)]


def test_timeout_is_unknown_and_blocks_strict():
    solved = O.solve(_hard_query(), timeout_ms=1)
    assert solved.status == "unknown"
    assert O.result_of(solved.status) == "unknown"
    r = {"kind": "same-shape", "lhs": "a", "rhs": "b", "result": "unknown", "reason": "timeout (1 ms)"}
    ok, reason, _ = O.verdict([r], "strict")
    assert not ok and "same-shape" in reason and "unknown" in reason
    assert O.verdict([r], "standard")[0]


def test_timed_out_obligation_declines_strict_fix(monkeypatch, tmp_path):
    src = tmp_path / "m.py"
    shutil.copy(FIXTURES / "branch_where.py", src)
    real = O.solve

    def slow(assertions, *, timeout_ms=O.TIMEOUT_MS, comments=()):
        if any("same-shape" in c for c in comments):
            return real(_hard_query(), timeout_ms=1, comments=comments)
        return real(assertions, timeout_ms=timeout_ms, comments=comments)

    monkeypatch.setattr(O, "solve", slow)
    res = fix(str(src), max_examples=5, verify="strict")
    assert res.rewrites == []
    (d,) = res.declined
    assert "same-shape" in d["reason"] and "unknown" in d["reason"] and d["failed_obligations"] == ["same-shape"]
    res = fix(str(src), max_examples=5, verify="standard")
    (rw,) = res.rewrites
    assert {o["kind"]: o["result"] for o in rw["obligations"]}["same-shape"] == "unknown"


# -- mend fix --verify -------------------------------------------------------------------------

def test_strict_fix_records_proved_obligations():
    res = fix(str(FIXTURES / "branch_where.py"), max_examples=5, verify="strict")
    (rw,) = res.rewrites
    assert rw["verification"]["level"] == "strict"
    assert all(o["result"] == "proved" and o["smtlib"] for o in rw["obligations"])
    assert rw["evidence"]["examples"] >= O.STRICT_MIN_EXAMPLES


@pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")
@pytest.mark.parametrize("case, kind", [("009_branch_changes_seq_len.py", "same-shape"),
                                        ("010_branch_changes_dtype.py", "same-dtype")])
def test_strict_declines_traps_naming_the_obligation(case, kind):
    res = fix(str(SHARED_CASES / case), max_examples=5, verify="strict")
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert kind in d["failed_obligations"] and f"obligation {kind}" in d["reason"] and "refuted" in d["reason"]


@pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")
def test_strict_rewrites_the_sqrt_trap_with_cond_not_where():
    """012: torch.where would leak NaN gradients (finite-gradient is refuted for it, see
    above); torch.cond runs only the taken side, so strict emits that, every obligation proved."""
    res = fix(str(SHARED_CASES / "012_sqrt_branch_grad_nan.py"), max_examples=5, verify="strict")
    (rw,) = res.rewrites
    assert "torch.cond(" in rw["diff"] and "torch.where(" not in rw["diff"]
    kinds = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert set(kinds.values()) == {"proved"} and "cond-taken-side-only" in kinds and "finite-gradient" not in kinds
    assert "compiled:eager-backend/forced/train" in rw["evidence"]["modes"]


def test_fast_does_not_consult_z3():
    res = fix(str(FIXTURES / "branch_where.py"), max_examples=30, verify="fast")
    (rw,) = res.rewrites
    assert all(o["result"] == "unknown" and o["smtlib"] is None for o in rw["obligations"])
    assert rw["evidence"]["examples"] <= 6


def test_facts_are_read_where_the_rewrite_runs(tmp_path):
    import libcst as cst

    from mend.rules import RULES
    from mend.targets import load_target

    code = (FIXTURES / "branch_where.py").read_text()
    rw = RULES["predicated-control-flow"].rewrite(cst.parse_module(code), 12)
    t = load_target(str(FIXTURES / "branch_where.py"))
    cand = tmp_path / "cand.py"
    cand.write_text(rw.code)
    f, _ = O.facts_in_process(cand, "_mend_under_test", (), t.args, {}, rw.obligations, code, rw.code)
    h = f["names"]["h"]
    assert h == {"kind": "tensor", "dtype": "float32", "shape": [2, 8], "device": "cpu", "param": False}
    assert f["hits"] >= 1 and isinstance(torch.tensor(0), torch.Tensor)


@pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")
def test_strict_on_shared_cases_emits_no_wrong_rewrite(tmp_path):
    """Every trap / no / control case under --verify strict: "no" and control cases are left
    alone, a rewritten trap behaves like the original on its trap inputs (eager and
    compiled), and every decline by an obligation names it."""
    from mend import validation_runtime
    from mend.targets import load_file_module
    from tests.test_fix_shared_cases import _run, _same
    from tests.test_shared_cases import ROWS

    for name, *_, fixable in ROWS:
        if fixable == "yes":
            continue
        res = fix(str(SHARED_CASES / name), max_examples=5, verify="strict")
        for d in res.declined:
            if d.get("failed_obligations"):
                assert all(f"obligation {k}" in d["reason"] for k in d["failed_obligations"][:4]), d
        if fixable != "trap":
            assert res.rewrites == [] and res.mended == res.original, name
            continue
        if not res.rewrites:
            continue
        mended = tmp_path / name
        mended.write_text(res.mended)
        orig_mod = load_file_module(SHARED_CASES / name, f"_s_orig_{name[:3]}")
        new_mod = load_file_module(mended, f"_s_new_{name[:3]}")
        inputs = [orig_mod.get_inputs()] + ([orig_mod.get_trap_inputs()] if hasattr(orig_mod, "get_trap_inputs") else [])
        for args in inputs:
            torch.manual_seed(0)
            a, b = orig_mod.Model().eval(), new_mod.Model().eval()
            b.load_state_dict(a.state_dict())
            validation_runtime.install(b)
            ref = _run(a, args, compiled=False)
            assert _same(ref, _run(b, args, compiled=False)) and _same(ref, _run(b, args, compiled=True)), name
