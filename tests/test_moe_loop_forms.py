"""The per-expert skip of shared case 006 as MoE code also writes it: experts indexed
(``self.experts[e]``, or ``expert = self.experts[e]`` first), the accumulator returned in a
tuple with an auxiliary loss or through a view. Each takes torch.cond per expert as the
``enumerate`` form does; what would let a caller tell the false side's copy, or let the called
module be one the guard does not check, is declined."""
import libcst as cst
import pytest
import torch

from mend.fix import fix
from mend.rules import Decline, RewriteResult
from mend.rules.predicated_control_flow import rewrite
from mend.targets import load_file_module

_MOE = '''\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, dim: int = 8, num_experts: int = 4):
        super().__init__()
        self.router = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))
        self.shared = nn.Linear(dim, dim)
        with torch.no_grad():
            self.router.bias.copy_(torch.tensor([0.0, 0.0, 0.0, -1.0e4]))

    def forward(self, x):
        logits = self.router(x)
        gates = torch.zeros_like(logits).scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
        out = torch.zeros_like(x)
        for e in range(len(self.experts)):
            gate = gates[:, e:e + 1]
            {pick}
            if gate.any():
                out = out + gate * torch.tanh({call}(x))
        {tail}
        return {ret}


def get_inputs():
    return (torch.randn(10, 8, generator=torch.Generator().manual_seed(3)),)
'''
_LINE = 21   # the `if gate.any():`


def _source(pick="pass", call="expert", tail="pass", ret="out"):
    return _MOE.format(pick=pick, call=call, tail=tail, ret=ret)


@pytest.mark.parametrize("pick, call, tail, ret, fixed", [
    ("expert = self.experts[e]", "expert", "pass", "out", True),            # one binding: one of the experts
    ("pass", "self.experts[e]", "pass", "out", True),
    ("expert = self.experts[e]", "expert", "aux = logits.pow(2).mean()", "out, aux", True),   # a tuple returned
    ("expert = self.experts[e]", "expert", "pass", "out.view(-1, 2, 4)", True),                # a view returned
    ("expert = self.experts[e]", "expert", "pass", "(out.view(-1, 2, 4), out)", True),
    # the name may hold a module the guard does not check
    ("expert = self.experts[e] if e else self.shared", "expert", "pass", "out", False),
    ("expert = self.experts[e]", "expert", "expert = self.shared", "out", False),
    ("expert = self.experts[e]", "expert", "self.experts = nn.ModuleList()", "out", False),
    # the caller could tell the copy from the accumulator
    ("expert = self.experts[e]", "expert", "self.last = out", "out", False),
    ("expert = self.experts[e]", "expert", "pass", "[out]", True),            # a list, a dict value, a transpose
    ("expert = self.experts[e]", "expert", "pass", '{"out": out, "aux": logits}', True),
    ("expert = self.experts[e]", "expert", "pass", "out.T", True),
    ("expert = self.experts[e]", "expert", "pass", "{out: 1}", False),        # a key is hashed by identity
    ("expert = self.experts[e]", "expert", "pass", "out.T.data_ptr()", False),
    ("expert = self.experts[e]", "expert", "pass", "out.grad_fn", False),
    ("expert = self.experts[e]", "expert", "pass", "out.data_ptr()", False),
    ("expert = self.experts[e]", "expert", "pass", "out.add_(1)", False),
])
def test_indexed_experts_and_returned_forms(pick, call, tail, ret, fixed):
    result = rewrite(cst.parse_module(_source(pick, call, tail, ret)), _LINE)
    if fixed:
        assert isinstance(result, RewriteResult) and result.form == "cond", result
        assert "lambda: out.clone())" in result.code and 'getattr(self, "experts", None)' in result.code
    else:
        assert isinstance(result, Decline), result.code


def test_indexed_expert_with_aux_loss_compiles_to_one_graph(tmp_path):
    # 0 graphs (Dynamo skipped the frame: a break in a loop) -> 1, outputs equal eager and compiled;
    # before, the tuple return declined it and the index form was kept on a roofline tie
    src = tmp_path / "moe_aux.py"
    src.write_text(_source("expert = self.experts[e]", "expert", "aux = logits.pow(2).mean()", "out, aux"))
    res = fix(str(src), unsafe_fixes=True, max_examples=5)
    (rw,) = res.rewrites
    assert rw.choice["chosen"] == "cond" and res.before.graph_count == 0 and res.after.graph_count == 1
    assert "Dynamo skips the whole frame" in rw.choice["candidates"][0]["note"]
    mended = tmp_path / "moe_aux_mended.py"
    mended.write_text(res.mended)
    a_mod, b_mod = load_file_module(src, "_moe_aux_a"), load_file_module(mended, "_moe_aux_b")
    torch.manual_seed(0)
    a = a_mod.Model().eval()
    b = b_mod.Model().eval()
    b.load_state_dict(a.state_dict())
    (x,) = a_mod.get_inputs()
    torch._dynamo.reset()
    with torch.no_grad():
        want = a(x)
        got = torch.compile(b, backend="eager", fullgraph=True)(x)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    torch._dynamo.reset()


def test_shape_model_indexes_with_a_python_int():
    # `self.temperature[e]` and `gates[:, e:e + 1]` with a loop's int `e`: the dim goes (an index)
    # or is the slice's length, with "index within size" a precondition; a tensor index is not
    # modelled (it selects), nor a float
    import z3

    from verifier.shapes import ShapeEval, _expr
    from verifier.smt import Unsupported

    facts = {"names": {"g": {"kind": "tensor", "shape": [10, 4], "dtype": "float32"},
                       "t": {"kind": "tensor", "shape": [4], "dtype": "int64"},
                       "e": {"kind": "num", "cat": "int", "value": 2},
                       "f": {"kind": "num", "cat": "float", "value": 2.0}}}

    def shape(text):
        se = ShapeEval(facts, {}, "general")
        mv = se.eval(_expr(text))
        solver = z3.Solver()
        solver.add(*[a for a, _ in se.assume], *[p for p, _ in se.pre])
        assert solver.check() == z3.sat
        return len(mv.shape), [why for _, why in se.pre]

    assert shape("g[:, e]") == (1, ["index e within size in `g[:, e]`"])
    assert shape("g[-1]") == (1, ["index -1 within size in `g[-1]`"])
    rank, _ = shape("g[:, e:e + 1]")
    assert rank == 2
    se = ShapeEval(facts, {}, "general")
    sliced = se.eval(_expr("g[:, e:e + 1]"))
    solver = z3.Solver()
    solver.add(*[a for a, _ in se.assume], z3.Int("e") == 3, z3.Int("g.shape[1]") == 4)
    assert solver.check() == z3.sat and solver.model().eval(sliced.shape[1]).as_long() == 1
    past = z3.Solver()   # past the end: an empty slice, as torch gives
    past.add(*[a for a, _ in se.assume], z3.Int("e") == 3, z3.Int("g.shape[1]") == 3)
    assert past.check() == z3.sat and past.model().eval(sliced.shape[1]).as_long() == 0
    for text in ("g[t]", "g[:, f]"):
        with pytest.raises(Unsupported):
            ShapeEval(facts, {}, "general").eval(_expr(text))


@pytest.mark.parametrize("loop", [
    "for e, expert in enumerate(self.experts.values()):",          # helper-97 f3
    "for e, (name, expert) in enumerate(self.experts.items()):",   # helper-97 y12
])
def test_enumerate_over_a_moduledicts_values_or_items(loop):
    source = _source().replace("self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))",
                               'self.experts = nn.ModuleDict({str(i): nn.Linear(dim, dim) for i in range(num_experts)})'
                               ).replace("        for e in range(len(self.experts)):", "        " + loop)
    result = rewrite(cst.parse_module(source), _LINE)
    assert isinstance(result, RewriteResult) and result.form == "cond", result
    assert 'getattr(self, "experts", None)' in result.code
    # the item rebound in the loop is not what the guard checks
    rebound = source.replace("            pass\n", "            expert = self.shared\n", 1)
    assert isinstance(rewrite(cst.parse_module(rebound), _LINE), Decline)


@pytest.mark.parametrize("before, ret", [
    ("flat = out.ravel()", "out, flat"),                   # helper-98: out and flat share storage for the caller
    ("flat = out.ravel()", "out"),                         # ... and a later in-place write through flat
    ("flat = torch.positive(out)", "out"),                 # torch functions that may return their input
    ("flat = F.dropout(out, 0.1, False)", "out"),
    ("flat = out.reshape(-1)", "out"),
    ("n = out.numel()", "out"),                            # metadata: no alias, still fixed
    ("s = out.sum()", "out"),                              # an allocating read: still fixed
])
def test_an_alias_of_the_accumulator_taken_anywhere_declines(before, ret):
    source = _source("expert = self.experts[e]", "expert", "pass", ret).replace(
        "import torch\n", "import torch\nimport torch.nn.functional as F\n").replace(
        "        out = torch.zeros_like(x)\n", f"        out = torch.zeros_like(x)\n        {before}\n")
    result = rewrite(cst.parse_module(source), _LINE + 2)
    fixed = before.startswith(("n =", "s ="))
    assert isinstance(result, RewriteResult) if fixed else isinstance(result, Decline), result


def test_iterating_the_accumulator_after_the_site_declines():
    # `for row in out:` binds views of the accumulator, which may escape (here into a list)
    source = _source("expert = self.experts[e]", "expert", "for row in out:\n            self.rows.append(row)")
    result = rewrite(cst.parse_module(source), _LINE)
    assert isinstance(result, Decline) and "a loop's iterable" in result.reason, result
    other = _source("expert = self.experts[e]", "expert", "for row in x:\n            self.rows.append(row)")
    assert isinstance(rewrite(cst.parse_module(other), _LINE), RewriteResult)
