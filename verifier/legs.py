"""Legs of the differential test beyond the eager/compiled comparison of
:mod:`verifier.differential`: the models under ``torch.autocast``, in training through
AOTAutograd, with model and inputs cast to other floating dtypes, and whether TorchScript
still compiles the mended module. Split out of that module to keep it readable."""
from __future__ import annotations

import contextlib
import copy
import warnings

import torch

from verifier import forcing
from verifier.differential import Mismatch, compare, flatten, observe

AUTOCAST_DTYPE = torch.bfloat16


def under_autocast(original, mended, ref_c, inductor, values, modes: list, grads: dict, settings_=({},),
                   eager: bool = True) -> float:
    """``values`` (args, kwargs) run under ``torch.autocast(<device>, bfloat16)``: eager
    original vs eager mended bit-exact (gradients as in eager) with the predicates natural and
    forced as ``settings_`` says (helper-38: the example took the float32 side only), and, when ``inductor`` is
    given, the Inductor-compiled emitted model against the eager original (bfloat16
    tolerance; the original under Inductor and autocast where Inductor departs from eager).
    Autocast changes the dtypes a model computes in at run time, so facts observed without
    it (a result dtype, an exact conversion) may not hold there: an ``if`` whose sides are a
    linear layer's output and its input returns bfloat16 or float32, ``torch.where`` float32;
    a float32 0-d threshold meets bfloat16 logits, compared in float32 by Inductor where the
    Python number is rounded to bfloat16 first (86 of 262144 elements). PyTorch doc: "Automatic
    Mixed Precision package - torch.amp". ``eager`` False: the Inductor run only (the eager
    comparison already ran on these values). Every Mismatch it raises starts with "under
    autocast(" (mend's autocast-guarded forms answer only those declines). Raises Mismatch."""
    args, kwargs = values
    device = next((t.device.type for t in flatten([args, kwargs]) if t.device.type != "meta"), "cpu")
    label = f"autocast({device}, {str(AUTOCAST_DTYPE).removeprefix('torch.')})"
    modes += [m for m in (eager and f"eager/{label}/eval", inductor is not None and f"compiled:inductor/{label}/eval")
              if m and m not in modes]
    with torch.autocast(device, dtype=AUTOCAST_DTYPE), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        worst = 0.0
        for setting in settings_ if eager else ():
            with contextlib.ExitStack() as stack:
                for line, value in setting.items():
                    stack.enter_context(forcing.forced(line, value))
                try:
                    worst = max(worst, compare(observe(original, args, kwargs, True), observe(mended, args, kwargs, True),
                                               exact=True, grad_stats=grads))
                except Mismatch as exc:
                    raise Mismatch(f"under {label}, eager{', forced ' + str(setting) if setting else ''}: {exc}") from exc
        if inductor is None:
            return worst
        got = observe(inductor, args, kwargs, grad=False)
        try:
            return max(worst, compare(observe(ref_c, args, kwargs, grad=False), got, exact=False, any_error=True,
                                      floor=AUTOCAST_DTYPE))
        except Mismatch:
            ref_i = observe(torch.compile(ref_c), args, kwargs, grad=False)
        try:
            return max(worst, compare(ref_i, got, exact=False, any_error=True, floor=AUTOCAST_DTYPE))
        except Mismatch as exc:
            raise Mismatch(f"under {label}, torch.compile (inductor): {exc}") from exc


def torchscript_kept(original, mended) -> str | None:
    """Whether ``torch.jit.script`` still compiles the mended module (observed): None when the
    original does not script; ``"kept"``; ``"lost: <error>"`` (reported: TorchScript is deprecated)."""
    def error(model) -> str | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                torch.jit.script(model)
            except Exception as exc:  # TorchScript's frontend raises many types
                return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200].rstrip(":")
        return None
    if error(original) is not None:
        return None
    lost = error(mended)
    return "kept" if lost is None else f"lost: {lost}"


def under_aot_autograd(emit, ref_c, models, fixed, split, modes: list, floor) -> float:
    """The fixed inputs in training mode, with gradients, through
    ``torch.compile(emit, backend="aot_eager")`` against the eager reference ``ref_c``
    (the compiled-vs-eager tolerance; where that differs, the original under aot_eager too,
    as against Inductor). AOTAutograd traces forward and backward together and functionalizes
    in-place writes, which neither eager nor the eager backend does: a kept copy of a buffer
    written in place later in the call was read by backward after the write there
    (helper-71: ``x / t`` after ``self.temp.mul_(0.5)`` doubled ``x.grad`` under aot_eager and
    Inductor, exact in eager). PyTorch doc: "torch.compile backends" (aot_eager: AOTAutograd
    with no code generation). ``models`` are set to training mode and back to eval. Raises
    Mismatch, its message starting "in training under torch.compile (aot_eager)"."""
    aot = torch.compile(emit, backend="aot_eager")
    modes.append("compiled:aot_eager/train")
    worst = 0.0
    try:
        for values in fixed:
            args, kwargs = split(values)
            for mod in models:
                mod.train(True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = observe(aot, args, kwargs, grad=True)
            try:   # the reference's state before this call
                before = copy.deepcopy(ref_c)
            except Exception:   # noqa: BLE001 - a module holding a non-leaf tensor does not copy
                before = None
            ref = observe(ref_c, args, kwargs, grad=True)
            try:
                worst = max(worst, compare(ref, got, exact=False, any_error=True, floor=floor))
            except Mismatch:
                # AOTAutograd's decompositions may depart from eager themselves: then the
                # reference is the original under aot_eager, from the same state (without a
                # copy of that state, the difference stands: declined)
                if before is None:
                    raise
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ref = observe(torch.compile(before.train(True), backend="aot_eager"), args, kwargs, grad=True)
                worst = max(worst, compare(ref, got, exact=False, any_error=True, floor=floor))
    except Mismatch as exc:
        raise Mismatch(f"in training under torch.compile (aot_eager): {exc}") from exc
    finally:
        for mod in models:
            mod.eval()
    return worst


def jittered(values: tuple) -> tuple:
    """``values`` with each floating tensor scaled by ``1 + 1e-3 * N(0, 1)`` (a fixed seed; same
    shapes and dtypes, so a compiled model does not recompile). An example of exactly
    representable values (``randint(..) / 4``) hides a rounding Inductor drops once the break is
    gone: ``x.bfloat16() > 0.5`` fused into one kernel compares the float32 value (helper-74:
    0.5000001 gave True where eager gives False). Other values pass through unchanged."""
    gen = torch.Generator().manual_seed(0)

    def one(v):
        if isinstance(v, torch.Tensor) and v.is_floating_point() and not v.is_complex() and v.device.type != "meta":
            noise = torch.randn(v.shape, generator=gen, dtype=torch.float64).to(v.device)
            return (v.double() * (1 + 1e-3 * noise)).to(v.dtype)
        return v
    return tuple(one(v) for v in values)


# the obligations about the sides' dtypes: proved for every dtype, or the candidate runs at another
DTYPE_KINDS = ("cond-branch-types", "same-dtype", "where-equals-ite")


def other_dtypes(results: list[dict]) -> tuple:
    """The dtypes to run a candidate at once more (model and inputs cast): float64 and bfloat16
    when an obligation about the sides' dtypes was not proved for every dtype (unknown, or
    proved at the example's dtypes only), else none. A side that fixes its own dtype returns one
    dtype on a float32 example and two on a model of another dtype, where torch.cond raises and
    torch.where promotes: ``cumsum(dtype=torch.float32)`` on a float64 model, ``h +
    torch.ones(n, 4)`` (float32 wins over bfloat16, not over float64) on a bfloat16 one
    (helper-95 m03, m15)."""
    unproved = any(r["kind"] in DTYPE_KINDS and (r["result"] != "proved" or r.get("tier") == "observed")
                   for r in results)
    return (torch.float64, torch.bfloat16) if unproved else ()


def _cast_floats(values, dtype: torch.dtype):
    """``values`` (nested tuples, lists, dicts) with each floating tensor cast to ``dtype``."""
    if isinstance(values, torch.Tensor):
        return values.to(dtype) if values.is_floating_point() and not values.is_complex() else values
    if isinstance(values, (tuple, list)):
        return type(values)(_cast_floats(v, dtype) for v in values)
    if isinstance(values, dict):
        return {k: _cast_floats(v, dtype) for k, v in values.items()}
    return values


def at_other_dtypes(emit, ref_c, instrumented, fixed, split, modes: list, dtypes, prepare, settings_=({},)) -> float:
    """The fixed inputs with the model and the inputs' floating tensors cast to each of
    ``dtypes`` (``model.to(torch.float64)``), in eval mode without gradients: a private copy of
    the emitted model under ``torch.compile(backend="eager")`` against a copy of the reference
    ``ref_c`` in eager, the predicates natural; and, eager, copies of the ``instrumented`` pair
    (original, mended) with each forced setting of ``settings_`` (:func:`verifier.forcing.settings`),
    so a side the example never takes runs too (one compile per dtype: a torch.cond's branch
    dtypes are checked when it is traced, whichever side is taken; a torch.where computes the
    same in eager). Either exception is accepted when both raise; a value, dtype or exception
    only one shows is a mismatch. For a rewrite whose sides' dtypes were not proved for every
    dtype: torch.cond raises when its branches return different dtypes where the ``if``
    returned, torch.where promotes (a ``cumsum(dtype=torch.float32)`` side on a float64 model;
    helper-94 m08, helper-95 m03, m15). ``prepare``: as for the other compiled runs (the
    runtimes users install). Raises Mismatch, its message starting "with the model and inputs
    in <dtype>"."""
    worst = 0.0
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        modes.append(f"compiled:eager-backend/{name}/eval")
        try:
            ref, got = copy.deepcopy(ref_c).to(dtype).eval(), copy.deepcopy(emit).to(dtype).eval()
            pair = [copy.deepcopy(m).to(dtype).eval() for m in instrumented] if any(settings_) else None
        except Exception as exc:   # noqa: BLE001 - a module that does not copy or cast: said, not passed
            raise Mismatch(f"with the model and inputs in {name}: the model could not be copied and cast "
                           f"({type(exc).__name__}: {exc})") from exc
        runs = [({}, ref, torch.compile(prepare(got), backend="eager"), "under torch.compile (eager backend)")]
        if pair is not None:
            modes.append(f"eager/{name}/eval/forced")
            runs += [(s, *pair, "eager") for s in settings_ if s]
        for setting, ref_model, cand_model, how in runs:
            try:
                for values in fixed:
                    args, kwargs = split(_cast_floats(values, dtype))
                    with forcing.forced_all(setting), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        got_obs = observe(cand_model, args, kwargs, grad=False)
                        ref_obs = observe(ref_model, args, kwargs, grad=False)
                    worst = max(worst, compare(ref_obs, got_obs, exact=False, any_error=True))
            except Mismatch as exc:
                forced = f", predicates forced {setting}" if setting else ""
                raise Mismatch(f"with the model and inputs in {name}{forced}, {how}: {exc}") from exc
    return worst
