"""predicated-validation ("[Trap]"): examples from the rule, behaviour on fixtures, runtime.

The examples' generated tests (exact text, declines, the matcher) are in
``tests/test_rules.py``; here, what every fix example must also show (nothing left to
rewrite, the ``if __debug__`` guard left alone). Behaviour tests load an original and a
mended module (same weights) and compare outputs and raised exceptions (type and message)
in eager and under torch.compile(backend="eager"/"aot_eager"), with the restore runtime
installed; explain must show one graph and no break.
"""
from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from pathlib import Path

import libcst as cst
import pytest
import torch

from mend import validation_runtime as vr
from mend.locate import locate
from mend.rules import Decline
from mend.rules import predicated_validation as pv

SHARED_CASES = Path(__file__).resolve().parents[2] / "shared" / "cases"
_ids = itertools.count()


def _write(tmp_path: Path, code: str) -> Path:
    path = tmp_path / f"pv_{next(_ids)}.py"
    path.write_text(code)
    return path


def _load(tmp_path: Path, code: str) -> types.ModuleType:
    path = _write(tmp_path, code)
    name = f"_pv_fixture_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# --- the rule's examples (exact text, declines, matcher: tests/test_rules.py) --------------

def test_every_fix_example_leaves_nothing_to_rewrite():
    for before, _, *line in pv.FIX_EXAMPLES:
        res = pv.rewrite(cst.parse_module(before), line[0] if line else pv.example_line(before))
        # nothing is left to rewrite (a shape check above the site is the rule's own decline), and the
        # `if __debug__:` guard is not mistaken for a check
        left = _next_check(res.code)
        assert left is None or "shapes and literals only" in pv.rewrite(cst.parse_module(res.code), left).reason
        for i, text in enumerate(res.code.splitlines(), 1):
            if text.strip() == "if __debug__:":
                assert isinstance(pv.rewrite(cst.parse_module(res.code), i), Decline)


def test_obligations_are_data():
    before, _ = pv.FIX_EXAMPLES[0]
    res = pv.rewrite(cst.parse_module(before), pv.example_line(before))
    kinds = [o["kind"] for o in res.obligations]
    assert kinds[0] == "raises-iff-original"
    assert {"restore-at-boundary", "state-unchanged-on-raise", "cpu-only", "condition-is-tensor",
            "guarded-check"} <= set(kinds)
    first = res.obligations[0]
    assert first["exception"] == "ValueError"
    assert first["message"] == "Make sure to align the spatial shapes with the sequence length"
    assert first["raises_when"] == "(shapes[:, 0] * shapes[:, 1]).sum() != seq_len"
    assert first["asserts"] == "torch.logical_not((shapes[:, 0] * shapes[:, 1]).sum() != seq_len)"
    assert first["guarded"] == "_mend_cond"
    guarded = next(o for o in res.obligations if o["kind"] == "guarded-check")
    assert guarded["condition"] == "(shapes[:, 0] * shapes[:, 1]).sum() != seq_len"
    assert guarded["raise_if_true"] is True
    assert res.span == (6, 9)


def test_no_line_and_unknown_statement():
    src = "import torch\ndef f(x):\n    y = x + 1\n    return y\n"
    assert "no `if`/`assert`/`raise`" in pv.rewrite(cst.parse_module(src), 3).reason
    loc_src = "import torch\ndef f(x):\n    if x.sum() > 0:\n        raise ValueError('p')\n    return x\n"
    # a report on the raise line resolves to the `if` around it
    res = pv.rewrite(cst.parse_module(loc_src), 4)
    assert isinstance(res, pv.RewriteResult) and res.span == (3, 4)


def test_grounding_dino_site():
    import transformers

    path = Path(transformers.__file__).parent / "models" / "grounding_dino" / "modeling_grounding_dino.py"
    source = path.read_text()
    needle = "if (spatial_shapes[:, 0] * spatial_shapes[:, 1]).sum() != sequence_length:"
    line = next(i for i, text in enumerate(source.splitlines(), 1) if text.strip() == needle)
    res = pv.rewrite(cst.parse_module(source), line)
    assert isinstance(res, pv.RewriteResult), res
    assert res.span == (line, line + 3)
    assert "_mend_cond = (spatial_shapes[:, 0] * spatial_shapes[:, 1]).sum() != sequence_length\n" in res.code
    assert "torch.logical_not(_mend_cond)," in res.code
    assert 'lambda: ValueError("Make sure to align the spatial shapes with the sequence length of the encoder ' \
           'hidden states")' in res.code
    # nothing else changed: the table (6 lines) is added and the 4 lines of the check become 10
    # (bind, guard, the 4-line assert, `elif`, the original 3-line raise)
    assert len(res.code.splitlines()) == len(source.splitlines()) + 12
    old, new = source.splitlines(), res.code.splitlines()
    assert old[line + 3:] == new[line + 15:]
    assert old[line:line + 3] == new[line + 12:line + 15]   # the raise, as written


# --- shared cases: controls are left alone, the 023 trap is declined ---------------------

@pytest.mark.skipif(not SHARED_CASES.is_dir(), reason="../shared/cases is absent")
@pytest.mark.parametrize("case", ["021_assert_all_control.py", "024_shape_assert_control.py",
                                  "023_raise_nan_loss_then_update.py"])
def test_shared_cases_declined(case):
    path = SHARED_CASES / case
    source = path.read_text()
    module = cst.parse_module(source)
    lines = [i for i, t in enumerate(source.splitlines(), 1) if t.lstrip().startswith(("if ", "assert "))
             and t.startswith("        ")]
    assert lines
    for line in lines:
        res = pv.rewrite(module, line)
        assert isinstance(res, Decline), (case, line)
        assert isinstance(pv.match(locate(str(path), line)), Decline)
    if case.startswith("023"):
        assert "formatted at run time" in pv.rewrite(module, lines[0]).reason
    else:
        assert all("nothing to rewrite" in pv.rewrite(module, line).reason for line in lines)


# --- behaviour: original vs mended, same weights ------------------------------------------

FIXTURE = '''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, spatial_shapes):
        batch, seq_len, _ = x.shape
        # levels must tile the sequence
        if (spatial_shapes[:, 0] * spatial_shapes[:, 1]).sum() != seq_len:
            raise ValueError("Make sure to align the spatial shapes with the sequence length")
        assert not torch.isnan(x).any(), "NaN in the encoder states"
        h = self.proj(x)
        if not torch.isfinite(h).all():
            raise FloatingPointError
        return h.softmax(-1)


def get_inputs():
    g = torch.Generator().manual_seed(7)
    return torch.randn(2, 6, 8, generator=g), torch.tensor([[2, 2], [1, 2]])
'''


def _next_check(code: str) -> int | None:
    lines = code.splitlines()
    for i, text in enumerate(lines, 1):
        s = text.strip()
        if "_mend_cond" in s:   # the guarded form's own fallback (`assert not _mend_cond`), not a check left
            continue
        if s.startswith("assert not ") or (s.startswith("if ") and i < len(lines)
                                           and lines[i].strip().startswith("raise")):
            return i
    return None


def _mend_all(code: str) -> tuple[str, list]:
    results = []
    while (line := _next_check(code)) is not None:
        res = pv.rewrite(cst.parse_module(code), line)
        assert isinstance(res, pv.RewriteResult), res
        results.append(res)
        code = res.code
    return code, results


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pv_pair")
    mended_code, results = _mend_all(FIXTURE)
    orig_mod, mended_mod = _load(tmp, FIXTURE), _load(tmp, mended_code)
    torch.manual_seed(0)
    orig = orig_mod.Model().eval()
    mended = mended_mod.Model().eval()
    mended.load_state_dict(orig.state_dict(), strict=True)
    vr.install(mended)
    return orig, mended, mended_mod, mended_code, results


def _cases(mod):
    x, shapes = mod.get_inputs()
    nan_x = x.clone()
    nan_x[0, 1, 2] = float("nan")
    inf_x = x.clone()
    inf_x[1, 0, 0] = float("inf")
    return {"pass": (x, shapes), "shapes": (x, torch.tensor([[2, 2], [2, 2]])),
            "nan": (nan_x, shapes), "inf": (inf_x, shapes)}


def _outcome(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # behaviour under comparison
        return ("raised", type(exc), str(exc))


def _same(a, b):
    if a[0] == "ok" and b[0] == "ok":
        return torch.equal(a[1], b[1])
    return a == b


def test_fixture_is_fully_mended(pair):
    _, _, _, code, results = pair
    assert len(results) == 3
    assert [r.obligations[0]["exception"] for r in results] == ["ValueError", "AssertionError", "FloatingPointError"]
    forward = code.split("def forward")[1].split("def get_inputs")[0]
    # every raise left is a guarded fallback: run only where the condition is not a one-element CPU tensor
    lines = forward.splitlines()
    raises = [i for i, text in enumerate(lines) if text.strip().startswith(("raise", "assert"))]
    assert raises and all("_mend_cond" in lines[i - 1] or "_mend_cond" in lines[i] for i in raises)
    assert "# levels must tile the sequence" in code


def test_eager_same_behaviour(pair):
    orig, mended, mod, _, _ = pair
    expected = {"shapes": (ValueError, "Make sure to align the spatial shapes with the sequence length"),
                "nan": (AssertionError, "NaN in the encoder states"), "inf": (FloatingPointError, "")}
    for name, args in _cases(mod).items():
        a, b = _outcome(orig, args), _outcome(mended, args)
        assert _same(a, b), (name, a, b)
        if name in expected:
            assert a[1:] == expected[name]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_same_behaviour(pair, backend):
    orig, mended, mod, _, _ = pair
    torch._dynamo.reset()
    compiled = torch.compile(mended, backend=backend)
    for name, args in _cases(mod).items():
        a, b = _outcome(orig, args), _outcome(compiled, args)
        assert _same(a, b), (backend, name, a, b)


def test_model_compile_and_explain(pair):
    orig, mended, mod, _, _ = pair
    args = _cases(mod)["pass"]
    torch._dynamo.reset()
    before = torch._dynamo.explain(orig)(*args)
    assert before.graph_break_count >= 2  # the if/raise checks and `assert not` break
    torch._dynamo.reset()
    after = torch._dynamo.explain(mended)(*args)
    assert (after.graph_count, after.graph_break_count, len(after.break_reasons)) == (1, 0, 0)


def test_without_runtime_the_marker_surfaces(pair):
    _, mended, mod, _, _ = pair
    vr.uninstall(mended)
    try:
        assert type(mended).forward is mod.Model.forward
        with pytest.raises(ValueError, match="Make sure to align"):   # eager runs the original check
            mended(*_cases(mod)["shapes"])
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match=r"mend-trap:_pv_fixture_pv_\d+:_MEND_TRAPS\.[0-9a-f]{12}") as info:
            torch.compile(mended, backend="eager")(*_cases(mod)["shapes"])
        torch._dynamo.reset()
        restored = vr.restore(info.value, mended)
        assert type(restored) is ValueError
        assert str(restored) == "Make sure to align the spatial shapes with the sequence length"
    finally:
        vr.install(mended)


def test_inductor_restores(pair):
    orig, mended, mod, _, _ = pair
    torch._dynamo.reset()
    compiled = torch.compile(mended, backend="inductor")
    for name in ("pass", "nan"):
        args = _cases(mod)[name]
        a, b = _outcome(orig, args), _outcome(compiled, args)
        if a[0] == "ok":
            assert b[0] == "ok" and torch.allclose(a[1], b[1])
        else:
            assert a == b


# --- runtime --------------------------------------------------------------------------

def _table_module(name: str, exc_factory) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod._MEND_TRAPS = {"0123456789ab": exc_factory}
    exec("def probe():\n    pass\n", vars(mod))
    return mod


def test_restore_leaves_other_errors_alone():
    assert vr.restore(RuntimeError("shape mismatch")) is None
    assert vr.restore(ValueError("mend-trap:x:_MEND_TRAPS.0123456789ab")) is None


def test_restore_unresolved_marker_adds_note():
    err = RuntimeError("mend-trap:no_such_module_xyz:_MEND_TRAPS.0123456789ab")
    assert vr.restore(err) is None
    assert any("could not restore" in n for n in err.__notes__)


def test_restore_ambiguous_tables_are_not_guessed(monkeypatch):
    a = _table_module("pv_dup_mod", lambda: ValueError("a"))
    b = _table_module("pv_dup_mod", lambda: KeyError("b"))
    monkeypatch.setitem(sys.modules, "pv_dup_mod", a)
    marker = "mend-trap:pv_dup_mod:_MEND_TRAPS.0123456789ab"
    assert type(vr.restore(RuntimeError(marker))) is ValueError
    # the model's code is more specific than sys.modules (a file loaded twice: helper-85's F3)
    assert type(vr.restore(RuntimeError(marker), b.probe)) is KeyError
    # two different tables at the same level (the model's code reaches both loads): not guessed
    b.probe.__wrapped__ = a.probe
    err = RuntimeError(marker)
    assert vr.restore(err, b.probe) is None
    assert any("different exceptions" in n for n in err.__notes__)


def test_restore_factory_failure_is_reported(monkeypatch):
    mod = _table_module("pv_broken_mod", lambda: UndefinedError("x"))  # noqa: F821
    monkeypatch.setitem(sys.modules, "pv_broken_mod", mod)
    err = RuntimeError("mend-trap:pv_broken_mod:_MEND_TRAPS.0123456789ab")
    assert vr.restore(err) is None
    assert any("NameError" in n for n in err.__notes__)


def test_install_is_idempotent_and_reversible(pair):
    _, mended, mod, _, _ = pair
    keys = list(mended.state_dict())
    cls = type(mended)
    vr.install(mended)
    assert type(mended) is cls and cls.__name__ == "Model" and isinstance(mended, mod.Model)
    assert list(mended.state_dict()) == keys
    vr.uninstall(mended)
    assert type(mended) is mod.Model
    vr.install(mended)


_CLAMP = '''import torch


def clamp_positive(x):
    if (x < 0).any():
        raise ValueError("negative input")
    return x.sqrt()
'''


def test_install_on_optimized_module_and_restoring_function(pair, tmp_path):
    _, mended, mod, code, _ = pair
    vr.uninstall(mended)
    try:
        torch._dynamo.reset()
        opt = vr.install(torch.compile(mended, backend="eager"))
        with pytest.raises(AssertionError, match="NaN in the encoder states"):
            opt(*_cases(mod)["nan"])
    finally:
        vr.install(mended)
    fn_mod = _load(tmp_path, _mend_all(_CLAMP)[0])
    torch._dynamo.reset()
    wrapped = vr.restoring(torch.compile(fn_mod.clamp_positive, backend="aot_eager"))
    assert torch.equal(wrapped(torch.ones(3)), torch.ones(3))
    with pytest.raises(ValueError) as info:
        wrapped(-torch.ones(3))
    assert str(info.value) == "negative input"
    assert any("restored by mend" in n for n in info.value.__notes__)  # shown in tracebacks only


# --- the runtime guard (helper-50: a Python number, several elements) ------------------------

def _guarded_outcome(code: str, ob: dict) -> dict:
    from verifier.encoders.assert_async import guarded_check
    from verifier.encoders.base import Ctx

    return guarded_check(ob, Ctx(facts={}, defs={}, code=code)).__dict__


@pytest.mark.parametrize("index", [0, 1, 2])
def test_guarded_check_reads_the_guard_back(index):
    """``"guarded-check"``, a static screen of the mended file: checked on the rule's own
    output (if/raise, `if not`, `assert not`), refuted on each tampered form."""
    before, after, *_ = pv.FIX_EXAMPLES[index]
    res = pv.rewrite(cst.parse_module(before), pv.example_line(before))
    ob = next(o for o in res.obligations if o["kind"] == "guarded-check")
    assert _guarded_outcome(res.code, ob)["result"] == "checked"
    local = ob["local"]
    tampered = {
        "no device test": res.code.replace(f" and {local}.device.type == 'cpu'", ""),
        "no element count": res.code.replace(f" and {local}.numel() == 1", ""),
        "another condition": res.code.replace(f"{local} = {ob['condition']}", f"{local} = ({ob['condition']}) & True"),
        "fallback inverted": (res.code.replace(f"elif {local}:", f"elif not {local}:") if ob["raise_if_true"]
                              else res.code.replace(f"elif not {local}:", f"elif {local}:")),
        "local read again": res.code.replace("    return ", f"    print({local})\n    return ", 1),
    }
    if index == 2:   # `assert not L`: the fallback's message
        tampered["fallback inverted"] = res.code.replace(f"assert not {local}", f"assert {local}")
    for what, code in tampered.items():
        assert code != res.code, what
        out = _guarded_outcome(code, ob)
        assert out["result"] == "refuted", (what, out)


def test_guarded_form_runs_the_original_check_off_the_graph(tmp_path):
    """A Python number, several elements: the original `if`/`raise` runs (helper-50's m01/m07:
    the unguarded form raised TypeError / returned under Inductor)."""
    src = ('import torch\n\n\ndef scale(x, s):\n    if s < 0:\n        raise ValueError("negative scale")\n'
           '    return x * s\n')
    res = pv.rewrite(cst.parse_module(src), 5)
    orig, mended = _load(tmp_path, src), _load(tmp_path, res.code)
    x = torch.ones(2)
    for s in (0.5, -1.0, 2, torch.tensor(0.5), torch.tensor([0.5, 0.7]), torch.tensor([-1.0, 0.7])):
        outs = []
        for mod in (orig, mended):
            try:
                outs.append(("ok", mod.scale(x, s).tolist()))
            except Exception as exc:   # noqa: BLE001 - the exception is what is compared
                outs.append((type(exc).__name__, str(exc)))
        assert outs[0] == outs[1], (s, outs)
    # compiled, the one-element CPU tensor goes into the graph: the marker surfaces without the
    # runtime (eager ran the original check above: the guard's first clause is is_compiling())
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="mend-trap"):
        torch.compile(mended.scale, backend="eager")(x, torch.tensor(-1.0))
    torch._dynamo.reset()


def test_an_elif_chain_of_raises_is_split_and_both_checks_move_into_the_graph(tmp_path):
    """A sweep's if/elif chain of raises: the elif arm crashed the rewrite (a FlattenSentinel in
    an `orelse`), and the first arm was declined ("has an else/elif arm"). The chain is split; the
    first check moves into the graph, 3 graphs -> 2, and the second, restoring another exception,
    is declined (helper-91's F4: inductor ran a later check of one graph first)."""
    import pytest
    import torch

    from mend import validation_runtime
    from mend.fix import fix
    from mend.targets import load_file_module
    from tests.conftest import FIXTURES

    src = FIXTURES / "elif_raise_chain.py"
    res = fix(str(src), unsafe_fixes=True, verify="standard", max_examples=5)
    assert [r["rule"] for r in res.rewrites] == [pv.NAME]
    assert [d.failed_obligations for d in res.declined] == [["first-failure-wins"]], res.declined
    assert (res.before.graph_count, res.after.graph_count) == (3, 2)
    assert "elif" not in res.mended.split("def forward")[1].replace("elif _mend_cond", "")
    path = tmp_path / "elif_raise_chain.py"
    path.write_text(res.mended)
    orig, mended = load_file_module(src, "_erc_a"), load_file_module(path, "_erc_b")
    a = orig.Model().eval()
    b = mended.Model().eval()
    b.load_state_dict(a.state_dict())
    b = validation_runtime.install(b)
    x = orig.get_inputs()[0]
    nan = x.clone()
    nan[0, 0] = float("nan")
    torch._dynamo.reset()
    for model in (b, torch.compile(b, backend="eager")):
        assert torch.equal(model(x), a(x))
        for bad, exc, msg in ((nan, ValueError, "nan in hidden"), (x * 1e6, OverflowError, "hidden too large")):
            with pytest.raises(exc) as got:
                model(bad)
            assert got.value.args == (msg,)
            with pytest.raises(exc):
                a(bad)


@pytest.mark.parametrize("exc, want", [("ValueError", ("ValueError", "")), ("ValueError()", ("ValueError", "")),
                                       ('IndexError("bad", 3)', ("IndexError", "('bad', 3)")),
                                       ("ValueError(3)", ("ValueError", "3")),
                                       ('ValueError("m")', ("ValueError", "m"))])
def test_trap_entries_read_as_python_prints_the_exception(exc, want):
    """helper-60: `raise ValueError` (a bare class) was reported as "the trap entry is not in the
    mended file", and `raise IndexError("bad", 3)` was refuted, since the verifier read the
    arguments as JSON where str(exception) gives the tuple."""
    from verifier.encoders.assert_async import trap_entry

    code = f'_MEND_TRAPS = {{\n    "k": lambda: {exc},\n}}\n'
    assert trap_entry(code, "_MEND_TRAPS.k") == want
    if exc.endswith(")"):
        assert str(eval(exc)) == want[1]


def test_a_bare_class_and_a_two_argument_exception_are_restored(tmp_path):
    from mend.fix import fix

    src = tmp_path / "two_checks.py"
    src.write_text('''import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        if torch.isnan(x).any():
            raise ValueError
        h = self.fc(x)
        if (h.abs() > 1e3).any():
            raise IndexError("bad", 3)
        return h


def get_inputs():
    return (torch.randn(4, 8),)
''')
    res = fix(str(src), unsafe_fixes=True, verify="standard", max_examples=5)
    # the second check restores another exception: declined (helper-91's F4), so each is made alone
    assert [r["rule"] for r in res.rewrites] == [pv.NAME] and len(res.declined) == 1
    second = tmp_path / "two_arg.py"
    second.write_text(src.read_text().replace("        if torch.isnan(x).any():\n            raise ValueError\n", ""))
    assert second.read_text() != src.read_text()
    res2 = fix(str(second), unsafe_fixes=True, verify="standard", max_examples=5)
    assert [r["rule"] for r in res2.rewrites] == [pv.NAME] and not res2.declined
    assert "IndexError(\"bad\", 3)" in res2.mended and "lambda: ValueError" in res.mended
    for rw in res.rewrites + res2.rewrites:
        ob = next(o for o in rw["obligations"] if o["kind"] == "raises-iff-original")
        assert ob["result"] == "proved", ob


def test_a_nan_loss_check_read_through_item_moves_into_the_graph(tmp_path):
    """helper-61: `if math.isnan(loss.item()): raise` was left at item-tolist (no rule). It is
    routed to predicated validation and rewritten to torch.isnan(T) on a local bound to the tensor, 2 graphs -> 1; the
    check is not put under `if __debug__:` (python -O keeps an if/raise), and a tampered
    mapping (isinf for isnan) is refuted by raises-iff-original."""
    from mend.fix import fix
    from mend.targets import load_file_module
    from verifier.encoders.assert_async import raises_iff
    from verifier.encoders.base import Ctx

    src = tmp_path / "nan_loss.py"
    src.write_text('''import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 1)

    def forward(self, x):
        loss = self.lin(x).pow(2).mean()
        if math.isnan(loss.item()):
            raise ValueError("nan loss")
        return loss * 2


def get_inputs():
    return (torch.randn(4, 8),)
''')
    res = fix(str(src), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert (res.before.graph_count, res.after.graph_count) == (2, 1) and "__debug__" not in res.mended
    assert "_mend_item = loss" in res.mended and "torch.isnan(_mend_item)" in res.mended
    ob = next(o for o in rw["obligations"] if o["kind"] == "raises-iff-original")
    assert ob["result"] == "proved"
    out = tmp_path / "mended.py"
    out.write_text(res.mended)
    a, b = load_file_module(src, "_nl_a").Model(), load_file_module(out, "_nl_b").Model()
    b.load_state_dict(a.state_dict())
    b = vr.install(b)
    x = torch.randn(4, 8)
    assert torch.equal(a(x), b(x))
    bad = x.clone()
    bad[0, 0] = float("nan")
    for model in (a, b, torch.compile(b, backend="eager")):
        with pytest.raises(ValueError, match="nan loss"):
            model(bad)
    facts = {"names": {"loss": {"kind": "tensor", "shape": [], "dtype": "float32"}}, "self": {}}
    tampered = {**{k: ob[k] for k in ("exception", "message", "raises_when", "items", "numbers")},
                "asserts": "torch.logical_not(torch.isinf(loss))", "restored": ("ValueError", "nan loss")}
    assert raises_iff(tampered, Ctx(facts, {})).result == "refuted"


def test_a_restored_exception_has_the_context_eager_gave_it(tmp_path):
    """The restored exception was raised inside the handler of the RuntimeError it replaces,
    with `from None`: its __context__ was that RuntimeError and __suppress_context__ True, where
    eager's has the exception the caller was handling (None outside a handler)."""
    fn_mod = _load(tmp_path, _mend_all(_CLAMP)[0])
    torch._dynamo.reset()
    wrapped = vr.restoring(torch.compile(fn_mod.clamp_positive, backend="aot_eager"))
    with pytest.raises(ValueError) as info:
        wrapped(-torch.ones(3))
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert info.value.__suppress_context__ is False
    outer = KeyError("being handled")
    try:
        raise outer
    except KeyError:
        with pytest.raises(ValueError) as info:
            wrapped(-torch.ones(3))
    assert info.value.__context__ is outer and str(info.value) == "negative input"
