"""The typed result of one proof obligation: four outcomes, each saying what it rests on.

* ``proved``: an SMT query that encodes the claim over its variables is ``unsat``
  (``status`` "unsat", ``smtlib`` the query);
* ``refuted``: ``sat``, the model is a counterexample (``status`` "sat"); or a check that
  found one (``checked_by`` says which check, ``counterexample`` what it found; no query);
* ``unknown``: the solver timed out, the obligation is outside what is encoded, or the
  check could not decide (``reason`` says which);
* ``checked``: established by a static screen, the effect analysis or an observation,
  not by a solver (``checked_by`` says what checked it). When it rests on a
  site-independent lemma about a runtime, the lemma is proved once under ``proofs/`` and
  cited in ``lemmas`` (with its sha256 in ``lemma_sha256``), never re-solved per site.

No query whose answer is fixed before solving is recorded as a proof: an encoder whose
negated claim simplifies to ``False`` in Python reports ``checked`` (:func:`verifier.smt.fixed_false`).
:class:`Outcome` validates itself where it is built, so a result with an outcome it does
not support fails there.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

OUTCOMES = ("proved", "refuted", "unknown", "checked")
PROOFS = Path(__file__).resolve().parents[1] / "proofs"


class BadOutcome(ValueError):
    """An obligation result that does not say what its outcome rests on."""


@lru_cache(maxsize=None)
def lemma_sha256(lemma: str) -> str:
    """sha256 of ``proofs/NAME.smt2`` (``lemma`` is the path relative to the repository)."""
    return hashlib.sha256(lemma_path(lemma).read_bytes()).hexdigest()


def lemma_path(lemma: str) -> Path:
    if not (lemma.startswith("proofs/") and lemma.endswith(".smt2")) or "/" in lemma[len("proofs/"):]:
        raise BadOutcome(f"a lemma is cited as proofs/NAME.smt2, not {lemma!r}")
    return PROOFS / lemma[len("proofs/"):]


@dataclass(frozen=True)
class Outcome:
    result: str
    status: str | None = None          # z3's answer to the negated claim
    smtlib: str | None = None
    assumptions: tuple[str, ...] = ()
    tier: str | None = None
    arithmetic: str | None = None
    seconds: float = 0.0
    counterexample: str | None = None
    reason: str | None = None
    checked_by: str | None = None
    lemmas: tuple[str, ...] = ()
    use: str | None = None
    extra: dict = field(default_factory=dict, compare=False)   # more result fields (kept in to_json)

    def __post_init__(self):
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        object.__setattr__(self, "lemmas", tuple(self.lemmas))
        r = self.result
        if r not in OUTCOMES:
            raise BadOutcome(f"outcome {r!r} is not one of {', '.join(OUTCOMES)}")
        solver = self.smtlib is not None or self.status is not None
        if r == "proved" and not (self.status == "unsat" and self.smtlib and self.checked_by is None):
            raise BadOutcome("proved needs an unsat SMT query (a check is `checked`)")
        if r == "refuted" and not ((self.status == "sat" and self.smtlib and self.checked_by is None)
                                   or (self.checked_by and not solver and self.counterexample)):
            raise BadOutcome("refuted needs a sat SMT query, or a check with the counterexample it found")
        if r == "checked" and not (self.checked_by and not solver):
            raise BadOutcome("checked needs `checked_by` and no SMT query")
        if r == "unknown" and not self.reason:
            raise BadOutcome("unknown needs a reason")
        if self.status not in (None, "unsat", "sat", "unknown"):
            raise BadOutcome(f"solver status {self.status!r}")
        if self.lemmas and r != "checked":
            raise BadOutcome("only a checked outcome cites lemmas")
        for lemma in self.lemmas:
            if not lemma_path(lemma).is_file():
                raise BadOutcome(f"cited lemma {lemma} is not in proofs/")

    @property
    def established(self) -> bool:
        return self.result in ("proved", "checked")

    def with_(self, **changes) -> "Outcome":
        return replace(self, **changes)

    def to_json(self) -> dict:
        out = {"result": self.result, "status": self.status, "smtlib": self.smtlib,
               "assumptions": list(self.assumptions), "tier": self.tier, "arithmetic": self.arithmetic,
               "seconds": self.seconds, "counterexample": self.counterexample, "reason": self.reason}
        if self.checked_by is not None:
            out["checked_by"] = self.checked_by
        if self.lemmas:
            out["lemmas"] = list(self.lemmas)
            out["lemma_sha256"] = {lemma: lemma_sha256(lemma) for lemma in self.lemmas}
        if self.use is not None:
            out["use"] = self.use
        out.update(self.extra)
        return out


def unknown(reason: str, **kw) -> Outcome:
    return Outcome("unknown", reason=reason, **kw)


def checked(by: str, assumptions=(), lemmas=(), **kw) -> Outcome:
    """Established by ``by`` (a screen, the effect analysis, an observation), not a solver."""
    return Outcome("checked", checked_by=by, assumptions=tuple(assumptions), lemmas=tuple(lemmas), **kw)


def check_refuted(by: str, counterexample: str, assumptions=(), **kw) -> Outcome:
    """The check ``by`` found the claim false: ``counterexample`` says how."""
    return Outcome("refuted", checked_by=by, counterexample=counterexample, assumptions=tuple(assumptions), **kw)


def from_json(d: dict) -> Outcome:
    """An Outcome from a recorded result (a certificate's obligation): validates it."""
    return Outcome(result=d.get("result"), status=d.get("status"), smtlib=d.get("smtlib"),
                   assumptions=tuple(d.get("assumptions") or ()), tier=d.get("tier"), arithmetic=d.get("arithmetic"),
                   seconds=d.get("seconds") or 0.0, counterexample=d.get("counterexample"), reason=d.get("reason"),
                   checked_by=d.get("checked_by"), lemmas=tuple(d.get("lemmas") or ()), use=d.get("use"))
