"""Rewrite rules. Each rule is one module declaring its matcher, rewrite and proof
obligations next to the examples it must fix and must decline (Fixit / pyupgrade style).

A matcher is static: it looks at the LibCST node at a break site and answers either a
:class:`Match` (the rule expects to fix it, pending verification) or a :class:`Decline`
with a reason a user understands.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mend.locate import Located


@dataclass
class Match:
    rule: str
    detail: str = ""


@dataclass
class Decline:
    rule: str | None
    reason: str


@dataclass
class RewriteResult:
    """A rewrite awaiting verification: the whole new module (``code``), the replaced lines
    of the input (``span``, 1-based, inclusive), what was done, and what a verifier must
    establish. ``obligations`` are data only (``{"kind": "same-shape", "target": "h",
    "lhs": "h * 2.0", "rhs": "h"}``...); ``predicates``: the original predicate sources of a
    predicated branch; ``edge_values``: constants the rewrite's behaviour turns on (a
    comparison's threshold), which the differential test draws, rounded to each input's
    dtype and their neighbours, as edge values."""

    code: str
    span: tuple[int, int]
    detail: str
    obligations: list[dict] = field(default_factory=list)
    predicates: list[str] = field(default_factory=list)
    edge_values: list = field(default_factory=list)


from mend.rules import deferred_effects, host_count, predicated_control_flow, predicated_validation  # noqa: E402

RULES = {
    "predicated-control-flow": predicated_control_flow,
    "deferred-side-effects": deferred_effects,
    "predicated-validation": predicated_validation,
    "host-count-reduction": host_count,
}

# Which rule a category belongs to.
RULE_FOR_CATEGORY = {
    "data-dependent-branch": "predicated-control-flow",
    "print-logging": "deferred-side-effects",
    "raise-assert": "predicated-validation",
    # only host counting loops over `.tolist()`; every other scalar read keeps the category's reason
    "item-tolist": "host-count-reduction",
}


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
