"""Which compressions a source may use, and how each is recognised.

Plain and gzip input are read. gzip is recognised by the name (``.gz``, ``.gzip``), by
``Content-Encoding: gzip`` on a GCS object, or by its magic bytes (see
:mod:`loader.source.stream`). Every other format, by name, encoding or magic bytes, is refused
with a hint naming the command that decompresses it.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from ..errors import SourceError

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
