"""The buffer (loader/buffer.py) and the checkpoint's range arithmetic
(loader/resume/checkpoint.py), as units: the de-duplication rule of a flush and the rows a
resume still has to send, as properties."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.buffer import RECORD_COL, ROW_COL, Buffer
from loader.resume.checkpoint import committed_ranges, gaps, range_part
from loader.schema import Column, KeyPart, TableSchema
from loader.types import SpannerType

SCHEMA = TableSchema(
    name="T",
    columns=(
        Column("K", SpannerType.parse("INT64"), nullable=False),
        Column("V", SpannerType.parse("STRING(MAX)")),
    ),
    primary_key=(KeyPart("K"),),
)


def block(keys: list[int], first_record: int) -> tuple[pa.Table, pa.Array]:
    """A block as the encoder hands it over: key columns plus each row's bytes."""
    rows = pa.array([f"row {first_record + i}".encode() for i in range(len(keys))], pa.binary())
    table = pa.table({"K": pa.array(keys, pa.int64()), ROW_COL: rows})
    return table, pa.array(range(first_record, first_record + len(keys)), pa.int64())


def fill(buffer: Buffer, blocks: list[list[int]]) -> None:
    record = 1
    for keys in blocks:
        table, records = block(keys, record)
        buffer.add(table, ("K", "V"), 0, records, None)
        record += len(keys)


def test_an_empty_buffer_takes_nothing_and_fills_up_to_its_capacity() -> None:
    buffer = Buffer(SCHEMA, "upsert", capacity=1 << 20)
    assert buffer.empty and buffer.take() is None
    fill(buffer, [[3, 1, 2]])
    assert not buffer.empty and not buffer.full
    small = Buffer(SCHEMA, "upsert", capacity=1)
    fill(small, [[1]])
    assert small.full


def test_one_column_set_per_flush() -> None:
    buffer = Buffer(SCHEMA, "upsert", capacity=1 << 20)
    fill(buffer, [[1]])
    assert buffer.fits(("K", "V")) and not buffer.fits(("K",))
    table, records = block([2], 9)
    with pytest.raises(ValueError, match="another column set"):
        buffer.add(table, ("K",), 0, records, None)


def test_a_flush_is_in_key_order_and_its_rows_keep_their_provenance() -> None:
    buffer = Buffer(SCHEMA, "upsert", capacity=1 << 20)
    fill(buffer, [[30, 10], [20]])
    flushed = buffer.take()
    assert flushed is not None and buffer.empty
    origins = flushed.origins.take(flushed.order).to_pydict()
    assert origins[RECORD_COL] == [2, 3, 1]  # keys 10, 20, 30
    from loader.batch import Budget

    encoded, sizes, plan = flushed.batches(2, Budget(max_rows=2), 0, "T")
    assert encoded.take().to_pylist() == [b"row 2", b"row 3", b"row 1"]
    assert encoded.slice(1, 2).take().to_pylist() == [b"row 3", b"row 1"]
    assert sizes.to_pylist() == [5, 5, 5]
    assert [(int(a), int(b)) for a, b in plan.ranges] == [(0, 2), (2, 3)]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 50), min_size=1, max_size=9), min_size=1, max_size=5),
    st.integers(1, 4),
    st.data(),
)
def test_a_commit_gathers_its_own_rows_in_key_order(
    blocks: list[list[int]], batch_rows: int, data: st.DataObject
) -> None:
    """The flush copies no row: each job gathers its batch's rows from the buffered blocks
    when its request is built, also a piece of a bisected job, equal to taking them all at
    once in key order."""
    from loader.encode import write_mutation

    buffer = Buffer(SCHEMA, "upsert", capacity=1 << 30)
    fill(buffer, blocks)
    flushed = buffer.take()
    assert flushed is not None
    commits = flushed.commits(SCHEMA, "upsert", 20_000, 1 << 20, batch_rows)
    assert flushed.rows is not None
    whole = flushed.rows.take(flushed.order).to_pylist()
    prov = flushed.origins
    got: list[bytes] = []
    for start, stop in commits.plan.ranges:
        job = flushed.job("T", commits, prov, int(start), int(stop - start), 0)
        cut = data.draw(st.integers(0, len(job)))
        pieces = [job.slice(0, cut), job.slice(cut, len(job))]
        assert sum(len(p) for p in pieces) == len(job)
        assert [b for p in pieces for b in p.encoded().to_pylist()] == job.encoded().to_pylist()
        assert job.mutations()[0] == write_mutation(
            commits.op, "T", ["K", "V"], pa.array(whole[start:stop], pa.binary())
        )
        got += job.encoded().to_pylist()
    assert got == whole


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=8), min_size=1, max_size=4),
    st.sampled_from(["upsert", "insert", "replace", "update"]),
)
def test_one_row_per_key_the_last_or_in_insert_mode_the_first(
    blocks: list[list[int]], mode: str
) -> None:
    buffer = Buffer(SCHEMA, mode, capacity=1 << 30)
    fill(buffer, blocks)
    flushed = buffer.take()
    assert flushed is not None
    keys = [k for b in blocks for k in b]  # record r (1-based) has keys[r - 1]
    records = flushed.table.column(RECORD_COL).to_pylist()
    kept = [records[i] for i in flushed.order.to_pylist()]
    winner: dict[int, int] = {}
    for record, key in enumerate(keys, start=1):
        if mode != "insert" or key not in winner:
            winner[key] = record
    assert kept == [winner[k] for k in sorted(winner)]  # key order, the mode's survivor
    dropped = len(keys) - len(winner)
    if mode == "insert":
        assert flushed.superseded == 0
        duplicates = sorted(records[i] for i in flushed.duplicates)
        assert duplicates == sorted(set(range(1, len(keys) + 1)) - set(winner.values()))
        # each names the row of its key that is inserted
        firsts = [records[i] for i in flushed.first_of]
        assert firsts == [winner[keys[records[i] - 1]] for i in flushed.duplicates]
    else:
        assert flushed.superseded == dropped and flushed.duplicates == []


def _ranges(n: int) -> Any:
    pairs = st.tuples(st.integers(0, n), st.integers(0, n)).map(sorted).map(tuple)
    return st.lists(pairs.filter(lambda p: p[0] < p[1]), max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40).flatmap(lambda n: st.tuples(st.just(n), _ranges(n))))
def test_a_resume_sends_exactly_the_rows_no_committed_piece_covers(
    case: tuple[int, list[tuple[int, int]]],
) -> None:
    n, covered = case
    batch = "b/000001/000003"
    parts = {range_part(batch, lo, hi) for lo, hi in covered} | {"b/000001/000004/0-5"}
    assert sorted(committed_ranges(parts, batch)) == sorted(set(covered))
    missing = gaps(n, committed_ranges(parts, batch))
    rows = set(range(n))
    done = {i for lo, hi in covered for i in range(lo, hi)}
    assert {i for lo, hi in missing for i in range(lo, hi)} == rows - done
    assert all(lo < hi for lo, hi in missing)
    assert missing == sorted(missing)
    assert all(a[1] < b[0] for a, b in zip(missing, missing[1:]))  # disjoint, not adjacent


def test_a_flush_tells_the_listed_rows_of_several_sources_in_key_order() -> None:
    """verify --rejects: (source, record) pairs matched in one pass, in key order."""
    import pyarrow as pa

    from loader.buffer import LINE_COL, RECORD_COL, SOURCE_COL, Flush

    table = pa.table(
        {
            SOURCE_COL: pa.array([0, 0, 1, 1, 2], pa.int32()),
            RECORD_COL: pa.array([1, 2, 1, 2, 1], pa.int64()),
            LINE_COL: pa.array([2, 3, 2, 3, 2], pa.int64()),
        }
    )
    flush = Flush(table, None, (), table.select([RECORD_COL]), pa.array([4, 3, 2, 1, 0]))
    assert flush.listed({}) is None
    got = flush.listed({0: {2}, 1: [1, 7], 5: {1}})
    assert got is not None and got.to_pylist() == [False, False, True, True, False]
