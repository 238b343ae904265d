"""Encoder for a debug text read only under a flag (dead-host-work's ``debug-text`` form,
helper-92's c30): a static screen of the source before and after the rewrite, never a solver
query.

``debug-text-deferred``: before, ``r = <text of t>`` is followed directly by ``if <flag>:``,
and ``r`` is read only inside that ``if``'s body; the text is ``repr(t)``/``str(t)`` or an
f-string whose fields format only ``t``'s repr/str, shape, dtype, device, size, dim, numel
(no format spec); the flag is a name or an attribute chain, or ``not``/``and``/``or`` of them.
After, the statement sits under ``if <repr_kept(t)>:`` (not a plain strided tensor of a
reviewed dtype: as before, before the flag), and the flag's body starts with ``if not
(<repr_kept(t)>): r = <text of t>``, the rest of the ``if`` unchanged. For a plain tensor the
text is pure and cannot raise (the installed ``Tensor.__repr__`` and ``torch/_tensor_str.py``
are the reviewed ones), so computing it after the flag, only when the flag holds, changes
nothing a caller observes. Checked independently of the rule (:mod:`ast` here, LibCST there).
"""
from __future__ import annotations

import ast
import inspect

from verifier.encoders.base import Ctx
from verifier.encoders.dead_host_work import (FRAME_READERS, REVIEWED_TENSOR_REPR, REVIEWED_TENSOR_STR_FILE,
                                              _bound, _dotted, _function_at, _parse, _repr_kept, _sha,
                                              _torch_aliases, module_reads_frames)
from verifier.outcomes import Outcome, check_refuted, checked, unknown

_ATTRS = {"shape", "dtype", "device", "ndim"}
_METHODS = {"size", "dim", "numel"}
BY = ("a screen of the source before and after the rewrite (ast): the text reads one tensor's repr/str, shape, "
      "dtype, device or sizes; it is read only inside the `if <flag>:` right after it; the mended file computes it "
      "before the flag only for a tensor that is not a plain strided one of a reviewed dtype, and under the flag "
      "otherwise; the installed Tensor.__repr__ and torch/_tensor_str.py are the reviewed ones")


def _field(node: ast.expr) -> str | None:
    """The tensor name one field of the text reads, or None (the rule's list, re-derived)."""
    if isinstance(node, ast.Call) and not node.keywords:
        f, args = node.func, node.args
        if isinstance(f, ast.Name) and f.id in ("repr", "str") and len(args) == 1 and isinstance(args[0], ast.Name):
            return args[0].id
        if isinstance(f, ast.Name) and f.id in ("tuple", "list") and len(args) == 1 \
                and isinstance(args[0], ast.Attribute) and args[0].attr == "shape" and isinstance(args[0].value, ast.Name):
            return args[0].value.id
        if not args and isinstance(f, ast.Attribute) and f.attr in _METHODS and isinstance(f.value, ast.Name):
            return f.value.id
        return None
    if isinstance(node, ast.Attribute) and node.attr in _ATTRS and isinstance(node.value, ast.Name):
        return node.value.id
    return None


def text_tensor(value: ast.expr) -> str | None:
    """The one tensor name a debug text formats, or None."""
    if isinstance(value, ast.Call):
        return _field(value) if isinstance(value.func, ast.Name) and value.func.id in ("repr", "str") else None
    if not isinstance(value, ast.JoinedStr):
        return None
    names = set()
    for part in value.values:
        if isinstance(part, ast.Constant):
            continue
        if not isinstance(part, ast.FormattedValue) or part.format_spec is not None:
            return None
        if isinstance(part.value, ast.Name) and part.conversion in (ord("r"), ord("s")):
            names.add(part.value.id)
        else:
            name = _field(part.value)
            if name is None:
                return None
            names.add(name)
    return names.pop() if len(names) == 1 else None


def _plain_flag(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _plain_flag(node.operand)
    if isinstance(node, ast.BoolOp):
        return all(_plain_flag(v) for v in node.values)
    return _dotted(node) is not None


def _block_of(tree: ast.AST, stmt: ast.stmt) -> tuple[list, int] | None:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return block, next(i for i, s in enumerate(block) if s is stmt)
    return None


def _reviewed_torch() -> str | None:
    """Why the installed torch's tensor formatting is not the reviewed one, else None."""
    import torch
    import torch._tensor_str as tensor_str

    if _sha(inspect.getsource(torch.Tensor.__repr__)) not in REVIEWED_TENSOR_REPR:
        return f"Tensor.__repr__ on torch {torch.__version__} is not the one reviewed (torch 2.13)"
    with open(tensor_str.__file__, "rb") as fh:
        if _sha(fh.read()) not in REVIEWED_TENSOR_STR_FILE:
            return f"torch/_tensor_str.py on torch {torch.__version__} is not the one reviewed (torch 2.13)"
    if torch.Tensor.__str__ is not object.__str__:
        return "Tensor.__str__ is not object.__str__ on the installed torch"
    return None


def _expected(fn: ast.FunctionDef, orig: ast.Assign, flag_if: ast.If, t: str, alias: str) -> str:
    """The dump of ``fn`` as the rule rewrites it: ``if <kept>: orig`` then ``if flag: if not
    (<kept>): orig; <body>`` in place of ``orig`` and ``flag_if`` (swapped in, dumped, restored)."""
    kept = ast.parse(_repr_kept(t, alias), mode="eval").body
    first = ast.If(test=kept, body=[orig], orelse=[])
    late = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=kept), body=[orig], orelse=[])
    second = ast.If(test=flag_if.test, body=[late, *flag_if.body], orelse=flag_if.orelse)
    block, i = _block_of(fn, orig)
    block[i:i + 2] = [first, second]
    try:
        return ast.dump(fn)
    finally:
        block[i:i + 2] = [orig, flag_if]


def debug_text_deferred(ob: dict, ctx: Ctx) -> Outcome:
    name, t, flag, line = ob.get("name"), ob.get("tensor"), ob.get("flag"), ob.get("line")
    before, code = _parse(ctx.before), _parse(ctx.code)
    if not (name and t and flag and line) or before is None or code is None:
        return unknown("the local, the tensor, the flag, the line or the sources are not recorded")
    why = _reviewed_torch()
    if why:
        return unknown(why)
    fn = _function_at(before, ob.get("function"), line)
    orig = next((s for s in ast.walk(fn) if isinstance(s, ast.Assign) and s.lineno == line), None) if fn else None
    if orig is None or len(orig.targets) != 1 or not isinstance(orig.targets[0], ast.Name) or orig.targets[0].id != name:
        return unknown(f"no assignment to `{name}` at line {line} of the source before the rewrite")
    if text_tensor(orig.value) != t:
        return check_refuted(BY, f"the value at line {line} is not a text of `{t}` alone (repr/str, shape, dtype, "
                                 "device, sizes)")
    found = _block_of(fn, orig)
    nxt = found[0][found[1] + 1] if found and found[1] + 1 < len(found[0]) else None
    flag_node = ast.parse(flag, mode="eval").body
    if not isinstance(nxt, ast.If) or ast.dump(nxt.test) != ast.dump(flag_node) or not _plain_flag(flag_node):
        return check_refuted(BY, f"the statement after line {line} is not `if {flag}:` with a plain flag")
    inside = {id(n) for s in nxt.body for n in ast.walk(s)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Store) \
                and id(node) not in inside:
            return check_refuted(BY, f"`{name}` is read at line {node.lineno}, outside the flag's body")
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return check_refuted(BY, f"`{name}` is declared {type(node).__name__.lower()} at line {node.lineno}")
        if isinstance(node, ast.Call) and _dotted(node.func) in FRAME_READERS:
            return check_refuted(BY, f"`{_dotted(node.func)}()` at line {node.lineno} can read every local")
    reader = module_reads_frames(code)
    if reader:
        return check_refuted(BY, f"the module can read a caller's locals or rebind names: {reader}")
    rebound = _bound(code) & {"type", "repr", "str", "tuple", "list"}
    if rebound:
        return check_refuted(BY, f"`{sorted(rebound)[0]}` is rebound in the mended module")
    # the whole mended function must be the original with exactly the two statements replaced
    mended_fn = _function_at(code, ob.get("function"), line)
    if mended_fn is None or not any(ast.dump(mended_fn) == _expected(fn, orig, nxt, t, a)
                                    for a in _torch_aliases(code)):
        return check_refuted(BY, f"the mended `{fn.name}` is not the original with line {line} under `if <{t} not a "
                                 f"plain tensor>:` and again first under `if {flag}:`, everything else unchanged")
    return checked(BY, [f"`{name}` is read only inside `if {flag}:`; for a plain tensor its text is computed there, "
                        "after the flag is read (the text is pure and cannot raise)",
                        "reading the flag changes no tensor (no property or __getattr__ on its path writes "
                        f"`{t}`): assumed, not checked",
                        "no TorchFunctionMode/TorchDispatchMode observing the repr's formatting ops is active "
                        "(assumed, not checked)"])


ENCODERS = {"debug-text-deferred": debug_text_deferred}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset()
