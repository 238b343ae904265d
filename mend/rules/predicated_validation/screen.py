"""predicated-validation: the static screen (which sites the rule takes, and why it declines the
others) and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import ReplaceAll, code_of as _code, dotted as _dotted, enclosing_handler, locals_readers, \
    state_change
from mend.rules._bindings import bindings, bound_in_reach, module_alias
from mend.rules._in_graph_checks import catching_elsewhere, global_mode_setter, mode_context_elsewhere, surroundings
from mend.rules._scalars import walk
from mend.rules.predicated_control_flow.screen import FORCING_HOOK

NAME = "predicated-validation"
TABLE = "_MEND_TRAPS"        # module-level table of exception factories (suffixed on collision)
MARKER = "mend-trap"         # marker prefix, parsed by mend.validation_runtime

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
    items: list = None             # the tensors read through `.item()` (source), when the condition has them
    numbers: list = None           # the other operands of those comparisons (source)
    call: cst.Call | None = None   # `torch._assert(C, "msg")`: kept for anything but a one-element tensor
    core: cst.BaseExpression | None = None  # the condition without its `not`s (what the guarded local holds)
    raise_if_true: bool = True     # the check fails when `core` is truthy (`if C: raise`, `assert not C`)
    chain_top: cst.If | None = None  # the first `if` of the if/elif chain the check is an arm of, to split
    parts: list | None = None      # `assert A and B, msg`: its operands, checked one after another (_and_parts)




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
            return ("the exception message is formatted at run time (an f-string or expression), not a literal; "
                    "the rewrite restores only a literal message outside the graph. A formatted one would need "
                    "the values it reads at the boundary, and even a size cannot travel there: formatted into "
                    "the graph's message on every call, it makes Dynamo specialize the size (a recompile per "
                    "batch size, and ConstraintViolationError under mark_dynamic: helper-75)")
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


_COMPARE_OPS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)
# calls a tensor expression read through `.item()` may make: pure tensor methods / torch functions
_PURE_CALLS = {"max", "min", "sum", "mean", "amax", "amin", "abs", "float", "double", "half", "bfloat16", "long",
               "int", "bool", "to", "detach", "clone", "prod", "norm", "count_nonzero", "any", "all", "numel",
               "size", "dim", "squeeze", "unsqueeze", "view", "reshape", "flatten", "sqrt", "exp", "log", "isnan",
               "isinf", "isfinite", "logical_not", "logical_and", "logical_or", "eq", "ne", "lt", "le", "gt", "ge",
               "neg", "len", "square", "argmax", "argmin"}


def _is_item(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "item")


def cast_of_item(node: cst.BaseExpression) -> str | None:
    """"int" for ``int(T.item())``, "float" for ``float(T.item())``, else None. For an integer or
    bool ``T`` ``int()`` gives the same number (a bool's 0 or 1, which compares as the bool does),
    for a float ``T`` ``float()`` does; the other way round it truncates, raises on NaN/inf or
    rounds beyond 2**53, so the guarded form admits only the dtypes the cast keeps."""
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("int", "float")
            and len(node.args) == 1 and not node.args[0].keyword and not node.args[0].star
            and _is_item(node.args[0].value)):
        return node.func.value
    return None


def _impure(node: cst.CSTNode) -> str | None:
    """What in ``node`` may have a side effect or is not modelled (a call outside ``_PURE_CALLS``), else None."""
    for call in m.findall(node, m.Call()):
        name = _dotted(call.func) or (call.func.attr.value if isinstance(call.func, cst.Attribute) else "")
        if not name or name.split(".")[-1] not in _PURE_CALLS:
            return name or _code(call.func).strip()
    found = m.findall(node, m.Lambda() | m.NamedExpr() | m.Yield() | m.Await() | m.ListComp() | m.GeneratorExp()
                      | m.DictComp() | m.SetComp())
    return _code(found[0]).strip() if found else None


def _atom(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return isinstance(node, (cst.Name, cst.Integer, cst.Float)) or (isinstance(node, cst.Attribute)
                                                                      and _dotted(node) is not None)


# argument-free tensor methods whose result is 0-d: `.item()` of it never fails on its size
_FULL_REDUCTIONS = {"all", "any", "sum", "mean", "max", "min", "amax", "amin", "prod", "norm", "count_nonzero"}


def _item_receiver(recv: cst.BaseExpression) -> str | None:
    """Why the tensor read through ``.item()`` cannot move into the graph, else None."""
    if m.findall(recv, m.Call(func=m.Attribute(attr=m.Name("item")))):
        return "`.item()` is called inside the tensor expression it reads"
    bad = _impure(recv)
    if bad is not None:
        return (f"the tensor read through `.item()` calls `{bad[:40]}`, which may have side effects or has "
                "no value model; only pure tensor expressions are rewritten")
    return None


MATH_TESTS = {"isnan", "isinf", "isfinite"}   # math.<test>(T.item()) -> torch.<test>(T)
WIDEN = "_.to(torch.float64 if _.is_floating_point() else torch.int64)"


def widen(recv: cst.BaseExpression) -> cst.BaseExpression:
    """``T`` as the comparison of ``T.item()`` reads it: ``.item()`` gives a float's value widened
    to float64 and an integer's (a bool's) exact value, and Python compares those exactly; torch
    would round the bound to ``T``'s dtype (a float32 ``T`` against ``0.1``, helper-87), so the
    tensor comparison runs on ``T`` cast to float64 or int64, which holds every value of the dtypes
    the runtime guard admits exactly (:func:`rewrite.exact_compare_text`)."""
    call = cst.parse_expression(WIDEN)
    holes = {id(n): recv.deep_clone() for n in m.findall(call, m.Name("_"))}
    return call.visit(ReplaceAll(holes))


def _item_form(core: cst.BaseExpression, module: cst.Module | None = None) -> tuple[cst.BaseExpression, list, list] | str:
    """``T.item() <op> E`` (chains, either side, both sides) -> (the tensor condition with `.item()` removed,
    the receivers' sources, the other operands' sources), or why it is not that form. A bare
    ``T.item()`` is the form too: its truth value is the tensor's (a one-element tensor is true
    when nonzero, NaN included, as the number is). So is ``math.isnan(T.item())`` (``isinf``,
    ``isfinite``; ``math`` the standard library's, bound only by ``import math``): a float's
    ``.item()`` is its value widened to float64, which keeps NaN and infinity, and an integer's
    is never either, as ``torch.isnan`` says of T itself (a NaN-loss check, helper-61)."""
    if isinstance(core, cst.Call) and (_dotted(core.func) or "").startswith("math.") and \
            (_dotted(core.func) or "").split(".", 1)[1] in MATH_TESTS:
        if module is None or not module_alias(bindings(module), "math", "math"):
            return "`math` is not bound only by `import math` in the module, so `math.isnan` may be another function"
        if len(core.args) != 1 or core.args[0].keyword or core.args[0].star or not _is_item(core.args[0].value):
            return "the `math` test does not take one `T.item()` argument"
        recv = core.args[0].value.func.value
        why = _item_receiver(recv)
        if why:
            return why
        test = cst.parse_expression(f"torch.{_dotted(core.func).split('.', 1)[1]}(_)")
        return test.with_changes(args=[cst.Arg(recv)]), [_code(recv).strip()], []
    if _is_item(core):
        recv = core.func.value
        if not (isinstance(recv, cst.Call) and not recv.args and isinstance(recv.func, cst.Attribute) and
                recv.func.attr.value in _FULL_REDUCTIONS):
            # `.item()` of a tensor with several elements raises "a Tensor with 3 elements cannot be
            # converted to Scalar"; the tensor check would raise another message (an adversarial review)
            return ("the bare `.item()` reads a tensor that is not a full reduction (`.all()`, `.any()`, `.sum()`...): "
                    "with more than one element it raises a message the tensor check would not")
        why = _item_receiver(recv)
        return why if why else (recv, [_code(recv).strip()], [])
    if not isinstance(core, cst.Comparison) or not all(isinstance(c.operator, _COMPARE_OPS) for c in core.comparisons):
        return ("the condition reads `.item()` outside a comparison `T.item() <op> E` (`<op>` one of < <= > >= "
                "== !=); only that form is rewritten")
    operands = [core.left] + [c.comparator for c in core.comparisons]
    out, items, numbers = [], [], []
    for i, op in enumerate(operands):
        cast = cast_of_item(op)
        if cast is not None:   # `int(T.item())`, `float(T.item())`: the guard admits only the dtypes it keeps
            # any binding of the name in the file, or `globals()["float"] = ...` (helper-93's F4)
            if module is None or cast in bindings(module) or bound_in_reach(module, op, [cast]):
                return f"`{cast}` may not be the builtin here (the module binds it), so `{cast}(T.item())` is not modelled"
            op = op.args[0].value
        if _is_item(op) and i >= 2:
            # `0 <= lo.item() <= hi.item()`: Python reads `hi` only when the first comparison held;
            # the guarded form reads every tensor first (helper-87: `hi.max()` of an empty `hi` raised)
            return ("a chained comparison reads `.item()` after its first comparison, which Python skips when that "
                    "one fails; the tensor form would read it on every call")
        if _is_item(op):
            recv = op.func.value
            why = _item_receiver(recv)
            if why:
                return why
            out.append(widen(recv))
            items.append(_code(recv).strip())
            continue
        if m.findall(op, m.Call(func=m.Attribute(attr=m.Name("item")))):
            return ("the `.item()` value is used in arithmetic before the comparison; only `T.item() <op> E` "
                    "itself is rewritten")
        bad = _impure(op)
        if bad is not None:
            return f"the compared value calls `{bad[:40]}`, which may have side effects or has no value model"
        if len(operands) > 2 and not _atom(op):
            return ("a chained comparison with a computed bound: Python short-circuits the chain, the tensor "
                    "form evaluates every bound")
        out.append(op)
        numbers.append(_code(op).strip())
    if not items:
        return "no operand of the comparison is `T.item()`"
    pairs = [cst.Comparison(left=out[i], comparisons=[core.comparisons[i].with_changes(comparator=out[i + 1])])
             for i in range(len(core.comparisons))]
    cond: cst.BaseExpression = pairs[0]
    for nxt in pairs[1:]:  # a chain `a < t < b`: Python's `and` would call bool() on a tensor
        cond = cst.parse_expression("torch.logical_and(_, _)").with_changes(args=[cst.Arg(cond), cst.Arg(nxt)])
    return cond, items, numbers


def _comments(node: cst.CSTNode, keep: cst.CSTNode) -> bool:
    """Whether ``node`` holds a comment other than the leading lines of ``keep``."""
    stripped = keep.with_changes(leading_lines=[]) if hasattr(keep, "leading_lines") else keep
    return bool(m.findall(stripped, m.Comment()))


def torch_assert_call(node: cst.CSTNode) -> bool:
    """``torch._assert(...)`` (torch by that name: the rewrite checks it is the module's import)."""
    return isinstance(node, cst.Call) and _dotted(node.func) == "torch._assert"


def only_raises(arm: cst.If) -> bool:
    """Whether the ``if``'s body is one ``raise`` statement (the check form of this rule)."""
    body = arm.body.body
    return (len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1
            and isinstance(body[0].body[0], cst.Raise))


def split_chain(top: cst.If) -> list[cst.BaseStatement]:
    """The if/elif/else chain whose first ``if`` is ``top``, as separate statements.

    ``if a: raise A`` / ``elif b: ...`` is ``if a: raise A`` then ``if b: ...``: a raise always
    leaves, so control reaches ``b``'s test exactly when ``a`` was false, in both; an ``else:``
    after an arm that only raises is its statements. Arms are split from the top while they
    only raise; the rest stays as written. :func:`_screen` has checked that every arm above
    the site only raises and that no comment sits on a removed ``else:`` line."""
    out, arm = [], top
    while isinstance(arm, cst.If) and arm.orelse is not None and only_raises(arm):
        out.append(arm.with_changes(orelse=None))
        arm = arm.orelse
    out.extend(arm.body.body if isinstance(arm, cst.Else) else [arm])
    return out


def _chain_reason(node: cst.If, chain: list[cst.CSTNode]) -> tuple[list[cst.CSTNode], cst.If | None, str | None]:
    """(the ancestors without the arms above ``node`` in its elif chain, the chain's first ``if``
    when ``node`` is in a chain else None, why the chain cannot be split for it, or None)."""
    cur = node
    while chain and isinstance(chain[-1], cst.If) and chain[-1].orelse is cur:
        cur, chain = chain[-1], chain[:-1]
        if not only_raises(cur):
            return chain, None, ("an earlier arm of the if/elif chain does more than raise, so this arm cannot "
                                 "stand alone as its own `if`")
    top = cur if cur is not node or node.orelse is not None else None
    arm = node
    while isinstance(arm, cst.If) and arm.orelse is not None and only_raises(arm):
        arm = arm.orelse
    if isinstance(arm, cst.Else):
        if not isinstance(arm.body, cst.IndentedBlock):
            return chain, top, "the `else:` arm is written on the `else` line, which the split would have to re-layout"
        shell = arm.with_changes(body=arm.body.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])]))
        if m.findall(shell, m.Comment()):  # before `else:`, after it or after its block: no place to keep it
            return chain, top, "a comment on the `else:` line would be dropped when the if/elif chain is split"
    return chain, top, None


def _screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> _Plan | Decline:
    """Syntactic checks shared by :func:`match` and :func:`rewrite`."""
    chain = list(ancestors)
    if isinstance(node, cst.Raise):  # a report on the raise line: the `if` around it is the site
        parents = [a for a in chain if isinstance(a, cst.If)]
        if_ = parents[-1] if parents else None
        if if_ is None or if_.body.body[0] is not chain[-1]:
            return Decline(NAME, "the raise is not the whole body of an `if`")
        node, chain = if_, chain[:chain.index(if_)]
    chain_top = None
    if isinstance(node, cst.If):  # an arm of an if/elif chain is rewritten once the chain is split
        chain, chain_top, why = _chain_reason(node, chain)
        if why is not None:
            return Decline(NAME, why)
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        chain, node = chain + [node], node.body[0]
    function = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), None)
    inner = chain[chain.index(function) + 1:] if function is not None else chain
    if function is None:
        return Decline(NAME, "the check is not inside a function")
    if any("jit" in (_dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
           for a in chain if isinstance(a, cst.FunctionDef) for d in a.decorators):
        return Decline(NAME, "the function is compiled by TorchScript, which cannot read the marker's `__name__`")
    kept = next((a.test.expression.value for a in inner if m.matches(a, m.If(test=m.UnaryOperation(
        operator=m.Not(), expression=m.Name(value=m.MatchIfTrue(lambda v: v.startswith("_mend_fresh_"))))))), None)
    if kept is not None:   # the rule's own output (fresh.py): left for an object the caller passed in
        return Decline(NAME, f"mend kept this check out of the graph for an object the caller passes in (`{kept}` "
                             "is False): the submodules after it write that object, and moving the check into the "
                             "graph would change which of those writes a failing call leaves done")
    if any(isinstance(a, (cst.For, cst.While)) for a in inner):
        return Decline(NAME, "the check sits inside a loop: Dynamo skips the whole frame there, and unrolling "
                             "the loop with one assert per iteration is not attempted")
    handler = enclosing_handler(inner)
    if handler == "try":
        return Decline(NAME, "a `try` around the check in the same function would see a RuntimeError "
                             "instead of the original exception")
    if handler is not None:
        return Decline(NAME, f"the check is inside `with {handler}`, whose exit would see a "
                             "RuntimeError instead of the original exception")
    via_call = False
    if isinstance(node, cst.If):
        if not only_raises(node):
            return Decline(NAME, "the guarded body does more than raise")
        raise_ = node.body.body[0].body[0]
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
                return Decline(NAME, "the assert message is formatted at run time (an f-string or expression), "
                                     "not a literal; the rewrite restores only a literal message outside the graph "
                                     "(a formatted one would need the values it reads, tensors or sizes, at the "
                                     "boundary)")
        form, exc, test = "assert", None, node.test
    elif isinstance(node, cst.Expr) and torch_assert_call(node.value):
        # `torch._assert(C, "msg")` is `if not C: raise AssertionError("msg")` for a plain tensor C
        # (torch/__init__.py; not stripped by `python -O`: a review); Dynamo breaks on it ("Data
        # dependent operator"). The rewrite keeps the call for anything but a one-element tensor
        stmt, call = chain[-1], node.value
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return Decline(NAME, "the check shares its line with other statements")
        if len(call.args) != 2 or any(a.keyword is not None or a.star for a in call.args):
            return Decline(NAME, "torch._assert is not given exactly a condition and a message, positionally")
        if not isinstance(call.args[1].value, (cst.SimpleString, cst.ConcatenatedString)) or \
                m.findall(call.args[1].value, m.FormattedString()):
            return Decline(NAME, "the torch._assert message is not a string literal (formatted at run time, or "
                                 "another value); the rewrite restores only a literal message outside the graph")
        if m.findall(call.args[0].value, m.Name(value=m.MatchIfTrue(lambda v: v.startswith("_mend_")))):
            return Decline(NAME, "the condition names `_mend_...`, the rewrite's own lambda parameter")
        cond = call.args[0].value
        test = cst.UnaryOperation(cst.Not(), cond.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        form, exc, via_call = "if-raise", cst.Call(cst.Name("AssertionError"), [cst.Arg(call.args[1].value)]), True
    else:
        return Decline(NAME, "the check is not an `if ...: raise`, `assert` or `torch._assert` statement")
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
    if isinstance(core, cst.Name) and core.value.startswith("_mend_"):
        return Decline(NAME, f"the check tests `{core.value}`, a local mend bound: it is the fallback of a guarded "
                             "rewrite, run only where the condition is not a one-element CPU tensor")
    items = numbers = None
    if m.findall(test, m.Call(func=m.Attribute(attr=m.Name("item")))):  # the break is the host read itself
        module_ = ancestors[0] if ancestors and isinstance(ancestors[0], cst.Module) else None
        hook = core if isinstance(core, cst.Call) and _dotted(core.func) == FORCING_HOOK.rstrip("(") and \
            len(core.args) == 2 else None
        if hook is not None:   # the verifier's instrumented copy (verifier/forcing.py): the form inside its hook
            wrapped, wrapped_not = _strip_not(hook.args[0].value)
            form_ = _item_form(wrapped, module_)
            if not isinstance(form_, str):
                cond = form_[0] if not wrapped_not else \
                    cst.parse_expression("torch.logical_not(_)").with_changes(args=[cst.Arg(form_[0])])
                form_ = (hook.with_changes(args=[hook.args[0].with_changes(value=cond), hook.args[1]]),
                         form_[1], form_[2])
        else:
            form_ = _item_form(core, module_)
        if isinstance(form_, str):
            return Decline(NAME, form_)
        tensor_core, items, numbers = form_
        if any(i.startswith("_mend_") for i in items):
            return Decline(NAME, f"the check reads `{next(i for i in items if i.startswith('_mend_'))}.item()`, a "
                                 "local mend bound: it is the fallback of a guarded rewrite, run only where the "
                                 "tensor is not a one-element CPU tensor")
    if form == "assert" and not negated and not isinstance(core, cst.BooleanOperation) and items is None:
        return Decline(NAME, "Dynamo already compiles `assert <tensor>` with a literal or no message into "
                             "torch._assert_async without a break; nothing to rewrite")
    parts = None
    if isinstance(core, cst.BooleanOperation):
        parts = _and_parts(core) if form == "assert" and not negated else \
            "the condition is an `and`/`or`: short-circuit evaluation has no single tensor predicate (only " \
            "`assert A and B` is split, into one check per operand)"
        if isinstance(parts, str):
            return Decline(NAME, parts)
    if m.findall(test, m.NamedExpr() | m.Lambda() | m.Yield() | m.Await()):
        return Decline(NAME, "the condition binds a name or defines/awaits a function")
    if _shape_only(core):
        return Decline(NAME, "the condition is computed from shapes and literals only; Dynamo decides it "
                             "at trace time (a guard), so there is no break to remove")
    own = stmt.with_changes(orelse=None) if isinstance(stmt, cst.If) else stmt  # elif/else arms stay as written
    if _comments(own, own):
        return Decline(NAME, "the check holds a comment the rewrite would drop")
    module = ancestors[0] if ancestors and isinstance(ancestors[0], cst.Module) else None
    setter = global_mode_setter(module) if module is not None else None
    if setter is not None:
        return Decline(NAME, f"the file sets torch's global state (`{setter[:60]}`, not as a `with`): Dynamo sets "
                             "the final grad/autocast mode after the graph returns, so a check failing inside the "
                             "graph would leave the mode as it was, where eager left it changed (an adversarial "
                             "review)")
    effect = state_change(function, next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None))
    if effect is not None:
        return Decline(NAME, f"the function also changes state (`{effect[:60]}`): with the check inside the "
                             "graph, inductor runs later in-place updates before the failed assert surfaces and "
                             "aot_eager drops earlier ones, so a failing call would leave different state")
    why = surroundings(function, ancestors, inner, module) or catching_elsewhere(module, function) or \
        mode_context_elsewhere(module, function)
    if why is not None:
        return Decline(NAME, why)
    if items is None and not via_call and locals_readers(function):
        return Decline(NAME, "the function reads its own locals (`locals()`, `vars()`, `eval`, `exec`): binding the "
                             "condition to a new local, as the guarded rewrite does, would show there")
    fails_is_true = (form == "if-raise") != negated  # raise when `core` is truthy?
    cond = tensor_core if items is not None else core
    holds = _negate(cond) if fails_is_true else cond
    fails_when = test.with_changes(lpar=[], rpar=[]) if hasattr(test, "lpar") else test
    if form == "assert":  # `assert C` raises when C is false; `assert not C` when C is true
        fails_when = core if negated else cst.UnaryOperation(cst.Not(), core.with_changes(
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
    return _Plan(stmt, function, form, test, fails_when, holds, exc, exc_name, args, items, numbers,
                 node.value if via_call else None, core, fails_is_true, chain_top, parts)


def _static_part(expr: cst.BaseExpression) -> bool:
    """A Python-level test Dynamo decides at trace time: shapes and literals, ``x is None``,
    ``isinstance(...)``."""
    if _shape_only(expr) or (isinstance(expr, cst.Call) and _dotted(expr.func) in ("isinstance", "hasattr")):
        return True
    return isinstance(expr, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot))
                                                    for c in expr.comparisons)


# what an operand may compute when it runs speculatively: functions of one tensor that raise and
# warn for no dtype (measured on torch 2.13 over bool, uint8, int8/32/64, float16/bfloat16/32/64,
# complex64: helper-82 found `~`, unary `-` and `&` raising by dtype), a reduction without a `dim`
_SPECULABLE = {"all", "any", "isfinite", "isnan", "isinf", "logical_not", "bool", "long", "int", "sum",
               "count_nonzero"}
_FULL = {"all", "any", "sum", "count_nonzero"}
_SPECULABLE_OPS = (cst.Add, cst.Multiply, cst.Divide)   # with a number: binary `-` raises on bool


def _scalar_side(node: cst.BaseExpression) -> bool:
    """A number literal (signed), an attribute chain of ``self`` (the verifier requires it to be
    observed as a Python number) or a full reduction (0-d): combined with one tensor, it always
    broadcasts."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
            isinstance(node.expression, (cst.Integer, cst.Float)):
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _FULL:
        return True   # a full reduction is 0-d (or raises on its own, screened as a call)
    return isinstance(node, (cst.Integer, cst.Float)) or (
        isinstance(node, cst.Attribute) and (_dotted(node) or "").startswith("self."))


def speculation_hazard(expr: cst.BaseExpression) -> str | None:
    """Why ``expr`` may raise, warn or have an effect when it runs where it used to be skipped,
    or None. Inside one graph Dynamo traces it on every call, so a failure there is a hard
    error at trace time (helper-81: two tensors that do not broadcast, ``x.mT`` of a 1-D
    tensor, ``x.T``'s warning). Allowed: names, attribute chains of ``self`` or ``torch``,
    number literals (negative ones too), ``+ * /`` and comparisons (not ``in``) with a number on
    one side, and the calls of ``_SPECULABLE`` of one tensor: ``torch.f(x)``, or a method without
    arguments. An order comparison raises on a complex tensor: stated by the verifier."""
    funcs = {id(c.func) for c in m.findall(expr, m.Call())}
    for node in walk(expr):
        if isinstance(node, cst.Subscript):
            return f"its indexing (`{_code(node).strip()[:50]}`) may raise"
        if isinstance(node, cst.UnaryOperation) and not (
                isinstance(node.operator, cst.Minus) and isinstance(node.expression, (cst.Integer, cst.Float))):
            return (f"its operator `{_code(node.operator).strip()}` raises for some dtypes (`~` on a float tensor, `-` "
                    "on a bool one: helper-82)")
        if isinstance(node, cst.Attribute) and id(node) not in funcs and \
                not (_dotted(node) or "").startswith(("self.", "torch.")):
            return f"it reads `{_code(node).strip()[:50]}`, an attribute of a value, which may raise or warn"
        if isinstance(node, cst.BinaryOperation):
            if not isinstance(node.operator, _SPECULABLE_OPS):
                return f"its operator `{_code(node.operator).strip()}` may raise for some dtypes or shapes"
            if not (_scalar_side(node.left) or _scalar_side(node.right)):
                return f"`{_code(node).strip()[:50]}` combines two values that may be tensors which do not broadcast"
        if isinstance(node, cst.Comparison):
            if any(isinstance(c.operator, (cst.In, cst.NotIn)) for c in node.comparisons):
                return "its membership test (`in`) calls `__contains__`, which may raise"
            sides = [node.left, *(c.comparator for c in node.comparisons)]
            if any(not (_scalar_side(a) or _scalar_side(b)) for a, b in zip(sides, sides[1:])):
                return f"`{_code(node).strip()[:50]}` compares two values that may be tensors which do not broadcast"
        if isinstance(node, (cst.Lambda, cst.NamedExpr, cst.Yield, cst.Await, cst.ListComp, cst.GeneratorExp,
                             cst.DictComp, cst.SetComp, cst.FormattedString)):
            return f"it holds `{_code(node).strip()[:50]}`"
        if isinstance(node, cst.Call):
            func, name = node.func, _dotted(node.func) or ""
            last = func.attr.value if isinstance(func, cst.Attribute) else ""
            via_torch = name.count(".") == 1 and name.startswith("torch.")
            if last not in _SPECULABLE or not (via_torch or isinstance(func, cst.Attribute)):
                return f"it calls `{(name or _code(func).strip())[:50]}`, which may raise or have an effect"
            if any(a.keyword is not None or a.star for a in node.args) or len(node.args) != int(via_torch):
                return (f"`{_code(node).strip()[:50]}` passes other arguments than the one tensor (a `dim` may be "
                        "out of range, a second tensor may not broadcast)")
    return None


def _total_static(expr: cst.BaseExpression) -> bool:
    """A Python-level test that cannot raise on a tensor: no indexing (``x.shape[3]``), and calls
    only of ``isinstance``/``hasattr``/``len`` or ``dim()``/``numel()``/``size()`` without a dim.
    Traced after a failing tensor check, it is decided at trace time like any Python code."""
    if m.findall(expr, m.Subscript()):
        return False
    for call in m.findall(expr, m.Call()):
        name = _dotted(call.func) or ""
        if name in ("isinstance", "hasattr", "len"):
            continue
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value in ("dim", "numel", "size")
                and not call.args):
            return False
    return True


def _unhook(e: cst.BaseExpression) -> cst.BaseExpression:
    """The operand inside the verifier's forcing hook ``__mend_force__(X, key)`` (its
    instrumented copies, verifier/forcing.py), else ``e`` itself."""
    if isinstance(e, cst.Call) and _dotted(e.func) == FORCING_HOOK.rstrip("(") and len(e.args) == 2:
        return e.args[0].value
    return e


def _and_parts(core: cst.BooleanOperation) -> list | str:
    """``assert A and B and C, msg`` is ``assert A, msg``, ``assert B, msg``, ``assert C, msg``
    run in turn (Python evaluates B only when A held, and both raise the same AssertionError):
    each operand as (its core without ``not``, negated, a Python-level test), or why not.

    Inside one graph a later operand is computed even where an earlier tensor check fails
    (the assert is asynchronous; Dynamo traces on), so every operand after a tensor one must
    be safe to compute there (:func:`speculation_hazard`). Dynamo itself compiles ``A and B``
    when only the last operand is a tensor test."""
    flat, todo = [], [core]
    while todo:
        e = todo.pop()
        if isinstance(e, cst.BooleanOperation) and isinstance(e.operator, cst.And):
            todo += [e.right, e.left]
        else:
            flat.append(e)
    if isinstance(core.operator, cst.Or) or any(isinstance(e, cst.BooleanOperation) for e in flat):
        return ("the condition is an `or`: short-circuit evaluation has no single tensor predicate (only "
                "`assert A and B` is split, into one check per operand)")
    nested = next((e for e in flat if isinstance(_strip_not(_unhook(e))[0], cst.BooleanOperation)), None)
    if nested is not None:
        return (f"the operand `{_code(nested).strip()[:60]}` negates an `and`/`or`: short-circuit evaluation "
                "has no single tensor predicate (only the top-level `and` of an assert is split)")
    parts, tensor_before = [], None
    for e in flat:
        inner = _unhook(e)
        # an operand inside the verifier's forcing hook (an instrumented copy) is checked as
        # the operand it wraps, and kept whole, with its `not`, inside the hook
        c, neg = _strip_not(e) if inner is e else (e, False)
        inner_core = _strip_not(inner)[0]
        static = _static_part(inner_core)
        if tensor_before is not None and not (static and _total_static(inner_core)):
            why = speculation_hazard(inner_core)   # a leading `not` is the guarded form's logical_not
            if why is not None:
                return (f"the operand `{_code(e).strip()[:50]}` would be computed inside the graph even when "
                        f"`{_code(tensor_before).strip()[:50]}` fails the assert (Python skips it then), and {why}")
        parts.append((c, neg, static, e))
        if not static and tensor_before is None:
            tensor_before = e
    if all(static for _, _, static, _ in parts[:-1]):
        return ("only the last operand of the `and` is a tensor test: Dynamo decides the others at trace time and "
                "compiles the assert without a break")
    return parts


def match(loc: Located) -> Match | Decline:
    plan = _screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    if plan.form == "assert":
        return Match(NAME, "assert -> torch._assert_async, AssertionError restored outside the graph")
    return Match(NAME, f"if/raise -> torch._assert_async, {plan.exc_name} restored outside the graph")


# --- rewrite ----------------------------------------------------------------------------
