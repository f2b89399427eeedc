"""A Beam key range sorted in runs on disk (loader/beam/spill.py) beside the in-memory sort.

    PYTHONPATH=. python -m benchmarks.spill [--rows N] [--runs K] [--repeat N]

One key range of ``--rows`` buffered rows (a shuffled INT64 key, 40-byte encoded rows, the
provenance columns) sorted two ways in one process: in memory (one stable key sort and a take,
what a key range within its budget gets) and as ``--runs`` sorted runs written to a temporary
folder and merged back (what one over its budget gets; the merge reads pieces sized as
``RangeRows.merged`` sizes them for a budget of twice a run). Rows/s, best of ``--repeat``,
and the most rows the merge held at once. Results are in benchmarks/README.md ("Key range
over its memory budget").
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa

from loader.beam import spill
from loader.buffer import LINE_COL, RECORD_COL, ROW_COL, SOURCE_COL
from loader.schema import Column, KeyPart, TableSchema
from loader.sort import sort_order, take_table
from loader.types import SpannerType

SCHEMA = TableSchema(
    name="T",
    columns=(Column("Id", SpannerType.parse("INT64"), nullable=False),),
    primary_key=(KeyPart("Id"),),
)


def _rows(n: int) -> pa.Table:
    ids = np.random.default_rng(1).permutation(n).astype(np.int64)
    return pa.table(
        {
            "Id": ids,
            ROW_COL: pa.array([b"r" * 40] * n, pa.binary()),
            SOURCE_COL: pa.array(np.zeros(n, np.int32)),
            RECORD_COL: pa.array(np.arange(n, dtype=np.int64)),
            LINE_COL: pa.array(np.arange(n, dtype=np.int64)),
        }
    )


def _in_memory(table: pa.Table) -> int:
    order, _ = sort_order(table.select(["Id"]), SCHEMA.primary_key)
    return take_table(table, order).num_rows


def _spilled(table: pa.Table, runs: int, folder: Path) -> tuple[int, int]:
    n = table.num_rows
    budget = 2 * table.nbytes // runs  # a run at half the budget, as RangeRows cuts them
    paths = []
    for k in range(runs):
        part = table.slice(k * n // runs, (k + 1) * n // runs - k * n // runs)
        order, _ = sort_order(part.select(["Id"]), SCHEMA.primary_key)
        path = folder / f"run-{k:06d}.arrow"
        spill.write_run(path, take_table(part, order), budget // spill.RUN_PIECES)
        paths.append(path)
    row_bytes = max(1, table.nbytes // max(1, n))
    piece = max(1, budget // (spill.MERGE_SHARE * runs * row_bytes))
    held = spill.Held()
    out = sum(c.num_rows for c in spill.merge_runs(paths, SCHEMA, piece, held))
    return out, held.peak


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    table = _rows(args.rows)
    best_mem = best_spill = float("inf")
    peak = 0
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        assert _in_memory(table) == args.rows
        best_mem = min(best_mem, time.perf_counter() - t0)
        with tempfile.TemporaryDirectory(prefix="spanner-loader-bench-spill-") as tmp:
            t0 = time.perf_counter()
            got, peak = _spilled(table, args.runs, Path(tmp))
            best_spill = min(best_spill, time.perf_counter() - t0)
        assert got == args.rows
    print(f"{'way':<34}{'rows/s':>12}{'rows held at once':>20}")
    print(f"{'in memory (sort + take)':<34}{args.rows / best_mem:>12,.0f}{args.rows:>20,}")
    label = f"{args.runs} runs written + merged"
    print(f"{label:<34}{args.rows / best_spill:>12,.0f}{peak:>20,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
