"""The break taxonomy: a small set of categories keyed on Dynamo's ``gb_type`` and the
statement at the break site.

=====================  ==================================================================
category               what it is
=====================  ==================================================================
data-dependent-branch  ``if``/``and``/``or``/``bool()`` on a tensor's value
data-dependent-loop    ``while`` on a tensor's value, or an ``if`` on one that ends in ``break``
python-state-mutation  a tensor-guarded branch that mutates Python state (counters, flags)
raise-assert           a tensor-guarded ``raise`` or ``assert``, ``torch._assert(<tensor>, msg)``
print-logging          ``print``, a ``logging``/transformers logger call, ``warnings.warn``
item-tolist            scalar extraction: ``.item()``, ``.tolist()``, ``float(t)``, ``int(t)``
tensor-check           a check that reads its tensor on the host (``torch._check_tensor_all``)
numpy-constant         ``np.sum``/``np.prod``/``np.lcm``/``np.gcd``/``np.max``/``np.min`` of Python constants
                       traced as arrays (a "Data dependent operator" at the call's statement, or a branch
                       on a comparison with one)
scalar-tensor          a Python int wrapped in ``torch.tensor()`` read back as a slice bound
constant-buffer        a branch or scalar read on a value made from a module's 0-d int buffers (encodec's
                       stride/kernel/padding buffers, ``if length <= max_pad``)
module-attribute-write a ``self.X = self.X.to(...)``-style write of a module attribute in ``forward``
debug-host-work        dead or debug-only host work: ``torch.jit.isinstance``, an unused ``repr(t)``,
                       a ``np.random``/``random`` draw, ``inspect.Signature.bind``
dynamic-shape-op       an operator whose output shape depends on data (``nonzero``, masks)
mask-update            a boolean-mask update ``x[m] = f(x[m])`` / ``x[m] op= c`` (gather + index_put)
state-write            a write with tensor slice bounds ``X[:, a:b] = v``, or ``self.X = t.item()`` (a Python
                       number kept on the module)
numpy                  a NumPy call Dynamo cannot trace
generator              generators and iterators kept on the module
unsupported-builtin    a builtin or library call Dynamo cannot trace (``time``, ``random``,
                       ``torch.manual_seed``, functions in skipped files)
deepcopy               ``copy.deepcopy``
isinstance-type-check  ``isinstance`` Dynamo cannot decide
hook-or-lock           a module hook registered, or a threading lock taken, in ``forward``
traced-exception       an exception raised while Dynamo traced the frame (here, or below a ``finally``), unhandled
                       ("Observed exception": Dynamo runs the whole function eagerly)
other                  any other ``gb_type``
=====================  ==================================================================

Source: the gb_type keys of ``torch/_dynamo/graph_break_registry.json`` (torch 2.13) and
the categories of shared/cases/README.md.
"""
from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from mend.locate import Located, header_parts

CATEGORIES = {
    "data-dependent-branch": "branch on a tensor's value",
    "data-dependent-loop": "loop on a tensor's value",
    "python-state-mutation": "tensor-guarded branch that mutates Python state",
    "raise-assert": "tensor-guarded raise or assert",
    "print-logging": "print, logging or warnings call",
    "item-tolist": "scalar extraction (.item(), .tolist())",
    "tensor-check": "tensor check read on the host (torch._check_tensor_all)",
    "numpy-constant": "numpy sum/prod/lcm/gcd/max/min of Python constants traced as arrays",
    "scalar-tensor": "Python scalar wrapped in a tensor, used as a Python number (slice bound)",
    "constant-buffer": "a module's 0-d int buffers used as Python numbers (a pad, a branch, a slice bound)",
    "module-attribute-write": "module attribute written in forward (self.X = self.X.to(...))",
    "debug-host-work": "dead or debug-only host work (torch.jit.isinstance, unused repr, RNG draw, Signature.bind)",
    "dynamic-shape-op": "data-dependent output shape",
    "mask-update": "boolean-mask update x[m] = f(x[m])",
    "state-write": "cache write with tensor slice bounds, or a Python number stored on the module",
    "numpy": "untraceable NumPy call",
    "generator": "generator or iterator",
    "unsupported-builtin": "untraceable builtin or library call",
    "deepcopy": "copy.deepcopy",
    "isinstance-type-check": "undecidable isinstance",
    "hook-or-lock": "module hook registered, or a threading lock taken, in forward (one-time setup)",
    "traced-exception": "an exception raised while Dynamo traced the function (it ran eagerly)",
    "other": "other graph break",
}

# What helps where a one-time setup (a hook registered, a lock taken) breaks on the first call:
# also said where setup-guard's hoisted check is declined as gaining nothing (mend.pipeline)
EAGER_SETUP_ADVICE = ("call the model once eagerly before torch.compile, so the first trace sees the setup done "
                      "(hf:newest/llava, mended: 1 graph then, measured by docs/research/llava_hooks_probe.py)")

# Why a category is out of reach of every rule, in words a user understands.
UNFIXABLE_REASONS = {
    "data-dependent-loop": "the loop's trip count depends on tensor values; no local rewrite keeps it in one graph "
                           "(torch.while_loop needs fixed-shape carried state)",
    "python-state-mutation": "the branch mutates Python state (a counter or flag) that lives outside the graph; "
                             "predicating it would change what the module records",
    "item-tolist": "the tensor value leaves the graph as a Python number and Python code consumes it; "
                   "keeping it a tensor needs a manual change (or capture_scalar_outputs=True with torch._check)",
    "dynamic-shape-op": "the operator's output shape depends on tensor values; it traces only with "
                        "capture_dynamic_output_shape_ops=True, which changes every shape downstream",
    "numpy": "Dynamo traces NumPy as tensors and this call's value leaves the graph (or NumPy draws from its own "
             "random stream); no rule rewrites this call: numpy-constants takes np.sum/prod/lcm/gcd/max/min of Python ints "
             "whose result sizes an allocation, a reshape's shape, range(), int() or float(), or is compared with "
             "ints for truth only (through int arithmetic too), and dead-host-work a draw whose value is unused "
             "in eval",
    "generator": "Dynamo cannot step this iterator or generator: one kept on the module advances per call, which "
                 "the graph cannot own, and a C-implemented iterator Dynamo has no model for (gb 'Missing "
                 "tp_iternext': e.g. the one a comprehension's frame receives when Dynamo resumes inside it "
                 "after an earlier break) cannot be unrolled; where the frame was resumed after an earlier "
                 "break, that break is the one to fix first",
    "unsupported-builtin": "the call (wall clock, Python RNG, global seeding, a tensor's storage address "
                           "`data_ptr()`, a skipped library function) has effects or a value Dynamo cannot trace "
                           "and no graph-native equivalent",
    "deepcopy": "copy.deepcopy of live objects cannot be traced",
    "isinstance-type-check": "Dynamo cannot decide the isinstance check statically",
    "hook-or-lock": "Dynamo cannot trace registering a module hook or taking a threading lock; where this is "
                    "setup done once, on the first call (transformers 5 installs its output-capturing hooks so, "
                    "utils/output_capturing.py), the compiled frames keep the break on every later call too: "
                    + EAGER_SETUP_ADVICE,
    "traced-exception": "an exception was raised while Dynamo traced this function, here or in a call it reaches "
                        "(a `finally` block is reported with the exception of the code it guards), and nothing in "
                        "the compiled function catches it, so Dynamo ran the whole function eagerly (gb0088, "
                        "\"Observed exception\"); the eager run does not raise, so the traced path differs from the "
                        "eager one: look for a branch on torch.compiler.is_compiling() or "
                        "is_torchdynamo_compiling() before it that takes another path under tracing (transformers "
                        "5's T5-family stacks skip building a default attention_mask there, then index None); "
                        "changing which path is traced is a change in behaviour no rule makes for you",
    "other": "no rule handles this kind of graph break",
}

# Why a break of category `other` stays, by its gb_type, where the kind is known (helper-78)
OTHER_REASONS = {
    "Failed to mutate tensor data attribute to different dtype":
        "forward assigns a tensor of another dtype to an existing tensor's `.data` (`p.data = p.data.to(dtype)`): "
        "Dynamo cannot trace changing a tensor's dtype in place, and the change persists in the module after the "
        "call (its state_dict dtype), so no local rewrite keeps it; cast once outside forward (`model.to(dtype)`), "
        "or use a cast copy in forward without writing `.data`",
    # encodec's 15 left breaks (benchmarks/results/newest.md); the issue keeps nn.LSTM declined
    "Attempted to wrap RNN, GRU, or LSTM":
        "Dynamo does not trace torch.nn.RNN, GRU or LSTM modules by default (gb0014): the module runs eagerly "
        "with a break on each side of it (where the call sits in a loop, the whole frame runs eagerly). No source "
        "rewrite removes it; the "
        "global setting `torch._dynamo.config.allow_rnn = True` lets Dynamo trace the module (measured on torch "
        "2.13, CPU: a one-layer LSTM between two layers compiled to one graph with outputs bit-equal to eager "
        "under the eager, aot_eager and inductor backends; it changes every RNN the process compiles, so it is "
        "yours to set)",
}

_BRANCH = {"Data-dependent branching", "Data-dependent branching with non-constant __bool__",
           "torch.fx.experimental.symbolic_shapes.guard_scalar branch not supported"}
_ITEM = {"Unsupported Tensor.item() call with capture_scalar_outputs=False",
         "Tensor.tolist() with non-integer tensor", "Data dependent operator"}
_SKIPPED = {"Attempted to call function marked as skipped", "Attempted to inline function marked as skipped",
            "Attempted to inline function marked as skipped (SkipFunctionVariable)",
            "Failed to trace builtin operator", "logging.Logger method not supported for non-export cases"}

LOG_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "exception", "log",
               "warning_once", "info_once", "warning_advice"}


def call_name(node: cst.CSTNode) -> str | None:
    """Dotted name of a call's callee (``warnings.warn``, ``self.logger.info``), else None."""
    if not isinstance(node, cst.Call):
        return None
    parts = []
    func = node.func
    while isinstance(func, cst.Attribute):
        parts.append(func.attr.value)
        func = func.value
    if isinstance(func, cst.Name):
        parts.append(func.value)
        return ".".join(reversed(parts))
    return None


def _is_side_effect(name: str | None) -> bool:
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return name == "print" or name in ("warnings.warn", "warn") or (
        "." in name and last in LOG_METHODS and ("log" in name.lower() or name.startswith("logging.")))


def side_effect_call(loc: Located | None) -> str | None:
    """The dotted callee of a print/logger/warnings call in the statement, else None.

    Anywhere in the statement (``ok = print(x)`` too: the rule then declines because the
    value is used); for an ``if``/``while``/``with``/``for`` only in its header, not its body.
    """
    if loc is None:
        return None
    node = loc.node
    for part in header_parts(node):  # the body's calls are statements of their own
        for call in m.findall(part, m.Call()):
            name = call_name(call)
            if _is_side_effect(name):
                return name
    return None


def _mutates_python_state(stmts) -> bool:
    """A body that bumps a counter or sets a flag: ``self.n += 1``, ``self.flag = True``
    (an attribute set to a literal: ``True``/``False``/``None``, a number or a string)."""
    for stmt in stmts:
        for small in getattr(stmt, "body", []) if isinstance(stmt, cst.SimpleStatementLine) else []:
            if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Attribute):
                return True
            if isinstance(small, cst.Assign) and any(isinstance(t.target, cst.Attribute) for t in small.targets) \
                    and _literal(small.value):
                return True
    return False


def _literal(node) -> bool:
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return isinstance(node.expression, (cst.Integer, cst.Float))
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString))


def _if_body(node: cst.If):
    return list(node.body.body)


def _only_raise(stmts) -> bool:
    return (len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine)
            and len(stmts[0].body) == 1 and isinstance(stmts[0].body[0], cst.Raise))


_TENSOR_CHECKS = ("_check_tensor_all",)


def _host_tensor_check(node) -> bool:
    """``torch._check_tensor_all(...)`` as a statement: a check that reads its tensor on the host."""
    if not (isinstance(node, cst.Expr) and isinstance(node.value, cst.Call)):
        return False
    func = node.value.func   # `torch._check_tensor_all`, or the name `from torch import` bound
    return (isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_CHECKS) or (
        isinstance(func, cst.Name) and func.value in _TENSOR_CHECKS)


def _scalar_tensor_bound(loc) -> bool:
    """A ``Tensor.item()`` break at a statement with no explicit scalar read (``.item(``,
    ``.tolist(``, ``int(``, ``float(``) whose slice bound reads a name the enclosing function
    binds from a call (``span = f(...)``; ``x[a - span : a + span]``)."""
    if loc is None or any(k in loc.code() for k in (".item(", ".tolist(", "int(", "float(")):
        return False
    function = loc.function
    if function is None:
        return False
    bound = {s.targets[0].target.value for s in m.findall(function.body, m.Assign(
        targets=[m.AssignTarget(target=m.Name())], value=m.Call()))}
    if any(n.value in bound for sl in m.findall(loc.node, m.Slice() | m.Index()) for n in m.findall(sl, m.Name())):
        return True
    from mend.rules.scalar_tensor.indexed import reads_indexed
    return reads_indexed(loc.module, loc.node, function)


def _constant_buffer(loc: Located | None, declined_too: bool = False) -> bool:
    """The site's class keeps 0-d int buffers that constant-buffer's analysis takes, and the
    site reads a value made from them as a number (mend/rules/constant_buffer). ``declined_too``:
    or the site's statement reads one of the class's int buffers, whether or not the rule takes
    the class (its reason then shows, not a generic one: helper-78's c07)."""
    from mend.rules.constant_buffer.screen import reads_int_buffers, takes
    return takes(loc) or (declined_too and reads_int_buffers(loc))


def _self_attribute_write(node) -> bool:
    """An assignment to one ``self.`` attribute (``self.X = self.X.to(...)``: the store runs
    ``nn.Module.__setattr__``)."""
    target = node.targets[0].target if isinstance(node, cst.Assign) and len(node.targets) == 1 else None
    if isinstance(node, cst.AnnAssign) and node.value is not None:   # `self.X: T = ...` (helper-48)
        target = node.target
    return (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
            and target.value.value == "self")




def _numpy_constant_call(loc: Located | None) -> bool:
    """The statement (a compound statement's header) calls a numpy function numpy-constants
    knows (``np.sum``/``prod``/``lcm``/``gcd``/``max``/``min``: its ``FUNCS``), spelled through
    ``numpy`` or a top-level ``import numpy as NAME``."""
    from mend.rules.numpy_constants.screen import FUNCS, reads_numpy_local

    if loc is None:
        return False
    names = {"numpy"}
    for stmt in loc.module.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                names |= {a.asname.name.value for a in small.names if isinstance(a.asname, cst.AsName)
                          and isinstance(a.asname.name, cst.Name) and call_name(cst.Call(a.name)) == "numpy"}
    node = loc.node
    for part in header_parts(node):
        for call in m.findall(part, m.Call()):
            root, _, last = (call_name(call) or "").rpartition(".")
            if root in names and last in FUNCS:
                return True
    return reads_numpy_local(node, loc.ancestors)   # `width = np.sum(plan)` on an earlier line, read here


def _numpy_tolist(loc: Located | None) -> bool:
    """``np.<fn>(...)[...].tolist()`` in the statement: a NumPy result (traced as an array)
    read back as Python numbers (``np.cumsum(self.split_sizes)[:-1].tolist()``)."""
    if loc is None:
        return False
    for call in m.findall(loc.node, m.Call(func=m.Attribute(attr=m.Name("tolist")))):
        recv = call.func.value
        while isinstance(recv, cst.Subscript):
            recv = recv.value
        if isinstance(recv, cst.Call) and (call_name(recv) or "").split(".")[0] in ("np", "numpy"):
            return True
    return False


def _item_assert(node) -> bool:
    """``assert [not] <cmp>`` with a ``T.item()`` operand of a comparison (``assert lengths.max().item() <= slen``),
    ``assert [not] T.item()`` or ``[not] math.isnan(T.item())`` (``isinf``, ``isfinite``), or an ``if`` with
    such a test whose body only raises (a NaN-loss check): the host read is the check's own, which predicated
    validation moves into the graph."""
    from mend.rules.predicated_validation.screen import MATH_TESTS, only_raises

    if isinstance(node, cst.If):
        if not only_raises(node):
            return False
    elif not isinstance(node, cst.Assert):
        return False
    test = node.test
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Call) and len(test.args) == 1 and isinstance(test.func, cst.Attribute) and \
            isinstance(test.func.value, cst.Name) and test.func.value.value == "math" and \
            test.func.attr.value in MATH_TESTS:
        test = test.args[0].value
    operands = [test.left] + [c.comparator for c in test.comparisons] if isinstance(test, cst.Comparison) else [test]
    # `assert (ids < n).all().item(), msg`: the bare truth value of one read (generalisation probe);
    # `int(T.item()) == 0`, `float(T.item()) < b`: a builtin cast of the read, in a comparison
    from mend.rules.predicated_validation.screen import cast_of_item

    operands = [o.args[0].value if isinstance(test, cst.Comparison) and cast_of_item(o) else o for o in operands]
    return any(isinstance(o, cst.Call) and not o.args and isinstance(o.func, cst.Attribute) and o.func.attr.value == "item"
               for o in operands)


# a draw from numpy's or Python's random number generator, by the callee's dotted name
_RANDOM_CALLS = ("np.random.", "numpy.random.", "random.")


def _debug_host_work(gb_type: str, loc: Located | None) -> bool:
    """Dead or debug-only host work (issue 10, kind 8), by the gb_types measured on torch 2.13:
    ``torch.jit.isinstance`` (a skipped function), ``r = repr(t)`` / ``r = str(t)``, a
    ``np.random``/``random`` draw assigned to a local ("Data dependent operator"), and
    ``inspect.Signature.bind``'s mappingproxy iteration in the stdlib ``inspect.py``."""
    if loc is None:
        return False
    node = loc.node
    if gb_type == "mapping proxy affected by dictionary mutation":
        # located in the stdlib's inspect.py, or (the site now skips the stdlib) at the
        # caller's `signature.bind(...)` line
        return str(loc.file).replace("\\", "/").endswith("inspect.py") or any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("bind", "bind_partial")
            for c in m.findall(node, m.Call()))
    value = node.value if isinstance(node, cst.Assign) else None
    if gb_type in ("repr() on tensor", "Failed to trace builtin operator") and call_name(value) in ("repr", "str"):
        return True
    if gb_type == "repr() on tensor" and isinstance(value, cst.FormattedString):
        return True   # `msg = f"{t!r}"` (helper-68's c29); dead-host-work screens whether it is unused
    if gb_type == "Data dependent operator" and (call_name(value) or "").startswith(_RANDOM_CALLS):
        return True
    if gb_type in _SKIPPED:
        return any((call_name(c) or "").endswith("jit.isinstance") for p in header_parts(node)
                   for c in m.findall(p, m.Call()))
    return False


def _item_in_effect_call(node) -> bool:
    """A bare print/logger/warnings call statement with a ``.item()``, ``.tolist()``, ``float()``
    or ``int()`` call in its arguments."""
    if not (isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and _is_side_effect(call_name(node.value))):
        return False
    return any(m.findall(a.value, m.Call(func=m.Attribute(attr=m.Name("item") | m.Name("tolist")) | m.Name("float")
                                         | m.Name("int"))) for a in node.value.args)


def _nonzero_count(loc) -> bool:
    """``x = len(T.nonzero())`` / ``T.nonzero().shape[0]`` / ``.size(0)``: a count of nonzero
    elements that leaves the graph as a Python number (mend/rules/item_operand)."""
    from mend.rules._common import torch_name
    from mend.rules.item_operand.screen import nonzero_count
    return loc is not None and isinstance(loc.node, cst.Assign) \
        and nonzero_count(loc.node.value, torch_name(loc.module)[0]) is not None


def _mask_update(node) -> bool:
    """``x[e] op= ...`` or ``x[e] = ...x[e]...`` (a boolean-mask update, mend/rules/mask_update)."""
    from mend.rules.mask_update.screen import is_mask_statement
    return node is not None and is_mask_statement(node)


def _state_write(node) -> bool:
    """``X[..., a:b] = v`` with a non-literal slice bound, or ``self.X = <t>.item()`` /
    ``int(...)`` / ``float(...)`` (issue 10, kind 7; mend/rules/state_write)."""
    if not (isinstance(node, cst.Assign) and len(node.targets) == 1):
        return False
    target, value = node.targets[0].target, node.value
    if isinstance(target, cst.Subscript):
        return any(isinstance(e.slice, cst.Slice) and any(
            b is not None and not isinstance(b, cst.Integer) for b in (e.slice.lower, e.slice.upper))
            for e in target.slice)
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
        name = call_name(value) or ""
        return name in ("int", "float") or (isinstance(value, cst.Call) and not value.args
                                            and isinstance(value.func, cst.Attribute) and value.func.attr.value == "item")
    return False


def _state_write_plan(loc: Located) -> bool:
    """state-write's analysis takes the site and proves its bounds in range."""
    from mend.rules.state_write.screen import Plan, analyse, decide_bounds
    plan = analyse(loc.module.code, loc.line)
    return isinstance(plan, Plan) and decide_bounds(plan) is None


def _only_loop_exit(node: cst.If) -> bool:
    """An ``if`` without ``else`` whose body ends in ``break``: an early exit, the loop's
    trip count decided by the test."""
    body = _if_body(node)
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return node.orelse is None and isinstance(last, cst.Break)


def categorize(gb_type: str, loc: Located | None, op: str = "") -> str:
    """The taxonomy category of a break from its gb_type and the statement at its site (``op``:
    the ATen operator a "Data dependent operator" break names, when known)."""
    node = loc.node if loc is not None else None
    if gb_type in _BRANCH or gb_type.startswith("Data-dependent assertion"):
        if _numpy_constant_call(loc):
            return "numpy-constant"   # `if np.sum(plan) > 2:`: the test reads a constant traced as an array
        if isinstance(node, cst.While):
            return "data-dependent-loop"
        if isinstance(node, cst.Assert):
            return "raise-assert"
        if isinstance(node, cst.If):
            if _only_raise(_if_body(node)):
                return "raise-assert"
            if _only_loop_exit(node):
                # `for ...: if (cum >= 1).all(): break`: the loop's trip count is the tensor's
                return "data-dependent-loop"
            if _mutates_python_state(_if_body(node)):
                return "python-state-mutation"
        if _constant_buffer(loc):
            return "constant-buffer"   # the branch reads a value made from the class's int buffers
        return "data-dependent-branch"
    if gb_type == "Data dependent operator" and isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) \
            and call_name(node.value) == "torch._assert":
        return "raise-assert"   # torch._assert(C, msg): `if not C: raise AssertionError(msg)`, bool(C) the host read
    if (gb_type in _SKIPPED or gb_type == "repr() on tensor") and side_effect_call(loc):
        return "print-logging"   # a print/log/warn call, or one formatting a tensor's repr (`{t!r}`)
    if gb_type == "logging.Logger method not supported for non-export cases":
        return "print-logging"
    if gb_type == "Observed exception" and side_effect_call(loc) and any(
            isinstance(b.left, (cst.SimpleString, cst.ConcatenatedString)) for p in header_parts(node)
            for b in m.findall(p, m.BinaryOperation(operator=m.Modulo()))):
        return "print-logging"   # `print("%d %s" % (n, t))`: Dynamo raised TypeError tracing `%` with a tensor
    if gb_type in ("Data dependent operator", "torch.* op returned non-Tensor") and (
            _numpy_constant_call(loc) or _numpy_tolist(loc)):
        # big_bird's np.sum of a list: the constant traced as an array; `int(np.lcm(a, b))`
        # breaks as "torch.* op returned non-Tensor" (torch 2.13)
        return "numpy-constant"
    if _debug_host_work(gb_type, loc):
        return "debug-host-work"  # torch.jit.isinstance, an unused tensor repr, an RNG draw, Signature.bind
    if gb_type == "Data dependent operator" and _constant_buffer(loc, declined_too=True):
        # F.pad with pads made from the class's int buffers (mimi's `_pad1d`); where the rule
        # declines the class, its reason, not a dynamic-shape one (helper-78's c07)
        return "constant-buffer"
    if gb_type == "Data dependent operator" and loc is not None and not any(
            k in loc.code() for k in (".item(", ".tolist(", "int(", "float(", "bool(")):
        if op.startswith("aten._local_scalar_dense"):
            # a tensor read as a number by __index__/__int__ (a 0-d buffer as a view size or slice
            # bound): a scalar read, not an operator with a data-dependent shape (helper-100 m25)
            return "item-tolist"
        return "dynamic-shape-op"  # e.g. torch.nonzero: the op, not a scalar read, breaks
    if gb_type in _ITEM:
        if _item_in_effect_call(node):
            return "print-logging"   # print(t.item()), logger.info("%f", t.item()): deferred with the number
        if _host_tensor_check(node):
            return "tensor-check"
        if _item_assert(node):
            return "raise-assert"
        if gb_type == "Unsupported Tensor.item() call with capture_scalar_outputs=False" and _state_write(node) and (
                not _scalar_tensor_bound(loc) or _state_write_plan(loc)):
            return "state-write"  # a store with tensor slice bounds / a number kept on self (before scalar-tensor
            #                       only where state-write's analysis takes the site)
        if gb_type == "Unsupported Tensor.item() call with capture_scalar_outputs=False" and _scalar_tensor_bound(loc):
            return "scalar-tensor"
        if _constant_buffer(loc, declined_too=True):
            return "constant-buffer"   # `h[:, ::self.hop]`: a slice bound read from the class's int buffers (c08)
        return "item-tolist"
    if gb_type.startswith("Dynamic shape operator") and _mask_update(node):
        return "mask-update"
    if gb_type.startswith("Dynamic shape operator") and _nonzero_count(loc):
        return "item-tolist"   # the count of nonzero's rows, a host number: count_nonzero keeps it a tensor
    if gb_type.startswith("Dynamic shape operator") or "data-dependent output shape" in gb_type:
        return "dynamic-shape-op"
    low = gb_type.lower()
    if "numpy" in low:
        return "numpy"
    if "deepcopy" in low:
        return "deepcopy"
    if "isinstance" in low:
        return "isinstance-type-check"
    if "generator" in low or "tp_iter" in low or low.startswith("iter()"):
        return "generator"
    # `next(self._it)` on torch 2.11/2.12 ("Unsupported method call") and 2.14 ("C-implemented
    # special method ..."); 2.13 names tp_iternext (measured with noxfile.py, case 046)
    if gb_type in ("Unsupported method call", "C-implemented special method without VariableTracker model") \
            and loc is not None and re.search(r"\b(next|iter)\(", loc.code()):
        return "generator"
    if gb_type in _SKIPPED or gb_type in {"Tensor.random_ op", "torch.Generator method"} or "random" in low or \
            "data pointer" in low:   # `if t.data_ptr() != self._ptr:` -- a host address, not a value
        return "unsupported-builtin"
    if node is not None and any((call_name(c) or "").startswith(_RANDOM_CALLS)
                                for p in header_parts(node) for c in m.findall(p, m.Call())):
        # helper-72: `1.0 + random.uniform(-0.1, 0.1)` broke as "unimplemented builtin op on tensor
        # arguments" (torch 2.13), the frame skipped: a draw from Python's RNG all the same
        return "unsupported-builtin"
    if _self_attribute_write(node):
        return "module-attribute-write"
    if _hook_or_lock(gb_type, node):
        return "hook-or-lock"
    if gb_type == "Observed exception":
        return "traced-exception"
    return "other"


_HOOKS = re.compile(r"\.register_(forward|forward_pre|full_backward|full_backward_pre|backward|module_forward|"
                    r"module_forward_pre|state_dict|load_state_dict_post)_hook\(")


def _hook_or_lock(gb_type: str, node: cst.CSTNode | None) -> bool:
    """A module hook registered (``m.register_forward_hook(...)``), or a ``with`` over a name
    ending in ``lock`` (``threading.Lock``) that Dynamo refuses as a context manager."""
    if node is None:
        return False
    if isinstance(node, cst.With):
        names = [call_name(i.item) or (cst.Module([]).code_for_node(i.item)) for i in node.items]
        return gb_type == "Unsupported context manager" and any(n.lower().rstrip("()").endswith("lock") for n in names)
    return bool(_HOOKS.search(cst.Module([]).code_for_node(node)))
