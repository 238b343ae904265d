"""torch.cond for an early return, and setup temporaries bound inside their side's lambda
(predicated-control-flow, cond.py's ``_bound_inside``): a temporary whose gradient is
non-finite off the tested domain runs only where its side is taken. Each end to end, in a
process of its own as a user runs mend: the graph count, the outputs of both branch outcomes
eager and compiled (eager backend and Inductor) and, where the cond runs with autograd on,
the gradients."""
import pytest
import torch

from mend.targets import load_file_module
from tests.conftest import FIXTURES, fix_in_own_process


def _pair(name: str, mended_text: str, tmp_path):
    (tmp_path / name).write_text(mended_text)
    orig = load_file_module(FIXTURES / name, f"_cit_a_{name[:-3]}")
    new = load_file_module(tmp_path / name, f"_cit_b_{name[:-3]}")
    torch.manual_seed(0)
    a, b = orig.Model().eval(), new.Model().eval()
    b.load_state_dict(a.state_dict())
    return orig, a, b


@pytest.mark.parametrize("name, cond", [
    ("cond_early_return_rsqrt.py", "return torch.cond((var == 0).any(), lambda: centered * (1 + scale) + shift, "
                                   "lambda: (lambda h: h * (1 + scale) + shift)(centered * var.rsqrt()))"),
    ("cond_inner_temp_log.py", "y = torch.cond(x.min() > 0, lambda: (lambda lx: lx * lx)(torch.log(x)), "
                               "lambda: x * 0.5)"),
])
def test_the_temporary_runs_inside_its_branch(name, cond, tmp_path):
    doc, mended = fix_in_own_process(FIXTURES / name, tmp_path, "--examples", "8")
    assert (doc["before"]["graph_count"], doc["after"]["graph_count"]) == (2, 1), doc["declined"]
    (rw,) = doc["rewrites"]
    assert cond in mended, mended
    results = {o["kind"]: o["result"] for o in rw["obligations"]}
    # the shape and dtype of each side with the temporary written out, from the example's facts
    assert results["same-shape"] == "proved" and results["cond-branch-types"] == "proved", results
    assert "refuted" not in results.values() and "unknown" not in results.values(), results
    taken = next(o for o in rw["obligations"] if o["kind"] == "cond-taken-side-only")
    assert "finite-gradient" in taken["waives"]
    orig, a, b = _pair(name, mended, tmp_path)
    inputs = [orig.get_inputs(), orig.get_trap_inputs()]   # both outcomes
    for args in inputs:
        with torch.no_grad():
            ref = a(*args)
            assert torch.equal(ref, b(*args))
            for backend in ("eager", "inductor"):
                torch._dynamo.reset()
                got = torch.compile(b, backend=backend)(*args)
                assert torch.allclose(got, ref, rtol=1e-5, atol=1e-6) and not got.isnan().any(), backend
            torch._dynamo.reset()
            assert torch._dynamo.explain(b)(*args).graph_count == 1
    torch._dynamo.reset()


def test_a_cond_with_autograd_has_the_ifs_gradients_on_both_sides(tmp_path):
    # both sides read only `x`, so the cond also runs with autograd on: its backward
    # differentiates the taken branch only, so log's NaN gradient off its domain never appears
    name = "cond_inner_temp_log.py"
    doc, mended = fix_in_own_process(FIXTURES / name, tmp_path, "--examples", "3")
    assert "not torch.is_grad_enabled()" not in mended
    orig, a, b = _pair(name, mended, tmp_path)
    for args in (orig.get_inputs(), orig.get_trap_inputs()):
        torch._dynamo.reset()
        compiled = torch.compile(b, backend="aot_eager")
        xa, xb = args[0].clone().requires_grad_(), args[0].clone().requires_grad_()
        a(xa).sum().backward()
        compiled(xb).sum().backward()
        assert torch.allclose(xa.grad, xb.grad) and not xb.grad.isnan().any()
        assert torch.allclose(a.gain.grad, b.gain.grad)
        a.zero_grad(), b.zero_grad()
    torch._dynamo.reset()


def test_views_of_one_tensor_in_the_branches_decline_under_inductor(tmp_path):
    # helper-92's m02 as written: Inductor rejects the cond, the where leaks rsqrt's NaN gradient
    # (its finite-gradient obligation times out in Z3, so the differential test's drawn inputs must
    # hit a constant row: with the default 30 they do, at seed 0; with 3 the where passes, labelled
    # unsafe on that unknown obligation)
    doc, mended = fix_in_own_process(FIXTURES / "cond_early_return_chunk.py", tmp_path)
    assert (doc["before"]["graph_count"], doc["after"]["graph_count"]) == (2, 2)
    (dec,) = doc["declined"]
    cands = {c["name"]: c for c in dec["choice"]["candidates"]}
    assert "aliasing the input" in cands["cond"]["note"] and "(inductor)" in cands["cond"]["note"]
    assert "NaN" in cands["where"]["note"]
    assert mended is None   # nothing rewritten, nothing written
