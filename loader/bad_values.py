"""Find the values that make a whole-column operation fail, by bisection.

The fast path runs an operation (a cast, a parse, a validation) over a whole column; only when
it fails do we look for the culprits. Splitting failing slices in halves finds k bad values
among n in O(k log n) calls, so clean data pays nothing and dirty data little.
"""

from __future__ import annotations

from typing import Callable


def failing_positions(n: int, fails: Callable[[int, int], bool]) -> list[int]:
    """Positions i in range(n) whose one-element slice fails.

    ``fails(lo, hi)`` runs the operation on the slice [lo, hi) and says whether it failed; it
    must fail for a slice exactly when it fails for one of the slice's elements.
    """
    bad: list[int] = []

    def search(lo: int, hi: int) -> None:
        if not fails(lo, hi):
            return
        if hi - lo == 1:
            bad.append(lo)
            return
        mid = (lo + hi) // 2
        search(lo, mid)
        search(mid, hi)

    if n:
        search(0, n)
    return bad
