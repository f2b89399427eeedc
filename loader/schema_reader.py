"""Read table schemas from INFORMATION_SCHEMA in one read-only snapshot.

Queries use lower-case identifiers, which GoogleSQL (case-insensitive) and the PostgreSQL
dialect (lower-case catalog) both accept; the schema filter differs ('' vs 'public'), and so
do some answers: a PostgreSQL-dialect database gives PG type names in SPANNER_TYPE (see
:meth:`SpannerType.parse`), ``spanner.commit_timestamp`` for a commit-timestamp column,
'YES'/'NO' text for the indexes' flags, and NULLS FIRST/LAST in key orderings.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from .errors import SchemaError, not_spanner
from .resume.stores import STATE_TABLE
from .schema import Column, Index, KeyPart, TableSchema, spelt_as
from .types import SpannerType

#: The database's dialect as the database itself tells it (POSTGRESQL or GOOGLE_STANDARD_SQL):
#: a query both dialects accept, for when the admin API does not say (the emulator).
DIALECT_QUERY = (
    "select option_value from information_schema.database_options "
    "where option_name = 'database_dialect'"
)


def is_postgresql(database: Any) -> bool:
    """Whether the database speaks the PostgreSQL dialect (``database``: a
    :class:`~loader.access.DatabaseAccess` or a client ``Database``).

    The client's ``database_dialect`` is a ``DatabaseDialect`` IntEnum, whose ``str()`` is
    ``'2'`` on Python 3.11+, not its name: compare the enum. When it is unspecified (the
    emulator's admin API reports none, for databases of either dialect), the database is
    asked with :data:`DIALECT_QUERY`."""
    from google.api_core import exceptions as gexc
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    from .access import access_of, client_of

    dialect = getattr(client_of(database), "database_dialect", None)
    if dialect == DatabaseDialect.POSTGRESQL:
        return True
    if dialect == DatabaseDialect.GOOGLE_STANDARD_SQL:
        return False
    try:
        rows = access_of(database).query(DIALECT_QUERY)
    except gexc.GoogleAPICallError:
        return False
    return any(str(r[0]).upper() == "POSTGRESQL" for r in rows)


#: A PostgreSQL-dialect database reports a commit-timestamp column with this SPANNER_TYPE
#: (its DDL type), not as a timestamp with an allow_commit_timestamp option only.
PG_COMMIT_TIMESTAMP = "spanner.commit_timestamp"


def _flag(value: Any) -> bool:
    """An INFORMATION_SCHEMA yes/no column: a BOOL in GoogleSQL, 'YES'/'NO' text in the
    PostgreSQL dialect (where ``bool('NO')`` would be True)."""
    if isinstance(value, str):
        return value.strip().upper() in ("YES", "TRUE")
    return bool(value)


def _schema_filter(database: Any) -> str:
    return "'public'" if is_postgresql(database) else "''"


def _translate(e: Exception, database: Any) -> SchemaError:
    from google.api_core import exceptions as gexc

    name = getattr(database, "name", "the database")
    if isinstance(e, gexc.NotFound):
        what = "instance" if "Instance not found" in str(e) else "database"
        return SchemaError(
            f"{what} not found: {name}",
            hint="check `project`/`instance`/`database`, or add `emulator=True` to create it",
        )
    if isinstance(e, (gexc.PermissionDenied, gexc.Unauthenticated)):
        return SchemaError(
            f"no permission to read the schema of {name}: {getattr(e, 'message', e)}",
            hint="run `gcloud auth application-default login` or grant roles/spanner.databaseUser",
        )
    message = str(getattr(e, "message", e)).split(", request_id = ")[0]  # the client's id
    hint = not_spanner(e)
    return SchemaError(f"cannot read the schema of {name}: {message}", hint=hint)


def _queries(schema: str) -> dict[str, str]:
    """The INFORMATION_SCHEMA queries of a schema read, each ``select ...``; ``schema`` is the
    default schema's name as an SQL literal."""
    return {
        "tables": "select table_name, parent_table_name from information_schema.tables "
        f"where table_schema = {schema}",
        "columns": "select table_name, column_name, ordinal_position, spanner_type, is_nullable, "
        "is_generated, column_default from information_schema.columns "
        f"where table_schema = {schema}",
        "options": "select table_name, column_name, option_name, option_value "
        f"from information_schema.column_options where table_schema = {schema}",
        "index_columns": "select table_name, index_name, index_type, column_name, "
        "ordinal_position, column_ordering from information_schema.index_columns "
        f"where table_schema = {schema}",
        "indexes": "select table_name, index_name, index_type, is_unique, is_null_filtered "
        f"from information_schema.indexes where table_schema = {schema}",
        "fks": "select tc.table_name, ctu.table_name as referenced "
        "from information_schema.table_constraints tc "
        "join information_schema.constraint_table_usage ctu "
        "on tc.constraint_name = ctu.constraint_name "
        "and tc.constraint_schema = ctu.constraint_schema "
        f"where tc.constraint_type = 'FOREIGN KEY' and tc.table_schema = {schema}",
    }


def one_query(queries: dict[str, str]) -> str:
    """``queries`` as one GoogleSQL statement: a single row with one column per query, each
    an array of structs (its rows), so that the whole read is one round trip."""
    columns = (
        f"array(select as struct {sql[len('select ') :]}) as {k}" for k, sql in queries.items()
    )
    return "select " + ", ".join(columns)


def _read_rows(database: Any) -> tuple[dict[str, list[list[Any]]], bool]:
    """Every query's rows, and whether the database is PostgreSQL-dialect.

    The GoogleSQL read is one query, sent without asking the dialect first (that costs the
    client two admin requests), through the load's data path (``database``: a
    :class:`~loader.access.DatabaseAccess` or a client ``Database``). A database that
    refuses it as invalid is asked its dialect and read query by query, through the client
    library: a PostgreSQL-dialect one has no ARRAY(SELECT AS STRUCT ...)."""
    from .access import access_of, client_of
    from .commit.errors import gexc

    queries = _queries("''")
    try:
        found = access_of(database).query(one_query(queries))
    except gexc.InvalidArgument:
        client = client_of(database)
        postgresql = is_postgresql(database)
        queries = _queries("'public'" if postgresql else "''")
        with client.snapshot(multi_use=True) as snap:
            each = {key: [list(r) for r in snap.execute_sql(sql)] for key, sql in queries.items()}
        return each, postgresql
    row = found[0] if found else [[] for _ in queries]
    return {key: [list(r) for r in row[i] or ()] for i, key in enumerate(queries)}, False


@dataclass(frozen=True)
class Catalog:
    """What a schema read learnt of the database besides the tables it was asked for, so
    that nothing after it asks again (the checkpoint table's existence, the dialect)."""

    tables: frozenset[str]
    """Every table of the database (its default schema)."""
    postgresql: bool


def _descendants(table: str, parents: dict[str, Optional[str]]) -> tuple[str, ...]:
    """The tables interleaved in ``table``, level by level (``parents``: each table's)."""
    out: list[str] = []
    level = [table]
    while level:
        level = sorted(t for t, p in parents.items() if p in level and t not in out)
        out.extend(level)
    return tuple(out)


def read_information_schema(database: Any, tables: Sequence[str]) -> dict[str, TableSchema]:
    """Schemas for ``tables`` (matched exactly, else case-insensitively), keyed as requested."""
    return read_catalog(database, tables)[0]


def read_catalog(database: Any, tables: Sequence[str]) -> tuple[dict[str, TableSchema], Catalog]:
    """:func:`read_information_schema`, and the :class:`Catalog` the read saw."""
    from .commit.errors import gexc

    try:
        rows, postgresql = _read_rows(database)
    except gexc.GoogleAPICallError as e:
        raise _translate(e, database) from e

    existing = {r[0]: r[1] for r in rows["tables"]}
    resolved: dict[str, str] = {}
    for wanted in tables:
        if wanted in existing:
            resolved[wanted] = wanted
            continue
        bare = wanted
        if "." in wanted:
            space, bare = wanted.split(".", 1)
            if not (postgresql and space.strip('"').lower() == "public"):
                raise SchemaError(
                    f"table {wanted!r}: tables of a named schema ({space}) are not supported; "
                    "the loader reads and writes the default schema's tables",
                    hint="load it another way, or into a table of the default schema",
                )
            bare = bare.strip('"')
        if len(bare) > 2 and bare[0] == bare[-1] and bare[0] in '"`':
            # quoted as SQL quotes a name ("Name" in PostgreSQL, `Name` in GoogleSQL): that
            # name exactly (no table name holds a quote)
            bare = bare[1:-1]
            found = bare if bare in existing else None
        else:
            found = spelt_as(bare, existing)
        if found is not None:
            resolved[wanted] = found
            continue
        # the loader's own checkpoint table is no table a user meant
        names = ", ".join(sorted(t for t in existing if t != STATE_TABLE))
        raise SchemaError(
            f"table {wanted!r} does not exist in {getattr(database, 'name', 'the database')}",
            hint=f"existing tables: {names}"
            if names
            else "the database has no tables: check the database name, or create them first "
            "(`ddl` with the emulator)",
        )

    commit_ts = {
        (r[0], r[1])
        for r in rows["options"]
        if str(r[2]).lower() == "allow_commit_timestamp" and str(r[3]).upper() == "TRUE"
    }
    cols: dict[str, list[tuple[int, Column]]] = defaultdict(list)
    unsupported: dict[str, dict[str, str]] = defaultdict(dict)
    for tname, cname, pos, stype, nullable, generated, default in rows["columns"]:
        if str(stype).strip().lower() == PG_COMMIT_TIMESTAMP:
            stype = "TIMESTAMP"
            commit_ts.add((tname, cname))
        try:
            ctype = SpannerType.parse(stype, postgresql)
        except ValueError:
            if tname not in resolved.values():
                continue
            if str(generated).upper() == "ALWAYS" or str(nullable).upper() == "YES" or default:
                # nothing has to write it (a search index's TOKENLIST, a nullable PROTO): the
                # table loads without it, and a CSV column for it is refused by name
                unsupported[tname][cname] = str(stype)
                continue
            raise SchemaError(
                f"column {tname}.{cname} has type {stype}, which the loader does not support, "
                "and is NOT NULL without a default, so every row needs it",
                hint="load this table another way",
            ) from None
        cols[tname].append(
            (
                int(pos),
                Column(
                    name=cname,
                    type=ctype,
                    nullable=str(nullable).upper() == "YES",
                    generated=str(generated).upper() == "ALWAYS",
                    allow_commit_timestamp=(tname, cname) in commit_ts,
                    has_default=default is not None,
                ),
            )
        )

    keys: dict[str, list[tuple[int, KeyPart]]] = defaultdict(list)
    idx_keys: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    idx_storing: dict[tuple[str, str], list[str]] = defaultdict(list)
    idx_desc: dict[tuple[str, str], list[str]] = defaultdict(list)
    for tname, iname, itype, cname, pos, ordering in rows["index_columns"]:
        if itype == "PRIMARY_KEY":
            # GoogleSQL: ASC / DESC; PostgreSQL: ASC, ASC NULLS FIRST, DESC, DESC NULLS LAST
            desc = str(ordering).upper().startswith("DESC")
            keys[tname].append((int(pos), KeyPart(cname, desc)))
        elif pos is None:
            idx_storing[(tname, iname)].append(cname)
        else:
            idx_keys[(tname, iname)].append((int(pos), cname))
            if str(ordering).upper().startswith("DESC"):
                idx_desc[(tname, iname)].append(cname)
    index_meta = {(r[0], r[1]): r for r in rows["indexes"] if r[2] != "PRIMARY_KEY"}
    fks: dict[str, set[str]] = defaultdict(set)
    own: set[str] = set()
    for child, target in rows["fks"]:
        if child != target:
            fks[child].add(target)
        else:
            own.add(child)

    out: dict[str, TableSchema] = {}
    for wanted, real in resolved.items():
        indexes = tuple(
            Index(
                name=iname,
                columns=tuple(c for _, c in sorted(idx_keys.get((tname, iname), []))),
                storing=tuple(sorted(idx_storing.get((tname, iname), []))),
                unique=_flag(meta[3]),
                null_filtered=_flag(meta[4]),
                descending=tuple(idx_desc.get((tname, iname), [])),
                kind=str(meta[2]),
            )
            for (tname, iname), meta in sorted(index_meta.items())
            if tname == real
        )
        generated_key = [
            c.name
            for _, c in cols[real]
            if c.generated and c.name in {k.name for _, k in keys[real]}
        ]
        if generated_key:
            raise SchemaError(
                f"table {real}: key column {generated_key[0]} is a generated column, which "
                "Spanner computes at commit; a load sorts, de-duplicates and batches rows by "
                "their whole key before that, so the loader cannot load this table",
                hint=f"load it another way, or make {generated_key[0]} a plain column the "
                "export fills",
            )
        out[wanted] = TableSchema(
            name=real,
            columns=tuple(c for _, c in sorted(cols[real], key=lambda pc: pc[0])),
            primary_key=tuple(k for _, k in sorted(keys[real], key=lambda pk: pk[0])),
            parent=existing[real],
            parent_key=len(keys.get(existing[real] or "", ())),
            indexes=indexes,
            references=tuple(sorted(fks.get(real, ()))),
            references_itself=real in own,
            children=tuple(sorted(t for t, p in existing.items() if p == real)),
            descendants=_descendants(real, existing),
            unsupported=tuple(sorted(unsupported[real].items())),
        )
    return out, Catalog(frozenset(existing), postgresql)
