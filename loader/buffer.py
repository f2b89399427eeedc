"""The buffer: encoded rows gathered until a flush, then sorted, de-duplicated and cut into
batches. The single-process pipeline fills one per table; a distributed runner can fill one
per worker and key range, since nothing here knows where the rows came from beyond the three
provenance columns each row carries.

Each buffered row is its ``Mutation`` bytes (:data:`ROW_COL`, from loader.encode), its key
columns, and where it came from (:data:`PROVENANCE`: the source's index, the record number and
the line). When collecting (``verify``) the typed values stand in for the bytes.

:meth:`Buffer.take` empties the buffer into a :class:`Flush`: the rows in Spanner key order
(stable, so equal keys keep source order), one row per key (the mode's rule, see below), and
:meth:`Flush.commits` cuts them into batches within a :class:`~loader.batch.Budget`. The
encoded rows are not reordered here: each commit gathers its own (loader.commit.jobs.Gathered).

De-duplication within one flush: in upsert, replace and update modes the LAST row of a key
wins, as if each row had been committed on its own (``superseded`` counts the others); in
insert mode the FIRST is inserted and each later one is a duplicate of the source
(``duplicates`` lists them for the reject file). A key repeated across flushes is written in
each, the later flush landing last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch import (
    COMMIT_CEILING_BYTES,
    BatchPlan,
    Budget,
    mutation_cost_per_row,
    oversize_reason,
    plan_batches,
)
from .commit.jobs import OPS, BatchJob, Gathered, Reordered
from .encode import write_mutation
from .schema import TableSchema
from .sort import duplicate_key_mask, last_of_runs, sort_order, take_column, take_table
from .types import SpannerType

SOURCE_COL = "loader:source"
RECORD_COL = "loader:record"
LINE_COL = "loader:line"
PROVENANCE = (SOURCE_COL, RECORD_COL, LINE_COL)
"""Each row's source, record and line, buffered beside its columns: the names have a colon,
which no Spanner column name has, so a table's own columns never clash with them."""
ROW_COL = "loader:row"
"""The buffered column holding each row's encoded Mutation bytes (loader.encode)."""


DUPLICATE_IN_SOURCE = "duplicate primary key: an earlier row of the source has the same key"
"""The reject reason of a row whose key an earlier row had (insert mode)."""
MARKER_BYTES = 512
"""Room left in each commit for its checkpoint marker row."""


def _key_text(key: dict[str, Any]) -> str:
    """``Id=42, Region='EU'``: a key for a message (long values cut)."""

    def one(v: Any) -> str:
        text = repr(v.isoformat() if hasattr(v, "isoformat") else v)
        return text if len(text) <= 60 else text[:57] + "..."

    return ", ".join(f"{name}={one(v)}" for name, v in key.items())


@dataclass
class Flush:
    """The rows of one flush, in key order, one per key."""

    table: pa.Table
    """The buffered columns (keys, typed values when collecting, provenance), source order."""
    rows: Optional[pa.ChunkedArray]
    """Each row's Mutation bytes in source order (None when collecting typed values)."""
    columns: tuple[str, ...]
    """The table columns the rows write."""
    key_table: pa.Table
    order: pa.Array
    """Indices into ``table`` in key order, one row per key."""
    key_types: tuple[SpannerType, ...] = ()
    """The Spanner types of ``key_table``'s columns (each job carries them, to match its keys
    with keys read back from the table)."""
    parent: Optional[tuple[str, int]] = None
    """The table these rows are interleaved in, and how many key columns it has."""
    duplicates: list[int] = field(default_factory=list)
    """Insert mode: rows of ``table`` whose key an earlier row of the source has."""
    first_of: list[int] = field(default_factory=list)
    """For each of ``duplicates``: the row of ``table`` with that key that is inserted."""
    superseded: int = 0
    """Other modes: rows a later row of the same key replaced."""

    def duplicate_reasons(self, sources: Sequence[str]) -> list[tuple[int, str]]:
        """Each of ``duplicates`` with its reject reason, which names the key and where the
        row insert mode keeps of it was read (``sources``: the URIs by source index; that row
        may itself be refused, or left out by ``skip_existing``)."""
        out = []
        origins = self.origins
        for row, first in zip(self.duplicates, self.first_of):
            key = self.key_table.slice(row, 1).to_pylist()[0]
            at = origins.slice(first, 1).to_pylist()[0]
            out.append(
                (
                    row,
                    f"{DUPLICATE_IN_SOURCE} ({_key_text(key)}; "
                    f"first read at {sources[at[SOURCE_COL]]}:{at[LINE_COL]})",
                )
            )
        return out

    @property
    def origins(self) -> pa.Table:
        """The provenance columns of ``table``."""
        return self.table.select(list(PROVENANCE))

    def values(self) -> pa.Table:
        """The written columns' typed values in key order (collecting)."""
        return take_table(self.table.select(list(self.columns)), self.order)

    def listed(self, records: Mapping[int, Collection[int]]) -> Optional[pa.Array]:
        """In key order (as :meth:`values`), whether each row is one of ``records`` (record
        numbers by source index); None when none of the sources is listed. One pass, however
        many sources: each (source, record) pair is one number."""
        if not records:
            return None
        pairs = np.fromiter(
            ((source << 40) + n for source, numbers in records.items() for n in numbers),
            dtype=np.int64,
        )
        sources = take_column(self.origins.column(SOURCE_COL), self.order)
        numbers = take_column(self.origins.column(RECORD_COL), self.order)
        keys = np.left_shift(sources.to_numpy().astype(np.int64), 40) + numbers.to_numpy()
        return pa.array(np.isin(keys, pairs))

    def batches(
        self, cost_per_row: int, budget: Budget, overhead_bytes: int, table: str
    ) -> tuple[Gathered, pa.Array, BatchPlan]:
        """The Mutation bytes in key order (gathered per commit, not here), their sizes, and
        the batches they are cut into within ``budget`` (see
        :func:`loader.batch.plan_batches`)."""
        assert self.rows is not None, "a collecting buffer holds no encoded rows"
        encoded = Gathered(self.rows, self.order)
        sizes = take_column(pc.binary_length(self.rows), self.order)
        plan = plan_batches(sizes, cost_per_row, budget, overhead_bytes=overhead_bytes, table=table)
        return encoded, sizes, plan

    def commits(
        self,
        schema: TableSchema,
        mode: str,
        max_mutations: int,
        max_batch_bytes: int,
        batch_rows: Optional[int],
        marker_cells: int = 0,
        marker_bytes: int = 0,
    ) -> CommitPlan:
        """The flush cut into commits of ``mode``'s operation within the budgets, each leaving
        room for a checkpoint marker row of ``marker_cells`` mutations and ``marker_bytes``
        that rides in the same commit; a row too big for a commit even alone is an oversize
        row, with its reason told against ``max_batch_bytes`` itself (the marker's room counts
        as batch header there)."""
        columns = list(self.columns)
        cost = mutation_cost_per_row(schema, columns, mode)
        op = OPS[mode]
        overhead = len(write_mutation(op, schema.name, columns, pa.array([], pa.binary())))
        budget = Budget(
            max_mutations=max_mutations - marker_cells,
            max_bytes=max_batch_bytes - marker_bytes,
            max_rows=batch_rows,
            ceiling_bytes=COMMIT_CEILING_BYTES - marker_bytes,
        )
        encoded, sizes, plan = self.batches(cost, budget, overhead, schema.name)
        oversize: list[tuple[int, str]] = []
        if len(plan.oversize):
            flag_budget = Budget(max_bytes=max_batch_bytes, ceiling_bytes=COMMIT_CEILING_BYTES)
            positions = self.order.to_numpy()
            for i in plan.oversize.tolist():
                reason = oversize_reason(sizes[i].as_py(), flag_budget, overhead + marker_bytes)
                oversize.append((int(positions[i]), reason))
        return CommitPlan(op, cost, encoded, plan, oversize)

    def job(
        self,
        table: str,
        commits: CommitPlan,
        provenance: pa.Table,
        start: int,
        n: int,
        offset: int,
        **more: Any,
    ) -> BatchJob:
        """One commit's job: the ``n`` key-ordered rows of ``commits`` from ``start``, with
        their keys and ``provenance`` (source, record, line of each row of ``table``);
        ``offset`` is where they start within their batch."""
        at = self.order.slice(start, n)
        return BatchJob(
            table=table,
            op=commits.op,
            columns=list(self.columns),
            rows=commits.encoded.slice(start, n),
            keys=Reordered(self.key_table, at),
            provenance=Reordered(provenance, at),
            cost_per_row=commits.cost_per_row,
            offset=offset,
            key_types=self.key_types,
            parent=self.parent,
            **more,
        )


@dataclass
class CommitPlan:
    """A flush cut into commits (:meth:`Flush.commits`)."""

    op: str
    """The Mutation operation of every commit."""
    cost_per_row: int
    """Mutations per row, secondary index entries included."""
    encoded: Gathered
    """The rows' Mutation bytes in key order, each commit's gathered by its own thread."""
    plan: BatchPlan
    oversize: list[tuple[int, str]]
    """Rows of the flush's ``table`` too big for any commit, with the reason."""


@dataclass
class Buffer:
    """Encoded blocks of one table, gathered until :attr:`full`."""

    schema: TableSchema
    mode: str
    capacity: int
    """Arrow bytes the buffered rows may take before the buffer is full."""
    tables: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0
    columns: tuple[str, ...] = ()
    """The table columns the buffered rows carry (encoded, or typed when collecting)."""

    @property
    def empty(self) -> bool:
        return not self.tables

    @property
    def full(self) -> bool:
        return self.nbytes >= self.capacity

    def fits(self, columns: tuple[str, ...]) -> bool:
        """Whether rows writing ``columns`` may join the buffered ones (one column set per
        flush: each batch is one Mutation with one column list)."""
        return self.empty or self.columns == columns

    def add(
        self,
        table: pa.Table,
        columns: tuple[str, ...],
        source_index: int,
        records: pa.Array,
        lines: Optional[pa.Array],
    ) -> None:
        """Buffer a block's rows (``table``: its key columns and :data:`ROW_COL`, or its typed
        columns when collecting), stamped with where they came from."""
        if not self.fits(columns):
            raise ValueError("another column set: take() the buffered rows first")
        n = table.num_rows
        if n == 0:
            return
        table = table.append_column(SOURCE_COL, pa.array(np.full(n, source_index, np.int32)))
        table = table.append_column(RECORD_COL, records.cast(pa.int64()))
        table = table.append_column(
            LINE_COL, lines.cast(pa.int64()) if lines is not None else pa.nulls(n, pa.int64())
        )
        self.tables.append(table)
        self.columns = columns
        self.nbytes += table.nbytes

    def take(self) -> Optional[Flush]:
        """Empty the buffer: its rows sorted by key and de-duplicated (None when empty)."""
        if not self.tables:
            return None
        table = pa.concat_tables(self.tables)
        self.tables, self.nbytes = [], 0
        rows = table.column(ROW_COL) if ROW_COL in table.column_names else None
        if rows is not None:
            table = table.drop_columns([ROW_COL])
        # sorted by reordering row indices: only the encoded rows (or, collecting, the values)
        # are taken in key order later; a batch's keys and origins are views taken on demand
        key_table = table.select(list(self.schema.key_names))
        order, distinct = sort_order(key_table, self.schema.primary_key)
        key_types = tuple(self.schema.column(k).type for k in self.schema.key_names)
        schema = self.schema
        parent = (schema.parent, schema.parent_key) if schema.parent and schema.parent_key else None
        flush = Flush(table, rows, self.columns, key_table, order, key_types, parent)
        if not distinct:
            self._dedupe(flush)
        return flush

    def _dedupe(self, flush: Flush) -> None:
        dup = duplicate_key_mask(take_table(flush.key_table, flush.order), self.schema.primary_key)
        if not dup.any():
            return
        if self.mode == "insert":
            # the first occurrence is inserted; later ones are duplicate keys in the source
            positions = flush.order.to_numpy()
            at = np.flatnonzero(dup)
            # the row each run of equal keys starts with (the sort is stable: the first read)
            starts = np.maximum.accumulate(np.where(dup, 0, np.arange(len(dup))))
            flush.duplicates = positions[at].tolist()
            flush.first_of = positions[starts[at]].tolist()
            keep = ~dup
        else:
            keep = last_of_runs(dup)
            flush.superseded = int(len(keep) - np.count_nonzero(keep))
        flush.order = flush.order.filter(pa.array(keep))
