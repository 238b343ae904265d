"""The static screen: what may run on a side that used to be conditional (purity, RNG,
effects, in-place writes; what stays is recorded as obligations), which tests are
Python-level, and tensor ``and``/``or``/``not`` -> ``torch.logical_*``."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._common import FORCING_HOOK, has_out_kwarg
from mend.rules.predicated_control_flow.env import _code, _Declined, _Env, _is_atom, _is_literal, _strip, _walk
from mend.taxonomy import call_name

# Calls whose result depends on the RNG: running them on the untaken side advances it.
_RANDOM = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "bernoulli",
           "multinomial", "normal", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "gumbel_softmax", "rrelu", "native_dropout"}
# Ops whose value or gradient can be inf/NaN off their guarded domain: through torch.where
# the untaken side's gradient is 0 * inf = NaN (shared/cases 012, torch issue 187297).
_NONFINITE_GRAD = {"sqrt", "rsqrt", "log", "log2", "log10", "log1p", "reciprocal", "div", "divide", "true_divide",
                   "floor_divide", "fmod", "remainder", "acos", "arccos", "asin", "arcsin", "atanh", "arctanh",
                   "acosh", "arccosh", "exp", "exp2", "expm1", "tan", "erfinv", "digamma", "lgamma", "polygamma",
                   "logit", "norm", "cdist", "atan2", "pow", "float_power", "xlogy", "cosh", "sinh", "hypot",
                   "logsumexp", "std", "var", "std_mean", "var_mean", "i0", "normalize"}
# Methods that leave the graph or mutate Python containers / modules.
_SCALAR_METHODS = {"item", "tolist", "numpy"}
_EFFECT_METHODS = {"backward", "register_hook", "retain_grad", "append", "extend", "insert", "pop", "remove",
                   "clear", "update", "setdefault", "popitem", "discard", "sort", "reverse", "register_buffer",
                   "register_parameter", "register_module", "add_module", "apply", "train", "eval", "zero_grad",
                   "step", "write", "send", "put", "close"}
_TORCH_EFFECT_MODULES = ("torch.cuda.", "torch.distributed.", "torch.random.", "torch.compiler.", "torch._dynamo.",
                         "torch.autograd.", "torch.backends.", "torch.utils.", "torch.jit.", "torch.onnx.",
                         "torch.testing.", "torch.distributions.")
_TORCH_EFFECT_NAMES = {"manual_seed", "seed", "save", "load", "use_deterministic_algorithms", "print"}
_PURE_BUILTINS = {"abs", "len", "min", "max", "float", "int"}
# Constructors of submodules whose call is not pure in training mode.
_IMPURE_SUBMODULES = ("Dropout", "BatchNorm", "InstanceNorm", "RReLU", "SyncBatchNorm")
# Functions and methods that return bool tensors.
_BOOL_CALLS = {"any", "all", "isfinite", "isnan", "isinf", "isneginf", "isposinf", "isreal", "signbit",
               "logical_and", "logical_or", "logical_not", "logical_xor", "eq", "ne", "lt", "le", "gt", "ge",
               "greater", "less", "greater_equal", "less_equal", "not_equal", "isclose", "isin", "bool"}
# Python-level (static) tests: Dynamo folds them, torch.where cannot take them.
_STATIC_ATTRS = {"dtype", "device", "ndim", "shape", "is_cuda", "training", "requires_grad", "is_sparse"}
_STATIC_METHODS = {"dim", "size", "numel", "is_floating_point", "is_complex"}
_STATIC_CALLS = {"isinstance", "hasattr", "callable", "len", "getattr"}







def _screen(expr: cst.CSTNode, env: _Env, side: str | None = None) -> None:
    """Raise _Declined when ``expr`` is not a pure tensor expression.

    ``side`` is the condition under which ``expr`` ran before the rewrite (None: it ran
    unconditionally). Code that used to run conditionally now always runs, so it carries
    obligations: it must not raise, its submodule calls run speculatively, and its
    gradient must stay finite where it is not selected.
    """
    if side is not None and not _is_atom(expr):
        env.oblige("untaken-side-cannot-raise", expr=_code(expr), guard=side)
    for node in _walk(expr):
        if isinstance(node, (cst.Lambda, cst.GeneratorExp, cst.ListComp, cst.SetComp, cst.DictComp)):
            raise _Declined(f"a side builds a `{type(node).__name__}`, which the rule does not predicate")
        if isinstance(node, (cst.NamedExpr, cst.Await, cst.Yield)):
            raise _Declined(f"a side holds `{_code(node)}`, which has an effect")
        if isinstance(node, cst.StarredElement) or m.matches(node, m.Arg(star=m.MatchIfTrue(bool))):
            raise _Declined("a side unpacks `*args`, which the rule does not predicate")
        if isinstance(node, cst.Call):
            _screen_call(node, env, side)
        elif side is not None and isinstance(node, cst.BinaryOperation):
            op = node.operator
            risky = (isinstance(op, (cst.Divide, cst.FloorDivide, cst.Modulo)) and not _is_literal(node.right)) or \
                (isinstance(op, cst.Power) and not m.matches(node.right, m.Integer()))
            if risky:
                env.oblige("finite-gradient", expr=_code(node), op=_code(op).strip(), guard=side)



def _screen_call(call: cst.Call, env: _Env, side: str | None) -> None:
    if _code(call).startswith(FORCING_HOOK):
        return  # the verifier's predicate-forcing hook (verifier/forcing.py); its argument is screened
    who = "a side" if side is not None else "the condition"   # the predicate is screened here too
    if call_name(call) in ("any", "all") and env.qualified(call_name(call)) is None:
        raise _Declined(f"{who} calls the builtin `{call_name(call)}()`, which iterates in Python and stops at the "
                        "first decisive element: there is no single tensor predicate to predicate on (by hand: "
                        f"`torch.stack([...]).{call_name(call)}()` over the same tensors, when each is a 0-d bool)")
    if has_out_kwarg(call):
        raise _Declined(f"{who} writes through `out=`")
    dotted = call_name(call)
    func = call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    qual = env.qualified(dotted) if dotted else None
    if qual is not None and "." in qual:  # a module function: torch.*, F.*, math.*
        last = qual.rsplit(".", 1)[1]
        if not (qual.startswith("torch.") or qual.startswith("math.")):
            raise _Declined(f"{who} calls `{dotted}`, which might not be pure")
        if last.endswith("_") and not last.endswith("__"):
            raise _Declined(f"{who} mutates a tensor in place (`{dotted}`)")
        if last in _RANDOM:
            raise _Declined(f"{who} draws random numbers (`{dotted}`); running it on the untaken side "
                            "would advance the RNG")
        if qual.startswith(_TORCH_EFFECT_MODULES) or last in _TORCH_EFFECT_NAMES or last.startswith(
                ("set_", "_assert")):
            raise _Declined(f"{who} calls `{dotted}`, which has an effect")
        _nonfinite(call, last, env, side)
    elif dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1 and env.hoisting is not None:
        # a memoised initialiser: `self.<attr>(...)` holding a plain function is accepted
        # here only, as an obligation (the verifier checks it is pure and cannot raise)
        attr = dotted.split(".")[1]
        if attr in env.methods:
            raise _Declined(f"the memoised initialisation calls the method `{dotted}`, which might not be pure; "
                            "it cannot be hoisted")
        if attr in env.submodules:
            raise _Declined(f"the memoised initialisation calls `{dotted}`, a submodule ({env.submodules[attr]}); "
                            "only a function held in an attribute is hoisted")
        env.oblige("hoisted-setup-pure", call=_code(call), slot=env.hoisting[0], guard=env.hoisting[1])
    elif dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
        attr = dotted.split(".")[1]
        if attr in env.methods:
            raise _Declined(f"{who} calls the method `{dotted}`, which might not be pure")
        ctor = env.submodules.get(attr, "")
        if any(k in ctor for k in _IMPURE_SUBMODULES):
            raise _Declined(f"{who} calls `{dotted}` ({ctor}), which is not pure in training mode")
        if side is not None:
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
    elif dotted is not None and dotted in env.loop_items:   # `expert(x)`: an item of a loop over self's modules
        if side is not None:
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
    elif dotted is not None and "." not in dotted:  # a bare name: only a few pure builtins
        if dotted not in _PURE_BUILTINS or dotted in env.aliases:
            raise _Declined(f"{who} calls `{dotted}`, which might not be pure")
        if dotted in ("float", "int") and not all(
                isinstance(a.value, (cst.SimpleString, cst.Integer, cst.Float)) or _size_read(a.value) for a in call.args):
            raise _Declined(f"{who} converts a value that may be a tensor to a Python number (`{_code(call)}`): "
                            "a host read")
    elif method is not None:  # a method call: a tensor method, or a submodule of self
        if method.endswith("_") and not method.endswith("__") and not method.startswith("_"):
            raise _Declined(f"{who} mutates a tensor in place (`{method}`)")
        if method in _SCALAR_METHODS:
            raise _Declined(f"{who} reads a Python value out of the graph (`.{method}()`)")
        if method in _EFFECT_METHODS:
            raise _Declined(f"{who} calls `.{method}()`, which may mutate state")
        if method in _RANDOM:
            raise _Declined(f"{who} draws random numbers (`.{method}()`)")
        if dotted is not None and dotted.startswith("self.") and side is not None:
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
        _nonfinite(call, method, env, side)
    elif isinstance(func, cst.Subscript) and _code(_subscript_root(func)).startswith("self."):
        if side is not None:  # self.layers[i](x): a submodule call
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
    else:
        raise _Declined(f"{who} calls `{_code(func)}`, which might not be pure")


def _subscript_root(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Subscript):
        node = node.value
    return node


def _nonfinite(call: cst.Call, name: str, env: _Env, side: str | None) -> None:
    if side is None or name not in _NONFINITE_GRAD:
        return
    if name in ("pow", "float_power") and call.args and isinstance(call.args[-1].value, cst.Integer):
        return  # integer powers are finite with finite gradient
    env.oblige("finite-gradient", expr=_code(call), op=name, guard=side)


# -- tests and tensor logic ----------------------------------------------------------


def _size_read(expr: cst.BaseExpression) -> bool:
    """``x.shape[i]``, ``x.size(i)``, ``x.ndim``, ``x.dim()``, ``x.numel()``, ``len(x)``: a Python int
    (a SymInt under dynamic shapes) Dynamo knows at trace time, never a host read (helper-100 m03:
    ``float(mask.shape[1])`` had been declined as converting a tensor)."""
    if isinstance(expr, cst.Subscript) and m.matches(expr.value, m.Attribute(attr=m.Name("shape"))):
        return True
    if m.matches(expr, m.Attribute(attr=m.Name("ndim"))):
        return True
    return isinstance(expr, cst.Call) and (m.matches(expr.func, m.Attribute(
        attr=m.Name("size") | m.Name("dim") | m.Name("numel"))) or m.matches(expr.func, m.Name("len")))


def _static_value(expr: cst.BaseExpression, env: _Env) -> bool:
    """A value Dynamo knows at trace time: literals, ``x.dtype``, ``x.shape[0]``, ``torch.float16``."""
    if _is_literal(expr) or isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)) or m.matches(
            expr, m.Name("None")):
        return True
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _STATIC_ATTRS or env.qualified(_code(expr)) is not None
    if isinstance(expr, cst.Subscript):
        return _static_value(expr.value, env)
    if isinstance(expr, cst.BinaryOperation):
        return _static_value(expr.left, env) and _static_value(expr.right, env)
    if isinstance(expr, cst.Call):
        name = call_name(expr) or ""
        return name in _STATIC_CALLS or (isinstance(expr.func, cst.Attribute)
                                         and expr.func.attr.value in _STATIC_METHODS)
    return False


def _is_static(expr: cst.BaseExpression, env: _Env) -> bool:
    """A Python-level test (``x is None``, ``isinstance``, ``x.dtype == torch.float16``)."""
    if m.matches(expr, m.Name("True") | m.Name("False") | m.Name("None")):
        return True
    if isinstance(expr, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
            return True
        return all(_static_value(e, env) for e in [expr.left, *(c.comparator for c in expr.comparisons)])
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _is_static(expr.expression, env)
    if isinstance(expr, cst.BooleanOperation):
        return _is_static(expr.left, env) and _is_static(expr.right, env)
    if isinstance(expr, cst.Call):
        return (call_name(expr) or "") in _STATIC_CALLS
    if isinstance(expr, cst.Name) and expr.value not in env.visiting:
        # a local bound only to static tests (`fp16 = h.dtype == torch.float16`)
        values = env.bindings(expr.value)
        env.visiting.add(expr.value)
        try:
            return values is not None and all(_is_static(v, env) for v in values)
        finally:
            env.visiting.discard(expr.value)
    return m.matches(expr, m.Attribute(attr=m.Name("training")))


def _is_bool(expr: cst.BaseExpression) -> bool:
    """Statically a bool tensor: a comparison, ``.any()``, ``torch.isfinite``, logical ops."""
    if isinstance(expr, (cst.Comparison, cst.BooleanOperation)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return isinstance(expr.operator, cst.Not) or (
            isinstance(expr.operator, cst.BitInvert) and _is_bool(expr.expression))
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return _is_bool(expr.left) and _is_bool(expr.right)
    if isinstance(expr, cst.Call):
        name = expr.func.attr.value if isinstance(expr.func, cst.Attribute) else (call_name(expr) or "")
        return name in _BOOL_CALLS
    return False


class _TensorLogic(cst.CSTTransformer):
    """``a and b`` -> ``torch.logical_and(a, b)``, ``not a`` -> ``torch.logical_not(a)``,
    ``a < b < c`` -> ``torch.logical_and(a < b, b < c)``.

    Python's ``and``/``or``/``not`` call ``bool()`` on a tensor, which is the break; the
    logical ops give the same truth value for single-element bool tensors (an obligation).
    """

    def __init__(self, env: _Env):
        super().__init__()
        self.env = env
        self.changed = False

    def _operand(self, expr: cst.BaseExpression) -> None:
        if _is_static(expr, self.env):
            raise _Declined(f"`{_code(expr)}` is a Python-level test mixed with a tensor test; "
                            "torch.logical_* needs tensors on both sides")
        self.env.oblige("single-element-predicate", pred=_code(_strip(expr)))
        if not _is_bool(expr):
            self.env.oblige("bool-operand", expr=_code(_strip(expr)))

    def leave_BooleanOperation(self, original: cst.BooleanOperation, updated: cst.BooleanOperation):
        self._operand(original.left)
        self._operand(original.right)
        # `a and b` skips b when a is false; logical_and always evaluates b, so b must not
        # be able to raise: an integer index (`x[i]`) can, a slice cannot
        for sub in m.findall(original.right, m.Subscript(slice=[m.ZeroOrMore(), m.SubscriptElement(slice=m.Index()),
                                                                 m.ZeroOrMore()])):
            raise _Declined(f"the right operand of `{'and' if isinstance(original.operator, cst.And) else 'or'}` "
                            f"would now run even when the left one short-circuits it, and its indexing "
                            f"(`{_code(sub)}`) may raise")
        self.changed = True
        fn = "logical_and" if isinstance(original.operator, cst.And) else "logical_or"
        return self.env.torch_call(fn, updated.left, updated.right)

    def leave_UnaryOperation(self, original: cst.UnaryOperation, updated: cst.UnaryOperation):
        if not isinstance(original.operator, cst.Not) or _is_static(original.expression, self.env):
            return updated
        self.env.oblige("single-element-predicate", pred=_code(_strip(original.expression)))
        self.changed = True
        return self.env.torch_call("logical_not", updated.expression)

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison):
        if len(updated.comparisons) < 2 or _is_static(original, self.env):
            return updated
        self.changed = True
        left, out = updated.left, None
        for target in updated.comparisons:
            pair = cst.Comparison(left=_strip(left), comparisons=[target])
            self.env.oblige("single-element-predicate", pred=_code(pair))
            out = pair if out is None else self.env.torch_call("logical_and", out, pair)
            left = target.comparator
        return out


def _tensor_logic(expr: cst.BaseExpression, env: _Env) -> tuple[cst.BaseExpression, bool]:
    tr = _TensorLogic(env)
    out = expr.visit(tr)
    return out, tr.changed


def _predicate(test: cst.BaseExpression, env: _Env) -> cst.BaseExpression:
    """The tensor predicate of a test: logic ops converted, obligations recorded."""
    if _is_static(test, env):
        raise _Declined(f"the test `{_code(test)}` is a Python-level check, not a tensor predicate")
    env.oblige("single-element-predicate", pred=_code(_strip(test)))
    if not _is_bool(test):
        # `if n_pad:` reads bool(n_pad), which for a one-element tensor of any dtype is
        # `n_pad != 0` (NaN true, -0.0 false, complex: nonzero): a bool tensor torch.where
        # and torch.cond take (held-out review case 343)
        left = _strip(test)
        if not isinstance(left, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
            left = left.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Comparison(left=left, comparisons=[cst.ComparisonTarget(cst.NotEqual(), cst.Integer("0"))])
    out, _ = _tensor_logic(test, env)
    return _strip(out)


def _split_static_guard(test: cst.BaseExpression, env: _Env):
    """``A and B`` with a Python-level ``A`` -> (A, B); otherwise (None, test)."""
    operands = []
    node = test
    while isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And) and not node.lpar:
        operands.insert(0, node.right)
        node = node.left
    operands.insert(0, node)
    n = 0
    while n < len(operands) and _is_static(operands[n], env):
        n += 1
    if n == 0 or n == len(operands):
        return None, test

    def join(parts):
        out = parts[0]
        for p in parts[1:]:
            out = cst.BooleanOperation(left=out, operator=cst.And(), right=p)
        return out

    return join(operands[:n]), join(operands[n:])


# -- branch analysis -----------------------------------------------------------------
