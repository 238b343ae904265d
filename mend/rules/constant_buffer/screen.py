"""constant-buffer: which classes the rule takes, why it declines the others, and
:func:`match`, a scan's verdict on a located site.

The analysis is static (LibCST, no imports) and works on one class:

1. **Int buffers.** ``__init__`` (straight-line at its top level, no ``return``) registers a
   non-persistent buffer from a 0-d int64 tensor made of a Python number:
   ``v = torch.tensor(E, dtype=torch.int64)`` then ``self.B = nn.Buffer(v, persistent=False)``
   (or ``self.register_buffer("B", v, persistent=False)``), or ``v1 - v2`` / ``v1 + v2`` of
   two such locals. ``E`` is a plain expression (names, attribute reads, ``[int]``
   subscripts, ``+ - *`` and int literals). A derived attribute ``self.A = self.B // 2`` (or
   ``self.B - self.A2``) is a twin too.
2. **Typing.** From ``forward``, every method of the class reached through ``self.M(...)``
   is typed with a small abstract domain: ``I`` (a 0-d int64 tensor in the original, a
   Python int in the mirror), ``N`` (a Python int in both: an int literal, a
   ``.shape[k]``/``.size(k)``), ``Q`` (``A / S + c``, a float tensor, waiting for
   ``torch.ceil(Q).to(torch.int64)``), tuples of those, and anything else. An ``I`` may
   meet only ``+ - *``, ``//`` by a positive int literal, unary ``-``, ``max``/``min``, a
   comparison in an ``if`` test, a slice bound, the pad tuple of ``F.pad``, a ``return``, or
   a parameter of another method of the class typed the same way. Anything else declines,
   naming the expression: an ``I`` that reaches a tensor op, an attribute read
   (``self.stride.device``), an index (``x[t]`` is advanced indexing for a 0-d tensor: a
   copy, not a view), a call outside the class, a loop, ``with`` or ``try``.
3. **Terms.** Every ``I`` is also a term over the twins, the sizes and the ratio sites
   (``ceilratio(A, S, c)``, ``phi(a, b)`` where two branches meet): the verifier proves every
   one within int64 (the original's int64 arithmetic then equals the mirror's exact ints).

What the screen cannot see becomes an obligation or a stated assumption (see the rule's
fix safety)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted, find_all, imports_torch, locals_readers, torch_aliases
from mend.rules._scalars import walk
from mend.rules.constant_buffer.domain import (_INT64, OTHER, Ratio, Typer, Why, bound_names,
                                              check_ratio_locals, self_attr)

NAME = "constant-buffer"
CATEGORY = "constant-buffer"
PREFIX = "_mend_int_"          # twin attributes and mirror methods
TWIN_BOUND = 2 ** 15           # every twin is checked in (-TWIN_BOUND, TWIN_BOUND) when the module is built
RATIO_A, RATIO_S = 2 ** 22, 64   # the ceil-ratio lemma's domain (proofs/cb_ceil_ratio.smt2)
SIZE_BOUND = 2 ** 44           # assumed bound on every tensor dimension


@dataclass
class Plan:
    klass: cst.ClassDef
    init: cst.FunctionDef
    tensor_locals: dict[str, cst.SimpleStatementLine]   # v -> `v = torch.tensor(E, dtype=torch.int64)`
    twins: dict[str, str]             # attribute -> twin expression (source, over _mend_int_ locals/twins)
    twin_terms: dict[str, str]        # attribute -> term over the leaves (``leaf_<local>``, for the verifier)
    registrations: list[int]          # ids of the small statements that register or derive a twinned attribute
    last_registration: cst.SimpleStatementLine
    divisors: list[str]               # twins that divide in a ratio (checked >= 1)
    mirrors: list[str]                # methods that get a `_mend_int_` mirror
    generic: list[str]                # methods that take I arguments unchanged
    ratios: list[Ratio] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)
    sinks: list[str] = field(default_factory=list)
    sink_nodes: set = field(default_factory=set)     # ids of the nodes where an int buffer value is used as a number
    forward: cst.FunctionDef | None = None
    torch: str = "torch"              # the module's name for torch, which the emitted code calls
    inline: dict = field(default_factory=dict)       # inline_B -> the `torch.tensor(E, ...)` registered inline


INLINE = "inline_"   # the local name an inline-registered buffer's twin is made under (`_mend_int_inline_B`)


def _plain(node: cst.BaseExpression) -> bool:
    """``E`` of ``torch.tensor(E, dtype=torch.int64)``: names, attribute reads, ``[int]``
    subscripts, ``+ - *``, parentheses and int literals (evaluated once, as before)."""
    if isinstance(node, (cst.Name, cst.Integer)):
        return True
    if isinstance(node, cst.Attribute):
        return _plain(node.value)
    if isinstance(node, cst.Subscript):
        return (len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
                and isinstance(node.slice[0].slice.value, (cst.Integer, cst.UnaryOperation)) and _plain(node.value))
    if isinstance(node, cst.BinaryOperation):
        return isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply)) and _plain(node.left) \
            and _plain(node.right)
    if isinstance(node, cst.UnaryOperation):
        return isinstance(node.operator, cst.Minus) and _plain(node.expression)
    return False


def _int_tensor(value: cst.BaseExpression, aliases: set[str]) -> cst.BaseExpression | None:
    """``E`` of ``torch.tensor(E, dtype=torch.int64)`` or of ``torch.tensor(E)`` (one
    positional argument, the dtype keyword only), else None. Without a dtype, an int ``E`` makes
    an int64 tensor; any other ``E`` (a float, a bool, a numpy int) fails the twins' ``type(v) is
    int`` check at run time and the original runs (helper-100 m41)."""
    if not (isinstance(value, cst.Call) and dotted(value.func) in {f"{a}.tensor" for a in aliases}):
        return None
    pos = [a for a in value.args if a.keyword is None]
    kws = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
    if len(pos) != 1 or pos[0].star or set(kws) - {"dtype"}:
        return None
    dtype = dotted(kws["dtype"]) or "" if kws else None
    if dtype is not None and not any(dtype == t.replace("torch", a, 1) for t in _INT64 for a in aliases):
        return None
    return pos[0].value if _plain(pos[0].value) else None


def buffer_classes(module: cst.Module) -> set[str]:
    """The spellings of ``torch.nn.Buffer`` the module's imports allow (``nn.Buffer`` after
    ``from torch import nn``...): a helper of the user's own named ``...Buffer`` is not one."""
    torch = torch_aliases(module)
    out = {f"{t}.nn.Buffer" for t in torch}
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                source = dotted(small.module) if small.module else None
                for a in small.names:
                    bound = a.asname.name.value if a.asname else dotted(a.name)
                    if source == "torch" and dotted(a.name) == "nn":
                        out.add(f"{bound}.Buffer")
                    if source == "torch.nn" and dotted(a.name) == "Buffer":
                        out.add(bound)
            if isinstance(small, cst.Import):
                for a in small.names:
                    if dotted(a.name) == "torch.nn" and a.asname is not None:
                        out.add(f"{a.asname.name.value}.Buffer")
    return out


def _buffer_value(small: cst.BaseSmallStatement, buffers: set[str]) -> tuple[str, cst.BaseExpression] | None:
    """(B, X) for ``self.B = nn.Buffer(X, persistent=False)`` or
    ``self.register_buffer("B", X, persistent=False)``."""
    def non_persistent(args) -> bool:
        # `persistent=False`, or `register_buffer(name, tensor, False)` (helper-58)
        return any(a.keyword is not None and a.keyword.value == "persistent" and m.matches(a.value, m.Name("False"))
                   for a in args) or (len(args) == 3 and args[2].keyword is None and not args[2].star and
                                      m.matches(args[2].value, m.Name("False")) and isinstance(small, cst.Expr))
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and self_attr(small.targets[0].target) \
            and isinstance(small.value, cst.Call) and dotted(small.value.func) in buffers:
        args = small.value.args
        if args and args[0].keyword is None and non_persistent(args):
            return self_attr(small.targets[0].target), args[0].value
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and \
            dotted(small.value.func) == "self.register_buffer":
        args = small.value.args
        if len(args) >= 2 and isinstance(args[0].value, cst.SimpleString) and args[1].keyword is None \
                and non_persistent(args) and isinstance(args[0].value.evaluated_value, str) and \
                args[0].value.evaluated_value.isidentifier():
            return args[0].value.evaluated_value, args[1].value
    return None


def _twin_of(node: cst.BaseExpression, locals_: dict[str, str], twins: dict[str, str]) -> tuple[str, str] | None:
    """(source, term) of the twin of a tensor expression: a known int-tensor local, a twin
    attribute, ``a + b``/``a - b`` of two such, ``a // k`` by a positive int literal."""
    if isinstance(node, cst.Name) and node.value in locals_:
        return f"_mend_int_{node.value}", locals_[node.value]
    attr = self_attr(node)
    if attr is not None and attr in twins:
        return f"self.{PREFIX}{attr}", twins[attr]
    if isinstance(node, cst.BinaryOperation):
        op = node.operator
        if isinstance(op, cst.FloorDivide) and isinstance(node.right, cst.Integer) and node.right.evaluated_value > 0:
            left = _twin_of(node.left, locals_, twins)
            k = node.right.value
            return (f"{left[0]} // {k}", f"({left[1]} // {k})") if left else None
        if isinstance(op, (cst.Add, cst.Subtract)):
            left, right = _twin_of(node.left, locals_, twins), _twin_of(node.right, locals_, twins)
            if left and right:
                sym = "+" if isinstance(op, cst.Add) else "-"
                return f"{left[0]} {sym} {right[0]}", f"({left[1]} {sym} {right[1]})"
    return None


def _tensor_local_uses(init: cst.FunctionDef, aliases: set[str], registrations: set[int]) -> str | None:
    """Why an int-tensor local of ``__init__`` may not hold its value by the time it is
    registered, or may be written later: while it holds ``torch.tensor(<int>, dtype=torch.int64)``
    it may be read only by a buffer registration (``nn.Buffer(v, ...)`` shares its storage, so an
    alias ``self._limit = v`` or ``v -= 1`` would change the buffer: adversarial review)."""
    live: set[str] = set()
    for stmt in init.body.body:
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
        for small in smalls:
            # a twinned registration only (its value is `v`, or `v1 - v2`): `self._limit = v`, or another
            # buffer registered from `v.view(1)`, would keep a second handle on the buffer's storage
            allowed = {id(n) for n in m.findall(small, m.Name())} if id(small) in registrations else set()
            if isinstance(small, cst.Assign):
                allowed |= {id(n) for t in small.targets for n in m.findall(t.target, m.Name())}
            for name in live:
                for n in m.findall(small, m.Name(name)):
                    if id(n) not in allowed:
                        return (f"`{code_of(small).strip()}` uses `{name}`, the tensor of an int buffer, other than "
                                "to register it (an alias or an in-place write would change the buffer)")
            bound = bound_names(small) if not isinstance(small, cst.Assign) else \
                {n.value for t in small.targets for n in m.findall(t.target, m.Name())}
            live -= bound
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                    isinstance(small.targets[0].target, cst.Name) and _int_tensor(small.value, aliases) is not None:
                live.add(small.targets[0].target.value)
    return None


def int_buffers(klass: cst.ClassDef, aliases: set[str], buffers: set[str]) -> Plan | str:
    """The int buffers (and derived attributes) of ``klass``'s ``__init__``, or why none are taken."""
    init = next((f for f in klass.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None)
    if init is None:
        return "the class has no `__init__` registering int buffers"
    tensor_locals: dict[str, cst.SimpleStatementLine] = {}   # the current binding of each int-tensor local
    tensor_locals_all: dict[str, cst.SimpleStatementLine] = {}
    local_terms: dict[str, str] = {}
    twins: dict[str, str] = {}
    twin_terms: dict[str, str] = {}
    registrations: list[int] = []
    inline: dict[str, cst.Call] = {}
    last = None

    def add_local(name: str, stmt: cst.SimpleStatementLine, twice: str) -> str | None:
        """Record the int-tensor local ``name`` made on ``stmt``; why not, when it cannot be."""
        if len(stmt.body) != 1:
            return f"`{code_of(stmt).strip()}`: more than one statement on the line"
        if name in tensor_locals_all:
            return twice
        tensor_locals[name] = tensor_locals_all[name] = stmt
        local_terms[name] = f"leaf_{name}"
        return None

    for stmt in init.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            for name in bound_names(stmt):     # rebound in a block: no longer the tensor's value
                tensor_locals.pop(name, None)
                local_terms.pop(name, None)
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                name = small.targets[0].target.value
                local_terms.pop(name, None)
                tensor_locals.pop(name, None)
                if _int_tensor(small.value, aliases) is not None:
                    why = add_local(name, stmt, f"`{name}` is made by `torch.tensor(...)` twice in `__init__`")
                    if why:
                        return why
                continue
            buf = _buffer_value(small, buffers)
            attr = self_attr(small.targets[0].target) if isinstance(small, cst.Assign) and \
                len(small.targets) == 1 else None
            value = buf[1] if buf else (small.value if attr else None)
            target = buf[0] if buf else attr
            if value is None:
                continue
            if buf is not None and _int_tensor(value, aliases) is not None:
                # registered inline (`self.register_buffer("B", torch.tensor(E, dtype=torch.int64), ...)`):
                # a local of its own, `inline_B`, as if written `v = torch.tensor(...)` on the line before
                syn = f"{INLINE}{target}"
                why = add_local(syn, stmt, f"`{syn}` is a local of `__init__` already (the inline buffer's twin "
                                "needs the name)")
                if why:
                    return why
                inline[syn] = value
            twin = _twin_of(value, {k: local_terms[k] for k in tensor_locals}, twin_terms) if not (
                buf is not None and _int_tensor(value, aliases) is not None) else (f"_mend_int_{syn}", f"leaf_{syn}")
            if twin is None:
                continue
            if buf is None and not (isinstance(value, cst.BinaryOperation) and self_attr(value.left) in twins):
                continue    # only a buffer, or an attribute derived from a twin attribute, is twinned
            if target in twins:
                return f"`self.{target}` is registered twice in `__init__`"
            twins[target], twin_terms[target] = twin
            registrations.append(id(small))
            last = stmt
    if not twins:
        return "`__init__` registers no non-persistent buffer made by `torch.tensor(<int>, dtype=torch.int64)`"
    if m.findall(init, m.Return()) or m.findall(init, m.Yield()):
        return "`__init__` returns early: the twins would not always be set"
    why = _tensor_local_uses(init, aliases, set(registrations))
    if why:
        return why
    used = {k: v for k, v in tensor_locals_all.items() if any(re.search(rf"\b_mend_int_{k}\b", src)
                                                               for src in twins.values())}
    return Plan(klass, init, used, twins, twin_terms, registrations, last, [], [], [],
                inline={k: v for k, v in inline.items() if k in used})


def plan_for(module: cst.Module, klass: cst.ClassDef) -> Plan | Decline:
    """The rewrite plan of ``klass``, or a Decline saying why."""
    aliases = torch_aliases(module)
    plan = int_buffers(klass, aliases, buffer_classes(module))
    if isinstance(plan, str):
        return Decline(NAME, plan)
    if klass.decorators:
        # a decorator may return another class (a subclass): `type(self) is C` would not be this one
        return Decline(NAME, f"`{klass.name.value}` is decorated: the name may not be this class")
    if klass not in module.body:
        return Decline(NAME, f"`{klass.name.value}` is not defined at the module's top level (the dispatch names it)")
    defs = [f for f in klass.body.body if isinstance(f, cst.FunctionDef)]
    methods = {f.name.value: f for f in defs}
    if "forward" not in methods:
        return Decline(NAME, f"`{klass.name.value}` has no `forward`")
    rebound = [n for stmt in klass.body.body if not isinstance(stmt, cst.FunctionDef) for n in bound_names(stmt)
               if n in methods] + [n for n in methods if sum(f.name.value == n for f in defs) > 1]
    if rebound:
        # `n_frames = n_frames_capped` in the class body: the name is not the def the mirror copies
        return Decline(NAME, f"`{klass.name.value}.{rebound[0]}` is defined or bound more than once in the class")
    base = _foreign_base(module, klass)
    if base:
        return Decline(NAME, base)
    torch_name = "torch" if "torch" in aliases else sorted(aliases)[0]
    if not imports_torch(module, torch_name):
        return Decline(NAME, f"the module does not bind `{torch_name}` at its top level (the mirror calls it)")
    clash = sorted({n.value for n in find_all(module, m.Name()) if n.value.startswith(PREFIX)} |
                   {a.attr.value for a in find_all(module, m.Attribute()) if a.attr.value.startswith(PREFIX)})
    if clash:
        return Decline(NAME, f"the module already uses the prefix `{PREFIX}` ({clash[0]})")
    typer = Typer(plan, methods, aliases)
    if not typer.reads_twin("forward"):
        return Decline(NAME, f"`{klass.name.value}.forward` reads none of the int buffers "
                       f"({', '.join(sorted(plan.twins))})")
    fwd = methods["forward"]
    if fwd.decorators:
        return Decline(NAME, "`forward` is decorated: what it calls is not seen")
    try:
        env = {p.name.value: OTHER for p in fwd.params.params}
        typer.stack.append("forward")
        result = typer.method("forward", env)
        typer._no_int(result, fwd.name, "`forward` returns it")
        check_ratio_locals(typer, methods)
    except Why as why:
        return Decline(NAME, f"`{klass.name.value}`: {why}")
    if not plan.sinks:
        return Decline(NAME, f"`{klass.name.value}`: no int buffer value reaches a Python-number use (a pad, a "
                       "slice bound, an `if` comparison): the mirror would not remove a graph break")
    plan.mirrors.insert(0, "forward")
    clash = _name_clash(plan) or _rebound(module, klass, plan, methods)
    if clash:
        return Decline(NAME, f"`{klass.name.value}`: {clash}")
    readers = [f for f in plan.mirrors + plan.generic if locals_readers(methods[f]) or m.findall(
        methods[f], m.Attribute(attr=m.Name("f_locals") | m.Name("_getframe") | m.Name("currentframe")))]
    if readers:
        # `print(locals()["pad"])`: the mirror's locals hold ints where the original's held tensors (helper-58)
        return Decline(NAME, f"`{klass.name.value}.{readers[0]}` reads its locals by name (`locals()`, `vars()`, "
                       "`eval`, `exec`, a frame): the mirror's locals are ints where the original's are tensors")
    scoped = [f for f in plan.mirrors if m.findall(methods[f], m.Global() | m.Nonlocal())]
    if scoped:
        # `global LAST; LAST = self.max_len`: a buffer value bound outside the method, where the
        # screen does not follow it (fourth review)
        return Decline(NAME, f"`{klass.name.value}.{scoped[0]}` declares a `global` or `nonlocal` name")
    local_torch = [f for f in plan.mirrors if torch_name in _local_bindings(methods[f])]
    if local_torch:
        return Decline(NAME, f"`{klass.name.value}.{local_torch[0]}` binds `{torch_name}` locally (the mirror "
                       "needs the module's)")
    shadow = _shadowed(module, plan.mirrors + plan.generic)
    if shadow:
        return Decline(NAME, f"`{klass.name.value}`: {shadow}")
    write = _written(module, klass, plan)
    if write:
        return Decline(NAME, write)
    plan.forward, plan.torch = fwd, torch_name
    plan.divisors = sorted({r.q.s for r in plan.ratios})
    return plan


_MODULE_BASES = {"nn.Module", "torch.nn.Module", "Module"}


_FIXED = {"exact", "ok", "a", "s"}     # _mend_int_exact / _ok (the guard), _a / _s (the ratio's lambda)


def _name_clash(plan: Plan) -> str | None:
    """Why the generated names could collide: a buffer, local or mirrored method whose
    ``_mend_int_`` name is one the rewrite uses for something else (a local ``exact`` would
    become the guard's ``_mend_int_exact``: second review)."""
    for kind, names in (("buffer", set(plan.twins)), ("local", set(plan.tensor_locals)),
                        ("method", set(plan.mirrors))):
        if names & _FIXED:
            return f"the {kind} `{sorted(names & _FIXED)[0]}` would be named like one of the rewrite's own names"
    both = set(plan.twins) & set(plan.mirrors)
    if both:
        return f"`{sorted(both)[0]}` is both a buffer and a mirrored method"
    return None


_DISPATCH_BUILTINS = {"type", "getattr", "int", "max", "min"}


def _imported(node: cst.CSTNode) -> tuple[set[str], bool]:
    """The names the imports under ``node`` bind, and whether one is ``from x import *``."""
    out: set[str] = set()
    star = False
    for imp in m.findall(node, m.Import() | m.ImportFrom()):
        if isinstance(imp.names, cst.ImportStar):
            star = True
            continue
        out |= {(a.asname.name.value if a.asname else dotted(a.name).split(".")[0]) for a in imp.names}
    return out, star


def _import_bindings(node: cst.CSTNode) -> set[str] | None:
    """The names the imports under ``node`` bind, or None if one is ``from x import *`` (which
    may bind anything: ``from numpy import *`` rebinds ``all``, fourth review)."""
    names, star = _imported(node)
    return None if star else names


def _rebound(module: cst.Module, klass: cst.ClassDef, plan: Plan, methods: dict) -> str | None:
    """Why a name the rewrite relies on might not mean what it meant (third review): the
    class's name bound again in the module (``Crop = CenterCrop``: the dispatch's
    ``type(self) is Crop`` would send a subclass to the base's mirror), the class patched from
    outside (``Crop.tighten = ...``), ``type``/``getattr``/``int`` bound in the module or in a
    mirrored method (``def forward(self, x, type="crop")``), a buffer with a private, mangled
    name (``self.__max_len`` is ``_Crop__max_len`` outside the class)."""
    name = klass.name.value
    top = {n for stmt in module.body if not isinstance(stmt, cst.ClassDef) or stmt is not klass
           for n in (bound_names(stmt) | ({stmt.name.value} if isinstance(stmt, (cst.ClassDef, cst.FunctionDef))
                                          else set()))}
    imported = _import_bindings(module)
    if imported is None:
        return "the module has a `from ... import *`: the builtins the rewrite calls may be rebound"
    top |= imported
    if name in top:
        return f"the name `{name}` is bound again in the module: the dispatch's `type(self) is {name}` may not be this class"
    if any(kw.keyword is not None for kw in klass.keywords):
        # `class Crop(nn.Module, metaclass=M)`: the metaclass may replace the methods the mirror
        # copies (fourth review)
        return f"`{name}` is declared with a keyword (`{code_of(klass.keywords[0]).strip()}`): its methods may not be the ones written"
    for node in find_all(module, m.Assign() | m.AugAssign() | m.AnnAssign()):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        if any(isinstance(t, cst.Attribute) and m.matches(t.value, m.Name(name)) for t in targets):
            return f"`{code_of(node).strip()}` patches the class from outside"
    for call in find_all(module, m.Call(func=m.Name("setattr") | m.Name("delattr") | m.Attribute(
            attr=m.Name("__setattr__") | m.Name("__delattr__")))):
        if call.args and m.matches(call.args[0].value, m.Name(name)):
            # `setattr(Crop, "tighten", ...)` patches the class as `Crop.tighten = ...` does (fourth review)
            return f"`{code_of(call).strip()[:80]}` patches the class from outside"
    shadowed = top & (_DISPATCH_BUILTINS | {"all"})
    for f in plan.mirrors:
        shadowed |= _local_bindings(methods[f]) & _DISPATCH_BUILTINS
        if _import_bindings(methods[f]) is None:
            return f"`{f}` has a `from ... import *`: the builtins the mirror calls may be rebound"
    shadowed |= _local_bindings(plan.init) & {"type", "all"}     # the twins' check in `__init__`
    if shadowed:
        return f"`{sorted(shadowed)[0]}` is bound in the module or a mirrored method (the rewrite calls the builtin)"
    mangled = [b for b in plan.twins if b.startswith("__") and not b.endswith("__")]
    if mangled:
        return f"the buffer `{mangled[0]}` has a private, mangled name (reached as `_{name}{mangled[0]}` outside)"
    return None


def _foreign_base(module: cst.Module, klass: cst.ClassDef) -> str | None:
    """Why a base class might change what the buffers hold: a base defined outside the module
    other than ``nn.Module`` (its ``register_buffer``/``__setattr__`` are not seen), or a base in
    the module that overrides one of them (second review: a base clamping every registered
    buffer)."""
    from verifier.encoders.constant_buffer import OVERRIDES   # here: the verifier (z3) stays out of start-up

    classes = {c.name.value: c for c in module.body if isinstance(c, cst.ClassDef)}
    todo, seen = [klass], set()
    while todo:
        c = todo.pop()
        for b in c.bases:
            name = dotted(b.value) or code_of(b.value).strip()
            if name in _MODULE_BASES:
                continue
            if name not in classes:
                return f"`{c.name.value}` derives from `{name}`, defined elsewhere: what it does with buffers is not seen"
            if name not in seen:
                seen.add(name)
                base = classes[name]
                for member in base.body.body:
                    if isinstance(member, cst.FunctionDef) and member.name.value in (*OVERRIDES, "__init_subclass__"):
                        return f"the base `{name}` overrides `{member.name.value}`: the buffers may change under it"
                todo.append(base)
    return None


def _local_bindings(fn: cst.FunctionDef) -> set[str]:
    """Names ``fn`` binds (assignments, imports, loops, ``with ... as``, parameters)."""
    return bound_names(fn.body) | {p.name.value for p in fn.params.params} | _imported(fn.body)[0]


def _shadowed(module: cst.Module, names: list[str]) -> str | None:
    """Why a mirrored method might not be what the original calls: an attribute of its name
    assigned anywhere in the module (an instance attribute shadows the method), or its name as
    a string (``setattr``)."""
    wanted = set(names)
    for node in find_all(module, m.Assign() | m.AugAssign() | m.AnnAssign()):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for t in targets:
            if isinstance(t, cst.Attribute) and t.attr.value in wanted:
                return f"`{code_of(node).strip()}` assigns `{t.attr.value}`: the call the mirror replaces may not reach it"
    for st in find_all(module, m.SimpleString()):
        try:
            if st.evaluated_value in wanted:
                return f"the string {st.value} names a mirrored method"
        except Exception:     # noqa: BLE001 - bytes or an f-string part
            continue
    return None


def _written(module: cst.Module, klass: cst.ClassDef, plan: Plan) -> str | None:
    """Why the twins might go stale: a write to a twinned attribute anywhere in the module
    (the verifier's screen, :func:`verifier.encoders.constant_buffer.screen_writes`, run on the
    original; it runs again on the mended module as the ``int-buffers-unwritten`` check).
    Escapes do not decline here: the verifier records them, and the fix is then unsafe."""
    from verifier.encoders.constant_buffer import screen_writes   # here: z3 stays out of `mend`'s start-up

    writes, _ = screen_writes(module.code, klass.name.value, set(plan.twins), set(plan.mirrors) | set(plan.generic))
    return f"{writes[0]}: the twin would go stale" if writes else None


def class_at(ancestors: list[cst.CSTNode], node: cst.CSTNode | None = None) -> cst.ClassDef | None:
    """The innermost class enclosing the site (from its ancestors), or the site itself."""
    if isinstance(node, cst.ClassDef):
        return node
    for anc in reversed(ancestors):
        if isinstance(anc, cst.ClassDef):
            return anc
    return None


def takes(loc: Located | None) -> bool:
    """Whether the site's class has a plan (the taxonomy's test for the category)."""
    if loc is None:
        return False
    klass = class_at(loc.ancestors)
    if klass is None:
        return False
    plan = plan_for(loc.module, klass)
    if isinstance(plan, Decline):
        return False
    part = loc.node.test if isinstance(loc.node, (cst.If, cst.While)) else loc.node
    return any(id(n) in plan.sink_nodes for n in [part, *m.findall(part, m.Comparison() | m.Subscript() | m.Call())])


def reads_int_buffers(loc: Located | None) -> bool:
    """Whether the site's statement reads one of its class's 0-d int buffers, directly or
    through locals of its method bound from them (to a fixpoint), whether or not the class has
    a plan: a scalar read there is the buffer's, and the user is better served by this rule's
    reason for declining than by a generic one (helper-78's c07: "the output shape depends on
    tensor values" was misleading)."""
    klass = class_at(loc.ancestors) if loc is not None else None
    method = next((a for a in reversed(loc.ancestors) if isinstance(a, cst.FunctionDef)), None) if klass else None
    if method is None:
        return False
    plan = int_buffers(klass, torch_aliases(loc.module), buffer_classes(loc.module))
    if isinstance(plan, str):
        return False

    def reads(node: cst.CSTNode, names: set[str]) -> bool:
        return any(m.matches(n, m.Attribute(value=m.Name("self"))) and n.attr.value in plan.twins
                   or isinstance(n, cst.Name) and n.value in names for n in walk(node))
    tainted: set[str] = set()
    assigns = m.findall(method, m.Assign() | m.AugAssign() | m.AnnAssign())
    while True:
        more = {n for a in assigns if a.value is not None and reads(a.value, tainted)
                for n in bound_names(a)} - tainted
        if not more:
            break
        tainted |= more
    return reads(loc.node, tainted)


def match(loc: Located) -> Match | Decline:
    klass = class_at(loc.ancestors, loc.node)
    if klass is None:
        return Decline(NAME, "the site is not in a class that registers int buffers")
    plan = plan_for(loc.module, klass)
    if isinstance(plan, Decline):
        return plan
    return Match(NAME, f"`{klass.name.value}`: {', '.join(sorted(plan.twins))} get Python twins; "
                 f"{', '.join(plan.mirrors)} mirrored on them ({len(plan.ratios)} ceil-of-ratio site(s))")
