"""From source patterns to a list of sources: glob matching and the listing of GCS and disk.

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
Empty objects and files and folder placeholders are skipped with a note.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Optional

from ..errors import SourceError
from .compression import _detect_compression
from .gcs import ClientArg, _gcs_error, _LazyClient
from .identity import SourceInfo
from .local import _is_dir_error, _local_error

if TYPE_CHECKING:
    from google.api_core.retry import Retry

# How many skipped names a note lists before it says "and N more".
_NOTE_NAMES = 5
_MAGIC = re.compile(r"[*?\[]")


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


_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A pattern that starts as a URL does (``gs://``, ``file://``, ``s3://``)."""


def canonical_pattern(pattern: str) -> str:
    """One spelling of a source pattern, for a job's identity: a local path or glob becomes
    absolute and normalised (``x.csv``, ``./x.csv``, ``file://x.csv`` and ``$PWD/x.csv`` are
    one pattern; a trailing ``/`` is kept, since it means the folder's files); ``gs://`` URIs
    and ``-`` are kept as written."""
    if pattern == "-" or _URL_SCHEME.match(pattern):
        if not pattern.startswith("file://"):
            return pattern
        pattern = pattern[len("file://") :]
    if not pattern:
        return pattern
    path = os.path.abspath(pattern)
    return path + "/" if pattern.endswith("/") and path != "/" else path


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
        elif _URL_SCHEME.match(pattern):
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


def _skip_notes(
    pattern: str, placeholders: list[str], empty: list[str], thing: str = "object"
) -> list[str]:
    """``thing``: what a match is called (``object`` in GCS, ``file`` on a local disk)."""
    out = []
    for what, names in (("folder placeholder", placeholders), ("empty", empty)):
        if names:
            shown = ", ".join(names[:_NOTE_NAMES])
            more = f" and {len(names) - _NOTE_NAMES} more" if len(names) > _NOTE_NAMES else ""
            plural = "s" if len(names) > 1 else ""
            out.append(f"{pattern}: skipped {len(names)} {what} {thing}{plural}: {shown}{more}")
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


def is_stream(pattern: str) -> bool:
    """Whether a source pattern names a stream, which every run reads whole: ``-``, or a local
    path that is neither a file nor a folder (a named pipe, ``<(...)``, /dev/stdin), as
    :func:`expand_sources` lists it. Not opened to tell (a FIFO opened and closed loses its
    writer); a glob, a URL or a path that cannot be looked at is not one."""
    if pattern == "-":
        return True
    if _URL_SCHEME.match(pattern) or _has_magic(pattern):
        return False
    try:
        st = os.stat(pattern)
    except OSError:
        return False
    return not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)


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
    notes.extend(_skip_notes(pattern, [], empty, "file"))
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
