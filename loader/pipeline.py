"""The load itself: source -> parse -> convert -> encode -> buffer -> sort -> batch -> commit.

Each stage lives in its own module; this one only wires them together, keeps the counts and
decides when the buffer is flushed.

Threads: parsing + converting, and encoding, each run one block ahead on a thread of their own
(loader.prefetch), while this thread buffers, sorts, plans batches and hands them to the commit
pool's threads. Encoding comes before the sort because rows encode independently: the buffer
holds each row's Mutation bytes, its key columns and where it came from, and a flush only
reorders them. Arrow and numpy do their work without the GIL, so on two cores the stages
overlap rather than take turns.

Memory: encoded rows accumulate in the buffer until their Arrow size reaches a sixteenth of
``buffer_size``. Sorting and de-duplicating them, the previous flush still being committed, the
blocks in the parse, convert and encode threads and the CSV reader's own took about 12 times
the buffered rows' size in a real load, so the peak stays near ``buffer_size`` plus the
interpreter's own ~90 MiB (measured with ``python -m benchmarks.memory``; figures in
benchmarks/README.md).

Flush order: a flush's batches are contiguous, disjoint key ranges, so concurrent commits never
touch the same rows. Before a flush is handed to the commit pool the previous one is drained,
so a key that appears in two flushes is written in source order (last one wins) while parsing
of the next buffer still overlaps the commits of the previous one.
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import pyarrow as pa

from . import native
from .batch import (
    COMMIT_CEILING_BYTES,
    Budget,
    load_order,
    mutation_cost_per_row,
    oversize_reason,
)
from .buffer import LINE_COL, RECORD_COL, SOURCE_COL, Buffer
from .commit import (
    OPS,
    BatchJob,
    CommitPool,
    CommitRunner,
    CommitStats,
    Committer,
    Reordered,
    RetryPolicy,
    SpannerCommitter,
)
from .config import LoadConfig, TableJob
from .connection import connect
from .encode import write_mutation
from .errors import ExitCode, Interrupted, LoaderError
from .parse import read_blocks
from .prefetch import Prefetcher
from .progress import Progress, ProgressFn
from .rejects import Reject, RejectBudget, RejectWriter, new_load_id
from .report import LoadReport, SourceReport, TableReport
from .resume.checkpoint import (
    Checkpoint,
    committed_ranges,
    range_part,
)
from .resume.checkpoint import gaps as missing_ranges
from .resume.lease import Lease
from .resume.stores import STATE_COLUMNS, StateStore, batch_part, digest, open_state_store
from .schema import TableSchema, read_schemas
from .source import SourceInfo, expand_sources, open_source, probe_storage, read_retry
from .stages import convert_stage, encode_stage
from .throttle import AdaptiveLimiter, Throttle

DUPLICATE_IN_SOURCE = "duplicate primary key: an earlier row of the source has the same key"
BUFFER_DIVISOR = 16
"""The buffered rows may use 1/BUFFER_DIVISOR of --buffer-size (see the module docstring)."""
MARKER_BYTES = 512
"""Room left in each commit for its checkpoint marker row."""


@dataclass
class _TableRun:
    config: LoadConfig
    schema: TableSchema
    job: TableJob
    report: TableReport
    rejects: RejectBudget
    pool: Optional[CommitPool]
    stats: CommitStats
    progress: Optional[ProgressFn]
    sources: list[SourceInfo] = field(default_factory=list)
    buffer: Buffer = field(init=False)
    """The rows read since the last flush (loader/buffer.py)."""
    bytes_read: int = 0
    bytes_total: int = 0
    dry_rows: int = 0
    notes: list[str] = field(default_factory=list)
    collect: Optional[list[pa.Table]] = None
    """verify: keep each flush's sorted, de-duplicated rows here instead of committing."""
    checkpoint: Optional[Checkpoint] = None
    """This job's checkpoint (None without a state store: --no-state, dry runs, verify)."""
    storage_client: Any = None
    """Lists and reads the gs:// sources (None: one from the environment, as needed)."""
    stop: Optional[threading.Event] = None
    position: tuple[int, int] = (0, 0)
    """(source index, last record number) of the input read so far."""
    buffered_position: tuple[int, int] = (0, 0)
    resume_at: tuple[int, int] = (0, 0)
    """Where reading starts: source index, records of it already committed."""
    committed_at: tuple[int, int] = (0, 0)
    """(source index, last record number) up to which every row is committed or rejected."""
    flush_index: int = 0
    reading_done: bool = False
    """Every source is read (for progress: the rows read are then the table's total)."""
    pending: Optional[tuple[int, tuple[int, int], int]] = None
    """The flush last submitted, the input position it ends at, and the rejects of the rows
    read up to that position (reading side only; see ``read_rejects``)."""
    cut: bool = False
    """A stop came while a flush's batches were being handed out: it is incomplete."""
    skip_parts: set[str] = field(default_factory=set)
    read_rejects: int = 0
    """Rejects found on the reading side (parse, convert, duplicates, oversize) in this run.
    The rest were refused at commit time; every one of those belongs to a submitted flush."""
    buffered_read_rejects: int = 0
    """``read_rejects`` when ``buffered_position`` was taken."""
    carried_rejects: int = 0
    """Rows rejected before this run resumed: up to the resume point, and in batches that were
    committed (and are skipped) in the interrupted flush."""

    def __post_init__(self) -> None:
        self.buffer = Buffer(
            self.schema, self.config.mode, capacity=-(-self.config.buffer_size // BUFFER_DIVISOR)
        )

    def reject(self, r: Reject) -> None:
        self.read_rejects += 1
        self.rejects(r, self.schema.name)

    def _checkpoint_rejects(self, read_rejects: int) -> int:
        """Rejects of every row up to a checkpoint whose flush has been drained."""
        refused_at_commit = self.rejects.per_table.get(self.schema.name, 0) - self.read_rejects
        return self.carried_rejects + read_rejects + refused_at_commit

    def emit(self, final: bool = False) -> None:
        if self.progress is None:
            return
        with self.stats.lock:
            written, retries, commits = (
                self.stats.rows_written,
                self.stats.retries,
                self.stats.commits,
            )
        self.progress(
            Progress(
                table=self.schema.name,
                bytes_read=self.bytes_read,
                bytes_total=self.bytes_total,
                rows_read=self.report.rows_read,
                rows_written=self.dry_rows if self.config.dry_run else written,
                rows_rejected=self.rejects.per_table.get(self.schema.name, 0),
                retries=retries,
                commits=commits,
                rows_skipped=self.report.rows_skipped,
                rows_superseded=self.report.rows_superseded,
                reading_done=self.reading_done,
                final=final,
            )
        )

    # -- reading -------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except BaseException:
            if self.pool is not None:
                self._statuses_after_stop()
            raise

    def _statuses_after_stop(self) -> None:
        """A stopped or failed load reports what is committed, not what was read: a source
        is done when all of it is, partial when some of it is or may be (a flush in flight
        when the load failed), else not started."""
        done_to, record = self.committed_at
        maybe = self.pending[1] if self.pending is not None else None
        for i, src in enumerate(self.report.sources):
            if i < done_to:
                src.status = "done"
            elif (i == done_to and record > 0) or (
                maybe is not None and (i < maybe[0] or (i == maybe[0] and maybe[1] > 0))
            ):
                src.status = "partial"
            else:
                src.status = "not_started"

    def _run(self) -> None:
        cfg = self.config
        retry = read_retry(cfg.max_retry_time)
        if self.storage_client is None and any(s.startswith("gs://") for s in self.job.sources):
            probe_storage(cfg.target.connect_timeout)  # the endpoint the default client uses
        self.sources, notes = expand_sources(
            self.job.sources, storage_client=self.storage_client, retry=retry
        )
        for n in notes:
            self.report_note(n)
        if self.checkpoint is not None and not self._open_checkpoint():
            return
        self.bytes_total = sum(s.size or 0 for s in self.sources)
        self.report.sources = [
            SourceReport(
                uri=s.uri,
                generation=None if s.generation is None else str(s.generation),
                size=s.size,
            )
            for s in self.sources
        ]
        dialect = cfg.dialect
        if self.job.columns is not None:
            dialect = dialect.with_columns(self.job.columns)
        start_source, skip_records = self.resume_at
        for index, info in enumerate(self.sources):
            src_report = self.report.sources[index]
            if index < start_source:
                src_report.status = "done"
                continue
            skip = skip_records if index == start_source else 0
            src_report.status = "partial"
            convert = functools.partial(
                convert_stage, schema=self.schema, options=cfg.convert, source=info.uri, skip=skip
            )
            encode = functools.partial(
                encode_stage, schema=self.schema, skip=skip, keep_values=self.collect is not None
            )
            # Parsing + converting and encoding each run a block ahead on a thread of their
            # own (see loader.prefetch); leaving the block closes the reader there, also on an
            # error or a stop, so its background thread is released (parse.gate._ReadaheadGate).
            with open_source(info, storage_client=self.storage_client, retry=retry) as stream:
                blocks = read_blocks(
                    stream,
                    info.uri,
                    self.schema,
                    dialect,
                    mapping=dict(cfg.mapping),
                    ignore=cfg.ignore,
                    filled=cfg.convert.commit_timestamp_columns,
                    block_size=cfg.block_size,
                    on_note=self.report_note,
                )
                with (
                    Prefetcher(blocks, convert, name="loader-convert") as converted_blocks,
                    Prefetcher(iter(converted_blocks), encode, name="loader-encode") as ahead,
                ):
                    for last, ready in ahead:
                        if self.stopped():
                            self._interrupt()
                        self.bytes_read = sum(
                            s.size or 0 for s in self.sources[:index]
                        ) + _stream_position(stream, info)
                        if ready is None:
                            continue  # committed before the interruption
                        rejected = [r for r in ready.rejects if (r.record or 0) > skip]
                        for r in rejected:
                            self.reject(r)
                        table, records, lines = ready.table, ready.records, ready.lines
                        n_read = table.num_rows + len(rejected)
                        self.report.rows_read += n_read
                        src_report.rows += n_read
                        if last is not None:
                            self.position = (index, last)
                        self.add(table, ready.columns, index, records, lines)
                        self.emit()
            src_report.status = "done"
            self.position = (index + 1, 0)
        self.reading_done = True
        if self.stopped():
            self._interrupt()
        self.flush()
        if self.pool is not None:
            self.pool.drain(tick=self.emit)
        if self.stopped():
            self._interrupt()
        self._checkpoint_pending()
        self._finish_checkpoint()
        self.emit(final=True)

    def report_note(self, note: str) -> None:
        self.notes.append(note)

    def add(
        self,
        table: pa.Table,
        columns: tuple[str, ...],
        source_index: int,
        records: pa.Array,
        lines: Optional[pa.Array],
    ) -> None:
        """Buffer a block's rows (see :class:`_Encoded`); flush when the buffer is full."""
        if table.num_rows == 0:
            return
        if not self.buffer.fits(columns):
            # another column set: flush what we have first
            self.flush(self.buffered_position, self.buffered_read_rejects)
        self.buffer.add(table, columns, source_index, records, lines)
        self.buffered_position = self.position
        self.buffered_read_rejects = self.read_rejects
        if self.buffer.full:
            self.flush()

    # -- checkpoints (loader/resume/checkpoint.py) ---------------------------------------------

    def _open_checkpoint(self) -> bool:
        """Where this table's load starts, from its checkpoint; False: nothing to do."""
        assert self.checkpoint is not None
        opened = self.checkpoint.open(self.sources)
        self.sources = opened.sources
        self.rejects.carried += opened.carried_rejects
        if opened.nothing_to_do:
            if opened.already_loaded:
                self.report.sources = [SourceReport(uri=s.uri, status="done") for s in self.sources]
            return False
        if opened.resumed:
            self.rejects.carried_resumed += opened.carried_rejects
            self.carried_rejects = opened.carried_rejects
        self.resume_at = self.committed_at = (opened.source, opened.record)
        self.flush_index = opened.flushes
        self.skip_parts = opened.skip_parts
        return True

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _checkpoint_pending(self) -> None:
        """After a drain: the last submitted flush is committed; move the resume point.

        Not when a stop left some of its batches unstarted: then the resume point stays where
        it was, and the batches that did land are skipped on resume by their markers."""
        if self.pending is None:
            return
        if self.cut or (self.pool is not None and self.pool.skipped):
            return  # kept for the report: its sources may be partly written
        flush, position, read_rejects = self.pending
        self.pending = None
        self.committed_at = position
        if self.checkpoint is None:
            return
        self.resume_at = position
        self.checkpoint.moved(
            flush, position, self.flush_index, self._checkpoint_rejects(read_rejects)
        )

    def _finish_checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        self.resume_at = (len(self.sources), 0)
        self.checkpoint.finish(self.flush_index, self._checkpoint_rejects(self.read_rejects))

    def _interrupt(self) -> None:
        """Stop: let commits in flight finish, record progress, raise Interrupted."""
        if self.pool is not None:
            self.pool.drain(tick=self.emit)
        self._checkpoint_pending()
        # --restart would forget the progress just recorded: the command to resume is the
        # same one without it
        again = "the same command again" + (" without --restart" if self.config.restart else "")
        resume = f" (run {again} to resume)" if self.checkpoint is not None else ""
        raise Interrupted(
            f"stopped by a signal while loading {self.schema.name}; "
            f"{self.stats.rows_written:,} rows of it written{resume}",
            hint=f"progress is recorded; running {again} finishes the load"
            if self.checkpoint is not None
            else "checkpoints were off (--no-state): a re-run starts over",
        )

    # -- flushing ------------------------------------------------------------------------------

    def flush(
        self, position: Optional[tuple[int, int]] = None, read_rejects: Optional[int] = None
    ) -> None:
        flushed = self.buffer.take()
        if flushed is None:
            return
        end_position = position or self.position
        read_before = self.read_rejects
        if read_rejects is None:
            read_rejects = self.read_rejects
        origins = flushed.origins
        for row in flushed.duplicates:
            self.reject(self._row_reject(origins, row, DUPLICATE_IN_SOURCE))
        self.report.rows_superseded += flushed.superseded
        if self.collect is not None:
            self.collect.append(flushed.values())
            return
        data_cols = list(flushed.columns)
        key_table, order = flushed.key_table, flushed.order
        cost = mutation_cost_per_row(self.schema, data_cols)
        op = OPS[self.config.mode]
        overhead = len(write_mutation(op, self.schema.name, data_cols, pa.array([], pa.binary())))
        atomic = self.checkpoint is not None and self.checkpoint.store.atomic
        # the checkpoint marker rides in each commit: leave room for it in every budget
        marker_bytes = MARKER_BYTES if atomic else 0
        budget = Budget(
            max_mutations=self.config.max_mutations - (len(STATE_COLUMNS) if atomic else 0),
            max_bytes=self.config.max_batch_bytes - marker_bytes,
            max_rows=self.config.batch_rows,
            ceiling_bytes=COMMIT_CEILING_BYTES - marker_bytes,
        )
        encoded, sizes, plan = flushed.batches(cost, budget, overhead, self.schema.name)
        # told against the flag's own value: the marker's room counts as batch header there
        reserved = budget.max_bytes - self.config.max_batch_bytes
        flag_budget = Budget(
            max_bytes=self.config.max_batch_bytes, ceiling_bytes=COMMIT_CEILING_BYTES
        )
        positions = order.to_numpy() if len(plan.oversize) else None
        for i in plan.oversize.tolist():
            reason = oversize_reason(sizes[i].as_py(), flag_budget, overhead - reserved)
            assert positions is not None
            self.reject(self._row_reject(origins, int(positions[i]), reason))
        if self.pool is not None:
            # the previous flush's rows land first (see module docstring)
            self.pool.drain(tick=self.emit)
            self._checkpoint_pending()
        # a dictionary column: the URIs once, an index per row (no per-row string copies)
        uris = pa.array([s.uri for s in self.sources])
        sources = pa.chunked_array(
            [
                pa.DictionaryArray.from_arrays(chunk, uris)
                for chunk in origins.column(SOURCE_COL).chunks
            ],
            type=pa.dictionary(pa.int32(), pa.string()),
        )
        prov = pa.table(
            {
                "source": sources,
                "record": origins.column(RECORD_COL),
                "line": origins.column(LINE_COL),
            }
        )
        flush = self.flush_index
        for batch_no, (start, stop) in enumerate(plan.ranges):
            if self.pool is not None and self.stopped():
                # a signal: no more commits start; those that landed keep their markers, the
                # resume point stays before this flush
                self.cut = True
                self.pending = (flush, end_position, read_rejects)
                self._interrupt()
            part = batch_part(flush, batch_no)
            if part in self.skip_parts:
                self.report.rows_skipped += stop - start
                continue  # committed before the interruption
            # the rows of a batch the interrupted run was bisecting that did not land yet
            gaps = missing_ranges(stop - start, committed_ranges(self.skip_parts, part))
            self.report.rows_skipped += (stop - start) - sum(hi - lo for lo, hi in gaps)
            for lo, hi in gaps:
                n = hi - lo
                job = BatchJob(
                    table=self.schema.name,
                    op=op,
                    columns=data_cols,
                    rows=encoded.slice(start + lo, n),
                    keys=Reordered(key_table, order.slice(start + lo, n)),
                    provenance=Reordered(prov, order.slice(start + lo, n)),
                    cost_per_row=cost,
                    offset=lo,
                )
                if self.checkpoint is not None:
                    whole = (lo, hi) == (0, stop - start)
                    piece = part if whole else range_part(part, lo, hi)
                    self.checkpoint.attach_marker(job, piece, part)
                if self.pool is None:
                    self.dry_rows += n
                    self.report.mutations.append(n * cost)
                else:
                    self.pool.submit(job)
                    self.emit()
        self.skip_parts = set()
        self.flush_index += 1
        # rows this flush rejects itself (duplicates, oversize) are rows before end_position
        self.pending = (flush, end_position, read_rejects + self.read_rejects - read_before)

    def _row_reject(self, provenance: pa.Table, row: int, reason: str) -> Reject:
        p = provenance.slice(row, 1).to_pylist()[0]
        return Reject(
            source=self.sources[p[SOURCE_COL]].uri,
            line=p[LINE_COL],
            record=p[RECORD_COL],
            column=None,
            reason=reason,
            table=self.schema.name,
        )


def _stream_position(stream: Any, info: SourceInfo) -> int:
    pos = getattr(stream, "compressed_position", None)
    if callable(pos):
        return int(pos())
    try:
        return int(stream.tell())
    except (OSError, ValueError, AttributeError):
        return 0


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
) -> LoadReport:
    """Load every table of ``config``; return the report.

    Raises a :class:`~loader.errors.LoaderError` for a failed load; the partial report is
    attached to it as ``error.report``. A load that finished with rejected rows returns
    normally with ``report.exit_code == ExitCode.REJECTED_ROWS``.

    ``database`` and ``committer`` may be injected (tests, fault injection); by default the
    database comes from ``config.target`` and commits go out through
    :class:`~loader.commit.SpannerCommitter`, on google-cloud-spanner's session and channel.
    An injected committer receives each commit's ``Mutation`` messages as wire bytes.
    ``schemas`` (table name -> TableSchema) skips reading INFORMATION_SCHEMA (benchmarks
    against a server that only speaks the commit protocol). Setting ``stop`` (e.g. from a
    signal handler) ends the load gracefully: commits in flight finish, progress is recorded,
    and :class:`~loader.errors.Interrupted` is raised. ``storage_client`` (a
    ``google.cloud.storage.Client``) lists and reads the gs:// sources and holds a
    ``--state-file gs://...``; by default one is made from the environment
    (:func:`~loader.source.make_storage_client`), and only when a gs:// name needs it.
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
    writer = RejectWriter(config.rejects, load_id=report.load_id)
    rejects = RejectBudget(writer, config.max_bad_rows)
    t0 = clock()
    try:
        writer.check()
        if database is not None:
            _run(
                config,
                database,
                committer,
                report,
                rejects,
                progress,
                sleep,
                clock,
                schemas,
                stop,
                storage_client,
            )
        else:
            with connect(config.target, report.notes, stop) as db:
                _run(
                    config,
                    db,
                    committer,
                    report,
                    rejects,
                    progress,
                    sleep,
                    clock,
                    schemas,
                    stop,
                    storage_client,
                )
    except LoaderError as e:
        report.elapsed_s = clock() - t0
        report.exit_code = e.exit_code
        report.error = e.message
        e.report = report
        raise
    finally:
        writer.close()
    report.elapsed_s = clock() - t0
    rejected = writer.count or rejects.carried_resumed
    report.exit_code = ExitCode.REJECTED_ROWS if rejected else ExitCode.OK
    return report


def _run(
    config: LoadConfig,
    database: Any,
    committer: Optional[Committer],
    report: LoadReport,
    rejects: RejectBudget,
    progress: Optional[ProgressFn],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    given: Optional[dict[str, TableSchema]] = None,
    stop: Optional[threading.Event] = None,
    storage_client: Any = None,
) -> None:
    schemas = given if given is not None else read_schemas(database, [j.table for j in config.jobs])
    by_table = {schemas[j.table].name: j for j in config.jobs}
    real = {s.name: s for s in schemas.values()}
    if committer is None and not config.dry_run:
        committer = SpannerCommitter(
            database, priority=config.priority, max_commit_delay_ms=config.max_commit_delay_ms
        )
        report.notes.extend(committer.notes)
    store: Optional[StateStore] = None
    if not config.dry_run and (config.state or config.state_file):
        store = open_state_store(config.state_file, database, storage_client)
    try:
        _run_waves(
            config,
            committer,
            report,
            rejects,
            progress,
            sleep,
            clock,
            stop,
            store,
            by_table,
            real,
            load_order(real),
            storage_client,
        )
    finally:
        if store is not None:
            store.close()


def _run_waves(
    config: LoadConfig,
    committer: Optional[Committer],
    report: LoadReport,
    rejects: RejectBudget,
    progress: Optional[ProgressFn],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    stop: Optional[threading.Event],
    store: Optional[StateStore],
    by_table: dict[str, TableJob],
    real: dict[str, TableSchema],
    waves: list[list[str]],
    storage_client: Any = None,
) -> None:
    throttle = None
    if config.max_rows_per_second or config.max_bytes_per_second:
        # the stop event ends a wait for tokens at once (Ctrl-C at a low rate)
        rates = (config.max_rows_per_second, config.max_bytes_per_second)
        if clock is time.monotonic:  # the real clock: waits end early on the stop event
            throttle = Throttle(*rates, stop=stop)
        else:  # an injected clock comes with its sleep (tests)
            throttle = Throttle(*rates, stop=stop, clock=clock, sleep=sleep)
    for wave in waves:
        for name in wave:
            job, schema = by_table[name], real[name]
            stats = CommitStats()
            pool = None
            limiter = None
            if not config.dry_run:
                limiter = AdaptiveLimiter(
                    config.concurrency,
                    initial=1 if config.adaptive else config.concurrency,
                    adaptive=config.adaptive,
                    clock=clock,
                )
                assert committer is not None
                runner = CommitRunner(
                    committer,
                    stats,
                    functools.partial(rejects, table=name),
                    RetryPolicy(max_retry_time=config.max_retry_time),
                    sleep=sleep,
                    clock=clock,
                    throttle=throttle,
                    limiter=limiter,
                )
                pool = CommitPool(runner, config.concurrency, stop)
            treport = TableReport(table=name)
            report.tables.append(treport)
            run = _TableRun(config, schema, job, treport, rejects, pool, stats, progress)
            run.stop = stop
            run.storage_client = storage_client
            lease = None
            if store is not None:
                run_id = job_id(config, job, name)
                report.run_ids[name] = run_id
                lease = Lease(store, run_id, name)
                run.checkpoint = Checkpoint(
                    store, run_id, name, config, job, note=run.report_note, lease=lease
                )
            t0 = clock()
            try:
                if lease is not None:
                    lease.acquire()
                    report.notes.extend(lease.notes)
                run.run()
            finally:
                if pool is not None:
                    pool.close(wait=True)
                if store is not None:
                    _sync_quietly(store)
                if lease is not None:
                    lease.release()
                treport.elapsed_s = clock() - t0
                treport.rows_rejected = rejects.per_table.get(name, 0)
                report.notes.extend(run.notes)
                if pool is not None:
                    treport.rows_written = stats.rows_written
                    treport.commits = stats.commits
                    treport.retries = stats.retries
                    treport.bytes = stats.bytes_written
                    treport.mutations = list(stats.mutations)
                    treport.latencies_s = list(stats.latencies)
                if limiter is not None and stats.commits:
                    treport.concurrency = round(limiter.stats().settled, 1)


def job_id(config: LoadConfig, job: TableJob, table: str) -> str:
    """The run id of a job: its checkpoint's key (database, table, source patterns, mode)."""
    return digest(
        {
            "database": config.target.path,
            "table": table,
            "sources": list(job.sources),
            "mode": config.mode,
        }
    )


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


def read_source_tables(
    config: LoadConfig, database: Any, on_note: Optional[Callable[[str], None]] = None
) -> dict[str, tuple[TableSchema, list[pa.Table]]]:
    """Each job's source rows exactly as a load would write them (converted, sorted,
    de-duplicated per flush), without writing anything: what ``verify`` compares against."""
    schemas = read_schemas(database, [j.table for j in config.jobs])
    writer = RejectWriter(None)
    rejects = RejectBudget(writer, config.max_bad_rows)
    out: dict[str, tuple[TableSchema, list[pa.Table]]] = {}
    for job in config.jobs:
        schema = schemas[job.table]
        collected: list[pa.Table] = []
        run = _TableRun(
            config,
            schema,
            job,
            TableReport(table=schema.name),
            rejects,
            None,
            CommitStats(),
            None,
            collect=collected,
        )
        run.run()
        for n in run.notes:
            if on_note:
                on_note(n)
        out[schema.name] = (schema, collected)
    return out
