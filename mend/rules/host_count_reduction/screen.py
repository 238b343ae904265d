"""host-count-reduction: the static screen (which sites the rule takes, and why it declines the
others) and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._bindings import bindings
from mend.rules._common import code_of as _code, find_all
from mend.rules._common import dotted, shared_wrapper
from mend.rules._scalars import scalar_candidates
from mend.rules._uses import DYNAMIC_SCOPE as _DYNAMIC_SCOPE
from mend.rules._uses import NameWalk as _Walk
from mend.rules._uses import statement_of as _stmt_of
from mend.rules._uses import use_kind as _use_kind

NAME = "host-count-reduction"
CATEGORY = "item-tolist"

_OPS = {cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.LessThan: "<", cst.LessThanEqual: "<=",
        cst.Equal: "==", cst.NotEqual: "!="}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
_ARITH = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*"}
_INT64 = 2 ** 63


@dataclass
class _Plan:
    loop: cst.For
    counter: str
    var: str
    tensor: cst.BaseExpression
    op: str                    # normalised: `s <op> C`
    threshold: cst.BaseExpression
    threshold_value: int | float
    init: int
    step: int
    uses: list                 # (other operand node, statement of the use)
    form: str = "loop"         # "loop": `for s in T.tolist(): if ...: n += k`; "sum": `n = sum(k for s in ... if ...)`


def _generic() -> Decline:
    from mend.taxonomy import UNFIXABLE_REASONS

    return Decline(None, UNFIXABLE_REASONS[CATEGORY])


def _number(node: cst.BaseExpression) -> int | float | None:
    """The value of a numeric literal (``3``, ``0.5``, ``-1e-3``), else None."""
    inner, sign = node, 1
    while isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, (cst.Minus, cst.Plus)):
        sign = -sign if isinstance(inner.operator, cst.Minus) else sign
        inner = inner.expression
    if not isinstance(inner, (cst.Integer, cst.Float)):
        return None
    try:
        value = ast.literal_eval(inner.value)
    except (ValueError, SyntaxError):
        return None
    return sign * value


def _is_tolist(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "tolist")


def _names(node: cst.CSTNode, name: str) -> list[cst.Name]:
    return [n for n in m.findall(node, m.Name(name))]


def _screen(wrapper: MetadataWrapper, line: int) -> _Plan | Decline:
    pos = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    loops = [n for n in find_all(wrapper.module, m.For()) if pos[n].start.line == line]
    if not loops:
        lines = [n for n in find_all(wrapper.module, m.SimpleStatementLine()) if pos[n].start.line == line]
        return _screen_comprehension(lines[0], pos, parents) if lines else _generic()
    loop = loops[0]
    chain = _ancestry(loop, parents)
    function = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), None)
    where = f"line {line}"
    if not _is_tolist(loop.iter):
        return Decline(NAME, f"the loop ({where}) iterates `{_code(loop.iter)}`, not `<tensor>.tolist()`; "
                             + _generic().reason)
    if function is None:
        return Decline(NAME, f"the counting loop ({where}) is not inside a function")
    inner = chain[chain.index(function) + 1:]
    if any(isinstance(a, (cst.For, cst.While)) for a in inner):
        return Decline(NAME, f"the counting loop ({where}) sits inside another loop")
    if loop.asynchronous is not None:
        return Decline(NAME, f"`async for` ({where}) is not rewritten")
    if loop.orelse is not None:
        return Decline(NAME, f"the loop ({where}) has an `else` branch")
    if not isinstance(loop.target, cst.Name):
        return Decline(NAME, f"the loop target `{_code(loop.target)}` ({where}) is not a single name")
    var = loop.target.value
    tensor = loop.iter.func.value
    why = _iterated_decline(tensor, where)
    if why is not None:
        return why
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    if m.findall(loop.body, m.Break() | m.Continue()):
        return Decline(NAME, f"the loop body ({where}) has `break`/`continue`: the count stops early")
    if len(body) != 1 or not isinstance(body[0], cst.If):
        return Decline(NAME, f"the loop body ({where}) is not a single `if s <cmp> C: n += k`")
    if_ = body[0]
    if if_.orelse is not None:
        return Decline(NAME, f"the `if` in the loop ({where}) has an else/elif arm")
    stmts = if_.body.body if isinstance(if_.body, cst.IndentedBlock) else ()
    small = stmts[0].body if len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine) else []
    if len(small) != 1 or not isinstance(small[0], cst.AugAssign):
        return Decline(NAME, f"the guarded body ({where}) does more than `n += <int literal>`")
    aug = small[0]
    if not isinstance(aug.operator, cst.AddAssign) or not isinstance(aug.target, cst.Name):
        return Decline(NAME, f"`{_code(aug).strip()}` ({where}) is not `n += <int literal>`")
    counter = aug.target.value
    if not isinstance(aug.value, cst.Integer):
        return Decline(NAME, f"the increment `{_code(aug.value)}` ({where}) is not an int literal")
    step = ast.literal_eval(aug.value.value)
    if counter == var:
        return Decline(NAME, f"the loop variable `{var}` is also the counter ({where})")
    got = _comparison(if_.test, var, chain, where)
    if isinstance(got, Decline):
        return got
    op, threshold, value = got
    stripped = loop.with_changes(leading_lines=[])
    if m.findall(stripped, m.Comment()):
        return Decline(NAME, f"the loop ({where}) holds a comment the rewrite would drop")

    # the counter's initialisation: the last statement binding it in the same block
    block = parents[loop]
    siblings = list(block.body)
    idx = siblings.index(loop)
    init, init_line = None, 0
    for prev in reversed(siblings[:idx]):
        if not _binds(prev, counter):
            continue
        small = prev.body if isinstance(prev, cst.SimpleStatementLine) else []
        if len(small) == 1 and isinstance(small[0], cst.Assign) and len(small[0].targets) == 1 and \
                m.matches(small[0].targets[0].target, m.Name(counter)):
            n0 = _number(small[0].value)
            if isinstance(n0, int) and not isinstance(small[0].value, cst.Float):
                init, init_line = n0, pos[prev].start.line
                break
            return Decline(NAME, f"`{counter}` starts as `{_code(small[0].value)}` (line {pos[prev].start.line}), "
                                 "not an int literal")
        return Decline(NAME, f"`{counter}` is assigned between its initialisation and the loop "
                             f"(line {pos[prev].start.line})")
    if init is None:
        return Decline(NAME, f"`{counter}` is not initialised to an int literal in the same block before the "
                             f"loop ({where})")
    if abs(init) >= _INT64 or abs(step) >= _INT64:
        return Decline(NAME, f"the initial value or increment of `{counter}` does not fit in int64")

    uses = _rest_of_function(function, loop, counter, var, tensor, init_line, pos, parents)
    if isinstance(uses, Decline):
        return uses
    return _Plan(loop, counter, var, tensor, op, threshold, value, init, step, uses)


def _screen_comprehension(line: cst.SimpleStatementLine, pos, parents) -> _Plan | Decline:
    """``N = sum(K for s in T.tolist() if s <cmp> C)``, ``N = sum(s <cmp> C for s in T.tolist())``
    or ``N = len([s for s in T.tolist() if s <cmp> C])``: the count of the loop form in one
    statement, Python's ``sum`` starting at 0."""
    small = line.body[0] if len(line.body) == 1 else None
    value = small.value if isinstance(small, cst.Assign) else None
    if _list_count(value) is not None:
        return _screen_list_count(line, small, value, pos, parents)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("sum", "len")
            and len(value.args) == 1 and value.args[0].keyword is None and not value.args[0].star
            and isinstance(value.args[0].value, (cst.GeneratorExp, cst.ListComp))):
        return _generic()
    where = f"line {pos[line].start.line}"
    fn, comp = value.func.value, value.args[0].value
    chain = _ancestry(line, parents)
    function = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), None)
    loop_ = comp.for_in
    if not _is_tolist(loop_.iter):
        return Decline(NAME, f"the comprehension ({where}) iterates `{_code(loop_.iter)}`, not `<tensor>.tolist()`; "
                             + _generic().reason)
    why = _statement_decline(chain, function, small, where)
    if why is not None:
        return why
    if loop_.inner_for_in is not None or loop_.asynchronous is not None or not isinstance(loop_.target, cst.Name):
        return Decline(NAME, f"the comprehension ({where}) is not one plain `for s in T.tolist()`")
    binds = bindings(next(a for a in chain if isinstance(a, cst.Module)))
    if fn in binds or "*" in binds:
        return Decline(NAME, f"the module binds `{fn}` (or star-imports): the `{fn}` on {where} may not be the "
                             "builtin")
    var, counter, tensor = loop_.target.value, small.targets[0].target.value, loop_.iter.func.value
    elt, ifs = comp.elt, list(loop_.ifs)
    if fn == "sum" and not ifs and isinstance(elt, cst.Comparison):
        test, step = elt, 1                      # sum(s > C for s in ...): True counts 1
    elif len(ifs) == 1 and (fn == "sum" and isinstance(elt, cst.Integer) or
                            fn == "len" and isinstance(comp, cst.ListComp) and m.matches(elt, m.Name(var))):
        test, step = ifs[0].test, ast.literal_eval(elt.value) if fn == "sum" else 1
    else:
        return Decline(NAME, f"`{_code(value)}` ({where}) is not `sum(<int literal> for s in T.tolist() if s <cmp> "
                             "C)`, `sum(s <cmp> C for s in T.tolist())` or `len([s for s in T.tolist() if s <cmp> C])`")
    why = _iterated_decline(tensor, where)
    if why is not None:
        return why
    if counter == var:
        return Decline(NAME, f"the comprehension variable `{var}` is also the counter ({where})")
    got = _comparison(test, var, chain, where)
    if isinstance(got, Decline):
        return got
    op, threshold, number = got
    if abs(step) >= _INT64:
        return Decline(NAME, f"the increment of `{counter}` does not fit in int64")
    if m.findall(line.with_changes(leading_lines=[]), m.Comment()):
        return Decline(NAME, f"the count ({where}) holds a comment the rewrite would drop")
    uses = _rest_of_function(function, line, counter, None, tensor, pos[line].start.line, pos, parents)
    if isinstance(uses, Decline):
        return uses
    return _Plan(line, counter, var, tensor, op, threshold, number, 0, step, uses, form="sum")


# the loop variable of the count `T.tolist().count(C)` stands for (no such name is read)
_COUNT_VAR = "_mend_s"


def _list_count(value) -> cst.BaseExpression | None:
    """C for ``T.tolist().count(C)`` (one positional argument), else None."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "count" \
            and _is_tolist(value.func.value) and len(value.args) == 1 and value.args[0].keyword is None \
            and not value.args[0].star:
        return value.args[0].value
    return None


def _screen_list_count(line, small, value, pos, parents) -> _Plan | Decline:
    """``N = T.tolist().count(C)`` (helper-68's c33: ``flags.tolist().count(True)``) is
    ``N = sum(1 for s in T.tolist() if s == C)``: ``list.count`` tests ``s is C or s == C``, and
    for a literal C (a number, True or False; never NaN) ``s is C`` implies ``s == C``. True and
    False are the numbers 1 and 0 there (``1.0 == True``)."""
    where = f"line {pos[line].start.line}"
    c = _list_count(value)
    named = {"True": 1, "False": 0}.get(c.value) if isinstance(c, cst.Name) else None
    if named is None and _number(c) is None:
        return Decline(NAME, f"`{_code(value)}` ({where}) counts `{_code(c)}`, not a numeric literal, True or False")
    threshold = cst.Integer(str(named)) if named is not None else c
    chain = _ancestry(line, parents)
    function = next((a for a in reversed(chain) if isinstance(a, cst.FunctionDef)), None)
    why = _statement_decline(chain, function, small, where)
    if why is not None:
        return why
    tensor = value.func.value.func.value
    why = _iterated_decline(tensor, where)
    if why is not None:
        return why
    if m.findall(line.with_changes(leading_lines=[]), m.Comment()):
        return Decline(NAME, f"the count ({where}) holds a comment the rewrite would drop")
    test = cst.Comparison(cst.Name(_COUNT_VAR), [cst.ComparisonTarget(cst.Equal(), threshold)])
    got = _comparison(test, _COUNT_VAR, chain, where)
    if isinstance(got, Decline):
        return got
    op, threshold, number = got
    counter = small.targets[0].target.value
    uses = _rest_of_function(function, line, counter, None, tensor, pos[line].start.line, pos, parents)
    if isinstance(uses, Decline):
        return uses
    return _Plan(line, counter, _COUNT_VAR, tensor, op, threshold, number, 0, 1, uses, form="sum")


def _statement_decline(chain: list, function, small, where: str) -> Decline | None:
    """Why a one-statement count (``N = ...``) is not taken where it stands, else None."""
    if function is None:
        return Decline(NAME, f"the count ({where}) is not inside a function")
    if any(isinstance(a, (cst.For, cst.While)) for a in chain[chain.index(function) + 1:]):
        return Decline(NAME, f"the count ({where}) sits inside a loop")
    if len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
        return Decline(NAME, f"the count ({where}) is not assigned to one name")
    return None


def _ancestry(node: cst.CSTNode, parents) -> list[cst.CSTNode]:
    """``node``'s ancestors, outermost first."""
    chain, cur = [], node
    while cur in parents:
        cur = parents[cur]
        chain.append(cur)
    return chain[::-1]


def _iterated_decline(tensor: cst.BaseExpression, where: str) -> Decline | None:
    """Why the expression ``.tolist()`` is called on cannot be counted as a tensor, else None."""
    if m.findall(tensor, m.NamedExpr() | m.Lambda() | m.Yield() | m.Await()):
        return Decline(NAME, f"the iterated expression ({where}) binds a name or defines/awaits a function")
    if _through_numpy(tensor):
        return Decline(NAME, f"the iterated expression `{_code(tensor)}` ({where}) goes through NumPy: its "
                             "tolist() is not a torch.Tensor's, and the count would not be a tensor")
    return None


def _comparison(test: cst.BaseExpression, var: str, chain: list, where: str):
    """``(op, threshold, value)`` for the test ``var <cmp> C`` (or ``C <cmp> var``, flipped), C a
    finite numeric literal or a Python-number attribute of the module; else why not. A bare
    ``var`` is ``var != 0`` and ``not var`` is ``var == 0``: the truth of a number (tolist()
    gives int, float or bool) is ``!= 0``, NaN true in both (helper-68's c32: ``if v``)."""
    if m.matches(test, m.Name(var)):
        return "!=", cst.Integer("0"), 0
    if m.matches(test, m.UnaryOperation(operator=m.Not(), expression=m.Name(var))):
        return "==", cst.Integer("0"), 0
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or \
            type(test.comparisons[0].operator) not in _OPS:
        return Decline(NAME, f"the test `{_code(test)}` ({where}) is not one comparison `s <cmp> C` "
                             "with <cmp> one of >, >=, <, <=, ==, !=")
    op = _OPS[type(test.comparisons[0].operator)]
    left, right = test.left, test.comparisons[0].comparator
    # a Python-number attribute (`self.min_len`, bound only in __init__ to no tensor): its
    # value is read on the example run (count-compare-exact with the observed value)
    attrs = {a for a in scalar_candidates(chain) if a.startswith("self.")}

    def threshold_ok(node) -> bool:
        return _number(node) is not None or (dotted(node) or "") in attrs

    if m.matches(left, m.Name(var)) and threshold_ok(right):
        threshold = right
    elif m.matches(right, m.Name(var)) and threshold_ok(left):
        threshold, op = left, _FLIP[op]
    else:
        return Decline(NAME, f"the test `{_code(test)}` ({where}) does not compare the loop variable `{var}` "
                             "with a numeric literal or a Python-number attribute of the module")
    value = _number(threshold)
    if isinstance(value, float) and not math.isfinite(value):
        return Decline(NAME, f"the threshold `{_code(threshold)}` ({where}) is not a finite number")
    if isinstance(value, int) and abs(value) > 2 ** 53:
        return Decline(NAME, f"the threshold `{_code(threshold)}` ({where}) is an int beyond 2**53, not exact "
                             "as a float64 (the comparison is not encoded)")
    return op, threshold, value


def _rest_of_function(function: cst.FunctionDef, loop: cst.CSTNode, counter: str, var: str | None,
                      tensor: cst.BaseExpression, init_line: int, pos, parents) -> list | Decline:
    """After the count (the loop, or the statement summing a comprehension): the later uses of
    the counter, each an operand of ``+``/``-``/``*`` with a non-literal (the count becomes a
    0-d tensor), and nothing binding or writing what the iterated tensor reads; else why not.
    ``var``: the loop variable, which Python leaves bound after a loop (None for a
    comprehension, whose variable is its own)."""
    names = {counter} | ({var} if var else set())
    for g in m.findall(function, m.Global() | m.Nonlocal()):
        declared = {n.name.value for n in g.names}
        if declared & names:
            return Decline(NAME, f"`{sorted(declared & names)[0]}` is declared global/nonlocal")
    for call in m.findall(function, m.Call(func=m.Name())):
        if call.func.value in _DYNAMIC_SCOPE:
            return Decline(NAME, f"the function calls `{call.func.value}()`, which can read the loop's names")
    walk = _Walk(names)
    function.body.visit(walk)
    end = pos[loop].end.line
    uses = []
    for node, nested in walk.found:
        ln = pos[node].start.line
        if nested:
            return Decline(NAME, f"`{node.value}` is captured by a nested function or class (line {ln})")
        if ln <= end:
            continue
        if node.value == var:
            return Decline(NAME, f"the loop variable `{var}` is read after the loop (line {ln}); Python leaves it "
                                 "bound to the last element")
        parent = parents.get(node)
        if not isinstance(parent, cst.BinaryOperation) or type(parent.operator) not in _ARITH:
            return Decline(NAME, f"`{counter}` is {_use_kind(node, parents)} after the count (line {ln}); the count "
                                 "becomes a 0-d int64 tensor, so only operands of +, - and * keep their meaning")
        other = parent.right if parent.left is node else parent.left
        if parent.left is node and isinstance(parent.operator, cst.Multiply):
            # helper-70: `n * h` with h bfloat16 casts a 0-d int64 n to bfloat16 first (1001 becomes
            # 1000), where a Python n meets h as `h.__rmul__(n)`, in float32; `h * n` agrees
            return Decline(NAME, f"`{_code(parent)}` (line {ln}) has `{counter}` on the left of `*`: a 0-d tensor "
                                 "there is cast to a float16/bfloat16 operand's dtype before multiplying, a Python "
                                 f"number is not; written `{_code(other)} * {counter}` it would be taken")
        if _number(other) is not None or isinstance(other, (cst.SimpleString, cst.ConcatenatedString)):
            return Decline(NAME, f"`{_code(parent)}` (line {ln}) combines `{counter}` with a Python literal: the "
                                 "result would become a tensor instead of a Python number")
        if _names(other, counter):
            return Decline(NAME, f"`{_code(parent)}` (line {ln}) reads `{counter}` on both sides")
        stmt = _stmt_of(node, parents)
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) > 1:
            return Decline(NAME, f"the use `{_code(parent)}` (line {ln}) shares its line with other statements: its "
                                 "operand's facts are observed per line")
        if m.findall(stmt if isinstance(stmt, cst.SimpleStatementLine) else parent, m.NamedExpr()):
            return Decline(NAME, f"the statement of the use `{_code(parent)}` (line {ln}) binds a name (`:=`)")
        uses.append((other, stmt))
    rebound = _rebinding(function, tensor, pos, init_line)
    if rebound:
        return Decline(NAME, f"`{rebound[0]}` (read by the iterated `{_code(tensor)}`) is rebound or written at line "
                             f"{rebound[1]}, after `{counter}` is initialised (line {init_line}): the dtype and rank "
                             "observed where the count runs might not describe what the loop iterates")
    return uses


def _through_numpy(tensor: cst.BaseExpression) -> bool:
    """Whether the iterated expression goes through NumPy (``.numpy()``, ``np.``/``numpy.``)."""
    return bool(m.findall(tensor, m.Attribute(attr=m.Name("numpy")) | m.Name("numpy") | m.Name("np")))


def _target_roots(expr: ast.AST) -> tuple[set[str], set[str]]:
    """(root names, dotted ``a.b`` chains) a binding target rebinds or writes into."""
    if isinstance(expr, ast.Name):
        return {expr.id}, {expr.id}
    if isinstance(expr, (ast.Tuple, ast.List)):
        roots, dotted = set(), set()
        for el in expr.elts:
            r, d = _target_roots(el)
            roots |= r
            dotted |= d
        return roots, dotted
    if isinstance(expr, ast.Starred):
        return _target_roots(expr.value)
    if isinstance(expr, (ast.Attribute, ast.Subscript)):
        roots, dotted = _target_roots(expr.value)
        if isinstance(expr, ast.Attribute):
            dotted = {f"{d}.{expr.attr}" for d in dotted} if dotted else set()
        return roots, dotted
    return set(), set()


def _read_names(tensor: cst.BaseExpression) -> tuple[set[str], set[str]]:
    """(names, dotted ``self.`` chains) the iterated expression reads."""
    try:
        tree = ast.parse(_code(tensor).strip(), mode="eval")
    except SyntaxError:
        return set(), set()
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    chains = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            _, dotted = _target_roots(node)
            chains |= {d for d in dotted if d.startswith("self.")}
    return names, chains


def _rebinding(function: cst.FunctionDef, tensor: cst.BaseExpression, pos, init_line: int) -> tuple[str, int] | None:
    """A name (or ``self.`` attribute) the iterated expression reads that some statement from
    the counter's initialisation to the end of the function binds, deletes or writes into
    (attribute or item assignment): (name, line), else None. Conservative: any such
    statement counts, wherever it is and whether or not it runs."""
    names, chains = _read_names(tensor)
    plain = names - {"self"}
    if not names:
        return None
    kinds = (m.AssignTarget() | m.AugAssign() | m.AnnAssign() | m.For() | m.CompFor() | m.WithItem() | m.NamedExpr()
             | m.Del() | m.ImportAlias() | m.FunctionDef() | m.ClassDef() | m.ExceptHandler() | m.Global()
             | m.Nonlocal())
    for t in m.findall(function.body, kinds):
        line = pos[t].start.line if t in pos else init_line
        if line < init_line:
            continue
        if isinstance(t, (cst.Global, cst.Nonlocal)):
            hit = {n.name.value for n in t.names} & names
            if hit:
                return sorted(hit)[0], line
            continue
        if isinstance(t, cst.ImportAlias):
            bound = {_code(t.asname.name) if t.asname else _code(t.name).split(".")[0]}
            hit = bound & names
            if hit:
                return sorted(hit)[0], line
            continue
        if isinstance(t, (cst.FunctionDef, cst.ClassDef)):
            if t.name.value in names:
                return t.name.value, line
            continue
        if isinstance(t, cst.ExceptHandler):
            target = t.name.name if t.name is not None else None
        elif isinstance(t, cst.WithItem):
            target = t.asname.name if t.asname is not None else None
        elif isinstance(t, cst.Del):
            target = t.target
        else:
            target = t.target
        if target is None:
            continue
        try:
            tree = ast.parse(_code(target).strip(), mode="eval").body
        except SyntaxError:
            return _code(target).strip(), line
        roots, dotted = _target_roots(tree)
        hit = roots & plain
        if hit:
            return sorted(hit)[0], line
        if "self" in roots and "self" in names:
            if "self" in dotted:
                return "self", line
            for d in dotted:
                for c in chains:
                    if c == d or c.startswith(d + ".") or d.startswith(c + "."):
                        return c, line
    if "self" in names:
        for call in m.findall(function.body, m.Call(func=m.Name("setattr") | m.Name("delattr"))):
            return f"self (`{call.func.value}`)", pos[call].start.line
    return None


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    """Whether ``stmt`` (anywhere inside) binds ``name``."""
    pattern = m.Name(name)
    for t in m.findall(stmt, m.AssignTarget() | m.AugAssign() | m.AnnAssign() | m.For() | m.WithItem()
                       | m.NamedExpr() | m.Del() | m.ImportAlias() | m.CompFor() | m.FunctionDef() | m.ClassDef()
                       | m.ExceptHandler() | m.Global() | m.Nonlocal()):
        target = getattr(t, "target", None) or getattr(t, "asname", None) or getattr(t, "name", None)
        if isinstance(t, (cst.Global, cst.Nonlocal)):
            if any(n.name.value == name for n in t.names):
                return True
            continue
        if target is not None and m.findall(target, pattern):
            return True
        if isinstance(t, cst.ImportAlias) and t.asname is None and _code(t.name).split(".")[0] == name:
            return True
    return False


def _membership(node: cst.CSTNode) -> str | None:
    """The first ``v in t`` / ``v not in t`` test in the statement (its header, for a
    compound one), as text, or None."""
    parts = [node.test] if isinstance(node, (cst.If, cst.While)) else \
        [] if isinstance(node, cst.BaseCompoundStatement) else [node]
    for part in parts:
        for comp in m.findall(part, m.Comparison()):
            if any(isinstance(t.operator, (cst.In, cst.NotIn)) for t in comp.comparisons):
                return _code(comp).strip()
    return None


def match(loc: Located) -> Match | Decline:
    node = loc.node
    test = _membership(node)
    if test is not None and not re.search(r"\.(item|tolist)\(|\b(int|float|bool)\(", _code(node)):
        # no other host read in the statement: the `in` is what reads the tensor
        # Tensor.__contains__ is `bool((v == t).any().item())`: the generic "Python code consumes
        # a number" reason hid that this is a membership test (generalisation probe)
        return Decline(None, f"`{test[:60]}` is a membership test on a tensor: Tensor.__contains__ reads "
                       "`(t == v).any()` back as a Python bool (.item()); mend rewrites it only as the whole "
                       "test of an `if`/`elif` (rule tensor-membership); here its Python bool is returned, "
                       "stored or combined with other tests, and a tensor in its place would change what the "
                       "callers get; by hand, `torch.where((v == t).any(), a, b)` at the branch that reads it")
    if not isinstance(node, (cst.For, cst.Assign)):
        return _generic()
    plan = _screen(shared_wrapper(loc.module), loc.line)
    if isinstance(plan, Decline):
        return plan
    if plan.form == "sum":
        return Match(NAME, f"`{plan.counter} = sum(... for {plan.var} in ....tolist() ...)` -> "
                           f"`{plan.counter} = {_count_expr(plan)}`")
    return Match(NAME, f"`for {plan.var} in ....tolist(): if {plan.var} {plan.op} ...: {plan.counter} += "
                       f"{plan.step}` -> `{plan.counter} = {plan.counter} + {_count_expr(plan)}`")


def _count_expr(plan: _Plan) -> str:
    count = f"({_code(plan.tensor)} {plan.op} {_code(plan.threshold)}).sum()"
    return count if plan.step == 1 else f"{plan.step} * {count}"

