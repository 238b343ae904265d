"""predicated-control-flow rewrite (GraphMend "[Where]"): what its examples must show beyond
the generated tests of ``tests/test_rules.py`` (exact text, declines, matcher), plus
behavioural checks that run the rewritten code.

Behavioural checks: original and rewritten modules built with the same weights give
bit-identical outputs on inputs that take both sides of the branch, and the rewritten
module compiles to exactly one graph.
"""
import linecache
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
import torch

from mend.locate import locate
from mend.rules import Decline, Match
from mend.rules.predicated_control_flow import (
    DECLINE_EXAMPLES,
    FIX_EXAMPLES,
    RewriteResult,
    first_site,
    match,
    rewrite,
)
from mend.rules.predicated_control_flow.where import where_equals_ite
from tests.conftest import FIXTURES, SHARED_CASES


def _rewrite(source: str, line: int | None = None):
    return rewrite(cst.parse_module(source), line or first_site(source))


def _example(containing: str) -> tuple[str, str]:
    found = [ex for ex in FIX_EXAMPLES if containing in ex[0]]
    assert len(found) == 1, containing
    return found[0]


# -- the examples (exact text, declines and the matcher: tests/test_rules.py) -------------


def test_example_counts():
    assert len(FIX_EXAMPLES) >= 8 and len(DECLINE_EXAMPLES) >= 8


def test_every_fix_example_records_its_predicates():
    for before, _ in FIX_EXAMPLES:
        result = _rewrite(before)
        assert result.predicates and result.obligations, before


def test_where_equals_ite_follows_the_rules_own_obligations():
    """One per same-dtype obligation, after the others, for the first predicate: what
    ``verifier.obligations.expand`` added before the rule recorded it itself."""
    seen = 0
    for before, _ in FIX_EXAMPLES:
        # a branch in a loop appends loop-facts-agree after them (checked where it is emitted)
        obligations = [o for o in _rewrite(before).obligations if o["kind"] != "loop-facts-agree"]
        own = [o for o in obligations if o["kind"] != "where-equals-ite"]
        assert obligations[:len(own)] == own
        preds = [o["pred"] for o in own if o["kind"] == "single-element-predicate"]
        expected = [] if not preds else list(dict.fromkeys(
            (("target", o["target"]), ("lhs", o["lhs"]), ("rhs", o["rhs"])) for o in own if o["kind"] == "same-dtype"))
        assert obligations[len(own):] == [{"kind": "where-equals-ite", **dict(e), "pred": preds[0]} for e in expected]
        assert where_equals_ite(obligations) == obligations  # idempotent
        seen += bool(expected)
    assert seen >= 10


# -- obligations and details -----------------------------------------------------------


def _kinds(result: RewriteResult) -> set[str]:
    return {o["kind"] for o in result.obligations}


def test_sqrt_trap_is_gated_on_its_path_condition():
    """The untaken side's sqrt(0) gradient (0 * inf) is stopped at a gate on the side's input
    (gate.py): the finite-gradient obligation becomes gradient-gated, the helper is added once."""
    result = _rewrite(_example("torch.sqrt(s)")[0])
    assert not [o for o in result.obligations if o["kind"] == "finite-gradient"]
    assert {"kind": "gradient-gated", "target": "y", "expr": "torch.sqrt(_mend_gate(_mend_pred_0, s))",
            "plain": "torch.sqrt(s)", "keep": "_mend_pred_0", "guard": "s > 0"} in result.obligations
    assert "y = torch.where(_mend_pred_0, torch.sqrt(_mend_gate(_mend_pred_0, s)), s)" in result.code
    assert result.code.count("def _mend_gate(") == 1
    assert {"same-shape", "same-dtype", "single-element-predicate", "untaken-side-cannot-raise"} <= _kinds(result)
    assert {"kind": "same-shape", "target": "y", "lhs": "torch.sqrt(s)", "rhs": "s"} in result.obligations


def test_division_side_is_gated():
    src = "import torch\n\n\ndef f(h):\n    norm = h.norm()\n    if norm > 1:\n        h = h / norm\n    return h\n"
    result = _rewrite(src)
    assert {"kind": "gradient-gated", "target": "h", "expr": "_mend_gate(_mend_pred_0, h) / _mend_gate(_mend_pred_0, norm)",
            "plain": "h / norm", "keep": "_mend_pred_0", "guard": "norm > 1"} in result.obligations


def test_submodule_call_on_untaken_side_is_an_obligation():
    src = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, x):\n"
           "        h = x\n        if h.sum() > 0:\n            h = self.proj(h)\n        return h\n")
    result = _rewrite(src)
    assert isinstance(result, RewriteResult)
    assert {"kind": "untaken-side-runs", "call": "self.proj(h)", "guard": "h.sum() > 0"} in result.obligations


def test_span_detail_and_predicates():
    result = _rewrite(_example("elif x.mean() < -1")[0])
    assert result.span == (7, 12)
    assert result.predicates == ["x.mean() > 1", "x.mean() < -1"]
    assert "elif" in result.detail and "torch.where" in result.detail


def test_fresh_name_avoids_every_name_in_the_module():
    before = _example("b = y + a")[0].replace("return a, b", "_mend_pred_0 = 1\n        return a, b")
    result = _rewrite(before)
    assert "_mend_pred_1 = x.sum() > 0" in result.code
    assert "_mend_pred_0 = 1" in result.code


def test_everything_outside_the_if_is_untouched():
    before, after = _example("(pad_mask == 0).any()")
    result = _rewrite(before)
    old, new = before.splitlines(), result.code.splitlines()
    assert old[:6] == new[:6] and old[-1] == new[-1]


def test_no_statement_on_line():
    assert isinstance(_rewrite("import torch\n", 5), Decline)


def test_static_test_is_declined():
    src = "import torch\n\n\ndef f(x):\n    if x.dtype == torch.float16:\n        x = x.float()\n    return x\n"
    result = _rewrite(src, 5)
    assert isinstance(result, Decline) and "Python-level" in result.reason


def test_hoisted_setup_obligations():
    result = _rewrite(_example("self.long_freq, _ = self.freq_fn")[0])
    guard = "seq_len > self.short_limit"
    assert {"kind": "hoisted-setup-pure", "call": "self.freq_fn(self.dim, device, seq_len=self.short_limit + 1)",
            "slot": "self.long_freq", "guard": guard} in result.obligations
    assert {"kind": "idempotent-device-move", "target": "self.short_freq", "expr": "self.short_freq.to(device)",
            "guard": f"not ({guard})"} in result.obligations
    cannot_raise = [o for o in result.obligations if o["kind"] == "hoisted-setup-cannot-raise"]
    assert [o["slot"] for o in cannot_raise] == ["self.long_freq", "self.short_freq"]
    for kind in ("same-shape", "same-dtype"):
        assert {"kind": kind, "target": "self.register_buffer('freq')", "lhs": "self.long_freq",
                "rhs": "self.short_freq"} in result.obligations
    assert "single-element-predicate" in _kinds(result) and "paired-call-value-not-aliased" in _kinds(result)
    assert result.span == (14, 21)
    assert "hoisted: memoised self.long_freq, device move of self.short_freq" in result.detail


def test_same_device_move_on_both_sides_is_hoisted_once():
    src = textwrap.dedent('''\
        import torch


        def f(self, x):
            if x.sum() > 0:
                self.base = self.base.to(x.device)
                y = x * self.base
            else:
                self.base = self.base.to(x.device)
                y = x + self.base
            return y
    ''')
    result = _rewrite(src)
    assert result.code.count("self.base = self.base.to(x.device)") == 1
    assert "y = torch.where(x.sum() > 0, x * self.base, x + self.base)" in result.code


def test_memo_reading_a_name_its_side_assigned_first_is_declined():
    src = textwrap.dedent('''\
        import torch


        def f(self, x):
            if x.sum() > 0:
                y = x * 2
                if not hasattr(self, "k"):
                    self.k = self.init_fn(y)
                y = y + self.k
            else:
                y = x
            return y
    ''')
    result = _rewrite(src)
    assert isinstance(result, Decline) and "reads `y`, which its branch assigns before it" in result.reason


def test_hoisted_slot_read_by_the_test_is_declined():
    src = textwrap.dedent('''\
        import torch


        def f(self, x):
            if (x * self.scale).sum() > 0:
                self.scale = self.scale.to(x.device)
                y = x * self.scale
            else:
                y = x
            return y
    ''')
    result = _rewrite(src)
    assert isinstance(result, Decline) and "the test reads `self.scale`" in result.reason


def _located(tmp_path, source: str):
    path = tmp_path / "m.py"
    path.write_text(source)
    return locate(str(path), first_site(source))


def test_match_runs_the_rewrite_so_its_detail_is_the_rewrites(tmp_path):
    for before, _ in FIX_EXAMPLES:
        verdict = match(_located(tmp_path, before))
        assert isinstance(verdict, Match) and verdict.detail == _rewrite(before).detail, verdict


def test_match_accepts_if_return_followed_by_return(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(_example("return h * 0.5")[0])
    loc = locate(str(path), 8)
    assert loc is not None and isinstance(match(loc), Match)


# -- behaviour: eager equality on both sides, one graph when compiled ----------------------


def _load(source: str, name: str) -> dict:
    """exec ``source`` as a module named ``name`` (registered in linecache for Dynamo)."""
    filename = f"<mend-test {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": name}
    exec(compile(source, filename, "exec"), ns)
    return ns


def _outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple) else [out]


def _branch_outcomes(model, inputs, monkeypatch) -> set[bool]:
    """Truth values the original takes when it branches on a tensor."""
    seen: set[bool] = set()
    original = torch.Tensor.__bool__

    def record(self):
        value = original(self)
        seen.add(value)
        return value

    with monkeypatch.context() as mp:
        mp.setattr(torch.Tensor, "__bool__", record)
        for args in inputs:
            model(*args)
    return seen


def _check_behaviour(before: str, after: str, inputs, monkeypatch, cls: str = "Model"):
    """``inputs``: a list of argument tuples, or a function of the original model giving one."""
    torch.manual_seed(0)
    original = _load(before, "mend_before")[cls]().eval()
    torch.manual_seed(0)
    mended = _load(after, "mend_after")[cls]().eval()
    if callable(inputs):
        inputs = inputs(original)
    assert _branch_outcomes(original, inputs, monkeypatch) == {True, False}, "inputs must take both sides"
    for args in inputs:
        with torch.no_grad():
            want, got = _outputs(original(*args)), _outputs(mended(*args))
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and torch.equal(w, g)
    for args in inputs:
        torch._dynamo.reset()
        explained = torch._dynamo.explain(mended)(*args)
        # a break whose resumed code builds no graph is not counted: look at the reasons too
        assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
        assert not explained.break_reasons
        torch._dynamo.reset()
        compiled = torch.compile(mended, backend="eager", fullgraph=True)
        with torch.no_grad():
            for w, g in zip(_outputs(original(*args)), _outputs(compiled(*args))):
                assert torch.equal(w, g)
    torch._dynamo.reset()


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


BEHAVIOUR = [
    # (substring of the example's source, inputs covering both outcomes)
    ("h.pow(2).mean() > self.threshold", lambda: [(_randn(4, 16) * 0.01,), (_randn(4, 16) * 10,)]),
    ("if torch.isnan(x).any() else x", lambda: [(_randn(2, 4),), (torch.tensor([[1.0, float("nan")], [float("inf"), 2.0]]),),
                                                 (torch.tensor([[float("inf"), -0.0]]),)]),
    ("scale, shift = 1 + s1, t1", lambda: [(_randn(2, 4), c, *(_randn(2, 4, seed=k) for k in range(1, 5)))
                                            for c in (_randn(2, 4) + 5, _randn(2, 4) - 5)]),
    ("(pad_mask == 0).any()", lambda: [(_randn(2, 6, 6), torch.ones(2, 6, dtype=torch.long)),
                                       (_randn(2, 6, 6), torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]]))]),
    ("if not inside:", lambda: [(_randn(5, 4) * 0.1,), (_randn(5, 4) * 3,)]),
    ("b = y + a", lambda: [(_randn(3, 4) + 5, _randn(3, 4, seed=1)), (_randn(3, 4) - 5, _randn(3, 4, seed=1))]),
    ("elif x.mean() < -1", lambda: [(_randn(3, 4) + 5,), (_randn(3, 4) - 5,), (_randn(3, 4) * 0.1,)]),
    ("return x * 3", lambda: [(_randn(3, 4).abs() + 0.1,), (_randn(3, 4),)]),
    ("return h * 0.5", lambda: [(_randn(3, 4) * 0.1,), (_randn(3, 4) * 10,)]),
    ("h.clamp(0, 100)", lambda: [(_randn(3, 4).abs(),), (_randn(3, 4),), (_randn(3, 4).abs() * 1000,)]),
    ("torch.isinf(h).any() or torch.isnan(h).any()", lambda: [(_randn(3, 4).half(),),
                                      (torch.tensor([1.0, float("inf"), -float("inf")]).half(),)]),
    # hoisted setup: memoised initialisation, device move, paired register_buffer
    ("self.long_freq, _ = self.freq_fn", lambda: [(_randn(1, 3, 4), torch.arange(3)[None]),
                                                  (_randn(1, 8, 4), torch.arange(8)[None]),
                                                  (_randn(1, 2, 4), torch.arange(2)[None])]),
    ("wide_table", lambda: [(_randn(3, 8) * 0.1,), (_randn(3, 8) * 10,), (_randn(3, 8) * 0.1,)]),
    ("self.damp = self.weight_fn", lambda: [(_randn(2, 6) * 0.1,), (_randn(2, 6) * 10,)]),
]


@pytest.mark.parametrize("containing, inputs", BEHAVIOUR, ids=[b[0] for b in BEHAVIOUR])
def test_rewritten_example_behaves_the_same(containing, inputs, monkeypatch):
    before, after = _example(containing)
    _check_behaviour(before, after, inputs(), monkeypatch)


def test_original_examples_really_break():
    for containing, inputs in BEHAVIOUR[:3]:
        torch.manual_seed(0)
        model = _load(_example(containing)[0], "mend_before")["Model"]().eval()
        torch._dynamo.reset()
        assert torch._dynamo.explain(model)(*inputs()[0]).break_reasons
    torch._dynamo.reset()


# -- the shared acceptance cases -----------------------------------------------------------

needs_shared = pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")


def _mend_file(name: str, rounds: int = 1) -> tuple[str, str, list[RewriteResult]]:
    """Rewrite the first ``rounds`` sites of a shared case, one after the other."""
    before = (SHARED_CASES / name).read_text()
    code, results = before, []
    for _ in range(rounds):
        result = _rewrite(code)
        assert isinstance(result, RewriteResult), result
        code = result.code
        results.append(result)
    return before, code, results


def _case_inputs(before: str):
    return _load(before, "mend_case")["get_inputs"]()


@needs_shared
def test_shared_case_001_break_removed(monkeypatch):
    before, after, _ = _mend_file("001_energy_gate_branch.py")
    (x,) = _case_inputs(before)
    # get_inputs() plus inputs that flip the branch both ways
    _check_behaviour(before, after, [(x,), (x * 0.01,), (x * 10,)], monkeypatch)


@needs_shared
def test_shared_case_002_break_removed(monkeypatch):
    before, after, _ = _mend_file("002_padding_any_masked_fill.py")
    x, pad_mask = _case_inputs(before)
    _check_behaviour(before, after, [(x, pad_mask), (x, torch.ones_like(pad_mask))], monkeypatch)


@needs_shared
def test_shared_case_004_both_breaks_removed(monkeypatch):
    before, after, results = _mend_file("004_action_bounds_and_project.py", rounds=2)
    assert [r.span for r in results] == [(37, 37), (38, 39)]
    (obs,) = _case_inputs(before)

    def inputs(model):  # get_inputs() is out of bounds; solve policy(obs) = 0 for one inside
        w, b = model.policy.weight.detach(), model.policy.bias.detach()
        inside = torch.linalg.lstsq(w, -b[:, None]).solution.T
        return [(obs,), (inside.expand(3, -1).contiguous(),)]

    _check_behaviour(before, after, inputs, monkeypatch)


@needs_shared
def test_shared_case_012_trap_becomes_cond_with_the_ifs_gradient():
    """The test guards sqrt's domain, so torch.where (which runs sqrt on the untaken side and
    gives NaN gradients there) is not used: the rule emits torch.cond under torch.compile,
    keeps the if for eager, and waives finite-gradient with its reason. Output and gradients
    equal the original's, eager and compiled, on both outcomes."""
    before, after, (result,) = _mend_file("012_sqrt_branch_grad_nan.py")
    assert "torch.cond(s > 0, lambda: torch.sqrt(s), lambda: s.clone())" in after
    assert "finite-gradient" not in _kinds(result)
    (waiver,) = [o for o in result.obligations if o["kind"] == "cond-taken-side-only"]
    assert "finite-gradient" in waiver["waives"] and "only the branch its predicate selects" in waiver["why"]
    (x,) = _case_inputs(before)
    for args in [(x,), (-x,), (x * 0.0,)]:  # s > 0, s < 0 (the NaN trap of where), s == bias
        grads = []
        for src, compiled in ((before, False), (after, False), (after, True)):
            torch.manual_seed(0)
            model = _load(src, "mend_case")["Model"]()
            run = torch.compile(model, backend="eager", fullgraph=True) if compiled else model
            out = run(*args)
            out.backward()
            grads.append((out.detach(), model.scale.grad.clone(), model.proj.weight.grad.clone()))
        for got in grads[1:]:
            assert all(torch.equal(a, b) for a, b in zip(grads[0], got))
            assert not got[2].isnan().any()


def test_cond_obligations_discharge():
    """The cond obligations are established (checked by the screen, on the lemma) or, without facts, unknown."""
    from verifier.obligations import discharge

    src = _example("y = self.mlp_a(h)")[0]
    result = _rewrite(src)
    kinds = _kinds(result)
    assert {"cond-predicate", "cond-branch-types", "cond-output-not-aliased", "cond-taken-side-only",
            "cond-side-pure"} <= kinds
    assert not kinds & {"finite-gradient", "untaken-side-cannot-raise", "untaken-side-runs", "same-dtype"}
    res = {o["kind"]: o for o in discharge(result.obligations, facts=None)}
    # established by the static screen, resting on the lemma proved once in proofs/ (not re-solved per site)
    assert res["cond-taken-side-only"]["result"] == "checked"
    assert "proofs/pcf_cond_ite.smt2" in res["cond-taken-side-only"]["lemmas"]
    assert res["cond-output-not-aliased"]["result"] == "checked"
    # without facts, types and purity are unknown, never proved by accident
    assert res["cond-branch-types"]["result"] == "unknown" and res["cond-side-pure"]["result"] == "unknown"


def test_cond_clone_declined_when_the_copy_escapes():
    """`return y` after `else: y = s` would hand the caller a copy: cond is not used, and the
    rule keeps the torch.where candidate, its sqrt side gated (verification judges it)."""
    result = _rewrite(_example("torch.sqrt(s)")[0])
    assert "torch.where(_mend_pred_0, torch.sqrt(_mend_gate(_mend_pred_0, s)), s)" in result.code
    assert "torch.cond" not in result.code


def test_cond_rewrites_compile_to_one_graph_and_match_eager():
    """Each torch.cond example, on both outcomes: one graph without autograd (fullgraph), the
    original's output; with autograd (the cond runs there only when the sides read the same
    tensors) the original's gradients, None-ness included."""
    cases = {
        "lambda: self.mlp_a(h)": [(torch.randn(3, 8) + 2,), (torch.randn(3, 8) - 2,)],
        "lambda: torch.log(x)": [(torch.rand(3, 4) + 0.5,), (torch.randn(3, 4) - 3,)],
        "lambda: h[:, :4].clone()": [(torch.rand(2, 4) + 0.1,), (torch.randn(2, 4) - 3,)],
        "lambda: torch.sqrt(t)": [(torch.tensor(2.0),), (torch.tensor(-1.0),)],
    }
    for needle, inputs in cases.items():
        (before, after), = [ex for ex in FIX_EXAMPLES if needle in ex[1]]
        for args in inputs:
            outs = []
            for src, compiled in ((before, False), (after, True)):
                torch.manual_seed(0)
                model = _load(src, "mend_cond")["Model"]().eval()   # in training the if is kept (_mend_cond_ready)
                if compiled:
                    torch._dynamo.reset()
                    with torch.no_grad():
                        fg = torch.compile(model, backend="eager", fullgraph=True)(*args)
                leaf = args[0].clone().requires_grad_(True)
                run = torch.compile(model, backend="eager") if compiled else model
                out = run(leaf)
                out.sum().backward()
                grads = [leaf.grad] + [p.grad for p in model.parameters()]
                outs.append((out.detach(), grads))
            assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][0], fg), needle
            for a, b in zip(outs[0][1], outs[1][1]):
                assert (a is None) == (b is None), needle
                assert a is None or torch.equal(a.nan_to_num(), b.nan_to_num()), needle
    torch._dynamo.reset()


@needs_shared
def test_shared_case_006_takes_torch_cond_per_expert():
    # the case's own remedy: torch.cond per expert (same-shape sides) keeps the skip; torch.where is declined
    source = (SHARED_CASES / "006_moe_skip_unused_expert.py").read_text()
    result = _rewrite(source)
    assert isinstance(result, RewriteResult) and result.form == "cond", result
    assert 'torch.cond(gate.any(), lambda: out + gate * torch.exp(self.temperature[e] * torch.tanh(expert(x))), ' \
           'lambda: out.clone())' in result.code
    assert '_mend_cond_ready(getattr(self, "experts", None), ' in result.code
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.strip() == "if gate.any():")
    where = rewrite(cst.parse_module(source), line, form="where")
    assert isinstance(where, Decline) and "skips a call of the loop's item" in where.reason


@needs_shared
@pytest.mark.parametrize("name, reason", [
    ("008_all_ones_mask_to_none.py", "None"),
    ("013_skip_counter_nonfinite.py", "self.skipped_steps"),
])
def test_shared_trap_cases_declined(name, reason):
    result = _rewrite((SHARED_CASES / name).read_text())
    assert isinstance(result, Decline) and reason in result.reason


# -- the real site: transformers 4.52.4 LongRoPE frequency update (hf:phi3's 5 breaks) ----------

try:
    import transformers
except ImportError:  # pragma: no cover
    transformers = None
needs_tf = pytest.mark.skipif(transformers is None or transformers.__version__ != "4.52.4",
                              reason="the LongRoPE site is pinned to transformers 4.52.4")
ROPE_LINE = 50
ROPE_MENDED = '''\
        if not hasattr(self, "long_inv_freq"):
            self.long_inv_freq, _ = self.rope_init_fn(
                self.config, device, seq_len=original_max_position_embeddings + 1
            )
        # This .to() is needed if the model has been moved to a device after being initialized (because
        # the buffer is automatically moved, but not the original copy)
        self.original_inv_freq = self.original_inv_freq.to(device)
        self.register_buffer("inv_freq", torch.where(seq_len > original_max_position_embeddings, \
self.long_inv_freq, self.original_inv_freq), persistent=False)  # mend: predicated-control-flow \
(was: if seq_len > original_max_position_embeddings)

    def dynamic_frequency_update(self, position_ids, device):
'''


def _rope_source() -> Path:
    return Path(transformers.__file__).parent / "modeling_rope_utils.py"


@needs_tf
def test_longrope_frequency_update_rewrite():
    before = _rope_source().read_text()
    result = _rewrite(before, ROPE_LINE)
    assert isinstance(result, RewriteResult), result
    assert result.span == (50, 60)
    assert ROPE_MENDED in result.code
    old, new = before.splitlines(), result.code.splitlines()
    assert old[:49] == new[:49] and old[60:] == new[57:]  # nothing else changes
    assert {"hoisted-setup-pure", "hoisted-setup-cannot-raise", "idempotent-device-move", "same-shape",
            "same-dtype", "single-element-predicate"} <= _kinds(result)
    verdict = match(locate(str(_rope_source()), ROPE_LINE))
    assert isinstance(verdict, Match) and verdict.detail == result.detail


_PHI3 = '''
import sys
if sys.argv[2]:
    from mend.overlay import activate
    activate(sys.argv[2])
import torch
import transformers.modeling_rope_utils as rope
from mend.targets.hf import build

assert rope.__file__.startswith(sys.argv[2] or "\\0") == bool(sys.argv[2]), rope.__file__
short = build("phi3")[2]["input_ids"]
long = torch.randint(3, 128, (1, 20), generator=torch.Generator().manual_seed(1))
model = build("phi3")[0]
with torch.no_grad():
    logits = [model(input_ids=x).logits for x in (short, long, short)]
    breaks = []
    for x in (short, long):
        torch._dynamo.reset()
        explained = torch._dynamo.explain(build("phi3")[0])(input_ids=x)
        breaks.append((explained.graph_count, explained.graph_break_count, len(explained.break_reasons)))
torch.save({"logits": logits, "breaks": breaks}, sys.argv[1])
'''


def _phi3_run(tmp_path, overlay: str) -> dict:
    out = tmp_path / ("mended.pt" if overlay else "original.pt")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", _PHI3, str(out), overlay], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return torch.load(out)


@needs_tf
def test_longrope_rewrite_removes_phi3_breaks_bit_exactly(tmp_path):
    """Mended through the import overlay: one graph for 8 tokens (short factors) and for
    20 tokens (> original_max_position_embeddings = 16: long factors); logits identical,
    also when the model goes short -> long -> short (the memo and the buffer are state)."""
    result = _rewrite(_rope_source().read_text(), ROPE_LINE)
    overlay = tmp_path / "mended"
    (overlay / "transformers").mkdir(parents=True)
    (overlay / "transformers" / "modeling_rope_utils.py").write_text(result.code)
    original, mended = _phi3_run(tmp_path, ""), _phi3_run(tmp_path, str(overlay))
    assert [b[1] for b in original["breaks"]] == [5, 5]
    assert mended["breaks"] == [(1, 0, 0), (1, 0, 0)]
    for want, got in zip(original["logits"], mended["logits"]):
        assert want.dtype == got.dtype and torch.equal(want, got)


def test_a_ternary_is_fixed_end_to_end_with_both_outcomes_forced():
    from mend.pipeline import fix
    from tests.conftest import FIXTURES

    res = fix(str(FIXTURES / "ternary_nan_guard.py"), unsafe_fixes=True, max_examples=8)
    assert res.before.graph_count == 2 and res.after.graph_count == 1
    (rw,) = res.rewrites
    assert rw["rule"] == "predicated-control-flow"
    outcomes = rw["evidence"]["predicate_outcomes"]
    assert list(outcomes.values())[0]["forced"] == [False, True]
    assert "h = torch.where(torch.isnan(h).any(), torch.nan_to_num(" in res.mended


@pytest.mark.parametrize("binding, static", [
    ("fp16 = h.dtype == torch.float16", True),
    ("fp16 = h.dtype == torch.float16 and not self.training", True),
    # one binding a tensor test: not a Python-level guard
    ("fp16 = h.dtype == torch.float16\n        if h.sum() > 0:\n            fp16 = torch.isnan(h).any()", False),
    ("fp16 = torch.isnan(h).any()", False),
    ("fp16 = True\n        fp16 += 1", False),
    ("for fp16 in (True, False):\n            pass", False),
    ("fp16, other = h.dtype == torch.float16, 1", False),
    ("", False),  # a parameter
])
def test_a_local_is_a_static_guard_only_when_every_binding_is_one(binding, static):
    from mend.rules.predicated_control_flow.env import _Env
    from mend.rules.predicated_control_flow.screen import _is_static

    params = "self, h" if binding else "self, h, fp16"
    src = f"import torch\n\n\nclass M:\n    def forward({params}):\n        {binding or 'pass'}\n        return fp16\n"
    module = cst.parse_module(src)
    cls = module.body[1]
    fn = cls.body.body[0]
    env = _Env(module, [module, cls, fn])
    assert _is_static(cst.Name("fp16"), env) is static


def test_an_fp16_guard_in_a_local_is_fixed_where_inductor_keeps_fp32_intermediates():
    """The guard's name is a Python-level test; the model computes in float16 but returns
    float32, so the Inductor comparison takes float16's tolerance (verifier.differential)."""
    from mend.pipeline import fix
    from tests.conftest import FIXTURES

    res = fix(str(FIXTURES / "fp16_guard_fused.py"), unsafe_fixes=True, max_examples=8)
    assert res.before.graph_count == 3 and res.after.graph_count == 1, res.declined
    (rw,) = res.rewrites
    assert "        if fp16:\n" in res.mended
    assert "torch.where(torch.logical_or(torch.isinf(hidden_states).any(), torch.isnan(hidden_states).any())" \
        in res.mended


def test_a_branch_on_a_numpy_bool_is_declined_by_its_differential_test():
    # reformer's `input_shape[-1] % np.lcm(...) != 0`: the predicate is a numpy.bool_ eagerly,
    # which torch.where rejects; the candidate is withheld as unsafe by default (a bool is not
    # modelled) and, with --unsafe-fixes, the differential test sees the mended model raise
    from mend.pipeline import fix
    from tests.conftest import FIXTURES

    res = fix(str(FIXTURES / "numpy_bool_branch.py"), unsafe_fixes=True, max_examples=4)
    assert res.rewrites == [] and res.after.graph_count == res.before.graph_count == 2
    (declined,) = res.declined
    assert "original returned normally, mended raised TypeError" in declined["reason"]


def test_the_code_after_an_early_return_must_be_shown_unable_to_raise():
    # an adversarial review: `if (t < 0).any(): return ...` guarded `F.nll_loss(logp, t)`, which
    # raises on negative targets; predicated, it ran on every call (applied as an unsafe fix)
    from mend.pipeline import fix
    from mend.rules import RULES

    rule = RULES["predicated-control-flow"]
    assert "fall-through-cannot-raise" in rule.required_kinds
    src = (FIXTURES / "early_return_nll.py").read_text()
    line = src.splitlines().index("        if (t < 0).any():") + 1
    kinds = [o["kind"] for o in rule.rewrite(cst.parse_module(src), line).obligations]
    assert "fall-through-cannot-raise" in kinds
    res = fix(str(FIXTURES / "early_return_nll.py"), unsafe_fixes=True, max_examples=3)
    assert res.rewrites == [] and "fall-through-cannot-raise" in res.declined[0].reason


def test_a_walrus_is_hoisted_only_where_the_test_evaluates_it_first():
    """Held-out case 202: `if (m := h.mean()) > 0:` is `m = h.mean()` then `if m > 0:`; a
    binding evaluated after another part of the test is not (that part may raise first)."""
    import libcst as cst
    import libcst.matchers as m

    from mend.rules._base import Decline
    from mend.rules.predicated_control_flow.rewrite import _first_evaluated, rewrite

    def first(test: str) -> bool:
        expr = cst.parse_expression(test)
        return _first_evaluated(expr, m.findall(expr, m.NamedExpr())[0])

    assert first("(m := h.mean()) > 0")
    assert first("not (m := h.isnan().any())")
    assert first("(m := h.abs()).amax() > 1")
    assert first("torch.any((m := h.abs()) > 1)")
    assert first("(m := h.mean()) > 0 and h.sum() > 0")
    assert not first("h.amax() > (m := h.mean())")
    assert not first("h.sum() > 0 and (m := h.mean()) > 0")
    assert not first("self.f()((m := h) > 0)")
    assert not first("fns[0]((m := h) > 0)")
    assert not first("h.ne((h := h * 2)).any()")      # h.ne is looked up on the old h (review case J)
    assert not first("torch.gt((torch := h), 0)")
    assert not first("self.f((m := h) > 0)")           # a property's effects would move
    src = ("import torch\n\n\ndef f(h):\n    if torch.any((m := h.abs()) > 1):\n        h = h - m\n"
           "    else:\n        h = h * 2.0\n    return h, m\n")
    res = rewrite(cst.parse_module(src), 5)
    assert not isinstance(res, Decline), res
    assert "    m = h.abs()\n    h = torch.where(torch.any(m > 1), h - m, h * 2.0)" in res.code
    assert res.span == (5, 8)


def test_a_test_that_is_not_statically_bool_is_compared_with_zero_as_bool_reads_it():
    """Held-out case 343: `if n_pad:` on an int64 count. bool(t) of a one-element tensor is
    `t != 0` for every dtype: NaN is true, -0.0 false, a complex number true when nonzero."""
    import libcst as cst
    import torch

    from mend.rules.predicated_control_flow.rewrite import rewrite

    values = [0, 3, -1, 0.0, -0.0, float("nan"), float("inf"), 1e-45, True, False, 0j, 1j, complex("nan")]
    for v in values:
        for dtype in (None, torch.int8, torch.uint8, torch.float16, torch.bfloat16):
            try:
                t = torch.tensor(v) if dtype is None else torch.tensor(v).to(dtype)
            except (TypeError, RuntimeError):
                continue
            assert bool(t) == bool(t != 0), (v, t.dtype)
            assert bool(t.reshape(1, 1)) == bool((t.reshape(1, 1) != 0).reshape(())), (v, t.dtype)
    src = ("import torch\n\n\ndef f(h, ids):\n    n_pad = (ids == 0).sum()\n    if n_pad:\n        h = h * 2.0\n"
           "    if n_pad - 1:\n        h = h + 1.0\n    return h\n")
    res = rewrite(cst.parse_module(src), 6)
    assert "h = torch.where(n_pad != 0, h * 2.0, h)" in res.code
    res = rewrite(cst.parse_module(src), 8)
    assert "h = torch.where((n_pad - 1) != 0, h + 1.0, h)" in res.code
    assert "bool-predicate" not in {o["kind"] for o in res.obligations}


# -- the autocast-guarded form (Rule.fallback for the autocast leg's refutation) ----------

AUTOCAST_SRC = '''import torch


def f(x, w):
    # project
    if x.sum() > 0:
        y = torch.mm(x, w)
    else:
        y = x * 2
    return y
'''


def test_autocast_guarded_keeps_the_original_if_under_autocast():
    from mend.rules.predicated_control_flow import RULE, autocast_guarded
    from verifier import obligations as O

    res = autocast_guarded(cst.parse_module(AUTOCAST_SRC), 6)
    assert isinstance(res, RewriteResult), res
    assert ('    # project\n    if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps"):  # mend: '
            in res.code)
    assert ("            y = torch.mm(x, w)\n        else:\n            y = x * 2\n    else:\n"
            "        y = torch.where(x.sum() > 0, torch.mm(x, w), x * 2)" in res.code)
    assert RULE.fallback is autocast_guarded and RULE.fallback_when("differential test failed: under autocast(cpu, "
                                                                    "bfloat16), eager, forced {5: False}: x")
    assert not RULE.fallback_when("differential test failed: values differ")
    (kept,) = [o for o in res.obligations if o["kind"] == "autocast-keeps-original"]
    (ok,) = O.discharge([kept], facts=None, code=res.code, before=AUTOCAST_SRC)
    assert ok["result"] == "checked" and "static screen" in ok["checked_by"], ok
    # the screen can fail: a kept if that is not the original's, or a guard that misses cuda
    (bad,) = O.discharge([kept], facts=None, code=res.code.replace("y = x * 2\n    else", "y = x * 3\n    else"),
                         before=AUTOCAST_SRC)
    assert bad["result"] == "refuted", bad
    (cpu_only,) = O.discharge([kept], facts=None, code=res.code.replace(' or torch.is_autocast_enabled("cuda")', ""),
                              before=AUTOCAST_SRC)
    assert cpu_only["result"] == "refuted" and "cuda" in cpu_only["counterexample"], cpu_only
    # the encoder's own device set decides, not the certificate's: a record naming cpu only
    # does not make a cpu-only guard pass, nor does a guard missing mps
    (tampered,) = O.discharge([{**kept, "devices": ["cpu"]}], facts=None,
                              code=res.code.replace(' or torch.is_autocast_enabled("cuda")', ""), before=AUTOCAST_SRC)
    assert tampered["result"] == "refuted", tampered
    (no_mps,) = O.discharge([kept], facts=None, code=res.code.replace(' or torch.is_autocast_enabled("mps")', ""),
                            before=AUTOCAST_SRC)
    assert no_mps["result"] == "refuted" and "mps" in no_mps["counterexample"], no_mps
    (nothing,) = O.discharge([{**kept, "original": "if p:\n    y = 1\n"}], facts=None, code=res.code,
                             before=AUTOCAST_SRC)
    assert nothing["result"] == "refuted" and "not consecutive statements of one block of the version before" in nothing["counterexample"]
    exec(compile(res.code, "<mended>", "exec"), ns := {})
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    for xs in (x.abs(), -x.abs()):
        for on in (False, True):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on):
                exec(compile(AUTOCAST_SRC, "<orig>", "exec"), orig := {})
                want, got = orig["f"](xs, w), ns["f"](xs, w)
            assert want.dtype == got.dtype and torch.equal(want, got)


@pytest.mark.parametrize("source, line, words", [
    ("import torch\n\n\ndef f(a, b):\n    m = a.all() and b.all()\n    return m\n", 5, "not tensor logic"),
    ("import torch\n\n\ndef f(x):\n    y = x * 2 if x.sum() > 0 else x\n    return y\n", 5, "conditional expression"),
    ("import torch\n\n\ndef f(x):\n    if (s := x.sum()) > 0:\n        x = x * s\n    return x\n", 5, ":="),
])
def test_autocast_guarded_declines_what_it_cannot_keep_verbatim(source, line, words):
    from mend.rules.predicated_control_flow import autocast_guarded

    res = autocast_guarded(cst.parse_module(source), line)
    assert isinstance(res, Decline) and words in res.reason, res
    assert not isinstance(rewrite(cst.parse_module(source), line), Decline)   # the rule's own form applies


def test_a_tuple_returned_on_every_side_is_selected_element_by_element(tmp_path):
    """helper-53's k9j: ``if not mask.any(): return h, m`` then ``return h * m[:, None], m * 2``;
    the first version passed the tuples to torch.where (a TypeError its differential test
    caught). Now one where per element, with both outcomes forced, and the same outputs."""
    from mend.pipeline import fix
    from tests.conftest import FIXTURES, assert_one_graph_and_same_outputs

    res = fix(str(FIXTURES / "tuple_early_return.py"), unsafe_fixes=True, max_examples=8)
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    (rw,) = res.rewrites
    kinds = [o["kind"] for o in rw["obligations"]]
    assert kinds.count("where-equals-ite") == 2 and kinds.count("same-dtype") == 2
    assert "return (torch.where(_mend_pred_0, h, h * m[:, None]), torch.where(_mend_pred_0, m, m * 2))" in res.mended
    assert_one_graph_and_same_outputs(FIXTURES / "tuple_early_return.py", res.mended, tmp_path, "tup")


def test_an_integer_remainder_by_a_nonzero_constant_cannot_raise(tmp_path):
    """helper-60: `ids % 100` on the untaken side was refuted ("integer `%` raises on a zero
    divisor"); a literal divisor is now decided. A module attribute (`self.vocab`, which an
    annealing method may set to 0: helper-62) decides only at the observed tier, so torch.where
    is not a safe fix there; a divisor passed in stays refuted (it may be 0)."""
    from mend.fix import fix
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES

    src = FIXTURES / "wrap_ids_mod_vocab.py"
    res = fix(str(src), verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert rw["safety"]["label"] == "safe" and (res.before.graph_count, res.after.graph_count) == (2, 1)
    ob = next(o for o in rw["obligations"] if o["kind"] == "untaken-side-cannot-raise")
    assert ob["result"] == "proved" and ob["tier"] == "general"
    path = tmp_path / "wrap.py"
    path.write_text(res.mended)
    a, b = load_file_module(src, "_wm_a").Model(), load_file_module(path, "_wm_b").Model()
    b.load_state_dict(a.state_dict())
    for ids in (torch.tensor([[5, 150, 7]]), torch.tensor([[5, 15, 7]]), torch.tensor([[250, 99, 0]])):
        assert torch.equal(a(ids), b(ids))
    attr = tmp_path / "attr.py"
    attr.write_text(src.read_text().replace("ids = ids % 100", "ids = ids % self.vocab"))
    res = fix(str(attr), unsafe_fixes=True, verify="standard", max_examples=5)
    for rw in res.rewrites:   # torch.cond runs only the taken side; torch.where would evaluate `% self.vocab`
        ob = next((o for o in rw["obligations"] if o["kind"] == "untaken-side-cannot-raise"), None)
        assert ob is None or ob["tier"] == "observed" and rw["safety"]["label"] == "unsafe", rw
    passed_in = tmp_path / "passed_in.py"
    passed_in.write_text(src.read_text().replace("def forward(self, ids):", "def forward(self, ids, n=100):")
                         .replace("ids = ids % 100", "ids = ids % n"))
    res = fix(str(passed_in), verify="standard", max_examples=5)
    assert res.rewrites == [] and "zero divisor" in res.declined[0].reason


def test_a_branch_in_a_layer_loop_is_predicated_on_each_iteration(tmp_path):
    """helper-60: a per-layer rescale inside `for layer in self.layers` was declined outright
    ("inside a loop"), leaving the frame skipped (0 graphs). It is now predicated on each
    iteration (unsafe: `loop-facts-agree` is an observation), 0 -> 1 graph, with outputs and
    gradients equal; iterations whose shapes differ are refuted."""
    from mend.fix import fix
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES

    src = FIXTURES / "loop_layer_rescale.py"
    res = fix(str(src), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert rw["safety"]["label"] == "unsafe" and (res.before.graph_count, res.after.graph_count) == (0, 1)
    ob = next(o for o in rw["obligations"] if o["kind"] == "loop-facts-agree")
    assert ob["result"] == "checked" and "all 3 iterations" in ob["checked_by"]
    path = tmp_path / "loop.py"
    path.write_text(res.mended)
    orig, mended = load_file_module(src, "_llr_a"), load_file_module(path, "_llr_b")
    a, b = orig.Model(), mended.Model()
    b.load_state_dict(a.state_dict())
    for scale in (20.0, 0.01, 1.0):
        x = (torch.randn(4, 8, generator=torch.Generator().manual_seed(3)) * scale).requires_grad_()
        y = x.detach().clone().requires_grad_()
        assert torch.equal(a(x), b(y))
        a(x).sum().backward()
        b(y).sum().backward()
        assert torch.equal(x.grad, y.grad)
    assert fix(str(src), verify="standard", max_examples=5).rewrites == []   # unsafe: withheld by default
    shapes = tmp_path / "shapes.py"
    shapes.write_text(src.read_text().replace("nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])",
                                              "nn.ModuleList([nn.Linear(8, 16), nn.Linear(16, 8)])"))
    res = fix(str(shapes), unsafe_fixes=True, verify="standard", max_examples=5)
    assert res.rewrites == [] and "differs between iterations" in res.declined[0].reason


def test_a_where_form_of_an_elif_chain_of_submodule_calls_carries_its_caveat():
    """helper-88 N1: torch.cond takes one if/else, so an elif chain of submodule calls is tried
    as torch.where; the candidate's caveat is what the pipeline adds to a differential-test
    decline (the untaken submodules' parameters get a zero gradient)."""
    import libcst as cst

    from mend.rules.predicated_control_flow import rewrite

    src = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def forward(self, h):\n"
           "        if h.mean() > 0:\n            y = self.block(h)\n        elif h.mean() < -1:\n"
           "            y = self.block2(h)\n        else:\n            y = h * 2.0\n        return y\n")
    res = rewrite(cst.parse_module(src), 7)
    assert res.form == "where" and res.caveat and "every side runs, `self.block(h)` included" in res.caveat
    assert "elif chain" in res.caveat and res.caveat in res.detail
    plain = src.replace("self.block(h)", "h * 3.0").replace("self.block2(h)", "h * 4.0")
    assert rewrite(cst.parse_module(plain), 7).caveat is None


_MOE = '''\
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def forward(self, x, gates):
        out = {init}
        for e, expert in enumerate({experts}):
            gate = gates[:, e:e + 1]
            if gate.any():
                out = out + gate * expert(x)
        {tail}
        return out
'''


@pytest.mark.parametrize("init, experts, tail, fixed", [
    ("torch.zeros_like(x)", "self.experts", "pass", True),          # 006's kind: the copy of `out` is unobservable
    ("torch.zeros_like(x)", "self.experts", "self.last = out", False),   # stored: the caller could tell the copy
    ("x * 0", "self.experts", "pass", True),
    ("x.new_zeros(x.shape)", "self.experts", "pass", True),
    ("x", "self.experts", "pass", False),                            # the caller's own tensor, returned
    ("+x", "self.experts", "pass", False),                           # helper-96 F2: these return x or a view
    ("torch.ravel(x)", "self.experts", "pass", False),
    ("F.dropout(x, 0.1, self.training)", "self.experts", "pass", False),
    ("x[:, :4]", "self.experts", "pass", False),                     # a view of it
    ("torch.zeros_like(x)", "self.experts", "y = out is x", False),  # identity read
    ("torch.zeros_like(x)", "experts_list", "pass", False),          # not over self: the guard cannot reach them
])
def test_a_loop_item_call_takes_cond_only_when_nothing_can_tell(init, experts, tail, fixed):
    source = _MOE.format(init=init, experts=experts, tail=tail)
    result = rewrite(cst.parse_module(source), 11)
    if fixed:
        assert isinstance(result, RewriteResult) and result.form == "cond", result
        assert "lambda: out.clone())" in result.code and 'getattr(self, "experts", None)' in result.code
    else:
        assert isinstance(result, Decline), result.code


def test_a_loop_item_rebound_in_the_loop_is_not_what_the_guard_checks():
    source = _MOE.format(init="torch.zeros_like(x)", experts="self.experts", tail="pass").replace(
        "            gate = gates[:, e:e + 1]\n", "            gate = gates[:, e:e + 1]\n            expert = self.shared\n")
    assert "expert = self.shared" in source
    result = rewrite(cst.parse_module(source), 12)
    assert isinstance(result, Decline) and "skips a call of the loop's item" in result.reason, result



@pytest.mark.parametrize("loop", ["for expert in self.experts.values():", "for e, expert in self.experts.items():"])
def test_a_moduledicts_experts_take_cond_too(loop):
    # helper-96's fd05/fd06: a ModuleDict's values() or items() are the dict's own modules
    source = _MOE.format(init="torch.zeros_like(x)", experts="self.experts", tail="pass").replace(
        "        for e, expert in enumerate(self.experts):", "        " + loop).replace(
        "gate = gates[:, e:e + 1]", "gate = gates[:, :1]")
    result = rewrite(cst.parse_module(source), 11)
    assert isinstance(result, RewriteResult) and result.form == "cond", result
    assert 'getattr(self, "experts", None)' in result.code


@pytest.mark.parametrize("value, fixed", [
    ("float(mask.shape[1])", True), ("float(mask.size(1))", True), ("float(len(mask))", True),
    ("float(mask.sum())", False), ("int(self.k)", False),
])
def test_a_size_converted_to_a_number_is_no_host_read(value, fixed):
    # helper-100 m03: `float(mask.shape[1])` on a side had been declined as "converts a tensor to a Python number"
    src = ("import torch\n\n\ndef forward(self, h, mask):\n    if mask.any():\n        d = h.sum(1)\n"
           f"    else:\n        d = torch.full_like(h[:, 0], {value})\n    return d\n")
    res = rewrite(cst.parse_module(src), 5)
    if fixed:
        assert isinstance(res, RewriteResult), res
    else:
        assert isinstance(res, Decline) and "to a Python number" in res.reason, res


def test_autocast_guarded_keeps_an_early_exit_with_its_fall_through():
    """The autocast-guarded form of `if p: return a` then `y = ...; return y` keeps the if and
    the fall-through the plan folded into the selection, verbatim, under the guard (it declined
    with "also moves setup" before); the screen checks the run, and refutes a kept if alone."""
    from mend.rules.predicated_control_flow import autocast_guarded
    from verifier import obligations as O

    src = "import torch\n\n\ndef f(x, w):\n    if x.sum() > 0:\n        return torch.mm(x, w)\n    y = x * 2\n    return y\n"
    res = autocast_guarded(cst.parse_module(src), 5)
    assert isinstance(res, RewriteResult), res
    kept = "        if x.sum() > 0:\n            return torch.mm(x, w)\n        y = x * 2\n        return y\n    else:\n"
    assert kept in res.code and "        return torch.where(x.sum() > 0, torch.mm(x, w), y)" in res.code
    (ob,) = [o for o in res.obligations if o["kind"] == "autocast-keeps-original"]
    (ok,) = O.discharge([ob], facts=None, code=res.code, before=src)
    assert ok["result"] == "checked", ok
    alone = res.code.replace(kept, "        if x.sum() > 0:\n            return torch.mm(x, w)\n    else:\n")
    (bad,) = O.discharge([ob], facts=None, code=alone, before=src)
    assert bad["result"] == "refuted", bad
