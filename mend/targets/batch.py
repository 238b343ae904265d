"""Batch targets: one command over many models (a model zoo gated in CI).

:func:`expand` turns the patterns a user gives into target specs, in a stable order:

* ``hf:*``, ``hf:bart*``: the built-in catalogue rows whose name matches (``fnmatch``);
  ``hf:newest/*``: the newest-transformers rows;
* ``models/*.py``, ``zoo/**/model.py``: the files a glob matches (sorted; ``**`` recurses);
* ``pkg.models:*``: every public function defined in that module (not imported into it)
  that takes no required argument: its factories;
* anything else: itself (``FILE.py``, ``FILE.py:FACTORY``, ``MODULE:FACTORY``, ``hf:NAME``).

A pattern that matches nothing is an error naming it: a typo must not pass as an empty
batch.
"""
from __future__ import annotations

import fnmatch
import glob
import importlib
import inspect
import os

from mend.errors import TargetError

_GLOB = set("*?[")


def expand(patterns: list[str] | tuple[str, ...]) -> list[str]:
    """The target specs ``patterns`` name, duplicates dropped (first kept).

    Raises TargetError for a pattern matching nothing or a ``MODULE:*`` whose module does
    not import."""
    out: dict[str, None] = {}
    for pattern in patterns:
        for spec in _expand_one(pattern):
            out.setdefault(spec, None)
    return list(out)


def _expand_one(pattern: str) -> list[str]:
    if pattern.startswith("hf:"):
        name = pattern[3:]
        if not _GLOB & set(name):
            return [pattern]
        from mend.targets.hf import CATALOGUE
        from mend.targets.hf_newest import NEWEST, PREFIX

        names = list(CATALOGUE) + [PREFIX + n for n in NEWEST]
        hits = [f"hf:{n}" for n in names if fnmatch.fnmatchcase(n, name) and (n.startswith(PREFIX) ==
                                                                               name.startswith(PREFIX))]
        if not hits:
            raise TargetError(f"{pattern}: matches no catalogue row (see mend scan --list-targets)")
        return hits
    file_part, sep, attr = pattern.partition(":")
    if sep and attr == "*":
        return _factories(file_part)
    if _GLOB & set(file_part):
        hits = sorted(p for p in glob.glob(file_part, recursive=True) if p.endswith(".py") and os.path.isfile(p))
        if not hits:
            raise TargetError(f"{pattern}: matches no Python file")
        return [h + (f":{attr}" if sep else "") for h in hits]
    return [pattern]


def _factories(module_name: str) -> list[str]:
    """``MODULE:NAME`` for each public function defined in ``module_name`` that can be
    called with no argument."""
    import sys

    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)  # as `python -m` makes the current directory importable
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise TargetError(f"{module_name}:*: cannot import module `{module_name}`: {type(exc).__name__}: {exc}") \
            from exc
    finally:
        if added:
            sys.path.remove(cwd)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or not inspect.isfunction(value) or value.__module__ != module.__name__:
            continue
        params = inspect.signature(value).parameters.values()
        if all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            names.append(f"{module_name}:{name}")
    if not names:
        raise TargetError(f"{module_name}:*: the module defines no public function callable without arguments")
    return names
