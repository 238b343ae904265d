"""What several rules ask of a local name's reads in a function: every read with whether a
nested scope captures it (:class:`NameWalk`), the statement a read sits in
(:func:`statement_of`), and how a read uses the value, in words (:func:`use_kind`)."""
from __future__ import annotations

import libcst as cst

from mend.locate import Located
from mend.rules._common import code_of
from mend.rules._scalars import bound_names, walk

# calls that read a function's locals by name: a screen of the names' reads cannot see them
DYNAMIC_SCOPE = {"locals", "vars", "eval", "exec", "globals"}


class NameWalk(cst.CSTVisitor):
    """Every Name node of ``names`` in a function, with the enclosing nested scope if any."""

    def __init__(self, names: set[str]):
        self.names = names
        self.found: list[tuple[cst.Name, bool]] = []
        self.depth = 0

    def _enter(self, node) -> bool:
        self.depth += 1
        return True

    def _leave(self, node) -> None:
        self.depth -= 1

    visit_FunctionDef = visit_Lambda = visit_ClassDef = _enter
    leave_FunctionDef = leave_Lambda = leave_ClassDef = _leave

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.found.append((node, self.depth > 0))


def statement_of(node: cst.CSTNode, parents) -> cst.CSTNode:
    cur = node
    while cur in parents and not isinstance(cur, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        cur = parents[cur]
    return cur


def use_kind(name: cst.Name, parents) -> str:
    """How a later read of a value uses it, in words."""
    parent = parents.get(name)
    while isinstance(parent, (cst.LeftParen, cst.RightParen)):
        parent = parents.get(parent)
    if isinstance(parent, cst.Return):
        return "returned directly"
    negated = isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)
    tested = isinstance(parent, (cst.If, cst.While, cst.IfExp)) and parent.test is name
    if isinstance(parent, cst.BooleanOperation) or negated or tested:
        return "used as a truth value (`if`, `while`, `and`, `or`, `not`: Python control flow)"
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
        return "compared"
    if isinstance(parent, cst.Arg):
        return "passed to a call"
    if isinstance(parent, cst.FormattedStringExpression):
        return "formatted into a string"
    if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del)):
        return "reassigned or deleted"
    if isinstance(parent, cst.Assign):
        return "stored (`... = n`)"
    if isinstance(parent, cst.Subscript) or isinstance(parent, (cst.SubscriptElement, cst.Index, cst.Slice)):
        return "used as an index or slice bound"
    if isinstance(parent, cst.BinaryOperation):
        return "an operand of an operator other than +, - and *"
    if isinstance(parent, cst.UnaryOperation):
        return "negated or inverted on its own"
    return f"used as part of a {type(parent).__name__}" if parent is not None else "used"


# calls whose arguments are sizes: a value read there gives a data-dependent output shape
SIZE_CALLS = {"split", "split_with_sizes", "tensor_split", "arange", "zeros", "ones", "empty", "full", "rand", "randn",
              "randint", "reshape", "view", "expand", "repeat", "narrow", "new_zeros", "new_ones", "new_empty",
              "new_full", "unflatten", "interpolate", "repeat_interleave", "linspace", "pad"}


def _size_use(node: cst.CSTNode, parents: dict[int, cst.CSTNode], stop: cst.CSTNode) -> cst.CSTNode | None:
    """The slice or sizing call a value read at ``node`` reaches, through arithmetic, indexing
    into it, ``int()``/``math`` calls and sequence displays; None if it reaches none."""
    cur, up = node, parents.get(id(node))
    while up is not None and up is not stop:
        if isinstance(up, cst.Slice):
            return up
        if isinstance(up, cst.Call) and isinstance(cur, cst.Arg):
            func = up.func.attr.value if isinstance(up.func, cst.Attribute) else getattr(up.func, "value", "")
            if func in SIZE_CALLS:
                return up
            if func not in ("int", "ceil", "floor", "max", "min", "round", "tuple", "list"):
                return None
        elif isinstance(up, cst.Subscript) and up.value is not cur:
            return None   # used as an index, not indexed into
        elif not isinstance(up, (cst.BinaryOperation, cst.UnaryOperation, cst.Subscript, cst.SubscriptElement,
                                 cst.Index, cst.Arg, cst.Element, cst.Tuple, cst.List)):
            return None   # an attribute (`h.shape`) or a call's result is not the number itself
        cur, up = up, parents.get(id(up))
    return None


def sizes_tensors(loc: Located) -> str | None:
    """Why the values a ``.item()``/``.tolist()`` statement reads must stay Python numbers: they
    size tensors (a split size, a slice bound, an allocation's shape; helper-77), else None."""
    function = next((a for a in reversed(loc.ancestors) if isinstance(a, cst.FunctionDef)), None)
    if function is None:
        return None
    node = loc.node.body[0] if isinstance(loc.node, cst.SimpleStatementLine) and loc.node.body else loc.node
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else (
        [node.target] if isinstance(node, (cst.For, cst.AnnAssign)) else [])
    names = set().union(*(bound_names(t) for t in targets))
    hit = sizing_use(function, names, loc.node)
    if hit is None:
        return None
    what = " ".join(code_of(hit).split())
    return (f"the values read here{' (`' + '`, `'.join(sorted(names)) + '`)' if names else ''} size tensors "
            f"(`{what[:70]}{'...' if len(what) > 70 else ''}`): the output shape depends on tensor data, so no local "
            "rewrite keeps it in one graph (capture_scalar_outputs=True traces it with unbacked symbolic sizes, a "
            "global setting that changes every shape downstream)")


def sizing_use(function: cst.FunctionDef, names: set[str], node: cst.CSTNode) -> cst.CSTNode | None:
    """Where values read by the statement ``node`` size a tensor: ``node`` itself passing one to a
    sizing call or slice, or a read of ``names`` (the names it binds, and names bound from those
    on later lines, two steps deep) that does; None if nowhere."""
    parents = {id(c): n for n in walk(function) for c in n.children}
    for call in walk(node):
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and \
                call.func.attr.value in ("item", "tolist"):
            hit = _size_use(call, parents, function)
            if hit is not None:
                return hit
    tracked = set(names)
    for _ in range(2):   # names bound from the tracked ones by arithmetic (`h, w = image_size`, `n = size[0] * 2`)
        for small in walk(function):
            if isinstance(small, cst.Assign) and _numeric(small.value) and any(
                    isinstance(x, cst.Name) and x.value in tracked for x in walk(small.value)):
                tracked |= set().union(*(bound_names(t.target) for t in small.targets))
    for n in walk(function.body):
        if isinstance(n, cst.Name) and n.value in tracked:
            hit = _size_use(n, parents, function)
            if hit is not None:
                return hit
    return None


_NUMERIC_CALLS = ("int", "float", "min", "max", "round", "abs", "math.ceil", "math.floor", "math.prod")


def _numeric(expr: cst.BaseExpression) -> bool:
    """``expr`` computes Python numbers from its names: names, literals, indexing, arithmetic,
    tuples and lists, and int/float/min/max/round/abs/math calls (not a tensor op or a layer,
    whose result is not the number read: helper-77's longformer flag was passed to a layer)."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return _numeric(expr.left) and _numeric(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _numeric(expr.expression)
    if isinstance(expr, cst.Subscript):
        return _numeric(expr.value)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(_numeric(e.value) for e in expr.elements)
    if isinstance(expr, cst.Call):
        func = expr.func
        name = func.value if isinstance(func, cst.Name) else (
            f"{func.value.value}.{func.attr.value}" if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            else "")
        return name in _NUMERIC_CALLS and all(_numeric(a.value) for a in expr.args)
    return False
