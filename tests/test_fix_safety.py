"""Fix safety as data (issue 10, after ruff): every verified rewrite is labelled ``safe`` or
``unsafe`` from what its obligations and differential evidence showed; unsafe fixes are
applied only with ``--unsafe-fixes``; the label is in the diff header, the JSON and the
certificate, and ``mend cert verify`` recomputes it. Gradients are compared with a
dtype-aware tolerance, forward outputs stay bit-exact."""
import json
import shutil

import pytest
import torch

from tests.conftest import FIXTURES
from verifier.certs import dumps, seal, verify_file
from verifier.differential import Mismatch, compare, gradient_tolerance
from verifier.encoders import CHECKS, OBSERVED
from verifier.levels import CONDITIONAL_TIERS, fix_safety


def _ob(kind, result, **kw):
    return {"kind": kind, "result": result, **kw}


@pytest.mark.parametrize("results, evidence, use, unsafe_because", [
    ([_ob("where-equals-ite", "proved", tier="every-value"), _ob("same-shape", "proved", tier="general")],
     {"max_gradient_error": 0.0}, "training and inference", None),
    ([_ob("order-preserved", "checked", checked_by="the operator registry")], {}, "training and inference", None),
    ([_ob("same-shape", "unknown", reason="timeout")], {}, "training and inference", "same-shape is unknown"),
    ([_ob("same-shape", "proved", tier="equal-sizes")], {}, "training and inference", "assuming the example's equal"),
    ([_ob("same-shape", "proved", tier="observed")], {}, "training and inference", "sizes, dtypes, values and layouts"),
    # trivially true only with the example's premises (a local's observed value): not safe either
    ([_ob("untaken-side-cannot-raise", "checked", tier="observed")], {}, "training and inference",
     "untaken-side-cannot-raise is checked assuming the example's sizes, dtypes, values and layouts"),
    ([_ob("untaken-side-cannot-raise", "checked", tier="general")], {}, "training and inference", None),
    ([_ob("anomaly-keeps-original", "checked")], {}, "training and inference", "around backward() alone"),
    ([_ob("where-equals-ite", "proved", tier="finite-leaves")], {}, "training and inference", "finite leaf values"),
    ([_ob("cpu-only", "checked", checked_by="devices seen")], {}, "training and inference", "rests on an observation"),
    ([_ob("where-equals-ite", "proved", tier="every-value")], {"max_gradient_error": 1.19e-7},
     "training and inference", "within tolerance"),
    ([_ob("finite-gradient", "refuted")], {}, "inference-only", "inference-only"),
])
def test_fix_safety_labels_by_what_was_shown(results, evidence, use, unsafe_because):
    got = fix_safety(results, evidence, use)
    if unsafe_because is None:
        assert got == {"label": "safe", "reasons": []}
    else:
        assert got["label"] == "unsafe"
        assert any(unsafe_because in r for r in got["reasons"]), got


def test_observed_kinds_are_checks_and_include_the_example_run_observations():
    assert OBSERVED <= CHECKS
    assert {"state-unchanged-on-raise", "cpu-only", "count-tolist-1d"} <= OBSERVED
    # screens of the code and lemma-backed runtime checks are not observations; the trace of a
    # deferred call's graph is (helper-65: other inputs, guards and modes give other graphs)
    assert not {"order-preserved", "first-failure-wins"} & OBSERVED
    assert "replayed-on-exception" in OBSERVED
    assert set(CONDITIONAL_TIERS) == {"equal-sizes", "observed", "finite-leaves"}


def _obs(out, grad):
    """An observation (verifier.differential.observe's shape): gradients named by their input."""
    return (out, "", [], [], [(f"input {i}", g) for i, g in enumerate(grad)])


def test_gradients_within_a_few_ulps_pass_and_are_reported():
    out = torch.tensor([1.0, 2.0])
    g = torch.tensor([0.5, 1.0])
    g_ulp = torch.nextafter(g, torch.tensor(2.0))  # one ulp away, as a reassociated sum gives
    stats = {}
    assert compare(_obs(out, [g]), _obs(out.clone(), [g_ulp]), exact=True, grad_stats=stats) == 0.0
    assert stats["max"] == pytest.approx(float((g_ulp - g).abs().max()))
    assert stats["max"] > 0


def test_gradients_beyond_the_tolerance_and_forward_ulps_still_fail():
    out = torch.tensor([1.0, 2.0])
    g = torch.tensor([0.5, 1.0])
    rtol, atol = gradient_tolerance(torch.float32, 1.0)
    with pytest.raises(Mismatch, match="gradient values differ"):
        compare(_obs(out, [g]), _obs(out, [g + 10 * atol]), exact=True)
    with pytest.raises(Mismatch, match="output values differ"):
        compare(_obs(out, [g]), _obs(torch.nextafter(out, torch.tensor(9.0)), [g]), exact=True)


def test_gradient_tolerance_follows_the_dtype():
    r32, _ = gradient_tolerance(torch.float32, 1.0)
    r16, _ = gradient_tolerance(torch.float16, 1.0)
    r64, _ = gradient_tolerance(torch.float64, 1.0)
    assert r64 < r32 < r16
    assert r32 == pytest.approx(64 * torch.finfo(torch.float32).eps)


@pytest.fixture(scope="module")
def mixed_runs():
    """mend fix on the mixed_safety fixture (a branch -> torch.where: safe; a print, deferred, a
    tensor check and a `.item()`: unsafe, each resting on an observation of the example run),
    without and with --unsafe-fixes; ``tested``: the candidate sources each run gave its
    differential test (a spy on the executor), for the first run and the second."""
    from mend.pipeline import fix
    from mend.pipeline.executors import InProcess

    spec = str(FIXTURES / "mixed_safety.py")
    tested = ([], [])
    real = InProcess.evidence

    def spy(self, force, edge_values, other_dtypes=()):
        tested[run].append(self.cand_path.read_text())
        return real(self, force, edge_values, other_dtypes)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(InProcess, "evidence", spy)
        run = 0
        default = fix(spec, max_examples=5)
        run = 1
        unsafe = fix(spec, max_examples=5, unsafe_fixes=True)
    return default, unsafe, tested


def test_unsafe_fixes_are_withheld_by_default_and_applied_on_request(mixed_runs):
    default, unsafe, _ = mixed_runs
    assert {r.rule for r in default.rewrites} == {"predicated-control-flow"}
    assert all(r.safety == {"label": "safe", "reasons": []} for r in default.rewrites)
    withheld = [d for d in default.declined if d.safety == "unsafe"]
    assert [d.rule for d in withheld] == ["deferred-side-effects", "predicated-validation", "item-operand"]
    assert "--unsafe-fixes" in withheld[1].reason and "cpu-only" in withheld[1].reason
    assert "replayed-on-exception" in withheld[0].reason
    # unsafe by its obligations alone: withheld before its differential test, and it says so
    from mend.pipeline import UNTESTED

    assert withheld[1].reason.startswith(UNTESTED) and "verified but" not in withheld[1].reason
    pv = [r for r in unsafe.rewrites if r.rule == "predicated-validation"]
    assert len(pv) == 1 and pv[0].safety["label"] == "unsafe"
    assert unsafe.after.graph_count < default.after.graph_count
    header = [line for line in unsafe.diff().splitlines() if line.startswith("# mend:")]
    assert len(header) == len(unsafe.rewrites)
    assert any(line.startswith("# mend: [unsafe]") and "predicated-validation" in line for line in header)
    doc = unsafe.to_json()
    assert {r["safety"]["label"] for r in doc["rewrites"]} == {"safe", "unsafe"}
    assert any(d.get("safety") == "unsafe" for d in default.to_json()["declined"])


def test_certificate_records_safety_and_verify_recomputes_it(mixed_runs, tmp_path):
    from mend.pipeline.emit import emit

    _, unsafe, _ = mixed_runs
    work = tmp_path / "w"
    work.mkdir()
    shutil.copy(FIXTURES / "mixed_safety.py", work / "mixed_safety.py")
    written = emit(unsafe, write=False, out_dir=str(work / "out"))
    certs = [p for p in map(str, written) if p.endswith(".json") and "predicated-validation" in p]
    assert certs
    doc = json.loads(open(certs[0]).read())
    assert doc["safety"]["label"] == "unsafe" and doc["safety"]["reasons"]
    rep = verify_file(certs[0])
    assert rep.checked["safety"] == "unsafe"
    assert not [p for p in rep.problems if "labels the fix" in p]
    # relabelled safe and resealed: the digest holds, the safety check does not
    doc["safety"] = {"label": "safe", "reasons": []}
    forged = tmp_path / "w" / "out" / "certificates" / "forged.json"
    forged.write_text(dumps(seal({k: v for k, v in doc.items() if k != "digest"})))
    rep = verify_file(forged)
    assert any("labels the fix 'safe'" in p for p in rep.problems), rep.problems


def test_an_unsafe_candidate_is_not_tested_without_unsafe_fixes(mixed_runs):
    """The differential test (the costliest step) runs for the safe candidates only: the
    unsafe one's outcome is a withheld record whatever that test would say."""
    default, _, (tested, tested_unsafe) = mixed_runs
    assert len(tested) == len(default.rewrites) == 1
    assert not any("_assert_async" in code for code in tested)
    assert [d.rule for d in default.declined if d.safety == "unsafe"] == ["deferred-side-effects",
                                                                         "predicated-validation", "item-operand"]
    assert any("_assert_async" in code for code in tested_unsafe)


def test_the_console_names_what_a_withheld_fix_rests_on_in_one_line():
    # helper-89: the whole reason, assumptions and all, repeated for every withheld site
    from mend.cli import _withheld_brief
    from mend.pipeline import UNTESTED, Declined
    from mend.pipeline.choice import UNSAFE

    untested = Declined.withheld("m.py:3", "r", UNTESTED, {"label": "unsafe", "reasons": [
        "replayed-on-exception rests on an observation, not a proof (no raiser follows; see "
        "verifier/replay_raisers.py (a; b))", "cpu-only is unknown (no device facts)"]})
    assert untested.reason.startswith(UNTESTED) and "(a; b)); cpu-only is unknown (no device facts)" in untested.reason
    assert _withheld_brief(untested) == (
        "unsafe fix, not applied without --unsafe-fixes, its differential test not run: replayed-on-exception rests "
        "on an observation, not a proof; cpu-only is unknown (the full reasons: --json, --html)")
    tested = Declined.withheld("m.py:3", "r", UNSAFE, {"label": "unsafe", "reasons": [
        "gradients agree within tolerance, not bit-exact (largest difference 1.19e-07)"]})
    assert _withheld_brief(tested) == ("unsafe fix, not applied without --unsafe-fixes: gradients agree within "
                                       "tolerance, not bit-exact (the full reasons: --json, --html)")
    kept = Declined("m.py:3", "r", "the cost model kept the break")
    assert _withheld_brief(kept) == "the cost model kept the break"


def test_the_summary_line_says_when_a_skipped_frame_compiles_again():
    # helper-92's m15: `if eos in ids:` made Dynamo skip the frame; fixed, the count stayed 1 -> 1
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from mend.cli import _print_fix

    def scan(graphs, skipped):
        return SimpleNamespace(graph_count=graphs, graph_break_count=0, frames_skipped=skipped, sites=[])
    out = io.StringIO()
    res = SimpleNamespace(before=scan(1, 1), after=scan(1, 0), rewrites=[], declined=[], files={})
    _print_fix(res, "m.py", "standard", [], Console(file=out, width=200))
    assert "graphs 1 -> 1, frames skipped 1 -> 0, breaks 0 -> 0" in out.getvalue()
    out = io.StringIO()
    _print_fix(SimpleNamespace(**{**vars(res), "after": scan(1, 1)}), "m.py", "standard", [],
               Console(file=out, width=200))
    assert "frames skipped" not in out.getvalue()
