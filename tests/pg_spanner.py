"""A recording Cloud Spanner server that answers as a PostgreSQL-dialect database does.

The emulator reports no dialect (``GetDatabase`` leaves ``database_dialect`` unset), so a
test against it never sees what the client library does for a PostgreSQL database. This
server runs in the test process (grpc's own threads, like ``tests/capture_spanner.py``); point
a client at it with ``SPANNER_EMULATOR_HOST``. It answers:

* the admin service (``google.spanner.admin.database.v1.DatabaseAdmin``): ``GetDatabase``
  with ``database_dialect = POSTGRESQL`` (``dialect`` to change it), ``GetDatabaseDdl`` with
  ``ddl``, and ``UpdateDatabaseDdl``, whose statements it records in ``ddl_updates`` and
  answers with a finished operation;
* the data service (``google.spanner.v1.Spanner``): sessions (pooled and multiplexed),
  ``BeginTransaction``, ``Rollback``, ``Commit`` (raw request bytes recorded in ``commits``),
  ``StreamingRead`` (the rows of ``reads[table]`` for the columns asked, else none), and
  ``ExecuteStreamingSql``, which records each SQL text in ``sql`` (the whole request in
  ``queries``), refuses GoogleSQL's ``SELECT AS STRUCT`` as INVALID_ARGUMENT while the dialect
  is PostgreSQL, and answers from ``answers``: the first entry whose key is a substring of the
  SQL (compared in lower case, spaces collapsed) gives the result's columns and rows; a query
  nothing matches gets an empty result. An inline-begun transaction gets an id in the first
  result's metadata.

:func:`pg_schema_answers` builds the answers to ``loader/schema_reader.py``'s
INFORMATION_SCHEMA queries for tables described as a PostgreSQL-dialect database reports them
(``table_schema = 'public'``, PG type names in ``spanner_type``, 'YES'/'NO' flags).
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import grpc
from capture_spanner import session_handlers, unary

from loader.emulator import free_port

SPANNER = "google.spanner.v1.Spanner"
ADMIN = "google.spanner.admin.database.v1.DatabaseAdmin"
OPERATIONS = "google.longrunning.Operations"


@dataclass
class Answer:
    """One query's result: ``columns`` are (name, type): a TypeCode name ("STRING", "INT64",
    "BOOL", "FLOAT64", "NUMERIC", "JSON", "TIMESTAMP", "DATE", "BYTES"), or "PG_NUMERIC" /
    "PG_JSONB" for the annotated types a PostgreSQL-dialect database gives ``numeric`` and
    ``jsonb`` columns. Values: None, a bool, a float (FLOAT64), anything else as its text."""

    columns: Sequence[tuple[str, str]]
    rows: Sequence[Sequence[Any]] = ()
    requires: str = ""
    """The rows are returned only if the SQL also contains this (lower case, spaces
    collapsed); else the result is empty, as a query filtering on another schema gets."""


@dataclass
class PgColumn:
    name: str
    spanner_type: str
    nullable: bool = True
    default: Optional[str] = None


@dataclass
class PgTable:
    """A table as a PostgreSQL-dialect database describes it (names as stored: lower case
    unless quoted in the DDL)."""

    name: str
    columns: Sequence[PgColumn]
    primary_key: Sequence[str]
    parent: Optional[str] = None
    desc: Sequence[str] = field(default_factory=tuple)
    """Primary-key columns declared DESC (reported as 'DESC', PG's DESC NULLS FIRST)."""
    indexes: Sequence[tuple[str, Sequence[str], bool]] = field(default_factory=tuple)
    """Secondary indexes: (name, key columns, unique); reported ascending, not null-filtered."""


def pg_schema_answers(tables: Sequence[PgTable]) -> dict[str, Answer]:
    """Answers to the loader's INFORMATION_SCHEMA queries (loader/schema_reader.py), with the
    columns and values a PostgreSQL-dialect database returns. Every table is in schema
    'public': a query that does not filter on it (GoogleSQL's ``table_schema = ''``) gets no
    rows, as on a real PostgreSQL-dialect database."""
    s, i = "STRING", "INT64"
    public = "table_schema = 'public'"
    answers = {
        "select table_name, parent_table_name from information_schema.tables": Answer(
            [("table_name", s), ("parent_table_name", s)],
            [(t.name, t.parent) for t in tables],
        ),
        "from information_schema.columns": Answer(
            [
                ("table_name", s),
                ("column_name", s),
                ("ordinal_position", i),
                ("spanner_type", s),
                ("is_nullable", s),
                ("is_generated", s),
                ("column_default", s),
            ],
            [
                (
                    t.name,
                    c.name,
                    n,
                    c.spanner_type,
                    "YES" if c.nullable else "NO",
                    "NEVER",
                    c.default,
                )
                for t in tables
                for n, c in enumerate(t.columns, 1)
            ],
        ),
        # a spanner.commit_timestamp column is also listed here, with option_type 'boolean'
        "from information_schema.column_options": Answer(
            [("table_name", s), ("column_name", s), ("option_name", s), ("option_value", s)],
            [
                (t.name, c.name, "allow_commit_timestamp", "TRUE")
                for t in tables
                for c in t.columns
                if c.spanner_type == "spanner.commit_timestamp"
            ],
        ),
        "from information_schema.index_columns": Answer(
            [
                ("table_name", s),
                ("index_name", s),
                ("index_type", s),
                ("column_name", s),
                ("ordinal_position", i),
                ("column_ordering", s),
            ],
            [
                (t.name, "PRIMARY_KEY", "PRIMARY_KEY", k, n, "DESC" if k in t.desc else "ASC")
                for t in tables
                for n, k in enumerate(t.primary_key, 1)
            ]
            + [
                (t.name, name, "INDEX", k, n, "ASC")
                for t in tables
                for name, keys, _ in t.indexes
                for n, k in enumerate(keys, 1)
            ],
        ),
        # PG reports is_unique / is_null_filtered as 'YES' / 'NO' text, not booleans
        "from information_schema.indexes": Answer(
            [
                ("table_name", s),
                ("index_name", s),
                ("index_type", s),
                ("is_unique", s),
                ("is_null_filtered", s),
            ],
            [(t.name, "PRIMARY_KEY", "PRIMARY_KEY", "YES", "NO") for t in tables]
            + [
                (t.name, name, "INDEX", "YES" if unique else "NO", "NO")
                for t in tables
                for name, _, unique in t.indexes
            ],
        ),
        "from information_schema.table_constraints": Answer(
            [("table_name", s), ("table_name", s)], []
        ),
    }
    for answer in answers.values():
        answer.requires = public
    return answers


class PgSpanner:
    """``with PgSpanner(answers) as server: ...``; ``server.sql`` lists the SQL received."""

    def __init__(self, answers: Optional[dict[str, Answer]] = None) -> None:
        from google.cloud.spanner_admin_database_v1 import DatabaseDialect

        self.port = free_port()
        self.answers: dict[str, Answer] = dict(answers or {})
        self.reads: dict[str, Answer] = {}
        """StreamingRead's answers, by table name."""
        self.dialect = DatabaseDialect.POSTGRESQL
        self.ddl: list[str] = []
        """What GetDatabaseDdl answers."""
        self.sql: list[str] = []
        self.queries: list[Any] = []
        """The ExecuteSqlRequest messages (protobuf), with their params."""
        self.ddl_updates: list[list[str]] = []
        self.commits: list[bytes] = []
        self.calls: list[str] = []
        """Every method called, in order (short names)."""
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self._server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(SPANNER, self._spanner()),
                grpc.method_handlers_generic_handler(ADMIN, self._admin()),
                grpc.method_handlers_generic_handler(OPERATIONS, self._operations()),
            )
        )
        self._server.add_insecure_port(f"127.0.0.1:{self.port}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _next(self) -> int:
        with self._lock:
            return next(self._ids)

    def _record(self, name: str) -> None:
        with self._lock:
            self.calls.append(name)

    def answer_for(self, sql: str) -> Optional[Answer]:
        low = " ".join(sql.lower().split())
        for key, answer in self.answers.items():
            if key.lower() in low:
                return answer
        return None

    # -- data service -------------------------------------------------------------------
    def _spanner(self) -> dict[str, grpc.RpcMethodHandler]:
        from google.cloud.spanner_admin_database_v1 import DatabaseDialect
        from google.cloud.spanner_v1 import types as t
        from google.protobuf import empty_pb2, struct_pb2

        tx_cls = t.Transaction.pb()
        prs_cls = t.PartialResultSet.pb()
        pg_types = {
            "PG_NUMERIC": (t.TypeCode.NUMERIC, t.TypeAnnotationCode.PG_NUMERIC),
            "PG_JSONB": (t.TypeCode.JSON, t.TypeAnnotationCode.PG_JSONB),
        }

        def code_of(name: str) -> tuple[Any, Any]:
            if name in pg_types:
                return pg_types[name]
            return getattr(t.TypeCode, name), t.TypeAnnotationCode.TYPE_ANNOTATION_CODE_UNSPECIFIED

        def begin_transaction(req: Any, ctx: grpc.ServicerContext) -> Any:
            self._record("BeginTransaction")
            return tx_cls(id=f"tx-{self._next()}".encode())

        def rollback(req: Any, ctx: grpc.ServicerContext) -> Any:
            self._record("Rollback")
            return empty_pb2.Empty()

        def commit(raw: bytes, ctx: grpc.ServicerContext) -> Any:
            with self._lock:
                self.calls.append("Commit")
                self.commits.append(raw)
            resp = t.CommitResponse.pb()()
            resp.commit_timestamp.GetCurrentTime()
            return resp

        def value(v: Any) -> Any:
            if v is None:
                return struct_pb2.Value(null_value=struct_pb2.NULL_VALUE)
            if isinstance(v, bool):
                return struct_pb2.Value(bool_value=v)
            if isinstance(v, float):
                return struct_pb2.Value(number_value=v)
            return struct_pb2.Value(string_value=str(v))  # INT64 travels as a string

        def result(req: Any, names: Sequence[tuple[str, str]], rows: Sequence[Any]) -> Any:
            out = prs_cls()
            for name, type_name in names:
                f = out.metadata.row_type.fields.add()
                f.name = name
                # proto-plus names the field type_
                f.type_.code, f.type_.type_annotation = code_of(type_name)
            if req.transaction.HasField("begin"):
                out.metadata.transaction.id = f"tx-{self._next()}".encode()
            for row in rows:
                out.values.extend(value(v) for v in row)
            return out

        def execute_streaming_sql(req: Any, ctx: grpc.ServicerContext) -> Any:
            with self._lock:
                self.calls.append("ExecuteStreamingSql")
                self.sql.append(req.sql)
                self.queries.append(req)
            if self.dialect == DatabaseDialect.POSTGRESQL and "select as struct" in req.sql.lower():
                # GoogleSQL syntax: a PostgreSQL-dialect database refuses to parse it
                ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, 'syntax error at or near "as"')
            answer = self.answer_for(req.sql)
            if answer is None:
                yield result(req, [], [])
            else:
                found = answer.requires.lower() in " ".join(req.sql.lower().split())
                yield result(req, answer.columns, answer.rows if found else [])

        def streaming_read(req: Any, ctx: grpc.ServicerContext) -> Any:
            self._record("StreamingRead")
            answer = self.reads.get(req.table)
            if answer is None:
                yield result(req, [(c, "STRING") for c in req.columns], [])
                return
            pos = [[n for n, _ in answer.columns].index(c) for c in req.columns]
            types = [answer.columns[i] for i in pos]
            yield result(req, types, [[row[i] for i in pos] for row in answer.rows])

        def stream(fn: Any, request_cls: Any) -> grpc.RpcMethodHandler:
            return grpc.unary_stream_rpc_method_handler(
                fn,
                request_deserializer=request_cls.pb().FromString,
                response_serializer=prs_cls.SerializeToString,
            )

        return {
            **session_handlers("pg", self._next, self._record),
            "BeginTransaction": unary(begin_transaction, t.BeginTransactionRequest, tx_cls),
            "Rollback": unary(rollback, t.RollbackRequest, empty_pb2.Empty),
            "Commit": unary(commit, None, t.CommitResponse.pb()),
            "ExecuteStreamingSql": stream(execute_streaming_sql, t.ExecuteSqlRequest),
            "StreamingRead": stream(streaming_read, t.ReadRequest),
        }

    # -- admin service ------------------------------------------------------------------
    def _admin(self) -> dict[str, grpc.RpcMethodHandler]:
        from google.cloud.spanner_admin_database_v1 import types as a
        from google.longrunning import operations_pb2
        from google.protobuf import any_pb2, empty_pb2

        def get_database(req: Any, ctx: grpc.ServicerContext) -> Any:
            self._record("GetDatabase")
            db = a.Database.pb()(name=req.name)
            db.state = a.Database.State.READY
            db.database_dialect = int(self.dialect)
            return db

        def get_database_ddl(req: Any, ctx: grpc.ServicerContext) -> Any:
            self._record("GetDatabaseDdl")
            return a.GetDatabaseDdlResponse.pb()(statements=list(self.ddl))

        def update_database_ddl(req: Any, ctx: grpc.ServicerContext) -> Any:
            with self._lock:
                self.calls.append("UpdateDatabaseDdl")
                self.ddl_updates.append(list(req.statements))
            self.ddl.extend(req.statements)
            op = operations_pb2.Operation(name=f"{req.database}/operations/pg-{self._next()}")
            meta = a.UpdateDatabaseDdlMetadata.pb()(
                database=req.database, statements=list(req.statements)
            )
            op.metadata.Pack(meta)
            done = any_pb2.Any()
            done.Pack(empty_pb2.Empty())
            op.response.CopyFrom(done)
            op.done = True
            return op

        return {
            "GetDatabase": unary(get_database, a.GetDatabaseRequest, a.Database.pb()),
            "GetDatabaseDdl": unary(
                get_database_ddl, a.GetDatabaseDdlRequest, a.GetDatabaseDdlResponse.pb()
            ),
            "UpdateDatabaseDdl": unary(
                update_database_ddl, a.UpdateDatabaseDdlRequest, operations_pb2.Operation
            ),
        }

    def _operations(self) -> dict[str, grpc.RpcMethodHandler]:
        from google.longrunning import operations_pb2

        def get_operation(req: Any, ctx: grpc.ServicerContext) -> Any:
            return operations_pb2.Operation(name=req.name, done=True)

        return {
            "GetOperation": grpc.unary_unary_rpc_method_handler(
                get_operation,
                request_deserializer=operations_pb2.GetOperationRequest.FromString,
                response_serializer=operations_pb2.Operation.SerializeToString,
            )
        }

    def __enter__(self) -> PgSpanner:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=0.5)
