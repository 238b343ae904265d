"""Static, conservative checks on LibCST statements shared by the rule matchers (a module
whose name starts with ``_`` is not a rule: discovery skips it).

These are syntactic screens. The verifier (``verifier/``) decides purity from operator
schemas; a matcher only rejects what is obviously out of scope.
"""
from __future__ import annotations

from functools import lru_cache

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider


_EMPTY = cst.Module([])


def code_of(node: cst.CSTNode) -> str:
    """Source text of ``node`` (default formatting of an empty module)."""
    return _EMPTY.code_for_node(node)


def one_line(text: str) -> str:
    """An expression's source on one line: as written when it is one line already, else
    ``ast.unparse`` of it (comments and line continuations dropped, string literals kept:
    joining the text's words broke on a comment or a backslash and merged spaces inside a
    string literal -- helper-46 in setup-guard, helper-48 in forward-attribute)."""
    import ast

    text = text.strip()
    return text if "\n" not in text else ast.unparse(ast.parse(text, mode="eval"))


def fresh_local(function: cst.FunctionDef, base: str, taken: set[str] = frozenset()) -> str:
    """``base``, or ``base_2``, ``base_3``... : the first name the function (nested scopes
    included) never names, so a second rewrite in the same function gets its own local
    (helper-47: a second check was declined, "already uses the name"); nor any of ``taken``
    (names a rewrite has chosen but not yet written into the function)."""
    used = {n.value for n in m.findall(function, m.Name())} | set(taken)
    return next(name for name in (base, *(f"{base}_{i}" for i in range(2, 10_000))) if name not in used)


def locals_readers(node: cst.CSTNode) -> list[cst.Call]:
    """The calls of ``locals()``, ``vars()``, ``eval`` or ``exec`` in ``node``: code that reads a
    function's locals by name, where a local a rewrite binds (or a changed local's type) shows."""
    return m.findall(node, m.Call(func=m.Name("locals") | m.Name("vars") | m.Name("eval") | m.Name("exec")))


def add_import(module: cst.Module, statement: str, same_line: bool = False) -> cst.Module:
    """``module`` with the import ``statement`` (``"import torch"``) added where LibCST's
    ``AddImportsVisitor`` puts it: after a leading docstring and the first block of imports,
    with an empty line before the next statement. The caller has checked that the name is
    not bound yet. The visitor itself re-walks and copies the whole tree (4 s on a 2,500-line
    transformers file); this touches only the module's top level.

    ``same_line``: append it to the last line of that block (``import a; import torch``)
    so that no line below moves -- a replayed warning or log record then names the line
    the original source had. Without an import block it gets a line of its own."""
    body = list(module.body)
    start, end = import_block(body)
    new = cst.parse_statement(statement, config=module.config_for_parsing)
    if same_line:
        host = _same_line_host(body, start)
        if host is not None:
            last = body[host]
            small = [*last.body[:-1], last.body[-1].with_changes(semicolon=cst.Semicolon(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))), new.body[0]]
            return module.with_changes(body=(*body[:host], last.with_changes(body=small), *body[host + 1:]))
    after = body[end:]
    if after and (not after[0].leading_lines or after[0].leading_lines[0].comment is not None):
        after[0] = after[0].with_changes(leading_lines=(cst.EmptyLine(), *after[0].leading_lines))
    return module.with_changes(body=(*body[:end], new, *after))


def add_helpers(module: cst.Module, text: str) -> cst.Module:
    """``module`` with the top-level definitions in ``text`` after its first import block, two
    blank lines either side (comment lines above the next statement stay with it). Inserted
    there, they exist before any of the module's own code runs (decorators run at import)."""
    helpers = cst.parse_module(text).body
    body = list(module.body)
    _, at = import_block(body)
    first = helpers[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    after = body[at:]
    if after:
        after[0] = after[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(),
                                                        *[ln for ln in after[0].leading_lines if ln.comment]])
    return module.with_changes(body=[*body[:at], first, *helpers[1:], *after])


def import_block(body: list) -> tuple[int, int]:
    """(start, end) of a module's first block of imports in its top-level ``body``: after a
    leading docstring (or ``__strict__ = ...``), up to the first statement that is not an
    import line. Code inserted at ``end`` runs before any of the module's own code."""
    start = 1 if body and (m.matches(body[0], m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())]))
                           or m.matches(body[0], m.SimpleStatementLine(
                               body=[m.Assign(targets=[m.AssignTarget(target=m.Name("__strict__"))])]))) else 0
    end = start
    while end < len(body) and m.matches(body[end], m.SimpleStatementLine(body=[m.ImportFrom() | m.Import()])):
        end += 1
    return start, end


def _same_line_host(body: list, start: int) -> int | None:
    """The top-level line an import can share without moving any line: the last line of
    imports at the top level (so it runs after whatever setup comes before it, e.g.
    ``os.environ[...] = ...`` ahead of ``import torch``), else the last top-level simple
    statement that is not the docstring, before the first definition; None when there is
    none (the import then needs a line of its own)."""
    imports = [i for i, stmt in enumerate(body) if i >= start and isinstance(stmt, cst.SimpleStatementLine)
               and all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in stmt.body)
               and not any(isinstance(x, cst.ImportFrom) and x.module is not None and x.module.value == "__future__"
                           for x in stmt.body)]
    if imports:
        return imports[-1]
    first_def = next((i for i, stmt in enumerate(body) if isinstance(stmt, (cst.FunctionDef, cst.ClassDef))), len(body))
    simple = [i for i in range(start, first_def) if isinstance(body[i], cst.SimpleStatementLine)]
    return simple[-1] if simple else None


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        return ".".join([node.value, *reversed(parts)])
    return None


def simple_statements(block) -> list[cst.BaseSmallStatement] | None:
    """The small statements of a block, or None when it holds a compound statement."""
    out = []
    for stmt in block.body if hasattr(block, "body") else block:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        out.extend(stmt.body)
    return out


def inplace_call(node: cst.CSTNode) -> str | None:
    """The name of an in-place tensor method called anywhere in ``node`` (``add_``...)."""
    for call in m.findall(node, m.Call(func=m.Attribute())):
        attr = call.func.attr.value
        if attr.endswith("_") and not attr.endswith("__") and not attr.startswith("_"):
            return attr
    return None


def has_out_kwarg(node: cst.CSTNode) -> bool:
    return bool(m.findall(node, m.Arg(keyword=m.Name("out"))))


def assigned_name(stmt: cst.BaseSmallStatement) -> str | None:
    """``x`` for ``x = ...`` (single plain-name target), else None."""
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name):
        return stmt.targets[0].target.value
    if isinstance(stmt, cst.AnnAssign) and isinstance(stmt.target, cst.Name) and stmt.value is not None:
        return stmt.target.value
    return None


def torch_aliases(module: cst.Module | None) -> set[str]:
    """The names ``torch`` is bound to by the module's top-level imports (``import torch as th``)."""
    names = {"torch"}
    for stmt in module.body if module is not None else ():
        for small in getattr(stmt, "body", ()) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if dotted(alias.name) == "torch" and alias.asname is not None:
                        names.add(alias.asname.name.value)
    return names


def imports_torch(module: cst.Module, name: str) -> bool:
    """``import torch`` (``as name``), or ``import torch.<sub>`` binding ``torch``, at the module's top level."""
    for stmt in module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import) and any(
                    (a.asname.name.value if a.asname else dotted(a.name).split(".")[0]) == name
                    and dotted(a.name).split(".")[0] == "torch" for a in small.names):
                return True
    return False


def torch_name(module: cst.Module) -> tuple[str, bool]:
    """(the name ``torch`` is bound to at the top level, whether ``import torch`` must be added)."""
    for name in sorted(torch_aliases(module), key=lambda n: n != "torch"):
        if imports_torch(module, name):
            return name, False
    return "torch", True


# the autocast device types mend's guards read: the ones the verifier's autocast leg runs on
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps")


def autocast_on(torch: str = "torch") -> str:
    """``torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("xpu") or torch.is_autocast_enabled("mps")``: Dynamo folds it
    and guards autocast's state (``GLOBAL_STATE changed: autocast(cpu)_enabled`` recompiles,
    measured on torch 2.13), so a guard on it leaves no break outside autocast."""
    return " or ".join(f'{torch}.is_autocast_enabled("{d}")' for d in AUTOCAST_DEVICES)


class _FindStatement(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int, kinds: tuple) -> None:
        self.line, self.kinds, self.found = line, kinds, None
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is None and isinstance(node, self.kinds):
            if self.get_metadata(PositionProvider, node).start.line == self.line:
                self.found = (node, list(self.stack))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


class _Preorder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.by_type: dict[type, list[tuple[int, cst.CSTNode]]] = {}
        self.count = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.by_type.setdefault(type(node), []).append((self.count, node))
        self.count += 1
        return True


@lru_cache(maxsize=8)
def _nodes_by_type(module: cst.Module) -> dict[type, list[tuple[int, cst.CSTNode]]]:
    visitor = _Preorder()
    module.visit(visitor)
    return visitor.by_type


def _node_types(matcher) -> list[type] | None:
    """The node classes a matcher can match (``m.For()`` -> ``cst.For``; ``a | b`` -> both), or None
    for a matcher of another kind."""
    options = matcher.options if isinstance(matcher, m.OneOf) else (matcher,)
    if not all(isinstance(o, m.BaseMatcherNode) for o in options):
        return None
    types = [getattr(cst, type(o).__name__, None) for o in options]
    return None if not all(isinstance(t, type) and issubclass(t, cst.CSTNode) for t in types) else types


def find_all(root: cst.CSTNode, matcher) -> list[cst.CSTNode]:
    """``libcst.matchers.findall(root, matcher)`` (the same nodes, in the same pre-order), faster
    over a whole module: a module's nodes are indexed by class once, and only those of the
    matcher's class are matched (a screen searching a 2,500-line transformers file for a dozen
    shapes walked the whole tree a dozen times per site)."""
    types = _node_types(matcher) if isinstance(root, cst.Module) else None
    if types is None:
        return m.findall(root, matcher)
    index = _nodes_by_type(root)
    found = sorted((entry for t in set(types) for entry in index.get(t, ())), key=lambda e: e[0])
    return [node for _, node in found if m.matches(node, matcher)]


@lru_cache(maxsize=8)
def shared_wrapper(module: cst.Module) -> MetadataWrapper:
    """One ``MetadataWrapper`` per parsed module (no copy: its nodes are ``module``'s own), so
    the screens of every rule and site in one file resolve positions and parents once: a
    wrapper caches what it resolves (hf:grounding-dino's scan spent 24 s of 50 re-resolving
    its 2,500-line modeling file, site after site). For reading only: a rewrite that needs
    nodes of its own copies the module (``statement_at``). Modules hash by identity, and the
    cache holds them, so an id is never reused while cached."""
    return MetadataWrapper(module, unsafe_skip_copy=True)


def statement_at(module: cst.Module, line: int, *, compound: bool = False):
    """``(wrapper, found)``: the module's MetadataWrapper (rewrite ``wrapper.module``, whose
    nodes ``found`` refers to) and the first small statement starting on ``line`` -- or
    compound one too, with ``compound`` -- with its ancestors, ``(node, ancestors)``; None
    when no statement starts there."""
    wrapper = MetadataWrapper(module)
    kinds = (cst.BaseSmallStatement, cst.BaseCompoundStatement) if compound else (cst.BaseSmallStatement,)
    finder = _FindStatement(line, kinds)
    wrapper.visit(finder)
    return wrapper, finder.found


def annotated_line(line: cst.SimpleStatementLine, new_statement: str, rule: str) -> tuple[cst.SimpleStatementLine, str]:
    """``(new line, old statement)``: ``line`` with its one statement replaced by
    ``new_statement`` and a trailing ``# mend: RULE (was: OLD)`` note that keeps the line's own
    comment after it; OLD is the replaced statement on one line (a comment cannot span lines)."""
    old = " ".join(code_of(line.body[0]).split())
    comment = line.trailing_whitespace.comment
    note = f"# mend: {rule} (was: {old})" + (f" {comment.value}" if comment is not None else "")
    new_line = line.with_changes(
        body=[cst.parse_statement(new_statement + "\n").body[0]],
        trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(note)))
    return new_line, old


FORCING_HOOK = "__mend_force__("  # verifier/forcing.py's hook in instrumented copies


class ReplaceAll(cst.CSTTransformer):
    """Replace nodes (by identity) wherever they sit in the tree, in one pass: ``{id(node):
    replacement}`` (the nodes must stay alive while it runs)."""

    def __init__(self, mapping: dict[int, cst.CSTNode]):
        self.mapping = mapping

    def on_leave(self, original_node, updated_node):
        return self.mapping.get(id(original_node), updated_node)


class Replace(ReplaceAll):
    """Replace one node (by identity) wherever it sits in the tree."""

    def __init__(self, target: cst.CSTNode, replacement: cst.CSTNode):
        super().__init__({id(target): replacement})
        self.target = target   # kept alive: its id is the key


# calls that change Python state (a method of that name, or the builtin `next`): helper-47 lost
# a `set.add` and an `itertools.count` advanced by `next()` before a check moved into the graph
PY_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "update", "setdefault", "clear", "remove",
               "discard", "add", "popleft", "appendleft", "extendleft", "rotate", "sort", "reverse", "write",
               "writelines", "send", "throw", "close", "flush", "next", "manual_seed", "seed",
               "register_buffer", "register_parameter", "register_module", "add_module"}


# keyword arguments a library call may take without the result aliasing them (hyper-parameters)
_PLAIN_KEYWORDS = {"p", "training", "dim", "eps", "dtype", "device", "keepdim", "inplace"}
_LITERALS = (cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)
# unary operators that allocate a new tensor (`+x` is `torch.positive(x)`, which returns x itself)
_ALLOCATING_UNARY = (cst.Minus, cst.BitInvert)


def _torch_nn_class(func: cst.BaseExpression) -> bool:
    """``nn.X`` / ``torch.nn.X`` with a capitalised ``X``: a torch.nn module class."""
    parts = (dotted(func) or "").split(".")
    return parts[:-1] in (["nn"], ["torch", "nn"]) and parts[-1][:1].isupper()


def submodules(cls: cst.ClassDef | None) -> set[str]:
    """The attributes ``__init__`` of ``cls`` binds to a torch.nn module (``self.ln =
    nn.LayerNorm(...)``, ``self.layers = nn.ModuleList([nn.Linear(...)])``: every class
    constructed in the statement is ``nn.X``, and nothing else is appended to it), the only
    ``self.X(...)`` calls :func:`fresh_locals` takes as submodule calls. A module of the
    user's own may return its state (``return self.maxlen``, a buffer: adversarial review),
    and a method such as ``self.get_buffer(...)`` does."""
    out: set[str] = set()
    init = next((f for f in (m.findall(cls.body, m.FunctionDef(name=m.Name("__init__"))) if cls else [])), None)
    added: set[str] = set()   # containers something else is appended to later (`self.layers.append(Block())`)
    for call in m.findall(init.body, m.Call(func=m.Attribute(attr=m.Name("append") | m.Name("extend")
                                                                  | m.Name("insert")))) if init is not None else ():
        target = dotted(call.func.value) or ""
        built = [c for a in call.args for c in m.findall(a, m.Call()) if (dotted(c.func) or "").split(".")[-1][:1]
                 .isupper()]
        if any(not _torch_nn_class(c.func) for c in built) or not built:
            added.add(target)
    for node in m.findall(init.body, m.Assign()) if init is not None else ():
        value = node.value
        if not isinstance(value, cst.Call) or not _torch_nn_class(value.func):
            continue
        inner = [c for c in m.findall(value, m.Call()) if (dotted(c.func) or "").split(".")[-1][:1].isupper()]
        if any(not _torch_nn_class(c.func) for c in inner):
            continue
        for t in node.targets:
            chain = dotted(t.target) or ""
            if chain.startswith("self.") and chain.count(".") == 1 and chain not in added:
                out.add(chain.split(".", 1)[1])
    return out


def target_names(node: cst.CSTNode | None) -> list[str]:
    """Names bound by an assignment target (``a``, ``a, (b, *c)``); attributes and items bind none."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for el in node.elements for n in target_names(el.value)]
    if isinstance(node, cst.StarredElement):
        return target_names(node.value)
    return []


def fresh_locals(function: cst.FunctionDef, cls: cst.ClassDef | None = None) -> set[str]:
    """Local names of ``function`` every binding of which is a tensor allocated in this
    call: an arithmetic result (``a + b``, ``-a``), or a call whose arguments are fresh
    locals or literals, made through a submodule of ``cls`` (:func:`submodules`;
    ``self.ln``, ``self.layers[i]``), a ``torch``/``nn``/``F`` function (which may also
    take hyper-parameter keywords, ``p=self.dropout``) or a method of a fresh local (a view
    of a fresh tensor is fresh). An in-place update of such a local changes nothing outside
    the call: if the call fails before returning, nothing saw it (a submodule that returns
    a buffer or stashes its argument is for the state observation, which also watches the
    inputs). Parameters, loop and ``with`` targets, unpacked and augmented-only names are
    never fresh."""
    params = {p.name.value for p in m.findall(function.params, m.Param())}
    subs = submodules(cls)
    bindings: dict[str, list] = {}
    blocked: set[str] = set(params)
    for node in m.findall(function.body, m.Assign() | m.AnnAssign() | m.For() | m.With() | m.NamedExpr()
                          | m.CompFor() | m.Global() | m.Nonlocal() | m.Import() | m.ImportFrom()
                          | m.MatchAs() | m.MatchStar() | m.MatchMapping()):
        if isinstance(node, cst.Assign):
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                bindings.setdefault(node.targets[0].target.value, []).append(node.value)
            else:   # `a, b = ...` rebinds; `x[i] = v` and `x.a = v` bind nothing (helper-86's m9)
                blocked |= {n for t in node.targets for n in target_names(t.target)}
        elif isinstance(node, cst.AnnAssign):
            if isinstance(node.target, cst.Name) and node.value is not None:
                bindings.setdefault(node.target.value, []).append(node.value)
            else:
                blocked |= {n.value for n in m.findall(node.target, m.Name())}
        elif isinstance(node, (cst.For, cst.CompFor, cst.NamedExpr)):
            blocked |= {n.value for n in m.findall(node.target, m.Name())}
        elif isinstance(node, cst.With):
            blocked |= {n.value for item in node.items if item.asname for n in m.findall(item.asname, m.Name())}
        elif isinstance(node, (cst.MatchAs, cst.MatchStar)):
            blocked |= {node.name.value} if node.name is not None else set()
        elif isinstance(node, cst.MatchMapping):
            blocked |= {node.rest.value} if node.rest is not None else set()
        else:  # global / nonlocal / import: the name is not this call's local
            blocked |= {n.value for n in m.findall(node, m.Name())}
    fresh = {n for n in bindings if n not in blocked}

    def plain(v) -> bool:
        """A literal (``-1`` included), a fresh local, or a value allocated right there."""
        if isinstance(v, cst.UnaryOperation) and isinstance(v.operator, cst.Minus) and isinstance(v.expression, _LITERALS):
            return True
        return isinstance(v, _LITERALS) or (isinstance(v, cst.Name) and v.value in fresh | {"None", "True", "False"}) \
            or allocates(v)

    def allocates(value) -> bool:
        if isinstance(value, cst.BinaryOperation):
            return True
        if isinstance(value, cst.UnaryOperation):
            return isinstance(value.operator, _ALLOCATING_UNARY)
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        root = func
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        if not isinstance(func, (cst.Attribute, cst.Subscript)) or not isinstance(root, cst.Name):
            return False  # a bare name may be anything (a local alias of an input)
        head = func.value if isinstance(func, cst.Subscript) else func
        chain = dotted(head) or ""
        submodule = chain.startswith("self.") and chain.count(".") == 1 and chain[5:] in subs
        library = chain.split(".")[0] in ("torch", "nn", "F") and root.value not in fresh | params
        method = root.value in fresh and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
        if not (submodule or library or method):
            return False
        for arg in value.args:
            if arg.star:
                return False
            if library and arg.keyword is not None and arg.keyword.value in _PLAIN_KEYWORDS and \
                    (plain(arg.value) or isinstance(arg.value, cst.Attribute)):
                continue
            if not plain(arg.value):
                return False
        return True

    changed = True
    while changed:  # a fixpoint: a binding from a name that is not fresh spoils it
        changed = False
        for name in sorted(fresh):
            if not all(allocates(v) for v in bindings[name]):
                fresh.discard(name)
                changed = True
    return fresh


def _updates_fresh(small: cst.BaseSmallStatement, fresh: set[str]) -> bool:
    """``x op= ...``, ``x.add_(...)`` or ``x[i] = v`` on a fresh local ``x``, with no other
    in-place call (helper-86's m9: ``h[h.isnan()] = 0.0`` on ``h = text + audio``)."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        mutates = any((dotted(c.func) or "") in ("setattr", "delattr", "object.__setattr__")
                      or (dotted(c.func) or "").split(".")[-1] in PY_MUTATORS for c in m.findall(small, m.Call()))
        return isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) \
            and target.value.value in fresh and not inplace_call(small) and not has_out_kwarg(small) and not mutates
    if isinstance(small, cst.AugAssign):
        return isinstance(small.target, cst.Name) and small.target.value in fresh and not inplace_call(small.value) \
            and not has_out_kwarg(small)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Attribute):
        call = small.value
        receiver = call.func.value
        rest = [a.value for a in call.args]
        return (isinstance(receiver, cst.Name) and receiver.value in fresh and inplace_call(small) is not None
                and not any(inplace_call(a) for a in rest) and not has_out_kwarg(small))
    return False


def first_call_flags(function: cst.FunctionDef) -> set[int]:
    """The ids of the statement lines of ``function`` that only set a one-time flag under its
    own test (``if not getattr(self, "_ready", False): self._ready = True``): a write that
    happens on the first call alone, which the observation of the example run classifies."""
    out = set()
    for node in m.findall(function.body, m.If()):
        tested = {a.attr.value for a in m.findall(node.test, m.Attribute())} | {
            s.evaluated_value for s in m.findall(node.test, m.SimpleString()) if isinstance(s.evaluated_value, str)}
        for line in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if isinstance(line, cst.SimpleStatementLine) and all(
                    m.matches(small, m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))],
                                              value=m.Name("True") | m.Name("False") | m.Name("None") | m.Integer()))
                    and small.targets[0].target.attr.value in tested for small in line.body):
                out.add(id(line))
    return out


def state_change(function: cst.FunctionDef, cls: cst.ClassDef | None = None, *, fresh_ok: bool = True,
                 skip: set[int] = frozenset(), local_augassign: bool = True) -> str | None:
    """The first statement of ``function`` that changes state, as code, else None. With
    ``fresh_ok``, an in-place update of a fresh local (:func:`fresh_locals`, submodules
    read from ``cls``) is not one; statement lines whose ids are in ``skip`` are not read;
    without ``local_augassign``, ``name += ...`` on a plain local is not one (a callee's
    ``flag |= probe()``: transformers' ``is_tracing``)."""
    fresh = fresh_locals(function, cls) if fresh_ok else set()
    for stmt in m.findall(function.body, m.SimpleStatementLine()):
        if id(stmt) in skip:
            continue
        for small in stmt.body:
            if _updates_fresh(small, fresh):
                continue
            if inplace_call(small) or has_out_kwarg(small) or m.findall(
                    small, m.Arg(keyword=m.Name("inplace"), value=m.Name("True"))):
                return code_of(small).strip()
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            elif isinstance(small, cst.AugAssign):
                if local_augassign or not isinstance(small.target, cst.Name):
                    return code_of(small).strip()
            elif isinstance(small, cst.Del):
                targets = [small.target]
            elif isinstance(small, (cst.Global, cst.Nonlocal)):
                return code_of(small).strip()
            for target in targets:
                if m.findall(target, m.Attribute() | m.Subscript()) and not isinstance(target, cst.Name):
                    return code_of(small).strip()
            for call in m.findall(small, m.Call()):
                name = dotted(call.func) or ""
                if name in ("setattr", "delattr", "object.__setattr__") or name.split(".")[-1] in PY_MUTATORS:
                    return code_of(small).strip()
    return None


def enclosing_handler(inner: list[cst.CSTNode]) -> str | None:
    """The first handler among ``inner`` (the statements between a function and a site) that
    would see an exception differently once it is raised inside a compiled graph: ``"try"``
    for a ``try``, the item's source for a ``with`` that is not a ``torch.`` context; None."""
    for node in inner:
        if isinstance(node, cst.Try):
            return "try"
        if isinstance(node, cst.With):
            for item in node.items:
                ctx = item.item.func if isinstance(item.item, cst.Call) else item.item
                if not (dotted(ctx) or "").startswith("torch."):
                    return code_of(item.item).strip()
    return None
