"""Key bytes: every key as one byte string in Spanner's key order (loader/_native.c encode_keys)
and the stable byte sort (sort_binary), held equal to the reference order of tests/test_sort.py
and to Python's own ``sorted`` of bytes.

The reference comparator is the one tests/test_sort.py checks the multi-column pyarrow sort
with; both sorts must agree with it, so they agree with each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import native_parts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sort import _ref_group, _ref_order, keyed_tables

from loader import native
from loader.schema import KeyPart
from loader.sort import encode_keys, sort_binary, sort_indices, sort_order

_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    # the fixtures only switch the compiled part on or off, the same for every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(autouse=True)
def compiled() -> Iterator[str]:
    """The key bytes are the compiled part's; without it there is nothing to test here."""
    yield from native_parts("native")


@pytest.fixture(params=["pyarrow", "native"])
def byte_sort(request: pytest.FixtureRequest) -> Iterator[str]:
    """sort_binary with the compiled sort and with its pyarrow fallback."""
    yield from native_parts(request.param)


def _groups(rows: list[tuple[Any, ...]], types: list[str]) -> list[tuple[Any, ...]]:
    return [tuple(_ref_group(t, v) for t, v in zip(types, row)) for row in rows]


@_SETTINGS
@given(keyed_tables())
def test_key_bytes_order_and_equality_are_spanners(case: Any) -> None:
    """Mixed keys with NULLs, NaN, -0.0, DESC parts, empty strings, prefixes, 0x00 bytes and
    non-ASCII text: the bytes sorted by pyarrow's single-column byte sort and by the compiled
    one give the reference order, and two rows have the same bytes exactly when Spanner sees
    the same key."""
    table, types, key, rows = case
    keys = encode_keys(table, key)
    assert keys is not None and len(keys) == len(rows)
    expected = _ref_order(rows, types, key)
    assert pc.sort_indices(keys).to_pylist() == expected
    order, distinct = sort_binary(keys)
    assert order.to_pylist() == expected
    values = keys.to_pylist()
    groups = _groups(rows, types)
    for i in range(len(rows)):
        for j in range(i):
            assert (values[i] == values[j]) == (groups[i] == groups[j])
    assert distinct == (len(set(groups)) == len(groups))
    assert sort_order(table, key) == (order, distinct) or _int64_only(table, key)


def _int64_only(table: pa.Table, key: list[KeyPart]) -> bool:
    """INT64 keys without NULLs take the INT64 radix sort, which may not know distinctness."""
    return all(
        table.column(p.name).type == pa.int64() and not table.column(p.name).null_count for p in key
    )


_PREFIXES = ["", "\x00", "\x00\x00", "a", "a\x00", "a\x00\x00", "a\x00b", "a\x01", "ab", "b"]


@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])
def test_prefixes_and_zero_bytes(typ: pa.DataType, desc: bool) -> None:
    """A prefix sorts before what it prefixes, also when the rest begins with 0x00, in a key
    whose next part would decide otherwise (the next part's bytes follow the terminator)."""
    values = [v.encode() if "binary" in str(typ) else v for v in _PREFIXES]
    n = len(values)
    shuffled = [values[i] for i in np.random.default_rng(1).permutation(n)]
    table = pa.table(
        {"s": pa.array(shuffled + [None], typ), "i": pa.array(list(range(n, 0, -1)) + [0])}
    )
    key = [KeyPart("s", desc=desc), KeyPart("i")]
    got = [table.column("s")[i].as_py() for i in sort_indices(table, key).to_pylist()]
    expected = sorted(values, reverse=desc)
    assert got == ([None, *expected] if not desc else [*expected, None])


@_SETTINGS
@given(
    st.lists(st.binary(max_size=20) | st.sampled_from([b"", b"\x00", b"\x00\x00", b"\xff"])),
    st.integers(0, 3),
    st.booleans(),
)
def test_byte_sort_is_a_stable_bytewise_sort(
    byte_sort: str, values: list[bytes], skip: int, large: bool
) -> None:
    """Any bytes, not only key bytes (so prefixes of one another and trailing zeros too):
    Python's order of bytes, ties in input order; sliced arrays and both offset widths."""
    typ = pa.large_binary() if large else pa.binary()
    arr = pa.array([b"pad"] * skip + values, typ).slice(skip)
    order, distinct = sort_binary(arr)
    assert order.to_pylist() == sorted(range(len(values)), key=lambda i: (values[i], i))
    if byte_sort == "native":
        assert distinct == (len(set(values)) == len(values))
    else:
        assert distinct is False


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()])
def test_byte_sort_of_strings_and_nulls_refused(typ: pa.DataType, byte_sort: str) -> None:
    values = ["b", "", "ab", "a", "é", "a"]
    order, _ = sort_binary(pa.array(values, typ))
    assert order.to_pylist() == sorted(range(len(values)), key=lambda i: (values[i], i))
    with pytest.raises(ValueError, match="without NULLs"):
        sort_binary(pa.array(["a", None], typ))


def _check_many(values: list[bytes]) -> None:
    order, distinct = sort_binary(pa.array(values, pa.binary()))
    assert order.to_pylist() == sorted(range(len(values)), key=lambda i: (values[i], i))
    assert distinct == (len(set(values)) == len(values))


@pytest.mark.parametrize(
    "kind", ["random", "long shared prefixes", "runs of repeats", "every length", "all equal"]
)
def test_byte_sort_many_rows(kind: str) -> None:
    """Past the radix sort's bucket pass (65,536 rows), with long shared prefixes (hundreds of
    words deep), many equal rows, and rows ending at every byte of a word."""
    rng = np.random.default_rng(len(kind))
    n = 70_000
    if kind == "random":
        values = [rng.bytes(int(k)) for k in rng.integers(0, 24, n)]
    elif kind == "long shared prefixes":
        stem = b"p" * 1000
        values = [stem + rng.bytes(int(k)) for k in rng.integers(0, 3, n)]
        values[::5] = [stem[: int(k)] for k in rng.integers(990, 1001, len(values[::5]))]
    elif kind == "runs of repeats":
        pool = [rng.bytes(int(k)) for k in rng.integers(0, 20, 300)]
        values = [pool[int(i)] for i in rng.integers(0, len(pool), n)]
    elif kind == "every length":
        values = [b"\x00" * int(k) for k in rng.integers(0, 40, n)]
    else:
        values = [b"same"] * n
    _check_many(values)


def test_wide_key_many_rows_matches_the_multi_column_sort() -> None:
    """The wide table's key (Region STRING, AccountId INT64 DESC), with NULLs added and
    repeats, over the bucket pass's threshold: the same order as the pyarrow multi-column
    sort, row for row."""
    rng = np.random.default_rng(5)
    n = 100_000
    regions = np.array(["eu-west", "us-east", "apac", "ÖSTERN", "sa", "za-1", "Ω", "me", ""])
    region = pa.array(regions[rng.integers(0, len(regions), n)], mask=rng.random(n) < 0.01)
    account = pa.array(rng.integers(-500, 500, n) * 2**40, mask=rng.random(n) < 0.01)
    table = pa.table({"Region": region, "AccountId": account})
    key = [KeyPart("Region"), KeyPart("AccountId", desc=True)]
    order, distinct = sort_order(table, key)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.NATIVE_ENV, "0")
        expected = sort_indices(table, key)
    assert order.equals(expected) and distinct is False


def test_key_types_not_encoded_take_the_multi_column_sort() -> None:
    """An Arrow type the converters never make for a key (int32 here) is not encoded; the
    multi-column sort orders it."""
    table = pa.table({"k": pa.array([3, None, 1], pa.int32())})
    assert encode_keys(table, [KeyPart("k")]) is None
    assert sort_indices(table, [KeyPart("k")]).to_pylist() == [1, 2, 0]


def test_bad_descriptors_raise() -> None:
    m = native.module()
    arr = pa.array([1, 2], pa.int64())
    col = (native.kind("INT64"), None, arr.buffers()[1], None, 0, 0)
    with pytest.raises(ValueError, match="1 flags for 2 key columns"):
        m.encode_keys([col, col], b"\x00", 2, pa.allocate_buffer)
    with pytest.raises(ValueError, match="data buffer holds 16 bytes"):
        m.encode_keys([col], b"\x00", 3, pa.allocate_buffer)
    strings = pa.array(["a", None])
    b = strings.buffers()
    with pytest.raises(ValueError, match="without NULLs"):
        m.sort_binary((native.kind("STRING"), b[0], b[2], b[1], 0, 4), 2, pa.allocate_buffer)
    with pytest.raises(ValueError, match="without NULLs"):
        m.sort_binary(col, 2, pa.allocate_buffer)
