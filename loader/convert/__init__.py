"""Convert: string columns from :mod:`loader.parse` -> typed Arrow columns per :mod:`loader.types`.

Every column is converted whole with ``pyarrow.compute`` (casts, regex extraction, arithmetic)
or numpy (base64 / hex). That fast path raises or flags on a bad value; only then does a
slow path look for the offending rows (bisecting failed casts), so clean data never pays for
per-row work. A row with any bad value becomes one :class:`~loader.rejects.Reject` (the first
bad column, in table order) and is dropped from the output.

Accepted text per type (``ConvertOptions`` supplies the configurable parts):

INT64       ``[+-]?[0-9]+``, within int64: an optional sign, then decimal digits; no hex
            (``0x10`` is rejected, saying so), no spaces.
FLOAT64 / FLOAT32: decimal or exponent notation, ``nan``, ``inf``, ``infinity`` (any case);
            a finite text that overflows is rejected.
NUMERIC     ``[+-]?D[.D][e[+-]D]`` (digits on at least one side of the point), no spaces; at
            most 29 integer digits and 9 fraction digits (more fraction digits only when they
            are zeros): values that would round are rejected, never rounded.
BOOL        ``true_words`` / ``false_words``, case-insensitive (matched in one compiled pass,
            ``bool_values``, when the words and values are ASCII).
STRING(n)   length in characters; STRING(MAX) up to 2,621,440 characters.
BYTES(n)    base64 (padded) or hex; n counts decoded bytes. Base64 columns are decoded by the
            compiled decoder (``base64_values``) when every value is valid, else with numpy.
DATE        ``YYYY-MM-DD``, 0001-01-01 .. 9999-12-31.
TIMESTAMP   ``YYYY-MM-DD[Tt ]HH:MM:SS[.f{1,9}]`` then ``Z`` / ``z``, ``UTC``, ``+HH:MM``,
            ``+HHMM``, ``+HH`` or nothing (then local time in ``timezone``; a time skipped by a
            DST change is rejected, and so is a repeated one: it needs its offset); or
            ``timestamp_format`` (strptime, whole seconds). Columns in the RFC 3339 forms
            (naive text only in UTC) are parsed in one compiled pass (``offset_timestamps``).
            Output:
            ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ``, computed from whole seconds in int64 (not
            timestamp[ns], which stops at 2262) with the fraction carried through as text, so
            0001..9999 and nanoseconds survive.
            ``spanner.commit_timestamp()`` is accepted for allow_commit_timestamp columns.
JSON        valid JSON text (RFC 8259), kept as written. As Spanner, refuses ``NaN`` /
            ``Infinity`` and numbers outside the FLOAT64 range. Validated by the compiled
            validator (loader/_native.c ``json_checks``), which vouches only for what
            :func:`json.loads` accepts; the rest, and every value without the compiled
            parts, goes to :func:`json.loads` once per distinct value (the reference).
ARRAY<T>    JSON array syntax (``[1,2,null]``, ``["a","b"]``); elements are converted as T.
            With the postgres dialect also PostgreSQL's array text (``{1,2,NULL}``,
            ``{"a b",c}``; one dimension: :mod:`.pg_array`).
            Flat arrays are split by the compiled splitters (``json_arrays``, ``pg_arrays``);
            nested values, ``NaN`` and the like, malformed arrays, ARRAY<JSON>, a column that
            mixes the two syntaxes, and columns without the compiled parts are decoded per
            distinct value (:func:`json.loads`, :func:`.pg_array.parse_pg_array`). Elements
            are converted column-wise either way.

Public API: :class:`ConvertOptions`, :class:`ConvertedBlock`, :func:`convert_block`,
:func:`convert_column` (one column, for tests and reuse).

Layout: one module per type family (``numbers``, ``text``, ``time``, ``json_array``), the
options in ``options``, shared helpers in ``common``; this module dispatches by type and builds
the block's rejects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..errors import SchemaError, option
from ..rejects import Reject
from ..schema import TableSchema
from ..types import COMMIT_TIMESTAMP, SpannerType, arrow_type, one_array, value_offsets
from .common import _bisect as _bisect
from .common import _Errors, _max_value_bytes, _np_bool, _null_out
from .json_array import _convert_array, _convert_json
from .numbers import _convert_bool, _convert_float, _convert_int64, _convert_numeric
from .numbers import _numeric_reason as _numeric_reason
from .options import MAX_CELL_BYTES as MAX_CELL_BYTES
from .options import MAX_STRING_CHARS as MAX_STRING_CHARS
from .options import ConvertOptions
from .text import _convert_bytes, _convert_string
from .time import _convert_date, _convert_timestamp
from .time import _convert_timestamp_general as _convert_timestamp_general
from .time import _strict_zulu as _strict_zulu
from .time import _timestamp_fast as _timestamp_fast

if TYPE_CHECKING:
    from ..parse import ParsedBlock

__all__ = ["ConvertOptions", "ConvertedBlock", "convert_block", "convert_column"]


@dataclass
class ConvertedBlock:
    """The good rows of a block, typed, plus the rows rejected while converting."""

    table: pa.Table
    """Columns typed per :func:`loader.types.arrow_type`, named by table column."""
    record_numbers: pa.Int64Array
    line_numbers: Optional[pa.Int64Array]
    rejects: list[Reject]
    int_texts: dict[str, pa.Array] = field(default_factory=dict)
    """The source text of INT64 columns whose every value is already written as the encoder
    writes an INT64 (``str(int)``), row for row with ``table``: loader.encode then uses it
    instead of turning the integers back into text."""


_CONVERTERS: dict[
    str, Callable[[pa.Array, SpannerType, ConvertOptions], tuple[pa.Array, _Errors]]
] = {
    "INT64": _convert_int64,
    "FLOAT64": _convert_float,
    "FLOAT32": _convert_float,
    "NUMERIC": _convert_numeric,
    "BOOL": _convert_bool,
    "STRING": _convert_string,
    "BYTES": _convert_bytes,
    "DATE": _convert_date,
    "TIMESTAMP": _convert_timestamp,
    "JSON": _convert_json,
    "ARRAY": _convert_array,
}


def convert_column(
    arr: pa.Array, t: SpannerType, options: ConvertOptions, *, allow_commit_timestamp: bool = False
) -> tuple[pa.Array, dict[int, str]]:
    """Convert one string column to ``arrow_type(t)``.

    Returns the typed column (NULL where the input was NULL or bad) and {row: reason} for the
    bad values. NULL checks and cell sizes are :func:`convert_block`'s business.
    """
    arr = one_array(arr)
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    if t.code == "TIMESTAMP":
        out, errors = _convert_timestamp(arr, t, options, allow_commit_timestamp)
    else:
        out, errors = _CONVERTERS[t.code](arr, t, options)
    target = arrow_type(t)
    if out.type != target:
        out = out.cast(target)
    if errors:
        errors = {
            row: reason + _known_export(t, arr[row].as_py(), options)
            for row, reason in errors.items()
        }
    return out, errors


def _known_export(t: SpannerType, value: Optional[str], options: ConvertOptions) -> str:
    """For a value another database's export writes and no Spanner type holds (or holds only
    when read another way), what it is and what to do; else nothing. Only bad values get here."""
    v = (value or "").strip()
    if value == "" and t.code not in ("STRING", "BYTES"):
        return (
            " (an empty text: a NULL is written as a null marker, by default an empty field "
            'without quotes; a quoted "" is never one, and an empty field is not one either '
            f'when the null markers given ({option("null_markers")}) leave "" out)'
        )
    if t.code in ("DATE", "TIMESTAMP") and v.startswith("0000-00-00"):
        return (
            " (MySQL's zero date, which no DATE or TIMESTAMP holds: export it as NULL, e.g. "
            "NULLIF(col, '0000-00-00'))"
        )
    if t.code in ("DATE", "TIMESTAMP") and v.lower() in ("infinity", "-infinity"):
        return f" (PostgreSQL's {v.lower()}, which no {t.code} holds: export it as NULL)"
    if t.code in ("DATE", "TIMESTAMP") and v.upper().endswith(" BC"):
        return f" (a date before year 1, which no {t.code} holds: export it as NULL)"
    if t.code == "TIMESTAMP" and options.timestamp_format is not None:
        if re.search(r":\d\d[.,]\d", v):
            return (
                f" (fractional seconds, which {option('timestamp_format')} cannot read: Arrow's "
                "strptime has no %f; export whole seconds, or the text as ISO 8601 and leave "
                "the format out)"
            )
        return ""  # the format says how to read it; nothing else to tell
    if t.code in ("DATE", "TIMESTAMP") and re.match(r"\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}\b", v):
        if t.code == "TIMESTAMP":
            tail = f", or give {option('timestamp_format')})"
        elif options.timestamp_format is not None:
            # a tryout gave the format for a DATE column and was told nothing of it
            tail = f"; {option('timestamp_format')} reads TIMESTAMP columns only)"
        else:
            tail = ")"
        return (
            " (not year-month-day: export dates as YYYY-MM-DD, as PostgreSQL does with "
            "DateStyle ISO" + tail
        )
    if (
        t.code in ("NUMERIC", "FLOAT64", "FLOAT32", "INT64")
        and "," in v
        and re.fullmatch(r"[+-]?[\d.,]*\d", v)
    ):  # 3,14  1.000,00  1,234.50
        return (
            " (a comma in a number: numbers are read with a decimal point and no thousands "
            "separator, e.g. 3.14 or 1234)"
        )
    if t.code == "NUMERIC" and not t.postgres and v.lower().lstrip("+-") == "nan":
        return " (PostgreSQL's NaN, which no NUMERIC holds: export it as NULL, or use FLOAT64)"
    if t.code == "NUMERIC" and v.lower().lstrip("+-") in ("infinity", "inf"):
        # (PostgreSQL 14 and later write numeric infinities so)
        floats = "float8" if t.postgres else "FLOAT64"
        return (
            f" (PostgreSQL's infinity, which no NUMERIC holds: export it as NULL, or use {floats})"
        )
    if v == _MYSQL_NULL and t.code not in ("STRING", "JSON"):
        return (
            " (the NULL of MySQL's and PostgreSQL's tab-separated exports: read them with "
            f"{option('dialect', 'mysql')} or {option('dialect', 'postgres-text')}, or give "
            f"{option('null_markers', [_MYSQL_NULL])})"
        )
    if t.code == "TIMESTAMP" and re.search(r"[.,]\d{10}", v):
        return " (more than 9 fraction digits: a TIMESTAMP keeps nanoseconds)"
    if t.code == "TIMESTAMP" and re.search(r"[+-]\d\d:\d\d:\d\d$", v):
        return (
            " (an offset with seconds, as PostgreSQL writes local mean time before a zone's "
            "standard time: export with the session's TimeZone set to UTC)"
        )
    if t.code == "BYTES" and options.bytes_encoding == "base64" and v.startswith("\\x"):
        return (
            f" (PostgreSQL's bytea hex: a PostgreSQL export reads with {option('dialect', 'postgres')}"
            f" (its bytea and arrays), this column alone with "
            f"{option('bytes_encoding', 'hex')})"
        )
    if t.code == "BYTES" and options.bytes_encoding == "hex" and re.fullmatch(_BASE64, v):
        return f" (base64? read it with {option('bytes_encoding', 'base64')})"
    if t.code == "BYTES" and options.bytes_encoding == "postgres" and not v.startswith("\\x"):
        if re.fullmatch(_BASE64, v):
            return f" (base64? read it with {option('bytes_encoding', 'base64')})"
        return (
            " (COPY writes bytea as \\x then hex: a file of base64 text reads with "
            f"{option('bytes_encoding', 'base64')}, one written with bytea_output = escape "
            f"with {option('bytes_encoding', 'postgres-escape')})"
        )
    return ""


_MYSQL_NULL = "\\N"

_BASE64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)"


def check_commit_timestamp_column(table: TableSchema, name: str) -> None:
    """SchemaError unless ``name`` is exactly the name of an allow_commit_timestamp TIMESTAMP
    column of ``table`` (``commit_timestamp_columns`` names them as the table spells them)."""
    col = table.find_column(name)
    if col is None:
        table.column(name)  # raises, listing the columns
    assert col is not None
    if col.name != name:
        raise SchemaError(
            f"table {table.name} has no column {name!r}",
            hint=f"did you mean {col.name}? (`commit_timestamp_columns` spells a column as the "
            "table does)",
        )
    if col.type.code != "TIMESTAMP" or not col.allow_commit_timestamp:
        raise SchemaError(
            f"column {name} cannot take the commit timestamp",
            hint="only TIMESTAMP columns with OPTIONS (allow_commit_timestamp = true) can",
        )


def convert_block(
    block: ParsedBlock,
    table: TableSchema,
    options: ConvertOptions,
    source_name: str,
    *,
    int_texts: Optional[bool] = None,
) -> ConvertedBlock:
    """Type a parsed block; bad rows become rejects (one per row) and leave the output.

    Commit-timestamp columns in ``options`` are added, filled with ``spanner.commit_timestamp()``.
    SchemaError if such a column is not an allow_commit_timestamp TIMESTAMP column or the block
    also carries it. ``int_texts``: whether to keep INT64 source text for the encoder
    (:attr:`ConvertedBlock.int_texts`); None keeps it only for the numpy encoder, since the
    compiled one writes integers itself (loader.native).
    """
    keep_int_texts = not native.available() if int_texts is None else int_texts
    strings = block.strings
    n = strings.num_rows
    for name in sorted(options.commit_timestamp_columns):
        check_commit_timestamp_column(table, name)
        if name in strings.column_names:
            raise SchemaError(
                f"column {name} is filled with the commit timestamp but the CSV has it too",
                hint="ignore the CSV column",
            )
    reasons: dict[int, tuple[str, str, Optional[str]]] = {}  # row -> (column, reason, text)
    out: dict[str, pa.Array] = {}
    texts: dict[str, pa.Array] = {}
    ordered = [c for c in table.columns if c.name in strings.column_names]
    for col in ordered:
        arr = one_array(strings.column(col.name))
        if arr.type != pa.string():
            arr = arr.cast(pa.string())
        col_errors = _cell_size_errors(arr, _text_allowance(col.type, options))
        if col_errors:
            arr = _null_out(arr, list(col_errors))
        typed, errors = convert_column(
            arr, col.type, options, allow_commit_timestamp=col.allow_commit_timestamp
        )
        col_errors.update(errors)
        if col.type.code in ("BYTES", "ARRAY"):  # their text is larger than what is stored
            for i, reason in _stored_size_errors(typed, options.max_cell_bytes, col.type).items():
                col_errors.setdefault(i, reason)
        if not col.nullable and typed.null_count:
            nulls = np.flatnonzero(_np_bool(pc.is_null(typed)))
            why = f"NULL in NOT NULL column {col.name}" + (
                # Spanner fills a DEFAULT only into a column the write leaves out
                f" (its DEFAULT is for rows that leave the column out: {option('ignore')} it "
                "to have the DEFAULT in every row)"
                if col.has_default
                else ""
            )
            for i in nulls.tolist():
                col_errors.setdefault(i, why)
        for i, reason in col_errors.items():
            if i not in reasons:
                reasons[i] = (col.name, reason, strings.column(col.name)[i].as_py())
        out[col.name] = typed
        if keep_int_texts and col.type.code == "INT64" and _is_int_text(arr, typed):
            texts[col.name] = arr
    for name in sorted(options.commit_timestamp_columns):
        out[name] = pa.array(np.full(n, COMMIT_TIMESTAMP, dtype=object), pa.string())
    result = pa.table(out) if out else pa.table({})
    records = block.record_numbers
    lines = block.line_numbers
    rejects: list[Reject] = []
    if reasons:
        keep = np.ones(n, dtype=bool)
        keep[list(reasons)] = False
        mask = pa.array(keep)
        result = result.filter(mask)
        for i in sorted(reasons, key=lambda r: records[r].as_py()):
            column, reason, text = reasons[i]
            rejects.append(
                Reject(
                    source=source_name,
                    line=lines[i].as_py() if lines is not None else None,
                    record=records[i].as_py(),
                    column=column,
                    reason=reason,
                    text=text,
                    table=table.name,
                )
            )
        records = records.filter(mask)
        lines = lines.filter(mask) if lines is not None else None
        texts = {name: text.filter(mask) for name, text in texts.items()}
    # row for row with the typed column, NULLs included (a rejected row left both)
    texts = {
        name: text
        for name, text in texts.items()
        if text.null_count == result.column(name).null_count
    }
    return ConvertedBlock(result, records, lines, rejects, texts)


def _is_int_text(text: pa.Array, typed: pa.Array) -> bool:
    """Whether each value of ``text`` that converted (non-NULL in ``typed``) is written as
    ``str(int)`` writes it: a digit 1-9 first (or ``-`` then one), or the single digit ``0``.
    The conversion accepted the value, so the rest of it are decimal digits; a sign ``+``
    (which Spanner refuses in INT64 text), leading zeros and ``-0`` all fail the test."""
    if len(text) == 0 or text.type != pa.string() or typed.null_count == len(typed):
        return False
    offsets = value_offsets(text)
    start, size = offsets[:-1], np.diff(offsets)
    if typed.null_count:
        ok_rows = _np_bool(pc.is_valid(typed))
        start, size = start[ok_rows], size[ok_rows]
    if not size.all():
        return False
    data = np.frombuffer(text.buffers()[2], dtype=np.uint8)
    first = data[start]
    second = data[np.minimum(start + 1, len(data) - 1)]
    nonzero = (first >= ord("1")) & (first <= ord("9"))
    zero = (first == ord("0")) & (size == 1)
    negative = (first == ord("-")) & (size >= 2) & (second >= ord("1")) & (second <= ord("9"))
    return bool((nonzero | zero | negative).all())


_TEXT_PER_BYTE = {"base64": 4 / 3, "hex": 2, "postgres": 2, "postgres-escape": 4}
"""The most text a BYTES value's encoding takes per byte (PostgreSQL's escape format writes a
byte as \\ooo at most)."""


def _text_allowance(t: SpannerType, options: ConvertOptions) -> int:
    """The most text a cell of ``t`` within Spanner's cell limit may take: the limit, but for
    BYTES (encoded: base64 is 4/3 of the bytes) and ARRAY (quotes, escapes, separators),
    whose stored size is checked after conversion (a tryout's 8 MiB base64 value was refused
    as an 11 MB cell)."""
    limit = options.max_cell_bytes
    if t.code == "BYTES":
        return int(limit * _TEXT_PER_BYTE.get(options.bytes_encoding, 4)) + 8
    if t.code == "ARRAY":
        return 4 * limit
    return limit


def _stored_size_errors(typed: pa.Array, limit: int, t: Optional[SpannerType] = None) -> _Errors:
    """Cells of a BYTES or ARRAY column (of type ``t``) larger than ``limit`` as Spanner
    stores them: the bytes, or the elements' bytes (8 for each fixed-size element, 12 for a
    TIMESTAMP, held here as its text: less than the text, so that no cell Spanner takes is
    refused; one it does not is refused at its commit)."""
    if isinstance(typed, pa.ChunkedArray):
        typed = typed.combine_chunks()
    if typed.nbytes * 2 <= limit:  # no cell can be (a fixed-size element counts up to 8)
        return {}
    if pa.types.is_list(typed.type) or pa.types.is_large_list(typed.type):
        values = typed.values  # every element, a null list's too (offsets index them)
        element = t.element if t is not None else None
        if element is not None and element.code == "TIMESTAMP":
            sizes = np.full(len(values), 12, dtype=np.int64)
        elif pa.types.is_binary(values.type) or pa.types.is_string(values.type):
            sizes = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
        else:
            sizes = np.full(len(values), 8, dtype=np.int64)
        ends = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        offsets = typed.offsets.to_numpy()
        stored = ends[offsets[1:]] - ends[offsets[:-1]]
        stored[_np_bool(typed.is_null())] = 0
    elif pa.types.is_binary(typed.type) or pa.types.is_string(typed.type):
        stored = pc.fill_null(pc.binary_length(typed), 0).to_numpy(zero_copy_only=False)
    else:
        return {}
    over = np.flatnonzero(stored > limit)
    return {int(i): f"cell too large: {int(stored[i]):,} bytes (limit {limit:,})" for i in over}


def _cell_size_errors(arr: pa.Array, limit: int) -> _Errors:
    if _max_value_bytes(arr) <= limit:
        return {}
    lengths = pc.binary_length(arr)
    if (pc.max(lengths).as_py() or 0) <= limit:
        return {}
    over = np.flatnonzero(_np_bool(pc.greater(lengths, limit)))
    return {
        int(i): f"cell too large: {lengths[int(i)].as_py():,} bytes (limit {limit:,})" for i in over
    }
