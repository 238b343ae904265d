"""Branch-local Python-scalar temporaries (issue 10: the fp16 overflow guards).

transformers writes ``if h.dtype == torch.float16 and torch.isinf(h).any():
clamp_value = torch.finfo(h.dtype).max - 1000; h = torch.clamp(h, min=-clamp_value,
max=clamp_value)`` several times in one ``forward``, so ``clamp_value`` is named elsewhere
in the function and is not a setup temporary in the sense of ``where.py`` (a name used
nowhere else). It is one all the same when (a) it is assigned once, on one side only, and
read later on that side; (b) no test and no other side names it; (c) it is dead after the
``if`` (every path from the end of the ``if`` rebinds it before any read: :func:`live_after`);
and (d) its value is a Python scalar computed from literals, dtypes and ``torch.finfo`` /
``torch.iinfo`` only (:func:`scalar_reason`): no tensor op, no call with an effect. Such a
temporary runs before the selection; the selection keeps the test's global ``.any()`` /
``.all()``.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._common import locals_readers
from mend.rules.predicated_control_flow.env import _code, _read_names

_INFO = {"finfo", "iinfo"}
_INFO_ATTRS = {"max", "min", "eps", "tiny", "smallest_normal", "resolution", "bits"}
_DTYPES = {"float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "int16", "int32",
           "int64", "long", "int", "uint8", "short", "bool"}


def scalar_reason(expr: cst.BaseExpression, env, scalars: set[str]) -> str | None:
    """None when ``expr`` is a Python scalar computed from literals, names in ``scalars``
    (temporaries of the same kind bound earlier on the side) and ``torch.finfo(D).<attr>``
    (``D``: ``x.dtype`` or ``torch.<dtype>``); else what it is instead (for a decline)."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return None
    if isinstance(expr, cst.Name):
        return None if expr.value in scalars else f"it reads `{expr.value}`, which may be a tensor"
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return scalar_reason(expr.expression, env, scalars)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):
            return scalar_reason(expr.left, env, scalars) or scalar_reason(expr.right, env, scalars)
        if isinstance(expr.operator, cst.Divide) and isinstance(expr.right, (cst.Integer, cst.Float)) \
                and float(expr.right.evaluated_value) != 0.0:
            return scalar_reason(expr.left, env, scalars)
        return f"it applies `{_code(expr.operator).strip()}`, which the rule does not hoist"
    if isinstance(expr, cst.Attribute) and expr.attr.value in _INFO_ATTRS and isinstance(expr.value, cst.Call):
        call = expr.value
        qual = env.qualified(_code(call.func)) if m.matches(call.func, m.Attribute() | m.Name()) else None
        if qual in {f"torch.{f}" for f in _INFO} and len(call.args) == 1 and call.args[0].keyword is None \
                and _is_dtype(call.args[0].value, env):
            return None
        return f"it calls `{_code(call.func)}`"
    if isinstance(expr, cst.Call):
        return f"it calls `{_code(expr.func)}`, which may be a tensor op or have an effect"
    return f"`{_code(expr)[:40]}` is not a Python-scalar computation"


def _is_dtype(expr: cst.BaseExpression, env) -> bool:
    """``x.dtype`` (a read without effect) or ``torch.<dtype>``."""
    if m.matches(expr, m.Attribute(value=m.Name(), attr=m.Name("dtype"))):
        return True
    if isinstance(expr, cst.Attribute):
        qual = env.qualified(_code(expr))
        return qual is not None and qual.startswith("torch.") and qual.split(".", 1)[1] in _DTYPES
    return False


def _occurs(node: cst.CSTNode, name: str) -> bool:
    return bool(m.findall(node, m.Name(name)))


def _live_in(stmts, name: str, live_out: bool) -> cst.CSTNode | None | bool:
    """Backward liveness of ``name`` through ``stmts``: the statement that reads it (live),
    False (dead: rebound first on every path) or, when ``stmts`` neither reads nor binds
    it, ``live_out`` passed through (True / a node / False). Conservative: a compound
    statement other than ``if`` that names it at all counts as a read."""
    live: cst.CSTNode | None | bool = live_out
    for stmt in reversed(list(stmts)):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in reversed(stmt.body):
                if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets) \
                        and any(t.target.value == name for t in small.targets):
                    live = small if name in _read_names(small.value) else False
                elif _occurs(small, name):
                    live = small
                elif isinstance(small, (cst.Return, cst.Raise)):
                    live = False if isinstance(small, cst.Return) else live  # a raise: handlers may read it
        elif isinstance(stmt, cst.If):
            body = _live_in(_block(stmt.body), name, live)
            other = _live_in(_block(stmt.orelse.body), name, live) if isinstance(stmt.orelse, cst.Else) else (
                _live_in([stmt.orelse], name, live) if isinstance(stmt.orelse, cst.If) else live)
            live = stmt.test if _occurs(stmt.test, name) else (body or other)
        elif _occurs(stmt, name):
            live = stmt
    return live


def _block(suite) -> list:
    return list(suite.body) if isinstance(suite, cst.IndentedBlock) else [cst.SimpleStatementLine(list(suite.body))]


def live_after(name: str, node: cst.If, ancestors: list[cst.CSTNode]) -> str | None:
    """Where ``name`` may be read after the ``if`` statement ``node`` (its code), or None
    when it is dead there. Outside a function (module globals), under ``global`` /
    ``nonlocal``, or read by a nested function, it counts as live."""
    func = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if func is None:
        return "the module's globals"
    for inner in m.findall(func.body, m.FunctionDef() | m.Lambda() | m.ClassDef() | m.Global() | m.Nonlocal()):
        if _occurs(inner, name):
            return _code(inner)[:60]
    for call in locals_readers(func.body):
        return _code(call)[:60]  # reads every local by name
    # the statements that follow, innermost block first; the function's end kills it
    follow: list[list] = []
    child: cst.CSTNode = node
    for anc in reversed(ancestors):
        if anc is func:
            break
        if isinstance(anc, cst.IndentedBlock):
            body = list(anc.body)
            idx = next(i for i, s in enumerate(body) if s is child)
            follow.append(body[idx + 1:])
        elif isinstance(anc, cst.Try) and any(_occurs(part, name) for part in
                                              [*anc.handlers, *([anc.orelse] if anc.orelse else []),
                                               *([anc.finalbody] if anc.finalbody else [])]):
            return "a `try` statement's handlers"
        elif isinstance(anc, (cst.For, cst.While)):
            return "the enclosing loop"
        child = anc
    live: cst.CSTNode | None | bool = False
    for stmts in reversed(follow):
        live = _live_in(stmts, name, live)
    return _code(live)[:60] if isinstance(live, cst.CSTNode) else ("a later statement" if live else None)


def scalar_temps(chain, arms, inside: dict, temps: set[str], node: cst.If, ancestors, env) -> set[str]:
    """The branch-local Python-scalar temporaries of the site (see the module docstring);
    raises ``_Declined`` for one that is read after the ``if`` or is not a Python scalar."""
    from mend.rules.predicated_control_flow.env import _Declined

    tests = [t for t, _ in chain if t is not None]
    found: set[str] = set()
    for n, bodies in inside.items():
        if n in temps or len(bodies) != 1:
            continue
        i = next((k for k, (_, b) in enumerate(chain) if b is bodies[0]), None)
        if i is None:   # the fall-through arm after an early return: its names are no scalar temps
            continue
        names = [a for a, _ in arms[i].assigns]
        if names.count(n) != 1 or any(_occurs(t, n) for t in tests) or any(
                _occurs(b, n) for k, (_, b) in enumerate(chain) if k != i):
            continue
        at = names.index(n)
        value = arms[i].assigns[at][1]
        later = [v for _, v in arms[i].assigns[at + 1:]] + ([arms[i].ret] if arms[i].ret is not None else [])
        if not any(n in _read_names(v) for v in later) or any(
                n in _read_names(v) for _, v in arms[i].assigns[:at + 1]):
            continue  # not a temporary read on its side: selected, as before
        reason = scalar_reason(value, env, found)
        where = live_after(n, node, ancestors)
        if where is not None:
            if reason is None:
                raise _Declined(f"`{n}` is a Python scalar computed in the branch and read after the `if` "
                                f"(`{where}`); hoisting it would change that read, and selecting it would make "
                                "it a tensor")
            continue  # a name the selection chooses, as before
        if reason is not None:
            raise _Declined(f"the branch-local temporary `{n} = {_code(value)[:50]}` is not a Python scalar "
                            f"({reason}); only dtype / torch.finfo arithmetic is hoisted out of a branch")
        early = (_read_names(value) & set(names[:at])) - found
        if early:
            raise _Declined(f"the temporary `{n}` reads `{sorted(early)[0]}`, which its side assigns before it")
        found.add(n)
    return found


_FINITENESS = {"isinf", "isfinite", "isnan", "isposinf", "isneginf"}


def finiteness_obligations(tests, env) -> None:
    """``finiteness-test-precision`` for each finiteness test of a tensor in ``tests``: the
    test now runs in the graph that computes the tensor, where Inductor may compute a
    float16/bfloat16 producer in float32 and miss an overflow (verifier/encoders/
    finiteness_precision.py)."""
    for test in tests:
        for call in m.findall(test, m.Call()):
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else (
                func.value if isinstance(func, cst.Name) else None)
            if name not in _FINITENESS:
                continue
            qual = env.qualified(_code(func)) if isinstance(func, cst.Attribute) else None
            if qual == f"torch.{name}" and call.args:
                tensor = call.args[0].value
            elif isinstance(func, cst.Attribute) and qual is None:
                tensor = func.value  # h.isinf()
            else:
                continue
            env.oblige("finiteness-test-precision", expr=_code(tensor), test=_code(call))
