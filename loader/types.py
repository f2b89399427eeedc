"""Spanner column types and the Arrow representation each one has inside the loader.

This module is the contract between the pipeline stages: the converter produces, for each
Spanner type, exactly the Arrow type given by :func:`arrow_type`; the sorter, the batcher and
the encoder consume it.

=================  =====================================  =====================================
Spanner type       Arrow type inside the loader           notes
=================  =====================================  =====================================
INT64              int64
FLOAT64            float64                                NaN / +-inf allowed
FLOAT32            float32
BOOL               bool
NUMERIC            decimal128(38, 9)                      precision 38, scale 9 (GoogleSQL)
numeric (PG)       string, plain decimal text             PostgreSQL dialect: 131,072 integer
                                                          and 16,383 fraction digits
STRING(n|MAX)      string                                 n counted in characters
BYTES(n|MAX)       binary                                 raw bytes (sorted byte-wise)
DATE               date32                                 0001-01-01 .. 9999-12-31
TIMESTAMP          string, canonical form                 ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``
                                                          (UTC, always 9 fraction digits: fixed
                                                          width, so byte order = time order, the
                                                          full 0001-9999 range and nanoseconds
                                                          survive), or the literal
                                                          ``spanner.commit_timestamp()``
JSON, jsonb (PG)   string                                 validated JSON text
ARRAY<T>           list_<arrow_type(T)>
=================  =====================================  =====================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa

#: The literal Spanner replaces with the commit timestamp (allow_commit_timestamp columns).
COMMIT_TIMESTAMP = "spanner.commit_timestamp()"

SCALAR_CODES = (
    "INT64",
    "FLOAT64",
    "FLOAT32",
    "BOOL",
    "NUMERIC",
    "STRING",
    "BYTES",
    "DATE",
    "TIMESTAMP",
    "JSON",
)

_TYPE_RE = re.compile(
    r"^\s*(?:ARRAY\s*<\s*(?P<elem>.+?)\s*>|(?P<code>[A-Z0-9]+)(?:\s*\(\s*(?P<len>MAX|\d+)\s*\))?)\s*$",
    re.IGNORECASE,
)

# PostgreSQL-dialect SPANNER_TYPE spellings mapped onto the GoogleSQL codes.
_PG_ALIASES = {
    "BIGINT": "INT64",
    "DOUBLE PRECISION": "FLOAT64",
    "REAL": "FLOAT32",
    "BOOLEAN": "BOOL",
    "CHARACTER VARYING": "STRING",
    "TEXT": "STRING",
    "BYTEA": "BYTES",
    "TIMESTAMP WITH TIME ZONE": "TIMESTAMP",
    "JSONB": "JSON",
}


@dataclass(frozen=True)
class SpannerType:
    """A parsed Spanner column type, e.g. ``STRING(64)`` or ``ARRAY<INT64>``."""

    code: str
    """One of :data:`SCALAR_CODES`, or ``ARRAY``."""
    length: Optional[int] = None
    """Declared length of STRING(n) / BYTES(n); None for MAX or other types."""
    element: Optional[SpannerType] = None
    """Element type of an ARRAY."""
    postgres: bool = False
    """A type of a PostgreSQL-dialect database whose values follow other rules than the
    GoogleSQL type of the same code: ``jsonb`` (JSON) keeps its numbers as written (4,932
    digits before the point, 16,383 after), the last of duplicate keys, and any nesting, where
    GoogleSQL's JSON keeps FLOAT64-exact numbers, the first key and 80 levels; ``numeric``
    (NUMERIC) holds 131,072 integer and 16,383 fraction digits, GoogleSQL's 29 and 9
    (Spanner's "Work with JSONB data", "Work with JSON data" and "Work with NUMERIC data"
    pages). False for every other type, which behave alike in both dialects."""

    @classmethod
    def parse(cls, text: str, postgresql: bool = False) -> SpannerType:
        """Parse a SPANNER_TYPE string from INFORMATION_SCHEMA.COLUMNS (of a
        PostgreSQL-dialect database: ``postgresql``, which marks the types of
        :attr:`postgres`).

        >>> SpannerType.parse("ARRAY<STRING(MAX)>").element
        SpannerType(code='STRING', length=None, element=None)
        """
        raw = text.strip()
        upper = raw.upper()
        if upper.endswith("[]"):  # PostgreSQL dialect arrays, e.g. "bigint[]"
            return cls("ARRAY", element=cls.parse(raw[:-2], postgresql))
        base = re.sub(r"\(.*\)$", "", upper).strip()
        if base in _PG_ALIASES:
            m = re.search(r"\((\d+)\)$", upper)
            return cls(_PG_ALIASES[base], int(m.group(1)) if m else None)._marked(postgresql)
        if upper.startswith("NUMERIC") and upper != "NUMERIC":  # PG numeric(p,s) is unsupported
            raise ValueError(f"unsupported Spanner type {text!r}")
        m = _TYPE_RE.match(raw)
        if not m:
            raise ValueError(f"unsupported Spanner type {text!r}")
        if m.group("elem"):
            return cls("ARRAY", element=cls.parse(m.group("elem"), postgresql))
        code = m.group("code").upper()
        if code not in SCALAR_CODES:
            raise ValueError(f"unsupported Spanner type {text!r}")
        length = m.group("len")
        return cls(
            code, None if length is None or length.upper() == "MAX" else int(length)
        )._marked(postgresql)

    def _marked(self, postgresql: bool) -> SpannerType:
        if postgresql and self.code in ("JSON", "NUMERIC"):
            return SpannerType(self.code, self.length, self.element, postgres=True)
        return self

    @property
    def numeric_text(self) -> bool:
        """A PostgreSQL ``numeric``: held as its decimal text (no Arrow decimal holds it)."""
        return self.code == "NUMERIC" and self.postgres

    def __str__(self) -> str:
        if self.code == "ARRAY":
            return f"ARRAY<{self.element}>"
        if self.code in ("STRING", "BYTES"):
            return f"{self.code}({self.length if self.length is not None else 'MAX'})"
        return "JSONB" if self.postgres and self.code == "JSON" else self.code


def arrow_type(t: SpannerType) -> pa.DataType:
    """The Arrow type the loader uses for a Spanner type (see the module docstring)."""
    if t.code == "ARRAY":
        assert t.element is not None
        return pa.list_(arrow_type(t.element))
    return pa.string() if t.numeric_text else _SCALAR_ARROW[t.code]


def encoded_as(t: SpannerType) -> str:
    """The code whose Arrow form and encoding a column of type ``t`` has: its own, but STRING
    for a PostgreSQL ``numeric`` (kept as text, sent as text as every NUMERIC is)."""
    return "STRING" if t.numeric_text else t.code


_SCALAR_ARROW: dict[str, pa.DataType] = {
    "INT64": pa.int64(),
    "FLOAT64": pa.float64(),
    "FLOAT32": pa.float32(),
    "BOOL": pa.bool_(),
    "NUMERIC": pa.decimal128(38, 9),
    "STRING": pa.string(),
    "BYTES": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.string(),
    "JSON": pa.string(),
}


def one_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``col`` as one Array: a ChunkedArray's only chunk as it is, else its chunks combined.

    pyarrow's ``combine_chunks`` copies even a single chunk (it concatenates), and the
    loader's columns are nearly always one chunk (a parse block, a flush's combined buffer).
    """
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        if col.num_chunks == 0:
            return pa.array([], col.type)
        return col.combine_chunks()
    return col


def civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(year, month, day) int64 arrays of ``days`` since 1970-01-01 in the proleptic
    Gregorian calendar (H. Hinnant's civil_from_days), in numpy: no per-value Python."""
    z = np.asarray(days, dtype=np.int64) + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


def value_offsets(arr: pa.Array) -> np.ndarray:
    """The ``len(arr) + 1`` value offsets of a string or binary array (int32, or int64 for the
    large types) as a numpy view, its slice offset applied."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    width = 8 if large else 4
    return np.frombuffer(
        arr.buffers()[1], dtype=f"<i{width}", count=len(arr) + 1, offset=arr.offset * width
    )
