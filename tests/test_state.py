"""Checkpoints in a Cloud Storage object (``--state-file gs://...``).

The gcp-storage-emulator ignores generation preconditions, so the precondition logic (who may
overwrite the object) is tested against a small fake that enforces them the way GCS does; the
real reads, writes and a resume run against the emulator.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any, Optional

import pytest
from conftest import EXAMPLES, ROOT, SHOP_DDL
from gcs_server import gcs_emulator
from google.api_core import exceptions as gexc
from test_load_e2e import TABLES, assert_table_equals_csv, shop_config

from loader import load
from loader.errors import ExitCode, Interrupted, StateError
from loader.resume.stores import GcsStateStore, open_state_store

# -- a fake that enforces preconditions ----------------------------------------------------------


class FakeBlob:
    """One object with GCS's generation semantics; records every upload's precondition."""

    def __init__(self) -> None:
        self.data: Optional[bytes] = None
        self.generation: Optional[int] = None
        self.live_generation = 0
        self.uploads: list[Optional[int]] = []
        self.lose_next_reply = False
        self.fail_with: Optional[Exception] = None

    def upload_from_string(
        self, data: bytes, content_type: str = "", if_generation_match: Optional[int] = None
    ) -> None:
        self.uploads.append(if_generation_match)
        if self.fail_with is not None:
            raise self.fail_with
        if if_generation_match is not None and if_generation_match != self.live_generation:
            raise gexc.PreconditionFailed("conditionNotMet")
        self.data, self.live_generation = data, self.live_generation + 1
        if self.lose_next_reply:  # applied; the client's retry then meets its own write
            self.lose_next_reply = False
            self.uploads.append(if_generation_match)
            raise gexc.PreconditionFailed("conditionNotMet")
        self.generation = self.live_generation

    def reload(self) -> None:
        self.generation = self.live_generation

    def download_as_bytes(self, if_generation_match: Optional[int] = None) -> bytes:
        assert self.data is not None
        if if_generation_match is not None and if_generation_match != self.live_generation:
            raise gexc.PreconditionFailed("conditionNotMet")
        return self.data


class FakeClient:
    """Hands out views of one shared object, as separate runs' clients would."""

    def __init__(self, shared: FakeBlob) -> None:
        self.shared = shared
        self.view = FakeView(shared)

    def bucket(self, name: str) -> Any:
        client = self

        class Bucket:
            def blob(self, blob_name: str) -> Any:
                return client.view

            def get_blob(self, blob_name: str) -> Any:
                if client.shared.data is None:
                    return None
                client.view.generation = client.shared.live_generation
                return client.view

        return Bucket()


class FakeView:
    """One run's Blob object: its own idea of the generation, the shared object behind it."""

    def __init__(self, shared: FakeBlob) -> None:
        self.shared = shared
        self.generation: Optional[int] = None

    def upload_from_string(self, data: bytes, **kw: Any) -> None:
        self.shared.upload_from_string(data, **kw)
        self.generation = self.shared.generation

    def reload(self) -> None:
        self.generation = self.shared.live_generation

    def download_as_bytes(self, **kw: Any) -> bytes:
        return self.shared.download_as_bytes(**kw)


def store(shared: FakeBlob, **kw: Any) -> GcsStateStore:
    return GcsStateStore("gs://bkt/state/job.json", storage_client=FakeClient(shared), **kw)


def test_open_state_store_hands_the_storage_client_to_a_gs_store() -> None:
    obj = FakeBlob()
    st = open_state_store("gs://bkt/state/job.json", None, storage_client=FakeClient(obj))
    assert isinstance(st, GcsStateStore)
    st.put("r", "T", "run", {"status": "running"})
    assert obj.uploads == [0]  # written through the client it was given


def test_each_write_is_conditional_on_the_generation_last_written() -> None:
    obj = FakeBlob()
    a = store(obj)
    a.put("r", "T", "run", {"status": "running"})
    a.put("r", "T", "run", {"status": "done"})
    assert obj.uploads == [0, 1]  # 0: the object must not exist yet
    b = store(obj)  # a later run reads it, then continues its generation chain
    assert b.get("r", "T", "run") == {"status": "done"}
    b.put("r", "T", "run", {"status": "running"})
    assert obj.uploads == [0, 1, 2]
    assert json.loads(obj.data or b"")["r\x1fT\x1frun"] == {"status": "running"}


@pytest.mark.parametrize("object_exists", [False, True])
def test_a_second_run_cannot_clobber_the_first(object_exists: bool) -> None:
    obj = FakeBlob()
    if object_exists:
        store(obj).put("r", "T", "run", {"status": "running"})
    first, second = store(obj), store(obj)
    first.put("r", "T", "run", {"status": "running", "flushes": 1})
    with pytest.raises(StateError) as e:
        second.put("r", "T", "run", {"status": "running", "flushes": 0})
    assert str(e.value).startswith(
        "the state file gs://bkt/state/job.json was changed by another run"
    )
    assert e.value.exit_code == ExitCode.USAGE and "same `state_file`" in (e.value.hint or "")
    assert json.loads(obj.data or b"")["r\x1fT\x1frun"]["flushes"] == 1  # first run's data kept


def test_own_retried_upload_after_a_lost_reply_is_not_a_conflict() -> None:
    obj = FakeBlob()
    s = store(obj)
    s.put("r", "T", "run", {"n": 1})
    obj.lose_next_reply = True
    s.put("r", "T", "run", {"n": 2})  # the 412 answers our own write: accepted
    s.put("r", "T", "run", {"n": 3})
    assert obj.uploads == [0, 1, 1, 2]
    assert json.loads(obj.data or b"")["r\x1fT\x1frun"] == {"n": 3}


def test_batch_markers_are_deferred_to_one_write_per_interval() -> None:
    obj, now = FakeBlob(), [100.0]
    s = store(obj, min_interval=1.0, clock=lambda: now[0])
    s.put("r", "T", "run", {"status": "running"})
    s.put("r", "T", "b/00000000/00000000", {"rows": 5})  # within the second: deferred
    s.put("r", "T", "b/00000000/00000001", {"rows": 5})
    assert len(obj.uploads) == 1
    now[0] += 1.5
    s.put("r", "T", "b/00000000/00000002", {"rows": 5})  # a second later: written
    assert len(obj.uploads) == 2
    s.put("r", "T", "b/00000000/00000003", {"rows": 5})
    s.sync()  # the end of a table (or an error) writes what was deferred
    assert len(obj.uploads) == 3
    assert len(store(obj).parts("r", "T", "b/")) == 4
    s.sync()
    assert len(obj.uploads) == 3  # nothing left to write


@pytest.mark.parametrize(
    "exc,message,hint",
    [
        (
            gexc.NotFound("bucket"),
            "cannot write the state file gs://bkt/state/job.json: bucket gs://bkt does not exist",
            "gcloud storage buckets create gs://bkt",
        ),
        (
            gexc.Forbidden("no storage.objects.create"),
            "permission denied writing the state file gs://bkt/state/job.json",
            "roles/storage.objectUser",
        ),
        (
            gexc.RetryError("Timeout of 120.0s exceeded", ConnectionError("reset")),
            "cannot write the state file gs://bkt/state/job.json: ConnectionError: reset",
            "re-run",
        ),
    ],
)
def test_storage_errors_become_one_line_state_errors(
    exc: Exception, message: str, hint: str
) -> None:
    obj = FakeBlob()
    s = store(obj)
    obj.fail_with = exc
    with pytest.raises(StateError) as e:
        s.put("r", "T", "run", {})
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert hint in (e.value.hint or "")


# -- against the GCS emulator --------------------------------------------------------------------


@pytest.fixture(scope="module")
def gcs_client() -> Iterator[Any]:
    from loader.source import make_storage_client

    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        yield make_storage_client()


def state_rows(client: Any, bucket: str, name: str) -> dict[str, Any]:
    return dict(json.loads(client.bucket(bucket).blob(name).download_as_bytes()))


def test_interrupted_load_resumes_from_a_gcs_state_file(
    gcs_client: Any, make_database: Any
) -> None:
    bucket = gcs_client.create_bucket(f"s-{uuid.uuid4().hex[:10]}").name
    uri = f"gs://{bucket}/jobs/shop/state.json"
    db = make_database()
    cfg = shop_config(db, state_file=uri, batch_rows=20, block_size=16 << 10, buffer_size=64 << 10)
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.table == "Orders" and p.rows_written > 0:
            stop.set()  # as a SIGINT would, once Orders is partly loaded

    with pytest.raises(Interrupted) as e:
        load(cfg, database=db, progress=progress, stop=stop)
    first = e.value.report  # type: ignore[attr-defined]
    rows = state_rows(gcs_client, bucket, "jobs/shop/state.json")
    runs = {k.split("\x1f")[1]: v for k, v in rows.items() if k.endswith("\x1frun")}
    assert runs["Customers"]["status"] == "done" and runs["Orders"]["status"] == "running"
    assert "OrderItems" not in runs  # not started

    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.OK
    assert any("Orders: resuming run" in n for n in report.notes)
    assert any("Customers: already loaded" in n for n in report.notes)
    assert first.rows_written + report.rows_written == 2435  # resumed, nothing written twice
    # the runs before, whose reject lines are these jobs' too (verify --load-id), are named
    assert report.load_id != first.load_id
    earlier = {t.table: t.earlier_load_ids for t in report.tables}
    assert earlier["Orders"] == earlier["Customers"] == [first.load_id]
    assert earlier["OrderItems"] == []  # not started before
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")
    rows = state_rows(gcs_client, bucket, "jobs/shop/state.json")
    runs = {k.split("\x1f")[1]: v for k, v in rows.items() if k.endswith("\x1frun")}
    assert sorted(runs) == sorted(TABLES) and all(r["status"] == "done" for r in runs.values())
    assert not [k for k in rows if "\x1fb/" in k]  # no stale batch markers


def test_missing_bucket_is_a_one_line_error(gcs_client: Any, spanner_emulator: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "load",
            str(EXAMPLES / "Products.csv"),
            "--table",
            "Products",
            "--emulator",
            "--database",
            "gcsstate",
            "--ddl",
            str(SHOP_DDL),
            "--state-file",
            "gs://no-such-bucket-here/state.json",
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[0] == (
        "error: cannot write the state file gs://no-such-bucket-here/state.json: "
        "bucket gs://no-such-bucket-here does not exist"
    )
    assert "Traceback" not in p.stderr and p.stderr.splitlines()[1].startswith("hint: ")


# -- the job's fingerprint ---------------------------------------------------------------------


def test_the_fingerprint_is_the_same_under_any_hash_seed() -> None:
    """commit_timestamp_columns is a frozenset: its repr() order follows PYTHONHASHSEED, so a
    repr-based fingerprint made two runs of one job disagree ("the options differ")."""
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "from loader.convert import ConvertOptions\n"
        "from loader.parse import Dialect\n"
        "from loader.resume.stores import canonical, digest\n"
        "cols = frozenset(f'C{i}' for i in range(12))\n"
        "print(digest([canonical(ConvertOptions(commit_timestamp_columns=cols)),"
        " canonical(Dialect(null_markers=('NULL', r'\\N')))]))\n"
    )
    out = set()
    for seed in ("1", "2", "3", "12345"):
        p = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
        assert p.returncode == 0, p.stderr
        out.add(p.stdout.strip())
    assert len(out) == 1, out


def test_an_option_added_at_its_default_does_not_change_the_fingerprint() -> None:
    from dataclasses import dataclass

    from loader.resume.stores import canonical, digest

    @dataclass(frozen=True)
    class Before:
        a: int = 1
        b: tuple[str, ...] = ()

    @dataclass(frozen=True)
    class After:
        a: int = 1
        b: tuple[str, ...] = ()
        new: bool = False

    assert digest(canonical(Before(a=2))) == digest(canonical(After(a=2)))
    assert digest(canonical(Before(a=2))) != digest(canonical(After(a=2, new=True)))
    assert canonical(Before()) == {}


def test_the_marker_mutation_is_what_the_client_would_send() -> None:
    """The marker is encoded by the loader itself (#17 scope 3: no client internals outside
    the committer); its bytes are the client's, commit-timestamp sentinel included."""
    from google.cloud.spanner_v1 import COMMIT_TIMESTAMP, Mutation
    from google.cloud.spanner_v1._helpers import _make_list_value_pbs

    from loader.resume.stores import STATE_COLUMNS, STATE_TABLE, SpannerStateStore

    value = {"rows": 50, "rejected": 1}
    ours = SpannerStateStore(None).marker_mutation("run1", "Orders", "b/000001/000002", value)
    theirs = Mutation(
        insert_or_update=Mutation.Write(
            table=STATE_TABLE,
            columns=list(STATE_COLUMNS),
            values=_make_list_value_pbs(
                [
                    [
                        "run1",
                        "Orders",
                        "b/000001/000002",
                        json.dumps(value, sort_keys=True),
                        COMMIT_TIMESTAMP,
                    ]
                ]
            ),
        )
    )
    assert ours == Mutation.serialize(theirs)


def test_a_marker_mutation_is_read_back_by_the_key_it_holds() -> None:
    """After a lost reply the runner asks whether a commit's marker landed: the store reads
    the marker's row by the run, table and part decoded from the mutation's own bytes."""
    from loader.resume.stores import SpannerStateStore

    store = SpannerStateStore(None)
    asked: list[tuple[str, str, str]] = []

    def get(run: str, table: str, part: str) -> Any:
        asked.append((run, table, part))
        return {"rows": 5} if part.endswith("0-5") else None

    store.get = get  # type: ignore[method-assign]
    landed = store.marker_mutation("run1", "Orders", "b/00000001/00000002/0-5", {"rows": 5})
    lost = store.marker_mutation("run1", "Orders", "b/00000001/00000003", {"rows": 9})
    assert store.marker_landed(landed) and not store.marker_landed(lost)
    assert asked == [
        ("run1", "Orders", "b/00000001/00000002/0-5"),
        ("run1", "Orders", "b/00000001/00000003"),
    ]


class _AbortingFirst:
    """A database whose first ``aborts`` batch commits are aborted, as the emulator aborts a
    commit while another transaction is open (which clients before 3.5x do not retry)."""

    def __init__(self, database: Any, aborts: int) -> None:
        self.database, self.aborts = database, aborts

    def __getattr__(self, name: str) -> Any:
        return getattr(self.database, name)

    @contextlib.contextmanager
    def batch(self) -> Iterator[Any]:
        with self.database.batch() as b:
            yield b
            if self.aborts:
                self.aborts -= 1
                raise gexc.Aborted("Transaction aborted due to active transaction")


def test_state_writes_are_repeated_while_spanner_aborts_them(make_database: Any) -> None:
    from loader.resume.stores import SpannerStateStore

    db = make_database([])
    store = SpannerStateStore(_AbortingFirst(db, aborts=2))
    store.put("r", "T", "p1", {"n": 1})
    assert store.claim("r", "T", "p2", {"n": 2}) is True
    store.database.aborts = 1
    assert store.claim("r", "T", "p2", {"n": 3}) is False  # aborted once, then already there
    assert store.parts("r", "T", "p") == {"p1": {"n": 1}, "p2": {"n": 2}}
    store.database.aborts = 3
    store.delete_prefix("r", "T", "p")
    assert store.parts("r", "T", "p") == {}
