"""The options the commands share (input, target, strategy, output) and the one place that
turns them into a :class:`~loader.config.LoadConfig`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import click
from click.core import ParameterSource

from ..config import (
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
from ..configfile import FILE_BEAM_OPTIONS
from ..errors import ConfigError
from ..outfiles import check_writable, path_problem

if TYPE_CHECKING:
    from ..parse import Dialect

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


class _DeferChoice(click.Choice):
    """``--defer-indexes``' optional value: a word after a bare flag is read as its value, so
    a SOURCE there gets a message that says so."""

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Any) -> Any:
        if isinstance(value, str) and value not in self.choices:
            self.fail(
                f"{value!r} is not one of 'non-unique', 'all' (the value is optional, so a word "
                "right after a bare --defer-indexes is read as its value: put the flag after "
                "the SOURCE arguments, or write --defer-indexes=non-unique)",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


def _apply(options: list[Any], f: Any) -> Any:
    """Decorate ``f`` with a group of click options, in the order listed."""
    for o in reversed(options):
        f = o(f)
    return f


def _target_options(f: Any) -> Any:
    """The options naming the database a command works on (load, validate, presplit...)."""
    return _apply(_target_option_list(), f)


def _read_target_options(f: Any) -> Any:
    """:func:`_target_options` for a command that only reads the database (verify): it starts
    no emulator and applies no DDL, and says so (``--ddl`` is taken, so that a load's
    command line verifies as it is)."""
    return _apply(
        _target_option_list(
            emulator="Read from the Spanner emulator at SPANNER_EMULATOR_HOST (none is started "
            "and nothing created). Project/instance default to test-project/test-instance.",
            ddl="Taken so that a load's command line verifies as it is; verify applies no DDL.",
        ),
        f,
    )


def _target_option_list(
    emulator: str = "Load into the Spanner emulator: the one at SPANNER_EMULATOR_HOST, or a "
    "local one started for this run. Creates the instance and database if missing. "
    "Project/instance default to test-project/test-instance.",
    ddl: Optional[str] = None,
) -> list[Any]:
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
            "--emulator/--no-emulator",
            default=False,
            help=emulator,
        ),
        click.option(
            "--ddl",
            "ddl",
            multiple=True,
            type=click.Path(dir_okay=False, path_type=Path),
            help=ddl
            or "DDL file to apply before loading (with --emulator; repeatable; "
            "statements whose object exists are skipped).",
        ),
        click.option(
            "--ddl-dialect",
            type=click.Choice(["googlesql", "postgresql", "postgres"]),
            help=ddl
            or "Dialect of the database --ddl creates on the emulator (PostgreSQL DDL "
            "needs postgresql; postgres is the same) [default: googlesql; a database that "
            "exists keeps its own].",
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
    return opts


def _make_target(
    project: Optional[str],
    instance: Optional[str],
    database: Optional[str],
    emulator: bool,
    ddl: tuple[Path, ...],
    connect_timeout: float = 20.0,
    ddl_dialect: Optional[str] = None,
) -> Target:
    if emulator:
        project = project or EMULATOR_DEFAULTS["project"]
        instance = instance or EMULATOR_DEFAULTS["instance"]
    missing = [
        (flag, env)
        for flag, env, v in (
            ("--project", PROJECT_ENV, project),
            ("--instance", INSTANCE_ENV, instance),
            ("--database", DATABASE_ENV, database),
        )
        if not v
    ]
    if missing:
        flags = ", ".join(flag for flag, _ in missing)
        envs = ", ".join(env for _, env in missing)
        one = len(missing) == 1
        raise ConfigError(
            f"missing {flags}",
            hint=f"give {'it as an option' if one else 'them as options'} or set {envs}"
            + ("" if emulator else "; for a local emulator add --emulator"),
        )
    assert project and instance and database
    return Target(
        project,
        instance,
        database,
        emulator=emulator,
        ddl=tuple(ddl),
        ddl_dialect=ddl_dialect,
        connect_timeout=connect_timeout,
    )


def _input_options(f: Any) -> Any:
    from ..parse import PRESETS

    opts = [
        click.option(
            "--table",
            "-t",
            help='Target table (with SOURCE arguments); quoted as SQL quotes a name ("Name", '
            "or `Name`), that name exactly.",
        ),
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
            "unquoted field = NULL. postgres (also postgresql): COPY ... (FORMAT csv) as written, no header "
            "unless --header, bytea as \\x hex, arrays as {a,b}. mysql: SELECT ... INTO OUTFILE / mysqldump --tab: tab, no "
            "quoting, backslash escapes, \\N = NULL, no header. postgres-text: COPY ... TO without "
            "FORMAT csv: tab, no quoting, PostgreSQL's backslash escapes, \\N = NULL, no header, "
            "bytea and arrays as postgres.",
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
            help="Comma-separated column names by position, for files without a header "
            "(implies --no-header; refused with --header).",
        ),
        click.option("--skip-rows", type=int, help="Skip N leading lines before the header."),
        click.option("--encoding", help="Text encoding of the files (utf-8, latin-1, cp1252...)."),
        click.option(
            "--null-marker",
            "null_markers",
            multiple=True,
            help="Text that means NULL (repeatable). Default: an empty unquoted field; with "
            "--dialect mysql or postgres-text, \\N, which stays NULL beside any marker given.",
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
            "--timestamp-format",
            help="strptime format of timestamps, e.g. '%d/%m/%Y %H:%M:%S' (whole seconds: the "
            "parser, Arrow's, has no %f; RFC 3339 / ISO 8601 text, fractions included, needs no "
            "format).",
        ),
        click.option(
            "--bytes-encoding",
            type=click.Choice(["base64", "hex", "postgres", "postgres-escape"]),
            help="How BYTES values are written in the files [default: base64]: hex, with or "
            "without a \\x or 0x prefix; postgres, bytea as PostgreSQL's COPY writes it by "
            "default (\\x then hex; --dialect postgres sets it); postgres-escape, as it writes "
            "it with bytea_output = escape (\\x hex read too).",
        ),
        click.option(
            "--commit-timestamp",
            "commit_timestamp_columns",
            multiple=True,
            metavar="COLUMN",
            help="Fill this allow_commit_timestamp column with the commit timestamp.",
        ),
    ]
    return _apply(opts, f)


WRITE_ONLY = (
    "priority",
    "max_commit_delay_ms",
    "concurrency",
    "adaptive",
    "max_rows_per_second",
    "max_bytes_per_second",
    "no_state",
    "restart",
    "defer_indexes",
    "defer_foreign_keys",
    "skip_existing",
    "skip_missing",
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
            "existing row (idempotent). insert: a key that exists is a rejected row (left "
            "out with --skip-existing). "
            "replace: Spanner's replace mutation, whole rows rewritten, columns not in the "
            "CSV become NULL or their default (other rows of the table are kept; this is "
            "not bq load --replace; on a parent table Spanner deletes a replaced row's "
            "interleaved children ON DELETE CASCADE). update: only rows that exist (others are "
            "rejected, or left out with --skip-missing); the CSV needs only the key columns.",
        ),
        click.option(
            "--skip-existing/--no-skip-existing",
            default=False,
            help="With --mode insert: a row whose key the table already holds is left out and "
            "counted (rows_existing in the report), not rejected; the table's row stays as it "
            "is. Makes insert re-runnable: rows an earlier run wrote are left out.",
        ),
        click.option(
            "--skip-missing/--no-skip-missing",
            default=False,
            help="With --mode update: a row whose key the table does not hold is left out and "
            "counted (rows_missing in the report), not rejected.",
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
            help="Memory for sorting rows before they are batched (with --runner: per key "
            "range on a worker; past it, sorted runs on local disk) "
            f"[default: a quarter of RAM, 64MiB..2GiB; here {default_buffer_size() >> 20}MiB].",
        ),
        click.option(
            "--concurrency",
            "-c",
            type=int,
            default=None,
            help="Commits in flight (with --runner: per worker process) [default: 8; 1 on "
            "the emulator, which runs one read-write transaction at a time].",
        ),
        click.option(
            "--parallel-tables",
            type=int,
            default=None,
            metavar="N",
            help="Load up to N tables of a manifest side by side when neither is interleaved "
            "in nor has a foreign key to the other; they share the commits in flight and "
            "--buffer-size. 1 loads one table after another [default: 4].",
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
            help="Rejected rows allowed before the load stops (with --runner, rows that do "
            "not parse or convert over it stop every commit).",
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
            "max_commit_delay_ms",
            type=int,
            metavar="MS",
            help="Let Spanner delay each commit up to MS ms (0-500) for throughput.",
        ),
        click.option(
            "--max-rows-per-second",
            type=float,
            help="Throttle: at most this many rows per second (token bucket; with --runner "
            "for the whole job, each worker process taking an equal share). Batches hold at "
            "most one second of it.",
        ),
        click.option(
            "--max-bytes-per-second",
            type=SIZE,
            help="Throttle: at most this many encoded bytes per second, e.g. 20MiB (with "
            "--runner, shared as --max-rows-per-second).",
        ),
        click.option(
            "--adaptive/--fixed-concurrency",
            default=True,
            show_default=True,
            help="Start with 1 commit in flight and adapt (AIMD on commit latency and aborts) "
            "up to --concurrency, or always use --concurrency.",
        ),
        click.option(
            "--defer-indexes",
            type=_DeferChoice(["non-unique", "all"]),
            is_flag=False,
            flag_value="non-unique",
            default=None,
            help="Drop the loaded tables' non-unique secondary indexes before the load (all "
            "of them with =all: a duplicate key then fails the re-creation, not the load), "
            "commit without counting them, and re-create them after it as GetDatabaseDdl "
            "printed them. Recorded in the state first: a load that dies re-creates them "
            "when run again.",
        ),
        click.option(
            "--defer-foreign-keys/--no-defer-foreign-keys",
            default=False,
            help="The same for the FOREIGN KEY constraints on or pointing at the loaded tables.",
        ),
        click.option(
            "--no-state/--state",
            "no_state",
            default=False,
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
            "--restart/--no-restart",
            default=False,
            help="Forget this job's recorded progress and load everything again.",
        ),
        click.option(
            "--incremental/--no-incremental",
            default=False,
            help="Load only sources (name + generation) that no earlier run of this job loaded; "
            "a nightly re-run over the same bucket picks up only new files.",
        ),
        click.option(
            "--block-size",
            type=SIZE,
            default=None,
            help="CSV parse block size (4KiB to 1GiB), also the granularity of checkpoints; a "
            "row must fit in one block [default: --buffer-size / 40, between 1MiB and 16MiB].",
        ),
    ]
    return _apply(opts, f)


def _check_report_path(path: Path) -> None:
    """Fail before loading when --report names a file that cannot be written (told only at
    the end, the report of a whole load would be lost)."""
    try:
        check_writable(path)
    except OSError as e:
        raise ConfigError(
            f"cannot write the report {path}: {path_problem(e, path)}",
            hint="name a writable file with --report",
        ) from e


def _output_options(f: Any) -> Any:
    opts = [
        click.option(
            "--json/--no-json", "as_json", default=False, help="Print the report as JSON."
        ),
        click.option(
            "--report",
            "report_path",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Also write the JSON report to this file.",
        ),
        click.option("--quiet/--no-quiet", "-q", default=False, help="No progress output."),
    ]
    return _apply(opts, f)


def _stdin_is_a_pipe() -> bool:
    import os
    import stat

    try:
        return stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def target_from(kw: dict[str, Any]) -> Target:
    """The target the options of :func:`_target_options` name."""
    return _make_target(
        kw["project"],
        kw["instance"],
        kw["database"],
        kw["emulator"],
        kw["ddl"],
        kw.get("connect_timeout", 20.0),
        kw.get("ddl_dialect"),
    )


def _build_config(kw: dict[str, Any], dry_run: bool) -> LoadConfig:
    from ..manifest import read_manifest

    target = target_from(kw)
    sources: tuple[str, ...] = kw["sources"]
    if kw["manifest"]:
        if sources or kw["table"]:
            raise ConfigError("give either SOURCE... --table or --manifest, not both")
        jobs = tuple(read_manifest(kw["manifest"]))
    else:
        if not sources:
            piped = _stdin_is_a_pipe()
            raise ConfigError(
                "no SOURCE given",
                hint="e.g. spanner-loader load data.csv --table T ..."
                + ("; input piped in is read with - as the SOURCE" if piped else ""),
            )
        if not kw["table"]:
            raise ConfigError(
                "--table is required with SOURCE arguments",
                hint="or describe several tables with --manifest",
            )
        jobs = (TableJob(kw["table"], sources),)
    dialect = _dialect(kw)
    from ..convert import ConvertOptions  # Arrow: only once the options are known to be whole

    convert = ConvertOptions.from_dialect(
        dialect, commit_timestamp_columns=frozenset(kw["commit_timestamp_columns"])
    )
    mapping = []
    for m in kw["mappings"]:
        csv_col, sep, table_col = m.partition("=")
        if not sep or not csv_col or not table_col:
            raise ConfigError(f"--map {m!r} is not CSV_COL=TABLE_COL")
        mapping.append((csv_col, table_col))
    rejects = kw.get("rejects")
    rp: Optional[Path] = kw.get("report_path")
    if rp is not None:
        _check_report_path(rp)
    if rejects is None:
        rejects = rp.with_suffix(".rejects.jsonl") if rp else Path("spanner-loader.rejects.jsonl")
    if kw.get("no_state") and kw.get("state_file"):
        raise ConfigError(
            "--no-state and --state-file contradict each other",
            hint="drop --no-state to keep checkpoints in the file, or --state-file to keep none",
        )
    # options a command does not have (verify writes nothing) take LoadConfig's defaults
    given = {
        name: kw[option]
        for name, option in (
            ("mode", "mode"),
            ("max_mutations", "max_mutations"),
            ("max_batch_bytes", "max_batch_bytes"),
            ("batch_rows", "batch_rows"),
            ("buffer_size", "buffer_size"),
            ("concurrency", "concurrency"),
            ("parallel_tables", "parallel_tables"),
            ("max_retry_time", "max_retry_time"),
            ("priority", "priority"),
            ("max_commit_delay_ms", "max_commit_delay_ms"),
        )
        if kw.get(option) is not None
    }
    return LoadConfig(
        target=target,
        jobs=jobs,
        dialect=dialect,
        convert=convert,
        **given,
        max_bad_rows=kw["max_bad_rows"],
        rejects=rejects,
        dry_run=dry_run,
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
        presplit=bool(kw.get("presplit")) and not dry_run,
        nodes=kw.get("nodes"),
        keep_split_points=bool(kw.get("keep_split_points")),
        split_expiry=kw.get("split_expiry") or 10.0,
        runner=kw.get("runner") or None,
        beam_options=_beam_options(kw.get("beam_options") or ()),
        range_size=kw.get("range_size") or 128 << 20,
        key_ranges=kw.get("key_ranges") or 0,
        beam_results=kw.get("beam_results") or None,
        defer_indexes=kw.get("defer_indexes") or "off",
        defer_foreign_keys=kw.get("defer_foreign_keys", False),
        skip_existing=kw.get("skip_existing", False),
        skip_missing=kw.get("skip_missing", False),
    )


def _beam_options(given: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``--beam-option`` values as pairs; given on the command line, they follow the config
    file's ``[beam]`` table (which click's default map would otherwise drop), so a key in both
    takes the command line's value."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.get_parameter_source("beam_options") == ParameterSource.COMMANDLINE:
        given = tuple(ctx.meta.get(FILE_BEAM_OPTIONS, ())) + tuple(given)
    out = []
    for item in given:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not key:
            raise ConfigError(
                f"--beam-option {item!r} is not KEY=VALUE", hint="e.g. region=europe-west1"
            )
        out.append((key, value if sep else ""))
    return tuple(out)


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
    from ..parse import dialect_from_preset

    overrides: dict[str, Any] = {}
    if kw["delimiter"] is not None:
        overrides["delimiter"] = _char(kw["delimiter"])
        if overrides["delimiter"] is None:  # '' was read as a comma
            raise ConfigError(
                "--delimiter cannot be empty", hint="one character, e.g. ';', '|' or \\t"
            )
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
