"""`mend fix --html FILE`: the review page (mend/review.py).

The end-to-end tests run the real pipeline once, through the CLI, on
../shared/cases/001_energy_gate_branch.py (skipped when ../shared is absent) and check the
page's DOM against the JSON result: parsed as written, and as rendered by Debian's headless
Chromium (skipped, saying so, when no chromium binary is installed; .ci/run installs it).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

import mend.pipeline
from mend.cli import main
from mend.errors import MendError
from mend.review import NO_CERTIFICATE, render, write_html
from tests.conftest import SHARED_CASES

CASE = SHARED_CASES / "001_energy_gate_branch.py"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
needs_case = pytest.mark.skipif(not CASE.is_file(), reason="../shared/cases is absent")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install chromium)")

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent=None):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def classes(self) -> set:
        return set((self.attrs.get("class") or "").split())

    def find_all(self, tag=None, cls=None) -> list[Node]:
        out = []
        for c in self.children:
            if isinstance(c, Node):
                if (tag is None or c.tag == tag) and (cls is None or cls in c.classes()):
                    out.append(c)
                out += c.find_all(tag, cls)
        return out


class _Tree(HTMLParser):
    """A DOM tree from HTML text (enough for the page's well-nested markup)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#document", {})

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def dom(text: str) -> Node:
    tree = _Tree()
    tree.feed(text)
    tree.close()
    return tree.root


def chromium_dom(path: Path, tmp: Path) -> Node:
    """The DOM headless Chromium builds from the page (``--dump-dom``)."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp / 'profile'}",
           "--dump-dom", path.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<section" in proc.stdout, proc.stdout[:2000]
    return dom(proc.stdout)


def assert_page_matches(root: Node, doc: dict, *, certificates: bool) -> None:
    """Every rewrite and decline of the JSON result is on the page, with its details."""
    sections = root.find_all("section", "rewrite")
    assert [(s.attrs["data-site"], s.attrs["data-rule"]) for s in sections] == \
        [(r["site"], r["rule"]) for r in doc["rewrites"]]
    for sec, rw in zip(sections, doc["rewrites"]):
        assert sec.attrs["data-safety"] == rw["safety"]["label"]
        assert sec.find_all("pre", "diff")[0].text() == rw["diff"]
        rows = sec.find_all("tr", "obligation")
        assert [(r.attrs["data-kind"], r.attrs["data-result"]) for r in rows] == \
            [(o["kind"], o["result"]) for o in rw["obligations"]]
        for row, o in zip(rows, rw["obligations"]):
            for a in o.get("assumptions") or []:
                assert a in row.text()
            if o.get("checked_by"):
                assert o["checked_by"] in row.text()
        ev = sec.find_all("dl", "evidence")[0]
        shown = {d.attrs["data-name"]: d.text() for d in ev.find_all("dd")}
        assert shown["examples"] == str(rw["evidence"]["examples"])
        assert shown["largest gradient error"] == json.dumps(rw["evidence"]["max_gradient_error"])
        for line in rw["evidence"]["predicate_outcomes"] or {}:
            assert f"line {line}:" in shown["predicate outcomes covered"]
        cert = sec.find_all(cls="certificate")
        assert len(cert) == 1
        if certificates:
            path = Path(cert[0].attrs["data-path"])
            sealed = json.loads(path.read_text())
            assert cert[0].attrs["data-digest"] == sealed["digest"]
            assert cert[0].attrs["data-sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            assert cert[0].text() == NO_CERTIFICATE
    declines = root.find_all("section", "decline")
    assert [(s.attrs["data-site"], s.attrs["data-rule"]) for s in declines] == \
        [(d["site"], d["rule"] or "") for d in doc["declined"]]
    for sec, d in zip(declines, doc["declined"]):
        assert sec.find_all("p", "reason")[0].text() == d["reason"]
        assert sec.attrs["data-withheld"] == ("true" if d.get("safety") == "unsafe" else "false")
        if d.get("counterexample") is not None:
            assert sec.find_all("pre", "counterexample")[0].text() == str(d["counterexample"])
    counts = {c.attrs["data-name"]: c.text() for c in root.find_all("span", "count")}
    for phase in ("before", "after"):
        assert counts[f"breaks-{phase}"] == str(doc[phase]["graph_break_count"])
        assert counts[f"graphs-{phase}"] == str(doc[phase]["graph_count"])
    unfixable = root.find_all("tr", "unfixable")
    assert len([u for u in unfixable if u.attrs["data-phase"] == "after"]) == \
        sum(1 for s in doc["after"]["sites"] if not s["fixable_by"])
    assert not root.find_all("script") and not root.find_all("link") and not root.find_all("img")


@pytest.fixture(scope="module")
def case_run(tmp_path_factory):
    """One real `mend fix CASE --json --out DIR --html FILE`; then the same result (the
    pipeline's own, captured) through the diff path, `--html` without `--out`."""
    tmp = tmp_path_factory.mktemp("review")
    real, got = mend.pipeline.fix, []

    def spy(*args, **kwargs):
        got.append(real(*args, **kwargs))
        return got[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mend.pipeline, "fix", spy)
        r1 = CliRunner().invoke(main, ["fix", str(CASE), "--json", "--out", str(tmp / "out"),
                                       "--html", str(tmp / "page.html")])
        assert r1.exit_code == 0, r1.stderr
        mp.setattr(mend.pipeline, "fix", lambda *a, **k: got[0])
        r2 = CliRunner().invoke(main, ["fix", str(CASE), "--html", str(tmp / "plain.html")])
        assert r2.exit_code == 0, r2.stderr
    return tmp, json.loads(r1.stdout), r2.stdout, got[0]


@needs_case
def test_cli_page_matches_json(case_run):
    tmp, doc, _, _ = case_run
    assert len(doc["rewrites"]) == 1 and doc["rewrites"][0]["rule"] == "predicated-control-flow"
    assert sorted(p.name for p in (tmp / "out" / "certificates").iterdir()) == \
        ["001_energy_gate_branch.1.predicated-control-flow.json"]
    assert_page_matches(dom((tmp / "page.html").read_text()), doc, certificates=True)


@needs_case
def test_cli_html_with_diff_output(case_run):
    tmp, doc, stdout, res = case_run
    assert stdout.startswith(res.diff())            # the diff is still printed
    assert f"wrote {tmp / 'plain.html'}" in stdout
    root = dom((tmp / "plain.html").read_text())
    assert_page_matches(root, doc, certificates=False)
    whole = root.find_all("details", "whole-diff")
    assert len(whole) == 1 and whole[0].find_all("pre", "diff")[0].text() == res.diff()


@needs_case
@needs_chromium
def test_cli_page_in_chromium(case_run):
    tmp, doc, _, _ = case_run
    assert_page_matches(chromium_dom(tmp / "page.html", tmp), doc, certificates=True)


def _scan(breaks, graphs, sites=()):
    return {"target": "model.py", "graph_count": graphs, "graph_break_count": breaks, "steady_graph_count": None,
            "sites": list(sites)}


DECLINE_ONLY = {
    "before": _scan(2, 3, [{"file": "model.py", "line": 7, "category": "data-dependent-branch", "source": "if x.sum():",
                            "reason": "if -> torch.where (y)", "fixable_by": "predicated-control-flow"}]),
    "after": _scan(2, 3, [{"file": "model.py", "line": 12, "category": "unsupported-call", "source": "print(x)",
                           "reason": "print() is not <traceable> & \"never\" will be", "fixable_by": None}]),
    "rewrites": [],
    "declined": [
        {"site": "model.py:7", "rule": "predicated-control-flow", "reason": "differs on x=<script>alert(1)</script>",
         "counterexample": "x = tensor([-0.0]) <b>bold</b> & more"},
        {"site": "model.py:9", "rule": "scalar-tensor", "reason": "an unsafe fix, verified but not applied without "
         "--unsafe-fixes: rests on the example's sizes", "safety": "unsafe"},
        {"site": "model.py:11", "rule": None, "reason": "no rule rewrites this"},
    ],
}


def test_render_decline_only():
    root = dom(render(DECLINE_ONLY))
    assert_page_matches(root, DECLINE_ONLY, certificates=False)
    assert not root.find_all("section", "rewrite")
    [un] = root.find_all("tr", "unfixable")
    assert un.attrs["data-site"] == "model.py:12" and "print() is not <traceable>" in un.text()
    assert [s.attrs["data-withheld"] for s in root.find_all("section", "decline")] == ["false", "true", "false"]


def test_render_escapes_text():
    page = render(DECLINE_ONLY)
    assert "<script" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    root = dom(page)
    assert not root.find_all("script") and not root.find_all("b")
    first = root.find_all("section", "decline")[0]
    assert first.find_all("p", "reason")[0].text() == "differs on x=<script>alert(1)</script>"
    assert first.find_all("pre", "counterexample")[0].text() == "x = tensor([-0.0]) <b>bold</b> & more"
    odd = dict(DECLINE_ONLY, declined=[{"site": 'a"b.py:1', "rule": "r", "reason": "x"}])
    assert dom(render(odd)).find_all("section", "decline")[0].attrs["data-site"] == 'a"b.py:1'


@needs_chromium
def test_decline_page_in_chromium(tmp_path):
    page = write_html(DECLINE_ONLY, tmp_path / "declines.html")
    root = chromium_dom(page, tmp_path)
    assert_page_matches(root, DECLINE_ONLY, certificates=False)
    assert root.find_all("section", "decline")[0].find_all("p", "reason")[0].text() == \
        "differs on x=<script>alert(1)</script>"


def test_write_html_atomic_and_errors(tmp_path):
    dest = tmp_path / "sub" / "page.html"
    assert write_html(DECLINE_ONLY, dest) == dest
    assert dest.read_text() == render(DECLINE_ONLY)
    assert [p.name for p in dest.parent.iterdir()] == ["page.html"]     # no temp file left
    dest.chmod(0o444)
    with pytest.raises(MendError, match="read-only"):
        write_html(DECLINE_ONLY, dest)
    assert dest.read_text() == render(DECLINE_ONLY)
    with pytest.raises(MendError, match="is a folder"):
        write_html(DECLINE_ONLY, tmp_path)
    with pytest.raises(MendError, match="is not a folder"):
        write_html(DECLINE_ONLY, dest / "below-a-file.html")


def test_cli_bad_html_destination_fails_before_the_run(tmp_path):
    ro = tmp_path / "ro.html"
    ro.write_text("old")
    os.chmod(ro, 0o444)
    r = CliRunner().invoke(main, ["fix", str(tmp_path / "no_such_target.py"), "--html", str(ro)])
    assert r.exit_code == 2
    assert "--html" in r.stderr and "read-only" in r.stderr and "no_such_target" not in r.stderr
    assert ro.read_text() == "old"
