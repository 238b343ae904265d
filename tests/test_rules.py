"""Every registered rule, tested from its own declaration (Fixit's generated tests).

Generated from each rule's examples: every FIX example is rewritten to exactly its expected
text at its site, with obligation kinds the rule declares, and the matcher accepts the
site; every DECLINE example is declined with its reason, by the rewrite and (unless the
example says only the rewrite's analysis sees it) by the matcher with the same reason;
every NOOP example is left alone on every line, by the rewrite and by the matcher.

Also the registry (discovery, names, categories), the declarations (fix safety,
obligation kinds), and ``mend rules``.
"""
from __future__ import annotations

import dataclasses
import itertools
import pkgutil
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

import mend.rules
from mend.cli import main
from mend.locate import locate
from mend.rules import RULE_FOR_CATEGORY, RULES, Decline, Match, RewriteResult, Rule, categories, discover, match_site
from mend.taxonomy import CATEGORIES

RULES_DIR = Path(mend.rules.__file__).parent
_ids = itertools.count()


def _write(tmp_path: Path, code: str) -> str:
    path = tmp_path / f"rule_example_{next(_ids)}.py"
    path.write_text(code)
    return str(path)


def _cases(attr: str, tag: str) -> list:
    return [pytest.param(rule, ex, id=f"{rule.module_name}-{tag}{i}")
            for rule in RULES.values() for i, ex in enumerate(getattr(rule, attr))]


FIX = _cases("fix_examples", "fix")
DECLINE = _cases("decline_examples", "decline")
NOOP = _cases("noop_examples", "noop")


# -- generated from the examples ---------------------------------------------------------


@pytest.mark.parametrize("rule, ex", FIX)
def test_fix_example(rule: Rule, ex):
    line = rule.site(ex)
    res = rule.rewrite(cst.parse_module(ex.before), line)
    assert isinstance(res, RewriteResult), res
    assert res.code == ex.after
    # the span is the site's statement, or runs from a binding the rule rewrote above it (or is that
    # binding, scalar-tensor's local form); a
    # hoisted setup check is rewritten at the calls of the function the site is in
    # (scalar-tensor rewrites the value's binding and its reads, wherever the site is: a
    # helper's return, a caller, or the callee a read is passed to)
    assert res.span[0] == line or (res.span[0] < line <= res.span[1] and rule.name == "numpy-constants") or (
        rule.name == "scalar-tensor" and ex.before.splitlines()[res.span[0] - 1] !=
        res.code.splitlines()[res.span[0] - 1]) or (
        rule.name == "setup-guard" and not res.span[0] <= line <= res.span[1])
    compile(res.code, "<mended>", "exec")
    kinds = [o["kind"] for o in res.obligations]
    assert kinds and set(kinds) <= rule.obligation_kinds, set(kinds) - rule.obligation_kinds


@pytest.mark.parametrize("rule, ex", FIX)
def test_matcher_accepts_fix_example(rule: Rule, ex, tmp_path):
    verdict = rule.match(locate(_write(tmp_path, ex.before), rule.site(ex)))
    assert isinstance(verdict, Match), verdict
    assert verdict.rule == rule.name


@pytest.mark.parametrize("rule, ex", DECLINE)
def test_decline_example(rule: Rule, ex):
    res = rule.rewrite(cst.parse_module(ex.source), rule.site(ex))
    assert isinstance(res, Decline), res.code
    assert res.rule == rule.name
    assert ex.reason in res.reason


@pytest.mark.parametrize("rule, ex", DECLINE)
def test_matcher_agrees_on_decline_example(rule: Rule, ex, tmp_path):
    line = rule.site(ex)
    loc = locate(_write(tmp_path, ex.source), line)
    if loc is None:  # nothing a scan could report there
        return
    verdict = rule.match(loc)
    if not ex.static:  # only the rewrite's analysis sees why
        assert isinstance(verdict, Match), verdict
        return
    assert isinstance(verdict, Decline), verdict
    assert verdict.reason == rule.rewrite(cst.parse_module(ex.source), line).reason


@pytest.mark.parametrize("rule, source", NOOP)
def test_noop_example(rule: Rule, source, tmp_path):
    path = _write(tmp_path, source)
    for line in range(1, source.count("\n") + 1):
        res = rule.rewrite(cst.parse_module(source), line)
        assert isinstance(res, Decline), f"line {line} rewritten:\n{res.code}"
        loc = locate(path, line)
        if loc is not None:
            assert isinstance(rule.match(loc), Decline), line


# -- the registry ------------------------------------------------------------------------


def test_every_rule_package_is_registered_under_its_own_name():
    packages = {m.name for m in pkgutil.iter_modules([str(RULES_DIR)]) if not m.name.startswith("_")}
    assert packages == {rule.module_name for rule in RULES.values()}
    for name, rule in RULES.items():
        assert rule.name == name and rule.module_name == name.replace("-", "_")
        assert sys.modules[f"mend.rules.{rule.module_name}"].RULE is rule
        assert rule.doc == sys.modules[f"mend.rules.{rule.module_name}"].__doc__


def test_each_category_lists_the_rules_that_serve_it():
    served = [c for rule in RULES.values() for c in rule.categories]
    assert RULE_FOR_CATEGORY == {c: tuple(r.name for r in RULES.values() if c in r.categories)
                                 for rule in RULES.values() for c in rule.categories}
    assert set(served) <= set(CATEGORIES)


def test_every_rule_declares_fix_safety_obligations_and_examples():
    for rule in RULES.values():
        assert rule.fix_safety_summary and len(rule.fix_safety) > len(rule.fix_safety_summary), rule.name
        assert rule.doc.strip() and rule.obligation_kinds, rule.name
        assert rule.required_kinds <= rule.obligation_kinds, rule.name
        assert rule.fix_examples and rule.decline_examples and rule.noop_examples, rule.name


def test_every_declared_obligation_kind_is_exercised_by_a_fix_example():
    """The declaration is exact: no kind is declared that no example produces (by the rule's
    rewrite or, for a rule with one, its second form)."""
    for rule in RULES.values():
        emitted = {o["kind"] for ex in rule.fix_examples
                   for o in rule.rewrite(cst.parse_module(ex.before), rule.site(ex)).obligations}
        for ex in rule.fix_examples if rule.fallback else ():
            second = rule.fallback(cst.parse_module(ex.before), rule.site(ex))
            emitted |= {o["kind"] for o in getattr(second, "obligations", ())}
        if rule.name == "tensor-membership":
            # it predicates the branch with predicated-control-flow, or a branch that only raises
            # with predicated-validation, whose every kind it may emit (those rules' examples
            # exercise them); its own kind, and the validation form, must be exercised here
            own = rule.obligation_kinds - RULES["predicated-control-flow"].obligation_kinds \
                - RULES["predicated-validation"].obligation_kinds
            assert own == {"membership-any"} and own <= emitted
            assert "guarded-check" in emitted and "where-equals-ite" in emitted
            assert emitted <= rule.obligation_kinds
            continue
        assert emitted == rule.obligation_kinds, (rule.name, rule.obligation_kinds - emitted)


def test_today_s_required_kinds_and_facts():
    assert RULES["host-count-reduction"].required_kinds == {"count-compare-exact", "count-tolist-1d",
                                                            "count-uses-keep-type"}
    assert RULES["predicated-validation"].required_kinds == {"state-unchanged-on-raise", "guarded-check",
                                                                  "guarded-item-check"}
    assert RULES["predicated-control-flow"].required_kinds == {"fall-through-cannot-raise", "loop-facts-agree"}
    assert not RULES["deferred-side-effects"].required_kinds
    assert {n: RULES[n].needs_facts for n in ("predicated-control-flow", "predicated-validation",
                                              "host-count-reduction", "deferred-side-effects")} == {
        "predicated-control-flow": True, "predicated-validation": True, "host-count-reduction": True,
        "deferred-side-effects": True}   # the trace of the graph that replays the call


def test_match_site_routes_by_category(tmp_path):
    rule = RULES["predicated-control-flow"]
    ex = rule.fix_examples[0]
    loc = locate(_write(tmp_path, ex.before), rule.site(ex))
    assert isinstance(match_site("data-dependent-branch", loc), Match)
    assert match_site("numpy", loc) == Decline(None, mend.taxonomy.UNFIXABLE_REASONS["numpy"])
    # a rule for a narrow shape of an otherwise unfixable category keeps the category's reason
    assert match_site("item-tolist", None) == Decline(None, mend.taxonomy.UNFIXABLE_REASONS["item-tolist"])
    assert match_site("print-logging", None).rule == "deferred-side-effects"


_DEMO = '''
from mend.rules import Decline, Rule

RULE = Rule(name="{name}", categories=("deepcopy",), match=lambda loc: Decline("{name}", "demo"),
            rewrite=lambda module, line: Decline("{name}", "demo"), example_line=lambda source: 1,
            obligation_kinds=frozenset({{"demo"}}), fix_safety="Never applied.", doc="A demo rule.")
'''


def _with_rules_dir(monkeypatch, tmp_path: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(mend.rules, "__path__", [*mend.rules.__path__, str(tmp_path)])
    for name in [n for n in sys.modules if n.startswith("mend.rules.demo")]:
        monkeypatch.delitem(sys.modules, name)


def test_a_new_rule_is_a_new_folder(monkeypatch, tmp_path):
    _with_rules_dir(monkeypatch, tmp_path, {"demo_rule/__init__.py": _DEMO.format(name="demo-rule")})
    found = discover()
    assert set(found) == {*RULES, "demo-rule"}
    assert categories(found)["deepcopy"] == ("demo-rule",)
    monkeypatch.delitem(sys.modules, "mend.rules.demo_rule")


@pytest.mark.parametrize("files, error", [
    ({"demo_misnamed/__init__.py": _DEMO.format(name="demo-rule")}, "must be named 'demo_rule'"),
    ({"demo_plain.py": _DEMO.format(name="demo-plain")}, "a rule is a package"),
    ({"demo_empty/__init__.py": ""}, "declares no `RULE"),
], ids=["name-mismatch", "module-not-package", "no-rule"])
def test_discovery_refuses_a_malformed_rule(monkeypatch, tmp_path, files, error):
    _with_rules_dir(monkeypatch, tmp_path, files)
    with pytest.raises(ImportError, match=error):
        discover()
    for name in [n for n in sys.modules if n.startswith("mend.rules.demo")]:
        monkeypatch.delitem(sys.modules, name)


def test_a_category_shared_by_rules_routes_by_statement_shape(tmp_path):
    """item-tolist is served by three rules, each taking its own statement shape: a counting loop
    goes to host-count-reduction, `x = T.item()` to item-operand, `if v in t:` to
    tensor-membership; a decline keeps the rule's own reason over the generic one."""
    assert RULE_FOR_CATEGORY["item-tolist"] == ("host-count-reduction", "item-operand", "tensor-membership")
    path = Path(_write(tmp_path, textwrap.dedent("""\
        def f(t, h):
            n = 0
            for s in t.tolist():
                if s > 0:
                    n += 1
            m = t.sum().item()
            k = t.max().item()
            if 3 in t:
                h = h * 2.0
            return h * n + h * m + h[k]
        """)))
    assert match_site("item-tolist", locate(str(path), 8)).rule == "tensor-membership"
    assert match_site("item-tolist", locate(str(path), 3)).rule == "host-count-reduction"
    assert match_site("item-tolist", locate(str(path), 6)).rule == "item-operand"
    declined = match_site("item-tolist", locate(str(path), 7))
    assert isinstance(declined, Decline) and declined.rule == "item-operand"
    assert "used as an index" in declined.reason


def test_required_kinds_must_be_declared_kinds():
    rule = RULES["host-count-reduction"]
    fields = {f: getattr(rule, f) for f in rule.__dataclass_fields__}
    with pytest.raises(ValueError, match="not among its obligation kinds"):
        Rule(**{**fields, "obligation_kinds": frozenset({"count-sum-exact"})})


# -- mend rules --------------------------------------------------------------------------


def test_mend_rules_lists_every_rule_with_its_fix_safety():
    res = CliRunner().invoke(main, ["rules"])
    assert res.exit_code == 0, res.output
    for rule in RULES.values():
        assert rule.name in res.output
        for c in rule.categories:
            assert c in res.output
        assert " ".join(rule.fix_safety_summary.replace("``", "").split()[:4]) in " ".join(res.output.split())


@pytest.mark.parametrize("name", sorted(RULES))
def test_mend_rules_name_prints_the_rule_page(name):
    rule = RULES[name]
    res = CliRunner().invoke(main, ["rules", name])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    for heading in ("Categories", "Obligations", "Fix safety", "Example fix", "Example decline"):
        assert heading in text
    assert rule.doc.split("\n", 1)[0].replace("``", "").split()[1] in text
    for kind in rule.obligation_kinds:
        assert kind in text
    for kind in rule.required_kinds:
        assert f"{kind} (required at every level)" in text
    decline = rule.decline_examples[0]
    assert " ".join(decline.reason.split()) in text
    # the same page for the module name
    assert CliRunner().invoke(main, ["rules", rule.module_name]).output == res.output


def test_mend_rules_unknown_name_is_an_error():
    res = CliRunner().invoke(main, ["rules", "no-such-rule"])
    assert res.exit_code == 2
    assert "unknown rule 'no-such-rule'" in res.output
    assert "predicated-control-flow" in res.output


def test_rule_page_shows_the_fix_as_a_diff():
    from mend.rules._doc import rule_page

    rule = RULES["host-count-reduction"]
    page = rule_page(rule)
    ex = rule.fix_examples[0]
    removed = [ln for ln in ex.before.splitlines() if ln not in ex.after.splitlines()]
    assert removed and all(f"-{ln}" in page for ln in removed)
    assert textwrap.dedent(rule.fix_safety).strip().split("\n")[0] in page


def test_a_matcher_that_raises_is_a_named_decline_not_a_crash(monkeypatch, tmp_path):
    """helper-41: a rule's matcher crashing ended the whole scan with an internal error."""
    rule = RULES["predicated-control-flow"]
    ex = rule.fix_examples[0]
    loc = locate(_write(tmp_path, ex.before), rule.site(ex))

    def boom(loc):
        raise ValueError("boom")
    monkeypatch.setitem(RULES, rule.name, dataclasses.replace(rule, match=boom))
    got = match_site("data-dependent-branch", loc)
    assert isinstance(got, Decline) and got.rule == rule.name and "internal error" in got.reason and "boom" in got.reason


def test_mend_rules_name_in_a_pipe_prints_unpadded_markdown():
    """helper-67: piped, the page was rich's render padded to 200 columns; now its Markdown."""
    res = CliRunner().invoke(main, ["rules", "item-operand"])
    assert res.exit_code == 0, res.output
    assert res.output.split()[0] == "item-operand"
    assert max(len(line) for line in res.output.splitlines()) <= 100
    assert not [line for line in res.output.splitlines() if line != line.rstrip()]
