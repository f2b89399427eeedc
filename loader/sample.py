"""Sample a table's source rows for pre-splitting (loader/presplit.py): the typed key columns
of a bounded, deterministic selection of rows, read through the load's own parse and convert
stages, so every value is what the load will write.

Two ways to read a source:

* **Windows.** An uncompressed local file or ``gs://`` object larger than
  ``WINDOWS * WINDOW_BYTES`` is read in ``WINDOWS`` windows of ``WINDOW_BYTES`` at evenly
  spread offsets (the first at 0, the last at the end). Each window is cut to whole lines and
  parsed behind the file's own leading lines (skipped rows and header), so column names and
  mappings resolve as in the load. A window that starts inside a quoted field spanning lines
  can yield a row or two of wrong fields; they are rejected by the converter or, at worst,
  shift a split point, which changes where Spanner splits, never what is written.
* **Stream.** Anything else (a small input, a gzip file, a pipe, an encoding that is not
  ASCII-compatible) is read from start to end: every key of a small input; past
  ``MAX_SAMPLE_ROWS`` rows the sample is thinned to every second row, and later blocks
  contribute every 2nd, 4th, ... row, so it stays bounded and evenly spread. Reading a large
  compressed input takes as long as parsing it.

Pipes and stdin can be read only once: ``load --presplit`` leaves them out (a note says so);
the ``presplit`` command reads them.
"""

from __future__ import annotations

import codecs
import io
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import pyarrow as pa

from .config import LoadConfig, TableJob
from .convert import convert_block
from .errors import SourceError
from .parse import read_blocks
from .schema import TableSchema
from .source import SourceInfo, expand_sources, make_storage_client, open_source, read_retry

WINDOWS = 64
"""Windows read per large source."""
WINDOW_BYTES = 256 << 10
MAX_SAMPLE_ROWS = 200_000
"""Rows kept per table; past it a streamed source is thinned (see the module docstring)."""
_ASCII_COMPATIBLE = {"utf-8", "utf-8-sig", "latin-1", "iso8859-1", "cp1252", "ascii"}
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class Sample:
    """The sampled rows of one table: its key and index columns, typed as the load types them."""

    table: str
    rows: pa.Table
    columns: tuple[str, ...]
    bytes_total: int = 0
    """Stored size of the table's sources (0 when unknown), to share split points by size."""
    notes: list[str] = field(default_factory=list)
    rejected: int = 0
    """Sampled rows the parser or the converter rejected (the load would reject them too)."""
    first_reject: Optional[str] = None
    """The first of them, as "file line N: reason"."""


def sample_table(
    config: LoadConfig,
    job: TableJob,
    schema: TableSchema,
    columns: Sequence[str],
    *,
    storage_client: Any = None,
    read_streams: bool = True,
) -> Sample:
    """A bounded, deterministic sample of ``columns`` of the rows ``job``'s sources hold.

    ``read_streams`` False leaves pipes and stdin out (a load reads them after this)."""
    retry = read_retry(config.max_retry_time)
    sources, notes = expand_sources(job.sources, storage_client=storage_client, retry=retry)
    dialect = config.dialect_of(job)
    sample = Sample(schema.name, pa.table({}), tuple(columns), notes=list(notes))
    sample.bytes_total = sum(s.size or 0 for s in sources)
    kept = _Kept(list(columns))

    def convert(stream: Any, uri: str, keep_every: Callable[[], int]) -> None:
        blocks = read_blocks(
            stream,
            uri,
            schema,
            dialect,
            **config.column_options(),
            block_size=config.block_size,
            on_note=lambda _note: None,
        )
        for block in blocks:
            converted = convert_block(block, schema, config.convert, uri)
            bad = [*block.rejects, *converted.rejects]
            if bad and sample.first_reject is None:
                r = bad[0]
                where = f" line {r.line}" if r.line is not None else ""
                sample.first_reject = f"{r.source}{where}: {r.reason}"
            sample.rejected += len(bad)
            kept.add(converted.table, keep_every())

    for info in sources:
        if info.kind in ("stdin", "pipe") and not read_streams:
            sample.notes.append(
                f"{info.uri}: not sampled for split points (a pipe is read once, by the load); "
                "run `spanner-loader presplit` on it ahead of the load instead"
            )
            continue
        windows = _windows(info, dialect.encoding, storage_client)
        if windows is None:
            with open_source(info, storage_client=storage_client, retry=retry) as stream:
                convert(stream, info.uri, kept.stride)
            continue
        head_lines = dialect.skip_rows + (1 if dialect.header else 0)
        head = _head(windows[0], head_lines)
        if head is None:  # a header longer than a window: read the whole source instead
            with open_source(info, storage_client=storage_client, retry=retry) as stream:
                convert(stream, info.uri, kept.stride)
            continue
        for i, window in enumerate(windows):
            body = _whole_lines(window, first=i == 0, last=i == len(windows) - 1)
            if not body.strip():
                continue
            data = body if i == 0 else head + body
            convert(io.BytesIO(data), info.uri, lambda: 1)
    sample.rows = kept.table()
    return sample


class _Kept:
    """The rows kept so far: thinned to every second row each time they pass the bound."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.parts: list[pa.Table] = []
        self.count = 0
        self.step = 1
        self.offset = 0
        """Rows of the stream seen since the last kept one (so the stride runs across blocks)."""

    def stride(self) -> int:
        return self.step

    def add(self, table: pa.Table, every: int) -> None:
        if not table.num_rows:
            return
        table = table.select([c for c in self.columns if c in table.column_names])
        if every > 1:
            first = (-self.offset) % every
            self.offset = (self.offset + table.num_rows) % every
            table = table.take(pa.array(range(first, table.num_rows, every), pa.int64()))
        self.parts.append(table)
        self.count += table.num_rows
        while self.count > MAX_SAMPLE_ROWS:
            whole = pa.concat_tables(self.parts, promote_options="default")
            whole = whole.take(pa.array(range(0, whole.num_rows, 2), pa.int64()))
            self.parts, self.count, self.step = [whole], whole.num_rows, self.step * 2

    def table(self) -> pa.Table:
        if not self.parts:
            return pa.table({})
        return pa.concat_tables(self.parts, promote_options="default").combine_chunks()


def _windows(info: SourceInfo, encoding: str, storage_client: Any) -> Optional[list[bytes]]:
    """The evenly spread windows of a large uncompressed file or object; None to stream it."""
    size = info.size or 0
    if info.kind not in ("file", "gcs") or info.compression or size <= WINDOWS * WINDOW_BYTES:
        return None
    if codecs.lookup(encoding).name not in _ASCII_COMPATIBLE:
        return None  # newlines are not single 0x0A bytes
    offsets = [i * (size - WINDOW_BYTES) // (WINDOWS - 1) for i in range(WINDOWS)]
    read = _range_reader(info, storage_client)
    first = read(0, WINDOW_BYTES)
    if first.startswith(_GZIP_MAGIC):
        return None  # gzip data under a plain name: the stream decompresses it
    return [first, *(read(o, WINDOW_BYTES) for o in offsets[1:])]


def _range_reader(info: SourceInfo, storage_client: Any) -> Callable[[int, int], bytes]:
    if info.kind == "file":
        path = info.name or info.uri

        def read_file(offset: int, length: int) -> bytes:
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    return f.read(length)
            except OSError as e:
                raise SourceError(f"cannot read {info.uri}: {e.strerror or e}") from e

        return read_file
    client = storage_client() if callable(storage_client) else storage_client
    if client is None:
        client = make_storage_client()
    blob = client.bucket(info.bucket).blob(info.name, generation=info.generation)

    def read_object(offset: int, length: int) -> bytes:
        from google.api_core import exceptions as gexc

        try:
            data = blob.download_as_bytes(start=offset, end=offset + length - 1, raw_download=True)
        except gexc.GoogleAPICallError as e:
            raise SourceError(
                f"cannot read {info.uri}: {getattr(e, 'message', e)}",
                hint="check the object and the credentials' read access",
            ) from e
        return bytes(data)

    return read_object


def _head(first: bytes, lines: int) -> Optional[bytes]:
    """The first ``lines`` lines of a source (skipped rows and header); None past the window."""
    end = 0
    for _ in range(lines):
        nl = first.find(b"\n", end)
        if nl < 0:
            return None
        end = nl + 1
    return first[:end]


def _whole_lines(window: bytes, *, first: bool, last: bool) -> bytes:
    """A window cut to whole lines: from the line after its start (the first window from its
    start) to its last line end (the last window to its end: the source's last line)."""
    start = 0 if first else window.find(b"\n") + 1
    if start <= 0 and not first:
        return b""
    end = len(window) if last else window.rfind(b"\n") + 1
    return window[start:end] if end > start else b""
