import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, torch._dynamo as dynamo
import torch.utils.checkpoint as ckpt
import dse
def body(x):
    y = x.sin(); dse.defer_print("inside", y.sum()); return y * 2
def f(x): return ckpt.checkpoint(body, x, use_reentrant=False).sum()
try:
    torch.compile(f, backend="eager", fullgraph=True)(torch.ones(3, requires_grad=True))
    print("fullgraph ok")
except Exception as e:
    print("fullgraph raised", type(e).__name__, "|", " ".join(str(e).split())[:400])
