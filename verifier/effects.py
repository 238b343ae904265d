"""Effect analysis for the obligations: what an operator or a function may write.

* Operators: from their TorchScript schemas (``torch._C._jit_get_schemas_for_operator``):
  an argument annotated ``Tensor(a!)`` is written (``aten::add_(Tensor(a!) self, ...)``).
* ``mend::capture`` (the deferred-effects operator): its schema writes nothing, it is
  registered as an ORDERED effect (read from torch's registry: the caller loads the
  runtime), and its Python body clones every tensor it buffers (read from the runtime's
  source, found by module name: ``verifier`` imports nothing from ``mend``).
* Python functions (a hoisted initialiser): a syntactic screen of the function's source --
  no ``global``/``nonlocal``, no store into anything but its own locals, no in-place tensor
  method, no call that performs I/O, logs, warns or mutates a container; calls to other
  functions of the same module are screened too (depth 2). Method calls on other objects
  are assumed pure unless their name says otherwise; that assumption is reported. An
  in-place update of a local the function allocated (``scores = torch.matmul(q, k)``;
  ``scores.masked_fill_(...)``) touches nothing outside the call. Python-level writes into an
  object the caller passed in (a KV cache) are reported apart (:func:`function_writes`), for
  the obligations that can accept them.
"""
from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from typing import Any


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None

_EFFECT_CALLS = {"print", "open", "setattr", "delattr", "exec", "eval", "input", "__import__"}
_EFFECT_METHODS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
                   "discard", "add", "sort", "reverse", "write", "register_buffer", "register_parameter",
                   "register_module", "add_module", "backward", "warn", "warning", "warning_once", "info", "debug",
                   "error", "critical", "exception", "log", "manual_seed", "seed", "copy_", "fill_", "zero_"}


def op_writes(qualified: str) -> list[str]:
    """Arguments some overload of ``qualified`` (``aten::add_``) writes, as ``name (overload)``."""
    import torch

    out = []
    for schema in torch._C._jit_get_schemas_for_operator(qualified):
        for arg in schema.arguments:
            if arg.alias_info is not None and arg.alias_info.is_write:
                out.append(f"{arg.name} ({schema.overload_name or 'default'})")
    return out


RUNTIME = "mend.runtime"      # the deferred-effects runtime, by name only: never imported here


def runtime_file(module: str = RUNTIME, path: str | None = None) -> str | None:
    """Where the runtime's source is, without importing anything: ``path`` when given, else
    the file of the module if it is loaded (``sys.modules``), else its spec when its parent
    package is loaded (``importlib.util.find_spec`` then imports nothing new)."""
    import importlib.util
    import sys

    if path:
        return str(path)
    mod = sys.modules.get(module)
    if mod is not None and getattr(mod, "__file__", None):
        return mod.__file__
    parent = module.rpartition(".")[0]
    if parent and parent not in sys.modules:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec and spec.origin else None


def _definitions(path: str | None) -> dict[str, str] | None:
    """``name -> source`` of every function and class defined in the file at ``path``."""
    if not path:
        return None
    try:
        src = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError):
        return None
    return _definitions_of(src)


@functools.lru_cache(maxsize=8)
def _definitions_of(src: str) -> dict[str, str] | None:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    # ast.get_source_segment splits the whole source on every call (0.7 s per screen of
    # mend/runtime.py): split it once; a definition spans whole lines from its first column
    lines = src.splitlines(keepends=True)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in out:
            first = lines[node.lineno - 1].encode()[node.col_offset:].decode()
            last = lines[node.end_lineno - 1].encode()[:node.end_col_offset].decode()
            body = lines[node.lineno:node.end_lineno - 1]
            out[node.name] = first if node.lineno == node.end_lineno else first + "".join(body) + last
    return out


def runtime_screen(needles: list[tuple[str, str]], *, module: str = RUNTIME, path: str | None = None
                   ) -> tuple[bool, str]:
    """Whether each ``(definition, text)``: the function or class ``definition`` of the
    runtime's source contains ``text``. Returns (all found, what was read, in words)."""
    where = runtime_file(module, path)
    defs = _definitions(where)
    if defs is None:
        return False, f"the source of {module} could not be read (is it loaded?)"
    missing = [f"`{t}` in {d}" for d, t in needles if t not in defs.get(d, "")]
    if missing:
        return False, f"{module} ({where}) lacks " + ", ".join(missing)
    return True, f"{module}'s source: " + ", ".join(f"{d} has `{t}`" for d, t in needles)


def capture_op():
    """``torch.ops.mend.capture.default`` when the runtime registered it in this process
    (the caller loads the runtime), else None."""
    import torch

    try:
        return torch.ops.mend.capture.default
    except (AttributeError, RuntimeError):
        return None


def capture_is_ordered(op=None) -> tuple[bool, str]:
    """Whether mend::capture writes nothing and is an ORDERED effect (kept in program order),
    read from torch's operator registry."""
    op = op if op is not None else capture_op()
    if op is None:
        return False, ("mend::capture is not registered in this process (its runtime is not loaded), so its "
                       "effect registration could not be read")
    try:
        from torch._higher_order_ops.effects import _get_effect

        writes = [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        effect = _get_effect(op)
    except Exception as exc:  # noqa: BLE001
        return False, f"mend::capture's effect registration could not be read ({type(exc).__name__})"
    ok = not writes and effect is not None and "ORDERED" in str(effect)
    return ok, (f"mend::capture is registered as {effect} and its schema `{op._schema}` writes "
                f"{', '.join(writes) or 'no argument'} (read from torch's registry at discharge time)")


def _op_body(path: str | None, qualname: str) -> str | None:
    """The source of the function decorated as the custom op ``qualname`` in ``path``."""
    if not path:
        return None
    try:
        src = open(path, encoding="utf-8").read()
        tree = ast.parse(src)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(d, ast.Call) and d.args and isinstance(d.args[0], ast.Constant) and d.args[0].value == qualname
                for d in node.decorator_list):
            return ast.get_source_segment(src, node) or ""
    return None


def capture_clones(path: str | None = None) -> tuple[bool, str]:
    """Whether the body of the runtime's ``mend::capture`` op buffers ``t.detach().clone()``
    of each tensor (read from the runtime's source, found by module name)."""
    where = runtime_file(RUNTIME, path)
    body = _op_body(where, "mend::capture")
    if body is None:
        return False, ("the runtime's source defines no function registered as mend::capture" if where else
                       "the runtime's capture source could not be read (is it loaded?)")
    ok = ".detach().clone()" in body
    return ok, ("mend::capture buffers `t.detach().clone()` of each tensor argument (fresh storage; read from "
                "the runtime's source at discharge time)" if ok else "mend::capture does not visibly clone its tensors")


def inplace_writes_to(code: str, targets: list[str]) -> list[str]:
    """In-place writes in ``code`` to any of ``targets`` (dotted, e.g. ``self.inv_freq``):
    ``t.op_(...)``, ``t[...] = v``, ``t += v``, ``out=t``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ["the mended file does not parse"]
    names = {t for t in targets if t}
    out = []

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            m = node.func.attr
            if m.endswith("_") and not m.endswith("__") and dotted_name(node.func.value) in names:
                out.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
            for kw in node.keywords:
                if kw.arg == "out" and dotted_name(kw.value) in names:
                    out.append(f"line {node.lineno}: out={ast.unparse(kw.value)}")
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets_ = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets_:
                if isinstance(t, ast.Subscript) and dotted_name(t.value) in names:
                    out.append(f"line {node.lineno}: {ast.unparse(t)} = ...")
                if isinstance(node, ast.AugAssign) and dotted_name(t) in names:
                    out.append(f"line {node.lineno}: {ast.unparse(t)} {type(node.op).__name__}= ...")
    return out


_PURE_NAMESPACES = ("torch", "math", "np", "numpy", "F", "nn", "functools", "itertools", "operator", "builtins")


# torch functions whose result is always new storage, never a view of an argument (unlike
# `torch.transpose`, `torch.einsum("ij->ji", x)` or `x.float()`, which may return their input)
_ALLOCATING_TORCH = {"matmul", "bmm", "mm", "addmm", "baddbmm", "cat", "concat", "concatenate", "stack", "zeros",
                     "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange",
                     "tensor", "where", "clone", "rand", "randn", "randint"}


def _allocates(value: ast.AST, local: set[str]) -> bool:
    """A new container, or a tensor allocated right there: arithmetic (``a + b``; not ``+a``,
    which returns ``a``) or a ``torch.<f>`` of :data:`_ALLOCATING_TORCH`."""
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.Tuple,
                          ast.BinOp)):
        return True
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    if isinstance(f, ast.Name):
        return f.id in ("list", "dict", "set", "tuple") and f.id not in local
    d = dotted_name(f) or ""
    return d.count(".") == 1 and d.split(".")[0] == "torch" and "torch" not in local and d.split(".")[1] in \
        _ALLOCATING_TORCH


def _bindings(func: ast.AST) -> tuple[dict[str, list[ast.AST]], set[str]]:
    """({name: the values assigned to it by plain ``name = value``}, names bound any other way)."""
    values: dict[str, list[ast.AST]] = {}
    other: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(node.value)
                else:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                            other.add(sub.id)
        elif isinstance(node, (ast.For, ast.comprehension, ast.AugAssign, ast.AnnAssign, ast.withitem, ast.NamedExpr)):
            tgt = getattr(node, "target", None) or getattr(node, "optional_vars", None)
            for sub in ast.walk(tgt) if tgt is not None else ():
                if isinstance(sub, ast.Name):
                    other.add(sub.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            other.update(node.names)
    return values, other


def _fresh_locals(func: ast.AST) -> set[str]:
    """Names only ever bound to new objects (:func:`_allocates`: ``[]``, ``{}``, ``list(...)``,
    comprehensions, ``a @ b``, ``torch.matmul(q, k)``): mutating them, in place included,
    touches nothing outside the call."""
    values, other = _bindings(func)
    local = set(values) | other
    return {n for n, vs in values.items() if n not in other and all(_allocates(v, local) for v in vs)}


def _argument_aliases(func: ast.AST, params: set[str]) -> set[str]:
    """``params`` and the locals every binding of which reads one of them through attributes
    and subscripts only (``curr_cache = cache.self_attention_cache``): the objects the
    caller passed in."""
    return set(_argument_origins(func, params))


def _argument_origins(func: ast.AST, params: set[str]) -> dict[str, set[str]]:
    """For each of :func:`_argument_aliases`: the parameters it reads (``curr_cache`` ->
    ``{"cache"}``)."""
    values, other = _bindings(func)
    origins = {p: {p} for p in params}
    changed = True
    while changed:   # a fixpoint over `a = b.c`, `b = param`
        changed = False
        for n, vs in values.items():
            if n in origins or n in other:
                continue
            arms = [a for v in vs for a in ((v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,))]
            if all(_chain_root(a) in origins for a in arms):
                origins[n] = set().union(*(origins[_chain_root(a)] for a in arms))
                changed = True
    return {n: o for n, o in origins.items() if n not in other}


def _chain_root(node: ast.AST) -> str | None:
    """The name an attribute/subscript chain starts from (``a`` for ``a.b[i].c``); None when
    the chain passes through a call or starts from anything else."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def function_purity(fn: Any, depth: int = 0, owner: type | None = None) -> tuple[list[str], list[str]]:
    """(effects found, assumptions made) for a Python function, by its source. ``owner``:
    the class of ``self`` when ``fn`` is a method (its ``self.method()`` calls are screened).
    Writes into the objects passed in (:func:`function_writes`) count as effects here."""
    effects, arguments, assumptions = function_writes(fn, depth, owner)
    return effects + arguments, assumptions


def function_writes(fn: Any, depth: int = 0, owner: type | None = None,
                    written: set[str] | None = None) -> tuple[list[str], list[str], list[str]]:
    """(effects, argument writes, assumptions) of ``fn``, by its source. *Argument writes*
    are Python-level writes into an object the caller passed in (not ``self``): a store into
    ``cache.is_updated[i]``, a call of ``cache.update(...)`` or ``xs.append(...)`` on it or on a
    local that reads it through attributes (``curr_cache = cache.self_attention_cache``).
    Dynamo replays such writes after the graph returns, so a graph that raises leaves them
    undone (measured, tests/test_argument_writes.py); what the called method does inside is
    an assumption the caller must state. In-place tensor methods and ``x op= ...`` on an
    argument stay effects (the compiled graph writes them). Callees are screened with their
    argument writes counted as effects (their arguments may be module state). ``written``,
    when given, receives the parameters the argument writes reach (``cache`` for a write
    through ``curr_cache = cache.self_attention_cache``)."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return [f"the source of {getattr(fn, '__qualname__', fn)} is not available"], [], []
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return ["not a function"], [], []
    positional = func.args.posonlyargs + func.args.args
    params = {a.arg for a in positional + func.args.kwonlyargs}
    for extra in (func.args.vararg, func.args.kwarg):
        if extra:
            params.add(extra.arg)
    local = set(params) | {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    fresh = _fresh_locals(func) - params
    # a `**kwargs` dict is made anew for every call (Python's calling convention): popping or
    # storing into it changes nothing the caller sees, unless the name is rebound
    kw = func.args.kwarg.arg if func.args.kwarg else None
    if kw and not any(isinstance(n, ast.Name) and n.id == kw and isinstance(n.ctx, ast.Store) for n in ast.walk(func)):
        fresh.add(kw)
    me = positional[0].arg if positional and owner is not None else None   # `self`: module state, not an argument
    origins = _argument_origins(func, params - {me} - fresh) if depth == 0 else {}
    passed = set(origins) - fresh
    # names bound only to numbers or to values allocated right there: `x op= v` on any other
    # name may update a caller's or the module's tensor in place (`kk = cache.k`, `a = self.acc`)
    values, _ = _bindings(func)
    allocated = {n for n, vs in values.items() if n not in params and all(
        _allocates(v, local) or isinstance(v, ast.Constant) for v in vs)}
    effects, arguments, assumptions = [], [], []
    g = getattr(fn, "__globals__", {})
    # the body only: decorators (`@deprecate_kwarg(...)`, which inspect.getsource includes)
    # and defaults ran when the function was defined, not when it is called
    body = [node for stmt in func.body for node in ast.walk(stmt)]
    for node in body:
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            effects.append(f"line {node.lineno}: `{type(node).__name__.lower()}`")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            ts = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in ts:
                if isinstance(node, ast.AugAssign) and isinstance(t, ast.Name) and t.id not in allocated \
                        and t.id not in fresh and t.id != kw:
                    # `x += y` updates a tensor in place: unless every binding of `x` is a number
                    # or a value allocated right there, it may be an argument's, a buffer's or an
                    # alias of one (`kk = cache.k`, `a = self.acc`, `m = self.stats(0)`)
                    effects.append(f"line {node.lineno}: `{t.id} {_OPS.get(type(node.op), '?')}= ...` on a value "
                                   "that may be an argument's or the module's tensor (in place when it is one)")
                for sub in ast.walk(t):
                    if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, ast.Store):
                        root = _root(sub)
                        name = root.id if isinstance(root, ast.Name) else None
                        # only a store right on the fresh object is local: `buf[0][...] = v`
                        # writes an element `buf` holds, which may be anyone's tensor
                        if name in fresh and isinstance(sub.value, ast.Name):
                            continue
                        what = f"line {node.lineno}: store into `{ast.unparse(sub)}`"
                        if name in passed and _chain_root(sub) == name and _python_store(node, sub):
                            if written is not None:
                                written |= origins[name]
                            arguments.append(what + f" (an object passed in: `{name}`" + (
                                ", assumed a Python container, not a tensor)" if isinstance(sub, ast.Subscript)
                                else ")"))
                        else:
                            effects.append(what)
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                if f.id in _EFFECT_CALLS:
                    effects.append(f"line {node.lineno}: calls `{f.id}`")
                elif f.id == "getattr" and len(node.args) >= 2 and not (
                        isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                        and not (node.args[1].value.endswith("_") and not node.args[1].value.endswith("__"))):
                    # `getattr(t, "add_")(v)`, or a computed name: may fetch an in-place method
                    effects.append(f"line {node.lineno}: `{ast.unparse(node)[:60]}` may fetch an in-place method")
                elif f.id in g and inspect.isfunction(g[f.id]) and f.id not in local and depth < 2:
                    e, a = function_purity(g[f.id], depth + 1)
                    effects += [f"{f.id}: {x}" for x in e]
                    assumptions += a
            elif isinstance(f, ast.Attribute):
                m = f.attr
                recv = ast.unparse(f.value)
                root = _root(f.value)
                root_name = root.id if isinstance(root, ast.Name) else None
                pure_ns = root_name in _PURE_NAMESPACES and root_name not in local
                on_fresh = isinstance(f.value, ast.Name) and f.value.id in fresh
                if m.endswith("_") and not m.endswith("__"):
                    if not on_fresh:   # a tensor this call allocated: nothing outside sees the write
                        effects.append(f"line {node.lineno}: calls `{recv}.{m}()` (in place)")
                elif m in _EFFECT_METHODS and not pure_ns and not on_fresh:
                    what = f"line {node.lineno}: calls `{recv}.{m}()`"
                    if _chain_root(f.value) in passed:
                        if written is not None:
                            written |= origins[_chain_root(f.value)]
                        arguments.append(what + f" on an object passed in (`{_chain_root(f.value)}`)")
                    else:
                        effects.append(what)
                elif recv == "self" and owner is not None and inspect.isfunction(getattr(owner, m, None)):
                    if depth < 2:
                        e, a = function_purity(getattr(owner, m), depth + 1, owner)
                        effects += [f"self.{m}: {x}" for x in e]
                        assumptions += a
                    else:
                        assumptions.append(f"`self.{m}()` has no effect (not screened: too deep)")
                elif not pure_ns and not on_fresh and recv != "self" and root_name not in local:
                    assumptions.append(f"`{recv}.{m}()` has no effect")
    return effects, arguments, sorted(set(assumptions))


def _python_store(node: ast.AST, target: ast.AST) -> bool:
    """A store that writes a Python object, not a tensor in place: ``a.b = v``, or
    ``a.b[k] = True/False/None/"s"`` with a plain key (``cache.is_updated[self.layer_id] = True``);
    not ``x[mask] = v``, ``x[:, i] = k`` or ``x[i] += v`` (``__setitem__`` on a tensor)."""
    if isinstance(node, ast.AugAssign):
        return False
    if isinstance(target, ast.Attribute):
        return True
    value = getattr(node, "value", None)
    return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute)
            and isinstance(target.value.value, ast.Name)
            and isinstance(target.slice, (ast.Name, ast.Attribute, ast.Constant))
            and isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, (bool, str))))


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
        ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}


def module_effects(module: Any) -> tuple[list[str], list[str]]:
    """(effects, assumptions) of calling ``module``: torch.nn modules by type (those that
    update no state in their current mode), other modules by screening ``forward``; writes
    into the objects passed to a ``forward`` count as effects (see :func:`module_writes`)."""
    effects, arguments, assumptions = module_writes(module)
    return effects + arguments, assumptions


def module_writes(module: Any, written: dict[str, set[str]] | None = None) -> tuple[list[str], list[str], list[str]]:
    """(effects, argument writes, assumptions) of calling ``module``: as :func:`module_effects`,
    with the Python-level writes of each ``forward`` into the objects passed to it apart
    (:func:`function_writes`). Those objects may be another module's state when a parent passes
    it down, so the caller of this function decides where such writes are harmless. ``written``,
    when given, maps each submodule's name (``"0"`` in a ModuleList, ``""`` for ``module``
    itself) to the ``forward`` parameters its argument writes reach."""
    import torch

    effects, arguments, assumptions = [], [], []
    for name, sub in module.named_modules():
        t = type(sub)
        where = name or type(module).__name__
        if t.__module__.startswith("torch.nn"):
            if t.__name__.startswith(("BatchNorm", "SyncBatchNorm", "InstanceNorm")) and sub.training:
                effects.append(f"{where} ({t.__name__}) updates running statistics in training mode")
            elif t.__name__.startswith(("Dropout", "RReLU", "AlphaDropout", "FeatureAlphaDropout")) and sub.training:
                effects.append(f"{where} ({t.__name__}) draws random numbers in training mode")
            continue
        if t.forward is torch.nn.Module.forward:
            continue
        params: set[str] = set()
        e, w, a = function_writes(t.forward, 0, t, params)
        if written is not None and params:
            written[name] = params
        effects += [f"{where} ({t.__name__}): {x}" for x in e]
        arguments += [f"{where} ({t.__name__}): {x}" for x in w]
        assumptions += a
    return effects, arguments, sorted(set(assumptions))


def function_effects(facts: dict | None, call: str) -> str:
    """A short description of what is known about the function a call targets."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return "the call does not parse"
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        f = (facts or {}).get("names", {}).get(name)
        if f:
            return f"{name} is {f.get('qualname') or f.get('type') or f.get('kind')}"
    return "no fact about the callee"
