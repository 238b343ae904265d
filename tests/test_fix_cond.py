"""mend fix emits torch.cond where torch.where must not run the untaken side (a submodule
call, a guarded log domain): rewrite verified on both forced outcomes, eager and compiled,
gradients equal to the original's, and the mended model compiles to one graph."""
import json

import pytest
import torch

from mend.fix import fix
from mend.targets import load_file_module
from tests.conftest import FIXTURES, fix_in_own_process


@pytest.mark.parametrize("name, cond", [
    ("cond_submodule_branch.py", "torch.cond(h.mean() > 0, lambda: self.mlp_a(h), lambda: self.mlp_b(h))"),
    ("cond_log_guard.py", "torch.cond(x.min() > 0, lambda: torch.log(x), lambda: x * 0.0)"),
])
def test_cond_rewrite_emitted_verified_and_compiles(name, cond, tmp_path):
    # choose="always": the rule's own form (torch.cond here); the cost model may prefer the
    # gated torch.where alternative (gate.py), which the next test covers. In a fresh process, as
    # a user runs it: inside the suite's workers three of four fresh-clone CI runs (2026-12-07)
    # got the where form, the cond candidate unverified there (state another test left in the
    # worker, not found yet; not reproduced in a process of its own)
    doc, mended_text = fix_in_own_process(FIXTURES / name, tmp_path, "--examples", "8", "--choose", "always")
    assert (doc["before"]["graph_break_count"], doc["after"]["graph_break_count"]) == (1, 0), doc["declined"]
    (rw,) = doc["rewrites"]
    assert rw["rule"] == "predicated-control-flow" and "torch.cond" in rw["detail"], json.dumps(rw.get("choice"))
    assert cond in mended_text and "torch.compiler.is_compiling() and" in mended_text
    ev = rw["evidence"]
    assert ev["passed"] and "compiled:inductor/eval" in ev["modes"]
    assert all(o["forced"] == [False, True] for o in ev["predicate_outcomes"].values())
    results = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert "refuted" not in results.values() and results["cond-taken-side-only"] == "checked"  # a waiver resting on proofs/pcf_cond_ite.smt2
    taken = next(o for o in rw["obligations"] if o["kind"] == "cond-taken-side-only")
    assert taken["checked_by"] and "proofs/pcf_cond_ite.smt2" in taken["lemmas"]
    assert "finite-gradient" not in results and "untaken-side-runs" not in results

    mended = tmp_path / name
    mended.write_text(mended_text)
    orig = load_file_module(FIXTURES / name, f"_cond_orig_{name[:-3]}")
    new = load_file_module(mended, f"_cond_new_{name[:-3]}")
    (x,) = orig.get_inputs()
    for args in [(x,), (-x,)]:  # both outcomes
        torch.manual_seed(0)
        a, b = orig.Model().eval(), new.Model().eval()   # a module in training keeps the if (_mend_cond_ready)
        b.load_state_dict(a.state_dict())
        torch._dynamo.reset()
        with torch.no_grad():  # the cond (guarded by `not torch.is_grad_enabled()` where the sides differ)
            explained = torch._dynamo.explain(b)(*args)
            assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
            torch._dynamo.reset()
            assert torch.equal(a(*args), torch.compile(b, backend="eager", fullgraph=True)(*args))
        torch._dynamo.reset()
        want, got = a(*args), torch.compile(b, backend="eager")(*args)
        want.sum().backward()
        got.sum().backward()
        assert torch.equal(want, got)
        for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
            assert (p.grad is None) == (q.grad is None), n
            assert p.grad is None or (torch.equal(p.grad, q.grad) and not q.grad.isnan().any()), n
    torch._dynamo.reset()


def test_cond_keeps_the_ifs_error_when_the_predicate_is_not_one_element(tmp_path):
    """A predicate of batch size (one element on the example): with an empty batch the `if`
    raises; the emitted cond once returned an empty tensor under Inductor instead. The guard
    now requires numel() == 1, so other shapes take the original `if`."""
    src = FIXTURES / "adversarial" / "cond_batch_sized_predicate.py"
    # in a process of its own, as the test above (CI 2026-12-07: inside a worker the cond candidate
    # once failed its differential test, "not repeated when Hypothesis replayed the input")
    doc, mended = fix_in_own_process(src, tmp_path, "--examples", "3")
    assert "torch.cond(" in mended and ".numel() == 1" in mended, json.dumps([doc["declined"], [
        rw.get("choice") for rw in doc["rewrites"]]])[:4000]
    (tmp_path / "mended.py").write_text(mended)
    errors = []
    for path in (src, tmp_path / "mended.py"):
        mod = load_file_module(path, "_mend_cond_numel")
        torch.manual_seed(0)
        model = torch.compile(mod.Model().eval())
        with torch.no_grad():
            model(*mod.get_inputs())
            try:
                model(torch.randn(0, 8))
                errors.append(None)
            except RuntimeError as exc:
                errors.append(str(exc))
        torch._dynamo.reset()
    assert errors[0] is not None and errors == [errors[0]] * 2


GUARD = 'if torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps"):'


def same_under_autocast(res, name, inputs, tmp_path, graphs: int | None = 1):
    """The mended model equals the original (values and dtype of every output) on ``inputs``,
    eager and compiled, with and without autocast; and compiles to ``graphs`` graphs without it
    (None: not checked). Returns the output dtypes seen."""
    mended = tmp_path / name
    mended.write_text(res.mended)
    a_mod, b_mod = load_file_module(FIXTURES / name, f"_ac_o_{name[:-3]}"), load_file_module(mended, f"_ac_n_{name[:-3]}")
    torch.manual_seed(0)
    a = a_mod.Model().eval()
    b = b_mod.Model().eval()
    b.load_state_dict(a.state_dict())
    dtypes = set()
    for args in inputs:
        for on in (False, True):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=on), torch.no_grad():
                want = a(*args)
                torch._dynamo.reset()
                for got in (b(*args), torch.compile(b, backend="eager")(*args)):
                    pairs = list(zip(want, got)) if isinstance(want, tuple) else [(want, got)]
                    for w, g in pairs:
                        assert g.dtype == w.dtype and torch.equal(g, w), (args, on)
                        dtypes.add(w.dtype)
    torch._dynamo.reset()
    if graphs is not None:
        with torch.no_grad():   # the cond form runs without autograd only
            assert torch._dynamo.explain(b)(*inputs[0]).graph_count == graphs
    return dtypes


def test_sides_of_different_dtypes_under_autocast_keep_the_if_there(tmp_path):
    """Both forms pass without autocast (float32 sides); under torch.autocast(bfloat16) the linear
    side is bfloat16: `torch.where` returns float32 where the original returns bfloat16, and the
    `torch.cond` form raises under Inductor. Before the autocast leg the cond form was applied;
    now the autocast-guarded form is: the original `if` under autocast, the cond outside it."""
    res = fix(str(FIXTURES / "autocast_branch_dtype.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert GUARD in res.mended and "torch.cond(" in res.mended and "under autocast (cpu, cuda, xpu, mps) the if is kept" in rw["detail"]
    kept = next(o for o in rw["obligations"] if o["kind"] == "autocast-keeps-original")
    assert kept["result"] == "checked" and "static screen" in kept["checked_by"]
    tried = {c["name"]: c.get("note", "") for c in rw.choice["candidates"]}
    # the where form falls earlier, to its NaN gradients off the taken side (edge values)
    assert tried["where"].startswith("differential test failed"), tried
    inputs = [(torch.ones(2, 4),), (-torch.ones(2, 4),)]
    assert same_under_autocast(res, "autocast_branch_dtype.py", inputs, tmp_path) == {torch.float32, torch.bfloat16}


def test_an_autocast_difference_on_the_side_the_example_does_not_take_is_caught(tmp_path):
    """helper-38: the example takes the float32 side; the autocast leg forces the predicate both
    ways, so the bfloat16 `torch.mm` side (float32 after `torch.where`) is seen, and the
    unguarded `torch.where` is refuted; the autocast-guarded form is emitted."""
    res = fix(str(FIXTURES / "autocast_untaken_side.py"), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert GUARD in res.mended and "torch.where(" in res.mended
    inputs = [(torch.randn(4, 8),), (torch.randn(4, 8) + 10,)]
    assert same_under_autocast(res, "autocast_untaken_side.py", inputs, tmp_path) == {torch.float32, torch.bfloat16}


def test_the_unguarded_where_is_refuted_by_the_forced_autocast_leg():
    """Without the fallback (the rule's form only) the forced autocast leg is what declines it."""
    from mend.rules import RULES
    import dataclasses
    from mend import pipeline

    rule = RULES["predicated-control-flow"]
    pipeline.RULES["predicated-control-flow"] = dataclasses.replace(rule, fallback=None)
    try:
        res = fix(str(FIXTURES / "autocast_untaken_side.py"), unsafe_fixes=True, verify="standard", max_examples=5,
                  choose="always")
    finally:
        pipeline.RULES["predicated-control-flow"] = rule
    assert res.rewrites == [] and res.mended == res.original
    (d,) = res.declined
    assert "under autocast(cpu, bfloat16), eager, forced" in d.reason and "bfloat16" in d.reason, d.reason


def test_cond_binds_a_setup_temporary_before_the_cond(tmp_path):
    """helper-78's c21 (a VLM's image-token merge): `mask` is bound on the true side only and read
    there; the cond form binds it first and the branch lambda reads it through its closure."""
    src = ('import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n'
           '        super().__init__()\n        self.image_token_id = 5\n        self.emb = nn.Embedding(8, 4)\n'
           '        self.img_proj = nn.Linear(4, 4)\n\n    def forward(self, input_ids, pixel_feats):\n'
           '        h = self.emb(input_ids)\n        if (input_ids == self.image_token_id).any():\n'
           '            mask = (input_ids == self.image_token_id).unsqueeze(-1)\n'
           '            h = torch.where(mask, self.img_proj(pixel_feats), h)\n        else:\n            h = h * 1.0\n'
           '        return h\n\n\ndef get_inputs():\n    g = torch.Generator().manual_seed(21)\n'
           '    return (torch.tensor([[1, 5, 2], [3, 4, 5]]), torch.randn(2, 3, 4, generator=g))\n')
    path = tmp_path / "token_merge.py"
    path.write_text(src)
    res = fix(str(path), unsafe_fixes=True, max_examples=8, choose="always")
    (rw,) = res.rewrites
    assert "torch.cond" in rw["detail"] and "without autograd" in rw["detail"]
    assert ("            mask = (input_ids == self.image_token_id).unsqueeze(-1)\n            h = torch.cond("
            in res.mended)
    assert "refuted" not in {o["result"] for o in rw["obligations"]}
    new_path = tmp_path / "token_merge_mended.py"
    new_path.write_text(res.mended)
    orig = load_file_module(path, "_cond_temp_orig")
    new = load_file_module(new_path, "_cond_temp_new")
    ids, feats = orig.get_inputs()
    for args in [(ids, feats), (torch.zeros_like(ids), feats)]:   # both outcomes
        torch.manual_seed(0)
        a, b = orig.Model().eval(), new.Model().eval()   # a module in training keeps the if (_mend_cond_ready)
        b.load_state_dict(a.state_dict())
        torch._dynamo.reset()
        with torch.no_grad():
            explained = torch._dynamo.explain(b)(*args)
            assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
            torch._dynamo.reset()
            assert torch.equal(a(*args), torch.compile(b, backend="eager", fullgraph=True)(*args))
    torch._dynamo.reset()


def test_a_setup_temporary_named_like_a_module_is_not_bound_before_a_cond():
    """helper-80's p18: a temporary named `math` (here a tensor read from a global leaf) hid its
    reads from the gradient screen, so the cond lost its no-autograd guard: `W.grad` became
    tensor(0.) where the if leaves None."""
    import libcst as cst

    from mend.rules.predicated_control_flow import RULE

    src = ("import math\nimport torch\nfrom torch import nn\n\nW = torch.tensor(2.0, requires_grad=True)\n\n\n"
           "class Model(nn.Module):\n    def forward(self, x):\n        if x.min() > 0:\n            {t} = W * 2\n"
           "            y = torch.log(x) * {t}\n        else:\n            y = x * 3\n        return y\n")
    shadow = RULE.rewrite(cst.parse_module(src.format(t="math")), 10)
    assert "torch.cond" not in getattr(shadow, "code", "")
    plain = RULE.rewrite(cst.parse_module(src.format(t="t")), 10)
    assert "torch.cond(" in plain.code and "not torch.is_grad_enabled()" in plain.code
