"""Retry and bad-row isolation: :class:`CommitRunner` commits one job through a
:class:`Committer`, retrying only what is safe to repeat (who retries what: see the package
docstring, loader/commit/__init__.py)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

import pyarrow as pa
from tenacity import RetryCallState, Retrying, retry_if_exception

from ..errors import CommitError
from ..rejects import Reject
from ..throttle import AdaptiveLimiter, Throttle
from ..types import SpannerType
from . import errors as google_errors
from .errors import (
    _reason,
    credentials_error,
    gexc,
    is_credentials_failure,
    is_schema_error,
    is_transient,
    server_retry_delay,
)
from .jobs import BatchJob, CommitStats, encoded_bytes, rows_of


class Committer(Protocol):
    """Sends one atomic commit. Raises google.api_core exceptions on failure."""

    def commit(self, mutations: Sequence[bytes]) -> None:
        """Commit these ``Mutation`` messages (wire bytes) atomically."""
        ...

    def existing_keys(self, table: str, keys: pa.Table) -> list[list[Any]]:
        """Those of these primary keys that the table holds, as rows of the client library's
        Python values (a lost reply's resolution; which rows insert or update mode refuse)."""
        ...


@dataclass
class _Outcome:
    unknown: bool = False
    """A commit of these rows may have been applied without our hearing of it (an ambiguous
    error): ALREADY_EXISTS in insert mode then means "check whether they are all there"."""


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

    def _commit_once_with_retry(
        self, job: BatchJob, stoppable: bool = True, outcome: Optional[_Outcome] = None
    ) -> None:
        """Commit with retries; raises the permanent error, or CommitError when time runs out.

        ``stoppable``: a stop during the throttle's wait raises ThrottleStopped before anything
        is sent (not for the pieces of a batch being bisected: those finish like a commit in
        flight, since a state file records the batch only once all its pieces are done).
        ``outcome``: whether an earlier commit of these rows (this job's, or the batch it was
        cut from) may have been applied unseen; set here when one of this job's is."""
        outcome = outcome if outcome is not None else _Outcome()
        started = self.clock()  # the injected clock, so tests can bound retry time exactly
        mutations = job.mutations()
        if self.throttle is not None:
            self.throttle.acquire(len(job), encoded_bytes(job.encoded()), stoppable=stoppable)

        def send() -> None:
            # timed inside the limiter's slot: a wait for a free slot is not commit latency
            start = self.clock()
            self.committer.commit(mutations)
            latency = self.clock() - start
            with self.stats.lock:
                self.stats.latencies.append(latency)

        def attempt() -> None:
            try:
                if self.limiter is not None:
                    with self.limiter.slot():
                        send()
                else:
                    send()
            except gexc.AlreadyExists:
                if outcome.unknown and job.op == "insert" and self._all_keys_present(job):
                    with self.stats.lock:
                        self.stats.ambiguous_resolved += 1
                    return
                raise
            except google_errors.AMBIGUOUS as e:
                if is_credentials_failure(e):  # never sent (the client library's paths)
                    raise credentials_error(e) from e
                outcome.unknown = True
                raise

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
        except google_errors.TRANSIENT as e:
            raise CommitError(
                f"commit to {job.table} kept failing for {self.policy.max_retry_time:.0f}s: "
                f"{type(e).__name__}: {getattr(e, 'message', e)}",
                hint="Spanner is overloaded or unreachable; retry later, lower `concurrency`, "
                "or raise `max_retry_time`",
            ) from e

    def _all_keys_present(self, job: BatchJob) -> bool:
        """Whether every key of ``job`` is in its table. A transient failure of the read
        propagates (the commit is retried, and this asked again); a permanent one fails the
        load: taking it for "not present" would reject rows this run may have written."""
        try:
            return len(self.committer.existing_keys(job.table, rows_of(job.keys))) == len(job)
        except gexc.GoogleAPICallError as e:
            if is_transient(e):
                raise
            raise CommitError(
                f"could not read back the keys of a commit to {job.table} whose outcome was "
                f"unknown: {type(e).__name__}: {getattr(e, 'message', e)}",
                hint="check the load's read access to the table, then run the load again",
            ) from e

    def run(self, job: BatchJob) -> None:
        """Commit a job, isolating rows that Spanner refuses permanently."""
        self._run(job, job)
        if job.on_done is not None:
            job.on_done(job)

    def _run(self, job: BatchJob, root: BatchJob, unknown: bool = False) -> None:
        """``unknown``: a commit of a batch this job was cut from may have been applied."""
        outcome = _Outcome(unknown)
        try:
            self._commit_once_with_retry(job, stoppable=job is root, outcome=outcome)
        except google_errors.DATA_ERRORS as e:
            if is_schema_error(e):
                raise CommitError(
                    f"Spanner refused a commit to {job.table}: {getattr(e, 'message', e)}",
                    hint="the table changed during the load, or the loader's schema is stale",
                ) from e
            if len(job) == 1:
                self._reject_rows(job, _reason(e))
                root.rejected += 1
                return
            if not outcome.unknown and self._isolate_by_reading(job, root, e):
                return
            job.split = True
            mid = len(job) // 2
            self._run(job.slice(0, mid), root, outcome.unknown)
            self._run(job.slice(mid, len(job)), root, outcome.unknown)
            return
        with self.stats.lock:
            self.stats.commits += 1
            self.stats.rows_written += len(job)
            self.stats.bytes_written += encoded_bytes(job.encoded())
            self.stats.mutations.append(len(job) * job.cost_per_row)

    def _isolate_by_reading(self, job: BatchJob, root: BatchJob, e: Exception) -> bool:
        """Insert mode's ALREADY_EXISTS and update mode's NOT_FOUND are about the rows' keys:
        one read of the batch's keys tells which rows the table refuses, where bisecting by
        commits takes about two failed commits per such row (an insert re-run over keys
        already loaded refuses every row). Those rows are rejected and the runs between them
        committed, a piece each. False, and the batch is bisected by commits, when no row is
        refused for its key (a unique index, a missing parent row), when the read fails, or
        when the keys read back do not match the batch's one to one. Not for rows whose
        outcome is unknown: a key found there may be this run's (:meth:`_all_keys_present`)."""
        if job.op == "insert" and isinstance(e, gexc.AlreadyExists):
            present_is_bad = True
        elif job.op == "update" and isinstance(e, gexc.NotFound):
            present_is_bad = False
        else:
            return False
        if not job.key_types:
            return False
        keys = rows_of(job.keys)
        try:
            found = self.committer.existing_keys(job.table, keys)
        except gexc.GoogleAPICallError:
            return False
        present = _present(keys, job.key_types, found)
        if present is None:
            return False
        refused = [p == present_is_bad for p in present]
        if not any(refused):
            return False
        job.split = True
        reason = (
            f"ALREADY_EXISTS: a row with this key is already in table {job.table}"
            if present_is_bad
            else f"NOT_FOUND: table {job.table} has no row with this key to update"
        )
        lo = 0
        for hi in range(1, len(refused) + 1):
            if hi < len(refused) and refused[hi] == refused[lo]:
                continue
            piece = job.slice(lo, hi)
            if refused[lo]:
                self._reject_rows(piece, reason)
                root.rejected += hi - lo
            else:
                self._run(piece, root)  # refused again (a unique index, another writer): read again
            lo = hi
        return True

    def _reject_rows(self, job: BatchJob, reason: str) -> None:
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
                    reason=f"Spanner refused the row: {reason}",
                    text="key " + repr(tuple(k)),
                    table=job.table,
                )
            )


def _present(
    keys: pa.Table, types: Sequence[SpannerType], found: list[list[Any]]
) -> Optional[list[bool]]:
    """For each row of ``keys``, whether it is one of the keys ``found`` (read back from the
    table by those very keys), compared in verify's canonical form; None unless each key
    found matches exactly one row (a form that does not compare exactly: no row is then
    called present that may not be)."""
    from ..keys import key_tuples
    from ..verify import canonical

    there = {tuple(canonical(v, t, from_client=True) for v, t in zip(row, types)) for row in found}
    mine = [tuple(canonical(v, t) for v, t in zip(row, types)) for row in key_tuples(keys)]
    present = [k in there for k in mine]
    hits = {k for k, p in zip(mine, present) if p}
    if len(there) != len(found) or hits != there or sum(present) != len(there):
        return None
    return present
