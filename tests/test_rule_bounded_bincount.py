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
    (INLINE, 5, "_mend_m >= _mend_n", "_mend_m >= _mend_n - 1", "is not"),
    (INLINE, 5, " and _mend_m < 2**63", "", "is not"),
    (INLINE, 5, "type(_mend_n) is int", "_mend_n is not None", "is not"),
    (INLINE, 5, " and not torch.compiler.is_exporting()", "", "is not"),
    (INLINE, 5, "_mend_x.shape[-1] if", "_mend_x.shape[0] if", "the bound"),
    (INLINE, 5, " and _mend_x.dim() > 0", "", "the bound"),
    (INLINE, 5, "if type(_mend_x) is torch.Tensor and ", "if ", "the bound"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), ", "(_mend_x.argmax(dim=0), ", "the bound"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), ", "(logits.argmax(dim=-1), ", "not of the parameter"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), ", "(_mend_x.sort(-1)[1][:, 0], ", "not an argmax"),
    (INLINE, 5, " else None, m))", " else None, _mend_x))", "lambda's own parameter"),
    (INLINE, 5, "(_mend_x.argmax(dim=-1), ", "(torch.Tensor.argmax(_mend_x, -1), ", "unbound method"),
    (INLINE, 5, "def f(logits, m):", "type = str\n\n\ndef f(logits, m):", "binds `type`"),
    (INLINE, 5, "def f(logits, m):", "int = float\n\n\ndef f(logits, m):", "binds `int`"),
    (INLINE, 5, " else None, m))", " else None, m()))", "minlength calls"),
    # helper-52: the meta device (bincount has no meta kernel), vmap (the in-place count), the fallback
    (INLINE, 5, "_mend_i.device.type != 'meta' and ", "", "is not"),
    (INLINE, 5, ".scatter_add(0", ".scatter_add_(0", "is not"),
    (INLINE, 5, "else torch.bincount(_mend_i, minlength=_mend_m)", "else _mend_i.bincount(minlength=_mend_m)", "is not"),
    (LOCAL, 6, "    return (lambda", "    top = top * 2\n    return (lambda", "is not an argmax"),
    (LOCAL, 6, "    return (lambda", "    other = 1\n    return (lambda", "not a name bound"),
    (LOCAL, 6, "logits.shape[-1] if type(logits) is torch.Tensor and logits.dim() > 0",
     "top.shape[-1] if type(top) is torch.Tensor and top.dim() > 0", "the bound"),
    (LOCAL, 6, "(top.flatten(), ", "(top.view(torch.int32), ", "reshapes otherwise"),
    (LOCAL, 6, "dim=-1).indices", "dim=0).indices", "the bound"),
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


# --- helper-52's counterexamples to the previous form ------------------------------------------

def _functions(source: str, line: int) -> tuple:
    """(original f, mended f) of a one-function example."""
    res = _guarded(source, line)
    out = []
    for code in (source, res.code):
        scope: dict = {}
        exec(compile(code, "<example>", "exec"), scope)   # noqa: S102 - the rule's own example
        out.append(scope["f"])
    return tuple(out)


def _run(fn, *args):
    try:
        out = fn(*args)
        return ("ok", out.dtype, out.tolist())
    except Exception as exc:   # noqa: BLE001 - the exception type is what is compared
        return (type(exc).__name__,)


def test_vmap_counts_as_the_original():
    """The in-place ``zeros(m).scatter_add_`` failed under ``torch.func.vmap`` (an unbatched
    tensor written with batched indices); the out-of-place count runs as bincount's fallback does."""
    orig, mended = _functions(INLINE, 5)
    x = torch.randn(3, 6, 4, generator=torch.Generator().manual_seed(0))
    got = [_run(lambda t, fn=fn: torch.vmap(lambda row: fn(row, 4))(t), x) for fn in (orig, mended)]
    assert got[0] == got[1] and got[0][0] == "ok"


def test_meta_tensors_raise_as_the_original():
    """bincount has no meta kernel: the original raises NotImplementedError; the count ran."""
    orig, mended = _functions(INLINE, 5)
    x = torch.empty(6, 4, device="meta")
    assert _run(orig, x, 4) == _run(mended, x, 4) == ("NotImplementedError",)


def test_method_form_keeps_a_subclass_override():
    """``I.bincount(minlength=M)`` on a subclass that overrides ``bincount``: the fallback calls
    the method, not ``torch.bincount`` (the override was skipped)."""
    src = "import torch\n\n\ndef f(logits, m):\n    return logits.argmax(dim=-1).bincount(minlength=m)\n"
    orig, mended = _functions(src, 5)

    class Hist(torch.Tensor):
        def bincount(self, weights=None, minlength=0):
            counts = torch.Tensor.bincount(self.as_subclass(torch.Tensor), weights, minlength)
            return counts / counts.sum()

    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0)).as_subclass(Hist)
    assert _run(orig, x, 4) == _run(mended, x, 4)
    assert _run(orig, x, 4)[1] == torch.float32


def test_the_bound_is_read_before_minlength():
    """A minlength whose evaluation changes the bounding tensor in place (a property with a side
    effect, helper-52 F5): the bound is read on the tensor as the indices saw it."""
    src = "import torch\n\n\ndef f(scores, box):\n    return torch.bincount(scores.argmax(dim=-1), minlength=box.slots)\n"
    orig, mended = _functions(src, 5)
    make = lambda: torch.tensor([[0.0, 0, 0, 0, 0, 1], [1.0, 0, 0, 0, 0, 0]])  # noqa: E731  (2, 6): slot 5 wins
    a, b = make(), make()
    got_o, got_m = _run(orig, a, _Box(a)), _run(mended, b, _Box(b))
    assert got_o == got_m and got_o[0] == "ok"


class _Box:
    """``slots`` transposes the tensor it holds in place, then answers 4."""

    def __init__(self, t):
        self.t = t

    @property
    def slots(self):
        self.t.t_()
        return 4


def test_a_minlength_beyond_int64_raises_as_the_original():
    """helper-55: ``zeros(2**63)`` raised a TypeError where bincount raises a ValueError."""
    orig, mended = _functions(INLINE, 5)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    for m in (2**63, 2**64):
        assert _run(orig, x, m) == _run(mended, x, m) == ("ValueError",)


def test_strict_export_with_a_free_expert_dimension():
    """helper-55: the guard ``m >= n`` on a symbolic ``n`` put a range on a dimension declared
    free, which strict export rejected; a symbolic bound now keeps bincount."""
    from torch.export import Dim

    orig, mended = _functions(INLINE, 5)

    class Box(torch.nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, logits):
            return self.fn(logits, 4)

    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    wide = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    got = []
    for fn in (orig, mended):
        ep = torch.export.export(Box(fn), (x,), dynamic_shapes={"logits": {0: Dim("b"), 1: Dim("e")}}, strict=True)
        got.append(_run(ep.module(), wide))
    assert got[0] == got[1] and got[0][0] == "ok"
