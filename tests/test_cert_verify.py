"""mend cert verify: a certificate holds only while its files, queries and content are
exactly what mend fix wrote; any changed byte fails with a message and exit 1."""
import json
import shutil

import jsonschema
import pytest

from mend.report import schema
from tests.conftest import FIXTURES
from verifier import certs


@pytest.fixture(scope="module")
def issued(tmp_path_factory):
    """`mend fix FILE --out out --verify strict` on two fixtures: certificates of all three rules."""
    from click.testing import CliRunner

    from mend.cli import main

    root = tmp_path_factory.mktemp("certs")
    for name in ("branch_where.py", "mixed.py"):
        shutil.copy(FIXTURES / name, root / name)
        r = CliRunner().invoke(main, ["fix", str(root / name), "--out", str(root / "out"), "--verify", "strict",
                                      "--examples", "5"])
        assert r.exit_code == 0, r.output
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
        assert doc["schema_version"] == "0.2" and doc["verification"]["level"] == "strict"
        assert all(o["result"] == "proved" and o["smtlib"].count("(check-sat)") == 1 and o["solver"].startswith("z3")
                   for o in doc["obligations"])
        rules.add(doc["rule"])
    assert rules == {"predicated-control-flow", "deferred-side-effects", "predicated-validation"}
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


def test_changed_query_fails_even_when_resealed(work, run_mend):
    """A query swapped for an easier one (still unsat) is not the obligation's encoding."""
    root, found = work
    cert = found[0]

    def weaken(doc):
        o = doc["obligations"][0]
        o["smtlib"] = o["smtlib"].replace("(check-sat)", "(assert false)\n(check-sat)")
    _reseal(cert, weaken)
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "is not the encoding of this obligation" in out


def test_one_changed_byte_of_a_query_fails(work, run_mend):
    root, found = work
    cert = found[0]
    raw = cert.read_text()
    i = raw.index('"smtlib": "') + len('"smtlib": "') + 3
    cert.write_text(_flip(raw, i))
    code, out, _ = _verify(run_mend, cert)
    assert code == 1 and "FAILED" in out


def test_flipped_result_fails_on_replay(work, run_mend):
    root, found = work
    cert = found[0]

    def flip(doc):
        doc["obligations"][0]["status"] = "sat"
        doc["obligations"][0]["result"] = "refuted"
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
    code, out, err = run_mend("fix", f"{tmp_path / 'mixed.py'}:factory", "--out", str(tmp_path / "out"),
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
    code, _, err = run_mend("fix", str(tmp_path / case.name), "--verify", "strict", "--out", str(tmp_path / "out"),
                            "--examples", "3")
    assert code == 0, err
    (cert,) = (tmp_path / "out" / "certificates").glob("*.json")
    assert any(o["kind"] == "cond-taken-side-only" for o in json.loads(cert.read_text())["obligations"])
    code, out, err = _verify(run_mend, cert)
    assert code == 0, out + err
