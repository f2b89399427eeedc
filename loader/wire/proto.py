"""Protobuf wire framing for the few Spanner messages a load sends and reads, by hand.

Writing: each request is built from length-delimited and varint fields (field numbers from
google/spanner/v1/*.proto and google/protobuf/struct.proto, named where they are used).
Reading: :func:`fields` walks one message's fields; :func:`value` turns a
``google.protobuf.Value`` into its plain Python form (str, float, bool, None, list, dict),
which loader/wire/results.py merges (chunks) and converts by the column's Spanner type.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import struct
from decimal import Decimal
from typing import Any, Iterator, Sequence


def varint(n: int) -> bytes:
    """``n`` (>= 0, or a negative int64 as its two's complement) as a protobuf varint."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field (a string, bytes or an embedded message)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | 2) + varint(len(data)) + data


def field_varint(number: int, n: int) -> bytes:
    """A varint field (an integer, enum or bool); written even when 0."""
    return varint(number << 3) + varint(n)


# google.protobuf.Value: null_value = 1, number_value = 2, string_value = 3, bool_value = 4,
# struct_value = 5, list_value = 6; ListValue: values = 1.
def encode_value(v: Any) -> bytes:
    """A Python value as ``google.protobuf.Value`` bytes, in the form Spanner reads a
    parameter or key of the matching type: INT64, NUMERIC, DATE and BYTES (base64) as
    strings, FLOAT64 as a number (NaN and infinities as their names)."""
    if v is None:
        return field_varint(1, 0)
    if isinstance(v, bool):
        return field_varint(4, int(v))
    if isinstance(v, (int, Decimal)):
        return field(3, str(v))
    if isinstance(v, float):
        if math.isnan(v):
            return field(3, "NaN")
        if math.isinf(v):
            return field(3, "Infinity" if v > 0 else "-Infinity")
        return varint(2 << 3 | 1) + struct.pack("<d", v)
    if isinstance(v, str):
        return field(3, v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return field(3, base64.b64encode(bytes(v)))
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return field(3, v.isoformat() + "Z")
    if isinstance(v, dt.date):
        return field(3, v.isoformat())
    if isinstance(v, (list, tuple)):
        return field(6, list_value(v))
    raise TypeError(f"no Spanner wire form for a {type(v).__name__}")


def list_value(items: Sequence[Any]) -> bytes:
    """``google.protobuf.ListValue`` bytes of ``items``."""
    return b"".join(field(1, encode_value(x)) for x in items)


def fields(buf: bytes | memoryview) -> Iterator[tuple[int, Any]]:
    """(field number, value) of each field of one message: an int for varints, a memoryview
    for length-delimited fields, 8 or 4 raw bytes for the fixed-width ones."""
    mv = memoryview(buf)
    i, end = 0, len(mv)
    while i < end:
        key, i = _read_varint(mv, i)
        number, kind = key >> 3, key & 7
        if kind == 0:
            n, i = _read_varint(mv, i)
            yield number, n
        elif kind == 2:
            size, i = _read_varint(mv, i)
            yield number, mv[i : i + size]
            i += size
        elif kind == 1:
            yield number, bytes(mv[i : i + 8])
            i += 8
        elif kind == 5:
            yield number, bytes(mv[i : i + 4])
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {kind}")
    if i != end:
        raise ValueError("truncated protobuf message")


def _read_varint(mv: memoryview, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = mv[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def value(buf: bytes | memoryview) -> Any:
    """A ``google.protobuf.Value`` in plain Python form (None for null or no kind)."""
    out: Any = None
    for number, v in fields(buf):
        if number == 1:
            out = None
        elif number == 2:
            out = struct.unpack("<d", v)[0]
        elif number == 3:
            out = bytes(v).decode()
        elif number == 4:
            out = bool(v)
        elif number == 5:
            out = _struct(v)
        elif number == 6:
            out = [value(x) for n, x in fields(v) if n == 1]
    return out


def _struct(buf: memoryview) -> dict[str, Any]:
    """``google.protobuf.Struct``: fields = 1, map entries of key = 1, value = 2."""
    out: dict[str, Any] = {}
    for number, entry in fields(buf):
        if number == 1:
            key, val = "", None
            for n, x in fields(entry):
                if n == 1:
                    key = bytes(x).decode()
                elif n == 2:
                    val = value(x)
            out[key] = val
    return out


def text(buf: memoryview) -> str:
    return bytes(buf).decode()
