"""Facts for the encoders: what one run of the mended candidate shows where the rewrite runs.

The candidate runs once on the example input; :func:`trace_facts` reads the names the
obligations use in the frames of the mended file at the changed lines (dtypes, ranks,
sizes, devices, module types and their effect screens, Python constants), and, for
obligations that carry a ``line``, every observation at that line on every hit and call
(``watch``). For ``state-unchanged-on-raise`` the run also observes whether a forward
changes module state (buffers, Python attributes and the containers and objects they hold,
the globals of the modules that define the model's classes), in eval and in training mode
(:func:`observe_state`).

Entry points (``verifier`` imports nothing from ``mend``; mend passes what it builds):

* :func:`facts_in_process` ``(build_model, file, args, kwargs, obligations, before, code)
  -> (facts, defs)``: ``build_model()`` returns a fresh candidate model (mend loads the file);
* :func:`fact_request` ``(obligations, before, code) -> (request, defs)``: what an
  out-of-process run must observe (JSON-able);
* :func:`collect_facts` ``(model, args, kwargs, file, request) -> facts``: what that run
  (a worker process with the import overlay) calls.
"""
from __future__ import annotations

import ast
import inspect
import json
import math
import os
import sys
from typing import Any, Callable

from verifier.effects import dotted_name as _dotted

# obligation kinds whose encoders read an observation of module state (see observe_state)
OBSERVE_STATE_KINDS = frozenset({"state-unchanged-on-raise"})


def summarize(value: Any, depth: int = 0) -> dict:
    """A JSON-able description of a runtime value (no tensor contents)."""
    import types

    import torch

    if isinstance(value, torch.Tensor):
        out = {"kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape),
               "device": value.device.type, "param": isinstance(value, torch.nn.Parameter),
               "contiguous": value.is_contiguous()}   # strides: what `view` needs (verifier.shapes.need_contiguous)
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            # a subclass may override any operator (`__contains__`, `__eq__`): named, so a
            # check resting on torch's own methods can refuse it
            out["subclass"] = f"{type(value).__module__}.{type(value).__qualname__}"
        return out
    if isinstance(value, bool):
        return {"kind": "num", "cat": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "num", "cat": "int", "value": value}
    if isinstance(value, float):
        return {"kind": "num", "cat": "float", "value": value if math.isfinite(value) else repr(value)}
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value).replace("torch.", "")}
    if isinstance(value, torch.device):
        return {"kind": "device", "value": value.type}
    if isinstance(value, str):
        return {"kind": "str", "value": value[:200]}
    if value is None:
        return {"kind": "none"}
    if isinstance(value, (set, frozenset)) and all(isinstance(v, str) for v in value):
        return {"kind": "strset", "value": sorted(value)[:200]}  # e.g. a module's non-persistent buffer names
    if isinstance(value, types.ModuleType):
        return {"kind": "pymodule", "value": value.__name__}
    if isinstance(value, torch.nn.Module):
        from verifier.effects import module_writes

        # `pure`: no effect at all; `argument_writes`: Python-level writes into objects passed
        # to a forward (a KV cache), which only some obligations may accept (and say so)
        written: dict[str, set[str]] = {}
        effects, arguments, assumptions = module_writes(value, written)
        info = {"kind": "module", "type": type(value).__name__, "defined_in": type(value).__module__,
                "training": value.training,
                "pure": not effects and not arguments, "effects": (effects + arguments)[:5],
                "strict_effects": effects[:5], "argument_writes": arguments[:8], "assumptions": assumptions[:12],
                # the forward parameters those writes reach, by submodule name ("0" in a ModuleList)
                "argument_params": {k: sorted(v) for k, v in written.items()}}
        for attr in ("in_features", "out_features", "normalized_shape", "num_embeddings", "embedding_dim", "dim"):
            v = getattr(value, attr, None)
            if isinstance(v, (int, tuple)):
                info[attr] = list(v) if isinstance(v, tuple) else v
        w = getattr(value, "weight", None)
        if isinstance(w, torch.Tensor):
            info["weight"] = summarize(w)
        return info
    if callable(value):
        out = {"kind": "callable", "qualname": f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"}
        if inspect.isfunction(value):
            from verifier.effects import function_purity

            out["effects"], out["assumptions"] = function_purity(value)
        return out
    if isinstance(value, (tuple, list)) and depth < 1 and len(value) <= 8:
        return {"kind": "seq", "items": [summarize(v, depth + 1) for v in value]}
    return {"kind": "other", "type": type(value).__name__}




def names_in(exprs: list[str]) -> set[str]:
    """Dotted names read by ``exprs`` (``h``, ``self.proj``, ``self.config.x``, ``torch``)."""
    out: set[str] = set()
    for e in exprs:
        try:
            tree = ast.parse(e.strip(), mode="eval")
        except SyntaxError:
            continue
        funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            d = _dotted(node) if isinstance(node, (ast.Attribute, ast.Name)) else None
            if d:
                parts = d.split(".")
                # a called attribute is a method (`h.sum`), except `self.<attr>` (a submodule
                # or a function held in an attribute)
                upto = len(parts) - 1 if id(node) in funcs and len(parts) > 1 and not (
                    parts[0] == "self" and len(parts) == 2) else len(parts)
                for i in range(1, upto + 1):
                    out.add(".".join(parts[:i]))
    return out


def lookup(frame, dotted: str):
    head, *rest = dotted.split(".")
    if head in frame.f_locals:
        value = frame.f_locals[head]
    elif head in frame.f_globals:
        value = frame.f_globals[head]
    else:
        import builtins

        if not hasattr(builtins, head):
            raise KeyError(dotted)
        value = getattr(builtins, head)
    for attr in rest:
        value = getattr(value, attr)  # attribute reads only (properties of modules/configs)
    return value


def fact_key(summary: dict) -> str:
    """What observations of one name must agree on: kind, dtype, rank and device of a
    tensor; category of a number; the summary itself otherwise (sizes and values may vary)."""
    k = summary.get("kind")
    if k == "tensor":
        return json.dumps(["tensor", summary.get("dtype"), len(summary.get("shape", [])), summary.get("device")])
    if k == "num":
        return json.dumps(["num", summary.get("cat")])
    if k == "seq":
        return json.dumps(["seq", [fact_key(i) for i in summary.get("items", [])]])
    if k == "module":
        return json.dumps({**summary, "weight": fact_key(summary["weight"]) if "weight" in summary else None},
                          sort_keys=True, default=str)
    return json.dumps({a: b for a, b in summary.items() if a != "value" or k in ("dtype", "device", "pymodule")},
                      sort_keys=True, default=str)


def trace_facts(run: Callable[[], Any], file: str, lines: list[int], names: set[str],
                watch: dict[int, list[str]] | None = None, costs: dict | None = None) -> dict:
    """Run ``run()`` once, reading ``names`` in the frames of ``file`` at each of ``lines``
    (before the line executes). Later lines override earlier ones; the first call of the
    function wins. Returns ``{"names": {dotted: summary}, "hits": n, "self": {attr: module summary}}``.

    ``watch`` (``line -> dotted names``): besides, every observation of those names at that
    line, in every frame and on every hit, goes to ``"at": {line: {name: [summary per
    distinct fact_key]}}`` (a name that cannot be read there: ``{"kind": "unavailable"}``)
    with ``"at_hits": {line: n}`` and each tensor's distinct shapes in ``"at_shapes": {line: {name:
    [shape, ...]}}`` (a loop's iterations must agree on sizes too); nothing overrides anything there.

    ``costs`` (``{"pred": expr, "sides": [[expr, ...], [expr, ...]]}``): at the first of
    ``lines`` (first call) where every expression's names are bound, each is counted on
    fake tensors (:func:`verifier.opcount.count_expr`) into ``"costs": {"pred": counts,
    "sides": [counts, counts]}`` (a side's expressions summed); an observation, nothing
    proved."""
    target = os.path.realpath(file)
    wanted = set(lines)
    facts: dict = {"names": {}, "hits": 0, "self": {}}
    first: list = []
    watch = {int(k): list(v) for k, v in (watch or {}).items()}
    if watch:
        facts["at"], facts["at_hits"], facts["at_shapes"] = {}, {}, {}

    def observe(frame, ln):
        key = str(ln)
        facts["at_hits"][key] = facts["at_hits"].get(key, 0) + 1
        rec = facts["at"].setdefault(key, {})
        for name in watch[ln]:
            try:
                s = summarize(lookup(frame, name))
            except Exception:  # noqa: BLE001 - not defined here
                s = {"kind": "unavailable"}
            seen = rec.setdefault(name, [])
            if fact_key(s) not in {fact_key(o) for o in seen} and len(seen) < 16:
                seen.append(s)
            shapes = facts["at_shapes"].setdefault(key, {}).setdefault(name, [])
            if s.get("kind") == "tensor" and s.get("shape") not in shapes and len(shapes) < 16:
                shapes.append(s.get("shape"))   # the sizes too (fact_key keeps ranks): a loop's iterations

    def local(frame, event, arg):
        if event == "line" and watch and frame.f_lineno in watch:
            observe(frame, frame.f_lineno)
        if event == "line" and frame.f_lineno in wanted:
            if first and first[0] is not frame:
                return local
            if not first:
                first.append(frame)
            facts["hits"] += 1
            if costs and "costs" not in facts:
                observed = observe_costs(frame, costs)
                if observed is not None:
                    facts["costs"] = observed
            for name in names:
                try:
                    facts["names"][name] = summarize(lookup(frame, name))
                except Exception:  # noqa: BLE001 - not defined here
                    continue
            me = frame.f_locals.get("self")
            import torch

            if isinstance(me, torch.nn.Module) and not facts["self"]:
                for attr, sub in me.named_children():
                    facts["self"][attr] = summarize(sub)
        return local

    same: dict[str, bool] = {}

    def glob(frame, event, arg):
        name = frame.f_code.co_filename
        hit = same.get(name)
        if hit is None:
            hit = same[name] = os.path.realpath(name) == target
        return local if hit and event == "call" else None

    old = sys.gettrace()
    sys.settrace(glob)
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the facts before the failure still count
        facts["raised"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        sys.settrace(old)
    return facts


def observe_costs(frame, costs: dict) -> dict | None:
    """The counts of ``costs``' expressions in ``frame``, or None while a name they read
    is not bound yet (a setup temporary assigned on a later changed line).

    The expressions are the site's own code, run on fake tensors, and code can write
    anything it reaches: a lazy property, an ``lru_cache`` of a helper, a submodule's
    attribute, a list of inputs (adversarial review, tests/test_cost_adversarial.py). So
    the counting runs in a forked child process that reports its JSON through a pipe and
    exits: whatever it wrote dies with it, and the facts run, the differential test and the
    example inputs see the state as it was. An error in the child is reported as
    ``{"error": ...}``, never raised into the traced forward. Where ``os.fork`` does not
    exist, nothing is counted."""
    exprs = [costs["pred"], *[e for side in costs["sides"] for e in side]]
    for expr in exprs:
        for name in names_in([expr]):
            head = name.split(".")[0]
            if head not in frame.f_locals and head not in frame.f_globals and head not in frame.f_builtins:
                return None
    if not hasattr(os, "fork"):
        return {"error": "not counted: this platform has no os.fork to isolate the counting run"}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: count, report, exit without running any cleanup of the parent's
        try:
            os.close(read)
            try:
                doc = _count_parts(frame, costs)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                doc = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            with os.fdopen(write, "w") as fh:
                fh.write(json.dumps(doc, default=str))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    try:
        return json.loads(data)
    except ValueError:
        return {"error": "the counting process ended without a result"}


def _count_parts(frame, costs: dict) -> dict:
    from verifier.opcount import add_counts, count_expr

    g, loc = frame.f_globals, dict(frame.f_locals)
    return {"pred": count_expr(costs["pred"], g, loc),
            "sides": [add_counts([count_expr(e, g, loc) for e in side]) for side in costs["sides"]]}


def changed_lines(before: str, after: str) -> list[int]:
    """1-based lines of ``after`` that are new or changed relative to ``before``."""
    import difflib

    out = []
    sm = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, _, _, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(j1 + 1, j2 + 1))
    return out


def obligation_exprs(obligations: list[dict]) -> list[str]:
    out = []
    for ob in obligations:
        for key in ("expr", "lhs", "rhs", "pred", "guard", "call", "raises_when", "asserts", "target", "threshold"):
            v = ob.get(key)
            if isinstance(v, str):
                out.append(v)
        for v in ob.get("values", []) if isinstance(ob.get("values"), list) else []:
            if isinstance(v, str):
                out.append(v)
    return out


def temp_defs(code: str, lines: list[int]) -> dict[str, str]:
    """``name -> expression`` for single-name assignments on ``lines`` of ``code`` (the
    setup temporaries a rewrite keeps before the selection)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    wanted = set(lines)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno in wanted and len(node.targets) == 1:
            t = node.targets[0]
            if isinstance(t, ast.Name):
                out[t.id] = ast.unparse(node.value)
            elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Call):
                for i, el in enumerate(t.elts):
                    if isinstance(el, (ast.Name, ast.Attribute)) and _dotted(el):
                        out[_dotted(el)] = f"({ast.unparse(node.value)})[{i}]"
    return out


# -- symbolic shapes and dtypes ---------------------------------------------------------------



def candidate_line(before: str | None, code: str | None, line: int) -> int:
    """Line ``line`` of ``before`` as a line of the candidate ``code``: the same statement where
    the rewrite kept it (compared without indentation: torch.cond's form re-indents the kept
    ``if`` under an ``else``), else shifted as the nearest kept line above it (a helper added
    at the top of the file moves every line below it)."""
    import difflib

    if not before or not code:
        return line
    a = [t.strip() for t in before.splitlines()]
    b = [t.strip() for t in code.splitlines()]
    shift = 0
    for i, j, n in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        if i + 1 > line:
            break
        if line <= i + n:
            return line - i + j
        shift = j - i
    return line + shift


def watched_lines(obligations: list[dict], before: str | None = None, code: str | None = None) -> dict[int, list[str]]:
    """``line -> names`` the tracer observes at that line only, on every hit and every call
    (:func:`trace_facts` ``watch``): for an obligation with a ``line`` and an ``expr``, the
    names of ``expr`` (and of its ``threshold``) where it runs; for each of its ``uses`` (``{"value", "line"}``), the
    names of the value where that use runs. A ``loop-facts-agree`` line is one of ``before``,
    watched where the candidate ``code`` has it (:func:`candidate_line`)."""
    out: dict[int, set] = {}
    for o in obligations:
        if isinstance(o.get("line"), int) and isinstance(o.get("expr"), str):
            line = candidate_line(before, code, o["line"]) if o.get("kind") == "loop-facts-agree" else o["line"]
            out.setdefault(line, set()).update(names_in([o["expr"]]))
            if isinstance(o.get("threshold"), str):   # a Python-number attribute compared there
                out[line].update(names_in([o["threshold"]]))
        for u in o.get("uses") or [] if isinstance(o.get("uses"), list) else []:
            if isinstance(u, dict) and isinstance(u.get("line"), int) and isinstance(u.get("value"), str):
                out.setdefault(u["line"], set()).update(names_in([u["value"]]))
    return {k: sorted(v) for k, v in sorted(out.items())}


# -- module state: does a forward change it? ---------------------------------------------------

_SIMPLE = (int, float, bool, str, type(None))


def _shallow(value: Any, depth: int = 1) -> Any:
    """What :func:`state_snapshot` compares for a value: a number or string itself; a
    container's type, length and the identity of its items (a dict's keys too, a set's as a
    set), so that an append or a rebound item shows; a plain object's attributes, one level
    deep. None for what is not watched (modules, tensors, callables and classes: watched
    elsewhere or not state). Identities may be reused after an object is freed: an
    observation, not a proof."""
    import torch

    if isinstance(value, _SIMPLE):
        return value
    if isinstance(value, dict):
        return ("dict", tuple((k if isinstance(k, _SIMPLE) else id(k), id(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(map(id, value)))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(map(id, value)))
    if depth and not isinstance(value, (torch.nn.Module, torch.Tensor, type)) and not callable(value) \
            and hasattr(value, "__dict__") and not inspect.ismodule(value):
        return ("object", id(value), tuple(sorted((k, _shallow(v, depth - 1)) for k, v in vars(value).items()
                                                  if isinstance(k, str))))
    return None


def _module_globals(model) -> dict:
    """The Python modules that define the model's submodule classes (torch's own excepted):
    their globals are state a forward may write (a registry list, a counter, a class
    attribute of a class defined there)."""
    mods = {}
    for _, sub in model.named_modules():
        name = type(sub).__module__
        if not name.startswith("torch.") and name in sys.modules:
            mods[name] = sys.modules[name]
    return mods


def state_snapshot(model) -> dict:
    """Plain Python attributes (numbers, strings, None), containers and plain objects held as
    attributes (:func:`_shallow`), and buffers of every submodule; the globals of the Python
    modules that define them, and the attributes of the classes defined there."""
    snap = {}
    for name, mod in model.named_modules():
        for key, value in vars(mod).items():
            seen = _shallow(value)
            if seen is not None:
                snap[(name, key)] = seen
        for key, buf in mod.named_buffers(recurse=False):
            snap[(name, "buffer:" + key)] = buf.detach().clone()
    for modname, module in _module_globals(model).items():
        for key, value in list(vars(module).items()):
            if key.startswith("__"):
                continue
            if isinstance(value, type) and value.__module__ == modname:
                for attr, v in list(vars(value).items()):
                    seen = _shallow(v, 0) if not attr.startswith("__") else None
                    if seen is not None:
                        snap[("global:" + modname, f"{key}.{attr}")] = seen
                continue
            seen = _shallow(value, 0)
            if seen is not None:
                snap[("global:" + modname, key)] = seen
    return snap


def _changed(before: dict, after: dict) -> list[str]:
    import torch

    out = [f"`{'.'.join(p for p in k if p) or k}` appeared or disappeared" for k in before.keys() ^ after.keys()]
    for k in before.keys() & after.keys():
        a, b = before[k], after[k]
        same = torch.equal(a, b) if isinstance(a, torch.Tensor) else (a is b or a == b)  # a NaN tensor: changed
        if not same:
            name, key = k
            if name.startswith("global:"):
                out.append(f"global `{name.removeprefix('global:')}.{key}`")
                continue
            what = key.removeprefix("buffer:")
            out.append(f"{'buffer' if key.startswith('buffer:') else 'attribute'} `{(name + '.' if name else '') + what}`")
    return sorted(out)


def _same_tensor(a, b) -> bool:
    """Equal shape, dtype and values, NaN equal to NaN."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    return torch.equal(a, b)


def observe_state(model, args: tuple, kwargs: dict) -> dict:
    """Run ``model`` on the example inputs in eval mode twice, then in training mode (no
    autograd, output, logs and warnings silenced; an exception ends that run) and record
    whether each forward changed module state (:func:`state_snapshot`: buffers, attributes,
    the defining modules' globals and class attributes; in eval mode also the CPU random number
    generator) or wrote an input in place: ``{"modes":
    ["eval", "train"], "changes": [...], "first_call": [...]}``. ``changes``: what the
    second eval call or the training call changed (``"eval: buffer `bn.running_mean`"``),
    and every input any call wrote in place (``"eval: input 0 written in place"``); ``first_call``: what only the
    first call changed (one-time initialization, e.g. transformers' output-capturing hooks
    installed lazily). Both empty when nothing changed. The model's mode is restored; call
    it on a model that has not run yet (a first call counts)."""
    import contextlib
    import io
    import logging
    import warnings

    import torch

    was = model.training
    changes: list[str] = []
    first: list[str] = []
    try:
        for i, phase in enumerate((False, False, True)):
            model.train(phase)
            before = state_snapshot(model)
            rng = torch.random.get_rng_state()
            # private copies of the inputs, watched too: a forward that writes an input in
            # place changes the caller's state as much as a buffer write does
            call_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
            call_kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
            watched = [(f"input {n}", t, t.clone()) for n, t in
                       list(enumerate(call_args)) + list(call_kwargs.items()) if isinstance(t, torch.Tensor)]
            with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                logging.disable(logging.CRITICAL)
                try:
                    model(*call_args, **call_kwargs)
                except Exception:  # noqa: BLE001 - a failing call still counts what it changed
                    pass
                finally:
                    logging.disable(logging.NOTSET)
            mode = "train" if phase else "eval"
            seen = [f"{mode}: {c}" for c in _changed(before, state_snapshot(model))]
            # a draw in eval mode (dropout draws only in training): with the graphs joined, a
            # draw whose result dies in the graph may be eliminated (measured under aot_eager)
            if not phase and not torch.equal(rng, torch.random.get_rng_state()):
                seen.append(f"{mode}: the CPU random number generator advanced")
            (first if i == 0 else changes).extend(seen)
            changes.extend(f"{mode}: {n} written in place" for n, t, old in watched if not _same_tensor(t, old))
    finally:
        model.train(was)
    return {"modes": ["eval", "train"], "changes": list(dict.fromkeys(changes))[:12], "first_call": first[:12]}


# -- entry points -----------------------------------------------------------------------------


def fact_request(obligations: list[dict], before: str, code: str, costs: dict | None = None) -> tuple[dict, dict]:
    """What a run of the candidate ``code`` must observe for ``obligations`` (JSON-able:
    ``{"lines", "names", "watch", "state", "costs"}``; ``costs``: the branch parts whose
    operators to count, see :func:`trace_facts`) and the setup temporaries ``defs`` the
    encoders expand (``name -> expression``)."""
    lines = changed_lines(before, code)
    defs = temp_defs(code, lines)
    names = names_in(obligation_exprs(obligations) + list(defs.values()))
    request = {"lines": lines, "names": sorted(names), "costs": costs,
               "watch": {str(k): v for k, v in watched_lines(obligations, before, code).items()},
               "state": any(o.get("kind") in OBSERVE_STATE_KINDS for o in obligations),
               "traced": any(o.get("fresh") for o in obligations),
               "replay": sorted({(o["function"], o.get("line") or 0, o.get("mechanism", "replay"), o.get("first") or 0,
                                  o.get("last") or 0, bool(o.get("loop"))) for o in obligations
                                 if o.get("kind") == "replayed-on-exception" and o.get("function")})}
    return request, defs


def collect_facts(model, args: tuple, kwargs: dict, file: str, request: dict) -> dict:
    """Facts of one example run of ``model`` (the candidate, loaded from ``file``) as
    ``request`` (:func:`fact_request`) asks: the state observation first when asked (it
    sees the model's first call), then the traced run in eval mode under ``no_grad``, then, when
    asked (``traced``), Dynamo's record of the graphs it compiles (:mod:`verifier.traced_effects`), and,
    asked (``replay``), the operators that can raise after a deferred call (:mod:`verifier.replay_raisers`)."""
    import contextlib
    import io
    import warnings

    import torch

    state = observe_state(model, args, kwargs) if request.get("state") else None
    was = model.training
    model.eval()

    def run():
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(*args, **kwargs)
    try:
        facts = trace_facts(run, file, list(request.get("lines") or []), set(request.get("names") or []),
                            watch=request.get("watch") or None, costs=request.get("costs"))
    finally:
        model.train(was)
    if state is not None:
        facts["state"] = state
    if request.get("traced"):
        from verifier.traced_effects import traced_effects
        facts["traced"] = traced_effects(model, args, kwargs)
    if request.get("replay"):   # the deferred calls' graphs: operators that can raise after them
        from verifier.replay_raisers import replay_raisers
        facts["replay"] = replay_raisers(model, args, kwargs, [
            {"file": file, "function": f, "line": ln, "mechanism": m, "first": first, "last": last, "loop": loop}
            for f, ln, m, first, last, loop in request["replay"]])
    facts["model_devices"] = model_devices(model, args, kwargs)
    return facts


def model_devices(model, args: tuple, kwargs: dict) -> list[str]:
    """The devices of the model's parameters and buffers and of its tensor inputs (sorted)."""
    import torch

    tensors = list(model.parameters()) + list(model.buffers())
    tensors += [v for v in list(args) + list(kwargs.values()) if isinstance(v, torch.Tensor)]
    return sorted({str(t.device.type) for t in tensors})


def facts_in_process(build_model: Callable[[], Any], file: str, args: tuple, kwargs: dict,
                     obligations: list[dict], before: str, code: str, costs: dict | None = None) -> tuple[dict, dict]:
    """Facts for a candidate built in this process: ``build_model()`` gives a fresh model
    of the candidate ``code`` (loaded from ``file``). The state observation, when an
    obligation needs it, gets its own fresh model, so its first call is observed."""
    request, defs = fact_request(obligations, before, code, costs)
    state = observe_state(build_model(), args, kwargs) if request["state"] else None
    facts = collect_facts(build_model(), args, kwargs, file, {**request, "state": False})
    if state is not None:
        facts["state"] = state
    return facts, defs
