"""Encode typed Arrow columns straight into Spanner ``Mutation`` wire bytes, column by column.

google-cloud-spanner builds one ``google.protobuf.Value`` per cell in Python
(``_helpers._make_list_value_pbs``), which manages ~40k rows/s. A bulk load needs millions, so
this module writes the protobuf wire format itself from the Arrow buffers, with numpy and
pyarrow.compute kernels only: no Python code runs per row or per cell.

Wire format (google/protobuf/struct.proto, google/spanner/v1/mutation.proto)::

    Mutation  { insert=1 | update=2 | insert_or_update=3 | replace=4 | delete=5 }
    Write     { table=1 string; columns=2 repeated string; values=3 repeated ListValue }
    Delete    { table=1 string; key_set=2 KeySet }      KeySet { keys=1 repeated ListValue }
    ListValue { values=1 repeated Value }
    Value     { null_value=1 enum | number_value=2 double | string_value=3 | bool_value=4
                | list_value=6 ListValue }

A row is one ``Write.values`` entry: ``1a <len> <ListValue>``, and a ListValue is the row's cells
in column order, each ``0a <len> <Value>``. Each Value is what the client sends for the type:

===========  ================================================================================
INT64        string_value, decimal text
FLOAT64/32   number_value (8-byte double; FLOAT32 widened exactly); NaN, +inf, -inf as the
             string_value "NaN", "Infinity", "-Infinity"
BOOL         bool_value (``20 00`` / ``20 01``: a oneof member is serialised even when false)
NUMERIC      string_value, plain decimal text (never exponent notation)
STRING/JSON  string_value, the text as is
TIMESTAMP    string_value, the loader's canonical text passed through (or the commit
             timestamp literal)
BYTES        string_value, standard base64 with padding
DATE         string_value ``YYYY-MM-DD`` (4-digit year, so year 1 is ``0001-01-01``)
ARRAY<T>     list_value of the elements, each encoded as T (NULL elements as null_value);
             an empty array is an empty list_value (``32 00``)
NULL         null_value NULL_VALUE, serialised explicitly (``08 00``), as the client does
===========  ================================================================================

Where our text differs from the client's (same value, Spanner parses both):

* NUMERIC: the client sends ``str(Decimal)``, whose form depends on the Decimal's exponent
  (``Decimal("1.500000000")`` from Arrow gives ``"1.500000000"``, ``Decimal("1E+2")`` gives
  ``"1E+2"``). We send the shortest plain form: no trailing fraction zeros, no ``.`` for
  integers (``"1.5"``, ``"100"``, ``"-0.000000001"``). pyarrow's decimal-to-string cast is not
  used: it is slow and writes ``"0E-9"`` / ``"1.00E-7"`` for small values.
* TIMESTAMP: the client formats a ``datetime`` with 6 fraction digits (``...00.000000Z``) or a
  ``DatetimeWithNanoseconds`` with as many as it needs; we pass the canonical 9-digit text
  through. The instant is the same.
* BYTES: the client expects the caller to pass base64 already; we base64 the raw bytes here.

Every other value is byte-identical to the client's encoding (tests/test_encode.py checks both).

How: each column becomes a few "pieces" per row: small ones (tags, varint lengths, fixed
values such as doubles, dates, the digits of a fraction) are packed into uint64 lanes with
numpy, then compacted into a binary array (through Arrow's binary_view cast); variable ones
(string payloads, INT64 text from Arrow's cast, base64 text) are Arrow arrays as they are.
One ``binary_join_element_wise`` then concatenates all pieces of a row. Element ``i`` of
:func:`encode_rows` is row ``i``'s bytes; its length is the row's share of the commit size,
which the batcher uses as its byte cost. :func:`write_mutation` wraps a slice of rows into a
Mutation by copying their contiguous data once. Its speed against the client's encoder is
measured by benchmarks/run.py (benchmarks/README.md).

The compiled encoder (loader/_native.c, optional, see loader/native.py) writes the same bytes
in one pass over the Arrow buffers, into a buffer sized by each type's longest cell, and is used
when it is built. ARRAY columns reach it as whole cells (``list_cells``, or the numpy path
for an element type it lacks).

Layout: the building blocks (pieces, varints, joins) in ``pieces``, each type's cells in
``cells``, the compiled encoder's hand-over and the public API here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from .. import native as _native
from ..native import NATIVE_ENV
from ..types import SpannerType, encoded_as, one_array
from .cells import _cells, _column, _string_cells
from .cells import _int64_cells as _int64_cells
from .pieces import (
    _TAG_LIST_ITEM,
    _TAG_WRITE_COLUMNS,
    _TAG_WRITE_VALUES,
    _as_binary,
    _join,
    _pack,
    _Piece,
    _Small,
    _varint,
    varint_bytes,
)

__all__ = [
    "WRITE_OPS",
    "NATIVE_ENV",
    "encode_rows",
    "native_available",
    "varint_bytes",
    "write_mutation",
]

#: Mutation field number of each write operation.
WRITE_OPS = {"insert": 1, "update": 2, "insert_or_update": 3, "replace": 4}


# ---------------------------------------------------------------------------------------------
# The compiled encoder: the same bytes in one pass over the Arrow buffers.

# Spanner types -> loader/_native.c's column kind names (ARRAY: CELLS, see below).
_NATIVE_KINDS = {
    "STRING": "STRING",
    "JSON": "STRING",
    "TIMESTAMP": "STRING",
    "INT64": "INT64",
    "FLOAT64": "FLOAT64",
    "BOOL": "BOOL",
    "NUMERIC": "NUMERIC",
    "DATE": "DATE",
    "FLOAT32": "FLOAT32",
    "BYTES": "BYTES",
}


def native_available() -> bool:
    """Whether the compiled encoder is built and not switched off (``NATIVE_ENV=0``)."""
    return _native.available()


def _native_column(col: pa.Array, t: SpannerType) -> tuple[Any, ...]:
    """The descriptor loader/_native.c reads a column from: its kind and Arrow buffers."""
    name = _NATIVE_KINDS.get(encoded_as(t))
    if name is None:
        # ARRAY: whole cells, copied in as they are: framed by list_cells around the elements'
        # cells, or from the numpy path for an element type the compiled encoder lacks.
        if t.element is not None and encoded_as(t.element) in _NATIVE_KINDS:
            col = _native_list_cells(col, t)
        else:
            col = _numpy_cells(col, t)
        name = "CELLS"
    kind = _native.kind(name)
    buffers = col.buffers()
    validity = buffers[0] if col.null_count else None
    if name in ("CELLS", "STRING", "BYTES"):
        col = _as_binary(col)
        large = pa.types.is_large_binary(col.type)
        return (kind, validity, buffers[2], buffers[1], col.offset, 8 if large else 4)
    return (kind, validity, buffers[1], None, col.offset, 0)


def _numpy_cells(col: pa.Array, t: SpannerType) -> pa.Array:
    """Each row's whole cell from the numpy path, as a binary array."""
    pieces, sizes = _cells(col, t)
    return _join(_pack(pieces, len(col)), int(sizes.sum()))


def _native_list_cells(col: pa.Array, t: SpannerType) -> pa.Array:
    """Each row's whole ARRAY cell (loader/_native.c ``list_cells``), as a binary array."""
    assert t.element is not None
    n = len(col)
    offsets = np.frombuffer(col.buffers()[1], dtype="<i4", count=n + 1, offset=col.offset * 4)
    first, last = int(offsets[0]), int(offsets[-1])
    child = col.values.slice(first, last - first)
    rel = offsets.astype(np.int64) - first
    valid = None
    if col.null_count:
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)
    out, data, width = _native.module().list_cells(
        _native_column(child, t.element), len(child), rel, valid, n, pa.allocate_buffer
    )
    typ = pa.large_binary() if width == 8 else pa.binary()
    return pa.Array.from_buffers(typ, n, [None, out, data])


def _encode_native(cols: Sequence[pa.Array], types: Sequence[SpannerType], tag: int) -> pa.Array:
    n = len(cols[0])
    descriptors = [_native_column(c, t) for c, t in zip(cols, types)]
    offsets, data, width = _native.module().encode_rows(descriptors, n, tag, pa.allocate_buffer)
    typ = pa.large_binary() if width == 8 else pa.binary()
    return pa.Array.from_buffers(typ, n, [None, offsets, data])


# ---------------------------------------------------------------------------------------------
# Public API.


def encode_rows(
    columns: Sequence[pa.Array | pa.ChunkedArray],
    types: Sequence[SpannerType],
    *,
    int_texts: Optional[Sequence[Optional[pa.Array]]] = None,
    native: Optional[bool] = None,
) -> pa.Array:
    """Encode rows of typed columns into their protobuf wire bytes, columnar.

    ``columns[j]`` holds column j in the Arrow type :func:`loader.types.arrow_type` gives for
    ``types[j]`` (other types are cast to it first). Element i of the result (a ``binary``
    array, ``large_binary`` past 2 GiB) is row i as one ``Write.values`` entry:
    ``1a <varint len> <ListValue>``. Element lengths are the rows' byte costs.

    ``int_texts[j]``, when given for an INT64 column, is its values' decimal text exactly as
    ``str(int)`` writes them (NULL where the column is NULL; the converter keeps the source
    text when it qualifies, see ``ConvertedBlock.int_texts``), used instead of turning the
    integers into text again (the numpy path only: the compiled encoder writes digits faster
    than it could copy them).

    ``native`` picks the compiled encoder (True) or the numpy path (False); by default the
    compiled one when :func:`native_available`. Both write the same bytes.
    """
    if len(columns) != len(types):
        raise ValueError(f"{len(columns)} columns but {len(types)} types")
    cols = [_column(c, t) for c, t in zip(columns, types)]
    n = len(cols[0]) if cols else 0
    if any(len(c) != n for c in cols):
        raise ValueError("columns differ in length: " + ", ".join(str(len(c)) for c in cols))
    texts = list(int_texts) if int_texts is not None else [None] * len(cols)
    if len(texts) != len(cols):
        raise ValueError(f"{len(cols)} columns but {len(texts)} int_texts")
    for col, t, text in zip(cols, types, texts):
        mismatch = text is not None and (len(text) != n or text.null_count != col.null_count)
        if t.code == "INT64" and mismatch:
            raise ValueError("an INT64 column's text does not match the column")
    tag = _TAG_WRITE_VALUES
    if n == 0:
        return pa.array([], pa.binary())
    if _native.use(native):
        return _encode_native(cols, types, tag)
    pieces: list[_Piece] = []
    row_len = np.zeros(n, dtype=np.int64)
    for col, t, text in zip(cols, types, texts):
        if text is not None and t.code == "INT64":
            cell_pieces, cell_len = _string_cells(text)
        else:
            cell_pieces, cell_len = _cells(col, t)
        pieces += cell_pieces
        row_len += cell_len
    head = _varint(row_len)
    pieces = [_Small(tag, 1, 1), head, *pieces]
    total = int((1 + head.k + row_len).sum())
    return _join(_pack(pieces, n), total)


def _data_slice(rows: pa.Array | pa.ChunkedArray) -> memoryview:
    """The contiguous bytes of all elements of a (possibly sliced) binary array."""
    rows = one_array(rows)
    if rows.null_count:
        raise ValueError("encoded rows must not be NULL")
    n = len(rows)
    if n == 0:
        return memoryview(b"")
    width = 8 if pa.types.is_large_binary(rows.type) else 4
    offsets = np.frombuffer(
        rows.buffers()[1], dtype=f"<i{width}", count=n + 1, offset=rows.offset * width
    )
    start, end = int(offsets[0]), int(offsets[-1])
    return memoryview(rows.buffers()[2])[start:end]


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + varint_bytes(len(payload)) + payload


def write_mutation(
    op: str,
    table: str,
    column_names: Sequence[str],
    rows: pa.Array | pa.ChunkedArray,
) -> bytes:
    """Wire bytes of one ``Mutation`` writing ``rows`` (a slice of :func:`encode_rows`'s result).

    ``op`` is one of :data:`WRITE_OPS` (the Mutation field names). The rows' bytes are copied
    once, as one contiguous block.
    """
    try:
        field_number = WRITE_OPS[op]
    except KeyError:
        raise ValueError(f"unknown write op {op!r}; one of {', '.join(WRITE_OPS)}") from None
    head = _field(_TAG_LIST_ITEM, table.encode()) + b"".join(
        _field(_TAG_WRITE_COLUMNS, c.encode()) for c in column_names
    )
    data = _data_slice(rows)
    size = len(head) + len(data)
    return b"".join([bytes([field_number << 3 | 2]), varint_bytes(size), head, data])
