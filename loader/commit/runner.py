"""Commit stage: send batches to Spanner, in parallel, retrying only what is safe to repeat.

Commits go out as hand-built ``CommitRequest`` wire bytes on the client's own gRPC channel
(:class:`SpannerCommitter`): the rows are encoded straight to ``Mutation`` bytes
(loader/encode.py) and stay bytes up to the socket. The client's ``Batch.commit`` would parse
them into proto-plus objects, copy them into a ``CommitRequest`` and serialise it again, which
cost about as much as encoding the rows in the first place (benchmarks/README.md).

Who retries what (see SPANNER_FACTS.md):

* Nothing below us retries a commit: the client's gapic layer, which retried the Commit RPC on
  UNAVAILABLE and RESOURCE_EXHAUSTED, and its ``Batch.commit``, which retried ABORTED for 30 s
  with 2^n-second sleeps (far too slow for the emulator, which aborts every concurrent
  commit), are both bypassed. Every error reaches :class:`CommitRunner` at once.
* ABORTED, UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, INTERNAL (e.g. RST_STREAM) and
  CANCELLED are retried here with short jittered exponential backoff, honouring the server's
  RetryInfo delay when there is one, for up to ``--max-retry-time``.
* DEADLINE_EXCEEDED, INTERNAL, CANCELLED and UNAVAILABLE leave the outcome unknown: the commit
  may have been applied. For upsert / replace / update that is harmless (re-applying writes
  the same values). For insert, a re-sent batch that was already applied fails with
  ALREADY_EXISTS; we then read the batch's keys back and count it as written when every key is
  present (a commit is atomic, so all or none of its rows landed).
* NOT_FOUND for the session itself (a session the server dropped) is not about the data: the
  committer replaces the session and sends the commit again (it was not applied).
* Everything else is permanent. A permanent error caused by the data (a value Spanner rejects, a
  missing interleave parent, a duplicate key in insert mode) is isolated by bisecting the batch:
  every good row is committed and each bad row goes to the reject file with Spanner's reason.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Optional, Protocol, Sequence

import grpc
import pyarrow as pa
from google.api_core import exceptions as gexc
from tenacity import RetryCallState, Retrying, retry_if_exception

from ..encode import varint_bytes, write_mutation
from ..errors import CommitError, LoaderError
from ..rejects import Reject
from ..throttle import AdaptiveLimiter, Throttle, ThrottleStopped

TRANSIENT = (
    gexc.Aborted,
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.ResourceExhausted,
    gexc.InternalServerError,
    gexc.Cancelled,
)
#: Transient errors after which we cannot know whether the commit was applied.
AMBIGUOUS = (
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.Cancelled,
    gexc.ServiceUnavailable,
)
#: Permanent errors that a particular row can cause (bisect to find it).
DATA_ERRORS = (
    gexc.FailedPrecondition,
    gexc.InvalidArgument,
    gexc.OutOfRange,
    gexc.NotFound,
    gexc.AlreadyExists,
)

OPS = {"upsert": "insert_or_update", "insert": "insert", "replace": "replace", "update": "update"}


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TRANSIENT)


def server_retry_delay(exc: BaseException) -> Optional[float]:
    """The RetryInfo delay a server attached to an error, in seconds, if any."""
    from google.rpc.error_details_pb2 import RetryInfo

    for detail in getattr(exc, "details", None) or ():
        if isinstance(detail, RetryInfo):
            return detail.retry_delay.seconds + detail.retry_delay.nanos / 1e9
    errors = getattr(exc, "errors", None) or ()
    for cause in errors:
        md = getattr(cause, "trailing_metadata", None)
        if callable(md):
            try:
                blob = dict(md() or ()).get("google.rpc.retryinfo-bin")
            except Exception:  # noqa: BLE001 - metadata of a foreign error object
                blob = None
            if blob:
                info = RetryInfo()
                info.ParseFromString(blob)
                return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return None


class Committer(Protocol):
    """Sends one atomic commit. Raises google.api_core exceptions on failure."""

    def commit(self, mutations: Sequence[bytes]) -> None:
        """Commit these ``Mutation`` messages (wire bytes) atomically."""
        ...

    def existing_keys(self, table: str, keys: pa.Table) -> int:
        """How many of these primary keys exist in the table (for insert-mode resolution)."""
        ...


COMMIT_METHOD = "/google.spanner.v1.Spanner/Commit"
#: Deadline of one Commit RPC, in seconds. A healthy commit of our sizes takes well under a
#: second (a 100 MiB one, seconds); a stalled connection or a server that stopped answering
#: should surface as DEADLINE_EXCEEDED, which the runner retries within --max-retry-time,
#: instead of holding a commit thread for the gapic's default hour.
COMMIT_TIMEOUT = 120.0
#: Fresh sessions a commit tries when the server keeps reporting its session as not found.
SESSION_ATTEMPTS = 3
_SESSION_RESOURCE = "type.googleapis.com/google.spanner.v1.Session"
# CommitRequest field tags (google/spanner/v1/spanner.proto): session = 1, mutations = 4, both
# length-delimited. single_use_transaction = 3, request_options = 6 and max_commit_delay = 8
# are serialised once, from the client's own types (SpannerCommitter.__init__).
_TAG_SESSION = b"\x0a"
_TAG_MUTATION = b"\x22"


def is_session_not_found(exc: BaseException) -> bool:
    """NOT_FOUND about the session the request ran in (not about a table, column or row).

    Spanner names the missing resource in a ResourceInfo detail; its message starts
    "Session not found" (the emulator says the same).
    """
    from google.rpc.error_details_pb2 import ResourceInfo

    if not isinstance(exc, gexc.NotFound):
        return False
    for detail in exc.details or ():
        if isinstance(detail, ResourceInfo) and detail.resource_type == _SESSION_RESOURCE:
            return True
    return "session not found" in str(exc.message).lower()


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

    What it leaves out: the client's retries (see the module docstring), and its OpenTelemetry
    span and built-in metrics for the Commit RPC (with the header asking Spanner's front end
    for its server timing, which only feeds those metrics).

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
        if tag:
            opts["transaction_tag"] = tag
        txn = _merge_default_read_write(
            database, TransactionOptions(read_write=TransactionOptions.ReadWrite())
        )
        delay = timedelta(milliseconds=max_commit_delay_ms) if max_commit_delay_ms else None
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
        self._stand_ins: dict[str, Any] = {}
        self._lock = threading.Lock()

    def request(self, session: str, mutations: Sequence[bytes]) -> bytes:
        """The ``CommitRequest`` wire bytes committing ``mutations`` in ``session`` (a name)."""
        name = session.encode()
        parts = [_TAG_SESSION, varint_bytes(len(name)), name, self._head]
        for m in mutations:
            parts += (_TAG_MUTATION, varint_bytes(len(m)), m)
        parts.append(self._tail)
        return b"".join(parts)

    def commit(self, mutations: Sequence[bytes]) -> None:
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


@dataclass(frozen=True)
class Reordered:
    """The rows of ``table`` at ``order``, taken only when asked for: a job's keys and origins
    are read for a reject or a read-back, not for every row of every flush."""

    table: pa.Table
    order: pa.Array

    def slice(self, start: int, length: int) -> Reordered:
        return Reordered(self.table, self.order.slice(start, length))

    def take(self) -> pa.Table:
        return self.table.take(self.order)

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.take().to_pylist()


def rows_of(rows: pa.Table | Reordered) -> pa.Table:
    """A job's keys or provenance as a table (taking a :class:`Reordered` view)."""
    return rows.take() if isinstance(rows, Reordered) else rows


@dataclass
class BatchJob:
    """One contiguous, sorted key range of one table, encoded and ready to commit."""

    table: str
    op: str
    columns: Sequence[str]
    rows: pa.Array
    """Encoded rows (loader.encode.encode_rows elements)."""
    keys: pa.Table | Reordered
    """The rows' primary key columns, typed, for reading back and for reject texts."""
    provenance: pa.Table | Reordered
    """Columns ``source``, ``record``, ``line`` for each row."""
    cost_per_row: int
    on_done: Optional[Callable[[BatchJob], None]] = None
    """Called once every row of the job is committed or rejected (e.g. to record progress)."""
    extra: Sequence[bytes] = ()
    """Mutations (wire bytes) committed atomically with the rows (the checkpoint marker). A
    piece of a job
    split to isolate bad rows carries ``range_marker``'s mutations for its own rows instead,
    and ``on_done`` records the whole job once every piece is committed or rejected."""
    offset: int = 0
    """Where the job's first row is in the batch its checkpoint marker names."""
    range_marker: Optional[Callable[[int, int], Sequence[bytes]]] = None
    """Mutations recording rows [start, stop) of that batch as committed (for the pieces of a
    bisected job: a crash mid-bisection then leaves exact marks of what landed)."""
    split: bool = False
    """Set when the job was bisected to isolate bad rows (its ``extra`` was not committed)."""
    rejected: int = 0
    """Rows of the job Spanner refused (set by the runner, for its checkpoint marker)."""

    def __len__(self) -> int:
        return len(self.rows)

    def slice(self, start: int, stop: int) -> BatchJob:
        n = stop - start
        offset = self.offset + start
        marker = self.range_marker
        return BatchJob(
            self.table,
            self.op,
            self.columns,
            self.rows.slice(start, n),
            self.keys.slice(start, n),
            self.provenance.slice(start, n),
            self.cost_per_row,
            extra=marker(offset, offset + n) if marker is not None else (),
            offset=offset,
            range_marker=marker,
        )

    def mutations(self) -> list[bytes]:
        """The commit's ``Mutation`` messages as wire bytes: the rows, then ``extra``."""
        return [write_mutation(self.op, self.table, self.columns, self.rows), *self.extra]


@dataclass
class CommitStats:
    """Counters shared by the commit threads (updated under a lock)."""

    commits: int = 0
    retries: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    ambiguous_resolved: int = 0
    mutations: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class RetryPolicy:
    max_retry_time: float = 600.0
    initial: float = 0.02
    maximum: float = 32.0


class CommitRunner:
    """Commits jobs with retry and bad-row isolation; the unit the thread pool runs."""

    def __init__(
        self,
        committer: Committer,
        stats: CommitStats,
        reject: Callable[[Reject], None],
        policy: RetryPolicy = RetryPolicy(),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: Optional[random.Random] = None,
        throttle: Optional[Throttle] = None,
        limiter: Optional[AdaptiveLimiter] = None,
    ) -> None:
        self.throttle = throttle
        self.limiter = limiter
        self.committer = committer
        self.stats = stats
        self.reject = reject
        self.policy = policy
        self.sleep = sleep
        self.clock = clock
        self.rng = rng or random.Random()

    def _wait(self, state: RetryCallState) -> float:
        exp = min(self.policy.maximum, self.policy.initial * (2 ** (state.attempt_number - 1)))
        delay = self.rng.uniform(0, exp)  # full jitter: concurrent writers spread out
        exc = state.outcome.exception() if state.outcome else None
        hinted = server_retry_delay(exc) if exc else None
        return max(delay, hinted or 0.0)

    def _count_retry(self, state: RetryCallState) -> None:
        with self.stats.lock:
            self.stats.retries += 1

    def _commit_once_with_retry(self, job: BatchJob, stoppable: bool = True) -> None:
        """Commit with retries; raises the permanent error, or CommitError when time runs out.

        ``stoppable``: a stop during the throttle's wait raises ThrottleStopped before anything
        is sent (not for the pieces of a batch being bisected: those finish like a commit in
        flight, since a state file records the batch only once all its pieces are done)."""
        ambiguous = False
        started = self.clock()  # the injected clock, so tests can bound retry time exactly
        mutations = job.mutations()
        if self.throttle is not None:
            self.throttle.acquire(len(job), _nbytes(job.rows), stoppable=stoppable)

        def attempt() -> None:
            nonlocal ambiguous
            start = self.clock()
            try:
                if self.limiter is not None:
                    with self.limiter.slot():
                        self.committer.commit(mutations)
                else:
                    self.committer.commit(mutations)
            except gexc.AlreadyExists:
                if ambiguous and job.op == "insert" and self._all_keys_present(job):
                    with self.stats.lock:
                        self.stats.ambiguous_resolved += 1
                    return
                raise
            except AMBIGUOUS:
                ambiguous = True
                raise
            latency = self.clock() - start
            with self.stats.lock:
                self.stats.latencies.append(latency)

        retrying = Retrying(
            retry=retry_if_exception(is_transient),
            stop=lambda state: self.clock() - started >= self.policy.max_retry_time,
            wait=self._wait,
            sleep=self.sleep,
            before_sleep=self._count_retry,
            reraise=True,
        )
        try:
            retrying(attempt)
        except TRANSIENT as e:
            raise CommitError(
                f"commit to {job.table} kept failing for {self.policy.max_retry_time:.0f}s: "
                f"{type(e).__name__}: {getattr(e, 'message', e)}",
                hint="Spanner is overloaded or unreachable; retry later, lower --concurrency, "
                "or raise --max-retry-time",
            ) from e

    def _all_keys_present(self, job: BatchJob) -> bool:
        try:
            return self.committer.existing_keys(job.table, rows_of(job.keys)) == len(job)
        except gexc.GoogleAPICallError:
            return False

    def run(self, job: BatchJob) -> None:
        """Commit a job, isolating rows that Spanner refuses permanently."""
        self._run(job, job)
        if job.on_done is not None:
            job.on_done(job)

    def _run(self, job: BatchJob, root: BatchJob) -> None:
        try:
            self._commit_once_with_retry(job, stoppable=job is root)
        except DATA_ERRORS as e:
            if _is_schema_error(e):
                raise CommitError(
                    f"Spanner refused a commit to {job.table}: {getattr(e, 'message', e)}",
                    hint="the table changed during the load, or the loader's schema is stale",
                ) from e
            if len(job) == 1:
                self._reject_rows(job, e)
                root.rejected += 1
                return
            job.split = True
            mid = len(job) // 2
            self._run(job.slice(0, mid), root)
            self._run(job.slice(mid, len(job)), root)
            return
        with self.stats.lock:
            self.stats.commits += 1
            self.stats.rows_written += len(job)
            self.stats.bytes_written += _nbytes(job.rows)
            self.stats.mutations.append(len(job) * job.cost_per_row)

    def _reject_rows(self, job: BatchJob, e: Exception) -> None:
        from ..keys import key_tuples

        prov = job.provenance.to_pylist()
        keys = key_tuples(rows_of(job.keys))
        for p, k in zip(prov, keys):
            self.reject(
                Reject(
                    source=p["source"],
                    line=p["line"],
                    record=p["record"],
                    column=None,
                    reason=f"Spanner refused the row: {_reason(e)}",
                    text="key " + repr(tuple(k)),
                    table=job.table,
                )
            )


def _nbytes(arr: pa.Array) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(pc.binary_length(arr)).as_py() or 0)


def _reason(e: Exception) -> str:
    code = type(e).__name__
    names = {
        "FailedPrecondition": "FAILED_PRECONDITION",
        "InvalidArgument": "INVALID_ARGUMENT",
        "OutOfRange": "OUT_OF_RANGE",
        "NotFound": "NOT_FOUND",
        "AlreadyExists": "ALREADY_EXISTS",
    }
    msg = str(getattr(e, "message", e)).splitlines()[0] if str(e) else ""
    return f"{names.get(code, code)}: {msg}"


def _is_schema_error(e: Exception) -> bool:
    """NOT_FOUND for a table or column is about the schema, not about one row."""
    msg = str(getattr(e, "message", e)).lower()
    return isinstance(e, gexc.NotFound) and (
        "table not found" in msg or "column not found" in msg or "database not found" in msg
    )


class CommitPool:
    """A bounded pool of commit threads.

    ``submit`` blocks while ``concurrency * 2`` jobs are queued or running (backpressure, not
    unbounded memory). The first permanent failure stops the pool: later ``submit`` calls and
    ``drain`` raise it.
    """

    def __init__(
        self, runner: CommitRunner, concurrency: int, stop: Optional[threading.Event] = None
    ) -> None:
        self.runner = runner
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="commit")
        self.slots = threading.BoundedSemaphore(concurrency * 2)
        self.error: Optional[BaseException] = None
        self.futures: set[Future[None]] = set()
        self.lock = threading.Lock()
        self.stop = stop
        """Once set, queued jobs are not started (commits in flight finish), nor are jobs
        waiting for the throttle (give the throttle the same event)."""
        self.skipped = 0
        """Jobs not started because ``stop`` was set: their rows are not committed."""

    def _run(self, job: BatchJob) -> None:
        try:
            if self.stop is not None and self.stop.is_set():
                with self.lock:
                    self.skipped += 1
            elif self.error is None:
                self.runner.run(job)
        except ThrottleStopped:
            with self.lock:  # stopped while waiting for the throttle: nothing was sent
                self.skipped += 1
        except BaseException as e:  # noqa: BLE001 - handed to the submitting thread
            with self.lock:
                if self.error is None:
                    self.error = e
        finally:
            self.slots.release()

    def submit(self, job: BatchJob) -> None:
        self.raise_if_failed()
        self.slots.acquire()
        fut = self.executor.submit(self._run, job)
        with self.lock:
            self.futures.add(fut)
        # outside the lock: a future that is already done runs the callback right here
        fut.add_done_callback(self._forget)

    def _forget(self, fut: Future[None]) -> None:
        with self.lock:
            self.futures.discard(fut)

    def raise_if_failed(self) -> None:
        if self.error is not None:
            err = self.error
            if isinstance(err, LoaderError):
                raise err
            raise CommitError(f"commit failed: {type(err).__name__}: {err}") from err

    def drain(self, tick: Optional[Callable[[], None]] = None, every: float = 1.0) -> None:
        """Wait for every submitted job; raise the first failure.

        ``tick`` is called on this thread each time a job finishes, and at least every
        ``every`` seconds while waiting (e.g. to report progress while the last commits of
        a load run)."""
        while True:
            with self.lock:
                pending = list(self.futures)
            if not pending:
                break
            if tick is None:
                for f in pending:
                    f.result()
            else:
                wait_futures(pending, timeout=every, return_when=FIRST_COMPLETED)
                tick()
        self.raise_if_failed()

    def close(self, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=not wait)
