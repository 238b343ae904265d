"""mask-update: obligations on adversarial facts, the category, and fixtures through
mend.fix.fix (``tests/fixtures/mask_update/``).

The examples' generated tests (exact text, declines with their reason, the matcher) are in
``tests/test_rules.py``; here, what the verifier must refute (a dtype mismatch the original
raises on, a row mask, a non-elementwise expression) and that the fixes change nothing
observable (the aliasing trap included), end to end.
"""
from __future__ import annotations

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.locate import locate
from mend.rules import RULES, RewriteResult
from mend.rules import mask_update as mu
from mend.rules.mask_update.examples import example_line
from mend.rules.mask_update.rewrite import no_overlap
from mend.targets import load_file_module
from mend.taxonomy import categorize
from tests.conftest import FIXTURES
from verifier import obligations as O

REQUIRED = RULES[mu.NAME].required_kinds
HERE = FIXTURES / "mask_update"


def _t(dtype="float32", shape=(4, 5)):
    return {"kind": "tensor", "dtype": dtype, "shape": list(shape), "device": "cpu", "param": False}


def _discharge(source: str, names: dict):
    res = mu.rewrite(cst.parse_module(source), example_line(source))
    assert isinstance(res, RewriteResult), res
    return res, O.discharge(res.obligations, facts={"names": names, "self": {}}, code=res.code, before=source)


def _by_kind(results):
    out = {}
    for r in results:
        out.setdefault(r["kind"], []).append(r)
    return out


_SCALE = "import torch\n\n\ndef f(x, m):\n    x[m] = x[m] * 2.0 + 1.0\n    return x\n"


def test_float_update_is_established_everywhere():
    _, results = _discharge(_SCALE, {"x": _t(), "m": _t("bool")})
    assert all(r["result"] in ("proved", "checked") for r in results), [(r["kind"], r["result"]) for r in results]
    kinds = _by_kind(results)
    assert kinds["mask-update-elementwise"][0]["result"] == "checked"
    assert kinds["mask-update-finite-gradient"][0]["result"] == "proved"
    for level in ("fast", "standard", "strict"):
        assert O.verdict(results, level, required=REQUIRED)[0]


@pytest.mark.parametrize("source,names,kind,words", [
    # int64 x, float f: the original's index_put_ raises; where would promote and copy_ cast back
    ("import torch\n\n\ndef f(x, m):\n    x[m] = x[m] * 0.5\n    return x\n",
     {"x": _t("int64"), "m": _t("bool")}, "mask-update-select", "index_put_ raises"),
    # float16 x times a float32 operand read through the mask: float32 f, index_put_ raises
    ("import torch\n\n\ndef f(x, y, m):\n    x[m] = x[m] * y[m]\n    return x\n",
     {"x": _t("float16"), "y": _t("float32"), "m": _t("bool")}, "mask-update-select", "float32"),
    # an int `*=` by a float raises ("can't be cast") in the original
    ("import torch\n\n\ndef f(x, m):\n    x[m] *= 2.5\n    return x\n",
     {"x": _t("int64"), "m": _t("bool")}, "mask-update-select", "int64"),
    # a row mask of x.shape[:1]: indexing selects rows, torch.where broadcasts from the right
    ("import torch\n\n\ndef f(x, m):\n    x[m] = x[m] * 2.0\n    return x\n",
     {"x": _t(shape=(4, 4)), "m": _t("bool", (4,))}, "same-shape", "m.shape[0] = 4"),
    # a long index tensor selects positions, not a mask
    ("import torch\n\n\ndef f(x, m):\n    x[m] = x[m] * 2.0\n    return x\n",
     {"x": _t(), "m": _t("int64")}, "bool-predicate", ""),
    # another operand of a different shape would broadcast differently
    ("import torch\n\n\ndef f(x, y, m):\n    x[m] = x[m] + y[m]\n    return x\n",
     {"x": _t(shape=(4, 5)), "y": _t(shape=(4, 5, 2)), "m": _t("bool")}, "same-shape", ""),
], ids=["int-float", "fp16-fp32", "int-augmul-float", "row-mask", "long-index", "operand-shape"])
def test_refuted(source, names, kind, words):
    _, results = _discharge(source, names)
    bad = [r for r in results if r["result"] == "refuted"]
    assert kind in [r["kind"] for r in bad], [(r["kind"], r["result"], r.get("reason")) for r in results]
    assert words in (next(r for r in bad if r["kind"] == kind)["counterexample"] or "")
    for level in ("fast", "standard", "strict"):   # required at every level
        ok, reason, _ = O.verdict(results, level, required=REQUIRED)
        assert not ok and kind in reason


def test_gradient_through_a_product_needs_finite_leaves():
    # d/dy (x * y) = 0 * x off the mask: NaN when x is inf, so proved only for finite leaves
    _, results = _discharge("import torch\n\n\ndef f(x, y, m):\n    x[m] = x[m] * y[m]\n    return x\n",
                            {"x": _t(), "y": _t(), "m": _t("bool")})
    (g,) = _by_kind(results)["mask-update-finite-gradient"]
    assert g["result"] == "proved" and g["tier"] == "finite-leaves"


def test_int_update_has_no_gradient_and_is_accepted():
    _, results = _discharge("import torch\n\n\ndef f(ids, m):\n    ids[m] = ids[m] * 2 + 1\n    return ids\n",
                            {"ids": _t("int64"), "m": _t("bool")})
    assert all(r["result"] in ("proved", "checked") for r in results), [(r["kind"], r["result"]) for r in results]


@pytest.mark.parametrize("expr,words", [("torch.sqrt(x)", "not an exactly rounded"), ("x // y", "FloorDiv"),
                                        ("x + bias", "`bias`"), ("torch.clamp(x, min=lo)", "not a number")])
def test_elementwise_screen_can_fail(expr, words):
    (r,) = O.discharge([{"kind": "mask-update-elementwise", "expr": expr, "operands": ["x", "y"], "torch": "torch"}],
                       facts={"names": {"x": _t(), "y": _t()}, "self": {}})
    assert r["result"] == "refuted" and words in r["counterexample"]


def test_category_of_mask_updates_only(tmp_path):
    path = tmp_path / "cat.py"
    path.write_text("import torch\n\n\ndef f(x, m):\n    x[m] = torch.tanh(x[m])\n    x[m] *= 2\n"
                    "    i = torch.nonzero(m)\n    x[m] = y\n    return x\n")
    got = [categorize("Dynamic shape operator", locate(str(path), line)) for line in (5, 6, 7, 8)]
    assert got == ["mask-update", "mask-update", "dynamic-shape-op", "dynamic-shape-op"]
    assert categorize("Data-dependent branching", locate(str(path), 5)) == "data-dependent-branch"


# --- fixtures through mend.fix.fix -------------------------------------------------------------

def _same_behaviour(name: str, mended_src: str, tmp_path, train: bool):
    mended = tmp_path / name
    mended.write_text(mended_src)
    a_mod, b_mod = load_file_module(HERE / name, f"_mu_a_{name[:5]}"), load_file_module(mended, f"_mu_b_{name[:5]}")
    torch.manual_seed(0)
    a, b = a_mod.Model(), b_mod.Model()
    b.load_state_dict(a.state_dict())
    a.train(train), b.train(train)
    args = a_mod.get_inputs()
    ra, rb = a(*args), b(*args)
    assert torch.equal(ra, rb)
    ra.sum().backward(), rb.sum().backward()
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p.grad, q.grad), n
    torch._dynamo.reset()
    with torch.no_grad():
        explain = torch._dynamo.explain(b)(*args)
        assert explain.graph_count == 1
        assert torch.equal(a(*args), torch.compile(b, backend="eager")(*args))


@pytest.mark.parametrize("name,before,expected,label", [
    ("scale.py", 2, "h.copy_(torch.where(_mend_mask, h * 2, h))  # mend: mask-update", "safe"),
    # aliasing trap: the update writes through a view; copy_ keeps the write visible in `base`
    ("view_alias.py", 4, "v.copy_(torch.where(m, v * 3.0 - 1.0, v))", "unsafe"),
    # two inputs: drawn shapes that disagree raise in eager, and Dynamo's TorchRuntimeError under compile
    ("two_inputs.py", 2, "adv.copy_(torch.where(_mend_mask, adv * 0.25, adv))", "safe"),
    # a Python-number attribute: its type is an observation of the run (mask-update-scalar)
    ("scale_attr.py", 2, "h.copy_(torch.where(m, h * self.scale, h))", "unsafe"),
])
def test_fixture_fixed(name, before, expected, label, tmp_path):
    res = fix(str(HERE / name), unsafe_fixes=True, verify="standard", max_examples=8)
    assert res.before.graph_count == before and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == mu.NAME and not res.declined and expected in res.mended
    assert rw["safety"]["label"] == label, rw["safety"]
    _same_behaviour(name, res.mended, tmp_path, train=True)


def test_fixture_dtype_trap_is_declined_by_fix():
    res = fix(str(HERE / "int_float.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert d["rule"] == mu.NAME and "mask-update-select" in d["reason"] and "index_put_ raises" in d["reason"]


def test_a_tensor_attribute_is_refuted_as_a_scalar_operand():
    res = fix(str(HERE / "scale_tensor_attr.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert "mask-update-scalar refuted" in d["reason"] and "0-d float32 tensor" in d["reason"]


def _rows(source: str, names: dict):
    res = mu.rows(cst.parse_module(source), example_line(source))
    assert isinstance(res, RewriteResult), res
    return res, O.discharge(res.obligations, facts={"names": names, "self": {}}, code=res.code, before=source)


@pytest.mark.parametrize("mask_shape, x_shape, result", [
    ((3,), (3, 4), "proved"),          # rows of a matrix
    ((3, 4), (3, 4, 5), "proved"),     # (B, T) padding mask on (B, T, D)
    ((3, 4), (3, 4), "proved"),        # a mask of x's shape: the reshape is the identity
    ((4,), (3, 4), "refuted"),         # x[m] raises IndexError: the mask's size is not x's first
    ((3, 4, 5), (3, 4), "refuted"),    # a mask of higher rank than x
])
def test_mask_leading_shape(mask_shape, x_shape, result):
    _, results = _rows(_SCALE, {"x": _t(shape=x_shape), "m": _t("bool", mask_shape)})
    (r,) = _by_kind(results)["mask-leading-shape"]
    assert r["result"] == result, r


def test_the_row_form_is_offered_for_a_named_mask_only():
    res = mu.rows(cst.parse_module(_SCALE), example_line(_SCALE))
    assert "x.copy_(torch.where(m.reshape(m.shape + (1,) * (x.dim() - m.dim())), x * 2.0 + 1.0, x))" in res.code
    assert [o for o in res.obligations if o["kind"] == "same-shape"] == []
    source = "import torch\n\n\ndef f(x):\n    x[x > 0] = x[x > 0] * 2.0\n    return x\n"
    assert mu.rows(cst.parse_module(source), example_line(source)) is None   # an expression mask: not re-read


def test_a_row_mask_is_fixed_by_the_second_form():
    """Case 336's kind: a (B, T) mask on (B, T, D). The rule's own form is declined
    (same-shape refuted: torch.where would broadcast the mask from the right); the row-mask
    form is verified instead, on the trap input with B == T == D too. The mask's sizes equal
    x's leading sizes only on the example run: an unsafe fix."""
    res = fix(str(HERE / "row_mask.py"), max_examples=5)
    (d,) = res.declined
    assert d["safety"] == "unsafe" and "unsafe fix" in d["reason"] and "mask-leading-shape" in d["reason"]
    res = fix(str(HERE / "row_mask.py"), max_examples=5, unsafe_fixes=True)
    (rw,) = res.rewrites
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    kinds = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert kinds["mask-leading-shape"] == "proved" and "same-shape" not in kinds
    assert rw["safety"]["label"] == "unsafe" and "equal-sizes" in " ".join(rw["safety"]["reasons"])
    assert "keep.reshape(keep.shape + (1,) * (h.dim() - keep.dim()))" in res.mended


def test_a_declined_second_form_adds_its_reason(tmp_path):
    """A row mask with a second operand of another shape (`y[keep]` of `(n, 1)` broadcasts
    against `h[keep]`'s `(n, D)`): both forms are declined, and the record says why each was."""
    source = (HERE / "row_mask.py").read_text()
    source = source.replace("h[keep] * 2.0 + 1.0", "h[keep] + y[keep]").replace(
        "h = self.proj(x)", "h = self.proj(x)\n        y = h.sum(-1, keepdim=True)")
    path = tmp_path / "row_mask_operand.py"
    path.write_text(source)
    res = fix(str(path), max_examples=3, unsafe_fixes=True)
    (d,) = res.declined
    assert res.rewrites == [] and "its second form" in d["reason"]
    assert d["reason"].count("same-shape") >= 2, d["reason"]


def test_operands_a_backward_saves_are_read_through_clone(tmp_path):
    """helper-37: the mended copy_ must not overwrite a tensor f's backward saved (the model is
    trained after mend ran on it frozen)."""
    from mend.fix import fix
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES

    name = "mask_update_frozen_saved.py"
    res = fix(str(FIXTURES / name), unsafe_fixes=True, max_examples=5)
    (rw,) = res.rewrites
    assert "h.clone() * h.clone(), h))" in res.mended, res.mended   # the row-mask form
    mended = tmp_path / name
    mended.write_text(res.mended)
    a_mod, b_mod = load_file_module(FIXTURES / name, "_mu_fr_o"), load_file_module(mended, "_mu_fr_n")
    grads = []
    for mod in (a_mod, b_mod):
        torch.manual_seed(0)
        model = mod.Model()
        model.emb.weight.requires_grad_(True)   # unfrozen after mend ran
        out = model(*a_mod.get_inputs())
        out.sum().backward()
        grads.append((out.detach(), model.emb.weight.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    # the guard's last clause sends an update that reads a tensor requiring grad (grad enabled) to
    # the original statement (helper-102, helper-103): the clones matter only where nothing does


def test_an_update_reading_a_tensor_that_requires_grad_keeps_the_original():
    """helper-103's a7: a buffer updated from `h[m]`, `h` requiring grad: under aot_eager (and
    inductor) backward raised "modified by an inplace operation" after the copy_; the guard now
    checks every tensor the update reads, so the original statement runs there, with its gradients."""
    src = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
           "        super().__init__()\n        self.register_buffer('buf', torch.randn(4, 8))\n"
           "        self.lin = nn.Linear(8, 8)\n\n    def forward(self, x):\n        h = self.lin(x)\n"
           "        b = self.buf\n        m = b > 0\n        b[m] = b[m] + h[m]\n        return h + b\n")
    code = mu.rewrite(cst.parse_module(src), example_line(src)).code
    assert "not (torch.is_grad_enabled() and (b.requires_grad or h.requires_grad))" in code, code
    grads = []
    for text in (src, code):
        space = {}
        exec(compile(text, "<mask-update>", "exec"), space)
        torch.manual_seed(0)
        model = space["M"]()
        torch._dynamo.reset()
        torch.compile(model, backend="aot_eager")(torch.randn(4, 8)).sum().backward()
        grads.append(model.lin.weight.grad)
    assert torch.equal(grads[0], grads[1])
    torch._dynamo.reset()


# --- the runtime guard (helper-51's counterexamples to the unguarded form) --------------------

def test_guarded_form_is_read_back_and_tampering_refuted():
    """``"mask-update-guarded"``: checked on the rule's output, refuted when a clause of the
    guard is dropped or the fallback is not the original statement."""
    src = ("import torch\n\n\ndef f(x, m, y):\n    x[m] = x[m] * 2.0 + y[m]\n    return x\n")
    res, results = _discharge(src, {"x": _t(), "m": _t("bool"), "y": _t()})
    guarded = _by_kind(results)["mask-update-guarded"][0]
    assert guarded["result"] == "checked", guarded
    ob = next(o for o in res.obligations if o["kind"] == "mask-update-guarded")
    tampered = {
        "stride": res.code.replace(" and all(_mend_s > 0 for _mend_s in x.stride())", ""),
        "overlap": res.code.replace(" and " + no_overlap("x"), ""),
        "dtype of y": res.code.replace(" and y.dtype == x.dtype", ""),
        "mask shape": res.code.replace(" and m.shape == x.shape", ""),
        "floating": res.code.replace(" and x.is_floating_point()", ""),
        "fallback": res.code.replace("        x[m] = x[m] * 2.0 + y[m]", "        pass"),
    }
    for what, code in tampered.items():
        assert code != res.code, what
        out = O.discharge([ob], facts={"names": {}, "self": {}}, code=code, before=src)[0]
        assert out["result"] == "refuted", (what, out)


_HALVE = "import torch\n\n\ndef f(h):\n    h[h < 0] = h[h < 0] * 0.5\n    return h\n"
_ROWS = "import torch\n\n\ndef f(h, keep):\n    h[keep] = h[keep] * 0.5\n    return h\n"


def _load_pair(tmp_path, src: str):
    import importlib.util

    res = mu.rewrite(cst.parse_module(src), example_line(src))
    mods = []
    for tag, code in (("orig", src), ("mended", res.code)):
        path = tmp_path / f"mu_{tag}_{abs(hash(code))}.py"
        path.write_text(code)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods


def _outcome(fn, *args):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*args)
            return ("ok", out.dtype, out.tolist(), [a.tolist() for a in args if isinstance(a, torch.Tensor)])
        except Exception as exc:   # noqa: BLE001 - the exception is what is compared
            return (type(exc).__name__, str(exc).split("\n")[0])


@pytest.mark.parametrize("make", [
    lambda: (torch.tensor([1.0, -2.0, 3.0, -4.0]).expand(3, 4),),     # expanded: copy_ would refuse it
    lambda: (torch.tensor([[3, -3, 5, -7]]),),                          # int64: index_put_ raises
    lambda: (torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).half(),),
    lambda: (torch.randn(3, 4, device="meta"),),   # helper-85 F5: the boolean index raises there
    # helper-88 F4: a nested tensor has no strides (the guard raised RuntimeError, the original NotImplementedError)
    lambda: (torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(1, 3)]),),
], ids=["expanded", "int64", "float16", "meta", "nested"])
def test_guarded_form_behaves_as_the_original(tmp_path, make):
    orig, mended = _load_pair(tmp_path, _HALVE)
    assert _outcome(orig.f, *make()) == _outcome(mended.f, *make())


def test_row_mask_of_another_shape_runs_the_original(tmp_path):
    """helper-51 F5: a ``(4,)`` mask for a ``(4, 4)`` ``h`` selects rows in the original; the
    unguarded ``where`` broadcast it over columns."""
    orig, mended = _load_pair(tmp_path, _ROWS)
    make = lambda: (torch.arange(16.0).reshape(4, 4), torch.tensor([True, False, False, False]))  # noqa: E731
    assert _outcome(orig.f, *make()) == _outcome(mended.f, *make())
    make_u8 = lambda: (torch.arange(4.0), torch.tensor([1, 0, 0, 1], dtype=torch.uint8))  # noqa: E731
    assert _outcome(orig.f, *make_u8()) == _outcome(mended.f, *make_u8())


def test_complex_product_runs_the_original(tmp_path):
    """helper-51 F4: complex ``*`` is not correctly rounded, so ``f(z)[m]`` and ``f(z[m])``
    differed by an ulp; the guard keeps the original for complex tensors."""
    src = "import torch\n\n\ndef f(z, m):\n    z[m] = z[m] * z[m]\n    return z\n"
    orig, mended = _load_pair(tmp_path, src)
    g = torch.Generator().manual_seed(1)
    z = torch.randn(4, 64, dtype=torch.complex64, generator=g)
    m = z.abs() > 1.0
    assert _outcome(orig.f, z.clone(), m) == _outcome(mended.f, z.clone(), m)


@pytest.mark.parametrize("src, make", [
    # helper-54: a mask written as an expression, of another shape: rows in the original
    ("import torch\n\n\ndef f(x, score):\n    x[score > 0] = x[score > 0] * 2.0\n    return x\n",
     lambda: (torch.arange(16.0).reshape(4, 4) - 5, torch.tensor([1.0, -1.0, 1.0, -1.0]))),
    ("import torch\n\n\ndef f(x, score):\n    x[score > 0] = x[score > 0] * 2.0\n    return x\n",
     lambda: (torch.arange(16.0).reshape(4, 4) - 5, torch.ones(4, 1))),
    ("import torch\n\n\ndef f(x, keep):\n    x[~keep] = x[~keep] * 2.0\n    return x\n",
     lambda: (torch.arange(16.0).reshape(4, 4), torch.tensor([True, False, True, False]))),
    ("import torch\n\n\ndef f(x, keep):\n    x[~keep] = x[~keep] * 2.0\n    return x\n",
     lambda: (torch.arange(16.0).reshape(4, 4), torch.tensor([0, 2]))),
    # helper-54: another operand read through the mask, of another shape (the original's IndexError)
    ("import torch\n\n\ndef f(x, y, m):\n    x[m] = x[m] + y[m]\n    return x\n",
     lambda: (torch.arange(16.0).reshape(4, 4), torch.tensor([100.0, 200.0, 300.0, 400.0]),
              torch.arange(16).reshape(4, 4) % 3 == 0)),
    ("import torch\n\n\ndef f(x, y, m):\n    x[m] = x[m] + y[m]\n    return x\n",
     lambda: (torch.arange(16.0).reshape(4, 4), torch.tensor(100.0), torch.arange(16).reshape(4, 4) % 3 == 0)),
], ids=["expr-mask-rows", "expr-mask-4x1", "inverted-rows", "inverted-long", "operand-row", "operand-0d"])
def test_masks_and_operands_of_other_shapes_run_the_original(tmp_path, src, make):
    orig, mended = _load_pair(tmp_path, src)
    assert _outcome(orig.f, *make()) == _outcome(mended.f, *make())


def test_a_sign_repair_is_fixed_and_selects_the_same_values(tmp_path):
    """helper-64's c93: `sign` was not an operator the rule knew. It is exact and total (NaN gives
    0 and -0.0 gives +0.0 on every kernel path, measured), with a zero gradient."""
    res = fix(str(HERE / "sign_overflow.py"), unsafe_fixes=True, verify="standard", max_examples=8)
    (rw,) = res.rewrites
    assert rw["rule"] == mu.NAME and "torch.where(inf, h.sign() * 65504.0, h)" in res.mended
    assert res.after.graph_break_count == 0 < res.before.graph_break_count
    mended = tmp_path / "sign_overflow.py"
    mended.write_text(res.mended)
    a_mod, b_mod = load_file_module(HERE / "sign_overflow.py", "_mu_sa"), load_file_module(mended, "_mu_sb")
    a, b = a_mod.Model(), b_mod.Model()
    b.load_state_dict(a.state_dict())
    (x,) = a_mod.get_inputs()
    ra, rb = a(x), b(x)
    assert torch.equal(ra, rb) and (ra.abs() == 2 * 65504.0).any()
    ra.sum().backward(), rb.sum().backward()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.grad.isnan(), q.grad.isnan()) and torch.equal(p.grad.nan_to_num(), q.grad.nan_to_num())


def test_an_overlapping_view_keeps_the_original_update():
    """helper-66: in a sliding window (`base.unfold(0, 3, 1)`, strides (1, 1), no zero stride) the
    in-place `where` wrote the unselected elements back over memory the selected ones share. The
    guard now asks that no two elements share memory; such a view runs the original statement."""
    from mend.rules.mask_update.rewrite import no_overlap

    src = "import torch\n\n\ndef f(x, m):\n    x[m] = x[m].sign() * 2.0\n    return x\n"
    res = mu.rewrite(cst.parse_module(src), 5)
    assert no_overlap("x") in res.code
    mended, original = {}, {}
    exec(compile(res.code, "<mended>", "exec"), mended)
    exec(compile(src, "<original>", "exec"), original)
    m = torch.tensor([[True, False, True]] * 3 + [[False, True, False]] * 4)
    bases = []
    for ns in (original, mended):
        base = torch.tensor([3.0, -4, 3, -4, 5, 6, 7, 8, 9])
        ns["f"](base.unfold(0, 3, 1), m)
        bases.append(base)
    assert torch.equal(bases[0], bases[1]), bases
    for x, expected in [(torch.randn(4, 3), True), (torch.randn(3, 4).t(), True), (torch.randn(5, 6)[:, :3], True),
                        (torch.randn(9).unfold(0, 3, 1), False), (torch.randn(2, 1, 3), True), (torch.tensor(1.0), True),
                        (torch.randn(6).as_strided((2, 3), (2, 1)), False)]:
        assert eval(no_overlap("x"), {"x": x}) is expected, (x.shape, x.stride())


def test_the_guard_holds_under_dynamic_shapes_without_a_break():
    """The guard once read ``min(x.stride(), default=1)`` and ``sorted(...)`` of the strides:
    with dynamic shapes (Dynamo's automatic dynamic after a second size) Dynamo broke the graph
    there ("sort with non-constant keys"), so the mended update ran eagerly from the second
    size on. Pairwise comparisons become size guards: every size compiles, with the same
    values as the original, and a sliding window still takes the original statement."""
    from torch._dynamo.testing import CompileCounter

    src = "import torch\n\n\ndef f(x, m):\n    x[m] = x[m] * 2.0\n    return x\n"
    res = mu.rewrite(cst.parse_module(src), example_line(src))
    scope: dict = {}
    exec(compile(res.code, "mask_update_dynamic.py", "exec"), scope)
    for dynamic in (None, True):
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(scope["f"], dynamic=dynamic, backend=counter, fullgraph=True)
        for n in (4, 5, 7):
            x = torch.randn(n, 3)
            ref = x.clone()
            ref[x > 0] = ref[x > 0] * 2.0
            assert torch.equal(compiled(x.clone(), x > 0), ref)
        assert counter.frame_count >= 1 and counter.op_count >= 3
    window = torch.arange(9.0).unfold(0, 3, 1)
    guard = no_overlap("w")
    assert eval(guard, {"w": window}) is False and eval(guard, {"w": torch.randn(3, 4).t()}) is True



def test_an_input_that_requires_grad_keeps_the_original_under_inductor():
    """helper-102: with the in-place where, inductor's backward raised ("modified by an inplace
    operation") for an activation `x` that requires grad, where the original's backward ran; the
    guard now sends such an `x` to the original statement while autograd records."""
    src = ("import torch\n\n\ndef f(x):\n    big = x.abs() > 2.0\n    x[big] = torch.sign(x[big]) * (2.0 + 0.5 * "
           "(x[big].abs() - 2.0))\n    return x * 1.0\n")
    code = mu.rewrite(cst.parse_module(src), example_line(src)).code
    assert code.count("not (torch.is_grad_enabled() and x.requires_grad)") == 1, code
    grads = []
    for text in (src, code):
        space = {}
        exec(compile(text, "<mask-update>", "exec"), space)
        torch._dynamo.reset()
        leaf = (torch.linspace(-4, 4, 12)).requires_grad_(True)
        torch.compile(space["f"], backend="inductor")(leaf * 1.0).sum().backward()
        grads.append(leaf.grad)
    assert torch.equal(grads[0], grads[1])
    torch._dynamo.reset()
