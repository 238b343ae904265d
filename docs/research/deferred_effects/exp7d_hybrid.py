"""Trace-time choice: side-effect replay at the root tracer, mend::capture inside a HOP body."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, "/work/main")
import torch, torch._dynamo as dynamo
import torch.utils.checkpoint as ckpt
import dse, mend.runtime as rt

@torch._dynamo.assume_constant_result
def _in_hop_body() -> bool:
    from torch._dynamo.symbolic_convert import InstructionTranslator
    tx = InstructionTranslator.current_tx()
    return tx is not None and not tx.output.is_root_tracer()

def defer_print(*args):
    if torch.compiler.is_compiling() and _in_hop_body():
        return rt.defer_print("[capture]", *args)
    return dse.defer_print(*args)

def body(x):
    y = x.sin(); defer_print("inside", y.sum()); return y * 2
def f_root(x):
    defer_print("root", x.sum()); return body(x).sum()
def f_ckpt(x):
    defer_print("root", x.sum()); return ckpt.checkpoint(body, x, use_reentrant=False).sum()
def f_cond(x):
    defer_print("root", x.sum()); return torch.cond(x.sum() > 0, body, lambda t: t.cos(), (x,)).sum()
for name, fn in (("root only", f_root), ("checkpoint", f_ckpt), ("torch.cond", f_cond)):
    dynamo.reset()
    print(f"--- {name}")
    try:
        out = torch.compile(fn, backend="eager", fullgraph=True)(torch.ones(3))
        print("  fullgraph OK")
    except Exception as e:
        print("  raised", type(e).__name__, " ".join(str(e).split())[:200])
