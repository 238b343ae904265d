"""Which bindings of a builtin can reach a rewrite's guard (helper-79's c09: a `max=` parameter
of another function declined every numpy-constants site of the file). mend's screen
(libcst) and the verifier's re-check (ast) answer alike."""
from __future__ import annotations

import ast

import libcst as cst
import pytest

from mend.rules._bindings import bound_in_reach as mend_reach
from verifier.encoders.base import bound_in_reach as verifier_reach

NAMES = ("sum", "max", "min", "len", "type", "all", "list", "int")
CASES = [
    # another function's parameters and locals, a class attribute, an unrelated comprehension
    ('''import numpy as np
class M:
    min = 0.0
    def forward(self, x):
        z = [len for len in range(3)]
        return np.sum(x)
def clamp(x, min=0.0, max=1.0, type=2):
    all = 3
    return x
''', []),
    # the module's scope, the function's own parameter, `global` anywhere
    ('''import numpy as np
max = 3
def forward(x, sum=1):
    return np.sum(x)
def g():
    global list
    list = 2
''', ["list", "max", "sum"]),
    # a function around the site, and a comprehension variable around it
    ('''import numpy as np
def outer(int):
    def forward(xs):
        return [np.sum(x) for x in xs for len in x]
    return forward
''', ["int", "len"]),
    # a class body around the site with no function between: its names are seen
    ('''import numpy as np
class C:
    type = 1
    width = np.sum([1, 2])
''', ["type"]),
    # a walrus in a comprehension binds in the function around it (PEP 572)
    ('''import numpy as np
def forward(xs):
    ys = [(all := y) for y in xs]
    return np.sum(xs)
''', ["all"]),
    # a computed name: `globals()["sum"] = ...`, `builtins.max = ...` (helper-87)
    ('''import math
import numpy as np
globals()["sum"] = math.fsum
def forward(x):
    return np.sum(x)
''', sorted(NAMES)),
    ('''import builtins
import numpy as np
def forward(x):
    return np.sum(x)
''', sorted(NAMES)),
    # a star import may bring any name
    ('''from os import *
import numpy as np
def forward(x):
    return np.sum(x)
''', sorted(NAMES)),
]


class _Find(cst.CSTVisitor):
    def __init__(self):
        self.found = None

    def visit_Call(self, node):
        if cst.Module([]).code_for_node(node.func) == "np.sum" and self.found is None:
            self.found = node


@pytest.mark.parametrize("source, expected", CASES)
def test_mend_and_the_verifier_find_the_same_bindings_in_reach(source, expected):
    module = cst.parse_module(source)
    finder = _Find()
    module.visit(finder)
    assert mend_reach(module, finder.found, NAMES) == expected
    tree = ast.parse(source)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "np.sum")
    assert verifier_reach(tree, [call], NAMES) == expected
