"""dead-host-work: the rewrite. ``torch.jit.isinstance(obj, T)`` (a function Dynamo skips) is
``isinstance(obj, T)`` when ``T`` is a plain class; an unused ``r = repr(t)`` is guarded so that
it runs only when ``t`` is not a plain ``torch.Tensor`` (whose repr is pure and whose text
nobody reads)."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, ReplaceAll, add_helpers, code_of
from mend.rules.dead_host_work.screen import NAME, Plan, screen

# added once to a module whose `inspect.Signature.bind` is replaced (signature-bind): plain
# Python over tuples, a frozenset and a dict that Dynamo traces, where bind iterates the
# signature's mappingproxy (refused after a dict mutation earlier in the trace)
BIND_HELPERS = '''
_MEND_UNBOUND = object()  # mend: dead-host-work -- the lookup's "not decided here: call bind"


def _mend_bind_table(signature):
    """The parameters of ``signature`` as constants (built once, where the decorator runs), or
    None -- every call then goes to bind -- unless it is a plain, well-ordered inspect.Signature
    (a subclass may override bind; ``__validate_parameters__=False`` may disorder the kinds)."""
    if type(signature).__module__ != "inspect" or type(signature).__qualname__ != "Signature":
        return None
    params = list(signature.parameters.values())
    order = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD")
    kinds = [order.index(p.kind.name) for p in params]
    positional_defaults = [p.default is not p.empty for p in params if kinds[params.index(p)] < 2]
    if (kinds != sorted(kinds) or any(a and not b for a, b in zip(positional_defaults, positional_defaults[1:]))
            or type(signature.parameters).__name__ != "mappingproxy"):
        return None
    positional = tuple(p.name for p in params if p.kind.name in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"))
    keyword = frozenset(p.name for p in params if p.kind.name in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"))
    required = tuple(p.name for p in params
                     if p.default is p.empty and p.kind.name not in ("VAR_POSITIONAL", "VAR_KEYWORD"))
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    var_keyword = any(p.kind.name == "VAR_KEYWORD" for p in params)
    return positional, keyword, required, defaults, var_keyword


def _mend_bound(table, name, args, kwargs, unbound):
    """``signature.bind(*args, **kwargs)``, defaults applied, ``.arguments[name]`` -- or
    ``unbound`` when this call is not one it decides (the caller then runs ``bind`` itself)."""
    if table is None or type(name) is not str:
        return unbound
    positional, keyword, required, defaults, var_keyword = table
    if len(args) > len(positional) or name not in keyword:
        return unbound
    given = positional[:len(args)]
    for key in kwargs:
        if key in given or (key not in keyword and (not var_keyword or key in positional)):
            return unbound
    for key in required:
        if key not in given and key not in kwargs:
            return unbound
    if name in kwargs:
        return kwargs[name]
    if name in given:
        return args[given.index(name)]
    return defaults[name]
'''


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
    if plan.kind == "signature-bind":
        return _rewrite_bind(wrapper, plan, pos)
    if plan.kind == "debug-text":
        return _rewrite_debug_text(wrapper, plan, pos)
    stmt_line = plan.line_stmt
    start, end = pos[stmt_line].start.line, pos[stmt_line].end.line
    t, arg = plan.torch_name, plan.arg
    inner = stmt_line.with_changes(leading_lines=())
    guard = cst.parse_statement(f"if {repr_kept(arg, t)}:  {MARK} (a plain tensor's {plan.func}() is pure; "
                                f"`{plan.name}` is never read)\n    pass\n")
    guard = guard.with_changes(body=guard.body.with_changes(body=[inner]), leading_lines=stmt_line.leading_lines)
    new_module = wrapper.module.visit(Replace(stmt_line, guard))
    obligations = [
        {"kind": "local-never-read", "name": plan.name, "function": plan.function.name.value, "line": start},
        {"kind": "plain-tensor-repr-pure", "name": arg, "call": plan.func, "line": start},
    ]
    return RewriteResult(new_module.code, (start, end),
                         f"unused `{code_of(plan.stmt).strip()}` runs only when `{arg}` is not a plain strided "
                         "torch.Tensor of a standard dtype", obligations)


def flag_line(module: cst.Module, line: int) -> int | None:
    """The line of the ``if <flag>:`` the debug text on ``line`` moves under, which the
    differential test forces both ways (``Rule.forced_line``), else None."""
    wrapper = MetadataWrapper(module)
    finder = _Find(line)
    wrapper.visit(finder)
    plan = screen(*finder.found) if finder.found is not None else None
    if not isinstance(plan, Plan) or plan.kind != "debug-text":
        return None
    return wrapper.resolve(PositionProvider)[plan.flag_if].start.line


def _rewrite_debug_text(wrapper: MetadataWrapper, plan, pos) -> RewriteResult:
    """``r = <text of t>`` read only under the ``if <flag>:`` right after it (helper-92's c30)::

        if <repr_kept(t)>:  # mend: dead-host-work (...)
            r = <text of t>          # not a plain tensor: as before, before the flag
        if <flag>:
            if not (<repr_kept(t)>):
                r = <text of t>      # a plain tensor: only where the text is read
            <the body, as written>

    For a plain strided tensor of a reviewed dtype the text is pure and cannot raise, so
    computing it after the flag is read, and only when the flag holds, changes nothing
    observable; Dynamo decides both guards at trace time, so a false flag leaves no break."""
    stmt_line, flag_if = plan.line_stmt, plan.flag_if
    start = pos[stmt_line].start.line
    end = pos[flag_if.test].end.line
    t, arg = plan.torch_name, plan.arg
    inner = stmt_line.with_changes(leading_lines=())
    flag = code_of(flag_if.test).strip()
    kept = repr_kept(arg, t)
    first = cst.parse_statement(f"if {kept}:  {MARK} (`{plan.name}` is read only under `if {flag}:`; a plain "
                                "tensor's text is pure)\n    pass\n")
    first = first.with_changes(body=first.body.with_changes(body=[inner]), leading_lines=stmt_line.leading_lines)
    late = cst.parse_statement(f"if not ({kept}):\n    pass\n")
    late = late.with_changes(body=late.body.with_changes(body=[inner]))
    body = flag_if.body.with_changes(body=[late, *flag_if.body.body])
    new_module = wrapper.module.visit(ReplaceAll({id(stmt_line): first, id(flag_if): flag_if.with_changes(body=body)}))
    obligations = [{"kind": "debug-text-deferred", "name": plan.name, "tensor": arg, "flag": flag,
                    "function": plan.function.name.value, "line": start}]
    return RewriteResult(new_module.code, (start, end),
                         f"`{plan.name} = ...` (a text of `{arg}`, read only under `if {flag}:`) computed under the "
                         f"flag when `{arg}` is a plain strided torch.Tensor of a standard dtype", obligations)


# dtypes whose repr formats without raising or warning (helper-70: bits8 and uint1..uint7
# raise NotImplementedError; complex32 warns that it is experimental)
REPR_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128", "uint8", "int8", "int16",
               "int32", "int64", "bool")


def repr_kept(arg: str, t: str) -> str:
    """When the original ``repr``/``str`` still runs: ``arg`` is not a plain strided tensor of a
    dtype in REPR_DTYPES (a nested tensor is strided too, but has no sizes: ``tuple(h.shape)``
    raised there, helper-90). Dynamo decides each clause at trace time (no break)."""
    dtypes = ", ".join(f"{t}.{d}" for d in REPR_DTYPES)
    return (f"type({arg}) is not {t}.Tensor or {arg}.layout is not {t}.strided or {arg}.is_nested "
            f"or {arg}.dtype not in ({dtypes})")


def _rewrite_bind(wrapper: MetadataWrapper, plan, pos) -> RewriteResult:
    """``A = S.bind(...)``; ``A.apply_defaults()``; ``... A.arguments[K] ...`` becomes a lookup in
    a table read from ``S`` where ``S`` is made, falling back to the same three statements
    when the lookup does not decide the call (see verifier/encoders/bind_lookup.py)."""
    b = plan.bind
    sig, key, bound = b["signature"], code_of(b["key"]).strip(), b["bound"]
    table = f"_mend_bind_{sig}"
    args = "(" + ", ".join(b["positional"]) + ("," if len(b["positional"]) == 1 else "") + ")"
    start, end = pos[plan.line_stmt].start.line, pos[b["use"]].end.line
    lookup = cst.parse_statement(f"_mend_value = _mend_bound({table}, {key}, {args}, {b['kwargs'] or '{}'}, "
                                 f"_MEND_UNBOUND)  {MARK} (was: {sig}.bind)\n")
    fallback = cst.parse_statement("if _mend_value is _MEND_UNBOUND:  # not decided: bind validates the call\n"
                                   "    pass\n")
    block = b["block"]
    body = list(block.body)
    i = b["index"]
    keep = [body[i].with_changes(leading_lines=()), body[i + 1],
            cst.parse_statement(f"_mend_value = {bound}.arguments[{key}]\n")]
    fallback = fallback.with_changes(body=fallback.body.with_changes(body=keep))
    use = body[i + 2].visit(Replace(b["read"], cst.Name("_mend_value")))
    new_block = block.with_changes(body=[*body[:i], lookup.with_changes(leading_lines=body[i].leading_lines),
                                         fallback, use, *body[i + 3:]])
    outer = b["outer"]
    obody = list(outer.body.body)
    j = next(k for k, st in enumerate(obody) if st is b["made"])
    made = cst.parse_statement(f"{table} = _mend_bind_table({sig})  {MARK}\n")
    new_outer = outer.with_changes(body=outer.body.with_changes(body=[*obody[:j + 1], made, *obody[j + 1:]]))
    new_outer = new_outer.visit(Replace(block, new_block))
    module = wrapper.module.visit(Replace(outer, new_outer))
    module = add_helpers(module, BIND_HELPERS)   # before any module code: decorators run at import time
    obligations = [{"kind": "bind-lookup-agrees", "signature": sig, "selected": key, "sentinel": "_MEND_UNBOUND",
                    "line": start}]
    return RewriteResult(module.code, (start, end),
                         f"`{bound} = {sig}.bind(...)`; `.arguments[{key}]` -> a lookup in a table read from `{sig}` "
                         "once, falling back to bind for any call it does not decide", obligations)
