"""The steady state (graphs a second compiled call runs) and first-call initialization:
a scan reports both counts; a check behind one-time initialization is an unsafe fix whose
reason names the first call (the state observation sees two eval calls and one train call)."""
from mend.scan import scan
from mend.targets import load_target
from tests.conftest import FIXTURES
from verifier.facts import observe_state


def test_scan_reports_graphs_of_a_second_call():
    res = scan(load_target(str(FIXTURES / "first_call_split.py")))
    # the print splits the first call; the second call's recompiles are not counted as the first's
    assert (res.graph_count, res.graph_break_count, res.steady_graph_count) == (2, 1, 1)
    assert res.to_json()["steady_graph_count"] == 1
    res = scan(load_target(str(FIXTURES / "mixed.py")))
    assert res.steady_graph_count == res.graph_count


def test_state_observation_separates_first_call_initialization():
    t = load_target(str(FIXTURES / "first_call_check.py"))
    state = observe_state(t.model, t.args, t.kwargs)
    assert state["changes"] == []
    assert state["first_call"] and "_ready" in state["first_call"][0]


def test_check_behind_first_call_init_is_an_unsafe_fix():
    from mend.pipeline import fix

    spec = str(FIXTURES / "first_call_check.py")
    default = fix(spec, max_examples=5)
    assert not default.rewrites
    withheld = [d for d in default.declined if d.safety == "unsafe"]
    assert [d.rule for d in withheld] == ["tensor-check"] and "first call" in withheld[0].reason
    applied = fix(spec, max_examples=5, unsafe_fixes=True)
    assert [r.rule for r in applied.rewrites] == ["tensor-check"]
    assert applied.after.graph_count < applied.before.graph_count
    assert any("first call" in r for r in applied.rewrites[0].safety["reasons"])
