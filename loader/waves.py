"""Tables of one wave side by side.

:func:`loader.batch.load_order` groups a load's tables into waves: a table's interleave parent
and the tables its foreign keys reference are in earlier waves, so the tables of one wave do
not depend on each other. :func:`run_side_by_side` loads them on threads of their own, at most
``--parallel-tables`` at once, and a wave ends when every table of it has, so a parent is
loaded before its children start.

What the tables of a wave share (loader/pipeline.py sets it up):

* **Commits in flight.** One :class:`~loader.throttle.AdaptiveLimiter` for the wave, so the
  commits of all its tables together stay within ``--concurrency`` (on the emulator, 1: their
  commits take turns while their reading, converting and sorting overlap). Each table keeps
  its own commit pool and its own commit statistics.
* **Memory.** ``--buffer-size`` stays the whole load's budget: each table's sort buffer gets
  an equal share, ``1 / min(wave size, --parallel-tables)`` of it. A fixed split (not an
  accountant that lends memory to whichever table is reading) keeps each table's flushes at
  the same rows in every run of the job, which is what lets a resume skip the batches of an
  interrupted flush by name (the share is recorded in the checkpoint's layout).
* **The stop event** (:class:`LinkedStop`): the load's own (a signal) or the wave's, set when
  one of its tables fails, so the others stop as on a signal: commits in flight finish, their
  progress is recorded, and :class:`~loader.errors.Interrupted` ends them. The failure is
  what the load raises.
* The throttle, the reject budget and the state store, which take their own locks.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Callable, Optional, Sequence

from .errors import Interrupted, LoaderError
from .progress import Progress, ProgressFn


class LinkedStop(threading.Event):
    """A stop event that is also set while ``outer`` (the load's own stop event) is.

    Only :meth:`is_set` follows ``outer``: the table loads and commit pools poll it; waits that
    must end on a signal (the throttle's) are given ``outer`` itself."""

    def __init__(self, outer: Optional[threading.Event]) -> None:
        super().__init__()
        self.outer = outer

    def is_set(self) -> bool:
        return super().is_set() or self.signalled

    @property
    def signalled(self) -> bool:
        """The load's own stop event is set (a signal, or the caller's ``stop``)."""
        return self.outer is not None and self.outer.is_set()


def serialized(progress: Optional[ProgressFn]) -> Optional[ProgressFn]:
    """``progress`` called under a lock: tables side by side report from their own threads,
    and a callback need not be thread-safe."""
    if progress is None:
        return None
    lock = threading.Lock()
    fn = progress

    def call(p: Progress) -> None:
        with lock:
            fn(p)

    return call


def tables_at_once(wave: Sequence[str], parallel_tables: int) -> int:
    """How many tables of ``wave`` load at the same time (1: one after another)."""
    return max(1, min(len(wave), parallel_tables))


def run_side_by_side(
    wave: Sequence[str],
    work: Callable[[str], None],
    stop: LinkedStop,
    at_once: int,
    note: Callable[[str], None],
    poll: float = 0.5,
) -> None:
    """Run ``work(table)`` for every table of ``wave``, ``at_once`` at a time.

    With ``at_once`` 1 the tables run one after another on this thread, and the first failure
    ends the wave. Otherwise each runs on a thread of its own, started in wave order; the first
    failure sets ``stop`` so the others stop (and tables not started yet never start), and is
    raised once every table has ended. The other tables' outcomes go to ``note``: stopped by
    the failure or the same signal, or a failure of their own.
    """
    if at_once <= 1:
        for table in wave:
            work(table)
        return
    lock = threading.Lock()
    failures: list[tuple[str, BaseException]] = []  # in the order they happened

    def one(table: str) -> None:
        if stop.is_set():
            return  # another table failed, or a signal came, before this one started
        try:
            work(table)
        except BaseException as e:
            with lock:
                failures.append((table, e))
            stop.set()
            raise

    executor = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="table")
    futures: list[Future[None]] = [executor.submit(one, t) for t in wave]
    try:
        pending = set(futures)
        while pending:
            # a timeout, so a second Ctrl-C (KeyboardInterrupt) reaches this thread at once
            _, pending = wait_futures(pending, timeout=poll, return_when=FIRST_EXCEPTION)
    except BaseException:
        stop.set()
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    if not failures:
        return
    primary = _primary(failures)
    failed = primary[0]
    for table, e in failures:
        if (table, e) is primary or e is primary[1]:
            continue
        if isinstance(e, Interrupted):
            note(e.message if stop.signalled else f"{table}: stopped when {failed} failed")
        elif isinstance(e, LoaderError):
            note(f"{table}: {e.message}")
        else:
            note(f"{table}: {type(e).__name__}: {e}")
    raise primary[1]


def _primary(failures: list[tuple[str, BaseException]]) -> tuple[str, BaseException]:
    """The failure the load reports: the first that is not a stop, else the first stop."""
    for table, e in failures:
        if not isinstance(e, Interrupted):
            return table, e
    return failures[0]
