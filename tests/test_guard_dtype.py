"""helper-85's F1 and F2: predicated-validation's guarded forms keep the original check for any
tensor its in-graph form cannot compute on. F1: ``torch.logical_not`` has no CPU kernel for
uint16/32/64 (nor float8, complex32), where ``bool(C)`` works: the negated form's guard now
names the dtypes. F2: the ``.item()`` forms had no guard at all (a two-element tensor passed
under inductor, a Python int and uint16 raised other errors): each tensor read through
``.item()`` is bound once and guarded like the condition."""
from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from mend import validation_runtime as vr
from mend.fix import fix
from tests.conftest import FIXTURES
from verifier.encoders.assert_async import guarded_check, guarded_item_check
from verifier.encoders.base import Ctx

DIR = FIXTURES / "guard_dtype"


def _load(code: str, name: str, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _outcome(fn, *args):
    try:
        out = fn(*args)
        return ("ok", out.detach().clone()) if isinstance(out, torch.Tensor) else ("ok", out)
    except Exception as exc:  # behaviour under comparison
        return ("raised", type(exc).__name__, str(exc).split("\n")[0])


def _same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    return torch.equal(a[1], b[1]) if a[0] == "ok" else a[1:] == b[1:]


@pytest.fixture(scope="module")
def mended(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("guard_dtype")
    out = {}
    for name in ("u16flag", "itemle", "isfinite"):
        res = fix(str(DIR / f"{name}.py"), unsafe_fixes=True, max_examples=3)
        assert len(res.rewrites) == 1, [d.reason for d in res.declined]
        out[name] = (_load((DIR / f"{name}.py").read_text(), f"gd_{name}_o", tmp),
                     _load(res.mended, f"gd_{name}_m", tmp), res)
    return out


CASES = {
    "u16flag": [(torch.randn(2, 4), torch.tensor([0], dtype=dt)) for dt in (torch.uint16, torch.uint32, torch.uint64)]
    + [(torch.randn(2, 4), torch.tensor([3], dtype=torch.uint16)), (torch.randn(2, 4), torch.tensor([2]))],
    "itemle": [(torch.randn(2, 6), torch.tensor([4, 9])), (torch.randn(2, 6), torch.tensor([4, 5])),
               (torch.randn(2, 6), 4), (torch.randn(2, 6), torch.tensor([4], dtype=torch.uint16)),
               (torch.randn(2, 6), torch.tensor([9])), (torch.randn(2, 6), torch.tensor([4]))],
    "isfinite": [(torch.randn(2, 3, 4), torch.randn(2, 3, 4)), (torch.randn(3, 4), torch.full((3, 4), float("nan"))),
                 (torch.randn(3, 4), torch.randn(3, 4))],
}


@pytest.mark.parametrize("backend", [None, "eager", "inductor"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_inputs_the_in_graph_form_cannot_take_run_the_original_check(mended, name, backend):
    orig_mod, mended_mod, _ = mended[name]
    torch.manual_seed(0)
    a, b = orig_mod.Model().eval(), mended_mod.Model().eval()
    b.load_state_dict(a.state_dict())
    vr.install(b)
    torch._dynamo.reset()
    fn = b if backend is None else torch.compile(b, backend=backend)
    for args in CASES[name]:
        want, got = _outcome(a, *args), _outcome(fn, *args)
        assert _same(want, got), (args, want, got)


def test_the_verifier_refutes_a_guard_without_its_dtypes_or_a_changed_fallback(mended):
    for name, check, kind in (("u16flag", guarded_check, "guarded-check"),
                              ("itemle", guarded_item_check, "guarded-item-check")):
        res = mended[name][2]
        (rw,) = res.rewrites
        ob = next(o for o in rw["obligations"] if o["kind"] == kind)
        assert ob["result"] == "checked", ob
        code = res.mended
        assert check(ob, Ctx({}, {}, code)).result == "checked"
        local = "_mend_cond" if name == "u16flag" else "_mend_item"
        weak = code.replace(f" and {local}.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, "
                            "torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64)", "")
        assert weak != code and check(ob, Ctx({}, {}, weak)).result == "refuted"
    res = mended["itemle"][2]
    ob = next(o for o in res.rewrites[0]["obligations"] if o["kind"] == "guarded-item-check")
    for old, new in (("assert _mend_item.item() <= x.size(1)", "assert _mend_item.item() < x.size(1)"),
                     ("_mend_item = keep\n", "_mend_item = keep + 0\n")):
        tampered = res.mended.replace(old, new)
        assert tampered != res.mended and guarded_item_check(ob, Ctx({}, {}, tampered)).result == "refuted", old
