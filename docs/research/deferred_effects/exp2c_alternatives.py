"""Q2 alternatives: plain list buffer with (a) no flusher, (b) a root forward hook always_call=True,
(c) the reorderable_logging_functions route with our own function; vs user prints."""
import os, sys
import torch, torch._dynamo as dynamo
from torch import nn

BUF = []
def flush():
    while BUF:
        kind, args, kw = BUF.pop(0); print(*args, **kw)

def rec_print(*args):
    if torch.compiler.is_compiling():
        BUF.append(("print", tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args), {}))
    else:
        flush(); print(*args)

def emit(*args):          # candidate for reorderable_logging_functions
    print("[emit]", *args)

class Child(nn.Module):
    def __init__(s, fn): super().__init__(); s.fn = fn
    def forward(s, x):
        s.fn("child", x.sum()); x.mul_(0); return x + 1

class M(nn.Module):
    def __init__(s, fn): super().__init__(); s.c = Child(fn); s.fn = fn
    def forward(s, x):
        h = x * 2
        s.fn("top", h.sum())
        h.add_(1)
        return s.c(h)

x = torch.ones(2)
print("### (a) plain list, no flusher")
dynamo.reset(); cm = torch.compile(M(rec_print), backend="eager")
for i in range(2):
    print(f"user before {i}"); cm(x.clone()); print(f"user after {i}; len(BUF)={len(BUF)}")
BUF.clear()

print("### (b) root forward hook always_call=True calling a disabled flush")
hook = torch.compiler.disable(lambda mod, args, out: flush())
for how in ("torch.compile(m)", "m.compile()"):
    dynamo.reset(); m = M(rec_print); m.register_forward_hook(hook, always_call=True)
    if how == "m.compile()":
        m.compile(backend="eager"); cm = m
    else:
        cm = torch.compile(m, backend="eager")
    ex = dynamo.explain(cm)(x.clone()); BUF.clear()
    print(f"[{how}] explain graphs={ex.graph_count} breaks={ex.graph_break_count}")
    for i in range(2):
        print(f"user before {i}"); cm(x.clone()); print(f"user after {i}; len(BUF)={len(BUF)}")

print("### (c) torch._dynamo.config.reorderable_logging_functions = {emit}, clone passed")
torch._dynamo.config.reorderable_logging_functions.add(emit)
def emit_clone(*a): emit(*[t.clone() if isinstance(t, torch.Tensor) else t for t in a])
dynamo.reset(); cm = torch.compile(M(emit_clone), backend="eager")
print("user before"); cm(x.clone()); print("user after")
