"""spanner-loader: bulk-load CSV into Cloud Spanner.

The library API::

    from loader import LoadConfig, Target, TableJob, load
    report = load(config)          # -> LoadReport
"""

from .config import LoadConfig, TableJob, Target
from .errors import ExitCode, LoaderError
from .pipeline import load
from .progress import Progress
from .report import LoadReport

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
