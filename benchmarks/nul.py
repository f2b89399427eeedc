"""The parse stage with and without the NUL guard (loader/parse/nul.py), by process CPU time.

    PYTHONPATH=. python -m benchmarks.nul [--rows N] [--repeat N]

Reads the Orders file (benchmarks/run.py) through ``read_blocks``: with the guard bypassed
("before") and with it ("after"), alternately, best of ``--repeat``; then the same file with a
NUL in one row in a hundred, which the guard rewrites and the blocks restore. Arrow reads on
its own thread (and calls the guard from it), so the clock is the process's CPU time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa

from benchmarks.run import orders_file
from loader.parse import Dialect, read_blocks
from loader.parse import reader as parse_reader
from loader.parse.stream import _ReadOnlyStream
from loader.schema import Column, KeyPart, TableSchema
from loader.types import SpannerType


class _Bypass(_ReadOnlyStream):
    """What the reader had before the guard: the stream handed on, never rewritten."""

    active = False

    def __init__(self, raw: Any) -> None:
        self.read = raw.read
        self.tell = raw.tell
        self.close = raw.close
        self.closed = False


@contextmanager
def _guard(on: bool) -> Iterator[None]:
    real = parse_reader._NulGuard
    if not on:
        parse_reader._NulGuard = _Bypass  # type: ignore[misc, assignment]
    try:
        yield
    finally:
        parse_reader._NulGuard = real  # type: ignore[misc]


def _parse(path: Path, table: TableSchema) -> int:
    rows = 0
    with open(path, "rb") as f:
        for block in read_blocks(f, str(path), table, Dialect(), block_size=16 << 20):
            rows += block.strings.num_rows
    return rows


def run(rows: int, repeat: int, data_dir: Path) -> list[str]:
    pa.set_cpu_count(1)
    path = orders_file(data_dir, rows)
    header = path.open("rb").readline().decode().strip().split(",")
    table = TableSchema(
        "Orders",
        tuple(
            Column(n, SpannerType.parse("STRING(MAX)"), nullable=i > 0)
            for i, n in enumerate(header)
        ),
        (KeyPart(header[0]),),
    )
    with_nul = data_dir / f"orders-{rows}-nul.csv"
    if not with_nul.exists():
        lines = path.read_bytes().split(b"\n")
        for i in range(1, len(lines), 100):
            lines[i] = lines[i].replace(b",pending,", b',"pen\x00ding",')
        with_nul.write_bytes(b"\n".join(lines))
    best = {"before": float("inf"), "after": float("inf"), "nul": float("inf")}
    for _ in range(repeat):
        for name, on, src in (
            ("before", False, path),
            ("after", True, path),
            ("nul", True, with_nul),
        ):
            with _guard(on):
                t0 = time.process_time()
                n = _parse(src, table)
                best[name] = min(best[name], time.process_time() - t0)
            assert n == rows, (name, n)
    per = 1e6 / rows * 1000
    return [
        f"parse {rows:,} Orders rows (CPU ms per 1M rows, best of {repeat}, alternating)",
        f"  without the guard (before)       {best['before'] * per:8.1f}",
        f"  with the guard, no NUL (after)   {best['after'] * per:8.1f}   "
        f"x{best['after'] / best['before']:.3f}",
        f"  with the guard, NUL in 1% rows   {best['nul'] * per:8.1f}   "
        f"x{best['nul'] / best['before']:.3f}",
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    a = p.parse_args(argv)
    a.data_dir.mkdir(parents=True, exist_ok=True)
    for line in run(a.rows, a.repeat, a.data_dir):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
