"""Rule documentation generated from the rules themselves (as ruff's rule pages are):
``mend rules`` lists them, ``mend rules NAME`` prints one page. Nothing here is copied by
hand from a rule; a page reads the rule's declaration and runs its first examples."""
from __future__ import annotations

import difflib
import re
import textwrap
from typing import Iterable

import libcst as cst

from mend.rules._base import Decline, Rule

_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr):`~?\.?([^`]+)`")


def _markdown(rst: str) -> str:
    """The reStructuredText of a docstring as Markdown: roles become code, a line holding
    only ``::`` (a literal block follows, indented) is dropped."""
    text = _ROLE.sub(r"`\1`", textwrap.dedent(rst).strip("\n"))
    return "\n".join(line for line in text.splitlines() if line.strip() != "::")


def plain(rst: str) -> str:
    """One line of text, without reStructuredText markup."""
    return " ".join(_ROLE.sub(r"\1", rst).replace("``", "").split())


def rules_table(rules: Iterable[Rule]):
    """A rich table: each rule's name, categories, required obligations and fix safety."""
    from rich.table import Table

    table = Table(title="mend rules (`mend rules NAME` for one rule's page)")
    for col in ("rule", "categories", "required at every level", "fix safety"):
        table.add_column(col, overflow="fold")
    for rule in rules:
        table.add_row(rule.name, ", ".join(rule.categories), ", ".join(sorted(rule.required_kinds)) or "-",
                      plain(rule.fix_safety_summary))
    return table


def rule_page(rule: Rule) -> str:
    """The documentation of ``rule`` in Markdown: its doc, categories, obligations, facts,
    fix safety, and its first fix and decline examples (the decline's reason as the rule
    gives it)."""
    from mend.taxonomy import CATEGORIES

    out = [f"# {rule.name}", "", _markdown(rule.doc), "", "## Categories", ""]
    out += [f"* `{c}`: {CATEGORIES.get(c, '')}" for c in rule.categories]
    out += ["", "## Obligations", "",
            "Every kind of proof obligation its rewrites can emit"
            + (", read against facts from one run of the candidate on the example input:" if rule.needs_facts
               else " (no facts of a run are needed):"), ""]
    out += [f"* `{k}`" + (" (required at every level)" if k in rule.required_kinds else "")
            for k in sorted(rule.obligation_kinds)]
    out += ["", "## Fix safety", "", _markdown(rule.fix_safety)]
    if rule.fix_examples:
        ex = rule.fix_examples[0]
        diff = difflib.unified_diff(ex.before.splitlines(), ex.after.splitlines(), "before", "after", lineterm="")
        out += ["", "## Example fix", "", f"Site: line {rule.site(ex)}.", "", "```diff", *diff, "```"]
    if rule.decline_examples:
        ex = rule.decline_examples[0]
        line = rule.site(ex)
        res = rule.rewrite(cst.parse_module(ex.source), line)
        reason = res.reason if isinstance(res, Decline) else ex.reason
        out += ["", "## Example decline", "", f"Site: line {line}.", "", "```python", ex.source.rstrip("\n"), "```",
                "", "```text", textwrap.fill(f"declined: {reason}", 88), "```"]
    return "\n".join(out) + "\n"
