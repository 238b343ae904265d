"""Writes into objects passed to a submodule (a KV cache) under predicated validation's
``state-unchanged-on-raise``. xlm's and flaubert's attention layers run after the check and
write only Python state of the cache they are given; Dynamo replays such writes after the
graph returns, so a failing check leaves them undone, as eager never reached them (measured
here). Accepting that was tried and refuted by an adversarial review: the same replay undoes
writes made *before* the check by anything in the graph (a module in a list attribute, a
hook, a decorator, a caller, the condition itself), and a cache whose update writes a tensor
in place is written by inductor before the failed assert surfaces. So such submodules stay
effects (unless the cache is made in the same call: tests/test_fresh_guard.py); the effect analysis reports them apart, with the review's other findings as
regression tests (aliases updated with ``op=``, stores through a fresh list, ``getattr`` of an
in-place method, a user submodule returning its buffer)."""
from pathlib import Path

import libcst as cst
import pytest
import torch
from torch import nn

import mend.rules.predicated_validation as pv
from verifier.effects import function_purity, function_writes, module_writes
from verifier.encoders.assert_async import state_unchanged
from verifier.facts import summarize

FIXTURES = Path(__file__).parent / "fixtures"

# compiled from a string: pytest rewrites a test module's own asserts
_SOURCE = '''
class Layer:
    def __init__(self):
        self.keys = None

    def update(self, k):
        self.keys = k if self.keys is None else torch.cat([self.keys, k])
        return self.keys


class Cache:
    def __init__(self):
        self.layers = [Layer()]
        self.is_updated = {}
        self.seen = []
        self.tag = None

    def update(self, k, i):
        return self.layers[i].update(k)


def after(x, cache):
    torch._assert_async((x > 0).all(), "mend-trap:x")
    k = cache.update(x * 2, 0)
    cache.is_updated[0] = True
    cache.seen.append(1)
    cache.tag = "set"
    return k + 1


def before(x, cache):
    cache.tag = "set"
    cache.seen.append(1)
    torch._assert_async((x > 0).all(), "mend-trap:x")
    return x + 1
'''
_NS: dict = {"torch": torch}
exec(compile(_SOURCE, "argument_writes_facts", "exec"), _NS)


def _state(c):
    return c.layers[0].keys, c.is_updated, c.seen, c.tag


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_python_writes_into_an_argument_are_replayed_after_the_graph(backend):
    """The fact the encoder rests on, and why the order matters: writes after a failing check
    are left undone (eager never reached them); writes before it are left undone too, where
    eager made them, so a submodule called before the check must stay an effect."""
    for name, eager_state in (("after", (None, {}, [], None)), ("before", (None, {}, [1], "set"))):
        torch._dynamo.reset()
        fn = _NS[name]
        compiled = torch.compile(fn, backend=backend, fullgraph=True)
        compiled(torch.ones(3), _NS["Cache"]())          # compiled on a passing call
        c, e = _NS["Cache"](), _NS["Cache"]()
        with pytest.raises(RuntimeError, match="mend-trap"):
            compiled(-torch.ones(3), c)
        with pytest.raises(RuntimeError, match="mend-trap"):
            fn(-torch.ones(3), e)
        assert _state(e) == eager_state
        assert _state(c) == (None, {}, [], None), (backend, name, _state(c))


def test_a_shape_error_after_a_failing_check_surfaces_while_tracing():
    """Adversarial review (r_shape): code after the check that only valid inputs satisfy fails
    while Dynamo traces the failing input's shapes, as TorchRuntimeError, before the check can
    run; eager raises the check's error. restore-at-boundary states this as an assumption."""
    def f(x, lengths):
        torch._assert_async(lengths.max() <= x.size(1), "mend-trap:k")
        b, s, d = x.shape
        return x.reshape(b, s // 2, 2 * d)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="eager")
    assert compiled(torch.ones(2, 6, 4), torch.tensor([6, 4])).shape == (2, 3, 8)
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError):
        compiled(torch.ones(2, 7, 4), torch.tensor([9, 4]))
    with pytest.raises(RuntimeError, match="mend-trap:k"):
        f(torch.ones(2, 7, 4), torch.tensor([9, 4]))
    from verifier.encoders.assert_async import restore_at_boundary
    out = restore_at_boundary({"restored": ("AssertionError", ""), "trap": "_MEND_TRAPS.k"}, _ctx({}))
    assert out.result == "checked" and any("TorchRuntimeError" in a for a in out.assumptions)


# --- the effect analysis ------------------------------------------------------------------

class _Attention(nn.Module):          # xlm's MultiHeadAttention.forward, in small
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(4, 4)
        self.layer_id = 0

    def forward(self, x, mask, cache=None, **kwargs):
        q = self.q(x)
        k = q
        if cache is not None:
            curr_cache = cache.self_attention_cache if hasattr(cache, "self_attention_cache") else cache
            k = curr_cache.update(k, self.layer_id, kwargs=kwargs)
            cache.is_updated[self.layer_id] = True
        scores = torch.matmul(q, k.transpose(0, 1))
        scores.masked_fill_(mask, -1.0)
        return scores


def test_cache_writes_are_argument_writes_and_fresh_tensors_are_local():
    effects, arguments, _ = module_writes(_Attention())
    assert effects == []
    assert len(arguments) == 2
    assert any("curr_cache.update()" in a and "passed in" in a for a in arguments)
    assert any("cache.is_updated[self.layer_id]" in a and "not a tensor" in a for a in arguments)
    # the strict analysis (what `torch.where` and the cost model's evaluation rely on) still counts them
    assert len(function_purity(_Attention.forward, 0, _Attention)[0]) == 2
    info = summarize(_Attention())
    assert not info["pure"] and info["strict_effects"] == [] and len(info["argument_writes"]) == 2


def _writes(body: str, params: str = "self, x, cache, name=None"):
    ns: dict = {"torch": torch}
    src = f"def forward({params}):\n" + "\n".join("    " + line for line in body.strip().splitlines())
    exec(compile(src, "<forward>", "exec"), ns)  # noqa: S102 - the test's own source
    import linecache
    linecache.cache["<forward>"] = (len(src), None, src.splitlines(True), "<forward>")
    return function_writes(ns["forward"], 0, nn.Module)


@pytest.mark.parametrize("body, culprit", [
    ("x += 1\nreturn x", "`x += ...` on a value that may be"),                 # a tensor argument, in place
    ("cache.keys[:, 0] = x\nreturn x", "store into `cache.keys[:, 0]`"),   # tensor __setitem__
    ("cache.keys[0] = x\nreturn x", "store into `cache.keys[0]`"),     # a computed value stored by index
    ("cache.keys.index_copy_(0, x, x)\nreturn x", "index_copy_"),      # StaticCache's write
    ("y = x.float()\ny.add_(1)\nreturn y", "y.add_()"),               # .float() may return x itself
    ("y = torch.transpose(x, 0, 1)\ny.add_(1)\nreturn y", "y.add_()"),  # a view of the argument
    ("y = +x\ny.add_(1)\nreturn y", "y.add_()"),                      # torch.positive returns x
    ("self.count = 1\nreturn x", "store into `self.count`"),           # module state
    ("cache.layers[0].keys[1] = 0\nreturn x", "store into `cache.layers[0].keys[1]`"),  # not a plain container
    ("c = cache.get()\nc.x = 1\nreturn x", "store into `c.x`"),        # a call's result: unknown object
    # adversarial review: an alias of an argument's or the module's tensor updated with op=
    ("kk = cache.layers[0].acc\nkk += x.sum()\nreturn x", "`kk += ...`"),
    ("a = self.acc\na += x.sum()\nreturn x", "`a += ...`"),
    ("m = self.stats(0)\nm += 1\nreturn x", "`m += ...`"),
    # ... a store through a fresh list into the tensor it holds, an in-place method by getattr
    ("buf = [cache.layers[0].acc]\nbuf[0][...] = x.sum()\nreturn x", "store into `buf[0][...]`"),
    ('getattr(x, "add_")(1)\nreturn x', "may fetch an in-place method"),
    ("getattr(x, name)(1)\nreturn x", "may fetch an in-place method"),
])
def test_traps_stay_effects(body, culprit):
    effects, arguments, _ = _writes(body)
    assert any(culprit in e for e in effects), (effects, arguments)
    assert not any(culprit in a for a in arguments)


@pytest.mark.parametrize("body", [
    "s = torch.matmul(x, x)\ns.masked_fill_(x > 0, 0.0)\nreturn s",
    "s = x @ x\ns[x > 0] = 0\nreturn s",
    "s = torch.cat([x, x])\ns += 1\nreturn s",
    "n = 0\nn += 1\nreturn x * n",
    "buf = []\nbuf.append(x)\nbuf[0] = x * 2\nreturn buf[0]",
    'f = getattr(x, "sum")\nreturn f()',
])
def test_in_place_on_a_tensor_allocated_here_is_local(body):
    assert _writes(body)[:2] == ([], [])


def test_a_callee_writing_its_argument_is_an_effect_of_the_caller():
    ns: dict = {}
    src = "def helper(c):\n    c.tag = 1\n\n\ndef forward(self, x, cache):\n    helper(self.state)\n    return x\n"
    import linecache
    linecache.cache["<callee>"] = (len(src), None, src.splitlines(True), "<callee>")
    exec(compile(src, "<callee>", "exec"), ns)  # noqa: S102
    effects, arguments, _ = function_writes(ns["forward"], 0, nn.Module)
    assert arguments == [] and any("helper:" in e and "c.tag" in e for e in effects)


# --- the encoder: a submodule writing an object passed to it stays an effect ---------------

def _facts():
    return {"names": {}, "self": {"attentions": summarize(nn.ModuleList([_Attention()])),
                                  "ln": summarize(nn.LayerNorm(4))},
            "state": {"modes": ["eval", "train"], "changes": [], "first_call": []}}


def test_submodule_writing_its_cache_is_not_accepted_and_says_why():
    out = state_unchanged({"kind": "state-unchanged-on-raise"}, _ctx(_facts()))
    assert out.result == "unknown"
    assert "self.attentions" in out.reason and "curr_cache.update()" in out.reason
    assert "before the check" in out.reason and "tensor in place" in out.reason


def test_a_submodule_with_an_in_place_tensor_write_stays_unknown():
    class Static(_Attention):
        def forward(self, x, mask, cache=None):
            cache.keys.index_copy_(0, mask, x)
            return x
    f = _facts()
    f["self"]["attentions"] = summarize(nn.ModuleList([Static()]))
    out = state_unchanged({"kind": "state-unchanged-on-raise"}, _ctx(f))
    assert out.result == "unknown" and "index_copy_" in out.reason


def test_pure_submodules_are_checked_with_the_graph_wide_assumption_stated():
    f = _facts()
    del f["self"]["attentions"]
    out = state_unchanged({"kind": "state-unchanged-on-raise"}, _ctx(f))
    assert out.result == "checked"
    assert any("writes no state before this check" in a and "no tensor in place after it" in a
               for a in out.assumptions)


def _ctx(facts):
    from verifier.encoders.base import Ctx
    return Ctx(facts, {}, "", "", 2000, [])


# --- the rule's own screen: a user submodule's result is not a fresh tensor -----------------

def test_a_user_submodule_returning_its_buffer_is_not_fresh():
    """Adversarial review (l_bufalias): `m = self.stats(0)` returns a buffer of a module of
    the user's own, and `m.copy_(...)` before the check writes it."""
    src = """
import torch
from torch import nn


class Stats(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("maxlen", torch.zeros((), dtype=torch.long))

    def forward(self, dummy):
        return self.maxlen


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.stats = Stats()
        self.ln = nn.LayerNorm(4)

    def forward(self, x, lengths):
        m = self.stats(0)
        m.copy_(torch.maximum(m, lengths.max()))
        assert lengths.max().item() <= x.size(1)
        return x * 2
"""
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "assert lengths" in t)
    res = pv.rewrite(cst.parse_module(src), line)
    assert not isinstance(res, pv.RewriteResult) and "changes state" in res.reason and "m.copy_" in res.reason
    # a torch.nn submodule's result, from a fresh argument, still is
    ok = src.replace("m = self.stats(0)\n        m.copy_(torch.maximum(m, lengths.max()))",
                     "m = self.ln(x * 1)\n        m.mul_(2)")
    assert isinstance(pv.rewrite(cst.parse_module(ok), line), pv.RewriteResult)


# --- end to end ---------------------------------------------------------------------------

def test_mend_fix_declines_the_check_before_cache_writing_layers(tmp_path):
    """The fixture with the cache always the caller's (no `if cache is None: cache = Cache(...)`):
    the layers write an object passed in, so the check stays. With the cache made in the call
    it is fixed under a guard (tests/test_fresh_guard.py)."""
    from mend.fix import fix

    src = (FIXTURES / "assert_item_cache.py").read_text()
    made = "        if cache is None:\n            cache = Cache(self.n_layers)\n"
    assert made in src
    path = tmp_path / "assert_item_cache_passed.py"
    path.write_text(src.replace(made, ""))
    res = fix(str(path), unsafe_fixes=True, max_examples=5)
    assert res.rewrites == []
    why = [d for d in res.declined if d.rule == "predicated-validation"]
    assert len(why) == 1 and "state-unchanged-on-raise unknown" in why[0].reason
    assert "curr_cache.update()" in why[0].reason and "not established" in why[0].reason
    assert res.after.graph_count == res.before.graph_count
