"""The ``torch.where`` planner: an if/elif/else (or ``if p: return a`` + ``return b``)
becomes one selection per name, and ``x = a and b`` becomes ``torch.logical_and``; hands
the site to the ``torch.cond`` planner when a side must not run speculatively. Also the
``where-equals-ite`` obligations of each selection."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules.predicated_control_flow.branches import (
    _Arm,
    _arm,
    _comments,
    _defined_before,
    _guard_text,
    _line,
    _marked,
    _order,
    _return_follows,
    branches,
)
from mend.rules.predicated_control_flow.cond import _CondNotApplicable, _rewrite_cond, _speculation_hazards
from mend.rules.predicated_control_flow.env import (_code, _Declined, _Env, _is_literal, _occurrences_outside,
                                                    _read_names, _strip)
from mend.rules.predicated_control_flow.gate import gate, gateable, keep_condition
from mend.rules.predicated_control_flow.hoisting import _plan_setup
from mend.rules.predicated_control_flow.scalars import finiteness_obligations, scalar_temps
from mend.rules.predicated_control_flow.screen import _predicate, _screen, _split_static_guard, _tensor_logic


def _rewrite_if(node: cst.If, ancestors: list[cst.CSTNode], env: _Env, positions):
    """The replacement of an if/elif/else statement: (old, new) node pairs to splice."""
    parent = ancestors[-1] if ancestors else None
    elif_site = isinstance(parent, cst.If) and parent.orelse is node
    chain = branches(node)
    guard, first = _split_static_guard(chain[0][0], env)
    if guard is not None and (len(chain) > 1 or elif_site):
        raise _Declined(f"the test mixes a Python-level check (`{_code(guard)}`) with a tensor test on an "
                        "if that has an else")
    chain[0] = (first, chain[0][1])

    pred_codes = [_code(_strip(test)) for test, _ in chain if test is not None]
    setup = _plan_setup(chain, env, pred_codes)
    arms = [_arm(test, smalls) for (test, _), smalls in zip(chain, setup.bodies)]
    span_end = positions[node].end.line
    extra_return = None      # the statements after an `if p: return a` that make its else arm
    if chain[-1][0] is not None:  # no else
        tail = _return_follows(node, parent) if arms[-1].returns and len(arms) == 1 else []
        if tail:
            extra_return = tail
            arms.append(_arm(None, [t.body[0] for t in tail]))
            span_end = positions[tail[-1]].end.line
        else:
            arms.append(_Arm(None, [], None, False))
    if len({a.returns for a in arms}) > 1:
        raise _Declined("a branch leaves early (`return`) while the other falls through")
    returns = arms[0].returns
    # `return h, w` on every side: a tuple of selections, element by element (helper-53's k9j)
    widths = {len(_ret_parts(a.ret)) if isinstance(a.ret, cst.Tuple) else None for a in arms} if returns else {None}
    if len(widths) > 1:
        raise _Declined("the sides return tuples of different lengths, or a tuple on one side only")
    width = widths.pop()

    preds = [_predicate(a.pred, env) for a in arms if a.pred is not None]
    finiteness_obligations([a.pred for a in arms if a.pred is not None], env)  # fp16 under Inductor (scalars.py)
    for arm in arms:
        walrus = next(iter(m.findall(arm.pred, m.NamedExpr())), None) if arm.pred is not None else None
        if walrus is not None:   # a hidden-case probe: the reason blamed "a side"
            raise _Declined(f"the test binds `{_code(walrus.target)}` with `:=` "
                            f"(`{_code(walrus).strip()}`) after another part of the test runs, or in an `elif`: "
                            "bound before the `if`, it would be evaluated where the original may not reach it "
                            "(by hand, where that is safe: bind it on the line before the `if`)")
    _screen(arms[0].pred, env)
    for i in range(1, len(preds)):  # elif tests used to run only when the earlier ones failed
        _screen(arms[i].pred, env, side=" and ".join(f"not ({p})" for p in pred_codes[:i]))

    # Which names are selected, and which are setup temporaries: assigned on one side
    # and named nowhere else in the function, so running them unconditionally is unseen.
    inside: dict[str, list[cst.CSTNode]] = {}
    bodies = [b for _, b in chain] + ([tuple(extra_return)] if extra_return else [])
    for i, arm in enumerate(arms):
        for n, _ in arm.assigns:
            inside.setdefault(n, []).append(bodies[i])
    order_seen = list(inside)
    scope = env.function or env.module
    temps = {n for n, bodies in inside.items()
             if len(bodies) == 1 and not _occurrences_outside(scope, bodies[0], n)}
    temps |= scalar_temps(chain, arms, inside, temps, node, ancestors, env)  # dead after the if (scalars.py)
    if returns and (set(inside) - temps):
        name = sorted(set(inside) - temps)[0]
        # helper-100 m07: the old text blamed the returning branch where the fall-through assigned
        raise _Declined(f"with an early return, a path (the returning branch, or the code after the `if` that "
                        f"becomes the other side) assigns `{name}`, which is used elsewhere: torch.where would "
                        "run that assignment on both paths")
    selected = [n for n in order_seen if n not in temps]
    defined = _defined_before(node, ancestors)
    for n in selected:
        if any(n not in dict(a.assigns) for a in arms) and n not in defined:
            raise _Declined(f"`{n}` is assigned on one side only and has no prior definition")
    for n in selected:
        values = [dict(a.assigns).get(n, cst.Name(n)) for a in arms]
        if all(_is_literal(v) for v in values):
            raise _Declined(f"both sides give `{n}` a Python constant; torch.where would make it a tensor")

    # Screen every side: it now runs whether or not its test holds.
    side_obs: list[list[dict]] = []   # what each side's screen obliged (gradient gates read it)
    for i, arm in enumerate(arms):
        side = _guard_text(pred_codes, i)
        before = len(env.obligations)
        for _, value in arm.assigns:
            _screen(value, env, side=side)
        for part in _ret_parts(arm.ret) if arm.ret is not None else []:
            _screen(part, env, side=side)
        if setup.paired:
            _screen(setup.paired[i].value, env, side=side)
        if extra_return and i == len(arms) - 1:   # the fall-through after an early return: required
            for ob in env.obligations[before:]:
                if ob["kind"] == "untaken-side-cannot-raise":
                    ob["kind"] = "fall-through-cannot-raise"
        side_obs.append(env.obligations[before:])

    # torch.where runs both sides. When a side must not run speculatively (a submodule
    # call, or an op whose gradient is non-finite off the domain the predicate guards),
    # emit torch.cond instead, which runs only the taken side; where cond is not
    # admissible, the where candidate below stays (and verification judges it).
    hazards = _speculation_hazards(env.obligations, preds)
    two_arms = len(arms) == 2 and not elif_site and guard is None and not setup.hoisted and not setup.paired
    if two_arms:  # what the cost model counts (mend.cost): the predicate and each side's values
        env.cost_parts = {"pred": _code(preds[0]), "sides": [
            [_code(r) for r in _ret_parts(a.ret)] if returns else [_code(dict(a.assigns).get(n, cst.Name(n))) for n in
                                            _order(arms, order_seen) if n in selected] for a in arms]}
    early_return = extra_return is not None   # the false side is the code after `if p: return a`
    cond_temps = _cond_temps(arms, temps, order_seen, env, pred_codes, preds, early_return) if temps else ([], [], {})
    no_cond = _why_not_cond(arms, elif_site, guard, setup, cond_temps) or (
        "the sides return tuples" if width is not None else None)
    if env.want == "cond":  # asked for torch.cond (mend fix's alternatives): it applies, or the site declines
        if no_cond:
            raise _Declined(f"torch.cond does not apply: {no_cond}")
        try:
            return _rewrite_cond(node, arms, selected, order_seen, returns, preds, pred_codes, hazards, env,
                                 positions, span_end, cond_temps, tail=early_return)
        except _CondNotApplicable as why:
            raise _Declined(f"torch.cond does not apply: {why}") from None
    if hazards and not no_cond and env.want is None:
        try:
            return _rewrite_cond(node, arms, selected, order_seen, returns, preds, pred_codes, hazards, env,
                                 positions, span_end, cond_temps, tail=early_return)
        except _CondNotApplicable:
            pass  # today's torch.where candidate; verification judges it
    env.form = "where"
    # a side whose gradient can be non-finite off its domain reads its inputs through a gate
    # (gate.py), so that the selection stays usable in training; its finite-gradient
    # obligations become one gradient-gated obligation per gated value
    gated = [] if setup.hoisted or setup.paired else [
        i for i, arm in enumerate(arms) if gateable(side_obs[i], [n for n, _ in arm.assigns], temps, env)]

    def select(values: list[cst.BaseExpression], target: str, pred_exprs) -> cst.Call:
        for v in values[1:]:   # shapes, dtypes and IEEE values: the gate is the identity forward
            for kind in ("same-shape", "same-dtype"):
                env.oblige(kind, target=target, lhs=_code(values[0]), rhs=_code(v))
        shown = list(values)
        for i in gated:
            if i < len(values) and values[i] is not None and not m.matches(values[i], m.Name(target)):
                shown[i] = gate(values[i], keeps[i], env)
                env.oblige("gradient-gated", target=target, expr=_code(shown[i]), plain=_code(values[i]),
                           keep=_code(keeps[i]), guard=_guard_text(pred_codes, i))
        out = shown[-1]
        for p, v in reversed(list(zip(pred_exprs, shown))):
            out = env.torch_call("where", p, v, out)
        return out

    n_select = ((width or 1) if returns else len(selected)) + (1 if setup.paired else 0)
    pred_exprs = preds
    stmts: list[cst.SimpleStatementLine] = []
    if n_select > 1 or gated:  # evaluate the predicates once, before any name is rebound
        pred_exprs = []
        for p in preds:
            name = env.fresh()
            stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(name))], p)))
            pred_exprs.append(cst.Name(name))
    keeps = {i: keep_condition(pred_exprs, i, env) for i in gated}
    if gated:
        replaced = {id(ob) for i in gated for ob in side_obs[i] if ob["kind"] == "finite-gradient"}
        env.obligations = [ob for ob in env.obligations if id(ob) not in replaced]
    for n in _order(arms, order_seen):
        if n in temps:
            value = next(dict(a.assigns)[n] for a in arms if n in dict(a.assigns))
            stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(n))], value)))
        else:
            values = [dict(a.assigns).get(n, cst.Name(n)) for a in arms]
            stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(n))], select(values, n, pred_exprs))))
    if returns and width is not None:
        stmts.append(_line(cst.Return(cst.Tuple([cst.Element(select([_ret_parts(a.ret)[k] for a in arms],
                                                                      f"return[{k}]", pred_exprs))
                                                 for k in range(width)]))))
    elif returns:
        stmts.append(_line(cst.Return(select([a.ret for a in arms], "return", pred_exprs))))
    if setup.paired:  # one call, its value selected
        p0 = setup.paired[0]
        target = f"{p0.func}({p0.name!r})"
        values = [p.value for p in setup.paired]
        value = values[0] if len({_code(v) for v in values}) == 1 else select(values, target, pred_exprs)
        if len(values) > 1 and value is not values[0]:
            env.oblige("paired-call-value-not-aliased", call=target, values=[_code(v) for v in values])
        args = list(p0.call.args)
        args[p0.value_arg] = args[p0.value_arg].with_changes(value=value)
        stmts.append(_line(cst.Expr(p0.call.with_changes(args=args))))
    if not stmts:
        raise _Declined("no side assigns or returns anything; there is nothing to select")

    was = ("elif " if elif_site else "if ") + pred_codes[0]
    # the marker goes on the first line that selects (setup temporaries come before it)
    at = next(i for i, st in enumerate(stmts)
              if not (isinstance(st.body[0], cst.Assign) and st.body[0].targets[0].target.value in temps))
    keep = [ln.comment for ln in node.leading_lines if ln.comment]  # stay where they are
    if guard is not None and isinstance(node.body, cst.IndentedBlock):
        keep += [node.body.header.comment, *(ln.comment for ln in node.body.footer if ln.comment)]
    keep += [c for h in setup.hoisted for c in m.findall(h.node, m.Comment())]  # move with their statement
    comments = _comments(node, skip=tuple(c for c in keep if c is not None))
    for stmt in extra_return or ():
        comments += _comments(stmt)
    kind = "elif chain" if len(preds) > 1 else "if"
    chosen = ["return"] if returns else list(selected)
    if setup.paired:
        chosen.append(f"{setup.paired[0].func}({setup.paired[0].name!r}, ...)")
    detail = f"{kind} -> torch.where ({', '.join(chosen) or 'setup only'})"
    runs = [h.get("call") for h in hazards if h.get("kind") == "untaken-side-runs"] if hazards else []
    if runs and no_cond:   # helper-88 N1: the differential test's gradient decline read as an unrelated failure
        env.caveat = (f"every side runs, `{runs[0]}` included (torch.cond does not apply: {no_cond}), so the "
                      "parameters of a submodule called on one side only get a zero gradient where the if leaves None")
        detail += f"; {env.caveat}"
    if setup.hoisted:
        detail += "; hoisted: " + ", ".join(
            f"memoised {h.slot}" if h.kind == "memo" else f"device move of {h.slot}" for h in setup.hoisted)
    span = (positions[node].start.line, span_end)

    stmts[at] = _marked(stmts[at], was)
    # the setup runs first, as it did on its side; the selection's comments stay with it
    stmts[0] = stmts[0].with_changes(leading_lines=[*comments, *stmts[0].leading_lines])
    out = [h.stmt for h in setup.hoisted] + stmts
    if guard is not None:  # if A and B: ... -> if A: <where on B>
        body = node.body.with_changes(body=out) if isinstance(node.body, cst.IndentedBlock) \
            else cst.IndentedBlock(body=out)
        return [(node, [node.with_changes(test=guard, body=body)])], span, detail, pred_codes
    if elif_site:  # ... elif B: -> ... else: <where on B>
        new_else = cst.Else(body=cst.IndentedBlock(body=out), leading_lines=node.leading_lines)
        return [(parent, [parent.with_changes(orelse=new_else)])], span, detail, pred_codes
    out[0] = out[0].with_changes(leading_lines=[*node.leading_lines, *out[0].leading_lines])
    pairs = [(node, out)]
    pairs += [(stmt, []) for stmt in extra_return or ()]
    return pairs, span, detail, pred_codes




def _ret_parts(ret: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values a ``return`` gives: a tuple's elements (``return h, w``), else the value itself.
    A starred element is not split (the screen declines it)."""
    if isinstance(ret, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in ret.elements):
        return [e.value for e in ret.elements]
    return [ret]


def _cond_temps(arms, temps: set[str], order_seen: list[str], env: _Env, pred_codes: list[str],
                preds, tail: bool = False) -> tuple[list[tuple[str, cst.BaseExpression]], list[dict], dict] | str:
    """The setup temporaries a torch.cond form binds before the cond (in order, each with its
    value), the obligations of running each on every path, and those bound inside their side's
    branch ({arm index: [(name, value)]}), or why it cannot: a temporary read by a branch
    lambda through its closure runs whether or not its side is taken, as in the torch.where
    form, so it must not read a name its side assigns before it, and its screen must raise no
    speculation hazard (a submodule call, a gradient non-finite off the tested domain), which
    torch.cond waives only for what runs inside a branch. A temporary with such a hazard, and
    every later one of its side, is bound inside the branch instead (``(lambda h: b)(v)``: the
    value first, then the side's value, as the statements ran), so it runs only when its side
    is taken (the rsqrt of an adaptive layer norm's fall-through, helper-92's m02). ``tail``: the
    false side is the code after an early ``return``; every temporary of it is bound inside its
    branch (helper-94's m03: a `torch.linalg.inv` there, bound before the cond, raised on the
    path where the original returned early)."""
    out, obligations, inner = [], [], {}
    for n in _order(arms, order_seen):
        if n not in temps:
            continue
        if n in env.aliases or n in ("torch", "math", "F"):
            # a local that shadows a module name hides its reads from the gradient screen (helper-80)
            return f"the setup temporary `{n}` shadows a module name"
        i, arm = next((i, a) for i, a in enumerate(arms) if n in dict(a.assigns))
        names = [t for t, _ in arm.assigns]
        value = dict(arm.assigns)[n]
        early = sorted(_read_names(value) & set(names[:names.index(n)]))
        if i in inner or (tail and i == len(arms) - 1):   # in the branch, reading the earlier ones
            inner.setdefault(i, [])
            if set(early) - temps:
                return f"the setup temporary `{n}` reads `{sorted(set(early) - temps)[0]}`, which its side assigns"
            inner[i].append((n, value))
            continue
        if early:
            return f"the setup temporary `{n}` reads `{early[0]}`, which its side assigns before it"
        saved, env.obligations = env.obligations, []   # its own screen (oblige() skips what is already there)
        try:
            _screen(value, env, side=_guard_text(pred_codes, i))
        finally:
            new, env.obligations = env.obligations, saved
        if _speculation_hazards(new, preds):   # runs only where its side is taken: cond-taken-side-only waives it
            inner[i] = [(n, value)]
            continue
        out.append((n, value))
        obligations += new
    return out, obligations, inner


def _why_not_cond(arms, elif_site: bool, guard, setup, temps) -> str | None:
    """Why the branch cannot become ``torch.cond`` (the planner takes one if/else, an if whose
    untouched names are its else, or ``if p: return a`` and the statements after it), else None."""
    if elif_site or len(arms) != 2:
        return "the branch is an elif chain (torch.cond takes one if/else)"
    if guard is not None:
        return "the test mixes a Python-level check with the tensor test"
    if setup.hoisted:
        return "the branch's setup is hoisted above the selection"
    if setup.paired:
        return "the sides end with a paired call (its value is selected, not returned by a branch)"
    if isinstance(temps, str):
        return temps
    return None


def _rewrite_logic(line: cst.SimpleStatementLine, env: _Env, positions):
    """``x = a and b`` -> ``x = torch.logical_and(a, b)`` (also ``or``, ``not``, chains)."""
    if len(line.body) != 1:
        raise _Declined("several statements share the line")
    small = line.body[0]
    if not isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return)) or small.value is None:
        raise _Declined(f"`{_code(small)[:60]}` is not an assignment or return of a tensor expression")
    _screen(small.value, env)
    for bop in m.findall(small.value, m.BooleanOperation()):  # short-circuited operands now always run
        left = _code(bop.left)
        guard = left if isinstance(bop.operator, cst.And) else f"not ({left})"
        _screen(bop.right, env, side=guard)
    value, changed = _tensor_logic(small.value, env)
    if not changed:
        raise _Declined("the tensor's truth value is taken in a form the rule does not rewrite")
    keep = tuple(ln.comment for ln in line.leading_lines if ln.comment)
    new = _marked(line.with_changes(body=[small.with_changes(value=_strip(value))]), _code(_strip(small.value)))
    new = new.with_changes(leading_lines=[*line.leading_lines, *_comments(line, skip=keep)])
    pos = positions[line]
    return [(line, [new])], (pos.start.line, pos.end.line), "tensor and/or/not -> torch.logical_*", [
        _code(small.value)]


def where_equals_ite(obligations: list[dict]) -> list[dict]:
    """``obligations`` followed by one ``where-equals-ite`` per ``same-dtype`` obligation: the
    selection equals the original branch in IEEE arithmetic, for the first predicate
    (``single-element-predicate``); none without a predicate, no duplicates. (Until issue 9
    the verifier added these itself, in ``verifier.obligations.expand``.)"""
    out = list(obligations)
    preds = [o["pred"] for o in obligations if o["kind"] == "single-element-predicate"]
    if preds:
        for o in obligations:
            if o["kind"] == "same-dtype":
                item = {"kind": "where-equals-ite", "target": o["target"], "lhs": o["lhs"], "rhs": o["rhs"],
                        "pred": preds[0]}
                if item not in out:
                    out.append(item)
    return out
