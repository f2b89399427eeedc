"""The load itself: source -> parse -> convert -> encode -> buffer -> sort -> batch -> commit.

Each stage lives in its own module; this one only wires them together: it connects, reads the
schemas, orders the tables (parents before their interleaved children), opens the checkpoint
store, and for each table builds the commit pool, takes the job's lease and runs a
:class:`~loader.table_load.TableLoad`, then fills the report. The tables of one wave load side
by side (loader/waves.py).
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import pyarrow as pa

from . import native
from .access import DatabaseAccess, access_of, client_of
from .batch import (
    load_order,
)
from .buffer import DUPLICATE_IN_SOURCE
from .commit import (
    CommitPool,
    CommitRunner,
    CommitStats,
    Committer,
    RetryPolicy,
)
from .config import LoadConfig, TableJob
from .connection import connect_access
from .convert import check_commit_timestamp_column
from .deferred import Deferral
from .errors import ConfigError, ExitCode, Interrupted, LoaderError, option
from .presplit_job import LoadSplits
from .progress import Progress, ProgressFn
from .rejects import Reject, RejectBudget, RejectWriter, fix_advice_for, new_load_id
from .report import LoadReport, TableReport
from .resume.checkpoint import Checkpoint, committed_any, job_id
from .resume.incremental import IncrementalListing, ReadOnly
from .resume.lease import Lease
from .resume.stores import StateStore, open_state_store, peek_state_store
from .schema import TableSchema, read_catalog, read_schemas
from .source import SourceInfo, is_stream
from .table_load import TableLoad, check_columns, list_sources
from .throttle import AdaptiveLimiter, Throttle
from .waves import LinkedStop, run_side_by_side, serialized, tables_at_once


def load(
    config: LoadConfig,
    *,
    progress: Optional[ProgressFn] = None,
    database: Any = None,
    committer: Optional[Committer] = None,
    schemas: Optional[dict[str, TableSchema]] = None,
    stop: Optional[threading.Event] = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    storage_client: Any = None,
    reasons: Optional[Callable[[str], str]] = None,
) -> LoadReport:
    """Load every table of ``config``; return the report.

    Raises a :class:`~loader.errors.LoaderError` for a failed load; the partial report is
    attached to it as ``error.report``. A load that finished with rejected rows returns
    normally with ``report.exit_code == ExitCode.REJECTED_ROWS``.

    ``database`` (a google-cloud-spanner ``Database`` or a
    :class:`~loader.access.DatabaseAccess`) and ``committer`` may be injected (tests, fault
    injection). By default the load speaks Spanner's gRPC protocol itself
    (:func:`~loader.connection.connect_access`, :mod:`loader.wire`) and commits through its
    :class:`~loader.wire.WireCommitter`; an injected client ``Database`` reads and commits
    through the client library (:class:`~loader.access.ClientAccess`, whose committer is
    :class:`~loader.commit.SpannerCommitter`).
    An injected committer receives each commit's ``Mutation`` messages as wire bytes.
    ``schemas`` (table name -> TableSchema) skips reading INFORMATION_SCHEMA (benchmarks
    against a server that only speaks the commit protocol). Setting ``stop`` (e.g. from a
    signal handler) ends the load gracefully: commits in flight finish, progress is recorded,
    and :class:`~loader.errors.Interrupted` is raised; a ``KeyboardInterrupt`` (a second
    signal: give up at once) leaves with the partial report too. ``storage_client`` (a
    ``google.cloud.storage.Client``) lists and reads the gs:// sources and holds a
    ``--state-file gs://...``; by default one is made from the environment
    (:func:`~loader.source.make_storage_client`), and only when a gs:// name needs it.
    ``reasons`` rewrites the reasons written to the reject file (the command line names the
    options in them as its flags).
    """
    now = dt.datetime.now(dt.timezone.utc)
    report = LoadReport(
        database=config.target.path,
        mode=config.mode,
        dry_run=config.dry_run,
        started_at=now.isoformat(timespec="seconds"),
        load_id=new_load_id(now),
        rejects_file=str(config.rejects) if config.rejects else None,
    )
    report.compiled_parts = native.available()
    if not report.compiled_parts:
        report.notes.append(f"compiled parts: {native.status()}")
    writer = RejectWriter(config.rejects, load_id=report.load_id, speak=reasons)
    stateful = bool(config.state or config.state_file)
    rejects = RejectBudget(
        writer,
        config.max_bad_rows,
        insert=config.refuses_rewrites,
        fix_advice=fix_advice_for(config.dry_run, stateful, config.refuses_rewrites),
    )

    def run(db: Any) -> None:
        _Run(config, db, committer, report, rejects, progress, sleep, clock, stop, storage_client)(
            schemas
        )

    t0 = clock()
    try:
        if config.runner is not None:
            from .beam import check_beam

            check_beam(config)  # before connecting: a missing apache-beam is a configuration error
            from .beam.results import default_location

            # and so is a runner whose workers could not hand back rejects and counts
            default_location(config.runner, config.beam_options, config.beam_results)
            from .beam.limits import committers

            committers(config.runner, config.beam_options, 1)  # worker counts are numbers
        writer.check()
        if database is not None:
            run(access_of(database))
        else:
            with connect_access(config.target, report.notes, stop, config.max_retry_time) as access:
                run(access)
    except LoaderError as e:
        report.elapsed_s = clock() - t0
        report.exit_code = e.exit_code
        report.error, report.hint = e.message, e.hint
        e.report = report
        raise
    except Exception as e:  # a bug: the CLI tells it in one line, and the report says failed
        report.elapsed_s = clock() - t0
        report.exit_code = ExitCode.FAILED
        report.error = f"{type(e).__name__}: {e}"
        e.report = report  # type: ignore[attr-defined]
        raise
    except KeyboardInterrupt as e:  # given up at once (a second signal): say what got done
        report.elapsed_s = clock() - t0
        report.exit_code = ExitCode.INTERRUPTED
        report.error = ABORTED
        e.report = report  # type: ignore[attr-defined]
        raise
    finally:
        writer.close()
    report.elapsed_s = clock() - t0
    rejected = writer.count or report.rows_rejected_before
    report.exit_code = ExitCode.REJECTED_ROWS if rejected else ExitCode.OK
    return report


ABORTED = (
    "aborted by a second signal: commits in flight may have landed, and progress is kept up "
    "to the last checkpoint (run the same command again to resume)"
)
"""The error of a load given up at once (a ``KeyboardInterrupt`` out of :func:`load`)."""


@dataclass
class _Run:
    """One call of :func:`load` on a connected database: every table, in load order."""

    config: LoadConfig
    database: DatabaseAccess
    committer: Optional[Committer]
    report: LoadReport
    rejects: RejectBudget
    progress: Optional[ProgressFn]
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    stop: Optional[threading.Event]
    storage_client: Any
    store: Optional[StateStore] = None
    peek: Any = None
    """A dry run: the state a load would find, to read only (None: none)."""
    throttle: Optional[Throttle] = None
    run_ids: dict[str, str] = field(default_factory=dict)
    """Each table's run id, as its load found it (the report takes them from here: asking
    the store again after a failure could fail too, and hide the error)."""

    def __call__(self, given: Optional[dict[str, TableSchema]] = None) -> None:
        config = self.config
        tables = [j.table for j in config.jobs]
        catalog = None
        if given is not None:
            schemas = given
        else:
            schemas, catalog = read_catalog(self.database, tables)
        by_table = {schemas[j.table].name: j for j in config.jobs}
        real = {s.name: s for s in schemas.values()}
        _check_tables(config, real.values())
        self.report.notes.extend(_table_notes(config, real.values(), by_table))
        if self.committer is None and not config.dry_run:
            self.committer = self.database.committer(
                priority=config.priority,
                max_commit_delay_ms=config.max_commit_delay_ms,
            )
            self.report.notes.extend(getattr(self.committer, "notes", ()))
        if config.max_rows_per_second or config.max_bytes_per_second:
            # the stop event ends a wait for tokens at once (Ctrl-C at a low rate)
            rates = (config.max_rows_per_second, config.max_bytes_per_second)
            if self.clock is time.monotonic:  # the real clock: waits end on the stop event
                self.throttle = Throttle(*rates, stop=self.stop)
            else:  # an injected clock comes with its sleep (tests)
                self.throttle = Throttle(*rates, stop=self.stop, clock=self.clock, sleep=self.sleep)
        if not config.dry_run and (config.state or config.state_file):
            self.store = open_state_store(
                config.state_file, self.database, self.storage_client, catalog
            )
        elif config.state or config.state_file:  # a dry run: what a load would resume
            self.peek = peek_state_store(config.state_file, self.database, catalog)
            self.report.notes.extend(_dry_run_notes(config, self.peek, by_table))
        try:
            deferral = Deferral(
                config,
                self.database,
                self.store,
                self.report.notes,
                say=getattr(self.progress, "message", lambda line: None),
                sleep=self.sleep,
                clock=self.clock,
            )
            if len(by_table) > 1 or deferral.wanted:
                # A source that is missing is told before anything is dropped (a tryout: a
                # typo in the manifest's last table left every index and foreign key gone),
                # and a header that does not fit its table before any table is written (a
                # tryout: a manifest's first table loaded, then the second failed, exit 2);
                # the header not for a job an earlier run began: it resumes, finds itself
                # loaded, or (incremental) reads only what is new, not its first source;
                # unless this run restarts, which forgets what earlier runs did.
                found = None if config.restart else self.peek
                may_resume = not (config.restart or config.dry_run)
                if found is None and may_resume and (config.state or config.state_file):
                    found = peek_state_store(config.state_file, self.database, catalog)
                for name, job in by_table.items():
                    if _run_record(found, config, job, name) is None:
                        check_columns(config, real[name], job, self.storage_client)  # lists too
                    elif deferral.wanted and (config.incremental or not config.dry_run):
                        listed, _ = list_sources(config, job, self.storage_client)
                        if config.incremental and not _anything_new(
                            found, config, job, name, listed
                        ):
                            # nothing to write: its indexes are not dropped and rebuilt (a
                            # tryout's nightly run rebuilt every table's, night after night)
                            deferral.nothing_new.add(name)
                if config.mode == "replace":  # what the load will open, a gs:// one too
                    state = self.store if self.store is not None else found
                    _check_replace_keeps_children(
                        state, config, by_table, real, self.storage_client
                    )
            if deferral.begin(by_table):  # indexes dropped: batches count without them
                if given is None and not config.dry_run:
                    schemas = read_schemas(self.database, tables)
                real = deferral.schemas({s.name: s for s in schemas.values()})
            splits = LoadSplits(
                config,
                self.store,
                real,
                by_table,
                notes=self.report.notes,
                storage_client=self.storage_client,
                progress=self.progress,
            )
            self.report.split_points = splits.before()
            try:
                for wave in load_order(real):
                    self._wave(wave, by_table, real)
            except LoaderError:
                deferral.failed_note()
                raise
            self.report.split_points = splits.after() or self.report.split_points
            deferral.finish()
        finally:
            if self.store is not None:
                self.store.close()

    def _wave(
        self, wave: list[str], by_table: dict[str, TableJob], real: dict[str, TableSchema]
    ) -> None:
        """Load the tables of one wave, side by side (see loader/waves.py)."""
        # a Beam pipeline per table runs one at a time (each one is parallel on its runner)
        at_once = 1 if self.config.runner else tables_at_once(wave, self.config.parallel_tables)
        linked = LinkedStop(self.stop) if at_once > 1 else None
        side_by_side = linked is not None
        shared = _Shared(
            stop=linked or self.stop,
            limiter=self._limiter() if side_by_side else None,
            buffer_share=at_once,
            progress=serialized(self.progress) if side_by_side else self.progress,
        )
        notes: dict[str, list[str]] = {name: [] for name in wave}
        tables: dict[str, TableReport] = {}
        wave_notes: list[str] = []

        def work(name: str) -> None:
            self._table(name, by_table[name], real[name], shared, tables, notes[name])

        try:
            if linked is not None:
                run_side_by_side(wave, work, linked, at_once, wave_notes.append)
            else:
                for name in wave:
                    work(name)
        finally:
            # in wave order, whichever table finished first
            for name in wave:
                if name in tables:
                    self.report.tables.append(tables[name])
                    if name in self.run_ids:
                        self.report.run_ids[name] = self.run_ids[name]
                self.report.notes.extend(notes[name])
            self.report.notes.extend(wave_notes)

    def _limiter(self) -> Optional[AdaptiveLimiter]:
        """The ceiling of commits in flight (None for a dry run: nothing is committed)."""
        config = self.config
        if config.dry_run:
            return None
        in_flight = config.concurrency
        assert in_flight is not None  # LoadConfig fills in the default
        return AdaptiveLimiter(
            in_flight,
            initial=1 if config.adaptive else in_flight,
            adaptive=config.adaptive,
            clock=self.clock,
        )

    def _table(
        self,
        name: str,
        job: TableJob,
        schema: TableSchema,
        shared: _Shared,
        tables: dict[str, TableReport],
        notes: list[str],
    ) -> None:
        """Load one table: its commit pool, its lease and checkpoint, then its report."""
        config, clock, store = self.config, self.clock, self.store
        if config.runner is not None:
            treport = tables[name] = TableReport(table=name)
            self._beam_table(name, job, schema, treport)
            return
        stats = CommitStats()
        pool = None
        limiter = None
        if not config.dry_run:
            in_flight = config.concurrency
            assert in_flight is not None  # LoadConfig fills in the default
            limiter = shared.limiter or self._limiter()
            assert self.committer is not None
            runner = CommitRunner(
                self.committer,
                stats,
                functools.partial(self.rejects, table=name),
                RetryPolicy(max_retry_time=config.max_retry_time),
                sleep=self.sleep,
                clock=clock,
                throttle=self.throttle,
                limiter=limiter,
                budget=(config.max_mutations, config.max_batch_bytes),
                skip_refused_keys=config.skips_refused_keys,
                marker_landed=store.marker_landed if store is not None and store.atomic else None,
            )
            pool = CommitPool(runner, in_flight, shared.stop)
        treport = TableReport(table=name)
        tables[name] = treport
        run = TableLoad(
            config,
            schema,
            job,
            treport,
            self.rejects,
            pool,
            stats,
            shared.progress,
            buffer_share=shared.buffer_share,
        )
        run.stop = shared.stop
        run.storage_client = self.storage_client
        if config.dry_run and config.incremental and self.peek is not None:
            run.preview = IncrementalListing(
                ReadOnly(self.peek),  # type: ignore[arg-type]
                job_id(config, job, name, self.peek),
                name,
                config,
                job,
                note=run.report_note,
            )
        lease = None
        if store is not None:
            run_id = self.run_ids[name] = job_id(config, job, name, store)
            lease = Lease(store, run_id, name)
            run.checkpoint = Checkpoint(
                store,
                run_id,
                name,
                config,
                job,
                note=run.report_note,
                lease=lease,
                buffer_share=shared.buffer_share,
                load_id=self.report.load_id,
                rejects_file=_shown_path(self.rejects.writer.path),
            )
        t0 = clock()
        try:
            if lease is not None:
                lease.acquire()
                notes.extend(lease.notes)
            run.run()
        except BaseException:
            if isinstance(shared.stop, LinkedStop):
                shared.stop.set()  # the tables beside this one stop now, not after its clean-up
            raise
        finally:
            try:
                try:
                    if pool is not None:
                        pool.close(wait=True)
                finally:  # also after a second signal: markers a store holds back are written
                    if store is not None:
                        _sync_quietly(store)
                    if lease is not None:
                        lease.release()
            finally:  # also when a second signal cut the wait short: the report says what landed
                treport.elapsed_s = clock() - t0
                treport.rows_rejected = self.rejects.per_table.get(name, 0)
                notes.extend(run.notes)
                if pool is not None:
                    treport.rows_written = stats.rows_written
                    treport.count_key_skips(config.mode, stats.rows_key_skipped)
                    treport.commits = stats.commits
                    treport.retries = stats.retries
                    treport.bytes = stats.bytes_written
                    treport.mutations = list(stats.mutations)
                    treport.latencies_s = list(stats.latencies)
                if limiter is not None and stats.commits:
                    treport.concurrency = round(limiter.stats().settled, 1)

    def _beam_table(
        self, name: str, job: TableJob, schema: TableSchema, treport: TableReport
    ) -> None:
        from .beam import load_table

        run_id = self.run_ids[name] = job_id(self.config, job, name, self.store)
        if self.stop is not None and self.stop.is_set():  # Ctrl-C during an earlier table's
            again = self.config.again(schema)  # pipeline, which ran to its end
            raise Interrupted(
                f"stopped by a signal before loading {name} (run {again} to resume)",
                hint=f"the tables before it are loaded; running {again} loads the rest",
            )
        t0 = self.clock()
        say = getattr(self.progress, "message", None)

        def starting() -> None:  # the workers' progress comes back only when the pipeline ends
            if say is not None:
                say(f"{name}: the Beam pipeline runs on {self.config.runner}; its rows are "
                    "counted when it ends")  # fmt: skip

        try:
            load_table(
                self.config,
                job,
                schema,
                client_of(self.database),
                run_id,
                treport,
                functools.partial(self.rejects, table=name),
                self.storage_client,
                self.report.notes,
                self.report.load_id,
                starting,
            )
        except (KeyboardInterrupt, Interrupted):  # its counts come back only when it ends
            self.report.notes.append(
                f"{name}: rows the Beam pipeline committed before it was stopped are not "
                "counted here; the same command resumes after them"
            )
            raise
        finally:
            treport.elapsed_s = self.clock() - t0
            treport.rows_rejected = self.rejects.per_table.get(name, 0)
        if self.progress is not None:  # the table's last line, as without a runner
            size = sum(s.size or 0 for s in treport.sources)
            self.progress(
                Progress(
                    name,
                    size,
                    size,
                    treport.rows_read,
                    treport.rows_written,
                    treport.rows_rejected,
                    treport.retries,
                    treport.commits,
                    rows_skipped=treport.rows_skipped,
                    rows_superseded=treport.rows_superseded,
                    rows_key_skipped=treport.rows_existing + treport.rows_missing,
                    reading_done=True,
                    final=True,
                    elapsed_s=treport.elapsed_s,
                )
            )


@dataclass(frozen=True)
class _Shared:
    """What the tables of one wave share (see loader/waves.py)."""

    stop: Optional[threading.Event]
    limiter: Optional[AdaptiveLimiter]
    """One ceiling of commits in flight for tables side by side (None: each table its own)."""
    buffer_share: int
    """--buffer-size is split between this many tables."""
    progress: Optional[ProgressFn]


def _sync_quietly(store: StateStore) -> None:
    """Save deferred batch markers; while another error is on its way out, that one wins."""
    import sys

    if sys.exc_info()[1] is None:
        store.sync()
        return
    try:
        store.sync()
    except LoaderError:
        pass


def _dry_run_notes(config: LoadConfig, peek: Any, by_table: dict[str, TableJob]) -> list[str]:
    """For a dry run, which tables' jobs a load would resume or find loaded: the dry run
    reads every row, the load would not (an ``--incremental`` one reads what the load would
    read: :meth:`~.resume.incremental.IncrementalListing.preview`)."""
    if peek is None or config.restart:  # a restart forgets what earlier runs did
        return []
    notes = []
    for name, job in by_table.items():
        row = _run_record(peek, config, job, name)
        if row is None or any(is_stream(s) for s in job.sources):
            continue  # (a stream's job is read whole every time: never resumed nor loaded)
        if row.get("status") != "done":
            notes.append(
                f"{name}: a run of this job was interrupted at source {int(row['source']) + 1}, "
                f"after record {int(row['record']):,}: the same load, not a dry run, "
                "resumes it there (this dry run read every row)"
            )
        elif not config.incremental:
            notes.append(
                f"{name}: an earlier run of this job loaded it: the same load, not a dry "
                "run, finds it loaded if its sources and options are as they were "
                "(`restart=True` loads it again)"
            )
    return notes


def _table_notes(
    config: LoadConfig, schemas: Iterable[TableSchema], loaded: Collection[str]
) -> list[str]:
    """What a load does that a table's schema may not lead its user to expect (``loaded``:
    the tables this run loads)."""
    notes: list[str] = []
    for s in schemas:
        notes.extend(
            f"{s.name}: key column {k} is the commit timestamp, which the rows of one commit "
            "share: rows whose other key columns are equal are one key there (the last is kept "
            "and the others counted as superseded, or rejected in insert mode); to keep each, "
            "give the table a key column that tells them apart"
            for k in s.key_names
            if k in config.convert.commit_timestamp_columns
        )
        if config.mode == "replace" and s.children and not set(s.children) & set(loaded):
            notes.append(
                f"{s.name}: replace mode deletes each row before it writes it again, and with "
                f"it the row's interleaved rows in {', '.join(s.descendants or s.children)} "
                "(ON DELETE CASCADE; "
                "without it, a row that has some is refused): `mode='upsert'` keeps them"
            )
        if s.references_itself and not config.defer_foreign_keys:
            notes.append(
                f"{s.name} has a foreign key to itself: rows are committed in key order, batch "
                "by batch, so a row whose referenced row comes in a later batch is refused; "
                "`defer_foreign_keys=True` checks them all once the rows are in"
            )
    return notes


def _check_tables(config: LoadConfig, schemas: Iterable[TableSchema]) -> None:
    """What each table of a run needs of the options, checked before any checkpoint is read
    (a misspelt column then gets its own message, not "options changed")."""
    for schema in schemas:
        for name in sorted(config.convert.commit_timestamp_columns):
            check_commit_timestamp_column(schema, name)


def _shown_path(path: Optional[Path]) -> str:
    """``path`` absolute, for a later run in another directory ("" for none)."""
    return str(path.absolute()) if path is not None else ""


def _check_replace_keeps_children(
    found: Any,
    config: LoadConfig,
    by_table: Mapping[str, TableJob],
    schemas: Mapping[str, TableSchema],
    storage_client: Any,
) -> None:
    """Replace mode: refused when a table that this run writes has interleaved tables in the
    run that earlier runs of their jobs wrote rows into. Replace deletes each row it writes
    again with its interleaved rows (or is refused where the child rows stay); a run loads
    the children after their parents, but one that finds a child's job loaded, or resumes it,
    or (``--incremental``) reads only its new sources, would leave its older rows gone, and
    say it loaded the job (a tryout's nightly manifest: Orders 600 rows, then 0; reviews: a
    parent job renamed, a parent read from stdin, a restart stopped in a parent and resumed
    without it). ``restart`` loads every table in full."""
    if found is None or config.restart:
        return
    from .beam.resume import DONE_PART, committed_batches

    ids = {name: job_id(config, job, name, found) for name, job in by_table.items()}

    def streamed(name: str) -> bool:  # read whole on every run: never found loaded
        return any(is_stream(s) for s in by_table[name].sources)

    def written_before(name: str) -> bool:
        """Whether an earlier run of the table's job committed rows this run may not write
        again: a record of a run that committed some, or sources recorded as loaded."""
        if streamed(name):
            return False
        if config.runner is not None:  # the Beam path records its job under beam/
            done = found.get(ids[name], name, DONE_PART) is not None
            return done or committed_batches(found, ids[name], name) > 0
        if _run_record(found, config, by_table[name], name) is not None:
            return True
        return bool(found.parts(ids[name], name, "src/"))

    def writes(name: str) -> bool:
        """Whether this run writes rows of the table: a stream, new or changed sources
        (incremental), else a job not loaded (never begun, or interrupted)."""
        if streamed(name):
            return True
        if config.incremental:
            listed, _ = list_sources(config, by_table[name], storage_client)
            return _anything_new(found, config, by_table[name], name, listed)
        if config.runner is not None:
            return found.get(ids[name], name, DONE_PART) is None
        run = found.get(ids[name], name, "run")
        return run is None or run.get("status") != "done"

    for name in by_table:
        schema = schemas[name]
        below = [d for d in schema.descendants or schema.children if d in by_table]
        held = [d for d in below if written_before(d)]
        if not held or not writes(name):
            continue
        again = (
            "it does not load again in full"
            if config.incremental
            else "this run finds loaded, or resumes"
        )
        raise ConfigError(
            f"{name}: replace mode deletes each row it writes again with its interleaved rows, "
            f"and this run writes rows of {name} while earlier runs loaded "
            f"{', '.join(held)}, which {again}: their rows under the {name} rows written "
            "would be gone",
            hint=f"load with {option('mode', 'upsert')}, which keeps interleaved rows, or with "
            f"{option('restart', True)}, which loads every table of the run in full (parents "
            "first)",
        )


def _anything_new(
    found: Any, config: LoadConfig, job: TableJob, table: str, sources: list[SourceInfo]
) -> bool:
    """Whether an ``--incremental`` run of ``job`` has anything to read (a new or changed
    source, or an interrupted run to resume), as its load will decide from the checkpoints
    ``found`` (read only)."""
    listing = IncrementalListing(
        ReadOnly(found),  # type: ignore[arg-type]
        job_id(config, job, table, found),
        table,
        config,
        job,
        note=lambda _: None,
    )
    return listing.preview(sources)


def _run_record(
    found: Any, config: LoadConfig, job: TableJob, table: str
) -> Optional[dict[str, Any]]:
    """The record an earlier run of ``job`` left (it is loaded, or partly) in the checkpoints
    ``found`` (read only: :func:`peek_state_store`); None when there is none, or its run
    committed nothing (a load starts such a job afresh)."""
    if found is None:
        return None
    run_id = job_id(config, job, table, found)
    row = found.get(run_id, table, "run")
    if row is None or not committed_any(found, run_id, table, row):
        return None
    return row  # type: ignore[no-any-return]


def read_source_tables(
    config: LoadConfig,
    database: Any,
    on_note: Optional[Callable[[str], None]] = None,
    reports: Optional[dict[str, TableReport]] = None,
    leave_out: Optional[Mapping[str, Mapping[str, Mapping[int, Any]]]] = None,
    left_out: Optional[dict[str, tuple[int, int]]] = None,
    existing: Optional[Mapping[str, Mapping[str, Collection[int]]]] = None,
    bad_row_advice: Optional[Callable[[Reject, str], Optional[str]]] = None,
) -> dict[str, tuple[TableSchema, list[pa.Table]]]:
    """Each job's source rows exactly as a load would write them (converted, sorted,
    de-duplicated per flush), without writing anything: what ``verify`` compares against.
    ``reports``: filled with each table's counts (rows rejected, rows a later row of their
    key in the same flush replaced). ``leave_out``: per table, rows not to return (a load
    rejected them; see ``TableLoad.leave_out``); ``left_out`` is filled with how many of each
    table's rows were so left out, and how many listed rows were kept because their line
    names another key. ``existing``: per table, source and record, the rows Spanner refused
    as their key was in the table (insert mode): such a row found a duplicate of an earlier
    source row is no bad row (the load had the earlier one in an earlier flush).
    ``bad_row_advice``: what to say of a bad row over the limit, where it
    has something to say (None: the usual advice)."""
    schemas = read_schemas(database, [j.table for j in config.jobs])
    _check_tables(config, schemas.values())
    writer = RejectWriter(None)

    def listed(r: Reject, table: str) -> bool:
        if r.record in (leave_out or {}).get(table, {}).get(r.source, {}):
            return True
        return r.reason.startswith(DUPLICATE_IN_SOURCE) and r.record in (existing or {}).get(
            table, {}
        ).get(r.source, ())

    rejects = RejectBudget(
        writer,
        config.max_bad_rows,
        verify=True,
        expected=listed if leave_out or existing else None,
        advice_for=bad_row_advice,
    )
    out: dict[str, tuple[TableSchema, list[pa.Table]]] = {}
    for job in config.jobs:
        schema = schemas[job.table]
        collected: list[pa.Table] = []
        treport = TableReport(table=schema.name)
        run = TableLoad(
            config,
            schema,
            job,
            treport,
            rejects,
            None,
            CommitStats(),
            None,
            collect=collected,
            leave_out=(leave_out or {}).get(schema.name),
        )
        run.run()
        for n in run.notes:
            if on_note:
                on_note(n)
        out[schema.name] = (schema, collected)
        if left_out is not None:
            left_out[schema.name] = (run.left_out, run.other_keys)
        if reports is not None:
            treport.rows_rejected = rejects.per_table.get(schema.name, 0)
            reports[schema.name] = treport
    return out
