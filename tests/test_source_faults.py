"""A GCS stream failing in the middle of an object during a load (tests/gcs_faults.py cuts
the emulator's responses short, through a storage client given to ``load(storage_client=...)``):
a transient drop is retried from the right byte and the table ends exact; a persistent one
stops the load with one line and exit 1, and a re-run resumes. The injected client is the only
way the load reaches Cloud Storage: listing, reading and a gs:// state file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from conftest import ROOT, read_table, small_load_config
from gcs_faults import CHUNK, DroppingSession, client, small_chunks
from gcs_server import gcs_emulator

from loader import load
from loader.errors import ExitCode

TESTS = Path(__file__).resolve().parent
DDL = "CREATE TABLE Events (Id INT64 NOT NULL, Payload STRING(MAX)) PRIMARY KEY (Id)"
ROWS = 3000
SMALL = ["--max-batch-rows", "50", "--block-size", "16KiB", "--buffer-size", "64KiB"]


def payload(i: int) -> str:
    return f"event {i:05d} " + "x" * (i % 50)


CSV = ("Id,Payload\n" + "".join(f"{i},{payload(i)}\n" for i in range(ROWS))).encode()
DROP_AT = len(CSV) * 2 // 3 + 123  # in the middle of a later chunk, not on a boundary


@pytest.fixture(scope="module")
def source_uri() -> Iterator[str]:
    from loader.source import make_storage_client

    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        bucket = make_storage_client().create_bucket(f"f-{uuid.uuid4().hex[:10]}")
        bucket.blob("exports/events.csv").upload_from_string(CSV, content_type="text/csv")
        yield f"gs://{bucket.name}/exports/events.csv"


def assert_exact(db: Any) -> None:
    rows = read_table(db, "Events", ["Id", "Payload"])
    assert rows == [(i, payload(i)) for i in range(ROWS)]


def test_transient_drop_mid_object_resumes_at_the_right_byte(
    source_uri: str, make_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(CSV) > 4 * CHUNK and DROP_AT % CHUNK not in (0, CHUNK - 1)
    db = make_database([DDL])
    session = DroppingSession(DROP_AT, times=1)
    small_chunks(monkeypatch)
    cfg = small_load_config(db, "Events", [source_uri])
    report = load(cfg, database=db, storage_client=client(session))
    assert session.drops == 1
    chunk_start = DROP_AT - DROP_AT % CHUNK
    at = session.starts.index(chunk_start)
    assert session.starts[at + 1] == DROP_AT  # the retry asked for the first missing byte
    assert report.exit_code == ExitCode.OK
    assert report.rows_read == report.rows_written == ROWS
    assert_exact(db)


def run_cli(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    code = f"import sys; sys.path[:0] = [{str(TESTS)!r}]; import gcs_faults; gcs_faults.main()"
    return subprocess.run(
        [sys.executable, "-c", code, "load", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
        cwd=ROOT,
        timeout=300,
    )


def test_persistent_drop_stops_with_one_line_and_a_rerun_resumes(
    source_uri: str, make_database: Any, tmp_path: Path
) -> None:
    db = make_database([DDL])
    args = [
        source_uri,
        "--table",
        "Events",
        "--emulator",
        "--database",
        db.database_id,
        *SMALL,
        "--rejects",
        str(tmp_path / "rejects.jsonl"),
        "-q",
    ]
    failed = run_cli([*args, "--max-retry-time", "2"], GCS_DROP_AT=str(DROP_AT))
    assert failed.returncode == 1, failed.stderr
    lines = failed.stderr.splitlines()
    assert lines[0].startswith(
        f"error: network failure reading {source_uri} (gave up after retrying): "
    ), failed.stderr
    assert "Traceback" not in failed.stderr
    assert any(x.startswith("hint: ") and "resumes from its checkpoint" in x for x in lines)
    written = len(read_table(db, "Events", ["Id"]))
    assert 0 < written < ROWS  # it stopped mid-object, after committing the rows before

    again = run_cli([*args, "--json"])
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert any(n.startswith("Events: resuming run") for n in report["notes"])
    assert report["rows_written"] == ROWS - written  # nothing committed twice
    assert_exact(db)


class CountingSession(requests.Session):
    """Records every request's method and path (what went through the injected client)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kw: Any) -> Any:
        self.calls.append((str(method), urlsplit(str(url)).path))
        return super().request(method, url, *args, **kw)


def test_an_injected_storage_client_lists_reads_and_keeps_the_state_file(
    source_uri: str, make_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    session = CountingSession()
    storage = client(session)  # bound to the emulator now
    # Without the injected client the load would go to Google's endpoint, with no credentials.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    bucket = source_uri[len("gs://") :].split("/", 1)[0]
    state = f"gs://{bucket}/state/{uuid.uuid4().hex[:8]}.json"
    cfg = small_load_config(db, "Events", [source_uri], state_file=state)
    report = load(cfg, database=db, storage_client=storage)
    assert report.exit_code == ExitCode.OK and report.rows_written == ROWS
    assert_exact(db)
    obj = f"/b/{bucket}/o/exports%2Fevents.csv"
    assert ("GET", f"/storage/v1{obj}") in session.calls  # listed (looked up)
    assert ("GET", f"/download/storage/v1{obj}") in session.calls  # read
    assert ("POST", f"/upload/storage/v1/b/{bucket}/o") in session.calls  # checkpoints saved
    name = state[len(f"gs://{bucket}/") :]
    assert storage.bucket(bucket).get_blob(name) is not None  # the state file is there
