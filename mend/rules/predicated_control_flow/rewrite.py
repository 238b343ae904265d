"""The rule's entry points: :func:`rewrite` (a site -> the new module and its obligations,
or a decline), :func:`match` (the same verdict, for a scan) and :func:`first_site` (the
line an example's site is on)."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.locate import Located
from mend.rules._base import Decline, Match, RewriteResult
from mend.rules._common import add_helpers, add_import
from mend.rules.predicated_control_flow.autocast import anomaly_guard, guard
from mend.rules.predicated_control_flow.env import NAME, _Declined, _Env, _strip
from mend.rules.predicated_control_flow.cond import READY, READY_HELPER, _safe_read, _self_chain
from mend.rules.predicated_control_flow.gate import add_helper
from mend.rules.predicated_control_flow.screen import _is_static
from mend.rules.predicated_control_flow.where import _rewrite_if, _rewrite_logic, where_equals_ite


def match(loc: Located) -> Match | Decline:
    """Whether :func:`rewrite` would rewrite the site at ``loc``: it runs the rewrite on
    ``loc.module`` and keeps only the verdict, so the two always agree."""
    node = loc.node
    if isinstance(node, cst.BaseSmallStatement) and loc.ancestors and isinstance(
            loc.ancestors[-1], cst.SimpleStatementLine):
        node = loc.ancestors[-1]
    try:
        result = _rewrite_at(loc.module, node, loc.line)
    except Exception as exc:  # a scan must survive a rule bug; say what failed
        return Decline(NAME, f"the rewrite failed on this site ({type(exc).__name__}: {exc})")
    if isinstance(result, Decline):
        return result
    return Match(NAME, result.detail)


class _Statements(cst.CSTVisitor):
    """Statements with their ancestors, indexed by start line."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.found: list[tuple[int, cst.CSTNode, list[cst.CSTNode]]] = []
        self.positions = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            pos = self.get_metadata(PositionProvider, node)
            self.positions[node] = pos
            self.found.append((pos.start.line, node, list(self.stack)))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _index(module: cst.Module) -> _Statements:
    index = _Statements()
    MetadataWrapper(module, unsafe_skip_copy=True).visit(index)
    return index


def _splice(module: cst.Module, pairs) -> cst.Module:
    """Replace statements (by identity) with lists of statements."""
    table = {id(old): new for old, new in pairs}

    class T(cst.CSTTransformer):
        def on_leave(self, original, updated):
            new = table.get(id(original))
            if new is None:
                return updated
            if len(new) == 1:
                return new[0]
            return cst.FlattenSentinel(new) if new else cst.RemoveFromParent()

    return module.visit(T())


FORMS = ("where", "cond")


def rewrite(module: cst.Module, line: int, form: str | None = None) -> RewriteResult | Decline:
    """Predicate the data-dependent ``if`` (or tensor ``and``/``or``/``not``) on ``line``.

    GraphMend's "[Where]" transformation (arXiv 2509.16248): a branch on a tensor value
    becomes ``torch.where``, evaluating both sides, so Dynamo keeps one graph. Returns
    the new module source and the proof obligations, or a :class:`Decline` saying why
    the site is unsafe to predicate.

    ``form``: None, the rule's own choice (``torch.cond`` where a side must not run
    speculatively, else ``torch.where``); ``"where"``: never ``torch.cond``; ``"cond"``:
    ``torch.cond``, or a Decline saying why it does not apply. The result's ``form`` says
    which was emitted (None for tensor logic) and ``cost_parts`` the branch's parts for the
    cost model. Raises ValueError for another ``form``.
    """
    if form is not None and form not in FORMS:
        raise ValueError(f"form {form!r}: one of {', '.join(FORMS)} or None")
    return _rewrite_at(module, None, line, form)


def autocast_guarded(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The rule's own form of the ``if`` on ``line`` under ``else:`` of ``if <autocast on>:``
    (``torch.is_autocast_enabled(d)`` for cpu, cuda, xpu and mps) keeping the original ``if`` (:mod:`.autocast`): ``Rule.fallback`` for a rewrite the differential
    test's autocast leg refuted. A Decline for tensor logic, a ternary, a ``:=`` test and a
    plan that also moves setup."""
    return _rewrite_at(module, None, line, None, autocast=True)


def alternatives(module: cst.Module, line: int) -> list[RewriteResult]:
    """The site's other admissible rewrites besides :func:`rewrite`'s own: the other of
    ``torch.where`` / ``torch.cond`` where it applies (each with its ``form``); empty when
    the site declines, is tensor logic, or has no other form. Never raises."""
    try:
        first = rewrite(module, line)
        if isinstance(first, Decline) or first.form is None:
            return []
        out: list[RewriteResult] = []
        for form in FORMS:
            if form == first.form:
                continue
            alt = rewrite(module, line, form=form)
            if isinstance(alt, RewriteResult) and alt.code != first.code and all(alt.code != o.code for o in out):
                out.append(alt)
        return out
    except Exception:  # noqa: BLE001 - an alternative is optional; the rule's own rewrite stands
        return []


def _rewrite_at(module: cst.Module, node: cst.CSTNode | None, line: int,
                form: str | None = None, autocast: bool = False) -> RewriteResult | Decline:
    """:func:`rewrite` of ``node`` (a statement of ``module``), or of the outermost
    statement starting on ``line`` when ``node`` is None or not one the index holds."""
    index = _index(module)
    found = [(n, a) for _, n, a in index.found if n is node] if node is not None else []
    starting = found or [(n, a) for ln, n, a in index.found if ln == line]
    if not starting:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = min(starting, key=lambda e: len(e[1]))
    loops = [a for a in _same_function(ancestors) if isinstance(a, (cst.For, cst.While))]
    if any(isinstance(a, cst.While) for a in loops):
        return Decline(NAME, "the branch sits inside a `while` loop (Dynamo skipped the whole frame): its "
                             "iteration count may follow tensor values, and predicating inside it is not attempted")
    if loops and m.findall(node, m.Break() | m.Continue() | m.Yield()):
        return Decline(NAME, "the branch inside the loop holds `break`/`continue`/`yield`, which predication "
                             "cannot express")
    per_item = {n.value for lp in loops for n in m.findall(lp.target, m.Name())}
    env = _Env(module, ancestors)   # the ternary and walrus forms below recurse on their own module
    picked = _module_aliases(node, env, per_item)
    skipped = [c for c in m.findall(node, m.Call()) if _root(c.func) in per_item | set(picked)]
    items = {_root(c.func) for c in skipped}
    loop_roots = _item_roots(loops, items - set(picked))
    if loop_roots is not None:
        loop_roots += [r for n, r in picked.items() if n in items and r not in loop_roots]
    if skipped and (form == "where" or loop_roots is None):
        return Decline(NAME, f"the branch inside the loop skips a call of the loop's item "
                             f"(`{cst.Module([]).code_for_node(skipped[0].func)}`, an MoE expert or a layer): "
                             "predicating it with torch.where would run every one on every call (shared case 006: a "
                             "skipped expert overflowing to inf), and torch.cond, which runs only the taken side, needs "
                             "the loop to go over an attribute of `self` (`for expert in self.experts`, or "
                             "`enumerate(...)` of one) so that its guard can check those modules")
    if skipped:   # only torch.cond keeps the skip; its guard reaches the items through the loop's iterable
        form = "cond"
    ternary = _ternary_as_if(module, node, index.positions, line)
    if ternary is not None:
        if autocast:
            return Decline(NAME, "the autocast-guarded form does not apply to a conditional expression")
        if isinstance(ternary, Decline):
            return ternary
        result = _rewrite_at(ternary[0], None, line, form)
        if isinstance(result, RewriteResult):
            result.span = ternary[1]   # the input's lines: the ternary's statement
        return result
    hoisted = _walrus_hoisted(module, node, ancestors, index.positions)
    if hoisted is not None:
        if autocast:
            return Decline(NAME, "the autocast-guarded form does not apply to a test that binds a name with :=")
        result = _rewrite_at(hoisted[0], None, hoisted[1], form)
        if isinstance(result, RewriteResult):
            result.span = hoisted[2]   # the input's lines: the if statement
            result.detail = f"{result.detail}; `{hoisted[3]}` bound on the line before the `if`"
        return result
    env.want = form
    if skipped:
        env.loop_roots, env.loop_items = loop_roots, items
    if env.function is not None and env.function.name.value.startswith("_mend_"):
        return Decline(NAME, f"`{env.function.name.value}` is mend's own helper; its test is a trace-time constant")
    hooked = m.findall(env.function or module, m.Call(func=m.Attribute(attr=m.Name(
        "register_hook") | m.Name("register_post_accumulate_grad_hook"))))
    if hooked:
        return Decline(NAME, f"the function registers a tensor hook (`{cst.Module([]).code_for_node(hooked[0])}`); "
                             "torch.where sends the untaken side a zero gradient, which would fire a hook the original "
                             "branch never reaches")
    try:
        if isinstance(node, cst.If):
            pairs, span, detail, preds = _rewrite_if(node, ancestors, env, index.positions)
            if any(ob["kind"] == "gradient-gated" for ob in env.obligations):
                pairs = anomaly_guard(node, pairs, env)
                detail += "; under torch.autograd anomaly detection the if is kept (a gated side's backward runs)"
            if autocast:
                pairs = guard(node, pairs, env)
                detail += "; under autocast (cpu, cuda, xpu, mps) the if is kept: its sides compute in other dtypes there"
        elif autocast:
            return Decline(NAME, "the autocast-guarded form applies to an if statement, not tensor logic")
        elif isinstance(node, cst.SimpleStatementLine):
            if form == "cond":
                return Decline(NAME, "torch.cond does not apply: the site is tensor logic (and/or/not), "
                                     "not an if/else")
            pairs, span, detail, preds = _rewrite_logic(node, env, index.positions)
        else:
            return Decline(NAME, f"the statement on line {line} is a `{type(node).__name__.lower()}`, "
                                 "not an if or a tensor and/or")
    except _Declined as why:
        return Decline(NAME, str(why))
    new = _splice(module, pairs)
    if env.needs_import:
        new = add_import(new, "import torch")
    if any(ob["kind"] == "gradient-gated" for ob in env.obligations):   # a side reads its inputs through _mend_gate
        new = add_helper(new)
    if env.cond_ready and not any(isinstance(s, cst.FunctionDef) and s.name.value == READY for s in new.body):
        new = add_helpers(new, READY_HELPER.format(torch=env.torch))
    obligations = where_equals_ite(env.obligations)
    if loops:   # the proofs read the facts of one iteration: every iteration must show the same ones
        obligations.append(_loop_facts(node, obligations, index.positions[node].start.line))
        detail += "; inside a `for` loop (each iteration predicated alike: Dynamo unrolls it)"
    return RewriteResult(new.code, span, detail, obligations, predicates=preds,
                         form=env.form, cost_parts=env.cost_parts, caveat=env.caveat)


def _loop_facts(node: cst.CSTNode, obligations: list[dict], line: int) -> dict:
    """``loop-facts-agree``: the names the branch and its obligations read, observed at the
    branch's line on every iteration (``trace_facts`` ``watch``), must agree in kind, dtype,
    shape and device, since the proofs read one iteration's facts (helper-60's layer loop)."""
    from verifier.facts import names_in

    exprs = [cst.Module([]).code_for_node(node.test)] if isinstance(node, cst.If) else []
    exprs += [v for o in obligations for k, v in o.items() if k in ("pred", "lhs", "rhs", "expr") and isinstance(v, str)]
    local = _branch_locals(node)
    names = sorted(n for n in names_in(exprs) if n != "torch" and not n.startswith("torch.")
                   and n.split(".")[0] not in local)
    return {"kind": "loop-facts-agree", "line": line, "expr": "(" + ", ".join(names) + ",)" if names else "()",
            "detail": "the facts the proofs read (one iteration's) are every iteration's: the same kind, dtype, "
                      "shape and device of each name at the branch, on every iteration of the example run"}


def _ternary(node: cst.CSTNode) -> tuple[str, cst.IfExp] | None:
    """``NAME = A if P else B`` or ``return A if P else B`` (the conditional expression the
    whole value, one statement on its line): (the statement's head, the IfExp)."""
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1):
        return None
    small = node.body[0]
    value = getattr(small, "value", None)
    if not isinstance(value, cst.IfExp) or value.lpar:
        return None
    if isinstance(small, cst.Return):
        return "return", value
    if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
        return f"{small.targets[0].target.value} =", value
    return None


def _ternary_as_if(module: cst.Module, node: cst.CSTNode, positions, line: int):
    """A ternary on a tensor predicate, ``y = a if p.any() else b``, planned as the ``if``
    it means (``if p.any(): y = a`` / ``else: y = b``): (that module, the ternary's lines in
    the input) for :func:`_rewrite_at`; None when ``node`` is not such a statement. The ``if`` is planned
    and emitted like any other (one ``torch.where`` per name on one line, so no line
    below moves; ``torch.cond`` keeps the ``if`` form for eager runs)."""
    found = _ternary(node)
    if found is None or _is_static(found[1].test, _Env(module, [])):
        return None
    head, exp = found
    if m.findall(node, m.Comment()):
        return Decline(NAME, "the conditional expression's line holds a comment the rewrite would move")
    pos = positions[node]
    lines = module.code.splitlines(keepends=True)
    first = lines[pos.start.line - 1]
    indent = first[:len(first) - len(first.lstrip())]
    code = module.code_for_node
    text = (f"{indent}if {code(exp.test).strip()}:\n{indent}    {head} {code(exp.body).strip()}\n"
            f"{indent}else:\n{indent}    {head} {code(exp.orelse).strip()}\n")
    new = "".join(lines[:pos.start.line - 1]) + text + "".join(lines[pos.end.line:])
    try:
        return cst.parse_module(new), (pos.start.line, pos.end.line)
    except cst.ParserSyntaxError:
        return Decline(NAME, "the conditional expression does not read as an if/else statement")


def _first_evaluated(expr: cst.BaseExpression, target: cst.NamedExpr) -> bool:
    """Whether ``target`` is the first part of ``expr`` Python evaluates: reached through
    left operands, attribute and subscript values, and the first argument of a call whose
    function is a dotted name (whose lookup comes first and reads nothing else)."""
    while expr is not target:
        if isinstance(expr, (cst.Comparison, cst.BinaryOperation, cst.BooleanOperation)):
            expr = expr.left
        elif isinstance(expr, cst.UnaryOperation):
            expr = expr.expression
        elif isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        elif isinstance(expr, cst.Call):
            if m.findall(expr.func, m.NamedExpr()):
                expr = expr.func
            elif (_pure_lookup(expr.func, target) and expr.args and expr.args[0].star == ""
                  and expr.args[0].keyword is None):
                expr = expr.args[0].value
            else:
                return False
        else:
            return False
    return True


def _pure_lookup(func: cst.BaseExpression, target: cst.NamedExpr) -> bool:
    """A function expression whose lookup has no effect and does not read the bound name: a
    plain name, or an attribute of the torch module (``h.ne((h := ...))`` looks ``h.ne`` up on
    the old ``h``; ``self.f`` may be a property: an adversarial review's cases)."""
    name = target.target.value if isinstance(target.target, cst.Name) else None
    if name is None or m.findall(func, m.Name(name)):
        return False
    if isinstance(func, cst.Name):
        return True
    root = func
    while isinstance(root, cst.Attribute):
        root = root.value
    return isinstance(root, cst.Name) and root.value == "torch"


def _walrus_hoisted(module: cst.Module, node: cst.CSTNode, ancestors: list[cst.CSTNode], positions):
    """``if (m := E) > c:`` planned as ``m = E`` on the line before and ``if m > c:``: (that
    module, the if's line in it, the if's lines in the input, the binding's text); None when
    ``node`` is not an ``if`` whose test binds one name with ``:=`` as the first thing it
    evaluates. Python binds ``m`` then, before any other part of the test runs, so the two
    are the same program; an ``elif`` test (evaluated only when the earlier ones fail) and
    a binding evaluated after another part of the test are left to the rule's decline."""
    if not isinstance(node, cst.If) or (ancestors and isinstance(ancestors[-1], cst.If)
                                        and ancestors[-1].orelse is node):
        return None
    walruses = m.findall(node.test, m.NamedExpr())
    if len(walruses) != 1 or not isinstance(walruses[0].target, cst.Name) \
            or m.findall(walruses[0].value, m.NamedExpr() | m.Lambda()) \
            or not _first_evaluated(node.test, walruses[0]):
        return None
    walrus = walruses[0]
    name = walrus.target.value
    binding = f"{name} = {module.code_for_node(walrus.value).strip()}"
    try:
        assign = cst.parse_statement(f"{binding}\n").with_changes(leading_lines=node.leading_lines)
    except cst.ParserSyntaxError:
        return None
    new_if = node.with_changes(test=node.test.deep_replace(walrus, cst.Name(name)), leading_lines=())
    new = _splice(module, [(node, [assign, new_if])])
    start = positions[node].start.line
    return new, start + binding.count("\n") + 1, (start, positions[node].end.line), binding


def _branch_locals(node: cst.CSTNode) -> set[str]:
    """Names each arm of the ``if`` assigns before reading them (``clamp_value`` in the fp16
    clamp): their value where the ``if`` starts is never read, so it may differ by iteration."""
    if not isinstance(node, cst.If):
        return set()
    out: set[str] = set()
    arms = [node.body] + ([node.orelse.body] if node.orelse is not None and not isinstance(node.orelse, cst.If) else [])
    for block in arms:
        read: set[str] = {n.value for n in m.findall(node.test, m.Name())}
        for stmt in getattr(block, "body", []):
            smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
            for small in smalls:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                        isinstance(small.targets[0].target, cst.Name):
                    uses = {n.value for n in m.findall(small.value, m.Name())}
                    name = small.targets[0].target.value
                    if name not in read and name not in uses:
                        out.add(name)
                    read |= uses
                else:
                    read |= {n.value for n in m.findall(small, m.Name())}
    return out


def _item_roots(loops: list, items: set) -> list[str] | None:
    """The guard roots (``getattr(self, "experts", None)``) of the loops binding ``items`` when
    each is ``for <item> in self.<chain>``, ``for <i>, <item> in enumerate(self.<chain>)``, or
    over a ModuleDict's ``self.<chain>.values()`` / ``.items()``, else None: torch.cond's guard
    then checks every module the loop can call (the helper walks a ModuleDict's modules)."""
    roots = []
    for lp in loops:
        target, it = lp.target, lp.iter
        while True:   # peel enumerate(...), a ModuleDict's .items() / .values(), in any nesting (helper-97 f3)
            pair = m.matches(target, m.Tuple(elements=[m.Element(), m.Element()]))
            if pair and m.matches(it, m.Call(func=m.Name("enumerate"), args=[m.Arg(keyword=None)])):
                target, it = target.elements[1].value, it.args[0].value
            elif pair and m.matches(it, m.Call(func=m.Attribute(attr=m.Name("items")), args=[])):
                target, it = target.elements[1].value, it.func.value
            elif m.matches(it, m.Call(func=m.Attribute(attr=m.Name("values")), args=[])):
                it = it.func.value
            else:
                break
        bound = {n.value for n in m.findall(lp.target, m.Name())}
        if not bound & items:
            continue
        chain = _self_chain(it)
        if not (isinstance(target, cst.Name) and target.value in items and chain):
            return None
        rebound = m.findall(lp.body, m.AssignTarget(target=m.Name(target.value)) | m.AugAssign(
            target=m.Name(target.value)) | m.For(target=m.Name(target.value)) | m.NamedExpr(target=m.Name(target.value)))
        if rebound:   # the item is then not (only) one of the iterable's modules, which the guard checks
            return None
        roots.append(_safe_read(chain))
    return roots


def _module_aliases(node: cst.CSTNode, env: _Env, loop_names: set[str]) -> dict[str, str]:
    """Local names called in ``node`` (``expert(x)``) whose one binding in the function is
    ``name = self.<chain>[...]`` (``expert = self.experts[i]``), each with the guard root of
    ``self.<chain>``: the name holds one of that container's modules whatever the index, so
    torch.cond's guard reaches it through the container, as it reaches a loop's item. A
    function that also assigns ``self.<chain>``'s first attribute is left out (the container
    read at the guard may then not be the one indexed)."""
    out: dict[str, str] = {}
    for call in m.findall(node, m.Call(func=m.Name())):
        name = call.func.value
        if name in loop_names or name in out:
            continue
        values = env.bindings(name)
        value = _strip(values[0]) if values and len(values) == 1 else None
        chain = _self_chain(value.value) if isinstance(value, cst.Subscript) else None
        if chain and not m.findall(env.function, m.AssignTarget(target=m.Attribute(
                value=m.Name("self"), attr=m.Name(chain[0])))):
            out[name] = _safe_read(chain)
    return out


def _root(expr: cst.BaseExpression) -> str | None:
    """The name an attribute/subscript/call chain starts from (``expert`` of ``expert.fc(x)``)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.value if not isinstance(expr, cst.Call) else expr.func
    return expr.value if isinstance(expr, cst.Name) else None


def _same_function(ancestors: list[cst.CSTNode]) -> list[cst.CSTNode]:
    out = []
    for anc in reversed(ancestors):
        if isinstance(anc, (cst.FunctionDef, cst.ClassDef)):
            break
        out.append(anc)
    return out


def first_site(source: str) -> int | None:
    """The line the examples rewrite: the first ``if``/``elif`` whose test is not a pure
    Python-level check, or an earlier statement using tensor ``and``/``or``/``not``; else
    the first ternary assignment or return of that kind."""
    module = cst.parse_module(source)
    env = _Env(module, [])
    ternaries = []
    for ln, node, _ in sorted(_index(module).found, key=lambda e: e[0]):
        if isinstance(node, cst.If) and not _is_static(node.test, env):
            return ln
        if (ternary := _ternary(node)) is not None and not _is_static(ternary[1].test, env):
            ternaries.append(ln)
            continue
        if isinstance(node, cst.SimpleStatementLine) and m.findall(node, m.BooleanOperation() | m.UnaryOperation(
                operator=m.Not()) | m.Comparison(comparisons=[m.DoNotCare(), m.DoNotCare(), m.ZeroOrMore()])):
            return ln
    return ternaries[0] if ternaries else None


