"""The step-load bench (loader/bench.py): arithmetic and retry with a fake clock and committer,
the whole run against the emulator. No timing assertions."""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pytest
from google.api_core import exceptions as gexc
from google.cloud.spanner_v1 import Mutation

from loader.bench import (
    BENCH_COLUMNS,
    BENCH_TABLE,
    BenchReport,
    StepResult,
    cost_per_million_rows,
    default_steps,
    generate_rows,
    parse_steps,
    run_bench,
    run_step,
)
from loader.errors import CommitError, ConfigError


class FakeClock:
    """Time that only moves when a fake commit 'takes' time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, s: float) -> None:
        with self.lock:
            self.now += s


class FakeCommitter:
    """Records each committed batch's keys; each commit 'takes' ``duration`` fake seconds;
    ``fail(batch_first_key, attempt)`` may return an exception to raise instead."""

    def __init__(
        self,
        clock: FakeClock,
        duration: float = 0.25,
        fail: Callable[[int, int], BaseException | None] = lambda k, a: None,
    ) -> None:
        self.clock = clock
        self.duration = duration
        self.fail = fail
        self.batches: list[list[int]] = []
        self.attempts: dict[int, int] = {}
        self.lock = threading.Lock()

    def commit(self, mutations: Sequence[bytes]) -> None:
        (m,) = mutations
        write = Mutation.deserialize(m).insert_or_update
        assert list(write.columns) == list(BENCH_COLUMNS)
        keys = [int(row[0]) for row in write.values]
        with self.lock:
            attempt = self.attempts.get(keys[0], 0) + 1
            self.attempts[keys[0]] = attempt
        self.clock.advance(self.duration)
        exc = self.fail(keys[0], attempt)
        if exc is not None:
            raise exc
        with self.lock:
            self.batches.append(keys)

    def existing_keys(self, table: str, keys: pa.Table) -> Any:
        raise NotImplementedError


def rows(n: int = 2000, first: int = 0) -> pa.Table:
    return generate_rows(first, n, 1, 20, np.random.default_rng(7))


def test_default_steps() -> None:
    assert default_steps(1) == [1]
    assert default_steps(8) == [1, 2, 4, 8]
    assert default_steps(12) == [1, 2, 4, 8, 12]
    with pytest.raises(ConfigError):
        default_steps(0)


def test_parse_steps() -> None:
    assert parse_steps("1,8, 16") == [1, 8, 16]
    for bad in ("", "a,b", "0,2", "1,-2"):
        with pytest.raises(ConfigError, match="not a list of concurrency steps"):
            parse_steps(bad)


def test_cost_per_million_rows() -> None:
    # 2 nodes at $0.90/node-hour = $1.80/h; 10,000 rows/s = 36M rows/h -> $0.05 per M rows.
    assert cost_per_million_rows(10_000, 2, 0.9) == pytest.approx(0.05)
    assert cost_per_million_rows(10_000, None, 0.9) is None
    assert cost_per_million_rows(10_000, 2, None) is None
    assert cost_per_million_rows(0, 2, 0.9) is None


def test_generated_keys_are_unique_sorted_and_spread() -> None:
    a, b = rows(5000, 0), rows(5000, 5000)
    ids_a, ids_b = a["Id"].to_numpy(), b["Id"].to_numpy()
    assert (np.diff(ids_a) > 0).all() and (np.diff(ids_b) > 0).all()
    assert len(np.intersect1d(ids_a, ids_b)) == 0
    assert ids_a.min() >= 0
    # Spread over the key space: every eighth of INT64's positive range gets some keys.
    assert len(np.unique(ids_a >> 60)) == 8
    assert a.column_names == list(BENCH_COLUMNS)
    assert a.schema.field("Payload").type == pa.string()
    assert set(len(s) for s in a["Payload"].to_pylist()) == {20}


def test_step_with_fake_clock_writes_every_row_once_and_does_the_arithmetic() -> None:
    clock = FakeClock()
    committer = FakeCommitter(clock, duration=0.25)
    data = rows(2000)
    result = run_step(committer, BENCH_TABLE, data, concurrency=1, batch_rows=500, clock=clock)
    # 4 commits of 0.25 s each, one at a time: 1 s for 2,000 rows.
    assert (result.rows, result.commits, result.elapsed_s) == (2000, 4, 1.0)
    assert result.rows_per_s == 2000
    assert result.latency_ms(50) == result.latency_ms(99) == 250.0
    assert (result.aborted, result.retries) == (0, 0)
    # Contiguous sorted batches covering the step's keys exactly.
    assert [len(b) for b in committer.batches] == [500] * 4
    flat = [k for b in committer.batches for k in b]
    assert flat == data["Id"].to_pylist()

    result.node_count, result.node_hour_price = 2, 0.9
    assert result.rows_per_s_per_node == 1000
    # $1.80 per hour / 7.2M rows per hour = $0.25 per million rows.
    assert result.cost_per_million_rows == pytest.approx(0.25)
    d = result.to_dict()
    assert d["rows_per_s"] == 2000 and d["rows_per_s_per_node"] == 1000
    assert d["cost_per_million_rows"] == 0.25
    assert d["commit_latency_ms"] == {"p50": 250.0, "p99": 250.0}


def test_aborted_commits_are_retried_and_counted() -> None:
    clock = FakeClock()
    first_try_aborts = FakeCommitter(
        clock, fail=lambda key, attempt: gexc.Aborted("conflict") if attempt == 1 else None
    )
    sleeps: list[float] = []
    result = run_step(
        first_try_aborts,
        BENCH_TABLE,
        rows(1000),
        concurrency=2,
        batch_rows=250,
        clock=clock,
        sleep=sleeps.append,
    )
    assert (result.commits, result.aborted, result.retries) == (4, 4, 4)
    assert len(sleeps) == 4 and all(0 <= s <= 0.2 for s in sleeps)
    assert sorted(k for b in first_try_aborts.batches for k in b) == rows(1000)["Id"].to_pylist()


def test_other_transient_errors_are_retried_but_not_counted_as_aborted() -> None:
    clock = FakeClock()
    committer = FakeCommitter(
        clock, fail=lambda k, a: gexc.ServiceUnavailable("busy") if a == 1 else None
    )
    result = run_step(
        committer,
        BENCH_TABLE,
        rows(500),
        concurrency=1,
        batch_rows=500,
        clock=clock,
        sleep=lambda s: None,
    )
    assert (result.commits, result.aborted, result.retries) == (1, 0, 1)


def test_endless_aborts_give_up_after_max_retry_time() -> None:
    clock = FakeClock()
    committer = FakeCommitter(clock, duration=1.0, fail=lambda k, a: gexc.Aborted("always"))
    with pytest.raises(CommitError, match="kept failing for 5s"):
        run_step(
            committer,
            BENCH_TABLE,
            rows(10),
            concurrency=1,
            batch_rows=10,
            clock=clock,
            sleep=lambda s: None,
            max_retry_time=5,
        )


def test_permanent_errors_propagate() -> None:
    clock = FakeClock()
    committer = FakeCommitter(clock, fail=lambda k, a: gexc.InvalidArgument("bad"))
    with pytest.raises(gexc.InvalidArgument):
        run_step(committer, BENCH_TABLE, rows(10), concurrency=2, batch_rows=5, clock=clock)


def step(c: int, rows_per_s: float) -> StepResult:
    return StepResult(
        concurrency=c,
        rows=1000,
        commits=2,
        elapsed_s=1000 / rows_per_s,
        latencies_s=[0.01, 0.02],
        node_count=1,
        node_hour_price=0.9,
    )


def test_report_peak_knee_render_and_dict() -> None:
    report = BenchReport(
        table=BENCH_TABLE,
        rows_per_step=1000,
        batch_rows=500,
        node_count=1,
        node_hour_price=0.9,
        steps=[step(1, 1000), step(2, 1900), step(4, 2000), step(8, 1950)],
        table_rows=4000,
    )
    assert report.peak is not None and report.peak.concurrency == 4
    assert report.knee is not None and report.knee.concurrency == 2  # 1900 >= 90% of 2000
    d = report.to_dict()
    assert d["peak"] == {"concurrency": 4, "rows_per_s": 2000.0}
    assert d["recommended_concurrency"] == 2
    assert [s["concurrency"] for s in d["steps"]] == [1, 2, 4, 8]
    assert d["rows_written"] == 4000 and d["table_rows"] == 4000
    text = report.render()
    lines = text.splitlines()
    assert lines[1].split() == [
        "concurrency",
        "rows",
        "commits",
        "seconds",
        "rows/s",
        "rows/s/node",
        "p50",
        "ms",
        "p99",
        "ms",
        "aborted",
        "retries",
        "$/M",
        "rows",
    ]
    assert len(lines) == 2 + 4 + 2
    assert "peak 2,000 rows/s at concurrency 4" in text and "(`concurrency=2`)" in text
    assert "rows in table: 4,000 of 4,000 written (ok)" in text


def test_report_without_nodes_has_no_node_columns() -> None:
    s = StepResult(concurrency=1, rows=10, commits=1, elapsed_s=1.0)
    text = BenchReport(table=BENCH_TABLE, rows_per_step=10, batch_rows=10, steps=[s]).render()
    assert "rows/s/node" not in text and "$/M" not in text
    assert s.to_dict()["cost_per_million_rows"] is None


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"batch_rows": 20_000}, "100,000 mutations"),
        ({"steps": [1, 0]}, "at least 1"),
        ({"table": "drop table x"}, "not a table name"),
        ({"node_count": 0}, "node count"),
        ({"payload_bytes": -5}, "^payload bytes must be >= 0, not -5$"),
        ({"payload_bytes": 1 << 20, "rows_per_step": 1 << 12}, "under 2 GiB"),
    ],
)
def test_bad_arguments(kw: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"rows_per_step": 10, "max_concurrency": 2, **kw}
    with pytest.raises(ConfigError, match=message):
        run_bench(object(), **args)


# --------------------------------------------------------------------------------------------
# against the emulator


def table_names(database: Any) -> set[str]:
    with database.snapshot() as snap:
        return {
            r[0]
            for r in snap.execute_sql(
                "select table_name from information_schema.tables where table_schema = ''"
            )
        }


def test_bench_on_the_emulator(make_database: Callable[..., Any]) -> None:
    database = make_database([])
    seen: list[int] = []
    report = run_bench(
        database,
        rows_per_step=2000,
        max_concurrency=4,
        batch_rows=250,
        node_count=1,
        node_hour_price=0.9,
        payload_bytes=50,
        seed=3,
        progress=lambda s: seen.append(s.concurrency),
    )
    assert [s.concurrency for s in report.steps] == seen == [1, 2, 4]
    for s in report.steps:
        assert s.rows == 2000 and s.commits == 8 and len(s.latencies_s) == 8
        assert s.elapsed_s > 0 and s.retries >= s.aborted >= 0
        assert s.cost_per_million_rows is not None
    assert report.table_rows == report.rows_written == 6000
    assert report.dropped and BENCH_TABLE not in table_names(database)
    assert "rows in table: 6,000 of 6,000 written (ok)" in report.render()
    assert report.to_dict()["recommended_concurrency"] in (1, 2, 4)


def test_keep_leaves_the_table_and_the_next_run_replaces_it(
    make_database: Callable[..., Any],
) -> None:
    from google.cloud.spanner_v1 import KeySet

    database = make_database([])
    report = run_bench(
        database,
        rows_per_step=300,
        max_concurrency=2,
        batch_rows=100,
        warmup_rows=100,
        keep=True,
        seed=5,
    )
    assert not report.dropped and report.table_rows == 700 and report.warmup_rows == 100
    with database.snapshot() as snap:
        by_step: dict[int, int] = {}
        for (st,) in snap.read(BENCH_TABLE, ["Step"], KeySet(all_=True)):
            by_step[st] = by_step.get(st, 0) + 1
    assert by_step == {0: 100, 1: 300, 2: 300}

    again = run_bench(database, rows_per_step=100, max_concurrency=1, batch_rows=100)
    assert again.table_rows == 100 and again.dropped
    assert BENCH_TABLE not in table_names(database)


def test_refuses_to_drop_a_table_that_is_not_a_bench_table(
    make_database: Callable[..., Any],
) -> None:
    database = make_database(["CREATE TABLE Precious (Id INT64 NOT NULL) PRIMARY KEY (Id)"])
    with pytest.raises(ConfigError, match="exists and is not a bench table"):
        run_bench(database, rows_per_step=10, max_concurrency=1, table="Precious")
    assert "Precious" in table_names(database)


def test_the_committers_notes_reach_the_bench_report(make_database: Callable[..., Any]) -> None:
    """A client without the internals the fast commit path uses: bench says so."""
    from google.cloud.spanner_v1.database import Database

    from loader.commit import SpannerCommitter

    database = make_database([])
    with pytest.MonkeyPatch.context() as m:
        m.delattr(Database, "metadata_with_request_id", raising=False)
        committer = SpannerCommitter(database)  # it checks the client's internals here
    report = run_bench(
        database,
        rows_per_step=200,
        max_concurrency=1,
        steps=[1],
        batch_rows=100,
        seed=1,
        committer=committer,
    )
    assert report.notes and "public batch API" in report.notes[0]
    assert report.to_dict()["notes"] == report.notes
    assert report.render().splitlines()[-1] == f"note: {report.notes[0]}"
