"""Baselines: adopt ``mend`` on a codebase that already has graph breaks, and fail CI only
on new ones (the way mypy and ruff are adopted: ruff's ``--add-noqa``, mypy baselines).

A baseline is a JSON file (``mend/schemas/baseline.schema.json``) with one entry per
break site. An entry is keyed on the site's file (as displayed: relative to site-packages
or the project), its function and a hash of its normalised statement
(:func:`mend.scan.statement_hash`), never on the line number, so edits elsewhere in the
file keep it valid. Two identical statements in one function are two entries with the
same key: the key counts.
"""
from __future__ import annotations

import json
import os
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable

from mend import __version__
from mend.errors import MendError
from mend.files import read_only, write_atomic
from mend.detect import display_path
from mend.scan import ScanResult, Site, library_package

SCHEMA = "mend-baseline/1"


class BaselineError(MendError):
    """A baseline file that cannot be read, is not a mend baseline or cannot be written."""


def key_file(site: Site, root: Path | None) -> str:
    """A site's file as a baseline names it (:func:`path_key`)."""
    return path_key(site.file, root)


def path_key(file: str, root: Path | None) -> str:
    """A file as a baseline names it, the same from any working directory: an installed
    package's relative to site-packages (``transformers/...``), the standard library's as
    ``<python>/...``, the user's relative to ``root`` (the baseline's folder; ``../src/m.py``
    when it lies elsewhere)."""
    package = library_package(file)
    if package == "python":
        return "<python>/" + Path(os.path.relpath(file, sysconfig.get_paths()["stdlib"])).as_posix()
    if package is not None or root is None:
        return Path(display_path(file)).as_posix()
    return Path(os.path.relpath(file, root)).as_posix()


def key(site: Site, root: Path | None = None) -> tuple[str, str, str]:
    """(file, function, statement hash) of a site: what a baseline entry matches on."""
    return (key_file(site, root), site.qualname, site.statement_hash)


def unique_sites(results: list[ScanResult]) -> list[Site]:
    """The sites of several scans, each source site once (a library line broken by two
    targets is one site), in first-seen order."""
    seen: dict[tuple[str, int], Site] = {}
    for r in results:
        for s in r.sites:
            seen.setdefault((s.file, s.line), s)
    return list(seen.values())


def share_marks(results: list[ScanResult]) -> None:
    """Copy ``baselined``/``excluded`` from the first Site object of each source site (the
    one :func:`unique_sites` kept) to the same site in the other targets' scans."""
    first: dict[tuple[str, int], Site] = {}
    for r in results:
        for s in r.sites:
            kept = first.setdefault((s.file, s.line), s)
            if kept is not s:
                s.baselined, s.excluded = kept.baselined, kept.excluded


def entries(sites: list[Site], root: Path | None = None) -> list[dict]:
    """Baseline entries of ``sites``: the key, and for the reader the line, category and
    source at the time of writing (not matched on)."""
    return [{"file": key_file(s, root), "function": s.qualname, "statement_hash": s.statement_hash,
             "line": s.line, "category": s.category, "source": s.source, "origin": s.origin} for s in sites]


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(resources.files("mend.schemas").joinpath("baseline.schema.json").read_text())


def read(path: Path) -> list[dict]:
    """The entries of the baseline at ``path``.

    Raises BaselineError when the file is missing, is not JSON or is not a mend baseline
    (schema ``mend/schemas/baseline.schema.json``)."""
    import jsonschema

    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise BaselineError(f"{path}: no such baseline (write one with --update-baseline)") from exc
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: cannot be read as a baseline: {exc}") from exc
    try:
        jsonschema.validate(doc, _schema())
    except jsonschema.ValidationError as exc:
        raise BaselineError(f"{path}: not a mend baseline: {exc.message}") from exc
    return doc["entries"]


def write(path: Path, sites: list[Site], keep: list[dict] = ()) -> None:
    """Write the baseline of ``sites`` (after the entries ``keep``) to ``path`` atomically (a
    temporary file in the same folder, then ``os.replace``). Raises BaselineError when the
    folder or the file is not writable."""
    path = Path(path)
    doc = {"schema": SCHEMA, "mend_version": __version__,
           "entries": list(keep) + sorted(entries(sites, path.resolve().parent),
                                          key=lambda e: (e["file"], e["line"], e["function"]))}
    check_writable(path)
    try:
        write_atomic(path, json.dumps(doc, indent=2) + "\n")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write the baseline there: {exc.strerror or exc}") from exc


def check_writable(path: Path) -> None:
    """Raise BaselineError when ``path`` could not be written (a missing or read-only
    folder, a read-only file), before any work is done."""
    path = Path(path)
    folder = path.resolve().parent
    if not folder.is_dir():
        raise BaselineError(f"{path}: the folder {folder} does not exist; nothing was written")
    if not os.access(folder, os.W_OK):
        raise BaselineError(f"{path}: the folder {folder} is not writable; nothing was written")
    if read_only(path):
        raise BaselineError(f"{path}: the baseline is read-only; nothing was written")


@dataclass
class Comparison:
    """A scan against a baseline: ``new`` sites are not in it; ``removable`` entries match
    no site any more (the break was fixed: the entry can go)."""

    new: list[Site]
    known: list[Site]
    removable: list[dict]


def compare(sites: list[Site], baseline: list[dict], root: Path | None = None,
            scope: Callable[[dict], bool] | None = None) -> Comparison:
    """Match ``sites`` against baseline entries by :func:`key` (files relative to ``root``,
    the baseline's folder), counting duplicates; among sites of one key, the entries go to
    the sites nearest their recorded lines, so a new copy of a known statement is the one
    reported. Marks each site's ``baselined``. An unmatched entry is ``removable`` only when
    ``scope(entry)`` says this scan could have seen it (default: every entry)."""
    by_key: dict[tuple, list[dict]] = {}
    for e in baseline:
        by_key.setdefault((e["file"], e["function"], e["statement_hash"]), []).append(e)
    groups: dict[tuple, list[Site]] = {}
    for s in sites:
        groups.setdefault(key(s, root), []).append(s)
    matched: set[int] = set()
    used: set[int] = set()
    for k, group in groups.items():
        for e in by_key.get(k, []):
            free = [s for s in group if id(s) not in matched]
            if not free:
                break
            best = min(free, key=lambda s: abs(s.line - int(e.get("line") or 0)))
            matched.add(id(best))
            used.add(id(e))
    new, known = [], []
    for s in sites:
        s.baselined = id(s) in matched
        (known if s.baselined else new).append(s)
    removable = [e for e in baseline if id(e) not in used and (scope is None or scope(e))]
    return Comparison(new, known, removable)


def add(path: Path, sites: list[Site]) -> list[Site]:
    """Add to the baseline at ``path`` (created if missing) the sites it does not hold yet,
    keeping its entries: several tests (pytest-xdist workers too) can share one baseline;
    an exclusive lock on ``PATH.lock`` serialises them. Returns the sites added."""
    import fcntl

    path = Path(path)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = read(path) if path.exists() else []
        new = compare(sites, known, root=path.resolve().parent).new
        if new or not path.exists():
            write(path, new, keep=known)
    return new
