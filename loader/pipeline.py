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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import native
from .batch import (
    COMMIT_CEILING_BYTES,
    Budget,
    load_order,
    mutation_cost_per_row,
    oversize_reason,
    plan_batches,
)
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
from .convert import ConvertedBlock, ConvertOptions, convert_block
from .encode import encode_rows, write_mutation
from .errors import ExitCode, Interrupted, LoaderError, StateError, TooManyBadRows
from .lease import Lease
from .parse import ParsedBlock, read_blocks
from .prefetch import Prefetcher
from .rejects import Reject, RejectWriter, new_load_id
from .report import LoadReport, SourceReport, TableReport
from .schema import TableSchema, read_schemas
from .sort import duplicate_key_mask, sort_order, take_column, take_table
from .source import SourceInfo, expand_sources, open_source, probe_storage, read_retry
from .state import STATE_COLUMNS, StateStore, batch_part, canonical, digest, open_state_store
from .throttle import AdaptiveLimiter, Throttle

SOURCE_COL = "__source"
BATCHING_VERSION = 2
"""Recorded in each checkpoint's layout (see ``_TableRun._layout``)."""
RECORD_COL = "__record"
LINE_COL = "__line"
PROVENANCE = (SOURCE_COL, RECORD_COL, LINE_COL)
ROW_COL = "__row"
"""The buffered column holding each row's encoded Mutation bytes (loader.encode)."""
BUFFER_DIVISOR = 16
"""The buffered rows may use 1/BUFFER_DIVISOR of --buffer-size (see the module docstring)."""
MARKER_BYTES = 512
"""Room left in each commit for its checkpoint marker row."""


def _last_record(block: Any) -> Optional[int]:
    """The highest record number a parsed block covers (good rows or rejects)."""
    last = None
    if len(block.record_numbers):
        last = int(pc.max(block.record_numbers).as_py())
    for r in block.rejects:
        if r.record is not None and (last is None or r.record > last):
            last = r.record
    return last


@dataclass(frozen=True)
class Progress:
    """A progress event; the CLI draws it, the library default ignores it.

    A table's load is done when every row read is written, rejected, superseded (a later row
    of the same key won) or skipped (committed by an interrupted run): :attr:`rows_done`
    against :attr:`rows_read` once ``reading_done``; while reading, the total is estimated
    from the bytes read so far (see loader/progress.py). Events come as blocks are read, as
    commits finish and, with ``final`` set, once after a table's last commit.
    """

    table: str
    bytes_read: int
    bytes_total: int
    """Size of the table's sources (0 when unknown, e.g. stdin)."""
    rows_read: int
    rows_written: int
    rows_rejected: int
    retries: int
    commits: int
    rows_skipped: int = 0
    rows_superseded: int = 0
    reading_done: bool = False
    """Every source is read: ``rows_read`` is the table's total."""
    final: bool = False
    """The table's last event: every commit of it has finished."""

    @property
    def rows_done(self) -> int:
        """Rows that need nothing more: written, rejected, superseded or skipped."""
        return self.rows_written + self.rows_rejected + self.rows_superseded + self.rows_skipped


ProgressFn = Callable[[Progress], None]


class _Rejects:
    """Counts rejects against --max-bad-rows and writes them to the reject file.

    ``carried``: rows an interrupted run of the same job rejected before its last checkpoint
    (they are not read again on resume), so a resumed load gets no fresh allowance.
    """

    def __init__(self, writer: RejectWriter, max_bad_rows: int) -> None:
        self.writer = writer
        self.max_bad_rows = max_bad_rows
        self.per_table: dict[str, int] = {}
        self.carried = 0
        self.carried_resumed = 0
        """The part of ``carried`` from tables this run resumed (it decides the exit code)."""

    def __call__(self, r: Reject, table: Optional[str] = None) -> None:
        name = table or r.table or ""
        self.writer.write(r if r.table else Reject(**{**r.__dict__, "table": name}))
        self.per_table[name] = self.per_table.get(name, 0) + 1
        if self.writer.count + self.carried > self.max_bad_rows:
            where = f"{r.source}:{r.line}" if r.line else r.source
            before = (
                f" ({self.carried:,} of them before the run was interrupted)"
                if self.carried
                else ""
            )
            exists = "ALREADY_EXISTS" in r.reason
            raise TooManyBadRows(
                f"more than {self.max_bad_rows} bad rows{before}; the last one, {where}: "
                f"{r.reason}",
                hint="see the reject file"
                + (f" {self.writer.path}" if self.writer.path else "")
                + (
                    "; the table holds rows with these keys already (an earlier or "
                    "interrupted run, or another writer): re-run with --mode upsert to "
                    "overwrite them with the source rows, or empty the table first"
                    if exists
                    else "; fix the data or raise --max-bad-rows"
                ),
            )


@dataclass
class _TableRun:
    config: LoadConfig
    schema: TableSchema
    job: TableJob
    report: TableReport
    rejects: _Rejects
    pool: Optional[CommitPool]
    stats: CommitStats
    progress: Optional[ProgressFn]
    sources: list[SourceInfo] = field(default_factory=list)
    buffered: list[pa.Table] = field(default_factory=list)
    buffered_bytes: int = 0
    buffered_columns: tuple[str, ...] = ()
    """The table columns the buffered rows carry (encoded, or typed when collecting)."""
    bytes_read: int = 0
    bytes_total: int = 0
    dry_rows: int = 0
    notes: list[str] = field(default_factory=list)
    collect: Optional[list[pa.Table]] = None
    """verify: keep each flush's sorted, de-duplicated rows here instead of committing."""
    store: Optional[StateStore] = None
    lease: Optional[Lease] = None
    """This job's lease (with a state store): taken before the checkpoint is read."""
    run_id: str = ""
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
    saved_rejects: int = 0
    """The ``rejects`` of the last recorded checkpoint."""
    read_rejects: int = 0
    """Rejects found on the reading side (parse, convert, duplicates, oversize) in this run.
    The rest were refused at commit time; every one of those belongs to a submitted flush."""
    buffered_read_rejects: int = 0
    """``read_rejects`` when ``buffered_position`` was taken."""
    carried_rejects: int = 0
    """Rows rejected before this run resumed: up to the resume point, and in batches that were
    committed (and are skipped) in the interrupted flush."""

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
        if any(s.startswith("gs://") for s in self.job.sources):
            probe_storage(cfg.target.connect_timeout)
        self.sources, notes = expand_sources(self.job.sources, retry=retry)
        for n in notes:
            self.report_note(n)
        if self.store is not None and not self._open_checkpoint():
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
                _convert, schema=self.schema, options=cfg.convert, source=info.uri, skip=skip
            )
            encode = functools.partial(
                _encode, schema=self.schema, skip=skip, keep_values=self.collect is not None
            )
            # Parsing + converting and encoding each run a block ahead on a thread of their
            # own (see loader.prefetch); leaving the block closes the reader there, also on an
            # error or a stop, so its background thread is released (parse._ReadaheadGate).
            with open_source(info, retry=retry) as stream:
                blocks = read_blocks(
                    stream,
                    info.uri,
                    self.schema,
                    dialect,
                    mapping=dict(cfg.mapping),
                    ignore=cfg.ignore,
                    filled=cfg.convert.commit_timestamp_columns,
                    block_size=cfg.block_size,
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
        n = table.num_rows
        table = table.append_column(SOURCE_COL, pa.array(np.full(n, source_index, np.int32)))
        table = table.append_column(RECORD_COL, records.cast(pa.int64()))
        table = table.append_column(
            LINE_COL, lines.cast(pa.int64()) if lines is not None else pa.nulls(n, pa.int64())
        )
        if self.buffered and self.buffered_columns != columns:
            # another column set: flush what we have first
            self.flush(self.buffered_position, self.buffered_read_rejects)
        self.buffered.append(table)
        self.buffered_columns = columns
        self.buffered_bytes += table.nbytes
        self.buffered_position = self.position
        self.buffered_read_rejects = self.read_rejects
        if self.buffered_bytes * BUFFER_DIVISOR >= self.config.buffer_size:
            self.flush()

    # -- checkpoints ---------------------------------------------------------------------------

    def _identities(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.sources]

    def _fingerprint(self) -> str:
        """What is written: the sources, the mode, and every option that changes a value or
        a column, canonically (the same in every process and after an upgrade that adds an
        option at its default). Tuning options are not in it (see :meth:`_layout`)."""
        cfg = self.config
        return digest(
            {
                "sources": self._identities(),
                "mode": cfg.mode,
                "dialect": canonical(cfg.dialect),
                "convert": canonical(cfg.convert),
                "columns": {
                    "map": sorted(cfg.mapping),
                    "ignore": sorted(cfg.ignore),
                    "by_position": list(self.job.columns) if self.job.columns else None,
                },
            }
        )

    def _legacy_fingerprint(self) -> str:
        """The fingerprint checkpoints recorded before the canonical one (layout included):
        a job interrupted before an upgrade still resumes."""
        cfg = self.config
        return digest(
            {
                "sources": self._identities(),
                "mode": cfg.mode,
                "budgets": [cfg.max_mutations, cfg.max_batch_bytes, cfg.batch_rows],
                "buffer": [cfg.buffer_size, cfg.block_size],
                "dialect": repr(cfg.dialect),
                "convert": repr(cfg.convert),
                "columns": [cfg.mapping, cfg.ignore, self.job.columns],
            }
        )

    def _layout(self) -> dict[str, Any]:
        """The options that decide how rows group into flushes and batches, hence the names
        of the batch markers: they must match only to skip the batches an interrupted flush
        committed."""
        cfg = self.config
        return {
            # how this loader cuts batches: raised whenever the planning changes, so a resume
            # never skips batches by markers that named other rows (2: a row over
            # --max-batch-bytes gets a batch of its own instead of a reject)
            "batching": BATCHING_VERSION,
            "max_mutations": cfg.max_mutations,
            "max_batch_bytes": cfg.max_batch_bytes,
            "max_batch_rows": cfg.batch_rows,
            "buffer_size": cfg.buffer_size,
            "block_size": cfg.block_size,
        }

    def _same_content(self, row: dict[str, Any]) -> bool:
        if "layout" in row:
            return bool(row.get("fingerprint") == self._fingerprint())
        return bool(row.get("fingerprint") == self._legacy_fingerprint())

    def _open_checkpoint(self) -> bool:
        """Decide from the stored state where this table's load starts; False: nothing to do."""
        store, cfg, name = self.store, self.config, self.schema.name
        assert store is not None
        if cfg.restart:
            store.delete_prefix(self.run_id, name, "")
        row = store.get(self.run_id, name, "run")
        if cfg.incremental and (row is None or row.get("status") == "done"):
            loaded = store.parts(self.run_id, name, "src/")
            before = len(self.sources)
            self.sources = [
                s
                for s in self.sources
                if loaded.get("src/" + s.uri, {}).get("identity") != s.to_dict()
            ]
            if before - len(self.sources):
                self.report_note(
                    f"{name}: {before - len(self.sources)} source(s) loaded by earlier runs skipped"
                )
            if not self.sources:
                self.report_note(f"{name}: no new sources since the last run; nothing to do")
                return False
            row = None
        if (
            row is not None
            and row.get("status") != "done"
            and (int(row.get("source", 0)), int(row.get("record", 0))) == (0, 0)
            and int(row.get("flushes", 0)) == 0
            and not store.parts(self.run_id, name, batch_part(0, 0)[:11])
        ):
            # an earlier run stopped before it committed anything (e.g. at a column the
            # loader asked to --ignore): nothing to resume, so any options go
            row = None
        if row is not None and row.get("status") == "done":
            if self._same_content(row):
                self.report_note(
                    f"{name}: already loaded by an earlier run of this job; nothing to do "
                    "(--restart loads it again)"
                )
                self.rejects.carried += int(row.get("rejects", 0))
                self.report.sources = [SourceReport(uri=s.uri, status="done") for s in self.sources]
                return False
            raise self._changed(row)
        if row is not None:  # an interrupted run
            if not self._same_content(row):
                raise self._changed(row)
            self.resume_at = (int(row["source"]), int(row["record"]))
            self.flush_index = int(row["flushes"])
            prefix = batch_part(self.flush_index, 0)[:11]
            markers = store.parts(self.run_id, name, prefix)
            # a checkpoint from before layouts were recorded matched its options through the
            # fingerprint; its batches were cut the first way
            layout = row.get("layout", {**self._layout(), "batching": 1})
            if markers and layout != self._layout():
                markers = self._layout_changed(layout, markers, prefix)
            self.skip_parts = set(markers)
            self.saved_rejects = int(row.get("rejects", 0))
            self.carried_rejects = int(row.get("rejects", 0)) + sum(
                int(m.get("rejected", 0)) for m in markers.values()
            )
            self.rejects.carried += self.carried_rejects
            self.rejects.carried_resumed += self.carried_rejects
            self.committed_at = self.resume_at
            self.report_note(
                f"{name}: resuming run {self.run_id} at source {self.resume_at[0] + 1}, "
                f"after record {self.resume_at[1]:,}"
                + (
                    f"; {self.carried_rejects:,} row(s) rejected before count toward --max-bad-rows"
                    if self.carried_rejects
                    else ""
                )
            )
        self._save("running")
        return True

    def _layout_changed(
        self, layout: dict[str, Any], markers: dict[str, Any], prefix: str
    ) -> dict[str, Any]:
        """The batches an interrupted flush committed were cut with other budgets or buffer
        sizes: their markers name other batches than this run's. Idempotent modes write those
        rows again (harmless) and forget the markers; insert mode would refuse them as
        duplicates, so it must resume with the interrupted run's values."""
        flags = {
            "max_mutations": "--max-mutations",
            "max_batch_bytes": "--max-batch-bytes",
            "max_batch_rows": "--max-batch-rows",
            "buffer_size": "--buffer-size",
            "block_size": "--block-size",
        }
        now = self._layout()
        differ = [f"{flags.get(k, k)} {layout.get(k)}" for k in flags if layout.get(k) != now[k]]
        if layout.get("batching", 1) != now["batching"]:
            differ = ["the batches were cut by an earlier version of the loader"] + differ
            if self.config.mode == "insert":
                raise StateError(
                    f"{self.schema.name}: the interrupted run {self.run_id} was made by an "
                    "earlier version of the loader, which cut batches differently; insert "
                    f"mode cannot tell which of the {len(markers):,} batch(es) it committed "
                    "hold which rows",
                    hint="finish the job with the loader version that started it, or load it "
                    "again with --mode upsert (rows already written are written again, "
                    "harmlessly)",
                )
        if self.config.mode == "insert":
            raise StateError(
                f"{self.schema.name}: the interrupted run {self.run_id} had committed "
                f"{len(markers):,} batch(es) of its last buffer with other batch options, "
                "which insert mode cannot write again",
                hint="resume with the interrupted run's values: " + ", ".join(differ),
            )
        assert self.store is not None
        self.store.delete_prefix(self.run_id, self.schema.name, prefix)
        self.report_note(
            f"{self.schema.name}: batch options changed since the interrupted run "
            f"({', '.join(differ)}): the rows of its last buffer are written again"
        )
        return {}

    def _changed(self, row: dict[str, Any]) -> StateError:
        old = {d["uri"]: d for d in row.get("sources", [])}
        new = {s.uri: s.to_dict() for s in self.sources}
        for uri in sorted(set(old) | set(new)):
            if old.get(uri) != new.get(uri):
                a, b = old.get(uri), new.get(uri)
                what = (
                    "is new"
                    if a is None
                    else "is gone"
                    if b is None
                    else f"changed ({_identity_change(a, b)})"
                )
                return StateError(
                    f"{self.schema.name}: source {uri} {what} since run {self.run_id} "
                    f"was {'interrupted' if row.get('status') != 'done' else 'loaded'}",
                    hint="re-run with --restart to load from scratch",
                )
        done = row.get("status") == "done"
        return StateError(
            f"{self.schema.name}: options that change what is written (the dialect, value "
            "conversions or column mapping) differ from those of run "
            f"{self.run_id}, which was {'loaded' if done else 'interrupted'}",
            hint=(
                "re-run with --restart to load it again with these options"
                if done
                else "resume with the same options, or re-run with --restart to start over"
            ),
        )

    def _save(self, status: str, rejects: Optional[int] = None) -> None:
        """Record the resume point; ``rejects``: those of the rows before it (default: as
        recorded when this run started, i.e. no new checkpoint has been reached)."""
        assert self.store is not None
        if self.lease is not None:
            self.lease.check()
        if rejects is not None:
            self.saved_rejects = rejects
        self.store.put(
            self.run_id,
            self.schema.name,
            "run",
            {
                "status": status,
                "fingerprint": self._fingerprint(),
                "layout": self._layout(),
                "sources": self._identities(),
                "source": self.resume_at[0],
                "record": self.resume_at[1],
                "flushes": self.flush_index,
                "rejects": self.saved_rejects,
            },
        )

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
        if self.store is None:
            return
        self.resume_at = position
        self._save("running", self._checkpoint_rejects(read_rejects))
        self.store.delete_prefix(self.run_id, self.schema.name, batch_part(flush, 0)[:11])

    def _finish_checkpoint(self) -> None:
        if self.store is None:
            return
        self.resume_at = (len(self.sources), 0)
        self._save("done", self._checkpoint_rejects(self.read_rejects))
        if self.config.incremental:
            for s in self.sources:
                self.store.put(
                    self.run_id, self.schema.name, "src/" + s.uri, {"identity": s.to_dict()}
                )

    def _interrupt(self) -> None:
        """Stop: let commits in flight finish, record progress, raise Interrupted."""
        if self.pool is not None:
            self.pool.drain(tick=self.emit)
        self._checkpoint_pending()
        # --restart would forget the progress just recorded: the command to resume is the
        # same one without it
        again = "the same command again" + (" without --restart" if self.config.restart else "")
        resume = f" (run {again} to resume)" if self.store is not None else ""
        raise Interrupted(
            f"stopped by a signal while loading {self.schema.name}; "
            f"{self.stats.rows_written:,} rows of it written{resume}",
            hint=f"progress is recorded; running {again} finishes the load"
            if self.store is not None
            else "checkpoints were off (--no-state): a re-run starts over",
        )

    # -- flushing ------------------------------------------------------------------------------

    def flush(
        self, position: Optional[tuple[int, int]] = None, read_rejects: Optional[int] = None
    ) -> None:
        if not self.buffered:
            return
        end_position = position or self.position
        read_before = self.read_rejects
        if read_rejects is None:
            read_rejects = self.read_rejects
        table = pa.concat_tables(self.buffered)
        rows = table.column(ROW_COL) if ROW_COL in table.column_names else None
        if rows is not None:
            table = table.drop_columns([ROW_COL])
        self.buffered, self.buffered_bytes = [], 0
        # Sort by reordering row indices: only the encoded rows (or, collecting, the values)
        # are taken in key order here; a job's keys and origins are views taken on demand.
        key_table = table.select(list(self.schema.key_names))
        order, distinct = sort_order(key_table, self.schema.primary_key)
        origins = table.select(list(PROVENANCE))
        if not distinct:
            keep = self._dedupe(take_table(key_table, order), origins, order)
            if keep is not None:
                order = order.filter(keep)
        data_cols = list(self.buffered_columns)
        if self.collect is not None:
            self.collect.append(take_table(table.select(data_cols), order))
            return
        assert rows is not None
        encoded = take_column(rows, order)
        cost = mutation_cost_per_row(self.schema, data_cols)
        op = OPS[self.config.mode]
        overhead = len(write_mutation(op, self.schema.name, data_cols, encoded.slice(0, 0)))
        atomic = self.store is not None and self.store.atomic
        # the checkpoint marker rides in each commit: leave room for it in every budget
        marker_bytes = MARKER_BYTES if atomic else 0
        budget = Budget(
            max_mutations=self.config.max_mutations - (len(STATE_COLUMNS) if atomic else 0),
            max_bytes=self.config.max_batch_bytes - marker_bytes,
            max_rows=self.config.batch_rows,
            ceiling_bytes=COMMIT_CEILING_BYTES - marker_bytes,
        )
        sizes = pc.binary_length(encoded)
        plan = plan_batches(sizes, cost, budget, overhead_bytes=overhead, table=self.schema.name)
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
            gaps = _gaps(stop - start, _committed_ranges(self.skip_parts, part))
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
                if self.store is not None:
                    whole = (lo, hi) == (0, stop - start)
                    self._attach_marker(job, part if whole else range_part(part, lo, hi), part)
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

    def _attach_marker(self, job: BatchJob, part: str, batch: str) -> None:
        """``part``: the marker of the job (``batch``, or a range of it on resume)."""
        store, run, table = self.store, self.run_id, self.schema.name
        assert store is not None
        if store.atomic:
            job.extra = [store.marker_mutation(run, table, part, {"rows": len(job)})]

            def range_marker(lo: int, hi: int) -> list[bytes]:
                piece = range_part(batch, lo, hi)
                return [store.marker_mutation(run, table, piece, {"rows": hi - lo})]

            job.range_marker = range_marker

        def done(j: BatchJob) -> None:
            if not store.atomic or j.split:
                # rows Spanner refused here are not read again on resume: carry their count
                store.put(run, table, part, {"rows": len(j), "rejected": j.rejected})

        job.on_done = done

    def _dedupe(
        self, sorted_keys: pa.Table, provenance: pa.Table, order: pa.Array
    ) -> Optional[pa.Array]:
        """One row per key within a flush: the last in source order (first for insert).

        ``sorted_keys`` are the key columns in key order (a stable sort, so equal keys keep
        source order); returns the rows of it to keep, or None when all keys are distinct.
        """
        dup = duplicate_key_mask(sorted_keys, self.schema.primary_key)
        if not dup.any():
            return None
        if self.config.mode == "insert":
            # the first occurrence is inserted; later ones are duplicate keys in the source
            positions = order.to_numpy()
            for i in np.flatnonzero(dup).tolist():
                self.reject(
                    self._row_reject(
                        provenance,
                        int(positions[i]),
                        "duplicate primary key: an earlier row of the source has the same key",
                    )
                )
            return pa.array(~dup)
        # the last of each run of equal keys wins: a row survives unless the next one
        # continues its run
        keep = np.ones(len(dup), dtype=bool)
        keep[:-1] = ~dup[1:]
        self.report.rows_superseded += int(len(keep) - np.count_nonzero(keep))
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


def range_part(batch: str, lo: int, hi: int) -> str:
    """The marker of rows [lo, hi) of a batch (a piece committed while bisecting it)."""
    return f"{batch}/{lo}-{hi}"


def _committed_ranges(parts: set[str], batch: str) -> list[tuple[int, int]]:
    head = batch + "/"
    out = []
    for p in parts:
        if p.startswith(head):
            lo, _, hi = p[len(head) :].partition("-")
            out.append((int(lo), int(hi)))
    return out


def _gaps(n: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges of [0, n) that no range of ``covered`` includes, in order."""
    out, at = [], 0
    for lo, hi in sorted(covered):
        if lo > at:
            out.append((at, lo))
        at = max(at, hi)
    if at < n:
        out.append((at, n))
    return out


_Converted = tuple[Optional[int], Optional[tuple[list[Reject], ConvertedBlock]]]


def _convert(
    block: ParsedBlock, *, schema: TableSchema, options: ConvertOptions, source: str, skip: int
) -> _Converted:
    """The first prefetch thread's work on one parsed block: its last record number, and the
    block typed, with the parser's rejects (the parsed text itself is dropped here); None when
    every record of it was committed before an interruption (only its position matters)."""
    last = _last_record(block)
    if last is not None and last <= skip:
        return last, None
    return last, (block.rejects, convert_block(block, schema, options, source))


@dataclass
class _Encoded:
    """A converted block ready for the buffer: the key columns, each row's encoded bytes
    (:data:`ROW_COL`), or all typed columns when ``keep_values``, in source order."""

    table: pa.Table
    columns: tuple[str, ...]
    """The table columns the CSV gives, in the order the encoded rows hold them."""
    records: pa.Array
    lines: Optional[pa.Array]
    rejects: list[Reject]
    """The block's rejected rows: the parser's, then the converter's."""


def _encode(
    item: _Converted,
    *,
    schema: TableSchema,
    skip: int,
    keep_values: bool,
) -> tuple[Optional[int], Optional[_Encoded]]:
    """The second prefetch thread's work: drop rows committed before an interruption, then
    encode each row into its Mutation bytes (rows are independent, so encoding before the
    sort is the same as after; the flush then only reorders the encoded rows)."""
    last, both = item
    if both is None:
        return last, None
    parse_rejects, converted = both
    table, records, lines = converted.table, converted.record_numbers, converted.line_numbers
    int_texts = converted.int_texts
    if skip:
        keep = pc.greater(records, skip)
        table, records = table.filter(keep), records.filter(keep)
        lines = lines.filter(keep) if lines is not None else None
        int_texts = {name: text.filter(keep) for name, text in int_texts.items()}
    columns = tuple(table.column_names)
    if not keep_values:
        keys = table.select(list(schema.key_names))
        types = [schema.column(c).type for c in columns]
        rows = encode_rows(
            [table.column(c) for c in columns],
            types,
            int_texts=[int_texts.get(c) for c in columns],
        )
        table = keys.append_column(ROW_COL, rows)
    rejects = [*parse_rejects, *converted.rejects]
    return last, _Encoded(table, columns, records, lines, rejects)


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
    and :class:`~loader.errors.Interrupted` is raised.
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
    rejects = _Rejects(writer, config.max_bad_rows)
    t0 = clock()
    try:
        writer.check()
        if database is not None:
            _run(
                config, database, committer, report, rejects, progress, sleep, clock, schemas, stop
            )
        else:
            with connect(config.target, report.notes, stop) as db:
                _run(config, db, committer, report, rejects, progress, sleep, clock, schemas, stop)
    except LoaderError as e:
        report.elapsed_s = clock() - t0
        report.exit_code = e.exit_code
        report.error = e.message
        e.report = report  # type: ignore[attr-defined]
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
    rejects: _Rejects,
    progress: Optional[ProgressFn],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    given: Optional[dict[str, TableSchema]] = None,
    stop: Optional[threading.Event] = None,
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
        store = open_state_store(config.state_file, database)
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
        )
    finally:
        if store is not None:
            store.close()


def _run_waves(
    config: LoadConfig,
    committer: Optional[Committer],
    report: LoadReport,
    rejects: _Rejects,
    progress: Optional[ProgressFn],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    stop: Optional[threading.Event],
    store: Optional[StateStore],
    by_table: dict[str, TableJob],
    real: dict[str, TableSchema],
    waves: list[list[str]],
) -> None:
    throttle = None
    if config.max_rows_per_second or config.max_bytes_per_second:
        # the stop event ends a wait for tokens at once (Ctrl-C at a low rate)
        throttle = Throttle(config.max_rows_per_second, config.max_bytes_per_second, stop=stop)
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
            run.store, run.stop = store, stop
            run.run_id = digest(
                {
                    "database": config.target.path,
                    "table": name,
                    "sources": list(job.sources),
                    "mode": config.mode,
                }
            )
            if store is not None:
                report.run_ids[name] = run.run_id
                run.lease = Lease(store, run.run_id, name)
            t0 = clock()
            try:
                if run.lease is not None:
                    run.lease.acquire()
                    report.notes.extend(run.lease.notes)
                run.run()
            finally:
                if pool is not None:
                    pool.close(wait=True)
                if store is not None:
                    _sync_quietly(store)
                if run.lease is not None:
                    run.lease.release()
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


def _identity_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two source identities, e.g. "size 120 -> 180, modified
    2026-11-24 09:40:01 UTC -> 2026-11-24 09:47:12 UTC"."""

    def show(key: str, v: Any) -> str:
        if v is None:
            return "none"
        if key == "mtime_ns":
            t = dt.datetime.fromtimestamp(int(v) / 1e9, dt.timezone.utc)
            return t.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        return f"{v:,}" if key == "size" else str(v)

    names = {"generation": "generation", "size": "size", "mtime_ns": "modified"}
    diffs = [
        f"{label} {show(key, old.get(key))} -> {show(key, new.get(key))}"
        for key, label in names.items()
        if old.get(key) != new.get(key)
    ]
    diffs += [
        f"{k} {old.get(k)} -> {new.get(k)}"
        for k in sorted(set(old) | set(new))
        if k not in names and old.get(k) != new.get(k)
    ]
    return ", ".join(diffs) or "its identity differs"


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
    rejects = _Rejects(writer, config.max_bad_rows)
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
