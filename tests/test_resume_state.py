"""What a checkpoint carries across a stop: the bad-row count (--max-bad-rows covers the whole
job, not each run) and what the report says about each source. In-process loads against the
session's emulator; the stop is a graceful interrupt, or a crash (a commit that raises)."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

import pytest
from conftest import read_table, small_load_config

from loader import LoadConfig, load
from loader.commit import SpannerCommitter
from loader.errors import (
    CommitError,
    ExitCode,
    Interrupted,
    LoaderError,
    SchemaError,
    StateError,
    TooManyBadRows,
)
from loader.report import LoadReport

DDL = "CREATE TABLE Events (Id INT64 NOT NULL, Payload STRING(MAX)) PRIMARY KEY (Id)"
ROWS = 3000


def payload(i: int) -> str:
    return f"event {i:05d} " + "x" * (i % 50)


def write_csv(path: Path, ids: Sequence[int], bad: frozenset[int] = frozenset()) -> Path:
    path.write_text(
        "Id,Payload\n" + "".join(f"{'x' if i in bad else ''}{i},{payload(i)}\n" for i in ids)
    )
    return path


def config(db: Any, sources: Sequence[Path], **kw: Any) -> LoadConfig:
    cfg: LoadConfig = small_load_config(db, "Events", sources, **kw)
    return cfg


class CrashAfter:
    """A committer that dies (a non-Spanner error, like the process going away) at the first
    commit after ``rows`` rows went through."""

    def __init__(self, db: Any, rows: int) -> None:
        self.inner, self.rows, self.written = SpannerCommitter(db), rows, 0

    def commit(self, mutations: Any) -> None:
        from google.cloud.spanner_v1 import Mutation

        if self.written >= self.rows:
            raise RuntimeError("killed")
        self.inner.commit(mutations)
        pb = Mutation.pb().FromString(mutations[0])
        self.written += len(getattr(pb, pb.WhichOneof("operation")).values)

    def existing_keys(self, table: str, keys: Any) -> Any:
        return self.inner.existing_keys(table, keys)


def stop_partway(
    cfg: LoadConfig, db: Any, how: str, rows: int, expected: type[LoaderError]
) -> LoadReport:
    """Run ``cfg`` until about ``rows`` rows are written, then stop it ``how``."""
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.rows_written >= rows:
            stop.set()

    committer: Optional[CrashAfter] = None
    if how == "crash":
        committer = CrashAfter(db, rows)
    with pytest.raises(expected) as e:
        load(
            cfg,
            database=db,
            committer=committer,
            progress=progress if how == "interrupt" else None,
            stop=stop,
        )
    report: LoadReport = e.value.report  # type: ignore[attr-defined]
    return report


def three_sources(tmp_path: Path) -> list[Path]:
    """Ids 0-999 in a.csv, 1000-1999 in b.csv, 2000-2999 in c.csv."""
    return [
        write_csv(tmp_path / f"{name}.csv", range(1000 * i, 1000 * (i + 1)))
        for i, name in enumerate("abc")
    ]


def statuses_hold(statuses: list[str], db: Any) -> set[int]:
    """What the report calls done (of :func:`three_sources`) is in the table, what it calls
    not started is not; the ids in the table."""
    ids = {r[0] for r in read_table(db, "Events", ["Id"])}
    for i, status in enumerate(statuses):
        rows = set(range(1000 * i, 1000 * (i + 1)))
        if status == "done":
            assert rows <= ids, statuses
        elif status == "not_started":
            assert not ids & rows, statuses
    return ids


def carried(report: LoadReport) -> int:
    for n in report.notes:
        m = re.search(r"; (\d+) row\(s\) rejected before count toward `max_bad_rows`", n)
        if m:
            return int(m.group(1))
    return 0


@pytest.mark.parametrize(
    "how,error", [("interrupt", Interrupted), ("crash", CommitError)], ids=["sigint", "crash"]
)
def test_bad_rows_before_a_stop_count_after_the_resume(
    make_database: Any, tmp_path: Path, how: str, error: type[LoaderError]
) -> None:
    db = make_database([DDL])
    bad = frozenset({300, 400, 2600, 2700})
    src = write_csv(tmp_path / "events.csv", range(ROWS), bad)
    cfg = config(db, [src], max_bad_rows=3, rejects=tmp_path / "rejects.jsonl")
    first = stop_partway(cfg, db, how, 1500, error)
    assert first.rows_rejected == 2  # rows 300 and 400

    # a fresh allowance of 3 would let the last two through; the job's budget does not
    with pytest.raises(TooManyBadRows) as e:
        load(cfg, database=db)
    assert "more than 3 bad rows (2 of them by an earlier run of this job)" in str(e.value)

    # with room for all four it finishes; the four are counted once each
    report = load(LoadConfig(**{**cfg.__dict__, "max_bad_rows": 4}), database=db)
    assert report.exit_code == ExitCode.REJECTED_ROWS
    assert carried(report) + report.rows_rejected == 4
    good = [(i, payload(i)) for i in range(ROWS) if i not in bad]
    assert read_table(db, "Events", ["Id", "Payload"]) == good


def test_rejects_of_a_finished_resume_come_from_before_the_stop(
    make_database: Any, tmp_path: Path
) -> None:
    """Only early bad rows: the resumed run finds none itself, and still exits 3."""
    db = make_database([DDL])
    bad = frozenset({100, 200})
    src = write_csv(tmp_path / "events.csv", range(ROWS), bad)
    cfg = config(db, [src], max_bad_rows=2, rejects=tmp_path / "rejects.jsonl")
    stop_partway(cfg, db, "interrupt", 1500, Interrupted)
    report = load(cfg, database=db)
    assert report.rows_rejected == 0 and carried(report) == 2
    assert report.exit_code == ExitCode.REJECTED_ROWS
    again = load(cfg, database=db)  # the finished job run again: a no-op, its rejects told
    assert again.exit_code == ExitCode.REJECTED_ROWS and again.rows_written == 0
    assert again.rows_rejected_before == 2 and report.rows_rejected_before == 2


@pytest.mark.parametrize(
    "how,error", [("interrupt", Interrupted), ("crash", CommitError)], ids=["sigint", "crash"]
)
def test_report_says_which_sources_are_done_partial_or_not_started(
    make_database: Any, tmp_path: Path, how: str, error: type[LoaderError]
) -> None:
    db = make_database([DDL])
    parts = three_sources(tmp_path)
    cfg = config(db, parts)
    first = stop_partway(cfg, db, how, 1300, error)
    statuses = [s.status for s in first.tables[0].sources]
    # A graceful stop finishes the commits in flight but starts none of the flush's queued
    # batches, and a crash leaves its flush half done: either way a.csv's last rows may share
    # that flush, and then a.csv is only "partial" (its batches landed or not: the markers
    # tell on resume).
    assert statuses[1:] == ["partial", "not_started"] or statuses == [
        "partial",
        "not_started",
        "not_started",
    ], statuses
    ids = statuses_hold(statuses, db)
    assert ids & set(range(1000, 2000))

    resumed = load(cfg, database=db)
    assert [s.status for s in resumed.tables[0].sources] == ["done", "done", "done"]
    assert [s.rows for s in resumed.tables[0].sources][0] == 0  # a.csv was not read again
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


class CrashAtKey:
    """A committer that dies at the first commit holding an Id of ``key`` or more; the commits
    before it land."""

    def __init__(self, db: Any, key: int) -> None:
        self.inner, self.key = SpannerCommitter(db), key

    def commit(self, mutations: Any) -> None:
        from google.cloud.spanner_v1 import Mutation

        pb = Mutation.pb().FromString(mutations[0])
        ids = [
            int(v.values[0].string_value) for v in getattr(pb, pb.WhichOneof("operation")).values
        ]
        if max(ids) >= self.key:
            raise RuntimeError("killed")
        self.inner.commit(mutations)

    def existing_keys(self, table: str, keys: Any) -> Any:
        return self.inner.existing_keys(table, keys)


@pytest.mark.parametrize("key", [1010, 1120, 1240, 1560])
def test_a_source_reported_not_started_has_no_row_in_the_table(
    make_database: Any, tmp_path: Path, key: int
) -> None:
    """A crash found by a later batch's submit of the same flush, not by the next flush's
    drain: the flush was in flight, and its sources are partial (CI caught this once)."""
    db = make_database([DDL])
    parts = three_sources(tmp_path)
    cfg = config(db, parts)
    with pytest.raises(CommitError) as e:
        load(cfg, database=db, committer=CrashAtKey(db, key))
    report: LoadReport = e.value.report  # type: ignore[attr-defined]
    statuses = [s.status for s in report.tables[0].sources]
    ids = statuses_hold(statuses, db)
    assert ids and max(ids) < key
    resumed = load(cfg, database=db)
    assert [s.status for s in resumed.tables[0].sources] == ["done", "done", "done"]
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


def test_sources_still_in_the_buffer_at_a_stop_are_not_done(
    make_database: Any, tmp_path: Path
) -> None:
    """Read is not loaded: a source whose rows were all still buffered when the load stopped
    (a graceful stop commits what was flushed, not the buffer) is reported not started."""
    db = make_database([DDL])
    parts = [
        write_csv(tmp_path / "a.csv", range(0, 1000)),
        write_csv(tmp_path / "b.csv", range(1000, 2000)),
    ]
    cfg = config(db, parts, buffer_size=8 << 20)  # room for both files: no flush before the end
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.rows_read > 1000:  # reading b.csv
            stop.set()

    with pytest.raises(Interrupted) as e:
        load(cfg, database=db, progress=progress, stop=stop)
    report: LoadReport = e.value.report  # type: ignore[attr-defined]
    assert [s.status for s in report.tables[0].sources] == ["not_started", "not_started"]
    assert read_table(db, "Events", ["Id"]) == []
    resumed = load(cfg, database=db)
    assert [s.status for s in resumed.tables[0].sources] == ["done", "done"]
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(2000)]


class CrashDuringBisection:
    """Insert mode: lets ``allowed`` commits through after the first one Spanner refuses (the
    bisection isolating the bad row, or with ``reads`` the pieces around the rows a read of
    the keys found), then dies."""

    def __init__(self, db: Any, allowed: int, reads: bool = True) -> None:
        self.inner, self.allowed, self.refused = SpannerCommitter(db), allowed, False
        self.reads = reads

    def commit(self, mutations: Any) -> None:
        from google.api_core import exceptions as gexc

        if self.refused:
            if self.allowed == 0:
                raise RuntimeError("killed")
            self.allowed -= 1
        try:
            self.inner.commit(mutations)
        except gexc.AlreadyExists:
            self.refused = True
            raise

    def existing_keys(self, table: str, keys: Any) -> Any:
        if not self.reads:  # the read fails: the batch is bisected by commits
            from google.api_core import exceptions as gexc

            raise gexc.PermissionDenied("no read access")
        return self.inner.existing_keys(table, keys)


# with the read, the rows around the refused one go in one commit: a crash before it is the
# crash mid-isolation
@pytest.mark.parametrize("allowed,reads", [(0, True), (1, False), (2, False), (4, False)])
def test_insert_crash_mid_bisection_resumes_without_false_duplicates(
    make_database: Any, tmp_path: Path, allowed: int, reads: bool
) -> None:
    db = make_database([DDL])
    with db.batch() as b:  # a key the source also has: its one true duplicate
        b.insert("Events", ["Id", "Payload"], [[120, "already there"]])
    src = write_csv(tmp_path / "events.csv", range(300))
    rejects = tmp_path / "rejects.jsonl"
    cfg = config(db, [src], mode="insert", buffer_size=8 << 20, max_bad_rows=10, rejects=rejects)
    with pytest.raises(CommitError):
        load(cfg, database=db, committer=CrashDuringBisection(db, allowed, reads))
    rejects.unlink(missing_ok=True)

    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.REJECTED_ROWS
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [r["record"] for r in lines] == [121], lines  # row 120, not rows committed before
    assert "ALREADY_EXISTS" in lines[0]["reason"]
    expected = [(i, "already there" if i == 120 else payload(i)) for i in range(300)]
    assert read_table(db, "Events", ["Id", "Payload"]) == expected


def test_a_changed_local_file_is_named_with_what_changed() -> None:
    """#16 defect 16: a local file has no generation; the message says what did change."""
    from loader.resume.checkpoint import identity_change as _identity_change

    old = {"uri": "/d/a.csv", "kind": "file", "generation": None, "size": 120, "mtime_ns": 0}
    new = {**old, "size": 1_800, "mtime_ns": 1_700_000_000_500_000_000}
    text = _identity_change(old, new)
    assert text == (
        "size 120 -> 1,800, modified 1970-01-01 00:00:00.000000000 UTC -> "
        "2023-11-14 22:13:20.500000000 UTC"
    )
    # a touch that moved the time by less than a microsecond still shows a difference
    close = {**new, "mtime_ns": new["mtime_ns"] + 300}
    assert _identity_change(new, close) == (
        "modified 2023-11-14 22:13:20.500000000 UTC -> 2023-11-14 22:13:20.500000300 UTC"
    )
    assert "generation" not in text and "None" not in text
    gcs = {"uri": "gs://b/a", "kind": "gcs", "generation": 5, "size": 9}
    assert _identity_change(gcs, {**gcs, "generation": 6}) == "generation 5 -> 6"


def _forget_batching_version(state: Path, version: Optional[int] = None) -> None:
    """Make the checkpoint look written by a loader from before BATCHING_VERSION 2 (or of
    ``version``)."""
    rows = json.loads(state.read_text())
    for key, value in rows.items():
        if key.endswith("\x1frun"):
            if version is None:
                value["layout"].pop("batching")
            else:
                value["layout"]["batching"] = version
    state.write_text(json.dumps(rows))


def test_a_flush_cut_before_the_mutation_count_changed_is_not_skipped_by_its_markers(
    make_database: Any, tmp_path: Path
) -> None:
    """Version 3 counts more mutations on some tables (a review: the batches of a flush
    interrupted under version 2 would be named by other rows)."""
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(ROWS))
    state = tmp_path / "state.json"
    upsert = config(db, [src], state_file=state, state=False)
    stop_partway(upsert, db, "crash", 1500, CommitError)
    _forget_batching_version(state, 2)
    report = load(upsert, database=db)
    assert any("cut by an earlier version of the loader" in n for n in report.notes), report.notes
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


def test_a_resume_across_a_change_of_batch_planning_never_skips_by_stale_markers(
    make_database: Any, tmp_path: Path
) -> None:
    """The batch markers of an interrupted flush name batches by number; a loader that cuts
    batches differently must not skip its own batches by them (rows would be lost)."""
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(ROWS))
    state = tmp_path / "state.json"
    upsert = config(db, [src], state_file=state, state=False)
    stop_partway(upsert, db, "crash", 1500, CommitError)
    _forget_batching_version(state)
    report = load(upsert, database=db)
    assert any("cut by an earlier version of the loader" in n for n in report.notes), report.notes
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]

    db2 = make_database([DDL])
    state2 = tmp_path / "state2.json"
    insert = config(db2, [src], state_file=state2, state=False, mode="insert")
    stop_partway(insert, db2, "crash", 1500, CommitError)
    _forget_batching_version(state2)
    with pytest.raises(StateError, match="earlier version of the loader") as e:
        load(insert, database=db2)
    assert e.value.hint is not None and "`mode='upsert'`" in e.value.hint
    # the way out the hint gives: the same job in upsert mode (a job of its own) loads it all
    load(LoadConfig(**{**insert.__dict__, "mode": "upsert"}), database=db2)
    assert read_table(db2, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


def test_a_stop_over_max_bad_rows_before_any_commit_says_the_fixed_file_just_loads(
    make_database: Any, tmp_path: Path
) -> None:
    """The hint said a fixed file runs again with `restart=True`; nothing being committed,
    the same command loads it (two tryouts)."""
    db = make_database([DDL])
    src = write_csv(tmp_path / "e.csv", range(100), bad=frozenset({3}))
    cfg = config(db, [src], rejects=tmp_path / "r.jsonl")
    with pytest.raises(TooManyBadRows) as e:
        load(cfg, database=db)
    assert "fix the data and run the same command again (nothing of Events is committed" in (
        e.value.hint or ""
    )
    assert "restart" not in (e.value.hint or "")
    write_csv(src, range(100))
    assert load(cfg, database=db).rows_written == 100
    # once a flush is committed, a changed file is another matter: the hint says so
    bad_late = write_csv(tmp_path / "late.csv", range(1000, 3000), bad=frozenset({2900}))
    late = config(db, [bad_late], rejects=tmp_path / "r2.jsonl")
    with pytest.raises(TooManyBadRows) as e:
        load(late, database=db)
    assert "`restart=True`" in (e.value.hint or "")
    # a load without checkpoints, or a dry run, has nothing to restart (a tryout of
    # --no-state was told to run the fixed file again with --restart)
    for n, (kw, says) in enumerate(
        (
            ({"state": False}, "the load keeps no checkpoints: the same command loads the fixed"),
            ({"state": False, "mode": "insert"}, "again with `skip_existing=True`"),
            ({"dry_run": True}, "`max_bad_rows`"),
        )
    ):
        first = 5000 + 3000 * n
        rows = range(first, first + 2000)
        again = write_csv(tmp_path / f"again{n}.csv", rows, bad=frozenset({first + 1900}))
        cfg = config(db, [again], rejects=tmp_path / "r3.jsonl", **kw)
        with pytest.raises(TooManyBadRows) as e:
            load(cfg, database=db)
        assert says in (e.value.hint or "") and "restart" not in (e.value.hint or ""), kw


def test_a_resume_note_counts_batches_not_markers() -> None:
    """A batch committed in pieces has a marker per piece: the note counted the markers as
    batches (a tryout saw "56,053 batch(es)" where about 9k rows were committed)."""
    from loader.resume.checkpoint import _batches

    parts = ["b/00000003/00000000", "b/00000003/00000001/0-5", "b/00000003/00000001/7-9"]
    assert _batches(parts) == 2
    assert _batches({p: {} for p in parts}) == 2


def test_a_resume_after_a_throttled_run_names_the_throttle_that_cut_its_batches(
    make_database: Any, tmp_path: Path
) -> None:
    """--max-rows-per-second caps the batch rows at one second of rows: the resume note
    named --max-batch-rows 500, which the user never gave (a tryout)."""
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(ROWS))
    throttled = config(db, [src], batch_rows=None, max_rows_per_second=1000, buffer_size=1 << 20)
    stop_partway(throttled, db, "crash", 1000, CommitError)
    report = load(config(db, [src], batch_rows=None, buffer_size=1 << 20), database=db)
    (note,) = [n for n in report.notes if "batch options changed" in n]
    assert "(it had `batch_rows=1000`, one second of `max_rows_per_second=1000`)" in note, note
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]

    db2 = make_database([DDL])
    insert = config(
        db2, [src], batch_rows=None, max_rows_per_second=1000, buffer_size=1 << 20, mode="insert"
    )
    stop_partway(insert, db2, "crash", 1000, CommitError)
    with pytest.raises(StateError) as e:
        load(config(db2, [src], batch_rows=None, buffer_size=1 << 20, mode="insert"), database=db2)
    assert "values (`batch_rows=1000`, one second of `max_rows_per_second=1000`), or add" in (
        e.value.hint or ""
    )
    assert load(insert, database=db2).exit_code == ExitCode.OK  # its own values resume it
    assert read_table(db2, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


def test_a_block_size_that_follows_the_buffer_size_is_not_named_as_changed() -> None:
    """A resume note named `--block-size 1677721` beside the --buffer-size the user changed;
    the block size is derived from the buffer size unless given."""
    from loader.config import default_block_size
    from loader.resume.checkpoint import _follows_buffer

    def layout(buffer: int, block: int) -> dict[str, Any]:
        return {"buffer_size": buffer, "block_size": block}

    small, big = 64 << 20, 1 << 30
    derived = layout(small, default_block_size(small)), layout(big, default_block_size(big))
    assert _follows_buffer("block_size", *derived)
    assert not _follows_buffer("block_size", layout(small, 4 << 20), derived[1])  # given
    assert not _follows_buffer("buffer_size", *derived)
    assert not _follows_buffer("block_size", {"buffer_size": None}, derived[1])


def test_insert_with_skip_existing_resumes_across_changed_batch_options(
    make_database: Any, tmp_path: Path
) -> None:
    """Insert mode refuses to resume with other batch options (it would refuse the rows its
    interrupted run wrote); with ``skip_existing`` those rows are left out, so it resumes
    like upsert: exactly the source rows, nothing rejected, the rows written again counted
    as existing."""
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(ROWS))
    first = config(db, [src], mode="insert", skip_existing=True, buffer_size=1 << 20)
    stop_partway(first, db, "crash", 1000, CommitError)
    again = config(db, [src], mode="insert", skip_existing=True, batch_rows=70)
    report = load(again, database=db)
    assert report.exit_code == ExitCode.OK and report.rows_rejected == 0
    (note,) = [n for n in report.notes if "batch options changed" in n]
    assert note.endswith("its last buffer are sent again (those already in the table left out)")
    t = report.tables[0]
    assert t.rows_existing >= 1000 and t.rows_written + t.rows_existing == ROWS
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


@pytest.mark.parametrize("skip", [False, True])
def test_a_crash_after_a_commit_of_many_runs_resumes_by_its_one_marker(
    make_database: Any, tmp_path: Path, skip: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs between rows refused for their keys go in one commit with one marker for the
    rows they span, the refused ones between them counted: killed right after that commit
    (before the batch's own marker), the resumed run skips exactly those rows (nothing
    written twice, nothing lost), settles the refused rows outside them again, and counts
    each refused row once."""
    from loader.resume.stores import SpannerStateStore

    db = make_database([DDL])
    there = {0, 3, 10, 17, 24, 31, 38, 45, 49} | set(range(52, 300, 7))
    with db.batch() as b:
        b.insert("Events", ["Id", "Payload"], [[k, "already there"] for k in sorted(there)])
    src = write_csv(tmp_path / "events.csv", range(300))
    rejects = tmp_path / "rejects.jsonl"
    skips = {"skip_existing": True} if skip else {"max_bad_rows": 100, "rejects": rejects}
    cfg = config(db, [src], mode="insert", buffer_size=8 << 20, **skips)
    real_put = SpannerStateStore.put

    def killed(self: Any, run: str, table: str, part: str, value: Any) -> None:
        if part == "b/00000000/00000000":  # the first batch's own marker, after its runs
            raise RuntimeError("killed")
        real_put(self, run, table, part, value)

    monkeypatch.setattr(SpannerStateStore, "put", killed)
    with pytest.raises(Exception, match="killed"):
        load(cfg, database=db)
    monkeypatch.setattr(SpannerStateStore, "put", real_put)
    rejects.unlink(missing_ok=True)
    report = load(cfg, database=db)
    t = report.tables[0]
    # the first batch (rows 0-49): its runs span rows 1-48, refused 3, 10, ... 45 among them
    assert t.rows_skipped == 48
    assert t.rows_written == 300 - 50 - len(there - set(range(50)))
    if skip:
        assert t.rows_existing == len(there) - 7 and report.exit_code == ExitCode.OK
    else:
        lines = [json.loads(x) for x in rejects.read_text().splitlines()]
        assert sorted(r["record"] - 1 for r in lines) == sorted(there - set(range(1, 49)))
        assert report.exit_code == ExitCode.REJECTED_ROWS
        # the seven the marker counted are carried, once (not again by the batch's marker)
        assert any("; 7 row(s) rejected before count toward" in n for n in report.notes), (
            report.notes
        )
    expected = [(i, "already there" if i in there else payload(i)) for i in range(300)]
    assert read_table(db, "Events", ["Id", "Payload"]) == expected


@pytest.mark.parametrize("state_file", [False, True])
def test_a_dry_run_says_what_a_load_would_resume_or_find_loaded(
    make_database: Any, tmp_path: Path, state_file: bool
) -> None:
    """--dry-run read every row of a job a run had left half done, and said nothing of it;
    it now notes where the load would resume, or that it would find the job loaded, and
    creates and locks nothing."""
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(ROWS))
    where = {"state_file": tmp_path / "state.json", "state": False} if state_file else {}
    cfg = config(db, [src], **where)
    stop_partway(cfg, db, "interrupt", 1000, Interrupted)
    dry = dataclasses.replace(cfg, dry_run=True)
    report = load(dry, database=db)
    (note,) = [n for n in report.notes if "interrupted at source 1" in n]
    assert "the same load, not a dry run, resumes it there" in note
    assert report.rows_read == ROWS
    load(cfg, database=db)
    (note,) = [n for n in load(dry, database=db).notes if "an earlier run of this job" in n]
    assert note.endswith(
        "finds it loaded if its sources and options are as they were (`restart=True` loads it again)"
    )


def test_a_dry_run_before_any_load_creates_no_state_table(
    make_database: Any, tmp_path: Path
) -> None:
    from loader.resume.stores import STATE_TABLE

    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(100))
    report = load(config(db, [src], dry_run=True), database=db)
    assert not any("this job" in n for n in report.notes)
    with db.snapshot() as snap:
        query = "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''"
        tables = [r[0] for r in snap.execute_sql(query)]
    assert "Events" in tables and STATE_TABLE not in tables


def test_a_field_name_that_is_no_column_is_said_before_the_options_differ(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout: `--columns region,id` (for CustomerId) on a job loaded before was refused as
    "options that change what is written differ", which hid the misspelt name."""
    from loader.parse import Dialect

    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv", range(10))
    load(config(db, [src]), database=db)
    headless = Dialect(header=False, skip_rows=1, columns=("Id", "Payloda"))
    with pytest.raises(
        SchemaError, match=r"events.csv: CSV column\(s\) not in table Events: 'Payloda'"
    ):
        load(config(db, [src], dialect=headless), database=db)


def test_a_preset_dropped_since_the_earlier_run_is_named() -> None:
    """A tryout: a MySQL job loaded with `--dialect mysql`, run again without it, was told
    "`backslash_escapes` True -> the default; `double_quote` False -> ...": no word of the
    flag that sets them."""
    from loader.parse.dialect import PRESETS
    from loader.resume.checkpoint import _options_change
    from loader.resume.stores import canonical

    mysql = {"dialect": canonical(PRESETS["mysql"])}
    tabs = {"dialect": {"delimiter": "\t", "header": False}}
    differ = _options_change(mysql, tabs)
    assert differ == ["that run read the files with `dialect='mysql'`, this one not"]
    assert _options_change(tabs, mysql) == [
        "this run reads the files with `dialect='mysql'`, that one did not"
    ]
    with_more = {"dialect": {**canonical(PRESETS["mysql"]), "encoding": "latin-1"}}
    assert _options_change(with_more, mysql) == ["`encoding` 'latin-1' -> the default"]
    # a tryout: `--dialect postgres --header`, then without the preset, was told of
    # `array_syntax` and `bytes_encoding`, which no flag of the command line sets
    pg = {"dialect": canonical(dataclasses.replace(PRESETS["postgres"], header=True))}
    assert _options_change(pg, {"dialect": {}}) == [
        "that run read the files with `dialect='postgres'`, this one not"
    ]
    text = {"dialect": canonical(PRESETS["postgres-text"])}
    assert _options_change(text, {"dialect": canonical(PRESETS["postgres"])}) == [
        "that run read the files with `dialect='postgres-text'`, this one with `dialect='postgres'`"
    ]
    assert _options_change(mysql, text) == [
        "that run read the files with `dialect='mysql'`, this one with `dialect='postgres-text'`"
    ]
    # a review: one field set over the same preset is that field, not the preset
    nulls = {"dialect": canonical(dataclasses.replace(PRESETS["mysql"], null_markers=("NULL",)))}
    assert _options_change(mysql, nulls) == ["`null_markers` ['\\\\N'] -> ['NULL', '\\\\N']"]
    # a tryout: `--quote ''` after a run with quotes was "already loaded" (None read as unset)
    assert _options_change({"dialect": {}}, {"dialect": {"quote_char": None}}) == [
        "`quote_char` the default -> none"
    ]
    hexed = {"dialect": canonical(dataclasses.replace(PRESETS["postgres"], bytes_encoding="hex"))}
    assert _options_change({"dialect": canonical(PRESETS["postgres"])}, hexed) == [
        "`bytes_encoding` 'postgres' -> 'hex'"
    ]


def test_a_changed_column_option_is_shown_as_its_flag_takes_it() -> None:
    """A tryout's `--map Nmae=Name` after a loaded run was told "`map` [] -> [['Nmae',
    'Name']]": Python's lists, not what the flag takes."""
    from loader.resume.checkpoint import _options_change

    before = {"columns": {"map": [], "ignore": [], "by_position": None}}
    after = {"columns": {"map": [["Nmae", "Name"], ["a", "B"]], "ignore": ["x", "y"]}}
    assert _options_change(before, after) == [
        "`map` none -> Nmae=Name, a=B",
        "`ignore` none -> x, y",
    ]
    positions = {"columns": {"by_position": ["Id", "Name"]}}
    assert _options_change(positions, before) == ["`columns` Id,Name -> none"]


def test_the_resume_note_says_where_in_words() -> None:
    """A tryout read "at source 1, after record 0" as nothing kept, and "at source 2" of a job
    of one source as a source it did not have."""
    from loader.resume.checkpoint import _resumed_where

    assert _resumed_where(0, 0, 1) == " from the start of source 1"
    assert _resumed_where(0, 1200, 2) == " at source 1, after record 1,200"
    assert (
        _resumed_where(1, 0, 1) == " with every source read (it stopped before recording its end)"
    )


def test_the_reject_files_of_a_job_s_runs_are_kept_once_each() -> None:
    """A resumed run adds its reject file only once it rejects a row of its own (a review:
    the batches' refused rows of the run before counted as its own)."""
    from loader.resume.checkpoint import Checkpoint

    cp = Checkpoint.__new__(Checkpoint)  # only the fields the list is made of
    cp._files_unknown = False
    cp.earlier_reject_files, cp.rejects_file = ("/a.jsonl",), "/b.jsonl"
    cp._rejects_before, cp.saved_rejects = 3, 3
    assert cp._reject_files_recorded() == {"reject_files": ["/a.jsonl"]}
    cp.saved_rejects = 4
    assert cp._reject_files_recorded() == {"reject_files": ["/a.jsonl", "/b.jsonl"]}
    cp.rejects_file = "/a.jsonl"  # the same file again: once
    assert cp._reject_files_recorded() == {"reject_files": ["/a.jsonl"]}
    cp.earlier_reject_files, cp.rejects_file = (), ""
    assert cp._reject_files_recorded() == {}
    # a record from before the files were kept, of a run that rejected rows: no list (this
    # run's file alone would hide that run's)
    cp.rejects_file, cp._files_unknown = "/b.jsonl", True
    assert cp._reject_files_recorded() == {}
