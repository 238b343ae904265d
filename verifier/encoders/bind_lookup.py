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
import inspect
import itertools
from functools import lru_cache

from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown

HELPERS = ("_mend_bind_table", "_mend_bound")
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
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    found = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in HELPERS}
    if set(found) != set(HELPERS):
        return None
    return "\n\n".join(ast.unparse(found[h]) for h in HELPERS)


def _site_screen(code: str, sentinel: str) -> bool:
    """The lookup's result is tested with ``is <sentinel>`` and that branch calls ``.bind``."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                isinstance(node.test.ops[0], ast.Is) and ast.unparse(node.test.comparators[0]) == sentinel:
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "bind"
                   for stmt in node.body for c in ast.walk(stmt)):
                return True
    return False


def bind_lookup_agrees(ob: dict, ctx: Ctx) -> Outcome:
    code = ctx.code or ""
    source = _helper_source(code)
    by = ("a bounded exhaustive comparison with the installed inspect.Signature.bind (every signature of up to "
          "four parameters of every kind, every call of up to one extra positional argument and two keywords, "
          "every selected name; distinct objects as values)")
    if source is None:
        return unknown(f"the mended file does not define {' and '.join(HELPERS)}")
    if not _site_screen(code, ob.get("sentinel", "_MEND_UNBOUND")):
        return check_refuted(by, "no call site tests the lookup against its sentinel and falls back to bind")
    bad, compared, decided = _compare(source)
    if bad is not None:
        return check_refuted(by, bad)
    if decided == 0:
        return unknown("the lookup decided none of the compared calls: the comparison would show nothing")
    return checked(by + f": {compared} calls compared, {decided} decided by the lookup, all equal to bind's",
                   ["signatures of five or more parameters follow the same per-kind logic (not enumerated)",
                    "the signature object is not mutated after the table is read from it (it is built once, "
                    "where the decorator runs)"])


ENCODERS = {"bind-lookup-agrees": bind_lookup_agrees}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset()
