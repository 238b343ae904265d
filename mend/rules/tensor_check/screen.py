"""tensor-check: which sites the rule takes (a ``torch._check_tensor_all`` statement), why it
declines the others, and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import (code_of, dotted, enclosing_handler, fresh_local, locals_readers, state_change,
                                torch_aliases, torch_name)
from mend.rules._in_graph_checks import (caller_screen, catching_elsewhere, global_mode_setter,
                                         mode_context_elsewhere, surroundings)

NAME = "tensor-check"
CHECK_CALLS = {"torch._check_tensor_all"}

# torch._check_with's message when none is given (torch/__init__.py, torch 2.11-2.14): the
# rewrite raises exactly this RuntimeError; the verifier observes that it still is
DEFAULT_MESSAGE = ("Expected cond to be True, but got False. (Could this error message be improved? If so, please "
                   "report an enhancement request to PyTorch.)")


HOISTED = "_mend_check_cond"   # the local an inline condition is bound to, read once as before


@dataclass
class Plan:
    line: cst.SimpleStatementLine   # the statement line holding the check
    call: cst.Call
    cond: cst.BaseExpression
    torch_name: str                 # how the module spells `torch` (`torch`, `th`)
    message: str | None = None      # the text of a constant message callable (`lambda: "text"`)
    message_arg: cst.Arg | None = None
    hoisted: str = HOISTED          # the local an inline condition is bound to (fresh in the function)
    fields: tuple = ()              # a message ``lambda: f"... {self.n}"``: the attributes it formats
    message_format: str | None = None  # ... and its f-string, formatted inside the graph under a type guard


def fresh_name(function: cst.FunctionDef) -> str:
    """``_mend_check_cond``, or ``_mend_check_cond_2``, ``_3``... (:func:`fresh_local`)."""
    return fresh_local(function, HOISTED)


def _constant_message(arg: cst.Arg) -> str | None:
    """The text of ``lambda: "<plain string literal>"`` (no parameters, no f-string), else None."""
    value = arg.value
    if not isinstance(value, cst.Lambda) or value.params.params or value.params.star_arg != cst.MaybeSentinel.DEFAULT \
            or value.params.kwonly_params or value.params.star_kwarg or value.params.posonly_params:
        return None
    body = value.body
    if not isinstance(body, (cst.SimpleString, cst.ConcatenatedString)) or \
            m.findall(body, m.FormattedString()):
        return None
    text = body.evaluated_value
    return text if isinstance(text, str) else None


# field types whose formatting is pure, cannot raise and Dynamo folds: a str is pasted into inductor's
# C++ unescaped (a backslash or quote garbles the message or fails the compile), a float may be
# traced as a symbolic float the f-string cannot format (helper-82's A1, A3)
MESSAGE_TYPES = "(int, bool)"


def _formatted_message(arg: cst.Arg, cond: cst.BaseExpression, function: cst.FunctionDef | None,
                       cls: cst.ClassDef | None) -> tuple[str, ...] | str:
    """The attributes ``lambda: f"... {self.n} ... {self.config.v!r}"`` formats (fields of
    ``self.<a>`` or ``self.<a>.<b>``, no format spec), or why the message is not that form.

    The text exists only when the check fails, but formatting an int or a bool is pure and
    cannot raise without a spec, so under a guard on those exact types it may be formatted on
    every call (Dynamo folds it to a constant, guarding the value: measured on torch 2.13, one
    graph). Each field must also be read by the check's condition (``ids < self.vocab``), which
    the compiled function evaluates on every call, so the message adds no guard it lacks: a field
    read only by the message (a step counter advanced between calls) recompiled at every call
    until the recompile limit left the forward eager (helper-82's A2); a read elsewhere did not
    do (another check's message, a branch never traced: helper-83). helper-78's c01."""
    value = arg.value
    if not isinstance(value, cst.Lambda) or value.params.params or value.params.star_arg != cst.MaybeSentinel.DEFAULT \
            or value.params.kwonly_params or value.params.star_kwarg or value.params.posonly_params:
        return "the message callable takes parameters"
    body = value.body
    if not isinstance(body, cst.FormattedString):
        return "the message callable does not return a string literal or an f-string"
    params = function.params.params if function is not None else ()
    if not params or params[0].name.value != "self" or m.findall(function, m.AssignTarget(target=m.Name("self"))):
        return "the f-string message is not in a method whose first parameter is `self`, never rebound"
    defined = {s.name.value for s in (cls.body.body if cls is not None else ()) if isinstance(s, cst.FunctionDef)}
    fields = []
    for part in body.parts:
        if not isinstance(part, cst.FormattedStringExpression):
            continue
        src = dotted(part.expression) or ""
        if not src.startswith("self.") or src.count(".") > 2:
            return (f"the message formats `{code_of(part.expression).strip()[:40]}`, not an attribute `self.<name>` "
                    "or `self.<name>.<name>`: its value may be a tensor or an object whose formatting runs code")
        if part.format_spec is not None:
            return f"the message formats `{src}` with a format spec, which may raise for some types"
        attr = src.split(".")[1]
        if attr in defined or {"__getattr__", "__getattribute__"} & defined:
            return f"the class defines `{attr}` or `__getattr__`: reading `{src}` on every call may run code"
        if src not in fields:
            fields.append(src)
    read = {dotted(a) for a in m.findall(cond, m.Attribute())} | ({dotted(cond)} if isinstance(cond, cst.Attribute)
                                                                    else set())
    for src in fields:
        if src not in read:
            return (f"the message formats `{src}`, which the check's condition does not read: formatted on every "
                    "call, it would add a guard on its value the compiled function lacks (a recompile each time it "
                    "changes)")
    return tuple(fields)


def _check_call(node: cst.CSTNode, aliases: set[str], bare: set[str] = frozenset()) -> cst.Call | None:
    """The check call of the statement ``node``: ``torch._check_tensor_all(...)`` under any
    alias of ``torch``, or a bare name in ``bare`` (:func:`bare_names`)."""
    if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
        name = dotted(node.value.func) or ""
        root, _, rest = name.partition(".")
        if (root in aliases and "torch." + rest in CHECK_CALLS) or name in bare:
            return node.value
    return None


def bare_names(module: cst.Module | None) -> set[str]:
    """Names bound to ``torch._check_tensor_all`` by a top-level ``from torch import
    _check_tensor_all [as NAME]`` and bound nowhere else in the module (helper-47)."""
    from mend.rules._bindings import bindings

    found = set()
    for stmt in module.body if module is not None else ():
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and small.module is not None and dotted(small.module) == "torch" \
                    and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    if isinstance(alias.name, cst.Name) and "torch." + alias.name.value in CHECK_CALLS:
                        found.add(alias.asname.name.value if alias.asname else alias.name.value)
    binds = bindings(module) if found else {}
    return {n for n in found if len(binds.get(n, [])) == 1 and "*" not in binds}


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    call = _check_call(node, torch_aliases(module), bare_names(module))
    if call is None:
        return Decline(NAME, "the statement is not a `torch._check_tensor_all(cond)` call")
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.SimpleStatementLine) or len(parent.body) != 1:
        return Decline(NAME, "the check shares its line with other statements")
    if parent.trailing_whitespace.comment is not None:
        return Decline(NAME, "a comment on the check's line would be dropped")
    args = list(call.args)
    if not args or args[0].keyword is not None or args[0].star:
        return Decline(NAME, "the condition is not passed as the first positional argument")
    message = None
    if len(args) > 2 or len(args) == 2 and (args[1].star or args[1].keyword is not None and
                                            args[1].keyword.value != "message"):
        return Decline(NAME, "the check passes arguments other than the condition and a message")
    if len(args) == 2:
        message = _constant_message(args[1])
        if message is None and isinstance(args[1].value, (cst.SimpleString, cst.ConcatenatedString,
                                                          cst.FormattedString)):
            # helper-68's c08: torch 2.13 wants a callable; a failing check raises TypeError
            # ("message must be a callable") in place of the intended error
            return Decline(NAME, "the message is a string, not a callable: torch._check* calls it when the check "
                                 "fails, so a failing check raises TypeError (\"message must be a callable\") where "
                                 "the error was meant; write `lambda: \"...\"` (the rule then rewrites it)")
    cond = args[0].value
    function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    cls = next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None)
    fields, message_format = (), None
    if len(args) == 2 and message is None:
        # a message callable runs only when the check fails, on the host; its text is known at
        # trace time for a constant, and for an f-string of plain attributes under a type guard
        fields = _formatted_message(args[1], cond, function, cls)
        if isinstance(fields, str):
            return Decline(NAME, "the check has a message callable that is not `lambda: \"<constant text>\"` or an "
                           f"f-string of attributes: its text is computed only when the check fails ({fields})")
        message_format = code_of(args[1].value.body).strip()
    if function is None:
        return Decline(NAME, "the check is not inside a function")
    if not isinstance(cond, cst.Name):
        # an inline condition is bound to a local on the line before, evaluated once as the call
        # did (the rewrite reads it three times: dtype guard, assert, fallback)
        if locals_readers(function):
            return Decline(NAME, "the function reads its own locals (`locals()`, `vars()`, `eval`, `exec`): "
                           "binding the condition to a new local would show there")
        if m.findall(cond, m.NamedExpr() | m.Lambda() | m.Yield() | m.Await()):
            return Decline(NAME, f"the condition `{code_of(cond).strip()}` binds a name or defines/awaits a "
                           "function")
    inner = ancestors[ancestors.index(function) + 1:]
    if any(isinstance(a, (cst.For, cst.While)) for a in inner):
        return Decline(NAME, "the check sits inside a loop: Dynamo skips the whole frame there")
    # inside the graph a failing check raises when the compiled region returns, past the handler
    handler = enclosing_handler(inner)
    if handler == "try":
        return Decline(NAME, "a `try` around the check in the same function would no longer catch its failure "
                       "once the check runs inside the compiled graph")
    if handler is not None:
        return Decline(NAME, f"the check is inside `with {handler}`, whose exit would no longer see its failure "
                       "once the check runs inside the compiled graph")
    effect = state_change(function, next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None))
    if effect is not None:
        # compiled, a failing check surfaces when the graph has run: state written before it is
        # lost (aot_eager, inductor) and state written after it may happen anyway (inductor)
        return Decline(NAME, f"the function changes state (`{effect}`): with the check inside the compiled graph, "
                       "a failing call could leave different state than eager")
    setter = global_mode_setter(module) if module is not None else None
    if setter is not None:   # helper-87: a parent's plain torch.set_grad_enabled(False) around the child
        return Decline(NAME, f"the file sets torch's global state (`{setter[:60]}`, not as a `with`): Dynamo sets "
                       "the final grad/autocast mode after the graph returns, so a check failing inside the graph "
                       "would leave the mode as it was, where eager left it changed")
    why = surroundings(function, ancestors, inner, module) or caller_screen(module, function) or \
        catching_elsewhere(module, function, precise=True) or mode_context_elsewhere(module, function)
    if why is not None:
        return Decline(NAME, why)
    root = dotted(call.func).split(".")[0]
    if "." not in dotted(call.func):
        root, missing = torch_name(module)   # the bare name: torch itself spells the new calls
        if missing:
            return Decline(NAME, "the module binds `_check_tensor_all` from torch but does not `import torch`, "
                                 "which the rewrite's `torch._assert_async` needs")
    return Plan(parent, call, cond, root, message, args[1] if len(args) == 2 else None, fresh_name(function),
                fields, message_format)


def match(loc: Located) -> Match | Decline:
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    return Match(NAME, "torch._check_tensor_all -> torch._assert_async (same RuntimeError and message), "
                 "bool-dtype guard keeps the original call otherwise")
