"""Run the front of the pipeline (parse and convert) on a thread of its own, a bounded step ahead.

The consumer (buffering, sorting, encoding, planning and handing batches to the commit pool)
works on block ``k`` while this thread parses and converts block ``k + 1``. Arrow's CSV
reader and compute kernels, and numpy, release the GIL for their real work, so on two cores
the two halves overlap instead of taking turns; ``depth`` bounds how many finished items
wait in between, so memory stays bounded by a few parse blocks.

The source iterator is created by the caller but only ever advanced, and closed, on the
worker thread: a generator must not be resumed from two threads, and closing it there
releases what it holds (the CSV reader's own thread, see :mod:`loader.parse`) before
:meth:`Prefetcher.close` returns.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Prefetcher"]

_DONE = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class Prefetcher(Generic[T, R]):
    """Iterate ``fn(item)`` for each item of ``source``, computed on a worker thread.

    Results come out in source order. An exception raised by ``source`` or ``fn`` is raised
    from the iteration at the point where it happened (earlier results come out first).
    Use as a context manager: leaving it (normally, on an error, or early) stops the worker,
    closes ``source`` and waits for the thread.
    """

    def __init__(
        self,
        source: Iterator[T],
        fn: Callable[[T], R],
        *,
        depth: int = 1,
        name: str = "loader-prefetch",
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._source = source
        self._fn = fn
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._started = False
        self._finished = False

    # -- worker side ---------------------------------------------------------------------------

    def _put(self, item: Any) -> bool:
        """Hand ``item`` over; False once the consumer has gone."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self) -> None:
        try:
            while not self._stop.is_set():  # checked before the source is advanced again
                try:
                    item = next(self._source)
                except StopIteration:
                    self._put(_DONE)
                    return
                if not self._put(self._fn(item)):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            self._put(_Failed(e))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - an error while unwinding the source
                    pass

    # -- consumer side -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[R]:
        if not self._started:
            self._started = True
            self._thread.start()
        while not self._finished:
            item = self._queue.get()
            if item is _DONE:
                self._finished = True
                return
            if isinstance(item, _Failed):
                self._finished = True
                raise item.exc
            yield item

    def close(self) -> None:
        """Stop the worker and wait for it (it finishes the item in hand first)."""
        self._stop.set()
        if self._started:
            while self._thread.is_alive():
                try:  # unblock a worker waiting to put
                    self._queue.get(timeout=0.05)
                except queue.Empty:
                    pass
            self._thread.join()
        else:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def __enter__(self) -> Prefetcher[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
