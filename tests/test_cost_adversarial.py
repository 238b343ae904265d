"""Adversarial checks of the cost-model choice (issue 12): the site observation
(verifier.opcount.count_expr, run inside the verifier's facts run) must not write real
state, change what the model computes or what the facts record, and a broken cost artifact
must fall back to the roofline instead of crashing ``mend fix``."""
import importlib.util
import json
import sys
import textwrap

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

import mend.cost as cost
from mend.cost import choose
from verifier.facts import trace_facts
from verifier.opcount import count_expr, evaluable

# -- helpers ------------------------------------------------------------------------------------


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _line(src: str, text: str) -> int:
    return next(i for i, ln in enumerate(src.splitlines(), 1) if text in ln)


def _facts(tmp_path, name, src, line_text, costs, names=()):
    """trace_facts of one call of the file's Model at the line holding ``line_text``;
    returns (facts, output of the call, model, module)."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src))
    mod = _load(path, f"_adv_{name}")
    torch.manual_seed(0)
    model = mod.Model().eval()
    args = mod.get_inputs()
    out = {}

    def run():
        with torch.no_grad():
            out["y"] = model(*args)

    facts = trace_facts(run, str(path), [_line(path.read_text(), line_text)], set(names), costs=costs)
    return facts, out.get("y"), model, mod


def _fakes(obj, seen=None) -> list[str]:
    """Paths of FakeTensors reachable from a module's __dict__ (attributes, submodules)."""
    found = []
    for k, v in vars(obj).items():
        if isinstance(v, FakeTensor):
            found.append(k)
        elif isinstance(v, dict):
            found += [f"{k}[{kk!r}]" for kk, vv in v.items() if isinstance(vv, FakeTensor)]
    for name, sub in obj.named_children() if isinstance(obj, nn.Module) else ():
        found += [f"{name}.{p}" for p in _fakes(sub)]
    return found


# -- the observation writes real state --------------------------------------------------------------

LAZY_PROPERTY = """
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self._scale = None

    @property
    def scale(self):  # a lazily built constant (a common pattern)
        if self._scale is None:
            self._scale = torch.full((8,), 2.0)
        return self._scale

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            h = h * self.scale
        else:
            h = h - 1.0
        return h


def get_inputs():
    return (torch.randn(2, 8, generator=torch.Generator().manual_seed(1)),)
"""


def test_observation_does_not_fill_a_lazy_property_with_a_fake_tensor(tmp_path):
    costs = {"pred": "h.sum() > 0", "sides": [["h * self.scale"], ["h - 1.0"]]}
    facts, y, model, _ = _facts(tmp_path, "lazy_prop", LAZY_PROPERTY, "if h.sum() > 0:", costs)
    assert "costs" in facts and facts.get("raised") is None
    # today: the fake evaluation runs the property, which stores a FakeTensor into the real
    # model, and the real forward then returns a FakeTensor
    assert _fakes(model) == []
    assert type(y) is torch.Tensor


MODULE_LIST_CACHE = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.last = None

    def forward(self, x):
        y = self.fc(x)
        self.last = y  # writes state: the effect analysis flags it for `self.blk(h)`
        return y


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.blk = Block()

    def forward(self, x):
        h = x * 2
        if h.mean() > 0:
            y = self.blocks[0](h)
        else:
            y = self.blocks[1](h)
        return y + h


def get_inputs():
    return (torch.randn(3, 8, generator=torch.Generator().manual_seed(3)),)
"""


def test_evaluable_screens_a_submodule_called_by_index_like_one_called_by_name(tmp_path):
    path = tmp_path / "modlist.py"
    path.write_text(MODULE_LIST_CACHE)
    model = _load(path, "_adv_modlist_screen").Model()
    by_name = evaluable("self.blk(h)", {"self": model})
    assert by_name is not None and "may write state" in by_name
    # opcount.evaluable skips any call whose callee is not a dotted name (`self.blocks[1]`)
    assert evaluable("self.blocks[1](h)", {"self": model}) is not None


def test_observation_does_not_store_a_fake_tensor_in_an_indexed_submodule(tmp_path):
    costs = {"pred": "h.mean() > 0", "sides": [["self.blocks[0](h)"], ["self.blocks[1](h)"]]}
    facts, y, model, _ = _facts(tmp_path, "modlist", MODULE_LIST_CACHE, "if h.mean() > 0:", costs)
    assert "costs" in facts and type(y) is torch.Tensor
    assert _fakes(model) == []  # today: blocks.1.last is a FakeTensor (the untaken side, run on fakes)


SHARED_HELPER = """
import functools
import torch


@functools.lru_cache(maxsize=None)
def ramp(n):
    return torch.arange(n, dtype=torch.float32) / n
"""

LRU_TARGET = """
import torch
from torch import nn
from {helper} import ramp


class A(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) * ramp(x.shape[-1])


class B(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) + ramp(2 * x.shape[-1])[: x.shape[-1]]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = A()
        self.b = B()

    def forward(self, x):
        h = x * 2
        if h.mean() > 0:
            y = self.a(h)
        else:
            y = self.b(h)
        return y + h


def get_inputs():
    return (torch.randn(3, 8, generator=torch.Generator().manual_seed(3)).abs(),)
"""


def _lru_target(tmp_path, monkeypatch, helper: str):
    (tmp_path / f"{helper}.py").write_text(SHARED_HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, helper, raising=False)
    return LRU_TARGET.format(helper=helper)


def test_observation_does_not_cache_a_fake_tensor_in_a_shared_lru_cache(tmp_path, monkeypatch):
    src = _lru_target(tmp_path, monkeypatch, "_adv_ramp_unit")
    costs = {"pred": "h.mean() > 0", "sides": [["self.a(h)"], ["self.b(h)"]]}
    facts, y, _, _ = _facts(tmp_path, "lru_unit", src, "if h.mean() > 0:", costs)
    assert "costs" in facts
    helper = sys.modules["_adv_ramp_unit"]
    # effects.function_purity ignores the lru_cache wrapper (not inspect.isfunction), so
    # evaluable lets the fake run fill the process-wide cache with FakeTensors
    assert [n for n in (8, 16) if isinstance(helper.ramp(n), FakeTensor)] == []
    assert type(y) is torch.Tensor


@pytest.mark.slow
def test_mend_fix_does_not_crash_after_the_observation_poisons_a_shared_cache(tmp_path, monkeypatch):
    """The poisoned cache reaches the differential test: today `mend fix` (any --choose,
    `always` too) ends in `internal error: DataDependentOutputException: aten.equal.default`,
    while with the observation switched off it completes."""
    from mend.pipeline import fix

    src = _lru_target(tmp_path, monkeypatch, "_adv_ramp_fix")
    target = tmp_path / "lru_fix.py"
    target.write_text(src)
    res = fix(str(target), choose="always", max_examples=3)
    outcomes = [(r.site, "rewrite") for r in res.rewrites] + [(d.site, d.reason) for d in res.declined]
    assert len(outcomes) == 1
    assert "DataDependent" not in json.dumps(res.to_json())


# -- the observation changes what the facts record ------------------------------------------------

PROPERTY_RAISES = """
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self._experts = None

    @property
    def experts(self):
        if self._experts is None:
            raise RuntimeError("the experts are not loaded")
        return self._experts

    def forward(self, x):
        h = self.inp(x)
        if h.mean() > 100:  # false on the example: the experts are never read
            y = self.experts.big(h)
        else:
            y = self.b(h)
        return y + h


def get_inputs():
    return (torch.randn(3, 8, generator=torch.Generator().manual_seed(3)),)
"""


def test_an_observation_that_raises_does_not_abort_the_facts_run(tmp_path):
    costs = {"pred": "h.mean() > 100", "sides": [["self.experts.big(h)"], ["self.b(h)"]]}
    plain, y0, _, _ = _facts(tmp_path, "praise0", PROPERTY_RAISES, "if h.mean() > 100:", None, names=("h", "self.b"))
    assert plain.get("raised") is None and type(y0) is torch.Tensor
    facts, y, _, _ = _facts(tmp_path, "praise1", PROPERTY_RAISES, "if h.mean() > 100:", costs, names=("h", "self.b"))
    # today: evaluable's getattr walk runs the property for real, outside count()'s
    # try, and the RuntimeError escapes the trace function into the model's forward
    assert facts.get("raised") is None
    assert facts["names"] == plain["names"]
    assert type(y) is torch.Tensor


# -- count_expr never writes a real tensor or container -------------------------------------------

class _State(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3))
        self.register_buffer("b", torch.zeros(3))


@pytest.mark.parametrize("expr", [
    "self.w.__iadd__(1)",                      # a dunder in-place method passes the `_`-suffix screen
    "self.b.__iadd__(1)",
    "xs[0].__iadd__(1)",                       # a tensor inside a container is not faked
    "G.__iadd__(1)",                           # nor is a global tensor
    "torch.ops.aten.add_.Tensor(self.b, 1)",   # the in-place overload named by torch.ops
    "xs.append(1)",                            # a container method
])
def test_count_expr_refuses_or_leaves_real_state_unchanged(expr):
    state, xs, g = _State(), [torch.zeros(3)], torch.zeros(3)
    before = (state.w.detach().clone(), state.b.clone(), xs[0].clone(), g.clone(), len(xs))
    count_expr(expr, {"torch": torch, "G": g}, {"self": state, "xs": xs})
    after = (state.w.detach().clone(), state.b.clone(), xs[0].clone(), g.clone(), len(xs))
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
    assert torch.equal(before[2], after[2]) and torch.equal(before[3], after[3]) and before[4] == after[4]


# -- a broken cost artifact falls back to the roofline --------------------------------------------

OBS = {"pred": {"flops": 0.0, "bytes": 100, "out_bytes": 1},
       "sides": [{"flops": 0.0, "bytes": 1000, "out_bytes": 100}, {"flops": 0.0, "bytes": 1000, "out_bytes": 100}],
       "p_true": None, "device": "cpu"}


def _broken(real: dict) -> dict:
    return {"empty object": {}, "a list": [], "no peaks": {k: v for k, v in real.items() if k != "peaks"},
            "stale features": {**real, "features": real["features"][:-1]}}


@pytest.mark.parametrize("what", ["empty object", "a list", "no peaks", "stale features"])
def test_a_broken_cost_artifact_falls_back_to_the_roofline(monkeypatch, what):
    real = cost.load_model()
    assert real is not None
    art = _broken(real)[what]
    monkeypatch.setattr(cost, "load_model", lambda *a, **k: art)
    # today: KeyError / AttributeError / ValueError out of choose(), which `mend fix` reports
    # as `internal error` (exit 2) on every data-dependent branch
    rec = choose(OBS, ["where", "cond"], "where", "model")
    assert rec["method"] == "roofline" and rec["chosen"] in ("keep", "where", "cond")
    assert "artifact" in rec["reason"]


# -- measure ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_measure_timing_leaves_the_example_inputs_unchanged():
    """--choose measure times each candidate on the target's own input tensors, uncloned:
    a forward that updates an input in place changes the examples every later run uses."""
    from mend.pipeline.timing import steady_ms

    class Bump(nn.Module):
        def forward(self, x):
            x.add_(1.0)
            return x * 2

    x = torch.zeros(4)
    steady_ms(Bump(), (x,), {}, warmup=1, calls=2)
    assert x.tolist() == [0.0, 0.0, 0.0, 0.0]
