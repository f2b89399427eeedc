"""``--incremental`` across runs of other kinds: after runs without it (their sources count as
loaded), after an interrupted incremental run (that run's sources are resumed; what was listed
since waits for the next run), and the refusals that name the right source and way out."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, read_table
from test_load_e2e import assert_table_equals_csv, shop_config

from loader import load
from loader.config import TableJob
from loader.errors import ConfigError, ExitCode, Interrupted, StateError, TooManyBadRows

LINES = (EXAMPLES / "Products.csv").read_text(encoding="utf-8").splitlines(keepends=True)
HEADER, ROWS = LINES[0], LINES[1:]


def drop(folder: Path, name: str, lo: int, hi: int) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(HEADER + "".join(ROWS[lo:hi]), encoding="utf-8")


def config(db: Any, tmp_path: Path, **kw: Any) -> Any:
    return shop_config(
        db,
        **{
            "jobs": (TableJob("Products", (str(tmp_path / "drop" / "*.csv"),)),),
            "state_file": str(tmp_path / "state.json"),
            **kw,
        },
    )


def written(report: Any) -> int:
    assert report.exit_code == ExitCode.OK, report.error
    return sum(t.rows_written for t in report.tables)


def expect_all(db: Any, tmp_path: Path, hi: int) -> None:
    (tmp_path / "all.csv").write_text(HEADER + "".join(ROWS[:hi]), encoding="utf-8")
    assert_table_equals_csv(db, "Products", tmp_path / "all.csv")


def test_incremental_after_plain_runs_loads_only_what_is_new(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 40)
    drop(d, "p2.csv", 40, 70)
    assert written(load(config(db, tmp_path, mode="insert"), database=db)) == 70
    drop(d, "p3.csv", 70, 90)
    incr = config(db, tmp_path, mode="insert", incremental=True)
    first = load(incr, database=db)
    assert written(first) == 20  # insert mode: a reload of p1, p2 would fail on their keys
    assert any("2 source(s) loaded by earlier runs skipped" in n for n in first.notes)
    # the plain run's sources stay known after the incremental run's record replaced its own
    assert written(load(incr, database=db)) == 0
    drop(d, "p4.csv", 90, len(ROWS))
    assert written(load(incr, database=db)) == len(ROWS) - 90
    expect_all(db, tmp_path, len(ROWS))


def _interrupt(cfg: Any, db: Any) -> None:
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.rows_written > 0:
            stop.set()  # as a SIGINT would, once some rows are committed

    with pytest.raises(Interrupted):
        load(cfg, database=db, progress=progress, stop=stop)


SMALL = dict(batch_rows=5, block_size=16 << 10, buffer_size=64 << 10)


def interrupted_incremental(db: Any, tmp_path: Path, **kw: Any) -> tuple[Any, Path]:
    """An incremental job that loaded p1.csv (rows 0-29), then was interrupted loading p2.csv
    and p3.csv (rows 30-79): its config and the folder."""
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 30)
    incr = config(db, tmp_path, incremental=True, **SMALL, **kw)
    assert written(load(incr, database=db)) == 30
    drop(d, "p2.csv", 30, 60)
    drop(d, "p3.csv", 60, 80)
    _interrupt(incr, db)
    return incr, d


def test_an_interrupted_incremental_run_resumes_and_leaves_new_files_for_the_next(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    incr, d = interrupted_incremental(db, tmp_path, mode="insert")
    drop(d, "p0.csv", 80, 90)  # listed first now, by name
    resumed = load(incr, database=db)
    assert resumed.exit_code == ExitCode.OK, resumed.error
    assert any("1 source(s) listed since it are left for the next run" in n for n in resumed.notes)
    expect_all(db, tmp_path, 80)
    assert written(load(incr, database=db)) == 10
    assert written(load(incr, database=db)) == 0
    expect_all(db, tmp_path, 90)


def test_an_interrupted_incremental_run_is_not_resumed_without_incremental(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    incr, _ = interrupted_incremental(db, tmp_path)
    with pytest.raises(StateError) as e:
        load(config(db, tmp_path, **SMALL), database=db)
    assert "p1.csv is new since run" in str(e.value)
    assert "that run was incremental: re-run with `incremental=True` to resume it" in str(
        e.value.hint
    )
    assert written(load(incr, database=db)) > 0
    expect_all(db, tmp_path, 80)


@pytest.mark.parametrize("how", ["gone", "changed"])
def test_an_interrupted_run_whose_source_is_gone_or_changed_is_dropped(
    make_database: Any, tmp_path: Path, how: str
) -> None:
    """It cannot be resumed; the job stayed stuck (exit 2 every night) until --restart, which
    loaded every source the job ever loaded. Upsert drops the interrupted run and loads what
    no finished run loaded."""
    db = make_database()
    incr, d = interrupted_incremental(db, tmp_path)
    if how == "gone":
        (d / "p3.csv").unlink()
    else:
        drop(d, "p3.csv", 60, 85)  # re-exported, longer
    drop(d, "p4.csv", 90, 95)
    report = load(incr, database=db)
    assert report.exit_code == ExitCode.OK, report.error
    what = "is gone" if how == "gone" else "changed"
    assert any(f"source {d / 'p3.csv'} {what} since run" in n for n in report.notes)
    assert report.rows_read == 30 + (25 if how == "changed" else 0) + 5  # not p1 again
    assert written(load(incr, database=db)) == 0
    got = {r[0] for r in read_table(db, "Products", ["ProductId"])}
    keys = {line.split(",")[0] for line in ROWS}
    want = [*range(0, 60), *range(90, 95), *(range(60, 85) if how == "changed" else [])]
    assert {ROWS[i].split(",")[0] for i in want} <= got <= keys


def test_insert_mode_cannot_drop_the_interrupted_run_and_says_what_restart_costs(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    incr, d = interrupted_incremental(db, tmp_path, mode="insert")
    (d / "p3.csv").unlink()
    with pytest.raises(StateError) as e:
        load(incr, database=db)
    assert f"source {d / 'p3.csv'} is gone since run" in str(e.value)
    assert "forgets every source this job loaded and loads them all again" in (e.value.hint or "")


def test_a_finished_job_that_rejected_rows_says_so_when_run_again(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    d = tmp_path / "drop"
    d.mkdir()
    (d / "p1.csv").write_text(HEADER + "".join(ROWS[:10]) + "a,b\n", encoding="utf-8")
    cfg = config(db, tmp_path, rejects=tmp_path / "rejects.jsonl", max_bad_rows=5)
    first = load(cfg, database=db)
    assert first.exit_code == ExitCode.REJECTED_ROWS
    again = load(cfg, database=db)
    # the same answer again, exit code and count (a CI tryout: a retry turned a red run green,
    # the earlier rejects only in a note)
    assert again.exit_code == ExitCode.REJECTED_ROWS and again.rows_written == 0
    assert again.rows_rejected == 0 and again.rows_rejected_before == 1
    assert "0 rejected (and 1 by an earlier run)" in again.render()
    assert any(
        "already loaded by an earlier run of this job; nothing to do (that run rejected 1 "
        f"row(s): see its reject file {tmp_path / 'rejects.jsonl'};" in n
        for n in again.notes
    ), again.notes
    # the same job with another reject file (a tryout's config file after a manual run):
    # the note names the file the rows are in, not this run's, which holds none of them
    other = dataclasses.replace(cfg, rejects=tmp_path / "other.jsonl")
    third = load(other, database=db)
    assert any(f"see its reject file {tmp_path / 'rejects.jsonl'};" in n for n in third.notes)


def test_a_refusal_over_changed_options_names_them(make_database: Any, tmp_path: Path) -> None:
    """ "options that change what is written (the dialect, value conversions or column
    mapping) differ": which one, the user had to guess."""
    import dataclasses

    from loader.convert import ConvertOptions
    from loader.parse import Dialect

    db = make_database()
    drop(tmp_path / "drop", "p1.csv", 0, 10)
    cfg = config(db, tmp_path, mapping=(("Name", "Name"),))
    assert written(load(cfg, database=db)) == 10
    dialect = Dialect(null_markers=("", "NULL"))
    other = dataclasses.replace(
        cfg, dialect=dialect, convert=ConvertOptions.from_dialect(dialect, timezone="Asia/Tokyo")
    )
    with pytest.raises(StateError) as e:
        load(other, database=db)
    assert str(e.value).startswith(
        "Products: options that change what is written (`null_markers` the default -> "
        "['', 'NULL']; `timezone` the default -> 'Asia/Tokyo') differ from those of run "
    )


def test_a_plain_run_then_an_interrupted_incremental_one_keeps_every_source_loaded(
    make_database: Any, tmp_path: Path
) -> None:
    """The plain run's sources are known only from its record, which the interrupted run's
    replaced: they are recorded when the incremental run starts, or the run after the resume
    would load them again (in insert mode: fail on every key)."""
    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 30)
    assert written(load(config(db, tmp_path, mode="insert", **SMALL), database=db)) == 30
    drop(d, "p2.csv", 30, 80)
    incr = config(db, tmp_path, mode="insert", incremental=True, **SMALL)
    _interrupt(incr, db)
    assert load(incr, database=db).exit_code == ExitCode.OK  # the resume
    assert written(load(incr, database=db)) == 0
    expect_all(db, tmp_path, 80)


def test_the_first_incremental_run_says_so_and_warns_of_a_glob_the_shell_expanded(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 10)
    drop(d, "p2.csv", 10, 20)
    files = (str(d / "p1.csv"), str(d / "p2.csv"))  # as `load drop/*.csv` hands them over
    spelled = config(db, tmp_path, incremental=True, jobs=(TableJob("Products", files),))
    first = load(spelled, database=db)
    note = next(n for n in first.notes if "the first run of this job" in n)
    assert "its 2 patterns each name one file, as a shell writes an unquoted glob" in note
    quoted = config(db, tmp_path, incremental=True)
    note = next(n for n in load(quoted, database=db).notes if "the first run of this job" in n)
    assert note == "Products: the first run of this job: every source is new"
    assert not any("first run" in n for n in load(quoted, database=db).notes)


def test_a_file_added_to_a_plain_glob_job_names_incremental(
    make_database: Any, tmp_path: Path
) -> None:
    """A nightly over a growing folder without --incremental: the added file stopped the job
    with only --restart named, which loads every file again (a tryout)."""
    db = make_database()
    d = tmp_path / "drop"
    d.mkdir()
    drop(d, "p1.csv", 0, 10)
    plain = config(db, tmp_path, **SMALL)
    assert written(load(plain, database=db)) == 10
    drop(d, "p2.csv", 10, 20)
    with pytest.raises(StateError) as e:
        load(plain, database=db)
    assert "p2.csv is new since run" in str(e.value)
    assert "with `incremental=True`" in str(e.value.hint) and "`restart=True`" in str(e.value.hint)


@pytest.mark.parametrize("mode", ["upsert", "insert"])
def test_a_file_rewritten_in_place_after_a_finished_run_names_incremental(
    make_database: Any, tmp_path: Path, mode: str
) -> None:
    """A nightly export that overwrites one file: every run after the first stopped with exit
    2 and only --restart named (a tryout). The hint names --incremental (in insert mode with
    --skip-existing, since the rewritten file still holds the rows loaded before), and
    following it loads the rewritten file."""
    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 20)
    plain = config(db, tmp_path, mode=mode)
    assert written(load(plain, database=db)) == 20
    drop(d, "p1.csv", 0, 30)  # the same name, another content
    drop(d, "p0.csv", 30, 35)  # and a new file, named first
    with pytest.raises(StateError) as e:
        load(plain, database=db)
    assert "p0.csv is new since run" in str(e.value) and "was loaded" in str(e.value)
    hint = str(e.value.hint)
    assert "with `incremental=True`" in hint and "`restart=True`" in hint
    assert ("`skip_existing=True`" in hint) == (mode == "insert")
    follow = config(
        db,
        tmp_path,
        mode=mode,
        incremental=True,
        **({"skip_existing": True} if mode == "insert" else {}),
    )
    again = load(follow, database=db)
    assert written(again) == (15 if mode == "insert" else 35)
    assert any(
        "1 source(s) changed since an earlier run loaded them (first " in n
        and n.endswith("p1.csv): loaded again as they are now")
        for n in again.notes
    ), again.notes
    assert written(load(follow, database=db)) == 0
    expect_all(db, tmp_path, 35)


def test_a_plain_run_after_incremental_runs_finds_the_job_loaded(
    make_database: Any, tmp_path: Path
) -> None:
    """The last incremental run's record lists only the files it read: a plain run then
    called a file loaded by an earlier run "new" and stopped with exit 2 (a tryout); and after
    a file was deleted, a plain run was refused every time, --incremental in between or not."""
    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 10)
    drop(d, "p2.csv", 10, 20)
    incr, plain = config(db, tmp_path, incremental=True), config(db, tmp_path)
    assert written(load(incr, database=db)) == 20
    drop(d, "p3.csv", 20, 30)
    assert written(load(incr, database=db)) == 10
    again = load(plain, database=db)
    assert written(again) == 0
    assert any("already loaded by earlier runs of this job; nothing" in n for n in again.notes)
    (d / "p2.csv").unlink()
    for cfg in (plain, incr, plain):
        report = load(cfg, database=db)
        assert written(report) == 0
    assert any("(1 source(s) those runs loaded are gone since)" in n for n in report.notes)
    drop(d, "p2.csv", 10, 21)  # back, and longer: not loaded as it is now
    with pytest.raises(StateError) as e:
        load(plain, database=db)
    assert "p2.csv changed" in str(e.value)
    expect_all(db, tmp_path, 30)


def test_an_insert_run_stopped_over_bad_rows_hints_at_what_loads_the_fixed_file(
    make_database: Any, tmp_path: Path
) -> None:
    """Insert mode, a bad row after some batches committed: the hint said a fixed file runs
    again with --restart, which then refused the committed rows as existing keys; and the
    fixed file's refusal named --restart alone (a tryout). Following the hints now loads it."""
    db = make_database()
    d = tmp_path / "drop"
    d.mkdir()
    # 900 rows (about 120 KiB), the bad one after the first 64 KiB buffer's batches
    rows = [f"{i:036d}," + ROWS[i % len(ROWS)].split(",", 1)[1] for i in range(900)]
    bad = rows[:700] + ["x,bad\n"] + rows[700:]
    (d / "p1.csv").write_text(HEADER + "".join(bad), encoding="utf-8")
    cfg = config(db, tmp_path, mode="insert", rejects=tmp_path / "r.jsonl", **SMALL)
    with pytest.raises(TooManyBadRows) as stopped:
        load(cfg, database=db)
    hint = str(stopped.value.hint)
    assert "`restart=True` and `skip_existing=True`" in hint
    (d / "p1.csv").write_text(HEADER + "".join(rows), encoding="utf-8")  # fixed
    with pytest.raises(StateError) as e:
        load(cfg, database=db)
    assert "`restart=True` and `skip_existing=True`" in str(e.value.hint)
    fixed = config(
        db, tmp_path, mode="insert", restart=True, skip_existing=True, rejects=None, **SMALL
    )
    report = load(fixed, database=db)
    assert report.exit_code == ExitCode.OK, report.error
    assert report.tables[0].rows_existing > 0
    assert len(read_table(db, "Products", ["ProductId"])) == 900


def test_other_options_are_not_taken_for_a_source_gone_or_for_one_already_loaded(
    make_database: Any, tmp_path: Path
) -> None:
    """After a file was deleted, a run with another time zone was refused as "p1.csv is
    gone", whose hint (--incremental) then did nothing; and a plain run found the job loaded
    though one file had been loaded with other options (a review)."""
    from loader.convert import ConvertOptions

    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 10)
    drop(d, "p2.csv", 10, 20)
    tokyo = {"convert": ConvertOptions(timezone="Asia/Tokyo")}
    assert written(load(config(db, tmp_path), database=db)) == 20
    (d / "p1.csv").unlink()
    with pytest.raises(StateError) as e:
        load(config(db, tmp_path, **tokyo), database=db)
    assert "options that change what is written" in str(e.value) and "gone" not in str(e.value)

    db = make_database()
    state = {"state_file": str(tmp_path / "state2.json")}
    drop(d, "p1.csv", 0, 10)
    (d / "p2.csv").unlink()
    assert written(load(config(db, tmp_path, incremental=True, **state), database=db)) == 10
    drop(d, "p2.csv", 10, 20)
    incr_tokyo = config(db, tmp_path, incremental=True, **state, **tokyo)
    assert written(load(incr_tokyo, database=db)) == 10
    with pytest.raises(StateError) as e:
        load(config(db, tmp_path, **state, **tokyo), database=db)
    assert "p1.csv was loaded by an earlier run of this job with other options" in str(e.value)
    with pytest.raises(StateError) as e:  # p1's options, not p2's (those of the last run)
        load(config(db, tmp_path, **state), database=db)
    assert "`timezone` 'Asia/Tokyo' -> the default" in str(e.value)


@pytest.mark.parametrize("state", ["file", "table"])
def test_a_dry_run_of_an_incremental_job_reads_what_the_load_would(
    make_database: Any, tmp_path: Path, state: str
) -> None:
    """A tryout's nightly pre-flight (`--config job.toml --dry-run`, and `validate`) read every
    source the job ever loaded, with their old rejects (exit 3) and no word that the load
    would read none. It reads the sources the load would, and nothing when none is new; and
    it records nothing (the next load still finds the new file new)."""
    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 40)
    kw: dict[str, Any] = {"incremental": True}
    if state == "table":
        kw["state_file"] = None
    incr = config(db, tmp_path, **kw)
    assert written(load(incr, database=db)) == 40
    dry = load(dataclasses.replace(incr, dry_run=True), database=db)
    assert dry.exit_code == ExitCode.OK and dry.tables[0].rows_read == 0, dry.notes
    assert any("no new sources since the last run" in n for n in dry.notes), dry.notes
    drop(d, "p2.csv", 40, 70)
    for _ in range(2):  # the dry run left no record of what it read
        dry = load(dataclasses.replace(incr, dry_run=True), database=db)
        assert dry.tables[0].rows_read == 30, dry.notes
        assert [s.uri for s in dry.tables[0].sources] == [str(d / "p2.csv")]
        assert any("1 source(s) loaded by earlier runs skipped" in n for n in dry.notes)
    assert written(load(incr, database=db)) == 30
    expect_all(db, tmp_path, 70)


def test_verify_says_why_keys_differ_when_an_older_source_was_loaded_again(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout's nightly job rewrote an older export in place; the incremental run loaded it
    again after a newer one holding the same keys, and verify (the last source in listing
    order wins) said DIFFERS with no word of why."""
    from loader.verify import verify

    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 20)
    incr = config(db, tmp_path, incremental=True)
    assert written(load(incr, database=db)) == 20
    newer = "".join(r.replace(",", ",v2 ", 1) for r in ROWS[10:20])  # another Name
    (d / "p2.csv").write_text(HEADER + newer, encoding="utf-8")
    assert written(load(incr, database=db)) == 10
    assert verify(incr, database=db).ok
    (d / "p1.csv").write_text(HEADER + "".join(ROWS[0:20]) + "\n", encoding="utf-8")  # rewritten
    assert written(load(incr, database=db)) == 20  # the older rows win in the table now
    checked = verify(incr, database=db)
    assert not checked.ok and checked.tables[0].different, checked.render()
    assert checked.tables[0].repeated == 10
    text = checked.render()
    assert "Products has 10 source row(s) whose key a later source row repeats" in text, text
    assert "a run with `incremental=True` that loaded an older source again" in text


def test_verify_names_the_bad_source_rows_it_did_not_compare(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout: "Customers: ok: source 4 rows" of a file of 6 rows, 2 of them bad, with no
    word of the 2."""
    from loader.verify import verify

    db = make_database()
    d = tmp_path / "drop"
    drop(d, "p1.csv", 0, 20)
    with (d / "p1.csv").open("a", encoding="utf-8") as f:
        f.write("not-a-uuid,x,y,z\n" * 2)
    cfg = config(db, tmp_path, max_bad_rows=5)
    assert load(cfg, database=db).tables[0].rows_written == 20
    checked = verify(cfg, database=db)
    assert checked.ok and checked.tables[0].bad_rows == 2
    assert "note: Products: 2 bad source row(s), which a load rejects: not compared" in (
        checked.render()
    )


def test_a_dry_run_after_an_interrupted_incremental_run_reads_its_listing(
    make_database: Any, tmp_path: Path
) -> None:
    """A review: the dry run read every source after an interrupted run (p1 again, with its
    old rejects), where the load resumes that run's listing only; and with `restart=True` it
    read only the new sources, where the load reads them all."""
    db = make_database()
    incr, d = interrupted_incremental(db, tmp_path)
    drop(d, "p0.csv", 80, 90)  # listed since: left for the next run
    dry = load(dataclasses.replace(incr, dry_run=True), database=db)
    assert [s.uri for s in dry.tables[0].sources] == [str(d / "p2.csv"), str(d / "p3.csv")]
    assert dry.rows_read == 50, dry.notes
    again = load(dataclasses.replace(incr, dry_run=True, restart=True), database=db)
    assert again.rows_read == 90 and not any("interrupted at" in n for n in again.notes)
    resumed = load(incr, database=db)  # the load reads what its dry run said
    assert resumed.exit_code == ExitCode.OK and [s.uri for s in resumed.tables[0].sources] == [
        str(d / "p2.csv"),
        str(d / "p3.csv"),
    ]


def test_replace_mode_refuses_an_incremental_run_that_would_drop_interleaved_rows(
    make_database: Any, tmp_path: Path
) -> None:
    """A nightly manifest in replace mode: Customers.csv changed, and the --incremental run
    loaded it again (replace deletes each customer with its orders and their items: ON DELETE
    CASCADE) but read nothing of Orders and OrderItems, whose sources were loaded before:
    "ok", exit 0, and 600 orders became 0 (a tryout). Refused before anything is written;
    --restart loads every table in full, parents first."""
    db = make_database()
    files = {t: tmp_path / f"{t}.csv" for t in ("Customers", "Orders", "OrderItems")}
    for t, f in files.items():
        f.write_text((EXAMPLES / f"{t}.csv").read_text(encoding="utf-8"), encoding="utf-8")
    jobs = tuple(TableJob(t, (str(f),)) for t, f in files.items())
    cfg = shop_config(db, jobs=jobs, mode="replace", state_file=str(tmp_path / "state.json"))
    incr = dataclasses.replace(cfg, incremental=True)
    assert written(load(cfg, database=db)) == 200 + 600 + 1535
    assert written(load(incr, database=db)) == 0  # nothing new at all: nothing refused
    text = files["Customers"].read_text(encoding="utf-8")
    files["Customers"].write_text(text.replace("@example.com", "@example.org", 1), "utf-8")
    with pytest.raises(ConfigError) as e:
        load(incr, database=db)
    assert e.value.exit_code == ExitCode.USAGE
    assert str(e.value) == (
        "Customers: replace mode deletes each row it writes again with its interleaved rows, "
        "and this run writes rows of Customers while earlier runs loaded Orders, "
        "OrderItems, which it does not load again in full: their rows under the Customers rows "
        "written would be gone"
    )
    assert "`mode='upsert'`" in (e.value.hint or "") and "`restart=True`" in (e.value.hint or "")
    assert len(read_table(db, "Orders", ["OrderId"])) == 600  # nothing written
    assert written(load(dataclasses.replace(incr, restart=True), database=db)) == 2335
    for t, f in files.items():
        assert_table_equals_csv(db, t, f)


def test_a_job_loaded_by_incremental_runs_counts_every_run_s_rejects(
    make_database: Any, tmp_path: Path
) -> None:
    """Two incremental runs each rejected a row of the new file they loaded; a plain run
    then found the job loaded and reported the last run's alone: 1 row, one load_id, where the
    reject file held both (a nightly-script tryout: `verify --load-id` built from the report
    would miss the first run's lines). Each run keeps its own --max-bad-rows allowance."""
    db = make_database()
    d = tmp_path / "drop"
    d.mkdir()
    rejects = tmp_path / "rejects.jsonl"
    incr = config(db, tmp_path, incremental=True, rejects=rejects, max_bad_rows=1)
    ids = []
    for k, (lo, hi) in enumerate(((0, 10), (10, 20))):
        (d / f"p{k}.csv").write_text(HEADER + "".join(ROWS[lo:hi]) + "a,b\n", encoding="utf-8")
        run = load(incr, database=db)
        assert run.exit_code == ExitCode.REJECTED_ROWS and run.rows_rejected == 1, run.error
        ids.append(run.load_id)
    again = load(dataclasses.replace(incr, incremental=False), database=db)
    assert again.exit_code == ExitCode.REJECTED_ROWS and again.rows_written == 0
    assert again.rows_rejected_before == 2
    assert again.tables[0].earlier_load_ids == ids
    assert any(
        "already loaded by earlier runs of this job; nothing to do (those runs rejected 2 "
        f"row(s): see its reject file {rejects};" in n
        for n in again.notes
    ), again.notes
    assert len(rejects.read_text().splitlines()) == 2


def _orders_nightly(db: Any, tmp_path: Path, **kw: Any) -> tuple[Any, Path, Path, list[str]]:
    """Customers from customers/*.csv, Orders from orders/*.csv, replace mode, incremental:
    the config, the two folders and the lines of the example Orders file."""
    lines = (EXAMPLES / "Orders.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    cd, od = tmp_path / "customers", tmp_path / "orders"
    cd.mkdir()
    od.mkdir()
    (cd / "c1.csv").write_text((EXAMPLES / "Customers.csv").read_text("utf-8"), "utf-8")
    jobs = (TableJob("Customers", (str(cd / "*.csv"),)), TableJob("Orders", (str(od / "*.csv"),)))
    cfg = shop_config(
        db,
        jobs=jobs,
        mode="replace",
        incremental=True,
        state_file=str(tmp_path / "state.json"),
        **SMALL,
        **kw,
    )
    return cfg, cd, od, lines


def _customers_changed(cd: Path, name: str = "c1.csv") -> None:
    text = (EXAMPLES / "Customers.csv").read_text("utf-8")
    (cd / name).write_text(text.replace("@example.com", "@example.org", 1), "utf-8")


@pytest.mark.parametrize("how", ["interrupted", "nothing committed", "files moved away"])
def test_replace_mode_refuses_whenever_the_children_hold_rows_of_earlier_runs(
    make_database: Any, tmp_path: Path, how: str
) -> None:
    """A review of the check above, which asked whether the children's sources were read in
    part: three nights it let through, each ending at exit 0 with orders gone: a child
    interrupted mid-load (its resumed listing is all its sources, but the committed part is
    under customers replaced now); a child whose last run committed nothing (its earlier
    sources recorded, only the new one read); processed files moved away (the listing holds
    only the new file, read in full). Refused whenever the child's job has a record."""
    db = make_database()
    cfg, cd, od, lines = _orders_nightly(db, tmp_path, max_bad_rows=0)
    (od / "o1.csv").write_text(lines[0] + "".join(lines[1:401]), "utf-8")
    if how == "interrupted":
        stop = threading.Event()

        def progress(p: Any) -> None:
            if p.table == "Orders" and p.rows_written >= 100:
                stop.set()

        with pytest.raises(Interrupted):
            load(cfg, database=db, progress=progress, stop=stop)
    else:
        assert written(load(cfg, database=db)) == 600
    if how == "nothing committed":
        bad = lines[401].split(",")
        (od / "o2.csv").write_text(lines[0] + ",".join(["x", *bad[1:]]) + "".join(lines[402:]))
        with pytest.raises(TooManyBadRows):
            load(cfg, database=db)
        (od / "o2.csv").write_text(lines[0] + "".join(lines[401:]), "utf-8")  # fixed
    if how == "files moved away":
        (od / "o1.csv").unlink()
        (cd / "c1.csv").unlink()
        (od / "o2.csv").write_text(lines[0] + "".join(lines[401:]), "utf-8")
        _customers_changed(cd, "c2.csv")
    else:
        _customers_changed(cd)
    before = len(read_table(db, "Orders", ["OrderId"]))
    with pytest.raises(ConfigError) as e:
        load(cfg, database=db)
    assert "while earlier runs loaded Orders, which it does not load again in full" in str(e.value)
    assert len(read_table(db, "Orders", ["OrderId"])) == before  # nothing written


@pytest.mark.parametrize("fixed", [True, False])
def test_the_job_s_reject_history_outlives_a_run_that_committed_nothing(
    make_database: Any, tmp_path: Path, fixed: bool
) -> None:
    """A review of the count above: a night whose new file stopped over --max-bad-rows before
    any commit left a record that the next night set aside, and with it the count and
    load_id of the nights before (a plain run then said 0 rejected, exit 0, the first
    night's row still in the reject file). The finished nights' history is kept in every
    record; the stopped night's own rejects count only if its file is read again as it was."""
    db = make_database()
    d = tmp_path / "drop"
    d.mkdir()
    rejects = tmp_path / "rejects.jsonl"
    incr = config(db, tmp_path, incremental=True, rejects=rejects, max_bad_rows=1)
    (d / "p0.csv").write_text(HEADER + "".join(ROWS[0:10]) + "a,b\n", encoding="utf-8")
    first = load(incr, database=db)
    assert first.exit_code == ExitCode.REJECTED_ROWS
    (d / "p1.csv").write_text(HEADER + "a,b\nc,d\n" + "".join(ROWS[10:20]), encoding="utf-8")
    with pytest.raises(TooManyBadRows):
        load(incr, database=db)
    if fixed:
        (d / "p1.csv").write_text(HEADER + "".join(ROWS[10:20]), encoding="utf-8")
        third = load(incr, database=db)
        assert third.exit_code == ExitCode.OK, third.error
    else:
        third = load(dataclasses.replace(incr, max_bad_rows=5), database=db)
        assert third.exit_code == ExitCode.REJECTED_ROWS and third.rows_rejected == 2
    again = load(dataclasses.replace(incr, incremental=False), database=db)
    assert again.rows_rejected_before == (1 if fixed else 3)
    assert again.exit_code == ExitCode.REJECTED_ROWS
    ids = again.tables[0].earlier_load_ids
    assert ids[0] == first.load_id and ids[-1] == third.load_id


def test_a_plain_run_after_incremental_ones_counts_its_own_rejects_alone(
    make_database: Any, tmp_path: Path
) -> None:
    """A plain run reads every source, so it rejects again what the incremental runs before
    it did: their history was added to its count (a second review: 4 for the 3 rows the
    reject file's last run holds)."""
    db = make_database()
    d = tmp_path / "drop"
    d.mkdir()
    incr = config(db, tmp_path, incremental=True, rejects=tmp_path / "r.jsonl", max_bad_rows=1)
    (d / "p0.csv").write_text(HEADER + "".join(ROWS[0:10]) + "a,b\n", encoding="utf-8")
    assert load(incr, database=db).exit_code == ExitCode.REJECTED_ROWS
    (d / "p1.csv").write_text(HEADER + "a,b\nc,d\n" + "".join(ROWS[10:20]), encoding="utf-8")
    with pytest.raises(TooManyBadRows):  # stopped before a commit
        load(incr, database=db)
    plain = dataclasses.replace(incr, incremental=False, max_bad_rows=5)
    third = load(plain, database=db)
    assert third.rows_rejected == 3 and third.rows_rejected_before == 0
    later = load(plain, database=db)
    assert later.rows_rejected_before == 3
    assert later.tables[0].earlier_load_ids == [third.load_id]


def _shop_two(db: Any, tmp_path: Path, **kw: Any) -> tuple[Any, dict[str, Path]]:
    files = {t: tmp_path / f"{t}.csv" for t in ("Customers", "Orders")}
    for t, f in files.items():
        f.write_text((EXAMPLES / f"{t}.csv").read_text(encoding="utf-8"), encoding="utf-8")
    jobs = tuple(TableJob(t, (str(f),)) for t, f in files.items())
    state = kw.pop("state_file", str(tmp_path / "s.json"))
    cfg = shop_config(db, jobs=jobs, mode="replace", state_file=state, **SMALL, **kw)
    return cfg, files


@pytest.mark.parametrize("incremental", [False, True])
def test_a_restart_stopped_in_a_parent_is_not_resumed_over_a_loaded_child(
    make_database: Any, tmp_path: Path, incremental: bool
) -> None:
    """A second review: a replace-mode --restart stopped in Customers, then the same command
    without it (as the stop says): Orders' job, loaded before the restart and not yet begun
    again, was found loaded, its rows deleted by the restarted customers: exit 0, 0 orders.
    Refused (forgetting every table's runs up front, tried first, erased them also for a
    restart refused before it wrote: a third review); --restart then loads every table."""
    db = make_database()
    cfg, _ = _shop_two(db, tmp_path, incremental=incremental)
    assert written(load(cfg, database=db)) == 800
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.table == "Customers" and p.rows_written >= 100:
            stop.set()

    with pytest.raises(Interrupted) as e:
        load(dataclasses.replace(cfg, restart=True), database=db, progress=progress, stop=stop)
    # the stop says to keep --restart: a resume without it is refused (a fourth review)
    assert "`restart=True` included (in replace mode a resume without it is refused" in str(e.value)
    with pytest.raises(ConfigError, match="earlier runs loaded Orders"):
        load(cfg, database=db)
    assert written(load(dataclasses.replace(cfg, restart=True), database=db)) == 800
    assert len(read_table(db, "Orders", ["OrderId"])) == 600


def test_replace_mode_refuses_a_new_parent_job_over_a_loaded_child(
    make_database: Any, tmp_path: Path
) -> None:
    """A second review: the manifest's Customers pointed at another file (a new job, loaded
    in full) while Orders' job was loaded: Orders was skipped as loaded, its rows deleted by
    the replaced customers, exit 0 and no note. Refused, as an incremental run is."""
    db = make_database()
    cfg, files = _shop_two(db, tmp_path)
    assert written(load(cfg, database=db)) == 800
    v2 = tmp_path / "Customers_v2.csv"
    v2.write_text(files["Customers"].read_text("utf-8").replace("@example.com", "@x.org"), "utf-8")
    renamed = dataclasses.replace(cfg, jobs=(TableJob("Customers", (str(v2),)), cfg.jobs[1]))
    with pytest.raises(ConfigError) as e:
        load(renamed, database=db)
    assert "earlier runs loaded Orders, which this run finds loaded, or resumes" in str(e.value)
    assert len(read_table(db, "Orders", ["OrderId"])) == 600
    assert written(load(dataclasses.replace(renamed, restart=True), database=db)) == 800


def test_replace_mode_refusal_reads_a_gs_state_file(make_database: Any, tmp_path: Path) -> None:
    """A second review: with --state-file gs://..., the check read no state (the dry run's
    peek returns none for gs://), so the tryout's night loaded Customers alone: Orders 0."""
    import uuid

    from gcs_server import gcs_emulator

    from loader.source import make_storage_client

    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        gcs = make_storage_client()
        bucket = gcs.create_bucket(f"s-{uuid.uuid4().hex[:10]}").name
        db = make_database()
        cfg, files = _shop_two(
            db, tmp_path, incremental=True, state_file=f"gs://{bucket}/state.json"
        )
        assert written(load(cfg, database=db, storage_client=gcs)) == 800
        text = files["Customers"].read_text("utf-8")
        files["Customers"].write_text(text.replace("@example.com", "@example.org", 1), "utf-8")
        with pytest.raises(ConfigError):
            load(cfg, database=db, storage_client=gcs)
        assert len(read_table(db, "Orders", ["OrderId"])) == 600


def test_replace_mode_refuses_a_parent_from_stdin_over_a_loaded_child(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third review: Customers read from stdin (never found loaded: written again every
    run) over Orders loaded by the run before: exit 0, Orders at 0 rows. Refused."""
    import io
    import sys

    db = make_database()
    cfg, files = _shop_two(db, tmp_path)
    text = files["Customers"].read_text("utf-8")
    piped = dataclasses.replace(cfg, jobs=(TableJob("Customers", ("-",)), cfg.jobs[1]))

    def stdin() -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))

    stdin()
    assert written(load(piped, database=db)) == 800
    stdin()
    with pytest.raises(ConfigError, match="earlier runs loaded Orders"):
        load(piped, database=db)
    assert len(read_table(db, "Orders", ["OrderId"])) == 600


def test_replace_mode_does_not_refuse_over_a_child_that_committed_nothing(
    make_database: Any, tmp_path: Path
) -> None:
    """A third review: Customers empty on the first run, every order refused (no parent) and
    the run stopped before Orders committed anything; the fixed Customers file was refused
    for "earlier runs loaded Orders", which held nothing."""
    db = make_database()
    cfg, files = _shop_two(db, tmp_path, max_bad_rows=0)
    text = files["Customers"].read_text("utf-8")
    files["Customers"].write_text(text.splitlines(keepends=True)[0], "utf-8")
    with pytest.raises(TooManyBadRows):
        load(cfg, database=db)
    fixed = tmp_path / "Customers_fixed.csv"
    fixed.write_text(text, "utf-8")
    renamed = dataclasses.replace(cfg, jobs=(TableJob("Customers", (str(fixed),)), cfg.jobs[1]))
    assert written(load(renamed, database=db)) == 800
