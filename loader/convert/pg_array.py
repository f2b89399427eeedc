"""PostgreSQL's array text (``{1,2,NULL}``, ``{"a b","say \\"hi\\"",NULL}``), as ``COPY``
writes an array column, read into its elements' text for ``ARRAY<T>`` columns.

The rules are PostgreSQL's ``array_in`` for one dimension: elements separated by commas inside
braces; an element is double-quoted when it holds a brace, comma, quote, backslash or white
space, is empty, or reads ``NULL``; inside quotes (and outside), a backslash takes the next
character literally; white space around an unquoted element is not part of it; an unquoted
``NULL`` (any case) is NULL, a quoted ``"NULL"`` the text. Arrays of more dimensions
(``{{1,2},{3,4}}``) and explicit bounds (``[0:1]={1,2}``) have no Spanner counterpart and are
rejected with the reason.
"""

from __future__ import annotations

from typing import Optional

_SPACE = " \t\n\r\v\f"


class PgArrayError(ValueError):
    """Why a text is not a one-dimensional PostgreSQL array."""


def parse_pg_array(text: str) -> list[Optional[str]]:
    """The elements of ``text`` (None for NULL); :class:`PgArrayError` says why not."""
    s = text.strip(_SPACE)
    if s.startswith("["):
        raise PgArrayError("explicit array bounds ([lo:hi]=...) have no Spanner counterpart")
    if not (s.startswith("{") and s.endswith("}")) or len(s) < 2:
        raise PgArrayError("a PostgreSQL array is written {a,b,...}")
    inner, i = s[1:-1], 0
    n = len(inner)
    out: list[Optional[str]] = []
    if not inner.strip(_SPACE):
        return out
    while True:
        while i < n and inner[i] in _SPACE:
            i += 1
        if i < n and inner[i] == "{":
            raise PgArrayError("a nested (multi-dimensional) array has no Spanner counterpart")
        buf: list[str] = []
        if i < n and inner[i] == '"':
            i += 1
            while True:
                if i >= n:
                    raise PgArrayError("a quoted element is never closed")
                c = inner[i]
                if c == "\\":
                    if i + 1 >= n:
                        raise PgArrayError("a backslash ends the array")
                    buf.append(inner[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    buf.append(c)
                    i += 1
            while i < n and inner[i] in _SPACE:
                i += 1
            value: Optional[str] = "".join(buf)
        else:
            kept = 0  # the length of buf up to its last escaped character (never trimmed)
            while i < n and inner[i] != ",":
                c = inner[i]
                if c in '{}"':
                    raise PgArrayError(f"unexpected {c!r} in an unquoted element")
                if c == "\\":
                    if i + 1 >= n:
                        raise PgArrayError("a backslash ends the array")
                    buf.append(inner[i + 1])
                    i += 2
                    kept = len(buf)
                    continue
                buf.append(c)
                i += 1
            raw = "".join(buf)
            value = raw[:kept] + raw[kept:].rstrip(_SPACE)
            if not value:
                raise PgArrayError('an empty element (PostgreSQL writes "" for an empty text)')
            if kept == 0 and value.upper() == "NULL":
                value = None
        out.append(value)
        if i >= n:
            return out
        if inner[i] != ",":
            raise PgArrayError(f"unexpected {inner[i]!r} after an element")
        i += 1
        if i >= n:
            raise PgArrayError("an element is missing after the last comma")
