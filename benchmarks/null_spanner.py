"""A null Cloud Spanner server: speaks just enough of ``google.spanner.v1.Spanner`` for a
writer, acknowledges every commit at once and counts the rows it received.

It measures the client side of a load (parse, convert, sort, encode, the client library's
commit path, gRPC) with the server's cost taken out. It runs in its own process
(:class:`NullSpanner` starts it with multiprocessing) so its Python work does not share the
loader's GIL; on a 2-core machine it still shares the CPUs.

Requests are parsed with the raw protobuf classes behind google-cloud-spanner's proto-plus
types (``Type.pb()``), which is what the wire carries; a commit is acknowledged with a
``CommitResponse`` carrying the current time as its commit timestamp. Methods a writer does not
need (ExecuteSql, Read & co.) answer with empty results, and the admin API's GetDatabase,
GetDatabaseDdl and UpdateDatabaseDdl answer at once, so a load with its checkpoint table on
(which the Beam path needs) runs here as a fresh run; any method this server does not know is
logged to stderr and answered UNIMPLEMENTED, so a client upgrade that starts calling
something new shows up in the benchmark log instead of hanging.

Run it alone for manual experiments::

    python -m benchmarks.null_spanner --port 9999
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import multiprocessing.synchronize
import socket
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Callable, Optional

import grpc

SERVICE = "google.spanner.v1.Spanner"
ADMIN = "google.spanner.admin.database.v1.DatabaseAdmin"


@dataclass
class Counts:
    """What the server has received so far."""

    commits: int
    rows: int
    mutations: int
    bytes: int


def _pb(cls: Any) -> Any:
    """The raw protobuf message class behind a proto-plus type."""
    return cls.pb()


def _handlers(
    counters: Any, lock: multiprocessing.synchronize.Lock
) -> dict[str, grpc.RpcMethodHandler]:
    from google.cloud.spanner_v1 import types as t
    from google.protobuf import empty_pb2

    CreateSessionRequest = _pb(t.CreateSessionRequest)
    BatchCreateSessionsRequest = _pb(t.BatchCreateSessionsRequest)
    GetSessionRequest = _pb(t.GetSessionRequest)
    DeleteSessionRequest = _pb(t.DeleteSessionRequest)
    BeginTransactionRequest = _pb(t.BeginTransactionRequest)
    CommitRequest = _pb(t.CommitRequest)
    RollbackRequest = _pb(t.RollbackRequest)
    ExecuteSqlRequest = _pb(t.ExecuteSqlRequest)
    ReadRequest = _pb(t.ReadRequest)
    Session = _pb(t.Session)
    BatchCreateSessionsResponse = _pb(t.BatchCreateSessionsResponse)
    Transaction = _pb(t.Transaction)
    CommitResponse = _pb(t.CommitResponse)
    ResultSet = _pb(t.ResultSet)
    PartialResultSet = _pb(t.PartialResultSet)

    ids = iter(range(1, 1 << 62))
    id_lock = threading.Lock()

    def next_id() -> int:
        with id_lock:
            return next(ids)

    def new_session(database: str, template: Any) -> Any:
        s = Session(name=f"{database}/sessions/null-{next_id()}")
        s.multiplexed = template.multiplexed
        s.create_time.GetCurrentTime()
        return s

    def create_session(req: Any, ctx: grpc.ServicerContext) -> Any:
        return new_session(req.database, req.session)

    def batch_create_sessions(req: Any, ctx: grpc.ServicerContext) -> Any:
        out = BatchCreateSessionsResponse()
        for _ in range(max(1, req.session_count)):
            out.session.append(new_session(req.database, req.session_template))
        return out

    def get_session(req: Any, ctx: grpc.ServicerContext) -> Any:
        return Session(name=req.name)

    def begin_transaction(req: Any, ctx: grpc.ServicerContext) -> Any:
        return Transaction(id=b"null-tx-%d" % next_id())

    def commit(raw: bytes, ctx: grpc.ServicerContext) -> Any:
        req = CommitRequest.FromString(raw)
        rows = 0
        for m in req.mutations:
            op = m.WhichOneof("operation")
            if op == "delete":
                rows += len(m.delete.key_set.keys)
            elif op is not None:
                rows += len(getattr(m, op).values)
        with lock:
            counters[0] += 1
            counters[1] += rows
            counters[2] += len(req.mutations)
            counters[3] += len(raw)
        resp = CommitResponse()
        resp.commit_timestamp.GetCurrentTime()
        return resp

    def empty(req: Any, ctx: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()

    def execute_sql(req: Any, ctx: grpc.ServicerContext) -> Any:
        return ResultSet()

    def execute_streaming_sql(req: Any, ctx: grpc.ServicerContext) -> Any:
        yield PartialResultSet()

    def streaming_read(req: Any, ctx: grpc.ServicerContext) -> Any:
        yield PartialResultSet()

    def unary(
        fn: Callable[..., Any], request_cls: Optional[Any], response_cls: Any
    ) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            fn,
            request_deserializer=request_cls.FromString if request_cls is not None else None,
            response_serializer=response_cls.SerializeToString,
        )

    return {
        "CreateSession": unary(create_session, CreateSessionRequest, Session),
        "BatchCreateSessions": unary(
            batch_create_sessions, BatchCreateSessionsRequest, BatchCreateSessionsResponse
        ),
        "GetSession": unary(get_session, GetSessionRequest, Session),
        "DeleteSession": unary(empty, DeleteSessionRequest, empty_pb2.Empty),
        "BeginTransaction": unary(begin_transaction, BeginTransactionRequest, Transaction),
        # identity deserializer: the handler parses the bytes itself and counts their size
        "Commit": unary(commit, None, CommitResponse),
        "Rollback": unary(empty, RollbackRequest, empty_pb2.Empty),
        "ExecuteSql": unary(execute_sql, ExecuteSqlRequest, ResultSet),
        "ExecuteStreamingSql": grpc.unary_stream_rpc_method_handler(
            execute_streaming_sql,
            request_deserializer=ExecuteSqlRequest.FromString,
            response_serializer=PartialResultSet.SerializeToString,
        ),
        "Read": unary(execute_sql, ReadRequest, ResultSet),
        "StreamingRead": grpc.unary_stream_rpc_method_handler(
            streaming_read,
            request_deserializer=ReadRequest.FromString,
            response_serializer=PartialResultSet.SerializeToString,
        ),
    }


def _admin_handlers() -> dict[str, grpc.RpcMethodHandler]:
    """What the loader's checkpoint table needs of the admin API: an empty schema, and DDL
    accepted at once (so a load with checkpoints on runs against this server; every read
    answers no rows, so each run is a fresh one)."""
    from google.cloud.spanner_admin_database_v1 import types as a
    from google.longrunning import operations_pb2
    from google.protobuf import any_pb2, empty_pb2

    GetDatabaseDdlRequest = _pb(a.GetDatabaseDdlRequest)
    GetDatabaseDdlResponse = _pb(a.GetDatabaseDdlResponse)
    UpdateDatabaseDdlRequest = _pb(a.UpdateDatabaseDdlRequest)
    GetDatabaseRequest = _pb(a.GetDatabaseRequest)
    Database = _pb(a.Database)

    def get_database(req: Any, ctx: grpc.ServicerContext) -> Any:
        return Database(name=req.name, state=Database.State.READY)

    def get_ddl(req: Any, ctx: grpc.ServicerContext) -> Any:
        return GetDatabaseDdlResponse()

    def update_ddl(req: Any, ctx: grpc.ServicerContext) -> Any:
        done = any_pb2.Any()
        done.Pack(empty_pb2.Empty())
        return operations_pb2.Operation(name="null-ddl", done=True, response=done)

    return {
        "GetDatabase": grpc.unary_unary_rpc_method_handler(
            get_database,
            request_deserializer=GetDatabaseRequest.FromString,
            response_serializer=Database.SerializeToString,
        ),
        "GetDatabaseDdl": grpc.unary_unary_rpc_method_handler(
            get_ddl,
            request_deserializer=GetDatabaseDdlRequest.FromString,
            response_serializer=GetDatabaseDdlResponse.SerializeToString,
        ),
        "UpdateDatabaseDdl": grpc.unary_unary_rpc_method_handler(
            update_ddl,
            request_deserializer=UpdateDatabaseDdlRequest.FromString,
            response_serializer=operations_pb2.Operation.SerializeToString,
        ),
    }


class _LogUnknown(grpc.GenericRpcHandler):
    """Logs any method no other handler took (answered UNIMPLEMENTED by grpc)."""

    def service(self, handler_call_details: Any) -> None:
        print(f"null_spanner: unimplemented method {handler_call_details.method}", file=sys.stderr)
        return None


def serve(
    port: int,
    counters: Any,
    lock: multiprocessing.synchronize.Lock,
    ready: Optional[multiprocessing.synchronize.Event] = None,
    stop: Optional[multiprocessing.synchronize.Event] = None,
    workers: int = 16,
) -> None:
    """Serve on 127.0.0.1:``port`` until ``stop`` is set (forever without one)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers),
        options=[
            ("grpc.max_receive_message_length", 256 << 20),
            ("grpc.max_send_message_length", 256 << 20),
        ],
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(SERVICE, _handlers(counters, lock)),
            grpc.method_handlers_generic_handler(ADMIN, _admin_handlers()),
            _LogUnknown(),
        )
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    if ready is not None:
        ready.set()
    try:
        if stop is None:
            server.wait_for_termination()
        else:
            stop.wait()
    finally:
        server.stop(grace=0.5)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NullSpanner:
    """The null server in a child process. Use as a context manager::

    with NullSpanner() as server:
        os.environ["SPANNER_EMULATOR_HOST"] = server.address
        ...
        print(server.counts().rows)
    """

    def __init__(self, workers: int = 16) -> None:
        # spawn, not fork: the parent may already run grpc threads, which fork does not copy
        self._ctx = mp.get_context("spawn")
        self.port = _free_port()
        self._lock = self._ctx.Lock()
        self._counters = self._ctx.Array("q", 4, lock=False)
        self._ready = self._ctx.Event()
        self._stop = self._ctx.Event()
        self._proc = self._ctx.Process(
            target=serve,
            args=(self.port, self._counters, self._lock, self._ready, self._stop, workers),
            daemon=True,
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> NullSpanner:
        self._proc.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError("the null Spanner server did not start")
        return self

    def counts(self) -> Counts:
        with self._lock:
            c, r, m, b = self._counters[:]
        return Counts(commits=c, rows=r, mutations=m, bytes=b)

    def reset(self) -> None:
        with self._lock:
            self._counters[:] = [0, 0, 0, 0]

    def stop(self) -> None:
        self._stop.set()
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(5)

    def __enter__(self) -> NullSpanner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    counters = ctx.Array("q", 4, lock=False)
    lock = ctx.Lock()
    port = args.port or _free_port()
    print(f"SPANNER_EMULATOR_HOST=127.0.0.1:{port}", flush=True)
    t = threading.Thread(target=serve, args=(port, counters, lock), daemon=True)
    t.start()
    try:
        while True:
            time.sleep(5)
            print(f"commits={counters[0]} rows={counters[1]} bytes={counters[3]}", flush=True)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
