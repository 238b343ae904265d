"""scalar-tensor's indexed form: a 1-element tensor made from a Python value and read back
only as ``L[0]``, a slice bound (transformers 5.24 vits, ``modeling_vits.py:348, :362``)::

    num_channels_tensor = torch.IntTensor([self.hidden_size])
    ...
    acts = fused_add_tanh_sigmoid_multiply(hidden_states, global_states, num_channels_tensor[0])

where the module-level helper slices with its parameter (``in_act[:, :num_channels, :]``,
:86): a slice bound is read with ``Tensor.__index__``, which Dynamo treats as ``.item()``:
a graph break inside the layer loop, so Dynamo skips the whole frame. The element type of
``self.hidden_size`` is not known statically (a float truncates, an int beyond int32 raises),
so the rewrite decides it at run time -- Dynamo folds the test on a constant attribute, so it
adds no break -- and keeps the original read where the test fails::

    _mend_n = self.hidden_size
    num_channels_tensor = torch.IntTensor([_mend_n])  # mend: scalar-tensor
    ...
    acts = fused_add_tanh_sigmoid_multiply(hidden_states, global_states,
        (_mend_n if type(_mend_n) is int and -2 ** 31 <= _mend_n < 2 ** 31 else num_channels_tensor[0]))

Where the test holds, ``L[0]`` is the 0-d tensor holding exactly ``_mend_n`` (the dtype's
range: ``scalar-index-exact``, Z3), and a slice bound reads a 0-d integer tensor and that
int alike (both through ``__index__``) -- on a container that is a plain tensor (observed;
a list, a numpy array and a tensor all slice through ``__index__``, but a user class's
``__getitem__`` may look at the bound's type). So every use must be a slice's lower or upper
bound: in the function itself, or through an argument of a module-level function whose
parameter is used only that way (``scalar-index-slice-only``, a static screen).
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst
import libcst.matchers as m

from mend.rules._base import Decline
from mend.rules._common import code_of, dotted, find_all, fresh_local, locals_readers, Replace, torch_aliases
from verifier.scopes import stores as _stores

NAME = "scalar-tensor"
# the constructors taken, and the range of the integer dtype each gives a Python int. The
# legacy constructors always make a CPU tensor; `torch.tensor([n])` follows the default device,
# and under `torch.device("meta")` its `[0]` cannot be read as a number (the original raises
# where the int would not), so it is not taken
RANGES = {"IntTensor": ("-2 ** 31", "2 ** 31"), "LongTensor": ("-2 ** 63", "2 ** 63")}
_BUILTINS = ("type", "int")


@dataclass
class IndexedPlan:
    caller: cst.FunctionDef
    line: cst.SimpleStatementLine          # `L = torch.IntTensor([E])`
    lineno: int
    local: str
    ctor: str                              # IntTensor, LongTensor or tensor
    value: cst.BaseExpression              # E
    reads: list[cst.Subscript] = field(default_factory=list)            # every `L[0]`
    slices: list[tuple[str, str, int]] = field(default_factory=list)    # (function, container, line) per slice
    callees: list[str] = field(default_factory=list)
    inline: bool = False                   # `N = torch.IntTensor([E])[0]`: the read is the binding's value


def _ctor_of(value: cst.BaseExpression, aliases: set[str]) -> str | None:
    """``IntTensor``/``LongTensor``/``tensor`` when ``value`` is ``<torch>.<ctor>([E])``."""
    if not isinstance(value, cst.Call):
        return None
    root, _, rest = (dotted(value.func) or "").partition(".")
    listed = bool(value.args) and isinstance(value.args[0].value, (cst.List, cst.Tuple))
    return rest if root in aliases and rest in RANGES and listed else None


def _one_element(call: cst.Call) -> cst.BaseExpression | None:
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None
    arg = call.args[0].value
    if not isinstance(arg, (cst.List, cst.Tuple)) or len(arg.elements) != 1 or \
            not isinstance(arg.elements[0], cst.Element):
        return None
    return arg.elements[0].value


def _index0(node: cst.CSTNode) -> bool:
    """``X[0]``."""
    return isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
        and isinstance(node.slice[0].slice.value, cst.Integer) and node.slice[0].slice.value.value == "0"


def _is_read0(node: cst.CSTNode, local: str) -> bool:
    """``L[0]``."""
    return _index0(node) and isinstance(node.value, cst.Name) and node.value.value == local


def parents(root: cst.CSTNode) -> dict:
    """Each node under ``root`` -> its parent (the screens walk up from a name)."""
    out: dict = {}

    class _V(cst.CSTVisitor):
        def on_visit(self, node):
            for child in node.children:
                out[child] = node
            return True

    root.visit(_V())
    return out


def _slice_container(node: cst.CSTNode, parent: dict) -> cst.BaseExpression | None:
    """The container ``X`` when ``node`` is the lower or upper bound of a slice ``X[..., a:b]``."""
    p = parent.get(node)
    if not isinstance(p, cst.Slice) or node is p.step:
        return None
    sub = parent.get(parent.get(p))
    return sub.value if isinstance(sub, cst.Subscript) else None


def _fn_ast(fn: cst.FunctionDef) -> ast.FunctionDef:
    return ast.parse(textwrap.dedent(code_of(fn.with_changes(decorators=[], leading_lines=[])))).body[0]


def _binds(fn: cst.FunctionDef, name: str) -> int:
    """How many times ``fn`` binds ``name``, its parameters and nested scopes included."""
    tree = _fn_ast(fn)
    return _stores(tree, name, skip=tree)


def _captured(fn: cst.FunctionDef, name: str) -> bool:
    return any(m.findall(inner, m.Name(name)) for inner in m.findall(fn.body, m.FunctionDef() | m.Lambda()
                                                                     | m.ClassDef()))


@lru_cache(maxsize=4)
def _module_tree(code: str) -> ast.Module:
    """The module's AST, parsed once per text (the screens ask it several questions per site)."""
    return ast.parse(code)


def _module_binds(module: cst.Module, name: str, own: cst.FunctionDef | None = None) -> int:
    """How many bindings of ``name`` the module holds besides ``own`` (a module-level def):
    any assignment, import, def or class anywhere (conservative: a local of another function
    counts too)."""
    tree = _module_tree(module.code)
    skip = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and own is not None
                 and s.name == own.name.value), None)
    return _stores(tree, name, skip=skip)


def _stmt_line(node: cst.CSTNode, parent: dict, positions: dict) -> int:
    """The line where the statement holding ``node`` starts (where a line event observes it)."""
    while node is not None and not isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
        node = parent.get(node)
    return positions[node].start.line


# names through which code reads a frame's locals or rebinds a module's globals at run time
_DYNAMIC = {"globals", "_getframe", "currentframe", "f_locals", "f_back", "f_globals", "sys.modules"}


def _module_hazard(module: cst.Module, caller: cst.FunctionDef, root: str) -> str | None:
    """Why names the rewrite relies on may not mean what they say (helper-57), or None: the
    module reads frames or rebinds globals dynamically (``globals()["fused"] = ...``, a helper
    reading ``sys._getframe(1).f_locals``); the caller is decorated or binds a name with
    ``:=``; the constructor's root (``torch``) is bound other than by a top-level import, or
    has an attribute assigned (``torch.IntTensor = ...``)."""
    tree = _module_tree(module.code)
    for n in ast.walk(tree):
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else None
        if isinstance(n, ast.Attribute) and ast.unparse(n) == "sys.modules":
            name = "sys.modules"
        if name in _DYNAMIC:
            return (f"the module names `{name}` (line {n.lineno}): code may read a frame's locals or rebind a "
                    "function or builtin at run time, which the screens do not follow")
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)) and \
                isinstance(n.value, ast.Name) and n.value.id == root:
            return f"the module assigns `{root}.{n.attr}` (line {n.lineno}): the constructor may not be torch's"
    if caller.decorators:
        return f"`{caller.name.value}` is decorated: what runs is not the function as written"
    if m.findall(caller, m.NamedExpr()):
        return f"`{caller.name.value}` binds a name with `:=`: a sliced name may change within its statement"
    imports = sum(1 for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom)) for a in s.names
                  if (a.asname or a.name.split(".")[0]) == root)
    if _binds(caller, root) or _stores(tree, root) != imports:
        return f"`{root}` is bound other than by a top-level import: the constructor may not be torch's"
    return None


def _param_slice_only(callee: cst.FunctionDef, param: str, positions: dict) -> list[tuple[str, int]] | str:
    """The containers ``param`` bounds a slice of in ``callee`` (with their lines), or why
    another use is declined."""
    why = f"`{callee.name.value}`'s parameter `{param}`"
    if _binds(callee, param) != 1:
        return f"{why} is bound again in the function"
    if _captured(callee, param):
        return f"{why} is captured by a nested function, lambda or class"
    if locals_readers(callee):
        return f"`{callee.name.value}` reads its locals by name (`locals()`, `vars()`, `eval`, `exec`)"
    parent = parents(callee.body)
    containers = []
    for node in m.findall(callee.body, m.Name(param)):
        p = parent.get(node)
        if isinstance(p, cst.Attribute) and p.attr is node or isinstance(p, cst.Arg) and p.keyword is node:
            continue
        container = _slice_container(node, parent)
        if container is None:
            holder = parent.get(p) if isinstance(p, (cst.Arg, cst.Element)) else p
            if isinstance(holder, (cst.Tuple, cst.List)) and isinstance(parent.get(holder), cst.Arg):
                holder = parent.get(parent.get(holder))
            text = code_of(holder).strip() if holder is not None else param
            return (f"{why} is used in `{text if len(text) < 100 else text[:97] + '...'}`, not only as a slice's "
                    "bound: an int and a 0-d tensor differ there")
        if not isinstance(container, cst.Name):
            return f"{why} bounds a slice of `{code_of(container).strip()}`, not of a name whose type is observed"
        containers.append((container.value, _stmt_line(node, parent, positions)))
    if not containers:
        return f"{why} is never used"
    return containers


def _arg_param(call: cst.Call, arg: cst.Arg, callee: cst.FunctionDef) -> str | None:
    """The parameter of ``callee`` that ``arg`` of ``call`` binds, or None when not static."""
    if arg.keyword is not None:
        names = {p.name.value for p in callee.params.params + callee.params.kwonly_params}
        return arg.keyword.value if arg.keyword.value in names else None
    args = list(call.args)
    pos = args.index(arg)
    if any(a.star or a.keyword is not None for a in args[:pos]):
        return None
    positional = list(callee.params.posonly_params) + list(callee.params.params)
    return positional[pos].name.value if pos < len(positional) else None


def _origin(caller: cst.FunctionDef, name: str, aliases: set[str]) -> cst.Assign | None:
    """The statement that makes ``name`` in ``caller``: ``name = <ctor>([E])`` (the tensor),
    ``name = <ctor>([E])[0]`` (made inline) or, for ``name = L[0]`` (an alias), ``L``'s."""
    for a in m.findall(caller.body, m.Assign(targets=[m.AssignTarget(target=m.Name(name))])):
        if _ctor_of(a.value, aliases) or _inline_ctor(a.value, aliases):
            return a
        if isinstance(a.value, cst.Subscript) and isinstance(a.value.value, cst.Name) and \
                _is_read0(a.value, a.value.value.value) and a.value.value.value != name:
            made = _origin(caller, a.value.value.value, aliases)
            if made is not None and _ctor_of(made.value, aliases):
                return made
    return None


def _inline_ctor(value: cst.BaseExpression, aliases: set[str]) -> str | None:
    """The constructor when ``value`` is ``<torch>.<ctor>([E])[0]``."""
    return _ctor_of(value.value, aliases) if _index0(value) else None


def _find(module: cst.Module, read: set[str], fn: cst.FunctionDef, aliases: set[str]):
    """(caller, binding statement) of a value made by a constructor that the site in ``fn``
    reads (``read``: the names it reads), directly or through a module-level function's
    parameter; None when there is none."""
    for name in sorted(read):
        stmt = _origin(fn, name, aliases)
        if stmt is not None:
            return fn, stmt
    if fn not in module.body:
        return None
    params = {p.name.value for p in fn.params.params + fn.params.posonly_params + fn.params.kwonly_params}
    read = params & read
    for caller in find_all(module, m.FunctionDef()):
        for call in m.findall(caller.body, m.Call(func=m.Name(fn.name.value))):
            for arg in call.args:
                if _arg_param(call, arg, fn) not in read:
                    continue
                v = arg.value
                name = v.value.value if isinstance(v, cst.Subscript) and isinstance(v.value, cst.Name) and \
                    _is_read0(v, v.value.value) else v.value if isinstance(v, cst.Name) else None
                stmt = _origin(caller, name, aliases) if name else None
                if stmt is not None:
                    return caller, stmt
    return None


def reads_indexed(module: cst.Module, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
    """Whether a slice bound at the site ``node`` (in ``fn``) reads a parameter that a call in
    the module passes ``L[0]`` of ``L = <torch>.IntTensor([E])`` (the taxonomy's test)."""
    bounds = {n.value for sl in m.findall(node, m.Slice()) for n in m.findall(sl, m.Name())}
    return bool(bounds) and _find(module, bounds, fn, torch_aliases(module)) is not None


def screen_indexed(module: cst.Module, node: cst.CSTNode, fn: cst.FunctionDef, aliases: set[str],
                   positions: dict) -> IndexedPlan | Decline | None:
    """The plan for a site that reads ``L[0]`` of ``L = <torch>.IntTensor([E])``, a local bound
    to it, ``N = <torch>.IntTensor([E])[0]``, or a parameter one of them is passed to; a
    Decline naming the first read that is not a slice bound; None when the site reads no such
    value."""
    found = _find(module, {n.value for n in m.findall(node, m.Name())}, fn, aliases)
    if found is None:
        return None
    caller, stmt = found
    local = stmt.targets[0].target.value
    inline = _inline_ctor(stmt.value, aliases) is not None
    made_call = stmt.value.value if inline else stmt.value
    ctor = _ctor_of(made_call, aliases)
    made = code_of(stmt.value).strip()
    value = _one_element(made_call)
    if value is None:
        return Decline(NAME, f"`{made}` is not a constructor of one list element and no keyword argument")
    if m.findall(value, m.NamedExpr() | m.Yield() | m.Await() | m.Lambda()) or "\n" in code_of(value).strip():
        return Decline(NAME, f"the element of `{made}` spans lines or holds `:=`, `yield`, `await` or a lambda")
    line = next((s for s in caller.body.body if isinstance(s, cst.SimpleStatementLine) and s.body
                 and s.body[0] is stmt), None)
    if line is None or len(line.body) != 1:
        return Decline(NAME, f"`{local} = {made}` is not a statement of its own at the top level of "
                       f"`{caller.name.value}` (in a branch, loop or `with`, a read could come before it)")
    if _binds(caller, local) != 1 or _captured(caller, local):
        return Decline(NAME, f"`{local}` is bound more than once in `{caller.name.value}`, declared "
                       "`global`/`nonlocal`, or captured by a nested scope")
    if locals_readers(caller):
        return Decline(NAME, f"`{caller.name.value}` reads its locals by name (`locals()`, `vars()`, `eval`, "
                       "`exec`): the snapshot local would show there")
    shadowed = [b for b in _BUILTINS if _module_binds(module, b)]
    if shadowed:
        return Decline(NAME, f"`{shadowed[0]}` is bound in the module (any scope, conservatively): the run-time "
                       "test must read the builtin")
    if find_all(module, m.ImportStar()):
        return Decline(NAME, "the module has a `from ... import *`, which may rebind `type`, `int` or a callee")
    why = _module_hazard(module, caller, (dotted(made_call.func) or "").partition(".")[0])
    if why:
        return Decline(NAME, why)
    lineno = positions[line].start.line
    plan = IndexedPlan(caller, line, lineno, local, ctor, value, inline=inline)
    parent = parents(caller.body)
    if inline:
        plan.reads.append(stmt.value)
        why = _name_sinks(module, caller, local, parent, positions, plan)
        return Decline(NAME, why) if why else plan
    for name_node in m.findall(caller.body, m.Name(local)):
        p = parent.get(name_node)
        if isinstance(p, cst.AssignTarget) and p is stmt.targets[0] or isinstance(p, cst.Attribute) and \
                p.attr is name_node or isinstance(p, cst.Arg) and p.keyword is name_node:
            continue
        if not _is_read0(p, local):
            return Decline(NAME, f"`{local}` is used as `{code_of(p).strip() if p is not None else local}`, not "
                           f"only read as `{local}[0]`: the tensor itself is observed there")
        if positions[p].start.line <= lineno:
            return Decline(NAME, f"`{local}[0]` is read on or before the line binding `{local}`")
        why = _sink(module, caller, p, f"`{local}[0]`", parent, positions, plan, alias=True)
        if why:
            return Decline(NAME, why)
        plan.reads.append(p)
    if not plan.reads:
        return Decline(NAME, f"`{local}` is never read as `{local}[0]`")
    return plan


def _sink(module, caller, read: cst.CSTNode, what: str, parent: dict, positions: dict, plan: IndexedPlan,
          alias: bool) -> str | None:
    """Why the value ``read`` is used other than as a slice bound (directly, through a
    screened callee's parameter, or -- with ``alias`` -- through a local bound to it once);
    None when every use is one (and the plan extended)."""
    container = _slice_container(read, parent)
    if container is not None:
        if not isinstance(container, cst.Name):
            return f"{what} bounds a slice of `{code_of(container).strip()}`, not of a name whose type is observed"
        plan.slices.append((caller.name.value, container.value, _stmt_line(read, parent, positions)))
        return None
    holder = parent.get(read)
    if alias and isinstance(holder, cst.Assign) and len(holder.targets) == 1 and \
            isinstance(holder.targets[0].target, cst.Name) and holder.value is read:
        name = holder.targets[0].target.value
        if _binds(caller, name) != 1 or _captured(caller, name):
            return f"`{name} = {what[1:-1]}`: `{name}` is bound more than once, or captured by a nested scope"
        return _name_sinks(module, caller, name, parent, positions, plan)
    return _callee_use(module, caller, parent.get(holder), holder, what, plan, positions)


def _name_sinks(module, caller, name: str, parent: dict, positions: dict, plan: IndexedPlan) -> str | None:
    """Why a read of the local ``name`` (bound once to the value) is not a slice bound."""
    if _binds(caller, name) != 1 or _captured(caller, name):
        return f"`{name}` is bound more than once in `{caller.name.value}`, or captured by a nested scope"
    reads = 0
    for node in m.findall(caller.body, m.Name(name)):
        p = parent.get(node)
        if isinstance(p, cst.AssignTarget) or isinstance(p, cst.Attribute) and p.attr is node or \
                isinstance(p, cst.Arg) and p.keyword is node:
            continue
        why = _sink(module, caller, node, f"`{name}`", parent, positions, plan, alias=False)
        if why:
            return why
        reads += 1
    return None if reads else f"`{name}` is never read"


def _callee_use(module, caller, call, arg, what: str, plan: IndexedPlan, positions: dict) -> str | None:
    """Why passing the value (``what``) as ``arg`` of ``call`` is declined; None (and the plan
    extended) when the callee is a module-level function using the parameter only as a slice
    bound."""
    if not (isinstance(arg, cst.Arg) and isinstance(call, cst.Call) and arg.value is not None and not arg.star):
        where = code_of(arg).strip() if isinstance(arg, cst.CSTNode) and not isinstance(arg, cst.Module) else ""
        return (f"{what} is used in `{where}`, not as a slice bound or a call's argument: an int and a 0-d tensor "
                "differ there" if where and len(where) < 120 else
                f"{what} is used other than as a slice bound or a call's argument: an int and a 0-d tensor differ there")
    if not isinstance(call.func, cst.Name):
        return f"{what} is passed to `{code_of(call.func).strip()}`, not to a function of this module"
    fname = call.func.value
    defs = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == fname]
    if len(defs) != 1 or _module_binds(module, fname, defs[0]) or _binds(caller, fname):
        return (f"{what} is passed to `{fname}`, which is not one module-level function of this file "
                "(defined there once and never rebound)")
    callee = defs[0]
    if callee.decorators or callee.asynchronous:
        return f"`{fname}` is decorated or a coroutine: what runs is not the function as written"
    if m.findall(callee, m.NamedExpr()):
        return f"`{fname}` binds a name with `:=`: a sliced name may change within the statement it is observed at"
    param = _arg_param(call, arg, callee)
    if param is None:
        return f"which parameter of `{fname}` receives {what} is not static (a star argument, or `*args`)"
    containers = _param_slice_only(callee, param, positions)
    if isinstance(containers, str):
        return containers
    plan.slices.extend((fname, c, ln) for c, ln in containers)
    plan.callees.append(fname)
    return None


def guard_text(snap: str, ctor: str) -> str:
    lo, hi = RANGES[ctor]
    return f"type({snap}) is int and {lo} <= {snap} < {hi}"


def rewrite_indexed(module: cst.Module, plan: IndexedPlan, positions: dict):
    """The mended module and what the obligations need: the snapshot's name, the binding's
    line in the mended file, the lines of the guarded reads."""
    snap = fresh_local(plan.caller, "_mend_n")
    test = guard_text(snap, plan.ctor)
    call = plan.line.body[0].value

    def with_snap(made: cst.Call) -> cst.Call:   # <ctor>([E]) -> <ctor>([S])
        listed = made.args[0].value
        return made.with_changes(args=[made.args[0].with_changes(value=listed.with_changes(
            elements=[listed.elements[0].with_changes(value=cst.Name(snap))]))])

    if plan.inline:   # N = <ctor>([E])[0] -> N = (S if test else <ctor>([S])[0])
        fallback = code_of(call.with_changes(value=with_snap(call.value))).strip()
        new_call, reads = cst.parse_expression(f"({snap} if {test} else {fallback})"), set()
    else:             # L = <ctor>([S]); each L[0] -> (S if test else L[0])
        new_call, reads = with_snap(call), set(plan.reads)
    guarded = cst.parse_expression(f"({snap} if {test} else {plan.local}[0])")

    class _Sub(cst.CSTTransformer):
        def leave_Subscript(self, original_node, updated_node):
            return guarded if original_node in reads else updated_node

    comment = plan.line.trailing_whitespace.comment or cst.Comment(f"# mend: {NAME}")
    binding = plan.line.with_changes(
        body=[plan.line.body[0].with_changes(value=new_call)], leading_lines=[],
        trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=comment))
    snapshot = cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(snap))],
                                                        value=plan.value)], leading_lines=plan.line.leading_lines)
    body = list(plan.caller.body.body)
    i = body.index(plan.line)
    caller = plan.caller.with_changes(body=plan.caller.body.with_changes(
        body=body[:i] + [snapshot, binding] + body[i + 1:]).visit(_Sub()))
    new = module.visit(Replace(plan.caller, caller))
    last = max(positions[r].end.line for r in plan.reads)
    return new, snap, (plan.lineno, last)
