"""mend fix emits torch.cond where torch.where must not run the untaken side (a submodule
call, a guarded log domain): rewrite verified on both forced outcomes, eager and compiled,
gradients equal to the original's, and the mended model compiles to one graph."""
import pytest
import torch

from mend.fix import fix
from mend.targets import load_file_module
from tests.conftest import FIXTURES


@pytest.mark.parametrize("name, cond", [
    ("cond_submodule_branch.py", "torch.cond(h.mean() > 0, lambda: self.mlp_a(h), lambda: self.mlp_b(h))"),
    ("cond_log_guard.py", "torch.cond(x.min() > 0, lambda: torch.log(x), lambda: x * 0.0)"),
])
def test_cond_rewrite_emitted_verified_and_compiles(name, cond, tmp_path):
    res = fix(str(FIXTURES / name), max_examples=8)
    assert (res.before.graph_break_count, res.after.graph_break_count) == (1, 0), res.declined
    (rw,) = res.rewrites
    assert rw["rule"] == "predicated-control-flow" and "torch.cond" in rw["detail"]
    assert cond in res.mended and "if torch.compiler.is_compiling()" in res.mended
    ev = rw["evidence"]
    assert ev["passed"] and "compiled:inductor/eval" in ev["modes"]
    assert all(o["forced"] == [False, True] for o in ev["predicate_outcomes"].values())
    results = {o["kind"]: o["result"] for o in rw["obligations"]}
    assert "refuted" not in results.values() and results["cond-taken-side-only"] == "proved"
    assert "finite-gradient" not in results and "untaken-side-runs" not in results

    mended = tmp_path / name
    mended.write_text(res.mended)
    orig = load_file_module(FIXTURES / name, f"_cond_orig_{name[:-3]}")
    new = load_file_module(mended, f"_cond_new_{name[:-3]}")
    (x,) = orig.get_inputs()
    for args in [(x,), (-x,)]:  # both outcomes
        torch.manual_seed(0)
        a, b = orig.Model(), new.Model()
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
