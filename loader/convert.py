"""Convert: string columns from :mod:`loader.parse` -> typed Arrow columns per :mod:`loader.types`.

Every column is converted whole with ``pyarrow.compute`` (casts, regex extraction, arithmetic)
or numpy (base64 / hex). That fast path raises or flags on a bad value; only then does a
slow path look for the offending rows (bisecting failed casts), so clean data never pays for
per-row work. A row with any bad value becomes one :class:`~loader.rejects.Reject` (the first
bad column, in table order) and is dropped from the output.

Accepted text per type (``ConvertOptions`` supplies the configurable parts):

INT64       ``[+-]?[0-9]+``, within int64: an optional sign, then decimal digits; no hex
            (``0x10`` is rejected, saying so), no spaces.
FLOAT64 / FLOAT32: decimal or exponent notation, ``nan``, ``inf``, ``infinity`` (any case);
            a finite text that overflows is rejected.
NUMERIC     ``[+-]?D[.D][e[+-]D]`` (digits on at least one side of the point), no spaces; at
            most 29 integer digits and 9 fraction digits (more fraction digits only when they
            are zeros): values that would round are rejected, never rounded.
BOOL        ``true_words`` / ``false_words``, case-insensitive.
STRING(n)   length in characters; STRING(MAX) up to 2,621,440 characters.
BYTES(n)    base64 (padded) or hex; n counts decoded bytes.
DATE        ``YYYY-MM-DD``, 0001-01-01 .. 9999-12-31.
TIMESTAMP   ``YYYY-MM-DD[Tt ]HH:MM:SS[.f{1,9}]`` then ``Z`` / ``z``, ``UTC``, ``+HH:MM``,
            ``+HHMM``, ``+HH`` or nothing (then local time in ``timezone``; a time skipped by a
            DST change is rejected, a repeated one takes the earlier instant); or
            ``timestamp_format`` (strptime, whole seconds). Output:
            ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``, computed from whole seconds in int64 (not
            timestamp[ns], which stops at 2262) with the fraction carried through as text, so
            0001..9999 and nanoseconds survive.
            ``spanner.commit_timestamp()`` is accepted for allow_commit_timestamp columns.
JSON        validated with :func:`json.loads` (Arrow has no JSON-text validator; this is the
            one per-value loop, run over distinct values), text kept as written. As Spanner,
            refuses ``NaN`` / ``Infinity`` and numbers outside the FLOAT64 range.
ARRAY<T>    JSON array syntax (``[1,2,null]``, ``["a","b"]``); elements are converted as T.
            Decoded with :func:`json.loads` per distinct value, elements converted column-wise.

Public API: :class:`ConvertOptions`, :class:`ConvertedBlock`, :func:`convert_block`,
:func:`convert_column` (one column, for tests and reuse).
"""

from __future__ import annotations

import binascii
import datetime as dt
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import native
from .bad_values import failing_positions
from .errors import ConfigError, SchemaError
from .rejects import Reject
from .schema import TableSchema
from .types import COMMIT_TIMESTAMP, SpannerType, arrow_type, one_array, value_offsets

if TYPE_CHECKING:
    from .parse import Dialect, ParsedBlock

__all__ = ["ConvertOptions", "ConvertedBlock", "convert_block", "convert_column"]

MAX_CELL_BYTES = 10 << 20
"""Spanner's limit for one cell."""
MAX_STRING_CHARS = 2_621_440
"""Most characters a STRING(MAX) holds."""

_MIN_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
_MIN_DAYS = -719162  # 0001-01-01
_MAX_DAYS = 2932896  # 9999-12-31


@dataclass(frozen=True)
class ConvertOptions:
    """How values are read; :meth:`from_dialect` takes them from a parse.Dialect."""

    timezone: str = "UTC"
    timestamp_format: Optional[str] = None
    bytes_encoding: str = "base64"
    true_words: tuple[str, ...] = ("true", "t", "yes", "y", "1")
    false_words: tuple[str, ...] = ("false", "f", "no", "n", "0")
    commit_timestamp_columns: frozenset[str] = field(default_factory=frozenset)
    """TIMESTAMP columns (allow_commit_timestamp) filled with spanner.commit_timestamp()."""
    max_cell_bytes: int = MAX_CELL_BYTES

    def __post_init__(self) -> None:
        if self.bytes_encoding not in ("base64", "hex"):
            raise ConfigError(f"bytes encoding must be base64 or hex, not {self.bytes_encoding!r}")
        if self.timezone.upper() != "UTC":
            try:
                pc.assume_timezone(pa.array([0], pa.timestamp("s")), self.timezone)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise ConfigError(
                    f"unknown time zone {self.timezone!r}",
                    hint="use an IANA name such as Europe/Berlin or America/New_York",
                ) from None
        overlap = {w.lower() for w in self.true_words} & {w.lower() for w in self.false_words}
        if overlap:
            raise ConfigError(f"words both true and false: {', '.join(sorted(overlap))}")

    @classmethod
    def from_dialect(cls, dialect: Dialect, **overrides: Any) -> ConvertOptions:
        """The dialect's value spellings (bool words, bytes encoding, time zone, format)."""
        values: dict[str, Any] = dict(
            timezone=dialect.timezone,
            timestamp_format=dialect.timestamp_format,
            bytes_encoding=dialect.bytes_encoding,
            true_words=dialect.true_words,
            false_words=dialect.false_words,
        )
        values.update(overrides)
        return cls(**values)


@dataclass
class ConvertedBlock:
    """The good rows of a block, typed, plus the rows rejected while converting."""

    table: pa.Table
    """Columns typed per :func:`loader.types.arrow_type`, named by table column."""
    record_numbers: pa.Int64Array
    line_numbers: Optional[pa.Int64Array]
    rejects: list[Reject]
    int_texts: dict[str, pa.Array] = field(default_factory=dict)
    """The source text of INT64 columns whose every value is already written as the encoder
    writes an INT64 (``str(int)``), row for row with ``table``: loader.encode then uses it
    instead of turning the integers back into text."""


# -- helpers -----------------------------------------------------------------------------------

_Errors = dict[int, str]
"""Row index -> human reason, for one column."""


def _show(value: Optional[str], limit: int = 60) -> str:
    if value is None:
        return "NULL"
    if len(value) > limit:
        value = value[:limit] + "..."
    return repr(value)


def _article(type_name: str) -> str:
    return "an" if type_name[0] in "AEIOU" else "a"


def _np_bool(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _null_out(arr: pa.Array, rows: list[int] | np.ndarray) -> pa.Array:
    """``arr`` with the given rows set to NULL."""
    if len(rows) == 0:
        return arr
    mask = np.zeros(len(arr), dtype=bool)
    mask[np.asarray(rows, dtype=np.int64)] = True
    return pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)


def _bisect(
    arr: pa.Array, fn: Callable[[pa.Array], pa.Array], reason: Callable[[str], str]
) -> tuple[pa.Array, _Errors]:
    """Apply a whole-column ``fn``; if it raises, find the values that make it raise.

    ``fn`` must work value by value (a cast, a parse). The search splits failing slices in
    halves, so k bad values in n cost O(k log n) calls of ``fn``.
    """
    try:
        return fn(arr), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError):
        pass

    def fails(lo: int, hi: int) -> bool:
        try:
            fn(arr.slice(lo, hi - lo))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError):
            return True
        return False

    bad = failing_positions(len(arr), fails)
    errors = {i: reason(arr[i].as_py()) for i in bad}
    return fn(_null_out(arr, bad)), errors


def _not_a(type_name: str) -> Callable[[str], str]:
    return lambda v: f"not {_article(type_name)} {type_name}: {_show(v)}"


# -- scalar converters -------------------------------------------------------------------------


def _plain_native(arr: pa.Array, kind: str, target: pa.DataType) -> Optional[pa.Array]:
    """The compiled parse (loader/_native.c ``plain_int64s`` / ``plain_dates`` /
    ``plain_numerics``) of a column whose every value is in the plain form (``-?D{1,19}`` in
    range; ``YYYY-MM-DD`` in 0001-9999; ``-?D{1,29}(.D{1,9})?``): the same values as Arrow's
    cast; None (the cast) for any other column."""
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    parse = getattr(native.module(), kind)
    data = parse(native.string_descriptor(arr), len(arr), pa.allocate_buffer)
    if data is None:
        return None
    bitmap = native.same_validity(arr)
    return pa.Array.from_buffers(target, len(arr), [bitmap, data], null_count=arr.null_count)


_INT64_TEXT = r"^[+-]?[0-9]+$"
"""The one INT64 form: an optional sign, then decimal digits (ASCII)."""
_HEX_TEXT = re.compile(r"[+-]?0[xX][0-9a-fA-F]*")


def _why_malformed(v: str) -> str:
    """What a malformed number's text does wrong, when it is one of the common slips."""
    if any(c.isspace() for c in v):
        return " (spaces are not allowed)"
    if _HEX_TEXT.fullmatch(v):
        return " (decimal digits only, no hex)"
    return ""


def _convert_int64(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    plain = _plain_native(arr, "plain_int64s", pa.int64())
    if plain is not None:
        return plain, {}
    # The shape first: Arrow's cast also takes "0x.." hex and refuses a "+" sign, and the rule
    # (README "Values") is one for every path: [+-]?digits, within int64.
    shaped = pc.match_substring_regex(arr, _INT64_TEXT)
    malformed = np.flatnonzero(_np_bool(pc.and_(pc.is_valid(arr), pc.invert(shaped))))
    errors: _Errors = {}
    for i in malformed.tolist():
        v = arr[i].as_py()
        errors[i] = f"not an INT64: {_show(v)}{_why_malformed(v)}"
    digits = pc.replace_substring_regex(_null_out(arr, malformed), r"^\+", "")
    out, out_of_range = _bisect(
        digits, lambda a: pc.cast(a, pa.int64()), lambda v: "INT64 out of range"
    )
    errors.update({i: f"INT64 out of range: {_show(arr[i].as_py())}" for i in out_of_range})
    return out, errors


def _convert_float(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    target = pa.float64() if t.code == "FLOAT64" else pa.float32()
    # Arrow's parser takes "nan"/"inf"/"infinity" in any case, like Spanner.
    out, errors = _bisect(arr, lambda a: pc.cast(a, target), _not_a(t.code))
    inf = _np_bool(pc.is_inf(out))
    if inf.any():
        # A finite text that overflowed to infinity would silently change the value.
        spelled = _np_bool(pc.match_substring_regex(arr, r"(?i)^[+-]?inf(inity)?$"))
        over = np.flatnonzero(inf & ~spelled)
        if len(over):
            errors.update(
                {int(i): f"{t.code} out of range: {_show(arr[int(i)].as_py())}" for i in over}
            )
            out = _null_out(out, over)
    return out, errors


def _numeric_reason(v: str) -> str:
    m = re.fullmatch(r"[+-]?([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,18}))?", v)
    if not m or not (m.group(1) or m.group(2)):
        return f"not a NUMERIC: {_show(v)}{_why_malformed(v)}"
    # Fraction digits of the value, exponent included ("1e-10" has 10, "1.5e1" has 0).
    digits = (m.group(1) or "") + (m.group(2) or "")
    exponent = int(m.group(3) or 0) - len(m.group(2) or "")
    if -(exponent + len(digits) - len(digits.rstrip("0"))) > 9:
        return f"NUMERIC would round: {_show(v)} has more than 9 fraction digits"
    return f"NUMERIC out of range: {_show(v)} has more than 29 integer digits"


def _convert_numeric(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    # plain "-?D+(.D{1,9})?" text, all of it: the compiled parser, exact; else the cast
    plain = _plain_native(arr, "plain_numerics", pa.decimal128(38, 9))
    if plain is not None:
        return plain, {}
    # Arrow's string -> decimal128(38, 9) cast refuses exactly what NUMERIC refuses: lost
    # fraction digits ("would cause data loss") and more than 38 - 9 integer digits.
    return _bisect(arr, lambda a: pc.cast(a, pa.decimal128(38, 9)), _numeric_reason)


def _convert_bool(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    lower = pc.utf8_lower(arr)
    is_true = pc.is_in(lower, value_set=pa.array([w.lower() for w in o.true_words], pa.string()))
    is_false = pc.is_in(lower, value_set=pa.array([w.lower() for w in o.false_words], pa.string()))
    neither = _np_bool(pc.and_(pc.is_valid(arr), pc.invert(pc.or_(is_true, is_false))))
    drop = neither | ~_np_bool(pc.is_valid(arr))
    out = pc.if_else(pa.array(drop), pa.scalar(None, pa.bool_()), is_true)
    errors = {int(i): f"not a BOOL: {_show(arr[int(i)].as_py())}" for i in np.flatnonzero(neither)}
    return out, errors


def _max_value_bytes(arr: pa.Array) -> int:
    """The longest value of a string or binary column, in bytes, from its offsets alone."""
    if len(arr) == 0:
        return 0
    offsets = value_offsets(arr)
    if offsets[-1] - offsets[0] <= 0:
        return 0
    return int(np.diff(offsets).max())  # a NULL with a span only makes this larger


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


def _convert_bytes(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    text = arr
    if o.bytes_encoding == "hex":
        text = pc.replace_substring_regex(arr, r"^(?:\\x|0x)", "")
        ok = pc.match_substring_regex(text, r"^(?:[0-9A-Fa-f]{2})*$")
        what = "hex"
    else:
        ok = pc.match_substring_regex(text, _B64_RE)
        what = "base64"
    valid_mask = _np_bool(ok)
    bad = np.flatnonzero(_np_bool(pc.is_valid(arr)) & ~valid_mask)
    errors: _Errors = {int(i): f"not valid {what}: {_show(arr[int(i)].as_py())}" for i in bad}
    good = text.filter(pa.array(valid_mask))
    decoded = _decode_hex(good) if what == "hex" else _decode_base64(good)
    # Scatter the decoded values back: row i takes decoded[rank of i among the valid rows].
    idx = np.cumsum(valid_mask) - 1
    out = decoded.take(pa.array(idx, pa.int64(), mask=~valid_mask))
    limit = t.length if t.length is not None else MAX_CELL_BYTES
    lengths = pc.binary_length(out)
    over = np.flatnonzero(_np_bool(pc.greater(lengths, limit)))
    if len(over):
        errors.update({int(i): f"{t} too long: {lengths[int(i)].as_py()} bytes" for i in over})
        out = _null_out(out, over)
    return out, errors


def _convert_date(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    plain = _plain_native(arr, "plain_dates", pa.date32())
    if plain is not None:
        return plain, {}
    # Arrow's date32 cast takes exactly YYYY-MM-DD (ASCII digits, no sign, no spaces); the
    # length check only spares the search below the common wrong shapes (a regex cost 5x).
    strict = pc.equal(pc.binary_length(arr), 10)
    bad = np.flatnonzero(_np_bool(pc.and_(pc.is_valid(arr), pc.invert(strict))))
    errors: _Errors = {int(i): f"not a DATE: {_show(arr[int(i)].as_py())}" for i in bad}
    out, more = _bisect(_null_out(arr, bad), lambda a: pc.cast(a, pa.date32()), _not_a("DATE"))
    errors.update(more)
    days = pc.cast(out, pa.int32())
    low = np.flatnonzero(_np_bool(pc.less(days, _MIN_DAYS)))
    if len(low):  # year 0000 parses, but Spanner starts at 0001
        errors.update({int(i): f"DATE out of range: {_show(arr[int(i)].as_py())}" for i in low})
        out = _null_out(out, low)
    return out, errors


_TS_MATCH = (
    r"^\d{4}-\d{2}-\d{2}[Tt ](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?"
    r"\s*(?:[Zz]|UTC|[+-](?:[01]\d|2[0-3])(?::?[0-5]\d)?)?$"
)
_TS_TAIL = r"^(?:\.(?P<frac>\d{1,9}))?\s*(?P<off>[Zz]|UTC|[+-]\d\d(?::?\d\d)?)?$"
_ZERO_FRAC = "000000000"


def _int_field(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.cast(arr, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _seconds(ts: pa.Array) -> np.ndarray:
    """int64 seconds since the epoch of a timestamp array, NULL as 0."""
    return np.asarray(
        pc.fill_null(pc.cast(ts.cast(pa.timestamp("s", tz=None)), pa.int64()), 0).to_numpy(
            zero_copy_only=False
        ),
        dtype=np.int64,
    )


def _ascii_table(texts: list[str]) -> np.ndarray:
    """Equal-length ASCII texts as a (len, width) uint8 table, for row gathers."""
    return np.frombuffer("".join(texts).encode(), dtype=np.uint8).reshape(len(texts), -1)


_DIGITS3_TABLE = _ascii_table([f"{v:03d}" for v in range(1000)])
_CLOCK_TABLE: Optional[np.ndarray] = None


def _clock_table() -> np.ndarray:
    """``HH:MM:SS`` of every second of a day (86,400 x 8 bytes), built on first use."""
    global _CLOCK_TABLE
    if _CLOCK_TABLE is None:
        tod = np.arange(86_400)
        table = np.empty((86_400, 8), dtype=np.uint8)
        for at, part in ((0, tod // 3600), (3, tod // 60 % 60), (6, tod % 60)):
            table[:, at : at + 2] = _DIGITS3_TABLE[part, 1:]  # "0HH" without its "0"
        table[:, 2] = table[:, 5] = ord(":")
        _CLOCK_TABLE = table
    return _CLOCK_TABLE


def _date_table(days: Iterable[int]) -> np.ndarray:
    """``YYYY-MM-DD`` of each of ``days`` (days since 1970-01-01)."""
    epoch = dt.date(1970, 1, 1).toordinal()
    return _ascii_table([dt.date.fromordinal(epoch + int(d)).isoformat() for d in days])


def _digit_lanes(width: int) -> np.ndarray:
    """The ASCII digits of 0 .. 10**width - 1 (zero padded), packed little-endian in uint64."""
    values = np.arange(10**width, dtype=np.uint64)
    out = np.zeros(10**width, dtype=np.uint64)
    for i in range(width):
        digit = values // np.uint64(10 ** (width - 1 - i)) % np.uint64(10)
        out |= (digit + np.uint64(0x30)) << np.uint64(8 * i)
    return out


_FRACTION_LANES: Optional[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = None


def _fraction_lanes() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lookup tables for :func:`_canonical_from_ns`, built on first use: for each second of a
    day, ``THH:MM`` at bytes 2..7 of a word and ``:SS.`` at bytes 0..3 of the next; for each
    4-digit group ``dddd`` at bytes 4..7; for each 5-digit group ``ddddd`` then ``Z``."""
    global _FRACTION_LANES
    if _FRACTION_LANES is None:
        clock = _clock_table().astype(np.uint64)  # "HH:MM:SS" per second of the day
        hhmm = np.full(86_400, ord("T") << 16, dtype=np.uint64)
        for i in range(5):
            hhmm = hhmm | (clock[:, i] << np.uint64(8 * (i + 3)))
        ss = np.uint64(ord(":")) | (clock[:, 6] << np.uint64(8)) | (clock[:, 7] << np.uint64(16))
        ss |= np.uint64(ord(".")) << np.uint64(24)
        four = _digit_lanes(4) << np.uint64(32)
        five = _digit_lanes(5) | (np.uint64(ord("Z")) << np.uint64(40))
        _FRACTION_LANES = (hhmm, ss, four, five)
    return _FRACTION_LANES


def _canonical_from_ns(ns: np.ndarray, valid: np.ndarray) -> pa.Array:
    """The canonical TIMESTAMP text (``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``) of int64 nanoseconds
    since the epoch, NULL where not ``valid``.

    A row is built as four little-endian words (``YYYY-MM-``, ``DDTHH:MM``, ``:SS.nnnn``,
    ``nnnnnZ``), each the OR of gathers from small tables (the days present, the seconds of a
    day, 4- and 5-digit groups), then the 32-byte rows are cut to 30 bytes in one copy.
    """
    ns = ns[valid]
    n = len(ns)
    words = np.zeros((n, 4), dtype=np.uint64)
    if n:
        secs, frac = np.divmod(ns, 1_000_000_000)
        days, tod = np.divmod(secs, 86_400)
        first, last = int(days.min()), int(days.max())
        if last - first > 4 * n + 1000:  # spread-out days: format only those present
            uniq, idx = np.unique(days, return_inverse=True)
            dates = _date_table(uniq.tolist())
        else:
            idx = days - first
            dates = _date_table(range(first, last + 1))
        padded = np.zeros((len(dates), 16), dtype=np.uint8)
        padded[:, :10] = dates
        date_words = padded.view(np.uint64)  # "YYYY-MM-" and "DD" per day
        hhmm, ss, four, five = _fraction_lanes()
        words[:, 0] = date_words[idx, 0]
        words[:, 1] = date_words[idx, 1] | hhmm[tod]
        words[:, 2] = ss[tod] | four[frac // 100_000]
        words[:, 3] = five[frac % 100_000]
    out = np.ascontiguousarray(words.view(np.uint8)[:, :30])
    lengths = np.where(valid, 30, 0).astype(np.int32)
    offsets = np.zeros(len(valid) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    mask = None if valid.all() else pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(
        pa.string(),
        len(valid),
        [mask, pa.py_buffer(offsets), pa.py_buffer(out.reshape(-1))],
        null_count=int(len(valid) - valid.sum()),
    )


def _strict_zulu(arr: pa.Array, valid: np.ndarray) -> bool:
    """Whether every value has the separators of ``YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z``.

    Checks only the fixed bytes (``-``, ``T``, ``:``, ``.``, ``Z``) and the length, through
    numpy gathers at those positions, which costs a fraction of the full regex; Arrow's ISO
    8601 cast then checks the digits, the ranges of the clock fields and the calendar.
    """
    if pa.types.is_large_string(arr.type):
        return False
    offsets = value_offsets(arr).astype(np.int64)
    start, end = offsets[:-1][valid], offsets[1:][valid]
    if not len(start):
        return False
    size = end - start
    if not ((size == 20) | ((size >= 22) & (size <= 30))).all():
        return False
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
    for at, char in ((4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":")):
        if not (data[start + at] == ord(char)).all():
            return False
    if not (data[end - 1] == ord("Z")).all():
        return False
    dot = data[np.where(size > 20, start + 19, 0)]
    return bool(((size == 20) | (dot == ord("."))).all())


def _timestamp_native(arr: pa.Array) -> Optional[pa.Array]:
    """The compiled fast path (loader/_native.c): values all ``YYYY-MM-DDTHH:MM:SS[.f]Z`` in
    0001-9999, each field and the calendar checked, give the canonical text in one pass; None
    (the general path) as soon as one value is anything else."""
    descriptor = native.string_descriptor(arr)
    out = native.module().zulu_timestamps(descriptor, len(arr), pa.allocate_buffer)
    if out is None:
        return None
    bitmap = native.same_validity(arr)
    return pa.Array.from_buffers(
        pa.string(), len(arr), [bitmap, out[0], out[1]], null_count=arr.null_count
    )


def _timestamp_fast(arr: pa.Array) -> Optional[pa.Array]:
    """The canonical text of a column whose every value is a well-formed UTC or offset
    timestamp (or every value naive, taken as UTC) inside timestamp[ns]'s range (1677-2262),
    parsed by Arrow's ISO 8601 cast; None when any value needs the general path."""
    if arr.null_count == len(arr):
        return None
    if native.available() and pa.types.is_string(arr.type):
        canonical = _timestamp_native(arr)
        if canonical is not None:
            return canonical
    valid = _np_bool(pc.is_valid(arr))
    if not _strict_zulu(arr, valid):
        matched = pc.match_substring_regex(arr, _TS_MATCH)
        if pc.sum(matched).as_py() != len(arr) - arr.null_count:
            return None
    try:
        ts = pc.cast(arr, pa.timestamp("ns", tz="UTC"))
    except pa.ArrowInvalid:
        try:
            ts = pc.cast(arr, pa.timestamp("ns"))  # all naive: UTC
        except pa.ArrowInvalid:
            return None
    ns = np.asarray(pc.fill_null(ts.cast(pa.int64()), 0).to_numpy(zero_copy_only=False))
    return _canonical_from_ns(ns.astype(np.int64), valid)


def _convert_timestamp(
    arr: pa.Array, t: SpannerType, o: ConvertOptions, allow_commit: bool = False
) -> tuple[pa.Array, _Errors]:
    plain = o.timestamp_format is None and o.timezone.upper() == "UTC"
    if plain and not (allow_commit and pc.any(pc.equal(arr, COMMIT_TIMESTAMP)).as_py()):
        fast = _timestamp_fast(arr)
        if fast is not None:
            return fast, {}
    return _convert_timestamp_general(arr, t, o, allow_commit)


def _convert_timestamp_general(
    arr: pa.Array, t: SpannerType, o: ConvertOptions, allow_commit: bool = False
) -> tuple[pa.Array, _Errors]:
    n = len(arr)
    errors: _Errors = {}
    valid = _np_bool(pc.is_valid(arr))
    commit = np.zeros(n, dtype=bool)
    if allow_commit:
        commit = _np_bool(pc.equal(arr, COMMIT_TIMESTAMP))
    utc = o.timezone.upper() == "UTC"
    frac9: pa.Array | str = _ZERO_FRAC
    # Whole seconds as int64 (0001..9999 fits; timestamp[ns] would not), the fraction as text.
    if o.timestamp_format is not None:
        parsed = pc.strptime(arr, o.timestamp_format, "s", error_is_null=True)
        ok = _np_bool(pc.is_valid(parsed))
        secs = _seconds(parsed)
        naive = ok & (parsed.type.tz is None)
        what = f"not a TIMESTAMP in the format {o.timestamp_format!r}"
        shifted = True
    else:
        what = "not a TIMESTAMP"
        ok = valid & _np_bool(pc.match_substring_regex(arr, _TS_MATCH))
        ok_arr = pa.array(ok)
        head = pc.if_else(ok_arr, pc.utf8_slice_codeunits(arr, 0, 19), "1970-01-01 00:00:00")
        # RFC 3339 allows a lower-case "t" (and "z"); Arrow's parser takes only "T".
        head = pc.utf8_upper(head)
        # Arrow's ISO 8601 cast checks the calendar (no February 30).
        ts, bad_dates = _bisect(head, lambda a: pc.cast(a, pa.timestamp("s")), lambda v: "")
        ok[list(bad_dates)] = False
        secs = _seconds(ts)
        lengths = pc.binary_length(arr)
        plain = _np_bool(pc.equal(lengths, 19))
        zulu = _np_bool(pc.and_(pc.equal(lengths, 20), pc.ends_with(arr, "Z")))
        shifted = False
        if (plain | zulu)[ok].all():
            naive = ok & plain  # the common exports: no fraction, "Z" or no offset
        else:
            tail = pc.if_else(ok_arr, pc.utf8_slice_codeunits(arr, 19, 1 << 30), "")
            parts = pc.extract_regex(tail, _TS_TAIL)
            frac9 = pc.utf8_rpad(pc.fill_null(parts.field("frac"), ""), 9, "0")
            off = parts.field("off")
            naive = ok & (pc.fill_null(pc.utf8_length(off), 0).to_numpy(zero_copy_only=False) == 0)
            signed = ok & _np_bool(pc.match_substring_regex(off, r"^[+-]"))
            if signed.any():
                digits = pc.replace_substring(pc.if_else(pa.array(signed), off, "+0000"), ":", "")
                digits = pc.utf8_rpad(digits, 5, "0")
                hh = _int_field(pc.utf8_slice_codeunits(digits, 1, 3))
                mm = _int_field(pc.utf8_slice_codeunits(digits, 3, 5))
                sign = np.where(_np_bool(pc.starts_with(digits, "-")), -1, 1)
                secs = secs - np.where(signed, sign * (hh * 3600 + mm * 60), 0)
                shifted = True
    bad = np.flatnonzero(valid & ~ok & ~commit)
    errors.update({int(i): f"{what}: {_show(arr[int(i)].as_py())}" for i in bad})
    if not utc and naive.any():
        local = pa.array(np.where(naive, secs, 0), pa.timestamp("s"))

        def to_utc(a: pa.Array) -> pa.Array:
            return pc.assume_timezone(a, o.timezone, ambiguous="earliest", nonexistent="raise")

        moved, gaps = _bisect(local, to_utc, lambda v: "")
        secs = np.where(naive, _seconds(moved), secs)
        shifted = True
        for i in gaps:
            errors[i] = (
                f"TIMESTAMP {_show(arr[i].as_py())} does not exist in {o.timezone} "
                "(skipped by a daylight saving change)"
            )
            ok[i] = False
    out_range = ok & ((secs < _MIN_SECONDS) | (secs > _MAX_SECONDS))
    for j in np.flatnonzero(out_range).tolist():
        errors[j] = f"TIMESTAMP out of range: {_show(arr[j].as_py())}"
    good = ok & ~out_range
    if shifted:
        # "YYYY-MM-DD HH:MM:SS" from Arrow's cast (zero-padded for all of 0001..9999).
        text = pc.cast(pa.array(np.where(good, secs, 0), pa.timestamp("s")), pa.string())
    else:
        text = arr
    date = pc.utf8_slice_codeunits(text, 0, 10)
    clock = pc.utf8_slice_codeunits(text, 11, 19)
    out = pc.binary_join_element_wise(date, "T", clock, ".", frac9, "Z", "")
    out = pc.if_else(pa.array(good), out, pa.scalar(None, pa.string()))
    if commit.any():
        out = pc.if_else(pa.array(commit), COMMIT_TIMESTAMP, out)
    return out, errors


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is outside the FLOAT64 range")
    return value


def _json_int(text: str) -> int:
    _json_float(text)
    return int(text)


def _load_json(text: str) -> Any:
    """:func:`json.loads` refusing what Spanner's JSON refuses and Python's parser takes:
    ``NaN`` / ``Infinity`` and numbers a double cannot hold (``1e400``, 400-digit integers)."""
    return json.loads(
        text, parse_constant=_json_constant, parse_float=_json_float, parse_int=_json_int
    )


def _convert_json(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary.to_pylist()
    bad_codes = []
    for code, value in enumerate(uniques):
        try:
            _load_json(value)
        except ValueError:
            bad_codes.append(code)
    if not bad_codes:
        return arr, {}
    bad = np.flatnonzero(_np_bool(pc.is_in(encoded.indices, pa.array(bad_codes, pa.int32()))))
    errors = {int(i): f"not valid JSON: {_show(arr[int(i)].as_py())}" for i in bad}
    return _null_out(arr, bad), errors


def _json_element_text(v: Any) -> Optional[str]:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v, separators=(",", ":"))


def _convert_array(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    assert t.element is not None
    elem = t.element
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary.to_pylist()
    parsed: list[Optional[list[Optional[str]]]] = []
    why: dict[int, str] = {}
    for code, value in enumerate(uniques):
        try:
            # Numbers stay text so NUMERIC / INT64 elements are converted exactly.
            if elem.code == "JSON":
                v = _load_json(value)
            else:
                v = json.loads(value, parse_float=str, parse_int=str, parse_constant=str)
        except ValueError:
            v = None
            why[code] = f"not a JSON array: {_show(value)}"
        if not isinstance(v, list):
            # JSON null included: NULL is the dialect's null markers' business, and taking it
            # for an empty array would change the value.
            why[code] = f"not a JSON array: {_show(value)}"
            v = None
        if v is not None and elem.code != "JSON" and any(isinstance(x, (list, dict)) for x in v):
            why[code] = f"nested values in {t}: {_show(value)}"
            v = None
        if v is None:
            parsed.append(None)
        elif elem.code == "JSON":
            parsed.append([None if x is None else json.dumps(x, separators=(",", ":")) for x in v])
        else:
            parsed.append([_json_element_text(x) for x in v])
    # One flat element column for the distinct arrays, converted like a scalar column.
    lens = np.array([len(p) if p is not None else 0 for p in parsed], dtype=np.int64)
    flat = pa.array([x for p in parsed if p is not None for x in p], pa.string())
    flat_out, flat_err = convert_column(flat, elem, o)
    starts = np.concatenate([[0], np.cumsum(lens)])
    for fi in sorted(flat_err, reverse=True):
        code = int(np.searchsorted(starts, fi, side="right") - 1)
        why[code] = f"element {fi - starts[code] + 1} of {t}: {flat_err[fi]}"
    offsets = pa.array(starts.astype(np.int32))
    dict_values = pa.ListArray.from_arrays(offsets, flat_out, type=pa.list_(arrow_type(elem)))
    codes = encoded.indices
    out = dict_values.take(codes)
    errors: _Errors = {}
    if why:
        bad = np.flatnonzero(_np_bool(pc.is_in(codes, pa.array(list(why), pa.int32()))))
        codes_np = codes.to_numpy(zero_copy_only=False)
        errors = {int(i): why[int(codes_np[i])] for i in bad}
        out = _null_out(out, bad)
    return out, errors


_CONVERTERS: dict[
    str, Callable[[pa.Array, SpannerType, ConvertOptions], tuple[pa.Array, _Errors]]
] = {
    "INT64": _convert_int64,
    "FLOAT64": _convert_float,
    "FLOAT32": _convert_float,
    "NUMERIC": _convert_numeric,
    "BOOL": _convert_bool,
    "STRING": _convert_string,
    "BYTES": _convert_bytes,
    "DATE": _convert_date,
    "TIMESTAMP": _convert_timestamp,
    "JSON": _convert_json,
    "ARRAY": _convert_array,
}


def convert_column(
    arr: pa.Array, t: SpannerType, options: ConvertOptions, *, allow_commit_timestamp: bool = False
) -> tuple[pa.Array, dict[int, str]]:
    """Convert one string column to ``arrow_type(t)``.

    Returns the typed column (NULL where the input was NULL or bad) and {row: reason} for the
    bad values. NULL checks and cell sizes are :func:`convert_block`'s business.
    """
    arr = one_array(arr)
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    if t.code == "TIMESTAMP":
        out, errors = _convert_timestamp(arr, t, options, allow_commit_timestamp)
    else:
        out, errors = _CONVERTERS[t.code](arr, t, options)
    target = arrow_type(t)
    if out.type != target:
        out = out.cast(target)
    return out, errors


def convert_block(
    block: ParsedBlock,
    table: TableSchema,
    options: ConvertOptions,
    source_name: str,
    *,
    int_texts: Optional[bool] = None,
) -> ConvertedBlock:
    """Type a parsed block; bad rows become rejects (one per row) and leave the output.

    Commit-timestamp columns in ``options`` are added, filled with ``spanner.commit_timestamp()``.
    SchemaError if such a column is not an allow_commit_timestamp TIMESTAMP column or the block
    also carries it. ``int_texts``: whether to keep INT64 source text for the encoder
    (:attr:`ConvertedBlock.int_texts`); None keeps it only for the numpy encoder, since the
    compiled one writes integers itself (loader.native).
    """
    keep_int_texts = not native.available() if int_texts is None else int_texts
    strings = block.strings
    n = strings.num_rows
    for name in sorted(options.commit_timestamp_columns):
        col = table.column(name)
        if col.type.code != "TIMESTAMP" or not col.allow_commit_timestamp:
            raise SchemaError(
                f"column {name} cannot take the commit timestamp",
                hint="only TIMESTAMP columns with OPTIONS (allow_commit_timestamp = true) can",
            )
        if name in strings.column_names:
            raise SchemaError(
                f"column {name} is filled with the commit timestamp but the CSV has it too",
                hint="ignore the CSV column",
            )
    reasons: dict[int, tuple[str, str, Optional[str]]] = {}  # row -> (column, reason, text)
    out: dict[str, pa.Array] = {}
    texts: dict[str, pa.Array] = {}
    ordered = [c for c in table.columns if c.name in strings.column_names]
    for col in ordered:
        arr = one_array(strings.column(col.name))
        if arr.type != pa.string():
            arr = arr.cast(pa.string())
        col_errors = _cell_size_errors(arr, options.max_cell_bytes)
        if col_errors:
            arr = _null_out(arr, list(col_errors))
        typed, errors = convert_column(
            arr, col.type, options, allow_commit_timestamp=col.allow_commit_timestamp
        )
        col_errors.update(errors)
        if not col.nullable and typed.null_count:
            nulls = np.flatnonzero(_np_bool(pc.is_null(typed)))
            for i in nulls.tolist():
                col_errors.setdefault(i, f"NULL in NOT NULL column {col.name}")
        for i, reason in col_errors.items():
            if i not in reasons:
                reasons[i] = (col.name, reason, strings.column(col.name)[i].as_py())
        out[col.name] = typed
        if keep_int_texts and col.type.code == "INT64" and _is_int_text(arr, typed):
            texts[col.name] = arr
    for name in sorted(options.commit_timestamp_columns):
        out[name] = pa.array(np.full(n, COMMIT_TIMESTAMP, dtype=object), pa.string())
    result = pa.table(out) if out else pa.table({})
    records = block.record_numbers
    lines = block.line_numbers
    rejects: list[Reject] = []
    if reasons:
        keep = np.ones(n, dtype=bool)
        keep[list(reasons)] = False
        mask = pa.array(keep)
        result = result.filter(mask)
        for i in sorted(reasons, key=lambda r: records[r].as_py()):
            column, reason, text = reasons[i]
            rejects.append(
                Reject(
                    source=source_name,
                    line=lines[i].as_py() if lines is not None else None,
                    record=records[i].as_py(),
                    column=column,
                    reason=reason,
                    text=text,
                    table=table.name,
                )
            )
        records = records.filter(mask)
        lines = lines.filter(mask) if lines is not None else None
        texts = {name: text.filter(mask) for name, text in texts.items()}
    # row for row with the typed column, NULLs included (a rejected row left both)
    texts = {
        name: text
        for name, text in texts.items()
        if text.null_count == result.column(name).null_count
    }
    return ConvertedBlock(result, records, lines, rejects, texts)


def _is_int_text(text: pa.Array, typed: pa.Array) -> bool:
    """Whether each value of ``text`` that converted (non-NULL in ``typed``) is written as
    ``str(int)`` writes it: a digit 1-9 first (or ``-`` then one), or the single digit ``0``.
    The conversion accepted the value, so the rest of it are decimal digits; a sign ``+``
    (which Spanner refuses in INT64 text), leading zeros and ``-0`` all fail the test."""
    if len(text) == 0 or text.type != pa.string() or typed.null_count == len(typed):
        return False
    offsets = value_offsets(text)
    start, size = offsets[:-1], np.diff(offsets)
    if typed.null_count:
        ok_rows = _np_bool(pc.is_valid(typed))
        start, size = start[ok_rows], size[ok_rows]
    if not size.all():
        return False
    data = np.frombuffer(text.buffers()[2], dtype=np.uint8)
    first = data[start]
    second = data[np.minimum(start + 1, len(data) - 1)]
    nonzero = (first >= ord("1")) & (first <= ord("9"))
    zero = (first == ord("0")) & (size == 1)
    negative = (first == ord("-")) & (size >= 2) & (second >= ord("1")) & (second <= ord("9"))
    return bool((nonzero | zero | negative).all())


def _cell_size_errors(arr: pa.Array, limit: int) -> _Errors:
    if _max_value_bytes(arr) <= limit:
        return {}
    lengths = pc.binary_length(arr)
    if (pc.max(lengths).as_py() or 0) <= limit:
        return {}
    over = np.flatnonzero(_np_bool(pc.greater(lengths, limit)))
    return {
        int(i): f"cell too large: {lengths[int(i)].as_py():,} bytes (limit {limit:,})" for i in over
    }
