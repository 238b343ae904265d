"""Tests for the built-in transformers catalogue (mend.targets.hf).

Every row is built and run eagerly (cheap: tiny configs); graph-break counts
are checked with torch._dynamo.explain for two quick rows only, since explain
on every row is too slow for the unit suite.
"""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mend.targets.hf import (
    CATALOGUE,
    CatalogueEntry,
    CatalogueUnavailable,
    UnknownTarget,
    build,
)

ROWS = [
    "t5", "biogpt", "blenderbot", "marian", "pegasus", "phi3", "whisper",
    "bart", "bart@fp16", "layoutlmv3", "longformer", "grounding-dino",
]


@pytest.fixture
def transformers():
    return pytest.importorskip("transformers")


def _tensors(out):
    """Every tensor in a model output (ModelOutput, tuples, nested caches skipped)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    return []


def _run(name):
    model, args, kwargs = build(name)
    with torch.no_grad():
        return model, args, _tensors(model(*args, **kwargs))


def test_catalogue_rows():
    assert list(CATALOGUE) == ROWS
    for name, entry in CATALOGUE.items():
        assert isinstance(entry, CatalogueEntry)
        assert entry.name == name
        assert entry.description and "\n" not in entry.description
    assert CATALOGUE["bart"].paper_breaks is None
    assert CATALOGUE["bart@fp16"].paper_breaks == 7


def test_unknown_name():
    with pytest.raises(UnknownTarget, match="known targets: t5, biogpt") as info:
        build("no-such-model")
    assert isinstance(info.value, ValueError)


def test_module_imports_without_transformers():
    # A None entry in sys.modules makes `import transformers` fail.
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "from mend.targets import hf\n"
        "try:\n    hf.build('t5')\nexcept hf.CatalogueUnavailable as e:\n    print(e)\n"
    )
    repo_root = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo_root)
    assert res.returncode == 0, res.stderr
    assert "not installed" in res.stdout


def test_missing_model_class(transformers, monkeypatch):
    entry = dataclasses.replace(CATALOGUE["t5"], model_class="NoSuchModelClass")
    monkeypatch.setitem(CATALOGUE, "t5", entry)
    with pytest.raises(CatalogueUnavailable, match="NoSuchModelClass"):
        build("t5")


@pytest.mark.parametrize("name", ROWS)
def test_builds_runs_and_is_deterministic(transformers, name):
    model, args, first = _run(name)
    assert not model.training
    assert args == ()
    assert first, "forward returned no tensors"
    _, _, second = _run(name)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert torch.equal(a, b)  # same seed => bitwise-identical output


def test_fp16_row_is_half(transformers):
    model, _, kwargs = build("bart@fp16")
    assert next(model.parameters()).dtype == torch.float16
    assert kwargs["input_ids"].dtype == torch.long


@pytest.mark.parametrize("name, site", [
    ("t5", "modeling_t5.py"),
    ("biogpt", "modeling_biogpt.py"),
])
def test_break_counts(transformers, name, site):
    import torch._dynamo

    torch._dynamo.reset()
    model, args, kwargs = build(name)
    with torch.no_grad():
        ex = torch._dynamo.explain(model)(*args, **kwargs)
    expected = CATALOGUE[name].expected_breaks
    assert (ex.graph_count, ex.graph_break_count) == (expected + 1, expected)
    assert all(r.user_stack[-1].filename.endswith(site) for r in ex.break_reasons)
