"""deferred-side-effects: :func:`rewrite`, a site -> the new module and its proof obligations, or
a decline."""
from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from mend.rules._base import Decline, RewriteResult
from mend.rules._common import add_import, code_of as _code, statement_at
from mend.locate import header_parts
from mend.rules.deferred_side_effects.conditional import conditional_site, screen, unhoist
from mend.rules.deferred_side_effects.screen import (NAME, RUNTIME, _bindings, _runtime_alias, lazy_args,
                                                     _screen, _site, level_guard)
from verifier.encoders.capture import RAISER_AFTER


def rewrite(module: cst.Module, line: int, ordered_because: str | None = None) -> RewriteResult | Decline:
    """Rewrite the print/logger/warnings call reported at ``line`` into its deferred form, or
    the ``if <tensor test>:`` on ``line`` whose body is one such call into its conditional
    form ``defer_*_if(test, ...)`` (:mod:`.conditional`).

    The whole module comes back (``code``), with ``import mend.runtime as <alias>`` added
    when missing; ``span`` is the statement's lines in the input. ``ordered_because``: emit the
    ordered form (``ordered=True``) for this reason even where no check follows in the function
    (:func:`ordered`, the fallback when verification sees an operator that can raise after it).
    """
    wrapper, found = statement_at(module, line, compound=True)
    guard = level_guard(header_parts(found[0])) if found is not None else None
    if guard is not None:
        return guard
    site = conditional_site(found)
    if site is None:
        return _rewrite(module, line, ordered_because=ordered_because)
    node, ancestors, stmt = site
    pos = wrapper.resolve(PositionProvider)
    why = screen(wrapper.module, node, ancestors, stmt, pos[node].start.line + 1 == pos[stmt].start.line,
                 pos[node].start.line)
    if why:
        return Decline(NAME, f"`if {' '.join(_code(node.test).split())}:` around a deferrable call: {why}")
    result = _rewrite(unhoist(wrapper.module, node, stmt), pos[stmt].start.line, when=node.test,
                      ordered_because=ordered_because)
    if isinstance(result, RewriteResult):
        result.span = (pos[node].start.line, pos[stmt].end.line)
    return result


def _rewrite(module: cst.Module, line: int, when: cst.BaseExpression | None = None,
             ordered_because: str | None = None) -> RewriteResult | Decline:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    site = _site(wrapper, line)
    if site is None:
        return Decline(NAME, f"no print/logger/warnings.warn call on line {line}")
    b = _bindings(module)
    plan = _screen(site[0], site[1], b.bound)
    if isinstance(plan, Decline):
        return plan
    raiser = ordered_because is not None and not plan.check   # ordered only because an operator may raise
    plan.check = plan.check or ordered_because
    # the function the call is in (ancestors are innermost first): its frame's name
    fdef = next((a for a in site[1] if isinstance(a, cst.FunctionDef)), None)
    function = fdef.name.value if fdef is not None else None
    positions = wrapper.resolve(PositionProvider)
    pos = positions[plan.stmt]
    # a loop around the call in its function: a later iteration runs every line of the body after it
    in_loop = fdef is not None and any(isinstance(a, (cst.For, cst.While)) for a in site[1][:site[1].index(fdef)])
    alias, imported = _runtime_alias(b)

    call = plan.call
    lazy = lazy_args(call, alias, b.bound)
    if isinstance(lazy, Decline):
        return lazy
    args, lazies, items = lazy
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if plan.kind == "log":
        extra = [cst.Arg(plan.receiver, comma=comma),
                 cst.Arg(cst.SimpleString(f'"{plan.method}"'), comma=comma if args else cst.MaybeSentinel.DEFAULT)]
        args = extra + args
        func_name = "defer_log"
    else:
        func_name = "defer_print" if plan.kind == "print" else "defer_warn"
    if plan.check:  # a check may fail later in the same graph: keep this call ordered against it
        if args:
            args[-1] = args[-1].with_changes(comma=comma)
        args.append(cst.Arg(cst.Name("True"), keyword=cst.Name("ordered"),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                  whitespace_after=cst.SimpleWhitespace(""))))
    if when is not None:   # `if when: CALL` (conditional.py): the test first, as the `if` evaluated it
        func_name += "_if"
        args = [cst.Arg(when, comma=comma), *args]
    new_call = call.with_changes(func=cst.Attribute(cst.Name(alias), cst.Name(func_name)), args=args)
    tree = module.deep_replace(call, new_call)
    moved = False
    if not imported:
        tree = add_import(tree, f"import {RUNTIME} as {alias}", same_line=True)
        moved = len(tree.body) != len(module.body)  # a line of its own: every line below moved

    mechanism = "ordered" if plan.check else "replay"
    shift = (1 if moved else 0) - (1 if when is not None else 0)
    # where the call and its function sit in the mended file (an earlier line only widens the search);
    # the function's lines tell its frames from another function of the same name in the file
    where = {"function": function, "line": pos.start.line + shift,
             **({"first": positions[fdef].start.line + shift, "last": positions[fdef].end.line + shift}
                if fdef is not None else {}),
             **({"loop": True} if in_loop else {})}
    if plan.check:
        detail = (f"`{plan.callee}(...)` -> `{alias}.{func_name}(..., ordered=True)`: {plan.check} follows"
                  + ("" if raiser else " in this function")
                  + ", so the call stays an ordered effect (mend::capture) at its position; "
                  + "a failing call shows what eager showed under the eager and aot_eager backends; inductor "
                    "keeps the capture in order neither with a check nor with a kernel that raises, so there a "
                    "failing call may show other output than eager"
                  + ", and the graph bypasses Inductor's FX graph cache")
        on_exception = {"kind": "replayed-on-exception", "mechanism": mechanism, "check": plan.check, **where,
                        "detail": "effects before a failing check are performed before it (ordered with the check)",
                        **({"raiser": True} if raiser else {})}
    else:
        detail = (f"`{plan.callee}(...)` -> `{alias}.{func_name}(...)`: snapshot (tensor arguments cloned) leaves "
                  "the graph as graph outputs and is replayed right after the graph call, in program order (an "
                  "ordinary, cacheable graph)")
        on_exception = {"kind": "replayed-on-exception", "mechanism": mechanism, **where,
                        "detail": "effects before an exception raised outside the graph are replayed before it",
                        "assumes": "no operator later in the same graph raises at run time (no check follows in "
                                   "this function; a kernel error such as an index out of range would drop the "
                                   "effects of that graph), and Dynamo raises no error while tracing it (an input "
                                   "of the wrong shape can fail the trace before any graph runs, where the "
                                   "original's graph break had already shown the effect)"}
    obligations = [
        {"kind": "order-preserved", "mechanism": mechanism,
         "detail": "deferred effects replay in program order, after the graph call"},
        on_exception,
    ]
    if when is not None:
        test = " ".join(_code(when).split())
        detail = f"`if {test}: {plan.callee}(...)` -> `{alias}.{func_name}({test}, ...)`; " + detail
        obligations.append({"kind": "deferred-if-predicate", "line": pos.start.line, "when": test,
                            "detail": "performed exactly when the test's snapshot is true; the arguments, now "
                                      "evaluated either way, are constants, names bound on every path and "
                                      "f-strings (the runtime's lazy fmt) over them"})
    values = [_code(a.value).strip() for a in call.args
              if not isinstance(a.value, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float))]
    if values or lazies:
        obligations.append({"kind": "snapshot-before-mutation", "values": values,
                            "detail": "tensor arguments are cloned where the call was, before later in-place updates"})
    if lazies:
        obligations.append({"kind": "lazy-format-equals-fstring", "formats": lazies})
    if items:
        obligations.append({"kind": "lazy-item-equals-item", "values": items,
                            "detail": "item(t) reads t.item() from the snapshot at replay: the same number"})
    if plan.kind == "log" and plan.method and plan.method.endswith("_once"):
        obligations.append({"kind": "once-per-process", "method": plan.method,
                            "detail": "replayed through the same (lru_cache'd) method"})
    if plan.kind == "warn":
        if moved:
            obligations.append({"kind": "warning-identity", "same": ["category", "message"],
                                "may_differ": ["lineno"],
                                "detail": "the import needed a line of its own (no top-level statement to share), so "
                                          "the lines below it, this one included, moved by one"})
        else:
            obligations.append({"kind": "warning-identity", "same": ["category", "message", "filename", "lineno"],
                                "detail": "replayed with warn_explicit at the traced line; the import shares a line, "
                                          "so lines are the original's unless another rewrite above changed the count"})
    return RewriteResult(tree.code, (pos.start.line, pos.end.line), detail, obligations)


ORDERED_BECAUSE = "an operator that can raise at run time (seen in the graph's trace by verification)"


def ordered(module: cst.Module, line: int) -> RewriteResult | Decline:
    """The ordered form of the site's rewrite (``ordered=True``: ``mend::capture`` performs the call
    at its position in the graph): ``mend fix`` verifies it when the replayed form is declined
    because an operator that can raise at run time follows the call in its graph (helper-61: a
    ``gather`` whose index goes out of range for one mask). Exact under the eager and aot_eager
    backends; inductor does not order the capture against a raising kernel (helper-62), so the
    verifier leaves ``replayed-on-exception`` unknown for it: an unsafe fix."""
    return rewrite(module, line, ordered_because=ORDERED_BECAUSE)


def raiser_declined(reason: str) -> bool:
    """Whether a decline is the replay's refutation that :func:`ordered` answers."""
    return RAISER_AFTER in reason
