"""item-operand: :func:`rewrite`, ``x = T.item()`` -> ``x = T.item() if <autocast> else
T.detach().reshape(()).clone()``, with its proof obligations, or a decline."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, add_import, annotated_line, autocast_on, code_of, torch_name
from mend.rules.item_operand.screen import NAME, Plan, choice_text, inline_screen, screen


def new_value(plan: Plan, torch_name: str = "torch") -> str:
    """The kept tensor: detached (``.item()`` carries no gradient), 0-d (a 1-element tensor of
    any rank would broadcast), and a copy (an in-place write to T after this line must not
    reach the value, as it does not reach the Python number). Inside ``torch.autocast`` the
    read stays ``.item()``: there a use may compute in bfloat16/float16, where Inductor casts a
    0-d tensor operand first and a Python number not (a held-out review: 86 of 262144
    comparisons differ), so the dtypes the obligations were proved over would not hold. Likewise
    under a default dtype other than float32 (``torch.set_default_dtype(torch.float64)``: the
    Python float is typed float64 there, the proofs typed it float32). Dynamo folds the test to
    a constant and guards autocast's state and the default dtype (torch 2.13: GLOBAL_STATE), so
    outside them no break remains and inside them the original runs. Under TorchScript too
    (``torch.jit.script`` of the mended module scripts the original read)."""
    t = code_of(plan.tensor)
    on = f"{autocast_on(torch_name)} or {torch_name}.get_default_dtype() != {torch_name}.float32"
    if plan.choice is not None:   # `x = A if P else B`: bool(P) is `P != 0` (NaN is true), as `.bool()` casts
        was = f"({choice_text(plan.name, plan.tensor, plan.choice).split(' = ', 1)[1]})"
        kept = [f"{torch_name}.tensor({code_of(v).strip()}, dtype={torch_name}.{plan.choice.dtype})"
                for v in plan.choice.sides]
        where = kept[-1]
        for test, side in reversed(list(zip(plan.choice.tests or (plan.tensor,), kept))):
            where = f"{torch_name}.where(({' '.join(code_of(test).split())}).reshape(()).bool(), {side}, {where})"
        return f"{was} if {torch_name}.jit.is_scripting() else ({was} if {on} else {where})"
    # TorchScript compiles only the taken side of `is_scripting()` (a ternary's test, not an
    # `or` operand) and rejects is_autocast_enabled("cpu"): it scripts the original read
    read = f"int({t}.item())" if plan.int_of else f"{t}.item()"
    return (f"{read} if {torch_name}.jit.is_scripting() else "
            f"({read} if {on} else {t}.detach().reshape(()).clone())")


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with ``x = T.item()`` on ``line`` kept as a 0-d tensor (see the package docstring)."""
    wrapper = MetadataWrapper(module)
    plan = screen(wrapper, line)
    if isinstance(plan, Decline):
        inline = inline_screen(wrapper, line)
        if inline is None:
            return plan
        if isinstance(inline, Decline):
            return inline
        return _rewrite_inline(wrapper, line, inline)
    pos = wrapper.resolve(PositionProvider)
    torch, add = torch_name(module)
    value = new_value(plan, torch)
    end = line
    if isinstance(plan.line, cst.If):   # the statement form becomes the one line of its ternary
        end = pos[plan.line].end.line
        old = choice_text(plan.name, plan.tensor, plan.choice)
        arms = [f"{'if' if i == 0 else 'elif'} {' '.join(code_of(t).split())}: {plan.name} = {code_of(v).strip()}"
                for i, (t, v) in enumerate(zip(plan.choice.tests, plan.choice.sides))]
        was = " / ".join(arms + [f"else: {plan.name} = {code_of(plan.choice.sides[-1]).strip()}"])
        new_line = cst.SimpleStatementLine(
            body=[cst.parse_statement(f"{plan.name} = {value}\n").body[0]], leading_lines=plan.line.leading_lines,
            trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                       comment=cst.Comment(f"# mend: {NAME} (was: {was})")))
    else:
        new_line, old = annotated_line(plan.line, f"{plan.name} = {value}", NAME)
    tree = _imported(wrapper.module.visit(Replace(plan.line, new_line)), add)
    uses, obligations = _obligations(plan, line, pos)
    kept = "stays a 0-d tensor" if plan.choice is None else f"is a 0-d {plan.choice.dtype} tensor chosen by torch.where"
    detail = f"`{old}` -> `{plan.name} = {value}` ({plan.name} {kept} outside torch.autocast; {len(uses)} use(s))"

    return RewriteResult(tree.code, (line, end), detail, obligations)


def _imported(tree: cst.Module, add: bool) -> cst.Module:
    # on the import block's last line, so that no line below moves (replayed warnings name lines)
    return add_import(tree, "import torch", same_line=True) if add else tree


def _obligations(plan: Plan, line: int, pos) -> tuple[list[dict], list[dict]]:
    """(uses, obligations): each use's other operand, observed where it is read (its line)."""
    tensor = code_of(plan.tensor)
    # the facts are observed on the rewritten code, where an `if`/`else` choice is one line
    shift = pos[plan.line].end.line - line if isinstance(plan.line, cst.If) else 0
    uses = [{"value": code_of(u.other), "op": u.op, "line": pos[u.other].start.line - shift} for u in plan.uses]
    count = {"count_of": code_of(plan.counted)} if plan.counted is not None else {}
    # a choice: the value is one of two literals, kept in `kept` (the read tensor is the test P)
    chosen = {"kept": plan.choice.dtype, "values": [repr(v) for v in plan.choice.values]} \
        if plan.choice is not None else {}
    # each elif's test too: the nested torch.where reshapes every one of them
    later = [{"kind": "item-operand-tensor", "expr": " ".join(code_of(t).split()), "line": line}
             for t in (plan.choice.tests[1:] if plan.choice is not None else ())]
    return uses, [
        {"kind": "item-operand-tensor", "expr": tensor, "line": line, **count,
         **({"int_of": True} if plan.int_of else {})}, *later,
        {"kind": "item-operand-keep-type", "expr": tensor, "line": line, "uses": uses, **chosen},
        {"kind": "item-operand-exact", "expr": tensor, "line": line, "uses": uses, **count, **chosen},
    ]


def _rewrite_inline(wrapper: MetadataWrapper, line: int, plan: Plan) -> RewriteResult:
    """``... / T.item()`` -> ``... / T.detach().reshape(()).clone()`` on ``line``, in place."""
    pos = wrapper.resolve(PositionProvider)
    was = code_of(plan.call).strip()
    torch, add = torch_name(wrapper.module)
    value = new_value(plan, torch)
    new = cst.parse_expression(f"({value})").with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    stmt = plan.line.visit(Replace(plan.call, new))
    text = code_of(stmt.body[0]).strip()
    new_line, _ = annotated_line(plan.line, text, NAME)
    tree = _imported(wrapper.module.visit(Replace(plan.line, new_line)), add)
    _, obligations = _obligations(plan, line, pos)
    return RewriteResult(tree.code, (line, line),
                         f"`{was}` -> `({value})` (a 0-d tensor outside torch.autocast, used in place)", obligations)
