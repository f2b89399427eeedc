"""Rows of an interleaved table whose parent row is missing, for several code trees side by
side: an export of a database that kept no foreign keys, whose deleted parents left their
children behind.

    PYTHONPATH=. python -m benchmarks.orphans [--parents N] [--children N] [--every N]
        [--rounds N] TREE...

Each TREE is a checkout of spanner-loader (for the code before a change: ``git worktree add
--detach /tmp/before REV`` and a copy of ``loader/_native*.so``). The data: ``--parents``
parents keyed by a UUID text, ``--children`` rows each under one of them (keyed by that UUID
and a line number, with a quantity and a note), and every ``--every``-th parent left out of
the parent file, so its children are orphans. Against the Spanner emulator (the one named by
SPANNER_EMULATOR_HOST, else one started here), every round loads, for each tree, into a
fresh database: the parents (not timed), then the children with every orphan tolerated, by
each tree's own command line, and drops it. Printed per tree and round: the children's rows written and
rejected, the commits, and the table's load time from the JSON report. Rounds alternate the
trees.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
"""This checkout."""

DDL = """CREATE TABLE Accounts (
  AccountId STRING(36) NOT NULL,
  Owner STRING(MAX),
) PRIMARY KEY (AccountId);
CREATE TABLE Entries (
  AccountId STRING(36) NOT NULL,
  Line INT64 NOT NULL,
  Quantity INT64,
  Note STRING(MAX),
) PRIMARY KEY (AccountId, Line),
  INTERLEAVE IN PARENT Accounts ON DELETE CASCADE;
"""


def make_files(folder: Path, parents: int, children: int, every: int) -> tuple[int, int]:
    """Write ddl.sql, accounts.csv and entries.csv; the number of entries and of orphans."""
    rng = random.Random(7)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(parents)]
    (folder / "ddl.sql").write_text(DDL, encoding="utf-8")
    with open(folder / "accounts.csv", "w", encoding="utf-8") as f:
        f.write("AccountId,Owner\n")
        for i, a in enumerate(ids):
            if i % every:
                f.write(f'{a},"Owner {i}, Ltd."\n')
    orphans = 0
    with open(folder / "entries.csv", "w", encoding="utf-8") as f:
        f.write("AccountId,Line,Quantity,Note\n")
        for j in range(children):
            i = rng.randrange(parents)
            orphans += i % every == 0
            f.write(f"{ids[i]},{j},{rng.randrange(100)},note {j}\n")
    return children, orphans


def _cli(tree: Path, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "loader", "load", *args, "--json", "--quiet"],
        capture_output=True,
        text=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    if out.returncode not in (0, 3):
        raise SystemExit(f"the load in {tree} exited {out.returncode}:\n{out.stderr}")
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def run_tree(tree: Path, folder: Path, database: str, orphans: int) -> dict[str, Any]:
    """The parents, then the timed children, into ``database``; the children's table report."""
    target = [
        "--emulator",
        "--database",
        database,
        "--state-file",
        str(folder / f"{database}.json"),
    ]
    _cli(
        tree,
        str(folder / "accounts.csv"),
        "--table",
        "Accounts",
        "--ddl",
        str(folder / "ddl.sql"),
        *target,
    )
    report = _cli(
        tree,
        str(folder / "entries.csv"),
        "--table",
        "Entries",
        "--max-bad-rows",
        str(orphans),
        "--rejects",
        str(folder / f"{database}.rejects.jsonl"),
        *target,
    )
    table: dict[str, Any] = report["tables"][0]
    return table


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("trees", nargs="+", type=Path, help="spanner-loader checkouts to compare")
    p.add_argument("--parents", type=int, default=10_000)
    p.add_argument("--children", type=int, default=50_000)
    p.add_argument("--every", type=int, default=200, help="every N-th parent is missing")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args(argv)
    emulator = None
    if not os.environ.get("SPANNER_EMULATOR_HOST"):
        from loader.emulator import start_emulator

        emulator = start_emulator()
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            rows, orphans = make_files(folder, a.parents, a.children, a.every)
            print(
                f"{rows:,} child rows under {a.parents:,} parents, every {a.every}th parent "
                f"missing: {orphans:,} orphans"
            )
            print(
                f"{'tree':<28} {'round':>5} {'written':>9} {'rejected':>9} {'commits':>8} {'seconds':>8}"
            )
            for r in range(a.rounds):
                for i, tree in enumerate(a.trees):
                    database = f"orphans-{os.getpid() % 10000}-{r}-{i}"
                    try:
                        t = run_tree(tree.resolve(), folder, database, orphans)
                    finally:  # the emulator holds 100 databases an instance at most
                        _drop(database)
                    print(
                        f"{str(tree):<28} {r + 1:>5} {t['rows_written']:>9,} "
                        f"{t['rows_rejected']:>9,} {t['commits']:>8,} {t['elapsed_s']:>8.2f}",
                        flush=True,
                    )
    finally:
        if emulator is not None:
            emulator.stop()
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
    return 0


def _drop(database: str) -> None:
    from google.cloud import spanner

    spanner.Client(project="test-project").instance("test-instance").database(database).drop()


if __name__ == "__main__":
    sys.exit(main())
