"""scalar-tensor: the rewrite. ``return torch.tensor(E)`` of a Python int becomes ``return E``
at the function's definition (another line than the break, which is a use of the value);
the obligations say why every use computes the same with the int as with the 0-d tensor."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of
from mend.rules.scalar_tensor.indexed import RANGES, IndexedPlan, rewrite_indexed
from mend.rules.scalar_tensor.screen import BOUND, NAME, screen


class _Find(cst.CSTVisitor):
    """The innermost small statement (or ``if``/``while`` header) covering ``line``."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int) -> None:
        self.line, self.found = line, None
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.BaseSmallStatement, cst.If, cst.While)):
            pos = self.get_metadata(PositionProvider, node)
            header_only = isinstance(node, (cst.If, cst.While)) and pos.start.line != self.line
            if pos.start.line <= self.line <= pos.end.line and not header_only:
                self.found = (node, list(self.stack))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the function whose value the statement on ``line`` reads returning a
    Python int, or a Decline."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    finder = _Find(line)
    wrapper.visit(finder)
    if finder.found is None:
        return Decline(NAME, f"no statement covers line {line}")
    node, ancestors = finder.found
    plan = screen(module, node, ancestors, positions)
    if isinstance(plan, Decline):
        return plan
    if isinstance(plan, IndexedPlan):
        return _rewrite_indexed(module, plan, positions)
    ret = plan.ret_line.body[0]
    old, value = code_of(plan.tensor_call).strip(), code_of(plan.value).strip()
    new_ret = ret.with_changes(value=plan.value)   # `return E`, or `L = E` in the local form
    comment = cst.Comment(f"# mend: {NAME} (was: {old})")
    new_line = plan.ret_line.with_changes(
        body=[new_ret], trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                                   comment=comment))
    new_module = module.visit(Replace(plan.ret_line, new_line))
    rl = plan.ret_lineno
    fname = plan.callee.name.value
    observed = sorted(set(plan.receivers) | set(plan.ints))
    uses = []
    for u in plan.uses:
        entry = {"value": code_of(u.chain).strip(), "line": u.stmt_line, "role": u.role}
        uses.append(entry)
        if u.clamp_input is not None:
            uses.append({"value": code_of(u.clamp_input).strip(), "line": u.stmt_line, "role": "clamp-input"})
    locals_ = [loc for _, loc in plan.locals_]
    obligations = [
        {"kind": "scalar-value-int64", "expr": value, "function": fname, "sizes": plan.sizes, "ints": plan.ints,
         "bound": BOUND},
        {"kind": "scalar-leaves-observed", "line": rl, "expr": "(" + ", ".join(observed + ["__name__"]) + ",)",
         "function": fname, "tensors": plan.receivers, "ints": plan.ints, "bound": BOUND},
        {"kind": "scalar-local-screened", "line": rl, "function": fname, "local": locals_[0], "value": value}
        if plan.local_form else
        {"kind": "scalar-callers-screened", "line": rl, "expr": "__name__", "function": fname, "locals": locals_},
        {"kind": "scalar-use-same", "value": value, "function": fname, "locals": locals_, "sizes": plan.sizes,
         "ints": plan.ints, "uses": uses, "bound": BOUND},
        {"kind": "scalar-use-promotion", "function": fname, "locals": locals_, "uses": uses},
    ]
    if plan.local_form:
        return RewriteResult(new_module.code, (rl, rl),
                             f"`{locals_[0]}` in `{fname}` is bound to the Python int `{value}` instead of `{old}`; "
                             f"{len(plan.uses)} use(s) screened", obligations)
    return RewriteResult(new_module.code, (rl, rl),
                         f"`{fname}` returns the Python int `{value}` instead of `{old}`; "
                         f"{len(plan.uses)} use(s) of {', '.join(f'`{x}`' for x in sorted(set(locals_)))} screened",
                         obligations)


def _rewrite_indexed(module: cst.Module, plan: IndexedPlan, positions: dict) -> RewriteResult:
    """The indexed form (vits): ``L[0]`` read as the snapshot int where a run-time test shows it
    is an int in the constructor's range; the obligations re-read that form from the mended file."""
    new, snap, (first, last) = rewrite_indexed(module, plan, positions)
    lo, hi = RANGES[plan.ctor]
    fname, value = plan.caller.name.value, code_of(plan.value).strip()
    where = {"function": fname, "line": first + 1, "local": plan.local, "snapshot": snap, "ctor": plan.ctor,
             "lo": lo, "hi": hi, "value": value, "form": "inline" if plan.inline else "tensor"}
    shift = [{"value": c, "line": ln + (ln >= first), "function": f} for f, c, ln in plan.slices]
    obligations = [
        {"kind": "scalar-index-exact", "ctor": plan.ctor, "lo": lo, "hi": hi},
        {"kind": "scalar-index-guarded", **where},
        {"kind": "scalar-index-slice-only", **where},
        {"kind": "scalar-index-receivers-observed", **where, "uses": shift},
    ]
    via = f" (passed to {', '.join(f'`{c}`' for c in sorted(set(plan.callees)))})" if plan.callees else ""
    return RewriteResult(new.code, (first, last),
                         f"`{plan.local}{'' if plan.inline else '[0]'}` in `{fname}`{via} reads the Python int "
                         f"`{value}` where a run-time test "
                         f"shows it is an int in {plan.ctor}'s range, else the tensor as before; "
                         f"{len(plan.slices)} slice bound(s) screened", obligations)
