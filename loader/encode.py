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
when it is built. BYTES and ARRAY columns reach it as cells the numpy path encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from . import native as _native
from .native import NATIVE_ENV
from .types import SpannerType, arrow_type, one_array, value_offsets

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

# numpy's dtype-level typing does not follow uint64/int64 through shifts and mixed arithmetic;
# these aliases name the intended dtype for the reader.
U64 = npt.NDArray[Any]
I64 = npt.NDArray[Any]
_IntCol = Union[int, I64]
_UIntCol = Union[int, U64]

_INT32_MAX = 2**31 - 1
# (1 << 8k) - 1: keeps the low k bytes of a packed word.
_BYTE_MASK = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
# The 3 ASCII digits of 0..999 packed little-endian ("007" -> 0x373030).
_DIGITS3 = np.array(
    [sum((0x30 + int(c)) << (8 * i) for i, c in enumerate(f"{v:03d}")) for v in range(1000)],
    dtype=np.uint64,
)
# Trailing zero digits of 0..999 written with 3 digits (0 -> 3).
_TRAILING_ZEROS3 = np.array(
    [len(f"{v:03d}") - len(f"{v:03d}".rstrip("0")) for v in range(1000)], dtype=np.int64
)
_B64_ALPHABET = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
)

# Value field tags (field << 3 | wire type).
_TAG_NULL = 0x08  # null_value, varint
_TAG_NUMBER = 0x11  # number_value, 64-bit
_TAG_STRING = 0x1A  # string_value, length-delimited
_TAG_BOOL = 0x20  # bool_value, varint
_TAG_LIST = 0x32  # list_value, length-delimited
_TAG_LIST_ITEM = 0x0A  # ListValue.values / a Write's table
_TAG_WRITE_VALUES = 0x1A  # Write.values
_TAG_WRITE_COLUMNS = 0x12  # Write.columns
# A NULL cell: 0a 02 08 00 (ListValue item of length 2 holding null_value = 0).
_NULL_CELL = 0x0008020A


# ---------------------------------------------------------------------------------------------
# Building blocks: a row's bytes are a sequence of pieces, each the same kind for every row.


@dataclass
class _Small:
    """Up to 8 bytes per row, packed little-endian in a uint64 (bytes above ``k`` are zero)."""

    enc: _UIntCol
    k: _IntCol
    kmax: int


@dataclass
class _Blob:
    """Arbitrary bytes per row from a binary Arrow array (NULL rows contribute nothing)."""

    arr: pa.Array


_Piece = Union[_Small, _Blob]


def _varint_len(v: int) -> int:
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def varint_bytes(v: int) -> bytes:
    """A non-negative int as a protobuf varint (for framing length-delimited fields)."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(v: I64) -> _Small:
    """Varint encodings of non-negative lengths, as a packed piece."""
    if len(v) == 0:
        return _Small(0, 0, 0)
    vmax, vmin = int(v.max()), int(v.min())
    kmax = _varint_len(vmax)
    if kmax > 8:  # a length >= 2**56: impossible for anything that fits in memory
        raise ValueError(f"length {vmax} too large to encode")
    u = v.astype(np.uint64)
    if kmax == 1:
        return _Small(u, 1, 1)
    enc = u & 0x7F
    if _varint_len(vmin) == kmax:  # every row needs the same number of bytes: no masks
        for j in range(1, kmax):
            enc |= ((u >> (7 * j)) & 0x7F) << (8 * j)
            enc |= 0x80 << (8 * (j - 1))
        return _Small(enc, kmax, kmax)
    k = np.ones(len(v), dtype=np.int64)
    for j in range(1, kmax):
        more = v >= (1 << (7 * j))
        enc |= np.where(more, (((u >> (7 * j)) & 0x7F) << (8 * j)) | (0x80 << (8 * (j - 1))), 0)
        k += more
    return _Small(enc, k, kmax)


def _small(enc: U64, k: I64) -> _Small:
    """A piece with per-row sizes; its width is what this batch needs, not the worst case."""
    return _Small(enc, k, int(k.max()) if len(k) else 0)


def _words_to_binary(lanes: list[U64], k: _IntCol, n: int) -> pa.Array:
    """A binary array whose element i is the first k[i] bytes of the row's lanes (8 bytes each)."""
    if isinstance(k, int) and len(lanes) == 1 and k in (1, 2, 4, 8):
        # A whole machine word narrowed keeps exactly its low k bytes, already contiguous.
        data = lanes[0].astype(f"<u{k}")
        offsets = np.arange(0, (n + 1) * k, k, dtype=np.int32)
        return pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
    width = 8 * len(lanes)
    matrix = np.empty((n, len(lanes)), dtype="<u8")
    for j, lane in enumerate(lanes):
        matrix[:, j] = lane
    if isinstance(k, int):
        data = np.ascontiguousarray(matrix.view(np.uint8)[:, :k]).reshape(-1)
        offsets = np.arange(0, (n + 1) * k, k, dtype=np.int32)
        return pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
    # Variable lengths: describe each row as a binary_view and let Arrow's cast compact them.
    # A view is <length u32><first 4 bytes> then, up to 12 bytes, <the other 8 bytes> inline
    # (zero padded), else <buffer index u32 = 0><offset u32> into the lane matrix.
    if n * width > _INT32_MAX:
        raise ValueError("too many rows for one encode call")
    first = matrix[:, 0]
    second = matrix[:, 1] if len(lanes) > 1 else np.uint64(0)
    kk = np.asarray(k, dtype=np.uint64)
    views = np.empty((n, 2), dtype="<u8")
    views[:, 0] = kk | (first << np.uint64(32))
    inline = (first >> np.uint64(32)) | (second << np.uint64(32))
    if width > 12:
        offsets64 = np.arange(0, n * width, width, dtype=np.uint64) << np.uint64(32)
        views[:, 1] = np.where(kk > 12, offsets64, inline)
    else:
        views[:, 1] = inline
    arr = pa.Array.from_buffers(
        pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(matrix)]
    )
    return arr.cast(pa.binary())


#: Widest run of small pieces packed together (bytes); longer runs are split.
_WORD_BYTES = 24


def _place(lanes: list[Any], piece: _Small, pos: _IntCol) -> None:
    """OR the piece's bytes into the lanes at byte position ``pos`` (per row or for all)."""
    enc = np.uint64(piece.enc) if isinstance(piece.enc, int) else piece.enc
    if isinstance(pos, int):
        j, r = divmod(pos, 8)
        lanes[j] = lanes[j] | (enc << np.uint64(8 * r))
        if r and r + piece.kmax > 8:
            lanes[j + 1] = lanes[j + 1] | (enc >> np.uint64(64 - 8 * r))
        return
    bits = (pos * 8).astype(np.uint64)
    lo = int(pos.min()) // 8
    hi = (int(pos.max()) + piece.kmax - 1) // 8
    for j in range(lo, min(hi, len(lanes) - 1) + 1):
        # rel = bit position of the piece relative to lane j, wrapping to a huge uint64 when
        # negative; numpy shifts by >= 64 give 0, so each term is zero unless the piece (or its
        # spill-over from lane j - 1) lands in lane j. At rel == 0 both terms are enc: no harm.
        rel = bits - np.uint64(64 * j)
        lanes[j] = lanes[j] | (enc << rel) | (enc >> (np.uint64(0) - rel))


def _pack(pieces: Sequence[_Piece], n: int) -> list[pa.Array]:
    """Merge each run of small pieces into packed rows of up to _WORD_BYTES, then arrays."""
    out: list[pa.Array] = []
    run: list[_Small] = []

    def flush() -> None:
        if not run:
            return
        width = sum(p.kmax for p in run)
        lanes: list[Any] = [np.zeros(n, dtype=np.uint64) for _ in range((width + 7) // 8)]
        pos: _IntCol = 0
        for p in run:
            _place(lanes, p, pos)
            pos = pos + p.k
        out.append(_words_to_binary(lanes, pos, n))
        run.clear()

    used = 0
    for p in pieces:
        if isinstance(p, _Blob):
            flush()
            used = 0
            out.append(p.arr)
        elif p.kmax:
            if used + p.kmax > _WORD_BYTES:
                flush()
                used = 0
            run.append(p)
            used += p.kmax
    flush()
    return out


def _join(parts: Sequence[pa.Array], total: int) -> pa.Array:
    """Concatenate the parts row by row (NULL parts count as empty)."""
    if total > _INT32_MAX:
        parts = [p.cast(pa.large_binary()) for p in parts]
        sep = pa.scalar(b"", pa.large_binary())
    else:
        sep = pa.scalar(b"", pa.binary())
    if len(parts) == 1 and parts[0].null_count == 0:
        return parts[0]
    if any(p.null_count for p in parts):
        return pc.binary_join_element_wise(
            *parts, sep, null_handling="replace", null_replacement=""
        )
    return pc.binary_join_element_wise(*parts, sep)


# ---------------------------------------------------------------------------------------------
# Arrow access helpers.


def _validity(arr: pa.Array) -> npt.NDArray[np.bool_] | None:
    """True for non-NULL rows, or None when the array has no NULLs."""
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)


def _fixed_values(arr: pa.Array, dtype: str) -> npt.NDArray[Any]:
    """The data buffer of a fixed-width array as numpy (NULL slots hold arbitrary values)."""
    width = np.dtype(dtype).itemsize
    buf = arr.buffers()[1]
    return np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * width)


def _binary_lengths(arr: pa.Array, valid: npt.NDArray[np.bool_] | None) -> I64:
    """Byte length of each element, 0 for NULLs."""
    lengths = np.diff(value_offsets(arr)).astype(np.int64)
    if valid is not None:
        lengths[~valid] = 0
    return lengths


def _payload(arr: pa.Array, valid: npt.NDArray[np.bool_] | None) -> tuple[_Blob, I64]:
    """A binary payload piece and its lengths (0 for NULLs).

    The join is faster without NULLs, so the validity bitmap is dropped when the NULL slots
    are empty (the usual case); the cell header already encodes NULL.
    """
    arr = _as_binary(arr)
    lengths = _binary_lengths(arr, None)
    if valid is not None:
        if lengths[~valid].any():
            arr = pc.if_else(pa.array(valid), arr, pa.scalar(b"", arr.type))
        buffers = arr.buffers()
        arr = pa.Array.from_buffers(arr.type, len(arr), [None, *buffers[1:]], offset=arr.offset)
        lengths[~valid] = 0
    return _Blob(arr), lengths


def _as_binary(arr: pa.Array) -> pa.Array:
    if pa.types.is_string(arr.type):
        return arr.view(pa.binary())
    if pa.types.is_large_string(arr.type):
        return arr.view(pa.large_binary())
    return arr


# ---------------------------------------------------------------------------------------------
# Cells: the pieces of "0a <len> <Value>" for every row of one column, and their byte sizes.


def _length_delimited_cell(
    value_tag: int, payload: Sequence[_Piece], plen: I64, valid: npt.NDArray[np.bool_] | None
) -> tuple[list[_Piece], I64]:
    """Cells whose Value is one length-delimited field (string_value or list_value).

    ``plen`` is the payload size per row and must be 0 for NULL rows: a NULL then comes out as
    ``0a 02 08 00`` just by writing the null_value tag instead of ``value_tag``.
    """
    p = _varint(plen)
    vlen = 1 + p.k + plen
    v = _varint(vlen)
    tag: _Small
    if valid is None:
        tag = _Small(value_tag, 1, 1)
    else:
        tag = _Small(np.where(valid, np.uint64(value_tag), np.uint64(_TAG_NULL)), 1, 1)
    pieces: list[_Piece] = [_Small(_TAG_LIST_ITEM, 1, 1), v, tag, p, *payload]
    return pieces, 1 + v.k + vlen


def _string_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    valid = _validity(arr)
    blob, lengths = _payload(arr, valid)
    return _length_delimited_cell(_TAG_STRING, [blob], lengths, valid)


def _int64_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    return _string_cells(pc.cast(arr, pa.string()))


def _bool_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    n = len(arr)
    valid = _validity(arr)
    bits = np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=np.uint64)
    enc = (bits << 24) | 0x20020A  # 0a 02 20 <0|1>
    if valid is not None:
        enc = np.where(valid, enc, np.uint64(_NULL_CELL))
    return [_Small(enc, 4, 4)], np.full(n, 4, dtype=np.int64)


# number_value: 0a 09 11 <8 bytes>; the non-finite values go as string_value.
_FLOAT_HEAD = 0x11090A
_FLOAT_SPECIAL = {
    "nan": b"\x0a\x05\x1a\x03NaN",
    "inf": b"\x0a\x0a\x1a\x08Infinity",
    "-inf": b"\x0a\x0b\x1a\x09-Infinity",
    "null": b"\x0a\x02\x08\x00",
}


def _float_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    n = len(arr)
    values = _fixed_values(arr, "<f4" if pa.types.is_float32(arr.type) else "<f8")
    values = values.astype("<f8")  # FLOAT32 widens exactly, as the client's float() does
    valid = _validity(arr)
    finite = np.isfinite(values)
    if valid is None and finite.all():
        return [_Small(_FLOAT_HEAD, 3, 3), _Small(values.view("<u8"), 8, 8)], np.full(
            n, 11, dtype=np.int64
        )
    head = np.full(n, _FLOAT_HEAD, dtype=np.uint64)
    body = values.view("<u8").copy()
    k1 = np.full(n, 3, dtype=np.int64)
    k2 = np.full(n, 8, dtype=np.int64)
    cases = [
        ("nan", np.isnan(values)),
        ("inf", values == np.inf),
        ("-inf", values == -np.inf),
    ]
    if valid is not None:
        cases.append(("null", ~valid))  # last: a NULL slot may hold any bits
    for name, mask in cases:
        text = _FLOAT_SPECIAL[name]
        first, rest = text[:8], text[8:]
        head[mask] = int.from_bytes(first, "little")
        body[mask] = int.from_bytes(rest, "little")
        k1[mask] = len(first)
        k2[mask] = len(rest)
    return [_small(head, k1), _small(body, k2)], k1 + k2


def _format_days(days: I64) -> tuple[U64, U64]:
    """Packed cells ``0a 0c 1a 0a YYYY`` and ``-MM-DD`` of days since 1970-01-01."""
    # Proleptic Gregorian civil date (H. Hinnant's days_from_civil inverse).
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    head = 0x0A1A0C0A | (_DIGITS3[year // 10] << 32) | ((year % 10 + 0x30).astype(np.uint64) << 56)
    # "0MM" >> 8 = "MM"
    md = 0x2D | ((_DIGITS3[month] >> 8) << 8) | (0x2D << 24) | ((_DIGITS3[day] >> 8) << 32)
    return head, md


def _date_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    n = len(arr)
    valid = _validity(arr)
    days = _fixed_values(arr, "<i4").astype(np.int64)
    if valid is not None:
        days = np.where(valid, days, 0)
    first, last = (int(days.min()), int(days.max())) if n else (0, 0)
    if first < -719162 or last > 2932896:
        raise ValueError("DATE outside 0001-01-01 .. 9999-12-31")
    if last - first < n // 2:
        # Fewer distinct days than rows (the usual case): format each day once, then look up.
        head_t, md_t = _format_days(np.arange(first, last + 1, dtype=np.int64))
        idx = days - first
        head, md = head_t[idx], md_t[idx]
    else:
        head, md = _format_days(days)
    if valid is None:
        return [_Small(head, 8, 8), _Small(md, 6, 6)], np.full(n, 14, dtype=np.int64)
    head = np.where(valid, head, np.uint64(_NULL_CELL))
    k1 = np.where(valid, 8, 4)
    k2 = np.where(valid, 6, 0)
    md = np.where(valid, md, np.uint64(0))
    return [_small(head, k1), _small(md, k2)], k1 + k2


_E9 = 10**9


def _numeric_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    """decimal128(38, 9) as plain decimal text, built from the 128-bit integers."""
    n = len(arr)
    valid = _validity(arr)
    raw = np.frombuffer(arr.buffers()[1], dtype="<u8", count=2 * n, offset=arr.offset * 16).reshape(
        n, 2
    )
    lo = raw[:, 0].astype(np.uint64)
    hi = raw[:, 1].astype(np.uint64)
    if valid is not None:
        lo = np.where(valid, lo, np.uint64(0))
        hi = np.where(valid, hi, np.uint64(0))
    neg = (hi >> 63).astype(bool)
    if neg.any():  # magnitude of the two's complement value
        lo_m = np.where(neg, ~lo + np.uint64(1), lo)
        hi = np.where(neg, ~hi + (lo == 0).astype(np.uint64), hi)
        lo = lo_m
    mask = None if valid is None else ~valid
    if not hi.any():
        int_part = lo // np.uint64(_E9)
        frac = (lo - int_part * np.uint64(_E9)).astype(np.int64)
        int_text = pc.cast(pa.array(int_part, mask=mask), pa.string())
    else:
        frac, int_text = _numeric_wide(lo, hi, mask)
    int_blob, int_len = _payload(int_text, valid)
    payload: list[_Piece] = [int_blob]
    plen = int_len
    if neg.any():
        minus = np.where(neg, np.uint64(0x2D), np.uint64(0))
        payload.insert(0, _Small(minus, neg.astype(np.int64), 1))
        plen = plen + neg
    if frac.any():
        # Fraction ".ddddddddd" without trailing zeros (integers get none at all).
        g1 = frac // 1_000_000
        rest = frac - g1 * 1_000_000
        g2 = rest // 1000
        g3 = rest - g2 * 1000
        zeros = _TRAILING_ZEROS3[g3] + (g3 == 0) * (
            _TRAILING_ZEROS3[g2] + (g2 == 0) * _TRAILING_ZEROS3[g1]
        )
        digits = 9 - zeros
        frac_len = digits + (digits > 0)
        d3 = _DIGITS3[g3]
        text_a = 0x2E | (_DIGITS3[g1] << 8) | (_DIGITS3[g2] << 32) | ((d3 & 0xFF) << 56)
        ka = np.minimum(frac_len, 8)
        kb = frac_len - ka
        payload += [_small(text_a & _BYTE_MASK[ka], ka), _small((d3 >> 8) & _BYTE_MASK[kb], kb)]
        plen = plen + frac_len
    return _length_delimited_cell(_TAG_STRING, payload, plen, valid)


def _numeric_wide(lo: U64, hi: U64, mask: npt.NDArray[np.bool_] | None) -> tuple[I64, pa.Array]:
    """Fraction and integer-part text of magnitudes >= 2**64 (long division in 32-bit limbs)."""
    m32 = np.uint64(0xFFFFFFFF)
    limbs = [hi >> 32, hi & m32, lo >> 32, lo & m32]

    def div_e9(ls: list[U64]) -> tuple[list[U64], U64]:
        r = np.zeros_like(ls[0])
        q = []
        for limb in ls:
            cur = (r << 32) | limb
            q.append(cur // np.uint64(_E9))
            r = cur % np.uint64(_E9)
        return q, r

    q, frac = div_e9(limbs)
    q, c1 = div_e9(q)
    q, c2 = div_e9(q)
    high = (q[2] << 32) | q[3]  # < 10**11: the upper limbs are 0
    low = c2 * np.uint64(_E9) + c1
    low_text = pc.cast(pa.array(low, mask=mask), pa.string())
    big = high > 0
    if not big.any():
        return frac.astype(np.int64), low_text
    joined = pc.binary_join_element_wise(
        pc.cast(pa.array(high), pa.string()), pc.utf8_lpad(low_text, 18, "0"), ""
    )
    return frac.astype(np.int64), pc.if_else(pa.array(big), joined, low_text)


def _base64(arr: pa.Array, valid: npt.NDArray[np.bool_] | None) -> tuple[pa.Array, I64]:
    """Standard base64 (with '=' padding) of every element, and the encoded lengths."""
    n = len(arr)
    lengths = _binary_lengths(arr, valid)
    pad = (-lengths) % 3
    # Pad each value with zero bytes to a multiple of 3, so all groups of 3 line up.
    zeros = _words_to_binary([np.zeros(n, dtype=np.uint64)], pad, n)
    padded = pc.binary_join_element_wise(
        arr, zeros, pa.scalar(b"", arr.type), null_handling="replace", null_replacement=""
    )
    plen = lengths + pad
    total = int(plen.sum())
    offsets = padded.buffers()[1]
    start = int(np.frombuffer(offsets, dtype="<i4", count=1, offset=padded.offset * 4)[0])
    data = np.frombuffer(padded.buffers()[2], dtype=np.uint8, count=total, offset=start)
    groups = data.reshape(-1, 3)
    b0, b1, b2 = groups[:, 0], groups[:, 1], groups[:, 2]
    out = np.empty((len(groups), 4), dtype=np.uint8)
    out[:, 0] = _B64_ALPHABET[b0 >> 2]
    out[:, 1] = _B64_ALPHABET[((b0 & 0x03) << 4) | (b1 >> 4)]
    out[:, 2] = _B64_ALPHABET[((b1 & 0x0F) << 2) | (b2 >> 6)]
    out[:, 3] = _B64_ALPHABET[b2 & 0x3F]
    flat = out.reshape(-1)
    elen = plen // 3 * 4
    ends = np.cumsum(elen)
    flat[ends[pad >= 1] - 1] = ord("=")
    flat[ends[pad == 2] - 2] = ord("=")
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = ends
    if offsets[-1] > _INT32_MAX:
        typ, offs = pa.large_binary(), offsets
    else:
        typ, offs = pa.binary(), offsets.astype(np.int32)
    b64 = pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offs), pa.py_buffer(flat)])
    return b64, elen


def _bytes_cells(arr: pa.Array) -> tuple[list[_Piece], I64]:
    valid = _validity(arr)
    b64, elen = _base64(arr, valid)
    return _length_delimited_cell(_TAG_STRING, [_Blob(b64)], elen, valid)


def _array_cells(arr: pa.Array, t: SpannerType) -> tuple[list[_Piece], I64]:
    assert t.element is not None
    valid = _validity(arr)
    n = len(arr)
    offsets = np.frombuffer(
        arr.buffers()[1], dtype="<i4", count=n + 1, offset=arr.offset * 4
    ).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    child = arr.values.slice(first, last - first)
    pieces, child_len = _cells(child, t.element)
    total = int(child_len.sum())
    cells = _join(_pack(pieces, len(child)), total)
    rel = offsets - first
    groups = pa.ListArray.from_arrays(
        pa.array(rel, type=pa.int64() if total > _INT32_MAX else pa.int32()),
        cells,
        mask=None if valid is None else pa.array(~valid),
    )
    content = pc.binary_join(groups, pa.scalar(b"", cells.type))
    cum = np.zeros(len(child_len) + 1, dtype=np.int64)
    np.cumsum(child_len, out=cum[1:])
    clen = cum[rel[1:]] - cum[rel[:-1]]
    if valid is not None:
        clen[~valid] = 0
    return _length_delimited_cell(_TAG_LIST, [_Blob(content)], clen, valid)


def _cells(arr: pa.Array, t: SpannerType) -> tuple[list[_Piece], I64]:
    """The pieces of each row's ``0a <len> <Value>`` for one column, and their sizes."""
    code = t.code
    if code in ("STRING", "JSON", "TIMESTAMP"):
        return _string_cells(arr)
    if code == "INT64":
        return _int64_cells(arr)
    if code in ("FLOAT64", "FLOAT32"):
        return _float_cells(arr)
    if code == "BOOL":
        return _bool_cells(arr)
    if code == "NUMERIC":
        return _numeric_cells(arr)
    if code == "DATE":
        return _date_cells(arr)
    if code == "BYTES":
        return _bytes_cells(arr)
    if code == "ARRAY":
        return _array_cells(arr, t)
    raise ValueError(f"cannot encode Spanner type {t}")


def _column(col: pa.Array | pa.ChunkedArray, t: SpannerType) -> pa.Array:
    col = one_array(col)
    want = arrow_type(t)
    if col.type != want:
        # Not the loader's own representation: convert (e.g. a test passing int32).
        col = col.cast(want)
    return col


# ---------------------------------------------------------------------------------------------
# The compiled encoder: the same bytes in one pass over the Arrow buffers.

# Spanner types -> loader/_native.c's column kind names (BYTES and ARRAY: CELLS, see below).
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
}


def native_available() -> bool:
    """Whether the compiled encoder is built and not switched off (``NATIVE_ENV=0``)."""
    return _native.available()


def _native_column(col: pa.Array, t: SpannerType) -> tuple[Any, ...]:
    """The descriptor loader/_native.c reads a column from: its kind and Arrow buffers."""
    name = _NATIVE_KINDS.get(t.code)
    if name is None:
        # BYTES and ARRAY: their cells come from the numpy path, copied in as they are.
        pieces, sizes = _cells(col, t)
        col = _join(_pack(pieces, len(col)), int(sizes.sum()))
        name = "CELLS"
    kind = _native.kind(name)
    buffers = col.buffers()
    validity = buffers[0] if col.null_count else None
    if name in ("CELLS", "STRING"):
        col = _as_binary(col)
        large = pa.types.is_large_binary(col.type)
        return (kind, validity, buffers[2], buffers[1], col.offset, 8 if large else 4)
    return (kind, validity, buffers[1], None, col.offset, 0)


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
