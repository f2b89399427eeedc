"""Cells: the pieces of ``0a <len> <Value>`` for every row of one column, per Spanner type."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..types import SpannerType, arrow_type, civil_from_days, encoded_as, one_array
from .pieces import (
    _INT32_MAX,
    _NULL_CELL,
    _TAG_LIST,
    _TAG_LIST_ITEM,
    _TAG_NULL,
    _TAG_STRING,
    I64,
    U64,
    _binary_lengths,
    _Blob,
    _fixed_values,
    _join,
    _pack,
    _payload,
    _Piece,
    _Small,
    _small,
    _validity,
    _varint,
    _words_to_binary,
)

# (1 << 8k) - 1: keeps the low k bytes of a packed word.
_BYTE_MASK = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_V = np.arange(1000, dtype=np.uint64)
# The 3 ASCII digits of 0..999 packed little-endian ("007" -> 0x373030).
_DIGITS3 = (
    (_V // 100 + 0x30) | (_V // 10 % 10 + 0x30) << np.uint64(8) | (_V % 10 + 0x30) << np.uint64(16)
)
# Trailing zero digits of 0..999 written with 3 digits (0 -> 3).
_TRAILING_ZEROS3 = ((_V % 10 == 0).astype(np.int64) + (_V % 100 == 0)) + (_V == 0)
_B64_ALPHABET = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
)


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
    year, month, day = civil_from_days(days)
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
    code = encoded_as(t)
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
