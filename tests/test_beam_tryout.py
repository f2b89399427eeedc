"""The Beam path (``--runner``) tried as a new user would: inputs and flags nobody tuned for.

A run of a job skips each batch whose marker is there, so a job whose sources or options
changed since its first run must be refused (as a single-process checkpoint refuses it), not
load with the old markers: batch ``n`` of key range ``r`` would then hold other rows, skipped
as done. The pipeline tests need apache-beam (``scripts/beam_check.sh``); without it they skip.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_beam, read_table, small_load_config

from loader import load
from loader.errors import ConfigError, ExitCode, LeaseHeld, LoaderError, StateError

DDL = """
CREATE TABLE Notes (
  Id INT64 NOT NULL,
  Body STRING(MAX),
) PRIMARY KEY (Id)
"""


def _write(path: Path, ids: range) -> None:
    path.write_text("Id,Body\n" + "".join(f'{i},"note\n{i}"\n' for i in ids), newline="")


def _ids(db: Any) -> list[int]:
    return [r[0] for r in read_table(db, "Notes", ["Id"])]


@needs_beam
def test_a_new_file_under_the_glob_is_refused_not_skipped(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    _write(tmp_path / "a.csv", range(0, 100, 2))
    glob = str(tmp_path / "*.csv")
    config = small_load_config(db, "Notes", [glob], runner="DirectRunner")
    assert load(config).tables[0].rows_written == 50
    _write(tmp_path / "b.csv", range(1, 100, 2))  # its rows fall into the same batches
    with pytest.raises(StateError) as e:
        load(config)
    # the job had finished: said so (a nightly run, not a resume), with the ways on
    assert "b.csv is new since job" in str(e.value) and "its last run finished" in str(e.value)
    assert "restart=True" in (e.value.hint or "") and "incremental=True" in (e.value.hint or "")
    assert e.value.exit_code == ExitCode.USAGE
    assert _ids(db) == list(range(0, 100, 2))  # nothing written by the refused run
    t = load(small_load_config(db, "Notes", [glob], runner="DirectRunner", restart=True))
    assert t.tables[0].rows_written == 100 and _ids(db) == list(range(100))


@needs_beam
def test_a_changed_file_is_refused_and_the_same_one_resumes(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(50))
    config = small_load_config(db, "Notes", [src], runner="DirectRunner")
    assert load(config).tables[0].rows_written == 50
    again = load(config).tables[0]  # unchanged and finished: nothing to do
    assert (again.rows_written, again.rows_read) == (0, 0)
    _write(src, range(50, 120))
    with pytest.raises(StateError, match=r"a\.csv changed \(size .* since job .* loaded it"):
        load(config)
    assert _ids(db) == list(range(50))


@needs_beam
def test_changed_conversions_or_batch_budgets_are_refused(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    from loader.parse import Dialect

    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(60))
    config = small_load_config(db, "Notes", [src], runner="DirectRunner")
    load(config)
    other = small_load_config(
        db, "Notes", [src], runner="DirectRunner", dialect=Dialect(null_markers=("x",))
    )
    with pytest.raises(StateError, match="options that change what is written"):
        load(other)
    smaller = small_load_config(db, "Notes", [src], runner="DirectRunner", batch_rows=7)
    with pytest.raises(StateError, match="batch options differ") as e:
        load(smaller)
    assert "`batch_rows=50`" in (e.value.hint or "")


def test_incremental_with_a_runner_is_a_config_error(make_database: Callable[..., Any]) -> None:
    db = make_database([DDL])
    with pytest.raises(ConfigError, match="`incremental=True` is not supported with `runner`"):
        small_load_config(db, "Notes", ["x.csv"], runner="DirectRunner", incremental=True)


# -- runner, options and results folder: checked on the launcher, one line each ----------------


@needs_beam
@pytest.mark.parametrize(
    ("kw", "message", "hint"),
    [
        (
            dict(runner="DirektRunner"),
            "unknown Beam runner 'DirektRunner'",
            "--runner DirectRunner",
        ),
        (dict(runner="direct"), "unknown Beam runner 'direct'", "--runner DirectRunner"),
        (
            dict(runner="DirectRunner", beam_options=(("direct_num_workerz", "2"),)),
            "unknown Beam pipeline option 'direct_num_workerz'",
            "did you mean direct_num_workers?",
        ),
        (
            dict(runner="DirectRunner", beam_options=(("foo", ""),)),
            "unknown Beam pipeline option 'foo' (--beam-option foo)",
            "without the dashes",
        ),
        (  # elsewhere an unknown option passes on to the service, unless it is a likely typo
            dict(
                runner="DataflowRunner",
                beam_options=(("regoin", "europe-west1"), ("temp_location", "gs://b/t")),
            ),
            "unknown Beam pipeline option 'regoin'",
            "did you mean region?",
        ),
        # values too, before the load begins (Beam's own refusal came after deferred indexes
        # were dropped, as its whole usage text)
        (
            dict(runner="DirectRunner", beam_options=(("direct_running_mode", "bogus"),)),
            "Beam refuses --beam-option direct_running_mode=bogus: argument "
            "--direct_running_mode: invalid choice: 'bogus'",
            "correct the value",
        ),
        (
            dict(runner="DirectRunner", beam_options=(("direct_num_workers", ""),)),
            "Beam refuses --beam-option direct_num_workers: argument --direct_num_workers: "
            "expected one argument",
            "correct the value",
        ),
        (
            dict(runner="DirectRunner", beam_options=(("save_main_session", "true"),)),
            "Beam refuses --beam-option save_main_session=true",
            "a flag takes no value: --beam-option save_main_session",
        ),
        (
            dict(runner="DirectRunner", beam_options=(("runner", "PrismRunner"),)),
            "--beam-option runner=PrismRunner: the runner is set by `runner`",
            "leave it out",
        ),
        (
            dict(runner="DirectRunner", beam_results="/proc/no-such-folder"),
            "cannot write in the Beam results folder /proc/no-such-folder",
            "`beam_results`",
        ),
    ],
)
def test_runner_options_and_results_are_checked_before_loading(
    kw: dict[str, Any], message: str, hint: str, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    with pytest.raises(ConfigError) as e:
        load(small_load_config(db, "Notes", ["never-read.csv"], **kw))
    assert str(e.value) == message or str(e.value).startswith(message)
    assert hint in (e.value.hint or "")


@needs_beam
def test_known_options_and_a_dotted_runner_pass() -> None:
    from loader.beam import checks

    checks.check_runner("DirectRunner")
    checks.check_runner("apache_beam.runners.direct.direct_runner.DirectRunner")
    checks.check_options(
        "DirectRunner",
        (
            ("direct_num_workers", "2"),
            ("direct_running_mode", "in_memory"),
            ("save_main_session", ""),
        ),
    )
    checks.check_options("DataflowRunner", (("some_service_flag", "1"),))


@needs_beam
def test_a_failed_worker_is_one_line_then_the_same_command_resumes(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    import os
    import subprocess
    import sys

    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(80))
    args = [sys.executable, "-m", "loader", "load", str(src), "--table", "Notes", "--emulator"]
    args += ["--database", db.database_id, "--runner", "DirectRunner", "--mode", "insert"]
    env = {**os.environ, "SPANNER_LOADER_BEAM_FAULT": str(tmp_path / "fault")}
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert (
        lines[0]
        == "Notes: the Beam pipeline runs on DirectRunner; its rows are counted when it ends"
    )
    assert lines[1:] == [
        "error: Notes: the Beam pipeline failed: injected fault after key range 0's commits "
        "[while running 'Commit']",
        "hint: run the same command again to resume (batches committed are skipped); -v shows "
        "the workers' log",
    ]
    again = subprocess.run(args + ["--json"], capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr
    assert "apitools" not in again.stderr and "WARNING" not in again.stderr
    assert _ids(db) == list(range(80))
    # a tryout: with stderr not a terminal, not even the table's last progress line came
    (last,) = [x for x in again.stderr.splitlines() if x.startswith("progress: Notes [")]
    assert "100.0%" in last and "rows 80/80" in last
    # loaded: no pipeline runs, and none is announced (a tryout: it was, before every error)
    third = subprocess.run(args, capture_output=True, text=True, env=env)
    assert third.returncode == 0 and "rows 0/0" in third.stderr, third.stderr
    assert "the Beam pipeline runs on" not in third.stderr


def test_a_worker_error_keeps_its_exit_code_and_a_second_ctrl_c_is_exit_5() -> None:
    from loader.beam import pipeline_failed

    again = "the same command again"
    e = pipeline_failed(RuntimeError("CommitError: refused [while running 'Commit']"), "T", again)
    assert e.exit_code == ExitCode.FAILED and type(e).__name__ == "CommitError"
    e = pipeline_failed(RuntimeError("SourceError: gone\nmore"), "T", again)
    assert (
        e.exit_code == ExitCode.USAGE and str(e) == "T: the Beam pipeline failed: SourceError: gone"
    )
    without = "the same command again without `restart=True`"
    e = pipeline_failed(RuntimeError("KeyboardInterrupt [while running 'Commit']"), "T", without)
    assert e.exit_code == ExitCode.INTERRUPTED
    assert "without `restart=True`" in str(e)
    assert pipeline_failed(RuntimeError(), "T", again).exit_code == ExitCode.FAILED


@needs_beam
def test_a_stop_before_a_table_pipeline_is_an_interruption(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    import threading

    from loader.errors import Interrupted

    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(10))
    stop = threading.Event()
    stop.set()  # Ctrl-C while an earlier table's pipeline ran to its end
    with pytest.raises(Interrupted, match="before loading Notes") as e:
        load(small_load_config(db, "Notes", [src], runner="DirectRunner"), stop=stop)
    assert e.value.exit_code == ExitCode.INTERRUPTED and _ids(db) == []


def test_a_remote_runner_refuses_sources_its_workers_cannot_read(tmp_path: Path) -> None:
    """Checked once the sources are listed, before the ranges are planned."""
    from loader.beam.checks import check_readable
    from loader.source import SourceInfo

    stdin = SourceInfo(uri="-", kind="stdin")
    pipe = SourceInfo(uri="/dev/fd/63", kind="pipe")
    local = SourceInfo(uri=str(tmp_path / "a.csv"), kind="file", size=1, mtime_ns=1)
    gcs = SourceInfo(uri="gs://b/a.csv", kind="gcs", bucket="b", name="a.csv", generation=1)
    for runner in ("DirectRunner", "PrismRunner"):
        check_readable(runner, [stdin, pipe, local, gcs])  # workers share this process's files
    check_readable("DataflowRunner", [gcs])
    check_readable("FlinkRunner", [local])  # a cluster may share the disk
    with pytest.raises(ConfigError, match="cannot read -: its workers are other processes"):
        check_readable("DataflowRunner", [gcs, stdin])
    with pytest.raises(ConfigError, match="cannot read /dev/fd/63"):
        check_readable("FlinkRunner", [pipe])
    with pytest.raises(ConfigError, match="cannot read the local file .*a.csv") as e:
        check_readable("DataflowRunner", [local])
    assert "gcloud storage cp" in (e.value.hint or "")


@needs_beam
def test_stdin_is_never_resumed_by_markers(make_database: Callable[..., Any]) -> None:
    """A second stdin load of the same table with other rows was skipped by the first run's
    markers (exit 0, the new rows lost): a stream's content cannot be compared between runs."""
    import subprocess
    import sys

    db = make_database([DDL])

    def run(ids: range, mode: str) -> subprocess.CompletedProcess[str]:
        text = "Id,Body\n" + "".join(f"{i},b{i}\n" for i in ids)
        args = [sys.executable, "-m", "loader", "load", "-", "--table", "Notes", "--emulator"]
        args += ["--database", db.database_id, "--runner", "DirectRunner", "--mode", mode]
        return subprocess.run(args, input=text, capture_output=True, text=True)

    assert run(range(0, 40), "upsert").returncode == 0
    second = run(range(40, 90), "upsert")
    assert second.returncode == 0, second.stderr
    assert "every row is written again" in second.stdout + second.stderr
    assert _ids(db) == list(range(90))
    assert run(range(90, 100), "insert").returncode == 0  # the mode names another job
    fourth = run(range(100, 110), "insert")  # it would refuse what the earlier run wrote
    assert fourth.returncode == 2
    assert "insert mode cannot load it again" in fourth.stderr and "--mode upsert" in fourth.stderr
    assert _ids(db) == list(range(100))


@pytest.mark.parametrize("runner", [None, "DirectRunner"])
def test_a_bad_header_names_its_file_and_keeps_its_hint(
    tmp_path: Path, make_database: Callable[..., Any], runner: Any
) -> None:
    """Of a glob's files, the one whose header names a column the table lacks was not named,
    and under Beam the hint (the table's columns) was lost: the runner copies a worker's error
    from its arguments, and the hint was not one of them."""
    if runner is not None:
        pytest.importorskip("apache_beam", reason="scripts/beam_check.sh runs this")
    db = make_database([DDL])
    _write(tmp_path / "a.csv", range(3))
    (tmp_path / "z.csv").write_text("Id,Bdy\n7,x\n")
    config = small_load_config(db, "Notes", [str(tmp_path / "*.csv")], runner=runner)
    with pytest.raises(LoaderError) as e:
        load(config)
    assert e.value.exit_code == ExitCode.USAGE
    assert f"{tmp_path / 'z.csv'}: CSV column(s) not in table Notes: 'Bdy'" in str(e.value)
    assert "columns of Notes: Id, Body" in (e.value.hint or "")
    assert "[while running" not in str(e.value)  # Beam's step, in the loader's own error


@needs_beam
def test_the_report_counts_each_files_rows(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """The Beam report said rows 0 for every source (the single-process one counts them)."""
    db = make_database([DDL])
    _write(tmp_path / "a.csv", range(3))
    _write(tmp_path / "b.csv", range(10, 12))
    config = small_load_config(db, "Notes", [str(tmp_path / "*.csv")], runner="DirectRunner")
    report = load(config)
    assert [(Path(s.uri).name, s.rows, s.status) for s in report.tables[0].sources] == [
        ("a.csv", 3, "done"),
        ("b.csv", 2, "done"),
    ]


@needs_beam
def test_a_finished_job_run_again_has_nothing_to_do(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """Run again, a finished Beam job ran its pipeline again: its rejects went to the reject
    file a second time, where a single-process job says it is already loaded (and, as that
    does, exits 3 again for the rejects of the run that loaded it)."""
    db = make_database([DDL])
    src = tmp_path / "a.csv"
    src.write_text("Id,Body\n1,a\nx,b\n3,c\n")
    rejects = tmp_path / "r.jsonl"
    config = small_load_config(
        db, "Notes", [str(src)], runner="DirectRunner", max_bad_rows=5, rejects=rejects
    )
    first = load(config)
    assert first.exit_code == ExitCode.REJECTED_ROWS and first.tables[0].rows_written == 2
    again = load(config)
    assert again.exit_code == ExitCode.REJECTED_ROWS, again.error
    assert again.rows_rejected == 0 and again.rows_rejected_before == 1
    assert again.tables[0].rows_written == 0 and again.tables[0].rows_read == 0
    # the run that loaded it, as a single-process report names it (its reject lines carry it)
    assert again.tables[0].earlier_load_ids == [first.load_id]
    assert any(
        "Notes: already loaded by an earlier run" in n
        and f"1 row(s): see its reject file {rejects}" in n
        for n in again.notes
    )
    assert len(rejects.read_text().splitlines()) == 1
    src.write_text("Id,Body\n1,a\n2,b\n3,c\n")  # fixed: a job of other data, from scratch
    fixed = load(small_load_config(db, "Notes", [str(src)], runner="DirectRunner", restart=True))
    assert fixed.exit_code == ExitCode.OK and _ids(db) == [1, 2, 3]


@needs_beam
def test_a_local_results_folder_is_left_as_it_was(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """--beam-results DIR kept an empty DIR/RUN_ID/ folder after each load."""
    db = make_database([DDL])
    _write(tmp_path / "a.csv", range(5))
    results = tmp_path / "results"
    results.mkdir()
    config = small_load_config(
        db, "Notes", [tmp_path / "a.csv"], runner="DirectRunner", beam_results=str(results)
    )
    assert load(config).tables[0].rows_written == 5
    assert list(results.iterdir()) == []


@needs_beam
def test_a_finished_beam_job_run_again_drops_no_deferred_index(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """Run again, a finished Beam job with --defer-indexes dropped its index and built it
    again (only the single-process job's record of its end was looked at; a tryout)."""
    db = make_database([DDL, "CREATE INDEX NotesByBody ON Notes(Body)"])
    _write(tmp_path / "a.csv", range(5))
    config = small_load_config(
        db, "Notes", [str(tmp_path / "a.csv")], runner="DirectRunner", defer_indexes="non-unique"
    )
    first = load(config)
    assert first.exit_code == ExitCode.OK and any("deferred 1" in n for n in first.notes)
    again = load(config)
    assert again.exit_code == ExitCode.OK, again.error
    assert any("nothing is deferred" in n for n in again.notes), again.notes
    assert not any("deferred 1" in n for n in again.notes)


@needs_beam
def test_a_pipeline_stopped_by_a_second_signal_says_its_rows_are_not_counted(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report said "0 rows read, 0 written" of a pipeline that had committed 57,680 rows
    (a tryout): its counts come back only when it ends. A note says so."""
    from loader.beam import pipeline_failed
    from loader.errors import Interrupted

    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(10))

    def stopped(*args: Any, **kwargs: Any) -> None:
        raise pipeline_failed(
            RuntimeError("KeyboardInterrupt [while running 'Commit']"),
            "Notes",
            "the same command again",
        )

    monkeypatch.setattr("loader.beam.load_table", stopped)
    with pytest.raises(Interrupted) as e:
        load(small_load_config(db, "Notes", [src], runner="DirectRunner"))
    notes = e.value.report.notes
    assert any("committed before it was stopped are not counted here" in n for n in notes)


@needs_beam
def test_a_finished_job_whose_source_is_gone_is_already_loaded(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """A file of a finished job's glob deleted since (a nightly job that cleans up what it
    loaded): refused as a changed source, where a single-process job finds itself loaded."""
    db = make_database([DDL])
    _write(tmp_path / "a.csv", range(0, 100, 2))
    _write(tmp_path / "b.csv", range(1, 100, 2))
    config = small_load_config(db, "Notes", [str(tmp_path / "*.csv")], runner="DirectRunner")
    assert load(config).tables[0].rows_written == 100
    (tmp_path / "b.csv").unlink()
    again = load(config)
    assert again.exit_code == ExitCode.OK and again.tables[0].rows_written == 0
    assert any(
        "already loaded" in n and "1 source(s) that run loaded are gone since" in n
        for n in again.notes
    )
    _write(tmp_path / "a.csv", range(0, 10))  # the one left, changed: refused as before
    with pytest.raises(StateError, match=r"a\.csv changed .* since job .* loaded it"):
        load(config)


@needs_beam
def test_a_second_run_of_a_beam_job_stops_while_another_holds_it(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """A Beam run took no lease: a second run of the same job beside a first one ran its own
    pipeline over the same rows (a tryout saw it wait on the emulator, then call the job
    loaded). It stops with exit 7 as a single-process run does, and runs once the lease is
    free."""
    from loader.resume.lease import Lease
    from loader.resume.stores import SpannerStateStore

    db = make_database([DDL])
    src = tmp_path / "a.csv"
    src.write_text("Id,Body\n1,a\n2,b\n")
    config = small_load_config(db, "Notes", [str(src)], runner="DirectRunner")
    first = load(config)
    assert first.exit_code == ExitCode.OK, first.error
    other = Lease(SpannerStateStore(db), first.run_ids["Notes"], "Notes", host="other", pid=4242)
    other.acquire()  # another run of the job, on another machine, loading now
    try:
        with pytest.raises(LeaseHeld) as e:
            load(config)
        assert e.value.exit_code == ExitCode.BUSY == 7
        assert "another run of this job is loading it (host other, pid 4242" in str(e.value)
    finally:
        other.release()
    again = load(config)
    assert again.exit_code == ExitCode.OK, again.error
    assert any("already loaded by an earlier run" in n for n in again.notes)
    assert _ids(db) == [1, 2]


@needs_beam
def test_replace_mode_on_the_beam_path_refuses_a_new_parent_job_over_a_loaded_child(
    make_database: Callable[..., Any], tmp_path: Path
) -> None:
    """A third review: the replace-mode check read the single-process records only; a Beam
    job keeps its own under beam/, so a renamed Customers job over loaded Orders ran, exit 0,
    Orders at 0 rows."""
    import dataclasses

    from conftest import EXAMPLES
    from test_load_e2e import shop_config

    from loader.config import TableJob

    db = make_database()
    files = {t: tmp_path / f"{t}.csv" for t in ("Customers", "Orders")}
    for t, f in files.items():
        f.write_text((EXAMPLES / f"{t}.csv").read_text(encoding="utf-8"), encoding="utf-8")
    jobs = tuple(TableJob(t, (str(f),)) for t, f in files.items())
    cfg = shop_config(db, jobs=jobs, mode="replace", runner="DirectRunner")
    assert load(cfg, database=db).exit_code == ExitCode.OK
    assert load(cfg, database=db).exit_code == ExitCode.OK  # loaded: nothing refused
    v2 = tmp_path / "Customers_v2.csv"
    v2.write_text(files["Customers"].read_text("utf-8").replace("@example.com", "@x.org"), "utf-8")
    renamed = dataclasses.replace(cfg, jobs=(TableJob("Customers", (str(v2),)), cfg.jobs[1]))
    with pytest.raises(ConfigError, match="earlier runs loaded Orders"):
        load(renamed, database=db)
    assert len(read_table(db, "Orders", ["OrderId"])) == 600
