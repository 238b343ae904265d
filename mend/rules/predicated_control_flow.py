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
  a plain assignment before the selection.

Fix safety: ``torch.where`` evaluates both sides. The rule declines what it can see is
unsafe (``DECLINE_EXAMPLES``): a side that mutates state, raises, returns early while the
other falls through, assigns ``None``, draws random numbers, calls something that might
not be pure, holds a nested compound statement, or a site inside a loop (Dynamo skipped
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
from mend.rules import Decline, Match
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


def is_memo_init(stmt) -> bool:
    """``if not hasattr(self, "k"): self.k... = init(...)``: a memoised initialisation."""
    return bool(m.matches(stmt, m.If(
        test=m.UnaryOperation(operator=m.Not(), expression=m.Call(func=m.Name("hasattr"))),
        orelse=None)))


def _check_branch(body) -> tuple[set[str], bool, set[str]] | Decline:
    """(assigned names, returns?, names assigned None) or a Decline."""
    names: set[str] = set()
    nones: set[str] = set()
    returns = False
    for stmt in body.body:
        if isinstance(stmt, cst.If) and is_memo_init(stmt):
            continue
        if not isinstance(stmt, cst.SimpleStatementLine):
            return Decline(NAME, f"a branch holds a nested `{type(stmt).__name__.lower()}` statement")
        for small in stmt.body:
            op = inplace_call(small)
            if op:
                return Decline(NAME, f"a branch mutates a tensor in place (`{op}`)")
            if has_out_kwarg(small):
                return Decline(NAME, "a branch writes through `out=`")
            if isinstance(small, cst.Return):
                returns = True
            elif isinstance(small, cst.Pass):
                pass
            elif (name := assigned_name(small)) is not None:
                names.add(name)
                if m.matches(small.value, m.Name("None")):
                    nones.add(name)
            elif is_device_move(small):
                pass
            elif isinstance(small, cst.Expr) and (call_name(small.value) or "").endswith("register_buffer"):
                pass
            elif isinstance(small, (cst.AugAssign,)) or (isinstance(small, cst.Assign)):
                target = small.target if isinstance(small, cst.AugAssign) else small.targets[0].target
                code = cst.Module([]).code_for_node(target)
                return Decline(NAME, f"a branch mutates state (`{code}`)")
            elif isinstance(small, cst.Raise):
                return Decline(NAME, "a branch raises")
            elif isinstance(small, (cst.Global, cst.Nonlocal)):
                return Decline(NAME, "a branch declares global/nonlocal state")
            else:
                code = cst.Module([]).code_for_node(small)
                return Decline(NAME, f"a branch runs `{code.strip()[:60]}` for its effect")
    return names, returns, nones


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
    """Static screen of a data-dependent branch site (no verification yet).

    Looser than :func:`rewrite`: it also accepts branches whose setup GraphMend hoists
    (memoised initialisation, device moves, buffer registration).
    """
    if loc.in_loop:
        return Decline(NAME, "the branch sits inside a loop, so Dynamo skipped the whole frame; predicating it "
                             "would evaluate the skipped side on every iteration (cost, inf*0 NaNs)")
    node = loc.node
    if isinstance(node, cst.If):
        arms = branches(node)
        results = []
        for _, body in arms:
            res = _check_branch(body)
            if isinstance(res, Decline):
                return res
            results.append(res)
        if len(arms) == 1:
            # the implicit else; `if p: return a` + `return b` is an if/else in disguise
            parent = loc.ancestors[-1] if loc.ancestors else None
            results.append((set(), results[0][1] and _return_follows(node, parent), set()))
        returns = {r[1] for r in results}
        if returns == {True, False}:
            return Decline(NAME, "a branch leaves early (`return`) while the other falls through")
        for nones in (r[2] for r in results):
            if nones:
                name = sorted(nones)[0]
                return Decline(NAME, f"the two sides differ in None-ness (`{name}` becomes None on one side)")
        return Match(NAME, "if/else -> torch.where or torch.cond")
    if m.findall(node, m.BooleanOperation()):
        return Match(NAME, "tensor `and`/`or` -> torch.logical_and/logical_or")
    return Decline(NAME, "the tensor's truth value is taken in a form the rule does not rewrite")


# --------------------------------------------------------------------------------------
# Rewrite
# --------------------------------------------------------------------------------------


@dataclass
class RewriteResult:
    """A rewritten module and what the verifier must still prove about it.

    ``span`` is the (first, last) line of the original statements replaced;
    ``predicates`` are the original predicate sources; ``obligations`` are data only
    (``{"kind": "same-shape", "target": "h", "lhs": "h * 2.0", "rhs": "h"}``...).
    """

    code: str
    span: tuple[int, int]
    detail: str
    predicates: list[str] = field(default_factory=list)
    obligations: list[dict] = field(default_factory=list)


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


FORCING_HOOK = "__import__('verifier.forcing'"


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


def _arm(pred, body: cst.BaseSuite | list) -> _Arm:
    if isinstance(body, list):
        smalls = body
    elif isinstance(body, cst.SimpleStatementSuite):
        smalls = list(body.body)
    else:
        smalls = []
        for stmt in body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                if isinstance(stmt, cst.If) and is_memo_init(stmt):
                    raise _Declined("a branch holds a memoised initialisation (`if not hasattr(...)`); "
                                    "hoisting it is not implemented")
                raise _Declined(f"a branch holds a nested `{type(stmt).__name__.lower()}` statement")
            smalls.extend(stmt.body)
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

    arms = [_arm(test, body) for test, body in chain]
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

    pred_codes = [_code(_strip(a.pred)) for a in arms if a.pred is not None]
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

    def select(values: list[cst.BaseExpression], target: str, pred_exprs) -> cst.Call:
        for v in values[1:]:
            for kind in ("same-shape", "same-dtype"):
                env.oblige(kind, target=target, lhs=_code(values[0]), rhs=_code(v))
        out = values[-1]
        for p, v in reversed(list(zip(pred_exprs, values))):
            out = env.torch_call("where", p, v, out)
        return out

    n_select = 1 if returns else len(selected)
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
    if not stmts:
        raise _Declined("no side assigns or returns anything; there is nothing to select")

    was = ("elif " if elif_site else "if ") + pred_codes[0]
    # the marker goes on the first line that selects (setup temporaries come before it)
    at = next(i for i, st in enumerate(stmts)
              if not (isinstance(st.body[0], cst.Assign) and st.body[0].targets[0].target.value in temps))
    keep = [ln.comment for ln in node.leading_lines if ln.comment]  # stay where they are
    if guard is not None and isinstance(node.body, cst.IndentedBlock):
        keep += [node.body.header.comment, *(ln.comment for ln in node.body.footer if ln.comment)]
    comments = _comments(node, skip=tuple(c for c in keep if c is not None))
    if extra_return is not None:
        comments += _comments(extra_return)
    kind = "elif chain" if len(preds) > 1 else "if"
    detail = f"{kind} -> torch.where ({'return' if returns else ', '.join(selected) or 'setup only'})"
    span = (positions[node].start.line, span_end)

    if guard is not None:  # if A and B: ... -> if A: <where on B>
        stmts[at] = _marked(stmts[at], was)
        stmts[0] = stmts[0].with_changes(leading_lines=comments)
        body = node.body.with_changes(body=stmts) if isinstance(node.body, cst.IndentedBlock) \
            else cst.IndentedBlock(body=stmts)
        return [(node, [node.with_changes(test=guard, body=body)])], span, detail, pred_codes
    if elif_site:  # ... elif B: -> ... else: <where on B>
        stmts[at] = _marked(stmts[at], was)
        stmts[0] = stmts[0].with_changes(leading_lines=comments)
        new_else = cst.Else(body=cst.IndentedBlock(body=stmts), leading_lines=node.leading_lines)
        return [(parent, [parent.with_changes(orelse=new_else)])], span, detail, pred_codes
    stmts[at] = _marked(stmts[at], was)
    stmts[0] = stmts[0].with_changes(leading_lines=[*node.leading_lines, *comments])
    pairs = [(node, stmts)]
    if extra_return is not None:
        pairs.append((extra_return, []))
    return pairs, span, detail, pred_codes


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
    index = _index(module)
    starting = [(n, a) for ln, n, a in index.found if ln == line]
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
    return RewriteResult(new.code, span, detail, preds, env.obligations)


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
    # a memoised initialisation (GraphMend hoists it; not implemented here)
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
                    return h
        '''),
        'memoised initialisation',
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
