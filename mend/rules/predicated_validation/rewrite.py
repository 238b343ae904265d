"""predicated-validation: :func:`rewrite`, a site -> the new module and its proof obligations, or
a decline."""
from __future__ import annotations

import ast
import hashlib

import libcst as cst
import libcst.matchers as m
from libcst.metadata import (BuiltinScope, ClassScope, GlobalScope, MetadataWrapper, ParentNodeProvider,
                             PositionProvider, ScopeProvider)

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import add_import, code_of as _code, dotted as _dotted, find_all, fresh_local, Replace
from mend.rules.predicated_validation.fresh import fresh_guard, guarded_body
from mend.rules.predicated_validation.screen import (MARKER, NAME, TABLE, _message, _screen, _total_static,
                                                      cast_of_item, split_chain)


def _site(wrapper: MetadataWrapper, line: int):
    """(node, ancestors) of the check reported at ``line``, else None."""
    pos = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    rank = {cst.If: 0, cst.Assert: 1, cst.Raise: 2, cst.Expr: 3}
    call = m.Expr(value=m.Call(func=m.Attribute(value=m.Name("torch"), attr=m.Name("_assert"))))
    found = [n for n in find_all(wrapper.module, m.If() | m.Assert() | m.Raise() | call) if pos[n].start.line == line]
    if not found:
        return None
    best = min(found, key=lambda n: rank[type(n)])
    chain, cur = [], best
    while cur in parents:
        cur = parents[cur]
        chain.append(cur)
    return best, list(reversed(chain))


def _locally_bound(scopes, node: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is bound in a function/comprehension scope enclosing ``node``."""
    scope = scopes.get(node)
    while scope is not None and not isinstance(scope, (GlobalScope, BuiltinScope)):
        if not isinstance(scope, ClassScope) and name in scope.assignments:
            return True
        scope = scope.parent
    return False


def _torch_binding(global_scope) -> str:
    """"import" when module-level ``torch`` comes from an import, "none", or "other"."""
    if "torch" not in global_scope.assignments:
        return "none"
    for a in global_scope.assignments["torch"]:
        node = getattr(a, "node", None)
        if not isinstance(node, cst.Import):
            return "other"
        for alias in node.names:
            if _dotted(alias.name).split(".")[0] == "torch" and (alias.asname is None or
                                                                 _code(alias.asname.name) == "torch"):
                break
        else:
            return "other"
    return "import"


def _qualname(chain: list[cst.CSTNode]) -> str:
    return ".".join(a.name.value for a in chain if isinstance(a, (cst.ClassDef, cst.FunctionDef)))


def _tables(module: cst.Module) -> dict[str, cst.SimpleStatementLine]:
    """Module-level ``_MEND_TRAPS*`` assignments."""
    out = {}
    for stmt in module.body:
        if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
            name = stmt.body[0].targets[0].target.value
            if name.startswith(TABLE):
                out[name] = stmt
    return out


def _is_trap_table(stmt: cst.SimpleStatementLine) -> bool:
    value = stmt.body[0].value
    return isinstance(value, cst.Dict) and all(
        isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and isinstance(e.value, cst.Lambda)
        for e in value.elements)


def _table_stmt(name: str, entries: list[tuple[str, str]]) -> cst.SimpleStatementLine:
    body = "".join(f"    {key}: {value},\n" for key, value in entries)
    return cst.parse_statement(f"{name} = {{\n{body}}}\n")


_TABLE_COMMENT = ("# mend: exceptions of checks rewritten into torch._assert_async, restored where the call "
                  "returns\n# by mend.validation_runtime.install(model).")


def _insert_table(module: cst.Module, stmt: cst.SimpleStatementLine) -> cst.Module:
    """Put a new table after the last top-level import (after the docstring when none)."""
    body = list(module.body)
    at = 0
    for i, s in enumerate(body):
        if isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in s.body):
            at = i + 1
        elif i == 0 and m.matches(s, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])):
            at = 1
    comment = [cst.EmptyLine(), *[cst.EmptyLine(comment=cst.Comment(c)) for c in _TABLE_COMMENT.splitlines()]]
    body.insert(at, stmt.with_changes(leading_lines=comment))
    if at + 1 < len(body) and not body[at + 1].leading_lines:
        top = isinstance(body[at + 1], (cst.FunctionDef, cst.ClassDef))
        body[at + 1] = body[at + 1].with_changes(leading_lines=[cst.EmptyLine()] * (2 if top else 1))
    return module.with_changes(body=body)


GUARDED = "_mend_cond"   # the local the guarded forms bind the condition to (fresh in the function)


# the dtypes whose CPU kernels compute what the mended check needs (logical_not, < <= == != > >=,
# isnan/isinf/isfinite: measured on torch 2.13); uint16/32/64, float8 and complex32 have no
# logical_not or comparison kernel, and complex no ordering (helper-85's F1, F2)
CHECK_DTYPES = ("(torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, "
                "torch.bfloat16, torch.float32, torch.float64)")
ITEM_LOCAL = "_mend_item"   # the local a guarded `.item()` form binds each tensor it reads to


# the dtypes a tensor read through `.item()` may have for its check to move into the graph: inductor
# fuses the ops computing a float16/bfloat16 or int8/int16 T with the check and skips T's rounding
# or wrap-around in its dtype, which the original's graph output keeps (helper-91: `(x.max() -
# x.min()).item() < 4.0` on bfloat16, `math.isinf((x.abs().max() * 1024).item())` on float16,
# `q.min().abs().item() > 100` on int8 all changed; float32/float64/int64/bool did not)
INT_DTYPES = "(torch.bool, torch.int64)"
FLOAT_DTYPES = "(torch.float32, torch.float64)"
ITEM_DTYPES = "(torch.bool, torch.int64, torch.float32, torch.float64)"


def _number_literal(text: str) -> int | float | None:
    """The value of an int or float literal (``-1``, ``0.1``, ``1e9``), else None."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if type(value) in (int, float) else None


def exact_compare_text(locals_: list[str], numbers: list[str], casts: frozenset = frozenset()) -> str:
    """When the widened tensor comparison (:func:`screen.widen`: each tensor cast to int64 or
    float64) is Python's exact comparison of the ``.item()`` values, by construction: every tensor
    of an integer dtype (bool included) and every number an int in int64 (compared in int64), or
    every tensor of a float dtype and every number a float or an int of at most 2**53 (compared
    in double: float16/bfloat16/float32 widen to float64 exactly). Elsewhere the cast would round
    or wrap: an int64 tensor against ``1e9``, an int beyond 2**63 (helper-87). A literal number's
    clause is decided here: it is left out where it holds, and its branch where it fails. ``casts``:
    the builtins wrapping ``.item()`` (:func:`screen.cast_of_item`): ``int`` keeps only the integer
    branch, ``float`` only the float one."""
    lits = {n: _number_literal(n) for n in numbers}
    branches = []
    if "float" not in casts and all(v is None or (type(v) is int and -2**63 <= v < 2**63) for v in lits.values()):
        branches.append([f"{lo}.dtype in {INT_DTYPES}" for lo in locals_]
                        + [f"type({n}) is int and -2**63 <= {n} < 2**63" for n in numbers if lits[n] is None])
    if "int" not in casts and all(v is None or type(v) is float or -2**53 <= v <= 2**53 for v in lits.values()):
        branches.append([f"{lo}.dtype in {FLOAT_DTYPES}" for lo in locals_]
                        + [f"(type({n}) is float or (type({n}) is int and -2**53 <= {n} <= 2**53))"
                           for n in numbers if lits[n] is None])
    if not branches:
        return "False"
    if len(branches) == 1:
        return f"({' and '.join(branches[0])})"
    return "(" + " or ".join(f"({' and '.join(b)})" for b in branches) + ")"


# the first clause of every guard: only compiled code asserts in the graph
COMPILING = "torch.compiler.is_compiling()"


def guard_text(local: str, dtype: bool = False) -> str:
    """The runtime test under which the check runs inside the graph (decided by Dynamo at trace
    time: type, element count and device are guarded, so it adds no break). ``dtype``: the
    check computes on the tensor (``logical_not``, a comparison), so its dtype must be one of
    :data:`CHECK_DTYPES` too."""
    # a sparse, mkldnn or quantized one-element CPU tensor passes the rest, and _assert_async has no
    # kernel for it (NotImplementedError, helper-81's c13): its layout and quantization keep it out
    return (f"type({local}) is torch.Tensor and {local}.numel() == 1 and {local}.device.type == 'cpu' and "
            f"{local}.layout == torch.strided and not {local}.is_quantized"
            + (f" and {local}.dtype in {CHECK_DTYPES}" if dtype else ""))


def _guarded(plan, local: str, marker: str, indent: int) -> list | cst.If:
    """The guarded form of ``if C: raise E(msg)`` (a list of two statements: bind, then test) or of
    ``assert not C, msg`` (the same inside ``if __debug__:``)::

        L = C
        if torch.compiler.is_compiling() and type(L) is torch.Tensor and L.numel() == 1 and L.device.type == 'cpu' and L.layout == torch.strided and not L.is_quantized:
            torch._assert_async(torch.logical_not(L), MARKER)    # `if not C`: (L, MARKER)
        elif L:                                                  # `if not C`: elif not L:
            raise E(msg)                                         # the original raise, verbatim
    """
    holds = f"torch.logical_not({local})" if plan.raise_if_true else local
    failing = local if plan.raise_if_true else f"not {local}"
    asserted = f"{'not ' * plan.raise_if_true}{local}"
    bind = cst.parse_statement(f"{local} = {_code(plan.core)}\n")
    return _guarded_form(plan, [bind], guard_text(local, dtype=plan.raise_if_true), holds, failing, asserted,
                         marker, indent)


def _guarded_form(plan, binds: list, guard: str, holds: str, failing: str, asserted: str, marker: str,
                  indent: int) -> list | cst.If:
    """``binds``, then ``if guard: torch._assert_async(holds, MARKER)`` with the original check as
    the fallback -- ``elif failing:`` and the original raise, verbatim (an if/raise, kept by
    ``python -O``), or ``else: assert asserted, msg`` (an assert, inside ``if __debug__:``)."""
    call = f"torch._assert_async({holds}, {marker})"
    if indent + 4 + len(call) > 100:  # one argument a line, as black would
        call = f"torch._assert_async(\n        {holds},\n        {marker},\n    )"
    if plan.form == "if-raise":
        fallback = f"elif {failing}:\n    raise _\n"
    else:
        msg = plan.stmt.body[0].msg
        fallback = f"else:\n    assert {asserted}" + (f", {_code(msg)}" if msg is not None else "") + "\n"
    # eager (not compiling) runs the original check itself: its exception is exact there without
    # mend.validation_runtime.install (helper-102); Dynamo folds is_compiling() at trace time
    test = cst.parse_statement(f"if {COMPILING} and {guard}:\n    {call}\n{fallback}")
    if plan.form == "if-raise":   # the original raise statement, layout kept
        test = test.with_changes(orelse=test.orelse.with_changes(body=plan.stmt.body))
        return [binds[0].with_changes(leading_lines=plan.stmt.leading_lines), *binds[1:], test]
    return cst.If(test=cst.Name("__debug__"), body=cst.IndentedBlock([*binds, test]),
                  leading_lines=plan.stmt.leading_lines)


class _Swap(cst.CSTTransformer):
    """Every expression whose code is one of ``swap``'s keys, replaced by that local's name."""

    def __init__(self, swap: dict[str, str]):
        self.swap, self.names = swap, set()   # names that are not reads: `x.attr`'s attr, `f(k=...)`'s k

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.names.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.names.add(id(node.keyword))

    def on_leave(self, original_node, updated_node):
        if isinstance(original_node, cst.BaseExpression) and id(original_node) not in self.names:
            local = self.swap.get(_code(original_node).strip())
            if local is not None:
                return cst.Name(local)
        return updated_node


def _guarded_items(plan, marker: str, indent: int) -> tuple[cst.CSTNode | list, list[tuple[str, str]]]:
    """The guarded form of ``assert T.item() <op> E, msg`` / ``if T.item() <op> E: raise ...``
    (``math.isnan(T.item())``, a bare ``T.item()``), and (local, tensor's source) for each
    local it binds::

        L = T                                   # each tensor read through `.item()`, once, in order
        if is_compiling() and <guard_text(L, dtype=True)>:   # for every L
            torch._assert_async(<the tensor condition on L>, MARKER)
        else:                                   # if/raise: `elif <its test on L>: raise ...`, verbatim
            assert <the original test on L>, msg

    Anything but a one-element plain CPU tensor of a dtype the comparison has a kernel for runs
    the original check on the same values (helper-85's F2: several elements, a Python int or
    uint16 raised other errors, and under inductor a two-element tensor passed). The tensors
    and the compared values are pure (the rule's screen), so reading each tensor once, first,
    changes no value."""
    nodes = {}   # each tensor's source -> its node, in the order the test reads them
    for c in m.findall(plan.test, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
        nodes.setdefault(_code(c.func.value).strip(), c.func.value)
    receivers = list(nodes)
    taken, locals_ = set(), []
    for _ in receivers:
        locals_.append(fresh_local(plan.function, ITEM_LOCAL, taken))
        taken.add(locals_[-1])
    swap = _Swap(dict(zip(receivers, locals_)))
    holds = _code(plan.holds.visit(swap))
    swapped = plan.test.visit(swap)   # a comparison inside a tensor read (`(ids < n).all().item()`) is the tensor's
    test = _code(swapped)
    if m.findall(swapped, m.Comparison()):   # compared with numbers or each other: where the cast is exact
        numbers = list(dict.fromkeys(plan.numbers or ()))
        casts = frozenset(filter(None, (cast_of_item(c) for c in m.findall(plan.test, m.Call()))))
        guard = " and ".join([guard_text(local) for local in locals_] + [exact_compare_text(locals_, numbers, casts)])
    else:   # a truth value or math.isnan/isinf/isfinite: any dtype those kernels take
        guard = " and ".join(f"{guard_text(local)} and {local}.dtype in {ITEM_DTYPES}" for local in locals_)
    binds = [cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(local))], nodes[r])])
             for r, local in zip(receivers, locals_)]
    return _guarded_form(plan, binds, guard, holds, test, test, marker, indent), list(zip(locals_, receivers))


def _split(plan, chain: list[cst.CSTNode], exc_code: str, table: str, indent: int) -> tuple[cst.If, list]:
    """``assert A and B, msg`` as one check per operand, in order, inside ``if __debug__:``:
    a Python-level operand stays ``assert A, msg`` (Dynamo decides it at trace time), a tensor
    one takes the guarded form with its own local and trap id (the same exception restored)."""
    msg = plan.stmt.body[0].msg
    tail = f", {_code(msg)}" if msg is not None else ""
    body, split, taken = [], [], set()
    for i, (core, negated, static, written) in enumerate(plan.parts):
        if static:
            body.append(cst.parse_statement(f"assert {_code(written).strip()}{tail}\n"))
            continue
        local = fresh_local(plan.function, GUARDED, taken)
        taken.add(local)
        key = hashlib.sha1("\n".join([_qualname(chain), _code(written), exc_code, str(i)]).encode()).hexdigest()[:12]
        marker = f'f"{MARKER}:{{__name__}}:{table}.{key}"'
        part = _PartPlan(plan.stmt, negated, core)
        body.extend(_guarded(part, local, marker, indent).body.body)
        split.append((local, key, part))
    return cst.If(test=cst.Name("__debug__"), body=cst.IndentedBlock(body), leading_lines=plan.stmt.leading_lines), split


class _PartPlan:
    """One operand of a split ``assert A and B`` as :func:`_guarded` reads a plan."""
    form = "assert"

    def __init__(self, stmt, raise_if_true: bool, core: cst.BaseExpression):
        self.stmt, self.raise_if_true, self.core = stmt, raise_if_true, core

    @property
    def raises_when(self) -> str:
        return _code(self.core) if self.raise_if_true else f"not ({_code(self.core)})"

    @property
    def asserts(self) -> str:
        return f"torch.logical_not({_code(self.core)})" if self.raise_if_true else _code(self.core)


def _split_detail(split: list, guard) -> str:
    return (f"assert A and B -> one check per operand ({len(split)} in the graph: "
            + ", ".join(f"`{local}`" for local, _, _ in split)
            + "), each torch._assert_async under a one-element CPU tensor guard, the original assert otherwise; "
            "AssertionError restored outside the graph by mend.validation_runtime.install(model)"
            + (f"; only when `{guard.name}` is made in this call" if guard is not None else ""))


CPU_ONLY = {"kind": "cpu-only",
            "note": "on CUDA _assert_async drops the message and raises a fatal device-side assert (pytorch#131491)"}


def _boundary_obligations(guard, first_failure: str, trap: str | None = None) -> list[dict]:
    """The obligations every form of the check shares: the rest of the forward unchanged when it
    passes, which failure is reported first (``first_failure``: why), the exception restored at
    the boundary (``trap``: the entry, when the verifier is not to take the first raise's), and no
    state left different by a failing call (``guard``: the object made in this call, if any)."""
    return [
        {"kind": "same-result-when-passing"},
        {"kind": "first-failure-wins", "note": first_failure},
        {"kind": "restore-at-boundary", "runtime": "mend.validation_runtime.install", **({"trap": trap} if trap else {}),
         "note": "without the runtime the mended code raises RuntimeError('mend-trap:...')"},
        {"kind": "state-unchanged-on-raise",
         "note": "module buffers/attributes after a failing call equal eager's; the function was screened, "
                 "callees (e.g. BatchNorm in training) and callers in the same graph were not",
         **({"fresh": {"name": guard.name, "made": guard.made, "flag": guard.flag, "keywords": guard.keywords}}
            if guard is not None else {})},
    ]


def _split_obligations(plan, split: list, table: str, message: str, guard) -> list[dict]:
    """Per tensor operand: its raise condition against its assert, its guarded form and its
    one-element condition; for the statement: the obligations of one check, plus the operands
    computed speculatively inside the graph (``speculated-operands``, the rule's static screen)."""
    obs = []
    for local, key, part in split:
        trap = f"{table}.{key}"
        obs += [{"kind": "raises-iff-original", "exception": "AssertionError", "message": message, "args": plan.args,
                 "raises_when": part.raises_when, "asserts": part.asserts, "trap": trap, "guarded": local},
                {"kind": "guarded-check", "local": local, "condition": _code(part.core),
                 "raises_when": part.raises_when, "raise_if_true": part.raise_if_true, "trap": trap},
                {"kind": "condition-is-tensor", "asserts": part.asserts,
                 "note": "the operand must be a one-element tensor; elsewhere the runtime guard keeps the original "
                         "assert"}]
    first = next(i for i, (_, _, static, _) in enumerate(plan.parts) if not static)
    later = [(c, static and _total_static(c)) for c, _, static, _ in plan.parts[first + 1:]]
    screened = [_code(c).strip() for c, python_level in later if not python_level]   # without a leading `not`
    python_level = [_code(c).strip() for c, python_level in later if python_level]
    return obs + [
        *_boundary_obligations(guard, "every operand raises the same AssertionError and message, so which one fails "
                               "first does not show", trap=f"{table}.{split[0][1]}"),
        CPU_ONLY,
        {"kind": "speculated-operands", "operands": screened, "python_level": python_level,
         "note": "inside the graph each later operand is computed even where an earlier check fails (Python skipped "
                 "it), and Dynamo traces it on every call: the rule's static screen admits names, attribute chains "
                 "of self/torch, literals, arithmetic and comparisons with a number on one side, and one-tensor "
                 "predicates and reductions without a dim; a total Python-level test (python_level) is decided at "
                 "trace time"},
    ]


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """Rewrite the check reported at ``line`` of ``module`` (see the module docstring)."""
    wrapper = MetadataWrapper(module)
    site = _site(wrapper, line)
    if site is None:
        return Decline(NAME, f"no `if`/`assert`/`raise` statement starts on line {line}")
    plan = _screen(*site)
    if isinstance(plan, Decline):
        return plan
    if plan.chain_top is not None:  # an arm of an if/elif chain: split the chain, then rewrite the arm
        return rewrite(wrapper.module.visit(Replace(plan.chain_top, cst.FlattenSentinel(split_chain(plan.chain_top)))),
                       line)
    scopes = wrapper.resolve(ScopeProvider)
    tree = wrapper.module
    global_scope = scopes[tree]
    root = _dotted(plan.exc.func if isinstance(plan.exc, cst.Call) else plan.exc).split(".")[0]
    if plan.form == "if-raise" and (_locally_bound(scopes, plan.stmt, root) or root not in global_scope):
        return Decline(NAME, f"the exception class `{root}` is not a module-level or builtin name; the "
                             "restore table lives at module level")
    for name in ("torch", "__name__"):
        if _locally_bound(scopes, plan.stmt, name):
            return Decline(NAME, f"`{name}` is rebound inside the function")
    binding = _torch_binding(global_scope)
    if binding == "other" or "__name__" in global_scope.assignments:
        return Decline(NAME, "module-level `torch` or `__name__` is bound to something else")

    pos = wrapper.resolve(PositionProvider)
    span = (pos[plan.stmt].start.line, pos[plan.stmt].end.line)
    exc = plan.exc
    if isinstance(exc, cst.Call):  # one line: drop the original layout inside the parentheses
        exc = cst.Call(func=exc.func, args=[cst.Arg(a.value) for a in exc.args])
    exc_code = _code(exc)
    key = hashlib.sha1("\n".join([_qualname(site[1]), _code(plan.test), exc_code]).encode()).hexdigest()[:12]

    tables = _tables(tree)
    table = next((n for n, s in tables.items() if _is_trap_table(s)), None)
    if table is None:
        table = TABLE if TABLE not in global_scope.assignments else next(
            f"{TABLE}_{i}" for i in range(1, 1000) if f"{TABLE}_{i}" not in global_scope.assignments)
    marker = f'f"{MARKER}:{{__name__}}:{table}.{key}"'
    indent = pos[plan.stmt].start.column + (4 if plan.form == "assert" else 0)
    holds = _code(plan.holds)
    local, item_locals = None, []
    entries = [(f'"{key}"', f"lambda: {exc_code}")]
    split = []      # `assert A and B`: (local, trap key, part) of each tensor operand, checked in turn
    if plan.parts is not None:
        new, split = _split(plan, site[1], exc_code, table, indent)
        entries = [(f'"{k}"', f"lambda: {exc_code}") for _, k, _ in split]
    elif plan.call is not None:   # torch._assert: anything but a one-element plain CPU tensor keeps the call,
        # and so does eager (not compiling), which then raises the original exception without the restore
        kept = plan.call.with_changes(args=[plan.call.args[0].with_changes(value=cst.Name("_mend_c")),
                                            plan.call.args[1]])
        call = cst.parse_expression(
            f"(lambda _mend_c: torch._assert_async(_mend_c, {marker}) if torch.compiler.is_compiling() and "
            f"type(_mend_c) is torch.Tensor and "
            f"_mend_c.numel() == 1 and _mend_c.device.type == 'cpu' and _mend_c.layout == torch.strided and "
            f"not _mend_c.is_quantized else {_code(kept)})({holds})")
        new: cst.CSTNode | list = cst.SimpleStatementLine([cst.Expr(call)], leading_lines=plan.stmt.leading_lines)
    elif plan.items is None:
        # `if C: raise E(msg)`, `assert not C`: C is bound to a local where the check read it, and
        # only a one-element plain CPU tensor goes into the graph; anything else (a Python number,
        # several elements, a subclass, another device: helper-50) runs the original check
        local = fresh_local(plan.function, GUARDED)
        holds = f"torch.logical_not({_code(plan.core)})" if plan.raise_if_true else _code(plan.core)
        new = _guarded(plan, local, marker, indent)
    else:  # `T.item() <op> E`: `python -O` strips an assert, so `if __debug__:` wraps its check; an if/raise it keeps
        new, item_locals = _guarded_items(plan, marker, indent)
    cls = next((a for a in reversed(site[1]) if isinstance(a, cst.ClassDef)), None)
    guard = fresh_guard(tree, plan.function, plan.stmt, cls)
    if guard is not None:
        why = f"the check below is in the graph only for a `{guard.name}` made here, in eval mode"
        tree = tree.visit(Replace(plan.function, guarded_body(plan.function, plan.stmt, new, guard, why)))
    else:
        tree = tree.visit(Replace(plan.stmt, cst.FlattenSentinel(new) if isinstance(new, list) else new))

    existing = _tables(tree).get(table)
    if existing is not None:
        kept = [(_code(e.key), _code(e.value)) for e in existing.body[0].value.elements]
        for entry in entries:
            if entry[0] in (k for k, _ in kept):
                if entry not in kept:
                    return Decline(NAME, f"the trap id {entry[0]} is already used for another exception")
            else:
                kept.append(entry)
        replacement = _table_stmt(table, kept).with_changes(leading_lines=existing.leading_lines)
        tree = tree.visit(Replace(existing, replacement))
    if binding == "none":
        tree = add_import(tree, "import torch")
    if existing is None:
        tree = _insert_table(tree, _table_stmt(table, entries))

    message = _message(plan.args)
    if split:
        return RewriteResult(tree.code, span, _split_detail(split, guard), _split_obligations(
            plan, split, table, message, guard))
    what = "assert" if plan.form == "assert" else "if/raise"
    detail = (f"{what} -> torch._assert_async(...); {plan.exc_name} restored outside the "
              f"graph by mend.validation_runtime.install(model)" + (
                  f"; the condition bound to `{local}`, the original check kept unless it is a one-element CPU "
                  "tensor" if local else "") + (
                  f"; only when `{guard.name}` is made in this call (`{guard.made[:60]}`), the original check "
                  f"kept for one passed in" if guard is not None else ""))
    obligations = [
        {"kind": "raises-iff-original", "exception": plan.exc_name, "message": message, "args": plan.args,
         "raises_when": _code(plan.fails_when), "asserts": holds, "trap": f"{table}.{key}",
         **({"guarded": local} if local else {}),
         **({"items": plan.items, "numbers": plan.numbers,
             "note": "the original reads the tensors on the host (`.item()`: an integer's value, a float's value "
                     "widened to float64) and compares Python numbers exactly; the mended check compares tensors "
                     "with Python numbers (the number rounded to the tensor's dtype in eager, compared exactly by "
                     "some compiled lowerings): both semantics must give the original's truth"}
            if plan.items else {})},
        *_boundary_obligations(guard, "when several checks of one graph fail, the first in program order is "
                               "reported: one check in the file, or every check restoring the same exception "
                               "(inductor may run two checks of one graph in either order, helper-91)"),
        {"kind": "condition-is-tensor",
         "note": "the condition must be a one-element tensor; a Python bool makes _assert_async raise TypeError"
                 + ("; elsewhere the runtime guard keeps the original check" if local else "")},
        *([{"kind": "guarded-check", "local": local, "condition": _code(plan.core), "raises_when": _code(plan.fails_when),
            "raise_if_true": plan.raise_if_true, "trap": f"{table}.{key}"}] if local else []),
        *([{"kind": "guarded-item-check", "locals": item_locals, "asserts": holds, "test": _code(plan.test),
            "numbers": list(dict.fromkeys(plan.numbers or ())), "form": plan.form, "trap": f"{table}.{key}"}]
          if item_locals else []),
        CPU_ONLY,
    ]
    return RewriteResult(tree.code, span, detail, obligations)


# --- examples (Fixit style): FIX (before, exact after) and DECLINE (source, reason) -----------
# The site is the first `if`/`assert` line (see :func:`example_line`).
