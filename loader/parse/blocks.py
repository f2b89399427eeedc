"""Blocks: what :func:`~loader.parse.read_blocks` yields (:class:`ParsedBlock`) and how one is
built from an Arrow batch: record and line numbers, the rows rejected while parsing (a wrong
field count, invalid UTF-8, a stray trailing field, a quote never closed).

Record and line numbers
-----------------------
``record`` is the exact 1-based data record number (header and skipped rows excluded; rows
rejected while parsing count). ``line`` is the 1-based physical line where the record starts:
skipped rows, the header and newlines inside quoted (or escaped) fields are counted, but blank
lines are invisible to pyarrow's reader, so after a blank line the line numbers of later records
are low by the number of blank lines before them. Where blank lines are records (a record of
one field, or ``Dialect.skip_blank_lines=False``: see loader.parse.reader) they are exact.
Other limit: CR-only line endings are not counted for line numbers.

UTF-8
-----
Every column is read as ``binary`` so that a stray invalid UTF-8 byte cannot fail a whole
block; UTF-8 is then validated column by column and only a block that fails is searched for
the offending rows.

A quote still open at the end of the input would swallow the rest of the file into one field
(pyarrow's behaviour): the record it opens is rejected instead, with its line ("a quote
opened in this record is never closed").
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..bad_values import failing_positions
from ..errors import AGAIN_WHEN_FIXED, SourceError
from ..rejects import Reject
from ..schema import TableSchema
from ..types import value_offsets
from .dialect import Dialect, line_ends
from .escapes import _unescape_backslashes


@dataclass
class ParsedBlock:
    """One block of parsed records: only rows that parsed, plus the rows that did not."""

    strings: pa.Table
    """One ``string`` column per CSV column that is written, named by the TABLE column name;
    NULL where the field is NULL."""
    record_numbers: pa.Int64Array
    """1-based data record number of each row of ``strings``."""
    line_numbers: Optional[pa.Int64Array]
    """1-based physical line where each row starts (see the module docstring)."""
    rejects: list[Reject]
    """Rows of this block's record range that failed to parse, in record order."""


class DeferredBlock:
    """A block read and numbered, its checks and text still to make: :meth:`finish` makes
    them, on whichever thread calls it (the reading thread hands them on, see
    :func:`loader.parse.reader.read_deferred_blocks`)."""

    __slots__ = ("_make", "nbytes")

    def __init__(self, make: Callable[[], ParsedBlock], nbytes: int = 0) -> None:
        self._make = make
        self.nbytes = nbytes
        """About how many bytes of the (decompressed) input its records took: their values,
        a delimiter or line end after each (quotes not counted). For progress."""

    @classmethod
    def ready(cls, block: ParsedBlock) -> DeferredBlock:
        return cls(lambda: block)

    def then(self, step: Callable[[ParsedBlock], ParsedBlock]) -> DeferredBlock:
        """This block with ``step`` applied once it is made."""
        make = self._make
        return DeferredBlock(lambda: step(make()), self.nbytes)

    def finish(self) -> ParsedBlock:
        return self._make()


@dataclass
class _BadRow:
    record: int
    text: str
    reason: str
    column: Optional[str] = None


_OPEN_QUOTE = (
    "a quote opened in this record is never closed: the rest of the input was read into one field"
)


def _unless_swallowed(reject: Reject) -> Reject:
    """``reject``, unless a quote never closed swallowed the lines after the one it opened in:
    those may be rows (a stray quote in a value), which one reject would drop without a word
    (the load would report one bad row for all of them), so the source is refused instead."""
    text = (reject.text or "").rstrip("\r\n")
    # a CR alone ends a line too (a tryout's CR-only file lost its rows into one reject)
    ends = line_ends(text)
    if reject.reason != _OPEN_QUOTE or not ends:
        return reject
    lines = ends + 1
    where = f"line {reject.line:,}" if reject.line else f"record {reject.record:,}"
    raise SourceError(
        f"{reject.source}: a quote opened at {where} is never closed, so its {lines:,} lines "
        "to the end of the input would be one field of one row",
        hint="close the quote (or escape it) in the file, or read it with the quote character "
        "its export used (an empty one for none)" + AGAIN_WHEN_FIXED,
    )


def _open_quote_at_end(
    tail: bytes,
    last_field: Optional[bytes],
    dialect: Dialect,
    first_field: Optional[bool] = None,
    tail_is_all: bool = False,
) -> bool:
    """Whether the input ends inside a quoted field whose value is ``last_field``.

    Arrow's reader takes the end of the input as the end of an open quoted field, so a quote
    left open swallows every line after it into one value. Such a field is always the last
    field of the last record, and the input then ends with an opening quote followed by the
    value as written, with no closing quote after it. ``tail``: the last bytes of the input
    Arrow read (at least the field); ``tail_is_all``: ``tail`` is the whole input.

    The opening quote starts a field: after a delimiter when ``first_field`` is False, after
    a line end (or at the start) when it is True, after either when unknown (None).

    A closed field whose value ends like its own closing (a value of one line end, ``"\n"``
    then ``\n``) also ends the input with a quote and the value: when the input can also be
    read as ending with that field closed, the two readings differ only by where the record
    starts. A record of several fields tells them apart (its last field follows a
    delimiter); for a record of one field, the whole input is scanned when ``tail`` is all of
    it, and otherwise the field is taken as closed (the value read is then the line end
    written, nothing swallowed).
    """
    q = dialect.quote_char
    if q is None or last_field is None:
        return False
    qb = q.encode()
    value = raw = last_field
    if dialect.escape_char is not None:
        e = dialect.escape_char.encode()
        raw = raw.replace(e, e + e).replace(qb, e + qb)
    elif dialect.double_quote:
        raw = raw.replace(qb, qb + qb)
    delimiter = dialect.delimiter.encode()
    if first_field is None:
        starts: tuple[bytes, ...] = (delimiter, b"\n", b"\r")
    elif first_field:
        starts = (b"\n", b"\r")
    else:
        starts = (delimiter,)

    def opens_at(end: int) -> bool:
        """A field written ``tail[:end]`` ends, opened by a quote that starts a field."""
        start = end - len(raw)
        if not (tail.endswith(raw, 0, end) and tail.endswith(qb, 0, start)):
            if dialect.escape_char is None:
                return False
            # any character may be written escaped
            e = dialect.escape_char.encode()[0]
            found = _escaped_start(tail, end, value, qb[0], e)
            if found is None or not tail.endswith(qb, 0, found):
                return False
            start = found
        before = start - len(qb) - 1
        if before < 0:
            return first_field is not False  # the field starts the input
        return tail[before : before + 1] in starts

    if not opens_at(len(tail)):
        return False
    closed = any(
        tail.endswith(qb + end) and opens_at(len(tail) - len(end) - 1)
        for end in (b"", b"\n", b"\r\n", b"\r")
    )
    return not closed or (tail_is_all and _ends_in_quotes(tail, dialect))


def _record_left_open(tail: bytes, record: bytes, dialect: Dialect) -> bool:
    """Whether the input ends with ``record`` (a row Arrow found the wrong number of fields in,
    as written, its line end left off) and that record ends inside a quoted field: a quote
    opened in a field before its last swallowed the rest of the input, which then reads as
    too few fields. (One opened in the last field is :func:`_open_quote_at_end`'s.)"""
    if dialect.quote_char is None or not dialect.newlines_in_values or not record:
        return False
    if not any(tail.endswith(record + end) for end in (b"", b"\n", b"\r\n", b"\r")):
        return False
    return _ends_in_quotes(record, dialect)


def _escaped_start(tail: bytes, end: int, value: bytes, quote: int, escape: int) -> Optional[int]:
    """Where in ``tail`` a quoted field's text ending at ``end`` starts, when the escape
    character ``escape`` may precede any character of its ``value``; None when it cannot end
    there. A character is escaped when an odd run of escape characters precedes it. Walks the
    value from its end: only for the last field of the input, and a field that does not end
    there fails at once."""
    i = end
    for c in reversed(value):
        i -= 1
        if i < 0 or tail[i] != c:
            return None
        run = 0
        while i - run > 0 and tail[i - run - 1] == escape:
            run += 1
        if run % 2:
            i -= 1
        elif c in (quote, escape):
            return None
    return i


def _ends_in_quotes(data: bytes, dialect: Dialect) -> bool:
    """Whether ``data``, read from its start as Arrow's reader reads it, ends inside a quoted
    field. A field at a time (regular expressions), so only for the rare input that needs it."""
    assert dialect.quote_char is not None
    q = re.escape(dialect.quote_char.encode())
    esc = re.escape(dialect.escape_char.encode()) if dialect.escape_char else None
    d = re.escape(dialect.delimiter.encode())
    inner = [rb"[^" + q + (esc or b"") + rb"]"]
    plain = [rb"[^" + d + (esc or b"") + rb"\r\n]"]
    if esc is not None:
        inner.append(esc + rb".")
        plain.append(esc + rb".")
    if dialect.double_quote:
        inner.append(q + q)
    quoted = re.compile(rb"(?:" + b"|".join(inner) + rb")*", re.S)
    unquoted = re.compile(rb"(?:" + b"|".join(plain) + rb")*", re.S)
    qb = dialect.quote_char.encode()
    pos, n = 0, len(data)
    while pos < n:
        if data.startswith(qb, pos):  # a field's first character
            m = quoted.match(data, pos + len(qb))
            assert m is not None
            pos = m.end()
            if pos >= n:
                return True
            pos += len(qb)  # the closing quote; what follows it up to the field's end is kept
        m = unquoted.match(data, pos)
        assert m is not None
        pos = m.end()
        if data.startswith(b"\r\n", pos):
            pos += 2
        else:
            pos += 1  # a delimiter or a line end
    return False


def _reject_open_quote(
    block: ParsedBlock,
    value: Optional[bytes],
    last_record: int,
    tail: bytes,
    dialect: Dialect,
    source: str,
    table: str,
    first_field: Optional[bool] = None,
    tail_is_all: bool = False,
    ended_line: bool = False,
) -> ParsedBlock:
    """``block`` (the input's last) with its last record rejected when a quote opened in it
    is never closed (``value``: the record's last field as read); unchanged otherwise.
    ``ended_line``: the reader was given a line end after the input's last line, which the
    reject's text leaves out."""
    n = len(block.record_numbers)
    if not n or block.record_numbers[n - 1].as_py() != last_record:
        return block  # the last record is a reject already
    if not _open_quote_at_end(tail, value, dialect, first_field, tail_is_all):
        return block
    assert value is not None
    line = block.line_numbers[n - 1].as_py() if block.line_numbers is not None else None
    text = value.decode("utf-8", "replace")
    if ended_line:
        text = text.removesuffix("\n")
    reject = _unless_swallowed(Reject(source, line, last_record, None, _OPEN_QUOTE, text, table))
    return dataclasses.replace(
        block,
        strings=block.strings.slice(0, n - 1),
        record_numbers=block.record_numbers.slice(0, n - 1),
        line_numbers=block.line_numbers.slice(0, n - 1) if block.line_numbers is not None else None,
        rejects=sorted([*block.rejects, reject], key=lambda r: r.record or 0),
    )


def _may_contain_newline(col: pa.Array) -> bool:
    """False when no value of the binary column can hold a line break: neither a LF byte nor
    0xEE, the lead byte of the private-use newline marker. One scan of the data buffer, much
    cheaper than counting per value, and most columns never hold one."""
    data = col.buffers()[2]
    if data is None:
        return False
    offsets = value_offsets(col)
    if native.available():
        return bool(native.module().has_either(data, int(offsets[0]), int(offsets[-1]), 0x0A, 0xEE))
    raw = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]]
    if raw.size == 0:
        return False
    # a slice at a time into two small reused masks: no temporaries the size of the column
    step = min(raw.size, _SCAN_STEP)
    lf, ee = np.empty(step, dtype=bool), np.empty(step, dtype=bool)
    for start in range(0, raw.size, step):
        part = raw[start : start + step]
        n = part.size
        np.equal(part, 0x0A, out=lf[:n])
        np.equal(part, 0xEE, out=ee[:n])
        if np.logical_or(lf[:n], ee[:n], out=lf[:n]).any():
            return True
    return False


_SCAN_STEP = 1 << 16
"""Bytes :func:`_may_contain_newline` compares at a time (cache-sized)."""


@dataclass
class _Numbered:
    """A batch with its records and lines numbered (:func:`_number_block`): what is left to
    make of it (:func:`_finish_block`) depends on nothing read after it."""

    batch: pa.RecordBatch
    parse_bad: list[_BadRow]
    """The invalid rows whose record numbers fall in the batch's span."""
    bad_pos: np.ndarray
    good_pos: np.ndarray
    records: np.ndarray
    starts: np.ndarray
    """Record number and first line of each record of the span, valid or not."""


def _number_block(
    batch: pa.RecordBatch,
    pending: list[_BadRow],
    next_record: int,
    next_line: int,
    newline_markers: list[str],
) -> tuple[_Numbered, int, int]:
    """The part of a block that must be made in input order: which invalid rows fall inside
    it, and the record number and first line of each of its records. Returns them and how
    many records and physical lines the block covers."""
    n = batch.num_rows
    # pyarrow's handler runs ahead of the batches it returns (readahead): take the invalid
    # rows whose record numbers fall inside this batch's span, which grows by one per row taken.
    pending.sort(key=lambda b: b.record)
    k = 0
    while k < len(pending) and pending[k].record < next_record + n + k:
        k += 1
    parse_bad = pending[:k]
    del pending[:k]
    total = n + k
    is_bad = np.zeros(total, dtype=bool)
    bad_pos = np.array([b.record - next_record for b in parse_bad], dtype=np.int64)
    is_bad[bad_pos] = True
    good_pos = np.flatnonzero(~is_bad)

    lines_per = np.ones(total, dtype=np.int64)
    if newline_markers and n:
        nl = np.zeros(n, dtype=np.int64)
        for col in batch.columns:
            if not _may_contain_newline(col):
                continue
            for marker in newline_markers:
                counts = pc.count_substring(col, marker.encode())
                nl += pc.fill_null(counts, 0).to_numpy(zero_copy_only=False)
        lines_per[good_pos] += nl
    for pos, b in zip(bad_pos.tolist(), parse_bad):
        lines_per[pos] += b.text.count("\n")
    starts = next_line + np.cumsum(lines_per) - lines_per
    records = np.arange(next_record, next_record + total, dtype=np.int64)
    numbered = _Numbered(batch, parse_bad, bad_pos, good_pos, records, starts)
    return numbered, total, int(lines_per.sum())


def _finish_block(
    numbered: _Numbered,
    source: str,
    table: TableSchema,
    dialect: Dialect,
    used: list[tuple[int, str]],
    trailing_fields: Optional[int],
    invalid_label: str,
) -> ParsedBlock:
    """The ParsedBlock of a numbered batch: its rows checked (a trailing field, UTF-8 in the
    written columns), the failures made rejects with the parser's, the rest as text. Touches
    nothing shared, so it may run on another thread than the reading, in any order."""
    batch, parse_bad, bad_pos = numbered.batch, numbered.parse_bad, numbered.bad_pos
    good_pos, records, starts = numbered.good_pos, numbered.records, numbered.starts
    n = batch.num_rows
    rejects: dict[int, Reject] = {}
    for pos, b in zip(bad_pos.tolist(), parse_bad):
        rejects[pos] = _unless_swallowed(
            Reject(source, int(starts[pos]), b.record, None, b.reason, b.text, table.name)
        )

    def reject_rows(rows: np.ndarray, column: Optional[str], reason: str, col: pa.Array) -> None:
        for r in rows.tolist():
            pos = int(good_pos[r])
            if pos in rejects:
                continue
            raw = col[r].as_py()
            text = raw.decode("utf-8", "replace") if raw is not None else None
            rejects[pos] = Reject(
                source, int(starts[pos]), int(records[pos]), column, reason, text, table.name
            )

    keep = np.ones(n, dtype=bool)
    if trailing_fields is not None and n:
        last = batch.column(trailing_fields - 1)
        extra = pc.fill_null(pc.greater(pc.binary_length(last), 0), False)
        rows = np.flatnonzero(extra.to_numpy(zero_copy_only=False))
        if len(rows):
            reject_rows(
                rows,
                None,
                f"expected {trailing_fields - 1} fields and a trailing delimiter, "
                f"found {trailing_fields} fields",
                last,
            )
            keep[rows] = False
    for i, name in used:
        col = batch.column(i)
        if not _all_utf8(col):
            rows = _invalid_utf8_rows(col)
            reason = f"invalid {invalid_label} in column {name}"
            if invalid_label == "UTF-8":  # the default: another encoding is the likely cause
                reason += (
                    " (a file in another encoding, e.g. latin-1 or cp1252? set it with `encoding`)"
                )
            reject_rows(rows, name, reason, col)
            keep[rows] = False

    if keep.all():
        good = batch
    else:
        good = batch.filter(pa.array(keep))
    strings = {}
    for i, name in used:
        col = good.column(i).view(pa.string())
        if dialect.backslash_escapes:
            col = _unescape_backslashes(col, dialect)
        strings[name] = col
    kept_pos = good_pos[keep]
    return ParsedBlock(
        strings=pa.table(strings) if strings else pa.table({}).slice(0, 0),
        record_numbers=pa.array(records[kept_pos], pa.int64()),
        line_numbers=pa.array(starts[kept_pos], pa.int64()),
        rejects=[rejects[p] for p in sorted(rejects)],
    )


def _rejects_only(
    pending: list[_BadRow],
    next_record: int,
    next_line: int,
    source: str,
    table: TableSchema,
    used: list[tuple[int, str]],
) -> ParsedBlock:
    """The invalid rows after the last batch (pyarrow returns no batch for them)."""
    pending.sort(key=lambda b: b.record)
    rejects = []
    line = next_line
    for b in pending:
        # Only invalid rows remain, so records are consecutive here.
        rejects.append(
            _unless_swallowed(Reject(source, line, b.record, None, b.reason, b.text, table.name))
        )
        line += 1 + b.text.count("\n")
    pending.clear()
    empty = pa.table({name: pa.array([], pa.string()) for _, name in used})
    return ParsedBlock(empty, pa.array([], pa.int64()), pa.array([], pa.int64()), rejects)


def _all_utf8(col: pa.Array) -> bool:
    """Whether every value of a binary column (int32 offsets) is valid UTF-8.

    One check of the column's bytes as a single string, much cheaper than value by value:
    values that are each valid make valid text together, and valid text splits into valid
    values wherever each value starts on a character (not on a continuation byte 10xxxxxx;
    a value ending inside a character leaves the next one starting on one, or the text).
    """
    if not (pa.types.is_binary(col.type) or pa.types.is_string(col.type)):
        raise TypeError(f"a binary column with int32 offsets is wanted, not {col.type}")
    buffers = col.buffers()
    data = buffers[2]
    if data is None or len(col) == 0:
        return True
    offsets = value_offsets(col)
    start, stop = int(offsets[0]), int(offsets[-1])
    if stop <= start:
        return True
    span = np.array([0, stop - start], dtype=np.int32)
    text = pa.Array.from_buffers(
        pa.string(), 1, [None, pa.py_buffer(span), data.slice(start, stop - start)]
    )
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    if pc.string_is_ascii(text)[0].as_py():
        return True
    raw = np.frombuffer(data, dtype=np.uint8)
    starts = offsets[:-1][offsets[1:] > offsets[:-1]]
    return not bool(((raw[starts] & 0xC0) == 0x80).any())


def _invalid_utf8_rows(arr: pa.Array) -> np.ndarray:
    """Indices of values of a binary column that are not valid UTF-8 (bisecting a failed cast)."""

    def fails(lo: int, hi: int) -> bool:
        try:
            arr.slice(lo, hi - lo).view(pa.string()).validate(full=True)
        except pa.ArrowInvalid:
            return True
        return False

    bad = failing_positions(len(arr), fails)
    return np.array(bad, dtype=np.int64)
