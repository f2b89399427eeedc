"""The job model: one batch of sorted rows of one table, encoded and ready to commit, and the
counters the commit threads share."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import pyarrow as pa

from ..encode import write_mutation
from ..sort import take_column
from ..types import SpannerType

OPS = {"upsert": "insert_or_update", "insert": "insert", "replace": "replace", "update": "update"}


@dataclass(frozen=True)
class Reordered:
    """The rows of ``table`` at ``order``, taken only when asked for: a job's keys and origins
    are read for a reject or a read-back, not for every row of every flush."""

    table: pa.Table
    order: pa.Array

    def slice(self, start: int, length: int) -> Reordered:
        return Reordered(self.table, self.order.slice(start, length))

    def take(self) -> pa.Table:
        return self.table.take(self.order)

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.take().to_pylist()


@dataclass(frozen=True)
class Gathered:
    """A flush's encoded rows at ``order`` (indices into ``rows``, in key order), copied out
    only when a commit builds its request: the flush, which the reading threads wait for,
    sorts and plans, and each commit thread gathers its own batch's rows."""

    rows: pa.Array | pa.ChunkedArray
    order: pa.Array

    def __len__(self) -> int:
        return len(self.order)

    def slice(self, start: int, length: int) -> Gathered:
        return Gathered(self.rows, self.order.slice(start, length))

    def take(self) -> pa.Array:
        return take_column(self.rows, self.order)


def rows_of(rows: pa.Table | Reordered) -> pa.Table:
    """A job's keys or provenance as a table (taking a :class:`Reordered` view)."""
    return rows.take() if isinstance(rows, Reordered) else rows


@dataclass
class BatchJob:
    """One contiguous, sorted key range of one table, encoded and ready to commit."""

    table: str
    op: str
    columns: Sequence[str]
    rows: pa.Array | Gathered
    """Encoded rows (loader.encode.encode_rows elements), or where to gather them from
    (:meth:`encoded` does, once)."""
    keys: pa.Table | Reordered
    """The rows' primary key columns, typed, for reading back and for reject texts."""
    provenance: pa.Table | Reordered
    """Columns ``source``, ``record``, ``line`` for each row."""
    cost_per_row: int
    on_done: Optional[Callable[[BatchJob], None]] = None
    """Called once every row of the job is committed or rejected (e.g. to record progress)."""
    extra: Sequence[bytes] = ()
    """Mutations (wire bytes) committed atomically with the rows (the checkpoint marker). A
    piece of a job
    split to isolate bad rows carries ``range_marker``'s mutations for its own rows instead,
    and ``on_done`` records the whole job once every piece is committed or rejected."""
    offset: int = 0
    """Where the job's first row is in the batch its checkpoint marker names."""
    range_marker: Optional[Callable[[int, int, int], Sequence[bytes]]] = None
    """Mutations recording rows [start, stop) of that batch as done, ``rejected`` of them
    rejected (for the pieces of a bisected job: a crash mid-bisection then leaves exact marks
    of what landed)."""
    marker_cells: int = 0
    """Mutations one marker counts for (``range_marker``'s, or ``extra``'s)."""
    marker_bytes: int = 0
    """Bytes the batch planner left for one marker."""
    split: bool = False
    """Set when the job was bisected to isolate bad rows (its ``extra`` was not committed)."""
    rejected: int = 0
    """Rows of the job Spanner refused (set by the runner, for its checkpoint marker)."""
    marked: dict[tuple[int, int], int] = field(default_factory=dict)
    """Of ``rejected``, those a marker of a commit of its runs recorded already
    (:meth:`spans`), by that marker's rows [start, stop) of the batch: the job's own marker
    counts the others."""
    key_types: Sequence[SpannerType] = ()
    """The Spanner types of ``keys``' columns (to match them with keys read from the table;
    empty: rows refused for their keys are isolated by bisecting)."""
    parent: Optional[tuple[str, int]] = None
    """The table the rows are interleaved in and how many key columns it has (the first of
    ``keys``): rows refused for a missing parent row are found by reading those keys."""
    landed: Optional[Callable[[int, int], list[tuple[int, int]]]] = None
    """The ranges of rows [start, stop) of the batch that markers of another attempt's commits
    record as done, among rows [start, stop) (a replayed Beam bundle racing an earlier one,
    whose pieces were cut by what its reads found): a read of refused keys leaves those rows
    out, neither rejected nor committed again."""

    def __len__(self) -> int:
        return len(self.rows)

    def slice(self, start: int, stop: int) -> BatchJob:
        n = stop - start
        offset = self.offset + start
        marker = self.range_marker
        return BatchJob(
            self.table,
            self.op,
            self.columns,
            self.rows.slice(start, n),
            self.keys.slice(start, n),
            self.provenance.slice(start, n),
            self.cost_per_row,
            extra=marker(offset, offset + n, 0) if marker is not None else (),
            offset=offset,
            range_marker=marker,
            marker_cells=self.marker_cells,
            marker_bytes=self.marker_bytes,
            key_types=self.key_types,
            parent=self.parent,
            landed=self.landed,
        )

    def spans(self, spans: Sequence[tuple[int, int]], rejected: int = 0) -> BatchJob:
        """The rows of these ranges [start, stop) of the job (the runs between rows refused
        for their keys), in one commit with one marker: for the rows from the first range's
        start to the last one's stop, those between the ranges being settled already
        (``rejected`` of them rejected, the others left out). Not to be sliced: if refused,
        the runner commits half of the ranges so, and so on down to a range alone."""
        import numpy as np

        idx = pa.array(np.concatenate([np.arange(lo, hi) for lo, hi in spans]), pa.int64())
        marker = self.range_marker
        first, last = self.offset + spans[0][0], self.offset + spans[-1][1]
        extra = marker(first, last, rejected) if marker is not None else []
        return BatchJob(
            self.table,
            self.op,
            self.columns,
            self.encoded().take(idx),
            rows_of(self.keys).take(idx),
            rows_of(self.provenance).take(idx),
            self.cost_per_row,
            extra=extra,
            marker_cells=self.marker_cells,
            key_types=self.key_types,
            parent=self.parent,
        )

    def encoded(self) -> pa.Array:
        """The rows' encoded bytes, gathered on first use (on the thread that commits)."""
        if isinstance(self.rows, Gathered):
            self.rows = self.rows.take()
        return self.rows

    def mutations(self) -> list[bytes]:
        """The commit's ``Mutation`` messages as wire bytes: the rows, then ``extra``."""
        return [write_mutation(self.op, self.table, self.columns, self.encoded()), *self.extra]


@dataclass
class CommitStats:
    """Counters shared by the commit threads (updated under a lock)."""

    commits: int = 0
    retries: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    ambiguous_resolved: int = 0
    rows_key_skipped: int = 0
    """Rows not written, as asked, for their keys (``CommitRunner.skip_refused_keys``)."""
    rows_replayed: int = 0
    """Rows another attempt's commits hold (:attr:`BatchJob.landed`), not written again."""
    mutations: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def encoded_bytes(arr: pa.Array) -> int:
    """Bytes of a job's encoded rows (for the throttle and the report)."""
    import pyarrow.compute as pc

    return int(pc.sum(pc.binary_length(arr)).as_py() or 0)
