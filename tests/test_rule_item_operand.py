"""item-operand: obligations refuted on the facts of an example run, and fixtures through
mend.fix.fix (a fix, two traps, an in-place write after the read).

The examples' generated tests (exact text, declines with their reason, the matcher) are in
``tests/test_rules.py``.
"""
from __future__ import annotations

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.rules import item_operand as io
from mend.targets import load_file_module
from tests.conftest import FIXTURES, assert_one_graph_and_same_outputs
from verifier import obligations as O

CASES = FIXTURES / "item_operand"
_F32 = {"kind": "tensor", "dtype": "float32", "shape": [6], "device": "cpu", "param": False}
_SCALAR = {"kind": "tensor", "dtype": "float32", "shape": [], "device": "cpu", "param": False}
_SOURCE = '''import torch
def f(h, t):
    s = t.sum().item()
    return h * s
'''


def _discharge(names: dict, source: str = _SOURCE):
    res = io.rewrite(cst.parse_module(source), io.example_line(source))
    return {r["kind"]: r for r in O.discharge(res.obligations, facts={"names": names, "self": {}}, code=res.code,
                                              before=source)}


def test_obligations_in_order_and_proved_on_float32():
    res = io.rewrite(cst.parse_module(_SOURCE), 3)
    assert [o["kind"] for o in res.obligations] == ["item-operand-tensor", "item-operand-keep-type",
                                                    "item-operand-exact"]
    got = _discharge({"h": _F32, "t": _F32})
    assert got["item-operand-tensor"]["result"] == "checked"
    assert got["item-operand-keep-type"]["result"] == "proved"
    assert got["item-operand-exact"]["result"] == "checked"


@pytest.mark.parametrize("h, t, kind, words", [
    # int32 * Python float is float32; int32 * 0-d float64 is float64
    ({**_F32, "dtype": "int32"}, {**_F32, "dtype": "float64"}, "item-operand-keep-type",
     "computes in float32 with the Python number (typed float32, a wrapped number) but in float64"),
    # a 0-d int32 operand keeps int32 with a Python int, is promoted to int64 by a 0-d int64
    ({**_SCALAR, "dtype": "int32"}, {**_F32, "dtype": "int64"}, "item-operand-keep-type",
     "computes in int32 with the Python number (typed int64, a wrapped number) but in int64 with a 0-d int64"),
    # float16 arithmetic with a float32 value: the opmath path and the cast-first path differ
    ({**_F32, "dtype": "float16"}, _F32, "item-operand-exact", "not exact in float16"),
    ({**_F32, "dtype": "bfloat16"}, {**_F32, "dtype": "float16"}, "item-operand-exact", "not exact in bfloat16"),
    # a CUDA value meeting a CPU tensor: the 0-d tensor would not combine
    (_F32, {**_F32, "device": "cuda:0"}, "item-operand-keep-type", "on cpu"),
    # more than one element: .item() raises, the kept tensor would broadcast
    (_F32, {**_F32, "shape": [2, 3]}, "item-operand-tensor", "one element"),
])
def test_refuted(h, t, kind, words):
    # the read is `t.sum()`: make `t` the tensor whose shape the check sees
    source = _SOURCE.replace("t.sum().item()", "t.item()") if kind == "item-operand-tensor" else _SOURCE
    got = _discharge({"h": h, "t": t}, source)
    assert got[kind]["result"] == "refuted", got[kind]
    assert words in (got[kind].get("counterexample") or ""), got[kind]


def test_exact_proved_where_the_value_fits():
    # float16 arithmetic with a float16 value, and with an int8 value (max keeps the dtype; an
    # int8 sum is int64, which is not exact in float16): exact
    source = _SOURCE.replace("t.sum()", "t.max()")
    for t in ({**_F32, "dtype": "float16"}, {**_F32, "dtype": "int8"}):
        got = _discharge({"h": {**_F32, "dtype": "float16"}, "t": t}, source)
        assert got["item-operand-exact"]["result"] in ("proved", "checked"), got["item-operand-exact"]
        assert got["item-operand-keep-type"]["result"] == "proved"


@pytest.mark.parametrize("name, expected", [
    ("mean_pool.py", "n = mask.sum().item() if torch.jit.is_scripting() else (mask.sum().item() if torch.is_autocast_enabled(\"cpu\") or torch.is_autocast_enabled(\"cuda\") or torch.is_autocast_enabled(\"xpu\") or torch.is_autocast_enabled(\"mps\") or torch.get_default_dtype() != torch.float32 else mask.sum().detach().reshape(()).clone())"),
    ("inplace_after.py", "s = t.max().item() if torch.jit.is_scripting() else (t.max().item() if torch.is_autocast_enabled(\"cpu\") or torch.is_autocast_enabled(\"cuda\") or torch.is_autocast_enabled(\"xpu\") or torch.is_autocast_enabled(\"mps\") or torch.get_default_dtype() != torch.float32 else t.max().detach().reshape(()).clone())"),
    # read in place (the temperature's gradient stays None: the kept tensor is detached)
    # a count of nonzero's rows (taxonomy: dynamic-shape operator -> item-tolist) as count_nonzero
    ("nonzero_count.py", "n = torch.count_nonzero(mask).item() if torch.jit.is_scripting() else (torch.count_nonzero(mask).item() if torch.is_autocast_enabled(\"cpu\") or torch.is_autocast_enabled(\"cuda\") or torch.is_autocast_enabled(\"xpu\") or torch.is_autocast_enabled(\"mps\") or torch.get_default_dtype() != torch.float32 else torch.count_nonzero(mask).detach().reshape(()).clone())"),
    ("temperature_inline.py", "return logits / (self.log_t.exp().item() if torch.jit.is_scripting() else (self.log_t.exp().item() if torch.is_autocast_enabled(\"cpu\") or torch.is_autocast_enabled(\"cuda\") or torch.is_autocast_enabled(\"xpu\") or torch.is_autocast_enabled(\"mps\") or torch.get_default_dtype() != torch.float32 else self.log_t.exp().detach().reshape(()).clone()))"),
])
def test_fixture_fixed(name, expected, tmp_path):
    res = fix(str(CASES / name), unsafe_fixes=True, verify="strict", max_examples=10)
    assert res.before.graph_count == 2 and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == io.NAME and rw["safety"]["label"] == "unsafe" and not res.declined
    # `.item()` is left only inside torch.autocast
    assert expected in res.mended and res.mended.split("# mend:")[0].splitlines()[-1].count(".item()") == 2
    assert_one_graph_and_same_outputs(CASES / name, res.mended, tmp_path, f"io_{name[:-3]}")


def test_fixture_not_applied_without_unsafe_fixes():
    res = fix(str(CASES / "mean_pool.py"), verify="standard", max_examples=5)
    assert res.mended == res.original


@pytest.mark.parametrize("name, kind", [
    ("int_promotes.py", "item-operand-keep-type"),
    ("half_opmath.py", "item-operand-exact"),
    ("inner_autocast.py", "item-operand-exact"),
])
def test_trap_declined(name, kind):
    res = fix(str(CASES / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert d["rule"] == io.NAME and kind in d["reason"] and "refuted" in d["reason"]


# --- the adversarial review (helper, 2026-12-04): what it found, as regression tests ---------
REVIEW = CASES / "review"


@pytest.mark.parametrize("name", ["c01_divfloor_fp16.py", "c02_sumdtype.py", "c03_amax_emptydim.py",
                                  "c12_sum_int32.py"])
def test_an_expression_operand_is_declined(name):
    """The other operand was an expression whose dtype or rank the shape model got wrong
    (`div(rounding_mode=)`, `sum(dtype=)`, `amax(dim=[])`): the proof said "same dtype" and the
    mended model compared in another dtype on other inputs. Only names' facts are observed exactly;
    an expression operand is declined by the screen, and by the encoder (defence in depth)."""
    res = fix(str(REVIEW / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (site,) = res.before.sites   # declined by the screen: the scan's verdict says why
    assert site.fixable_by is None and "item-operand declines" in site.reason and "not a plain name" in site.reason
    mod = load_file_module(REVIEW / name, f"_io_review_{name[:3]}")
    args = mod.adversarial_inputs()
    with torch.no_grad():   # the inputs on which the rewrite differed: the original's answer stays
        assert mod.Model()(*args).dtype == torch.bool


def test_the_encoder_declines_an_expression_operand_too():
    res = io.rewrite(cst.parse_module(_SOURCE), 3)
    ob = dict(res.obligations[1], uses=[{"value": "h.sum(dtype=torch.float64)", "op": "*", "line": 4}])
    (r,) = O.discharge([ob], facts={"names": {"h": _F32, "t": _F32}, "self": {}})
    assert r["result"] == "unknown" and "not a plain name" in r["reason"]


def test_shape_model_of_the_review_operands():
    """The shape model itself: `div(rounding_mode=)` keeps integer dtypes, `sum(dtype=)` has the
    dtype asked for, an empty dim list and norm's positional p are not modelled."""
    from verifier.shapes import ShapeEval, _expr
    from verifier.smt import Unsupported

    import z3

    i64 = {**_F32, "dtype": "int64"}

    def dtype_of(text):
        torch_ns = {"kind": "pymodule", "value": "torch"}
        se = ShapeEval({"names": {"a": i64, "b": i64, "torch": torch_ns}}, {}, "observed", strict_dtypes=True)
        mv = se.eval(_expr(text))
        solver = z3.Solver()
        solver.add(*[a for a, _ in se.assume])
        assert solver.check() == z3.sat
        return str(solver.model().eval(mv.dtype, model_completion=True))

    assert dtype_of('a.div(b, rounding_mode="floor")') == "int64"
    assert dtype_of("a.div(b)") == "float32"
    assert dtype_of("a.sum(dtype=torch.int32)") == "int32"
    for text in ("a.amax(dim=[])", "a.float().norm(2, 0)", "a.float().std(0, True)"):
        with pytest.raises(Unsupported):
            ShapeEval({"names": {"a": i64}}, {}, "observed", strict_dtypes=True).eval(_expr(text))


@pytest.mark.parametrize("name", ["c04_multiline.py", "c04b_multiline_comment.py"])
def test_a_read_over_several_lines_is_declined_not_a_crash(name):
    res = fix(str(REVIEW / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (site,) = res.before.sites
    assert site.fixable_by is None and "spans several lines" in site.reason


def test_a_raw_one_element_input_is_taken(tmp_path):
    """`s = t.item()` on an input of shape [1]: the size check pins the observed sizes (it was
    refuted: the symbolic size was left free)."""
    res = fix(str(REVIEW / "c13_plain_input.py"), unsafe_fixes=True, verify="standard", max_examples=8)
    (rw,) = res.rewrites
    assert rw["rule"] == io.NAME and "s = t.item() if torch.jit.is_scripting() else (t.item() if torch.is_autocast_enabled(" in res.mended


def test_division_by_a_device_value_is_refuted():
    """CUDA divides by a CPU scalar (the Python number) as a * (1/b) and by a device tensor as a / b
    (ATen div_true_kernel_cuda): a value on CUDA met by `/`, `//` or `%` is refuted; on the CPU,
    a 0-d CPU tensor is a CPU scalar too."""
    cuda = {**_F32, "device": "cuda:0"}
    got = _discharge({"h": cuda, "t": cuda}, _SOURCE.replace("h * s", "h / s"))
    assert got["item-operand-keep-type"]["result"] == "refuted"
    assert "a * (1/b)" in got["item-operand-keep-type"]["counterexample"]
    got = _discharge({"h": cuda, "t": cuda})           # `*`: the scalar path computes alike
    assert got["item-operand-keep-type"]["result"] == "proved"


# --- the second adversarial review (helper, 2026-12-04) ---------------------------------------
@pytest.mark.parametrize("name, words", [
    # `self.track(counts)` rebinds `self.seen` (float32 -> int32) on the use's own line, after the
    # facts are observed at the line's start: the proof saw float32
    ("c12_sameline_attr.py", "runs before the use"),
    # a walrus earlier in the `if` header rebinds the operand
    ("c11_walrus_header.py", "binds a name (`:=`)"),
])
def test_a_use_whose_operand_may_change_on_its_line_is_declined(name, words):
    path = CASES / "review2" / name
    res = fix(str(path), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    reasons = [s.reason for s in res.before.sites if s.fixable_by is None and "item-operand declines" in s.reason]
    assert len(reasons) == 1 and words in reasons[0], [s.reason for s in res.before.sites]


def test_a_call_after_the_use_on_its_line_is_allowed():
    """Calls that Python evaluates after the operand is read (here `.sum()` of the product) cannot
    change it: the screen takes the site."""
    source = _SOURCE.replace("return h * s", "return (h * s).sum()")
    assert not isinstance(io.rewrite(cst.parse_module(source), 3), io.Decline)
    source = _SOURCE.replace("return h * s", "return torch.relu(h) + (h * s)")
    d = io.rewrite(cst.parse_module(source), 3)
    assert isinstance(d, io.Decline) and "`torch.relu(h)` runs before the use" in d.reason


def test_the_default_dtype_is_an_assumption():
    got = _discharge({"h": _F32, "t": _F32})
    assert any("default dtype is float32" in a for a in got["item-operand-keep-type"]["assumptions"])


def test_a_tensor_subclass_read_is_refuted():
    """helper-35: the mended `x * scale.detach().reshape(()).clone()` returned a `Tagged`
    where the original returned a plain tensor (same values: the differential test passed)."""
    from mend.fix import fix

    res = fix(str(FIXTURES / "item_operand" / "subclass_read.py"), max_examples=3, unsafe_fixes=True)
    (d,) = res.declined
    assert res.rewrites == [] and "item-operand-tensor" in d["reason"] and "tensor subclass" in d["reason"]


def test_autocast_keeps_the_number_and_the_verifier_sees_why(tmp_path):
    """helper-35: under torch.autocast(bfloat16) Inductor compared bfloat16 logits with the kept
    float32 0-d threshold in float32, where eager rounds it to bfloat16 (4 of the fixture's 32
    elements differ). The mended read stays `.item()` inside autocast; the verifier's autocast
    leg refutes the unguarded form on the example."""
    from verifier.differential import differential_test

    res = fix(str(CASES / "autocast_threshold.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert rw["rule"] == io.NAME and 'torch.is_autocast_enabled("cpu")' in res.mended
    modes = rw["evidence"]["modes"]
    assert "compiled:inductor/autocast(cpu, bfloat16)/eval" in modes
    orig = load_file_module(CASES / "autocast_threshold.py", "io_ac_orig")
    paths = {"guarded": res.mended, "unguarded": res.original.replace("self.thr.item()",
                                                                      "self.thr.detach().reshape(()).clone()")}
    mods = {}
    for name, text in paths.items():
        (tmp_path / f"{name}.py").write_text(text)
        mods[name] = load_file_module(tmp_path / f"{name}.py", f"io_ac_{name}")
    (x,) = orig.get_inputs()
    base = orig.Model()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = base(x)
        for name, mod in mods.items():
            m = mod.Model()
            torch._dynamo.reset()
            got = torch.compile(m)(x)
            assert int((got != want).sum()) == (0 if name == "guarded" else 4), name
    torch._dynamo.reset()
    ev = differential_test(orig.Model(), mods["unguarded"].Model(), (x,), max_examples=2, train=False)
    assert not ev.passed and "autocast(cpu, bfloat16)" in ev.reason, ev.reason


def test_another_default_dtype_keeps_the_number(tmp_path):
    """helper-35: `ids * self.scale.item()` is float64 under torch.set_default_dtype(torch.float64)
    set after building, and was float32 with the kept 0-d tensor. Now the read stays `.item()`
    there, eager and compiled (Dynamo guards the default dtype), and is a tensor otherwise."""
    res = fix(str(CASES / "default_dtype.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert "torch.get_default_dtype() != torch.float32" in res.mended
    (tmp_path / "m.py").write_text(res.mended)
    orig = load_file_module(CASES / "default_dtype.py", "io_dd_orig").Model()
    mended = load_file_module(tmp_path / "m.py", "io_dd_mended").Model()
    x = torch.arange(5)
    torch._dynamo.reset()
    compiled = torch.compile(mended, backend="eager")
    assert compiled(x).dtype == torch.float32
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        want = orig(x)
        assert want.dtype == torch.float64
        for got in (mended(x), compiled(x)):
            assert got.dtype == torch.float64 and torch.equal(got, want)
    finally:
        torch.set_default_dtype(old)


def test_the_mended_module_still_scripts(tmp_path):
    """torch.jit.script rejects `torch.is_autocast_enabled("cpu")`; the guard's outer test is
    `torch.jit.is_scripting()`, so TorchScript compiles the original read (a new user scripted the
    mended temperature module and it failed to compile)."""
    res = fix(str(CASES / "temperature_inline.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert rw["evidence"]["torchscript"] == "kept"
    (tmp_path / "m.py").write_text(res.mended)
    orig = load_file_module(CASES / "temperature_inline.py", "io_ts_orig")
    mended = load_file_module(tmp_path / "m.py", "io_ts_mended")
    torch.manual_seed(0)
    a = orig.Model()
    b = mended.Model()
    b.load_state_dict(a.state_dict())
    args = orig.get_inputs()
    assert torch.equal(torch.jit.script(b)(*args), a(*args))


@pytest.mark.parametrize("numel, result", [(2048, "proved"), (2049, "refuted")])
def test_a_count_of_nonzero_elements_is_bounded_by_the_observed_size(numel, result):
    """helper-66: a count compared with a float16 tensor was refuted with e = -44537482, a count
    no tensor has. The count is 0..numel(T) (T's observed sizes: tier observed); every count up to
    2048 is exact in float16, 2049 is not (the counterexample)."""
    source = "import torch\ndef f(t, x):\n    n = len(t.nonzero())\n    return x > n\n"
    names = {"t": {**_F32, "shape": [numel]}, "x": {**_F32, "dtype": "float16", "shape": [4]},
             "torch": {"kind": "pymodule", "value": "torch"}}
    res = io.rewrite(cst.parse_module(source), 3)
    (ex,) = [o for o in res.obligations if o["kind"] == "item-operand-exact"]
    assert ex["count_of"] == "t"
    got = {r["kind"]: r for r in O.discharge(res.obligations, facts={"names": names, "self": {}}, code=res.code,
                                             before=source)}["item-operand-exact"]
    assert got["result"] == result, got
    if result == "proved":
        assert got["tier"] == "observed" and any(f"0 to its {numel} elements" in a for a in got["assumptions"])
    else:
        assert "e = 2049" in got["counterexample"]


def test_a_count_of_something_not_a_tensor_is_refuted_saying_why():
    """helper-66: a NumPy array's `len(a.nonzero())` is its rank; the decline said only that a
    ndarray is not modelled."""
    source = "import torch\ndef f(a, x):\n    n = len(a.nonzero())\n    return x * n\n"
    names = {"a": {"kind": "other", "type": "ndarray"}, "x": _F32, "torch": {"kind": "pymodule", "value": "torch"}}
    res = io.rewrite(cst.parse_module(source), 3)
    got = {r["kind"]: r for r in O.discharge(res.obligations, facts={"names": names, "self": {}}, code=res.code,
                                             before=source)}["item-operand-tensor"]
    assert got["result"] == "refuted" and "whose `len` is the rank" in got["counterexample"], got


# --- a Python number a tensor test chooses (helper-72's b05) ---------------------------------
@pytest.mark.parametrize("name, kept", [("choice_float64.py", "torch.float64"), ("choice_if_int.py", "torch.int64")])
def test_a_chosen_number_is_fixed(name, kept, tmp_path):
    res = fix(str(CASES / name), unsafe_fixes=True, verify="standard", max_examples=10)
    assert res.before.graph_count == 2 and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == io.NAME and rw["safety"]["label"] == "unsafe" and not res.declined
    assert "torch.where(" in res.mended and f"dtype={kept})" in res.mended
    assert_one_graph_and_same_outputs(CASES / name, res.mended, tmp_path, f"io_{name[:-3]}")


@pytest.mark.parametrize("name, kind, words", [
    ("choice_scalar_loss.py", "item-operand-keep-type", "but in float64 with a 0-d float64 tensor"),
    ("choice_half.py", "item-operand-exact", "not exact in float16"),
])
def test_a_chosen_number_trap_is_refuted(name, kind, words):
    res = fix(str(CASES / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert d["rule"] == io.NAME and kind in d["reason"] and "refuted" in d["reason"] and words in d["reason"]


def test_a_chosen_number_keeps_float32_only_for_float32_values():
    """float32 where both literals are float32 values (no wider result beside a 0-d float32
    operand), float64 otherwise; the encoder checks the literals against the kept dtype."""
    def kept(source):
        res = io.rewrite(cst.parse_module(source), 3)
        return next(o for o in res.obligations if o["kind"] == "item-operand-exact")
    assert kept(_SOURCE.replace("s = t.sum().item()", "s = 0.5 if t.sum() > 0 else -1.0"))["kept"] == "float32"
    ob = kept(_SOURCE.replace("s = t.sum().item()", "s = 0.1 if t.sum() > 0 else 0.5"))
    assert ob["kept"] == "float64" and ob["values"] == ["0.1", "0.5"]
    # a certificate claiming float32 for 0.1 is not accepted by the encoder
    (got,) = O.discharge([{**ob, "kept": "float32"}], facts={"names": {"h": _F32, "t": _F32}, "self": {}}, code="",
                         before="")
    assert got["result"] == "unknown" and "the literal 0.1 is not held exactly by a 0-d float32" in got["reason"]


def test_an_elif_chain_of_chosen_numbers_is_fixed(tmp_path):
    """helper-73's c05: `if m > 10: s = 0.125 / elif m > 1: s = 0.5 / else: s = 1.0`, two breaks."""
    res = fix(str(CASES / "choice_elif.py"), unsafe_fixes=True, verify="standard", max_examples=10)
    assert (res.before.graph_count, res.after.graph_count) == (3, 1)
    (rw,) = res.rewrites
    assert rw["rule"] == io.NAME and res.mended.count("torch.where(") == 2
    tested = [o["expr"] for o in rw["obligations"] if o["kind"] == "item-operand-tensor"]
    assert tested == ["m > 10", "m > 1"]   # each test is observed to be one element
    assert_one_graph_and_same_outputs(CASES / "choice_elif.py", res.mended, tmp_path, "io_choice_elif")


def test_an_elif_is_not_a_choice_of_its_own():
    """Only the chain's `if` is: replacing the `elif` node alone by a statement would leave the
    outer `if` without its `orelse` (an invalid tree)."""
    source = '''import torch
def f(h, m):
    if m > 10:
        y = 0.5
    elif m > 1:
        s = 0.5
    else:
        s = 1.0
    return h * s
'''
    assert isinstance(io.rewrite(cst.parse_module(source), 5), io.Decline)
    assert isinstance(io.rewrite(cst.parse_module(source), 3), io.Decline)   # the sides assign different names


def test_int_of_an_integer_read_is_the_read_and_of_a_float_is_refuted():
    """helper-73's c08: `n = int(mask.sum().item())` is the int `.item()` gives for an integer
    tensor; for a float tensor int() truncates (and raises on NaN), which a kept tensor would not."""
    source = _SOURCE.replace("s = t.sum().item()", "s = int(t.sum().item())")
    got = _discharge({"h": _F32, "t": {**_F32, "dtype": "int64"}}, source.replace("t.sum()", "t.max()"))
    assert got["item-operand-tensor"]["result"] == "checked", got["item-operand-tensor"]
    res = io.rewrite(cst.parse_module(source), 3)
    assert next(o for o in res.obligations if o["kind"] == "item-operand-tensor")["int_of"] is True
    got = _discharge({"h": _F32, "t": _F32}, source.replace("t.sum()", "t.max()"))
    assert got["item-operand-tensor"]["result"] == "refuted"
    assert "truncates toward zero" in got["item-operand-tensor"]["counterexample"]


# --- helper-74's attack on the chosen number ---------------------------------------------------
def test_a_chosen_number_whose_test_is_a_python_value_takes_the_original(tmp_path):
    """`0.5 if self.gate_on and h.std() > 1 else 1.0` is the Python False with the flag off, and a
    float argument compared with a literal is a Python bool: `.reshape` raised AttributeError."""
    from mend.targets import load_file_module

    res = fix(str(CASES / "choice_flag_and.py"), unsafe_fixes=True, verify="standard", max_examples=8)
    assert res.after.graph_count == 1 and len(res.rewrites) == 1
    path = tmp_path / "choice_flag_and.py"
    path.write_text(res.mended)
    a, b = (load_file_module(p, f"_io_flag_{i}").Model() for i, p in enumerate((CASES / "choice_flag_and.py", path)))
    x = torch.randn(4, 16) * 3
    for on in (True, False):
        a.gate_on = b.gate_on = on
        for model in (b, torch.compile(b, backend="eager")):
            assert torch.equal(a(x), model(x))


def test_the_statement_form_keeps_every_line():
    """helper-74's c23/c24: a warning or log record after the choice named a line 3 lower."""
    from mend.rules.item_operand.examples import FIX_EXAMPLES

    for before, after, *_ in FIX_EXAMPLES:
        assert len(before.splitlines()) == len(after.splitlines())


def test_an_exact_example_does_not_hide_inductors_dropped_rounding():
    res = fix(str(CASES / "choice_bf16_exact_example.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert "under torch.compile (inductor)" in d["reason"]


@pytest.mark.parametrize("body, sized", [
    # split sizes read back with .tolist() (llava_next's image sizes, mistral3's split sizes: helper-77)
    ("        sizes = lengths.tolist()\n        parts = torch.split(h, sizes, dim=0)\n        return parts[0]\n",
     "`torch.split(h, sizes, dim=0)`"),
    # a slice bound, through a name bound from the value
    ("        n = lengths.max().item()\n        m = n + 1\n        return h[:m]\n", "`:m`"),
    # a tuple target, then an allocation's shape
    ("        a, b = lengths.tolist()\n        return h.new_zeros(a, b)\n", "`h.new_zeros(a, b)`"),
    # only arithmetic and a return: not a size
    ("        n = lengths.max().item()\n        return h * n, n\n", None),
])
def test_a_value_that_sizes_tensors_is_reported_as_a_data_dependent_shape(tmp_path, body, sized):
    from mend.locate import locate
    from mend.rules import match_site

    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef f(h, lengths):\n" + body)
    verdict = match_site("item-tolist", locate(str(path), 5))
    if sized is None:
        assert "size tensors" not in verdict.reason
    else:
        assert verdict.reason.startswith("the values read here") and sized in verdict.reason, verdict.reason
        assert "the output shape depends on tensor data" in verdict.reason


def test_a_flag_passed_to_a_layer_is_not_reported_as_sizing_tensors(tmp_path):
    """helper-77/newest: longformer's `is_global_attn = ....any().item()` goes to a layer whose
    output is sliced by its own `.shape`: the flag sizes nothing."""
    from mend.locate import locate
    from mend.rules import match_site

    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef f(layer, h, mask):\n    g = mask.any().item()\n    out = layer(h, g)\n"
                    "    h2 = out[0]\n    return h2[:, : h2.shape[1] - 3]\n")
    assert "size tensors" not in match_site("item-tolist", locate(str(path), 5)).reason
