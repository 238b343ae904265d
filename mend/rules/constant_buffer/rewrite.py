"""constant-buffer: the rewrite. ``__init__`` keeps its buffers and also keeps their values as
Python ints (twins, ``None`` unless each is an exact int in (-2**15, 2**15)); ``forward``
hands over to a mirror that reads the twins where the original reads the buffers; the
original ``forward`` body stays, for a module whose twins are not exact ints or for a
subclass. The obligations say why the mirror computes what the original computes."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of
from mend.rules.constant_buffer.domain import RATIO_C, self_attr
from mend.rules.constant_buffer.screen import NAME, PREFIX, RATIO_A, RATIO_S, SIZE_BOUND, TWIN_BOUND, Plan, plan_for


def _pow2(n: int) -> str:
    return f"2**{n.bit_length() - 1}"


class _Mirror(cst.CSTTransformer):
    """A method's body on the twins: ``self.B`` -> ``self._mend_int_B``, ``self.M(`` ->
    ``self._mend_int_M(`` for a mirrored ``M``, each ceil of a ratio -> the exact int form
    under the lemma's guard (the original tensor expression otherwise), the ratio's own
    statement dropped."""

    def __init__(self, plan: Plan, replace: dict[int, cst.BaseExpression], drop: set[int]):
        self.plan, self.replace, self.drop = plan, replace, drop

    def leave_Attribute(self, original_node, updated_node):
        attr = self_attr(original_node)
        if attr in self.plan.twins:
            return updated_node.with_changes(attr=cst.Name(PREFIX + attr))
        return updated_node

    def leave_Call(self, original_node, updated_node):
        if id(original_node) in self.replace:
            return self.replace[id(original_node)]
        func = updated_node.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and func.attr.value in self.plan.mirrors:
            return updated_node.with_changes(func=func.with_changes(attr=cst.Name(PREFIX + func.attr.value)))
        return updated_node

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if id(original_node) in self.drop:
            return cst.RemoveFromParent()
        return updated_node


def _twin_expr(node: cst.BaseExpression, plan: Plan) -> str:
    """``node`` with every ``self.B`` read as its twin (a ratio's numerator)."""
    return code_of(node.visit(_Mirror(plan, {}, set()))).strip()


def _ratio_call(ratio, plan: Plan, torch: str) -> cst.BaseExpression:
    q = ratio.q
    c = "" if q.c == 0 else f" + {q.c}" if q.c > 0 else f" - {-q.c}"
    guard = (f"-{_pow2(RATIO_A)} < {PREFIX}a < {_pow2(RATIO_A)} and 0 < {PREFIX}s <= {RATIO_S} and "
             f"{torch}.get_default_dtype() in ({torch}.float32, {torch}.float64)")
    fallback = f"int({torch}.ceil({code_of(q.expr).strip()}).to({torch}.int64))"
    # (a + s - 1) // s is the exact ceil for s >= 1; with a symbolic size, Inductor lowers it
    # where it failed on -(-a // s) (a convolution after a pad, dynamic batch: measured)
    text = (f"(lambda {PREFIX}a, {PREFIX}s: ({PREFIX}a + {PREFIX}s - 1) // {PREFIX}s{c} if {guard} else {fallback})"
            f"({_twin_expr(q.a_node, plan)}, self.{PREFIX}{q.s})")
    return cst.parse_expression(text)


def _mirror(fdef: cst.FunctionDef, plan: Plan, torch: str) -> cst.FunctionDef:
    ratios = [r for r in plan.ratios if r.method == fdef.name.value]
    replace = {id(r.line_node): _ratio_call(r, plan, torch) for r in ratios}
    drop = {id(r.q_stmt) for r in ratios if r.q_stmt is not None}
    body = fdef.body.visit(_Mirror(plan, replace, drop))
    note = cst.EmptyLine(comment=cst.Comment(f"# mend: {NAME} -- `{fdef.name.value}` on the Python twins of the int "
                                             "buffers (see `forward`)"))
    # the mirror may return a Python int where the original returns a tensor: no annotation
    return fdef.with_changes(name=cst.Name(PREFIX + fdef.name.value), body=body, returns=None,
                             leading_lines=(cst.EmptyLine(indent=False), note))


def _forward_args(fdef: cst.FunctionDef) -> str:
    p = fdef.params
    out = [x.name.value for x in (list(p.posonly_params) + list(p.params))[1:]]   # without `self`
    if isinstance(p.star_arg, cst.Param):
        out.append("*" + p.star_arg.name.value)
    out += [f"{x.name.value}={x.name.value}" for x in p.kwonly_params]
    if p.star_kwarg is not None:
        out.append("**" + p.star_kwarg.name.value)
    return ", ".join(out)


def _one_expr(node: cst.BaseExpression) -> str:
    """``node``'s source as one expression statement's value: parenthesised when it spans lines
    (a line break inside a call's argument is legal only within brackets: helper-58)."""
    text = code_of(node).strip()
    return f"({text})" if "\n" in text else text


def _init_statements(plan: Plan, module: cst.Module) -> list[cst.BaseStatement]:
    locals_ = sorted(plan.tensor_locals)
    names = ", ".join(f"{PREFIX}{v}" for v in locals_) + ("," if len(locals_) == 1 else "")
    lines = [f"{PREFIX}exact = all(type(v) is int and -{_pow2(TWIN_BOUND)} < v < {_pow2(TWIN_BOUND)} "
             f"for v in ({names}))"]
    for attr, src in plan.twins.items():
        lines.append(f"self.{PREFIX}{attr} = {src} if {PREFIX}exact else None")
    ok = " and ".join([f"{PREFIX}exact"] + [f"self.{PREFIX}{d} >= 1" for d in plan.divisors])
    lines.append(f"self.{PREFIX}ok = {ok}")
    stmts = [cst.parse_statement(line + "\n", config=module.config_for_parsing) for line in lines]
    note = cst.EmptyLine(comment=cst.Comment(f"# mend: {NAME} -- the int buffers above as Python ints (twins), "
                                             "read by `forward` instead of the buffers"))
    stmts[0] = stmts[0].with_changes(leading_lines=(note,))
    return stmts


class _Apply(cst.CSTTransformer):
    def __init__(self, plan: Plan, module: cst.Module, torch: str):
        self.plan, self.module, self.torch = plan, module, torch
        self.klass = plan.klass

    def leave_FunctionDef(self, original_node, updated_node):
        if original_node is self.plan.init:
            body = []
            for orig, stmt in zip(original_node.body.body, updated_node.body.body):
                local = next((v for v, s in self.plan.tensor_locals.items() if s is orig), None)
                if local is not None:
                    # `v = torch.tensor(E, ...)`, or a registration holding it inline: the twin
                    # `_mend_int_v = E` on the line before, the tensor made from the twin
                    made = self.plan.inline.get(local) or orig.body[0].value
                    twin = cst.parse_statement(f"{PREFIX}{local} = {_one_expr(made.args[0].value)}\n",
                                               config=self.module.config_for_parsing)
                    body.append(twin.with_changes(leading_lines=orig.leading_lines))
                    new_made = made.with_changes(args=[made.args[0].with_changes(value=cst.Name(PREFIX + local)),
                                                       *made.args[1:]])
                    body.append(orig.visit(Replace(made, new_made)).with_changes(leading_lines=()))
                    if orig is self.plan.last_registration:
                        body += _init_statements(self.plan, self.module)
                    continue
                body.append(stmt)
                if orig is self.plan.last_registration:
                    body += _init_statements(self.plan, self.module)
            return updated_node.with_changes(body=updated_node.body.with_changes(body=body))
        if original_node is self.plan.forward:
            # TorchScript compiles only the other branch of `is_scripting()` (a static if)
            guard = cst.parse_statement(
                f"if not {self.torch}.jit.is_scripting():  # mend: {NAME}\n"
                f"    if type(self) is {self.klass.name.value} and getattr(self, \"{PREFIX}ok\", False):\n"
                f"        return self.{PREFIX}forward({_forward_args(original_node)})\n",
                config=self.module.config_for_parsing)
            stmts = list(updated_node.body.body)
            doc = 1 if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(
                stmts[0].body[0], cst.Expr) and isinstance(stmts[0].body[0].value, cst.SimpleString) else 0
            return updated_node.with_changes(body=updated_node.body.with_changes(
                body=[*stmts[:doc], guard, *stmts[doc:]]))
        return updated_node

    def leave_ClassDef(self, original_node, updated_node):
        if original_node is not self.klass:
            return updated_node
        methods = {f.name.value: f for f in original_node.body.body if isinstance(f, cst.FunctionDef)}
        mirrors = [_mirror(methods[name], self.plan, self.torch) for name in self.plan.mirrors]
        return updated_node.with_changes(body=updated_node.body.with_changes(
            body=[*updated_node.body.body, *mirrors]))


def _class_at(module: cst.Module, line: int) -> tuple[cst.ClassDef, tuple[int, int]] | None:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    best = None
    for node, pos in positions.items():
        if isinstance(node, cst.ClassDef) and pos.start.line <= line <= pos.end.line:
            if best is None or pos.start.line >= best[1][0]:
                best = (node, (pos.start.line, pos.end.line))
    return best


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the class enclosing ``line`` mirrored on Python twins of its int
    buffers, or a Decline."""
    found = _class_at(module, line)
    if found is None:
        return Decline(NAME, f"line {line} is not inside a class")
    klass, span = found
    plan = plan_for(module, klass)
    if isinstance(plan, Decline):
        return plan
    torch = plan.torch
    new = module.visit(_Apply(plan, module, torch))
    name = klass.name.value
    offsets = sorted({r.q.c for r in plan.ratios})
    leaves = sorted(f"leaf_{v}" for v in plan.tensor_locals)
    obligations = [
        {"kind": "int-terms-in-range", "class": name, "terms": list(plan.terms),
         "twins": dict(plan.twin_terms), "leaves": leaves, "twin_bound": TWIN_BOUND, "size_bound": SIZE_BOUND,
         "ratio_a": RATIO_A, "ratio_s": RATIO_S},
        {"kind": "int-buffers-unwritten", "class": name, "attributes": sorted(plan.twins),
         "typed": sorted(set(plan.mirrors) | set(plan.generic))},
        {"kind": "int-guards-emitted", "class": name, "locals": sorted(plan.tensor_locals),
         "attributes": sorted(plan.twins),
         "divisors": list(plan.divisors), "twin_bound": TWIN_BOUND, "ratios": len(plan.ratios),
         "ratio_a": RATIO_A, "ratio_s": RATIO_S, "torch": torch},
    ]
    if plan.ratios:
        obligations.append({"kind": "ceil-ratio-exact", "offsets": offsets, "a_bound": RATIO_A, "s_max": RATIO_S,
                            "c_max": RATIO_C, "dtypes": ["float32", "float64"]})
    detail = (f"`{name}`: the int buffers {', '.join(f'`{a}`' for a in sorted(plan.twins))} also kept as Python ints; "
              f"{', '.join(f'`{x}`' for x in plan.mirrors)} mirrored on them ({len(plan.ratios)} ceil-of-ratio "
              f"site(s) made exact int arithmetic; {len(plan.sinks)} number use(s))")
    return RewriteResult(new.code, span, detail, obligations)
