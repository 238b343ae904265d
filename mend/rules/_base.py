"""The rule protocol: what a rule answers (:class:`Match`, :class:`Decline`,
:class:`RewriteResult`) and what it declares (:class:`Rule`, with its examples as
:class:`FixExample` / :class:`DeclineExample`). A module whose name starts with ``_`` is not
a rule: discovery (:mod:`mend.rules`) skips it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NamedTuple

if TYPE_CHECKING:
    import libcst as cst

    from mend.locate import Located


@dataclass
class Match:
    rule: str
    detail: str = ""


@dataclass
class Decline:
    rule: str | None
    reason: str


@dataclass
class RewriteResult:
    """A rewrite awaiting verification: the whole new module (``code``), the replaced lines
    of the input (``span``, 1-based, inclusive), what was done, and what a verifier must
    establish. ``obligations`` are data only (``{"kind": "same-shape", "target": "h",
    "lhs": "h * 2.0", "rhs": "h"}``...); ``predicates``: the original predicate sources of a
    predicated branch; ``edge_values``: constants the rewrite's behaviour turns on (a
    comparison's threshold), which the differential test draws, rounded to each input's
    dtype and their neighbours, as edge values.

    ``form``: which selection a predicated branch became (``"where"``, ``"cond"``; None for
    other rewrites), the candidate's name in :func:`mend.cost.choose`. ``cost_parts``: the
    parts of a two-arm branch whose work the cost model counts, as source that evaluates at
    the site, ``{"pred": expr, "sides": [[true-side exprs], [false-side exprs]]}`` (the
    values each side selects or returns); None where the site has no such two parts (an
    elif chain, tensor logic, hoisted setup), and the rule's own rewrite is then emitted.
    ``caveat``: words the pipeline adds to a differential-test decline of this candidate (why
    a form the rule would rather not use was tried), or None."""

    code: str
    span: tuple[int, int]
    detail: str
    obligations: list[dict] = field(default_factory=list)
    predicates: list[str] = field(default_factory=list)
    edge_values: list = field(default_factory=list)
    form: str | None = None
    cost_parts: dict | None = None
    caveat: str | None = None   # what a failed differential test of this candidate is read with


class FixExample(NamedTuple):
    """Source the rule must rewrite to exactly ``after``; the site is ``line``, or the rule's
    ``example_line(before)`` when None."""

    before: str
    after: str
    line: int | None = None


class DeclineExample(NamedTuple):
    """Source the rule must decline, with a reason containing ``reason``; the site is
    ``line``, or the rule's ``example_line(source)`` when None. ``static``: the matcher
    (a scan's verdict) declines it too; False where only the rewrite's analysis sees why
    (the matcher then accepts the site, and the rewrite declines it)."""

    source: str
    reason: str
    line: int | None = None
    static: bool = True


@dataclass(frozen=True)
class Rule:
    """A rewrite rule, declared by its package: ``RULE = Rule(...)`` in
    ``mend/rules/<name with - as _>/__init__.py``, found by discovery (no central table).

    ``match(loc)`` is a scan's static verdict on a located site; ``rewrite(module, line)``
    gives the new module with its proof obligations, or a decline. ``obligation_kinds``:
    every ``kind`` its rewrites can emit; ``required_kinds``: those that must be established
    at every verification level, ``--verify fast`` included; ``needs_facts``: its
    obligations read facts from a run of the candidate. ``fix_safety``: what is proved, what
    rests on checks, and when a rewrite is inference-only (its first paragraph is the
    summary ``mend rules`` lists); ``doc``: its documentation (``mend rules NAME``).
    ``alternatives(module, line)``: the other admissible forms of the site's rewrite besides
    ``rewrite``'s own (e.g. ``torch.cond`` where the rule emits ``torch.where``), each a
    :class:`RewriteResult` with its ``form``; never raises. A rule that has it also takes
    ``rewrite(module, line, form=...)`` (a :class:`Decline` when that form does not apply);
    ``mend fix`` verifies the alternatives the cost model would prefer and chooses
    (:mod:`mend.cost`). ``fallback(module, line)``: a second form of the rewrite that
    ``mend fix`` verifies only when the rule's own is declined by verification (not when it
    is withheld as unsafe): a :class:`RewriteResult`, or None / a :class:`Decline` when there
    is none (mask-update's row-mask form, for a mask the rule cannot tell apart by reading).
    ``fallback_when(reason)``: whether the fallback can answer a decline with that reason
    (None: any; predicated control flow's autocast-guarded form answers only the autocast
    leg's refutation). ``branch_outcomes``: whether a rewrite at an ``if`` is verified with
    the test forced both ways (the pipeline declines it when the test cannot be instrumented);
    False for a rule that keeps every branch and proves the test's value unchanged (numpy on
    constants in the test: the outcome is the original's on every input).
    ``forced_line(module, line)``: the line of an ``if`` after the site whose test the
    differential test forces both ways too (dead-host-work's debug text moves under its flag),
    or None.
    The examples (Fixit / pyupgrade style) generate ``tests/test_rules.py``; plain tuples
    are accepted and stored as :class:`FixExample` / :class:`DeclineExample`; a no-op
    example is source the rule leaves unchanged on every line."""

    name: str
    categories: tuple[str, ...]
    match: Callable[[Located], Match | Decline]
    rewrite: Callable[[cst.Module, int], RewriteResult | Decline]
    example_line: Callable[[str], int | None]
    obligation_kinds: frozenset[str]
    fix_safety: str
    doc: str
    required_kinds: frozenset[str] = frozenset()
    needs_facts: bool = True
    fix_examples: tuple[FixExample, ...] = ()
    decline_examples: tuple[DeclineExample, ...] = ()
    noop_examples: tuple[str, ...] = ()
    alternatives: Callable[[cst.Module, int], list[RewriteResult]] | None = None
    fallback: Callable[[cst.Module, int], RewriteResult | Decline | None] | None = None
    fallback_when: Callable[[str], bool] | None = None
    branch_outcomes: bool = True
    forced_line: Callable[[cst.Module, int], int | None] | None = None

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: normalise once, here
        put(self, "categories", tuple(self.categories))
        put(self, "obligation_kinds", frozenset(self.obligation_kinds))
        put(self, "required_kinds", frozenset(self.required_kinds))
        put(self, "fix_examples", tuple(FixExample(*e) for e in self.fix_examples))
        put(self, "decline_examples", tuple(DeclineExample(*e) for e in self.decline_examples))
        put(self, "noop_examples", tuple(self.noop_examples))
        if not self.required_kinds <= self.obligation_kinds:
            raise ValueError(f"rule {self.name}: required kinds {sorted(self.required_kinds - self.obligation_kinds)} "
                             "are not among its obligation kinds")
        if not self.categories or not self.fix_safety.strip() or not self.doc.strip():
            raise ValueError(f"rule {self.name}: categories, fix_safety and doc must not be empty")

    @property
    def module_name(self) -> str:
        """The package that declares the rule: its name with ``-`` as ``_``."""
        return self.name.replace("-", "_")

    @property
    def fix_safety_summary(self) -> str:
        """The first paragraph of :attr:`fix_safety`, on one line."""
        return " ".join(self.fix_safety.strip().split("\n\n")[0].split())

    def site(self, example: FixExample | DeclineExample | str) -> int | None:
        """The site line of an example: its own ``line``, else the rule's ``example_line``."""
        if isinstance(example, str):
            return self.example_line(example)
        if example.line is not None:
            return example.line
        return self.example_line(example[0])
