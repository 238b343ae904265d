"""Typed records of a ``mend fix`` run: what was rewritten, what was declined, the result.

Frozen dataclasses, so a record with a missing field fails where it is built, not where
it is printed. ``to_json()`` gives the documented JSON (``mend/schemas/fix.schema.json``).
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class _JsonView:
    """Read access by JSON key (``rw["site"]``, ``d.get("counterexample")``), so code written
    against the JSON output reads records the same way."""

    def __getitem__(self, key: str):
        return self.to_json()[key]

    def get(self, key: str, default=None):
        return self.to_json().get(key, default)


@dataclass(frozen=True)
class Rewrite(_JsonView):
    """One verified rewrite. ``site`` is ``file:line`` in the original file; ``span`` the
    replaced lines (1-based, inclusive) of the version it was applied to; ``obligations``
    each with its outcome (proved/refuted/unknown/checked); ``verification`` what the level
    policy decided; ``evidence`` the differential test's record; ``safety`` its fix safety,
    ``{"label": "safe" | "unsafe", "reasons": [...]}`` (:func:`verifier.levels.fix_safety`);
    ``choice``: for a branch whose rewrite the cost model chose among keeping the break,
    ``torch.where`` and ``torch.cond``, the record :func:`mend.cost.choose` returned (None
    for other rules: their rewrite is the only candidate)."""

    rule: str
    file: str
    site: str
    span: list[int]
    detail: str
    diff: str
    obligations: list[dict]
    verification: dict
    evidence: dict
    safety: dict = field(default_factory=lambda: {"label": "unsafe", "reasons": ["not labelled"]})
    choice: dict | None = None

    def to_json(self) -> dict:
        doc = {"rule": self.rule, "file": self.file, "site": self.site, "span": list(self.span),
               "detail": self.detail, "diff": self.diff, "obligations": self.obligations,
               "verification": self.verification, "evidence": self.evidence, "safety": self.safety}
        if self.choice is not None:
            doc["choice"] = self.choice
        return doc


@dataclass(frozen=True)
class Declined(_JsonView):
    """A site a rule was asked about and did not rewrite, with a reason a user understands
    and, when verification declined it, the obligations that failed or a counterexample."""

    site: str
    rule: str | None
    reason: str
    failed_obligations: list[str] | None = None
    counterexample: str | None = None
    safety: str | None = None   # "unsafe": withheld without --unsafe-fixes (tested or not: the reason says)
    choice: dict | None = None  # the cost model's choice when it kept the graph break (mend.cost.choose)
    reasons: list[str] | None = None   # a withheld unsafe fix: what it rests on, each whole (in ``reason`` too)

    @classmethod
    def withheld(cls, site: str, rule: str | None, head: str, safety: dict) -> "Declined":
        """An unsafe fix withheld without --unsafe-fixes: ``head`` (why it was withheld, tested or
        not) and the first three of ``safety``'s reasons (verifier.levels.fix_safety)."""
        reasons = list(safety["reasons"][:3])
        return cls(site, rule, head + "; ".join(reasons), safety=safety["label"], reasons=reasons)

    def __post_init__(self):
        if not self.site or not self.reason:
            raise ValueError(f"a decline needs a site and a reason: {self!r}")

    def to_json(self) -> dict:
        doc: dict[str, Any] = {"site": self.site, "rule": self.rule, "reason": self.reason}
        if self.failed_obligations is not None:
            doc["failed_obligations"] = self.failed_obligations
        if self.counterexample is not None:
            doc["counterexample"] = self.counterexample
        if self.safety is not None:
            doc["safety"] = self.safety
        if self.choice is not None:
            doc["choice"] = self.choice
        return doc


def choice_text(choice: dict) -> str:
    """A cost choice on one line (the diff header's): ``chose CANDIDATE by METHOD: REASON``."""
    reason = " ".join(str(choice.get("reason", "")).split())
    return f"chose {choice.get('chosen')} by {choice.get('method')}: {reason}"


def labels(name: str) -> tuple[str, str]:
    """Unified-diff labels: ``a/REL``/``b/REL``, or the absolute path twice (no ``a//abs``)."""
    return (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")


@dataclass
class FixResult:
    """What ``mend fix`` produced for one target, whichever executor verified it.

    ``files`` maps a display path (relative to the working directory, or to site-packages
    for installed packages) to the mended text of each changed file; ``originals`` to the
    text before; ``sources`` to the file each was read from. ``executor`` is ``in-process``
    (FILE, FILE:FACTORY) or ``overlay`` (MODULE:FACTORY, hf:, fresh interpreters with the
    import overlay). ``before``/``after`` are scans (``to_json()`` in the scan schema)."""

    target: str
    executor: str
    files: dict[str, str]
    originals: dict[str, str]
    sources: dict[str, Path]
    before: Any
    after: Any
    rewrites: list[Rewrite] = field(default_factory=list)
    declined: list[Declined] = field(default_factory=list)
    main_file: str | None = None  # the target's own file (FILE, FILE:FACTORY)
    seconds: float | None = None  # wall time of the whole fix (s), set by the CLI for a batch report

    @property
    def file(self) -> Path | None:
        """The target's own file, for FILE and FILE:FACTORY targets."""
        return self.sources.get(self.main_file) if self.main_file else None

    @property
    def original(self) -> str | None:
        return self.originals.get(self.main_file) if self.main_file else None

    @property
    def mended(self) -> str | None:
        return self.files.get(self.main_file, self.original) if self.main_file else None

    def in_place(self, rel: str) -> Path | None:
        """The user's own file behind ``rel`` (``--write`` may replace it); None inside
        installed packages, which are never edited."""
        from mend.detect import in_site_packages

        src = self.sources.get(rel)
        return src if src is not None and not in_site_packages(str(src)) else None

    def out_path(self, rel: str, dest: Path) -> Path:
        """Where ``--out DEST`` puts the mended ``rel``: ``DEST/<file name>`` for a file
        target, ``DEST/<package path>`` for the overlay (so ``mend.overlay`` serves it)."""
        return dest / (Path(rel).name if self.executor == "in-process" else rel)

    def module_of(self, rel: str) -> str | None:
        """The dotted module the overlay replaces with ``rel`` (overlay executor only)."""
        return rel[:-3].replace("/", ".") if self.executor == "overlay" else None

    def original_line(self, site) -> int:
        """The line in the user's original file of a site of the ``after`` scan (whose lines
        are the mended file's: rewrites above the site move it). The first original line
        with the site's source text; the site's own line when none has it."""
        rel = next((r for r in self.files if site.display_file in (r, str(self.sources.get(r)))), None)
        if rel is None:
            return site.line
        lines = self.originals[rel].splitlines()
        hits = [i for i, text in enumerate(lines, 1) if text.strip() == (site.source or "").strip()]
        return min(hits, key=lambda i: abs(i - site.line)) if hits else site.line

    def diff(self) -> str:
        """The unified diff of every mended file, each headed by one line per rewrite in it
        (``# mend: [safe] FILE:LINE RULE: DETAIL``, and for a rewrite the cost model chose
        ``; chose CANDIDATE by METHOD: REASON``), which patch tools skip."""
        out = []
        for rel, code in self.files.items():
            out += [f"# mend: [{rw.safety['label']}] {rw.site} {rw.rule}: {rw.detail}"
                    f"{'; ' + choice_text(rw.choice) if rw.choice else ''}\n" for rw in self.rewrites if rw.file == rel]
            out.append("".join(difflib.unified_diff(self.originals[rel].splitlines(True), code.splitlines(True),
                                                    *labels(rel))))
        return "".join(out)

    def unfixable(self) -> list[dict]:
        """The breaks left that no rule fixes, each with the user's file, its original line and
        the reason (what the text report prints as ``unfixable``; a rule's own decline of a
        site it matched is in ``declined``)."""
        return [{"site": f"{s.display_file}:{self.original_line(s)}", "category": s.category,
                 "reason": self.original_reason(s), "count": s.count} for s in self.after.sites if not s.fixable_by]

    def original_reason(self, site) -> str:
        """The reason of a site of the ``after`` scan, its ``line N`` mentions the user's lines."""
        rel = next((r for r in self.files if site.display_file in (r, str(self.sources.get(r)))), None)
        return site.reason if rel is None else original_lines(site.reason, self.files[rel], self.originals[rel])

    def to_json(self) -> dict:
        return {"before": self.before.to_json(), "after": self.after.to_json(),
                "rewrites": [r.to_json() for r in self.rewrites], "declined": [d.to_json() for d in self.declined],
                "unfixable": self.unfixable(), "diff": self.diff()}


def original_lines(reason: str, current: str, original: str) -> str:
    """``reason`` with each ``line N`` of the partly mended ``current`` text named by its line in
    the user's ``original`` (the nearest original line with the same text; left as it is when
    none has it): a reason from a later round said "line 28" where the user's line 28 was
    another statement (helper-86)."""
    if current == original:
        return reason
    cur, orig = current.splitlines(), original.splitlines()

    def one(found: re.Match) -> str:
        n = int(found.group(2))
        text = cur[n - 1].strip() if 0 < n <= len(cur) else None
        hits = [i for i, t in enumerate(orig, 1) if text and t.strip() == text]
        return found.group(1) + str(min(hits, key=lambda i: abs(i - n))) if hits else found.group(0)
    return re.sub(r"\b(line )(\d+)\b", one, reason)
