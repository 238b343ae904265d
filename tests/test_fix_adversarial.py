"""Soundness regressions: models a reviewer wrote to make mend emit a wrong rewrite
(tests/fixtures/adversarial). Each obvious rewrite changes behaviour (NaN gradient of an
input, short-circuit `and` that now indexes out of bounds, a shape that only differs at
other batch sizes, input aliasing (an input returned on the untaken side), dropout/BatchNorm/counters in an untaken submodule,
state updates around a moved check); mend must decline the site, naming why."""
import pytest

from mend.fix import fix
from tests.conftest import FIXTURES

CASES = {
    # the untaken side's NaN gradient, or (found first, on the forced outcome) `y = x` returning the input itself
    "m01_nograd_sqrt.py": ("gradient", "is input 0 itself"),
    "m05_and_index.py": "indexing",
    "m06_shape_batch1.py": "output",
    "m07_alias_input.py": "behaviour differs",
    "m40_return_input_untaken.py": "is input 0 itself in the original but is a new tensor",
    "m41_view_of_input_untaken.py": "shares the storage of input 0 in the original",
    "m33_noise_module_train.py": "differ",
    "m34_bn_in_sequential_train.py": "running_mean",
    "m35_counter_submodule_eval.py": "gate.hits",
    "m16b_raise_sub_parent_ema.py": "state-unchanged-on-raise",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wrong_rewrite_is_declined(name):
    res = fix(str(FIXTURES / "adversarial" / name), unsafe_fixes=True, max_examples=10)
    assert res.rewrites == [], [rw["site"] for rw in res.rewrites]
    assert res.mended == res.original
    reasons = [d["reason"] for d in res.declined] + [s.reason for s in res.after.sites]
    expected = CASES[name] if isinstance(CASES[name], tuple) else (CASES[name],)
    assert any(e in r for e in expected for r in reasons), reasons


def test_a_batch_sized_gate_returned_early_takes_the_cond_that_keeps_the_ifs_error(tmp_path):
    """m25: `if gate > 0: return x + 1.0` then `return x * 0.5`, the gate one element only at
    batch 1. torch.where broadcasts a batch-2 gate where the `if` raises (declined: behaviour
    differs); since the early return takes torch.cond, the cond form runs only for a one-element
    gate and the `if` keeps its error otherwise (in a process of its own, as a user runs mend)."""
    import torch

    from mend.targets import load_file_module
    from tests.conftest import fix_in_own_process

    src = FIXTURES / "adversarial" / "m25_return_alias_nonscalar.py"
    doc, mended = fix_in_own_process(src, tmp_path, "--examples", "10")
    (rw,) = doc["rewrites"]
    assert "torch.cond" in rw["detail"] and "(gate > 0).numel() == 1" in mended
    where = next(c for c in rw["choice"]["candidates"] if c["name"] == "where")
    assert where["verified"] is False and "behaviour differs" in where["note"], where
    (tmp_path / "m25.py").write_text(mended)
    errors = []
    for path in (src, tmp_path / "m25.py"):
        mod = load_file_module(path, f"_m25_{len(errors)}")
        torch.manual_seed(0)
        model = mod.Model().eval()
        torch._dynamo.reset()
        with torch.no_grad():
            for backend in ("eager", "inductor"):
                assert torch.equal(torch.compile(model, backend=backend)(*mod.get_inputs()), model(*mod.get_inputs()))
            with pytest.raises(RuntimeError) as err:
                torch.compile(model, backend="eager")(torch.randn(2, 8))
            errors.append(str(err.value).splitlines()[0])
    assert errors[0] == errors[1] and "ambiguous" in errors[0]
    torch._dynamo.reset()


# host-count-reduction: wrong rewrites a reviewer found (tests/fixtures/adversarial/hc*.py).
# Each is declined at every level -- count-compare-exact, count-tolist-1d and
# count-uses-keep-type must be proved even at --verify fast -- naming the obligation (or the
# static reason: a name of the iterated tensor rebound after the count starts, NumPy).
HC_CASES = {
    "hc1_helper_two_dtypes.py": ("count-compare-exact", "disagree"),      # facts of every call must agree
    "hc2_unmodelled_method.py": ("count-compare-exact", "not modelled"),  # T not shown to be a tensor
    "hc3_unknown_use_operand.py": ("count-uses-keep-type", "self.scale(x)"),
    "hc4_operand_rebound.py": ("count-uses-keep-type", "Python float"),    # each use's operand at its line
    "hc5_rebound_after_loop.py": ("is rebound or written", "`x`"),
    "hc6_numpy_tolist.py": ("goes through NumPy", ".numpy()"),
    "hc7_inexact_threshold.py": ("count-compare-exact", "0.10000000149011612"),
}


def _hc_reasons(res):
    return [d["reason"] for d in res.declined] + [s.reason for s in res.after.sites]


@pytest.mark.parametrize("level", ["fast", "standard", "strict"])
@pytest.mark.parametrize("name", sorted(HC_CASES))
def test_host_count_wrong_rewrite_is_declined(name, level):
    res = fix(str(FIXTURES / "adversarial" / name), unsafe_fixes=True, verify=level, max_examples=5)
    assert res.rewrites == [], [(rw["site"], rw["diff"]) for rw in res.rewrites]
    assert res.mended == res.original
    words = HC_CASES[name]
    assert any(all(w in r for w in words) for r in _hc_reasons(res)), _hc_reasons(res)


@pytest.mark.parametrize("name,screen", [("hc5_rebound_after_loop.py", "_rebinding"),
                                         ("hc6_numpy_tolist.py", "_through_numpy")])
def test_host_count_obligations_decline_without_the_static_screen(name, screen, monkeypatch):
    """Defence in depth: with the static screen off, the facts observed where the count runs
    (x is float32 there; `.numpy()` is not modelled) still decline, at --verify fast."""
    from mend.rules.host_count_reduction import screen as hc

    monkeypatch.setattr(hc, screen, lambda *a, **k: None)
    res = fix(str(FIXTURES / "adversarial" / name), unsafe_fixes=True, verify="fast", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert d["rule"] == hc.NAME and "count-compare-exact" in d["reason"], d
    assert "count-compare-exact" in d["failed_obligations"]


def test_a_deferred_print_before_a_print_in_a_try_keeps_eager_order(tmp_path):
    """m28 was declined while deferred effects waited for the end of the call (the second,
    undeferred print overtook the first). Replayed right after its graph, the first print
    comes out before the graph break of the second, as in eager: the fix is emitted, and the
    mended model, compiled, prints in eager's order."""
    import contextlib
    import importlib.util
    import io

    import torch

    res = fix(str(FIXTURES / "adversarial" / "m28_print_try_order.py"), max_examples=10, unsafe_fixes=True)
    assert [r.site.rsplit(":", 1)[1] for r in res.rewrites] == ["12"] and res.declined == []
    path = FIXTURES / "adversarial" / "m28_print_try_order.py"
    mended = tmp_path / path.name
    mended.write_text(_applied(path))
    spec = importlib.util.spec_from_file_location("_m28_mended", mended)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    torch._dynamo.reset()
    with contextlib.redirect_stdout(out), torch.no_grad():
        torch.compile(module.Model().eval())(*module.get_inputs())
    assert [line.split(" ")[0] for line in out.getvalue().splitlines()] == ["first", "second"]


def _applied(path) -> str:
    import libcst as cst

    from mend.rules import deferred_side_effects as de

    return de.rewrite(cst.parse_module(path.read_text()), 12).code
