"""The loader's key order is Spanner's: tables with keys of every kind (each key type ASC and
DESC, NULLable, and composites mixing them) get rows inserted in random order, are read back
whole (a read returns rows in key order), and loader.sort must give the same order, with the
compiled key bytes and with the multi-column pyarrow sort.

Each row carries its position in the input (``Pos``), so the orders are compared as lists of
positions, with no reading back of values involved.

A PostgreSQL-dialect database is checked too: its primary keys have no DESC parts and no NULLs
(a key column is NOT NULL there, as in PostgreSQL), and its order is GoogleSQL's for the rest,
NaN below every number included.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import os
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pytest
from conftest import INSTANCE, native_parts, read_table

from loader.schema import KeyPart
from loader.sort import sort_order

# Each key type: (DDL type, Arrow type the converters make, values to draw from). The pools
# hold the edges: NaN (one key however many), -0.0 next to 0.0 (one key: only one of them is
# kept), infinities, extremes, empty strings, prefixes, 0x00 bytes, non-ASCII text.
_NAN = float("nan")
_POOLS: dict[str, tuple[str, pa.DataType, list[Any]]] = {
    "STRING": (
        "STRING(MAX)",
        pa.string(),
        [
            "",
            "a",
            "a\x00",
            "a\x00b",
            "a\x01",
            "ab",
            "b",
            "Z",
            "é",
            "\uffff",
            "\U0001f600",
            "ÖSTERN",
        ],
    ),
    "BYTES": (
        "BYTES(MAX)",
        pa.binary(),
        [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"a", b"a\x00", b"ab", b"\x7f", b"\x80", b"\xff"],
    ),
    "INT64": ("INT64", pa.int64(), [0, 1, -1, 2**63 - 1, -(2**63), 2**31, -(2**31), 255, 256]),
    "FLOAT64": (
        "FLOAT64",
        pa.float64(),
        [_NAN, -math.inf, math.inf, 0.0, -0.0, 1.5, -1.5, 5e-324, -1e308, 2.0**53 + 2],
    ),
    "FLOAT32": ("FLOAT32", pa.float32(), [_NAN, -math.inf, math.inf, 0.0, -0.0, 1.5, -2.25]),
    "BOOL": ("BOOL", pa.bool_(), [False, True]),
    "DATE": (
        "DATE",
        pa.date32(),
        [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(9999, 12, 31)],
    ),
    "TIMESTAMP": (
        "TIMESTAMP",
        pa.string(),  # the loader's canonical fixed-width text
        [
            "0001-01-01T00:00:00.000000000Z",
            "1969-12-31T23:59:59.999999999Z",
            "1970-01-01T00:00:00.000000000Z",
            "2024-02-29T12:00:00.000000001Z",
            "9999-12-31T23:59:59.999999999Z",
        ],
    ),
    "NUMERIC": (
        "NUMERIC",
        pa.decimal128(38, 9),
        [
            Decimal("0"),
            Decimal("-0.000000001"),
            Decimal("0.000000001"),
            Decimal("99999999999999999999999999999.999999999"),
            Decimal("-99999999999999999999999999999.999999999"),
            Decimal("-1.5"),
            Decimal("12345"),
        ],
    ),
}

# Tables: name -> key parts (column type, DESC, NULLable). Every type alone ASC and DESC with
# NULLs, and composites where an early part repeats so the later parts decide.
_TABLES: dict[str, list[tuple[str, bool, bool]]] = {
    **{f"{t}Asc": [(t, False, True)] for t in _POOLS},
    **{f"{t}Desc": [(t, True, True)] for t in _POOLS},
    "StrIntDesc": [("STRING", False, False), ("INT64", True, False)],  # the wide table's key
    "BytesDescFloatDate": [("BYTES", True, True), ("FLOAT64", False, True), ("DATE", True, True)],
    "BoolTsNumStr": [
        ("BOOL", False, True),
        ("TIMESTAMP", True, True),
        ("NUMERIC", False, True),
        ("STRING", True, True),
    ],
    "StrDescStrFloat32": [("STRING", True, True), ("STRING", False, True), ("FLOAT32", True, True)],
}

_ROWS = 60


def _ddl(name: str, parts: list[tuple[str, bool, bool]]) -> str:
    cols = ", ".join(
        f"K{i} {_POOLS[t][0]}{'' if nullable else ' NOT NULL'}"
        for i, (t, _, nullable) in enumerate(parts)
    )
    key = ", ".join(f"K{i}{' DESC' if desc else ''}" for i, (_, desc, _) in enumerate(parts))
    return f"CREATE TABLE {name} ({cols}, Pos INT64) PRIMARY KEY ({key})"


def _same(t: str) -> Callable[[Any], Any]:
    """What makes two values one key: NaN is NaN, -0.0 is 0.0."""
    if t.startswith("FLOAT"):
        return lambda v: "nan" if v is not None and math.isnan(v) else v
    return lambda v: v


def _rows(parts: list[tuple[str, bool, bool]], rng: np.random.Generator) -> list[tuple]:
    """Up to _ROWS distinct keys in random order (a repeated key is dropped, as Spanner would
    refuse it)."""
    rows, seen = [], set()
    for _ in range(_ROWS * 3):
        row = []
        for t, _, nullable in parts:
            pool = _POOLS[t][2]
            if nullable and rng.random() < 0.15:
                row.append(None)
            else:
                row.append(pool[int(rng.integers(0, len(pool)))])
        same = tuple(_same(t)(v) for (t, _, _), v in zip(parts, row))
        if same not in seen:
            seen.add(same)
            rows.append(tuple(row))
        if len(rows) == _ROWS:
            break
    return rows


def _wire(t: str, v: Any) -> Any:
    """A value as the client's mutation takes it."""
    if v is None:
        return None
    if t == "BYTES":
        return base64.b64encode(v)  # the client sends bytes as given: base64 text
    return v


@pytest.fixture(params=["pyarrow", "native"])
def sorter(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from native_parts(request.param)


@pytest.fixture(scope="module")
def key_tables(make_module_database: Any) -> dict[str, tuple[list[tuple], list[int]]]:
    """Each table's rows (in insert order) and the positions Spanner reads them back in."""
    db = make_module_database([";\n".join(_ddl(n, p) for n, p in _TABLES.items())])
    rng = np.random.default_rng(2024)
    out = {}
    for name, parts in _TABLES.items():
        rows = _rows(parts, rng)
        columns = [f"K{i}" for i in range(len(parts))] + ["Pos"]
        values = [
            [_wire(t, v) for (t, _, _), v in zip(parts, row)] + [pos]
            for pos, row in enumerate(rows)
        ]
        with db.batch() as batch:
            batch.insert(name, columns, values)
        spanner_order = [r[0] for r in read_table(db, name, ["Pos"])]
        assert sorted(spanner_order) == list(range(len(rows)))
        out[name] = (rows, spanner_order)
    return out


@pytest.mark.parametrize("name", list(_TABLES))
def test_sort_gives_the_emulators_key_order(
    name: str, key_tables: dict[str, tuple[list[tuple], list[int]]], sorter: str
) -> None:
    parts = _TABLES[name]
    rows, spanner_order = key_tables[name]
    table = pa.table(
        {f"K{i}": pa.array([r[i] for r in rows], _POOLS[t][1]) for i, (t, _, _) in enumerate(parts)}
    )
    key = [KeyPart(f"K{i}", desc=desc) for i, (_, desc, _) in enumerate(parts)]
    order, distinct = sort_order(table, key)
    assert order.to_pylist() == spanner_order
    assert distinct or sorter == "pyarrow" or all(t == "INT64" for t, _, _ in parts)


# PostgreSQL dialect: (PG type, the GoogleSQL type whose values and Arrow type it takes).
_PG_TYPES = {
    "varchar": "STRING",
    "bytea": "BYTES",
    "bigint": "INT64",
    "float8": "FLOAT64",
    "float4": "FLOAT32",
    "bool": "BOOL",
    "date": "DATE",
    "timestamptz": "TIMESTAMP",
}  # numeric cannot be a key column there
_PG_TABLES: dict[str, list[str]] = {
    **{f"k_{t}": [t] for t in _PG_TYPES},
    "k_mixed": ["varchar", "float8", "bytea"],
    "k_mixed2": ["bool", "timestamptz", "float4", "bigint"],
}


@pytest.fixture(scope="module")
def pg_key_tables(
    make_module_database: Any, spanner_client: Any
) -> tuple[Any, dict[str, tuple[list[tuple], list[int]]]]:
    from google.cloud.spanner_admin_database_v1.types import DatabaseDialect

    make_module_database([])  # the test instance exists from here on
    db = spanner_client.instance(INSTANCE).database(
        f"pgkeys{os.getpid() % 10000}", database_dialect=DatabaseDialect.POSTGRESQL
    )
    db.create().result(120)
    db.update_ddl(
        [
            f"CREATE TABLE {name} ("
            + ", ".join(f"k{i} {t}" for i, t in enumerate(types))
            + ", pos bigint, PRIMARY KEY ("
            + ", ".join(f"k{i}" for i in range(len(types)))
            + "))"
            for name, types in _PG_TABLES.items()
        ]
    ).result(120)
    rng = np.random.default_rng(7)
    out = {}
    for name, types in _PG_TABLES.items():
        parts = [(_PG_TYPES[t], False, False) for t in types]
        rows = _rows(parts, rng)
        columns = [f"k{i}" for i in range(len(types))] + ["pos"]
        values = [
            [_wire(t, v) for (t, _, _), v in zip(parts, row)] + [pos]
            for pos, row in enumerate(rows)
        ]
        with db.batch() as batch:
            batch.insert(name, columns, values)
        spanner_order = [r[0] for r in read_table(db, name, ["pos"])]
        assert sorted(spanner_order) == list(range(len(rows)))
        out[name] = (rows, spanner_order)
    return db, out


@pytest.mark.parametrize("name", list(_PG_TABLES))
def test_sort_gives_the_postgresql_dialects_key_order(
    name: str, pg_key_tables: tuple[Any, dict[str, tuple[list[tuple], list[int]]]], sorter: str
) -> None:
    types = [_PG_TYPES[t] for t in _PG_TABLES[name]]
    rows, spanner_order = pg_key_tables[1][name]
    table = pa.table(
        {f"k{i}": pa.array([r[i] for r in rows], _POOLS[t][1]) for i, t in enumerate(types)}
    )
    order, _ = sort_order(table, [KeyPart(f"k{i}") for i in range(len(types))])
    assert order.to_pylist() == spanner_order


def test_postgresql_dialect_keys_are_never_null(
    pg_key_tables: tuple[Any, dict[str, tuple[list[tuple], list[int]]]],
) -> None:
    """Why the loader needs no PostgreSQL NULL placement (NULLS LAST in ASC there) for keys:
    a NULL in a primary key column is refused."""
    from google.api_core import exceptions as gexc

    db = pg_key_tables[0]
    with pytest.raises(gexc.GoogleAPICallError, match="null value"), db.batch() as batch:
        batch.insert("k_bigint", ["k0", "pos"], [[None, 0]])
