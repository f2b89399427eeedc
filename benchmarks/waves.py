"""Two independent tables side by side vs one after another (issue #19, scope 4).

::

    PYTHONPATH=. python -m benchmarks.waves [--rows 50000] [--latency-ms 100] [--repeat 3]

The tables are examples/generate.py's Customers and Products (``--rows`` each; neither is
interleaved in nor references the other, so they form one wave), loaded with
``parallel_tables=1`` (one after another, the loader before issue #19) and 4 (side by side),
the variants alternating ``--repeat`` times so drift on a shared machine shows:

1. **emulator**: a Spanner emulator started here, concurrency 1 (its default: it runs one
   read-write transaction at a time), a fresh database per load, checkpoints on (the
   default state table);
2. **latency**: commits acknowledged after ``--latency-ms`` by a committer in this process
   (a stand-in for a real instance's commit round trip, which the emulator cannot show since it
   serializes commits), concurrency 8 fixed, schemas read from the emulator and injected,
   checkpoints off. Nothing is written.

Each line gives the load's wall time and each table's own elapsed time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from benchmarks.run import GENERATE, INSTANCE, PROJECT, SHOP_DDL

TABLES = ("Customers", "Products")


def data(rows: int) -> Path:
    out = Path(tempfile.gettempdir()) / "spanner-loader-bench" / f"waves-{rows}"
    if not all((out / f"{t}.csv").exists() for t in TABLES):
        subprocess.run(
            [sys.executable, str(GENERATE), "--customers", str(rows), "--products", str(rows)]
            + ["--tables", ",".join(TABLES), "--out", str(out)],
            check=True,
            stderr=subprocess.DEVNULL,
        )
    return out


class Latency:
    """Acknowledges each commit after ``seconds`` (many at once, as a real instance would)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def commit(self, mutations: Sequence[bytes]) -> None:
        time.sleep(self.seconds)

    def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
        return []


def config(folder: Path, database_id: str, **kw: Any) -> Any:
    from loader import LoadConfig, TableJob, Target
    from loader.convert import ConvertOptions
    from loader.parse import Dialect

    return LoadConfig(
        target=Target(PROJECT, INSTANCE, database_id, emulator=True),
        jobs=tuple(TableJob(t, (str(folder / f"{t}.csv"),)) for t in TABLES),
        dialect=Dialect(),
        convert=ConvertOptions(),
        rejects=None,
        **kw,
    )


def line(name: str, report: Any, wall: float) -> str:
    tables = ", ".join(f"{t.table} {t.elapsed_s:.2f}s" for t in report.tables)
    return f"  {name:<24} {wall:6.2f}s  {report.rows_written:,} rows  ({tables})"


def main(argv: Optional[Sequence[str]] = None) -> int:
    from google.cloud import spanner

    from loader import load
    from loader.emulator import ensure_database, start_emulator
    from loader.schema import read_schemas

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=50_000, help="rows per table")
    p.add_argument("--latency-ms", type=float, default=100.0)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    folder = data(a.rows)
    emulator = start_emulator()
    os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
    try:
        client = spanner.Client(project=PROJECT)
        print(f"1. emulator, concurrency 1, {a.rows:,} rows per table", flush=True)
        for i in range(a.repeat):
            for n in (1, 4):
                db = ensure_database(client, INSTANCE, f"waves{n}x{i}", [SHOP_DDL])
                t0 = time.perf_counter()
                report = load(config(folder, db.database_id, parallel_tables=n), database=db)
                print(line(f"parallel_tables={n}", report, time.perf_counter() - t0), flush=True)
        schemas = read_schemas(db, list(TABLES))
        print(f"2. {a.latency_ms:g} ms per commit, concurrency 8 (fixed)", flush=True)
        for _ in range(a.repeat):
            for n in (1, 4):
                cfg = config(
                    folder, "null", parallel_tables=n, concurrency=8, adaptive=False, state=False
                )
                t0 = time.perf_counter()
                report = load(
                    cfg,
                    database=db,
                    committer=Latency(a.latency_ms / 1000),
                    schemas=schemas,
                )
                print(line(f"parallel_tables={n}", report, time.perf_counter() - t0), flush=True)
    finally:
        os.environ.pop("SPANNER_EMULATOR_HOST", None)
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
