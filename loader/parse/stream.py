"""The stream Arrow reads: the source transcoded to UTF-8 (MySQL escapes rewritten, see
:mod:`loader.parse.escapes`), leading lines skipped, and the header measured before Arrow parses it.

``skip_rows`` counts physical lines (LF, CRLF or CR), skipped here before Arrow reads the rest,
quotes in them ignored; an input with no more lines than that is an empty input (no blocks, a
note), not an error. So is one whose rest holds nothing but line ends (after a UTF-8
byte-order mark at its very start): no header and no records, as a 0-byte file.

Before Arrow parses the header, its first line is measured: a header wider than
``MAX_CSV_COLUMNS`` is refused at once (raw delimiter count, then Python's csv module when
that count is over the limit), as is a header longer than a parse block.

No read ends between a ``\\r`` and the byte after it while more may follow: pyarrow drops the
``\\n`` of a CRLF inside a quoted field when a read ends there (apache/arrow#51368).
"""

from __future__ import annotations

import codecs
import csv
import re
from typing import Optional, Protocol

from ..errors import SchemaError, SourceError
from .dialect import Dialect
from .escapes import _EscapeRewriter

#: Most columns a CSV may have (Spanner allows 1,024 per table; leave room for ignored ones).
MAX_CSV_COLUMNS = 4096


class Readable(Protocol):
    """What read_blocks needs of a source: a binary ``read``."""

    def read(self, size: int = -1, /) -> bytes: ...


class _ReadOnlyStream:
    """What Arrow asks of a Python file object besides read/tell/close: read-only, no seek."""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False


class _Transcoder(_ReadOnlyStream):
    """A read-only binary stream: another stream transcoded to UTF-8 and, for MySQL dialects,
    with backslash-escaped delimiters / newlines / quotes replaced by private-use markers.

    Both steps run on whole chunks with C-level codecs and ``re.sub``; undecodable bytes are
    carried through as invalid UTF-8 (surrogateescape) so that they reject their row only.
    """

    def __init__(
        self,
        raw: Readable,
        encoding: Optional[str],
        dialect: Dialect,
        name: str = "",
        lines_before: int = 0,
    ) -> None:
        self._raw = raw
        self._name = name  # the source, for an error's message
        self._decoder = (
            codecs.getincrementaldecoder(encoding)(errors="surrogateescape") if encoding else None
        )
        self._escapes = (
            _EscapeRewriter(dialect, lines_before) if dialect.backslash_escapes else None
        )
        self._buf = bytearray()
        self._eof = False
        self._pos = 0
        self.closed = False

    def _transform(self, chunk: bytes, final: bool) -> bytes:
        try:
            return self._transformed(chunk, final)
        except SourceError as e:
            raise (e.of(self._name) if self._name else e) from None

    def _transformed(self, chunk: bytes, final: bool) -> bytes:
        if self._decoder is not None:
            try:
                text = self._decoder.decode(chunk, final)
            except UnicodeError as e:
                hint = None
                if "BOM" in str(e):  # Python's utf-16 / utf-32 need one to tell the byte order
                    hint = (
                        "a file without a byte-order mark names its byte order: e.g. utf-16-le "
                        "(Windows' 'Unicode') or utf-16-be as the encoding"
                    )
                raise SourceError(f"cannot decode the source: {e}", hint) from e
            chunk = text.encode("utf-8", "surrogateescape")
        if self._escapes is None:
            return chunk
        return self._escapes.rewrite(chunk, final)

    def read(self, n: int = -1) -> bytes:
        while not self._eof and (n < 0 or len(self._buf) < n):
            chunk = self._raw.read(max(n, 1 << 20))
            if not chunk:
                self._eof = True
                self._buf += self._transform(b"", True)
            else:
                self._buf += self._transform(chunk, False)
        if n < 0:
            n = len(self._buf)
        n = min(n, len(self._buf))
        if n > 1 and self._buf[n - 1] == 0x0D and not (self._eof and n == len(self._buf)):
            # pyarrow drops the \n of a CRLF inside a quoted field when a read ends between
            # the \r and the \n (apache/arrow#51368): keep the \r for the next read
            n -= 1
        out = bytes(self._buf[:n])
        del self._buf[:n]
        self._pos += len(out)
        return out

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        self.closed = True


_LINE_END = re.compile(rb"\r\n|\r|\n")
_BLANK = re.compile(rb"[\r\n]*")
_UTF8_BOM = codecs.BOM_UTF8
_HEAD_CHUNK = 64 << 10
"""Most bytes read at a time while skipping leading lines or finding the header's end (at most
a parse block): the loader must not read far ahead of what it commits (a source failing later
in the input still lets the rows before it be committed)."""


class _Head(_ReadOnlyStream):
    """A stream whose first bytes are looked at before Arrow reads it: leading lines skipped
    (``skip_rows``, here rather than in Arrow, whose own skipping fails with its own message
    on a short file) and the header line measured; the rest is handed on unchanged.

    A read never ends in ``\r`` while more may follow (apache/arrow#51368, see _Transcoder).
    """

    def __init__(self, raw: Readable, chunk: int = _HEAD_CHUNK) -> None:
        self._raw = raw
        self._chunk = chunk
        self._buf = bytearray()
        self._eof = False
        self._pos = 0
        self.closed = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = self._raw.read(self._chunk)
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def _drop(self, n: int) -> None:
        del self._buf[:n]
        self._pos += n

    def skip_lines(self, n: int) -> int:
        """Drop the first ``n`` lines (ended by LF, CRLF or CR; the last may have no end).
        Returns how many there were: fewer than ``n`` only when the input ended first."""
        done = 0
        in_line = False  # bytes of the current line were dropped already
        while done < n:
            m = _LINE_END.search(self._buf)
            if m is not None and (m.end() < len(self._buf) or m.group() != b"\r" or self._eof):
                self._drop(m.end())
                done += 1
                in_line = False
                continue
            if m is None and self._buf:
                # the whole buffer is in the current line: no need to keep it
                self._drop(len(self._buf))
                in_line = True
            if self._fill():
                continue
            if m is not None or in_line:  # a CR at the very end, or a last line without an end
                self._drop(len(self._buf))
                done += 1
            break
        return done

    def at_end(self) -> bool:
        """Whether nothing is left to read."""
        return not self._buf and not self._fill()

    def only_blank(self, limit: int) -> bool:
        """Whether what is left holds nothing but line ends (after a UTF-8 byte-order mark,
        when nothing was read before): an empty input. Nothing is consumed; the blank bytes
        are held until a byte that is not one, or the end, is found, or more than ``limit``
        of them (then the input is not taken for empty: memory stays bounded)."""
        i = 0
        while len(self._buf) <= limit:
            if self._pos == 0 and i == 0 and len(self._buf) < len(_UTF8_BOM) and self._fill():
                continue
            if self._pos == 0 and i == 0 and self._buf.startswith(_UTF8_BOM):
                i = len(_UTF8_BOM)
            m = _BLANK.match(self._buf, i)
            i = m.end() if m else i
            if i < len(self._buf):
                return False
            if not self._fill():
                return True
        return False

    def first_line(self, limit: int) -> tuple[bytes, bool]:
        """The next line without its end, and whether it ended within ``limit`` bytes (else
        its first ``limit`` bytes). Nothing is consumed."""
        start = 0
        while True:
            m = _LINE_END.search(self._buf, start)
            if m is not None and m.start() <= limit:
                return bytes(self._buf[: m.start()]), True
            if len(self._buf) > limit:
                return bytes(self._buf[:limit]), False
            start = max(0, len(self._buf) - 1)
            if not self._fill():
                return bytes(self._buf), True

    def read(self, n: int = -1) -> bytes:
        if not self._buf:
            if self._eof:
                return b""
            out = self._raw.read(n)
            if not out:
                self._eof = True
            self._pos += len(out)
            return bytes(out)
        while len(self._buf) < 2 and self._fill():
            pass  # a lone CR waits for the byte after it
        take = len(self._buf) if n < 0 else min(n, len(self._buf))
        if take > 1 and self._buf[take - 1] == 0x0D and (take < len(self._buf) or not self._eof):
            take -= 1
        out = bytes(self._buf[:take])
        self._drop(take)
        return out

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        self.closed = True


def split_fields(line: bytes, dialect: Dialect) -> Optional[list[str]]:
    """The fields of one CSV line by Python's csv module (quotes respected); None when it
    cannot tell."""
    quote = dialect.quote_char
    try:
        return next(
            csv.reader(
                [line.decode("utf-8", "surrogateescape")],
                delimiter=dialect.delimiter,
                quotechar=quote or '"',
                quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
                doublequote=dialect.double_quote,
                escapechar=dialect.escape_char,
                strict=False,
            ),
            [],
        )
    except (csv.Error, TypeError, ValueError):
        return None


def _count_fields(line: bytes, dialect: Dialect) -> Optional[int]:
    """How many fields :func:`split_fields` finds; None when it cannot tell."""
    fields = split_fields(line, dialect)
    return None if fields is None else len(fields)


def _too_wide(source: str, columns: str) -> SchemaError:
    return SchemaError(
        f"{source}: the header has {columns} columns; the loader reads at most "
        f"{MAX_CSV_COLUMNS:,} (a Spanner table has at most 1,024)",
        hint="check `delimiter` and `dialect` (a wrong delimiter cuts one column into many), "
        "or cut the file's columns first",
    )


def one_field_line(line: bytes, dialect: Dialect) -> Optional[bool]:
    """Whether ``line``, a file's first line (its header, or its first record), holds a single
    field: no delimiter in it, its UTF-8 BOM and line end left out (a delimiter inside quotes
    counts as one). None for a blank line. Where records have one field a blank line is a
    record (loader.parse.reader), and the planner does not split such a file
    (loader.plan.ranges)."""
    line = line.removeprefix(_UTF8_BOM).rstrip(b"\r\n")
    if not line:
        return None
    return dialect.delimiter.encode() not in line


def _check_header(head: _Head, dialect: Dialect, source: str, line: int, block_size: int) -> None:
    """Refuse a header far wider than the loader reads, or longer than a parse block, before
    Arrow parses it (a million-column header took Arrow a minute and gigabytes to refuse)."""
    text, whole = head.first_line(block_size)
    # Every field but the last ends in a delimiter: the raw count bounds the fields from above
    # (a quoted name may hold delimiters), and only a count over the limit needs the csv module.
    if text.count(dialect.delimiter.encode()) >= MAX_CSV_COLUMNS:
        fields = _count_fields(text, dialect)
        if fields is not None and fields > MAX_CSV_COLUMNS:
            raise _too_wide(source, f"{fields:,}" if whole else f"at least {fields:,}")
    if not whole:
        # Arrow would take a first block without a complete row for an empty file
        raise SourceError(
            f"{source}: the header (line {line}) does not fit in a parse block of "
            f"{_size(block_size)}",
            hint="raise `block_size` above the header's length, or check `delimiter` and the "
            "quoting",
        )


def _too_large(source: str, record: int, line: int, block_size: int) -> SourceError:
    return SourceError(
        f"{source}: record {record} (line {line}) does not fit in a parse block of "
        f"{_size(block_size)}",
        hint="raise `block_size` above the largest record, or check the quoting (a quote "
        "never closed makes the rest of the input one field)",
    )


def _size(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n:,} bytes"
