"""What a source is: :class:`SourceInfo`, the identity of one input as it was listed.

The record names the input (``uri``), says how to reopen it (``kind``, ``bucket``, ``name``) and
how to tell whether it changed since (a GCS ``generation``; a local file's ``size`` and
``mtime_ns``). Checkpoints store it as a dict (:meth:`SourceInfo.to_dict`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any, Optional

from ..errors import SourceError


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
