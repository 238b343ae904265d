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


class _Placeholder(ast.NodeTransformer):
    """Every occurrence of the checked expression (a name or attribute chain) becomes one name."""

    def __init__(self, expr: str) -> None:
        self.expr = expr

    def visit_Attribute(self, node):
        return ast.Name(PLACEHOLDER, ast.Load()) if ast.unparse(node) == self.expr else self.generic_visit(node)

    def visit_Name(self, node):
        return ast.Name(PLACEHOLDER, ast.Load()) if node.id == self.expr else node


def _mended_block(code: str, expr: str) -> str | None:
    """The ``if`` statement in ``code`` that guards the new ``_assert_async`` on ``expr`` and
    falls back to ``_check_tensor_all``, with ``expr`` replaced by a placeholder name."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not node.body or not node.orelse:
            continue
        body, other = ast.unparse(node.body[0]), ast.unparse(node.orelse)
        if "._assert_async(" in body and "_check_tensor_all(" in other and expr in ast.unparse(node.test):
            return ast.unparse(_Placeholder(expr).visit(ast.parse(ast.unparse(node))))
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


def _outcome(fn, value) -> tuple:
    try:
        fn(value)
    except Exception as exc:  # the behaviour compared, not a failure
        return (type(exc).__name__, str(exc))
    return ("passed",)


def check_equivalent(ob: dict, ctx: Ctx) -> Outcome:
    import torch

    expr, call = ob.get("expr"), ob.get("call")
    if not ctx.code or not expr or call != "torch._check_tensor_all":
        return unknown("the mended source or the checked expression is not recorded")
    block = _mended_block(ctx.code, expr)
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
    env = _torch_names(ctx.code)
    compiled_code = compile(block, "<mended check>", "exec")

    def mended(value):
        exec(compiled_code, dict(env), {PLACEHOLDER: value})

    def original(value):
        # the original call: with its constant message callable, when it had one
        torch._check_tensor_all(value, (lambda: text) if callable_message else None)

    by = ("translation validation by observation on the installed torch: the mended statement, taken from the "
          "mended source, against torch._check_tensor_all on probe conditions (raises or not, exception type, "
          "message), eager and under torch.compile (inductor)")
    probes = _probes()
    for name, value in probes:
        a, b = _outcome(original, value), _outcome(mended, value)
        if a != b:
            return check_refuted(by, f"on {name}: the original gives {a!r}, the mended statement {b!r}")

    def as_function(value):
        ns = dict(env)
        exec(compile("def _mend_check(" + PLACEHOLDER + "):\n" + textwrap.indent(block, "    ") + "\n    return 0\n",
                     "<mended check>", "exec"), ns)
        return ns["_mend_check"]

    fn = torch.compile(as_function(None), backend="inductor", fullgraph=False)
    for name, value in [(n, v) for n, v in probes if n in ("[True, True]", "[[True, False]]")]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a, b = _outcome(original, value), _outcome(fn, value)
        if a != b:
            return check_refuted(by, f"compiled, on {name}: the original gives {a!r}, the mended statement {b!r}")
    torch._dynamo.reset()
    return checked(by, [f"probes: {', '.join(n for n, _ in probes)}; compiled: [True, True], [[True, False]]",
                        f"torch {torch.__version__}: the exception and message are what this torch raises "
                        "(torch._check_with's default message)"])


ENCODERS = {"check-equivalent": check_equivalent}
CHECKS = frozenset(ENCODERS)
OBSERVED = frozenset(ENCODERS)   # probes observed on the installed torch: a test, not a proof
