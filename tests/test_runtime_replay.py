"""The post-graph replay of deferred effects (mend.runtime, issue 11), on a mended fixture.

What the design rests on (torch 2.13, docs/research/deferred_effects): Dynamo does not run a
``ModuleType`` subclass's ``__setattr__`` while tracing, records the store to
``mend.runtime._replay`` as a side effect and replays it as ``STORE_ATTR`` right after the
graph call. These tests check that on the installed torch (a torch upgrade that changes it
fails here), and what users see: eager's printed, logged and warned output, in count, text
and source line, with and without ``mend.runtime.install``, an ordinary FX graph (no
``with_effects``, no ``mend::capture``) that a second process loads from Inductor's cache,
case 015's snapshot, and the output before a raise.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import libcst as cst
import pytest
import torch

import mend.runtime as rt
from mend.rules import deferred_side_effects as de

FIXTURE = Path(__file__).parent / "fixtures" / "deferred_replay" / "effects_model.py"
REPO = Path(__file__).resolve().parents[1]
SITE_PREFIXES = ("print(", "logger.warning(", "warnings.warn(")


def _mend(source: str) -> str:
    """Every print/logger/warning site of ``source`` rewritten by the rule, one at a time.
    The rewrite adds no line, so the sites' line numbers stay valid."""
    lines = [i for i, text in enumerate(source.splitlines(), 1) if text.strip().startswith(SITE_PREFIXES)]
    assert len(lines) == 6
    for line in lines:
        res = de.rewrite(cst.parse_module(source), line)
        assert isinstance(res, de.RewriteResult), res
        assert res.code.count("\n") == source.count("\n")  # no line moved
        source = res.code
    return source


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # warnings' registry and logging find the module, as for an import
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    mended_path = tmp / FIXTURE.name
    mended_path.write_text(_mend(FIXTURE.read_text()))
    return _load(FIXTURE, "_replay_original"), _load(mended_path, "_replay_mended"), mended_path


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen = []

    def emit(self, record):
        self.seen.append((record.name, record.levelname, record.getMessage(), os.path.basename(record.pathname),
                          record.lineno, record.funcName))


def _observe(fn, *args, calls: int = 2):
    """(results or exception, stdout, warnings, log records) over ``calls`` calls."""
    out, handler = io.StringIO(), _Records()
    log = logging.getLogger("mend_test.effects")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    results = []
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), torch.no_grad():
            warnings.simplefilter("default")  # once per location, as a user sees it
            for _ in range(calls):
                try:
                    results.append(("ok", fn(*args)))
                except Exception as exc:  # noqa: BLE001 - compared below
                    results.append(("raised", type(exc).__name__))
    finally:
        log.removeHandler(handler)
    shown = [(str(w.message), w.category.__name__, os.path.basename(w.filename), w.lineno) for w in caught
             if "site-packages" not in w.filename]  # torch's own (a compile-time deprecation) are not the model's
    return results, out.getvalue(), shown, handler.seen


def _same(ref, got):
    (r_res, r_out, r_warn, r_log), (g_res, g_out, g_warn, g_log) = ref, got
    assert [r[0] for r in r_res] == [g[0] for g in g_res]
    for r, g in zip(r_res, g_res):
        if r[0] == "ok":
            torch.testing.assert_close(g[1], r[1], rtol=0, atol=0)
        else:
            assert g[1] == r[1]
    assert g_out == r_out
    assert g_warn == r_warn
    assert g_log == r_log


def _clear_warning_registries():
    for name in ("_replay_original", "_replay_mended"):
        vars(sys.modules[name]).pop("__warningregistry__", None)


@pytest.mark.parametrize("install", [False, True], ids=["no-install", "install"])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_output_equals_the_originals_in_count_text_and_line(modules, backend, install):
    original, mended, _ = modules
    torch.manual_seed(0)
    ref_model = original.Model().eval()
    model = mended.Model().eval()
    model.load_state_dict(ref_model.state_dict())
    if install:
        rt.install(model)
    x = torch.randn(3, 4)
    torch._dynamo.reset()
    _clear_warning_registries()
    ref = _observe(ref_model, x, calls=3)
    _clear_warning_registries()
    got = _observe(torch.compile(model, backend=backend, fullgraph=True), x, calls=3)
    _same(ref, got)
    _, out, warned, logged = ref
    assert out.count("pre-scale:") == 3 and len(logged) == 3 and len(warned) == 1  # the default filter: once
    assert warned[0][2:] == (FIXTURE.name, 37) and logged[0][3:] == (FIXTURE.name, 21, "forward")
    # eager, the mended module behaves as the original
    eager = mended.Model().eval()
    eager.load_state_dict(ref_model.state_dict())
    _clear_warning_registries()
    _same(ref, _observe(rt.install(eager) if install else eager, x, calls=3))


def test_the_graph_is_ordinary_and_the_store_replays_after_it(modules):
    """One graph, no break, no effect operator or token in it; the entries are shown after
    the graph ran, never while Dynamo traced."""
    from torch._dynamo.backends.common import aot_autograd

    _, mended, _ = modules
    events, codes = [], []

    def fw(gm, example_inputs):
        codes.append(gm.code)

        def run(*args):
            events.append("graph ran")
            return gm(*args)
        run._boxed_call = False
        return run

    model = mended.Model().eval()
    torch._dynamo.reset()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend=aot_autograd(fw_compiler=fw), fullgraph=True)

        class Tap(io.StringIO):
            def write(self, s):
                events.append("printed")
                return len(s)
        with contextlib.redirect_stdout(Tap()):
            compiled(torch.randn(2, 4))
    assert len(codes) == 1
    assert "with_effects" not in codes[0] and "mend" not in codes[0] and "_assert_async" not in codes[0]
    first = events.index("graph ran")
    assert "printed" not in events[:first] and events.count("printed") >= 2  # all after the graph call


def _mended_checked(modules, install):
    _, mended, _ = modules
    model = mended.Checked().eval()
    return rt.install(model) if install else model


@pytest.mark.parametrize("install", [False, True], ids=["no-install", "install"])
def test_a_print_before_a_failing_check_is_shown_as_in_eager(modules, install):
    """The rule emitted the print ``ordered=True`` (a check follows it): under Inductor the
    print before a failing ``torch._assert_async`` is shown, exactly as eager shows it."""
    original, mended, path = modules
    assert 'defer_print("checking", h.sum(), ordered=True)' in path.read_text()
    torch.manual_seed(0)
    ref_model = original.Checked().eval()
    model = _mended_checked(modules, install)
    model.load_state_dict(ref_model.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(model)
    for x in (torch.ones(2, 4), torch.full((2, 4), 20.0)):
        ref = _observe(ref_model, x, calls=1)
        got = _observe(compiled, x, calls=1)
        assert ref[0][0][0] == got[0][0][0] and ref[1] == got[1] and "checking" in ref[1]
    assert ref[0][0] == ("raised", "RuntimeError")


@pytest.mark.parametrize("install", [False, True], ids=["no-install", "install"])
def test_a_print_before_a_raise_from_python_is_shown(modules, install):
    """A raise outside the graph runs after the replayed store: the print comes first."""
    original, mended, _ = modules
    model = mended.RaisesInPython()
    if install:
        rt.install(model)
    torch._dynamo.reset()
    compiled = torch.compile(model)
    x = torch.ones(3)
    for fail in (False, True):
        ref = _observe(original.RaisesInPython(), x, fail, calls=1)
        got = _observe(compiled, x, fail, calls=1)
        _same(ref, got)
    assert ref[0] == [("raised", "ValueError")] and ref[1] == "before the raise tensor(6.)\n"


def test_a_plain_deferred_print_is_lost_when_its_graph_raises():
    """The limit the ordered form exists for (proofs/dse_graph_raise_drops.smt2): if this
    starts printing, the post-graph replay got a path for exceptions -- revisit the rule."""
    def f(x):
        rt.defer_print("lost", x.sum())
        torch._assert_async((x < 10).all(), "x too large")
        return x * 2

    torch._dynamo.reset()
    res, out, _, _ = _observe(torch.compile(f), torch.full((2,), 20.0), calls=1)
    assert res == [("raised", "RuntimeError")] and out == ""


CASE_015 = REPO.parent / "shared" / "cases" / "015_print_tensor_then_inplace.py"


@pytest.mark.skipif(not CASE_015.is_file(), reason="../shared/cases is absent")
@pytest.mark.parametrize("install", [False, True], ids=["no-install", "install"])
def test_case_015_snapshot_under_inductor(install, tmp_path):
    """shared/cases 015's trap, as fixed: the print shows the values before ``h.mul_``."""
    source = CASE_015.read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if t.strip().startswith("print("))
    (tmp_path / CASE_015.name).write_text(de.rewrite(cst.parse_module(source), line).code)
    original = _load(CASE_015, "_case015_original")
    mended = _load(tmp_path / CASE_015.name, "_case015_mended")
    ref_model = original.Model().eval()
    model = mended.Model().eval()
    model.load_state_dict(ref_model.state_dict())
    torch._dynamo.reset()
    compiled = torch.compile(rt.install(model) if install else model, fullgraph=True)
    (x,) = original.get_inputs()
    ref, got = _observe(ref_model, x.clone()), _observe(compiled, x.clone())
    _same(ref, got)
    assert "pre-scale activations:" in got[1]


def test_a_call_in_a_checkpoint_body_runs_as_written():
    """Inside a higher-order operator's body the store cannot be replayed: the call is
    performed as written, a graph break as in the original, and prints as eager does."""
    from torch.utils.checkpoint import checkpoint

    class C(torch.nn.Module):
        def body(self, x):
            rt.defer_print("inside", x.sum())
            return x.sin()

        def forward(self, x):
            rt.defer_print("root a", x.sum())
            y = checkpoint(self.body, x, use_reentrant=False)
            rt.defer_print("root b", y.sum())
            return y

    def run(model):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            model(torch.ones(2, requires_grad=True)).sum().backward()
        return out.getvalue()

    torch._dynamo.reset()
    eager = run(C())
    assert run(torch.compile(C())) == eager and eager.count("inside") == 2  # recomputed in backward, as eager


_CACHE_SCRIPT = r"""
import json, sys, importlib.util, torch
from torch._dynamo.utils import counters
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec)
sys.modules["m"] = m; spec.loader.exec_module(m)
torch.manual_seed(0)
model = m.Model().eval()
with torch.no_grad():
    torch.compile(model)(torch.randn(2, 4, generator=torch.Generator().manual_seed(1)))
print("COUNTERS " + json.dumps({k: v for k, v in counters["inductor"].items() if "cache" in k}))
"""


@pytest.mark.slow
def test_a_second_process_loads_the_mended_graph_from_inductors_cache(modules, tmp_path):
    """Issue 11's cold-start fact: a fresh process with the same cache folder hits the FX
    graph cache for the mended graph (no bypass, no miss) and shows the same output."""
    _, _, path = modules
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), OMP_NUM_THREADS="1",
               PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT, str(path)], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        text, _, counters = p.stdout.rpartition("COUNTERS ")
        runs.append((text, json.loads(counters)))
    (first_out, first), (second_out, second) = runs
    assert first.get("fxgraph_cache_miss", 0) >= 1
    assert second.get("fxgraph_cache_hit", 0) >= 1
    assert second.get("fxgraph_cache_bypass", 0) == 0 and second.get("fxgraph_cache_miss", 0) == 0
    assert first_out == second_out and first_out.count("pre-scale:") == 1


# --- regressions from the adversarial review ----------------------------------------------

class _Holder:
    def __init__(self, t):
        self.t = t

    def __repr__(self):
        return f"H({self.t})"


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_objects_the_snapshot_cannot_hold_run_as_written(backend):
    """An OrderedDict (a ModelOutput is one), a namedtuple, a dataclass or a user object would
    be a trace-time constant, shown as it is at replay: such a call is performed as written
    (a graph break, as in the original) and prints what eager prints."""
    import collections
    import dataclasses

    NT = collections.namedtuple("NT", "a b")

    @dataclasses.dataclass
    class DC:
        t: torch.Tensor
        n: int

    holder = _Holder(torch.zeros(2))

    def f(x):
        rt.defer_print("od", collections.OrderedDict(a=x * 2))
        rt.defer_print("nt", NT(x, x.shape[0]))
        rt.defer_print("dc", DC(x * 2, 3))
        rt.defer_print("holder", holder)
        holder.t.add_(1)
        return x + 1

    def run(fn):
        holder.t.zero_()
        out = io.StringIO()
        with contextlib.redirect_stdout(out), torch.no_grad():
            fn(torch.ones(2))
        return out.getvalue()

    torch._dynamo.reset()
    eager = run(f)
    assert "OrderedDict([('a', tensor([2., 2.]))])" in eager and "H(tensor([0., 0.]))" in eager
    assert run(torch.compile(f, backend=backend)) == eager


def _printed(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue()


def test_print_options_set_later_in_the_graph_do_not_change_a_replayed_print():
    """Helper-33's case 8: `torch.set_printoptions` after a deferred print in the same forward
    is traced and applied before the replay, which showed 2 digits where eager showed 4. The
    options are read at the call (guarded: changed between calls, they make Dynamo retrace)."""

    def f(x):
        rt.defer_print("h", x * 1.123456789)
        torch.set_printoptions(precision=2)
        return x + 1

    x = torch.tensor([0.123456, 1.0])
    torch._dynamo.reset()
    try:
        eager = _printed(f, x)
        torch.set_printoptions(precision=4)
        compiled = _printed(torch.compile(f, backend="eager"), x)
        assert eager == compiled == "h tensor([0.1387, 1.1235])\n"
        # changed between calls (still 2 from the last call): the replay follows them
        assert _printed(torch.compile(f, backend="eager"), x) == "h tensor([0.14, 1.12])\n"
    finally:
        torch.set_printoptions(profile="default")


def test_a_grad_fn_the_fake_tensor_does_not_know_is_printed_as_written():
    """Helper-33's case 1: a float argument made Dynamo recompile with it unspecialized; the
    fake tensor's grad_fn is then autograd's placeholder `Error`, and the replay printed the
    tensor without `grad_fn=<MulBackward0>`. Such a call is performed as written."""
    lin = torch.nn.Linear(3, 3)

    def f(x, s: float):
        h = lin(x) * s
        rt.defer_print("h", h, s)
        return h + 1

    x = torch.ones(3)
    torch._dynamo.reset()
    cf = torch.compile(f, backend="eager")
    for s in (0.5, 0.25, 0.125):
        eager = _printed(f, x, s)
        assert "grad_fn=<MulBackward0>" in eager
        assert _printed(cf, x, s) == eager


def test_replayed_log_records_leave_other_threads_alone():
    """The replay makes each record itself (Logger.makeRecord + handle): it used to patch the
    shared logger's findCaller, which raced with other threads (AttributeError, and records
    of untouched code labelled with the deferred call's line)."""
    import threading

    log = logging.getLogger("mend_test.threads")
    log.setLevel(logging.INFO)
    handler = _Records()
    log.addHandler(handler)
    log.propagate = False

    @torch.compile(backend="eager")
    def f(x):
        rt.defer_log(log, "info", "v %s", x.sum())
        return x * 2

    def direct():
        for _ in range(300):
            log.info("direct")

    errors = []

    def deferred():
        try:
            for _ in range(300):
                f(torch.ones(2))
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)

    torch._dynamo.reset()
    f(torch.ones(2))  # compile once, before the threads
    threads = [threading.Thread(target=deferred), threading.Thread(target=deferred), threading.Thread(target=direct)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        log.removeHandler(handler)
    assert errors == []
    direct_sites = {(r[4], r[5]) for r in handler.seen if r[2] == "direct"}
    deferred_sites = {(r[4], r[5]) for r in handler.seen if r[2] != "direct"}
    assert len(direct_sites) == 1 and next(iter(direct_sites))[1] == "direct"
    assert len(deferred_sites) == 1 and next(iter(deferred_sites))[1] == "f"
    assert sum(1 for r in handler.seen if r[2] == "direct") == 300


def test_a_stacklevel_past_the_compiled_frame_names_the_caller_as_eager_does(tmp_path):
    # a hidden-case probe: `defer_warn(..., stacklevel=2)` in a top-level forward was attributed
    # to mend/runtime.py when replayed; eager (and the compiled original) name forward's caller.
    # The rule no longer emits stacklevel != 1 (the traced stack omits torch.nn's call frames,
    # so a nested module's caller cannot be named exactly); the runtime's own call is tested
    source = ("import warnings\nimport torch\nimport mend.runtime as _mend_rt\n\n\nclass M(torch.nn.Module):\n"
              "    def forward(self, x):\n        h = x * 2\n        {call}('deprecated path', UserWarning, "
              "stacklevel=2)\n        return h + 1\n")
    paths = {"original": tmp_path / "sl_orig.py", "mended": tmp_path / "sl_mended.py"}
    paths["original"].write_text(source.format(call="warnings.warn"))
    paths["mended"].write_text(source.format(call="_mend_rt.defer_warn"))
    seen = {}
    for tag, path in paths.items():
        mod = _load(path, f"_stacklevel_{tag}")
        for mode in ("eager", "compiled"):
            torch._dynamo.reset()
            model = mod.M()
            fn = model if mode == "eager" else torch.compile(model, backend="aot_eager")
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fn(torch.ones(2))
            seen[tag, mode] = [(os.path.basename(w.filename), w.lineno) for w in caught
                               if str(w.message) == "deprecated path"]
    assert seen["original", "eager"] and seen["original", "eager"][0][0] == "module.py"
    assert seen["mended", "compiled"] == seen["original", "compiled"] == seen["original", "eager"]
    res = de.rewrite(cst.parse_module(source.format(call="warnings.warn")), 9)
    assert not isinstance(res, de.RewriteResult) and "names a caller" in res.reason


_REBOUND = logging.getLogger("mend_test.rebound_a")


def test_a_logger_is_read_at_trace_time_and_guarded_by_identity():
    """The logger a deferred call names is taken from Dynamo's variable at trace time (torch
    2.11's Dynamo answers neither ``isinstance`` nor ``id()`` on a logger, and the graph
    broke there) and guarded by identity: one graph (fullgraph), and a module global rebound
    to another logger recompiles and logs to the new one, as eager does."""
    global _REBOUND
    a, b = logging.getLogger("mend_test.rebound_a"), logging.getLogger("mend_test.rebound_b")
    handlers = {}
    for lg in (a, b):
        lg.setLevel(logging.INFO)
        lg.propagate = False
        handlers[lg.name] = _Records()
        lg.addHandler(handlers[lg.name])

    def f(x):
        rt.defer_log(_REBOUND, "info", "sum %s", x.sum())
        return x * 2

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="eager", fullgraph=True)
    try:
        compiled(torch.ones(2))
        _REBOUND = b
        compiled(torch.full((2,), 3.0))  # same shape: only the logger's guard can fail
    finally:
        _REBOUND = a
        for lg in (a, b):
            lg.removeHandler(handlers[lg.name])
    assert [r[2] for r in handlers["mend_test.rebound_a"].seen] == ["sum tensor(2.)"]
    assert [r[2] for r in handlers["mend_test.rebound_b"].seen] == ["sum tensor(6.)"]


def test_a_logger_adapter_is_performed_as_written():
    """A ``LoggerAdapter`` is not a ``logging.Logger``: the call is performed as written (a
    graph break, as in the original) and logs what eager logs."""
    base = logging.getLogger("mend_test.adapter")
    base.setLevel(logging.INFO)
    base.propagate = False
    handler = _Records()
    base.addHandler(handler)
    adapter = logging.LoggerAdapter(base, {"k": 1})

    def f(x):
        rt.defer_log(adapter, "info", "sum %s", x.sum())
        return x * 2

    torch._dynamo.reset()
    try:
        f(torch.ones(2))
        torch.compile(f, backend="eager")(torch.ones(2))
    finally:
        base.removeHandler(handler)
    assert [r[2] for r in handler.seen] == ["sum tensor(2.)", "sum tensor(2.)"]


def test_a_float_argument_made_unspecialized_is_snapshotted_not_a_break():
    """helper-36: with a float forward argument unspecialized on recompile (a SymFloat), a
    `fmt` over it was no trace constant: the graph broke inside the runtime, and the replayed
    warning was attributed to mend/runtime.py instead of the caller's line."""
    def f(x, s: float):
        rt.defer_warn(rt.fmt("odd scale {}", s))
        return x * s

    torch._dynamo.reset()
    cf = torch.compile(f, backend="eager")
    for s in (0.5, 0.75, 1.25):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            cf(torch.ones(2), s)
        assert [(str(x.message), Path(x.filename).name) for x in w] == [(f"odd scale {s}", "test_runtime_replay.py")]
    torch._dynamo.reset()
    e = torch._dynamo.explain(f)(torch.ones(2), 0.75)
    assert e.graph_break_count == 0
