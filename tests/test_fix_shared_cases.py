"""Acceptance corpus for mend fix: ../shared/cases (skipped when absent).

yes: fixed; trap: rewritten correctly (trap inputs expose no difference) or declined;
no / control: untouched.
"""
import pytest
import torch

from mend.fix import fix
from mend.targets import load_file_module
from mend import validation_runtime
from tests.conftest import SHARED_CASES
from tests.test_shared_cases import ROWS

pytestmark = pytest.mark.skipif(not (SHARED_CASES / "README.md").is_file(), reason="../shared/cases is absent")

# "yes" cases whose fix needs a rule mend does not have yet (each documented in README)
KNOWN_GAPS: dict[str, str] = {}


def _run(model, args, compiled):
    m = torch.compile(model, backend="eager") if compiled else model
    try:
        with torch.no_grad():
            return ("ok", m(*args))
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))


def _same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] == "raised":
        return a == b
    xs = a[1] if isinstance(a[1], tuple) else (a[1],)
    ys = b[1] if isinstance(b[1], tuple) else (b[1],)
    return all((x is None and y is None) or (isinstance(x, torch.Tensor) and torch.equal(x.nan_to_num(), y.nan_to_num())
               and torch.equal(x.isnan(), y.isnan())) for x, y in zip(xs, ys))


@pytest.mark.parametrize("name, category, explain_breaks, graphs, reasons, fixable", ROWS, ids=[r[0] for r in ROWS])
def test_fix_case(name, category, explain_breaks, graphs, reasons, fixable, tmp_path):
    if name in KNOWN_GAPS:
        pytest.xfail(KNOWN_GAPS[name])
    res = fix(str(SHARED_CASES / name), unsafe_fixes=True, max_examples=10)
    if fixable.startswith("control") or fixable == "no":
        assert res.rewrites == [], res.rewrites
        assert res.mended == res.original
        return
    if fixable == "yes":
        assert res.rewrites, res.declined
        assert res.after.graph_break_count == 0, [(s.line, s.reason) for s in res.after.sites]
    if fixable == "trap" and not res.rewrites:
        assert res.declined or any(not s.fixable_by for s in res.after.sites)
        return
    # whatever was rewritten must behave like the original, eager and compiled
    mended = tmp_path / name
    mended.write_text(res.mended)
    orig_mod = load_file_module(SHARED_CASES / name, f"_t_orig_{name[:3]}")
    new_mod = load_file_module(mended, f"_t_new_{name[:3]}")
    inputs = [orig_mod.get_inputs()] + ([orig_mod.get_trap_inputs()] if hasattr(orig_mod, "get_trap_inputs") else [])
    for args in inputs:
        torch.manual_seed(0)
        a = orig_mod.Model().eval()
        b = new_mod.Model().eval()
        b.load_state_dict(a.state_dict())
        validation_runtime.install(b)
        ref = _run(a, args, compiled=False)
        assert _same(ref, _run(b, args, compiled=False))
        assert _same(ref, _run(b, args, compiled=True))
