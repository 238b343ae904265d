"""Rewrite rules, one package per rule: ``mend/rules/<name with - as _>/``, declaring
``RULE = Rule(...)`` (name, categories, matcher, rewrite, obligation kinds, fix safety,
examples) in its ``__init__.py``. :data:`RULES` is built by discovering those packages
(as pyupgrade's ``_plugins`` are): adding a rule is adding a folder, with no table to edit.
A module or package whose name starts with ``_`` (``_base``, ``_common``) is not a rule.

A matcher is static: it looks at the LibCST node at a break site and answers either a
:class:`Match` (the rule expects to fix it, pending verification) or a :class:`Decline`
with a reason a user understands.
"""
from __future__ import annotations

import importlib
import pkgutil

from mend.locate import Located
from mend.rules._base import Decline, DeclineExample, FixExample, Match, RewriteResult, Rule
from mend.rules._uses import sizes_tensors


def discover() -> dict[str, Rule]:
    """Every rule package under ``mend/rules/``, by rule name (sorted by package name).

    Raises ImportError for a module that is not a package, a package without a ``RULE``, or
    a rule whose name is not its package's name (``-`` for ``_``)."""
    rules: dict[str, Rule] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        if not info.ispkg:
            raise ImportError(f"mend/rules/{info.name}.py: a rule is a package, mend/rules/{info.name}/; "
                              "a helper module's name starts with `_`")
        module = importlib.import_module(f"{__name__}.{info.name}")
        rule = getattr(module, "RULE", None)
        if not isinstance(rule, Rule):
            raise ImportError(f"{module.__name__} declares no `RULE = Rule(...)`")
        if rule.module_name != info.name:
            raise ImportError(f"{module.__name__} declares the rule {rule.name!r}; its package must be named "
                              f"{rule.module_name!r}")
        rules[rule.name] = rule
    return rules


def categories(rules: dict[str, Rule]) -> dict[str, tuple[str, ...]]:
    """Which rules serve each taxonomy category, in discovery order. Several rules may serve
    one category when each takes a different statement shape (``item-tolist``: a counting
    loop over ``.tolist()``, and ``x = T.item()``), so that a site keeps the category the
    break report gives it whichever rule fixes it."""
    out: dict[str, tuple[str, ...]] = {}
    for rule in rules.values():
        for category in rule.categories:
            out[category] = (*out.get(category, ()), rule.name)
    return out


RULES: dict[str, Rule] = discover()

# Which rules a category belongs to, from each rule's `categories`.
RULE_FOR_CATEGORY: dict[str, tuple[str, ...]] = categories(RULES)


def match_site(category: str, loc: Located | None) -> Match | Decline:
    """Ask the rules responsible for ``category`` whether one expects to fix the site: the first
    Match wins; else the decline that says most (a rule's own reason before a generic one)."""
    from mend.taxonomy import UNFIXABLE_REASONS

    names = RULE_FOR_CATEGORY.get(category, ())
    if not names:
        return Decline(None, UNFIXABLE_REASONS.get(category, UNFIXABLE_REASONS["other"]))
    if loc is None:
        if category in UNFIXABLE_REASONS:  # a rule for a narrow shape of an otherwise unfixable category
            return Decline(None, UNFIXABLE_REASONS[category])
        return Decline(names[0], "the source of this site could not be read or parsed")
    declines = []
    for name in names:
        try:
            verdict = RULES[name].match(loc)
        except Exception as exc:   # noqa: BLE001 - a rule bug must not end the scan (helper-41): declined, named
            verdict = Decline(name, f"the rule failed on this site, an internal error (please report it): "
                                    f"{type(exc).__name__}: {exc}")
        if isinstance(verdict, Match):
            return verdict
        declines.append(verdict)
    generic = UNFIXABLE_REASONS.get(category)
    # a rule serving several categories answers a site it does not take with its own
    # category's generic reason: after every specific one, and after this category's
    generics = set(UNFIXABLE_REASONS.values())
    best = min(declines, key=lambda d: (d.rule is None, d.reason in generics, d.reason != generic))
    sized = sizes_tensors(loc) if category == "item-tolist" else None
    if sized:   # the decisive fact first: the values size tensors (helper-77: split sizes, slice bounds)
        return Decline(best.rule, sized + ("" if best.reason in generics else f"; {best.reason}"))
    return best


__all__ = ["RULES", "RULE_FOR_CATEGORY", "Decline", "DeclineExample", "FixExample", "Match", "RewriteResult", "Rule",
           "categories", "discover", "match_site"]
