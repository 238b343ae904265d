"""forward-attribute (issue 10, kind 5): `self.X = self.X.to(...)` in forward becomes a local
stored back only when the conversion returned a new tensor. Adversarial fixtures built to
make a wrong rewrite change behaviour: float64 inputs (the conversion happens and the
original stores it: the plain-local rewrite's trap), the attribute read by another method
and by the parent after the call, an alias taken before the write, a Parameter, a property.
Each is declined or gives results identical to the original, buffers included."""
from __future__ import annotations

import types

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.rules import Decline, RewriteResult
from mend.rules.forward_attribute import RULE
from mend.rules.forward_attribute.examples import example_line
from tests.conftest import FIXTURES
from verifier.differential import Mismatch, compare, observe
from verifier.discharge import discharge
from verifier.encoders.base import Ctx
from verifier.encoders.forward_attribute import access_plain

HERE = FIXTURES / "forward_attribute"


def _load(code: str, name: str):
    mod = types.ModuleType(name)
    exec(compile(code, f"<{name}>", "exec"), mod.__dict__)
    return mod


def _mended(code: str) -> str:
    res = RULE.rewrite(cst.parse_module(code), example_line(code))
    assert isinstance(res, RewriteResult), res
    return res.code


def _plain_local(code: str) -> str:
    """The naive rewrite (the trap): a local and no store."""
    return (code.replace("        self.table = self.table.to(", "        table = self.table.to(")
            .replace("self.table[ids, :]", "table[ids, :]", 1))


def _state(model):
    return [(n, b.dtype, b.clone()) for n, b in model.named_buffers()], sorted(model.state_dict())


def _same_state(a, b):
    (ba, ka), (bb, kb) = _state(a), _state(b)
    assert ka == kb
    assert [(n, d) for n, d, _ in ba] == [(n, d) for n, d, _ in bb]
    assert all(torch.equal(x, y) for (_, _, x), (_, _, y) in zip(ba, bb))


CALLS = [torch.float32, torch.float64, torch.float32, torch.float64]


@pytest.mark.parametrize("fixture", ["shared_posenc.py", "read_elsewhere.py"])
def test_mended_fixture_is_identical_over_dtype_changing_calls(fixture):
    code = (HERE / fixture).read_text()
    orig, new = _load(code, "fa_orig"), _load(_mended(code), "fa_new")
    torch.manual_seed(0)
    a, b = orig.Model().eval(), new.Model().eval()
    b.load_state_dict(a.state_dict())
    args = orig.get_inputs()
    for dt in CALLS:
        ids, x = args[0], args[1].to(dt)
        for m in (a, b):
            for sub in m.modules():  # the leaf PosEnc directly too, in the call's dtype
                if type(sub).__name__ == "PosEnc":
                    sub(ids, x)
        ra, rb = observe(a, (ids, x), {}, grad=False), observe(b, (ids, x), {}, grad=False)
        compare(ra, rb, exact=True)
        _same_state(a, b)
        assert a.near.table.dtype == dt  # the conversion was stored, in both


def test_plain_local_rewrite_is_caught_by_the_buffer_comparison():
    code = (HERE / "shared_posenc.py").read_text()
    naive = _plain_local(code)
    assert naive != code
    orig, bad = _load(code, "fa_orig2"), _load(naive, "fa_bad")
    a, b = orig.Model().eval(), bad.Model().eval()
    b.load_state_dict(a.state_dict())
    args = orig.get_inputs()
    with pytest.raises(Mismatch, match="buffer `far.table`"):
        compare(observe(a, args, {}, grad=False), observe(b, args, {}, grad=False), exact=True)


def test_write_kept_proved_for_the_rewrite_and_refuted_for_the_plain_local():
    code = (HERE / "shared_posenc.py").read_text()
    line = example_line(code)
    res = RULE.rewrite(cst.parse_module(code), line)
    ob = next(o for o in res.obligations if o["kind"] == "attribute-write-kept")
    good = discharge([ob], facts=None, code=res.code, before=code)[0]
    assert good["result"] == "proved" and good["status"] == "unsat" and good["smtlib"]
    # the trap: no store (and nothing after it reads the attribute, so the rest is unchanged)
    before = code.replace("        return x + self.table[ids, :]\n", "        return x\n")
    naive = before.replace("        self.table = self.table.to(", "        table = self.table.to(")
    bad = discharge([{**ob, "local": "table"}], facts=None, code=naive, before=before)[0]
    assert bad["result"] == "refuted" and bad["status"] == "sat"
    # a guard the wrong way round stores the old object
    flipped = res.code.replace(" is not self.table", " is self.table")
    assert discharge([ob], facts=None, code=flipped, before=code)[0]["result"] == "refuted"


def _facts(**names):
    base = {"self.table": {"kind": "tensor", "dtype": "float32", "shape": [8, 4], "device": "cpu", "param": False},
            **{f"self.{m}": {"kind": "callable", "qualname": f"torch.nn.modules.module.Module.{m}"}
               for m in ("__setattr__", "__getattr__", "register_buffer")}}
    base.update(names)
    return {"names": base, "self": {}}


def test_access_plain_refutes_a_parameter_a_class_attribute_and_an_override():
    ob = {"kind": "attribute-access-plain", "attr": "self.table"}

    def run(facts):
        return access_plain(ob, Ctx(facts, {}))

    assert run(_facts()).result == "checked"
    assert run(_facts(**{"self.table": {"kind": "tensor", "dtype": "float32", "shape": [4], "device": "cpu",
                                        "param": True}})).result == "refuted"
    assert run(_facts(**{"self.__class__.table": {"kind": "other", "type": "property"}})).result == "refuted"
    assert run(_facts(**{"self.__setattr__": {"kind": "callable", "qualname": "m.Model.__setattr__"}})).result == \
        "refuted"
    assert run({"names": {}, "self": {}}).result == "unknown"


PARAMETER = '''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.ones(4))

    def forward(self, x):
        self.table = self.table.to(x.dtype)
        return x * self.table
'''

PROPERTY_IN_BASE = '''import torch
from torch import nn


class Base(nn.Module):
    @property
    def table(self):
        return self._t


class Model(Base):
    def __init__(self):
        super().__init__()
        self._t = torch.ones(4)

    def forward(self, x):
        self.table = self.table.to(x.dtype)
        return x * self.table
'''


@pytest.mark.parametrize("source, reason", [(PARAMETER, "Parameter"), (PROPERTY_IN_BASE, "binds `table`")])
def test_declines(source, reason):
    res = RULE.rewrite(cst.parse_module(source), example_line(source))
    assert isinstance(res, Decline) and reason in res.reason


def test_fix_end_to_end_drops_the_graph_count_and_keeps_the_store():
    res = fix(str(HERE / "shared_posenc.py"), unsafe_fixes=True, max_examples=5)
    assert [r["rule"] for r in res.rewrites] == ["forward-attribute"]
    assert res.before.graph_count == 3 and res.after.graph_count == 1
    mended = next(iter(res.mended.values())) if isinstance(res.mended, dict) else res.mended
    assert "if table is not self.table:\n            self.table = table" in mended
    kinds = {o["kind"]: o["result"] for o in res.rewrites[0]["obligations"]}
    assert kinds == {"attribute-write-kept": "proved", "attribute-access-plain": "checked",
                     "attribute-screen": "checked"}


def test_access_plain_refutes_a_buffer_whose_store_would_flip_its_persistence():
    """Adversarial review: registered non-persistent, but an nn.Buffer with persistent=True."""
    ob = {"kind": "attribute-access-plain", "attr": "self.table"}
    flagged = {"self.table._is_buffer": {"kind": "num", "cat": "bool", "value": True},
               "self.table.persistent": {"kind": "num", "cat": "bool", "value": True}}
    nonpers = {"self._non_persistent_buffers_set": {"kind": "strset", "value": ["table"]}}
    got = access_plain(ob, Ctx(_facts(**flagged, **nonpers), {}))
    assert got.result == "refuted" and "persistence" in got.counterexample
    agree = {"self._non_persistent_buffers_set": {"kind": "strset", "value": []}}
    assert access_plain(ob, Ctx(_facts(**flagged, **agree), {})).result == "checked"
    assert access_plain(ob, Ctx(_facts(**flagged), {})).result == "unknown"


def test_persistence_flip_fixture_is_declined_end_to_end():
    res = fix(str(HERE / "persistence_flip.py"), unsafe_fixes=True, max_examples=3)
    assert not res.rewrites
    assert any(d.rule == "forward-attribute" and "persistence" in d.reason for d in res.declined), res.declined


def test_a_comment_inside_a_multi_line_conversion_is_dropped_not_a_crash():
    """helper-48: the conversion's lines were joined, and the comment swallowed the rest
    (ParserSyntaxError, reported as the rule failing on the site)."""
    code = ('import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n'
            '        self.pos_encoding = self.pos_encoding.to(\n            device=x.device,  # follow the input\n'
            '            dtype=x.dtype,\n        )\n        return x + self.pos_encoding\n')
    res = RULE.rewrite(cst.parse_module(code), 7)
    assert isinstance(res, RewriteResult), res
    assert "pos_encoding = self.pos_encoding.to(device=x.device, dtype=x.dtype)  # mend: forward-attribute" in res.code
    compile(res.code, "<mended>", "exec")


def test_an_annotated_write_is_classified_and_fixed(tmp_path):
    """helper-48: `self.X: T = self.X.to(...)` was reported "no rule handles this kind"; in a
    function body the annotation of an attribute is never evaluated, so it is the same store."""
    path = tmp_path / "annotated.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.pos = nn.Buffer(torch.randn(16, 4), persistent=False)\n\n"
                    "    def forward(self, ids, x):\n"
                    "        self.pos: torch.Tensor = self.pos.to(device=x.device, dtype=x.dtype)\n"
                    "        return x + self.pos[ids, :]\n\n\n"
                    "def get_inputs():\n    return (torch.arange(3), torch.randn(3, 4))\n")
    res = fix(str(path), unsafe_fixes=True, max_examples=3)
    assert [r.rule for r in res.rewrites] == ["forward-attribute"], res.declined
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
