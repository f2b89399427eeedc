"""How values are read: :class:`ConvertOptions` (the configurable spellings) and the cell limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..parse import Dialect

MAX_CELL_BYTES = 10 << 20
"""Spanner's limit for one cell."""
MAX_STRING_CHARS = 2_621_440
"""Most characters a STRING(MAX) holds."""
BYTES_ENCODINGS = ("base64", "hex", "postgres", "postgres-escape")
"""How BYTES text is read: base64; hex (an optional ``\\x`` or ``0x`` first); PostgreSQL's
bytea as COPY writes it by default (``bytea_output = hex``: ``\\x`` then hex, nothing else);
``postgres-escape``: as COPY writes it with ``bytea_output = escape`` (``\\x`` hex read too).
Base64 text is valid escape-format bytea, its letters taken as bytes: ``postgres`` refuses it
rather than guess."""


@dataclass(frozen=True)
class ConvertOptions:
    """How values are read; :meth:`from_dialect` takes them from a parse.Dialect."""

    timezone: str = "UTC"
    timestamp_format: Optional[str] = None
    bytes_encoding: str = "base64"
    true_words: tuple[str, ...] = ("true", "t", "yes", "y", "1")
    false_words: tuple[str, ...] = ("false", "f", "no", "n", "0")
    commit_timestamp_columns: frozenset[str] = field(default_factory=frozenset)
    """TIMESTAMP columns (allow_commit_timestamp) filled with spanner.commit_timestamp()."""
    max_cell_bytes: int = MAX_CELL_BYTES
    array_syntax: str = "json"
    """``json``: ARRAY values are JSON array text; ``postgres``: PostgreSQL's ``{a,b}`` too."""

    def __post_init__(self) -> None:
        if self.bytes_encoding not in BYTES_ENCODINGS:
            raise ConfigError(
                "bytes encoding must be base64, hex, postgres or postgres-escape, not "
                f"{self.bytes_encoding!r}"
            )
        if self.array_syntax not in ("json", "postgres"):
            raise ConfigError(f"array syntax must be json or postgres, not {self.array_syntax!r}")
        if self.timezone.upper() != "UTC":
            try:
                pc.assume_timezone(pa.array([0], pa.timestamp("s")), self.timezone)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise ConfigError(
                    f"unknown time zone {self.timezone!r}",
                    hint="use an IANA name such as Europe/Berlin or America/New_York",
                ) from None
        if self.timestamp_format is not None:
            _check_timestamp_format(self.timestamp_format)
        overlap = {w.lower() for w in self.true_words} & {w.lower() for w in self.false_words}
        if overlap:
            raise ConfigError(f"words both true and false: {', '.join(sorted(overlap))}")

    @classmethod
    def from_dialect(cls, dialect: Dialect, **overrides: Any) -> ConvertOptions:
        """The dialect's value spellings (bool words, bytes encoding, time zone, format)."""
        values: dict[str, Any] = dict(
            timezone=dialect.timezone,
            timestamp_format=dialect.timestamp_format,
            bytes_encoding=dialect.bytes_encoding,
            true_words=dialect.true_words,
            false_words=dialect.false_words,
            array_syntax=dialect.array_syntax,
        )
        values.update(overrides)
        return cls(**values)


def _check_timestamp_format(fmt: str) -> None:
    """ConfigError for a format the parser (Arrow's strptime) cannot read back from a time
    Python's strftime wrote with it: every value would be rejected. Arrow has no ``%f``."""
    import datetime as dt

    sample = dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.timezone.utc).strftime(fmt)
    try:
        parsed = pc.strptime(pa.array([sample]), fmt, "s", error_is_null=True)
        readable = parsed.null_count == 0
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        readable = False
    if not readable:
        raise ConfigError(
            f"the timestamp format {fmt!r} cannot be read by the loader's parser (Arrow's "
            "strptime)" + (": it has no %f (fractions of a second)" if "%f" in fmt else ""),
            hint="leave `timestamp_format` out for RFC 3339 / ISO 8601 text, with or without "
            "a fraction ('2024-01-02 03:04:05.123456', '2024-01-02T03:04:05Z'), which reads "
            "as it is; or export the times in such a form",
        )
