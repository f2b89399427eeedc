"""Real-world export shapes loaded into the emulator and read back exactly: a MySQL tab dump
with \\N and backslash escapes, PostgreSQL COPY in its text format and as CSV (empty = NULL,
"" = empty string, bytea hex, array text), BigQuery CSV (UTC timestamps), an Excel CSV with BOM and CRLF, latin-1
text."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, read_table

DDL = """
CREATE TABLE T (
  Id INT64 NOT NULL, S STRING(40), N NUMERIC, F FLOAT64, B BOOL, D DATE, Ts TIMESTAMP,
  J JSON, Y BYTES(MAX), A ARRAY<STRING(10)>
) PRIMARY KEY (Id)
"""
COLS = ["Id", "S", "N", "F", "B", "D", "Ts", "J", "Y", "A"]
ROW1 = [
    1,
    'tab\there, quote " and é',
    decimal.Decimal("12.345678901"),
    -1.5,
    True,
    dt.date(2024, 2, 29),
    "2024-03-01T12:00:00.123456789Z",
    {"k": [1, 2]},
    b"\x00\xff",
    ["a", "b"],
]


def expected_rows() -> list[list[Any]]:
    return [
        ROW1,
        [2, "", None, None, False, None, None, None, None, None],
        [
            3,
            None,
            decimal.Decimal("0"),
            0.0,
            None,
            dt.date(1, 1, 1),
            "0001-01-01T00:00:00Z",
            None,
            b"",
            [],
        ],
    ]


SAMPLES: dict[str, tuple[list[str], bytes]] = {
    "mysql": (
        ["--dialect", "mysql", "--columns", ",".join(COLS)],
        (
            '1\ttab\\there, quote " and é\t12.345678901\t-1.5\t1\t2024-02-29\t'
            '2024-03-01 12:00:00.123456789\t{"k":[1,2]}\tAP8=\t["a","b"]\n'
            "2\t\t\\N\t\\N\t0\t\\N\t\\N\t\\N\t\\N\t\\N\n"
            "3\t\\N\t0\t0\t\\N\t0001-01-01\t0001-01-01 00:00:00\t\\N\t\t[]\n"
        ).encode(),
    ),
    "postgres": (
        ["--dialect", "postgres", "--header"],
        (
            ",".join(COLS) + "\n"
            '1,"tab\there, quote "" and é",12.345678901,-1.5,t,2024-02-29,'
            '2024-03-01 12:00:00.123456789+00,"{""k"":[1,2]}",\\x00ff,"{a,b}"\n'
            '2,"",,,f,,,,,\n'
            "3,,0,0,,0001-01-01,0001-01-01 00:00:00+00,,\\x,{}\n"
        ).encode(),
    ),
    # COPY T TO ... without FORMAT csv: tabs, backslash escapes, \\N, bytea's backslash doubled
    "postgres-text": (
        ["--dialect", "postgres-text"],
        (
            '1\ttab\\there, quote " and é\t12.345678901\t-1.5\tt\t2024-02-29\t'
            '2024-03-01 12:00:00.123456789+00\t{"k":[1,2]}\t\\\\x00ff\t{a,b}\n'
            "2\t\t\\N\t\\N\tf\t\\N\t\\N\t\\N\t\\N\t\\N\n"
            "3\t\\N\t0\t0\t\\N\t0001-01-01\t0001-01-01 00:00:00+00\t\\N\t\\\\x\t{}\n"
        ).encode(),
    ),
    # bytea as COPY writes it with bytea_output = escape (octal escapes, no \\x)
    "postgres-escape": (
        ["--dialect", "postgres", "--header", "--bytes-encoding", "postgres-escape"],
        (
            ",".join(COLS) + "\n"
            '1,"tab\there, quote "" and é",12.345678901,-1.5,t,2024-02-29,'
            '2024-03-01 12:00:00.123456789+00,"{""k"":[1,2]}",\\000\\377,"{a,b}"\n'
            '2,"",,,f,,,,,\n'
            '3,,0,0,,0001-01-01,0001-01-01 00:00:00+00,,"",{}\n'
        ).encode(),
    ),
    "bigquery": (
        ["--dialect", "bigquery"],
        (
            ",".join(COLS) + "\n"
            '1,"tab\there, quote "" and é",12.345678901,-1.5,true,2024-02-29,'
            '2024-03-01 12:00:00.123456789 UTC,"{""k"":[1,2]}",AP8=,"[""a"",""b""]"\n'
            '2,"",,,false,,,,,\n'
            '3,,0,0,,0001-01-01,0001-01-01 00:00:00 UTC,,"",[]\n'
        ).encode(),
    ),
    "excel": (
        ["--dialect", "excel"],
        b"\xef\xbb\xbf"
        + (
            ",".join(COLS) + "\r\n"
            '1,"tab\there, quote "" and é",12.345678901,-1.5,TRUE,2024-02-29,'
            '2024-03-01T12:00:00.123456789Z,"{""k"":[1,2]}",AP8=,"[""a"",""b""]"\r\n'
            '2,"",,,FALSE,,,,,\r\n'
            '3,,0,0,,0001-01-01,0001-01-01T00:00:00Z,,"",[]\r\n'
        ).encode(),
    ),
    "latin-1": (
        ["--encoding", "latin-1"],
        (
            ",".join(COLS) + "\n"
            '1,"tab\there, quote "" and é",12.345678901,-1.5,yes,2024-02-29,'
            '2024-03-01T12:00:00.123456789Z,"{""k"":[1,2]}",AP8=,"[""a"",""b""]"\n'
            '2,"",,,no,,,,,\n'
            '3,,0,0,,0001-01-01,0001-01-01T00:00:00Z,,"",[]\n'
        ).encode("latin-1"),
    ),
}


def normalise(row: tuple[Any, ...]) -> list[Any]:
    out = list(row)
    ts = out[6]
    if ts is not None:
        nanos = getattr(ts, "nanosecond", 0) or ts.microsecond * 1000
        text = f"{ts.year:04d}" + ts.strftime("-%m-%dT%H:%M:%S")
        out[6] = text + (f".{nanos:09d}".rstrip("0") if nanos else "") + "Z"
    if out[7] is not None:
        out[7] = json.loads(json.dumps(out[7]))
    if out[8] is not None:
        out[8] = base64.b64decode(out[8])
    if out[9] is not None:
        out[9] = list(out[9])
    return out


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_export_lands_exactly(name: str, make_database: Any, tmp_path: Path) -> None:
    db = make_database([DDL])
    args, data = SAMPLES[name]
    src = tmp_path / f"{name}.csv"
    src.write_bytes(data)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "load",
            str(src),
            "--table",
            "T",
            "--emulator",
            "--database",
            db.database_id,
            "--no-state",
            "-q",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    got = [normalise(r) for r in read_table(db, "T", COLS)]
    assert got == expected_rows()
