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


def categories(rules: dict[str, Rule]) -> dict[str, str]:
    """Which rule serves each taxonomy category (each category is served by one rule)."""
    out: dict[str, str] = {}
    for rule in rules.values():
        for category in rule.categories:
            if category in out:
                raise ImportError(f"the category {category!r} is claimed by both {out[category]} and {rule.name}")
            out[category] = rule.name
    return out


RULES: dict[str, Rule] = discover()

# Which rule a category belongs to, from each rule's `categories`.
RULE_FOR_CATEGORY: dict[str, str] = categories(RULES)


def match_site(category: str, loc: Located | None) -> Match | Decline:
    """Ask the rule responsible for ``category`` whether it expects to fix the site."""
    from mend.taxonomy import UNFIXABLE_REASONS

    rule_name = RULE_FOR_CATEGORY.get(category)
    if rule_name is None:
        return Decline(None, UNFIXABLE_REASONS.get(category, UNFIXABLE_REASONS["other"]))
    if loc is None:
        if category in UNFIXABLE_REASONS:  # a rule for a narrow shape of an otherwise unfixable category
            return Decline(None, UNFIXABLE_REASONS[category])
        return Decline(rule_name, "the source of this site could not be read or parsed")
    return RULES[rule_name].match(loc)


__all__ = ["RULES", "RULE_FOR_CATEGORY", "Decline", "DeclineExample", "FixExample", "Match", "RewriteResult", "Rule",
           "categories", "discover", "match_site"]
