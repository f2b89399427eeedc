"""What a command imports: a command pays only for the modules it uses (issue "Half the fixed
cost"). Each case runs the command line in a fresh interpreter and lists the heavy modules
that ended up in ``sys.modules``; no time is measured here (benchmarks/startup.py does that).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, INSTANCE, PROJECT, ROOT, SHOP_DDL

HEAVY = (
    "pyarrow",
    "numpy",
    "grpc",
    "google.protobuf",
    "google.api_core",
    "google.cloud.spanner",
    "google.cloud.spanner_v1",
    "google.cloud.storage",
    "tenacity",
    "loader.bench",
    "benchmarks",
    "apache_beam",
    "loader.beam",
)
GCS_AND_BENCH = ("google.cloud.storage", "loader.bench", "benchmarks", "apache_beam", "loader.beam")

_CHILD = """
import json, sys
sys.argv = ["spanner-loader"] + json.loads(sys.argv[1])
from loader.cli import _run
code = _run()
print("\\nIMPORTED " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def imported_by(args: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """Run ``spanner-loader ARGS`` in a fresh interpreter: its exit code and the modules it
    imported."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("IMPORTED ")]
    assert line, proc.stdout + proc.stderr
    found = json.loads(line[-1][len("IMPORTED ") :])
    return found["code"], set(found["modules"])


def heavy_in(modules: set[str], families: tuple[str, ...] = HEAVY) -> set[str]:
    return {m for m in modules if any(m == f or m.startswith(f + ".") for f in families)}


@pytest.mark.parametrize(
    "args",
    [["--help"], ["load", "--help"], ["validate", "--help"], ["verify", "--help"]],
)
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    code, modules = imported_by(args)
    assert code == 0
    assert heavy_in(modules) == set()


def test_a_usage_error_imports_nothing_heavy() -> None:
    code, modules = imported_by(["load", "x.csv"])  # no --table: refused before any work
    assert code == 2
    assert heavy_in(modules) == set()


def test_import_loader_is_light() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, loader; print(sorted(m for m in sys.modules if m.startswith('loader')))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout
    assert out.strip() == "['loader']"


def test_the_library_names_still_resolve() -> None:
    import loader

    assert loader.load.__module__ == "loader.pipeline"
    assert loader.LoadConfig.__module__ == "loader.config"
    assert {"load", "LoadConfig", "Target", "TableJob", "LoadReport"} <= set(dir(loader))
    with pytest.raises(AttributeError):
        loader.no_such_name  # noqa: B018


def _target(db: Any) -> list[str]:
    return ["--project", PROJECT, "--instance", INSTANCE, "--database", db.database_id]


def test_validate_of_a_local_file_imports_no_storage_client_or_bench_code(
    spanner_emulator: str, shop_db: Any, tmp_path: Path
) -> None:
    code, modules = imported_by(
        ["validate", str(EXAMPLES / "Customers.csv"), "--table", "Customers", "-q"]
        + ["--rejects", str(tmp_path / "rejects.csv")]
        + _target(shop_db),
        env={"SPANNER_EMULATOR_HOST": spanner_emulator},
    )
    assert code == 0  # the schema was read: through loader/wire, not the client library
    assert heavy_in(modules, ("google.cloud.spanner", "google.cloud.spanner_v1")) == set()
    assert heavy_in(modules, GCS_AND_BENCH) == set()


def test_a_local_load_imports_no_storage_client_or_bench_code(
    spanner_emulator: str, make_database: Any, tmp_path: Path
) -> None:
    code, modules = _load_customers(make_database(), spanner_emulator, tmp_path)
    assert code == 0
    assert heavy_in(modules, GCS_AND_BENCH) == set()


def _load_customers(db: Any, emulator: str, tmp_path: Path) -> tuple[int, set[str]]:
    """``spanner-loader load`` of examples/shop/Customers.csv into ``db`` (as
    :func:`imported_by`)."""
    return imported_by(
        ["load", str(EXAMPLES / "Customers.csv"), "--table", "Customers", "-q"]
        + ["--rejects", str(tmp_path / "rejects.csv")]
        + _target(db),
        env={"SPANNER_EMULATOR_HOST": emulator},
    )


def test_a_local_load_reaches_its_commits_without_the_client_library(
    spanner_emulator: str, make_database: Any, tmp_path: Path
) -> None:
    """A load of a local file, default options, into a database whose checkpoint table
    exists (a first run makes it: DDL, through the client library): the session, schema
    read, lease, checkpoint and commits all go through loader/wire. The child lists its
    modules after the whole run, so this holds for everything before the first commit too."""
    from loader.resume.stores import SpannerStateStore

    db = make_database()
    SpannerStateStore(db).ensure()
    code, modules = _load_customers(db, spanner_emulator, tmp_path)
    assert code == 0
    assert heavy_in(modules, ("google.cloud.spanner", "google.cloud.spanner_v1")) == set()
    assert heavy_in(modules, ("proto", "opentelemetry", "requests")) == set()
    with db.snapshot() as snap:
        ((n,),) = list(snap.execute_sql("select count(*) from Customers"))
    with open(EXAMPLES / "Customers.csv", encoding="utf-8", newline="") as f:
        assert n == sum(1 for _ in csv.reader(f)) - 1


# -- round trips before the first commit ----------------------------------------------------


def test_the_schema_of_every_table_is_one_query_and_no_admin_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GoogleSQL database: the read asks neither the dialect (GetDatabase and
    GetDatabaseDdl) nor one query per catalog view, and the checkpoint table is then opened
    from what it saw."""
    from google.cloud import spanner
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect
    from pg_spanner import PgSpanner

    from loader.resume.stores import SpannerStateStore
    from loader.schema import read_catalog

    with PgSpanner({}) as server:
        server.dialect = DatabaseDialect.GOOGLE_STANDARD_SQL
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        db = spanner.Client(project="p").instance("i").database("d")
        schemas, catalog = read_catalog(db, [])
        store = SpannerStateStore(db, catalog)
        store.ensure()
    assert schemas == {} and not catalog.postgresql
    (query,) = server.sql[:1]
    assert "array(select as struct" in query and query.count("information_schema.") == 7
    assert [s for s in server.sql if "information_schema" in s] == [query]
    assert "GetDatabase" not in server.calls and "GetDatabaseDdl" not in server.calls
    # the checkpoint table was not among the tables seen: created without asking again
    assert len(server.ddl_updates) == 1


def test_the_one_query_read_sees_what_the_query_by_query_read_sees(make_database: Any) -> None:
    from loader.schema_reader import _queries, _read_rows

    db = make_database(
        [
            SHOP_DDL,
            "CREATE TABLE Refs (Id INT64 NOT NULL, ProductId STRING(36), CONSTRAINT FkProduct "
            "FOREIGN KEY (ProductId) REFERENCES Products (ProductId)) PRIMARY KEY (Id)",
        ]
    )
    rows, postgresql = _read_rows(db)
    with db.snapshot(multi_use=True) as snap:
        each = {k: [list(r) for r in snap.execute_sql(sql)] for k, sql in _queries("''").items()}
    assert not postgresql
    assert set(rows) == set(each)
    for key in each:
        assert sorted(map(repr, rows[key])) == sorted(map(repr, each[key])), key
    assert rows["tables"] and rows["columns"] and rows["index_columns"] and rows["fks"]


NOT_IN_A_PLAIN_LOAD = (
    "google",  # the error model's classes: imported on the first error (loader/commit/errors.py)
    "importlib.metadata",  # the x-goog-api-client header names loader.__version__
    "tomllib",  # --config
    "loader.ddl",  # --defer-indexes, or something an earlier run deferred
    "loader.sample",
    "loader.plan",
    "loader.verify",
    "loader.bench",
    "loader.beam",
)


def test_a_plain_load_imports_only_what_it_uses(
    spanner_emulator: str, make_database: Any, tmp_path: Path
) -> None:
    """A load of a local file with default options that meets no error: no Google module at
    all (google.api_core's exception classes are the error model, imported when an error is
    classified; protobuf and the client library are not used), and none of the loader's parts
    for other options and commands."""
    from loader.resume.stores import SpannerStateStore

    db = make_database()
    SpannerStateStore(db).ensure()
    code, modules = _load_customers(db, spanner_emulator, tmp_path)
    assert code == 0
    assert heavy_in(modules, NOT_IN_A_PLAIN_LOAD) == set()


def test_the_version_is_the_installed_packages() -> None:
    """pyproject.toml reads the version from loader/__init__.py (the x-goog-api-client header
    names it without importlib.metadata, which costs a load ~10 ms)."""
    from importlib.metadata import version

    import loader

    assert loader.__version__ == version("spanner-loader")
