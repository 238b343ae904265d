"""Emit: write mended files atomically, place them for the executor, seal certificates."""
from __future__ import annotations

from pathlib import Path

import torch

from mend import files
from mend.errors import MendError
from mend.pipeline.records import FixResult, Rewrite
from verifier.certs import sha256_text

CERT_SCHEMA_VERSION = "0.4"


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` atomically (:func:`mend.files.write_atomic`).
    Raises MendError when the file or its folder is not writable."""
    if files.read_only(path):
        raise MendError(f"{path}: file is read-only; nothing was written (use the diff, or --out DIR)")
    try:
        files.write_atomic(path, text)
    except OSError as exc:
        raise MendError(f"{path}: cannot write ({exc.strerror}); nothing was changed") from exc


def certificate(res: FixResult, rw: Rewrite, paths: dict | None = None) -> dict:
    """Certificate (schema mend/schemas/certificate.schema.json): the rule, site, diff,
    which executor verified it, hashes of the original and mended file and where they are
    (``paths``, relative to the certificate's folder), each obligation with its outcome
    (proved/refuted/unknown/checked), SMT-LIB query or check, solver and assumptions, the
    differential evidence, sealed with a digest (verifier/certs.py; re-checked by
    ``mend cert verify``). A rewrite the cost model chose carries its ``choice``
    (:func:`mend.cost.choose`'s record): recorded under the digest, not proved -- which
    candidate is faster is a prediction, never part of what the certificate establishes."""
    import hypothesis
    import z3

    from mend import __version__
    from verifier.certs import seal

    ver = rw.verification or {"level": "fast", "use": "training and inference"}
    obligations = [{"result": "unknown", "smtlib": None, "solver": f"z3 {z3.get_full_version()}", "assumptions": [],
                    **o} for o in rw.obligations]
    doc = {"schema_version": CERT_SCHEMA_VERSION, "rule": rw.rule, "target": res.target,
           "executor": res.executor, "file": rw.file, "site": rw.site, "span": rw.span, "diff": rw.diff,
           "sha256_original": sha256_text(res.originals[rw.file]), "sha256_mended": sha256_text(res.files[rw.file]),
           "paths": {"mended": None, "original": None, "original_module": None, **(paths or {})},
           "obligations": obligations, "verification": ver, "evidence": rw.evidence, "safety": rw.safety,
           "versions": {"torch": torch.__version__, "mend": __version__, "z3": z3.get_version_string(),
                        "hypothesis": hypothesis.__version__},
           "breaks": {"before": res.before.graph_break_count, "after": res.after.graph_break_count}}
    if rw.choice is not None:
        doc["choice"] = rw.choice
    return seal(doc)


def emit(res: FixResult, *, write: bool, out_dir: str | None) -> list[str]:
    """Write what ``--write``/``--out`` ask for: each mended file (the user's own files in
    place with ``--write``; installed packages' files never, they go to ``DIR/<package
    path>``) and a certificate per rewrite under ``DIR/certificates/``. Returns the paths
    written. Raises MendError for a read-only file (nothing of that file is written)."""
    from verifier.certs import dumps, relpath_from

    written: list[str] = []
    if not (write or out_dir):
        return written
    dest = Path(out_dir or "mended")
    placed = {}  # file -> (mended path, original path or None, original module or None)
    for rel, code in res.files.items():
        own = res.in_place(rel) if write else None
        if own is not None:  # the user's file or module, replaced in place
            write_atomic(own, code)
            written.append(str(own))
            placed[rel] = (own, None, None)
            continue
        path = res.out_path(rel, dest)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, code)
        written.append(str(path))
        placed[rel] = (path, res.sources.get(rel) if res.executor == "in-process" else None, res.module_of(rel))
    if res.rewrites:
        cert_dir = dest / "certificates"
        cert_dir.mkdir(parents=True, exist_ok=True)
        for i, rw in enumerate(res.rewrites, 1):
            cert = cert_dir / f"{Path(rw.file).stem}.{i}.{rw.rule}.json"
            mended, orig, module = placed.get(rw.file, (None, None, None))
            paths = {"mended": relpath_from(cert, mended) if mended else None,
                     "original": relpath_from(cert, orig) if orig else None, "original_module": module}
            write_atomic(cert, dumps(certificate(res, rw, paths)))
            written.append(str(cert))
    return written
