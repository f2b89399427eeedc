"""The work of the Beam pipeline's steps, as plain functions over Arrow tables (nothing here
imports Beam, so it is tested without it): read a range into keyed blocks, sample keys,
compute key-range boundaries, split blocks by key range, and commit one key range exactly once.

Exactly once on an engine that retries bundles: a key range's rows are sorted in Spanner key
order, de-duplicated and cut into batches with the loader's :class:`~loader.buffer.Buffer`, so
the same rows make the same batches on every attempt; batch ``n`` of column set ``c`` of key
range ``r`` is named ``beam/r/c/n`` and its marker row is written with ``insert`` in the
batch's own commit. A batch whose marker is there is skipped; a replay racing an attempt that
already landed fails atomically on the marker (ALREADY_EXISTS), and the marker read back
confirms it as done.
"""

from __future__ import annotations

import base64
import functools
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.api_core import exceptions as gexc

from ..buffer import (
    LINE_COL,
    MARKER_BYTES,
    RECORD_COL,
    ROW_COL,
    SOURCE_COL,
    Buffer,
)
from ..commit import CommitPool, CommitRunner, CommitStats, RetryPolicy
from ..commit.runner import Committer
from ..config import LoadConfig
from ..plan import ByteRange
from ..plan.read import read_range
from ..rejects import Reject
from ..resume.checkpoint import committed_ranges, range_part
from ..resume.checkpoint import gaps as missing_ranges
from ..resume.stores import STATE_COLUMNS, SpannerStateStore
from ..schema import TableSchema
from ..sort import sort_order, take_column, take_table
from ..throttle import AdaptiveLimiter, Throttle
from . import spill


@dataclass
class Block:
    """Encoded rows of one parsed block (keys + encoded row bytes), with their provenance."""

    source_index: int
    first_record: int
    columns: tuple[str, ...]
    table: pa.Table
    """The key columns and :data:`loader.buffer.ROW_COL`."""
    records: pa.Array
    lines: Optional[pa.Array]

    def take(self, mask: np.ndarray) -> Block:
        m = pa.array(mask)
        lines = self.lines.filter(m) if self.lines is not None else None
        return Block(
            self.source_index,
            self.first_record,
            self.columns,
            self.table.filter(m),
            self.records.filter(m),
            lines,
        )


def read_blocks_of(
    source_index: int,
    rng: ByteRange,
    schema: TableSchema,
    config: LoadConfig,
    columns: Optional[tuple[str, ...]] = None,
) -> Iterator[tuple[Optional[Block], list[Reject]]]:
    """One range read through the loader's stages: its blocks and their rejects."""
    dialect = config.dialect.with_columns(columns) if columns is not None else config.dialect
    for enc in read_range(
        rng,
        schema,
        dialect,
        config.convert,
        **config.column_options(),
        block_size=config.block_size or (16 << 20),
    ):
        block = None
        if enc.table.num_rows:
            first = int(pc.min(enc.records).as_py())
            block = Block(source_index, first, enc.columns, enc.table, enc.records, enc.lines)
        yield block, enc.rejects


_MIX = np.uint64(0x9E3779B97F4A7C15)
"""2^64 / the golden ratio, odd: multiplying by it scatters consecutive numbers."""


def sample_keys(block: Block, schema: TableSchema, every: int) -> pa.Table:
    """The keys of about one row in ``every``, chosen by a hash of the source and record number
    (deterministic: the same rows are sampled on every attempt). Not every ``every``-th
    record: rows that repeat a pattern (a region each fourth row, a round-robin export) would
    be sampled at one point of it, and the key ranges cut within one region (a tryout: 17
    boundaries in one of four regions, one range with 46 of 63 batches)."""
    if every <= 1:
        return block.table.select(list(schema.key_names))
    records = block.records.to_numpy(zero_copy_only=False).astype(np.uint64)
    mixed = (records + np.uint64(block.source_index) * np.uint64(1 << 40)) * _MIX
    mask = (mixed >> np.uint64(32)) % np.uint64(every) == 0
    return block.table.select(list(schema.key_names)).filter(pa.array(mask))


def boundaries(samples: Sequence[pa.Table], schema: TableSchema, ranges: int) -> Optional[pa.Table]:
    """``ranges - 1`` keys cutting the sampled keys into equal parts, in key order (None: one
    range)."""
    tables = [t for t in samples if t.num_rows]
    if not tables or ranges <= 1:
        return None
    keys = pa.concat_tables(tables)
    order, _ = sort_order(keys, schema.primary_key)
    n = keys.num_rows
    picks = sorted({min(n - 1, (i * n) // ranges) for i in range(1, ranges)})
    return take_table(keys, order).take(pa.array(picks, pa.int64()))


BOUNDS_PART = "beam/bounds"
"""The job's state part holding its key-range boundaries (stored by the first run)."""


def bounds_to_state(bounds: Optional[pa.Table], key_ranges: int) -> dict[str, Any]:
    """Boundaries as a state value: the key columns as an Arrow IPC stream (exact for every key
    type), base64 in the JSON value."""
    data = None
    if bounds is not None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, bounds.schema) as w:
            w.write_table(bounds)
        data = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
    rows = 0 if bounds is None else bounds.num_rows
    return {"key_ranges": key_ranges, "boundaries": rows, "arrow": data}


def bounds_from_state(value: dict[str, Any]) -> Optional[pa.Table]:
    data = value.get("arrow")
    if not data:
        return None
    return pa.ipc.open_stream(base64.b64decode(data)).read_all()


def keep_bounds(
    store: Any, run_id: str, table: str, bounds: Optional[pa.Table], key_ranges: int
) -> Optional[pa.Table]:
    """Store ``bounds`` as the job's boundaries unless some run (or an earlier attempt of this
    step) stored them first; the stored ones either way, so every key range's batches keep
    their names (``beam/r/...``) from one run to the next."""
    if store.claim(run_id, table, BOUNDS_PART, bounds_to_state(bounds, key_ranges)):
        return bounds
    stored = store.get(run_id, table, BOUNDS_PART)
    return bounds if stored is None else bounds_from_state(stored)


def range_index(keys: pa.Table, bounds: Optional[pa.Table], schema: TableSchema) -> np.ndarray:
    """Which key range each row of ``keys`` falls in: how many boundaries sort at or before it
    (a row equal to a boundary starts that boundary's range)."""
    if bounds is None or bounds.num_rows == 0:
        return np.zeros(keys.num_rows, np.int64)
    names = list(schema.key_names)
    both = pa.concat_tables(
        [bounds.select(names).cast(keys.select(names).schema), keys.select(names)]
    )
    order, _ = sort_order(both, schema.primary_key)
    o = order.to_numpy().astype(np.int64)
    is_bound = o < bounds.num_rows
    before = np.cumsum(is_bound)  # boundaries at or before each position (stable sort)
    out = np.empty(keys.num_rows, np.int64)
    rows = ~is_bound
    out[o[rows] - bounds.num_rows] = before[rows]
    return out


def split_block(
    block: Block, bounds: Optional[pa.Table], schema: TableSchema
) -> Iterator[tuple[int, Block]]:
    """``block``'s rows by key range."""
    idx = range_index(block.table.select(list(schema.key_names)), bounds, schema)
    for r in np.unique(idx).tolist():
        yield int(r), block.take(idx == r)


# -- committing one key range ------------------------------------------------------------------


class MarkedCommitter:
    """A :class:`~loader.commit.runner.Committer` that confirms a batch as done when its commit
    fails with ALREADY_EXISTS and the batch's marker is there (a replayed bundle)."""

    def __init__(self, inner: Committer, store: SpannerStateStore, run: str, table: str) -> None:
        self.inner = inner
        self.store = store
        self.run = run
        self.table = table
        self.parts: dict[bytes, str] = {}
        self.replayed_rows = 0
        self._lock = threading.Lock()  # commits run on several threads

    def marker(self, part: str, rows: int) -> bytes:
        m = self.store.marker_mutation(self.run, self.table, part, {"rows": rows}, op="insert")
        self.parts[m] = part
        return m

    def commit(self, mutations: Sequence[bytes]) -> None:
        try:
            self.inner.commit(mutations)
        except gexc.AlreadyExists:
            part = self.parts.get(mutations[-1]) if mutations else None
            done = self.store.get(self.run, self.table, part) if part is not None else None
            if done is None:
                raise
            with self._lock:
                self.replayed_rows += int(done.get("rows", 0))

    def existing_keys(self, table: str, keys: pa.Table) -> list[list[Any]]:
        return self.inner.existing_keys(table, keys)

    def landed(self, part: str, lo: int, hi: int) -> list[tuple[int, int]]:
        """The ranges of batch ``part`` that markers record as committed (by any attempt),
        read now (:attr:`~loader.commit.jobs.BatchJob.landed`; ``lo``, ``hi``: the rows
        asked about, all of them when the whole batch's marker is there)."""
        parts = self.store.parts(self.run, self.table, part)
        if part in parts:
            return [(lo, hi)]
        return committed_ranges(set(parts), part)


@dataclass
class RangeResult:
    rows_written: int = 0
    rows_skipped: int = 0
    """Rows of batches committed by an earlier attempt (their marker was there)."""
    commits: int = 0
    retries: int = 0
    superseded: int = 0
    key_skipped: int = 0
    """Rows left out for their keys (``skip_existing``, ``skip_missing``)."""
    mutations: list[int] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    runs: int = 0
    """Sorted runs spilled to local disk (0: the key range was sorted in memory)."""
    peak_rows: int = 0
    """The most rows held in memory at once."""
    latencies: list[float] = field(default_factory=list)
    """Seconds of each commit attempt (for the report's commit latencies)."""
    bytes: int = 0


def commit_range(
    range_id: int,
    blocks: Iterable[Block],
    *,
    schema: TableSchema,
    config: LoadConfig,
    sources: Sequence[str],
    committer: Committer,
    store: SpannerStateStore,
    run_id: str,
    concurrency: int = 1,
    budget: Optional[int] = None,
    throttle: Optional[Throttle] = None,
    limiter: Optional[AdaptiveLimiter] = None,
) -> RangeResult:
    """Sort, de-duplicate, batch and commit one key range's rows, each batch exactly once;
    rows beyond ``budget`` (Arrow bytes, default ``--buffer-size``) are sorted in runs on local
    disk (:mod:`loader.beam.spill`), which cuts the same batches. Each commit goes through
    ``throttle`` and ``limiter`` when given (a worker's share of the job's limits and its
    commits in flight, :mod:`loader.beam.limits`)."""
    result = RangeResult()
    held = spill.Held()
    rows = spill.RangeRows(
        schema, config.mode, config.buffer_size if budget is None else budget, held
    )
    done = store.parts(run_id, schema.name, f"beam/{range_id}/")
    marked = MarkedCommitter(committer, store, run_id, schema.name)
    stats = CommitStats()
    runner = CommitRunner(
        marked,
        stats,
        result.rejects.append,
        RetryPolicy(max_retry_time=config.max_retry_time),
        throttle=throttle,
        limiter=limiter,
        skip_refused_keys=config.skips_refused_keys,
        # a failed attempt's rejects and counts are lost with it: the rows a read refuses
        # stay out of every marker, so that a replay finds them again; and the pieces are
        # bisection's, as alike on every attempt as the table's rows before the job allow
        join_runs=False,
        # after a lost reply, the piece's own marker tells whether it landed (its keys may
        # all have been there before: an insert re-run)
        marker_landed=store.marker_landed,
    )
    pool = CommitPool(runner, concurrency)
    try:
        for b in blocks:  # in whatever order the engine delivers them
            rows.add(b)
        commit = functools.partial(
            _commit_flush,
            config=config,
            schema=schema,
            sources=sources,
            marked=marked,
            done=done,
            pool=pool,
            result=result,
        )
        for cs, columns in enumerate(rows.column_sets()):
            prefix = f"beam/{range_id}/{cs}"
            kept = rows.in_memory(columns)
            if kept is not None:
                buffer = Buffer(schema, config.mode, capacity=1 << 62)
                for b in kept:
                    buffer.add(b.table, b.columns, b.source_index, b.records, b.lines)
                commit(buffer, prefix)
                continue
            first, carry = 0, None
            for chunk in rows.merged(columns):
                buffer = _sorted_buffer(schema, config.mode, columns, carry, chunk, held)
                first, carry = commit(buffer, prefix, first=first, hold_last=True)
                held.add(0 if carry is None else carry.num_rows)
            if carry is not None:
                commit(
                    _sorted_buffer(schema, config.mode, columns, carry, None, held),
                    prefix,
                    first=first,
                )
        pool.drain()
    finally:
        pool.close(wait=True)
        rows.close()  # the runs on disk
    result.rows_written = stats.rows_written - marked.replayed_rows
    result.key_skipped = stats.rows_key_skipped
    result.rows_skipped += marked.replayed_rows + stats.rows_replayed
    result.commits = stats.commits
    result.retries = stats.retries
    result.mutations = list(stats.mutations)
    result.runs = rows.runs
    result.peak_rows = held.peak
    result.latencies = list(stats.latencies)
    result.bytes = stats.bytes_written
    return result


def _sorted_buffer(
    schema: TableSchema,
    mode: str,
    columns: tuple[str, ...],
    carry: Optional[pa.Table],
    chunk: Optional[pa.Table],
    held: spill.Held,
) -> Buffer:
    """A buffer of rows already stamped with their provenance: the rows held back from the
    last chunk (``carry``, which sort before ``chunk``'s), then ``chunk``'s."""
    tables = [t for t in (carry, chunk) if t is not None]
    if carry is not None:
        held.drop(carry.num_rows)
        if chunk is not None:
            tables[0] = carry.select(chunk.column_names)
    return Buffer(
        schema,
        mode,
        capacity=1 << 62,
        tables=tables,
        nbytes=sum(t.nbytes for t in tables),
        columns=columns,
    )


def _commit_flush(
    buffer: Buffer,
    prefix: str,
    *,
    config: LoadConfig,
    schema: TableSchema,
    sources: Sequence[str],
    marked: MarkedCommitter,
    done: dict[str, Any],
    pool: CommitPool,
    result: RangeResult,
    first: int = 0,
    hold_last: bool = False,
) -> tuple[int, Optional[pa.Table]]:
    """Commit the buffer's batches, numbered from ``first``; with ``hold_last`` the last batch
    (which more rows could still join) is not committed but handed back, its rows stamped as
    the buffer holds them. The next batch's number, and those rows."""
    flushed = buffer.take()
    if flushed is None:
        return first, None
    origins = flushed.origins
    prov_rows = functools.partial(_row_reject, origins, sources, schema.name)
    for row, reason in flushed.duplicate_reasons(sources):
        result.rejects.append(prov_rows(row, reason))
    result.superseded += flushed.superseded
    commits = flushed.commits(
        schema,
        config.mode,
        config.max_mutations,
        config.max_batch_bytes,
        config.batch_rows,
        marker_cells=len(STATE_COLUMNS),
        marker_bytes=MARKER_BYTES,
    )
    plan = commits.plan
    ranges = list(plan.ranges)
    cut = len(flushed.order)
    carry = None
    if hold_last and ranges:
        cut = ranges.pop()[0]
        at = flushed.order.slice(cut)
        assert flushed.rows is not None
        carry = take_table(flushed.table, at).append_column(ROW_COL, take_column(flushed.rows, at))
    for pos, (row, reason) in zip(plan.oversize.tolist(), commits.oversize):
        if pos < cut:
            result.rejects.append(prov_rows(row, reason))
    uris = pa.array(list(sources))
    prov = pa.table(
        {
            "source": pc.take(uris, origins.column(SOURCE_COL)),
            "record": origins.column(RECORD_COL),
            "line": origins.column(LINE_COL),
        }
    )
    parts = set(done)
    for batch_no, (start, stop) in enumerate(ranges, start=first):
        part = f"{prefix}/{batch_no:08d}"
        if part in parts:
            result.rows_skipped += stop - start
            continue
        n = stop - start
        todo = missing_ranges(n, committed_ranges(parts, part))
        for lo, hi in todo:
            piece = part if (lo, hi) == (0, n) else range_part(part, lo, hi)
            job = flushed.job(
                schema.name,
                commits,
                prov,
                start + lo,
                hi - lo,
                lo,
                extra=[marked.marker(piece, hi - lo)],
                range_marker=functools.partial(_piece_marker, marked, part),
                landed=functools.partial(marked.landed, part),
                marker_cells=len(STATE_COLUMNS),
                marker_bytes=MARKER_BYTES,
            )
            pool.submit(job)
        # the rows the pieces of earlier attempts cover, each once (pieces may overlap)
        result.rows_skipped += n - sum(hi - lo for lo, hi in todo)
    return first + len(ranges), carry


def _piece_marker(
    marked: MarkedCommitter, part: str, lo: int, hi: int, rejected: int
) -> list[bytes]:
    # a piece of a bisection: Beam commits no runs together (no rows settled inside)
    assert rejected == 0
    return [marked.marker(range_part(part, lo, hi), hi - lo)]


def _row_reject(
    origins: pa.Table, sources: Sequence[str], table: str, row: int, reason: str
) -> Reject:
    p = origins.slice(row, 1).to_pylist()[0]
    return Reject(
        source=sources[p[SOURCE_COL]],
        line=p[LINE_COL],
        record=p[RECORD_COL],
        column=None,
        reason=reason,
        table=table,
    )
