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
  the worker processes the pipeline options give (:func:`committers`). All the key ranges one
  process commits, one after another or side by side, go through that process's one bucket
  (:func:`worker_brakes`), and so do its commits in flight, through one adaptive limiter.
* Commit statistics: each key range leaves its commits' latencies, bytes and the concurrency
  its limiter settled on in its results file (:func:`range_record`); the launcher merges them
  (:func:`merge`) into the same report fields the single-process load fills.

Nothing here imports Beam.
"""

from __future__ import annotations

import os
import re
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
MACHINE_OPTIONS = ("worker_machine_type", "machine_type")
SINGLE_PROCESS_EXPERIMENT = "no_use_multiple_sdk_containers"
"""Dataflow: one SDK process per worker VM (by default a Python job runs one per vCPU)."""


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


def machine_vcpus(machine_type: str) -> Optional[int]:
    """vCPUs of a Compute Engine machine type named by its count (``n1-standard-4``,
    ``n2-highmem-8``, ``custom-6-23040``, ``n2-custom-4-8192``); None for any other name."""
    custom = re.search(r"custom-(\d+)-\d+", machine_type)
    if custom:
        return int(custom.group(1))
    named = re.fullmatch(r"[a-z0-9]+-[a-z]+-(\d+)(-[a-z]+)?", machine_type)
    return int(named.group(1)) if named else None


def worker_processes(runner: str, options: Sequence[tuple[str, str]]) -> Optional[int]:
    """How many worker processes may run the commit step at once, from the Beam options; None
    when they do not say. DirectRunner: ``direct_num_workers`` (1 by default; 0: one per CPU).
    Other runners: ``max_num_workers``, else ``num_workers``, times the SDK processes per
    worker: on Dataflow one per vCPU of ``worker_machine_type`` (one with the experiment
    ``no_use_multiple_sdk_containers``; unknown without a machine type), elsewhere
    ``sdk_worker_parallelism`` (1 by default)."""
    opts = dict(options)
    if runner == "DirectRunner":
        n = _count(opts, "direct_num_workers")
        return 1 if n is None else (n or os.cpu_count() or 1)
    workers = next((n for n in (_count(opts, k) for k in WORKER_OPTIONS) if n), None)
    if workers is None:
        return None
    experiments = {
        e.strip() for k, v in options if k in ("experiments", "experiment") for e in v.split(",")
    }
    if runner == "DataflowRunner":
        if SINGLE_PROCESS_EXPERIMENT in experiments:
            return workers
        machine = next((opts[k] for k in MACHINE_OPTIONS if opts.get(k)), None)
        vcpus = machine_vcpus(machine) if machine else None
        return None if vcpus is None else workers * vcpus
    per_worker = _count(opts, "sdk_worker_parallelism")
    if per_worker == 0:  # the runner decides
        return None
    return workers * (per_worker or 1)


def committers(runner: str, options: Sequence[tuple[str, str]], key_ranges: int) -> int:
    """How many key ranges may commit at the same time: ``key_ranges``, bounded by the worker
    processes the options give (:func:`worker_processes`). When they do not say, every key
    range is counted (the share is then never too large)."""
    processes = worker_processes(runner, options)
    return max(1, min(key_ranges, processes if processes is not None else key_ranges))


def share(config: LoadConfig, committing: int) -> tuple[Optional[float], Optional[float]]:
    """One worker process's rows/s and bytes/s: the job's limits divided by ``committing``."""
    n = max(1, committing)
    rows = config.max_rows_per_second / n if config.max_rows_per_second else None
    nbytes = config.max_bytes_per_second / n if config.max_bytes_per_second else None
    return rows, nbytes


def share_note(table: str, config: LoadConfig, committing: int, key_ranges: int) -> str:
    """The report's note on how the throttle was shared."""
    assert config.runner is not None
    rows, nbytes = share(config, committing)
    parts = []
    if rows:
        parts.append(f"{rows:,.6g} rows/s")
    if nbytes:
        parts.append(f"{nbytes:,.6g} bytes/s")
    unknown = worker_processes(config.runner, config.beam_options) is None
    why = (
        " (the Beam options do not bound the worker processes, so every key range is "
        "counted; give max_num_workers, and on Dataflow worker_machine_type)"
        if unknown and committing > 1
        else ""
    )
    return (
        f"{table}: throttle shared by {committing} worker process(es) committing at once (of "
        f"{key_ranges} key range(s)): {' and '.join(parts)} each{why}"
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
