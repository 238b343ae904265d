"""Detection and taxonomy on our own fixtures (tests/fixtures)."""
import jsonschema
import pytest

from mend.report import schema
from mend.scan import scan
from mend.targets import load_target
from tests.conftest import FIXTURES


def _scan(name, suffix=""):
    return scan(load_target(str(FIXTURES / name) + suffix))


def test_branch_is_one_fixable_break():
    r = _scan("branch_where.py")
    assert (r.graph_count, r.graph_break_count, r.explain_break_count) == (2, 1, 1)
    (site,) = r.sites
    assert site.line == 12 and site.category == "data-dependent-branch"
    assert site.fixable_by == "predicated-control-flow"
    assert site.gb_type == "Data-dependent branching"
    assert site.located.kind == "If" and site.column == 8


def test_nested_break_counts_the_split_caller():
    # pre | inner(prefix | log | suffix) | post: 4 graphs, 3 breaks, all at the logger line
    r = _scan("nested_logger.py")
    assert r.graph_count == 4 and r.graph_break_count == 3
    (site,) = r.sites
    assert site.count == 3 and site.category == "print-logging" and site.line == 17
    assert site.fixable_by == "deferred-side-effects"
    assert [f.function for f in site.stack][-1] == "forward"


def test_each_kind_is_classified():
    r = _scan("mixed.py")
    by_line = {s.line: s for s in r.sites}
    assert by_line[15].category == "print-logging" and by_line[15].fixable_by == "deferred-side-effects"
    assert by_line[16].category == "raise-assert" and by_line[16].fixable_by == "predicated-validation"
    assert by_line[18].category == "print-logging" and by_line[18].fixable_by == "deferred-side-effects"
    assert by_line[19].category == "item-tolist" and by_line[19].fixable_by == "item-operand"
    assert r.graph_break_count == 4


def test_factory_target_sees_the_same_breaks():
    r1, r2 = _scan("mixed.py"), _scan("mixed.py", ":factory")
    assert [(s.line, s.count) for s in r1.sites] == [(s.line, s.count) for s in r2.sites]


def test_break_in_loop_is_a_skipped_frame_not_zero():
    r = _scan("loop_branch.py")
    assert r.graph_count == 0 and r.explain_break_count == -1
    assert r.graph_break_count == 1
    (site,) = r.sites
    assert site.frame_skipped and site.fixable_by is None
    assert "loop" in site.reason


def test_clean_model_has_no_break_and_validates():
    r = _scan("clean.py")
    assert (r.graph_count, r.graph_break_count, r.sites) == (1, 0, [])
    jsonschema.validate(r.to_json(), schema("scan"))


@pytest.mark.parametrize("name", ["branch_where.py", "mixed.py", "loop_branch.py", "nested_logger.py"])
def test_json_matches_schema(name):
    doc = _scan(name).to_json()
    jsonschema.validate(doc, schema("scan"))
    assert doc["graph_break_count"] == sum(s["count"] for s in doc["sites"])


def test_an_lstm_break_says_why_it_stays_and_what_setting_traces_it():
    import torch

    r = _scan("lstm_between.py")
    (site,) = r.sites
    assert site.gb_type == "Attempted to wrap RNN, GRU, or LSTM" and site.category == "other"
    assert site.fixable_by is None and "allow_rnn = True" in site.reason and "gb0014" in site.reason
    # the reason's claim, re-measured: with the setting, one graph and the same outputs
    target = load_target(str(FIXTURES / "lstm_between.py"))
    with torch.no_grad():
        ref = target.model(*target.args)
        old = torch._dynamo.config.allow_rnn
        try:
            torch._dynamo.config.allow_rnn = True
            torch._dynamo.reset()
            assert torch._dynamo.explain(target.model)(*target.args).graph_count == 1
            for backend in ("eager", "aot_eager"):
                torch._dynamo.reset()
                assert torch.equal(torch.compile(target.model, backend=backend)(*target.args), ref), backend
        finally:
            torch._dynamo.config.allow_rnn = old
            torch._dynamo.reset()


def test_a_buffer_read_as_a_size_is_a_scalar_read_not_a_dynamic_shape_op(tmp_path, scan_json):
    # helper-100 m25: `h.view(B, T // self.window, ...)` with a persistent 0-d buffer breaks as "Data
    # dependent operator" (aten._local_scalar_dense): it had been filed as dynamic-shape-op, whose reason
    # blamed an operator's output shape
    src = tmp_path / "window_buffer.py"
    src.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.register_buffer('window', torch.tensor(2))\n\n"
        "    def forward(self, x):\n        B, T, D = x.shape\n"
        "        return x.view(B, T // self.window, self.window, D).mean(2)\n\n\n"
        "def get_inputs():\n    return (torch.randn(2, 6, 4),)\n")
    _, report = scan_json(str(src))
    (site,) = report["sites"]
    assert (site["line"], site["category"]) == (12, "item-tolist"), site
    assert "leaves the graph as a Python number" in site["reason"]
