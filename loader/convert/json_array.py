"""JSON (validated, text kept) and ARRAY<T> (JSON array text, elements converted as T)."""

from __future__ import annotations

import decimal
import json
import math
import re
import sys
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..types import SpannerType, arrow_type
from .common import (
    _decimal,
    _digits_around_point,
    _Errors,
    _huge_exponent,
    _np_bool,
    _null_out,
    _show,
)
from .options import ConvertOptions
from .pg_array import PgArrayError, parse_pg_array


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


INT64_MIN, UINT64_MAX = -(1 << 63), (1 << 64) - 1


class JsonNumberError(ValueError):
    """A JSON number Spanner's JSON type does not keep."""


def _json_float(text: str) -> float:
    """A JSON number that is not an integer of Spanner's range: Spanner's JSON keeps it as a
    double only when its text round-trips (string -> double -> string, no decimal lost) and
    refuses the document otherwise (Spanner's "Work with JSON data" page); so does this."""
    value = float(text)
    if math.isinf(value):
        raise JsonNumberError(f"{_show(text)} is outside the FLOAT64 range")
    exact = _decimal(text)
    if exact is None and _huge_exponent(text)[0]:
        return value  # 0, however large its exponent
    if exact is None or decimal.Decimal(repr(value)) != exact:
        raise JsonNumberError(
            f"{_show(text)} has more digits than a FLOAT64 holds (Spanner's JSON keeps integers "
            "of [-2^63, 2^64-1] and numbers a FLOAT64 holds exactly; write it as a JSON string)"
        )
    return value


def _json_int(text: str) -> Any:
    value = int(text)
    return value if INT64_MIN <= value <= UINT64_MAX else _json_float(text)


def first_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose duplicate keys keep their first value, as Spanner's JSON does."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        out.setdefault(k, v)
    return out


JSON_LEVELS = 80
"""The nesting GoogleSQL's JSON takes ("Work with JSON data"); PostgreSQL's JSONB sets none."""
JSONB_DIGITS = (4932, 16383)
"""The digits a JSONB number may have before and after its point ("Work with JSONB data")."""


class JsonDepthError(ValueError):
    """A JSON document nested deeper than Spanner's JSON takes."""


class RawNumber(str):
    """A JSONB number as written: Spanner's JSONB keeps it so (``1.50`` stays ``1.50``)."""


def _jsonb_number(text: str) -> RawNumber:
    d = _decimal(text)
    before, after = _digits_around_point(d) if d is not None else (sys.maxsize, 0)
    if before > JSONB_DIGITS[0] or after > JSONB_DIGITS[1]:
        raise JsonNumberError(
            f"{_show(text)} has more digits than a JSONB number holds ({JSONB_DIGITS[0]:,} "
            f"before the point, {JSONB_DIGITS[1]:,} after; write it as a JSON string)"
        )
    return RawNumber(text)


def _load_json(text: str, jsonb: bool = False) -> Any:
    """:func:`json.loads` refusing what Spanner refuses and Python's parser takes: ``NaN`` /
    ``Infinity``, and numbers Spanner does not keep (GoogleSQL's JSON: ``1e400``, 400-digit
    integers, ``2.2412421353246235436``; JSONB: over its digits); duplicate keys keep their
    first value (GoogleSQL) or their last (JSONB), as Spanner does. JSONB numbers come back as
    :class:`RawNumber`."""
    if jsonb:
        return json.loads(
            text, parse_constant=_json_constant, parse_float=_jsonb_number, parse_int=_jsonb_number
        )
    return json.loads(
        text,
        parse_constant=_json_constant,
        parse_float=_json_float,
        parse_int=_json_int,
        object_pairs_hook=first_keys,
    )


def _levels(v: Any) -> int:
    """How deep a parsed JSON document nests (a scalar: 0, ``[]``: 1, ``[{}]``: 2)."""
    deepest, level = 0, [(v, 1)]
    while level:
        x, n = level.pop()
        if isinstance(x, (list, dict)):
            deepest = max(deepest, n)
            level.extend((y, n + 1) for y in (x.values() if isinstance(x, dict) else x))
    return deepest


def json_document(text: str, t: SpannerType) -> Any:
    """One JSON document as Spanner's JSON of type ``t`` takes it (see :func:`_load_json`), or
    a ValueError (:class:`JsonNumberError`, :class:`JsonDepthError`) saying why not."""
    v = _load_json(text, t.postgres)
    if not t.postgres:
        _check_levels(v, text)
    return v


def _check_levels(v: Any, text: str) -> None:
    """JsonDepthError for ``v`` (parsed from ``text``, or from a text that holds it) nested
    deeper than GoogleSQL's JSON takes; a text with fewer brackets is not walked."""
    if text.count("[") + text.count("{") <= JSON_LEVELS:
        return
    n = _levels(v)
    if n > JSON_LEVELS:
        raise JsonDepthError(f"nested {n} levels deep; Spanner's JSON takes {JSON_LEVELS} at most")


def json_text(v: Any, t: SpannerType) -> str:
    """A parsed document (:func:`json_document`) as text that Spanner stores as it stores the
    source's text: JSONB numbers as written."""
    if not t.postgres:
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, RawNumber):
        return str.__str__(v)
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + json_text(x, t) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(json_text(x, t) for x in v) + "]"
    return json.dumps(v)


def _json_checks_native(arr: pa.Array) -> Optional[np.ndarray]:
    """The compiled validator (loader/_native.c ``json_checks``): per row, True where
    json.loads must decide (the value is not surely valid JSON); None when it is not built."""
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    flags = native.module().json_checks(native.string_descriptor(arr), len(arr), pa.allocate_buffer)
    return np.frombuffer(flags, dtype=np.uint8, count=len(arr)).astype(bool)


def _convert_json(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    ask = _json_checks_native(arr)
    if ask is None:
        return _convert_json_reference(arr, t, o)
    rows = np.flatnonzero(ask)
    if not len(rows):
        return arr, {}
    # the values the compiled validator does not vouch for: json.loads decides, as before
    _, sub_errors = _convert_json_reference(arr.take(pa.array(rows)), t, o)
    if not sub_errors:
        return arr, {}
    errors = {int(rows[i]): reason for i, reason in sub_errors.items()}
    return _null_out(arr, list(errors)), errors


def _convert_json_reference(
    arr: pa.Array, t: SpannerType, o: ConvertOptions
) -> tuple[pa.Array, _Errors]:
    """json.loads once per distinct value (the reference for the compiled validator)."""
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary.to_pylist()
    why: dict[int, str] = {}
    for code, value in enumerate(uniques):
        try:
            json_document(value, t)
        except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than the
            why[code] = _json_reason(e, value)  # parser's recursion goes
    if not why:
        return arr, {}
    codes = encoded.indices
    bad = np.flatnonzero(_np_bool(pc.is_in(codes, pa.array(list(why), pa.int32()))))
    codes_np = codes.to_numpy(zero_copy_only=False)
    errors = {int(i): why[int(codes_np[i])] for i in bad}
    return _null_out(arr, bad), errors


def _json_reason(e: BaseException, text: str) -> str:
    if isinstance(e, JsonNumberError):
        return f"JSON number {e}: {_show(text)}"
    if isinstance(e, JsonDepthError):
        return f"JSON {e}: {_show(text)}"
    if isinstance(e, RecursionError):
        # valid or not, Python's parser cannot follow it (about 1,000 levels)
        return (
            f"JSON nested deeper than the loader can read (about {sys.getrecursionlimit():,} "
            f"levels; GoogleSQL's JSON takes {JSON_LEVELS}): {_show(text)}"
        )
    return f"not valid JSON: {_show(text)}"


def _json_element_text(v: Any) -> Optional[str]:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v, separators=(",", ":"))


def _convert_array(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    assert t.element is not None
    if t.element.code != "JSON":  # JSON elements are normalised with json.dumps: reference
        fast = _array_native(arr, t, o)
        if fast is not None:
            return fast
    return _convert_array_reference(arr, t, o)


def _array_native(
    arr: pa.Array, t: SpannerType, o: ConvertOptions
) -> Optional[tuple[pa.Array, _Errors]]:
    """The compiled splitters (loader/_native.c ``json_arrays``, and with ``o.array_syntax ==
    "postgres"`` first ``pg_arrays``) of a column whose every value is a flat JSON array
    (strings, numbers, true, false, null), or every value PostgreSQL's one-dimensional array
    text: its elements as one text column, converted as T, as the reference path converts them;
    None (that path) for any other."""
    assert t.element is not None
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    column, kernels = native.string_descriptor(arr), native.module()
    parts = None
    if o.array_syntax == "postgres":
        parts = kernels.pg_arrays(column, len(arr), pa.allocate_buffer)
    if parts is None:
        parts = kernels.json_arrays(column, len(arr), pa.allocate_buffer)
    if parts is None:
        return None
    lists, elems, data, valid, m = parts
    flat = pa.Array.from_buffers(pa.string(), m, [valid, elems, data])
    from . import convert_column  # the dispatcher, which imports this module

    flat_out, flat_err = convert_column(flat, t.element, o)
    starts = np.frombuffer(lists, dtype=np.int32, count=len(arr) + 1)
    errors: _Errors = {}
    for fi in sorted(flat_err, reverse=True):  # a row's first bad element names it
        row = int(np.searchsorted(starts, fi, side="right") - 1)
        errors[row] = f"element {fi - starts[row] + 1} of {t}: {flat_err[fi]}"
    out = pa.Array.from_buffers(
        pa.list_(arrow_type(t.element)),
        len(arr),
        [native.same_validity(arr), lists],
        null_count=arr.null_count,
        children=[flat_out],
    )
    if errors:
        out = _null_out(out, sorted(errors))
    return out, errors


def _lone(text: str) -> bool:
    """``text`` holds a lone surrogate (JSON's ``"\\ud800"``), which UTF-8 cannot carry."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_PG_ARRAY = re.compile(r"\s*(?:\{|\[[+-]?\d+:[+-]?\d+\])")
"""PostgreSQL's array text: braces, or explicit bounds (refused by the parser, with why)."""


def _elements(
    value: str, t: SpannerType, o: ConvertOptions
) -> tuple[Optional[list[Optional[str]]], Optional[str]]:
    """The text of each element of one array value (None: NULL), or why it is not one: JSON
    array text, or with ``o.array_syntax == "postgres"`` also PostgreSQL's ``{a,b}``."""
    assert t.element is not None
    elem = t.element
    if o.array_syntax == "postgres" and _PG_ARRAY.match(value):
        try:
            items = parse_pg_array(value)
        except PgArrayError as e:
            return None, f"not a PostgreSQL array ({e}): {_show(value)}"
        if elem.code != "JSON":
            return items, None
        out: list[Optional[str]] = []
        for k, x in enumerate(items):
            try:
                out.append(None if x is None else json_text(json_document(x, elem), elem))
            except (ValueError, RecursionError) as e:
                return None, f"element {k + 1} of {t}: {_json_reason(e, x or '')}"
        return out, None
    try:
        # Numbers stay text so NUMERIC / INT64 elements are converted exactly.
        if elem.code == "JSON":
            v = _load_json(value, elem.postgres)
        else:
            v = json.loads(value, parse_float=str, parse_int=str, parse_constant=str)
    except (JsonNumberError, RecursionError) as e:  # RecursionError: nested too deep to parse
        return None, f"{t}: {_json_reason(e, value)}"
    except ValueError:
        return None, _not_an_array(value, o)
    if not isinstance(v, list):
        # JSON null included: NULL is the dialect's null markers' business, and taking it
        # for an empty array would change the value. ({} is JSON, and PostgreSQL's empty array.)
        return None, _not_an_array(value, o) if v == {} else f"not a JSON array: {_show(value)}"
    if elem.code == "JSON":
        out = []
        for k, x in enumerate(v):
            if not elem.postgres:
                try:
                    _check_levels(x, value)
                except JsonDepthError as e:
                    return None, f"element {k + 1} of {t}: {_json_reason(e, value)}"
            out.append(None if x is None else json_text(x, elem))
        return out, None
    if any(isinstance(x, (list, dict)) for x in v):
        return None, f"nested values in {t}: {_show(value)}"
    lone = next((k for k, x in enumerate(v) if isinstance(x, str) and _lone(x)), None)
    if lone is not None:
        return None, (
            f"element {lone + 1} of {t}: a lone surrogate escape (half of a UTF-16 "
            f"pair) is not text: {_show(value)}"
        )
    return [_json_element_text(x) for x in v], None


def _not_an_array(value: str, o: ConvertOptions) -> str:
    """The reason for a text that is not JSON (a brace first: PostgreSQL's array text?)."""
    if value.lstrip().startswith("{") and o.array_syntax != "postgres":
        return (
            f"not a JSON array: {_show(value)} (PostgreSQL's array text: read it with the "
            "postgres dialect, or export the column with array_to_json)"
        )
    return f"not a JSON array: {_show(value)}"


def _convert_array_reference(
    arr: pa.Array, t: SpannerType, o: ConvertOptions
) -> tuple[pa.Array, _Errors]:
    """json.loads once per distinct value (the reference for the compiled splitter)."""
    assert t.element is not None
    elem = t.element
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary.to_pylist()
    parsed: list[Optional[list[Optional[str]]]] = []
    why: dict[int, str] = {}
    for code, value in enumerate(uniques):
        elements, reason = _elements(value, t, o)
        parsed.append(elements)
        if reason is not None:
            why[code] = reason
    # One flat element column for the distinct arrays, converted like a scalar column.
    from . import convert_column  # the dispatcher, which imports this module

    lens = np.array([len(p) if p is not None else 0 for p in parsed], dtype=np.int64)
    flat = pa.array([x for p in parsed if p is not None for x in p], pa.string())
    flat_out, flat_err = convert_column(flat, elem, o)
    starts = np.concatenate([[0], np.cumsum(lens)])
    for fi in sorted(flat_err, reverse=True):
        code = int(np.searchsorted(starts, fi, side="right") - 1)
        why[code] = f"element {fi - starts[code] + 1} of {t}: {flat_err[fi]}"
    offsets = pa.array(starts.astype(np.int32))
    dict_values = pa.ListArray.from_arrays(offsets, flat_out, type=pa.list_(arrow_type(elem)))
    codes = encoded.indices
    out = dict_values.take(codes)
    errors: _Errors = {}
    if why:
        bad = np.flatnonzero(_np_bool(pc.is_in(codes, pa.array(list(why), pa.int32()))))
        codes_np = codes.to_numpy(zero_copy_only=False)
        errors = {int(i): why[int(codes_np[i])] for i in bad}
        out = _null_out(out, bad)
    return out, errors
