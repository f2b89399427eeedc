"""Spanner key order: unit tests per rule, and a Hypothesis comparison with a reference sort.

The reference (`_ref_cmp`) is written from SPANNER_FACTS.md "Key order" and the emulator's
observed behaviour, independently of loader/sort.py: it compares Python values, one row at a
time, with no Arrow involved.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import native_parts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.schema import KeyPart
from loader.sort import (
    duplicate_key_mask,
    last_of_runs,
    sort_indices,
    sort_table,
    take_column,
    take_table,
)
from loader.types import COMMIT_TIMESTAMP

NAN = float("nan")
INF = float("inf")


@pytest.fixture(autouse=True, scope="module", params=["pyarrow", "native"])
def sorter(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs with and without the compiled radix sort for INT64 keys."""
    yield from native_parts(request.param)


def _order(table: pa.Table, key: list[KeyPart]) -> list[int]:
    return sort_indices(table, key).to_pylist()


def _col(values: list[Any], type_: pa.DataType, key: list[KeyPart] | None = None) -> list[int]:
    t = pa.table({"k": pa.array(values, type=type_)})
    return _order(t, key or [KeyPart("k")])


# ---------------------------------------------------------------------------------------------
# One test per rule


def test_null_first_ascending_last_descending():
    vals = [3, None, 1, None, 2]
    assert _col(vals, pa.int64()) == [1, 3, 2, 4, 0]
    assert _col(vals, pa.int64(), [KeyPart("k", desc=True)]) == [0, 4, 2, 1, 3]


def test_mixed_asc_desc_nulls_each_column_its_own_placement():
    # pyarrow < 25 has a single null placement for all keys; Spanner needs one per column.
    t = pa.table(
        {
            "a": pa.array([None, 1, None, 1, 1], type=pa.int64()),
            "b": pa.array(["x", None, "y", "z", "a"], type=pa.string()),
        }
    )
    key = [KeyPart("a"), KeyPart("b", desc=True)]
    # a ASC: NULL first; b DESC within a=1: z, a, then NULL last.
    assert _order(t, key) == [2, 0, 3, 4, 1]


def test_float_nan_lowest_non_null_ascending():
    vals = [1.0, NAN, None, -INF, INF, -1.0]
    assert _col(vals, pa.float64()) == [2, 1, 3, 5, 0, 4]


def test_float_nan_before_null_at_the_end_descending():
    vals = [1.0, NAN, None, -INF, INF, -1.0]
    assert _col(vals, pa.float64(), [KeyPart("k", desc=True)]) == [4, 0, 5, 3, 1, 2]


def test_float32_same_rules():
    vals = [1.5, NAN, None, -INF]
    assert _col(vals, pa.float32()) == [2, 1, 3, 0]


def test_negative_zero_equals_zero_and_keeps_input_order():
    # The emulator answers ALREADY_EXISTS for -0.0 after 0.0: same key, so any relative order is
    # right; a stable sort keeps the input order.
    vals = [0.0, -1.0, -0.0, 0.0, 1.0]
    assert _col(vals, pa.float64()) == [1, 0, 2, 3, 4]
    t = sort_table(pa.table({"k": pa.array(vals)}), [KeyPart("k")])
    assert duplicate_key_mask(t, [KeyPart("k")]).tolist() == [False, False, True, True, False]


def test_string_code_point_order_not_utf16():
    # U+FFFF < U+1F600 by code point (and UTF-8 bytes); UTF-16 would put the emoji first.
    vals = ["\U0001f600", "\uffff", "é", "a", "Z", "", "ab"]
    got = [vals[i] for i in _col(vals, pa.string())]
    assert got == ["", "Z", "a", "ab", "é", "\uffff", "\U0001f600"]


def test_bytes_unsigned_bytewise():
    vals = [b"\xff", b"\x80", b"\x7f", b"", b"\x00", b"\x00\x00"]
    got = [vals[i] for i in _col(vals, pa.binary())]
    assert got == [b"", b"\x00", b"\x00\x00", b"\x7f", b"\x80", b"\xff"]


def test_bool_false_before_true():
    assert _col([True, None, False], pa.bool_()) == [1, 2, 0]
    assert _col([True, None, False], pa.bool_(), [KeyPart("k", desc=True)]) == [0, 2, 1]


def test_numeric_by_value():
    vals = [Decimal("1.5"), Decimal("-2.000000001"), Decimal("-2"), Decimal("0.000000001")]
    assert _col(vals, pa.decimal128(38, 9)) == [1, 2, 3, 0]


def test_date_chronological():
    vals = [dt.date(2024, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1)]
    assert _col(vals, pa.date32()) == [1, 3, 0, 2]


def test_timestamp_canonical_strings_and_commit_timestamp_last():
    vals = [
        COMMIT_TIMESTAMP,
        "2024-01-01T00:00:00.000000001Z",
        "0001-01-01T00:00:00.000000000Z",
        "2024-01-01T00:00:00.000000000Z",
        None,
    ]
    assert _col(vals, pa.string()) == [4, 2, 3, 1, 0]


def test_stable_for_equal_keys():
    t = pa.table({"k": [2, 1, 2, 1, 2], "v": [0, 1, 2, 3, 4]})
    assert sort_table(t, [KeyPart("k")]).column("v").to_pylist() == [1, 3, 0, 2, 4]


def test_chunked_columns():
    t = pa.concat_tables([pa.table({"k": [3.0, NAN]}), pa.table({"k": [None, 1.0]})])
    assert t.column("k").num_chunks == 2
    assert _order(t, [KeyPart("k")]) == [2, 1, 3, 0]


@pytest.mark.parametrize("chunks", [[], [[b"a", None, b"ccc"]], [[b"a"], [None, b"ccc"]]])
def test_take_matches_arrow_for_any_chunking(chunks: list[list[Any]]):
    col = pa.chunked_array(chunks, type=pa.binary())
    order = pa.array([2, 0, 1] if len(col) else [], pa.uint64())
    taken = take_column(col, order)
    assert isinstance(taken, pa.Array)
    assert taken.to_pylist() == col.take(order).to_pylist()
    table = pa.table({"b": col, "n": pa.chunked_array([pa.array(range(len(col)))])})
    assert take_table(table, order).equals(table.take(order))
    assert take_column(col.combine_chunks(), order).equals(taken)


def test_empty_key_and_tiny_tables():
    t = pa.table({"k": [3, 1, 2]})
    assert _order(t, []) == [0, 1, 2]
    assert duplicate_key_mask(t, []).tolist() == [False, True, True]
    empty = t.slice(0, 0)
    assert _order(empty, [KeyPart("k")]) == []
    assert duplicate_key_mask(empty, [KeyPart("k")]).tolist() == []
    assert last_of_runs(duplicate_key_mask(empty, [KeyPart("k")])).tolist() == []
    assert sort_indices(t, [KeyPart("k")]).type == pa.uint64()


def test_bad_key_columns():
    t = pa.table({"k": pa.array([[1], [2]]), "x": [1, 2]})
    with pytest.raises(ValueError, match="cannot be a Spanner key"):
        sort_indices(t, [KeyPart("k")])
    with pytest.raises(ValueError, match="key column 'nope' is missing"):
        sort_indices(t, [KeyPart("nope")])


def test_duplicate_mask_null_nan_equal():
    t = pa.table(
        {
            "a": pa.array([None, None, NAN, NAN, 1.0, 1.0], type=pa.float64()),
            "b": pa.array([1, 1, 1, 2, None, None], type=pa.int64()),
        }
    )
    key = [KeyPart("a"), KeyPart("b")]
    assert duplicate_key_mask(t, key).tolist() == [False, True, False, False, False, True]


def test_the_last_row_of_each_key_is_kept():
    t = pa.table({"k": [2, 1, 2, 1, 3], "v": ["a", "b", "c", "d", "e"]})
    key = [KeyPart("k")]
    s = t.take(sort_indices(t, key))
    keep = last_of_runs(duplicate_key_mask(s, key))
    assert s.filter(pa.array(keep)).to_pydict() == {"k": [1, 2, 3], "v": ["d", "c", "e"]}


# ---------------------------------------------------------------------------------------------
# Reference comparator and Hypothesis comparison


def _ts_tuple(v: str) -> tuple[int, ...]:
    if v == COMMIT_TIMESTAMP:
        return (10_000,)  # after year 9999: the commit time is "now", later than any value
    date, time = v.rstrip("Z").split("T")
    hms, frac = time.split(".")
    return (*map(int, date.split("-")), *map(int, hms.split(":")), int(frac))


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _ref_value_cmp(spanner_type: str, a: Any, b: Any) -> int:
    """Spanner's ascending order for two Python values of one key column."""
    if a is None or b is None:
        return _cmp(a is not None, b is not None)  # NULL lowest
    if spanner_type in ("FLOAT64", "FLOAT32"):
        if math.isnan(a) or math.isnan(b):
            return _cmp(not math.isnan(a), not math.isnan(b))  # NaN lowest non-NULL
        return _cmp(a, b)  # Python: -0.0 == 0.0
    if spanner_type == "TIMESTAMP":
        return _cmp(_ts_tuple(a), _ts_tuple(b))
    # INT64, BOOL, NUMERIC (Decimal), STRING (code points), BYTES, DATE: Python order is right.
    return _cmp(a, b)


def _ref_order(rows: list[tuple[Any, ...]], types: list[str], key: list[KeyPart]) -> list[int]:
    def cmp_rows(i: int, j: int) -> int:
        for c, (t, part) in enumerate(zip(types, key)):
            r = _ref_value_cmp(t, rows[i][c], rows[j][c])
            if r:
                return -r if part.desc else r
        return 0

    return sorted(range(len(rows)), key=functools.cmp_to_key(cmp_rows))


def _ref_group(t: str, v: Any) -> Any:
    """A hashable stand-in equal exactly when Spanner considers two key values the same."""
    if v is None:
        return ("null",)
    if t in ("FLOAT64", "FLOAT32"):
        return ("nan",) if math.isnan(v) else ("num", v + 0.0)  # -0.0 + 0.0 == 0.0
    return ("v", v)


_MAX_NUMERIC = Decimal("99999999999999999999999999999.999999999")


def _timestamps() -> st.SearchStrategy[str]:
    canon = st.builds(
        # Built by hand: strftime("%Y") does not zero-pad years below 1000 on Linux.
        lambda d, ns: (
            f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:"
            f"{d.second:02d}.{ns:09d}Z"
        ),
        st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)),
        st.integers(0, 999_999_999),
    )
    few = st.sampled_from(
        [
            "2024-01-01T00:00:00.000000000Z",
            "2024-01-01T00:00:00.000000001Z",
            "0001-01-01T00:00:00.000000000Z",
            COMMIT_TIMESTAMP,
        ]
    )
    return st.one_of(few, canon)


# Each type: (Arrow type, values). A small pool next to the full range makes ties likely, so
# later key columns and duplicate detection get exercised.
_TYPES: dict[str, tuple[pa.DataType, Callable[[], st.SearchStrategy[Any]]]] = {
    "INT64": (
        pa.int64(),
        lambda: st.one_of(st.integers(-2, 2), st.integers(-(2**63), 2**63 - 1)),
    ),
    "FLOAT64": (
        pa.float64(),
        lambda: st.one_of(
            st.sampled_from([0.0, -0.0, NAN, INF, -INF, 1.5, -1.5]),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
    ),
    "FLOAT32": (
        pa.float32(),
        lambda: st.one_of(
            st.sampled_from([0.0, -0.0, NAN, INF, -INF, 1.5]),
            st.floats(width=32, allow_nan=True, allow_infinity=True),
        ),
    ),
    "BOOL": (pa.bool_(), lambda: st.booleans()),
    "NUMERIC": (
        pa.decimal128(38, 9),
        lambda: st.one_of(
            st.sampled_from([Decimal("0"), Decimal("-1.000000001"), Decimal("1")]),
            st.decimals(
                min_value=-_MAX_NUMERIC,
                max_value=_MAX_NUMERIC,
                places=9,
                allow_nan=False,
                allow_infinity=False,
            ).filter(lambda d: abs(d) <= _MAX_NUMERIC),  # hypothesis may round past the bound
        ),
    ),
    "STRING": (
        pa.string(),
        lambda: st.one_of(
            st.sampled_from(["", "a", "ab", "é", "\uffff", "\U0001f600"]),
            st.text(st.characters(blacklist_categories=("Cs",)), max_size=4),
        ),
    ),
    "BYTES": (
        pa.binary(),
        lambda: st.one_of(
            st.sampled_from([b"", b"\x00", b"\x7f", b"\x80", b"\xff"]), st.binary(max_size=4)
        ),
    ),
    "DATE": (
        pa.date32(),
        lambda: st.one_of(
            st.sampled_from([dt.date(1, 1, 1), dt.date(2000, 2, 29), dt.date(9999, 12, 31)]),
            st.dates(),
        ),
    ),
    "TIMESTAMP": (pa.string(), _timestamps),
}


@st.composite
def keyed_tables(draw: st.DrawFn) -> tuple[pa.Table, list[str], list[KeyPart], list[tuple]]:
    ncols = draw(st.integers(1, 4))
    types = [draw(st.sampled_from(sorted(_TYPES))) for _ in range(ncols)]
    key = [KeyPart(f"c{i}", desc=draw(st.booleans())) for i in range(ncols)]
    nrows = draw(st.integers(0, 40))
    columns: list[list[Any]] = []
    for t in types:
        nullable = draw(st.booleans())
        values = _TYPES[t][1]()
        cell = st.one_of(st.none(), values) if nullable else values
        columns.append(draw(st.lists(cell, min_size=nrows, max_size=nrows)))
    table = pa.table(
        {
            f"c{i}": pa.array(col, type=_TYPES[t][0])
            for i, (t, col) in enumerate(zip(types, columns))
        }
    )
    if nrows > 1 and draw(st.booleans()):  # multi-chunk columns, as after concat_tables
        cut = draw(st.integers(1, nrows - 1))
        table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    rows = list(zip(*columns)) if columns else []
    return table, types, key, rows


_SETTINGS = settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@_SETTINGS
@given(keyed_tables())
def test_sort_matches_reference(case: tuple[pa.Table, list[str], list[KeyPart], list[tuple]]):
    table, types, key, rows = case
    assert _order(table, key) == _ref_order(rows, types, key)


@_SETTINGS
@given(keyed_tables())
def test_duplicates_and_dedupe_match_reference(case):
    table, types, key, rows = case
    order = sort_indices(table, key)
    srt = table.take(order)
    ref = _ref_order(rows, types, key)
    groups = [tuple(_ref_group(t, rows[i][c]) for c, t in enumerate(types)) for i in ref]
    expected_dup = [k > 0 and groups[k] == groups[k - 1] for k in range(len(ref))]
    assert duplicate_key_mask(srt, key).tolist() == expected_dup

    # Upsert rule: per key, the row that came last in the input survives.
    last: dict[tuple, int] = {}
    for i in range(len(rows)):
        last[tuple(_ref_group(t, rows[i][c]) for c, t in enumerate(types))] = i
    orig = np.asarray(order.to_numpy())
    keep = last_of_runs(duplicate_key_mask(srt, key))
    assert sorted(orig[keep].tolist()) == sorted(last.values())


_INT64_EDGES = [0, -1, 1, 2**63 - 1, -(2**63), 2**31, -(2**31), 2**11, 2**22 - 1]


@_SETTINGS
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.tuples(
            st.lists(st.booleans(), min_size=k, max_size=k),
            st.lists(
                st.lists(
                    st.sampled_from(_INT64_EDGES)
                    | st.integers(-3, 3)
                    | st.integers(-(2**63), 2**63 - 1),
                    min_size=k,
                    max_size=k,
                ),
                max_size=60,
            ),
        )
    ),
    st.integers(0, 3),
)
def test_int64_keys_match_reference(case: tuple[list[bool], list[list[int]]], skip: int):
    """INT64 keys (the compiled radix sort's case): extremes, ties, DESC, sliced columns."""
    desc, rows = case
    key = [KeyPart(f"c{i}", desc=d) for i, d in enumerate(desc)]
    padded = rows[:1] * skip + rows  # sliced away: columns with an offset
    table = pa.table(
        {f"c{i}": pa.array([r[i] for r in padded], pa.int64()) for i in range(len(desc))}
    ).slice(min(skip, len(padded)))
    assert _order(table, key) == _ref_order(rows, ["INT64"] * len(desc), key)


def test_int64_keys_many_rows_all_digits():
    """Enough rows that every radix digit is sorted on (none is the same for all rows)."""
    rng = np.random.default_rng(3)
    n = 50_000
    a = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    b = rng.integers(0, 4, n, dtype=np.int64)  # many ties in the second column
    a[::7] = a[0]  # and in the first
    table = pa.table({"a": a, "b": b})
    key = [KeyPart("a"), KeyPart("b", desc=True)]
    expected = sorted(range(n), key=lambda i: (int(a[i]), -int(b[i]), i))
    assert _order(table, key) == expected


def _spread(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "full range, ties":
        a = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
        a[::7] = a[0]
        return a
    if kind == "shuffled ids":  # the top digits are the same for every row
        return rng.permutation(np.arange(1, n + 1, dtype=np.int64))
    if kind == "few values":  # only the lowest digit differs; big runs of equal keys
        return rng.integers(0, 1000, n, dtype=np.int64)
    if kind == "one big bucket":  # nearly every row in one bucket of the top digit
        a = rng.integers(0, 2**40, n, dtype=np.int64) + 2**62
        a[::100] = rng.integers(-(2**63), 2**63 - 1, len(a[::100]), dtype=np.int64)
        return a
    if kind == "small buckets, repeats":  # half in one bucket, the rest a few dozen a bucket
        pool = rng.integers(0, 2**55, 10_000, dtype=np.int64)
        a = pool[rng.integers(0, len(pool), n)]
        a[::2] = 0
        return a
    if kind == "around zero":
        return rng.integers(-5000, 5000, n, dtype=np.int64) * 2**50
    assert kind == "all equal"
    return np.full(n, -3, dtype=np.int64)


@pytest.mark.parametrize(
    "kind",
    [
        "full range, ties",
        "shuffled ids",
        "few values",
        "one big bucket",
        "small buckets, repeats",
        "around zero",
        "all equal",
    ],
)
@pytest.mark.parametrize("desc", [False, True])
def test_int64_key_many_rows(kind: str, desc: bool) -> None:
    """Over 65,536 rows (the compiled sort's bucket pass on the highest digit that differs,
    then each bucket on its own): the same stable order as sorting the values in Python."""
    rng = np.random.default_rng(len(kind))
    n = 150_000
    a = _spread(kind, n, rng)
    sign = -1 if desc else 1
    expected = sorted(range(n), key=lambda i: (sign * int(a[i]), i))
    assert _order(pa.table({"a": a}), [KeyPart("a", desc=desc)]) == expected


def test_int64_keys_many_rows_long_runs() -> None:
    """Two columns, the first with runs of equal values longer than the insertion sort takes,
    over 65,536 rows: every column sorted in turn."""
    rng = np.random.default_rng(11)
    n = 100_000
    a = rng.integers(0, 50, n, dtype=np.int64)
    b = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    b[::3] = b[1]
    expected = sorted(range(n), key=lambda i: (-int(a[i]), int(b[i]), i))
    table = pa.table({"a": a, "b": b})
    assert _order(table, [KeyPart("a", desc=True), KeyPart("b")]) == expected


@_SETTINGS
@given(
    st.lists(st.lists(st.binary(max_size=40), max_size=8), min_size=1, max_size=5),
    st.integers(0, 2),
    st.booleans(),
    st.data(),
)
def test_take_of_binary_chunks(
    chunks: list[list[bytes]], cut: int, large: bool, data: st.DataObject
) -> None:
    """The encoded rows' take (the compiled one when built): sliced chunks, both offset widths,
    any order with repeats."""
    typ = pa.large_binary() if large else pa.binary()
    arrays = [pa.array([b"pad"] * cut + c, typ).slice(cut) for c in chunks]
    col = pa.chunked_array(arrays, type=typ)
    n = len(col)
    order = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=20 if n else 0))
    taken = take_column(col, pa.array(order, pa.uint64()))
    assert taken.to_pylist() == [col[i].as_py() for i in order]
    with pytest.raises(IndexError):
        take_column(col, pa.array([n], pa.uint64()))


def test_sort_order_says_when_keys_are_known_distinct(sorter: str) -> None:
    """The compiled sort reports keys it saw to be all distinct (so the flush skips its
    duplicate search); a repeated key, a run of equal first keys too long to sort by
    insertion, or the pyarrow path say nothing is known."""
    from loader.sort import sort_order

    native = sorter == "native"
    key = [KeyPart("a"), KeyPart("b", desc=True)]
    order, distinct = sort_order(pa.table({"a": [3, 1, 2], "b": [1, 1, 1]}), key)
    assert order.to_pylist() == [1, 2, 0] and distinct is native
    order, distinct = sort_order(pa.table({"a": [3, 1, 3], "b": [1, 1, 2]}), key)
    assert order.to_pylist() == [1, 2, 0] and distinct is native
    order, distinct = sort_order(pa.table({"a": [3, 1, 3], "b": [1, 1, 1]}), key)
    assert order.to_pylist() == [1, 0, 2] and distinct is False
    three = [KeyPart("a"), KeyPart("b"), KeyPart("c")]
    table = pa.table({"a": [1, 1, 1], "b": [2, 2, 2], "c": [5, 4, 6]})
    assert sort_order(table, three) == (pa.array([1, 0, 2], pa.uint64()), native)
    table = pa.table({"a": [1, 1, 1], "b": [2, 2, 2], "c": [5, 4, 5]})
    assert sort_order(table, three)[1] is False
    long_run = pa.table({"a": [7] * 100, "b": list(range(100))})
    assert sort_order(long_run, key)[1] is False
    assert sort_order(pa.table({"a": [5, 5]}), key[:1])[1] is False
    assert sort_order(pa.table({"a": [5, 6]}), key[:1])[1] is native
    assert sort_order(pa.table({"a": [5], "b": [1]}), key)[1] is True


@pytest.mark.parametrize(
    "order",
    [
        [0, 0, 0, 0],  # the long row four times: more bytes than the whole column
        [0, 1, 1, 1],  # repeats that still fit
        [3, 2, 1, 0],
        [2, 0, 3],
        [0, 0, 3, 9],  # out of range after a repeat
    ],
)
def test_take_of_most_rows_with_repeats(order: list[int]) -> None:
    """Taking at least half the rows (the flush's case) sizes the result by the whole column;
    repeated indices that need more room than that are taken exactly all the same."""
    col = pa.chunked_array([pa.array([b"x" * 100, b""], pa.binary()), pa.array([b"y", b"zz"])])
    indices = pa.array(order, pa.uint64())
    if max(order) >= len(col):
        with pytest.raises(IndexError):
            take_column(col, indices)
        return
    assert take_column(col, indices).to_pylist() == [col[i].as_py() for i in order]


@pytest.mark.parametrize("run", [1, 2, 64, 65, 1000])
def test_int64_keys_runs_of_equal_first_keys(run: int):
    """Runs of equal first keys up to the compiled sort's insertion-sort limit and past it."""
    rng = np.random.default_rng(run)
    n = 3000
    a = (np.arange(n) // run)[rng.permutation(n)].astype(np.int64)
    b = rng.integers(-3, 3, n, dtype=np.int64)
    c = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    table = pa.table({"a": a, "b": b, "c": c})
    key = [KeyPart("a", desc=True), KeyPart("b"), KeyPart("c", desc=True)]
    expected = sorted(range(n), key=lambda i: (-int(a[i]), int(b[i]), -int(c[i]), i))
    assert _order(table, key) == expected


def test_one_array_takes_a_single_chunk_as_it_is() -> None:
    from loader.types import one_array

    a = pa.array([b"ab", None, b"c"], pa.binary())
    single = one_array(pa.chunked_array([a]))
    assert single.buffers()[2].address == a.buffers()[2].address  # no copy
    assert one_array(a) is a
    two = one_array(pa.chunked_array([a, a.slice(1)]))
    assert two.to_pylist() == [b"ab", None, b"c", None, b"c"]
    empty = one_array(pa.chunked_array([], pa.int64()))
    assert isinstance(empty, pa.Array) and len(empty) == 0 and empty.type == pa.int64()
