"""The command line: parse options, call the core, print the report, map errors to exit codes.

No parsing, converting or committing logic lives here. One module per command
(``load_validate``, ``verify``, ``presplit``, ``emulator``, ``bench``) on the group of :mod:`.app`; the
options they share and the config they build are in :mod:`.options`; sectioned ``--help`` in
:mod:`.help`.

The entry point imports the commands itself (``cli``, ``load``, ... are imported when first
used), so that a signal during those imports is answered like any other interruption.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

__all__ = ["cli", "main", "load", "_run", "_exit_code"]

_COMMANDS = ("bench", "emulator", "load_validate", "presplit", "verify")
"""The modules that register their commands on the group."""

EARLY = "interrupted before the command began: nothing was read or written"
"""What a signal during start-up (before a command sets its own handlers) is answered with."""


def main() -> None:
    """Console-script entry point. SIGTERM interrupts like Ctrl-C from the first instant (its
    default ends the process with no word, and no report, while the commands import), and an
    interruption then is one line and exit 5, not a traceback."""
    try:
        import signal  # here: its import alone takes a few hundredths of a second

        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.default_int_handler)
        app = _commands()
    except KeyboardInterrupt:
        import os

        from ..errors import ExitCode

        sys.stderr.write(EARLY + "\n")
        sys.stderr.flush()
        # not SystemExit: a signal that lands inside an import left the interpreter to end
        # the process by SIGINT after it (exit 130) in about one start in five (a tryout)
        os._exit(int(ExitCode.INTERRUPTED))
    code = app._run()
    for sig in (signal.SIGINT, signal.SIGTERM):  # the command is over: its code stands
        signal.signal(sig, signal.SIG_IGN)
    app._leave(code)


def _commands() -> Any:
    """:mod:`.app`, with every command registered on its group."""
    for name in _COMMANDS:
        import_module(f"{__name__}.{name}")
    return import_module(f"{__name__}.app")


def __getattr__(name: str) -> Any:
    if name in ("cli", "_run", "_exit_code"):
        return getattr(_commands(), name)
    if name == "load":
        _commands()
        return import_module(f"{__name__}.load_validate").load
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
