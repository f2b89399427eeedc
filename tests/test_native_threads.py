"""The compiled kernels that split one call over threads (loader/_native.c, run_parts): the
same bytes on any number of threads as on one, and the same errors.

The threads run only past a minimum part size; ``min_part`` sets it low here so that small
drawn inputs are cut into many parts. scripts/native_check.sh runs this file on the sanitizer
build too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import native_parts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader import native as loader_native

native: Any = loader_native._module


@pytest.fixture(autouse=True, scope="module")
def built() -> Iterator[str]:
    """Skipped without the extension (failed where SPANNER_LOADER_REQUIRE_NATIVE=1)."""
    yield from native_parts("native")


def _descriptors(col: pa.ChunkedArray) -> list[tuple[Any, ...]]:
    out = []
    for chunk in col.chunks:
        buffers = chunk.buffers()
        width = 8 if pa.types.is_large_binary(chunk.type) else 4
        out.append((0, None, buffers[2], buffers[1], chunk.offset, width, len(chunk)))
    return out


def _take(col: pa.ChunkedArray, order: list[int], threads: int, min_part: int) -> bytes:
    """take_binary's result as bytes: the width, the m + 1 offsets and the data they reach."""
    indices = pa.array(order, pa.uint64()).buffers()[1]
    offsets, data, width = native.take_binary(
        _descriptors(col), indices, len(order), pa.allocate_buffer, threads, min_part
    )
    ends = np.frombuffer(offsets, np.int64 if width == 8 else np.int32, len(order) + 1)
    taken = pa.Array.from_buffers(
        pa.large_binary() if width == 8 else pa.binary(), len(order), [None, offsets, data]
    )
    assert taken.to_pylist() == [col[i].as_py() for i in order]
    return bytes([width]) + ends.tobytes() + bytes(memoryview(data)[: int(ends[-1])])


_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(
    st.lists(st.lists(st.binary(max_size=40), max_size=12), min_size=1, max_size=5),
    st.integers(0, 2),
    st.booleans(),
    st.integers(2, 9),
    st.integers(1, 4),
    st.data(),
)
def test_take_on_threads_is_byte_equal_to_one_thread(
    chunks: list[list[bytes]], cut: int, large: bool, threads: int, min_part: int, data: Any
) -> None:
    """Sliced chunks, both offset widths, any order: a permutation (the flush's), repeats, a
    few rows; rows shorter than a wide copy meet at the parts' edges."""
    typ = pa.large_binary() if large else pa.binary()
    col = pa.chunked_array([pa.array([b"pad"] * cut + c, typ).slice(cut) for c in chunks], typ)
    n = len(col)
    index = st.integers(0, max(n - 1, 0))
    permutation = st.permutations(list(range(n)))
    order = data.draw(st.one_of(permutation, st.lists(index, max_size=40 if n else 0)))
    one = _take(col, order, 1, min_part)
    assert _take(col, order, threads, min_part) == one


@pytest.mark.parametrize("threads", [2, 3])
def test_take_out_of_range_on_threads_names_the_first_bad_index(threads: int) -> None:
    col = pa.chunked_array([pa.array([b"a", b"bb", b"ccc", b"dddd"], pa.binary())])
    order = [0, 1, 2, 3, 3, 9, 1, 7, 2]
    for t in (1, threads):
        with pytest.raises(IndexError, match="index 5 out of range"):
            _take(col, order, t, 1)


def test_take_of_a_flush_sized_column_on_threads() -> None:
    """Past the default part size (what a load's flush takes), in several chunks."""
    rng = np.random.default_rng(5)
    n = 100_000
    lengths = rng.integers(0, 120, n)
    blob = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8).tobytes()
    ends = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    whole = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(ends), pa.py_buffer(blob)])
    col = pa.chunked_array([whole.slice(0, 30_000), whole.slice(30_000, 1), whole.slice(30_001)])
    order = rng.permutation(n).tolist()
    indices = pa.array(order, pa.uint64()).buffers()[1]
    results = []
    for threads in (1, 2, 4):
        offsets, data, width = native.take_binary(
            _descriptors(col), indices, n, pa.allocate_buffer, threads
        )
        results.append(pa.Array.from_buffers(pa.binary(), n, [None, offsets, data]))
    assert results[0].equals(whole.take(pa.array(order)))
    assert all(r.equals(results[0]) for r in results[1:])


def test_threads_follow_arrows_cpu_pool_within_spread_only() -> None:
    """One thread outside spread(); Arrow's pool size within it (a table's flushes)."""
    before = pa.cpu_count()
    try:
        pa.set_cpu_count(3)
        assert loader_native.threads() == 1
        with loader_native.spread():
            assert loader_native.threads() == 3
            pa.set_cpu_count(1)
            assert loader_native.threads() == 1
        pa.set_cpu_count(3)
        assert loader_native.threads() == 1
    finally:
        pa.set_cpu_count(before)
