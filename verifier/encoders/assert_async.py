"""Encoders for a tensor-guarded raise moved into the graph as ``torch._assert_async``
(the exception restored at the call boundary from the mended file's trap table).

Solver encoders: ``raises-iff-original`` (the raise condition's Python truth against the
assert's, IEEE/bit-vector values; exception type and message as strings) and
``condition-is-tensor``. Checks: ``same-result-when-passing`` (the op's schema writes
nothing), ``first-failure-wins`` (one check in the file), ``restore-at-boundary`` (the
trap table entry; the lemma ``proofs/pv_assert_async.smt2``), ``state-unchanged-on-raise``
(the forward changes no module state, observed in eval and train mode, and submodules are
pure by the effect analysis) and ``cpu-only`` (devices observed at the check).
"""
from __future__ import annotations

import ast
import json

import z3

from verifier.effects import dotted_name as _dotted
from verifier.effects import op_writes
from verifier.encoders.base import Ctx, decide, fp_arith, shape_tiers, value_tiers
from verifier.module_shapes import numel
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.shapes import ShapeEval, _expr
from verifier.smt import Unsupported
from verifier.traced_effects import MODES, effects_in_check_graphs
from verifier.values import ValueEval

STATE_CHANGES = ("state-unchanged-on-raise cannot be shown: the model's forward changes state (a buffer, a Python "
                 "attribute or what it holds, a global of the model's modules, the random number generator), and "
                 "a check moved into the compiled graph could let that update happen, or not happen, differently "
                 "from eager on a failing call")


def _msg(ob: dict) -> str:
    m = ob.get("message")
    return m if isinstance(m, str) else json.dumps(ob.get("args"))


def trap_entry(code: str, trap: str) -> tuple[str, str] | None:
    """(exception name, message) of ``_MEND_TRAPS.<key>`` in the mended file."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    return _entry(_trap_exception(tree, trap))


def _entry(body: ast.AST | None) -> tuple[str, str] | None:
    """(exception name, message) of a trap table's exception expression: ``E(msg, ...)`` with
    literal arguments gives ``str(E(...))`` as ``BaseException.__str__`` makes it (the one
    argument's ``str``, else the tuple's), a bare class ``E`` (``raise E``) ``str(E())``, ""."""
    if isinstance(body, (ast.Name, ast.Attribute)):   # `raise E` instantiates E()
        return (_dotted(body) or "").rsplit(".", 1)[-1], ""
    if not isinstance(body, ast.Call):
        return None
    name = (_dotted(body.func) or "").rsplit(".", 1)[-1]
    args = body.args
    if body.keywords or not all(isinstance(a, ast.Constant) for a in args):
        return name, ast.unparse(body)
    values = tuple(a.value for a in args)
    return name, "" if not values else str(values[0]) if len(values) == 1 else str(values)


def _item_semantics(ob: dict, ev: ValueEval):
    """For a condition whose ``T.item()`` reads were removed: the mended check's truth when the
    compiled code compares ``T`` with the Python number exactly (inductor keeps an unspecialised
    float in double; measured), next to eager's (the number rounded to ``T``'s dtype). Both must
    give the original's truth. The compared values must be Python numbers, and several ``T`` must
    share one dtype (the promotion of two tensors of different dtypes and dims is not modelled)."""
    dts = set()
    for src in ob["items"]:
        v = ev.eval(_expr(src))
        if v.dtype.startswith("py"):
            raise Unsupported(f"`{src}` is a Python number where the rewrite reads a tensor through `.item()`")
        dts.add(v.dtype)
    if len(dts) > 1:
        raise Unsupported(f"the tensors read through `.item()` have different dtypes ({', '.join(sorted(dts))}): "
                          "comparing them as tensors promotes one, which Python's comparison does not")
    for src in ob.get("numbers") or []:
        if not ev.eval(_expr(src)).dtype.startswith("py"):
            raise Unsupported(f"`{src}` is a tensor: only comparisons of `T.item()` with a Python number are modelled")
    ev.exact_sources = {ast.unparse(_expr(src)) for src in ob["items"]}   # as v_Compare spells them
    try:
        return ev.truth(ev.eval(_expr(ob["asserts"])))
    finally:
        ev.exact_sources = set()


def raises_iff(ob: dict, ctx: Ctx) -> Outcome:
    table = ob.get("restored")

    def build(ev: ValueEval, finite: bool):
        orig = ev.truth(ev.eval(_expr(ob["raises_when"])))
        holds = ev.truth(ev.eval(_expr(ob["asserts"])))
        mended = z3.Not(holds)           # _assert_async(t) raises iff not truth(t)
        differs = [orig != mended]
        if ob.get("items"):              # `.item()` removed: see _item_semantics
            differs.append(orig != z3.Not(_item_semantics(ob, ev)))
        exc_o, msg_o = z3.String("original.type"), z3.String("original.message")
        exc_t, msg_t = z3.String("restored.type"), z3.String("restored.message")
        claim = [exc_o == z3.StringVal(ob.get("exception", "")), msg_o == z3.StringVal(_msg(ob)),
                 exc_t == z3.StringVal(table[0] if table else ""), msg_t == z3.StringVal(table[1] if table else ""),
                 z3.Or(*differs, exc_o != exc_t, msg_o != msg_t)]
        return claim, table
    if table is None:
        return unknown(f"the trap entry {ob.get('trap')} is not in the mended file")
    return decide("raises-iff-original", value_tiers(ctx, build)[:1], ctx,
                  fp_arith(ctx) + "; integers as bit-vectors; reductions as uninterpreted values shared by both "
                  "conditions; exception type and message as strings from the raise and the mended trap table",
                  fixed_by="the value model gives the raise condition and the negated assert the same truth term, "
                           "and the trap entry has the raise's exception type and message")


def condition_is_tensor(ob: dict, ctx: Ctx) -> Outcome:
    asserts = ob.get("asserts")
    if not asserts:
        return unknown("no asserted condition recorded")

    def build(ev: ShapeEval):
        p = ev.eval(_expr(asserts))
        if p.kind != "tensor":
            return z3.BoolVal(True), p
        return numel(p.shape) != 1, p
    return decide("condition-is-tensor", shape_tiers(ctx, build), ctx, "nonlinear integer arithmetic (numel)",
                  fixed_by="the shape transfer functions give the asserted condition one element for every size")


def same_result_when_passing(ob: dict, ctx: Ctx) -> Outcome:
    writes = op_writes("aten::_assert_async")
    by = "the effect analysis: aten::_assert_async's schemas (torch._C._jit_get_schemas_for_operator)"
    if writes:
        return check_refuted(by, f"aten::_assert_async writes {', '.join(writes)}")
    return checked(by + " annotate no argument as written (a!): the rest of the forward sees the same values",
                   ["aten::_assert_async writes no argument (schema: no (a!) annotation)"])


def assert_async_references(code: str) -> int:
    """How many times the code (not its strings or comments: a docstring quoting
    ``torch._assert_async(...)`` is no check) names ``_assert_async``: every call, and every
    alias made of it, so a count of one means one check. Unparsable code counts the text."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code.count("_assert_async")
    return sum(1 for node in ast.walk(tree) if (isinstance(node, ast.Attribute) and node.attr == "_assert_async")
               or (isinstance(node, ast.Name) and node.id == "_assert_async")
               or (isinstance(node, ast.alias) and node.name == "_assert_async"))


def first_failure(ob: dict, ctx: Ctx) -> Outcome:
    n = ob.get("checks_in_file")
    same = _one_exception(ctx.code, n) if n and n > 1 and ctx.code else None
    if same is not None:   # a split `assert A and B`: every check restores the same exception
        return checked("the static screen of the mended file: its trap table has one entry per check and every "
                       f"entry is `{same}`, so whichever check fails first, the same exception is restored",
                       [f"{n} torch._assert_async calls in the mended file, each with its own trap entry"])
    if n != 1 and not ctx.code:
        return unknown(f"{n} checks and no mended file to read their trap entries from")
    if n != 1:   # inductor ran a later check first (helper-91's F4: two failing asserts of one graph)
        return check_refuted("the static count of torch._assert_async calls and the trap table of the mended file",
                             f"{n} checks in the mended file raise different exceptions, and inductor may run two "
                             "checks of one graph in either order (measured: the second check's exception was "
                             "raised where the original raised the first's), so the exception raised may change")
    return checked("the static count of torch._assert_async calls in the mended file: one check, so the first "
                   "failure is the only one", ["one torch._assert_async in the mended file"])


def _one_exception(code: str, checks: int) -> str | None:
    """The exception every trap entry of ``code`` makes, when there are ``checks`` entries and
    they are all the same expression; else None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    bodies = [v.body for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
              and any(isinstance(t, ast.Name) and t.id.startswith("_MEND_TRAPS") for t in node.targets)
              for v in node.value.values if isinstance(v, ast.Lambda)]
    if len(bodies) != checks or len({ast.dump(b) for b in bodies}) != 1:
        return None
    return ast.unparse(bodies[0])


def restore_at_boundary(ob: dict, ctx: Ctx) -> Outcome:
    entry, trap = ob.get("restored"), ob.get("trap")
    if not entry:
        return unknown("the trap table entry is not in the mended file")
    return checked(f"the static screen of the mended file: its trap table maps {trap} to {entry[0]}({entry[1]!r})",
                   [f"the caller calls the module mend.validation_runtime.install was applied to (marker {trap})",
                    "the code after the check traces for every input that fails it: a shape error there (a reshape "
                    "that only valid inputs satisfy) surfaces while Dynamo traces, as TorchRuntimeError, before the "
                    "check runs (measured, tests/test_argument_writes.py; not screened)"],
                   ["proofs/pv_assert_async.smt2"])


def state_unchanged(ob: dict, ctx: Ctx) -> Outcome:
    facts = ctx.facts or {}
    state = facts.get("state")
    if not isinstance(state, dict):
        return unknown("the forward's effect on module state was not observed (no facts run in eval and train mode)")
    if state.get("changes"):
        return unknown(STATE_CHANGES + " (observed: " + "; ".join(state["changes"][:3]) + ")")
    mods = facts.get("self", {})
    impure = [f"self.{k}: {'; '.join(v.get('effects') or ['no effect model'])[:200]}" for k, v in mods.items()
              if v.get("kind") == "module" and not v.get("pure")]
    if impure and ob.get("fresh"):
        refused = _writes_into_fresh(mods, ob["fresh"])
        if refused:
            return unknown("submodules that may write state run in the same function: " + " | ".join(refused[:3]))
        if state.get("first_call"):
            return unknown(f"the submodules write only into `{ob['fresh'].get('name')}`, made in this call, but the "
                           "first call initializes module state once (" + "; ".join(state["first_call"][:3]) + "): a "
                           "failing first call compiled may leave that initialization different from eager")
        return _fresh_traced(ob["fresh"], facts, state)
    if impure:
        # writes into an object passed to a submodule (a KV cache) stay an effect here: Dynamo
        # replays Python-level writes after the graph, so a failing check undoes those made
        # after it, but also those made before it by anything in the same graph (a list
        # attribute, a hook, a decorator, a caller), and the object's own `update()` may write a
        # tensor in place (StaticCache), which inductor runs before the failed assert surfaces
        # (adversarial review, tests/test_argument_writes.py)
        passed = any(v.get("argument_writes") and not v.get("strict_effects") for v in mods.values()
                     if v.get("kind") == "module" and not v.get("pure"))
        return unknown("submodules that may write state run in the same function: " + " | ".join(impure[:3]) + (
            " -- writes into an object passed to a submodule (a KV cache) are not accepted: what else in the "
            "graph writes it before the check, and whether its update writes a tensor in place, is not "
            "established" if passed else ""))
    screened = sorted({a for v in mods.values() for a in v.get("assumptions", [])})
    modes = " and ".join(state.get("modes") or ["eval", "train"])
    first = state.get("first_call") or []
    # one-time initialization on the first call (lazily installed hooks): later calls change
    # nothing, but a failing first call compiled may leave it done or undone differently
    once = ([f"the first call changes module state once ({'; '.join(first[:3])}); later calls change none: with "
             "the check in the graph, a failing first call may leave that initialization different from eager"]
            if first else [])
    return checked(f"the observation of the example run in {modes} mode (no buffer or Python attribute of any "
                   "module changed" + (" after the first call" if first else "") + ") and the effect analysis of "
                   "the submodules (verifier/effects.py)",
                   ["the function writes no state after the check (the rule's screen)",
                    f"the forward changed no module state on the example run, in {modes} mode (observed)"
                    + (", after a first call that initialized state once" if first else "")] + once + [
                    "its submodules write no state: torch.nn modules by type and mode, others by screening "
                    "their forward (verifier/effects.py): " + (", ".join(sorted(mods)) or "none"),
                    "code compiled into the same graph (callers, sibling modules, helpers and methods of the "
                    "objects passed in, forward hooks registered from outside the file) writes no state before "
                    "this check (Dynamo drops such Python writes when the graph raises: a hook appending each "
                    "output to a list loses the failing call's, helper-54; aot_eager applies tensor writes after "
                    "the graph) and no tensor in place after it (inductor may run it before the failed assert "
                    "surfaces); not screened"] + screened[:10])


def _fresh_traced(fresh: dict, facts: dict, state: dict) -> Outcome:
    """The submodules write only into ``fresh['name']``, made in this call: accepted when
    Dynamo's record of every graph that holds the check (eval mode, with and without grad; the
    rewrite keeps the original check in training) shows no write to an object that existed
    before the call, no random draw and no tensor written in place (verifier/traced_effects.py).
    That covers what the object's constructor, the writers and anything else compiled into
    the graph do on the traced path; a second adversarial review's counterexamples (a
    constructor registering the object in a global, a deque, a caller's list, a closure or a
    class attribute, only with grad enabled; ``__new__`` returning a shared object) all show up
    there (tests/test_fresh_guard.py)."""
    made, name = str(fresh.get("made", "?"))[:60], fresh.get("name")
    traced = facts.get("traced")
    if not isinstance(traced, dict):
        return unknown(f"the submodules write only into `{name}`, made in this call by `{made}`, but what the graph "
                       "holding the check writes was not traced (no Dynamo record in the facts)")
    problems, modes = effects_in_check_graphs(traced)
    if problems:
        return unknown(f"the submodules write only into `{name}`, made in this call, but Dynamo's record of the graph "
                       "holding the check shows effects a failing check would drop or add: " + "; ".join(problems[:3]))
    if any(mode not in modes for mode, _train, _grad in MODES):
        errors = "; ".join(f"{r['mode']}: {r['error']}" for r in traced.get("runs") or [] if r.get("error"))
        return unknown(f"the check was not found in a compiled graph in eval mode with and without grad (traced: "
                       f"{', '.join(modes) or 'none'}{'; ' + errors if errors else ''}): its effects are not shown")
    modes_seen = " and ".join(state.get("modes") or ["eval", "train"])
    return checked(f"Dynamo's record of the graph holding the check ({'; '.join(modes)}; verifier/traced_effects.py), "
                   f"the observation of the example run in {modes_seen} mode and the static screen of the "
                   "submodules' writes (fresh.py; verifier/effects.py)",
                   [f"the submodules write only into `{name}`, made in this call by `{made}` (static screen)",
                    "the graph holding the check writes no Python object that existed before the call, draws no "
                    "random number, writes no tensor it was given, registers no tensor hook and sets no global "
                    "grad/autocast mode, on the traced path (" + "; ".join(modes)
                    + "; observed through Dynamo's side-effect record, a private API, torch 2.13)",
                    "inputs that Dynamo compiles to other guards (another Python path through the constructor or "
                    "the writers: other shapes, other objects passed in, other flags) were not traced",
                    "code that the traced model does not contain but a user compiles into the same graph (a parent "
                    "module calling it, hooks registered later) writes no existing object before the check; not "
                    "traced",
                    "in training the original check is kept (the guard reads `self.training`)"])


_LISTS = ("ModuleList", "ModuleDict")


def _writes_into_fresh(mods: dict, fresh: dict) -> list[str]:
    """Why not, if anything: whether the submodules' writes all go into the object the
    mended function makes in this call (``fresh``: the rule's static screen -- ``name`` made
    by ``made`` when the caller passed None, the check in the graph only then, and for each
    ``self.<attr>`` the keywords that receive it at every call). Such an object is reachable
    from nothing outside the call before the check, and a failing check discards it with the
    frame, so what its writes do on a failing call is unobservable. Each writing submodule must
    have no other effect, and every forward parameter its writes reach (the effect analysis,
    ``argument_params``) must be one of those keywords; only the called module itself, or the
    elements of a ModuleList/ModuleDict it indexes, bind those keywords."""
    name, keywords = fresh["name"], fresh.get("keywords") or {}
    refused = []
    for k, v in mods.items():
        if v.get("kind") != "module" or v.get("pure"):
            continue
        if v.get("strict_effects"):
            refused.append(f"self.{k}: {'; '.join(v['strict_effects'])[:200]}")
            continue
        given = set(keywords.get(k, []))
        for where, params in (v.get("argument_params") or {}).items():
            bound_here = where == "" or (v.get("type") in _LISTS and "." not in where)
            if not bound_here:
                refused.append(f"self.{k}: {where} ({v.get('type')}) writes into its parameter(s) "
                               f"{', '.join(params)}, which its parent module passes, not this function")
            elif not set(params) <= given:
                missing = ", ".join(f"`{p}`" for p in sorted(set(params) - given))
                refused.append(f"self.{k}: writes into the object it gets as {missing}, which not every call of "
                               f"`self.{k}` gives the `{name}` made in this call (keyword arguments read: "
                               f"{', '.join(sorted(given)) or 'none'})")
        if not v.get("argument_params"):
            refused.append(f"self.{k}: {'; '.join(v.get('effects') or ['no effect model'])[:200]} (which parameters "
                           "its writes reach was not recorded)")
    return refused


def cpu_only(ob: dict, ctx: Ctx) -> Outcome:
    devs = sorted({f.get("device") for f in ctx.facts.get("names", {}).values() if f.get("kind") == "tensor"}) \
        if ctx.facts else []
    by = "the observation on the example run: the devices of the tensors at the check"
    assumptions = [f"tensors at the check are on {', '.join(devs)} (observed)"]
    if not devs and ctx.facts and ctx.facts.get("model_devices"):
        # the check's line did not run eagerly (it runs only while tracing): what was seen is
        # the model's own tensors, and the check is assumed to see tensors on their devices
        devs = list(ctx.facts["model_devices"])
        by = ("the observation on the example run: the devices of the model's parameters, buffers and inputs "
              "(the check itself did not run eagerly)")
        assumptions = [f"the model's parameters, buffers and inputs are on {', '.join(devs)} (observed)",
                       "the tensors at the check are on those devices (the forward moves nothing to another "
                       "device; not checked at the site)"]
    if not devs:
        return unknown("no tensor was observed at the check")
    if devs != ["cpu"]:
        return check_refuted(by, f"tensors at the check are on {', '.join(devs)}", assumptions)
    return checked(by + " (cpu)", assumptions)


# the dtypes with CPU kernels for logical_not, comparisons and isnan/isinf/isfinite (measured,
# torch 2.13; helper-85: uint16/32/64, float8 and complex32 have none, complex no ordering)
_CHECK_DTYPES = ("(torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, "
                 "torch.bfloat16, torch.float32, torch.float64)")


# the first clause of each guard: eager runs the original check (its exception exact without the
# restore, helper-102); compiled code asserts in the graph
_COMPILING = "torch.compiler.is_compiling() and "


def _guard_text(local: str, dtype: bool) -> str:
    return (f"type({local}) is torch.Tensor and {local}.numel() == 1 and {local}.device.type == 'cpu' and "
            f"{local}.layout == torch.strided and not {local}.is_quantized"
            + (f" and {local}.dtype in {_CHECK_DTYPES}" if dtype else ""))


def _guard_ok(test: ast.AST, local: str, dtype: bool = False) -> bool:
    """``type(L) is torch.Tensor and L.numel() == 1 and L.device.type == 'cpu' and L.layout ==
    torch.strided and not L.is_quantized``, exactly (helper-81: a sparse or quantized tensor passed
    the first three, and ``_assert_async`` raised NotImplementedError); with ``dtype``, ``and
    L.dtype in`` the dtypes the check's ops have kernels for (helper-85)."""
    return ast.dump(test) == ast.dump(ast.parse(_COMPILING + _guard_text(local, dtype), mode="eval").body)


def _function_of(tree: ast.Module, trap: str):
    """(function, bind, guard test) where the mended file checks ``trap`` under a runtime guard:
    the statement binding the local, then the ``if`` whose body calls ``_assert_async`` with the
    trap's marker; None when there is no such pair."""
    key = trap.rpartition(".")[2]
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for block in ast.walk(fn):
            body = getattr(block, "body", None)
            if not isinstance(body, list):
                continue
            for prev, stmt in zip(body, body[1:]):
                if isinstance(stmt, ast.If) and len(stmt.body) == 1 and key in ast.unparse(stmt.body[0]) \
                        and isinstance(prev, ast.Assign) and "_assert_async" in ast.unparse(stmt.body[0]):
                    return fn, prev, stmt
    return None


def guarded_check(ob: dict, ctx: Ctx) -> Outcome:
    """``guarded-check``: the mended check runs inside the graph only for a one-element plain CPU
    tensor, and the original check runs for anything else (a Python number, several elements, a
    subclass, another device: helper-50's counterexamples to the unguarded form). A static
    screen of the mended file, re-derived from it: the local bound to the condition right before
    the guard, the guard's exact text, the asserted truth, and a fallback raising the trap
    table's exception (or the original ``assert``)."""
    by = "the static screen of the mended file (the guarded form re-read from it)"
    local, trap, cond = ob.get("local"), ob.get("trap") or "", ob.get("condition")
    if not (local and cond and ctx.code):
        return unknown("the guarded local, the condition or the mended file is not recorded")
    try:
        tree = ast.parse(ctx.code)
        core = ast.parse(cond, mode="eval").body
        fails = ast.parse(ob.get("raises_when") or "", mode="eval").body
    except SyntaxError as exc:
        return unknown(f"could not parse: {exc}")
    found = _function_of(tree, trap)
    if found is None:
        return check_refuted(by, f"no `{local} = ...` followed by a guarded `_assert_async` with marker {trap}")
    fn, bind, test = found
    raise_if_true = bool(ob.get("raise_if_true", True))
    problems = []
    if not (len(bind.targets) == 1 and isinstance(bind.targets[0], ast.Name) and bind.targets[0].id == local
            and ast.dump(bind.value) == ast.dump(core)):
        problems.append(f"the statement before the guard does not bind `{local}` to `{cond}`")
    if ast.dump(fails) != ast.dump(core if raise_if_true else ast.UnaryOp(ast.Not(), core)):
        problems.append(f"the bound condition `{cond}` is not what the original check raised on "
                        f"(`{ob.get('raises_when')}`)")
    if not _guard_ok(test.test, local, dtype=raise_if_true):   # logical_not needs a kernel for the dtype
        problems.append(f"the guard is not `{_COMPILING}{_guard_text(local, raise_if_true)}`")
    call = test.body[0].value if isinstance(test.body[0], ast.Expr) else None
    holds = ast.parse(f"torch.logical_not({local})" if raise_if_true else local, mode="eval").body
    if not (isinstance(call, ast.Call) and _dotted(call.func) == "torch._assert_async" and call.args
            and ast.dump(call.args[0]) == ast.dump(holds)):
        problems.append(f"the guarded call does not assert `{ast.unparse(holds)}`")
    failing = ast.parse(local if raise_if_true else f"not {local}", mode="eval").body
    # `elif L: raise E(msg)`, or `else: assert not L, msg` (an operand of `assert A and B`: `assert L`)
    asserted = ast.UnaryOp(ast.Not(), ast.Name(local, ast.Load())) if raise_if_true else ast.Name(local, ast.Load())
    why = _fallback_problem(test, tree, trap, None, failing, asserted)
    if why:
        problems.append(why)
    uses = sum(1 for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == local)
    want_uses = 8 + raise_if_true   # bound once, five (six) times in the guard, once asserted, once in the fallback
    if uses != want_uses:
        problems.append(f"`{local}` is named {uses} times in the function, not only by the guarded form "
                        f"({want_uses})")
    if problems:
        return check_refuted(by, "; ".join(problems))
    return checked(by + f": `{local} = {cond}`, then the check inside the graph only under "
                   f"`{ast.unparse(test.test)}`, the original check otherwise",
                   ["Dynamo decides the guard at trace time (type, element count and device are guarded), so "
                    "it adds no break (measured on torch 2.13; the pipeline's graph count)"])


def _fallback_problem(guard: ast.If, tree: ast.Module, trap: str, form: str | None, failing: ast.AST,
                      asserted: ast.AST) -> str | None:
    """Why the guard's fallback is not the original check, else None: ``elif failing: raise`` the
    trap table's exception (an if/raise), or ``else: assert asserted, msg`` with the table's
    AssertionError message (an assert); ``form`` None admits either."""
    restored = _trap_exception(tree, trap)
    orelse = guard.orelse[0] if len(guard.orelse) == 1 else None
    if isinstance(orelse, ast.If) and form != "assert":
        exc = orelse.body[0].exc if len(orelse.body) == 1 and isinstance(orelse.body[0], ast.Raise) else None
        if not (ast.dump(orelse.test) == ast.dump(failing) and not orelse.orelse and exc is not None
                and restored is not None and ast.dump(exc) == ast.dump(restored)):
            return f"the fallback is not `elif {ast.unparse(failing)}: raise` the trap table's exception"
        return None
    if isinstance(orelse, ast.Assert) and form != "if-raise":
        entry = _entry(restored)
        msg = "" if orelse.msg is None else ast.literal_eval(orelse.msg) if isinstance(orelse.msg, ast.Constant) \
            else None
        if not (ast.dump(orelse.test) == ast.dump(asserted) and entry is not None
                and entry[0] == "AssertionError" and msg == entry[1]):
            return f"the fallback is not `assert {ast.unparse(asserted)}` with the trap table's message"
        return None
    if form == "assert":
        return f"the fallback is not `assert {ast.unparse(asserted)}` with the trap table's message"
    if form == "if-raise":
        return f"the fallback is not `elif {ast.unparse(failing)}: raise` the trap table's exception"
    return "the guard has no fallback running the original check"


# the dtypes whose values int64 (floats: float64) holds exactly, so the widened comparison is Python's,
# and which inductor computes in their own dtype when it fuses T's ops with the check (float16,
# bfloat16, int8 and int16 were computed wider, their rounding or wrap-around skipped: helper-91)
_INT_DTYPES = "(torch.bool, torch.int64)"
_FLOAT_DTYPES = "(torch.float32, torch.float64)"
_ITEM_DTYPES = "(torch.bool, torch.int64, torch.float32, torch.float64)"
_WIDE = "torch.float64 if {lo}.is_floating_point() else torch.int64"   # the widening cast's dtype, for local lo


def _exact_text(locs: list[str], nums: list[str], casts: set) -> str:
    """The guard's clause under which the widened comparison is Python's: every local an integer
    dtype and every number an int in int64, or every local a float dtype and every number a float
    or an int of at most 2**53; a literal number's own clause decided statically (left out where
    it holds, its whole branch where it fails). ``int(T.item())`` in the test keeps only the
    integer branch (int() truncates a float, raises on NaN), ``float(T.item())`` only the float one."""
    def lit(n):
        try:
            v = ast.literal_eval(n)
        except (ValueError, SyntaxError):
            return None
        return v if type(v) in (int, float) else None
    ints = [f"{lo}.dtype in {_INT_DTYPES}" for lo in locs]
    floats = [f"{lo}.dtype in {_FLOAT_DTYPES}" for lo in locs]
    int_ok, float_ok = "float" not in casts, "int" not in casts
    for n in nums:
        v = lit(n)
        if v is None:
            ints.append(f"type({n}) is int and -2**63 <= {n} < 2**63")
            floats.append(f"(type({n}) is float or (type({n}) is int and -2**53 <= {n} <= 2**53))")
        else:
            int_ok = int_ok and type(v) is int and -2 ** 63 <= v < 2 ** 63
            float_ok = float_ok and (type(v) is float or -2 ** 53 <= v <= 2 ** 53)
    branches = [" and ".join(b) for b, ok in ((ints, int_ok), (floats, float_ok)) if ok]
    if len(branches) == 1:
        return f"({branches[0]})"
    return "(" + " or ".join(f"({b})" for b in branches) + ")" if branches else "False"


def _unwidened(expr: ast.AST, locs: list[str]) -> list[str]:
    """The locals of ``locs`` that ``expr`` reads other than as ``L.to(<_WIDE>)``."""
    wide = {ast.dump(ast.parse(f"{lo}.to({_WIDE.format(lo=lo)})", mode="eval").body) for lo in locs}
    bare, todo = [], [expr]
    while todo:
        node = todo.pop()
        if ast.dump(node) in wide:
            continue
        if isinstance(node, ast.Name) and node.id in locs and node.id not in bare:
            bare.append(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return bare


class _SwapAst(ast.NodeTransformer):
    """Each expression equal to one of ``swap``'s (by ``ast.dump``), replaced by that local."""

    def __init__(self, swap: dict[str, str]):
        self.swap = swap

    def generic_visit(self, node):
        local = self.swap.get(ast.dump(node)) if isinstance(node, ast.expr) else None
        return ast.Name(local, ast.Load()) if local else super().generic_visit(node)


def _item_guard_of(tree: ast.Module, trap: str):
    """(function, statements of its block, index of the guard) where the mended file checks
    ``trap`` in a guarded ``.item()`` form; None when there is none."""
    key = trap.rpartition(".")[2]
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for block in ast.walk(fn):
                body = getattr(block, "body", None)
                for i, stmt in enumerate(body if isinstance(body, list) else ()):
                    if isinstance(stmt, ast.If) and len(stmt.body) == 1 and key in ast.unparse(stmt.body[0]) \
                            and "_assert_async" in ast.unparse(stmt.body[0]):
                        return fn, body, i
    return None


def _reads_item(node: ast.AST) -> bool:
    """``X.item()`` (a local of the guarded form's, read through ``.item()``)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item" \
        and not node.args


def guarded_item_check(ob: dict, ctx: Ctx) -> Outcome:
    """``guarded-item-check``: the mended ``T.item() <op> E`` check binds each tensor read
    through ``.item()`` to a local, runs the tensor condition inside the graph only when every
    local is a one-element plain CPU tensor of a dtype its comparison has a kernel for, and the
    original test on the same locals otherwise (helper-85's F2: without the guard a two-element
    tensor passed under inductor, and a Python int or uint16 raised other errors). A static screen
    of the mended file, re-derived from it."""
    by = "the static screen of the mended file (the guarded `.item()` form re-read from it)"
    pairs, trap = [tuple(p) for p in ob.get("locals") or ()], ob.get("trap") or ""
    if not (pairs and ob.get("asserts") and ob.get("test") and ctx.code):
        return unknown("the locals, the conditions or the mended file are not recorded")
    try:
        tree = ast.parse(ctx.code)
        receivers = [ast.parse(r, mode="eval").body for _, r in pairs]
        swap = _SwapAst({ast.dump(r): local for (local, _), r in zip(pairs, receivers)})
        holds = swap.visit(ast.parse(ob["asserts"], mode="eval").body)
        test = swap.visit(ast.parse(ob["test"], mode="eval").body)
    except SyntaxError as exc:
        return unknown(f"could not parse: {exc}")
    found = _item_guard_of(tree, trap)
    if found is None:
        return check_refuted(by, f"no guarded `_assert_async` with marker {trap}")
    fn, body, i = found
    guard, problems = body[i], []
    binds = body[i - len(pairs):i] if i >= len(pairs) else []
    if len(binds) != len(pairs) or not all(
            isinstance(b, ast.Assign) and len(b.targets) == 1 and isinstance(b.targets[0], ast.Name)
            and b.targets[0].id == local and ast.dump(b.value) == ast.dump(r)
            for b, (local, _), r in zip(binds, pairs, receivers)):
        problems.append("the statements before the guard do not bind " + ", ".join(f"`{lo} = {r}`" for lo, r in pairs))
    locs = [local for local, _ in pairs]
    if any(isinstance(n, ast.Compare) for n in ast.walk(test)):
        # compared with Python numbers or each other: only where torch's comparison is Python's exact one
        nums = list(ob.get("numbers") or ())
        casts = {c.func.id for c in ast.walk(test) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                 and c.func.id in ("int", "float") and len(c.args) == 1 and _reads_item(c.args[0])}
        want = _COMPILING + " and ".join([_guard_text(lo, False) for lo in locs] + [_exact_text(locs, nums, casts)])
        bare = _unwidened(holds, locs)
        if bare:   # cast to int64/float64, the comparison is exact for every dtype the guard admits
            problems.append("the asserted condition reads " + ", ".join(f"`{lo}`" for lo in bare) + " without "
                            f"`.to({_WIDE.format(lo='L')})`: torch would round the number to a narrower dtype")
        if {ast.unparse(ast.parse(n, mode="eval").body) for n in nums} != {
                ast.unparse(n) for c in ast.walk(test) if isinstance(c, ast.Compare)
                         for n in [c.left, *c.comparators] if not _reads_item(n) and not (
                             isinstance(n, ast.Call) and n.args and _reads_item(n.args[0]))}:
            problems.append("the compared values recorded are not the comparison's operands")
    else:
        want = _COMPILING + " and ".join(f"{_guard_text(lo, False)} and {lo}.dtype in {_ITEM_DTYPES}" for lo in locs)
    if ast.dump(guard.test) != ast.dump(ast.parse(want, mode="eval").body):
        problems.append(f"the guard is not `{want}`")
    call = guard.body[0].value if isinstance(guard.body[0], ast.Expr) else None
    if not (isinstance(call, ast.Call) and _dotted(call.func) == "torch._assert_async" and call.args
            and ast.dump(call.args[0]) == ast.dump(holds)):
        problems.append(f"the guarded call does not assert `{ast.unparse(holds)}`")
    why = _fallback_problem(guard, tree, trap, "assert" if ob.get("form") == "assert" else "if-raise", test, test)
    if why:
        problems.append(why)
    want_ast = ast.parse(want, mode="eval").body
    for local, _ in pairs:
        named = sum(1 for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == local)
        want_n = 1 + sum(1 for e in (want_ast, holds, test) for n in ast.walk(e) if isinstance(n, ast.Name)
                         and n.id == local)
        if named != want_n:   # bound once, then in the guard, the check and the fallback only
            problems.append(f"`{local}` is named {named} times in the function, not only by the guarded form ({want_n})")
    if problems:
        return check_refuted(by, "; ".join(problems))
    return checked(by + ": " + ", ".join(f"`{lo} = {r}`" for lo, r in pairs) + f", then `{ast.unparse(holds)}` "
                   "inside the graph only under the guard, the original test on the same values otherwise",
                   ["Dynamo decides the guard at trace time (type, element count, device and dtype are guarded), "
                    "so it adds no break (measured on torch 2.13; the pipeline's graph count)"])


# one-tensor functions that raise and warn for no dtype (measured, torch 2.13: bool, uint8, int8/32/64,
# float16/bfloat16/32/64, complex64), and the operators that do so with a number
_SPECULABLE = {"all", "any", "isfinite", "isnan", "isinf", "logical_not", "bool", "long", "int", "sum",
               "count_nonzero"}
_FULL = {"all", "any", "sum", "count_nonzero"}
_SPECULABLE_OPS = (ast.Add, ast.Mult, ast.Div)
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _scalar(node: ast.AST, names: dict) -> str | None:
    """"literal" for a signed number literal or a full reduction (0-d); "observed" for an attribute chain of ``self`` the
    example run saw as a Python number; else None (a value that may be a tensor)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return "literal"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FULL:
        return "literal"   # a full reduction: 0-d (its call is screened on its own)
    src = _dotted(node) if isinstance(node, ast.Attribute) else None
    if src and src.startswith("self.") and (names.get(src) or {}).get("kind") == "num":
        return "observed"
    return None


def _hazard(expr: ast.AST, names: dict, observed: set, compares: set) -> str | None:
    """What in ``expr`` may raise, warn or have an effect when computed where Python skipped it
    (each pair of values it combines must hold a number: a literal, or a ``self`` attribute
    observed as one, recorded in ``observed``; an order comparison's source goes to ``compares``)."""
    funcs = {id(c.func) for c in ast.walk(expr) if isinstance(c, ast.Call)}
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            name = _dotted(node.func) or ""
            last = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            via_torch = name.count(".") == 1 and name.startswith("torch.")
            if last not in _SPECULABLE or not (via_torch or isinstance(node.func, ast.Attribute)):
                return f"it calls `{ast.unparse(node.func)}`"
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args) or len(node.args) != int(via_torch):
                return f"`{ast.unparse(node)}` passes other arguments than its one tensor"
        elif isinstance(node, ast.UnaryOp) and not (isinstance(node.op, ast.USub) and
                                                     isinstance(node.operand, ast.Constant)):
            return f"its operator in `{ast.unparse(node)}` raises for some dtypes"
        elif isinstance(node, ast.Attribute) and id(node) not in funcs and \
                not (_dotted(node) or "").startswith(("self.", "torch.")):
            return f"it reads `{ast.unparse(node)}`, an attribute of a value"
        elif isinstance(node, (ast.BinOp, ast.Compare)):
            if isinstance(node, ast.BinOp) and not isinstance(node.op, _SPECULABLE_OPS):
                return f"its operator in `{ast.unparse(node)}` may raise"
            if isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
                return "a membership test calls `__contains__`"
            if isinstance(node, ast.Compare) and any(isinstance(o, _ORDER) for o in node.ops):
                compares.add(ast.unparse(node))
            sides = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.left, *node.comparators]
            for a, b in zip(sides, sides[1:]):
                kinds = [_scalar(a, names), _scalar(b, names)]
                if kinds == [None, None]:
                    return (f"`{ast.unparse(node)}` combines two values neither of which is a number literal or a "
                            "`self` attribute observed as a Python number: two tensors may not broadcast")
                observed.update(ast.unparse(x) for x, k in zip((a, b), kinds) if k == "observed")
        elif not isinstance(node, (ast.Name, ast.Attribute, ast.Constant, ast.UnaryOp, ast.expr_context, ast.unaryop,
                                   ast.operator, ast.cmpop)):
            return f"it holds a `{type(node).__name__}` (`{ast.unparse(node)[:50]}`)"
    return None


def _python_level(expr: ast.AST) -> str | None:
    """Why ``expr`` is not a Python-level test that cannot raise on a tensor (shapes without
    indexing, ``is``, ``isinstance``/``hasattr``/``len``, ``dim()``/``numel()``/``size()``)."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Subscript):
            return f"its indexing `{ast.unparse(node)}` may raise"
        if isinstance(node, ast.Call) and not (
                (isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "hasattr", "len"))
                or (isinstance(node.func, ast.Attribute) and node.func.attr in ("dim", "numel", "size")
                    and not node.args and not node.keywords)):
            return f"it calls `{ast.unparse(node.func)}`"
    return None


def speculated_operands(ob: dict, ctx: Ctx) -> Outcome:
    """``speculated-operands``: in one graph, the later operands of a split ``assert A and B``
    are computed even where an earlier check fails, which Python skipped, and Dynamo traces them
    on every call, so a failure there is a hard error (helper-81). A static screen of each operand
    (parsed anew): names, attribute chains of ``self``/``torch``, literals, arithmetic and
    comparisons with a number on one side (a literal, or a ``self`` attribute the example run saw
    as a Python number), and total one-tensor predicates and reductions without a dim."""
    by = "the static screen of the speculated operands (verifier/encoders/assert_async.py)"
    ops, python_level = ob.get("operands"), ob.get("python_level") or []
    if not isinstance(ops, list) or not isinstance(python_level, list) or not ops + python_level:
        return unknown("the speculated operands are not recorded")
    names = (ctx.facts or {}).get("names") or {}
    observed: set[str] = set()
    compares: set[str] = set()
    for src in ops + python_level:
        try:
            expr = ast.parse(src, mode="eval").body
        except SyntaxError as exc:
            return unknown(f"could not parse `{src}`: {exc}")
        why = _python_level(expr) if src in python_level else _hazard(expr, names, observed, compares)
        if why is not None:
            return check_refuted(by, f"`{src}` runs inside the graph where Python skipped it, and {why}")
    return checked(by + (", with the observation of the example run" if observed else ""),
                   [f"screened: {', '.join(ops) or 'none'}"]
                   + ([f"an order comparison (<, <=, >, >=) raises on a complex tensor: the operands of "
                       f"{', '.join(sorted(compares))} are not complex (not screened)"] if compares else [])
                   + ([f"decided by Python at trace time, raising nothing on a tensor: {', '.join(python_level)}"]
                      if python_level else [])
                   + ([f"{', '.join(sorted(observed))}: a Python number on the example run (observed), assumed "
                       "on every call"] if observed else [])
                   + ["a name the operands read holds a tensor or a Python number, as on the example run"])


def _trap_exception(tree: ast.Module, trap: str) -> ast.AST | None:
    """The exception expression of ``trap``'s lambda in the mended file's table."""
    table, _, key = trap.partition(".")
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == table for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and k.value == key and isinstance(v, ast.Lambda):
                    return v.body
    return None


ENCODERS = {
    "raises-iff-original": raises_iff,
    "same-result-when-passing": same_result_when_passing,
    "first-failure-wins": first_failure,
    "state-unchanged-on-raise": state_unchanged,
    "cpu-only": cpu_only,
    "condition-is-tensor": condition_is_tensor,
    "restore-at-boundary": restore_at_boundary,
    "guarded-check": guarded_check,
    "guarded-item-check": guarded_item_check,
    "speculated-operands": speculated_operands,
}
CHECKS = frozenset({"same-result-when-passing", "first-failure-wins", "state-unchanged-on-raise", "cpu-only",
                    "restore-at-boundary", "guarded-check", "guarded-item-check", "speculated-operands"})
OBSERVED = frozenset({"state-unchanged-on-raise", "cpu-only"})   # rest on the example run
