"""loader.prefetch: order, errors where they happened, bounded look-ahead, clean shutdown."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loader.prefetch import Prefetcher


class Source:
    """An iterator that records how far it was advanced, on which thread, and its closing."""

    def __init__(self, n: int, fail_at: Optional[int] = None) -> None:
        self.n = n
        self.fail_at = fail_at
        self.produced = 0
        self.threads: set[str] = set()
        self.closed_on: Optional[str] = None
        self.gen: Generator[int, None, None] = self._gen()

    def _gen(self) -> Generator[int, None, None]:
        try:
            for i in range(self.n):
                self.threads.add(threading.current_thread().name)
                if i == self.fail_at:
                    raise ValueError(f"bad item {i}")
                self.produced += 1
                yield i
        finally:
            self.closed_on = threading.current_thread().name

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        return next(self.gen)

    def close(self) -> None:
        self.gen.close()


@given(
    n=st.integers(0, 40),
    depth=st.integers(1, 4),
    fail_at=st.none() | st.integers(0, 40),
    fn_fails_at=st.none() | st.integers(0, 40),
)
def test_results_in_order_and_errors_where_they_happened(
    n: int, depth: int, fail_at: Optional[int], fn_fails_at: Optional[int]
) -> None:
    src = Source(n, fail_at)

    def fn(x: int) -> int:
        if x == fn_fails_at:
            raise KeyError(x)
        return x * 10

    out: list[int] = []
    first_failure = min(
        (i for i in (fail_at, fn_fails_at) if i is not None and i < n), default=None
    )
    with Prefetcher(src, fn, depth=depth, name="worker") as ahead:
        if first_failure is None:
            out = list(ahead)
        else:
            expected_error = ValueError if first_failure == fail_at else KeyError
            with pytest.raises(expected_error):
                for x in ahead:
                    out.append(x)
    stop = n if first_failure is None else first_failure
    assert out == [i * 10 for i in range(stop)]
    assert src.threads <= {"worker"}  # advanced only on the worker thread
    assert src.closed_on == "worker"  # ... and closed there


def test_look_ahead_is_bounded_and_leaving_early_stops_the_worker() -> None:
    src = Source(1000)
    depth = 2
    seen = []
    with Prefetcher(src, lambda x: x, depth=depth, name="worker") as ahead:
        for x in ahead:
            seen.append(x)
            if x == 5:
                # the worker may hold one item in hand besides the ones queued
                for _ in range(50):
                    if src.produced >= 6 + depth + 1:
                        break
                    threading.Event().wait(0.01)
                assert src.produced <= 6 + depth + 1
                break
    assert seen == list(range(6))
    assert src.produced <= 6 + depth + 1
    assert src.closed_on == "worker"
    assert not any(t.name == "worker" for t in threading.enumerate())


def test_closing_an_unstarted_prefetcher_closes_its_source() -> None:
    src = Source(3)
    next(src)  # started, so closing runs the generator's finally
    with Prefetcher(src, lambda x: x):
        pass
    assert src.closed_on == threading.current_thread().name


def test_chained_prefetchers() -> None:
    src = Source(100)
    with (
        Prefetcher(src, lambda x: x + 1, name="a") as first,
        Prefetcher(iter(first), lambda x: x * 2, name="b") as second,
    ):
        assert list(second) == [(i + 1) * 2 for i in range(100)]
    assert src.closed_on == "a"


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Prefetcher(iter([]), lambda x: x, depth=0)
