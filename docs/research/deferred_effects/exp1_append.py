"""Q1: does appending (kind, (x.clone(), 'text'), {}) to a module-global buffer trace with no break?"""
import os, sys, collections
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch, torch._dynamo as dynamo
from torch import nn

BUF = []            # module-global list
DQ = collections.deque()
DCT = {}
class Holder: pass
H = Holder(); H.items = []

KIND = sys.argv[1] if len(sys.argv) > 1 else "list"
def rec(*args):
    if KIND == "list":
        BUF.append(("print", args, {}))
    elif KIND == "deque":
        DQ.append(("print", args, {}))
    elif KIND == "dict":
        DCT[len(DCT)] = ("print", args, {})
    elif KIND == "attr":
        H.items.append(("print", args, {}))

def entries():
    return {"list": BUF, "deque": list(DQ), "dict": [DCT[k] for k in sorted(DCT)], "attr": H.items}[KIND]
def clear():
    BUF.clear(); DQ.clear(); DCT.clear(); H.items.clear()

class Child(nn.Module):
    def __init__(s, tag):
        super().__init__(); s.lin = nn.Linear(4, 4); s.tag = tag
    def forward(s, x):
        y = s.lin(x)
        rec(y.clone(), f"child {s.tag} y")
        y.mul_(0)  # in-place update after the record
        return y + 1

class Top(nn.Module):
    def __init__(s):
        super().__init__(); s.a = Child("a"); s.b = Child("b")
    def forward(s, x):
        h = x * 2
        rec(h.clone(), "top h before", h.shape[0])   # includes a (sym)int
        h.add_(100)   # in-place after record
        for i in range(3):
            rec(h[:, i].clone(), f"loop {i}")
        h = s.a(h)
        h = s.b(h)
        rec(h.clone(), "top end")
        return h

torch.manual_seed(0)
m = Top().eval()
x = torch.randn(3, 4)
with torch.no_grad():
    clear(); m(x); eager = [(e[1][1], e[1][0].clone()) for e in entries()]
    for dyn in (False, True):
        dynamo.reset(); clear()
        ex = dynamo.explain(m)(x)
        print(f"[{KIND} dynamic={dyn}] explain: graphs={ex.graph_count} breaks={ex.graph_break_count} reasons={[str(r.reason)[:80] for r in ex.break_reasons]}")
        dynamo.reset(); clear()
        gms = []
        def be(gm, ex_inputs):
            gms.append(gm); return gm.forward
        cm = torch.compile(m, backend=be, dynamic=dyn, fullgraph=True)
        out = cm(x)
        got = entries()
        print(f"  fullgraph OK; graphs={len(gms)} entries={len(got)} order={[e[1][1] for e in got]}")
        print("  graph outputs:", [str(n.args) [:200] for n in gms[0].graph.nodes if n.op == 'output'])
        ok = all(torch.equal(a[1], b[1][0]) for a, b in zip(eager, got)) and len(eager) == len(got)
        print("  values match eager (pre-mutation snapshots):", ok)
        print("  top-h int arg:", got[0][1][2], type(got[0][1][2]))
        # second call with a different batch size (dynamic) -> recompiles?
        clear(); cm(torch.randn(5, 4)); got = entries()
        print(f"  2nd call batch 5: graphs total={len(gms)} entries={len(got)} int arg={got[0][1][2]}")
