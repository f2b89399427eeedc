"""The commit thread pool: bounded, stopped by the first permanent failure."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Callable, Optional

from ..errors import CommitError, LoaderError
from ..throttle import ThrottleStopped
from .jobs import BatchJob
from .runner import CommitRunner


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
