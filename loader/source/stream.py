"""Opening a listed source: :func:`open_source` returns a :class:`SourceStream`, the
decompressed bytes of one source as a read-only binary file object for ``pyarrow.csv.open_csv``.

gzip (by name, ``Content-Encoding`` or magic bytes) is decompressed on the fly; bytes are passed
through exactly, with no newline or encoding translation.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, Optional

from ..errors import SourceError
from .compression import _SNIFFED_COMMAND, _sniff, _unsupported
from .gcs import DEFAULT_CHUNK_SIZE, ClientArg, _gcs_error, _GcsRangeReader, _LazyClient
from .identity import SourceInfo
from .local import _FileReader, _PipeReader, _StdinReader
from .raw import _one_line, _RawSource

if TYPE_CHECKING:
    from google.api_core.retry import Retry

# Reading in blocks this large keeps Python overhead per call negligible without holding much.
_LOCAL_BUFFER = 1 << 20
_GCS_BUFFER = 256 << 10
_SNIFF_BYTES = 10


class _Counted:
    """A file object that counts the bytes read through it (what GzipFile takes in)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._inner.read(size)
        self.count += len(data)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SourceStream(io.BufferedIOBase):
    """The decompressed bytes of one source: a read-only, non-seekable binary file object.

    Pass it to ``pyarrow.csv.open_csv``. Read errors surface as :class:`SourceError` (corrupt
    gzip data included). :meth:`compressed_position` tells how many stored bytes were consumed,
    for progress against :attr:`SourceInfo.size`. Closing it releases the file/connection chunk.
    """

    def __init__(
        self,
        info: SourceInfo,
        raw: _RawSource,
        buffered: io.BufferedReader[Any],
        compression: Optional[str],
    ) -> None:
        super().__init__()
        self.info = info
        self.compression = compression
        self._raw = raw
        self._buffered = buffered
        self._fed = _Counted(buffered)
        self._inner: Any = (
            gzip.GzipFile(fileobj=self._fed, mode="rb") if compression == "gzip" else buffered
        )
        self._pos = 0
        self._pending = b""  # at most one byte held back by read(); see there

    @property
    def name(self) -> str:
        """The source URI (what error messages and reports call it)."""
        return self.info.uri

    def compressed_position(self) -> int:
        """Stored (possibly compressed) bytes consumed so far."""
        return self._raw.bytes_read

    def stored_per_delivered(self) -> float:
        """Stored bytes per delivered byte so far: 1 for a plain source; for a compressed one
        what the decompressor has taken in per byte it gave out (not what the read-ahead
        fetched), for progress."""
        if self._inner is self._buffered or not self._pos:
            return 1.0
        return self._fed.count / self._pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        """Decompressed bytes delivered so far."""
        return self._pos

    @contextlib.contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except SourceError:
            raise
        except (OSError, EOFError, zlib.error) as exc:
            if self.compression == "gzip":
                raise SourceError(
                    f"{self.info.uri}: corrupt or truncated gzip data after "
                    f"{self._raw.bytes_read} compressed bytes: {_one_line(exc)}",
                    hint="check the file with `gzip -t`; re-upload it if it is damaged",
                ) from exc
            raise SourceError(f"cannot read {self.info.uri}: {_one_line(exc)}") from exc

    def _read_inner(self, size: int) -> bytes:
        with self._translate():
            data: bytes = self._inner.read(size)
        return data

    def read(self, size: Optional[int] = -1) -> bytes:
        """Up to ``size`` bytes (all that is left if negative); ``b""`` only at the end.

        A block never ends in ``\\r`` while more data follows (the ``\\r`` opens the next block
        instead): Arrow's CSV reader drops the ``\\n`` of a quoted CRLF split between two blocks
        (apache/arrow#51368). The bytes delivered are exactly the source's.
        """
        self._check_open()
        pending, self._pending = self._pending, b""
        if size is None or size < 0:
            data = pending + self._read_inner(-1)
        elif size == 0:
            self._pending = pending
            return b""
        else:
            data = (
                pending + self._read_inner(size - len(pending)) if size > len(pending) else pending
            )
            if data.endswith(b"\r"):
                if len(data) > 1:
                    data, self._pending = data[:-1], b"\r"
                else:
                    after = self._read_inner(1)
                    if after == b"\r" or (after and size < 2):
                        self._pending = after
                    else:
                        data += after
        self._pos += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        """Same as :meth:`read` (the layers below buffer already)."""
        return self.read(size)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def readline(self, size: Optional[int] = -1) -> bytes:
        self._check_open()
        limit = -1 if size is None or size < 0 else size
        line, self._pending = self._pending, b""
        if not line.endswith(b"\n") and (limit < 0 or len(line) < limit):
            with self._translate():
                line += self._inner.readline(limit - len(line) if limit >= 0 else -1)
        self._pos += len(line)
        return line

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed source stream")

    def close(self) -> None:
        if self.closed:
            return
        try:
            # GzipFile does not close a fileobj it was given: close each layer ourselves.
            if self._inner is not self._buffered:
                self._inner.close()
            self._buffered.close()
            self._raw.close()
        finally:
            super().close()


def open_source(
    info: SourceInfo,
    *,
    storage_client: ClientArg = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    retry: Optional[Retry] = None,
    stdin: Optional[BinaryIO] = None,
    start: int = 0,
    stop: Optional[int] = None,
) -> SourceStream:
    """Open one listed source as a decompressed :class:`SourceStream` (use it as a context manager).

    GCS objects are read ``chunk_size`` bytes per ranged request, pinned to ``info.generation``;
    ``retry`` overrides the storage client's (bounded) default. ``stdin`` replaces
    ``sys.stdin.buffer`` for ``-``. Data that starts with gzip's magic bytes is decompressed even
    without a ``.gz`` name; other compressed formats are refused. Raises :class:`SourceError`.

    ``start`` / ``stop``: only bytes ``[start, stop)`` of a plain (uncompressed) local file or
    GCS object (``stop`` None: to its end), for the range planner (:mod:`loader.plan`).
    """
    if chunk_size <= 0:
        raise SourceError(f"chunk size must be positive, not {chunk_size}")
    ranged = start != 0 or stop is not None
    if ranged and (info.kind not in ("file", "gcs") or info.compression is not None):
        raise SourceError(f"{info.uri}: only a plain file or object can be read in ranges")
    raw: _RawSource
    if info.kind == "gcs":
        if not info.bucket or not info.name:
            raise SourceError(f"bad source record for {info.uri}: bucket and name are required")
        try:
            blob = _LazyClient(storage_client).get().bucket(info.bucket).blob(info.name)
        except SourceError:
            raise
        except Exception as exc:
            raise _gcs_error(exc, info.uri, "opening") from exc
        raw = _GcsRangeReader(blob, info, chunk_size, retry, start, stop)
        buffer_size = min(chunk_size, _GCS_BUFFER)
    elif info.kind == "file":
        raw = _FileReader(info.name or info.uri, info, start, stop)
        buffer_size = _LOCAL_BUFFER
    elif info.kind == "stdin":
        raw = _StdinReader(stdin if stdin is not None else sys.stdin.buffer)
        buffer_size = _LOCAL_BUFFER
    elif info.kind == "pipe":
        raw = _PipeReader(info.name or info.uri)
        buffer_size = _LOCAL_BUFFER
    else:
        raise SourceError(f"bad source record for {info.uri}: unknown kind {info.kind!r}")

    buffered = io.BufferedReader(raw, buffer_size=max(buffer_size, _SNIFF_BYTES))
    try:
        compression = info.compression
        if compression is None and not ranged:
            # peek() triggers the first read, so a missing or forbidden object fails here.
            sniffed = _sniff(buffered.peek(_SNIFF_BYTES)[:_SNIFF_BYTES])
            if sniffed == "gzip":
                compression = "gzip"
            elif sniffed is not None:
                raise _unsupported(info.uri, sniffed, _SNIFFED_COMMAND.get(sniffed))
        return SourceStream(info, raw, buffered, compression)
    except BaseException as exc:
        buffered.close()
        raw.close()
        if isinstance(exc, OSError):
            raise SourceError(f"cannot read {info.uri}: {_one_line(exc)}") from exc
        raise
