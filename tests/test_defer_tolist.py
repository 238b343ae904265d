"""A `.tolist()` argument of a print is deferred as `item(t, tolist)`: the nested list read from the
snapshot at replay (helper-97 f2, a false decline before: "Python code consumes it")."""
import contextlib
import io

import torch

from mend.fix import fix
from tests.conftest import FIXTURES, load_pair


def _printed(model, x):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), torch.no_grad():
        y = model(x)
    return out.getvalue(), y


def test_a_printed_tolist_is_deferred_and_prints_the_same(tmp_path):
    src = FIXTURES / "print_tolist.py"
    res = fix(str(src), unsafe_fixes=True, max_examples=5)
    (rw,) = res.rewrites
    assert rw.rule == "deferred-side-effects" and (res.before.graph_count, res.after.graph_count) == (3, 1)
    assert "_mend_rt.item(counts, _mend_rt.tolist)" in res.mended
    assert '_mend_rt.fmt("top {:.3f}", _mend_rt.item(logits.amax(), _mend_rt.tolist))' in res.mended
    a_mod, a, b = load_pair(src, res.mended, tmp_path, "tl")
    torch._dynamo.reset()
    compiled = torch.compile(b, backend="eager", fullgraph=True)   # one graph: no break left
    for x in (a_mod.get_inputs()[0], torch.zeros(3, 8), -torch.ones(1, 8)):
        want, y = _printed(a, x)
        for model in (b, compiled):
            got, z = _printed(model, x)
            assert got == want and torch.equal(y, z)
    torch._dynamo.reset()


def test_tolist_elsewhere_in_the_arguments_is_declined():
    from mend.rules import RULES, Decline
    import libcst as cst

    src = "import torch\n\n\ndef forward(self, x):\n    print('n', len(x.tolist()))\n    return x\n"
    res = RULES["deferred-side-effects"].rewrite(cst.parse_module(src), 5)
    assert isinstance(res, Decline) and "`x.tolist()` reads a tensor on the host inside the call's arguments" in \
        res.reason, res


def test_an_indexed_format_field_into_tolist_is_declined():
    # helper-99: "{0[0]}".format(sel.tolist()) raises IndexError on an empty selection, decided by the
    # values: deferred, it raised only at replay, after a later buffer update had run (steps 2.0 vs 1.0)
    from mend.rules import RULES, Decline, RewriteResult
    import libcst as cst

    rule = RULES["deferred-side-effects"]
    for body, fixed in (('print("first={0[0]}".format(sel.tolist()))', False),
                        ('print("first={0.real}".format(sel.tolist()))', False),
                        ('print("all={}".format(sel.tolist()))', True),
                        ('print("first={0[0]}".format(sel.sum().item()))', True)):   # a number: fails on every input
        src = f"import torch\n\n\ndef forward(self, x):\n    sel = x * 2\n    {body}\n    return x\n"
        res = rule.rewrite(cst.parse_module(src), 6)
        assert isinstance(res, RewriteResult if fixed else Decline), (body, res)
        assert fixed or "indexes into or reads an attribute of `t.tolist()`" in res.reason
