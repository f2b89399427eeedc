"""The frozen configuration that flows through a load."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal, Optional

from .errors import ConfigError, option

if TYPE_CHECKING:
    from .convert import ConvertOptions
    from .parse import Dialect
    from .schema import TableSchema

Mode = Literal["upsert", "insert", "replace", "update"]
MODES: tuple[str, ...] = ("upsert", "insert", "replace", "update")
DEFER_INDEXES: tuple[str, ...] = ("off", "non-unique", "all")

PROJECT_ENV = "SPANNER_PROJECT"
INSTANCE_ENV = "SPANNER_INSTANCE"
DATABASE_ENV = "SPANNER_DATABASE"

MAX_MUTATIONS_LIMIT = 80_000
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "ki": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "mi": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "gi": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1024**4,
    "ti": 1024**4,
}


def parse_size(text: str) -> int:
    """'4MiB' -> 4194304, '1GB' -> 10**9, '512' -> 512."""
    m = _SIZE_RE.match(str(text))
    if not m or (m.group(2) or "").lower() not in _UNITS:
        raise ConfigError(
            f"not a size: {text!r}", hint="use a number with an optional unit: 512KiB, 4MiB, 1GiB"
        )
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


MAX_BLOCK_SIZE = 1 << 30
"""Arrow's CSV reader takes a block size that fits an int32."""


def physical_memory() -> Optional[int]:
    """This machine's memory in bytes (None where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def default_buffer_size() -> int:
    """A quarter of physical memory, between 64 MiB and 2 GiB."""
    total = physical_memory() or 4 << 30
    return max(64 << 20, min(2 << 30, total // 4))


def default_block_size(buffer_size: int) -> int:
    """A fortieth of the buffer, between 1 MiB and 16 MiB.

    Besides the buffer, the CSV reader holds about three blocks (loader/parse/gate.py,
    _ReadaheadGate) and the parse, convert and encode threads a few more in their various forms
    (loader/table_load.py), so small buffers get small blocks; a row must fit in one block.
    (A thirty-second until the parse thread came, which holds one block more: the 5 GB load
    of benchmarks.memory with a 256 MiB buffer then peaked 1 MiB under its bound.)
    """
    return max(1 << 20, min(16 << 20, buffer_size // 40))


DDL_DIALECTS = ("googlesql", "postgresql")
"""The dialects a database created on the emulator may have (``Target.ddl_dialect``)."""


@dataclass(frozen=True)
class Target:
    """Where to load: a Spanner database, possibly on an emulator."""

    project: str
    instance: str
    database: str
    emulator: bool = False
    """Use (start if needed) a local emulator, create the instance and database."""
    ddl: tuple[Path, ...] = ()
    """DDL files applied before loading (with --emulator)."""
    ddl_dialect: Optional[str] = None
    """The dialect of a database the emulator creates for ``ddl``: "googlesql" (the default)
    or "postgresql"; a database that exists keeps its own (given, it must match)."""
    connect_timeout: float = 20.0
    """Seconds to wait for the Spanner endpoint to answer before giving up (loader.connection)."""

    def __post_init__(self) -> None:
        if self.ddl_dialect == "postgres":  # as the CSV dialect preset spells it
            object.__setattr__(self, "ddl_dialect", "postgresql")
        if self.ddl_dialect not in (None, *DDL_DIALECTS):
            raise ConfigError(
                f"unknown `ddl_dialect` {self.ddl_dialect!r}",
                hint="one of " + ", ".join(DDL_DIALECTS),
            )
        if not self.connect_timeout > 0:
            raise ConfigError(
                f"`connect_timeout` must be above 0 seconds, not {self.connect_timeout}",
                hint="e.g. `connect_timeout=20`",
            )

    @property
    def path(self) -> str:
        return f"projects/{self.project}/instances/{self.instance}/databases/{self.database}"


@dataclass(frozen=True)
class TableJob:
    """One table and the sources that feed it."""

    table: str
    sources: tuple[str, ...]
    columns: Optional[tuple[str, ...]] = None
    """Column names by position, for header-less files (overrides the dialect's)."""

    def __post_init__(self) -> None:
        # one source given as a string (or a path) is that source, not its characters
        if isinstance(self.sources, (str, PurePath)):
            object.__setattr__(self, "sources", (str(self.sources),))
        else:
            object.__setattr__(self, "sources", tuple(str(s) for s in self.sources))
        if isinstance(self.columns, str):
            raise ConfigError(
                f"`columns` of {self.table} is one string: {self.columns!r}",
                hint="give the names as a tuple, e.g. ('Id', 'Name')",
            )
        if self.columns is not None:
            object.__setattr__(self, "columns", tuple(self.columns))


MAX_SPLIT_EXPIRY_DAYS = 30
"""Spanner keeps a split point at most 30 days (SplitPoints.expire_time)."""


@dataclass(frozen=True)
class LoadConfig:
    target: Target
    jobs: tuple[TableJob, ...]
    dialect: Dialect
    convert: ConvertOptions
    mode: Mode = "upsert"
    max_mutations: int = 20_000
    max_batch_bytes: int = 4 << 20
    batch_rows: Optional[int] = None
    buffer_size: int = field(default_factory=default_buffer_size)
    concurrency: Optional[int] = None
    """Commits in flight; None picks the default: 8, or 1 against the emulator
    (``target.emulator`` or SPANNER_EMULATOR_HOST set), which runs one read-write transaction
    at a time. Always an int once the config is built."""
    max_retry_time: float = 600.0
    max_bad_rows: int = 0
    rejects: Optional[Path] = None
    dry_run: bool = False
    priority: Optional[str] = None
    max_commit_delay_ms: Optional[int] = None
    block_size: int = 0
    """CSV parse block size; 0 derives it from ``buffer_size`` (:func:`default_block_size`)."""
    mapping: tuple[tuple[str, str], ...] = ()
    """CSV column -> table column renames."""
    ignore: tuple[str, ...] = ()
    """CSV columns not loaded."""
    state: bool = True
    """Record checkpoints so an interrupted load resumes (see loader/resume/)."""
    state_file: Optional[str | Path] = None
    """Keep checkpoints in this JSON file instead of a table of the target database: a local
    path, or a ``"gs://bucket/name.json"`` string (one Cloud Storage object)."""
    restart: bool = False
    """Forget earlier progress of this job and load everything again."""
    incremental: bool = False
    """Load only sources (by name and generation) no earlier run of this job loaded."""
    max_rows_per_second: Optional[float] = None
    """A ceiling on rows committed per second (a token bucket holding one second of it); it
    also caps ``batch_rows`` at one second of rows, so that no batch passes it at once."""
    max_bytes_per_second: Optional[float] = None
    """A ceiling on bytes committed per second, the same way; a batch larger than a second
    of it still passes whole (lower ``max_batch_bytes`` to keep under it), and the ones
    after it wait until the average is back under the ceiling."""
    adaptive: bool = True
    """Adapt commits in flight (AIMD) between 1 and ``concurrency``."""
    parallel_tables: int = 4
    """Tables of one wave (no interleaving or foreign key between them) loaded side by side,
    at most this many at once; they share ``concurrency`` and ``buffer_size`` (see
    loader/waves.py). 1 loads one table after another."""
    presplit: bool = False
    """Sample the sources' keys and add split points before the load (loader/presplit.py)."""
    nodes: Optional[float] = None
    """Nodes the split points are sized for (about 10 each); None reads the instance's size."""
    keep_split_points: bool = False
    """Leave the job's split points in place after the load instead of expiring them."""
    split_expiry: float = 10.0
    """Days Spanner keeps split points added for the load, unless the load expires them."""
    runner: Optional[str] = None
    """An Apache Beam runner (``DirectRunner``, ``DataflowRunner``, ...): load each table as a
    Beam pipeline (:mod:`loader.beam`); None: in this process."""
    beam_options: tuple[tuple[str, str], ...] = ()
    """Beam pipeline options (``--beam-option k=v``), passed on as ``--k=v``."""
    range_size: int = 128 << 20
    """Beam: target bytes per byte range of a plain file (:mod:`loader.plan`)."""
    key_ranges: int = 0
    """Beam: key ranges the rows are grouped into (0: one per byte range)."""
    beam_results: Optional[str] = None
    """Beam: the folder (local or ``gs://``) where workers leave rejects and commit counts for
    the launcher; None: the launcher's temporary directory on a local runner, else under the
    job's ``temp_location`` (:mod:`loader.beam.results`)."""
    defer_indexes: str = "off"
    """Drop the loaded tables' secondary indexes before the load and re-create them after it:
    ``off``, ``non-unique`` or ``all`` (unique ones too), see loader/deferred.py."""
    defer_foreign_keys: bool = False
    """The same for the foreign keys on or pointing at the loaded tables."""
    skip_existing: bool = False
    """Insert mode: a row whose key the table already holds is left out and counted
    (``rows_existing``), not rejected; the row in the table stays as it is."""
    skip_missing: bool = False
    """Update mode: a row whose key the table does not hold is left out and counted
    (``rows_missing``), not rejected."""

    def __post_init__(self) -> None:
        if isinstance(self.rejects, str):  # a path as text, as `state_file` takes it
            object.__setattr__(self, "rejects", Path(self.rejects))
        jobs = (self.jobs,) if isinstance(self.jobs, TableJob) else tuple(self.jobs)
        object.__setattr__(self, "jobs", jobs)
        if self.mode not in MODES:
            raise ConfigError(f"unknown mode {self.mode!r}", hint="one of: " + ", ".join(MODES))
        pairs = {"skip_existing": "insert", "skip_missing": "update"}
        for flag, mode in pairs.items():
            if getattr(self, flag) and self.mode != mode:
                other = next(
                    (f for f, m in pairs.items() if m == self.mode and not getattr(self, f)), None
                )
                upsert = " (upsert writes every row, there or not)" if self.mode == "upsert" else ""
                raise ConfigError(
                    f"{option(flag)} is for {option('mode', mode)}, not "
                    f"{option('mode', self.mode)}",
                    hint=f"{option(other)} is {self.mode} mode's counterpart"
                    if other
                    else f"add {option('mode', mode)}, or leave out {option(flag)}{upsert}",
                )
        if not 1 <= self.max_mutations <= MAX_MUTATIONS_LIMIT:
            raise ConfigError(
                f"`max_mutations` must be between 1 and {MAX_MUTATIONS_LIMIT:,}",
                hint="Spanner allows at most 80,000 mutations per commit, indexes included",
            )
        if self.max_batch_bytes < 1024 or self.max_batch_bytes > 100 << 20:
            raise ConfigError(
                "`max_batch_bytes` must be between 1KiB and 100MiB",
                hint="Spanner's commit size limit is 100 MiB; 1-5 MB commits load fastest",
            )
        if self.batch_rows is not None and self.batch_rows < 1:
            raise ConfigError("`batch_rows` must be at least 1")
        if self.concurrency is None:
            on_emulator = self.target.emulator or bool(os.environ.get("SPANNER_EMULATOR_HOST"))
            object.__setattr__(self, "concurrency", 1 if on_emulator else 8)
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(
                f"`concurrency` must be at least 1, not {self.concurrency}",
                hint="commits in flight; leave it out for the default (8; 1 on the emulator)",
            )
        if not self.max_retry_time >= 0:  # also NaN
            raise ConfigError(
                f"`max_retry_time` must be 0 or more seconds, not {self.max_retry_time}",
                hint="0 retries nothing; the default is 600",
            )
        if self.priority not in (None, "low", "medium", "high"):
            raise ConfigError(
                f"unknown priority {self.priority!r}", hint="one of: low, medium, high"
            )
        if self.max_commit_delay_ms is not None and not 0 <= self.max_commit_delay_ms <= 500:
            raise ConfigError(
                "`max_commit_delay_ms` must be between 0 and 500 ms",
                hint="Spanner lets a commit wait at most 500 ms for others to batch with it",
            )
        if self.parallel_tables < 1:
            raise ConfigError(
                f"`parallel_tables` must be at least 1, not {self.parallel_tables}",
                hint="1 loads one table after another",
            )
        if self.range_size < 1:
            raise ConfigError("`range_size` must be at least 1 byte")
        if self.key_ranges < 0:
            raise ConfigError("`key_ranges` must be 0 (automatic) or more")
        if self.runner is not None and self.dry_run:
            raise ConfigError(
                "`dry_run=True` runs on this machine, not with `runner`",
                hint="leave out `runner` for a dry run: it reads, converts, sorts and batches the "
                "rows as the Beam job's workers do, and writes nothing",
            )
        if self.runner is not None and (self.state_file or not self.state):
            raise ConfigError(
                "`runner` needs the checkpoint table (its batch markers make commits exactly once)",
                hint="leave out `state_file` and `state=False` with `runner`",
            )
        if self.runner is not None and self.incremental:
            raise ConfigError(
                "`incremental=True` is not supported with `runner` (a Beam job reads all of "
                "its sources on every run)",
                hint="leave out `incremental=True`, or load the new files as a job of their "
                "own (name them, not the glob)",
            )
        if self.max_bad_rows < 0:
            raise ConfigError("`max_bad_rows` must be 0 or more")
        if self.buffer_size < 64 << 10:
            raise ConfigError("`buffer_size` must be at least 64KiB")
        if self.block_size == 0:
            object.__setattr__(self, "block_size", default_block_size(self.buffer_size))
        if self.block_size < 4 << 10:
            raise ConfigError("`block_size` must be at least 4KiB")
        if self.block_size > MAX_BLOCK_SIZE:
            raise ConfigError(
                f"`block_size` must be at most 1GiB (the CSV reader's limit), not "
                f"{self.block_size:,} bytes"
            )
        memory = physical_memory()
        if self.runner is None and memory is not None and self.buffer_size > memory:
            raise ConfigError(
                f"`buffer_size` ({self.buffer_size:,} bytes) is more than this machine's "
                f"memory ({memory:,} bytes): the rows are held in memory to be sorted",
                hint="leave it out (a quarter of the memory, at most 2GiB), or give less than "
                "half of the memory",
            )
        for name in ("max_rows_per_second", "max_bytes_per_second"):
            v = getattr(self, name)
            if v is not None and not v > 0:  # also NaN
                raise ConfigError(f"`{name}` must be above 0, not {v}")
        if self.max_rows_per_second is not None:
            # a batch is committed whole: one larger than the throttle's burst (a second of
            # the rate) would pass at once and make the rate a ceiling on average only
            cap = max(1, int(self.max_rows_per_second))
            if self.batch_rows is None or self.batch_rows > cap:
                object.__setattr__(self, "batch_rows", cap)
        if self.nodes is not None and not self.nodes > 0:
            raise ConfigError(
                f"{option('nodes')} must be above 0, not {self.nodes:g}",
                hint=f"the instance's node count (processing units / 1000), e.g. "
                f"{option('nodes', 3)}",
            )
        if not 0 < self.split_expiry <= MAX_SPLIT_EXPIRY_DAYS:
            raise ConfigError(
                f"{option('split_expiry')} must be above 0 and at most "
                f"{MAX_SPLIT_EXPIRY_DAYS} days, not {self.split_expiry:g}",
                hint="Spanner keeps split points at most 30 days; the default is 10",
            )
        if self.incremental and not (self.state or self.state_file):
            raise ConfigError("`incremental=True` needs the state store", hint="drop `state=False`")
        if self.defer_indexes not in DEFER_INDEXES:
            raise ConfigError(
                f"unknown `defer_indexes` value {self.defer_indexes!r}",
                hint="one of: " + ", ".join(DEFER_INDEXES),
            )
        deferring = self.defer_indexes != "off" or self.defer_foreign_keys
        if deferring and not self.dry_run and not (self.state or self.state_file):
            raise ConfigError(
                "`defer_indexes` and `defer_foreign_keys` need the state store",
                hint="drop `state=False`: the dropped objects are recorded there before the drop, "
                "so a load that dies re-creates them when it is run again",
            )
        if not self.jobs:
            raise ConfigError("nothing to load", hint="give jobs: at least one TableJob")

    @property
    def skips_refused_keys(self) -> bool:
        """Rows refused for their keys are left out, not rejected (``skip_existing`` in insert
        mode, ``skip_missing`` in update mode)."""
        return self.skip_existing or self.skip_missing

    def dialect_of(self, job: TableJob) -> Dialect:
        """How ``job``'s files are read: the dialect, with the job's own column names."""
        return self.dialect if job.columns is None else self.dialect.with_columns(job.columns)

    def column_options(self) -> dict[str, Any]:
        """How the CSV's columns are matched to a table's, as keyword arguments of
        :func:`loader.parse.read_blocks` (``mapping``, ``ignore``, ``filled``, ``update``)."""
        return {
            "mapping": dict(self.mapping),
            "ignore": self.ignore,
            "filled": self.convert.commit_timestamp_columns,
            "update": self.mode == "update",
        }

    def again(self, table: TableSchema) -> str:
        """The command that resumes a run stopped in ``table`` (its schema): the same one,
        without ``restart`` (it would forget the progress recorded), except in replace mode for
        a table with interleaved tables, whose jobs, loaded before the restart and not begun
        again, would have the resume refused (loader.pipeline._check_replace_keeps_children)."""
        if not self.restart:
            return "the same command again"
        if self.mode == "replace" and (table.descendants or table.children):
            return (
                f"the same command again, {option('restart', True)} included (in replace mode "
                "a resume without it is refused while interleaved tables hold rows of runs "
                "before the restart)"
            )
        return f"the same command again without {option('restart', True)}"

    @property
    def refuses_rewrites(self) -> bool:
        """Writing a row again that this job's interrupted run wrote would be refused: insert
        mode, unless ``skip_existing`` leaves such rows out (then insert is idempotent too)."""
        return self.mode == "insert" and not self.skip_existing
