"""item-operand: the static screen (which ``x = T.item()`` sites the rule takes, and why it
declines the others) and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, dotted, find_all, shared_wrapper, torch_name
from mend.rules._bindings import bindings
from mend.rules._scalars import bound_names
from mend.rules._uses import DYNAMIC_SCOPE, NameWalk, statement_of, use_kind

NAME = "item-operand"
CATEGORY = "item-tolist"

# operators whose torch result is the same with a Python number and with a 0-d tensor operand
# (Tensor.__r*__ call the same ATen op with the operands swapped); `**` is not one (pow with a
# Python exponent takes the square/sqrt fast paths: pow(-0.0, 0.5) is +0.0, sqrt(-0.0) -0.0)
_ARITH = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
          cst.Modulo: "%"}
_CMP = {cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.LessThan: "<", cst.LessThanEqual: "<=",
        cst.Equal: "==", cst.NotEqual: "!="}


@dataclass
class Use:
    other: cst.BaseExpression   # the operand the value meets
    op: str


@dataclass
class Choice:
    """``x = A if P else B`` with A and B numeric literals of one kind: the number a tensor
    test chooses. Kept as ``torch.where(P, A, B)`` over 0-d tensors of ``dtype``. An
    ``if``/``elif``/``else`` chain has one test per side but the last (nested ``torch.where``)."""
    sides: tuple[cst.BaseExpression, ...]   # A (P true), ..., the else side
    values: tuple[int | float, ...]
    dtype: str   # "int64"; "float32" where all values are exact there, else "float64"
    tests: tuple[cst.BaseExpression, ...] = ()   # P, then each elif's test


@dataclass
class Plan:
    line: cst.SimpleStatementLine | cst.If   # an `if`/`else` for the statement form of a choice
    name: str | None             # None: the read is used in place (inline_screen)
    tensor: cst.BaseExpression   # T in `x = T.item()`
    uses: list[Use]
    call: cst.Call | None = None  # the inline `T.item()`
    counted: cst.BaseExpression | None = None  # T of a count of `nonzero`'s rows (read as count_nonzero(T))
    int_of: bool = False         # `x = int(T.item())`
    choice: Choice | None = None  # `x = A if P else B` (tensor = P): the number is one of the literals


def _generic() -> Decline:
    from mend.taxonomy import UNFIXABLE_REASONS

    return Decline(None, UNFIXABLE_REASONS[CATEGORY])


def item_assignment(node: cst.CSTNode, torch: str = "torch") -> tuple[str, cst.BaseExpression] | None:
    """``(x, T)`` when ``node`` is ``x = T.item()`` (one plain name target), else None. A count of
    ``nonzero``'s rows (:func:`nonzero_count`) is ``x = torch.count_nonzero(T).item()``: ``(x,
    torch.count_nonzero(T))``, with ``torch`` the module's name for torch."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)):
        return None
    value = node.value
    if int_of_item(value):   # `n = int(T.item())`: the same int where T is an integer tensor (observed)
        value = value.args[0].value
    if isinstance(value, cst.Call) and not value.args and isinstance(value.func, cst.Attribute) \
            and value.func.attr.value == "item":
        return node.targets[0].target.value, value.func.value
    counted = nonzero_count(value, torch)
    if counted is not None:
        return node.targets[0].target.value, cst.parse_expression(f"{torch}.count_nonzero({code_of(counted)})")
    return None


def int_of_item(value: cst.BaseExpression) -> bool:
    """``int(T.item())``: for an integer T (not bool) the int ``.item()`` already gives; for a
    float T a truncation, refuted by ``item-operand-tensor`` from the observed dtype."""
    return isinstance(value, cst.Call) and m.matches(value.func, m.Name("int")) and len(value.args) == 1 \
        and value.args[0].keyword is None and not value.args[0].star \
        and m.matches(value.args[0].value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[]))


def _literal(node: cst.BaseExpression) -> int | float | None:
    """The value of a numeric literal, negated or not (``3``, ``-0.5``, ``1e-4``), else None."""
    sign = 1
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        sign, node = -1, node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        value = node.evaluated_value
        return -value if sign < 0 else value   # -(0.0) is -0.0, as Python gives
    return None


def choice_text(name: str, test: cst.BaseExpression, choice: Choice) -> str:
    """``x = A if P else B`` on one line, whichever form the source has (an elif chain:
    ``x = A if P else B if Q else C``)."""
    tests = choice.tests or (test,)
    text = code_of(choice.sides[-1]).strip()
    for t, v in reversed(list(zip(tests, choice.sides))):
        text = f"{code_of(v).strip()} if {' '.join(code_of(t).split())} else {text}"
    return f"{name} = {text}"


def _exact_float32(value: float) -> bool:
    """Whether the double ``value`` is a float32 value (IEEE binary32 round trip)."""
    import struct

    try:
        return struct.unpack("f", struct.pack("f", value))[0] == value
    except OverflowError:   # beyond float32's range on some Python builds
        return False


def constant_choice(node: cst.CSTNode) -> tuple[str, cst.BaseExpression, Choice] | None:
    """``(x, P, choice)`` when ``node`` is ``x = A if P else B`` (one plain name target) with A
    and B numeric literals, both ints (within int64) or both floats, else None. A Python float
    is a double: the 0-d tensor is float64 unless both values are exact in float32, where a
    float32 tensor gives every use the same value and, unlike float64, no wider result dtype
    beside a 0-d float32 operand (a loss)."""
    if isinstance(node, cst.If):
        return _if_choice(node)
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, cst.IfExp)):
        return None
    tests, sides, value = [], [], node.value
    while isinstance(value, cst.IfExp):   # `A if P else B if Q else C`: a chain, as elif
        tests.append(value.test)
        sides.append(value.body)
        value = value.orelse
    return _choice(node.targets[0].target.value, tests, sides + [value])


def _is_elif(node: cst.If, parents) -> bool:
    parent = parents.get(node)
    return isinstance(parent, cst.If) and parent.orelse is node


def _later_test_decline(choice: Choice, name: str, where: str) -> Decline | None:
    """Why an ``elif``'s test may not run where the original did not reach it, else None. The
    nested torch.where evaluates every test: each must be one comparison of names, attributes
    and numeric literals (no call, nothing that binds), which cannot run code of its own; that
    each is a one-element tensor is observed (``item-operand-tensor``, per test)."""
    for test in choice.tests[1:]:
        text = " ".join(code_of(test).split())
        parts = [test.left, *(c.comparator for c in test.comparisons)] if isinstance(test, cst.Comparison) else []
        simple = len(parts) == 2 and type(test.comparisons[0].operator) in _CMP and all(
            dotted(p) is not None or _literal(p) is not None for p in parts)
        if not simple:
            return Decline(NAME, f"the `elif {text}` test ({where}) would run even where the original did not reach "
                                 "it; only a comparison of names, attributes and numeric literals is taken there")
        if m.findall(test, m.Name(name)):
            return Decline(NAME, f"the `elif {text}` test ({where}) reads `{name}` itself")
    return None


def _only_assign(block) -> cst.Assign | None:
    """The one ``x = ...`` statement of an indented block (alone on its line), else None."""
    body = getattr(block, "body", ())
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    stmt = body[0].body[0]
    ok = isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name)
    return stmt if ok else None


def _if_choice(node: cst.If) -> tuple[str, cst.BaseExpression, Choice] | None:
    """``if P: x = A`` / [``elif Q: x = B`` ...] / ``else: x = C``, the statement form of the
    ternary: each side one assignment to the same name, ending in an ``else``."""
    tests, assigns = [], []
    while isinstance(node, cst.If):
        tests.append(node.test)
        assigns.append(_only_assign(node.body))
        node = node.orelse
    if not isinstance(node, cst.Else):
        return None
    assigns.append(_only_assign(node.body))
    if any(a is None for a in assigns) or len({a.targets[0].target.value for a in assigns}) != 1:
        return None
    return _choice(assigns[0].targets[0].target.value, tests, [a.value for a in assigns])


def _choice(name: str, tests, sides) -> tuple[str, cst.BaseExpression, Choice] | None:
    values = [_literal(v) for v in sides]
    if any(v is None for v in values) or len({type(v) for v in values}) != 1:
        return None
    if isinstance(values[0], int):
        if not all(-2 ** 63 <= v < 2 ** 63 for v in values):
            return None
        dtype = "int64"
    else:
        dtype = "float32" if all(_exact_float32(v) for v in values) else "float64"
    return name, tests[0], Choice(tuple(sides), tuple(values), dtype, tuple(tests))


def _nonzero_of(node: cst.BaseExpression, torch: str) -> cst.BaseExpression | None:
    """T for ``T.nonzero()`` / ``torch.nonzero(T)`` (``as_tuple=False`` at most: with
    ``as_tuple=True`` it is a tuple of ``T.dim()`` tensors, whose ``len`` is the rank)."""
    if not isinstance(node, cst.Call):
        return None
    args = list(node.args)
    if args and args[-1].keyword is not None:
        last = args.pop()
        if last.keyword.value != "as_tuple" or not m.matches(last.value, m.Name("False")):
            return None
    if any(a.keyword is not None or a.star for a in args):
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "nonzero" and not args \
            and dotted(node.func) != f"{torch}.nonzero":
        return node.func.value
    if dotted(node.func) == f"{torch}.nonzero" and len(args) == 1:
        return args[0].value
    return None


def nonzero_count(node: cst.BaseExpression, torch: str = "torch") -> cst.BaseExpression | None:
    """T when ``node`` counts the rows of T's ``nonzero()``: ``len(T.nonzero())``,
    ``T.nonzero().shape[0]``, ``T.nonzero().size(0)`` (and ``torch.nonzero(T)`` for
    ``T.nonzero()``), else None. For a tensor T that is the number of nonzero elements of T
    (NaN counts, ±0.0 does not; a 0-d T gives 0 or 1 rows), which ``torch.count_nonzero(T)``
    gives as a 0-d int64 tensor (PyTorch docs of ``nonzero`` and ``count_nonzero``). The module
    must not rebind ``len`` (the caller's screen)."""
    if isinstance(node, cst.Call) and m.matches(node.func, m.Name("len")) and len(node.args) == 1 \
            and node.args[0].keyword is None and not node.args[0].star:
        return _nonzero_of(node.args[0].value, torch)
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) \
            and node.value.attr.value == "shape" and len(node.slice) == 1 \
            and isinstance(node.slice[0].slice, cst.Index) and m.matches(node.slice[0].slice.value, m.Integer("0")):
        return _nonzero_of(node.value.value, torch)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size" \
            and len(node.args) == 1 and node.args[0].keyword is None \
            and m.matches(node.args[0].value, m.Integer("0")):
        return _nonzero_of(node.func.value, torch)
    return None


def _is_read(node: cst.Name, parents) -> bool:
    """A Name node that reads a local: not an attribute's name or a keyword's."""
    parent = parents.get(node)
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False
    return not (isinstance(parent, cst.Arg) and parent.keyword is node)


def screen(wrapper: MetadataWrapper, line: int) -> Plan | Decline:
    """The plan for ``x = T.item()`` on ``line``, or why not (see the package docstring)."""
    pos = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    lines = [n for n in find_all(wrapper.module, m.SimpleStatementLine()) if pos[n].start.line == line]
    torch = torch_name(wrapper.module)[0]
    found = [(sl, item_assignment(sl.body[0], torch), None) for sl in lines
             if sl.body and item_assignment(sl.body[0], torch)]
    found += [(sl, choice[:2], choice[2]) for sl in lines if sl.body and (choice := constant_choice(sl.body[0]))]
    found += [(n, choice[:2], choice[2]) for n in find_all(wrapper.module, m.If())
              if pos[n].start.line == line and not _is_elif(n, parents) and (choice := constant_choice(n))]
    if not found:
        return _generic()
    stmt, (name, tensor), choice = found[0]
    where = f"line {line}"
    what = f"`{code_of(stmt.body[0]).strip()}`" if choice is None else f"`{choice_text(name, tensor, choice)}`"
    if isinstance(stmt, cst.If):   # the statement form: one-line sides, no comment the one line would drop
        targets = [a.targets[0].target for a in m.findall(stmt, m.Assign())]
        if m.findall(stmt, m.Comment()) or m.findall(stmt, m.EmptyLine(comment=m.Comment())):
            return Decline(NAME, f"{what} ({where}) has comments inside its `if`/`else`, which one line would drop")
        if any(pos[t].start.line != pos[t].end.line for t in choice.tests):
            return Decline(NAME, f"{what} ({where}): a test spans several lines; the one statement would move the "
                                 "lines after it")
    else:
        targets = [stmt.body[0].targets[0].target]
    later = _later_test_decline(choice, name, where) if choice is not None else None
    if later:
        return later
    int_of = choice is None and int_of_item(stmt.body[0].value)
    if int_of and {"int", "*"} & set(bindings(wrapper.module)):   # helper-76: `from m import *` rebound it
        return Decline(NAME, f"the module binds `int` or star-imports ({where}): `int(...)` may not be the builtin")
    if choice is None and nonzero_count(stmt.body[0].value, torch) is not None \
            and {"len", "*"} & set(bindings(wrapper.module)):
        return Decline(NAME, f"the module binds `len` or star-imports ({where}): `len(...)` may not be the builtin "
                             "that counts rows")
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) != 1:
        return Decline(NAME, f"{what} ({where}) shares its line with other statements")
    if isinstance(stmt, cst.SimpleStatementLine) and pos[stmt].end.line != pos[stmt].start.line:
        return Decline(NAME, f"{what} ({where}) spans several lines: the facts are observed per line")
    scope = next((a for a in _ancestors(stmt, parents) if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda))),
                 None)
    if not isinstance(scope, cst.FunctionDef):
        return Decline(NAME, f"{what} ({where}) is not in a function's own body")
    function = scope
    if m.findall(tensor, m.NamedExpr() | m.Lambda() | m.Yield() | m.Await()):
        return Decline(NAME, f"`{code_of(tensor)}` ({where}) binds a name or defines/awaits a function")
    if m.findall(tensor, m.Name(name)):
        return Decline(NAME, f"`{code_of(tensor)}` ({where}) reads `{name}` itself")
    for g in m.findall(function, m.Global() | m.Nonlocal()):
        if name in {n.name.value for n in g.names}:
            return Decline(NAME, f"`{name}` is declared global/nonlocal: code outside the function reads it")
    for call in m.findall(function, m.Call(func=m.Name())):
        if call.func.value in DYNAMIC_SCOPE:
            return Decline(NAME, f"the function calls `{call.func.value}()`, which can read `{name}` by name")
    walk = NameWalk({name})
    function.body.visit(walk)
    block = _autocast_block(stmt, parents)
    uses: list[Use] = []
    for node, nested in walk.found:
        if not _is_read(node, parents):
            continue
        ln = pos[node].start.line
        if nested:
            return Decline(NAME, f"`{name}` is captured by a nested function or class (line {ln})")
        if any(node is t for t in targets):
            continue
        if block is not None and not _within(node, block, parents):
            return Decline(NAME, f"`{name}` is read inside `with {code_of(block.items[0].item)}:` ({where}) and used "
                                 f"outside it (line {ln}): the guard sees that block's autocast state, the use runs "
                                 "under another (helper-38: a read under enabled=False met bfloat16 logits)")
        use = _operand_use(node, name, use_kind(node, parents), parents, pos)
        if isinstance(use, Decline):
            return use
        uses.append(use)
    binds = [t for t in m.findall(function.body, m.AssignTarget() | m.AugAssign() | m.AnnAssign() | m.For()
                                  | m.WithItem() | m.NamedExpr() | m.Del() | m.CompFor() | m.ExceptHandler()
                                  | m.ImportAlias() | m.FunctionDef() | m.ClassDef())
             if _binds_name(t, name)]
    if len(binds) != len(targets) or {p.name.value for p in _params(function)} & {name}:
        return Decline(NAME, f"`{name}` is bound more than once in the function (or is a parameter): each later "
                             "read must see this value")
    # (a choice keeps a new tensor, which no later write reaches)
    written = written_after(function, tensor, line, pos) if choice is None else None
    if written:
        return written
    counted = nonzero_count(stmt.body[0].value, torch) if choice is None else None
    return Plan(stmt, name, tensor, uses, counted=counted, choice=choice, int_of=int_of)


# methods (and torch functions) whose result is always a new tensor, never a view of an input
# (``.to``/``.float``/``.contiguous`` may return the input itself, a view op shares its storage)
_FRESH = frozenset({"max", "min", "sum", "mean", "prod", "amax", "amin", "norm", "std", "var", "exp", "log",
                    "abs", "sqrt", "neg", "sigmoid", "tanh", "clone", "argmax", "argmin", "all", "any",
                    "count_nonzero", "logsumexp", "median", "nansum", "nanmean", "square", "reciprocal"})


def _fresh(tensor: cst.BaseExpression) -> bool:
    """``tensor`` is a call of a method or torch function in _FRESH (its result owns its storage)."""
    return isinstance(tensor, cst.Call) and isinstance(tensor.func, cst.Attribute) \
        and tensor.func.attr.value in _FRESH


def written_after(function: cst.FunctionDef, tensor: cst.BaseExpression, line: int, pos) -> Decline | None:
    """Why a tensor T reads is written in place after the read on ``line`` (``self.temp.mul_(0.5)``,
    ``self.temp += 1``, ``self.temp[0] = 1``), else None. The kept copy should not see it, and in
    eager it does not; under aot_eager and inductor in training, backward read the written value
    through it (helper-71: ``x / t`` gave x.grad doubled after ``self.temp.mul_(0.5)``)."""
    if _fresh(tensor):
        return None   # `t.max()`, `self.temp.exp()`: a new tensor, which no later write reaches
    chains = {dotted(n) for n in m.findall(tensor, m.Name() | m.Attribute())} - {None}

    def hits(node) -> bool:
        d = dotted(node)
        return d is not None and any(d == c or c.startswith(d + ".") or d.startswith(c + ".") for c in chains
                                     if d != "self")
    for node in m.findall(function.body, m.Call(func=m.Attribute()) | m.AugAssign() | m.AssignTarget()):
        if pos[node].start.line <= line:
            continue
        if isinstance(node, cst.Call):
            method = node.func.attr.value
            target = node.func.value if method.endswith("_") and not method.startswith("_") else None
        else:
            target = node.target
            while isinstance(target, cst.Subscript):
                target = target.value
            if isinstance(node, cst.AssignTarget) and target is node.target:
                target = None   # a plain rebinding makes a new object; the kept copy is unaffected
        if target is not None and hits(target):
            return Decline(NAME, f"`{code_of(target).strip()}` is written in place at line {pos[node].start.line}, "
                                 f"after the read (line {line}): under aot_eager and inductor in training, backward "
                                 "read the written value through the kept copy (helper-71: a gradient doubled)")
    return None


def inline_screen(wrapper: MetadataWrapper, line: int) -> Plan | Decline | None:
    """The plan for one ``T.item()`` read in place as a tensor operand on ``line`` (``return
    logits / self.log_t.exp().item()``: the number meets a tensor at once; held-out review
    case 307), or why not; None when the line holds no such read (or is ``x = T.item()``)."""
    pos = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    stmt = next((n for n in find_all(wrapper.module, m.SimpleStatementLine()) if pos[n].start.line == line), None)
    if stmt is None or not stmt.body or item_assignment(stmt.body[0], torch_name(wrapper.module)[0]):
        return None
    calls = m.findall(stmt, m.Call(func=m.Attribute(attr=m.Name("item")), args=[]))
    if len(calls) != 1:
        return None if not calls else Decline(NAME, f"line {line} reads {len(calls)} values with `.item()`")
    call = calls[0]
    tensor, label = call.func.value, code_of(call).strip()
    if len(stmt.body) != 1 or pos[stmt].end.line != pos[stmt].start.line:
        return Decline(NAME, f"`{label}` (line {line}) shares its line with other statements or spans several lines: "
                             "the facts are observed per line")
    scope = next((a for a in _ancestors(stmt, parents) if isinstance(a, (cst.FunctionDef, cst.ClassDef, cst.Lambda))),
                 None)
    if not isinstance(scope, cst.FunctionDef):
        return Decline(NAME, f"`{label}` (line {line}) is not in a function's own body")
    if m.findall(tensor, m.NamedExpr() | m.Lambda() | m.Yield() | m.Await()):
        return Decline(NAME, f"`{code_of(tensor)}` (line {line}) binds a name or defines/awaits a function")
    written = written_after(scope, tensor, line, pos)
    if written:
        return written
    use = _operand_use(call, label, "read in place", parents, pos)
    return use if isinstance(use, Decline) else Plan(stmt, None, tensor, [use], call)


def _autocast_block(node, parents) -> cst.With | None:
    """The innermost ``with`` around ``node`` that enters an autocast context
    (``torch.autocast``, ``torch.amp.autocast``, ``torch.cpu.amp.autocast``...), else None."""
    for anc in _ancestors(node, parents):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            return None
        if isinstance(anc, cst.With) and any(
                isinstance(i.item, cst.Call) and (dotted(i.item.func) or "").rsplit(".", 1)[-1] == "autocast"
                for i in anc.items):
            return anc
    return None


def _ancestors(node, parents):
    while node in parents:
        node = parents[node]
        yield node


def _operand_use(node, name: str, kind: str, parents, pos) -> Use | Decline:
    """How the value read at ``node`` (the name ``x``, or an inline ``T.item()``) is used: a
    :class:`Use` when it is a direct operand of an arithmetic operator or of one comparison
    with a plain name or attribute, evaluated where the facts are observed; else a Decline."""
    ln = pos[node].start.line
    parent = parents.get(node)   # LibCST keeps parentheses on the node itself
    if isinstance(parent, cst.ComparisonTarget):
        parent = parents.get(parent)
    words = (f"`{name}` is {kind} (line {ln}); it stays a Python number only where "
             "it meets a tensor in +, -, *, /, //, % or a comparison, the only places a 0-d tensor "
             "computes the same")
    if isinstance(parent, cst.BinaryOperation) and type(parent.operator) in _ARITH:
        op = _ARITH[type(parent.operator)]
        left = parent.left is node
        other = parent.right if left else parent.left
        if op == "/" and left and not isinstance(other, (cst.Integer, cst.Float, cst.Imaginary)):
            # (a literal divisor is declined below, as a literal: helper-71's `n / 3`)
            return Decline(NAME, f"`{code_of(parent)}` (line {ln}) divides by a tensor: with a Python number "
                                 "on the left, Tensor.__rtruediv__ computes `t.reciprocal() * x` (two "
                                 "roundings), with a 0-d tensor torch.div rounds once")
    elif isinstance(parent, cst.Comparison) and len(parent.comparisons) == 1 \
            and type(parent.comparisons[0].operator) in _CMP:
        op = _CMP[type(parent.comparisons[0].operator)]
        other = parent.comparisons[0].comparator if parent.left is node else parent.left
    elif isinstance(parent, cst.Comparison):
        return Decline(NAME, f"`{code_of(parent)}` (line {ln}) is a chained comparison or a membership test")
    else:
        return Decline(NAME, words)
    if isinstance(other, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                          cst.FormattedString)) or m.findall(other, m.Name(name)) or code_of(other) == name:
        return Decline(NAME, f"`{code_of(parent)}` (line {ln}) combines `{name}` with a Python literal or "
                             "with itself: the result would become a tensor where it was a Python number")
    if dotted(other) is None:
        return Decline(NAME, f"`{code_of(parent)}` (line {ln}): the other operand `{code_of(other)}` is not a "
                             "plain name or attribute; only a name's dtype and rank are observed exactly (an "
                             "expression's would be modelled), so bind it to a local first")
    use_stmt = statement_of(node, parents)
    if not isinstance(use_stmt, cst.SimpleStatementLine) and not _within(node, getattr(use_stmt, "test", None),
                                                                          parents):
        return Decline(NAME, words)
    if isinstance(use_stmt, cst.SimpleStatementLine) and len(use_stmt.body) > 1:
        return Decline(NAME, f"the use `{code_of(parent)}` (line {ln}) shares its line with other statements: "
                             "its operand's facts are observed per line")
    scope_of_use = use_stmt if isinstance(use_stmt, cst.SimpleStatementLine) else use_stmt.test
    if m.findall(scope_of_use, m.NamedExpr()):
        return Decline(NAME, f"the statement of the use `{code_of(parent)}` (line {ln}) binds a name (`:=`)")
    earlier = _runs_before(parent, scope_of_use, pos, parents)
    if earlier is not None:
        return Decline(NAME, f"`{code_of(earlier)}` runs before the use `{code_of(parent)}` on its line (line {ln}) "
                             "and may change its operand after the facts are observed (at the line's start)")
    if _under_short_circuit(parent, use_stmt, parents):
        return Decline(NAME, f"the use `{code_of(parent)}` (line {ln}) sits under `and`/`or`/`if ... else`: "
                             "its operand may not be evaluated where the facts are observed")
    return Use(other, op)


def _within(node, ancestor, parents) -> bool:
    """Whether ``node`` is ``ancestor`` or sits inside it (``ancestor`` None: never)."""
    cur = node
    while cur is not None:
        if cur is ancestor:
            return True
        cur = parents.get(cur)
    return False


def _runs_before(use, scope, pos, parents):
    """A call or ``await`` in ``scope`` (the use's statement, or its header) that Python evaluates
    before ``use``: one that starts earlier in the text and does not contain it. None if none."""
    start = (pos[use].start.line, pos[use].start.column)
    for node in m.findall(scope, m.Call() | m.Await() | m.Yield()):
        if not _within(use, node, parents) and (pos[node].start.line, pos[node].start.column) < start:
            return node
    return None


def _under_short_circuit(node, stmt, parents) -> bool:
    cur = parents.get(node)
    while cur is not None and cur is not stmt:
        if isinstance(cur, (cst.BooleanOperation, cst.IfExp, cst.CompFor, cst.ListComp, cst.SetComp, cst.DictComp,
                            cst.GeneratorExp)):
            return True
        cur = parents.get(cur)
    return False


def _params(function: cst.FunctionDef):
    p = function.params
    out = [*p.posonly_params, *p.params, *p.kwonly_params]
    out += [s for s in (p.star_arg, p.star_kwarg) if isinstance(s, cst.Param)]
    return out


def _binds_name(t: cst.CSTNode, name: str) -> bool:
    if isinstance(t, (cst.FunctionDef, cst.ClassDef)):
        return t.name.value == name
    if isinstance(t, cst.ImportAlias):
        bound = t.asname.name if t.asname is not None else t.name
        return code_of(bound).split(".")[0] == name
    if isinstance(t, cst.ExceptHandler):
        target = t.name.name if t.name is not None else None
    elif isinstance(t, cst.WithItem):
        target = t.asname.name if t.asname is not None else None
    else:
        target = t.target
    return target is not None and name in bound_names(target)


def match(loc: Located) -> Match | Decline:
    if constant_choice(loc.node) is not None:   # (an `elif` alone is no choice: the screen says so)
        plan = screen(shared_wrapper(loc.module), loc.line)
        if isinstance(plan, Decline):
            return plan
        return Match(NAME, f"`{choice_text(plan.name, plan.tensor, plan.choice)}` -> a 0-d tensor chosen by "
                           f"torch.where: {len(plan.uses)} later use(s), each a tensor operand")
    if item_assignment(loc.node, torch_name(loc.module)[0]) is None:
        plan = inline_screen(shared_wrapper(loc.module), loc.line)
        if plan is None:
            return _generic()
        if isinstance(plan, Decline):
            return plan
        return Match(NAME, f"`{code_of(plan.call).strip()}` -> a detached 0-d tensor, used in place as a tensor "
                           "operand")
    plan = screen(shared_wrapper(loc.module), loc.line)
    if isinstance(plan, Decline):
        return plan
    return Match(NAME, f"`{plan.name} = {code_of(plan.tensor)}.item()` -> a detached 0-d tensor: {len(plan.uses)} "
                       "later use(s), each a tensor operand")
