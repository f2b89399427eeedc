"""Secondary indexes and foreign keys, read out of the DDL Spanner reports (GetDatabaseDdl).

Only what deferring them needs: for each object, the statement that re-creates it exactly as
Spanner printed it, the statement that drops it, the table it is on and, for a foreign key,
the table it references. GoogleSQL only (a PostgreSQL-dialect database is refused by the
caller). Names may be quoted with backticks, and may carry a named schema (``sch.T``).

Spanner prints one ``CREATE [UNIQUE] [NULL_FILTERED] INDEX``, ``CREATE SEARCH INDEX`` or
``CREATE VECTOR INDEX`` statement per index, and a table's foreign keys inside its
``CREATE TABLE`` (``CONSTRAINT name FOREIGN KEY (...) REFERENCES t (...) ...``; one created
without a name is printed without ``CONSTRAINT name``). ``ALTER TABLE t ADD [CONSTRAINT n]
FOREIGN KEY ...`` statements are read too, for DDL from elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

from .errors import SchemaError


@dataclass(frozen=True)
class Token:
    kind: str
    """``id`` (an identifier or keyword; ``quoted`` when in backticks), ``str``, ``num`` or
    ``sym`` (one punctuation character)."""
    text: str
    """An identifier's name (unquoted), a keyword upper-cased; a symbol's character."""
    start: int
    end: int
    quoted: bool = False

    def kw(self, *words: str) -> bool:
        """Whether this is an unquoted keyword among ``words`` (upper case)."""
        return self.kind == "id" and not self.quoted and self.text.upper() in words


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9][0-9A-Za-z_.]*")


def tokens(text: str) -> list[Token]:
    """GoogleSQL DDL as tokens, comments and whitespace left out."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("--", i) or c == "#":
            nl = text.find("\n", i)
            i = n if nl < 0 else nl + 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
        elif c == "`":
            j, name = i + 1, []
            while j < n and text[j] != "`":
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                name.append(text[j])
                j += 1
            out.append(Token("id", "".join(name), i, j + 1, quoted=True))
            i = j + 1
        elif c in "'\"":
            quote = text[i : i + 3] if text[i : i + 3] in ("'''", '"""') else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                j += 2 if text[j] == "\\" else 1
            out.append(Token("str", text[i : j + len(quote)], i, j + len(quote)))
            i = j + len(quote)
        elif m := _IDENT.match(text, i):
            out.append(Token("id", m.group(), i, m.end()))
            i = m.end()
        elif m := _NUMBER.match(text, i):
            out.append(Token("num", m.group(), i, m.end()))
            i = m.end()
        else:
            out.append(Token("sym", c, i, i + 1))
            i += 1
    return out


@dataclass(frozen=True)
class IndexDef:
    """One secondary index as Spanner reports it."""

    name: str
    table: str
    create: str
    """The statement that re-creates it, exactly as GetDatabaseDdl printed it."""
    kind: str = ""
    """``""`` for a plain index, ``SEARCH`` or ``VECTOR``."""
    unique: bool = False

    @property
    def drop(self) -> str:
        return f"DROP {self.kind + ' ' if self.kind else ''}INDEX {quote_path(self.name)}"


@dataclass(frozen=True)
class ForeignKeyDef:
    """One FOREIGN KEY constraint as Spanner reports it."""

    table: str
    """The table it is declared on (the referencing one)."""
    references: str
    definition: str
    """Its text, from ``CONSTRAINT`` (or ``FOREIGN KEY`` when unnamed) to its end."""
    name: Optional[str] = None
    """None when it was created without a name (Spanner then generated one, which the DDL
    does not print: see :func:`loader.deferred` for how it is found)."""

    @property
    def add(self) -> str:
        return f"ALTER TABLE {quote_path(self.table)} ADD {self.definition}"

    def drop_as(self, name: str) -> str:
        return f"ALTER TABLE {quote_path(self.table)} DROP CONSTRAINT {quote_path(name)}"


def quote_path(name: str) -> str:
    """A (possibly schema-qualified) GoogleSQL name in backticks, part by part."""
    return ".".join(
        "`" + p.replace("\\", "\\\\").replace("`", "\\`") + "`" for p in name.split(".")
    )


def _name(toks: Sequence[Token], i: int) -> tuple[str, int]:
    """The (dotted) name starting at ``toks[i]``, and the index after it."""
    if i >= len(toks) or toks[i].kind != "id":
        raise ValueError("a name was expected")
    parts = [toks[i].text]
    i += 1
    while i + 1 < len(toks) and toks[i].text == "." and toks[i].kind == "sym":
        parts.append(toks[i + 1].text)
        i += 2
    return ".".join(parts), i


def _skip_if_not_exists(toks: Sequence[Token], i: int) -> int:
    if (
        i + 2 < len(toks)
        and toks[i].kw("IF")
        and toks[i + 1].kw("NOT")
        and toks[i + 2].kw("EXISTS")
    ):
        return i + 3
    return i


def parse_index(statement: str) -> Optional[IndexDef]:
    """The index a ``CREATE ... INDEX`` statement makes; None for any other statement."""
    toks = tokens(statement)
    if len(toks) < 2 or not toks[0].kw("CREATE"):
        return None
    i, unique, kind = 1, False, ""
    while i < len(toks) and toks[i].kw("UNIQUE", "NULL_FILTERED", "SEARCH", "VECTOR"):
        word = toks[i].text.upper()
        unique = unique or word == "UNIQUE"
        kind = word if word in ("SEARCH", "VECTOR") else kind
        i += 1
    if i >= len(toks) or not toks[i].kw("INDEX"):
        return None
    try:
        name, i = _name(toks, _skip_if_not_exists(toks, i + 1))
        if i >= len(toks) or not toks[i].kw("ON"):
            raise ValueError("ON was expected")
        table, _ = _name(toks, i + 1)
    except ValueError as e:
        raise _unreadable(statement, e) from None
    return IndexDef(name, table, statement.strip(), kind, unique)


def _elements(toks: Sequence[Token], open_at: int) -> Iterator[tuple[int, int]]:
    """Token ranges [a, b) of the comma-separated elements of the parenthesis opening at
    ``toks[open_at]``."""
    depth, start = 0, open_at + 1
    for j in range(open_at, len(toks)):
        t = toks[j]
        if t.kind != "sym":
            continue
        # not < >: a CHECK constraint compares with them; a comma inside STRUCT<...> only
        # splits a column's element, which is no foreign key either way
        if t.text in "([":
            depth += 1
        elif t.text in ")]":
            depth -= 1
            if depth == 0:
                if j > start:
                    yield start, j
                return
        elif t.text == "," and depth == 1:
            if j > start:
                yield start, j
            start = j + 1


def _foreign_key(
    statement: str, toks: Sequence[Token], a: int, b: int, table: str
) -> Optional[ForeignKeyDef]:
    """The foreign key that tokens [a, b) declare, if they declare one."""
    name = None
    i = a
    if toks[i].kw("CONSTRAINT"):
        name, i = _name(toks, i + 1)
    if not (i + 1 < b and toks[i].kw("FOREIGN") and toks[i + 1].kw("KEY")):
        return None
    refs = [k for k in range(i, b) if toks[k].kw("REFERENCES")]
    if not refs:
        raise _unreadable(statement, ValueError("REFERENCES was expected"))
    target, _ = _name(toks, refs[0] + 1)
    text = statement[toks[a].start : toks[b - 1].end]
    return ForeignKeyDef(table, target, text, name)


def parse_foreign_keys(statement: str) -> list[ForeignKeyDef]:
    """The foreign keys a ``CREATE TABLE`` or ``ALTER TABLE ... ADD`` statement declares."""
    toks = tokens(statement)
    if len(toks) < 3 or not toks[1].kw("TABLE"):
        return []
    try:
        if toks[0].kw("CREATE"):
            table, i = _name(toks, _skip_if_not_exists(toks, 2))
            if i >= len(toks) or toks[i].text != "(":
                return []
            return [
                fk
                for a, b in _elements(toks, i)
                if (fk := _foreign_key(statement, toks, a, b, table)) is not None
            ]
        if toks[0].kw("ALTER"):
            table, i = _name(toks, 2)
            if i < len(toks) and toks[i].kw("ADD"):
                fk = _foreign_key(statement, toks, i + 1, len(toks), table)
                return [fk] if fk is not None else []
    except ValueError as e:
        raise _unreadable(statement, e) from None
    return []


def _unreadable(statement: str, e: Exception) -> SchemaError:
    head = " ".join(statement.split())[:120]
    return SchemaError(
        f"cannot read the DDL statement {head!r}: {e}",
        hint="leave out `defer_indexes` / `defer_foreign_keys` and create the indexes after "
        "the load by hand",
    )


@dataclass(frozen=True)
class Schema:
    """The indexes and foreign keys of a database's DDL, in the order Spanner printed them."""

    indexes: tuple[IndexDef, ...]
    foreign_keys: tuple[ForeignKeyDef, ...]


def read_ddl(statements: Sequence[str]) -> Schema:
    indexes: list[IndexDef] = []
    fks: list[ForeignKeyDef] = []
    for s in statements:
        idx = parse_index(s)
        if idx is not None:
            indexes.append(idx)
        else:
            fks.extend(parse_foreign_keys(s))
    return Schema(tuple(indexes), tuple(fks))
