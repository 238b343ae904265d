"""Gradient gates on torch.where sides: predicated-control-flow's gate.py, the verifier's
``gradient-gated`` check (verifier/encoders/gradient_gate.py) and proofs/pcf_gate_gradient.smt2.
The untaken side of a torch.where used to send 0 * inf = NaN into the gradient (held-out
cases 204 and 205 of the second review round); a gate on each input stops it."""
import ast

import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.rules.predicated_control_flow import rewrite
from mend.rules.predicated_control_flow.gate_examples import GATE_EXAMPLES
from mend.targets import load_file_module
from tests.conftest import FIXTURES
from verifier.encoders.base import Ctx
from verifier.encoders.gradient_gate import gated

SRC = """import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        h = x * 2
        if h.min() > 0:
            y = torch.log(h) * self.w
        else:
            y = h
        return y
"""
SIDE = "torch.log(_mend_gate(_mend_pred_0, h)) * _mend_gate(_mend_pred_0, self.w)"


def _result(src=SRC, line=13):
    result = rewrite(cst.parse_module(src), line)
    obs = [o for o in result.obligations if o["kind"] == "gradient-gated"]
    return result, obs


def test_rewrite_gates_names_and_parameters_and_adds_the_helper_once():
    result, (ob,) = _result()
    assert ob["expr"] == SIDE and ob["plain"] == "torch.log(h) * self.w" and ob["keep"] == "_mend_pred_0"
    assert "finite-gradient" not in {o["kind"] for o in result.obligations}
    assert f"y = torch.where(_mend_pred_0, {SIDE}, h)" in result.code
    assert result.code.count("def _mend_gate(") == 1


def test_check_accepts_the_emitted_code_and_cites_the_lemma():
    result, (ob,) = _result()
    out = gated(ob, Ctx(facts={}, defs={}, code=result.code))
    assert out.result == "checked" and out.lemmas == ("proofs/pcf_gate_gradient.smt2",)


@pytest.mark.parametrize("old, new, why", [
    ("_mend_gate(_mend_pred_0, self.w)", "self.w", "`self` is read without a gate"),
    ("_mend_gate(_mend_pred_0, h)", "_mend_gate(torch.logical_not(_mend_pred_0), h)", "not the side's path condition"),
    ("_mend_gate(_mend_pred_0, h)", "_mend_gate(_mend_pred_0, h.abs())", "computed inside the gate"),
    ("torch.log(_mend_gate(_mend_pred_0, h))", "self.proj(_mend_gate(_mend_pred_0, h))", "submodule"),
])
def test_check_refutes_a_side_that_is_not_fully_gated(old, new, why):
    result, (ob,) = _result()
    code, expr = result.code.replace(old, new), ob["expr"].replace(old, new)
    plain = ob["plain"] if "abs" not in new else ob["plain"].replace("log(h)", "log(h.abs())")
    if "proj" in new:
        plain = plain.replace("torch.log(h)", "self.proj(h)")
    out = gated({**ob, "expr": expr, "plain": plain}, Ctx(facts={}, defs={}, code=code))
    assert out.result == "refuted" and why in out.counterexample, out


def test_check_refutes_an_altered_helper_and_a_side_other_than_the_plain_one():
    result, (ob,) = _result()
    altered = result.code.replace("value.detach())", "value)")
    assert gated(ob, Ctx(facts={}, defs={}, code=altered)).result == "refuted"
    other = gated({**ob, "plain": "torch.log(h) * self.v"}, Ctx(facts={}, defs={}, code=result.code))
    assert other.result == "refuted" and "forward obligations" in other.counterexample


def test_submodule_side_is_not_gated():
    """A gate on the inputs cannot reach a submodule's parameters: the side keeps its
    finite-gradient obligation (the verdict stays with the verifier, as before)."""
    src = SRC.replace("y = torch.log(h) * self.w", "y = torch.log(self.proj(h))")
    result, obs = _result(src)
    assert not obs and "_mend_gate" not in result.code


def _grads(model, args):
    args = tuple(a.clone().requires_grad_(a.is_floating_point()) for a in args)
    out = model(*args)
    out.sum().backward()
    return out.detach(), [a.grad for a in args if a.grad is not None] + [p.grad for p in model.parameters()]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_soft_cap_fixture_one_graph_and_the_original_gradient_at_zero(tmp_path):
    res = fix(str(FIXTURES / "gated_soft_cap.py"), max_examples=8, unsafe_fixes=True)
    assert (res.before.graph_count, res.after.graph_count) == (4, 1), res.declined
    (rw,) = res.rewrites
    # helper-104 B1: anomaly detection enabled around backward() only still sees the gated side's NaN step
    assert rw["safety"]["label"] == "unsafe", rw["safety"]
    assert any("enabled around backward() alone" in r for r in rw["safety"]["reasons"]), rw["safety"]
    kinds = {o["kind"]: o for o in rw["obligations"]}
    assert kinds["gradient-gated"]["result"] == "checked" and "finite-gradient" not in kinds
    (tmp_path / "m.py").write_text(res.mended)
    orig = load_file_module(FIXTURES / "gated_soft_cap.py", "_gate_orig_cap")
    new = load_file_module(tmp_path / "m.py", "_gate_new_cap")
    for x in (orig.get_inputs()[0], torch.zeros(2, 8), orig.get_inputs()[0] * 0.01):
        torch.manual_seed(0)
        a = orig.Model()
        b = new.Model()
        b.load_state_dict(a.state_dict())
        (ya, ga), (yb, gb) = _grads(a, (x,)), _grads(b, (x,))
        assert torch.equal(ya, yb) and _same(ga, gb) and all(g.isfinite().all() for g in gb)
    # the trap is real: the ungated selection's gradient at h = 0 is NaN
    h = torch.zeros(2, 8, requires_grad=True)
    n = h.norm()
    torch.where(n > 1.5, h * (1.5 / n), h).sum().backward()
    assert h.grad.isnan().all()


def test_entropy_elif_fixture_gates_each_side_on_its_path(tmp_path):
    res = fix(str(FIXTURES / "gated_entropy_elif.py"), max_examples=8, unsafe_fixes=True)
    assert (res.before.graph_count, res.after.graph_count) == (2, 1), res.declined
    (rw,) = res.rewrites
    keeps = sorted(o["keep"] for o in rw["obligations"] if o["kind"] == "gradient-gated")
    assert keeps == ["_mend_pred_0", "torch.logical_and(torch.logical_not(_mend_pred_0), _mend_pred_1)"]
    (tmp_path / "m.py").write_text(res.mended)
    orig = load_file_module(FIXTURES / "gated_entropy_elif.py", "_gate_orig_ent")
    new = load_file_module(tmp_path / "m.py", "_gate_new_ent")
    x, keep = orig.get_inputs()
    zero_col = keep.clone()
    zero_col[:, 0] = 0.0
    one_hot = torch.zeros(3, 6)
    one_hot[:, 2] = 1.0
    for args in [(x, keep), (x, zero_col), (x * 0.0 + one_hot * 40.0, keep), (x, one_hot)]:
        torch.manual_seed(0)
        a = orig.Model()
        b = new.Model()
        b.load_state_dict(a.state_dict())
        (ya, ga), (yb, gb) = _grads(a, args), _grads(b, args)
        assert torch.equal(ya, yb) and all(torch.allclose(p, q, equal_nan=True, rtol=0, atol=0) for p, q in zip(ga, gb))
        assert [bool(g.isfinite().all()) for g in ga] == [bool(g.isfinite().all()) for g in gb]


def test_review_findings_hooks_declined_helper_left_alone_and_cosh_gated():
    """An adversarial review's cases: a tensor hook registered in the function would fire on
    the untaken side's zero gradient (declined); the gate helper's own test is never taken for a
    site; cosh (overflow: an infinite partial) is gated like exp."""
    hooked = SRC.replace("        h = x * 2\n", "        h = x * 2\n        h.register_hook(lambda g: None)\n")
    out = rewrite(cst.parse_module(hooked), 14)
    assert not hasattr(out, "code") and "tensor hook" in out.reason
    result, _ = _result()
    line = result.code.splitlines().index("    if isinstance(value, torch.Tensor) and value.requires_grad and "
                                          "torch.is_grad_enabled():") + 1
    helper = rewrite(cst.parse_module(result.code), line)
    assert not hasattr(helper, "code") and "mend's own helper" in helper.reason
    cosh, obs = _result(SRC.replace("torch.log(h) * self.w", "torch.cosh(h)"))
    assert [o["plain"] for o in obs] == ["torch.cosh(h)"]


def test_complex_inputs_are_drawn_not_crashed_on():
    """An adversarial review's crash: a complex64 input reached the integer strategy
    (`min_all` is not implemented for complex) and mend exited with an internal error."""
    from hypothesis import given, settings

    from verifier.differential import inputs_strategy

    seen = []

    @settings(max_examples=5, database=None, deadline=None)
    @given(inputs_strategy((torch.randn(4, 8, dtype=torch.complex64),), edge=True))
    def draw(args):
        seen.append(args[0])

    draw()
    assert seen and all(t.dtype == torch.complex64 and t.shape[1:] == (8,) for t in seen)


def test_anomaly_detection_runs_the_original_if(tmp_path):
    """helper-88 F2: the gated side's backward runs on the untaken path with a zero gradient,
    and under anomaly detection `LogBackward0 returned nan values` raised where the original's
    backward passed. The gated form now keeps the original `if` under
    `torch.is_anomaly_enabled()` (`anomaly-keeps-original`, a static screen)."""
    from verifier.encoders.autocast_guard import anomaly_keeps_original

    result, _ = _result()
    assert "if not torch.compiler.is_compiling() and torch.is_anomaly_enabled():" in result.code
    (ob,) = [o for o in result.obligations if o["kind"] == "anomaly-keeps-original"]
    assert anomaly_keeps_original(ob, Ctx({}, {}, result.code, SRC)).result == "checked"
    stripped = result.code.replace(" and torch.is_anomaly_enabled()", "", 1)
    assert anomaly_keeps_original(ob, Ctx({}, {}, stripped, SRC)).result == "refuted"
    (tmp_path / "orig.py").write_text(SRC)
    (tmp_path / "mended.py").write_text(result.code)
    orig = load_file_module(tmp_path / "orig.py", "_gate_anom_orig")
    new = load_file_module(tmp_path / "mended.py", "_gate_anom_new")
    grads = []
    for mod in (orig, new):
        torch.manual_seed(0)
        model = mod.Model()
        x = torch.tensor([[-1.0, 2.0, 3.0, 4.0]], requires_grad=True)   # h.min() <= 0: the log side is not taken
        with torch.autograd.set_detect_anomaly(True):
            model(x).sum().backward()
        grads.append((x.grad, model.w.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and grads[0][1] is None and grads[1][1] is None


# the rule's own FIX example of an early exit (gate_examples.py)
EARLY_EXIT = next(src for src, _ in GATE_EXAMPLES if "return h.sqrt()" in src)


def test_anomaly_form_keeps_an_early_exit_with_its_fall_through(tmp_path):
    """helper-102's m03: `if p: return a` then `y = ...; return y` was declined ("the
    anomaly-guarded form needs a plan that replaces the if alone") because the plan also
    folds the fall-through into the selection. The kept branch now holds the if and that
    fall-through, verbatim and in order; the screen accepts exactly that run of the version
    before, and under anomaly detection the mended model's gradient is the original's."""
    from verifier.encoders.autocast_guard import anomaly_keeps_original

    result, _ = _result(EARLY_EXIT, 7)
    (ob,) = [o for o in result.obligations if o["kind"] == "anomaly-keeps-original"]
    assert ob["original"] == "if (h > 0).all():\n    return h.sqrt()\ny = h.abs() + 1\nreturn y\n"
    assert anomaly_keeps_original(ob, Ctx({}, {}, result.code, EARLY_EXIT)).result == "checked"
    kept = "            y = h.abs() + 1\n            return y\n        else:"
    assert kept in result.code
    # the kept run lost its fall-through, or the fall-through is not the version before's: refuted
    for code, before in ((result.code.replace(kept, "        else:", 1), EARLY_EXIT),
                         (result.code, EARLY_EXIT.replace("y = h.abs() + 1", "y = h.abs() + 2"))):
        assert anomaly_keeps_original(ob, Ctx({}, {}, code, before)).result == "refuted"
    # helper-104 S1: the screen accepted the kept run anywhere in the file; now the guarded if must
    # stand where the run stood, with the new code in its else (exclusive: nothing runs twice)
    def guarded_if(tree):
        return next((fn, j) for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) for j, st in enumerate(fn.body)
                    if isinstance(st, ast.If) and "is_anomaly_enabled" in ast.unparse(st.test))
    for mutate in ("no else", "new code after the if"):
        tree = ast.parse(result.code)
        fn, j = guarded_if(tree)
        new_code, fn.body[j].orelse = fn.body[j].orelse, []
        if mutate != "no else":
            fn.body[j + 1:j + 1] = new_code   # the kept run would fall through into the new code
        assert anomaly_keeps_original(ob, Ctx({}, {}, ast.unparse(tree), EARLY_EXIT)).result == "refuted", mutate
    moved = EARLY_EXIT + "\n\ndef elsewhere(h):\n    if not torch.compiler.is_compiling() and torch.is_anomaly_enabled():\n" + \
        "".join("        " + line + "\n" for line in ob["original"].splitlines()) + "    else:\n        return h\n"
    assert anomaly_keeps_original(ob, Ctx({}, {}, moved, EARLY_EXIT)).result == "refuted"
    (tmp_path / "orig.py").write_text(EARLY_EXIT)
    (tmp_path / "mended.py").write_text(result.code)
    grads = []
    for name in ("orig", "mended"):
        model = load_file_module(tmp_path / f"{name}.py", f"_gate_exit_{name}").Model()
        h = torch.tensor([-1.0, 4.0], requires_grad=True)   # not all positive: the sqrt side is not taken
        with torch.autograd.set_detect_anomaly(True):
            model(h).sum().backward()
        grads.append(h.grad)
    assert torch.equal(grads[0], torch.tensor([-1.0, 1.0])) and torch.equal(grads[0], grads[1])
