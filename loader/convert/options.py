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
        if self.bytes_encoding not in ("base64", "hex"):
            raise ConfigError(f"bytes encoding must be base64 or hex, not {self.bytes_encoding!r}")
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
