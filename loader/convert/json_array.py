"""JSON (validated, text kept) and ARRAY<T> (JSON array text, elements converted as T)."""

from __future__ import annotations

import json
import math
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..types import SpannerType, arrow_type
from .common import (
    _Errors,
    _np_bool,
    _null_out,
    _show,
)
from .options import ConvertOptions


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is outside the FLOAT64 range")
    return value


def _json_int(text: str) -> int:
    _json_float(text)
    return int(text)


def _load_json(text: str) -> Any:
    """:func:`json.loads` refusing what Spanner's JSON refuses and Python's parser takes:
    ``NaN`` / ``Infinity`` and numbers a double cannot hold (``1e400``, 400-digit integers)."""
    return json.loads(
        text, parse_constant=_json_constant, parse_float=_json_float, parse_int=_json_int
    )


def _convert_json(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary.to_pylist()
    bad_codes = []
    for code, value in enumerate(uniques):
        try:
            _load_json(value)
        except ValueError:
            bad_codes.append(code)
    if not bad_codes:
        return arr, {}
    bad = np.flatnonzero(_np_bool(pc.is_in(encoded.indices, pa.array(bad_codes, pa.int32()))))
    errors = {int(i): f"not valid JSON: {_show(arr[int(i)].as_py())}" for i in bad}
    return _null_out(arr, bad), errors


def _json_element_text(v: Any) -> Optional[str]:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v, separators=(",", ":"))


def _convert_array(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    assert t.element is not None
    elem = t.element
    encoded = pc.dictionary_encode(arr)
    uniques = encoded.dictionary.to_pylist()
    parsed: list[Optional[list[Optional[str]]]] = []
    why: dict[int, str] = {}
    for code, value in enumerate(uniques):
        try:
            # Numbers stay text so NUMERIC / INT64 elements are converted exactly.
            if elem.code == "JSON":
                v = _load_json(value)
            else:
                v = json.loads(value, parse_float=str, parse_int=str, parse_constant=str)
        except ValueError:
            v = None
            why[code] = f"not a JSON array: {_show(value)}"
        if not isinstance(v, list):
            # JSON null included: NULL is the dialect's null markers' business, and taking it
            # for an empty array would change the value.
            why[code] = f"not a JSON array: {_show(value)}"
            v = None
        if v is not None and elem.code != "JSON" and any(isinstance(x, (list, dict)) for x in v):
            why[code] = f"nested values in {t}: {_show(value)}"
            v = None
        if v is None:
            parsed.append(None)
        elif elem.code == "JSON":
            parsed.append([None if x is None else json.dumps(x, separators=(",", ":")) for x in v])
        else:
            parsed.append([_json_element_text(x) for x in v])
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
