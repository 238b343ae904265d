"""dead-host-work: obligations of the examples, the encoders' refutations (each check can
fail), the traps (typing generics for torch.jit.isinstance, a tensor subclass whose __repr__
has an effect, an RNG stream consumer after a LayerDrop draw) and one fixture mended end to
end through mend.fix.fix.

The examples' generated tests (exact text, declines with their reason, the matcher) are in
``tests/test_rules.py``."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import libcst as cst
import numpy as np
import pytest
import torch

import mend.taxonomy as taxonomy
from mend.fix import fix
from mend.locate import locate
from mend.rules import RULES, Decline, Match
from mend.rules import dead_host_work as dhw
from mend.rules.dead_host_work.screen import WHY_BIND, WHY_RNG
from mend.targets import load_file_module
from tests.conftest import FIXTURES
from verifier.encoders import CHECKS, KINDS, OBSERVED, dead_host_work as enc
from verifier.encoders.base import Ctx

RULE = RULES[dhw.NAME]


def _rw(source: str):
    return dhw.rewrite(cst.parse_module(source), RULE.example_line(source))


def _discharge(res, before):
    ctx = Ctx(facts={}, defs={}, code=res.code, before=before)
    return [(o["kind"], KINDS[o["kind"]](o, ctx)) for o in res.obligations]


def test_kinds_are_screens_not_observations():
    assert RULE.obligation_kinds <= CHECKS and not (RULE.obligation_kinds & OBSERVED)
    assert not RULE.needs_facts and RULE.required_kinds == RULE.obligation_kinds


def test_every_fix_example_is_checked_by_its_encoders():
    for before, _after in dhw.FIX_EXAMPLES:
        res = _rw(before)
        kinds = [o["kind"] for o in res.obligations]
        assert kinds in (["jit-isinstance-plain"], ["local-never-read", "plain-tensor-repr-pure"],
                         ["bind-lookup-agrees"], ["debug-text-deferred"])
        for kind, out in _discharge(res, before):
            assert out.result == "checked" and out.checked_by, (kind, out)


# -- torch.jit.isinstance: the reduction to isinstance holds exactly for plain classes ------

@pytest.mark.parametrize("target", [torch.Tensor, int, (int, float), torch.nn.Module, torch.device, torch.Size])
def test_jit_isinstance_is_isinstance_for_plain_classes(target):
    for probe in enc._probes() + [[], {}, ()]:
        assert torch.jit.isinstance(probe, target) == isinstance(probe, target)


def test_trap_jit_isinstance_differs_for_generics_and_raw_containers():
    assert torch.jit.isinstance([1.5], List[int]) is False and isinstance([1.5], list)
    assert torch.jit.isinstance(None, Optional[torch.Tensor]) is True
    assert torch.jit.isinstance({"a": 1}, Dict[str, str]) is False
    with pytest.raises(RuntimeError):
        torch.jit.isinstance([1], list)
    assert torch.jit.isinstance(3, (int, list)) is True     # the raw container is reached only for some objects
    with pytest.raises(RuntimeError):
        torch.jit.isinstance("a", (int, list))


_JIT_CODE = "import torch\n\n\ndef f(x, n):\n    return isinstance(n, {t})\n"


@pytest.mark.parametrize("target,words", [("list", "raw container"), ("(int, dict)", "raw container"),
                                          ("torch.nn.ModuleList", None)])
def test_jit_encoder_refutes_non_plain_targets(target, words):
    ob = {"kind": "jit-isinstance-plain", "obj": "n", "target": target, "line": 5}
    out = enc.jit_isinstance_plain(ob, Ctx({}, {}, code=_JIT_CODE.format(t=target)))
    if words is None:   # a plain torch class outside the rule's list: the encoder itself accepts it
        assert out.result == "checked"
    else:
        assert out.result == "refuted" and words in out.counterexample


def test_jit_encoder_refutes_a_rebound_isinstance_and_declines_another_torch(monkeypatch):
    ob = {"kind": "jit-isinstance-plain", "obj": "n", "target": "int", "line": 5}
    code = _JIT_CODE.format(t="int").replace("import torch\n", "import torch\nisinstance = lambda a, b: True\n")
    ob_shift = {**ob, "line": 6}
    assert enc.jit_isinstance_plain(ob_shift, Ctx({}, {}, code=code)).result == "refuted"
    monkeypatch.setattr(enc, "REVIEWED__ISINSTANCE", {"0" * 64})
    out = enc.jit_isinstance_plain(ob, Ctx({}, {}, code=_JIT_CODE.format(t="int")))
    assert out.result == "unknown" and "not the implementation reviewed" in out.reason


# -- unused repr: the guard keeps a subclass's repr; the encoders check what the rule screened

_REPR = dhw.FIX_EXAMPLES[2][0]


def test_local_never_read_is_refuted_when_read():
    res = _rw(_REPR)
    for extra, words in (("    print(dbg)\n", "read"), ("    del dbg\n", "deleted"), ("    v = vars()\n", "vars")):
        before = _REPR.replace("    return h + 1\n", extra + "    return h + 1\n")
        ob = res.obligations[0]
        out = enc.local_never_read(ob, Ctx({}, {}, before=before))
        assert out.result == "refuted" and words in out.counterexample, (extra, out)


def test_trap_an_isinstance_guard_would_skip_a_subclass_repr_and_is_refuted():
    res = _rw(_REPR)
    ob = res.obligations[1]
    wrong = res.code.replace("if type(h) is not torch.Tensor or", "if not isinstance(h, torch.Tensor) or")
    assert wrong != res.code
    out = enc.plain_tensor_repr_pure(ob, Ctx({}, {}, code=wrong, before=_REPR))
    assert out.result == "refuted" and "guard" in out.counterexample
    body_changed = res.code.replace("        dbg = repr(h)", "        dbg = str(h)")
    assert enc.plain_tensor_repr_pure(ob, Ctx({}, {}, code=body_changed, before=_REPR)).result == "refuted"
    assert enc.plain_tensor_repr_pure(ob, Ctx({}, {}, code=res.code, before=_REPR)).result == "checked"


def test_mended_repr_guard_runs_a_subclass_repr_and_skips_a_plain_one():
    ns: dict = {}
    exec(_rw(_REPR).code, ns)
    seen = []

    class Loud(torch.Tensor):
        def __repr__(self, *, tensor_contents=None):
            seen.append(1)
            return "Loud"

    ns["f"](torch.ones(2).as_subclass(Loud))
    assert seen == [1]
    ns["f"](torch.ones(2))
    assert seen == [1]


# -- fixtures through mend.fix.fix -------------------------------------------------------------

def _outputs(path: Path, tag: str, train: bool = False):
    mod = load_file_module(path, tag)
    torch.manual_seed(0)
    model = mod.Model().train(train)
    np.random.seed(0)
    args = mod.get_inputs()
    np.random.seed(0)
    with torch.no_grad():
        return mod, model, args, model(*args)


def test_fixture_mended_end_to_end(tmp_path):
    res = fix(str(FIXTURES / "dead_host_work.py"), unsafe_fixes=True, verify="strict", max_examples=5)
    assert (res.before.graph_count, res.after.graph_count) == (3, 1)
    assert [r["rule"] for r in res.rewrites] == [dhw.NAME, dhw.NAME] and not res.declined
    for r in res.rewrites:
        assert r["safety"]["label"] == "safe", r["safety"]
        assert all(o["result"] == "checked" for o in r["obligations"])
    assert "torch.jit.isinstance(" not in res.mended and "if type(h) is not torch.Tensor or h.layout" in res.mended
    mended = tmp_path / "dead_host_work.py"
    mended.write_text(res.mended)
    _, a, args, ref = _outputs(FIXTURES / "dead_host_work.py", "_dhw_a")
    _, b, _, _ = _outputs(mended, "_dhw_b")
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert torch.equal(ref, b(*args))
        torch._dynamo.reset()
        explain = torch._dynamo.explain(b)(*args)
        assert (explain.graph_count, explain.graph_break_count) == (1, 0)
        assert torch.equal(ref, torch.compile(b, backend="eager")(*args))
    # a safe fix is applied without --unsafe-fixes too
    assert fix(str(FIXTURES / "dead_host_work.py"), verify="fast", max_examples=3).mended == res.mended


def test_trap_generic_target_is_declined_by_fix():
    res = fix(str(FIXTURES / "adversarial" / "dhw1_jit_generic.py"), unsafe_fixes=True, max_examples=3)
    assert res.rewrites == [] and res.mended == res.original
    (site,) = [s for s in res.before.to_json()["sites"] if s["category"] == "debug-host-work"]
    assert "typing generic" in site["reason"]


def test_trap_subclass_repr_side_effect_keeps_behaviour(tmp_path):
    path = FIXTURES / "adversarial" / "dhw2_repr_side_effect.py"
    res = fix(str(path), unsafe_fixes=True, max_examples=3)
    if res.mended != res.original:   # the guard keeps the subclass's repr: same output, same count
        mended = tmp_path / "dhw2.py"
        mended.write_text(res.mended)
        mod_a, a, args, ref = _outputs(path, "_dhw2_a")
        mod_b, b, _, _ = _outputs(mended, "_dhw2_b")
        b.load_state_dict(a.state_dict())
        mod_a.Loud.calls = mod_b.Loud.calls = 0
        with torch.no_grad():
            assert torch.equal(a(*args), b(*args)) and mod_a.Loud.calls == mod_b.Loud.calls == 1
        assert res.after.graph_count == res.before.graph_count


def test_trap_rng_consumer_is_declined_and_a_naive_rewrite_would_change_eval(tmp_path):
    path = FIXTURES / "adversarial" / "dhw3_rng_consumer.py"
    res = fix(str(path), unsafe_fixes=True, max_examples=3)
    assert res.rewrites == [] and res.mended == res.original
    (site,) = [s for s in res.before.to_json()["sites"] if s["category"] == "debug-host-work"]
    assert WHY_RNG in site["reason"]
    naive = path.read_text().replace(
        "            dropout_probability = np.random.uniform(0, 1)\n"
        "            if self.training and dropout_probability < self.layerdrop:\n",
        "            if self.training and np.random.uniform(0, 1) < self.layerdrop:\n")
    assert naive != path.read_text()
    (tmp_path / "naive.py").write_text(naive)
    _, a, args, ref = _outputs(path, "_dhw3_a")
    _, b, _, _ = _outputs(tmp_path / "naive.py", "_dhw3_b")
    b.load_state_dict(a.state_dict())
    np.random.seed(0)
    with torch.no_grad():
        ref = a(*args)
        np.random.seed(0)
        assert not torch.equal(ref, b(*args))   # the eval output reads the stream the draw advanced


# -- taxonomy: the measured gb_types at these statements -----------------------------------------

def _loc(tmp_path, source, line, name="site.py"):
    path = tmp_path / name
    path.write_text(source)
    return locate(str(path), line)


def test_categorize_measured_gb_types(tmp_path):
    src = ("import numpy as np\nimport torch\n\n\ndef f(x, n):\n    r = repr(x)\n    s = str(x)\n"
           "    p = np.random.uniform(0, 1)\n    if torch.jit.isinstance(n, int):\n        pass\n    print(repr(x))\n"
           "    q = np.nonzero(x)\n    return x\n")
    cases = [(6, "repr() on tensor", "debug-host-work"), (7, "Failed to trace builtin operator", "debug-host-work"),
             (8, "Data dependent operator", "debug-host-work"),
             (9, "Attempted to call function marked as skipped", "debug-host-work"),
             (11, "Failed to trace builtin operator", "print-logging"),   # a print stays print-logging
             (11, "repr() on tensor", "print-logging"),   # the print formats it: deferred-side-effects' site
             (12, "Data dependent operator", "dynamic-shape-op")]
    for line, gb, category in cases:
        assert taxonomy.categorize(gb, _loc(tmp_path, src, line)) == category, (line, gb)
    assert "debug-host-work" in taxonomy.CATEGORIES


def test_signature_bind_site_in_inspect_is_declined_with_the_reason(tmp_path):
    sub = tmp_path / "lib"
    sub.mkdir()
    loc = _loc(sub, "def _bind(self, args, kwargs):\n    parameters = iter(self.parameters.values())\n", 2,
               name="inspect.py")
    assert taxonomy.categorize("mapping proxy affected by dictionary mutation", loc) == "debug-host-work"
    verdict = RULE.match(loc)
    assert isinstance(verdict, Decline) and verdict.reason == WHY_BIND and "TypeError" in verdict.reason
    other = _loc(sub, "def g(d):\n    return iter(d.values())\n", 2, name="other.py")
    assert taxonomy.categorize("mapping proxy affected by dictionary mutation", other) == "other"


def test_matcher_accepts_the_fixture_sites():
    path = FIXTURES / "dead_host_work.py"
    lines = path.read_text().splitlines()
    for needle in ("torch.jit.isinstance(", "dbg = repr(h)"):
        line = next(i for i, t in enumerate(lines, 1) if needle in t)
        assert isinstance(RULE.match(locate(str(path), line)), Match)


def test_a_fix_that_leaves_the_frame_wholly_eager_is_declined_then_retried(tmp_path):
    """helper-68's c29: graphs 1 -> 0 is worse, not fewer; after the f-string's fix the
    declined repr is tried again and fixed (graphs 1, breaks 2 -> 0)."""
    from mend.pipeline import _still_breaks

    path = FIXTURES / "adversarial" / "dhw4_repr_then_fstring_repr.py"
    res = fix(str(path), max_examples=3)
    assert (res.before.graph_break_count, res.after.graph_break_count) == (2, 0)
    assert res.after.graph_count == 1 and res.after.frames_skipped == 0
    assert sorted(r["site"].rsplit(":", 1)[1] for r in res.rewrites) == ["16", "17"] and not res.declined
    mended = tmp_path / "dhw4.py"
    mended.write_text(res.mended)
    _, a, args, ref = _outputs(path, "_dhw4_a")
    _, b, _, _ = _outputs(mended, "_dhw4_b")
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        assert torch.equal(a(*args), b(*args))

    class Scan:
        def __init__(self, graphs):
            self.graph_count, self.steady_graph_count, self.graph_break_count, self.sites = graphs, graphs, 2, []

    why = _still_breaks(None, Scan(1), Scan(0), "f.py", "a = 1\n", "a = 1\n", (1, 1), "debug-host-work")
    assert why and "compiles nothing of the function (graphs 1 -> 0" in why


def test_helper70_repr_raising_dtypes_star_imports_and_frame_readers(tmp_path):
    """helper-70 against the safe unused-repr fix: a bits8/uint1..7 tensor's repr raises (the
    guard now keeps the original for every dtype but the reviewed ones, and for a non-strided
    layout); a star import may rebind `type`; a helper of the module may read the caller's
    locals through `sys._getframe(1).f_locals`. The rule declines the last two, and the
    verifier refutes each independently."""
    import libcst as cst

    from mend.rules.dead_host_work.rewrite import rewrite

    base = "import torch\n\n\ndef f(x):\n    h = x * 2\n    msg = f\"h = {h!r}\"\n    return h + 1\n"
    res = rewrite(cst.parse_module(base), 6)
    ns: dict = {}
    exec(compile(res.code, "dhw_bits.py", "exec"), ns)
    bits = torch.zeros(3, dtype=torch.uint8).view(torch.bits8)
    with pytest.raises(NotImplementedError):
        repr(bits)
    with pytest.raises(NotImplementedError):   # the mended code runs the original repr for it
        ns["f"](bits)
    assert torch.equal(ns["f"](torch.ones(2)), torch.full((2,), 3.0))
    star = base.replace("import torch\n", "import torch\nfrom os.path import *\n")
    assert "star-imports" in rewrite(cst.parse_module(star), 7).reason
    frames = base + "\n\ndef peek():\n    import sys\n    return sys._getframe(1).f_locals\n"
    assert "_getframe" in rewrite(cst.parse_module(frames), 6).reason
    ob = res.obligations[0]
    for before in (star, frames):
        out = enc.local_never_read({**ob, "line": 7 if before is star else 6}, Ctx({}, {}, code=res.code,
                                                                                  before=before))
        assert out.result == "refuted", out
    starred = res.code.replace("import torch\n", "import torch\nfrom os.path import *\n", 1)
    out = enc.plain_tensor_repr_pure({**res.obligations[1], "line": 7}, Ctx({}, {}, code=starred, before=star))
    assert out.result == "refuted" and "star import" in out.counterexample, out

