"""Setup hoisting (GraphMend "[Where]"): a memoised initialisation and an idempotent
device move run first, on every path, under the paper's five conditions; a trailing
``register_buffer`` on every side becomes one call whose value is selected."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from mend.rules.predicated_control_flow.branches import _guard_text, _line
from mend.rules.predicated_control_flow.env import (
    _bound_names,
    _code,
    _Declined,
    _Env,
    _is_atom,
    _is_literal,
    _occurrences_outside,
    _read_names,
    _walk,
)
from mend.rules.predicated_control_flow.screen import _screen


def is_device_move(stmt) -> bool:
    """``self.a = self.a.to(device)``: idempotent; may be hoisted out of a branch."""
    return bool(m.matches(stmt, m.Assign(
        targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))],
        value=m.Call(func=m.Attribute(attr=m.Name("to"))))) and
        stmt.targets[0].target.deep_equals(stmt.value.func.value))


def memo_slot(stmt) -> tuple[str, str] | None:
    """``(obj, key)`` for ``if not hasattr(obj, "key"): ...``, a memoised initialisation."""
    if not m.matches(stmt, m.If(test=m.UnaryOperation(operator=m.Not(), expression=m.Call(
            func=m.Name("hasattr"), args=[m.Arg(value=m.Name(), keyword=None),
                                          m.Arg(value=m.SimpleString(), keyword=None)])))):
        return None
    obj, key = stmt.test.expression.args
    text = key.value.evaluated_value
    if not isinstance(text, str) or not text.isidentifier():
        return None
    return obj.value.value, text


# on the same literal name and the same other arguments, one call whose value is chosen by
# torch.where replaces them. method -> (name index, value index, value keyword)
_PAIRED_SETTERS = {"register_buffer": (0, 1, "tensor")}


@dataclass
class _Hoisted:
    """A setup statement moved above the selection (it now runs on every path)."""

    stmt: cst.BaseStatement  # what is emitted
    node: cst.CSTNode  # the original node
    arm: int  # the side it came from
    pos: int  # how many of that side's small statements came before it
    slot: str  # `self.k`
    kind: str  # "memo" | "device-move"
    writes: set[str]  # `self.k` and local names it binds
    reads: set[str]  # names and `obj.attr` it reads
    also: dict[int, int] = field(default_factory=dict)  # other sides with the same device move: side -> pos


@dataclass
class _PairedCall:
    call: cst.Call
    func: str  # `self.register_buffer`
    name: str  # the literal slot name
    value: cst.BaseExpression
    value_arg: int  # index of the value in call.args


@dataclass
class _Setup:
    bodies: list[list[cst.BaseSmallStatement]]  # what each side selects
    hoisted: list[_Hoisted]
    paired: list[_PairedCall]  # one per side, or empty


def _attrs(node: cst.CSTNode) -> set[str]:
    """``obj.attr`` for every attribute of a plain name in ``node`` (read or written)."""
    return {f"{a.value.value}.{a.attr.value}" for a in m.findall(node, m.Attribute(value=m.Name()))}


def _reads(node: cst.CSTNode) -> set[str]:
    return _read_names(node) | _attrs(node)


def _bound_by(small: cst.BaseSmallStatement) -> set[str]:
    if isinstance(small, cst.Assign):
        return {n for t in small.targets for n in _bound_names(t.target)}
    if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
        return _bound_names(small.target)
    return set()


def _screen_hoisted(expr: cst.BaseExpression, env: _Env, slot: str, guard: str) -> None:
    """A memoised initialiser must be pure and must not raise: visible raising forms
    (indexing, division by a non-constant) decline; opaque ``self.<attr>(...)`` calls
    become obligations."""
    for node in _walk(expr):
        if isinstance(node, cst.Subscript):
            raise _Declined(f"the memoised initialisation of `{slot}` indexes `{_code(node)}`, which may raise; "
                            "it cannot be hoisted")
        if isinstance(node, cst.BinaryOperation) and isinstance(
                node.operator, (cst.Divide, cst.FloorDivide, cst.Modulo)) and not (
                _is_literal(node.right) and not m.matches(node.right, m.Integer("0") | m.Float("0.0"))):
            raise _Declined(f"the memoised initialisation of `{slot}` computes `{_code(node)}`, which may raise; "
                            "it cannot be hoisted")
    env.hoisting = (slot, guard)
    try:
        _screen(expr, env)
    finally:
        env.hoisting = None


def _memo(stmt: cst.If, env: _Env, scope: cst.CSTNode, guard: str, arm: int, pos: int) -> _Hoisted:
    """GraphMend's five conditions for hoisting ``if not hasattr(obj, "k"): obj.k = init(...)``:
    no ``else``; ``obj.k`` definitely assigned by the body; the rest of the body neutral
    (assignments to locals used nowhere else); ``obj.k`` not read elsewhere (checked by
    :func:`_plan_setup`); the initialiser pure and unable to raise (screened here, the
    opaque calls left as obligations)."""
    obj, key = memo_slot(stmt)
    slot = f"{obj}.{key}"
    what = f'the memoised initialisation `if not hasattr({obj}, "{key}")`'
    if stmt.orelse is not None:
        raise _Declined(f"{what} has an `else`; it cannot be hoisted")
    if isinstance(stmt.body, cst.SimpleStatementSuite):
        smalls = list(stmt.body.body)
    else:
        smalls = []
        for line in stmt.body.body:
            if not isinstance(line, cst.SimpleStatementLine):
                raise _Declined(f"{what} holds a nested `{type(line).__name__.lower()}`, so `{slot}` is not "
                                "definitely assigned; it cannot be hoisted")
            smalls.extend(line.body)
    assigned, writes = False, {slot}
    for small in smalls:
        if not isinstance(small, cst.Assign):
            raise _Declined(f"{what} runs `{_code(small)[:60]}`, which is not a neutral assignment; "
                            "it cannot be hoisted")
        for target in small.targets:
            t = target.target
            elements = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
            for el in elements:
                if m.matches(el, m.Attribute(value=m.Name(obj), attr=m.Name(key))):
                    assigned = True
                elif isinstance(el, cst.Name):
                    if _occurrences_outside(scope, stmt, el.value):
                        raise _Declined(f"{what} also assigns `{el.value}`, which is used elsewhere; "
                                        "it cannot be hoisted")
                    writes.add(el.value)
                else:
                    raise _Declined(f"{what} also writes `{_code(el)}`; it cannot be hoisted")
        _screen_hoisted(small.value, env, slot, guard)
    if not assigned:
        raise _Declined(f"{what} does not definitely assign `{slot}`; it cannot be hoisted")
    env.oblige("hoisted-setup-cannot-raise", stmt=_code(stmt), slot=slot, guard=guard)
    return _Hoisted(stmt, stmt, arm, pos, slot, "memo", writes, _reads(stmt) - writes)


def _device_move(small: cst.Assign, line: cst.SimpleStatementLine, env: _Env, guard: str, arm: int,
                 pos: int) -> _Hoisted:
    """``self.a = self.a.to(device)``: idempotent, so running it on every path changes at
    most where ``self.a`` lives, which the taken side would have done anyway."""
    slot = _code(small.targets[0].target)
    for arg in small.value.args:
        if not (_is_atom(arg.value) or m.matches(arg.value, m.Name("None"))):
            raise _Declined(f"the device move `{_code(small)}` passes `{_code(arg.value)}`; only names and "
                            "constants are hoisted")
    env.oblige("idempotent-device-move", target=slot, expr=_code(small.value), guard=guard)
    env.oblige("hoisted-setup-cannot-raise", stmt=_code(small), slot=slot, guard=guard)
    stmt = line if len(line.body) == 1 else _line(small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))
    return _Hoisted(stmt, line if len(line.body) == 1 else small, arm, pos, slot, "device-move", {slot},
                    _read_names(small.value) | _attrs(small.value))


def _paired_call(small: cst.BaseSmallStatement) -> _PairedCall | None:
    """``self.register_buffer("name", value, ...)`` as a statement, else None."""
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return None
    call = small.value
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in _PAIRED_SETTERS
            and isinstance(func.value, cst.Name)):
        return None
    name_at, value_at, value_kw = _PAIRED_SETTERS[func.attr.value]
    positional = [i for i, a in enumerate(call.args) if a.keyword is None and not a.star]
    name_i = positional[name_at] if len(positional) > name_at else next(
        (i for i, a in enumerate(call.args) if a.keyword is not None and a.keyword.value == "name"), None)
    value_i = positional[value_at] if len(positional) > value_at else next(
        (i for i, a in enumerate(call.args) if a.keyword is not None and a.keyword.value == value_kw), None)
    if name_i is None or value_i is None or any(a.star for a in call.args):
        return None
    name = call.args[name_i].value
    literal = name.evaluated_value if isinstance(name, cst.SimpleString) else None
    return _PairedCall(call, _code(func), literal if isinstance(literal, str) else None,
                       call.args[value_i].value, value_i)


def _without_value(p: _PairedCall) -> str:
    args = list(p.call.args)
    args[p.value_arg] = args[p.value_arg].with_changes(value=cst.Name("_"))
    return _code(p.call.with_changes(args=args))


def _plan_setup(chain, env: _Env, pred_codes: list[str]) -> _Setup:
    """Split each side into what it selects, the setup hoisted above the selection, and
    a trailing call paired across the sides; decline what cannot be moved unobserved."""
    scope = env.function or env.module
    bodies: list[list[cst.BaseSmallStatement]] = []
    hoisted: list[_Hoisted] = []
    for i, (_, body) in enumerate(chain):
        guard = _guard_text(pred_codes, i)
        lines = [cst.SimpleStatementLine(body=list(body.body))] if isinstance(body, cst.SimpleStatementSuite) \
            else list(body.body)
        smalls: list[cst.BaseSmallStatement] = []
        bound: set[str] = set()  # names this side binds before the current statement

        def hoist(h: _Hoisted, bound: set[str]) -> None:
            late = (h.reads & bound) - {"self"}
            if late:
                raise _Declined(f"the setup `{_code(h.node)[:60]}` reads `{sorted(late)[0]}`, which its branch "
                                "assigns before it; it cannot be hoisted")
            same = [o for o in hoisted if o.kind == "device-move" == h.kind and _code(o.node) == _code(h.node)]
            if same:  # the same move on several sides: once is enough (idempotent)
                same[0].also[h.arm] = h.pos
            else:
                hoisted.append(h)

        for line in lines:
            if isinstance(line, cst.If) and memo_slot(line) is not None:
                hoist(_memo(line, env, scope, guard, i, len(smalls)), bound)
                continue
            if not isinstance(line, cst.SimpleStatementLine):
                raise _Declined(f"a branch holds a nested `{type(line).__name__.lower()}` statement")
            for small in line.body:
                if is_device_move(small):
                    hoist(_device_move(small, line, env, guard, i, len(smalls)), bound)
                    continue
                smalls.append(small)
                bound |= _bound_by(small)
        bodies.append(smalls)

    # a trailing call on the same slot on every side -> one call, its value selected
    ends = [_paired_call(b[-1]) if b else None for b in bodies]
    paired: list[_PairedCall] = []
    if any(ends):
        first = next(e for e in ends if e is not None)
        if chain[-1][0] is not None or not all(ends):
            raise _Declined(f"only one side ends with `{first.func}(...)`; the call cannot be paired across the "
                            "sides, and running it on both would be seen")
        funcs = {e.func for e in ends}
        if len(funcs) > 1:
            raise _Declined(f"the sides end with different calls ({', '.join(sorted(funcs))}); they cannot be paired")
        if any(e.name is None for e in ends):
            raise _Declined(f"`{first.func}` is called with a name that is not a string literal; "
                            "the calls cannot be paired")
        names = list(dict.fromkeys(e.name for e in ends))
        if len(names) > 1:
            raise _Declined(f"the sides call `{first.func}` on different names "
                            f"({', '.join(repr(n) for n in names)}); they cannot be paired")
        if len({_without_value(e) for e in ends}) > 1:
            raise _Declined(f"the sides call `{first.func}({names[0]!r}, ...)` with different arguments besides "
                            "the value; they cannot be paired")
        paired = list(ends)
        bodies = [b[:-1] for b in bodies]

    # nobody may observe that the setup now runs first, and on every path
    tests = [t for t, _ in chain if t is not None]
    for h in hoisted:
        for t in tests:
            if h.slot in _attrs(t):
                raise _Declined(f"the test reads `{h.slot}`, which the hoisted setup `{_code(h.node)[:50]}` writes")
        # on its own side, only what came after it may read the slot; no other side may
        at = {h.arm: h.pos, **h.also}
        for j, body in enumerate(bodies):
            before = body[:at[j]] if j in at else body
            for small in before:
                if clash := sorted(h.writes & _reads(small)):
                    where = "before it on its side" if j in at else "on the other side"
                    raise _Declined(f"`{clash[0]}` is read {where} (`{_code(small)[:50]}`), "
                                    f"so the hoisted `{_code(h.node)[:50]}` would be seen")
            if paired and j not in at and (clash := sorted(h.writes & _reads(paired[j].value))):
                raise _Declined(f"`{clash[0]}` is read on the other side, so the hoisted `{_code(h.node)[:50]}` "
                                "would be seen")
        for o in hoisted:
            if o.arm not in at and h.writes & o.reads:
                raise _Declined(f"the hoisted setups of the two sides depend on each other "
                                f"(`{sorted(h.writes & o.reads)[0]}`)")
        if h.kind == "memo":
            _memo_unobserved(h, bodies, paired, scope, env)
    return _Setup(bodies, hoisted, paired)


def _memo_unobserved(h: _Hoisted, bodies, paired, scope: cst.CSTNode, env: _Env) -> None:
    """The memoised slot is read nowhere but by the selection after it on its own side:
    not elsewhere in the function, not anywhere else in the module (by attribute or by
    name string, as in ``hasattr``/``getattr``)."""
    obj, key = h.slot.split(".", 1)
    allowed = {id(h.node), *(id(s) for s in bodies[h.arm][h.pos:])}
    if paired:
        allowed.add(id(paired[h.arm].call))
    seen: list[str] = []

    class V(cst.CSTVisitor):
        def __init__(self, skip: set[int], any_object: bool):
            super().__init__()
            self.skip, self.any_object = skip, any_object

        def on_visit(self, node: cst.CSTNode) -> bool:
            if id(node) in self.skip:
                return False
            if isinstance(node, cst.Attribute) and node.attr.value == key and (
                    self.any_object or m.matches(node.value, m.Name(obj))):
                seen.append(_code(node))
            elif isinstance(node, cst.SimpleString) and node.evaluated_value == key:
                seen.append(_code(node))
            return not seen

    scope.visit(V(allowed, False))
    if seen:
        raise _Declined(f"the memoised attribute `{h.slot}` is also read elsewhere in the function (`{seen[0]}`), "
                        "so hoisting its initialisation could be observed")
    if scope is not env.module:
        env.module.visit(V({id(scope)}, True))
        if seen:
            raise _Declined(f"the memoised attribute `{h.slot}` is also used elsewhere in the module "
                            f"(`{seen[0]}`), so hoisting its initialisation could be observed")

