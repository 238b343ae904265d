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
import copy
import hashlib
import io
import logging
import random
import re
import warnings
from dataclasses import dataclass

import numpy
import torch
from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, strategies as st
from hypothesis.errors import Flaky

from verifier import forcing, pystate
from verifier.edge_values import edge_values_for, with_edge_values  # noqa: F401 (re-exported)
from verifier.shown import input_text, without_grad_fn_names

EDGE_VALUES = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e30, -1e30]
# drawn inputs that made the original raise, also run under Inductor (each new shape recompiles)
RAISING_FOR_INDUCTOR = 3


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
    max_gradient_error: float = 0.0   # eager gradients, original vs mended (0.0: bit-exact)

    @property
    def gradients_exact(self) -> bool:
        return self.max_gradient_error == 0.0

    def to_json(self) -> dict:
        return {"passed": self.passed, "hypothesis_seed": self.seed, "examples": self.examples, "modes": self.modes,
                "predicate_outcomes": self.outcomes, "max_abs_error": self.max_abs_error,
                "max_gradient_error": self.max_gradient_error, "gradients_exact": self.gradients_exact,
                "gradient_tolerance": GRADIENT_TOLERANCE_TEXT,
                "counterexample": self.counterexample, "reason": self.reason}


_TOOLCHAIN_LOGGERS = ("torch", "filelock", "triton")


class Mismatch(AssertionError):
    pass


# what Dynamo appends to an exception raised while it traced or ran user code (torch 2.13,
# torch/_dynamo/exc.py): the user frame's file, line and source, which differ between the
# original and the mended file for the same program behaviour
_DYNAMO_APPENDIX = re.compile(r"\n\nfrom user code:\n(?:   File \"[^\n]*\", line \d+, in [^\n]*\n(?:    [^\n]*\n)*)+"
                              r"\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace[^\n]*\n?\Z")


def exception_message(exc: BaseException) -> str:
    """``str(exc)`` without Dynamo's "from user code" appendix (file paths and line numbers of
    the compiled frame: a temporary copy for the mended model). Only the exact appendix is
    removed; a message that merely contains the words is compared whole. Found by an
    adversarial review (2026-12-04, case c25): the same IndexError was a false decline."""
    return _DYNAMO_APPENDIX.sub("", str(exc))


def _reset_once_caches() -> None:
    """Empty the caches of once-per-message logger methods (transformers' ``warning_once`` /
    ``info_once``: ``functools.lru_cache`` on ``logging.Logger``, keyed on the logger and the
    message). The original and the mended model share them in this process, so whichever runs
    first would silence the other's record (a verifier false negative an adversarial helper
    found); each observation starts as a fresh process would."""
    for name in dir(logging.Logger):
        clear = getattr(getattr(logging.Logger, name, None), "cache_clear", None)
        if callable(clear):
            clear()


def observe(model, args, kwargs, grad: bool, rng_seed: int = 1234):
    """Run once; return (result or exception, stdout, warnings, log records, grads,
    buffers after the call, inputs after the call, output aliasing (:func:`aliasing`), the
    modules' Python attributes after the call (:func:`attributes`), the names of the globals
    the call changed and the list/dict arguments after it (:mod:`verifier.pystate`)). The
    RNG is seeded first, so dropout draws the same masks in both models unless one of them
    draws more."""
    out = io.StringIO()
    records: list[tuple[str, int, str]] = []

    class _H(logging.Handler):
        def emit(self, record):
            # the compiler's own logging (Inductor's cache locks, Dynamo) is not the model's
            if not record.name.startswith(_TOOLCHAIN_LOGGERS):
                records.append((record.name, record.levelno, record.getMessage()))

    _reset_once_caches()
    handler = _H()
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    def fresh(a):
        if isinstance(a, torch.Tensor):
            return a.detach().clone().requires_grad_(grad and a.is_floating_point())
        return pystate.fresh_argument(a)   # a list or dict the call may change: a private copy
    args = tuple(fresh(a) for a in args)
    kwargs = {k: fresh(v) for k, v in kwargs.items()}
    inputs = list(args) + list(kwargs.values())
    target = getattr(model, "_orig_mod", model)
    spaces = pystate.global_spaces(target)
    globals_before = pystate.snapshot(spaces, skeleton)
    grads = None
    # numpy's and Python's generators too: a LayerDrop drawn with np.random skipped other layers
    # in each run, and every candidate failed on gradients (helper-86's m6)
    torch.manual_seed(rng_seed), random.seed(rng_seed), numpy.random.seed(rng_seed)
    # torch's once-per-process warnings (TORCH_WARN_ONCE) would reach only the first run in this
    # process, hiding a lost warning (an adversarial helper found it): each observation sees
    # every one, as a fresh process would (torch.set_warn_always)
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _tag_tracing_warnings()
            try:
                with torch.enable_grad() if grad else torch.no_grad():
                    result = model(*args, **kwargs)
                    if grad:
                        # named, so that a mismatch says whose gradient (helper-67: "gradient 1")
                        named = [(f"input {k}", a) for k, a in enumerate(inputs)
                                 if isinstance(a, torch.Tensor) and a.requires_grad]
                        named += [(f"parameter {n}", p) for n, p in target.named_parameters() if p.requires_grad]
                        flat = [t for t in flatten(result) if t.is_floating_point() and t.requires_grad]
                        if flat and named:
                            total = sum(t.sum() for t in flat)
                            grads = tuple(zip([n for n, _ in named], torch.autograd.grad(
                                total, [leaf for _, leaf in named], allow_unused=True)))
            except Exception as exc:  # behaviour to compare, not a failure of the test
                result = ("raised", type(exc).__name__, exception_message(exc))
        # a warning torch raises while Dynamo traces (a fake-tensor op, once per compile) is
        # the compiler's, not the program's: a rewrite that lets Dynamo trace further may add one
        warned = [(w.category.__name__, str(w.message)) for w in caught if not getattr(w, "_mend_tracing", False)]
    finally:
        torch.set_warn_always(warn_always)
        root.removeHandler(handler)
        root.setLevel(old_level)
    buffers = [(n, b.detach().clone()) for n, b in target.named_buffers()] if isinstance(target, torch.nn.Module) else []
    after = [a.detach().clone() for a in inputs if isinstance(a, torch.Tensor)]
    # tensors held in a list or dict argument after the call, then that argument's shape
    after += [t.detach().clone() for a in inputs if isinstance(a, (list, dict)) for t in flatten(a)]
    py_args = tuple(skeleton(a, exact=False) for a in inputs if isinstance(a, (list, dict, set)))
    # the RNG state after the call (seeded alike before it): an untaken side may draw (helper-37)
    rng = [(RNG_KEY, _rng_digest())]
    return (result, out.getvalue(), warned, records, grads, buffers, after, aliasing(result, inputs, target),
            attributes(target) + rng, pystate.changed(globals_before, pystate.snapshot(spaces, skeleton)), py_args)


RNG_KEY = "torch's global RNG state after the call (a later random draw differs)"


def _rng_digest() -> str:
    """A digest of torch's CPU (and, where present, CUDA) generator states."""
    h = hashlib.sha256(torch.random.get_rng_state().numpy().tobytes())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for state in torch.cuda.get_rng_state_all():
            h.update(state.numpy().tobytes())
    return h.hexdigest()[:16]


_MODULE_OWN = frozenset(vars(torch.nn.Module()))   # torch.nn.Module's own bookkeeping


def attributes_differ(a: list, b: list) -> str | None:
    """How two :func:`attributes` snapshots differ, else None. An attribute on one side only
    counts unless its name is private: torch and libraries mark a module once it is compiled
    (``_is_torch_compile``), on whichever model object ran compiled first."""
    da, db = dict(a), dict(b)
    for key in da.keys() & db.keys():
        if da[key] != db[key]:
            return f"`{key}`: original {str(da[key])[:120]}, mended {str(db[key])[:120]}"
    for key in sorted(da.keys() ^ db.keys()):
        if not key.rsplit(".", 1)[-1].startswith("_"):
            return f"`{key}` is set in the {'original' if key in da else 'mended'} version only"
    return None


def attributes(module) -> list:
    """Every submodule's Python attributes after the call, as ``(path, skeleton)``: a counter, a
    flag, a number kept on the module (a review found only buffers compared). Tensors are
    compared as buffers and inputs, submodules through their own attributes; torch's
    bookkeeping and mend's runtime (``_mend*``) are left out."""
    if not isinstance(module, torch.nn.Module):
        return []
    out = []
    for name, sub in module.named_modules():
        for key, value in vars(sub).items():
            # a plain tensor attribute is left out: a rule may hoist a memoised one on purpose
            # (predicated control flow's `hoisted-setup-pure`: phi3's `long_inv_freq`); one stashed
            # before a failing in-graph check is declined statically (mend/rules/_in_graph_checks.py)
            if key in _MODULE_OWN or key.startswith("_mend") or isinstance(value, (torch.Tensor, torch.nn.Module)):
                continue
            out.append((f"{name}.{key}" if name else key, skeleton(value)))
    return out


def aliasing(result, inputs: list, module) -> list:
    """For each output tensor (in :func:`flatten` order): ``("is", what)`` when it is the
    input, parameter or buffer ``what`` itself, ``("view", what)`` when it shares that one's
    storage, else None. A caller sees the difference: an in-place change to a returned input
    (``h = block(h); h += r``) reaches the caller's tensor in the original and not in a copy.
    A ``torch.where`` whose untaken side is an unmodified input (``if p: return x``) returns a
    new tensor where the original returned ``x`` (found by an adversarial review,
    2026-12-03)."""
    if isinstance(result, tuple) and result and result[0] == "raised":
        return []
    known = [(f"input {i}", t) for i, t in enumerate(a for a in inputs if isinstance(a, torch.Tensor))]
    if isinstance(module, torch.nn.Module):
        known += [(f"`{n}`", t) for n, t in module.named_parameters()]
        known += [(f"`{n}`", t) for n, t in module.named_buffers()]

    def storage(t):
        try:
            return t.untyped_storage().data_ptr() if t.numel() and t.layout == torch.strided else None
        except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
            return None
    stored = [(what, storage(t)) for what, t in known]
    shown = []
    for out in flatten(result):
        tag = next((("is", what) for what, t in known if out is t), None)
        ptr = storage(out) if tag is None else None
        if ptr is not None:
            tag = next((("view", what) for what, p in stored if p == ptr), None)
        shown.append(tag)
    return shown


def _tag_tracing_warnings() -> None:
    """Inside ``warnings.catch_warnings(record=True)``: mark each recorded warning raised
    while Dynamo traces (a TracingContext is active) with ``_mend_tracing``. The original
    recorder is restored when the ``catch_warnings`` block exits."""
    record = warnings._showwarnmsg_impl

    def tagged(msg):
        msg._mend_tracing = torch._guards.TracingContext.try_get() is not None
        record(msg)
    warnings._showwarnmsg_impl = tagged


def _short(result) -> str:
    if isinstance(result, tuple) and result and result[0] == "raised":
        return f"raised {result[1]}: {result[2][:160]}"
    return "returned normally"


def flatten(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in flatten(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in flatten(v)]
    if hasattr(obj, "to_tuple"):  # transformers ModelOutput
        return flatten(obj.to_tuple())
    return []


_PLAIN = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, torch.Size)


def skeleton(obj, exact: bool = True):
    """The output with every tensor replaced by a placeholder: what :func:`flatten` leaves out.
    Plain values (numbers, strings, None, dtypes, devices, sizes, NumPy scalars) keep their type
    and value (a returned ``np.int64(5)`` differs from ``5``; an adversarial review found such
    outputs uncompared); other objects keep their type only (their ``repr`` may hold an
    address). ``exact=False`` (compiled against eager): a float's value is not compared (Inductor
    may round a number read from a tensor otherwise; its tensors are compared within tolerance)."""
    if isinstance(obj, torch.Tensor):
        return ("tensor",)
    if isinstance(obj, dict):
        return ("dict", tuple((repr(k), skeleton(v, exact)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        return (type(obj).__name__, tuple(skeleton(v, exact) for v in obj))
    if hasattr(obj, "to_tuple"):  # transformers ModelOutput
        return (type(obj).__name__, skeleton(obj.to_tuple(), exact))
    kind = type(obj)
    if isinstance(obj, _PLAIN) or kind.__module__ == "numpy":
        if isinstance(obj, float) and obj != obj:
            return (kind.__name__, "nan")
        if isinstance(obj, float) and not exact:
            return (kind.__name__,)
        return (kind.__module__, kind.__name__, hex(obj) if isinstance(obj, int) else repr(obj))  # repr: <= 4300 digits
    return (kind.__module__, kind.__qualname__)


def _tolerance(dtype: torch.dtype, floor: torch.dtype | None = None) -> tuple[float, float]:
    """(rtol, atol) for compiled-vs-eager comparisons: Inductor fuses and reorders
    reductions, so its results differ from eager in the last bits (more in fp16/bf16).
    ``floor``: the least precise float dtype the model computes in; Inductor keeps fused
    float16/bfloat16 intermediates in float32 (``emulate_precision_casts`` is off by default),
    so a float32 output computed from float16 values differs from eager by float16 roundings
    (an fp16 clamp guard fused with the matmul before it: 0.75 at -2217, measured)."""
    table = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}
    rtol, atol = table.get(dtype, (1e-4, 1e-5))
    low = table.get(floor, (0.0, 0.0))
    return max(rtol, low[0]), max(atol, low[1])


def least_precise_float(model: torch.nn.Module, values) -> torch.dtype | None:
    """The float dtype with the largest machine epsilon among ``model``'s parameters and
    buffers and the tensors in ``values``; None when there is none."""
    dtypes = {t.dtype for t in list(model.parameters()) + list(model.buffers()) + flatten(list(values))
              if t.is_floating_point()}
    return max(dtypes, key=lambda d: torch.finfo(d).eps, default=None)


GRADIENT_ULPS = 64
GRADIENT_TOLERANCE_TEXT = (f"eager gradients within {GRADIENT_ULPS} x eps(dtype), relative and scaled by the largest "
                           "gradient magnitude (float32: 7.6e-6); forward outputs bit-exact")


def gradient_tolerance(dtype: torch.dtype, scale: float) -> tuple[float, float]:
    """(rtol, atol) for eager gradients, original against mended: ``GRADIENT_ULPS`` machine
    epsilons of ``dtype``, the absolute part scaled by the largest gradient magnitude
    ``scale``. A rewrite may reassociate a sum in the backward (``torch.where`` adds the
    untaken side's zero gradient), which moves the last bit; issue 10 measured 1.19e-7 on a
    float32 input. Forward outputs stay bit-exact."""
    eps = torch.finfo(dtype).eps
    return GRADIENT_ULPS * eps, GRADIENT_ULPS * eps * max(scale, 1.0)


def compare(a, b, exact: bool, any_error: bool = False, grad_stats: dict | None = None,
            floor: torch.dtype | None = None) -> float:
    """Raise Mismatch unless observations agree; return the largest absolute error.

    ``exact``: forward outputs bit-exact, gradients within :func:`gradient_tolerance` (the
    largest gradient difference goes to ``grad_stats["max"]``); otherwise everything
    within the compiled-vs-eager tolerance, printed ``grad_fn`` names aside (:mod:`verifier.shown`). ``any_error``: where the original raised,
    accept any exception from the mended run. ``floor``: the model's least precise float
    dtype, which widens the compiled-vs-eager tolerance (:func:`_tolerance`). ``any_error`` is
    used against Inductor only: its generated
    code reports invalid inputs (an index out of range) with its own exception types and
    messages, for the original as well. What was printed, warned and logged before the
    exception is still compared: Inductor orders ``mend::capture`` only against other
    effects, not against an op that raises, so a deferred print before an out-of-range index
    can be lost, and one after a failing ``torch._assert_async`` can appear (measured on
    torch 2.13; tests/test_defer_exceptions.py)."""
    ra, rb = a[0], b[0]
    raised_a = isinstance(ra, tuple) and ra and ra[0] == "raised"
    raised_b = isinstance(rb, tuple) and rb and rb[0] == "raised"
    either_error = any_error and raised_a and raised_b  # Inductor's own exception types and messages
    if (raised_a or raised_b) and not either_error and ra != rb:
        raise Mismatch(f"behaviour differs: original {_short(ra)}, mended {_short(rb)}")
    for what, i in (("stdout", 1), ("warnings", 2), ("log records", 3)):
        if a[i] != b[i] and (exact or without_grad_fn_names(a[i]) != without_grad_fn_names(b[i])):
            when = " (both raised)" if raised_a and raised_b else ""
            raise Mismatch(f"{what} differ{when}: original {a[i]!r}, mended {b[i]!r}")
    if either_error:
        # Inductor's own exception: outputs are not compared, the state the call left is
        # (helper-47: a buffer update after a failing in-graph check ran under Inductor)
        _compare_state(a, b)
        return 0.0
    worst = 0.0
    pairs = list(zip(flatten(ra), flatten(rb)))
    if len(flatten(ra)) != len(flatten(rb)):
        raise Mismatch("output structure differs")
    sa, sb = skeleton(ra, exact), skeleton(rb, exact)
    if sa != sb:
        raise Mismatch(f"the outputs' non-tensor parts differ: original {str(sa)[:200]}, mended {str(sb)[:200]}")
    ga, gb = list(a[4] or ()), list(b[4] or ())
    if [n for n, _ in ga] != [n for n, _ in gb]:
        raise Mismatch("gradient structure differs")
    for (name, x), (_, y) in zip(ga, gb):
        if (x is None) != (y is None):
            raise Mismatch(f"the gradient of {name} is {'None' if x is None else 'a tensor'} in the original but "
                           f"{'None' if y is None else 'a tensor'} in the mended code")
    ga, gb = [g for _, g in ga], [g for _, g in gb]
    grads = [(x, y) for x, y in zip(ga, gb) if x is not None]
    _compare_state(a, b)
    for kind, seq in (("output", pairs), ("gradient", grads)):
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
                if exact and kind == "gradient":
                    scale = fx.abs().max().item() if fx.numel() else 0.0
                    rtol, atol = gradient_tolerance(x.dtype, scale)
                    if grad_stats is not None:
                        grad_stats["max"] = max(grad_stats.get("max", 0.0), err)
                else:
                    worst = max(worst, err)
                    rtol, atol = (0.0, 0.0) if exact else _tolerance(x.dtype, floor)
                if not torch.allclose(fx, fy, rtol=rtol, atol=atol):
                    raise Mismatch(f"{kind} values differ (max abs error {err:.3g})")
            elif not torch.equal(x, y):
                raise Mismatch(f"{kind} values differ")
    if len(a) > 8 and len(b) > 8:
        # compiled against eager (not exact): the RNG differs by construction and floats may
        # round otherwise; what the attributes hold is still compared (helper-50: a value
        # stashed on the module before a check that failed inside the graph was lost)
        diff = attributes_differ(*((a[8], b[8]) if exact else (pystate.relaxed(a[8], RNG_KEY),
                                                                 pystate.relaxed(b[8], RNG_KEY))))
        if diff and diff.startswith(f"`{RNG_KEY}`"):
            raise Mismatch("torch's global RNG state differs after the call: the versions draw different random "
                           "numbers (a later random draw would differ)")
        if diff:
            raise Mismatch(f"the module's Python attributes differ after the call: {diff}")
    # last, so that a difference in values is the one reported
    if exact and len(a) > 7 and len(b) > 7 and a[7] != b[7]:
        i, x, y = next((i, x, y) for i, (x, y) in enumerate(zip(a[7], b[7])) if x != y)
        raise Mismatch(f"output {i} {_alias_text(x)} in the original but {_alias_text(y)} in the mended code "
                       "(an in-place change to the result would reach the caller's tensor in one and not the other)")
    return worst


def _compare_state(a, b) -> None:
    """Raise Mismatch unless the state two observations left agrees: buffers and tensor
    inputs bit for bit, the globals the call changed, the list/dict arguments' contents."""
    state = []
    if len(a) > 5:
        if [n for n, _ in a[5]] != [n for n, _ in b[5]]:
            raise Mismatch("module buffers differ in structure after the call")
        if len(a[6]) != len(b[6]):
            raise Mismatch("the tensors held by the arguments differ in number after the call")
        state += [(f"buffer `{n}` after the call", x, y) for (n, x), (_, y) in zip(a[5], b[5])]
        state += [(f"input {i} after the call", x, y) for i, (x, y) in enumerate(zip(a[6], b[6]))]
    for what, x, y in state:
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x.isnan(), y.isnan()) or \
                not torch.equal(x.nan_to_num(), y.nan_to_num()):
            raise Mismatch(f"{what} differs")
    if len(a) > 10 and len(b) > 10:
        if a[9] != b[9]:
            raise Mismatch(f"the call changes other module globals: original {list(a[9])}, mended {list(b[9])} "
                           "(a Python effect lost or added, e.g. not replayed when the compiled graph raised)")
        if a[10] != b[10]:
            raise Mismatch(f"a list or dict argument differs after the call: original {str(a[10])[:160]}, mended "
                           f"{str(b[10])[:160]}")


def _alias_text(tag) -> str:
    if tag is None:
        return "is a new tensor"
    return f"is {tag[1]} itself" if tag[0] == "is" else f"shares the storage of {tag[1]}"


def _resize_batch(t: torch.Tensor, n: int) -> torch.Tensor:
    """``t`` with its leading dimension repeated or cut to ``n``."""
    reps = -(-n // t.shape[0])
    return t.repeat(reps, *([1] * (t.dim() - 1)))[:n].clone()


def inputs_strategy(example: tuple, edge: bool, vary_batch: bool = True, extra_edge_values=()):
    """Inputs like ``example``: floats scaled/shifted/negated with edge values; integer
    tensors drawn from the example's range widened by 2 each side, constant fills, and the
    example with one element out of an index's range (-1 or 2 * max + 1);
    and, when ``vary_batch``, the leading dimension shared by the inputs set to 1, 2, 3
    or its example size (a rewrite checked on one batch size alone can hide a shape bug). A
    1-D tensor is resized with them when a tensor of two or more dimensions shows that
    leading size to be a batch (per-sample labels, lengths, returns beside features: kept
    at the example's size, they made every drawn input invalid)."""
    tensors = [t for t in example if isinstance(t, torch.Tensor) and t.dim() >= 1]
    batch = tensors[0].shape[0] if tensors else None
    values = _values_strategy(example, edge, extra_edge_values)
    if not vary_batch or batch is None:
        return values
    min_dim = 1 if any(t.dim() >= 2 and t.shape[0] == batch for t in tensors) else 2

    def rebatch(vals, n):
        return tuple(_resize_batch(v, n) if isinstance(v, torch.Tensor) and v.dim() >= min_dim and v.shape[0] == batch
                     else v for v in vals)
    return st.builds(rebatch, values, st.sampled_from(sorted({1, 2, 3, batch})))


def _values_strategy(example: tuple, edge: bool, extra_edge_values=()):
    """``extra_edge_values``: a rewrite's constants (see :func:`edge_values_for`), drawn into
    tensors besides EDGE_VALUES; none (the default) leaves the strategy as it was."""
    def one(t):
        if not isinstance(t, torch.Tensor):
            return st.just(t)
        extra = edge_values_for(t.dtype, extra_edge_values) if extra_edge_values and t.numel() else []
        index = st.integers(0, max(t.numel() - 1, 0))
        if t.is_floating_point():
            scale = st.sampled_from([1.0, -1.0, 0.5, 2.0, -3.0, 10.0, 1e-3, 1e3, 0.0])
            shift = st.sampled_from([0.0, 1.0, -1.0, 10.0, -10.0])
            edge_st = st.lists(st.tuples(index, st.sampled_from(EDGE_VALUES)),
                               max_size=3) if edge else st.just([])
            if extra:
                edge_st = (st.lists(st.tuples(index, st.sampled_from(EDGE_VALUES + extra)), max_size=3)
                           | st.lists(st.tuples(index, st.sampled_from(extra)), min_size=1,
                                      max_size=max(3, min(t.numel(), 16))))

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
        if t.is_complex():   # random complex normals and the example (an adversarial review's crash: no min())
            return (st.builds(lambda s: torch.randn(t.shape, dtype=t.dtype, generator=torch.Generator().manual_seed(s)),
                              st.integers(0, 2**16)) | st.just(t.clone()))
        # two past the example's range, within the dtype's (helper-66: a uint8 200 or 0 crashed randint)
        info = torch.iinfo(t.dtype)
        lo, hi = max(int(t.min()) - 2, info.min), min(int(t.max()) + 2, info.max)
        # random values, the example itself, and constant fills (an all-ones mask is
        # exactly the input that flips `if (mask == 0).any()`)
        drawn = (st.builds(lambda s: torch.randint(lo, min(hi + 1, info.max), t.shape,
                                                   generator=torch.Generator().manual_seed(s),
                                                   dtype=t.dtype), st.integers(0, 2**16))
                 | st.just(t.clone()) | st.just(torch.full_like(t, lo)) | st.just(torch.full_like(t, hi)))
        if t.numel():
            # one element out of an index's range (-1, or twice the largest value seen): class
            # targets and token ids of the example rarely reach the bound, and an input that makes
            # a later op raise is where a deferred effect can be lost (an adversarial helper's case)
            far = sorted({min(max(v, info.min), info.max) for v in (-1, 2 * max(hi, 0) + 1)})

            def one_far(x, i, v):
                flat = x.reshape(-1).clone()
                flat[i] = v
                return flat.reshape(t.shape)
            drawn = drawn | st.builds(one_far, st.just(t.clone()), index, st.sampled_from(far))
        if not extra:
            return drawn

        def inject(x, edges):
            flat = x.reshape(-1).clone()
            for i, v in edges:
                flat[i] = v
            return flat.reshape(t.shape)
        return drawn | st.builds(inject, drawn, st.lists(st.tuples(index, st.sampled_from(extra)), min_size=1,
                                                         max_size=max(3, min(t.numel(), 16))))
    return st.tuples(*[one(t) for t in example])


def differential_test(original, mended, example: tuple, *, example_kwargs: dict | None = None, emitted=None,
                      reference=None, force_lines: list[int] = (), extra_inputs: list[tuple] = (), seed: int = 0,
                      max_examples: int = 40, compiled: bool = True, edge: bool = True,
                      train: bool = True, extra_edge_values=(), prepare=None, other_dtypes=()) -> Evidence:
    """Compare ``original`` and ``mended`` (same weights) on Hypothesis-drawn inputs.

    ``example``: the target's example args (tensors of any shape/dtype). ``force_lines``:
    rewritten predicates, instrumented with :func:`verifier.forcing.force` in both models:
    the tests of one ``if``/``elif`` chain, in order, or an ``assert``'s (each ``and`` operand).
    Every input runs with the predicates natural, and each forced True and False with what
    reaches it (:func:`verifier.forcing.settings`), so every outcome is always exercised. ``emitted``: the mended module exactly as it will be
    written (no forcing hook; defaults to ``mended``), compiled with both runtimes
    installed as README tells users to; ``reference``: a separate copy of the original
    that sees exactly the calls ``emitted`` sees (stateful modules stay in step). Modes:
    eager vs eager (bit-exact, natural and forced), eager vs
    ``torch.compile(emitted, backend="eager")`` (dtype-aware tolerance, natural
    predicates), with ``force_lines`` also eager vs the compiled instrumented candidate
    (forced both ways, gradients; private copies), each in eval mode and, with ``train``, in training mode (dropout draws
    and running statistics must agree). Compared besides outputs: exceptions, stdout,
    logs, warnings, gradients of float inputs and parameters, buffers and inputs after
    the call. ``extra_edge_values``: the rewrite's constants (a comparison's threshold); each
    is drawn as an edge value (itself, rounded to the input's dtype, and its neighbours there:
    :func:`edge_values_for`), and the example with them written into its leading elements
    is one more fixed input. Empty (the default): as without it. ``example_kwargs``: the
    example's keyword inputs, drawn like the positional ones (a transformers model called
    as ``model(input_ids=..., attention_mask=...)``). ``prepare``: applied to every
    compiled mended model before ``torch.compile`` (the caller installs its runtimes there,
    as users are told to); the verifier itself knows no runtime. ``other_dtypes``: floating
    dtypes (``torch.float64``) to run the fixed inputs at once more, model and inputs cast
    (:func:`verifier.legs.at_other_dtypes`); empty (the default): not run.
    """
    # as a fresh process: earlier compiles' caches and code state must not shape this verdict
    torch._dynamo.reset()
    # forcing guards on the forced value and drawn batch sizes recompile the frame: past
    # Dynamo's recompile limit (8) it would run the "compiled" models eagerly, unnoticed
    with torch._dynamo.config.patch(recompile_limit=64):
        return _differential_test(original, mended, example, example_kwargs=example_kwargs, emitted=emitted,
                                  reference=reference, force_lines=force_lines, extra_inputs=extra_inputs, seed=seed,
                                  max_examples=max_examples, compiled=compiled, edge=edge, train=train,
                                  extra_edge_values=extra_edge_values, prepare=prepare, other_dtypes=other_dtypes)


def _frames_given_up() -> int:
    """How many frames Dynamo failed to convert in this process (skipped whole, or errored)."""
    from torch._dynamo.utils import counters

    return counters["frames"]["total"] - counters["frames"]["ok"]


def _differential_test(original, mended, example: tuple, *, example_kwargs, emitted, reference, force_lines,
                       extra_inputs, seed, max_examples, compiled, edge, train, extra_edge_values, prepare,
                       other_dtypes) -> Evidence:
    from verifier.legs import at_other_dtypes, jittered, under_aot_autograd, under_autocast   # it imports this module

    forcing.reset()
    given_up = _frames_given_up()
    prepare = prepare or (lambda m: m)
    keys = list(example_kwargs or {})
    n_args = len(example)
    example = tuple(example) + tuple((example_kwargs or {})[k] for k in keys)

    def split(values):
        """(args, kwargs) of a drawn input: the keyword values follow the positional ones."""
        return tuple(values[:n_args]), dict(zip(keys, values[n_args:]))

    modes = ["eager"] + (["compiled:eager-backend"] if compiled else [])
    modes = [f"{m}/{phase}" for m in modes for phase in (("eval", "train") if train else ("eval",))]
    emit = emitted if emitted is not None else mended
    ref_c = reference if reference is not None else original
    if compiled:
        prepare(emit)
    compiled_model = torch.compile(emit, backend="eager") if compiled else None
    # the rewritten predicates forced both ways under torch.compile too, with gradients: a rewrite may
    # take effect only when compiling (torch.cond keeps the `if` for eager). Private copies.
    pair_c = None
    if compiled and force_lines:
        orig_f, mended_f = copy.deepcopy(original), copy.deepcopy(mended)
        prepare(mended_f)
        pair_c = (orig_f, torch.compile(mended_f, backend="eager"))
        modes = modes + [f"compiled:eager-backend/forced/{p}" for p in (("eval", "train") if train else ("eval",))]
    # gradients: of every float input, and of the parameters; a rewrite that is only
    # right without autograd must not pass
    grad = True
    state = {"n": 0, "worst": 0.0}
    grads: dict = {}   # the largest eager gradient difference (compare's grad_stats)
    # test k of an if/elif chain is reached only when the tests before it are false, operand j
    # of an assert's `and` only when the ones before it held: forced so
    settings_ = forcing.settings(list(force_lines))
    models = [original, mended, emit, ref_c] + (list(pair_c) if pair_c else [])
    # drawn inputs on which the original raised go to the Inductor pass too: Inductor orders
    # a deferred effect only against other effects, not against an op that raises
    raising: list = []
    compiled_refs: dict = {}

    def compiled_compare(ref_model, ref_obs, got_obs, args, kwargs, grad_c) -> float:
        """The compiled mended run against the eager reference; where the mended run raised
        Dynamo's own TorchRuntimeError (an invalid input met while tracing: a fake-tensor
        shape error, whose message is not eager's) the reference is the original under
        torch.compile too, and either exception is accepted when both raise (as against
        Inductor); what was printed, warned and logged is still compared."""
        try:
            return compare(ref_obs, got_obs, exact=False)
        except Mismatch:
            raised = got_obs[0]
            if not (isinstance(raised, tuple) and raised[:2] == ("raised", "TorchRuntimeError")):
                raise
        if id(ref_model) not in compiled_refs:
            compiled_refs[id(ref_model)] = torch.compile(ref_model, backend="eager")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_cc = observe(compiled_refs[id(ref_model)], args, kwargs, grad=grad_c)
        return compare(ref_cc, got_obs, exact=False, any_error=True)

    def check(values):
        args, kwargs = split(values)
        for phase in (("eval", "train") if train else ("eval",)):
            for mod in models:
                mod.train(phase == "train")
            for setting in settings_:
                line = next(reversed(setting), None)   # the counterexample names the phase and forcing (helper-72)
                state["at"] = f" ({phase} mode{', predicates forced ' + str(setting) if setting else ''})"
                with forcing.forced_all(setting):
                    ref = observe(original, args, kwargs, grad)
                    if line is None and phase == "eval" and len(raising) < RAISING_FOR_INDUCTOR and \
                            isinstance(ref[0], tuple) and ref[0] and ref[0][0] == "raised":
                        raising.append(values)
                    got = observe(mended, args, kwargs, grad)
                    state["worst"] = max(state["worst"], compare(ref, got, exact=True, grad_stats=grads))
                    if compiled_model is not None and line is None:
                        # in training, with the backward pass: a compiled region's backward
                        # can run mended code again (a checkpoint recomputes its forward)
                        grad_c = grad and phase == "train"
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            got_c = observe(compiled_model, args, kwargs, grad=grad_c)
                        ref_c_obs = observe(ref_c, args, kwargs, grad=grad_c)
                        state["worst"] = max(state["worst"],
                                             compiled_compare(ref_c, ref_c_obs, got_c, args, kwargs, grad_c))
                    if pair_c is not None:
                        ref_f = observe(pair_c[0], args, kwargs, grad)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            got_f = observe(pair_c[1], args, kwargs, grad)
                        state["worst"] = max(state["worst"],
                                             compiled_compare(pair_c[0], ref_f, got_f, args, kwargs, grad))
        for mod in models:
            mod.eval()
        state["at"] = ""
        # every input (fixed and drawn) under autocast too, eager (helper-39: a dtype another
        # data-dependent `if` decides under autocast differed only on a path the example did not take)
        state["worst"] = max(state["worst"], under_autocast(original, mended, ref_c, None, (args, kwargs), modes,
                                                            grads, settings_))
        state["n"] += 1

    def describe(args):
        return ", ".join(input_text(a) for a in args) + state.get("at", "")

    def outcomes():
        return {str(line): {"natural": sorted(forcing.seen(line) - {None}), "forced": [False, True]}
                for line in force_lines}

    # extra inputs are positional; the example's keyword values go with them
    fixed = [tuple(example)] + [tuple(x) + (example[n_args:] if len(x) == n_args else ()) for x in extra_inputs]
    if extra_edge_values:
        seeded = with_edge_values(tuple(example), extra_edge_values)
        if seeded is not None:
            fixed.append(seeded)
    try:
        for args in fixed:
            check(args)
    except Mismatch as exc:
        return Evidence(False, seed, state["n"], modes, outcomes(), state["worst"], describe(args), str(exc),
                        grads.get("max", 0.0))

    failure: dict = {}

    @hyp_seed(seed)
    # no shrink phase: a refuted candidate is declined at the first failing input, reported as
    # drawn (shrinking it cost ~50 s a refutation on 2 cores, ~150 more runs of both models:
    # tests/fixtures/autocast_shape_decides_dtype.py)
    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    @given(inputs_strategy(tuple(example), edge, extra_edge_values=tuple(extra_edge_values)))
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
                        failure.get("args"), failure.get("why"), grads.get("max", 0.0))
    except Flaky:
        if "why" not in failure:
            raise
        # a mismatch seen once is a failure, even where Hypothesis's replay did not repeat it
        # (helper-40: a nondeterministic difference ended the whole run as an internal error)
        return Evidence(False, seed, state["n"], modes, outcomes(), state["worst"], failure.get("args"),
                        f"{failure['why']} (not repeated when Hypothesis replayed the input: nondeterministic)",
                        grads.get("max", 0.0))
    if compiled:
        # once more under the default backend, on the fixed inputs and the first drawn ones that made
        # the original raise: Inductor must accept the mended graph (mend::capture crashed it) and agree
        # a frame the runs above gave up on (a break in a loop, with autograd on, where a cond's
        # guard keeps the if) stays skipped, and Inductor would never see the cond (helper-96 F1:
        # a cond over two views of one storage, which Inductor rejects, passed): a fresh Dynamo then
        if _frames_given_up() > given_up:
            torch._dynamo.reset()
        inductor = torch.compile(emit)
        modes.append("compiled:inductor/eval")
        floor = least_precise_float(emit, example)
        try:
            for values in fixed + [jittered(fixed[0])] + raising:   # jittered: helper-74's bf16 rounding
                args, kwargs = split(values)
                for mod in models:
                    mod.eval()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got_i = observe(inductor, args, kwargs, grad=False)
                ref_i = observe(ref_c, args, kwargs, grad=False)
                try:
                    state["worst"] = max(state["worst"], compare(ref_i, got_i, exact=False, any_error=True,
                                                                       floor=floor))
                except Mismatch:
                    # Inductor itself can depart from eager (NaN positions on inf/NaN
                    # inputs): then the reference is the original under Inductor too
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        ref_i = observe(torch.compile(ref_c), args, kwargs, grad=False)
                    state["worst"] = max(state["worst"], compare(ref_i, got_i, exact=False, any_error=True,
                                                                       floor=floor))
        except Mismatch as exc:
            return Evidence(False, seed, state["n"], modes, outcomes(), state["worst"], describe(values),
                            f"under torch.compile (inductor): {exc}", grads.get("max", 0.0))
    try:   # the fixed inputs under autocast and Inductor (check ran them under autocast in eager)
        for values in fixed if compiled else ():
            for mod in models:
                mod.eval()
            state["worst"] = max(state["worst"], under_autocast(original, mended, ref_c, inductor, split(values), modes,
                                                                grads, settings_, eager=False))
        if compiled and train:   # and in training through AOTAutograd (functionalized in-place writes)
            state["worst"] = max(state["worst"], under_aot_autograd(emit, ref_c, models, fixed, split, modes, floor))
        if compiled and other_dtypes:
            values = fixed[0]
            state["worst"] = max(state["worst"], at_other_dtypes(emit, ref_c, (original, mended), fixed, split, modes,
                                                                 other_dtypes, prepare, settings_))
    except Mismatch as exc:
        return Evidence(False, seed, state["n"], modes, outcomes(), state["worst"], describe(values), str(exc),
                        grads.get("max", 0.0))
    return Evidence(True, seed, state["n"], modes, outcomes(), state["worst"], max_gradient_error=grads.get("max", 0.0))
