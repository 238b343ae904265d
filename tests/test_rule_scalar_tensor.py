"""scalar-tensor (issue 10, kind 2): a Python int wrapped in ``torch.tensor()`` and read back
as a number. Adversarial cases that try to make the rewrite change behaviour -- the rule must
decline them, or the verifier must refute them, or the mended code must compute the same --
and one fixture that ``mend fix`` really fixes (the graph count drops)."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.locate import locate
from mend.rules import RULES, Decline, Match, RewriteResult
from mend.rules import scalar_tensor as st
from mend.taxonomy import categorize
from tests.conftest import FIXTURES, assert_one_graph_and_same_outputs
from verifier.encoders import scalar_tensor as enc
from verifier.encoders.base import Ctx

RULE = RULES[st.NAME]
ITEM = "Unsupported Tensor.item() call with capture_scalar_outputs=False"


def _src(body: str, value: str = "min(x.size(-1), n)", call: str = "torch.tensor({v})") -> str:
    return textwrap.dedent(f'''\
        import torch


        def span_of(x, n):
            return {call.format(v=value)}


        def forward(x, t, n):
            span = span_of(x, n)
        ''') + textwrap.indent(textwrap.dedent(body), "    ")


def _line(src: str, needle: str) -> int:
    return next(i for i, t in enumerate(src.splitlines(), 1) if needle in t)


def _rewrite(src: str, needle: str):
    return RULE.rewrite(cst.parse_module(src), _line(src, needle))


def _run(src: str, x, t, n):
    ns: dict = {}
    exec(compile(src, "<st>", "exec"), ns)
    return ns["forward"](x, t, n)


# --- the screen: traps declined --------------------------------------------------------------

@pytest.mark.parametrize("body, needle, reason", [
    ("return span\n", "return span", "is returned"),                                  # the caller returns it
    ("return t * (span / 2)\n", "span / 2", "true division"),                         # 0-d int64 / 2: float32
    ("return t * (span // 2)\n", "span // 2", "floor division"),
    ("return t[: span.item()]\n", "span.item()", "reads an attribute"),               # explicit .item()
    ("return t * (span + 0.5)\n", "0.5", "the float `0.5`"),                           # float32 vs float64
    ("return torch.narrow(t, 0, 0, span)\n", "narrow", "is passed to"),                # a callee expecting a tensor
    ("span = span + 1\nreturn t[:span]\n", "return t[", "bound more than once"),
    ("f = lambda: span\nreturn t[:span]\n", "return t[", "captured by a nested function"),
    ("ok = span > 1\nreturn t[:span]\n", "ok =", "would be a Python bool"),
])
def test_uses_that_would_see_the_int_are_declined(body, needle, reason):
    res = _rewrite(_src(body), needle)
    assert isinstance(res, Decline) and reason in res.reason, res


def test_dtype_float32_is_declined():
    src = _src("return t[:span]\n", call="torch.tensor({v}, dtype=torch.float32)")
    res = _rewrite(src, "return t[")
    assert isinstance(res, Decline) and "`dtype=`" in res.reason


def test_a_second_reference_anywhere_is_declined():
    src = _src("return t[:span]\n") + "\n\ndef other(x):\n    return span_of(x, 3) + 1\n"
    res = _rewrite(src, "return t[")
    assert isinstance(res, Decline) and "referenced other than by direct calls" in res.reason


def test_imported_by_another_file_of_the_package_is_declined_by_the_matcher(tmp_path):
    pkg = tmp_path / "stpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    src = _src("return t[:span]\n")
    (pkg / "mod.py").write_text(src)
    loc = locate(str(pkg / "mod.py"), _line(src, "return t["))
    assert isinstance(RULE.match(loc), Match)
    (pkg / "user.py").write_text("from .mod import span_of\n\n\ndef g(x):\n    return span_of(x, 2).item()\n")
    verdict = RULE.match(loc)
    assert isinstance(verdict, Decline) and "user.py" in verdict.reason
    # the encoder's static screen finds it too, from the observed __name__
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        res = _rewrite(src, "return t[")
        facts = {"at": {str(_line(src, "return torch")): {"__name__": [{"kind": "str", "value": "stpkg.mod"}]}},
                 "at_hits": {str(_line(src, "return torch")): 1}}
        ob = next(o for o in res.obligations if o["kind"] == "scalar-callers-screened")
        out = enc.callers_screened(ob, Ctx(facts, {}, code=res.code))
        assert out.result == "refuted" and "user.py" in out.counterexample
        (pkg / "user.py").unlink()
        out = enc.callers_screened(ob, Ctx(facts, {}, code=res.code))
        assert out.result == "checked" and "static screen" in out.checked_by
    finally:
        sys.path.remove(str(tmp_path))


# --- the verifier: what the screen cannot see ---------------------------------------------

def _facts(src: str, at: dict) -> dict:
    return {"names": {}, "self": {}, "at": {str(_line(src, k)): v for k, v in at.items()},
            "at_hits": {str(_line(src, k)): 1 for k in at}}


def _tensor(dtype: str, shape) -> dict:
    return {"kind": "tensor", "dtype": dtype, "shape": list(shape), "device": "cpu", "param": False}


INT = {"kind": "num", "cat": "int", "value": 4}


def _discharge(src: str, needle: str, at: dict) -> dict:
    res = _rewrite(src, needle)
    assert isinstance(res, RewriteResult), res
    facts = _facts(src, at)
    ctx = Ctx(facts, {}, code=res.code, before=src)
    return {o["kind"]: enc.ENCODERS[o["kind"]](o, ctx) for o in res.obligations}


def test_zero_d_int32_operand_is_refuted_and_dimensioned_int32_is_not():
    src = _src("return t + span\n")
    base = {"return torch": {"x": [_tensor("float32", (2, 5))], "n": [INT]}}
    out = _discharge(src, "return t +", {**base, "return t +": {"t": [_tensor("int32", ())], "span": [INT]}})
    assert out["scalar-use-promotion"].result == "refuted" and "0-d int32" in out["scalar-use-promotion"].counterexample
    out = _discharge(src, "return t +", {**base, "return t +": {"t": [_tensor("int32", (3,))], "span": [INT]}})
    assert {k: o.result for k, o in out.items()} == {
        "scalar-value-int64": "proved", "scalar-leaves-observed": "checked", "scalar-callers-screened": "unknown",
        "scalar-use-same": "proved", "scalar-use-promotion": "checked"}  # __name__ not observed in these facts


def test_dimensioned_int32_plus_the_value_computes_the_same():
    """The verified case, run: int32 (and uint8, bool) tensors plus the int equal plus the
    0-d int64 tensor, dtype and values, also beyond int32 (both wrap alike on this torch)."""
    src = _src("return t + span\n")
    mended = _rewrite(src, "return t +").code
    for t in (torch.tensor([1, -2, 2 ** 31 - 1], dtype=torch.int32), torch.tensor([0, 255], dtype=torch.uint8),
              torch.tensor([True, False]), torch.tensor([0.5, -1.0])):
        for n in (3, 2 ** 31 + 5, 2 ** 40):
            x = torch.zeros(1, 8)
            a, b = _run(src, x, t, n), _run(mended, x, t, n)
            assert a.dtype == b.dtype and torch.equal(a, b), (t.dtype, n)


def test_overflowing_value_is_refuted_by_z3():
    src = _src("return t[:span]\n", value="x.size(0) * 1048576 * 65536")
    out = _discharge(src, "return t[", {"return torch": {"x": [_tensor("float32", (2, 3, 4))], "n": [INT]},
                                        "return t[": {"t": [_tensor("float32", (5,))], "span": [INT]}})
    assert out["scalar-value-int64"].result == "refuted" and out["scalar-value-int64"].status == "sat"


def test_wrapping_use_is_refuted_by_z3():
    # span * n * n * n: int64 tensor arithmetic wraps, the int does not
    src = _src("return t[: span * n * n * n]\n")
    out = _discharge(src, "return t[", {"return torch": {"x": [_tensor("float32", (2, 5))], "n": [INT]},
                                        "return t[": {"t": [_tensor("float32", (5,))], "span": [INT], "n": [INT]}})
    assert out["scalar-use-same"].result == "refuted"


def test_bool_parameter_is_refuted():
    # torch.tensor(min(size, True)) can be a bool tensor
    src = _src("return t[:span]\n")
    out = _discharge(src, "return t[", {"return torch": {"x": [_tensor("float32", (2, 5))],
                                                         "n": [{"kind": "num", "cat": "bool", "value": True}]},
                                        "return t[": {"t": [_tensor("float32", (5,))], "span": [INT]}})
    assert out["scalar-leaves-observed"].result == "refuted" and "bool" in out["scalar-leaves-observed"].counterexample


def test_slice_bound_with_a_tensor_operand_is_refuted():
    src = _src("return t[: span + n]\n")
    out = _discharge(src, "return t[", {"return torch": {"x": [_tensor("float32", (2, 5))], "n": [INT]},
                                        "return t[": {"t": [_tensor("float32", (5,))], "span": [INT],
                                                      "n": [_tensor("int64", ())]}})
    assert out["scalar-use-promotion"].result == "refuted"


# --- the taxonomy ---------------------------------------------------------------------------

def test_category_of_a_slice_bound_from_a_call(tmp_path):
    path = tmp_path / "m.py"
    src = _src("return t[: span]\n") + "\n\ndef g(t):\n    return t[: t.sum().item()]\n"
    path.write_text(src)
    assert categorize(ITEM, locate(str(path), _line(src, "return t[: span]"))) == st.CATEGORY
    assert categorize(ITEM, locate(str(path), _line(src, ".item()"))) == "item-tolist"


# --- end to end -----------------------------------------------------------------------------

def test_fixture_fixed_end_to_end(tmp_path):
    name = "scalar_span.py"
    res = fix(str(FIXTURES / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.before.graph_count == 2 and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == st.NAME and not res.declined
    results = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert results["scalar-value-int64"] == results["scalar-use-same"] == "proved"
    assert results["scalar-use-promotion"] == results["scalar-leaves-observed"] == "checked"
    assert "return min(max(query.size(-2), key.size(-2)), max_positions)  # mend: scalar-tensor" in res.mended
    assert_one_graph_and_same_outputs(FIXTURES / name, res.mended, tmp_path, "st")


def test_fixed_after_another_rewrite_and_with_a_bare_slice_bound():
    """New-user trial: the second round's scan used to see mend's own scratch copies as
    sibling files referencing the function, and a bare `h[:n]` left promotion unknown."""
    from mend.pipeline import fix

    res = fix(str(FIXTURES / "scalar_after_print.py"), unsafe_fixes=True, max_examples=4)
    assert sorted(r.rule for r in res.rewrites) == ["deferred-side-effects", "scalar-tensor"], res.declined
    assert res.after.graph_count == 1


# --- the local form: `L = torch.tensor(E)` in the function that uses L ------------------------

def test_local_form_fixed_end_to_end(tmp_path):
    """helper-53's k2a: ``w = torch.tensor(self.window); x[:, -w:]`` made Dynamo skip the frame
    (0 graphs); the binding becomes ``w = self.window``: one graph, the same outputs."""
    name = "scalar_local_window.py"
    res = fix(str(FIXTURES / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert (res.before.graph_count, res.after.graph_count) == (0, 1)
    (rw,) = res.rewrites
    results = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert results["scalar-local-screened"] == results["scalar-leaves-observed"] == "checked"
    assert results["scalar-value-int64"] == results["scalar-use-same"] == "proved"
    assert "w = self.window  # mend: scalar-tensor (was: torch.tensor(self.window))" in res.mended
    assert_one_graph_and_same_outputs(FIXTURES / name, res.mended, tmp_path, "stl")


def test_local_screened_reads_the_binding_back():
    """``"scalar-local-screened"``: checked on the rule's output; refuted when the local is bound
    again, captured by a lambda, or the function can read its locals by name."""
    src = next(ex[0] for ex in st.FIX_EXAMPLES if "start = torch.tensor(" in ex[0])
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "return h[:, start:]" in t)
    res = st.rewrite(cst.parse_module(src), line)
    ob = next(o for o in res.obligations if o["kind"] == "scalar-local-screened")
    assert enc.local_screened(ob, Ctx({}, {}, res.code)).result == "checked"
    for tampered in (res.code.replace("    return h", "    start = start + 1\n    return h"),
                     res.code.replace("    return h", "    f = lambda: start\n    return h"),
                     res.code.replace("    return h", "    seen = locals()\n    return h")):
        assert enc.local_screened(ob, Ctx({}, {}, tampered)).result == "refuted", tampered


# --- the indexed form: `L = torch.IntTensor([E])` read back as `L[0]`, a slice bound (vits) ---

from verifier.encoders import scalar_index as idx  # noqa: E402


def _vits_fix():
    before, after, line = next(ex for ex in RULE.fix_examples if "IntTensor" in ex.before)
    return before, after, line


def _wavenet(src: str, hidden):
    ns: dict = {}
    exec(compile(src, "<vits>", "exec"), ns)
    net = ns["WaveNet"]()
    net.hidden_size = hidden
    a, b = torch.arange(24.0).reshape(2, 12), torch.ones(2, 12)
    try:
        return ("ok", net(a, b))
    except Exception as exc:  # noqa: BLE001 - the exception itself is what is compared
        return ("raised", type(exc), str(exc))


@pytest.mark.parametrize("hidden", [3, 0, -2, 12, 40, 3.7, True, 2 ** 31, -(2 ** 31) - 1, 2 ** 31 - 1])
def test_indexed_form_computes_what_the_original_does_for_every_kind_of_value(hidden):
    """The run-time test admits exactly the ints int32 holds; a float (truncated by the
    original), a bool and an int beyond int32 (the original raises) take the original read."""
    before, after, _ = _vits_fix()
    got, want = _wavenet(after, hidden), _wavenet(before, hidden)
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        assert torch.equal(got[1], want[1])
    else:
        assert got[1:] == want[1:]


def test_indexed_form_traces_without_a_break():
    before, after, _ = _vits_fix()
    for src, breaks in ((before, 1), (after, 0)):
        ns: dict = {}
        exec(compile(src, "<vits>", "exec"), ns)
        net = ns["WaveNet"]()
        net.hidden_size = 3
        torch._dynamo.reset()
        explain = torch._dynamo.explain(net)(torch.randn(2, 12), torch.randn(2, 12))
        assert len(explain.break_reasons) == breaks, explain.break_reasons


def _indexed_obligations():
    before, _, line = _vits_fix()
    res = st.rewrite(cst.parse_module(before), line)
    return res, {o["kind"]: o for o in res.obligations}


def test_indexed_screens_read_the_mended_form_back_and_refute_tampering():
    res, obs = _indexed_obligations()
    ok = Ctx({}, {}, res.code)
    assert idx.guarded(obs["scalar-index-guarded"], ok).result == "checked"
    assert idx.slice_only(obs["scalar-index-slice-only"], ok).result == "checked"
    tampered = {
        "a wider range": res.code.replace("2 ** 31 else", "2 ** 32 else"),
        "an unguarded read": res.code.replace("return acts", "return acts, num_channels_tensor[0]"),
        "a rebound `type`": res.code.replace("import torch\n", "import torch\ntype = lambda v: int\n", 1),
        "a second binding": res.code.replace("        acts = fused", "        _mend_n = 2\n        acts = fused"),
        "a captured snapshot": res.code.replace("        acts = fused", "        f = lambda: _mend_n\n        acts = fused"),
    }
    for what, code in tampered.items():
        assert idx.guarded(obs["scalar-index-guarded"], Ctx({}, {}, code)).result == "refuted", what
    arith = res.code.replace("+ b[:, : n_channels]", "* n_channels")
    assert idx.guarded(obs["scalar-index-guarded"], Ctx({}, {}, arith)).result == "checked"
    assert idx.slice_only(obs["scalar-index-slice-only"], Ctx({}, {}, arith)).result == "refuted"


def test_indexed_exact_is_proved_for_the_dtype_and_refuted_beyond_it():
    _, obs = _indexed_obligations()
    ob = obs["scalar-index-exact"]
    assert idx.exact(ob, Ctx({}, {})).result == "proved"
    assert idx.exact({**ob, "hi": "2 ** 32"}, Ctx({}, {})).result == "refuted"
    assert idx.exact({**ob, "ctor": "LongTensor", "hi": "2 ** 63"}, Ctx({}, {})).result == "proved"
    assert idx.exact({**ob, "ctor": "LongTensor", "hi": "2 ** 63 + 1"}, Ctx({}, {})).result == "refuted"


def test_indexed_receivers_are_observed_as_plain_tensors():
    res, obs = _indexed_obligations()
    ob = obs["scalar-index-receivers-observed"]
    uses = idx.slice_uses(ob, Ctx({}, {}, res.code))
    assert sorted(c for c, _ in uses) == ["a", "b"] and {u["line"] for u in ob["uses"]} == {ln for _, ln in uses}
    line = str(uses[0][1])
    tensor = {"kind": "tensor", "dtype": "float32", "shape": [2, 12], "device": "cpu"}

    def ctx(seen):
        return Ctx({"at": {line: {"a": [seen], "b": [tensor]}}, "at_hits": {line: 1}}, {}, res.code)
    assert idx.receivers_observed(ob, ctx(tensor)).result == "checked"
    assert idx.receivers_observed(ob, ctx({**tensor, "subclass": "m.Logged"})).result == "refuted"
    assert idx.receivers_observed(ob, ctx({"kind": "list"})).result == "refuted"
    assert idx.receivers_observed(ob, Ctx({}, {}, res.code)).result == "unknown"


def test_indexed_form_fixed_end_to_end(tmp_path):
    """A vits-like WaveNet stack: Dynamo skipped the frame (0 graphs); one graph after."""
    name = "scalar_indexed_channels.py"
    res = fix(str(FIXTURES / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert (res.before.graph_count, res.after.graph_count) == (0, 1)
    (rw,) = res.rewrites
    results = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert results == {"scalar-index-exact": "proved", "scalar-index-guarded": "checked",
                       "scalar-index-slice-only": "checked", "scalar-index-receivers-observed": "checked"}
    assert rw["safety"]["label"] == "unsafe"   # the receivers rest on an observation
    assert "num_channels_tensor = torch.IntTensor([_mend_n])  # mend: scalar-tensor" in res.mended
    assert_one_graph_and_same_outputs(FIXTURES / name, res.mended, tmp_path, "sti")


@pytest.mark.parametrize("needle", ["end = torch.IntTensor", "w = width[0]"])
def test_inline_and_alias_forms_read_back_and_refute_tampering(needle):
    """``N = torch.IntTensor([E])[0]`` and ``w = L[0]``: the screens follow the local to its
    slice bounds; a wider range, another element in the fallback, or the local met in
    arithmetic is refuted."""
    before, after, line = next(ex for ex in RULE.fix_examples if needle in ex.before)
    res = st.rewrite(cst.parse_module(before), line)
    assert res.code == after
    obs = {o["kind"]: o for o in res.obligations}
    for kind, fn in (("scalar-index-guarded", idx.guarded), ("scalar-index-slice-only", idx.slice_only)):
        assert fn(obs[kind], Ctx({}, {}, res.code)).result == "checked", kind
    wider = res.code.replace("31 else", "32 else").replace("63 else", "64 else")
    assert idx.guarded(obs["scalar-index-guarded"], Ctx({}, {}, wider)).result == "refuted"
    arith = res.code.replace("x[:, end:]", "x[:, end:] * end").replace("x[:, w:]", "x[:, w:] * w")
    assert idx.slice_only(obs["scalar-index-slice-only"], Ctx({}, {}, arith)).result == "refuted"
    if "IntTensor" in needle:
        other = res.code.replace("IntTensor([_mend_n])[0]", "IntTensor([_mend_n + 1])[0]")
        assert idx.guarded(obs["scalar-index-guarded"], Ctx({}, {}, other)).result == "refuted"


@pytest.mark.parametrize("width", [2, 0, -1, 7, 2.5, False, 2 ** 31 - 1, 2 ** 31, 2 ** 63])
def test_inline_and_alias_forms_compute_what_the_original_does(width):
    class Self:
        pass

    me = Self()
    me.width = width
    x = torch.arange(12.0).reshape(2, 6)
    for needle in ("end = torch.IntTensor", "w = width[0]"):
        before, after, _ = next(ex for ex in RULE.fix_examples if needle in ex.before)
        outs = []
        for src in (before, after):
            ns: dict = {}
            exec(compile(src, "<st>", "exec"), ns)
            try:
                outs.append(("ok", ns["forward"](me, x)))
            except Exception as exc:  # noqa: BLE001 - the exception itself is compared
                outs.append(("raised", type(exc), str(exc)))
        (a, b) = outs
        assert a[0] == b[0], (needle, a, b)
        if a[0] == "ok":
            assert all(torch.equal(p, q) for p, q in zip(a[1], b[1]))
        else:
            assert a[1:] == b[1:]


def test_indexed_guarded_screen_refutes_what_helper_57_slipped_past():
    """The verifier's own screen (not only the rule's) refutes a rewrite whose names may not
    mean what they say: `torch` rebound, `globals()`, a frame read, `:=`, a decorated caller."""
    res, obs = _indexed_obligations()
    ob = obs["scalar-index-guarded"]
    tampered = {
        "torch param": res.code.replace("def forward(self, a, b):", "def forward(self, a, b, torch=torch):"),
        "torch attribute": res.code + "\ntorch.IntTensor = list\n",
        "globals": res.code + "\n\ndef enable():\n    globals()['fused'] = print\n",
        "frame": res.code + "\n\ndef peek():\n    import sys\n    return sys._getframe(1).f_locals\n",
        "walrus": res.code.replace("        return acts", "        return (acts := acts * 1)"),
        "decorated": res.code.replace("    def forward(", "    @torch.jit.script_if_tracing\n    def forward("),
    }
    for what, code in tampered.items():
        assert idx.guarded(ob, Ctx({}, {}, code)).result == "refuted", what
    walrus_callee = res.code.replace("return a[:, : n_channels]", "return [a := a * 1, a[:, : n_channels]][1]")
    assert idx.slice_only(obs["scalar-index-slice-only"], Ctx({}, {}, walrus_callee)).result == "refuted"


def test_crlf_line_endings_are_kept(tmp_path):
    """helper-57: a CRLF file came back with LF endings, so the diff touched every line."""
    src = (FIXTURES / "scalar_local_window.py").read_text().replace("\n", "\r\n")
    path = tmp_path / "crlf_window.py"
    path.write_bytes(src.encode())
    res = fix(str(path), unsafe_fixes=True, verify="standard", max_examples=3)
    (rw,) = res.rewrites
    assert res.mended.count("\r\n") == res.mended.count("\n") > 10
    changed = [ln for ln in rw["diff"].splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    assert len(changed) == 2, changed


def test_a_site_fixed_once_is_tried_again_while_it_still_breaks(tmp_path):
    """helper-57's v24b: two constructors passed to one helper; the first rewrite left the site
    fixable (the second value) with no verdict. The site is tried again: both are rewritten."""
    src = textwrap.dedent('''\
        import torch
        import torch.nn as nn


        def fused(a, n):
            return a[:, :n]


        class Model(nn.Module):
            def __init__(self, hidden_size=4):
                super().__init__()
                self.hidden_size = hidden_size

            def forward(self, x):
                L = torch.IntTensor([self.hidden_size])
                K = torch.LongTensor([self.hidden_size])
                return fused(x, L[0]) + fused(x * 2, K[0])


        def get_inputs():
            return (torch.randn(2, 8),)
        ''')
    path = tmp_path / "two_values.py"
    path.write_text(src)
    res = fix(str(path), unsafe_fixes=True, verify="standard", max_examples=3)
    assert [r["rule"] for r in res.rewrites] == [st.NAME, st.NAME] and not res.declined
    assert res.after.graph_count == 1 and "_mend_n_2" in res.mended
