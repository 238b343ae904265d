"""proofs/: every lemma file replays with z3 to the answer its header states."""
import re
from pathlib import Path

import pytest
import torch
import z3

PROOFS = Path(__file__).resolve().parents[1] / "proofs"
FILES = sorted(PROOFS.glob("*.smt2"))


def _header(path: Path) -> dict:
    meta = {}
    for line in path.read_text().splitlines():
        m = re.match(r"; (summary|rule|expect|arithmetic): (.*)", line)
        if m:
            meta[m.group(1)] = m.group(2).strip()
    return meta


def test_there_is_a_lemma_per_rule_schema():
    rules = {_header(p)["rule"].split(" ")[0] for p in FILES}
    assert {"predicated-control-flow", "deferred-side-effects", "predicated-validation", "host-count-reduction"} <= rules
    names = {p.name for p in FILES}
    assert {"pcf_where_ite_fp32.smt2", "pcf_where_ite_fp16.smt2", "pcf_where_ite_bf16.smt2",
            "pv_assert_async.smt2", "dse_replay_order.smt2", "hc_compare_exact.smt2"} <= names


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_lemma_replays(path):
    meta = _header(path)
    assert meta.get("summary") and meta.get("expect") in ("sat", "unsat"), "header needs summary and expect"
    assert "\n" not in meta["summary"]
    solver = z3.Solver(ctx=z3.Context())  # a fresh context: the answer does not depend on earlier tests
    solver.set("timeout", 30_000)
    solver.from_file(str(path))
    assert str(solver.check()) == meta["expect"], path.name


def test_readme_lists_every_lemma():
    readme = (PROOFS / "README.md").read_text()
    for p in FILES:
        assert f"`{p.name}`" in readme


def test_promotion_table_matches_torch():
    text = (PROOFS / "pcf_dtype_promotion.smt2").read_text()
    table = dict(((a, b), r) for a, b, r in re.findall(r"\(ite \(and \(= x (\w+)\) \(= y (\w+)\)\) (\w+)", text))
    assert len(table) == 100
    for (a, b), r in table.items():
        assert str(torch.promote_types(getattr(torch, a), getattr(torch, b))) == f"torch.{r}", (a, b)


def test_lemma_negation_is_not_vacuous():
    """Dropping the negated claim leaves satisfiable premises (the lemma is not proved by
    contradictory assumptions)."""
    for path in FILES:
        text = path.read_text()
        last = text.rfind("(assert (not")
        if last < 0:
            continue
        solver = z3.Solver(ctx=z3.Context())
        solver.set("timeout", 30_000)
        solver.from_string(text[:last] + "(check-sat)\n")
        assert solver.check() == z3.sat, path.name
