"""Screens shared by the rules that move a failing check into the compiled graph
(tensor-check, predicated-validation): compiled, the failure surfaces when the graph has run,
so what the surrounding code does around the check must not depend on when it fails.

* a grad-mode context around the check (``with torch.no_grad():``, ``@torch.no_grad()``, in
  the check's function or a caller): under the eager backend Dynamo leaves the mode set when
  the graph raises inside it (helper-50: ``torch.is_grad_enabled()`` False for the rest of the
  process);
* a state change in a callee (a method of the class, a function of the module): it is traced
  into the same graph (helper-50: an attribute stashed by ``self._keep(h)`` before the check
  was lost when the check failed);
* a caller in the module with a ``try``/``with`` around the call, a grad-mode context or a
  state change (helper-47);
* a torch mode context in any other function of the module, around a call that may reach the
  check (a parent module's ``with torch.no_grad(): h = self.enc(x)``, ``@torch.no_grad()`` on a
  method, ``sdpa_kernel``): under the eager backend a check failing inside the graph leaves the
  mode set for the process (helper-85: grad mode, flash SDPA disabled).

Code in other modules rests on the observation of the example run (state-unchanged-on-raise)."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._common import code_of, dotted, enclosing_handler, find_all, first_call_flags, state_change

GRAD_MODES = frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled"})
MAX_DEPTH = 3   # callees followed: plain-name functions of the module, methods of the class


def _grad_mode(expr: cst.BaseExpression) -> str | None:
    func = expr.func if isinstance(expr, cst.Call) else expr
    name = dotted(func) or ""
    return code_of(expr).strip() if name.rsplit(".", 1)[-1] in GRAD_MODES else None


def grad_mode_context(functions: list[cst.FunctionDef], inner: list[cst.CSTNode],
                      module: cst.Module | None = None) -> str | None:
    """The grad-mode context around a check: a ``with`` item among ``inner`` (the nodes
    between the function and the check) or a decorator of one of ``functions``, as code; with
    ``module``, any torch mode context too (``sdpa_kernel``, helper-85), autocast and device aside."""
    roots = _torch_roots(module) if module is not None else None

    def mode(expr):
        return _grad_mode(expr) or (_torch_context(expr, roots) if roots else None)

    for node in inner:
        if isinstance(node, cst.With):
            found = next(filter(None, (mode(i.item) for i in node.items)), None)
            if found:
                return found
    for fn in functions:
        found = next(filter(None, (mode(d.decorator) for d in fn.decorators)), None)
        if found:
            return f"@{found}"
    return None


def _functions(module: cst.Module | None) -> dict[str, cst.FunctionDef]:
    return {s.name.value: s for s in (module.body if module is not None else ()) if isinstance(s, cst.FunctionDef)}


def _methods(cls: cst.ClassDef | None) -> dict[str, cst.FunctionDef]:
    if cls is None or not isinstance(cls.body, cst.IndentedBlock):
        return {}
    return {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}


def callee_state_change(function: cst.FunctionDef, module: cst.Module | None, cls: cst.ClassDef | None,
                        depth: int = MAX_DEPTH, seen: set | None = None) -> str | None:
    """The first state change in a function or method of this module that ``function`` calls
    (``helper(...)``, ``self.method(...)``), followed :data:`MAX_DEPTH` calls deep, as
    ``"`name`: statement"``; else None. ``function``'s own statements are its caller's to screen."""
    seen = set() if seen is None else seen
    if depth == 0:
        return None
    funcs, methods = _functions(module), _methods(cls)
    for call in m.findall(function.body, m.Call()):
        target, owner = None, None
        if isinstance(call.func, cst.Name) and call.func.value in funcs:
            target = funcs[call.func.value]
        elif m.matches(call.func, m.Attribute(value=m.Name("self"))) and call.func.attr.value in methods:
            target, owner = methods[call.func.attr.value], cls
        if target is None or id(target) in seen:
            continue
        seen.add(id(target))
        effect = state_change(target, owner, skip=first_call_flags(target), local_augassign=False)
        if effect is not None:
            return f"`{target.name.value}`: {effect}"
        deeper = callee_state_change(target, module, owner, depth - 1, seen)
        if deeper is not None:
            return deeper
    return None


def surroundings(function: cst.FunctionDef, ancestors: list[cst.CSTNode], inner: list[cst.CSTNode],
                 module: cst.Module | None) -> str | None:
    """Why the check's own surroundings make moving it into the graph change behaviour, else
    None: a grad-mode context around it (``inner``: the nodes between ``function`` and the
    check; the decorators of every function in ``ancestors``), or a state change in a function
    or method of the module that ``function`` calls. The same reason for both rules."""
    mode = grad_mode_context([a for a in ancestors if isinstance(a, cst.FunctionDef)], inner, module)
    if mode is not None:
        return (f"the check runs under `{mode}`: when it fails inside the compiled graph, Dynamo leaves the "
                "mode set (measured with the eager backend, helper-50)")
    cls = next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None)
    why = callee_state_change(function, module, cls)
    if why is not None:
        return (f"a function the check's function calls changes state ({why[:80]}): with the check inside the "
                "compiled graph, a failing call could leave different state than eager")
    return None


class _Calls(cst.CSTVisitor):
    """Calls of the plain name ``name`` (or ``self.name``), each with the nodes around it."""

    def __init__(self, name: str):
        self.name, self.stack, self.found = name, [], []

    def on_visit(self, node):
        if isinstance(node, cst.Call) and (
                (isinstance(node.func, cst.Name) and node.func.value == self.name)
                or m.matches(node.func, m.Attribute(value=m.Name("self"), attr=m.Name(self.name)))):
            self.found.append(list(self.stack))
        self.stack.append(node)
        return True

    def on_leave(self, original_node):
        self.stack.pop()


def caller_screen(module: cst.Module | None, function: cst.FunctionDef) -> str | None:
    """Why a caller of ``function`` in the module makes moving its check into the graph change
    behaviour, else None: a ``try``/``with`` around the call (it would no longer see the
    failure), a grad-mode context, or a state change in the caller or its other callees (lost
    before the check, or done anyway after it, when the check fails inside the graph). A
    one-time flag set under its own test is left to the observation (a first call's
    initialization, an unsafe fix saying so)."""
    if module is None:
        return None
    visitor = _Calls(function.name.value)
    module.visit(visitor)
    name = function.name.value
    for stack in visitor.found:
        caller = next((n for n in reversed(stack) if isinstance(n, cst.FunctionDef)), None)
        if caller is None or caller is function:
            continue
        inner = stack[stack.index(caller) + 1:]
        mode = grad_mode_context([caller], inner, module)
        if mode is not None:
            return (f"`{caller.name.value}` calls `{name}` under `{mode}`: when the check fails inside the compiled "
                    "graph, Dynamo leaves the mode set (measured with the eager backend, helper-50)")
        handler = enclosing_handler(inner)
        if handler is not None:
            return (f"`{caller.name.value}` calls `{name}` inside "
                    f"{'a `try`' if handler == 'try' else f'`with {handler}`'}, which would no longer see the "
                    "check's failure once it runs inside the compiled graph")
        cls = next((n for n in reversed(stack) if isinstance(n, cst.ClassDef)), None)
        effect = state_change(caller, cls, skip=first_call_flags(caller)) or callee_state_change(caller, module, cls)
        if effect is not None:
            return (f"`{caller.name.value}`, which calls `{name}`, changes state (`{effect[:80]}`): with the check "
                    "inside the compiled graph, a failing call could leave different state than eager")
    return None


# methods that build or initialise a module: run when it is made, never inside a compiled forward
_SETUP = frozenset({"__init__", "_init_weights", "init_weights", "reset_parameters"})
# torch contexts a check failing inside the graph was measured not to leave set (helper-85)
_MODE_EXEMPT = frozenset({"autocast", "device"})


def _torch_context(expr: cst.BaseExpression, torch_roots: set[str]) -> str | None:
    """``expr`` (a ``with`` item or a decorator) as code when it is a torch context: named
    through ``torch`` or a name imported from a torch module, other than :data:`_MODE_EXEMPT`."""
    func = expr.func if isinstance(expr, cst.Call) else expr
    name = dotted(func) or ""
    if name.split(".")[0] in torch_roots and name.rsplit(".", 1)[-1] not in _MODE_EXEMPT:
        return code_of(expr).strip()
    return None


def _torch_roots(module: cst.Module) -> set[str]:
    """``torch``, the names the module binds to a torch package (``import torch as T``,
    ``import torch.nn as tnn``: helper-87) and the names it imports from one."""
    roots = {"torch"}
    for imp in find_all(module, m.Import()):
        roots |= {a.asname.name.value for a in imp.names if a.asname and isinstance(a.asname.name, cst.Name)
                  and (dotted(a.name) or "").split(".")[0] == "torch"}
    for imp in find_all(module, m.ImportFrom()):
        if (dotted(imp.module) or "").split(".")[0] == "torch" and not isinstance(imp.names, cst.ImportStar):
            roots |= {(a.asname.name.value if a.asname else dotted(a.name) or "") for a in imp.names
                      if not a.asname or isinstance(a.asname.name, cst.Name)}
    return roots


_GLOBAL_SETTERS = {"set_grad_enabled", "_set_grad_enabled", "set_autocast_enabled", "set_default_dtype",
                   "set_default_device", "use_deterministic_algorithms", "set_anomaly_enabled", "_set_autocast_enabled"}


def global_mode_setter(module: cst.Module) -> str | None:
    """A call in the file that sets torch's global state, other than as a ``with`` item
    (``with torch.set_grad_enabled(False):`` restores the mode when it exits), by its name or a
    name the file imports it under (``from torch import set_grad_enabled as grad_on``: helper-87).
    Compiled, Dynamo sets the final mode after the graph returns, so a check failing inside the
    graph leaves the mode as it was, where eager left it changed (an adversarial review)."""
    aliases = {a.asname.name.value: dotted(a.name) or "" for imp in find_all(module, m.ImportFrom())
               if (dotted(imp.module) or "").split(".")[0] == "torch" and not isinstance(imp.names, cst.ImportStar)
               for a in imp.names if a.asname and isinstance(a.asname.name, cst.Name)}
    items = {id(i.item) for i in find_all(module, m.WithItem())}
    for call in find_all(module, m.Call()):
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if aliases.get(name, name) in _GLOBAL_SETTERS and id(call) not in items:
            return code_of(call).strip()
    return None


def mode_context_elsewhere(module: cst.Module | None, function: cst.FunctionDef) -> str | None:
    """Why a torch mode context in another function of the module may leave its mode set when
    the mended check fails inside the graph, else None: a ``with`` of one around a call, or a
    decorator (the call may reach the check: a parent module calls ``self.child(x)``, which
    runs ``forward`` without naming it). Measured by helper-85 with the eager backend:
    ``torch.no_grad``, ``set_grad_enabled`` and ``sdpa_kernel`` stay set after a failing call."""
    if module is None:
        return None
    roots = _torch_roots(module)
    for fn in find_all(module, m.FunctionDef()):
        if fn is function or fn.name.value in _SETUP:
            continue
        found = next(filter(None, (_torch_context(d.decorator, roots) for d in fn.decorators)), None)
        where = f"`@{found}` on `{fn.name.value}`" if found and m.findall(fn.body, m.Call()) else None
        for w in m.findall(fn.body, m.With()) if where is None else ():
            found = next(filter(None, (_torch_context(i.item, roots) for i in w.items)), None)
            if found and m.findall(w.body, m.Call()):
                where = f"`with {found}` around a call in `{fn.name.value}`"
                break
        if where is not None:
            return (f"{where[:120]} may run the check: when it fails inside the compiled graph, Dynamo's eager "
                    "backend leaves that mode set for the rest of the process (measured by helper-85: grad mode "
                    "off, flash attention disabled)")
    return None


# bases of classes that are no nn.Module (a lazy module, an enum, an import hook): their methods run no forward
_PLAIN_BASES = frozenset({"object", "type", "ModuleType", "types.ModuleType", "Exception", "BaseException", "Enum",
                          "str", "dict", "int", "NamedTuple", "ABC"})
_PLAIN_ROOTS = ("importlib", "abc", "enum", "typing", "collections", "types")


def _plain_class(cls: cst.ClassDef) -> bool:
    return all((dotted(b.value) or "") in _PLAIN_BASES or (dotted(b.value) or "").split(".")[0] in _PLAIN_ROOTS
               for b in cls.bases)


def _may_wrap_model(fn: cst.FunctionDef, body: cst.CSTNode, module: cst.Module, has_modules: bool) -> bool:
    """tensor-check's reading of "a call that may reach the check": in a file that defines a
    class that may be an nn.Module (a base other than ``object``, ``Enum``, ``ModuleType``...), any
    call (a parent calls ``self.child(x)``, a helper ``enc.forward(x)``: helper-87); elsewhere a
    direct call of a parameter of an enclosing function (a decorator's ``fn(*a)``). In a library
    file with no such class, calls of library code or of its arguments' methods (transformers'
    ``import_utils.py``: ``x.jax()`` in ``is_jax_jitting``) are taken not to run model code: an
    assumption, as callers in other files are. ``has_modules``: whether the file has such a class."""
    calls = m.findall(body, m.Call())
    if not calls:
        return False
    if has_modules:
        return True
    params = {p.name.value for f in _enclosing_functions(fn, module) for p in m.findall(f.params, m.Param())}
    return any(isinstance(c.func, cst.Name) and c.func.value in params for c in calls)


def _enclosing_functions(fn: cst.FunctionDef, module: cst.Module) -> list[cst.FunctionDef]:
    """``fn`` and the functions it is nested in."""
    out = [fn]
    for outer in find_all(module, m.FunctionDef()):
        if outer is not fn and any(inner is fn for inner in m.findall(outer.body, m.FunctionDef())):
            out.append(outer)
    return out


def catching_elsewhere(module: cst.Module | None, function: cst.FunctionDef, precise: bool = False) -> str | None:
    """A ``try`` with a handler, or a ``with`` of anything but a torch context, in another
    function of the file around a call that may reach the check (:func:`_may_wrap_model`; a parent
    module calling ``self.child(x)`` reaches ``forward`` without naming it): until
    ``mend.validation_runtime`` restores the exception at the outermost module the mended check
    raises ``RuntimeError('mend-trap:...')`` (tensor-check: its failure surfaces when the graph
    has run), which that handler no longer sees as before (helper-81's c01b, c09b; helper-85's
    F9 for tensor-check). A ``try: yield`` with a handler (a ``@contextmanager``) catches what
    its ``with`` body raises, wherever that is (helper-83's n02, n03). ``precise``: only a call
    :func:`_may_wrap_model` counts (tensor-check, whose check lives in library files too);
    otherwise any call does (predicated-validation)."""
    # whether the file defines a class that may be an nn.Module: read once, not at every try/with
    has_modules = precise and module is not None and any(not _plain_class(c) for c in find_all(module, m.ClassDef()))

    def reach(fn, body) -> bool:
        return _may_wrap_model(fn, body, module, has_modules) if precise else bool(m.findall(body, m.Call()))

    for fn in find_all(module, m.FunctionDef()) if module is not None else ():
        if fn is function or fn.name.value in _SETUP:
            continue
        for t in m.findall(fn, m.Try() | m.TryStar() | m.With()):
            if isinstance(t, cst.With):   # `contextlib.suppress(AssertionError)`, a context manager's `except`
                ctx = next((item.item for item in t.items if not (dotted(
                    item.item.func if isinstance(item.item, cst.Call) else item.item) or "").startswith("torch.")), None)
                if ctx is None or not reach(fn, t.body):
                    continue
                what = f"a `with {code_of(ctx).strip()[:50]}` around a call"
            elif t.handlers and (m.findall(t.body, m.Yield()) or reach(fn, t.body)):
                what = "a `try` with a handler"
            else:
                continue
            if precise:   # tensor-check: no trap; the failure surfaces when the compiled graph has run
                return (f"`{fn.name.value}` has {what}, which may reach the check: with the check inside the "
                        "compiled graph its failure surfaces when the graph has run, where that handler no longer "
                        "sees it as before (helper-85: a parent's `except RuntimeError` fallback was skipped)")
            return (f"`{fn.name.value}` has {what}, which may reach the check: inside the model the mended check "
                    "raises RuntimeError('mend-trap:...') until mend.validation_runtime restores the original "
                    "exception where the outermost module returns, so that handler would no longer see the original "
                    "exception")
    return None
