"""Project configuration: ``[tool.mend]`` in ``pyproject.toml`` (as ruff reads
``[tool.ruff]``).

The nearest ``pyproject.toml`` from the working directory upward that has a ``[tool.mend]``
table is the project's; paths in it are relative to that file's folder. Command-line flags
override every key. The table is validated against ``mend/schemas/config.schema.json``; an
unknown key is an error naming the key.

Keys (all optional):

* ``targets``: target specs (``models/net.py``, ``pkg.mod:factory``, ``hf:t5``) scanned or
  fixed when the command line names none;
* ``verify``: ``fast`` | ``standard`` | ``strict`` (``mend fix --verify``);
* ``rules``: the rules ``mend fix`` may apply (names as ``mend rules`` lists them); a site
  of another rule is reported, not rewritten;
* ``exclude``: glob patterns of files whose sites are left out of the exit code and the
  baseline (``tests/*``, ``*/site-packages/transformers/*``), matched against the site's
  displayed path and its absolute path;
* ``baseline``: the baseline file of ``mend scan --baseline`` (see :mod:`mend.baseline`);
* ``only_user``: scope the exit code to sites in the user's tree (``--only-user``);
* ``unsafe_fixes``: ``mend fix --unsafe-fixes``;
* ``choose``: ``model`` | ``roofline`` | ``always`` | ``measure`` (``mend fix --choose``).
"""
from __future__ import annotations

import fnmatch
import json
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from mend.errors import MendError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ConfigError(MendError):
    """``[tool.mend]`` cannot be read or has a key or value mend does not know."""


@dataclass
class Config:
    """The settings of ``[tool.mend]``; ``path`` is the pyproject.toml they came from
    (None: no configuration found, every setting at its default)."""

    path: Path | None = None
    targets: list[str] = field(default_factory=list)
    verify: str | None = None
    rules: list[str] | None = None
    exclude: list[str] = field(default_factory=list)
    baseline: Path | None = None
    only_user: bool = False
    unsafe_fixes: bool = False
    choose: str | None = None

    def excluded(self, file: str, display_file: str) -> str | None:
        """The first ``exclude`` pattern a site's file matches (its path relative to the
        pyproject's folder, as displayed, or absolute), else None."""
        if self.path is not None:
            rel = os.path.relpath(file, self.path.parent)
            if not rel.startswith(".."):
                hit = matching(self.exclude, file, rel)
                if hit:
                    return hit
        return matching(self.exclude, file, display_file)


def rooted(patterns, root: Path | None) -> list[str]:
    """``patterns`` plus each relative one anchored at ``root`` (an absolute pattern), so
    that matching an absolute path does not depend on the working directory."""
    if root is None:
        return list(patterns)
    return list(patterns) + [str(root / p) for p in patterns if not os.path.isabs(p) and not p.startswith("*")]


def matching(patterns, file: str, display_file: str) -> str | None:
    """The first glob pattern matching a file's displayed or absolute path, else None."""
    return next((p for p in patterns if fnmatch.fnmatch(display_file, p) or fnmatch.fnmatch(file, p)), None)


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(resources.files("mend.schemas").joinpath("config.schema.json").read_text())


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.mend]`` table."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                doc = tomllib.loads(candidate.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"{candidate}: cannot be read as TOML: {exc}") from exc
            tool = doc.get("tool")
            if isinstance(tool, dict) and "mend" in tool:
                if not isinstance(tool["mend"], dict):
                    raise ConfigError(f"{candidate}: [tool.mend] must be a table, not {type(tool['mend']).__name__}")
                return candidate
    return None


def load(start: Path | None = None) -> Config:
    """The configuration of the project around ``start`` (default: the working directory).

    Raises ConfigError for unreadable TOML, an unknown key (named) or a value of the wrong
    type; an unknown rule name in ``rules`` is an error too (the rules are discovered)."""
    import jsonschema

    path = find_pyproject((start or Path.cwd()).resolve())
    if path is None:
        return Config()
    table = tomllib.loads(path.read_text())["tool"]["mend"]
    unknown = sorted(set(table) - set(_schema()["properties"]))
    if unknown:
        raise ConfigError(f"{path}: [tool.mend] has unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(repr(k) for k in unknown)} (known: {', '.join(sorted(_schema()['properties']))})")
    try:
        jsonschema.validate(table, _schema())
    except jsonschema.ValidationError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "[tool.mend]"
        raise ConfigError(f"{path}: [tool.mend] {where}: {exc.message}") from exc
    if "rules" in table:
        from mend.rules import RULES

        bad = [r for r in table["rules"] if r not in RULES]
        if bad:
            raise ConfigError(f"{path}: [tool.mend] rules: unknown rule {', '.join(repr(r) for r in bad)} "
                              f"(the rules: {', '.join(sorted(RULES))})")
    root = path.parent
    return Config(path=path,
                  targets=[_relative_target(t, root) for t in table.get("targets", [])],
                  verify=table.get("verify"),
                  rules=table.get("rules"),
                  exclude=list(table.get("exclude", [])),
                  baseline=(root / table["baseline"]) if "baseline" in table else None,
                  only_user=bool(table.get("only_user", False)),
                  unsafe_fixes=bool(table.get("unsafe_fixes", False)),
                  choose=table.get("choose"))


def _relative_target(spec: str, root: Path) -> str:
    """A FILE.py[:FACTORY] target is relative to the pyproject's folder; other forms as given."""
    if spec.startswith("hf:"):
        return spec
    file, sep, factory = spec.partition(".py:")
    if spec.endswith(".py") or sep:
        name = spec if not sep else file + ".py"
        p = Path(name)
        return str(p if p.is_absolute() else root / p) + (f":{factory}" if sep else "")
    return spec
