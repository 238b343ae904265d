"""Encoder for a host-reading tensor check (``torch._check_tensor_all``) replaced by a check
that stays in the graph (``torch._assert_async`` under a guard).

``check-equivalent`` is translation validation by observation, not a proof: the mended
statement is taken from the mended source itself (the ``if`` holding the new
``_assert_async``) and run, on the installed torch, against the original call on probe
conditions -- empty, 0-d, 1-d and 2-d bool tensors that pass or fail, an int64 tensor, a
Python bool and a bool tensor on the meta device (helper-47: the original raises there) --
comparing whether each raises, the exception type and its message; the failing and passing
probes again under ``torch.compile`` (inductor). A mismatch is a counterexample (refuted);
agreement is ``checked``, with the probes named.
"""
from __future__ import annotations

import ast
import textwrap
import warnings

from verifier.encoders.base import Ctx
from verifier.outcomes import Outcome, check_refuted, checked, unknown

PLACEHOLDER = "__mend_cond__"


def _probes():
    import torch

    return [("empty bool tensor", torch.zeros(0, dtype=torch.bool)), ("0-d True", torch.tensor(True)),
            ("0-d False", torch.tensor(False)), ("[True, True]", torch.tensor([True, True])),
            ("[[True, False]]", torch.tensor([[True, False]])), ("int64 ones", torch.ones(3, dtype=torch.int64)),
            ("Python True", True), ("[True, False] on the meta device", torch.tensor([True, False], device="meta"))]


def _field(i: int) -> str:
    return f"__mend_field_{i}__"


class _Placeholder(ast.NodeTransformer):
    """Every occurrence of the checked expression (a name or attribute chain) becomes one name,
    and so does each attribute a formatted message reads (``names``: source -> placeholder)."""

    def __init__(self, expr: str, fields: list[str] = ()) -> None:
        self.names = {expr: PLACEHOLDER, **{f: _field(i) for i, f in enumerate(fields)}}

    def visit_Attribute(self, node):
        name = self.names.get(ast.unparse(node))
        return ast.Name(name, ast.Load()) if name else self.generic_visit(node)

    def visit_Name(self, node):
        return ast.Name(self.names[node.id], ast.Load()) if node.id in self.names else node


def _field_probes():
    import torch

    return [("int 16", 16), ("str 'x'", "x"), ("float 0.5", 0.5), ("bool True", True), ("a list [1, 2]", [1, 2]),
            ("None", None), ("a 0-d tensor", torch.tensor(3)),
            # formatting it raises: a check passing must not format it (only exact types are formatted)
            ("an int subclass whose formatting raises", type("IntSub", (int,), {
                "__format__": _raise_on_format, "__repr__": _raise_on_format, "__str__": _raise_on_format})(7))]


def _raise_on_format(self, *args):
    raise ValueError("formatting raised")


def _mended_block(code: str, expr: str, fields: list[str] = ()) -> str | None:
    """The ``if`` statement in ``code`` that guards the new ``_assert_async`` on ``expr`` and
    falls back to ``_check_tensor_all``, with ``expr`` (and the message's ``fields``) replaced by
    placeholder names."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not node.body or not node.orelse:
            continue
        body, other = ast.unparse(node.body[0]), ast.unparse(node.orelse)
        if "._assert_async(" in body and "_check_tensor_all(" in other and expr in ast.unparse(node.test):
            return ast.unparse(_Placeholder(expr, fields).visit(ast.parse(ast.unparse(node))))
    return None


def _bound_just_before(code: str, name: str, source: str) -> bool:
    """The statement right before the ``if`` holding the new ``_assert_async`` on ``name`` is
    ``name = <source>``, in the same block: the hoisted condition is the original one, evaluated
    where the call evaluated it."""
    try:
        tree, want = ast.parse(code), ast.dump(ast.parse(source, mode="eval").body)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            for prev, stmt in zip(stmts, stmts[1:]):
                if isinstance(stmt, ast.If) and stmt.body and "._assert_async(" in ast.unparse(stmt.body[0]) and \
                        name in ast.unparse(stmt.test):
                    return isinstance(prev, ast.Assign) and len(prev.targets) == 1 and \
                        isinstance(prev.targets[0], ast.Name) and prev.targets[0].id == name and \
                        ast.dump(prev.value) == want
    return False


def _torch_names(code: str) -> dict:
    import torch

    names = {"torch": torch}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" and a.asname:
                    names[a.asname] = torch
        if isinstance(node, ast.ImportFrom) and node.module == "torch":
            for a in node.names:   # `from torch import _check_tensor_all [as c]`: the fallback's name
                if a.name == "_check_tensor_all":
                    names[a.asname or a.name] = torch._check_tensor_all
    return names


def _outcome(fn, *args) -> tuple:
    try:
        fn(*args)
    except Exception as exc:  # the behaviour compared, not a failure
        return (type(exc).__name__, str(exc))
    return ("passed",)


def check_equivalent(ob: dict, ctx: Ctx) -> Outcome:
    import torch

    expr, call = ob.get("expr"), ob.get("call")
    if not ctx.code or not expr or call != "torch._check_tensor_all":
        return unknown("the mended source or the checked expression is not recorded")
    fields = list(ob.get("message_fields") or []) if ob.get("message_is_format") else []
    block = _mended_block(ctx.code, expr, fields)
    if block is None:
        return unknown(f"no guarded torch._assert_async on `{expr}` with a _check_tensor_all fallback was found in "
                       "the mended source")
    hoisted = ob.get("hoisted")
    if hoisted is not None and not _bound_just_before(ctx.code, expr, hoisted):
        return unknown(f"`{expr}` is not bound to `{hoisted}` by the statement right before the mended check")
    text = ob.get("message")
    callable_message = bool(ob.get("message_callable"))
    if callable_message and not isinstance(text, str):
        return unknown("the message callable's text is not recorded")
    if ob.get("message_is_format"):   # the original's f-string, reading the same placeholders
        try:
            fmt = compile(ast.unparse(_Placeholder(expr, fields).visit(ast.parse(text, mode="eval"))), "<message>",
                          "eval")
        except SyntaxError as exc:
            return unknown(f"the recorded message format does not parse: {exc}")
    env = _torch_names(ctx.code)
    params = [PLACEHOLDER, *(_field(i) for i in range(len(fields)))]
    compiled_code = compile(block, "<mended check>", "exec")

    def mended(value, *vals):
        # one namespace: the fallback's lambda reads the placeholders as globals
        exec(compiled_code, {**env, **dict(zip(params, (value, *vals)))})

    def original(value, *vals):
        # the original call: with its message callable (constant text, or the f-string on the same values)
        message = None
        if ob.get("message_is_format"):
            def message():
                return eval(fmt, {**env, **dict(zip(params[1:], vals))})
        elif callable_message:
            def message():
                return text
        torch._check_tensor_all(value, message)

    by = ("translation validation by observation on the installed torch: the mended statement, taken from the "
          "mended source, against torch._check_tensor_all on probe conditions (raises or not, exception type, "
          "message), eager and under torch.compile (inductor)")
    probes = _probes()
    values = [(n, [v] * len(fields)) for n, v in _field_probes()] if fields else [("", [])]
    for vname, vals in values:
        for name, value in probes:
            a, b = _outcome(original, value, *vals), _outcome(mended, value, *vals)
            if a != b:
                where = f" with the message's attributes {vname}" if vname else ""
                return check_refuted(by, f"on {name}{where}: the original gives {a!r}, the mended statement {b!r}")

    def as_function(value):
        ns = dict(env)
        exec(compile("def _mend_check(" + ", ".join(params) + "):\n" + textwrap.indent(block, "    ")
                     + "\n    return 0\n", "<mended check>", "exec"), ns)
        return ns["_mend_check"]

    fn = torch.compile(as_function(None), backend="inductor", fullgraph=False)
    for vname, vals in values[:2]:
        for name, value in [(n, v) for n, v in probes if n in ("[True, True]", "[[True, False]]")]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a, b = _outcome(original, value, *vals), _outcome(fn, value, *vals)
            if a != b:
                return check_refuted(by, f"compiled, on {name} {vname}: the original gives {a!r}, the mended "
                                         f"statement {b!r}")
    torch._dynamo.reset()
    return checked(by, [f"probes: {', '.join(n for n, _ in probes)}; compiled: [True, True], [[True, False]]"
                        + (f"; the message's attributes ({', '.join(fields)}) as {', '.join(n for n, _ in values)} "
                           "(compiled: the first two)" if fields else ""),
                        f"torch {torch.__version__}: the exception and message are what this torch raises "
                        "(torch._check_with's default message)"]
                   + (["the message's attributes exist on every call, passing or failing (the mended check reads "
                       "them on every call, the original only when it fails): observed on the example run"]
                      if fields else []))


ENCODERS = {"check-equivalent": check_equivalent}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset(ENCODERS)   # probes observed on the installed torch: a test, not a proof
