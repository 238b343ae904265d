"""Encoders for a selection as ``torch.cond`` (the untaken side must not run).

Solver encoders: ``cond-predicate`` (a single-element bool tensor) and
``cond-branch-types`` (one tensor per name, one dtype). Checks: ``cond-output-not-aliased``
(each branch value allocates its result: the rule's recorded treatment and the screen of
the code after the site), ``cond-side-pure`` (the effect analysis), ``cond-no-autograd``
(the emitted guard, read from the mended file) and ``cond-taken-side-only`` (torch.cond
runs the selected branch only: the lemma ``proofs/pcf_cond_ite.smt2``).
"""
from __future__ import annotations

import ast
import re

import z3

from verifier.dtypes import DTC
from verifier.encoders.base import Ctx, decide, shape_tiers
from verifier.module_shapes import numel
from verifier.encoders.where import raise_query, untaken_runs
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.shapes import ShapeEval, _expr
from verifier.smt import Unsupported, model_text

COND_LEMMA = "proofs/pcf_cond_ite.smt2"
GRAD_GUARD = "not torch.is_grad_enabled()"
_GRAD_GUARD = re.compile(r"\bnot\s+[A-Za-z_][\w.]*\.is_grad_enabled\(\)")   # torch imported under any name
_COND_CALL = re.compile(r"\b[A-Za-z_][\w.]*\.cond\(")


def cond_predicate(ob: dict, ctx: Ctx) -> Outcome:
    """torch.cond's predicate is a single-element bool tensor: never a Python bool (which
    torch.cond specialises on), never a float or multi-element tensor."""
    def build(ev: ShapeEval):
        p = ev.eval(_expr(ob["pred"]))
        if p.kind != "tensor":
            return z3.BoolVal(True), p      # a Python value would reach torch.cond
        return z3.Or(numel(p.shape) != 1, p.dtype != DTC["bool"]), p

    def describe(model, extra):
        p = extra[1]
        return "the predicate is a Python value, not a tensor" if p.kind != "tensor" else model_text(model)
    return decide("cond-predicate", shape_tiers(ctx, build), ctx,
                  "PyTorch dtypes (DType datatype) and nonlinear integer arithmetic (numel)", describe,
                  fixed_by="the shape and dtype models give the predicate one element and the bool dtype by construction")


def cond_branch_types(ob: dict, ctx: Ctx) -> Outcome:
    """The two branch outputs agree in structure (each one tensor) and dtype (PyTorch
    promotion rules), as torch.cond requires; shapes are a separate same-shape obligation.

    Proved for every dtype the inputs and module state may have, never at the example's
    dtypes only (there torch.cond raises, helper-94 m08): when the mended file guards the cond
    with ``_mend_cond_ready(<guard>)``, the floating tensors it checks share one dtype."""
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        if a.kind != "tensor" or b.kind != "tensor":
            if {a.kind, b.kind} <= {"tensor", "num"}:
                return z3.BoolVal(True), (a, b)     # a Python number: torch.cond returns tensors only
            raise Unsupported(f"structure of a {a.kind} and a {b.kind}")
        return a.dtype != b.dtype, (a, b)

    def describe(model, extra):
        a, b = extra[1]
        if a.kind != "tensor" or b.kind != "tensor":
            return "a side is a Python number, not a tensor: the branch outputs differ in structure"
        return model_text(model)
    return decide("cond-branch-types", shape_tiers(ctx, build, observed=False, **_guard_premises(ob, ctx)), ctx,
                  "pytree structure (one tensor per name) and PyTorch type promotion (torch.promote_types table, "
                  "ATen combine_categories) over a DType datatype", describe,
                  fixed_by="the dtype model gives both branch outputs the same dtype term (no solver query needed)")


def _guard_premises(ob: dict, ctx: Ctx) -> dict:
    """:func:`shape_tiers`'s premises from the cond's guard, when the mended file guards the cond
    with ``_mend_cond_ready(<ob["guard"]>)`` (else none): ``uniform``, the one-dtype premise (see
    :class:`ShapeEval`), and ``dense``, the tensors it checks contiguous (a non-contiguous one sends
    the call to the original ``if``), whose ``view`` keeps its strides."""
    guard = ob.get("guard") or []
    if not guard or _guard_missing(ctx.code, guard, ob.get("torch") or "torch"):
        return {}
    roots = _guarded(guard)
    call = ast.parse(f"{READY}({', '.join(guard)})", mode="eval").body

    def uniform(name: str, param: bool) -> bool:
        return name in roots or param and any(name.startswith(r + ".") for r in roots)
    return {"uniform": uniform, "dense": frozenset(e.id for k in call.keywords if k.arg == "dense" and isinstance(
        k.value, ast.Tuple) for e in k.value.elts if isinstance(e, ast.Name))}


def cond_sides_trace(ob: dict, ctx: Ctx) -> Outcome:
    """A side of the cond can be traced: under torch.compile torch.cond traces both branches
    on fake tensors, so a side whose ops cannot take the shapes, ranks or dtypes raises there
    even where the ``if`` never runs it (helper-97 f1: ``scores.masked_fill(mask[:, None, :] ==
    0, -1e4)`` under ``if (mask == 0).any()``, with a mask that broadcasts only when it holds a
    zero). Preconditions on values (a zero integer divisor) fail only when the op runs, which
    the cond does for the taken side only: they are not part of it."""
    build, describe = raise_query(ob["expr"], traced_only=True)
    return decide("cond-sides-trace", shape_tiers(ctx, build, **_guard_premises(ob, ctx)), ctx,
                  "preconditions of each op on sizes, ranks and dtypes (broadcasting, matmul/linear sizes, dims) "
                  "over symbolic sizes", describe,
                  fixed_by="the shape transfer functions: no op of the side has a size, rank or dtype precondition "
                           "that can fail")


def cond_not_aliased(ob: dict, ctx: Ctx) -> Outcome:
    """No branch output is an input of the cond or a view of one (torch.cond rejects that,
    even in eager): each value is computed by ops that allocate their result, or cloned
    where nothing after the site observes the lost aliasing (the rule's source screen)."""
    values, treatment = ob.get("values", []), ob.get("treatment", [])
    if not values or len(values) != len(treatment):
        return unknown("the branch values and their treatment are not recorded")
    observers = ob.get("observers", [])
    if "clone" in treatment and observers:
        return unknown("the lost aliasing of a clone could be observed: " + "; ".join(observers[:3]))
    if "clone" in treatment and "observers" not in ob:
        return unknown("the code after the site was not screened for in-place writes and escapes")
    assumptions = []
    for v, t in zip(values, treatment):
        if t == "clone":
            assumptions.append(f"`{v}` allocates new storage (Tensor.clone); nothing after the site writes in place "
                               f"or lets {', '.join('`%s`' % w for w in ob.get('watched', []))} escape (source screen)"
                               + "".join(f"; `{r}` is returned, but it is a local every binding of which allocates "
                                         "a new tensor and no use stores, passes on or compares by identity, so the "
                                         "caller cannot tell the copy (source screen)" for r in ob.get("returned", [])))
        else:
            assumptions.append(f"`{v}` is computed by ops that allocate their result (no view, no identity op: "
                               "a submodule returning its input fails torch.cond's alias check when traced)")
    return checked("the static screen of the branch values (each allocated by its op or cloned) and of the code "
                   "after the site (no in-place write to, or escape of, a cloned value)", assumptions, [COND_LEMMA])


def cond_side_pure(ob: dict, ctx: Ctx) -> Outcome:
    """A submodule called in a cond branch writes no state (Dynamo traces both branches)."""
    return untaken_runs(ob, ctx)


def cond_no_autograd(ob: dict, ctx: Ctx) -> Outcome:
    """The cond is guarded by ``not torch.is_grad_enabled()``: it never runs under autograd,
    where its backward would give tensors the if leaves without gradient a zero gradient."""
    if ctx.code is not None and not _GRAD_GUARD.search(ctx.code):
        return unknown(f"the mended file has no `{GRAD_GUARD}` guard")
    return checked("the static screen of the mended file: the cond runs only under "
                   f"`{GRAD_GUARD} and torch.compiler.is_compiling()`" + (
                       "" if ctx.code is not None else " (as recorded; the file was not re-read)"),
                   ["the emitted guard is `not torch.is_grad_enabled() and torch.compiler.is_compiling()` "
                    "(Dynamo guards on the grad mode, so each mode gets its own graph)", ob.get("why") or ""])


# the helper the rule emits (mend reads it from here), compared as an AST with the mended file's
READY = "_mend_cond_ready"
READY_TEXT = '''def _mend_cond_ready(*roots, dense=()):
    hooks = {torch}.nn.modules.module
    if (hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks
            or hooks._global_backward_pre_hooks):
        return False
    dtypes = set()
    for i, root in enumerate((*dense, *roots)):
        found = list(root.values()) if isinstance(root, dict) else root if isinstance(root, (list, tuple)) else [root]
        for mod in found:
            if not isinstance(mod, ({torch}.Tensor, {torch}.nn.Module, int, float, str, {torch}.dtype, type(None))):
                return False
            if isinstance(mod, {torch}.Tensor):
                if i < len(dense) and not mod.is_contiguous():
                    return False
                if mod.is_floating_point():
                    dtypes.add(mod.dtype)
            for sub in mod.modules() if isinstance(mod, {torch}.nn.Module) else ():
                if sub.training:
                    return False
                if sub._forward_hooks or sub._forward_pre_hooks or sub._backward_hooks or sub._backward_pre_hooks:
                    return False
                if "parametrizations" in sub._modules or type(sub).__module__.startswith(
                        ("torch.ao.", "torch.nn.quantized", "torch.nn.intrinsic")):
                    return False
                for t in [*sub.parameters(recurse=False), *sub.buffers(recurse=False)]:
                    if not t.is_contiguous():
                        return False
                    if t.is_floating_point():
                        dtypes.add(t.dtype)
                for key, v in sub.__dict__.items():
                    if key in ("_parameters", "_buffers", "_modules"):
                        continue
                    if isinstance(v, {torch}.Tensor):
                        if v.is_floating_point():
                            dtypes.add(v.dtype)
                    elif isinstance(v, {torch}.nn.Module) or isinstance(v, (list, tuple, dict)) and any(
                            isinstance(e, ({torch}.Tensor, {torch}.nn.Module)) for e in (v.values() if isinstance(v, dict) else v)):
                        return False
    return len(dtypes) <= 1
'''


def _guard_missing(code: str | None, roots: list[str], torch: str) -> str | None:
    """Why the mended file does not guard a torch.cond with ``_mend_cond_ready(<roots>)``
    defined as the rule emits it (None when it does)."""
    if code is None:
        return "the mended file is not recorded"
    tree = ast.parse(code)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == READY]
    want = ast.dump(ast.parse(READY_TEXT.format(torch=torch)).body[0])
    if len(defs) != 1 or ast.dump(defs[0]) != want:
        return f"the mended file does not define `{READY}` once, as the rule emits it"
    call = ast.dump(ast.parse(f"{READY}({', '.join(roots)})", mode="eval").body)
    guarded = [n for n in ast.walk(tree) if isinstance(n, ast.If) and any(ast.dump(c) == call for c in ast.walk(n.test))
               and any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "cond"
                       for b in n.body for c in ast.walk(b))]
    return None if guarded else f"no `if` guarding torch.cond calls `{READY}({', '.join(roots)})`"


def _guarded(roots: list[str]) -> set[str]:
    """The dotted names the guard ``_mend_cond_ready(<roots>)`` checks: ``self.a.b`` for
    ``getattr(getattr(self, "a", None), "b", None)``, ``x`` for ``x`` and for ``dense=(x,)``."""
    call = ast.parse(f"{READY}({', '.join(roots)})", mode="eval").body
    nodes = list(call.args) + [e for k in call.keywords if k.arg == "dense" and isinstance(k.value, ast.Tuple)
                               for e in k.value.elts]
    out = set()
    for node in nodes:
        names = []
        while isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) == 3 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            names.insert(0, node.args[1].value)
            node = node.args[0]
        if isinstance(node, ast.Name):
            out.add(".".join([node.id, *names]))
    return out


def cond_modules_unhooked(ob: dict, ctx: Ctx) -> Outcome:
    """The cond runs only when ``_mend_cond_ready(<roots>)`` holds: no module hook (global, or on
    any submodule of a root), no parametrization and no quantized submodule, which torch.cond
    could not trace whole (helper-88 F1, helper-90), and no submodule in training mode (helper-94:
    under no_grad in training, Inductor's cond dropped a BatchNorm's running-statistics update,
    and a block reading `.item()` only in training raised UncapturedHigherOrderOpError); and every
    ``dense`` tensor (the function's parameters the sides read) contiguous, every floating tensor of the roots (their parameters and buffers
    included) of one dtype (helper-94 m08/m09: after ``model.bfloat16()`` or for a transposed
    input the sides' outputs differed in dtype or stride order, and torch.cond raised where the
    if returned); every parameter and buffer contiguous (helper-95 m20: a channels_last conv);
    a tensor kept in a submodule's plain attribute counted among the dtypes (helper-95 m19: a
    float32 tensor `.bfloat16()` left as it was; transformers' rotary embeddings keep one), and
    no module or tensor in a plain container, which the helper could not check (helper-95 m23:
    a hooked Linear in a Python list). A static screen of the mended file: the helper is the expected one, defined
    once, and an ``if`` whose test calls it with the roots guards a torch.cond call."""
    roots, t = ob.get("roots") or [], ob.get("torch") or "torch"
    if ctx.code is None:
        return unknown("the mended file is not recorded")
    by = "the static screen of the mended file: the helper verbatim, and the cond's guard calling it with the roots"
    missing = _guard_missing(ctx.code, roots, t)
    if missing:
        return check_refuted(by, missing)
    return checked(by, ["a module hook, pruning, quantization or training mode set after the rewrite sends the call "
                        "to the original if: Dynamo re-evaluates the helper at trace time and guards on the hook "
                        "dicts and training flags",
                        "a non-contiguous `dense` tensor, or floating roots of two dtypes, send the call to the "
                        "original if: Dynamo guards on each tensor's dtype and strides",
                        "a side calling a module reached other than through `self`'s attributes or a parameter "
                        "(a global, a closure) is not covered (the rule names only those roots)"])


def cond_taken_side_only(ob: dict, ctx: Ctx) -> Outcome:
    """torch.cond runs only the selected branch, so the where-only obligations about the
    untaken side (finite-gradient, untaken-side-cannot-raise, untaken-side-runs) are waived."""
    if ctx.code is not None and not _COND_CALL.search(ctx.code):
        return unknown("the mended file calls no torch.cond")
    return checked("the static screen of the mended file: the selection is a torch.cond call, which evaluates "
                   "only the branch its predicate selects (lemma: cond equals if/else, taken branch only)",
                   [ob.get("why") or "torch.cond evaluates only the branch its predicate selects",
                    "measured on torch 2.13: eager, aot_eager and inductor; gradients through the untaken side "
                    "are not computed"], [COND_LEMMA])


ENCODERS = {
    "cond-predicate": cond_predicate,
    "cond-branch-types": cond_branch_types,
    "cond-sides-trace": cond_sides_trace,
    "cond-output-not-aliased": cond_not_aliased,
    "cond-side-pure": cond_side_pure,
    "cond-taken-side-only": cond_taken_side_only,
    "cond-no-autograd": cond_no_autograd,
    "cond-modules-unhooked": cond_modules_unhooked,
}
CHECKS = frozenset({"cond-output-not-aliased", "cond-side-pure", "cond-taken-side-only", "cond-no-autograd",
                    "cond-modules-unhooked"})
OBSERVED = frozenset({"cond-side-pure"})   # the module is the one observed on the example run
