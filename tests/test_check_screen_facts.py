"""What the deferred-side-effects check screen rests on, measured on the pinned torch: an
`assert` on a tensor is a check inside the graph, one on sizes Dynamo knows is not, and
one on a data-dependent size is again under capture_dynamic_output_shape_ops (the
documented limit in mend/runtime.py)."""
import libcst as cst
import torch

from mend.rules.deferred_side_effects.screen import _host_decided


def _graph_code(fn, *args) -> str:
    torch._dynamo.reset()
    out = torch._dynamo.explain(fn)(*args)
    assert out.graph_break_count == 0
    return "\n".join(g.code for g in out.graphs)


# compiled here, not in this module: pytest rewrites a test module's own asserts
_SOURCE = """
def _tensor_assert(x):
    y = x * 2
    assert y.sum() > 0, "neg"
    return y + 1


def _size_assert(x, n):
    y = x * 2
    assert y.size()[0] == n
    return y + 1


def _unbacked_size_assert(x):
    y = x[x > 0]
    assert y.size()[0] > 1, "few"
    return y * 2
"""
_NS: dict = {}
exec(compile(_SOURCE, "check_screen_facts", "exec"), _NS)
_tensor_assert, _size_assert, _unbacked_size_assert = (
    _NS["_tensor_assert"], _NS["_size_assert"], _NS["_unbacked_size_assert"])


def test_tensor_assert_is_a_check_in_the_graph():
    assert "_assert_async" in _graph_code(_tensor_assert, torch.ones(3))
    assert not _host_decided(cst.parse_expression("y.sum() > 0"))


def test_size_assert_leaves_nothing_in_the_graph():
    code = _graph_code(_size_assert, torch.ones(3), 3)
    assert "_assert" not in code
    assert _host_decided(cst.parse_expression("y.size()[0] == len(self.layers)"))


def test_data_dependent_size_assert_is_a_check_when_captured(monkeypatch):
    monkeypatch.setattr(torch._dynamo.config, "capture_dynamic_output_shape_ops", True)
    assert "_assert_scalar" in _graph_code(_unbacked_size_assert, torch.tensor([1.0, -1.0, 2.0, 3.0]))
