"""Edge cases of the side-effect-replay design: replay-policy config, checkpoint, torch.cond, nested compile."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(0, "/work/main")
import torch, torch._dynamo as dynamo
import torch.utils.checkpoint as ckpt
import dse

def case(label, fn, *args, **ckw):
    dynamo.reset()
    print(f"--- {label}", flush=True)
    try:
        ex = dynamo.explain(fn)(*args)
        print(f"  explain graphs={ex.graph_count} breaks={ex.graph_break_count} reasons={[str(r.reason).splitlines()[0][:100] for r in ex.break_reasons]}", flush=True)
    except Exception as e:
        print("  explain raised", type(e).__name__, str(e).splitlines()[0][:120])
    dynamo.reset()
    try:
        out = torch.compile(fn, backend="eager", **ckw)(*args)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.sum().backward()
        print("  compiled call ok", flush=True)
    except Exception as e:
        print("  compiled raised", type(e).__name__, str(e).splitlines()[0][:160])

def body(x):
    y = x.sin()
    dse.defer_print("inside", y.sum())
    return y * 2

def f_ckpt(x):
    return ckpt.checkpoint(body, x, use_reentrant=False).sum()

def f_cond(x):
    return torch.cond(x.sum() > 0, body, lambda t: t.cos(), (x,))

def f_plain(x):
    return body(x)

x = torch.ones(3, requires_grad=True)
for pol in ("warn", "error"):
    torch._dynamo.config.side_effect_replay_policy = pol
    case(f"side_effect_replay_policy={pol}", f_plain, x)
torch._dynamo.config.side_effect_replay_policy = "info"
case("checkpoint(use_reentrant=False)", f_ckpt, x)
case("torch.cond branch", f_cond, torch.ones(3))

inner = torch.compile(body, backend="eager")
def outer(x):
    dse.defer_print("outer before", x.sum())
    return inner(x) + 1
case("compiled fn calling another compiled fn", outer, torch.ones(3))

import mend.runtime as rt
def body_rt(x):
    y = x.sin(); rt.defer_print("mend capture inside", y.sum()); return y * 2
case("[mend::capture] checkpoint", lambda x: ckpt.checkpoint(body_rt, x, use_reentrant=False).sum(), x)
case("[mend::capture] torch.cond branch", lambda x: torch.cond(x.sum() > 0, body_rt, lambda t: t.cos(), (x,)), torch.ones(3))
