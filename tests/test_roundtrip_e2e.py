"""Hypothesis round trip through the emulator: random typed rows are written as CSV the way
each exporting system writes them (writers here, sharing no code with the loader), loaded with
``loader.load`` and read back: every value must come back equal, NULLs and empty strings
apart, no row rejected or lost.

What a dialect cannot carry is left out of its rows:

* mysql: (``INTO OUTFILE`` escapes the delimiter, LF, NUL and the backslash and writes a CR
  as is: text columns are not last, so no value's CR meets the line's LF); no NaN / Infinity
  (MySQL's DOUBLE has none); BYTES as ``HEX()`` (raw BLOB bytes are not text); microsecond timestamps.
* postgres: microsecond timestamps (array elements too); BYTES as ``\\x`` hex (bytea's output).
* bigquery: microsecond timestamps; FLOAT32 printed as the FLOAT64 it widens to.
* excel: no NaN / Infinity (a cell holds #NUM! instead).

ARRAY columns are JSON arrays, but for postgres, which writes them as ``array_out`` does
(``{1,NULL,"a b"}``; :func:`pg_array` here).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import itertools
import json
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from conftest import read_back_timestamp_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader import LoadConfig, TableJob, Target, load
from loader.convert import ConvertOptions
from loader.errors import ExitCode
from loader.parse import dialect_from_preset
from loader.schema import read_schema

COLUMNS = {
    "I": "INT64",
    "F": "FLOAT64",
    "F32": "FLOAT32",
    "N": "NUMERIC",
    "B": "BOOL",
    "S": "STRING(MAX)",
    "S2": "STRING(MAX)",
    "Y": "BYTES(MAX)",
    "D": "DATE",
    "Ts": "TIMESTAMP",
    "J": "JSON",
    "AInt": "ARRAY<INT64>",
    "AStr": "ARRAY<STRING(MAX)>",
    "AFlt": "ARRAY<FLOAT64>",
    "ANum": "ARRAY<NUMERIC>",
    "ATs": "ARRAY<TIMESTAMP>",
}
NAMES = list(COLUMNS)
DDL = (
    "CREATE TABLE Roundtrip (Id INT64 NOT NULL, "
    + ", ".join(f"{c} {t}" for c, t in COLUMNS.items())
    + ") PRIMARY KEY (Id)"
)
DIALECTS = ["csv", "mysql", "postgres", "bigquery", "excel"]
EPOCH = dt.datetime(1970, 1, 1)
MIN_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
MAX_N = Decimal("99999999999999999999999999999.999999999")
NEG_MAX_N = Decimal("-99999999999999999999999999999.999999999")  # not -MAX_N: that rounds
EXACT = decimal.Context(prec=60)  # the default context rounds to 28 digits


# -- the model: Python values per column ------------------------------------------------------

# Characters that CSV writers and parsers treat specially, plus the private-use code points
# the loader uses internally for MySQL escapes, a BOM and line separators.
SPECIAL = list(",\"\n\r\\\t' ;|\x00\x1a") + [
    "\\N",
    "\r\n",
    "N",
    "NULL",
    "😀",
    "é",
    "𝄞",
    "\ufeff",
    "\u2028",
    "\x85",
    "\ue001",
    "\ue002",
    "\ue003",
    "\ue004",
    "\ue005",
    "\ue006",
]


def texts(mysql: bool, max_size: int = 12) -> st.SearchStrategy[str]:
    del mysql  # every dialect carries every character (MySQL's raw CR: loader.parse.escapes)
    pieces = st.one_of(st.sampled_from(SPECIAL), st.characters(codec="utf-8"))
    return st.lists(pieces, max_size=max_size).map("".join)


def timestamps(micros: bool) -> st.SearchStrategy[tuple[int, int]]:
    """(seconds since the epoch, nanoseconds), 0001-01-01 .. 9999-12-31T23:59:59.999999999."""
    nanos = st.integers(0, 999_999).map(lambda u: u * 1000) if micros else st.integers(0, 10**9 - 1)
    edges = st.sampled_from([MIN_SECONDS, MAX_SECONDS, -1, 0])
    return st.tuples(st.one_of(edges, st.integers(MIN_SECONDS, MAX_SECONDS)), nanos)


def ts_text(v: tuple[int, int]) -> str:
    when = EPOCH + dt.timedelta(seconds=v[0])
    return f"{when.year:04d}" + when.strftime("-%m-%dT%H:%M:%S") + f".{v[1]:09d}Z"


def floats(finite: bool, width: int = 64) -> st.SearchStrategy[float]:
    return st.floats(width=width, allow_nan=not finite, allow_infinity=not finite)


def json_values(mysql: bool) -> st.SearchStrategy[Any]:
    leaves = (
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**63 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | texts(mysql, max_size=6)
    )
    return st.recursive(
        leaves,
        lambda kids: (
            st.lists(kids, max_size=3) | st.dictionaries(texts(mysql, 4), kids, max_size=3)
        ),
        max_leaves=8,
    ).filter(lambda v: v is not None)  # a top-level JSON null would read back as SQL NULL


def rows(dialect: str) -> st.SearchStrategy[list[dict[str, Any]]]:
    mysql = dialect == "mysql"
    finite = dialect in ("mysql", "excel")
    micros = dialect in ("mysql", "postgres", "bigquery")

    def nullable(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.none() | s

    def arrays(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return nullable(st.lists(nullable(s), max_size=4))

    # From integers: st.decimals rounds 38-digit values in the default 28-digit context.
    decimals = st.one_of(
        st.sampled_from([MAX_N, NEG_MAX_N, Decimal("1e-9"), Decimal("-1e-9")]),
        st.integers(-(10**38) + 1, 10**38 - 1).map(lambda i: Decimal(f"{i}e-9")),
    )
    row = st.fixed_dictionaries(
        {
            "I": nullable(st.integers(-(2**63), 2**63 - 1)),
            "F": nullable(floats(finite)),
            "F32": nullable(floats(finite, width=32)),
            "N": nullable(decimals),
            "B": nullable(st.booleans()),
            "S": nullable(texts(mysql)),
            "S2": nullable(st.sampled_from(["", "\\N", "NULL", '""', "\\", " "])),
            "Y": nullable(st.binary(max_size=12)),
            "D": nullable(st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
            "Ts": nullable(timestamps(micros)),
            "J": nullable(json_values(mysql)),
            "AInt": arrays(st.integers(-(2**63), 2**63 - 1)),
            "AStr": arrays(texts(mysql, max_size=6)),
            "AFlt": arrays(floats(finite=False)),
            "ANum": arrays(decimals),
            "ATs": arrays(timestamps(micros=dialect == "postgres")),
        }
    )
    return st.lists(row, min_size=1, max_size=8)


# -- CSV writers, one per exporting system ----------------------------------------------------


def json_array(values: list[Any], item: Callable[[Any], str]) -> str:
    return "[" + ",".join("null" if v is None else item(v) for v in values) + "]"


def common_text(col: str, v: Any, style: dict[str, Any]) -> str:
    """A non-NULL value as the exporting system spells it (before CSV quoting)."""
    t = COLUMNS[col]
    if t == "BOOL":
        return style["bools"][v]
    if t == "FLOAT64":
        return style["float"](v)
    if t == "FLOAT32":
        return style["float"](float(v)) if style.get("f32_as_double") else f32_text(v)
    if t == "NUMERIC":
        return format(v, "f")
    if t.startswith("BYTES"):
        return style["bytes"](v)
    if t == "DATE":
        return v.isoformat()
    if t == "TIMESTAMP":
        return style["ts"](v)
    if t == "JSON":
        return json.dumps(v, ensure_ascii=style.get("ascii", False))
    if t.startswith("ARRAY<") and "array" in style:
        return str(style["array"](t, v))
    if t == "ARRAY<INT64>":
        return json_array(v, str)
    if t == "ARRAY<STRING(MAX)>":
        return json_array(v, lambda s: json.dumps(s, ensure_ascii=False))
    if t == "ARRAY<FLOAT64>":
        return json_array(v, lambda f: json.dumps(f))  # NaN, Infinity, -Infinity
    if t == "ARRAY<NUMERIC>":
        return json_array(v, lambda d: json.dumps(format(d, "f")) if d < 0 else format(d, "f"))
    if t == "ARRAY<TIMESTAMP>":
        return json_array(v, lambda x: '"' + rfc3339(x, 0) + '"')
    return str(v)


def f32_text(v: float) -> str:
    """Shortest text that reads back as the same float32 (what a REAL column prints)."""
    return str(np.float32(v)) if math.isfinite(v) else repr(v)


def rfc3339(v: tuple[int, int], offset_minutes: int, sep: str = "T") -> str:
    """``v`` in local time at the offset (UTC when the local time would leave 0001..9999)."""
    utc = EPOCH + dt.timedelta(seconds=v[0])
    try:
        local = utc + dt.timedelta(minutes=offset_minutes)
    except OverflowError:
        local, offset_minutes = utc, 0
    if not 1 <= local.year <= 9999:
        local, offset_minutes = utc, 0
    frac = f".{v[1]:09d}".rstrip("0").rstrip(".")
    zone = "Z"
    if offset_minutes:
        sign = "+" if offset_minutes > 0 else "-"
        zone = f"{sign}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
    return f"{local.year:04d}" + local.strftime(f"-%m-%d{sep}%H:%M:%S") + frac + zone


def plain_ts(v: tuple[int, int], suffix: str = "", micros: bool = True) -> str:
    utc = EPOCH + dt.timedelta(seconds=v[0])
    frac = f".{v[1] // 1000:06d}" if micros else f".{v[1]:09d}"
    frac = frac.rstrip("0").rstrip(".")
    return f"{utc.year:04d}" + utc.strftime("-%m-%d %H:%M:%S") + frac + suffix


def rfc4180(text: str | None, always: bool = False) -> str:
    """Excel / BigQuery / PostgreSQL CSV quoting: NULL is an empty unquoted field."""
    if text is None:
        return ""
    if always or text == "" or any(c in text for c in ',"\r\n') or text == "\\.":
        return '"' + text.replace('"', '""') + '"'
    return text


def write_rfc4180(
    rows: list[dict[str, Any]], style: dict[str, Any], header: bool, eol: str, bom: bool
) -> bytes:
    lines = [",".join(["Id", *NAMES])] if header else []
    for row in rows:
        fields = [str(row["Id"])]
        for c in NAMES:
            v = row[c]
            fields.append(rfc4180(None if v is None else common_text(c, v, style)))
        lines.append(",".join(fields))
    data = (eol.join(lines) + eol).encode("utf-8")
    return b"\xef\xbb\xbf" + data if bom else data


def mysql_escape(text: str) -> str:
    """SELECT ... INTO OUTFILE: backslash before the escape char, tab and LF; NUL as \\0."""
    out = text.replace("\\", "\\\\").replace("\t", "\\\t").replace("\n", "\\\n")
    return out.replace("\x00", "\\0")


def write_mysql(rows: list[dict[str, Any]]) -> bytes:
    style = {
        "bools": {True: "1", False: "0"},
        "float": lambda f: "-0" if f == 0 and math.copysign(1, f) < 0 else repr(f),
        "bytes": lambda b: b.hex().upper(),  # SELECT HEX(col): raw BLOB bytes are not text
        "ts": lambda v: plain_ts(v),
    }
    lines = []
    for row in rows:
        fields = [str(row["Id"])]
        for c in NAMES:
            v = row[c]
            fields.append("\\N" if v is None else mysql_escape(common_text(c, v, style)))
        lines.append("\t".join(fields))
    return ("\n".join(lines) + "\n").encode("utf-8")


def pg_float(f: float) -> str:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return "-0" if f == 0 and math.copysign(1, f) < 0 else repr(f)


def pg_ts(v: tuple[int, int]) -> str:
    return plain_ts(v, "+00")


def pg_array(t: str, values: list[Any]) -> str:
    """An array as PostgreSQL's array_out writes it: an element is quoted when it is empty,
    reads NULL, or holds a brace, comma, quote, backslash or white space; inside quotes a
    backslash escapes quotes and backslashes."""
    item = {
        "ARRAY<INT64>": str,
        "ARRAY<STRING(MAX)>": str,
        "ARRAY<FLOAT64>": pg_float,
        "ARRAY<NUMERIC>": lambda d: format(d, "f"),
        "ARRAY<TIMESTAMP>": pg_ts,
    }[t]

    def one(v: Any) -> str:
        if v is None:
            return "NULL"
        text = item(v)
        if text == "" or text.upper() == "NULL" or re.search(r'[{},"\\\s]', text):
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return text

    return "{" + ",".join(one(v) for v in values) + "}"


def write(dialect: str, rows: list[dict[str, Any]], offsets: list[int]) -> bytes:
    if dialect == "mysql":
        return write_mysql(rows)
    if dialect == "postgres":  # COPY ... TO ... (FORMAT csv): no header
        style = {
            "bools": {True: "t", False: "f"},
            "float": pg_float,
            "bytes": lambda b: "\\x" + b.hex(),
            "ts": pg_ts,
            "array": pg_array,
        }
        return write_rfc4180(rows, style, header=False, eol="\n", bom=False)
    if dialect == "bigquery":  # EXTRACT DATA ... CSV
        style = {
            "bools": {True: "true", False: "false"},
            "float": pg_float,
            "bytes": lambda b: base64.b64encode(b).decode(),
            "ts": lambda v: plain_ts(v, " UTC"),
            "f32_as_double": True,  # BigQuery has only FLOAT64
        }
        return write_rfc4180(rows, style, header=True, eol="\n", bom=False)
    if dialect == "excel":  # "CSV UTF-8": BOM, CRLF
        style = {
            "bools": {True: "TRUE", False: "FALSE"},
            "float": repr,
            "bytes": lambda b: base64.b64encode(b).decode(),
            "ts": lambda v: plain_ts(v, micros=False),
        }
        return write_rfc4180(rows, style, header=True, eol="\r\n", bom=True)
    # The loader's own default: RFC 4180 with RFC 3339 timestamps at various offsets.
    it = iter(itertools.cycle(offsets or [0]))
    style = {
        "bools": {True: "true", False: "false"},
        "float": repr,
        "bytes": lambda b: base64.b64encode(b).decode(),
        "ts": lambda v: rfc3339(v, next(it)),
        "ascii": True,
    }
    return write_rfc4180(rows, style, header=True, eol="\n", bom=False)


# -- reading back -----------------------------------------------------------------------------


def canon(t: str, v: Any) -> Any:
    """A model or read-back value in one comparable form."""
    if v is None:
        return None
    if t.startswith("ARRAY<"):
        return [canon(t[6:-1], x) for x in v]
    if t in ("FLOAT64", "FLOAT32"):
        return repr(float(v))  # NaN equals NaN, -0.0 differs from 0.0
    if t == "NUMERIC":
        return EXACT.normalize(Decimal(v)) if v else Decimal(0)
    if t == "TIMESTAMP":
        return ts_text(v) if isinstance(v, tuple) else read_back_timestamp_text(v)
    return v


def read_back(db: Any, first: int, last: int) -> dict[int, dict[str, Any]]:
    exprs = [
        f"IF({c} IS NULL, NULL, TO_JSON_STRING({c})) AS {c}" if t == "JSON" else c
        for c, t in COLUMNS.items()
    ]
    sql = f"SELECT Id, {', '.join(exprs)} FROM Roundtrip WHERE Id BETWEEN {first} AND {last}"
    with db.snapshot() as snap:
        result = list(snap.execute_sql(sql))
    out = {}
    for r in result:
        row = dict(zip(NAMES, r[1:]))
        if row["Y"] is not None:
            row["Y"] = base64.b64decode(row["Y"])  # the client returns BYTES as base64
        if row["J"] is not None:
            row["J"] = json.loads(row["J"])
        out[r[0]] = {c: canon(COLUMNS[c], v) for c, v in row.items()}
    return out


# -- the test ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def roundtrip_db(make_module_database: Any) -> Any:
    return make_module_database([DDL])


@pytest.fixture(scope="module")
def schema(roundtrip_db: Any) -> Any:
    return read_schema(roundtrip_db, "Roundtrip")


_ids = itertools.count(1)


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_roundtrip(
    dialect: str, data: st.DataObject, roundtrip_db: Any, schema: Any, tmp_path: Path
) -> None:
    model = data.draw(rows(dialect), label="rows")
    offsets = data.draw(
        st.lists(st.sampled_from([0, 60, -60, 330, -480, 840, -720, 1]), max_size=3),
        label="offsets",
    )
    base = next(_ids) * 100  # a fresh key range per example: nothing to delete
    for i, row in enumerate(model):
        row["Id"] = base + i
    path = tmp_path / f"rt-{base}.csv"
    path.write_bytes(write(dialect, model, offsets))
    overrides: dict[str, Any] = {}
    if dialect == "mysql":  # HEX(); the postgres preset reads bytea hex itself
        overrides["bytes_encoding"] = "hex"
    parse = dialect_from_preset(dialect, **overrides)
    rejects = tmp_path / f"rt-{base}.rejects.jsonl"
    config = LoadConfig(
        target=Target("test-project", "test-instance", roundtrip_db.database_id, emulator=True),
        jobs=(TableJob("Roundtrip", (str(path),)),),
        dialect=parse,
        convert=ConvertOptions.from_dialect(parse),
        concurrency=1,
        rejects=rejects,
        max_bad_rows=1000,
        state=False,
    )
    report = load(config, database=roundtrip_db, schemas={"Roundtrip": schema})
    assert report.exit_code == ExitCode.OK, rejects.read_text(encoding="utf-8")
    got = read_back(roundtrip_db, base, base + 99)
    want = {row["Id"]: {c: canon(COLUMNS[c], row[c]) for c in NAMES} for row in model}
    assert sorted(got) == sorted(want)
    for key, row in want.items():
        for c in NAMES:
            assert got[key][c] == row[c], (key, c, got[key][c], row[c], path.read_bytes())
