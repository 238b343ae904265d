"""Certificates: seal them when written, re-check them without trusting the run that made them.

``mend cert verify CERT...`` (:func:`verify_file`) checks, for each certificate:

1. it is the JSON text mend wrote (``json.dumps(cert, indent=2)``; any edited byte that
   keeps valid JSON changes that text or the content) and matches the schema
   (``mend/schemas/certificate.schema.json``, version 0.2);
2. its content hashes to its ``digest`` (sha256 of the canonical JSON without the digest);
3. the files it names still hash to ``sha256_mended`` / ``sha256_original``;
4. every obligation's SMT-LIB query replays with the installed z3 to the recorded answer
   (``unsat`` for proved, ``sat`` for refuted), and re-encoding the obligation from the
   certificate's own data (its facts and the obligation's fields, with
   :mod:`verifier.obligations`) gives the same query up to the names of ``let`` bindings:
   a query that was edited, or swapped for an easier one, fails;
5. with ``rerun=True``, the differential test is replayed from the recorded seed and number
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

SCHEMA_VERSION = "0.2"


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


_LET = re.compile(r"[?$]x\d+")


def normalize_smt(text: str) -> str:
    """SMT-LIB text with z3's let-binding names (``?x123``, ``$x45``) renamed in order of
    first appearance: they come from z3's internal term ids, which depend on what else the
    process built."""
    names: dict[str, str] = {}

    def sub(m):
        return names.setdefault(m.group(0), f"{m.group(0)[0]}v{len(names) + 1}")
    return _LET.sub(sub, text)


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


def verify_file(path: str | Path, *, rerun: bool = False, timeout_ms: int | None = None) -> Report:
    """Check one certificate; raises CertError when it cannot be read."""
    from mend.report import schema

    path = Path(path)
    raw, doc = load(path)
    rep = Report(str(path))
    if doc.get("schema_version") != SCHEMA_VERSION:
        rep.problems.append(f"schema_version is {doc.get('schema_version')!r}, `mend cert verify` checks "
                            f"version {SCHEMA_VERSION} (certificates from --verify fast/standard/strict)")
        return rep
    import jsonschema

    try:
        jsonschema.validate(doc, schema("certificate"))
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        rep.problems.append(f"does not match the certificate schema at {where}: {exc.message[:160]}")
        return rep
    if raw != dumps(doc):
        rep.problems.append("the certificate's text is not as mend wrote it (edited by hand or by a tool)")
    if doc.get("digest") != digest(doc):
        rep.problems.append("the certificate's content does not match its digest (tampered)")
    _check_files(path, doc, rep)
    _check_queries(doc, rep, timeout_ms)
    if rerun:
        _rerun(path, doc, rep)
    return rep


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
        rep.notes.append("the original file is not kept (--write replaced it): only the mended file's hash is checked")


def _check_queries(doc: dict, rep: Report, timeout_ms: int | None) -> None:
    from verifier import obligations as O

    obs = doc["obligations"]
    ver = doc.get("verification", {})
    if ver.get("level") == "strict":
        bad = [o["kind"] for o in obs if o.get("result") != "proved"]
        if bad:
            rep.problems.append(f"a strict certificate with obligations not proved: {', '.join(bad)}")
    # re-encode from the certificate's own data
    rederived = None
    if ver.get("level") in ("standard", "strict"):
        try:
            rederived = O.discharge(doc["rule"], [O.obligation_data(o) for o in obs
                                                  if o["kind"] not in O.ADDED_KINDS],
                                    facts=ver.get("facts"), defs=ver.get("defs"), code=None,
                                    timeout_ms=max(int(o.get("timeout_ms") or O.TIMEOUT_MS) for o in obs) if obs else O.TIMEOUT_MS)
        except Exception as exc:  # noqa: BLE001 - report, do not crash
            rep.problems.append(f"the obligations could not be re-encoded ({type(exc).__name__}: {exc})")
    replayed = 0
    for i, o in enumerate(obs):
        name = f"obligation {i + 1} ({o['kind']})"
        text, status, result = o.get("smtlib"), o.get("status"), o.get("result")
        if result not in O.RESULTS:
            rep.problems.append(f"{name}: result {result!r} is not proved/refuted/unknown")
            continue
        if text is None:
            if result != "unknown":
                rep.problems.append(f"{name}: result {result} without an SMT query")
            continue
        if O.result_of(status) != result:
            rep.problems.append(f"{name}: recorded result {result} does not follow from the solver's answer {status}")
        t = int(timeout_ms or max(int(o.get("timeout_ms") or O.TIMEOUT_MS), 10_000))
        try:
            got = O.replay(text, timeout_ms=t)
        except Exception as exc:  # noqa: BLE001 - z3 rejects the text
            rep.problems.append(f"{name}: the SMT query does not parse ({str(exc)[:120]})")
            continue
        replayed += 1
        if status in ("sat", "unsat") and got != status:
            rep.problems.append(f"{name}: the SMT query replays to {got}, the certificate records {status}")
        elif status == "unknown" and got != "unknown":
            rep.notes.append(f"{name}: recorded unknown (timeout), now decides {got}")
        if rederived is not None:
            match = next((r for r in rederived if O.obligation_data(r) == O.obligation_data(o)), None)
            if match is None:
                rep.problems.append(f"{name}: not among the obligations re-encoded from the certificate's data")
            elif match.get("smtlib") is None or normalize_smt(match["smtlib"]) != normalize_smt(text):
                if match.get("status") == "unknown" or status == "unknown":
                    rep.notes.append(f"{name}: re-encoding stopped at another tier (a timeout); replay only")
                else:
                    rep.problems.append(f"{name}: the SMT query is not the encoding of this obligation "
                                        "(re-encoded from the certificate's data, it differs)")
    rep.checked["queries_replayed"] = replayed
    solver = next((o.get("solver") for o in obs if o.get("solver")), None)
    if solver and solver != O.solver_version():
        rep.notes.append(f"recorded with {solver}, replayed with {O.solver_version()}")


def _rerun(path: Path, doc: dict, rep: Report) -> None:
    try:
        passed, detail = rerun_differential(path, doc)
    except Exception as exc:  # noqa: BLE001 - a failure to rerun is a failure of the check
        rep.problems.append(f"--rerun: the differential test could not run ({type(exc).__name__}: {exc})")
        return
    rep.checked["rerun"] = detail
    if not passed:
        rep.problems.append(f"--rerun: the differential test fails: {detail}")


def rerun_differential(path: Path, doc: dict) -> tuple[bool, str]:
    """Replay the differential test of the final mended file against its original, from the
    recorded seed and number of examples (natural predicates, eager and compiled)."""
    ev = doc["evidence"]
    seed, n = int(ev["hypothesis_seed"]), max(int(ev["examples"]) - 1, 1)
    target = doc.get("target") or ""
    paths = doc.get("paths") or {}
    mended = resolve(path, paths.get("mended"))
    if target.startswith("hf:"):
        import tempfile

        import torch

        from mend.fix import _compare_runs, _draw_inputs, _worker
        from mend.targets import load_target
        from verifier.differential import Mismatch

        mended = mended.resolve() if mended else None
        root = Path(str(mended)[: -len(doc["file"])]) if mended and str(mended).endswith(doc["file"]) else None
        if root is None:
            return False, "the mended file is not under its package path (DIR/<package path>)"
        t = load_target(target)
        with tempfile.TemporaryDirectory(prefix="mend-rerun-") as tmpname:
            tmp = Path(tmpname)
            inputs = _draw_inputs(t.args, t.kwargs, seed, n)
            torch.save(inputs, tmp / "inputs.pt")
            base = {"target": target, "action": "observe", "inputs": str(tmp / "inputs.pt"), "force": []}
            ref = _worker(dict(base), tmp, "ref")
            emit = _worker({**base, "overlay": str(root)}, tmp, "eager")
            comp = _worker({**base, "overlay": str(root), "compiled": True}, tmp, "compiled")
            try:
                worst = max(_compare_runs(ref, emit, exact=True), _compare_runs(ref, comp, exact=False))
            except Mismatch as exc:
                return False, str(exc)
        return True, f"{len(inputs)} inputs, seed {seed}, eager and compiled agree (max abs error {worst:.3g})"
    orig = resolve(path, paths.get("original"))
    if orig is None or not orig.is_file():
        return False, "the original file is not available (--write replaced it; use --out to keep it)"
    if sha256_file(orig) != doc["sha256_original"]:
        return False, "the original file changed"
    import torch

    from mend.fix import build_pair, factory_of, model_maker
    from verifier.differential import differential_test

    factory = factory_of(target)
    mods, models = build_pair(orig, mended, model_maker(factory))
    if factory is not None:  # the factory's example inputs (positional: fix refuses keyword inputs)
        torch.manual_seed(0)
        args, traps = tuple(getattr(mods[0], factory)()[1]), []
    else:
        args = tuple(mods[0].get_inputs())
        traps = [tuple(mods[0].get_trap_inputs())] if hasattr(mods[0], "get_trap_inputs") else []
    res = differential_test(models[0], models[1], args, extra_inputs=traps, seed=seed, max_examples=n)
    if not res.passed:
        return False, f"{res.reason} on {res.counterexample}"
    return True, f"{res.examples} inputs, seed {seed}, eager and compiled agree (max abs error {res.max_abs_error:.3g})"


def relpath_from(cert_file: Path, target: Path) -> str:
    """``target`` relative to the certificate's folder (absolute when on another drive)."""
    try:
        return os.path.relpath(Path(target).resolve(), Path(cert_file).resolve().parent)
    except ValueError:
        return str(Path(target).resolve())
