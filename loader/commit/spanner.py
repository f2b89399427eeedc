"""The one door to google-cloud-spanner's internals: :class:`SpannerCommitter`.

Commits go out as hand-built ``CommitRequest`` wire bytes on the client's own gRPC channel:
the rows are encoded straight to ``Mutation`` bytes (loader/encode.py) and stay bytes up to the
socket. The client's ``Batch.commit`` would parse them into proto-plus objects, copy them into a
``CommitRequest`` and serialise it again, which cost about as much as encoding the rows in the
first place (benchmarks/README.md).

Doing so takes private parts of the client (its sessions manager, request ids, metadata,
the gapic transport's channel). Nothing else in the loader touches them.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any, Optional, Sequence

import grpc
import pyarrow as pa
from google.api_core import exceptions as gexc

from ..encode import varint_bytes
from ..errors import CommitError
from .errors import is_session_not_found

COMMIT_METHOD = "/google.spanner.v1.Spanner/Commit"
#: Deadline of one Commit RPC, in seconds. A healthy commit of our sizes takes well under a
#: second (a 100 MiB one, seconds); a stalled connection or a server that stopped answering
#: should surface as DEADLINE_EXCEEDED, which the runner retries within --max-retry-time,
#: instead of holding a commit thread for the gapic's default hour.
COMMIT_TIMEOUT = 120.0
#: Fresh sessions a commit tries when the server keeps reporting its session as not found.
SESSION_ATTEMPTS = 3
# CommitRequest field tags (google/spanner/v1/spanner.proto): session = 1, mutations = 4, both
# length-delimited. single_use_transaction = 3, request_options = 6 and max_commit_delay = 8
# are serialised once, from the client's own types (SpannerCommitter.__init__).
_TAG_SESSION = b"\x0a"
_TAG_MUTATION = b"\x22"


class SpannerCommitter:
    """Commits hand-built ``CommitRequest`` wire bytes on the client's own gRPC channel.

    What it takes from google-cloud-spanner, so it behaves like ``database.batch()``:

    * the session: checked out of ``database.sessions_manager`` for read/write and put back,
      per commit (a multiplexed session by default, else one from the database's pool);
    * the channel: the gapic transport's, so credentials, endpoint and the emulator settings
      are the client's;
    * the request: ``session`` (1), ``single_use_transaction`` (3: read_write, merged over the
      client's default read/write options as ``Batch.commit`` does), ``mutations`` (4, our
      bytes as they are), ``request_options`` (6: priority, transaction tag) and
      ``max_commit_delay`` (8). tests/test_commit_request.py checks that the bytes equal what
      ``Batch.commit`` sends for the same mutations and options;
    * the metadata the client sends with Commit: the resource prefix, leader-aware routing,
      the session routing header, its x-goog-api-client and its request id.

    What it leaves out: the client's retries (see loader/commit/__init__.py), and its
    OpenTelemetry span and built-in metrics for the Commit RPC (with the header asking Spanner's
    front end for its server timing, which only feeds those metrics).

    A session the server no longer knows is replaced, and the commit sent again: a pool
    session as the client's own checkouts do it (a new session goes back to the pool in its
    place); a multiplexed one, which the sessions manager would keep handing out until its
    weekly refresh, gets a new multiplexed session standing in for it in this committer.
    """

    def __init__(
        self,
        database: Any,
        *,
        priority: Optional[str] = None,
        max_commit_delay_ms: Optional[int] = None,
        tag: Optional[str] = None,
        timeout: float = COMMIT_TIMEOUT,
    ) -> None:
        from google.api_core.gapic_v1 import routing_header
        from google.cloud.spanner_v1 import CommitRequest, RequestOptions, TransactionOptions

        self.database = database
        self.timeout = timeout
        opts: dict[str, Any] = {}
        if priority:
            opts["priority"] = {
                "low": RequestOptions.Priority.PRIORITY_LOW,
                "medium": RequestOptions.Priority.PRIORITY_MEDIUM,
                "high": RequestOptions.Priority.PRIORITY_HIGH,
            }[priority]
        delay = timedelta(milliseconds=max_commit_delay_ms) if max_commit_delay_ms else None
        self._stand_ins: dict[str, Any] = {}
        self._lock = threading.Lock()
        if tag:
            opts["transaction_tag"] = tag
        txn = _merge_default_read_write(
            database, TransactionOptions(read_write=TransactionOptions.ReadWrite())
        )
        # Protobuf writes fields in number order: session (1) + this + mutations (4) + tail
        # is byte for byte what the client serialises.
        self._head = CommitRequest.serialize(CommitRequest(single_use_transaction=txn))
        # Batch.commit always sends request_options, empty when there are none.
        self._tail = CommitRequest.serialize(
            CommitRequest(request_options=RequestOptions(**opts), max_commit_delay=delay)
        )
        self._routing = routing_header.to_grpc_metadata
        self._metadata = _commit_metadata(database)
        self._rpc = database.spanner_api.transport.grpc_channel.unary_unary(
            COMMIT_METHOD,
            request_serializer=None,  # the request is bytes already
            response_deserializer=None,  # nothing in the CommitResponse is used
        )

    def request(self, session: str, mutations: Sequence[bytes]) -> bytes:
        """The ``CommitRequest`` wire bytes committing ``mutations`` in ``session`` (a name)."""
        name = session.encode()
        parts = [_TAG_SESSION, varint_bytes(len(name)), name, self._head]
        for m in mutations:
            parts += (_TAG_MUTATION, varint_bytes(len(m)), m)
        parts.append(self._tail)
        return b"".join(parts)

    def commit(self, mutations: Sequence[bytes]) -> None:
        """Commit these ``Mutation`` messages (wire bytes) atomically."""
        from google.cloud.spanner_v1.database_sessions_manager import TransactionType

        manager = self.database.sessions_manager
        for _ in range(SESSION_ATTEMPTS):
            session = manager.get_session(TransactionType.READ_WRITE)
            give_back = session
            try:
                used = self._stand_ins.get(session.name, session)
                try:
                    self._send(used.name, mutations)
                    return
                except gexc.NotFound as e:
                    if not is_session_not_found(e):
                        raise
                    give_back = self._replace(session, used)
            finally:
                manager.put_session(give_back)
        raise CommitError(
            f"Spanner reported {SESSION_ATTEMPTS} new sessions in a row as not found",
            hint="check that the database still exists and that nothing deletes its sessions",
        )

    def _send(self, session: str, mutations: Sequence[bytes]) -> None:
        db = self.database
        metadata = [*self._metadata, self._routing((("session", session),))]
        # the client's request id (client, channel, request number, attempt): lets Google
        # support find this RPC in the server's logs, as for every RPC the client sends itself
        metadata = db.metadata_with_request_id(db._next_nth_request, 1, metadata)
        try:
            self._rpc(self.request(session, mutations), timeout=self.timeout, metadata=metadata)
        except grpc.RpcError as e:
            # the exception the gapic layer would raise: CommitRunner and server_retry_delay
            # key off its class, its details (RetryInfo) and the grpc call in its errors
            raise gexc.from_grpc_error(e) from e

    def _replace(self, session: Any, used: Any) -> Any:
        """Replace a session the server reported as not found; return the one to put back."""
        from google.cloud.spanner_v1.session import Session

        db = self.database
        if not session.is_multiplexed:
            fresh = Session(db, database_role=db.database_role)
            fresh.create()
            return fresh
        with self._lock:
            if self._stand_ins.get(session.name, session) is used:  # not replaced meanwhile
                fresh = Session(db, database_role=db.database_role, is_multiplexed=True)
                fresh.create()
                self._stand_ins[session.name] = fresh
        return session

    def existing_keys(self, table: str, keys: pa.Table) -> int:
        from google.cloud.spanner_v1 import KeySet

        from ..keys import key_tuples

        rows = key_tuples(keys)
        found = 0
        with self.database.snapshot() as snap:
            for _ in snap.read(table, list(keys.column_names), KeySet(keys=rows)):
                found += 1
        return found


def _merge_default_read_write(database: Any, txn: Any) -> Any:
    """``txn`` over the client's default read/write transaction options, as Batch.commit
    merges them (a Client(default_transaction_options=...) sets e.g. the isolation level)."""
    from google.cloud.spanner_v1 import TransactionOptions

    defaults = database.default_transaction_options
    if defaults is None:
        return txn
    merged = TransactionOptions.pb()()
    merged.MergeFrom(TransactionOptions.pb(defaults.default_read_write_transaction_options))
    merged.MergeFrom(TransactionOptions.pb(txn))
    return TransactionOptions.wrap(merged)


def _commit_metadata(database: Any) -> list[tuple[str, str]]:
    """The per-database gRPC metadata google-cloud-spanner sends with a Commit.

    ``google-cloud-resource-prefix`` and ``x-goog-spanner-route-to-leader`` (on unless the
    client was built with ``route_to_leader_enabled=False``) route the request to the
    database and its leader region; ``x-goog-api-client`` names the client library and
    versions, as the gapic layer adds it to every call.
    """
    # private attributes: the client offers no public accessor for these (the headers are
    # compared with the client's own in tests/test_commit_request.py)
    client = database._instance._client
    metadata = [("google-cloud-resource-prefix", database.name)]
    if database._route_to_leader_enabled:
        metadata.append(("x-goog-spanner-route-to-leader", "true"))
    metadata.append(client._client_info.to_grpc_metadata())
    return metadata
