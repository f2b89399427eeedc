"""The building blocks of encoded rows: packed small pieces (tags, varints, fixed values) and
binary blobs, merged and joined row by row; the Value tags; Arrow buffer access."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..types import value_offsets

# numpy's dtype-level typing does not follow uint64/int64 through shifts and mixed arithmetic;
# these aliases name the intended dtype for the reader.
U64 = npt.NDArray[Any]
I64 = npt.NDArray[Any]
_IntCol = Union[int, I64]
_UIntCol = Union[int, U64]

_INT32_MAX = 2**31 - 1

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
