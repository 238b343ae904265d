"""Python-number operands a rule may admit where a literal is expected (``self.scale``,
``self.min_len``, a local ``s = 0.5``): static candidates, each confirmed on the example run
by the rule's own obligation (a tensor there broadcasts or promotes differently)."""
from __future__ import annotations

import libcst as cst

from mend.rules._common import code_of, dotted, target_names


_TENSOR_MAKERS = ("torch.", "nn.", "Parameter", "register_buffer")


def _numeric(node: cst.BaseExpression) -> bool:
    """Statically a Python number: numeric literals and arithmetic of them, ``float()``/``int()``/
    ``math.*`` calls."""
    if isinstance(node, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return _numeric(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return _numeric(node.left) and _numeric(node.right)
    if isinstance(node, cst.IfExp):   # `0.5 if self.training else 0.25`: a number either way
        return _numeric(node.body) and _numeric(node.orelse)
    if isinstance(node, cst.Call):
        name = dotted(node.func) or ""
        return name in ("float", "int") or name.startswith("math.")
    return False


def scalar_candidates(ancestors: list[cst.CSTNode]) -> set[str]:
    """Names an update may read as Python numbers, to be confirmed on the example run (the
    obligation ``mask-update-scalar``): ``self.<attr>`` that the class never binds to a tensor
    or a module (no ``torch.``/``nn.`` call, ``Parameter`` or ``register_buffer`` names it) and
    whose class body binds no name of it (a property, a method, a class attribute),
    and locals of the function every binding of which is a numeric expression. A parameter is
    never one (a tensor argument broadcasts against the selected elements only)."""
    out: set[str] = set()
    cls = next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None)
    fn = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if cls is not None:
        tensorish: set[str] = set()
        plain: set[str] = set()
        for method in (st for st in cls.body.body if isinstance(st, cst.FunctionDef)):
            for node in walk(method):
                if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                    for t in targets:
                        for attr in _self_attrs(t):
                            made = code_of(node.value) if node.value is not None else "torch."
                            ok = method.name.value == "__init__" and isinstance(node, cst.Assign) \
                                and isinstance(t, cst.Attribute) and not any(k in made for k in _TENSOR_MAKERS)
                            (plain if ok else tensorish).add(attr)
                elif isinstance(node, cst.Call) and "register_buffer" in code_of(node.func) and node.args \
                        and isinstance(node.args[0].value, cst.SimpleString):
                    tensorish.add(node.args[0].value.evaluated_value)
        # a name the class body itself binds (a property, a method, a class attribute) is no
        # plain instance attribute: `self.thr = 5` may run a setter, and each read a getter
        # (an adversarial review: a getter with an effect, read once per element before)
        in_class = {st.name.value for st in cls.body.body if isinstance(st, (cst.FunctionDef, cst.ClassDef))}
        in_class |= {t.target.value for st in cls.body.body if isinstance(st, cst.SimpleStatementLine)
                     for small in st.body if isinstance(small, cst.Assign) for t in small.targets
                     if isinstance(t.target, cst.Name)}
        in_class |= {small.target.value for st in cls.body.body if isinstance(st, cst.SimpleStatementLine)
                     for small in st.body if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)}
        out |= {f"self.{a}" for a in plain - tensorish - in_class}
    if fn is not None:
        params = {p.name.value for p in [*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params]}
        binds: dict[str, list[bool]] = {}
        for node in walk(fn.body):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    for n in bound_names(t.target):
                        binds.setdefault(n, []).append(isinstance(t.target, cst.Name) and _numeric(node.value))
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
                for n in bound_names(node.target):
                    binds.setdefault(n, []).append(False)
            elif isinstance(node, cst.AsName):
                for n in bound_names(node.name):
                    binds.setdefault(n, []).append(False)
        out |= {n for n, ok in binds.items() if all(ok) and n not in params}
    return out


def _self_attrs(target: cst.CSTNode) -> set[str]:
    """The ``self.<attr>`` names a binding target writes."""
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        return {target.attr.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_self_attrs(e.value) for e in target.elements))
    return set()


def bound_names(target: cst.CSTNode) -> set[str]:
    """The local names a binding target binds (not the attributes or items it writes)."""
    return set(target_names(target))


def walk(node: cst.CSTNode):
    """``node`` and every node below it, depth first."""
    yield node
    for child in node.children:
        yield from walk(child)
