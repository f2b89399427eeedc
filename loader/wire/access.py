""":class:`WireAccess`: a load's database access over Spanner's gRPC protocol, by hand.

Service ``google.spanner.v1.Spanner``, the RPCs a load needs: CreateSession (one multiplexed
session, made on first use and replaced when the server reports it not found),
ExecuteStreamingSql and StreamingRead (single-use strong snapshots; a stream broken by
UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED or a transport reset is asked again from its last
resume token, with backoff, for up to ``max_retry_time``), and Commit (single-use read-write
transactions of mutation wire bytes). Requests are framed in loader/wire/requests.py, results
decoded in loader/wire/results.py; errors leave as google.api_core exceptions
(``from_grpc_error``), as the client's would, so the commit runner's retry and reject
handling key off the same classes.

gRPC metadata, as google-cloud-spanner sends it: ``google-cloud-resource-prefix`` (the
database) on every call, ``x-goog-request-params`` (the session, or the database for
CreateSession), ``x-goog-spanner-route-to-leader: true`` on CreateSession and Commit (the
read-write RPCs), and an ``x-goog-api-client`` naming Python, grpc and the loader. Not sent:
the client's request-id header and its OpenTelemetry and built-in metrics.

What this does not do is left to the client library, made on first use of :attr:`client`:
admin calls and DDL, the PostgreSQL dialect's per-view schema read, Beam, verify.
"""

from __future__ import annotations

import platform
import random
import threading
import time
from typing import Any, Callable, Optional, Sequence
from urllib.parse import quote

import grpc

from ..access import DatabaseAccess
from ..commit.errors import (
    from_grpc,
    gexc,
    is_retryable_read,
    is_session_not_found,
    server_retry_delay,
)
from ..errors import CommitError
from . import requests as rq
from .proto import fields, text
from .results import ResultStream, check_commit_reply

_SERVICE = "/google.spanner.v1.Spanner/"
SESSION_ATTEMPTS = 3
"""Fresh sessions an RPC tries when the server keeps reporting its session as not found."""
RETRY_INITIAL = 0.05
RETRY_CAP = 32.0
"""Backoff of a retried read or CreateSession: doubling from RETRY_INITIAL up to this, jittered."""
MAX_RETRY_TIME = 600.0
"""How long a read or CreateSession is retried (the load's default ``max_retry_time``)."""
QUERY_TIMEOUT = 300.0
SESSION_TIMEOUT = 60.0
COMMIT_TIMEOUT = 120.0
"""Deadline of one Commit RPC (as loader/commit/spanner.py's)."""


def api_client_header() -> tuple[str, str]:
    from .. import __version__

    return (
        "x-goog-api-client",
        f"gl-python/{platform.python_version()} grpc/{grpc.__version__} "
        f"spanner-loader/{__version__}",
    )


class WireAccess(DatabaseAccess):
    """:class:`loader.access.DatabaseAccess` over gRPC (see the module docstring).

    ``channel``: a gRPC channel to Spanner or the emulator (loader/connection.py opens it);
    ``make_client``: builds the google-cloud-spanner ``Database`` when :attr:`client` is
    first asked for (or ``client``, one made already)."""

    def __init__(
        self,
        name: str,
        channel: grpc.Channel,
        make_client: Optional[Callable[[], Any]] = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_retry_time: float = MAX_RETRY_TIME,
    ) -> None:
        self.name = name
        self.max_retry_time = max_retry_time
        self._clock = clock
        self.channel = channel
        self._make_client = make_client
        self._client = client
        self._sleep = sleep
        self._lock = threading.Lock()
        self._session: Optional[str] = None
        self._base = [("google-cloud-resource-prefix", name), api_client_header()]
        self.sessions_created = 0
        u = channel.unary_unary
        self._create = u(_SERVICE + "CreateSession")
        self._commit = u(_SERVICE + "Commit")
        self._sql = channel.unary_stream(_SERVICE + "ExecuteStreamingSql")
        self._read = channel.unary_stream(_SERVICE + "StreamingRead")

    # -- the client library, for the rest --------------------------------------------------

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                if self._make_client is None:
                    raise RuntimeError("this WireAccess was given no client library to fall to")
                self._client = self._make_client()
            return self._client

    # -- sessions ---------------------------------------------------------------------------

    def session(self) -> str:
        """The multiplexed session's name, created on first use."""
        with self._lock:
            if self._session is None:
                self._session = self._new_session()
            return self._session

    def _new_session(self) -> str:
        metadata = [
            *self._base,
            ("x-goog-request-params", "database=" + quote(self.name, safe="/")),
            ("x-goog-spanner-route-to-leader", "true"),
        ]
        request = rq.create_session(self.name)
        reply = self._retry(
            lambda: self._call(self._create, request, metadata, SESSION_TIMEOUT),
            lambda e: isinstance(e, gexc.ServiceUnavailable),
        )
        self.sessions_created += 1
        for number, v in fields(reply):
            if number == 1:
                return text(v)
        raise gexc.InternalServerError("CreateSession answered a session without a name")

    def _renew(self, stale: str) -> None:
        with self._lock:
            if self._session == stale:  # not replaced meanwhile by another thread
                self._session = None

    def _in_session(self, rpc: Callable[[str], Any]) -> Any:
        """``rpc(session name)``, again in a new session while the server reports the
        session as not found (the request was not run)."""
        for _ in range(SESSION_ATTEMPTS):
            name = self.session()
            try:
                return rpc(name)
            except gexc.NotFound as e:
                if not is_session_not_found(e):
                    raise
                self._renew(name)
        raise CommitError(
            f"Spanner reported {SESSION_ATTEMPTS} new sessions in a row as not found",
            hint="check that the database still exists and that nothing deletes its sessions",
        )

    def _metadata(self, session: str, leader: bool = False) -> list[tuple[str, str]]:
        out = [*self._base, ("x-goog-request-params", "session=" + quote(session, safe="/"))]
        if leader:
            out.append(("x-goog-spanner-route-to-leader", "true"))
        return out

    @staticmethod
    def _call(rpc: Any, request: bytes, metadata: Any, timeout: float) -> bytes:
        try:
            return bytes(rpc(request, timeout=timeout, metadata=metadata))
        except grpc.RpcError as e:
            raise from_grpc(e) from e

    # -- reads ------------------------------------------------------------------------------

    def query(self, sql: str, params: Optional[dict[str, str]] = None) -> list[list[Any]]:
        return self._in_session(
            lambda s: self._stream(
                self._sql, lambda token: rq.execute_sql(s, sql, params, token), s
            )
        )

    def read(
        self, table: str, columns: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> list[list[Any]]:
        return self._in_session(
            lambda s: self._stream(
                self._read, lambda token: rq.read(s, table, columns, keys, token), s
            )
        )

    def _stream(self, rpc: Any, request: Callable[[bytes], bytes], session: str) -> list[list[Any]]:
        result = ResultStream()

        def once() -> list[list[Any]]:
            token = result.rewind()  # what came after the last resume token is asked again
            try:
                for message in rpc(
                    request(token), timeout=QUERY_TIMEOUT, metadata=self._metadata(session)
                ):
                    result.add(message)
            except grpc.RpcError as e:
                raise from_grpc(e) from e
            return result.rows()

        return self._retry(once, is_retryable_read)  # type: ignore[no-any-return]

    def _retry(self, rpc: Callable[[], Any], retryable: Callable[[Exception], bool]) -> Any:
        """``rpc()``, again while it raises what ``retryable`` accepts, for up to
        :attr:`max_retry_time`: exponential backoff with jitter (or the server's RetryInfo
        delay, when longer)."""
        started = self._clock()
        attempt = 0
        while True:
            try:
                return rpc()
            except Exception as e:
                if not retryable(e) or self._clock() - started >= self.max_retry_time:
                    raise
                backoff = min(RETRY_CAP, RETRY_INITIAL * 2**attempt)
                delay = max(random.uniform(backoff / 2, backoff), server_retry_delay(e) or 0.0)
            self._sleep(delay)
            attempt += 1

    # -- commits ----------------------------------------------------------------------------

    def write(self, mutations: Sequence[bytes]) -> None:
        self.send_commit(rq.commit_head(), mutations, rq.commit_tail())

    def send_commit(
        self, head: bytes, mutations: Sequence[bytes], tail: bytes, timeout: float = COMMIT_TIMEOUT
    ) -> None:
        """One Commit RPC of ``mutations`` between ``head`` and ``tail`` (loader/wire/requests.py)."""

        def send(session: str) -> None:
            request = rq.commit(session, head, mutations, tail)
            reply = self._call(self._commit, request, self._metadata(session, leader=True), timeout)
            check_commit_reply(reply)

        self._in_session(send)

    def committer(
        self,
        *,
        priority: Optional[str] = None,
        max_commit_delay_ms: Optional[int] = None,
        tag: Optional[str] = None,
    ) -> WireCommitter:
        return WireCommitter(self, priority, max_commit_delay_ms, tag)


class WireCommitter:
    """The load's :class:`~loader.commit.Committer` on a :class:`WireAccess`: each batch one
    Commit of its mutation bytes (single-use read-write transaction, the load's priority,
    transaction tag and max commit delay), byte for byte the request
    :class:`~loader.commit.SpannerCommitter` sends (tests/test_wire.py)."""

    def __init__(
        self,
        access: WireAccess,
        priority: Optional[str] = None,
        max_commit_delay_ms: Optional[int] = None,
        tag: Optional[str] = None,
        timeout: float = COMMIT_TIMEOUT,
    ) -> None:
        self.access = access
        self.timeout = timeout
        self.notes: list[str] = []
        self._head = rq.commit_head()
        self._tail = rq.commit_tail(priority, tag, max_commit_delay_ms or 0)

    def request(self, session: str, mutations: Sequence[bytes]) -> bytes:
        return rq.commit(session, self._head, mutations, self._tail)

    def commit(self, mutations: Sequence[bytes]) -> None:
        self.access.send_commit(self._head, mutations, self._tail, self.timeout)

    def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
        from ..keys import key_tuples

        return self.access.read(table, list(keys.column_names), key_tuples(keys))
