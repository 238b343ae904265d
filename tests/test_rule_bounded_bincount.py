"""bounded-bincount: `torch.bincount(I, minlength=M)` of argmax/max/topk indices becomes a
static-length count under a guard. The guarded expression equals bincount on adversarial
indices (NaN and infinite logits, M above and below the dimension, empty batches, rank 2);
end to end the router statistic goes 2 -> 1 graphs with the obligation checked; the encoder
re-derives the guard and the indices' origin from the mended source, and refutes tampering."""
from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import torch

from mend.rules import RULES
from mend.rules.bounded_bincount import RULE
from verifier.encoders.base import Ctx
from verifier.encoders.bounded_bincount import in_range

FIXTURES = Path(__file__).parent / "fixtures"


def _guarded(source: str, line: int):
    res = RULE.rewrite(cst.parse_module(source), line)
    assert not hasattr(res, "reason"), res
    return res


INLINE = "import torch\n\n\ndef f(logits, m):\n    return torch.bincount(logits.argmax(dim=-1), minlength=m)\n"
LOCAL = ("import torch\n\n\ndef f(logits, m):\n    top = torch.topk(logits, 2, dim=-1).indices\n"
         "    return torch.bincount(top.flatten(), minlength=m)\n")


def _outcome(fn, *args):
    try:
        out = fn(*args)
        return ("ok", out.dtype, tuple(out.shape), out.tolist())
    except Exception as exc:   # the same exception type either way
        return ("raised", type(exc).__name__)


FLAT = "import torch\n\n\ndef f(logits, m):\n    return torch.bincount(logits.argmax(dim=-1).flatten(), minlength=m)\n"
LOCAL_MAX = ("import torch\n\n\ndef f(logits, m):\n    best = logits.max(-1)[1]\n"
             "    return torch.bincount(best.flatten(), minlength=m)\n")


@pytest.mark.parametrize("source, line, original", [
    (INLINE, 5, lambda x, m: torch.bincount(x.argmax(dim=-1), minlength=m)),
    (FLAT, 5, lambda x, m: torch.bincount(x.argmax(dim=-1).flatten(), minlength=m)),
    (LOCAL, 6, lambda x, m: torch.bincount(torch.topk(x, 2, dim=-1).indices.flatten(), minlength=m)),
    (LOCAL_MAX, 6, lambda x, m: torch.bincount(x.max(-1)[1].flatten(), minlength=m)),
])
@pytest.mark.parametrize("shape, m", [((7, 4), 4), ((7, 4), 9), ((7, 4), 3), ((0, 4), 4), ((3, 2, 4), 4),
                                      ((5, 4), 0), ((), 4)])   # 0-d: x.shape[-1] does not exist (a review)
def test_the_guarded_count_equals_bincount(source, line, original, shape, m):
    ns: dict = {}
    exec(compile(_guarded(source, line).code, "<mended>", "exec"), ns)
    g = torch.Generator().manual_seed(3)
    for x in (torch.randn(shape, generator=g), torch.full(shape, float("nan")),
              torch.where(torch.rand(shape, generator=g) < 0.3, float("inf"), -float("inf"))):
        if x.dim() and x.shape[-1] < 2 and "topk" in source:
            continue
        assert _outcome(ns["f"], x, m) == _outcome(original, x, m), (shape, m, x)


def test_the_router_statistic_is_fixed_and_checked():
    from mend.pipeline import fix

    res = fix(str(FIXTURES / "bincount_router.py"), verify="strict", max_examples=5)
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    (rw,) = res.rewrites
    assert rw["rule"] == "bounded-bincount" and rw["safety"]["label"] == "safe"
    (ob,) = rw["obligations"]
    assert ob["kind"] == "bincount-in-range" and ob["result"] == "checked"
    assert ob["lemmas"] == ["proofs/bb_bincount_scatter.smt2"]
    assert "`top1`, bound by the statement before, of `logits`" in ob["assumptions"][0]


def test_inline_topk_with_more_experts_than_logits_is_fixed():
    from mend.pipeline import fix

    res = fix(str(FIXTURES / "bincount_topk_inline.py"), max_examples=5)
    assert (res.before.graph_count, res.after.graph_count) == (2, 1)
    assert [r["rule"] for r in res.rewrites] == ["bounded-bincount"]


@pytest.mark.parametrize("source, line, old, new, why", [
    (INLINE, 5, "_mend_m >= _mend_x.shape[-1]", "_mend_m >= _mend_x.shape[-1] - 1", "is not"),
    (INLINE, 5, "_mend_m >= _mend_x.shape[-1]", "_mend_m >= _mend_x.shape[0]", "is not"),
    (INLINE, 5, " and _mend_x.dim() > 0", "", "is not"),
    (INLINE, 5, "type(_mend_x) is torch.Tensor and ", "", "is not"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), m)", "(_mend_x.argmax(dim=0), m)", "is not"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), m)", "(logits.argmax(dim=-1), m)", "not of the parameter"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), m)", "(_mend_x.sort(-1)[1][:, 0], m)", "not an argmax"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), m)", "(_mend_x.argmax(dim=-1), _mend_x)", "lambda's own parameter"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), m)", "(torch.Tensor.argmax(_mend_x, -1), m)", "unbound method"),
    (INLINE, 5, "def f(logits, m):", "type = str\n\n\ndef f(logits, m):", "binds `type`"),
    (INLINE, 5, "def f(logits, m):", "int = float\n\n\ndef f(logits, m):", "binds `int`"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), m)", "(_mend_x.argmax(dim=-1), m())", "minlength calls"),
    (LOCAL, 6, "    return (lambda", "    top = top * 2\n    return (lambda", "is not an argmax"),
    (LOCAL, 6, "    return (lambda", "    other = 1\n    return (lambda", "not a name bound"),
    (LOCAL, 6, "(top.flatten(), m, logits)", "(top.flatten(), m, top)", "whose dimension"),
    (LOCAL, 6, "(top.flatten(), m, logits)", "(top.view(torch.int32), m, logits)", "reshapes otherwise"),
    (LOCAL, 6, "dim=-1).indices", "dim=0).indices", "is not"),
    (LOCAL, 6, "    return (lambda", "    return print() or (lambda", "before it"),
])
def test_the_encoder_refutes_tampering(source, line, old, new, why):
    res = _guarded(source, line)
    (ob,) = res.obligations
    assert in_range(ob, Ctx({}, {}, res.code)).result == "checked"
    tampered = res.code.replace(old, new)
    assert tampered != res.code
    ob2 = {**ob, "mended": ob["mended"].replace(old, new) if old in ob["mended"] else ob["mended"]}
    out = in_range(ob2, Ctx({}, {}, tampered))
    assert out.result == "refuted", out
    assert why in (out.counterexample or ""), out.counterexample


def test_other_dynamic_shape_ops_keep_their_category_reason(tmp_path):
    from mend.locate import locate
    from mend.rules import match_site
    from mend.taxonomy import UNFIXABLE_REASONS

    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef f(x):\n    return x.nonzero()\n")
    verdict = match_site("dynamic-shape-op", locate(str(path), 5))
    assert verdict.reason == UNFIXABLE_REASONS["dynamic-shape-op"] and verdict.rule is None
    assert "bounded-bincount" in [r for r in RULES]


class _Sharded(torch.Tensor):
    """A review's subclass: its argmax reports global ids (shard offset 5), beyond minlength."""

    def argmax(self, *args, **kwargs):
        return super().argmax(*args, **kwargs).as_subclass(torch.Tensor) + 5


def test_a_tensor_subclass_falls_back_to_bincount():
    ns: dict = {}
    exec(compile(_guarded(INLINE, 5).code, "<mended>", "exec"), ns)
    x = torch.randn(6, 4).as_subclass(_Sharded)
    want = torch.bincount(x.argmax(dim=-1), minlength=4)
    assert want.shape == (9,) and torch.equal(ns["f"](x, 4), want)
