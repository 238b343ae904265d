"""Soundness regressions: models a reviewer wrote to make mend emit a wrong rewrite
(tests/fixtures/adversarial). Each obvious rewrite changes behaviour (NaN gradient of an
input, short-circuit `and` that now indexes out of bounds, a shape that only differs at
other batch sizes, input aliasing, dropout/BatchNorm/counters in an untaken submodule,
state updates around a moved check, print order with the runtime installed); mend must
decline the site, naming why."""
import pytest

from mend.fix import fix
from tests.conftest import FIXTURES

CASES = {
    "m01_nograd_sqrt.py": "gradient",
    "m05_and_index.py": "indexing",
    "m06_shape_batch1.py": "output",
    "m07_alias_input.py": "behaviour differs",
    "m25_return_alias_nonscalar.py": "behaviour differs",
    "m33_noise_module_train.py": "differ",
    "m34_bn_in_sequential_train.py": "running_mean",
    "m35_counter_submodule_eval.py": "gate.hits",
    "m16b_raise_sub_parent_ema.py": "state-unchanged-on-raise",
    "m28_print_try_order.py": "stdout differ",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wrong_rewrite_is_declined(name):
    res = fix(str(FIXTURES / "adversarial" / name), unsafe_fixes=True, max_examples=10)
    assert res.rewrites == [], [rw["site"] for rw in res.rewrites]
    assert res.mended == res.original
    reasons = [d["reason"] for d in res.declined] + [s.reason for s in res.after.sites]
    assert any(CASES[name] in r for r in reasons), reasons


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
