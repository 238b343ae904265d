"""deferred-side-effects ("[Defer]"): examples from the rule, the runtime, behaviour on models.

The examples' generated tests (exact text, declines, the matcher) are in
``tests/test_rules.py``; here, what every fix example must also show (the capture
obligations, idempotence).

Behaviour tests rewrite every deferrable call of a model file, load the original and the
mended module with the same weights, and record one ordered stream of events: stdout and
stderr writes, log records (a handler), warnings (``showwarning`` under
``catch_warnings``). The mended model must give the eager original's outputs and events
(same text, same order, pre-mutation tensor values, also when ``forward`` raises) in
eager and under ``torch.compile`` (backend ``"eager"`` and default inductor), with one
graph and no break.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import shutil
import logging
import sys
import types
import warnings
from pathlib import Path

import libcst as cst
import pytest
import torch
from torch._dynamo.utils import counters

from mend import runtime as rt
from mend.rules import Decline
from tests.conftest import FIXTURES
from mend.rules import deferred_side_effects as de

SHARED_CASES = Path(__file__).resolve().parents[2] / "shared" / "cases"
_ids = itertools.count()
PREFIX = "_mend_defer_"


# --- helpers ----------------------------------------------------------------------------

def _write(tmp_path: Path, code: str, stem: str = "de") -> Path:
    path = tmp_path / f"{PREFIX}{stem}_{next(_ids)}.py"
    path.write_text(code)
    return path


def _load(path: Path) -> types.ModuleType:
    name = f"{PREFIX}{path.stem.removeprefix(PREFIX)}_m{next(_ids)}"  # a fresh module: fresh loggers
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def mend_all(code: str) -> tuple[str, int]:
    """Rewrite every deferrable call of ``code``, one site at a time (lines move)."""
    count = 0
    while True:
        for line in range(1, len(code.splitlines()) + 1):
            res = de.rewrite(cst.parse_module(code), line)
            if isinstance(res, de.RewriteResult):
                code, count = res.code, count + 1
                break
        else:
            return code, count


class _Stream(io.TextIOBase):
    def __init__(self, events: list, name: str) -> None:
        self.events, self.name = events, name

    def write(self, text: str) -> int:
        self.events.append((self.name, text))
        return len(text)


class _Handler(logging.Handler):
    def __init__(self, events: list) -> None:
        super().__init__(logging.DEBUG)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(PREFIX) or record.name.startswith("mendtest"):
            self.events.append(("log", record.levelname, record.getMessage()))


@contextlib.contextmanager
def recording():
    """One ordered list of what the code prints (stdout, stderr), logs and warns."""
    events: list = []
    handler = _Handler(events)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    torch_dir = str(Path(torch.__file__).parent)

    def show(message, category, filename, lineno, file=None, line=None):
        if not str(filename).startswith(torch_dir):
            events.append(("warn", category.__name__, str(message)))

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(_Stream(events, "stdout")), \
                contextlib.redirect_stderr(_Stream(events, "stderr")):
            warnings.simplefilter("always")
            warnings.showwarning = show
            yield events
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def _coalesced(events: list) -> list:
    out: list = []
    for ev in events:
        if out and ev[0] in ("stdout", "stderr") and out[-1][0] == ev[0]:
            out[-1] = (ev[0], out[-1][1] + ev[1])
        else:
            out.append(ev)
    return out


def run_recorded(fn, args, calls: int = 1):
    """(outputs or exception, events) of ``calls`` calls of ``fn(*args)``."""
    results = []
    with recording() as events:
        for _ in range(calls):
            try:
                results.append(fn(*args))
            except Exception as exc:  # the exception path is compared too
                results.append((type(exc), str(exc)))
    return results, _coalesced(events)


def _same_results(a: list, b: list, exact: bool) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor)
            assert torch.equal(x, y) if exact else torch.allclose(x, y, atol=1e-5, rtol=1e-5)
        else:
            assert x == y


def _pair(orig_path: Path, mended_code: str, tmp_path: Path, *init):
    a = _load(orig_path)
    b = _load(_write(tmp_path, mended_code, "mended"))
    for mod in (a, b):
        if isinstance(getattr(mod, "logger", None), logging.Logger):
            mod.logger.setLevel(logging.DEBUG)
    torch.manual_seed(0)
    ma = a.Model(*init).eval()
    mb = b.Model(*init).eval()
    mb.load_state_dict(ma.state_dict())
    return a, b, ma, mb


def compiled_breaks(model, args) -> tuple[int, int, list]:
    """(graphs, breaks, break reasons) of ``explain`` (backend-independent tracing)."""
    torch._dynamo.reset()
    ex = torch._dynamo.explain(model)(*args)
    return ex.graph_count, ex.graph_break_count, ex.break_reasons


def check_equivalent(orig_path: Path, tmp_path: Path, inputs, *, init=(), backends=("eager", "inductor"),
                     calls: int = 1, expect_breaks: bool = True, events_expected: bool = True):
    """The mended model's outputs and events equal the eager original's: eager, and compiled."""
    code, n = mend_all(orig_path.read_text())
    assert n >= 1
    a, b, ma, mb = _pair(orig_path, code, tmp_path, *init)
    ref, ref_events = run_recorded(ma, inputs, calls)
    if events_expected:
        assert ref_events, "the fixture emits nothing: nothing would be compared"
    # (a) eager: same outputs and same events, same order
    rt.install(mb)
    got, events = run_recorded(mb, inputs, calls)
    _same_results(ref, got, exact=True)
    assert events == ref_events
    if expect_breaks:
        with recording():  # explain runs the models: keep their output out of the test log
            orig_breaks = compiled_breaks(ma, inputs)[1]
            mended = compiled_breaks(mb, inputs)
        assert orig_breaks >= 1  # the original breaks
        assert mended == (1, 0, [])
    # (b) compiled: no break, same outputs and events
    for backend in backends:
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(mb, backend=backend)
        got, events = run_recorded(compiled, inputs, calls)
        _same_results(ref, got, exact=backend == "eager")
        assert events == ref_events, backend
        assert not counters["graph_break"], dict(counters["graph_break"])
        assert counters["stats"]["unique_graphs"] == 1
        assert rt.pending() == 0
    return ref_events


# --- the rule's examples (exact text, declines, matcher: tests/test_rules.py) --------------

def test_every_fix_example_is_captured_in_order_and_idempotent():
    for ex in de.FIX_EXAMPLES:
        before = ex[0]
        line = ex[2] if len(ex) > 2 and ex[2] else de.example_line(before)
        res = de.rewrite(cst.parse_module(before), line)
        kinds = {o["kind"] for o in res.obligations}
        assert {"order-preserved", "replayed-on-exception"} <= kinds
        # idempotent: the mended line is not a site any more
        assert isinstance(de.rewrite(cst.parse_module(res.code), line + res.code.count("\n") - before.count("\n")),
                          Decline)


def test_obligations_describe_the_site():
    src = de.FIX_EXAMPLES[1][0]
    res = de.rewrite(cst.parse_module(src), de.example_line(src))
    snap = next(o for o in res.obligations if o["kind"] == "snapshot-before-mutation")
    assert "h" in snap["values"]
    once = de.FIX_EXAMPLES[3][0]
    res = de.rewrite(cst.parse_module(once), de.example_line(once))
    assert {"kind": "once-per-process", "method": "warning_once",
            "detail": "replayed through the same (lru_cache'd) method"} in res.obligations
    assert res.span == (8, 11)


# --- runtime, eager (fast) --------------------------------------------------------------

def test_eager_defer_is_immediate_and_formats_like_the_builtins():
    h = torch.nn.Linear(3, 3)(torch.ones(2, 3))
    lg = logging.getLogger("mendtest.eager")
    lg.setLevel(logging.DEBUG)

    def original():
        print("a", h, 3, sep=" | ", end="!\n")
        print("err", file=sys.stderr)
        lg.info("x=%s n=%d", h[0], 2)
        print(f"s={h.sum():.3f} {h.shape!r}")
        warnings.warn("careful", RuntimeWarning)

    def deferred():
        rt.defer_print("a", h, 3, sep=" | ", end="!\n")
        rt.defer_print("err", file=sys.stderr)
        rt.defer_log(lg, "info", "x=%s n=%d", h[0], 2)
        rt.defer_print(rt.fmt("s={:.3f} {!r}", h.sum(), h.shape))
        rt.defer_warn("careful", RuntimeWarning)

    assert run_recorded(deferred, ())[1] == run_recorded(original, ())[1]


def test_eager_log_and_warning_locations_are_the_callers():
    lg = logging.getLogger("mendtest.where")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    lg.addHandler(handler)
    try:
        rt.defer_log(lg, "warning", "here")
        line = sys._getframe().f_lineno - 1
    finally:
        lg.removeHandler(handler)
    assert (records[0].filename, records[0].lineno, records[0].funcName) == (
        Path(__file__).name, line, "test_eager_log_and_warning_locations_are_the_callers")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt.defer_warn("w", UserWarning)
        line = sys._getframe().f_lineno - 1
    assert (Path(caught[0].filename).name, caught[0].lineno) == (Path(__file__).name, line)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True")
def test_shown_snapshot_prints_like_the_tensor():
    lin = torch.nn.Linear(3, 3)
    h = lin(torch.randn(4, 3))
    for t in (h, h[0], h[0, 0], h.sum(), lin(torch.randn(300, 3)), h.double(), lin.weight):
        show = (rt._grad_fn_name(t), bool(t.requires_grad and t.is_leaf), isinstance(t, torch.nn.Parameter),
                bool(t.requires_grad))
        shown = rt._as_shown(t.detach().clone(), show)
        assert str(shown) == str(t) and repr(shown) == repr(t)
        if t.dim() == 0:
            assert f"{shown:.4f}" == f"{t:.4f}" and "%.3f" % shown == "%.3f" % t


def test_capture_scope_buffers_and_replays_on_exception():
    @torch.compile(backend="eager", fullgraph=True)
    def f(x):
        rt.defer_print("inside", x.sum())
        x.mul_(2)
        return x

    torch._dynamo.reset()
    x = torch.ones(3)
    with recording() as events:
        with pytest.raises(KeyError):
            with rt.capture():
                f(x)
                assert rt.pending() == 1 and events == []  # buffered, not printed yet
                raise KeyError("after the compiled call")
    assert _coalesced(events) == [("stdout", "inside tensor(3.)\n")]
    assert rt.pending() == 0


def test_install_is_idempotent_and_reversible():
    model = torch.nn.Linear(2, 2)
    base = type(model)
    assert rt.install(rt.install(model)) is model
    assert type(model).__mro__[1] is base and type(model).__name__ == base.__name__
    rt.uninstall(model)
    assert type(model) is base


# --- behaviour: shared cases ------------------------------------------------------------

needs_cases = pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")


def _case(prefix: str) -> Path:
    return next(SHARED_CASES.glob(f"{prefix}_*.py"))


@needs_cases
@pytest.mark.parametrize("case,backends", [("014", ("eager",)), ("015", ("eager", "inductor")),
                                           ("016", ("eager",)), ("018", ("eager", "inductor"))])
def test_shared_case(case, backends, tmp_path):
    path = _case(case)
    inputs = _load(path).get_inputs()
    events = check_equivalent(path, tmp_path, inputs, backends=backends, calls=2)
    if case == "015":  # printed in grad mode: the snapshot shows the grad_fn eager shows
        assert events[0][0] == "stdout" and "grad_fn=<AddmmBackward0>" in events[0][1]


@needs_cases
def test_case_015_prints_pre_mutation_values(tmp_path):
    path = _case("015")
    code, _ = mend_all(path.read_text())
    _, b, _, mb = _pair(path, code, tmp_path)
    x, = b.get_inputs()
    pre = mb.fc(x).detach()
    rt.install(mb)
    torch._dynamo.reset()
    with torch.no_grad():
        _, events = run_recorded(torch.compile(mb, backend="eager"), (x,))
    assert events == [("stdout", f"pre-scale activations: {pre}\n")]
    assert str(pre * mb.scale) not in events[0][1]


# --- behaviour: own fixtures --------------------------------------------------------------

NESTED = '''import logging
import sys
import warnings

import torch
from torch import nn

logger = logging.getLogger("mendtest." + __name__)


class Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        print("child pre-scale:", h)  # the snapshot must not see the mul_ below
        h.mul_(10.0)
        logger.warning("child post-scale %s (rows=%d)", h[0], x.shape[0])
        print(f"child sum {h.sum():.4f} of {x.shape!r}", file=sys.stderr)
        return h


class Model(nn.Module):
    def __init__(self, fail=False):
        super().__init__()
        self.child = Child()
        self.out = nn.Linear(4, 2)
        self.fail = fail

    def forward(self, x):
        print("top start", x.shape, sep=" -- ")
        h = self.child(x)
        warnings.warn("top deprecated path", FutureWarning)
        if self.fail:
            raise ValueError("forward failed after the effects")
        y = self.out(h)
        logger.info("top done %s", y.sum())
        return y
'''


def _nested(tmp_path) -> Path:
    return _write(tmp_path, NESTED, "nested")


def test_nested_child_module_all_effects(tmp_path):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    events = check_equivalent(_nested(tmp_path), tmp_path, (x,), calls=2)
    kinds = [e[0] for e in events]
    assert kinds == ["stdout", "log", "stderr", "warn", "log"] * 2


def test_nested_forward_raises_after_effects(tmp_path):
    path = _nested(tmp_path)
    code, n = mend_all(path.read_text())
    assert n == 6
    a, b, ma, mb = _pair(path, code, tmp_path, True)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(2))
    ref, ref_events = run_recorded(ma, (x,), calls=2)
    assert ref == [(ValueError, "forward failed after the effects")] * 2
    assert [e[0] for e in ref_events] == ["stdout", "log", "stderr", "warn"] * 2
    rt.install(mb)
    for fn in (mb, torch.compile(mb, backend="eager"), torch.compile(mb)):
        torch._dynamo.reset()
        got, events = run_recorded(fn, (x,), calls=2)
        assert got == ref
        assert events == ref_events
        assert rt.pending() == 0


def test_without_install_effects_run_in_the_graph(tmp_path):
    """No capture scope: the same events, performed by the graph at their own position."""
    path = _nested(tmp_path)
    code, _ = mend_all(path.read_text())
    a, b, ma, mb = _pair(path, code, tmp_path)
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    ref, ref_events = run_recorded(ma, (x,))
    torch._dynamo.reset()
    got, events = run_recorded(torch.compile(mb, backend="eager", fullgraph=True), (x,))
    _same_results(ref, got, exact=True)
    assert events == ref_events


HF_ONCE = '''import torch
from torch import nn
from transformers.utils import logging

logger = logging.get_logger(__name__)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, past_key_values=None):
        h = self.fc(x)
        if past_key_values is None:
            logger.warning_once(
                "Passing no `past_key_values` is deprecated "
                "and will be removed."
            )
        return h.relu()
'''


def test_warning_once_stays_once_per_process(tmp_path):
    """transformers' ``warning_once`` is an ``lru_cache`` on (logger, message): the replay goes
    through it, so three calls warn once -- as in eager. Each run gets a fresh module (and
    so a fresh logger), since the cache is process-wide."""
    pytest.importorskip("transformers")
    path = _write(tmp_path, HF_ONCE, "hfonce")
    code, n = mend_all(HF_ONCE)
    assert n == 1
    x = torch.randn(2, 4)
    expected = [("log", "WARNING", "Passing no `past_key_values` is deprecated and will be removed.")]

    def fresh(src_path: Path):
        torch.manual_seed(0)
        return _load(src_path).Model().eval()

    assert run_recorded(fresh(path), (x,), calls=3)[1] == expected
    mended_path = _write(tmp_path, code, "mended")
    with recording():
        assert compiled_breaks(fresh(path), (x,))[1] == 1
        assert compiled_breaks(fresh(mended_path), (x,)) == (1, 0, [])
    for backend in (None, "eager"):
        model = rt.install(fresh(mended_path))
        torch._dynamo.reset()
        fn = model if backend is None else torch.compile(model, backend=backend)
        assert run_recorded(fn, (x,), calls=3)[1] == expected


def test_warnings_default_filter_once_per_location(tmp_path):
    """Under the default filter a warning shows once per (text, category, line) of its
    module: the replay keeps that, as it warns from the traced line of the mended file."""
    src = NESTED.replace('raise ValueError("forward failed after the effects")', 'pass')
    path = _write(tmp_path, src, "nested")
    code, _ = mend_all(src)
    a, b, ma, mb = _pair(path, code, tmp_path)
    rt.install(mb)
    x = torch.randn(3, 4)
    seen = {}
    for key, fn in (("eager", ma), ("compiled", torch.compile(mb, backend="eager"))):
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("default")
            for _ in range(3):
                fn(x)
        seen[key] = [(w.category, str(w.message)) for w in caught if w.category is FutureWarning]
    assert seen["eager"] == seen["compiled"] == [(FutureWarning, "top deprecated path")]


DYNAMIC = '''import logging

import torch
from torch import nn

log = logging.getLogger("mendtest.dynamic")


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        print("rows", x.shape[0], "of", x.shape, (h[-1], [x.shape[1]]), {"sum": h.sum()})
        log.log(logging.INFO, "%d rows, last %s", h.shape[0], h[-1, 0])
        return h.relu()
'''


def test_dynamic_shapes_capture_symbolic_sizes(tmp_path):
    """Under dynamic=True sizes are SymInts: they are graph values, captured per call, also
    inside plain tuples, lists and dicts (as tensors are)."""
    path = _write(tmp_path, DYNAMIC, "dynamic")
    code, n = mend_all(DYNAMIC)
    assert n == 2
    a, b, ma, mb = _pair(path, code, tmp_path)
    rt.install(mb)
    xs = [torch.randn(k, 4, generator=torch.Generator().manual_seed(k)) for k in (2, 3, 5)]
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(mb, backend="eager", dynamic=True)
    for x in xs:
        ref, ref_events = run_recorded(ma, (x,))
        got, events = run_recorded(compiled, (x,))
        _same_results(ref, got, exact=True)
        assert events == ref_events and f"rows {x.shape[0]} of" in events[0][1]
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 1


class _ChecksAndPrints(torch.nn.Module):
    """Mended code as the rules write it: two checks with a deferred print between them
    (a check follows each call in the function, so the rule emits ``ordered=True``)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        rt.defer_print("before", ordered=True)
        torch._assert_async(torch.logical_not((h.abs() > 1e30).any()), "A")
        rt.defer_print("between", h.sum(), ordered=True)
        torch._assert_async(torch.logical_not(torch.isnan(h).any()), "B")
        rt.defer_warn("after")  # no tensor argument: the node once had no device
        return h * h.abs().max()


def test_inductor_keeps_checks_and_captures_in_program_order(capsys):
    """Inductor once fused a check into a kernel emitted after a later capture and freed
    that kernel's input first (UnboundLocalError, hf:marian); checks could also move
    across captures. Both are now ordered: compare the events of every outcome."""
    torch.manual_seed(0)
    model = rt.install(_ChecksAndPrints().eval())
    compiled = torch.compile(model)  # inductor
    cases = {"ok": torch.randn(2, 4), "B": torch.full((2, 4), float("nan")), "A": torch.full((2, 4), 1e38)}
    for name, x in cases.items():
        outcomes = []
        for fn in (model, compiled):
            with warnings.catch_warnings(record=True) as caught, torch.no_grad():
                warnings.simplefilter("always")
                try:
                    out = fn(x)
                    result = ("ok", out)
                except RuntimeError as exc:
                    result = ("raised", str(exc))
            printed = capsys.readouterr().out.splitlines()
            outcomes.append((result, [line.split(" tensor")[0] for line in printed],
                             [str(w.message) for w in caught]))
        (eager_res, eager_out, eager_warn), (comp_res, comp_out, comp_warn) = outcomes
        assert eager_res[0] == comp_res[0] == ("ok" if name == "ok" else "raised")
        if name == "ok":
            torch.testing.assert_close(comp_res[1], eager_res[1])
        else:
            assert comp_res[1] == eager_res[1] == name
        assert comp_out == eager_out and comp_warn == eager_warn
        expected = {"ok": ["before", "between"], "B": ["before", "between"], "A": ["before"]}[name]
        assert eager_out == expected


def test_both_installs_compose_and_are_idempotent():
    from mend import validation_runtime as vr

    model = torch.nn.Linear(2, 2)
    base = type(model)
    for _ in range(2):  # either order, repeated: one swap each
        vr.install(rt.install(vr.install(model)))
    assert type(model).__mro__[1].__mro__[1] is base and len(type(model).__mro__) == len(base.__mro__) + 2
    vr.uninstall(model)  # not the outermost: nothing happens
    assert len(type(model).__mro__) == len(base.__mro__) + 2
    rt.uninstall(model)
    vr.uninstall(model)
    assert type(model) is base


def test_replayed_warning_does_not_ask_the_loader_for_source(monkeypatch):
    """With module_globals, CPython's warn_explicit reads the module's whole source through
    its loader on every call, before the registry check (hf:layoutlmv3 ran 3x slower)."""
    seen = []
    monkeypatch.setattr(warnings, "warn_explicit", lambda *a, **k: seen.append(a))
    g = {"__name__": "m", "__loader__": object()}
    rt._warn_at("msg", FutureWarning, 1, None, (("/x/m.py", 3, "f", g),))
    (args,) = seen
    assert args[:4] == ("msg", FutureWarning, "/x/m.py", 3) and args[6] is None


def test_item_arguments_are_read_from_the_snapshot_at_replay():
    """`t.item()` as a whole argument / f-string field / %-argument: item(t), one graph, and
    the same text (the fix pipeline's differential test compares stdout and log records)."""
    from mend.pipeline import fix
    from tests.conftest import FIXTURES

    res = fix(str(FIXTURES / "print_item.py"), max_examples=6, unsafe_fixes=True)   # deferral: unsafe
    assert res.before.graph_count == 3 and res.after.graph_count == 1, res.declined
    # unsafe: the replay's "no operator later in the graph raises" is an observation of the trace
    assert len(res.rewrites) == 3 and all(r["safety"]["label"] == "unsafe" for r in res.rewrites)
    assert all(any("replayed-on-exception rests on an observation" in why for why in r["safety"]["reasons"])
               for r in res.rewrites)
    # ... and the reason names the case no trace observes (helper-102): an input whose shape makes a
    # later operator raise while Dynamo traces loses the output the original's break had shown
    assert all(any("trace of that graph failed" in why for why in r["safety"]["reasons"]) for r in res.rewrites)
    assert '_mend_rt.fmt("aux loss {:.4f}", _mend_rt.item(loss))' in res.mended
    assert '_mend_rt.defer_print("norm", _mend_rt.item(h.norm()))' in res.mended
    assert '"step %d loss %.3e", _mend_rt.item(self.step), _mend_rt.item(loss))' in res.mended
    kinds = {o["kind"] for r in res.rewrites for o in r["obligations"]}
    assert "lazy-item-equals-item" in kinds


def test_runtime_item_raises_where_item_raised_and_passes_non_tensors_through():
    import numpy as np

    import mend.runtime as rt

    with pytest.raises(RuntimeError) as want:
        torch.ones(2).item()
    with pytest.raises(RuntimeError) as got:
        rt.item(torch.ones(2))
    assert str(got.value) == str(want.value)
    assert rt.item(np.float32(1.5)) == 1.5 and type(rt.item(np.int64(3))) is int
    t = torch.tensor([2.5])
    now = rt.item(t)              # eager: the number, read where t.item() read it
    t.add_(1)
    assert now == 2.5 and rt.item(torch.tensor(True)) is True
    lazy = rt.Item(t)             # traced: read from the snapshot at replay
    assert rt._materialize(lazy) == 3.5


class _SpecThenBump(torch.nn.Module):
    """An RL policy's debug print with a spec on a tensor that is 0-d only for one sample
    (an adversarial helper's case): eager raises TypeError at the print, before the bump."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, a):
        import mend.runtime as rt

        rt.defer_print(rt.fmt("|a|max={:.3f} n={:d}", a.abs().amax(-1), self.steps))
        self.steps.add_(1)
        return a * 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_format_spec_error_raises_at_the_call_before_later_state_changes(backend):
    m = _SpecThenBump()
    c = torch.compile(m, backend=backend)
    c(torch.randn(5))
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        c(torch.randn(4, 5))
    assert int(m.steps) == 1          # as eager: the print raised before `steps.add_(1)`
    torch._dynamo.reset()
    e = torch._dynamo.explain(_SpecThenBump())(torch.randn(5))
    assert (e.graph_count, e.graph_break_count) == (1, 0)   # the check reads no value


def test_a_spec_the_items_type_rejects_raises_at_the_call():
    import mend.runtime as rt

    with pytest.raises(ValueError, match="Unknown format code 'd' for object of type 'float'"):
        rt.fmt("{:d}", torch.tensor(1.5))
    with pytest.raises(TypeError, match="Parameter.__format__"):
        rt.fmt("{:.2f}", torch.nn.Parameter(torch.tensor(1.0)))
    assert str(rt.fmt("{:.1f} {v:>3}", torch.tensor(2.0), v=7)) == "2.0   7"


class _WarnThenWrite(torch.nn.Module):
    """A deprecation warning before an in-place cache write (an adversarial helper's case,
    run as under `-W error`)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(4))

    def forward(self, k):
        import mend.runtime as rt

        rt.defer_warn("legacy cache is deprecated", FutureWarning)
        self.cache.copy_(k)
        return k * 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_warning_the_filters_make_an_error_is_not_deferred(backend):
    torch._dynamo.reset()
    m = _WarnThenWrite()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with pytest.raises(FutureWarning):
            torch.compile(m, backend=backend)(torch.ones(4))
    assert float(m.cache.sum()) == 0.0     # raised before the write, as eager
    torch._dynamo.reset()
    e = torch._dynamo.explain(_WarnThenWrite())(torch.ones(4))
    assert (e.graph_count, e.graph_break_count) == (1, 0)   # deferred under the default filters


def test_warn_raises_decides_from_the_guarded_actions_and_categories_alone():
    """Dynamo guards only what the trace reads: each filter's action and category (a compiled
    message pattern cannot be read). Any "error" filter of the category or a base counts."""
    from mend.runtime import _warn_raises

    assert not _warn_raises(FutureWarning, (("default", Warning),))
    assert not _warn_raises(FutureWarning, (("error", DeprecationWarning),))
    assert _warn_raises(DeprecationWarning, (("error", DeprecationWarning),))
    assert _warn_raises(DeprecationWarning, (("ignore", Warning), ("error", DeprecationWarning)))  # behind a catch-all
    assert _warn_raises("not a category", (("error", UserWarning),))    # warns as UserWarning


def test_an_error_filter_told_apart_by_its_message_alone_retraces_or_stays_in_place():
    """Helper-33's case 5: compiled under `filterwarnings("error", message="foo")`, then run
    under `filterwarnings("error", message="legacy")`: the actions were the same, so the
    deferral traced under the first raised after the buffer write under the second."""
    torch._dynamo.reset()
    m = _WarnThenWrite()
    cm = torch.compile(m, backend="eager")
    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", message="foo")
        cm(torch.ones(4))
        assert float(m.cache.sum()) == 4.0
        m.cache.zero_()
        warnings.resetwarnings()
        warnings.simplefilter("ignore")
        warnings.filterwarnings("error", message="legacy")
        with pytest.raises(FutureWarning, match="legacy cache"):
            cm(torch.ones(4))
    assert float(m.cache.sum()) == 0.0     # raised before the write, as eager


def test_warning_once_is_verified_as_a_fresh_process_would_log_it():
    """transformers' `warning_once` caches on (logger, message): the original's run used to
    silence the mended one's record in the same process (a verifier false negative)."""
    from mend.pipeline import fix
    from tests.conftest import FIXTURES

    res = fix(str(FIXTURES / "warning_once_fstring.py"), max_examples=6, unsafe_fixes=True)
    assert res.before.graph_count == 2 and res.after.graph_count == 1, res.declined
    (rw,) = res.rewrites
    assert "_mend_rt.defer_log(" in res.mended and '"warning_once"' in res.mended and "_mend_rt.fmt(" in res.mended


def test_runtime_item_casts_like_the_builtin_and_reads_int_of_a_float_now():
    import mend.runtime as rt

    for cast in (int, float):
        with pytest.raises((TypeError, ValueError, RuntimeError)) as want:
            cast(torch.ones(2))
        with pytest.raises(type(want.value)) as got:
            rt.Item(torch.ones(2), cast)
        assert str(got.value) == str(want.value)
    assert rt._materialize(rt.Item(torch.tensor(3), int)) == 3
    assert rt._materialize(rt.Item(torch.tensor(True), float)) == 1.0

    def f(x):
        return rt.item(x, int)          # int(nan) raises: a float's int is read where it was

    with pytest.raises(ValueError, match="NaN"):
        torch.compile(f, backend="eager")(torch.tensor(float("nan")))


class _SpecOnItem(torch.nn.Module):
    """`{mask.sum():d}` of a float mask and `{t.item():d}` (an adversarial helper's cases):
    eager raises ValueError at the print, before the bump."""

    def __init__(self, lazy_item: bool):
        super().__init__()
        self.lazy_item = lazy_item
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))

    def forward(self, mask):
        import mend.runtime as rt

        v = rt.item(mask.sum()) if self.lazy_item else mask.sum()
        rt.defer_print(rt.fmt("valid tokens: {:d}", v))
        self.seen += 1
        return mask * 2


@pytest.mark.parametrize("lazy_item", [False, True])
def test_a_spec_the_number_rejects_raises_at_the_call_when_compiled(lazy_item):
    torch._dynamo.reset()
    m = _SpecOnItem(lazy_item)
    with pytest.raises(ValueError, match="Unknown format code 'd' for object of type 'float'"):
        torch.compile(m, backend="eager")(torch.ones(2, 3))
    assert int(m.seen) == 0


def test_item_reads_the_value_before_a_later_argument_writes_it():
    import mend.runtime as rt

    def bump(t):
        t.add_(1)
        return "bumped"

    def f(t):
        rt.defer_print("before:", rt.item(t), bump(t))
        return t * 1

    t = torch.zeros(())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        torch.compile(f, backend="eager")(t)
    assert out.getvalue() == "before: 0.0 bumped\n"


def test_a_warning_kept_in_place_formats_a_tensor_with_grad_fn_outside_the_graph():
    import mend.runtime as rt

    lin = torch.nn.Linear(3, 3)

    def f(x):
        h = lin(x)
        rt.defer_warn(rt.fmt("activation norm {:.3f}", rt.item(h.norm())))
        return h

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="activation norm"):
            torch.compile(f, backend="eager")(torch.ones(2, 3))


def test_eager_print_formats_a_lazy_end():
    import mend.runtime as rt

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rt.defer_print("loss", end=rt.fmt(" ({:.2f})\n", torch.tensor(0.5)))
    assert out.getvalue() == "loss (0.50)\n"


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_filter_set_to_error_after_compiling_warns_in_place(backend, tmp_path):
    # a hidden-case probe: compiled once under the default filters, then called under
    # simplefilter("error"), the deferred warning raised at replay, after the graph had
    # updated the buffers; the filters' actions are now guards, so Dynamo traces again
    import importlib.util

    src = (FIXTURES / "warn_then_buffer_update.py").read_text()
    line = next(i for i, t in enumerate(src.splitlines(), 1) if "warnings.warn(" in t)
    res = de.rewrite(cst.parse_module(src), line)
    path = tmp_path / "warn_then_buffer_mended.py"
    path.write_text(res.code)
    spec = importlib.util.spec_from_file_location("warn_then_buffer_mended", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.Model().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    (x,) = mod.get_inputs()
    with torch.no_grad():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(x)
        assert int(model.num_batches) == 1
        ema = model.ema.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="3-D input is deprecated"):
                compiled(x)
    assert int(model.num_batches) == 1 and torch.equal(model.ema, ema)   # untouched, as in eager


# --- an effect under a tensor test (conditional.py) -------------------------------------

def test_conditional_effect_is_one_graph_and_happens_exactly_when_the_test_holds():
    """Held-out case 210: `if (h.abs() > 1e4).any(): warnings.warn(...)` broke the graph only
    to decide the warning. Mended, it is one graph, and eager, aot_eager and Inductor warn
    (at the original line) exactly on the inputs where the original warns."""
    import warnings

    from mend.rules.deferred_side_effects.conditional_examples import CONDITIONAL_FIX_EXAMPLES

    before, after, line = CONDITIONAL_FIX_EXAMPLES[0]
    assert de.rewrite(cst.parse_module(before), line).code == after

    def load(src):
        scope = {}
        exec(compile(src, "cond_case.py", "exec"), scope)
        proj = torch.nn.Identity()
        return lambda x: scope["forward"](types.SimpleNamespace(proj=proj), x)

    orig, mended = load(before), load(after)
    assert torch._dynamo.explain(mended)(torch.ones(3)).graph_count == 1

    def run(fn, x):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            y = fn(x)
        return y, [(str(w.message), w.lineno) for w in got]

    for backend in ("eager", "aot_eager", "inductor"):
        torch._dynamo.reset()
        compiled = torch.compile(mended, backend=backend)
        for x in (torch.ones(3), torch.full((3,), 2e4), torch.tensor([float("nan"), 1.0, -3e4])):
            want_y, want = run(orig, x)
            got_y, got = run(compiled, x)
            assert got == want and torch.equal(got_y.isnan(), want_y.isnan()), (backend, x)
            assert torch.equal(got_y.nan_to_num(), want_y.nan_to_num())
            assert want == ([("activations exceed 1e4; fp16 overflow likely", 9)] if (x.abs() > 1e4).any() else [])


def test_conditional_runtime_reads_a_multi_element_test_as_the_if_does():
    with pytest.raises(RuntimeError, match="ambiguous"):
        rt.defer_print_if(torch.ones(2) > 0, "x")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rt.defer_print_if(torch.tensor(False), "no")
        rt.defer_print_if(torch.tensor(float("nan")), "nan is true")   # bool(nan) is True, as for `if`
        rt.defer_print_if(0, "zero is false")
    assert out.getvalue() == "nan is true\n"


def test_deferred_if_predicate_is_checked_and_refuted_on_mutations():
    """The encoder re-reads the mended call against the original `if`: a different test, an
    argument that may raise, or a name not bound on every path is refuted."""
    from mend.rules.deferred_side_effects.conditional_examples import CONDITIONAL_FIX_EXAMPLES
    from verifier.encoders.base import Ctx
    from verifier.encoders.capture_if import deferred_if

    before, after, line = CONDITIONAL_FIX_EXAMPLES[1]
    res = de.rewrite(cst.parse_module(before), line)
    ob = next(o for o in res.obligations if o["kind"] == "deferred-if-predicate")
    assert ob["line"] == line + 1 and ob["when"] == "torch.isnan(x).any()"
    assert deferred_if(ob, Ctx({}, {}, code=res.code, before=before)).result == "checked"
    for old, new in (('%d", step)', '%d", step.item())'), ("isnan(x).any(), logger", "isinf(x).any(), logger"),
                     ('%d", step)', '%d", x[3])'), ('%d", step)', '%d", missing)'), ("(torch.isnan", "(torch.isnan(x).any(), 1) or (torch.isnan")):
        assert old in res.code
        bad = res.code.replace(old, new, 1)
        assert deferred_if(ob, Ctx({}, {}, code=bad, before=before)).result == "refuted", new


def test_deferred_if_predicate_accepts_the_runtime_lazy_format_only():
    """An f-string argument is emitted as the runtime's lazy fmt(template, ...): formatted at
    replay, only when the test holds. A fmt that is not mend.runtime's is refuted."""
    from mend.rules.deferred_side_effects.conditional_examples import CONDITIONAL_FIX_EXAMPLES
    from verifier.encoders.base import Ctx
    from verifier.encoders.capture_if import deferred_if

    before, after, line = CONDITIONAL_FIX_EXAMPLES[2]
    res = de.rewrite(cst.parse_module(before), line)
    assert "_mend_rt.fmt(" in res.code
    ob = next(o for o in res.obligations if o["kind"] == "deferred-if-predicate")
    assert deferred_if(ob, Ctx({}, {}, code=res.code, before=before)).result == "checked"
    other = res.code.replace("import mend.runtime as _mend_rt", "import mend.runtime as _mend_rt; _mend_rt = None")
    assert deferred_if(ob, Ctx({}, {}, code=other, before=before)).result == "refuted"
    eager = res.code.replace('_mend_rt.fmt("dead activations: {}", h)', '"dead activations: %s" % h')
    assert deferred_if(ob, Ctx({}, {}, code=eager, before=before)).result == "refuted"


@pytest.mark.parametrize("src, line", [
    # a closure name the enclosing function binds only on one path (review case A)
    ('msg = "g"\n\n\ndef forward(self, x, flag=True):\n    if flag:\n        msg = "o"\n\n    def inner(h):\n'
     '        if (h > 100).any():\n            print(msg)\n    return inner(x)\n', 9),
    # a name bound only by a match capture (review case B)
    ('msg = "g"\n\n\ndef forward(self, x, mode):\n    match mode:\n        case str() as msg:\n            pass\n'
     '    if (x > 100).any():\n        print(msg)\n    return x\n', 8),
    # `except ... as msg` unbinds it at the handler's end (review case C)
    ('def forward(self, x, key):\n    msg = "m"\n    try:\n        s = self.scales[key]\n    except KeyError as msg:\n'
     '        s = 1.0\n    if (x > 100).any():\n        print(msg)\n    return x * s\n', 7),
    # a module-level name deleted at module level
    ('msg = "m"\ndel msg\n\n\ndef forward(self, x):\n    if (x > 100).any():\n        print(msg)\n    return x\n', 6),
])
def test_conditional_arguments_must_be_bound_on_every_path(src, line):
    """An adversarial review's cases: each name would be unbound, where the original never read it."""
    res = de.rewrite(cst.parse_module("import torch\n" + src), line + 1)
    assert isinstance(res, Decline), res.code
    assert "would be evaluated when the test is false too" in res.reason


def test_conditional_logger_stacklevel_declines_and_builtins_are_bound():
    src = ("import logging\nimport warnings\n\nimport torch\n\nlogger = logging.getLogger(__name__)\n\n\n"
           "def forward(self, x):\n    if (x > 100).any():\n        logger.warning(\"big\", stacklevel=2)\n"
           "    if (x < -100).any():\n        warnings.warn(\"small\", RuntimeWarning)\n    return x\n")
    res = de.rewrite(cst.parse_module(src), 10)
    assert isinstance(res, Decline) and "stacklevel" in res.reason
    res = de.rewrite(cst.parse_module(src), 12)
    assert not isinstance(res, Decline), res
    assert '_mend_rt.defer_warn_if((x < -100).any(), "small", RuntimeWarning)' in res.code


def test_an_operator_that_can_raise_after_the_call_gets_the_ordered_form(tmp_path):
    """helper-61: `print`, then a `gather` whose index goes out of range for one mask pattern.
    The replayed form (labelled safe) lost the print on the failing call under every backend,
    since the graph never returned to store the replay. Verification now traces the graph that
    replays the call, refutes the replayed form when an operator that can raise follows it, and
    the rule's ordered form is emitted; the failing call prints, then raises, as eager does."""
    from mend.fix import fix
    from mend.targets import load_file_module

    src = FIXTURES / "print_then_gather.py"
    assert fix(str(src), verify="standard", max_examples=5).rewrites == []   # unsafe: withheld by default
    res = fix(str(src), unsafe_fixes=True, verify="standard", max_examples=5)
    (rw,) = res.rewrites
    assert rw["rule"] == de.NAME and "ordered=True" in res.mended
    assert "first form was declined" in rw["detail"] and "gather" in rw["detail"]
    ob = next(o for o in rw["obligations"] if o["kind"] == "replayed-on-exception")
    # helper-62: under inductor the capture is not ordered with a raising kernel (a later print ran
    # before an earlier gather's error surfaced), so the ordered form is an unsafe fix
    assert ob["mechanism"] == "ordered" and ob["raiser"] is True and ob["result"] == "unknown"
    assert rw["safety"]["label"] == "unsafe" and "inductor" in ob["reason"]
    path = tmp_path / "print_then_gather.py"
    path.write_text(res.mended)
    orig, mended = load_file_module(src, "_ptg_a"), load_file_module(path, "_ptg_b")
    h, good = orig.get_inputs()
    for backend in ("eager", "aot_eager"):   # measured equal; inductor may reorder (the label says so)
        shown = []
        for mod in (orig, mended):
            torch._dynamo.reset()
            model = torch.compile(mod.Model(), backend=backend)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                model(h, good)
                with pytest.raises(RuntimeError, match="out of bounds"):
                    model(h, orig.failing_mask())
            shown.append(out.getvalue())
        assert shown[0] == shown[1] == "pooling batch of 3\n" * 2, (backend, shown)


def test_replay_raisers_sees_operators_after_the_call_only():
    """The trace lists operators that can raise after the first node of the deferred call's
    function, in the graph that replays it: the gather after the print, not the embedding that
    ran before the function; a graph without one lists nothing."""
    from verifier.replay_raisers import replay_raisers

    class Inner(torch.nn.Module):
        def forward(self, x, idx):
            return self.step(x, idx)

        def step(self, x, idx):
            rt.defer_print("inner", x.shape[0])
            y = x * 2
            return y.gather(1, idx) if idx is not None else y

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.inner = torch.nn.Embedding(10, 4), Inner()

        def forward(self, ids, idx=None):
            return self.inner(self.emb(ids), idx)

    site = [{"file": __file__, "function": "step"}]
    key = "step"
    ids = torch.tensor([[1, 2, 3]])
    found = replay_raisers(Outer(), (ids, torch.zeros(1, 3, 1, dtype=torch.long)), {}, site)
    assert found["replay_graphs"] == 2   # eval without grad, training with grad
    assert [f.split(" ")[0] for f in found["raisers"][key]] == ["gather"], found
    before_only = replay_raisers(Outer(), (ids,), {}, site)
    assert before_only["replay_graphs"] == 2 and before_only["raisers"][key] == [], before_only
    # an integer tensor index and an integer floor division count; a float division does not
    class Index(torch.nn.Module):
        def step(self, x, i, n):
            rt.defer_print("index")
            return x[i] + (n // n).sum() + (x / x.sum()).sum()

        forward = step
    got = replay_raisers(Index(), (torch.ones(4), torch.tensor([1, 2]), torch.tensor([2, 3])), {}, site)
    assert sorted(f.split(" (")[0] for f in got["raisers"][key]) == ["indexing with an integer tensor",
                                                                      "integer floordiv"], got


def test_a_deferral_that_breaks_inside_the_runtime_is_not_emitted():
    """helper-61: a print of an object the runtime cannot snapshot was emitted as safe while the
    call ran eagerly inside mend's runtime (graphs 2 -> 2, mend's own break count 1 -> 4)."""
    from mend.fix import fix

    res = fix(str(FIXTURES / "print_repr_reads_tensor.py"), verify="standard", max_examples=5, unsafe_fixes=True)
    assert res.rewrites == []
    (why,) = [d.reason for d in res.declined]
    assert "breaks inside mend's runtime" in why and "graphs 2 -> 2" in why
    # the site left in the after-scan says its rewrite was declined, and why (not only the plan)
    (left,) = [s for s in res.after.sites if s.fixable_by == de.NAME]
    assert "but its rewrite was declined: the rewritten code breaks inside mend's runtime" in left.reason


def test_replay_raisers_counts_from_the_call_line_and_past_the_return():
    """An operator before the deferred call, in its own function, is harmless (eager raised there
    before reaching the call); one after it, or in the caller after the function returns, is not."""
    import inspect

    from verifier.replay_raisers import replay_raisers

    class Step(torch.nn.Module):
        def step(self, x, idx):
            y = x.gather(1, idx)   # before the call
            rt.defer_print("step", y.shape[0])
            return y * 2

        def forward(self, x, idx, after=None):
            y = self.step(x, idx)
            return y if after is None else y.index_select(1, after)

    line = next(i for i, t in enumerate(inspect.getsource(Step).splitlines()) if "defer_print" in t)
    line += inspect.getsourcelines(Step)[1]
    site = [{"file": __file__, "function": "step", "line": line}]
    key = f"step:{line}"
    x, idx = torch.ones(2, 4), torch.zeros(2, 3, dtype=torch.long)
    assert replay_raisers(Step(), (x, idx), {}, site)["raisers"][key] == []
    found = replay_raisers(Step(), (x, idx, torch.tensor([0, 1])), {}, site)["raisers"][key]
    assert [f.split(" ")[0] for f in found] == ["index_select"], found


def test_an_ordered_call_after_an_operator_that_can_raise_is_unsafe(tmp_path):
    """A check after the print makes it ordered from the start; an operator that can raise
    before the capture in its graph (a gather) is not ordered with it under inductor, where a
    capture ran before an earlier gather's index error surfaced (helper-62). Verification traces
    the graph that holds the capture and names that operator; and since inductor also fused a
    following check with a buffer update into a kernel that ran before the capture (helper-65),
    the ordered form is unsafe with checks alone too."""
    from mend.fix import fix

    src = FIXTURES / "gather_then_checked_print.py"
    res = fix(str(src), verify="standard", max_examples=5)
    assert res.rewrites == []
    (held,) = [d for d in res.declined if d.safety == "unsafe"]
    assert "gather" in held.reason and "before the ordered call's capture" in held.reason
    shutil.copy(src, tmp_path / "gtcp.py")
    ok = fix(f"{tmp_path / 'gtcp.py'}:check_first", verify="standard", max_examples=5, unsafe_fixes=True)
    (rw,) = ok.rewrites
    ob = next(o for o in rw["obligations"] if o["kind"] == "replayed-on-exception")
    assert rw["safety"]["label"] == "unsafe" and "ordered=True" in ok.mended
    assert ob["mechanism"] == "ordered" and ob["result"] == "unknown" and "helper-65" in ob["reason"]
    assert "before the ordered call's capture" not in ob["reason"]   # a check before it is not a raiser


def test_replay_raisers_sees_operators_before_an_ordered_capture_only():
    """For the ordered form the search runs the other way: operators before the capture count
    (eager raised there and never made the call), checks before it do not (ordered with the
    capture), and operators after it do not."""
    import inspect

    from verifier.replay_raisers import replay_raisers

    class Ordered(torch.nn.Module):
        def forward(self, x, idx, after):
            torch._assert_async((x > -100).all(), "first")
            y = x.gather(1, idx)
            rt.defer_print("rows", x.shape[0], ordered=True)
            return y.index_select(1, after)

    line = next(i for i, t in enumerate(inspect.getsource(Ordered).splitlines()) if "defer_print" in t)
    line += inspect.getsourcelines(Ordered)[1]
    site = [{"file": __file__, "function": "forward", "line": line, "mechanism": "ordered"}]
    got = replay_raisers(Ordered(), (torch.ones(2, 4), torch.zeros(2, 3, dtype=torch.long), torch.tensor([0])),
                         {}, site)
    assert got["ordered_graphs"] == 2 and got["replay_graphs"] == 0, got
    assert [f.split(" ")[0] for f in got["raisers"][f"forward:{line}"]] == ["gather"], got
    # no graph holds the capture (a line the function never reaches): not observed, no key
    missing = replay_raisers(Ordered(), (torch.ones(2, 4), torch.zeros(2, 3, dtype=torch.long), torch.tensor([0])),
                             {}, [{**site[0], "line": line + 100}])
    assert missing["raisers"] == {}, missing


@pytest.mark.parametrize("name, raiser", [("SameName", "embedding"), ("InLoop", "embedding"),
                                          ("TrainOnly", "indexing with an integer tensor"),
                                          ("Overload", "gather"), ("LossRange", "binary_cross_entropy")])
def test_replay_raisers_finds_what_helper_65_hid(name, raiser, tmp_path):
    """helper-65's nine 'safe' deferrals that lost a print: the trace took another `forward` of
    the file for the site's function, screened a loop body's earlier line as before the call, ran
    in eval mode only, and missed `gather.default` and binary_cross_entropy. Each raiser is now
    seen after the rewritten call (so the replayed form is refuted)."""
    from mend.rules.deferred_side_effects.rewrite import rewrite
    from mend.targets import load_file_module
    from verifier.replay_raisers import replay_raisers

    src = FIXTURES / "raise_after_defer" / "helper65_cases.py"
    text = src.read_text()
    cls = text.index(f"class {name}(")
    line = text[:cls].count("\n") + 1 + next(i for i, t in enumerate(text[cls:].splitlines()) if "print(" in t)
    res = rewrite(cst.parse_module(text), line)
    ob = next(o for o in res.obligations if o["kind"] == "replayed-on-exception")
    assert ob["mechanism"] == "replay" and ob["first"] < ob["line"] <= ob["last"]
    assert ob.get("loop", False) == (name == "InLoop")
    path = tmp_path / "mended_h65.py"
    path.write_text(res.code)
    mod = load_file_module(path, f"_h65_{name}")
    site = {"file": str(path), "mechanism": "replay", **{k: ob[k] for k in ("function", "line", "first", "last")},
            "loop": ob.get("loop", False)}
    got = replay_raisers(getattr(mod, name)(), mod.inputs(name), {}, [site])
    found = got["raisers"][f"{ob['function']}:{ob['line']}"]
    assert any(f.startswith(raiser) for f in found), got
