"""Crash safety: kill -9 at many points and resume, graceful stop, incremental runs, state
file errors. Every test ends by comparing the tables with the CSV source exactly."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, ROOT, SHOP_DDL
from test_load_e2e import TABLES, assert_table_equals_csv

SMALL = ["--max-batch-rows", "20", "--block-size", "16KiB", "--buffer-size", "64KiB", "-q"]


@pytest.fixture(scope="module")
def own_emulator() -> Any:
    """These tests kill loaders mid-flight: they get an emulator of their own, so whatever a
    killed process leaves on the server cannot touch other test modules."""
    from google.cloud import spanner

    from loader.emulator import start_emulator

    em = start_emulator()
    old = os.environ.get("SPANNER_EMULATOR_HOST")
    os.environ["SPANNER_EMULATOR_HOST"] = em.address
    try:
        client = spanner.Client(project="test-project")
        yield em.address, client
    finally:
        if old is None:
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
        else:
            os.environ["SPANNER_EMULATOR_HOST"] = old
        em.stop()


@pytest.fixture
def spanner_client(own_emulator: Any) -> Any:
    return own_emulator[1]


@pytest.fixture
def spanner_emulator(own_emulator: Any) -> str:
    return str(own_emulator[0])


def start(args: list[str]) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "loader", "load", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def shop_args(database: str) -> list[str]:
    return [
        "--manifest",
        str(EXAMPLES / "manifest.json"),
        "--emulator",
        "--database",
        database,
        "--ddl",
        str(SHOP_DDL),
        "--concurrency",
        "4",
    ]


def database(spanner_client: Any, name: str) -> Any:
    return spanner_client.instance("test-instance").database(name)


def wait_for_rows(spanner_client: Any, name: str, tables: list[str], p: Any) -> None:
    """Until ``p`` has written a row to one of ``tables`` of database ``name``: a signal sent
    after a fixed sleep could come while a slow machine still starts the process (before the
    load, where Ctrl-C is a plain abort)."""
    from google.api_core import exceptions as gexc

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        try:
            with database(spanner_client, name).snapshot(multi_use=True) as snap:
                if any(list(snap.execute_sql(f"SELECT COUNT(*) FROM {t}"))[0][0] for t in tables):
                    return
        except (gexc.NotFound, gexc.InvalidArgument):
            pass  # the database or its tables are not made yet
        time.sleep(0.1)
    raise AssertionError(f"no row written to {tables} ({p.poll()=})")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["upsert", "insert"])
def test_kill_9_at_random_points_then_resume(spanner_client: Any, mode: str) -> None:
    name = f"kill-{mode}"
    # the throttle stretches the load to a few seconds so kills land all along it
    args = [*shop_args(name), "--mode", mode, *SMALL, "--max-rows-per-second", "100"]
    rng = random.Random(20261121 if mode == "upsert" else 7)
    kills = 0
    for _attempt in range(40):
        p = start(args)
        if kills < 12:
            time.sleep(rng.uniform(0.7, 2.2))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
                kills += 1
                continue
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        break
    else:
        pytest.fail("the load never completed")
    assert kills >= 10, f"only {kills} kills landed"
    db = database(spanner_client, name)
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "verify",
            "--manifest",
            str(EXAMPLES / "manifest.json"),
            "--emulator",
            "--database",
            name,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert verify.returncode == 0 and verify.stdout.count(": ok:") == 4, verify.stdout
    # and a re-run of the finished job is a no-op
    p = start([*args, "--json"])
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    report = json.loads(out)
    assert report["rows_written"] == 0 and any("nothing to do" in n for n in report["notes"])


@pytest.mark.slow
def test_sigint_stops_gracefully_and_resume_finishes(spanner_client: Any) -> None:
    args = [*shop_args("sigint"), *SMALL, "--max-rows-per-second", "100"]
    p = start(args)
    wait_for_rows(spanner_client, "sigint", TABLES, p)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    # at 100 rows/s the shop tables take far longer than the first row: the stop is graceful
    assert p.returncode == 5, err
    assert "run the same command again" in err and "Traceback" not in err
    p = start(args)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    db = database(spanner_client, "sigint")
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")


@pytest.mark.slow
def test_incremental_loads_new_files_once(spanner_client: Any, tmp_path: Path) -> None:
    lines = (EXAMPLES / "Products.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    (tmp_path / "drop").mkdir()
    (tmp_path / "drop" / "p1.csv").write_text(header + "".join(rows[:40]), encoding="utf-8")
    (tmp_path / "drop" / "p2.csv").write_text(header + "".join(rows[40:70]), encoding="utf-8")
    args = [
        str(tmp_path / "drop" / "*.csv"),
        "--table",
        "Products",
        "--emulator",
        "--database",
        "incr",
        "--ddl",
        str(SHOP_DDL),
        "--incremental",
        "--json",
        "-q",
    ]

    def run() -> dict[str, Any]:
        p = start(args)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        return dict(json.loads(out))

    assert run()["rows_written"] == 70
    assert run()["rows_written"] == 0  # nothing new
    (tmp_path / "drop" / "p3.csv").write_text(header + "".join(rows[70:]), encoding="utf-8")
    third = run()
    assert third["rows_written"] == len(rows) - 70 and third["rows_read"] == len(rows) - 70
    assert run()["rows_written"] == 0
    (tmp_path / "all.csv").write_text(header + "".join(rows), encoding="utf-8")
    assert_table_equals_csv(database(spanner_client, "incr"), "Products", tmp_path / "all.csv")


@pytest.mark.slow
def test_changed_source_is_refused_unless_restart(spanner_client: Any, tmp_path: Path) -> None:
    src = tmp_path / "p.csv"
    lines = (EXAMPLES / "Products.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    src.write_text("".join(lines[:30]), encoding="utf-8")
    args = [
        str(src),
        "--table",
        "Products",
        "--emulator",
        "--database",
        "changed",
        "--ddl",
        str(SHOP_DDL),
        "-q",
    ]
    p = start(args)
    assert p.wait(timeout=300) == 0
    time.sleep(0.01)
    src.write_text("".join(lines[:50]), encoding="utf-8")
    p = start(args)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 2 and "changed" in err and "--restart" in err, err
    p = start([*args, "--restart"])
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert_table_equals_csv(database(spanner_client, "changed"), "Products", src)


def test_unwritable_state_file_is_a_clear_error(spanner_emulator: str, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    p = start(
        [
            str(EXAMPLES / "Products.csv"),
            "--table",
            "Products",
            "--emulator",
            "--database",
            "statefile",
            "--ddl",
            str(SHOP_DDL),
            "--state-file",
            str(blocker / "state.json"),
            "-q",
        ]
    )
    _, err = p.communicate(timeout=300)
    assert p.returncode == 2 and err.startswith("error: cannot write the state file"), err
    assert "Traceback" not in err


def test_state_file_resume_records_progress(spanner_client: Any, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    args = [*shop_args("statefile2"), *SMALL, "--state-file", str(state)]
    p = start(args)
    assert p.wait(timeout=300) == 0
    rows = json.loads(state.read_text())
    runs = [v for k, v in rows.items() if k.endswith("\x1frun")]
    assert len(runs) == 4 and all(r["status"] == "done" for r in runs)
    db = database(spanner_client, "statefile2")
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")


@pytest.mark.slow
def test_sigint_stops_a_load_that_fits_in_one_flush(spanner_client: Any, tmp_path: Path) -> None:
    """The whole input in one buffer: its batches are all queued at once, and after the
    signal no queued commit may start; a re-run skips the committed batches and ends exact."""
    src = tmp_path / "k.csv"
    n = 120_000
    src.write_text("Id,V\n" + "".join(f"{i},v{i}\n" for i in range(n)), encoding="utf-8")
    ddl = tmp_path / "k.sql"
    ddl.write_text("CREATE TABLE K (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id);\n")
    args = [str(src), "--table", "K", "--emulator", "--database", "oneflush", "--ddl", str(ddl)]
    args += ["--max-batch-rows", "2000", "--max-rows-per-second", "10000", "-q", "--json"]
    p = start(args)
    wait_for_rows(spanner_client, "oneflush", ["K"], p)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 5, err
    first = json.loads(out)
    assert 0 < first["rows_written"] < n, first
    db = database(spanner_client, "oneflush")
    with db.snapshot() as snap:
        landed = list(snap.execute_sql("SELECT COUNT(*) FROM K"))[0][0]
    assert landed == first["rows_written"]
    p = start(args)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    second = json.loads(out)
    assert second["rows_skipped"] == first["rows_written"], second
    assert second["rows_written"] == n - first["rows_written"]
    with db.snapshot() as snap:
        assert list(snap.execute_sql("SELECT COUNT(*), SUM(Id) FROM K"))[0] == [n, n * (n - 1) // 2]
