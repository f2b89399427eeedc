"""spanner-loader: bulk-load CSV into Cloud Spanner.

The library API::

    from loader import LoadConfig, Target, TableJob, load
    report = load(config)          # -> LoadReport

The names are imported when first used, so that ``import loader`` (and every command that
needs only part of the package, ``--help`` first) does not pay for Arrow, gRPC and the
Google clients.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
"""The package's version (pyproject.toml reads it from here)."""

if TYPE_CHECKING:
    from .config import LoadConfig, TableJob, Target
    from .errors import ExitCode, LoaderError
    from .pipeline import load
    from .progress import Progress
    from .report import LoadReport

_WHERE = {
    "ExitCode": ".errors",
    "LoadConfig": ".config",
    "LoadReport": ".report",
    "LoaderError": ".errors",
    "Progress": ".progress",
    "TableJob": ".config",
    "Target": ".config",
    "load": ".pipeline",
}

__all__ = [
    "ExitCode",
    "LoadConfig",
    "LoadReport",
    "LoaderError",
    "Progress",
    "TableJob",
    "Target",
    "load",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'loader' has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
