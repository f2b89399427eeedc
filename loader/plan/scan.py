"""The byte scan behind the range planner: where a file's records start, found with numpy on
whole chunks (never byte by byte in Python).

A record ends at a line end (LF, CRLF, or a CR alone, as Arrow's reader reads them) that is
not inside a quoted field (RFC 4180 quoting) or escaped by a backslash (MySQL dialects, where
a CR alone is data, as the reader takes it: loader.parse.escapes). Which
it is follows from counting:

* **quoting**: a line end is inside a quoted field exactly when an odd number of quote
  characters precede it (``""`` inside a field adds two). That holds only when every quote
  opens a field or closes one, so each quote is checked: an opening one (even count before it)
  must start a field, a closing one must end it (or be doubled). A stray quote (``5"``,
  ``"a"b``) makes Arrow read it literally and the parity useless: :class:`Unsplittable`.
* **backslash escapes**: a line end is escaped when an odd run of backslashes precedes it.
* **neither**: every line end ends a record.

Cuts are made only after an LF that ends a record, so a range never starts inside a record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .. import parse

_LF, _CR, _BS = 0x0A, 0x0D, 0x5C
_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")
_CONTEXT = 2
"""Bytes of already scanned input kept in front of each chunk (a byte's neighbours)."""


class Unsplittable(Exception):
    """The input cannot be cut safely (a stray quote); the file is read as one range."""


@dataclass
class Cut:
    """A record boundary chosen as a range start."""

    offset: int
    """Byte offset of the first byte of the range (just after an LF ending a record)."""
    line: int
    """1-based physical line at ``offset`` (skipped rows, the header and newlines inside
    fields counted)."""
    record: int
    """1-based data record number of the first record at or after ``offset``."""


@dataclass
class ScanResult:
    cuts: list[Cut] = field(default_factory=list)
    data_start: int = 0
    """Offset just after the skipped rows and the header: what a later range's reader reads
    first (the prefix that gives it the header)."""
    prefix_lines: int = 0
    """Lines in ``[0, data_start)`` as the parser counts them."""
    records: int = 0
    """Data records in the file."""


class Scanner:
    """Scans one file chunk by chunk (:meth:`feed`, then :meth:`finish`), choosing cuts every
    ``target`` bytes at the next record boundary after the header."""

    def __init__(self, dialect: parse.Dialect, target: int) -> None:
        if target <= 0:
            raise ValueError("target range size must be positive")
        self.d = dialect
        self.target = target
        self.quote = dialect.quote_char.encode()[0] if dialect.quote_char else None
        self.delim = dialect.delimiter.encode()[0]
        self.escapes = dialect.backslash_escapes
        self.pg_escapes = dialect.backslash_escapes and dialect.escape_style == "postgres"
        # the bytes a closing quote may be followed by, an opening one preceded by
        self._bound = np.zeros(256, bool)
        self._bound[[self.delim, _LF, _CR]] = True
        if self.quote is not None and dialect.double_quote:
            self._bound[self.quote] = True
        self.buf = b"\n" * _CONTEXT
        self.base = -_CONTEXT  # file offset of buf[0]
        self.eof = False
        self.skip_start: Optional[int] = None
        self.field0 = -1  # offset of the first field (after a BOM)
        self.header_left = 1 if dialect.header else 0
        self.result = ScanResult()
        self.quotes = 0  # quotes before the scanned position
        self.lfs = 0  # LFs from skip_start to the scanned position
        self.records = 0  # non-blank record ends from skip_start (header included)
        self.last_end = -1  # offset of the last record end (or skip_start - 1)
        self.bs_run = 0  # backslashes ending just before buf[_CONTEXT]
        self.next_cut: Optional[int] = None
        if dialect.skip_rows == 0:
            self._data_from(0)

    # --- input ---------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        """Scan ``chunk`` (the next bytes of the file); the last byte waits for the next."""
        self.buf += chunk
        self._scan()

    def finish(self) -> ScanResult:
        """Scan the rest (the end of the file) and return the cuts."""
        self.eof = True
        self._scan()
        res = self.result
        if self.skip_start is None:  # the file ended within the skipped rows
            res.data_start = self.base + len(self.buf)
            res.prefix_lines = self.d.skip_rows
            return res
        # a last line without an end
        start = self.last_end + 1
        end = self.base + len(self.buf)
        if end > start:
            self.records += 1
        if self.header_left:
            res.data_start = end
            res.prefix_lines = self.d.skip_rows + 1 + self.lfs
        res.records = max(0, self.records - (1 if self.d.header else 0))
        return res

    # --- the scan ------------------------------------------------------------------------

    def _scan(self) -> None:
        buf = self.buf
        hi = len(buf) if self.eof else len(buf) - 1  # the last byte waits: its neighbour
        lo = _CONTEXT
        if self.skip_start is None:
            found = self._skip(hi)
            if found is None:
                return  # keep everything until the skipped rows are found
            lo = found
        if hi > lo:
            self._scan_range(lo, hi)
        keep = max(hi - _CONTEXT, 0)
        if self.escapes:
            self.bs_run = self._run_before(hi)
        self.buf = self.buf[keep:]
        self.base += keep

    def _skip(self, hi: int) -> Optional[int]:
        """Where the data starts after the skipped rows (LF, CRLF or CR ended, quotes
        ignored, as the parser skips them); None while they go on past ``hi``."""
        i, left = _CONTEXT, self.d.skip_rows
        while left:
            m = _LINE_END.search(self.buf, i, hi)
            if m is None or (m.group() == b"\r" and m.end() == hi and not self.eof):
                return None  # (a CR at the end may be a CRLF's)
            i = m.end()
            left -= 1
        self._data_from(self.base + i)
        return i

    def _data_from(self, skip_start: int) -> None:
        self.skip_start = skip_start
        self.last_end = skip_start - 1
        self.result.data_start = skip_start
        self.result.prefix_lines = self.d.skip_rows
        if not self.header_left:
            self.next_cut = skip_start + self.target

    def _run_before(self, p: int) -> int:
        """Backslashes immediately before buf[p] (p >= _CONTEXT)."""
        buf = self.buf
        j = p - 1
        while j >= _CONTEXT and buf[j] == _BS:
            j -= 1
        if j < _CONTEXT:
            return (p - _CONTEXT) + self.bs_run
        return p - 1 - j

    def _scan_range(self, lo: int, hi: int) -> None:
        buf = self.buf
        arr = np.frombuffer(buf, np.uint8)
        view = arr[lo:hi]
        assert self.skip_start is not None
        if self.field0 < 0:
            self.field0 = self.skip_start
            if self.skip_start == 0 and buf[lo : lo + 3] == _BOM:
                self.field0 = 3
        lf = np.flatnonzero(view == _LF) + lo
        cr = np.flatnonzero(view == _CR) + lo
        if len(cr):
            # a CR alone ends a line; a CR of a CRLF does not (its LF does)
            nxt = np.minimum(cr + 1, len(buf) - 1)
            alone = (arr[nxt] != _LF) | (cr + 1 >= len(buf))
            cr = cr[alone]
        if self.quote is not None:
            q = np.flatnonzero(view == self.quote) + lo
            self._check_quotes(arr, q)
            real_lf = lf[((self.quotes + np.searchsorted(q, lf)) & 1) == 0]
            real_cr = cr[((self.quotes + np.searchsorted(q, cr)) & 1) == 0]
            self.quotes += len(q)
        elif self.escapes:
            real_lf = self._unescaped(arr, lf)
            # MySQL writes a value's CR as it is: a CR alone is data (loader.parse.escapes);
            # in PostgreSQL's text format it ends a line
            real_cr = self._unescaped(arr, cr) if self.pg_escapes else cr[:0]
        else:
            real_lf, real_cr = lf, cr
        ends = np.sort(np.concatenate((real_lf, real_cr))) if len(real_cr) else real_lf
        # blank lines: nothing (or a lone CR before an LF) since the previous record end
        prev = np.concatenate(([self.last_end - self.base], ends[:-1]))
        length = ends - prev - 1
        blank = (length == 0) | ((length == 1) & (arr[np.maximum(ends - 1, 0)] == _CR))
        nonblank = ends[~blank]
        if len(ends):
            self.last_end = int(ends[-1]) + self.base
        self._header(nonblank, lf, real_lf, hi)
        self._cuts(lf, real_lf, nonblank, hi)
        self.lfs += len(lf)
        self.records += len(nonblank)

    def _unescaped(self, arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
        if not len(pos):
            return pos
        maybe = arr[pos - 1] == _BS
        keep = np.ones(len(pos), bool)
        for i in np.flatnonzero(maybe):
            keep[i] = self._run_before(int(pos[i])) % 2 == 0
        return pos[keep]

    def _check_quotes(self, arr: np.ndarray, q: np.ndarray) -> None:
        if not len(q):
            return
        n = len(arr)
        first_opens = self.quotes % 2 == 0
        o = q[0::2] if first_opens else q[1::2]  # opening quotes
        c = q[1::2] if first_opens else q[0::2]  # closing ones
        ok_open = self._bound[arr[o - 1]] | (o + self.base == self.field0)
        ok_close = self._bound[arr[np.minimum(c + 1, n - 1)]] | (c + 1 >= n)
        if not (ok_open.all() and ok_close.all()):
            bad = int(o[~ok_open][0] if not ok_open.all() else c[~ok_close][0]) + self.base
            raise Unsplittable(f"a quote at byte {bad} neither opens nor closes a field")

    def _header(self, nonblank: np.ndarray, lf: np.ndarray, real_lf: np.ndarray, hi: int) -> None:
        if not self.header_left or not len(nonblank):
            return
        end = int(nonblank[0])  # the header's end (LF, or a lone CR)
        self.header_left = 0
        start = end + 1
        self.result.data_start = self.base + start
        # as the parser counts them: the header's line plus the LFs inside it
        self.result.prefix_lines = self.d.skip_rows + 1 + self.lfs + int(np.searchsorted(lf, end))
        self.next_cut = self.base + start + self.target

    def _cuts(self, lf: np.ndarray, real_lf: np.ndarray, nonblank: np.ndarray, hi: int) -> None:
        while self.next_cut is not None and not self.header_left:
            # a cut just after the first record-ending LF at or past next_cut - 1
            i = int(np.searchsorted(real_lf, self.next_cut - 1 - self.base))
            if i >= len(real_lf):
                return
            off = int(real_lf[i]) + 1
            if off >= len(self.buf) and self.eof:
                return  # nothing after it
            lines = self.lfs + int(np.searchsorted(lf, off))
            recs = self.records + int(np.searchsorted(nonblank, off))
            first_record = recs - (1 if self.d.header else 0) + 1
            self.result.cuts.append(
                Cut(self.base + off, self.d.skip_rows + 1 + lines, first_record)
            )
            self.next_cut = self.base + off + self.target
