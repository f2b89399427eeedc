"""The most two cores could give the dry-run pipeline on this machine, beside what they give
the raw parse: issue #18's "the 2-core ratio / the 1-core ratio" with perfect overlap.

    PYTHONPATH=. python -m benchmarks.ceiling [--rows 1000000] [--rounds 3] [--repeat 3]

A load spread perfectly over two cores is at best two loads of half the rows, each pinned to
a core of its own and sharing nothing but the machine. So each round runs, for half the rows:
one process pinned to CPU 0 alone, then two at once pinned to CPU 0 and CPU 1 (each the best
of ``--repeat`` loads), for the dry-run pipeline and for the raw single-threaded
``pyarrow.csv.read_csv`` (benchmarks.run's parse options). The speed-up two cores could give
is twice the time alone over the slower of the pair. Then the baseline the claim is measured
against (benchmarks.run section 1): Arrow's threaded ``read_csv`` of all the rows on every
core, over its single-threaded one pinned to one core. The claim's ceiling is the pipeline's
best speed-up over that baseline's: under 1, the claim cannot be met on this machine by any
arrangement of the pipeline's work, only by less of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent


def _child(kind: str, table: str, path: Path, schema: Path, repeat: int) -> None:
    """Child: the best of ``repeat`` dry-run loads (``kind`` load) or raw parses (raw:
    single-threaded; threaded: on Arrow's pool, as benchmarks.run section 1's)."""
    import pickle

    import pyarrow.csv as pacsv

    from benchmarks.run import load_config, pyarrow_threads, raw_parse_options
    from loader import load

    runs: list[float] = []
    with pyarrow_threads(None if kind == "threaded" else 1):
        if kind in ("raw", "threaded"):
            parse = raw_parse_options(table)
            opts = pacsv.ReadOptions(use_threads=kind == "threaded", block_size=16 << 20)
            for _ in range(repeat):
                t0 = time.perf_counter()
                parsed = pacsv.read_csv(path, read_options=opts, parse_options=parse)
                runs.append(time.perf_counter() - t0)
                del parsed
        else:
            cfg = load_config(path, table=table, dry_run=True)
            loaded = pickle.loads(schema.read_bytes())
            load(cfg, database=object(), schemas={table: loaded})  # fresh memory: not counted
            for _ in range(repeat):
                t0 = time.perf_counter()
                load(cfg, database=object(), schemas={table: loaded})
                runs.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": min(runs)}))


def _start(kind: str, table: str, path: Path, schema: Path, repeat: int, cpu: Optional[int]) -> Any:
    from benchmarks.run import pinned_module

    return subprocess.Popen(
        pinned_module(
            cpu,
            "benchmarks.ceiling",
            ["--child", kind, "--child-table", table, "--child-path", str(path)]
            + ["--child-schema", str(schema), "--repeat", str(repeat)],
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _seconds(proc: Any) -> float:
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a child failed ({proc.returncode})")
    return float(json.loads(out)["seconds"])


def _round(kind: str, table: str, path: Path, schema: Path, repeat: int) -> tuple[float, float]:
    """(seconds alone on CPU 0, the slower of two at once on CPUs 0 and 1)."""
    alone = _seconds(_start(kind, table, path, schema, repeat, 0))
    pair = [_start(kind, table, path, schema, repeat, cpu) for cpu in (0, 1)]
    return alone, max(_seconds(p) for p in pair)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the whole load")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="loads or parses per process")
    p.add_argument("--tables", default="Orders,Accounts", help="Orders and/or Accounts (wide)")
    p.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    p.add_argument("--child", choices=("load", "raw", "threaded"), help=argparse.SUPPRESS)
    p.add_argument("--child-table", help=argparse.SUPPRESS)
    p.add_argument("--child-path", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-schema", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(a.child, a.child_table, a.child_path, a.child_schema, max(1, a.repeat))
        return 0
    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        raise SystemExit("needs CPUs 0 and 1")
    from benchmarks.cores import reference_schemas
    from benchmarks.run import TABLE, orders_file
    from benchmarks.wide import wide_file

    a.data_dir.mkdir(parents=True, exist_ok=True)
    schemas = reference_schemas(a.data_dir)
    half = a.rows // 2
    print(
        f"{half:,} rows (half of {a.rows:,}) per process; median of {a.rounds} rounds,"
        f" each process the best of {a.repeat}"
    )
    for table in a.tables.split(","):
        path = orders_file(a.data_dir, half) if table == TABLE else wide_file(a.data_dir, half)
        gains: dict[str, float] = {}
        for kind in ("load", "raw"):
            rounds = [_round(kind, table, path, schemas[table], a.repeat) for _ in range(a.rounds)]
            alone = statistics.median(r[0] for r in rounds)
            pair = statistics.median(r[1] for r in rounds)
            gains[kind] = statistics.median(2 * r[0] / r[1] for r in rounds)
            what = "dry-run load" if kind == "load" else "raw read_csv"
            print(
                f"{table:9s} {what:13s} alone {alone:.3f} s, two at once {pair:.3f} s:"
                f" two cores at best {gains[kind]:.2f}x one"
                f" (per round: {', '.join(f'{2 * r[0] / r[1]:.2f}' for r in rounds)})",
                flush=True,
            )
        whole = orders_file(a.data_dir, a.rows) if table == TABLE else wide_file(a.data_dir, a.rows)
        base = []
        for _ in range(a.rounds):
            one = _seconds(_start("raw", table, whole, schemas[table], a.repeat, 0))
            every = _seconds(_start("threaded", table, whole, schemas[table], a.repeat, None))
            base.append((one, every))
        gains["baseline"] = statistics.median(r[0] / r[1] for r in base)
        print(
            f"{table:9s} the claim's baseline, {a.rows:,} rows: read_csv 1 thread pinned"
            f" {statistics.median(r[0] for r in base):.3f} s, threaded on"
            f" {len(os.sched_getaffinity(0))} cores {statistics.median(r[1] for r in base):.3f} s:"
            f" {gains['baseline']:.2f}x (per round: {', '.join(f'{r[0] / r[1]:.2f}' for r in base)})"
        )
        print(
            f"{table:9s} ceiling of the 2-core ratio / the 1-core ratio: against two raw parses"
            f" {gains['load'] / gains['raw']:.2f}, against the claim's baseline"
            f" {gains['load'] / gains['baseline']:.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
