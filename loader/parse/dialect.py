"""Dialects: how a CSV file is written (delimiter, quoting, escapes, header, encoding, NULL
markers, value spellings), and the named presets.

NULLs
-----
A field equal to one of ``Dialect.null_markers`` is NULL only when it is *unquoted*: with the
default markers ``("",)`` an empty unquoted field is NULL and ``""`` is an empty string, as
PostgreSQL's ``COPY ... CSV`` writes them (pyarrow: ``strings_can_be_null`` with
``quoted_strings_can_be_null=False``).
"""

from __future__ import annotations

import codecs
import dataclasses
from dataclasses import dataclass
from typing import Any, AnyStr, Optional

from ..errors import ConfigError, option


@dataclass(frozen=True)
class Dialect:
    """How a CSV file is written. Build one directly or from a preset (:data:`PRESETS`)."""

    delimiter: str = ","
    quote_char: Optional[str] = '"'
    """None: quoting is off (MySQL tab dumps)."""
    escape_char: Optional[str] = None
    """pyarrow-style escape: the next character is taken literally (``"a\\"b"``)."""
    double_quote: bool = True
    """``""`` inside a quoted field is one quote."""
    newlines_in_values: bool = True
    backslash_escapes: bool = False
    """MySQL escapes: ``\\N`` NULL, ``\\t \\n \\r \\0 \\b \\Z \\\\`` (see :mod:`loader.parse.escapes`)."""
    escape_style: str = "mysql"
    """Which backslash escapes: ``mysql``, or ``postgres``, PostgreSQL's COPY text format
    (``\\b \\f \\n \\r \\t \\v``, octal ``\\ooo`` and hex ``\\xhh`` bytes, a carriage
    return alone ends a line)."""
    header: bool = True
    columns: Optional[tuple[str, ...]] = None
    """CSV column names by position when there is no header (default: the table's writable
    columns in table order); with ``header`` set, refused."""
    skip_rows: int = 0
    """Lines to skip before the header (or the first record)."""
    encoding: str = "utf-8"
    """Any Python codec; non-UTF-8 input is transcoded while streaming. A UTF-8 BOM is dropped."""
    trailing_delimiter: Optional[bool] = None
    """Every row ends with a delimiter (an extra empty field). None: detect it from a header
    whose last name is empty; without a header None means False."""
    skip_blank_lines: bool = True
    null_markers: tuple[str, ...] = ("",)
    """Unquoted field values read as NULL (with ``backslash_escapes``, ``\\N`` always is)."""
    true_words: tuple[str, ...] = ("true", "t", "yes", "y", "1")
    false_words: tuple[str, ...] = ("false", "f", "no", "n", "0")
    """BOOL spellings, compared case-insensitively."""
    bytes_encoding: str = "base64"
    """``base64`` or ``hex`` (an optional ``\\x`` / ``0x`` prefix is allowed)."""
    timezone: str = "UTC"
    """IANA zone for TIMESTAMP values without an offset."""
    timestamp_format: Optional[str] = None
    """strptime-style format for TIMESTAMP values (whole seconds); None: RFC 3339 and
    ``YYYY-MM-DD HH:MM:SS[.fffffffff][ offset|UTC]``."""
    array_syntax: str = "json"
    """How ARRAY values are written: ``json`` (``["a","b"]``), or ``postgres``, which also
    reads PostgreSQL's ``{a,"b c",NULL}`` (:mod:`loader.convert.pg_array`)."""

    def __post_init__(self) -> None:
        if self.backslash_escapes and "\\N" not in self.null_markers:
            # MySQL's escapes write NULL as \N and a literal \N as \\N: it is always NULL,
            # beside any other marker (unescaped, it would load as the text 'N')
            object.__setattr__(self, "null_markers", (*self.null_markers, "\\N"))
        if len(self.delimiter) != 1:
            raise ConfigError(
                f"{option('delimiter')} must be one character, not {self.delimiter!r}",
                hint="one character, e.g. ';' or '|' (a tab is written \\t)",
            )
        if self.delimiter in ("\n", "\r"):
            raise ConfigError("the delimiter cannot be a line end")
        for what, v in (
            ("delimiter", self.delimiter),
            ("quote character", self.quote_char),
            ("escape character", self.escape_char),
        ):
            if v is not None and not v.isascii():
                # the reader takes a single byte (a tryout's '§' stopped with a ValueError)
                raise ConfigError(
                    f"the {what} must be an ASCII character, not {v!r}",
                    hint=f"the reader splits and quotes on single bytes: convert the files to "
                    f"an ASCII {what} first",
                )
        for name, what, like in (
            ("quote_char", "quote character", "'\"' or \"'\""),
            ("escape_char", "escape character", "'\\\\'"),
        ):
            v = getattr(self, name)
            if v is not None and len(v) != 1:
                raise ConfigError(
                    f"the {what} must be one character or none, not {v!r}",
                    hint=f"one character, e.g. {like}; an empty one for none",
                )
            if v in ("\n", "\r"):
                raise ConfigError(f"the {what} cannot be a line end")
            if v == self.delimiter:
                raise ConfigError(
                    f"the {what} and the delimiter are both {self.delimiter!r}",
                    hint=f"a field is separated by one character and quoted by another: give "
                    f"the {what} of the files (or none), or their delimiter",
                )
        if self.bytes_encoding not in ("base64", "hex", "postgres", "postgres-escape"):
            raise ConfigError(
                "bytes encoding must be base64, hex, postgres or postgres-escape, not "
                f"{self.bytes_encoding!r}"
            )
        if self.array_syntax not in ("json", "postgres"):
            raise ConfigError(f"array syntax must be json or postgres, not {self.array_syntax!r}")
        if self.skip_rows < 0:
            raise ConfigError(f"{option('skip_rows')} must be 0 or more, not {self.skip_rows}")
        if self.columns is not None and self.header:
            raise ConfigError(
                f"{option('columns')} names the fields of files without a header, and "
                f"{option('header', True)} says the first row names them",
                hint=f"drop {option('header')} (every row is then data) or "
                f"{option('columns')} (the header names the columns)",
            )
        if self.escape_char is not None and self.escape_char == self.quote_char:
            # Arrow's reader would take each quote as escaping the byte after it: a closing
            # quote escapes the line end, and the rest of the file is one value
            raise ConfigError(
                f"the escape character and the quote character are both {self.quote_char!r}",
                hint=f"a quote inside a quoted value written twice ({self.quote_char * 2}) is "
                "read that way already: give no escape character",
            )
        if self.backslash_escapes and self.escape_char is not None:
            raise ConfigError(
                "backslash escapes (MySQL's, PostgreSQL's text format) and an escape character "
                "cannot be combined",
                hint=f"{option('dialect', 'mysql')} and {option('dialect', 'postgres-text')} "
                "read backslash escapes themselves: give no escape character",
            )
        if self.escape_style not in ("mysql", "postgres"):
            raise ConfigError(f"escape style must be mysql or postgres, not {self.escape_style!r}")
        if self.escape_char is not None and any(self.escape_char in m for m in self.null_markers):
            # the reader takes the escape out before it compares: `\N` would read as N
            marker = next(m for m in self.null_markers if self.escape_char in m)
            raise ConfigError(
                f"the NULL marker '{marker}' holds the escape character '{self.escape_char}', "
                "so it never matches (the escape is taken out of a value first)",
                hint=f"PostgreSQL's text format (COPY without FORMAT csv) reads with "
                f"{option('dialect', 'postgres-text')}; MySQL's with {option('dialect', 'mysql')}",
            )
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise ConfigError(f"unknown encoding {self.encoding!r}") from None

    def with_columns(self, columns: Optional[tuple[str, ...]]) -> Dialect:
        """This dialect with CSV column names by position: the files have no header (a
        manifest table's ``columns``, read as the Dataflow template reads them)."""
        if columns is None:
            return dataclasses.replace(self, columns=None)
        return dataclasses.replace(self, columns=tuple(columns), header=False)


PRESETS: dict[str, Dialect] = {
    "csv": Dialect(),
    # PostgreSQL COPY ... TO ... (FORMAT csv): empty unquoted = NULL, "" = empty string,
    # bytea as \x hex (bytea_output's default), arrays as {a,b}.
    "postgres": Dialect(header=False, bytes_encoding="postgres", array_syntax="postgres"),
    # the same, spelled as the database dialect is (--ddl-dialect postgresql)
    "postgresql": Dialect(header=False, bytes_encoding="postgres", array_syntax="postgres"),
    # MySQL SELECT ... INTO OUTFILE / mysqldump --tab: tabs, no quoting, backslash escapes.
    "mysql": Dialect(
        delimiter="\t",
        quote_char=None,
        double_quote=False,
        backslash_escapes=True,
        header=False,
        null_markers=("\\N",),
    ),
    # PostgreSQL COPY ... TO (its text format, no FORMAT csv): tabs, no quoting, backslash
    # escapes as PostgreSQL writes them, \N = NULL, no header; bytea and arrays as above.
    "postgres-text": Dialect(
        delimiter="\t",
        quote_char=None,
        double_quote=False,
        backslash_escapes=True,
        escape_style="postgres",
        header=False,
        null_markers=("\\N",),
        bytes_encoding="postgres",
        array_syntax="postgres",
    ),
    # BigQuery EXTRACT ... CSV: header, NULL as empty, TIMESTAMP "2024-01-01 12:00:00 UTC".
    "bigquery": Dialect(),
    # Excel "CSV UTF-8": BOM + CRLF, both handled by the default reader.
    "excel": Dialect(),
}
"""Named dialects. ``postgres`` has no header by default (``COPY`` writes none unless asked:
pass ``header=True``); ``mysql`` has none either (``mysqldump --tab`` writes none)."""


def dialect_from_preset(name: str, **overrides: Any) -> Dialect:
    """A preset dialect with some fields replaced, e.g. ``dialect_from_preset("postgres",
    header=True)``; ConfigError for an unknown preset or field."""
    try:
        base = PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown CSV dialect {name!r}", hint="one of: " + ", ".join(sorted(PRESETS))
        ) from None
    try:
        return dataclasses.replace(base, **overrides)
    except TypeError as e:
        raise ConfigError(f"bad dialect option: {e}") from None


def line_ends(data: AnyStr, stop: Optional[int] = None) -> int:
    """Line ends in ``data[:stop]`` (all of it by default): LFs, and CRs no LF follows (a CR
    alone ends a line, as Arrow's reader reads it; a CR LF across ``stop`` counts at its CR)."""
    end = len(data) if stop is None else stop
    lf, cr = ("\n", "\r") if isinstance(data, str) else (b"\n", b"\r")
    crlf = data.count(cr + lf, 0, min(end + 1, len(data)))  # type: ignore[operator]
    return data.count(lf, 0, end) + data.count(cr, 0, end) - crlf  # type: ignore[arg-type]
