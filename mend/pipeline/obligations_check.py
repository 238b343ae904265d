"""``mend cert verify``: the certificate's obligations are the ones its rule states for the
rewrite. The verifier re-checks what a certificate records, but not what it leaves out: a
certificate resealed without an obligation (helper-43 dropped ``guard-read-plain`` and
relabelled the fix ``safe``) would re-check clean. mend knows its rules, so it re-plans the
rewrite from the original file (hash-checked by the verifier) and compares the kinds."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import libcst as cst

from mend.rules import RULES, RewriteResult


def _same_tree(a: str, b: str) -> bool:
    """The same syntax tree: a comment or a blank line added to the mended file does not turn
    the comparison of kinds into a note (helper-44)."""
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except SyntaxError:
        return False


def rule_obligations(path: Path, doc: dict) -> tuple[str | None, str | None]:
    """(problem, note) for the certificate ``doc`` read from ``path``: a problem when the rule
    re-plans exactly the recorded mended file but with obligation kinds the certificate lacks;
    a note when it cannot be re-planned here (no original, another form, other rewrites)."""
    from verifier.certs import mended_code, original_code

    rule = RULES.get(doc.get("rule", ""))
    if rule is None:
        return f"the certificate names no rule mend knows ({doc.get('rule')!r})", None
    before, after = original_code(path, doc), mended_code(path, doc)
    line = str(doc.get("site", "")).rsplit(":", 1)[-1]
    if before is None or after is None or not line.isdigit():
        return None, "obligation kinds not re-planned from the rule (the original or the mended file is not here)"
    try:
        res = rule.rewrite(cst.parse_module(before), int(line))
    except Exception as exc:  # noqa: BLE001 - a rule bug is reported, not a crash of the check
        return None, f"obligation kinds not re-planned: the rule failed ({type(exc).__name__}: {exc})"
    if not isinstance(res, RewriteResult) or not _same_tree(res.code, after):
        return None, ("obligation kinds not re-planned: the rule's own form from the original is not the mended "
                      "file (another form was chosen, or the file holds other rewrites)")
    missing = Counter(o["kind"] for o in res.obligations) - Counter(o.get("kind") for o in doc.get("obligations", []))
    if missing:
        return (f"the certificate lacks obligation(s) the rule states for this rewrite: {', '.join(sorted(missing))} "
                "(removed after it was issued?)"), None
    return None, None
