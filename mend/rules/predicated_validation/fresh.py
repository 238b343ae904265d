"""A check that may move into the graph only while the object it guards is made in this call.

xlm and flaubert (transformers 5.x) write:

    if cache is None:
        cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
    ...
    assert lengths.max().item() <= slen
    ...
    attn_outputs = self.attentions[i](tensor, attn_mask, cache=cache, ...)

Their attention layers write the cache they are given. A check moved into the graph is
unsound for a cache the caller passed in (Dynamo replays the graph's Python writes after it
returns, so a failing check also drops writes made before it, and a cache updated in place
is written before the failed assert surfaces: tests/test_argument_writes.py). A cache made
in this call is different: nothing outside the call can reach it before the check, and a
failing check discards it with the frame. So the rewrite keeps the original check when the
caller passed an object and predicates it only when it was made here:

    _mend_fresh_cache = cache is None and not self.training
    if cache is None:
        cache = ...
    ...
    if not _mend_fresh_cache:
        assert lengths.max().item() <= slen
    elif __debug__:
        torch._assert_async(...)

``_mend_fresh_cache`` is a Python bool, so Dynamo specialises on it (a guard): with
``cache=None`` in eval mode the graph has no break; with a cache passed in, or in training
(where dropout after the check draws random numbers, and inductor draws its seed when the
graph starts, before a failed assert surfaces), the original check stays.
Which submodule parameters receive the new object is recorded (:func:`fresh_keywords`) for
the verifier, which accepts a submodule's writes only into those parameters
(``verifier/encoders/assert_async.py``)."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.rules._common import code_of as _code, find_all


@dataclass
class FreshGuard:
    name: str                      # the parameter rebound to a new object when it is None
    guard: cst.CSTNode             # the `if <name> is None: <name> = <Call>` statement
    made: str                      # the call that makes it (source)
    keywords: dict[str, list[str]]  # self.<attr> -> keywords that receive the new object at every call
    flag: str                      # the local that remembers whether the object was made here


def _params(function: cst.FunctionDef) -> set[str]:
    p = function.params
    names = {a.name.value for a in [*p.posonly_params, *p.params, *p.kwonly_params]}
    for star in (p.star_arg, p.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def _made_when_none(stmt: cst.CSTNode, params: set[str]) -> tuple[str, cst.Call] | None:
    """(name, call) for ``if <param> is None: <param> = <call>`` with nothing else in it."""
    if not m.matches(stmt, m.If(test=m.Comparison(left=m.Name(), comparisons=[m.ComparisonTarget(
            operator=m.Is(), comparator=m.Name("None"))]), orelse=None)):
        return None
    name = stmt.test.left.value
    body = stmt.body.body
    if name not in params or len(body) != 1 or not m.matches(body[0], m.SimpleStatementLine(body=[m.Assign(
            targets=[m.AssignTarget(target=m.Name(name))], value=m.Call())])):
        return None
    call = body[0].body[0].value
    # a class called by name makes a new instance; a function or method may return an object
    # someone else holds (`self.get_cache()`; `self.Cache(...)` may be a method: refused)
    func = call.func
    if isinstance(func, cst.Attribute) and not _rooted_at(func, "self"):
        callee = func.attr.value
    else:
        callee = func.value if isinstance(func, cst.Name) else ""
    if not callee[:1].isupper():
        return None
    return name, call


def _finalized(module: cst.Module, call: cst.Call) -> bool:
    """The class called is defined in the file with a ``__del__`` (or uses ``weakref``): with
    the check in the graph, a new object that dies there is never materialized, so its finalizer
    never runs, where eager and the original compiled code ran it (an adversarial review). A
    class defined in another file is not screened here."""
    callee = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", "")
    for cls in find_all(module, m.ClassDef(name=m.Name(callee))):
        if m.findall(cls, m.FunctionDef(name=m.Name("__del__"))) or "weakref" in cst.Module([]).code_for_node(cls):
            return True
    return False


def _rooted_at(node: cst.BaseExpression, name: str) -> bool:
    """``name``, or an attribute/subscript chain starting from it (``cache[i]``)."""
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return isinstance(node, cst.Name) and node.value == name


def _self_attr(func: cst.BaseExpression) -> str | None:
    """``A`` for a call of ``self.A(...)`` or ``self.A[...](...)``."""
    if isinstance(func, cst.Subscript):
        func = func.value
    if m.matches(func, m.Attribute(value=m.Name("self"), attr=m.Name())):
        return func.attr.value
    return None


def _escaping(module: cst.Module, cls: cst.ClassDef | None, function: cst.FunctionDef,
              before: list[cst.CSTNode]) -> set[str]:
    """Submodule attributes ``A`` whose objects may be reached other than through the calls
    ``self.A(...)`` / ``self.A[i](...)`` in ``function`` after the check (an adversarial
    review's counterexamples: a writer called before the check with another object, by
    ``.forward``, through a local alias, from another method, or from a parent module). In
    ``function`` and the class's other methods (``__init__`` excepted): every ``self.A`` that is
    not such a callee nor ``len(self.A)``; every call of it in another method or before the
    check. In the whole file: a call through ``X.A`` or ``X.A[i]`` where ``X`` is not ``self``."""
    out: set[str] = set()
    methods = [f for f in m.findall(cls, m.FunctionDef())] if cls is not None else [function]
    early = {id(c) for b in before for c in m.findall(b, m.Call())}
    for f in methods:
        if f.name.value == "__init__":
            continue
        callees = {id(c.func) for c in m.findall(f, m.Call())} | {
            id(c.func.value) for c in m.findall(f, m.Call(func=m.Subscript()))}
        lens = {id(c.args[0].value) for c in m.findall(f, m.Call(func=m.Name("len"), args=[m.Arg()]))}
        for node in m.findall(f, m.Attribute(value=m.Name("self"), attr=m.Name())):
            if id(node) not in callees | lens:
                out.add(node.attr.value)
        for c in m.findall(f, m.Call()):
            attr = _self_attr(c.func)
            if attr is not None and (f is not function or id(c) in early):
                out.add(attr)
    for c in find_all(module, m.Call()):
        func = c.func.value if isinstance(c.func, cst.Subscript) else c.func
        if isinstance(func, cst.Attribute) and not m.matches(func.value, m.Name("self")):
            out.add(func.attr.value)
    return out


def fresh_keywords(function: cst.FunctionDef, name: str, escaping: set[str] = frozenset()) -> dict[str, list[str]]:
    """For each submodule ``self.A`` called in ``function`` and not in ``escaping``: the
    keywords that receive an object rooted at ``name`` at every call of ``self.A``. A call
    with ``*args``/``**kwargs`` leaves none."""
    seen: dict[str, set[str]] = {}
    for call in m.findall(function, m.Call()):
        attr = _self_attr(call.func)
        if attr is None:
            continue
        if any(a.star for a in call.args):
            kws: set[str] = set()
        else:
            kws = {a.keyword.value for a in call.args if a.keyword is not None and _rooted_at(a.value, name)}
        seen[attr] = seen[attr] & kws if attr in seen else kws
    return {attr: sorted(kws) for attr, kws in sorted(seen.items()) if kws and attr not in escaping}


def fresh_guard(module: cst.Module, function: cst.FunctionDef, stmt: cst.CSTNode,
                cls: cst.ClassDef | None) -> FreshGuard | None:
    """The guard for the check ``stmt`` (a statement of ``function``'s own body), when a
    parameter made anew if None (``if cache is None: cache = Cache(...)``) comes before it,
    is read neither between that and the check nor by the check, and is passed to a submodule
    by keyword. None otherwise."""
    body = list(function.body.body)
    first = function.params.params[0].name.value if function.params.params else None
    if stmt not in body or first != "self":
        return None
    params = _params(function)
    at = body.index(stmt)
    for i in range(at - 1, -1, -1):
        made = _made_when_none(body[i], params)
        if made is None:
            continue
        name, call = made
        if _finalized(module, call):
            return None   # the single graph never materializes the object, so `__del__` never runs
        between = body[i + 1:at + 1]   # the check's own condition included
        if any(m.findall(s, m.Name(name)) for s in between):
            return None   # read or rebound before the check: something may hold or write it already
        keywords = fresh_keywords(function, name, _escaping(module, cls, function, body[:at + 1]))
        taken = {n.value for n in m.findall(function, m.Name())}
        flag = next(f for f in (f"_mend_fresh_{name}", *(f"_mend_fresh_{name}_{j}" for j in range(1, 100)))
                    if f not in taken)
        return FreshGuard(name, body[i], _code(call), keywords, flag) if keywords else None
    return None


def guarded_body(function: cst.FunctionDef, stmt: cst.CSTNode, new: cst.CSTNode, guard: FreshGuard,
                 reason: str) -> cst.FunctionDef:
    """``function`` with the flag set before the guard and ``stmt`` kept where the object was
    passed in, ``new`` (the check in the graph, an ``if __debug__:`` or a statement) where it
    was made here."""
    body = list(function.body.body)
    flag = cst.parse_statement(f"{guard.flag} = {guard.name} is None and not self.training  "
                               f"# mend: predicated-validation ({reason})\n")
    kept = cst.IndentedBlock([stmt.with_changes(leading_lines=[])])
    if isinstance(new, cst.If):   # `if __debug__: torch._assert_async(...)` becomes its elif
        orelse: cst.If | cst.Else = new.with_changes(leading_lines=[])
    else:
        orelse = cst.Else(cst.IndentedBlock([new.with_changes(leading_lines=[])]))
    check = cst.If(test=cst.parse_expression(f"not {guard.flag}"), body=kept, orelse=orelse,
                   leading_lines=stmt.leading_lines)
    at, g = body.index(stmt), body.index(guard.guard)
    body[at] = check
    body.insert(g, flag.with_changes(leading_lines=guard.guard.leading_lines))
    body[g + 1] = guard.guard.with_changes(leading_lines=[])
    return function.with_changes(body=function.body.with_changes(body=body))
