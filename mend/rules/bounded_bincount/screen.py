"""bounded-bincount: which ``torch.bincount(I, minlength=M)`` sites the rule takes (``I`` the
indices of an ``argmax``/``argmin``/``max``/``min``/``topk`` along one dimension of ``X``,
inline or bound on the line just before), why it declines the others, and :func:`match`."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._bindings import aliases, bindings, bound_in_reach
from mend.rules._common import code_of, dotted
from mend.taxonomy import UNFIXABLE_REASONS

NAME = "bounded-bincount"

# builtins the guarded expression calls: a module binding one changes what the guard means
GUARD_BUILTINS = ("type", "int")
# index producers: method/function name -> (index of the dim among the arguments after X,
# default dim (None: the flattened tensor), whether the indices are `[1]` / `.indices` of a pair)
PRODUCERS = {"argmax": (0, None, False), "argmin": (0, None, False), "max": (0, "required", True),
             "min": (0, "required", True), "topk": (1, -1, True)}
# reshapes to 1-D that keep every index value
FLATTEN = ("flatten", "view", "reshape")

# the guarded lambda's parameters: a user's name spelled so would be captured (declined)
PARAM_X, PARAM_M, PARAM_I, PARAM_N = "_mend_x", "_mend_m", "_mend_i", "_mend_n"

GENERIC = UNFIXABLE_REASONS["dynamic-shape-op"]   # another dynamic-shape op: the category's own reason


@dataclass
class Provenance:
    x: cst.BaseExpression       # the tensor whose dimension bounds the indices
    bound: str                  # `.shape[d]` or `.numel()`: read on x, the indices lie in [0, that)
    text: str                   # the index expression with x written as `_mend_x`
    dim: int | None = None      # d, when the indices are along one dimension (the guard checks x has it)


@dataclass
class Plan:
    call: cst.Call              # the bincount call to replace
    torch_name: str
    minlength: cst.BaseExpression
    indices: cst.BaseExpression     # the first argument as written
    inline: Provenance | None       # the indices made inline from x
    local: tuple[str, Provenance] | None = None   # (name, provenance) bound on the line before


def _int_literal(node) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(
            node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


def _plain(node: cst.BaseExpression) -> bool:
    """A literal int, a name or an attribute chain (``self.num_experts``): evaluating it moves
    nothing another argument could observe."""
    return _int_literal(node) is not None or dotted(node) is not None


def _to_1d(call: cst.Call) -> bool:
    """``.flatten()``, ``.view(-1)`` or ``.reshape(-1)``: the indices made 1-D, every value kept
    (``view(torch.int32)`` is a cast: a review)."""
    args = call.args
    if call.func.attr.value == "flatten":
        return not args
    return len(args) == 1 and args[0].keyword is None and _int_literal(args[0].value) == -1


def provenance(expr: cst.BaseExpression, torch_names: set[str]) -> Provenance | str:
    """Where the index tensor ``expr`` comes from: an argmax/argmin (a dim or none), the
    indices of max/min along a dim, or of topk; optionally made 1-D by ``.flatten()``,
    ``.view(-1)`` or ``.reshape(-1)``. Else why not, in words."""
    wrap = []
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in FLATTEN:
        if not _to_1d(expr):
            return f"`{code_of(expr).strip()}` reshapes otherwise than to 1-D"
        wrap.append(expr.func.attr.value + ("()" if not expr.args else "(-1)"))
        expr = expr.func.value
    pick = ""
    if isinstance(expr, cst.Subscript):
        sl = expr.slice
        if len(sl) != 1 or not isinstance(sl[0].slice, cst.Index) or _int_literal(sl[0].slice.value) != 1:
            return f"`{code_of(expr).strip()}` is not the indices (`[1]`) of a max/min/topk"
        pick, expr = "[1]", expr.value
    elif isinstance(expr, cst.Attribute) and expr.attr.value == "indices":
        pick, expr = ".indices", expr.value
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return "the indices are not made by argmax, argmin, max, min or topk in the same statement or the line before"
    fn = expr.func.attr.value
    receiver = expr.func.value
    args = list(expr.args)
    if fn not in PRODUCERS:
        return f"the indices come from `{fn}`, not argmax, argmin, max, min or topk"
    where, default, paired = PRODUCERS[fn]
    if bool(pick) != paired:
        return f"`{code_of(expr).strip()}{pick}` is not an index tensor of {fn}"
    if dotted(receiver) in torch_names:          # torch.argmax(X, ...)
        if not args or args[0].keyword is not None or args[0].star:
            return f"`{code_of(expr).strip()}` does not pass the tensor first"
        x, rest = args[0].value, args[1:]
    elif (dotted(receiver) or "").split(".")[0] in torch_names:
        # `torch.Tensor.topk(probs, 2)`: an unbound method, its tensor the first argument (a review)
        return f"`{code_of(expr).strip()}` calls `{dotted(receiver)}.{fn}` unbound"
    else:                                        # X.argmax(...)
        x, rest = receiver, args
    if any(a.star for a in rest):
        return f"`{code_of(expr).strip()}` unpacks its arguments"
    positional = [a for a in rest if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in rest if a.keyword is not None}
    allowed = {"argmax": {"dim", "keepdim"}, "argmin": {"dim", "keepdim"}, "max": {"dim", "keepdim"},
               "min": {"dim", "keepdim"}, "topk": {"k", "dim", "largest", "sorted"}}[fn]
    if set(keywords) - allowed or len(positional) > len(allowed):
        return f"`{code_of(expr).strip()}` passes an argument the rule does not read"
    if fn == "topk":
        k = positional[0].value if positional else keywords.get("k")
        if k is None or not _plain(k):
            return f"topk's k in `{code_of(expr).strip()}` is not a literal, a name or an attribute"
    dim_node = positional[where].value if len(positional) > where else keywords.get("dim")
    if dim_node is None and default == "required":
        return f"`{code_of(expr).strip()}` takes no dim: its result is a value, not indices"
    dim = default if dim_node is None else _int_literal(dim_node)
    if dim_node is not None and dim is None:
        return f"the dim of `{code_of(expr).strip()}` is not an integer literal"
    for extra in [a.value for a in positional[where + 1:]] + [v for key, v in keywords.items() if key != "dim"]:
        if not (_plain(extra) or isinstance(extra, cst.Name)):
            return f"an argument of `{code_of(expr).strip()}` is not a literal, a name or an attribute"
    bound = ".numel()" if dim is None else f".shape[{dim}]"
    inner = code_of(expr.with_changes(func=expr.func.with_changes(value=cst.Name(PARAM_X)))) if x is receiver else \
        code_of(expr.with_changes(args=[expr.args[0].with_changes(value=cst.Name(PARAM_X)), *expr.args[1:]]))
    text = inner.strip() + pick + "".join("." + w for w in reversed(wrap))
    return Provenance(x, bound, text, dim)


def _first_evaluated(value: cst.BaseExpression) -> cst.BaseExpression:
    """The subexpression Python evaluates first in ``value`` (the left operand, the receiver
    of a method call, the object of an attribute or subscript)."""
    while True:
        if isinstance(value, cst.BinaryOperation):
            value = value.left
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not _is_bincount(value):
            value = value.func.value
        elif isinstance(value, (cst.Attribute, cst.Subscript)):
            value = value.value
        else:
            return value


def _is_bincount(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "bincount"


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined
    (``Decline(None, GENERIC)`` when the statement calls no bincount: another dynamic-shape op)."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    found = [c for c in m.findall(node, m.Call()) if _is_bincount(c)] if not isinstance(node, cst.BaseCompoundStatement) else []
    if module is None or not found:
        return Decline(None, GENERIC)
    binds = bindings(module)
    torch_names = aliases(binds, "torch")
    call = found[0]
    if len(found) > 1:
        return Decline(NAME, "the statement calls bincount more than once")
    recv = call.func.value
    args = list(call.args)
    root = (dotted(recv) or "").split(".")[0]
    if dotted(recv) in torch_names:               # torch.bincount(I, minlength=M)
        torch_name = dotted(recv)
        if not args or args[0].keyword is not None or args[0].star:
            return Decline(NAME, "torch.bincount is not given its input first")
        indices, rest = args[0].value, args[1:]
    elif root in binds and any(h[0] == "import" for h in binds[root]):
        return Decline(NAME, f"`{dotted(recv)}.bincount` is not torch's: `{root}` is not bound by `import torch` "
                       "alone")
    else:                                         # I.bincount(minlength=M)
        if not torch_names:
            return Decline(NAME, "the module does not bind `torch` by `import torch` alone, which the rewrite needs")
        torch_name, indices, rest = sorted(torch_names)[0], recv, args
    keywords = {a.keyword.value: a.value for a in rest if a.keyword is not None}
    if any(a.keyword is None or a.star for a in rest) or set(keywords) != {"minlength"}:
        return Decline(NAME, "only `bincount(indices, minlength=M)` is taken: weights change the dtype and a "
                       "missing minlength leaves the length to the data")
    minlength = keywords["minlength"]
    if not _plain(minlength):
        return Decline(NAME, f"minlength `{code_of(minlength).strip()}` is not a literal, a name or an attribute")
    rebound = bound_in_reach(module, call, GUARD_BUILTINS)   # another function's `max=` cannot reach it
    if rebound:
        return Decline(NAME, f"the module binds `{rebound[0]}` where the rewritten expression would see it (at the "
                       "top level, in this function or one around it, or by global/nonlocal), and calls it as a builtin")
    if any(n.value.startswith("_mend_") for n in _names(call)):
        return Decline(NAME, "the call names `_mend_...`, the rewrite's own lambda parameters")
    prov = provenance(indices, torch_names)
    if isinstance(prov, Provenance):
        return Plan(call, torch_name, minlength, indices, prov)
    local = _local(node, ancestors, indices, call, torch_names)
    if isinstance(local, str):
        return Decline(NAME, f"the indices are not known to lie below minlength: {prov}" if local == "" else local)
    return Plan(call, torch_name, minlength, indices, None, local)


def _local(node, ancestors, indices, call, torch_names) -> tuple[str, Provenance] | str:
    """``(name, provenance)`` when the indices are a name (optionally ``.flatten()``-ed) bound
    on the statement just before the site, in the same block, from the indices of a tensor
    that is itself a name; "" when the indices are not a name; else why not."""
    base = indices
    while isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and base.func.attr.value in FLATTEN:
        if not _to_1d(base):
            return f"`{code_of(base).strip()}` reshapes otherwise than to 1-D"
        base = base.func.value
    if not isinstance(base, cst.Name):
        return ""
    name = base.value
    line = next((a for a in reversed(ancestors) if isinstance(a, cst.SimpleStatementLine)), None)
    block = next((a for a in reversed(ancestors) if isinstance(a, (cst.IndentedBlock, cst.Module))), None)
    if line is None or block is None or line.body[0] is not node or len(line.body) != 1:
        return f"`{name}` is read on a line that holds other statements"
    body = list(block.body)
    at = next((i for i, s in enumerate(body) if s is line), None)
    prev = body[at - 1] if at else None
    if not isinstance(prev, cst.SimpleStatementLine) or len(prev.body) != 1 or not isinstance(prev.body[0], cst.Assign):
        return (f"`{name}` is not known to lie below minlength: it is not bound on the line just before the "
                "bincount by an argmax, argmin, max, min or topk (what runs in between could change it or the "
                "tensor that bounds it)")
    assign = prev.body[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name) or \
            assign.targets[0].target.value != name:
        return f"the line before does not bind `{name}` alone"
    prov = provenance(assign.value, torch_names)
    if isinstance(prov, str):
        return f"`{name}` is not known to lie below minlength: {prov}"
    if not isinstance(prov.x, cst.Name) or prov.x.value == name:
        return f"the tensor bounding `{name}` is not a plain name, so it cannot be read again at the bincount"
    if _first_evaluated(_value_of(node)) is not call:
        return "the statement evaluates something before the bincount, which could change the indices"
    mentions = {n.value for n in _names(call) if n is not base}
    if name in mentions or prov.x.value in mentions:
        return f"the bincount's other arguments read `{name}` or `{prov.x.value}`"
    return name, prov


def _value_of(node: cst.CSTNode):
    if isinstance(node, (cst.Assign, cst.AugAssign, cst.Return, cst.Expr)):
        return node.value
    if isinstance(node, cst.AnnAssign) and node.value is not None:
        return node.value
    return node


def _names(node: cst.CSTNode) -> list[cst.Name]:
    out = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return out


def match(loc: Located) -> Match | Decline:
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    where = "inline" if plan.inline is not None else f"`{plan.local[0]}`, bound on the line before"
    return Match(NAME, f"bincount -> zeros(minlength).scatter_add ({where}: indices below the bounding dimension), "
                 "under a guard that keeps bincount unless minlength covers that dimension")
