"""PostgreSQL-dialect databases (#16 defect 8), against a server that answers as one does.

The emulator reports no dialect, so these tests use ``tests/pg_spanner.py``: ``GetDatabase``
says POSTGRESQL, and the INFORMATION_SCHEMA answers carry what a PostgreSQL-dialect database
returns (schema 'public', PG type names, 'YES'/'NO' flags, ``spanner.commit_timestamp``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import ROOT
from pg_spanner import Answer, PgColumn, PgSpanner, PgTable, pg_schema_answers

from loader.errors import SchemaError
from loader.types import SpannerType

PROJECT, INSTANCE, DATABASE = "p", "i", "d"

#: SPANNER_TYPE as a PostgreSQL-dialect database reports it -> what the loader must parse
PG_TYPES = {
    "bigint": SpannerType("INT64"),
    "character varying": SpannerType("STRING"),
    "character varying(20)": SpannerType("STRING", 20),
    "text": SpannerType("STRING"),
    "numeric": SpannerType("NUMERIC", postgres=True),
    "jsonb": SpannerType("JSON", postgres=True),
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

DOCS = PgTable(
    "docs",
    [
        PgColumn("id", "bigint", nullable=False),
        PgColumn("body", "jsonb"),
        PgColumn("tags", "character varying[]"),
        PgColumn("price", "double precision"),
        PgColumn("day", "date"),
    ],
    primary_key=["id"],
)


@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch) -> Iterator[PgSpanner]:
    with PgSpanner(pg_schema_answers([every_type_table(), SINGERS, ALBUMS, DOCS])) as server:
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
    # the one-query GoogleSQL read is refused, then every query goes to the 'public' schema
    first, *info = [s for s in pg.sql if "information_schema" in s]
    assert "select as struct" in first and "GetDatabase" in pg.calls
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


def test_the_wire_path_reads_a_pg_schema_as_the_client_does(pg: PgSpanner) -> None:
    """A load's access (loader/wire) sends the one-query GoogleSQL read; a PostgreSQL-dialect
    database refuses it, and the read falls back to the client library, view by view: the
    same schemas and catalog as a read through the client from the start."""
    import grpc

    from loader.schema_reader import read_catalog
    from loader.wire import WireAccess

    tables = ["singers", "albums", "every_type"]
    with grpc.insecure_channel(pg.address) as channel:
        wire = WireAccess(database().name, channel, database)
        assert read_catalog(wire, tables) == read_catalog(database(), tables)


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
    assert "albums, docs, every_type, singers" in (e.value.hint or "")


def test_a_table_named_in_upper_case_resolves_to_the_lower_case_one(pg: PgSpanner) -> None:
    from loader.schema import read_schemas

    assert read_schemas(database(), ["Singers"])["Singers"].name == "singers"


def test_public_is_the_default_schema_and_no_other_is_read(pg: PgSpanner) -> None:
    """`public.items` was "does not exist"; a named schema's table is said to be one."""
    from loader.schema import read_schemas

    assert read_schemas(database(), ["public.singers"])["public.singers"].name == "singers"
    assert read_schemas(database(), ['"public"."Singers"'])['"public"."Singers"'].name == "singers"
    with pytest.raises(SchemaError, match="tables of a named schema \\(sales\\) are not supported"):
        read_schemas(database(), ["sales.singers"])


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


# -- the checkpoint table ------------------------------------------------------------------


def test_the_state_table_is_created_with_postgresql_ddl(pg: PgSpanner) -> None:
    from loader.resume.stores import STATE_DDL_PG, SpannerStateStore

    store = SpannerStateStore(database())
    store.ensure()
    store.ensure()  # once only
    (check,) = [s for s in pg.sql if "SpannerLoaderState" in s]
    assert "table_schema = 'public'" in check and "table_name = 'SpannerLoaderState'" in check
    assert pg.ddl_updates == [[STATE_DDL_PG]]
    (ddl,) = pg.ddl_updates[0]
    # PostgreSQL DDL: the key inside the parentheses, varchar, a commit-timestamp type; no
    # GoogleSQL STRING(n), OPTIONS (...) or trailing PRIMARY KEY
    assert ddl.startswith('CREATE TABLE "SpannerLoaderState" (')
    assert '"RunId" varchar(64) NOT NULL' in ddl
    assert '"UpdatedAt" spanner.commit_timestamp' in ddl
    assert ddl.rstrip().endswith('PRIMARY KEY ("RunId", "TableName", "Part")\n)')
    for googlesql in ("STRING(", "OPTIONS", "allow_commit_timestamp", ") PRIMARY KEY"):
        assert googlesql not in ddl


def test_an_existing_state_table_is_not_created_again(pg: PgSpanner) -> None:
    from loader.resume.stores import SpannerStateStore

    pg.answers["table_name = 'spannerloaderstate'"] = Answer(
        [("table_name", "STRING")], [("SpannerLoaderState",)], "table_schema = 'public'"
    )
    SpannerStateStore(database()).ensure()
    assert pg.ddl_updates == []


def test_state_queries_use_quoted_names_and_positional_parameters(pg: PgSpanner) -> None:
    from loader.resume.stores import SpannerStateStore

    store = SpannerStateStore(database())
    assert store.parts("run1", "singers", "b/") == {}
    (query,) = [q for q in pg.queries if "starts_with" in q.sql]
    assert query.sql == (
        'select "Part", "Value" from "SpannerLoaderState" where "RunId" = $1 '
        'and "TableName" = $2 and starts_with("Part", $3)'
    )
    params = {k: v.string_value for k, v in query.params.fields.items()}
    assert params == {"p1": "run1", "p2": "singers", "p3": "b/"}
    assert set(query.param_types) == {"p1", "p2", "p3"}


def test_a_googlesql_database_keeps_the_googlesql_state_table(pg: PgSpanner) -> None:
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    from loader.resume.stores import STATE_DDL, SpannerStateStore

    pg.dialect = DatabaseDialect.GOOGLE_STANDARD_SQL
    store = SpannerStateStore(database())
    store.parts("run1", "singers", "b/")
    assert pg.ddl_updates == [[STATE_DDL]]
    assert any("table_schema = '' and table_name = 'SpannerLoaderState'" in s for s in pg.sql)
    assert any("RunId = @r" in s for s in pg.sql)


# -- the command line ----------------------------------------------------------------------


def cli(server: PgSpanner, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``spanner-loader ARGS`` in a subprocess that reaches ``server`` through
    SPANNER_EMULATOR_HOST, without --emulator (which would create an instance and database)."""
    env = dict(os.environ, SPANNER_EMULATOR_HOST=server.address, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "loader", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


TARGET = ("--table", "singers", "--project", PROJECT, "--instance", INSTANCE)
SINGERS_CSV = "singer_id,first_name,score,active\n1,Ann,1.5,true\n2,Bob,,false\n"


def test_validate_reads_the_pg_schema_and_checks_a_csv(pg: PgSpanner, tmp_path: Path) -> None:
    (tmp_path / "s.csv").write_text(SINGERS_CSV)
    p = cli(pg, "validate", "s.csv", *TARGET, "--database", DATABASE, "--header", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "2 validated" in p.stdout, p.stdout
    assert "GetDatabase" in pg.calls
    # after the one-query GoogleSQL read it refused, every query goes to 'public'
    first, *info = [s for s in pg.sql if "information_schema" in s]
    assert "select as struct" in first
    assert info and all("'public'" in s for s in info)
    assert pg.commits == [] and pg.ddl_updates == []  # validate writes nothing


def test_validate_reports_a_value_too_long_for_a_pg_varchar(pg: PgSpanner, tmp_path: Path) -> None:
    """character varying(20) is a STRING(20): a longer name is a bad row (exit 3)."""
    (tmp_path / "s.csv").write_text(SINGERS_CSV + "3," + "x" * 21 + ",2,true\n")
    p = cli(pg, "validate", "s.csv", *TARGET, "--database", DATABASE, "--header", cwd=tmp_path)
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr


def test_a_load_writes_the_rows_and_pg_checkpoints(pg: PgSpanner, tmp_path: Path) -> None:
    from google.cloud.spanner_v1 import CommitRequest

    from loader.resume.stores import STATE_DDL_PG

    (tmp_path / "s.csv").write_text(SINGERS_CSV)
    p = cli(pg, "load", "s.csv", *TARGET, "--database", DATABASE, "--header", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert pg.ddl_updates == [[STATE_DDL_PG]]
    writes = [
        w
        for raw in pg.commits
        for m in CommitRequest.deserialize(raw).mutations
        for w in (m.insert, m.insert_or_update, m.update, m.replace)
        if w.table
    ]
    rows = [w for w in writes if w.table == "singers"]
    assert rows and [list(r) for w in rows for r in w.values][0][0] == "1"
    assert sum(len(w.values) for w in rows) == 2
    state = [w for w in writes if w.table == "SpannerLoaderState"]
    assert state and all(list(w.columns)[0] == "RunId" for w in state)
    for sql in pg.sql:
        if "SpannerLoaderState" in sql and "information_schema" not in sql:
            assert '"SpannerLoaderState"' in sql and "@" not in sql, sql


def test_defer_indexes_is_refused_clearly_on_a_pg_database(pg: PgSpanner, tmp_path: Path) -> None:
    (tmp_path / "s.csv").write_text(SINGERS_CSV)
    for flag in ("--defer-indexes", "--defer-foreign-keys"):
        p = cli(
            pg, "load", "s.csv", *TARGET, "--database", DATABASE, "--header", flag, cwd=tmp_path
        )
        assert p.returncode == 2 and "GoogleSQL databases only" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
    assert pg.commits == [] and pg.ddl_updates == []  # nothing dropped, nothing written


@pytest.mark.parametrize(
    "ordering,desc",
    [("ASC", False), ("ASC NULLS FIRST", False), ("DESC", True), ("DESC NULLS LAST", True)],
)
def test_pg_key_orderings(pg: PgSpanner, ordering: str, desc: bool) -> None:
    """PG reports ASC (nulls last), ASC NULLS FIRST, DESC (nulls first), DESC NULLS LAST."""
    from loader.schema import read_schemas

    answer = pg.answers["from information_schema.index_columns"]
    answer.rows = [
        (*r[:5], ordering) if r[0] == "albums" and r[3] == "album_id" else r for r in answer.rows
    ]
    keys = read_schemas(database(), ["albums"])["albums"].primary_key
    assert [(k.name, k.desc) for k in keys] == [("singer_id", False), ("album_id", desc)]


def test_a_pg_numeric_beyond_googlesql_numeric_loads_as_written(
    pg: PgSpanner, tmp_path: Path
) -> None:
    """numeric holds what PostgreSQL's does (131,072 integer and 16,383 fraction digits): a
    value past GoogleSQL's NUMERIC(38, 9) was a bad row (a documented limit until now); it
    is committed as its text, and an exponent is written out."""
    from google.cloud.spanner_v1 import CommitRequest

    (tmp_path / "s.csv").write_text(
        SINGERS_CSV + "3,Cy,1.1234567891,true\n4,Di,123456789012345678901234567890e3,true\n"
    )
    p = cli(pg, "validate", "s.csv", *TARGET, "--database", DATABASE, "--header", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    p = cli(pg, "load", "s.csv", *TARGET, "--database", DATABASE, "--header", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    rows = [
        [v for v in r]
        for raw in pg.commits
        for m in CommitRequest.deserialize(raw).mutations
        for w in (m.insert, m.insert_or_update, m.update, m.replace)
        if w.table == "singers"
        for r in w.values
    ]
    assert [r[2] for r in rows] == [
        "1.5",
        None,
        "1.1234567891",
        "123456789012345678901234567890000",
    ]


SINGERS_READ = Answer(
    [
        ("singer_id", "INT64"),
        ("first_name", "STRING"),
        ("score", "PG_NUMERIC"),
        ("active", "BOOL"),
        ("updated", "TIMESTAMP"),
    ],
    [
        (1, "Ann", "1.5", True, "2026-11-24T10:00:00.000001Z"),
        (2, "Bob", None, False, "2026-11-24T10:00:00.000001Z"),
    ],
)


def test_verify_compares_a_pg_table_with_its_source(pg: PgSpanner, tmp_path: Path) -> None:
    """Rows read back with the types a PostgreSQL-dialect database gives (numeric is a
    PG_NUMERIC-annotated NUMERIC) compare equal to the source; a changed one does not."""
    (tmp_path / "s.csv").write_text(SINGERS_CSV)
    pg.reads["singers"] = SINGERS_READ
    args = ("verify", "s.csv", *TARGET, "--database", DATABASE, "--header")
    p = cli(pg, *args, cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "StreamingRead" in pg.calls

    pg.reads["singers"] = Answer(
        SINGERS_READ.columns, [SINGERS_READ.rows[0], (2, "Bob", "2.5", False, None)]
    )
    p = cli(pg, *args, cwd=tmp_path)
    assert p.returncode == 6, (p.stdout, p.stderr)


def test_verify_reads_jsonb_arrays_floats_and_dates(pg: PgSpanner, tmp_path: Path) -> None:
    """jsonb comes back as a PG_JSONB-annotated JSON value; keys in another order and other
    spacing are the same document."""
    (tmp_path / "d.csv").write_text(
        'id,body,tags,price,day\n1,"{""b"": 1, ""a"": [true]}","[""x"",""y""]",2.5,2026-11-24\n'
    )
    pg.reads["docs"] = Answer(
        [
            ("id", "INT64"),
            ("body", "PG_JSONB"),
            ("tags", "STRING"),
            ("price", "FLOAT64"),
            ("day", "DATE"),
        ],
        [(1, '{"a": [true], "b": 1}', None, 2.5, "2026-11-24")],
    )
    args = ("verify", "d.csv", "--table", "docs", "--project", PROJECT, "--instance", INSTANCE)
    p = cli(pg, *args, "--database", DATABASE, "--header", "--ignore", "tags", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    pg.reads["docs"].rows = [(1, '{"a": [false], "b": 1}', None, 2.5, "2026-11-24")]
    p = cli(pg, *args, "--database", DATABASE, "--header", "--ignore", "tags", cwd=tmp_path)
    assert p.returncode == 6, (p.stdout, p.stderr)
    # jsonb keeps the last of duplicate keys (GoogleSQL's JSON the first)
    (tmp_path / "d.csv").write_text(
        'id,body,tags,price,day\n1,"{""b"": 1, ""b"": 2}",,2.5,2026-11-24\n'
    )
    pg.reads["docs"].rows = [(1, '{"b": 2}', None, 2.5, "2026-11-24")]
    p = cli(pg, *args, "--database", DATABASE, "--header", "--ignore", "tags", cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)


def test_numeric_and_jsonb_load_into_the_emulators_postgresql_database(
    spanner_client: Any, make_database: Any, tmp_path: Path
) -> None:
    """The emulator makes PostgreSQL-dialect databases through the client (not with --ddl):
    numeric past NUMERIC(38, 9), NaN, and jsonb numbers, duplicate keys and nesting that
    GoogleSQL's JSON refuses all load, verify, and read back as written."""
    from conftest import INSTANCE, read_table
    from google.cloud.spanner_admin_database_v1.types import DatabaseDialect

    make_database([])  # the instance
    db = spanner_client.instance(INSTANCE).database(
        f"pgnum{os.getpid() % 10000}", database_dialect=DatabaseDialect.POSTGRESQL
    )
    db.create().result(120)
    try:
        db.update_ddl(
            [
                "CREATE TABLE docs (id bigint NOT NULL PRIMARY KEY, amount numeric, body jsonb, "
                "amounts numeric[])"
            ]
        ).result(120)
        deep = '{""a"":' * 100 + "1" + "}" * 100
        (tmp_path / "d.csv").write_text(
            "id,amount,body,amounts\n"
            '1,1.1234567891,"{""n"": 2.2412421353246235436, ""a"": 1, ""a"": 2}","[""1.5"", 2e3]"\n'
            f'2,123456789012345678901234567890e3,"{deep}",\n'
            "3,NaN,1.50,\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        common = ["d.csv", "--table", "docs", "--emulator", "--database", db.database_id]
        for command in ("load", "verify"):
            p = subprocess.run(
                [sys.executable, "-m", "loader", command, *common],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=env,
            )
            assert p.returncode == 0, (command, p.stdout, p.stderr)
        with db.snapshot() as snap:
            texts = list(snap.execute_sql("select amount::text, body::text from docs order by id"))
        assert texts == [
            ["1.1234567891", '{"a": 2, "n": 2.2412421353246235436}'],
            ["123456789012345678901234567890000", deep.replace('""', '"').replace(":", ": ")],
            ["NaN", "1.50"],
        ]
        assert [r[0] for r in read_table(db, "docs", ["amounts"])][0] == [1.5, 2000]
    finally:
        db.drop()
