"""Backslash escapes (``Dialect.backslash_escapes=True``), MySQL's and PostgreSQL's text
format (``Dialect.escape_style``): rewritten in the byte stream before Arrow parses it, undone
column by column after. MySQL's are described here; PostgreSQL's differ where
:class:`_EscapeRewriter` and :func:`_unescape_backslashes` say (``\\f \\v`` and octal / hex
bytes, no ``\\0 \\Z``, a CR alone ends a line).

``SELECT ... INTO OUTFILE`` and ``mysqldump --tab`` write ``\\N`` for NULL and escape the escape
character, the delimiter, the line terminator and NUL with a backslash (a tab inside a value
is written as backslash + a real tab). pyarrow's own ``escape_char`` would turn ``\\N`` into
``N`` and ``\\t`` into ``t``, so escapes are handled here instead: the byte stream is rewritten
so that an escaped delimiter / newline / quote no longer splits a field (backslash + a private-use
code point, :class:`_EscapeRewriter`), pyarrow parses with escaping off and sees ``\\N`` verbatim
(a NULL marker), and the escapes are then undone column-wise with ``pyarrow.compute`` replace
kernels (:func:`_unescape_backslashes`): ``\\t \\n \\r \\0 \\b \\Z \\\\`` and backslash + any other
character = that character. Those private-use code points (U+E001..U+E006) in the data itself
are rewritten too (backslash + U+E006 + a letter) and restored last, so they come through
unchanged.

MySQL does not escape a carriage return (its line terminator is LF), so a CR in a value is
written as it is: Windows text ``a`` CR LF ``b`` becomes ``a`` CR, backslash LF, ``b``. pyarrow
would end the record at that CR, so a CR that no LF follows is rewritten as an escaped one
(data); CR LF stays a line end, for files whose lines a Windows tool turned into CR LF. Only
a CR that ends a line's last value is therefore lost to the line end.
"""

from __future__ import annotations

import codecs
import re
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import AGAIN_WHEN_FIXED, SourceError
from .dialect import Dialect, line_ends

# Private-use code points standing in for characters MySQL escaped with a backslash, so that
# pyarrow does not split on them; undone in _unescape_backslashes.
_PUA_DELIM = "\ue001"
_PUA_LF = "\ue002"
_PUA_CR = "\ue003"
_PUA_QUOTE = "\ue004"
_PUA_BACKSLASH = "\ue005"
# The same code points in the data are kept apart: each becomes backslash + _PUA_LITERAL + a
# letter (its index in _PUA_ALL), restored last.
_PUA_LITERAL = "\ue006"
_PUA_ALL = (_PUA_DELIM, _PUA_LF, _PUA_CR, _PUA_QUOTE, _PUA_BACKSLASH, _PUA_LITERAL)
_PUA_LETTERS = "abcdef"
_PUA_PREFIX = _PUA_DELIM.encode()[:2]  # the UTF-8 lead bytes all of them share


class _EscapeRewriter:
    """Rewrites a UTF-8 byte stream, chunk by chunk, so that a backslash-escaped delimiter,
    newline, quote or backslash becomes backslash + a private-use marker (no longer splitting a
    field for pyarrow), and a marker already in the data becomes backslash + _PUA_LITERAL + a
    letter. One ``re.sub`` per chunk; a chunk's last bytes may be held back for the next one.
    """

    def __init__(self, dialect: Dialect, lines_before: int = 0) -> None:
        specials = {
            dialect.delimiter.encode(): b"\\" + _PUA_DELIM.encode(),
            b"\n": b"\\" + _PUA_LF.encode(),
            b"\r": b"\\" + _PUA_CR.encode(),
            b"\\": b"\\" + _PUA_BACKSLASH.encode(),
        }
        if dialect.quote_char:
            specials[dialect.quote_char.encode()] = b"\\" + _PUA_QUOTE.encode()
        # A marker in the data, escaped or not (backslash + any other character = it).
        for marker, letter in zip(_PUA_ALL, _PUA_LETTERS):
            specials[marker.encode()] = b"\\" + _PUA_LITERAL.encode() + letter.encode()
        self._specials = specials
        markers = [m.encode() for m in _PUA_ALL]
        # PostgreSQL: octal and hex escapes are bytes, made here (before the UTF-8 check, and
        # escaped again when they are a delimiter, line end or backslash); a CR alone ends a
        # line there, as in the reader, where MySQL writes a value's CR as it is (data).
        self._pg = dialect.escape_style == "postgres"
        self._escape_re = re.compile(
            (rb"(?P<num>(?:" + _PG_NUM + rb")+)|" if self._pg else b"")
            + rb"\\(?P<esc>"
            + b"|".join(re.escape(k) for k in specials if k not in markers)
            + rb")|\\?(?P<mark>"
            + b"|".join(markers)
            + rb")"
            + (b"" if self._pg else rb"|(?P<cr>\r)(?!\n)"),
            re.DOTALL,
        )
        self._markers = frozenset(m.encode() for m in _PUA_ALL)
        self._line_start = True  # the next byte starts a line
        self._ended = False  # PostgreSQL's end-of-data line was read
        self._lines = lines_before  # line ends passed on (PostgreSQL: for the end's line)
        self._end_line = 0  # the end-of-data line's number
        enc = codecs.lookup(dialect.encoding).name
        self._encoding = None if enc in ("utf-8", "utf-8-sig") else dialect.encoding
        self._carry = b""

    def _replace(self, m: re.Match[bytes]) -> bytes:
        run = m.group("num") if self._pg else None
        if run is None:
            return self._specials[m.group("esc") or m.group("mark") or m.group("cr")]
        # a run of octal / hex escapes: its bytes, a delimiter, line end or backslash among
        # them escaped, and a marker they spell kept apart as a marker in the data is
        made = bytes(
            (int(e[2:], 16) if e[1:2] == b"x" else int(e[1:], 8)) & 0xFF
            for e in re.findall(_PG_NUM, run)
        )
        if self._encoding is not None:  # bytes of the file's encoding, as PostgreSQL reads them
            made = made.decode(self._encoding, "surrogateescape").encode("utf-8", "surrogateescape")
        out, i = [], 0
        while i < len(made):
            three = made[i : i + 3]
            if three in self._markers:
                out.append(self._specials[three])
                i += 3
            else:
                one = made[i : i + 1]
                out.append(self._specials.get(one, one))
                i += 1
        return b"".join(out)

    def rewrite(self, chunk: bytes, final: bool) -> bytes:
        """The next chunk rewritten (``final``: the input's last, holding nothing back)."""
        chunk = self._carry + chunk
        self._carry = tail = b""
        if self._pg:
            if self._ended:  # after PostgreSQL's end-of-data line: nothing but blank lines
                _nothing_after_the_end(chunk, self._end_line)
                return b""
            end, after, held = self._end_of_data(chunk, final)
            if held:
                chunk, tail = chunk[:end], chunk[end:]
            elif end is not None:
                self._end_line = self._lines + line_ends(chunk[:end]) + 1
                _nothing_after_the_end(chunk[after:], self._end_line)
                chunk, final, self._ended = chunk[:end], True, True
        if not final:
            # Hold back a marker's first bytes at the end (the rest is in the next chunk), a
            # CR (whether an LF follows decides what it is), and an odd run of backslashes
            # before them (it escapes a byte of the next chunk).
            if chunk.endswith(b"\r"):
                keep = 1
            else:
                keep = next((k for k in (2, 1) if chunk.endswith(_PUA_PREFIX[:k])), 0)
            head = chunk[: len(chunk) - keep]
            run = _tail_run(head) if self._pg else None
            if run is not None:
                # octal / hex escapes at the end (\1, \x4 or whole ones): the run may go on
                keep += len(head) - run
            else:
                keep += _odd_run(head)
            if keep:
                chunk, self._carry = chunk[:-keep], chunk[-keep:]
        self._carry += tail
        if self._pg and chunk:  # (a line end a backslash escapes is data)
            self._lines += line_ends(chunk)
            self._line_start = chunk.endswith((b"\n", b"\r")) and not _odd_run(chunk[-65:-1])
        if b"\\" not in chunk and _PUA_PREFIX not in chunk and b"\r" not in chunk:
            return chunk
        return self._escape_re.sub(self._replace, chunk)

    def _end_of_data(self, chunk: bytes, final: bool) -> tuple[Optional[int], int, bool]:
        """Where PostgreSQL's end-of-data line (``\\.`` alone on a line) starts in ``chunk``,
        if it holds one, where its line ends, and whether it is held back instead: ``\\.`` at
        the end of a chunk that is not the last waits for the byte after it (``\\.x`` is
        data)."""
        for m in _PG_END.finditer(chunk):
            at = m.start() + (0 if m.group(0).startswith(b"\\") else 1)
            if at == 0 and not self._line_start:
                continue
            if at and _odd_run(chunk[max(0, at - 64) : at - 1]):
                continue  # an escaped line end: data, and the \\. in the same value
            after = m.end() + (2 if chunk[m.end() : m.end() + 2] == b"\r\n" else 1)
            return at, after, m.end() == len(chunk) and not final
        return None, 0, False


def _nothing_after_the_end(rest: bytes, line: int) -> None:
    """PostgreSQL stops at its end-of-data line (number ``line``): rows after it would be
    dropped, so none may be there (blank lines may)."""
    if rest.strip():
        raise SourceError(
            f"more data after PostgreSQL's end-of-data line (line {line:,}, a \\. alone)",
            hint="a file of several COPY blocks (a pg_dump) is loaded a block a file: cut it "
            "at each \\. line" + AGAIN_WHEN_FIXED,
        )


_PG_END = re.compile(rb"(?:\A|[\n\r])\\\.(?=[\r\n]|\Z)")
"""PostgreSQL's end-of-data line, ``\\.`` alone (at the chunk's start, or after a line end)."""
_PG_NUM = rb"\\(?:[0-7]{1,3}|x[0-9A-Fa-f]{1,2})"
"""One of PostgreSQL's octal or hex escapes (a byte)."""
_PG_TAIL = re.compile(rb"(?:" + _PG_NUM + rb")*\\(?:[0-7]{0,3}|x[0-9A-Fa-f]{0,2})\Z")
"""The end of a chunk in a run of octal or hex escapes, the last maybe cut short."""


def _tail_run(data: bytes) -> Optional[int]:
    """Where a run of octal or hex escapes that ends ``data`` starts, if one does: its first
    backslash must start an escape (an even run of backslashes before it)."""
    at = 0
    while (m := _PG_TAIL.search(data, at)) is not None:
        start = j = m.start()
        while j > 0 and data[j - 1] == 0x5C:
            j -= 1
        if (start - j) % 2 == 0:
            return start
        at = start + 1
    return None


def _odd_run(data: bytes) -> int:
    """1 when ``data`` ends in an odd run of backslashes (its last escapes what follows)."""
    return (len(data) - len(data.rstrip(b"\\"))) % 2


def _unescape_backslashes(arr: pa.Array, dialect: Dialect) -> pa.Array:
    """Undo MySQL (or PostgreSQL text-format) backslash escapes in a string column (after
    ``\\N`` became NULL)."""
    if len(arr) == 0 or not pc.any(pc.match_substring(arr, "\\")).as_py():
        return arr
    # Escaped backslashes first, through a private code point, so that "\\t" stays "\t".
    out = pc.replace_substring(arr, "\\" + _PUA_BACKSLASH, _PUA_BACKSLASH)
    if dialect.escape_style == "postgres":
        own = [("\\f", "\f"), ("\\v", "\v")]  # octal and hex were made in the stream
    else:
        own = [("\\0", "\0"), ("\\Z", "\x1a")]
    pairs = [
        ("\\t", "\t"),
        ("\\n", "\n"),
        ("\\r", "\r"),
        ("\\b", "\b"),
        *own,
        ("\\" + _PUA_DELIM, dialect.delimiter),
        ("\\" + _PUA_LF, "\n"),
        ("\\" + _PUA_CR, "\r"),
        ("\\" + _PUA_QUOTE, dialect.quote_char or '"'),
    ]
    for esc, plain in pairs:
        out = pc.replace_substring(out, esc, plain)
    out = pc.replace_substring_regex(out, r"(?s)\\([^" + _PUA_LITERAL + "])", r"\1")
    out = pc.replace_substring(out, _PUA_BACKSLASH, "\\")
    for marker, letter in zip(_PUA_ALL, _PUA_LETTERS):
        out = pc.replace_substring(out, "\\" + _PUA_LITERAL + letter, marker)
    return out
