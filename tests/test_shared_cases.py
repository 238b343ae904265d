"""Acceptance corpus: ../shared/cases (skipped when absent).

Every case must be reported with at least as many breaks as explain counts, in the
category its README gives; frames skipped whole are reported as such, not as zero.
"""
import re

import pytest

from mend.scan import scan
from mend.targets import load_target
from tests.conftest import SHARED_CASES

pytestmark = pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")


def _readme_rows():
    if not (SHARED_CASES / "README.md").is_file():
        return []
    rows = []
    for line in (SHARED_CASES / "README.md").read_text().splitlines():
        m = re.match(r"\| `(\d{3}_\w+\.py)` \| ([\w-]+) \| (-?\d+) \| (\d+) / (\d+) \| ([\w*]+) \|", line)
        if m:
            rows.append((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)), m.group(6)))
    return rows


ROWS = _readme_rows()


def test_readme_parsed():
    assert len(ROWS) >= 30


@pytest.mark.parametrize("name, category, explain_breaks, graphs, reasons, fixable", ROWS, ids=[r[0] for r in ROWS])
def test_case(name, category, explain_breaks, graphs, reasons, fixable):
    result = scan(load_target(str(SHARED_CASES / name)))
    assert result.graph_count == graphs
    assert result.explain_break_count == explain_breaks
    assert result.graph_break_count >= max(explain_breaks, reasons)
    if fixable.startswith("control"):
        assert result.sites == []
        return
    assert result.graph_break_count >= 1
    assert category in {s.category for s in result.sites}, [(s.line, s.category) for s in result.sites]
    if graphs == 0:  # Dynamo skipped the frame: reported as skipped, never as zero breaks
        assert any(s.frame_skipped for s in result.sites)
    if fixable == "no":
        # nothing the rules would rewrite, except statically-screened branches the
        # verifier must reject (shape/dtype changes are found when the rewrite is checked)
        assert all(s.fixable_by in (None, "predicated-control-flow") for s in result.sites)
    for s in result.sites:
        assert s.reason, s
        assert s.line > 0
        assert s.skip_reason or not s.frame_skipped, s
