"""Certificates: seal them when written, re-check them without trusting the run that made them.

``mend cert verify CERT...`` (:func:`verify_file`) checks, for each certificate:

1. it is the JSON text mend wrote (``json.dumps(cert, indent=2)``; any edited byte that
   keeps valid JSON changes that text or the content) and matches the schema
   (``mend/schemas/certificate.schema.json``, version 0.4, read by path);
2. its content hashes to its ``digest`` (sha256 of the canonical JSON without the digest);
3. the files it names still hash to ``sha256_mended`` / ``sha256_original``;
4. every obligation is re-checked by its outcome kind (:func:`_check_queries`): a solver
   outcome's SMT-LIB query replays with the installed z3 to the recorded answer (``unsat``
   for proved, ``sat`` for refuted), and re-encoding the obligation from the certificate's
   own data (its facts and the obligation's fields, with :mod:`verifier.obligations`) gives
   the same query up to the names of ``let`` bindings: a query that was edited, or swapped
   for an easier one, fails; a ``checked`` outcome (or one refuted by a check) is re-run from
   the same data and must give the same outcome; each cited lemma must be the file in
   ``proofs/`` with the recorded sha256 and replay to the answer its header states;
5. a recorded ``choice`` (which verified candidate the cost model emitted) is covered by
   the digest but not checked: it is a prediction, never a proof (a note says so);
6. with ``rerun=True``, the differential test is replayed from the recorded seed and number
   of examples (original against mended file; hf: targets out of process with the overlay).

A problem makes the certificate fail (exit 1); an unreadable certificate is an error (exit 2).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from verifier.smt import normalize_smt

SCHEMA_VERSION = "0.4"
SCHEMA = Path(__file__).resolve().parents[1] / "mend" / "schemas" / "certificate.schema.json"


class CertError(Exception):
    """The certificate cannot be read at all (missing file, not JSON)."""


def canonical(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "digest"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(doc: dict) -> str:
    return hashlib.sha256(canonical(doc).encode("utf-8")).hexdigest()


def seal(doc: dict) -> dict:
    """``doc`` with its ``digest`` (last key)."""
    out = {k: v for k, v in doc.items() if k != "digest"}
    out["digest"] = digest(out)
    return out


def dumps(doc: dict) -> str:
    """The exact text mend writes for a certificate."""
    return json.dumps(doc, indent=2) + "\n"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Report:
    path: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def load(path: Path) -> tuple[str, dict]:
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CertError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CertError(f"{path}: not a JSON certificate (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(doc, dict):
        raise CertError(f"{path}: not a JSON certificate (top level is not an object)")
    return raw, doc


def resolve(cert_path: Path, recorded: str | None) -> Path | None:
    if not recorded:
        return None
    p = Path(recorded)
    return p if p.is_absolute() else (cert_path.parent / p)


def _installed_origin(module: str) -> Path | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec and spec.origin else None


def verify_file(path: str | Path, *, rerun=None, timeout_ms: int | None = None) -> Report:
    """Check one certificate; raises CertError when it cannot be read.

    ``rerun``: None, or ``rerun(cert_path, doc) -> (passed, detail)`` replaying the
    differential test with the executor the certificate names (``doc["executor"]``). The
    caller supplies it (``mend cert verify --rerun`` passes mend's), so the verifier builds
    no target itself."""
    path = Path(path)
    raw, doc = load(path)
    rep = Report(str(path))
    if doc.get("schema_version") != SCHEMA_VERSION:
        rep.problems.append(f"schema_version is {doc.get('schema_version')!r}, `mend cert verify` checks "
                            f"version {SCHEMA_VERSION} (certificates from --verify fast/standard/strict)")
        return rep
    import jsonschema

    try:
        jsonschema.validate(doc, json.loads(SCHEMA.read_text(encoding="utf-8")))
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        rep.problems.append(f"does not match the certificate schema at {where}: {exc.message[:160]}")
        return rep
    if raw != dumps(doc):
        rep.problems.append("the certificate's text is not as mend wrote it (edited by hand or by a tool)")
    if doc.get("digest") != digest(doc):
        rep.problems.append("the certificate's content does not match its digest (tampered)")
    _check_files(path, doc, rep)
    _check_queries(doc, rep, timeout_ms, code=mended_code(path, doc), before=original_code(path, doc))
    _check_safety(doc, rep)
    choice = doc.get("choice")
    if choice:  # a cost prediction: recorded under the digest, never part of what is proved
        # helper-89: "always" is also what a site with nothing to compare gets, without --choose
        why = choice.get("reason") or "the rule's own form"
        how = (f"no cost predicted ({why})"
               if choice.get("method") == "always" else "which verified candidate is faster is a prediction, not a proof")
        rep.notes.append(f"the choice of {choice.get('chosen')} (by {choice.get('method')}) is recorded, not checked: "
                         + how)
    if rerun is not None:
        _rerun(path, doc, rep, rerun)
    return rep


def _check_safety(doc: dict, rep: Report) -> None:
    """The recorded fix safety is what the recorded obligations and evidence give
    (:func:`verifier.levels.fix_safety`): a certificate cannot call an unsafe fix safe."""
    from verifier.levels import fix_safety

    got = fix_safety(doc["obligations"], doc.get("evidence"), (doc.get("verification") or {}).get("use",
                                                                                       "training and inference"))
    rep.checked["safety"] = got["label"]
    if got["label"] != doc["safety"]["label"]:
        rep.problems.append(f"the certificate labels the fix {doc['safety']['label']!r}, its obligations and evidence "
                            f"make it {got['label']!r}" + (f" ({'; '.join(got['reasons'][:2])})" if got["reasons"] else ""))


def mended_code(path: Path, doc: dict) -> str | None:
    """The mended file's text when it is there and hashes to the recorded value (the checks
    that read the mended file re-read it), else None."""
    mended = resolve(path, (doc.get("paths") or {}).get("mended"))
    if mended is None or not mended.is_file() or sha256_file(mended) != doc.get("sha256_mended"):
        return None
    return mended.read_text(encoding="utf-8")


def original_code(path: Path, doc: dict) -> str | None:
    """The original file's text (a kept copy, or the installed module) when it hashes to the
    recorded value (a check comparing the two versions re-reads it), else None."""
    paths = doc.get("paths") or {}
    orig = resolve(path, paths.get("original")) if paths.get("original") else None
    if orig is None and paths.get("original_module"):
        orig = _installed_origin(paths["original_module"])
    if orig is not None and orig.is_file() and sha256_file(orig) == doc.get("sha256_original"):
        return orig.read_text(encoding="utf-8")
    # written in place (--write): the original is gone, but the certificate's diff, applied
    # backwards to the mended file, gives it back when the file holds this one rewrite; the
    # recorded hash decides (helper-42)
    mended = mended_code(path, doc)
    before = unpatch(mended, doc.get("diff") or "") if mended is not None else None
    if before is not None and sha256_text(before) == doc.get("sha256_original"):
        return before
    return None


def unpatch(after: str, diff: str) -> str | None:
    """``after`` with the unified ``diff`` (before -> after) undone, or None when a hunk's
    new side does not match ``after`` where the hunk says. The caller compares the result's
    hash with the recorded one, so a wrong reconstruction is never used."""
    lines, out, at = after.splitlines(keepends=True), [], 0
    hunks = re.split(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@.*\n", diff, flags=re.M)
    for start, body in zip(hunks[1::2], hunks[2::2]):
        new_side = [ln[1:] for ln in body.splitlines(keepends=True) if ln[:1] in (" ", "+")]
        old_side = [ln[1:] for ln in body.splitlines(keepends=True) if ln[:1] in (" ", "-")]
        begin = max(int(start) - 1, 0) if new_side else int(start)
        if begin < at or [ln.rstrip("\n") for ln in lines[begin:begin + len(new_side)]] != \
                [ln.rstrip("\n") for ln in new_side]:
            return None
        out += lines[at:begin] + [ln if ln.endswith("\n") else ln + "\n" for ln in old_side]
        at = begin + len(new_side)
    return "".join(out + lines[at:]) if len(hunks) > 1 else None


def _check_hash(rep: Report, role: str, path: Path, recorded: str, problem: str) -> None:
    """Record ``path`` as the checked ``role`` file; a problem when its sha256 is not ``recorded``."""
    got = sha256_file(path)
    rep.checked[role] = str(path)
    if got != recorded:
        rep.problems.append(f"the {role} file {path} {problem} (sha256 {got[:12]}..., recorded {recorded[:12]}...)")


def _check_files(path: Path, doc: dict, rep: Report) -> None:
    paths = doc.get("paths") or {}
    mended = resolve(path, paths.get("mended"))
    if mended is None:
        rep.problems.append("the certificate names no mended file (written without --write/--out)")
    elif not mended.is_file():
        rep.problems.append(f"the mended file {mended} is missing")
    else:
        _check_hash(rep, "mended", mended, doc["sha256_mended"], "changed since the certificate was issued")
    orig = resolve(path, paths.get("original")) if paths.get("original") else None
    if orig is None and paths.get("original_module"):
        orig = _installed_origin(paths["original_module"])
        if orig is None:
            rep.problems.append(f"the original module {paths['original_module']} is not installed")
    if orig is not None:
        if not orig.is_file():
            rep.problems.append(f"the original file {orig} is missing")
        else:
            _check_hash(rep, "original", orig, doc["sha256_original"],
                        "differs from the one the rewrite was verified against")
    elif not paths.get("original_module"):
        mended = mended_code(path, doc)
        rebuilt = unpatch(mended, doc.get("diff") or "") if mended is not None else None
        if rebuilt is not None and sha256_text(rebuilt) == doc.get("sha256_original"):
            rep.notes.append("the original file is not kept (--write replaced it): it was rebuilt by undoing the "
                             "certificate's diff on the mended file, and its hash matches the recorded one")
        else:   # helper-89: the note said only this, also where the rebuild succeeded
            rep.notes.append("the original file is not kept (--write replaced it), and undoing the certificate's diff "
                             "does not give it back (another rewrite of the same file came after this one): only the "
                             "mended file's hash is checked")


def _check_queries(doc: dict, rep: Report, timeout_ms: int | None, code: str | None = None,
                   before: str | None = None) -> None:
    """Re-check each obligation by its outcome kind (:mod:`verifier.outcomes`): the recorded
    result is a well-formed outcome; a solver outcome (proved / refuted with a query)
    replays with z3 to its recorded answer and is the encoding of its obligation; a check
    (checked, or refuted by a check) gives the same outcome when re-run from the
    certificate's own data (facts, the obligation's fields, the mended file ``code``, the
    original ``before``); every
    cited lemma is the file in proofs/ with the recorded sha256 and replays to its stated
    answer."""
    from verifier import obligations as O
    from verifier.outcomes import BadOutcome, from_json

    obs = doc["obligations"]
    ver = doc.get("verification", {})
    if ver.get("level") == "strict":
        bad = [o["kind"] for o in obs if o.get("result") not in ("proved", "checked")]
        if bad:
            rep.problems.append(f"a strict certificate with obligations neither proved nor checked: {', '.join(bad)}")
        listed = sorted(c.get("kind") for c in ver.get("checked") or [])
        if listed != sorted(o["kind"] for o in obs if o.get("result") == "checked"):
            rep.problems.append("the verification record's `checked` list is not the obligations recorded checked")
    # re-encode from the certificate's own data
    rederived = None
    try:
        rederived = O.discharge([O.obligation_data(o) for o in obs], facts=ver.get("facts"), defs=ver.get("defs"),
                                code=code, before=before, timeout_ms=max(int(o.get("timeout_ms") or O.TIMEOUT_MS) for o in obs)
                                if obs else O.TIMEOUT_MS)
    except Exception as exc:  # noqa: BLE001 - report, do not crash
        rep.problems.append(f"the obligations could not be re-encoded ({type(exc).__name__}: {exc})")
    replayed = rechecked = 0
    lemmas: dict[str, str | None] = {}
    for i, o in enumerate(obs):
        name = f"obligation {i + 1} ({o['kind']})"
        try:
            outcome = from_json(o)
        except BadOutcome as exc:
            rep.problems.append(f"{name}: the recorded result is not a well-formed outcome ({exc})")
            continue
        match = rederived[i] if rederived is not None and i < len(rederived) else None
        if match is not None and any(match.get(k) != v for k, v in O.obligation_data(o).items()):
            match = None
        if rederived is not None and match is None:
            rep.problems.append(f"{name}: not among the obligations re-encoded from the certificate's data")
        for lemma in outcome.lemmas:
            lemmas.setdefault(lemma, (o.get("lemma_sha256") or {}).get(lemma))
            if (o.get("lemma_sha256") or {}).get(lemma) != lemmas[lemma]:
                rep.problems.append(f"{name}: lemma {lemma} is recorded with two different hashes")
        if outcome.smtlib is None:
            if outcome.checked_by is not None and match is not None:
                rechecked += 1
                if match.get("result") != outcome.result:
                    rep.problems.append(f"{name}: recorded {outcome.result} by a check ({outcome.checked_by[:80]}), "
                                        f"re-run from the certificate's data it is {match.get('result')}"
                                        + (f" ({match.get('reason')})" if match.get("reason") else ""))
                elif match.get("checked_by") != outcome.checked_by:
                    rep.notes.append(f"{name}: re-checked here by {str(match.get('checked_by'))[:160]}")
            continue
        status = outcome.status
        if O.result_of(status) != outcome.result and not (outcome.result == "unknown" and status == "sat"):
            rep.problems.append(f"{name}: recorded result {outcome.result} does not follow from the solver's answer "
                                f"{status}")
        t = int(timeout_ms or max(int(o.get("timeout_ms") or O.TIMEOUT_MS), 10_000))
        try:
            got = O.replay(outcome.smtlib, timeout_ms=t)
        except Exception as exc:  # noqa: BLE001 - z3 rejects the text
            rep.problems.append(f"{name}: the SMT query does not parse ({str(exc)[:120]})")
            continue
        replayed += 1
        if status in ("sat", "unsat") and got != status:
            rep.problems.append(f"{name}: the SMT query replays to {got}, the certificate records {status}")
        elif status == "unknown" and got != "unknown":
            rep.notes.append(f"{name}: recorded unknown (timeout), now decides {got}")
        if match is not None:
            if match.get("smtlib") is None or normalize_smt(match["smtlib"]) != normalize_smt(outcome.smtlib):
                if match.get("status") == "unknown" or status == "unknown":
                    rep.notes.append(f"{name}: re-encoding stopped at another tier (a timeout); replay only")
                else:
                    rep.problems.append(f"{name}: the SMT query is not the encoding of this obligation "
                                        "(re-encoded from the certificate's data, it differs)")
    for lemma, recorded in sorted(lemmas.items()):
        problem = check_lemma(lemma, recorded)
        if problem:
            rep.problems.append(problem)
    rep.checked["queries_replayed"] = replayed
    rep.checked["checks_rerun"] = rechecked
    rep.checked["lemmas_replayed"] = len(lemmas)
    solver = next((o.get("solver") for o in obs if o.get("solver")), None)
    if solver and solver != O.solver_version():
        rep.notes.append(f"recorded with {solver}, replayed with {O.solver_version()}")


_LEMMAS_SEEN: dict[tuple[str, str], str | None] = {}


def check_lemma(lemma: str, recorded_sha256: str | None) -> str | None:
    """None when the cited ``lemma`` (``proofs/NAME.smt2``) is the file in proofs/ with the
    recorded sha256 and replays with z3 to the answer its header states; else the problem."""
    from verifier.outcomes import BadOutcome, lemma_path

    try:
        path = lemma_path(lemma)
    except BadOutcome as exc:
        return f"cited lemma {lemma!r}: {exc}"
    if not path.is_file():
        return f"cited lemma {lemma} is not in proofs/"
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    if recorded_sha256 != got:
        return (f"cited lemma {lemma} has sha256 {got[:12]}..., the certificate records "
                f"{(recorded_sha256 or 'none')[:12]}...")
    key = (lemma, got)
    if key not in _LEMMAS_SEEN:
        import z3

        text = path.read_text(encoding="utf-8")
        m = re.search(r"^; expect: (sat|unsat)\s*$", text, re.M)
        solver = z3.Solver()
        solver.set("timeout", 30_000)
        try:
            solver.from_string(text)
            answer = str(solver.check())
        except z3.Z3Exception as exc:
            answer = f"an error ({exc})"
        _LEMMAS_SEEN[key] = None if m and answer == m.group(1) else (
            f"cited lemma {lemma} replays to {answer}, its header expects {m.group(1) if m else 'nothing'}")
    return _LEMMAS_SEEN[key]


def _rerun(path: Path, doc: dict, rep: Report, rerun) -> None:
    try:
        passed, detail = rerun(path, doc)
    except Exception as exc:  # noqa: BLE001 - a failure to rerun is a failure of the check
        rep.problems.append(f"--rerun: the differential test could not run ({type(exc).__name__}: {exc})")
        return
    rep.checked["rerun"] = detail
    if not passed:
        rep.problems.append(f"--rerun: the differential test fails: {detail}")


def relpath_from(cert_file: Path, target: Path) -> str:
    """``target`` relative to the certificate's folder (absolute when on another drive)."""
    try:
        return os.path.relpath(Path(target).resolve(), Path(cert_file).resolve().parent)
    except ValueError:
        return str(Path(target).resolve())
