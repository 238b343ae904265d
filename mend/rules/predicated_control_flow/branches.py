"""Branch analysis: the arms of an if/elif/else chain, what each side assigns or returns,
names defined before the site, an emission order, guards, and the comments the rewrite
keeps."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.rules._common import inplace_call
from mend.rules.predicated_control_flow.env import NAME, _bound_names, _code, _Declined, _read_names


def branches(node: cst.If) -> list[tuple[cst.BaseExpression | None, cst.BaseSuite]]:
    """``[(test, body), ..., (None, else_body)]`` for an if/elif/else chain."""
    out = []
    cur: cst.If | cst.Else | None = node
    while isinstance(cur, cst.If):
        out.append((cur.test, cur.body))
        cur = cur.orelse
    if isinstance(cur, cst.Else):
        out.append((None, cur.body))
    return out



def _return_follows(node: cst.If, parent: cst.CSTNode | None) -> list[cst.SimpleStatementLine]:
    """``if p: return a`` followed in the same block by ``return b``, or by plain assignments
    ``t = ...`` and then ``return b`` (an early exit, ``if mask.all(): return x.mean(1)``, with
    the general path after it: a hidden-case probe): those statements, the fall-through arm;
    else []."""
    body = getattr(parent, "body", None)
    if not isinstance(body, (list, tuple)) or node not in body:
        return []
    tail = []
    for nxt in list(body)[list(body).index(node) + 1:]:
        if not (isinstance(nxt, cst.SimpleStatementLine) and len(nxt.body) == 1):
            return []
        small = nxt.body[0]
        tail.append(nxt)
        if isinstance(small, cst.Return):
            return tail if small.value is not None else []
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)):
            return []
    return []


@dataclass
class _Arm:
    pred: cst.BaseExpression | None  # None: the else arm
    assigns: list[tuple[str, cst.BaseExpression]]
    ret: cst.BaseExpression | None
    returns: bool


def _arm(pred, smalls: list[cst.BaseSmallStatement]) -> _Arm:
    """The selection part of one side (hoisted setup and paired calls already taken out
    by :func:`_plan_setup`)."""
    arm = _Arm(pred, [], None, False)
    for small in smalls:
        if arm.returns:
            raise _Declined("a branch has statements after its `return`")
        if isinstance(small, cst.Pass):
            continue
        if isinstance(small, cst.Return):
            if small.value is None or m.matches(small.value, m.Name("None")):
                raise _Declined("a branch returns None; torch.where cannot select None")
            arm.ret, arm.returns = small.value, True
            continue
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            if small.value is None:
                raise _Declined(f"a branch declares `{_code(small)}` without a value")
            for t in targets:
                if isinstance(t, (cst.Attribute, cst.Subscript)):
                    raise _Declined(f"a branch mutates state (`{_code(t)}`)")
            for name, value in _pairs(small, targets):
                if m.matches(value, m.Name("None")):
                    raise _Declined(f"a branch sets `{name}` to None; the two sides differ in None-ness")
                if isinstance(value, (cst.Tuple, cst.List, cst.Dict, cst.Set)):
                    raise _Declined(f"a branch assigns a container to `{name}`, not a tensor")
                if any(n == name for n, _ in arm.assigns):
                    raise _Declined(f"a branch assigns `{name}` twice")
                arm.assigns.append((name, value))
            continue
        if isinstance(small, cst.AugAssign):  # `h += 1` updates a tensor in place, seen through aliases
            raise _Declined(f"a branch mutates state (`{_code(small.target)} {_code(small.operator)} ...`): an "
                            "augmented assignment updates a tensor in place, which every alias of it sees, keeps its "
                            "dtype and can fail autograd's version check, where `torch.where` makes a new tensor; "
                            f"write `{_code(small.target)} = {_code(small.target)} "
                            f"{_code(small.operator).strip().rstrip('=')} ...` if no alias needs the update")
        if (op := inplace_call(small)) is not None:
            raise _Declined(f"a branch mutates a tensor in place (`{op}`)")
        if isinstance(small, cst.Raise):
            raise _Declined("a branch raises")
        if isinstance(small, cst.Expr):
            raise _Declined(f"a branch runs `{_code(small)[:60]}` for its effect")
        raise _Declined(f"a branch holds a `{type(small).__name__.lower()}` statement")
    return arm


def _pairs(small, targets: list) -> list[tuple[str, cst.BaseExpression]]:
    """``(name, value)`` for each name one assignment binds: ``x = e``, or ``a, b = e1, e2``
    (adaLN's ``scale, shift = 1 + s1, t1``) taken as ``a = e1; b = e2`` -- the same only
    when no value reads a name bound before it in that order (the tuple is built from the
    old bindings), so such a read declines."""
    if len(targets) == 1 and isinstance(targets[0], cst.Name):
        return [(targets[0].value, small.value)]
    target, value = (targets[0], small.value) if len(targets) == 1 else (None, None)
    if not (isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Tuple)
            and len(target.elements) == len(value.elements)
            and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements)
            and all(isinstance(e, cst.Element) for e in value.elements)):
        raise _Declined(f"a branch assigns several names at once (`{_code(small)}`)")
    names = [e.value.value for e in target.elements]
    out: list[tuple[str, cst.BaseExpression]] = []
    for i, (name, el) in enumerate(zip(names, value.elements)):
        early = _read_names(el.value) & set(names[:i])
        if early:
            raise _Declined(f"a branch assigns several names at once (`{_code(small)}`) and `{_code(el.value)}` reads "
                            f"`{sorted(early)[0]}`, bound before it in that order")
        out.append((name, el.value))
    return out


def _defined_before(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> set[str]:
    """Names certainly bound when ``node`` runs: parameters and straight-line assignments
    earlier in each enclosing block (a conservative under-approximation)."""
    names: set[str] = set()
    child = node
    for anc in reversed(ancestors):
        if isinstance(anc, (cst.IndentedBlock, cst.Module)):
            for stmt in anc.body:
                if stmt is child:
                    break
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign):
                            for t in small.targets:
                                names |= _bound_names(t.target)
                        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and (
                                not isinstance(small, cst.AnnAssign) or small.value is not None):
                            names |= _bound_names(small.target)
        elif isinstance(anc, cst.With):
            for item in anc.items:
                if item.asname is not None:
                    names |= _bound_names(item.asname.name)
        elif isinstance(anc, cst.FunctionDef):
            params = anc.params
            for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
                names.add(p.name.value)
            for p in (params.star_arg, params.star_kwarg):
                if isinstance(p, cst.Param):
                    names.add(p.name.value)
            break
        elif isinstance(anc, cst.ClassDef):
            break
        child = anc
    return names


def _order(arms: list[_Arm], names: list[str]) -> list[str]:
    """An emission order for the assigned names that keeps every side's reads right.

    In side S, ``t = f(n)`` reads S's new ``n`` when S assigned ``n`` earlier (emit ``n``
    first) and the old ``n`` when S assigns it later (emit ``t`` first).
    """
    before: dict[str, set[str]] = {n: set() for n in names}  # name -> names that must precede it
    for arm in arms:
        pos = {n: i for i, (n, _) in enumerate(arm.assigns)}
        for i, (t, value) in enumerate(arm.assigns):
            for n in _read_names(value) & pos.keys():
                if n != t:
                    (before[t].add(n) if pos[n] < i else before[n].add(t))
    out: list[str] = []
    while len(out) < len(names):
        ready = [n for n in names if n not in out and before[n] <= set(out)]
        if not ready:
            raise _Declined("the sides assign names in orders that read each other's results")
        out.append(ready[0])
    return out


def _guard_text(preds: list[str], i: int) -> str:
    """The condition under which arm ``i`` of an if/elif/else chain ran."""
    parts = [f"not ({p})" for p in preds[:i]]
    if i < len(preds):
        parts.append(preds[i])
    return " and ".join(parts)


def _line(small: cst.BaseSmallStatement) -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[small])


def _marked(line: cst.SimpleStatementLine, was: str) -> cst.SimpleStatementLine:
    """Put ``# mend: predicated-control-flow (was: <what it was>)`` at the end of ``line``."""
    if len(was) > 60:
        was = was[:57] + "..."
    return line.with_changes(
        trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                   comment=cst.Comment(f"# mend: {NAME} (was: {was})")))


def _comments(node: cst.CSTNode, skip: tuple = ()) -> list[cst.EmptyLine]:
    """Every comment inside ``node`` as a standalone line, so none is lost."""
    out = []
    for c in m.findall(node, m.Comment()):
        if not any(c is s for s in skip):
            out.append(cst.EmptyLine(comment=c.with_changes()))
    return out


# -- setup hoisting (GraphMend "[Where]": memoised initialisation, device moves) ------------

