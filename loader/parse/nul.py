"""NUL bytes: kept away from Arrow's CSV reader, restored in the parsed columns.

pyarrow before 26 finds the special bytes of a CSV (delimiter, quote, escape, line ends) with
an SSE4.2 compare that stops at the first NUL of each 8-byte word (apache/arrow#50481, fixed
by apache/arrow#50483): a quote or line end sharing a word with a NUL is missed. The block
chunker (``newlines_in_values``) then cuts blocks in the wrong place and rows are dropped or
merged without an error; the parser fails with "out of sync with chunker" or a wrong field
count. Whatever the version, the loader does not hand Arrow a NUL: :class:`_NulGuard` rewrites
the stream so that each NUL becomes a private-use marker plus ``0``, and a marker already in
the data becomes the marker plus ``1``; :func:`restore_nul` undoes both in the parsed blocks.
A NUL is an ordinary character afterwards (U+0000 is valid UTF-8: a STRING can hold it).

Input without a NUL or a 0xEE byte (the UTF-8 lead byte of U+E000..U+EFFF, the marker's
block) is passed through untouched: two ``memchr`` scans per read.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..types import value_offsets
from .blocks import ParsedBlock
from .stream import Readable, _ReadOnlyStream

_MARK = "\ue010"
"""The private-use code point standing in for NUL (and, followed by ``1``, for itself)."""
_MARK_B = _MARK.encode()
_LEAD = _MARK_B[:1]
_AS_NUL = _MARK + "0"
_AS_MARK = _MARK + "1"
_AS_NUL_B = _AS_NUL.encode()
_AS_MARK_B = _AS_MARK.encode()


class _NulGuard(_ReadOnlyStream):
    """A read-only stream: ``raw`` with NUL written as ``_MARK 0`` and ``_MARK`` as ``_MARK 1``.

    A read returns at most the bytes asked for and, like the streams it wraps, never ends in
    ``\\r`` while more may follow (apache/arrow#51368). ``active`` turns true once a rewrite
    was made (before Arrow can have read the rewritten bytes): only then are blocks restored.
    """

    def __init__(self, raw: Readable) -> None:
        self._raw = raw
        self._out = b""  # rewritten bytes, unread from ``_at`` on
        self._at = 0
        self._carry = b""
        self._eof = False
        self.active = False
        self.marks = False
        """Whether the data held the marker itself (restored as well)."""
        self.closed = False

    def _feed(self, chunk: bytes) -> None:
        if not chunk:
            self._eof = True
            data, self._carry = self._carry, b""
        else:
            data = self._carry + chunk if self._carry else chunk
            # the first bytes of a marker at the end: the rest comes with the next chunk
            keep = 2 if data.endswith(_MARK_B[:2]) else 1 if data.endswith(_LEAD) else 0
            if keep:
                data, self._carry = data[:-keep], data[-keep:]
            else:
                self._carry = b""
        if _LEAD in data and _MARK_B in data:
            self.active = self.marks = True
            data = data.replace(_MARK_B, _AS_MARK_B)
        if b"\x00" in data:
            self.active = True
            data = data.replace(b"\x00", _AS_NUL_B)
        self._out = self._out[self._at :] + data if self._at < len(self._out) else bytes(data)
        self._at = 0

    def read(self, n: int = -1) -> bytes:
        if self._at == len(self._out) and not self._carry and not self._eof:
            chunk = self._raw.read(n)
            if b"\x00" not in chunk and _LEAD not in chunk:
                if not chunk:
                    self._eof = True
                return chunk  # the common case: nothing to rewrite
            self._feed(chunk)
        # as many bytes as asked for (a short read is a short block for Arrow, and a record
        # may span two blocks only), at least two (a lone CR waits for the byte after it)
        while not self._eof and (n < 0 or len(self._out) - self._at < max(n, 2)):
            want = n - (len(self._out) - self._at)
            self._feed(self._raw.read(max(want, 2) if n > 0 else -1))
        left = len(self._out) - self._at
        take = left if n < 0 else min(n, left)
        more = take < left or self._carry or not self._eof
        if take > 1 and self._out[self._at + take - 1] == 0x0D and more:
            take -= 1
        out = self._out[self._at : self._at + take]
        self._at += take
        return out

    def tell(self) -> int:
        return int(self._raw.tell()) if hasattr(self._raw, "tell") else 0

    def close(self) -> None:
        self.closed = True


def restore_text(text: Optional[str]) -> Optional[str]:
    """``text`` as read through :class:`_NulGuard` with its NULs (and markers) put back."""
    if text is None or _MARK not in text:
        return text
    return text.replace(_AS_NUL, "\x00").replace(_AS_MARK, _MARK)


def _restore_column(col: pa.Array, marks: bool) -> pa.Array:
    if not _has_lead_byte(col):
        return col
    # Every marker starts a two-character token (marker + 0 or 1), so replacing the NUL tokens
    # first, left to right, cannot match across tokens; the remaining tokens are marker + 1.
    col = pc.replace_substring(col, _AS_NUL, "\x00")
    return pc.replace_substring(col, _AS_MARK, _MARK) if marks else col


def _has_lead_byte(col: pa.Array) -> bool:
    """Whether a string column's values hold the marker's first byte (one scan of its data)."""
    data = col.buffers()[2] if len(col) else None
    if data is None:
        return False
    offsets = value_offsets(col)
    start, stop = int(offsets[0]), int(offsets[-1])
    if native.available():
        return bool(native.module().has_either(data, start, stop, _LEAD[0], _LEAD[0]))
    return bool((np.frombuffer(data, dtype=np.uint8)[start:stop] == _LEAD[0]).any())


def restore_nul(block: ParsedBlock, marks: bool = True) -> ParsedBlock:
    """``block`` (parsed from a :class:`_NulGuard` stream) with its values' NULs put back
    (``marks``: whether the stream held the marker itself, see ``_NulGuard.marks``)."""
    strings = block.strings
    for i, name in enumerate(strings.column_names):
        col = strings.column(i).combine_chunks()
        fixed = _restore_column(col, marks)
        if fixed is not col:
            strings = strings.set_column(i, name, fixed)
    rejects = [
        r
        if r.text is None or _MARK not in r.text
        else dataclasses.replace(r, text=restore_text(r.text))
        for r in block.rejects
    ]
    return dataclasses.replace(block, strings=strings, rejects=rejects)
