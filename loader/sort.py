"""Sort a buffer of typed rows into Spanner's primary-key order, and find duplicate keys.

Spanner stores rows in key order; committing contiguous key ranges keeps each commit on few
splits (SPANNER_FACTS.md "Bulk-loading guidance"). The order implemented here is the one
Spanner uses for keys (SPANNER_FACTS.md "Key order"), checked against the emulator:

* NULL sorts first in an ASC column and last in a DESC one (a DESC column is the ASC order
  reversed, NULL included).
* FLOAT64 / FLOAT32: NULL < NaN < -inf < ... < +inf. ``-0.0`` and ``0.0`` are the *same key*
  (inserting both gives ALREADY_EXISTS), and so are two NaNs and two NULLs.
* STRING by code point (= UTF-8 byte order), BYTES byte-wise, BOOL false < true, DATE and
  TIMESTAMP chronologically. TIMESTAMP is the loader's fixed-width canonical string, so byte
  order is time order; the literal ``spanner.commit_timestamp()`` sorts after every timestamp,
  which matches where the commit time will land (Spanner refuses future values in
  commit-timestamp columns).

Everything is columnar: one ``pyarrow.compute.sort_indices`` over the key columns plus a few
helper columns, then ``take``. pyarrow already compares strings and binaries byte-wise and
floats with ``-0.0 == 0.0``; what it cannot express is Spanner's NULL and NaN placement per
column (it has a single null placement for all keys before pyarrow 25, and puts NaN next to
NULL), so each key column that holds NULLs or NaNs is preceded by a small "class" column
(NULL < NaN < number) sorted in the column's direction. The sort is stable: rows with equal
keys keep their input order, which is what makes "keep the last duplicate" well defined.

That multi-column sort is the path without the compiled part (loader/_native.c). With it,
keys made only of INT64 columns without NULLs (the usual ids) take its radix sort of the
columns themselves, and any other key (STRING / BYTES parts, DESC parts, NULLs, NaN, mixed
composites) is written as one byte string per row whose byte order is the key order
(:func:`encode_keys`: a NULL / NaN class byte where needed, order-preserving fixed-width
numbers, escaped and terminated strings, DESC parts inverted) and those bytes are sorted
stably (:func:`sort_binary`). Equal keys get equal bytes, so that sort also says whether every
key is distinct. Both are the same stable order as the multi-column sort (tests/test_sort.py,
tests/test_key_bytes.py, and tests/test_key_order_emulator.py against the emulator), and
several times faster (benchmarks/README.md, "Key sort").

PostgreSQL-dialect databases need no order of their own for primary keys, though PostgreSQL
puts NULL last in an ASC column: there a key column is NOT NULL (a NULL is refused), the
emulator refuses DESC in such a key, and the remaining order (NaN first among floats
included) is GoogleSQL's (tests/test_key_order_emulator.py reads it back from a
PostgreSQL-dialect emulator database).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import native
from .schema import KeyPart
from .types import one_array

__all__ = [
    "encode_keys",
    "sort_binary",
    "sort_indices",
    "sort_order",
    "sort_table",
    "take_column",
    "take_table",
    "duplicate_key_mask",
    "last_of_runs",
]


def _check_key_type(name: str, t: pa.DataType) -> None:
    ok = (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )
    if not ok:
        # Spanner has no ARRAY / STRUCT keys; reaching this is a converter bug, not bad input.
        raise ValueError(f"key column {name!r} has Arrow type {t}, which cannot be a Spanner key")


def _key_column(table: pa.Table, part: KeyPart) -> pa.ChunkedArray:
    try:
        col = table.column(part.name)
    except KeyError:
        raise ValueError(
            f"key column {part.name!r} is missing from the table (columns: "
            + ", ".join(table.column_names)
            + ")"
        ) from None
    _check_key_type(part.name, col.type)
    return col


def _class_column(col: pa.ChunkedArray) -> Optional[pa.ChunkedArray]:
    """0 for NULL, 1 for NaN, 2 for a number; None when the column needs no such helper."""
    has_null = col.null_count > 0
    if pa.types.is_floating(col.type):
        is_nan = pc.fill_null(pc.is_nan(col), False)
        has_nan = bool(pc.any(is_nan).as_py())
        if not (has_null or has_nan):
            return None
        cls = pc.if_else(is_nan, pa.scalar(1, pa.int8()), pa.scalar(2, pa.int8()))
        if has_null:
            cls = pc.if_else(pc.is_valid(col), cls, pa.scalar(0, pa.int8()))
        return cls
    if not has_null:
        return None
    return pc.is_valid(col)  # False (NULL) < True


def sort_indices(table: pa.Table, key: Sequence[KeyPart]) -> pa.UInt64Array:
    """Indices that put ``table`` into Spanner's key order for ``key``; stable.

    ``table.take(sort_indices(table, key))`` is the sorted table. An empty key (Spanner's
    ``PRIMARY KEY ()``) leaves the order unchanged.
    """
    return sort_order(table, key)[0]


def sort_order(table: pa.Table, key: Sequence[KeyPart]) -> tuple[pa.UInt64Array, bool]:
    """:func:`sort_indices`, and True when the keys are known to be distinct (the compiled sort
    saw no two rows with the same key); False when they may repeat, to be found with
    :func:`duplicate_key_mask`."""
    n = table.num_rows
    if n <= 1 or not key:
        return pa.array(np.arange(n, dtype=np.uint64), type=pa.uint64()), n <= 1
    if native.available():
        fast = _sort_int64_keys(table, key)
        if fast is None:
            fast = _sort_encoded_keys(table, key)
        if fast is not None:
            return fast
    columns: list[pa.ChunkedArray] = []
    names: list[str] = []
    sort_keys: list[tuple[str, str]] = []
    for i, part in enumerate(key):
        col = _key_column(table, part)
        order = "descending" if part.desc else "ascending"
        cls = _class_column(col)
        if cls is not None:
            # Decides NULL / NaN / number before the value itself is compared, so pyarrow's
            # own placement of NULL and NaN never matters.
            names.append(f"{i}.class")
            columns.append(cls)
            sort_keys.append((names[-1], order))
        names.append(f"{i}.value")
        columns.append(col)
        sort_keys.append((names[-1], order))
    helper = pa.Table.from_arrays(columns, names=names)
    result = pc.sort_indices(helper, sort_keys=sort_keys)
    assert isinstance(result, pa.UInt64Array)
    return result, False


def _sort_int64_keys(
    table: pa.Table, key: Sequence[KeyPart]
) -> Optional[tuple[pa.UInt64Array, bool]]:
    """The compiled radix sort (loader/_native.c) for keys of INT64 columns without NULLs (the
    usual key: ids), the same order as the general path, and whether it saw every key distinct;
    None for any other key."""
    parts = []
    for part in key:
        col = _key_column(table, part)
        if col.type != pa.int64() or col.null_count:
            return None
        arr = _as_array(col)
        parts.append((arr.buffers()[1], arr.offset, int(part.desc)))
    buf, distinct = native.module().sort_int64_keys(parts, table.num_rows, pa.allocate_buffer)
    result = pa.Array.from_buffers(pa.uint64(), table.num_rows, [None, buf])
    assert isinstance(result, pa.UInt64Array)
    return result, bool(distinct)


def _key_descriptor(col: pa.ChunkedArray) -> Optional[tuple[Any, ...]]:
    """loader/_native.c's descriptor of a key column for encode_keys; None for an Arrow type
    it does not encode (the loader's converters never make one)."""
    arr = _as_array(col)
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        kind, width = "STRING", 4
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        kind, width = "STRING", 8
    else:
        kind, width = _FIXED_KINDS.get(t, ""), 0
        if not kind and pa.types.is_decimal128(t):
            kind = "NUMERIC"  # one scale per column: the unscaled integers order the values
        if not kind:
            return None
    buffers = arr.buffers()
    validity = buffers[0] if arr.null_count else None
    if width:
        return (native.kind(kind), validity, buffers[2], buffers[1], arr.offset, width)
    return (native.kind(kind), validity, buffers[1], None, arr.offset, 0)


_FIXED_KINDS = {
    pa.int64(): "INT64",
    pa.float64(): "FLOAT64",
    pa.float32(): "FLOAT32",
    pa.bool_(): "BOOL",
    pa.date32(): "DATE",
}


def encode_keys(table: pa.Table, key: Sequence[KeyPart]) -> Optional[pa.Array]:
    """Each row's whole key as one byte string whose byte order is Spanner's key order, by
    loader/_native.c's encode_keys (see its comment for the bytes); equal keys get equal bytes
    (NULL = NULL, NaN = NaN, -0.0 = 0.0). None when the compiled part is not available or a key
    column has an Arrow type it does not encode (the multi-column sort then runs).

    The bytes compare only with bytes of the same call: a column's NULL/NaN class byte is
    written only when that column holds a NULL or NaN in ``table``, so ``''`` encoded alone
    sorts before a NULL encoded in another call. Keys of separate tables (e.g. sorted runs
    being merged) are encoded together, in one call, before they are compared."""
    if not native.available():
        return None
    descriptors = []
    for part in key:
        descriptor = _key_descriptor(_key_column(table, part))
        if descriptor is None:
            return None
        descriptors.append(descriptor)
    flags = bytes(int(part.desc) for part in key)
    n = table.num_rows
    offsets, data, width = native.module().encode_keys(descriptors, flags, n, pa.allocate_buffer)
    typ = pa.large_binary() if width == 8 else pa.binary()
    return pa.Array.from_buffers(typ, n, [None, offsets, data])


def sort_binary(keys: pa.Array) -> tuple[pa.UInt64Array, bool]:
    """Stable indices that put a binary array without NULLs in byte order (a prefix first), and
    whether every value is distinct: the compiled sort when available, else pyarrow's."""
    n = len(keys)
    if keys.null_count:
        raise ValueError("sort_binary sorts values without NULLs")
    if native.available():
        large = pa.types.is_large_binary(keys.type) or pa.types.is_large_string(keys.type)
        width = 8 if large else 4
        buffers = keys.buffers()
        descriptor = (native.kind("CELLS"), None, buffers[2], buffers[1], keys.offset, width)
        buf, distinct = native.module().sort_binary(descriptor, n, pa.allocate_buffer)
        result = pa.Array.from_buffers(pa.uint64(), n, [None, buf])
        assert isinstance(result, pa.UInt64Array)
        return result, bool(distinct)
    order = pc.sort_indices(keys)
    assert isinstance(order, pa.UInt64Array)
    return order, False


def _sort_encoded_keys(
    table: pa.Table, key: Sequence[KeyPart]
) -> Optional[tuple[pa.UInt64Array, bool]]:
    """Any key the compiled part encodes: its bytes (:func:`encode_keys`) sorted as bytes."""
    keys = encode_keys(table, key)
    if keys is None:
        return None
    return sort_binary(keys)


def sort_table(table: pa.Table, key: Sequence[KeyPart]) -> pa.Table:
    """``table`` in Spanner's key order for ``key`` (stable: equal keys keep input order)."""
    return take_table(table, sort_indices(table, key))


def take_column(col: Union[pa.Array, pa.ChunkedArray], order: pa.Array) -> pa.Array:
    """``col.take(order)`` as one array, taken from the column's single chunk when it has one.

    Arrow's take from a ChunkedArray resolves every index to its chunk and returns chunks that
    then need combining, a second copy of the rows and twice the fresh memory
    (benchmarks/README.md, "Hot-path steps"). A column of several chunks (binary past 2 GiB,
    which cannot be one chunk) takes the chunked path. A binary column without NULLs (the
    encoded rows) is taken by the compiled take when it is built, from all its chunks at once.
    """
    if native.available() and col.null_count == 0 and _is_binary(col.type):
        return _take_binary_native(col, order)
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0).take(order)
        return col.take(order).combine_chunks()
    return col.take(order)


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _take_binary_native(col: Union[pa.Array, pa.ChunkedArray], order: pa.Array) -> pa.Array:
    """The compiled take (loader/_native.c) of a binary column without NULLs, straight from
    its chunks: one copy of the rows, where combining the chunks first would make two."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    descriptors = []
    for chunk in chunks:
        buffers = chunk.buffers()
        width = 8 if pa.types.is_large_binary(chunk.type) else 4
        descriptors.append((0, None, buffers[2], buffers[1], chunk.offset, width, len(chunk)))
    indices = order.cast(pa.uint64()) if order.type != pa.uint64() else order
    if indices.null_count:
        raise ValueError("take indices must not be NULL")
    index_buffer = indices.buffers()[1].slice(8 * indices.offset, 8 * len(indices))
    offsets, data, width = native.module().take_binary(
        descriptors, index_buffer, len(indices), pa.allocate_buffer, native.threads()
    )
    typ = pa.large_binary() if width == 8 else pa.binary()
    return pa.Array.from_buffers(typ, len(indices), [None, offsets, data])


def take_table(table: pa.Table, order: pa.Array) -> pa.Table:
    """``table.take(order)``, column by column with :func:`take_column`."""
    return pa.Table.from_arrays([take_column(c, order) for c in table.columns], schema=table.schema)


def _as_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    return one_array(col)


def _to_bool_numpy(arr: Union[pa.Array, pa.ChunkedArray]) -> np.ndarray:
    arr = one_array(arr)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def duplicate_key_mask(sorted_table: pa.Table, key: Sequence[KeyPart]) -> np.ndarray:
    """Boolean numpy mask: True where a row's key equals the previous row's key.

    ``sorted_table`` must be in key order (see :func:`sort_table`), so every run of equal keys
    is contiguous. Key equality is Spanner's: NULL equals NULL, NaN equals NaN, ``-0.0``
    equals ``0.0``. The first row is never a duplicate. With an empty key every row after the
    first is a duplicate (such a table holds at most one row).
    """
    n = sorted_table.num_rows
    mask = np.zeros(n, dtype=bool)
    if n <= 1:
        return mask
    same = np.ones(n - 1, dtype=bool)
    for part in key:
        col = _as_array(_key_column(sorted_table, part))
        cur, prev = col.slice(1), col.slice(0, n - 1)
        eq = pc.fill_null(pc.equal(cur, prev), False)
        if col.null_count:
            eq = pc.or_(eq, pc.and_(pc.is_null(cur), pc.is_null(prev)))
        if pa.types.is_floating(col.type):
            nan_cur = pc.fill_null(pc.is_nan(cur), False)
            nan_prev = pc.fill_null(pc.is_nan(prev), False)
            eq = pc.or_(eq, pc.and_(nan_cur, nan_prev))
        same &= _to_bool_numpy(eq)
    mask[1:] = same
    return mask


def last_of_runs(dup: np.ndarray) -> np.ndarray:
    """Given :func:`duplicate_key_mask` of rows sorted stably by key, the rows to keep so that
    the LAST row of each run of equal keys (the last in input order) survives: the upsert rule
    for a key repeated within one buffer, as if each row had been committed on its own."""
    keep = np.ones(len(dup), dtype=bool)
    keep[:-1] = ~dup[1:]  # a row survives unless the next row continues its run
    return keep
