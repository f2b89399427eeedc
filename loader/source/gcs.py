"""Cloud Storage: the client, the endpoint probe, ranged reads of one object generation, and
the translation of storage, auth and transport errors into :class:`~loader.errors.SourceError`.

Objects are read in ranged requests of ``chunk_size`` bytes pinned to the listed generation,
so memory does not grow with object size. Network failures the storage client could not retry
away are marked transient.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional

from ..errors import SourceError
from .identity import SourceInfo
from .raw import _one_line, _RawSource

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud.storage import Blob, Client

DEFAULT_CHUNK_SIZE = 8 << 20
"""Bytes per ranged GCS read: one chunk (plus the client's copy of it) is the memory cost."""

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
EMULATOR_PROJECT = "spanner-loader-local"

ClientArg = Any
"""A ``google.cloud.storage.Client``, a zero-argument factory returning one, or None (default)."""


def make_storage_client(project: Optional[str] = None) -> Client:
    """A storage client: anonymous against ``$STORAGE_EMULATOR_HOST`` if set, else ADC.

    Reading and listing need no project, so none is inferred for real GCS (that would fail on
    machines whose credentials carry none); the emulator gets one because the client wants it.
    """
    try:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        emulator = os.environ.get(EMULATOR_ENV)
        if emulator:
            if "://" not in emulator:  # host:port, as for the Spanner emulator: the client
                os.environ[EMULATOR_ENV] = "http://" + emulator  # takes a URL only
            project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or EMULATOR_PROJECT
            return storage.Client(project=project, credentials=AnonymousCredentials())
        return storage.Client(project=project)
    except Exception as exc:
        raise _credentials_error(exc) from exc


def _credentials_error(exc: BaseException) -> SourceError:
    return SourceError(
        f"cannot create a Cloud Storage client: {_one_line(exc)}",
        hint="run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS"
        f" to a service account key); for an emulator set {EMULATOR_ENV}=host:port",
    )


_probed: set[str] = set()


def probe_storage(timeout: float) -> None:
    """Fail fast when the Cloud Storage endpoint (``$STORAGE_EMULATOR_HOST`` or Google's) cannot
    be resolved or refuses connections, instead of retrying for --max-retry-time. Once per
    endpoint and process."""
    from urllib.parse import urlsplit

    from ..connection import reach

    url = os.environ.get(EMULATOR_ENV) or "https://storage.googleapis.com"
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        host = None
    if not host:
        raise SourceError(
            f"{EMULATOR_ENV}={os.environ.get(EMULATOR_ENV)!r} is not a URL or host:port",
            hint=f"e.g. {EMULATOR_ENV}=http://localhost:9023, or unset it",
        )
    if url in _probed:
        return
    label = (
        f"the Cloud Storage emulator at {url} ({EMULATOR_ENV})"
        if os.environ.get(EMULATOR_ENV)
        else f"Cloud Storage at {url}"
    )
    reach(host, port, label, timeout, hint="check the address and that the server is running")
    if parts.scheme == "http":
        _answers_http(host, port, label, timeout)
    _probed.add(url)


def _answers_http(host: str, port: int, label: str, timeout: float) -> None:
    """An emulator's address (plain HTTP) must answer HTTP/1.1: a server of another kind (the
    Spanner emulator's gRPC port, say) takes the connection but never gives a storage
    answer, and the client would retry it for --max-retry-time."""
    import socket

    got, silent = b"", False
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(f"HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            while len(got) < 5:
                more = conn.recv(5 - len(got))
                if not more:
                    break
                got += more
    except TimeoutError:
        silent = True
    except OSError:
        pass  # a reset: judged by what arrived
    if not got.startswith(b"HTTP/"):
        why = (
            "it answered in another protocol"
            if got
            else f"no answer within {timeout:g} s"
            if silent
            else "it closed the connection"
        )
        raise SourceError(
            f"{label} does not answer HTTP ({why})",
            hint=f"point {EMULATOR_ENV} at a Cloud Storage emulator's HTTP address, "
            "e.g. http://localhost:9023 (not a gRPC port such as the Spanner emulator's)",
        )


class _LazyClient:
    """Creates the storage client on first use, so local-only loads never need credentials."""

    def __init__(self, arg: ClientArg) -> None:
        self._arg = arg
        self._client: Optional[Client] = None

    def get(self) -> Client:
        if self._client is None:
            if self._arg is None:
                self._client = make_storage_client()
            elif callable(self._arg):
                try:
                    self._client = self._arg()
                except SourceError:
                    raise
                except Exception as exc:
                    raise _credentials_error(exc) from exc
            else:
                self._client = self._arg
        assert self._client is not None
        return self._client


def _gcs_error(exc: BaseException, uri: str, action: str) -> SourceError:
    """Translate a storage/auth/transport exception into a SourceError about ``uri``."""
    if isinstance(exc, SourceError):
        return exc
    from google.api_core import exceptions as gexc

    try:
        from google.auth import exceptions as auth_exc
    except ImportError:  # pragma: no cover - google-auth always ships with the storage client
        auth_exc = None  # type: ignore[assignment]

    cause = exc
    if isinstance(exc, gexc.RetryError) and exc.cause is not None:
        cause = exc.cause
    bucket = uri[5:].split("/", 1)[0] if uri.startswith("gs://") else ""
    if isinstance(cause, gexc.Forbidden):
        return SourceError(
            f"permission denied {action} {uri}: {_one_line(cause)}",
            hint=f"the credentials need storage.objects.get and storage.objects.list on "
            f"gs://{bucket} (roles/storage.objectViewer); check `gcloud auth list`",
        )
    if isinstance(cause, gexc.Unauthorized):
        return SourceError(
            f"not authenticated {action} {uri}: {_one_line(cause)}",
            hint="run `gcloud auth application-default login` "
            "or set GOOGLE_APPLICATION_CREDENTIALS",
        )
    if auth_exc is not None and isinstance(
        cause, (auth_exc.DefaultCredentialsError, auth_exc.RefreshError)
    ):
        return _credentials_error(cause)
    if isinstance(cause, gexc.NotFound):
        return SourceError(
            f"not found {action} {uri}: {_one_line(cause)}",
            hint=f"check the name with `gcloud storage ls gs://{bucket}/`",
        )
    transient = isinstance(
        cause,
        (
            gexc.TooManyRequests,
            gexc.InternalServerError,
            gexc.BadGateway,
            gexc.ServiceUnavailable,
            gexc.GatewayTimeout,
            ConnectionError,
            TimeoutError,
        ),
    ) or _is_transport_error(cause)
    if transient or isinstance(exc, gexc.RetryError):
        return SourceError(
            f"network failure {action} {uri} (gave up after retrying): {_one_line(cause)}",
            hint="check connectivity to storage.googleapis.com (or the emulator) and re-run; "
            "a load resumes from its checkpoint",
            transient=True,
        )
    return SourceError(
        f"error {action} {uri}: {type(cause).__name__}: {_one_line(cause)}",
        hint="re-run; if it persists, check the object with `gcloud storage objects describe`",
    )


def _is_transport_error(exc: BaseException) -> bool:
    try:
        import requests
        from google.auth import exceptions as auth_exc
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, (requests.exceptions.RequestException, auth_exc.TransportError))


class _ChunkSink:
    """A write target for one ranged download, reused for every chunk of an object.

    Downloading into one preallocated buffer (instead of ``download_as_bytes``, which grows a
    BytesIO and then copies it) keeps the cost of a chunk at one chunk, and stops the allocator
    from fragmenting under a stream of large short-lived objects.
    """

    def __init__(self, capacity: int) -> None:
        self.buf = bytearray(capacity)
        self.n = 0

    def write(self, data: Any) -> int:
        end = self.n + len(data)
        if end > len(self.buf):
            raise _Overflow(end)
        self.buf[self.n : end] = data
        self.n = end
        return len(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        # Only used by the client to restart a transcoded download from 0 (raw ones never are).
        self.n = pos if whence == 0 else self.n + pos
        return self.n

    def tell(self) -> int:
        return self.n


class _Overflow(Exception):
    """The server sent more bytes than the range asked for."""


class _GcsRangeReader(_RawSource):
    """Reads one object generation in ranged requests, holding one chunk at a time.

    Every request carries ``ifGenerationMatch``, so GCS answers 412 once the object is replaced
    and 404 once it is deleted. Lengths are checked too (servers that ignore the precondition
    still show a shrunk object as a short read; the last request asks for one byte past the end
    so a grown object shows as a long one). ``raw_download`` turns off decompressive
    transcoding: we always receive the stored bytes and decompress them ourselves.
    """

    def __init__(
        self,
        blob: Blob,
        info: SourceInfo,
        chunk_size: int,
        retry: Optional[Retry],
        start: int = 0,
        stop: Optional[int] = None,
    ) -> None:
        super().__init__()
        self._blob = blob
        self._info = info
        self._size = info.size if info.size is not None else 0
        self._stop = self._size if stop is None else stop
        self._chunk_size = chunk_size
        self._retry = retry
        self._pos = start  # object offset of the end of the current chunk
        self._chunk = memoryview(b"")
        self._off = 0
        self._sink: Optional[_ChunkSink] = None

    def readinto(self, b: Any) -> int:
        if self._off >= len(self._chunk):
            if self._pos >= self._stop:
                return 0
            self._fill()
        n = min(len(b), len(self._chunk) - self._off)
        b[:n] = self._chunk[self._off : self._off + n]
        self._off += n
        self.bytes_read += n
        return n

    def _fill(self) -> None:
        start = self._pos
        stop = min(start + self._chunk_size, self._stop)
        last_inclusive = stop if stop == self._size else stop - 1
        kwargs: dict[str, Any] = {
            "start": start,
            "end": last_inclusive,
            "raw_download": True,
            "checksum": None,  # ranged reads cannot be checksummed; gzip's CRC still is
        }
        if self._info.generation is not None:
            kwargs["if_generation_match"] = self._info.generation
        if self._retry is not None:
            kwargs["retry"] = self._retry
        self._chunk.release()  # the sink's buffer is rewritten below
        self._chunk = memoryview(b"")
        if self._sink is None:
            # +1: room for the byte past the end that the last request probes for.
            self._sink = _ChunkSink(min(self._chunk_size, self._stop - start) + 1)
        sink = self._sink
        sink.n = 0
        try:
            self._blob.download_to_file(sink, **kwargs)
        except _Overflow as exc:
            raise self._changed(f"more bytes than the {stop - start} asked for at {start}") from exc
        except Exception as exc:
            raise self._read_error(exc, start) from exc
        if sink.n != stop - start:
            raise self._changed(
                f"got {sink.n} bytes at offset {start} where {stop - start} were expected"
            )
        self._chunk = memoryview(sink.buf)[: sink.n]
        self._off = 0
        self._pos = stop

    def close(self) -> None:
        self._chunk.release()
        self._sink = None
        super().close()

    def _changed(self, detail: str) -> SourceError:
        return SourceError(
            f"{self._info.uri} changed while it was being read "
            f"(generation {self._info.generation}, {self._info.size} bytes): {detail}",
            hint="re-run the load once the object is no longer being rewritten",
        )

    def _read_error(self, exc: BaseException, offset: int) -> SourceError:
        from google.api_core import exceptions as gexc

        cause = exc.cause if isinstance(exc, gexc.RetryError) and exc.cause else exc
        uri = self._info.uri
        if isinstance(cause, gexc.PreconditionFailed):
            return SourceError(
                f"{uri} was replaced while it was being read: generation "
                f"{self._info.generation} is no longer current (at byte {offset})",
                hint="re-run the load to read the new generation from the start",
            )
        if isinstance(cause, gexc.NotFound):
            when = "while it was being read" if offset else "after it was listed"
            return SourceError(
                f"{uri} was deleted or replaced {when} (generation {self._info.generation}, "
                f"at byte {offset})",
                hint="re-run the load once the object is back",
            )
        if isinstance(cause, gexc.RequestRangeNotSatisfiable):
            return self._changed(f"range starting at {offset} is past the end")
        return _gcs_error(exc, uri, "reading")


def read_retry(max_retry_time: float) -> Retry:
    """The storage client's default retry (transient errors only, exponential backoff from
    1 s), giving up after ``max_retry_time`` seconds instead of its 120. A ranged read that
    breaks off mid-response is resumed by the client at the first byte not yet received."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY.with_timeout(max_retry_time)
