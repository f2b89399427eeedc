"""The command line: parse options, call the core, print the report, map errors to exit codes.

No parsing, converting or committing logic lives here.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import click

from .cli_help import SectionedCommand
from .config import (
    DATABASE_ENV,
    INSTANCE_ENV,
    MODES,
    PROJECT_ENV,
    LoadConfig,
    TableJob,
    Target,
    default_buffer_size,
    parse_size,
)
from .configfile import config_option
from .convert import ConvertOptions
from .emulator import EMULATOR_HOST_ENV
from .errors import ConfigError, ExitCode, LoaderError

if TYPE_CHECKING:
    from .parse import Dialect

log = logging.getLogger("loader")

EMULATOR_DEFAULTS = {"project": "test-project", "instance": "test-instance"}
UNLIMITED_BAD_ROWS = 2**62
"""validate's --max-bad-rows when none is given."""


class _Size(click.ParamType):
    name = "SIZE"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ConfigError as e:
            self.fail(f"{e} ({e.hint})", param, ctx)


SIZE = _Size()


def _apply(options: list[Any], f: Any) -> Any:
    """Decorate ``f`` with a group of click options, in the order listed."""
    for o in reversed(options):
        f = o(f)
    return f


def _help_hint() -> str:
    """Where to read about the options of the command being run."""
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if command in cli.commands:
        return f"see `spanner-loader {command} --help`"
    return "see `spanner-loader --help`"


def _fail(e: LoaderError) -> None:
    click.echo(f"error: {e.message}", err=True)
    click.echo(f"hint: {e.hint or _help_hint()}", err=True)


def _target_options(f: Any) -> Any:
    opts = [
        click.option(
            "--project",
            envvar=[PROJECT_ENV, "GOOGLE_CLOUD_PROJECT"],
            help=f"Google Cloud project id [env {PROJECT_ENV} or GOOGLE_CLOUD_PROJECT].",
        ),
        click.option(
            "--instance", envvar=INSTANCE_ENV, help=f"Spanner instance id [env {INSTANCE_ENV}]."
        ),
        click.option(
            "--database", envvar=DATABASE_ENV, help=f"Spanner database id [env {DATABASE_ENV}]."
        ),
        click.option(
            "--emulator",
            is_flag=True,
            help="Load into the Spanner emulator: the one at SPANNER_EMULATOR_HOST, or a "
            "local one started for this run. Creates the instance and database if "
            "missing. Project/instance default to test-project/test-instance.",
        ),
        click.option(
            "--ddl",
            "ddl",
            multiple=True,
            type=click.Path(dir_okay=False, path_type=Path),
            help="DDL file to apply before loading (with --emulator; repeatable; "
            "statements whose object exists are skipped).",
        ),
        click.option(
            "--connect-timeout",
            type=float,
            default=20.0,
            show_default=True,
            metavar="SECONDS",
            help="Give up when the Spanner endpoint (or SPANNER_EMULATOR_HOST) does not "
            "answer within this time.",
        ),
    ]
    return _apply(opts, f)


def _make_target(
    project: Optional[str],
    instance: Optional[str],
    database: Optional[str],
    emulator: bool,
    ddl: tuple[Path, ...],
    connect_timeout: float = 20.0,
) -> Target:
    if emulator:
        project = project or EMULATOR_DEFAULTS["project"]
        instance = instance or EMULATOR_DEFAULTS["instance"]
    missing = [
        n
        for n, v in (("--project", project), ("--instance", instance), ("--database", database))
        if not v
    ]
    if missing:
        raise ConfigError(
            f"missing {', '.join(missing)}",
            hint=f"give them as options or set {PROJECT_ENV}, {INSTANCE_ENV}, {DATABASE_ENV}; "
            "for a local emulator add --emulator",
        )
    assert project and instance and database
    return Target(
        project,
        instance,
        database,
        emulator=emulator,
        ddl=tuple(ddl),
        connect_timeout=connect_timeout,
    )


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


def _print_version(ctx: click.Context, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    from . import native

    try:
        number = version("spanner-loader")
    except PackageNotFoundError:  # run from a source tree that was never installed
        number = "unknown (not installed)"
    click.echo(f"spanner-loader, version {number}")
    click.echo(f"compiled parts: {native.status()}")
    ctx.exit()


def main() -> None:
    """Console-script entry point."""
    _leave(_run())


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
        click.echo(f"hint: {_help_hint()}", err=True)
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
            "hint: this is unexpected; run again with -vv for the details and report it", err=True
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
    exit (loader.parse), and the logs and standard streams flushed.
    """
    parse = sys.modules.get("loader.parse")  # not imported: no reader was ever opened
    if parse is not None:
        parse.release_readers()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


# --------------------------------------------------------------------------------------------
# load / validate


def _input_options(f: Any) -> Any:
    from .parse import PRESETS

    opts = [
        click.option("--table", "-t", help="Target table (with SOURCE arguments)."),
        click.option(
            "--manifest",
            type=click.Path(dir_okay=False, path_type=Path),
            help="JSON manifest of tables and file patterns (the Dataflow import "
            "manifest format is accepted as is) instead of SOURCE/--table.",
        ),
        click.option(
            "--dialect",
            type=click.Choice(sorted(PRESETS)),
            default="csv",
            show_default=True,
            help="CSV dialect preset of the exporting system; the options below override "
            "it. csv (also bigquery, excel): comma, double quotes, a header row, empty "
            "unquoted field = NULL. postgres: COPY ... (FORMAT csv) as written, no header "
            "unless --header. mysql: SELECT ... INTO OUTFILE / mysqldump --tab: tab, no "
            "quoting, backslash escapes, \\N = NULL, no header.",
        ),
        click.option("--delimiter", help="Field delimiter (one character; \\t for tab)."),
        click.option("--quote", help="Quote character; empty for none."),
        click.option("--escape", help="Escape character (e.g. \\\\); empty for none."),
        click.option(
            "--header/--no-header",
            default=None,
            help="Whether the first row names the columns [default: per dialect].",
        ),
        click.option(
            "--columns",
            help="Comma-separated column names by position (for files without a header).",
        ),
        click.option("--skip-rows", type=int, help="Skip N leading lines before the header."),
        click.option("--encoding", help="Text encoding of the files (utf-8, latin-1, cp1252...)."),
        click.option(
            "--null-marker",
            "null_markers",
            multiple=True,
            help="Text that means NULL (repeatable). Default: an empty unquoted field.",
        ),
        click.option(
            "--map",
            "mappings",
            multiple=True,
            metavar="CSV_COL=TABLE_COL",
            help="Load a CSV column into a differently named table column.",
        ),
        click.option(
            "--ignore",
            "ignored",
            multiple=True,
            metavar="CSV_COL",
            help="Do not load this CSV column (repeatable).",
        ),
        click.option(
            "--timezone",
            help="Time zone for timestamps without an offset "
            "(IANA name, e.g. Europe/Berlin) [default: UTC].",
        ),
        click.option(
            "--timestamp-format", help="strptime format of timestamps, e.g. '%d/%m/%Y %H:%M:%S'."
        ),
        click.option(
            "--bytes-encoding",
            type=click.Choice(["base64", "hex"]),
            help="How BYTES values are written in the files [default: base64].",
        ),
        click.option(
            "--commit-timestamp",
            "commit_ts",
            multiple=True,
            metavar="COLUMN",
            help="Fill this allow_commit_timestamp column with the commit timestamp.",
        ),
    ]
    return _apply(opts, f)


WRITE_ONLY = (
    "commit_ts",
    "priority",
    "max_commit_delay",
    "concurrency",
    "adaptive",
    "max_rows_per_second",
    "max_bytes_per_second",
    "no_state",
    "state_file",
    "restart",
    "incremental",
)
"""Options of ``load`` that only matter when writing: ``validate`` accepts them (a config file
shared with ``load`` may set them) but does not list them."""


def _strategy_options(f: Any) -> Any:
    opts = [
        click.option(
            "--mode",
            type=click.Choice(MODES),
            default="upsert",
            show_default=True,
            help="upsert: Spanner's insert_or_update, the CSV's columns written over any "
            "existing row (idempotent). insert: a key that exists is a rejected row. "
            "replace: Spanner's replace mutation, whole rows rewritten, columns not in the "
            "CSV become NULL or their default (other rows of the table are kept; this is "
            "not bq load --replace). update: only rows that exist.",
        ),
        click.option(
            "--max-mutations",
            type=int,
            default=20_000,
            show_default=True,
            help="Mutation budget per commit: columns written plus index entries "
            "(Spanner's limit is 80,000).",
        ),
        click.option(
            "--max-batch-bytes",
            type=SIZE,
            default="4MiB",
            show_default=True,
            help="Encoded size budget per commit, a target for batching: a larger row is "
            "committed alone (up to 99MiB, Spanner's 100MiB commit limit less headroom).",
        ),
        click.option("--max-batch-rows", "batch_rows", type=int, help="Also cap rows per commit."),
        click.option(
            "--buffer-size",
            type=SIZE,
            default=None,
            help="Memory for sorting rows before they are batched "
            f"[default: a quarter of RAM, 64MiB..2GiB; here {default_buffer_size() >> 20}MiB].",
        ),
        click.option(
            "--concurrency",
            "-c",
            type=int,
            default=None,
            help="Commits in flight [default: 8; 1 on the emulator, which runs one "
            "read-write transaction at a time].",
        ),
        click.option(
            "--max-retry-time",
            type=float,
            default=600.0,
            show_default=True,
            help="Seconds to keep retrying a transient commit or Cloud Storage read failure.",
        ),
        click.option(
            "--max-bad-rows",
            type=int,
            default=0,
            show_default=True,
            help="Rejected rows allowed before the load stops.",
        ),
        click.option(
            "--rejects",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Reject file (JSON Lines) [default: spanner-loader.rejects.jsonl, or "
            "beside --report].",
        ),
        click.option(
            "--priority",
            type=click.Choice(["low", "medium", "high"]),
            help="Request priority of the commits.",
        ),
        click.option(
            "--max-commit-delay",
            type=int,
            metavar="MS",
            help="Let Spanner delay each commit up to MS ms (0-500) for throughput.",
        ),
        click.option(
            "--max-rows-per-second",
            type=float,
            help="Throttle: at most this many rows per second (token bucket).",
        ),
        click.option(
            "--max-bytes-per-second",
            type=SIZE,
            help="Throttle: at most this many encoded bytes per second, e.g. 20MiB.",
        ),
        click.option(
            "--adaptive/--fixed-concurrency",
            default=True,
            show_default=True,
            help="Start with 1 commit in flight and adapt (AIMD on commit latency and aborts) "
            "up to --concurrency, or always use --concurrency.",
        ),
        click.option(
            "--no-state",
            is_flag=True,
            help="Record no checkpoints (a re-run starts over). By default progress is kept in "
            "the table SpannerLoaderState of the target database.",
        ),
        click.option(
            "--state-file",
            type=click.Path(dir_okay=False),
            help="Keep checkpoints in this JSON file instead: a local path, or "
            "gs://BUCKET/NAME.json (one object, replaced on each save with a generation "
            "precondition, so two runs cannot share it).",
        ),
        click.option(
            "--restart",
            is_flag=True,
            help="Forget this job's recorded progress and load everything again.",
        ),
        click.option(
            "--incremental",
            is_flag=True,
            help="Load only sources (name + generation) that no earlier run of this job loaded; "
            "a nightly re-run over the same bucket picks up only new files.",
        ),
        click.option(
            "--block-size",
            type=SIZE,
            default=None,
            help="CSV parse block size, also the granularity of checkpoints; a row must fit "
            "in one block [default: --buffer-size / 32, between 1MiB and 16MiB].",
        ),
    ]
    return _apply(opts, f)


def _output_options(f: Any) -> Any:
    opts = [
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
        click.option(
            "--report",
            "report_path",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Also write the JSON report to this file.",
        ),
        click.option("--quiet", "-q", is_flag=True, help="No progress output."),
    ]
    return _apply(opts, f)


def _build_config(kw: dict[str, Any], dry_run: bool) -> LoadConfig:
    from .manifest import read_manifest

    target = _make_target(
        kw["project"],
        kw["instance"],
        kw["database"],
        kw["emulator"],
        kw["ddl"],
        kw.get("connect_timeout", 20.0),
    )
    sources: tuple[str, ...] = kw["sources"]
    if kw["manifest"]:
        if sources or kw["table"]:
            raise ConfigError("give either SOURCE... --table or --manifest, not both")
        jobs = tuple(read_manifest(kw["manifest"]))
    else:
        if not sources:
            raise ConfigError(
                "no SOURCE given", hint="e.g. spanner-loader load data.csv --table T ..."
            )
        if not kw["table"]:
            raise ConfigError(
                "--table is required with SOURCE arguments",
                hint="or describe several tables with --manifest",
            )
        jobs = (TableJob(kw["table"], sources),)
    dialect = _dialect(kw)
    convert = ConvertOptions.from_dialect(
        dialect, commit_timestamp_columns=frozenset(kw["commit_ts"])
    )
    mapping = []
    for m in kw["mappings"]:
        csv_col, sep, table_col = m.partition("=")
        if not sep or not csv_col or not table_col:
            raise ConfigError(f"--map {m!r} is not CSV_COL=TABLE_COL")
        mapping.append((csv_col, table_col))
    on_emulator = target.emulator or bool(os.environ.get(EMULATOR_HOST_ENV))
    concurrency = kw["concurrency"] if kw["concurrency"] is not None else (1 if on_emulator else 8)
    rejects = kw["rejects"]
    if rejects is None:
        rp: Optional[Path] = kw.get("report_path")
        rejects = rp.with_suffix(".rejects.jsonl") if rp else Path("spanner-loader.rejects.jsonl")
    if kw.get("no_state") and kw.get("state_file"):
        raise ConfigError(
            "--no-state and --state-file contradict each other",
            hint="drop --no-state to keep checkpoints in the file, or --state-file to keep none",
        )
    if kw["max_commit_delay"] is not None and not 0 <= kw["max_commit_delay"] <= 500:
        raise ConfigError("--max-commit-delay must be between 0 and 500 ms")
    return LoadConfig(
        target=target,
        jobs=jobs,
        dialect=dialect,
        convert=convert,
        mode=kw["mode"],
        max_mutations=kw["max_mutations"],
        max_batch_bytes=kw["max_batch_bytes"],
        batch_rows=kw["batch_rows"],
        buffer_size=kw["buffer_size"] or default_buffer_size(),
        concurrency=concurrency,
        max_retry_time=kw["max_retry_time"],
        max_bad_rows=kw["max_bad_rows"],
        rejects=rejects,
        dry_run=dry_run,
        priority=kw["priority"],
        max_commit_delay_ms=kw["max_commit_delay"],
        mapping=tuple(mapping),
        ignore=tuple(kw["ignored"]),
        state=not kw.get("no_state", False),
        state_file=_state_location(kw.get("state_file")),
        restart=kw.get("restart", False),
        incremental=kw.get("incremental", False),
        max_rows_per_second=kw.get("max_rows_per_second"),
        max_bytes_per_second=kw.get("max_bytes_per_second"),
        adaptive=kw.get("adaptive", True),
        block_size=kw.get("block_size") or 0,
    )


def _state_location(value: Optional[str]) -> Optional[str | Path]:
    """--state-file: a gs:// URI stays a string (a Path would fold its '//'), else a Path."""
    if not value:
        return None
    return value if value.startswith("gs://") else Path(value)


def _char(value: Optional[str]) -> Optional[str]:
    """A one-character option: '' means none, \\t means tab."""
    if value is None or value == "":
        return None
    return {"\\t": "\t", "tab": "\t", "\\\\": "\\"}.get(value, value)


def _dialect(kw: dict[str, Any]) -> Dialect:
    from .parse import dialect_from_preset

    overrides: dict[str, Any] = {}
    if kw["delimiter"] is not None:
        overrides["delimiter"] = _char(kw["delimiter"]) or ","
    if kw["quote"] is not None:
        overrides["quote_char"] = _char(kw["quote"])
    if kw["escape"] is not None:
        overrides["escape_char"] = _char(kw["escape"])
    if kw["header"] is not None:
        overrides["header"] = kw["header"]
    if kw["columns"]:
        overrides["columns"] = tuple(c.strip() for c in kw["columns"].split(",") if c.strip())
        overrides.setdefault("header", False)
    if kw["skip_rows"] is not None:
        overrides["skip_rows"] = kw["skip_rows"]
    if kw["encoding"]:
        overrides["encoding"] = kw["encoding"]
    if kw["null_markers"]:
        overrides["null_markers"] = tuple(kw["null_markers"])
    if kw["timezone"]:
        overrides["timezone"] = kw["timezone"]
    if kw["timestamp_format"]:
        overrides["timestamp_format"] = kw["timestamp_format"]
    if kw["bytes_encoding"]:
        overrides["bytes_encoding"] = kw["bytes_encoding"]
    return dialect_from_preset(kw["dialect"], **overrides)


def _run_load(kw: dict[str, Any], dry_run: bool) -> None:
    from .pipeline import load
    from .progress import make_progress

    config = _build_config(kw, dry_run)
    progress = make_progress(quiet=kw["quiet"])
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if stop.is_set():  # a second signal: give up at once
            raise KeyboardInterrupt
        click.echo(
            f"\n{signal.Signals(signum).name}: finishing commits in flight, recording "
            "progress (again to abort at once)",
            err=True,
        )
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        report = load(config, progress=progress, stop=stop)
    except LoaderError as e:
        progress.close()
        partial = getattr(e, "report", None)
        if partial is not None and partial.tables:
            _emit_report(partial, kw)
        raise
    progress.close()
    _emit_report(report, kw)
    sys.exit(int(report.exit_code))


def _emit_report(report: Any, kw: dict[str, Any]) -> None:
    if kw.get("report_path"):
        try:
            Path(kw["report_path"]).write_text(report.to_json() + "\n", encoding="utf-8")
        except OSError as e:
            click.echo(f"warning: cannot write report {kw['report_path']}: {e.strerror}", err=True)
    click.echo(report.to_json() if kw["as_json"] else report.render())


@cli.command(cls=SectionedCommand)
@click.argument("sources", nargs=-1, metavar="[SOURCE]...")
@config_option(shared_with=("load", "validate", "verify"))
@_input_options
@_target_options
@_strategy_options
@_output_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Read, convert, sort, encode and batch everything, but write nothing.",
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

    Exit codes: 0 loaded, 1 failed, 2 usage or configuration error, 3 loaded with rejected
    rows, 4 stopped at --max-bad-rows, 5 interrupted (re-run the same command to resume), 7
    another run of the same job is in progress.
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


# --------------------------------------------------------------------------------------------
# emulator helpers


@cli.group()
def emulator() -> None:
    """Run a local Cloud Spanner Emulator for smoke loads and experiments."""


@emulator.command("start")
@_target_options
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Loopback port to listen on [default: a free one].",
)
def emulator_start(
    project: Optional[str],
    instance: Optional[str],
    database: Optional[str],
    emulator: bool,
    ddl: tuple[Path, ...],
    connect_timeout: float,
    port: Optional[int],
) -> None:
    """Start an emulator in the background and print the line to export.

    With --database (and --ddl), also create that database (and its tables) in it.
    `spanner-loader emulator stop` stops it again.

    \b
    Example:
      eval "$(spanner-loader emulator start --database shop --ddl schemas/shop.sql)"
      spanner-loader load examples/shop/Customers.csv --table Customers --database shop \\
          --emulator
      spanner-loader emulator stop
    """
    from .connection import make_client
    from .emulator import ensure_database, record_started, start_emulator

    em = start_emulator(port=port)
    record_started(em)
    os.environ[EMULATOR_HOST_ENV] = em.address
    try:
        if database:
            client = make_client(project or EMULATOR_DEFAULTS["project"])
            ensure_database(client, instance or EMULATOR_DEFAULTS["instance"], database, ddl)
    except BaseException:
        em.stop()
        raise
    click.echo(f"export {EMULATOR_HOST_ENV}={em.address}")
    click.echo(
        f"# emulator pid {em.process.pid}, log {em.log_path}; "
        f"stop it with: spanner-loader emulator stop --port {em.port}"
    )


@emulator.command("stop")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Stop the one on this port [default: the one SPANNER_EMULATOR_HOST names, else every "
    "emulator that `emulator start` left running].",
)
def emulator_stop(port: Optional[int]) -> None:
    """Stop emulators started with `spanner-loader emulator start`.

    Only those: an emulator started another way (gcloud, a container) is left alone. Stopping
    none is not an error.

    \b
    Example:
      eval "$(spanner-loader emulator start --port 9010)"
      spanner-loader emulator stop --port 9010
    """
    from .emulator import stop_started

    if port is None and os.environ.get(EMULATOR_HOST_ENV, "").rpartition(":")[2].isdigit():
        port = int(os.environ[EMULATOR_HOST_ENV].rpartition(":")[2])
    stopped = stop_started(port)
    for p, pid in stopped:
        click.echo(f"stopped the emulator on 127.0.0.1:{p} (pid {pid})")
    if not stopped:
        where = f" on port {port}" if port is not None else ""
        click.echo(f"no emulator started by spanner-loader is running{where}", err=True)
    if stopped and os.environ.get(EMULATOR_HOST_ENV):
        click.echo(f"# and: unset {EMULATOR_HOST_ENV}")


# --------------------------------------------------------------------------------------------
# verify


@cli.command(cls=SectionedCommand)
@click.argument("sources", nargs=-1, metavar="[SOURCE]...")
@config_option(shared_with=("load", "validate", "verify"))
@_input_options
@_target_options
@click.option(
    "--max-bad-rows",
    type=int,
    default=0,
    show_default=True,
    help="Bad source rows tolerated (they are not expected in the table).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify(**kw: Any) -> None:
    """Check that tables hold exactly the source rows.

    Reads the sources as a load would (same options), reads each table at one read timestamp,
    and compares row counts and an order-independent checksum of the loaded columns; when
    they differ, lists the first keys that are missing, unexpected or different.
    Exits 0 when every table matches, 6 when one does not.

    \b
    Example:
      spanner-loader verify --manifest examples/shop/manifest.json --database shop
    """
    import json as _json

    from .connection import connect
    from .pipeline import read_source_tables
    from .verify import verify_table

    kw.update(
        mode="upsert",
        max_mutations=20_000,
        max_batch_bytes=4 << 20,
        batch_rows=None,
        buffer_size=None,
        concurrency=1,
        max_retry_time=60.0,
        rejects=None,
        priority=None,
        max_commit_delay=None,
        report_path=None,
        no_state=True,
    )
    config = _build_config(kw, dry_run=True)
    results = []
    with connect(config.target) as database:
        sources = read_source_tables(config, database)
        for schema, tables in sources.values():
            columns = tables[0].column_names if tables else list(schema.key_names)
            skip = [c for c in columns if c in config.convert.commit_timestamp_columns]
            results.append(verify_table(database, schema, tables, columns, skip))
    if kw["as_json"]:
        click.echo(
            _json.dumps(
                {"ok": all(r.ok for r in results), "tables": [r.to_dict() for r in results]},
                indent=2,
            )
        )
    else:
        for r in results:
            state = "ok" if r.ok else "DIFFERS"
            click.echo(
                f"{r.table}: {state}: source {r.source_rows:,} rows, table "
                f"{r.table_rows:,} rows, checksum {r.source_checksum} / {r.table_checksum}"
            )
            for label, keys in (
                ("missing", r.missing),
                ("unexpected", r.unexpected),
                ("different", r.different),
            ):
                if keys:
                    click.echo(f"  {label} keys: {', '.join(keys)}")
    sys.exit(int(ExitCode.OK if all(r.ok for r in results) else ExitCode.VERIFY_MISMATCH))


@cli.command()
@_target_options
@click.option(
    "--rows-per-step",
    type=int,
    default=100_000,
    show_default=True,
    help="Rows written at each concurrency step.",
)
@click.option(
    "--max-concurrency",
    type=int,
    default=None,
    help="Last step: steps are 1, 2, 4, ... up to it [default: 32; 4 on the emulator].",
)
@click.option("--steps", help="Concurrency steps instead, comma-separated, e.g. 1,8,16,32.")
@click.option(
    "--batch-rows",
    type=int,
    default=1000,
    show_default=True,
    help="Rows per commit (5 mutations each).",
)
@click.option(
    "--payload-bytes",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Size of each row's STRING payload.",
)
@click.option(
    "--warmup-rows",
    type=int,
    default=0,
    show_default=True,
    help="Rows written first, unmeasured, so Spanner starts splitting the table.",
)
@click.option(
    "--nodes",
    "node_count",
    type=float,
    help="The instance's node count (0.1 per 100 processing units): adds rows/s/node.",
)
@click.option(
    "--node-hour-price",
    type=float,
    help="Price of a node-hour (with --nodes): adds the cost per million rows.",
)
@click.option(
    "--priority",
    type=click.Choice(["low", "medium", "high"]),
    help="Request priority of the commits.",
)
@click.option("--keep", is_flag=True, help="Keep the scratch table SpannerLoaderBench.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def bench(**kw: Any) -> None:
    """Measure write throughput at increasing concurrency (a step-load test).

    Writes --rows-per-step generated rows at 1, 2, 4, ... commits in flight into a scratch
    table (created, then dropped), and reports rows/s, commit latency p50/p99 and ABORTED
    retries per step, the peak, and the smallest concurrency within 90% of it.

    \b
    Example:
      spanner-loader bench --database shop --nodes 3 --node-hour-price 0.90 \\
          --rows-per-step 200000 --max-concurrency 64
    """
    import json as _json

    from .bench import parse_steps, run_bench
    from .connection import connect

    target = _make_target(
        kw["project"],
        kw["instance"],
        kw["database"],
        kw["emulator"],
        kw["ddl"],
        kw.get("connect_timeout", 20.0),
    )
    on_emulator = target.emulator or bool(os.environ.get(EMULATOR_HOST_ENV))
    with connect(target) as database:
        report = run_bench(
            database,
            rows_per_step=kw["rows_per_step"],
            max_concurrency=kw["max_concurrency"] or (4 if on_emulator else 32),
            steps=parse_steps(kw["steps"]) if kw["steps"] else None,
            batch_rows=kw["batch_rows"],
            payload_bytes=kw["payload_bytes"],
            warmup_rows=kw["warmup_rows"],
            node_count=kw["node_count"],
            node_hour_price=kw["node_hour_price"],
            priority=kw["priority"],
            keep=kw["keep"],
            progress=lambda step: click.echo(step.line(), err=True),
        )
    click.echo(_json.dumps(report.to_dict(), indent=2) if kw["as_json"] else report.render())
