"""Every failure the loader knows, modelled once.

Each error carries the exit code the CLI returns for it and a hint for the user; ``transient``
marks the ones worth retrying. The CLI turns a :class:`LoaderError` into one line
``error: <message>`` plus ``hint: <hint>`` and exits with :attr:`LoaderError.exit_code`.

Messages and hints speak the library's words, not the command line's. An option is named
by the keyword a library user sets (a field of LoadConfig, Target or the dialect) between
backticks, alone or as name=value with the value as Python writes it (its repr), e.g.::

    more than `max_bad_rows` (10) bad rows
    re-run with `restart=True`, or with `mode='upsert'`

:func:`option` writes one. The CLI rewrites each into the flag of the command that ran
(--max-bad-rows, --restart, --mode upsert; loader/cli/flags.py), so ``str(error)`` from
:func:`loader.load` never mentions a flag; a name the command has no flag for is left as it
is. Backticks around anything else (a command to run) are not touched.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Optional

_NO_VALUE: Any = object()


def option(name: str, value: Any = _NO_VALUE) -> str:
    """How a message names the option ``name``: option("restart", True) is the text
    `restart=True` (backticks included); see the module docstring."""
    return f"`{name}`" if value is _NO_VALUE else f"`{name}={value!r}`"


class ExitCode(IntEnum):
    """Documented process exit codes (README "Exit codes")."""

    OK = 0
    """Every source row was written."""
    FAILED = 1
    """The load failed: a permanent Spanner error, retries exhausted, or an internal error."""
    USAGE = 2
    """Bad flag, bad configuration, unknown table or column, unreadable source."""
    REJECTED_ROWS = 3
    """The load finished, but some rows were rejected (within ``max_bad_rows``)."""
    TOO_MANY_BAD_ROWS = 4
    """The load stopped because more than ``max_bad_rows`` rows were rejected."""
    INTERRUPTED = 5
    """Stopped by SIGINT/SIGTERM after recording progress; re-run to resume."""
    VERIFY_MISMATCH = 6
    """verify found the table differs from the source."""
    BUSY = 7
    """Another run of the same load job is in progress; try again when it has ended."""
    NOT_RESTORED = 8
    """The rows are loaded, but an index or foreign key the load deferred could not be
    re-created (e.g. a duplicate key under a unique index); verify: one is still missing."""


AGAIN_WHEN_FIXED = (
    f", then run the load again (with {option('restart', True)} if rows of it were written)"
)
"""How a hint for a source refused part way through ends: after the fix, its rows go again."""


class LoaderError(Exception):
    """Base of all loader errors.

    Every class says whether it is ``transient`` (the same command may succeed later without
    a change: a network failure, another run holding the job) or terminal (something must
    change first: a flag, the data, a permission). ``report`` is the partial report of the
    load that failed (set by :func:`loader.load`; None for errors raised before it starts).
    """

    exit_code: ExitCode = ExitCode.FAILED
    transient: bool = False
    report: Any = None

    def __init__(self, message: str, hint: Optional[str] = None) -> None:
        # the hint is an argument too, so a copy made from ``args`` keeps it: a pickle, or
        # Beam's copy with the step's name added to the message (a worker's error)
        super().__init__(message, hint)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def of(self, where: str) -> LoaderError:
        """The same error, said of ``where`` (a source, when several are read)."""
        return type(self)(f"{where}: {self.message}", self.hint)


class ConfigError(LoaderError):
    """A bad option value or combination."""

    exit_code = ExitCode.USAGE
    transient = False


class SchemaError(LoaderError):
    """The target database, table or a column does not match what the load needs."""

    exit_code = ExitCode.USAGE
    transient = False


class SourceError(LoaderError):
    """A source cannot be listed, opened or read.

    A bad name, a missing object or a refused permission exits 2; a network failure that
    outlasted the retries (``transient``) exits 1, like a commit that kept failing.
    """

    exit_code = ExitCode.USAGE
    transient = False

    def __init__(self, message: str, hint: Optional[str] = None, transient: bool = False) -> None:
        super().__init__(message, hint)
        self.args = (message, hint, transient)
        self.transient = transient
        if transient:
            self.exit_code = ExitCode.FAILED


class ConnectError(LoaderError):
    """A Spanner or Cloud Storage endpoint cannot be resolved, does not answer within the
    connect timeout, or does not speak the protocol expected of it."""

    exit_code = ExitCode.USAGE
    transient = True


class TooManyBadRows(LoaderError):
    """More rows were rejected than ``max_bad_rows`` allows."""

    exit_code = ExitCode.TOO_MANY_BAD_ROWS
    transient = False
    generic_advice: bool = False
    """The hint ends in the advice for rows the loader itself refused (``FIX_ADVICE`` of
    loader/rejects.py), which a runner that knows nothing is committed may replace."""


class CommitError(LoaderError):
    """A commit failed permanently, or transient failures outlasted ``max_retry_time``."""

    exit_code = ExitCode.FAILED
    transient = False


class StateError(LoaderError):
    """The checkpoint state cannot be read or written, or does not match the sources."""

    exit_code = ExitCode.USAGE
    transient = False


class LeaseHeld(StateError):
    """Another run of the same job holds its lease (or its local state file is locked)."""

    exit_code = ExitCode.BUSY
    transient = True


class NotRestored(LoaderError):
    """A deferred index or foreign key could not be re-created after the load (the rows stay
    loaded; the next run of the load tries again)."""

    exit_code = ExitCode.NOT_RESTORED
    transient = False


class Interrupted(LoaderError):
    """The load was stopped by a signal after recording its progress."""

    exit_code = ExitCode.INTERRUPTED
    transient = True


def not_spanner(e: BaseException) -> Optional[str]:
    """The hint for ``e`` when the server that answered is not Spanner (an emulator's port
    taken by another gRPC service, a web server or proxy at the address): None otherwise."""
    import os

    message = str(getattr(e, "message", e))
    # (gRPC's own words for a service the server does not have; not any UNIMPLEMENTED,
    # which Spanner itself may answer for a call it does not support)
    foreign_grpc = "Method not found" in message or "unknown service" in message.lower()
    if not (foreign_grpc or "Received http2 header with status" in message):
        return None
    host = os.environ.get("SPANNER_EMULATOR_HOST")
    if host:
        return (
            f"the server at SPANNER_EMULATOR_HOST ({host}) is no Spanner emulator"
            + (" (a gRPC service of another kind)" if foreign_grpc else "")
            + ": point it at one (`spanner-loader emulator start` prints the line to export)"
        )
    return (
        "a proxy or another server answered for Spanner's endpoint: check the network's proxy "
        "settings (HTTPS_PROXY, NO_PROXY)"
    )
