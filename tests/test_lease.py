"""One run at a time per job (#16 defect 18): the lease in the checkpoint state, and the lock
on a local state file. Unit tests drive :class:`loader.resume.lease.Lease` on an in-memory store with
an injected clock; the end-to-end tests plant another run's lease in the emulator's state
table (or hold a state file's lock) and run the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import read_table

from loader.errors import ExitCode, LeaseHeld, StateError
from loader.resume.lease import Lease
from loader.resume.stores import FileStateStore, SpannerStateStore, _JsonStateStore


class MemoryStore(_JsonStateStore):
    def _save(self, force: bool) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def lease(store: Any, clock: Clock, **kw: Any) -> Lease:
    return Lease(store, "run1", "T", ttl=60, clock=clock, **kw)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_second_run_is_refused_while_the_first_holds_the_lease() -> None:
    store, clock = MemoryStore(), Clock()
    first = lease(store, clock, host="other-host", pid=4242)
    first.acquire()
    try:
        with pytest.raises(LeaseHeld) as e:
            lease(store, clock).acquire()
        assert e.value.exit_code == ExitCode.BUSY == 7
        assert "another run of this job is loading it (host other-host, pid 4242" in str(e.value)
        assert e.value.hint and "lapses at" in e.value.hint
    finally:
        first.release()
    # released: the next run takes it at once, without a note
    second = lease(store, clock)
    second.acquire()
    second.release()
    assert second.notes == []


def test_a_lease_not_renewed_lapses_after_its_ttl() -> None:
    store, clock = MemoryStore(), Clock()
    gone = lease(store, clock, host="other-host", pid=4242)
    gone.acquire()
    gone._stop.set()  # the process vanished: no renewals, no release
    clock.now += 59
    with pytest.raises(LeaseHeld):
        lease(store, clock).acquire()
    clock.now += 2
    late = lease(store, clock)
    late.acquire()
    late.release()
    assert late.term == 0 and "stopped renewing it" in late.notes[0]


def test_a_run_killed_on_this_host_is_taken_over_at_once() -> None:
    store, clock = MemoryStore(), Clock()
    killed = lease(store, clock, pid=dead_pid())
    killed.acquire()
    killed._stop.set()
    nxt = lease(store, clock)
    nxt.acquire()
    try:
        assert "no longer runs" in nxt.notes[0]
    finally:
        nxt.release()


def test_a_holder_that_lost_its_lease_stops_at_its_next_checkpoint() -> None:
    store, clock = MemoryStore(), Clock()
    paused = lease(store, clock, host="other-host", pid=1)
    paused.acquire()
    clock.now += 120  # paused past its expiry; another run takes over
    taker = lease(store, clock)
    taker.acquire()
    paused.renew()
    with pytest.raises(StateError, match="lost the job's lease"):
        paused.check()
    paused.release()  # does not release the taker's term
    with pytest.raises(LeaseHeld):
        lease(store, clock, host="third-host").acquire()
    taker.release()


def test_two_runs_that_claim_the_same_term_at_once_one_wins() -> None:
    store, clock = MemoryStore(), Clock()
    a, b = lease(store, clock, host="a"), lease(store, clock, host="b")
    real_newest = b._newest
    b._newest = lambda: (0, None)  # type: ignore[method-assign] # b read before a claimed
    a.acquire()
    with pytest.raises(LeaseHeld, match="host a"):
        b._newest = lambda: (0, None) if not a.term else real_newest()  # type: ignore[method-assign]
        b.acquire()
    a.release()


def test_a_local_state_file_is_locked_while_a_run_uses_it(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    held = FileStateStore(state)
    try:
        with pytest.raises(LeaseHeld, match=r"in use by another run \(pid \d+\)"):
            FileStateStore(state)
    finally:
        held.close()
    FileStateStore(state).close()  # free again


K_DDL = "CREATE TABLE K (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"


def _load(db: Any, csv: Path, *extra: str) -> Any:
    """The CLI in a process of its own, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "loader",
            "load",
            str(csv),
            "--table",
            "K",
            "--emulator",
            "--database",
            db.database_id,
            "--mode",
            "insert",
            "--quiet",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_cli_a_second_run_of_a_job_stops_with_exit_7_and_writes_nothing(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database([K_DDL])
    csv = tmp_path / "k.csv"
    csv.write_text("Id,V\n1,a\n2,b\n")
    first = _load(db, csv)
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_ids"]["K"]
    # another process (on another host) is loading the same job now
    other = Lease(SpannerStateStore(db), run_id, "K", host="other-host", pid=77)
    other.acquire()
    try:
        second = _load(db, csv, "--restart")
        assert second.returncode == ExitCode.BUSY, second.stderr
        assert json.loads(second.stdout)["status"] == "busy"  # not "failed": nothing was done
        assert "error: K: another run of this job is loading it (host other-host, pid 77" in (
            second.stderr
        )
        assert "hint: wait for that run to end" in second.stderr
    finally:
        other.release()
    # released: the same command runs, and the rows are there once
    third = _load(db, csv, "--restart", "--mode", "upsert")
    assert third.returncode == 0, third.stderr
    assert read_table(db, "K", ["Id", "V"]) == [(1, "a"), (2, "b")]


def test_cli_a_second_run_on_a_locked_state_file_stops_with_exit_7(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database([K_DDL])
    csv = tmp_path / "k.csv"
    csv.write_text("Id,V\n1,a\n")
    state = tmp_path / "job.state.json"
    held = FileStateStore(state)
    try:
        r = _load(db, csv, "--state-file", str(state))
        assert r.returncode == ExitCode.BUSY, r.stderr
        assert f"error: the state file {state} is in use by another run" in r.stderr
    finally:
        held.close()
    assert read_table(db, "K", ["Id", "V"]) == []
    r = _load(db, csv, "--state-file", str(state))
    assert r.returncode == 0, r.stderr


def test_a_lease_this_process_could_not_release_does_not_block_its_next_load() -> None:
    """A load whose state store failed cannot write its release; the next load() in the same
    process takes over at once (another process would see a dead pid)."""
    store, clock = MemoryStore(), Clock()
    first = lease(store, clock)
    first.acquire()
    first.term = 0  # as if the release could not be written
    first.release()
    second = lease(store, clock)
    second.acquire()
    try:
        assert "earlier load in this process" in second.notes[0]
    finally:
        second.release()
    # while one load of this process holds it, another load of the same job is refused
    third = lease(store, clock)
    third.acquire()
    try:
        with pytest.raises(LeaseHeld):
            lease(store, clock).acquire()
    finally:
        third.release()


class HangingStore(MemoryStore):
    """A store whose reads stop answering, as the client's streamed reads do while the
    Spanner endpoint is down (it restarts them on UNAVAILABLE without limit)."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = False
        self.unblock = threading.Event()

    def parts(self, run: str, table: str, prefix: str) -> dict[str, Any]:
        if self.hang:
            self.unblock.wait()
        return super().parts(run, table, prefix)


def test_release_does_not_wait_for_a_store_that_stopped_answering() -> None:
    """Spanner going away mid-load left the load hanging after its commits had failed: the
    release waited for the renewal thread and its own read, neither of which ever ends. The
    release now gives up after `release_timeout` (the lease lapses by itself)."""
    store, clock = HangingStore(), Clock()
    held = lease(store, clock, release_timeout=0.2)
    held.acquire()
    store.hang = True
    try:
        held.release()  # returns: it does not block on the store
        assert held.term == 0
    finally:
        store.unblock.set()
    # once the store answers again the lease is free for the next run
    store.hang = False
    nxt = lease(store, clock)
    nxt.acquire()
    nxt.release()


def test_release_still_marks_the_lease_released_when_the_store_answers() -> None:
    store, clock = MemoryStore(), Clock()
    held = lease(store, clock)
    held.acquire()
    held.release()
    (value,) = store.parts("run1", "T", "lease/").values()
    assert value["released"] is True


class _ReplyLostOnce:
    """A database whose next batch commit is applied but answered UNAVAILABLE (the reply
    lost), which the state store repeats."""

    def __init__(self, database: Any) -> None:
        self.database, self.lose = database, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.database, name)

    @contextlib.contextmanager
    def batch(self) -> Iterator[Any]:
        from google.api_core import exceptions as gexc

        with self.database.batch() as b:
            yield b
        if self.lose:
            self.lose = False
            raise gexc.ServiceUnavailable("injected: applied, reply lost")


def test_a_claim_whose_reply_was_lost_is_still_this_runs(make_database: Any) -> None:
    """The claim's insert was applied, its reply lost and the insert repeated: ALREADY_EXISTS
    for the row this run wrote is not another run holding the lease."""
    db = make_database([])
    store = SpannerStateStore(_ReplyLostOnce(db))
    store.ensure()
    held = Lease(store, "run1", "T", ttl=60, host="a", pid=1)
    held.acquire()  # the claim: applied, reply lost, repeated, found to be its own
    assert held.term and not store.database.lose
    value = {"owner": "someone else", "expires": 1.0}
    assert store.claim("run1", "T", "other/x", value) is True
    assert store.claim("run1", "T", "other/x", {**value, "owner": "a third run"}) is False
    held.release()


@pytest.mark.parametrize("kind", ["memory", "spanner"])
def test_a_restart_keeps_the_lease_it_holds(make_database: Any, kind: str) -> None:
    """`restart=True` forgets the job's progress, not the lease the run took just before: its
    renewal found its term gone and stopped the run as if another had taken over (exit 2
    after every row was written, for any restarted run longer than a renewal period)."""
    store: Any = MemoryStore() if kind == "memory" else SpannerStateStore(make_database([K_DDL]))
    held = Lease(store, "run1", "T", ttl=60, host="a", pid=1)
    held.acquire()
    store.put("run1", "T", "run", {"status": "done"})
    store.put("run1", "T", "b/0000000001/0000000001", {"rows": 1})
    store.delete_prefix("run1", "T", "", keep="lease/")  # what Checkpoint.open does on restart
    assert set(store.parts("run1", "T", "")) == {"lease/0000000001"}
    held.renew()
    held.check()
    held.release()


def test_a_restarted_load_still_holds_its_lease_at_the_end(
    make_database: Any, tmp_path: Path
) -> None:
    """End to end: the lease a restarted load took is still there when it releases it (before,
    the restart had deleted it, so the release found no term of its own to mark)."""
    from conftest import small_load_config

    from loader import load

    db = make_database([K_DDL])
    csv = tmp_path / "k.csv"
    csv.write_text("Id,V\n1,a\n2,b\n")
    load(small_load_config(db, "K", [csv]), database=db)
    report = load(small_load_config(db, "K", [csv], restart=True), database=db)
    terms = SpannerStateStore(db).parts(report.run_ids["K"], "K", "lease/")
    assert terms and all(v.get("released") for v in terms.values())
    assert read_table(db, "K", ["Id", "V"]) == [(1, "a"), (2, "b")]
