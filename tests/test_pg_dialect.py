"""PostgreSQL-dialect databases (#16 defect 8), against a server that answers as one does.

The emulator reports no dialect, so these tests use ``tests/pg_spanner.py``: ``GetDatabase``
says POSTGRESQL, and the INFORMATION_SCHEMA answers carry what a PostgreSQL-dialect database
returns (schema 'public', PG type names, 'YES'/'NO' flags, ``spanner.commit_timestamp``).
"""

from __future__ import annotations

import sys
from typing import Any, Iterator

import pytest
from pg_spanner import PgColumn, PgSpanner, PgTable, pg_schema_answers

from loader.errors import SchemaError
from loader.types import SpannerType

PROJECT, INSTANCE, DATABASE = "p", "i", "d"

#: SPANNER_TYPE as a PostgreSQL-dialect database reports it -> what the loader must parse
PG_TYPES = {
    "bigint": SpannerType("INT64"),
    "character varying": SpannerType("STRING"),
    "character varying(20)": SpannerType("STRING", 20),
    "text": SpannerType("STRING"),
    "numeric": SpannerType("NUMERIC"),
    "jsonb": SpannerType("JSON"),
    "bytea": SpannerType("BYTES"),
    "boolean": SpannerType("BOOL"),
    "double precision": SpannerType("FLOAT64"),
    "real": SpannerType("FLOAT32"),
    "date": SpannerType("DATE"),
    "timestamp with time zone": SpannerType("TIMESTAMP"),
    "bigint[]": SpannerType("ARRAY", element=SpannerType("INT64")),
    "character varying(8)[]": SpannerType("ARRAY", element=SpannerType("STRING", 8)),
    "double precision[]": SpannerType("ARRAY", element=SpannerType("FLOAT64")),
    "spanner.commit_timestamp": SpannerType("TIMESTAMP"),
}


def every_type_table() -> PgTable:
    cols = [PgColumn("id", "bigint", nullable=False)]
    cols += [PgColumn(f"c{n}", t) for n, t in enumerate(PG_TYPES)]
    return PgTable(
        "every_type",
        cols,
        primary_key=["id"],
        indexes=[("every_type_by_c1", ["c1"], False), ("every_type_by_c2", ["c2"], True)],
    )


SINGERS = PgTable(
    "singers",
    [
        PgColumn("singer_id", "bigint", nullable=False),
        PgColumn("first_name", "character varying(20)"),
        PgColumn("score", "numeric"),
        PgColumn("active", "boolean"),
        PgColumn("updated", "spanner.commit_timestamp"),
    ],
    primary_key=["singer_id"],
)
ALBUMS = PgTable(
    "albums",
    [
        PgColumn("singer_id", "bigint", nullable=False),
        PgColumn("album_id", "bigint", nullable=False),
        PgColumn("title", "text"),
    ],
    primary_key=["singer_id", "album_id"],
    parent="singers",
    desc=["album_id"],
)


@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch) -> Iterator[PgSpanner]:
    with PgSpanner(pg_schema_answers([every_type_table(), SINGERS, ALBUMS])) as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        yield server


def database() -> Any:
    from google.cloud import spanner

    return spanner.Client(project=PROJECT).instance(INSTANCE).database(DATABASE)


def test_the_client_reports_postgresql_and_the_loader_sees_it(pg: PgSpanner) -> None:
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    from loader.schema_reader import is_postgresql

    db = database()
    assert db.database_dialect == DatabaseDialect.POSTGRESQL
    # the defect: str() of the IntEnum is '2' on Python 3.11+, so a name test never matched
    assert "POSTGRESQL" not in str(db.database_dialect) or sys.version_info < (3, 11)
    assert is_postgresql(db)
    assert {"GetDatabaseDdl", "GetDatabase"} <= set(pg.calls)


def test_read_schemas_finds_the_tables_and_filters_on_public(pg: PgSpanner) -> None:
    from loader.schema import read_schemas

    schemas = read_schemas(database(), ["singers", "albums"])
    assert set(schemas) == {"singers", "albums"}
    # every query went to the 'public' schema, none to GoogleSQL's ''
    info = [s for s in pg.sql if "information_schema" in s]
    assert len(info) == 6, pg.sql
    for sql in info:
        assert "table_schema = 'public'" in sql, sql
        assert "table_schema = ''" not in sql, sql

    singers = schemas["singers"]
    assert singers.name == "singers"
    assert [c.name for c in singers.columns] == [
        "singer_id",
        "first_name",
        "score",
        "active",
        "updated",
    ]
    by_name = {c.name: c for c in singers.columns}
    assert by_name["singer_id"].type == SpannerType("INT64") and not by_name["singer_id"].nullable
    assert by_name["first_name"].type == SpannerType("STRING", 20)
    assert by_name["first_name"].nullable
    assert by_name["updated"].type == SpannerType("TIMESTAMP")
    assert by_name["updated"].allow_commit_timestamp
    assert not by_name["score"].allow_commit_timestamp
    assert [(k.name, k.desc) for k in singers.primary_key] == [("singer_id", False)]

    albums = schemas["albums"]
    assert albums.parent == "singers"
    assert [(k.name, k.desc) for k in albums.primary_key] == [
        ("singer_id", False),
        ("album_id", True),
    ]


def test_every_pg_type_parses(pg: PgSpanner) -> None:
    from loader.schema import read_schemas

    schema = read_schemas(database(), ["every_type"])["every_type"]
    got = {c.name: c.type for c in schema.columns}
    for n, (pg_type, want) in enumerate(PG_TYPES.items()):
        assert got[f"c{n}"] == want, pg_type
    commit_ts = [c.name for c in schema.columns if c.allow_commit_timestamp]
    assert commit_ts == [f"c{list(PG_TYPES).index('spanner.commit_timestamp')}"]


def test_pg_index_flags_are_yes_no_text(pg: PgSpanner) -> None:
    """is_unique / is_null_filtered come as 'YES' / 'NO' text: 'NO' is not true."""
    from loader.schema import read_schemas

    schema = read_schemas(database(), ["every_type"])["every_type"]
    flags = {i.name: (i.unique, i.null_filtered, i.columns) for i in schema.indexes}
    assert flags == {
        "every_type_by_c1": (False, False, ("c1",)),
        "every_type_by_c2": (True, False, ("c2",)),
    }


def test_a_missing_table_lists_the_existing_ones(pg: PgSpanner) -> None:
    from loader.schema import read_schemas

    with pytest.raises(SchemaError) as e:
        read_schemas(database(), ["nope"])
    assert "does not exist" in str(e.value)
    assert "albums, every_type, singers" in (e.value.hint or "")


def test_a_table_named_in_upper_case_resolves_to_the_lower_case_one(pg: PgSpanner) -> None:
    from loader.schema import read_schemas

    assert read_schemas(database(), ["Singers"])["Singers"].name == "singers"


def test_a_googlesql_database_filters_on_the_empty_schema(pg: PgSpanner) -> None:
    """The other dialect's filter; and against PG tables it finds nothing, which was the
    defect's symptom ("every table is reported missing")."""
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    from loader.schema import read_schemas

    pg.dialect = DatabaseDialect.GOOGLE_STANDARD_SQL
    with pytest.raises(SchemaError, match="does not exist"):
        read_schemas(database(), ["singers"])
    info = [s for s in pg.sql if "information_schema" in s]
    assert info and all("table_schema = ''" in s for s in info), info
