"""A warning torch raises while Dynamo traces (here: ``torch.tensor`` of a traced tensor,
once per compile) is the compiler's, not the program's; the differential observation
leaves it out, and keeps every warning the program raises when it runs."""
import warnings

import torch
from torch import nn

from verifier.differential import observe


class _Copy(nn.Module):
    def forward(self, x):
        t = torch.tensor(x)  # warns "To copy construct from a tensor..." when called
        return t * 2


class _Warns(nn.Module):
    def forward(self, x):
        warnings.warn("runtime warning")
        return x + 1


def test_trace_time_warnings_are_not_observed_but_runtime_ones_are():
    x = torch.ones(3)
    eager = observe(_Copy(), (x,), {}, grad=False)
    assert [w[0] for w in eager[2]] == ["UserWarning"]  # eager: the call warns once
    torch._dynamo.reset()
    compiled = observe(torch.compile(_Copy(), backend="eager"), (x,), {}, grad=False)
    # compiled: the trace-time copy is dropped, the graph's own run still warns once
    assert compiled[2] == eager[2]
    torch._dynamo.reset()
    runtime = observe(torch.compile(_Warns(), backend="eager"), (x,), {}, grad=False)
    assert runtime[2] == [("UserWarning", "runtime warning")]
    torch._dynamo.reset()
