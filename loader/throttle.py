"""Being gentle with a production database: rate limits and adaptive commit concurrency.

Two independent brakes sit in front of every commit:

* :class:`Throttle` (two :class:`TokenBucket` s) caps what the user asked for with
  ``--max-rows-per-second`` and ``--max-bytes-per-second``. It is a hard ceiling: over any window
  of ``T`` seconds at most ``rate * T + burst`` rows (bytes) are let through, however many
  threads ask (``rate * T + max(burst, largest request)`` when one batch exceeds the burst).
* :class:`AdaptiveLimiter` decides how many commits may be in flight at once, between 1 and
  ``--concurrency``, from what the database tells us. It measures two things per commit attempt:

  - **commit latency** (seconds from sending the Commit RPC to its answer), and
  - **abort rate** (share of attempts that came back ABORTED, RESOURCE_EXHAUSTED or
    DEADLINE_EXCEEDED).

  These are Spanner's congestion signals: an overloaded instance pushes back with ABORTED /
  RESOURCE_EXHAUSTED (for up to minutes) and its commit latency rises as work queues up
  (SPANNER_FACTS.md "Errors"). Our batches are disjoint key ranges, so aborts between our own
  commits mean contention or overload, not a data problem. The limiter reacts like TCP
  congestion control (AIMD): it probes upwards one slot per healthy window and halves on trouble.
  The Spanner emulator runs one read-write transaction at a time and aborts every concurrent
  commit, so against it the limiter settles at 1-2 in flight on its own.

Both classes take ``clock`` (and the bucket ``sleep``) as arguments so tests run on a fake clock
without sleeping. Neither knows about Spanner objects; :func:`outcome_of` maps an exception from
the client to the outcome the limiter wants.

Wiring (a sketch for ``CommitRunner``): call ``throttle.acquire(len(job), nbytes)`` once per job
before its first attempt, and wrap each Commit RPC attempt (not the retry backoff sleeps) in
``with limiter.slot(): committer.commit(...)``. The throttle takes the load's stop event, so a
Ctrl-C during a long wait for tokens is acted on at once (:class:`ThrottleStopped`).
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, Optional

Outcome = Literal["ok", "aborted", "error"]
"""How a commit attempt ended, as far as congestion goes: ``ok``; ``aborted`` (push-back:
ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED); ``error`` (anything else, e.g. a bad row, which
says nothing about load and is ignored by the control loop)."""

# Relative slack when comparing token levels: float refills like 0.1 + 0.2 must not make a
# request that is due sleep again for 1e-17 s (or forever, when the clock cannot advance that
# little).
_EPS = 1e-9


class _Bucket:
    """Token accounting without locking or waiting (the callers hold the lock)."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0, got {rate!r}")
        if not burst > 0:
            raise ValueError(f"burst must be > 0, got {burst!r}")
        self.rate = float(rate)
        self.burst = float(burst)
        self.level = self.burst  # a fresh bucket is full: the first burst goes through at once
        self.stamp = now

    def refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.burst, self.level + self.rate * (now - self.stamp))
            self.stamp = now

    def shortfall(self, amount: float) -> float:
        """Seconds until ``amount`` may pass (0 when it may pass now).

        A request passes once the level covers ``min(amount, burst)``: a request larger than
        the bucket cannot wait for tokens that never fit, so it waits for a full bucket and then
        overdraws it; the debt delays whoever comes next by ``debt / rate``.
        """
        if amount <= 0:
            return 0.0
        need = min(amount, self.burst)
        deficit = need - self.level
        if deficit <= _EPS * max(1.0, need):
            return 0.0
        return deficit / self.rate

    def take(self, amount: float) -> None:
        if amount > 0:
            self.level -= amount

    def peek(self, now: float) -> float:
        if now <= self.stamp:
            return self.level
        return min(self.burst, self.level + self.rate * (now - self.stamp))


class ThrottleStopped(Exception):
    """A throttle wait was cut short by the load's stop event (Ctrl-C / SIGTERM): the request
    was not admitted and took no tokens, so its commit must not start. Internal: the commit
    pool counts the job as not started; it never reaches the user."""


class _Gate:
    """Admits requests against one or more buckets atomically, one waiter at a time.

    The waiting request holds ``turn`` while it sleeps, so no later request can take tokens in
    front of it: requests pass in arrival order (as far as the lock is fair) and a big request
    cannot be starved by a stream of small ones. Tokens are taken at the moment of admission,
    for every bucket at once, which is what makes the window bound exact (see
    :meth:`TokenBucket.acquire`).

    With a ``stop`` event, a request that has to wait while it is set, or that is still waiting
    when it gets set, raises :class:`ThrottleStopped` instead of waiting the wait out (the
    default ``sleep`` then is ``stop.wait``, which returns as soon as the event is set).
    """

    def __init__(
        self,
        buckets: Sequence[_Bucket],
        clock: Callable[[], float],
        sleep: Optional[Callable[[float], object]],
        stop: Optional[threading.Event] = None,
    ) -> None:
        self.buckets = list(buckets)
        self.clock = clock
        self.stop = stop
        self.sleep: Callable[[float], object] = sleep or time.sleep
        # the default wait for a stoppable request: one the stop event ends early
        self.stoppable_sleep: Callable[[float], object] = sleep or (
            stop.wait if stop else time.sleep
        )
        self.turn = threading.Lock()
        self.state = threading.Lock()
        self.waited_s = 0.0
        self.admitted = 0
        self.delayed = 0

    def acquire(self, amounts: Sequence[float], stoppable: bool = True) -> float:
        stop = self.stop if stoppable else None
        sleep = self.stoppable_sleep if stoppable else self.sleep
        for a in amounts:
            if a < 0:
                raise ValueError(f"cannot acquire a negative amount: {a!r}")
        start = self.clock()
        with self.turn:
            while True:
                with self.state:
                    now = self.clock()
                    wait = 0.0
                    for b, a in zip(self.buckets, amounts):
                        b.refill(now)
                        wait = max(wait, b.shortfall(a))
                    if wait <= 0.0:
                        for b, a in zip(self.buckets, amounts):
                            b.take(a)
                        waited = max(0.0, now - start)
                        self.waited_s += waited
                        self.admitted += 1
                        self.delayed += waited > 0
                        return waited
                if stop is not None and stop.is_set():
                    raise ThrottleStopped
                # Sleep outside the state lock so readers of the level are not blocked; the turn
                # lock keeps every other acquirer out meanwhile. At least a few units of the
                # clock's last place: a shorter wait could leave the clock where it was (a
                # float clock far from zero cannot move by 1e-9 s) and spin here for ever.
                sleep(max(wait, 4 * math.ulp(now)))
                if stop is not None and stop.is_set():
                    raise ThrottleStopped  # stopped while waiting: this commit must not start

    def levels(self) -> list[float]:
        with self.state:
            now = self.clock()
            return [b.peek(now) for b in self.buckets]


class TokenBucket:
    """A thread-safe token bucket: ``rate`` tokens per second, holding at most ``burst``.

    ``acquire(amount)`` blocks until ``amount`` tokens are there, takes them and returns the
    seconds it waited. Guarantee: over any window of ``T`` seconds the amounts admitted sum to at
    most ``rate * T + burst`` when every request is at most ``burst``; a request larger than
    ``burst`` still passes (it waits for a full bucket and leaves a debt that later requests pay
    off), so in general the bound is ``rate * T + max(burst, largest request)`` and the long-run
    rate is still ``rate``.
    """

    def __init__(
        self,
        rate: float,
        burst: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._bucket = _Bucket(rate, burst, clock())
        self._gate = _Gate([self._bucket], clock, sleep)

    @property
    def rate(self) -> float:
        return self._bucket.rate

    @property
    def burst(self) -> float:
        return self._bucket.burst

    @property
    def available(self) -> float:
        """Tokens in the bucket now (negative while a large request's debt is being paid)."""
        return self._gate.levels()[0]

    def acquire(self, amount: float) -> float:
        """Wait until ``amount`` tokens may pass, take them, and return the seconds waited.

        Why the bound holds: let requests ``j..k`` pass in a window ``[t1, t2]``. Just before
        ``j`` passes the level is at most ``burst``; until ``k`` passes it gains at most
        ``rate * (t2 - t1)``; and ``k`` passes only once the level covers ``min(A_k, burst)``,
        after which it is at least ``min(A_k, burst) - A_k``. So the amounts sum to at most
        ``burst + rate * T + max(0, A_k - burst)``.
        """
        return self._gate.acquire([amount])


class Throttle:
    """The ``--max-rows-per-second`` / ``--max-bytes-per-second`` limits, either or both.

    Each limit is a :class:`TokenBucket` with ``burst = rate * burst_seconds`` (one second of
    traffic by default, so a load starts at full speed without a long ramp). A request takes
    from both buckets at the same instant, so each limit's window bound holds exactly. With
    both limits ``None`` the throttle is disabled and ``acquire`` returns at once.

    ``stop``: the load's stop event. A wait for tokens ends as soon as it is set, with
    :class:`ThrottleStopped` (a throttled load at a low rate may otherwise sit in one wait for
    many seconds after Ctrl-C). ``sleep`` defaults to ``stop.wait`` then, ``time.sleep`` without.
    """

    def __init__(
        self,
        rows_per_s: Optional[float],
        bytes_per_s: Optional[float],
        *,
        burst_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Optional[Callable[[float], object]] = None,
        stop: Optional[threading.Event] = None,
    ) -> None:
        if not burst_seconds > 0:
            raise ValueError(f"burst_seconds must be > 0, got {burst_seconds!r}")
        now = clock()
        self.rows: Optional[_Bucket] = (
            _Bucket(rows_per_s, rows_per_s * burst_seconds, now) if rows_per_s else None
        )
        self.bytes: Optional[_Bucket] = (
            _Bucket(bytes_per_s, bytes_per_s * burst_seconds, now) if bytes_per_s else None
        )
        self._slots = [b is not None for b in (self.rows, self.bytes)]
        buckets = [b for b in (self.rows, self.bytes) if b is not None]
        self._gate = _Gate(buckets, clock, sleep, stop)

    @property
    def enabled(self) -> bool:
        return bool(self._gate.buckets)

    def acquire(self, rows: int, nbytes: int, *, stoppable: bool = True) -> float:
        """Wait until a batch of ``rows`` rows and ``nbytes`` encoded bytes may be committed.

        Returns the seconds waited (0.0 when disabled or under the limits). Raises
        :class:`ThrottleStopped` when the stop event ends the wait (no tokens are taken),
        unless ``stoppable`` is false (a piece of a batch being bisected, which finishes like
        a commit in flight).
        """
        if not self._gate.buckets:
            return 0.0
        amounts = [float(a) for a, on in zip((rows, nbytes), self._slots) if on]
        return self._gate.acquire(amounts, stoppable)

    @property
    def waited_s(self) -> float:
        """Total seconds callers spent waiting here (for the report)."""
        return self._gate.waited_s

    @property
    def delayed(self) -> int:
        """How many acquisitions had to wait."""
        return self._gate.delayed


def outcome_of(exc: Optional[BaseException]) -> Outcome:
    """Classify a commit attempt's result for :meth:`AdaptiveLimiter.release`.

    ABORTED and RESOURCE_EXHAUSTED are Spanner's push-back; DEADLINE_EXCEEDED means a commit
    took longer than we allow, i.e. latency off the scale. Everything else (bad data, a
    dropped connection) is ``error`` and does not move the limit.
    """
    if exc is None:
        return "ok"
    from .commit.errors import is_push_back  # here: loader.commit imports this module

    if is_push_back(exc):
        return "aborted"
    return "error"


@dataclass(frozen=True)
class LimiterStats:
    """What the limiter did, for the load report."""

    limit: int
    """The limit now."""
    max_seen: int
    """The highest limit reached."""
    settled: float
    """Mean limit over the last ``settle_windows`` windows (see :attr:`AdaptiveLimiter.settled`)."""
    mean_limit: float
    """Time-weighted mean of the limit since the limiter was created."""
    windows: int
    increases: int
    decreases: int
    ok: int
    aborted: int
    errors: int
    baseline_latency_s: Optional[float]
    """The latency baseline (lowest recent window p50) the latency signal is judged against."""


class AdaptiveLimiter:
    """AIMD control of how many commits are in flight, from latency and abort rate.

    Policy (TCP-style additive increase, multiplicative decrease):

    * Start at ``initial`` (default 1) commits in flight.
    * A *window* is the next ``limit`` successful commit attempts (one "round trip" worth of
      commits at the current limit). When a window completes, it is *healthy* if its abort rate
      ``aborted / (ok + aborted)`` is at most ``abort_threshold`` and its median latency is at
      most ``latency_factor`` times the *baseline*, the lowest window median of the last
      ``baseline_windows`` windows (a moving minimum, so a database that has become slower for
      good is accepted as the new normal after that many windows instead of pinning the limit
      at 1 forever).
    * Healthy window: ``limit += 1`` (up to ``max_concurrency``), but only if the limit was
      actually reached during the window; a load whose producer cannot keep ``limit`` commits
      busy has not shown that more would be fine (TCP's congestion window validation).
    * Degraded window: ``limit = max(1, floor(limit * decrease))`` and a new window starts. A
      window closes as degraded as soon as its aborts alone push the abort rate over the
      threshold, even if all of its remaining commits succeeded, so overload is acted on within
      one round trip. Signals from the commits that were already in flight at a decrease
      describe the old limit, so they are ignored (TCP reduces once per window of loss, too).
    * ``error`` outcomes free the slot but are not congestion signals.

    With ``adaptive=False`` this is a plain semaphore of ``max_concurrency`` slots (outcomes are
    still counted), so callers can always go through a limiter.

    AIMD never stands still: it probes one above the knee, halves, and climbs again, so the
    limit draws a sawtooth between about ``peak * decrease`` and ``peak``. :attr:`settled` is the
    mean over the last ``settle_windows`` windows, the operating point actually sustained.
    """

    def __init__(
        self,
        max_concurrency: int,
        initial: int = 1,
        *,
        adaptive: bool = True,
        latency_factor: float = 2.0,
        abort_threshold: float = 0.1,
        decrease: float = 0.5,
        baseline_windows: int = 30,
        settle_windows: int = 12,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if not 0 < decrease < 1:
            raise ValueError(f"decrease must be in (0, 1), got {decrease}")
        if not latency_factor >= 1:
            raise ValueError(f"latency_factor must be >= 1, got {latency_factor}")
        if not 0 <= abort_threshold < 1:
            raise ValueError(f"abort_threshold must be in [0, 1), got {abort_threshold}")
        self.max_concurrency = max_concurrency
        self.adaptive = adaptive
        self.latency_factor = latency_factor
        self.abort_threshold = abort_threshold
        self.decrease = decrease
        self.clock = clock
        self._cond = threading.Condition()
        self._limit = max(1, min(initial, max_concurrency)) if adaptive else max_concurrency
        self._max_seen = self._limit
        self._in_flight = 0
        self._stale = 0
        # The current window.
        self._w_ok = 0
        self._w_aborted = 0
        self._w_latencies: list[float] = []
        self._w_saturated = False
        # History.
        self._medians: deque[float] = deque(maxlen=baseline_windows)
        self._window_limits: deque[int] = deque(maxlen=settle_windows)
        self._windows = self._increases = self._decreases = 0
        self._ok = self._aborted = self._errors = 0
        self._t0 = self._t_last = clock()
        self._limit_seconds = 0.0

    # -- reading -------------------------------------------------------------------------------

    @property
    def limit(self) -> int:
        """Commits allowed in flight now."""
        return self._limit

    @property
    def max_seen(self) -> int:
        """The highest limit reached so far."""
        return self._max_seen

    @property
    def in_flight(self) -> int:
        """Commits between :meth:`acquire` and :meth:`release` now."""
        return self._in_flight

    @property
    def settled(self) -> float:
        """The mean limit over the last ``settle_windows`` completed windows.

        This is where the sawtooth is centred, i.e. the concurrency the load actually ran at
        once it had found the database's capacity. Before any window completes (or with
        ``adaptive=False``) it is the current limit.
        """
        with self._cond:
            if not self._window_limits:
                return float(self._limit)
            return sum(self._window_limits) / len(self._window_limits)

    def stats(self) -> LimiterStats:
        """A snapshot of the counters for the report."""
        with self._cond:
            now = self.clock()
            self._account_time(now)
            elapsed = now - self._t0
            mean = self._limit_seconds / elapsed if elapsed > 0 else float(self._limit)
            settled = (
                sum(self._window_limits) / len(self._window_limits)
                if self._window_limits
                else float(self._limit)
            )
            return LimiterStats(
                limit=self._limit,
                max_seen=self._max_seen,
                settled=settled,
                mean_limit=mean,
                windows=self._windows,
                increases=self._increases,
                decreases=self._decreases,
                ok=self._ok,
                aborted=self._aborted,
                errors=self._errors,
                baseline_latency_s=min(self._medians) if self._medians else None,
            )

    # -- taking and returning slots ------------------------------------------------------------

    def acquire(self) -> float:
        """Block until fewer than ``limit`` commits are in flight, take a slot, return the wait."""
        start = self.clock()
        with self._cond:
            while self._in_flight >= self._limit:
                self._cond.wait()
            self._take()
        return max(0.0, self.clock() - start)

    def try_acquire(self) -> bool:
        """Take a slot if one is free now; never blocks."""
        with self._cond:
            if self._in_flight >= self._limit:
                return False
            self._take()
            return True

    def _take(self) -> None:
        self._in_flight += 1
        if self._in_flight >= self._limit:
            self._w_saturated = True

    def release(self, latency_s: float, outcome: Outcome) -> None:
        """Return a slot and report how the commit attempt went.

        ``latency_s`` is the attempt's commit latency (only ``ok`` latencies are used).
        """
        if outcome not in ("ok", "aborted", "error"):
            raise ValueError(f"unknown outcome {outcome!r}")
        with self._cond:
            if self._in_flight <= 0:
                raise RuntimeError("release() without a matching acquire()")
            self._in_flight -= 1
            if outcome == "ok":
                self._ok += 1
            elif outcome == "aborted":
                self._aborted += 1
            else:
                self._errors += 1
            if self.adaptive and outcome != "error":
                self._observe(latency_s, outcome)
            self._cond.notify_all()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """``with limiter.slot(): commit()``: acquire, time the body, release with its outcome.

        The body's exception (if any) is classified by :func:`outcome_of` and re-raised.
        """
        self.acquire()
        start = self.clock()
        try:
            yield
        except BaseException as e:
            self.release(self.clock() - start, outcome_of(e))
            raise
        self.release(self.clock() - start, "ok")

    # -- the control loop (called with the condition held) -------------------------------------

    def _observe(self, latency_s: float, outcome: Outcome) -> None:
        if self._stale > 0:
            self._stale -= 1  # started under the limit before the last decrease
            return
        if outcome == "ok":
            self._w_ok += 1
            self._w_latencies.append(latency_s)
        else:
            self._w_aborted += 1
        size = self._limit
        if self._w_aborted / (size + self._w_aborted) > self.abort_threshold:
            self._close_window(healthy=False)
        elif self._w_ok >= size:
            median = statistics.median(self._w_latencies)
            baseline = min(self._medians) if self._medians else None
            abort_rate = self._w_aborted / (self._w_ok + self._w_aborted)
            healthy = abort_rate <= self.abort_threshold and (
                baseline is None or median <= self.latency_factor * baseline
            )
            self._close_window(healthy=healthy)

    def _close_window(self, healthy: bool) -> None:
        self._windows += 1
        self._window_limits.append(self._limit)
        if self._w_latencies:
            self._medians.append(statistics.median(self._w_latencies))
        if healthy:
            if self._w_saturated and self._limit < self.max_concurrency:
                self._set_limit(self._limit + 1)
                self._increases += 1
        else:
            new = max(1, int(self._limit * self.decrease))
            if new < self._limit:
                self._decreases += 1
                self._set_limit(new)
            self._stale = self._in_flight
        self._w_ok = self._w_aborted = 0
        self._w_latencies = []
        self._w_saturated = self._in_flight >= self._limit

    def _set_limit(self, new: int) -> None:
        self._account_time(self.clock())
        self._limit = new
        self._max_seen = max(self._max_seen, new)

    def _account_time(self, now: float) -> None:
        if now > self._t_last:
            self._limit_seconds += self._limit * (now - self._t_last)
            self._t_last = now
