"""Writing the user's files: atomically, and never over one marked read-only."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """mend's own cache, kept between runs: ``$MEND_CACHE_DIR``, default ``~/.cache/mend``
    (the roofline peaks, the vector ISAs the C++ compiler supports)."""
    return Path(os.environ.get("MEND_CACHE_DIR") or Path.home() / ".cache" / "mend")


def write_cache(path: Path, text: str) -> None:
    """Write a file of mend's cache atomically (:func:`write_atomic`), its folder made first;
    a cache that cannot be written is not fatal (the answer is computed again next time)."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError:
        pass


def read_only(path: Path) -> bool:
    """Whether an existing ``path`` is read-only: not writable, or no write bit in its mode
    (root passes ``os.access``, yet a file marked read-only is the user's word)."""
    path = Path(path)
    return path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222)


def read_source(path: Path) -> str:
    """A source file's text as it is on disk, line endings included (``\r\n`` kept: a file
    written back with ``\n`` would differ on every line; helper-57's CRLF file). Raises
    OSError / UnicodeDecodeError like ``Path.read_text``."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: a temporary file in the same folder, then
    ``os.replace``, so a reader never sees half a file. An existing file keeps its mode; a
    new one gets 0o644 less the umask. Raises OSError (the temporary file removed) when the
    folder cannot be written; callers check :func:`read_only` first and name the cause."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:   # the text's own line endings
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o644 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
