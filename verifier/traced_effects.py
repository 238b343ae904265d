"""What Dynamo itself records about the graph that holds a check moved into it.

A check moved into the graph (``torch._assert_async``, predicated validation) fails while the
graph runs. Dynamo replays the Python writes a graph makes to objects that existed before the
frame (globals, attributes, lists, dicts, closure cells) only after the graph returns, so a
failing check drops all of them: the ones made before the check, which eager made, too. And
inductor may run a tensor write into a graph input, or draw its random seed, before the failed
assert surfaces, where eager never got that far. A graph free of all three loses or adds
nothing on a failing call.

Dynamo must know every such write to replay it (its ``SideEffects`` record; PyTorch's Dynamo
deep dive, "side effects"), so the record is complete for the traced code, where an
observation of module state sees only the objects it looks at. What it does not cover is code
Dynamo compiles differently: other guards (shapes that take another Python path, grad mode,
training), each a separate trace. This module traces the model in the modes asked and reports,
per graph that holds the marked check:

* ``existing``: Python objects that existed before the frame and that the graph writes
  (``AttributeMutationExisting``/``ValueMutationExisting``: a global, a class attribute, a
  module attribute, a list/dict/deque, a closure cell);
* ``rng``: aten operators tagged ``nondeterministic_seeded`` in the graph (``torch.Tag``),
  random factories and in-place random methods in Dynamo's graph (a dead draw is gone before
  AOTAutograd), and Python ``random`` calls Dynamo replays before the graph;
* ``input_writes``: the inputs AOTAutograd's metadata marks as mutated (a parameter, buffer,
  input or global tensor written in place; applied after the graph), and any mutable aten
  operator left after functionalization;
* ``hooks``: tensor hooks the graph registers;
* ``global_state``: calls that set torch's global state in the graph (grad mode, autocast),
  whose final value Dynamo sets only after the graph returns.

Evidence kind: an observation of Dynamo's trace on the example inputs (not a proof); private
Dynamo API (``InstructionTranslator.current_tx().output.side_effects``), measured on torch 2.13.
"""
from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any

MARKER = "mend-trap:"   # the message prefix of a check moved into the graph (predicated validation)


def _has_check(gm, marker: str) -> bool:
    import torch

    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._assert_async:
            if any(isinstance(a, str) and a.startswith(marker) for a in list(node.args) + list(node.kwargs.values())):
                return True
    return False


def _global_state(gm) -> list[str]:
    """Calls in a Dynamo graph that set torch's global state (grad mode, autocast): Dynamo puts
    them in the graph and sets the final state after it returns, so a check failing in between
    leaves the state as it was before the graph, where eager left it changed (an adversarial
    review: `torch.set_grad_enabled(False)` in a constructor)."""
    names = [_target_name(n) for n in gm.graph.nodes if n.op == "call_function"]
    return [n for n in names if n.startswith("_set_") or "autocast" in n
            or n in ("set_grad_enabled", "_enable_grad", "_disable_grad")]


def _target_name(node) -> str:
    """A graph node's callee by name: a method name as is, a function's ``__name__``."""
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))


_RANDOM = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
           "multinomial", "normal", "poisson", "uniform_", "normal_", "bernoulli_", "random_", "exponential_",
           "geometric_", "cauchy_", "log_normal_", "seed", "manual_seed"}


def _dynamo_random(gm) -> list[str]:
    """Random draws in the Dynamo graph itself: a draw whose result is dead is removed before
    AOTAutograd sees it, yet eager made it (an adversarial review). Dropout is left to the aten
    check, where it is a draw only when active."""
    return [f"{_target_name(n)} (Dynamo graph)" for n in gm.graph.nodes
            if n.op in ("call_function", "call_method") and _target_name(n) in _RANDOM]


def _aten_effects(gm, rec: dict) -> None:
    """RNG draws and writes in a functionalized aten graph (AOTAutograd's): the inputs its
    metadata marks as mutated (AOTAutograd applies those writes after the graph, or, kept in the
    graph, as ``copy_``), and any mutable operator left in it."""
    import torch

    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    if meta is None:
        rec["input_writes"].append("AOTAutograd's input-mutation metadata was not available")
    else:
        rec["input_writes"] += [f"graph input {i} written in place" for i, info in enumerate(meta.input_info)
                                if info.mutates_data or info.mutates_metadata]
    for node in gm.graph.nodes:
        op = node.target
        if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
            continue
        if torch.Tag.nondeterministic_seeded in op.tags:
            rec["rng"].append(str(op))
        if op._schema.is_mutable:
            rec["input_writes"].append(str(op))


def _recorder(records: list[dict], marker: str):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.symbolic_convert import InstructionTranslator

    def backend(gm, example_inputs):
        rec: dict[str, Any] = {"check": _has_check(gm, marker), "existing": [], "rng": [], "input_writes": [],
                               "hooks": 0, "complete": False, "global_state": _global_state(gm)}
        rec["rng"] += _dynamo_random(gm)
        tx = InstructionTranslator.current_tx()
        side = tx.output.side_effects
        for var in side._get_modified_vars():
            kind = type(var.mutation_type).__name__
            if "Existing" in kind:
                rec["existing"].append(f"{type(var).__name__} {var.source.name if var.source else '?'} ({kind})")
        rec["rng"] += ["Python random call (Dynamo replays it before the graph)"] * len(tx.output.random_calls)
        rec["hooks"] = len(side.tensor_hooks)
        records.append(rec)

        def inspect(g, _inputs):
            _aten_effects(g, rec)
            return make_boxed_func(g.forward)
        compiled = aot_autograd(fw_compiler=inspect, bw_compiler=inspect)(gm, example_inputs)
        rec["complete"] = True   # AOTAutograd traced it: a failure there leaves the record partial
        return compiled
    return backend


# eval only: the rewrite keeps the original check in training (its guard reads `self.training`)
MODES = (("eval, no_grad", False, False), ("eval, grad enabled", False, True))


def traced_effects(model, args: tuple, kwargs: dict, marker: str = MARKER) -> dict:
    """Compile ``model`` (``torch.compile`` with a recording backend, AOTAutograd) and call it
    once on the example inputs in each of :data:`MODES`; an exception from the call (a failing
    check) ends that run. Returns ``{"runs": [{"mode", "graphs", "checks": [rec, ...],
    "error"}]}``, ``rec`` as the module docstring says. Dynamo's caches are reset before and
    after; the model's mode is restored. Raises nothing."""
    runs = []
    for mode, train, grad in MODES:
        records: list[dict] = []
        error = compiled_call(model, _recorder(records, marker), args, kwargs, train=train, grad=grad)
        runs.append({"mode": mode, "graphs": len(records), "checks": [r for r in records if r["check"]],
                     "error": error})
    return {"runs": runs}


def compiled_call(model, backend, args: tuple, kwargs: dict, *, train: bool = False, grad: bool = False) -> str | None:
    """Call ``torch.compile(model, backend=backend)`` once on the example inputs, in the mode and
    grad mode asked, quietly (stdout, warnings and logging held back), with Dynamo's caches reset
    before and after and the model's mode restored. Returns the call's error as text (the graphs
    traced before it stay recorded by the backend), else None. Raises nothing from the call."""
    import logging

    import torch

    was, error = model.training, None
    try:
        torch._dynamo.reset()
        model.train(train)
        with torch.set_grad_enabled(grad), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.CRITICAL)
            try:
                torch.compile(model, backend=backend)(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a failing call still leaves its graphs recorded
                error = f"{type(exc).__name__}: {str(exc)[:160]}"
            finally:
                logging.disable(logging.NOTSET)
    finally:
        torch._dynamo.reset()
        model.train(was)
    return error


def effects_in_check_graphs(traced: dict) -> tuple[list[str], list[str]]:
    """(problems, modes where a check graph was traced) from :func:`traced_effects`'s record.
    A problem is anything a failing check would lose or add against eager."""
    problems, seen = [], []
    for run in traced.get("runs") or []:
        for rec in run.get("checks") or []:
            seen.append(run["mode"])
            where = f"{run['mode']}: "
            problems += [where + f"the graph writes {e}, which existed before the call" for e in rec["existing"]]
            problems += [where + f"the graph draws random numbers ({r})" for r in rec["rng"]]
            problems += [where + f"the graph writes a tensor it was given ({w})" for w in rec["input_writes"]]
            if rec.get("hooks"):
                problems.append(where + f"the graph registers {rec['hooks']} tensor hook(s)")
            problems += [where + f"the graph sets torch's global state ({g})" for g in rec.get("global_state", [])]
            if not rec.get("complete"):
                problems.append(where + "AOTAutograd failed on the graph, so its tensor writes and random draws are "
                                f"not known ({run.get('error') or 'no error recorded'})")
    return problems, list(dict.fromkeys(seen))
