"""The one door to google-cloud-spanner's internals: :class:`SpannerCommitter`.

Commits go out as hand-built ``CommitRequest`` wire bytes on the client's own gRPC channel:
the rows are encoded straight to ``Mutation`` bytes (loader/encode) and stay bytes up to the
socket. The client's ``Batch.commit`` would parse them into proto-plus objects, copy them into a
``CommitRequest`` and serialise it again, which cost about as much as encoding the rows in the
first place (benchmarks/README.md).

Doing so takes private parts of the client (its sessions manager, request ids, metadata,
the gapic transport's channel). Nothing else in the loader touches them. The committer checks
them all when it is built: with a google-cloud-spanner release that lacks one (older, or a newer
one that moved it), it commits through the client's public ``database.batch()`` instead
(slower: each mutation is decoded from its wire bytes back into the client's values) and says
so in :attr:`SpannerCommitter.notes`, which the load report shows.
"""

from __future__ import annotations

import base64
import inspect
import threading
from datetime import timedelta
from typing import Any, Callable, Optional, Sequence

import grpc
import pyarrow as pa

from ..errors import CommitError
from ..wire.requests import commit as commit_request
from .errors import from_grpc, gexc, is_session_not_found

COMMIT_METHOD = "/google.spanner.v1.Spanner/Commit"
#: Deadline of one Commit RPC, in seconds. A healthy commit of our sizes takes well under a
#: second (a 100 MiB one, seconds); a stalled connection or a server that stopped answering
#: should surface as DEADLINE_EXCEEDED, which the runner retries within --max-retry-time,
#: instead of holding a commit thread for the gapic's default hour.
COMMIT_TIMEOUT = 120.0
#: Fresh sessions a commit tries when the server keeps reporting its session as not found.
SESSION_ATTEMPTS = 3
# CommitRequest: session = 1 and mutations = 4 are framed by loader.wire.requests.commit;
# single_use_transaction = 3, request_options = 6 and max_commit_delay = 8 are serialised
# once, from the client's own types (SpannerCommitter.__init__).


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

    A client without one of these internals (:func:`missing_internals`) gets the public path:
    ``database.batch()``, with the client's own sessions, metadata and retries, and a note in
    :attr:`notes` naming what was missing.
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
        self.notes: list[str] = []
        """What the load report should say about how commits go out (the public path)."""
        missing = missing_internals(database)
        self.public_path = bool(missing)
        """Commits go through ``database.batch()``: the client lacks an internal we use."""
        if missing:
            self.notes.append(
                f"google-cloud-spanner {client_version()} lacks {', '.join(missing)}: "
                "commits use the client's public batch API (slower)"
            )
            self._public = _PublicBatches(database, opts, tag, delay)
            return
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
            response_deserializer=None,  # read by check_commit_reply
        )

    def request(self, session: str, mutations: Sequence[bytes]) -> bytes:
        """The ``CommitRequest`` wire bytes committing ``mutations`` in ``session`` (a name).

        Not on the public path (:attr:`public_path`), which sends no bytes of its own."""
        return commit_request(session, self._head, mutations, self._tail)

    def commit(self, mutations: Sequence[bytes]) -> None:
        """Commit these ``Mutation`` messages (wire bytes) atomically."""
        if self.public_path:
            self._public.commit(mutations)
            return
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
            reply = self._rpc(
                self.request(session, mutations), timeout=self.timeout, metadata=metadata
            )
        except grpc.RpcError as e:
            # the exception the gapic layer would raise: CommitRunner and server_retry_delay
            # key off its class, its details (RetryInfo) and the grpc call in its errors
            raise from_grpc(e) from e
        from ..wire.results import check_commit_reply

        check_commit_reply(reply)  # a precommit token: not committed, ABORTED to send again

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

    def existing_keys(self, table: str, keys: pa.Table) -> list[list[Any]]:
        from google.cloud.spanner_v1 import KeySet

        from ..keys import key_tuples

        # the client takes a BYTES key as its base64 text (raw bytes are refused)
        wanted = [
            [base64.b64encode(v) if isinstance(v, bytes) else v for v in key]
            for key in key_tuples(keys)
        ]
        with self.database.snapshot() as snap:
            rows = snap.read(table, list(keys.column_names), KeySet(keys=wanted))
            return [list(row) for row in rows]


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


_ABSENT = object()


def _has(obj: Any, name: str) -> bool:
    """``obj`` has attribute ``name``, found without running a property (reading
    ``_next_nth_request`` would use up a request number)."""
    return inspect.getattr_static(obj, name, _ABSENT) is not _ABSENT


def missing_internals(database: Any) -> list[str]:
    """The client internals :class:`SpannerCommitter` uses that ``database`` lacks (none with
    the google-cloud-spanner releases it was written against)."""

    def sessions_manager() -> bool:
        from google.cloud.spanner_v1.database_sessions_manager import TransactionType

        manager = database.sessions_manager
        return (
            TransactionType.READ_WRITE is not None
            and callable(manager.get_session)
            and callable(manager.put_session)
        )

    def multiplexed_sessions() -> bool:
        from google.cloud.spanner_v1.session import Session

        return "is_multiplexed" in inspect.signature(Session).parameters and _has(
            Session, "is_multiplexed"
        )

    def routing_header() -> bool:
        from google.api_core.gapic_v1 import routing_header

        return callable(routing_header.to_grpc_metadata)

    probes: list[tuple[str, Callable[[], bool]]] = [
        ("Database.sessions_manager", sessions_manager),
        ("Session(is_multiplexed=)", multiplexed_sessions),
        ("Database.metadata_with_request_id", lambda: callable(database.metadata_with_request_id)),
        ("Database._next_nth_request", lambda: _has(database, "_next_nth_request")),
        (
            "Database.default_transaction_options",
            lambda: _has(database, "default_transaction_options"),
        ),
        ("Database.database_role", lambda: _has(database, "database_role")),
        ("Database._route_to_leader_enabled", lambda: _has(database, "_route_to_leader_enabled")),
        (
            "Client._client_info",
            lambda: callable(database._instance._client._client_info.to_grpc_metadata),
        ),
        (
            "the gapic transport's grpc_channel",
            lambda: callable(database.spanner_api.transport.grpc_channel.unary_unary),
        ),
        ("routing_header.to_grpc_metadata", routing_header),
    ]
    missing = []
    for name, probe in probes:
        try:
            ok = probe()
        except (AttributeError, ImportError, TypeError, ValueError):
            ok = False
        if not ok:
            missing.append(name)
    return missing


def client_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("google-cloud-spanner")
    except PackageNotFoundError:
        return "(version unknown)"


class _PublicBatches:
    """Commits through ``database.batch()``, the client's public API: each mutation's wire
    bytes are decoded back into the table, columns and values ``Batch.insert`` and friends
    take. The client encodes those values exactly as they were (INT64 and BYTES are strings
    on the wire already, NaN and infinities too), so the commit writes the same cells."""

    def __init__(
        self, database: Any, options: dict[str, Any], tag: Optional[str], delay: Optional[timedelta]
    ) -> None:
        self.database = database
        self.options = options
        self.tag = tag
        self.delay = delay

    def commit(self, mutations: Sequence[bytes]) -> None:
        for _ in range(SESSION_ATTEMPTS):
            try:
                self._commit_once(mutations)
                return
            except gexc.NotFound as e:
                # the pool hands out another session next time
                if not is_session_not_found(e):
                    raise
        raise CommitError(
            f"Spanner reported {SESSION_ATTEMPTS} sessions in a row as not found",
            hint="check that the database still exists and that nothing deletes its sessions",
        )

    def _commit_once(self, mutations: Sequence[bytes]) -> None:
        from google.cloud.spanner_v1 import Mutation

        pb = Mutation.pb()
        # a fresh dict each time: some releases' Batch.commit writes the tag into the options
        with self.database.batch(
            request_options=dict(self.options), max_commit_delay=self.delay
        ) as batch:
            if self.tag:
                batch.transaction_tag = self.tag
            for raw in mutations:
                add_mutation(batch, pb.FromString(raw))


def add_mutation(batch: Any, m: Any) -> None:
    """Add one ``Mutation`` (a protobuf, or its wire bytes) to a client ``Batch`` through
    its public methods: a write, or a delete of keys."""
    if isinstance(m, (bytes, bytearray, memoryview)):
        from google.cloud.spanner_v1 import Mutation

        m = Mutation.pb().FromString(bytes(m))
    kind = m.WhichOneof("operation")
    if kind == "delete" and not m.delete.key_set.ranges:  # keys: the loader deletes no range
        from google.cloud.spanner_v1 import KeySet

        keys = [_value(k) for k in m.delete.key_set.keys]
        batch.delete(m.delete.table, KeySet(keys=keys))
        return
    if kind not in ("insert", "update", "insert_or_update", "replace"):
        raise ValueError(f"a {kind!r} mutation has no public Batch method")
    write = getattr(m, kind)
    rows = [_value(row) for row in write.values]
    getattr(batch, kind)(write.table, list(write.columns), rows)


def _value(v: Any) -> Any:
    """A ``Value`` or ``ListValue`` protobuf as the Python value the client encodes back to it."""
    if v.DESCRIPTOR.name == "ListValue":
        return [_value(x) for x in v.values]
    kind = v.WhichOneof("kind")
    if kind == "null_value":
        return None
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    if kind in ("string_value", "bool_value", "number_value"):
        return getattr(v, kind)
    raise ValueError(f"a mutation value of kind {kind!r} has no client-side form")
