"""The commit stage's work on a batch refused for some of its keys (insert over keys the table
holds, with or without ``--skip-existing``): the read's match, the runs between refused rows
and the checkpoint markers each run carries, in this process, against a table in memory.

::

    PYTHONPATH=. python -m benchmarks.refused [--rows 20000] [--repeat 5]

Two patterns of keys the table already holds: every other key (a run per new row, the most
runs a batch can have) and 95% of them at random (new keys scattered among loaded ones, as a
feed with UUID keys re-sent in full). The committer refuses a batch's first commit with
ALREADY_EXISTS, answers the key read from a set, and accepts every later commit without
looking at it, so the figures are the loader's own work (Spanner's round trips are not in
them). Run it beside a baseline tree with the same file: ``PYTHONPATH=/tmp/before python
benchmarks/refused.py``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from types import SimpleNamespace
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
from google.api_core import exceptions as gexc

from loader.commit import BatchJob, CommitRunner, CommitStats
from loader.encode import encode_rows
from loader.resume.checkpoint import Checkpoint
from loader.resume.stores import SpannerStateStore
from loader.types import SpannerType


class _Held:
    """Keys a table holds; refuses each job's first commit, then takes every commit."""

    def __init__(self, keys: pa.Array) -> None:
        self.keys = keys
        self.first = True
        self.commits = 0

    def commit(self, mutations: Any) -> None:
        if self.first:
            self.first = False
            raise gexc.AlreadyExists("Row [0] in table T already exists")
        self.commits += 1

    def existing_keys(self, table: str, keys: pa.Table) -> list[list[Any]]:
        column = keys.column(0)
        found = column.filter(pc.is_in(column, value_set=self.keys))
        return [[k] for k in found.to_pylist()]


def _job(keys: list[int]) -> BatchJob:
    int64 = SpannerType.parse("INT64")
    text = SpannerType.parse("STRING(MAX)")
    ids = pa.array(keys, pa.int64())
    values = pa.array([f"value {k:08d}" for k in keys], pa.string())
    n = len(keys)
    job = BatchJob(
        "T",
        "insert",
        ["Id", "V"],
        encode_rows([ids, values], [int64, text]),
        pa.table({"Id": ids}),
        pa.table({"source": ["s"] * n, "record": list(range(n)), "line": list(range(n))}),
        2,
        key_types=(int64,),
    )
    marker_of = SimpleNamespace(store=SpannerStateStore(None), run_id="0123456789abcdef", table="T")
    part = "b/00000001/00000002"
    Checkpoint.attach_marker(marker_of, job, part, part)  # type: ignore[arg-type]
    job.on_done = None  # the batch's marker after a split: a store write, not measured
    return job


def one(keys: list[int], held: list[int], skip: bool) -> tuple[float, int, int]:
    """Seconds of the commit stage's work, commits, mutations committed (markers included)."""
    table = _Held(pa.array(held, pa.int64()))
    stats = CommitStats()
    runner = CommitRunner(
        table,
        stats,
        lambda r: None,
        sleep=lambda s: None,
        budget=(20_000, 4 << 20),
        skip_refused_keys=skip,
    )
    job = _job(keys)
    t0 = time.perf_counter()
    runner.run(job)
    return time.perf_counter() - t0, table.commits, sum(stats.mutations)


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    keys = list(range(args.rows))
    rnd = random.Random(7)
    patterns = {
        "every other key there": [k for k in keys if k % 2],
        "95% there, at random": [k for k in keys if rnd.random() < 0.95],
    }
    for name, held in patterns.items():
        there = set(held)
        runs = sum(
            1 for i, k in enumerate(keys) if k not in there and (i == 0 or keys[i - 1] in there)
        )
        for skip in (False, True):
            times, commits, cells = [], 0, 0
            for _ in range(args.repeat):
                s, commits, cells = one(keys, held, skip)
                times.append(s)
            label = "skip" if skip else "reject"
            print(
                f"{name:24} {label:6} {args.rows:,} rows, {runs:,} runs, {commits} commits, "
                f"{cells:,} mutations: "
                f"median {statistics.median(times) * 1000:7.1f} ms "
                f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})"
            )


if __name__ == "__main__":
    main()
