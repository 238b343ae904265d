"""Rule: predicated validation (GraphMend paper §4, "[Trap]").

``if <tensor cond>: raise E(msg)`` and a tensor ``assert cond, msg`` become one
``torch._assert_async`` inside the graph. The original exception is kept, verbatim, in a
module-level table of factories (``_MEND_TRAPS = {"<id>": lambda: E(msg)}``); the assert
carries the marker ``mend-trap:<module>:<table>.<id>`` as its message, and
:mod:`mend.validation_runtime` (``install(model)``) turns the ``RuntimeError`` carrying
that marker back into ``E(msg)`` where the call returns, outside the compiled region.

Measured on torch 2.13 (CPU): ``_assert_async`` raises ``RuntimeError(msg)`` with the
message intact in eager and under the eager, aot_eager and inductor backends (also with
``dynamic=True``, ``fullgraph=True``, ``cpp_wrapper``). The marker is exact there; on CUDA
the message is dropped and the failure is a fatal device-side assert (pytorch#131491), so
the restore is CPU-only (an obligation of every fix).

Fix safety -- declined, with the reason, when:

* the message is formatted from runtime values (f-string, ``%``, ``.format``, a name):
  restoring it needs the values on the host at the point of failure (shared case 023);
* the function containing the check also changes state anywhere (in-place tensor ops,
  ``out=``, attribute/item writes, ``x += ...``, container mutators): with the check
  inside the graph, inductor runs later in-place updates before the failed assert
  surfaces, and aot_eager drops earlier ones (it applies mutations after the graph), so
  the failing call would leave different state than eager (measured; case 023);
* the condition is an ``and``/``or`` (short-circuit evaluation), binds a name (walrus),
  or is computed from shapes and literals only (Dynamo already decides it at trace time);
* the statement is ``assert <cond>[, "literal"]`` without a leading ``not``: Dynamo lowers
  that form to ``_assert_async`` itself (no break; shared cases 021/024), so only
  ``assert not <cond>[, "literal"]`` is rewritten;
* a ``try``/non-torch ``with`` encloses the check in the function (a local handler would
  see a RuntimeError instead of ``E``), the check sits in a loop or outside a function,
  the raise has a ``from`` clause, the ``if`` has an ``else``/``elif`` or does more than
  raise, the exception is built from a local name, or a comment would be dropped.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import (BuiltinScope, ClassScope, GlobalScope, MetadataWrapper, ParentNodeProvider,
                             PositionProvider, ScopeProvider)

from mend.locate import Located
from mend.rules import Decline, Match, RewriteResult
from mend.rules._effects import Replace, code_of as _code, dotted as _dotted, has_out_kwarg, inplace_call

NAME = "predicated-validation"
TABLE = "_MEND_TRAPS"        # module-level table of exception factories (suffixed on collision)
MARKER = "mend-trap"         # marker prefix, parsed by mend.validation_runtime

_PY_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "update", "setdefault", "clear", "remove",
                "discard", "register_buffer", "register_parameter", "register_module", "add_module"}
_SHAPE_ATTRS = {"shape", "ndim"}
_SHAPE_CALLS = {"size", "dim", "numel", "len"}
_NEGATE = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}  # exact for tensors, NaN included


@dataclass
class _Plan:
    stmt: cst.CSTNode              # the If, or the SimpleStatementLine holding the Assert
    function: cst.FunctionDef
    form: str                      # "if-raise" | "assert"
    test: cst.BaseExpression       # the statement's test, as written
    fails_when: cst.BaseExpression  # when it raises (`assert not X` raises when X holds)
    holds: cst.BaseExpression      # what _assert_async must find true
    exc: cst.BaseExpression        # the exception expression, restored verbatim
    exc_name: str
    args: list




def _literal(node: cst.BaseExpression):
    """The value of a string/number literal (implicit concatenation included), else raise."""
    if m.findall(node, m.FormattedString()):
        raise ValueError("formatted")
    if not isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)):
        raise ValueError("not a literal")
    return ast.literal_eval(_code(node).strip() if not isinstance(node, cst.ConcatenatedString)
                            else "(" + _code(node) + ")")


def constant_message(exc: cst.BaseExpression | None) -> bool:
    """True for ``E`` / ``E()`` / ``E("literal", 3)``; False for formatted or computed messages."""
    return not isinstance(_exception(exc), str)


def _exception(exc: cst.BaseExpression | None) -> tuple[str, list] | str:
    """(dotted class name, literal args) or the reason it is not a constant exception."""
    if exc is None:
        return "a bare `raise` re-raises the active exception"
    func, args = (exc.func, exc.args) if isinstance(exc, cst.Call) else (exc, ())
    name = _dotted(func)
    if name is None:
        return "the exception class is computed, not a name"
    if name.split(".")[0] in ("self", "cls"):
        return f"the exception class `{name}` is read from the instance"
    values = []
    for arg in args:
        if arg.keyword is not None or arg.star:
            return "the exception takes keyword or unpacked arguments"
        try:
            values.append(_literal(arg.value))
        except (ValueError, SyntaxError):
            return ("the exception message is formatted from runtime values (f-string or expression); "
                    "restoring it would need the tensor values on the host")
    return name, values


def _message(args: list) -> str:
    """What ``str(E(*args))`` gives for an exception keeping BaseException.__str__."""
    return "" if not args else str(args[0]) if len(args) == 1 else str(tuple(args))


def _shape_only(expr: cst.BaseExpression) -> bool:
    """True when every operand is a shape/size/len term or a literal."""
    def ok(node) -> bool:
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            return True
        if isinstance(node, cst.Name):
            return node.value in ("True", "False", "None")
        if isinstance(node, cst.Attribute):
            return node.attr.value in _SHAPE_ATTRS
        if isinstance(node, cst.Subscript):
            return ok(node.value) and all(isinstance(e.slice, cst.Index) and ok(e.slice.value) for e in node.slice)
        if isinstance(node, cst.Call):
            name = _dotted(node.func) or ""
            return name.split(".")[-1] in _SHAPE_CALLS and all(ok(a.value) for a in node.args)
        if isinstance(node, cst.UnaryOperation):
            return ok(node.expression)
        if isinstance(node, cst.BinaryOperation):
            return ok(node.left) and ok(node.right)
        if isinstance(node, cst.Comparison):
            return ok(node.left) and all(ok(c.comparator) for c in node.comparisons)
        return False
    return ok(expr)


def _strip_not(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    """(core, negated): ``not not x`` -> (x, False); parentheses are dropped."""
    negated = False
    while isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        negated = not negated
        expr = expr.expression
    return expr.with_changes(lpar=[], rpar=[]) if hasattr(expr, "lpar") else expr, negated


def _negate(expr: cst.BaseExpression) -> cst.BaseExpression:
    """A tensor expression true exactly when ``expr``'s truth value is false."""
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        op = type(expr.comparisons[0].operator)
        if op in _NEGATE:
            target = expr.comparisons[0].with_changes(operator=_NEGATE[op]())
            return expr.with_changes(comparisons=[target], lpar=[], rpar=[])
    return cst.parse_expression("torch.logical_not(_)").with_changes(args=[cst.Arg(expr)])


def _mutation(function: cst.FunctionDef) -> str | None:
    """The first statement of ``function`` that changes state, as code, else None."""
    for stmt in m.findall(function.body, m.SimpleStatementLine()):
        for small in stmt.body:
            if inplace_call(small) or has_out_kwarg(small) or m.findall(
                    small, m.Arg(keyword=m.Name("inplace"), value=m.Name("True"))):
                return _code(small).strip()
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            elif isinstance(small, cst.AugAssign):
                return _code(small).strip()
            elif isinstance(small, cst.Del):
                targets = [small.target]
            elif isinstance(small, (cst.Global, cst.Nonlocal)):
                return _code(small).strip()
            for target in targets:
                if m.findall(target, m.Attribute() | m.Subscript()) and not isinstance(target, cst.Name):
                    return _code(small).strip()
            for call in m.findall(small, m.Call()):
                name = _dotted(call.func) or ""
                if name in ("setattr", "delattr", "object.__setattr__") or name.split(".")[-1] in _PY_MUTATORS:
                    return _code(small).strip()
    return None


def _comments(node: cst.CSTNode, keep: cst.CSTNode) -> bool:
    """Whether ``node`` holds a comment other than the leading lines of ``keep``."""
    stripped = keep.with_changes(leading_lines=[]) if hasattr(keep, "leading_lines") else keep
    return bool(m.findall(stripped, m.Comment()))


def _screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> _Plan | Decline:
    """Syntactic checks shared by :func:`match` and :func:`rewrite`."""
    chain = list(ancestors)
    if isinstance(node, cst.Raise):  # a report on the raise line: the `if` around it is the site
        parents = [a for a in chain if isinstance(a, cst.If)]
        if_ = parents[-1] if parents else None
        if if_ is None or if_.body.body[0] is not chain[-1]:
            return Decline(NAME, "the raise is not the whole body of an `if`")
        node, chain = if_, chain[:chain.index(if_)]
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        chain, node = chain + [node], node.body[0]
    function = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), None)
    inner = chain[chain.index(function) + 1:] if function is not None else chain
    if function is None:
        return Decline(NAME, "the check is not inside a function")
    if any("jit" in (_dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
           for a in chain if isinstance(a, cst.FunctionDef) for d in a.decorators):
        return Decline(NAME, "the function is compiled by TorchScript, which cannot read the marker's `__name__`")
    if any(isinstance(a, (cst.For, cst.While)) for a in inner):
        return Decline(NAME, "the check sits inside a loop: Dynamo skips the whole frame there, and unrolling "
                             "the loop with one assert per iteration is not attempted")
    if any(isinstance(a, cst.Try) for a in inner):
        return Decline(NAME, "a `try` around the check in the same function would see a RuntimeError "
                             "instead of the original exception")
    for w in (a for a in inner if isinstance(a, cst.With)):
        for item in w.items:
            call = item.item.func if isinstance(item.item, cst.Call) else item.item
            if not (_dotted(call) or "").startswith("torch."):
                return Decline(NAME, f"the check is inside `with {_code(item.item)}`, whose exit would see a "
                                     "RuntimeError instead of the original exception")
    if isinstance(node, cst.If):
        if node.orelse is not None:
            return Decline(NAME, "the raising `if` has an else/elif arm")
        body = node.body.body
        small = body[0].body if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) else []
        if len(small) != 1 or not isinstance(small[0], cst.Raise):
            return Decline(NAME, "the guarded body does more than raise")
        raise_ = small[0]
        if raise_.cause is not None:
            return Decline(NAME, "the raise has a `from` clause (exception chaining is not restored)")
        form, stmt, exc, test = "if-raise", node, raise_.exc, node.test
    elif isinstance(node, cst.Assert):
        stmt = chain[-1]
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return Decline(NAME, "the assert shares its line with other statements")
        if node.msg is not None:
            try:
                _literal(node.msg)
            except (ValueError, SyntaxError):
                return Decline(NAME, "the assert message is formatted from runtime values (f-string or "
                                     "expression); restoring it would need the tensor values on the host")
        form, exc, test = "assert", None, node.test
    else:
        return Decline(NAME, "the check is not an `if ...: raise` or `assert` statement")
    if form == "if-raise":
        parsed = _exception(exc)
        if isinstance(parsed, str):
            return Decline(NAME, parsed)
        exc_name, args = parsed
    else:
        exc_name, args = "AssertionError", [] if node.msg is None else [_literal(node.msg)]
        exc = cst.parse_expression("AssertionError()")
        if node.msg is not None:
            exc = exc.with_changes(args=[cst.Arg(node.msg)])
    core, negated = _strip_not(test)
    if form == "assert" and not negated and not isinstance(core, cst.BooleanOperation):
        return Decline(NAME, "Dynamo already compiles `assert <tensor>` with a literal or no message into "
                             "torch._assert_async without a break; nothing to rewrite")
    if isinstance(core, cst.BooleanOperation):
        return Decline(NAME, "the condition is an `and`/`or`: short-circuit evaluation has no single "
                             "tensor predicate")
    if m.findall(test, m.NamedExpr() | m.Lambda() | m.Yield() | m.Await()):
        return Decline(NAME, "the condition binds a name or defines/awaits a function")
    if _shape_only(core):
        return Decline(NAME, "the condition is computed from shapes and literals only; Dynamo decides it "
                             "at trace time (a guard), so there is no break to remove")
    if _comments(stmt, stmt):
        return Decline(NAME, "the check holds a comment the rewrite would drop")
    effect = _mutation(function)
    if effect is not None:
        return Decline(NAME, f"the function also changes state (`{effect[:60]}`): with the check inside the "
                             "graph, inductor runs later in-place updates before the failed assert surfaces and "
                             "aot_eager drops earlier ones, so a failing call would leave different state")
    fails_is_true = (form == "if-raise") != negated  # raise when `core` is truthy?
    holds = _negate(core) if fails_is_true else core
    fails_when = test.with_changes(lpar=[], rpar=[]) if hasattr(test, "lpar") else test
    return _Plan(stmt, function, form, test, core if form == "assert" else fails_when, holds, exc, exc_name, args)


def match(loc: Located) -> Match | Decline:
    plan = _screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    if plan.form == "assert":
        return Match(NAME, "assert -> torch._assert_async, AssertionError restored outside the graph")
    return Match(NAME, f"if/raise -> torch._assert_async, {plan.exc_name} restored outside the graph")


# --- rewrite ----------------------------------------------------------------------------

def _site(wrapper: MetadataWrapper, line: int):
    """(node, ancestors) of the check reported at ``line``, else None."""
    pos = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    rank = {cst.If: 0, cst.Assert: 1, cst.Raise: 2}
    found = [n for n in m.findall(wrapper.module, m.If() | m.Assert() | m.Raise()) if pos[n].start.line == line]
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


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """Rewrite the check reported at ``line`` of ``module`` (see the module docstring)."""
    wrapper = MetadataWrapper(module)
    site = _site(wrapper, line)
    if site is None:
        return Decline(NAME, f"no `if`/`assert`/`raise` statement starts on line {line}")
    plan = _screen(*site)
    if isinstance(plan, Decline):
        return plan
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
    call = cst.parse_expression(f"torch._assert_async(_, {marker})")
    call = call.with_changes(args=[cst.Arg(plan.holds), *call.args[1:]])
    indent = pos[plan.stmt].start.column + (4 if plan.form == "assert" else 0)
    if indent + len(_code(call)) > 100:  # one argument a line, as black would
        call = cst.parse_expression(f"torch._assert_async(\n    {_code(plan.holds)},\n    {marker},\n)")
    if plan.form == "if-raise":
        new: cst.CSTNode = cst.SimpleStatementLine([cst.Expr(call)], leading_lines=plan.stmt.leading_lines)
    else:  # `python -O` strips asserts; so does `if __debug__:`
        new = cst.If(test=cst.Name("__debug__"), body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Expr(call)])]),
                     leading_lines=plan.stmt.leading_lines)
    tree = tree.visit(Replace(plan.stmt, new))

    entry = (f'"{key}"', f"lambda: {exc_code}")
    existing = _tables(tree).get(table)
    if existing is not None:
        entries = [(_code(e.key), _code(e.value)) for e in existing.body[0].value.elements]
        if entry[0] in (k for k, _ in entries):
            if entry not in entries:
                return Decline(NAME, f"the trap id {key} is already used for another exception")
        else:
            entries.append(entry)
        replacement = _table_stmt(table, entries).with_changes(leading_lines=existing.leading_lines)
        tree = tree.visit(Replace(existing, replacement))
    if binding == "none":
        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, "torch")
        tree = AddImportsVisitor(context).transform_module(tree)
    if existing is None:
        tree = _insert_table(tree, _table_stmt(table, [entry]))

    message = _message(plan.args)
    what = "assert" if plan.form == "assert" else "if/raise"
    detail = (f"{what} -> torch._assert_async(..., marker {table}.{key}); {plan.exc_name} restored outside the "
              f"graph by mend.validation_runtime.install(model)")
    obligations = [
        {"kind": "raises-iff-original", "exception": plan.exc_name, "message": message, "args": plan.args,
         "raises_when": _code(plan.fails_when), "asserts": _code(plan.holds), "trap": f"{table}.{key}"},
        {"kind": "same-result-when-passing"},
        {"kind": "first-failure-wins",
         "note": "when several checks of one graph fail, the first in program order is reported (measured on the "
                 "eager, aot_eager and inductor backends, CPU; not a documented guarantee)"},
        {"kind": "restore-at-boundary", "runtime": "mend.validation_runtime.install",
         "note": "without the runtime the mended code raises RuntimeError('mend-trap:...')"},
        {"kind": "state-unchanged-on-raise",
         "note": "module buffers/attributes after a failing call equal eager's; the function was screened, "
                 "callees (e.g. BatchNorm in training) and callers in the same graph were not"},
        {"kind": "condition-is-tensor",
         "note": "the condition must be a one-element tensor; a Python bool makes _assert_async raise TypeError"},
        {"kind": "cpu-only",
         "note": "on CUDA _assert_async drops the message and raises a fatal device-side assert (pytorch#131491)"},
    ]
    return RewriteResult(tree.code, span, detail, obligations)


# --- examples (Fixit style): FIX (before, exact after) and DECLINE (source, reason) -----------
# The site is the first `if`/`assert` line (see :func:`example_line`).

def example_line(source: str) -> int:
    """The line of an example's site: its first `if`/`assert` line."""
    for i, text in enumerate(source.splitlines(), 1):
        if text.lstrip().startswith(("if ", "assert ")):
            return i
    raise ValueError("no check in example")


FIX_EXAMPLES: list[tuple[str, str]] = [
    # transformers grounding_dino (modeling_grounding_dino.py:608); a comment above the check is kept
    (
        '''import torch


def check(shapes, seq_len):
    # the encoder must see every level
    if (shapes[:, 0] * shapes[:, 1]).sum() != seq_len:
        raise ValueError(
            "Make sure to align the spatial shapes with the sequence length"
        )
    return shapes.sum()
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a95c7a120d13": lambda: ValueError("Make sure to align the spatial shapes with the sequence length"),
}


def check(shapes, seq_len):
    # the encoder must see every level
    torch._assert_async(
        (shapes[:, 0] * shapes[:, 1]).sum() == seq_len,
        f"mend-trap:{__name__}:_MEND_TRAPS.a95c7a120d13",
    )
    return shapes.sum()
''',
    ),
    # `if not X: raise` asserts X itself; `torch` is imported when missing
    (
        '''"""A module without torch imported."""
from math import sqrt


class Scale:
    def forward(self, x):
        if not (x >= 0).all():
            raise ValueError("inputs must be non-negative")
        return x.sqrt() * sqrt(2.0)
''',
        '''"""A module without torch imported."""
from math import sqrt
import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "5a336280999b": lambda: ValueError("inputs must be non-negative"),
}


class Scale:
    def forward(self, x):
        torch._assert_async((x >= 0).all(), f"mend-trap:{__name__}:_MEND_TRAPS.5a336280999b")
        return x.sqrt() * sqrt(2.0)
''',
    ),
    # `assert not X`: Dynamo does not lower it; `if __debug__:` keeps `python -O` semantics
    (
        '''import torch


def forward(x):
    assert not torch.isnan(x).any(), "NaN in input"
    return x * 2
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "df2b3e53d6cf": lambda: AssertionError("NaN in input"),
}


def forward(x):
    if __debug__:
        torch._assert_async(
            torch.logical_not(torch.isnan(x).any()),
            f"mend-trap:{__name__}:_MEND_TRAPS.df2b3e53d6cf",
        )
    return x * 2
''',
    ),
    # a bare exception class; a name that is not a trap table is not reused
    (
        '''import torch

_MEND_TRAPS = 3


def forward(x):
    if x.abs().max() > 1e4:
        raise OverflowError
    return x
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS_1 = {
    "dcd377fca00b": lambda: OverflowError,
}

_MEND_TRAPS = 3


def forward(x):
    torch._assert_async(
        torch.logical_not(x.abs().max() > 1e4),
        f"mend-trap:{__name__}:_MEND_TRAPS_1.dcd377fca00b",
    )
    return x
''',
    ),
    # a second check in a module already mended: its table is extended
    (
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a95c7a120d13": lambda: ValueError("Make sure to align the spatial shapes with the sequence length"),
}


class Block(torch.nn.Module):
    def forward(self, x, mask):
        if mask.sum() == 0:
            raise ValueError("the mask selects nothing")
        return x * mask
''',
        '''import torch

# mend: exceptions of checks rewritten into torch._assert_async, restored where the call returns
# by mend.validation_runtime.install(model).
_MEND_TRAPS = {
    "a95c7a120d13": lambda: ValueError("Make sure to align the spatial shapes with the sequence length"),
    "cfb23de8c9ea": lambda: ValueError("the mask selects nothing"),
}


class Block(torch.nn.Module):
    def forward(self, x, mask):
        torch._assert_async(mask.sum() != 0, f"mend-trap:{__name__}:_MEND_TRAPS.cfb23de8c9ea")
        return x * mask
''',
    ),
]

DECLINE_EXAMPLES: list[tuple[str, str]] = [
    # shared case 023: the message formats tensor values
    ('''import torch
def f(loss, target):
    if torch.isnan(loss):
        raise RuntimeError(f"NaN loss (target mean {target.mean()})")
    return loss
''', "formatted from runtime values"),
    ('''import torch
def f(x):
    if x.sum() < 0:
        raise ValueError("negative total: {}".format(x.sum()))
    return x
''', "formatted from runtime values"),
    ('''import torch
def f(x):
    assert not x.isnan().any(), "NaN at %d" % x.isnan().nonzero()[0]
    return x
''', "formatted from runtime values"),
    # shared case 023 without the f-string: state updated after the check
    ('''import torch
class M(torch.nn.Module):
    def forward(self, loss):
        if torch.isnan(loss):
            raise RuntimeError("NaN loss")
        self.num_updates.add_(1)
        self.loss_ema = 0.9 * self.loss_ema + 0.1 * loss
        return loss
''', "changes state"),
    ('''import torch
class M(torch.nn.Module):
    def forward(self, x):
        self.calls += 1
        if x.sum() > 1e6:
            raise OverflowError("too large")
        return x
''', "changes state"),
    ('''import torch
def f(x, cache):
    if torch.isinf(x).any():
        raise ValueError("inf")
    cache.append(x)
    return x
''', "changes state"),
    # plain tensor asserts: Dynamo lowers them itself (shared cases 021, 024)
    ('''import torch
def f(probs):
    assert torch.all(probs >= 0)
    return probs.log()
''', "nothing to rewrite"),
    ('''import torch
def f(x, n):
    assert x.shape[-2] == n, "bad shape"
    return x
''', "nothing to rewrite"),
    ('''import torch
def f(x):
    if x.shape[0] * x.shape[1] != 16:
        raise ValueError("need 16 elements")
    return x
''', "shapes and literals only"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    else:
        x = -x
    return x
''', "else/elif"),
    ('''import torch
import logging
def f(x):
    if x.sum() > 0:
        logging.error("positive")
        raise ValueError("positive")
    return x
''', "does more than raise"),
    ('''import torch
def f(xs):
    for x in xs:
        if x.sum() > 0:
            raise ValueError("positive")
    return xs
''', "inside a loop"),
    ('''import torch
def f(x):
    try:
        if x.sum() > 0:
            raise ValueError("positive")
    except ValueError:
        x = -x
    return x
''', "`try`"),
    ('''import torch
import contextlib
def f(x):
    with contextlib.suppress(ValueError):
        if x.sum() > 0:
            raise ValueError("positive")
    return x
''', "whose exit would see"),
    ('''import torch
def f(x, y):
    if x.sum() > 0 or y.sum() > 0:
        raise ValueError("positive")
    return x
''', "`and`/`or`"),
    ('''import torch
def f(x):
    if (total := x.sum()) > 0:
        raise ValueError("positive")
    return total
''', "binds a name"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise ValueError("positive") from None
    return x
''', "`from` clause"),
    ('''import torch
def f(x, error=ValueError):
    if x.sum() > 0:
        raise error("positive")
    return x
''', "not a module-level or builtin name"),
    ('''import torch
class M(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            raise self.Error("positive")
        return x
''', "read from the instance"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        raise  # re-raise
    return x
''', "bare `raise`"),
    ('''import torch
def f(x):
    if x.sum() > 0:
        # upstream: keep in sync with the C++ check
        raise ValueError("positive")
    return x
''', "comment"),
    ('''import torch
import torch.nn.functional as F
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    return F.relu(x, inplace=True)
''', "changes state"),
    ('''import torch
@torch.jit.script
def f(x):
    if x.sum() > 0:
        raise ValueError("positive")
    return x
''', "TorchScript"),
    ('''import torch
if torch.ones(1).sum() > 0:
    raise ValueError("positive")
''', "not inside a function"),
]
