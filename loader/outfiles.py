"""Local files a load writes (the reject file, the report, a local state file): a path is
checked before anything is loaded, and a message says why one cannot be written."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any


def check_writable(path: Path) -> None:
    """Raise the OSError that writing ``path`` would meet, before anything is loaded: makes
    missing parent folders and opens the file for appending; a file that did not exist is
    removed again (a load that writes nothing to it leaves none)."""
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8"):
        pass
    if not existed:
        try:
            path.unlink()
        except OSError:
            pass


def path_problem(e: OSError, path: Any) -> str:
    """Why ``path`` could not be written, for a message: the OS's words, but a folder on the
    way that is a file is named as such (mkdir says "File exists", open "Not a directory")."""
    if e.errno in (errno.EEXIST, errno.ENOTDIR):
        for parent in reversed(Path(path).parents):
            if parent.exists() and not parent.is_dir():
                return f"{parent} is a file, not a folder"
    return e.strerror or str(e)
