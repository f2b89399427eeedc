"""Where a dry run's time goes, thread by thread: every stage's spans of one load, with wall
and thread CPU seconds, so that idle cores and the stage that sets the pace show.

    PYTHONPATH=. python -m benchmarks.timeline [--table Orders|Accounts] [--rows N] [--loads N]

Runs ``--loads`` dry-run loads in this process (the first on fresh memory, so reported ones
are the last) of benchmarks.run's Orders file or benchmarks/wide.py's wide table, its schema
read from an emulator. Each span is a call of a stage function on the thread that ran it:
``parse`` (the reader handing over a block: Arrow parses it on its own thread when asked, so
this span's CPU is small and its wall is the parse), ``convert``, ``encode``, and on the
main thread ``flush`` with its ``sort`` (Buffer.take) and ``take + plan`` (Flush.commits).
Then the CPU seconds of each stage summed, and the process's CPU over the load's wall: the
cores the load kept busy on average. Run it pinned (``taskset -c 0``) and not, side by side.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import pickle
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Callable, Optional

Span = tuple[str, str, float, float, float, float]
"""thread, stage, start, end, thread CPU seconds, of them in the kernel (page faults mostly)"""


def _thread_cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime, r.ru_stime


class Recorder:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.t0 = 0.0
        self.lock = threading.Lock()

    def add(self, name: str, start: float, end: float, cpu: tuple[float, float]) -> None:
        used, system = _thread_cpu()
        with self.lock:
            thread = threading.current_thread().name
            self.spans.append(
                (thread, name, start - self.t0, end - self.t0, used - cpu[0], system - cpu[1])
            )

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), _thread_cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(name, start, time.perf_counter(), cpu)

        return call

    def reading(self, read_blocks: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        @functools.wraps(read_blocks)
        def blocks(*args: Any, **kwargs: Any) -> Iterator[Any]:
            it = read_blocks(*args, **kwargs)
            try:
                while True:
                    start, cpu = time.perf_counter(), _thread_cpu()
                    try:
                        block = next(it)
                    except StopIteration:
                        return
                    self.add("parse", start, time.perf_counter(), cpu)
                    yield block
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()

        return blocks


def instrument(rec: Recorder) -> None:
    import loader.buffer as buffer
    import loader.table_load as table_load

    table_load.read_deferred_blocks = rec.reading(table_load.read_deferred_blocks)  # type: ignore[assignment]
    table_load._finish_and_convert = rec.timed("convert", table_load._finish_and_convert)
    table_load.encode_stage = rec.timed("encode", table_load.encode_stage)
    table_load.TableLoad.flush = rec.timed("flush", table_load.TableLoad.flush)  # type: ignore[method-assign]
    buffer.Buffer.take = rec.timed("  sort", buffer.Buffer.take)  # type: ignore[method-assign]
    buffer.Flush.commits = rec.timed("  take + plan", buffer.Flush.commits)  # type: ignore[method-assign]


def _schema_and_file(table: str, rows: int, data_dir: Path) -> tuple[Any, Path]:
    from benchmarks.cores import reference_schemas
    from benchmarks.run import TABLE, orders_file
    from benchmarks.wide import TABLE as WIDE_TABLE
    from benchmarks.wide import wide_file

    if table not in (TABLE, WIDE_TABLE):
        raise SystemExit(f"--table: {TABLE} or {WIDE_TABLE}")
    schema = pickle.loads(reference_schemas(data_dir)[table].read_bytes())
    path = orders_file(data_dir, rows) if table == TABLE else wide_file(data_dir, rows)
    return schema, path


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--table", default="Orders", help="Orders or Accounts (the wide table)")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--loads", type=int, default=3, help="loads run; the last is shown")
    p.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    a = p.parse_args(argv)
    a.data_dir.mkdir(parents=True, exist_ok=True)
    from benchmarks.run import load_config
    from loader import load

    schema, path = _schema_and_file(a.table, a.rows, a.data_dir)
    cfg = load_config(path, table=a.table, dry_run=True)
    rec = Recorder()
    instrument(rec)
    wall = cpu = 0.0
    for _ in range(max(1, a.loads)):
        rec.spans.clear()
        rec.t0, cpu0 = time.perf_counter(), time.process_time()
        load(cfg, database=object(), schemas={a.table: schema})
        wall, cpu = time.perf_counter() - rec.t0, time.process_time() - cpu0
    head = f"{'thread':15s} {'stage':14s} {'start':>7s} {'end':>7s} {'wall':>7s} {'cpu':>7s}"
    print(head + f" {'of it sys':>9s}")
    for thread, name, start, end, used, system in sorted(rec.spans, key=lambda s: s[2]):
        print(
            f"{thread:15s} {name:14s} {start:7.3f} {end:7.3f} {end - start:7.3f} {used:7.3f}"
            f" {system:9.3f}"
        )
    per_stage: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for _thread, name, _start, _end, used, system in rec.spans:
        per_stage[name.strip()][0] += used
        per_stage[name.strip()][1] += system
    print()
    print(
        "thread CPU s per stage (of it sys): "
        + ", ".join(f"{k} {v[0]:.3f} ({v[1]:.3f})" for k, v in per_stage.items())
    )
    print(
        f"load: wall {wall:.3f} s, process CPU {cpu:.3f} s, cores busy on average"
        f" {cpu / wall:.2f} of {len(os.sched_getaffinity(0))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
