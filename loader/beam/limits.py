"""The job-wide limits on the Beam path, and the commit statistics its report carries.

* ``max_bad_rows`` before anything is committed: every read reject (a row that does not parse
  or convert) is found by the read step, before the GroupByKey barrier, so the commit step
  receives the job's total as a side input and commits nothing when it is over the limit
  (:func:`over_limit`). Rejects found while committing (a key twice in the input, a row over
  the budgets, a row Spanner refuses) can only be counted as they come, as the single-process
  load counts them: the launcher checks them after the job.
* The throttle (``max_rows_per_second``, ``max_bytes_per_second``) is for the whole job. Each
  worker process gets one share, ``limit / committers`` (:func:`share`), where ``committers``
  is how many key ranges may commit at the same time: the number of key ranges, bounded by
  the worker count the pipeline options give (:func:`committers`). All the key ranges one
  process commits, one after another or side by side, go through that process's one bucket
  (:func:`worker_brakes`), and so do its commits in flight, through one adaptive limiter.
* Commit statistics: each key range leaves its commits' latencies, bytes and the concurrency
  its limiter settled on in its results file (:func:`range_record`); the launcher merges them
  (:func:`merge`) into the same report fields the single-process load fills.

Nothing here imports Beam.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..config import LoadConfig
from ..errors import ConfigError
from ..throttle import AdaptiveLimiter, Throttle

# -- max_bad_rows -------------------------------------------------------------------------------


def over_limit(read_rejects: int, max_bad_rows: int) -> bool:
    """Whether the read step's rejects alone exceed ``max_bad_rows`` (then nothing commits)."""
    return read_rejects > max_bad_rows


# -- the throttle's share -----------------------------------------------------------------------

WORKER_OPTIONS = ("max_num_workers", "num_workers")
"""Pipeline options naming the worker count of a remote runner (the first one given counts)."""


def _count(options: dict[str, str], name: str) -> Optional[int]:
    value = options.get(name)
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(
            f"Beam option {name}={value!r} is not a whole number", hint=f"e.g. {name}=10"
        ) from None
    if n < 0:
        raise ConfigError(f"Beam option {name}={value!r} must be 0 or more")
    return n


def committers(runner: str, options: Sequence[tuple[str, str]], key_ranges: int) -> int:
    """How many key ranges may commit at the same time: ``key_ranges``, bounded by the worker
    processes the options give: ``direct_num_workers`` on the DirectRunner (1 by default, 0:
    one per CPU), else ``max_num_workers`` or ``num_workers``, times
    ``number_of_worker_harness_threads`` when given. Without a worker count, every key range
    is assumed to commit at once (the share is then never too large)."""
    opts = dict(options)
    workers: Optional[int] = None
    if runner == "DirectRunner":
        n = _count(opts, "direct_num_workers")
        workers = 1 if n is None else (n or os.cpu_count() or 1)
    else:
        for name in WORKER_OPTIONS:
            n = _count(opts, name)
            if n:
                workers = n
                break
    threads = _count(opts, "number_of_worker_harness_threads")
    if workers is not None and threads:
        workers *= threads
    return max(1, min(key_ranges, workers if workers is not None else key_ranges))


def share(config: LoadConfig, committing: int) -> tuple[Optional[float], Optional[float]]:
    """One worker process's rows/s and bytes/s: the job's limits divided by ``committing``."""
    n = max(1, committing)
    rows = config.max_rows_per_second / n if config.max_rows_per_second else None
    nbytes = config.max_bytes_per_second / n if config.max_bytes_per_second else None
    return rows, nbytes


def share_note(table: str, config: LoadConfig, committing: int, key_ranges: int) -> str:
    """The report's note on how the throttle was shared."""
    rows, nbytes = share(config, committing)
    parts = []
    if rows:
        parts.append(f"{rows:,.6g} rows/s")
    if nbytes:
        parts.append(f"{nbytes:,.6g} bytes/s")
    return (
        f"{table}: throttle shared by {committing} worker(s) committing at once (of "
        f"{key_ranges} key range(s)): {' and '.join(parts)} each"
    )


_BRAKES: dict[tuple[Any, ...], tuple[Optional[Throttle], AdaptiveLimiter]] = {}
_BRAKES_LOCK = threading.Lock()


def worker_brakes(
    key: tuple[Any, ...],
    config: LoadConfig,
    committing: int,
    clock: Optional[Callable[[], float]] = None,
    sleep: Optional[Callable[[float], object]] = None,
) -> tuple[Optional[Throttle], AdaptiveLimiter]:
    """This process's throttle (its share of the job's limits; None without limits) and its
    adaptive limiter of commits in flight (1 to ``concurrency``), made once per ``key`` (a
    job's table) and shared by every key range the process commits. ``clock``/``sleep``:
    tests (a fake clock)."""
    with _BRAKES_LOCK:
        found = _BRAKES.get(key)
        if found is not None:
            return found
        rows, nbytes = share(config, committing)
        timing: dict[str, Any] = {} if clock is None else {"clock": clock, "sleep": sleep}
        throttle = Throttle(rows, nbytes, **timing) if rows or nbytes else None
        in_flight = config.concurrency or 1
        limiter = AdaptiveLimiter(
            in_flight,
            initial=1 if config.adaptive else in_flight,
            adaptive=config.adaptive,
            clock=clock or time.monotonic,
        )
        _BRAKES[key] = (throttle, limiter)
        return throttle, limiter


def forget_brakes(key: tuple[Any, ...]) -> None:
    """Drop a job's brakes (its commit step is torn down)."""
    with _BRAKES_LOCK:
        _BRAKES.pop(key, None)


# -- commit statistics --------------------------------------------------------------------------


def range_record(
    key_range: int,
    mutations: Sequence[int],
    latencies_s: Sequence[float],
    nbytes: int,
    concurrency: Optional[float],
) -> dict[str, Any]:
    """What a key range leaves in its results file for the report."""
    return {
        "range": key_range,
        "mutations": list(mutations),
        "latencies_s": [round(x, 6) for x in latencies_s],
        "bytes": nbytes,
        "concurrency": concurrency,
    }


@dataclass
class CommitTotals:
    """The key ranges' commit statistics, merged."""

    mutations: list[int] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    bytes: int = 0
    concurrency: Optional[float] = None
    """The mean of the ranges' settled concurrency (ranges that committed)."""


def merge(records: Iterable[dict[str, Any]]) -> CommitTotals:
    out = CommitTotals()
    settled: list[float] = []
    for d in records:
        out.mutations.extend(int(m) for m in d.get("mutations", ()))
        out.latencies_s.extend(float(x) for x in d.get("latencies_s", ()))
        out.bytes += int(d.get("bytes", 0))
        if d.get("concurrency") is not None and d.get("latencies_s"):
            settled.append(float(d["concurrency"]))
    if settled:
        out.concurrency = round(sum(settled) / len(settled), 1)
    return out
