"""Q1 extra: argument kinds through the replay (torch.Size under dynamic shapes, dtype, device,
None, nested list/dict, a lazily formatted object like mend's Fmt)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, "/work/main")
import torch, torch._dynamo as dynamo
import dse
from mend.runtime import Fmt

def f(x):
    h = x * 2
    dse.defer_print("shape", h.shape, h.size(0), h.dtype, h.device, None, [h[0, 0], {"k": h.shape[1]}])
    dse.defer_print(Fmt("h={:.2f} n={}", h.sum(), h.shape[0]))
    h.add_(1)
    return h

for dyn in (False, True):
    dynamo.reset()
    print(f"--- dynamic={dyn}")
    try:
        cf = torch.compile(f, backend="inductor", fullgraph=True, dynamic=dyn)
        cf(torch.ones(2, 3)); cf(torch.ones(4, 3))
        print("  fullgraph OK, unique_graphs", dynamo.utils.counters["stats"]["unique_graphs"])
    except Exception as e:
        print("  raised", type(e).__name__, " ".join(str(e).split())[:300])
print("--- eager"); f(torch.ones(2, 3)); f(torch.ones(4, 3))
