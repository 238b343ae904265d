"""Differential testing of an original module against its mended version.

Hypothesis draws inputs shaped like the example inputs (scaled, negated, shifted, with
edge values 0, -0.0, +-inf, NaN and large magnitudes injected), runs the original eagerly
and the mended module eagerly and under ``torch.compile``, and compares outputs (NaN
positions equal), raised exceptions (type and message), stdout, warnings, log records and
gradients. Each rewritten predicate is also forced to True and to False
(:mod:`verifier.forcing`), so both outcomes are always exercised.

Source of the idea: GraphMend (arXiv 2509.16248) compares output hashes on one input; we
compare behaviour on many, as in translation validation (Alive2).
"""
from __future__ import annotations

import contextlib
import io
import logging
import warnings
from dataclasses import dataclass, field

import torch
from hypothesis import HealthCheck, given, seed as hyp_seed, settings, strategies as st

EDGE_VALUES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e30, -1e30]


@dataclass
class Evidence:
    """What a differential run showed. ``passed`` only when every example agreed and every
    predicate outcome was covered."""

    passed: bool
    seed: int
    examples: int
    modes: list[str]
    outcomes: dict[str, dict]
    max_abs_error: float
    counterexample: str | None = None
    reason: str | None = None

    def to_json(self) -> dict:
        return {"passed": self.passed, "hypothesis_seed": self.seed, "examples": self.examples, "modes": self.modes,
                "predicate_outcomes": self.outcomes, "max_abs_error": self.max_abs_error,
                "counterexample": self.counterexample, "reason": self.reason}


class Mismatch(AssertionError):
    pass


def _observe(model, args, kwargs, grad: bool):
    """Run once; return (result or exception, stdout, warnings, log records, grads)."""
    out = io.StringIO()
    records: list[tuple[str, int, str]] = []

    class _H(logging.Handler):
        def emit(self, record):
            records.append((record.name, record.levelno, record.getMessage()))

    handler = _H()
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    args = tuple(a.detach().clone().requires_grad_(grad and a.is_floating_point()) if isinstance(a, torch.Tensor) else a
                 for a in args)
    grads = None
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with torch.enable_grad() if grad else torch.no_grad():
                    result = model(*args, **kwargs)
                    if grad:
                        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
                        leaves += [p for p in model.parameters() if p.requires_grad]
                        flat = [t for t in _flatten(result) if t.is_floating_point() and t.requires_grad]
                        if flat and leaves:
                            total = sum(t.sum() for t in flat)
                            grads = torch.autograd.grad(total, leaves, allow_unused=True)
            except Exception as exc:  # behaviour to compare, not a failure of the test
                result = ("raised", type(exc).__name__, str(exc))
        warned = [(w.category.__name__, str(w.message)) for w in caught]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    return result, out.getvalue(), warned, records, grads


def _short(result) -> str:
    if isinstance(result, tuple) and result and result[0] == "raised":
        return f"raised {result[1]}: {result[2][:160]}"
    return "returned normally"


def _flatten(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _flatten(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _flatten(v)]
    if hasattr(obj, "to_tuple"):  # transformers ModelOutput
        return _flatten(obj.to_tuple())
    return []


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return {torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2)}.get(dtype, (1.3e-6, 1e-5))


def compare(a, b, exact: bool) -> float:
    """Raise Mismatch unless observations agree; return the largest absolute error."""
    ra, rb = a[0], b[0]
    if isinstance(ra, tuple) and ra and ra[0] == "raised" or isinstance(rb, tuple) and rb and rb[0] == "raised":
        if ra != rb:
            raise Mismatch(f"behaviour differs: original {_short(ra)}, mended {_short(rb)}")
    for what, i in (("stdout", 1), ("warnings", 2), ("log records", 3)):
        if a[i] != b[i]:
            raise Mismatch(f"{what} differ: original {a[i]!r}, mended {b[i]!r}")
    worst = 0.0
    pairs = list(zip(_flatten(ra), _flatten(rb)))
    if len(_flatten(ra)) != len(_flatten(rb)):
        raise Mismatch("output structure differs")
    ga = [g for g in (a[4] or ()) if g is not None]
    gb = [g for g in (b[4] or ()) if g is not None]
    if len(ga) != len(gb):
        raise Mismatch("gradient structure differs")
    for kind, seq in (("output", pairs), ("gradient", list(zip(ga, gb)))):
        for x, y in seq:
            if x.shape != y.shape or x.dtype != y.dtype:
                raise Mismatch(f"{kind} {tuple(x.shape)}/{x.dtype} vs {tuple(y.shape)}/{y.dtype}")
            if not torch.equal(torch.isnan(x), torch.isnan(y)):
                raise Mismatch(f"{kind} NaN positions differ")
            if x.is_floating_point():
                finite = ~torch.isnan(x)
                if not torch.equal(torch.isinf(x), torch.isinf(y)) or not torch.equal(x[torch.isinf(x)], y[torch.isinf(y)]):
                    raise Mismatch(f"{kind} infinities differ")
                fx, fy = x[finite & ~torch.isinf(x)].double(), y[finite & ~torch.isinf(y)].double()
                err = (fx - fy).abs().max().item() if fx.numel() else 0.0
                worst = max(worst, err)
                rtol, atol = (0.0, 0.0) if exact else _tolerance(x.dtype)
                if not torch.allclose(fx, fy, rtol=rtol, atol=atol):
                    raise Mismatch(f"{kind} values differ (max abs error {err:.3g})")
            elif not torch.equal(x, y):
                raise Mismatch(f"{kind} values differ")
    return worst


def _inputs_strategy(example: tuple, edge: bool):
    """Inputs shaped like ``example``: floats scaled/shifted/negated with edge values;
    integer and bool tensors drawn within the example's range."""
    def one(t):
        if not isinstance(t, torch.Tensor):
            return st.just(t)
        if t.is_floating_point():
            scale = st.sampled_from([1.0, -1.0, 0.5, 2.0, -3.0, 10.0, 1e-3, 1e3, 0.0])
            shift = st.sampled_from([0.0, 1.0, -1.0, 10.0, -10.0])
            edge_st = st.lists(st.tuples(st.integers(0, max(t.numel() - 1, 0)), st.sampled_from(EDGE_VALUES)),
                               max_size=3) if edge else st.just([])

            def build(s, b, edges):
                x = (t.detach().double() * s + b).to(t.dtype)
                flat = x.reshape(-1).clone()
                for i, v in edges:
                    flat[i] = v
                return flat.reshape(t.shape)
            return st.builds(build, scale, shift, edge_st)
        if t.dtype == torch.bool:
            return (st.builds(lambda s: torch.rand(t.shape, generator=torch.Generator().manual_seed(s)) < 0.5,
                          st.integers(0, 2**16))
                | st.just(t.clone()) | st.just(torch.ones_like(t)) | st.just(torch.zeros_like(t)))
        lo, hi = int(t.min()), int(t.max())
        # random values, the example itself, and constant fills (an all-ones mask is
        # exactly the input that flips `if (mask == 0).any()`)
        return (st.builds(lambda s: torch.randint(lo, hi + 1, t.shape, generator=torch.Generator().manual_seed(s),
                                                  dtype=t.dtype), st.integers(0, 2**16))
                | st.just(t.clone()) | st.just(torch.full_like(t, lo)) | st.just(torch.full_like(t, hi)))
    return st.tuples(*[one(t) for t in example])


def differential_test(original, mended, example: tuple, *, emitted=None, force_lines: list[int] = (),
                      extra_inputs: list[tuple] = (), seed: int = 0, max_examples: int = 40,
                      compiled: bool = True, edge: bool = True) -> Evidence:
    """Compare ``original`` and ``mended`` (same weights) on Hypothesis-drawn inputs.

    ``example``: the target's example args (tensors of any shape/dtype). ``force_lines``:
    rewritten predicates, instrumented with :func:`verifier.forcing.force` in both models;
    every input is run with each predicate natural, forced True and forced False, so both
    outcomes are always exercised. ``emitted``: the mended module exactly as it will be
    written (no forcing hook; defaults to ``mended``). Modes: eager vs eager (bit-exact,
    natural and forced) and eager vs ``torch.compile(emitted, backend="eager")``
    (dtype-aware tolerance, natural predicates).
    """
    from verifier import forcing

    forcing.reset()
    modes = ["eager"] + (["compiled:eager-backend"] if compiled else [])
    compiled_model = torch.compile(emitted if emitted is not None else mended, backend="eager") if compiled else None
    grad = any(p.requires_grad for p in original.parameters())
    state = {"n": 0, "worst": 0.0}
    settings_ = [(None, None)] + [(line, v) for line in force_lines for v in (True, False)]

    def check(args):
        for line, value in settings_:
            with (forcing.forced(line, value) if line is not None else contextlib.nullcontext()):
                ref = _observe(original, args, {}, grad)
                got = _observe(mended, args, {}, grad)
                state["worst"] = max(state["worst"], compare(ref, got, exact=True))
                if compiled_model is not None and line is None:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        got_c = _observe(compiled_model, args, {}, grad=False)
                    ref_ng = _observe(original, args, {}, grad=False)
                    state["worst"] = max(state["worst"], compare(ref_ng, got_c, exact=False))
        state["n"] += 1

    def describe(args):
        return ", ".join(f"{tuple(a.shape)} {a.dtype} {a.flatten()[:6].tolist()}" if isinstance(a, torch.Tensor) else repr(a)
                         for a in args)

    def outcomes():
        return {str(line): {"natural": sorted(forcing.seen(line) - {None}), "forced": [False, True]}
                for line in force_lines}

    fixed = [tuple(example)] + [tuple(x) for x in extra_inputs]
    try:
        for args in fixed:
            check(args)
    except Mismatch as exc:
        return Evidence(False, seed, state["n"], modes, outcomes(), state["worst"], describe(args), str(exc))

    failure: dict = {}

    @hyp_seed(seed)
    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(_inputs_strategy(tuple(example), edge))
    def run(args):
        try:
            check(args)
        except Mismatch as exc:
            failure["args"], failure["why"] = describe(args), str(exc)
            raise

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run()
    except Mismatch:
        return Evidence(False, seed, state["n"], modes, outcomes(), state["worst"],
                        failure.get("args"), failure.get("why"))
    return Evidence(True, seed, state["n"], modes, outcomes(), state["worst"])
