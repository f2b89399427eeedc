"""A stray quote that closes on a later line: found while the stream is read, refused.

Arrow's reader (RFC 4180 quoting) takes a quote at a field's start as opening a quoted field
that runs to the next quote, line ends included, and keeps any text after that closing quote
as part of the value. So a stray quote at the start of a value (``2,"b`` where the export
did not double it) joins the lines after it, up to the next quote anywhere, into one value of
one row: ``2,"b\\n3,c\\n4,"d`` is a single row whose value is ``b\\n3,c\\n4,d``, without a reject,
and rows 3 and 4 are gone. The field counts can match, so nothing later can tell.

What gives it away is the closing quote: in a well-formed file it is followed by a delimiter,
a line end, the end of the input or a second quote (``""``, one quote of the value). Text
after a closing quote is sloppy but harmless on one line (``"a"b`` reads as ``ab``); after a
quoted field that holds a line end it almost always means the quote opened by mistake.
:class:`QuoteWatch` follows the quoting through the bytes Arrow reads and records the first
such field (:attr:`QuoteWatch.stray`); the reader refuses the source when it sees it, before
the block holding that row is handed on (a row is read only after its closing quote).

The states (shared with the compiled ``quote_scan``): 0 at a field's start, 1 inside an
unquoted field (a quote there is a character of the value), 2 inside a quoted field, 3 just
after a quote inside a quoted field (the next byte decides: a quote, the delimiter, a line end,
or text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import native
from .dialect import Dialect, line_ends
from .stream import _UTF8_BOM, Readable, _ReadOnlyStream

_LF, _CR = 0x0A, 0x0D

#: (state, span_nl, newlines, open_at, nl_open, close_at, nl_close): see ``quote_scan`` in
#: loader/_native.c
Scan = tuple[int, int, int, int, int, int, int]


def scan_reference(
    data: bytes,
    quote: int,
    delim: int,
    state: int,
    span_nl: int,
    escape: int = -1,
    doubled: int = 1,
) -> Scan:
    """The states followed from one quote or escape character to the next (the twin the
    others are held to)."""
    n = len(data)
    i, open_at, close_at = 0, -1, -1
    ends = (delim, _LF, _CR)
    special = re.compile(
        re.escape(bytes([quote])) + (b"|" + re.escape(bytes([escape])) if escape >= 0 else b"")
    )
    while i < n:
        if state == 2:
            m = special.search(data, i)
            end = n if m is None else m.start()
            if not span_nl and (data.find(b"\n", i, end) >= 0 or data.find(b"\r", i, end) >= 0):
                span_nl = 1
            if m is None:
                i = n
            else:
                i, state = end + 1, (3 if data[end] == quote else 5)
        elif state in (4, 5):
            if state == 5 and data[i] in (_LF, _CR):
                span_nl = 1  # an escaped line end in a quoted value: a line end of it still
            i, state = i + 1, state - 3  # the escaped byte: 4 -> 1, 5 -> 2
        elif state == 3:
            c = data[i]
            if c == quote and doubled:
                state = 2
            elif c in ends:
                state, span_nl, open_at = 0, 0, -1
            elif span_nl:
                close_at = i
                break
            else:
                state, open_at = (4 if c == escape else 1), -1
            i += 1
        else:
            m = special.search(data, i)
            if m is None:
                state = 0 if data[n - 1] in ends else 1
                break
            q = m.start()
            start = data[q - 1] in ends if q > i else state == 0
            if data[q] != quote:
                state = 4
            elif start:
                state, span_nl, open_at = 2, 0, q
            else:
                state = 1
            i = q + 1
    nl_open = line_ends(data, open_at) if open_at >= 0 else 0
    nl_close = line_ends(data, close_at) if close_at >= 0 else 0
    newlines = nl_close if close_at >= 0 else line_ends(data, n)
    return state, span_nl, newlines, open_at, nl_open, close_at, nl_close


def scan_numpy(
    data: bytes,
    quote: int,
    delim: int,
    state: int,
    span_nl: int,
    escape: int = -1,
    doubled: int = 1,
) -> Scan:
    """The same with numpy over the whole chunk when every quote opens or closes a field (the
    quotes then alternate, and none can be followed by text); else :func:`scan_reference`,
    which also takes a chunk holding the escape character, or quotes that are not doubled."""
    if state >= 3 or not data or not doubled or (escape >= 0 and bytes([escape]) in data):
        return scan_reference(data, quote, delim, state, span_nl, escape, doubled)
    arr = np.frombuffer(data, np.uint8)
    n = len(arr)
    q = np.flatnonzero(arr == quote)
    inside = state == 2
    opens = q[1::2] if inside else q[0::2]
    closes = q[0::2] if inside else q[1::2]
    bound = np.zeros(256, bool)
    bound[[delim, _LF, _CR, quote]] = True
    ok_open = bound[arr[np.maximum(opens - 1, 0)]]
    if len(opens) and opens[0] == 0:
        ok_open[0] = state == 0
    ok_close = (closes + 1 >= n) | bound[arr[np.minimum(closes + 1, n - 1)]]
    if not (ok_open.all() and ok_close.all()):
        return scan_reference(data, quote, delim, state, span_nl, escape, doubled)
    ends = (arr == _LF) | ((arr == _CR) & (np.append(arr[1:], 0) != _LF))  # a CR alone too
    newlines = int(np.count_nonzero(ends))
    end_inside = (len(q) % 2 == 1) != inside
    closed_last = bool(len(closes)) and int(closes[-1]) == n - 1 and not end_inside
    if not end_inside and not closed_last:
        return (0 if int(arr[-1]) in (delim, _LF, _CR) else 1), 0, newlines, -1, 0, -1, 0
    # the quoted field open at the end (or closed by the last byte): where it opened, an open
    # right after a close being the second quote of a doubled one
    if inside:
        second = opens == closes[: len(opens)] + 1
    else:
        second = np.concatenate(([False], opens[1:] == closes[: len(opens) - 1] + 1))
    real = np.flatnonzero(~second)
    open_at = int(opens[real[-1]]) if len(real) else -1
    begin, stop = (open_at + 1 if open_at >= 0 else 0), (n if end_inside else n - 1)
    held = arr[begin:stop]
    nl = (open_at < 0 and span_nl) or bool((held == _LF).any() or (held == _CR).any())
    nl_open = int(np.count_nonzero(ends[:open_at])) if open_at >= 0 else 0
    return (2 if end_inside else 3), int(nl), newlines, open_at, nl_open, -1, 0


def scan(
    data: bytes,
    quote: int,
    delim: int,
    state: int,
    span_nl: int,
    escape: int = -1,
    doubled: int = 1,
) -> Scan:
    """One chunk's scan: the compiled ``quote_scan`` where built, else :func:`scan_numpy`."""
    if native.available():
        return native.module().quote_scan(data, quote, delim, state, span_nl, escape, doubled)
    return scan_numpy(data, quote, delim, state, span_nl, escape, doubled)


def _null_field(data: bytes, delim: int) -> Optional[int]:
    """Where the first field that is ``\\N`` alone is in ``data`` (after a delimiter or a line
    end, before one), if any; one ``find`` per ``\\N``, which files without them lack. ``data``
    is the stream's text as far as it is read: a ``\\N`` at either of its ends is passed over,
    since the bytes beside it are not read yet or are no more (``\\Nabc`` cut after the N is no
    field of its own); :class:`QuoteWatch` joins the end of one read to the next."""
    bounds = (delim, _LF, _CR)
    at = data.find(b"\\N")
    while at >= 0:
        if at > 0 and at + 2 < len(data) and data[at - 1] in bounds and data[at + 2] in bounds:
            return at
        at = data.find(b"\\N", at + 2)
    return None


@dataclass(frozen=True)
class StrayQuote:
    """A quoted field that holds a line end and is closed by a quote with text after it."""

    opened: int
    """The line of its opening quote (1-based, as the file's physical lines)."""
    closed: int
    """The line of its closing quote."""
    after: str
    """The text right after the closing quote (a few characters)."""


def watches(dialect: Dialect) -> bool:
    """Whether a stream read with ``dialect`` is watched: quoting (quotes doubled or not, an
    escape character or none) with line ends allowed in values, no MySQL escapes (each of its
    characters is one byte: the dialect refuses others)."""
    return (
        dialect.quote_char is not None
        and dialect.newlines_in_values
        and not dialect.backslash_escapes
    )


class QuoteWatch(_ReadOnlyStream):
    """``raw`` passed through unchanged, its quoting followed (:func:`scan`) on every read;
    :attr:`stray` is set at the first stray quote that closes on a later line."""

    def __init__(self, raw: Readable, dialect: Dialect, first_line: int = 1) -> None:
        assert dialect.quote_char is not None
        self._raw = raw
        self._quote = dialect.quote_char.encode()[0]
        self._delim = dialect.delimiter.encode()[0]
        self._escape = dialect.escape_char.encode()[0] if dialect.escape_char else -1
        self._doubled = int(dialect.double_quote)
        self._state = 0
        self._span_nl = 0
        self._lines = first_line  # the line the next byte is on
        self._open_line = first_line
        self._first = True
        self.stray: Optional[StrayQuote] = None
        self.escaped_null: Optional[int] = None
        """The line of a field ``\\N`` (MySQL's NULL) read with a backslash as the escape
        character, which makes it the text N (the first one, if any)."""
        self._text_nulls = (
            self._escape < 0 and self._delim == 0x09 and "\\N" not in dialect.null_markers
        )
        self.text_null: Optional[int] = None
        """The line of a field ``\\N`` read with a tab as the delimiter and no escapes: the
        text \\N, where a COPY text or MySQL export meant NULL (the first one, if any)."""
        self.closed = False
        self._carry = b""  # the last bytes read, for a \\N across two reads

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data and self.stray is None:
            self._watch(data)
        elif not data and self._carry:  # the end: a \\N the last read ended with is a field
            self._nulls(self._carry + b"\n", len(self._carry), b"")
            self._carry = b""
        return data

    def _watch(self, data: bytes) -> None:
        view = data
        if self._first:
            self._first = False
            if data.startswith(_UTF8_BOM):
                view = data[len(_UTF8_BOM) :]
        if not view:
            return
        state, span_nl, newlines, open_at, nl_open, close_at, nl_close = scan(
            view, self._quote, self._delim, self._state, self._span_nl, self._escape, self._doubled
        )
        if open_at >= 0:
            self._open_line = self._lines + nl_open
        if close_at >= 0:
            after = view[close_at : close_at + 8].split(b"\n")[0].split(b"\r")[0]
            self.stray = StrayQuote(
                self._open_line, self._lines + nl_close, after.decode("utf-8", "replace")
            )
        if self._null_watch():
            carry = self._carry
            # across the two reads (a few bytes joined), then within this one (not copied)
            if not self._nulls(carry + view[:3], len(carry), view):
                self._nulls(view, 0, view)
            self._carry = (carry + view[-3:])[-3:]  # a \\N at the end: what follows decides
        self._state, self._span_nl = state, span_nl
        self._lines += newlines

    def _null_watch(self) -> bool:
        return (self._escape == 0x5C and self.escaped_null is None) or (
            self._text_nulls and self.text_null is None
        )

    def _nulls(self, joined: bytes, carried: int, view: bytes) -> bool:
        """Look for a field ``\\N`` in ``joined``: the last bytes of the reads before
        (``carried`` of them), then the start of this read, ``view``, whose first line is
        ``self._lines``. Whether one was found."""
        at = _null_field(joined, self._delim)
        if at is None:
            return False
        line = self._lines + (line_ends(view, at - carried) if at >= carried else 0)
        if self._escape == 0x5C and self.escaped_null is None:
            self.escaped_null = line
        if self._text_nulls and self.text_null is None:
            self.text_null = line
        return True

    def left_open(self) -> Optional[int]:
        """The line of a quote the input read so far leaves open (its end inside a quoted
        field), if it does."""
        return self._open_line if self._state == 2 else None

    def tell(self) -> int:
        return int(self._raw.tell()) if hasattr(self._raw, "tell") else 0

    def close(self) -> None:
        self.closed = True
