"""A recording Cloud Spanner server for tests: what exactly does a client put on the wire?

It answers the session RPCs a writer needs and acknowledges every Commit, keeping each Commit's
raw request bytes and the gRPC metadata it came with; ``refusals`` queues error statuses (with
details such as RetryInfo) to answer the next Commits with, and ``lost_sessions`` names sessions
it answers "Session not found" for. CreateSession requests are kept too (``session_requests``),
and ExecuteStreamingSql / StreamingRead answer from ``streams`` (scripted PartialResultSet
messages, a Status among them breaks the stream there), keeping each request in ``reads``. It also answers
``DatabaseAdmin.AddSplitPoints`` (which the emulator does not implement), keeping each request
in ``split_requests`` (``split_refusals`` queues statuses for those), in order with the
Commits in ``calls``. The emulator can do none of this,
and a byte-level comparison of two commit paths needs it. It runs in the test process (grpc's
own threads); point a client at it with ``SPANNER_EMULATOR_HOST``.
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Callable

import grpc

from loader.emulator import free_port

SERVICE = "google.spanner.v1.Spanner"
ADMIN_SERVICE = "google.spanner.admin.database.v1.DatabaseAdmin"


def unary(fn: Any, request_cls: Any, response_cls: Any) -> grpc.RpcMethodHandler:
    """A unary handler; ``request_cls`` None hands ``fn`` the raw request bytes."""
    return grpc.unary_unary_rpc_method_handler(
        fn,
        request_deserializer=request_cls.pb().FromString if request_cls else None,
        response_serializer=response_cls.SerializeToString,
    )


def session_handlers(
    prefix: str, next_id: Callable[[], int], record: Callable[[str], None] = lambda _: None
) -> dict[str, grpc.RpcMethodHandler]:
    """The session RPCs a writing client makes (CreateSession, BatchCreateSessions,
    GetSession, DeleteSession), for a test server; session names end in ``prefix-<n>``."""
    from google.cloud.spanner_v1 import types as t
    from google.protobuf import empty_pb2

    session_cls = t.Session.pb()

    def new_session(database: str, template: Any) -> Any:
        s = session_cls(name=f"{database}/sessions/{prefix}-{next_id()}")
        if "multiplexed" in session_cls.DESCRIPTOR.fields_by_name:  # not before 3.47 or so
            s.multiplexed = template.multiplexed
        return s

    def create_session(req: Any, ctx: grpc.ServicerContext) -> Any:
        record("CreateSession")
        return new_session(req.database, req.session)

    def batch_create_sessions(req: Any, ctx: grpc.ServicerContext) -> Any:
        record("BatchCreateSessions")
        out = t.BatchCreateSessionsResponse.pb()()
        for _ in range(max(1, req.session_count)):
            out.session.append(new_session(req.database, req.session_template))
        return out

    def get_session(req: Any, ctx: grpc.ServicerContext) -> Any:
        return session_cls(name=req.name)

    def delete_session(req: Any, ctx: grpc.ServicerContext) -> Any:
        return empty_pb2.Empty()

    return {
        "CreateSession": unary(create_session, t.CreateSessionRequest, session_cls),
        "BatchCreateSessions": unary(
            batch_create_sessions,
            t.BatchCreateSessionsRequest,
            t.BatchCreateSessionsResponse.pb(),
        ),
        "GetSession": unary(get_session, t.GetSessionRequest, session_cls),
        "DeleteSession": unary(delete_session, t.DeleteSessionRequest, empty_pb2.Empty),
    }


@dataclass(frozen=True)
class Received:
    """One Commit as the server saw it."""

    request: bytes
    metadata: tuple[tuple[str, str], ...]

    def header(self, key: str) -> list[str]:
        return [v for k, v in self.metadata if k == key]


class CaptureSpanner:
    """``with CaptureSpanner() as server: ...``; ``server.commits`` lists what arrived."""

    def __init__(self, local_credentials: bool = False) -> None:
        """``local_credentials``: serve over gRPC's local credentials (LOCAL_TCP), so that a
        client can attach call credentials (an auth metadata plugin) as it does to Spanner."""
        self.port = free_port()
        self.commits: list[Received] = []
        self.refusals: list[Any] = []
        """``google.rpc.status_pb2.Status`` messages: each answers one Commit, in order."""
        self.commit_replies: list[Any] = []
        """``CommitResponse`` protobufs answering the next acknowledged Commits, in order (then
        one with a commit timestamp)."""
        self.split_requests: list[Any] = []
        """Each ``AddSplitPointsRequest`` (protobuf) as it arrived."""
        self.split_refusals: list[Any] = []
        """Statuses answering the next AddSplitPoints calls, in order."""
        self.calls: list[str] = []
        """"Commit" and "AddSplitPoints", in the order they arrived."""
        self.session_requests: list[Received] = []
        """Each CreateSession, raw, with its metadata."""
        self.session_refusals: list[Any] = []
        """Statuses answering the next CreateSession calls, in order."""
        self.lost_sessions: set[str] = set()
        """Session names a Commit or streamed read is answered NOT_FOUND "Session not found" for."""
        self.reads: list[Received] = []
        """Each ExecuteStreamingSql / StreamingRead request, raw, with its metadata."""
        self.streams: list[list[Any]] = []
        """Answers of the next streamed reads: PartialResultSet bytes, or a Status to end with."""
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(SERVICE, self._handlers()),
                grpc.method_handlers_generic_handler(ADMIN_SERVICE, self._admin_handlers()),
            )
        )
        if local_credentials:
            creds = grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP)
            self._server.add_secure_port(f"127.0.0.1:{self.port}", creds)
        else:
            self._server.add_insecure_port(f"127.0.0.1:{self.port}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        from google.cloud.spanner_v1 import types as t

        def next_id() -> int:
            with self._lock:
                return next(self._ids)

        def metadata(ctx: grpc.ServicerContext) -> tuple[tuple[str, str], ...]:
            return tuple((k, v) for k, v in ctx.invocation_metadata() if isinstance(v, str))

        def lost(session: str, ctx: grpc.ServicerContext) -> None:
            if session in self.lost_sessions:
                ctx.abort(grpc.StatusCode.NOT_FOUND, f"Session not found: {session}")

        def commit(raw: bytes, ctx: grpc.ServicerContext) -> Any:
            from grpc_status import rpc_status

            with self._lock:
                self.commits.append(Received(raw, metadata(ctx)))
                self.calls.append("Commit")
            lost(t.CommitRequest.pb().FromString(raw).session, ctx)
            with self._lock:
                refusal = self.refusals.pop(0) if self.refusals else None
            if refusal is not None:
                ctx.abort_with_status(rpc_status.to_status(refusal))
            with self._lock:
                if self.commit_replies:
                    return self.commit_replies.pop(0)
            resp = t.CommitResponse.pb()()
            resp.commit_timestamp.GetCurrentTime()
            return resp

        handlers = session_handlers("capture", next_id)
        create_session = handlers["CreateSession"].unary_unary
        parse_create = t.CreateSessionRequest.pb().FromString

        def create_session_raw(raw: bytes, ctx: grpc.ServicerContext) -> Any:
            from grpc_status import rpc_status

            with self._lock:
                self.session_requests.append(Received(raw, metadata(ctx)))
                refusal = self.session_refusals.pop(0) if self.session_refusals else None
            if refusal is not None:
                ctx.abort_with_status(rpc_status.to_status(refusal))
            return create_session(parse_create(raw), ctx)

        def streamed(request_cls: Any) -> Callable[[bytes, grpc.ServicerContext], Any]:
            def answer(raw: bytes, ctx: grpc.ServicerContext) -> Any:
                from grpc_status import rpc_status

                with self._lock:
                    self.reads.append(Received(raw, metadata(ctx)))
                    script = self.streams.pop(0) if self.streams else []
                lost(request_cls.pb().FromString(raw).session, ctx)
                for item in script:
                    if isinstance(item, bytes):
                        yield item
                    else:
                        ctx.abort_with_status(rpc_status.to_status(item))

            return answer

        def stream_handler(request_cls: Any) -> grpc.RpcMethodHandler:
            return grpc.unary_stream_rpc_method_handler(
                streamed(request_cls), request_deserializer=None, response_serializer=None
            )

        return {
            **handlers,
            "CreateSession": unary(create_session_raw, None, t.Session.pb()),
            # no deserializer: the raw request bytes are what the tests compare
            "Commit": unary(commit, None, t.CommitResponse.pb()),
            "ExecuteStreamingSql": stream_handler(t.ExecuteSqlRequest),
            "StreamingRead": stream_handler(t.ReadRequest),
        }

    def _admin_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        try:
            from google.cloud.spanner_admin_database_v1.types import spanner_database_admin as a
        except ImportError:  # pragma: no cover - every supported client has the module
            return {}
        if not hasattr(a, "AddSplitPointsRequest"):  # google-cloud-spanner < 3.53
            return {}

        def add_split_points(req: Any, ctx: grpc.ServicerContext) -> Any:
            from grpc_status import rpc_status

            with self._lock:
                self.split_requests.append(req)
                self.calls.append("AddSplitPoints")
                refusal = self.split_refusals.pop(0) if self.split_refusals else None
            if refusal is not None:
                ctx.abort_with_status(rpc_status.to_status(refusal))
            return a.AddSplitPointsResponse.pb()()

        return {
            "AddSplitPoints": unary(
                add_split_points, a.AddSplitPointsRequest, a.AddSplitPointsResponse.pb()
            )
        }

    def __enter__(self) -> CaptureSpanner:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=0.5)
