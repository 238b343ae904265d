"""checkpoint detail: eager vs compiled (dse, mend::capture): how many prints, where."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, "/work/main")
import torch, torch._dynamo as dynamo
import torch.utils.checkpoint as ckpt
import dse, mend.runtime as rt
def mk(defer):
    def body(x):
        y = x.sin(); defer("inside", y.sum()); return y * 2
    return lambda x: ckpt.checkpoint(body, x, use_reentrant=False).sum()
for name, d in (("dse", dse.defer_print), ("mend", rt.defer_print)):
    for mode in ("eager-mode", "compiled"):
        dynamo.reset(); f = mk(d)
        if mode == "compiled":
            f = torch.compile(f, backend="eager")
        x = torch.ones(3, requires_grad=True)
        print(f"--- {name} {mode}: forward"); out = f(x)
        print("    backward"); out.backward(); print("    done")
dynamo.reset()
ex = dynamo.explain(mk(dse.defer_print))(torch.ones(3, requires_grad=True))
print("dse explain", ex.graph_count, ex.graph_break_count, [n.target for g in ex.graphs for n in g.graph.nodes if n.op == "call_function"][:8])
