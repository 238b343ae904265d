"""forward-attribute: the rewrite. ``self.X = self.X.to(...)`` stores the conversion's result
through ``nn.Module.__setattr__`` on every call; when the conversion changed nothing it
stores the very tensor already stored, and for a tensor built with ``nn.Buffer`` that store
(``register_buffer``) breaks the graph on torch 2.13. The rewrite keeps the conversion in a
local and stores it back only when it is a new object::

    X = self.X.to(...)
    if X is not self.X:
        self.X = X

Later reads of ``self.X`` are left as they are: after the ``if`` the attribute holds the
same object as after the original store, on every path."""
from __future__ import annotations

import libcst as cst

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import Replace, code_of, one_line, statement_at
from mend.rules.forward_attribute.screen import NAME, screen


def rewrite(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The module with the write on ``line`` kept only when it changes the attribute, or a Decline."""
    wrapper, found = statement_at(module, line)
    if found is None:
        return Decline(NAME, f"no statement starts on line {line}")
    node, ancestors = found
    plan = screen(node, ancestors)
    if isinstance(plan, Decline):
        return plan
    attr, local = f"self.{plan.attr}", plan.local
    original = code_of(plan.line.body[0]).strip()
    value = one_line(code_of(plan.value))   # a comment inside a multi-line call swallowed the rest (helper-48)
    block = cst.parse_module(
        f"{local} = {value}  # mend: {NAME} (was: {original.splitlines()[0]})\n"
        f"if {local} is not {attr}:\n"
        f"    {attr} = {local}\n").body
    block = [block[0].with_changes(leading_lines=plan.line.leading_lines), *block[1:]]
    new_module = wrapper.module.visit(Replace(plan.line, cst.FlattenSentinel(block)))
    conv = plan.value.func.attr.value
    obligations = [
        {"kind": "attribute-write-kept", "attr": attr, "local": local, "line": line, "expr": attr,
         "conversion": conv},
        {"kind": "attribute-access-plain", "attr": attr, "expr": attr,
         "values": [f"self.__class__.{plan.attr}", "self.__setattr__", "self.__getattr__", "self.register_buffer",
                    f"{attr}._is_buffer", f"{attr}.persistent", "self._non_persistent_buffers_set"]},
        {"kind": "attribute-screen", "attr": attr, "local": local, "line": line,
         "function": plan.function.name.value},
    ]
    return RewriteResult(new_module.code, (line, line),
                         f"`{original.splitlines()[0]}` -> `{local} = {attr}.{conv}(...)`, stored back only when "
                         "it is a new tensor", obligations)
