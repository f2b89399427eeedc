"""Tables of one wave load side by side (loader/waves.py): two independent tables and an
interleaved child of one of them, in-process against the session's emulator. A committer
wrapper watches the commits (which table, when, how many in flight), which the emulator cannot
tell; the data goes to the emulator itself."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import pytest
from conftest import read_table, small_load_config

from loader import LoadConfig, TableJob, load
from loader.commit import SpannerCommitter
from loader.errors import CommitError, ExitCode, Interrupted
from loader.report import LoadReport

DDL = [
    "CREATE TABLE A (Id INT64 NOT NULL, V STRING(40)) PRIMARY KEY (Id)",
    "CREATE TABLE AC (Id INT64 NOT NULL, N INT64 NOT NULL, W STRING(40)) "
    "PRIMARY KEY (Id, N), INTERLEAVE IN PARENT A ON DELETE CASCADE",
    "CREATE TABLE B (K STRING(20) NOT NULL, X INT64) PRIMARY KEY (K)",
]
A_ROWS, B_ROWS = 1200, 800


def rows_of(table: str) -> list[tuple[Any, ...]]:
    if table == "A":
        return [(i, f"a{i:05d}") for i in range(A_ROWS)]
    if table == "AC":
        return [(i, n, f"c{i}-{n}") for i in range(0, A_ROWS, 3) for n in range(2)]
    return [(f"k{i:06d}", i * 7) for i in range(B_ROWS)]


HEADERS = {"A": "Id,V", "AC": "Id,N,W", "B": "K,X"}


def sources(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for t in ("A", "AC", "B"):
        path = tmp_path / f"{t}.csv"
        if not path.exists():  # a resume needs the very same files
            lines = [HEADERS[t]] + [",".join(str(v) for v in r) for r in rows_of(t)]
            path.write_text("\n".join(lines) + "\n")
        out[t] = path
    return out


def config(db: Any, tmp_path: Path, **kw: Any) -> LoadConfig:
    src = sources(tmp_path)
    # the child is listed before B: waves order the tables, not the manifest
    jobs = tuple(TableJob(t, (str(src[t]),)) for t in ("A", "AC", "B"))
    cfg: LoadConfig = small_load_config(db, "A", [src["A"]], jobs=jobs, **kw)
    return cfg


def assert_exact(db: Any) -> None:
    for table, cols in (("A", ["Id", "V"]), ("AC", ["Id", "N", "W"]), ("B", ["K", "X"])):
        assert read_table(db, table, cols) == sorted(rows_of(table)), table


class Watch:
    """Passes commits to the emulator and records, per commit attempt, its table, start and
    end, and the most commits in flight at once (across every table). ``meet``: the first
    commit of each of these tables waits until each of them has one in flight (so they are
    seen side by side); ``fail``: (table, n) raises at that table's n-th commit; ``hold``:
    (table, n) slows that table's commits from the n-th on (each waits up to 0.2 s for the
    failure, and a second more once it came), so the failure's stop reaches it mid-load
    whatever the machine's load."""

    def __init__(
        self,
        db: Any,
        meet: Sequence[str] = (),
        fail: Optional[tuple[str, int]] = None,
        delay: float = 0.0,
        hold: Optional[tuple[str, int]] = None,
    ) -> None:
        self.inner = SpannerCommitter(db)
        self.lock = threading.Lock()
        self.intervals: list[tuple[str, float, float]] = []
        self.in_flight = self.most = 0
        self.meet = set(meet)
        self.barrier = threading.Barrier(len(meet)) if meet else None
        self.fail = fail
        self.count: dict[str, int] = {}
        self.delay = delay
        self.hold = hold
        self.failed = threading.Event()

    def commit(self, mutations: Any) -> None:
        from google.cloud.spanner_v1 import Mutation

        pb = Mutation.pb().FromString(mutations[0])
        table = getattr(pb, pb.WhichOneof("operation")).table
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.count[table] = n = self.count.get(table, 0) + 1
            meet = table in self.meet
            self.meet.discard(table)
        start = time.monotonic()
        try:
            if meet and self.barrier is not None:
                self.barrier.wait(timeout=60)
            if self.fail is not None and self.fail == (table, n):
                self.failed.set()
                raise RuntimeError(f"commit {n} of {table} lost")
            held = self.hold is not None and table == self.hold[0] and n >= self.hold[1]
            # bounded: a held commit holds a slot of the shared ceiling the failing one needs
            if held and self.failed.wait(timeout=0.2):
                time.sleep(1.0)
            if self.delay:
                time.sleep(self.delay)
            self.inner.commit(mutations)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.intervals.append((table, start, time.monotonic()))

    def existing_keys(self, table: str, keys: Any) -> Any:
        return self.inner.existing_keys(table, keys)

    def span(self, table: str) -> tuple[float, float]:
        mine = [(s, e) for t, s, e in self.intervals if t == table]
        return min(s for s, _ in mine), max(e for _, e in mine)


def test_independent_tables_commit_side_by_side_within_the_ceiling(
    make_database: Any, tmp_path: Path
) -> None:
    """A and B (one wave) have commits in flight at the same time, never more than
    --concurrency across both although each has a pool of that many threads; AC (interleaved
    in A) starts only once the wave is done; everything lands exactly."""
    db = make_database(DDL)
    watch = Watch(db, meet=("A", "B"))
    cfg = config(db, tmp_path, concurrency=2, adaptive=False)
    report = load(cfg, database=db, committer=watch)
    assert report.exit_code == ExitCode.OK, report.render()
    assert_exact(db)
    assert watch.most == 2  # A's and B's first commits met, and the shared ceiling held
    (a0, a1), (b0, b1), (c0, _) = watch.span("A"), watch.span("B"), watch.span("AC")
    assert a0 < b1 and b0 < a1  # their commits interleave in time
    assert c0 >= max(a1, b1)  # the child waited for its parent's wave
    # the report lists each table in wave order, with its own commits
    assert [t.table for t in report.tables] == ["A", "B", "AC"]
    for t in report.tables:
        assert t.rows_written == len(rows_of(t.table)) and t.commits > 1
        assert t.commits == sum(1 for x in watch.intervals if x[0] == t.table) - t.retries
    assert set(report.run_ids) == {"A", "B", "AC"}


def test_on_the_emulator_default_one_commit_at_a_time(make_database: Any, tmp_path: Path) -> None:
    """concurrency 1 (the emulator's default): the tables still load side by side, their
    commits taking turns; and --parallel-tables 1 loads one table after another."""
    db = make_database(DDL)
    watch = Watch(db)
    report = load(config(db, tmp_path), database=db, committer=watch)
    assert report.exit_code == ExitCode.OK, report.render()
    assert_exact(db)
    assert watch.most == 1
    assert watch.span("AC")[0] >= max(watch.span("A")[1], watch.span("B")[1])

    db = make_database(DDL)
    watch = Watch(db)
    report = load(config(db, tmp_path, parallel_tables=1), database=db, committer=watch)
    assert report.exit_code == ExitCode.OK, report.render()
    assert_exact(db)
    assert watch.span("A")[1] <= watch.span("B")[0]  # A, then B


def test_a_failure_stops_the_other_table_and_resume_finishes_both(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database(DDL)
    # B's first commit fails while A's first is in flight (they meet): A has 23 more to go
    watch = Watch(db, meet=("A", "B"), fail=("B", 1), delay=0.01, hold=("A", 2))
    cfg = config(db, tmp_path, concurrency=2, adaptive=False)
    with pytest.raises(CommitError) as e:
        load(cfg, database=db, committer=watch)
    assert "commit 1 of B lost" in e.value.message
    report: LoadReport = e.value.report  # type: ignore[attr-defined]
    assert report.exit_code == ExitCode.FAILED
    assert "A: stopped when B failed" in report.notes
    assert [t.table for t in report.tables] == ["A", "B"]  # AC never started
    a = report.tables[0]
    assert 0 < a.rows_written < A_ROWS
    assert watch.count.get("AC") is None

    again = load(cfg, database=db)
    assert again.exit_code == ExitCode.OK, again.render()
    assert_exact(db)
    resumed = [n for n in again.notes if "resuming run" in n]
    assert any(n.startswith("A: ") for n in resumed)  # B had committed nothing to resume


def test_a_signal_stops_every_table_of_the_wave(make_database: Any, tmp_path: Path) -> None:
    db = make_database(DDL)
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.rows_written >= 100:
            stop.set()

    cfg = config(db, tmp_path, concurrency=2, adaptive=False)
    with pytest.raises(Interrupted) as e:
        load(cfg, database=db, committer=Watch(db, delay=0.01), progress=progress, stop=stop)
    report: LoadReport = e.value.report  # type: ignore[attr-defined]
    assert report.exit_code == ExitCode.INTERRUPTED
    stopped = [e.value.message, *report.notes]
    for t in ("A", "B"):  # both were stopped by it, each says so once
        assert sum(f"stopped by a signal while loading {t};" in n for n in stopped) == 1
    again = load(cfg, database=db)
    assert again.exit_code == ExitCode.OK, again.render()
    assert_exact(db)


def test_the_buffer_share_is_part_of_the_checkpoints_layout(
    make_database: Any, tmp_path: Path
) -> None:
    """Side by side each table flushes at its share of --buffer-size, so the batches of an
    interrupted flush are named for that share: insert mode resumes only with the same one,
    and says which --parallel-tables gives it."""
    from loader.errors import StateError

    db = make_database(DDL)
    cfg = config(db, tmp_path, mode="insert", buffer_size=1 << 20, concurrency=2, adaptive=False)
    with pytest.raises(CommitError):
        load(cfg, database=db, committer=Watch(db, fail=("B", 4)))
    one_by_one = config(db, tmp_path, mode="insert", buffer_size=1 << 20, parallel_tables=1)
    with pytest.raises(StateError) as e:
        load(one_by_one, database=db)
    assert e.value.hint is not None and "`parallel_tables=2`" in e.value.hint, e.value.hint
    report = load(config(db, tmp_path, mode="insert", buffer_size=1 << 20), database=db)
    assert report.exit_code == ExitCode.OK, report.render()
    assert report.rows_rejected == 0
    assert_exact(db)
