"""The Beam path (``runner="DirectRunner"``) beside the single-process load, on the same file.

    PYTHONPATH=. .venv-beam/bin/python -m benchmarks.beam [--emulator-rows N] [--null-rows N]

apache-beam lives in its own virtualenv (scripts/beam_check.sh builds it); without it this
prints why and exits 0. The same Orders file (examples/generate.py) is loaded by
``loader.load`` twice per target, with one config that differs only in ``runner``:

1. **emulator** (``--emulator-rows``, default 50,000): a Spanner emulator started here,
   concurrency 1 (the emulator runs one read-write transaction at a time), a fresh database
   per load (Orders without its parent, as in benchmarks/run.py section 2);
2. **null server** (``--null-rows``, default 200,000; benchmarks/null_spanner.py): commits
   acknowledged at once, concurrency 4, the schema read from the emulator and injected. The
   null server accepts the checkpoint table's DDL and answers every read with no rows, so
   each load there is a fresh one.

Checkpoints are on (the default checkpoint table) in every load: the Beam path needs its
batch markers, and the single-process load keeps them too, so both do the same writes. The
DirectRunner runs the pipeline in this process (its default: one worker, in memory); see
benchmarks/README.md ("Beam path") for what that figure does and does not say.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Callable, Optional

from benchmarks.run import (
    TABLE,
    load_config,
    null_database,
    orders_ddl,
    orders_file,
    spanner_database,
)

RUNNERS: tuple[tuple[str, Optional[str]], ...] = (
    ("single process", None),
    ("Beam, DirectRunner", "DirectRunner"),
)


def beam_missing() -> Optional[str]:
    """Why the Beam path cannot run here (None: it can)."""
    try:
        import apache_beam  # noqa: F401
    except ImportError as e:
        return f"apache_beam is not importable ({e})"
    return None


def _time(target: str, label: str, rows: int, run: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    report = run()
    seconds = time.perf_counter() - t0
    written = report.tables[0].rows_written
    assert written == rows, (target, label, written, rows)
    rate = rows / seconds
    print(
        f"{target:10s} {label:22s} {rows:>10,} {seconds:9.2f} {rate:>11,.0f}"
        f"  {report.tables[0].commits} commits",
        flush=True,
    )
    return rate


def run(a: argparse.Namespace) -> dict[tuple[str, str], float]:
    """Every variant once per ``--repeat``; the best rows/s of each."""
    from benchmarks.null_spanner import NullSpanner
    from loader import load
    from loader.emulator import start_emulator
    from loader.schema import read_schemas

    best: dict[tuple[str, str], float] = {}

    def keep(target: str, label: str, rate: float) -> None:
        best[(target, label)] = max(rate, best.get((target, label), 0.0))

    small = orders_file(a.data_dir, a.emulator_rows)
    big = orders_file(a.data_dir, a.null_rows)
    stamp = f"{os.getpid() % 10000}-{int(time.time()) % 100000}"
    saved = os.environ.get("SPANNER_EMULATOR_HOST")
    print(f"{'target':10s} {'variant':22s} {'rows':>10s} {'seconds':>9s} {'rows/s':>11s}")
    emulator = start_emulator()
    try:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
        schema = None
        for i in range(a.repeat):
            for label, runner in RUNNERS:
                db = spanner_database(f"beam-{stamp}-{i}-{'b' if runner else 's'}", orders_ddl())
                if schema is None:
                    schema = read_schemas(db, [TABLE])[TABLE]
                cfg = load_config(
                    small, database_id=db.database_id, state=True, concurrency=1, runner=runner
                )
                rate = _time("emulator", label, a.emulator_rows, partial(load, cfg, database=db))
                keep("emulator", label, rate)
    finally:
        emulator.stop()
    try:
        with NullSpanner() as server:
            os.environ["SPANNER_EMULATOR_HOST"] = server.address
            for _ in range(a.repeat):
                for label, runner in RUNNERS:
                    assert schema is not None  # read by the emulator runs above
                    cfg = load_config(big, state=True, concurrency=a.concurrency, runner=runner)
                    db = null_database()
                    go = partial(load, cfg, database=db, schemas={TABLE: schema})
                    keep("null", label, _time("null", label, a.null_rows, go))
    finally:
        if saved is None:
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
        else:
            os.environ["SPANNER_EMULATOR_HOST"] = saved
    print()
    for target in ("emulator", "null"):
        one, beam = best[(target, RUNNERS[0][0])], best[(target, RUNNERS[1][0])]
        print(f"{target:10s} Beam (DirectRunner) / single process: {beam / one:.2f}")
    return best


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--emulator-rows", type=int, default=50_000)
    p.add_argument("--null-rows", type=int, default=200_000)
    p.add_argument("--concurrency", type=int, default=4, help="against the null server")
    p.add_argument("--repeat", type=int, default=2, help="best of (alternating variants)")
    p.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parse_args(argv)
    why = beam_missing()
    if why is not None:
        print(
            f"skipped: {why}; the Beam path needs the [beam] extra, in a virtualenv of its own "
            "(scripts/beam_check.sh builds .venv-beam): run this with .venv-beam/bin/python"
        )
        return 0
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
