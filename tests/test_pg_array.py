"""PostgreSQL's array text (``COPY`` of an array column) read into ARRAY<T> columns with the
postgres dialect: the parser against PostgreSQL's own rules (written by ``pg_array_text`` as
``array_out`` writes them), the conversion beside JSON array text, and a load end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.convert import ConvertOptions, convert_column
from loader.convert.pg_array import PgArrayError, parse_pg_array
from loader.parse import dialect_from_preset
from loader.types import SpannerType

PG = ConvertOptions(array_syntax="postgres")
PG_SPACE = " \t\n\r\v\f"


def pg_array_text(values: list[Optional[str]]) -> str:
    """``values`` written as PostgreSQL's ``array_out`` writes a text array (the inverse of
    :func:`parse_pg_array`)."""

    def one(v: Optional[str]) -> str:
        if v is None:
            return "NULL"
        if (
            v == ""
            or v.upper() == "NULL"
            or any(c in v for c in '{},"\\')
            or any(c in PG_SPACE for c in v)
        ):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return v

    return "{" + ",".join(one(v) for v in values) + "}"


texts = st.text(
    st.characters(blacklist_categories=("Cs",)) | st.sampled_from(list('{},"\\ \t\nNUL')),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.none() | texts | st.sampled_from(["NULL", "null", ""]), max_size=8))
def test_what_array_out_writes_reads_back(values: list[Optional[str]]) -> None:
    assert parse_pg_array(pg_array_text(values)) == values


@pytest.mark.parametrize(
    "text, elements",
    [
        ("{}", []),
        ("{ }", []),
        ("{1,2,NULL}", ["1", "2", None]),
        ("{null,Null}", [None, None]),
        ('{"NULL",NULL}', ["NULL", None]),
        ("{ a , b }", ["a", "b"]),  # white space around an unquoted element is not in it
        ('{ "a " ,b}', ["a ", "b"]),
        ("{a\\,b,c}", ["a,b", "c"]),  # an escaped comma is the element's
        ("{a\\ }", ["a "]),  # an escaped space is kept
        ('{"say \\"hi\\"","back\\\\slash"}', ['say "hi"', "back\\slash"]),
        ('{"",x}', ["", "x"]),
        ('{"2024-01-01 10:00:00+05:30"}', ["2024-01-01 10:00:00+05:30"]),
        ("{\\NULL}", ["NULL"]),  # an escaped letter: the text, not NULL
    ],
)
def test_postgres_rules(text: str, elements: list[Optional[str]]) -> None:
    assert parse_pg_array(text) == elements


@pytest.mark.parametrize(
    "text, why",
    [
        ("{{1,2},{3,4}}", "nested (multi-dimensional)"),
        ("[0:1]={1,2}", "explicit array bounds"),
        ("{a,}", "missing after the last comma"),
        ("{,a}", "empty element"),
        ('{"a}', "never closed"),
        ('{a"b}', "unexpected '\"'"),
        ('{"a"b}', "unexpected 'b' after an element"),
        ("1,2", "written {a,b,...}"),
        ("{a\\}", "backslash ends the array"),
    ],
)
def test_what_is_not_one_says_why(text: str, why: str) -> None:
    with pytest.raises(PgArrayError, match=None) as e:
        parse_pg_array(text)
    assert why in str(e.value)


def convert(type_text: str, values: list[Optional[str]], o: ConvertOptions = PG) -> Any:
    out, errors = convert_column(pa.array(values, pa.string()), SpannerType.parse(type_text), o)
    return out.to_pylist(), errors


def test_arrays_of_each_kind_beside_json_array_text() -> None:
    assert convert("ARRAY<INT64>", ["{1,2,NULL}", "[3]", "{}", None, "{x}"]) == (
        [[1, 2, None], [3], [], None, None],
        {4: "element 1 of ARRAY<INT64>: not an INT64: 'x'"},
    )
    assert convert("ARRAY<STRING(MAX)>", ['{"a b",NULL,"NULL","x,y"}'])[0] == [
        ["a b", None, "NULL", "x,y"]
    ]
    assert convert("ARRAY<BOOL>", ["{t,f,NULL}"])[0] == [[True, False, None]]
    assert convert("ARRAY<JSON>", ['{"{\\"a\\": 1}",NULL,"[1, 2]"}'])[0] == [
        ['{"a":1}', None, "[1,2]"]
    ]
    got, errors = convert("ARRAY<INT64>", ["{{1},{2}}", "[0:1]={1,2}"])
    assert got == [None, None]
    assert errors[0].startswith("not a PostgreSQL array (a nested (multi-dimensional) array")
    assert errors[1].startswith("not a PostgreSQL array (explicit array bounds")


def test_without_the_postgres_dialect_the_reject_says_how() -> None:
    got, errors = convert("ARRAY<INT64>", ["{1,2}"], ConvertOptions())
    assert got == [None]
    assert "(PostgreSQL's array text: read it with the postgres dialect" in errors[0]


def test_the_postgres_preset_reads_them() -> None:
    assert ConvertOptions.from_dialect(dialect_from_preset("postgres")).array_syntax == "postgres"
    assert ConvertOptions.from_dialect(dialect_from_preset("csv")).array_syntax == "json"


DDL = """CREATE TABLE Tagged (
  Id INT64 NOT NULL,
  Tags ARRAY<STRING(MAX)>,
  Scores ARRAY<INT64>,
  Flags ARRAY<BOOL>,
) PRIMARY KEY (Id)"""


def test_a_copy_export_loads_and_verifies(spanner_emulator: str, tmp_path: Path) -> None:
    rows = [
        (1, ["a b", None, "NULL", 'say "hi"', "x,y", ""], ["1", "-2", None], ["t", "f"]),
        (2, [], [], []),
        (3, None, None, None),
    ]

    def cell(v: Optional[list[Optional[str]]]) -> str:
        if v is None:
            return ""  # COPY CSV: NULL is an empty unquoted field
        text = pg_array_text(v)
        return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\n') else text

    src = tmp_path / "tagged.csv"
    src.write_text("".join(f"{i},{cell(a)},{cell(b)},{cell(c)}\n" for i, a, b, c in rows))
    (tmp_path / "t.sql").write_text(DDL)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    common = ["--table", "Tagged", "--emulator", "--database", "pgarrays", "--dialect", "postgres"]
    load = subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "load",
            str(src),
            *common,
            "--ddl",
            str(tmp_path / "t.sql"),
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert load.returncode == 0, load.stderr
    assert json.loads(load.stdout)["rows_written"] == 3
    verify = subprocess.run(
        [sys.executable, "-m", "loader", "verify", str(src), *common],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    from google.cloud import spanner

    db = spanner.Client(project="test-project").instance("test-instance").database("pgarrays")
    with db.snapshot() as snap:
        got = sorted(snap.execute_sql("SELECT Id, Tags, Scores, Flags FROM Tagged"))
    assert got == [
        [1, ["a b", None, "NULL", 'say "hi"', "x,y", ""], [1, -2, None], [True, False]],
        [2, [], [], []],
        [3, None, None, None],
    ]


@pytest.mark.parametrize(
    "type_text, value, options, hint",
    [
        ("DATE", "0000-00-00", ConvertOptions(), "(MySQL's zero date, which no DATE or"),
        ("TIMESTAMP", "0000-00-00 00:00:00", ConvertOptions(), "(MySQL's zero date"),
        ("TIMESTAMP", "infinity", ConvertOptions(), "(PostgreSQL's infinity, which no TIMESTAMP"),
        ("DATE", "-infinity", ConvertOptions(), "(PostgreSQL's -infinity, which no DATE holds"),
        (
            "BYTES(MAX)",
            "\\x0102",
            ConvertOptions(),
            "(PostgreSQL's bytea hex: a PostgreSQL export reads with `dialect='postgres'` "
            "(its bytea and arrays), this column alone with `bytes_encoding='hex'`)",
        ),
        ("DATE", "0044-03-15 BC", ConvertOptions(), "(a date before year 1, which no DATE holds"),
        ("TIMESTAMP", "1901-12-13 20:45:52+00:19:32", ConvertOptions(), "(an offset with seconds"),
        (
            "BYTES(MAX)",
            "AQI=",
            ConvertOptions(bytes_encoding="hex"),
            "(base64? read it with `bytes_encoding='base64'`)",
        ),
        ("ARRAY<DATE>", '["0000-00-00"]', ConvertOptions(), "'0000-00-00' (MySQL's zero date"),
    ],
)
def test_what_other_databases_export_and_no_type_holds_is_named(
    type_text: str, value: str, options: ConvertOptions, hint: str
) -> None:
    got, errors = convert(type_text, [value, None], options)
    assert got == [None, None] and list(errors) == [0]
    assert hint in errors[0], errors[0]


def test_the_postgres_preset_reads_bytea_hex() -> None:
    o = ConvertOptions.from_dialect(dialect_from_preset("postgres"))
    assert convert("BYTES(MAX)", ["\\x0102", "\\x"], o) == ([b"\x01\x02", b""], {})
    o = ConvertOptions.from_dialect(dialect_from_preset("postgres", bytes_encoding="base64"))
    assert convert("BYTES(MAX)", ["AQI="], o) == ([b"\x01\x02"], {})
