"""One table's load: read its sources block by block, buffer, flush, hand the batches to the
commit pool, and keep the checkpoint moving. :mod:`loader.pipeline` runs one per table.

Threads: parsing, converting and encoding each run one block ahead on a thread of their own
(loader.prefetch), while this thread buffers, sorts, plans batches and hands them to the commit
pool's threads. Arrow's streaming CSV reader parses a block only when it is asked for one, so
the parse thread asks as soon as it has handed the last one on: block k + 1 is parsed while
block k is converted (before, one thread did both in turn, and that thread set the pace). The
parse thread only reads and numbers a block's records: the block's checks (UTF-8, a trailing
field) and text views are made on the convert thread (loader.parse.reader.read_deferred_blocks),
since the reading is the one stage that cannot run beside itself.
Encoding comes before the sort because rows encode independently: the buffer holds each row's
Mutation bytes, its key columns and where it came from, and a flush only puts them in order.
Arrow and numpy do their work without the GIL, so on two cores the stages overlap rather than
take turns. The stage threads, each a block ahead, soon wait for a flush, so what it takes
(key columns to de-duplicate) uses every core (loader.native.spread). It copies no encoded
row: each commit gathers its own batch's rows in key order on the commit thread that sends it
(loader.commit.jobs.Gathered), so that copy runs beside the reading and the network waits
instead of in the flush they wait on, and a flush holds its rows once, not twice.

Memory: encoded rows accumulate in the buffer until their Arrow size reaches a sixteenth of
``buffer_size`` (of its share, when tables load side by side: loader/waves.py). Sorting and de-duplicating them, the previous flush still being committed, the
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

import functools
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Optional

import pyarrow as pa
import pyarrow.compute as pc

from . import native
from .buffer import LINE_COL, MARKER_BYTES, RECORD_COL, SOURCE_COL, Buffer
from .commit import (
    CommitPool,
    CommitStats,
)
from .config import LoadConfig, TableJob
from .errors import Interrupted, LoaderError, SourceError, TooManyBadRows
from .parse.blocks import DeferredBlock
from .parse.columns import resolve_columns
from .parse.reader import read_deferred_blocks
from .prefetch import Prefetcher
from .progress import Progress, ProgressFn
from .rejects import Reject, RejectBudget, nothing_committed_hint
from .report import SourceReport, TableReport
from .resume.checkpoint import (
    STREAM_KINDS,
    Checkpoint,
    committed_ranges,
    range_part,
)
from .resume.checkpoint import gaps as missing_ranges
from .resume.incremental import SEND_AGAIN, IncrementalListing
from .resume.stores import STATE_COLUMNS, batch_part
from .schema import TableSchema
from .source import SourceInfo, expand_sources, open_source, probe_storage, read_retry
from .stages import convert_stage, encode_stage

BUFFER_DIVISOR = 16
"""The buffered rows may use 1/BUFFER_DIVISOR of --buffer-size (see the module docstring)."""


@dataclass
class TableLoad:
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
    bytes_skipped: int = 0
    """Of ``bytes_read``, those before where this run resumed: their rows are not read."""
    dry_rows: int = 0
    notes: list[str] = field(default_factory=list)
    collect: Optional[list[pa.Table]] = None
    """verify: keep each flush's sorted, de-duplicated rows here instead of committing."""
    leave_out: Optional[Mapping[str, Mapping[int, Optional[Collection[str]]]]] = None
    """verify: rows not to collect, by source URI and record number (those a load's reject
    file lists: a load rejected them, so the table does not hold them), each with the key
    texts its lines give (a row Spanner refused: ``key (...)``), or None when a line gives
    none."""
    left_out: int = 0
    """Rows of ``collect`` left out as ``leave_out`` asked."""
    other_keys: int = 0
    """Rows ``leave_out`` lists whose line names another key than the row has (a line of an
    older run, when the source has changed since): collected."""
    checkpoint: Optional[Checkpoint] = None
    """This job's checkpoint (None without a state store: --no-state, dry runs, verify)."""
    preview: Optional[IncrementalListing] = None
    """A dry run of an ``--incremental`` job: which sources the load would read."""
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
    buffer_share: int = 1
    """``buffer_size`` is shared by this many tables loading side by side (loader/waves.py):
    this one buffers a ``1 / buffer_share`` part of it."""

    def __post_init__(self) -> None:
        self.buffer = Buffer(
            self.schema,
            self.config.mode,
            capacity=-(-self.config.buffer_size // (BUFFER_DIVISOR * self.buffer_share)),
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
            written, retries, commits, key_skipped = (
                self.stats.rows_written,
                self.stats.retries,
                self.stats.commits,
                self.stats.rows_key_skipped,
            )
        self.progress(
            Progress(
                table=self.schema.name,
                bytes_read=self.bytes_read,
                bytes_total=self.bytes_total,
                bytes_skipped=self.bytes_skipped,
                rows_read=self.report.rows_read,
                rows_written=self.dry_rows if self.config.dry_run else written,
                rows_rejected=self.rejects.per_table.get(self.schema.name, 0),
                retries=retries,
                commits=commits,
                rows_skipped=self.report.rows_skipped,
                rows_superseded=self.report.rows_superseded,
                rows_key_skipped=key_skipped,
                reading_done=self.reading_done,
                final=final,
            )
        )

    # -- reading -------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._run()
        except TooManyBadRows as e:
            if self.pool is not None:
                self._statuses_after_stop()
            if (
                self.checkpoint is not None
                and self.flush_index == 0
                and self.pending is None
                and self.resume_at == (0, 0)
                and not self.skip_parts
                and e.generic_advice
            ):
                # rows the loader refused before it handed out a batch: the checkpoint holds
                # nothing to resume (rows Spanner refused keep their own advice)
                e.hint = nothing_committed_hint(self.config.rejects, self.schema.name)
            raise
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
        retry = _read_retry(cfg, self.job)
        self.sources, notes = list_sources(cfg, self.job, self.storage_client)
        for n in notes:
            self.report_note(n)
        if self.checkpoint is not None:
            self._check_named_fields()
            if not self._open_checkpoint():
                return
        if self.preview is not None:
            keep = self.preview.preview(self.sources)
            self.sources = self.preview.sources
            if not keep:
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
        dialect = cfg.dialect_of(self.job)
        self._note_column_order(dialect)
        start_source, skip_records = self.resume_at
        self.bytes_skipped = sum(s.size or 0 for s in self.sources[:start_source])
        for index, info in enumerate(self.sources):
            src_report = self.report.sources[index]
            if index < start_source:
                src_report.status = "done"
                continue
            skip = skip_records if index == start_source else 0
            src_report.status = "partial"
            convert = functools.partial(
                _finish_and_convert,
                schema=self.schema,
                options=cfg.convert,
                source=info.uri,
                skip=skip,
            )
            encode = functools.partial(
                encode_stage, schema=self.schema, skip=skip, keep_values=self.collect is not None
            )
            # Parsing, converting and encoding each run a block ahead on a thread of their own
            # (see loader.prefetch); leaving the block closes the reader on the parse thread,
            # also on an error or a stop, so its background thread is released
            # (parse.gate._ReadaheadGate).
            with open_source(info, storage_client=self.storage_client, retry=retry) as stream:
                blocks = read_deferred_blocks(
                    stream,
                    info.uri,
                    self.schema,
                    dialect,
                    **cfg.column_options(),
                    block_size=cfg.block_size,
                    on_note=self.report_note,
                )
                # each block's input bytes, for progress: the stream's own position runs
                # ahead by all the blocks read ahead, up to the whole file
                sizes: deque[int] = deque()
                parsed = 0
                before = sum(s.size or 0 for s in self.sources[:index])
                with (
                    Prefetcher(
                        blocks, functools.partial(_as_parsed, sizes=sizes), name="loader-parse"
                    ) as parsed_blocks,
                    Prefetcher(iter(parsed_blocks), convert, name="loader-convert") as converted,
                    Prefetcher(iter(converted), encode, name="loader-encode") as ahead,
                ):
                    for last, ready in ahead:
                        if self.stopped():
                            self._interrupt()
                        parsed += sizes.popleft() if sizes else 0
                        self.bytes_read = before + _stored_bytes(stream, info, parsed)
                        if ready is None:
                            # committed before the interruption: no rows of this run
                            self.bytes_skipped = self.bytes_read
                            continue
                        rejected = [r for r in ready.rejects if (r.record or 0) > skip]
                        table, records, lines = ready.table, ready.records, ready.lines
                        n_read = table.num_rows + len(rejected)
                        # counted first: a reject over --max-bad-rows stops the load here,
                        # and its report still says what was read
                        self.report.rows_read += n_read
                        src_report.rows += n_read
                        for r in rejected:
                            self.reject(r)
                        if last is not None:
                            self.position = (index, last)
                        self.add(table, ready.columns, index, records, lines)
                        self.emit()
                # all of it: the blocks' sizes leave out what the lexer drops (CRs of CRLF,
                # the second quote of a doubled one)
                self.bytes_read = before + (
                    info.size if info.size is not None else _stream_position(stream, info)
                )
            src_report.status = "done"
            self.position = (index + 1, 0)
        self.reading_done = True
        self.emit()  # the total is known now, before the last flush's commits
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

    def _note_column_order(self, dialect: Any) -> None:
        """Files read without a header and without ``columns`` take the table's column order:
        said once, with the order (a tryout's MySQL export had Title before Sku, the table Sku
        before Title: both STRING, loaded swapped without a word)."""
        order = [c.name for c in self.schema.writable_columns]
        if dialect.header or dialect.columns is not None or len(order) < 2 or not self.sources:
            return
        shown = ", ".join(order) if len(order) <= 12 else ", ".join(order[:12]) + ", ..."
        self.report_note(
            f"{self.schema.name}: its files have no header row, so their fields are read in "
            f"the table's column order ({shown}); if the export's order differs, name it with "
            "`columns` (a field in another column's place loads there when its type fits)"
        )

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
        """Buffer a block's rows (see :class:`loader.stages.Encoded`); flush when the buffer is full."""
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

    def _check_named_fields(self) -> None:
        """The fields named by position (``columns``, files without a header) against the
        table, as the reader checks them, but before the checkpoint compares this run's
        options with an earlier run's: a name that is no column is the error to report, not
        that the options differ (a tryout's ``--columns region,id`` for ``CustomerId``)."""
        names = self.config.dialect_of(self.job).columns
        if not names or not self.sources:
            return
        try:
            resolve_columns(self.schema, list(names), **self.config.column_options(), named=True)
        except LoaderError as e:  # said of the first source, as the reader would
            raise e.of(self.sources[0].uri) from None

    def _open_checkpoint(self) -> bool:
        """Where this table's load starts, from its checkpoint; False: nothing to do."""
        assert self.checkpoint is not None
        opened = self.checkpoint.open(self.sources)
        self.sources = opened.sources
        # (a finished job's rejects are its outcome still: the exit code says so again)
        self.rejects.carry(opened.carried_rejects)
        self.report.rows_rejected_before = opened.carried_rejects
        self.report.earlier_load_ids = list(opened.earlier_load_ids)
        if opened.nothing_to_do:
            if opened.already_loaded:
                self.report.sources = [SourceReport(uri=s.uri, status="done") for s in self.sources]
            return False
        if opened.resumed:
            self.carried_rejects = opened.carried_rejects
            if not self.checkpoint.store.atomic and self.config.refuses_rewrites:
                self.rejects.lagging.add(self.schema.name)
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
        again = self.config.again(self.schema)
        resume = f" (run {again} to resume)" if self.checkpoint is not None else ""
        hint = (
            f"progress is recorded; running {again} finishes the load"
            if self.checkpoint is not None
            else "checkpoints were off (`state=False`): a re-run starts over"
        )
        if any(s.kind in STREAM_KINDS for s in self.sources):
            # nothing tells a stream's next content from this one's: a re-run starts over
            resume = ""
            hint = (
                f"a pipe or stdin is not resumed, and insert mode would refuse the rows this "
                f"run wrote: load it again with {SEND_AGAIN}"
                if self.config.refuses_rewrites
                else "a pipe or stdin is not resumed: running the same command again with the "
                "same input writes every row again (harmless in this mode)"
            )
        raise Interrupted(
            f"stopped by a signal while loading {self.schema.name}; "
            f"{self.stats.rows_written:,} rows of it written{resume}",
            hint=hint,
        )

    # -- flushing ------------------------------------------------------------------------------

    @native.spread()  # the stage threads wait for a flush: what it takes uses every core
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
        for row, reason in flushed.duplicate_reasons([s.uri for s in self.sources]):
            self.reject(self._row_reject(origins, row, reason))
        self.report.rows_superseded += flushed.superseded
        if self.collect is not None:
            values = flushed.values()
            drop = None
            if self.leave_out:
                listed = {
                    i: self.leave_out[s.uri]
                    for i, s in enumerate(self.sources)
                    if s.uri in self.leave_out
                }
                drop = flushed.listed(listed)
            if drop is not None:
                drop = self._same_keys(flushed, drop)
                self.left_out += pc.sum(drop).as_py() or 0
                values = values.filter(pc.invert(drop))
            self.collect.append(values)
            return
        atomic = (
            self.checkpoint.store.atomic
            if self.checkpoint is not None
            # a dry run plans the commits the load would send: with the state table's marker
            else self.config.dry_run and self.config.state and self.config.state_file is None
        )
        # the checkpoint marker rides in each commit: leave room for it in every budget
        commits = flushed.commits(
            self.schema,
            self.config.mode,
            self.config.max_mutations,
            self.config.max_batch_bytes,
            self.config.batch_rows,
            marker_cells=len(STATE_COLUMNS) if atomic else 0,
            marker_bytes=MARKER_BYTES if atomic else 0,
        )
        plan, cost = commits.plan, commits.cost_per_row
        for row, reason in commits.oversize:
            self.reject(self._row_reject(origins, row, reason))
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
        if self.checkpoint is not None and self.pool is not None:
            self.checkpoint.reaching(end_position)
        # in flight from its first submit: a failure that a later submit raises leaves its
        # sources partial in the report, not "not started" (rows this flush rejects itself,
        # duplicates and oversize, are rows before end_position)
        self.pending = (flush, end_position, read_rejects + self.read_rejects - read_before)
        for batch_no, (start, stop) in enumerate(plan.ranges):
            if self.pool is not None and self.stopped():
                # a signal: no more commits start; those that landed keep their markers, the
                # resume point stays before this flush
                self.cut = True
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
                job = flushed.job(self.schema.name, commits, prov, start + lo, n, lo)
                if self.checkpoint is not None:
                    whole = (lo, hi) == (0, stop - start)
                    piece = part if whole else range_part(part, lo, hi)
                    self.checkpoint.attach_marker(job, piece, part)
                if self.pool is None:  # a dry run: as the load would count it, marker too
                    self.dry_rows += n
                    self.report.mutations.append(n * cost + (len(STATE_COLUMNS) if atomic else 0))
                else:
                    self.pool.submit(job)
                    self.emit()
        self.skip_parts = set()
        self.flush_index += 1

    def _same_keys(self, flushed: Any, drop: pa.Array) -> pa.Array:
        """``drop`` without the rows whose line in ``leave_out`` names another key (the rows
        listed are few: rejects)."""
        import numpy as np

        from .keys import key_tuples

        assert self.leave_out is not None
        at = np.flatnonzero(drop.to_numpy(zero_copy_only=False))
        if not len(at):
            return drop
        rows = pa.array(flushed.order.to_numpy()[at])
        origins = flushed.origins.take(rows).to_pylist()
        keys = key_tuples(flushed.key_table.take(rows))
        keep = drop.to_numpy(zero_copy_only=False).copy()
        for i, origin, key in zip(at, origins, keys):
            named = self.leave_out[self.sources[origin[SOURCE_COL]].uri][origin[RECORD_COL]]
            if named is not None and "key " + repr(tuple(key)) not in named:
                keep[i] = False
                self.other_keys += 1
        return pa.array(keep)

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


def _as_parsed(block: Any, sizes: deque[int]) -> Any:
    """The parse thread's work on a block: none, asking the reader for it was the parse; but
    its input bytes go in line for the progress (blocks come out of the stages in order)."""
    sizes.append(block.nbytes)
    return block


def list_sources(
    config: LoadConfig, job: TableJob, storage_client: Any
) -> tuple[list[SourceInfo], list[str]]:
    """The sources of ``job`` as its load reads them, and the notes of their listing
    (:func:`~loader.source.expand_sources`; :class:`SourceError` for one that matches nothing
    or cannot be read)."""
    retry = _read_retry(config, job)
    if storage_client is None and retry is not None:
        probe_storage(config.target.connect_timeout)  # the endpoint the default client uses
    return expand_sources(job.sources, storage_client=storage_client, retry=retry)


def check_columns(
    config: LoadConfig, schema: TableSchema, job: TableJob, storage_client: Any
) -> None:
    """Read the head of ``job``'s first source as its load does, so that its columns are
    resolved against ``schema`` (SchemaError, ConfigError) before any table of a run is
    written: the load of a manifest's first tables must not commit before a later table's
    header turns out not to fit. Problems the load tells better (a source that cannot be
    read, a record larger than the small block read here) are left to it; so are stdin and
    pipes, which cannot be read twice."""
    sources, _ = list_sources(config, job, storage_client)
    if not sources or sources[0].kind in STREAM_KINDS:  # a pipe opened twice loses its writer
        return
    info = sources[0]
    try:
        with open_source(
            info, storage_client=storage_client, retry=_read_retry(config, job)
        ) as stream:
            blocks = read_deferred_blocks(
                stream,
                info.uri,
                schema,
                config.dialect_of(job),
                **config.column_options(),
                block_size=min(config.block_size, 1 << 20),
                on_note=lambda note: None,  # the load makes its notes
            )
            try:
                next(blocks, None)
            finally:
                blocks.close()
    except SourceError:
        pass


def _read_retry(config: LoadConfig, job: TableJob) -> Any:
    """The storage client's retry, for a job with ``gs://`` sources only: local ones never
    import the client (None)."""
    gcs = any(s.startswith("gs://") for s in job.sources)
    return read_retry(config.max_retry_time) if gcs else None


def _stored_bytes(stream: Any, info: SourceInfo, parsed: int) -> int:
    """The stored bytes that ``parsed`` decompressed bytes of ``stream`` took: scaled by how
    much the stream's decompression has grown what it took in (compressed sources), and never
    past the source's size."""
    ratio = getattr(stream, "stored_per_delivered", None)
    if callable(ratio):
        parsed = round(parsed * ratio())
    return min(parsed, info.size if info.size is not None else _stream_position(stream, info))


def _finish_and_convert(block: DeferredBlock, **kwargs: Any) -> Any:
    """The convert thread's work: finish the block the parse thread read and numbered (its
    rows' checks and text: loader.parse.reader.read_deferred_blocks), then convert it."""
    return convert_stage(block.finish(), **kwargs)


def _stream_position(stream: Any, info: SourceInfo) -> int:
    pos = getattr(stream, "compressed_position", None)
    if callable(pos):
        return int(pos())
    try:
        return int(stream.tell())
    except (OSError, ValueError, AttributeError):
        return 0
