"""A key range larger than a worker's memory budget: its rows sorted in runs on local disk and
merged back in Spanner key order, so one skewed key range (or a bad sample) is slower, not an
out-of-memory worker.

The budget is ``--buffer-size`` (Arrow bytes of rows one key range may hold at once on a
worker). :class:`RangeRows` gathers a key range's blocks by column set; while they fit, the
key range is sorted in memory as before. Once the blocks held reach half the budget (sorting
them takes about as much again), they are ordered by where they came from (source, record),
stamped with that provenance, sorted stably by key and written as one *run*: an Arrow IPC file
in a temporary folder of the worker (``TMPDIR``), in record batches of at most a
:data:`RUN_PIECES` th of the budget. :meth:`RangeRows.merged` then reads the runs back through
memory maps, a piece at a time, and yields the rows in chunks in the order an in-memory sort
gives: key, then source, then record. A chunk never splits the rows of one key, so de-duplicating
a chunk (the mode's rule) is exact; at most a share of the budget per run is held while merging.

Batches stay the same whether a key range was spilled or not: the batch planner is greedy
(:func:`loader.batch.plan_batches`: a batch ends only where the next row would break a budget),
so planning the merged stream chunk by chunk, each time holding back the last, still open
batch for the next chunk, cuts exactly the batches one plan of the whole sorted key range cuts.
Batch ``n`` of a key range is therefore the same rows on every attempt, spilled or not, which
the exactly-once markers (:mod:`loader.beam.work`) rely on.

:func:`key_ranges_for` chooses the number of key ranges from the input's size against the
budget when ``--key-ranges`` is not given, so that spilling is the exception.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..buffer import RECORD_COL, SOURCE_COL, Buffer
from ..schema import KeyPart, TableSchema
from ..sort import duplicate_key_mask, encode_keys, sort_order, take_table

if TYPE_CHECKING:
    from .work import Block

RUN_AT = 2
"""The blocks held are written as a run once they reach a ``RUN_AT`` th of the budget."""
RUN_PIECES = 16
"""A run's record batches hold at most this fraction of the budget."""
MERGE_SHARE = 4
"""While merging, each run is read in pieces of at most ``budget / (MERGE_SHARE x runs)``."""
ARROW_PER_CSV_BYTE = 2
"""Arrow bytes a key range holds per byte of plain CSV (encoded rows, keys, provenance), with
room for an uneven sample; see README "Beyond one machine"."""
COMPRESSED_RATIO = 5
"""Plain bytes assumed per byte of a compressed source."""


def key_ranges_for(plain_bytes: int, compressed_bytes: int, budget: int, byte_ranges: int) -> int:
    """Key ranges for an input of ``plain_bytes`` (and ``compressed_bytes``) so that each one's
    rows fit in half of ``budget``; at least one per byte range."""
    rows_bytes = (plain_bytes + compressed_bytes * COMPRESSED_RATIO) * ARROW_PER_CSV_BYTE
    return max(1, byte_ranges, math.ceil(rows_bytes / max(1, budget // RUN_AT)))


@dataclass
class Held:
    """Rows held in memory at once by one key range's commit (``peak`` for tests)."""

    now: int = 0
    peak: int = 0

    def add(self, n: int) -> None:
        self.now += n
        self.peak = max(self.peak, self.now)

    def drop(self, n: int) -> None:
        self.now -= n


@dataclass
class _ColumnSet:
    first: tuple[int, int]
    """(source, record) of its first row: column sets are numbered in that order."""
    blocks: list[Block] = field(default_factory=list)
    nbytes: int = 0
    runs: list[Path] = field(default_factory=list)


class RangeRows:
    """One key range's blocks by column set: held while they fit in ``budget``, beyond it
    sorted runs on local disk (see the module docstring)."""

    def __init__(self, schema: TableSchema, mode: str, budget: int, held: Held) -> None:
        self.schema = schema
        self.mode = mode
        self.budget = max(1, budget)
        self.held = held
        self.sets: dict[tuple[str, ...], _ColumnSet] = {}
        self.nbytes = 0
        self.folder: Optional[Path] = None
        self.runs = 0
        """Runs written (0: the key range was sorted in memory)."""

    def add(self, block: Block) -> None:
        start = (block.source_index, block.first_record)
        cs = self.sets.get(block.columns)
        if cs is None:
            cs = self.sets[block.columns] = _ColumnSet(start)
        cs.first = min(cs.first, start)
        cs.blocks.append(block)
        n = block.table.nbytes
        cs.nbytes += n
        self.nbytes += n
        self.held.add(block.table.num_rows)
        if self.nbytes * RUN_AT >= self.budget:
            for s in self.sets.values():
                self._spill(s)

    def column_sets(self) -> list[tuple[str, ...]]:
        """The column sets, in the order of their first row (the same on every attempt)."""
        return [c for c, _ in sorted(self.sets.items(), key=lambda kv: kv[1].first)]

    def in_memory(self, columns: tuple[str, ...]) -> Optional[list[Block]]:
        """The column set's blocks in (source, record) order when none was spilled."""
        cs = self.sets[columns]
        return None if cs.runs else _ordered(cs.blocks)

    def merged(self, columns: tuple[str, ...]) -> Iterator[pa.Table]:
        """The column set's rows (stamped as :meth:`Buffer.add` stamps them) in chunks, in the
        order key, source, record; a key's rows all in one chunk."""
        cs = self.sets[columns]
        self._spill(cs)
        paths, cs.runs = cs.runs, []
        sizes = [p.stat().st_size for p in paths]
        rows = [_rows_of(p) for p in paths]
        row_bytes = max(1, sum(sizes) // max(1, sum(rows)))
        piece = max(1, self.budget // (MERGE_SHARE * max(1, len(paths)) * row_bytes))
        yield from merge_runs(paths, self.schema, piece, self.held)

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _spill(self, cs: _ColumnSet) -> None:
        if not cs.blocks:
            return
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="spanner-loader-spill-"))
        blocks, cs.blocks = _ordered(cs.blocks), []
        buffer = Buffer(self.schema, self.mode, capacity=1 << 62)
        for b in blocks:
            buffer.add(b.table, b.columns, b.source_index, b.records, b.lines)
        table = pa.concat_tables(buffer.tables)
        order, _ = sort_order(table.select(list(self.schema.key_names)), self.schema.primary_key)
        path = self.folder / f"run-{self.runs:06d}.arrow"
        write_run(path, take_table(table, order), max(1, self.budget // RUN_PIECES))
        cs.runs.append(path)
        self.runs += 1
        self.nbytes -= cs.nbytes
        cs.nbytes = 0
        self.held.drop(table.num_rows)


def _ordered(blocks: Iterable[Block]) -> list[Block]:
    return sorted(blocks, key=lambda b: (b.source_index, b.first_record))


def write_run(path: Path, table: pa.Table, max_bytes: int) -> None:
    """``table`` (sorted) as an Arrow IPC file in record batches of at most ``max_bytes``."""
    per_row = max(1, table.nbytes // max(1, table.num_rows))
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table, max_chunksize=max(1, max_bytes // per_row))


def _rows_of(path: Path) -> int:
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def _pieces(path: Path, rows: int) -> Iterator[pa.Table]:
    """A run's rows, ``rows`` at a time, read through a memory map."""
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            for start in range(0, batch.num_rows, rows):
                yield pa.Table.from_batches([batch.slice(start, rows)])


def merge_runs(
    paths: list[Path], schema: TableSchema, piece: int, held: Held
) -> Iterator[pa.Table]:
    """The rows of the sorted runs at ``paths`` in chunks, in the order key, source, record,
    each key's rows in one chunk. Each run is read ``piece`` rows at a time; a step emits every
    held row whose key sorts before the *frontier* (the smallest of the last keys held from
    the runs not yet read to the end), so no row still unread can sort before it.

    Keys are compared as order-preserving bytes (:func:`loader.sort.encode_keys`) made in one
    call with the frontier: those bytes compare only within one call (a class byte is written
    only for a column holding a NULL or NaN). Without the compiled part, by the loader's key
    sort."""
    key = schema.primary_key
    names = list(schema.key_names)
    cursors = [_pieces(p, piece) for p in paths]
    pending: list[Optional[pa.Table]] = [None] * len(paths)
    live = [True] * len(paths)

    def pull(i: int) -> None:
        got = next(cursors[i], None)
        if got is None:
            live[i] = False
            return
        held.add(got.num_rows)
        p = pending[i]
        pending[i] = got if p is None or not p.num_rows else pa.concat_tables([p, got])

    for i in range(len(paths)):
        pull(i)
    while True:
        runs = [i for i in range(len(paths)) if live[i]]
        if not runs:
            rest = [p for p in pending if p is not None and p.num_rows]
            if rest:
                yield from _emit(rest, held)
            return
        both = _concat([_last(pending[i], names) for i in runs])
        frontier = both.slice(_first_of(both, key), 1)
        out = []
        for i, p in enumerate(pending):
            if p is None or not p.num_rows:
                continue
            n = _count_below(p.select(names), frontier, key)
            if n:
                out.append(p.slice(0, n))
                pending[i] = p.slice(n)
        if out:
            yield from _emit(out, held)
        for i in runs:
            p = pending[i]
            if p is None or not p.num_rows or _same(_last(p, names), frontier, key):
                pull(i)


def _first_of(keys: pa.Table, key: Sequence[KeyPart]) -> int:
    """The row of ``keys`` with the smallest key (the first of equal ones)."""
    kb = encode_keys(keys, key)
    if kb is not None:
        values = kb.to_pylist()
        return values.index(min(values))
    order, _ = sort_order(keys, key)
    return int(order[0].as_py())


def _count_below(keys: pa.Table, frontier: pa.Table, key: Sequence[KeyPart]) -> int:
    """Rows of ``keys`` (in key order) whose key sorts strictly before ``frontier``'s."""
    both = _concat([frontier, keys])
    kb = encode_keys(both, key)
    if kb is not None:
        below = pc.less(kb.slice(1), kb[0])
        return int(pc.sum(below).as_py() or 0)
    # where a stable sort puts the frontier, placed first, among them
    order, _ = sort_order(both, key)
    return int(np.flatnonzero(order.to_numpy() == 0)[0])


def _same(a: pa.Table, b: pa.Table, key: Sequence[KeyPart]) -> bool:
    """Whether two one-row key tables hold the same key (Spanner's equality)."""
    return bool(duplicate_key_mask(_concat([b, a]), key)[1])


def _emit(parts: list[pa.Table], held: Held) -> Iterator[pa.Table]:
    chunk = pa.concat_tables(parts)
    # source order first: the caller's stable key sort then keeps equal keys in source order
    where = chunk.column(SOURCE_COL).to_numpy().astype(np.int64) << 40
    where |= chunk.column(RECORD_COL).to_numpy()
    yield chunk.take(pa.array(np.argsort(where, kind="stable")))
    held.drop(chunk.num_rows)


def _last(table: Optional[pa.Table], names: list[str]) -> pa.Table:
    assert table is not None and table.num_rows
    return table.select(names).slice(table.num_rows - 1)


def _concat(tables: list[pa.Table]) -> pa.Table:
    first = tables[0].schema
    return pa.concat_tables([t if t.schema == first else t.cast(first) for t in tables])
