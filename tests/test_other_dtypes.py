"""A candidate whose sides' dtypes were not proved for every dtype runs once more with the model
and inputs cast to float64 and to bfloat16 (verifier.legs.at_other_dtypes): a side that fixes
its own dtype gives one dtype on the float32 example and two elsewhere, where torch.cond raises
and torch.where promotes."""
import pytest

from mend.fix import fix
from verifier.legs import DTYPE_KINDS, other_dtypes
from tests.conftest import FIXTURES

import torch


def test_which_candidates_run_atother_dtypes():
    both = (torch.float64, torch.bfloat16)
    assert other_dtypes([]) == ()
    assert other_dtypes([{"kind": "same-shape", "result": "unknown"}]) == ()
    for kind in DTYPE_KINDS:
        assert other_dtypes([{"kind": kind, "result": "unknown"}]) == both
        assert other_dtypes([{"kind": kind, "result": "proved", "tier": "observed"}]) == both
        assert other_dtypes([{"kind": kind, "result": "proved", "tier": "general"}]) == ()
        assert other_dtypes([{"kind": kind, "result": "proved", "tier": "equal-sizes"}]) == ()


@pytest.mark.parametrize("name, said", [
    # cumsum(dtype=float32) beside a float64 side: the example's own branch shows it
    ("dtype_fixed_side.py", "with the model and inputs in float64, under"),
    # float32 ones promote a bfloat16 side: shown on the branch the example does not take
    ("dtype_factory_side.py", "with the model and inputs in bfloat16, predicates forced {17: False}, eager"),
])
def test_a_side_that_fixes_its_dtype_is_declined_at_another_dtype(name, said):
    res = fix(str(FIXTURES / "adversarial" / name), unsafe_fixes=True, choose="always", max_examples=3)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert said in d.reason, d.reason
    assert ": output (3, 4)/torch." in d.reason


def test_a_side_that_keeps_the_models_dtype_passes_there(tmp_path):
    # cumsum without dtype=: no transfer function (same-dtype unknown), the model's dtype at every dtype
    src = tmp_path / "cumsum_plain.py"
    src.write_text((FIXTURES / "adversarial" / "dtype_fixed_side.py").read_text().replace(
        "h.cumsum(-1, dtype=torch.float32)", "h.cumsum(-1)"))
    res = fix(str(src), unsafe_fixes=True, choose="always", max_examples=3)
    (rw,) = res.rewrites
    assert rw.safety["label"] == "unsafe" and any("same-dtype is unknown" in r for r in rw.safety["reasons"])
    assert {"compiled:eager-backend/float64/eval", "eager/float64/eval/forced", "compiled:eager-backend/bfloat16/eval",
            "eager/bfloat16/eval/forced"} <= set(rw.evidence["modes"])
    assert res.after.graph_count == 1
