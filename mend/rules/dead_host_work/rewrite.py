"""dead-host-work: the rewrite. ``torch.jit.isinstance(obj, T)`` (a function Dynamo skips) is
``isinstance(obj, T)`` when ``T`` is a plain class; an unused ``r = repr(t)`` is guarded so that
it runs only when ``t`` is not a plain ``torch.Tensor`` (whose repr is pure and whose text
nobody reads)."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of
from mend.rules.dead_host_work.screen import NAME, screen

MARK = f"# mend: {NAME}"


class _Find(cst.CSTVisitor):
    """The innermost statement covering ``line`` (a compound one only through its header)."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int) -> None:
        self.line, self.found = line, None
        self.stack: list[cst.CSTNode] = []

    def _covers(self, node) -> bool:
        pos = self.get_metadata(PositionProvider, node)
        if isinstance(node, cst.BaseCompoundStatement):
            head = _header_node(node)
            end = self.get_metadata(PositionProvider, head).end.line if head is not None else pos.start.line
            return pos.start.line <= self.line <= end
        return pos.start.line <= self.line <= pos.end.line

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)) and self._covers(node):
            self.found = (node, list(self.stack))
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _header_node(node):
    for attr in ("test", "iter"):
        if getattr(node, attr, None) is not None:
            return getattr(node, attr)
    items = getattr(node, "items", None)
    return items[-1] if items else None


def _with_comment(node: cst.CSTNode, text: str) -> cst.CSTNode:
    comment = cst.Comment(f"{MARK} (was: {text})")
    if isinstance(node, cst.SimpleStatementLine) and node.trailing_whitespace.comment is None:
        return node.with_changes(trailing_whitespace=cst.TrailingWhitespace(
            whitespace=cst.SimpleWhitespace("  "), comment=comment, newline=node.trailing_whitespace.newline))
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock) and body.header.comment is None:
        return node.with_changes(body=body.with_changes(header=cst.TrailingWhitespace(
            whitespace=cst.SimpleWhitespace("  "), comment=comment, newline=body.header.newline)))
    return node


class _Calls(cst.CSTTransformer):
    def __init__(self, calls):
        self.calls = {id(c) for c in calls}

    def leave_Call(self, original_node, updated_node):
        if id(original_node) in self.calls:
            return updated_node.with_changes(func=cst.Name("isinstance"))
        return updated_node


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the dead host work on ``line`` removed from the traced path, or a Decline."""
    wrapper = MetadataWrapper(module)
    finder = _Find(line)
    wrapper.visit(finder)
    if finder.found is None:
        return Decline(NAME, f"no statement covers line {line}")
    node, ancestors = finder.found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return plan
    pos = wrapper.resolve(PositionProvider)
    if plan.kind == "jit-isinstance":
        target = plan.line_stmt
        start = pos[target].start.line
        head = _header_node(target) if isinstance(target, cst.BaseCompoundStatement) else None
        end = pos[head].end.line if head is not None else pos[target].end.line
        new = target.visit(_Calls([c for c, _ in plan.calls]))
        new = _with_comment(new, f"{plan.torch_name}.jit.isinstance")
        new_module = wrapper.module.visit(Replace(target, new))
        obligations = [{"kind": "jit-isinstance-plain", "obj": code_of(c.args[0].value).strip(), "target": t,
                        "line": pos[c].start.line} for c, t in plan.calls]
        return RewriteResult(new_module.code, (start, end),
                             "torch.jit.isinstance(obj, " + ", ".join(t for _, t in plan.calls)
                             + ") -> builtin isinstance (a plain class: the same test)", obligations)
    stmt_line = plan.line_stmt
    start, end = pos[stmt_line].start.line, pos[stmt_line].end.line
    t, arg = plan.torch_name, plan.arg
    inner = stmt_line.with_changes(leading_lines=())
    guard = cst.parse_statement(f"if type({arg}) is not {t}.Tensor:  {MARK} (a plain tensor's {plan.func}() is pure; "
                                f"`{plan.name}` is never read)\n    pass\n")
    guard = guard.with_changes(body=guard.body.with_changes(body=[inner]), leading_lines=stmt_line.leading_lines)
    new_module = wrapper.module.visit(Replace(stmt_line, guard))
    obligations = [
        {"kind": "local-never-read", "name": plan.name, "function": plan.function.name.value, "line": start},
        {"kind": "plain-tensor-repr-pure", "name": arg, "call": plan.func, "line": start},
    ]
    return RewriteResult(new_module.code, (start, end),
                         f"unused `{plan.name} = {plan.func}({arg})` runs only when `{arg}` is not a plain "
                         "torch.Tensor", obligations)
