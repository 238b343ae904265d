"""forward-attribute: which sites the rule takes (``self.X = self.X.<conversion>(...)`` in a
method), why it declines the others, and :func:`match`, a scan's verdict on a located site.

The screen reads the statement, its method, its class and the whole file (LibCST, no
imports): the verifier screens the mended file again on its own (``attribute-screen``)."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted, find_all

NAME = "forward-attribute"

# Tensor methods that return ``self`` when nothing changes (Tensor.to/type/float/...: "no
# copy is performed and the original object is returned"): the common call stores the
# object already stored, which is the write the rewrite leaves out
CONVERSIONS = frozenset({"to", "type", "type_as", "float", "double", "half", "bfloat16", "cpu", "cuda", "contiguous"})

# class members whose override changes what a read or a write of an attribute does
ACCESS_HOOKS = frozenset({"__setattr__", "__getattr__", "__getattribute__", "__delattr__", "register_buffer",
                          "register_parameter"})
GLOBAL_HOOKS = ("register_module_buffer_registration_hook", "register_module_parameter_registration_hook")


@dataclass
class Plan:
    line: cst.SimpleStatementLine   # the statement line holding the write
    attr: str                       # the attribute's name (``pos_encoding``)
    value: cst.Call                 # the conversion call (the write's right-hand side)
    local: str                      # the fresh local that holds the converted tensor
    function: cst.FunctionDef


def self_attr(node: cst.CSTNode) -> str | None:
    """``X`` for ``self.X``, else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def site_write(node: cst.CSTNode) -> str | None:
    """``X`` when ``node`` is an assignment to ``self.X`` (one target), else None."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        return self_attr(node.targets[0].target)
    if isinstance(node, cst.AnnAssign) and node.value is not None:
        return self_attr(node.target)
    return None


def _writes_attr(small: cst.CSTNode, attr: str) -> bool:
    """An assignment / augmented assignment / ``del`` of ``self.<attr>``, or
    ``setattr``/``delattr(self, "<attr>", ...)`` in ``small``."""
    targets: list = []
    if isinstance(small, cst.Assign):
        targets = [t.target for t in small.targets]
    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        targets = [small.target]
    elif isinstance(small, cst.Del):
        targets = [small.target]
    for t in targets:
        for node in [t, *m.findall(t, m.Attribute())]:
            if self_attr(node) == attr:
                return True
    for call in m.findall(small, m.Call()):
        if (dotted(call.func) or "") in ("setattr", "delattr", "object.__setattr__") and len(call.args) >= 2:
            name = call.args[1].value
            if isinstance(name, cst.SimpleString) and name.evaluated_value == attr:
                return True
    return False


def _names_used(node: cst.CSTNode) -> set[str]:
    """Variable names in ``node`` (not attribute names or keyword-argument names)."""
    skip = {id(a.attr) for a in m.findall(node, m.Attribute())} | {
        id(a.keyword) for a in m.findall(node, m.Arg()) if a.keyword is not None}
    return {n.value for n in m.findall(node, m.Name()) if id(n) not in skip}


def fresh_local(function: cst.FunctionDef, attr: str) -> str:
    used = _names_used(function)
    for cand in (attr, f"{attr}_", f"_mend_{attr}"):
        if cand not in used:
            return cand
    i = 2
    while f"_mend_{attr}{i}" in used:
        i += 1
    return f"_mend_{attr}{i}"


def _class_binds(cls: cst.ClassDef, attr: str) -> bool:
    """The class body binds ``attr`` (a class attribute, a method, a property)."""
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == attr:
            return True
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else (
                    [small.target] if isinstance(small, cst.AnnAssign) else [])
                if any(isinstance(t, cst.Name) and t.value == attr for t in targets):
                    return True
    return False


def _conversions(value: cst.BaseExpression, attr: str) -> list[cst.Call] | None:
    """The conversion calls of ``self.<attr>.c1(...).c2(...)...`` (outermost first), each in
    :data:`CONVERSIONS` (each returns its receiver itself when it changes nothing, so the chain
    returns the stored tensor then: helper-48's ``.to(x.device).to(x.dtype)``), else None."""
    calls = []
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value in CONVERSIONS:
        calls.append(value)
        value = value.func.value
    return calls if calls and self_attr(value) == attr else None


def _registered_as_submodule(module: cst.Module, attr: str) -> bool:
    """``self.<attr> = nn.<Class>(...)`` (a capitalised class of ``nn``/``torch.nn``) somewhere
    in the file: a module's ``.to`` returns the module, which the rule does not model (the scan
    called nllb_moe's router classifier fixable, the fix refuted it: helper-49)."""
    for small in find_all(module, m.Assign()):
        if any(self_attr(t.target) == attr for t in small.targets) and isinstance(small.value, cst.Call):
            name = dotted(small.value.func) or ""
            head, _, last = name.rpartition(".")
            if head in ("nn", "torch.nn") and last[:1].isupper() and last not in ("Parameter", "Buffer"):
                return True
    return False


def _registered_as_parameter(module: cst.Module, attr: str) -> bool:
    for small in find_all(module, m.Assign()):
        if any(self_attr(t.target) == attr for t in small.targets) and m.findall(
                small.value, m.Call(func=m.Name("Parameter") | m.Attribute(attr=m.Name("Parameter")))):
            return True
    for call in find_all(module, m.Call(func=m.Attribute(attr=m.Name("register_parameter")))):
        if call.args and isinstance(call.args[0].value, cst.SimpleString) and call.args[0].value.evaluated_value == attr:
            return True
    return False


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined."""
    attr = site_write(node)
    if attr is None:
        return Decline(NAME, "the statement is not an assignment to one `self.` attribute")
    value = node.value
    calls = _conversions(value, attr)
    if calls is None:
        return Decline(NAME, f"the value written to `self.{attr}` is not a conversion of `self.{attr}` itself "
                       f"(`self.{attr}.to(...)`, `.type(...)`, `.type_as(x)`, `.float()`..., or a chain of them): only "
                       "a conversion returns the stored tensor unchanged in the common case")
    if any(a.keyword is not None and a.keyword.value == "copy" or a.star for c in calls for a in c.args):
        return Decline(NAME, "the conversion has `copy=` or starred arguments: it may always build a new tensor")
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.SimpleStatementLine) or len(parent.body) != 1:
        return Decline(NAME, "the write shares its line with other statements")
    if parent.trailing_whitespace.comment is not None:
        return Decline(NAME, "a comment on the write's line would be dropped")
    function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if function is None or not function.params.params or function.params.params[0].name.value != "self":
        return Decline(NAME, "the write is not inside a method whose first parameter is `self`")
    inner = ancestors[ancestors.index(function) + 1:]
    if any(isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef)) for a in inner):
        return Decline(NAME, "the write is inside a nested function or class")
    if any(isinstance(a, (cst.For, cst.While)) for a in inner):
        return Decline(NAME, "the write sits inside a loop: Dynamo skips the whole frame there, and the rule "
                       "rewrites straight-line writes only")
    cls = next((a for a in reversed(ancestors[:ancestors.index(function)]) if isinstance(a, cst.ClassDef)), None)
    if cls is None:
        return Decline(NAME, "the method is not defined in a class body")
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    others = [s for s in m.findall(function.body, m.SimpleStatementLine()) if s is not parent
              for small in s.body if _writes_attr(small, attr)]
    if others:
        return Decline(NAME, f"`self.{attr}` is written again in the same method (`{code_of(others[0]).strip()}`): "
                       "the rule rewrites a single write")
    for klass in find_all(module, m.ClassDef()) if module is not None else [cls]:
        hooks = [f.name.value for f in klass.body.body
                 if isinstance(f, cst.FunctionDef) and f.name.value in ACCESS_HOOKS]
        if hooks:
            return Decline(NAME, f"the class `{klass.name.value}` in this file defines `{hooks[0]}`: reading or "
                           f"writing `self.{attr}` may run code the rewrite would skip")
        if _class_binds(klass, attr):
            return Decline(NAME, f"the class `{klass.name.value}` in this file binds `{attr}` in its body (a "
                           "class attribute, method or property; a subclass may override it): reads of "
                           f"`self.{attr}` may run code")
    code = module.code if module is not None else ""
    hook = next((h for h in GLOBAL_HOOKS if h in code), None)
    if hook is not None:
        return Decline(NAME, f"the file installs `{hook}`: a global hook runs on every buffer or parameter "
                       "store, the skipped one included")
    if module is not None and _registered_as_parameter(module, attr):
        return Decline(NAME, f"`self.{attr}` is a Parameter: a converted tensor cannot be stored there, and "
                       "parameters are the optimiser's state")
    if module is not None and _registered_as_submodule(module, attr):
        return Decline(NAME, f"`self.{attr}` is a submodule (`nn.Module.to` returns the module itself, converted in "
                       "place): the rule rewrites tensor attributes")
    if code.count(f'register_buffer("{attr}"') + code.count(f"register_buffer('{attr}'") > 1:
        return Decline(NAME, f"`{attr}` is registered as a buffer more than once: its persistence may change")
    return Plan(parent, attr, value, fresh_local(function, attr), function)


def match(loc: Located) -> Match | Decline:
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    return Match(NAME, f"self.{plan.attr} = self.{plan.attr}.{plan.value.func.attr.value}(...) -> a local, "
                 "stored back only when the conversion returned a new tensor")
