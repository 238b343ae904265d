"""Targets: what `mend` compiles and inspects.

Three forms are accepted (see README):

* ``path/to/file.py``: a file defining ``Model`` and ``get_inputs()`` (optionally
  ``get_init_inputs()`` and ``get_trap_inputs()``), as in ``shared/cases``.
* ``path/to/file.py:factory`` or ``package.module:factory``: a callable returning
  ``(model, args)`` or ``(model, args, kwargs)``.
* ``hf:NAME[@VARIANT]``: a transformers model from the built-in catalogue
  (:mod:`mend.targets.hf`), small config, random weights, nothing downloaded;
  ``hf:newest/NAME``: the rows for the newest transformers release
  (:mod:`mend.targets.hf_newest`, see benchmarks/run_newest.py).
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from mend.errors import InputsRejected, TargetError


@dataclass
class Target:
    """A built model and its example inputs.

    ``model`` is in eval mode and has never run; ``args``/``kwargs`` are the example inputs
    the scan runs on. ``user_file`` is the single file that defines the model, when the
    target is one. ``rebuild`` builds a fresh ``Target`` of the same spec (same seed, same
    weights) without running it.
    """

    spec: str
    model: torch.nn.Module
    args: tuple
    kwargs: dict
    user_file: Path | None = None
    trap_inputs: tuple | None = None
    rebuild: Callable[[], "Target"] | None = field(default=None, repr=False)


def file_of(spec: str) -> Path | None:
    """The Python file a ``FILE.py`` or ``FILE.py:FACTORY`` target names, else None."""
    if spec.startswith("hf:"):
        return None
    name = spec.rsplit(":", 1)[0] if ".py:" in spec else spec
    return Path(name) if name.endswith(".py") else None


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


@contextlib.contextmanager
def _first_on_sys_path(directory: str):
    """``directory`` first on sys.path for the duration: ``python file.py`` puts the file's
    directory there (sibling imports), ``python -m`` the current directory."""
    sys.path.insert(0, directory)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)


class _UncachedSourceLoader(importlib.machinery.SourceFileLoader):
    """A source loader that never reads or writes __pycache__: ``model.txt`` and
    ``model.py`` would share ``model.cpython-3XX.pyc``. (Without source stats,
    SourceLoader.get_code skips the bytecode cache both ways.)"""

    def path_stats(self, path):
        raise OSError("no bytecode cache for non-.py targets")


def load_file_module(path: Path, module_name: str | None = None):
    """Import a Python file by path, whatever its suffix, with its directory first on
    sys.path while it runs. Raises TargetError on a missing file or a directory, a syntax
    error (with file:line) or an exception while importing."""
    if path.is_dir():
        raise TargetError(f"{path}: is a directory, not a Python file")
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
    # an explicit loader: spec_from_file_location guesses by suffix and gives None for
    # `model.txt` or `x.py.bak`
    loader_cls = importlib.machinery.SourceFileLoader if path.suffix == ".py" else _UncachedSourceLoader
    spec = importlib.util.spec_from_file_location(name, path, loader=loader_cls(name, str(path)))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up here
    try:
        with _first_on_sys_path(str(path.resolve().parent)):
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
    hint = " (does it `return` its inputs?)" if value is None else ""
    raise TargetError(f"{what} must return a tuple of inputs, got {type(value).__name__}{hint}")


def _from_case_module(spec: str, path: Path, module) -> Target:
    if not hasattr(module, "Model"):
        raise TargetError(f"{path}: defines no `Model` class (a file target needs `Model` and `get_inputs()`, or use FILE:FACTORY)")
    if not callable(getattr(module, "get_inputs", None)):
        raise TargetError(f"{path}: defines no `get_inputs()` function")
    has_init = hasattr(module, "get_init_inputs")
    try:
        init = _as_inputs(module.get_init_inputs(), f"{path}: get_init_inputs()") if has_init else ()
        torch.manual_seed(0)
        model = module.Model(*init)
    except TargetError:
        raise
    except Exception as exc:
        hint = ""
        if isinstance(exc, TypeError) and "__init__()" in str(exc) and not has_init:
            hint = " (if Model() needs constructor arguments, define get_init_inputs() returning them)"
        raise TargetError(f"{_user_line(exc, path)}building Model() from {path} failed: {_short_exc(exc)}{hint}") from exc
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{path}: Model() is a {type(model).__name__}, not a torch.nn.Module")
    try:
        args = _as_inputs(module.get_inputs(), f"{path}: get_inputs()")
        trap = (_as_inputs(module.get_trap_inputs(), f"{path}: get_trap_inputs()")
                if hasattr(module, "get_trap_inputs") else None)
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
    # eval mode like the other target forms: the scan measures inference (dropout off)
    return Target(spec, model.eval(), _as_inputs(args, f"factory {where}"), kwargs, user_file=user_file)


def _load_hf(spec: str) -> Target:
    from mend.targets import hf

    try:
        model, args, kwargs = build_hf(spec[3:])
    except (hf.UnknownTarget, hf.CatalogueUnavailable) as exc:
        raise TargetError(str(exc)) from exc
    return Target(spec, model, tuple(args), dict(kwargs))


def build_hf(name: str) -> tuple[torch.nn.Module, tuple, dict]:
    """``(model, args, kwargs)`` of ``hf:NAME``: the built-in catalogue (:mod:`mend.targets.hf`),
    or, for ``newest/NAME``, the rows for the newest transformers release
    (:mod:`mend.targets.hf_newest`, used by ``benchmarks/run_newest.py``)."""
    from mend.targets import hf_newest

    if name.startswith(hf_newest.PREFIX):
        return hf_newest.build(name[len(hf_newest.PREFIX):])
    from mend.targets import hf

    return hf.build(name)


def _factory_of(module, attr: str, where: str) -> Callable:
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise TargetError(f"{where}: has no callable `{attr}`")
    return factory


def _builder(spec: str) -> Callable[[], Target]:
    """A function building a fresh, never-run Target of ``spec`` on each call.

    File targets are re-imported on each build, so module-level state starts afresh too.
    """
    if spec.startswith("hf:"):
        return lambda: _load_hf(spec)
    file_part, _, attr = spec.partition(":")
    path = Path(file_part)
    # a directory named alone or as a path (`models/:f`); `pkg:f` imports a package
    if path.is_dir() and (not attr or os.sep in file_part):
        raise TargetError(f"{path}: is a directory, not a Python file (name a file, FILE:FACTORY or MODULE:FACTORY)")
    if file_part.endswith(".py") or path.is_file():
        def build_file() -> Target:
            module = load_file_module(path)
            if not attr:
                return _from_case_module(spec, path, module)
            return _from_factory(spec, f"{path}:{attr}", _factory_of(module, attr, str(path)), path.resolve())
        return build_file
    if attr:
        def build() -> Target:
            # the current directory importable, as `python -m` makes it
            with _first_on_sys_path(os.getcwd()):
                try:
                    module = importlib.import_module(file_part)
                except Exception as exc:
                    raise TargetError(f"cannot import module `{file_part}`: {_short_exc(exc)}") from exc
                return _from_factory(spec, spec, _factory_of(module, attr, f"module `{file_part}`"), None)
        return build
    raise TargetError(f"{spec}: not a file, FILE:FACTORY, MODULE:FACTORY or hf:NAME target")


@contextlib.contextmanager
def _stdout_to_stderr():
    """User code may print while it is imported or built; stdout carries --json/--sarif."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def load_target(spec: str) -> Target:
    """Build the target named by ``spec`` and check that it runs on its example inputs.

    Every form (file, factory, hf:) gives the model in eval mode. The eager check runs
    on a separate, throwaway build, so the returned model has never run: its first call
    (lazy initialisation, step counters, first-call prints) is the one the scan compiles.
    Anything the user's code prints while loading goes to stderr, not stdout.

    Raises TargetError (one line, names the cause) when the file does not parse or
    import, the factory fails or returns the wrong thing, the catalogue name is unknown,
    or the model raises on its own example inputs in eager mode.
    """
    with _stdout_to_stderr():
        build = _builder(spec)
        check_runs(build())
        target = build()  # built last: for file targets sys.modules holds this module

    def rebuild() -> Target:
        with _stdout_to_stderr():
            fresh = build()
        fresh.rebuild = rebuild
        return fresh

    target.rebuild = rebuild
    return target


def check_runs(target: Target) -> None:
    """Run the model eagerly once; a model that rejects its own inputs is a TargetError.

    The run changes the model (first-call state), so pass a throwaway build."""
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
        raise InputsRejected(f"{where}{target.spec}: the model rejected its example inputs in eager mode: "
                             f"{_short_exc(exc)}", _short_exc(exc)) from exc
