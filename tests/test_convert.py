"""Table-driven tests of loader.convert: each type's valid inputs give exact values, invalid
ones give exact reasons; block-level NULL checks, rejects and commit timestamps."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import native_parts
from hypothesis import given, settings
from hypothesis import strategies as st

from loader import native
from loader.convert import ConvertOptions, convert_block, convert_column
from loader.errors import ConfigError, SchemaError
from loader.parse import ParsedBlock
from loader.schema import Column, KeyPart, TableSchema
from loader.types import COMMIT_TIMESTAMP, SpannerType, arrow_type

OPTS = ConvertOptions()


def conv(type_text: str, value: Any, **opts: Any) -> tuple[Any, str | None]:
    """(converted value, reason) of one value."""
    t = SpannerType.parse(type_text)
    out, errors = convert_column(pa.array([value], pa.string()), t, ConvertOptions(**opts))
    assert out.type == arrow_type(t)
    return out[0].as_py(), errors.get(0)


VALID = [
    ("INT64", "42", 42),
    ("INT64", "-9223372036854775808", -(2**63)),
    ("INT64", "9223372036854775807", 2**63 - 1),
    ("INT64", "-0", 0),
    # #16 defect 17: an optional sign then decimal digits, as NUMERIC
    ("INT64", "+5", 5),
    ("INT64", "+0", 0),
    ("INT64", "007", 7),
    ("INT64", "+9223372036854775807", 2**63 - 1),
    ("FLOAT64", "1.5", 1.5),
    ("FLOAT64", "-1e-3", -0.001),
    ("FLOAT64", "5e-324", 5e-324),  # the smallest subnormal: not zero
    ("FLOAT64", "-00.000e-5", -0.0),  # zero however it is written
    ("FLOAT32", ".0", 0.0),
    ("FLOAT64", "inf", float("inf")),
    ("FLOAT64", "-Infinity", float("-inf")),
    ("FLOAT64", "1.7976931348623157e308", 1.7976931348623157e308),
    ("FLOAT32", "0.5", 0.5),
    ("NUMERIC", "1.5", Decimal("1.500000000")),
    ("NUMERIC", "-0.000000001", Decimal("-0.000000001")),
    ("NUMERIC", "1.1234567890000", Decimal("1.123456789")),
    # 29 integer digits and zeros past the ninth fraction digit (DECIMAL(65,30) exports)
    ("NUMERIC", "90000000000000000000000000000.0000000000", Decimal("9e28")),
    (
        "NUMERIC",
        "-99999999999999999999999999999.999999999000",
        Decimal("-99999999999999999999999999999.999999999"),
    ),
    (
        "NUMERIC",
        "99999999999999999999999999999.999999999",
        Decimal("99999999999999999999999999999.999999999"),
    ),
    ("NUMERIC", "1e5", Decimal("100000")),
    # NUMERIC's largest, with an exponent (told from 1e29 exactly: a double cannot)
    (
        "NUMERIC",
        "-99999999999999999999999999999.999999999E0",
        Decimal("-99999999999999999999999999999.999999999"),
    ),
    ("NUMERIC", "+1", Decimal("1")),
    ("NUMERIC", "-1.5", Decimal("-1.5")),
    ("BOOL", "true", True),
    ("BOOL", "FALSE", False),
    ("BOOL", "1", True),
    ("BOOL", "0", False),
    ("BOOL", "T", True),
    ("BOOL", "f", False),
    ("BOOL", "Yes", True),
    ("BOOL", "no", False),
    ("STRING(3)", "abc", "abc"),
    ("STRING(3)", "äöü", "äöü"),  # 3 characters, 6 bytes
    ("STRING(MAX)", "", ""),
    ("BYTES(MAX)", "AAEC/w==", b"\x00\x01\x02\xff"),
    ("BYTES(MAX)", "", b""),
    ("BYTES(3)", "YWJj", b"abc"),
    ("BYTES(MAX)", "YQ==", b"a"),
    ("BYTES(MAX)", "YWI=", b"ab"),
    # base64 in lines (MIME, MySQL's TO_BASE64: a MySQL tryout's BLOBs were all "not valid")
    ("BYTES(MAX)", "YWJj\nZGVm\r\nZw==", b"abcdefg"),
    ("DATE", "2024-02-29", dt.date(2024, 2, 29)),
    ("DATE", "0001-01-01", dt.date(1, 1, 1)),
    ("DATE", "9999-12-31", dt.date(9999, 12, 31)),
    ("TIMESTAMP", "2024-01-01T12:00:00Z", "2024-01-01T12:00:00.000000000Z"),
    ("TIMESTAMP", "2024-01-01 12:00:00", "2024-01-01T12:00:00.000000000Z"),
    ("TIMESTAMP", "2024-01-01 12:00:00 UTC", "2024-01-01T12:00:00.000000000Z"),
    ("TIMESTAMP", "2024-01-01 12:00:00.123456 UTC", "2024-01-01T12:00:00.123456000Z"),
    ("TIMESTAMP", "2024-01-01T12:00:00.123456789Z", "2024-01-01T12:00:00.123456789Z"),
    ("TIMESTAMP", "2024-01-01T05:30:00+05:30", "2024-01-01T00:00:00.000000000Z"),
    ("TIMESTAMP", "2023-12-31T16:00:00.5-08:00", "2024-01-01T00:00:00.500000000Z"),
    ("TIMESTAMP", "2024-01-01T00:00:00+0100", "2023-12-31T23:00:00.000000000Z"),
    ("TIMESTAMP", "2024-01-01t12:00:00z", "2024-01-01T12:00:00.000000000Z"),  # RFC 3339 5.6
    ("TIMESTAMP", "2024-01-01t12:00:00.5+01:00", "2024-01-01T11:00:00.500000000Z"),
    ("TIMESTAMP", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000000Z"),
    ("TIMESTAMP", "9999-12-31T23:59:59.999999999Z", "9999-12-31T23:59:59.999999999Z"),
    ("TIMESTAMP", "1600-06-01T00:00:00Z", "1600-06-01T00:00:00.000000000Z"),
    ("JSON", '{"a": [1, 2]}', '{"a": [1, 2]}'),
    ("JSON", "null", "null"),
    ("ARRAY<INT64>", "[1,2,null]", [1, 2, None]),
    ("ARRAY<INT64>", "[]", []),
    ("ARRAY<STRING(MAX)>", '["a","b,c"]', ["a", "b,c"]),
    ("ARRAY<NUMERIC>", "[1.5, 2]", [Decimal("1.5"), Decimal("2")]),
    ("ARRAY<BOOL>", "[true, false]", [True, False]),
    ("ARRAY<DATE>", '["2024-01-01"]', [dt.date(2024, 1, 1)]),
    ("ARRAY<TIMESTAMP>", '["2024-01-01T00:00:00Z"]', ["2024-01-01T00:00:00.000000000Z"]),
    ("ARRAY<JSON>", '[{"a":1}, 2]', ['{"a":1}', "2"]),
    ("ARRAY<JSON>", "[1, 1.5, -0.0, 1e308]", ["1", "1.5", "-0.0", "1e+308"]),
    (
        "JSON",
        '{"a": 1e308, "b": 18446744073709551615, "c": -9223372036854775808}',
        '{"a": 1e308, "b": 18446744073709551615, "c": -9223372036854775808}',
    ),
    # Spanner keeps the first of duplicate keys; the text goes as written
    (
        "JSON",
        '{"a": 1, "a": 2, "n": 1000000000000000000000000}',
        '{"a": 1, "a": 2, "n": 1000000000000000000000000}',
    ),
    ("ARRAY<JSON>", '[{"a":1,"a":2}, 1.50]', ['{"a":1}', "1.5"]),
]


@pytest.mark.parametrize("type_text,text,expected", VALID)
def test_valid(type_text: str, text: str, expected: Any) -> None:
    assert conv(type_text, text) == (expected, None)


EMPTY_HINT = (
    " (an empty text: a NULL is written as a null marker, by default an empty field without "
    'quotes; a quoted "" is never one, and an empty field is not one either when the null '
    'markers given (`null_markers`) leave "" out)'
)
INVALID = [
    ("INT64", "abc", "not an INT64: 'abc'"),
    ("INT64", "1.0", "not an INT64: '1.0'"),
    ("INT64", " 1", "not an INT64: ' 1' (spaces are not allowed)"),
    ("INT64", "1\t", "not an INT64: '1\\t' (spaces are not allowed)"),
    ("INT64", "9223372036854775808", "INT64 out of range: '9223372036854775808'"),
    ("INT64", "+9223372036854775808", "INT64 out of range: '+9223372036854775808'"),
    # #16 defect 17: hex is refused whatever its sign or case, and says so
    ("INT64", "0x10", "not an INT64: '0x10' (decimal digits only, no hex)"),
    ("INT64", "-0x10", "not an INT64: '-0x10' (decimal digits only, no hex)"),
    ("INT64", "+0X1f", "not an INT64: '+0X1f' (decimal digits only, no hex)"),
    (
        "INT64",
        "0x7fffffffffffffff",
        "not an INT64: '0x7fffffffffffffff' (decimal digits only, no hex)",
    ),
    ("INT64", "+-1", "not an INT64: '+-1'"),
    ("INT64", "--1", "not an INT64: '--1'"),
    ("INT64", "+", "not an INT64: '+'"),
    (
        "INT64",
        "",
        "not an INT64: ''" + EMPTY_HINT,
    ),
    ("INT64", "1234567\u0661", "not an INT64: '1234567\u0661'"),
    (
        "FLOAT64",
        "1,5",
        "not a FLOAT64: '1,5' (a comma in a number: numbers are read with a decimal point and "
        "no thousands separator, e.g. 3.14 or 1234)",
    ),
    ("FLOAT64", "1e309", "FLOAT64 out of range: '1e309'"),
    # a non-zero text that underflows to zero changes the value as overflow does (a tryout)
    ("FLOAT64", "1e-400", "FLOAT64 out of range: '1e-400' (too small: it would be 0)"),
    ("FLOAT32", "1e-46", "FLOAT32 out of range: '1e-46' (too small: it would be 0)"),
    ("FLOAT32", "-5e-324", "FLOAT32 out of range: '-5e-324' (too small: it would be 0)"),
    ("FLOAT32", "x", "not a FLOAT32: 'x'"),
    ("NUMERIC", "1.2.3", "not a NUMERIC: '1.2.3'"),
    (
        "NUMERIC",
        "99999999999999999999999999999.9999999991",
        "NUMERIC would round: '99999999999999999999999999999.9999999991' has more than 9 "
        "fraction digits",
    ),
    (
        "NUMERIC",
        "NaN",
        "not a NUMERIC: 'NaN' (PostgreSQL's NaN, which no NUMERIC holds: export it as NULL, or "
        "use FLOAT64)",
    ),
    # #16 defect 16: a malformed NUMERIC says what is wrong, not "more than 29 integer digits"
    ("NUMERIC", " 1", "not a NUMERIC: ' 1' (spaces are not allowed)"),
    ("NUMERIC", "1 ", "not a NUMERIC: '1 ' (spaces are not allowed)"),
    ("NUMERIC", "1 000", "not a NUMERIC: '1 000' (spaces are not allowed)"),
    ("NUMERIC", "", "not a NUMERIC: ''" + EMPTY_HINT),
    ("NUMERIC", "--1", "not a NUMERIC: '--1'"),
    ("NUMERIC", "+-1", "not a NUMERIC: '+-1'"),
    ("NUMERIC", ".", "not a NUMERIC: '.'"),
    ("NUMERIC", "1e", "not a NUMERIC: '1e'"),
    ("NUMERIC", "0x10", "not a NUMERIC: '0x10' (decimal digits only, no hex)"),
    ("NUMERIC", "1\u0661", "not a NUMERIC: '1\u0661'"),
    (
        "NUMERIC",
        "1.1234567891",
        "NUMERIC would round: '1.1234567891' has more than 9 fraction digits",
    ),
    ("NUMERIC", "1e-10", "NUMERIC would round: '1e-10' has more than 9 fraction digits"),
    ("NUMERIC", "1.5E-9", "NUMERIC would round: '1.5E-9' has more than 9 fraction digits"),
    ("NUMERIC", "1e29", "NUMERIC out of range: '1e29' has more than 29 integer digits"),
    # Arrow's cast made these other numbers, no error (a tryout's MySQL DECIMAL(65, x))
    ("NUMERIC", "1" * 31, f"NUMERIC out of range: '{'1' * 31}' has more than 29 integer digits"),
    (
        "NUMERIC",
        "12345678901234567890123456789012.5",
        "NUMERIC out of range: '12345678901234567890123456789012.5' has more than 29 integer "
        "digits",
    ),
    (
        "NUMERIC",
        "1.1111111111111111111111111111111e30",
        "NUMERIC out of range: '1.1111111111111111111111111111111e30' has more than 29 "
        "integer digits",
    ),
    ("NUMERIC", "1.5e29", "NUMERIC out of range: '1.5e29' has more than 29 integer digits"),
    (
        "NUMERIC",
        "123456789012345678901234567890",
        "NUMERIC out of range: '123456789012345678901234567890' has more than 29 integer digits",
    ),
    ("BOOL", "maybe", "not a BOOL: 'maybe'"),
    ("BOOL", "", "not a BOOL: ''" + EMPTY_HINT),
    ("STRING(16)", "x" * 23, "STRING(16) too long: 23 characters"),
    ("STRING(2)", "äöü", "STRING(2) too long: 3 characters"),
    ("BYTES(MAX)", "not base64!", "not valid base64: 'not base64!'"),
    ("BYTES(MAX)", "YQ", "not valid base64: 'YQ'"),
    ("BYTES(2)", "YWJj", "BYTES(2) too long: 3 bytes"),
    ("DATE", "2024-02-30", "not a DATE: '2024-02-30'"),
    ("DATE", "2024-1-1", "not a DATE: '2024-1-1'"),
    ("DATE", "0000-12-31", "DATE out of range: '0000-12-31'"),
    ("DATE", "10000-01-01", "not a DATE: '10000-01-01'"),
    ("TIMESTAMP", "2024-01-01", "not a TIMESTAMP: '2024-01-01'"),
    ("TIMESTAMP", "2024-02-30T00:00:00Z", "not a TIMESTAMP: '2024-02-30T00:00:00Z'"),
    ("TIMESTAMP", "2024-01-01T24:00:00Z", "not a TIMESTAMP: '2024-01-01T24:00:00Z'"),
    (
        "TIMESTAMP",
        "2024-01-01T00:00:00.1234567891Z",
        "not a TIMESTAMP: '2024-01-01T00:00:00.1234567891Z' (more than 9 fraction digits: a "
        "TIMESTAMP keeps nanoseconds)",
    ),
    (
        "TIMESTAMP",
        "0001-01-01T00:00:00+01:00",
        "TIMESTAMP out of range: '0001-01-01T00:00:00+01:00'",
    ),
    ("JSON", "{a: 1}", "not valid JSON: '{a: 1}'"),
    ("JSON", "", "not valid JSON: ''" + EMPTY_HINT),
    ("JSON", "NaN", "not valid JSON: 'NaN'"),  # Python's parser takes these, Spanner not
    ("JSON", '{"a": -Infinity}', "not valid JSON: '{\"a\": -Infinity}'"),
    ("JSON", "[1e400]", "JSON number '1e400' is outside the FLOAT64 range: '[1e400]'"),
    (
        "JSON",
        "1" + "0" * 400,
        "JSON number '1{0}...' is outside the FLOAT64 range: '1{0}...'".format("0" * 59),
    ),
    # Spanner's JSON refuses numbers it cannot keep exactly
    *[
        (
            "JSON",
            f'{{"n": {n}}}',
            f"JSON number '{n}' has more digits than a FLOAT64 holds (Spanner's JSON keeps "
            "integers of [-2^63, 2^64-1] and numbers a FLOAT64 holds exactly; write it as a "
            f"JSON string): '{{\"n\": {n}}}'",
        )
        for n in (
            "123456789012345678901234567890",
            "2.2412421353246235436",
            "18446744073709551616",
            "-9223372036854775809",
        )
    ],
    ("ARRAY<JSON>", "[1, NaN]", "not a JSON array: '[1, NaN]'"),
    ("ARRAY<INT64>", "1,2", "not a JSON array: '1,2'"),
    ("ARRAY<INT64>", '{"a":1}', "not a JSON array: '{\"a\":1}'"),
    # PostgreSQL's empty array is also JSON's empty object: said so, as for {1,2} (a tryout)
    (
        "ARRAY<STRING>",
        "{}",
        "not a JSON array: '{}' (PostgreSQL's array text: read it with the postgres dialect, or "
        "export the column with array_to_json)",
    ),
    ("ARRAY<INT64>", "null", "not a JSON array: 'null'"),
    ("ARRAY<JSON>", "null", "not a JSON array: 'null'"),
    ("ARRAY<INT64>", "[1,[2]]", "nested values in ARRAY<INT64>: '[1,[2]]'"),
    ("ARRAY<INT64>", '[1,"x"]', "element 2 of ARRAY<INT64>: not an INT64: 'x'"),
    (
        "ARRAY<STRING(2)>",
        '["abc"]',
        "element 1 of ARRAY<STRING(2)>: STRING(2) too long: 3 characters",
    ),
]


@pytest.mark.parametrize("type_text,text,reason", INVALID)
def test_invalid(type_text: str, text: str, reason: str) -> None:
    assert conv(type_text, text) == (None, reason)


def test_hex_bytes() -> None:
    assert conv("BYTES(MAX)", "\\x00ff", bytes_encoding="hex") == (b"\x00\xff", None)
    assert conv("BYTES(MAX)", "0AbC", bytes_encoding="hex") == (b"\x0a\xbc", None)
    assert conv("BYTES(MAX)", "abc", bytes_encoding="hex") == (None, "not valid hex: 'abc'")


def test_custom_bool_words() -> None:
    assert conv("BOOL", "Ja", true_words=("ja",), false_words=("nein",)) == (True, None)
    assert conv("BOOL", "true", true_words=("ja",), false_words=("nein",)) == (
        None,
        "not a BOOL: 'true'",
    )


@pytest.mark.parametrize(
    "text,expected,reason",
    [
        ("2024-07-01 12:00:00", "2024-07-01T10:00:00.000000000Z", None),  # CEST, +02:00
        ("2024-01-15 12:00:00.25", "2024-01-15T11:00:00.250000000Z", None),  # CET, +01:00
        ("2024-01-15T12:00:00Z", "2024-01-15T12:00:00.000000000Z", None),  # explicit offset wins
        (  # passed twice (a tryout: it was the earlier instant, without a word)
            "2024-10-27 02:30:00",
            None,
            "TIMESTAMP '2024-10-27 02:30:00' happens twice in Europe/Berlin (the clocks go back "
            "an hour at a daylight saving change): which one is meant needs its offset in the "
            "text (an export in UTC, or with offsets, has none of these)",
        ),
        ("2024-10-27 02:30:00+01:00", "2024-10-27T01:30:00.000000000Z", None),  # told: fine
        (
            "2024-03-31 02:30:00",
            None,
            "TIMESTAMP '2024-03-31 02:30:00' does not exist in Europe/Berlin "
            "(skipped by a daylight saving change)",
        ),
    ],
)
def test_timestamp_timezone(text: str, expected: str | None, reason: str | None) -> None:
    assert conv("TIMESTAMP", text, timezone="Europe/Berlin") == (expected, reason)


def test_timestamp_format() -> None:
    fmt = "%d/%m/%Y %H:%M"
    assert conv("TIMESTAMP", "31/12/2023 23:30", timestamp_format=fmt) == (
        "2023-12-31T23:30:00.000000000Z",
        None,
    )
    assert conv("TIMESTAMP", "2023-12-31", timestamp_format=fmt) == (
        None,
        "not a TIMESTAMP in the format '%d/%m/%Y %H:%M': '2023-12-31'",
    )


def test_timestamp_mixed_column_keeps_order() -> None:
    values = [
        "2024-01-01T00:00:00Z",
        None,
        "2024-01-01 00:00:00.1+01:00",
        "x",
        "2024-01-01 00:00:00",
    ]
    out, errors = convert_column(
        pa.array(values, pa.string()), SpannerType.parse("TIMESTAMP"), OPTS
    )
    assert out.to_pylist() == [
        "2024-01-01T00:00:00.000000000Z",
        None,
        "2023-12-31T23:00:00.100000000Z",
        None,
        "2024-01-01T00:00:00.000000000Z",
    ]
    assert errors == {3: "not a TIMESTAMP: 'x'"}


def test_many_bad_values_in_one_column() -> None:
    values = [str(i) if i % 3 else f"bad{i}" for i in range(1000)]
    out, errors = convert_column(pa.array(values), SpannerType.parse("INT64"), OPTS)
    assert sorted(errors) == list(range(0, 1000, 3))
    assert out.null_count == len(errors)
    assert out[1].as_py() == 1


def test_bytes_column_mixed_padding() -> None:
    values = ["YQ==", None, "YWI=", "YWJj", "", "!!", "AAAA"]
    out, errors = convert_column(pa.array(values), SpannerType.parse("BYTES(MAX)"), OPTS)
    assert out.to_pylist() == [b"a", None, b"ab", b"abc", b"", None, b"\0\0\0"]
    assert errors == {5: "not valid base64: '!!'"}


def _table(*cols: Column) -> TableSchema:
    return TableSchema("T", cols, (KeyPart(cols[0].name),))


def _block(data: dict[str, list[Any]], start: int = 1) -> ParsedBlock:
    n = len(next(iter(data.values())))
    return ParsedBlock(
        strings=pa.table({k: pa.array(v, pa.string()) for k, v in data.items()}),
        record_numbers=pa.array(range(start, start + n), pa.int64()),
        line_numbers=pa.array(range(start + 1, start + 1 + n), pa.int64()),
        rejects=[],
    )


def test_convert_block_rejects_and_not_null() -> None:
    table = _table(
        Column("Id", SpannerType.parse("INT64"), nullable=False),
        Column("Name", SpannerType.parse("STRING(4)"), nullable=False),
        Column("Score", SpannerType.parse("FLOAT64")),
    )
    block = _block(
        {
            "Id": ["1", "x", "3", "4"],
            "Name": ["a", "b", None, "toolong"],
            "Score": ["1", "2", "3", "y"],
        }
    )
    out = convert_block(block, table, OPTS, "s.csv")
    assert out.table.to_pylist() == [{"Id": 1, "Name": "a", "Score": 1.0}]
    assert out.record_numbers.to_pylist() == [1]
    assert out.line_numbers is not None and out.line_numbers.to_pylist() == [2]
    got = [(r.line, r.record, r.column, r.reason, r.text) for r in out.rejects]
    assert got == [
        (3, 2, "Id", "not an INT64: 'x'", "x"),
        (4, 3, "Name", "NULL in NOT NULL column Name", None),
        (5, 4, "Name", "STRING(4) too long: 7 characters", "toolong"),  # first bad column wins
    ]
    assert all(r.source == "s.csv" and r.table == "T" for r in out.rejects)


@pytest.mark.parametrize(
    ("texts", "kept"),
    [
        (["1", "-25", "0", None, "9223372036854775807", "-9223372036854775808"], True),
        (["1", "007"], False),
        (["1", "-0"], False),
        (["1", "+5"], False),  # Spanner would refuse "+5" as INT64 text
        ([None, None], False),
    ],
)
def test_int64_source_text_is_kept_only_when_written_as_str_int(
    texts: list[Optional[str]], kept: bool
) -> None:
    table = _table(Column("Id", SpannerType.parse("INT64")))
    out = convert_block(_block({"Id": texts}), table, OPTS, "s", int_texts=True)
    assert not out.rejects
    if kept:
        assert out.int_texts["Id"].to_pylist() == texts
        assert out.int_texts["Id"].to_pylist() == [
            None if v is None else str(v) for v in out.table.column("Id").to_pylist()
        ]
    else:
        assert "Id" not in out.int_texts


def test_int64_source_text_follows_the_rejected_rows_out() -> None:
    table = _table(
        Column("Id", SpannerType.parse("INT64")),
        Column("N", SpannerType.parse("INT64"), nullable=False),
    )
    out = convert_block(
        _block({"Id": ["5", "x", "7", "8"], "N": ["1", "2", None, "4"]}),
        table,
        OPTS,
        "s",
        int_texts=True,
    )
    assert [r.record for r in out.rejects] == [2, 3]
    assert out.int_texts["Id"].to_pylist() == ["5", "8"]
    assert out.int_texts["N"].to_pylist() == ["1", "4"]


@pytest.mark.parametrize("native_on", ["1", "0"])
def test_int64_source_text_is_kept_for_the_numpy_encoder_only(
    native_on: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the compiled encoder writes integers itself: the text would be computed for nothing
    monkeypatch.setenv(native.NATIVE_ENV, native_on)
    table = _table(Column("Id", SpannerType.parse("INT64")))
    out = convert_block(_block({"Id": ["1", "2"]}), table, OPTS, "s")
    assert ("Id" in out.int_texts) == (not native.available())
    assert (
        "Id"
        not in convert_block(_block({"Id": ["1"]}), table, OPTS, "s", int_texts=False).int_texts
    )


def test_cell_too_large() -> None:
    table = _table(
        Column("Id", SpannerType.parse("INT64")), Column("S", SpannerType.parse("STRING(MAX)"))
    )
    out = convert_block(
        _block({"Id": ["1", "2"], "S": ["x" * 11, "ok"]}),
        table,
        ConvertOptions(max_cell_bytes=10),
        "s",
    )
    assert [r.reason for r in out.rejects] == ["cell too large: 11 bytes (limit 10)"]
    assert out.table.column("Id").to_pylist() == [2]


def test_string_max_limit() -> None:
    out, errors = convert_column(
        pa.array(["é" * 2_621_441]), SpannerType.parse("STRING(MAX)"), OPTS
    )
    assert errors == {0: "STRING(MAX) too long: 2621441 characters (limit 2,621,440)"}


def test_commit_timestamp_columns() -> None:
    table = _table(
        Column("Id", SpannerType.parse("INT64")),
        Column("At", SpannerType.parse("TIMESTAMP"), allow_commit_timestamp=True),
        Column("Other", SpannerType.parse("TIMESTAMP")),
    )
    opts = ConvertOptions(commit_timestamp_columns=frozenset({"At"}))
    out = convert_block(_block({"Id": ["1", "2"]}), table, opts, "s")
    assert out.table.column("At").to_pylist() == [COMMIT_TIMESTAMP] * 2
    with pytest.raises(SchemaError, match="also|too"):
        convert_block(_block({"Id": ["1"], "At": ["x"]}), table, opts, "s")
    with pytest.raises(SchemaError, match="cannot take the commit timestamp"):
        convert_block(
            _block({"Id": ["1"]}),
            table,
            ConvertOptions(commit_timestamp_columns=frozenset({"Other"})),
            "s",
        )
    # The literal itself is accepted in an allow_commit_timestamp column, not elsewhere.
    out = convert_block(
        _block(
            {"Id": ["1", "2"], "Other": [COMMIT_TIMESTAMP, None], "At": [COMMIT_TIMESTAMP, None]}
        ),
        table,
        OPTS,
        "s",
    )
    assert out.table.column("At").to_pylist() == [None]
    assert out.rejects[0].reason == "not a TIMESTAMP: 'spanner.commit_timestamp()'"


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="unknown time zone"):
        ConvertOptions(timezone="Mars/Olympus")
    with pytest.raises(ConfigError, match="base64, hex, postgres or postgres-escape"):
        ConvertOptions(bytes_encoding="base32")
    with pytest.raises(ConfigError, match="both true and false"):
        ConvertOptions(true_words=("y",), false_words=("Y",))


# -- the TIMESTAMP fast path agrees with the general one ------------------------------------------


def _timestamp_texts(
    month: st.SearchStrategy[int],
    day: st.SearchStrategy[int],
    hour: st.SearchStrategy[int],
    minute: st.SearchStrategy[int],
    sep: st.SearchStrategy[str],
    offset: st.SearchStrategy[str],
) -> st.SearchStrategy[str]:
    """``YYYY-MM-DD<sep>HH:MM:SS[.f]<offset>`` texts with fields drawn from the given ranges."""
    return st.builds(
        lambda y, mo, d, h, mi, s, sp, frac, off: (
            f"{y:04d}-{mo:02d}-{d:02d}{sp}{h:02d}:{mi:02d}:{s:02d}{frac}{off}"
        ),
        st.integers(1, 9999) | st.integers(1677, 2262),
        month,
        day,
        hour,
        minute,
        st.integers(0, 60),
        sep,
        st.just("") | st.text("0123456789", min_size=1, max_size=10).map(lambda f: "." + f),
        offset,
    )


_TS_SHAPES = _timestamp_texts(
    st.integers(1, 12),
    st.integers(1, 31),
    st.integers(0, 23),
    st.integers(0, 59),
    st.sampled_from(["T", " "]),
    st.sampled_from(["", "Z", "z", "+00:00", "-05:30", "+0530", "+05", " UTC", "+14:00", "-12:00"]),
)


@pytest.fixture(scope="module", params=["numpy", "native"])
def timestamp_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    """The TIMESTAMP fast path with and without its compiled part (loader/_native.c)."""
    yield from native_parts(request.param)


@pytest.fixture(scope="module")
def compiled() -> Iterator[str]:
    """The compiled fast paths switched on: the properties below compare them with their
    numpy / Arrow twins, so a run with them off would compare a path with itself."""
    yield from native_parts("native")


def _assert_fast_path_matches_general_path(values: list[Optional[str]]) -> None:
    from loader.convert import _convert_timestamp, _convert_timestamp_general

    arr = pa.array(values, pa.string())
    t = SpannerType.parse("TIMESTAMP")
    fast, fast_errors = _convert_timestamp(arr, t, ConvertOptions())
    slow, slow_errors = _convert_timestamp_general(arr, t, ConvertOptions())
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_errors == slow_errors


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_TS_SHAPES, st.none(), st.text(max_size=12)), min_size=1, max_size=8))
def test_timestamp_fast_path_matches_general_path(
    timestamp_paths: str, values: list[Optional[str]]
) -> None:
    _assert_fast_path_matches_general_path(values)


# out-of-range fields too: the separator check passes them on to Arrow's cast to refuse
_ZULU = _timestamp_texts(
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.just("T"),
    st.just("Z"),
)


@st.composite
def _or_corrupted(draw: st.DrawFn, texts: st.SearchStrategy[str], chars: str) -> str:
    """A text of ``texts``, sometimes with one character replaced by one of ``chars``."""
    text = draw(texts)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.sampled_from(chars)) + text[at + 1 :]
    return text


def _zulu_or_corrupted() -> st.SearchStrategy[str]:
    """The separator layout the fast path pre-checks, sometimes with one character replaced."""
    return _or_corrupted(_ZULU, " +-.:TZa0\u00e9")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_zulu_or_corrupted(), st.none()), min_size=1, max_size=8))
def test_timestamp_separator_precheck_matches_general_path(
    timestamp_paths: str, values: list[Optional[str]]
) -> None:
    """All-``...Z`` columns skip the regex; Arrow's cast must then reject what it rejected."""
    _assert_fast_path_matches_general_path(values)


def test_timestamp_fast_path_is_taken_and_exact(timestamp_paths: str) -> None:
    from loader.convert import _timestamp_fast

    values = [
        "2022-06-18T04:56:10.936367452Z",
        None,
        "2022-10-07T10:18:49.013354Z",
        "1970-01-01T00:00:00Z",
        "1969-12-31T23:59:59.999999999+00:00",
        "2262-04-11T23:47:16.854775807Z",
        "1677-09-22T00:00:00.5Z",
        "2024-02-29T23:30:00-01:00",
    ]
    out = _timestamp_fast(pa.array(values, pa.string()))
    assert out is not None
    assert out.to_pylist() == [
        "2022-06-18T04:56:10.936367452Z",
        None,
        "2022-10-07T10:18:49.013354000Z",
        "1970-01-01T00:00:00.000000000Z",
        "1969-12-31T23:59:59.999999999Z",
        "2262-04-11T23:47:16.854775807Z",
        "1677-09-22T00:00:00.500000000Z",
        "2024-03-01T00:30:00.000000000Z",
    ]
    # outside timestamp[ns]: the compiled path takes any year 0001-9999, numpy's leaves it
    # to the general path
    far = _timestamp_fast(pa.array(["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.1Z"]))
    if timestamp_paths == "native":
        assert far is not None
        assert far.to_pylist() == [
            "0001-01-01T00:00:00.000000000Z",
            "9999-12-31T23:59:59.100000000Z",
        ]
    else:
        assert far is None
    # naive mixed with offsets: the compiled path takes it (UTC), numpy's leaves it
    mixed = _timestamp_fast(pa.array(["2020-01-01 00:00:00", "2020-01-01T00:00:00Z"]))
    if timestamp_paths == "native":
        assert mixed is not None
        assert mixed.to_pylist() == ["2020-01-01T00:00:00.000000000Z"] * 2
    else:
        assert mixed is None
    # year 0, a leap second, February 29 of a common year, 10 fraction digits: general
    for odd in (
        "0000-01-01T00:00:00Z",
        "2016-12-31T23:59:60Z",
        "2023-02-29T00:00:00Z",
        "2020-01-01T00:00:00.1234567890Z",
    ):
        assert _timestamp_fast(pa.array([odd, "2020-01-01T00:00:00Z"])) is None, odd


# -- the NUMERIC fast path (compiled, plain text only) agrees with Arrow's cast --------------------


_PLAIN_NUMERICS = st.builds(
    lambda neg, whole, frac: ("-" if neg else "") + whole + ("." + frac if frac else ""),
    st.booleans(),
    st.text("0123456789", min_size=0, max_size=38),
    st.text("0123456789", min_size=0, max_size=11),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            _PLAIN_NUMERICS,
            st.none(),
            st.text("0123456789.-+eE ", max_size=8),
            # exponents that carry a long mantissa past 1e29, or bring it back below
            st.builds(lambda m, e: f"{m}e{e}", _PLAIN_NUMERICS, st.integers(-40, 40)),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_numeric_fast_path_matches_the_cast(compiled: str, values: list[Optional[str]]):
    from loader.convert import _bisect, _convert_numeric, _numeric_reason

    arr = pa.array(values, pa.string())
    t = SpannerType.parse("NUMERIC")
    fast, fast_errors = _convert_numeric(arr, t, ConvertOptions())
    slow, slow_errors = _bisect(arr, lambda a: pc.cast(a, pa.decimal128(38, 9)), _numeric_reason)
    # the cast is the reference for the syntax, not for the value: some texts of 30 to 38
    # digits overflow as it scales them, into another number (a tryout: 31 ones loaded as
    # 90264010348295720720987288815.695365632); those rows are rejected as out of range;
    # and an exponent that takes a value below 1e-9 comes out as 0 ('.00000000001e-37',
    # Hypothesis): rejected as rounded, as '1e-10' is by the cast
    overflowed = {
        i
        for i, (v, got) in enumerate(zip(values, slow.to_pylist()))
        if got is not None and v is not None and got != Decimal(v)
    }
    assert set(fast_errors) == set(slow_errors) | overflowed
    for i in overflowed:
        big = abs(Decimal(values[i] or "0")) >= 10**29
        assert ("NUMERIC out of range" if big else "NUMERIC would round") in fast_errors[i]
    assert {i: r for i, r in fast_errors.items() if i not in overflowed} == slow_errors
    for i, (v, got) in enumerate(zip(values, fast.to_pylist())):
        assert got == (None if i in fast_errors or v is None else Decimal(v))


def test_a_numeric_exponent_below_the_ninth_fraction_digit_is_refused_not_zero() -> None:
    from loader.convert import _convert_numeric

    arr = pa.array([".00000000001e-37", "5e-50", "-1e-10", "0e-50", "0.0e3", "1e-9", "1e2"])
    out, errors = _convert_numeric(arr, SpannerType.parse("NUMERIC"), ConvertOptions())
    assert sorted(errors) == [0, 1, 2]
    assert all("NUMERIC would round" in r for r in errors.values())
    assert out.to_pylist()[3:] == [Decimal(0), Decimal(0), Decimal("1e-9"), Decimal(100)]


def test_numeric_fast_path_extremes(timestamp_paths: str) -> None:
    from loader.convert import _convert_numeric

    values = [
        "99999999999999999999999999999.999999999",
        "-99999999999999999999999999999.999999999",
        "0",
        "-0",
        "-0.000000001",
        "000123.5",
        "18446744073709551616",
        None,
    ]
    out, errors = _convert_numeric(pa.array(values), SpannerType.parse("NUMERIC"), ConvertOptions())
    assert errors == {}
    assert out.to_pylist() == [None if v is None else Decimal(v) for v in values]


# -- the INT64 and DATE fast paths (compiled, plain text only) agree with Arrow's casts -----------


def _same_with_native_off(convert: Any, values: list[Optional[str]], type_name: str) -> None:
    assert native.available(), "the compiled path must be on for a comparison"
    arr = pa.array(values, pa.string())
    t = SpannerType.parse(type_name)
    fast, fast_errors = convert(arr, t, ConvertOptions())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.NATIVE_ENV, "0")
        slow, slow_errors = convert(arr, t, ConvertOptions())
    assert fast.type == slow.type
    assert fast.to_pylist() == slow.to_pylist()
    assert fast_errors == slow_errors


_PLAIN_INTS = st.builds(
    lambda sign, digits: sign + digits,
    st.sampled_from(["", "", "-", "+"]),
    st.text("0123456789", min_size=0, max_size=21),
)
_INT_EDGES = st.sampled_from(
    [
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "9999999999999999999",
        "0000000000000000000000042",
        "-0",
        " 1",
        "1 ",
        "0x1F",
        "1e3",
        "12345678",
        "1234567\u0661",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(_PLAIN_INTS, _INT_EDGES, st.none(), st.text("0123456789-:/ ", max_size=10)),
        min_size=1,
        max_size=8,
    )
)
def test_int64_fast_path_matches_the_cast(compiled: str, values: list[Optional[str]]):
    from loader.convert import _convert_int64

    _same_with_native_off(_convert_int64, values, "INT64")


def _date_text(y: int, m: int, d: int, widths: tuple[int, int, int]) -> str:
    return f"{y:0{widths[0]}d}-{m:0{widths[1]}d}-{d:0{widths[2]}d}"


_DATES = st.builds(
    _date_text,
    st.integers(0, 10000),
    st.integers(0, 13),
    st.integers(0, 32),
    st.sampled_from([(4, 2, 2), (4, 2, 2), (4, 2, 2), (1, 1, 1), (5, 2, 2), (4, 3, 1)]),
)


def _date_or_corrupted() -> st.SearchStrategy[str]:
    return _or_corrupted(_DATES, " +-/T0a\u0661")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_date_or_corrupted(), st.none()), min_size=1, max_size=8))
def test_date_fast_path_matches_the_cast(compiled: str, values: list[Optional[str]]):
    from loader.convert import _convert_date

    _same_with_native_off(_convert_date, values, "DATE")


def test_int64_and_date_fast_paths_extremes(timestamp_paths: str) -> None:
    from loader.convert import _convert_date, _convert_int64

    ints = ["9223372036854775807", "-9223372036854775808", "0", "-0", "0042", None, "-7"]
    out, errors = _convert_int64(pa.array(ints), SpannerType.parse("INT64"), ConvertOptions())
    assert errors == {}
    assert out.to_pylist() == [None if v is None else int(v) for v in ints]
    dates = ["0001-01-01", "9999-12-31", "1970-01-01", "1969-12-31", "2000-02-29", None]
    out, errors = _convert_date(pa.array(dates), SpannerType.parse("DATE"), ConvertOptions())
    assert errors == {}
    assert out.to_pylist() == [None if v is None else dt.date.fromisoformat(v) for v in dates]


@given(
    st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=40),
    st.integers(0, 40),
    st.integers(0, 40),
)
def test_max_value_bytes_is_the_longest_value_in_utf8(
    values: list[Optional[str]], start: int, length: int
) -> None:
    from loader.convert import _max_value_bytes

    for typ in (pa.string(), pa.large_string(), pa.binary()):
        arr = pa.array(
            [v if v is None or typ != pa.binary() else v.encode() for v in values], typ
        ).slice(start, length)
        expected = max((len(v.encode()) for v in values[start : start + length] if v), default=0)
        assert _max_value_bytes(arr) == expected


def test_bytes_and_arrays_are_held_to_the_cell_limit_as_stored_not_as_written() -> None:
    """A tryout: an 8 MiB BYTES value (11 MB as base64) and an ARRAY of 4 MB (12 MB as
    escaped JSON text) were refused as cells too large; Spanner takes them."""
    import base64

    limit = ConvertOptions(max_cell_bytes=30)
    table = _table(
        Column("Id", SpannerType.parse("INT64")),
        Column("B", SpannerType.parse("BYTES(MAX)")),
        Column("A", SpannerType.parse("ARRAY<STRING(MAX)>")),
    )
    b64 = [base64.b64encode(b"x" * n).decode() for n in (30, 31, 1)]
    arrays = ['["' + "\\u00e9" * 15 + '"]', '["a"]', '["' + "a" * 16 + '", "' + "b" * 15 + '"]']
    out = convert_block(_block({"Id": ["1", "2", "3"], "B": b64, "A": arrays}), table, limit, "s")
    assert [(r.record, r.column, r.reason) for r in out.rejects] == [
        (2, "B", "cell too large: 31 bytes (limit 30)"),
        (3, "A", "cell too large: 31 bytes (limit 30)"),
    ]
    assert out.table.column("B").to_pylist() == [b"x" * 30]  # 40 characters of base64
    assert out.table.column("A").to_pylist() == [["\u00e9" * 15]]  # 90 of text, 30 bytes
    # a TIMESTAMP is 12 bytes stored, not its 20 characters (a review)
    stamps = _table(
        Column("Id", SpannerType.parse("INT64")), Column("T", SpannerType.parse("ARRAY<TIMESTAMP>"))
    )
    two = '["2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"]'  # 24 bytes, 40 of text
    out = convert_block(_block({"Id": ["1"], "T": [two]}), stamps, limit, "s")
    assert not out.rejects and len(out.table.column("T")[0]) == 2
    hexed = dataclasses.replace(limit, bytes_encoding="hex")
    out = convert_block(_block({"Id": ["1"], "B": ["ab" * 30], "A": [None]}), table, hexed, "s")
    assert not out.rejects and out.table.column("B").to_pylist() == [b"\xab" * 30]


def test_strings_and_cells_over_their_limits_are_still_found() -> None:
    # the byte-length shortcut only skips the exact check when nothing can be over
    table = _table(Column("Name", SpannerType.parse("STRING(3)")))
    out = convert_block(_block({"Name": ["äöü", "abcd", "ab"]}), table, OPTS, "s")
    assert [r.reason for r in out.rejects] == ["STRING(3) too long: 4 characters"]
    big = ConvertOptions(max_cell_bytes=4)
    table = _table(Column("Name", SpannerType.parse("STRING(MAX)")))
    out = convert_block(_block({"Name": ["abcd", "abcde"]}), table, big, "s")
    assert [r.record for r in out.rejects] == [2]
    assert "cell too large" in out.rejects[0].reason


def test_date_table_is_isoformat_for_every_day_of_years_1_to_9999() -> None:
    """The TIMESTAMP formatter's date table (numpy civil-from-days): the same text as
    ``date.isoformat`` for every day Spanner allows, leap days and zero-padded years included."""
    import numpy as np

    from loader.convert.time import _date_table

    epoch = dt.date(1970, 1, 1).toordinal()
    first, last = dt.date(1, 1, 1).toordinal() - epoch, dt.date(9999, 12, 31).toordinal() - epoch
    days = np.arange(first, last + 1)
    got = _date_table(days)
    want = "".join(dt.date.fromordinal(epoch + d).isoformat() for d in range(first, last + 1))
    assert got.tobytes() == want.encode()


@pytest.mark.parametrize("type_text", ["JSON", "ARRAY<INT64>", "ARRAY<JSON>", "ARRAY<STRING(MAX)>"])
def test_json_nested_past_the_parsers_depth_is_a_reject(type_text: str) -> None:
    deep = "[" * 5000 + "]" * 5000
    _, errors = convert_column(
        pa.array([deep, "[1]"]), SpannerType.parse(type_text), ConvertOptions()
    )
    assert list(errors) == [0] and "JSON" in errors[0]
    # said as it is: valid JSON, deeper than Python's parser follows (a jsonb takes it)
    assert "nested deeper than the loader can read (about" in errors[0], errors[0]


def test_a_lone_surrogate_in_a_string_array_is_a_reject_with_its_element() -> None:
    out, errors = convert_column(
        pa.array(['["a","\\ud800"]', '["\\ud83d\\ude00"]']),
        SpannerType.parse("ARRAY<STRING(MAX)>"),
        ConvertOptions(),
    )
    assert list(errors) == [0] and errors[0].startswith("element 2 of ARRAY<STRING(MAX)>")
    assert out.to_pylist() == [None, ["\U0001f600"]]


@pytest.mark.parametrize("fmt", ["%Y-%m-%d %H:%M:%S.%f", "%d/%m/%Y %H:%M:%S,%f", "%Q"])
def test_a_timestamp_format_arrow_cannot_read_is_refused_up_front(fmt: str) -> None:
    """A format with %f rejected every row, each with the same reason: Arrow's strptime has
    no %f. Now the options say so before anything is read."""
    from loader.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot be read by the loader's parser") as e:
        ConvertOptions(timestamp_format=fmt)
    assert ("%f" in fmt) == ("it has no %f" in str(e.value))
    ConvertOptions(timestamp_format="%d/%m/%Y %I:%M:%S %p")  # what it reads passes


def _nest(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


@pytest.fixture(params=["numpy", "native"])
def json_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    """The JSON validator with and without its compiled part (loader/_native.c)."""
    yield from native_parts(request.param)


def test_json_nested_past_spanners_80_levels_is_a_reject(json_paths: str) -> None:
    """Spanner's JSON takes 80 levels ("Work with JSON data"); the emulator takes more, so a
    load checked against it failed on Spanner."""
    values = [_nest(80), _nest(81), "[" * 80 + "]" * 80, "[" * 81 + "]" * 81]
    out, errors = convert_column(pa.array(values), SpannerType.parse("JSON"), OPTS)
    assert sorted(errors) == [1, 3]
    assert errors[1].startswith("JSON nested 81 levels deep; Spanner's JSON takes 80 at most: ")
    assert out.to_pylist() == [values[0], None, values[2], None]
    arrays = ["[" + _nest(80) + "]", "[1," + _nest(81) + "]"]
    out, errors = convert_column(pa.array(arrays), SpannerType.parse("ARRAY<JSON>"), OPTS)
    assert list(errors) == [1]
    assert errors[1].startswith("element 2 of ARRAY<JSON>: JSON nested 81 levels deep")
    assert out.to_pylist()[0] == [_nest(80)]


def test_jsonb_keeps_what_postgresql_dialect_spanner_keeps() -> None:
    """A PostgreSQL-dialect database's jsonb keeps numbers as written (up to 4,932 digits
    before the point and 16,383 after), the last of duplicate keys, and any nesting ("Work
    with JSONB data"): GoogleSQL's rules refused a PostgreSQL export's exact numbers."""
    jsonb = SpannerType.parse("jsonb", postgresql=True)
    assert jsonb == SpannerType("JSON", postgres=True) and str(jsonb) == "JSONB"
    assert SpannerType.parse("jsonb[]", postgresql=True).element == jsonb
    kept = [
        '{"n": 2.2412421353246235436}',
        "123456789012345678901234567890",
        "1e400",
        "0." + "1" * 16383,
        "9" * 4932,
        _nest(200),
    ]
    out, errors = convert_column(pa.array(kept), jsonb, OPTS)
    assert errors == {} and out.to_pylist() == kept
    refused = ["1" * 4933, "0." + "1" * 16384, "1e5000", "NaN", "{a:1}"]
    _, errors = convert_column(pa.array(refused), jsonb, OPTS)
    assert sorted(errors) == [0, 1, 2, 3, 4]
    assert "has more digits than a JSONB number holds (4,932 before the point" in errors[0]
    assert errors[3] == "not valid JSON: 'NaN'"
    # array elements: the last of duplicate keys, numbers as written, unicode as JSON text
    out, errors = convert_column(
        pa.array(['[{"a":1,"a":2.50}, 1e2, "\u00e9", null, [true]]', '{"{\\"b\\":1}",NULL}']),
        SpannerType.parse("jsonb[]", postgresql=True),
        ConvertOptions(array_syntax="postgres"),
    )
    assert errors == {}
    assert out.to_pylist() == [
        ['{"a":2.50}', "1e2", '"\\u00e9"', None, "[true]"],
        ['{"b":1}', None],
    ]
    # the same text in GoogleSQL's ARRAY<JSON>: the first key, numbers as a double holds them
    out, _ = convert_column(
        pa.array(['[{"a":1,"a":2.50}, 1e2]']), SpannerType.parse("ARRAY<JSON>"), OPTS
    )
    assert out.to_pylist() == [['{"a":1}', "100.0"]]


def test_a_postgresql_numeric_holds_what_spanner_postgresql_numeric_holds() -> None:
    """A PostgreSQL-dialect database's numeric holds 131,072 integer and 16,383 fraction
    digits ("Work with NUMERIC data"); held as GoogleSQL's NUMERIC(38, 9), a PostgreSQL
    export's exact values were rejected (a documented limit until now)."""
    t = SpannerType.parse("numeric", postgresql=True)
    assert t.numeric_text and arrow_type(t) == pa.string()
    assert SpannerType.parse("NUMERIC") == SpannerType("NUMERIC")  # GoogleSQL's as before
    values = [
        "1.1234567891",
        "-123456789012345678901234567890.5",
        "1.50",
        "007",
        "-0",
        "+1.5",
        ".5",
        "5.",
        "1e3",
        "1.5E-3",
        "9" * 131_072,
        "0." + "1" * 16_383,
        None,
        "nan",  # PostgreSQL's numeric takes NaN, and so does Spanner's (the emulator does)
    ]
    out, errors = convert_column(pa.array(values, pa.string()), t, OPTS)
    assert errors == {}
    written = ["1.5", "0.5", "5", "1000", "0.0015"]
    assert out.to_pylist() == values[:5] + written + values[10:13] + ["NaN"]
    bad = ["-NaN", "1.2.3", " 1", "9" * 131_073, "1e131072", "1e-16384", "0." + "1" * 16_384, ""]
    _, errors = convert_column(pa.array(bad), t, OPTS)
    assert sorted(errors) == list(range(len(bad)))
    assert errors[0] == "not a NUMERIC: '-NaN'"
    assert errors[2] == "not a NUMERIC: ' 1' (spaces are not allowed)"
    assert "has more than 131,072 integer digits (PostgreSQL's numeric)" in errors[3]
    assert errors[5].startswith("NUMERIC would round: '1e-16384' has more than 16,383 fraction")
    arr = SpannerType.parse("numeric[]", postgresql=True)
    out, errors = convert_column(pa.array(['["1.1234567891", 2e3, null]']), arr, OPTS)
    assert errors == {} and out.to_pylist() == [["1.1234567891", "2000", None]]


def test_an_exponent_python_s_decimal_cannot_hold_is_a_reason_not_a_crash() -> None:
    """``1e-99999999999999999999`` (an exponent of 20 digits) made Python's decimal raise, and
    the load stop with a traceback, in PostgreSQL's numeric and jsonb and in a JSON number that
    rounds to 0 (found by the property test on the compiled JSON validator's fallback)."""
    huge = ["1e99999999999999999999", "-1.5E+99999999999999999999", "1e-99999999999999999999"]
    zero = ["0e99999999999999999999", "0.0e-99999999999999999999"]
    numeric = SpannerType.parse("numeric", postgresql=True)
    out, errors = convert_column(pa.array(huge + zero[:1]), numeric, OPTS)
    assert errors[0].startswith("NUMERIC out of range: '1e99999999999999999999' has more than")
    assert "131,072 integer digits" in errors[1]
    assert errors[2].startswith("NUMERIC would round: '1e-99999999999999999999' has more than")
    assert 3 not in errors and out.to_pylist()[3] == "0"
    for t in (SpannerType.parse("jsonb", postgresql=True), SpannerType.parse("JSON")):
        out, errors = convert_column(pa.array(huge + zero), t, OPTS)
        if t.postgres:  # no JSONB number has so many digits: refused, as PostgreSQL does
            assert sorted(errors) == list(range(5))
            assert "more digits than a JSONB number holds" in errors[4]
        else:  # a double: out of its range, rounded to 0, or 0 itself
            assert sorted(errors) == [0, 1, 2]
            assert "outside the FLOAT64 range" in errors[0]
            assert "has more digits than a FLOAT64 holds" in errors[2]
            assert out.to_pylist()[3:] == zero
    out, errors = convert_column(
        pa.array(["[0e99999999999999999999, 1e-99999999999999999999]"]),
        SpannerType.parse("ARRAY<JSON>"),
        OPTS,
    )
    assert "has more digits than a FLOAT64 holds" in errors[0]


def test_postgres_escape_bytea_is_hex_after_backslash_x_else_the_escape_format() -> None:
    """COPY writes bytea as \\x hex (bytea_output = hex) or in the escape format (= escape):
    escape-format text that looked like hex (``cafe``) was decoded as hex, two bytes where
    PostgreSQL held four, with exit 0 (a tryout found it)."""
    o = ConvertOptions(bytes_encoding="postgres-escape")
    t = SpannerType.parse("BYTES(MAX)")
    values = [
        "\\xcafe",
        "cafe",
        "0123",
        "0x1234",
        "a\\\\b",
        "\\000\\377\\101",
        "h\u00e9",
        "",
        "\\x",
        None,
    ]
    out, errors = convert_column(pa.array(values), t, o)
    assert errors == {}
    assert out.to_pylist() == [
        b"\xca\xfe",
        b"cafe",
        b"0123",
        b"0x1234",
        b"a\\b",
        b"\x00\xffA",
        "h\u00e9".encode(),
        b"",
        b"",
        None,
    ]
    bad = ["\\xcaf", "\\xzz", "\\x0x12", "a\\b", "\\400", "\\12", "end\\"]
    out, errors = convert_column(pa.array(bad), t, o)
    assert sorted(errors) == list(range(len(bad))) and out.null_count == len(bad)
    assert errors[0] == "not valid hex: '\\\\xcaf'"
    assert errors[3].startswith("not PostgreSQL's bytea: 'a\\\\b' (hex starts with \\x;")
    # arrays of bytea, as COPY writes them
    arr = SpannerType.parse("ARRAY<BYTES(MAX)>")
    out, errors = convert_column(
        pa.array(['{cafe,"\\\\xbeef",NULL}']),
        arr,
        ConvertOptions(bytes_encoding="postgres-escape", array_syntax="postgres"),
    )
    assert errors == {} and out.to_pylist() == [[b"cafe", b"\xbe\xef", None]]


def test_postgres_bytea_is_backslash_x_hex_and_nothing_else() -> None:
    """What --dialect postgres reads (COPY's default output): ``\\x`` then hex. Base64 text,
    which the escape format would take as its letters' bytes with exit 0 (an export with
    ``encode(b, 'base64')``, as Spanner's CSV import wants), is a reject that says how to read
    it; so is escape-format text."""
    o = ConvertOptions(bytes_encoding="postgres")
    t = SpannerType.parse("BYTES(MAX)")
    out, errors = convert_column(pa.array(["\\xcafe", "\\xCAFE", "\\x", None]), t, o)
    assert errors == {} and out.to_pylist() == [b"\xca\xfe", b"\xca\xfe", b"", None]
    bad = ["AAEC", "aGVsbG8=", "cafe", "a\\\\b", "\\xcaf", "0xcafe"]
    out, errors = convert_column(pa.array(bad), t, o)
    assert sorted(errors) == list(range(len(bad))) and out.null_count == len(bad)
    base64_hint = " (base64? read it with `bytes_encoding='base64'`)"
    either_hint = (
        " (COPY writes bytea as \\x then hex: a file of base64 text reads with "
        "`bytes_encoding='base64'`, one written with bytea_output = escape with "
        "`bytes_encoding='postgres-escape'`)"
    )
    assert errors[0] == "not valid PostgreSQL's bytea hex: 'AAEC'" + either_hint
    assert errors[1].endswith(base64_hint) and errors[2].endswith(either_hint)
    assert (
        errors[3].endswith(either_hint)
        and errors[4] == "not valid PostgreSQL's bytea hex: '\\\\xcaf'"
    )
    arr = SpannerType.parse("ARRAY<BYTES(MAX)>")
    out, errors = convert_column(
        pa.array(['{"\\\\xbeef",NULL}']),
        arr,
        ConvertOptions(bytes_encoding="postgres", array_syntax="postgres"),
    )
    assert errors == {} and out.to_pylist() == [[b"\xbe\xef", None]]


def test_the_end_of_9999_written_east_of_utc_as_year_10000_loads() -> None:
    """PostgreSQL writes an instant late on 9999-12-31 UTC, in a session east of UTC, in year
    10000 (a tryout: a valid value was rejected, with a hint to export again); what is still
    past 9999 after its offset is out of range, like any other such value."""
    texts = [
        "10000-01-01 00:59:59.999999+01",
        "10000-01-01 03:00:00+05:30",
        "10000-01-01T05:29:59Z",
        "10000-01-01 00:00:00+00",
        "10000-01-01 05:00:00-05",
        "10000-01-01",
    ]
    out, errors = convert_column(pa.array(texts), SpannerType.parse("TIMESTAMP"), OPTS)
    assert out.to_pylist()[:2] == [
        "9999-12-31T23:59:59.999999000Z",
        "9999-12-31T21:30:00.000000000Z",
    ]
    assert errors == {
        2: "TIMESTAMP out of range: '10000-01-01T05:29:59Z'",
        3: "TIMESTAMP out of range: '10000-01-01 00:00:00+00'",
        4: "TIMESTAMP out of range: '10000-01-01 05:00:00-05'",
        5: "not a TIMESTAMP: '10000-01-01'",
    }
    local = ConvertOptions(timezone="Asia/Kolkata")
    out, errors = convert_column(
        pa.array(["10000-01-01 05:29:59"]), SpannerType.parse("TIMESTAMP"), local
    )
    assert errors == {} and out.to_pylist() == ["9999-12-31T23:59:59.000000000Z"]


def test_hints_for_values_a_tryout_met() -> None:
    """A European decimal comma, PostgreSQL's NaN and text-format NULL, and a DATE read with
    `timestamp_format` given (which reads TIMESTAMP columns only) were each a bare reject."""
    cases = [
        ("FLOAT64", "3,14", "(a comma in a number: numbers are read with a decimal point"),
        ("NUMERIC", "-1,5", "(a comma in a number"),
        ("NUMERIC", "1.000,00", "(a comma in a number"),
        ("FLOAT64", "1,234.50", "(a comma in a number"),
        ("INT64", "1,234", "(a comma in a number"),
        ("NUMERIC", "-nan", "(PostgreSQL's NaN"),
        ("NUMERIC", "NaN", "(PostgreSQL's NaN, which no NUMERIC holds: export it as NULL"),
        ("NUMERIC", "Infinity", "(PostgreSQL's infinity, which no NUMERIC holds"),
        ("TIMESTAMP", "2024-01-01T00:00:00.1234567891Z", "(more than 9 fraction digits"),
        ("NUMERIC", "-Infinity", "(PostgreSQL's infinity, which no NUMERIC holds"),
        ("INT64", "\\N", "`dialect='postgres-text'`, or give `null_markers=['\\\\N']`)"),
    ]
    for type_text, value, hint in cases:
        _, errors = convert_column(pa.array([value]), SpannerType.parse(type_text), OPTS)
        assert hint in errors[0], errors
    pg_numeric = SpannerType("NUMERIC", postgres=True)  # NaN it holds, infinity not
    _, errors = convert_column(pa.array(["-inf"]), pg_numeric, OPTS)
    assert (
        "(PostgreSQL's infinity, which no NUMERIC holds: export it as NULL, or use float8)"
        in (errors[0])
    ), errors
    dated = ConvertOptions(timestamp_format="%d/%m/%Y")
    _, errors = convert_column(pa.array(["31/12/2024"]), SpannerType.parse("DATE"), dated)
    assert errors[0].endswith("; `timestamp_format` reads TIMESTAMP columns only)")


def test_dates_in_another_order_get_a_hint() -> None:
    """PostgreSQL's DateStyle SQL / German (and spreadsheets) write day and month first:
    every date was a bare "not a DATE" (a tryout)."""
    for type_text, tail in (("DATE", ")"), ("TIMESTAMP", ", or give `timestamp_format`)")):
        _, errors = convert_column(
            pa.array(["01/03/2024", "15.03.2024 07:30:00"]), SpannerType.parse(type_text), OPTS
        )
        for reason in errors.values():
            assert reason.endswith(
                " (not year-month-day: export dates as YYYY-MM-DD, as PostgreSQL does with "
                "DateStyle ISO" + tail
            ), reason


def test_a_timestamp_format_given_is_not_told_to_give_one() -> None:
    """A tryout: `--timestamp-format '%d/%m/%Y %H:%M:%S'` with `31/12/2024 23:59:59.5` was
    told "not year-month-day ... or give --timestamp-format": the fraction was the fault."""
    fmt = ConvertOptions(timestamp_format="%d/%m/%Y %H:%M:%S")
    _, errors = convert_column(
        pa.array(["31/12/2024 23:59:59.5", "31/12/2024 23:59:59", "12/31/2024 23:59:59"]),
        SpannerType.parse("TIMESTAMP"),
        fmt,
    )
    assert sorted(errors) == [0, 2]
    assert errors[0].endswith(
        "(fractional seconds, which `timestamp_format` cannot read: Arrow's strptime has no "
        "%f; export whole seconds, or the text as ISO 8601 and leave the format out)"
    )
    assert errors[2] == "not a TIMESTAMP in the format '%d/%m/%Y %H:%M:%S': '12/31/2024 23:59:59'"


def _pg_escape(data: bytes) -> str:
    """bytea as PostgreSQL's escape output writes it (bytea_output = escape)."""
    return "".join(
        "\\\\" if b == 0x5C else chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}" for b in data
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=6))
def test_postgres_bytea_round_trips_in_both_output_formats(values: list[bytes]) -> None:
    texts = [_pg_escape(v) for v in values] + ["\\x" + v.hex() for v in values]
    out, errors = convert_column(
        pa.array(texts),
        SpannerType.parse("BYTES(MAX)"),
        ConvertOptions(bytes_encoding="postgres-escape"),
    )
    assert errors == {} and out.to_pylist() == values + values
