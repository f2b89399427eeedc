"""Tests of loader.parse (+ convert end to end): dialect presets on realistic exports, column
mapping errors, a corpus of malformed inputs with their exact rejects, and a Hypothesis
round trip (typed values -> CSV text in each dialect -> parse + convert -> the same values)."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Optional

import pyarrow as pa
import pytest
from conftest import native_parts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_convert import EMPTY_HINT

from loader.convert import ConvertOptions, convert_block
from loader.errors import ConfigError, SchemaError, SourceError
from loader.parse import PRESETS, Dialect, dialect_from_preset, read_blocks
from loader.schema import Column, KeyPart, TableSchema
from loader.types import SpannerType


def _table(spec: str, not_null: tuple[str, ...] = ("Id",), **extra: Any) -> TableSchema:
    cols = []
    for part in spec.split(";"):
        name, type_text = part.strip().split(" ", 1)
        cols.append(Column(name, SpannerType.parse(type_text), nullable=name not in not_null))
    return TableSchema("T", tuple(cols), (KeyPart(cols[0].name),), **extra)


ORDERS = _table("Id INT64; Name STRING(8); Amount NUMERIC; At TIMESTAMP; Ok BOOL")
COMMA_HINT = (
    " (a comma in a number: numbers are read with a decimal point and no thousands separator, "
    "e.g. 3.14 or 1234)"
)
NAN_HINT = " (PostgreSQL's NaN, which no NUMERIC holds: export it as NULL, or use FLOAT64)"
UTF8_HINT = " (a file in another encoding, e.g. latin-1 or cp1252? set it with `encoding`)"


def load(
    data: bytes,
    table: TableSchema = ORDERS,
    dialect: Optional[Dialect] = None,
    block_size: int = 1 << 20,
    **kw: Any,
) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]], list[int], list[Optional[int]]]:
    """Rows, rejects as (line, record, column, reason, text), records and lines of the rows."""
    dialect = dialect or Dialect()
    opts = ConvertOptions.from_dialect(dialect)
    rows: list[dict[str, Any]] = []
    rejects: list[tuple[Any, ...]] = []
    records: list[int] = []
    lines: list[Optional[int]] = []
    for block in read_blocks(io.BytesIO(data), "src", table, dialect, block_size=block_size, **kw):
        rejects += [(r.line, r.record, r.column, r.reason, r.text) for r in block.rejects]
        out = convert_block(block, table, opts, "src")
        rejects += [(r.line, r.record, r.column, r.reason, r.text) for r in out.rejects]
        rows += out.table.to_pylist()
        records += out.record_numbers.to_pylist()
        lines += out.line_numbers.to_pylist() if out.line_numbers is not None else []
    rejects.sort(key=lambda r: r[1])
    return rows, rejects, records, lines


# -- presets on realistic samples --------------------------------------------------------------


def test_mysql_tab_dump() -> None:
    # mysqldump --tab / SELECT INTO OUTFILE: tab, \N NULL, backslash + real tab / newline.
    data = (
        b"1\tplain\t1.50\t2024-01-01 10:00:00\t1\n"
        b"2\t\\N\t\\N\t\\N\t\\N\n"
        b"3\ta\\\tb\t2\t2024-01-01 10:00:00.5\t0\n"
        b"4\tx\\\ny\t3\t2024-01-01 10:00:00\t1\n"
        b"5\t\\\\N\t4\t2024-01-01 10:00:00\t1\n"
        b"6\tc:\\\\d\\t\t5\t2024-01-01 10:00:00\t0\n"
        b"7\t\t6\t2024-01-01 10:00:00\t0\n"
        b"8\t\\0\\Z\\r\t7\t2024-01-01 10:00:00\t0\n"
    )
    rows, rejects, records, lines = load(data, dialect=dialect_from_preset("mysql"))
    assert rejects == []
    assert [r["Name"] for r in rows] == [
        "plain",
        None,
        "a\tb",
        "x\ny",
        "\\N",
        "c:\\d\t",
        "",
        "\0\x1a\r",
    ]
    assert rows[1] == {"Id": 2, "Name": None, "Amount": None, "At": None, "Ok": None}
    assert rows[2]["At"] == "2024-01-01T10:00:00.500000000Z"
    assert records == list(range(1, 9))
    assert lines == [1, 2, 3, 4, 6, 7, 8, 9]


def test_mysql_with_header_and_escaped_backslash_at_block_edges() -> None:
    body = b"".join(b"%d\tv\\\\\\\t%d\t1\t2024-01-01 00:00:00\t1\n" % (i, i) for i in range(1, 400))
    data = b"Id\tName\tAmount\tAt\tOk\n" + body
    rows, rejects, _, _ = load(
        data, dialect=dialect_from_preset("mysql", header=True), block_size=257
    )
    assert rejects == []
    assert len(rows) == 399
    assert all(r["Name"] == "v\\\t" + str(r["Id"]) for r in rows)


def test_mysql_private_use_characters_survive() -> None:
    # The private-use code points parse/escapes.py uses for MySQL escapes, in the data: alone, after an
    # escaped backslash, and escaped themselves (backslash + any other character = it).
    table = _table("Id INT64; Name STRING(MAX)")
    data = (
        "1\t\ue005\n"
        "2\ta\ue005t\ue005\\\\\n"
        "3\t\ue001\ue002\ue003\ue004\n"
        "4\t\\\\\ue001\\\\\ue005\n"
        "5\t\\\ue001\\\ue005\n"
    ).encode()
    rows, rejects, _, _ = load(data, table, dialect_from_preset("mysql"))
    assert rejects == []
    assert [r["Name"] for r in rows] == [
        "\ue005",
        "a\ue005t\ue005\\",
        "\ue001\ue002\ue003\ue004",
        "\\\ue001\\\ue005",
        "\ue001\ue005",
    ]


class _Trickle(io.BytesIO):
    """A source whose reads return a few bytes at a time, as a network stream may."""

    def read(self, size: Optional[int] = -1, /) -> bytes:
        return super().read(min(size if size and size > 0 else 1 << 30, 1 + self.tell() % 4))


def test_mysql_escapes_and_private_use_characters_across_short_reads() -> None:
    # Short reads put a marker's bytes and the backslashes before it on every side of an edge.
    table = _table("Id INT64; Name STRING(MAX)")
    names = ["a" * (i % 5) + "\ue005\\\ue002\t\ue006\n" + "\\" * (i % 3) for i in range(1, 200)]
    data = "".join(
        f"{i}\t" + n.replace("\\", "\\\\").replace("\t", "\\\t").replace("\n", "\\\n") + "\n"
        for i, n in enumerate(names, 1)
    ).encode()
    out: list[Any] = []
    for block in read_blocks(_Trickle(data), "src", table, dialect_from_preset("mysql")):
        assert block.rejects == []
        out += block.strings.column("Name").to_pylist()
    assert out == names


def test_postgres_copy_csv_empty_vs_quoted_empty() -> None:
    table = _table("Id INT64; Name STRING(MAX); Doc JSON; N INT64")
    data = b'1,,,\n2,"","""x""",5\n3,"a,b\nc","{""k"": 1}",\n'
    rows, rejects, records, lines = load(data, table, dialect_from_preset("postgres"))
    assert rejects == []
    assert rows == [
        {"Id": 1, "Name": None, "Doc": None, "N": None},
        {"Id": 2, "Name": "", "Doc": '"x"', "N": 5},
        {"Id": 3, "Name": "a,b\nc", "Doc": '{"k": 1}', "N": None},
    ]
    assert lines == [1, 2, 3]


def test_bigquery_extract() -> None:
    data = (
        b"Id,Name,Amount,At,Ok\n"
        b"1,alpha,1.5,2024-01-01 12:00:00 UTC,true\n"
        b"2,,,2024-01-01 12:00:00.123456 UTC,false\n"
        b'3,"q""uote",-2,,\n'
    )
    rows, rejects, _, _ = load(data, dialect=dialect_from_preset("bigquery"))
    assert rejects == []
    assert rows == [
        {
            "Id": 1,
            "Name": "alpha",
            "Amount": Decimal("1.5"),
            "At": "2024-01-01T12:00:00.000000000Z",
            "Ok": True,
        },
        {
            "Id": 2,
            "Name": None,
            "Amount": None,
            "At": "2024-01-01T12:00:00.123456000Z",
            "Ok": False,
        },
        {"Id": 3, "Name": 'q"uote', "Amount": Decimal("-2"), "At": None, "Ok": None},
    ]


def test_excel_bom_crlf() -> None:
    data = '\ufeffId,Name,Amount\r\n1,Müller,"1,5"\r\n2,"two\r\nlines",2\r\n3,x,3\r\n'.encode()
    table = _table("Id INT64; Name STRING(MAX); Amount STRING(MAX)")
    rows, rejects, records, lines = load(data, table, dialect_from_preset("excel"))
    assert rejects == []
    assert [r["Name"] for r in rows] == ["Müller", "two\r\nlines", "x"]
    assert lines == [2, 3, 5]
    assert records == [1, 2, 3]


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "utf-16"])
def test_other_encodings(encoding: str) -> None:
    text = "Id,Name\n1,Ærøskøbing\n2,café\n"
    table = _table("Id INT64; Name STRING(10)")
    rows, rejects, _, _ = load(
        text.encode(encoding), table, Dialect(encoding=encoding), block_size=64
    )
    assert rejects == []
    assert [r["Name"] for r in rows] == ["Ærøskøbing", "café"]


def test_cp1252_undefined_byte_rejects_its_row() -> None:
    data = b"Id,Name\n1,a\x81b\n2,ok\n"
    rows, rejects, _, _ = load(
        data, _table("Id INT64; Name STRING(10)"), Dialect(encoding="cp1252")
    )
    assert rows == [{"Id": 2, "Name": "ok"}]
    assert [(r[0], r[1], r[2], r[3]) for r in rejects] == [
        (2, 1, "Name", "invalid cp1252 in column Name")
    ]


def test_trailing_delimiter_detected_from_header() -> None:
    data = b"Id,Name,\n1,a,\n2,b,\n3,c,x\n"
    rows, rejects, _, _ = load(data, _table("Id INT64; Name STRING(10)"))
    assert rows == [{"Id": 1, "Name": "a"}, {"Id": 2, "Name": "b"}]
    assert rejects == [
        (4, 3, None, "expected 2 fields and a trailing delimiter, found 3 fields", "x")
    ]


def test_trailing_delimiter_without_header() -> None:
    d = Dialect(header=False, trailing_delimiter=True, columns=("Id", "Name"))
    rows, rejects, _, _ = load(b"1,a,\n2,b,\n", _table("Id INT64; Name STRING(10)"), d)
    assert rows == [{"Id": 1, "Name": "a"}, {"Id": 2, "Name": "b"}]


def test_skip_rows_and_custom_null_markers() -> None:
    d = Dialect(skip_rows=2, null_markers=("NULL", "-"), delimiter=";")
    data = b'report generated 2024\n\xffjunk\nId;Name\n1;NULL\n2;-\n3;\n4;"NULL"\n'
    rows, rejects, records, lines = load(data, _table("Id INT64; Name STRING(10)"), d)
    assert [r["Name"] for r in rows] == [None, None, "", "NULL"]
    assert lines == [4, 5, 6, 7]


def test_a_header_name_spelt_as_a_null_marker_is_still_its_name() -> None:
    """A tryout's --null-marker carriercode made the header's CarrierCode a NULL: "CSV
    column(s) not in table: ''"."""
    d = Dialect(null_markers=("name", "Id"), skip_rows=1)
    data = b'junk\n\xef\xbb\xbfId,"Name"\n1,name\n2,b\n'
    rows, rejects, _, _ = load(data, _table("Id INT64; Name STRING(10)"), d)
    assert rows == [{"Id": 1, "Name": None}, {"Id": 2, "Name": "b"}] and rejects == []


def test_a_quote_or_escape_that_is_the_delimiter_is_a_usage_error() -> None:
    """A tryout's --quote , loaded nothing and rejected rows for "not a JSON array"."""
    for kw in ({"quote_char": ","}, {"escape_char": ";", "delimiter": ";"}):
        with pytest.raises(ConfigError, match="and the delimiter are both"):
            Dialect(**kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="line end"):
        Dialect(delimiter="\n")
    with pytest.raises(ConfigError, match="`skip_rows` must be 0 or more, not -1"):
        Dialect(skip_rows=-1)


def test_mapping_ignore_and_case_insensitive_names() -> None:
    data = b"ID,full_name,junk\n1,a,zzz\n"
    rows, _, _, _ = load(
        data, _table("Id INT64; Name STRING(10)"), mapping={"full_name": "Name"}, ignore={"junk"}
    )
    assert rows == [{"Id": 1, "Name": "a"}]
    # the names given to mapping and ignore match the header's as loosely (a tryout: --map
    # Full_Name=Name said the CSV column is "not in the file")
    rows, _, _, _ = load(
        data, _table("Id INT64; Name STRING(10)"), mapping={"Full_Name": "Name"}, ignore={"JUNK"}
    )
    assert rows == [{"Id": 1, "Name": "a"}]


@pytest.mark.parametrize(
    "data,kw,error,match",
    [
        (b"Id,Nope\n1,2\n", {}, SchemaError, "CSV column\\(s\\) not in table T: 'Nope'"),
        (b"Id,G\n1,2\n", {}, SchemaError, "column G of table T is generated"),
        (b"Name\na\n", {}, SchemaError, "key column Id of table T is missing"),
        (b"Id\n1\n", {}, SchemaError, "NOT NULL column Must of table T is missing"),
        (b"Id,Name,NAME\n1,a,b\n", {}, SchemaError, "more than one CSV column writes"),
        (b"Id,Name\n1,a\n", {"mapping": {"X": "Name"}}, ConfigError, "'X'.*not in the file"),
        # #16 defect 16b: a mapped name the table lacks is the table's side, not the CSV's
        (
            b"Id,Name\n1,a\n",
            {"mapping": {"Name": "Zip"}},
            SchemaError,
            "^src: table T has no column 'Zip' \\(mapped from the CSV column 'Name'\\)$",
        ),
        (
            b"Id,Name,Nope\n1,a,b\n",
            {"mapping": {"Name": "Zip"}},
            SchemaError,
            "^src: table T has no column 'Zip' \\(mapped from the CSV column 'Name'\\)$",
        ),
    ],
)
def test_column_errors(data: bytes, kw: dict[str, Any], error: type, match: str) -> None:
    table = TableSchema(
        "T",
        (
            Column("Id", SpannerType.parse("INT64"), nullable=False),
            Column("Name", SpannerType.parse("STRING(10)")),
            Column("G", SpannerType.parse("INT64"), generated=True),
            Column(
                "Must",
                SpannerType.parse("INT64"),
                nullable=False,
                has_default=not data.startswith(b"Id\n"),
            ),
        ),
        (KeyPart("Id"),),
    )
    with pytest.raises(error, match=match) as info:
        load(data, table, **kw)
    if "not in table" in match or "has no column" in match:
        assert info.value.hint is not None and "Id, Name, G, Must" in info.value.hint


def test_a_snake_case_header_s_hint_pairs_its_names_with_the_table_s() -> None:
    """A tryout's PostgreSQL export (in_stock) against CamelCase tables (InStock): the hint
    said "map or ignore the others" without the pairs."""
    table = _table("Id INT64; InStock BOOL; UnitPrice FLOAT64; Name STRING(10)")
    with pytest.raises(SchemaError) as info:
        load(b"id,in_stock,unit-price,name,junk\n1,true,2,a,x\n", table)
    assert info.value.hint is not None
    assert info.value.hint.endswith(
        "give `map='in_stock=InStock'` `map='unit-price=UnitPrice'`, and `map` for the "
        "others, or leave a column out with `ignore`"
    ), info.value.hint


def test_a_misspelt_header_name_s_hint_names_the_column_it_likely_means() -> None:
    """A tryout's header typo (Nmae for Name) got the table's columns and "map or ignore the
    others": the column it likely means is named, and the map that loads it."""
    table = _table("Id INT64; Name STRING(10); CustomerId INT64")
    with pytest.raises(SchemaError) as info:
        load(b"Id,Nmae,CustmerId\n1,a,2\n", table)
    assert str(info.value.hint).endswith(
        "give `map='Nmae=Name'` `map='CustmerId=CustomerId'`, or leave a column out with "
        "`ignore`"  # (a close name may still be another column's: a review)
    ), info.value.hint
    with pytest.raises(SchemaError) as info:  # nothing alike: how to map or leave it out
        load(b"Id,Name,CustomerId,Zzz\n1,a,2,3\n", table)
    assert str(info.value.hint).endswith(
        "load each into a column with `map` CSV_COLUMN=TABLE_COLUMN, or leave it out with `ignore`"
    ), info.value.hint


def test_a_misspelt_name_of_columns_is_fixed_there() -> None:
    """Names given by position (a file without a header) are the options' own: the hint
    points at them, not at a mapping."""
    table = _table("Id INT64; Name STRING(10)")
    dialect = Dialect(header=False, columns=("Id", "Nmae"))
    with pytest.raises(SchemaError) as info:
        load(b"1,a\n", table, dialect)
    assert str(info.value.hint).endswith(
        "name each field after its column in `columns` (Nmae: Name?), or leave a field out "
        "with `ignore`"
    ), info.value.hint


def test_generated_column_can_be_ignored() -> None:
    table = TableSchema(
        "T",
        (
            Column("Id", SpannerType.parse("INT64")),
            Column("G", SpannerType.parse("INT64"), generated=True),
        ),
        (KeyPart("Id"),),
    )
    rows, _, _, _ = load(b"Id,G\n1,2\n", table, ignore={"G"})
    assert rows == [{"Id": 1}]


def test_presets_and_overrides() -> None:
    assert set(PRESETS) >= {"mysql", "postgres", "bigquery", "excel"}
    assert dialect_from_preset("postgres", header=True).header
    with pytest.raises(ConfigError, match="unknown CSV dialect"):
        dialect_from_preset("oracle")
    with pytest.raises(ConfigError, match="bad dialect option"):
        dialect_from_preset("csv", colour="red")
    with pytest.raises(ConfigError, match="unknown encoding"):
        Dialect(encoding="klingon")
    assert Dialect().with_columns(("a",)).columns == ("a",)


def test_record_numbers_exact_across_blocks_with_bad_rows() -> None:
    lines = [b"Id,Name"]
    for i in range(1, 3000):
        lines.append(b"%d" % i if i % 97 == 0 else b"%d,n%d" % (i, i))
    rows, rejects, records, line_nos = load(
        b"\n".join(lines) + b"\n", _table("Id INT64; Name STRING(10)"), block_size=1000
    )
    assert [r["Id"] for r in rows] == records
    assert line_nos == [r + 1 for r in records]
    assert [r[1] for r in rejects] == list(range(97, 3000, 97))
    assert all(r[0] == r[1] + 1 and r[3] == "expected 2 fields, found 1" for r in rejects)


# -- the malformed corpus ----------------------------------------------------------------------

H = b"Id,Name,Amount,At,Ok\n"
GOOD = b"1,a,1,2024-01-01T00:00:00Z,true\n"
MYSQL = dialect_from_preset("mysql")

# (id, data, dialect, expected rejects as (line, record, column, reason))
CORPUS: list[tuple[str, bytes, Optional[Dialect], list[tuple[Any, ...]]]] = [
    ("too-few-fields", H + b"1,a\n", None, [(2, 1, None, "expected 5 fields, found 2")]),
    ("too-many-fields", H + b"1,a,1,,true,9\n", None, [(2, 1, None, "expected 5 fields, found 6")]),
    ("one-field", H + GOOD + b"oops\n", None, [(3, 2, None, "expected 5 fields, found 1")]),
    ("int-letters", H + b"x1,a,1,,\n", None, [(2, 1, "Id", "not an INT64: 'x1'")]),
    ("int-float", H + b"1.5,a,1,,\n", None, [(2, 1, "Id", "not an INT64: '1.5'")]),
    (
        "int-space",
        H + b" 1,a,1,,\n",
        None,
        [(2, 1, "Id", "not an INT64: ' 1' (spaces are not allowed)")],
    ),
    (
        "int-overflow",
        H + b"99999999999999999999,a,1,,\n",
        None,
        [(2, 1, "Id", "INT64 out of range: '99999999999999999999'")],
    ),
    ("null-key", H + b",a,1,,\n", None, [(2, 1, "Id", "NULL in NOT NULL column Id")]),
    (
        "name-too-long",
        H + b"1,abcdefghi,1,,\n",
        None,
        [(2, 1, "Name", "STRING(8) too long: 9 characters")],
    ),
    (
        "name-long-multibyte",
        H + "1,ääääääääö,1,,\n".encode(),
        None,
        [(2, 1, "Name", "STRING(8) too long: 9 characters")],
    ),
    ("numeric-two-dots", H + b"1,a,1.2.3,,\n", None, [(2, 1, "Amount", "not a NUMERIC: '1.2.3'")]),
    (
        "numeric-round",
        H + b"1,a,0.1234567891,,\n",
        None,
        [(2, 1, "Amount", "NUMERIC would round: '0.1234567891' has more than 9 fraction digits")],
    ),
    (
        "numeric-big",
        H + b"1,a,1" + b"0" * 29 + b",,\n",
        None,
        [
            (
                2,
                1,
                "Amount",
                "NUMERIC out of range: '1" + "0" * 29 + "' has more than 29 integer digits",
            )
        ],
    ),
    (
        "numeric-comma",
        H + b'1,a,"1,5",,\n',
        None,
        [(2, 1, "Amount", "not a NUMERIC: '1,5'" + COMMA_HINT)],
    ),
    (
        "numeric-nan",
        H + b"1,a,NaN,,\n",
        None,
        [(2, 1, "Amount", "not a NUMERIC: 'NaN'" + NAN_HINT)],
    ),
    (
        "ts-date-only",
        H + b"1,a,1,2024-01-01,\n",
        None,
        [(2, 1, "At", "not a TIMESTAMP: '2024-01-01'")],
    ),
    (
        "ts-feb-30",
        H + b"1,a,1,2024-02-30 00:00:00,\n",
        None,
        [(2, 1, "At", "not a TIMESTAMP: '2024-02-30 00:00:00'")],
    ),
    (
        "ts-hour-24",
        H + b"1,a,1,2024-01-01T24:00:00Z,\n",
        None,
        [(2, 1, "At", "not a TIMESTAMP: '2024-01-01T24:00:00Z'")],
    ),
    (
        "ts-leap-second",
        H + b"1,a,1,2016-12-31T23:59:60Z,\n",
        None,
        [(2, 1, "At", "not a TIMESTAMP: '2016-12-31T23:59:60Z'")],
    ),
    (
        "ts-10-fraction-digits",
        H + b"1,a,1,2024-01-01T00:00:00.0000000001Z,\n",
        None,
        [
            (
                2,
                1,
                "At",
                "not a TIMESTAMP: '2024-01-01T00:00:00.0000000001Z' (more than 9 fraction "
                "digits: a TIMESTAMP keeps nanoseconds)",
            )
        ],
    ),
    (
        "ts-bad-offset",
        H + b"1,a,1,2024-01-01T00:00:00+25:00,\n",
        None,
        [(2, 1, "At", "not a TIMESTAMP: '2024-01-01T00:00:00+25:00'")],
    ),
    (
        "ts-epoch-number",
        H + b"1,a,1,1704067200,\n",
        None,
        [(2, 1, "At", "not a TIMESTAMP: '1704067200'")],
    ),
    (
        "ts-before-year-1",
        H + b"1,a,1,0001-01-01T00:30:00+01:00,\n",
        None,
        [(2, 1, "At", "TIMESTAMP out of range: '0001-01-01T00:30:00+01:00'")],
    ),
    (
        "ts-after-9999",
        H + b"1,a,1,9999-12-31T23:30:00-01:00,\n",
        None,
        [(2, 1, "At", "TIMESTAMP out of range: '9999-12-31T23:30:00-01:00'")],
    ),
    ("bool-maybe", H + b"1,a,1,,maybe\n", None, [(2, 1, "Ok", "not a BOOL: 'maybe'")]),
    ("bool-quoted-empty", H + b'1,a,1,,""\n', None, [(2, 1, "Ok", "not a BOOL: ''" + EMPTY_HINT)]),
    (
        "invalid-utf8",
        H + b"1,a\xc3(,1,,\n",
        None,
        [(2, 1, "Name", "invalid UTF-8 in column Name" + UTF8_HINT)],
    ),
    (
        "invalid-utf8-truncated",
        H + b"1,\xe2\x82,1,,\n",
        None,
        [(2, 1, "Name", "invalid UTF-8 in column Name" + UTF8_HINT)],
    ),
    ("invalid-utf8-in-ignored-col-ok", H + b"1,a,1,,true\n", None, []),
    (
        "two-bad-values-one-reject",
        H + b"x,abcdefghijk,1,,\n",
        None,
        [(2, 1, "Id", "not an INT64: 'x'")],
    ),
    (
        "bad-after-multiline",
        H + b'1,"a\nb",1,,\n2,b,x,,\n',
        None,
        [(4, 2, "Amount", "not a NUMERIC: 'x'")],
    ),
    (
        "bad-row-after-bad-row",
        H + b"1\n2,a,1,,\n3\n",
        None,
        [(2, 1, None, "expected 5 fields, found 1"), (4, 3, None, "expected 5 fields, found 1")],
    ),
    ("quote-in-unquoted", H + b'1,a"b,1,,\n', None, []),
    (
        "mysql-too-few",
        b"1\ta\n",
        MYSQL,
        [
            (
                1,
                1,
                None,
                "expected 5 fields, found 2",
            )
        ],
    ),
    (
        "mysql-too-few-later",
        b"1\ta\t1\t\\N\t\\N\n1\ta\n",
        MYSQL,
        [(2, 2, None, "expected 5 fields, found 2")],
    ),
    ("mysql-bad-int", b"x\ta\t1\t\\N\t\\N\n", MYSQL, [(1, 1, "Id", "not an INT64: 'x'")]),
    (
        "mysql-null-key",
        b"\\N\ta\t1\t\\N\t\\N\n",
        MYSQL,
        [(1, 1, "Id", "NULL in NOT NULL column Id")],
    ),
    (
        "mysql-escaped-newline-line-count",
        b"1\ta\\\nb\t1\t\\N\t\\N\n2\tb\tx\t\\N\t\\N\n",
        MYSQL,
        [(3, 2, "Amount", "not a NUMERIC: 'x'")],
    ),
    ("mysql-empty-bool", b"1\ta\t1\t\\N\t\n", MYSQL, [(1, 1, "Ok", "not a BOOL: ''" + EMPTY_HINT)]),
    (
        "crlf-bad",
        H.replace(b"\n", b"\r\n") + b"1,a,zz,,\r\n",
        None,
        [(2, 1, "Amount", "not a NUMERIC: 'zz'")],
    ),
    (
        "skip-rows-line",
        b"# comment\n" + H + b"1,a,zz,,\n",
        Dialect(skip_rows=1),
        [(3, 1, "Amount", "not a NUMERIC: 'zz'")],
    ),
    (
        "semicolon-wrong-delim",
        b"Id;Name;Amount;At;Ok\n1,a;b;1;;\n",
        Dialect(delimiter=";"),
        [(2, 1, "Id", "not an INT64: '1,a'")],
    ),
    (
        "tz-gap",
        H + b"1,a,1,2024-03-31 02:30:00,\n",
        Dialect(timezone="Europe/Berlin"),
        [
            (
                2,
                1,
                "At",
                "TIMESTAMP '2024-03-31 02:30:00' does not exist in Europe/Berlin "
                "(skipped by a daylight saving change)",
            )
        ],
    ),
    (
        "format-mismatch",
        H + b"1,a,1,2024-01-01T00:00:00Z,\n",
        Dialect(timestamp_format="%d.%m.%Y %H:%M:%S"),
        [(2, 1, "At", "not a TIMESTAMP in the format '%d.%m.%Y %H:%M:%S': '2024-01-01T00:00:00Z'")],
    ),
    (
        "custom-bool-words",
        H + b"1,a,1,,true\n",
        Dialect(true_words=("ja",), false_words=("nein",)),
        [(2, 1, "Ok", "not a BOOL: 'true'")],
    ),
]


@pytest.mark.parametrize("name,data,dialect,expected", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_corpus(
    name: str, data: bytes, dialect: Optional[Dialect], expected: list[tuple[Any, ...]]
) -> None:
    rows, rejects, records, _ = load(data, dialect=dialect)
    assert [r[:4] for r in rejects] == expected
    n_records = len(rows) + len(rejects)
    assert sorted(records + [r[1] for r in rejects]) == list(range(1, n_records + 1))


def test_corpus_size() -> None:
    assert len(CORPUS) >= 40


def test_reject_text_is_field_or_row() -> None:
    _, rejects, _, _ = load(H + b"1,a\n2,b,zz,,\n")
    assert rejects[0][4] == "1,a"
    assert rejects[1][4] == "zz"


# -- Hypothesis round trip ---------------------------------------------------------------------

RT_TABLE = _table(
    "Id INT64; S STRING(MAX); N NUMERIC; F FLOAT64; B BOOL; D DATE; T TIMESTAMP; Y BYTES(MAX)"
)

text_values = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
    max_size=12,
)
numerics = st.decimals(
    min_value=Decimal("-1e20"), max_value=Decimal("1e20"), places=9, allow_nan=False
)
timestamps = st.tuples(
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    st.integers(0, 999_999_999),
)


def _opt(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), s)


rows_strategy = st.lists(
    st.tuples(
        _opt(text_values),
        _opt(numerics),
        _opt(st.floats(allow_nan=False, width=64)),
        _opt(st.booleans()),
        _opt(st.dates(min_value=dt.date(1, 1, 1))),
        _opt(timestamps),
        _opt(st.binary(max_size=8)),
    ),
    max_size=30,
)


def _ts_text(v: tuple[dt.datetime, int], style: int) -> str:
    d, nanos = v
    base = f"{d.year:04d}-{d:%m-%d}T{d:%H:%M:%S}.{nanos:09d}"
    if style == 0:
        return base + "Z"
    if style == 1:
        return base.replace("T", " ") + " UTC"
    return base + "+00:00"


def _expected_ts(v: tuple[dt.datetime, int]) -> str:
    d, nanos = v
    return f"{d.year:04d}-{d:%m-%d}T{d:%H:%M:%S}.{nanos:09d}Z"


def _render(rows: list[tuple[Any, ...]], preset: str) -> tuple[bytes, Dialect]:
    """Write rows the way the exporter behind each preset would."""
    mysql = preset == "mysql"
    fields_rows = []
    for i, (s, n, f, b, d, t, y) in enumerate(rows):
        vals = [
            str(i),
            s,
            None if n is None else str(n),
            None if f is None else repr(f),
            None if b is None else (("1" if b else "0") if mysql else "true" if b else "false"),
            None if d is None else f"{d.year:04d}-{d:%m-%d}",
            None if t is None else _ts_text(t, i % 3),
            None
            if y is None
            else "\\x" + y.hex()  # bytea's output; the postgres preset reads hex
            if preset == "postgres"
            else base64.b64encode(y).decode(),
        ]
        fields_rows.append(vals)
    names = ["Id", "S", "N", "F", "B", "D", "T", "Y"]
    if mysql:

        def esc(v: Optional[str]) -> str:
            if v is None:
                return "\\N"
            return v.replace("\\", "\\\\").replace("\t", "\\\t").replace("\n", "\\\n")

        text = "".join("\t".join(esc(v) for v in r) + "\n" for r in fields_rows)
        return text.encode(), dialect_from_preset("mysql")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n" if preset == "excel" else "\n")
    if preset != "postgres":
        w.writerow(names)
    for r in fields_rows:
        # Exporters quote empty strings so that they differ from NULL (written unquoted, empty).
        w.writerow(["" if v is None else v for v in r]) if all(v != "" for v in r) else out.write(
            ",".join("" if v is None else '"' + v.replace('"', '""') + '"' for v in r)
            + ("\r\n" if preset == "excel" else "\n")
        )
    data = out.getvalue().encode()
    if preset == "excel":
        data = b"\xef\xbb\xbf" + data
    return data, dialect_from_preset(preset)


@pytest.mark.parametrize("preset", ["mysql", "postgres", "bigquery", "excel"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows_strategy)
def test_round_trip(preset: str, rows: list[tuple[Any, ...]]) -> None:
    # Values that csv.writer would leave unquoted but a reader treats specially are quoted by
    # the "empty string" branch above; NULL is always an unquoted empty field (or \N).
    data, dialect = _render(rows, preset)
    got, rejects, records, _ = load(data, RT_TABLE, dialect, block_size=4096)
    assert rejects == []
    assert records == list(range(1, len(rows) + 1))
    expected = [
        {
            "Id": i,
            "S": s,
            "N": n,
            "F": f,
            "B": b,
            "D": d,
            "T": None if t is None else _expected_ts(t),
            "Y": y,
        }
        for i, (s, n, f, b, d, t, y) in enumerate(rows)
    ]
    for g, e in zip(got, expected):
        if e["N"] is not None:
            assert g["N"] == e["N"]
            g["N"] = e["N"]
    assert got == expected


def test_transcoder_never_ends_a_read_on_cr_before_more_data() -> None:
    """A read ending between \\r and \\n makes pyarrow drop the \\n of a quoted CRLF
    (apache/arrow#51368); the transcoding reader (non-UTF-8, MySQL escapes) holds it back."""
    import io

    from loader.parse import Dialect
    from loader.parse.stream import _Transcoder

    text = 'a,b\r\n1,"x\r\ny"\r\n2,"\r\n"\r\n'.encode("latin-1")
    for size in range(2, len(text) + 1):
        t = _Transcoder(io.BytesIO(text), "latin-1", Dialect(encoding="latin-1"))
        chunks = []
        while True:
            c = t.read(size)
            if not c:
                break
            chunks.append(c)
        assert b"".join(chunks) == text
        assert all(not c.endswith(b"\r") for c in chunks[:-1]), size


# -- readahead -----------------------------------------------------------------------------------


class _CountingStream(io.BytesIO):
    reads = 0

    def read(self, n: int | None = -1) -> bytes:
        self.reads += 1
        return super().read(n)


def test_reader_reads_at_most_a_few_blocks_ahead() -> None:
    """Arrow's CSV reader would queue up to 32 blocks; the gate keeps it within the window."""
    import time

    from loader.parse import READAHEAD_BLOCKS

    row = b"1,abcdefgh,1.5,2024-01-01T00:00:00Z,true\n"
    data = b"Id,Name,Amount,At,Ok\n" + row * 20_000  # ~800 KB: ~200 blocks of 4 KiB
    stream = _CountingStream(data)
    ahead = []
    blocks = 0
    for block in read_blocks(stream, "src", ORDERS, Dialect(header=True), block_size=4096):
        blocks += 1
        time.sleep(0.002)  # a busy consumer: give the reader thread time to run ahead
        ahead.append(stream.reads - blocks)
        assert block.strings.num_rows
    assert blocks > 100
    assert max(ahead) <= READAHEAD_BLOCKS + 1 <= 4, ahead


def test_blocks_without_rows_do_not_stall_the_reader() -> None:
    """Blank lines filling whole blocks: blocks that give no rows still move the gate on."""
    data = b"Id,Name,Amount,At,Ok\n1,x,1,,\n" + b"\n" * 50_000 + b"7,x,1,,\n"
    rows, rejects, records, _ = load(data, dialect=Dialect(header=True), block_size=4096)
    assert [r["Id"] for r in rows] == [1, 7]
    assert records == [1, 2]
    assert rejects == []


def test_row_larger_than_the_block_is_a_clear_error() -> None:
    data = b"Id,Name,Amount,At,Ok\n1,x,1,,\n2," + b"y" * 10_000 + b",1,,\n"
    with pytest.raises(
        SourceError, match="record 2 \\(line 3\\) does not fit in a parse block"
    ) as e:
        load(
            data,
            table=_table("Id INT64; Name STRING(MAX); Amount NUMERIC; At TIMESTAMP; Ok BOOL"),
            dialect=Dialect(header=True),
            block_size=4096,
        )
    assert "`block_size`" in (e.value.hint or "")


def test_the_package_releases_the_readers_its_modules_opened() -> None:
    """``loader.parse`` is a package: ``release_readers`` on it (what the CLI calls, found in
    ``sys.modules``) releases the readers opened by read_blocks in its modules."""
    import sys

    from loader.parse import gate

    row = b"1,abcdefgh,1.5,2024-01-01T00:00:00Z,true\n"
    it = read_blocks(
        io.BytesIO(b"Id,Name,Amount,At,Ok\n" + row * 5_000),
        "src",
        ORDERS,
        Dialect(),
        block_size=4096,
    )
    next(it)
    open_gates = [g for g in gate._LIVE_GATES if g.reader is not None]
    assert open_gates
    sys.modules["loader.parse"].release_readers()
    assert all(g.closed and g.reader is None for g in open_gates)
    it.close()


@pytest.fixture(params=["numpy", "native"])
def scan_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """The newline scan's compiled search and its numpy one."""
    yield from native_parts(request.param)


@pytest.mark.parametrize("marker", [b"\n", b"\xee"])
@pytest.mark.parametrize("at", [0, 63, 64, 127, (1 << 16) - 1, 1 << 16, 3 * (1 << 16) + 5, -1])
def test_the_newline_scan_finds_a_marker_anywhere_in_the_column(
    marker: bytes, at: int, scan_path: str
) -> None:
    from loader.parse.blocks import _SCAN_STEP, _may_contain_newline

    size = 3 * _SCAN_STEP + 100
    data = bytearray(b"x" * size)
    data[at] = marker[0]
    values = [bytes(data[i : i + 100]) for i in range(0, size, 100)]
    col = pa.array(values, pa.binary())
    assert _may_contain_newline(col)
    assert not _may_contain_newline(pa.array([v.replace(marker, b"x") for v in values]))
    # a slice sees only its own values' bytes
    hit = (at % size) // 100
    if hit + 1 < len(values):
        assert not _may_contain_newline(col.slice(hit + 1))
    assert _may_contain_newline(col.slice(hit, 1))
    assert not _may_contain_newline(pa.array([], pa.binary()))
    assert not _may_contain_newline(pa.array([None, b""], pa.binary()))


def _utf8_ok(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@st.composite
def _cut_text(draw: Any) -> list[Optional[bytes]]:
    """Valid UTF-8 text (sometimes with a bad byte) cut into values at any byte, so values
    can end and start inside a character, with NULLs between."""
    text = draw(st.text(alphabet="aé😀\u0800", max_size=12)).encode()
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        bad = draw(st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\x80"]))
        text = text[:at] + bad + text[at:]
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    values: list[Optional[bytes]] = []
    for a, b in zip([0, *cuts], [*cuts, len(text)]):
        values.append(text[a:b])
        if draw(st.booleans()):
            values.append(None)
    return values


@settings(max_examples=400, deadline=None)
@given(_cut_text(), st.integers(0, 3))
def test_whole_column_utf8_check_agrees_with_each_value(
    values: list[Optional[bytes]], skip: int
) -> None:
    from loader.parse.blocks import _all_utf8

    skip = min(skip, len(values))
    col = pa.array(values, pa.binary()).slice(skip)
    expected = all(_utf8_ok(v) for v in values[skip:] if v is not None)
    assert _all_utf8(col) == expected


def test_whole_column_utf8_check_wants_int32_offsets() -> None:
    from loader.parse.blocks import _all_utf8

    with pytest.raises(TypeError, match="int32 offsets"):
        _all_utf8(pa.array([b"a"], pa.large_binary()))


# -- the end of the input --------------------------------------------------------------------

K = _table("Id INT64; V STRING(MAX)")
OPEN_QUOTE = "a quote opened in this record is never closed"


@pytest.mark.parametrize(
    "data,dialect,rows,rejected",
    [
        (b'Id,V\n1,a\n2,"b""\n', None, [1], [(3, 2)]),
        (b'Id,V\n1,"abc', None, [], [(2, 1)]),
        (b'Id,V\n1,"', None, [], [(2, 1)]),
        (b'Id,V\n1,"a\\"b', Dialect(escape_char="\\"), [], [(2, 1)]),
        # closed quotes at the end of the input are fine
        (b'Id,V\n1,""', None, [1], []),
        (b'Id,V\n1,"x"""', None, [1], []),
        (b'Id,V\n1,"x"\n', None, [1], []),
        (b'Id,V\n1,a"b\n', None, [1], []),
        (b'Id,V\n1,"a\\"b"', Dialect(escape_char="\\"), [1], []),
    ],
)
def test_a_quote_never_closed_rejects_its_record(
    data: bytes, dialect: Optional[Dialect], rows: list[int], rejected: list[tuple[int, int]]
) -> None:
    got, rejects, _, _ = load(data, table=K, dialect=dialect)
    assert [r["Id"] for r in got] == rows
    assert [(r[0], r[1]) for r in rejects] == rejected
    assert all(r[3].startswith(OPEN_QUOTE) for r in rejects)


@pytest.mark.parametrize(
    "data,where,lines",
    [
        # #16's reproduction: the open quote would swallow lines 3 to 5 (once one reject)
        (b'Id,V\n1,a\n2,"b\n3,c\n4,d\n5,e\n', "line 3", 4),
        (b'Id,V\n1,"a,b\r\n2,c', "line 2", 2),
        # a CR alone ends a line: a tryout's CR-only file lost rows 3 to 5 into one reject
        (b'Id,V\r1,a\r2,"a\r3,b\r4,c\r5,d\r', "line 3", 4),
    ],
)
def test_a_quote_never_closed_that_swallows_lines_refuses_the_source(
    data: bytes, where: str, lines: int
) -> None:
    """A tryout: a stray quote at line 102 of 50,000 rows read the rest of the file into one
    field; the load rejected one row, wrote 100 (exit 3 under --max-bad-rows) and verify
    agreed. The lines after the quote may be rows: the source is refused, at that line."""
    with pytest.raises(SourceError) as e:
        load(data, table=K)
    assert f"src: a quote opened at {where} is never closed, so its {lines} lines" in str(e.value)
    assert "close the quote" in str(e.value.hint)


def test_a_quote_never_closed_in_the_last_of_many_blocks_and_short_reads() -> None:
    body = b"".join(b"%d,v%d\n" % (i, i) for i in range(1, 3001))
    data = b"Id,V\n" + body + b'3001,"open\n'

    class Trickle(io.BytesIO):
        def read(self, n: int = -1) -> bytes:  # a pipe: short reads
            return super().read(min(n, 777) if n >= 0 else 777)

    for stream in (io.BytesIO(data), Trickle(data)):
        records, rejects = 0, []
        for block in read_blocks(stream, "src", K, Dialect(), block_size=4096):
            records += block.strings.num_rows
            rejects += block.rejects
        assert records == 3000
        assert [(r.line, r.record) for r in rejects] == [(3002, 3001)]
        assert rejects[0].reason.startswith(OPEN_QUOTE)


@pytest.mark.parametrize("data", [b"Id,V", b"Id,V\n", b"Id,V\r\n"])
def test_a_header_alone_is_no_rows_with_or_without_a_line_end(data: bytes) -> None:
    assert load(data, table=K) == ([], [], [], [])


def test_a_last_line_without_a_line_end_is_read() -> None:
    rows, rejects, _, lines = load(b"Id,V\n1,a\n2,b", table=K)
    assert [r["V"] for r in rows] == ["a", "b"] and lines == [2, 3] and rejects == []


def test_a_header_wider_than_the_reader_takes_is_a_clear_error() -> None:
    from loader.parse import MAX_CSV_COLUMNS

    header = ",".join(f"c{i}" for i in range(MAX_CSV_COLUMNS + 5)).encode() + b"\n"
    with pytest.raises(SchemaError, match="the header has 4,101 columns") as e:
        load(header + b"1\n", table=K)
    assert "`delimiter`" in (e.value.hint or "")


# -- #16 defect 16c: a record larger than the parse block is named by record and line --------


@pytest.mark.parametrize(
    "data,dialect,where",
    [
        # the reproduction, scaled to a 4 KiB block: record 2 is the big one, on line 3
        (b'Id,V\n1,a\n2,"' + b"x" * 10_000 + b'"\n3,b\n', Dialect(), "record 2 (line 3)"),
        # right after the header
        (b'Id,V\n1,"' + b"x" * 10_000 + b'"\n2,b\n', Dialect(), "record 1 (line 2)"),
        # after skipped lines and a record that spans two lines
        (
            b'# a\n# b\nId,V\n1,"a\nb"\n2,"' + b"x" * 10_000 + b'"\n',
            Dialect(skip_rows=2),
            "record 2 (line 6)",
        ),
        # the first record of a file without a header
        (
            b"# a\n1," + b"x" * 10_000 + b"\n2,b\n",
            Dialect(header=False, skip_rows=1),
            "record 1 (line 2)",
        ),
        # after a record with the wrong field count, not yet handed on when the error comes
        (b"Id,V\n1,a\n2,b,c\n3," + b"x" * 10_000 + b"\n", Dialect(), "record 3 (line 4)"),
    ],
)
def test_a_record_larger_than_the_block_is_named_by_record_and_line(
    data: bytes, dialect: Dialect, where: str
) -> None:
    with pytest.raises(SourceError) as e:
        load(data, table=K, dialect=dialect, block_size=4096)
    assert e.value.message == f"src: {where} does not fit in a parse block of 4 KiB"
    assert e.value.hint is not None
    assert "`block_size`" in e.value.hint and "quot" in e.value.hint


# -- empty inputs: skipped with a note, header expected or not ---------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"\n", b"\r\n", b"\r", b"\n\n\r\n\r", b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n\r\n"],
)
@pytest.mark.parametrize("header", [True, False])
def test_an_input_of_nothing_but_a_bom_and_line_ends_is_empty(data: bytes, header: bool) -> None:
    """Was "src: empty file, expected a header" (exit 2) for all but the 0-byte file, which
    the source expansion skips with a note before it is parsed: one rule now, a note and no
    rows, wherever the input comes from (tests/test_cli_fixes.py runs the CLI's)."""
    notes: list[str] = []
    dialect = Dialect(header=header)
    assert load(data, table=K, dialect=dialect, on_note=notes.append) == ([], [], [], [])
    assert notes == ["src: skipped an empty file"]


@pytest.mark.parametrize("data", [b"Id,V\n", b"Id,V", b"\xef\xbb\xbfId,V\r\n", b"\nId,V\n\n"])
def test_a_header_without_records_is_not_empty_and_gives_no_rows(data: bytes) -> None:
    notes: list[str] = []
    assert load(data, table=K, on_note=notes.append) == ([], [], [], [])
    assert notes == []


def test_blank_lines_then_a_record_are_not_an_empty_input() -> None:
    notes: list[str] = []
    rows, _, _, _ = load(b"\xef\xbb\xbf\n\nId,V\n1,a\n", table=K, on_note=notes.append)
    assert [r["Id"] for r in rows] == [1] and notes == []
    rows, _, _, _ = load(b"\n\n1,a\n", table=K, dialect=Dialect(header=False))
    assert [r["Id"] for r in rows] == [1]


# -- #16 defect 16d: --skip-rows past the end of the input is an empty input ----------------


@pytest.mark.parametrize(
    "data,skip",
    [
        (b"Id,V\n1,a\n2,b\n", 50),
        (b"Id,V\n1,a\n2,b", 50),  # no line end at the end
        (b"Id,V\n1,a\n2,b\n", 3),  # exactly the lines there are
        (b"Id,V\r\n1,a\r\n2,b\r\n", 4),
        (b"Id,V\r1,a\r2,b\r", 3),
    ],
)
@pytest.mark.parametrize("header", [True, False])
def test_skip_rows_past_the_end_is_an_empty_input_with_a_note(
    data: bytes, skip: int, header: bool
) -> None:
    notes: list[str] = []
    dialect = Dialect(skip_rows=skip, header=header)
    assert load(data, table=K, dialect=dialect, on_note=notes.append) == ([], [], [], [])
    lines = 3
    assert notes == [f"src: skipped: its {lines} lines are all within `skip_rows={skip}`"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_skip_rows_are_lines_and_keep_line_numbers_exact(eol: bytes) -> None:
    data = eol.join([b"# one", b'# two, with "a quote', b"Id,V", b"1,a", b"x,b", b"3,c", b""])
    notes: list[str] = []
    rows, rejects, records, lines = load(
        data, table=K, dialect=Dialect(skip_rows=2), on_note=notes.append
    )
    assert [r["Id"] for r in rows] == [1, 3] and records == [1, 3]
    if eol != b"\r":  # CR-only line ends are not counted for line numbers (module docstring)
        assert lines == [4, 6]
        assert [(r[0], r[1]) for r in rejects] == [(5, 2)]
    assert notes == []


def test_skip_rows_over_a_long_first_line_and_short_reads() -> None:
    class Trickle(io.BytesIO):
        def read(self, n: int = -1) -> bytes:  # a pipe: short reads
            return super().read(min(n, 777) if n >= 0 else 777)

    data = b"#" * 3_000_000 + b"\r\n" + b"Id,V\r\n1,a\r\n" + b'2,"b\r\nc"\r\n'
    for stream in (io.BytesIO(data), Trickle(data)):
        blocks = list(read_blocks(stream, "src", K, Dialect(skip_rows=1), block_size=4096))
        assert sum(b.strings.num_rows for b in blocks) == 2
        assert [v for b in blocks for v in b.strings.column("V").to_pylist()] == ["a", "b\r\nc"]
        assert [v for b in blocks for v in b.line_numbers.to_pylist()] == [3, 4]


# -- #16 defect 7: a header far wider than the loader reads is refused before Arrow parses it ---


def test_a_million_column_header_is_refused_at_once() -> None:
    import time

    header = ",".join(f"c{i}" for i in range(1_000_002)).encode() + b"\n"
    start = time.monotonic()
    with pytest.raises(SchemaError) as e:
        load(header + b"1,2\n", table=K, block_size=16 << 20)
    assert time.monotonic() - start < 5
    assert e.value.message == (
        "src: the header has 1,000,002 columns; the loader reads at most 4,096 "
        "(a Spanner table has at most 1,024)"
    )
    assert e.value.hint is not None and "`delimiter`" in e.value.hint


def test_a_header_wider_than_the_block_is_refused_as_at_least_that_wide() -> None:
    # 10,000 columns, 20,000 bytes: the first 16 KiB already hold more than 4,096 of them
    header = b"a," * 9999 + b"a\n"
    with pytest.raises(SchemaError, match=r"^src: the header has at least 8,193 columns; "):
        load(header, table=K, block_size=16 << 10)


def test_a_header_longer_than_the_block_is_named_as_such() -> None:
    # Arrow would call this an empty file: its first block holds no complete row
    header = b"Id,V," + b",".join(b"c%d" % i for i in range(2000)) + b"\n1,a\n"
    with pytest.raises(SourceError) as e:
        load(b"# c\n" + header, table=K, dialect=Dialect(skip_rows=1), block_size=4096)
    assert e.value.message == "src: the header (line 2) does not fit in a parse block of 4 KiB"
    assert e.value.hint is not None and "`block_size`" in e.value.hint


def test_delimiters_inside_quoted_header_names_are_not_columns() -> None:
    # 5,000 commas in one quoted name: two columns, found unknown, not refused as too wide
    header = b'Id,V,"' + b"," * 5000 + b'"\n'
    with pytest.raises(SchemaError, match="CSV column\\(s\\) not in table T"):
        load(header + b"1,a,b\n", table=K)
    rows, _, _, _ = load(header + b"1,a,b\n", table=K, ignore={"," * 5000})
    assert rows == [{"Id": 1, "V": "a"}]


def test_the_blank_line_look_ahead_is_bounded() -> None:
    """Line ends are held while looking for a first byte that is not one: past a parse block (or
    64 KiB) of them the input is not taken for empty (and is read as before)."""
    notes: list[str] = []
    data = b"\n" * 1_000 + b"Id,V\n1,a\n"
    rows, _, _, _ = load(data, table=K, block_size=4096, on_note=notes.append)
    assert [r["Id"] for r in rows] == [1] and notes == []
    with pytest.raises(SourceError, match="empty file, expected a header"):
        load(b"\n" * 100_000, table=K, block_size=4096)
    assert load(b"\n" * 4_000, table=K, block_size=4096, on_note=notes.append)[0] == []
    assert notes == ["src: skipped an empty file"]


# -- a header the dialect reads as a record -----------------------------------------------------


@pytest.mark.parametrize(
    "data, preset, noted",
    [
        (b"Id,Name,Amount,At,Ok\n1,a,1,2024-01-01T00:00:00Z,t\n", "postgres", True),
        (b'\xef\xbb\xbfid,"NAME",amount,at,ok\n', "postgres", True),  # any case, quoted, BOM
        (b"Id\tName\tAmount\tAt\tOk\n", "mysql", True),
        (b"Id,Name,Amount,At,Ok\n1,a,1,2024-01-01T00:00:00Z,t\n", "csv", False),  # a header
        (b"1,Name,1,2024-01-01T00:00:00Z,t\n", "postgres", False),  # a record naming one
        (b"Id\n", "postgres", False),  # one field: too little to tell
        # a tryout's export with a column the table lacks: still a header
        (b"id,name,amount,at,ok,extra_col\n1,a,1,2024-01-01T00:00:00Z,t,x\n", "postgres", True),
        (b"Id,Name,x,y,z\n", "postgres", False),  # more than a third no column's
        (b"1,name,amount,at,ok\n", "postgres", False),  # a value among them: a row (a review)
    ],
)
def test_a_first_line_that_names_the_columns_is_noted_without_a_header(
    data: bytes, preset: str, noted: bool
) -> None:
    notes: list[str] = []
    load(data, ORDERS, dialect_from_preset(preset), on_note=notes.append)
    assert bool(notes) == noted, notes
    if noted:
        assert notes[0].startswith("src: its first line (")
        assert notes[0].endswith(
            "names columns of T, but the files are read as having no header row, so it is "
            "read as a row, and likely rejected: set `header=True` if it is the header"
        )


def test_postgres_end_of_data_line_in_a_csv_file_is_named_in_its_reject() -> None:
    """A tryout's psql export read as CSV ended with `\\.`: a bare "expected 3 fields, found
    1"; quoted it is a value, and loads."""
    import dataclasses

    table = _table("Id INT64; Name STRING(10)")
    dialect = dataclasses.replace(dialect_from_preset("postgres"), header=True)
    rows, rejects, _, _ = load(b'Id,Name\n1,a\n2,"\\."\n\\.\n', table, dialect)
    assert [r["Name"] for r in rows] == ["a", "\\."]
    assert [r[3] for r in rejects] == [
        "expected 2 fields, found 1 (PostgreSQL's end-of-data line, \\. alone, which a CSV "
        "file does not need: leave it out of the file)"
    ]


def test_a_header_line_under_named_columns_is_noted_with_skip_rows() -> None:
    """``columns`` rule out ``header``: the note says to skip the line instead."""
    import dataclasses

    notes: list[str] = []
    dialect = dataclasses.replace(
        dialect_from_preset("postgres"), columns=("Id", "Name", "Amount", "At", "Ok")
    )
    load(b"Id,Name,Amount,At,Ok\n", ORDERS, dialect, on_note=notes.append)
    assert len(notes) == 1 and notes[0].endswith(
        "likely rejected: set `skip_rows=1` if it is a header (`columns` name the fields)"
    )


def test_a_range_that_starts_mid_file_is_not_taken_for_a_header() -> None:
    notes: list[str] = []
    data = b"Id,Name,Amount,At,Ok\n"
    load(data, ORDERS, dialect_from_preset("postgres"), on_note=notes.append, file_start=False)
    assert notes == []


# -- MySQL writes a carriage return as it is --------------------------------------------------

NOTES = _table("Id INT64; Body STRING(MAX); Tail STRING(MAX); Ok BOOL")


def test_mysql_keeps_a_raw_carriage_return_in_a_value() -> None:
    """INTO OUTFILE escapes LF (its line terminator), not CR: Windows text a CR LF b is
    written a CR, backslash LF, b. The CR ended the record there, so the row was written cut
    short (and the rest was a reject)."""
    data = (
        b"1\tWindows text\r\\\nsecond line\tt\t1\n"
        b"2\tcr\ronly\tx\r\t0\n"
        b"3\tplain\tcrlf line end\t1\r\n"
        b"4\t\\\r\t\r\r\t0\n"
    )
    rows, rejects, records, lines = load(data, NOTES, dialect_from_preset("mysql"), block_size=64)
    assert rejects == []
    assert [(r["Body"], r["Tail"]) for r in rows] == [
        ("Windows text\r\nsecond line", "t"),
        ("cr\ronly", "x\r"),
        ("plain", "crlf line end"),
        ("\r", "\r\r"),
    ]
    assert records == [1, 2, 3, 4] and lines == [1, 3, 4, 5]


mysql_texts = st.text(
    st.sampled_from(list("ab\r\n\t\\N")) | st.characters(blacklist_categories=("Cs",)),
    max_size=10,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.none() | mysql_texts, st.none() | mysql_texts), max_size=12),
    st.sampled_from([1, 2, 3, 7, 64]),
)
def test_mysql_text_with_any_characters_reads_back(
    values: list[tuple[Optional[str], Optional[str]]], chunk: int
) -> None:
    """As INTO OUTFILE writes them: backslash, tab, LF and NUL escaped, CR as it is; the last
    column is a BOOL, so no value's CR meets the line's LF."""

    def esc(v: Optional[str]) -> str:
        if v is None:
            return "\\N"
        return (
            v.replace("\\", "\\\\").replace("\t", "\\\t").replace("\n", "\\\n").replace("\0", "\\0")
        )

    data = "".join(f"{i}\t{esc(a)}\t{esc(b)}\t1\n" for i, (a, b) in enumerate(values)).encode()
    rows, rejects, _, _ = load(data, NOTES, dialect_from_preset("mysql"), block_size=4096)
    assert rejects == []
    assert [(r["Body"], r["Tail"]) for r in rows] == values
    # the rewrite does not depend on where the reads end (a CR at a chunk's end waits)
    from loader.parse.escapes import _EscapeRewriter

    whole = _EscapeRewriter(dialect_from_preset("mysql")).rewrite(data, True)
    r = _EscapeRewriter(dialect_from_preset("mysql"))
    cut = [data[i : i + chunk] for i in range(0, len(data), chunk)] or [b""]
    assert b"".join(r.rewrite(c, k == len(cut) - 1) for k, c in enumerate(cut)) == whole


def test_a_tab_separated_file_read_as_csv_says_so() -> None:
    """COPY's text format (tab-separated) read as CSV: every row was "expected 2 fields,
    found 1" with no word of the tabs (a tryout)."""
    _, rejects, _, _ = load(
        b"1\tAnn\n2\tBob\n", _table("Id INT64; Name STRING(10)"), dialect=Dialect(header=False)
    )
    assert [r[1] for r in rejects] == [1, 2]
    assert rejects[0][3] == (
        "expected 2 fields, found 1 (the fields are tab-separated: MySQL's INTO OUTFILE reads with "
        "`dialect='mysql'`, PostgreSQL's COPY text format with `dialect='postgres-text'`, other "
        "tab-separated files with a tab as the `delimiter`, which reads no backslash escapes and "
        "no \\N NULLs)"
    )


def test_a_tab_separated_row_with_commas_in_its_values_says_so() -> None:
    """A MySQL tryout read as CSV: commas in the JSON and SET values split each row into some
    other count, "expected 3 fields, found 4", with no word of the tabs."""
    _, rejects, _, _ = load(
        b"1\t[1,2,3]\tx,y\n",
        _table("Id INT64; J STRING(MAX); S STRING(10)"),
        dialect=Dialect(header=False),
    )
    assert rejects[0][3] == (
        "expected 3 fields, found 4 (split on tabs it has 3: MySQL's INTO OUTFILE reads with "
        "`dialect='mysql'`, PostgreSQL's COPY text format with `dialect='postgres-text'`, other "
        "tab-separated files with a tab as the `delimiter`, which reads no backslash escapes and "
        "no \\N NULLs)"
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # pyarrow's decode
def test_a_record_of_the_wrong_field_count_that_is_not_utf8_stops_the_source_by_name() -> None:
    """Arrow's reader decodes a record of the wrong field count before it hands it to the
    reject handler; one that is not UTF-8 stopped the source with pyarrow's own message
    ("cannot parse as CSV: CSV parse error: Row #5 ...") and a hint to see --help (a
    PostgreSQL tryout: a COPY text file's bytea read as CSV). The refusal names the record,
    why it is one, and the ways out."""
    data = b"Id,Name\n1,a\n2,b\n3,x\xdey,z\n4,d\n"
    with pytest.raises(SourceError) as e:
        load(data, _table("Id INT64; Name STRING(10)"))
    assert str(e.value).endswith(
        "record 3 holds bytes that are not UTF-8 and has the wrong field count, expected 2 "
        "fields, found 3; Arrow's reader cannot set such a record aside as a reject, so the "
        "source stops there"
    )
    assert "`encoding='latin-1'`" in (e.value.hint or "")
    tabs = b"Id,Name\n" + b"".join(b"%d,a\n" % i for i in range(50_000)) + b"7\tb\xde\n"
    with pytest.raises(SourceError) as e:  # past the first block: found in the reading loop
        load(tabs, _table("Id INT64; Name STRING(10)"), block_size=1 << 16)
    assert "record 50,001 holds bytes that are not UTF-8" in str(e.value)
    assert "the fields are tab-separated" in str(e.value)
    long = b"Id,Name\n1,a\n2," + b"x" * 120 + b"\xff,extra\n"  # pyarrow shows 96 characters
    with pytest.raises(SourceError) as e:
        load(long, _table("Id INT64; Name STRING(10)"))
    assert "record 2 holds bytes that are not UTF-8" in str(e.value)


def test_a_text_null_read_with_a_tab_delimiter_gets_a_note() -> None:
    """A COPY text export read with a tab as the delimiter, as the header hint once said:
    \\N loaded as the text \\N and escapes as written, exit 0 and no word (a PostgreSQL
    tryout). The rows load as read, with a note naming the line and the dialects."""
    table = _table("Id INT64; Name STRING(10)")
    data = b"Id\tName\n1\ta\n2\t\\N\n3\t\\N\n"
    notes: list[str] = []
    rows, _, _, _ = load(data, table, Dialect(delimiter="\t"), on_note=notes.append)
    assert [r["Name"] for r in rows] == ["a", "\\N", "\\N"]
    assert notes == [
        "src: line 3 holds \\N as a field, read as the text \\N: PostgreSQL's COPY text format "
        "and MySQL's INTO OUTFILE write NULL so, and backslash escapes, which "
        "`dialect='postgres-text'` and `dialect='mysql'` read (a NULL marker alone, "
        "`null_markers=('\\\\N',)`, reads no escapes)"
    ]
    for dialect in (Dialect(delimiter="\t", null_markers=("\\N",)), Dialect()):
        notes.clear()  # a NULL marker given, or commas: \\N is what the options say
        load(
            data.replace(b"\t", b"," if dialect.delimiter == "," else b"\t"),
            table,
            dialect,
            on_note=notes.append,
        )
        assert notes == []


def test_a_field_count_hint_only_where_the_other_delimiter_fits() -> None:
    """A tryout: `1,Alice` read with `--columns Id` was told "expected 1 fields, found 2 (split
    on tabs it has 1: MySQL's INTO OUTFILE ...)": a line without a tab has one field split on
    tabs, which is no sign of tabs. And `--dialect mysql` on a comma-separated file said
    nothing of the commas."""
    _, rejects, _, _ = load(
        b"1,Alice\n",
        _table("Id INT64; S STRING(10)"),
        dialect=Dialect(header=False, columns=("Id",)),
    )
    assert rejects[0][3] == "expected 1 field, found 2"
    mysql = dialect_from_preset("mysql")
    _, rejects, _, _ = load(b"100,a\n", _table("Id INT64; S STRING(10)"), dialect=mysql)
    assert rejects[0][3] == (
        "expected 2 fields, found 1 (split on commas it has 2: give a comma as the `delimiter`, "
        "or leave out `dialect='mysql'` for a CSV file)"
    )


def test_an_empty_cell_of_a_not_null_column_with_a_default_names_the_way_to_it() -> None:
    """A CI tryout: `2,,Bob` for `Active BOOL NOT NULL DEFAULT (true)` was "NULL in NOT NULL
    column Active", with no word that the DEFAULT is only for a column the write leaves out."""
    table = TableSchema(
        "T",
        (
            Column("Id", SpannerType.parse("INT64"), nullable=False),
            Column("Active", SpannerType.parse("BOOL"), nullable=False, has_default=True),
        ),
        (KeyPart("Id"),),
    )
    _, rejects, _, _ = load(b"Id,Active\n1,true\n2,\n", table)
    assert [r[3] for r in rejects] == [
        "NULL in NOT NULL column Active (its DEFAULT is for rows that leave the column out: "
        "`ignore` it to have the DEFAULT in every row)"
    ]


def test_a_header_split_on_another_delimiter_names_it() -> None:
    """A tryout's tab-separated file read with commas: "CSV column(s) not in table:
    'Id\\tTitle'" and a hint to map or ignore it."""
    table = _table("Id INT64; Title STRING(10)")
    with pytest.raises(SchemaError) as e:
        load(b"Id\tTITLE\n1\tx\n", table)
    assert "a header of 2 names separated by a tab" in e.value.message
    # a tab delimiter alone reads a COPY text export's \\N and escapes as text (a tryout)
    assert e.value.hint is not None
    assert e.value.hint.startswith(
        "PostgreSQL's COPY text format (\\N for NULL, backslash escapes) reads with "
        "`dialect='postgres-text'` and `header=True`, MySQL's INTO OUTFILE with "
        "`dialect='mysql'` and `header=True`; other tab-separated files take a tab as the "
        "`delimiter` (written \\t)"
    )
    with pytest.raises(SchemaError) as e:
        load(b"Id|TITLE\n1|x\n", table)
    assert e.value.hint == "give '|' as the `delimiter`"
    with pytest.raises(SchemaError) as e:
        load(b"Id;Other\n1;x\n", table)  # not all of them the table's: the plain message
    assert e.value.hint is not None and e.value.hint.startswith("columns of T")


def test_columns_of_a_file_without_header_are_checked_before_any_row() -> None:
    """A tryout: `--columns Id,Nope` over a file whose rows had another field count rejected
    every row ("expected 2 fields, found 1", exit 3) where a matching count gave the
    configuration error (exit 2): a name that is no column is the options' fault."""
    for columns, message in ((("Id", "Nope"), "not in table T: 'Nope'"), (("Id", "Id"), "Id")):
        dialect = Dialect(header=False, columns=columns)
        with pytest.raises((SchemaError, ConfigError), match=message):
            load(b"1;a\n2;b\n", _table("Id INT64; S STRING(MAX)"), dialect)


def test_a_first_line_of_values_read_as_a_header_says_so() -> None:
    """A tryout: a file without a header row, read with the default dialect, got "CSV
    column(s) not in table Txt: '1', 'Alice'" and the hint to map or ignore them."""
    table = _table("Id INT64; S STRING(MAX)")
    with pytest.raises(SchemaError) as e:
        load(b"1,Alice\n2,Bob\n", table)
    assert "the first line looks like a row, not a header" in str(e.value.hint)
    assert "`header=False`" in str(e.value.hint)
    with pytest.raises(SchemaError) as e:  # names, one misspelt: the usual hint
        load(b"Id,Nme\n1,a\n", table)
    assert str(e.value.hint).startswith("columns of T: Id, S; load each into a column")


def test_a_utf16_file_read_as_utf8_names_its_encoding() -> None:
    """A tryout: a UTF-16 file (with its byte-order mark) read without an encoding was
    "CSV column(s) not in table: '\\ufffd\\ufffdI\\x00d\\x00'", a hint with NULs in it; one without a
    mark, read as utf-16, was "UTF-16 stream does not start with BOM" and no hint."""
    table = _table("Id INT64; S STRING(MAX)")
    with pytest.raises(SourceError, match="UTF-16 byte-order mark") as e:
        load("Id,S\n1,x\n".encode("utf-16"), table)
    assert e.value.hint == "give `encoding='utf-16'`"
    rows, _, _, _ = load("Id,S\n1,x\n".encode("utf-16"), table, Dialect(encoding="utf-16"))
    assert rows == [{"Id": 1, "S": "x"}]
    with pytest.raises(SourceError) as e:
        load("Id,S\n1,x\n".encode("utf-16-le"), table, Dialect(encoding="utf-16"))
    assert "utf-16-le" in str(e.value.hint)


def test_a_quote_or_delimiter_of_the_wrong_length_is_told_in_words_of_the_flag() -> None:
    """A tryout: `--quote '\\n'` was told "quote_char must be one character or none", a name
    no flag has."""
    with pytest.raises(ConfigError, match="the quote character must be one character") as e:
        Dialect(quote_char="ab")
    assert e.value.hint == "one character, e.g. '\"' or \"'\"; an empty one for none"
    with pytest.raises(ConfigError, match="the escape character cannot be a line end"):
        Dialect(escape_char="\n")
    with pytest.raises(ConfigError, match="`delimiter` must be one character, not '||'") as e:
        Dialect(delimiter="||")
    assert "a tab is written \\t" in str(e.value.hint)


def test_dialects_a_tryout_gave_are_refused_with_a_reason() -> None:
    """`--escape '"'` read the rest of a file into one value (exit 0); a non-ASCII delimiter
    or quote stopped with a ValueError (exit 1)."""
    with pytest.raises(ConfigError, match="the escape character and the quote character are"):
        Dialect(escape_char='"')
    for kw, what in (({"delimiter": "\u00a7"}, "delimiter"), ({"quote_char": "\u00e9"}, "quote")):
        with pytest.raises(ConfigError, match=f"the {what}[a-z ]* must be an ASCII character"):
            Dialect(**kw)


def test_a_record_a_stray_quote_joined_over_several_lines_says_so() -> None:
    """A tryout: `"oops` at line 12 and `x",y` at line 17 made lines 12-17 one record, one
    reject "expected 2 fields, found 3" that said nothing of a quote or of the lines."""
    lines = ["Id,V"] + [
        f"{i}," + ('"oops' if i == 10 else 'x",y' if i == 15 else "n") for i in range(20)
    ]
    rows, rejects, _, _ = load(
        ("\n".join(lines) + "\n").encode(), _table("Id INT64; V STRING(MAX)")
    )
    assert len(rows) == 14 and [(r[0], r[1]) for r in rejects] == [(12, 11)]
    assert rejects[0][3] == (
        "expected 2 fields, found 3 (a record of 6 lines: a quote in it may be a stray one, "
        "joining the lines after it up to the next quote into this record)"
    )


def test_a_snake_case_header_of_a_camel_case_table_is_noted_without_a_header() -> None:
    """A tryout: `code,country_name` for `Code, CountryName`, read with the postgres preset
    (no header unless asked), loaded the header as a row of two STRING columns without a word:
    the names were matched in any case only, not without underscores."""
    notes: list[str] = []
    table = _table("Code STRING(10); CountryName STRING(100)", not_null=("Code",))
    rows, _, _, _ = load(
        b"code,country_name\nDE,Germany\n",
        table,
        dialect_from_preset("postgres"),
        on_note=notes.append,
    )
    assert rows[0] == {"Code": "code", "CountryName": "country_name"}  # read as a row, as asked
    assert len(notes) == 1 and "set `header=True` if it is the header" in notes[0]
