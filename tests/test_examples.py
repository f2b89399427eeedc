"""The example shop: schemas/shop.sql, examples/generate.py and the committed examples/shop files.

No emulator needed: the DDL is read with a small regex, the CSVs with pyarrow in the loader's
default dialect (NULL = empty unquoted field, ``""`` = empty string).
"""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import math
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Optional

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from loader.emulator import split_ddl
from loader.types import SpannerType

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "examples" / "shop"
DDL = ROOT / "schemas" / "shop.sql"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "shop_generate", ROOT / "examples" / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


# ---------------------------------------------------------------------------------------------
# A deliberately small DDL reader: enough for schemas/shop.sql, independent of the loader's.


@dataclass(frozen=True)
class DdlColumn:
    name: str
    type: SpannerType
    nullable: bool


@dataclass(frozen=True)
class DdlTable:
    name: str
    columns: tuple[DdlColumn, ...]
    key: tuple[tuple[str, bool], ...]
    """(column, descending) pairs."""
    parent: Optional[str]


_TABLE_RE = re.compile(
    r"CREATE TABLE (\w+) \((.*?)\n\) PRIMARY KEY \(([^)]*)\)"
    r"(?:,\s*INTERLEAVE IN PARENT (\w+))?",
    re.S,
)
_COLUMN_RE = re.compile(r"^\s*(\w+)\s+(ARRAY<[^>]+>|\w+(?:\(\w+\))?)(.*?),?$")


def parse_ddl(text: str) -> dict[str, DdlTable]:
    tables = {}
    for m in _TABLE_RE.finditer(text):
        columns = []
        for line in m.group(2).strip().splitlines():
            cm = _COLUMN_RE.match(line)
            assert cm, line
            nullable = "NOT NULL" not in cm.group(3)
            columns.append(DdlColumn(cm.group(1), SpannerType.parse(cm.group(2)), nullable))
        key = tuple(
            (part.split()[0], part.strip().upper().endswith(" DESC"))
            for part in m.group(3).split(",")
        )
        tables[m.group(1)] = DdlTable(m.group(1), tuple(columns), key, m.group(4))
    return tables


SCHEMA = parse_ddl(DDL.read_text(encoding="utf-8"))


def read_csv(path: Path) -> pa.Table:
    """Every column as string, in the loader's default dialect."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split(",")
    return pacsv.read_csv(
        path,
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in header},
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            null_values=[""],
        ),
    )


@pytest.fixture(scope="module")
def committed() -> dict[str, pa.Table]:
    return {t: read_csv(SHOP / f"{t}.csv") for t in gen.TABLES}


def _keys(table: pa.Table, names: list[str]) -> list[tuple[str, ...]]:
    return list(zip(*(table[n].to_pylist() for n in names)))


# ---------------------------------------------------------------------------------------------
# The schema


def test_ddl_tables_and_keys() -> None:
    assert list(SCHEMA) == ["Customers", "Orders", "OrderItems", "Products"]
    assert len(SCHEMA["Orders"].columns) == 8  # the benchmark's "8-column orders table"
    assert SCHEMA["Orders"].parent == "Customers"
    assert SCHEMA["OrderItems"].parent == "Orders"
    assert SCHEMA["OrderItems"].key == (("CustomerId", False), ("OrderId", False), ("LineNo", True))
    covered = {c.type.code for t in SCHEMA.values() for c in t.columns}
    assert covered >= {
        "INT64",
        "FLOAT64",
        "BOOL",
        "NUMERIC",
        "STRING",
        "BYTES",
        "DATE",
        "TIMESTAMP",
        "JSON",
        "ARRAY",
    }


def test_ddl_statements_split_cleanly() -> None:
    """Each `;`-at-line-end piece is one statement; no comment hides a semicolon."""
    text = DDL.read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.lstrip().startswith("--"):
            assert ";" not in line
    pieces = [p.strip() for p in re.split(r";\s*$", text, flags=re.M)]
    statements = [
        "\n".join(x for x in p.splitlines() if not x.lstrip().startswith("--")).strip()
        for p in pieces
    ]
    statements = [s for s in statements if s]
    assert len(statements) == 7
    assert all(s.startswith("CREATE ") and ";" not in s for s in statements)
    assert split_ddl(text) == statements  # what `spanner-loader load --ddl` applies


def test_csv_headers_match_ddl(committed: dict[str, pa.Table]) -> None:
    for table in gen.TABLES:
        ddl_names = tuple(c.name for c in SCHEMA[table].columns)
        assert gen.COLUMNS[table] == ddl_names
        first_line = (SHOP / f"{table}.csv").read_text(encoding="utf-8").split("\n", 1)[0]
        assert first_line == ",".join(ddl_names)
        assert tuple(committed[table].column_names) == ddl_names


# ---------------------------------------------------------------------------------------------
# Determinism and the committed files


def test_generator_is_deterministic(tmp_path: Path) -> None:
    a = gen.generate(tmp_path / "a")
    b = gen.generate(tmp_path / "b")
    assert a == b
    for table in gen.TABLES:
        assert (tmp_path / "a" / f"{table}.csv").read_bytes() == (
            tmp_path / "b" / f"{table}.csv"
        ).read_bytes()


def test_committed_examples_equal_a_fresh_default_run(tmp_path: Path) -> None:
    counts = gen.generate(tmp_path)
    for table in gen.TABLES:
        fresh = (tmp_path / f"{table}.csv").read_bytes()
        assert fresh == (SHOP / f"{table}.csv").read_bytes(), (
            f"{table}.csv is stale: run python examples/generate.py --out examples/shop"
        )
    assert counts["Customers"] == 200 and counts["Orders"] == 600 and counts["Products"] == 100
    assert 1200 <= counts["OrderItems"] <= 1800


def test_committed_manifest(tmp_path: Path) -> None:
    from loader.manifest import read_manifest

    gen.generate(tmp_path)
    text = (SHOP / "manifest.json").read_text(encoding="utf-8")
    assert (tmp_path / "manifest.json").read_text(encoding="utf-8") == text
    entries = json.loads(text)["tables"]
    assert [e["table_name"] for e in entries] == list(gen.TABLES)  # parents before children
    jobs = read_manifest(SHOP / "manifest.json")  # resolved against the manifest's directory
    assert [j.table for j in jobs] == list(gen.TABLES)
    for job in jobs:
        assert [Path(s) for s in job.sources] == [SHOP / f"{job.table}.csv"]


def test_output_does_not_depend_on_chunking_or_table_selection(tmp_path: Path) -> None:
    sizes = gen.resolve_sizes(customers=30)
    for table in gen.TABLES:
        whole = tmp_path / f"{table}.whole.csv"
        chunked = tmp_path / f"{table}.chunked.csv"
        gen.write_table(table, whole, sizes)
        gen.write_table(table, chunked, sizes, chunk_rows=7)
        assert whole.read_bytes() == chunked.read_bytes()
    # A child table written on its own matches the one of a full run.
    gen.generate(tmp_path / "all", customers=30)
    gen.generate(tmp_path / "items", customers=30, tables=["OrderItems"])
    assert (tmp_path / "all" / "OrderItems.csv").read_bytes() == (
        tmp_path / "items" / "OrderItems.csv"
    ).read_bytes()
    assert not (tmp_path / "items" / "Orders.csv").exists()


def test_gzip_output_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gz"
    assert (
        gen.main(["--out", str(out), "--orders", "90", "--tables", "Customers,Orders", "--gzip"])
        == 0
    )
    assert "Orders: 90 rows" in capsys.readouterr().err
    plain = tmp_path / "plain"
    gen.generate(plain, orders=90, tables=["Orders"])
    assert (
        gzip.decompress((out / "Orders.csv.gz").read_bytes()) == (plain / "Orders.csv").read_bytes()
    )
    assert read_csv(out / "Customers.csv.gz").num_rows == 30  # orders / 3
    again = tmp_path / "again"
    gen.generate(again, orders=90, tables=["Orders"], compress=True)
    assert (again / "Orders.csv.gz").read_bytes() == (out / "Orders.csv.gz").read_bytes()
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert [e["file_patterns"] for e in manifest["tables"]] == [
        ["Customers.csv.gz"],
        ["Orders.csv.gz"],
    ]
    with pytest.raises(SystemExit):
        gen.main(["--out", str(out), "--tables", "Nope"])


# ---------------------------------------------------------------------------------------------
# Keys and references


def test_keys_unique_positive_and_not_sorted(committed: dict[str, pa.Table]) -> None:
    for table in gen.TABLES:
        key_names = [k for k, _ in SCHEMA[table].key]
        keys = _keys(committed[table], key_names)
        assert len(set(keys)) == len(keys), table
        assert all(None not in k for k in keys)
        assert keys != sorted(keys)  # written in generation order: the loader must sort
    for table, column in [("Customers", "CustomerId"), ("Orders", "OrderId")]:
        ids = [int(v) for v in committed[table][column].to_pylist()]
        assert all(0 < i < 2**63 for i in ids)
        assert max(ids) > 2**62  # spread over the whole positive range, not sequential


def test_children_reference_existing_parents(committed: dict[str, pa.Table]) -> None:
    customers = set(committed["Customers"]["CustomerId"].to_pylist())
    orders = set(_keys(committed["Orders"], ["CustomerId", "OrderId"]))
    products = set(committed["Products"]["ProductId"].to_pylist())
    assert {c for c, _ in orders} <= customers
    assert set(_keys(committed["OrderItems"], ["CustomerId", "OrderId"])) <= orders
    assert set(committed["OrderItems"]["ProductId"].to_pylist()) <= products
    # Every order has 1..4 lines numbered from 1.
    lines: dict[tuple[str, str], list[int]] = {}
    for c, o, n in _keys(committed["OrderItems"], ["CustomerId", "OrderId", "LineNo"]):
        lines.setdefault((c, o), []).append(int(n))
    assert set(lines) == orders
    assert all(v == list(range(1, len(v) + 1)) and len(v) <= 4 for v in lines.values())


# ---------------------------------------------------------------------------------------------
# Value formats, per the DDL type, and the edge cases the examples promise

_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6}|\.\d{9})?Z$")
_FORMAT = {
    "INT64": re.compile(r"^-?\d+$"),
    "BOOL": re.compile(r"^(true|false)$"),
    "NUMERIC": re.compile(r"^-?\d+\.\d{2,9}$"),
    "DATE": re.compile(r"^\d{4}-\d\d-\d\d$"),
    "TIMESTAMP": _TS,
}


def _check_value(t: SpannerType, v: str) -> None:
    if t.code in _FORMAT:
        assert _FORMAT[t.code].match(v), (t, v)
    if t.code == "FLOAT64":
        f = float(v)
        assert math.isfinite(f) and float(repr(f)) == f
        assert pa.array([f]).cast(pa.string())[0].as_py() == v  # shortest round-trip form
    elif t.code == "NUMERIC":
        assert abs(Decimal(v)) < Decimal(10) ** 29
    elif t.code == "STRING":
        assert t.length is None or len(v) <= t.length, v
    elif t.code == "BYTES":
        assert base64.b64encode(base64.b64decode(v, validate=True)).decode() == v
    elif t.code == "JSON":
        assert json.dumps(json.loads(v), separators=(",", ":"), ensure_ascii=False) == v
    elif t.code == "ARRAY":
        items = json.loads(v)
        assert isinstance(items, list)
        assert t.element is not None
        for item in items:
            _check_value(t.element, item)


def test_values_match_column_types(committed: dict[str, pa.Table]) -> None:
    for table in gen.TABLES:
        for column in SCHEMA[table].columns:
            values = committed[table][column.name].to_pylist()
            if not column.nullable:
                assert None not in values, (table, column.name)
            for v in values:
                if v is not None:
                    _check_value(column.type, v)


def test_edge_cases_present(committed: dict[str, pa.Table]) -> None:
    def col(table: str, name: str) -> list[Optional[str]]:
        return committed[table][name].to_pylist()

    names = [v for v in col("Customers", "Name") if v]
    assert any("," in v for v in names)
    assert any('"' in v for v in names)
    assert any("\n" in v for v in names)
    assert any(ch in v for v in names for ch in "éß")
    assert any("日本" in v for v in names)
    assert any(any(ord(ch) > 0xFFFF for ch in v) for v in names)  # emoji
    notes = col("OrderItems", "Note")
    assert "" in notes and None in notes and any(v and "\n" in v for v in notes)
    assert "" in col("Customers", "Email") and None in col("Customers", "Email")
    assert "" in col("Customers", "Avatar")  # empty BYTES, distinct from NULL
    avatars = {v.count("=") for v in col("Customers", "Avatar") if v}
    assert avatars >= {0, 1, 2}  # no, one and two padding characters
    for table, name in [("Customers", "Tags"), ("Products", "Sizes")]:
        arrays = col(table, name)
        assert None in arrays and "[]" in arrays
    created = [v for v in col("Customers", "CreatedAt") if v]
    precisions = {len(m.group(1) or ".") - 1 for v in created if (m := _TS.match(v))}
    assert precisions == {0, 6, 9}
    scores = [float(v) for v in col("Customers", "Score") if v]
    assert any(s < 0 for s in scores) and any(s != int(s) for s in scores)
    assert any(v and v.startswith("-") for v in col("Customers", "Balance"))
    assert any(v and len(v.split(".")[1]) > 2 for v in col("Customers", "Balance"))
    for table in gen.TABLES:
        for column in SCHEMA[table].columns:
            if column.nullable:
                assert None in col(table, column.name), (table, column.name)


def test_examples_stay_small() -> None:
    total = sum(p.stat().st_size for p in (ROOT / "examples").rglob("*") if p.is_file())
    assert total < 1_000_000


def test_workflow_matches_the_examples(committed: dict[str, pa.Table]) -> None:
    """The example CI workflow's paths exist and its expected counts are the committed ones."""
    text = (ROOT / "examples" / "github-actions-smoke.yml").read_text(encoding="utf-8")
    assert "gcr.io/cloud-spanner-emulator/emulator" in text
    assert "SPANNER_EMULATOR_HOST: localhost:9010" in text
    paths = re.findall(r"--(?:ddl|manifest) (\S+\.(?:sql|json))\b", text)
    assert len(paths) == 4  # two loads, each with --ddl and --manifest
    for path in paths:
        assert (ROOT / path).is_file(), path
    m = re.search(r"expected = (\{[^}]*\})", text)
    assert m
    assert json.loads(m.group(1)) == {t: committed[t].num_rows for t in gen.TABLES}
