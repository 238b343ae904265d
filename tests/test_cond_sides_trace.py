"""torch.cond traces both sides on fake tensors under torch.compile, so a side that cannot take
the shapes raises there even where the `if` never runs it (helper-97 f1: a masked_fill whose
mask broadcasts only when the predicate holds had been emitted as a *safe* cond). The cond now
carries ``cond-sides-trace``: the sides' size, rank and dtype preconditions; errors on values (a
zero integer divisor) stay the untaken side's alone."""
import libcst as cst

from mend.fix import fix
from mend.rules.predicated_control_flow import rewrite
from tests.conftest import FIXTURES
from tests.test_obligations import facts, one, tensor


def test_the_encoder_decides_shapes_not_values():
    f = facts(scores=tensor(shape=(2, 6, 6)), mask=tensor("int64", (2, 6)))
    masked = "scores.masked_fill(mask[:, None, :] == 0, -10000.0)"
    general = one("cond-sides-trace", f, expr=masked)
    # the mask's length is free at the general tier: proved only where sizes equal on the example stay equal
    assert general["result"] == "proved" and general["tier"] == "equal-sizes", general
    bad = one("cond-sides-trace", facts(h=tensor(shape=(2, 3)), self__bias=tensor(shape=(5,))), expr="h + self.bias")
    assert bad["result"] == "refuted" and "sizes broadcast" in bad["counterexample"]
    # a zero divisor fails only when the op runs: the cond runs the taken side only
    ids = facts(ids=tensor("int64", (2, 3)), n={"kind": "num", "cat": "int", "value": 100})
    where = one("untaken-side-cannot-raise", ids, expr="ids % n", guard="ids.sum() > 0")
    assert where["result"] == "refuted" and "zero divisor" in where["counterexample"]
    traced = one("cond-sides-trace", ids, expr="ids % n")
    assert traced["result"] == "checked" and traced["tier"] == "general", traced


def test_the_cond_form_carries_it_and_a_mismatched_mask_makes_it_unsafe():
    src = (FIXTURES / "adversarial" / "h97_mask_broadcast_cond.py").read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.strip().startswith("if (mask == 0)"))
    res = rewrite(cst.parse_module(src), line, form="cond")
    (ob,) = [o for o in res.obligations if o["kind"] == "cond-sides-trace"]
    assert ob["expr"] == "scores.masked_fill(mask[:, None, :] == 0, -1.0e4)" and ob["guard"]
    out = fix(str(FIXTURES / "adversarial" / "h97_mask_broadcast_cond.py"), max_examples=3)
    assert out.rewrites == [] and out.mended == out.original     # safe fixes only: nothing applied
    (d,) = out.declined
    cond = next(e for e in d.choice["candidates"] if e["name"] == "cond")
    assert cond.get("withheld") and d.safety == "unsafe", d
