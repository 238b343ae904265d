"""Encoders for a class whose 0-d int64 buffers (made from Python ints in ``__init__``) are
also kept as Python ints (twins), with ``forward`` handed to a mirror that computes on the
twins. Sources: issue 10 kind 2 (encodec's ``stride``/``kernel_size``/``padding_total``,
transformers 5.x ``modeling_encodec.py``).

* ``int-terms-in-range`` (Z3, exact integers): every integer the mirror computes -- each
  ``+ - *``, ``// k``, ``max``/``min`` node over the twins, the tensor sizes and the ceil of
  a ratio -- lies within int64 for every twin in (-B, B) (checked when the module is built,
  ``int-guards-emitted``), every size in [0, S] and every ceil of a ratio in [-2^46, 2^46].
  The original computes the same numbers in int64 tensors, which wrap only outside int64,
  so the two agree.
* ``ceil-ratio-exact`` (check, citing ``proofs/cb_ceil_ratio.smt2``): for every integer
  ``a`` with |a| < 2^22, every ``s`` in [1, 64] and each offset |c| <= 8,
  ``ceil(fl(fl(a / s) + c))`` in IEEE float32 and float64 (the default dtype an int64 true
  division gives) equals ``-(-a // s) + c``; the check is that the guard's domain is inside
  the lemma's.
* ``int-buffers-unwritten`` (check, static screen of the mended module): no statement of
  the module writes a twinned attribute outside its registration in ``__init__``.
* ``int-guards-emitted`` (check, static screen of the mended module): the guards the
  proof above assumes are in the emitted code, and each twin ``self._mend_int_B`` is, through
  ``__init__``'s locals, the value buffer ``B`` is registered from, which is the value the
  original ``__init__`` registers (compared as substituted expressions).
"""
from __future__ import annotations

import ast
import copy
import z3

from verifier.encoders.base import Ctx, Query, decide
from verifier.encoders.buffer_leaves import _chain, _class, _leaf_writes, _method, _root_name  # noqa: F401
from verifier.outcomes import Outcome, check_refuted, checked, unknown

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
RATIO_RANGE = 2 ** 46   # |ceil(A / S + c)| for |A| <= 2^44 + 2^17, S >= 1, |c| <= 8, float32 rounding included


class _Unsupported(Exception):
    pass


class _Terms:
    """Integer terms of the mirror's numbers: leaves ``leaf_*`` (twins), ``size_*`` (tensor
    sizes), ``phi(a, b)`` (one of two values), ``ceilratio(A, S, c)`` (an integer of bounded
    magnitude)."""

    def __init__(self, twin_bound: int, size_bound: int):
        self.twin_bound, self.size_bound = twin_bound, size_bound
        self.vars: dict[str, z3.ArithRef] = {}
        self.premises: list = []
        self.nodes: list = []
        self.fresh = 0

    def var(self, name: str, lo: int, hi: int):
        if name not in self.vars:
            v = self.vars[name] = z3.Int(name)
            self.premises += [v >= lo, v <= hi]
        return self.vars[name]

    def term(self, node: ast.AST):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return z3.IntVal(node.value)
        if isinstance(node, ast.Name) and node.id.startswith("leaf_"):
            return self.var(node.id, -self.twin_bound + 1, self.twin_bound - 1)
        if isinstance(node, ast.Name) and node.id.startswith("size_"):
            return self.var(node.id, 0, self.size_bound)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self._node(-self.term(node.operand))
        if isinstance(node, ast.BinOp):
            a, b = self.term(node.left), self.term(node.right)
            if isinstance(node.op, ast.Add):
                return self._node(a + b)
            if isinstance(node.op, ast.Sub):
                return self._node(a - b)
            if isinstance(node.op, ast.Mult):
                return self._node(a * b)
            if isinstance(node.op, ast.FloorDiv) and isinstance(node.right, ast.Constant) and node.right.value > 0:
                return self._node(a / b)    # SMT-LIB div: the floor for a positive divisor, as Python and torch
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id in ("max", "min") and len(args) == 2:
                a, b = self.term(args[0]), self.term(args[1])
                return self._node(z3.If(b > a, b, a) if node.func.id == "max" else z3.If(b < a, b, a))
            if node.func.id == "phi" and len(args) == 2:
                a, b = self.term(args[0]), self.term(args[1])
                self.fresh += 1
                v = z3.Int(f"phi_{self.fresh}")
                self.premises.append(z3.Or(v == a, v == b))
                return v
            if node.func.id == "ceilratio" and len(args) == 3:
                self.term(args[0])
                self.term(args[1])
                self.fresh += 1
                return self.var(f"ceil_{self.fresh}", -RATIO_RANGE, RATIO_RANGE)
        raise _Unsupported(f"`{ast.unparse(node)}` is outside the encoded term grammar")

    def _node(self, t):
        self.nodes.append(t)
        return t


def terms_in_range(ob: dict, ctx: Ctx) -> Outcome:
    twin_bound, size_bound = int(ob.get("twin_bound") or 0), int(ob.get("size_bound") or 0)
    texts = list(ob.get("terms") or []) + list((ob.get("twins") or {}).values())
    if not twin_bound or not size_bound or not texts:
        return unknown("the obligation records no terms or bounds")
    enc = _Terms(twin_bound, size_bound)
    try:
        for text in texts:
            enc.term(ast.parse(text, mode="eval").body)
    except (SyntaxError, _Unsupported) as exc:
        return unknown(f"a term is not encoded: {exc}")
    assumptions = [
        f"every twin is an int in (-2^{twin_bound.bit_length() - 1}, 2^{twin_bound.bit_length() - 1}) "
        "(checked when the module is built: int-guards-emitted)",
        f"every tensor size is in [0, 2^{size_bound.bit_length() - 1}]",
        "every ceil of a ratio is in [-2^46, 2^46]: exactly -(-A // S) + c where |A| < 2^22 and 1 <= S <= 64 "
        "(ceil-ratio-exact), otherwise the original's own value, |A / S| < 2^45 with S >= 1 (checked) rounded "
        "to float32 (relative error below 2^-23), plus |c| <= 8",
        "the original computes each of these numbers in int64 tensors, which agree with exact integers "
        "within int64",
    ]

    def build():
        claim = z3.Or([z3.Or(t < INT64_MIN, t > INT64_MAX) for t in enc.nodes]) if enc.nodes else z3.BoolVal(False)
        return Query(enc.premises, [claim], assumptions)

    return decide("int-terms-in-range", [("bounded", build)], ctx, "exact integers (Z3 Int); int64 is "
                  "[-2^63, 2^63 - 1]")


LEMMA = "proofs/cb_ceil_ratio.smt2"
LEMMA_DOMAIN = {"a_bound": 2 ** 22, "s_max": 64, "c_max": 8, "dtypes": ("float32", "float64")}


def enumerate_ratio(c: int, a_bound: int, s_max: int, dtype_name: str) -> str | None:
    """The first (a, s) where torch's ceil of ``a / s + c`` (int64 tensors, true division in
    ``dtype_name`` as the default dtype) differs from the exact ceil, or None: the lemma's
    cross-check by enumeration (tests), not used per rewrite."""
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.arange(-a_bound + 1, a_bound, dtype=torch.int64)
    minus_a = -a
    # one buffer per intermediate, reused for every s: allocating 2**23-element tensors each
    # step took most of the time (3x slower)
    ratio, got, exact = torch.empty(a.shape, dtype=dtype), torch.empty_like(a), torch.empty_like(a)
    differs = torch.empty(a.shape, dtype=torch.bool)
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)     # an int64 true division gives the default dtype, as in the original
    try:
        promoted = (a[:1] / torch.tensor(1, dtype=torch.int64)).dtype   # the dtype does not depend on sizes
        if promoted != dtype:
            return f"an int64 true division gave {promoted}, not {dtype_name}"
        for s in range(1, s_max + 1):
            torch.div(a, torch.tensor(s, dtype=torch.int64), out=ratio)   # a / s, into the buffer
            got.copy_(ratio.add_(c).ceil_())                                # torch.ceil(a / s + c).to(int64)
            torch.div(minus_a, s, rounding_mode="floor", out=exact).neg_().add_(c)   # -(-a // s) + c
            if torch.ne(got, exact, out=differs).any():
                i = int(differs.nonzero()[0, 0])
                return f"a = {int(a[i])}, s = {s}, c = {c}: {dtype_name} gives {int(got[i])}, exact {int(exact[i])}"
    finally:
        torch.set_default_dtype(before)
    return None


def ceil_ratio_exact(ob: dict, ctx: Ctx) -> Outcome:
    offsets, a_bound, s_max = ob.get("offsets") or [], int(ob.get("a_bound") or 0), int(ob.get("s_max") or 0)
    dtypes = set(ob.get("dtypes") or [])
    if not offsets or not a_bound or not s_max or not dtypes:
        return unknown("the obligation records no domain")
    by = f"the lemma {LEMMA} (proved once by Z3), whose domain holds every instance here"
    dom = LEMMA_DOMAIN
    if a_bound > dom["a_bound"] or s_max > dom["s_max"] or not dtypes <= set(dom["dtypes"]):
        return check_refuted(by, f"the guard's domain (|a| < {a_bound}, s <= {s_max}, {sorted(dtypes)}) is wider "
                             f"than the lemma's (|a| < {dom['a_bound']}, s <= {dom['s_max']})")
    if any(abs(int(c)) > dom["c_max"] for c in offsets):
        return check_refuted(by, f"an offset in {sorted(offsets)} is outside the lemma's [-{dom['c_max']}, "
                             f"{dom['c_max']}]")
    return checked(by, ["torch divides an int64 tensor by an int64 tensor as the IEEE division of the default dtype "
                        "(float32 or float64), correctly rounded on every device (CUDA without fast-math, as PyTorch "
                        "builds it)",
                        "the mirror takes the exact form only under the lemma's guard, and reads the original's own "
                        "value otherwise (int-guards-emitted)"], lemmas=[LEMMA])


def _related(tree: ast.Module, cname: str) -> set[str]:
    """``cname`` and the module's classes that are its bases or subclasses, transitively, by name."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    bases = {n: {ast.unparse(b).split(".")[-1] for b in c.bases} for n, c in classes.items()}
    related, grew = {cname}, True
    while grew:
        grew = False
        for n, bs in bases.items():
            if n not in related and (bs & related or any(n in bases.get(r, ()) for r in related)):
                related.add(n)
                grew = True
    return related


def _plainly_used(tree: ast.Module, names: set[str]) -> set[str]:
    """The class names among ``names`` used only to construct (``K(...)``), as a base or in
    ``isinstance``: a ``K.method`` reference may run K's method on another object
    (``K.tighten(crop, 16)``, ``setattr(Crop, "tighten", K.tighten)``: fourth review)."""
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    annotations = [a for n in ast.walk(tree) for a in (
        [n.annotation] if isinstance(n, (ast.arg, ast.AnnAssign)) else
        [n.returns] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else []) if a is not None]
    in_annotation = {id(x) for a in annotations for x in ast.walk(a)}   # `-> K | None` runs nothing of K
    out = set(names)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id in out and isinstance(node.ctx, ast.Load)) or \
                id(node) in in_annotation:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node or isinstance(parent, ast.ClassDef):
            continue
        grand = parents.get(id(parent)) if isinstance(parent, ast.Tuple) else parent
        if isinstance(grand, ast.Call) and isinstance(grand.func, ast.Name) and grand.func.id == "isinstance" and \
                len(grand.args) == 2 and (grand.args[1] is node or grand.args[1] is parent):
            continue
        out.discard(node.id)
    return out


def _unrelated_self_writes(tree: ast.Module, related: set[str], attrs: set[str]) -> set[int]:
    """Ids of ``self.B`` writes (assignment, ``del``, in-place method, ``.data``) inside the
    module's classes that are not ``related`` (neither the buffers' class nor a base or subclass
    of it): their ``self`` is not an instance of it."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}

    def own(t) -> bool:
        return isinstance(t, ast.Attribute) and t.attr in attrs and isinstance(t.value, ast.Name) and t.value.id == "self"

    out: set[int] = set()
    plain = _plainly_used(tree, set(classes))
    for n, c in classes.items():
        if n in related or n not in plain:
            continue
        for node in ast.walk(c):
            if isinstance(node, (ast.Assign, ast.Delete)) and all(own(t) for t in node.targets) or \
                    isinstance(node, (ast.AugAssign, ast.AnnAssign)) and own(node.target) or \
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and own(node.func.value) or \
                    isinstance(node, ast.Attribute) and node.attr == "data" and own(node.value):
                out.add(id(node))
    return out


_DUNDER_SETTERS = {"__setattr__", "__delattr__", "__setitem__"}
_READ_ONLY = {"device", "dtype", "shape", "ndim", "is_cuda", "is_meta", "item", "tolist", "size", "dim", "numel"}
_BUFFER_APIS = {"buffers", "named_buffers", "_buffers", "get_buffer", "to_empty", "apply", "functional_call",
                "stack_module_state", "register_module_buffer_registration_hook", "vars", "__dict__"}
# module methods that rewrite every buffer when called on an instance (`Module.type(torch.float16)`)
_INSTANCE_WRITERS = {"type", "_apply", "register_buffer", "__setattr__", "to_empty"}
# class members that change what a module does with its buffers (mend's screen also reads this)
OVERRIDES = ("_apply", "__setattr__", "__getattr__", "__getattribute__", "register_buffer", "_load_from_state_dict")


def _strip_tensors(node: ast.AST) -> ast.AST:
    """``node`` with every ``<x>.tensor(E, dtype=...)`` replaced by ``E`` (the value of an int ``E``)."""
    class Strip(ast.NodeTransformer):
        def visit_Call(self, call):
            self.generic_visit(call)
            if isinstance(call.func, ast.Attribute) and call.func.attr == "tensor" and len(call.args) == 1 and \
                    all(k.arg == "dtype" and ast.unparse(k.value).split(".")[-1] in ("int64", "long")
                        for k in call.keywords):
                return call.args[0]     # an int64 tensor of an int: its value (a bfloat16 one rounds: third review)
            return call
    return Strip().visit(copy.deepcopy(node))


def _subst(node: ast.AST, env: dict[str, ast.AST | None]) -> ast.AST | None:
    """``node`` with each local name replaced by its value in ``env``; None if a name it reads is
    poisoned (bound in a block the path does not take)."""
    bad = []

    class Sub(ast.NodeTransformer):
        def visit_Name(self, name):
            if name.id in env:
                if env[name.id] is None:
                    bad.append(name.id)
                    return name
                return copy.deepcopy(env[name.id])
            return name
    out = Sub().visit(copy.deepcopy(node))
    return None if bad else out


def _bound(stmt: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _step(stmt: ast.AST, env: dict) -> None:
    """``env`` after ``stmt``: a plain ``name = value`` substituted; any other binding poisons."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        env[stmt.targets[0].id] = _subst(stmt.value, env)
    else:
        for name in _bound(stmt):
            env[name] = None


def _env_at(stmts: list, target: ast.AST, env: dict) -> dict | None:
    """The locals' values (sequential substitution) on the path to the statement holding
    ``target``, or None if it is not under ``stmts``."""
    for stmt in stmts:
        if any(n is target for n in ast.walk(stmt)):
            for block in ("body", "orelse"):
                inner = getattr(stmt, block, None)
                if isinstance(inner, list) and any(n is target for s_ in inner for n in ast.walk(s_)) and \
                        not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                    return _env_at(inner, target, dict(env))
            return env
        _step(stmt, env)
    return None


def _registration(stmt: ast.stmt, attrs: set[str]) -> tuple[str, ast.AST] | None:
    """(B, X) when ``stmt`` sets ``self.B = X`` (``X`` unwrapped from ``nn.Buffer(X, ...)``) or
    calls ``self.register_buffer("B", X, ...)``, for ``B`` in ``attrs``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
            and isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == "self" \
            and stmt.targets[0].attr in attrs:
        value = stmt.value
        if isinstance(value, ast.Call) and isinstance(value.func, (ast.Attribute, ast.Name)) and \
                ast.unparse(value.func).endswith("Buffer") and value.args:
            value = value.args[0]
        return stmt.targets[0].attr, value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
            ast.unparse(stmt.value.func) == "self.register_buffer" and len(stmt.value.args) >= 2 and \
            isinstance(stmt.value.args[0], ast.Constant) and stmt.value.args[0].value in attrs:
        return stmt.value.args[0].value, stmt.value.args[1]
    return None


def registered_values(init: ast.FunctionDef, attrs: set[str]) -> dict[str, ast.AST]:
    """Each twinned attribute's value as ``__init__`` registers it, over the module's own
    attributes (``self.conv.stride[0]``), ``torch.tensor(E, dtype=...)`` read as ``E``."""
    env: dict[str, ast.AST | None] = {}
    out: dict[str, ast.AST] = {}
    for stmt in init.body:
        target, value = _registration(stmt, attrs) or (None, None)
        if target is not None:
            v = _subst(value, env)
            if v is not None:
                class Self(ast.NodeTransformer):    # a derived attribute reads the registered ones
                    def visit_Attribute(self, a):
                        if isinstance(a.value, ast.Name) and a.value.id == "self" and a.attr in out:
                            return copy.deepcopy(out[a.attr])
                        self.generic_visit(a)
                        return a
                value_ = _strip_tensors(Self().visit(v))
                if not {n.id for n in ast.walk(value_) if isinstance(n, ast.Name)} - {"self"}:
                    out[target] = value_      # over the module's own attributes only: comparable
            continue
        _step(stmt, env)
    return out


def _may_be_instance(recv: ast.AST, self_related: bool, holders: set[str]) -> bool:
    """Whether ``recv`` in ``recv.B`` may be an instance of the buffers' class: ``self`` in a
    related class; another name unless it is a config; ``X.a`` where the module assigns an
    instance of the class to an attribute ``a``; a call, subscript or anything else (not
    followed). ``module.conv.kernel_size`` (a Conv1d's tuple) and ``config.kernel_size`` are not."""
    if isinstance(recv, ast.Name):
        if recv.id == "self":
            return self_related
        return not (recv.id in ("config", "cfg") or recv.id.endswith("_config"))
    if isinstance(recv, ast.Attribute):
        return recv.attr in holders
    return True


def _holders(tree: ast.Module, cname: str, own_defs: set[str]) -> set[str]:
    """Attribute names that may hold an instance of the class: assigned (plain, annotated, or
    unpacked from a tuple) a call of the class or of a function or class of the module, or a
    name bound to one (``enc = Conv(...); self.enc = enc``), or registered by name
    (``self.add_module("enc", Conv(...))``, ``setattr(self, "enc", ...)``: helper-58)."""
    def makes(v) -> bool:
        return isinstance(v, ast.Call) and (_names_class(ast.unparse(v.func), cname) or
                                            _own_call(ast.unparse(v.func), own_defs))
    made = {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and makes(n.value)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}

    def holds(v) -> bool:
        return makes(v) or (isinstance(v, ast.Name) and v.id in made)
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute) and holds(n.value):
                    out.add(t.attr)
                if isinstance(t, (ast.Tuple, ast.List)):
                    values = n.value.elts if isinstance(n.value, (ast.Tuple, ast.List)) and \
                        len(n.value.elts) == len(t.elts) else [n.value] * len(t.elts)
                    out |= {e.attr for e, v in zip(t.elts, values) if isinstance(e, ast.Attribute) and
                            (holds(v) or not isinstance(n.value, (ast.Tuple, ast.List)))}
        if isinstance(n, ast.Call) and (isinstance(n.func, ast.Attribute) and n.func.attr in (
                "add_module", "register_module") or isinstance(n.func, ast.Name) and n.func.id == "setattr"):
            args = n.args[1:] if isinstance(n.func, ast.Name) else n.args
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                out.add(args[0].value)
    return out


def _names_class(func: str, cname: str) -> bool:
    """``func`` calls the class ``cname`` (by its name, or through a module other than torch's)."""
    prefix, _, last = func.rpartition(".")
    return last == cname and prefix not in ("nn", "torch.nn")


def _own_call(func: str, own: set[str]) -> bool:
    """``func`` calls a function or class of the module (``make_crop``, ``self.make``), not
    torch's (``nn.Conv1d`` where the module has a ``Conv1d`` of its own)."""
    prefix, _, last = func.rpartition(".")
    return last in own and not (prefix == "nn" or prefix.startswith(("nn.", "torch")))


def _foreign_nn_class(name: str) -> bool:
    """``nn.Conv1d``, ``torch.nn.Linear``...: a torch.nn class that is not ``Module``."""
    prefix, _, last = name.rpartition(".")
    return prefix in ("nn", "torch.nn") and last not in ("Module", "ModuleList", "ModuleDict", "Sequential")


def _narrowed_away(node: ast.AST, parents: dict, related: set[str]) -> bool:
    """``R.B`` sits in the body of ``if isinstance(R, T)`` whose ``T`` names none of the related
    classes (``if isinstance(module, nn.Conv1d): ... module.kernel_size[0]``)."""
    recv = getattr(node, "value", None)
    if not isinstance(recv, ast.Name):
        return False
    child, cur = node, parents.get(id(node))
    while cur is not None:
        if isinstance(cur, ast.If) and any(child is b for b in cur.body):
            t = cur.test
            if isinstance(t, ast.Call) and isinstance(t.func, ast.Name) and t.func.id == "isinstance" and \
                    len(t.args) == 2 and isinstance(t.args[0], ast.Name) and t.args[0].id == recv.id:
                kinds = t.args[1].elts if isinstance(t.args[1], ast.Tuple) else [t.args[1]]
                # narrowed away only to torch.nn classes other than Module (`nn.Module` is a base of
                # the class: third review); a name the screen cannot place may be the class
                return all(_foreign_nn_class(ast.unparse(k)) for k in kinds)
        child, cur = cur, parents.get(id(cur))
    return False


def _is_buffer_read(node: ast.AST, attrs: set[str], aliases: set[str], self_related: bool = True,
                    holders: set[str] = frozenset()) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in attrs and isinstance(node.ctx, ast.Load) and
            _may_be_instance(node.value, self_related, holders)) or \
        (isinstance(node, ast.Name) and node.id in aliases and isinstance(node.ctx, ast.Load))


def screen_writes(code: str, cname: str, attrs: set[str], typed: set[str]) -> tuple[list[str], list[str]]:
    """(writes, escapes) of the twinned attributes ``attrs`` of class ``cname`` in ``code``.

    A write declines: an assignment, augmented assignment or ``del`` of ``X.B``; ``X.B.<m>_()``;
    ``X.B.data``; ``X.B`` passed first to a function named ``..._`` (``init.zeros_``) unless it
    is ``copy_``/``constant_`` of the very value ``__init__`` registered (transformers 5's
    ``_init_weights`` re-sets the buffers so, from the same expressions); the buffer's name as a
    string; a generic buffer API (``buffers()``, ``_buffers``, ``apply``, ``to_empty``,
    ``functional_call``...); an override of ``_apply``/``__setattr__``... in the class; a
    registration not made exactly once at the top level of ``__init__``. Writes through
    ``self`` inside an unrelated class of the module are that class's own.

    An escape is a read outside the typed methods ``typed`` (where the rule's typing decides)
    and ``__init__`` that is not an operand of arithmetic or a comparison, a read-only
    attribute (``.device``, ``.item()``...), or a local alias used so: the value goes to code
    the screen does not follow (mimi's streaming cache keeps the buffer in a list)."""
    tree = ast.parse(code)
    klass = _class(tree, cname)
    init = _method(klass, "__init__") if klass else None
    if init is None:
        return [f"`{cname}.__init__` is not in the module"], []
    writes: list[str] = []
    escapes: list[str] = []
    registered: dict[str, int] = {}
    allowed: set[int] = set()
    for stmt in init.body:     # the top-level registrations, one per attribute
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
                and isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == "self":
            target = stmt.targets[0].attr
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                ast.unparse(stmt.value.func) == "self.register_buffer" and stmt.value.args and \
                isinstance(stmt.value.args[0], ast.Constant):
            target = stmt.value.args[0].value
            if target in attrs:
                allowed.add(id(stmt.value.args[0]))
        if target in attrs:
            registered[target] = registered.get(target, 0) + 1
            allowed |= {id(n) for n in ast.walk(stmt)}
    twice = [a for a, n in registered.items() if n > 1]
    if twice or set(registered) != attrs:
        writes.append(f"`{(twice or sorted(attrs - set(registered)))[0]}` is not registered exactly once at the top "
                      "level of `__init__`")
    related = _related(tree, cname)
    allowed |= _unrelated_self_writes(tree, related, attrs)
    values = registered_values(init, attrs)
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    typed_ids = {id(n) for f in klass.body if isinstance(f, ast.FunctionDef) and
                 (f.name in typed or f.name.startswith("_mend_int_")) for n in ast.walk(f)}
    # attributes that may hold an instance: assigned the class, or the result of a function or
    # class of the module (`self.crop = make_crop(64)`: fourth review)
    own_defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    holders = _holders(tree, cname, own_defs)
    owner = {id(f): c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
             if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    in_related = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and owner.get(id(f)) in related for n in ast.walk(f)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and (node.value in attrs or node.value in _BUFFER_APIS) and \
                id(node) not in allowed:
            writes.append(f"line {node.lineno}: the string {node.value!r} may name the buffer")
        recv = node.func.value if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        if recv is not None and node.func.attr in _INSTANCE_WRITERS and id(node) not in allowed and \
                ((isinstance(recv, ast.Name) and recv.id == "self" and id(node) in in_related) or
                 (isinstance(recv, ast.Attribute) and recv.attr in holders)) and \
                not (node.func.attr in ("register_buffer", "__setattr__") and node.args and
                     isinstance(node.args[0], ast.Constant) and node.args[0].value not in attrs):
            writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` may rewrite the buffers of an instance")
        if isinstance(node, ast.Call) and any(k.arg == "out" and _is_buffer_read(k.value, attrs, set(),
                                                                                   id(node) in in_related, holders)
                                              for k in node.keywords):
            writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes a buffer as `out=`")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "setattr", "delattr") and len(node.args) >= 2 and \
                not isinstance(node.args[1], ast.Constant) and \
                _may_be_instance(node.args[0], id(node) in in_related, holders):
            writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` reaches an attribute by a computed name")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in _DUNDER_SETTERS and not (
                    node.args and isinstance(node.args[-2 if len(node.args) > 1 else 0], ast.Constant) and
                    node.args[-2 if len(node.args) > 1 else 0].value not in attrs):
            # `super().__setattr__(name, v)`, `object.__setattr__(self, name, v)`: a computed or
            # buffer name set through the dunder itself (fourth review)
            writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` sets an attribute through `{node.func.attr}`")
        if isinstance(node, (ast.Attribute, ast.Name)) and (getattr(node, "attr", None) or getattr(node, "id", None)) \
                in _BUFFER_APIS and not (isinstance(node, ast.Attribute) and node.attr == "apply" and
                                         ast.unparse(node.value) in ("torch.autograd.Function", "Function")):
            writes.append(f"line {node.lineno}: `{ast.unparse(node)}` reaches buffers generically")
        if id(node) in allowed:
            continue
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for a in ast.walk(t):
                    if isinstance(a, ast.Attribute) and a.attr in attrs:
                        writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes `{a.attr}`")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Attribute) and node.func.value.attr in attrs and \
                node.func.attr.endswith("_") and not node.func.attr.endswith("__"):
            writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes in place")
        if isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.value, ast.Attribute) and \
                node.value.attr in attrs:
            writes.append(f"line {node.lineno}: `{ast.unparse(node)}` reaches the buffer's data")
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Attribute) and \
                node.args[0].attr in attrs and ast.unparse(node.func).split(".")[-1].endswith("_") and \
                id(node) not in typed_ids:
            why = _init_write(node, funcs, values, tree, cname)
            if why:
                writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` {why}")
            else:
                allowed.add(id(node.args[0]))
    for f in klass.body:
        if isinstance(f, ast.FunctionDef) and f.name in OVERRIDES:
            writes.append(f"`{cname}` overrides `{f.name}`")
    for fn in funcs:
        if id(fn) in typed_ids:
            continue
        self_related = owner.get(id(fn)) in related
        aliases = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                   for t in n.targets if isinstance(t, ast.Name) and
                   _is_buffer_read(n.value, attrs, set(), self_related, holders)}
        # any name bound to a bare `X.B`, whatever X is (a factory's result: third review), for writes
        any_alias = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                     for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Attribute)
                     and n.value.attr in attrs}
        for node in ast.walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)) and any(
                    isinstance(t, ast.Subscript) and _root_name(t) in any_alias
                    for t in (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target])):
                # `p = cfg.padding_total; p[...] = 0` writes the buffer's storage (helper-58)
                writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes a buffer through an alias")
            if isinstance(node, ast.Call) and (
                    any(k.arg == "out" and isinstance(k.value, ast.Name) and k.value.id in any_alias
                        for k in node.keywords) or
                    (node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in any_alias and
                     (ast.unparse(node.func).split(".")[-1].endswith("_") and
                      not ast.unparse(node.func).endswith("__") or
                      ast.unparse(node.func).split(".")[-1].startswith("i") and
                      ast.unparse(node.func).split(".")[0] == "operator"))):
                writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes a buffer through an alias")
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in any_alias:
                # `limit = self.max_len; limit -= m` writes the buffer in place (second review)
                writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes a buffer through an alias")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id in any_alias and \
                    node.func.attr.endswith("_") and not node.func.attr.endswith("__"):
                writes.append(f"line {node.lineno}: `{ast.unparse(node)[:80]}` writes a buffer in place through an alias")
            if id(node) in allowed or not _is_buffer_read(node, attrs, aliases, self_related, holders) or \
                    _narrowed_away(node, parents, related):
                continue
            parent = parents.get(id(node))
            if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and not all(
                    isinstance(t, ast.Name) for t in getattr(parent, "targets", [getattr(parent, "target", None)])):
                # stored in an attribute or an item: a second handle on the buffer's storage
                writes.append(f"line {node.lineno}: `{ast.unparse(parent)[:80]}` keeps a second handle on a buffer")
                continue
            # an operator is no harbour: `+t` is `t` itself, and `obj + t` may hand `t` to obj's
            # `__radd__` (fourth review); only a read-only attribute keeps the tensor in place
            if (isinstance(parent, ast.Attribute) and parent.attr in _READ_ONLY) or \
                    (isinstance(parent, ast.Assign) and isinstance(node, ast.Attribute) and
                     all(isinstance(t, ast.Name) and t.id in aliases for t in parent.targets)):
                continue
            escapes.append(f"line {node.lineno} (`{fn.name}`): `{ast.unparse(parent or node)[:80]}`")
        for node in ast.walk(fn):
            # a typed method's result may be a buffer (`def limit(self): return self.max_len`):
            # called from here, it escapes the typing (fourth review)
            if isinstance(node, ast.Attribute) and node.attr in typed - {"forward"} and \
                    _may_be_instance(node.value, self_related, holders):
                escapes.append(f"line {node.lineno} (`{fn.name}`): `{ast.unparse(node)[:80]}` calls a typed method, "
                               "whose result may be a buffer")
    return writes, escapes


def _init_write(call: ast.Call, funcs: list, values: dict, tree: ast.Module, cname: str) -> str | None:
    """None when ``call`` is ``...copy_(R.B, V)`` / ``...constant_(R.B, V)`` writing the value
    ``__init__`` registered for ``B`` (``V`` over ``R``'s attributes, as ``__init__``'s over
    ``self``'s); else why not."""
    dotted = ast.unparse(call.func).split(".")
    name = dotted[-1]
    target = call.args[0]
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | \
        {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if name not in ("copy_", "constant_") or len(dotted) < 2 or dotted[-2] != "init" or "init" in own or \
            name in own or len(call.args) != 2 or call.keywords:
        # only torch's or transformers' `init.copy_`/`init.constant_` (a function of the module's own
        # named `copy_` may write anything: third review)
        return "writes the buffer in place"
    if not isinstance(target.value, ast.Name):
        return "writes the buffer through an expression the screen does not follow"
    fn = next((f for f in funcs if any(n is call for n in ast.walk(f))), None)
    env = _env_at(fn.body, call, {}) if fn is not None else None
    value = _subst(call.args[1], env) if env is not None else None
    if value is None or target.value.id in env:
        return "writes the buffer a value the screen cannot follow"

    class Rename(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.Name("self", n.ctx) if n.id == target.value.id else n
    got = _strip_tensors(Rename().visit(value))
    free = {n.id for n in ast.walk(got) if isinstance(n, ast.Name)} - {"self"}
    if free:
        # a name is not the module's state: a parameter `max_len` here is not `__init__`'s (second review)
        return f"writes a value read from `{sorted(free)[0]}`, not only from the module's own attributes"
    want = values.get(target.attr)
    if want is not None:
        changed = _leaf_writes(tree, want, cname)
        if changed:
            # `self.limit = n; init.constant_(self.max_len, self.limit)`: the same expression, another
            # value (third review)
            return f"re-reads {changed}"
    if want is None or ast.dump(got) != ast.dump(want):
        return (f"writes `{ast.unparse(got)[:60]}`, not the value `__init__` registered "
                f"(`{ast.unparse(want)[:60] if want is not None else '?'}`)")
    return None


def buffers_unwritten(ob: dict, ctx: Ctx) -> Outcome:
    attrs, cname = set(ob.get("attributes") or []), ob.get("class")
    if not attrs or not cname or not ctx.code:
        return unknown("the attributes, the class or the mended source are not recorded")
    by = ("static screen of the mended module: every write to a twinned attribute (assignment, `del`, in-place "
          "method or function, `.data`, its name as a string, generic buffer APIs), every read outside the typed "
          "methods that lets the buffer escape; `copy_`/`constant_` of the value `__init__` registered is allowed")
    writes, escapes = screen_writes(ctx.code, cname, attrs, set(ob.get("typed") or []))
    if writes:
        return check_refuted(by, writes[0])
    if escapes:
        return unknown(f"the buffer escapes to code the screen does not follow: {'; '.join(escapes[:3])}"
                       f"{' ...' if len(escapes) > 3 else ''} (assumed not written there)")
    return checked(by, ["code outside this module (a caller, a subclass in another file, `Module.type()`, "
                        "`to_empty()`, `torch.func.functional_call`, loading on the meta device) does not write the "
                        "buffers or replace the mirrored methods on an instance",
                        "the attributes `__init__` computes the twins from (`self.conv.stride`...) keep their values "
                        "until `_init_weights` re-sets the buffers from them",
                        "reads inside the typed methods are the rule's typing's (its static analysis)"])


def _init_of(code: str | None, cname: str) -> ast.FunctionDef | None:
    try:
        klass = _class(ast.parse(code), cname) if code else None
    except SyntaxError:
        return None
    return _method(klass, "__init__") if klass else None


def twins_mismatch(init: ast.FunctionDef, attrs: set[str], original: ast.FunctionDef | None) -> str | None:
    """Why a twin ``self._mend_int_B`` may not hold the value ``__init__`` registers buffer
    ``B`` from, or that value may not be the original's, or None: each is read through the
    sequential substitution of its ``__init__``'s locals (``torch.tensor(E, dtype=int64)``
    read as ``E``; a twin read as its own value), and the three must be the same expression."""
    if not attrs:
        return "the twinned attributes are not recorded"
    if original is None:
        return "the original `__init__` is not available to compare the registered values with"
    before = _registered(original, attrs)
    if isinstance(before, str):
        return f"in the original: {before}"
    got = _registered(init, attrs)
    if isinstance(got, str):
        return got
    registered, twins = got
    for attr in sorted(attrs):
        if attr not in before[0] or ast.dump(before[0][attr]) != ast.dump(registered.get(attr, ast.Pass())):
            return (f"`self.{attr}` is registered from `{ast.unparse(registered[attr]) if attr in registered else '?'}`"
                    f" where the original registers `{ast.unparse(before[0][attr]) if attr in before[0] else '?'}`")
        if attr not in twins:
            return f"`self.{attr}` has no twin in `__init__`"
        if ast.dump(registered[attr]) != ast.dump(twins[attr]):
            return (f"the twin of `self.{attr}` is `{ast.unparse(twins[attr])}`, the buffer is registered from "
                    f"`{ast.unparse(registered[attr])}`")
    return None


def _registered(init: ast.FunctionDef, attrs: set[str]) -> tuple[dict, dict] | str:
    """(registered values, twin values) of ``attrs`` in ``init``, substituted; or why not."""
    registered: dict[str, ast.AST] = {}
    twins: dict[str, ast.AST] = {}
    env: dict = {}

    class Twins(ast.NodeTransformer):    # a derived twin reads the twins before it
        def visit_Attribute(self, a):
            if isinstance(a.value, ast.Name) and a.value.id == "self" and a.attr.startswith("_mend_int_") and \
                    a.attr[len("_mend_int_"):] in twins:
                return copy.deepcopy(twins[a.attr[len("_mend_int_"):]])
            if isinstance(a.value, ast.Name) and a.value.id == "self" and a.attr in registered:
                return copy.deepcopy(registered[a.attr])
            self.generic_visit(a)
            return a

    twin_attrs = {"_mend_int_" + a for a in attrs}
    for stmt in init.body:
        target, value, kind = None, None, None
        twin, reg = _registration(stmt, twin_attrs), _registration(stmt, attrs)
        if twin is not None:
            v = twin[1]
            if not (isinstance(v, ast.IfExp) and _same(v.test, "_mend_int_exact") and _same(v.orelse, "None")):
                return f"`self.{twin[0]}` is not `<twin> if _mend_int_exact else None` (line {stmt.lineno})"
            target, value, kind = twin[0][len("_mend_int_"):], v.body, twins
        elif reg is not None:
            (target, value), kind = reg, registered
        if target is None:
            _step(stmt, env)
            continue
        v = _subst(value, env)
        if v is None:
            return f"line {stmt.lineno} reads a local bound in a block: its value is not followed"
        kind[target] = _strip_tensors(Twins().visit(v))
    return registered, twins


def _same(node: ast.AST, text: str) -> bool:
    """``node`` is the expression ``text`` (compared as trees: parentheses do not count)."""
    return ast.dump(node) == ast.dump(ast.parse(text, mode="eval").body)


def guards_emitted(ob: dict, ctx: Ctx) -> Outcome:
    cname, locals_ = ob.get("class"), ob.get("locals") or []
    if not cname or not ctx.code or not locals_:
        return unknown("the class, its twin locals or the mended source are not recorded")
    by = "static screen of the mended module: the guards the range proof and the ratio lemma assume, as emitted"
    tree = ast.parse(ctx.code)
    klass = _class(tree, cname)
    init, fwd = (_method(klass, "__init__"), _method(klass, "forward")) if klass else (None, None)
    if init is None or fwd is None:
        return unknown(f"`{cname}.__init__` or `forward` is not in the mended module")
    bound = int(ob.get("twin_bound") or 0)
    pw = f"2 ** {bound.bit_length() - 1}"
    names = ", ".join(f"_mend_int_{v}" for v in sorted(locals_)) + ("," if len(locals_) == 1 else "")
    want_exact = ast.unparse(ast.parse(f"_mend_int_exact = all((type(v) is int and -{pw} < v < {pw} "
                                       f"for v in ({names})))"))
    want_ok = ast.unparse(ast.parse("self._mend_int_ok = " + " and ".join(
        ["_mend_int_exact"] + [f"self._mend_int_{d} >= 1" for d in ob.get("divisors") or []])))
    body = [ast.unparse(s) for s in init.body]
    if want_exact not in body:
        return check_refuted(by, f"`__init__` does not check the twins as `{want_exact}`")
    if want_ok not in body or body.index(want_ok) < body.index(want_exact):
        return check_refuted(by, f"`__init__` does not set `{want_ok}` after the check")
    attrs = set(ob.get("attributes") or [])
    mismatch = twins_mismatch(init, attrs, _init_of(ctx.before, cname))
    if mismatch:
        return check_refuted(by, mismatch)
    torch = ob.get("torch") or "torch"
    first = next((s for s in fwd.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))), None)
    dispatch = f"type(self) is {cname} and getattr(self, '_mend_int_ok', False)"
    inner = first.body[0] if isinstance(first, ast.If) and first.body and \
        _same(first.test, f"not {torch}.jit.is_scripting()") and not first.orelse else None
    if not (isinstance(inner, ast.If) and _same(inner.test, dispatch) and not inner.orelse):
        return check_refuted(by, "`forward` does not start by testing the twins' guard")
    a, s = int(ob.get("ratio_a") or 0), int(ob.get("ratio_s") or 0)
    lemma = (f"-2 ** {a.bit_length() - 1} < _mend_int_a < 2 ** {a.bit_length() - 1} and 0 < _mend_int_s <= {s} and "
             f"{torch}.get_default_dtype() in ({torch}.float32, {torch}.float64)")
    lambdas = [n for n in ast.walk(klass) if isinstance(n, ast.Lambda) and
               [x.arg for x in n.args.args] == ["_mend_int_a", "_mend_int_s"]]
    if len(lambdas) != int(ob.get("ratios") or 0):
        return check_refuted(by, f"{len(lambdas)} ratio forms emitted, {ob.get('ratios')} expected")
    for lam in lambdas:
        if not isinstance(lam.body, ast.IfExp) or not _same(lam.body.test, lemma):
            return check_refuted(by, f"a ratio form is not guarded by `{lemma}`")
    return checked(by, [f"twins: {', '.join(sorted(locals_))}; divisors checked >= 1: "
                        f"{', '.join(ob.get('divisors') or []) or 'none'}"])


ENCODERS = {"int-terms-in-range": terms_in_range, "ceil-ratio-exact": ceil_ratio_exact,
            "int-buffers-unwritten": buffers_unwritten, "int-guards-emitted": guards_emitted}
CHECKS = frozenset({"ceil-ratio-exact", "int-buffers-unwritten", "int-guards-emitted"})
