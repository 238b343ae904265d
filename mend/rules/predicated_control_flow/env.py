"""What every part of the rewrite shares: the module environment (:class:`_Env`: imports,
the enclosing class's methods and submodules, fresh names, the obligations recorded so
far), the internal decline (:class:`_Declined`) and small LibCST helpers."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._scalars import bound_names
from mend.taxonomy import call_name
from mend.rules._common import find_all

_bound_names = bound_names   # the names a binding target binds (hoisting, branches)

NAME = "predicated-control-flow"


class _Declined(Exception):
    """Internal: unwinds to :func:`rewrite`, which turns it into a :class:`Decline`."""



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
    return {n.value for n in _name_reads(node)}


def _name_reads(node: cst.CSTNode) -> list[cst.Name]:
    """The ``Name`` nodes of ``node`` that read a variable (attribute and keyword names excluded)."""
    names: list[cst.Name] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            names.append(n)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return names


class _Env:
    """What the rewrite needs to know about the module around the site."""

    def __init__(self, module: cst.Module, ancestors: list[cst.CSTNode]):
        self.module = module
        self.aliases: dict[str, str] = {}  # local name -> dotted module path
        for imp in find_all(module, m.Import() | m.ImportFrom()):
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
        self.names = {n.value for n in find_all(module, m.Name())}
        self.counter = 0
        self.obligations: list[dict] = []
        self.want: str | None = None   # the form asked for ("where", "cond"; None: the rule's own)
        self.form: str | None = None   # the form emitted
        self.cost_parts: dict | None = None  # the branch's parts for the cost model (RewriteResult)
        self.caveat: str | None = None   # RewriteResult.caveat
        self.cond_ready = False   # the cond's guard calls cond.READY (its helper is added to the module)
        self.loop_roots: list[str] = []   # the iterables of the loops whose items a side calls (cond's guard)
        self.loop_items: set[str] = set()   # those items' names
        # (slot, guard) while screening a memoised initialisation that is being hoisted
        self.hoisting: tuple[str, str] | None = None
        self.visiting: set[str] = set()   # names whose bindings _is_static is reading (cycles)
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

    def bindings(self, name: str) -> list[cst.BaseExpression] | None:
        """The values bound to local ``name`` in the enclosing function, when every binding
        is a plain ``name = value`` statement (None otherwise: a parameter, a loop or
        ``with`` target, an augmented, tuple, walrus or ``global``/``nonlocal`` binding, a
        nested function or class, or no binding at all). Lets the screen treat
        ``fp16 = h.dtype == torch.float16`` ... ``if fp16 and ...`` as the static test it is."""
        fn = self.function
        if fn is None or name in {p.name.value for p in _params(fn.params)}:
            return None
        values: list[cst.BaseExpression] = []
        for node in _walk(fn.body):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Global, cst.Nonlocal)) \
                    and name in {n.value for n in m.findall(node, m.Name())}:
                return None
            if isinstance(node, cst.Assign) and any(name in bound_names(t.target) for t in node.targets):
                if len(node.targets) != 1 or not m.matches(node.targets[0].target, m.Name(name)):
                    return None
                values.append(node.value)
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)) \
                    and name in bound_names(node.target) or isinstance(node, cst.AsName) and name in bound_names(node.name):
                return None
        return values or None

    def oblige(self, kind: str, **data) -> None:
        item = {"kind": kind, **data}
        if item not in self.obligations:
            self.obligations.append(item)



def _params(params: cst.Parameters) -> list[cst.Param]:
    star = [params.star_arg] if isinstance(params.star_arg, cst.Param) else []
    return [*params.posonly_params, *params.params, *star, *params.kwonly_params,
            *([params.star_kwarg] if params.star_kwarg else [])]


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _occurrences_outside(scope: cst.CSTNode, body, name: str) -> bool:
    """Whether ``name`` occurs in ``scope`` outside ``body`` (a node, or a tuple of statements:
    the fall-through arm after an early ``return``)."""
    found = False
    skip = body if isinstance(body, tuple) else (body,)

    class V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if any(node is b for b in skip):
                return False
            if isinstance(node, cst.Name) and node.value == name:
                found = True
            return not found

    scope.visit(V())
    return found
