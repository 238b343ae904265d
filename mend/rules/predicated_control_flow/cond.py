"""The ``torch.cond`` planner: when running the untaken side is the problem (a submodule
call, or an op whose gradient is non-finite off the domain the predicate guards), the
if/else becomes ``torch.cond`` under ``torch.compile``, the original ``if`` kept for eager."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mend.rules._common import ReplaceAll, has_out_kwarg, inplace_call
from mend.rules.predicated_control_flow.branches import _Arm, _line, _order
from mend.rules.predicated_control_flow.env import (NAME, _bound_names, _code, _Declined, _Env, _is_literal,
                                                    _name_reads, _params, _read_names, _strip, _walk)
from mend.rules.predicated_control_flow.screen import FORCING_HOOK, _is_bool
from mend.taxonomy import call_name
from verifier.encoders.cond import READY_TEXT

# Tensor methods / torch functions that may return their input or a view of it: a cond
# branch must not (torch.cond rejects aliasing outputs, even in eager), so such a value
# is cloned -- only where nothing can observe the lost aliasing (see _alias_observers).
_MAY_ALIAS = {"view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "squeeze", "unsqueeze",
              "expand", "expand_as", "narrow", "select", "unfold", "flatten", "unflatten", "detach", "contiguous",
              "to", "type", "type_as", "float", "half", "double", "bfloat16", "long", "int", "bool", "short",
              "real", "imag", "diagonal", "movedim", "moveaxis", "swapaxes", "swapdims", "split", "chunk", "unbind",
              "as_strided", "view_as_real", "view_as_complex", "align_to", "refine_names", "rename", "mT", "mH",
              "T", "H", "data", "requires_grad_", "cpu", "cuda", "clone_if_needed", "squeeze_", "alias",
              "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "tensor_split", "hsplit", "vsplit",
              "dsplit", "split_with_sizes", "unsafe_split", "as_tensor", "asarray", "nan_to_num_"}
# What a use of a watched tensor may read without the result sharing its storage (helper-98: `out.ravel()`,
# `torch.positive(out)`, `F.dropout(out, p, False)` may return `out` or a view of it, and an in-place write
# through that alias, even inside a module call, then changes `out` behind the clone): metadata, and
# methods and torch functions that always allocate their result. Anything else is an observer.
_NO_ALIAS = {"shape", "dtype", "device", "layout", "size", "dim", "ndim", "ndimension", "numel", "nelement",
             "element_size", "stride", "is_floating_point", "is_complex", "is_cuda", "requires_grad",
             "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "exp", "exp2",
             "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
             "gelu", "silu", "abs", "neg", "sign", "reciprocal", "square", "clamp", "clip", "clamp_min", "clamp_max",
             "maximum", "minimum", "where", "masked_fill", "matmul", "mm", "bmm", "sum", "mean", "prod", "std", "var",
             "norm", "amax", "amin", "max", "min", "argmax", "argmin", "logsumexp", "cumsum", "cumprod", "softmax",
             "log_softmax", "any", "all", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isclose",
             "allclose", "equal", "clone", "round", "floor", "ceil", "trunc", "lerp", "topk", "gather",
             "index_select", "masked_select", "repeat", "roll", "flip", "tolist", "item", "new_zeros", "new_ones",
             "new_full", "new_empty", "new_tensor", "zeros_like", "ones_like", "empty_like", "full_like", "cat",
             "stack", "linear", "layer_norm"}
READY = "_mend_cond_ready"
# helper-88 F1: torch.cond traces both sides whole, and a forward hook with an effect (feature
# capture), pruning (a pre-hook that sets an attribute) or dynamic quantization added to a
# submodule after mend ran made the compiled call raise UncapturedHigherOrderOpError where the
# if ran; so did sides of two dtypes after model.bfloat16() and of two stride orders for a
# transposed input (helper-94 m08, m09). Dynamo decides this at trace time (guards on the hook
# dicts, dtypes and strides), so it adds no break
READY_HELPER = READY_TEXT.replace("def _mend_cond_ready(*roots, dense=()):", "def _mend_cond_ready(*roots, dense=()):  # mend: "
                                  "predicated-control-flow -- torch.cond only for modules it can trace", 1)


def module_roots(values: list[cst.BaseExpression], env: _Env) -> list[str]:
    """What a side may call, as the arguments of :data:`READY_HELPER`: ``self`` for any call
    through it, each attribute chain of ``self`` a call goes through (``self.teacher`` for
    ``self.teacher(h)``, ``self.blocks`` for ``self.blocks[0](h)``: a module kept out of
    ``self``'s registry, in ``__dict__`` or a plain list, is not among ``self.modules()``,
    helper-90), read with ``getattr(..., None)`` so that the guard never raises, and a parameter
    of the enclosing function a call goes through (bound wherever the ``if`` runs)."""
    params = set()
    if env.function is not None:
        p = env.function.params
        params = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    import torch

    roots = set()
    for v in values:
        for call in m.findall(v, m.Call()):
            node = call.func
            while isinstance(node, (cst.Attribute, cst.Subscript)):
                chain = _self_chain(node)
                if chain:
                    if len(chain) > 1 and hasattr(torch.Tensor, chain[-1]):
                        # `self.lin.weight.sum()`: a method of what the chain reads, which the guard
                        # checks (a bound method root it cannot inspect sends every call to the `if`)
                        chain = chain[:-1]
                    roots.add(_safe_read(chain))
                    break
                node = node.value
            while isinstance(node, (cst.Attribute, cst.Subscript)):
                node = node.value
            if isinstance(node, cst.Name) and node.value in params:
                roots.add(node.value)
    return sorted(roots, key=lambda r: (r != "self", r))


def _guard_reads(values: list[cst.BaseExpression], env: _Env, positions, line: int) -> tuple[list[str], list[str]]:
    """What the cond's guard checks beside the modules: ``(dense, others)``. ``dense``: every
    parameter of the enclosing function (the differential test draws them contiguous, so the
    guard requires that: the layouts of what the function computes from them are then those of
    the example run, whatever the sides read). ``others``: each variable the sides read that a
    statement before ``line`` binds (a comprehension's or lambda's own variable is not), and
    each attribute chain of ``self`` they read other than to call it, as ``getattr(..., None)``
    (never raises; a value that is not a tensor, module or container of them is ignored)."""
    fn = env.function
    if fn is None:
        return [], []
    params = [p.name.value for p in _params(fn.params) if p.name.value != "self"]
    bound = set()
    for stmt in _walk(fn.body):
        pos = positions.get(stmt) if isinstance(stmt, cst.SimpleStatementLine) else None
        for node in stmt.body if pos is not None and pos.start.line < line else ():
            if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                for t in (node.targets if isinstance(node, cst.Assign) else [node]):
                    bound |= _bound_names(t.target)
    read = {n for v in values for n in _read_names(v)}
    chains, called = set(), set()
    for v in values:
        for call in m.findall(v, m.Call(func=m.Attribute())):
            called.add(tuple(_self_chain(call.func) or ()))
        for attr in m.findall(v, m.Attribute()):
            chain = _self_chain(attr)
            if chain:
                chains.add(tuple(chain))
    others = sorted(read & bound - set(params)) + sorted(_safe_read(list(c)) for c in chains - called)
    return params, others


def _self_chain(node: cst.BaseExpression) -> list[str] | None:
    """``["a", "b"]`` for ``self.a.b`` (attributes only), else None."""
    names = []
    while isinstance(node, cst.Attribute):
        names.insert(0, node.attr.value)
        node = node.value
    return names if names and isinstance(node, cst.Name) and node.value == "self" else None


def _safe_read(chain: list[str]) -> str:
    """``getattr(getattr(self, "a", None), "b", None)`` for ``self.a.b``."""
    text = "self"
    for name in chain:
        text = f'getattr({text}, "{name}", None)'
    return text


# Modules that may return their input as it is (nn.Identity, Dropout in eval mode, flatten of a flat tensor).
_IDENTITY_MODULES = ("Identity", "Dropout", "Flatten", "Unflatten", "AlphaDropout")
# Reads through which a clone is distinguishable from its source.
_IDENTITY_ATTRS = {"data_ptr", "untyped_storage", "storage", "_base", "_is_view", "is_set_to", "grad_fn", "is_leaf",
                   "grad", "data", "retain_grad", "register_hook", "backward", "_version", "storage_offset",
                   "set_", "share_memory_", "requires_grad_", "_cdata"}
_TRANSPOSES = {"T", "mT", "H", "mH"}   # views with no identity of their own to read
COND_TAKEN_SIDE_ONLY = ("torch.cond evaluates only the branch its predicate selects (eager and compiled; its "
                        "backward differentiates only that branch), so the untaken side's exceptions on values, "
                        "calls and gradients are never produced: {waived} do not apply (under torch.compile both "
                        "sides are traced, so their size, rank and dtype errors are: cond-sides-trace)")


class _CondNotApplicable(_Declined):
    """torch.cond does not fit the site, but torch.where may (the caller falls back to it).
    A plain :class:`_Declined` from :func:`_rewrite_cond` declines the site: neither fits."""


_CASTS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16", "long": "int64",
          "int": "int32", "short": "int16", "bool": "bool"}


def _cast_of(value: cst.BaseExpression) -> str | None:
    """The dtype an explicit outermost cast gives (``x.half()``, ``x.to(torch.float16)``), else None."""
    value = _strip(value)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    attr = value.func.attr.value
    if attr in _CASTS and not value.args:
        return _CASTS[attr]
    if attr in ("to", "type") and value.args and value.args[0].keyword is None:
        arg = value.args[0].value
        if isinstance(arg, cst.Attribute) and arg.attr.value in (*_CASTS.values(), "float32", "float64", "int64"):
            return arg.attr.value
    return None


# Ops through which no gradient flows: a side built with them gives its inputs no gradient
# in eager (None), while torch.cond's backward gives every input of the cond a tensor (zeros).
_NO_GRAD_OPS = {"zeros_like", "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full",
                "new_empty", "new_tensor", "detach", "argmax", "argmin", "argsort", "eq", "ne", "lt", "gt", "le",
                "ge", "isnan", "isinf", "isfinite", "bool", "long", "int", "no_grad", "tensor", "zeros", "ones"}


def _grad_sensitive(values: list[tuple[cst.BaseExpression, cst.BaseExpression]], env: _Env) -> str | None:
    """Why torch.cond could make a gradient a tensor where the if leaves it None, or None:
    the sides read different tensors (parameters of a submodule called on one side only,
    ``self.`` state), or a side holds an op through which no gradient flows. Under
    autograd, cond's backward gives every tensor the branches read a gradient (zeros for the
    untaken side), so optimizers would update parameters the if never touched."""
    modules = set(env.aliases)   # names the module binds by import only: `math` may be a tensor elsewhere
    for t, f in values:
        for v in (t, f):
            if m.findall(v, m.Attribute(value=m.Name("self"))):
                return f"`{_code(v)}` reads module state (parameters)"
            for call in m.findall(v, m.Call()):
                name = call.func.attr.value if isinstance(call.func, cst.Attribute) else (call_name(call) or "")
                if name.rsplit(".", 1)[-1] in _NO_GRAD_OPS:
                    return f"`{_code(call)}` passes no gradient"
        if (_read_names(t) - modules) != (_read_names(f) - modules):
            return f"the sides read different tensors (`{_code(t)}` vs `{_code(f)}`)"
    return None


def _speculation_hazards(obligations: list[dict], preds) -> list[dict]:
    """What makes running the untaken side of a where unacceptable, statically: a submodule
    call (GraphMend: "torch.cond when a branch value contains a call"), or an op whose
    gradient can be non-finite, applied to a value the predicate tests (the branch guards
    the op's domain, shared/cases 012). Other finite-gradient obligations (an op unrelated
    to the test) stay with torch.where and its verification, as before."""
    tested = set().union(*(_read_names(p) for p in preds)) - {"self", "torch", "__mend_force__"}
    out = []
    for ob in obligations:
        if ob["kind"] == "untaken-side-runs":
            out.append(ob)
        elif ob["kind"] == "finite-gradient":
            try:
                names = _read_names(cst.parse_expression(ob["expr"]))
            except cst.ParserSyntaxError:
                continue
            if names & tested:
                out.append(ob)
    return out


def _cond_predicate_ok(pred: cst.BaseExpression) -> bool:
    """Statically a bool tensor expression (the forcing hook's argument for instrumented copies)."""
    if isinstance(pred, cst.Call) and _code(pred).startswith(FORCING_HOOK) and pred.args:
        return _cond_predicate_ok(pred.args[0].value)
    return _is_bool(pred) and not isinstance(pred, cst.BooleanOperation)


def _value_kind(value: cst.BaseExpression, env: _Env) -> str:
    """"alias" when ``value`` may be (a view of) a tensor the branch did not create, else "fresh"."""
    value = _strip(value)
    if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
        return "alias"
    if isinstance(value, cst.Call):
        func = value.func
        name = func.attr.value if isinstance(func, cst.Attribute) else (call_name(value) or "")
        if name.rsplit(".", 1)[-1] in _MAY_ALIAS:
            return "alias"
        dotted = call_name(value) or ""
        if dotted.startswith("self.") and dotted.count(".") == 1:
            ctor = env.submodules.get(dotted.split(".")[1], "")
            if any(k in ctor for k in _IDENTITY_MODULES):
                return "alias"
    return "fresh"


def _alias_observers(scope: cst.CSTNode, after_line: int, names: set[str], positions, env: _Env,
                     returned: frozenset = frozenset()) -> list[str]:
    """How code after the site could tell a clone from the aliased tensor it replaces:
    any in-place write (to anything: other names may alias the same storage), ``out=`` /
    ``inplace=True``, or a use of ``names`` that lets the tensor escape (returned, stored,
    rebound, passed to a call that is not a torch function), reads its identity, or may give
    an alias of it (any method or torch function outside ``_NO_ALIAS``: ``out.ravel()``).
    ``returned``: names whose ``return name`` is no escape (see :func:`_fresh_local`)."""
    found: list[str] = []
    inside = {id(n) for n in _walk(scope)}
    later = [n for n, pos in positions.items() if pos.start.line > after_line and
             isinstance(n, cst.SimpleStatementLine) and id(n) in inside]
    later += [n.test for n, pos in positions.items() if pos.start.line > after_line and
              isinstance(n, (cst.If, cst.While)) and id(n) in inside]
    # a loop's iterable and a with's items too: `for row in out:` binds views of `out`
    later += [n.iter for n, pos in positions.items() if pos.start.line > after_line and
              isinstance(n, cst.For) and id(n) in inside]
    later += [w.item for n, pos in positions.items() if pos.start.line > after_line and
              isinstance(n, cst.With) and id(n) in inside for w in n.items]
    for stmt in later:
        op = inplace_call(stmt)
        if op is not None:
            found.append(f"`.{op}()` writes in place")
        if has_out_kwarg(stmt) or m.findall(stmt, m.Arg(keyword=m.Name("inplace"))):
            found.append("a call writes through `out=`/`inplace=`")
        for small in m.findall(stmt, m.AugAssign()):
            found.append(f"`{_code(small.target)} {_code(small.operator)} ...` may update in place")
        for t in m.findall(stmt, m.AssignTarget(target=m.Subscript() | m.Attribute())):
            found.append(f"`{_code(t.target)} = ...` writes into a tensor or object")
        parents: dict[int, cst.CSTNode] = {}
        for node in _walk(stmt):
            for child in node.children:
                parents[id(child)] = node
        for node in _walk(stmt):
            if not (isinstance(node, cst.Name) and node.value in names):
                continue
            parent = parents.get(id(node))
            ok = False
            if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
                ok = True
            elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
                ok = not any(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in m.findall(parent, m.ComparisonTarget()))
            elif isinstance(parent, cst.AssignTarget):  # rebound: the old value is no longer reachable by name
                ok = True
            elif node.value in returned and _only_returned(node, parents):
                ok = True
            elif isinstance(parent, cst.Attribute) and parent.value is node:  # no views, identity or autograd reads
                attr = parent.attr.value
                ok = attr in _NO_ALIAS
            elif isinstance(parent, cst.Arg):
                call = parents.get(id(parent))
                qual = env.qualified(call_name(call) or "") if isinstance(call, cst.Call) else None
                last = qual.rsplit(".", 1)[1] if qual else ""
                ok = bool(qual and qual.startswith("torch.") and last in _NO_ALIAS)
            if not ok:
                found.append(f"`{node.value}` is used as `{_code(parent)[:50]}`" if parent is not None else
                             f"`{node.value}` is a test, a loop's iterable or a with's item")
    return found


def _only_returned(node: cst.Name, parents: dict[int, cst.CSTNode]) -> bool:
    """Whether ``node`` reaches the caller only as ``return node``, an element of a returned
    tuple or list (``return out, aux``), a value of a returned dict (``return {"out": out}``),
    a transpose (``return out.T``) or a returned method call (``return out.view(b, t, d)``):
    a copy of a local nothing else holds then differs from it only in identity, which the caller
    cannot compare with anything. Identity reads, in-place methods and dict keys (hashed by
    identity) do not count."""
    cur: cst.CSTNode = node
    while True:
        parent = parents.get(id(cur))
        if isinstance(parent, cst.Return):
            return True
        up = parents.get(id(parent))
        if isinstance(parent, cst.Element) and isinstance(up, (cst.Tuple, cst.List)) or \
                isinstance(parent, cst.DictElement) and parent.value is cur and isinstance(up, cst.Dict):
            cur = up
        elif isinstance(parent, cst.Attribute) and parent.value is cur and parent.attr.value in _TRANSPOSES:
            cur = parent
        elif isinstance(parent, cst.Attribute) and parent.value is cur and isinstance(up, cst.Call) and \
                up.func is parent and parent.attr.value not in _IDENTITY_ATTRS and not parent.attr.value.endswith("_"):
            cur = up
        else:
            return False


# what always returns a new tensor: `+x`, F.dropout in eval, torch.ravel, conj, einsum("ij->ij") can
# return their input or a view of it (helper-96 F2), so only these count as allocating
_ALLOCATING = {f"torch.{f}" for f in ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like",
                                     "full_like", "rand", "randn", "rand_like", "randn_like", "arange",
                                     "linspace", "cat", "stack", "tensor")}
_NEW_METHODS = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}


def _fresh_local(name: str, scope: cst.CSTNode, positions, env: _Env) -> bool:
    """Whether the caller cannot tell ``return name`` of a copy from the original: ``name`` is
    a local (no parameter, ``global`` or ``nonlocal``), every binding of it allocates a new
    tensor (binary arithmetic, ``-``/``~``, a factory, ``cat``/``stack``, ``.new_zeros``...), and no
    use anywhere in the function stores it, passes it on or reads its identity (shared case
    006's ``out = torch.zeros_like(x)`` accumulated over the experts and returned)."""
    values = env.bindings(name)   # None: a parameter, or a binding other than `name = value`
    if values is None:
        return False
    for v in map(_strip, values):
        qual = env.qualified(call_name(v) or "") if isinstance(v, cst.Call) else None
        method = v.func.attr.value if isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) else None
        if not (isinstance(v, cst.BinaryOperation) or isinstance(v, cst.UnaryOperation) and isinstance(
                v.operator, (cst.Minus, cst.BitInvert)) or qual in _ALLOCATING or method in _NEW_METHODS):
            return False
    return not _alias_observers(scope, 0, {name}, positions, env, returned=frozenset({name}))


def _bound_inside(value: cst.BaseExpression, binds: list[tuple[str, cst.BaseExpression]]) -> cst.BaseExpression:
    """``value`` with ``binds`` bound around it in order: ``(lambda h: value)(v)`` for ``[(h, v)]``,
    so each bound value is computed first, as its statement ran, and only inside the branch."""
    for name, bound in reversed(binds):
        fn = cst.Lambda(params=cst.Parameters(params=[cst.Param(cst.Name(name))]), body=_strip(value),
                        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        value = cst.Call(func=fn, args=[cst.Arg(_strip(bound))])
    return value


def _inlined(value: cst.BaseExpression, binds: list[tuple[str, cst.BaseExpression]]) -> cst.BaseExpression:
    """``value`` with the temporaries of ``binds`` written out, each read in parentheses (the last
    bound first, as it may read the others)."""
    for name, bound in reversed(binds):
        written = _strip(bound).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        value = value.visit(ReplaceAll({id(n): written for n in _name_reads(value) if n.value == name}))
    return value


def _with_binds(value: cst.BaseExpression, binds: list[tuple[str, cst.BaseExpression]]) -> cst.BaseExpression:
    """What a side computes, for the screens of what it reads and calls: its value and each value
    bound inside it, written out -- one whose result is never read runs too (helper-94's m13: a
    dead `feats = self.probe(x)` dropped out of the analysis, and with it the hook guard)."""
    if not binds:
        return value
    return cst.Tuple([cst.Element(_inlined(value, binds))] + [
        cst.Element(_inlined(bound, binds[:k])) for k, (_, bound) in enumerate(binds)])


def _lambda(body: cst.BaseExpression) -> cst.Lambda:
    return cst.Lambda(params=cst.Parameters(), body=_strip(body), colon=cst.Colon(whitespace_after=cst.SimpleWhitespace(" ")))


def _rewrite_cond(node: cst.If, arms: list[_Arm], selected: list[str], order_seen: list[str], returns: bool,
                  preds, pred_codes: list[str], hazards: list[dict], env: _Env, positions, span_end: int,
                  temps: tuple[list[tuple[str, cst.BaseExpression]], list[dict], dict] = ([], [], {}),
                  tail: bool = False):
    """``if p: y = a else: y = b`` -> under torch.compile ``y = torch.cond(p, lambda: a,
    lambda: b)``; in eager the original if/else runs unchanged (see the comment emitted).
    ``temps``: setup temporaries bound before the cond, which the branch lambdas read through
    their closures, with the obligations of running them on every path, and those bound inside
    a side's lambda (``where._cond_temps``). ``tail``: the false side is the code after an
    ``if p: return a``; the cond then goes in an ``if`` of its own before the original, which
    with the code after it runs unchanged otherwise.

    Declines (the caller then keeps torch.where) what torch.cond cannot take: a predicate
    that is not statically a bool tensor expression, a side value that aliases an input
    when the lost aliasing could be observed, a Python constant on a side."""
    pred = preds[0]
    if not _cond_predicate_ok(arms[0].pred):
        raise _CondNotApplicable("torch.cond needs a bool tensor predicate and this test is not statically one")
    scope = env.function or env.module
    obligations = [o for o in env.obligations if o["kind"] in ("single-element-predicate", "bool-operand")]
    obligations.append({"kind": "cond-predicate", "pred": pred_codes[0]})
    obligations += temps[1]   # the setup temporaries run on every path: their screens' obligations stay
    names = ["return"] if returns else [n for n in _order(arms, order_seen) if n in selected]
    inner = temps[2]
    if inner and len(names) > 1:
        raise _CondNotApplicable("a setup temporary must run inside its branch, and the site selects several names "
                                 "(one cond each)")
    emitted: list[tuple[str, list[cst.BaseExpression]]] = []
    read: list[cst.BaseExpression] = [v for _, v in temps[0]]   # what the sides read, temporaries written out
    analysed: list[tuple[str, list[cst.BaseExpression]]] = []
    clones: set[str] = set()
    for n in names:
        values = [a.ret for a in arms] if returns else [dict(a.assigns).get(n, cst.Name(n)) for a in arms]
        out, plain = [], []
        for side, v in zip(("true", "false"), values):
            if _is_literal(v) or isinstance(v, (cst.SimpleString, cst.ConcatenatedString)):
                raise _CondNotApplicable(f"a side gives `{n}` a Python constant; torch.cond returns tensors")
            kind = _value_kind(v, env)
            if kind == "alias":
                if returns:
                    raise _CondNotApplicable(f"the {side} side returns `{_code(v)}`, which may alias an input, and the "
                                    "caller could observe a copy")
                clones |= {x for x in _read_names(v) if x != "self"} | {n}
                v = cst.Call(func=cst.Attribute(value=v if isinstance(v, (cst.Name, cst.Attribute, cst.Subscript,
                                                                          cst.Call)) else v.with_changes(
                    lpar=[cst.LeftParen()], rpar=[cst.RightParen()]), attr=cst.Name("clone")))
            plain.append(v)
            out.append(_bound_inside(v, inner.get(len(out), [])))
        casts = [_cast_of(v) for v in values]
        if casts[0] != casts[1]:
            what = "; ".join(f"`{_code(v)}` is {c}" for v, c in zip(values, casts) if c)
            raise _Declined(f"the sides give `{n}` different dtypes ({what}, the other side is not cast); "
                            "torch.cond needs branch outputs of one dtype and torch.where would promote them")
        # what each side reads and calls (as emitted: a clone included), its own temporaries written out
        analysed.append((n, [_with_binds(v, inner.get(i, [])) for i, v in enumerate(plain)]))
        # a temporary bound inside a side is written out in its value: the facts know the names it reads
        written = [_inlined(v, inner.get(i, [])) for i, v in enumerate(values)]
        read += written
        lhs, rhs = map(_code, written)
        obligations.append({"kind": "cond-branch-types", "target": n, "lhs": lhs, "rhs": rhs})
        obligations.append({"kind": "same-shape", "target": n, "lhs": lhs, "rhs": rhs})
        obligations.append({"kind": "cond-output-not-aliased", "target": n,
                            "values": [_code(v) for v in out],
                            "treatment": ["clone" if _code(o) != _code(v) else _value_kind(v, env)
                                          for v, o in zip(values, plain)]})
        emitted.append((n, out))
    if clones:
        observers = _alias_observers(scope, span_end, clones, positions, env)
        fresh = frozenset(n for n in clones if _fresh_local(n, scope, positions, env)) if observers else frozenset()
        if fresh:
            observers = _alias_observers(scope, span_end, clones, positions, env, returned=fresh)
        writes = [o for o in observers if "in place" in o or "writes" in o]
        if writes:  # neither a copy (cond) nor a new tensor (where) sees a later in-place update of the alias
            raise _Declined("a side's value aliases an existing tensor that is mutated in place later ("
                            + "; ".join(writes[:3]) + "); neither torch.cond (a copy) nor torch.where (a new "
                            "tensor) would see that update")
        if observers:
            raise _CondNotApplicable("a side's value aliases an existing tensor and a copy would be observable: "
                                     + "; ".join(observers[:3]))
        for ob in obligations:
            if ob["kind"] == "cond-output-not-aliased":
                ob["observers"] = []
                ob["watched"] = sorted(clones)
                ob["returned"] = sorted(fresh)
    for h in hazards:  # the side still runs when taken, and Dynamo traces both: it must write no state
        if h["kind"] == "untaken-side-runs":
            obligations.append({"kind": "cond-side-pure", "call": h["call"]})
    # torch.cond traces both sides on fake tensors: what would make a side raise for its sizes,
    # ranks or dtypes raises under torch.compile whichever is taken (helper-97 f1); only errors on
    # values (a zero divisor) are the untaken side's alone
    obligations += [{"kind": "cond-sides-trace", "expr": o["expr"], "guard": []} for o in env.obligations
                    if o["kind"] == "untaken-side-cannot-raise"]
    waived = sorted({h["kind"] for h in hazards} | {"untaken-side-cannot-raise"})
    obligations.append({"kind": "cond-taken-side-only", "pred": pred_codes[0], "waives": waived,
                        "exprs": [h.get("expr") or h.get("call") for h in hazards],
                        "why": COND_TAKEN_SIDE_ONLY.format(waived=", ".join(waived))})

    stmts: list[cst.SimpleStatementLine] = [_line(cst.Assign([cst.AssignTarget(cst.Name(n))], v))
                                            for n, v in temps[0]]
    pred_expr = pred
    if len(emitted) > 1:  # one cond per name (a tuple-valued cond's backward fails on torch 2.13)
        pname = env.fresh()
        stmts.append(_line(cst.Assign([cst.AssignTarget(cst.Name(pname))], pred)))
        pred_expr = cst.Name(pname)
    for n, (t, f) in emitted:
        call = cst.Call(func=cst.Attribute(cst.Name(env.torch), cst.Name("cond")),
                        args=[cst.Arg(_strip(pred_expr)), cst.Arg(_lambda(t)), cst.Arg(_lambda(f))])
        stmts.append(_line(cst.Return(call)) if n == "return" else
                     _line(cst.Assign([cst.AssignTarget(cst.Name(n))], call)))
    was = "if " + pred_codes[0]
    if len(was) > 60:
        was = was[:57] + "..."
    compiling = cst.Call(func=cst.Attribute(cst.Attribute(cst.Name(env.torch), cst.Name("compiler")),
                                            cst.Name("is_compiling")))
    # a single-element predicate was seen on the example only: with another input shape the
    # `if` raises (no values / ambiguous), so the cond runs only when numel() == 1 (a shape
    # guard under Dynamo) and the original `if` keeps its error otherwise
    boxed = _strip(pred).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    one = cst.Comparison(left=cst.Call(func=cst.Attribute(boxed, cst.Name("numel"))),
                         comparisons=[cst.ComparisonTarget(cst.Equal(), cst.Integer("1"))])
    compiling = cst.BooleanOperation(left=compiling, operator=cst.And(), right=one)
    grad_why = _grad_sensitive([(t, f) for _, (t, f) in analysed] + [(v, v) for _, v in temps[0]], env)
    if grad_why is not None:  # cond only where no gradient exists (inference); with autograd the if runs
        # the grad mode is tested first: with autograd on, Dynamo then traces nothing of the guard
        # (the predicate's numel() compiled a graph before the kept `if` where the original had none,
        # helper-85 F8: 0 graphs (+1 eager frame) -> 1 (+1))
        compiling = cst.BooleanOperation(left=cst.UnaryOperation(operator=cst.Not(), expression=cst.Call(
            func=cst.Attribute(cst.Name(env.torch), cst.Name("is_grad_enabled")))), operator=cst.And(), right=compiling)
        obligations.append({"kind": "cond-no-autograd", "why": f"{grad_why}: with autograd on, torch.cond's "
                            "backward would give tensors the if leaves without gradient a zero gradient, so the "
                            "cond runs only when torch.is_grad_enabled() is False"})
    # the modules the sides call, those a loop's item may be, and what the sides read: a tensor of
    # another dtype or layout than the example's can make the two outputs differ in dtype or stride
    # order, where torch.cond raises (helper-94 m08, m09); a parameter is checked once, as dense
    dense, others = _guard_reads(read, env, positions, positions[node].start.line)
    called = module_roots([v for _, (t, f) in analysed for v in (t, f)] + [v for _, v in temps[0]], env)
    roots = [r for r in dict.fromkeys(called + env.loop_roots + others) if r not in dense] + (
        [f"dense=({', '.join(dense)}{',' * (len(dense) == 1)})"] if dense else [])
    for ob in obligations:
        if ob["kind"] in ("cond-branch-types", "cond-sides-trace"):
            ob.update(guard=roots, torch=env.torch)
    if roots:   # a hook, pruning or quantization added after mend ran makes torch.cond raise: the if runs then
        compiling = cst.BooleanOperation(left=compiling, operator=cst.And(), right=cst.Call(
            func=cst.Name(READY), args=cst.parse_expression(f"f({', '.join(roots)})").args))
        obligations.append({"kind": "cond-modules-unhooked", "roots": roots, "torch": env.torch})
        env.cond_ready = True
    header = cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "),
                                    comment=cst.Comment(f"# mend: {NAME} (was: {was})"))
    note = [cst.EmptyLine(comment=cst.Comment(
        "# torch.cond under torch.compile only: in eager it costs ~1.5 s on the first call and ~16 ms")),
            cst.EmptyLine(comment=cst.Comment(
        "# per call (torch 2.13); both paths compute the same value (the sides are pure, only the taken one runs)"))]
    original = node.with_changes(leading_lines=[])
    new_if = cst.If(test=compiling, body=cst.IndentedBlock(body=stmts, header=header),
                    leading_lines=[*node.leading_lines, *note])
    # `if p: return a` and the code after it stay as they were, after the cond's own if
    new = [new_if, original] if tail else [new_if.with_changes(orelse=cst.Else(body=cst.IndentedBlock(body=[original])))]
    kind_txt = ", ".join(names)
    why = "; ".join(sorted({("submodule call " + h["call"]) if h["kind"] == "untaken-side-runs" else
                            f"non-finite gradient of {h['expr']} off its guarded domain" for h in hazards}))
    detail = (f"if -> torch.cond ({kind_txt}) under torch.compile" + (" without autograd" if grad_why else "")
              + ", the if kept otherwise" + (f"; not torch.where: {why}" if why else ""))
    env.obligations[:] = obligations
    env.form = "cond"
    span = (positions[node].start.line, span_end)
    return [(node, new)], span, detail, pred_codes
