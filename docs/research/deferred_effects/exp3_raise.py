"""Q3: a deferred call followed, in the same graph, by an op that raises."""
import os, sys
sys.path.insert(0, os.path.dirname(__file__)); sys.path.insert(0, "/work/main")
import torch, torch._dynamo as dynamo
from torch import nn
import dse

MECH = sys.argv[1]  # dse | capture | capture_noinstall
if MECH.startswith("capture"):
    import mend.runtime as rt
    defer = rt.defer_print
else:
    defer = dse.defer_print

class M(nn.Module):
    def __init__(s, kind, brk=False):
        super().__init__(); s.emb = nn.Embedding(10, 3); s.kind = kind; s.brk = brk
    def forward(s, idx):
        h = idx * 2
        defer("before raise", h)
        if s.brk:
            torch._dynamo.graph_break()
        if s.kind == "embedding":
            out = s.emb(h)          # h=[4,12] -> 12 out of range
        else:
            torch._assert_async((h < 10).all(), "boom")
            out = h.float()
        defer("after raise (never)", h)
        return out

idx = torch.tensor([2, 6])
for kind in ("embedding", "assert_async"):
    for brk in (False, True):
        for backend in ("eager-mode", "eager", "inductor"):
            dynamo.reset()
            m = M(kind, brk)
            if MECH == "capture":
                rt.install(m)
            f = m if backend == "eager-mode" else torch.compile(m, backend=backend)
            print(f"--- {MECH} {kind} brk={brk} {backend}", flush=True)
            try:
                with torch.no_grad():
                    f(idx)
                print("  no exception")
            except Exception as e:
                print(f"  raised {type(e).__name__}: {str(e).splitlines()[0][:90]}")
            if MECH == "dse":
                print("  dse.pending =", dse.pending, "setattr_calls =", dse.STATS["setattr_calls"])
            else:
                print("  rt.pending() =", rt.pending())
