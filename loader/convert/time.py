"""DATE and TIMESTAMP text -> date32 and the canonical TIMESTAMP text."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..types import COMMIT_TIMESTAMP, SpannerType, civil_from_days, value_offsets
from .common import (
    _bisect,
    _Errors,
    _not_a,
    _np_bool,
    _null_out,
    _plain_native,
    _show,
)
from .options import ConvertOptions

_MIN_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
_MIN_DAYS = -719162  # 0001-01-01
_MAX_DAYS = 2932896  # 9999-12-31


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


def _date_table(days: np.ndarray) -> np.ndarray:
    """``YYYY-MM-DD`` of each of ``days`` (days since 1970-01-01, years 0001-9999) as a
    (len, 10) uint8 table: the civil date in numpy (H. Hinnant's civil_from_days), digits from
    a table. Not a Python loop: it runs on a stage thread, where Python holds the GIL the other
    stages need (a wide table's timestamps span tens of thousands of days per block)."""
    year, month, day = civil_from_days(days)
    out = np.empty((len(year), 10), dtype=np.uint8)
    out[:, 0:2] = _DIGITS3_TABLE[year // 100, 1:]
    out[:, 2:4] = _DIGITS3_TABLE[year % 100, 1:]
    out[:, 5:7] = _DIGITS3_TABLE[month, 1:]
    out[:, 8:10] = _DIGITS3_TABLE[day, 1:]
    out[:, 4] = out[:, 7] = ord("-")
    return out


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
            dates = _date_table(uniq)
        else:
            idx = days - first
            dates = _date_table(np.arange(first, last + 1))
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


def _timestamp_offsets_native(arr: pa.Array, *, naive_ok: bool) -> Optional[pa.Array]:
    """The compiled parse (loader/_native.c ``offset_timestamps``) of a column whose every value
    is RFC 3339 text with an offset (``Z``, ``UTC``, ``+HH:MM``, ``+HHMM``, ``+HH``), or none
    when ``naive_ok`` (the time zone is UTC), in 0001-9999: the canonical text, as the general
    path gives it; None (that path) for any other column."""
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    out = native.module().offset_timestamps(
        native.string_descriptor(arr), len(arr), pa.allocate_buffer, naive_ok
    )
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
        if canonical is None:
            canonical = _timestamp_offsets_native(arr, naive_ok=True)
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


def _year_10000(arr: pa.Array) -> tuple[pa.Array, Optional[np.ndarray]]:
    """``arr`` with ``10000-01-01`` read as ``9999-12-31`` (and which values were, to add their
    day back): PostgreSQL writes an instant late on 9999-12-31 UTC so in a zone east of UTC
    (``10000-01-01 03:00:00+05:30`` is 9999-12-31T21:30:00Z, which Spanner holds). What is
    still past 9999 after its offset is then out of range, as any such value."""
    late = pc.starts_with(arr, "10000-01-01")
    if not pc.any(late).as_py():
        return arr, None
    moved = pc.binary_join_element_wise("9999-12-31", pc.utf8_slice_codeunits(arr, 11, 1 << 30), "")
    return pc.if_else(late, moved, arr), _np_bool(late)


def _convert_timestamp(
    arr: pa.Array, t: SpannerType, o: ConvertOptions, allow_commit: bool = False
) -> tuple[pa.Array, _Errors]:
    utc = o.timezone.upper() == "UTC"
    plain = o.timestamp_format is None
    if plain and not (allow_commit and pc.any(pc.equal(arr, COMMIT_TIMESTAMP)).as_py()):
        # naive text is local time elsewhere than UTC: only values with an offset go fast there
        fast = _timestamp_fast(arr) if utc else _timestamp_offsets_native(arr, naive_ok=False)
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
        written, (arr, late) = arr, _year_10000(arr)
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
        if late is not None:
            secs = secs + np.where(late, 86400, 0)
            shifted = True
        arr = written
    bad = np.flatnonzero(valid & ~ok & ~commit)
    errors.update({int(i): f"{what}: {_show(arr[int(i)].as_py())}" for i in bad})
    if not utc and naive.any():
        local = pa.array(np.where(naive, secs, 0), pa.timestamp("s"))

        def to_utc(a: pa.Array) -> pa.Array:
            # a local time the clocks pass twice is refused too: which of the two instants
            # the export meant cannot be told, and a value is never guessed
            return pc.assume_timezone(a, o.timezone, ambiguous="raise", nonexistent="raise")

        moved, gaps = _bisect(local, to_utc, lambda v: "")
        secs = np.where(naive, _seconds(moved), secs)
        shifted = True
        for i in gaps:
            try:
                pc.assume_timezone(local.slice(i, 1), o.timezone, ambiguous="earliest")
                twice = True
            except pa.ArrowInvalid:
                twice = False
            errors[i] = (
                f"TIMESTAMP {_show(arr[i].as_py())} happens twice in {o.timezone} (the clocks "
                "go back an hour at a daylight saving change): which one is meant needs its "
                "offset in the text (an export in UTC, or with offsets, has none of these)"
                if twice
                else f"TIMESTAMP {_show(arr[i].as_py())} does not exist in {o.timezone} "
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
