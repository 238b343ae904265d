"""Q4: warm-cache cold start. Run twice in fresh processes with the same TORCHINDUCTOR_CACHE_DIR.
argv: MECH (dse | capture | capture_marked | plain_print) GRAD (0|1)"""
import os, sys, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, "/work/main")
import torch
from torch import nn
MECH, GRAD = sys.argv[1], sys.argv[2] == "1"
if MECH.startswith("capture"):
    import mend.runtime as rt
    defer = rt.defer_print
    if MECH == "capture_marked":
        torch._inductor.config.unsafe_marked_cacheable_functions = {"torch.ops.higher_order.with_effects": torch.__version__}
elif MECH == "dse":
    import dse
    defer = dse.defer_print
else:
    defer = print

class Child(nn.Module):
    def __init__(s): super().__init__(); s.lin = nn.Linear(4, 4)
    def forward(s, x):
        y = s.lin(x)
        defer("child y sum", y.sum())
        return torch.relu(y)

class M(nn.Module):
    def __init__(s): super().__init__(); s.c = Child(); s.out = nn.Linear(4, 2)
    def forward(s, x):
        h = x * 2
        defer("top h", h.sum())
        h = s.c(h)
        defer("after child", h.sum())
        return s.out(h)

torch.manual_seed(0)
m = M()
if MECH == "capture":
    rt.install(m)
cm = torch.compile(m)
x = torch.randn(3, 4)
if GRAD:
    out = cm(x); out.sum().backward()
else:
    with torch.no_grad():
        out = cm(x)
from torch._dynamo.utils import counters
keep = {k: v for k, v in counters["inductor"].items() if "cache" in k}
print("RESULT", MECH, "grad" if GRAD else "no_grad", json.dumps({"inductor": keep, "aot_autograd": dict(counters["aot_autograd"]),
      "unique_graphs": counters["stats"]["unique_graphs"]}))
