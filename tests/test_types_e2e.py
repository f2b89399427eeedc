"""Every Spanner type through the emulator and back, table-driven.

One table has a column per type. Each case is one CSV row that fills only its column (the
others are NULL), so one load carries every case: valid values must come back exactly
(NUMERIC digits, TIMESTAMP nanoseconds as text, FLOAT64 NaN / -0.0 bits, BYTES, JSON), and
each invalid value must be the only reject of its row, naming the column and the value.

Two loads: the library with the defaults (base64, UTC, ``spanner.commit_timestamp()`` text and
a filled commit-timestamp column), then the CLI with ``--bytes-encoding hex``, ``--timezone``
and ``--commit-timestamp``.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, read_back_timestamp_text

from loader import LoadConfig, TableJob, Target, load
from loader.convert import MAX_STRING_CHARS, ConvertOptions
from loader.errors import ExitCode
from loader.parse import Dialect
from loader.rejects import MAX_TEXT

TYPES = {
    "I": "INT64",
    "F": "FLOAT64",
    "F32": "FLOAT32",
    "N": "NUMERIC",
    "B": "BOOL",
    "S": "STRING(MAX)",
    "S5": "STRING(5)",
    "Y": "BYTES(MAX)",
    "D": "DATE",
    "Ts": "TIMESTAMP",
    "J": "JSON",
    "AInt": "ARRAY<INT64>",
    "AStr": "ARRAY<STRING(MAX)>",
    "AFlt": "ARRAY<FLOAT64>",
    "ANum": "ARRAY<NUMERIC>",
    "ABool": "ARRAY<BOOL>",
    "ADate": "ARRAY<DATE>",
    "ATs": "ARRAY<TIMESTAMP>",
    "AByt": "ARRAY<BYTES(MAX)>",
    "Ct2": "TIMESTAMP",  # allow_commit_timestamp, written from the CSV
}
COLUMNS = list(TYPES)
COMMIT_OPT = "OPTIONS (allow_commit_timestamp = true)"
DDL = (
    "CREATE TABLE Types (Id INT64 NOT NULL, "
    + ", ".join(f"{c} {t}" + (f" {COMMIT_OPT}" if c == "Ct2" else "") for c, t in TYPES.items())
    + f", Ct TIMESTAMP {COMMIT_OPT}) PRIMARY KEY (Id)"
)

ALL_BYTES = bytes(range(256))
MAX_N = "99999999999999999999999999999.999999999"  # 29 integer and 9 fraction digits
JSON_NULL = "<JSON null>"
EXACT = decimal.Context(prec=60)  # the default context rounds to 28 digits


def f32(text: str) -> float:
    return float(np.float32(text))


@dataclass(frozen=True)
class Ok:
    column: str
    text: str
    value: Any
    """The value read back: Python natural types, TIMESTAMP as canonical text, JSON parsed."""


@dataclass(frozen=True)
class Bad:
    column: str
    text: str
    reason: str
    """A fragment of the reject reason."""


VALID_DEFAULT = [
    Ok("I", "0", 0),
    Ok("I", "-9223372036854775808", -(2**63)),
    Ok("I", "9223372036854775807", 2**63 - 1),
    Ok("I", "+5", 5),  # the sign is dropped: Spanner refuses "+5" as INT64 text
    Ok("I", "+9223372036854775807", 2**63 - 1),
    Ok("I", "-007", -7),
    Ok("F", "1.5", 1.5),
    Ok("F", "NaN", math.nan),
    Ok("F", "Infinity", math.inf),
    Ok("F", "-inf", -math.inf),
    Ok("F", "-0.0", -0.0),
    Ok("F", "1.7976931348623157e308", 1.7976931348623157e308),
    Ok("F", "-1.7976931348623157e308", -1.7976931348623157e308),
    Ok("F", "5e-324", 5e-324),
    Ok("F", "0.1", 0.1),
    Ok("F32", "3.4028235e38", f32("3.4028235e38")),
    Ok("F32", "-3.4028235e38", f32("-3.4028235e38")),
    Ok("F32", "1.17549435e-38", f32("1.17549435e-38")),
    Ok("F32", "1e-45", f32("1e-45")),
    Ok("F32", "0.1", f32("0.1")),
    Ok("F32", "NaN", math.nan),
    Ok("F32", "-0.0", -0.0),
    Ok("F32", "-Infinity", -math.inf),
    Ok("N", MAX_N, Decimal(MAX_N)),
    Ok("N", "-" + MAX_N, Decimal("-" + MAX_N)),
    Ok("N", "0.000000001", Decimal("0.000000001")),
    Ok("N", "-0.000000001", Decimal("-0.000000001")),
    Ok("N", "1.5000000000000", Decimal("1.5")),
    Ok("N", "12345678901234567890123456789", Decimal("12345678901234567890123456789")),
    Ok("N", "1e3", Decimal("1000")),
    Ok("N", "0", Decimal("0")),
    Ok("N", "+1.5", Decimal("1.5")),
    Ok("B", "true", True),
    Ok("B", "FALSE", False),
    Ok("B", "t", True),
    Ok("B", "f", False),
    Ok("B", "1", True),
    Ok("B", "0", False),
    Ok("B", "Yes", True),
    Ok("B", "n", False),
    Ok("S", "", ""),
    Ok("S", "ascii", "ascii"),
    Ok("S", "é 日本 😀 𝄞 \U0010ffff", "é 日本 😀 𝄞 \U0010ffff"),
    Ok("S", "comma, \"quote\", 'apos'", "comma, \"quote\", 'apos'"),
    Ok("S", "line\nbreak\r\ncrlf\rcr\ttab", "line\nbreak\r\ncrlf\rcr\ttab"),
    Ok("S", "back\\slash \\N \\t", "back\\slash \\N \\t"),
    Ok("S", "  spaces  ", "  spaces  "),
    Ok("S", "nul\x00byte", "nul\x00byte"),
    Ok("S", "NULL", "NULL"),
    Ok("S5", "abcde", "abcde"),
    Ok("S5", "ééééé", "ééééé"),  # 5 characters, 10 bytes
    Ok("S5", "😀😀😀😀😀", "😀😀😀😀😀"),  # 5 characters, 20 bytes
    Ok("S5", "", ""),
    Ok("Y", base64.b64encode(ALL_BYTES).decode(), ALL_BYTES),
    Ok("Y", "", b""),
    Ok("Y", "AA==", b"\x00"),
    Ok("Y", "AP8=", b"\x00\xff"),
    Ok("D", "0001-01-01", dt.date(1, 1, 1)),
    Ok("D", "9999-12-31", dt.date(9999, 12, 31)),
    Ok("D", "2024-02-29", dt.date(2024, 2, 29)),
    Ok("D", "1970-01-01", dt.date(1970, 1, 1)),
    Ok("Ts", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000000000Z"),
    Ok("Ts", "9999-12-31T23:59:59.999999999Z", "9999-12-31T23:59:59.999999999Z"),
    Ok("Ts", "0001-01-01T01:00:00+01:00", "0001-01-01T00:00:00.000000000Z"),
    Ok("Ts", "9999-12-31T22:59:59.999999999-01:00", "9999-12-31T23:59:59.999999999Z"),
    Ok("Ts", "1969-12-31T23:59:59.999999999Z", "1969-12-31T23:59:59.999999999Z"),
    Ok("Ts", "2024-03-01T12:00:00.123456789+05:30", "2024-03-01T06:30:00.123456789Z"),
    Ok("Ts", "2024-03-01T12:00:00-08:00", "2024-03-01T20:00:00.000000000Z"),
    Ok("Ts", "2024-03-01T12:00:00.5-0800", "2024-03-01T20:00:00.500000000Z"),
    Ok("Ts", "2024-03-01T12:00:00+01", "2024-03-01T11:00:00.000000000Z"),
    Ok("Ts", "2024-03-01T12:00:00.000000001z", "2024-03-01T12:00:00.000000001Z"),
    Ok("Ts", "2024-03-01t12:00:00z", "2024-03-01T12:00:00.000000000Z"),  # RFC 3339 5.6
    Ok("Ts", "2024-03-01 12:00:00", "2024-03-01T12:00:00.000000000Z"),
    Ok("Ts", "2024-03-01 12:00:00.000000001", "2024-03-01T12:00:00.000000001Z"),
    Ok("Ts", "2024-03-01 12:00:00.123456 UTC", "2024-03-01T12:00:00.123456000Z"),
    Ok(
        "J",
        '{"b": [1, 2.5, {"c": null}], "a": "ü😀\\u00e9"}',
        {"a": "ü😀é", "b": [1, 2.5, {"c": None}]},
    ),
    Ok("J", "[]", []),
    Ok("J", '"text"', "text"),
    Ok("J", "-1.5e-3", -0.0015),
    Ok("J", "null", JSON_NULL),  # a JSON value, not SQL NULL
    Ok("J", '{"deep": [[[[[{"x": [true, false]}]]]]]}', {"deep": [[[[[{"x": [True, False]}]]]]]}),
    Ok("AInt", "[]", []),
    Ok("AInt", "[1,null,-9223372036854775808,9223372036854775807]", [1, None, -(2**63), 2**63 - 1]),
    Ok(
        "AStr",
        '["a",null,"","😀","comma, \\"q\\"","\\n"]',
        ["a", None, "", "😀", 'comma, "q"', "\n"],
    ),
    Ok(
        "AFlt",
        "[1.5,-0.0,NaN,Infinity,-Infinity,null]",
        [1.5, -0.0, math.nan, math.inf, -math.inf, None],
    ),
    Ok(
        "ANum",
        f'[0.000000001,"{MAX_N}",-1,null]',
        [Decimal("1e-9"), Decimal(MAX_N), Decimal(-1), None],
    ),
    Ok("ABool", "[true,false,null]", [True, False, None]),
    Ok(
        "ADate", '["0001-01-01","9999-12-31",null]', [dt.date(1, 1, 1), dt.date(9999, 12, 31), None]
    ),
    Ok(
        "ATs",
        '["2024-03-01T12:00:00.123456789+01:00","0001-01-01T00:00:00Z",null]',
        ["2024-03-01T11:00:00.123456789Z", "0001-01-01T00:00:00.000000000Z", None],
    ),
    Ok("AByt", f'["{base64.b64encode(ALL_BYTES).decode()}","",null]', [ALL_BYTES, b"", None]),
    Ok("Ct2", "2024-03-01T12:00:00.123456789Z", "2024-03-01T12:00:00.123456789Z"),
]

INVALID_DEFAULT = [
    Bad("I", "12a", "not an INT64"),
    Bad("I", "9223372036854775808", "INT64 out of range"),
    Bad("I", "-9223372036854775809", "INT64 out of range"),
    Bad("I", "1.5", "not an INT64"),
    Bad("I", "", "not an INT64"),  # quoted "" is an empty string, not NULL
    Bad("I", "0x7fffffffffffffff", "(decimal digits only, no hex)"),
    Bad("I", "-0x10", "(decimal digits only, no hex)"),
    Bad("I", " 1", "(spaces are not allowed)"),
    Bad("F", "abc", "not a FLOAT64"),
    Bad("F", "1e400", "FLOAT64 out of range"),
    Bad("F", "1.0.0", "not a FLOAT64"),
    Bad("F32", "3.5e38", "FLOAT32 out of range"),
    Bad("F32", "x", "not a FLOAT32"),
    Bad("N", "1.0000000001", "NUMERIC would round"),
    Bad("N", "1" + "0" * 29, "NUMERIC out of range"),
    Bad("N", "-1" + "0" * 29 + ".5", "NUMERIC out of range"),
    Bad("N", "1e-10", "NUMERIC would round"),
    Bad("N", "1e29", "NUMERIC out of range"),
    Bad("N", "NaN", "not a NUMERIC"),
    Bad("N", "1,5", "not a NUMERIC"),
    Bad("N", " 1", "not a NUMERIC: ' 1' (spaces are not allowed)"),
    Bad("N", "--1", "not a NUMERIC: '--1'"),
    Bad("B", "maybe", "not a BOOL"),
    Bad("B", "2", "not a BOOL"),
    Bad("S5", "abcdef", "STRING(5) too long: 6 characters"),
    Bad("S5", "😀" * 6, "STRING(5) too long: 6 characters"),
    Bad("S", "x" * (MAX_STRING_CHARS + 1), "STRING(MAX) too long"),
    Bad("Y", "abc", "not valid base64"),
    Bad("Y", "!!!!", "not valid base64"),
    Bad("Y", "AP8", "not valid base64"),
    Bad("D", "2024-02-30", "not a DATE"),
    Bad("D", "0000-12-31", "DATE out of range"),
    Bad("D", "10000-01-01", "not a DATE"),
    Bad("D", "2024-1-1", "not a DATE"),
    Bad("Ts", "2024-02-30T00:00:00Z", "not a TIMESTAMP"),
    Bad("Ts", "2024-01-01T24:00:00Z", "not a TIMESTAMP"),
    Bad("Ts", "2024-01-01T00:00:00.1234567890Z", "not a TIMESTAMP"),
    Bad("Ts", "0000-12-31T23:59:59Z", "TIMESTAMP out of range"),
    Bad("Ts", "0001-01-01T00:00:00+00:01", "TIMESTAMP out of range"),
    Bad("Ts", "9999-12-31T23:59:59-01:00", "TIMESTAMP out of range"),
    Bad("Ts", "spanner.commit_timestamp()", "not a TIMESTAMP"),  # not an allow_commit column
    Bad("Ts", "yesterday", "not a TIMESTAMP"),
    Bad("J", "{", "not valid JSON"),
    Bad("J", "{'a': 1}", "not valid JSON"),
    Bad("J", "[1,]", "not valid JSON"),
    Bad("J", "NaN", "not valid JSON"),  # Python's json takes these; Spanner does not
    Bad("J", '{"a": Infinity}', "not valid JSON"),
    Bad("J", "[1e400]", "JSON number '1e400' is outside the FLOAT64 range"),
    Bad("J", '{"n": 2.2412421353246235436}', "JSON number '2.2412421353246235436' has more digits"),
    Bad("AInt", "[1,2", "not a JSON array"),
    Bad("AInt", '[1,"x"]', "element 2 of ARRAY<INT64>: not an INT64: 'x'"),
    Bad("AInt", "[[1]]", "nested values in ARRAY<INT64>"),
    Bad("AInt", "1", "not a JSON array"),
    Bad("AInt", "null", "not a JSON array"),  # not an empty array
    Bad("AStr", "null", "not a JSON array"),
    Bad("AInt", "[1.5]", "element 1 of ARRAY<INT64>: not an INT64: '1.5'"),
    Bad("AFlt", '["x"]', "element 1 of ARRAY<FLOAT64>: not a FLOAT64: 'x'"),
    Bad(
        "ANum", "[1.0000000001]", "element 1 of ARRAY<NUMERIC>: NUMERIC would round: '1.0000000001'"
    ),
    Bad("ABool", '[true,"maybe"]', "element 2 of ARRAY<BOOL>: not a BOOL: 'maybe'"),
    Bad("ADate", '["2024-02-30"]', "element 1 of ARRAY<DATE>: not a DATE: '2024-02-30'"),
    Bad("ATs", '["x"]', "element 1 of ARRAY<TIMESTAMP>: not a TIMESTAMP: 'x'"),
    Bad("AByt", '["abc"]', "element 1 of ARRAY<BYTES(MAX)>: not valid base64: 'abc'"),
    Bad("AStr", '{"a": 1}', "not a JSON array"),
]

# Second load: --bytes-encoding hex --timezone America/New_York --commit-timestamp Ct.
ZONE = "America/New_York"
VALID_CLI = [
    Ok("Y", ALL_BYTES.hex(), ALL_BYTES),
    Ok("Y", "\\x00ff", b"\x00\xff"),
    Ok("Y", "0xDEADbeef", b"\xde\xad\xbe\xef"),
    Ok("Y", "", b""),
    Ok("AByt", '["00ff","",null]', [b"\x00\xff", b"", None]),
    Ok("Ts", "2024-07-01 12:00:00", "2024-07-01T16:00:00.000000000Z"),  # EDT, UTC-4
    Ok("Ts", "2024-01-01 12:00:00.123456789", "2024-01-01T17:00:00.123456789Z"),  # EST
    Ok("Ts", "2024-11-03 01:30:00-04:00", "2024-11-03T05:30:00.000000000Z"),  # offset told
    Ok("Ts", "2024-07-01T12:00:00Z", "2024-07-01T12:00:00.000000000Z"),  # offsets win
    Ok("Ts", "2024-07-01T12:00:00+02:00", "2024-07-01T10:00:00.000000000Z"),
    Ok("Ts", "9999-12-31 18:59:59.999999999", "9999-12-31T23:59:59.999999999Z"),
    Ok("ATs", '["2024-07-01 12:00:00",null]', ["2024-07-01T16:00:00.000000000Z", None]),
]
INVALID_CLI = [
    Bad("Y", "abc", "not valid hex"),
    Bad("Y", "zz", "not valid hex"),
    Bad("Y", "AP8=", "not valid hex"),
    Bad("Ts", "2024-03-10 02:30:00", "does not exist in America/New_York"),
    Bad("Ts", "2024-11-03 01:30:00", "happens twice in America/New_York"),  # not guessed
    Bad("Ts", "9999-12-31 19:00:00", "TIMESTAMP out of range"),
    Bad("AByt", '["0"]', "element 1 of ARRAY<BYTES(MAX)>: not valid hex: '0'"),
]


def shows_part(case: Bad) -> bool:
    """Reasons that name a part of the value: the bad element of an array, a length."""
    return TYPES[case.column].startswith("ARRAY") or "too long" in case.reason


def quote(text: str | None) -> str:
    """RFC 4180 field: NULL is an empty unquoted field, every value is quoted."""
    return "" if text is None else '"' + text.replace('"', '""') + '"'


def write_cases(path: Path, columns: list[str], cases: list[Ok | Bad], first_id: int) -> dict:
    """One row per case (its column set, the others NULL), plus one all-NULL row."""
    lines = [",".join(["Id", *columns])]
    ids: dict[int, Ok | Bad | None] = {}
    for i, case in enumerate([*cases, None]):
        row_id = first_id + i
        ids[row_id] = case
        fields = [None if case is None or c != case.column else case.text for c in columns]
        lines.append(",".join([str(row_id), *map(quote, fields)]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ids


def natural(spanner_type: str, v: Any) -> Any:
    """A value read back, as the cases spell them."""
    if v is None:
        return None
    if spanner_type.startswith("ARRAY<"):
        return [natural(spanner_type[6:-1], x) for x in v]
    if spanner_type.startswith("BYTES"):
        return base64.b64decode(v)  # the client returns base64 text
    if spanner_type == "TIMESTAMP":
        return read_back_timestamp_text(v)
    if spanner_type == "JSON":
        return JSON_NULL if v == "null" else json.loads(v)  # read with TO_JSON_STRING
    return v


def canon(v: Any) -> Any:
    """Floats by their repr, so NaN equals NaN and -0.0 differs from 0.0."""
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, list):
        return [canon(x) for x in v]
    if isinstance(v, Decimal):
        return ("decimal", EXACT.normalize(v) if v else Decimal(0))
    return v


def read_rows(db: Any, first: int, last: int) -> dict[int, dict[str, Any]]:
    exprs = [
        f"IF({c} IS NULL, NULL, TO_JSON_STRING({c})) AS {c}" if TYPES[c] == "JSON" else c
        for c in COLUMNS
    ]
    sql = f"SELECT Id, {', '.join(exprs)}, Ct FROM Types WHERE Id BETWEEN {first} AND {last}"
    with db.snapshot() as snap:
        rows = list(snap.execute_sql(sql))
    return {
        r[0]: {
            **{c: natural(TYPES[c], v) for c, v in zip(COLUMNS, r[1:-1])},
            "Ct": read_back_timestamp_text(r[-1]) if r[-1] is not None else None,
        }
        for r in rows
    }


def check(
    db: Any, ids: dict[int, Ok | Bad | None], rejects_path: Path, filled: str | None
) -> dict[int, dict[str, Any]]:
    rows = read_rows(db, min(ids), max(ids))
    rejects = [json.loads(x) for x in rejects_path.read_text(encoding="utf-8").splitlines()]
    by_id = {int(r["record"]): r for r in rejects}  # Id = first_id + record - 1
    first = min(ids)
    problems = []
    for row_id, case in ids.items():
        rej = by_id.get(row_id - first + 1)
        if isinstance(case, Bad):
            if row_id in rows:
                problems.append(f"{case}: loaded as {rows[row_id][case.column]!r}")
            elif rej is None:
                problems.append(f"{case}: neither loaded nor rejected")
            elif not (
                rej["column"] == case.column
                and case.reason in rej["reason"]
                # a long text is cut in the reject file, its length given (loader.rejects)
                and rej["text"] == case.text[:MAX_TEXT]
                and rej.get("text_length", len(case.text)) == len(case.text)
                and (repr(case.text) in rej["reason"] or shows_part(case))
            ):
                problems.append(f"{case}: rejected as {rej['column']}: {rej['reason']}")
            continue
        if rej is not None:
            problems.append(f"{case}: rejected: {rej['column']}: {rej['reason']}")
            continue
        if row_id not in rows:
            problems.append(f"{case}: missing")
            continue
        got = rows[row_id]
        for c in COLUMNS:
            want = case.value if case is not None and c == case.column else None
            if canon(got[c]) != canon(want) or type(got[c]) is not type(want):
                problems.append(f"{case}: column {c} read back as {got[c]!r}, want {want!r}")
        if filled and got[filled] is None:
            problems.append(f"{case}: commit timestamp column {filled} is NULL")
    assert not problems, "\n".join(problems)
    assert len(rejects) == sum(isinstance(c, Bad) for c in ids.values())
    return rows


@pytest.fixture(scope="module")
def types_db(make_module_database: Any) -> Any:
    return make_module_database([DDL])


def test_every_type_round_trips_defaults(types_db: Any, tmp_path: Path) -> None:
    src = tmp_path / "types.csv"
    cases: list[Ok | Bad] = [*VALID_DEFAULT, *INVALID_DEFAULT]
    ids = write_cases(src, COLUMNS, cases, first_id=1)
    # The commit timestamp as text in an allow_commit_timestamp column.
    with open(src, "a", encoding="utf-8") as f:
        f.write(f"{len(ids) + 1}{',' * COLUMNS.index('Ct2')},spanner.commit_timestamp()\n")
    rejects = tmp_path / "rejects.jsonl"
    before = dt.datetime.now(dt.timezone.utc)
    report = load(
        LoadConfig(
            target=Target("test-project", "test-instance", types_db.database_id, emulator=True),
            jobs=(TableJob("Types", (str(src),)),),
            dialect=Dialect(),
            convert=ConvertOptions(commit_timestamp_columns=frozenset({"Ct"})),
            concurrency=1,
            rejects=rejects,
            max_bad_rows=1000,
            state=False,
        ),
        database=types_db,
    )
    after = dt.datetime.now(dt.timezone.utc)
    assert report.exit_code == ExitCode.REJECTED_ROWS
    assert report.tables[0].rows_written == len(VALID_DEFAULT) + 2
    rows = check(types_db, ids, rejects, filled="Ct")
    literal = read_rows(types_db, len(ids) + 1, len(ids) + 1)[len(ids) + 1]
    assert literal["Ct2"] is not None and literal["Ct2"] == literal["Ct"]
    stamps = {r["Ct"] for r in rows.values()} | {literal["Ct"]}
    iso = (before - dt.timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S")
    assert all(iso <= s <= after.strftime("%Y-%m-%dT%H:%M:%S.999999999Z") for s in stamps)


def test_hex_bytes_timezone_and_commit_timestamp_from_the_cli(
    types_db: Any, tmp_path: Path
) -> None:
    src = tmp_path / "types_cli.csv"
    ids = write_cases(src, COLUMNS, [*VALID_CLI, *INVALID_CLI], first_id=10_001)
    rejects = tmp_path / "cli.rejects.jsonl"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "load",
            str(src),
            "--table",
            "Types",
            "--emulator",
            "--database",
            types_db.database_id,
            "--no-state",
            "-q",
            "--bytes-encoding",
            "hex",
            "--timezone",
            ZONE,
            "--commit-timestamp",
            "Ct",
            "--rejects",
            str(rejects),
            "--max-bad-rows",
            "100",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert p.returncode == ExitCode.REJECTED_ROWS, p.stderr
    check(types_db, ids, rejects, filled="Ct")
