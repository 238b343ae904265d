"""A `"..." % values` argument of a print is deferred as `mend.lazy.pct(template, values)`
(helper-100 m27: Dynamo raised TypeError tracing `%` with a tensor in the tuple and skipped the
frame). `pct` is checked against Python's `%` itself on drawn templates and values."""
import libcst as cst
import pytest
import torch
from hypothesis import given, settings, strategies as st

from mend.fix import fix
from mend.lazy import Fmt, pct
from mend.rules import RULES, Decline, RewriteResult
from tests.conftest import FIXTURES, load_pair
from tests.test_defer_tolist import _printed

_CONV = st.builds(lambda key, flags, width, prec, length, conv: "%" + key + flags + width + prec + length + conv,
                  st.sampled_from(["", "", "", "(k)"]), st.text("-#0 +", max_size=2),
                  st.sampled_from(["", "", "5", "*", "12"]), st.sampled_from(["", "", ".", ".2", ".*"]),
                  st.sampled_from(["", "", "l"]), st.sampled_from(list("diouxXeEfFgGcrsa%") + ["q", ""]))
_TEMPLATE = st.lists(st.one_of(_CONV, st.text("ab {}%", max_size=3)), max_size=5).map("".join)
_VALUE = st.one_of(st.integers(-300, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
                   st.booleans(), st.none(), st.builds(torch.tensor, st.floats(-5, 5)),
                   st.builds(lambda n: torch.arange(n), st.integers(0, 3)))


def _outcome(thunk):
    try:
        return "ok", str(thunk())
    except Exception as exc:   # noqa: BLE001 - the error is part of what is compared
        return type(exc).__name__, str(exc)


@settings(max_examples=400, deadline=None)
@given(_TEMPLATE, st.one_of(st.lists(_VALUE, max_size=4).map(tuple), _VALUE, st.just({"k": 1})))
def test_pct_formats_as_percent_does(template, values):
    assert _outcome(lambda: pct(template, values)) == _outcome(lambda: template % values)


def test_a_tensors_s_and_r_fields_are_left_for_replay_and_other_fields_formatted_now():
    t = torch.tensor([1.0, 2.0])
    out = pct("%d: %s %-9r %.3s", (3, t, t, t))
    assert isinstance(out, Fmt) and out.template == "{}: {!s} {!r:<9} {!s:.3}" and out.args[1:] == (t, t, t)
    assert out.args[0] == "3"
    assert not isinstance(pct("%+s", (t,)), Fmt) or pct("%+s", (t,)).args == ("%+s" % (t,),)   # a flag: formatted now


def test_a_percent_formatted_print_is_deferred_and_prints_the_same(tmp_path):
    src = FIXTURES / "print_percent.py"
    res = fix(str(src), unsafe_fixes=True, max_examples=5)
    (rw,) = res.rewrites
    assert rw.rule == "deferred-side-effects" and (res.before.graph_count, res.after.graph_count) == (0, 1)
    assert '_mend_rt.defer_print(_mend_rt.pct("step %d loss %s, s %-8r|", (self.step, loss, s)))' in res.mended
    a_mod, a, b = load_pair(src, res.mended, tmp_path, "pc")
    torch._dynamo.reset()
    compiled = torch.compile(b, backend="eager", fullgraph=True)   # one graph: no break left
    for step, x in ((0, a_mod.get_inputs()[0]), (5, torch.zeros(2, 4))):
        a.step = step
        want, y = _printed(a, x)
        for model in (b, compiled):
            b.step = step
            got, z = _printed(model, x)
            assert got == want and torch.equal(y, z) and a.step == b.step == step + 1
    torch._dynamo.reset()


@pytest.mark.parametrize("body, fixed", [
    ('print("n=%d" % n, "m=%s" % (x,))', True),
    ('print("%s" % x, sep="%s" % x)', False),            # a keyword stays a str: Python's `%` where the call is
    ('print(b"%s" % x)', False),                          # bytes
    ('print(fmt_str % x)', False),                        # not a literal template
    ('print("%.2f" % x.sum().item())', False),            # a host read inside the arguments
])
def test_which_percent_arguments_are_deferred(body, fixed):
    src = f"import torch\n\n\ndef forward(self, x, n, fmt_str):\n    {body}\n    return x\n"
    res = RULES["deferred-side-effects"].rewrite(cst.parse_module(src), 5)
    if fixed:
        assert isinstance(res, RewriteResult) and res.code.count("_mend_rt.pct(") == 2, res
    else:
        assert isinstance(res, Decline) or "_mend_rt.pct(" not in res.code.split("sep=")[-1], res


@pytest.mark.parametrize("later, fixed", [
    ("self.renorm(h)", False), ("self.act(h)", False), ("F.relu(h, inplace=True)", False), ("h.clamp_(0, 1)", False),
    ("h.sum()", True), ("len(h)", True), ("h", True),
])
@pytest.mark.parametrize("first", ['"h %s" % (h,)', 'f"h {h}"', '"h {}".format(h)', "str(h)"])
def test_a_call_after_a_formatted_argument_that_could_write_its_tensor_is_declined(first, later, fixed):
    # helper-101 F1: print("h %s" % (h,), "call", self.renorm(h)) with renorm clamping h in place on its
    # 500th call: the original's text was made before renorm ran, a deferred format read h after it
    src = f"import torch\nimport torch.nn.functional as F\n\n\ndef forward(self, h):\n    print({first}, {later})\n    return h\n"
    res = RULES["deferred-side-effects"].rewrite(cst.parse_module(src), 6)
    if fixed:
        assert isinstance(res, RewriteResult), res
    else:
        assert isinstance(res, Decline) and ("runs after a formatted argument" in res.reason or "side effect" in res.reason), res


def test_str_of_an_object_that_is_no_tensor_is_formatted_where_the_call_is():
    # helper-101: `"%s %d" % (m, m)` with m.__str__ reading state `%d` changes: only a tensor waits for replay
    class Meter:
        n = 0

        def __str__(self):
            return f"Meter(n={self.n})"

        def __int__(self):
            self.n += 1
            return self.n

    got = pct("%s %d", (Meter(), Meter()))
    assert not any(isinstance(a, Meter) for a in got.args) and str(got) == "Meter(n=0) 1"
