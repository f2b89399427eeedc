"""The compiled per-type fast paths (issue #18, "every type at columnar speed") against their
reference paths: the same values and the same reject reasons, hostile inputs included.

BYTES: loader/_native.c ``base64_values`` against the numpy decoder. TIMESTAMP:
``offset_timestamps`` (any RFC 3339 offset, in UTC or another time zone) against the general
Arrow path. JSON: ``json_checks`` against json.loads. ARRAY<T>: ``json_arrays`` against
json.loads per distinct value, and ``pg_arrays`` against loader.convert.pg_array's parser. The encoder's BYTES kind is held to the client's encoding in tests/test_encode.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any, Optional

import pyarrow as pa
import pytest
from conftest import native_parts
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pg_array import pg_array_text

from loader import native
from loader.convert import ConvertOptions, convert_column
from loader.convert.json_array import (
    _array_native,
    _convert_array,
    _convert_array_reference,
    _convert_json,
    _convert_json_reference,
    _json_checks_native,
)
from loader.convert.numbers import _bool_native, _convert_bool
from loader.convert.text import _base64_native, _convert_bytes
from loader.convert.time import (
    _convert_timestamp,
    _convert_timestamp_general,
    _timestamp_offsets_native,
)
from loader.types import SpannerType

T = SpannerType.parse


@pytest.fixture(scope="module")
def compiled() -> Iterator[str]:
    """The compiled parts switched on: each property compares them with the reference path."""
    yield from native_parts("native")


def _same_with_native_off(
    convert: Any, values: list[Optional[str]], t: SpannerType, options: ConvertOptions
) -> tuple[pa.Array, dict[int, str]]:
    arr = pa.array(values, pa.string())
    fast, fast_errors = convert(arr, t, options)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.NATIVE_ENV, "0")
        slow, slow_errors = convert(arr, t, options)
    assert fast.type == slow.type
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_errors == slow_errors
    return fast, fast_errors


@st.composite
def _corrupted(draw: st.DrawFn, texts: st.SearchStrategy[str], chars: str) -> str:
    """A text of ``texts``, sometimes with one character replaced, dropped or added."""
    text = draw(texts)
    how = draw(st.sampled_from(["keep", "keep", "replace", "drop", "add"]))
    at = draw(st.integers(0, len(text)))
    if how == "replace" and text:
        at = min(at, len(text) - 1)
        text = text[:at] + draw(st.sampled_from(chars)) + text[at + 1 :]
    elif how == "drop" and text:
        at = min(at, len(text) - 1)
        text = text[:at] + text[at + 1 :]
    elif how == "add":
        text = text[:at] + draw(st.sampled_from(chars)) + text[at:]
    return text


# -- BYTES: base64 ----------------------------------------------------------------------------------

_B64 = st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode())
_B64_EDGES = st.sampled_from(
    [
        "",
        "QQ==",
        "QR==",  # unused bits set: decodes to "A" like "QQ=="
        "QUI=",
        "QUJ=",
        "QUJD",
        "Q===",
        "QQ=",
        "QQ",
        "=QQ=",
        "QQ==QQ==",
        "-_-_",  # the URL-safe alphabet
        "QU JD",
        " QUJD",
        "QUJD\n",
        "QUJ\u00e9",
        "////",
        "++++",
        "null",
        "NULL",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(_corrupted(_B64, "=+/-_ A\n\u00e9"), _B64_EDGES, st.none()),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["BYTES(MAX)", "BYTES(3)", "BYTES(0)"]),
)
def test_base64_fast_path_matches_the_numpy_decoder(
    compiled: str, values: list[Optional[str]], type_text: str
) -> None:
    _same_with_native_off(_convert_bytes, values, T(type_text), ConvertOptions())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=200), st.none()), min_size=1, max_size=10))
def test_base64_fast_path_is_taken_for_valid_text_and_decodes_exactly(
    compiled: str, raw: list[Optional[bytes]]
) -> None:
    values = [None if b is None else base64.b64encode(b).decode() for b in raw]
    arr = pa.array(values, pa.string())
    if arr.null_count < len(arr):
        assert _base64_native(arr) is not None
    out, errors = _same_with_native_off(_convert_bytes, values, T("BYTES(MAX)"), ConvertOptions())
    assert errors == {}
    assert out.to_pylist() == raw


def test_base64_fast_path_leaves_hex_and_bad_columns_to_the_reference(compiled: str) -> None:
    assert _base64_native(pa.array(["QQ==", "QQ="])) is None
    assert _base64_native(pa.array([None, None], pa.string())) is None
    out, errors = convert_column(
        pa.array(["4142", "0x43"]), T("BYTES(MAX)"), ConvertOptions(bytes_encoding="hex")
    )
    assert (out.to_pylist(), errors) == ([b"AB", b"C"], {})


# -- TIMESTAMP: RFC 3339 with offsets -----------------------------------------------------------------


def _stamp(
    y: int, mo: int, d: int, h: int, mi: int, s: int, sep: str, frac: str, space: str, off: str
) -> str:
    return f"{y:04d}-{mo:02d}-{d:02d}{sep}{h:02d}:{mi:02d}:{s:02d}{frac}{space}{off}"


_OFFSETS = st.sampled_from(
    [
        "",
        "Z",
        "z",
        "UTC",
        "utc",
        "+00:00",
        "-00:00",
        "+05:30",
        "-05:30",
        "+0530",
        "+05",
        "+14:00",
        "-12:00",
        "+23:59",
        "+24:00",
        "+05:60",
        "+5:30",
        "+05:3",
        "+05:",
        "05:30",
        "GMT",
    ]
)
_STAMPS = st.builds(
    _stamp,
    st.integers(1, 9999) | st.sampled_from([1, 2, 1970, 2000, 2024, 9998, 9999]),
    st.integers(1, 12) | st.integers(0, 13),
    st.integers(1, 28) | st.integers(29, 32) | st.integers(0, 0),
    st.integers(0, 23) | st.integers(24, 25),
    st.integers(0, 59) | st.just(60),
    st.integers(0, 59) | st.just(60),
    st.sampled_from(["T", "t", " ", "_"]),
    st.just("") | st.text("0123456789", min_size=0, max_size=10).map(lambda f: "." + f),
    st.sampled_from(["", "", "", " ", "\t", "  ", "\x0b", "\u00a0"]),
    _OFFSETS,
)
_STAMP_EDGES = st.sampled_from(
    [
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:30:00+01:00",  # before 0001 once shifted
        "0001-01-01T01:00:00+01:00",
        "9999-12-31T23:59:59.999999999Z",
        "9999-12-31T23:30:00-01:00",  # past 9999 once shifted
        "9999-12-31T22:59:59-01:00",
        "2024-02-29T23:30:00-01:00",  # a leap day, into March
        "2023-02-29T00:00:00Z",
        "2000-02-29T00:00:00+05:30",
        "1900-02-29T00:00:00Z",
        "2016-12-31T23:59:60Z",
        "0000-01-01T00:00:00Z",
        "2020-01-01T00:00:00.Z",
        "2020-01-01T00:00:00.1234567890Z",
        "2020-01-01 00:00:00 UTC",
        "2020-01-01T00:00:00ZZ",
        "+2020-01-01T00:00:00Z",
        "2020-01-01T00:00:00Z ",
        "2020-01-01",
    ]
)
_TS_VALUES = st.lists(
    st.one_of(_STAMPS, _STAMP_EDGES, _corrupted(_STAMPS, " +-.:TZ0a\u00e9"), st.none()),
    min_size=1,
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(_TS_VALUES)
def test_offset_timestamps_match_the_general_path_in_utc(
    compiled: str, values: list[Optional[str]]
) -> None:
    arr = pa.array(values, pa.string())
    t = T("TIMESTAMP")
    fast, fast_errors = _convert_timestamp(arr, t, ConvertOptions())
    slow, slow_errors = _convert_timestamp_general(arr, t, ConvertOptions())
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_errors == slow_errors


@settings(max_examples=200, deadline=None)
@given(_TS_VALUES, st.sampled_from(["Asia/Kolkata", "America/New_York", "Europe/Berlin"]))
def test_offset_timestamps_match_the_general_path_in_another_time_zone(
    compiled: str, values: list[Optional[str]], zone: str
) -> None:
    arr = pa.array(values, pa.string())
    t = T("TIMESTAMP")
    o = ConvertOptions(timezone=zone)
    fast, fast_errors = _convert_timestamp(arr, t, o)
    slow, slow_errors = _convert_timestamp_general(arr, t, o)
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_errors == slow_errors


_WELL_FORMED = st.builds(
    _stamp,
    st.integers(1, 9999),
    st.integers(1, 12),
    st.integers(1, 28) | st.sampled_from([29, 30, 31]),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.sampled_from(["T", "t", " "]),
    st.just("") | st.text("0123456789", min_size=1, max_size=9).map(lambda f: "." + f),
    st.sampled_from(["", "", " ", "\t"]),
    st.sampled_from(["Z", "z", "UTC", "+00:00", "-05:30", "+0530", "+05", "+23:59", "-23:59"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_WELL_FORMED, st.none()), min_size=1, max_size=8))
def test_well_formed_offset_timestamps_match_the_general_path(
    compiled: str, values: list[Optional[str]]
) -> None:
    """Mostly columns the compiled path takes whole (a day 29-31 that does not exist, or an
    instant shifted out of 0001-9999, sends the column to the general path)."""
    arr = pa.array(values, pa.string())
    t = T("TIMESTAMP")
    fast, fast_errors = _convert_timestamp(arr, t, ConvertOptions())
    slow, slow_errors = _convert_timestamp_general(arr, t, ConvertOptions())
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_errors == slow_errors


def _canonical(text: str) -> str:
    """The instant of ISO 8601 text with an offset, as the canonical TIMESTAMP text."""
    when = dt.datetime.fromisoformat(text).astimezone(dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def test_offset_timestamps_are_taken_and_exact(compiled: str) -> None:
    values = [
        "2024-02-29T23:30:00-01:00",
        None,
        "2000-01-01T05:29:59.5+05:30",
        "1987-12-08 03:15:40 -05:30",
        "1969-12-31T23:59:59+0001",
        "0001-01-01T01:00:00+01",
        "9999-12-31T22:59:59.123456789-01:00",
        "2020-06-01t12:00:00z",
        "2020-06-01T12:00:00\tUTC",
    ]
    arr = pa.array(values, pa.string())
    out = _timestamp_offsets_native(arr, naive_ok=False)
    assert out is not None
    assert out.to_pylist() == [
        "2024-03-01T00:30:00.000000000Z",
        None,
        "1999-12-31T23:59:59.500000000Z",
        "1987-12-08T08:45:40.000000000Z",
        "1969-12-31T23:58:59.000000000Z",
        "0001-01-01T00:00:00.000000000Z",
        "9999-12-31T23:59:59.123456789Z",
        "2020-06-01T12:00:00.000000000Z",
        "2020-06-01T12:00:00.000000000Z",
    ]
    assert out.to_pylist()[0] == _canonical("2024-02-29T23:30:00-01:00")
    # naive text is local time outside UTC: that column goes to the general path
    assert _timestamp_offsets_native(pa.array(["2020-01-01T00:00:00"]), naive_ok=False) is None
    naive = _timestamp_offsets_native(pa.array(["2020-01-01 00:00:00.25"]), naive_ok=True)
    assert naive is not None and naive.to_pylist() == ["2020-01-01T00:00:00.250000000Z"]
    # the wide benchmark's spellings all go the compiled way in another time zone too
    o = ConvertOptions(timezone="Asia/Kolkata")
    out2, errors = convert_column(arr, T("TIMESTAMP"), o)
    assert errors == {} and out2.to_pylist() == out.to_pylist()


# -- JSON: the compiled validator vouches only for what json.loads accepts ----------------------------

_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
_JSON_TEXTS = st.builds(
    lambda v, ascii_only, compact: json.dumps(
        v, ensure_ascii=ascii_only, separators=(",", ":") if compact else None
    ),
    _JSON_VALUES,
    st.booleans(),
    st.booleans(),
)
_JSON_EDGES = st.sampled_from(
    [
        "",
        " ",
        "null",
        " null ",
        "NaN",
        "[NaN]",
        "-Infinity",
        "1e400",
        "-1e400",
        "1e-400",
        "1" * 400,
        "1" * 250,
        "1E+99",
        "1e100",
        "-",
        "01",
        "-0",
        "1.",
        ".5",
        "1e",
        "+1",
        "[1,]",
        '{"a":1,}',
        '{"a" 1}',
        "{1:2}",
        '"\\ud800"',
        '"\\udc00\\ud800"',
        '"\\u00e9\\n\\/"',
        '"\\x41"',
        '"\x01"',
        '"\x7f"',
        "\ufeff[1]",
        " \t[1]\n\r",
        "[1] x",
        "[1]]",
        "tru",
        "True",
        "[" * 300 + "]" * 300,
        "[" * 80 + "]" * 80,  # Spanner's JSON takes 80 levels, not 81
        "[" * 81 + "]" * 81,
        '{"a":' * 81 + "1" + "}" * 81,
        '{"a":' * 250 + "1" + "}" * 250,
        "\u00e9",
        # the numbers Spanner's JSON keeps: integers of [-2^63, 2^64-1], exact doubles
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "9999999999999999999",
        "-9999999999999999999",
        "99999999999999999999",
        "1000000000000000000000000",
        "123456789012345678901234567890",
        "2.2412421353246235436",
        "0.1000000000000000055511151231257827",
        "1.000000000000000",
        "1.0000000000000001",
        "123456789012345.6",
        "0.000000000000000000001234567890123456",
        "1.7976931348623157e308",
        "-0.0",
        '{"a":1,"a":2}',
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(_JSON_TEXTS, _JSON_EDGES, _corrupted(_JSON_TEXTS, '{}[],:"\\ e.-0'), st.none()),
        min_size=1,
        max_size=8,
    )
)
def test_json_validator_matches_json_loads(compiled: str, values: list[Optional[str]]) -> None:
    arr = pa.array(values, pa.string())
    for t in (T("JSON"), T("jsonb", postgresql=True)):  # GoogleSQL's JSON, PostgreSQL's jsonb
        fast, fast_errors = _convert_json(arr, t, ConvertOptions())
        slow, slow_errors = _convert_json_reference(arr, t, ConvertOptions())
        assert fast.to_pylist() == slow.to_pylist()
        assert fast_errors == slow_errors


def test_json_validator_vouches_for_plain_json(compiled: str) -> None:
    values = [json.dumps({"a": [1, -2.5e10, "x\u00e9\n", None, True]}), "[]", "0", '"s"']
    flags = _json_checks_native(pa.array(values))
    assert flags is not None and not flags.any()
    flags = _json_checks_native(pa.array(["NaN", "1e400", "[1,]", '"\\ud800"', "1"]))
    assert flags is not None and flags.tolist() == [True, True, True, False, False]
    kept = ["18446744073709551615", "-9223372036854775808", "9999999999999999999", "1.5e-7"]
    asked = ["18446744073709551616", "-9223372036854775809", "2.2412421353246235436"]
    flags = _json_checks_native(pa.array(kept + asked))
    assert flags is not None and flags.tolist() == [False] * len(kept) + [True] * len(asked)


# -- ARRAY<T>: the compiled splitter gives the elements json.loads gives ------------------------------

_ARRAY_TEXTS = st.builds(
    lambda v, ascii_only, compact: json.dumps(
        v, ensure_ascii=ascii_only, separators=(",", ":") if compact else (" , ", " : ")
    ),
    st.lists(_JSON_SCALARS | st.sampled_from(["2024-02-29", "1.5", "true", "0x1"]), max_size=5)
    | st.lists(_JSON_VALUES, max_size=3),
    st.booleans(),
    st.booleans(),
)
_ARRAY_EDGES = st.sampled_from(
    [
        "[]",
        " [ ] ",
        "[null]",
        "null",
        "1",
        '"[1]"',
        "[1,2,]",
        "[,]",
        "[1 2]",
        "[[1]]",
        '[{"a":1}]',
        "[NaN, Infinity, -Infinity]",
        "[1e400]",
        "[-0, 0.0, 1E5]",
        "[true, false]",
        '["\\ud83d\\ude00", "\\u00e9"]',
        '["a\\"b", "c\\\\d", "tab\\there"]',
        "[01]",
        "[1]x",
        "[\ufeff1]",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(_ARRAY_TEXTS, _ARRAY_EDGES, _corrupted(_ARRAY_TEXTS, '[],"\\ n1'), st.none()),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(
        [
            "ARRAY<STRING(MAX)>",
            "ARRAY<STRING(2)>",
            "ARRAY<INT64>",
            "ARRAY<FLOAT64>",
            "ARRAY<NUMERIC>",
            "ARRAY<BOOL>",
            "ARRAY<DATE>",
            "ARRAY<BYTES(MAX)>",
        ]
    ),
)
def test_array_splitter_matches_json_loads(
    compiled: str, values: list[Optional[str]], type_text: str
) -> None:
    arr = pa.array(values, pa.string())
    t = T(type_text)
    fast, fast_errors = _convert_array(arr, t, ConvertOptions())
    slow, slow_errors = _convert_array_reference(arr, t, ConvertOptions())
    assert fast.type == slow.type
    assert repr(fast.to_pylist()) == repr(slow.to_pylist())  # NaN elements compare by text
    assert fast_errors == slow_errors


def test_array_splitter_is_taken_for_flat_arrays(compiled: str) -> None:
    arr = pa.array(['["a\\"b", null, "\\u00e9"]', None, "[]", " [ 1 , true ] "])
    fast = _array_native(arr, T("ARRAY<STRING(MAX)>"), ConvertOptions())
    assert fast is not None
    out, errors = fast
    assert errors == {}
    assert out.to_pylist() == [['a"b', None, "\u00e9"], None, [], ["1", "true"]]
    assert _array_native(pa.array(["[[1]]"]), T("ARRAY<INT64>"), ConvertOptions()) is None


# -- ARRAY<T>, postgres dialect: the compiled splitter gives the elements parse_pg_array gives ----

PG = ConvertOptions(array_syntax="postgres")
_PG_ELEMENTS = (
    st.none()
    | st.sampled_from(["NULL", "null", "", "1", "-2", "1.5", "t", "x"])
    | st.text(
        st.characters(blacklist_categories=("Cs",)) | st.sampled_from(list('{},"\\ \t\nNUL')),
        max_size=8,
    )
)
_PG_TEXTS = st.builds(pg_array_text, st.lists(_PG_ELEMENTS, max_size=5))
_PG_EDGES = st.sampled_from(
    [
        "{}",
        " { } ",
        "{NULL,nUlL}",
        '{"NULL"}',
        "{a b , c }",
        "{a\\ }",
        "{\\ a}",
        "{a\\}",
        "{\\n}",
        "{{1,2},{3,4}}",
        "[0:1]={1,2}",
        "{1,}",
        "{,1}",
        "{1,,2}",
        '{"a"b}',
        '{"a}',
        "{a{b}",
        "{",
        "}",
        "{1} x",
        "\u00a0{1}",
        "\x1c{1}",
        "[1,2]",
        '["a", null]',
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            _PG_TEXTS, _PG_EDGES, _corrupted(_PG_TEXTS, '{},"\\ Nn1'), _ARRAY_TEXTS, st.none()
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(
        ["ARRAY<STRING(MAX)>", "ARRAY<STRING(2)>", "ARRAY<INT64>", "ARRAY<BOOL>", "ARRAY<NUMERIC>"]
    ),
)
def test_pg_array_splitter_matches_the_parser(
    compiled: str, values: list[Optional[str]], type_text: str
) -> None:
    arr = pa.array(values, pa.string())
    t = T(type_text)
    fast, fast_errors = _convert_array(arr, t, PG)
    slow, slow_errors = _convert_array_reference(arr, t, PG)
    assert fast.type == slow.type
    assert repr(fast.to_pylist()) == repr(slow.to_pylist())
    assert fast_errors == slow_errors


def test_pg_array_splitter_is_taken_for_one_dimension(compiled: str) -> None:
    text = ['{"a b",NULL,"NULL",x\\,y, \u00e9 }', None, "{}", ' { "" , nuLL } ']
    fast = _array_native(pa.array(text), T("ARRAY<STRING(MAX)>"), PG)
    assert fast is not None
    out, errors = fast
    assert errors == {}
    assert out.to_pylist() == [["a b", None, "NULL", "x,y", "\u00e9"], None, [], ["", None]]
    for refused in ("{{1}}", "[0:0]={1}", "{1,}", '{"a}'):
        assert _array_native(pa.array([refused]), T("ARRAY<STRING(MAX)>"), PG) is None
    # JSON array text is still split under the postgres dialect; a column of both is not
    assert _array_native(pa.array(["[1, 2]"]), T("ARRAY<INT64>"), PG) is not None
    assert _array_native(pa.array(["[1]", "{2}"]), T("ARRAY<INT64>"), PG) is None


# -- BOOL: every accepted spelling, in any case -------------------------------------------------------


@st.composite
def _bool_spellings(draw: st.DrawFn, words: tuple[str, ...]) -> str:
    word = draw(st.sampled_from(words))
    cases = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
    return "".join(c.upper() if up else c for c, up in zip(word, cases))


_BOOL_OPTIONS = [
    ConvertOptions(),
    ConvertOptions(true_words=("ja", "wahr", "J"), false_words=("nein", "falsch", "N")),
    ConvertOptions(true_words=("s\u00ed",), false_words=("no",)),  # not ASCII: Arrow's path
]
_ALL_WORDS = tuple({w for o in _BOOL_OPTIONS for w in o.true_words + o.false_words})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            _bool_spellings(_ALL_WORDS),
            _bool_spellings(_ALL_WORDS),
            st.sampled_from(
                [" true", "true ", "", "tru", "truee", "2", "\u212a", "\u0130", "t\x00", "YES"]
            ),
            st.text(max_size=4),
            st.none(),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(range(len(_BOOL_OPTIONS))),
)
def test_bool_words_match_the_arrow_path(
    compiled: str, values: list[Optional[str]], which: int
) -> None:
    _same_with_native_off(_convert_bool, values, T("BOOL"), _BOOL_OPTIONS[which])


def test_bool_words_are_taken_for_every_default_spelling(compiled: str) -> None:
    values = ["true", "T", "Yes", "y", "1", "FALSE", "f", "No", "N", "0", None]
    out = _bool_native(pa.array(values), ConvertOptions())
    assert out is not None
    assert out.to_pylist() == [True] * 5 + [False] * 5 + [None]
    assert _bool_native(pa.array(["true"]), _BOOL_OPTIONS[2]) is None


# -- ARRAY cells: list_cells refuses list offsets it cannot trust --------------------------------------


def test_list_cells_refuses_bad_list_offsets(compiled: str) -> None:
    import numpy as np

    from loader.encode import _native_column

    child = pa.array([1, 2, 3], pa.int64())
    desc = _native_column(child, T("INT64"))
    list_cells = native.module().list_cells
    for rel in ([0, 2, 1], [1, 2, 3], [0, 2, 4]):
        with pytest.raises(ValueError, match="list offsets"):
            list_cells(desc, 3, np.array(rel, np.int64), None, 2, pa.allocate_buffer)
    with pytest.raises(ValueError, match="list offsets missing"):
        list_cells(desc, 3, None, None, 2, pa.allocate_buffer)
    with pytest.raises(ValueError, match="offsets buffer holds"):
        list_cells(desc, 3, np.array([0, 1], np.int64), None, 2, pa.allocate_buffer)
    offsets, data, width = list_cells(
        desc, 3, np.array([0, 1, 3], np.int64), np.array([1, 0], np.uint8), 2, pa.allocate_buffer
    )
    cells = pa.Array.from_buffers(pa.binary(), 2, [None, offsets, data]).to_pylist()
    assert cells == [b"\x0a\x07\x32\x05\x0a\x03\x1a\x011", b"\x0a\x02\x08\x00"]
