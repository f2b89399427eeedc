"""The job-wide limits on the Beam path (loader/beam/limits.py), against the emulator.

``max_bad_rows`` is enforced before anything is committed (the read step's rejects are a side
input of the commit step), the throttle is shared between the workers that commit at once
(one worker's commits checked on a fake clock), and the report carries the commit statistics
the single-process report has. The pipeline tests run on the DirectRunner when apache-beam is
installed (scripts/beam_check.sh); the rest run everywhere.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_beam, read_table, small_load_config
from test_throttle import FakeClock, window_excess

from loader import load
from loader.beam import limits, work
from loader.commit import SpannerCommitter
from loader.errors import ConfigError, ExitCode, TooManyBadRows
from loader.plan import plan_ranges
from loader.resume.stores import SpannerStateStore
from loader.schema import read_schemas
from loader.source import expand_sources
from loader.throttle import Throttle

DDL = """
CREATE TABLE Notes (
  Id INT64 NOT NULL,
  Tag STRING(20),
  Body STRING(MAX),
) PRIMARY KEY (Id);
"""


def _write(tmp_path: Path, rows: int = 120, bad: tuple[int, ...] = ()) -> Path:
    """One CSV file of ``rows`` rows; the rows numbered in ``bad`` have a non-number Id."""
    lines = ["Id,Tag,Body\n"]
    for i in range(rows):
        key = f"bad{i}" if i in bad else str((i * 37) % rows)
        lines.append(f'{key},t{i % 5},"body {i}"\n')
    path = tmp_path / "notes.csv"
    path.write_text("".join(lines))
    return path


def _ids(db: Any) -> list[int]:
    return [r[0] for r in read_table(db, "Notes", ["Id"])]


def _markers(db: Any) -> int:
    with db.snapshot() as snap:
        rows = list(
            snap.execute_sql(
                "SELECT COUNT(*) FROM SpannerLoaderState WHERE STARTS_WITH(Part, 'beam/') "
                "AND Part NOT IN ('beam/bounds', 'beam/sources', 'beam/job', 'beam/runs')"
            )
        )
    return int(rows[0][0])


# -- the throttle's share ---------------------------------------------------------------------


def test_committers_are_the_key_ranges_bounded_by_the_worker_processes() -> None:
    assert limits.committers("DirectRunner", (), 8) == 1  # one worker unless told otherwise
    assert limits.committers("DirectRunner", [("direct_num_workers", "3")], 8) == 3
    assert limits.committers("DirectRunner", [("direct_num_workers", "3")], 2) == 2
    # Dataflow runs one SDK process per vCPU of a worker VM: without the machine type (or the
    # experiment that makes it one per VM) the processes are unknown and every range counts
    assert limits.committers("DataflowRunner", (), 12) == 12
    assert limits.committers("DataflowRunner", [("num_workers", "4")], 12) == 12
    two_cpus = ("worker_machine_type", "n1-standard-2")
    assert limits.committers("DataflowRunner", [("num_workers", "4"), two_cpus], 12) == 8
    opts = [("max_num_workers", "5"), ("num_workers", "2"), two_cpus]
    assert limits.committers("DataflowRunner", opts, 12) == 10  # autoscaling's ceiling counts
    opts = [
        ("max_num_workers", "3"),
        ("experiments", "use_runner_v2,no_use_multiple_sdk_containers"),
    ]
    assert limits.committers("DataflowRunner", opts, 12) == 3
    assert limits.committers("FlinkRunner", [("num_workers", "2")], 12) == 2
    opts = [("num_workers", "2"), ("sdk_worker_parallelism", "4")]
    assert limits.committers("FlinkRunner", opts, 12) == 8
    assert [limits.machine_vcpus(m) for m in ("n2-highmem-8", "custom-6-23040", "e2-medium")] == [
        8,
        6,
        None,
    ]
    with pytest.raises(ConfigError, match="max_num_workers='many' is not a whole number"):
        limits.committers("DataflowRunner", [("max_num_workers", "many")], 12)


def test_each_worker_gets_its_share_of_the_job_limits(
    make_database: Callable[..., Any],
) -> None:
    db = make_database([DDL])
    config = small_load_config(db, "Notes", ["x.csv"], max_rows_per_second=100.0)
    assert limits.share(config, 4) == (25.0, None)
    both = small_load_config(
        db, "Notes", ["x.csv"], max_rows_per_second=90.0, max_bytes_per_second=3000.0
    )
    assert limits.share(both, 3) == (30.0, 1000.0)
    both = dataclasses.replace(both, runner="DirectRunner")
    note = limits.share_note("Notes", both, 3, 8)
    assert note == (
        "Notes: throttle shared by 3 worker process(es) committing at once (of 8 key "
        "range(s)): 30 rows/s and 1,000 bytes/s each"
    )
    remote = dataclasses.replace(both, runner="DataflowRunner")
    assert "do not bound the worker processes" in limits.share_note("Notes", remote, 8, 8)


def test_one_workers_commits_respect_its_share_on_a_fake_clock(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """The job allows 40 rows/s shared by 4 workers: one worker's key ranges, committed one
    after the other through its brakes, never pass more than 10 rows/s (+ one second's
    burst) over any window, and took the (fake) time that rate needs."""
    db = make_database([DDL])
    source = _write(tmp_path, rows=120)
    config = small_load_config(db, "Notes", [source], max_rows_per_second=40.0, batch_rows=7)
    schema = read_schemas(db, ["Notes"])["Notes"]
    sources, _ = expand_sources([str(source)])
    blocks = [
        b
        for rng in plan_ranges(sources, config.dialect, target=config.range_size)
        for b, _ in work.read_blocks_of(0, rng, schema, config)
        if b is not None
    ]
    bounds = work.boundaries([work.sample_keys(b, schema, 1) for b in blocks], schema, 3)
    by_range: dict[int, list[work.Block]] = {}
    for b in blocks:
        for r, part in work.split_block(b, bounds, schema):
            by_range.setdefault(r, []).append(part)
    clock = FakeClock()
    key = ("test-share", str(tmp_path))
    try:
        throttle, limiter = limits.worker_brakes(key, config, 4, clock=clock, sleep=clock.sleep)
        assert limits.worker_brakes(key, config, 4) == (throttle, limiter)  # one per process
        assert isinstance(throttle, Throttle) and throttle.rows is not None
        assert throttle.rows.rate == 10.0
        admitted: list[tuple[float, float]] = []
        real_acquire = throttle.acquire

        def acquire(rows: int, nbytes: int, *, stoppable: bool = True) -> float:
            waited = real_acquire(rows, nbytes, stoppable=stoppable)
            admitted.append((clock(), float(rows)))
            return waited

        throttle.acquire = acquire  # type: ignore[method-assign]
        store = SpannerStateStore(db)
        store.ensure()
        t0 = clock()
        written = 0
        for r in sorted(by_range):
            res = work.commit_range(
                r,
                by_range[r],
                schema=schema,
                config=config,
                sources=(str(source),),
                committer=SpannerCommitter(db),
                store=store,
                run_id="share",
                throttle=throttle,
                limiter=limiter,
            )
            written += res.rows_written
            assert len(res.latencies) == res.commits > 0
    finally:
        limits.forget_brakes(key)
    assert written == 120 and sorted(_ids(db)) == list(range(120))
    assert sum(n for _, n in admitted) == 120
    assert window_excess(admitted, 10.0, 10.0, oversized=False) <= 1e-9
    # 120 rows at 10 rows/s, the first second's burst at once: at least 11 s of fake time
    assert clock() - t0 >= (120 - 10) / 10.0 - 1e-9
    assert limiter.stats().ok == len(admitted)  # every commit went through the limiter


def test_commit_statistics_merge_across_key_ranges() -> None:
    a = limits.range_record(0, [10, 20], [0.010, 0.030], 500, 2.0)
    b = limits.range_record(1, [30], [0.020], 250, 1.0)
    empty = limits.range_record(2, [], [], 0, None)
    total = limits.merge(json.loads(json.dumps(r)) for r in (a, b, empty))
    assert total.mutations == [10, 20, 30]
    assert total.latencies_s == [0.010, 0.030, 0.020]
    assert total.bytes == 750 and total.concurrency == 1.5


# -- on the DirectRunner ----------------------------------------------------------------------


@needs_beam
def test_too_many_bad_rows_commit_nothing(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    source = _write(tmp_path, rows=120, bad=(3, 50, 97))
    rejects = tmp_path / "rejects.jsonl"
    config = small_load_config(
        db,
        "Notes",
        [source],
        runner="DirectRunner",
        key_ranges=3,
        range_size=800,
        max_bad_rows=2,
        rejects=rejects,
    )
    with pytest.raises(TooManyBadRows) as caught:
        load(config)
    e = caught.value
    assert e.exit_code == ExitCode.TOO_MANY_BAD_ROWS
    assert str(e).startswith("more than 2 bad rows; the one past the limit, ")
    assert "notes.csv:" in str(e)
    # a tryout: the hint said a fixed file needs `restart=True`; nothing of the job being
    # committed, the same command loads it
    assert "fix the data and run the same command again" in (e.hint or "")
    assert "restart" not in (e.hint or "") and str(rejects) in (e.hint or "")
    assert _ids(db) == [] and _markers(db) == 0  # nothing committed, no batch marker either
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert sorted(d["line"] for d in lines) == [5, 52, 99]  # every one, with file and line
    assert all(d["source"].endswith("notes.csv") and d["reason"] for d in lines)
    report = e.report
    assert report.status == "too_many_bad_rows" and report.rows_rejected == 3
    assert report.tables[0].rows_written == 0
    assert any("nothing committed by this run" in n for n in report.notes)
    _write(tmp_path, rows=120)  # the fix: the same file, every Id a number
    fixed = load(config)
    assert fixed.exit_code == ExitCode.OK, fixed.error
    assert len(_ids(db)) == 120


@needs_beam
def test_a_resume_over_the_limit_commits_nothing_more(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first run within the limit fails after one key range committed; run again with a
    lower ``max_bad_rows``, the job commits nothing more, says what stays, exits 4."""
    db = make_database([DDL])
    source = _write(tmp_path, rows=120, bad=(7,))
    common: dict[str, Any] = dict(runner="DirectRunner", key_ranges=3, range_size=800)
    fault = tmp_path / "fault"
    monkeypatch.setenv("SPANNER_LOADER_BEAM_FAULT", str(fault))
    with pytest.raises(Exception, match="injected fault"):
        load(small_load_config(db, "Notes", [source], max_bad_rows=5, **common))
    landed = _ids(db)
    assert 0 < len(landed) < 119
    with pytest.raises(TooManyBadRows) as caught:
        load(small_load_config(db, "Notes", [source], max_bad_rows=0, **common))
    assert _ids(db) == landed
    assert any("an earlier run of this job committed stay" in n for n in caught.value.report.notes)
    # within the limit again, the job resumes: the earlier batches are skipped, not rewritten
    report = load(small_load_config(db, "Notes", [source], max_bad_rows=5, **common))
    t = report.tables[0]
    assert len(_ids(db)) == 119 and t.rows_skipped == len(landed)
    assert t.rows_written == 119 - len(landed) and report.exit_code == ExitCode.REJECTED_ROWS


@needs_beam
def test_the_report_carries_commit_latencies_and_the_throttle_share(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    source = _write(tmp_path, rows=120)
    config = small_load_config(
        db,
        "Notes",
        [source],
        runner="DirectRunner",
        key_ranges=3,
        range_size=800,
        batch_rows=20,
        max_rows_per_second=1e6,
    )
    report = load(config)
    t = report.tables[0]
    assert t.rows_written == 120 and t.commits >= 6
    assert len(t.latencies_s) == t.commits and all(x > 0 for x in t.latencies_s)
    assert t.bytes > 0 and t.concurrency is not None and t.concurrency >= 1
    d = report.to_dict()["tables"][0]
    assert d["commit_latency_ms"]["p50"] > 0
    assert d["commit_latency_ms"]["p99"] >= d["commit_latency_ms"]["p95"]
    assert "p50 ms" in report.render()
    assert any("throttle shared by 1 worker process(es)" in n for n in report.notes)


@needs_beam
def test_cli_over_the_limit_is_one_line_and_exit_4(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    import subprocess
    import sys

    db = make_database([DDL])
    source = _write(tmp_path, rows=60, bad=(1, 2))
    args = ["load", str(source), "--table", "Notes", "--emulator", "--database", db.database_id]
    args += ["--runner", "DirectRunner", "--max-bad-rows", "1", "--json"]
    args += ["--rejects", str(tmp_path / "rejects.jsonl"), "--max-rows-per-second", "500"]
    p = subprocess.run([sys.executable, "-m", "loader", *args], capture_output=True, text=True)
    assert p.returncode == 4, p.stderr
    err = [x for x in p.stderr.splitlines() if x.startswith(("error:", "hint:"))]
    assert err[0].startswith("error: more than 1 bad row; the one past the limit, ")
    assert "--max-bad-rows" in err[1] and "Traceback" not in p.stderr
    report = json.loads(p.stdout)
    assert report["status"] == "too_many_bad_rows" and report["rows_written"] == 0
    assert _ids(db) == []


@needs_beam
def test_fixing_the_data_after_a_run_over_the_limit_loads_it(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """The usual next step after exit 4: fix the file, run the same command (the same job)
    again. The stopped run committed nothing, so the fixed file is simply loaded."""
    db = make_database([DDL])
    source = _write(tmp_path, rows=90, bad=(10, 20))
    common: dict[str, Any] = dict(runner="DirectRunner", key_ranges=2, range_size=800)
    with pytest.raises(TooManyBadRows):
        load(small_load_config(db, "Notes", [source], max_bad_rows=1, **common))
    _write(tmp_path, rows=90)
    report = load(small_load_config(db, "Notes", [source], max_bad_rows=1, **common))
    assert report.exit_code == ExitCode.OK and sorted(_ids(db)) == list(range(90))


@needs_beam
def test_a_resume_over_changed_sources_is_refused(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch markers name batches by position: once an earlier run committed some, a run over
    other data would skip rows. It is refused with the restart hint; restart loads it all."""
    from loader.errors import StateError

    db = make_database([DDL])
    source = _write(tmp_path, rows=90)
    common: dict[str, Any] = dict(runner="DirectRunner", key_ranges=3, range_size=800)
    monkeypatch.setenv("SPANNER_LOADER_BEAM_FAULT", str(tmp_path / "fault"))
    with pytest.raises(Exception, match="injected fault"):
        load(small_load_config(db, "Notes", [source], **common))
    assert _markers(db) > 0
    _write(tmp_path, rows=100)
    with pytest.raises(StateError, match=r"source .*notes.csv changed \(size") as caught:
        load(small_load_config(db, "Notes", [source], **common))
    assert "committed" in str(caught.value) and "`restart=True`" in (caught.value.hint or "")
    report = load(small_load_config(db, "Notes", [source], restart=True, **common))
    assert report.exit_code == ExitCode.OK and sorted(_ids(db)) == list(range(100))


@needs_beam
def test_a_worker_count_that_is_no_number_stops_before_connecting(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    opts = (("max_num_workers", "lots"), ("temp_location", str(tmp_path)))
    config = small_load_config(
        db, "Notes", [_write(tmp_path)], runner="DataflowRunner", beam_options=opts
    )
    # Beam's own parser refuses it, before anything is planned or connected
    with pytest.raises(ConfigError, match="Beam refuses --beam-option max_num_workers=lots") as e:
        load(config)
    assert not any("range" in n for n in e.value.report.notes)  # nothing planned
