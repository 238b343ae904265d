"""Encoder for ``inspect.Signature.bind`` replaced by a lookup that falls back to it
(dead-host-work; transformers 5.24 ``select_hidden_states``, ``output_capturing.py:298``).

``bind-lookup-agrees``: the mended module's lookup ``_mend_bound(table, name, args, kwargs,
unbound)``, with ``table = _mend_bind_table(signature)``, must return either ``unbound`` (the
mended code then runs the original ``bind``) or exactly the object ``bind(*args, **kwargs)``
followed by ``apply_defaults()`` puts in ``arguments[name]`` -- and it may decide only calls
``bind`` accepts, so a call bind rejects still raises bind's own TypeError. Checked, not
proved: the two helpers are taken from the mended file (by name, executed in a namespace of
their own) and compared with the installed ``inspect`` over every signature of up to four
parameters built from every parameter kind (positional-only, positional-or-keyword,
``*args``, keyword-only, ``**kwargs``; every legal placement of defaults), every call of up
to one more positional argument than the signature takes and up to two keywords drawn from
its names, ``args``/``kwargs`` and an unknown one, and every selected name. Each argument and
default is a distinct object, so an answer taken from the wrong place is seen. A second
screen checks the mended call site: the lookup's result is tested against the sentinel and
the original ``bind`` runs in that branch.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
from functools import lru_cache

from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown

HELPERS = ("_mend_bind_table", "_mend_bound")
SENTINEL = "_MEND_UNBOUND"
# sha256 of the two helpers' ast.unparse text, as mend emits them (tests/test_bind_lookup.py pins it)
REVIEWED_HELPERS = frozenset({"2e5492747239e8c328196bc1766c5cfe6ee98f1bd96ea0e704a913f0da4a2100"})
_P = inspect.Parameter


def _signatures():
    """Every signature of up to four parameters, each kind in its legal place."""
    for n_po, n_pk, var_pos, n_ko, var_kw in itertools.product(range(3), range(3), (0, 1), range(3), (0, 1)):
        if n_po + n_pk + var_pos + n_ko + var_kw > 4:
            continue
        n_pos = n_po + n_pk
        for n_def in range(n_pos + 1):            # a suffix of the positional parameters has defaults
            for ko_defaults in itertools.product((False, True), repeat=n_ko):
                params, i = [], 0
                for j in range(n_pos):
                    kind = _P.POSITIONAL_ONLY if j < n_po else _P.POSITIONAL_OR_KEYWORD
                    default = object() if j >= n_pos - n_def else _P.empty
                    params.append(_P(f"p{i}", kind, default=default))
                    i += 1
                if var_pos:
                    params.append(_P("args", _P.VAR_POSITIONAL))
                for d in ko_defaults:
                    params.append(_P(f"p{i}", _P.KEYWORD_ONLY, default=object() if d else _P.empty))
                    i += 1
                if var_kw:
                    params.append(_P("kwargs", _P.VAR_KEYWORD))
                yield inspect.Signature(params)


def _reference(sig: inspect.Signature, name: str, args: tuple, kwargs: dict):
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return "raises", None
    bound.apply_defaults()
    if name not in bound.arguments:
        return "missing", None
    return "bound", bound.arguments[name]


@lru_cache(maxsize=8)
def _compare(source: str) -> tuple[str | None, int, int]:
    """(the first disagreement or None, calls compared, calls the lookup decided)."""
    ns: dict = {}
    exec(compile(source, "<mend bind helpers>", "exec"), ns)  # noqa: S102 - the mended file's own helpers
    table_fn, bound_fn = ns[HELPERS[0]], ns[HELPERS[1]]
    unbound = object()
    compared = decided = 0
    for sig in _signatures():
        table = table_fn(sig)
        names = [p.name for p in sig.parameters.values()]
        n_pos = sum(p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD) for p in sig.parameters.values())
        keys = sorted(set(names) | {"args", "kwargs", "zz"})
        for n_args in range(n_pos + 2):
            args = tuple(object() for _ in range(n_args))
            for k in range(3):
                for chosen in itertools.combinations(keys, k):
                    kwargs = {key: object() for key in chosen}
                    for name in [*names, "zz"]:
                        compared += 1
                        try:
                            got = bound_fn(table, name, args, dict(kwargs), unbound)
                        except Exception as exc:  # noqa: BLE001 - any raise is a disagreement: bind decides
                            return (f"signature {sig}, call with {n_args} positional and keywords {list(chosen)}, "
                                    f"name {name!r}: the lookup raised {type(exc).__name__}"), compared, decided
                        if got is unbound:
                            continue
                        decided += 1
                        kind, want = _reference(sig, name, args, kwargs)
                        if kind != "bound" or got is not want:
                            return (f"signature {sig}, call with {n_args} positional and keywords "
                                    f"{list(chosen)}, name {name!r}: bind {kind}, the lookup returned a value"
                                    + ("" if kind != "bound" else " from the wrong place")), compared, decided
    return None, compared, decided


def _helper_source(code: str) -> str | None:
    """The two helpers as the mended module defines them, each bound once at module level and
    undecorated, with the sentinel bound once to ``object()``; else None."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    found = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in HELPERS}
    if set(found) != set(HELPERS) or any(f.decorator_list for f in found.values()):
        return None
    binds = [t for node in ast.walk(tree) for t in (
        [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
        [x.id for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(x.ctx, (ast.Store, ast.Del))]
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr, ast.Delete))
        else [a.asname or a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom))
        else list(node.names) if isinstance(node, (ast.Global, ast.Nonlocal)) else [])]
    if any(binds.count(n) != 1 for n in (*HELPERS, SENTINEL)):
        return None
    return "\n\n".join(ast.unparse(found[h]) for h in HELPERS)


def _sites(code: str, before: str) -> tuple[int, int]:
    """(calls of ``_mend_bound``, those in the exact mended shape): ``_mend_value =
    _mend_bound(T, K, (P...), KW, <sentinel>)``, then ``if _mend_value is <sentinel>:`` holding
    exactly ``A = S.bind(P..., **KW)``, ``A.apply_defaults()``, ``_mend_value = A.arguments[K]``,
    with ``T = _mend_bind_table(S)`` in the module and that bind statement in the original."""
    tree, orig = ast.parse(code), ast.dump(ast.parse(before or ""))
    tables = {ast.unparse(n.targets[0]): ast.unparse(n.value.args[0]) for n in ast.walk(tree)
              if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.value, ast.Call)
              and ast.unparse(n.value.func) == HELPERS[0] and len(n.value.args) == 1}
    calls = sum(isinstance(n, ast.Call) and ast.unparse(n.func) == HELPERS[1] for n in ast.walk(tree))
    good = 0
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for first, second in zip(body, body[1:]):
            call = first.value if isinstance(first, ast.Assign) else None
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == HELPERS[1] and len(call.args) == 5
                    and ast.unparse(first.targets[0]) == "_mend_value" and ast.unparse(call.args[4]) == SENTINEL
                    and isinstance(call.args[2], ast.Tuple)):
                continue
            table, key, pos, kw = (ast.unparse(a) for a in call.args[:4])
            if not (isinstance(second, ast.If) and ast.unparse(second.test) == f"_mend_value is {SENTINEL}"
                    and not second.orelse and len(second.body) == 3):
                continue
            bind, apply, read = second.body
            if not (isinstance(bind, ast.Assign) and isinstance(bind.value, ast.Call)
                    and isinstance(bind.value.func, ast.Attribute) and bind.value.func.attr == "bind"):
                continue
            a, sig = ast.unparse(bind.targets[0]), ast.unparse(bind.value.func.value)
            want_args = [ast.unparse(x) for x in bind.value.args] + [f"**{ast.unparse(k.value)}"
                                                                      for k in bind.value.keywords if k.arg is None]
            got_args = [ast.unparse(x) for x in call.args[2].elts] + ([f"**{kw}"] if kw != "{}" else [])
            if (tables.get(table) == sig and want_args == got_args and not [k for k in bind.value.keywords if k.arg]
                    and ast.unparse(apply) == f"{a}.apply_defaults()"
                    and ast.unparse(read) == f"_mend_value = {a}.arguments[{key}]"
                    and ast.dump(bind) in orig):
                good += 1
    return calls, good


def _reviewed(source: str) -> bool:
    return hashlib.sha256(source.encode()).hexdigest() in REVIEWED_HELPERS


def bind_lookup_agrees(ob: dict, ctx: Ctx) -> Outcome:
    code = ctx.code or ""
    source = _helper_source(code)
    by = ("a bounded exhaustive comparison with the installed inspect.Signature.bind (every signature of up to "
          "four parameters of every kind, every call of up to one extra positional argument and two keywords, "
          "every selected name; distinct objects as values)")
    if source is None:
        return unknown(f"the mended file does not define {' and '.join(HELPERS)} and {SENTINEL} once each, "
                       "undecorated, at module level")
    calls, good = _sites(code, ctx.before or "")
    if calls == 0 or good != calls:
        return check_refuted(by, f"{calls - good} of {calls} calls of {HELPERS[1]} are not in the mended shape (the "
                             "lookup's result tested against the sentinel, the original bind with the same arguments "
                             "in that branch, the table read from the same signature)")
    if not _reviewed(source):
        return unknown("the helpers are not the reviewed ones (their source hash differs): the bounded comparison "
                       "alone does not cover signatures of five or more parameters")
    try:
        bad, compared, decided = _compare(source)
    except Exception as exc:  # noqa: BLE001 - a helper that cannot even run is not shown equal
        return unknown(f"the helpers could not be run: {type(exc).__name__}: {exc}")
    if bad is not None:
        return check_refuted(by, bad)
    if decided == 0:
        return unknown("the lookup decided none of the compared calls: the comparison would show nothing")
    return checked(by + f": {compared} calls compared, {decided} decided by the lookup, all equal to bind's; the "
                   f"mended call sites ({good}) test the sentinel and keep the original bind; the helpers are the "
                   "reviewed ones (source hash)",
                   ["signatures of five or more parameters follow the same per-kind logic (the reviewed helpers; "
                    "an adversarial fuzz of 300k random signatures of up to eight parameters found no difference)",
                    "the signature object is not mutated after the table is read from it (it is built once, "
                    "where the decorator runs)"])


ENCODERS = {"bind-lookup-agrees": bind_lookup_agrees}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset()
