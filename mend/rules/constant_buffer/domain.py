"""constant-buffer: the typing of the methods reached from ``forward`` (:class:`Typer`), an
abstract interpretation over a small domain:

* :class:`I` -- a 0-d int64 tensor in the original, a Python int in the mirror (a buffer's
  value, and what ``+ - *``, ``// k``, unary ``-``, ``max``/``min`` make of it), with its term
  over the twins, the sizes and the ratio sites for the verifier;
* :class:`N` -- a Python int in both (an int literal, a ``.shape[k]``/``.size(k)``);
* :class:`Q` -- ``A / S + c``, a float tensor in the original, waiting for
  ``torch.ceil(Q).to(torch.int64)``;
* :class:`Tup` -- a tuple holding some of those; ``OTHER`` (None) -- anything else.

An ``I`` meeting anything outside the rule's forms raises :class:`Why`, naming the
expression; :func:`check_ratio_locals` then checks each ratio's statement order."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from mend.rules._common import code_of, dotted

if TYPE_CHECKING:
    from mend.rules.constant_buffer.screen import Plan

RATIO_C = 8                    # the ceil-ratio lemma's offsets: [-RATIO_C, RATIO_C]
_INT64 = ("torch.int64", "torch.long")


def self_attr(node) -> str | None:
    """``X`` for ``self.X``, else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


class Why(Exception):
    """The class is declined: the message says why, naming the expression."""


@dataclass(frozen=True)
class I:          # noqa: E742 - the domain's name
    term: str
    tensor: bool = True      # a tensor in the original for sure (``max(t, 0)`` may return the int 0)


@dataclass(frozen=True)
class N:
    term: str


@dataclass(frozen=True)
class Q:
    a: str
    s: str
    c: int
    expr: cst.BaseExpression      # the original ``A / S + c``
    a_node: cst.BaseExpression


@dataclass(frozen=True)
class Tup:
    items: tuple


OTHER = None


@dataclass
class Ratio:
    method: str
    line_node: cst.CSTNode        # the ceil call, replaced in the mirror
    q_stmt: cst.CSTNode | None    # the statement binding Q, dropped in the mirror (None: the ceil's own argument)
    q: Q


class Typer:
    """The abstract interpretation of the methods reached from ``forward``."""

    def __init__(self, plan: Plan, methods: dict[str, cst.FunctionDef], aliases: set[str]):
        self.plan, self.methods, self.aliases = plan, methods, aliases
        self._pending: dict[str, tuple] = {}          # local -> (its statement, the ratio it holds)
        self._ratio_locals: list[tuple] = []
        self._ratio_site = None
        self.reads: dict[str, bool] = {}        # method -> reads a twin (needs a mirror)
        self.done: dict[tuple, object] = {}     # (method, arg types) -> return type
        self.sizes = 0
        self.stack: list[str] = []

    # -- helpers
    def _fresh_size(self) -> N:
        self.sizes += 1
        return N(f"size_{self.sizes}")

    def _record(self, t):
        """``t`` (an ``I``, or an ``N`` that may meet a tensor), its term kept for the range proof."""
        if t.term not in self.plan.terms:
            self.plan.terms.append(t.term)
        return t

    def reads_twin(self, name: str) -> bool:
        """The method (or one it calls through ``self``) reads a twinned attribute."""
        if name in self.reads:
            return self.reads[name]
        self.reads[name] = False
        fn = self.methods[name]
        found = any(self_attr(a) in self.plan.twins for a in m.findall(fn.body, m.Attribute()))
        for call in m.findall(fn.body, m.Call(func=m.Attribute(value=m.Name("self")))):
            callee = call.func.attr.value
            if callee in self.methods and callee != name and self.reads_twin(callee):
                found = True
        self.reads[name] = found
        return found

    # -- expressions
    def expr(self, node: cst.BaseExpression, env: dict, fn: str):
        if isinstance(node, cst.Integer):
            # beyond int64 a literal meets a tensor differently (it raises or wraps): not an int here
            return N(node.value) if abs(int(node.value, 0)) < 2 ** 62 else OTHER
        if isinstance(node, cst.Name):
            return env.get(node.value, OTHER)
        attr = self_attr(node)
        if attr is not None and attr in self.plan.twins:
            return I(self.plan.twin_terms[attr])
        if isinstance(node, cst.Subscript):
            return self._subscript(node, env, fn)
        if isinstance(node, cst.Attribute):
            base = self.expr(node.value, env, fn)
            self._no_int(base, node, "an attribute is read from it")
            return OTHER
        if isinstance(node, cst.UnaryOperation):
            inner = self.expr(node.expression, env, fn)
            if isinstance(inner, (I, N)) and isinstance(node.operator, cst.Minus):
                return self._record(I(f"(-{inner.term})", inner.tensor)) if isinstance(inner, I) \
                    else N(f"(-{inner.term})")
            self._no_int(inner, node, "a unary operator other than `-` meets it")
            return OTHER
        if isinstance(node, cst.BinaryOperation):
            return self._binop(node, env, fn)
        if isinstance(node, cst.Comparison):
            raise_if = [self.expr(node.left, env, fn)] + [self.expr(c.comparator, env, fn) for c in node.comparisons]
            for t in raise_if:
                self._no_int(t, node, "a comparison outside an `if` test gives a tensor in the original")
            return OTHER
        if isinstance(node, cst.Tuple):
            items = tuple(self.expr(e.value, env, fn) for e in node.elements)
            if any(isinstance(t, Q) for t in items):
                raise Why(f"`{code_of(node).strip()}`: a ratio is put in a tuple (only its ceil is taken)")
            if any(isinstance(e, cst.StarredElement) for e in node.elements) and any(
                    isinstance(t, (I, Q, Tup)) for t in items):
                raise Why(f"`{code_of(node).strip()}`: a starred element next to an int buffer")
            return Tup(items) if any(isinstance(t, (I, Tup)) for t in items) else OTHER
        if isinstance(node, cst.Call):
            return self._call(node, env, fn)
        # anything else (an f-string, a set, list or dict display, a comprehension, a lambda...):
        # no buffer value may appear anywhere inside it (second review: `{self.max_len!r}` is
        # `tensor(16)` in the original, `16` in the mirror)
        self._no_int_inside(node, env)
        return OTHER

    def _no_int_inside(self, node, env: dict) -> None:
        for a in m.findall(node, m.Attribute()):
            if self_attr(a) in self.plan.twins:
                raise Why(f"`{code_of(node).strip()}`: an int buffer is read inside an expression outside the rule's "
                          "forms")
        for n in m.findall(node, m.Name()):
            if isinstance(env.get(n.value), (I, Q, Tup)):
                raise Why(f"`{code_of(node).strip()}`: `{n.value}`, an int buffer value, is used inside an expression "
                          "outside the rule's forms")
        for c in m.findall(node, m.Call(func=m.Attribute(value=m.Name("self")))):
            if c.func.attr.value in self.methods and self.reads_twin(c.func.attr.value):
                raise Why(f"`{code_of(node).strip()}`: a method that reads an int buffer is called inside an "
                          "expression outside the rule's forms")

    def _no_int(self, t, node, why: str) -> None:
        if isinstance(t, (I, Q)) or (isinstance(t, Tup) and any(isinstance(x, (I, Q, Tup)) for x in t.items)):
            raise Why(f"`{code_of(node).strip()}`: {why} (an int buffer is a 0-d tensor there, a Python int in the "
                      "mirror)")

    def _subscript(self, node: cst.Subscript, env, fn):
        if isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape" and len(node.slice) == 1 \
                and isinstance(node.slice[0].slice, cst.Index) and self.expr(node.value.value, env, fn) is OTHER:
            idx = self.expr(node.slice[0].slice.value, env, fn)
            self._no_int(idx, node, "it indexes a shape")
            return self._fresh_size()
        base = self.expr(node.value, env, fn)
        self._no_int(base, node, "it is subscripted")
        for el in node.slice:
            s = el.slice
            if isinstance(s, cst.Index):
                self._no_int(self.expr(s.value, env, fn), node, "it is an index (a 0-d tensor index is advanced "
                             "indexing: a copy, not a view)")
            else:
                for part in (s.lower, s.upper, s.step):
                    if part is not None:
                        t = self.expr(part, env, fn)
                        if isinstance(t, I):
                            self.plan.sinks.append(f"slice bound `{code_of(part).strip()}` in {fn}")
                            self.plan.sink_nodes.add(id(node))
                        elif isinstance(t, (Q, Tup)):
                            self._no_int(t, node, "it is a slice bound")
        return OTHER

    def _binop(self, node: cst.BinaryOperation, env, fn):
        left, right = self.expr(node.left, env, fn), self.expr(node.right, env, fn)
        op = node.operator
        ints = (I, N)
        if isinstance(op, (cst.Add, cst.Subtract, cst.Multiply)) and isinstance(left, ints) and isinstance(right, ints):
            sym = {cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*"}[type(op)]
            term = f"({left.term} {sym} {right.term})"
            if I not in (type(left), type(right)):
                # a Python int that may meet a tensor: also proved within int64 (`L * 4e18` would
                # overflow when compared with a buffer: third review)
                return self._record(N(term))
            # a tensor operand makes a tensor; two maybe-ints may stay an int
            return self._record(I(term, any(isinstance(t, I) and t.tensor for t in (left, right))))
        if isinstance(op, (cst.Add, cst.Subtract)) and isinstance(left, Q) and isinstance(node.right, cst.Integer):
            if left.c != 0 or node.right.evaluated_value > RATIO_C:
                # each addition rounds in float32: `q + 8388608 - 8388607` is not `q + 1` (second review)
                raise Why(f"`{code_of(node).strip()}`: the ratio gets more than one offset, or one outside the lemma's "
                          f"[-{RATIO_C}, {RATIO_C}]")
            c = node.right.evaluated_value if isinstance(op, cst.Add) else -node.right.evaluated_value
            return Q(left.a, left.s, c, node, left.a_node)
        if isinstance(op, cst.FloorDivide) and isinstance(left, I) and isinstance(node.right, cst.Integer) \
                and node.right.evaluated_value > 0:
            return self._record(I(f"({left.term} // {node.right.value})", left.tensor))
        if isinstance(op, cst.Divide) and isinstance(left, I) and left.tensor and \
                self_attr(node.right) in self.plan.twins:
            if any(isinstance(env.get(n.value), (I, Q, Tup)) for n in m.findall(node.left, m.Name())):
                # the fallback evaluates the numerator again in the mirror, where such a local is a
                # Python int: `int / tensor` rounds twice (third review); only `self.B` reads may
                # make it a tensor there
                raise Why(f"`{code_of(node).strip()}`: the ratio's numerator reads a local holding a buffer value")
            if m.findall(node.left, m.Call()):
                # the fallback evaluates the ratio again: its operands must be free of calls (a call's
                # side effect or random draw would happen twice: second review)
                raise Why(f"`{code_of(node).strip()}`: the ratio's numerator calls a function")
            # tensor / tensor, the division the lemma models (`int / tensor` is `reciprocal(s) * a`:
            # two roundings; adversarial review)
            # the divisor is a twin itself, checked >= 1 when the module is built
            return Q(left.term, self_attr(node.right), 0, node, node.left)
        for t in (left, right):
            self._no_int(t, node, "an operator outside `+ - *`, `// k` and the ceil of a ratio meets it")
        return OTHER

    def _call(self, node: cst.Call, env, fn):
        name = dotted(node.func) or ""
        if isinstance(node.func, cst.Attribute) and not m.matches(node.func.value, m.Name("self")) and \
                not self._ceil_form(node):
            # the receiver of a method call: a buffer value may not be one (`self.k.item()`, `(x * self.k).foo()`)
            self._no_int(self.expr(node.func.value, env, fn), node, f"`.{node.func.attr.value}()` is called on it")
        args = [self.expr(a.value, env, fn) for a in node.args]
        # torch.ceil(Q).to(torch.int64) / .long(): a ratio site
        if self._ceil_form(node):
            inner = node.func.value
            q = self.expr(inner.args[0].value, env, fn) if len(inner.args) == 1 and not inner.args[0].keyword \
                else OTHER
            if not isinstance(q, Q):
                # not the ratio form (`torch.ceil(self.k * 0.5, out=None)`): its parts are typed as usual
                self._no_int(self.expr(inner, env, fn), node, "it is rounded outside the ratio form")
            else:
                to_int = node.func.attr.value == "long" and not node.args or (
                    len(node.args) == 1 and node.args[0].keyword is None and
                    any(dotted(node.args[0].value) == t.replace("torch", a, 1) for t in _INT64 for a in self.aliases))
                if not to_int:
                    raise Why(f"`{code_of(node).strip()}`: the ceil of a ratio is not converted to int64")
                if isinstance(inner.args[0].value, cst.Name):
                    if self._ratio_site is not None:
                        raise Why(f"`{code_of(node).strip()}`: two ceils of ratios in one statement")
                    self._ratio_site = (node, q)      # bound to a local first: matched in small()
                else:
                    self.plan.ratios.append(Ratio(fn, node, None, q))
                return self._record(I(f"ceilratio({q.a}, {self.plan.twin_terms[q.s]}, {q.c})"))
        if name in ("max", "min") and len(args) == 2 and all(isinstance(a, (I, N)) for a in args) and \
                not any(a.keyword or a.star for a in node.args):
            term = f"{name}({args[0].term}, {args[1].term})"
            if not any(isinstance(a, I) for a in args):
                return N(term)
            return self._record(I(term, all(isinstance(a, I) and a.tensor for a in args)))
        if name.endswith("functional.pad") or name in ("F.pad",):
            for i, (a, t) in enumerate(zip(node.args, args)):
                is_pad = (i == 1 and a.keyword is None) or (a.keyword is not None and a.keyword.value == "pad")
                if is_pad and isinstance(t, (Tup, I)):
                    items = t.items if isinstance(t, Tup) else (t,)
                    if any(not isinstance(x, (I, N, type(None))) for x in items):
                        raise Why(f"`{code_of(node).strip()}`: the pad tuple holds something other than ints")
                    self.plan.sinks.append(f"pad `{code_of(a.value).strip()}` in {fn}")
                    self.plan.sink_nodes.add(id(node))
                else:
                    self._no_int(t, node, "it is an argument of `F.pad` other than the pad")
            return OTHER
        if isinstance(node.func, cst.Attribute) and m.matches(node.func.value, m.Name("self")) and \
                node.func.attr.value in self.methods:
            if any(isinstance(t, Q) for t in args):
                raise Why(f"`{code_of(node).strip()}`: a ratio is passed on (only its ceil is taken)")
            return self._method_call(node, node.func.attr.value, args, env, fn)
        if name.endswith(".size") and len(args) == 1 and isinstance(args[0], N):
            base = self.expr(node.func.value, env, fn)
            if base is OTHER:
                return self._fresh_size()
        for t in args:
            self._no_int(t, node, f"it is passed to `{name or code_of(node.func).strip()}`, outside the class")
        return OTHER

    def _ceil_form(self, node: cst.Call) -> bool:
        """``torch.ceil(X).to(...)`` / ``.long()``: the ratio form, typed as a whole."""
        return isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "long") and \
            isinstance(node.func.value, cst.Call) and dotted(node.func.value.func) in {f"{a}.ceil" for a in self.aliases}

    def _method_call(self, node, callee: str, args, env, fn):
        fdef = self.methods[callee]
        params = list(fdef.params.params)
        static = any(m.matches(d.decorator, m.Name("staticmethod")) for d in fdef.decorators)
        if fdef.decorators and not static:
            raise Why(f"`{callee}` is decorated: what it calls is not seen")
        if not static:
            params = params[1:]
        if fdef.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or fdef.params.star_kwarg is not None \
                or fdef.params.kwonly_params or fdef.params.posonly_params:
            if any(isinstance(t, (I, Q, Tup)) for t in args):
                raise Why(f"`{callee}` takes *args, **kwargs or keyword-only parameters")
        bound: dict[str, object] = {}
        for i, (a, t) in enumerate(zip(node.args, args)):
            if a.star:
                self._no_int(t, node, "it is unpacked into a call")
                continue
            if a.keyword is None:
                if i >= len(params):
                    raise Why(f"`{code_of(node).strip()}`: more arguments than `{callee}` takes")
                bound[params[i].name.value] = t
            else:
                bound[a.keyword.value] = t
        for p in params:
            if p.name.value not in bound and p.default is not None:
                bound[p.name.value] = self.expr(p.default, {}, callee)
        mirror = self.reads_twin(callee)
        takes_int = any(isinstance(t, (I, Tup)) for t in bound.values())
        if not mirror and not takes_int:
            return OTHER
        if callee in self.stack:
            raise Why(f"`{callee}` is recursive")
        key = (callee, tuple(sorted((k, repr(v)) for k, v in bound.items() if isinstance(v, (I, N, Tup)))))
        if key in self.done:
            return self.done[key]
        self.stack.append(callee)
        try:
            result = self.method(callee, dict(bound))
        finally:
            self.stack.pop()
        if mirror:
            if callee not in self.plan.mirrors:
                self.plan.mirrors.append(callee)
        elif callee not in self.plan.generic:
            self.plan.generic.append(callee)
        self.done[key] = result
        return result

    # -- statements
    def method(self, name: str, env: dict):
        fdef = self.methods[name]
        for p in fdef.params.params:
            env.setdefault(p.name.value, OTHER)
        returns: list = []
        self.block(fdef.body.body, env, name, returns)
        left = [k for k, (stmt, _) in self._pending.items() if any(stmt is s for s in m.findall(fdef, m.SimpleStatementLine()))]
        if left:
            raise Why(f"the ratio bound to `{left[0]}` in `{name}` is not taken by a ceil (a Python float in the "
                      "mirror, a float tensor in the original)")
        return _join_all(returns, name)

    def block(self, stmts, env: dict, fn: str, returns: list) -> None:
        for stmt in stmts:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self.small(small, stmt, env, fn, returns)
            elif isinstance(stmt, cst.If):
                self._if(stmt, env, fn, returns)
            else:
                if m.findall(stmt, m.Return() | m.Yield() | m.FunctionDef() | m.ClassDef() | m.Lambda()):
                    # a `return` in a `with`, a generator, a closure over a dropped ratio (second review)
                    raise Why(f"a `{type(stmt).__name__.lower()}` statement in `{fn}` holds a return, a yield or a "
                              "nested function")
                names = {n.value for n in m.findall(stmt, m.Name())}
                if any(isinstance(env.get(n), (I, Q, Tup)) for n in names) or \
                        any(self_attr(a) in self.plan.twins for a in m.findall(stmt, m.Attribute())) or \
                        self._calls_int_method(stmt):
                    raise Why(f"a `{type(stmt).__name__.lower()}` statement in `{fn}` involves an int buffer value")
                for n in bound_names(stmt):
                    env[n] = OTHER

    def _calls_int_method(self, stmt) -> bool:
        return any(c.func.attr.value in self.methods and self.reads_twin(c.func.attr.value)
                   for c in m.findall(stmt, m.Call(func=m.Attribute(value=m.Name("self")))))

    def _if(self, stmt: cst.If, env, fn, returns) -> None:
        self._test(stmt.test, env, fn)
        body_env = dict(env)
        self.block(stmt.body.body, body_env, fn, returns)
        else_env = dict(env)
        if stmt.orelse is not None:
            if isinstance(stmt.orelse, cst.If):
                self._if(stmt.orelse, else_env, fn, returns)
            else:
                self.block(stmt.orelse.body.body, else_env, fn, returns)
        for name in set(body_env) | set(else_env):
            if name not in body_env or name not in else_env:
                # bound on one branch only: unbound on the other (a NameError there, in the original
                # and the mirror alike), so the bound side's type is the name's type
                env[name] = body_env.get(name, else_env.get(name))
                continue
            env[name] = _join(body_env[name], else_env[name], name, fn)

    def _test(self, test, env, fn) -> None:
        parts = [test]
        while parts:
            t = parts.pop()
            if isinstance(t, cst.BooleanOperation):
                parts += [t.left, t.right]
            elif isinstance(t, cst.UnaryOperation) and isinstance(t.operator, cst.Not):
                parts.append(t.expression)
            elif isinstance(t, cst.Call) and m.matches(t.func, m.Name("__mend_force__")) and t.args:
                parts.append(t.args[0].value)   # the verifier's forcing wrapper (verifier/forcing.py)
            elif isinstance(t, cst.Comparison):
                sides = [self.expr(side, env, fn) for side in [t.left] + [c.comparator for c in t.comparisons]]
                for v in sides:
                    if isinstance(v, (Q, Tup)):
                        self._no_int(v, t, "it is compared")
                if any(isinstance(v, I) for v in sides):
                    if not all(isinstance(v, (I, N)) for v in sides):
                        # a float compares in float32 with the 0-d tensor, exactly with the int; a 0-d
                        # uint8 tensor wraps an int but not the int64 tensor (adversarial review)
                        raise Why(f"`{code_of(t).strip()}`: a buffer value is compared with something other than "
                                  "an int or another buffer value")
                    self.plan.sinks.append(f"`if` comparison `{code_of(t).strip()}` in {fn}")
                    self.plan.sink_nodes.add(id(t))
                if any(not isinstance(c.operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                                                    cst.GreaterThanEqual, cst.Equal, cst.NotEqual))
                       for c in t.comparisons):
                    for side in [t.left] + [c.comparator for c in t.comparisons]:
                        self._no_int(self.expr(side, env, fn), t, "it meets `is`/`in`")
            else:
                self._no_int(self.expr(t, env, fn), t, "its truth value is taken")

    def small(self, small, line, env, fn, returns) -> None:
        self._ratio_site = None
        try:
            self._small(small, line, env, fn, returns)
        finally:
            site, self._ratio_site = self._ratio_site, None
        if site is not None:
            raise Why(f"`{code_of(site[0]).strip()}`: the ceil of a ratio is used outside `name = torch.ceil(...)"
                      ".to(torch.int64) [+- k]`")

    def _small(self, small, line, env, fn, returns) -> None:
        if m.findall(small, m.Yield() | m.Lambda()):
            raise Why(f"`{code_of(small).strip()}` in `{fn}`: a yield or a lambda in a method the mirror copies")
        if isinstance(small, cst.Return):
            t = self.expr(small.value, env, fn) if small.value is not None else OTHER
            if isinstance(t, Q):
                raise Why(f"`{code_of(small).strip()}`: a ratio is returned")
            returns.append(t)
            return
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            value = self.expr(small.value, env, fn)
            if self._ratio_site is not None:
                node, q = self._ratio_site
                self._ratio_site = None
                if not _ceil_value(small.value, node):
                    raise Why(f"`{code_of(small).strip()}`: the ceil of a ratio is used outside "
                              "`name = torch.ceil(...).to(torch.int64) [+- k]`, the only form whose exact int "
                              "mirror is proved (proofs/cb_ceil_ratio.smt2); by hand: bind `n = torch.ceil(...)"
                              ".to(torch.int64) - 1` on a statement of its own, then use `n` (encodec's "
                              "`_get_extra_padding_for_conv1d` is written so)")
                self._ratio(fn, node, q, line)
            if isinstance(target, cst.Name):
                if isinstance(value, Q):
                    if len(line.body) != 1:
                        raise Why(f"`{code_of(line).strip()}`: the ratio shares its line with another statement")
                    self._pending[target.value] = (line, value)
                env[target.value] = value
                return
            if isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements):
                names = [e.value.value for e in target.elements]
                if isinstance(value, Tup):
                    if len(value.items) != len(names):
                        raise Why(f"`{code_of(small).strip()}`: unpacks {len(value.items)} values into {len(names)}")
                    for n, t in zip(names, value.items):
                        env[n] = t
                    return
                for n in names:
                    env[n] = OTHER
                return
            self._no_int(value, small, "it is stored (an attribute, item or unpacking target)")
            self._no_int_inside(target, env)      # `outs[k] = ...`: a buffer value as a key or index
            return
        if isinstance(small, (cst.Expr,)):
            self._no_int(self.expr(small.value, env, fn), small, "its value is dropped")
            return
        if isinstance(small, (cst.Pass, cst.Raise)):
            if isinstance(small, cst.Raise) and small.exc is not None:
                self._no_int(self.expr(small.exc, env, fn), small, "it is formatted into an exception")
            return
        names = {n.value for n in m.findall(small, m.Name())}
        if any(isinstance(env.get(n), (I, Q, Tup)) for n in names) or any(
                self_attr(a) in self.plan.twins for a in m.findall(small, m.Attribute())):
            raise Why(f"`{code_of(small).strip()}` in `{fn}`: a statement the rule does not type meets an int buffer")
        for n in bound_names(small):
            env[n] = OTHER

    def _ratio(self, fn, node, q: Q, ceil_line) -> None:
        pending = [(k, v) for k, v in self._pending.items() if v[1].expr is q.expr]
        if len(pending) != 1:
            raise Why(f"`{code_of(node).strip()}`: the ratio must be bound to a local by its own statement first")
        local, (line, qq) = pending[0]
        del self._pending[local]
        self.plan.ratios.append(Ratio(fn, node, line, qq))
        self._ratio_locals.append((fn, local, line, ceil_line))


def _ceil_value(value: cst.BaseExpression, ceil: cst.Call) -> bool:
    """``value`` is the ceil form itself, or it plus or minus an int literal."""
    if value is ceil:
        return True
    return isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)) and \
        value.left is ceil and isinstance(value.right, cst.Integer)


def bound_names(node) -> set[str]:
    out = set()
    for t in m.findall(node, m.AssignTarget() | m.AugAssign() | m.AnnAssign() | m.For() | m.WithItem()):
        target = getattr(t, "target", None) or getattr(getattr(t, "asname", None), "name", None)
        if target is not None:
            out |= {n.value for n in m.findall(target, m.Name())}
    return out


def _join(a, b, name: str, fn: str):
    if a == b:
        return a
    if isinstance(a, (I, N)) and isinstance(b, (I, N)):
        return I(f"phi({a.term}, {b.term})", isinstance(a, I) and a.tensor and isinstance(b, I) and b.tensor)
    if isinstance(a, (I, Q, Tup)) or isinstance(b, (I, Q, Tup)):
        raise Why(f"`{name}` in `{fn}` is an int buffer value on one branch and something else on the other")
    return OTHER


def _join_all(returns: list, fn: str):
    if not returns:
        return OTHER
    out = returns[0]
    for r in returns[1:]:
        out = _join(out, r, "the return value", fn)
    return out


def check_ratio_locals(typer: Typer, methods: dict[str, cst.FunctionDef]) -> None:
    """The statement holding a ratio's ceil is the one right after the statement binding the
    ratio, in one block (the mirror evaluates the ratio's operands at the ceil). The typing has
    already made sure the ratio's local is read by nothing but its ceil."""
    for fn, local, line, ceil in typer._ratio_locals:
        body = methods[fn].body
        if m.findall(body, m.NamedExpr()):
            raise Why(f"`{fn}` binds a name inside an expression (`:=`)")
        for block in [body] + list(m.findall(body, m.IndentedBlock())):
            stmts = list(block.body)
            start = next((i for i, s in enumerate(stmts) if s is line), None)
            if start is None:
                continue
            if start + 1 >= len(stmts) or stmts[start + 1] is not ceil:
                # the mirror evaluates the ratio's operands at the ceil: nothing may run in between
                # (an in-place `x.transpose_()` changes `x.shape[-1]`: adversarial review)
                raise Why(f"the ratio bound to `{local}` in `{fn}` is not taken by the ceil on the next statement")
            break


