"""item-operand: obligations refuted on the facts of an example run, and fixtures through
mend.fix.fix (a fix, two traps, an in-place write after the read).

The examples' generated tests (exact text, declines with their reason, the matcher) are in
``tests/test_rules.py``.
"""
from __future__ import annotations

import libcst as cst
import pytest
from mend.fix import fix
from mend.rules import item_operand as io
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
    ({**_F32, "dtype": "int32"}, {**_F32, "dtype": "float64"}, "item-operand-keep-type", "float64"),
    # a 0-d int32 operand keeps int32 with a Python int, is promoted to int64 by a 0-d int64
    ({**_SCALAR, "dtype": "int32"}, {**_F32, "dtype": "int64"}, "item-operand-keep-type", "int64"),
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
    ("mean_pool.py", "n = mask.sum().detach().reshape(()).clone()"),
    ("inplace_after.py", "s = t.max().detach().reshape(()).clone()"),
])
def test_fixture_fixed(name, expected, tmp_path):
    res = fix(str(CASES / name), unsafe_fixes=True, verify="strict", max_examples=10)
    assert res.before.graph_count == 2 and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == io.NAME and rw["safety"]["label"] == "unsafe" and not res.declined
    assert expected in res.mended and ".item()" not in res.mended.split("# mend:")[0].splitlines()[-1]
    assert_one_graph_and_same_outputs(CASES / name, res.mended, tmp_path, f"io_{name[:-3]}")


def test_fixture_not_applied_without_unsafe_fixes():
    res = fix(str(CASES / "mean_pool.py"), verify="standard", max_examples=5)
    assert res.mended == res.original


@pytest.mark.parametrize("name, kind", [
    ("int_promotes.py", "item-operand-keep-type"),
    ("half_opmath.py", "item-operand-exact"),
])
def test_trap_declined(name, kind):
    res = fix(str(CASES / name), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert d["rule"] == io.NAME and kind in d["reason"] and "refuted" in d["reason"]
