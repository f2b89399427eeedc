"""Progress output: a redrawn bar on a terminal, plain periodic lines otherwise, none with -q."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest

from loader.progress import Estimate, Progress, ProgressPrinter, estimate, make_progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def event(rows: int) -> Progress:
    return Progress("Orders", rows * 100, 100_000, rows, rows, 0, 0, rows // 10)


def test_not_a_terminal_gets_periodic_lines_without_a_bar_redraw() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=False, interval=10, clock=clock)
    for i in range(100):
        clock.t = i * 0.5
        p(event(i * 10))
    p.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert 4 <= len(lines) <= 7 and all(x.startswith("progress: Orders [") for x in lines)
    assert "ETA" in lines[-1] and "rows/s" in lines[-1]


def test_terminal_gets_a_redrawn_bar() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=True, clock=clock)
    for i in range(10):
        clock.t = i
        p(event(i * 100))
    p.close()
    assert out.getvalue().count("\r\x1b[2K") >= 10 and out.getvalue().endswith("\n")


def test_quiet_prints_nothing_and_pipes_are_not_terminals() -> None:
    out = io.StringIO()
    q = make_progress(quiet=True, stream=out)
    q(event(5))
    q.close()
    assert out.getvalue() == ""
    p = make_progress(quiet=False, stream=out)
    assert isinstance(p, ProgressPrinter) and p.tty is False


# ---------------------------------------------------------------------------------------------
# Percent and ETA follow rows done, not bytes read (#16 defect 11)


def at(t: float, clock: Clock, p: ProgressPrinter, e: Progress) -> str:
    clock.t = t
    return p.line(e)


def test_read_everything_but_written_nothing_is_not_100_percent() -> None:
    """The reader finishing (a whole input in one buffer) says nothing about what is left:
    0% and no ETA until rows are committed, however many bytes were read."""
    clock = Clock()
    p = ProgressPrinter(io.StringIO(), tty=False, clock=clock)
    read_all = Progress("Orders", 100_000, 100_000, 1_000, 0, 0, 0, 0, reading_done=True)
    text = at(0.0, clock, p, read_all)
    assert "100.0%" not in text and "  0.0% rows 0/1,000 " in text
    assert text.endswith("ETA --:--")
    assert estimate(read_all) == Estimate(0, 1_000, False)


def test_total_is_estimated_from_bytes_while_reading_and_marked() -> None:
    e = Progress("Orders", 25_000, 100_000, 250, 100, 0, 0, 1)
    est = estimate(e)
    assert est == Estimate(100, 1_000, True) and est.fraction == pytest.approx(0.1)
    clock = Clock()
    p = ProgressPrinter(io.StringIO(), tty=False, clock=clock)
    at(0.0, clock, p, e)
    text = at(10.0, clock, p, e)
    # 100 rows in 10 s: 900 left at 10 rows/s
    assert " ~10.0% rows 100/~1,000 " in text and "10 rows/s" in text
    assert text.endswith("ETA 01:30")
    # nothing can be estimated without sizes (stdin) or before the first rows
    assert estimate(Progress("T", 5_000, 0, 50, 0, 0, 0, 0)).total is None
    assert estimate(Progress("T", 0, 10, 0, 0, 0, 0, 0)).fraction is None
    assert "--.-% rows 0/?" in p.line(Progress("T", 5_000, 0, 50, 0, 0, 0, 0))
    # an estimate never reads as done
    assert estimate(Progress("T", 100, 100, 10, 10, 0, 0, 1)).fraction == 0.999


def test_rejected_superseded_and_skipped_rows_count_as_done() -> None:
    e = Progress(
        "T", 10, 10, 100, 60, 10, 0, 3, rows_skipped=20, rows_superseded=10, reading_done=True
    )
    assert e.rows_done == 100 and estimate(e).fraction == 1.0
    clock = Clock()
    p = ProgressPrinter(io.StringIO(), tty=False, clock=clock)
    text = at(4.0, clock, p, e)
    assert "100.0% rows 100/100 (written 60 rejected 10)" in text and text.endswith("ETA 00:00")
    assert estimate(dataclasses.replace(e, rows_written=59)).fraction == 0.99
    e = dataclasses.replace(e, rows_read=10_000, rows_written=9_959)
    assert estimate(e).fraction == 0.999  # 99.99% is drawn 99.9%, not 100.0%


def test_a_tables_final_event_is_always_drawn_once() -> None:
    """Between periodic lines, the final event of each table is still drawn (and close()
    does not draw it again); on a terminal it ends the bar's line."""
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=False, interval=10, clock=clock)
    base = Progress("A", 10, 10, 10, 0, 0, 0, 0, reading_done=True)
    p(base)
    clock.t = 1.0
    p(dataclasses.replace(base, rows_written=5))
    p(dataclasses.replace(base, rows_written=10, commits=2, final=True))
    p(Progress("B", 10, 10, 0, 0, 0, 0, 0))
    p(dataclasses.replace(base, table="B", rows_written=10, final=True))
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert "A [" in lines[1] and "100.0%" in lines[1] and "B [" in lines[2]
    tty = io.StringIO()
    p = ProgressPrinter(tty, tty=True, clock=clock)
    p(dataclasses.replace(base, rows_written=10, final=True))
    p.close()
    assert tty.getvalue().count("\n") == 1 and tty.getvalue().endswith("\n")


# ---------------------------------------------------------------------------------------------
# Tables side by side (loader/waves.py): each gets its line


def test_tables_side_by_side_each_get_a_periodic_line() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=False, interval=10, clock=clock)
    a = Progress("A", 10, 100, 10, 0, 0, 0, 0)
    b = dataclasses.replace(a, table="B")
    for i in range(1, 30):  # A reports far more often than B: B is not drowned out
        clock.t = i
        p(dataclasses.replace(a, rows_written=i))
        if i % 7 == 0:
            p(dataclasses.replace(b, rows_written=i))
    p(dataclasses.replace(b, rows_written=40, rows_read=40, reading_done=True, final=True))
    clock.t = 31
    p.close()
    lines = [x.split(" [")[0] for x in out.getvalue().splitlines()]
    # t=1 (A), t=11 (A, B), t=21 (A, B), B's final, A's last at close
    assert lines == ["progress: A"] + ["progress: A", "progress: B"] * 2 + ["progress: B"] * 1 + [
        "progress: A"
    ]


def test_tables_side_by_side_on_a_terminal_are_redrawn_together() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=True, clock=clock, columns=60)
    a = Progress("A", 10, 100, 10, 0, 0, 0, 0)
    b = dataclasses.replace(a, table="B")
    p(a)
    first = p.line(a)
    clock.t = 1
    p(b)
    assert out.getvalue() == "\r\x1b[2K" + first + "\r\x1b[2K" + p.line(a)[:59] + (
        "\n\x1b[2K" + p.line(b)[:59]
    )
    out.truncate(0), out.seek(0)
    clock.t = 2
    done = dataclasses.replace(a, rows_read=10, rows_written=10, reading_done=True, final=True)
    p(done)  # A's final line stays, B's bar goes on below it
    assert out.getvalue() == "\r\x1b[1A\x1b[2K" + p.line(done)[:59] + "\n\x1b[2K" + p.line(b)[:59]
    out.truncate(0), out.seek(0)
    clock.t = 3
    p(dataclasses.replace(b, rows_written=5))
    p.close()
    assert out.getvalue().startswith("\r\x1b[2KB [") and out.getvalue().endswith("\n")


def test_a_dry_run_says_validated_not_written_and_shows_no_commits() -> None:
    """`validate` and `--dry-run` said "written N" for rows nothing wrote."""
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=False, clock=clock, dry_run=True)
    p(dataclasses.replace(event(10), final=True))
    line = out.getvalue()
    assert "(validated 10 rejected 0)" in line and "written" not in line
    assert "commits" not in line and "retries" not in line and "ETA" in line
    out = io.StringIO()
    ProgressPrinter(out, tty=False, clock=clock)(dataclasses.replace(event(10), final=True))
    assert "(written 10 rejected 0)" in out.getvalue() and "commits 1 retries 0" in out.getvalue()


@pytest.mark.parametrize("gzipped", [False, True])
def test_the_estimate_follows_the_rows_handed_over_not_the_bytes_read_ahead(
    make_database: Any, tmp_path: Path, gzipped: bool
) -> None:
    """The stream's position runs ahead of the rows by every block read ahead (the whole of a
    small file): "~0.0% rows 0/~1,053" for a 400,000-row file. Each block's own input bytes
    (scaled to the stored size of a gzip file) keep the estimate near the truth."""
    import gzip

    from conftest import small_load_config

    from loader import load

    db = make_database(["CREATE TABLE D (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"])
    n = 40_000
    body = "Id,V\n" + "".join(f"{i},value {i * 7919 % 100003}\n" for i in range(n))
    src = tmp_path / ("d.csv.gz" if gzipped else "d.csv")
    src.write_bytes(gzip.compress(body.encode(), mtime=0) if gzipped else body.encode())
    seen: list[Progress] = []
    cfg = small_load_config(db, "D", [src], dry_run=True, buffer_size=64 << 20)
    load(cfg, database=db, progress=seen.append)
    totals = [estimate(p).total for p in seen if not p.reading_done and p.rows_read >= n // 10]
    assert totals, "no event while reading"
    assert all(0.8 * n <= (t or 0) <= 1.2 * n for t in totals), (n, totals)


def test_a_short_tables_last_line_has_its_rate() -> None:
    """Under half a second a running rate is noise ("-- rows/s"), but the last line of a
    table that took that long says what it did."""
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=False, interval=10, clock=clock)
    base = Progress("A", 10, 10, 2_000, 0, 0, 0, 0, reading_done=True)
    p(base)
    clock.t = 0.25
    p(dataclasses.replace(base, rows_written=2_000, final=True))
    first, last = out.getvalue().splitlines()
    assert "-- rows/s" in first
    assert "8,000 rows/s" in last


def test_a_table_whose_one_event_is_its_last_gets_the_rate_of_its_own_time() -> None:
    """A Beam table sends one event, when its pipeline ends: timed from that event, its rate
    was rows / 1e-9 s (33,322,250,111 rows/s in a tryout)."""
    out, clock = io.StringIO(), Clock()
    clock.t = 100.0
    p = ProgressPrinter(out, tty=False, interval=10, clock=clock)
    end = Progress("Orders", 10_000, 10_000, 300_000, 300_000, 0, 0, 60, reading_done=True)
    p(dataclasses.replace(end, final=True, elapsed_s=10.0))
    p.close()
    assert "30,000 rows/s" in out.getvalue()


def test_the_last_event_has_read_every_byte(make_database: Any, tmp_path: Path) -> None:
    """Each block's size leaves out what the lexer drops (the CR of CRLF, the second quote of
    a doubled one): a finished load's last line said "read 546 12.6KiB/13.2KiB" (a tryout)."""
    from conftest import small_load_config

    from loader import load

    db = make_database(["CREATE TABLE D (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"])
    body = "Id,V\r\n" + "".join(f'{i},"say ""{i}"""\r\n' for i in range(3_000))
    src = tmp_path / "d.csv"
    src.write_bytes(body.encode())
    seen: list[Progress] = []
    load(small_load_config(db, "D", [src], dry_run=True), database=db, progress=seen.append)
    last = seen[-1]
    assert last.final and last.bytes_read == last.bytes_total == len(body)


def test_a_dry_run_s_table_shows_batches_not_commits() -> None:
    """A CI tryout: validate's table had a `written` column (0), `commits 0` beside
    `mut/commit 30/30`, and commit latencies, of a run that commits nothing."""
    from loader.report import LoadReport, TableReport

    t = TableReport(table="T", rows_read=10, rows_rejected=1, mutations=[30, 20], elapsed_s=1.0)
    text = LoadReport(database="d", mode="upsert", dry_run=True, tables=[t]).render()
    head, row = text.splitlines()[:2]
    assert head.split() == ["table", "read", "rejected", "batches", "mut/batch", "elapsed",
                            "rows/s"]  # fmt: skip
    assert row.split() == ["T", "10", "1", "2", "20/30", "1.00s", "10"]


def test_a_resumed_run_s_rate_and_eta_leave_out_the_rows_it_skipped() -> None:
    """A tryout's resume: its ETA read 02:46, then 04:44, 05:01, 05:21 as the writing went
    on, the rate counting the rows the interrupted run had committed, which take no time."""
    clock = Clock()
    p = ProgressPrinter(io.StringIO(), tty=False, clock=clock)
    e = Progress("T", 10, 10, 1_000_000, 10_000, 0, 0, 5, rows_skipped=400_000)
    e = dataclasses.replace(e, reading_done=True)
    at(0.0, clock, p, dataclasses.replace(e, rows_written=0, rows_skipped=0))
    text = at(10.0, clock, p, e)
    # 10,000 rows written in 10 s: 1,000 rows/s, 590,000 rows left
    assert "1,000 rows/s" in text and text.endswith("ETA 09:50"), text
    skipped_only = at(20.0, clock, p, dataclasses.replace(e, rows_written=0))
    assert "0 rows/s" in skipped_only and skipped_only.endswith("ETA --:--"), skipped_only
