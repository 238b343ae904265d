"""helper-85's F3: mend.validation_runtime restores a mended check's exception when the mended
file is loaded twice under one module name (an eval harness loading each candidate), each load
with its own exception class, and when the module's name holds a space or a colon. The fixture
is a mended file as `mend fix` wrote it (`if torch.isnan(x).any(): raise NaNInputError(...)`)."""
from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from mend import validation_runtime as vr
from tests.conftest import FIXTURES

PATH = FIXTURES / "mended_custom_exc.py"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _raised(model, backend):
    torch._dynamo.reset()
    fn = model if backend is None else torch.compile(model, backend=backend)
    with pytest.raises(ValueError) as info:
        fn(torch.full((2, 4), float("nan")))
    return info.value


@pytest.mark.parametrize("backend", [None, "eager"])
def test_each_load_restores_its_own_exception_class(backend):
    first = _load("mend_twice_candidate")
    model1 = vr.install(first.Model().eval())
    second = _load("mend_twice_candidate")   # sys.modules now holds the second load
    model2 = vr.install(second.Model().eval())
    for mod, model in ((first, model1), (second, model2)):
        err = _raised(model, backend)
        assert type(err) is mod.NaNInputError and str(err) == "input contains NaN"


@pytest.mark.parametrize("name", ["mend candidate 1", "mend:pkg:model"])
def test_a_module_name_with_a_space_or_a_colon_is_restored(name):
    mod = _load(name)
    err = _raised(vr.install(mod.Model().eval()), "eager")   # compiled: the assert in the graph
    assert type(err) is mod.NaNInputError


def test_without_install_eager_raises_the_original_and_compiled_the_marker():
    """helper-102: the guard's first clause, ``torch.compiler.is_compiling()``, sends eager to the
    original check, so its exception is exact without the restore; compiled code asserts in the
    graph and raises the marker until ``install`` restores it."""
    mod = _load("mend_uninstalled")
    model = mod.Model().eval()
    err = _raised(model, None)
    assert type(err) is mod.NaNInputError and str(err) == "input contains NaN"
    torch._dynamo.reset()
    with pytest.raises(RuntimeError, match="mend-trap:mend_uninstalled:_MEND_TRAPS"):
        torch.compile(model, backend="eager")(torch.full((2, 4), float("nan")))
    torch._dynamo.reset()
