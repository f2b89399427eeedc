"""Retry and bad-row isolation: :class:`CommitRunner` commits one job through a
:class:`Committer`, retrying only what is safe to repeat (who retries what: see the package
docstring, loader/commit/__init__.py)."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tenacity import RetryCallState, Retrying, retry_if_exception

from ..encode import write_mutation
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

log = logging.getLogger(__name__)


KEY_EXISTS = "a row with this key is already in table"
"""The reject reason of an insert-mode row whose key the table holds (verify: that row's key
is in the table, another row's)."""


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
    inherited: bool = False
    """``unknown`` came from a commit of the batch this job was cut from: that commit's
    marker is not this job's, and only the keys tell (:meth:`CommitRunner._landed`)."""


@dataclass(frozen=True)
class _Question:
    """What a read tells of a refused batch (:meth:`CommitRunner._question`)."""

    table: str
    """The table read: the job's, or the one it is interleaved in."""
    width: int
    """How many of the job's key columns are read (the parent's key: its first ones)."""
    present_is_bad: bool
    """A row is refused when its key is found (insert), else when it is not."""
    reason: str
    """The reject reason of a row so refused."""
    parent: bool = False
    """The parent keys are read, each once for the rows that share it."""
    skips: bool = False
    """Rows so refused are left out (``skip_refused_keys``), not rejected; a missing parent
    is always a reject."""
    unsettled: Optional[bool] = False
    """:meth:`CommitRunner._isolate_by_reading`'s answer when the read settles nothing: False
    (bisect; the halves do not read again), or None where a half may still be refused for
    keys there, which only its own read tells from a reject (a parent read under
    ``skip_refused_keys``)."""


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
        budget: tuple[int, int] = (0, 0),
        skip_refused_keys: bool = False,
        marker_landed: Optional[Callable[[bytes], bool]] = None,
        join_runs: bool = True,
    ) -> None:
        self.join_runs = join_runs
        """Whether the runs between rows a read settled share commits, one marker for the
        rows they span, refused ones included (:func:`_fitting`). Else the batch is cut in
        halves as bisection cuts it, the halves with no settled row committed and the others
        cut again (:meth:`_commit_halves`): every marker names its own rows only, so a replay
        meets the refused rows again (a Beam bundle's rejects and counts are lost with a
        failed attempt), and attempts that race commit the same pieces, whatever each one's
        read found of the other's rows, and know them by their markers."""
        self.marker_landed = marker_landed
        """Whether a checkpoint marker mutation is in the state table (an atomic store's
        :meth:`~loader.resume.stores.SpannerStateStore.marker_landed`): after a lost reply, it
        tells whether a commit that carried one landed, where its keys cannot (they may all
        have been there before)."""
        self.skip_refused_keys = skip_refused_keys
        """Rows refused for their keys (insert: the key is there; update: it is not) are
        skipped and counted (``stats.rows_key_skipped``), not rejected: ``skip_existing``,
        ``skip_missing``. Only a read of the key tells such a row from one refused by a
        unique index or a missing parent, which stays a reject."""
        self.budget = budget
        """The batches' budget, mutations and bytes (``max_mutations``, ``max_batch_bytes``):
        how many runs between refused rows one commit may carry (0: no more than the batch)."""
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
                if outcome.unknown and job.op == "insert":
                    if self._landed(job, outcome.inherited):
                        with self.stats.lock:
                            self.stats.ambiguous_resolved += 1
                        return
                    # an applied commit would have written every key (commits are atomic):
                    # none was, and the keys refused are found as for any other refusal
                    outcome.unknown = False
                raise
            except gexc.NotFound:
                if job.op == "update":  # an applied update leaves every key there
                    outcome.unknown = False
                raise
            except google_errors.AMBIGUOUS as e:
                if is_credentials_failure(e):  # never sent (the client library's paths)
                    raise credentials_error(e) from e
                outcome.unknown = True
                raise

        try:
            self._retrying(started)(attempt)
        except google_errors.TRANSIENT as e:
            raise CommitError(
                f"commit to {job.table} kept failing for {self.policy.max_retry_time:.0f}s: "
                f"{type(e).__name__}: {getattr(e, 'message', e)}",
                hint="Spanner is overloaded or unreachable; retry later, lower `concurrency`, "
                "or raise `max_retry_time`",
            ) from e

    def _landed(self, job: BatchJob, inherited: bool = False) -> bool:
        """Whether a commit of ``job`` whose reply was lost landed: its checkpoint marker is
        there, or, for a job without one (or whose lost commit was of the batch it was cut
        from, ``inherited``), every key is. A transient failure of the read propagates (the
        commit is retried, and this asked again); a permanent one fails the load: taking it
        for "not there" would reject rows this run may have written."""
        by_marker = self.marker_landed if job.extra and not inherited else None
        try:
            if by_marker is not None:
                return by_marker(job.extra[-1])
            return len(self.committer.existing_keys(job.table, rows_of(job.keys))) == len(job)
        except Exception as e:
            if isinstance(e, gexc.GoogleAPICallError) and is_transient(e):
                raise
            what = "keys" if by_marker is None else "checkpoint marker"
            raise CommitError(
                f"could not read back the {what} of a commit to {job.table} whose outcome was "
                f"unknown: {type(e).__name__}: {getattr(e, 'message', e)}",
                hint="check the load's read access to the table"
                + ("" if by_marker is None else " and its state table")
                + ", then run the load again",
            ) from e

    def run(self, job: BatchJob) -> None:
        """Commit a job, isolating rows that Spanner refuses permanently."""
        self._run(job, job)
        if job.on_done is not None:
            job.on_done(job)

    def _run(self, job: BatchJob, root: BatchJob, unknown: bool = False, read: bool = True) -> None:
        """``unknown``: a commit of a batch this job was cut from may have been applied.
        ``read``: a refusal may be settled by reading the keys back (not in the halves of a
        batch whose read found no row refused for its key: they would read in vain)."""
        outcome = _Outcome(unknown, inherited=unknown)
        try:
            self._commit_once_with_retry(job, stoppable=job is root, outcome=outcome)
        except google_errors.DATA_ERRORS as e:
            if is_schema_error(e):
                raise CommitError(
                    f"Spanner refused a commit to {job.table}: {getattr(e, 'message', e)}",
                    hint="the table changed during the load, or the loader's schema is stale",
                ) from e
            if len(job) == 1:
                # refused for its key: read, as a batch is (one reason text for such rows, or
                # skipped); not when its batch's read found no row refused for its key
                if read and not outcome.unknown and self._isolate_by_reading(job, root, e):
                    return
                if not outcome.unknown and self._settle_by_markers(job, root):
                    return
                self._reject_rows(job, _reason(e))
                root.rejected += 1
                return
            if read and not outcome.unknown:
                settled = self._isolate_by_reading(job, root, e)
                if settled:
                    return
                read = settled is None  # not a refusal a read settles: a half's may be
            if not outcome.unknown and self._settle_by_markers(job, root):
                return
            job.split = True
            mid = len(job) // 2
            self._run(job.slice(0, mid), root, outcome.unknown, read)
            self._run(job.slice(mid, len(job)), root, outcome.unknown, read)
            return
        self._count(job)

    def _count(self, job: BatchJob) -> None:
        """A committed job in the stats."""
        with self.stats.lock:
            self.stats.commits += 1
            self.stats.rows_written += len(job)
            self.stats.bytes_written += encoded_bytes(job.encoded())
            # the checkpoint markers ride in the commit and count against its budget too
            self.stats.mutations.append(
                len(job) * job.cost_per_row + len(job.extra) * job.marker_cells
            )

    def _isolate_by_reading(self, job: BatchJob, root: BatchJob, e: Exception) -> Optional[bool]:
        """Insert mode's ALREADY_EXISTS and update mode's NOT_FOUND are about the rows' keys,
        and NOT_FOUND in the other modes, of an interleaved table's rows, about their parent
        rows: one read of the batch's keys (or of its parent keys, each once) tells which rows
        the table refuses, where bisecting by commits takes about two failed commits per such
        row per halving (an insert re-run over keys already loaded refuses every row). Those
        rows are rejected (or, refused for their own keys, skipped: ``skip_refused_keys``)
        and the runs between them committed together, with one marker for the rows they span
        (:func:`_fitting`: as many as the budget takes), or by halves if that commit is
        refused. False, and the batch is bisected by commits, when no row is refused so (a
        unique index, a foreign key), when the read or the match fails (it only saves
        commits), or when the keys read back do not match the batch's one to one; None when
        the refusal is not one a read settles. Not for rows whose outcome is unknown: a key
        found there may be this run's (:meth:`_landed`)."""
        q = self._question(job, e)
        if q is None:
            return None
        job.keys = keys = rows_of(job.keys)  # taken once: the rejects and commits reuse it
        types = job.key_types[: q.width]
        asked, of_row = _parent_keys(keys, types, q.width) if q.parent else (keys, None)
        table, skips, unsettled = q.table, q.skips, q.unsettled
        try:
            found = self._read_keys(table, asked, skips)
            # read after the keys: every other attempt's row the read found is in a marker
            elsewhere = self._others_rows(job)
        except Exception as e:  # noqa: BLE001 - any failure: bisecting by commits still works
            if not skips:
                log.warning("reading back the keys of a refused commit to %s failed: %s", table, e)
                return unsettled
            # only a read tells a row to leave out from a reject: a read refused for what it
            # asks (too many keys at once, a key the client cannot send) is asked in halves
            refused_access = isinstance(e, gexc.GoogleAPICallError) and not isinstance(
                e, gexc.InvalidArgument
            )
            if len(job) > 1 and not refused_access:
                return None
            raise CommitError(
                f"could not read back the keys of a refused commit to {job.table}, to tell "
                f"the rows to leave out: {type(e).__name__}: {getattr(e, 'message', e)}",
                hint="`skip_existing` and `skip_missing` read the keys a commit is refused for: "
                "check the load's read access to the table and run the load again (without "
                "them, such rows are rejects)",
            ) from e
        # one key asked for: found or not, whatever form it comes back in
        present = [len(found) == 1] if len(asked) == 1 else _present(asked, types, found)
        if present is None:  # a form that does not compare exactly: the halves read again
            return None if skips else unsettled
        if of_row is not None:  # each row as its parent
            present = np.asarray(present, dtype=bool)[of_row]
        refused = np.asarray(present, dtype=bool) == q.present_is_bad
        settled = refused
        if elsewhere is not None:  # another attempt's rows: neither refused nor written here
            refused = refused & ~elsewhere
            settled = refused | elsewhere
            with self.stats.lock:
                self.stats.rows_replayed += int(elsewhere.sum())
        if not settled.any():
            return unsettled
        job.provenance = rows_of(job.provenance)  # taken once, as the keys
        job.split = True
        rows = np.flatnonzero(refused).tolist()
        if skips:
            with self.stats.lock:
                self.stats.rows_key_skipped += len(rows)
        elif rows:
            self._reject_rows(job, q.reason, rows)  # all at once: one take, not one per run
            root.rejected += len(rows)
        if not self.join_runs:
            self._commit_halves(job, root, settled, 0, len(job))
            return True
        # the runs of rows to commit: where the mask, settled at both ends, steps down / up
        steps = np.diff(np.concatenate(([True], settled, [True])).astype(np.int8))
        spans = list(zip(np.flatnonzero(steps < 0).tolist(), np.flatnonzero(steps > 0).tolist()))
        for group in _fitting(job, spans, self.budget):
            self._commit_runs(job, root, group, skips)
        return True

    def _settle_by_markers(self, job: BatchJob, root: BatchJob) -> bool:
        """A refusal no read settled (a unique index, a missing parent row a read did not
        find, a read not asked for): whether rows of ``job`` are another attempt's
        (:attr:`BatchJob.landed`: a replay racing an earlier attempt that cut the batch from
        another start); if so they are left out, counted as replayed, and the rest committed
        in bisection's pieces. Commits write their rows and marker together, so markers read
        after the refusal hold every row of another attempt it met. False without ``landed``
        (the single-process path) or when no marker holds a row of the job."""
        elsewhere = self._others_rows(job)
        if elsewhere is None:
            return False
        with self.stats.lock:
            self.stats.rows_replayed += int(elsewhere.sum())
        job.split = True
        self._commit_halves(job, root, elsewhere, 0, len(job))
        return True

    def _others_rows(self, job: BatchJob) -> Optional[np.ndarray]:
        """Which rows of ``job`` another attempt's markers hold (:attr:`BatchJob.landed`),
        read now, a transient failure retried as a commit is; None when none does."""
        if job.landed is None:
            return None
        return self._retrying(self.clock())(_landed_rows, job)

    def _commit_halves(
        self, job: BatchJob, root: BatchJob, settled: np.ndarray, lo: int, hi: int
    ) -> None:
        """Rows [lo, hi) of ``job`` committed in the pieces bisection cuts (the half of a
        piece is its first ``n // 2`` rows): a piece with no ``settled`` row in one commit
        (:meth:`_run`: refused, it reads again, or is bisected), one with only such rows not
        at all, and any other in halves."""
        part = settled[lo:hi]
        if part.all():
            return
        if not part.any():
            self._run(job.slice(lo, hi), root)
            return
        mid = lo + (hi - lo) // 2
        self._commit_halves(job, root, settled, lo, mid)
        self._commit_halves(job, root, settled, mid, hi)

    def _question(self, job: BatchJob, e: Exception) -> Optional[_Question]:
        """What a read of ``job``'s keys would tell of its refusal ``e``; None when a read
        does not settle it (or the job carries no key types to match)."""
        parent = (
            job.parent
            if job.op != "update"
            and isinstance(e, gexc.NotFound)
            and "parent" in str(getattr(e, "message", e)).lower()
            else None
        )
        if parent is not None:
            table, width = parent
            reason = f"NOT_FOUND: table {table} has no parent row for this key"
            unsettled = None if self.skip_refused_keys else False
            question = _Question(table, width, False, reason, parent=True, unsettled=unsettled)
        elif job.op == "insert" and isinstance(e, gexc.AlreadyExists):
            reason = f"ALREADY_EXISTS: {KEY_EXISTS} {job.table}"
            skips = self.skip_refused_keys
            question = _Question(job.table, len(job.key_types), True, reason, skips=skips)
        elif job.op == "update" and isinstance(e, gexc.NotFound):
            reason = f"NOT_FOUND: table {job.table} has no row with this key to update"
            skips = self.skip_refused_keys
            question = _Question(job.table, len(job.key_types), False, reason, skips=skips)
        else:
            return None
        return question if job.key_types else None

    def _read_keys(self, table: str, keys: pa.Table, skips: bool) -> list[list[Any]]:
        """The keys of ``keys`` the table holds; where the read decides which rows are left
        out (``skips``), a transient failure is retried as a commit is."""
        if not skips:
            return self.committer.existing_keys(table, keys)
        return self._retrying(self.clock())(self.committer.existing_keys, table, keys)

    def _retrying(self, started: float) -> Retrying:
        """Transient failures retried with backoff until ``max_retry_time`` after ``started``
        (the last one re-raised)."""
        return Retrying(
            retry=retry_if_exception(is_transient),
            stop=lambda state: self.clock() - started >= self.policy.max_retry_time,
            wait=self._wait,
            sleep=self.sleep,
            before_sleep=self._count_retry,
            reraise=True,
        )

    def _commit_runs(
        self, job: BatchJob, root: BatchJob, group: list[tuple[int, int]], skipped: bool
    ) -> None:
        """The runs ``group`` of ``job`` in one commit, with one marker; if refused (a
        unique index, another writer), each half of them so, down to a run alone, which
        settles its own refusal (:meth:`_run`: it reads again, or bisects). ``skipped``: the
        rows between the runs were left out, not rejected."""
        if len(group) == 1:
            self._run(job.slice(*group[0]), root)
            return
        # the rows between the runs are settled: rejected, or left out
        between = group[-1][1] - group[0][0] - sum(hi - lo for lo, hi in group)
        rejected = 0 if skipped else between
        together = job.spans(group, rejected)
        try:
            self._commit_once_with_retry(together, stoppable=False)
        except google_errors.DATA_ERRORS:
            mid = len(group) // 2
            self._commit_runs(job, root, group[:mid], skipped)
            self._commit_runs(job, root, group[mid:], skipped)
        else:
            self._count(together)
            if together.extra and rejected:  # a marker recorded them (an atomic store's)
                lo, hi = job.offset + group[0][0], job.offset + group[-1][1]
                root.marked[(lo, hi)] = rejected

    def _reject_rows(self, job: BatchJob, reason: str, rows: Optional[list[int]] = None) -> None:
        """Reject the rows of ``job`` (those at ``rows``, when given) with ``reason``."""
        from ..keys import key_tuples

        provenance, keys = rows_of(job.provenance), rows_of(job.keys)
        if rows is not None:
            at = pa.array(rows, pa.int64())
            provenance, keys = provenance.take(at), keys.take(at)
        prov = provenance.to_pylist()
        for p, k in zip(prov, key_tuples(keys)):
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


def _parent_keys(
    keys: pa.Table, types: Sequence[SpannerType], width: int
) -> tuple[pa.Table, np.ndarray]:
    """The distinct parent keys (the first ``width`` columns) of ``keys``, in their order,
    and for each row of ``keys`` which of them is its parent's (told apart in verify's
    canonical form, as :func:`_present` matches them: a NaN is one key, not one per row)."""
    from ..keys import key_tuples
    from ..verify import canonical

    prefix = keys.select(list(range(width)))
    first: dict[tuple[Any, ...], int] = {}
    of_row = [
        first.setdefault(tuple(canonical(v, t) for v, t in zip(k, types)), len(first))
        for k in key_tuples(prefix)
    ]
    rows = np.zeros(len(first), dtype=np.int64)
    rows[of_row] = np.arange(len(of_row))  # any row of each: the values are equal
    return prefix.take(pa.array(rows)), np.asarray(of_row, dtype=np.int64)


def _landed_rows(job: BatchJob) -> Optional[np.ndarray]:
    """Which rows of ``job`` another attempt's commits hold (``job.landed``, which is set);
    None when none does."""
    assert job.landed is not None
    first, n = job.offset, len(job)
    mask = np.zeros(n, dtype=bool)
    for lo, hi in job.landed(first, first + n):
        mask[max(lo - first, 0) : max(min(hi - first, n), 0)] = True
    return mask if mask.any() else None


def _fitting(
    job: BatchJob, spans: list[tuple[int, int]], budget: tuple[int, int]
) -> list[list[tuple[int, int]]]:
    """``spans`` (row ranges of ``job``, in order) in consecutive groups of one commit each,
    every group bringing one marker (:meth:`BatchJob.spans`): within ``budget`` (mutations,
    bytes), or within what ``job`` itself takes, its rows and its one marker, when that is
    more (a row over the byte budget is committed alone)."""
    if job.range_marker is None or not spans:
        return [spans] if spans else []
    sizes = pc.binary_length(job.encoded()).to_numpy(zero_copy_only=False)
    header = len(write_mutation(job.op, job.table, job.columns, pa.array([], pa.binary())))
    cells_cap = max(budget[0], len(job) * job.cost_per_row + job.marker_cells)
    bytes_cap = max(budget[1], header + int(sizes.sum()) + job.marker_bytes)
    groups: list[list[tuple[int, int]]] = []
    cells = size = 0
    for lo, hi in spans:
        more_cells = (hi - lo) * job.cost_per_row
        more_bytes = int(sizes[lo:hi].sum())
        if groups and cells + more_cells <= cells_cap and size + more_bytes <= bytes_cap:
            groups[-1].append((lo, hi))
            cells, size = cells + more_cells, size + more_bytes
        else:
            groups.append([(lo, hi)])
            cells = job.marker_cells + more_cells
            size = header + job.marker_bytes + more_bytes
    return groups
