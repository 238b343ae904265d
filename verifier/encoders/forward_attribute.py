"""Encoders for a module attribute converted in ``forward`` and stored back only when the
conversion returned a new object (``X = self.X.to(...)``; ``if X is not self.X: self.X = X``
in place of ``self.X = self.X.to(...)``).

* ``attribute-write-kept`` (SMT): the original statement and the mended statements, both
  read from the sources, are run symbolically over an uninterpreted sort of Python objects
  (identity is equality; the conversion an uninterpreted function of the object read); the
  query asks for an object whose stored value after the mended statements differs from the
  original's, or a mended local holding something else. Unsat proves the store is kept
  whenever it changes anything; a plain local with no store is refuted (the float64 trap).
* ``attribute-access-plain`` (check, observed on the example run): ``self.X`` is a tensor
  and not a Parameter; the type of ``self`` has no attribute named X (no descriptor or
  property: a read returns the stored object and runs no code); ``__setattr__``,
  ``__getattr__`` and ``register_buffer`` are ``torch.nn.Module``'s, so storing the object
  already stored leaves ``_buffers`` and the persistence set as they were.
* ``attribute-screen`` (check, a static screen of the mended file with ``ast``): no class
  in the file overrides an access hook or binds X, no global registration hook is
  installed, the local is fresh in its function; the other reads and writes of ``self.X``
  in the file are listed (they see the same object as before: the store is kept).
"""
from __future__ import annotations

import ast

import z3

from verifier.encoders.base import Ctx, Query, decide
from verifier.outcomes import Outcome, check_refuted, checked, unknown

ACCESS_HOOKS = ("__setattr__", "__getattr__", "__getattribute__", "__delattr__", "register_buffer",
                "register_parameter")
GLOBAL_HOOKS = ("register_module_buffer_registration_hook", "register_module_parameter_registration_hook")
MODULE = "torch.nn.modules.module.Module."


def _self_attr(node, attr: str) -> bool:
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
            and node.attr == attr)


def _block_at(tree: ast.AST, line: int):
    """(statement list, index) of the statement starting on ``line``."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody", "handlers"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list):
                for i, s in enumerate(stmts):
                    if isinstance(s, ast.stmt) and s.lineno == line:
                        return stmts, i
    return None, None


def _function_at(tree: ast.AST, line: int):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            if best is None or node.lineno > best.lineno:
                best = node
    return best


class _Sym:
    """Symbolic run of straight-line statements: locals and the attribute as Obj terms."""

    def __init__(self, attr: str, conv_text: str, s0, conv):
        self.attr, self.conv_text, self.state, self.conv = attr, conv_text, s0, conv
        self.env: dict = {}

    def value(self, e):
        if _self_attr(e, self.attr):
            return self.state
        if isinstance(e, ast.Name) and e.id in self.env:
            return self.env[e.id]
        if isinstance(e, ast.Call) and ast.unparse(e) == self.conv_text:
            return self.conv(self.state)
        raise ValueError(f"`{ast.unparse(e)}` is outside the encoding")

    def test(self, e):
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Is, ast.IsNot)):
            eq = self.value(e.left) == self.value(e.comparators[0])
            return z3.Not(eq) if isinstance(e.ops[0], ast.IsNot) else eq
        raise ValueError(f"the test `{ast.unparse(e)}` is outside the encoding")

    def run(self, stmts):
        for s in stmts:
            if isinstance(s, ast.Assign) and len(s.targets) == 1:
                v, t = self.value(s.value), s.targets[0]
                if _self_attr(t, self.attr):
                    self.state = v
                elif isinstance(t, ast.Name):
                    self.env[t.id] = v
                else:
                    raise ValueError(f"the store `{ast.unparse(t)}` is outside the encoding")
            elif isinstance(s, ast.If):
                cond = self.test(s.test)
                before_state, before_env = self.state, dict(self.env)
                self.run(s.body)
                body_state, body_env = self.state, self.env
                self.state, self.env = before_state, dict(before_env)
                self.run(s.orelse)
                else_state, else_env = self.state, self.env
                self.state = z3.If(cond, body_state, else_state)
                self.env = {k: z3.If(cond, body_env[k], else_env[k]) for k in body_env.keys() & else_env.keys()}
            else:
                raise ValueError(f"the statement `{ast.unparse(s)[:80]}` is outside the encoding")


def write_kept(ob: dict, ctx: Ctx) -> Outcome:
    attr_text, line, local = ob.get("attr") or "", ob.get("line"), ob.get("local")
    if not (ctx.code and ctx.before and attr_text.startswith("self.") and isinstance(line, int) and local):
        return unknown("the original and mended sources, the attribute, the site line or the local are not recorded")
    attr = attr_text[len("self."):]
    try:
        before, code = ast.parse(ctx.before), ast.parse(ctx.code)
    except SyntaxError as exc:
        return unknown(f"a source does not parse: {exc}")
    b_stmts, bi = _block_at(before, line)
    c_stmts, ci = _block_at(code, line)
    if b_stmts is None or c_stmts is None:
        return unknown(f"no statement starts on line {line} in the original or the mended source")
    orig = b_stmts[bi]
    in_function = any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.lineno < line <= f.end_lineno
                      for f in ast.walk(before))
    if isinstance(orig, ast.AnnAssign) and orig.value is not None and in_function:
        # `self.X: T = v` in a function body: the annotation of an attribute target is never
        # evaluated there, so the statement is the store `self.X = v` (helper-48)
        orig = ast.Assign(targets=[orig.target], value=orig.value)
    if not (isinstance(orig, ast.Assign) and len(orig.targets) == 1 and _self_attr(orig.targets[0], attr)
            and isinstance(orig.value, ast.Call)):
        return unknown(f"the original statement on line {line} is not `{attr_text} = <call>`")
    # the mended statements: from the site to where the original's following statement resumes
    rest = [ast.dump(s) for s in b_stmts[bi + 1:]]
    end = len(c_stmts)
    for j in range(ci + 1, len(c_stmts) + 1):
        if [ast.dump(s) for s in c_stmts[j:]] == rest:
            end = j
            break
    else:
        return unknown("the mended block does not continue with the original's following statements")
    mended = c_stmts[ci:end]
    conv_text = ast.unparse(orig.value)
    obj = z3.DeclareSort("Obj")
    s0 = z3.Const("attr_before", obj)
    conv = z3.Function("conversion_result", obj, obj)
    a, b = _Sym(attr, conv_text, s0, conv), _Sym(attr, conv_text, s0, conv)
    try:
        a.run([orig])
        b.run(mended)
    except (ValueError, KeyError) as exc:
        return unknown(str(exc))
    claim = [a.state != b.state]
    if local in b.env:
        claim = [z3.Or(a.state != b.state, b.env[local] != a.state)]
    assumptions = [
        f"objects are an uninterpreted sort; `is` is equality; `{conv_text}` is one function of the object read, "
        "evaluated once at the same point in both versions (the same call text)",
        f"a read of `{attr_text}` returns the object stored and has no effect, and a store of `{attr_text}` stores "
        "the object given (attribute-access-plain, attribute-screen)",
        "storing the object already stored changes nothing (nn.Module.__setattr__ / register_buffer with the "
        "persistence the buffer was registered with, no registration hook: attribute-access-plain, "
        "attribute-screen)",
        "the statements after the rewritten span are the original's, unchanged (compared as syntax trees)",
    ]

    def build():
        return Query([], claim, assumptions, None)

    def describe(model, _extra):
        return (f"with `{conv_text}` returning a new object ({model.eval(conv(s0) != s0)}), the original stores "
                f"it in `{attr_text}` and the mended code leaves {model.eval(b.state == s0) and 'the old one' or 'another'}")

    return decide("attribute-write-kept", [("every-object", build)], ctx,
                  "uninterpreted sort of objects with equality (object identity)", describe=describe)


def access_plain(ob: dict, ctx: Ctx) -> Outcome:
    attr_text = ob.get("attr") or ""
    attr = attr_text.removeprefix("self.")
    names = (ctx.facts or {}).get("names", {})
    by = ("the observation of the example run at the rewritten lines (verifier/facts.py): the value of "
          f"`{attr_text}`, the attributes of `type(self)` and the access methods bound on `self`")
    seen = names.get(attr_text)
    if not seen:
        return unknown(f"`{attr_text}` was not observed at the site (the rewritten lines did not run on the example)")
    if seen.get("kind") != "tensor":
        return check_refuted(by, f"`{attr_text}` is a {seen.get('kind')} ({seen.get('type', '')}), not a tensor")
    if seen.get("param"):
        return check_refuted(by, f"`{attr_text}` is an nn.Parameter")
    if f"self.__class__.{attr}" in names:
        return check_refuted(by, f"`type(self).{attr}` exists ({names[f'self.__class__.{attr}'].get('kind')}): a "
                             "class attribute or descriptor, whose reads may run code")
    for meth in ("__setattr__", "__getattr__", "register_buffer"):
        got = names.get(f"self.{meth}")
        if not got:
            return unknown(f"`self.{meth}` was not observed at the site")
        if got.get("qualname") != MODULE + meth:
            return check_refuted(by, f"`self.{meth}` is {got.get('qualname')}, not torch.nn.Module's")
    flagged = names.get(f"{attr_text}._is_buffer", {}).get("value") is True
    persistent = names.get(f"{attr_text}.persistent", {}).get("value")
    if flagged:
        # re-storing an nn.Buffer re-registers it with the Buffer's own `persistent`: when the
        # module registered it otherwise, the original's store flips its persistence (state_dict)
        nonpers = names.get("self._non_persistent_buffers_set", {})
        if nonpers.get("kind") != "strset" or not isinstance(persistent, bool):
            return unknown(f"the persistence `{attr_text}` is registered with was not observed")
        if (attr not in nonpers["value"]) != persistent:
            return check_refuted(by, f"`{attr_text}` is registered {'non-' if attr in nonpers['value'] else ''}"
                                 f"persistent but is an nn.Buffer with persistent={persistent}: the original's "
                                 "store re-registers it with that persistence (its state_dict entry changes), the "
                                 "mended code skips the store")
    return checked(by, [f"`{attr_text}`: a {seen.get('dtype')} tensor on {seen.get('device')}, not a Parameter "
                        "(observed)",
                        f"`type(self)` has no attribute `{attr}` (observed: the lookup failed)",
                        "`__setattr__`, `__getattr__`, `register_buffer` are torch.nn.Module's (observed)",
                        (f"an nn.Buffer-flagged tensor (persistent={persistent}), registered with that persistence "
                         "(observed): re-storing it re-registers it unchanged" if flagged else
                         "not an nn.Buffer-flagged tensor: a re-store keeps the module's persistence set"),
                        "no global buffer/parameter registration hook is installed outside the screened file "
                        "(assumed)"])


def screen(ob: dict, ctx: Ctx) -> Outcome:
    attr_text, local, line = ob.get("attr") or "", ob.get("local"), ob.get("line")
    attr = attr_text.removeprefix("self.")
    if not ctx.code or not local or not isinstance(line, int):
        return unknown("the mended source, the local or the site line is not recorded")
    try:
        tree = ast.parse(ctx.code)
    except SyntaxError as exc:
        return unknown(f"the mended source does not parse: {exc}")
    by = ("a static screen of the mended file (ast): access hooks and class bindings in every class, global "
          f"registration hooks, the local's freshness, the reads and writes of `{attr_text}`")
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name in ACCESS_HOOKS:
                return check_refuted(by, f"class `{cls.name}` defines `{st.name}`")
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == attr:
                return check_refuted(by, f"class `{cls.name}` defines `{attr}` (a method or property)")
            targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                return check_refuted(by, f"class `{cls.name}` binds `{attr}` in its body")
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name in GLOBAL_HOOKS:
            return check_refuted(by, f"the file calls `{name}`")
    fn = _function_at(tree, line)
    if fn is None:
        return unknown(f"no function holds line {line}")
    uses = [n.lineno for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == local]
    if sorted(uses) != [line, line + 1, line + 2]:
        return check_refuted(by, f"the local `{local}` is also used on lines "
                             f"{sorted(set(uses) - {line, line + 1, line + 2})} of `{fn.name}`: it is not fresh")
    reads, writes = [], []
    for node in ast.walk(tree):
        if _self_attr(node, attr) and not line <= node.lineno <= line + 2:
            (writes if isinstance(node.ctx, (ast.Store, ast.Del)) else reads).append(node.lineno)
    return checked(by, [f"no class overrides {', '.join(ACCESS_HOOKS)} or binds `{attr}`; no "
                        f"{' / '.join(GLOBAL_HOOKS)} call in the file",
                        f"the local `{local}` is used only by the rewrite",
                        f"other reads of `{attr_text}` in the file, lines {sorted(set(reads))[:12]}, and writes, "
                        f"lines {sorted(set(writes))[:12]}, see the same object as before: the store is kept whenever "
                        "it changes the attribute",
                        "base classes defined in other files are covered by attribute-access-plain (observed)"])


ENCODERS = {"attribute-write-kept": write_kept, "attribute-access-plain": access_plain, "attribute-screen": screen}
CHECKS = frozenset({"attribute-access-plain", "attribute-screen"})
OBSERVED = frozenset({"attribute-access-plain"})
