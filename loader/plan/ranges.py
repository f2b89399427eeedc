"""The range planner: split plain CSV files into record-aligned byte ranges that workers read
independently (see :mod:`loader.plan`).

A file is read once, in chunks, and scanned with numpy (:mod:`loader.plan.scan`) for record
boundaries; a range starts just after a record-ending LF at or past every ``target`` bytes.
Each :class:`ByteRange` carries what its reader needs to give the same rows, rejects, record
and line numbers as a reader of the whole file: the file's prefix (skipped rows and header,
``[0, data_start)``) that it reads first, its first line and its first record number.

Read as one range each: compressed files, standard input and pipes (they cannot be re-read at
an offset), files in an encoding that is not ASCII-compatible, dialects with a pyarrow-style
``escape_char``, backslash escapes combined with quoting, and files with a stray quote (a quote
that neither opens nor closes a field, which Arrow reads literally: counting quotes cannot say
where such a file's records start).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Optional

from .. import parse
from ..parse.stream import one_field_line
from ..source import SourceInfo, open_source
from ..source.gcs import ClientArg
from .scan import Cut, Scanner, ScanResult, Unsplittable

DEFAULT_RANGE_SIZE = 128 << 20
"""Target bytes per range (ranges end at the first record boundary past it)."""

READ_CHUNK = 8 << 20
"""Bytes scanned at a time."""

_ASCII_SAFE = ("utf-8", "utf-8-sig", "ascii", "latin-1", "iso8859-", "cp125", "mac-roman")


@dataclass(frozen=True)
class ByteRange:
    """One range of one source: bytes ``[start, stop)`` (``stop`` None: to the end)."""

    source: SourceInfo
    index: int
    """0-based position of the range in its file."""
    start: int
    stop: Optional[int]
    data_start: int
    """End of the file's prefix (skipped rows and header) that a range with ``start > 0``
    reads before its own bytes; 0 when there is none."""
    prefix_lines: int
    """Lines of the prefix as the parser counts them (``skip_rows`` + the header's)."""
    first_line: int
    """1-based physical line at ``start`` (newlines inside quoted fields counted)."""
    first_record: int
    """1-based data record number of the range's first record."""

    @property
    def id(self) -> str:
        """A stable name: the source's uri and the range's index."""
        return f"{self.source.uri}#{self.index}"

    @property
    def header_skipped(self) -> bool:
        """True when the range does not hold the file's header (it reads the prefix)."""
        return self.start > 0

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.stop is None


def splittable(info: SourceInfo, dialect: parse.Dialect) -> Optional[str]:
    """None when ``info`` may be split into ranges, else why not."""
    if info.kind not in ("file", "gcs"):
        return f"{info.kind} cannot be read at an offset"
    if info.compression is not None:
        return f"{info.compression}-compressed"
    if info.size is None:
        return "size unknown"
    if dialect.escape_char is not None:
        return "an escape_char dialect"
    if dialect.backslash_escapes and dialect.quote_char is not None:
        return "backslash escapes with quoting"
    enc = codecs.lookup(dialect.encoding).name
    if not enc.startswith(_ASCII_SAFE):
        return f"encoding {dialect.encoding} is not ASCII-compatible"
    return None


def scan_stream(
    read: Callable[[int], bytes],
    dialect: parse.Dialect,
    target: int,
    chunk: int = READ_CHUNK,
) -> ScanResult:
    """Scan a whole file given as ``read(n)`` calls; raises :class:`Unsplittable`."""
    scanner = Scanner(dialect, target)
    while True:
        data = read(chunk)
        if not data:
            return scanner.finish()
        scanner.feed(data)


def ranges_from_scan(info: SourceInfo, res: ScanResult) -> list[ByteRange]:
    """The ranges ``res``'s cuts make of ``info``."""
    starts: list[Cut] = [Cut(0, 1, 1), *res.cuts]
    out = []
    for i, cut in enumerate(starts):
        stop = starts[i + 1].offset if i + 1 < len(starts) else None
        out.append(
            ByteRange(
                source=info,
                index=i,
                start=cut.offset,
                stop=stop,
                data_start=res.data_start if i else 0,
                prefix_lines=res.prefix_lines if i else 0,
                first_line=cut.line,
                first_record=cut.record,
            )
        )
    return out


def whole_range(info: SourceInfo) -> ByteRange:
    """The one range of a file that is not split."""
    return ByteRange(info, 0, 0, None, 0, 0, 1, 1)


def plan_file(
    info: SourceInfo,
    dialect: parse.Dialect,
    *,
    target: int = DEFAULT_RANGE_SIZE,
    storage_client: ClientArg = None,
    chunk: int = READ_CHUNK,
) -> list[ByteRange]:
    """Split one source into record-aligned ranges of about ``target`` bytes (one range when
    it is smaller, or cannot be split: see the module docstring)."""
    if splittable(info, dialect) is not None or (info.size or 0) <= target:
        return [whole_range(info)]
    with open_source(info, storage_client=storage_client, chunk_size=chunk) as stream:
        if stream.compression is not None:  # gzip found by its magic bytes
            return [whole_range(info)]
        head: list[bytes] = []

        def read(n: int) -> bytes:
            data = stream.read(n)
            if len(head) < _HEAD_READS:
                head.append(data)
            return data  # type: ignore[no-any-return]

        try:
            res = scan_stream(read, dialect, target, chunk)
            if res.cuts:
                _check_first_line(b"".join(head), dialect)
        except Unsplittable:
            return [whole_range(info)]
    return ranges_from_scan(info, res)


_HEAD_READS = 4
"""Reads whose bytes plan_file keeps for :func:`_check_first_line`."""


def _check_first_line(head: bytes, dialect: parse.Dialect) -> None:
    """Raise :class:`Unsplittable` unless the first line after ``skip_rows`` of ``head`` (the
    file's start) holds a delimiter: a file of one field a record reads a blank line as a
    record (loader.parse.reader), which the scanner's record numbers do not count. A blank
    first line, or one not seen whole without a delimiter, is taken the same way."""
    lines = head.split(b"\n", dialect.skip_rows + 1)
    line = lines[dialect.skip_rows] if len(lines) > dialect.skip_rows else b""
    if one_field_line(line, dialect) is not False:
        raise Unsplittable("the first line may hold one field: blank lines may be records")


def plan_ranges(
    sources: Iterable[SourceInfo],
    dialect: parse.Dialect,
    *,
    target: int = DEFAULT_RANGE_SIZE,
    storage_client: ClientArg = None,
    chunk: int = READ_CHUNK,
) -> list[ByteRange]:
    """Every source's ranges, in source order."""
    out: list[ByteRange] = []
    for info in sources:
        out.extend(
            plan_file(info, dialect, target=target, storage_client=storage_client, chunk=chunk)
        )
    return out
