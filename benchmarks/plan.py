"""The range planner's speed (loader/plan) beside a plain read of the same file.

    PYTHONPATH=. python -m benchmarks.plan [--rows N] [--repeat N] [--range-mib N]

Three files: the reference Orders file (benchmarks.run; few quotes), the same rows with every
field quoted (quote-dense: the worst case for the quote count), and the wide reference file
(benchmarks.wide; hostile strings with quoted newlines). For each: a plain read of the file
in the planner's chunks (the floor: the planner reads every byte once), the planner
(plan_file, ranges of --range-mib), and pyarrow's CSV reader at one thread (what a worker
then does with each range), in MB/s, best of --repeat, in one process. Results are in
benchmarks/README.md ("Range planner").
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pyarrow.csv as pacsv

from loader.parse import Dialect
from loader.plan import plan_file
from loader.plan.ranges import READ_CHUNK
from loader.source import SourceInfo


def _info(path: Path) -> SourceInfo:
    st = os.stat(path)
    return SourceInfo(str(path), "file", name=str(path), size=st.st_size, mtime_ns=st.st_mtime_ns)


def _best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _plain_read(path: Path) -> int:
    n = 0
    with open(path, "rb", buffering=0) as fh:
        while True:
            data = fh.read(READ_CHUNK)
            if not data:
                return n
            n += len(data)


def _arrow_parse(path: Path) -> int:
    pa.set_cpu_count(1)
    table = pacsv.read_csv(
        str(path),
        read_options=pacsv.ReadOptions(use_threads=False, block_size=16 << 20),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
    )
    return table.num_rows


def _all_quoted(src: Path, dst: Path) -> Path:
    if not dst.exists():
        table = pacsv.read_csv(str(src))
        opts = pacsv.WriteOptions(quoting_style="all_valid")
        pacsv.write_csv(
            table.cast(pa.schema([(f.name, pa.string()) for f in table.schema])), str(dst), opts
        )
    return dst


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--wide-rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--range-mib", type=int, default=16)
    ap.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    args = ap.parse_args(argv)

    from benchmarks.run import orders_file
    from benchmarks.wide import wide_file

    orders = orders_file(args.data_dir, args.rows)
    files = [
        ("Orders", orders),
        ("Orders, every field quoted", _all_quoted(orders, orders.with_name("Orders-quoted.csv"))),
        ("wide (quoted newlines)", wide_file(args.data_dir, args.wide_rows)),
    ]
    print(
        f"{'file':28s} {'MiB':>7s} {'ranges':>6s} {'plain read':>11s} {'planner':>9s} {'arrow parse':>12s}  MB/s"
    )
    for label, path in files:
        size = path.stat().st_size
        target = min(args.range_mib << 20, size // 4)  # at least 4 ranges: the file is scanned
        t_read, _ = _best(args.repeat, functools.partial(_plain_read, path))
        t_plan, ranges = _best(
            args.repeat, functools.partial(plan_file, _info(path), Dialect(), target=target)
        )
        t_parse, _ = _best(args.repeat, functools.partial(_arrow_parse, path))
        mb = size / 1e6
        print(
            f"{label:28s} {size / 2**20:7.1f} {len(ranges):6d} {mb / t_read:11.0f} {mb / t_plan:9.0f}"
            f" {mb / t_parse:12.0f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
