"""tensor-membership: the matcher. ``if v in t:`` on a tensor ``t`` breaks the graph inside
``Tensor.__contains__`` (its ``.item()``; on torch 2.13 Dynamo then cannot resume and runs
the rest of the function eagerly). The rule takes an ``if``/``elif`` whose whole test is
one ``v in t`` or ``v not in t`` whose container is not a Python literal."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from mend.locate import Located
from mend.rules._base import Decline, Match
from mend.rules._common import code_of, shared_wrapper

NAME = "tensor-membership"

# containers that are Python's own, whatever the element: `in` never reaches a tensor
_LITERAL = (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString,
            cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_ATOMIC = (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.Integer, cst.Float)


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


def membership(test: cst.BaseExpression) -> tuple[str, str, bool] | None:
    """``(element, container, negated)`` as source when ``test`` is one ``v in t`` /
    ``v not in t`` whose container is not a Python literal, else None."""
    test = _bare(test)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    op = test.comparisons[0].operator
    if not isinstance(op, (cst.In, cst.NotIn)):
        return None
    elem, cont = _bare(test.left), _bare(test.comparisons[0].comparator)
    if isinstance(cont, _LITERAL):
        return None

    def src(node):
        text = code_of(node).strip()
        return text if isinstance(node, _ATOMIC) else f"({text})"
    return src(elem), src(cont), isinstance(op, cst.NotIn)


def combined(test: cst.BaseExpression) -> str | None:
    """Why a test that holds a membership test on a non-literal container is not one the
    rule takes (it is combined with other tests), else None (one membership, or none)."""
    if membership(test) is not None:
        return None
    for comp in m.findall(test, m.Comparison()):
        if any(isinstance(t.operator, (cst.In, cst.NotIn)) and not isinstance(_bare(t.comparator), _LITERAL)
               for t in comp.comparisons):
            return (f"the test `{code_of(test).strip()[:60]}` combines a membership test with other tests: only an "
                    "`if` whose whole test is one `v in t` is rewritten")
    return None


class _Find(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int):
        super().__init__()
        self.line = line
        self.found: tuple[cst.If, list[cst.CSTNode]] | None = None
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is None and isinstance(node, cst.If) and \
                self.get_metadata(PositionProvider, node).start.line == self.line:
            self.found = (node, list(self.stack))
        self.stack.append(node)
        return self.found is None

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def if_with_ancestors(module: cst.Module, line: int) -> tuple[cst.If, list[cst.CSTNode]] | None:
    """The ``if`` or ``elif`` starting on ``line`` (a node of ``module`` itself) with its
    ancestors, outermost first, or None."""
    finder = _Find(line)
    shared_wrapper(module).visit(finder)
    return finder.found


def if_at(module: cst.Module, line: int) -> cst.If | None:
    """The ``if`` or ``elif`` starting on ``line``, or None."""
    found = if_with_ancestors(module, line)
    return found[0] if found else None


def match(loc: Located) -> Match | Decline:
    """A Match where :func:`rewrite` rewrites the membership ``if`` at ``loc``; elsewhere the
    category's generic reason (another rule's own reason is more specific)."""
    from mend.rules.tensor_membership.rewrite import rewrite
    from mend.taxonomy import UNFIXABLE_REASONS

    node = if_at(loc.module, loc.line)
    why = node is not None and combined(node.test)
    if why:
        return Decline(NAME, why)
    if node is None or membership(node.test) is None:
        return Decline(None, UNFIXABLE_REASONS["item-tolist"])
    try:
        result = rewrite(loc.module, loc.line)
    except Exception as exc:  # a scan must survive a rule bug; say what failed
        return Decline(NAME, f"the rewrite failed on this site ({type(exc).__name__}: {exc})")
    return result if isinstance(result, Decline) else Match(NAME, result.detail)
