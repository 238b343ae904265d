"""Output formats for scan results: a rich table, versioned JSON, SARIF 2.1.0."""
from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mend import __version__
from mend.detect import site_packages_root
from mend.scan import SCHEMA_VERSION as SCAN_SCHEMA_VERSION
from mend.scan import ScanResult
from mend.taxonomy import CATEGORIES


@lru_cache(maxsize=None)
def schema(name: str) -> dict:
    """A JSON schema shipped in mend/schemas (``scan``, ``fix``)."""
    return json.loads(resources.files("mend.schemas").joinpath(f"{name}.schema.json").read_text())


def validate(doc: dict, name: str) -> None:
    """Validate ``doc`` against a shipped schema; raises jsonschema.ValidationError."""
    import jsonschema

    jsonschema.validate(doc, schema(name))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def scan_table(result: ScanResult, console: Console) -> None:
    """Print a scan as a table: file:line, source, category, verdict."""
    fixable = sum(s.count for s in result.fixable)
    console.print(f"[bold]{result.target}[/]: {_plural(result.graph_count, 'graph')}, "
                  f"{_plural(result.graph_break_count, 'graph break')} ({fixable} fixable) "
                  f"at {_plural(len(result.sites), 'site')}"
                  + (f"; torch._dynamo.explain would report {result.explain_break_count}"
                     if result.explain_break_count != result.graph_break_count else "")
                  + (f"; a second call runs {_plural(result.steady_graph_count, 'graph')} (steady state)"
                     if result.steady_graph_count is not None and result.steady_graph_count != result.graph_count
                     else ""))
    if result.compiled_error:
        console.print(f"[yellow]the compiled call raised: {result.compiled_error}[/]")
    if not result.sites:
        return
    table = Table(show_lines=False)
    table.add_column("site", overflow="fold")
    table.add_column("n", justify="right")
    table.add_column("source", overflow="fold", max_width=48)
    table.add_column("category")
    table.add_column("verdict")
    table.add_column("reason", overflow="fold")
    # the user's own sites first, then each installed package's under its name
    groups: dict[str | None, list] = {}
    for s in result.sites:
        groups.setdefault(s.package, []).append(s)
    for package in sorted(groups, key=lambda p: (p is not None, p or "")):
        if package is not None:
            if len(groups) > 1 or None in groups:
                table.add_section()
            table.add_row(f"[bold]{package}[/] (installed package)", "", "", "", "", "")
        for s in groups[package]:
            verdict = f"[green]fixable: {s.fixable_by}[/]" if s.fixable_by else "[red]unfixable[/]"
            if s.frame_skipped:
                verdict += " [yellow](frame skipped)[/]"
            if s.excluded:
                verdict += " [dim](excluded)[/]"
            elif s.baselined is not None:
                verdict += " [dim](in baseline)[/]" if s.baselined else " [bold yellow](new)[/]"
            # source text and reasons are code (`h[done] = ...`), never rich markup
            table.add_row(Text(f"{s.display_file}:{s.line}"), str(s.count), Text(s.source), s.category, verdict,
                          Text(s.reason))
    console.print(table)


def scan_json(result: ScanResult) -> dict:
    doc = result.to_json()
    validate(doc, "scan")
    return doc


def failed_json(spec: str, error: str) -> dict:
    """The combined report's entry for a target that could not be scanned."""
    doc = {"schema_version": SCAN_SCHEMA_VERSION, "mend_version": __version__, "target": spec, "error": error}
    validate(doc, "scan")
    return doc


def _dir_uri(path: str) -> str:
    return Path(path).as_uri().rstrip("/") + "/"  # a base URI must end with "/"


def _artifact_location(file: str, bases: dict) -> dict:
    """SARIF artifactLocation of ``file``: relative to ``%SRCROOT%`` (the current
    directory) or ``SITE_PACKAGES`` (installed packages), else an absolute file URI.
    Adds the base used to ``bases`` (the run's originalUriBaseIds)."""
    root = site_packages_root(file)
    if root is not None:
        base = bases.setdefault("SITE_PACKAGES", {
            "uri": _dir_uri(root), "description": {"text": "the site-packages directory of installed packages"}})
        if base["uri"] == _dir_uri(root):  # a file of a second site-packages root gets a file URI
            return {"uri": quote(Path(os.path.relpath(file, root)).as_posix()), "uriBaseId": "SITE_PACKAGES"}
        return {"uri": Path(file).as_uri()}
    cwd = os.getcwd()
    if file.startswith(cwd + os.sep):
        bases.setdefault("%SRCROOT%", {"uri": _dir_uri(cwd), "description": {"text": "the directory mend ran in"}})
        return {"uri": quote(Path(os.path.relpath(file, cwd)).as_posix()), "uriBaseId": "%SRCROOT%"}
    return {"uri": Path(file).as_uri() if os.path.isabs(file) else quote(file)}


def scan_sarif(results: list[ScanResult], failures: list[tuple[str, str]] = ()) -> dict:
    """SARIF 2.1.0: one rule per taxonomy category, one result per site.

    Fixable sites are ``warning``; unfixable ones ``note``. Locations are percent-encoded
    URIs relative to ``%SRCROOT%`` or ``SITE_PACKAGES`` where they can be (both described
    in ``originalUriBaseIds``). Source: the OASIS SARIF 2.1.0 spec, as GitHub code
    scanning consumes it.
    """
    rules = [{"id": cat, "name": cat.replace("-", " ").title().replace(" ", ""),
              "shortDescription": {"text": f"Graph break: {desc}"},
              "helpUri": "https://docs.pytorch.org/docs/stable/torch.compiler_troubleshooting.html"}
             for cat, desc in CATEGORIES.items()]
    index = {r["id"]: i for i, r in enumerate(rules)}
    bases: dict = {}
    sarif_results = []
    for result in results:
        for s in result.sites:
            if s.excluded:  # [tool.mend] exclude
                continue
            verdict = f"fixable by {s.fixable_by}" if s.fixable_by else f"unfixable: {s.reason}"
            sarif_results.append({
                **({"baselineState": "unchanged" if s.baselined else "new"} if s.baselined is not None else {}),
                "ruleId": s.category,
                "ruleIndex": index[s.category],
                "level": "warning" if s.fixable_by else "note",
                "message": {"text": f"TorchDynamo graph break ({s.gb_type}), {s.count} hit(s) in {result.target}; {verdict}"},
                "locations": [{"physicalLocation": {
                    "artifactLocation": _artifact_location(s.file, bases),
                    "region": {"startLine": max(s.line, 1), "startColumn": s.column + 1},
                }}],
                "properties": {"gb_type": s.gb_type, "count": s.count, "fixable_by": s.fixable_by,
                               "frame_skipped": s.frame_skipped, "origin": s.origin, "package": s.package},
            })
    run = {
        "tool": {"driver": {"name": "mend", "version": __version__,
                            "informationUri": "https://arxiv.org/abs/2509.16248", "rules": rules}},
        "results": sarif_results,
    }
    if bases:
        run["originalUriBaseIds"] = bases
    if failures:  # a batch's targets that could not be scanned (SARIF 2.1.0 section 3.20)
        run["invocations"] = [{"executionSuccessful": False, "toolExecutionNotifications": [
            {"level": "error", "message": {"text": error}, "properties": {"target": spec}} for spec, error in failures]}]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [run],
    }
