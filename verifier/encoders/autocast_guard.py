"""Encoder for a rewrite that keeps the original statement under ``torch.autocast``.

* ``autocast-keeps-original`` (check, a static screen of the two versions): the mended file
  holds ``if <torch>.is_autocast_enabled(d) or ...:`` naming every device type of
  :data:`DEVICES` (cpu, cuda, xpu, mps: whatever the certificate records, a guard on fewer
  is refuted)
  (``<torch>`` bound only by ``import torch``) whose body is the recorded statement (an ``if``
  of predicated control flow, a counting loop of host-count-reduction), and that statement is
  one of the version before the rewrite, token for token (``ast.dump``, positions aside), and
  the ``if`` stands where that statement stood (its block is the version before's with the
  statement replaced by it) with the new code in its ``else``: the two are exclusive, and
  whatever follows runs after either (helper-104 S1: the screen had accepted such an ``if``
  anywhere in the file).
  Under autocast on those devices the original statement runs, so the rewrite's other
  obligations (about the new code in the ``else``) are needed only outside autocast. Dynamo folds the test and guards on autocast's state (measured on torch 2.13:
  ``GLOBAL_STATE changed: autocast(cpu)_enabled`` recompiles), so each state gets its own graph.
"""
from __future__ import annotations

import ast

from verifier.encoders.base import Ctx
from verifier.encoders.numpy_constants import _module_aliases
from verifier.outcomes import Outcome, check_refuted, checked, unknown

BY = ("static screen of the mended file and the version before: the recorded statement is one of the version "
      "before, kept verbatim as the whole body of `if torch.is_autocast_enabled(...) or ...:` for every recorded "
      "device type, that if standing where the statement stood with the new code in its else")

# the device types autocast has on torch 2.13 that a user may enable around the model
DEVICES = frozenset({"cpu", "cuda", "xpu", "mps"})



def _half_dtype_test(p: ast.expr, torch_names: set[str]) -> bool:
    """``name.dtype in (t.float16, t.bfloat16)``: a pure test (a local's dtype) under which the
    original runs too, which can only keep more of the original."""
    return (isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.In)
            and isinstance(p.left, ast.Attribute) and p.left.attr == "dtype" and isinstance(p.left.value, ast.Name)
            and isinstance(p.comparators[0], ast.Tuple) and all(
                isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id in torch_names
                and e.attr in ("float16", "bfloat16") for e in p.comparators[0].elts))


def _guard_devices(test: ast.expr, torch_names: set[str]) -> set[str] | None:
    """The device types of ``t.is_autocast_enabled("d1") or ...`` (also ``or x.dtype in
    (t.float16, t.bfloat16)``), else None."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    devices = set()
    for p in parts:
        if _half_dtype_test(p, torch_names):
            continue
        if not (isinstance(p, ast.Call) and isinstance(p.func, ast.Attribute) and p.func.attr == "is_autocast_enabled"
                and isinstance(p.func.value, ast.Name) and p.func.value.id in torch_names and len(p.args) == 1
                and not p.keywords and isinstance(p.args[0], ast.Constant) and isinstance(p.args[0].value, str)):
            return None
        devices.add(p.args[0].value)
    return devices


def autocast_keeps_original(ob: dict, ctx: Ctx) -> Outcome:
    """The recorded original statement runs unchanged whenever autocast is on for the recorded
    device types (a screen; see the module docstring)."""
    found = _kept(ob, ctx, BY, ternaries=False)
    if isinstance(found, Outcome):
        return found
    want, tree, before = found
    devices = set(ob.get("devices") or ()) | DEVICES
    torch_names = _module_aliases(tree, "torch")
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_body(node, want) and _in_place(node, want, tree, before):
            got = _guard_devices(node.test, torch_names)
            if got is not None and devices and devices <= got:
                return checked(BY, [f"autocast on any of {', '.join(sorted(got))} runs the original statement, the graph "
                                    "break included; autocast on another device type is not guarded",
                                    "Dynamo folds torch.is_autocast_enabled and guards on it (torch 2.13)"])
    return check_refuted(BY, "no `if torch.is_autocast_enabled(...) or ...:` in the mended file has the recorded statement "
                             f"as its whole body for the device types {sorted(devices)}, in its place, with the new code "
                             "in its else")


def _kept(ob: dict, ctx: Ctx, by: str, ternaries: bool) -> tuple[list[str], ast.Module, ast.Module] | Outcome:
    """(the recorded original statements, each dumped; the mended file's tree; the version before's), or the outcome
    when either version is missing or does not parse, or the statements are not a run of
    consecutive statements of one block of the version before (an ``if`` and the early exit's
    fall-through after it; with ``ternaries``, one statement may also be a conditional
    expression of it written as an if)."""
    if ctx.code is None or ctx.before is None:
        return unknown("the mended file and the version before were not both available to screen")
    try:
        kept = ast.parse(ob.get("original", "")).body
        tree, before = ast.parse(ctx.code), ast.parse(ctx.before)
    except SyntaxError as exc:
        return unknown(f"a version does not parse ({exc.msg})")
    if not kept:
        return unknown("the recorded original holds no statement")
    want = [ast.dump(k) for k in kept]
    if not any(_runs(block, want) for _, block in _blocks(before)) and not (
            ternaries and len(want) == 1 and any(_ternary_if(n) == want[0] for n in ast.walk(before))):
        return check_refuted(by, "the recorded statements are not consecutive statements of one block of the version "
                             "before the rewrite" + (" (nor its conditional expression written as an if)" if ternaries else ""))
    return want, tree, before


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _blocks(node: ast.AST, address: tuple = ()):
    """(address, block) for every statement list under ``node`` (bodies, else and finally blocks,
    handlers' bodies, match cases'). The address is the chain of enclosing statements, each by
    its field, its header (everything but its blocks: a def's name, arguments and decorators, an
    if's test, a loop's target and iterable, a with's items) and how many siblings before it
    have that header: a rewrite elsewhere (another site, a helper added at the top of the
    module) leaves it as it was; one that changes an enclosing statement does not."""
    for field in _BLOCK_FIELDS:
        block = getattr(node, field, None)
        if not isinstance(block, list) or not block:
            continue
        if isinstance(block[0], ast.stmt):
            yield (*address, field), block
        seen: dict[str, int] = {}
        for child in block:
            if not any(getattr(child, f, None) for f in _BLOCK_FIELDS):
                continue   # a simple statement: no block under it to address
            head = ast.dump(type(child)(**{f: [] if f in _BLOCK_FIELDS else getattr(child, f, None) for f in child._fields}))
            seen[head] = seen.get(head, 0) + 1
            yield from _blocks(child, (*address, field, head, seen[head]))


def _runs(block: list[ast.stmt], want: list[str]) -> bool:
    """Whether ``want`` (dumped statements) occurs in ``block`` as consecutive statements."""
    dumps = [ast.dump(s) for s in block]
    return any(dumps[i:i + len(want)] == want for i in range(len(dumps) - len(want) + 1))


def _is_body(node: ast.If, want: list[str]) -> bool:
    """Whether ``want`` is the whole body of ``node``."""
    return [ast.dump(s) for s in node.body] == want


def _in_place(node: ast.If, want: list[str], tree: ast.Module, before: ast.Module) -> bool:
    """Whether ``node`` has an ``else`` (the new code, so the kept run and it are exclusive) and
    stands where the kept statements stood: the block of ``before`` at its block's address
    (:func:`_blocks`) holds them (or the conditional expression they write as an if), the
    statements around ``node`` that are in that block are on the same side of them (other
    rewrites may have changed the rest), and a run of several statements (an early exit's
    fall-through) ends in ``return``/``raise`` or ends both blocks, so nothing after it runs twice."""
    if not node.orelse:
        return False
    olds = dict(_blocks(before))
    for address, block in _blocks(tree):
        at = next((j for j, st in enumerate(block) if st is node), None)
        if at is None:
            continue
        old = olds.get(address)
        if old is None:
            return False
        dumps = [ast.dump(st) for st in old]
        head, tail = [ast.dump(st) for st in block[:at]], [ast.dump(st) for st in block[at + 1:]]
        for lo in range(len(old) - len(want) + 1):
            hi = lo + len(want)
            if dumps[lo:hi] != want and not (len(want) == 1 and _ternary_if(old[lo]) == want[0]):
                continue
            ends = isinstance(old[hi - 1], (ast.Return, ast.Raise)) or hi == len(old) and not tail
            if all(d in dumps[:lo] for d in head if d in dumps) and all(d in dumps[hi:] for d in tail if d in dumps) \
                    and (len(want) == 1 or ends):
                return True
        return False
    return False


def _ternary_if(node: ast.AST) -> str | None:
    """``return A if P else B`` / ``x = A if P else B`` as the ``if P: return A else: return B``
    the rule plans it as (the same evaluation: P, then the one side), dumped; else None."""
    value = getattr(node, "value", None)
    if not isinstance(value, ast.IfExp) or not isinstance(node, (ast.Return, ast.Assign)):
        return None
    if isinstance(node, ast.Return):
        sides = [ast.Return(value=value.body), ast.Return(value=value.orelse)]
    else:
        sides = [ast.Assign(targets=node.targets, value=value.body), ast.Assign(targets=node.targets, value=value.orelse)]
    return ast.dump(ast.If(test=value.test, body=[sides[0]], orelse=[sides[1]]))


def anomaly_keeps_original(ob: dict, ctx: Ctx) -> Outcome:
    """``anomaly-keeps-original`` (a static screen): the recorded original statements,
    consecutive statements of one block of the version before, are the whole body of ``if not <torch>.compiler.is_compiling() and
    <torch>.is_anomaly_enabled():`` in the mended file, so under anomaly detection (which checks
    every backward step, a gated side's included: helper-88 F2) an eager call runs the original."""
    by = ("static screen of the mended file and the version before: the recorded statement is one of the version "
          "before, kept verbatim as the whole body of `if not torch.compiler.is_compiling() and "
          "torch.is_anomaly_enabled():`, that if standing where the statement stood with the new code in its else")
    found = _kept(ob, ctx, by, ternaries=True)
    if isinstance(found, Outcome):
        return found
    want, tree, before = found
    tests = {ast.dump(ast.parse(f"not {t}.compiler.is_compiling() and {t}.is_anomaly_enabled()", mode="eval").body)
             for t in _module_aliases(tree, "torch")}
    if any(isinstance(n, ast.If) and ast.dump(n.test) in tests and _is_body(n, want) and _in_place(n, want, tree, before)
           for n in ast.walk(tree)):
        return checked(by, ["under torch.autograd anomaly detection an eager call runs the original statement",
                            "a compiled call runs the selection: with an AOT backend its backward is one autograd "
                            "node whose outputs are the gated gradients; with backend='eager' anomaly detection "
                            "still sees the untaken side's step (not covered)"])
    return check_refuted(by, "no `if not torch.compiler.is_compiling() and torch.is_anomaly_enabled():` in the "
                             "mended file has the recorded statement as its whole body, in its place, with the new "
                             "code in its else")


ENCODERS = {"autocast-keeps-original": autocast_keeps_original, "anomaly-keeps-original": anomaly_keeps_original}
CHECKS = frozenset(ENCODERS)
