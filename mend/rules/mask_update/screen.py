"""mask-update: which sites the rule takes (``x[mask] = f(x[mask])``, ``x[mask] op= c``), why
it declines the others, and :func:`match`, a scan's verdict on a located site.

``f`` must be built only from operators that are elementwise, exactly rounded (IEEE
``+ - * /``, negation, ``abs``, ``relu``, ``clamp`` with constant bounds) and cannot raise
on any value, over numeric constants and names indexed by the same mask: then
``f(x)[mask]`` is ``f(x[mask])`` bit for bit, and computing ``f`` off the mask changes
nothing but, possibly, the gradient (an obligation)."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted
from mend.rules._scalars import scalar_candidates

NAME = "mask-update"

# elementwise, exactly rounded, total: f(x)[mask] == f(x[mask]) bit for bit, never raises
EXACT_CALLS = {"abs", "neg", "negative", "relu", "clamp", "clip", "sign", "sgn"}
BIN_OPS = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/"}
AUG_OPS = {cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/"}
# off the mask these are NaN/inf, or have an inf/NaN derivative: torch.where's zero upstream gradient
# times it is NaN (torch.where(m, sqrt(x), x) has grad NaN at x = -1)
PARTIAL_CALLS = {"sqrt", "rsqrt", "log", "log2", "log10", "log1p", "reciprocal", "pow", "float_power", "acos", "asin",
                 "atanh", "acosh", "erfinv", "logit", "digamma", "lgamma", "div", "true_divide", "fmod", "remainder",
                 "floor_divide"}
# vectorised transcendental kernels: the whole tensor and the gathered elements can differ by an ulp
# (measured on torch 2.13 CPU: sigmoid, gelu)
INEXACT_CALLS = {"exp", "expm1", "tanh", "sigmoid", "gelu", "silu", "softplus", "sin", "cos", "tan", "atan", "erf",
                 "erfc", "sinh", "cosh", "asinh", "log_sigmoid", "mish", "elu", "selu", "celu", "hardswish"}


@dataclass
class Plan:
    line: cst.SimpleStatementLine
    target: str            # the updated tensor, a plain name
    mask: str              # the mask expression (source)
    new_value: str         # f over whole tensors (source)
    operands: list[str]    # names read through the mask, the target first
    torch_name: str
    scalars: list[str]     # Python-number operands (`self.scale`, a local `s = 0.5`): broadcast alike


def torch_aliases(module: cst.Module | None) -> dict[str, str]:
    """How the module names ``torch`` (``torch``, ``th``): alias -> "torch"."""
    names = {}
    for stmt in module.body if module is not None else ():
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if dotted(alias.name) == "torch":
                        names[alias.asname.name.value if alias.asname else "torch"] = "torch"
    return names


def single_index(sub: cst.Subscript) -> cst.BaseExpression | None:
    """The index of ``x[i]`` (one plain index, no slice, no star), else None."""
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index) or sub.slice[0].slice.star:
        return None
    return sub.slice[0].slice.value


def is_mask_statement(node: cst.CSTNode) -> bool:
    """The statement shape of the category: ``x[e] op= ...`` or ``x[e] = ...x[e]...`` (the same
    index read on the right), one target, one index."""
    if isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Subscript):
        return single_index(node.target) is not None
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Subscript):
        idx = single_index(node.targets[0].target)
        if idx is None:
            return False
        want = code_of(idx).strip()
        import libcst.matchers as m
        return any(single_index(s) is not None and code_of(single_index(s)).strip() == want
                   for s in m.findall(node.value, m.Subscript()))
    return False


def _mask_ok(node: cst.BaseExpression) -> str | None:
    """Why the mask expression is out of scope (it must be pure and cheap to read once), else None."""
    if isinstance(node, cst.Name):
        return None
    if isinstance(node, cst.Comparison):
        parts = [node.left] + [c.comparator for c in node.comparisons]
        for p in parts:
            if not isinstance(p, (cst.Name, cst.Integer, cst.Float)) and not (
                    isinstance(p, cst.UnaryOperation) and isinstance(p.operator, cst.Minus)
                    and isinstance(p.expression, (cst.Integer, cst.Float))):
                return f"`{code_of(p).strip()}` in the mask is not a plain name or number"
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return _mask_ok(node.expression)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr)):
        return _mask_ok(node.left) or _mask_ok(node.right)
    return f"the mask `{code_of(node).strip()}` is not a name, a comparison of names and numbers, or `~ & |` of those"


class _Lift:
    """f over the selected elements -> f over the whole tensors (``y[mask]`` -> ``y``), or why not."""

    def __init__(self, mask: str, aliases: dict[str, str], scalars: set[str] = frozenset(), clone: bool = False):
        self.mask, self.aliases, self.operands, self.why = mask, aliases, [], None
        self.candidates, self.scalars = scalars, []
        # an op whose backward saves a masked read itself (abs/clamp of it, it times a tensor, it
        # over or under a tensor divisor): read as x, copy_ would overwrite what backward saved
        # (helper-37: "modified by an inplace operation"); the original's x[mask] was a copy
        self.saves, self.clone = False, clone

    def _operand(self, node: cst.BaseExpression) -> bool:
        """A tensor operand (not a number literal or a Python-number attribute)."""
        while isinstance(node, cst.UnaryOperation):
            node = node.expression
        return not isinstance(node, (cst.Integer, cst.Float)) and (dotted(node) or "") not in self.candidates

    def fail(self, why: str):
        if self.why is None:
            self.why = why
        return None

    def lift(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        if self.why is not None:
            return None
        if isinstance(node, (cst.Integer, cst.Float)):
            return node
        if isinstance(node, cst.Subscript):
            idx = single_index(node)
            if idx is None or code_of(idx).strip() != self.mask:
                return self.fail(f"`{code_of(node).strip()}` is not indexed by the mask `{self.mask}`")
            if not isinstance(node.value, cst.Name):
                return self.fail(f"`{code_of(node.value).strip()}` is not a plain name")
            if node.value.value not in self.operands:
                self.operands.append(node.value.value)
            if self.clone:
                return cst.Call(func=cst.Attribute(node.value, cst.Name("clone")), lpar=node.lpar, rpar=node.rpar)
            return node.value.with_changes(lpar=node.lpar, rpar=node.rpar)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            inner = self.lift(node.expression)
            return None if inner is None else node.with_changes(expression=inner)
        if isinstance(node, cst.BinaryOperation):
            if type(node.operator) not in BIN_OPS:
                op = code_of(node.operator).strip()
                if isinstance(node.operator, (cst.FloorDivide, cst.Modulo)):
                    return self.fail(f"`{op}` on the whole tensor raises on an integer zero divisor off the mask")
                if isinstance(node.operator, cst.Power):
                    return self.fail("`**` off the mask can be NaN/inf or have a NaN/inf derivative")
                return self.fail(f"the operator `{op}` is not an exactly rounded elementwise operator")
            both = self._operand(node.right) and (isinstance(node.operator, cst.Divide) or self._operand(node.left))
            if isinstance(node.operator, (cst.Multiply, cst.Divide)) and both and (
                    isinstance(node.left, cst.Subscript) or isinstance(node.right, cst.Subscript)):
                self.saves = True
            left, right = self.lift(node.left), self.lift(node.right)
            return None if left is None or right is None else node.with_changes(left=left, right=right)
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, (cst.Name, cst.Attribute)) and (dotted(node) or "") in self.candidates:
            # a Python number broadcasts against the whole tensor as against the selected elements
            if dotted(node) not in self.scalars:
                self.scalars.append(dotted(node))
            return node
        if isinstance(node, (cst.Name, cst.Attribute)):
            return self.fail(f"`{code_of(node).strip()}` is not indexed by the mask: it broadcasts against the "
                             "selected elements, not against the whole tensor")
        return self.fail(f"`{code_of(node).strip()}` is not an exactly rounded elementwise expression")

    def call(self, node: cst.Call) -> cst.BaseExpression | None:
        name = dotted(node.func) or ""
        method = isinstance(node.func, cst.Attribute) and name.split(".")[0] not in self.aliases
        last = name.rsplit(".", 1)[-1] if name else (node.func.attr.value if isinstance(node.func, cst.Attribute) else "")
        if not method and not (name.count(".") == 1 and name.split(".")[0] in self.aliases):
            return self.fail(f"`{code_of(node.func).strip()}` is not a torch function or tensor method")
        if last in PARTIAL_CALLS:
            return self.fail(f"`{last}` on the whole tensor: off the mask it can be NaN/inf or have an inf/NaN "
                             "derivative, and torch.where's zero gradient times it is NaN")
        if last in INEXACT_CALLS:
            return self.fail(f"`{last}` is not exactly rounded: on the whole tensor its vectorised kernel can differ "
                             "by an ulp from the gathered elements (measured for sigmoid, gelu)")
        if last not in EXACT_CALLS:
            return self.fail(f"`{last}` is not an exactly rounded elementwise operator the rule knows")
        args = list(node.args)
        if any(a.star for a in args) or any(a.keyword is not None and a.keyword.value not in ("min", "max")
                                            for a in args):
            return self.fail(f"`{code_of(node).strip()}`: only `min=`/`max=` keywords are understood")
        operand_first = [] if method else args[:1]
        bounds = args if method else args[1:]
        if not method and (not args or args[0].keyword is not None):
            return self.fail(f"`{code_of(node).strip()}`: the tensor is not the first positional argument")
        tensor = node.func.value if method else (args[0].value if args else None)
        if last in ("abs", "clamp", "clip") and isinstance(tensor, cst.Subscript):   # backward saves the input
            self.saves = True
        if last in ("clamp", "clip"):
            for b in bounds:
                v = b.value
                if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus):
                    v = v.expression
                if not isinstance(v, (cst.Integer, cst.Float)):
                    return self.fail(f"the clamp bound `{code_of(b.value).strip()}` is not a number")
        elif bounds:
            return self.fail(f"`{code_of(node).strip()}` has arguments the rule does not understand")
        if method:
            recv = self.lift(node.func.value)
            return None if recv is None else node.with_changes(func=node.func.with_changes(value=recv))
        first = self.lift(operand_first[0].value)
        return None if first is None else node.with_changes(args=[args[0].with_changes(value=first), *args[1:]])


def _guarded_fallback(ancestors: list[cst.CSTNode]) -> bool:
    """The statement is the ``else`` of an ``if`` whose body is a mask-update rewrite."""
    for i, node in enumerate(ancestors):
        if isinstance(node, cst.If) and isinstance(node.orelse, cst.Else) and i + 1 < len(ancestors) \
                and ancestors[i + 1] is node.orelse:
            first = node.body.body[0] if node.body.body else None
            comment = getattr(getattr(first, "trailing_whitespace", None), "comment", None)
            return comment is not None and comment.value.startswith(f"# mend: {NAME}")
    return False


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined."""
    if not is_mask_statement(node):
        return Decline(NAME, "the statement is not `x[mask] = f(x[mask])` or `x[mask] op= value`")
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    aliases = torch_aliases(module)
    if not aliases:
        return Decline(NAME, "the module does not `import torch`: the rewrite needs torch.where")
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.SimpleStatementLine) or len(parent.body) != 1:
        return Decline(NAME, "the update shares its line with other statements")
    if _guarded_fallback(ancestors):
        return Decline(NAME, "the update is the fallback of a guarded mask-update rewrite (it runs only where the "
                             "in-place torch.where would not write the same)")
    if not any(isinstance(a, cst.FunctionDef) for a in ancestors):
        return Decline(NAME, "the update is not inside a function")
    sub = node.target if isinstance(node, cst.AugAssign) else node.targets[0].target
    if not isinstance(sub.value, cst.Name):
        return Decline(NAME, f"the updated tensor `{code_of(sub.value).strip()}` is not a plain local name "
                       "(an attribute may be a property)")
    target = sub.value.value
    idx = single_index(sub)
    why = _mask_ok(idx)
    if why:
        return Decline(NAME, why)
    mask = code_of(idx).strip()
    plan = _lifted(node, parent, target, mask, aliases, scalar_candidates(ancestors) - {target}, clone=False)
    if isinstance(plan, tuple):   # the operands read through .clone(), as the original read copies
        plan = _lifted(node, parent, target, mask, aliases, scalar_candidates(ancestors) - {target}, clone=True)
    return plan


def _lifted(node, parent, target: str, mask: str, aliases, scalars: set[str], clone: bool):
    """The Plan, a Decline, or (without ``clone``) ``("saves",)`` when f has an op whose backward
    saves an operand, so that the operands must be read through ``.clone()``."""
    lifter = _Lift(mask, aliases, scalars, clone=clone)
    lifter.operands.append(target)
    if isinstance(node, cst.AugAssign):
        if type(node.operator) not in AUG_OPS:
            return Decline(NAME, f"`{code_of(node.operator).strip()}` is not `+= -= *= /=`")
        rhs = lifter.lift(node.value)
        if rhs is None:
            return Decline(NAME, lifter.why)
        if isinstance(node.operator, (cst.MultiplyAssign, cst.DivideAssign)) and lifter._operand(node.value):
            lifter.saves = True
        rtext = code_of(rhs).strip()
        if isinstance(rhs, (cst.BinaryOperation, cst.UnaryOperation)) and not rhs.lpar:
            rtext = f"({rtext})"
        new_value = f"{target} {AUG_OPS[type(node.operator)]} {rtext}"
    else:
        lifted = lifter.lift(node.value)
        if lifted is None:
            return Decline(NAME, lifter.why)
        new_value = code_of(lifted).strip()
    if isinstance(node, cst.AugAssign) and clone:
        new_value = f"{target}.clone() {new_value[len(target):].lstrip()}"
    if lifter.saves and not clone:
        return ("saves",)
    return Plan(parent, target, mask, new_value, lifter.operands, next(iter(aliases)), lifter.scalars)


def match(loc: Located) -> Match | Decline:
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    return Match(NAME, f"`{plan.target}[{plan.mask}] = ...` -> `{plan.target}.copy_(torch.where({plan.mask}, "
                 f"{plan.new_value}, {plan.target}))` (elementwise, exactly rounded, in place)")
