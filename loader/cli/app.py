"""The ``spanner-loader`` command group and the process around it: the entry point, errors
turned into one ``error:`` line and a ``hint:``, exit codes, and a quiet exit."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, NoReturn, Optional

import click

from ..errors import ExitCode, LoaderError
from .flags import speak_flags

log = logging.getLogger("loader")


def _help_hint() -> str:
    """Where to read about the options of the command being run."""
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if command in cli.commands:
        return f"see `spanner-loader {command} --help`"
    return "see `spanner-loader --help`"


def _load_only(e: click.exceptions.ClickException) -> Optional[str]:
    """The hint for a flag of ``load`` given to a command without it (a load's command line
    pasted into verify: --incremental, -q)."""
    command = _command()
    name = getattr(e, "option_name", None)
    if not isinstance(e, click.exceptions.NoSuchOption) or command is None or not name:
        return None
    load = cli.commands.get("load")
    if load is None or command is load or not any(name in p.opts for p in load.params):
        return None
    why = (
        " (verify compares the tables with every source as it is now)"
        if command.name == "verify" and name == "--incremental"
        else ""
    )
    return (
        f"{name} is an option of `spanner-loader load`, not of {command.name}: leave it "
        f"out{why}; see `spanner-loader {command.name} --help`"
    )


def _command() -> Optional[click.Command]:
    """The (sub)command the command line runs, as far as its words name one."""
    command: click.Command = cli
    for arg in sys.argv[1:]:
        if arg.startswith("-"):
            continue
        if not isinstance(command, click.Group) or arg not in command.commands:
            break
        command = command.commands[arg]
    return None if command is cli else command


def _fail(e: LoaderError) -> None:
    """The one error line and its hint, options named by the flags of the command that ran."""
    command = _command()
    click.echo(f"error: {speak_flags(e.message, command)}", err=True)
    click.echo(f"hint: {speak_flags(e.hint, command) if e.hint else _help_hint()}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _print_version(ctx, value),
    help="Show the version, and whether the compiled parts are in use, and exit.",
)
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """Bulk-load CSV files from Cloud Storage or local disk into Cloud Spanner.

    Rows are sorted by primary key and committed in batches that respect Spanner's per-commit
    mutation and size limits, in parallel, with retry.

    \b
    Example:
      spanner-loader load examples/shop/Customers.csv --table Customers \\
          --emulator --ddl schemas/shop.sql --database shop
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if verbose == 0:  # --runner: Beam's own warnings and its workers' tracebacks only with -v
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_beam)


def _not_beam(record: logging.LogRecord) -> bool:
    """False for a record logged by Apache Beam (its name, or its code through the root logger,
    such as "apitools not found" at import): a failed pipeline is told as one line."""
    return not (record.name.startswith("apache_beam") or "/apache_beam/" in record.pathname)


def _print_version(ctx: click.Context, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    from .. import native

    try:
        number = version("spanner-loader")
    except PackageNotFoundError:  # run from a source tree that was never installed
        number = "unknown (not installed)"
    click.echo(f"spanner-loader, version {number}")
    click.echo(f"compiled parts: {native.status()}")
    ctx.exit()


def _quiet_unraisable(unraisable: Any) -> None:
    """Errors Python cannot raise (in a callback from C) are logged, not printed as a
    traceback: pyarrow's invalid-row callback fails on a row that is not UTF-8, and Arrow then
    reports the row itself as a parse error, which the user is told about."""
    log.debug("ignored in %r: %r", unraisable.object, unraisable.exc_value)


def _run() -> int:
    """Run the command line; its exit code (errors shown as one line and a hint)."""
    sys.unraisablehook = _quiet_unraisable
    try:
        cli.main(standalone_mode=False)
    except SystemExit as e:  # a command's own sys.exit(code)
        return _exit_code(e.code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return int(ExitCode.INTERRUPTED)
    except click.exceptions.ClickException as e:
        # one line and a hint, like every other error (not click's Usage: block)
        click.echo(f"error: {e.format_message()}", err=True)
        click.echo(f"hint: {_load_only(e) or _help_hint()}", err=True)
        return int(ExitCode.USAGE)
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except LoaderError as e:
        _fail(e)
        return int(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return int(ExitCode.INTERRUPTED)
    except Exception as e:  # noqa: BLE001 - the last line of defence against a traceback
        if log.isEnabledFor(logging.DEBUG):
            raise
        message = getattr(e, "message", None) or str(e) or type(e).__name__
        click.echo(f"error: {type(e).__name__}: {message.splitlines()[0]}", err=True)
        click.echo(
            "hint: this is unexpected; run again as `spanner-loader -vv COMMAND ...` (-vv "
            "before the command) for the details, and report it",
            err=True,
        )
        return int(ExitCode.FAILED)
    return int(ExitCode.OK)


def _exit_code(code: object) -> int:
    """What the interpreter would exit with for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)
    return 1


def _leave(code: int) -> NoReturn:
    """End the process with ``code`` once the output is flushed, skipping interpreter teardown.

    A process that used Arrow's CSV reader can abort while the interpreter tears down, after
    all its work is done ("terminate called without an active exception", Arrow's threads
    winding down; apache/arrow#34314): a finished load would exit with SIGABRT instead of its
    documented code. Everything the loader must finish (commits, checkpoints, the report,
    rejects) is finished before the command returns; the readers are released here as at
    exit (loader.parse.gate), and the logs and standard streams flushed.
    """
    gate = sys.modules.get("loader.parse.gate")  # not imported: no reader was ever opened
    if gate is not None:
        gate.release_readers()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with it closed (`>&-`): nothing was said there
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)
