"""numpy-constants: which sites the rule takes (``np.sum``/``np.prod``/``np.lcm``/``np.gcd`` calls in the
statement at a break site whose result only sizes an allocation, a ``range`` or an ``int``),
why it declines the others, and :func:`match`, a scan's verdict on a located site."""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from mend.locate import Located, header_parts
from mend.rules._base import Decline, Match
from mend.rules._bindings import _Bindings, _target_names, aliases, bindings, bound_in_reach, module_alias
from mend.rules._common import _same_line_host, code_of, dotted, import_block

NAME = "numpy-constants"

# numpy function -> (number of positional operands, the exact Python replacement)
FUNCS = {"sum": (1, "sum"), "prod": (1, "math.prod"), "lcm": (2, "math.lcm"), "gcd": (2, "math.gcd"),
         "max": (1, "max"), "min": (1, "min")}
# the reductions over a list of ints whose guard is sum's (a non-empty list of bounded ints)
LIST_FUNCS = ("sum", "max", "min")

# the guard's bounds: every operand (every list element for sum) in (-BOUND, BOUND), a
# list's length in (0, MAX_LEN); the verifier proves int64 cannot overflow under them.
# prod: every element in (0, BOUND) and the exact product below PROD_BOUND, so that every
# partial product (in any order: the elements are >= 1) is an int64 too
BOUND_TEXT = "2**31"
MAX_LEN_TEXT = "2**31"
PROD_BOUND_TEXT = "2**63"

# builtins the rewritten expression calls: a module that binds any of these names where the guard sees them
# would change what the guard or the replacement means
GUARD_BUILTINS = ("sum", "type", "list", "tuple", "int", "len", "all", "max", "min")

# allocations whose shape may hold a np.int64 or an int alike (observed by the verifier)
NUMPY_ALLOC = ("zeros", "ones", "empty", "full")
# methods of a tensor (and of a numpy array) whose sizes may hold a np.int64 or an int alike
RESHAPE_METHODS = ("view", "reshape")
TORCH_ALLOC = ("zeros", "ones", "empty", "full")

_ARRAY_MAKERS = ("array", "asarray", "arange", "tensor", "as_tensor", "from_numpy", "stack", "cat", "concatenate",
                 "zeros", "ones", "empty", "full", "linspace", "randn", "rand", "randint")


@dataclass
class Flow:
    """Where a numpy result may flow before its consumer: the function, the locals that hold it
    (the numpy local, and locals derived from it by int arithmetic), how many locals deep.
    The function's parent map, its bindings and the module's frame reader are computed once,
    when first asked, and shared by the deeper flows."""
    function: cst.FunctionDef
    module: cst.Module
    names: frozenset[str]
    depth: int = 0
    sizes: list[str] = field(default_factory=list)   # the size reads the value meets (int_term)
    cache: dict = field(default_factory=dict)
    receivers: list[str] = field(default_factory=list)   # of the `.view`/`.reshape` calls it sizes

    def parents(self) -> dict[int, cst.CSTNode]:
        if "parents" not in self.cache:
            finder = _Parents()
            self.function.visit(finder)
            self.cache["parents"] = finder.parent
        return self.cache["parents"]

    def bound(self, name: str) -> int:
        """How many times the function binds ``name`` (a parameter counts)."""
        if "binds" not in self.cache:
            fbinds = _Bindings(cst.Module(body=[]))
            self.function.visit(fbinds)
            self.cache["binds"] = fbinds.names
        return len(self.cache["binds"].get(name, []))

    def reader(self) -> str | None:
        """:func:`_frame_reader` of the module."""
        if "reader" not in self.cache:
            self.cache["reader"] = _frame_reader(self.module)
        return self.cache["reader"]

    def deeper(self, name: str) -> Flow:
        """The flow into the local ``name``, bound to int arithmetic on the value."""
        return Flow(self.function, self.module, self.names | {name}, self.depth + 1, self.sizes, self.cache,
                    self.receivers)

    def reads(self, name: str, target: cst.Name, np_names: set[str], torch_names: set[str],
              binds: dict) -> list[str] | str:
        """The consumer of every read of the local ``name`` in the function (its binding
        ``target`` aside), as :func:`_consumer` answers; what the first other read is, in words."""
        parents = self.parents()
        uses = []
        for n in _walk(self.function.body):
            if not _is_read(n, parents) or n.value != name or n is target:
                continue
            got, what = _consumer(n, parents, np_names, torch_names, binds, self)
            if got is None:
                return what
            uses.append(got)
        return uses


@dataclass
class Site:
    call: cst.Call                  # the numpy call to replace
    func: str                       # sum | lcm | gcd
    np_name: str                    # how the module spells numpy at the call (`np`)
    operands: list[cst.BaseExpression]
    consumer: str                   # what uses the result (`np.zeros shape`, `range`, `int`)
    size_type: str | None = None    # prod: `torch.Size` admitted too (`np.prod(h.shape[1:])`), when the
    #                                 module binds `torch` by `import torch` alone
    positive: bool = False          # lcm/gcd: the guard admits positive operands only (the result, >= 1,
    #                                 then reaches int arithmetic, where it may divide)
    sizes: tuple[str, ...] = ()     # size reads the value is compared or combined with (assumed ints)
    receivers: tuple[str, ...] = () # receivers of the `.view`/`.reshape` calls it sizes (assumed tensors or arrays)


@dataclass
class Plan:
    statement: cst.CSTNode
    sites: list[Site]
    import_math: bool = False       # `math` is unbound: the rewrite adds `import math` on an import line


# -- the screen --------------------------------------------------------------------------

class _Parents(cst.CSTVisitor):
    def __init__(self) -> None:
        self.stack: list[cst.CSTNode] = []
        self.parent: dict[int, cst.CSTNode] = {}
        self.calls: list[cst.Call] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.parent[id(node)] = self.stack[-1]
        if isinstance(node, cst.Call):
            self.calls.append(node)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _numpy_call(call: cst.Call, np_names: set[str]) -> tuple[str, str] | None:
    name = dotted(call.func) or ""
    root, _, rest = name.rpartition(".")
    if root in np_names and rest in FUNCS:
        return root, rest
    return None


def _alloc(call: cst.Call, arg: cst.Arg, np_names: set[str], torch_names: set[str]) -> str | None:
    """What ``arg`` of ``call`` is, when it is a shape argument of a known allocation."""
    name = dotted(call.func) or ""
    root, _, rest = name.rpartition(".")
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if root in np_names and rest in NUMPY_ALLOC:
        if (arg.keyword is None and not arg.star and positional and positional[0] is arg) or (
                arg.keyword is not None and arg.keyword.value == "shape"):
            return f"the shape of {name}"
    if root in torch_names and rest == "reshape" and ((arg.keyword is None and not arg.star and len(positional) > 1
                                                       and positional[1] is arg) or (
            arg.keyword is not None and arg.keyword.value == "shape")):
        return f"the shape sequence of {name}"    # an element of it only (perceiver's np.prod of sizes)
    if root in torch_names and rest in TORCH_ALLOC:
        if rest == "full" and arg.keyword is None and not arg.star and positional and positional[0] is arg:
            return f"the size of {name}"
        if rest != "full" and ((arg.keyword is None and not arg.star) or (
                arg.keyword is not None and arg.keyword.value == "size")):
            return f"the size of {name}"
    return None


def _method_size(call: cst.Call, arg: cst.Arg, np_names: set[str], torch_names: set[str], binds: dict,
                 flow: Flow | None) -> str | None:
    """What ``arg`` of ``call`` is, when it holds a size of a ``.view``/``.reshape`` method call
    (helper-78's c14, ``h.view(-1, total)``): a tensor's take np.int64 and int alike, through
    ``__index__``, and so does an array's ``reshape`` (an array's ``view`` reads np.int64 as a
    dtype). The sizes are separate arguments, every other one an int by its spelling (a
    TypeError names every argument's type: ``got (float, numpy.int64)``), or one tuple or list,
    the only argument. The receiver is appended to ``flow.receivers``: a tensor (an array too,
    for ``reshape``) by the method's name alone."""
    if flow is None or not isinstance(call.func, cst.Attribute) or call.func.attr.value not in RESHAPE_METHODS:
        return None
    if (dotted(call.func.value) or "").partition(".")[0] in np_names | torch_names or any(
            a.keyword is not None or a.star for a in call.args):
        return None
    if isinstance(arg.value, (cst.Tuple, cst.List)):
        if len(call.args) != 1:
            return None
    elif not all(a is arg or int_term(a.value, binds, flow.sizes) for a in call.args):
        return None
    flow.receivers.append(code_of(call.func.value).strip())
    return f"a size of `.{call.func.attr.value}()`"


# the consumers known to treat np.int64 and int alike, in words
ALIKE = ("an allocation's shape, a size of a `.view()`/`.reshape()` call, range(), int(), float() and a comparison with an int tested only for truth are "
         "known to treat them alike (reached through int arithmetic with literals, sizes and len(), too)")

# a comparison whose truth alone is used: np.int64 and int of one value compare alike with an int
TRUTH_TEST = "a comparison with an int, used only as a truth value (if/while/assert/conditional test)"
TRUTH = "a truth value only (an if/while/assert/conditional test, under not/and/or at most)"
_ORDER_OPS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
_SIZE_METHODS = ("size", "dim", "numel")


def _int_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        expr = expr.expression
    return isinstance(expr, cst.Integer)


def int_term(expr: cst.BaseExpression, binds: dict, sizes: list[str] | None = None) -> bool:
    """``expr`` is an int by its spelling: an integer literal (signed), ``len(X)`` (always an
    int), or a size read with a literal index (``X.shape[k]``, ``X.size(k)``, ``X.ndim``,
    ``X.dim()``, ``X.numel()``; not ``X.size()``, a torch.Size, nor ``X.shape[i]`` for a
    non-literal ``i``, which may be a slice: helper-79). A size read is an int only where ``X``
    is a tensor or an array, which the spelling cannot show: each is appended to ``sizes``
    (the rewrite's ``numpy-size-operands`` obligation, left unknown: an unsafe fix)."""
    if _int_literal(expr):
        return True
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        ok = len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and _int_literal(
            expr.slice[0].slice.value)
    elif isinstance(expr, cst.Attribute):
        ok = expr.attr.value == "ndim"
    elif isinstance(expr, cst.Call) and not any(a.star or a.keyword is not None for a in expr.args):
        name = dotted(expr.func) or ""
        if name == "len":
            return "len" not in binds and len(expr.args) == 1
        # `x.size()` alone is a torch.Size, which numpy compares elementwise where int raises
        want = 1 if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" else 0
        ok = isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SIZE_METHODS and len(
            expr.args) == want and all(_int_literal(a.value) for a in expr.args)
    else:
        ok = False
    if ok and sizes is not None:
        sizes.append(code_of(expr).strip())
    return ok


def _truth_comparison(node: cst.CSTNode, parents: dict[int, cst.CSTNode], binds: dict,
                      sizes: list[str] | None = None) -> str | None:
    """None when ``node`` is an operand of a comparison with ints (``==``, ``!=``, ``<``, ``<=``,
    ``>``, ``>=``) whose result is only tested for truth: the test of an ``if``/``elif``,
    ``while``, ``assert`` or conditional expression, possibly under ``not``/``and``/``or``
    (np.bool_ and bool test alike; the other operands' values decide nothing else). Else why not."""
    comp = parents.get(id(node))
    if isinstance(comp, cst.ComparisonTarget):
        comp = parents.get(id(comp))
    if not isinstance(comp, cst.Comparison):
        return "a comparison"
    if not all(isinstance(t.operator, _ORDER_OPS) for t in comp.comparisons):
        return "a comparison by `is`, `in` or their negation"
    others = [e for e in (comp.left, *(t.comparator for t in comp.comparisons)) if e is not node]
    bad = next((e for e in others if not int_term(e, binds, sizes)), None)
    if bad is not None:
        return (f"a comparison with `{code_of(bad).strip()}`, which is not an integer literal, a size "
                "(`.shape[k]`, `.size(k)`, `.ndim`, `.dim()`, `.numel()`) or `len()`: np.int64 and int may compare "
                "differently with it")
    if _truth_only(comp, parents):
        return None
    return "a comparison whose result is kept as a value (not only tested in an if, while, assert or conditional)"


def _truth_only(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """``node``'s value is only tested for truth: it is the test of an if/elif, while, assert or
    conditional expression, possibly under ``not``/``and``/``or`` (np.int64 and int, np.bool_
    and bool of one value test alike)."""
    child, up = node, parents.get(id(node))
    while isinstance(up, cst.BooleanOperation) or (isinstance(up, cst.UnaryOperation) and isinstance(up.operator,
                                                                                                     cst.Not)):
        child, up = up, parents.get(id(up))
    return isinstance(up, (cst.If, cst.While, cst.IfExp, cst.Assert)) and up.test is child


# int arithmetic the value may pass through before its consumer: np.int64 and int agree on
# +, -, *, //, % wherever no int64 step overflows and no divisor is 0 (the verifier bounds
# every step from the guard and decides both); a chain of at most _MAX_DEPTH locals
_ARITH_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
ARITH = "int arithmetic (+, -, *, //, %)"
_MAX_DEPTH = 3


def int_expr(expr: cst.BaseExpression, binds: dict, names: frozenset[str], sizes: list[str] | None = None) -> bool:
    """``expr`` is an int by its spelling: :func:`int_term`, a local in ``names`` (holding the
    numpy result), or ``+ - * // %`` of those."""
    if int_term(expr, binds, sizes) or (isinstance(expr, cst.Name) and expr.value in names):
        return True
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITH_OPS) and int_expr(
        expr.left, binds, names, sizes) and int_expr(expr.right, binds, names, sizes)


def _derived(assign: cst.Assign, flow: Flow, np_names: set[str], torch_names: set[str],
             binds: dict) -> tuple[str | None, str]:
    """The consumers of a local bound to int arithmetic on the numpy result (``pad = (m - n % m)
    % m``): every read of it, as :func:`_consumer` answers; else None and why."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None, "an assignment to other than one plain name"
    name = assign.targets[0].target.value
    if flow.depth >= _MAX_DEPTH:
        return None, f"`{name}`, a chain of more than {_MAX_DEPTH} locals"
    if flow.bound(name) != 1 or _nested_scope(flow.function, assign):
        return None, f"`{name}`, bound more than once in the function (or in a nested scope)"
    if flow.reader():
        return None, f"`{name}`, a local the module can read by name through {flow.reader()}"
    uses = flow.deeper(name).reads(name, assign.targets[0].target, np_names, torch_names, binds)
    if isinstance(uses, str):
        return None, f"`{name}`, which is read by {uses}"
    if not uses:
        return None, f"`{name}`, which is never read"
    read_as = f"`{name}`, read only as " + ", ".join(dict.fromkeys(uses))
    return read_as, read_as


def _consumer(node: cst.CSTNode, parents: dict[int, cst.CSTNode], np_names: set[str], torch_names: set[str],
              binds: dict, flow: Flow | None = None) -> tuple[str | None, str]:
    """(the consumer when it treats np.int64 and int alike, else None; what it is, in words).
    With ``flow``, int arithmetic with int terms and the value's own locals is followed, into
    a local it is bound to."""
    parent = parents.get(id(node))
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _ARITH_OPS) and flow is not None:
        other = parent.right if parent.left is node else parent.left
        if not int_expr(other, binds, flow.names, flow.sizes):
            return None, (f"arithmetic with `{code_of(other).strip()}`, which is not built from integer literals, "
                          "sizes, len() and the value itself")
        got, what = _consumer(parent, parents, np_names, torch_names, binds, flow)
        return (got if got is None or got.startswith(ARITH) else f"{ARITH}, then {got}"), what
    if isinstance(parent, cst.Assign) and isinstance(node, cst.BinaryOperation) and flow is not None \
            and parent.value is node:
        return _derived(parent, flow, np_names, torch_names, binds)
    if isinstance(parent, cst.Element):
        seq = parents.get(id(parent))
        arg = parents.get(id(seq)) if isinstance(seq, (cst.Tuple, cst.List)) else None
        call = parents.get(id(arg)) if isinstance(arg, cst.Arg) else None
        if isinstance(call, cst.Call) and call.args and any(a is arg for a in call.args):
            what = _alloc(call, arg, np_names, torch_names) or _method_size(call, arg, np_names, torch_names,
                                                                              binds, flow)
            if what:
                return what, what
        return None, "an element of a tuple or list that is not the shape of a known allocation"
    if isinstance(parent, cst.Arg):
        call = parents.get(id(parent))
        if isinstance(call, cst.Call):
            what = _alloc(call, parent, np_names, torch_names) or _method_size(call, parent, np_names, torch_names,
                                                                                 binds, flow)
            # a bare number is a torch size only as a positional size of zeros/ones/empty: `full`'s
            # size and `size=` want a sequence, and their TypeError names the type (a review)
            bare_torch_ok = not (what or "").startswith(("the size of", "the shape sequence of")) or (
                (what or "").startswith("the size of") and parent.keyword is None
                and not (dotted(call.func) or "").endswith(".full"))
            if what and bare_torch_ok:
                return what, what
            name = dotted(call.func) or ""
            plain = parent.keyword is None and not parent.star
            if name in ("int", "float") and len(call.args) == 1 and plain and name not in binds:
                return f"{name}()", f"{name}()"   # float(np.int64(k)) == float(k): both round k once (helper-64)
            if name == "range" and plain and 1 <= len(call.args) <= 3 and all(
                    a.keyword is None and not a.star for a in call.args) and "range" not in binds:
                return "range()", "range()"
            return None, f"an argument of `{code_of(call.func).strip()}`"
    if _truth_only(node, parents):   # `if np.min(sizes):`, `if not m:` (helper-79)
        return TRUTH, TRUTH
    if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
        return None, "arithmetic"
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
        why = _truth_comparison(node, parents, binds, flow.sizes if flow is not None else None)
        if why is None:
            return TRUTH_TEST, TRUTH_TEST
        return None, why
    if isinstance(parent, cst.BooleanOperation):
        return None, "a comparison or boolean test"
    if isinstance(parent, cst.Return):
        return None, "the return value"
    if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr)):
        return None, "an assignment"
    return None, f"`{type(parent).__name__}`"


def _operand_decline(func: str, operands: list[cst.BaseExpression], function: cst.FunctionDef | None,
                     np_names: set[str], torch_names: set[str]) -> str | None:
    """Why the operands are visibly not Python ints (or a non-empty list of them), else None."""
    makers = np_names | torch_names

    def array_call(expr) -> str | None:
        if isinstance(expr, cst.Call):
            name = dotted(expr.func) or ""
            root = name.split(".")[0]
            if root in makers or name.rsplit(".", 1)[-1] in _ARRAY_MAKERS or name.endswith(".numpy"):
                return name
        return None

    assigned: dict[str, list[cst.BaseExpression]] = {}
    if function is not None:
        for node in _walk(function.body):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    for n in _target_names(t.target):
                        assigned.setdefault(n, []).append(node.value)
    for expr in operands:
        what = array_call(expr)
        if what is None and isinstance(expr, cst.Name):
            what = next((array_call(v) for v in assigned.get(expr.value, []) if array_call(v)), None)
        if what is None and isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):
            what = next((array_call(v) for v in assigned.get(expr.value.value, []) if array_call(v)), None)
        if what is not None:
            return (f"the operand `{code_of(expr).strip()}` is an array or tensor (from `{what}`), not Python "
                    f"ints: np.{func} of it is array arithmetic, not a constant")
        if isinstance(expr, (cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return f"the operand `{code_of(expr).strip()}` is not an integer constant"
        if func in LIST_FUNCS and isinstance(expr, cst.Tuple):
            return "the operand is a tuple: the guard admits only a list of Python ints"
        if func in ("sum", "prod", "max", "min") and isinstance(expr, (cst.List, cst.Tuple)):
            kind = "list" if isinstance(expr, cst.List) else "tuple"
            if not expr.elements and func in ("max", "min"):
                return (f"the operand is an empty {kind}: np.{func} of it raises ValueError with numpy's message, "
                        f"{func}([]) with another")
            if not expr.elements:
                empty = {"sum": ("0.0", "sum([])", "the int 0"), "prod": ("1.0", "math.prod([])", "the int 1")}[func]
                return (f"the operand is an empty {kind}: np.{func} of it is float64 {empty[0]} while {empty[1]} is "
                        f"{empty[2]} (an np.zeros shape of the float raises TypeError; the rewrite's int would not)")
            bad = next((el.value for el in expr.elements if isinstance(el.value, (
                cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))), None)
            if bad is not None:
                return (f"the {kind} holds `{code_of(bad).strip()}`, not an integer: np.{func} of floats "
                        f"{'rounds and ' if func in ('sum', 'prod') else ''}returns float64, unlike Python's "
                        f"{FUNCS[func][1]}")
    return None


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def screen(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> Plan | Decline:
    """The rewrite plan for the statement ``node`` at a break site, or why it is declined."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    if module is None:
        return Decline(NAME, "the statement is not inside a module")
    binds = bindings(module)
    np_names = aliases(binds, "numpy")
    torch_names = aliases(binds, "torch")
    finder = _Parents()
    for part in header_parts(node):
        part.visit(finder)
        finder.parent[id(part)] = node     # an if/while test's statement: a truth-test consumer
    function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    local = None
    if not any(_numpy_call(c, np_names) for c in finder.calls) and function is not None:
        # `width = np.sum(plan)` on an earlier line, read here: the break is where the array
        # sizes something; the call to replace is the local's one binding
        local = _local_binding(node, finder.parent, function, np_names, torch_names, binds, module)
        if isinstance(local, Decline):
            return local
        if local is not None:
            finder = _Parents()
            local.assign.visit(finder)
    calls, spelled = [], []
    for call in finder.calls:
        name = dotted(call.func) or ""
        root, _, rest = name.rpartition(".")
        if rest in FUNCS and root and "." not in root:
            spelled.append((root, rest, call))
        hit = _numpy_call(call, np_names)
        if hit:
            calls.append((hit, call))
    if not calls:
        if spelled:
            root, rest, _ = spelled[0]
            return Decline(NAME, f"`{root}` is not bound to numpy by a top-level `import numpy as {root}` alone "
                           f"(it is bound otherwise, or also otherwise), so `{root}.{rest}` may not be numpy's")
        other = sorted({(dotted(c.func) or "").rpartition(".")[2] for c in finder.calls
                        if (dotted(c.func) or "").rpartition(".")[0] in np_names})
        return Decline(NAME, "the statement calls no numpy sum, prod, lcm, gcd, max or min" + (
            f" (it calls numpy's {', '.join(other)}, which the rule does not rewrite: its Python form, such as "
            "`list(itertools.accumulate(X))` for `np.cumsum(X).tolist()` of a list of ints, is not implemented)"
            if other else ""))
    # where each guard will sit (a comprehension's variable too); another function's `max=` cannot reach it
    rebound = sorted({n for _, call in calls for n in bound_in_reach(module, call, GUARD_BUILTINS)})
    if rebound:
        return Decline(NAME, f"the module binds `{rebound[0]}` where the rewritten expression would see it (at the "
                       "top level, in this function or one around it, or by global/nonlocal), and calls it as a builtin")
    # `math` unbound: the rewrite imports it on an existing import line (no line moves);
    # bound otherwise (a variable, `from x import math`): `math.lcm` may not be the stdlib's
    math_imported = module_alias(binds, "math", "math")
    math_free = not math_imported and "math" not in binds and "*" not in binds and _import_line(module) is not None
    sites, first_decline = [], None
    for (np_name, func), call in calls:
        n_ops, repl = FUNCS[func]
        args = list(call.args)
        if len(args) != n_ops or any(a.keyword is not None or a.star for a in args):
            first_decline = first_decline or (
                f"`{code_of(call).strip()}` does not pass exactly {n_ops} positional operand{'s' * (n_ops > 1)} "
                "(an axis, dtype or other argument changes what it computes)")
            continue
        if "\n" in code_of(call).strip():
            # the guarded form is written on one line: every later line would move, and
            # tracebacks, warnings and log records name lines (an adversarial review)
            first_decline = first_decline or (f"`{' '.join(code_of(call).split())[:60]}` spans several lines; the "
                                              "rewrite would join them and move every later line of the file")
            continue
        operands = [a.value for a in args]
        why = _operand_decline(func, operands, function, np_names, torch_names)
        if why:
            first_decline = first_decline or why
            continue
        if local is not None and call is local.assign.value:
            consumer, what, sizes, receivers = local.consumer, local.consumer, local.sizes, local.receivers
        else:
            flow = Flow(function, module, frozenset()) if function is not None else None
            consumer, what = _consumer(call, finder.parent, np_names, torch_names, binds, flow)
            sizes, receivers = (tuple(flow.sizes), tuple(flow.receivers)) if flow is not None else ((), ())
        if consumer is None:
            first_decline = first_decline or (
                f"the result of `{code_of(call).strip()}` feeds {what}: the rewrite's result is an int where "
                f"np.{func} gives np.int64, and only {ALIKE}")
            continue
        if repl.startswith("math.") and not (math_imported or math_free):
            first_decline = first_decline or (f"the module binds `math` otherwise than by a top-level `import math` "
                                               f"alone (or has no import line to add it to), which `{repl}` needs")
            continue
        sites.append(Site(call, func, np_name, operands, consumer,
                          "torch.Size" if func == "prod" and "torch" in torch_names else None,
                          positive=func in ("lcm", "gcd") and ARITH in consumer, sizes=tuple(dict.fromkeys(sizes)),
                          receivers=tuple(dict.fromkeys(receivers))))
    if not sites:
        return Decline(NAME, first_decline)
    return Plan(local.assign if local is not None else node, sites, import_math=not math_imported and any(FUNCS[s.func][1].startswith("math.")
                                                                  for s in sites))


@dataclass
class Local:
    assign: cst.Assign      # `NAME = np.f(...)`, the local's only binding in the function
    name: str
    consumer: str           # its reads, in words (`the size of torch.zeros`, ...)
    sizes: tuple[str, ...] = ()   # the size reads its flow meets
    receivers: tuple[str, ...] = ()   # the `.view`/`.reshape` receivers it sizes


# what can read a function's locals by name, where the rewrite's int would show: these
# builtins named at all (`grab = locals` too), frame and closure attributes, the modules that
# hand out frames (an adversarial review reached the local through each); callees in other
# modules stay an assumption
_INTROSPECTION = ("locals", "vars", "eval", "exec", "__builtins__")
_FRAME_ATTRS = ("_getframe", "currentframe", "f_locals", "f_back", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
                "__closure__", "cell_contents", "getouterframes", "getinnerframes")
_FRAME_MODULES = ("inspect", "builtins", "traceback", "__builtins__")


def _frame_reader(module: cst.Module) -> str | None:
    """Where the module can read a frame's locals by name (see _INTROSPECTION), else None."""
    for node in _walk(module):
        if isinstance(node, cst.Name) and node.value in _INTROSPECTION:
            return f"`{node.value}`"
        if isinstance(node, cst.Attribute) and node.attr.value in _FRAME_ATTRS:
            return f"`.{node.attr.value}`"
        if isinstance(node, cst.Import) and any((dotted(a.name) or "").split(".")[0] in _FRAME_MODULES
                                                for a in node.names):
            return "an import of " + ", ".join(dotted(a.name) or "" for a in node.names)
        if isinstance(node, cst.ImportFrom) and (dotted(node.module) or "").split(".")[0] in _FRAME_MODULES:
            return f"an import from {dotted(node.module)}"
    return None


def _local_binding(node: cst.CSTNode, parents: dict[int, cst.CSTNode], function: cst.FunctionDef,
                   np_names: set[str], torch_names: set[str], binds: dict,
                   module: cst.Module) -> Local | Decline | None:
    """The ``NAME = np.f(...)`` binding of a local the statement ``node`` reads, when the
    rule can take it: bound there alone in the function (no other assignment, loop target,
    walrus, ``del``, parameter or ``global``), and every read of it, anywhere in the function,
    a consumer that treats np.int64 and int alike. None when the statement reads no such
    local; a Decline, naming the read or binding, when it reads one the rule cannot take."""
    facts = Flow(function, module, frozenset())   # the function's bindings and parents, the module's reader
    for name, mine in _numpy_locals(node, parents, function, np_names):
        assign = mine[0]
        if facts.bound(name) != 1 or len(mine) != 1:
            return Decline(NAME, f"`{name}`, the result of `{code_of(assign.value).strip()}`, is bound more than "
                           "once in the function (or is a parameter): which value a read sees is not one call's")
        if _nested_scope(function, assign):
            return Decline(NAME, f"`{name} = ...` sits in a nested function, lambda or class")
        if facts.reader():
            return Decline(NAME, f"the module can read the local `{name}` by name through {facts.reader()} "
                           "(locals(), a frame or a closure cell), where it would see an int instead of the np.int64 "
                           "it was")
        flow = Flow(function, module, frozenset({name}), cache=facts.cache)
        uses = flow.reads(name, assign.targets[0].target, np_names, torch_names, binds)
        if isinstance(uses, str):
            return Decline(NAME, f"`{name}` (`{code_of(assign.value).strip()}`) is also read by {uses}: the "
                           "rewrite's result is an int where the numpy call gives np.int64, and only " + ALIKE)
        return Local(assign, name, f"`{name}`, read only as " + ", ".join(dict.fromkeys(uses)), tuple(flow.sizes),
                     tuple(flow.receivers))
    return None


def _is_read(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """``node`` is a name in a load or store position: not an attribute's name (``x.width``) nor
    a keyword argument's (``f(width=3)``)."""
    parent = parents.get(id(node))
    return isinstance(node, cst.Name) and not (isinstance(parent, cst.Attribute) and parent.attr is node) and not (
        isinstance(parent, cst.Arg) and parent.keyword is node)


def _numpy_locals(node: cst.CSTNode, parents: dict[int, cst.CSTNode], function: cst.FunctionDef,
                  np_names: set[str]) -> list[tuple[str, list[cst.Assign]]]:
    """The locals the statement ``node`` reads that its function binds by ``NAME = np.f(...)``,
    directly or through locals bound to int arithmetic on them (``m = np.lcm(a, b)``, ``pad = (m
    - n % m) % m``, ``int(pad)`` read here: ``m``), each with those assignments, in the order the
    statement reads them."""
    read = [n.value for part in header_parts(node) for n in _walk(part) if _is_read(n, parents)]
    plain = [s for s in _walk(function.body) if isinstance(s, cst.Assign) and len(s.targets) == 1
             and isinstance(s.targets[0].target, cst.Name)]
    assigns = [s for s in plain if isinstance(s.value, cst.Call) and _numpy_call(s.value, np_names)]
    arith = {}
    for s in plain:
        if isinstance(s.value, cst.BinaryOperation):
            arith.setdefault(s.targets[0].target.value, []).extend(
                n.value for n in _walk(s.value) if isinstance(n, cst.Name))

    def sources(name: str, depth: int) -> list[str]:
        if any(a.targets[0].target.value == name for a in assigns):
            return [name]
        if depth >= _MAX_DEPTH:
            return []
        return [src for n in dict.fromkeys(arith.get(name, ())) if n != name for src in sources(n, depth + 1)]

    found = dict.fromkeys(src for name in dict.fromkeys(read) for src in sources(name, 0))
    return [(name, [a for a in assigns if a.targets[0].target.value == name]) for name in found]


def reads_numpy_local(node: cst.CSTNode, ancestors: list[cst.CSTNode]) -> bool:
    """The statement reads a local of its function bound by ``NAME = np.sum/prod/lcm/gcd(...)``
    (the taxonomy's question: is the break's cause a numpy call on another line; whether the
    rule can take it is the rule's)."""
    module = next((a for a in ancestors if isinstance(a, cst.Module)), None)
    function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if module is None or function is None:
        return False
    finder = _Parents()
    for part in header_parts(node):
        part.visit(finder)
    return bool(_numpy_locals(node, finder.parent, function, aliases(bindings(module), "numpy")))


def _nested_scope(function: cst.FunctionDef, target: cst.CSTNode) -> bool:
    """``target`` sits inside a function, lambda or class nested in ``function``."""
    def walk(node, nested):
        if node is target:
            return nested
        for child in node.children:
            found = walk(child, nested or isinstance(child, (cst.FunctionDef, cst.Lambda, cst.ClassDef)))
            if found is not None:
                return found
        return None
    return bool(walk(function.body, False))


def _import_line(module: cst.Module) -> int | None:
    """The top-level import line ``import math`` can share, so that no line moves."""
    body = list(module.body)
    host = _same_line_host(body, import_block(body)[0])
    if host is None or not all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in body[host].body):
        return None
    return host


def match(loc: Located) -> Match | Decline:
    plan = screen(loc.node, loc.ancestors)
    if isinstance(plan, Decline):
        return plan
    done = ", ".join(f"np.{s.func} -> {FUNCS[s.func][1]} ({s.consumer})" for s in plan.sites)
    bounds = "(0, 2**31)" if all(s.positive for s in plan.sites) else "(-2**31, 2**31)"
    return Match(NAME, f"{done}, under a guard that keeps the numpy call unless every operand is a Python int "
                 f"in {bounds}")
