"""mend cert verify: a certificate holds only while its files, queries and content are
exactly what mend fix wrote; any changed byte fails with a message and exit 1."""
import json
import shutil

import jsonschema
import pytest

from mend.report import schema
from tests.conftest import FIXTURES
from verifier import certs
from verifier.encoders import CHECKS


@pytest.fixture(scope="module")
def issued(tmp_path_factory):
    """`mend fix FILE --out out --verify strict --unsafe-fixes` on three fixtures: certificates of five
    rules (predicated validation and host-count reduction rest on observations: unsafe fixes)."""
    from click.testing import CliRunner

    from mend.cli import main

    root = tmp_path_factory.mktemp("certs")
    for name in ("branch_where.py", "mixed.py", "count_le_step2.py"):
        shutil.copy(FIXTURES / name, root / name)
        r = CliRunner().invoke(main, ["fix", str(root / name), "--out", str(root / "out"), "--verify", "strict",
                                      "--examples", "5", "--unsafe-fixes", "--json"])
        assert r.exit_code == 0, r.output
        (root / f"{name}.report.json").write_text(r.stdout)   # what `mend fix --json` printed
    found = sorted((root / "out" / "certificates").glob("*.json"))
    assert len(found) >= 2
    return root, found


@pytest.fixture
def work(issued, tmp_path):
    """A private copy of the issued tree (the tests tamper with it)."""
    root, found = issued
    dest = tmp_path / "w"
    shutil.copytree(root, dest)
    return dest, [dest / p.relative_to(root) for p in found]


def _verify(run_mend, *paths, rerun=False):
    args = ["cert", "verify", *map(str, paths)] + (["--rerun"] if rerun else [])
    return run_mend(*args)


def test_issued_certificates_verify(work, run_mend):
    root, found = work
    rules = set()
    for p in found:
        doc = json.loads(p.read_text())
        jsonschema.validate(doc, schema("certificate"))
        assert doc["schema_version"] == "0.4" and doc["verification"]["level"] == "strict"
        for o in doc["obligations"]:
            assert o["solver"].startswith("z3")
            if o["result"] == "proved":
                assert o["smtlib"].count("(check-sat)") == 1 and o["status"] == "unsat" and "checked_by" not in o
            else:
                assert o["result"] == "checked" and o["checked_by"] and o["smtlib"] is None, o
        rules.add(doc["rule"])
    assert rules == {"predicated-control-flow", "deferred-side-effects", "predicated-validation", "host-count-reduction",
                     "item-operand"}
    code, out, err = _verify(run_mend, *found)
    assert code == 0, out + err
    assert out.count("ok ") == len(found) and "replayed to the recorded results" in out


def _flip(text: str, at: int) -> str:
    c = text[at]
    new = {"0": "1", "1": "2"}.get(c, "0" if c.isdigit() else ("b" if c == "a" else "a"))
    return text[:at] + new + text[at + 1:]


@pytest.mark.parametrize("where", ["digest", "max_abs_error", "detail-of-diff", "assumption", "indent"])
def test_one_changed_byte_of_the_certificate_fails(work, run_mend, where):
    root, found = work
    cert = found[0]
    raw = cert.read_text()
    if where == "digest":
        text = _flip(raw, raw.index('"digest": "') + 11)
    elif where == "max_abs_error":
        text = _flip(raw, raw.index('"max_abs_error": ') + len('"max_abs_error": '))
    elif where == "detail-of-diff":
        text = _flip(raw, raw.index("torch.where") + 2)
    elif where == "assumption":
        text = _flip(raw, raw.index('"assumptions": [\n        "') + 30)
    else:
        text = raw.replace('\n  "rule"', '\n   "rule"', 1)
    assert text != raw and len(text) == len(raw) + (where == "indent")
    cert.write_text(text)
    code, out, err = _verify(run_mend, cert)
    assert code == 1, out + err
    assert "FAILED" in out and ("tampered" in out or "not as mend wrote it" in out)


def test_changed_source_fails(work, run_mend):
    root, found = work
    cert = found[0]
    mended = certs.resolve(cert, json.loads(cert.read_text())["paths"]["mended"])
    mended.write_text(mended.read_text().replace("2.0", "3.0", 1))
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "changed since the certificate was issued" in out


def test_changed_original_fails(work, run_mend):
    root, found = work
    cert = found[0]
    orig = certs.resolve(cert, json.loads(cert.read_text())["paths"]["original"])
    orig.write_text(orig.read_text() + "\n# edited\n")
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "differs from the one the rewrite was verified against" in out


def _reseal(cert, edit):
    doc = json.loads(cert.read_text())
    edit(doc)
    cert.write_text(certs.dumps(certs.seal(doc)))


def _with_query(found):
    """A certificate and the index of an obligation with an SMT query in it."""
    for cert in found:
        doc = json.loads(cert.read_text())
        for i, o in enumerate(doc["obligations"]):
            if o.get("smtlib"):
                return cert, i
    raise AssertionError("no certificate with a query")


def test_changed_query_fails_even_when_resealed(work, run_mend):
    """A query swapped for an easier one (still unsat) is not the obligation's encoding."""
    root, found = work
    cert, i = _with_query(found)

    def weaken(doc):
        o = doc["obligations"][i]
        o["smtlib"] = o["smtlib"].replace("(check-sat)", "(assert false)\n(check-sat)")
    _reseal(cert, weaken)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "is not the encoding of this obligation" in out


def test_one_changed_byte_of_a_query_fails(work, run_mend):
    root, found = work
    cert, _ = _with_query(found)
    raw = cert.read_text()
    i = raw.index('"smtlib": "') + len('"smtlib": "') + 3
    cert.write_text(_flip(raw, i))
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "FAILED" in out


def test_flipped_result_fails_on_replay(work, run_mend):
    root, found = work
    cert, i = _with_query(found)

    def flip(doc):
        doc["obligations"][i]["status"] = "sat"
        doc["obligations"][i]["result"] = "refuted"
        doc["verification"]["level"] = "standard"
    _reseal(cert, flip)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "replays to unsat, the certificate records sat" in out


def test_unreadable_certificate_is_exit_2(work, run_mend, tmp_path):
    root, found = work
    bad = tmp_path / "bad.json"
    bad.write_text(found[0].read_text()[:-10])
    code, _, err = _verify(run_mend, bad)
    assert code == 2 and "not a JSON certificate" in err
    code, _, err = _verify(run_mend, tmp_path / "missing.json")
    assert code == 2 and "cannot be read" in err


def test_old_schema_version_fails(work, run_mend):
    root, found = work
    cert = found[0]
    _reseal(cert, lambda d: d.update(schema_version="0.1"))
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "schema_version" in out


def test_rerun_replays_the_differential_test(work, run_mend):
    root, found = work
    cert = next(p for p in found if "branch_where" in p.name)
    code, out, err = _verify(run_mend, cert, rerun=True)
    assert code == 0, out + err
    assert "rerun:" in out and "seed 0" in out
    mended = certs.resolve(cert, json.loads(cert.read_text())["paths"]["mended"])
    # a semantic change, with the hash updated so only the rerun can notice
    text = mended.read_text().replace("h * 2.0", "h * 2.5")
    mended.write_text(text)
    _reseal(cert, lambda d: d.update(sha256_mended=certs.sha256_file(mended)))
    code, out, _ = _verify(run_mend, cert, rerun=True)
    assert code == 1 and "--rerun: the differential test fails" in out


def test_factory_target_certificates_rerun(tmp_path, run_mend):
    """FILE.py:FACTORY: the certificate names the factory, and --rerun builds through it."""
    shutil.copy(FIXTURES / "mixed.py", tmp_path / "mixed.py")
    code, out, err = run_mend("fix", "--unsafe-fixes", f"{tmp_path / 'mixed.py'}:factory", "--out", str(tmp_path / "out"),
                              "--examples", "3")
    assert code == 0, err
    found = sorted((tmp_path / "out" / "certificates").glob("*.json"))
    assert found and all(json.loads(p.read_text())["target"].endswith("mixed.py:factory") for p in found)
    code, out, err = _verify(run_mend, found[-1], rerun=True)
    assert code == 0, out + err
    assert "rerun:" in out


@pytest.mark.skipif(not (FIXTURES.parents[1].parent / "shared" / "cases" / "README.md").is_file(),
                    reason="../shared/cases is absent")
def test_cond_certificate_reencodes(tmp_path, run_mend):
    """A torch.cond rewrite (case 012): every obligation, the waiver included, re-encodes
    from the certificate's own data."""
    case = FIXTURES.parents[1].parent / "shared" / "cases" / "012_sqrt_branch_grad_nan.py"
    shutil.copy(case, tmp_path / case.name)
    code, _, err = run_mend("fix", "--unsafe-fixes", str(tmp_path / case.name), "--verify", "strict", "--out", str(tmp_path / "out"),
                            "--examples", "3", "--choose", "always")   # the rule's own form: torch.cond
    assert code == 0, err
    (cert,) = (tmp_path / "out" / "certificates").glob("*.json")
    obs = json.loads(cert.read_text())["obligations"]
    assert any(o["kind"] == "cond-taken-side-only" for o in obs)
    for o in obs:   # the cond protocol is checked (citing pcf_cond_ite.smt2), never proved
        assert (o["result"] == "checked" and o["smtlib"] is None) if o["kind"] in CHECKS else \
            o["result"] in ("proved", "checked"), o
    assert next(o for o in obs if o["kind"] == "cond-predicate")["result"] == "proved"
    assert next(o for o in obs if o["kind"] == "cond-taken-side-only")["lemmas"] == ["proofs/pcf_cond_ite.smt2"]
    code, out, err = _verify(run_mend, cert)
    assert code == 0, out + err


# -- outcome kinds: checks re-run, lemmas replayed and hashed ------------------------------------

def _checked(found):
    for cert in found:
        doc = json.loads(cert.read_text())
        for i, o in enumerate(doc["obligations"]):
            if o["result"] == "checked" and o.get("lemmas"):
                return cert, i
    raise AssertionError("no certificate with a checked obligation citing a lemma")


def test_formerly_constant_kinds_are_checked_in_json_and_certificate(work, run_mend, tmp_path):
    """On --verify strict, every kind decided outside a solver (the deferred effects'
    protocols, predicated validation's checks) is `checked`, with what checked it, never
    `proved`, in the `mend fix --json` output and in the certificate; the verification
    record lists them."""
    root, found = work
    seen = set()
    for p in found:
        doc = json.loads(p.read_text())
        for o in doc["obligations"]:
            if o["kind"] in CHECKS:
                assert o["result"] == "checked" and o["checked_by"] and o["smtlib"] is None, o
                seen.add(o["kind"])
        assert sorted(c["kind"] for c in doc["verification"]["checked"]) == sorted(
            o["kind"] for o in doc["obligations"] if o["result"] == "checked")
    assert {"order-preserved", "replayed-on-exception", "warning-identity", "same-result-when-passing",
            "first-failure-wins", "restore-at-boundary", "state-unchanged-on-raise", "cpu-only",
            "count-tolist-1d", "count-no-gradient"} <= seen
    report = json.loads((root / "mixed.py.report.json").read_text())   # the --json output of the same run
    kinds = {o["kind"]: o for rw in report["rewrites"] for o in rw["obligations"]}
    assert {"order-preserved", "warning-identity", "first-failure-wins", "restore-at-boundary", "cpu-only",
            "state-unchanged-on-raise"} <= set(kinds)
    for kind, o in kinds.items():
        if kind in CHECKS:
            assert o["result"] == "checked" and o["checked_by"] and o["smtlib"] is None, o


def test_checked_outcome_is_rerun_and_a_forged_one_fails(work, run_mend):
    """A check is re-run from the certificate's data: an obligation recorded checked whose
    check does not hold there fails, even with the digest recomputed."""
    root, found = work
    cert = next(p for p in found if any(o["kind"] == "cpu-only" for o in json.loads(p.read_text())["obligations"]))
    code, out, err = _verify(run_mend, cert)
    assert code == 0, out + err

    def forge(doc):
        for fact in doc["verification"]["facts"]["names"].values():
            if fact.get("kind") == "tensor":
                fact["device"] = "cuda"
    _reseal(cert, forge)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "cpu-only" in out and "re-run from the certificate's data it is refuted" in out


def test_checked_relabelled_as_proved_fails(work, run_mend):
    root, found = work
    cert, i = _checked(found)

    def relabel(doc):
        o = doc["obligations"][i]
        o.update(result="proved", status="unsat", smtlib="(assert false)\n(check-sat)\n")
        for k in ("checked_by", "lemmas", "lemma_sha256"):
            o.pop(k)
        doc["verification"]["checked"] = [c for c in doc["verification"]["checked"] if c["kind"] != o["kind"]]
    _reseal(cert, relabel)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "is not the encoding of this obligation" in out


def test_cited_lemma_is_replayed_and_its_hash_checked(work, run_mend, tmp_path, monkeypatch):
    root, found = work
    cert, i = _checked(found)
    doc = json.loads(cert.read_text())
    lemma = doc["obligations"][i]["lemmas"][0]
    code, out, err = _verify(run_mend, cert)
    assert code == 0, out + err

    def wrong_hash(d):
        d["obligations"][i]["lemma_sha256"][lemma] = "0" * 64
    _reseal(cert, wrong_hash)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and f"cited lemma {lemma} has sha256" in out
    # the lemma file itself edited (its negation dropped: now sat) fails on replay
    from verifier import outcomes

    proofs = tmp_path / "proofs"
    shutil.copytree(outcomes.PROOFS, proofs)
    text = (proofs / lemma.split("/")[1]).read_text()
    (proofs / lemma.split("/")[1]).write_text(text[:text.rfind("(assert (not")] + "(check-sat)\n")
    monkeypatch.setattr(outcomes, "PROOFS", proofs)

    def rehash(d):
        import hashlib
        d["obligations"][i]["lemma_sha256"][lemma] = hashlib.sha256((proofs / lemma.split("/")[1]).read_bytes()).hexdigest()
    _reseal(cert, rehash)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and f"cited lemma {lemma} replays to sat" in out


def test_a_check_reading_the_version_before_rechecks_from_the_original_file(tmp_path, run_mend):
    """autocast-keeps-original compares the mended file with the version before the rewrite: `mend
    cert verify` re-runs it from the original file the certificate names (hash-checked)."""
    shutil.copy(FIXTURES / "hostcount_autocast_threshold.py", tmp_path / "t.py")
    code, out, err = run_mend("fix", str(tmp_path / "t.py"), "--out", str(tmp_path / "out"), "--examples", "3",
                              "--unsafe-fixes")
    assert code == 0, out + err
    (cert,) = (tmp_path / "out" / "certificates").glob("*.json")
    doc = json.loads(cert.read_text())
    assert any(o["kind"] == "autocast-keeps-original" and o["result"] == "checked" for o in doc["obligations"])
    code, out, err = _verify(run_mend, cert)
    assert code == 0 and "re-run" in out, out + err
    # without the original file the certificate fails (the file it names is missing); the check
    # itself re-runs on the original rebuilt from the certificate's diff, hash-checked (helper-42)
    (tmp_path / "t.py").unlink()
    code, out, err = _verify(run_mend, cert)
    assert code != 0 and "is missing" in out and "autocast-keeps-original" not in out, out + err
    # and with a mended file the diff does not undo, the check is unknown, never passed
    mended = tmp_path / "out" / "t.py"
    mended.write_text(mended.read_text() + "\n")
    code, out, err = _verify(run_mend, cert)
    assert code != 0 and "changed since" in out, out + err


def test_unpatch_undoes_a_unified_diff_and_refuses_one_that_does_not_fit():
    import difflib

    from verifier.certs import unpatch
    before = "".join(f"line {i}\n" for i in range(30))
    after = before.replace("line 3\n", "line 3\nadded\n").replace("line 20\n", "changed 20\n")
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), "a/f.py", "b/f.py"))
    assert unpatch(after, diff) == before
    assert unpatch(after.replace("changed 20", "other 20"), diff) is None
    assert unpatch(after, "") is None
