"""``load`` and ``validate``: build the config, run the core with progress and signals, print
the report, exit with its code."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from ..configfile import config_option
from ..outfiles import path_problem
from .app import cli
from .flags import speak_flags
from .help import SectionedCommand
from .options import (
    SIZE,
    UNLIMITED_BAD_ROWS,
    WRITE_ONLY,
    _build_config,
    _input_options,
    _output_options,
    _strategy_options,
    _target_options,
)
from .presplit import split_options


def _run_load(kw: dict[str, Any], dry_run: bool) -> None:
    # the handlers come first: a signal while the config is built and the core imported (a
    # few tenths of a second) stops the load before it reads, with its report
    stop = threading.Event()
    runner = kw.get("runner")
    building = True  # the config is read (a --manifest from a pipe may wait for its writer)

    def on_signal(signum: int, frame: Any) -> None:
        if building or stop.is_set():  # nothing begun yet, or a second signal: give up now
            raise KeyboardInterrupt
        doing = (
            "a Beam pipeline already running runs to its end, then the load stops (no other starts)"
            if runner
            else "finishing commits in flight, recording progress"
        )
        click.echo(f"\n{signal.Signals(signum).name}: {doing} (again to abort at once)", err=True)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        config = _build_config(kw, dry_run)  # a usage error is told before the core is imported
    except KeyboardInterrupt:
        from ..errors import ExitCode
        from . import EARLY

        click.echo(EARLY, err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    building = False
    from ..pipeline import load
    from ..progress import make_progress

    progress = make_progress(quiet=kw["quiet"], dry_run=config.dry_run)
    try:
        command = click.get_current_context().command
        # reject reasons name options as the command line sets them (a tryout's file said
        # "`ignore` it" where stderr said "--ignore it")
        report = load(
            config, progress=progress, stop=stop, reasons=lambda r: speak_flags(r, command)
        )
    except (Exception, KeyboardInterrupt) as e:  # a LoaderError, a bug, or a second signal
        progress.close()
        partial = getattr(e, "report", None)
        aborted = isinstance(e, KeyboardInterrupt)
        if aborted and partial is None:  # before the load began
            from ..errors import ExitCode
            from ..pipeline import ABORTED
            from ..report import LoadReport

            partial = LoadReport(
                database=config.target.path,
                mode=config.mode,
                dry_run=config.dry_run,
                error=ABORTED,
                exit_code=ExitCode.INTERRUPTED,
            )
        # a script that asked for the report gets one, with the error and exit code, also
        # when the load stopped before its first table (a missing table, a host that is down)
        # (the table of a run that failed before any table read a row, a file that does not
        # exist, is all zeros: the error says it all)
        if partial is not None and (
            _did_anything(partial) or kw["as_json"] or kw.get("report_path")
        ):
            _emit_report(partial, kw)
        elif partial is not None:  # its notes still (what stays dropped, an emulator started)
            command = click.get_current_context().command
            for n in partial.notes:
                click.echo(f"note: {speak_flags(n, command)}")
        if aborted and partial is not None and not kw["as_json"]:  # the CLI says "aborted"
            click.echo(partial.error, err=True)
        raise
    progress.close()
    _emit_report(report, kw)
    sys.exit(int(report.exit_code))


def _did_anything(report: Any) -> bool:
    """Whether a table of the report read, rejected, skipped or wrote a row, or found its job
    loaded (its sources done: a review, the note said so only in --json)."""
    return any(
        t.rows_read
        or t.rows_rejected
        or t.rows_skipped
        or t.commits
        or any(s.status == "done" for s in t.sources)
        for t in report.tables
    )


def _emit_report(report: Any, kw: dict[str, Any]) -> None:
    command = click.get_current_context().command
    report.notes = [speak_flags(n, command) for n in report.notes]
    if report.error:
        report.error = speak_flags(report.error, command)
    if report.hint:
        report.hint = speak_flags(report.hint, command)
    if kw.get("report_path"):
        try:
            Path(kw["report_path"]).write_text(report.to_json() + "\n", encoding="utf-8")
        except OSError as e:
            problem = path_problem(e, kw["report_path"])
            click.echo(f"warning: cannot write report {kw['report_path']}: {problem}", err=True)
    try:
        click.echo(report.to_json() if kw["as_json"] else report.render())
    except OSError as e:  # a full disk, a closed pipe: the load is done, its report unsaid
        problem = e.strerror or str(e)
        try:
            click.echo(
                f"warning: cannot write the report to standard output: {problem} (the load "
                f"ended with exit code {int(report.exit_code)}; --report FILE keeps it)",
                err=True,
            )
        except OSError:
            pass


@cli.command(cls=SectionedCommand)
@click.argument("sources", nargs=-1, metavar="[SOURCE]...")
@config_option(shared_with=("load", "validate", "verify"))
@_input_options
@_target_options
@_strategy_options
@split_options(on_load=True)
@_output_options
@click.option(
    "--dry-run/--no-dry-run",
    default=False,
    help="Read, convert, sort, encode and batch everything, but write nothing (with "
    "--emulator --ddl, the emulator's database is still created: the schema is read from it).",
)
@click.option(
    "--runner",
    metavar="RUNNER",
    help="Run each table's load as an Apache Beam pipeline on this runner (DirectRunner, "
    "DataflowRunner, ...); needs pip install 'spanner-loader[beam]'.",
)
@click.option(
    "--beam-option",
    "beam_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Beam pipeline option for --runner, passed on as --KEY=VALUE (repeatable), "
    "e.g. region=europe-west1; a flag is KEY alone (save_main_session). Checked with Beam's "
    "own parser before the load starts.",
)
@click.option(
    "--range-size",
    type=SIZE,
    default=None,
    help="With --runner: bytes of a plain file per byte range read by one worker "
    "[default: 128MiB].",
)
@click.option(
    "--key-ranges",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="With --runner: key ranges the sorted rows are grouped into [default: 0, one per "
    "byte range, more if the input would not fit in them at --buffer-size each].",
)
@click.option(
    "--beam-results",
    metavar="DIR_OR_GS_URI",
    default=None,
    help="With --runner: where workers leave rejects and commit counts for this command to "
    "collect [default: a temporary directory on DirectRunner/PrismRunner, else "
    "TEMP_LOCATION/spanner-loader-results].",
)
def load(**kw: Any) -> None:
    """Load CSV files into a Spanner table.

    SOURCE is a local path or glob, gs://bucket/object, gs://bucket/prefix/ (every object
    under it), a gs:// glob (*, **, ?, [...]), or - for stdin; a named pipe, /dev/stdin or
    <(zcat x.gz) is streamed like -. .gz files are decompressed.

    \b
    Examples:
      spanner-loader load customers.csv --table Customers \\
          --project my-project --instance my-instance --database shop
      spanner-loader load 'gs://shop-export/orders/*.csv.gz' --table Orders --database shop
      spanner-loader load --manifest examples/shop/manifest.json \\
          --emulator --ddl schemas/shop.sql --database shop

    Exit codes: 0 loaded, 1 failed, 2 usage or configuration error, or a source refused as
    written (a stray quote, say; rows before it may be written), 3 loaded with rejected rows,
    4 stopped at --max-bad-rows, 5 interrupted (re-run the same command to resume), 7
    another run of the same job is in progress, 8 loaded but a deferred index or foreign
    key could not be re-created.
    """
    _run_load(kw, kw.pop("dry_run"))


@cli.command(cls=SectionedCommand, hide=WRITE_ONLY)
@click.argument("sources", nargs=-1, metavar="[SOURCE]...")
@config_option(shared_with=("load", "validate", "verify"))
@_input_options
@_target_options
@_strategy_options
@_output_options
def validate(**kw: Any) -> None:
    """Check files against a table without writing anything (same as load --dry-run).

    Runs the whole read, convert, sort and batch path, reports every bad row to the reject
    file, and exits 0 when every row would load, 3 when some rows are bad (unless
    --max-bad-rows is given: then 4 past it).

    \b
    Example:
      spanner-loader validate orders.csv --table Orders --max-bad-rows 1000 \\
          --emulator --ddl schemas/shop.sql --database shop
    """
    source = click.get_current_context().get_parameter_source("max_bad_rows")
    if source in (None, click.core.ParameterSource.DEFAULT):
        kw["max_bad_rows"] = UNLIMITED_BAD_ROWS  # report every bad row, not the first
    _run_load(kw, True)
