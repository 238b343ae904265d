"""Encoders for a boolean-mask update: ``x[m] = f(x[m])`` (or ``x[m] op= c``) ->
``x.copy_(torch.where(m, f(x), x))``.

* ``mask-update-elementwise`` (a check: a screen of the mended expression): ``f`` is built
  only from numbers, the operand names and exactly rounded elementwise operators that
  cannot raise (``+ - * /``, unary ``-``, ``abs``, ``neg``, ``relu``, ``sign``, ``clamp``/``clip``
  with numeric bounds). Then ``f(x)[i]`` is ``f(x[i])`` bit for bit (IEEE 754 rounds each
  of these exactly, whichever kernel path computes it), so the selected elements are
  ``f(x[m])``.
* ``mask-update-scalar`` (an observation of the example run): each operand not read
  through the mask (``self.scale``, a local ``s = 0.5``) is a Python int or float where the
  update runs, so it broadcasts against the whole tensor as against the selected elements
  (a tensor there -- a bias of the selected elements' shape -- would not). Runtime state: a
  later call may see another value, which the other obligations' value model covers only
  as far as it reads the observed one (``self.<attr>`` is taken at its observed value).
* ``mask-update-select`` (the value model, Z3 FloatingPoint): per element, the mended
  ``torch.where(m, f(x), x)[i]`` equals the original ``m[i] ? f(x[i]) : x[i]``; and the
  original's ``index_put_`` raises "Index put requires the source and destination dtypes
  match" (an augmented update: "result type ... can't be cast") when ``f``'s dtype is not
  ``x``'s, where ``torch.where`` would promote: a dtype difference refutes.
* ``mask-update-finite-gradient`` (the value model with PyTorch's backward formulas):
  off the mask ``torch.where`` sends ``f`` a zero upstream gradient; ``f``'s backward
  times zero must stay finite for every leaf (``0 * inf`` is NaN: ``sqrt``, ``1/x``,
  ``x / y`` at ``y = 0``). Refuted declines (unlike ``finite-gradient``, which makes a
  selection inference-only): the update is a write, usually in training code.
"""
from __future__ import annotations

import ast

import z3

from verifier.dtypes import FP_FORMAT, fp_sort
from verifier.encoders.base import Ctx, decide, fp_arith, shape_tiers, value_tiers
from verifier.outcomes import Outcome, check_refuted, checked, unknown
from verifier.shapes import ShapeEval, _expr
from verifier.smt import Unsupported, model_text

EXACT_CALLS = frozenset({"abs", "neg", "negative", "relu", "clamp", "clip", "sign", "sgn"})
BIN_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _number(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _screen(node, operands: set[str], torch_name: str) -> str | None:
    """Why ``node`` is not an exactly rounded, total, elementwise expression, else None.
    ``operands``: the names read through the mask and the Python-number operands."""
    if _number(node):
        return None
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = ast.unparse(node)
        return None if name in operands else f"`{name}` is not an operand read through the mask"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _screen(node.operand, operands, torch_name)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "clone" \
            and not node.args and not node.keywords and isinstance(node.func.value, ast.Name):
        return _screen(node.func.value, operands, torch_name)   # a copy: the same values
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, BIN_OPS):
            return f"`{type(node.op).__name__}` is not an exactly rounded elementwise operator that cannot raise"
        return _screen(node.left, operands, torch_name) or _screen(node.right, operands, torch_name)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXACT_CALLS:
        fn = isinstance(node.func.value, ast.Name) and node.func.value.id == torch_name
        args = list(node.args)
        if fn:
            if not args:
                return f"`{ast.unparse(node)}` has no tensor argument"
            tensor, bounds = args[0], args[1:]
        else:
            tensor, bounds = node.func.value, args
        bounds += [k.value for k in node.keywords if k.arg in ("min", "max")]
        if any(k.arg not in ("min", "max") for k in node.keywords):
            return f"`{ast.unparse(node)}` has keywords other than min/max"
        if bounds and node.func.attr not in ("clamp", "clip"):
            return f"`{ast.unparse(node)}` has extra arguments"
        if not all(_number(b) for b in bounds):
            return f"a bound of `{ast.unparse(node)}` is not a number"
        return _screen(tensor, operands, torch_name)
    return f"`{ast.unparse(node)}` is not an exactly rounded elementwise expression the screen admits"


def elementwise(ob: dict, ctx: Ctx) -> Outcome:
    by = ("the elementwise screen (verifier/encoders/mask_update.py) of the mended expression: numbers, the operand "
          "names (or their .clone()) and + - * /, unary -, abs, neg, relu, sign, clamp/clip with numeric bounds only")
    try:
        node = _expr(ob["expr"])
    except (SyntaxError, KeyError):
        return check_refuted(by, "the expression does not parse")
    why = _screen(node, set(ob.get("operands") or ()) | set(ob.get("scalars") or ()), ob.get("torch") or "torch")
    if why:
        return check_refuted(by, why)
    return checked(by, ["IEEE 754: + - * / are correctly rounded and abs, neg, relu, clamp exact, in every kernel "
                        "path (sign too: -1, 0 or 1, NaN -> 0, measured on torch 2.13), so f(x)[i] == f(x[i]) bit "
                        "for bit; none of them raises on any value"])


def scalar(ob: dict, ctx: Ctx) -> Outcome:
    by = "the observation of the example run: the type of each operand not read through the mask, at the update"
    names = (ctx.facts or {}).get("names", {})
    seen = []
    for name in ob.get("scalars") or ():
        f = names.get(name)
        if f is None:
            return unknown(f"`{name}` was not observed where the update runs")
        if f.get("kind") == "tensor" and f.get("shape"):
            return check_refuted(by, f"`{name}` is a {f.get('dtype')} tensor of shape {f.get('shape')}, not a Python "
                                     "number: it broadcasts against the selected elements, not the whole tensor")
        if f.get("kind") != "num" or f.get("cat") not in ("int", "float"):
            what = f"a 0-d {f.get('dtype')} tensor" if f.get("kind") == "tensor" else f.get("cat") or f.get("kind")
            return check_refuted(by, f"`{name}` is {what}, not a Python int or float, the only operands not read "
                                     "through the mask that the rule admits")
        seen.append(f"`{name}` is a Python {f['cat']} ({f.get('value')!r}) at the update (observed)")
    return checked(by, seen + ["it is a Python number on every call (runtime state: not screened beyond the "
                               "class's own bindings)"])


def select(ob: dict, ctx: Ctx) -> Outcome:
    src = f"torch.where({ob['pred']}, {ob['expr']}, {ob['target']})"

    def build(ev, finite: bool):
        f = ev.eval(_expr(ob["expr"]))
        x = ev.eval(_expr(ob["target"]))
        if x.dtype.startswith("py"):
            raise Unsupported(f"`{ob['target']}` is not a tensor")
        if f.dtype != x.dtype:
            return [z3.BoolVal(True)], (f.dtype, x.dtype)
        m = ev.truth(ev.eval(_expr(ob["pred"])))
        original = z3.If(m, f.term, x.term)      # index_put_: the selected elements get f, the others keep x
        mended = ev.eval(_expr(src)).term
        if x.dtype in FP_FORMAT:
            return [z3.Not(z3.Or(original == mended, z3.And(z3.fpIsNaN(original), z3.fpIsNaN(mended))))], None
        return [original != mended], None

    def describe(model, extra):
        d = extra[1]
        if d:
            return (f"f is {d[0]} and `{ob['target']}` is {d[1]}: the original's index_put_ raises (dtypes must "
                    "match) where torch.where would promote and copy_ cast back")
        return model_text(model)
    return decide("mask-update-select", value_tiers(ctx, build)[:1], ctx,
                  fp_arith(ctx) + "; structural equality, NaN payloads identified", describe,
                  fixed_by="the value model gives torch.where(m, f(x), x) and the original's m ? f(x[i]) : x[i] the "
                           "same term, f and x having one dtype (so torch.where neither promotes nor casts)")


def finite_gradient(ob: dict, ctx: Ctx) -> Outcome:
    def build(ev, finite: bool):
        side = ev.eval(_expr(ob["expr"]))
        if side.dtype not in FP_FORMAT:
            return [z3.BoolVal(False)], None      # no floating result: no gradient flows through f
        off = z3.Not(ev.truth(ev.eval(_expr(ob["guard"]))))
        g = z3.FP("upstream_grad", fp_sort(side.dtype))
        grads = ev.grads(side, g)
        if not grads:
            return [z3.BoolVal(False)], None      # f reads no floating leaf (a constant): no gradient
        bad = z3.Or(*[z3.Or(z3.fpIsNaN(t), z3.fpIsInf(t)) for t in grads.values()])
        claim = [off, z3.fpIsZero(g), bad]
        if finite:
            for leaf in ev.leaves.values():
                # a Python float operand (`s = math.sqrt(d)`) is a leaf too: finite like the tensors
                if (leaf.dtype in FP_FORMAT or leaf.dtype == "pyfloat") and leaf.leaf and z3.is_expr(leaf.term):
                    claim.append(z3.Not(z3.Or(z3.fpIsNaN(leaf.term), z3.fpIsInf(leaf.term))))
        return claim, grads
    return decide("mask-update-finite-gradient", value_tiers(ctx, build), ctx,
                  fp_arith(ctx) + "; PyTorch backward formulas, zero upstream gradient off the mask",
                  fixed_by="f has no floating-point result or leaf on the example's dtypes: no gradient flows through it")


def leading_shape(ob: dict, ctx: Ctx) -> Outcome:
    """``mask-leading-shape``: ``lhs.shape == rhs.shape[:lhs.dim()]`` (a boolean index selecting
    along ``rhs``'s leading dims), so ``lhs`` reshaped with trailing singleton dims broadcasts
    to ``rhs`` element for element as the index selects."""
    def build(ev: ShapeEval):
        a, b = ev.eval(_expr(ob["lhs"])), ev.eval(_expr(ob["rhs"]))
        if a.kind != "tensor" or b.kind != "tensor":
            raise Unsupported(f"shapes of a {a.kind} and a {b.kind}")
        ok = z3.And(*[p for p, _ in ev.pre]) if ev.pre else z3.BoolVal(True)
        if a.rank > b.rank:
            return z3.And(ok, z3.BoolVal(True)), (a, b)
        differ = z3.Not(z3.And(*[x == y for x, y in zip(a.shape, b.shape)])) if a.rank else z3.BoolVal(False)
        return z3.And(ok, differ), (a, b)
    return decide("mask-leading-shape", shape_tiers(ctx, build), ctx, "linear integer arithmetic over symbolic sizes",
                  fixed_by="the shape transfer functions give the mask the leading sizes of the target")


def expected_guard(t: str, x: str, mask: str, operands: list[str], rows: bool = False) -> str:
    """The guard under which ``x.copy_(where(...))`` writes what ``x[m] = f(x[m])`` writes, ``mask``
    a name (an expression mask is bound to a local first): a plain real floating ``x`` without
    zero strides (``copy_`` refuses overlapping memory exactly there; ``index_put_`` writes) nor
    other overlap (a sliding window: ``copy_`` writes unselected elements back, helper-66), the
    mask a bool tensor of ``x``'s shape (the row form: its leading sizes) on ``x``'s device, and
    every other operand of ``x``'s dtype, shape and device (``index_put_`` raises on a dtype
    mismatch, ``y[m]`` on a shape mismatch, where ``where`` promotes or broadcasts; complex
    products are not correctly rounded). Each clause answers a counterexample of helper-51's or
    helper-54's review; ``x`` off the meta device, where a boolean index raises (helper-85 F5), not nested (no
    strides: helper-88 F4); last, nothing the update reads requires grad while autograd records (backward
    raised after the ``copy_`` into a graph input, a view of one or a buffer, helper-102 and helper-103)."""
    shape = f"{x}.shape[:{mask}.dim()]" if rows else f"{x}.shape"
    # no other overlap (helper-66: a sliding window's copy_ wrote unselected elements back over
    # selected ones): the sizes > 1 by stride ascending, each stride past the smaller ones' extent
    # pairwise, so that Dynamo need not sort symbolic sizes under dynamic shapes
    overlap = (f"all({x}.stride(_mend_i) * {x}.shape[_mend_i] <= {x}.stride(_mend_j) or {x}.stride(_mend_j) * "
               f"{x}.shape[_mend_j] <= {x}.stride(_mend_i) for _mend_i in range({x}.dim()) for _mend_j in "
               f"range(_mend_i) if {x}.shape[_mend_i] > 1 and {x}.shape[_mend_j] > 1)")
    clauses = [f"type({x}) is {t}.Tensor", f"{x}.is_floating_point()", f"not {x}.is_nested",
               f"all(_mend_s > 0 for _mend_s in {x}.stride())",
               overlap,
               f"type({mask}) is {t}.Tensor", f"{mask}.dtype == {t}.bool", f"{mask}.device == {x}.device",
               f'{x}.device.type != "meta"', f"{mask}.shape == {shape}"]
    for y in operands:
        clauses += [f"type({y}) is {t}.Tensor", f"{y}.dtype == {x}.dtype", f"{y}.shape == {x}.shape",
                    f"{y}.device == {x}.device"]
    # last: nothing the update reads requires grad while autograd records (helper-102, helper-103)
    grads = " or ".join(f"{v}.requires_grad" for v in (x, *operands))
    clauses.append(f"not ({t}.is_grad_enabled() and {'(' + grads + ')' if operands else grads})")
    return " and ".join(clauses)


def guarded(ob: dict, ctx: Ctx) -> Outcome:
    """``mask-update-guarded``: a static screen of the mended file, re-reading the guarded form:
    ``if GUARD: x.copy_(torch.where(SEL, F, x))`` with the original statement, as written in the
    file before, as its only ``else``; an expression mask bound to a fresh local by the statement
    just before, the guard and the selection reading that local."""
    by = "the static screen of the mended file (the guard and the kept original re-read from it)"
    t, x, pred, expr = ob.get("torch"), ob.get("target"), ob.get("pred"), ob.get("expr")
    if not (t and x and pred and expr and ob.get("original") and ctx.code and ctx.before):
        return unknown("the guarded form's parts, the mended file or the file before are not recorded")
    bound = ob.get("bound")
    mask = bound or pred
    try:
        if bound is None and not isinstance(ast.parse(pred, mode="eval").body, (ast.Name, ast.Attribute)):
            return check_refuted(by, f"the mask `{pred}` is an expression the guard reads without binding it once")
        expected = expected_guard(t, x, mask, list(ob.get("operands") or []), bool(ob.get("rows")))
        want = ast.dump(ast.parse(expected, mode="eval").body)
        body = ast.dump(ast.parse(f"{x}.copy_({t}.where({ob.get('selection') or mask}, {expr}, {x}))").body[0])
        original = ast.dump(ast.parse(ob["original"]).body[0])
        binding = ast.dump(ast.parse(f"{bound} = {pred}").body[0]) if bound else None
        mended, before = ast.parse(ctx.code), ast.parse(ctx.before)
    except SyntaxError as exc:
        return unknown(f"could not parse: {exc}")
    found = [(block, i, n) for block in ast.walk(mended) for field in ("body", "orelse")
             if isinstance(getattr(block, field, None), list)
             for i, n in enumerate(getattr(block, field)) if isinstance(n, ast.If) and len(n.body) == 1
             and ast.dump(n.body[0]) == body]
    if len(found) != 1:
        return check_refuted(by, f"{len(found)} statements `if ...: {x}.copy_({t}.where(...))` of this update in the "
                                 "mended file, not one")
    block, i, node = found[0]
    siblings = block.body if node in getattr(block, "body", []) else block.orelse
    if ast.dump(node.test) != want:
        return check_refuted(by, f"the guard `{ast.unparse(node.test)}` is not `{expected}`")
    if len(node.orelse) != 1 or ast.dump(node.orelse[0]) != original:
        return check_refuted(by, f"the `else` is not the original `{ob['original']}` alone")
    if not any(isinstance(n, ast.stmt) and ast.dump(n) == original for n in ast.walk(before)):
        return check_refuted(by, f"`{ob['original']}` is not a statement of the file before the rewrite")
    if bound:
        fn = next((f for f in ast.walk(mended) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and node in ast.walk(f)), None)
        uses = sum(1 for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == bound) if fn else 0
        if i == 0 or ast.dump(siblings[i - 1]) != binding:
            return check_refuted(by, f"the statement before the guard is not `{bound} = {pred}`")
        if uses != 6:   # bound once, four times in the guard, once selected (the row form binds no local)
            return check_refuted(by, f"`{bound}` is named {uses} times in the function, not only by the guarded form")
    return checked(by + f": the in-place where runs only under `{ast.unparse(node.test)}`, the original "
                   f"`{ob['original']}` otherwise",
                   ["Dynamo decides the guard at trace time (types, dtypes, shapes, strides and devices are guarded), "
                    "so it adds no break (measured on torch 2.13; the pipeline's graph count)"])

ENCODERS = {
    "mask-leading-shape": leading_shape,
    "mask-update-elementwise": elementwise,
    "mask-update-scalar": scalar,
    "mask-update-select": select,
    "mask-update-finite-gradient": finite_gradient,
    "mask-update-guarded": guarded,
}
CHECKS = frozenset({"mask-update-elementwise", "mask-update-scalar", "mask-update-guarded"})
OBSERVED = frozenset({"mask-update-scalar"})   # the operand's type on the example run
