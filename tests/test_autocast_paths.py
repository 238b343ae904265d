"""The differential test's autocast runs on drawn inputs (helper-39/40): a dtype that another
data-dependent branch, or an input's shape, decides under torch.autocast is seen only off the
example's path; the rewrite then gets the autocast-guarded form. A file of its own, so that
pytest-xdist's loadfile puts these slow fixes on a worker beside test_fix_cond.py's."""
import pytest
import torch

from mend.fix import fix
from tests.conftest import FIXTURES
from tests.test_fix_cond import GUARD, same_under_autocast


@pytest.mark.parametrize("name, inputs", [
    # s < 0 keeps h bfloat16 under autocast; x.sum() > 0 takes the `h * 2` side
    ("autocast_other_branch.py", [(torch.ones(4, 8), -torch.ones(3)), (-torch.ones(4, 8), -torch.ones(3)),
                                  (torch.ones(4, 8), torch.ones(3))]),
    # a batch of 4 makes y bfloat16 under autocast
    ("autocast_shape_decides_dtype.py", [(torch.ones(4, 8),), (-torch.ones(4, 8),), (torch.ones(2, 8),)]),
])
def test_a_dtype_decided_off_the_example_s_path_is_seen_on_drawn_inputs(name, inputs, tmp_path):
    """helper-39/40: the autocast leg on the example alone passed an unguarded torch.where whose
    sides differ in dtype under autocast only on other inputs; drawn inputs run under autocast too."""
    res = fix(str(FIXTURES / name), unsafe_fixes=True, max_examples=5, choose="always")
    assert res.rewrites and GUARD in res.mended, res.declined
    assert torch.bfloat16 in same_under_autocast(res, name, inputs, tmp_path, graphs=None)
