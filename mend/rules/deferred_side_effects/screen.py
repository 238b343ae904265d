"""deferred-side-effects: the static screen (which sites the rule takes, and why it declines the
others) and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from mend.locate import Located, header_parts
from mend.rules._bindings import _target_names
from mend.rules._base import Decline, Match
from mend.rules._common import code_of as _code, dotted as _dotted
from mend.taxonomy import LOG_METHODS, call_name

NAME = "deferred-side-effects"
RUNTIME = "mend.runtime"
ALIAS = "_mend_rt"

_PRINT_KEYWORDS = {"sep", "end", "file", "flush"}
_WARN_KEYWORDS = {"message", "category", "stacklevel", "source"}
_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "popleft", "appendleft", "update", "setdefault",
             "clear", "remove", "discard", "add", "write", "writelines", "send", "throw", "close", "flush",
             "register_buffer", "register_parameter", "register_module", "add_module", "manual_seed", "seed"}
_EFFECT_FUNCS = {"next", "print", "input", "open", "setattr", "delattr", "exec", "eval", "breakpoint"}
_HOST_READS = {"item", "tolist", "numpy"}
_TORCH_CONTEXTS = ("torch.",)  # `with torch.no_grad():` etc. keep their meaning for a captured call
# an escape in a non-raw literal that yields `{` or `}` (it would become a format field)
_BRACE_ESCAPE = re.compile(r"\\(N\{|x7[bdBD]|u007[bdBD]|U0000007[bdBD]|17[35])")


@dataclass
class _Plan:
    stmt: cst.SimpleStatementLine
    call: cst.Call
    kind: str  # "print" | "log" | "warn"
    callee: str  # dotted name, for messages
    receiver: cst.BaseExpression | None = None  # the logger (log)
    method: str | None = None  # the logger method (log)
    check: str | None = None  # a run-time check that may follow in the same graph (-> ordered)




# --------------------------------------------------------------------------- names in the file




class _Bindings(cst.CSTVisitor):
    """One pass over the file: every name it binds, with how, and every name it mentions."""

    def __init__(self) -> None:
        self.bound: dict[str, list[str]] = {}
        self.names: set[str] = set()

    def add(self, name: str, how: str) -> None:
        self.bound.setdefault(name, []).append(how)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _dotted(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.add(alias.asname.name.value, f"import:{full}")
            elif full:
                self.add(full.split(".")[0], f"import:{full.split('.')[0]}")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        mod = "." * len(node.relative) + ((_dotted(node.module) or "") if node.module is not None else "")
        if isinstance(node.names, cst.ImportStar):
            self.add("*", f"from:{mod}.*")
            return
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else (_dotted(alias.name) or "")
            bound = alias.asname.name.value if alias.asname is not None else name
            self.add(bound, f"from:{mod}.{name}")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.add(node.name.value, "def")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.add(node.name.value, "def")

    def visit_Param(self, node: cst.Param) -> None:
        self.add(node.name.value, "assign")

    def _targets(self, target: cst.CSTNode | None) -> None:
        for name in _target_names(target):
            self.add(name, "assign")

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._targets(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        self._targets(node.asname.name if node.asname is not None else None)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        self._targets(node.name.name if node.name is not None else None)


def _bindings(module: cst.Module) -> _Bindings:
    """What the file binds (any scope: a conservative screen) and the names it uses."""
    visitor = _Bindings()
    module.visit(visitor)
    return visitor


def _imports_module(bound: dict[str, list[str]], name: str, module: str) -> bool:
    """``name`` in this file is the module ``module`` and nothing else."""
    return bound.get(name) == [f"import:{module}"] or (
        bool(bound.get(name)) and all(h == f"import:{module}" for h in bound[name]))


def _runtime_alias(b: _Bindings) -> tuple[str, bool]:
    """(alias, already imported): an existing ``import mend.runtime as X``, else a free name."""
    for name, hows in b.bound.items():
        if hows and all(h == f"import:{RUNTIME}" for h in hows) and name != RUNTIME.split(".")[0]:
            return name, True
    used = b.names | set(b.bound)
    alias, i = ALIAS, 1
    while alias in used:
        alias, i = f"{ALIAS}_{i}", i + 1
    return alias, False


# --------------------------------------------------------------------------- finding the site


class _Calls(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)

    def __init__(self, line: int) -> None:
        self.line = line
        self.found: list[tuple[int, int, cst.Call]] = []

    def visit_Call(self, node: cst.Call) -> None:
        pos = self.get_metadata(PositionProvider, node)
        if pos.start.line <= self.line <= pos.end.line and _kind(node) is not None:
            self.found.append((pos.start.line, pos.end.line, node))


def _kind(call: cst.Call) -> str | None:
    """'print' | 'warn' | 'log' | 'log?' (a logger method on a computed receiver), else None."""
    func = call.func
    name = call_name(call)
    if name == "print":
        return "print"
    if name in ("warnings.warn", "warn"):
        return "warn"
    if isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS:
        if name is None:
            return "log?" if "log" in _code(func.value).lower() else None
        # the receiver is a logger by name: `logger`, `self._log`, `logging` (not `torch.log`)
        if "log" in name.rsplit(".", 1)[0].rsplit(".", 1)[-1].lower():
            return "log"
    return None


def _ancestors(wrapper: MetadataWrapper, node: cst.CSTNode) -> list[cst.CSTNode]:
    parents = wrapper.resolve(ParentNodeProvider)
    out = []
    while node in parents:
        node = parents[node]
        out.append(node)
    return out  # innermost first


def _site(wrapper: MetadataWrapper, line: int) -> tuple[cst.Call, list[cst.CSTNode]] | None:
    visitor = _Calls(line)
    wrapper.visit(visitor)
    if not visitor.found:
        return None
    starting = [f for f in visitor.found if f[0] == line]
    # the outermost call starting on the line; else the innermost one covering it
    start, end, call = starting[0] if starting else max(visitor.found, key=lambda f: f[0])
    return call, _ancestors(wrapper, call)


# --------------------------------------------------------------------------- screening


def _used(call: cst.Call) -> str:
    return f"the value of `{_code(call.func)}(...)` is used, so the call cannot be deferred"


def _screen(call: cst.Call, ancestors: list[cst.CSTNode], bound: dict[str, list[str]]) -> _Plan | Decline:
    """The plan for a deferrable call (``ancestors`` innermost first), or why not."""
    kind = _kind(call)
    callee = _code(call.func)
    parent = ancestors[0] if ancestors else None
    stmt = ancestors[1] if len(ancestors) > 1 else None
    if not (isinstance(parent, cst.Expr) and isinstance(stmt, cst.SimpleStatementLine)):
        return Decline(NAME, _used(call))
    if kind == "log?":
        return Decline(NAME, f"the logger of `{callee}(...)` is computed by an expression (a call or an index) "
                             "inside the compiled region; bind it to a module-level name first")
    scope = _scope_decline(ancestors)
    if scope is not None:
        return Decline(NAME, scope)
    if kind == "print":
        if "print" in bound:
            return Decline(NAME, "`print` is rebound in this file, so it is not the builtin")
        plan = _Plan(stmt, call, "print", callee)
    elif kind == "warn":
        head = callee.split(".")[0]
        ok = (_imports_module(bound, "warnings", "warnings") if callee == "warnings.warn"
              else bound.get("warn") == ["from:warnings.warn"])
        if not ok:
            return Decline(NAME, f"`{head}` is not the standard `warnings` module in this file")
        plan = _Plan(stmt, call, "warn", callee)
    else:
        func = call.func
        plan = _Plan(stmt, call, "log", callee, receiver=func.value, method=func.attr.value)
    reason = _args_decline(plan, bound)
    if reason:
        return Decline(NAME, reason)
    plan.check = check_after(stmt, ancestors)
    return plan


# calls that check a tensor at run time, inside the graph (torch 2.13; transformers 5's
# `torch_compilable_check` wraps `torch._check_tensor_all`)
_CHECK_CALLS = re.compile(r"(^|\.)(_assert_async|_assert|_check\w*|torch_compilable_check)$")
# tensor methods that give sizes: a test on them is decided while Dynamo traces (a guard), never
# by a kernel, so ordering against it buys nothing (a failure there stops the trace itself)
_SHAPE_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "is_floating_point", "is_complex", "get_device"}
# builtins whose call in an `if` test does not make the test a tensor check
_HOST_BUILTINS = {"isinstance", "issubclass", "len", "hasattr", "getattr", "callable", "type", "id", "any", "all"}


def check_after(stmt: cst.CSTNode, ancestors: list[cst.CSTNode]) -> str | None:
    """A statement of the enclosing function that can fail at run time inside the graph
    after ``stmt``, in words, else None.

    Deferred calls replay after the graph call, so a check failing in the same graph
    would drop what eager printed before it (docs/research/deferred_effects, exp3). Such
    a call is emitted ``ordered=True``. Counted: an explicit check call (``torch._check*``,
    ``torch._assert_async``), an ``assert``, and an ``if`` whose test calls something other
    than a host builtin and whose body raises (what predicated validation and tensor-check
    turn into in-graph checks). Later in the function, or anywhere in an enclosing loop.
    A check in another function of the same graph is not seen (documented).
    """
    func = next((a for a in ancestors if isinstance(a, cst.FunctionDef)), None)
    if func is None:
        return None
    loops = [a for a in ancestors[:ancestors.index(func)] if isinstance(a, (cst.For, cst.While))]
    if loops:  # the outermost enclosing loop runs its body again after stmt: all of it counts
        found = _checks_in(loops[-1], stmt, after_only=False)
        if found:
            return found
    return _checks_in(func, stmt, after_only=True)


def _checks_in(root: cst.CSTNode, stmt: cst.CSTNode, after_only: bool) -> str | None:
    """The first run-time check in ``root`` (after ``stmt`` when ``after_only``), in words."""
    state = {"after": not after_only, "found": None}

    def note(text: str) -> None:
        if state["after"] and state["found"] is None:
            state["found"] = text

    class Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is stmt:
                state["after"] = True
                return False
            nested = isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not root
            if state["found"] is not None or nested:
                return False
            return super().on_visit(node)  # dispatches to the visit_* below

        def visit_Call(self, node: cst.Call) -> None:
            name = _dotted(node.func)
            if name and _CHECK_CALLS.search(name):
                note(f"`{name}(...)`")

        def visit_Assert(self, node: cst.Assert) -> None:
            # Dynamo turns an `assert` on a tensor into torch._assert_async in the graph; one
            # on sizes and host values is decided while it traces (measured on torch 2.13)
            if not _host_decided(node.test):
                note("an `assert`")

        def visit_If(self, node: cst.If) -> None:
            calls = [c for c in m.findall(node.test, m.Call()) if (_dotted(c.func) or "") not in _HOST_BUILTINS
                     and not (isinstance(c.func, cst.Attribute) and c.func.attr.value in _SHAPE_METHODS)]
            if calls and m.findall(node.body, m.Raise()):
                note(f"`if {_code(node.test).strip()[:60]}: raise ...`")

    root.visit(Walk())
    return state["found"]


# attributes of a tensor that Dynamo knows while it traces (guards, not kernels)
_HOST_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "layout"}
# builtins whose result is a host value whatever their arguments are
_HOST_RESULT = {"len", "isinstance", "issubclass", "hasattr", "callable", "type"}


def _host_decided(expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` is decided while Dynamo traces, never by a kernel: built only from
    literals, ``None``/``True``/``False``, tensor sizes (``x.size()[0]``, ``x.shape[-1]``,
    ``x.dim()``), host builtins (``len``, ``isinstance``) and identity tests (``is None``),
    combined by comparisons and operators. A bare name may be a tensor, so it is not:
    the test is then counted as a check (conservative: the call stays ordered)."""
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.Name):
        return expr.value in ("None", "True", "False")
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in _HOST_ATTRS
    if isinstance(expr, cst.Call):
        func = expr.func
        return ((isinstance(func, cst.Attribute) and func.attr.value in _SHAPE_METHODS)
                or (_dotted(func) or "") in _HOST_RESULT)
    if isinstance(expr, cst.Subscript):
        return _host_decided(expr.value)
    if isinstance(expr, cst.Comparison):
        if all(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in expr.comparisons):
            return True  # identity of Python objects, whatever they are
        return _host_decided(expr.left) and all(_host_decided(t.comparator) for t in expr.comparisons)
    if isinstance(expr, cst.BooleanOperation):
        return _host_decided(expr.left) and _host_decided(expr.right)
    if isinstance(expr, cst.BinaryOperation):
        return _host_decided(expr.left) and _host_decided(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _host_decided(expr.expression)
    if isinstance(expr, (cst.Tuple, cst.List)):
        return all(isinstance(e, cst.Element) and _host_decided(e.value) for e in expr.elements)
    return False


def _scope_decline(ancestors: list[cst.CSTNode]) -> str | None:
    for anc in ancestors:
        if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
            return None
        if isinstance(anc, (cst.Try, cst.TryStar)):
            return ("the call sits in a `try` block: an error it raises (e.g. under the warnings filter "
                    "\"error\") would no longer be caught there once deferred")
        if isinstance(anc, cst.With):
            for item in anc.items:
                ctx = item.item.func if isinstance(item.item, cst.Call) else item.item
                name = _dotted(ctx) or _code(ctx)
                if not name.startswith(_TORCH_CONTEXTS):
                    return (f"the call sits in `with {_code(item.item)}`: the context (warning filters, "
                            "redirected streams...) ends before the deferred effect is replayed")
        if isinstance(anc, cst.ClassDef):
            break
    return "the call is not inside a function: it runs when the file is imported, not in a compiled region"


def _args_decline(plan: _Plan, bound: dict[str, list[str]]) -> str | None:
    call = plan.call
    keywords = [a.keyword.value for a in call.args if a.keyword is not None]
    if any(a.star == "**" for a in call.args):
        return f"keyword arguments of `{plan.callee}(...)` are unpacked (`**`), so they cannot be checked"
    if plan.kind == "print":
        unknown = set(keywords) - _PRINT_KEYWORDS
        if unknown:
            return f"print() gets unknown keywords {sorted(unknown)}"
        for a in call.args:
            if a.keyword is not None and a.keyword.value == "file":
                target = _dotted(a.value)
                std = target in ("sys.stdout", "sys.stderr") and _imports_module(bound, "sys", "sys")
                if not (std or (isinstance(a.value, cst.Name) and a.value.value == "None")):
                    return (f"print(..., file={_code(a.value)}) writes to a stream other than sys.stdout/sys.stderr; "
                            "deferring it could reorder it against other writes to that stream")
    elif plan.kind == "warn":
        unknown = set(keywords) - _WARN_KEYWORDS
        if unknown:
            return f"warnings.warn() gets keywords the runtime does not replay: {sorted(unknown)}"
        if sum(1 for a in call.args if a.keyword is None) > 4:
            return "warnings.warn() gets more than four positional arguments"
        positional = [a for a in call.args if a.keyword is None]
        named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        level = named.get("stacklevel") or (positional[2].value if len(positional) > 2 else None)
        if level is not None and not (isinstance(level, cst.Integer) and level.evaluated_value == 1):
            # the replay reconstructs the frame `stacklevel` names from the traced stack, which
            # omits torch.nn's call frames (`_call_impl`): it could name another line, and the
            # default filter's once-per-location show it a different number of times (an
            # adversarial review: a Block used twice printed its warning twice)
            return (f"warnings.warn(..., stacklevel={_code(level).strip()}) names a caller's frame, which the "
                    "replay cannot reproduce exactly (torch.nn's call frames are not in the traced stack): the "
                    "warning's location, and how often the default filter shows it, could differ")
    else:
        if "ordered" in keywords:
            return f"`{plan.callee}` gets a keyword `ordered`, which the runtime's defer_log takes for itself"
        if plan.method == "exception" or {"exc_info", "stack_info"} & set(keywords):
            return (f"`{plan.callee}` records the exception or stack current at the call "
                    "(exception/exc_info/stack_info), which is gone when the call is replayed")
    for a in call.args:
        reason = _effect_in(a.value)
        if reason:
            return f"the argument `{_code(a.value).strip()}` {reason}; deferral would not remove that"
    return None


# calls a later argument may make after a formatted one: builtins and tensor methods that never
# write their receiver or arguments (a `self.` method, a module, anything else may: declined)
_PURE_LATER = {"len", "str", "repr", "float", "int", "round", "abs", "min", "max", "bool", "tuple", "format"}
_PURE_METHODS = {"sum", "mean", "max", "min", "amax", "amin", "abs", "norm", "std", "var", "any", "all", "argmax",
                 "argmin", "float", "double", "half", "detach", "clone", "item", "tolist", "size", "dim", "numel",
                 "view", "reshape", "flatten", "to", "cpu", "exp", "log", "softmax", "count_nonzero", "format"}


def lazy_args(call: cst.Call, alias: str, bound) -> tuple[list[cst.Arg], list[str], list[str]] | Decline:
    """``call``'s arguments with each format made lazy (:func:`_lazy`) and each whole ``.item()``
    / ``.tolist()`` deferred (:func:`_lazy_items`), the lazy formats' code and the deferred reads'
    texts (for the obligations); the decline of either, or of :func:`_later_writer`."""
    args, lazies, items, formatted = [], [], [], []
    for a in call.args:
        lazy = _lazy(a.value, alias, bound, keyword=a.keyword is not None) if a.star == "" else None
        if isinstance(lazy, Decline):
            return lazy
        formatted.append(lazy is not None)
        new = _lazy_items(lazy if lazy is not None else a.value, alias, bound)
        if isinstance(new, Decline):
            return new
        value, read = new
        items += read
        if lazy is not None:
            lazies.append(_code(value))
        args.append(a.with_changes(value=value) if lazy is not None or read else a)
    writer = _later_writer(list(call.args), formatted)
    return writer if writer is not None else (args, lazies, items)


def _later_writer(args: list[cst.Arg], lazy: list[bool]) -> Decline | None:
    """The decline when an argument after a formatted one (an f-string, ``%``, ``.format``,
    ``str``/``repr``: ``lazy``) makes a call that could write a tensor the format reads: the
    original formatted its text before that call ran, the deferred format reads the values
    after it (helper-101: ``print("h %s" % (h,), self.renorm(h))``, ``renorm`` clamping ``h``
    in place on its 500th call only). A plain tensor argument is read after every argument
    ran in both, so only formatted ones count."""
    if True not in lazy:
        return None
    for a in args[lazy.index(True) + 1:]:
        for call in m.findall(a.value, m.Call()):
            func = call.func
            name = func.value if isinstance(func, cst.Name) else None
            method = func.attr.value if isinstance(func, cst.Attribute) else None
            ok = name in _PURE_LATER or (method in _PURE_METHODS and not m.matches(func.value, m.Name("self")))
            if not ok:
                return Decline(NAME, f"`{_code(call).strip()}` runs after a formatted argument of the same call and "
                                     "could write a tensor that argument formats (a method of the module, a "
                                     "submodule, an in-place op): the original formatted the text before it ran, a "
                                     "deferred format would read the values after it")
    return None


def _effect_in(expr: cst.BaseExpression) -> str | None:
    """Why evaluating ``expr`` has a side effect or a break of its own, else None."""
    if m.findall(expr, m.NamedExpr() | m.Yield() | m.Await()):
        return "binds or yields (`:=`, `yield`, `await`)"
    for call in m.findall(expr, m.Call()):
        func = call.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr in ("item", "tolist") and not call.args:
                continue   # deferred as item(t) / item(t, tolist) where it is a whole argument or field
                #            (_lazy_items), else declined
            if attr in _HOST_READS:
                return f"reads a tensor value on the host (`.{attr}()`), a graph break of its own"
            if attr in _MUTATORS or (attr.endswith("_") and not attr.endswith("__") and not attr.startswith("_")):
                return f"has a side effect (`.{attr}(...)`)"
        elif isinstance(func, cst.Name) and func.value in _EFFECT_FUNCS:
            return f"has a side effect (`{func.value}(...)`)"
        if any(a.keyword is not None and a.keyword.value == "out" for a in call.args):
            return "writes into an `out=` tensor"
    return None


# --------------------------------------------------------------------------- lazy formatting


def _fmt_parts(node: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The string literals of an implicit concatenation, in order; None if one is not a str literal."""
    if isinstance(node, cst.ConcatenatedString):
        left, right = _fmt_parts(node.left), _fmt_parts(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, (cst.SimpleString, cst.FormattedString)):
        return [node]
    return None


def _template_of(part: cst.BaseExpression, exprs: list) -> str | Decline:
    """A ``str.format`` literal for one literal of an f-string expression (exprs collected)."""
    if isinstance(part, cst.SimpleString):
        prefix = part.prefix.lower()
        if "b" in prefix:
            return Decline(NAME, "a bytes literal is concatenated with an f-string")
        body = part.value[len(part.prefix) + len(part.quote):-len(part.quote)]
        if "r" not in prefix and _BRACE_ESCAPE.search(body):
            return Decline(NAME, "a string literal has an escape that produces a brace")
        return part.prefix + part.quote + body.replace("{", "{{").replace("}", "}}") + part.quote
    assert isinstance(part, cst.FormattedString)
    raw = "r" in part.prefix.lower()
    pieces = []
    for p in part.parts:
        if isinstance(p, cst.FormattedStringText):
            if not raw and _BRACE_ESCAPE.search(p.value):
                return Decline(NAME, "an f-string has an escape that produces a brace")
            pieces.append(p.value)
            continue
        if p.equal is not None:
            return Decline(NAME, "an f-string uses the `=` specifier (self-documenting expression)")
        spec = ""
        if p.format_spec:
            if not all(isinstance(s, cst.FormattedStringText) for s in p.format_spec):
                return Decline(NAME, "an f-string has a nested format spec (`{x:{w}}`)")
            spec = ":" + "".join(s.value for s in p.format_spec)
        conv = f"!{p.conversion}" if p.conversion else ""
        pieces.append("{" + conv + spec + "}")
        exprs.append(p.expression)
    start = part.start.replace("f", "").replace("F", "")
    return start + "".join(pieces) + part.end


def _read_call(node: cst.CSTNode, method: str) -> bool:
    """``E.<method>()`` (no arguments): ``E.item()``, ``E.tolist()``."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method \
        and not node.args


def _indexed_fields(template: cst.BaseExpression | None) -> bool:
    """Whether the format template (a string literal) has a field that indexes or reads an
    attribute (``{0[0]}``, ``{x.real}``); True when the template is not a literal."""
    import ast
    import string

    try:
        text = ast.literal_eval(_code(template)) if template is not None else None
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name]
    except (ValueError, SyntaxError, TypeError):
        return True
    return any("[" in f or "." in f for f in fields)


def _cast_call(node: cst.CSTNode, bound) -> str | None:
    """``float`` / ``int`` for a builtin ``float(E)`` / ``int(E)`` (one positional argument; the
    module does not bind the name), else None."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("float", "int") \
            and node.func.value not in bound and len(node.args) == 1 and node.args[0].keyword is None \
            and node.args[0].star == "":
        return node.func.value
    return None


def _lazy_items(value: cst.BaseExpression, alias: str, bound=frozenset()) \
        -> tuple[cst.BaseExpression, list[str]] | Decline:
    """``E.item()`` as a whole argument, or as a whole field of a lazy ``fmt(...)`` (an f-string's
    ``{E.item():.4f}``, a ``.format`` argument) -> ``item(E)``, and a builtin ``float(E)`` /
    ``int(E)`` there -> ``item(E, float)`` / ``item(E, int)``: the number is read at replay from
    the snapshot of ``E``, where the host read was the graph break. Returns the new argument and the
    rewritten ``E``s; a ``.item()`` left anywhere else (``round(E.item(), 3)``, ``E.item() * 100``)
    feeds Python code inside the arguments: declined."""
    item = cst.Attribute(cst.Name(alias), cst.Name("item"))
    done: list[str] = []

    def lazy(e: cst.BaseExpression) -> cst.BaseExpression:
        cast = _cast_call(e, bound)
        if cast is not None:   # float(t) / int(t): t's number, converted at replay
            done.append(f"{cast}({_code(e.args[0].value).strip()})")
            return cst.Call(item, [cst.Arg(e.args[0].value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                   cst.Arg(cst.Name(cast))])
        if _read_call(e, "tolist"):   # t.tolist(): the nested list, read from the snapshot at replay
            done.append(_code(e).strip())
            return cst.Call(item, [cst.Arg(e.func.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                                   cst.Arg(cst.Attribute(cst.Name(alias), cst.Name("tolist")))])
        if not _read_call(e, "item"):
            return e
        done.append(_code(e.func.value).strip())
        return cst.Call(item, [cst.Arg(e.func.value)])

    out = lazy(value)
    if out is value and isinstance(value, cst.Call) and m.matches(value.func, m.Attribute(
            value=m.Name(alias), attr=m.Name("fmt"))):
        out = value.with_changes(args=[a if i == 0 else a.with_changes(value=lazy(a.value))
                                       for i, a in enumerate(value.args)])
        if any(d.endswith(".tolist()") for d in done) and _indexed_fields(value.args[0].value if value.args else None):
            # helper-99: `"{0[0]}".format(t.tolist())` raises IndexError on an empty list, which only
            # the values decide: at replay, after the rest of the graph ran, where the original raised first
            return Decline(NAME, "a format field indexes into or reads an attribute of `t.tolist()` (`{0[0]}`), "
                                 "which raises or not by the tensor's values: deferred, it would raise only at replay, "
                                 "after the code that followed the call had run")
    left = m.findall(out, m.Call(func=m.Attribute(attr=m.Name("item") | m.Name("tolist")), args=[]))
    if left:
        return Decline(NAME, f"`{_code(left[0]).strip()}` reads a tensor on the host inside the call's arguments "
                             "for Python code to use; only `t.item()` or `t.tolist()` as a whole argument, or as a "
                             "whole f-string or format field, is deferred (read from the snapshot at replay)")
    return out, done


def _lazy(value: cst.BaseExpression, alias: str, bound: frozenset | set = frozenset(), keyword: bool = False) \
        -> cst.BaseExpression | Decline | None:
    """``fmt(template, *values)`` for an f-string / ``"...".format(...)`` argument,
    ``pct(template, values)`` for a positional ``"..." % values`` one, or for a
    builtin ``repr(x)`` / ``str(x)`` positional argument (``fmt("{!r}", x)``: what
    ``f"{x!r}"`` is; the module binds neither name: ``bound``; a keyword argument such as
    ``sep=str(x)`` must stay a ``str``), else None."""
    fmt = cst.Attribute(cst.Name(alias), cst.Name("fmt"))
    if (not keyword and isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("repr", "str")
            and value.func.value not in bound and len(value.args) == 1 and value.args[0].keyword is None
            and value.args[0].star == ""):
        conv = "r" if value.func.value == "repr" else "s"
        return cst.Call(fmt, [cst.Arg(cst.SimpleString(f'"{{!{conv}}}"'),
                                      comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                              cst.Arg(value.args[0].value)])
    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "format"
            and isinstance(value.func.value, (cst.SimpleString, cst.ConcatenatedString))
            and not m.findall(value.func.value, m.FormattedString())):
        template = value.func.value
        return cst.Call(fmt, [cst.Arg(template, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                              *value.args] if value.args else [cst.Arg(template)],
                        whitespace_before_args=value.whitespace_before_args)
    literals = _fmt_parts(value.left) if isinstance(value, cst.BinaryOperation) else None
    if (literals and isinstance(value.operator, cst.Modulo) and not keyword
            and all(isinstance(p, cst.SimpleString) and "b" not in p.prefix.lower() for p in literals)):
        # `"step %d loss %s" % (n, loss)` -> pct(template, values): a lazy Fmt (mend.lazy.pct)
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return cst.Call(cst.Attribute(cst.Name(alias), cst.Name("pct")),
                        [cst.Arg(value.left, comma=comma), cst.Arg(value.right)])
    parts = _fmt_parts(value)
    if parts is None or not any(isinstance(p, cst.FormattedString) for p in parts):
        return None
    exprs: list = []
    texts = []
    for p in parts:
        t = _template_of(p, exprs)
        if isinstance(t, Decline):
            return t
        texts.append(t)
    # keep the layout of an implicit concatenation: replace each literal in place
    it = iter(texts)

    class _Swap(cst.CSTTransformer):
        def leave_SimpleString(self, original, updated):
            return cst.SimpleString(next(it))

        def leave_FormattedString(self, original, updated):
            return cst.SimpleString(next(it))

    template = value.visit(_Swap()) if isinstance(value, cst.ConcatenatedString) else cst.SimpleString(texts[0])
    args = [cst.Arg(template)] + [cst.Arg(e) for e in exprs]
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [a.with_changes(comma=comma) for a in args[:-1]] + [args[-1]]
    return cst.Call(fmt, args)


# --------------------------------------------------------------------------- rewriting


def level_guard(header: list[cst.CSTNode]) -> Decline | None:
    """The decline for ``if logger.isEnabledFor(LEVEL):`` (the level read on the host is the
    break), else None."""
    level = next((c for h in header for c in m.findall(h, m.Call(func=m.Attribute(
        attr=m.Name("isEnabledFor") | m.Name("getEffectiveLevel"))))), None)
    if level is None:
        return None
    return Decline(NAME, f"`{_code(level).strip()}` reads the logger's level on the host (Dynamo cannot trace it), "
                   "and the branch on it decides whether the log call's arguments are evaluated at all: mend does "
                   "not drop the guard (unguarded, the arguments would be evaluated, and could raise, with the level "
                   "off); by hand, where they are cheap and cannot raise, drop the `if` (the logger method checks the "
                   "level itself) and mend defers the call")


def match(loc: Located) -> Match | Decline:
    """A bare ``print``/logger/``warnings.warn`` statement the rewrite accepts is deferrable.

    Works from the located statement (no position metadata: fast on large files).
    """
    node = loc.node
    header = header_parts(node)   # a compound statement's body holds other sites (a probe's reason named one)
    level = level_guard(header)
    if level is not None:
        return level
    if isinstance(node, cst.If):   # `if <tensor test>: <one deferrable call>` (conditional.py)
        from mend.rules.deferred_side_effects.rewrite import rewrite
        from mend.rules.deferred_side_effects.conditional import conditional_site

        if conditional_site((node, list(loc.ancestors))) is None:
            # another rule's reason says more about this branch: this one ranks last (rules.match_site)
            return Decline(None, f"no print/logger/warnings.warn call on line {loc.line}")
        result = rewrite(loc.module, loc.line)
        return result if isinstance(result, Decline) else Match(NAME, result.detail)
    calls = [c for h in header for c in m.findall(h, m.Call()) if _kind(c) is not None]
    if not calls:
        return Decline(None, f"no print/logger/warnings.warn call on line {loc.line}")  # ranks last: another rule says more
    if not (isinstance(node, cst.Expr) and any(node.value is c for c in calls)):
        return Decline(NAME, _used(calls[0]))
    call = node.value
    ancestors = [node, *reversed(loc.ancestors)]
    plan = _screen(call, ancestors, _bindings(loc.module).bound)
    if isinstance(plan, Decline):
        return plan
    lazy = lazy_args(call, ALIAS, _bindings(loc.module).bound)   # formats or `.item()` the rewrite would decline
    if isinstance(lazy, Decline):
        return lazy
    return Match(NAME, f"defer `{plan.callee}(...)` to after the compiled call (mend.runtime)")

