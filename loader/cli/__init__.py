"""The command line: parse options, call the core, print the report, map errors to exit codes.

No parsing, converting or committing logic lives here. One module per command
(``load_validate``, ``verify``, ``presplit``, ``emulator``, ``bench``) on the group of :mod:`.app`; the
options they share and the config they build are in :mod:`.options`; sectioned ``--help`` in
:mod:`.help`.
"""

from __future__ import annotations

from . import bench, emulator, load_validate, presplit, verify  # noqa: F401 - each registers its commands
from .app import _exit_code, _run, cli, main
from .load_validate import load

__all__ = ["cli", "main", "load", "_run", "_exit_code"]
