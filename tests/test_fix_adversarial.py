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
    res = fix(str(FIXTURES / "adversarial" / name), max_examples=10)
    assert res.rewrites == [], [rw["site"] for rw in res.rewrites]
    assert res.mended == res.original
    reasons = [d["reason"] for d in res.declined] + [s.reason for s in res.after.sites]
    assert any(CASES[name] in r for r in reasons), reasons
