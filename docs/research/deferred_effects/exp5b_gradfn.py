"""Can traced code learn how a tensor prints (grad_fn name) at trace time, with no graph node?"""
import torch, torch._dynamo as dynamo
from torch._dynamo.comptime import comptime
SEEN = {}
def f(w, x):
    y = (w * x).sum()
    rg = y.requires_grad          # constant at trace time?
    leaf = y.is_leaf
    try_name = None
    return y * 2, rg, leaf

ex = dynamo.explain(f)(torch.ones(2, requires_grad=True), torch.ones(2))
print("requires_grad/is_leaf: graphs", ex.graph_count, "breaks", ex.graph_break_count)
print("values:", torch.compile(f, backend="eager")(torch.ones(2, requires_grad=True), torch.ones(2))[1:])

def g(w, x):
    y = (w * x).sum()
    n = type(y.grad_fn).__name__
    return y * 2, n
dynamo.reset()
ex = dynamo.explain(g)(torch.ones(2, requires_grad=True), torch.ones(2))
print("grad_fn name: graphs", ex.graph_count, "breaks", ex.graph_break_count, [str(r.reason)[:100] for r in ex.break_reasons])

def h(w, x):
    y = (w * x).sum()
    comptime(lambda ctx: SEEN.__setitem__("y", type(ctx.get_local("y").as_fake().grad_fn).__name__))
    return y * 2
dynamo.reset()
ex = dynamo.explain(h)(torch.ones(2, requires_grad=True), torch.ones(2))
print("comptime: graphs", ex.graph_count, "breaks", ex.graph_break_count, "SEEN", SEEN)
dynamo.reset()
try:
    print("g fullgraph:", torch.compile(g, backend="eager", fullgraph=True)(torch.ones(2, requires_grad=True), torch.ones(2))[1])
except Exception as e:
    print("g fullgraph raised", type(e).__name__, str(e).splitlines()[0][:150])
