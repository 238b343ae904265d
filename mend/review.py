"""The review page of ``mend fix TARGET --html FILE``: one self-contained static HTML file
for a pull-request reviewer.

It shows the breaks and graph counts before and after (and the steady state when the scans
have one); for each rewrite its diff, rule, fix safety and reasons, every obligation with
its outcome kind (proved/refuted/unknown/checked), assumptions and ``checked_by``, the
differential evidence and the certificate's path and digests; for each decline (and each
unsafe fix withheld) the site, the reason and the counterexample; the sites left after the
fix with their reasons. No external assets: the CSS is inline and there is no script.
Every text is escaped (:func:`html.escape`).

The renderer works from the documented JSON of a fix result
(:meth:`mend.pipeline.records.FixResult.to_json`, schema ``mend/schemas/fix.schema.json``),
so a page can be made from a saved ``mend fix --json`` output as well. Given the
:class:`~mend.pipeline.records.FixResult` itself it also shows the target, the executor, the
whole diff, and the sites left after the fix at their lines in the original file.

DOM hooks (stable, for tests and scripts):

* ``<section class="rewrite" data-site="FILE:LINE" data-rule="RULE" data-safety="safe|unsafe">``,
  holding ``<pre class="diff">`` (the rewrite's unified diff, verbatim as text),
  ``<tr class="obligation" data-kind="KIND" data-result="proved|refuted|unknown|checked">``
  and ``<div class="certificate" data-path="..." data-digest="..." data-sha256="...">`` or
  ``<p class="certificate none">``;
* ``<section class="decline" data-site="FILE:LINE" data-rule="RULE" data-withheld="true|false">``
  with ``<p class="reason">`` and, when there is one, ``<pre class="counterexample">``;
* ``<tr class="site" data-phase="before|after" data-site="FILE:LINE" data-fixable="true|false">``;
* ``<span class="count" data-name="breaks-before|breaks-after|graphs-before|...">``.
"""
from __future__ import annotations

import hashlib
import html
import json
import os
from pathlib import Path
from typing import Any

from mend.errors import MendError
from mend.files import read_only, write_atomic

__all__ = ["render", "write_html", "check_destination", "NO_CERTIFICATE"]

NO_CERTIFICATE = "no certificate written (use --out DIR)"

# keys every obligation may carry; the others name what it is about (pred, expr, lhs, ...)
_OBLIGATION_META = {"kind", "result", "status", "smtlib", "assumptions", "tier", "arithmetic", "seconds",
                    "counterexample", "reason", "solver_seconds", "solver", "timeout_ms", "checked_by"}
_EVIDENCE_SHOWN = {"passed", "examples", "hypothesis_seed", "modes", "predicate_outcomes", "max_abs_error",
                   "max_gradient_error", "gradients_exact", "gradient_tolerance", "counterexample", "reason"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1150px;padding:16px 24px;
color:#1f2328;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}
h3{font-size:15px;margin:6px 0}code,pre{font:12.5px/1.4 ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px 10px;overflow-x:auto;margin:6px 0}
pre.diff .add{background:#dafbe1;display:block}pre.diff .del{background:#ffebe9;display:block}
pre.diff .hunk{color:#8250df;display:block}pre.diff .head{color:#57606a;font-weight:600;display:block}
table{border-collapse:collapse;width:100%;margin:6px 0}table.counts{width:auto}table.counts td{min-width:80px}
th,td{border:1px solid #d0d7de;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#f6f8fa}
section.rewrite,section.decline{border:1px solid #d0d7de;border-radius:8px;padding:10px 14px;margin:12px 0}
section.decline{border-left:4px solid #bf8700}section.rewrite{border-left:4px solid #1a7f37}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;color:#fff}
.safe,.proved,.checked{background:#1a7f37}.unsafe,.refuted{background:#cf222e}.unknown{background:#9a6700}
.withheld{background:#bf8700}.declined{background:#57606a}
.counts span.count{font-weight:700}.muted{color:#57606a}dl{display:grid;grid-template-columns:max-content auto;
gap:2px 12px;margin:6px 0}dt{font-weight:600}dd{margin:0}ul{margin:2px 0;padding-left:20px}
"""


def _e(value: Any) -> str:
    """Escaped text of ``value`` (None as an empty string), quotes included."""
    return html.escape("" if value is None else str(value), quote=True)


def _doc_of(res) -> dict:
    """The page's data: the fix JSON, plus what only a FixResult knows (target, executor,
    the whole diff, original lines of the sites left)."""
    if isinstance(res, dict):
        return dict(res)
    doc = res.to_json()
    doc["target"] = res.target
    doc["executor"] = res.executor
    doc["whole_diff"] = res.diff()
    lines = [res.original_line(s) for s in res.after.sites]
    doc["after"] = dict(doc["after"], sites=[dict(s, original_line=n) for s, n in zip(doc["after"]["sites"], lines)])
    return doc


def _certificates(written) -> list[tuple[str, dict, str]]:
    """(path, certificate, sha256 of the file) for each certificate among ``written``."""
    out = []
    for p in written or ():
        path = Path(p)
        if path.suffix != ".json" or path.parent.name != "certificates":
            continue
        try:
            data = path.read_bytes()
            cert = json.loads(data)
        except (OSError, ValueError):
            continue
        if isinstance(cert, dict):
            out.append((str(p), cert, hashlib.sha256(data).hexdigest()))
    return out


def _diff_html(diff: str) -> str:
    """The unified diff, each line in a span classed by its kind; its text is the diff verbatim."""
    parts = []
    for line in diff.splitlines(True):
        cls = ("head" if line.startswith(("---", "+++", "# mend:")) else "hunk" if line.startswith("@@")
               else "add" if line.startswith("+") else "del" if line.startswith("-") else None)
        parts.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return f'<pre class="diff">{"".join(parts)}</pre>'


def _list(items) -> str:
    items = list(items or [])
    if not items:
        return '<span class="muted">none</span>'
    return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _value(v: Any) -> str:
    return _e(v if isinstance(v, str) else json.dumps(v, sort_keys=True))


def _counts(doc: dict) -> str:
    b, a = doc["before"], doc["after"]
    rows = [("breaks", b.get("graph_break_count"), a.get("graph_break_count")),
            ("graphs", b.get("graph_count"), a.get("graph_count"))]
    if b.get("steady_graph_count") is not None or a.get("steady_graph_count") is not None:
        rows.append(("steady-graphs", b.get("steady_graph_count"), a.get("steady_graph_count")))
    if b.get("fixable_break_count") is not None:
        rows.append(("fixable", b.get("fixable_break_count"), a.get("fixable_break_count")))
    label = {"breaks": "graph breaks", "graphs": "graphs", "steady-graphs": "graphs in the steady state",
             "fixable": "fixable breaks"}
    body = "".join(f'<tr><th>{label[n]}</th><td><span class="count" data-name="{n}-before">{_e(x)}</span></td>'
                   f'<td><span class="count" data-name="{n}-after">{_e(y)}</span></td></tr>' for n, x, y in rows)
    return f'<table class="counts"><tr><th></th><th>before</th><th>after</th></tr>{body}</table>'


def _sites(scan: dict, phase: str) -> str:
    sites = scan.get("sites") or []
    if not sites:
        return f'<p class="muted sites-none" data-phase="{phase}">no graph break</p>'
    rows = []
    for s in sites:
        line = s.get("original_line", s.get("line"))
        where = f"{s.get('file')}:{line}"
        fixable = bool(s.get("fixable_by"))
        origin = s.get("package") or s.get("origin")
        rows.append(f'<tr class="site{"" if fixable else " unfixable"}" data-phase="{phase}" data-site="{_e(where)}" '
                    f'data-category="{_e(s.get("category"))}" data-fixable="{str(fixable).lower()}">'
                    f'<td><code>{_e(where)}</code>{f" <span class=muted>({_e(origin)})</span>" if origin else ""}</td>'
                    f'<td>{_e(s.get("category"))}</td><td><code>{_e(s.get("source"))}</code></td>'
                    f'<td class="reason">{_e(s.get("reason"))}</td>'
                    f'<td>{_e(s.get("fixable_by")) if fixable else "<span class=muted>unfixable</span>"}</td></tr>')
    return ('<table class="sites"><tr><th>site</th><th>category</th><th>statement</th><th>reason</th>'
            f'<th>fixable by</th></tr>{"".join(rows)}</table>')


def _obligations(obligations: list[dict]) -> str:
    if not obligations:
        return '<p class="muted">no obligations</p>'
    rows = []
    for o in obligations:
        result = o.get("result") or "unknown"
        about = "; ".join(f"{k} = {v if isinstance(v, str) else json.dumps(v)}"
                          for k, v in o.items() if k not in _OBLIGATION_META)
        notes = []
        if o.get("checked_by"):
            notes.append(f'<div class="checked-by">checked by: {_e(o["checked_by"])}</div>')
        if o.get("tier"):
            notes.append(f'<div class="muted">tier {_e(o["tier"])}; {_e(o.get("arithmetic"))}</div>')
        if o.get("solver") and o.get("status"):
            notes.append(f'<div class="muted">{_e(o["solver"])}: {_e(o["status"])} '
                         f'({_e(o.get("solver_seconds"))} s)</div>')
        if o.get("reason"):
            notes.append(f'<div class="obligation-reason">{_e(o["reason"])}</div>')
        if o.get("counterexample"):
            notes.append(f'<pre class="counterexample">{_value(o["counterexample"])}</pre>')
        if o.get("smtlib"):
            notes.append('<details><summary>SMT-LIB query</summary>'
                         f'<pre class="smtlib">{_e(o["smtlib"])}</pre></details>')
        rows.append(f'<tr class="obligation" data-kind="{_e(o.get("kind"))}" data-result="{_e(result)}">'
                    f'<td><code>{_e(o.get("kind"))}</code><div class="muted">{_e(about)}</div></td>'
                    f'<td><span class="badge result {_e(result)}">{_e(result)}</span></td>'
                    f'<td class="assumptions">{_list(o.get("assumptions"))}</td><td>{"".join(notes)}</td></tr>')
    return ('<table class="obligations"><tr><th>obligation</th><th>outcome</th><th>assumptions</th>'
            f'<th>how</th></tr>{"".join(rows)}</table>')


def _evidence(ev: dict) -> str:
    if not ev:
        return '<p class="muted">no differential evidence recorded</p>'
    items = [("passed", ev.get("passed")), ("examples", ev.get("examples")),
             ("Hypothesis seed", ev.get("hypothesis_seed"))]
    outcomes = ev.get("predicate_outcomes")
    if outcomes:
        shown = "; ".join(f"line {line}: " + ", ".join(f"{how} {json.dumps(sorted(seen, key=str))}"
                                                      for how, seen in vals.items())
                          if isinstance(vals, dict) else f"line {line}: {vals}" for line, vals in outcomes.items())
    else:
        shown = "n/a (no predicate at the site)"
    items += [("predicate outcomes covered", shown), ("largest output error", ev.get("max_abs_error")),
              ("largest gradient error", ev.get("max_gradient_error")),
              ("gradients exact", ev.get("gradients_exact")), ("gradient tolerance", ev.get("gradient_tolerance")),
              ("modes", ", ".join(ev.get("modes") or []) or None)]
    items += [(k, v) for k, v in ev.items() if k not in _EVIDENCE_SHOWN]
    body = "".join(f'<dt>{_e(k)}</dt><dd data-name="{_e(k)}">{_value(v)}</dd>' for k, v in items if v is not None)
    extra = ""
    if ev.get("counterexample") or ev.get("reason"):
        extra = (f'<p class="reason">{_e(ev.get("reason"))}</p>'
                 f'<pre class="counterexample">{_value(ev.get("counterexample"))}</pre>')
    return f'<dl class="evidence">{body}</dl>{extra}'


def _certificate(rw: dict, certs: list[tuple[str, dict, str]]) -> str:
    for path, cert, sha in certs:
        if all(cert.get(k) == rw.get(k) for k in ("site", "rule", "diff")):
            return (f'<div class="certificate" data-path="{_e(path)}" data-digest="{_e(cert.get("digest"))}" '
                    f'data-sha256="{_e(sha)}"><dl><dt>path</dt><dd><code>{_e(path)}</code></dd>'
                    f'<dt>digest (sealed)</dt><dd><code>{_e(cert.get("digest"))}</code></dd>'
                    f'<dt>sha256 of the file</dt><dd><code>{_e(sha)}</code></dd></dl>'
                    f'<p class="muted">re-check: <code>mend cert verify {_e(path)}</code></p></div>')
    return f'<p class="certificate none">{_e(NO_CERTIFICATE)}</p>'


def _rewrite(rw: dict, certs) -> str:
    safety = rw.get("safety") or {}
    label = safety.get("label", "unsafe")
    ver = rw.get("verification") or {}
    span = rw.get("span") or []
    return (f'<section class="rewrite" data-site="{_e(rw.get("site"))}" data-rule="{_e(rw.get("rule"))}" '
            f'data-safety="{_e(label)}"><h3><code>{_e(rw.get("site"))}</code> &middot; {_e(rw.get("rule"))} '
            f'<span class="badge {_e(label)}">{_e(label)}</span></h3>'
            f'<p class="detail">{_e(rw.get("detail"))}</p>'
            f'<p class="muted">lines {_e("-".join(map(str, span)))} of the version it was applied to; verified at '
            f'--verify {_e(ver.get("level", "?"))} for {_e(ver.get("use", "training and inference"))}</p>'
            f'<h4>diff</h4>{_diff_html(rw.get("diff") or "")}'
            f'<h4>fix safety: {_e(label)}</h4><div class="safety-reasons">{_list(safety.get("reasons"))}</div>'
            f'<h4>obligations ({len(rw.get("obligations") or [])})</h4>{_obligations(rw.get("obligations") or [])}'
            f'<h4>differential evidence</h4>{_evidence(rw.get("evidence") or {})}'
            f'<h4>certificate</h4>{_certificate(rw, certs)}</section>')


def _decline(d: dict) -> str:
    withheld = d.get("safety") == "unsafe"
    what = "withheld" if withheld else "declined"
    parts = [f'<section class="decline" data-site="{_e(d.get("site"))}" data-rule="{_e(d.get("rule"))}" '
             f'data-withheld="{str(withheld).lower()}"><h3><code>{_e(d.get("site"))}</code> &middot; '
             f'{_e(d.get("rule") or "no rule")} <span class="badge {what}">{what}</span></h3>'
             f'<p class="reason">{_e(d.get("reason"))}</p>']
    if d.get("failed_obligations"):
        parts.append(f'<div class="failed-obligations">failed obligations: {_list(d["failed_obligations"])}</div>')
    if d.get("counterexample") is not None:
        parts.append(f'<h4>counterexample</h4><pre class="counterexample">{_value(d["counterexample"])}</pre>')
    elif not withheld:
        parts.append('<p class="muted no-counterexample">no counterexample</p>')
    return "".join(parts) + "</section>"


def render(res, written=None) -> str:
    """The review page of one ``mend fix`` run, as an HTML document (a str).

    ``res``: the :class:`~mend.pipeline.records.FixResult` the pipeline returns, or its
    ``to_json()`` dict (a saved ``mend fix --json`` output; the page then lacks the target,
    the whole diff and original line numbers of the sites left). ``written``: the paths
    :func:`mend.pipeline.emit.emit` returned; each certificate among them (``.../certificates/
    *.json``) is read and shown with the rewrite whose site, rule and diff it records, with
    its sealed digest and the sha256 of its file; a rewrite without one says
    ``no certificate written (use --out DIR)``. Raises KeyError when ``res`` lacks
    ``before``/``after`` (not a fix result).
    """
    doc = _doc_of(res)
    before, after = doc["before"], doc["after"]
    rewrites, declined = doc.get("rewrites") or [], doc.get("declined") or []
    target = doc.get("target") or before.get("target") or "?"
    withheld = [d for d in declined if d.get("safety") == "unsafe"]
    certs = _certificates(written)
    versions = ", ".join(f"{k} {before[k2]}" for k, k2 in (("mend", "mend_version"), ("torch", "torch_version"))
                         if before.get(k2))
    head = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>mend fix {_e(target)}: review</title><style>{_CSS}</style></head><body>')
    executor = f"; executor {_e(doc['executor'])}" if doc.get("executor") else ""
    summary = (f'<h1>mend fix <code>{_e(target)}</code></h1>'
               f'<p class="summary muted">{_e(versions)}{executor}'
               f'; <span class="n-rewrites">{len(rewrites)}</span> rewrite(s) verified and applied, '
               f'<span class="n-withheld">{len(withheld)}</span> unsafe fix(es) withheld, '
               f'<span class="n-declined">{len(declined) - len(withheld)}</span> declined</p>')
    body = [head, summary, '<h2 id="counts">Breaks and graphs</h2>', _counts(doc),
            '<h3>breaks before</h3>', _sites(before, "before")]
    body.append(f'<h2 id="rewrites">Rewrites ({len(rewrites)})</h2>')
    body += [_rewrite(rw, certs) for rw in rewrites] or ['<p class="muted">no rewrite</p>']
    if doc.get("whole_diff"):
        body.append(f'<details class="whole-diff"><summary>the whole diff</summary>{_diff_html(doc["whole_diff"])}'
                    '</details>')
    body.append(f'<h2 id="declines">Declined and withheld ({len(declined)})</h2>')
    body += [_decline(d) for d in declined] or ['<p class="muted">nothing declined</p>']
    body += ['<h2 id="after">Breaks left after the fix</h2>', _sites(after, "after")]
    if after.get("compiled_error"):
        body.append(f'<pre class="compiled-error">{_e(after["compiled_error"])}</pre>')
    body.append('<p class="muted">written by <code>mend fix --html</code>; static page, no external assets</p>'
                '</body></html>\n')
    return "".join(body)


def check_destination(path) -> Path:
    """``path`` as a Path, after checking that a page can be written there: its folder
    exists (or can be made) and is writable, and ``path`` is not a folder nor a read-only
    file. Called before a long run so that a bad ``--html`` fails at once. Raises MendError
    naming the cause."""
    path = Path(path)
    if path.is_dir():
        raise MendError(f"--html {path}: is a folder; give a file name (e.g. {path / 'review.html'})")
    if read_only(path):
        raise MendError(f"--html {path}: file is read-only; nothing was written")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise MendError(f"--html {path}: {parent} is not a folder; nothing was written")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MendError(f"--html {path}: folder {parent} is not writable; nothing was written")
    return path


def write_html(res, path, written=None) -> Path:
    """Write :func:`render`'s page to ``path`` atomically (a temp file in the same folder,
    then :func:`os.replace`), making missing parent folders. Returns the Path written.
    Raises MendError when ``path`` is a folder, a read-only file, or cannot be written
    (nothing is left half-written)."""
    path = check_destination(path)
    text = render(res, written)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as exc:
        raise MendError(f"--html {path}: cannot write ({exc.strerror or exc}); nothing was written") from exc
    return path
