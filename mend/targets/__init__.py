"""Targets: what `mend` compiles and inspects.

Three forms are accepted (see README):

* ``path/to/file.py``: a file defining ``Model`` and ``get_inputs()`` (optionally
  ``get_init_inputs()`` and ``get_trap_inputs()``), as in ``shared/cases``.
* ``path/to/file.py:factory`` or ``package.module:factory``: a callable returning
  ``(model, args)`` or ``(model, args, kwargs)``.
* ``hf:NAME[@VARIANT]``: a transformers model from the built-in catalogue
  (:mod:`mend.targets.hf`), small config, random weights, nothing downloaded.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from mend.errors import TargetError


@dataclass
class Target:
    """A built model and its example inputs.

    ``model`` is in eval mode; ``args``/``kwargs`` are the example inputs the scan runs on.
    ``user_file`` is the single file that defines the model, when the target is one.
    ``rebuild`` builds a fresh ``Target`` of the same spec (same seed, same weights).
    """

    spec: str
    model: torch.nn.Module
    args: tuple
    kwargs: dict
    user_file: Path | None = None
    trap_inputs: tuple | None = None
    rebuild: Callable[[], "Target"] | None = field(default=None, repr=False)


def _short_exc(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0] if msg else ''}".rstrip(": ")


def _user_line(exc: BaseException, path: Path) -> str:
    """file:line of the deepest traceback frame inside ``path``, for error messages."""
    where = ""
    for fs in traceback.extract_tb(exc.__traceback__):
        if Path(fs.filename).resolve() == path.resolve():
            where = f"{path}:{fs.lineno}: "
    return where


def load_file_module(path: Path, module_name: str | None = None):
    """Import a Python file by path. Raises TargetError on a missing file, a syntax
    error (with file:line) or an exception while importing."""
    if not path.is_file():
        raise TargetError(f"{path}: no such file")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"{path}: cannot be read ({_short_exc(exc)})") from exc
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise TargetError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from exc
    name = module_name or f"_mend_target_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise TargetError(f"{_user_line(exc, path)}importing {path} failed: {_short_exc(exc)}") from exc
    return module


def _as_inputs(value: Any, what: str) -> tuple:
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(value)
    raise TargetError(f"{what} must return a tuple of inputs, got {type(value).__name__}")


def _from_case_module(spec: str, path: Path, module) -> Target:
    if not hasattr(module, "Model"):
        raise TargetError(f"{path}: defines no `Model` class (a file target needs `Model` and `get_inputs()`, or use FILE:FACTORY)")
    if not callable(getattr(module, "get_inputs", None)):
        raise TargetError(f"{path}: defines no `get_inputs()` function")
    try:
        init = _as_inputs(module.get_init_inputs(), "get_init_inputs()") if hasattr(module, "get_init_inputs") else ()
        torch.manual_seed(0)
        model = module.Model(*init)
    except TargetError:
        raise
    except Exception as exc:
        raise TargetError(f"{_user_line(exc, path)}building Model() from {path} failed: {_short_exc(exc)}") from exc
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{path}: Model() is a {type(model).__name__}, not a torch.nn.Module")
    try:
        args = _as_inputs(module.get_inputs(), "get_inputs()")
        trap = _as_inputs(module.get_trap_inputs(), "get_trap_inputs()") if hasattr(module, "get_trap_inputs") else None
    except TargetError:
        raise
    except Exception as exc:
        raise TargetError(f"{_user_line(exc, path)}get_inputs() in {path} failed: {_short_exc(exc)}") from exc
    return Target(spec, model.eval(), args, {}, user_file=path.resolve(), trap_inputs=trap)


def _from_factory(spec: str, where: str, factory: Callable, user_file: Path | None) -> Target:
    try:
        torch.manual_seed(0)
        built = factory()
    except Exception as exc:
        raise TargetError(f"factory {where} failed: {_short_exc(exc)}") from exc
    if not isinstance(built, (tuple, list)) or len(built) not in (2, 3):
        raise TargetError(f"factory {where} must return (model, args) or (model, args, kwargs), got {type(built).__name__}"
                          + (f" of length {len(built)}" if isinstance(built, (tuple, list)) else ""))
    model, args = built[0], built[1]
    kwargs = built[2] if len(built) == 3 else {}
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"factory {where} returned a {type(model).__name__} as the model, not a torch.nn.Module")
    if not isinstance(kwargs, dict):
        raise TargetError(f"factory {where} returned kwargs of type {type(kwargs).__name__}, not a dict")
    return Target(spec, model, _as_inputs(args, f"factory {where}"), kwargs, user_file=user_file)


def _load_hf(spec: str) -> Target:
    from mend.targets import hf

    name = spec[3:]
    try:
        model, args, kwargs = hf.build(name)
    except (hf.UnknownTarget, hf.CatalogueUnavailable) as exc:
        raise TargetError(str(exc)) from exc
    return Target(spec, model, tuple(args), dict(kwargs))


def load_target(spec: str) -> Target:
    """Build the target named by ``spec`` and check that it runs on its example inputs.

    Raises TargetError (one line, names the cause) when the file does not parse or
    import, the factory fails or returns the wrong thing, the catalogue name is unknown,
    or the model raises on its own example inputs in eager mode.
    """
    if spec.startswith("hf:"):
        target = _load_hf(spec)
    else:
        file_part, _, attr = spec.partition(":")
        if file_part.endswith(".py") or Path(file_part).is_file():
            path = Path(file_part)
            module = load_file_module(path)
            if attr:
                factory = getattr(module, attr, None)
                if not callable(factory):
                    raise TargetError(f"{path}: has no callable `{attr}`")
                target = _from_factory(spec, f"{path}:{attr}", factory, path.resolve())
            else:
                target = _from_case_module(spec, path, module)
        elif attr:
            try:
                module = importlib.import_module(file_part)
            except Exception as exc:
                raise TargetError(f"cannot import module `{file_part}`: {_short_exc(exc)}") from exc
            factory = getattr(module, attr, None)
            if not callable(factory):
                raise TargetError(f"module `{file_part}` has no callable `{attr}`")
            target = _from_factory(spec, spec, factory, None)
        else:
            raise TargetError(f"{spec}: not a file, FILE:FACTORY, MODULE:FACTORY or hf:NAME target")
    target.rebuild = lambda: load_target(spec)
    check_runs(target)
    return target


def check_runs(target: Target) -> None:
    """Run the model eagerly once; a model that rejects its own inputs is a TargetError."""
    import contextlib
    import io
    import logging
    import warnings

    try:
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.CRITICAL)
            try:
                target.model(*target.args, **target.kwargs)
            finally:
                logging.disable(logging.NOTSET)
    except Exception as exc:
        where = _user_line(exc, target.user_file) if target.user_file else ""
        raise TargetError(f"{where}{target.spec}: the model rejected its example inputs in eager mode: {_short_exc(exc)}") from exc
