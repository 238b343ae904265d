"""mend fix chooses each branch's rewrite among keeping the graph break, torch.where and
torch.cond, from the candidates the verifier accepted (issue 12, mend.cost.choose).

Nothing here times anything except the ``measure`` test: the roofline reads the fixed peaks
tests/conftest.py writes (or, for the keep test, peaks without a sync cost)."""
import json
import platform
import shutil
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import libcst as cst
import pytest
from rich.console import Console

from mend.config import ConfigError, load
from mend.cost import choose
from mend.errors import MendError
from mend.pipeline import fix
from mend.pipeline.choice import Verified, choose_rewrite
from mend.pipeline.records import Declined, Rewrite
from mend.rules import RULES, Decline, RewriteResult
from tests.conftest import FIXTURES, TEST_PEAKS

PCF = RULES["predicated-control-flow"]
COST = FIXTURES / "cost"
FIX_SCHEMA = json.loads((Path(__file__).parents[1] / "mend" / "schemas" / "fix.schema.json").read_text())


def _module(path: Path) -> cst.Module:
    return cst.parse_module(path.read_text())


# -- the rule: forms, alternatives, the parts the cost model counts -----------------------------

def test_rewrite_forms_and_alternatives_of_a_where_site():
    mod = _module(FIXTURES / "branch_where.py")
    own = PCF.rewrite(mod, 12)
    assert own.form == "where" and own.cost_parts == {"pred": "h.sum() > 0", "sides": [["h * 2.0"], ["h - 1.0"]]}
    assert PCF.rewrite(mod, 12, form=None).code == own.code == PCF.rewrite(mod, 12, form="where").code
    cond = PCF.rewrite(mod, 12, form="cond")
    assert cond.form == "cond" and "h = torch.cond(h.sum() > 0, lambda: h * 2.0, lambda: h - 1.0)" in cond.code
    assert cond.detail == "if -> torch.cond (h) under torch.compile, the if kept otherwise"
    assert cond.cost_parts == own.cost_parts
    (alt,) = PCF.alternatives(mod, 12)
    assert alt.form == "cond" and alt.code == cond.code


def test_rewrite_forms_of_a_cond_site():
    mod = _module(FIXTURES / "cond_submodule_branch.py")
    own = PCF.rewrite(mod, 16)
    assert own.form == "cond" and "torch.cond(" in own.code
    where = PCF.rewrite(mod, 16, form="where")
    assert where.form == "where" and "y = torch.where(h.mean() > 0, self.mlp_a(h), self.mlp_b(h))" in where.code
    assert where.cost_parts == {"pred": "h.mean() > 0", "sides": [["self.mlp_a(h)"], ["self.mlp_b(h)"]]}
    assert [a.code for a in PCF.alternatives(mod, 16)] == [where.code]


def test_cost_parts_of_an_if_without_else_and_none_where_there_are_no_two_sides():
    one_sided = cst.parse_module("import torch\n\n\ndef f(h):\n    if h.sum() > 0:\n        h = h * 2\n    return h\n")
    res = PCF.rewrite(one_sided, 5)
    assert res.cost_parts == {"pred": "h.sum() > 0", "sides": [["h * 2"], ["h"]]}
    elif_chain = cst.parse_module("import torch\n\n\ndef f(h):\n    if h.sum() > 0:\n        h = h * 2\n"
                                  "    elif h.sum() < -1:\n        h = h - 1\n    else:\n        h = h + 1\n    return h\n")
    res = PCF.rewrite(elif_chain, 5)
    assert res.form == "where" and res.cost_parts is None
    cond = PCF.rewrite(elif_chain, 5, form="cond")
    assert isinstance(cond, Decline) and cond.reason == ("torch.cond does not apply: the branch is an elif chain "
                                                         "(torch.cond takes one if/else)")
    assert PCF.alternatives(elif_chain, 5) == []
    logic = cst.parse_module("import torch\n\n\ndef f(a, b):\n    m = (a > 0) and (b > 0)\n    return m\n")
    res = PCF.rewrite(logic, 5)
    assert res.form is None and res.cost_parts is None and "torch.logical_and" in res.code
    assert "tensor logic" in PCF.rewrite(logic, 5, form="cond").reason
    assert PCF.alternatives(logic, 5) == []
    with pytest.raises(ValueError, match="form 'select'"):
        PCF.rewrite(logic, 5, form="select")


# -- the lazy choice equals verifying every candidate, then choosing ----------------------------

def _counts(nbytes: int, out: int) -> dict:
    return {"ops": {"copy": 0, "matmul": 0, "other": 0, "pointwise": 1, "reduction": 0, "view": 0},
            "flops": 0.0, "bytes": nbytes, "out_bytes": out, "data_dependent": False, "error": None}


class _Ex:
    def __init__(self):
        self.restored = []

    def restore(self, staged):
        self.restored.append(staged["name"])


def _verified(form: str, ok: bool, costs: dict) -> Verified:
    if not ok:
        return Verified(Declined("m.py:5", "predicated-control-flow", f"{form} refuted"), costs, ["cpu"])
    rw = Rewrite("predicated-control-flow", "m.py", "m.py:5", [5, 8], f"if -> torch.{form}", "", [], {}, {},
                 {"label": "safe", "reasons": []})
    return Verified((rw, f"# {form}\n"), costs, ["cpu"], {"name": form})


@pytest.mark.parametrize("side_bytes, out, cond_ok", [(2 << 20, 4 << 10, True), (2 << 20, 4 << 10, False),
                                                       (64, 16, True), (2 << 20, 2 << 20, True)])
def test_lazy_choice_is_the_verify_all_choice(side_bytes, out, cond_ok):
    costs = {"pred": _counts(side_bytes, 1), "sides": [_counts(side_bytes, out), _counts(side_bytes, out)]}
    cond = RewriteResult("# cond\n", (5, 8), "if -> torch.cond", form="cond")
    rule = SimpleNamespace(alternatives=lambda module, line: [cond], rewrite=None)
    res = RewriteResult("# where\n", (5, 8), "if -> torch.where", form="where")
    calls = []

    def verify_fn(cand, form):
        calls.append(form)
        return _verified(form, cond_ok, costs)

    ex = _Ex()
    site = SimpleNamespace(line=1, fixable_by="predicated-control-flow")
    out_ = choose_rewrite(verify_fn, ex, rule, site, "x = 1\n", res, _verified("where", True, costs), where="m.py:5",
                          rel="m.py", files={}, method="roofline", verify="standard", unsafe_fixes=False)
    obs = {**costs, "p_true": None, "device": "cpu"}
    everything = choose(obs, ["where", "cond"] if cond_ok else ["where"], "where", "roofline",
                        declined=None if cond_ok else {"cond": "cond refuted"}, local_peaks=TEST_PEAKS)
    rec = out_.choice if isinstance(out_, Declined) else out_[0].choice
    assert rec["chosen"] == everything["chosen"]
    by_name = {e["name"]: e for e in rec["candidates"]}
    assert list(by_name) == ["keep", "where", "cond"]
    if calls:  # verified only because it was predicted best among what had verified
        assert choose(obs, ["where", "cond"], "where", "roofline", local_peaks=TEST_PEAKS)["chosen"] == "cond"
        assert by_name["cond"]["verified"] is cond_ok
        assert cond_ok or by_name["cond"]["note"] == "cond refuted"
    else:
        assert by_name["cond"]["verified"] is None
        assert by_name["cond"]["note"] == f"not verified: predicted slower than {rec['chosen']}"
    if rec["chosen"] == "keep":
        assert isinstance(out_, Declined) and out_.reason == f"kept the graph break: {rec['reason']}"
    else:
        assert out_[1] == f"# {rec['chosen']}\n" and ex.restored == [rec["chosen"]]


def test_every_refused_form_is_named_in_the_decline():
    """helper-102's m45: the rule's cond and the where alternative both refused; the decline
    showed cond's dtype counterexample only. It names each form's reason, the rule's own
    first, and a withheld unsafe fix (applied with --unsafe-fixes) leads when there is one."""
    from mend.pipeline.choice import _refusals

    cond = Declined("m.py:5", "predicated-control-flow", "cond-branch-types refuted", ["cond-branch-types"], "x: int8")
    where = Declined("m.py:5", "predicated-control-flow", "untaken-side-cannot-raise refuted: `x // d`")
    both = _refusals({"cond": cond, "where": where}, "cond")
    assert both.reason == ("torch.cond: cond-branch-types refuted; also declined, torch.where: "
                           "untaken-side-cannot-raise refuted: `x // d`")
    assert both.failed_obligations == ["cond-branch-types"] and both.counterexample == "x: int8"
    assert _refusals({"where": where}, "where") is where
    ruled = _refusals({"where": where}, "where", {"cond": "the rule declines it: a side returns `h`"})
    assert ruled.reason.endswith("; also declined, torch.cond: the rule declines it: a side returns `h`")
    held = Declined.withheld("m.py:5", "predicated-control-flow", "withheld: ", {"label": "unsafe",
                                                                               "reasons": ["tier observed"]})
    lead = _refusals({"cond": cond, "where": held}, "cond")
    assert lead.safety == "unsafe" and lead.reason.startswith("torch.where: withheld: tier observed; also declined, "
                                                              "torch.cond: cond-branch-types refuted")


# -- mend fix on file targets ------------------------------------------------------------------

def test_choose_always_reproduces_the_rules_rewrite():
    src = FIXTURES / "branch_where.py"
    res = fix(str(src), choose="always", max_examples=5)
    (rw,) = res.rewrites
    assert res.mended == PCF.rewrite(_module(src), 12).code
    rec = rw.choice
    assert (rec["method"], rec["chosen"]) == ("always", "where")
    assert rec["reason"] == "--choose always: the rule's rewrite (where) whenever it verified (GraphMend's policy)"
    assert [(e["name"], e["verified"]) for e in rec["candidates"]] == [("keep", None), ("where", True), ("cond", None)]
    assert rec["candidates"][2]["note"] == "not verified: the rule's rewrite (where) is taken without a prediction"
    header = res.diff().splitlines()[0]
    assert header == (f"# mend: [safe] {rw.site} predicated-control-flow: if -> torch.where (h); chose where by "
                      f"always: {rec['reason']}")
    doc = res.to_json()
    jsonschema.validate(doc, FIX_SCHEMA)
    assert doc["rewrites"][0]["choice"] == rec
    assert "costs" not in rw.verification["facts"]  # an observation, not a fact anything is proved from


def test_roofline_chooses_cond_and_the_certificate_records_it(tmp_path, run_mend):
    src = tmp_path / "cond_reduce.py"
    shutil.copy(COST / "cond_reduce.py", src)
    code, out, err = run_mend("fix", str(src), "--choose", "roofline", "--examples", "3", "--json",
                              "--out", str(tmp_path / "out"))
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, FIX_SCHEMA)
    (rw,) = doc["rewrites"]
    rec = rw["choice"]
    assert (rec["method"], rec["chosen"]) == ("roofline", "cond")
    by_name = {e["name"]: e for e in rec["candidates"]}
    assert [(n, e["verified"]) for n, e in by_name.items()] == [("keep", None), ("where", True), ("cond", True)]
    assert by_name["cond"]["roofline_ms"] < by_name["keep"]["roofline_ms"] < by_name["where"]["roofline_ms"]
    assert rec["reason"].startswith("cond cheapest (cond ")
    assert rw["detail"] == "if -> torch.cond (y) under torch.compile, the if kept otherwise"
    mended = (tmp_path / "out" / "cond_reduce.py").read_text()
    assert "y = torch.cond(x.min() > 0, lambda: x.sum(dim=-1), lambda: x.mean(dim=-1))" in mended
    # helper-92: the whole diff, original to mended, is in the JSON too
    assert doc["diff"].startswith("# mend: [") and "+            y = torch.cond(x.min() > 0," in doc["diff"], doc["diff"]
    assert "torch.where(" not in mended
    (cert,) = (tmp_path / "out" / "certificates").glob("*.json")
    cdoc = json.loads(cert.read_text())
    assert cdoc["choice"] == rec and "costs" not in cdoc["verification"]["facts"]
    code, out, err = run_mend("cert", "verify", str(cert))
    assert code == 0, out + err
    assert "note: the choice of cond (by roofline) is recorded, not checked" in out
    cdoc["choice"]["chosen"] = "where"  # the choice is sealed with the rest
    cert.write_text(json.dumps(cdoc, indent=2) + "\n")
    code, out, _ = run_mend("cert", "verify", str(cert))
    assert code == 1 and "does not match its digest" in out


def test_keep_leaves_the_file_unchanged_and_says_why(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f"roofline-{platform.node() or 'host'}-cpu.json").write_text(json.dumps({**TEST_PEAKS, "sync": 0.0}))
    monkeypatch.setenv("MEND_CACHE_DIR", str(cache))
    src = tmp_path / "keep_wide.py"
    shutil.copy(COST / "keep_wide.py", src)
    before = src.read_text()
    res = fix(str(src), choose="roofline", max_examples=3)
    assert res.rewrites == [] and res.files == {} and src.read_text() == before and res.diff() == ""
    (d,) = res.declined
    rec = d.choice
    assert d.site == f"{res.main_file}:10" and rec["chosen"] == "keep" and rec["method"] == "roofline"
    assert d.reason == f"kept the graph break: {rec['reason']}" and rec["reason"].startswith("keep cheapest (keep ")
    by_name = {e["name"]: e for e in rec["candidates"]}
    assert (by_name["where"]["verified"], by_name["cond"]["verified"]) == (True, None)
    assert by_name["cond"]["note"] == "not verified: predicted slower than keep"
    jsonschema.validate(res.to_json(), FIX_SCHEMA)
    from mend.cli import _print_fix

    console = Console(width=400, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - closed with the test
    _print_fix(res, str(src), "standard", [], console)
    text = console.export_text()
    assert f"declined  {res.main_file}:10  predicated-control-flow: kept the graph break: keep cheapest" in text
    assert "1 declined" in text and "0 rewrite(s)" in text


def test_verify_fast_emits_the_rules_rewrite_unobserved():
    res = fix(str(FIXTURES / "branch_where.py"), choose="roofline", verify="fast", unsafe_fixes=True, max_examples=3)
    (rw,) = res.rewrites  # nothing is discharged at fast, so the fix is unsafe
    assert (rw.choice["method"], rw.choice["chosen"]) == ("always", "where")
    assert "--verify fast" in rw.choice["reason"]


def test_measure_times_the_two_best_ranked():
    res = fix(str(FIXTURES / "branch_where.py"), choose="measure", max_examples=3)
    rec = (res.rewrites[0].choice if res.rewrites else res.declined[0].choice)
    assert rec["method"] == "measure" and len(rec["measure"]) == 2 and rec["chosen"] in rec["measure"]
    timed = {e["name"]: e["measured_ms"] for e in rec["candidates"] if "measured_ms" in e}
    assert set(timed) == set(rec["measure"]) and all(v > 0 for v in timed.values())
    assert rec["reason"].startswith(f"measured on the target's inputs: {rec['chosen']} fastest")
    if rec["chosen"] == "keep":
        assert res.rewrites == [] and res.declined[0].reason.startswith("kept the graph break: measured")
    else:
        assert f"torch.{rec['chosen']}(" in res.mended


# -- configuration -------------------------------------------------------------------------------

def test_choose_from_tool_mend_and_bad_values(tmp_path, run_mend):
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nchoose = "always"\n')
    assert load(tmp_path).choose == "always"
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nchoose = "fastest"\n')
    with pytest.raises(ConfigError, match="choose"):
        load(tmp_path)
    with pytest.raises(MendError, match="--choose fastest: choose one of model, roofline, always, measure"):
        fix(str(FIXTURES / "branch_where.py"), choose="fastest")
    code, _, err = run_mend("fix", str(FIXTURES / "branch_where.py"), "--choose", "fastest")
    assert code == 2 and "fastest" in err


def test_kept_break_when_the_rules_form_is_refused_says_so():
    # where refuted, cond predicted slower than keep (a big side that cond would run when
    # taken): the record must not claim that no rewrite could verify (new-user review)
    big = _counts(64 << 20, 1 << 20)
    costs = {"pred": _counts(64, 1), "sides": [big, _counts(0, 0)]}
    cond = RewriteResult("# cond\n", (5, 8), "if -> torch.cond", form="cond")
    rule = SimpleNamespace(alternatives=lambda module, line: [cond], rewrite=None)
    res = RewriteResult("# where\n", (5, 8), "if -> torch.where", form="where")
    site = SimpleNamespace(line=1, fixable_by="predicated-control-flow")
    peaks = {**TEST_PEAKS, "launch": 1e-9, "sync": 1e-9}  # overheads negligible: the side decides
    import mend.pipeline.choice as choice_mod

    real = choice_mod.choose
    try:
        choice_mod.choose = lambda *a, **k: real(*a, **{**k, "local_peaks": peaks})
        out = choose_rewrite(lambda c, f: pytest.fail("cond must not be verified"), _Ex(), rule, site, "x = 1\n",
                             res, _verified("where", False, costs), where="m.py:5", rel="m.py", files={},
                             method="roofline", verify="standard", unsafe_fixes=False)
    finally:
        choice_mod.choose = real
    assert isinstance(out, Declined) and out.reason.startswith("kept the graph break: cond predicted slower")
    assert "the rule's where was not emitted: where refuted" in out.reason
    keep = next(e for e in out.choice["candidates"] if e["name"] == "keep")
    assert keep["roofline_ms"] is not None   # keep's own estimate stays on record


def test_a_break_that_skips_its_frame_is_not_kept_against_a_verified_rewrite():
    # a break in a loop makes Dynamo skip the whole frame (graph_count 0): keeping it costs the
    # frame's compilation, which a site's own counts miss (the index form of shared case 006 was
    # kept on a roofline tie, 0 graphs where torch.cond gives 1)
    costs = {"pred": _counts(64, 1), "sides": [_counts(8 << 20, 8 << 20), _counts(8 << 20, 8 << 20)]}
    obs = {**costs, "p_true": None, "device": "cpu"}
    plain = choose(obs, ["cond"], "cond", "roofline", local_peaks=TEST_PEAKS)
    assert plain["chosen"] == "keep"    # the site alone: the cond's materialised output costs more than a break
    skipped = choose(obs, ["cond"], "cond", "roofline", local_peaks=TEST_PEAKS, skips_frame=True)
    assert skipped["chosen"] == "cond" and skipped["reason"].startswith("the only verified rewrite (cond); not ranked")
    keep = skipped["candidates"][0]
    assert keep["name"] == "keep" and "Dynamo skips the whole frame" in keep["note"]
    both = choose(obs, ["where", "cond"], "where", "roofline", local_peaks=TEST_PEAKS, skips_frame=True)
    assert both["chosen"] in ("where", "cond") and "keep" not in both["reason"]
    # nothing verified: the break stays, whatever the frame
    assert choose(obs, [], "cond", "roofline", local_peaks=TEST_PEAKS, skips_frame=True)["chosen"] == "keep"
    # through choose_rewrite: the scanned site says the frame was skipped
    res = RewriteResult("# cond\n", (5, 8), "if -> torch.cond", form="cond")
    rule = SimpleNamespace(alternatives=lambda module, line: [], rewrite=lambda *a, **k: Decline("r", "no where"))
    for skipped_frame, want in ((False, "keep"), (True, "cond")):
        site = SimpleNamespace(line=1, fixable_by="predicated-control-flow", frame_skipped=skipped_frame)
        out = choose_rewrite(None, _Ex(), rule, site, "x = 1\n", res, _verified("cond", True, costs), where="m.py:5",
                             rel="m.py", files={}, method="roofline", verify="standard", unsafe_fixes=False)
        rec = out.choice if isinstance(out, Declined) else out[0].choice
        assert rec["chosen"] == want
