"""Record (2026-12-02): how many graphs the mended hf:newest/llava runs under torch.compile,
with the output-capturing hooks installed lazily (MODE=none) or by one eager call before
compiling (MODE=warm). Run in benchmarks/.venv-newest with PYTHONPATH pointing at a copy of
the venv's transformers package to which `mend fix hf:newest/llava --unsafe-fixes --json`'s
diffs were applied (patch -p1): measured `none`: 5 graphs on the first and second call;
`warm`: 1 and 1. (`eager-init` wraps the installer in torch.compiler.disable: still 5.)"""
import sys, torch
sys.path.insert(0, "/work/main")
from mend.targets.hf_newest import build
import transformers.utils.output_capturing as oc
from torch.compiler import disable

MODE = sys.argv[1]
if MODE in ("eager-init", "both"):
    orig_rest = oc.install_all_output_capturing_hooks
    @disable
    def _rest(model):
        with oc._hook_installation_lock:
            if getattr(model, "_output_capturing_hooks_installed", False):
                return
            oc.install_all_output_capturing_hooks(model)
    def maybe(model):
        if getattr(model, "_output_capturing_hooks_installed", False):
            return
        return _rest(model)
    oc.maybe_install_capturing_hooks = maybe

model, args, kwargs = build("llava")
model.eval()
if MODE == "warm":
    with torch.no_grad():
        model(*args, **kwargs)   # hooks installed eagerly before compiling
torch._dynamo.reset()
cnt = {"n": 0}
runs = [0]
def backend(gm, ex):
    cnt["n"] += 1
    f = gm.forward
    def run(*a, **k):
        runs[0] += 1
        return f(*a, **k)
    return run
c = torch.compile(model, backend=backend)
with torch.no_grad():
    c(*args, **kwargs); first = cnt["n"]
    runs[0] = 0
    c(*args, **kwargs); second = runs[0]
print(MODE, "first-call graphs", first, "second-call graphs run", second)
torch._dynamo.reset()
e = torch._dynamo.explain(model)(*args, **kwargs)
print("explain", e.graph_count, e.graph_break_count)
for r in e.break_reasons[:8]:
    print("  ", str(r.reason)[:100], r.user_stack[-1].filename[-40:] if r.user_stack else "", r.user_stack[-1].lineno if r.user_stack else "")

# Record (2026-12-05, setup-guard): with the mended output_capturing.py plus setup-guard's
# hoisted check (`if not getattr(self, "_output_capturing_hooks_installed", False):` around
# `maybe_install_capturing_hooks(self)`), graphs per frame, labelled in the backend by the
# traced code object (InstructionTranslator.current_tx().f_code):
#   first call:  forward@modeling_llava.py:193 (4 ops), resume_in_wrapper_at_407 (103),
#                resume_in_get_image_features_at_133 (11), resume_in_forward_at_221 (176),
#                resume_in_forward_at_325 (5)                                      -> 5 graphs
#   second call: the vision tower's `wrapper` recompiled as one graph (103 ops); the other four
#                frames unchanged                                                    -> 5 graphs
# The hoisted check merges the innermost frame only: LlavaModel.forward, get_image_features
# and LlavaForConditionalGeneration.forward were split at their calls into the submodule
# whose setup broke, and their guards never read the flag. `mend fix` declines it there
# ("lowers neither the first call's graph count nor a second call's").
