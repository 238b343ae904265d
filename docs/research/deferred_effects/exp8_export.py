"""torch.export of a function holding a deferred call (dse vs mend::capture)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, "/work/main")
import torch, dse, mend.runtime as rt
class M(torch.nn.Module):
    def __init__(s, d): super().__init__(); s.d = d
    def forward(s, x):
        s.d("h", x.sum()); return x * 2
for name, d in (("dse", dse.defer_print), ("capture", rt.defer_print)):
    for strict in (True, False):
        try:
            ep = torch.export.export(M(d), (torch.ones(2),), strict=strict)
            print(f"{name} strict={strict}: exported; nodes:", [n.target for n in ep.graph.nodes if n.op == "call_function"])
            print("  run exported:"); ep.module()(torch.ones(2))
        except Exception as e:
            print(f"{name} strict={strict}: raised", type(e).__name__, " ".join(str(e).split())[:200])
