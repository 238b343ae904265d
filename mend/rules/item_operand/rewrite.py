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
    if plan.choice is not None:
        return _choice_value(plan, torch_name, on)
    # TorchScript compiles only the taken side of `is_scripting()` (a ternary's test, not an
    # `or` operand) and rejects is_autocast_enabled("cpu"): it scripts the original read
    read = f"int({t}.item())" if plan.int_of else f"{t}.item()"
    return (f"{read} if {torch_name}.jit.is_scripting() else "
            f"({read} if {on} else {t}.detach().reshape(()).clone())")


def _choice_value(plan: Plan, torch: str, on: str) -> str:
    """``x = A if P else B`` kept as ``torch.where(P.reshape(()).bool(), A_t, B_t)`` (``bool`` of
    a one-element tensor is ``!= 0``, NaN true, as the ``.bool()`` cast gives), where P is a
    plain one-element tensor at run time; anything else (a Python bool from ``flag and t > 0``,
    a float argument, a subclass, several elements) takes the original choice, decided by Dynamo
    at trace time (helper-74: a test that was a Python ``False`` on a later call met
    ``.reshape``). Each test is bound once with ``:=`` to ``_mend_p<i>`` in the guard (a lambda
    would be a second frame on the line, where the facts are observed per line); an elif
    chain's later tests are evaluated by the guard (screened: comparisons of names, attributes
    and literals), and again by the fallback where the guard fails."""
    tests = [code_of(t).strip() for t in (plan.choice.tests or (plan.tensor,))]
    sides = [code_of(v).strip() for v in plan.choice.sides]
    ps = ["_mend_p"] if len(tests) == 1 else [f"_mend_p{i}" for i in range(len(tests))]

    def chain(conds):
        text = sides[-1]
        for c, v in reversed(list(zip(conds, sides))):
            text = f"{v} if {c} else {text}"
        return text
    kept = [f"{torch}.tensor({v}, dtype={torch}.{plan.choice.dtype})" for v in sides]
    where = kept[-1]
    for p, side in reversed(list(zip(ps, kept))):
        where = f"{torch}.where({p}.reshape(()).bool(), {side}, {where})"
    guard = " and ".join(f"type({p} := {t}) is {torch}.Tensor and {p}.numel() == 1" for p, t in zip(ps, tests))
    was = f"({chain(tests)})"
    fallback = f"({chain([ps[0], *tests[1:]])})"   # the first test is bound; later ones run as before
    return f"{was} if {torch}.jit.is_scripting() else ({was} if {on} else ({where} if {guard} else {fallback}))"


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
    if isinstance(plan.line, cst.If):
        # the statement form becomes one statement on the `if`'s last line, its other lines
        # comments (the original, as written): no later line moves (helper-74: a warning's
        # and a log record's line moved up by 3)
        end = pos[plan.line].end.line
        col = pos[plan.line].start.column
        old = choice_text(plan.name, plan.tensor, plan.choice)
        commented = [cst.EmptyLine(comment=cst.Comment(f"# {text[col:]}".rstrip()))
                     for text in module.code.splitlines()[line - 1:end - 1]]
        new_line = cst.SimpleStatementLine(
            body=[cst.parse_statement(f"{plan.name} = {value}\n").body[0]],
            leading_lines=[*plan.line.leading_lines, *commented],
            trailing_whitespace=cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                                       comment=cst.Comment(f"# mend: {NAME} (was: the `if` above)")))
    else:
        new_line, old = annotated_line(plan.line, f"{plan.name} = {value}", NAME)
    tree = _imported(wrapper.module.visit(Replace(plan.line, new_line)), add)
    uses, obligations = _obligations(plan, end, pos)
    kept = "stays a 0-d tensor" if plan.choice is None else f"is a 0-d {plan.choice.dtype} tensor chosen by torch.where"
    detail = f"`{old}` -> `{plan.name} = {value}` ({plan.name} {kept} outside torch.autocast; {len(uses)} use(s))"
    return RewriteResult(tree.code, (line, end), detail, obligations)


def _imported(tree: cst.Module, add: bool) -> cst.Module:
    # on the import block's last line, so that no line below moves (replayed warnings name lines)
    return add_import(tree, "import torch", same_line=True) if add else tree


def _obligations(plan: Plan, line: int, pos) -> tuple[list[dict], list[dict]]:
    """(uses, obligations): each use's other operand, observed where it is read (its line)."""
    tensor = code_of(plan.tensor)
    # (the facts are observed on the rewritten code: a choice's statement is on the `if`'s last line)
    uses = [{"value": code_of(u.other), "op": u.op, "line": pos[u.other].start.line} for u in plan.uses]
    count = {"count_of": code_of(plan.counted)} if plan.counted is not None else {}
    # a choice: the value is one of its literals, kept as a 0-d `kept` tensor (the read tensor is the test P)
    chosen = {"kept": plan.choice.dtype, "values": [repr(v) for v in plan.choice.values]} \
        if plan.choice is not None else {}
    # each elif's test too: the nested torch.where reshapes every one of them
    later = [{"kind": "item-operand-tensor", "expr": code_of(t).strip(), "line": line}
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
