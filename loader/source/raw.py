"""The raw reader every kind of source implements, and the one-line form of an error.

A raw reader delivers the stored (possibly compressed) bytes and counts them, which is what
progress is measured against; :mod:`loader.source.stream` decompresses on top of it.
"""

from __future__ import annotations

import io


class _RawSource(io.RawIOBase):
    """A raw byte source that counts what it delivers (the compressed position, for progress)."""

    bytes_read: int = 0

    def readable(self) -> bool:
        return True


def _one_line(exc: BaseException, limit: int = 300) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."
