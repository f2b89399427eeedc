"""The dry run on one core and on two, for several code trees side by side: a before/after of
a change to how the stages overlap, in one run.

    PYTHONPATH=. python -m benchmarks.cores [--rows N] [--rounds N] [--repeat N] [--cpu-time] TREE...

Each TREE is a checkout of spanner-loader with its compiled part built (for the code before a
change: ``git archive HEAD~1 | tar -x -C /tmp/before`` and a copy of ``loader/_native*.so``).
For each table (Orders, and the wide table of benchmarks/wide.py) every round runs, for each
tree, a fresh child process pinned to one CPU and one that may use all of them; each child
times the raw ``read_csv`` (one thread when pinned, all otherwise) and then a dry-run load,
``--repeat`` times. Printed per table and tree, best over all rounds: both times, the ratio
raw / load (benchmarks.run's "ours / raw parse") on one core and on all, and the second over
the first (at least 1: the stages overlap as well as Arrow's own parse spreads over cores).
Rounds alternate the trees, so a shared machine's load falls on each about alike.
``--cpu-time`` reports the loads' CPU seconds (all threads) instead of wall seconds: it
shows what a change costs, not how it overlaps. On a VM whose speed moves from minute to
minute the best times may come from different minutes; "per round" gives the all / 1 core
figure of each round (the two children of one tree run one after the other), its median and
range, which that drift affects less.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

from benchmarks.run import TABLE, orders_file, pin_first, spanner_database
from benchmarks.wide import TABLE as WIDE_TABLE
from benchmarks.wide import WIDE_DDL, wide_file

_CHILD = r"""
import json, os, pickle, sys, time
from pathlib import Path
import pyarrow.csv as pacsv
from benchmarks.run import load_config, pyarrow_threads
from loader import load

table, path, schema_path, repeat, pinned, cpu = sys.argv[1:7]
path, repeat, pinned, cpu = Path(path), int(repeat), pinned == "1", cpu == "1"
schema = pickle.loads(Path(schema_path).read_bytes())
cfg = load_config(path, table=table, dry_run=True)
parse = pacsv.ParseOptions(newlines_in_values=True)
clock = time.process_time if cpu else time.perf_counter
threads = 1 if pinned else None
loads, raws = [], []
with pyarrow_threads(threads):
    for _ in range(repeat):
        opts = pacsv.ReadOptions(use_threads=not pinned, block_size=16 << 20)
        t0 = clock()
        t = pacsv.read_csv(path, read_options=opts, parse_options=parse)
        raws.append(clock() - t0)
        del t
        t0 = clock()
        load(cfg, database=object(), schemas={table: schema})
        loads.append(clock() - t0)
print(json.dumps({"load": min(loads), "raw": min(raws)}))
"""


def reference_schemas(data_dir: Path) -> dict[str, Path]:
    """Orders' and the wide table's schemas, read from an emulator, pickled for the children."""
    from loader.emulator import start_emulator
    from loader.schema import read_schemas

    emulator = start_emulator()
    try:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
        shop = spanner_database(f"cores-{os.getpid() % 10000}")
        wide = spanner_database(f"cores-wide-{os.getpid() % 10000}", WIDE_DDL.read_text())
        out = {}
        for db, table in ((shop, TABLE), (wide, WIDE_TABLE)):
            path = data_dir / f"cores-{table}-{os.getpid()}.pickle"
            path.write_bytes(pickle.dumps(read_schemas(db, [table])[table]))
            out[table] = path
        return out
    finally:
        emulator.stop()
        os.environ.pop("SPANNER_EMULATOR_HOST", None)


def _child(tree: Path, table: str, path: Path, schema: Path, pinned: bool, a: Any) -> Any:
    cpu = min(os.sched_getaffinity(0)) if pinned else None
    args = [table, str(path), str(schema), str(a.repeat), str(int(pinned)), str(int(a.cpu_time))]
    out = subprocess.run(
        [sys.executable, "-c", pin_first(cpu) + _CHILD, *args],
        capture_output=True,
        text=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    if out.returncode:
        raise SystemExit(f"the child for {tree} failed:\n{out.stderr}")
    return json.loads(out.stdout)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("trees", nargs="+", type=Path, help="spanner-loader checkouts to compare")
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="loads per child (best counts)")
    p.add_argument("--cpu-time", action="store_true", help="CPU seconds of the loads")
    p.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    a = p.parse_args(argv)
    a.data_dir.mkdir(parents=True, exist_ok=True)
    files = {TABLE: orders_file(a.data_dir, a.rows), WIDE_TABLE: wide_file(a.data_dir, a.rows)}
    schemas = reference_schemas(a.data_dir)
    try:
        unit = "cpu s" if a.cpu_time else "s"
        for table, path in files.items():
            best: dict[tuple[Path, bool], dict[str, float]] = {}
            scaling: dict[Path, list[float]] = {}
            for _ in range(a.rounds):
                for tree in a.trees:
                    ratios = []
                    for pinned in (True, False):
                        got = _child(tree, table, path, schemas[table], pinned, a)
                        b = best.setdefault(
                            (tree, pinned), {"load": float("inf"), "raw": float("inf")}
                        )
                        b["load"], b["raw"] = min(b["load"], got["load"]), min(b["raw"], got["raw"])
                        ratios.append(got["raw"] / got["load"])
                    scaling.setdefault(tree, []).append(ratios[1] / ratios[0])
            for tree in a.trees:
                one, all_ = best[(tree, True)], best[(tree, False)]
                r1, r2 = one["raw"] / one["load"], all_["raw"] / all_["load"]
                rounds = sorted(scaling[tree])
                print(
                    f"{table:9s} {str(tree):28s} 1 core: load {one['load']:.3f} raw {one['raw']:.3f}"
                    f" {unit}, ratio {r1:.2f} | all cores: load {all_['load']:.3f} raw"
                    f" {all_['raw']:.3f} {unit}, ratio {r2:.2f} | all / 1 core {r2 / r1:.2f}"
                    f" (per round: median {statistics.median(rounds):.2f},"
                    f" {rounds[0]:.2f}-{rounds[-1]:.2f})",
                    flush=True,
                )
    finally:
        for schema in schemas.values():
            schema.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
