"""Q5+Q6: eager vs compiled records for print (kwargs), logger.warning and warnings.warn."""
import os, sys, io, logging, warnings, contextlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, torch._dynamo as dynamo
from torch import nn
import dse

logger = logging.getLogger("demo.model")
logger.propagate = False
RECORDS = []
class H(logging.Handler):
    def emit(self, r):
        RECORDS.append((r.name, r.levelname, r.getMessage(), os.path.basename(r.pathname), r.lineno, r.funcName))
logger.addHandler(H()); logger.setLevel(logging.INFO)

class Child(nn.Module):
    def forward(self, x):
        dse.defer_log(logger, "warning", "child: sum=%s n=%d", x.sum(), x.shape[0])
        dse.defer_warn("child warn", RuntimeWarning)
        x.mul_(0)
        return x + 1

class M(nn.Module):
    def __init__(s): super().__init__(); s.c = Child()
    def forward(s, x):
        h = x * 2
        dse.defer_print("to stderr", h.sum(), sep="|", end="!\n", file=sys.stderr)
        dse.defer_log(logger, "info", "top: %s", h.sum())
        dse.defer_log(logger, "debug", "top debug (filtered by level)")
        dse.defer_warn("top warn")
        h.add_(1)
        return s.c(h)

def run(f, label):
    RECORDS.clear()
    err = io.StringIO()
    with warnings.catch_warnings(record=True) as w, contextlib.redirect_stderr(err):
        warnings.simplefilter("default")
        for _ in range(2):               # 'default' filter: once per location
            with torch.no_grad():
                f(torch.ones(2, 3))
    ws = [(x.category.__name__, str(x.message), os.path.basename(x.filename), x.lineno) for x in w]
    print(f"== {label}\n  stderr: {err.getvalue()!r}\n  records: {RECORDS}\n  warnings: {ws}")
    return err.getvalue(), list(RECORDS), ws

def fresh_registry():
    # the registries the 'default' filter consults, so each run starts clean
    for mod in (sys.modules[__name__], dse):
        vars(mod).pop("__warningregistry__", None)
    warnings._filters_mutated() if hasattr(warnings, "_filters_mutated") else None

fresh_registry(); ref = run(M(), "eager")
for backend, dyn in (("eager", None), ("inductor", None), ("inductor", True)):
    dynamo.reset(); fresh_registry()
    got = run(torch.compile(M(), backend=backend, dynamic=dyn, fullgraph=True), f"compiled backend={backend} dynamic={dyn} fullgraph")
    print("  identical to eager:", got == ref, [a == b for a, b in zip(got, ref)])
