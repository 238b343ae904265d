"""Encoder for a gated ``torch.where`` side: every input the side reads goes through
``_mend_gate(K, v)`` (``torch.where(K, v, v.detach())`` for a tensor that requires grad), ``K``
the condition under which the side is selected.

* ``gradient-gated`` (check citing a lemma): a static screen of the mended source checks
  (1) the module defines ``_mend_gate`` once, exactly as :data:`GATE_HELPER`, with ``torch``
  bound by ``import torch`` alone and ``isinstance`` not rebound; (2) at every occurrence of the
  gated side, that it is an argument of a ``torch.where`` nest over predicate names, and ``K``
  in each gate is that nest's path condition (``not P`` for the else argument, conjuncts folded
  left by ``torch.logical_and``); (3) that every name and ``self.`` read in the side is a gate's
  whole second argument, the rest being torch/math functions, tensor methods, pure builtins,
  constants and operators (no submodule call, whose parameters a gate cannot reach); (4) that
  the side with its gates removed is the one the forward obligations (``same-shape``,
  ``where-equals-ite``) are about. Then ``proofs/pcf_gate_gradient.smt2`` (proved once, unsat):
  with where's backward ``where(K, g, 0)`` (PyTorch's derivatives.yaml) at each gate and at the
  selection, the inputs' gradient equals the original branch's for *any* backward of the sides,
  NaN-producing ones included -- so the untaken side's ``0 * inf`` never reaches an input.
"""
from __future__ import annotations

import ast

from verifier.encoders.base import Ctx, names_bound_by
from verifier.encoders.numpy_constants import _module_aliases
from verifier.outcomes import Outcome, check_refuted, checked, unknown

GATE = "_mend_gate"
LEMMA = "proofs/pcf_gate_gradient.smt2"
# the helper the rule adds (mend/rules/predicated_control_flow/gate.py emits this text)
GATE_HELPER = '''
def _mend_gate(keep, value):
    """``value``, its gradient let through only where ``keep`` holds (mend: predicated-control-flow).

    keep: the one-element bool tensor under which the torch.where side reading ``value`` is
    selected; value: any object. A tensor that requires grad, with autograd on, becomes
    ``torch.where(keep, value, value.detach())``: equal values (same shape and dtype: ``keep``
    is made 0-d), and where's backward ``where(keep, grad, 0)`` drops an untaken side's NaN/inf
    gradient. Anything else is returned as it is. Raises RuntimeError where torch.where does."""
    if isinstance(value, torch.Tensor) and value.requires_grad and torch.is_grad_enabled():
        return torch.where(keep.reshape(()), value, value.detach())
    return value
'''
BY = ("static screen of the mended source: `_mend_gate` is the canonical helper; every name and self. read of the "
      "side is a gate's argument, the gate's condition the selection's path condition, and nothing else reads state "
      "(no submodule call); then the lemma " + LEMMA + " (proved once by Z3)")
_BUILTINS = {"abs", "min", "max", "float", "int", "len"}
_EXPR = (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Tuple, ast.List, ast.Slice, ast.Constant, ast.keyword)


def _parents(tree: ast.AST) -> dict:
    return {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}


def _self_chain(node: ast.AST) -> bool:
    """``self.a``, ``self.a.b``, ``self.a[0]`` (constant subscripts only)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, ast.Name) and node.id == "self"


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


class _Module:
    """What the screen needs from the mended module: its torch and math import names."""

    def __init__(self, tree: ast.Module):
        self.torch = _module_aliases(tree, "torch")
        bound: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            for n in names_bound_by(node):
                bound.setdefault(n, []).append(node)
        self.bound = bound
        self.modules = set()   # names bound only by imports of torch / math modules
        for name, nodes in bound.items():
            if all(isinstance(n, (ast.Import, ast.ImportFrom)) and self._torch_or_math(n, name) for n in nodes):
                self.modules.add(name)

    @staticmethod
    def _torch_or_math(node: ast.AST, name: str) -> bool:
        for a in node.names:
            if (a.asname or a.name.split(".")[0]) != name:
                continue
            full = a.name if isinstance(node, ast.Import) else f"{node.module or ''}.{a.name}"
            if isinstance(node, ast.ImportFrom) and (node.level or not node.module):
                return False
            return full.split(".")[0] in ("torch", "math")
        return False


def _ungated(node: ast.AST, keep: str, mod: _Module) -> str | None:
    """Why ``node`` reads an input outside a gate with condition ``keep``, else None."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == GATE:
            if len(node.args) != 2 or node.keywords:
                return f"`{ast.unparse(node)}` is not `{GATE}(K, v)`"
            if ast.dump(node.args[0]) != keep:
                return f"`{ast.unparse(node)}` gates on `{ast.unparse(node.args[0])}`, not the side's path condition"
            v = node.args[1]
            if not (isinstance(v, ast.Name) or _self_chain(v)):
                return f"`{ast.unparse(v)}` is computed inside the gate (its backward runs on the untaken side)"
            return None
        if isinstance(func, ast.Name):
            if func.id not in _BUILTINS or func.id in mod.bound:
                return f"`{ast.unparse(node)}` calls `{func.id}`, which may read state the gates do not cover"
        elif isinstance(func, ast.Attribute):
            root = _root(func)
            if not (isinstance(root, ast.Name) and root.id in mod.modules):
                if isinstance(root, ast.Name) and root.id == "self":
                    return f"`{ast.unparse(node)}` calls a submodule or method of self, whose parameters no gate covers"
                why = _ungated(func.value, keep, mod)   # a method: its receiver
                if why:
                    return why
        else:
            return f"`{ast.unparse(node)}` calls `{ast.unparse(func)}`"
        for part in [*node.args, *(k.value for k in node.keywords)]:
            why = _ungated(part, keep, mod)
            if why:
                return why
        return None
    if isinstance(node, ast.Name):
        return f"`{node.id}` is read without a gate"
    if isinstance(node, ast.Attribute):
        root = _root(node)
        if isinstance(root, ast.Name) and root.id in mod.modules:
            return None   # torch.float16, math.pi
        return _ungated(node.value, keep, mod)
    if isinstance(node, ast.Subscript):
        return _ungated(node.value, keep, mod) or _ungated(node.slice, keep, mod)
    if isinstance(node, _EXPR):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.expr, ast.keyword)):
                why = _ungated(child, keep, mod)
                if why:
                    return why
        return None
    return f"the side holds `{ast.unparse(node)}` ({type(node).__name__}), which the screen does not read"


def _path(node: ast.AST, parents: dict, mod: _Module) -> ast.AST | str:
    """The selection path condition of ``node``, an argument of a ``torch.where`` nest."""
    conj, t = [], "torch"
    cur = node
    while True:
        call = parents.get(id(cur))
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "where"
                and isinstance(call.func.value, ast.Name) and call.func.value.id in mod.torch
                and len(call.args) == 3 and not call.keywords and cur in call.args[1:]):
            break
        pred = call.args[0]
        if not isinstance(pred, ast.Name):
            return f"the selection's predicate `{ast.unparse(pred)}` is not a name bound before it"
        t = call.func.value.id
        conj.append(pred if cur is call.args[1] else ast.parse(f"{t}.logical_not({pred.id})", mode="eval").body)
        cur = call
    if not conj:
        return "the gated side is not an argument of a torch.where selection"
    conj.reverse()
    out = conj[0]
    for c in conj[1:]:
        out = ast.parse(f"{t}.logical_and({ast.unparse(out)}, {ast.unparse(c)})", mode="eval").body
    return out


def _strip_gates(node: ast.AST) -> ast.AST:
    class T(ast.NodeTransformer):
        def visit_Call(self, call):
            self.generic_visit(call)
            if isinstance(call.func, ast.Name) and call.func.id == GATE and len(call.args) == 2:
                return call.args[1]
            return call
    return T().visit(node)


def gated(ob: dict, ctx: Ctx) -> Outcome:
    if not ctx.code or not ob.get("expr") or not ob.get("plain"):
        return unknown("the mended source or the gated side is not recorded")
    try:
        tree = ast.parse(ctx.code)
        side = ast.parse(ob["expr"], mode="eval").body
        plain = ast.parse(ob["plain"], mode="eval").body
    except SyntaxError as exc:
        return unknown(f"the gated side does not parse ({exc.msg})")
    bare = _strip_gates(ast.parse(ob["expr"], mode="eval").body)
    if ast.dump(bare) != ast.dump(plain):
        return check_refuted(BY, f"without its gates the side is `{ast.unparse(bare)}`, not "
                             f"`{ob['plain']}`, the side the forward obligations are about")
    mod = _Module(tree)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == GATE]
    canonical = ast.parse(GATE_HELPER).body[0]
    if len(defs) != 1 or ast.dump(defs[0]) != ast.dump(canonical) or len(mod.bound.get(GATE, [])) != 1:
        return check_refuted(BY, f"the module does not define `{GATE}` once, as the canonical helper")
    if "torch" not in mod.torch or any(not isinstance(n, ast.Import) for n in mod.bound.get("torch", [])):
        return check_refuted(BY, "`torch` is not bound by `import torch` alone (the helper reads it)")
    if "isinstance" in mod.bound:
        return check_refuted(BY, "the module binds `isinstance`, which the helper calls as a builtin")
    parents = _parents(tree)
    hits = [n for n in ast.walk(tree) if isinstance(n, ast.expr) and ast.dump(n) == ast.dump(side)]
    if not hits:
        return unknown("the gated side was not found in the mended source")
    for hit in hits:
        keep = _path(hit, parents, mod)
        if isinstance(keep, str):
            return check_refuted(BY, keep)
        stmt = hit
        while not isinstance(stmt, ast.stmt):
            stmt = parents[id(stmt)]
        if any(isinstance(n, ast.NamedExpr) for n in ast.walk(stmt)):
            return check_refuted(BY, "the selection's statement rebinds a name with `:=`")
        why = _ungated(hit, ast.dump(keep), mod)
        if why:
            return check_refuted(BY, why)
    return checked(BY, ["PyTorch's backward of torch.where(K, a, b) is (where(K, g, 0), where(K, 0, g)) "
                        "(derivatives.yaml)", "the side's inputs are the names and self. reads it holds",
                        "each input's producer passes a zero gradient on as zeros (finite partials at the call's "
                        "values), as every torch.where rewrite in training assumes: an input made by exp at "
                        "overflow or sqrt at 0 and read only by the untaken side gets 0 * inf = NaN; the "
                        "differential test compares gradients on its examples"],
                   lemmas=[LEMMA])


ENCODERS = {"gradient-gated": gated}
CHECKS = frozenset({"gradient-gated"})
