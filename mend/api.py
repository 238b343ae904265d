"""The Python API: the engine of ``mend scan`` and ``mend fix`` on objects a program already
holds. Same detection, same rules, same verification, same results as the command line
(which builds on the same functions); the result types are the CLI's, with ``to_json()``
giving the documented JSON (``mend/schemas/scan.schema.json``, ``fix.schema.json``).

The field names and the JSON schemas are the stable surface: NVIDIA/apex#1894 shows what
happens to code that reads ``torch._dynamo.utils.counters`` directly.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from mend.errors import MendError

# as the CLI does: Hypothesis keeps its folder out of the user's working directory
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "mend-hypothesis"))
from mend.pipeline.records import FixResult
from mend.scan import ScanResult, Site, library_package


def scan_model(model, *args, **kwargs) -> ScanResult:
    """Compile ``model`` (an ``nn.Module`` or any callable) with TorchDynamo, call it on
    ``args``/``kwargs`` and return every graph break.

    The model is used as given (its train/eval mode is left alone; ``mend scan`` builds
    targets in eval mode). It is called twice (the second call gives ``steady_graph_count``), under
    ``torch.no_grad()`` and with its stdout, logging and warnings swallowed, as ``mend
    scan`` does; TorchDynamo's caches are reset before and after (``torch._dynamo.reset()``,
    as ``torch._dynamo.explain`` does), so compiled functions elsewhere in the process
    recompile on their next call. Nothing is rewritten.

    Returns a :class:`mend.scan.ScanResult`: ``graph_count`` (FX graphs of the first call),
    ``graph_break_count`` (every break Dynamo logged), ``sites`` (one
    :class:`mend.scan.Site` per source statement: ``file``, ``line``, ``category``,
    ``reason``, ``fixable_by``, ``origin``, ...), ``to_json()``.
    Raises TargetError when the compiled call fails where eager ran.
    """
    from mend.scan import scan
    from mend.targets import Target

    from mend.errors import TargetError

    name = getattr(type(model), "__qualname__", type(model).__name__)
    try:
        return scan(Target(spec=f"<{name} object>", model=model, args=tuple(args), kwargs=dict(kwargs)))
    except TargetError as exc:
        # say whether eager fails too (mend scan checks eager on a separate build first;
        # here the model is the user's own object, so eager runs only now, after the scan)
        try:
            import torch

            with torch.no_grad():
                model(*args, **kwargs)
        except Exception as eager:  # noqa: BLE001 - reported, with its type
            raise TargetError(f"<{name} object>: the model fails in eager mode too, on these inputs: "
                              f"{type(eager).__name__}: {str(eager).strip().splitlines()[0] if str(eager).strip() else ''}"
                              ) from exc
        raise


def fix_model(factory: Callable | str, *, verify: str = "standard", unsafe_fixes: bool = False, seed: int = 0,
              examples: int | None = None, rules: list[str] | None = None, exclude: list[str] = (),
              choose: str = "model") -> FixResult:
    """Rewrite and verify the fixable graph breaks of the model ``factory`` builds, as
    ``mend fix`` does. Nothing is written: apply the result with
    :func:`mend.pipeline.emit.emit` (``--write``/``--out``) or read ``result.diff()``.

    ``factory``: a module-level function returning ``(model, args)`` or ``(model, args,
    kwargs)`` (the verifier rebuilds the model many times, in fresh processes for installed
    code, so it needs a factory it can import, not a model object), or any target spec
    string (``FILE.py``, ``FILE.py:FACTORY``, ``MODULE:FACTORY``, ``hf:NAME``). The other
    arguments are the CLI's options (``--verify``, ``--unsafe-fixes``, ``--seed``,
    ``--examples``, ``--choose``, ``[tool.mend] rules`` and ``exclude``).

    Returns a :class:`mend.pipeline.records.FixResult`: ``before``/``after`` scans,
    ``rewrites`` (each with its obligations, evidence and fix safety), ``declined``,
    ``diff()``, ``to_json()``. Raises MendError for a factory that is not importable by
    name (a lambda, a nested function) and TargetError for a target that cannot be built.
    """
    from mend.pipeline import fix

    return fix(spec_of(factory), seed=seed, max_examples=examples, verify=verify, unsafe_fixes=unsafe_fixes,
               rules=rules, exclude=list(exclude), choose=choose)


def spec_of(factory: Callable | str) -> str:
    """The target spec naming ``factory``: ``MODULE:NAME`` for a function of a module that
    imports afresh to the same file, else ``FILE.py:NAME`` (a script, a file loaded by
    path). Raises MendError for a lambda, a nested function or a callable with no source
    file."""
    if isinstance(factory, str):
        return factory
    name = getattr(factory, "__qualname__", None)
    code = getattr(factory, "__code__", None)
    if not callable(factory) or not name or "<" in name or "." in name or code is None:
        raise MendError(f"{factory!r}: fix_model needs a module-level factory function (or a target spec string)")
    module = sys.modules.get(getattr(factory, "__module__", None) or "")
    file = code.co_filename
    # MODULE:NAME only where mend fix would find the module again: installed, or importable
    # from the working directory (the overlay executor imports from there)
    where_ok = library_package(file) is not None or Path(file).resolve().is_relative_to(Path.cwd().resolve())
    if module is not None and module.__name__ != "__main__" and getattr(module, name, None) is factory \
            and where_ok and _importable(module.__name__, file):
        return f"{module.__name__}:{name}"
    if not file.endswith(".py") or not Path(file).is_file():
        raise MendError(f"{factory!r}: its source file {file!r} cannot be loaded again")
    return f"{Path(file).resolve()}:{name}"


def _importable(module_name: str, file: str) -> bool:
    """Whether importing ``module_name`` afresh finds ``file`` (a test module imported by
    pytest under a rootdir-relative name may not be)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return False
    return bool(spec and spec.origin and Path(spec.origin).resolve() == Path(file).resolve())


__all__ = ["scan_model", "fix_model", "ScanResult", "Site", "FixResult", "spec_of"]
