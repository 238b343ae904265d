"""host-count-reduction: examples from the rule, obligations, fixtures through mend.fix.fix.

The examples' generated tests (exact text, declines with their reason, the matcher) are in
``tests/test_rules.py``; here, what every fix and decline example must also show (the
obligations in order, file:line in a reason). REFUTED examples pass the
static screen and are declined by their proof obligations on the example run's facts (a
threshold not exact in the tensor's dtype, a 2-D tensor, a 0-d int operand).
"""
from __future__ import annotations

import itertools
from pathlib import Path

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.locate import locate
from mend.rules import RULES, Decline, match_site
from mend.rules import host_count_reduction as hc
from mend.targets import load_file_module
from tests.conftest import FIXTURES, assert_one_graph_and_same_outputs
from verifier import obligations as O

_ids = itertools.count()
REQUIRED = RULES[hc.NAME].required_kinds   # established at every level, fast included
CHECKED = {"count-tolist-1d", "count-no-gradient"}   # by an observation / the ops' definition, not a solver


def _write(tmp_path: Path, code: str) -> Path:
    path = tmp_path / f"hc_{next(_ids)}.py"
    path.write_text(code)
    return path


def test_every_fix_example_counts_on_the_tensor_with_its_obligations_in_order():
    for before, _ in hc.FIX_EXAMPLES:
        res = hc.rewrite(cst.parse_module(before), hc.example_line(before))
        kept = "autocast-keeps-original" in {o["kind"] for o in res.obligations}
        # the loop stays only under autocast, for a threshold not exact in float16/bfloat16
        assert (".tolist()" in res.code) == kept == ("is_autocast_enabled" in res.code)
        assert [o["kind"] for o in res.obligations] == ["count-tolist-1d", "count-compare-exact", "count-sum-exact",
                                                        "count-uses-keep-type", "count-no-gradient"] + (
            ["autocast-keeps-original"] if kept else [])


def test_every_decline_example_says_where():
    for source, _ in hc.DECLINE_EXAMPLES:
        assert "line " in hc.rewrite(cst.parse_module(source), hc.example_line(source)).reason


# (source, facts of the example run, the refuted obligation, words of its counterexample)
_F32 = {"kind": "tensor", "dtype": "float32", "shape": [6], "device": "cpu", "param": False}
REFUTED = [
    # C = 0.1 is not a float32: s = fp32(0.1) counts in Python (0.10000000149 > 0.1), not in torch
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.1:
            n += 1
    return x * n
''', {"x": _F32}, "count-compare-exact", "s = 0.10000000149011612"),
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s == 0.1:
            n += 1
    return x * n
''', {"x": {**_F32, "dtype": "float16"}}, "count-compare-exact", "float16"),
    # int64 compared with a float: torch rounds both to float32
    ('''import torch
def f(x, h):
    n = 0
    for s in x.tolist():
        if s > 16777216.0:
            n += 1
    return h * n
''', {"x": {**_F32, "dtype": "int64"}, "h": _F32}, "count-compare-exact", "16777217"),
    # int threshold outside uint8: torch wraps it
    ('''import torch
def f(x, h):
    n = 0
    for s in x.tolist():
        if s < 300:
            n += 1
    return h * n
''', {"x": {**_F32, "dtype": "uint8"}, "h": _F32}, "count-compare-exact", "uint8"),
    # a 2-D tensor: tolist() yields lists, the original raises TypeError
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * n
''', {"x": {**_F32, "shape": [2, 3]}}, "count-tolist-1d", "2-D"),
    # a 0-d int32 operand: int * it stays int32, a 0-d int64 count promotes it to int64
    ('''import torch
def f(x, z):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return z * n
''', {"x": _F32, "z": {**_F32, "dtype": "int32", "shape": []}}, "count-uses-keep-type", "int32"),
    # an operand that is a Python number on the example run
    ('''import torch
def f(x, k):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return k * n
''', {"x": _F32, "k": {"kind": "num", "cat": "int", "value": 3}}, "count-uses-keep-type", "Python int"),
]


@pytest.mark.parametrize("source,names,kind,words", REFUTED, ids=[f"refuted{i}" for i in range(len(REFUTED))])
def test_refuted_by_obligation(source, names, kind, words):
    res = hc.rewrite(cst.parse_module(source), hc.example_line(source))
    assert isinstance(res, hc.RewriteResult)
    results = O.discharge(res.obligations, facts={"names": names, "self": {}}, code=res.code, before=source)
    bad = [r for r in results if r["result"] not in ("proved", "checked")]
    assert [r["kind"] for r in bad] == [kind], [(r["kind"], r["result"], r.get("reason")) for r in results]
    assert bad[0]["result"] == "refuted" and words in bad[0]["counterexample"]
    for level in ("fast", "standard", "strict"):   # these three are required at every level
        ok, reason, _ = O.verdict(results, level, required=REQUIRED)
        assert not ok and kind in reason


@pytest.mark.parametrize("dtype,threshold,op", [("float32", 0.5, ">"), ("float16", 0.25, "<="),
                                                ("bfloat16", -3.0, "=="), ("float64", 0.1, "!="),
                                                ("int64", 0, "!="), ("int8", 0.5, ">"), ("bool", 0, ">")])
def test_compare_exact_proved(dtype, threshold, op):
    facts = {"names": {"x": {**_F32, "dtype": dtype}}, "self": {}}
    ob = {"kind": "count-compare-exact", "expr": "x", "op": op, "threshold": repr(threshold),
          "threshold_value": threshold}
    (r,) = O.discharge([ob], facts=facts)
    assert r["result"] == "proved", r
    assert O.replay(r["smtlib"]) == "unsat"


def test_sum_exact_refuted_beyond_int64():
    (r,) = O.discharge([{"kind": "count-sum-exact", "init": 2 ** 62, "step": 2 ** 20}], facts=None)
    assert r["result"] == "refuted"


def test_other_item_tolist_sites_keep_the_category_reason(tmp_path):
    from mend.taxonomy import UNFIXABLE_REASONS

    path = _write(tmp_path, "import torch\ndef f(x):\n    v = x.max().item()\n    sizes = x.tolist()\n"
                            "    for i in range(int(x.sum())):\n        pass\n    return v\n")
    verdict = match_site("item-tolist", locate(str(path), 4))
    assert verdict.rule is None and verdict.reason == UNFIXABLE_REASONS["item-tolist"]
    # `v = x.max().item()` is item-operand's shape: its own reason (v is returned)
    verdict = match_site("item-tolist", locate(str(path), 3))
    assert verdict.rule == "item-operand" and "`v` is returned directly (line 7)" in verdict.reason
    verdict = match_site("item-tolist", locate(str(path), 5))
    assert verdict.rule == hc.NAME and "not `<tensor>.tolist()`" in verdict.reason and "Python number" in verdict.reason
    assert match_site("item-tolist", None).reason == UNFIXABLE_REASONS["item-tolist"]


# --- fixtures of the same kind, through mend.fix.fix ------------------------------------------

@pytest.mark.parametrize("name,expected", [
    ("count_le_step2.py", "n_small = n_small + 2 * (norms <= 2.0).sum()"),
    ("count_nonzero_ids.py", "nnz = nnz + (ids != 0).sum()"),
    ("tolist_sum_count.py", "n_long = (lengths > self.max_len).sum()"),   # the one-statement form
])
def test_fixture_fixed(name, expected, tmp_path):
    res = fix(str(FIXTURES / name), unsafe_fixes=True, verify="strict", max_examples=10)
    assert res.before.graph_break_count == 1 and res.after.graph_break_count == 0
    (rw,) = res.rewrites
    assert rw["rule"] == hc.NAME and not res.declined
    assert all(o["result"] == ("checked" if o["kind"] in CHECKED else "proved") for o in rw["obligations"])
    assert expected in res.mended and ".tolist()" not in res.mended
    # eager and compiled behaviour of the mended file equals the original's
    assert_one_graph_and_same_outputs(FIXTURES / name, res.mended, tmp_path, f"hc_{name[:6]}")


def test_an_attribute_threshold_is_read_on_the_run(tmp_path):
    res = fix(str(FIXTURES / "count_attr_threshold.py"), unsafe_fixes=True, verify="standard", max_examples=8)
    assert res.before.graph_count == 2 and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert "n = n + (lengths >= self.min_len).sum()" in res.mended and rw["safety"]["label"] == "unsafe"
    (cmp,) = [o for o in rw["obligations"] if o["kind"] == "count-compare-exact"]
    assert cmp["result"] == "proved" and any("`self.min_len` == 3" in a for a in cmp["assumptions"])
    # a float attribute that is not exact in float32 under `>` is refuted with the observed value
    source = (FIXTURES / "count_attr_threshold.py").read_text().replace("self.min_len = 3", "self.min_len = 0.1") \
        .replace("if l >= self.min_len", "if l > self.min_len").replace("torch.tensor([1, 3, 5, 2])", "torch.rand(4)")
    path = tmp_path / "count_attr_inexact.py"
    path.write_text(source)
    res = fix(str(path), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and "count-compare-exact" in res.declined[0]["reason"] \
        and "s = 0.10000000149011612" in res.declined[0]["reason"]


def test_threshold_not_exact_is_declined_by_fix(tmp_path):
    source = (FIXTURES / "count_le_step2.py").read_text().replace("if v <= 2.0:", "if v <= 0.1:")
    path = tmp_path / "count_inexact.py"
    path.write_text(source)
    res = fix(str(path), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert d["rule"] == hc.NAME and "count-compare-exact" in d["reason"] and "counterexample" in d["reason"]


# --- required at every level; facts observed per line, every hit and call -----------------------

def test_required_obligations_at_every_level():
    assert RULES[hc.NAME].required_kinds == {"count-compare-exact", "count-tolist-1d", "count-uses-keep-type"}
    assert RULES["predicated-control-flow"].required_kinds == {"fall-through-cannot-raise", "loop-facts-agree"}
    source = REFUTED[0][0]
    res = hc.rewrite(cst.parse_module(source), hc.example_line(source))
    facts = {"names": {"x": _F32}, "self": {}}
    # fast discharges the required obligations only, and declines on the refuted one
    out = O.check_rewrite(res.obligations, required=REQUIRED, level="fast", before=source, code=res.code, facts=facts, defs={})
    assert not out["accepted"] and "count-compare-exact" in out["reason"] and "refuted" in out["reason"]
    by_kind = {r["kind"]: r["result"] for r in out["obligations"]}
    assert by_kind == {"count-tolist-1d": "checked", "count-compare-exact": "refuted", "count-sum-exact": "unknown",
                       "count-uses-keep-type": "proved", "count-no-gradient": "unknown",
                       "autocast-keeps-original": "unknown"}   # 0.1 is not exact in bfloat16: the loop kept there
    # unknown declines too (standard would otherwise accept an unknown)
    out = O.check_rewrite(res.obligations, required=REQUIRED, level="standard", before=source, code=res.code,
                          facts={"names": {}, "self": {}}, defs={})
    assert not out["accepted"] and "count-tolist-1d" in out["reason"] and "unknown" in out["reason"]


def _traced(tmp_path, source, call, obligations):
    path = _write(tmp_path, source)
    mod = load_file_module(path, f"_hc_trace_{next(_ids)}")
    return O.trace_facts(lambda: call(mod), str(path), [], set(), watch=O.watched_lines(obligations))


def test_facts_of_every_call_must_agree(tmp_path):
    source = REFUTED[0][0].replace("0.1", "0.5")
    res = hc.rewrite(cst.parse_module(source), hc.example_line(source))
    count_line = res.span[0]
    mended = res.code + "\ndef both(x):\n    return f(x.double()), f(x)\n"
    facts = _traced(tmp_path, mended, lambda mod: mod.both(torch.ones(4)), res.obligations)
    assert facts["at_hits"][str(count_line)] == 2
    assert [o["dtype"] for o in facts["at"][str(count_line)]["x"]] == ["float64", "float32"]
    results = O.discharge(res.obligations, facts=facts, code=res.code, before=source)
    by_kind = {r["kind"]: r for r in results}
    for kind in ("count-tolist-1d", "count-compare-exact"):
        assert by_kind[kind]["result"] == "unknown" and "disagree" in by_kind[kind]["reason"]
    for level in O.LEVELS:
        assert not O.verdict(results, level, required=REQUIRED)[0]
    # one dtype on every call: proved
    facts = _traced(tmp_path, res.code, lambda mod: (mod.f(torch.ones(4)), mod.f(torch.zeros(3))), res.obligations)
    assert all(r["result"] == ("checked" if r["kind"] in CHECKED else "proved")
               for r in O.discharge(res.obligations, facts=facts, code=res.code))


def test_use_operand_is_observed_at_its_own_line(tmp_path):
    source = '''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    v = 0.5
    a = v * n
    v = x
    b = v * n
    return a + b
'''
    res = hc.rewrite(cst.parse_module(source), hc.example_line(source))
    (uses,) = [o["uses"] for o in res.obligations if o["kind"] == "count-uses-keep-type"]
    assert uses == [{"value": "v", "line": 6}, {"value": "v", "line": 8}]
    facts = _traced(tmp_path, res.code, lambda mod: mod.f(torch.ones(4)), res.obligations)
    (r,) = [r for r in O.discharge(res.obligations, facts=facts, code=res.code)
            if r["kind"] == "count-uses-keep-type"]
    assert r["result"] == "refuted" and "Python float" in r["counterexample"] and "line 6" in r["counterexample"]


@pytest.mark.parametrize("source,words", [
    ('''import torch
def f(x):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    x = x.double()
    return x * n
''', "`x` (read by the iterated `x`) is rebound"),
    ('''import torch
def f(self, h):
    n = 0
    for s in self.buf.tolist():
        if s > 0.5:
            n += 1
    self.buf = self.buf.double()
    return h * n
''', "`self.buf`"),
    ('''import torch
def f(x):
    n = 0
    x.data = x.data.half()
    for s in x.tolist():
        if s > 0.5:
            n += 1
    return x * n
''', "rebound or written at line 4"),
    ('''import torch
def f(x):
    n = 0
    for s in x.cpu().numpy().tolist():
        if s > 0.5:
            n += 1
    return x * n
''', "NumPy"),
    ('''import torch
def f(x, v):
    n = 0
    for s in x.tolist():
        if s > 0.5:
            n += 1
    v = x; a = v * n
    return a
''', "shares its line"),
])
def test_static_declines_for_facts(source, words):
    res = hc.rewrite(cst.parse_module(source), hc.example_line(source))
    assert isinstance(res, Decline) and words in res.reason, res


def test_edge_values_of_the_threshold():
    from verifier.differential import edge_values_for

    vals = edge_values_for(torch.float32, [0.1])
    assert 0.1 in vals and 0.10000000149011612 in vals and 0.10000000894069672 in vals and 0.09999999403953552 in vals
    assert edge_values_for(torch.int64, [2.5]) == [1, 2, 3, 4]
    res = hc.rewrite(cst.parse_module(REFUTED[0][0]), hc.example_line(REFUTED[0][0]))
    assert res.edge_values == [0.1]


def test_differential_sees_a_miscount_at_the_threshold(tmp_path):
    """With the threshold as an edge value, the differential test alone catches the
    fp32 0.1 miscount (the obligation refutes it first in mend fix)."""
    from verifier.differential import differential_test

    src = (FIXTURES / "adversarial" / "hc7_inexact_threshold.py").read_text()
    res = hc.rewrite(cst.parse_module(src), hc.example_line(src))
    a_mod = load_file_module(_write(tmp_path, src), f"_hc_d_{next(_ids)}")
    b_mod = load_file_module(_write(tmp_path, res.code), f"_hc_d_{next(_ids)}")
    ev = differential_test(a_mod.Model(), b_mod.Model(), a_mod.get_inputs(), max_examples=3, compiled=False,
                           train=False, extra_edge_values=res.edge_values)
    assert not ev.passed and "differ" in ev.reason


def test_a_threshold_inexact_in_bfloat16_keeps_the_loop_under_autocast(tmp_path):
    """helper-38: 1 + 2**-10 is exact in float32, not in bfloat16; under autocast the layer's
    output is bfloat16 and the tensor count would include the elements equal to 1.0."""
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES

    name = "hostcount_autocast_threshold.py"
    res = fix(str(FIXTURES / name), unsafe_fixes=True, max_examples=5)
    (rw,) = res.rewrites
    assert ('if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps") or s.dtype in (torch.float16, '
            'torch.bfloat16):' in res.mended)
    assert "n = n + (s >= 1.0009765625).sum()" in res.mended and "under autocast (cpu, cuda, xpu, mps) the loop is kept" in rw["detail"]
    kept = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert kept["autocast-keeps-original"] == "checked" and kept["count-compare-exact"] == "proved"
    assert res.after.graph_break_count == 0
    mended = tmp_path / name
    mended.write_text(res.mended)
    a_mod, b_mod = load_file_module(FIXTURES / name, "_hc_ac_o"), load_file_module(mended, "_hc_ac_n")
    a, b = a_mod.Model(), b_mod.Model()
    b.load_state_dict(a.state_dict())
    (x,) = a_mod.probe_inputs()[0]
    for on in (False, True):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on), torch.no_grad():
            want, got = a(x), b(x)
            assert torch.equal(want, got)
            # the unguarded count differs under autocast: what the guard is for
            s = a.lin(x).flatten()
            assert (int((s >= 1.0009765625).sum()) != sum(v >= 1.0009765625 for v in s.tolist())) == on
    # helper-40: a model cast to bfloat16 (no autocast) keeps the loop too
    a16, b16 = a_mod.Model().bfloat16(), b_mod.Model().bfloat16()
    b16.load_state_dict(a16.state_dict())
    with torch.no_grad():
        want, got = a16(x.bfloat16()), b16(x.bfloat16())
        s = a16.lin(x.bfloat16()).flatten()
    assert torch.equal(want, got) and int((s >= 1.0009765625).sum()) != sum(v >= 1.0009765625 for v in s.tolist())


def test_an_attribute_threshold_inexact_in_bfloat16_is_refuted():
    """The threshold is an attribute (observed value): no guard, so count-compare-exact is proved
    in float16 and bfloat16 too, and refuted there for 1 + 2**-10."""
    from tests.conftest import FIXTURES

    res = fix(str(FIXTURES / "hostcount_autocast_attr.py"), unsafe_fixes=True, max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert "count-compare-exact" in d.reason and "refuted" in d.reason, d.reason
    assert "bfloat16" in d.counterexample and "autocast" in d.counterexample, d.counterexample


def test_trap_a_count_on_the_left_of_mul_with_bfloat16_is_rounded_first():
    """helper-70's U4: why `n * h` is declined. A Python int meets a bfloat16 tensor as
    `h.__rmul__(n)`, in float32; a 0-d int64 count on the left is cast to bfloat16 first
    (1001 -> 1000); on the right (`h * n`) it agrees with the Python int."""
    import torch

    h = torch.randn(256, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(0))
    n = torch.tensor(1001)
    assert torch.equal(h * n, h * 1001) and torch.equal(1001 * h, h * 1001)
    assert not torch.equal(n * h, 1001 * h)


def test_size_queries_have_transfer_functions():
    """helper-102's m28: `labels.numel()` beside a `.tolist().count(v)` count was unknown ("no
    transfer function"), a wrong reason; numel/nelement, dim/ndimension and size()/size(d) are
    Python ints known at trace time, as `.shape` is, and the decline now names the real cause."""
    import z3

    from verifier.shapes import ShapeEval, _expr
    from verifier.smt import Unsupported

    facts = {"names": {"g": {"kind": "tensor", "shape": [3, 5], "dtype": "float32"},
                       "s": {"kind": "tensor", "shape": [], "dtype": "int64"}}}
    sizes = {"g.shape[0]": 3, "g.shape[1]": 5}
    for text, want in (("g.numel()", 15), ("g.nelement()", 15), ("g.dim()", 2), ("g.ndimension()", 2),
                       ("g.size(1)", 5), ("g.size(-2)", 3), ("g.size(dim=0)", 3), ("s.numel()", 1)):
        se = ShapeEval(facts, {}, "general")
        got = se.eval(_expr(text))
        solver = z3.Solver()
        solver.add(*[a for a, _ in se.assume], *[z3.Int(k) == v for k, v in sizes.items()])
        assert got.kind == "num" and got.cat == "int" and solver.check() == z3.sat, text
        assert solver.model().eval(got.ival, model_completion=True).as_long() == want, text
    assert ShapeEval(facts, {}, "general").eval(_expr("g.size()")).kind == "shape"
    for text in ("s.size(0)", "g.numel(1)"):
        with pytest.raises(Unsupported):
            ShapeEval(facts, {}, "general").eval(_expr(text))
