"""Q2: when is the buffer filled/flushed; order vs user prints, graph breaks, children, loops."""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch, torch._dynamo as dynamo
from torch import nn
import dse

class Child(nn.Module):
    def __init__(s, tag): super().__init__(); s.tag = tag
    def forward(s, x):
        dse.defer_print("child", s.tag, x.sum())
        x.mul_(0)
        return x + 1

class Top(nn.Module):
    def __init__(s, brk):
        super().__init__(); s.a = Child("a"); s.b = Child("b"); s.brk = brk
    def forward(s, x):
        h = x * 2
        dse.defer_print("top h", h.sum(), h.shape[0])
        h.add_(100)
        for i in range(2):
            dse.defer_print("loop", i, h[0, i])
        h = s.a(h)
        if s.brk:
            print("UNMENDED print (graph break)")
        h = s.b(h)
        dse.defer_print("top end", h.sum())
        return h

torch.manual_seed(0)
x = torch.ones(2, 3)
for brk in (False, True):
    for backend in ("eager", "inductor"):
        for how in ("torch.compile(m)", "m.compile()", "torch.compile(fn)"):
            dynamo.reset(); m = Top(brk)
            print(f"===== brk={brk} backend={backend} {how}")
            if how == "torch.compile(m)":
                cm = torch.compile(m, backend=backend)
            elif how == "m.compile()":
                m.compile(backend=backend); cm = m
            else:
                cm = torch.compile(lambda t: m(t) * 1, backend=backend)
            for call in range(2):
                print(f"user: before call {call}")
                with torch.no_grad():
                    cm(x.clone())
                print(f"user: after call {call}")
            print("replays so far:", dse.STATS, "pending attr:", dse.pending)
print("===== eager")
Top(True)(x.clone())
ex = dynamo.explain(Top(False))(x.clone())
print("explain brk=False: graphs", ex.graph_count, "breaks", ex.graph_break_count)
dynamo.reset()
cm = torch.compile(Top(False), backend="inductor", fullgraph=True, dynamic=True)
with torch.no_grad():
    cm(torch.ones(2, 3)); cm(torch.ones(4, 3))
print("fullgraph dynamic=True OK; frame_count", dynamo.utils.counters["stats"]["unique_graphs"])
