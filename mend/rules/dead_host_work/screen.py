"""dead-host-work: which sites the rule takes, why it declines the others, and :func:`match`,
a scan's verdict on a located site.

Two shapes are rewritten: ``torch.jit.isinstance(obj, T)`` with ``T`` a known plain class (or
a tuple of them), and ``r = repr(t)`` / ``r = str(t)`` whose local ``r`` is never read. Two
are declined with their reason: a NumPy/Python RNG draw (LayerDrop) and
``inspect.Signature.bind`` (transformers' ``select_hidden_states``)."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.locate import Located, header_parts
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted, find_all, FORCING_HOOK, torch_aliases

NAME = "dead-host-work"

# builtins and torch classes whose class object is a plain type: not generic (no
# typing.get_origin), not a raw container torch.jit.isinstance rejects (list, dict, tuple),
# and no metaclass making the class a collections.abc.Container (an Enum class is one)
PLAIN_BUILTINS = frozenset({"int", "float", "bool", "str", "bytes", "complex"})
PLAIN_TORCH = frozenset({"torch.Tensor", "torch.nn.Module", "torch.nn.Parameter", "torch.device", "torch.dtype",
                         "torch.Size", "torch.Generator"})
RAW_CONTAINERS = frozenset({"list", "dict", "tuple", "set", "List", "Dict", "Tuple", "Optional", "Union",
                            "typing.List", "typing.Dict", "typing.Tuple", "typing.Optional", "typing.Union"})
REPR_CALLS = ("repr", "str")
FRAME_READERS = frozenset({"locals", "vars", "eval", "exec", "dir", "sys._getframe", "inspect.currentframe"})
RNG_PREFIXES = ("np.random.", "numpy.random.", "random.")

WHY_RNG = ("the statement draws from the global NumPy/Python random stream (a LayerDrop written with "
           "`np.random`/`random`); drawing only when `self.training` would leave the stream one draw behind per "
           "call in eval, which every later consumer of that stream observes (shared case 047: not fixable "
           "without changing the random stream); write the draw as `if self.training: p = torch.rand([])` by hand")
WHY_BIND = ("`inspect.Signature.bind` breaks inside the standard library's inspect.py (it iterates the "
            "signature's parameter mappingproxy, which Dynamo refuses after any dict mutation earlier in the trace) "
            "and no calling line outside the standard library was located; the rule rewrites the caller's "
            "`signature.bind(...)` line, where bind raises its own TypeError for an invalid call")


@dataclass
class Plan:
    kind: str                                # "jit-isinstance" | "unused-repr" | "debug-text" | ...
    stmt: cst.CSTNode                        # the statement at the site
    line_stmt: cst.CSTNode                   # what the rewrite replaces (statement line / compound)
    torch_name: str
    calls: list = None                       # jit-isinstance: (call, canonical target text)
    name: str | None = None                  # unused-repr: the local assigned
    arg: str | None = None                   # unused-repr: the tensor's local name
    func: str | None = None                  # unused-repr: repr | str
    function: cst.FunctionDef | None = None
    bind: dict | None = None                 # signature-bind: the nodes the rewrite replaces
    flag_if: cst.If | None = None            # debug-text: the `if` right after, the only reader




def _imports_torch(module: cst.Module | None) -> bool:
    for imp in find_all(module, m.Import()) if module is not None else ():
        if any(dotted(a.name) == "torch" for a in imp.names):
            return True
    return False


def bound_names(node: cst.CSTNode) -> set[str]:
    """Every name bound anywhere in ``node``: assignment targets, imports, defs, classes,
    parameters, ``for``/``with``/``except`` targets, walrus, comprehension targets."""
    out: set[str] = set()

    def add(t):
        if isinstance(t, cst.Name):
            out.add(t.value)
        elif isinstance(t, (cst.Tuple, cst.List)):
            for el in t.elements:
                add(el.value)
        elif isinstance(t, cst.StarredElement):
            add(t.value)

    for target in m.findall(node, m.AssignTarget() | m.AnnAssign() | m.AugAssign() | m.For() | m.CompFor()
                            | m.NamedExpr()):
        add(target.target)
    for asname in m.findall(node, m.AsName()):
        add(asname.name)
    for d in m.findall(node, m.FunctionDef() | m.ClassDef()):
        out.add(d.name.value)
    for p in m.findall(node, m.Param()):
        out.add(p.name.value)
    for alias in m.findall(node, m.ImportAlias()):
        if alias.asname is None:
            out.add((dotted(alias.name) or "").split(".")[0])
    for g in m.findall(node, m.Global() | m.Nonlocal()):
        out.update(n.name.value for n in g.names)
    return out


def _from_torch_import(name: str, module: cst.Module) -> str | None:
    """``torch.Tensor`` for a ``name`` bound by exactly one ``from torch import Tensor`` (or
    ``from torch.nn import Module as name``) and by nothing else in the module, else None."""
    found = []
    for imp in find_all(module, m.Import() | m.ImportFrom()):
        if isinstance(imp, cst.ImportFrom) and (imp.relative or isinstance(imp.names, cst.ImportStar)):
            found.append("?")    # a relative or star import may bind it
            continue
        for alias in imp.names:
            local = alias.asname.name.value if alias.asname else (dotted(alias.name) or "").split(".")[0]
            if local == name:
                found.append(f"{dotted(imp.module)}.{dotted(alias.name)}" if isinstance(imp, cst.ImportFrom)
                             else "?")
    if len(found) != 1 or not found[0].startswith("torch.") or _rebinds(name, module):
        return None
    return found[0]


def _rebinds(name: str, module: cst.Module) -> bool:
    """Whether ``name`` is bound in ``module`` other than by an import."""
    no_imports = module.visit(_DropImports())
    return name in bound_names(no_imports)


class _DropImports(cst.CSTTransformer):
    def leave_Import(self, original, updated):
        return cst.RemoveFromParent()

    def leave_ImportFrom(self, original, updated):
        return cst.RemoveFromParent()


def _jit_calls(node: cst.CSTNode, aliases: set[str]) -> list[cst.Call]:
    out = []
    for part in header_parts(node):
        for call in m.findall(part, m.Call()):
            name = dotted(call.func) or ""
            root, _, rest = name.partition(".")
            if root in aliases and rest == "jit.isinstance":
                out.append(call)
    return out


def canonical_target(expr: cst.BaseExpression, aliases: set[str], module: cst.Module) -> tuple[str | None, str]:
    """The target as canonical text (``torch.Tensor``, ``(int, float)``), or None and why."""
    if isinstance(expr, cst.Tuple):
        parts = []
        for el in expr.elements:
            if isinstance(el, cst.StarredElement):
                return None, "a starred element in the target tuple"
            text, why = canonical_target(el.value, aliases, module)
            if text is None:
                return None, why
            parts.append(text)
        if not parts:
            return None, "an empty target tuple"
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")", ""
    if isinstance(expr, cst.Subscript):
        return None, (f"the target `{code_of(expr).strip()}` is a typing generic: torch.jit.isinstance checks its "
                      "element types (container_checker) and first compares the object with [], {} and () to warn "
                      "about an empty container (a tensor there raises); the rule does not rebuild that (by hand, "
                      "for a value known to be a non-empty tuple: `isinstance(o, tuple) and len(o) == 2 and "
                      "all(isinstance(t, torch.Tensor) for t in o)`)")
    name = dotted(expr)
    if name is None:
        return None, f"the target `{code_of(expr).strip()}` is not a class name"
    root, _, rest = name.partition(".")
    if name in RAW_CONTAINERS:
        return None, (f"the target `{name}` is a container type: torch.jit.isinstance raises for a raw "
                      "container and checks element types for a parameterized one; builtin isinstance does neither")
    if root in aliases and "torch." + rest in PLAIN_TORCH:
        return "torch." + rest, ""
    if name in PLAIN_BUILTINS:
        if name in bound_names(module):
            return None, f"the name `{name}` is rebound in this module"
        return name, ""
    imported = _from_torch_import(name, module)
    if imported in PLAIN_TORCH:   # `from torch import Tensor`, bound by that import alone
        return imported, ""
    return None, (f"the target `{name}` is not a known plain class (a builtin scalar type or a torch class): "
                  "torch.jit.isinstance raises for a class whose metaclass makes it a container (an Enum) and "
                  "checks element types of a typing alias, which a static screen cannot rule out for `{name}`"
                  ).replace("{name}", name)


def _function(ancestors: list[cst.CSTNode]) -> cst.FunctionDef | None:
    return next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)


# what reads a frame's locals by name from elsewhere in the module (a helper the forward calls:
# `sys._getframe(1).f_locals`, helper-70); a callee in another module stays an assumption
FRAME_ATTRS = frozenset({"_getframe", "currentframe", "f_locals", "f_back", "tb_frame", "gi_frame", "cr_frame",
                         "ag_frame", "getouterframes", "getinnerframes"})
INTROSPECTION = frozenset({"locals", "vars", "eval", "exec", "__builtins__"})


def module_frame_reader(module: cst.Module) -> str | None:
    """Where the module names a frame attribute (or ``inspect.stack``/``inspect.trace``, under
    any name inspect is imported as), imports one by name, or names an introspection builtin
    (``grab = locals`` too), else None."""
    attr_names = {id(a.attr) for a in find_all(module, m.Attribute())}
    inspect_names = {(a.asname.name.value if a.asname is not None else "inspect")
                     for imp in find_all(module, m.Import()) for a in imp.names
                     if dotted(a.name) == "inspect" and (a.asname is None or isinstance(a.asname.name, cst.Name))}
    for node in find_all(module, m.Attribute() | m.Name() | m.ImportFrom()):
        if isinstance(node, cst.Attribute) and (node.attr.value in FRAME_ATTRS or node.attr.value in (
                "stack", "trace") and dotted(node.value) in inspect_names):
            return f"`.{node.attr.value}`"
        if isinstance(node, cst.Name) and node.value in INTROSPECTION and id(node) not in attr_names:
            return f"`{node.value}`"
        if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
            inspect_ = (dotted(node.module) or "") == "inspect"
            if any(isinstance(a.name, cst.Name) and (a.name.value in FRAME_ATTRS or inspect_ and a.name.value in (
                    "stack", "trace")) for a in node.names):
                return f"an import from {dotted(node.module)}"
    return None


def reads_of(function: cst.FunctionDef, name: str, skip: cst.CSTNode) -> list[str]:
    """Why ``name`` may be read in ``function`` (outside ``skip``): a load, a ``del``, a
    ``global``/``nonlocal``, ``locals()``/``vars()``/``eval``/``exec``/``dir()``."""
    out = []

    class V(cst.CSTVisitor):
        def __init__(self):
            self.store: set[int] = set()

        def on_visit(self, node):
            if node is skip:
                return False
            if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                self.store.add(id(node.target))      # a plain rebinding does not read
            if isinstance(node, cst.Param):
                self.store.add(id(node.name))
            if isinstance(node, cst.Attribute):
                self.store.add(id(node.attr))        # `x.r` is an attribute, not the local
            if isinstance(node, cst.Arg) and node.keyword is not None:
                self.store.add(id(node.keyword))     # `f(r=...)` names a parameter
            if isinstance(node, cst.Name) and node.value == name and id(node) not in self.store:
                out.append(f"`{name}` is read")
            if isinstance(node, cst.Call) and dotted(node.func) in FRAME_READERS:
                out.append(f"`{dotted(node.func)}()` can read every local")
            if isinstance(node, (cst.Global, cst.Nonlocal)) and any(n.name.value == name for n in node.names):
                out.append(f"`{name}` is declared global/nonlocal")
            return True

    function.visit(V())
    return out


def _rng_call(node: cst.CSTNode) -> str | None:
    for call in m.findall(node, m.Call()):
        name = dotted(call.func) or ""
        if name.startswith(RNG_PREFIXES):
            return name
    return None


def _signature_bind(node: cst.CSTNode, ancestors: list[cst.CSTNode] = ()) -> bool:
    """A ``<signature>.bind(...)`` / ``inspect.signature(f).bind(...)`` call in the statement:
    the receiver's name says so, or an enclosing function binds it to ``inspect.signature(...)``
    (``sig = inspect.signature(func)``: an adversarial helper's decorator)."""
    made = {t.target.value for f in ancestors if isinstance(f, cst.FunctionDef)
            for a in m.findall(f, m.Assign(value=m.Call(func=m.Attribute(attr=m.Name("signature")) | m.Name("signature"))))
            for t in a.targets if isinstance(t.target, cst.Name)}
    for call in m.findall(node, m.Call(func=m.Attribute(attr=m.Name("bind") | m.Name("bind_partial")))):
        recv = call.func.value
        if isinstance(recv, cst.Call):
            recv = recv.func
        if "signature" in (dotted(recv) or "").lower() or (isinstance(recv, cst.Name) and recv.value in made):
            return True
    return False


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    aliases = torch_aliases(module)
    parent = ancestors[-1] if ancestors else None
    calls = _jit_calls(node, aliases)
    if calls:
        if "isinstance" in bound_names(module):
            return Decline(NAME, "the name `isinstance` is rebound in this module")
        planned = []
        for call in calls:
            args = list(call.args)
            if len(args) != 2 or any(a.keyword is not None or a.star for a in args):
                return Decline(NAME, "torch.jit.isinstance is not called with two positional arguments")
            text, why = canonical_target(args[1].value, aliases, module)
            if text is None:
                return Decline(NAME, why)
            planned.append((call, text))
        line_stmt = parent if isinstance(node, cst.BaseSmallStatement) else node
        return Plan("jit-isinstance", node, line_stmt, sorted(aliases)[0], calls=planned)
    if isinstance(node, cst.BaseSmallStatement) and _rng_call(node) is not None:
        return Decline(NAME, WHY_RNG)
    if isinstance(node, cst.BaseSmallStatement) and _signature_bind(node, ancestors):
        return screen_bind(node, ancestors, module)
    if isinstance(node, cst.Assign) or isinstance(node, cst.AnnAssign):
        value = node.value
        if isinstance(value, cst.Call) and dotted(value.func) in REPR_CALLS:
            return _screen_repr(node, value, ancestors, module, aliases)
        if isinstance(value, cst.FormattedString):
            return _screen_repr(node, value, ancestors, module, aliases)
    return Decline(NAME, "the statement is neither `torch.jit.isinstance(...)` nor an unused `repr`/`str` of a "
                   "tensor")


def fstring_repr(value: cst.FormattedString) -> tuple[str, str] | str:
    """``(tensor name, "repr" | "str")`` for an f-string whose every field is ``{t!r}`` or
    ``{t!s}`` of one plain local ``t``, with no format spec and no ``=`` (``f"{t!r}"`` is
    ``repr(t)``: a str formatted with an empty spec is itself; ``!s`` calls ``str``), else why
    not. ``{t}`` alone calls ``Tensor.__format__`` (``.item()`` for a 0-d tensor), and Dynamo
    traces it (no break); a format spec can raise (helper-68's c29: ``msg = f"{h!r}"``)."""
    names, convs = set(), set()
    for part in value.parts:
        if isinstance(part, cst.FormattedStringText):
            continue
        if not isinstance(part.expression, cst.Name) or part.conversion not in ("r", "s") \
                or part.format_spec is not None or part.equal is not None:
            return ("a field of the f-string is not `{t!r}` or `{t!s}` of one plain local name (a format spec "
                    "can raise; another object's formatting may have effects)")
        names.add(part.expression.value)
        convs.add(part.conversion)
    if len(names) != 1:
        return "the f-string formats no tensor, or more than one name"
    return names.pop(), ("str" if "s" in convs else "repr")


# a field of a debug text over one tensor local `t` whose formatting is pure and cannot raise
# for a plain strided tensor of a reviewed dtype: the text of repr/str, torch.Size, dtype, device
# and ints (helper-92's c30: `msg = f"out: {repr(h)} shape={tuple(h.shape)}"`)
_TEXT_ATTRS = ("shape", "dtype", "device", "ndim")
_TEXT_METHODS = ("size", "dim", "numel")


def _text_field(expr: cst.BaseExpression) -> str | None:
    """The tensor local a debug-text field reads (``repr(t)``, ``str(t)``, ``t.shape``,
    ``tuple(t.shape)``, ``list(t.shape)``, ``t.dtype``, ``t.device``, ``t.ndim``, ``t.size()``,
    ``t.dim()``, ``t.numel()``), else None."""
    if isinstance(expr, cst.Call) and not any(a.keyword or a.star for a in expr.args):
        func, args = expr.func, [a.value for a in expr.args]
        if isinstance(func, cst.Name) and func.value in ("repr", "str") and len(args) == 1 \
                and isinstance(args[0], cst.Name):
            return args[0].value
        if isinstance(func, cst.Name) and func.value in ("tuple", "list") and len(args) == 1 \
                and m.matches(args[0], m.Attribute(value=m.Name(), attr=m.Name("shape"))):
            return args[0].value.value
        if not args and m.matches(func, m.Attribute(value=m.Name())) and func.attr.value in _TEXT_METHODS:
            return func.value.value
        return None
    if m.matches(expr, m.Attribute(value=m.Name())) and expr.attr.value in _TEXT_ATTRS:
        return expr.value.value
    return None


def debug_text(value: cst.BaseExpression) -> str:
    """The one tensor local a debug text formats (``repr(t)``/``str(t)``, or an f-string whose
    fields are ``{t!r}``/``{t!s}`` or :func:`_text_field`'s, no format spec, no ``=``), or
    raises ValueError saying why not."""
    if isinstance(value, cst.Call):
        name = _text_field(value)
        if name is None or dotted(value.func) not in REPR_CALLS:
            raise ValueError("the value is not `repr(t)`/`str(t)` of one plain local name")
        return name
    if not isinstance(value, cst.FormattedString):
        raise ValueError("the value is not a repr/str or an f-string")
    names = set()
    for part in value.parts:
        if isinstance(part, cst.FormattedStringText):
            continue
        if part.format_spec is not None or part.equal is not None:
            raise ValueError("a field of the f-string has a format spec or `=` (a format spec can raise)")
        expr = part.expression
        name = expr.value if isinstance(expr, cst.Name) and part.conversion in ("r", "s") else _text_field(expr)
        if name is None:
            raise ValueError(f"the f-string's field `{code_of(expr).strip()}` is not `{{t!r}}`, `repr(t)`, "
                             "`str(t)`, `t.shape`, `tuple(t.shape)`, `t.dtype`, `t.device`, `t.size()`, `t.dim()` "
                             "or `t.numel()` of one tensor local (another object's formatting may have effects "
                             "or raise)")
        names.add(name)
    if len(names) != 1:
        raise ValueError("the f-string formats no tensor, or more than one name")
    return names.pop()


def plain_flag(test: cst.BaseExpression) -> bool:
    """A flag test: a name or an attribute chain (``self.debug``), or ``not``/``and``/``or`` of
    them: no call, no subscript, nothing that computes on a tensor. (In the verifier's
    instrumented copy, the test inside its ``__mend_force__(test, key)``.)"""
    if isinstance(test, cst.Call) and code_of(test).startswith(FORCING_HOOK) and len(test.args) == 2:
        return plain_flag(test.args[0].value)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return plain_flag(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return plain_flag(test.left) and plain_flag(test.right)
    return dotted(test) is not None


def _effectful_flag(test: cst.BaseExpression, ancestors: list[cst.CSTNode]) -> str | None:
    """Where reading the flag may run code: an attribute that a class of the module defines as a
    method, property or other non-literal class-level value (a descriptor), or a class of the module that
    defines ``__getattr__``/``__getattribute__``; None for plain instance attributes and names. A
    class in another module is an assumption (the verifier records it)."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    attrs = {n.attr.value for n in m.findall(test, m.Attribute())}
    for cls in find_all(module, m.ClassDef()) if module is not None else ():
        for stmt in cls.body.body:
            # a literal class attribute (`debug = False`) reads plainly; a call may make a descriptor
            names = {stmt.name.value} if isinstance(stmt, cst.FunctionDef) else {
                t.target.value for s in getattr(stmt, "body", ()) if isinstance(s, cst.Assign)
                and not m.matches(s.value, m.Integer() | m.Float() | m.SimpleString() | m.Name("True")
                                  | m.Name("False") | m.Name("None"))
                for t in s.targets if isinstance(t.target, cst.Name)}
            if names & {"__getattr__", "__getattribute__"}:
                return f"`{cls.name.value}.{sorted(names)[0]}`, which any attribute read runs"
            if names & attrs:
                return f"`{sorted(names & attrs)[0]}`, which `{cls.name.value}` defines at class level"
    return None


def _next_statement(parent: cst.CSTNode, ancestors: list[cst.CSTNode]) -> cst.CSTNode | None:
    """The statement right after ``parent`` in its block, or None."""
    block = next((a for a in reversed(ancestors) if isinstance(a, (cst.IndentedBlock, cst.Module))), None)
    body = list(block.body) if block is not None else []
    i = next((i for i, st in enumerate(body) if st is parent), None)
    return body[i + 1] if i is not None and i + 1 < len(body) else None


def _screen_debug_text(node, parent, ancestors, function, target: str, reads: list[str]) -> Plan | Decline:
    """``t_text = <debug text of t>`` read only inside the ``if <flag>:`` right after it
    (helper-92's c30): the text moves under the flag for a plain tensor, or why not."""
    try:
        arg = debug_text(node.value)
    except ValueError as exc:
        return Decline(NAME, f"{reads[0]} in `{function.name.value}`, and the text cannot move to where it is "
                       f"read: {exc}")
    after = _next_statement(parent, ancestors[:-1])
    if not isinstance(after, cst.If) or not plain_flag(after.test):
        return Decline(NAME, f"{reads[0]} in `{function.name.value}`: the text is used, not dead, and the statement "
                       "after it is not `if <flag>:` (a name or attribute, or not/and/or of them) that could guard it")
    prop = _effectful_flag(after.test, ancestors)
    if prop:
        return Decline(NAME, f"the flag reads {prop}: its read may have effects (print options, state) that the text, "
                       "computed after it, would then see (helper-90)")
    outside = reads_of(function, target, after.body)
    if outside:
        return Decline(NAME, f"{outside[0]} outside the body of the `if` right after it in `{function.name.value}`: "
                       "the text is used where no flag guards it")
    if m.findall(after.body, m.Call(func=m.Name("locals") | m.Name("vars"))):
        return Decline(NAME, "the flag's body reads every local (`locals()`/`vars()`)")
    return Plan("debug-text", node, parent, "", name=target, arg=arg, func="text", function=function,
                flag_if=after)


def _screen_repr(node, value, ancestors, module, aliases) -> Plan | Decline:
    if isinstance(value, cst.FormattedString):
        found = fstring_repr(value)
        arg, func = found if not isinstance(found, str) else (None, "str")
        used = {func, "type"} if arg is not None else set()
    else:
        func = dotted(value.func)
        used = {func}
    if used & bound_names(module):
        func = sorted(used & bound_names(module))[0]
        return Decline(NAME, f"the name `{func}` is rebound in this module")
    if isinstance(node, cst.Assign) and (len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name)):
        return Decline(NAME, f"the `{func}(...)` result is not assigned to one plain local name")
    target = node.targets[0].target.value if isinstance(node, cst.Assign) else (
        node.target.value if isinstance(node.target, cst.Name) else None)
    if target is None:
        return Decline(NAME, f"the `{func}(...)` result is not assigned to one plain local name")
    if isinstance(value, cst.Call):
        args = list(value.args)
        if len(args) != 1 or args[0].keyword is not None or args[0].star or not isinstance(args[0].value, cst.Name):
            return Decline(NAME, f"the argument of `{func}` is not one plain local name (an attribute may be a "
                           "property, which the guard would read twice)")
        arg = args[0].value.value
    if isinstance(node, cst.AnnAssign):
        return Decline(NAME, "an annotated assignment")
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.SimpleStatementLine) or len(parent.body) != 1:
        return Decline(NAME, "the statement shares its line with other statements")
    function = _function(ancestors)
    if function is None:
        return Decline(NAME, "the statement is not inside a function")
    reads = reads_of(function, target, parent)
    plan = None
    if reads:
        plan = _screen_debug_text(node, parent, ancestors, function, target, reads)
        if isinstance(plan, Decline):
            return plan
        rebound = sorted({"repr", "str", "type", "tuple", "list"} & bound_names(module))
        if rebound:
            return Decline(NAME, f"the name `{rebound[0]}` is rebound in this module")
    elif arg is None:
        return Decline(NAME, found)
    if find_all(module, m.ImportFrom(names=m.ImportStar())):
        # helper-70: a star import rebound `type`, which the guard then called
        return Decline(NAME, "the module star-imports, which may rebind `type` or `torch`, both read by the guard")
    reader = module_frame_reader(module)
    if reader:
        return Decline(NAME, f"the module can read a caller's locals ({reader}): a helper reading "
                       f"`sys._getframe(1).f_locals` would see `{target}` (helper-70)")
    if not _imports_torch(module):
        return Decline(NAME, "the module does not import torch (the rewrite's guard names torch.Tensor)")
    if plan is not None:
        plan.torch_name = sorted(aliases)[0]
        return plan
    return Plan("unused-repr", node, parent, sorted(aliases)[0], name=target, arg=arg, func=func,
                function=function)


# what the signature-bind rewrite adds to the mended module (helpers, the sentinel, locals)
BIND_NAMES = ("_mend_bind_table", "_mend_bound", "_MEND_UNBOUND", "_mend_value")


def _only_statement(line: cst.CSTNode) -> cst.BaseSmallStatement | None:
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line.body[0]
    return None


def screen_bind(node: cst.CSTNode, ancestors: list[cst.CSTNode], module: cst.Module | None) -> Plan | Decline:
    """``A = S.bind(<args>)``; ``A.apply_defaults()``; a statement reading ``A.arguments[K]``
    once, with ``S = inspect.signature(F)`` in the enclosing function (the decorator's body,
    which runs once, where the signature is made). Anything else declines with the reason."""
    why = "inspect.Signature.bind is kept: "
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
        return Decline(NAME, why + "the bound arguments are not assigned to one local name")
    call, bound = node.value, node.targets[0].target.value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "bind"
            and isinstance(call.func.value, cst.Name)):
        return Decline(NAME, why + "the call is not `<signature>.bind(...)` on a name (bind_partial, or a "
                       "signature computed at the call)")
    sig = call.func.value.value
    positional, kwargs = [], None
    for a in call.args:
        if a.keyword is not None:
            return Decline(NAME, why + "bind is given a keyword argument")
        if a.star == "**":
            if kwargs is not None or not isinstance(a.value, cst.Name):
                return Decline(NAME, why + "bind's `**` argument is not one plain name")
            kwargs = a.value.value
        elif not isinstance(a.value, cst.Name):
            return Decline(NAME, why + "a positional argument of bind is not a plain name")
        else:
            positional.append(("*" if a.star == "*" else "") + a.value.value)
    line, block = (ancestors[-1], ancestors[-2]) if len(ancestors) >= 2 else (None, None)
    if _only_statement(line) is not node or not isinstance(block, cst.IndentedBlock):
        return Decline(NAME, why + "the bind call shares its line with other statements")
    body = list(block.body)
    i = next(j for j, st in enumerate(body) if st is line)
    nxt = [_only_statement(st) for st in body[i + 1:i + 3]]
    apply = nxt[0] if nxt else None
    if not (isinstance(apply, cst.Expr) and m.matches(apply.value, m.Call(
            func=m.Attribute(value=m.Name(bound), attr=m.Name("apply_defaults")), args=[]))):
        return Decline(NAME, why + f"`{bound}.apply_defaults()` does not follow it (without it a defaulted "
                       "argument is missing from `.arguments`, which a lookup would not reproduce)")
    use = nxt[1] if len(nxt) > 1 else None
    reads = m.findall(use, m.Subscript(value=m.Attribute(value=m.Name(bound), attr=m.Name("arguments")))) \
        if use is not None else []
    # the read must run unconditionally, first: the whole right-hand side of `T = A.arguments[K]`
    # (not under `if`/`and`/a lambda, where the original may never read it: adversarial review)
    if len(reads) != 1 or not (isinstance(use, cst.Assign) and use.value is reads[0]) or len(reads[0].slice) != 1 \
            or not isinstance(reads[0].slice[0].slice, cst.Index) or \
            not isinstance(reads[0].slice[0].slice.value, (cst.Name, cst.SimpleString)):
        return Decline(NAME, why + f"the next statement is not `<target> = {bound}.arguments[<name>]` (the read "
                       "must be its whole right-hand side, evaluated unconditionally)")
    if any(not isinstance(t.target, (cst.Name, cst.Subscript, cst.Attribute)) for t in use.targets) or \
            m.findall(use.targets[0], m.Call()):
        return Decline(NAME, why + "the assignment target calls something")
    key = reads[0].slice[0].slice.value
    function = _function(ancestors)
    uses = len(m.findall(function, m.Name(bound))) - len(m.findall(function, m.Attribute(attr=m.Name(bound)))) \
        if function is not None else 0
    if function is None or uses != 3:
        return Decline(NAME, why + f"`{bound}` is used elsewhere in the function")
    if sig in bound_names(function.body) or (isinstance(key, cst.Name) and key.value in bound_names(function.body)):
        return Decline(NAME, why + f"`{sig}` or the selected name is rebound inside the wrapper")
    params = function.params
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
    dstar = params.star_kwarg.name.value if params.star_kwarg is not None else None
    plain = {p.name.value for p in [*params.posonly_params, *params.params]}
    for arg in positional:
        name = arg.lstrip("*")
        if (arg.startswith("*") and name != star) or (not arg.startswith("*") and name not in plain):
            return Decline(NAME, why + f"bind's argument `{arg}` is not the wrapper's own parameter")
    if kwargs is not None and kwargs != dstar:
        return Decline(NAME, why + f"bind's `**{kwargs}` is not the wrapper's own `**` parameter (then a dict "
                       "subclass or non-string keys would unpack differently)")
    rebound = bound_names(function.body) & ({a.lstrip("*") for a in positional} | {kwargs} - {None})
    if rebound or m.findall(function.body, m.Del()):
        return Decline(NAME, why + "the wrapper rebinds or deletes its arguments")
    if any(dotted(c.func) in FRAME_READERS for c in m.findall(function.body, m.Call())):
        return Decline(NAME, why + "the wrapper reads its frame (`locals()`, `vars()`, `eval`...), which would see "
                       "the rewrite's locals")
    outer = next((a for a in reversed(ancestors[:ancestors.index(function)]) if isinstance(a, cst.FunctionDef)), None)
    made = [st for st in (outer.body.body if outer is not None else []) if isinstance(_only_statement(st), cst.Assign)
            and m.matches(_only_statement(st), m.Assign(targets=[m.AssignTarget(target=m.Name(sig))],
                                                       value=m.Call(func=m.Attribute(value=m.Name("inspect"),
                                                                                     attr=m.Name("signature")))))]
    # every other binding of the signature's name in the enclosing function (a tuple target, a
    # walrus, a loop, `global`, `del`: adversarial review) declines
    others = [st for st in (outer.body.body if outer is not None else []) if all(st is not x for x in made)
              and (sig in bound_names(st) or m.findall(st, m.Del(target=m.Name(sig))))]
    glob = [g for g in find_all(module, m.Global() | m.Nonlocal()) if any(n.name.value == sig for n in g.names)] \
        if module is not None else []
    if len(made) != 1 or others or glob or (outer is not None and sig in {p.name.value for p in m.findall(
            outer.params, m.Param())}):
        return Decline(NAME, why + f"`{sig}` is not bound once, by `{sig} = inspect.signature(...)`, in the "
                       "enclosing function (where the decorator runs)")
    imports = [a for imp in (find_all(module, m.Import()) if module is not None else [])
               for a in imp.names if dotted(a.name) == "inspect" and a.asname is None]
    top = [st for st in (module.body if module is not None else []) if isinstance(_only_statement(st), cst.Import)
           and any(dotted(a.name) == "inspect" and a.asname is None for a in _only_statement(st).names)]
    shadow = [d for d in find_all(module, m.FunctionDef() | m.ClassDef()) if d.name.value == "inspect"] + \
        find_all(module, m.AssignTarget(target=m.Name("inspect"))) + find_all(module, m.AsName(name=m.Name("inspect")))
    if len(imports) != 1 or len(top) != 1 or shadow:
        return Decline(NAME, why + "`inspect` is not the standard module, imported once with `import inspect` at "
                       "module level and never rebound")
    taken = bound_names(module) if module is not None else set()
    if any(n in taken for n in BIND_NAMES) or f"_mend_bind_{sig}" in bound_names(outer):
        return Decline(NAME, why + "the module already binds one of the names the rewrite adds")
    return Plan("signature-bind", node, line, "torch", function=function,
                bind={"block": block, "index": i, "use": body[i + 2], "read": reads[0], "key": key,
                      "signature": sig, "made": made[0], "outer": outer, "positional": positional,
                      "kwargs": kwargs, "bound": bound})


def bind_site(loc: Located) -> bool:
    """A break inside ``inspect.Signature.bind`` (the located file is the stdlib ``inspect.py``)."""
    return str(loc.file).replace("\\", "/").endswith("/inspect.py") or str(loc.file) == "inspect.py"


def match(loc: Located) -> Match | Decline:
    if bind_site(loc):
        return Decline(NAME, WHY_BIND)
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    if plan.kind == "jit-isinstance":
        return Match(NAME, "torch.jit.isinstance(obj, <plain class>) -> isinstance(obj, <plain class>)")
    if plan.kind == "signature-bind":
        return Match(NAME, f"`{plan.bind['signature']}.bind(...)` -> a lookup read once from the signature, "
                           "falling back to bind for calls it does not decide")
    if plan.kind == "debug-text":
        return Match(NAME, f"`{plan.name}`, a text of `{plan.arg}` read only under `if "
                           f"{code_of(plan.flag_if.test).strip()}:`, computed there for a plain torch.Tensor")
    return Match(NAME, f"unused `{plan.func}({plan.arg})` kept only when `{plan.arg}` is not a plain torch.Tensor")
