"""Found by a new user's tryout of the CLI and left by its first round of fixes: each test is
one thing that broke, run through the real command (or the library) against the emulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from conftest import INSTANCE, read_table, small_load_config
from test_cli import run

PG_DDL = [
    "create table singers (singer_id bigint primary key, first_name varchar(20))",
    'create table "MixedCase" ("Id" bigint primary key, "Name" text)',
]


@pytest.fixture(scope="module")
def pg_db(make_module_database: Callable[..., Any], spanner_client: Any) -> Iterator[Any]:
    """A PostgreSQL-dialect database on the emulator, made with the client's admin API (the
    emulator's GetDatabase reports no dialect for it)."""
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    make_module_database(ddl=[])  # (creates the instance when missing)
    db = spanner_client.instance(INSTANCE).database(
        "trypg", database_dialect=DatabaseDialect.POSTGRESQL
    )
    db.create().result(120)
    db.update_ddl(PG_DDL).result(120)
    yield db
    db.drop()


def test_a_postgresql_database_on_the_emulator_loads_and_verifies(
    pg_db: Any, tmp_path: Path
) -> None:
    """ "table 'singers' does not exist ... existing tables: (none)": the emulator reports no
    dialect, so the loader read the GoogleSQL schema '' of a PostgreSQL-dialect database."""
    src = tmp_path / "singers.csv"
    src.write_text("singer_id,first_name\n1,Ann\n2,Bob\n", encoding="utf-8")
    args = [str(src), "--table", "singers", "--emulator", "--database", "trypg"]
    p = run("load", *args, "-q", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows_written"] == 2
    p = run("verify", *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert read_table(pg_db, "singers", ["singer_id", "first_name"]) == [(1, "Ann"), (2, "Bob")]


def test_a_quoted_mixed_case_pg_table_loads_and_verifies(pg_db: Any, tmp_path: Path) -> None:
    src = tmp_path / "m.csv"
    src.write_text("Id,Name\n7,x\n", encoding="utf-8")
    args = [str(src), "--table", "MixedCase", "--emulator", "--database", "trypg"]
    p = run("load", *args, "-q", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows_written"] == 1
    p = run("verify", *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert read_table(pg_db, "MixedCase", ["Id", "Name"]) == [(7, "x")]


def test_the_client_path_sees_the_pg_dialect_on_the_emulator(pg_db: Any, tmp_path: Path) -> None:
    """A library caller's client ``Database`` (ClientAccess) on the same database."""
    from loader import load
    from loader.access import ClientAccess
    from loader.schema_reader import is_postgresql, read_catalog

    assert is_postgresql(pg_db) and is_postgresql(ClientAccess(pg_db))
    schemas, catalog = read_catalog(pg_db, ["mixedcase"])
    assert catalog.postgresql and schemas["mixedcase"].name == "MixedCase"
    src = tmp_path / "m.csv"
    src.write_text("Id,Name\n8,y\n", encoding="utf-8")
    report = load(small_load_config(pg_db, "MixedCase", [src]), database=pg_db)
    assert report.rows_written == 1
    assert (8, "y") in read_table(pg_db, "MixedCase", ["Id", "Name"])


def test_a_googlesql_database_on_the_emulator_is_not_taken_for_pg(
    make_database: Callable[..., Any],
) -> None:
    from loader.schema_reader import is_postgresql

    assert not is_postgresql(make_database(ddl=[]))
