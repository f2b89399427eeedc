"""STRING (length in characters) and BYTES (base64 or hex, decoded column-wise)."""

from __future__ import annotations

import binascii
import re
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..types import SpannerType
from .common import (
    _Errors,
    _max_value_bytes,
    _np_bool,
    _null_out,
    _show,
)
from .options import MAX_CELL_BYTES, MAX_STRING_CHARS, ConvertOptions


def _convert_string(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    limit = t.length if t.length is not None else MAX_STRING_CHARS
    if _max_value_bytes(arr) <= limit:
        return arr, {}  # no more characters than bytes
    lengths = pc.utf8_length(arr)
    if (pc.max(lengths).as_py() or 0) <= limit:
        return arr, {}
    over = _np_bool(pc.greater(lengths, limit))
    rows = np.flatnonzero(over)
    errors = {int(i): f"{t} too long: {lengths[int(i)].as_py()} characters" for i in rows}
    if t.length is None:
        errors = {i: r + f" (limit {MAX_STRING_CHARS:,})" for i, r in errors.items()}
    return _null_out(arr, rows), errors


_B64_RE = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_B64_LUT = np.zeros(256, dtype=np.uint32)
for _i, _c in enumerate(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
    _B64_LUT[_c] = _i


def _binary_from(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    ).cast(pa.binary())


def _flat_bytes(valid: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(byte lengths, concatenated bytes) of a string array without NULLs."""
    valid = valid.cast(pa.large_string())
    offsets_buf, data_buf = valid.buffers()[1:3]
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[
        valid.offset : valid.offset + len(valid) + 1
    ]
    if data_buf is None or len(offsets) == 0:
        return np.zeros(len(valid), dtype=np.int64), np.zeros(0, dtype=np.uint8)
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]
    return np.diff(offsets), data


def _decode_base64(valid: pa.Array) -> pa.Array:
    """Decode padded base64 values (already validated) column-wise with numpy."""
    in_len, data = _flat_bytes(valid)
    if len(data) == 0:
        return pa.array([b""] * len(valid), pa.binary())
    quads = _B64_LUT[data].reshape(-1, 4)
    n24 = (quads[:, 0] << 18) | (quads[:, 1] << 12) | (quads[:, 2] << 6) | quads[:, 3]
    out = np.empty((len(n24), 3), dtype=np.uint8)
    out[:, 0] = n24 >> 16
    out[:, 1] = (n24 >> 8) & 0xFF
    out[:, 2] = n24 & 0xFF
    flat = out.reshape(-1)
    pads = pc.count_substring(valid, "=").to_numpy(zero_copy_only=False).astype(np.int64)
    out_len = in_len // 4 * 3
    ends = np.cumsum(out_len)
    keep = np.ones(len(flat), dtype=bool)
    keep[(ends - 1)[pads >= 1]] = False
    keep[(ends - 2)[pads >= 2]] = False
    return _binary_from(out_len - pads, flat[keep])


def _decode_hex(valid: pa.Array) -> pa.Array:
    in_len, data = _flat_bytes(valid)
    decoded = np.frombuffer(binascii.unhexlify(data.tobytes()), dtype=np.uint8)
    return _binary_from(in_len // 2, decoded)


def _base64_native(arr: pa.Array) -> Optional[pa.Array]:
    """The compiled decoder (loader/_native.c ``base64_values``) of a column whose every value
    is padded base64: the same bytes as :func:`_decoded`; None (that path) for any other."""
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    out = native.module().base64_values(native.string_descriptor(arr), len(arr), pa.allocate_buffer)
    if out is None:
        return None
    bitmap = native.same_validity(arr)
    return pa.Array.from_buffers(
        pa.binary(), len(arr), [bitmap, out[0], out[1]], null_count=arr.null_count
    )


def _convert_bytes(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    out = _base64_native(arr) if o.bytes_encoding == "base64" else None
    errors: _Errors = {}
    if out is None:
        out, errors = _decoded(arr, o)
    limit = t.length if t.length is not None else MAX_CELL_BYTES
    lengths = pc.binary_length(out)
    over = np.flatnonzero(_np_bool(pc.greater(lengths, limit)))
    if len(over):
        errors.update({int(i): f"{t} too long: {lengths[int(i)].as_py()} bytes" for i in over})
        out = _null_out(out, over)
    return out, errors


_HEX_TEXT = r"^(?:[0-9A-Fa-f]{2})*$"
"""Hex digits, two a byte (what follows the prefix)."""


def _decoded(arr: pa.Array, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    """The bytes of base64 or hex text, with numpy: the reference for the compiled decoder."""
    if o.bytes_encoding == "postgres-escape":
        return _decoded_bytea(arr)
    text = arr
    if o.bytes_encoding == "hex":
        text = pc.replace_substring_regex(arr, r"^(?:\\x|0x)", "")
        ok = pc.match_substring_regex(text, _HEX_TEXT)
        what = "hex"
    elif o.bytes_encoding == "postgres":  # \x then hex: the prefix is not optional
        text = pc.replace_substring_regex(arr, r"^\\x", "")
        ok = pc.and_(pc.starts_with(arr, "\\x"), pc.match_substring_regex(text, _HEX_TEXT))
        what = "PostgreSQL's bytea hex"
    else:
        if pc.any(pc.match_substring(arr, "\n")).as_py():
            # base64 in lines, as MIME and MySQL's TO_BASE64 write it (76 characters a line)
            text = pc.replace_substring_regex(arr, r"\r?\n", "")
        ok = pc.match_substring_regex(text, _B64_RE)
        what = "base64"
    valid_mask = _np_bool(ok)
    bad = np.flatnonzero(_np_bool(pc.is_valid(arr)) & ~valid_mask)
    errors: _Errors = {int(i): f"not valid {what}: {_show(arr[int(i)].as_py())}" for i in bad}
    good = text.filter(pa.array(valid_mask))
    decoded = _decode_base64(good) if what == "base64" else _decode_hex(good)
    # Scatter the decoded values back: row i takes decoded[rank of i among the valid rows].
    idx = np.cumsum(valid_mask) - 1
    return decoded.take(pa.array(idx, pa.int64(), mask=~valid_mask)), errors


_BYTEA_ESCAPE = re.compile(rb"\\\\|\\([0-3][0-7][0-7])|\\")
"""PostgreSQL's bytea escape format: ``\\\\`` a backslash, ``\\nnn`` an octal byte; any
other backslash is not the format."""


def _decoded_bytea(arr: pa.Array) -> tuple[pa.Array, _Errors]:
    """bytea as PostgreSQL's COPY writes it: ``\\x`` then hex (``bytea_output = hex``, the
    default), else the escape format (``bytea_output = escape``: printable bytes as they are,
    a backslash doubled, any other byte ``\\nnn`` in octal). Hex text without ``\\x`` is
    the escape format's, and read as such: ``cafe`` is four bytes, not two."""
    valid = _np_bool(pc.is_valid(arr))
    hexed = valid & _np_bool(pc.starts_with(arr, "\\x"))
    out = arr.cast(pa.binary())  # escape format without a backslash: its bytes as they are
    errors: _Errors = {}
    if hexed.any():
        rows = np.flatnonzero(hexed)
        digits = pc.utf8_slice_codeunits(arr.take(pa.array(rows)), 2)
        ok = _np_bool(pc.match_substring_regex(digits, _HEX_TEXT))
        good = np.flatnonzero(ok)
        out = pc.replace_with_mask(
            out,
            pa.array(np.isin(np.arange(len(arr)), rows[good])),
            _decode_hex(digits.take(pa.array(good))),
        )
        errors.update(
            {
                int(rows[i]): f"not valid hex: {_show(arr[int(rows[i])].as_py())}"
                for i in np.flatnonzero(~ok)
            }
        )
    escaped = valid & ~hexed & _np_bool(pc.match_substring(arr, "\\"))
    if escaped.any():
        rows = np.flatnonzero(escaped)
        texts = arr.take(pa.array(rows)).to_pylist()
        decoded = {v: _unescape_bytea(v) for v in set(texts)}
        out = pc.replace_with_mask(
            out, pa.array(escaped), pa.array([decoded[v] for v in texts], pa.binary())
        )
        for i, v in zip(rows, texts):
            if decoded[v] is None:
                errors[int(i)] = (
                    f"not PostgreSQL's bytea: {_show(v)} (hex starts with \\x; in the escape "
                    "format a backslash is \\\\ or starts three octal digits)"
                )
    if errors:
        out = _null_out(out, sorted(errors))
    return out, errors


def _unescape_bytea(text: str) -> Optional[bytes]:
    """One value in PostgreSQL's bytea escape format; None when it is not in that format."""
    raw = text.encode("utf-8")
    out = bytearray()
    at = 0
    for m in _BYTEA_ESCAPE.finditer(raw):
        out += raw[at : m.start()]
        if m.group(0) == b"\\\\":
            out.append(0x5C)
        elif m.group(1) is not None:
            out.append(int(m.group(1), 8))
        else:
            return None
        at = m.end()
    return bytes(out + raw[at:])
