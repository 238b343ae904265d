"""Rule: predicated control flow (GraphMend, arXiv 2509.16248, §4 "[Where]").

A data-dependent ``if``/``else`` on a tensor predicate becomes one graph-native selection,
``torch.where(pred, a, b)``, and a tensor ``a and b`` / ``a or b`` / ``not a`` becomes
``torch.logical_and`` / ``torch.logical_or`` / ``torch.logical_not``.

Rewrites (see ``FIX_EXAMPLES``):

* if/else (or an elif chain) assigning the same names -> one ``torch.where`` per name
  (nested for elif), the predicates evaluated once into fresh ``_mend_pred_<n>`` names
  when more than one selection reads them;
* if without else, its targets defined before -> ``x = torch.where(p, a, x)``;
* both sides ``return`` (also ``if p: return a`` followed by ``return b``) ->
  ``return torch.where(p, a, b)``;
* ``if <Python test> and <tensor test>:`` without else -> ``if <Python test>:`` around
  the selection; an ``elif`` site whose chain starts with a Python test -> ``else:``
  around it;
* a name assigned on one side only and used nowhere else (a setup temporary) is kept as
  a plain assignment before the selection;
* setup that GraphMend hoists (the LongRoPE frequency update of transformers'
  ``modeling_rope_utils``): a memoised initialisation ``if not hasattr(self, "k"):
  self.k = self.init_fn(...)`` under its five conditions (no ``else``; ``self.k``
  definitely assigned; the rest of its body neutral; ``self.k`` read nowhere but by the
  selection; the initialiser pure and unable to raise -- a ``self.<attr>(...)`` call that
  is neither a method nor a submodule is accepted here only, as the obligations
  ``hoisted-setup-pure`` / ``hoisted-setup-cannot-raise``) and an idempotent device move
  ``self.a = self.a.to(d)`` (obligation ``idempotent-device-move``) run first, on every
  path;
* every side ending with ``self.register_buffer("<same name>", v_i, <same other args>)``
  -> one call on ``torch.where(p, v_1, v_2)`` (obligations: same shape and dtype; the
  buffer is a new tensor, no longer an alias of ``v_i``: ``paired-call-value-not-aliased``).

:func:`match` runs :func:`rewrite` on the located site, so the static screen and the
rewrite agree.

Fix safety: ``torch.where`` evaluates both sides. The rule declines what it can see is
unsafe (``DECLINE_EXAMPLES``): a side that mutates state (other than the hoistable
setup above), raises, returns early while the other falls through, assigns ``None``,
draws random numbers, calls something that might not be pure, holds a nested compound
statement, setup that fails one of the hoisting conditions, trailing calls that differ in
name or arguments, or a site inside a loop (Dynamo skipped
the frame; predicating would run the untaken side every iteration, cf. shared/cases 006).
What the source cannot decide -- equal shapes and dtypes, a single-element bool
predicate, an untaken side that cannot raise, finite gradients through the untaken side
(shared/cases 012) -- is returned as proof obligations for the verifier.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from textwrap import dedent

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.locate import Located
from mend.rules import Decline, Match, RewriteResult
from mend.rules._effects import assigned_name, has_out_kwarg, inplace_call, simple_statements  # noqa: F401
from mend.taxonomy import call_name

NAME = "predicated-control-flow"


def branches(node: cst.If) -> list[tuple[cst.BaseExpression | None, cst.BaseSuite]]:
    """``[(test, body), ..., (None, else_body)]`` for an if/elif/else chain."""
    out = []
    cur: cst.If | cst.Else | None = node
    while isinstance(cur, cst.If):
        out.append((cur.test, cur.body))
        cur = cur.orelse
    if isinstance(cur, cst.Else):
        out.append((None, cur.body))
    return out


def is_device_move(stmt) -> bool:
    """``self.a = self.a.to(device)``: idempotent; may be hoisted out of a branch."""
    return bool(m.matches(stmt, m.Assign(
        targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))],
        value=m.Call(func=m.Attribute(attr=m.Name("to"))))) and
        stmt.targets[0].target.deep_equals(stmt.value.func.value))


def memo_slot(stmt) -> tuple[str, str] | None:
    """``(obj, key)`` for ``if not hasattr(obj, "key"): ...``, a memoised initialisation."""
    if not m.matches(stmt, m.If(test=m.UnaryOperation(operator=m.Not(), expression=m.Call(
            func=m.Name("hasattr"), args=[m.Arg(value=m.Name(), keyword=None),
                                          m.Arg(value=m.SimpleString(), keyword=None)])))):
        return None
    obj, key = stmt.test.expression.args
    text = key.value.evaluated_value
    if not isinstance(text, str) or not text.isidentifier():
        return None
    return obj.value.value, text


def _return_follows(node: cst.If, parent: cst.CSTNode | None) -> bool:
    """``if p: return a`` directly followed by ``return b`` in the same block."""
    body = getattr(parent, "body", None)
    if not isinstance(body, (list, tuple)) or node not in body:
        return False
    i = list(body).index(node)
    nxt = body[i + 1] if i + 1 < len(body) else None
    return (isinstance(nxt, cst.SimpleStatementLine) and len(nxt.body) == 1
            and isinstance(nxt.body[0], cst.Return) and nxt.body[0].value is not None)


def match(loc: Located) -> Match | Decline:
    """Whether :func:`rewrite` would rewrite the site at ``loc``: it runs the rewrite on
    ``loc.module`` and keeps only the verdict, so the two always agree."""
    node = loc.node
    if isinstance(node, cst.BaseSmallStatement) and loc.ancestors and isinstance(
            loc.ancestors[-1], cst.SimpleStatementLine):
        node = loc.ancestors[-1]
    try:
        result = _rewrite_at(loc.module, node, loc.line)
    except Exception as exc:  # a scan must survive a rule bug; say what failed
        return Decline(NAME, f"the rewrite failed on this site ({type(exc).__name__}: {exc})")
    if isinstance(result, Decline):
        return result
    return Match(NAME, result.detail)


# --------------------------------------------------------------------------------------
# Rewrite
# --------------------------------------------------------------------------------------


class _Declined(Exception):
    """Internal: unwinds to :func:`rewrite`, which turns it into a :class:`Decline`."""


# Calls whose result depends on the RNG: running them on the untaken side advances it.
_RANDOM = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "bernoulli",
           "multinomial", "normal", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "gumbel_softmax", "rrelu", "native_dropout"}
# Ops whose value or gradient can be inf/NaN off their guarded domain: through torch.where
# the untaken side's gradient is 0 * inf = NaN (shared/cases 012, torch issue 187297).
_NONFINITE_GRAD = {"sqrt", "rsqrt", "log", "log2", "log10", "log1p", "reciprocal", "div", "divide", "true_divide",
                   "floor_divide", "fmod", "remainder", "acos", "arccos", "asin", "arcsin", "atanh", "arctanh",
                   "acosh", "arccosh", "exp", "exp2", "expm1", "tan", "erfinv", "digamma", "lgamma", "polygamma",
                   "logit", "norm", "cdist", "atan2", "pow", "float_power", "xlogy"}
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

_ATOMS = (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    """Drop redundant outer parentheses of an expression placed as a call argument."""
    if isinstance(expr, (cst.Tuple, cst.GeneratorExp, cst.NamedExpr, cst.Yield)) or not getattr(expr, "lpar", None):
        return expr
    return expr.with_changes(lpar=[], rpar=[])


def _is_atom(expr: cst.BaseExpression) -> bool:
    """Names, literals and attribute reads cannot raise in a well-formed module."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, _ATOMS)


def _is_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary)) or m.matches(
        expr, m.Name("True") | m.Name("False"))


def _read_names(node: cst.CSTNode) -> set[str]:
    """Variable names read in ``node`` (attribute and keyword names excluded)."""
    names: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            names.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return names


def _bound_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for el in target.elements for n in _bound_names(el.value)}
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return set()


class _Env:
    """What the rewrite needs to know about the module around the site."""

    def __init__(self, module: cst.Module, ancestors: list[cst.CSTNode]):
        self.module = module
        self.aliases: dict[str, str] = {}  # local name -> dotted module path
        for imp in m.findall(module, m.Import() | m.ImportFrom()):
            if isinstance(imp, cst.Import):
                for alias in imp.names:
                    dotted = _code(alias.name)
                    if alias.asname is not None:
                        self.aliases[_code(alias.asname.name)] = dotted
                    else:
                        root = dotted.split(".")[0]
                        self.aliases[root] = root
            elif imp.module is not None and not imp.relative and not isinstance(imp.names, cst.ImportStar):
                for alias in imp.names:
                    local = _code(alias.asname.name) if alias.asname else _code(alias.name)
                    self.aliases[local] = f"{_code(imp.module)}.{_code(alias.name)}"
        # `torch` itself, or an alias of it (`import torch as th`), else `import torch` is added
        torch_names = [k for k, v in self.aliases.items() if v == "torch"]
        self.torch = "torch" if "torch" in torch_names else (torch_names[0] if torch_names else "torch")
        self.needs_import = not torch_names
        self.names = {n.value for n in m.findall(module, m.Name())}
        self.counter = 0
        self.obligations: list[dict] = []
        # (slot, guard) while screening a memoised initialisation that is being hoisted
        self.hoisting: tuple[str, str] | None = None
        self.function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
        cls = next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None)
        self.methods: set[str] = set()
        self.submodules: dict[str, str] = {}  # self.<attr> -> constructor name
        if cls is not None:
            for stmt in cls.body.body:
                if isinstance(stmt, cst.FunctionDef):
                    self.methods.add(stmt.name.value)
            for assign in m.findall(cls, m.Assign(targets=[m.AssignTarget(
                    target=m.Attribute(value=m.Name("self")))], value=m.Call())):
                ctor = call_name(assign.value)
                if ctor:
                    self.submodules[assign.targets[0].target.attr.value] = ctor

    def fresh(self) -> str:
        """``_mend_pred_<n>``, unused anywhere in the module."""
        while f"_mend_pred_{self.counter}" in self.names:
            self.counter += 1
        name = f"_mend_pred_{self.counter}"
        self.names.add(name)
        return name

    def torch_call(self, fn: str, *args: cst.BaseExpression) -> cst.Call:
        return cst.Call(func=cst.Attribute(cst.Name(self.torch), cst.Name(fn)),
                        args=[cst.Arg(_strip(a)) for a in args])

    def qualified(self, dotted: str) -> str | None:
        """``th.sqrt`` -> ``torch.sqrt`` when the root is an imported name, else None."""
        root, _, rest = dotted.partition(".")
        if root not in self.aliases:
            return None
        return self.aliases[root] + ("." + rest if rest else "")

    def oblige(self, kind: str, **data) -> None:
        item = {"kind": kind, **data}
        if item not in self.obligations:
            self.obligations.append(item)


# -- purity screen ---------------------------------------------------------------------


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


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


FORCING_HOOK = "__mend_force__("  # verifier/forcing.py's hook in instrumented copies


def _screen_call(call: cst.Call, env: _Env, side: str | None) -> None:
    if _code(call).startswith(FORCING_HOOK):
        return  # the verifier's predicate-forcing hook (verifier/forcing.py); its argument is screened
    if has_out_kwarg(call):
        raise _Declined("a side writes through `out=`")
    dotted = call_name(call)
    func = call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    qual = env.qualified(dotted) if dotted else None
    if qual is not None and "." in qual:  # a module function: torch.*, F.*, math.*
        last = qual.rsplit(".", 1)[1]
        if not (qual.startswith("torch.") or qual.startswith("math.")):
            raise _Declined(f"a side calls `{dotted}`, which might not be pure")
        if last.endswith("_") and not last.endswith("__"):
            raise _Declined(f"a side mutates a tensor in place (`{dotted}`)")
        if last in _RANDOM:
            raise _Declined(f"a side draws random numbers (`{dotted}`); running it on the untaken side "
                            "would advance the RNG")
        if qual.startswith(_TORCH_EFFECT_MODULES) or last in _TORCH_EFFECT_NAMES or last.startswith(
                ("set_", "_assert")):
            raise _Declined(f"a side calls `{dotted}`, which has an effect")
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
            raise _Declined(f"a side calls the method `{dotted}`, which might not be pure")
        ctor = env.submodules.get(attr, "")
        if any(k in ctor for k in _IMPURE_SUBMODULES):
            raise _Declined(f"a side calls `{dotted}` ({ctor}), which is not pure in training mode")
        if side is not None:
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
    elif dotted is not None and "." not in dotted:  # a bare name: only a few pure builtins
        if dotted not in _PURE_BUILTINS or dotted in env.aliases:
            raise _Declined(f"a side calls `{dotted}`, which might not be pure")
        if dotted in ("float", "int") and not all(
                isinstance(a.value, (cst.SimpleString, cst.Integer, cst.Float)) for a in call.args):
            raise _Declined(f"a side converts a tensor to a Python number (`{_code(call)}`)")
    elif method is not None:  # a method call: a tensor method, or a submodule of self
        if method.endswith("_") and not method.endswith("__") and not method.startswith("_"):
            raise _Declined(f"a side mutates a tensor in place (`{method}`)")
        if method in _SCALAR_METHODS:
            raise _Declined(f"a side reads a Python value out of the graph (`.{method}()`)")
        if method in _EFFECT_METHODS:
            raise _Declined(f"a side calls `.{method}()`, which may mutate state")
        if method in _RANDOM:
            raise _Declined(f"a side draws random numbers (`.{method}()`)")
        if dotted is not None and dotted.startswith("self.") and side is not None:
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
        _nonfinite(call, method, env, side)
    elif isinstance(func, cst.Subscript) and _code(_subscript_root(func)).startswith("self."):
        if side is not None:  # self.layers[i](x): a submodule call
            env.oblige("untaken-side-runs", call=_code(call), guard=side)
    else:
        raise _Declined(f"a side calls `{_code(func)}`, which might not be pure")


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
        env.oblige("bool-predicate", pred=_code(_strip(test)))
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


@dataclass
class _Arm:
    pred: cst.BaseExpression | None  # None: the else arm
    assigns: list[tuple[str, cst.BaseExpression]]
    ret: cst.BaseExpression | None
    returns: bool


def _arm(pred, smalls: list[cst.BaseSmallStatement]) -> _Arm:
    """The selection part of one side (hoisted setup and paired calls already taken out
    by :func:`_plan_setup`)."""
    arm = _Arm(pred, [], None, False)
    for small in smalls:
        if arm.returns:
            raise _Declined("a branch has statements after its `return`")
        if isinstance(small, cst.Pass):
            continue
        if isinstance(small, cst.Return):
            if small.value is None or m.matches(small.value, m.Name("None")):
                raise _Declined("a branch returns None; torch.where cannot select None")
            arm.ret, arm.returns = small.value, True
            continue
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            if small.value is None:
                raise _Declined(f"a branch declares `{_code(small)}` without a value")
            for t in targets:
                if isinstance(t, (cst.Attribute, cst.Subscript)):
                    raise _Declined(f"a branch mutates state (`{_code(t)}`)")
            if len(targets) != 1 or not isinstance(targets[0], cst.Name):
                raise _Declined(f"a branch assigns several names at once (`{_code(small)}`)")
            name = targets[0].value
            if m.matches(small.value, m.Name("None")):
                raise _Declined(f"a branch sets `{name}` to None; the two sides differ in None-ness")
            if isinstance(small.value, (cst.Tuple, cst.List, cst.Dict, cst.Set)):
                raise _Declined(f"a branch assigns a container to `{name}`, not a tensor")
            if any(n == name for n, _ in arm.assigns):
                raise _Declined(f"a branch assigns `{name}` twice")
            arm.assigns.append((name, small.value))
            continue
        if isinstance(small, cst.AugAssign):  # `h += 1` updates a tensor in place, seen through aliases
            raise _Declined(f"a branch mutates state (`{_code(small.target)} {_code(small.operator)} ...`)")
        if (op := inplace_call(small)) is not None:
            raise _Declined(f"a branch mutates a tensor in place (`{op}`)")
        if isinstance(small, cst.Raise):
            raise _Declined("a branch raises")
        if isinstance(small, cst.Expr):
            raise _Declined(f"a branch runs `{_code(small)[:60]}` for its effect")
        raise _Declined(f"a branch holds a `{type(small).__name__.lower()}` statement")
    return arm


def _defined_before(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> set[str]:
    """Names certainly bound when ``node`` runs: parameters and straight-line assignments
    earlier in each enclosing block (a conservative under-approximation)."""
    names: set[str] = set()
    child = node
    for anc in reversed(ancestors):
        if isinstance(anc, (cst.IndentedBlock, cst.Module)):
            for stmt in anc.body:
                if stmt is child:
                    break
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign):
                            for t in small.targets:
                                names |= _bound_names(t.target)
                        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and (
                                not isinstance(small, cst.AnnAssign) or small.value is not None):
                            names |= _bound_names(small.target)
        elif isinstance(anc, cst.With):
            for item in anc.items:
                if item.asname is not None:
                    names |= _bound_names(item.asname.name)
        elif isinstance(anc, cst.FunctionDef):
            params = anc.params
            for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
                names.add(p.name.value)
            for p in (params.star_arg, params.star_kwarg):
                if isinstance(p, cst.Param):
                    names.add(p.name.value)
            break
        elif isinstance(anc, cst.ClassDef):
            break
        child = anc
    return names


def _order(arms: list[_Arm], names: list[str]) -> list[str]:
    """An emission order for the assigned names that keeps every side's reads right.

    In side S, ``t = f(n)`` reads S's new ``n`` when S assigned ``n`` earlier (emit ``n``
    first) and the old ``n`` when S assigns it later (emit ``t`` first).
    """
    before: dict[str, set[str]] = {n: set() for n in names}  # name -> names that must precede it
    for arm in arms:
        pos = {n: i for i, (n, _) in enumerate(arm.assigns)}
        for i, (t, value) in enumerate(arm.assigns):
            for n in _read_names(value) & pos.keys():
                if n != t:
                    (before[t].add(n) if pos[n] < i else before[n].add(t))
    out: list[str] = []
    while len(out) < len(names):
        ready = [n for n in names if n not in out and before[n] <= set(out)]
        if not ready:
            raise _Declined("the sides assign names in orders that read each other's results")
        out.append(ready[0])
    return out


def _guard_text(preds: list[str], i: int) -> str:
    """The condition under which arm ``i`` of an if/elif/else chain ran."""
    parts = [f"not ({p})" for p in preds[:i]]
    if i < len(preds):
        parts.append(preds[i])
    return " and ".join(parts)


def _line(small: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[small])


def _marked(line: cst.SimpleStatementLine, was: str) -> cst.SimpleStatementLine:
    """Put ``# mend: predicated-control-flow (was: <what it was>)`` at the end of ``line``."""
    if len(was) > 60:
        was = was[:57] + "..."
    return line.with_changes(
        trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                   comment=cst.Comment(f"# mend: {NAME} (was: {was})")))


def _comments(node: cst.CSTNode, skip: tuple = ()) -> list[cst.EmptyLine]:
    """Every comment inside ``node`` as a standalone line, so none is lost."""
    out = []
    for c in m.findall(node, m.Comment()):
        if not any(c is s for s in skip):
            out.append(cst.EmptyLine(comment=c.with_changes()))
    return out


# -- setup hoisting (GraphMend "[Where]": memoised initialisation, device moves) ------------

# Calls that set one named slot of their receiver: when every side ends with the same call
# on the same literal name and the same other arguments, one call whose value is chosen by
# torch.where replaces them. method -> (name index, value index, value keyword)
_PAIRED_SETTERS = {"register_buffer": (0, 1, "tensor")}


@dataclass
class _Hoisted:
    """A setup statement moved above the selection (it now runs on every path)."""

    stmt: cst.BaseStatement  # what is emitted
    node: cst.CSTNode  # the original node
    arm: int  # the side it came from
    pos: int  # how many of that side's small statements came before it
    slot: str  # `self.k`
    kind: str  # "memo" | "device-move"
    writes: set[str]  # `self.k` and local names it binds
    reads: set[str]  # names and `obj.attr` it reads
    also: dict[int, int] = field(default_factory=dict)  # other sides with the same device move: side -> pos


@dataclass
class _PairedCall:
    call: cst.Call
    func: str  # `self.register_buffer`
    name: str  # the literal slot name
    value: cst.BaseExpression
    value_arg: int  # index of the value in call.args


@dataclass
class _Setup:
    bodies: list[list[cst.BaseSmallStatement]]  # what each side selects
    hoisted: list[_Hoisted]
    paired: list[_PairedCall]  # one per side, or empty


def _attrs(node: cst.CSTNode) -> set[str]:
    """``obj.attr`` for every attribute of a plain name in ``node`` (read or written)."""
    return {f"{a.value.value}.{a.attr.value}" for a in m.findall(node, m.Attribute(value=m.Name()))}


def _reads(node: cst.CSTNode) -> set[str]:
    return _read_names(node) | _attrs(node)


def _bound_by(small: cst.BaseSmallStatement) -> set[str]:
    if isinstance(small, cst.Assign):
        return {n for t in small.targets for n in _bound_names(t.target)}
    if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        return _bound_names(small.target)
    return set()


def _screen_hoisted(expr: cst.BaseExpression, env: _Env, slot: str, guard: str) -> None:
    """A memoised initialiser must be pure and must not raise: visible raising forms
    (indexing, division by a non-constant) decline; opaque ``self.<attr>(...)`` calls
    become obligations."""
    for node in _walk(expr):
        if isinstance(node, cst.Subscript):
            raise _Declined(f"the memoised initialisation of `{slot}` indexes `{_code(node)}`, which may raise; "
                            "it cannot be hoisted")
        if isinstance(node, cst.BinaryOperation) and isinstance(
                node.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)) and not (
                _is_literal(node.right) and not m.matches(node.right, m.Integer("0") | m.Float("0.0"))):
            raise _Declined(f"the memoised initialisation of `{slot}` computes `{_code(node)}`, which may raise; "
                            "it cannot be hoisted")
    env.hoisting = (slot, guard)
    try:
        _screen(expr, env)
    finally:
        env.hoisting = None


def _memo(stmt: cst.If, env: _Env, scope: cst.CSTNode, guard: str, arm: int, pos: int) -> _Hoisted:
    """GraphMend's five conditions for hoisting ``if not hasattr(obj, "k"): obj.k = init(...)``:
    no ``else``; ``obj.k`` definitely assigned by the body; the rest of the body neutral
    (assignments to locals used nowhere else); ``obj.k`` not read elsewhere (checked by
    :func:`_plan_setup`); the initialiser pure and unable to raise (screened here, the
    opaque calls left as obligations)."""
    obj, key = memo_slot(stmt)
    slot = f"{obj}.{key}"
    what = f'the memoised initialisation `if not hasattr({obj}, "{key}")`'
    if stmt.orelse is not None:
        raise _Declined(f"{what} has an `else`; it cannot be hoisted")
    if isinstance(stmt.body, cst.SimpleStatementSuite):
        smalls = list(stmt.body.body)
    else:
        smalls = []
        for line in stmt.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                raise _Declined(f"{what} holds a nested `{type(line).__name__.lower()}`, so `{slot}` is not "
                                "definitely assigned; it cannot be hoisted")
            smalls.extend(line.body)
    assigned, writes = False, {slot}
    for small in smalls:
        if not isinstance(small, cst.Assign):
            raise _Declined(f"{what} runs `{_code(small)[:60]}`, which is not a neutral assignment; "
                            "it cannot be hoisted")
        for target in small.targets:
            t = target.target
            elements = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
            for el in elements:
                if m.matches(el, m.Attribute(value=m.Name(obj), attr=m.Name(key))):
                    assigned = True
                elif isinstance(el, cst.Name):
                    if _occurrences_outside(scope, stmt, el.value):
                        raise _Declined(f"{what} also assigns `{el.value}`, which is used elsewhere; "
                                        "it cannot be hoisted")
                    writes.add(el.value)
                else:
                    raise _Declined(f"{what} also writes `{_code(el)}`; it cannot be hoisted")
        _screen_hoisted(small.value, env, slot, guard)
    if not assigned:
        raise _Declined(f"{what} does not definitely assign `{slot}`; it cannot be hoisted")
    env.oblige("hoisted-setup-cannot-raise", stmt=_code(stmt), slot=slot, guard=guard)
    return _Hoisted(stmt, stmt, arm, pos, slot, "memo", writes, _reads(stmt) - writes)


def _device_move(small: cst.Assign, line: cst.SimpleStatementLine, env: _Env, guard: str, arm: int,
                 pos: int) -> _Hoisted:
    """``self.a = self.a.to(device)``: idempotent, so running it on every path changes at
    most where ``self.a`` lives, which the taken side would have done anyway."""
    slot = _code(small.targets[0].target)
    for arg in small.value.args:
        if not (_is_atom(arg.value) or m.matches(arg.value, m.Name("None"))):
            raise _Declined(f"the device move `{_code(small)}` passes `{_code(arg.value)}`; only names and "
                            "constants are hoisted")
    env.oblige("idempotent-device-move", target=slot, expr=_code(small.value), guard=guard)
    env.oblige("hoisted-setup-cannot-raise", stmt=_code(small), slot=slot, guard=guard)
    stmt = line if len(line.body) == 1 else _line(small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
    return _Hoisted(stmt, line if len(line.body) == 1 else small, arm, pos, slot, "device-move", {slot},
                    _read_names(small.value) | _attrs(small.value))


def _paired_call(small: cst.BaseSmallStatement) -> _PairedCall | None:
    """``self.register_buffer("name", value, ...)`` as a statement, else None."""
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return None
    call = small.value
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in _PAIRED_SETTERS
            and isinstance(func.value, cst.Name)):
        return None
    name_at, value_at, value_kw = _PAIRED_SETTERS[func.attr.value]
    positional = [i for i, a in enumerate(call.args) if a.keyword is None and not a.star]
    name_i = positional[name_at] if len(positional) > name_at else next(
        (i for i, a in enumerate(call.args) if a.keyword is not None and a.keyword.value == "name"), None)
    value_i = positional[value_at] if len(positional) > value_at else next(
        (i for i, a in enumerate(call.args) if a.keyword is not None and a.keyword.value == value_kw), None)
    if name_i is None or value_i is None or any(a.star for a in call.args):
        return None
    name = call.args[name_i].value
    literal = name.evaluated_value if isinstance(name, cst.SimpleString) else None
    return _PairedCall(call, _code(func), literal if isinstance(literal, str) else None,
                       call.args[value_i].value, value_i)


def _without_value(p: _PairedCall) -> str:
    args = list(p.call.args)
    args[p.value_arg] = args[p.value_arg].with_changes(value=cst.Name("_"))
    return _code(p.call.with_changes(args=args))


def _plan_setup(chain, env: _Env, pred_codes: list[str]) -> _Setup:
    """Split each side into what it selects, the setup hoisted above the selection, and
    a trailing call paired across the sides; decline what cannot be moved unobserved."""
    scope = env.function or env.module
    bodies: list[list[cst.BaseSmallStatement]] = []
    hoisted: list[_Hoisted] = []
    for i, (_, body) in enumerate(chain):
        guard = _guard_text(pred_codes, i)
        lines = [cst.SimpleStatementLine(body=list(body.body))] if isinstance(body, cst.SimpleStatementSuite) \
            else list(body.body)
        smalls: list[cst.BaseSmallStatement] = []
        bound: set[str] = set()  # names this side binds before the current statement

        def hoist(h: _Hoisted) -> None:
            late = (h.reads & bound) - {"self"}
            if late:
                raise _Declined(f"the setup `{_code(h.node)[:60]}` reads `{sorted(late)[0]}`, which its branch "
                                "assigns before it; it cannot be hoisted")
            same = [o for o in hoisted if o.kind == "device-move" == h.kind and _code(o.node) == _code(h.node)]
            if same:  # the same move on several sides: once is enough (idempotent)
                same[0].also[h.arm] = h.pos
            else:
                hoisted.append(h)

        for line in lines:
            if isinstance(line, cst.If) and memo_slot(line) is not None:
                hoist(_memo(line, env, scope, guard, i, len(smalls)))
                continue
            if not isinstance(line, cst.SimpleStatementLine):
                raise _Declined(f"a branch holds a nested `{type(line).__name__.lower()}` statement")
            for small in line.body:
                if is_device_move(small):
                    hoist(_device_move(small, line, env, guard, i, len(smalls)))
                    continue
                smalls.append(small)
                bound |= _bound_by(small)
        bodies.append(smalls)

    # a trailing call on the same slot on every side -> one call, its value selected
    ends = [_paired_call(b[-1]) if b else None for b in bodies]
    paired: list[_PairedCall] = []
    if any(ends):
        first = next(e for e in ends if e is not None)
        if chain[-1][0] is not None or not all(ends):
            raise _Declined(f"only one side ends with `{first.func}(...)`; the call cannot be paired across the "
                            "sides, and running it on both would be seen")
        funcs = {e.func for e in ends}
        if len(funcs) > 1:
            raise _Declined(f"the sides end with different calls ({', '.join(sorted(funcs))}); they cannot be paired")
        if any(e.name is None for e in ends):
            raise _Declined(f"`{first.func}` is called with a name that is not a string literal; "
                            "the calls cannot be paired")
        names = list(dict.fromkeys(e.name for e in ends))
        if len(names) > 1:
            raise _Declined(f"the sides call `{first.func}` on different names "
                            f"({', '.join(repr(n) for n in names)}); they cannot be paired")
        if len({_without_value(e) for e in ends}) > 1:
            raise _Declined(f"the sides call `{first.func}({names[0]!r}, ...)` with different arguments besides "
                            "the value; they cannot be paired")
        paired = list(ends)
        bodies = [b[:-1] for b in bodies]

    # nobody may observe that the setup now runs first, and on every path
    tests = [t for t, _ in chain if t is not None]
    for h in hoisted:
        for t in tests:
            if h.slot in _attrs(t):
                raise _Declined(f"the test reads `{h.slot}`, which the hoisted setup `{_code(h.node)[:50]}` writes")
        # on its own side, only what came after it may read the slot; no other side may
        at = {h.arm: h.pos, **h.also}
        for j, body in enumerate(bodies):
            before = body[:at[j]] if j in at else body
            for small in before:
                if clash := sorted(h.writes & _reads(small)):
                    where = "before it on its side" if j in at else "on the other side"
                    raise _Declined(f"`{clash[0]}` is read {where} (`{_code(small)[:50]}`), "
                                    f"so the hoisted `{_code(h.node)[:50]}` would be seen")
            if paired and j not in at and (clash := sorted(h.writes & _reads(paired[j].value))):
                raise _Declined(f"`{clash[0]}` is read on the other side, so the hoisted `{_code(h.node)[:50]}` "
                                "would be seen")
        for o in hoisted:
            if o.arm not in at and h.writes & o.reads:
                raise _Declined(f"the hoisted setups of the two sides depend on each other "
                                f"(`{sorted(h.writes & o.reads)[0]}`)")
        if h.kind == "memo":
            _memo_unobserved(h, bodies, paired, scope, env)
    return _Setup(bodies, hoisted, paired)


def _memo_unobserved(h: _Hoisted, bodies, paired, scope: cst.CSTNode, env: _Env) -> None:
    """The memoised slot is read nowhere but by the selection after it on its own side:
    not elsewhere in the function, not anywhere else in the module (by attribute or by
    name string, as in ``hasattr``/``getattr``)."""
    obj, key = h.slot.split(".", 1)
    allowed = {id(h.node), *(id(s) for s in bodies[h.arm][h.pos:])}
    if paired:
        allowed.add(id(paired[h.arm].call))
    seen: list[str] = []

    class V(cst.CSTVisitor):
        def __init__(self, skip: set[int], any_object: bool):
            super().__init__()
            self.skip, self.any_object = skip, any_object

        def on_visit(self, node: cst.CSTNode) -> bool:
            if id(node) in self.skip:
                return False
            if isinstance(node, cst.Attribute) and node.attr.value == key and (
                    self.any_object or m.matches(node.value, m.Name(obj))):
                seen.append(_code(node))
            elif isinstance(node, cst.SimpleString) and node.evaluated_value == key:
                seen.append(_code(node))
            return not seen

    scope.visit(V(allowed, False))
    if seen:
        raise _Declined(f"the memoised attribute `{h.slot}` is also read elsewhere in the function (`{seen[0]}`), "
                        "so hoisting its initialisation could be observed")
    if scope is not env.module:
        env.module.visit(V({id(scope)}, True))
        if seen:
            raise _Declined(f"the memoised attribute `{h.slot}` is also used elsewhere in the module "
                            f"(`{seen[0]}`), so hoisting its initialisation could be observed")



def _rewrite_if(node: cst.If, ancestors: list[cst.CSTNode], env: _Env, positions):
    """The replacement of an if/elif/else statement: (old, new) node pairs to splice."""
    parent = ancestors[-1] if ancestors else None
    elif_site = isinstance(parent, cst.If) and parent.orelse is node
    chain = branches(node)
    guard, first = _split_static_guard(chain[0][0], env)
    if guard is not None and (len(chain) > 1 or elif_site):
        raise _Declined(f"the test mixes a Python-level check (`{_code(guard)}`) with a tensor test on an "
                        "if that has an else")
    chain[0] = (first, chain[0][1])

    pred_codes = [_code(_strip(test)) for test, _ in chain if test is not None]
    setup = _plan_setup(chain, env, pred_codes)
    arms = [_arm(test, smalls) for (test, _), smalls in zip(chain, setup.bodies)]
    span_end = positions[node].end.line
    extra_return = None
    if chain[-1][0] is not None:  # no else
        block = parent.body if isinstance(parent, (cst.IndentedBlock, cst.Module)) else []
        if arms[-1].returns and len(arms) == 1 and _return_follows(node, parent):
            extra_return = block[list(block).index(node) + 1]
            arms.append(_arm(None, list(extra_return.body)))
            span_end = positions[extra_return].end.line
        else:
            arms.append(_Arm(None, [], None, False))
    if len({a.returns for a in arms}) > 1:
        raise _Declined("a branch leaves early (`return`) while the other falls through")
    returns = arms[0].returns

    preds = [_predicate(a.pred, env) for a in arms if a.pred is not None]
    _screen(arms[0].pred, env)
    for i in range(1, len(preds)):  # elif tests used to run only when the earlier ones failed
        _screen(arms[i].pred, env, side=" and ".join(f"not ({p})" for p in pred_codes[:i]))

    # Which names are selected, and which are setup temporaries: assigned on one side
    # and named nowhere else in the function, so running them unconditionally is unseen.
    inside: dict[str, list[cst.CSTNode]] = {}
    for i, arm in enumerate(arms):
        for n, _ in arm.assigns:
            inside.setdefault(n, []).append(chain[i][1])
    order_seen = list(inside)
    scope = env.function or env.module
    temps = {n for n, bodies in inside.items()
             if len(bodies) == 1 and not _occurrences_outside(scope, bodies[0], n)}
    if returns and (set(inside) - temps):
        name = sorted(set(inside) - temps)[0]
        raise _Declined(f"a returning branch also assigns `{name}`, which is used elsewhere")
    selected = [n for n in order_seen if n not in temps]
    defined = _defined_before(node, ancestors)
    for n in selected:
        if any(n not in dict(a.assigns) for a in arms) and n not in defined:
            raise _Declined(f"`{n}` is assigned on one side only and has no prior definition")
    for n in selected:
        values = [dict(a.assigns).get(n, cst.Name(n)) for a in arms]
        if all(_is_literal(v) for v in values):
            raise _Declined(f"both sides give `{n}` a Python constant; torch.where would make it a tensor")

    # Screen every side: it now runs whether or not its test holds.
    for i, arm in enumerate(arms):
        side = _guard_text(pred_codes, i)
        for _, value in arm.assigns:
            _screen(value, env, side=side)
        if arm.ret is not None:
            _screen(arm.ret, env, side=side)
        if setup.paired:
            _screen(setup.paired[i].value, env, side=side)

    # torch.where runs both sides. When a side must not run speculatively (a submodule
    # call, or an op whose gradient is non-finite off the domain the predicate guards),
    # emit torch.cond instead, which runs only the taken side; where cond is not
    # admissible, the where candidate below stays (and verification judges it).
    hazards = _speculation_hazards(env.obligations, preds)
    if hazards and not setup.hoisted and not setup.paired and guard is None and not elif_site \
            and len(arms) == 2 and extra_return is None and not temps:
        try:
            return _rewrite_cond(node, arms, selected, order_seen, returns, preds, pred_codes, hazards, env,
                                 positions, span_end)
        except _CondNotApplicable:
            pass  # today's torch.where candidate; verification judges it

    def select(values: list[cst.BaseExpression], target: str, pred_exprs) -> cst.Call:
        for v in values[1:]:
            for kind in ("same-shape", "same-dtype"):
                env.oblige(kind, target=target, lhs=_code(values[0]), rhs=_code(v))
        out = values[-1]
        for p, v in reversed(list(zip(pred_exprs, values))):
            out = env.torch_call("where", p, v, out)
        return out

    n_select = (1 if returns else len(selected)) + (1 if setup.paired else 0)
    pred_exprs = preds
    stmts: list[cst.SimpleStatementLine] = []
    if n_select > 1:  # evaluate the predicates once, before any name is rebound
        pred_exprs = []
        for p in preds:
            name = env.fresh()
            stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(name))], p)))
            pred_exprs.append(cst.Name(name))
    for n in _order(arms, order_seen):
        if n in temps:
            value = next(dict(a.assigns)[n] for a in arms if n in dict(a.assigns))
            stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(n))], value)))
        else:
            values = [dict(a.assigns).get(n, cst.Name(n)) for a in arms]
            stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(n))], select(values, n, pred_exprs))))
    if returns:
        stmts.append(_line(cst.Return(select([a.ret for a in arms], "return", pred_exprs))))
    if setup.paired:  # one call, its value selected
        p0 = setup.paired[0]
        target = f"{p0.func}({p0.name!r})"
        values = [p.value for p in setup.paired]
        value = values[0] if len({_code(v) for v in values}) == 1 else select(values, target, pred_exprs)
        if len(values) > 1 and value is not values[0]:
            env.oblige("paired-call-value-not-aliased", call=target, values=[_code(v) for v in values])
        args = list(p0.call.args)
        args[p0.value_arg] = args[p0.value_arg].with_changes(value=value)
        stmts.append(_line(cst.Expr(p0.call.with_changes(args=args))))
    if not stmts:
        raise _Declined("no side assigns or returns anything; there is nothing to select")

    was = ("elif " if elif_site else "if ") + pred_codes[0]
    # the marker goes on the first line that selects (setup temporaries come before it)
    at = next(i for i, st in enumerate(stmts)
              if not (isinstance(st.body[0], cst.Assign) and st.body[0].targets[0].target.value in temps))
    keep = [ln.comment for ln in node.leading_lines if ln.comment]  # stay where they are
    if guard is not None and isinstance(node.body, cst.IndentedBlock):
        keep += [node.body.header.comment, *(ln.comment for ln in node.body.footer if ln.comment)]
    keep += [c for h in setup.hoisted for c in m.findall(h.node, m.Comment())]  # move with their statement
    comments = _comments(node, skip=tuple(c for c in keep if c is not None))
    if extra_return is not None:
        comments += _comments(extra_return)
    kind = "elif chain" if len(preds) > 1 else "if"
    chosen = ["return"] if returns else list(selected)
    if setup.paired:
        chosen.append(f"{setup.paired[0].func}({setup.paired[0].name!r}, ...)")
    detail = f"{kind} -> torch.where ({', '.join(chosen) or 'setup only'})"
    if setup.hoisted:
        detail += "; hoisted: " + ", ".join(
            f"memoised {h.slot}" if h.kind == "memo" else f"device move of {h.slot}" for h in setup.hoisted)
    span = (positions[node].start.line, span_end)

    stmts[at] = _marked(stmts[at], was)
    # the setup runs first, as it did on its side; the selection's comments stay with it
    stmts[0] = stmts[0].with_changes(leading_lines=[*comments, *stmts[0].leading_lines])
    out = [h.stmt for h in setup.hoisted] + stmts
    if guard is not None:  # if A and B: ... -> if A: <where on B>
        body = node.body.with_changes(body=out) if isinstance(node.body, cst.IndentedBlock) \
            else cst.IndentedBlock(body=out)
        return [(node, [node.with_changes(test=guard, body=body)])], span, detail, pred_codes
    if elif_site:  # ... elif B: -> ... else: <where on B>
        new_else = cst.Else(body=cst.IndentedBlock(body=out), leading_lines=node.leading_lines)
        return [(parent, [parent.with_changes(orelse=new_else)])], span, detail, pred_codes
    out[0] = out[0].with_changes(leading_lines=[*node.leading_lines, *out[0].leading_lines])
    pairs = [(node, out)]
    if extra_return is not None:
        pairs.append((extra_return, []))
    return pairs, span, detail, pred_codes


# -- torch.cond: when the untaken side must not run ------------------------------------

# Tensor methods / torch functions that may return their input or a view of it: a cond
# branch must not (torch.cond rejects aliasing outputs, even in eager), so such a value
# is cloned -- only where nothing can observe the lost aliasing (see _alias_observers).
_MAY_ALIAS = {"view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "squeeze", "unsqueeze",
              "expand", "expand_as", "narrow", "select", "unfold", "flatten", "unflatten", "detach", "contiguous",
              "to", "type", "type_as", "float", "half", "double", "bfloat16", "long", "int", "bool", "short",
              "real", "imag", "diagonal", "movedim", "moveaxis", "swapaxes", "swapdims", "split", "chunk", "unbind",
              "as_strided", "view_as_real", "view_as_complex", "align_to", "refine_names", "rename", "mT", "mH",
              "T", "H", "data", "requires_grad_", "cpu", "cuda", "clone_if_needed", "squeeze_", "alias",
              "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "tensor_split", "hsplit", "vsplit",
              "dsplit", "split_with_sizes", "unsafe_split", "as_tensor", "asarray", "nan_to_num_"}
# Modules that may return their input as it is (nn.Identity, Dropout in eval mode, flatten of a flat tensor).
_IDENTITY_MODULES = ("Identity", "Dropout", "Flatten", "Unflatten", "AlphaDropout")
# Reads through which a clone is distinguishable from its source.
_IDENTITY_ATTRS = {"data_ptr", "untyped_storage", "storage", "_base", "_is_view", "is_set_to", "grad_fn", "is_leaf",
                   "grad", "data", "retain_grad", "register_hook", "backward", "_version", "storage_offset",
                   "set_", "share_memory_", "requires_grad_", "_cdata"}
COND_TAKEN_SIDE_ONLY = ("torch.cond evaluates only the branch its predicate selects (eager and compiled; its "
                        "backward differentiates only that branch), so the untaken side's exceptions, calls "
                        "and gradients are never produced: {waived} do not apply")


class _CondNotApplicable(_Declined):
    """torch.cond does not fit the site, but torch.where may (the caller falls back to it).
    A plain :class:`_Declined` from :func:`_rewrite_cond` declines the site: neither fits."""


_CASTS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16", "long": "int64",
          "int": "int32", "short": "int16", "bool": "bool"}


def _cast_of(value: cst.BaseExpression) -> str | None:
    """The dtype an explicit outermost cast gives (``x.half()``, ``x.to(torch.float16)``), else None."""
    value = _strip(value)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    attr = value.func.attr.value
    if attr in _CASTS and not value.args:
        return _CASTS[attr]
    if attr in ("to", "type") and value.args and value.args[0].keyword is None:
        arg = value.args[0].value
        if isinstance(arg, cst.Attribute) and arg.attr.value in (*_CASTS.values(), "float32", "float64", "int64"):
            return arg.attr.value
    return None


# Ops through which no gradient flows: a side built with them gives its inputs no gradient
# in eager (None), while torch.cond's backward gives every input of the cond a tensor (zeros).
_NO_GRAD_OPS = {"zeros_like", "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full",
                "new_empty", "new_tensor", "detach", "argmax", "argmin", "argsort", "eq", "ne", "lt", "gt", "le",
                "ge", "isnan", "isinf", "isfinite", "bool", "long", "int", "no_grad", "tensor", "zeros", "ones"}


def _grad_sensitive(values: list[tuple[cst.BaseExpression, cst.BaseExpression]], env: _Env) -> str | None:
    """Why torch.cond could make a gradient a tensor where the if leaves it None, or None:
    the sides read different tensors (parameters of a submodule called on one side only,
    ``self.`` state), or a side holds an op through which no gradient flows. Under
    autograd, cond's backward gives every tensor the branches read a gradient (zeros for the
    untaken side), so optimizers would update parameters the if never touched."""
    modules = set(env.aliases) | {"torch", "math", "F"}
    for t, f in values:
        for v in (t, f):
            if m.findall(v, m.Attribute(value=m.Name("self"))):
                return f"`{_code(v)}` reads module state (parameters)"
            for call in m.findall(v, m.Call()):
                name = call.func.attr.value if isinstance(call.func, cst.Attribute) else (call_name(call) or "")
                if name.rsplit(".", 1)[-1] in _NO_GRAD_OPS:
                    return f"`{_code(call)}` passes no gradient"
        if (_read_names(t) - modules) != (_read_names(f) - modules):
            return f"the sides read different tensors (`{_code(t)}` vs `{_code(f)}`)"
    return None


def _speculation_hazards(obligations: list[dict], preds) -> list[dict]:
    """What makes running the untaken side of a where unacceptable, statically: a submodule
    call (GraphMend: "torch.cond when a branch value contains a call"), or an op whose
    gradient can be non-finite, applied to a value the predicate tests (the branch guards
    the op's domain, shared/cases 012). Other finite-gradient obligations (an op unrelated
    to the test) stay with torch.where and its verification, as before."""
    tested = set().union(*(_read_names(p) for p in preds)) - {"self", "torch", "__mend_force__"}
    out = []
    for ob in obligations:
        if ob["kind"] == "untaken-side-runs":
            out.append(ob)
        elif ob["kind"] == "finite-gradient":
            try:
                names = _read_names(cst.parse_expression(ob["expr"]))
            except cst.ParserSyntaxError:
                continue
            if names & tested:
                out.append(ob)
    return out


def _cond_predicate_ok(pred: cst.BaseExpression) -> bool:
    """Statically a bool tensor expression (the forcing hook's argument for instrumented copies)."""
    if isinstance(pred, cst.Call) and _code(pred).startswith(FORCING_HOOK) and pred.args:
        return _cond_predicate_ok(pred.args[0].value)
    return _is_bool(pred) and not isinstance(pred, cst.BooleanOperation)


def _value_kind(value: cst.BaseExpression, env: _Env) -> str:
    """"alias" when ``value`` may be (a view of) a tensor the branch did not create, else "fresh"."""
    value = _strip(value)
    if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
        return "alias"
    if isinstance(value, cst.Call):
        func = value.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (call_name(value) or "")
        if name.rsplit(".", 1)[-1] in _MAY_ALIAS:
            return "alias"
        dotted = call_name(value) or ""
        if dotted.startswith("self.") and dotted.count(".") == 1:
            ctor = env.submodules.get(dotted.split(".")[1], "")
            if any(k in ctor for k in _IDENTITY_MODULES):
                return "alias"
    return "fresh"


def _alias_observers(scope: cst.CSTNode, after_line: int, names: set[str], positions, env: _Env) -> list[str]:
    """How code after the site could tell a clone from the aliased tensor it replaces:
    any in-place write (to anything: other names may alias the same storage), ``out=`` /
    ``inplace=True``, or a use of ``names`` that lets the tensor escape (returned, stored,
    rebound, passed to a call that is not a torch function) or reads its identity."""
    found: list[str] = []
    inside = {id(n) for n in _walk(scope)}
    later = [n for n, pos in positions.items() if pos.start.line > after_line and
             isinstance(n, cst.SimpleStatementLine) and id(n) in inside]
    later += [n.test for n, pos in positions.items() if pos.start.line > after_line and
              isinstance(n, (cst.If, cst.While)) and id(n) in inside]
    for stmt in later:
        op = inplace_call(stmt)
        if op is not None:
            found.append(f"`.{op}()` writes in place")
        if has_out_kwarg(stmt) or m.findall(stmt, m.Arg(keyword=m.Name("inplace"))):
            found.append("a call writes through `out=`/`inplace=`")
        for small in m.findall(stmt, m.AugAssign()):
            found.append(f"`{_code(small.target)} {_code(small.operator)} ...` may update in place")
        for t in m.findall(stmt, m.AssignTarget(target=m.Subscript() | m.Attribute())):
            found.append(f"`{_code(t.target)} = ...` writes into a tensor or object")
        parents: dict[int, cst.CSTNode] = {}
        for node in _walk(stmt):
            for child in node.children:
                parents[id(child)] = node
        for node in _walk(stmt):
            if not (isinstance(node, cst.Name) and node.value in names):
                continue
            parent = parents.get(id(node))
            ok = False
            if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
                ok = True
            elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
                ok = not any(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in m.findall(parent, m.ComparisonTarget()))
            elif isinstance(parent, cst.AssignTarget):  # rebound: the old value is no longer reachable by name
                ok = True
            elif isinstance(parent, cst.Attribute) and parent.value is node:  # no views, identity or autograd reads
                attr = parent.attr.value
                ok = attr not in _IDENTITY_ATTRS and attr not in _MAY_ALIAS and not attr.endswith("_")
            elif isinstance(parent, cst.Arg):
                call = parents.get(id(parent))
                qual = env.qualified(call_name(call) or "") if isinstance(call, cst.Call) else None
                last = qual.rsplit(".", 1)[1] if qual else ""
                ok = bool(qual and qual.startswith("torch.") and not last.endswith("_") and last not in _MAY_ALIAS)
            if not ok:
                found.append(f"`{node.value}` is used as `{_code(parent)[:50]}`")
    return found


def _lambda(body: cst.BaseExpression) -> cst.Lambda:
    return cst.Lambda(params=cst.Parameters(), body=_strip(body), colon=cst.Colon(whitespace_after=cst.SimpleWhitespace(" ")))


def _rewrite_cond(node: cst.If, arms: list[_Arm], selected: list[str], order_seen: list[str], returns: bool,
                  preds, pred_codes: list[str], hazards: list[dict], env: _Env, positions, span_end: int):
    """``if p: y = a else: y = b`` -> under torch.compile ``y = torch.cond(p, lambda: a,
    lambda: b)``; in eager the original if/else runs unchanged (see the comment emitted).

    Declines (the caller then keeps torch.where) what torch.cond cannot take: a predicate
    that is not statically a bool tensor expression, a side value that aliases an input
    when the lost aliasing could be observed, a Python constant on a side."""
    pred = preds[0]
    if not _cond_predicate_ok(arms[0].pred):
        raise _CondNotApplicable("torch.cond needs a bool tensor predicate and this test is not statically one")
    scope = env.function or env.module
    obligations = [o for o in env.obligations if o["kind"] in ("single-element-predicate", "bool-operand")]
    obligations.append({"kind": "cond-predicate", "pred": pred_codes[0]})
    names = ["return"] if returns else [n for n in _order(arms, order_seen) if n in selected]
    emitted: list[tuple[str, list[cst.BaseExpression]]] = []
    clones: set[str] = set()
    for n in names:
        values = [a.ret for a in arms] if returns else [dict(a.assigns).get(n, cst.Name(n)) for a in arms]
        out = []
        for side, v in zip(("true", "false"), values):
            if _is_literal(v) or isinstance(v, (cst.SimpleString, cst.ConcatenatedString)):
                raise _CondNotApplicable(f"a side gives `{n}` a Python constant; torch.cond returns tensors")
            kind = _value_kind(v, env)
            if kind == "alias":
                if returns:
                    raise _CondNotApplicable(f"the {side} side returns `{_code(v)}`, which may alias an input, and the "
                                    "caller could observe a copy")
                clones |= {x for x in _read_names(v) if x != "self"} | {n}
                v = cst.Call(func=cst.Attribute(value=v if isinstance(v, (cst.Name, cst.Attribute, cst.Subscript,
                                                                          cst.Call)) else v.with_changes(
                    lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), attr=cst.Name("clone")))
            out.append(v)
        casts = [_cast_of(v) for v in values]
        if casts[0] != casts[1]:
            what = "; ".join(f"`{_code(v)}` is {c}" for v, c in zip(values, casts) if c)
            raise _Declined(f"the sides give `{n}` different dtypes ({what}, the other side is not cast); "
                            "torch.cond needs branch outputs of one dtype and torch.where would promote them")
        obligations.append({"kind": "cond-branch-types", "target": n, "lhs": _code(values[0]),
                            "rhs": _code(values[1])})
        obligations.append({"kind": "same-shape", "target": n, "lhs": _code(values[0]), "rhs": _code(values[1])})
        obligations.append({"kind": "cond-output-not-aliased", "target": n,
                            "values": [_code(v) for v in out],
                            "treatment": ["clone" if _code(o) != _code(v) else _value_kind(v, env)
                                          for v, o in zip(values, out)]})
        emitted.append((n, out))
    if clones:
        observers = _alias_observers(scope, span_end, clones, positions, env)
        writes = [o for o in observers if "in place" in o or "writes" in o]
        if writes:  # neither a copy (cond) nor a new tensor (where) sees a later in-place update of the alias
            raise _Declined("a side's value aliases an existing tensor that is mutated in place later ("
                            + "; ".join(writes[:3]) + "); neither torch.cond (a copy) nor torch.where (a new "
                            "tensor) would see that update")
        if observers:
            raise _CondNotApplicable("a side's value aliases an existing tensor and a copy would be observable: "
                                     + "; ".join(observers[:3]))
        for ob in obligations:
            if ob["kind"] == "cond-output-not-aliased":
                ob["observers"] = []
                ob["watched"] = sorted(clones)
    for h in hazards:  # the side still runs when taken, and Dynamo traces both: it must write no state
        if h["kind"] == "untaken-side-runs":
            obligations.append({"kind": "cond-side-pure", "call": h["call"]})
    waived = sorted({h["kind"] for h in hazards} | {"untaken-side-cannot-raise"})
    obligations.append({"kind": "cond-taken-side-only", "pred": pred_codes[0], "waives": waived,
                        "exprs": [h.get("expr") or h.get("call") for h in hazards],
                        "why": COND_TAKEN_SIDE_ONLY.format(waived=", ".join(waived))})

    stmts: list[cst.SimpleStatementLine] = []
    pred_expr = pred
    if len(emitted) > 1:  # one cond per name (a tuple-valued cond's backward fails on torch 2.13)
        pname = env.fresh()
        stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(pname))], pred)))
        pred_expr = cst.Name(pname)
    for n, (t, f) in emitted:
        call = cst.Call(func=cst.Attribute(cst.Name(env.torch), cst.Name("cond")),
                        args=[cst.Arg(_strip(pred_expr)), cst.Arg(_lambda(t)), cst.Arg(_lambda(f))])
        stmts.append(_line(cst.Return(call)) if n == "return" else
                     _line(cst.Assign([cst.AssignTarget(cst.Name(n))], call)))
    was = "if " + pred_codes[0]
    if len(was) > 60:
        was = was[:57] + "..."
    compiling = cst.Call(func=cst.Attribute(cst.Attribute(cst.Name(env.torch), cst.Name("compiler")),
                                            cst.Name("is_compiling")))
    # a single-element predicate was seen on the example only: with another input shape the
    # `if` raises (no values / ambiguous), so the cond runs only when numel() == 1 (a shape
    # guard under Dynamo) and the original `if` keeps its error otherwise
    boxed = _strip(pred).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    one = cst.Comparison(left=cst.Call(func=cst.Attribute(boxed, cst.Name("numel"))),
                         comparisons=[cst.ComparisonTarget(cst.Equal(), cst.Integer("1"))])
    compiling = cst.BooleanOperation(left=compiling, operator=cst.And(), right=one)
    grad_why = _grad_sensitive([(t, f) for _, (t, f) in emitted], env)
    if grad_why is not None:  # cond only where no gradient exists (inference); with autograd the if runs
        compiling = cst.BooleanOperation(left=compiling, operator=cst.And(), right=cst.UnaryOperation(
            operator=cst.Not(), expression=cst.Call(func=cst.Attribute(cst.Name(env.torch), cst.Name("is_grad_enabled")))))
        obligations.append({"kind": "cond-no-autograd", "why": f"{grad_why}: with autograd on, torch.cond's "
                            "backward would give tensors the if leaves without gradient a zero gradient, so the "
                            "cond runs only when torch.is_grad_enabled() is False"})
    header = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                    comment=cst.Comment(f"# mend: {NAME} (was: {was})"))
    note = [cst.EmptyLine(comment=cst.Comment(
        "# torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms")),
            cst.EmptyLine(comment=cst.Comment(
        "# per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)"))]
    original = node.with_changes(leading_lines=[])
    new = cst.If(test=compiling, body=cst.IndentedBlock(body=stmts, header=header),
                 orelse=cst.Else(body=cst.IndentedBlock(body=[original])),
                 leading_lines=[*node.leading_lines, *note])
    kind_txt = ", ".join(names)
    why = "; ".join(sorted({("submodule call " + h["call"]) if h["kind"] == "untaken-side-runs" else
                            f"non-finite gradient of {h['expr']} off its guarded domain" for h in hazards}))
    detail = (f"if -> torch.cond ({kind_txt}) under torch.compile" + (" without autograd" if grad_why else "")
              + f", the if kept otherwise; not torch.where: {why}")
    env.obligations[:] = obligations
    span = (positions[node].start.line, span_end)
    return [(node, [new])], span, detail, pred_codes


def _occurrences_outside(scope: cst.CSTNode, body: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` occurs in ``scope`` outside ``body``."""
    found = False

    class V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if node is body:
                return False
            if isinstance(node, cst.Name) and node.value == name:
                found = True
            return not found

    scope.visit(V())
    return found


def _rewrite_logic(line: cst.SimpleStatementLine, env: _Env, positions):
    """``x = a and b`` -> ``x = torch.logical_and(a, b)`` (also ``or``, ``not``, chains)."""
    if len(line.body) != 1:
        raise _Declined("several statements share the line")
    small = line.body[0]
    if not isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return)) or small.value is None:
        raise _Declined(f"`{_code(small)[:60]}` is not an assignment or return of a tensor expression")
    _screen(small.value, env)
    for bop in m.findall(small.value, m.BooleanOperation()):  # short-circuited operands now always run
        left = _code(bop.left)
        guard = left if isinstance(bop.operator, cst.And) else f"not ({left})"
        _screen(bop.right, env, side=guard)
    value, changed = _tensor_logic(small.value, env)
    if not changed:
        raise _Declined("the tensor's truth value is taken in a form the rule does not rewrite")
    keep = tuple(ln.comment for ln in line.leading_lines if ln.comment)
    new = _marked(line.with_changes(body=[small.with_changes(value=_strip(value))]), _code(_strip(small.value)))
    new = new.with_changes(leading_lines=[*line.leading_lines, *_comments(line, skip=keep)])
    pos = positions[line]
    return [(line, [new])], (pos.start.line, pos.end.line), "tensor and/or/not -> torch.logical_*", [
        _code(small.value)]


class _Statements(cst.CSTVisitor):
    """Statements with their ancestors, indexed by start line."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.found: list[tuple[int, cst.CSTNode, list[cst.CSTNode]]] = []
        self.positions = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            pos = self.get_metadata(PositionProvider, node)
            self.positions[node] = pos
            self.found.append((pos.start.line, node, list(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _index(module: cst.Module) -> _Statements:
    index = _Statements()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(index)
    return index


def _splice(module: cst.Module, pairs) -> cst.Module:
    """Replace statements (by identity) with lists of statements."""
    table = {id(old): new for old, new in pairs}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            new = table.get(id(original))
            if new is None:
                return updated
            if len(new) == 1:
                return new[0]
            return cst.FlattenSentinel(new) if new else cst.RemoveFromParent()

    return module.visit(T())


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """Predicate the data-dependent ``if`` (or tensor ``and``/``or``/``not``) on ``line``.

    GraphMend's "[Where]" transformation (arXiv 2509.16248): a branch on a tensor value
    becomes ``torch.where``, evaluating both sides, so Dynamo keeps one graph. Returns
    the new module source and the proof obligations, or a :class:`Decline` saying why
    the site is unsafe to predicate.
    """
    return _rewrite_at(module, None, line)


def _rewrite_at(module: cst.Module, node: cst.CSTNode | None, line: int) -> RewriteResult | Decline:
    """:func:`rewrite` of ``node`` (a statement of ``module``), or of the outermost
    statement starting on ``line`` when ``node`` is None or not one the index holds."""
    index = _index(module)
    found = [(n, a) for _, n, a in index.found if n is node] if node is not None else []
    starting = found or [(n, a) for ln, n, a in index.found if ln == line]
    if not starting:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = min(starting, key=lambda e: len(e[1]))
    if any(isinstance(a, (cst.For, cst.While)) for a in _same_function(ancestors)):
        return Decline(NAME, "the branch sits inside a loop, so Dynamo skipped the whole frame; predicating it "
                             "would evaluate the skipped side on every iteration (cost, inf*0 NaNs)")
    env = _Env(module, ancestors)
    try:
        if isinstance(node, cst.If):
            pairs, span, detail, preds = _rewrite_if(node, ancestors, env, index.positions)
        elif isinstance(node, cst.SimpleStatementLine):
            pairs, span, detail, preds = _rewrite_logic(node, env, index.positions)
        else:
            return Decline(NAME, f"the statement on line {line} is a `{type(node).__name__.lower()}`, "
                                 "not an if or a tensor and/or")
    except _Declined as why:
        return Decline(NAME, str(why))
    new = _splice(module, pairs)
    if env.needs_import:
        ctx = CodemodContext()
        AddImportsVisitor.add_needed_import(ctx, "torch")
        new = AddImportsVisitor(ctx).transform_module(new)
    return RewriteResult(new.code, span, detail, env.obligations, predicates=preds)


def _same_function(ancestors: list[cst.CSTNode]) -> list[cst.CSTNode]:
    out = []
    for anc in reversed(ancestors):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            break
        out.append(anc)
    return out


def first_site(source: str) -> int | None:
    """The line the examples rewrite: the first ``if``/``elif`` whose test is not a pure
    Python-level check, or an earlier statement using tensor ``and``/``or``/``not``."""
    module = cst.parse_module(source)
    env = _Env(module, [])
    for ln, node, _ in sorted(_index(module).found, key=lambda e: e[0]):
        if isinstance(node, cst.If) and not _is_static(node.test, env):
            return ln
        if isinstance(node, cst.SimpleStatementLine) and m.findall(node, m.BooleanOperation() | m.UnaryOperation(
                operator=m.Not()) | m.Comparison(comparisons=[m.DoNotCare(), m.DoNotCare(), m.ZeroOrMore()])):
            return ln
    return None


# --------------------------------------------------------------------------------------
# Examples (Fixit / pyupgrade style): tests are generated from these lists. The site is
# the line :func:`first_site` picks. A fix example gives the exact expected text; a decline
# example gives a substring of the expected reason.
# --------------------------------------------------------------------------------------

FIX_EXAMPLES: list[tuple[str, str]] = [
    # shared/cases 001: if without else, the target defined before
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 16, threshold: float = 0.25):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.threshold = threshold

                def forward(self, x):
                    h = self.proj(x)
                    if h.pow(2).mean() > self.threshold:
                        h = h * 0.5
                    return torch.relu(h)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 16, threshold: float = 0.25):
                    super().__init__()
                    self.proj = nn.Linear(dim, dim)
                    self.threshold = threshold

                def forward(self, x):
                    h = self.proj(x)
                    h = torch.where(h.pow(2).mean() > self.threshold, h * 0.5, h)  # mend: predicated-control-flow (was: if h.pow(2).mean() > self.threshold)
                    return torch.relu(h)
        '''),
    ),
    # shared/cases 002: masked_fill only when there is padding (comments inside the if are kept)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, scores, pad_mask):
                    if (pad_mask == 0).any():
                        # hide padded keys
                        scores = scores.masked_fill(pad_mask[:, None, :] == 0, float("-inf"))
                    return scores.softmax(dim=-1)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, scores, pad_mask):
                    # hide padded keys
                    scores = torch.where((pad_mask == 0).any(), scores.masked_fill(pad_mask[:, None, :] == 0, float("-inf")), scores)  # mend: predicated-control-flow (was: if (pad_mask == 0).any())
                    return scores.softmax(dim=-1)
        '''),
    ),
    # shared/cases 004, line 37: tensor `and`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = (action >= self.low).all() and (action <= self.high).all()
                    return inside
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = torch.logical_and((action >= self.low).all(), (action <= self.high).all())  # mend: predicated-control-flow (was: (action >= self.low).all() and (action <= self.high).all())
                    return inside
        '''),
    ),
    # shared/cases 004, line 38: `if not inside`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = torch.logical_and((action >= self.low).all(), (action <= self.high).all())
                    if not inside:
                        action = torch.maximum(torch.minimum(action, self.high), self.low)
                    return action
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, act_dim: int = 4):
                    super().__init__()
                    self.register_buffer("low", -torch.ones(act_dim))
                    self.register_buffer("high", torch.ones(act_dim))

                def forward(self, action):
                    inside = torch.logical_and((action >= self.low).all(), (action <= self.high).all())
                    action = torch.where(torch.logical_not(inside), torch.maximum(torch.minimum(action, self.high), self.low), action)  # mend: predicated-control-flow (was: if not inside)
                    return action
        '''),
    ),
    # shared/cases 012 (trap): fixed textually; the rewrite carries a finite-gradient obligation
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, s):
                    if s > 0:
                        y = torch.sqrt(s)
                    else:
                        y = s
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, s):
                    y = torch.where(s > 0, torch.sqrt(s), s)  # mend: predicated-control-flow (was: if s > 0)
                    return y
        '''),
    ),
    # if/else assigning two names: the predicate is evaluated once, reads stay in order
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, y):
                    # gate on the sign of the sum
                    if x.sum() > 0:  # positive
                        a = x * 2
                        b = y + a
                    else:
                        b = y - x
                        a = x
                    return a, b
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, y):
                    # gate on the sign of the sum
                    # positive
                    _mend_pred_0 = x.sum() > 0  # mend: predicated-control-flow (was: if x.sum() > 0)
                    a = torch.where(_mend_pred_0, x * 2, x)
                    b = torch.where(_mend_pred_0, y + a, y - x)
                    return a, b
        '''),
    ),
    # elif chain -> nested torch.where
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.mean() > 1:
                        y = x * 3
                    elif x.mean() < -1:
                        y = -x
                    else:
                        y = x + 1
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    y = torch.where(x.mean() > 1, x * 3, torch.where(x.mean() < -1, -x, x + 1))  # mend: predicated-control-flow (was: if x.mean() > 1)
                    return y
        '''),
    ),
    # both sides return
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if (x > 0).all():
                        return x * 3
                    else:
                        return x - 1
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    return torch.where((x > 0).all(), x * 3, x - 1)  # mend: predicated-control-flow (was: if (x > 0).all())
        '''),
    ),
    # `if p: return a` followed by `return b`
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = torch.tanh(x)
                    if h.abs().max() > 0.5:
                        return h * 0.5
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = torch.tanh(x)
                    return torch.where(h.abs().max() > 0.5, h * 0.5, h)  # mend: predicated-control-flow (was: if h.abs().max() > 0.5)
        '''),
    ),
    # `import torch as th`: the alias is reused
    (
        dedent('''\
            import torch as th


            def clip(x):
                h = x + 1
                if (h < 0).any():
                    h = th.relu(h)
                return h
        '''),
        dedent('''\
            import torch as th


            def clip(x):
                h = x + 1
                h = th.where((h < 0).any(), th.relu(h), h)  # mend: predicated-control-flow (was: if (h < 0).any())
                return h
        '''),
    ),
    # no `import torch` (only `from torch import nn`): it is added
    (
        dedent('''\
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    h = x + 1
                    if (h < 0).any() or not (h < 100).all():
                        h = h.clamp(0, 100)
                    return h
        '''),
        dedent('''\
            from torch import nn
            import torch


            class Model(nn.Module):
                def forward(self, x):
                    h = x + 1
                    h = torch.where(torch.logical_or((h < 0).any(), torch.logical_not((h < 100).all())), h.clamp(0, 100), h)  # mend: predicated-control-flow (was: if (h < 0).any() or not (h < 100).all())
                    return h
        '''),
    ),
    # a Python-level guard `and` a tensor test (BART's fp16 clamp): the guard stays an `if`; the setup temporary `clamp_value` runs before the selection
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16 and (
                        torch.isinf(h).any() or torch.isnan(h).any()
                    ):
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.clamp(h, min=-clamp_value, max=clamp_value)
                    return h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.dtype == torch.float16:
                        clamp_value = torch.finfo(h.dtype).max - 1000
                        h = torch.where(torch.logical_or(torch.isinf(h).any(), torch.isnan(h).any()), torch.clamp(h, min=-clamp_value, max=clamp_value), h)  # mend: predicated-control-flow (was: if torch.isinf(h).any() or torch.isnan(h).any())
                    return h
        '''),
    ),
    # an `elif` site after a Python-level test -> `else:` around the selection
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, mask=None):
                    if mask is None:
                        y = x
                    elif mask.all():
                        y = x * 2
                    else:
                        y = x.masked_fill(mask, 0.0)
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, mask=None):
                    if mask is None:
                        y = x
                    else:
                        y = torch.where(mask.all(), x * 2, x.masked_fill(mask, 0.0))  # mend: predicated-control-flow (was: elif mask.all())
                    return y
        '''),
    ),
    # a chained comparison on a tensor
    (
        dedent('''\
            import torch


            def in_unit_interval(x):
                ok = 0 < x.mean() < 1
                return ok
        '''),
        dedent('''\
            import torch


            def in_unit_interval(x):
                ok = torch.logical_and(0 < x.mean(), x.mean() < 1)  # mend: predicated-control-flow (was: 0 < x.mean() < 1)
                return ok
        '''),
    ),
    # the LongRoPE frequency update (transformers modeling_rope_utils): the memoised initialisation
    # and the device move are hoisted above one register_buffer whose value is selected
    (
        dedent('''\
            import torch
            from torch import nn


            def init_freq(dim, device, seq_len=None):
                factor = 2.0 if seq_len else 1.0
                exponents = torch.arange(0, dim, 2, device=device).float() / dim
                return 1.0 / (factor * 10000 ** exponents), factor


            def frequency_update(self, position_ids, device):
                """Long frequencies past the short limit, short ones otherwise."""
                seq_len = torch.max(position_ids) + 1
                if seq_len > self.short_limit:
                    if not hasattr(self, "long_freq"):
                        self.long_freq, _ = self.freq_fn(self.dim, device, seq_len=self.short_limit + 1)
                    self.register_buffer("freq", self.long_freq, persistent=False)
                else:
                    # keep the copy on the input's device
                    self.short_freq = self.short_freq.to(device)
                    self.register_buffer("freq", self.short_freq, persistent=False)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, short_limit: int = 4):
                    super().__init__()
                    self.dim, self.short_limit = dim, short_limit
                    self.freq_fn = init_freq
                    freq, _ = init_freq(dim, None)
                    self.register_buffer("freq", freq, persistent=False)
                    self.short_freq = self.freq

                def forward(self, x, position_ids):
                    frequency_update(self, position_ids, x.device)
                    angles = position_ids[..., None].float() * self.freq
                    return x * torch.cos(angles)
        '''),
        dedent('''\
            import torch
            from torch import nn


            def init_freq(dim, device, seq_len=None):
                factor = 2.0 if seq_len else 1.0
                exponents = torch.arange(0, dim, 2, device=device).float() / dim
                return 1.0 / (factor * 10000 ** exponents), factor


            def frequency_update(self, position_ids, device):
                """Long frequencies past the short limit, short ones otherwise."""
                seq_len = torch.max(position_ids) + 1
                if not hasattr(self, "long_freq"):
                    self.long_freq, _ = self.freq_fn(self.dim, device, seq_len=self.short_limit + 1)
                # keep the copy on the input's device
                self.short_freq = self.short_freq.to(device)
                self.register_buffer("freq", torch.where(seq_len > self.short_limit, self.long_freq, self.short_freq), persistent=False)  # mend: predicated-control-flow (was: if seq_len > self.short_limit)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, short_limit: int = 4):
                    super().__init__()
                    self.dim, self.short_limit = dim, short_limit
                    self.freq_fn = init_freq
                    freq, _ = init_freq(dim, None)
                    self.register_buffer("freq", freq, persistent=False)
                    self.short_freq = self.freq

                def forward(self, x, position_ids):
                    frequency_update(self, position_ids, x.device)
                    angles = position_ids[..., None].float() * self.freq
                    return x * torch.cos(angles)
        '''),
    ),
    # the same pattern in a class: memoised table, device move, paired register_buffer
    (
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, limit: float = 1.0):
                    super().__init__()
                    self.dim, self.limit = dim, limit
                    self.table_fn = ramp
                    self.register_buffer("table", torch.ones(dim), persistent=False)
                    self.base_table = self.table

                def forward(self, x):
                    if x.abs().amax() > self.limit:
                        if not hasattr(self, "wide_table"):
                            self.wide_table = self.table_fn(self.dim, 2.0)
                        self.register_buffer("table", self.wide_table, persistent=False)
                    else:
                        self.base_table = self.base_table.to(x.device)
                        self.register_buffer("table", self.base_table, persistent=False)
                    return x * self.table
        '''),
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 8, limit: float = 1.0):
                    super().__init__()
                    self.dim, self.limit = dim, limit
                    self.table_fn = ramp
                    self.register_buffer("table", torch.ones(dim), persistent=False)
                    self.base_table = self.table

                def forward(self, x):
                    if not hasattr(self, "wide_table"):
                        self.wide_table = self.table_fn(self.dim, 2.0)
                    self.base_table = self.base_table.to(x.device)
                    self.register_buffer("table", torch.where(x.abs().amax() > self.limit, self.wide_table, self.base_table), persistent=False)  # mend: predicated-control-flow (was: if x.abs().amax() > self.limit)
                    return x * self.table
        '''),
    ),
    # a memoised initialisation on one side of a plain selection
    (
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 6, cap: float = 2.0):
                    super().__init__()
                    self.dim, self.cap = dim, cap
                    self.weight_fn = ramp

                def forward(self, x):
                    if x.abs().max() > self.cap:
                        if not hasattr(self, "damp"):
                            self.damp = self.weight_fn(self.dim, 0.5)
                        y = x * self.damp
                    else:
                        y = x
                    return y
        '''),
        dedent('''\
            import torch
            from torch import nn


            def ramp(dim, top):
                return torch.linspace(1.0, top, dim)


            class Model(nn.Module):
                def __init__(self, dim: int = 6, cap: float = 2.0):
                    super().__init__()
                    self.dim, self.cap = dim, cap
                    self.weight_fn = ramp

                def forward(self, x):
                    if not hasattr(self, "damp"):
                        self.damp = self.weight_fn(self.dim, 0.5)
                    y = torch.where(x.abs().max() > self.cap, x * self.damp, x)  # mend: predicated-control-flow (was: if x.abs().max() > self.cap)
                    return y
        '''),
    ),
]

DECLINE_EXAMPLES: list[tuple[str, str]] = [
    # 008: a side sets the mask to None
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h, mask):
                    if mask.all():
                        mask = None
                    return h, mask
        '''),
        'None',
    ),
    # 006: the branch sits in a loop; Dynamo skipped the frame
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, gates):
                    out = torch.zeros_like(x)
                    for e, expert in enumerate(self.experts):
                        gate = gates[:, e:e + 1]
                        if gate.any():
                            out = out + gate * expert(x)
                    return out
        '''),
        'inside a loop',
    ),
    # 013: a Python counter bumped in the branch
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    norm = h.norm()
                    if not torch.isfinite(norm):
                        self.skipped_steps += 1
                        return torch.zeros_like(h)
                    return h / norm
        '''),
        'self.skipped_steps',
    ),
    # an in-place tensor update
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h.add_(1)
                return h
        '''),
        'in place (`add_`)',
    ),
    # a call made for its effect
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    print("positive")
                    h = h * 2
                return h
        '''),
        'for its effect',
    ),
    # an attribute write
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.sum() > 0:
                        self.cache = h
                    return h
        '''),
        'mutates state (`self.cache`)',
    ),
    # one side returns, the other falls through
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    return h
                h = h * 2
                return h
        '''),
        'leaves early',
    ),
    # a name with no value on the untaken side
    (
        dedent('''\
            import torch


            def f(x):
                if x.sum() > 0:
                    y = x * 2
                return y
        '''),
        'no prior definition',
    ),
    # a nested compound statement
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    for _ in range(3):
                        h = h * 2
                return h
        '''),
        'nested `for`',
    ),
    # an unknown function
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h = helper(h)
                return h
        '''),
        'might not be pure',
    ),
    # a method of the model
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def scale(self, h):
                    return h * 2

                def forward(self, h):
                    if h.sum() > 0:
                        h = self.scale(h)
                    return h
        '''),
        'the method `self.scale`',
    ),
    # random numbers on the untaken side
    (
        dedent('''\
            import torch
            import torch.nn.functional as F


            def f(h):
                if h.sum() > 0:
                    h = F.dropout(h, 0.1)
                return h
        '''),
        'random numbers',
    ),
    # a dropout submodule
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.drop = nn.Dropout(0.1)

                def forward(self, h):
                    if h.sum() > 0:
                        h = self.drop(h)
                    return h
        '''),
        'not pure in training mode',
    ),
    # a Python-level test under `or`
    (
        dedent('''\
            import torch


            def f(h, mask):
                if mask is None or mask.any():
                    h = h * 2
                return h
        '''),
        'Python-level test',
    ),
    # paired calls on different buffer names
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        self.register_buffer("pos_table", x * 2, persistent=False)
                    else:
                        self.register_buffer("neg_table", x, persistent=False)
                    return x
        '''),
        "on different names ('pos_table', 'neg_table')",
    ),
    # the memoised attribute is read elsewhere in the function
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, h):
                    if h.sum() > 0:
                        if not hasattr(self, "k"):
                            self.k = h
                        h = h * 2
                    if hasattr(self, "k"):
                        h = h + self.k
                    return h
        '''),
        'also read elsewhere in the function',
    ),
    # the memoised attribute is used elsewhere in the module
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def reset(self):
                    del self.scale_cache

                def forward(self, x):
                    if x.amax() > 1:
                        if not hasattr(self, "scale_cache"):
                            self.scale_cache = self.scale_fn(4)
                        y = x * self.scale_cache
                    else:
                        y = x
                    return y
        '''),
        'also used elsewhere in the module',
    ),
    # an `else` on the memoised initialisation
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        if not hasattr(self, "gain"):
                            self.gain = self.gain_fn(4)
                        else:
                            self.gain = self.gain * 2
                        y = x * self.gain
                    else:
                        y = x
                    return y
        '''),
        'has an `else`',
    ),
    # another statement of the side has an effect
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, steps):
                    if steps.max() > self.limit:
                        if not hasattr(self, "long_table"):
                            self.long_table = self.table_fn(self.dim)
                        self.calls = self.calls + 1
                        self.register_buffer("table", self.long_table, persistent=False)
                    else:
                        self.register_buffer("table", self.short_table, persistent=False)
                    return self.table
        '''),
        'mutates state (`self.calls`)',
    ),
    # the initialiser is a method of the class
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def build_table(self, n):
                    return torch.ones(n)

                def forward(self, x):
                    if x.sum() > 0:
                        if not hasattr(self, "cached"):
                            self.cached = self.build_table(4)
                        y = x * self.cached
                    else:
                        y = x
                    return y
        '''),
        'calls the method `self.build_table`',
    ),
    # the initialiser is a submodule
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(8, 4)

                def forward(self, x, ids):
                    if x.sum() > 0:
                        if not hasattr(self, "bias_row"):
                            self.bias_row = self.embed(ids)
                        y = x + self.bias_row
                    else:
                        y = x
                    return y
        '''),
        'a submodule (nn.Embedding)',
    ),
    # the memoised slot is not definitely assigned
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        if not hasattr(self, "offset"):
                            if self.training:
                                self.offset = self.offset_fn(4)
                        y = x + self.offset
                    else:
                        y = x
                    return y
        '''),
        'not definitely assigned',
    ),
    # the initialiser may raise
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x, n):
                    if x.sum() > 0:
                        if not hasattr(self, "window"):
                            self.window = self.window_fn(self.size // n)
                        y = x * self.window
                    else:
                        y = x
                    return y
        '''),
        'which may raise',
    ),
    # only one side registers a buffer
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        y = x * 2
                        self.register_buffer("last", y, persistent=False)
                    else:
                        y = x
                    return y
        '''),
        'only one side ends with `self.register_buffer(...)`',
    ),
    # the moved attribute is read on the other side
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        self.base = self.base.to(x.device)
                        y = x * self.base
                    else:
                        y = x + self.base
                    return y
        '''),
        '`self.base` is read on the other side',
    ),
    # a scalar read out of the graph
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h = h / h.sum().item()
                return h
        '''),
        '`.item()`',
    ),
    # two Python constants
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    scale = 2.0
                else:
                    scale = 1.0
                return h * scale
        '''),
        'Python constant',
    ),
    # augmented assignment
    (
        dedent('''\
            import torch


            def f(h):
                if h.sum() > 0:
                    h += 1
                return h
        '''),
        'mutates state (`h += ...`)',
    ),
]


# torch.cond: the untaken side must not run (see _rewrite_cond)
FIX_EXAMPLES += [
    # torch.cond: a submodule call on each side must not run speculatively (GraphMend: cond when a side calls);
    # the sides read different parameters, so cond runs only without autograd (zero vs None gradients)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.mlp_a = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
                    self.mlp_b = nn.Linear(dim, dim)

                def forward(self, h):
                    if h.mean() > 0:
                        y = self.mlp_a(h)
                    else:
                        y = self.mlp_b(h)
                    return y + h
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self, dim: int = 8):
                    super().__init__()
                    self.mlp_a = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
                    self.mlp_b = nn.Linear(dim, dim)

                def forward(self, h):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if torch.compiler.is_compiling() and (h.mean() > 0).numel() == 1 and not torch.is_grad_enabled():  # mend: predicated-control-flow (was: if h.mean() > 0)
                        y = torch.cond(h.mean() > 0, lambda: self.mlp_a(h), lambda: self.mlp_b(h))
                    else:
                        if h.mean() > 0:
                            y = self.mlp_a(h)
                        else:
                            y = self.mlp_b(h)
                    return y + h
        '''),
    ),
    # torch.cond: shared/cases 012's kind -- the test guards sqrt's domain; `else: y = t` is cloned (never mutated, never escapes)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, t):
                    if t > 0:
                        y = torch.sqrt(t)
                    else:
                        y = t
                    return y * 2.0
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, t):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if torch.compiler.is_compiling() and (t > 0).numel() == 1:  # mend: predicated-control-flow (was: if t > 0)
                        y = torch.cond(t > 0, lambda: torch.sqrt(t), lambda: t.clone())
                    else:
                        if t > 0:
                            y = torch.sqrt(t)
                        else:
                            y = t
                    return y * 2.0
        '''),
    ),
    # torch.cond: a log-domain guard assigning two names, one cond per name (a tuple-valued cond's backward fails on torch 2.13)
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.min() > 0:
                        y = torch.log(x)
                        z = y * 2.0
                    else:
                        y = x * 0.0
                        z = x + 1.0
                    return y + z
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if torch.compiler.is_compiling() and (x.min() > 0).numel() == 1 and not torch.is_grad_enabled():  # mend: predicated-control-flow (was: if x.min() > 0)
                        _mend_pred_0 = x.min() > 0
                        y = torch.cond(_mend_pred_0, lambda: torch.log(x), lambda: x * 0.0)
                        z = torch.cond(_mend_pred_0, lambda: y * 2.0, lambda: x + 1.0)
                    else:
                        if x.min() > 0:
                            y = torch.log(x)
                            z = y * 2.0
                        else:
                            y = x * 0.0
                            z = x + 1.0
                    return y + z
        '''),
    ),
    # torch.cond: a view (`h[:, :4]`) on the other side is cloned; cond outputs must not alias its inputs
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(4, 4)

                def forward(self, h):
                    if (h > 0).all():
                        out = self.head(h)
                    else:
                        out = h[:, :4]
                    return torch.relu(out)
        '''),
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(4, 4)

                def forward(self, h):
                    # torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms
                    # per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)
                    if torch.compiler.is_compiling() and ((h > 0).all()).numel() == 1 and not torch.is_grad_enabled():  # mend: predicated-control-flow (was: if (h > 0).all())
                        out = torch.cond((h > 0).all(), lambda: self.head(h), lambda: h[:, :4].clone())
                    else:
                        if (h > 0).all():
                            out = self.head(h)
                        else:
                            out = h[:, :4]
                    return torch.relu(out)
        '''),
    ),
]

DECLINE_EXAMPLES += [
    # torch.cond needed (log-domain guard), but the sides differ in dtype
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, x):
                    if x.min() > 0:
                        y = torch.log(x)
                    else:
                        y = x.half()
                    return y
        '''),
        'different dtypes',
    ),
    # torch.cond needed (sqrt-domain guard), but the aliased output is mutated in place afterwards
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def forward(self, s):
                    if s > 0:
                        y = torch.sqrt(s)
                    else:
                        y = s
                    s.mul_(2)
                    return y * 1.0
        '''),
        'mutated in place later',
    ),
    # torch.cond needed (a submodule call), but one side is None
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mlp = nn.Linear(4, 4)

                def forward(self, h):
                    if h.mean() > 0:
                        y = self.mlp(h)
                    else:
                        y = None
                    return h, y
        '''),
        'None',
    ),
    # torch.cond needed (a submodule call), but a side prints
    (
        dedent('''\
            import torch
            from torch import nn


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mlp = nn.Linear(4, 4)

                def forward(self, h):
                    if h.mean() > 0:
                        print("large activations")
                        y = self.mlp(h)
                    else:
                        y = h * 0.5
                    return y
        '''),
        'for its effect',
    ),
]
