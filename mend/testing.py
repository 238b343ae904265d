"""Test helpers: fail a test on *new* graph breaks (TabPFN#1166, DeepSpeed#6601 ask for CI
that does this), with a message that lists each new site.

``assert_no_new_graph_breaks(model, *args, baseline=PATH)`` scans ``model`` (as
:func:`mend.scan_model` does) and raises ``AssertionError`` when a break site is not in the
baseline file (:mod:`mend.baseline`; ``mend scan --update-baseline`` writes one, and so does
the pytest option ``--mend-update-baseline``). The pytest plugin (:mod:`mend.pytest_plugin`,
registered through the ``pytest11`` entry point) gives the ``mend_baseline`` fixture.
"""
from __future__ import annotations

import os
from pathlib import Path

from mend.scan import ScanResult, Site

UPDATE_ENV = "MEND_UPDATE_BASELINE"  # set by the pytest option --mend-update-baseline


def new_graph_breaks(model, *args, baseline: str | os.PathLike | None = None, only_user: bool = False,
                     **kwargs) -> tuple[ScanResult, list[Site]]:
    """(scan, sites not in ``baseline``) of ``model`` called on ``args``/``kwargs``. With no
    baseline every site is new. ``only_user`` leaves out sites in installed packages.
    Raises BaselineError for a baseline file that is not a mend baseline."""
    from mend import baseline as bl
    from mend.api import scan_model

    result = scan_model(model, *args, **kwargs)
    sites = [s for s in result.sites if not (only_user and s.origin == "library")]
    if baseline is None:
        return result, sites
    path = Path(baseline)
    if os.environ.get(UPDATE_ENV):
        bl.add(path, sites)
        return result, []
    known = bl.read(path) if path.exists() else []
    return result, bl.compare(sites, known, root=path.resolve().parent).new


def assert_no_new_graph_breaks(model, *args, baseline: str | os.PathLike | None = None, only_user: bool = False,
                               **kwargs) -> ScanResult:
    """Scan ``model`` on ``args``/``kwargs`` and fail on every graph break site that is not
    in ``baseline`` (a baseline file path; None: every break fails). ``baseline`` and
    ``only_user`` are keyword-only and not passed to the model.

    Returns the scan when nothing new was found. Raises AssertionError listing each new
    site as ``file:line  function  category: reason`` with its source line; with the
    environment variable ``MEND_UPDATE_BASELINE`` set (pytest ``--mend-update-baseline``)
    the new sites are added to the baseline instead."""
    result, new = new_graph_breaks(model, *args, baseline=baseline, only_user=only_user, **kwargs)
    if new:
        where = f"not in the baseline {baseline}" if baseline is not None else "no baseline given"
        lines = [f"{len(new)} new graph break site(s) in {result.target} ({where}; "
                 f"{result.graph_count} graphs, {result.graph_break_count} breaks in all):"]
        for s in new:
            lines.append(f"  {s.display_file}:{s.line}  {s.qualname}  {s.category}: {s.reason}")
            lines.append(f"      {s.source}")
        if baseline is not None:
            lines.append("  (accept them with pytest --mend-update-baseline, or mend scan --update-baseline)")
        raise AssertionError("\n".join(lines))
    return result
