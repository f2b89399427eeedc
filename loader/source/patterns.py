"""Sources: find every input a load names and open each as a streamed, decompressed byte stream.

A source pattern is one of:

* ``gs://bucket/object`` -- one object;
* ``gs://bucket/prefix/`` (trailing slash) -- every object under the prefix;
* ``gs://bucket/logs/2024-*/part-?.csv.gz`` -- a glob (``*``, ``**``, ``?``, ``[...]``);
* ``data/orders.csv``, ``data/*.csv``, ``data/`` -- the same three forms for local paths;
* ``-`` -- standard input.

Glob syntax is the same everywhere: ``*`` and ``?`` do not cross ``/``, ``**`` does (``a/**/b``
also matches ``a/b``), ``[abc]``, ``[a-z]`` and ``[!abc]`` (or ``[^abc]``) match one character.
Matching is done here, not by the server, so the result is the same on GCS, on an emulator and
on disk. Local globs skip hidden files (names starting with ``.``) unless the pattern names one.

:func:`expand_sources` turns patterns into :class:`SourceInfo` records (identity: generation,
size, mtime) in a deterministic order; :func:`open_source` opens one as a :class:`SourceStream`,
a read-only binary file object that ``pyarrow.csv.open_csv`` reads directly. GCS objects are read
in ranged requests of ``chunk_size`` bytes pinned to the listed generation, so memory does not grow
with object size; gzip (``.gz`` or ``Content-Encoding: gzip``) is decompressed on the fly. Bytes
are passed through exactly: no newline or encoding translation.

Every failure leaves this module as a :class:`~loader.errors.SourceError` with a one-line message
and a hint; network failures the storage client could not retry away are marked transient.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, BinaryIO, Optional

from ..errors import SourceError

if TYPE_CHECKING:
    from google.api_core.retry import Retry
    from google.cloud.storage import Blob, Client

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "SourceInfo",
    "SourceStream",
    "expand_sources",
    "glob_to_regex",
    "make_storage_client",
    "open_source",
    "read_retry",
    "total_bytes",
]

DEFAULT_CHUNK_SIZE = 8 << 20
"""Bytes per ranged GCS read: one chunk (plus the client's copy of it) is the memory cost."""

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
EMULATOR_PROJECT = "spanner-loader-local"

ClientArg = Any
"""A ``google.cloud.storage.Client``, a zero-argument factory returning one, or None (default)."""

# How many skipped names a note lists before it says "and N more".
_NOTE_NAMES = 5
_MAGIC = re.compile(r"[*?\[]")
# Reading in blocks this large keeps Python overhead per call negligible without holding much.
_LOCAL_BUFFER = 1 << 20
_GCS_BUFFER = 256 << 10
_SNIFF_BYTES = 10

_UNSUPPORTED_EXT: dict[str, tuple[str, str]] = {
    # extension -> (format name, command that writes the decompressed bytes to stdout)
    ".bz2": ("bzip2", "bzip2 -dc"),
    ".zst": ("zstd", "zstd -dc"),
    ".zstd": ("zstd", "zstd -dc"),
    ".xz": ("xz", "xz -dc"),
    ".lzma": ("lzma", "xz -dc"),
    ".zip": ("zip", "unzip -p"),
    ".snappy": ("snappy", "a snappy decompressor (e.g. python -m snappy -d)"),
    ".sz": ("snappy", "a snappy decompressor (e.g. python -m snappy -d)"),
    ".lz4": ("lz4", "lz4 -dc"),
    ".br": ("brotli", "brotli -dc"),
    ".7z": ("7-zip", "7z x -so"),
    ".z": ("compress (.Z)", "uncompress -c"),
    ".tgz": ("tar archive", "tar -xzOf"),
    ".tar": ("tar archive", "tar -xOf"),
}
_SNIFFED_COMMAND = {fmt: cmd for fmt, cmd in _UNSUPPORTED_EXT.values()}
_SNIFFED_COMMAND["bzip2"] = "bzip2 -dc"
_GZIP_EXT = (".gz", ".gzip")
_GZIP_ENCODINGS = ("gzip", "x-gzip")
_IDENTITY_ENCODINGS = ("", "identity")
# Leading bytes of formats a CSV never starts with (none of them is valid UTF-8 text).
_MAGIC_BYTES: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"\xff\x06\x00\x00sNaPpY", "snappy"),
)
_BZIP2 = re.compile(rb"BZh[1-9]1AY&SY")


# -- identity ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceInfo:
    """Identity of one input, as listed: enough to reopen it and to tell whether it changed.

    ``uri`` is canonical (``gs://bucket/name``, an absolute local path, or ``-``) and is what
    reports, rejects and checkpoints name. ``generation`` pins a GCS object's content; a local
    file is identified by ``size`` and ``mtime_ns`` instead. ``compression`` is ``"gzip"`` or
    None, as decided from the name or ``content_encoding``; ``size`` is the stored (compressed)
    size, None for stdin.
    """

    uri: str
    kind: str  # "gcs" | "file" | "stdin" | "pipe" (a FIFO, /dev/stdin, <(...): read as a stream)
    bucket: Optional[str] = None
    name: Optional[str] = None
    generation: Optional[int] = None
    size: Optional[int] = None
    compression: Optional[str] = None
    content_encoding: Optional[str] = None
    mtime_ns: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (round-trips through :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceInfo:
        """Rebuild from :meth:`to_dict` output; unknown keys are ignored, bad ones rejected."""
        known = {f.name for f in fields(cls)}
        try:
            info = cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise SourceError(f"bad source record {data!r}: {exc}") from exc
        if info.kind not in ("gcs", "file", "stdin", "pipe"):
            raise SourceError(f"bad source record {data!r}: unknown kind {info.kind!r}")
        return info

    def same_content(self, other: SourceInfo) -> bool:
        """True if ``other`` (a fresh listing of the same uri) still names the same bytes."""
        return (
            self.uri == other.uri
            and self.kind == other.kind
            and self.generation == other.generation
            and self.size == other.size
            and self.mtime_ns == other.mtime_ns
        )


def total_bytes(sources: Iterable[SourceInfo]) -> int:
    """Sum of the stored sizes, for progress; stdin (size unknown) counts as 0."""
    return sum(s.size or 0 for s in sources)


# -- glob matching -----------------------------------------------------------------------------


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob to a regex matched against a whole name (``fullmatch``).

    ``*`` and ``?`` never match ``/``; ``**`` matches anything including ``/``, and ``**/`` at the
    start of a path component matches zero or more whole directories. A ``[`` without a closing
    ``]`` is literal.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            j = i
            while j < n and pattern[j] == "*":
                j += 1
            if j - i == 1:
                out.append("[^/]*")
                i = j
            elif (i == 0 or pattern[i - 1] == "/") and j < n and pattern[j] == "/":
                out.append("(?:.*/)?")
                i = j + 1
            else:
                out.append(".*")
                i = j
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
                i += 1
                continue
            body = pattern[i + 1 : j]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            # Escape what a Python character class treats specially; keep '-' for ranges.
            body = re.sub(r"([\\\[&~|^])", r"\\\1", body)
            out.append(f"[^/{body}]" if negate else f"(?!/)[{body}]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _has_magic(s: str) -> bool:
    return _MAGIC.search(s) is not None


def _literal_prefix(pattern: str) -> str:
    m = _MAGIC.search(pattern)
    return pattern if m is None else pattern[: m.start()]


# -- compression -------------------------------------------------------------------------------


def _unsupported(uri: str, fmt: str, command: Optional[str]) -> SourceError:
    if command:
        how = f"decompress it and re-compress with gzip, e.g. `{command} FILE | gzip > FILE.csv.gz`"
    else:
        how = "store it uncompressed or gzip-compressed (.gz)"
    if uri.startswith("gs://"):
        how += (
            " (for gs://: `gcloud storage cat URI | ... | gcloud storage cp - gs://B/NEW.csv.gz`)"
        )
    return SourceError(
        f"{uri}: {fmt} compression is not supported (only plain and gzip CSV)",
        hint=how,
    )


def _detect_compression(uri: str, name: str, content_encoding: Optional[str]) -> Optional[str]:
    """'gzip' or None, from the content encoding and the name; raise for anything else."""
    enc = (content_encoding or "").strip().lower()
    if enc in _GZIP_ENCODINGS:
        return "gzip"
    if enc not in _IDENTITY_ENCODINGS:
        raise _unsupported(uri, f"Content-Encoding {enc!r}", None)
    lower = name.lower()
    if lower.endswith(".tar.gz"):
        raise _unsupported(uri, "tar archive", "tar -xzOf")
    if lower.endswith(_GZIP_EXT):
        return "gzip"
    ext = os.path.splitext(lower)[1]
    if ext in _UNSUPPORTED_EXT:
        fmt, command = _UNSUPPORTED_EXT[ext]
        raise _unsupported(uri, fmt, command)
    return None


def _sniff(head: bytes) -> Optional[str]:
    for magic, fmt in _MAGIC_BYTES:
        if head.startswith(magic):
            return fmt
    if _BZIP2.match(head):
        return "bzip2"
    return None


# -- GCS client and errors ---------------------------------------------------------------------


def make_storage_client(project: Optional[str] = None) -> Client:
    """A storage client: anonymous against ``$STORAGE_EMULATOR_HOST`` if set, else ADC.

    Reading and listing need no project, so none is inferred for real GCS (that would fail on
    machines whose credentials carry none); the emulator gets one because the client wants it.
    """
    try:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        if os.environ.get(EMULATOR_ENV):
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
    _probed.add(url)


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


def _one_line(exc: BaseException, limit: int = 300) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


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


def _split_gs(uri: str) -> tuple[str, str]:
    rest = uri[len("gs://") :]
    bucket, _, path = rest.partition("/")
    if not bucket:
        raise SourceError(f"{uri}: a gs:// URI needs a bucket", hint="write gs://BUCKET/PATH")
    if _has_magic(bucket):
        raise SourceError(
            f"{uri}: wildcards in bucket names are not supported",
            hint="name the bucket exactly; wildcards may appear after gs://BUCKET/",
        )
    return bucket, path


# -- expansion ---------------------------------------------------------------------------------


def expand_sources(
    patterns: Sequence[str],
    *,
    storage_client: ClientArg = None,
    retry: Optional[Retry] = None,
) -> tuple[list[SourceInfo], list[str]]:
    """Resolve source patterns into sources and notes.

    Sources come in argument order, each pattern's matches sorted by name; a source named twice
    is kept once. Folder placeholders (names ending in ``/``) and empty (0-byte) objects/files
    are skipped with a note. A pattern that matches nothing, a missing object/file/bucket, or an
    unsupported compression raises :class:`SourceError`. ``storage_client`` (a client or a
    factory) is only used when a pattern is ``gs://``; ``retry`` overrides the storage client's
    default retry (bounded; retries transient errors only).
    """
    if not patterns:
        raise SourceError("no sources given", hint="name at least one file, gs:// URI or -")
    client = _LazyClient(storage_client)
    sources: list[SourceInfo] = []
    notes: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        if pattern == "-":
            found = [SourceInfo(uri="-", kind="stdin", name="-")]
        elif pattern.startswith("gs://"):
            found = _expand_gcs(pattern, client, retry, notes)
        elif pattern.startswith("file://"):
            found = _expand_local(pattern[len("file://") :], notes)
        elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", pattern):
            raise SourceError(
                f"{pattern}: unsupported URL scheme",
                hint="sources are local paths, gs://BUCKET/PATH, or - for stdin; copy other "
                "stores to GCS first (e.g. `gcloud storage cp s3://... gs://...`)",
            )
        else:
            found = _expand_local(pattern, notes)
        for info in found:
            if info.uri in seen:
                notes.append(f"{info.uri} is named by more than one pattern; loading it once")
                continue
            seen.add(info.uri)
            sources.append(info)
    return sources, notes


def _skip_notes(pattern: str, placeholders: list[str], empty: list[str]) -> list[str]:
    out = []
    for what, names in (("folder placeholder", placeholders), ("empty", empty)):
        if names:
            shown = ", ".join(names[:_NOTE_NAMES])
            more = f" and {len(names) - _NOTE_NAMES} more" if len(names) > _NOTE_NAMES else ""
            plural = "s" if len(names) > 1 else ""
            out.append(f"{pattern}: skipped {len(names)} {what} object{plural}: {shown}{more}")
    return out


def _expand_gcs(
    pattern: str, client: _LazyClient, retry: Optional[Retry], notes: list[str]
) -> list[SourceInfo]:
    bucket_name, path = _split_gs(pattern)
    if path and not path.endswith("/") and not _has_magic(path):
        return _expand_gcs_object(pattern, bucket_name, path, client, retry, notes)

    prefix = path if not _has_magic(path) else _literal_prefix(path)
    regex = glob_to_regex(path) if _has_magic(path) else None
    found: list[SourceInfo] = []
    placeholders: list[str] = []
    empty: list[str] = []
    for blob in _list(client, bucket_name, prefix, retry, pattern):
        name = blob.name
        if regex is not None and not regex.fullmatch(name):
            continue
        uri = f"gs://{bucket_name}/{name}"
        if name.endswith("/"):
            placeholders.append(uri)
        elif not blob.size:
            empty.append(uri)
        else:
            found.append(_blob_info(bucket_name, blob))
    notes.extend(_skip_notes(pattern, placeholders, empty))
    if not found:
        listed = prefix if regex is None else _parent(prefix)
        what = "no objects match" if regex is not None else "no objects under"
        only = " (only empty objects or folder placeholders)" if placeholders or empty else ""
        raise SourceError(
            f"{what} {pattern}{only}",
            hint=f"list what is there with `gcloud storage ls gs://{bucket_name}/{listed}`",
        )
    found.sort(key=lambda s: s.name or "")
    return found


def _list(
    client: _LazyClient, bucket: str, prefix: str, retry: Optional[Retry], pattern: str
) -> list[Any]:
    kwargs: dict[str, Any] = {"prefix": prefix or None}
    if retry is not None:
        kwargs["retry"] = retry
    try:
        return list(client.get().list_blobs(bucket, **kwargs))
    except Exception as exc:
        from google.api_core import exceptions as gexc

        if isinstance(exc, gexc.NotFound):
            raise SourceError(
                f"bucket gs://{bucket} does not exist (listing {pattern})",
                hint="check the bucket name with `gcloud storage ls`",
            ) from exc
        raise _gcs_error(exc, pattern, "listing") from exc


def _expand_gcs_object(
    uri: str,
    bucket_name: str,
    name: str,
    client: _LazyClient,
    retry: Optional[Retry],
    notes: list[str],
) -> list[SourceInfo]:
    kwargs: dict[str, Any] = {}
    if retry is not None:
        kwargs["retry"] = retry
    try:
        blob = client.get().bucket(bucket_name).get_blob(name, **kwargs)
    except Exception as exc:
        raise _gcs_error(exc, uri, "looking up") from exc
    if blob is None:
        # get_blob says None for a missing bucket too: one cheap listing tells which it is.
        under = _list(client, bucket_name, name + "/", retry, uri)
        if under:
            raise SourceError(
                f"object {uri} not found, but objects exist under {uri}/",
                hint=f"add a trailing slash to load them all: {uri}/",
            )
        raise SourceError(
            f"object {uri} not found",
            hint=f"check the name with `gcloud storage ls gs://{bucket_name}/{_parent(name)}`",
        )
    if not blob.size:
        notes.append(f"{uri}: skipped an empty object")
        return []
    return [_blob_info(bucket_name, blob)]


def _parent(name: str) -> str:
    return name.rsplit("/", 1)[0] + "/" if "/" in name else ""


def _blob_info(bucket: str, blob: Any) -> SourceInfo:
    uri = f"gs://{bucket}/{blob.name}"
    encoding = blob.content_encoding or None
    return SourceInfo(
        uri=uri,
        kind="gcs",
        bucket=bucket,
        name=blob.name,
        generation=int(blob.generation) if blob.generation is not None else None,
        size=int(blob.size) if blob.size is not None else None,
        compression=_detect_compression(uri, blob.name, encoding),
        content_encoding=encoding,
    )


def _local_error(exc: OSError, path: str, action: str) -> SourceError:
    if isinstance(exc, FileNotFoundError):
        return SourceError(
            f"no such file: {path}", hint="check the path (relative paths start at the cwd)"
        )
    if isinstance(exc, IsADirectoryError):
        return _is_dir_error(path)
    if isinstance(exc, PermissionError):
        return SourceError(
            f"permission denied {action} {path}",
            hint="make the file readable by this user (e.g. `chmod a+r`)",
        )
    return SourceError(f"cannot {action.split()[0]} {path}: {exc.strerror or exc}")


def _is_dir_error(path: str) -> SourceError:
    return SourceError(
        f"{path} is a directory",
        hint=f"add a trailing slash to load every file under it ({path.rstrip('/')}/), "
        f"or use a glob such as {path.rstrip('/')}/*.csv",
    )


def _file_info(path: str, st: os.stat_result) -> SourceInfo:
    abspath = os.path.abspath(path)
    return SourceInfo(
        uri=abspath,
        kind="file",
        name=abspath,
        size=st.st_size,
        compression=_detect_compression(abspath, abspath, None),
        mtime_ns=st.st_mtime_ns,
    )


def _check_readable(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise _local_error(exc, path, "opening") from exc
    os.close(fd)


def _expand_local(pattern: str, notes: list[str]) -> list[SourceInfo]:
    if not pattern:
        raise SourceError("empty source path", hint="name a file, a directory/ or a glob")
    if not _has_magic(pattern) and not pattern.endswith("/"):
        try:
            st = os.stat(pattern)
        except OSError as exc:
            raise _local_error(exc, pattern, "reading") from exc
        if stat.S_ISDIR(st.st_mode):
            raise _is_dir_error(pattern)
        if not stat.S_ISREG(st.st_mode):
            # a named pipe, <(zcat x.gz), /dev/stdin: no size to trust, streamed like -. Not
            # opened to check it: a FIFO opened and closed would lose its writer.
            if not os.access(pattern, os.R_OK):
                raise _local_error(
                    PermissionError(errno.EACCES, "Permission denied"), pattern, "opening"
                )
            abspath = os.path.abspath(pattern)
            return [
                SourceInfo(
                    uri=abspath,
                    kind="pipe",
                    name=abspath,
                    compression=_detect_compression(abspath, abspath, None),
                )
            ]
        _check_readable(pattern)
        if st.st_size == 0:
            notes.append(f"{pattern}: skipped an empty file")
            return []
        return [_file_info(pattern, st)]

    if not _has_magic(pattern) and not os.path.isdir(pattern):
        try:
            os.stat(pattern)
        except OSError as exc:
            raise _local_error(exc, pattern, "reading") from exc
        raise SourceError(f"{pattern} is not a directory", hint="drop the trailing slash")
    glob = pattern + "**" if not _has_magic(pattern) else pattern
    found: list[SourceInfo] = []
    empty: list[str] = []
    for path, st in _walk_glob(glob):
        if st.st_size == 0:
            empty.append(path)
            continue
        _check_readable(path)
        found.append(_file_info(path, st))
    notes.extend(_skip_notes(pattern, [], empty))
    if not found:
        only = " (only empty files)" if empty else ""
        raise SourceError(
            f"no files match {pattern}{only}",
            hint="check the pattern: * and ? do not cross '/', ** does; hidden files are skipped",
        )
    found.sort(key=lambda s: s.uri)
    return found


def _walk_glob(pattern: str) -> Iterator[tuple[str, os.stat_result]]:
    """Regular files matching ``pattern``, walking only below its literal leading directories."""
    parts = pattern.split("/")
    first = next(i for i, p in enumerate(parts) if _has_magic(p))
    base = "/".join(parts[:first])
    if first > 0 and base == "":
        base = "/"
    rest = parts[first:]
    max_depth = None if any("**" in p for p in rest) else len(rest)
    allow_hidden = any(p.startswith(".") for p in rest)
    regex = glob_to_regex(pattern)
    root = base or "."
    if not os.path.isdir(root):
        return

    def prefix_of(directory_rel: str) -> str:
        if not base:
            return directory_rel
        return base + ("" if base.endswith("/") else "/") + directory_rel

    def walk(directory: str, rel: str, depth: int) -> Iterator[tuple[str, os.stat_result]]:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            raise _local_error(exc, directory, "listing") from exc
        for entry in entries:
            if entry.name.startswith(".") and not allow_hidden:
                continue
            entry_rel = rel + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if max_depth is None or depth + 1 < max_depth:
                        yield from walk(entry.path, entry_rel + "/", depth + 1)
                    continue
                if not entry.is_file():
                    continue
                path = prefix_of(entry_rel)
                if regex.fullmatch(path):
                    yield path, entry.stat()
            except OSError as exc:
                raise _local_error(exc, entry.path, "reading") from exc

    yield from walk(root, "", 0)


# -- reading -----------------------------------------------------------------------------------


class _RawSource(io.RawIOBase):
    """A raw byte source that counts what it delivers (the compressed position, for progress)."""

    bytes_read: int = 0

    def readable(self) -> bool:
        return True


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
    ) -> None:
        super().__init__()
        self._blob = blob
        self._info = info
        self._size = info.size if info.size is not None else 0
        self._chunk_size = chunk_size
        self._retry = retry
        self._pos = 0  # object offset of the end of the current chunk
        self._chunk = memoryview(b"")
        self._off = 0
        self._sink: Optional[_ChunkSink] = None

    def readinto(self, b: Any) -> int:
        if self._off >= len(self._chunk):
            if self._pos >= self._size:
                return 0
            self._fill()
        n = min(len(b), len(self._chunk) - self._off)
        b[:n] = self._chunk[self._off : self._off + n]
        self._off += n
        self.bytes_read += n
        return n

    def _fill(self) -> None:
        start = self._pos
        stop = min(start + self._chunk_size, self._size)
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
            self._sink = _ChunkSink(min(self._chunk_size, self._size) + 1)
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


class _FileReader(_RawSource):
    """A local file read up to its listed size; growth or rewriting is reported, not absorbed."""

    def __init__(self, path: str, info: SourceInfo) -> None:
        super().__init__()
        self._path = path
        self._info = info
        try:
            self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise _local_error(exc, path, "opening") from exc
        try:
            self._check("changed since it was listed")
        except BaseException:
            self._file.close()
            raise

    def _check(self, what: str) -> None:
        try:
            st = os.fstat(self._file.fileno())
        except OSError as exc:
            raise _local_error(exc, self._path, "reading") from exc
        if stat.S_ISDIR(st.st_mode):
            raise _is_dir_error(self._path)
        info = self._info
        if (info.size is not None and st.st_size != info.size) or (
            info.mtime_ns is not None and st.st_mtime_ns != info.mtime_ns
        ):
            raise SourceError(
                f"{self._path} {what} (was {info.size} bytes, mtime_ns {info.mtime_ns}; "
                f"now {st.st_size} bytes, mtime_ns {st.st_mtime_ns})",
                hint="re-run the load once the file is no longer being written",
            )

    def readinto(self, b: Any) -> int:
        limit = len(b)
        if self._info.size is not None:
            limit = min(limit, self._info.size - self.bytes_read)
            if limit <= 0:
                self._check("changed while it was being read")
                return 0
        try:
            n = self._file.readinto(memoryview(b)[:limit]) or 0
        except OSError as exc:
            raise _local_error(exc, self._path, "reading") from exc
        if n == 0 and self._info.size is not None:
            raise SourceError(
                f"{self._path} changed while it was being read: it ended at byte "
                f"{self.bytes_read} of {self._info.size}",
                hint="re-run the load once the file is no longer being written",
            )
        self.bytes_read += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class _PipeReader(_RawSource):
    """A named pipe or another file that is not a regular one (a device, /dev/stdin, the
    /dev/fd/N of a shell's process substitution): read to its end, no size to check."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path
        try:
            self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise _local_error(exc, path, "opening") from exc

    def readinto(self, b: Any) -> int:
        try:
            n = self._file.readinto(b) or 0
        except OSError as exc:
            raise _local_error(exc, self._path, "reading") from exc
        self.bytes_read += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class _StdinReader(_RawSource):
    """Standard input, binary, untranslated; closing us leaves the process's stdin open."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream

    def readinto(self, b: Any) -> int:
        try:
            data = self._stream.read(len(b))
        except OSError as exc:
            raise SourceError(f"cannot read standard input: {exc.strerror or exc}") from exc
        n = len(data)
        b[:n] = data
        self.bytes_read += n
        return n


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
        self._inner: Any = (
            gzip.GzipFile(fileobj=buffered, mode="rb") if compression == "gzip" else buffered
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


def read_retry(max_retry_time: float) -> Retry:
    """The storage client's default retry (transient errors only, exponential backoff from
    1 s), giving up after ``max_retry_time`` seconds instead of its 120. A ranged read that
    breaks off mid-response is resumed by the client at the first byte not yet received."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY.with_timeout(max_retry_time)


def open_source(
    info: SourceInfo,
    *,
    storage_client: ClientArg = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    retry: Optional[Retry] = None,
    stdin: Optional[BinaryIO] = None,
) -> SourceStream:
    """Open one listed source as a decompressed :class:`SourceStream` (use it as a context manager).

    GCS objects are read ``chunk_size`` bytes per ranged request, pinned to ``info.generation``;
    ``retry`` overrides the storage client's (bounded) default. ``stdin`` replaces
    ``sys.stdin.buffer`` for ``-``. Data that starts with gzip's magic bytes is decompressed even
    without a ``.gz`` name; other compressed formats are refused. Raises :class:`SourceError`.
    """
    if chunk_size <= 0:
        raise SourceError(f"chunk size must be positive, not {chunk_size}")
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
        raw = _GcsRangeReader(blob, info, chunk_size, retry)
        buffer_size = min(chunk_size, _GCS_BUFFER)
    elif info.kind == "file":
        raw = _FileReader(info.name or info.uri, info)
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
        if compression is None:
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
