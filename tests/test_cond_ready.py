"""The torch.cond form runs only for modules torch.cond can trace whole (helper-88 F1): a
feature-capture forward hook, pruning (a pre-hook that sets an attribute) or dynamic
quantization added after mend ran made the compiled no_grad call raise
UncapturedHigherOrderOpError where the original `if` ran. ``_mend_cond_ready`` sends those calls
to the kept `if`; without them the cond still compiles as one graph. ``cond-modules-unhooked``
re-reads the helper and the guard from the mended file."""
from __future__ import annotations

import libcst as cst
import pytest
import torch

from mend.rules.predicated_control_flow import rewrite
from mend.targets import load_file_module
from tests.conftest import FIXTURES
from verifier.encoders.base import Ctx
from verifier.encoders.cond import cond_modules_unhooked
from verifier.smt import Unsupported

SOURCE = (FIXTURES / "cond_submodule_branch.py").read_text()
READY_CALL = '_mend_cond_ready(self, getattr(self, "mlp_a", None), getattr(self, "mlp_b", None), h, dense=(x,))'


def _mended(tmp_path):
    line = next(i for i, t in enumerate(SOURCE.splitlines(), 1) if t.strip().startswith("if h.mean() > 0"))
    res = rewrite(cst.parse_module(SOURCE), line, form="cond")
    assert READY_CALL in res.code and "torch.cond(" in res.code
    path = tmp_path / "cond_ready.py"
    path.write_text(res.code)
    return res, load_file_module(FIXTURES / "cond_submodule_branch.py", "_cr_orig"), load_file_module(path, "_cr_new")


def _hook(model):
    seen = {}
    model.mlp_a.register_forward_hook(lambda mod, i, o: seen.__setitem__("a", o.detach()))
    return model


def _prune(model):
    import torch.nn.utils.prune as prune

    first = next(m for m in model.mlp_a.modules() if isinstance(m, torch.nn.Linear))
    prune.l1_unstructured(first, "weight", amount=0.3)
    return model


@pytest.mark.parametrize("change", [_hook, _prune, None], ids=["forward-hook", "prune", "unchanged"])
def test_a_module_changed_after_mend_runs_the_kept_if(tmp_path, change):
    res, orig, new = _mended(tmp_path)
    (x,) = orig.get_inputs()
    for args in [(x,), (-x,)]:
        outs = []
        for mod in (orig, new):
            torch.manual_seed(0)
            model = mod.Model().eval()
            model = change(model) if change else model
            torch._dynamo.reset()
            with torch.no_grad():
                outs.append(torch.compile(model, backend="aot_eager")(*args))
        assert torch.equal(outs[0], outs[1])
    if change is None:   # unchanged: the cond still compiles as one graph
        torch.manual_seed(0)
        model = new.Model().eval()
        torch._dynamo.reset()
        with torch.no_grad():
            explained = torch._dynamo.explain(model)(x)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    torch._dynamo.reset()


def test_the_screen_reads_the_helper_and_the_guard(tmp_path):
    res, _, _ = _mended(tmp_path)
    (ob,) = [o for o in res.obligations if o["kind"] == "cond-modules-unhooked"]
    assert ob["roots"] == ["self", 'getattr(self, "mlp_a", None)', 'getattr(self, "mlp_b", None)', "h", "dense=(x,)"]
    assert cond_modules_unhooked(ob, Ctx({}, {}, res.code, SOURCE)).result == "checked"
    weakened = res.code.replace('"parametrizations" in sub._modules or ', "", 1)
    assert cond_modules_unhooked(ob, Ctx({}, {}, weakened, SOURCE)).result == "refuted"
    unguarded = res.code.replace(" and " + READY_CALL, "", 1)
    assert cond_modules_unhooked(ob, Ctx({}, {}, unguarded, SOURCE)).result == "refuted"


def _hook_on(attr, index=None):
    def change(model):
        mod = getattr(model, attr) if index is None else getattr(model, attr)[index]
        mod.register_forward_hook(lambda m, i, o: None if o is None else o.sum())   # an effect-free hook still counts
        return model
    return change


@pytest.mark.parametrize("name, change, train", [
    ("cond_modulelist.py", _hook_on("blocks", 0), False),        # helper-90: `self.blocks[0](h)` had no guard at all
    ("cond_unregistered_module.py", _hook_on("teacher"), False),  # helper-90: kept in __dict__, not in self.modules()
    ("cond_spectral_norm.py", None, True),                        # helper-90: a parametrization updates buffers
], ids=["module-list", "unregistered", "spectral-norm-train"])
def test_modules_the_guard_must_reach(tmp_path, name, change, train):
    source = (FIXTURES / name).read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.strip().startswith("if h.mean() > 0"))
    res = rewrite(cst.parse_module(source), line, form="cond")
    assert "torch.cond(" in res.code and "_mend_cond_ready(self" in res.code, res
    (tmp_path / name).write_text(res.code)
    orig = load_file_module(FIXTURES / name, f"_crm_orig_{name[:-3]}")
    new = load_file_module(tmp_path / name, f"_crm_new_{name[:-3]}")
    (x,) = orig.get_inputs()
    for args in [(x,), (-x,)]:
        outs = []
        for mod in (orig, new):
            torch.manual_seed(0)
            model = mod.Model().train(train)
            model = change(model) if change else model
            torch._dynamo.reset()
            with torch.no_grad():
                outs.append(torch.compile(model, backend="eager")(*args))
        assert torch.equal(outs[0], outs[1])
    torch._dynamo.reset()


def _branch_types(guard_call: str | None, guard: list[str]):
    """cond-branch-types of `x * self.scale` vs `x` (float32 on the example), the mended file's
    cond guarded by ``guard_call`` (None: no guard)."""
    from verifier.encoders.cond import READY_TEXT, cond_branch_types

    test = "torch.compiler.is_compiling()" + (f" and {guard_call}" if guard_call else "")
    code = READY_TEXT.format(torch="torch") + (
        "\n\nclass Model:\n    def forward(self, x):\n"
        f"        if {test}:\n            return torch.cond(x.sum() > 0, lambda: x * self.scale, lambda: x.clone())\n")
    facts = {"names": {"x": {"kind": "tensor", "shape": [3, 4], "dtype": "float32"},
                       "self.scale": {"kind": "tensor", "shape": [4], "dtype": "float32", "param": True}}}
    ob = {"kind": "cond-branch-types", "target": "return", "lhs": "x * self.scale", "rhs": "x", "guard": guard,
          "torch": "torch"}
    return cond_branch_types(ob, Ctx(facts, {}, code, ""))


def test_branch_dtypes_rest_on_the_guard_that_checks_them():
    # the floating tensors the guard checks share one dtype: proved for every such dtype
    roots = ['getattr(self, "scale", None)', "dense=(x,)"]
    assert _branch_types(f"_mend_cond_ready({', '.join(roots)})", roots).result == "proved"
    # without the guard in the file, or with a guard that does not check self.scale, a float64
    # parameter beside a float32 input gives two dtypes: refuted, never proved at the example's
    # dtypes only (helper-94 m08)
    for call, guard in ((None, roots), ("_mend_cond_ready(dense=(x,))", ["dense=(x,)"])):
        out = _branch_types(call, guard)   # refuted (float16 beside bfloat16), or unknown on a loaded machine
        assert out.result in ("refuted", "unknown") and out.tier != "observed", out   # either declines the cond


def test_a_view_of_a_dense_tensor_rests_on_the_guard_that_checks_its_strides():
    """helper-105 F4: `view` raises on strides that do not fit. The guard checks each `dense`
    tensor contiguous (else the `if` runs), so a side's `x.view(...)` traces; without the guard an
    input's layout is the example's only (the observed tier, an unsafe fix), and after a transpose
    nothing is known (unknown)."""
    from verifier.encoders.cond import READY_TEXT, cond_sides_trace

    def sides(guard_call, guard, expr):
        code = READY_TEXT.format(torch="torch") + (
            "\n\nclass Model:\n    def forward(self, x):\n"
            f"        if torch.compiler.is_compiling() and {guard_call}:\n"
            f"            return torch.cond(x.sum() > 0, lambda: {expr}, lambda: x.clone())\n")
        facts = {"names": {"x": {"kind": "tensor", "shape": [3, 4], "dtype": "float32", "contiguous": True}}}
        ob = {"kind": "cond-sides-trace", "expr": expr, "guard": guard, "torch": "torch"}
        return cond_sides_trace(ob, Ctx(facts, {}, code, ""))
    guarded = sides("_mend_cond_ready(dense=(x,))", ["dense=(x,)"], "x.view(12)")
    assert guarded.result == "proved" and guarded.tier == "observed", guarded   # 12 elements: the example's sizes
    assert any("`x` is contiguous: the guard checks it" in a for a in guarded.assumptions), guarded.assumptions
    general = sides("_mend_cond_ready(dense=(x,))", ["dense=(x,)"], "x.view(-1)")
    assert general.result == "proved" and general.tier == "general", general
    unguarded = sides("_mend_cond_ready()", [], "x.view(-1)")
    assert unguarded.result == "proved" and unguarded.tier == "observed", unguarded
    assert any("`x` is contiguous, as on the example" in a for a in unguarded.assumptions), unguarded.assumptions
    with pytest.raises(Unsupported, match="after a transpose"):   # the obligation is unknown
        sides("_mend_cond_ready(dense=(x,))", ["dense=(x,)"], "x.t().view(-1)")


def test_a_side_of_a_fixed_dtype_is_refuted_or_labelled():
    # helper-95 m04: `softmax(..., dtype=torch.float32)` beside a side in the model's dtype was proved
    # one dtype (dtype= was ignored): refuted now, nothing rewritten
    from mend.fix import fix

    res = fix(str(FIXTURES / "adversarial" / "h95_softmax_dtype.py"), unsafe_fixes=True, max_examples=3)
    assert res.rewrites == [] and res.mended == res.original
    (dec,) = res.declined
    assert "cond-branch-types" in dec.reason and "refuted" in dec.reason and "bfloat16" in dec.reason, dec.reason
    # helper-95 m26: a subclass named Linear got nn.Linear's transfer function; now its dtype is not
    # modelled (unknown, which made the fix unsafe), so the candidate also runs with the model cast to
    # float64 and bfloat16, where its float32 head beside the cast gate makes torch.cond raise: declined
    res = fix(str(FIXTURES / "adversarial" / "h95_linear_subclass.py"), unsafe_fixes=True, max_examples=3)
    assert res.rewrites == [] and res.mended == res.original
    (dec,) = res.declined
    cond = next(e for e in dec.choice["candidates"] if e["name"] == "cond")
    assert "with the model and inputs in float64" in cond["note"] and "TorchRuntimeError" in cond["note"], cond


def _ready():
    from verifier.encoders.cond import READY_TEXT

    scope = {"torch": torch}
    exec(READY_TEXT.format(torch="torch"), scope)
    return scope["_mend_cond_ready"]


class _Plain(torch.nn.Module):
    def __init__(self, what):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.name, self.sizes = "probe", [1, 2]      # plain Python attributes are fine
        if what == "tensor":
            self.scale = torch.ones(4, dtype=torch.float64)   # not a buffer: .bfloat16() leaves it (helper-95 m19)
        elif what == "list":
            self.extra = [torch.nn.Linear(4, 4)]      # not registered: its hooks are unseen (helper-95 m23)
        elif what == "channels_last":
            self.conv = torch.nn.Conv2d(3, 3, 3).to(memory_format=torch.channels_last)   # helper-95 m20


@pytest.mark.parametrize("what, ready", [(None, True), ("tensor", False), ("list", False), ("channels_last", False)])
def test_the_guard_refuses_what_it_cannot_check(what, ready):
    ok = _ready()
    mod = _Plain(what).eval()
    assert ok(mod, dense=(torch.ones(2, 4),)) is ready
    assert ok(mod, dense=(torch.ones(4, 2).t(),)) is False          # a transposed input (helper-94 m09)
    assert ok(torch.nn.Linear(4, 4).eval(), torch.ones(2, dtype=torch.float64)) is False   # float32 beside float64
    if what == "tensor":   # a plain tensor attribute counts among the dtypes, it does not refuse by itself
        mod.scale = mod.scale.float()
        assert ok(mod, dense=(torch.ones(2, 4),)) is True and ok(mod.bfloat16()) is False
    if what is None:   # one dtype after a cast, two when a tensor the sides read stayed float32
        assert ok(mod.bfloat16(), torch.ones(2, dtype=torch.bfloat16)) is True
        assert ok(mod, torch.ones(2)) is False


def test_the_inductor_pass_sees_a_cond_in_a_frame_the_grad_runs_skipped():
    # helper-96 F1: emitted before (0 -> 1 graph) and raising under the default backend
    from mend.fix import fix

    res = fix(str(FIXTURES / "adversarial" / "h96_slice_residual.py"), unsafe_fixes=True, max_examples=3)
    assert res.rewrites == [] and res.mended == res.original
    (dec,) = res.declined
    assert "(inductor)" in dec.reason and "aliasing" in dec.reason, dec.reason


class _Pool:
    """helper-98's plain Python view over experts (neither a Module nor a list, tuple or dict)."""

    def __init__(self, mods):
        self.mods = mods

    def __getitem__(self, i):
        return self.mods[i]


def test_the_guard_refuses_a_root_it_cannot_inspect():
    # helper-98: `self.experts[e](x)` over such a view of a module-level ModuleList: its hooks and
    # training mode were never looked at (a hook added later made the compiled call raise, a BatchNorm
    # in training stopped updating under inductor)
    ok = _ready()
    bank = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2)).eval()
    assert ok(bank) is True and ok(list(bank)) is True and ok(dict(a=bank[0])) is True
    assert ok(_Pool(bank)) is False
    # plain values a side may read are fine: numbers, strings, dtypes, None
    assert ok(bank, 2, 0.5, "gelu", torch.float32, None) is True
