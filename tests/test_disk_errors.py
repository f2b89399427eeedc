"""A reject file or state file that cannot be written (missing or read-only folder, a full
disk) is a one-line error with an exit code, never a traceback, and leaves the recorded
progress consistent: the same command with a good path finishes with exactly the source rows."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, read_table, small_load_config

import loader.resume.stores
from loader import load
from loader.errors import ExitCode, StateError

DDL = "CREATE TABLE Events (Id INT64 NOT NULL, Payload STRING(MAX)) PRIMARY KEY (Id)"
ROWS = 3000
BAD = {2500, 2700}  # late in the file: the load has committed rows before it meets them
SMALL = ["--max-batch-rows", "50", "--block-size", "16KiB", "--buffer-size", "64KiB"]


def payload(i: int) -> str:
    return f"event {i:05d} " + "x" * (i % 50)


def write_csv(path: Path) -> Path:
    path.write_text(
        "Id,Payload\n"
        + "".join(f"{'x' if i in BAD else ''}{i},{payload(i)}\n" for i in range(ROWS))
    )
    return path


def good_rows() -> list[tuple[int, str]]:
    return [(i, payload(i)) for i in range(ROWS) if i not in BAD]


def run(db: Any, src: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "load",
            str(src),
            "--table",
            "Events",
            "--emulator",
            "--database",
            db.database_id,
            "--max-bad-rows",
            "10",
            *SMALL,
            "-q",
            *args,
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=300,
    )


def one_line_error(p: subprocess.CompletedProcess[str], code: int, first: str) -> None:
    assert p.returncode == code, p.stderr
    lines = p.stderr.splitlines()
    assert lines[0] == first, p.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: ") and "Traceback" not in p.stderr


def finish_with_good_rejects(db: Any, src: Path, tmp_path: Path) -> None:
    rejects = tmp_path / "good" / "rejects.jsonl"
    p = run(db, src, "--rejects", str(rejects))
    assert p.returncode == ExitCode.REJECTED_ROWS, p.stderr
    assert read_table(db, "Events", ["Id", "Payload"]) == good_rows()
    records = sorted(json.loads(x)["record"] for x in rejects.read_text().splitlines())
    assert records == sorted(i + 1 for i in BAD)  # each bad row once


def test_reject_folder_that_cannot_be_created_fails_before_loading(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    bad = blocker / "sub" / "rejects.jsonl"
    p = run(db, src, "--rejects", str(bad))
    one_line_error(
        p, 2, f"error: cannot write the reject file {bad}: {blocker} is a file, not a folder"
    )
    assert read_table(db, "Events", ["Id"]) == []  # failed early: nothing loaded
    assert "resumes" not in p.stderr  # nothing began (a tryout read it as a resume to come)
    finish_with_good_rejects(db, src, tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_reject_folder_fails_before_loading(make_database: Any, tmp_path: Path) -> None:
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        p = run(db, src, "--rejects", str(ro / "rejects.jsonl"))
    finally:
        ro.chmod(0o700)
    one_line_error(
        p, 2, f"error: cannot write the reject file {ro / 'rejects.jsonl'}: Permission denied"
    )
    assert read_table(db, "Events", ["Id"]) == []


def test_full_disk_under_the_reject_file_mid_load(make_database: Any, tmp_path: Path) -> None:
    db = make_database([DDL])
    src = write_csv(tmp_path / "events.csv")
    p = run(db, src, "--rejects", "/dev/full")  # opens fine; every write fails with ENOSPC
    one_line_error(p, 2, "error: cannot write the reject file /dev/full: No space left on device")
    assert "free disk space" in p.stderr and "a re-run resumes where this one stopped" in p.stderr
    loaded = read_table(db, "Events", ["Id"])
    assert 0 < len(loaded) < len(good_rows())  # stopped mid-load, at the first bad row
    finish_with_good_rejects(db, src, tmp_path)


class FullDisk:
    """``open`` for loader.resume.stores: the n-th state file write onwards fails with ENOSPC."""

    def __init__(self, after: int) -> None:
        self.after, self.calls = after, 0

    def __call__(self, path: Any, mode: str = "r", **kw: Any) -> Any:
        f = open(path, mode, **kw)  # noqa: SIM115 - handed to the caller
        if "w" in mode:
            self.calls += 1
            if self.calls > self.after:
                f.close()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return f


def test_full_disk_under_the_state_file_mid_load(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /dev/full itself cannot serve: a state file is written beside and renamed over
    db = make_database([DDL])
    src = tmp_path / "events.csv"
    src.write_text("Id,Payload\n" + "".join(f"{i},{payload(i)}\n" for i in range(ROWS)))
    state = tmp_path / "state.json"
    cfg = small_load_config(db, "Events", [src], state_file=state)
    full = FullDisk(after=12)
    monkeypatch.setattr(loader.resume.stores, "open", full, raising=False)
    with pytest.raises(StateError) as e:
        load(cfg, database=db)
    assert str(e.value) == f"cannot write the state file {state}: No space left on device"
    assert e.value.exit_code == ExitCode.USAGE and "free disk space" in (e.value.hint or "")
    assert not (tmp_path / "state.json.tmp").exists()
    saved = json.loads(state.read_text())  # the last good save, intact
    assert [v["status"] for k, v in saved.items() if k.endswith("\x1frun")] == ["running"]
    assert 0 < len(read_table(db, "Events", ["Id"])) < ROWS

    monkeypatch.undo()
    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.OK
    assert any("resuming run" in n for n in report.notes)
    assert read_table(db, "Events", ["Id", "Payload"]) == [(i, payload(i)) for i in range(ROWS)]


def test_a_long_rejected_text_is_cut_in_the_reject_file(tmp_path: Path) -> None:
    import json

    from loader.rejects import MAX_TEXT, Reject, RejectWriter

    w = RejectWriter(tmp_path / "r.rejects.jsonl")
    w.write(Reject("src", 2, 1, "V", "too long", "x" * (MAX_TEXT * 100), "K"))
    w.write(Reject("src", 3, 2, "V", "bad", "short", "K"))
    w.close()
    lines = [json.loads(x) for x in (tmp_path / "r.rejects.jsonl").read_text().splitlines()]
    assert len(lines[0]["text"]) == MAX_TEXT and lines[0]["text_length"] == MAX_TEXT * 100
    assert lines[1]["text"] == "short" and "text_length" not in lines[1]
