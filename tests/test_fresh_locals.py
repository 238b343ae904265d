"""The fresh-local screen (mend/rules/_common.py): an in-place update of a tensor the
function allocated itself is not a state change a failing check could expose; anything
that may alias an input, a parameter or a buffer is. Cases from xlm's forward and from an
adversarial review (``+x`` returns x itself; ``self.get_buffer`` returns module state)."""
import libcst as cst
import libcst.matchers as m
import pytest

from mend.rules._common import fresh_locals, state_change

_CLASS = '''
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(4)
        self.layers = nn.ModuleList([nn.Linear(4, 4)])
        self.register_buffer("b", torch.zeros(4))
        self.p = 0.1

    def forward(self, x, mask):
{body}
'''


def _forward(body: str):
    src = _CLASS.format(body="\n".join("        " + line for line in body.strip().splitlines()))
    mod = cst.parse_module(src)
    cls = m.findall(mod, m.ClassDef())[0]
    fn = next(f for f in m.findall(cls, m.FunctionDef()) if f.name.value == "forward")
    return fn, cls


@pytest.mark.parametrize("body, fresh", [
    # xlm: arithmetic, a submodule, nn.functional with hyper-parameters, a ModuleList item
    ("t = x + 1\nt = self.ln(t)\nt = nn.functional.dropout(t, p=self.p, training=self.training)\n"
     "t = self.layers[0](t)\nt *= mask\nreturn t", {"t"}),
    ("t = -x\nt += 1\nreturn t", {"t"}),
    ("t = x * 1\nv = t.view(-1)\nv += 1\nreturn t", {"t", "v"}),
])
def test_fresh_locals_allocated_here_may_be_updated_in_place(body, fresh):
    fn, cls = _forward(body)
    assert fresh <= fresh_locals(fn, cls)
    assert state_change(fn, cls) is None


@pytest.mark.parametrize("body, culprit", [
    ("h = +x\nh += 1\nreturn h", "h += 1"),                                    # torch.positive returns x
    ("h = x\nh += 1\nreturn h", "h += 1"),                                     # an alias of the input
    ("h = self.get_buffer('b')\nh += 1\nreturn h", "h += 1"),                  # a method, not a submodule
    ("h = self.b\nh.add_(1)\nreturn h", "h.add_(1)"),                          # the buffer itself
    ("h = nn.functional.dropout(x, p=0.1)\nh *= 2\nreturn h", "h *= 2"),       # dropout(x) may return x
    ("h = self.ln(x)\nh = self.helper(p=h)\nh *= 2\nreturn h", "h *= 2"),      # self.helper is not a submodule
    ("for h in [x]:\n    h += 1\nreturn x", "h += 1"),                         # a loop target
    ("h = x + 1\nh, g = x, x\nh += 1\nreturn h", "h += 1"),                    # rebound by unpacking
])
def test_anything_that_may_alias_outside_state_is_a_state_change(body, culprit):
    fn, cls = _forward(body)
    assert state_change(fn, cls) == culprit


def test_without_the_class_no_self_call_is_a_submodule():
    fn, cls = _forward("t = self.ln(x * 1)\nt *= 2\nreturn t")
    assert state_change(fn, cls) is None
    assert state_change(fn, None) == "t *= 2"


def test_effect_analysis_takes_a_kwargs_dict_as_the_call_s_own():
    """xlm's attention is wrapped by transformers' deprecate_kwarg, which pops from **kwargs:
    that dict is made for the call, so it is no state a failing check could expose."""
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES
    from verifier.effects import function_purity

    mod = load_file_module(FIXTURES / "effects" / "kwargs_dict.py", "_mend_kwargs_dict")
    assert function_purity(mod.deprecate) == ([], [])
    effects, _ = function_purity(mod.bad)  # rebound to a caller's dict: a store into it is an effect
    assert effects and "kwargs['x']" in effects[0]


def test_effect_analysis_reads_the_body_not_the_decorators():
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES
    from verifier.effects import function_purity

    mod = load_file_module(FIXTURES / "effects" / "kwargs_dict.py", "_mend_kwargs_dict2")
    assert function_purity(mod.decorated) == ([], [])
