"""Encoder for a bincount made a static-length count: ``torch.bincount(I, minlength=M)`` ->
``torch.zeros(M, dtype=torch.int64).scatter_add(0, I, torch.ones_like(I))`` under a guard.

* ``bincount-in-range`` (check citing a lemma): a static screen of the mended source reads
  the guarded expression back and checks (1) its shape: the count under
  ``i.dim() == 1 and i.device.type != 'meta' and type(m) is int and n is not None and m >= n``
  with ``n`` the bound ``N`` read right after the indices are made (before minlength), the
  original's ``bincount`` (function or method form) otherwise,
  ``torch`` bound by ``import torch`` alone and ``type`` not rebound; (2) that the indices are
  those of an argmax/argmin (a dim, or none: over ``numel()``), max/min (``[1]`` or
  ``.indices`` with a literal dim) or topk along the dimension ``N`` reads, of the same tensor:
  inline (one lambda parameter ``x``), or bound by the statement just before, of a tensor
  named there, with nothing in the count's statement evaluated before it. PyTorch documents
  such indices in ``[0, size)``; a probe of the installed torch with NaN and infinities
  corroborates it. Then ``proofs/bb_bincount_scatter.smt2`` (proved once, unsat) gives
  ``length = m`` and equal counts for indices in ``[0, n)`` with ``n <= m``.
"""
from __future__ import annotations

import ast

from verifier.encoders.base import Ctx, bound_in_reach, in_tree
from verifier.encoders.numpy_constants import _module_aliases, at_every_occurrence
from verifier.outcomes import Outcome, check_refuted, checked, unknown

LEMMA = "proofs/bb_bincount_scatter.smt2"
BY = ("static screen of the mended source: the guard is `i.dim() == 1 and type(m) is int and m >= N` (N read on the "
      "tensor right after the indices), the count `zeros(m).scatter_add(0, i, ones_like(i))`, the fallback the "
      "original's bincount, and the indices are an argmax/argmin/max/min/topk's along the dimension N reads; then "
      "the lemma " + LEMMA + " (proved once by Z3)")
_PRODUCERS = {"argmax": (0, None, False), "argmin": (0, None, False), "max": (0, "required", True),
              "min": (0, "required", True), "topk": (1, -1, True)}


def _int(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def indices_of(expr: ast.AST, torch_names: set[str]) -> tuple[ast.AST, str, int | None] | str:
    """``(X, bound)`` when ``expr`` is the indices of an argmax/argmin/max/min/topk of ``X``
    (made 1-D or not), with ``bound`` the source of the size they lie below, written on
    ``X`` (``.shape[d]`` or ``.numel()``), and ``d`` (None: over the whole tensor); else why not."""
    expr = _strip_flatten(expr)
    if isinstance(expr, str):
        return expr
    paired = False
    if isinstance(expr, ast.Subscript) and _int(expr.slice) == 1:
        paired, expr = True, expr.value
    elif isinstance(expr, ast.Attribute) and expr.attr == "indices":
        paired, expr = True, expr.value
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _PRODUCERS):
        return f"`{ast.unparse(expr)}` is not an argmax, argmin, max, min or topk"
    where, default, wants_pair = _PRODUCERS[expr.func.attr]
    if paired != wants_pair:
        return f"`{ast.unparse(expr)}` is not read as indices"
    args = list(expr.args)
    if ast.unparse(expr.func.value) in torch_names:
        if not args:
            return f"`{ast.unparse(expr)}` passes no tensor"
        x, args = args[0], args[1:]
    elif ast.unparse(expr.func.value).split(".")[0] in torch_names:
        return f"`{ast.unparse(expr)}` calls an unbound method of `{ast.unparse(expr.func.value)}`"
    else:
        x = expr.func.value
    if any(isinstance(a, ast.Starred) for a in args) or any(k.arg is None for k in expr.keywords):
        return f"`{ast.unparse(expr)}` unpacks its arguments"
    keywords = {k.arg: k.value for k in expr.keywords}
    dim_node = args[where] if len(args) > where else keywords.get("dim")
    if dim_node is None and default == "required":
        return f"`{ast.unparse(expr)}` takes no dim: its result is a value"
    dim = default if dim_node is None else _int(dim_node)
    if dim_node is not None and dim is None:
        return f"the dim of `{ast.unparse(expr)}` is not an integer literal"
    return x, ".numel()" if dim is None else f".shape[{dim}]", dim


PX, PM, PI, PN = "_mend_x", "_mend_m", "_mend_i", "_mend_n"   # the guarded lambdas' parameters


def _bound(x: str, t: str, bound: str, dim: int | None) -> str:
    """The bound the indices lie below, read on ``x`` only where it is a plain tensor with the
    dimension (None otherwise)."""
    has_dim = "" if dim is None else f" and {x}.dim() > {dim if dim >= 0 else -dim - 1}"
    return f"{x}{bound} if type({x}) is {t}.Tensor{has_dim} else None"


def _guard(lam: ast.Lambda, t: str, method: bool) -> str | None:
    """Why the inner lambda's body is not the guarded count, else None: counted out of place
    (an in-place write into an unbatched ``zeros`` fails under vmap), only for plain 1-D indices
    off the meta device, an int minlength and a non-None bound it covers; the fallback the
    original's bincount (its method form kept: a subclass may override it)."""
    body = lam.body
    if not isinstance(body, ast.IfExp):
        return "the lambda's body is not a conditional expression"
    count = f"{t}.zeros({PM}, dtype={t}.int64, device={PI}.device).scatter_add(0, {PI}, {t}.ones_like({PI}))"
    want = {"test": f"type({PI}) is {t}.Tensor and {PI}.dim() == 1 and {PI}.device.type != 'meta' and "
                    f"type({PM}) is int and {PM} < 2**63 and type({PN}) is int and not {t}.compiler.is_exporting() "
                    f"and {PM} >= {PN}",
            "body": count,
            "orelse": f"{PI}.bincount(minlength={PM})" if method else f"{t}.bincount({PI}, minlength={PM})"}
    for part, text in want.items():
        if ast.unparse(getattr(body, part)) != ast.unparse(ast.parse(text, mode="eval").body):
            return f"the {part} `{ast.unparse(getattr(body, part))}` is not `{text}`"
    return None


def _strip_flatten(node: ast.AST) -> ast.AST | str:
    """``node`` without its ``.flatten()`` / ``.view(-1)`` / ``.reshape(-1)``; why not, for
    another reshape (``view(torch.int32)`` is a cast: a review)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "flatten", "view", "reshape"):
        plain = not node.args and not node.keywords if node.func.attr == "flatten" else (
            len(node.args) == 1 and not node.keywords and _int(node.args[0]) == -1)
        if not plain:
            return f"`{ast.unparse(node)}` reshapes otherwise than to 1-D"
        node = node.func.value
    return node


def _params(lam) -> list[str] | None:
    a = lam.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        return None
    return [p.arg for p in a.args]


def _first_evaluated(value: ast.AST) -> ast.AST:
    while True:
        if isinstance(value, ast.BinOp):
            value = value.left
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            value = value.func.value
        elif isinstance(value, (ast.Attribute, ast.Subscript)):
            value = value.value
        else:
            return value


def _statement(node, parents: dict):
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(id(node))
    return node


def _probe() -> str | None:
    """Indices of argmax/argmin/max/min/topk on the installed torch lie in [0, size), NaN and
    infinities included: None, else what was seen."""
    import torch

    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[nan, 1.0, inf], [-inf, -inf, -inf], [inf, nan, -inf], [0.0, -0.0, 0.0]])
    seen = [x.argmax(-1), x.argmin(-1), x.max(-1)[1], x.min(-1).indices, x.topk(2, dim=-1).indices,
            x.argmax().view(-1), x.max(0)[1]]
    for got, size in zip(seen, (3, 3, 3, 3, 3, x.numel(), 4)):
        if got.dtype != torch.int64 or bool((got < 0).any()) or bool((got >= size).any()):
            return f"torch {torch.__version__}: indices {got.tolist()} ({got.dtype}) outside [0, {size})"
    return None


def _method_form(expr: str | None, t: str) -> bool | None:
    """Whether the original call is ``I.bincount(...)`` (None: not a bincount call)."""
    try:
        call = ast.parse(expr or "", mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "bincount"):
        return None
    return ast.unparse(call.func.value) != t


def in_range(ob: dict, ctx: Ctx) -> Outcome:
    t = ob.get("torch")
    if not t:
        return unknown("the torch name of the mended source is not recorded")
    method = _method_form(ob.get("expr"), t)
    if method is None:
        return unknown("the original bincount call is not recorded")
    return at_every_occurrence(ctx.code, ob.get("mended"),
                               lambda call, parents, tree: _in_range_at(call, parents, tree, t, method))


def _in_range_at(call: ast.Call, parents: dict, tree: ast.Module, t: str, method: bool) -> Outcome:
    torch_names = _module_aliases(tree, "torch")
    if t not in torch_names:
        return check_refuted(BY, f"`{t}` is not bound by `import torch` alone in the mended source")
    # a binding the guard can see (another function's parameter cannot reach it)
    rebound = bound_in_reach(tree, in_tree(tree, call.func) or [call], ("type", "int"))
    if rebound:
        return check_refuted(BY, f"the module binds `{rebound[0]}` where the guard sees it, which the guard "
                             "calls as a builtin")
    lam = call.func
    params = _params(lam)
    if params == [PX]:                 # inline: (lambda x: (lambda i, n, m: ...)(INDICES(x), BOUND(x), M))(X)
        inner = lam.body
        if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Lambda)
                and _params(inner.func) == [PI, PN, PM] and len(inner.args) == 3 and not inner.keywords
                and len(call.args) == 1 and not call.keywords):
            return unknown("the inline form is not `(lambda x: (lambda i, n, m: ...)(indices of x, bound, M))(X)`")
        got = indices_of(inner.args[0], torch_names)
        if isinstance(got, str):
            return check_refuted(BY, got)
        x, bound, dim = got
        if not (isinstance(x, ast.Name) and x.id == PX):
            return check_refuted(BY, f"the indices are of `{ast.unparse(x)}`, not of the parameter the guard reads")
        captured = [n.id for n in ast.walk(inner.args[0]) if isinstance(n, ast.Name) and n.id.startswith("_mend_")
                    and n is not x] + [n.id for n in ast.walk(inner.args[2]) if isinstance(n, ast.Name)
                                       and n.id.startswith("_mend_")]
        if captured:
            return check_refuted(BY, f"`{captured[0]}` in the indices' arguments or minlength is the lambda's own "
                                 "parameter, not the user's name")
        lam_inner, n_arg, m_arg, where = inner.func, inner.args[1], inner.args[2], "inline"
        want_n = _bound(PX, t, bound, dim)
    elif params == [PI, PN, PM]:         # bound on the statement before: (lambda i, n, m: ...)(I, BOUND(X), M)
        if len(call.args) != 3 or call.keywords:
            return unknown("the bound form is not called with (indices, bound, minlength)")
        indices, n_arg, m_arg = call.args
        base = _strip_flatten(indices)
        if isinstance(base, str):
            return check_refuted(BY, base)
        stmt = _statement(call, parents)
        block = parents.get(id(stmt))
        body = next((getattr(block, f) for f in ("body", "orelse", "finalbody", "handlers")
                     if isinstance(getattr(block, f, None), list) and stmt in getattr(block, f)), None)
        prev = body[body.index(stmt) - 1] if body and body.index(stmt) > 0 else None
        if not isinstance(base, ast.Name) or not isinstance(prev, ast.Assign) or len(prev.targets) != 1 or \
                not isinstance(prev.targets[0], ast.Name) or prev.targets[0].id != base.id:
            return check_refuted(BY, "the indices are not a name bound by the statement just before the count")
        got = indices_of(prev.value, torch_names)
        if isinstance(got, str):
            return check_refuted(BY, got)
        x, bound, dim = got
        if not isinstance(x, ast.Name) or x.id == base.id:
            return check_refuted(BY, f"the indices were taken along a dimension of `{ast.unparse(x)}`, not of a "
                                 "tensor named there")
        value = getattr(stmt, "value", None)
        if value is None or _first_evaluated(value) is not call:
            return check_refuted(BY, "the count's statement evaluates something before it")
        if any(isinstance(n, ast.Name) and n.id in (base.id, x.id) for n in ast.walk(m_arg)):
            return check_refuted(BY, "minlength reads the indices or the tensor bounding them")
        lam_inner, where = lam, f"`{base.id}`, bound by the statement before, of `{x.id}`"
        want_n = _bound(x.id, t, bound, dim)
    else:
        return unknown("the guarded expression's parameters are neither (x) nor (i, n, m)")
    if ast.unparse(n_arg) != ast.unparse(ast.parse(want_n, mode="eval").body):
        return check_refuted(BY, f"the bound `{ast.unparse(n_arg)}` is not `{want_n}`, read on the tensor the "
                             "indices were taken from")
    if any(isinstance(n, (ast.Call, ast.NamedExpr, ast.Lambda)) for n in ast.walk(m_arg)):
        return check_refuted(BY, "minlength calls or binds something")
    why = _guard(lam_inner, t, method)
    if why:
        return check_refuted(BY, why)
    probe = _probe()
    if probe:
        return check_refuted(BY, probe)
    import torch

    return checked(BY, [f"indices: {where}",
                        "PyTorch: argmax/argmin/max/min/topk indices lie in [0, size) of the reduced dimension "
                        f"(documented; probed on torch {torch.__version__} with NaN and infinities)",
                        "bincount without weights returns int64 counts on the indices' device"], lemmas=[LEMMA])


ENCODERS = {"bincount-in-range": in_range}
CHECKS = frozenset({"bincount-in-range"})
