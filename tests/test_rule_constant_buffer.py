"""constant-buffer (issue 10, kind 2, encodec's int buffers): the mirror computes what the
original computes, with no graph break; the encoders refute what they must; the lemma's
cross-check by enumeration."""
from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
import sys

import libcst as cst
import numpy as np
import pytest
import torch

from mend.fix import fix
from mend.locate import locate
from mend.rules import Decline
from mend.rules.constant_buffer import examples as ex
from mend.rules.constant_buffer.rewrite import rewrite
from mend.taxonomy import categorize
from verifier.encoders import constant_buffer as enc
from verifier.encoders.base import Ctx
from tests.conftest import FIXTURES, assert_one_graph_and_same_outputs

_n = itertools.count()


def _load(code: str, tmp_path):
    path = tmp_path / f"cb_mod_{next(_n)}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


def _pair(tmp_path, source=ex.ENCODEC):
    res = rewrite(cst.parse_module(source), ex.example_line(source))
    return _load(source, tmp_path), _load(res.code, tmp_path), res


def _same(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert torch.equal(a, b)


def test_mirror_agrees_with_the_original_on_many_shapes(tmp_path):
    orig, mended, _ = _pair(tmp_path)
    rng = np.random.default_rng(0)
    for kernel, stride, dilation, causal in itertools.product((1, 2, 3, 7), (1, 2, 3, 5), (1, 2), (False, True)):
        torch.manual_seed(0)
        a = orig.Conv1d(2, 3, kernel, stride, dilation, causal).eval()
        torch.manual_seed(0)
        b = mended.Conv1d(2, 3, kernel, stride, dilation, causal).eval()
        assert b._mend_int_ok is True
        for length in sorted({1, 2, 3, 5, 8, 13, int(rng.integers(1, 200))}):
            x = torch.randn(2, 2, length)
            try:
                want = a(x)
            except RuntimeError as exc:       # reflect padding larger than a very short input
                with pytest.raises(RuntimeError) as got:
                    b(x)
                assert type(got.value) is type(exc)
                continue
            _same(want, b(x))


def test_mirror_compiles_to_one_graph_where_the_original_breaks(tmp_path):
    orig, mended, _ = _pair(tmp_path)
    x = torch.randn(1, 2, 11)
    for mod, want_breaks in ((orig, True), (mended, False)):
        torch._dynamo.reset()
        torch.manual_seed(0)
        m = mod.Conv1d(2, 3, 7, 2, 1, False).eval()
        graphs = []

        def backend(gm, example_inputs, graphs=graphs):
            graphs.append(gm)
            return gm.forward

        out = torch.compile(m, backend=backend)(x)
        _same(out, m(x))
        assert (len(graphs) > 1) is want_breaks, len(graphs)


def test_twins_that_are_not_exact_ints_leave_the_original_path(tmp_path):
    orig, mended, _ = _pair(tmp_path)
    torch.manual_seed(0)
    a = orig.Conv1d(2, 3, 3, 2)
    torch.manual_seed(0)
    b = mended.Conv1d(2, 3, 3, 2)
    b.conv.stride = (np.int64(2),)     # what __init__ read had been a numpy int: rebuild to see it
    c = mended.Conv1d.__new__(mended.Conv1d)
    torch.nn.Module.__init__(c)
    assert getattr(c, "_mend_int_ok", False) is False
    x = torch.randn(1, 2, 9)
    _same(a(x), b(x))


def test_numpy_stride_gives_no_twins(tmp_path):
    _, mended, _ = _pair(tmp_path)
    m = mended.Conv1d(2, 3, 3, np.int64(2))
    assert m._mend_int_ok is False and m._mend_int_stride is None
    m(torch.randn(1, 2, 9))   # the original body runs


def test_subclass_takes_the_original_body(tmp_path):
    orig, mended, _ = _pair(tmp_path)

    class Sub(mended.Conv1d):
        def _get_extra_padding_for_conv1d(self, hidden_states):
            return super()._get_extra_padding_for_conv1d(hidden_states) + 1

    class SubO(orig.Conv1d):
        def _get_extra_padding_for_conv1d(self, hidden_states):
            return super()._get_extra_padding_for_conv1d(hidden_states) + 1

    torch.manual_seed(0)
    a = SubO(2, 3, 3, 2)
    torch.manual_seed(0)
    b = Sub(2, 3, 3, 2)
    x = torch.randn(1, 2, 10)
    _same(a(x), b(x))


def test_float64_default_dtype_agrees(tmp_path):
    orig, mended, _ = _pair(tmp_path)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        a = orig.Conv1d(2, 3, 5, 3)
        torch.manual_seed(0)
        b = mended.Conv1d(2, 3, 5, 3)
        for length in (4, 9, 17, 40):
            x = torch.randn(1, 2, length)
            _same(a(x), b(x))
    finally:
        torch.set_default_dtype(before)


def test_mimi_form_agrees(tmp_path):
    orig, mended, _ = _pair(tmp_path, ex.MIMI)
    for kernel, stride in itertools.product((1, 3, 4, 7), (1, 2, 3)):
        torch.manual_seed(0)
        a = orig.CausalConv(kernel, stride)
        torch.manual_seed(0)
        b = mended.CausalConv(kernel, stride)
        for length in (7, 8, 9, 31):
            x = torch.randn(1, 4, length)
            _same(a(x), b(x))


def test_the_site_is_categorised_constant_buffer(tmp_path):
    path = tmp_path / "enc.py"
    path.write_text(ex.ENCODEC)
    line = next(i for i, t in enumerate(ex.ENCODEC.splitlines(), 1) if "if length <= max_pad" in t)
    assert categorize("Data-dependent branching", locate(str(path), line)) == "constant-buffer"
    other = next(i for i, t in enumerate(ex.ENCODEC.splitlines(), 1) if 'if mode != "reflect"' in t)
    assert categorize("Data-dependent branching", locate(str(path), other)) == "data-dependent-branch"


# -- the encoders ------------------------------------------------------------------------


def _obligation(res, kind):
    return next(o for o in res.obligations if o["kind"] == kind)


def test_terms_in_range_is_proved_and_refutes_an_overflowing_product(tmp_path):
    res = rewrite(cst.parse_module(ex.ENCODEC), ex.example_line(ex.ENCODEC))
    ob = _obligation(res, "int-terms-in-range")
    assert enc.terms_in_range(ob, Ctx({}, {})).result == "proved"
    bad = dict(ob, terms=ob["terms"] + ["((size_1 * size_2) * leaf_stride)"])
    out = enc.terms_in_range(bad, Ctx({}, {}))
    assert out.result == "refuted" and out.status == "sat"


def test_guards_emitted_is_checked_and_refutes_a_weakened_guard():
    res = rewrite(cst.parse_module(ex.ENCODEC), ex.example_line(ex.ENCODEC))
    ob = _obligation(res, "int-guards-emitted")
    assert enc.guards_emitted(ob, Ctx({}, {}, code=res.code, before=ex.ENCODEC)).result == "checked"
    # without the original, the registered values cannot be compared with it
    assert enc.guards_emitted(ob, Ctx({}, {}, code=res.code)).result == "refuted"
    for old, new in (("-2**15 < v < 2**15", "-2**31 < v < 2**31"), ("0 < _mend_int_s <= 64", "0 < _mend_int_s"),
                     (' and self._mend_int_stride >= 1', ''), ('getattr(self, "_mend_int_ok", False)', "True"),
                     # a twin that is not the buffer's value, and a buffer that is not the original's
                     ("self._mend_int_stride = _mend_int_stride if", "self._mend_int_stride = _mend_int_stride + 1 if"),
                     ("_mend_int_stride = self.conv.stride[0]", "_mend_int_stride = self.conv.stride[0] + 1")):
        assert old in res.code
        tampered = Ctx({}, {}, code=res.code.replace(old, new), before=ex.ENCODEC)
        assert enc.guards_emitted(ob, tampered).result == "refuted", old


def test_buffers_registered_inline_are_twinned_and_compared_with_the_original(tmp_path):
    """``self.register_buffer("B", torch.tensor(E, dtype=torch.int64), persistent=False)`` on one
    line (no local): the twin is made on the line before, and the registration reads it."""
    name = "constant_buffer_inline.py"
    src = (FIXTURES / name).read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "if pad > 0" in t)
    res = rewrite(cst.parse_module(src), line)
    assert '_mend_int_inline_stride = self.conv.stride[0]' in res.code
    assert 'self.register_buffer("stride", torch.tensor(_mend_int_inline_stride, dtype=torch.int64), ' \
        'persistent=False)' in res.code
    ob = _obligation(res, "int-guards-emitted")
    assert enc.guards_emitted(ob, Ctx({}, {}, code=res.code, before=src)).result == "checked"
    bad = res.code.replace("torch.tensor(_mend_int_inline_stride,", "torch.tensor(_mend_int_inline_stride + 1,")
    assert enc.guards_emitted(ob, Ctx({}, {}, code=bad, before=src)).result == "refuted"
    out = fix(str(FIXTURES / name), verify="standard", max_examples=5)
    assert (out.before.graph_count, out.after.graph_count) == (4, 1)
    (rw,) = out.rewrites
    assert rw["rule"] == "constant-buffer" and rw["safety"]["label"] == "safe"
    assert_one_graph_and_same_outputs(FIXTURES / name, out.mended, tmp_path, "cbi")


def test_buffers_unwritten_is_checked_and_refutes_writes():
    res = rewrite(cst.parse_module(ex.ENCODEC), ex.example_line(ex.ENCODEC))
    ob = _obligation(res, "int-buffers-unwritten")
    assert enc.buffers_unwritten(ob, Ctx({}, {}, code=res.code)).result == "checked"
    tail = "        return self.conv(hidden_states)\n"
    for write in ("self.stride.add_(1)", "self.kernel_size = None", "del self.padding_total",
                  "self.stride.data = self.stride.data", 'setattr(self, "stride", None)'):
        code = res.code.replace(tail, f"        {write}\n{tail}", 1)
        assert enc.buffers_unwritten(ob, Ctx({}, {}, code=code)).result == "refuted", write


def test_ceil_ratio_cites_the_lemma_and_refutes_a_wider_domain():
    res = rewrite(cst.parse_module(ex.ENCODEC), ex.example_line(ex.ENCODEC))
    ob = _obligation(res, "ceil-ratio-exact")
    out = enc.ceil_ratio_exact(ob, Ctx({}, {}))
    assert out.result == "checked" and out.lemmas == ("proofs/cb_ceil_ratio.smt2",)
    assert enc.ceil_ratio_exact(dict(ob, a_bound=2 ** 23), Ctx({}, {})).result == "refuted"
    assert enc.ceil_ratio_exact(dict(ob, offsets=[9]), Ctx({}, {})).result == "refuted"


@pytest.mark.slow
def test_lemma_cross_checked_by_enumeration():
    """Every (a, s) of the lemma's domain with torch (c = 1, as encodec), float32 and float64;
    beyond the domain the same enumeration finds the counterexample."""
    assert enc.enumerate_ratio(1, 2 ** 22, 64, "float32") is None
    assert enc.enumerate_ratio(1, 2 ** 22, 64, "float64") is None
    assert enc.enumerate_ratio(-3, 2 ** 22, 8, "float32") is None
    bad = enc.enumerate_ratio(1, 2 ** 25, 1, "float32")
    assert bad is not None and "s = 1" in bad


def test_a_pad_with_buffer_values_is_categorised_constant_buffer(tmp_path):
    """mimi's form: the break is `F.pad` reading tensor pads ("Data dependent operator")."""
    path = tmp_path / "mimi.py"
    path.write_text(ex.MIMI)
    line = next(i for i, t in enumerate(ex.MIMI.splitlines(), 1) if "x = F.pad(" in t)
    assert categorize("Data dependent operator", locate(str(path), line)) == "constant-buffer"


def test_writes_to_a_same_named_attribute_of_an_unrelated_class_do_not_decline(tmp_path):
    """mimi's ConvTranspose1d sets its own `self.padding_right`: not the buffer's class."""
    other = ('\n\nclass Other(nn.Module):\n    def __init__(self):\n        super().__init__()\n'
             '        self.stride = 3\n\n    def forward(self, x):\n        self.stride += 1\n        return x\n')
    res = rewrite(cst.parse_module(ex.ENCODEC + other), ex.example_line(ex.ENCODEC))
    assert not hasattr(res, "reason"), res.reason
    ob = _obligation(res, "int-buffers-unwritten")
    assert enc.buffers_unwritten(ob, Ctx({}, {}, code=res.code)).result == "checked"
    # ... but a subclass's (its `self` is an instance of the buffer's class) does
    sub = other.replace("class Other(nn.Module)", "class Other(Conv1d)")
    res = rewrite(cst.parse_module(ex.ENCODEC + sub), ex.example_line(ex.ENCODEC))
    assert "writes `stride`" in res.reason


@pytest.mark.parametrize("modname, cls", [("encodec", "EncodecConv1d"), ("mimi", "MimiConv1d")])
def test_the_installed_transformers_conv_is_mirrored_exactly(modname, cls, tmp_path):
    """The real class of the installed transformers (4.52.4 here; 5.x has the same code),
    rewritten and loaded in its package: outputs equal the original's on many shapes, and the
    mirrored layer compiles to one graph."""
    tf = pytest.importorskip("transformers")
    orig = importlib.import_module(f"transformers.models.{modname}.modeling_{modname}")
    src = open(orig.__file__).read()
    module = cst.parse_module(src)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.startswith(f"class {cls}("))
    res = rewrite(module, line)
    assert not hasattr(res, "reason"), res.reason
    name = f"transformers.models.{modname}._mend_test_{next(_n)}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    mended = importlib.util.module_from_spec(spec)
    mended.__package__ = f"transformers.models.{modname}"
    path = tmp_path / f"modeling_{modname}.py"
    path.write_text(res.code)
    mended.__file__ = str(path)    # docstring helpers read the source
    sys.modules[name] = mended     # dataclasses look their module up
    exec(compile(res.code, str(path), "exec"), mended.__dict__)
    config_cls = getattr(tf, "EncodecConfig" if modname == "encodec" else "MimiConfig")
    for causal, pad_mode, kernel, stride, dilation in itertools.product((False, True), ("reflect", "constant"),
                                                                      (1, 3, 7), (1, 2, 4), (1, 3)):
        cfg = config_cls(use_causal_conv=causal, pad_mode=pad_mode)
        torch.manual_seed(0)
        a = getattr(orig, cls)(cfg, 2, 3, kernel, stride, dilation)
        torch.manual_seed(0)
        b = getattr(mended, cls)(cfg, 2, 3, kernel, stride, dilation)
        assert b._mend_int_ok is True
        for length in (2, 5, 9, 16, 31):
            x = torch.randn(1, 2, length)
            try:
                want = a(x)
            except RuntimeError as exc:
                with pytest.raises(type(exc)):
                    b(x)
                continue
            _same(want, b(x))
    torch._dynamo.reset()
    graphs = []
    cfg = config_cls(use_causal_conv=False, pad_mode="reflect")
    torch.manual_seed(0)
    want = getattr(orig, cls)(cfg, 2, 3, 7, 2, 1)
    torch.manual_seed(0)
    layer = getattr(mended, cls)(cfg, 2, 3, 7, 2, 1)
    x = torch.randn(1, 2, 10)
    out = torch.compile(layer, backend=lambda gm, _: graphs.append(gm) or gm.forward, fullgraph=True)(x)
    _same(out, want(x))
    assert len(graphs) == 1


# -- the adversarial review's models (tests/fixtures/constant_buffer_review/; each changed
# behaviour under an earlier version of the rule, which emitted it as safe) ----------------

REVIEW = Path(__file__).parent / "fixtures" / "constant_buffer_review"
DECLINED = {
    "f1_rdiv": "an operator outside",                      # int / buffer: reciprocal(s) * a, two roundings
    "f2_qtuple": "a ratio is put in a tuple",
    "f2c_qtuple_stale": "a ratio is put in a tuple",
    "f3_ceil_return": "the ceil of a ratio is used outside",
    "f3b_ceil_in_if": "not taken by a ceil",
    "f4_float_cmp": "compared with something other than an int",   # float32 vs exact comparison
    "f5_augassign_init": "other than to register it",      # `max_t -= hop_t` before registering
    "f6_buffers_loop": "reaches buffers generically",       # `for b in self.buffers(): b.mul_(2)`
    "f7_alias_fill": "other than to register it",          # `self._limit = max_t`, then `fill_`
    "f8_shadow_method": "assigns `n_frames`",                # an instance attribute shadows the method
    "f10_inplace_shape": "not taken by the ceil on the next statement",   # `x.transpose_()` in between
    "f12_buffers_update": "reaches buffers generically",    # `self._buffers.update(...)`
    "f13_uint8_cmp": "compared with something other than an int",  # a 0-d uint8 tensor wraps the int
    "f14b_method_on_buffer": "`.item()` is called on it",
}


def _classes(source: str) -> list[tuple[str, int]]:
    return [(t.split("(")[0][6:], i) for i, t in enumerate(source.splitlines(), 1) if t.startswith("class ")]


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_review_model_is_declined(name):
    source = (REVIEW / f"{name}.py").read_text()
    reasons = [rewrite(cst.parse_module(source), line) for _, line in _classes(source)]
    assert all(hasattr(r, "reason") for r in reasons), name
    assert any(DECLINED[name] in r.reason for r in reasons), [r.reason for r in reasons]


def test_review_custom_buffer_helper_is_not_a_buffer():
    """f11: `LengthBuffer(v, persistent=False)` is the user's own function, not `nn.Buffer`."""
    source = (REVIEW / "f11_custom_buffer_fn.py").read_text()
    for _, line in _classes(source):
        res = rewrite(cst.parse_module(source), line)
        assert hasattr(res, "reason") and "registers no non-persistent buffer" in res.reason, res


def _model_pair(name: str, tmp_path):
    source = (REVIEW / f"{name}.py").read_text()
    cls, line = _classes(source)[0]
    res = rewrite(cst.parse_module(source), line)
    assert not hasattr(res, "reason"), res.reason
    return _load(source, tmp_path), _load(res.code, tmp_path)


def test_review_positional_only_forward_is_passed_on(tmp_path):
    """f9: `def forward(self, x, /, scale=1.0)`: the dispatch passes `x` and `scale`, not `self`."""
    orig, mended = _model_pair("f9_posonly", tmp_path)
    for length in (20, 64, 100):
        x = torch.randn(2, 3, length)
        _same(orig.Model()(x), mended.Model()(x))


def test_review_torchscript_still_scripts(tmp_path):
    """f15: the dispatch sits under `if not torch.jit.is_scripting()` (a static if), so
    `torch.jit.script` compiles the original body as before."""
    orig, mended = _model_pair("f15_jit_script", tmp_path)
    x = torch.randn(2, 3, 100)
    _same(torch.jit.script(orig.Model())(x), torch.jit.script(mended.Model())(x))
    _same(orig.Model()(x), mended.Model()(x))


def test_init_weights_writing_the_registered_value_is_allowed_and_another_declines():
    """transformers 5's `_init_weights` re-sets the buffers with `init.copy_` from the same
    expressions: checked equal; a different value declines, in both the rewrite and the verifier."""
    same = ("\n\ndef _init_weights(module):\n    if isinstance(module, Conv1d):\n"
            "        kernel_size = module.conv.kernel_size[0]\n"
            "        stride = torch.tensor(module.conv.stride[0], dtype=torch.int64)\n"
            "        dilation = module.conv.dilation[0]\n"
            "        kernel_size = torch.tensor((kernel_size - 1) * dilation + 1, dtype=torch.int64)\n"
            "        init.copy_(module.stride, stride)\n        init.copy_(module.kernel_size, kernel_size)\n"
            "        init.copy_(module.padding_total, kernel_size - stride)\n")
    res = rewrite(cst.parse_module(ex.ENCODEC + same), ex.example_line(ex.ENCODEC))
    assert not hasattr(res, "reason"), res.reason
    ob = _obligation(res, "int-buffers-unwritten")
    assert enc.buffers_unwritten(ob, Ctx({}, {}, code=res.code)).result == "checked"
    other = same.replace("init.copy_(module.padding_total, kernel_size - stride)",
                         "init.copy_(module.padding_total, kernel_size + stride)")
    res = rewrite(cst.parse_module(ex.ENCODEC + other), ex.example_line(ex.ENCODEC))
    assert "not the value `__init__` registered" in res.reason


def test_a_buffer_escaping_makes_the_write_check_unknown():
    """mimi's streaming cache keeps the buffer in a list: not followed, so not `checked`."""
    escape = ("\n\nclass Holder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.conv = Conv1d(2, 2, 3)\n\n    def forward(self, x):\n"
              "        keep = []\n        keep.append(self.conv.stride)\n        return self.conv(x)\n")
    res = rewrite(cst.parse_module(ex.ENCODEC + escape), ex.example_line(ex.ENCODEC))
    ob = _obligation(res, "int-buffers-unwritten")
    out = enc.buffers_unwritten(ob, Ctx({}, {}, code=res.code))
    assert out.result == "unknown" and "escapes" in out.reason


# -- the second adversarial review (tests/fixtures/constant_buffer_review2/): 27 models that
# changed behaviour under the version before it (19 emitted as safe) -----------------------

REVIEW2 = Path(__file__).parent / "fixtures" / "constant_buffer_review2"
DECLINED2 = {
    "a1_copy_param": "writes the buffer in place",   # `torch.Tensor.copy_` of a parameter named like __init__'s
    "b1_alias_iadd": "writes a buffer through an alias",             # `limit = self.max_len; limit -= m`
    "c1_init_attr_alias": "keeps a second handle on a buffer",       # `self._limit = self.max_len`
    "c2_init_local_iadd": "writes a buffer through an alias",
    "d1_view_reg": "other than to register it",                      # `register_buffer("limits", max_t.view(1))`
    "e1_fallback_twice": "the ratio's numerator calls a function",    # the fallback would call it again
    "e2_fallback_rng": "the ratio's numerator calls a function",
    "f1_nested_class": "not defined at the module's top level",
    "g1_local_import": "binds `torch` locally",
    "h1_class_alias": "defined or bound more than once",             # `n_frames = n_frames_capped`
    "i1_dict_key": "is used inside an expression outside the rule's forms",   # `outs[k] = ...`
    "j1_big_literal": "compared with something other than an int",   # a literal beyond int64
    "k1_generator": "a yield or a lambda",
    "l1_ceil_out": "an operator outside",                            # `torch.ceil(self.k * 0.5, out=None)`
    "m1_base_register": "overrides `register_buffer`",               # a base in the file clamps buffers
    "n1_module_type": "may rewrite the buffers of an instance",      # `self.c.type(torch.float16)`
    "n2_reg_hook": "reaches buffers generically",                    # a global buffer registration hook
    "o1_getattr_fstring": "by a computed name",
    "o2_vars_buffers": "may name the buffer",                        # `vars(m)["_buffers"]`
    "p1_with_return": "holds a return",                              # a return inside `with`
    "q1_closure_ratio": "holds a return, a yield or a nested function",
    "r1_two_offsets": "more than one offset",                        # `q + 8388608 - 8388607` rounds
    "s1_fstring": "inside an expression outside the rule's forms",   # `{self.max_len!r}`
    "s2_dict_return": "inside an expression outside the rule's forms",
    "s3_set_member": "inside an expression outside the rule's forms",  # `in {self.max_len, 128}`
    "u1_name_exact": "would be named like one of the rewrite's own names",
    "v1_out_kw": "writes a buffer as `out=`",
    "v2_out_kw_method": "writes a buffer as `out=`",
}


@pytest.mark.parametrize("name", sorted(DECLINED2))
def test_second_review_model_is_declined(name):
    source = (REVIEW2 / f"{name}.py").read_text()
    module = cst.parse_module(source)
    lines = [i for i, t in enumerate(source.splitlines(), 1) if t.lstrip().startswith("class ")]
    reasons = [rewrite(module, line) for line in lines]
    assert all(hasattr(r, "reason") for r in reasons), name
    assert any(DECLINED2[name] in r.reason for r in reasons), [r.reason for r in reasons]


# -- the third adversarial review (tests/fixtures/constant_buffer_review3/) ------------------

REVIEW3 = Path(__file__).parent / "fixtures" / "constant_buffer_review3"
DECLINED3 = {
    "m2": "`type` is bound",                     # `def forward(self, x, type="crop")`: the dispatch calls type()
    "m4": "`type` is bound",                     # `for type in ...` in forward
    "m5": "is bound again in the module",        # `Crop = CenterCrop`
    "m6": "re-reads `self.limit`",               # init.constant_ of an attribute the module changes
    "m7": "private, mangled name",               # `self.__max_len`, written as `_Crop__max_len`
    "m9": "assigns `_pad`",                      # an instance attribute shadows a method the mirror calls
    "m10": "writes a buffer through an alias",   # an alias through a factory's result, `-=` in place
    "m11": "is bound again in the module",       # `Crop.tighten = LimitTuning.tighten`
    "m1": "numerator reads a local holding a buffer value",   # the fallback would divide an int by a tensor
    "m3": "`type` is bound",                     # an `__init__` parameter named `type` (the twins' check)
    "m5b": "is decorated",                       # a class decorator returning a subclass
    "m12": "writes the buffer in place",         # re-set through a bfloat16 tensor (257 -> 256)
    "m14": "writes the buffer in place",         # a module function of its own named `copy_`
}


@pytest.mark.parametrize("name", sorted(DECLINED3))
def test_third_review_model_is_declined(name):
    source = (REVIEW3 / f"{name}.py").read_text()
    module = cst.parse_module(source)
    lines = [i for i, t in enumerate(source.splitlines(), 1) if t.startswith("class ")]
    reasons = [rewrite(module, line) for line in lines]
    assert all(hasattr(r, "reason") for r in reasons), name
    assert any(DECLINED3[name] in r.reason for r in reasons), [r.reason for r in reasons]


def test_third_review_overflowing_size_literal_is_refuted():
    """m8: `x.shape[-1] * 4000000000000000000` compared with a buffer overflows int64 in the
    original: the size arithmetic is in the range proof now, which refutes it."""
    source = (REVIEW3 / "m8.py").read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.startswith("class Crop"))
    res = rewrite(cst.parse_module(source), line)
    out = enc.terms_in_range(_obligation(res, "int-terms-in-range"), Ctx({}, {}))
    assert out.result == "refuted"


def test_third_review_escape_through_isinstance_module_is_unknown():
    """m13: `if isinstance(m, nn.Module): limits.append(m.max_len)` is not narrowed away
    (`nn.Module` is a base of the class): the escape makes the fix unsafe."""
    source = (REVIEW3 / "m13.py").read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.startswith("class Crop"))
    res = rewrite(cst.parse_module(source), line)
    out = enc.buffers_unwritten(_obligation(res, "int-buffers-unwritten"), Ctx({}, {}, code=res.code))
    assert out.result in ("unknown", "refuted"), out


# -- the fourth adversarial review (tests/fixtures/constant_buffer_review4/) -----------------
# each was emitted as a safe fix whose mended model behaved differently after a later call

REVIEW4 = Path(__file__).parent / "fixtures" / "constant_buffer_review4"
DECLINED4 = {
    "t1_global_escape": "declares a `global` or `nonlocal` name",      # `global LAST; LAST = self.max_len`
    "cc_unbound_call": "writes in place",                  # `LimitTuning.tighten(self.c, 16)`: another class's method
    "m11b_setattr_patch": "patches the class from outside",  # `setattr(Crop, "tighten", LimitTuning.tighten)`
    "s1_super_setattr": "sets an attribute through `__setattr__`",   # `super().__setattr__(name, ...)`
    "g1_item_write_reinit": "re-reads `self.lengths`",     # `self.lengths[0] = n`, then init.constant_ of it
    "g2_other_init_write": "re-reads `self.limit`",        # a parent's `__init__` sets `self.c.limit = 16`
    "g3b_property_setter": "a property or method",         # the registered value is a property
    "mc1_metaclass": "declared with a keyword",            # a metaclass replaces the mirrored methods
    "f1_numpy_star_all": "`from ... import *`",            # `from numpy import *` rebinds `all` (the twins' check)
    "c1_max_rebound": "`max` is bound",                    # `from torch import maximum as max`
}
ESCAPES4 = {
    "d1_getter_escape": "calls a typed method",            # `cur = self.limit(); cur += n`
    "d2_tuple_getter": "calls a typed method",             # `for b in self.bounds(): b.add_(k)`
    "h1_nonholder_list": "[self.crop.max_len]",            # an instance made by a factory of the module
    "e1_unary_plus_alias": "+self.max_len",                # `+t is t`: `limit = +self.max_len; limit -= n`
}


def _class_lines(source: str) -> list[int]:
    return [i for i, t in enumerate(source.splitlines(), 1) if t.startswith("class ")]


@pytest.mark.parametrize("name", sorted(DECLINED4))
def test_fourth_review_model_is_declined(name):
    source = (REVIEW4 / f"{name}.py").read_text()
    module = cst.parse_module(source)
    reasons = [rewrite(module, line) for line in _class_lines(source)]
    assert all(hasattr(r, "reason") for r in reasons), name
    assert any(DECLINED4[name] in r.reason for r in reasons), [r.reason for r in reasons]


@pytest.mark.parametrize("name", sorted(ESCAPES4))
def test_fourth_review_escape_makes_the_fix_unsafe(name):
    source = (REVIEW4 / f"{name}.py").read_text()
    line = _class_lines(source)[0]     # the buffers' class comes first
    res = rewrite(cst.parse_module(source), line)
    out = enc.buffers_unwritten(_obligation(res, "int-buffers-unwritten"), Ctx({}, {}, code=res.code))
    assert out.result == "unknown" and ESCAPES4[name] in out.reason, out


def test_fourth_review_hex_literal_divisor_is_typed_not_a_crash():
    """x1: `self.max_len // 0x2` made the typing call int('0x2') and abort the whole run."""
    source = (REVIEW4 / "x1_hex_literal.py").read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.startswith("class Crop"))
    res = rewrite(cst.parse_module(source), line)
    assert not hasattr(res, "reason"), res.reason
    assert enc.buffers_unwritten(_obligation(res, "int-buffers-unwritten"), Ctx({}, {}, code=res.code)).result == "checked"


# helper-58's review of the inline form (tests/fixtures/constant_buffer_review5/): rewrites that
# changed behaviour through the older write screens, each now declined or unknown (unsafe)
REVIEW5 = Path(__file__).parent / "fixtures" / "constant_buffer_review5"
DECLINED5 = {
    "t20_tuple_holder_alias_write": "writes a buffer through an alias",   # `self.a, self.b = Conv(), Conv()`
    "t28_config_named_alias": "writes a buffer through an alias",         # `p = cfg.padding_total; p[...] = 0`
    "t25_locals": "reads its locals by name",                             # `print(locals()["pad"])`
    "t26_eval": "reads its locals by name",
    "t27_init_reset_alias": "through an alias of what `__init__` reads",  # `sizes = m.sizes; sizes[0] = k`
    "t30_reconfigure_method": "through an alias of what `__init__` reads",
    "t32_reconfigure_conv_alias": "through an alias of what `__init__` reads",   # `conv = self.conv; conv.stride = ..`
}
# a buffer kept in a streaming cache by a holder the screen now recognises: it escapes, so the
# fix rests on an assumption (unknown: unsafe), as mimi's does
ESCAPES5 = ["t22_tuple_holder_cache", "t23_local_holder_cache", "t29_add_module_cache"]
# crashed (a line break in E, a buffer name that is no identifier) or were declined needlessly
# (a positional `persistent=False`): emitted now, and checked equal by running both
EMITTED5 = ["t01_multiline_E", "t02_dash_name", "t05_positional_persistent"]


def _review5(name: str):
    source = (REVIEW5 / f"{name}.py").read_text()
    module = cst.parse_module(source)
    lines = [i for i, t in enumerate(source.splitlines(), 1) if t.startswith("class ")]
    return source, [rewrite(module, line) for line in lines]


@pytest.mark.parametrize("name", sorted(DECLINED5))
def test_fifth_review_model_is_declined(name):
    _, results = _review5(name)
    assert all(hasattr(r, "reason") for r in results), name
    assert any(DECLINED5[name] in r.reason for r in results), [r.reason for r in results]


@pytest.mark.parametrize("name", ESCAPES5)
def test_fifth_review_cache_escape_is_unknown(name):
    source, results = _review5(name)
    (res,) = [r for r in results if not hasattr(r, "reason")]
    out = enc.buffers_unwritten(_obligation(res, "int-buffers-unwritten"), Ctx({}, {}, code=res.code, before=source))
    assert out.result == "unknown" and "escapes" in out.reason


@pytest.mark.parametrize("name", EMITTED5)
def test_fifth_review_model_is_emitted_and_computes_the_same(name, tmp_path):
    source, results = _review5(name)
    (res,) = [r for r in results if not hasattr(r, "reason")]
    from verifier.encoders import KINDS

    for ob in res.obligations:
        out = KINDS[ob["kind"]](ob, Ctx({}, {}, code=res.code, before=source))
        assert out.result in ("checked", "proved"), (ob["kind"], out)
    a, b = _load(source, tmp_path), _load(res.code, tmp_path)
    torch.manual_seed(0)
    ma = a.Model().eval()
    torch.manual_seed(0)
    mb = b.Model().eval()
    args = a.get_inputs()
    with torch.no_grad():
        assert torch.equal(ma(*args), mb(*args))


def test_a_buffer_read_as_a_slice_step_is_routed_here_and_fixed(tmp_path):
    # helper-78's c08: `h[:, ::self.hop]` breaks as a `.item()` read (the tensor's `__index__`),
    # which the taxonomy filed as item-tolist before it asked this rule's analysis
    path = FIXTURES / "constant_buffer_slice_step.py"
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "::" in t)
    gb = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert categorize(gb, locate(str(path), line)) == "constant-buffer"
    res = fix(str(path), max_examples=5)
    assert [rw["rule"] for rw in res.rewrites] == ["constant-buffer"], [d.to_json() for d in res.declined]
    assert res.rewrites[0]["safety"]["label"] == "safe"
    assert (res.before.graph_count, res.after.graph_count) == (0, 1)   # the frame was skipped
    assert_one_graph_and_same_outputs(path, res.mended, tmp_path, "cb_step")


def test_an_inline_ceil_is_declined_with_this_rules_reason_and_its_hand_form_is_fixed(tmp_path):
    # helper-78's c07: the F.pad break was filed dynamic-shape-op ("the output shape depends on
    # tensor values"), misleading: the pad is made from the class's int buffers
    path = FIXTURES / "constant_buffer_inline_ceil.py"
    src = path.read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "F.pad(" in t)
    assert categorize("Data dependent operator", locate(str(path), line)) == "constant-buffer"
    res = fix(str(path), max_examples=3)
    assert not res.rewrites
    (why,) = [site.reason for site in res.before.sites]
    assert "the ceil of a ratio is used outside" in why and "on a statement of its own" in why
    # the form the reason suggests is fixed
    hand = tmp_path / "hand_ceil.py"
    hand.write_text(src.replace(
        "        ideal_length = (torch.ceil(n_frames).to(torch.int64) - 1) * self.stride + self.padding_total\n",
        "        n_frames = torch.ceil(n_frames).to(torch.int64) - 1\n"
        "        ideal_length = n_frames * self.stride + self.padding_total\n"))
    assert hand.read_text() != src
    # the rule takes it (statically: a solver proof of its int64 range, run by `mend fix`, may time
    # out on a loaded machine, which declines honestly: a fresh-clone CI run saw it)
    res = rewrite(cst.parse_module(hand.read_text()), line + 1)
    assert not isinstance(res, Decline), res
    assert "_mend_int_forward" in res.code and "// _mend_int_s + 1" in res.code   # the exact int ceil


_NO_DTYPE = '''\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("n_keep", torch.tensor(n), persistent=False)

    def forward(self, x):
        h = self.fc(x)
        return h[:, : self.n_keep].mean(1)
'''


def test_a_buffer_made_without_a_dtype_is_twinned_only_when_its_value_is_an_int(tmp_path):
    """``torch.tensor(n)`` is int64 for an int ``n`` (helper-100 m41: declined before, the frame
    stayed skipped); for a float or a bool the twin check fails and the original body runs."""
    line = next(i for i, t in enumerate(_NO_DTYPE.splitlines(), 1) if "self.n_keep].mean" in t)
    res = rewrite(cst.parse_module(_NO_DTYPE), line)
    assert "torch.tensor(_mend_int_inline_n_keep)" in res.code
    orig, mended = _load(_NO_DTYPE, tmp_path), _load(res.code, tmp_path)
    x = torch.randn(2, 5, 4)
    for n, twinned in ((3, True), (True, False)):
        torch.manual_seed(0)
        a = orig.Model(n)
        torch.manual_seed(0)
        b = mended.Model(n)
        assert b._mend_int_ok is twinned
        _same(a(x), b(x))
