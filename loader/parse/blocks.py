"""Parse: CSV bytes in some dialect -> blocks of string columns named by table column.

This stage knows how a file *looks* (delimiter, quoting, escapes, header, encoding, NULL
markers); :mod:`loader.convert` knows what the values *mean*. Parsing is pyarrow's streaming
CSV reader (:func:`pyarrow.csv.open_csv`) with every column read as ``binary`` so that neither
type inference nor a stray invalid UTF-8 byte can fail a whole block; UTF-8 is then validated
column by column and only a block that fails is searched for the offending rows.

Public API
----------
``Dialect``             frozen description of a CSV dialect; ``PRESETS`` / ``dialect_from_preset``
                        give the ``mysql``, ``postgres``, ``bigquery``, ``excel`` and ``csv`` ones.
``resolve_columns``     map the CSV's columns onto the table's (``mapping`` / ``ignore``), raising
                        :class:`~loader.errors.SchemaError` for unknown, generated or missing ones.
``read_blocks``         stream a source as :class:`ParsedBlock` s (string columns + record and line
                        numbers + the rows rejected while parsing).

NULLs
-----
A field equal to one of ``Dialect.null_markers`` is NULL only when it is *unquoted*: with the
default markers ``("",)`` an empty unquoted field is NULL and ``""`` is an empty string, as
PostgreSQL's ``COPY ... CSV`` writes them (pyarrow: ``strings_can_be_null`` with
``quoted_strings_can_be_null=False``).

MySQL (``backslash_escapes=True``)
----------------------------------
``SELECT ... INTO OUTFILE`` and ``mysqldump --tab`` write ``\\N`` for NULL and escape the escape
character, the delimiter, the line terminator and NUL with a backslash (a tab inside a value
is written as backslash + a real tab). pyarrow's own ``escape_char`` would turn ``\\N`` into
``N`` and ``\\t`` into ``t``, so escapes are handled here instead: the byte stream is rewritten
so that an escaped delimiter / newline / quote no longer splits a field (backslash + a private-use
code point), pyarrow parses with escaping off and sees ``\\N`` verbatim (a NULL marker), and the
escapes are then undone column-wise with ``pyarrow.compute`` replace kernels:
``\\t \\n \\r \\0 \\b \\Z \\\\`` and backslash + any other character = that character.
Those private-use code points (U+E001..U+E006) in the data itself are rewritten too (backslash +
U+E006 + a letter) and restored last, so they come through unchanged.

Record and line numbers
-----------------------
``record`` is the exact 1-based data record number (header and skipped rows excluded; rows
rejected while parsing count). ``line`` is the 1-based physical line where the record starts:
skipped rows, the header and newlines inside quoted (or escaped) fields are counted, but blank
lines are invisible to pyarrow's reader, so after a blank line the line numbers of later records
are low by the number of blank lines before them (``Dialect.skip_blank_lines=False`` keeps them
as rows of NULLs instead). ``skip_rows`` counts physical lines (LF, CRLF or CR), skipped here
before Arrow reads the rest, quotes in them ignored; an input with no more lines than that is
an empty input (no blocks, a note), not an error.

Before Arrow parses the header, its first line is measured: a header wider than
``MAX_CSV_COLUMNS`` is refused at once (raw delimiter count, then Python's csv module when
that count is over the limit), as is a header longer than a parse block.

A quote still open at the end of the input would swallow the rest of the file into one field
(pyarrow's behaviour): the record it opens is rejected instead, with its line ("a quote
opened in this record is never closed"). Other limit: CR-only line endings are not counted
for line numbers.
"""

from __future__ import annotations

import atexit
import codecs
import csv
import dataclasses
import gc
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Collection, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from .. import native
from ..bad_values import failing_positions
from ..errors import ConfigError, SchemaError, SourceError
from ..rejects import Reject
from ..schema import TableSchema
from ..types import value_offsets

log = logging.getLogger("loader.parse")

__all__ = [
    "Dialect",
    "PRESETS",
    "ParsedBlock",
    "dialect_from_preset",
    "read_blocks",
    "release_readers",
    "resolve_columns",
]

#: Most columns a CSV may have (Spanner allows 1,024 per table; leave room for ignored ones).
MAX_CSV_COLUMNS = 4096

# Private-use code points standing in for characters MySQL escaped with a backslash, so that
# pyarrow does not split on them; undone in _unescape_backslashes.
_PUA_DELIM = "\ue001"
_PUA_LF = "\ue002"
_PUA_CR = "\ue003"
_PUA_QUOTE = "\ue004"
_PUA_BACKSLASH = "\ue005"
# The same code points in the data are kept apart: each becomes backslash + _PUA_LITERAL + a
# letter (its index in _PUA_ALL), restored last.
_PUA_LITERAL = "\ue006"
_PUA_ALL = (_PUA_DELIM, _PUA_LF, _PUA_CR, _PUA_QUOTE, _PUA_BACKSLASH, _PUA_LITERAL)
_PUA_LETTERS = "abcdef"
_PUA_PREFIX = _PUA_DELIM.encode()[:2]  # the UTF-8 lead bytes all of them share


class Readable(Protocol):
    """What read_blocks needs of a source: a binary ``read``."""

    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class Dialect:
    """How a CSV file is written. Build one directly or from a preset (:data:`PRESETS`)."""

    delimiter: str = ","
    quote_char: Optional[str] = '"'
    """None: quoting is off (MySQL tab dumps)."""
    escape_char: Optional[str] = None
    """pyarrow-style escape: the next character is taken literally (``"a\\"b"``)."""
    double_quote: bool = True
    """``""`` inside a quoted field is one quote."""
    newlines_in_values: bool = True
    backslash_escapes: bool = False
    """MySQL escapes: ``\\N`` NULL, ``\\t \\n \\r \\0 \\b \\Z \\\\`` (see the module docstring)."""
    header: bool = True
    columns: Optional[tuple[str, ...]] = None
    """CSV column names by position when there is no header (default: the table's writable
    columns in table order)."""
    skip_rows: int = 0
    """Lines to skip before the header (or the first record)."""
    encoding: str = "utf-8"
    """Any Python codec; non-UTF-8 input is transcoded while streaming. A UTF-8 BOM is dropped."""
    trailing_delimiter: Optional[bool] = None
    """Every row ends with a delimiter (an extra empty field). None: detect it from a header
    whose last name is empty; without a header None means False."""
    skip_blank_lines: bool = True
    null_markers: tuple[str, ...] = ("",)
    """Unquoted field values read as NULL."""
    true_words: tuple[str, ...] = ("true", "t", "yes", "y", "1")
    false_words: tuple[str, ...] = ("false", "f", "no", "n", "0")
    """BOOL spellings, compared case-insensitively."""
    bytes_encoding: str = "base64"
    """``base64`` or ``hex`` (an optional ``\\x`` / ``0x`` prefix is allowed)."""
    timezone: str = "UTC"
    """IANA zone for TIMESTAMP values without an offset."""
    timestamp_format: Optional[str] = None
    """strptime-style format for TIMESTAMP values (whole seconds); None: RFC 3339 and
    ``YYYY-MM-DD HH:MM:SS[.fffffffff][ offset|UTC]``."""

    def __post_init__(self) -> None:
        if len(self.delimiter) != 1:
            raise ConfigError(f"delimiter must be one character, not {self.delimiter!r}")
        for name in ("quote_char", "escape_char"):
            v = getattr(self, name)
            if v is not None and len(v) != 1:
                raise ConfigError(f"{name} must be one character or none, not {v!r}")
        if self.bytes_encoding not in ("base64", "hex"):
            raise ConfigError(f"bytes encoding must be base64 or hex, not {self.bytes_encoding!r}")
        if self.skip_rows < 0:
            raise ConfigError("skip_rows must be >= 0")
        if self.backslash_escapes and self.escape_char is not None:
            raise ConfigError("backslash_escapes and escape_char cannot be combined")
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise ConfigError(f"unknown encoding {self.encoding!r}") from None

    def with_columns(self, columns: Optional[tuple[str, ...]]) -> Dialect:
        """This dialect with CSV column names by position (header-less files)."""
        return dataclasses.replace(self, columns=tuple(columns) if columns is not None else None)


PRESETS: dict[str, Dialect] = {
    "csv": Dialect(),
    # PostgreSQL COPY ... TO ... (FORMAT csv): empty unquoted = NULL, "" = empty string.
    "postgres": Dialect(header=False),
    # MySQL SELECT ... INTO OUTFILE / mysqldump --tab: tabs, no quoting, backslash escapes.
    "mysql": Dialect(
        delimiter="\t",
        quote_char=None,
        double_quote=False,
        backslash_escapes=True,
        header=False,
        null_markers=("\\N",),
    ),
    # BigQuery EXTRACT ... CSV: header, NULL as empty, TIMESTAMP "2024-01-01 12:00:00 UTC".
    "bigquery": Dialect(),
    # Excel "CSV UTF-8": BOM + CRLF, both handled by the default reader.
    "excel": Dialect(),
}
"""Named dialects. ``postgres`` has no header by default (``COPY`` writes none unless asked:
pass ``header=True``); ``mysql`` has none either (``mysqldump --tab`` writes none)."""


def dialect_from_preset(name: str, **overrides: Any) -> Dialect:
    """A preset dialect with some fields replaced, e.g. ``dialect_from_preset("postgres",
    header=True)``; ConfigError for an unknown preset or field."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown CSV dialect {name!r}", hint="one of: " + ", ".join(sorted(PRESETS))
        ) from None
    try:
        return dataclasses.replace(base, **overrides)
    except TypeError as e:
        raise ConfigError(f"bad dialect option: {e}") from None


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


def resolve_columns(
    table: TableSchema,
    csv_names: list[str],
    mapping: Optional[Mapping[str, str]] = None,
    ignore: Collection[str] = (),
    filled: Collection[str] = (),
) -> list[Optional[str]]:
    """Table column written from each CSV column (None: ignored), checked against the table.

    CSV names match table names exactly, else case-insensitively; ``mapping`` renames CSV
    columns, ``ignore`` drops them. ``filled`` names table columns the converter fills itself
    (commit timestamps): they count as present and must not also come from the CSV.
    SchemaError for an unknown or generated column, a column written twice, a key column or a
    NOT NULL column without default that nothing writes; ConfigError for a mapping or ignore
    entry naming no CSV column.
    """
    mapping = dict(mapping or {})
    ignore = set(ignore)
    all_names = ", ".join(c.name for c in table.columns)
    for name in list(mapping) + sorted(ignore):
        if name not in csv_names:
            raise ConfigError(
                f"CSV column {name!r} (in the column mapping or ignore list) is not in the file",
                hint="the file's columns: " + ", ".join(csv_names),
            )
    targets: list[Optional[str]] = []
    unknown: list[str] = []
    for name in csv_names:
        if name in ignore:
            targets.append(None)
            continue
        col = table.find_column(mapping.get(name, name))
        if col is None and name in mapping:
            # the mapping's target is the table's side: the CSV column is there
            raise SchemaError(
                f"table {table.name} has no column {mapping[name]!r} "
                f"(mapped from the CSV column {name!r})",
                hint=f"columns of {table.name}: {all_names}",
            )
        if col is None:
            unknown.append(name)
            targets.append(None)
            continue
        if col.generated:
            raise SchemaError(
                f"column {col.name} of table {table.name} is generated and cannot be written",
                hint=f"ignore the CSV column {name!r}",
            )
        if col.name in filled:
            raise SchemaError(
                f"column {col.name} is filled with the commit timestamp but the CSV has it too",
                hint=f"ignore the CSV column {name!r}",
            )
        targets.append(col.name)
    if unknown:
        raise SchemaError(
            f"CSV column(s) not in table {table.name}: " + ", ".join(map(repr, unknown)),
            hint=f"columns of {table.name}: {all_names}; map or ignore the others",
        )
    written = [t for t in targets if t is not None]
    dupes = sorted({t for t in written if written.count(t) > 1})
    if dupes:
        raise SchemaError(f"more than one CSV column writes column(s) {', '.join(dupes)}")
    present = set(written) | set(filled)
    keys = set(table.key_names)
    for col in table.writable_columns:
        if col.name in present:
            continue
        if col.name in keys:
            raise SchemaError(
                f"key column {col.name} of table {table.name} is missing from the CSV",
                hint="map a CSV column to it",
            )
        if not col.nullable and not col.has_default:
            raise SchemaError(
                f"NOT NULL column {col.name} of table {table.name} is missing from the CSV",
                hint="map a CSV column to it",
            )
    return targets


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

    def __init__(self, raw: Readable, encoding: Optional[str], dialect: Dialect) -> None:
        self._raw = raw
        self._decoder = (
            codecs.getincrementaldecoder(encoding)(errors="surrogateescape") if encoding else None
        )
        self._escapes = dialect.backslash_escapes
        specials = {
            dialect.delimiter.encode(): b"\\" + _PUA_DELIM.encode(),
            b"\n": b"\\" + _PUA_LF.encode(),
            b"\r": b"\\" + _PUA_CR.encode(),
            b"\\": b"\\" + _PUA_BACKSLASH.encode(),
        }
        if dialect.quote_char:
            specials[dialect.quote_char.encode()] = b"\\" + _PUA_QUOTE.encode()
        # A marker in the data, escaped or not (backslash + any other character = it).
        for marker, letter in zip(_PUA_ALL, _PUA_LETTERS):
            specials[marker.encode()] = b"\\" + _PUA_LITERAL.encode() + letter.encode()
        self._specials = specials
        markers = [m.encode() for m in _PUA_ALL]
        self._escape_re = re.compile(
            rb"\\("
            + b"|".join(re.escape(k) for k in specials if k not in markers)
            + rb")|\\?("
            + b"|".join(markers)
            + rb")",
            re.DOTALL,
        )
        self._carry = b""
        self._buf = bytearray()
        self._eof = False
        self._pos = 0
        self.closed = False

    def _transform(self, chunk: bytes, final: bool) -> bytes:
        if self._decoder is not None:
            try:
                text = self._decoder.decode(chunk, final)
            except UnicodeError as e:
                raise SourceError(f"cannot decode the source: {e}") from e
            chunk = text.encode("utf-8", "surrogateescape")
        if not self._escapes:
            return chunk
        chunk = self._carry + chunk
        self._carry = b""
        if not final:
            # Hold back a marker's first bytes at the end (the rest is in the next chunk) and an
            # odd run of backslashes before them (it escapes a byte of the next chunk).
            keep = next((k for k in (2, 1) if chunk.endswith(_PUA_PREFIX[:k])), 0)
            head = chunk[: len(chunk) - keep]
            run = len(head) - len(head.rstrip(b"\\"))
            keep += run % 2
            if keep:
                chunk, self._carry = chunk[:-keep], chunk[-keep:]
        if b"\\" not in chunk and _PUA_PREFIX not in chunk:
            return chunk
        specials = self._specials
        return self._escape_re.sub(lambda m: specials[m.group(1) or m.group(2)], chunk)

    def read(self, n: int = -1) -> bytes:
        while not self._eof and (n < 0 or len(self._buf) < n):
            chunk = self._raw.read(max(n, 1 << 20))
            if not chunk:
                self._eof = True
                self._buf += self._transform(b"", True) + self._carry
                self._carry = b""
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


class _ReadaheadGate(_ReadOnlyStream):
    """Caps how far Arrow's CSV reader reads ahead of the batches taken from it.

    ``open_csv`` reads the stream on a background thread into a queue of up to 32 blocks
    (not configurable), so with 16 MiB blocks a fast source could sit 512 MiB ahead of a busy
    consumer. Here a read waits while ``window`` reads are not yet matched by a taken batch.
    Arrow needs block k+1 to finish the last row of block k, so a window of 2 never starves
    it; blocks that yield no batch (skipped rows) could, so a read blocked for ``patience``
    seconds while the consumer waits for the next batch goes ahead anyway.
    """

    def __init__(self, raw: Readable, window: int, patience: float = 0.5) -> None:
        self._raw = raw
        self._window = window
        self._patience = patience
        self._cond = threading.Condition()
        self._reads = 0
        self._taken = 0
        self._consumer_waiting = 0
        self.reader: Any = None
        self.arrow_side: Optional[weakref.ref[_ArrowSide]] = None
        self.closed = False
        self.tail: list[bytes] = []
        self._next: Optional[bytes] = None
        """The last two chunks Arrow read (references, no copies): the end of the input, for
        :func:`_open_quote_at_end`."""
        _LIVE_GATES.add(self)

    def read(self, n: int = -1) -> bytes:
        with self._cond:
            while not (self.closed or self._reads - self._taken < self._window):
                if not self._cond.wait(self._patience) and self._consumer_waiting:
                    break  # the consumer may be waiting for this very read
            self._reads += 1
            if self.closed:
                return b""
        if self._next is not None:
            chunk, self._next = self._next, None
        else:
            chunk = self._raw.read(n)
        if chunk and (n < 0 or len(chunk) < n) and chunk[-1:] not in (b"\n", b"\r"):
            # A short read not ending a line may be the input's last: if it is, end its last
            # line. Arrow reads such a line the same way, except a lone header line, which it
            # takes for an empty file.
            after = self._raw.read(n) if n >= 0 else b""
            if after:
                self._next = bytes(after)
            else:
                chunk = bytes(chunk) + b"\n"
        if chunk:
            self.tail = [*self.tail[-1:], bytes(chunk)]
        return chunk

    def for_arrow(self) -> _ArrowSide:
        """The stream to hand to Arrow's reader (only Arrow may keep a reference to it)."""
        side = _ArrowSide(self)
        self.arrow_side = weakref.ref(side)
        return side

    def next_batch(self) -> Any:
        """The reader's next batch (StopIteration at the end, or once released).

        The gate holds the only reference to the reader, so that :meth:`release` destroys it
        while Arrow is still alive, whoever still holds the block iterator (Arrow aborts the
        process when a reader is destroyed during interpreter teardown)."""
        if self.reader is None:
            raise StopIteration
        return self.call(self.reader.read_next_batch)

    def release(self) -> None:
        """Close, then run the reader to its end and drop it: reads now return EOF at once, so
        this parses at most the blocks already read, and afterwards Arrow's thread has left
        Python for good (one left inside a read while the interpreter shuts down aborts the
        process)."""
        self.close()
        reader, self.reader = self.reader, None
        if reader is not None:
            try:
                while True:
                    reader.read_next_batch()
            except StopIteration:
                pass
            except Exception:  # noqa: BLE001 - the reader's own error was reported already
                pass

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` (the consumer's wait for the reader) with reads ungated."""
        with self._cond:
            self._consumer_waiting += 1
            self._cond.notify_all()
        try:
            return fn(*args, **kwargs)
        finally:
            with self._cond:
                self._consumer_waiting -= 1

    def took_batch(self) -> None:
        with self._cond:
            self._taken = max(self._taken + 1, self._reads - self._window + 1)
            self._cond.notify_all()

    def tell(self) -> int:
        return int(self._raw.tell()) if hasattr(self._raw, "tell") else 0

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


class _ArrowSide(_ReadOnlyStream):
    """What Arrow's reader is given to read from: the gate, behind an object only Arrow holds,
    so that a weak reference to it tells when Arrow (possibly on one of its own threads) has
    let go of the stream (see release_readers)."""

    def __init__(self, gate: _ReadaheadGate) -> None:
        self._gate = gate

    def read(self, n: int = -1) -> bytes:
        return self._gate.read(n)

    def tell(self) -> int:
        return self._gate.tell()

    @property
    def closed(self) -> bool:
        return self._gate.closed

    def close(self) -> None:
        self._gate.close()


_LINE_END = re.compile(rb"\r\n|\r|\n")
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


def _count_fields(line: bytes, dialect: Dialect) -> Optional[int]:
    """The fields of one CSV line by Python's csv module (quotes respected); None when it
    cannot tell."""
    quote = dialect.quote_char
    try:
        row = next(
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
    return len(row)


def _too_wide(source: str, columns: str) -> SchemaError:
    return SchemaError(
        f"{source}: the header has {columns} columns; the loader reads at most "
        f"{MAX_CSV_COLUMNS:,} (a Spanner table has at most 1,024)",
        hint="check --delimiter and --dialect (a wrong delimiter cuts one column into many), "
        "or cut the file's columns first",
    )


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
            hint="raise --block-size above the header's length, or check --delimiter and the "
            "quoting",
        )


def _too_large(source: str, record: int, line: int, block_size: int) -> SourceError:
    return SourceError(
        f"{source}: record {record} (line {line}) does not fit in a parse block of "
        f"{_size(block_size)}",
        hint="raise --block-size above the largest record, or check the quoting (a quote "
        "never closed makes the rest of the input one field)",
    )


def _size(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n:,} bytes"


READAHEAD_BLOCKS = 2
"""Blocks Arrow's CSV reader may read ahead of the batch being processed (see _ReadaheadGate)."""

_LIVE_GATES: weakref.WeakSet[_ReadaheadGate] = weakref.WeakSet()


@atexit.register
def release_readers() -> None:
    """Release every reader still open; run at exit, and by the CLI before it leaves."""
    # Arrow's reader thread must not be left waiting in Python code while the interpreter
    # shuts down (a reader abandoned without being closed would abort the process there).
    gates = list(_LIVE_GATES)
    for gate in gates:
        gate.release()
    # Then wait (briefly) until Arrow has dropped each stream: its last reference can go on one
    # of Arrow's threads, which must not take the GIL once the interpreter is finalising (the
    # process would abort with "terminate called without an active exception").
    deadline = time.monotonic() + 2.0
    while any(g.arrow_side is not None and g.arrow_side() is not None for g in gates):
        if time.monotonic() > deadline:
            break
        gc.collect()
        time.sleep(0.005)


def _unescape_backslashes(arr: pa.Array, dialect: Dialect) -> pa.Array:
    """Undo MySQL backslash escapes in a string column (after ``\\N`` became NULL)."""
    if len(arr) == 0 or not pc.any(pc.match_substring(arr, "\\")).as_py():
        return arr
    # Escaped backslashes first, through a private code point, so that "\\t" stays "\t".
    out = pc.replace_substring(arr, "\\" + _PUA_BACKSLASH, _PUA_BACKSLASH)
    pairs = [
        ("\\t", "\t"),
        ("\\n", "\n"),
        ("\\r", "\r"),
        ("\\0", "\0"),
        ("\\b", "\b"),
        ("\\Z", "\x1a"),
        ("\\" + _PUA_DELIM, dialect.delimiter),
        ("\\" + _PUA_LF, "\n"),
        ("\\" + _PUA_CR, "\r"),
        ("\\" + _PUA_QUOTE, dialect.quote_char or '"'),
    ]
    for esc, plain in pairs:
        out = pc.replace_substring(out, esc, plain)
    out = pc.replace_substring_regex(out, r"(?s)\\([^" + _PUA_LITERAL + "])", r"\1")
    out = pc.replace_substring(out, _PUA_BACKSLASH, "\\")
    for marker, letter in zip(_PUA_ALL, _PUA_LETTERS):
        out = pc.replace_substring(out, "\\" + _PUA_LITERAL + letter, marker)
    return out


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


@dataclass
class _BadRow:
    record: int
    text: str
    reason: str
    column: Optional[str] = None


def read_blocks(
    stream: Readable,
    source_name: str,
    table: TableSchema,
    dialect: Dialect,
    *,
    mapping: Optional[Mapping[str, str]] = None,
    ignore: Collection[str] = (),
    filled: Collection[str] = (),
    block_size: int = 16 << 20,
    on_note: Optional[Callable[[str], None]] = None,
) -> Generator[ParsedBlock, None, None]:
    """Stream ``stream`` as parsed blocks of about ``block_size`` bytes.

    The CSV's columns are resolved against ``table`` with :func:`resolve_columns` (``mapping``,
    ``ignore``, ``filled``) before the first block is returned. Rows with the wrong number of
    fields or invalid UTF-8 (in a written column) become :class:`~loader.rejects.Reject` s in
    the block that covers their record number. Raises SchemaError / ConfigError for column
    problems (a header wider than MAX_CSV_COLUMNS included) and SourceError for an unreadable
    or empty (header expected) source, or a record larger than a parse block. A source whose
    lines all fall within ``dialect.skip_rows`` is an empty input: no blocks, and a note for
    the report given to ``on_note`` (logged as a warning without one).
    """
    enc = codecs.lookup(dialect.encoding).name
    transcode = None if enc in ("utf-8", "utf-8-sig") else dialect.encoding
    src: Any = stream
    if transcode or dialect.backslash_escapes:
        src = _Transcoder(stream, transcode, dialect)
    invalid_label = "UTF-8" if transcode is None else dialect.encoding

    head = _Head(src, min(_HEAD_CHUNK, block_size))
    if dialect.skip_rows:
        lines = head.skip_lines(dialect.skip_rows)
        if head.at_end():
            note = (
                f"{source_name}: skipped: its {lines} line{'s' if lines != 1 else ''} "
                f"{'are' if lines != 1 else 'is'} all within --skip-rows {dialect.skip_rows}"
            )
            (on_note or log.warning)(note)
            return
    if dialect.header:
        _check_header(head, dialect, source_name, dialect.skip_rows + 1, block_size)
    src = head

    pending: list[_BadRow] = []
    header_rows = 1 if dialect.header else 0
    record_base = header_rows  # pyarrow row numbers count the header

    def on_invalid(row: Any) -> str:
        number = row.number
        if number is None or number < 0:  # never with a serial reader; keep going regardless
            number = record_base + 1
        pending.append(
            _BadRow(
                number - record_base,
                row.text,
                f"expected {row.expected_columns} fields, found {row.actual_columns}",
            )
        )
        return "skip"

    trailing = dialect.trailing_delimiter
    if dialect.header:
        read_opts = pacsv.ReadOptions(
            use_threads=False,
            block_size=block_size,
            autogenerate_column_names=True,
        )
        n_fields: Optional[int] = None
    else:
        csv_names = list(dialect.columns or [c.name for c in table.writable_columns])
        n_fields = len(csv_names) + (1 if trailing else 0)
        read_opts = pacsv.ReadOptions(
            use_threads=False,
            block_size=block_size,
            column_names=[f"f{i}" for i in range(n_fields)],
        )
    parse_opts = pacsv.ParseOptions(
        delimiter=dialect.delimiter,
        quote_char=dialect.quote_char or False,
        double_quote=dialect.double_quote,
        escape_char=dialect.escape_char or False,
        newlines_in_values=dialect.newlines_in_values,
        ignore_empty_lines=dialect.skip_blank_lines,
        invalid_row_handler=on_invalid,
    )
    convert_opts = pacsv.ConvertOptions(
        column_types={f"f{i}": pa.binary() for i in range(MAX_CSV_COLUMNS)},
        null_values=list(dialect.null_markers),
        strings_can_be_null=bool(dialect.null_markers),
        quoted_strings_can_be_null=False,
    )
    gate = _ReadaheadGate(src, READAHEAD_BLOCKS)
    try:
        try:
            gate.reader = gate.call(
                pacsv.open_csv,
                gate.for_arrow(),
                read_options=read_opts,
                parse_options=parse_opts,
                convert_options=convert_opts,
            )
        except pa.ArrowInvalid as e:
            if "Empty CSV file" in str(e):
                if dialect.header:
                    raise SourceError(f"{source_name}: empty file, expected a header") from None
                return
            if "straddl" in str(e):  # the first record (no header) is larger than a block
                raise _too_large(source_name, 1, dialect.skip_rows + 1, block_size) from None
            raise SourceError(f"{source_name}: cannot parse as CSV: {e}") from None

        newline_markers = ["\n"] + ([_PUA_LF] if dialect.backslash_escapes else [])
        count_newlines = dialect.newlines_in_values or dialect.backslash_escapes
        next_record = 1
        next_line = dialect.skip_rows + 1
        targets: Optional[list[Optional[str]]] = None
        used: list[tuple[int, str]] = []
        held: Optional[ParsedBlock] = None
        held_last: Optional[tuple[Optional[bytes], int]] = None

        def as_text(col: pa.Array) -> pa.Array:
            # For header names only: invalid bytes are replaced, not fatal.
            return pa.array(
                [None if v is None else v.decode("utf-8", "replace") for v in col.to_pylist()],
                pa.string(),
            )

        while True:
            try:
                batch = gate.next_batch()
            except StopIteration:
                batch = None
            except pa.ArrowInvalid as e:
                if "straddl" in str(e):
                    # Every record before it was handed on, or waits in pending (a wrong
                    # field count, found ahead of the batches): the next one is too large.
                    record, line = next_record, next_line
                    if targets is None and dialect.header:
                        line += 1  # the header, not yet counted
                    for bad in sorted(pending, key=lambda b: b.record):
                        if bad.record == record:
                            record += 1
                            line += 1 + bad.text.count("\n")
                    raise _too_large(source_name, record, line, block_size) from None
                raise SourceError(
                    f"{source_name}: cannot parse as CSV near record {next_record}: {e}"
                ) from None
            gate.took_batch()
            if batch is None:
                if targets is None and dialect.header:
                    raise SourceError(f"{source_name}: empty file, expected a header")
                tail = b"".join(gate.tail)
                if pending:
                    last = max(pending, key=lambda b: b.record)
                    if _open_quote_at_end(tail, last.text.encode("utf-8", "replace"), dialect):
                        last.reason = _OPEN_QUOTE
                if held is not None:
                    if not pending and held_last is not None:
                        value, last_record = held_last
                        held = _reject_open_quote(
                            held, value, last_record, tail, dialect, source_name, table.name
                        )
                    yield held
                if pending:
                    yield _rejects_only(pending, next_record, next_line, source_name, table, used)
                return
            if targets is None:
                if dialect.header:
                    if batch.num_rows == 0:
                        continue
                    if batch.num_columns > MAX_CSV_COLUMNS:  # a header over several lines
                        raise _too_wide(source_name, f"{batch.num_columns:,}")
                    head = batch.slice(0, 1)
                    names_arr = [
                        as_text(head.column(i))[0].as_py() for i in range(head.num_columns)
                    ]
                    if dialect.backslash_escapes:
                        names_arr = _unescape_backslashes(
                            pa.array(names_arr, pa.string()), dialect
                        ).to_pylist()
                    names = [n or "" for n in names_arr]
                    nl = sum(n.count("\n") for n in names)
                    next_line += 1 + nl
                    if trailing is None:
                        trailing = len(names) > 1 and names[-1] == ""
                    if trailing:
                        if names[-1] != "":
                            raise SchemaError(
                                f"{source_name}: trailing delimiter expected, but the header's "
                                f"last column is {names[-1]!r}"
                            )
                        names = names[:-1]
                    csv_names = names
                    n_fields = len(names) + (1 if trailing else 0)
                    batch = batch.slice(1)
                targets = resolve_columns(table, csv_names, mapping, ignore, filled)
                used = [(i, t) for i, t in enumerate(targets) if t is not None]
            block, n_records, n_lines = _make_block(
                batch,
                pending,
                next_record,
                next_line,
                source_name,
                table,
                dialect,
                used,
                n_fields if trailing else None,
                newline_markers if count_newlines else [],
                invalid_label,
            )
            next_record += n_records
            next_line += n_lines
            # One block is held back until the next one is read: at the end of the input its
            # last record may turn out to hold a quote that is never closed (Arrow's reader
            # takes the end of the input as the end of the field).
            if held is not None:
                yield held
            held = block
            held_last = (
                (batch.column(batch.num_columns - 1)[-1].as_py(), next_record - 1)
                if batch.num_rows
                else None
            )

    finally:
        gate.release()


_OPEN_QUOTE = (
    "a quote opened in this record is never closed: the rest of the input was read into one field"
)


def _open_quote_at_end(tail: bytes, last_field: Optional[bytes], dialect: Dialect) -> bool:
    """Whether the input ends inside a quoted field whose value is ``last_field``.

    Arrow's reader takes the end of the input as the end of an open quoted field, so a quote
    left open swallows every line after it into one value. Such a field is always the last
    field of the last record, and the input then ends with an opening quote (at the start of
    a field) followed by the value as written, with no closing quote after it. ``tail``: the
    last bytes of the input Arrow read (at least the field).
    """
    q = dialect.quote_char
    if q is None or last_field is None:
        return False
    qb = q.encode()
    raw = last_field
    if dialect.escape_char is not None:
        e = dialect.escape_char.encode()
        raw = raw.replace(e, e + e).replace(qb, e + qb)
    elif dialect.double_quote:
        raw = raw.replace(qb, qb + qb)
    written = qb + raw
    if not tail.endswith(written):
        return False
    before = len(tail) - len(written) - 1
    if before < 0:
        return True  # the field starts the input
    return tail[before : before + 1] in (dialect.delimiter.encode(), b"\n", b"\r")


def _reject_open_quote(
    block: ParsedBlock,
    value: Optional[bytes],
    last_record: int,
    tail: bytes,
    dialect: Dialect,
    source: str,
    table: str,
) -> ParsedBlock:
    """``block`` (the input's last) with its last record rejected when a quote opened in it
    is never closed (``value``: the record's last field as read); unchanged otherwise."""
    n = len(block.record_numbers)
    if not n or block.record_numbers[n - 1].as_py() != last_record:
        return block  # the last record is a reject already
    if not _open_quote_at_end(tail, value, dialect):
        return block
    assert value is not None
    line = block.line_numbers[n - 1].as_py() if block.line_numbers is not None else None
    reject = Reject(
        source, line, last_record, None, _OPEN_QUOTE, value.decode("utf-8", "replace"), table
    )
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


def _make_block(
    batch: pa.RecordBatch,
    pending: list[_BadRow],
    next_record: int,
    next_line: int,
    source: str,
    table: TableSchema,
    dialect: Dialect,
    used: list[tuple[int, str]],
    trailing_fields: Optional[int],
    newline_markers: list[str],
    invalid_label: str,
) -> tuple[ParsedBlock, int, int]:
    """Build the ParsedBlock for one pyarrow batch plus the invalid rows that fall inside it.

    Returns the block and how many records and physical lines it covers.
    """
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

    rejects: dict[int, Reject] = {}
    for pos, b in zip(bad_pos.tolist(), parse_bad):
        rejects[pos] = Reject(
            source, int(starts[pos]), b.record, None, b.reason, b.text, table.name
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
            reject_rows(rows, name, f"invalid {invalid_label} in column {name}", col)
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
    block = ParsedBlock(
        strings=pa.table(strings) if strings else pa.table({}).slice(0, 0),
        record_numbers=pa.array(records[kept_pos], pa.int64()),
        line_numbers=pa.array(starts[kept_pos], pa.int64()),
        rejects=[rejects[p] for p in sorted(rejects)],
    )
    return block, total, int(lines_per.sum())


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
        rejects.append(Reject(source, line, b.record, None, b.reason, b.text, table.name))
        line += 1 + b.text.count("\n")
    pending.clear()
    empty = pa.table({name: pa.array([], pa.string()) for _, name in used})
    return ParsedBlock(empty, pa.array([], pa.int64()), pa.array([], pa.int64()), rejects)
