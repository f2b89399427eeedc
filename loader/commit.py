"""Commit stage: send batches to Spanner, in parallel, retrying only what is safe to repeat.

Who retries what (see SPANNER_FACTS.md):

* The client's gapic layer retries the Commit RPC on UNAVAILABLE and RESOURCE_EXHAUSTED. We leave
  those to it and do not stack a second loop on top (they only reach us once it gave up).
* The client's Batch.commit would retry ABORTED for 30 s with 2^n-second sleeps, which is far
  too slow for the emulator (it aborts every concurrent commit). We call it with
  ``timeout_secs=0`` so ABORTED reaches us at once, and retry it here with short jittered
  exponential backoff, honouring the server's RetryInfo delay when there is one.
* DEADLINE_EXCEEDED, INTERNAL (e.g. RST_STREAM) and CANCELLED are retried here. Their outcome is
  unknown: the commit may have been applied. For upsert / replace / update that is harmless
  (re-applying writes the same values). For insert, a re-sent batch that was already applied
  fails with ALREADY_EXISTS; we then read the batch's keys back and count it as written when
  every key is present (a commit is atomic, so all or none of its rows landed).
* Everything else is permanent. A permanent error caused by the data (a value Spanner rejects, a
  missing interleave parent, a duplicate key in insert mode) is isolated by bisecting the batch:
  every good row is committed and each bad row goes to the reject file with Spanner's reason.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Optional, Protocol, Sequence

import pyarrow as pa
from google.api_core import exceptions as gexc
from tenacity import RetryCallState, Retrying, retry_if_exception

from .encode import to_mutation, write_mutation
from .errors import CommitError, LoaderError
from .rejects import Reject
from .throttle import AdaptiveLimiter, Throttle

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

    def commit(self, mutations: Sequence[Any]) -> None: ...

    def existing_keys(self, table: str, keys: pa.Table) -> int:
        """How many of these primary keys exist in the table (for insert-mode resolution)."""
        ...


class SpannerCommitter:
    """Commits through google-cloud-spanner's Batch, with pre-encoded Mutation messages."""

    def __init__(
        self,
        database: Any,
        *,
        priority: Optional[str] = None,
        max_commit_delay_ms: Optional[int] = None,
        tag: Optional[str] = None,
    ) -> None:
        from google.cloud.spanner_v1 import RequestOptions

        self.database = database
        opts: dict[str, Any] = {}
        if priority:
            opts["priority"] = {
                "low": RequestOptions.Priority.PRIORITY_LOW,
                "medium": RequestOptions.Priority.PRIORITY_MEDIUM,
                "high": RequestOptions.Priority.PRIORITY_HIGH,
            }[priority]
        if tag:
            opts["transaction_tag"] = tag
        self.request_options = RequestOptions(**opts) if opts else None
        self.max_commit_delay = (
            timedelta(milliseconds=max_commit_delay_ms) if max_commit_delay_ms else None
        )

    def commit(self, mutations: Sequence[Any]) -> None:
        from google.cloud.spanner_v1.batch import Batch
        from google.cloud.spanner_v1.database_sessions_manager import TransactionType

        manager = self.database.sessions_manager
        session = manager.get_session(TransactionType.READ_WRITE)
        try:
            batch = Batch(session)
            batch._mutations.extend(mutations)
            # timeout_secs=0: ABORTED is raised to us at once (see the module docstring).
            batch.commit(
                request_options=self.request_options,
                max_commit_delay=self.max_commit_delay,
                timeout_secs=0,
            )
        finally:
            manager.put_session(session)

    def existing_keys(self, table: str, keys: pa.Table) -> int:
        from google.cloud.spanner_v1 import KeySet

        from .keys import key_tuples

        rows = key_tuples(keys)
        found = 0
        with self.database.snapshot() as snap:
            for _ in snap.read(table, list(keys.column_names), KeySet(keys=rows)):
                found += 1
        return found


@dataclass
class BatchJob:
    """One contiguous, sorted key range of one table, encoded and ready to commit."""

    table: str
    op: str
    columns: Sequence[str]
    rows: pa.Array
    """Encoded rows (loader.encode.encode_rows elements)."""
    keys: pa.Table
    """The rows' primary key columns, typed, for reading back and for reject texts."""
    provenance: pa.Table
    """Columns ``source``, ``record``, ``line`` for each row."""
    cost_per_row: int
    on_done: Optional[Callable[[BatchJob], None]] = None
    """Called once every row of the job is committed or rejected (e.g. to record progress)."""
    extra: Sequence[Any] = ()
    """Mutations committed atomically with the rows (the checkpoint marker). A piece of a job
    split to isolate bad rows carries ``range_marker``'s mutations for its own rows instead,
    and ``on_done`` records the whole job once every piece is committed or rejected."""
    offset: int = 0
    """Where the job's first row is in the batch its checkpoint marker names."""
    range_marker: Optional[Callable[[int, int], Sequence[Any]]] = None
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

    def mutations(self) -> list[Any]:
        return [
            to_mutation(write_mutation(self.op, self.table, self.columns, self.rows)),
            *self.extra,
        ]


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

    def _commit_once_with_retry(self, job: BatchJob) -> None:
        """Commit with retries; raises the permanent error, or CommitError when time runs out."""
        ambiguous = False
        started = self.clock()  # the injected clock, so tests can bound retry time exactly
        mutations = job.mutations()
        if self.throttle is not None:
            self.throttle.acquire(len(job), _nbytes(job.rows))

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
            return self.committer.existing_keys(job.table, job.keys) == len(job)
        except gexc.GoogleAPICallError:
            return False

    def run(self, job: BatchJob) -> None:
        """Commit a job, isolating rows that Spanner refuses permanently."""
        self._run(job, job)
        if job.on_done is not None:
            job.on_done(job)

    def _run(self, job: BatchJob, root: BatchJob) -> None:
        try:
            self._commit_once_with_retry(job)
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
        from .keys import key_tuples

        prov = job.provenance.to_pylist()
        keys = key_tuples(job.keys)
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

    def __init__(self, runner: CommitRunner, concurrency: int) -> None:
        self.runner = runner
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="commit")
        self.slots = threading.BoundedSemaphore(concurrency * 2)
        self.error: Optional[BaseException] = None
        self.futures: set[Future[None]] = set()
        self.lock = threading.Lock()

    def _run(self, job: BatchJob) -> None:
        try:
            if self.error is None:
                self.runner.run(job)
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

    def drain(self) -> None:
        """Wait for every submitted job; raise the first failure."""
        while True:
            with self.lock:
                pending = list(self.futures)
            if not pending:
                break
            for f in pending:
                f.result()
        self.raise_if_failed()

    def close(self, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=not wait)
