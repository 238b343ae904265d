"""Import overlay: make a program load mended copies of installed modules.

``mend fix`` never edits files inside installed packages. It writes their mended copies
under ``DIR/<package path>`` (``mended/transformers/models/t5/modeling_t5.py``), and
``activate(DIR)`` installs a meta-path finder that serves those files in place of the
installed ones. Packages themselves (``__init__.py``) still come from site-packages, so
only the mended modules change. Source: PEP 451 (module specs) and importlib's finders.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path


class OverlayFinder(importlib.abc.MetaPathFinder):
    """Finds ``a.b.c`` at ``root/a/b/c.py`` when that file exists."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def find_spec(self, fullname, path=None, target=None):
        candidate = self.root.joinpath(*fullname.split(".")).with_suffix(".py")
        if candidate.is_file():
            return importlib.util.spec_from_file_location(fullname, candidate)
        return None

    def modules(self) -> list[str]:
        """Dotted names of every module the overlay replaces."""
        return sorted(".".join(p.relative_to(self.root).with_suffix("").parts)
                      for p in self.root.rglob("*.py") if p.name != "__init__.py")


def activate(directory: str | Path) -> OverlayFinder:
    """Serve the mended modules under ``directory`` from now on.

    Raises RuntimeError when a module to replace was already imported (the old code
    would keep running): activate the overlay before importing the library.
    """
    finder = OverlayFinder(Path(directory))
    if not finder.root.is_dir():
        raise FileNotFoundError(f"overlay directory {finder.root} does not exist")
    stale = [m for m in finder.modules() if m in sys.modules]
    if stale:
        raise RuntimeError(f"already imported, activate the overlay first: {', '.join(stale)}")
    sys.meta_path.insert(0, finder)
    return finder


def deactivate(finder: OverlayFinder) -> None:
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)
