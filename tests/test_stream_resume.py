"""A job that reads stdin or a pipe: its checkpoint records nothing of what the stream held, so
a later run, fed other rows, must neither find the job "already loaded" nor skip what an
interrupted run committed. Both silently dropped the new input (exit 0)."""

from __future__ import annotations

import io
import sys
from typing import Any, Sequence

import pytest
from conftest import read_table, small_load_config
from test_resume_state import DDL, ROWS, payload, stop_partway

from loader import LoadConfig, load
from loader.errors import Interrupted, StateError


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def feed(monkeypatch: pytest.MonkeyPatch, ids: Sequence[int]) -> None:
    body = "Id,Payload\n" + "".join(f"{i},{payload(i)}\n" for i in ids)
    monkeypatch.setattr(sys, "stdin", _Stdin(body.encode()))


def stdin_config(db: Any, **kw: Any) -> LoadConfig:
    cfg: LoadConfig = small_load_config(db, "Events", ["-"], **kw)
    return cfg


def test_a_finished_stdin_job_fed_new_rows_loads_them(
    make_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    cfg = stdin_config(db)
    feed(monkeypatch, range(10))
    load(cfg, database=db)
    feed(monkeypatch, range(100, 110))
    report = load(cfg, database=db)
    assert report.rows_written == 10
    assert not any("already loaded" in n for n in report.notes), report.notes
    expected = [(i, payload(i)) for i in [*range(10), *range(100, 110)]]
    assert read_table(db, "Events", ["Id", "Payload"]) == expected


def test_an_interrupted_stdin_job_fed_other_rows_writes_every_one(
    make_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    cfg = stdin_config(db)
    feed(monkeypatch, range(ROWS))
    first = stop_partway(cfg, db, "interrupt", 1500, Interrupted)
    assert 0 < first.rows_written < ROWS
    later = range(ROWS, 2 * ROWS)
    feed(monkeypatch, later)
    report = load(cfg, database=db)
    assert report.rows_written == ROWS and report.rows_skipped == 0
    assert any("not resuming the interrupted run" in n for n in report.notes), report.notes
    got = dict(read_table(db, "Events", ["Id", "Payload"]))
    assert all(got.get(i) == payload(i) for i in later)


def test_insert_mode_does_not_resume_a_stdin_job_and_says_how_to_finish_it(
    make_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    cfg = stdin_config(db, mode="insert")
    feed(monkeypatch, range(ROWS))
    first = stop_partway(cfg, db, "interrupt", 1500, Interrupted)
    assert first.error is not None and "to resume" not in first.error  # it said so, wrongly
    feed(monkeypatch, range(ROWS))
    with pytest.raises(StateError) as e:
        load(cfg, database=db)
    assert "pipe or stdin" in str(e.value) and "mode='upsert'" in (e.value.hint or "")
    # the way out the hint names: every source row, whatever the interrupted run wrote
    feed(monkeypatch, range(ROWS))
    report = load(LoadConfig(**{**cfg.__dict__, "mode": "upsert"}), database=db)
    assert report.exit_code == 0
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


@pytest.mark.parametrize("mode, says", [("insert", "mode='upsert'"), ("upsert", "harmless")])
def test_a_stopped_stdin_load_does_not_promise_a_resume(
    make_database: Any, monkeypatch: pytest.MonkeyPatch, mode: str, says: str
) -> None:
    import threading

    db = make_database([DDL])
    feed(monkeypatch, range(ROWS))
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.rows_written >= 1500:
            stop.set()

    with pytest.raises(Interrupted) as e:
        load(stdin_config(db, mode=mode), database=db, progress=progress, stop=stop)
    assert "to resume" not in str(e.value)
    assert (e.value.hint or "").startswith("a pipe or stdin is not resumed")
    assert says in (e.value.hint or "")
