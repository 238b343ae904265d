"""scalar-tensor: which sites the rule takes (a statement using a local bound from a call to a
module-level function that returns ``torch.tensor(E)`` of a Python int), why it declines the
others, and :func:`match`, a scan's verdict on a located site.

The screen is static and conservative: every reference to the function in its module must be
a direct call whose result is bound to a local name, and every use of that local must be an
operand of ``+``/``-``/``*`` chains that end in a slice bound or index, a ``torch.clamp``
bound, an ``if``/``while`` comparison, or tensor arithmetic. What the screen cannot see (the
runtime kinds of the other operands, the ints' ranges) becomes an obligation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted, find_all, locals_readers, shared_wrapper, torch_aliases
from mend.rules.scalar_tensor.indexed import IndexedPlan, parents as _parents, screen_indexed

NAME = "scalar-tensor"
CATEGORY = "scalar-tensor"
BOUND = 2 ** 48  # the magnitude every size and int leaf is assumed to stay below (an obligation assumption)

_CHAIN_OPS = (cst.Add, cst.Subtract, cst.Multiply)
_OP_WHY = {
    cst.Divide: "true division: a 0-d int64 tensor divides to a float32 tensor, an int to a float64 Python float",
    cst.FloorDivide: "floor division (`//`) is outside what the rule encodes",
    cst.Modulo: "`%` is outside what the rule encodes",
    cst.Power: "`**` of a 0-d int64 tensor and of an int differ (an int to a negative power is a float)",
}


@dataclass
class Use:
    stmt_line: int                   # the line of the statement holding the use (where facts are observed)
    chain: cst.BaseExpression        # the maximal + - * chain holding the local
    role: str                        # index, clamp-bound, compare, tensor-arith
    clamp_input: cst.BaseExpression | None = None


@dataclass
class Plan:
    callee: cst.FunctionDef
    ret_line: cst.SimpleStatementLine    # `return torch.tensor(E)`
    ret_lineno: int
    tensor_call: cst.Call
    value: cst.BaseExpression            # E
    torch_name: str
    receivers: list[str]                 # parameters whose size is read
    ints: list[str]                      # parameters read as numbers
    sizes: list[str]                     # the size leaves, as code
    locals_: list[tuple[str, str]] = field(default_factory=list)   # (caller, local)
    uses: list[Use] = field(default_factory=list)
    local_form: bool = False             # `L = torch.tensor(E)` in the function itself (ret_line is that line)


def _module_functions(module: cst.Module) -> dict[str, list[cst.FunctionDef]]:
    out: dict[str, list] = {}
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            out.setdefault(stmt.name.value, []).append(stmt)
    return out


def _returns_tensor(fn: cst.FunctionDef, aliases: set[str]) -> cst.Call | None:
    """The ``torch.tensor(...)`` call a function's only statement returns, else None."""
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and \
            isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        body = body[1:]  # a docstring
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    ret = body[0].body[0]
    if not isinstance(ret, cst.Return) or not isinstance(ret.value, cst.Call):
        return None
    name = dotted(ret.value.func) or ""
    root, _, rest = name.partition(".")
    return ret.value if root in aliases and rest == "tensor" else None


def _in_all(module: cst.Module, name: str) -> str | None:
    """None when ``name`` is not exported by ``__all__``; else why (exported, or not decidable)."""
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                targets = [small.target]
            if not any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets):
                continue
            value = small.value
            if not isinstance(value, (cst.List, cst.Tuple)) or not all(
                    isinstance(e.value, cst.SimpleString) for e in value.elements):
                return "`__all__` is not a literal list of strings, so whether it exports the function is unknown"
            if any(e.value.evaluated_value == name for e in value.elements):
                return f"`{name}` is exported in `__all__`: callers outside the module may rely on its tensor result"
    return None


def _value_screen(node: cst.BaseExpression, params: set[str], receivers: set, ints: set, sizes: list,
                  attrs: bool = False) -> str | None:
    """Why ``node`` is not built only from sizes, ints, min/max and + - *; None when it is.
    ``attrs``: an attribute chain rooted at a parameter (``self.window``) is an int leaf too
    (observed a Python int where the value is made: scalar-leaves-observed)."""
    if isinstance(node, cst.Integer):
        return None
    if attrs and isinstance(node, cst.Attribute) and (dotted(node) or "").split(".")[0] in params:
        ints.add(dotted(node))
        return None
    if isinstance(node, cst.Name):
        if node.value in params:
            ints.add(node.value)
            return None
        return f"`{node.value}` is not a parameter of the function"
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _value_screen(node.expression, params, receivers, ints, sizes, attrs)
    if isinstance(node, cst.BinaryOperation):
        if not isinstance(node.operator, _CHAIN_OPS):
            return f"`{code_of(node).strip()}` uses an operator other than + - *"
        return _value_screen(node.left, params, receivers, ints, sizes, attrs) or \
            _value_screen(node.right, params, receivers, ints, sizes, attrs)
    if isinstance(node, cst.Call):
        fname = dotted(node.func)
        if fname in ("min", "max"):
            if len(node.args) < 2 or any(a.keyword is not None or a.star for a in node.args):
                return f"`{code_of(node).strip()}` is not `{fname}` of two or more positional values"
            for a in node.args:
                why = _value_screen(a.value, params, receivers, ints, sizes, attrs)
                if why:
                    return why
            return None
        # P.size(k) with an int literal k
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "size" and \
                isinstance(node.func.value, cst.Name) and node.func.value.value in params and len(node.args) == 1 \
                and node.args[0].keyword is None and _int_literal(node.args[0].value):
            receivers.add(node.func.value.value)
            sizes.append(code_of(node).strip())
            return None
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and \
            node.value.attr.value == "shape" and isinstance(node.value.value, cst.Name) and \
            node.value.value.value in params and len(node.slice) == 1 and \
            isinstance(node.slice[0].slice, cst.Index) and _int_literal(node.slice[0].slice.value):
        receivers.add(node.value.value.value)
        sizes.append(code_of(node).strip())
        return None
    return f"`{code_of(node).strip()}` is not a size (`.size(k)`, `.shape[k]`), an int parameter, min/max or + - *"


def _int_literal(node) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, cst.Integer)


def _leaf_why(node: cst.BaseExpression) -> str | None:
    """Why a chain operand is not a name, attribute chain or int literal; None when it is."""
    if isinstance(node, cst.Integer) or (isinstance(node, (cst.Name, cst.Attribute)) and dotted(node)):
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _leaf_why(node.expression)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _CHAIN_OPS):
        return _leaf_why(node.left) or _leaf_why(node.right)
    if isinstance(node, cst.Float):
        return f"the float `{code_of(node).strip()}`: a 0-d int64 tensor with a float is a float32 tensor, an int " \
               "with a float a float64 Python float"
    return f"`{code_of(node).strip()}` (only names, attributes and int literals are screened)"


def _use_of(name_node: cst.Name, parent: dict, local: str, stmt_line: int) -> Use | str:
    """The use the local ``name_node`` is part of, or why it is declined."""
    top = name_node
    while True:
        p = parent.get(top)
        if isinstance(p, cst.BinaryOperation) and isinstance(p.operator, _CHAIN_OPS):
            top = p
        elif isinstance(p, cst.BinaryOperation):
            why = _OP_WHY.get(type(p.operator), f"the operator in `{code_of(p).strip()}` is outside what the rule "
                                                 "encodes")
            return f"`{local}` is used in `{code_of(p).strip()}`, {why}"
        elif isinstance(p, cst.UnaryOperation) and isinstance(p.operator, cst.Minus):
            top = p
        else:
            break
    why = _leaf_why(top)
    if why:
        return f"`{local}` is used in `{code_of(top).strip()}` with {why}"
    p = parent.get(top)
    if isinstance(p, cst.Index) or (isinstance(p, cst.Slice) and top is not p.step):
        return Use(stmt_line, top, "index")
    if isinstance(p, cst.Arg) and isinstance(parent.get(p), cst.Call):
        call = parent[p]
        fname = (dotted(call.func) or "").split(".")
        args = list(call.args)
        pos = args.index(p)
        if fname[-1] == "clamp" and len(fname) == 2 and (p.keyword is None and pos in (1, 2) or
                                                         p.keyword is not None and p.keyword.value in ("min", "max")):
            x = args[0]
            if x.keyword is not None or x.star or _leaf_why(x.value):
                return (f"`{local}` is a bound of `{code_of(call).strip()}`, whose input `{code_of(x.value).strip()}` "
                        "(whose dtype decides the clamp's) is not a name or + - * chain the rule screens"
                        + (f": it has {_leaf_why(x.value)}" if not x.keyword and not x.star and _leaf_why(x.value)
                           else ""))
            return Use(stmt_line, top, "clamp-bound", x.value)
        if fname[-1] == "clamp" and len(fname) == 2 and pos == 0 and p.keyword is None and top is not name_node:
            return Use(stmt_line, top, "tensor-arith")
        if top is name_node:
            return f"`{local}` is passed to `{code_of(call.func).strip()}`, which would get a Python int instead of " \
                   "a tensor"
    if isinstance(p, cst.Comparison) or isinstance(p, cst.ComparisonTarget):
        cmp = p if isinstance(p, cst.Comparison) else parent.get(p)
        holder = parent.get(cmp)
        # only ordering and equality: `in`/`is` test identity or hashing, where a tensor
        # (hashed by id) and an int differ (`span in {1, 2}` is always False for a tensor)
        ordered = all(isinstance(t.operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                                              cst.GreaterThanEqual, cst.Equal, cst.NotEqual))
                      for t in cmp.comparisons)
        if not ordered:
            return f"the comparison `{code_of(cmp).strip()}` tests membership or identity, where a tensor (hashed " \
                   "by identity) and a Python int differ"
        if isinstance(holder, (cst.If, cst.While)) and holder.test is cmp:
            return Use(stmt_line, top, "compare")
        return f"the comparison `{code_of(cmp).strip()}` would be a Python bool instead of a tensor outside an " \
               "`if`/`while` test"
    if top is not name_node:
        # a chain with another operand: a tensor result either way when that operand is a tensor (observed)
        return Use(stmt_line, top, "tensor-arith")
    if isinstance(p, cst.Return):
        return f"`{local}` is returned: the caller would get a Python int instead of a tensor"
    if isinstance(p, cst.Attribute):
        return f"`{code_of(p).strip()}` reads an attribute of `{local}`, which a Python int does not have the same way"
    if isinstance(p, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
        return f"`{local}` is stored (`{code_of(p).strip()}`): it would be a Python int there instead of a tensor"
    return f"`{local}` is used in `{code_of(p).strip() if p is not None else local}`, which the rule does not screen"


def _stmt_lines(module_wrapper_positions, node) -> int:
    return module_wrapper_positions[node].start.line


def _caller_uses(fn: cst.FunctionDef, local: str, binding: cst.Assign, positions: dict) -> list[Use] | str:
    """The uses of ``local`` in the caller ``fn``, or why one is declined."""
    bindings = [n for n in m.findall(fn, m.AssignTarget(target=m.Name(local)) | m.AugAssign(target=m.Name(local))
                                     | m.AnnAssign(target=m.Name(local)) | m.Del(target=m.Name(local)))]
    if len(bindings) != 1 or m.findall(fn, m.NamedExpr(target=m.Name(local))) or \
            m.findall(fn, m.For(target=m.Name(local))) or m.findall(fn, m.Global() | m.Nonlocal()):
        return f"`{local}` is bound more than once in `{fn.name.value}` (or declared global/nonlocal)"
    for inner in m.findall(fn.body, m.FunctionDef() | m.Lambda() | m.ClassDef()):
        if m.findall(inner, m.Name(local)):
            return f"`{local}` is captured by a nested function or class"
    parent = _parents(fn)
    uses = []
    for name_node in m.findall(fn.body, m.Name(local)):
        p = parent.get(name_node)
        if isinstance(p, cst.AssignTarget) or (isinstance(p, cst.Attribute) and p.attr is name_node) or \
                isinstance(p, cst.Arg) and p.keyword is name_node:
            continue
        stmt = name_node
        while stmt is not None and not isinstance(stmt, cst.BaseSmallStatement) and \
                not isinstance(stmt, cst.BaseCompoundStatement):
            stmt = parent.get(stmt)
        if stmt is None:
            return f"a use of `{local}` sits outside a statement"
        if isinstance(stmt, (cst.If, cst.While)):
            stmt_line = positions[stmt].start.line
        else:
            line_node = parent.get(stmt)
            if isinstance(line_node, cst.SimpleStatementLine) and len(line_node.body) != 1:
                return f"a use of `{local}` shares its line with another statement (facts are observed per line)"
            if m.findall(stmt, m.NamedExpr()):
                return f"a use of `{local}` is in a statement with `:=`"
            stmt_line = positions[stmt].start.line
        use = _use_of(name_node, parent, local, stmt_line)
        if isinstance(use, str):
            return use
        uses.append(use)
    if not uses:
        return f"`{local}` is never used"
    return uses


def screen(module: cst.Module, node: cst.CSTNode, ancestors: list[cst.CSTNode],
           positions: dict) -> Plan | IndexedPlan | Decline:
    """The rewrite plan for the statement ``node`` at a break site (a use of the value, or the
    function's ``return torch.tensor(E)``), or why it is declined."""
    aliases = torch_aliases(module)
    functions = _module_functions(module)
    caller = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    target = None
    if caller is not None and caller.name.value in functions and caller in functions[caller.name.value]:
        if _returns_tensor(caller, aliases) is not None and isinstance(node, cst.Return):
            target = caller.name.value  # the site is the definition itself
    if target is None and caller is not None:
        # names read at the site that the caller binds from a call to a module-level function
        read = {n.value for n in m.findall(node, m.Name())}
        for stmt in m.findall(caller.body, m.Assign(targets=[m.AssignTarget(target=m.Name())], value=m.Call(
                func=m.Name()))):
            local, fname = stmt.targets[0].target.value, stmt.value.func.value
            if local in read and fname in functions and any(_returns_tensor(f, aliases) for f in functions[fname]):
                target = fname
                break
    if target is None:
        # the function called inline at the site (`x[: f(...)]`): screened, and declined below
        for c in m.findall(node, m.Call(func=m.Name())):
            if c.func.value in functions and any(_returns_tensor(f, aliases) for f in functions[c.func.value]):
                target = c.func.value
                break
    if target is None and caller is not None:
        indexed = screen_indexed(module, node, caller, aliases, positions)
        if indexed is not None:
            return indexed
        local = _local_form(module, node, caller, aliases, positions)
        if local is not None:
            return local
    if target is None:
        return _no_target(module, node, caller, aliases)
    if len(functions[target]) != 1:
        return Decline(NAME, f"`{target}` is defined more than once in the module")
    callee = functions[target][0]
    if callee.decorators:
        return Decline(NAME, f"`{target}` is decorated: the decorator may rely on its tensor result")
    if callee.asynchronous:
        return Decline(NAME, f"`{target}` is a coroutine")
    why = _in_all(module, target)
    if why:
        return Decline(NAME, why)
    call = _returns_tensor(callee, aliases)
    ret_line = next(s for s in callee.body.body if isinstance(s, cst.SimpleStatementLine)
                    and isinstance(s.body[0], cst.Return))
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        kw = next((a.keyword.value for a in call.args if a.keyword is not None), None)
        return Decline(NAME, f"`{code_of(call).strip()}` passes " + (
            f"`{kw}=`: a keyword argument (dtype, device, requires_grad) changes what the tensor is, which a "
            "Python number would not reproduce" if kw else "other than one positional value"))
    if ret_line.trailing_whitespace.comment is not None:
        return Decline(NAME, "a comment on the return line would be dropped")
    value = call.args[0].value
    params = {p.name.value for p in callee.params.params + callee.params.posonly_params + callee.params.kwonly_params}
    receivers, ints, sizes = set(), set(), []
    why = _value_screen(value, params, receivers, ints, sizes)
    if why:
        return Decline(NAME, f"the wrapped value is not a Python int by construction: {why}")
    if "\n" in code_of(value):
        return Decline(NAME, "the wrapped value spans several lines")
    # every reference to the function in the module: a direct call bound to a local name
    plan = Plan(callee, ret_line, positions[ret_line].start.line, call, value, dotted(call.func).split(".")[0],
                sorted(receivers), sorted(ints), sizes)
    all_refs = [n for n in find_all(module, m.Name(target)) if n is not callee.name]
    direct = []
    for fn in [s for s in find_all(module, m.FunctionDef()) if s is not callee]:
        for stmt in m.findall(fn.body, m.Assign(targets=[m.AssignTarget(target=m.Name())],
                                                value=m.Call(func=m.Name(target)))):
            direct.append((fn, stmt))
    if len(all_refs) != len(direct) or not direct:
        return Decline(NAME, f"`{target}` is referenced other than by direct calls whose result is bound to a local "
                       "name (returned, passed on, stored or called inline): a caller could see the changed type")
    seen_fn = {}
    for fn, stmt in direct:
        if id(fn) in seen_fn:
            return Decline(NAME, f"`{target}` is called more than once in `{fn.name.value}`")
        seen_fn[id(fn)] = fn
        nested = [f for f in m.findall(fn.body, m.FunctionDef()) if m.findall(f, m.Name(target))]
        if nested:
            continue  # the nested function is screened on its own
        local = stmt.targets[0].target.value
        uses = _caller_uses(fn, local, stmt, positions)
        if isinstance(uses, str):
            return Decline(NAME, uses)
        plan.locals_.append((fn.name.value, local))
        plan.uses.extend(uses)
    return plan


def _local_form(module, node, caller: cst.FunctionDef, aliases: set[str], positions: dict) -> Plan | Decline | None:
    """``L = torch.tensor(E)`` in the site's function, ``L`` read at the site (transformers'
    inline form of deberta's helper, helper-53's k2a: ``w = torch.tensor(self.window)`` then
    ``x[:, -w:]``): the binding becomes ``L = E``. Nothing outside the function sees ``L``, so
    no caller is screened; its uses are, as for a helper's result. None when the site reads no
    such local."""
    read = {n.value for n in m.findall(node, m.Name())}
    made = [a for a in m.findall(caller, m.Assign(targets=[m.AssignTarget(target=m.Name())], value=m.Call()))
            if a.targets[0].target.value in read and (dotted(a.value.func) or "").partition(".")[0] in aliases
            and (dotted(a.value.func) or "").partition(".")[2] == "tensor"]
    if not made:
        return None
    stmt = made[0]
    local, call = stmt.targets[0].target.value, stmt.value
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        kw = next((a.keyword.value for a in call.args if a.keyword is not None), None)
        return Decline(NAME, f"`{code_of(call).strip()}` passes " + (
            f"`{kw}=`: a keyword argument (dtype, device, requires_grad) changes what the tensor is, which a "
            "Python number would not reproduce" if kw else "other than one positional value"))
    line = next((ln for ln in m.findall(caller, m.SimpleStatementLine()) if ln.body and ln.body[0] is stmt), None)
    if line is None or len(line.body) != 1:
        return Decline(NAME, f"`{local} = {code_of(call).strip()}` shares its line with another statement")
    if line.trailing_whitespace.comment is not None:
        return Decline(NAME, f"a comment on the line binding `{local}` would be dropped")
    if any(isinstance(a, (cst.For, cst.While)) for a in _ancestors_in(caller, line)):
        return Decline(NAME, f"`{local} = {code_of(call).strip()}` sits in a loop")
    if locals_readers(caller):
        return Decline(NAME, f"the function reads its locals by name (`locals()`, `vars()`, `eval`, `exec`): `{local}` "
                       "would be seen as an int there")
    value = call.args[0].value
    params = {p.name.value for p in caller.params.params + caller.params.posonly_params + caller.params.kwonly_params}
    receivers, ints, sizes = set(), set(), []
    why = _value_screen(value, params, receivers, ints, sizes, attrs=True)
    if why:
        return Decline(NAME, f"the wrapped value is not a Python int by construction: {why}")
    if "\n" in code_of(value):
        return Decline(NAME, "the wrapped value spans several lines")
    uses = _caller_uses(caller, local, stmt, positions)
    if isinstance(uses, str):
        return Decline(NAME, uses)
    return Plan(caller, line, positions[line].start.line, call, value, dotted(call.func).split(".")[0],
                sorted(receivers), sorted(ints), sizes, [(caller.name.value, local)], uses, local_form=True)


def _ancestors_in(root: cst.CSTNode, target: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes between ``root`` and ``target`` (both excluded); [] when not found."""
    def walk(node, path):
        if node is target:
            return path
        for child in node.children:
            found = walk(child, path + [node])
            if found is not None:
                return found
        return None
    return (walk(root, []) or [None])[1:]


def _no_target(module, node, caller, aliases) -> Decline:
    """The decline for a site that reads no value the rule can rewrite, naming the traps it recognises."""
    text = code_of(node)
    made = [a for a in m.findall(caller, m.Assign(targets=[m.AssignTarget(target=m.Name())]))
            if re.search(r"\btensor\(\s*\[", code_of(a.value)) and re.search(
                rf"\b{re.escape(a.targets[0].target.value)}\b", text)] if caller is not None else []
    if made or re.search(r"\btensor\(\s*\[", text):
        return Decline(NAME, "a 1-element `torch.tensor([n])` read back as a number: `torch.tensor` follows the "
                       "default device, and under `torch.device('meta')` its value is no number (the original "
                       "raises where an int would not); only the legacy CPU constructors `torch.IntTensor([n])` "
                       "and `torch.LongTensor([n])` are taken (the indexed form)")
    if re.search(r"\b(IntTensor|LongTensor)\(\s*\[", text) or (caller is not None and any(
            re.search(rf"\b{re.escape(n.value)}\b", text) for n in _int_tensor_locals(caller))):
        return Decline(NAME, "a 1-element `torch.IntTensor([n])` indexed to a 0-d int32 tensor, not in the form "
                       "the rule takes: a local bound once, at the top of the function, to `torch.IntTensor([n])` "
                       "(or `LongTensor`) and read only as `L[0]` (the element type of `n` is "
                       "decided at run time there: a float truncates, an int beyond int32 raises)")
    klass = None
    for cls in find_all(module, m.ClassDef()):
        if caller is not None and caller in cls.body.body:
            klass = cls
    if klass is not None:
        buffers = _tensor_buffers(klass, aliases)
        used = [b for b in buffers if m.findall(node, m.Attribute(value=m.Name("self"), attr=m.Name(b)))]
        if used or (buffers and caller is not None and any(
                m.findall(caller, m.Attribute(value=m.Name("self"), attr=m.Name(b))) for b in buffers)):
            names = ", ".join(f"`self.{b}`" for b in (used or buffers))
            divides = any(m.findall(klass, m.BinaryOperation(operator=m.Divide(), right=m.Attribute(
                value=m.Name("self"), attr=m.Name(b)))) for b in buffers)
            extra = (" The class divides by a buffer with `/`: 0-d int64 / 0-d int64 is float32 tensor "
                     "arithmetic, whose ceil differs from exact ints above 2^24 (encodec: length 16,777,217 pads -1, "
                     "the int rewrite 1), so Python ints would change the result.") if divides else ""
            return Decline(NAME, f"{names}: 0-d tensor buffers registered in `__init__`; replacing them by Python "
                           "ints changes the module's buffers and what a user who writes them sees." + extra)
    return Decline(NAME, "no name at the site is bound from a call to a module-level function that returns "
                   "`torch.tensor(...)`")


def _int_tensor_locals(fn: cst.FunctionDef) -> list[cst.Name]:
    out = []
    for stmt in m.findall(fn, m.Assign(targets=[m.AssignTarget(target=m.Name())], value=m.Call())):
        name = dotted(stmt.value.func) or ""
        if name.split(".")[-1] in ("IntTensor", "LongTensor"):
            out.append(stmt.targets[0].target)
    return out


def _tensor_buffers(klass: cst.ClassDef, aliases: set[str]) -> list[str]:
    """Attributes ``__init__`` registers as buffers (``nn.Buffer(...)``, ``register_buffer``)
    from a 0-d tensor: ``torch.tensor(<not a list or tuple>)``, directly or through a local
    (a ring buffer made by ``torch.zeros(...)`` is not one: generalisation probe)."""
    out = []
    for fn in klass.body.body:
        if not (isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__"):
            continue
        made = {stmt.targets[0].target.value: stmt.value for stmt in m.findall(
            fn, m.Assign(targets=[m.AssignTarget(target=m.Name())]))}

        def scalar(value: cst.BaseExpression | None, made: dict = made) -> bool:
            if isinstance(value, cst.Name):
                value = made.get(value.value)
            return isinstance(value, cst.Call) and (dotted(value.func) or "").split(".")[-1] == "tensor" and \
                bool(value.args) and not isinstance(value.args[0].value, (cst.List, cst.Tuple))

        for stmt in m.findall(fn, m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))],
                                           value=m.Call())):
            if (dotted(stmt.value.func) or "").split(".")[-1] == "Buffer" and stmt.value.args and \
                    scalar(stmt.value.args[0].value):
                out.append(stmt.targets[0].target.attr.value)
        for call in m.findall(fn, m.Call(func=m.Attribute(attr=m.Name("register_buffer")))):
            if len(call.args) > 1 and isinstance(call.args[0].value, cst.SimpleString) and \
                    scalar(call.args[1].value):
                out.append(call.args[0].value.evaluated_value)
    return out


def package_importers(file: str | Path, name: str) -> list[str]:
    """Other ``.py`` files next to ``file`` (its package) that mention ``name`` as an
    identifier (static screen: an import or any other reference)."""
    path = Path(file)
    out = []
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    for other in sorted(path.parent.glob("*.py")):
        if other.resolve() == path.resolve():
            continue
        try:
            text = other.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            out.append(other.name)
            continue
        if pattern.search(text):
            out.append(other.name)
    return out


def match(loc: Located) -> Match | Decline:
    from libcst.metadata import PositionProvider

    wrapper = shared_wrapper(loc.module)
    positions = wrapper.resolve(PositionProvider)
    plan = screen(loc.module, loc.node, loc.ancestors, positions)
    if isinstance(plan, Decline):
        return plan
    if isinstance(plan, IndexedPlan):
        return Match(NAME, f"`{plan.local}[0]` of `{code_of(plan.line.body[0].value).strip()}` -> the Python int "
                     f"`{code_of(plan.value).strip()}` where a run-time test shows it is one (every read a slice bound)")
    others = [] if plan.local_form else package_importers(loc.file, plan.callee.name.value)
    if others:
        return Decline(NAME, f"`{plan.callee.name.value}` is referenced by other files of the package "
                       f"({', '.join(others[:3])}): they may rely on its tensor result")
    return Match(NAME, f"`{code_of(plan.tensor_call).strip()}` -> the Python int "
                 f"`{code_of(plan.value).strip()}` (every use screened int-compatible)")
