"""Commit pool and retry policy, with injected committers (no emulator needed)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.commit import CommitPool, CommitRunner, CommitStats, RetryPolicy, server_retry_delay
from loader.errors import CommitError


class InstantRunner:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def run(self, job: Any) -> None:
        with self.lock:
            self.n += 1


def test_pool_survives_jobs_that_finish_before_submit_returns() -> None:
    """A job done before its callback is attached once deadlocked submit()."""
    runner = InstantRunner()
    pool = CommitPool(runner, concurrency=2)  # type: ignore[arg-type]
    done = threading.Event()

    def work() -> None:
        for _ in range(5000):
            pool.submit(object())  # type: ignore[arg-type]
        pool.drain()
        done.set()

    t = threading.Thread(target=work, daemon=True)
    t.start()
    assert done.wait(60), "submit/drain deadlocked"
    pool.close()
    assert runner.n == 5000


class FlakyCommitter:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    def commit(self, mutations: Any) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)

    def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
        return []


def _job() -> Any:
    import pyarrow as pa

    from loader.commit import BatchJob

    rows = pa.array([b"\x1a\x02\x0a\x00"], pa.binary())
    return BatchJob(
        "T",
        "insert_or_update",
        ["A"],
        rows,
        pa.table({"A": [1]}),
        pa.table({"source": ["s"], "record": [1], "line": [2]}),
        1,
    )


def test_transient_errors_are_retried_with_injected_sleep_and_counted() -> None:
    sleeps: list[float] = []
    committer = FlakyCommitter(
        [gexc.Aborted("a"), gexc.DeadlineExceeded("d"), gexc.InternalServerError("RST_STREAM")]
    )
    stats = CommitStats()
    runner = CommitRunner(committer, stats, lambda r: None, sleep=sleeps.append)
    runner.run(_job())
    assert committer.calls == 4 and stats.retries == 3 and stats.commits == 1
    assert len(sleeps) == 3 and all(s >= 0 for s in sleeps)


def test_permanent_error_is_not_retried() -> None:
    committer = FlakyCommitter([gexc.PermissionDenied("no")])
    runner = CommitRunner(committer, CommitStats(), lambda r: None, sleep=lambda s: None)
    with pytest.raises(gexc.PermissionDenied):
        runner.run(_job())
    assert committer.calls == 1


def test_retry_time_is_bounded() -> None:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s + 1.0

    committer = FlakyCommitter([gexc.Aborted("a")] * 1000)
    runner = CommitRunner(
        committer,
        CommitStats(),
        lambda r: None,
        RetryPolicy(max_retry_time=30),
        sleep=sleep,
        clock=lambda: now[0],
    )
    with pytest.raises(CommitError, match="kept failing for 30s"):
        runner.run(_job())


def test_server_retry_delay_is_read_from_error_details() -> None:
    from google.rpc.error_details_pb2 import RetryInfo

    info = RetryInfo()
    info.retry_delay.seconds = 2
    info.retry_delay.nanos = 500_000_000
    assert server_retry_delay(gexc.Aborted("x", details=[info])) == 2.5
    assert server_retry_delay(gexc.Aborted("x")) is None


def test_a_stop_ends_a_throttle_wait_and_the_job_counts_as_not_started() -> None:
    """#16 defect 4: Ctrl-C while a commit waits for the --max-rows-per-second throttle stops
    at once: the waiting job is not sent, is counted as skipped (so the resume point stays
    before its flush) and is not recorded as done; the commit that went out before counts."""
    import time

    from loader.throttle import Throttle

    stop = threading.Event()
    committer = FlakyCommitter([])
    throttle = Throttle(0.01, None, stop=stop)  # after the first row: 100 s per row
    runner = CommitRunner(committer, CommitStats(), lambda r: None, throttle=throttle)
    pool = CommitPool(runner, concurrency=1, stop=stop)
    done: list[Any] = []
    for _ in range(2):
        job = _job()
        job.on_done = done.append
        pool.submit(job)
    time.sleep(0.1)
    started = time.monotonic()
    stop.set()
    pool.drain()
    assert time.monotonic() - started < 2.0, "the throttle wait was waited out"
    pool.close()
    assert committer.calls == 1 and runner.stats.rows_written == 1
    assert pool.skipped == 1 and pool.error is None and len(done) == 1


def test_drain_ticks_while_commits_run() -> None:
    """drain(tick=...) calls back on the draining thread while the last commits run (the
    pipeline reports progress from it), and once more after each finishes."""
    release = threading.Event()

    class SlowRunner:
        def run(self, job: Any) -> None:
            release.wait(5)

    pool = CommitPool(SlowRunner(), concurrency=2)  # type: ignore[arg-type]
    pool.submit(object())  # type: ignore[arg-type]
    ticks: list[str] = []

    def tick() -> None:
        ticks.append(threading.current_thread().name)
        if len(ticks) == 3:
            release.set()

    pool.drain(tick=tick, every=0.01)
    pool.close()
    assert len(ticks) >= 3 and set(ticks) == {threading.current_thread().name}


def test_a_credentials_failure_is_not_retried_nor_called_overload() -> None:
    """gRPC's UNAVAILABLE for an auth plugin that raised (the client library's paths raise it
    as is): a ConfigError with the no-credentials hint at once, not "overloaded" after the
    whole retry time."""
    from loader.errors import ConfigError

    failed = gexc.ServiceUnavailable("Getting metadata from plugin failed with error: expired")
    committer = FlakyCommitter([failed] * 5)
    runner = CommitRunner(committer, CommitStats(), lambda r: None, sleep=lambda s: None)
    with pytest.raises(ConfigError, match="credentials failed: Getting metadata") as caught:
        runner.run(_job())
    assert committer.calls == 1 and "application-default login" in (caught.value.hint or "")


def _insert_job(n: int) -> Any:
    import pyarrow as pa

    from loader.commit import BatchJob

    return BatchJob(
        "T",
        "insert",
        ["A"],
        pa.array([b"\x1a\x02\x0a\x00"] * n, pa.binary()),
        pa.table({"A": list(range(n))}),
        pa.table({"source": ["s"] * n, "record": list(range(n)), "line": list(range(n))}),
        1,
    )


class LostReplyCommitter:
    """Insert mode after a lost reply: the first commit "times out" (it was applied), every
    later one finds the rows there; ``reads`` scripts what each existing_keys call answers
    (an exception raised, or a count; then the number of keys asked)."""

    def __init__(self, reads: list[Any]) -> None:
        self.reads = reads
        self.commits = 0
        self.asked: list[int] = []

    def commit(self, mutations: Any) -> None:
        self.commits += 1
        if self.commits == 1:
            raise gexc.DeadlineExceeded("injected: applied, reply lost")
        raise gexc.AlreadyExists("Row [0] in table T already exists")

    def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
        self.asked.append(keys.num_rows)
        answer = self.reads.pop(0) if self.reads else keys.num_rows
        if isinstance(answer, Exception):
            raise answer
        return [[k] for k in keys.column(0).to_pylist()[: int(answer)]]


def _runner(committer: Any, rejects: list[Any]) -> CommitRunner:
    return CommitRunner(committer, CommitStats(), rejects.append, sleep=lambda s: None)


def test_a_failed_read_back_after_a_lost_reply_is_retried_not_a_reject() -> None:
    """The key read after ambiguous outcome + ALREADY_EXISTS fails transiently: asked again,
    never taken for "not there" (which bisected and rejected rows this run wrote)."""
    rejects: list[Any] = []
    committer = LostReplyCommitter([gexc.ServiceUnavailable("read broke")])
    runner = _runner(committer, rejects)
    runner.run(_insert_job(4))
    assert rejects == [] and committer.asked == [4, 4]
    assert runner.stats.ambiguous_resolved == 1 and runner.stats.rows_written == 4


def test_a_permanently_failed_read_back_fails_the_load_instead_of_rejecting() -> None:
    rejects: list[Any] = []
    committer = LostReplyCommitter([gexc.PermissionDenied("no read access")])
    with pytest.raises(CommitError, match="outcome was unknown"):
        _runner(committer, rejects).run(_insert_job(4))
    assert rejects == []


class KeyedTable:
    """A table in memory behind the Committer interface: insert refuses a key it holds
    (ALREADY_EXISTS) or a value its unique column holds; update refuses a key it lacks
    (NOT_FOUND); a commit is all or nothing. Rows are encoded as ``key:unique``."""

    def __init__(self, rows: dict[int, int]) -> None:
        self.rows = dict(rows)
        self.commits = 0
        self.attempts = 0
        self.reads = 0

    def commit(self, mutations: Any) -> None:
        from google.cloud.spanner_v1 import Mutation

        self.attempts += 1
        m = Mutation.pb()()
        m.ParseFromString(mutations[0])
        op = m.WhichOneof("operation")
        write = getattr(m, op)
        batch = [
            (int(r.values[0].string_value), int(r.values[1].string_value)) for r in write.values
        ]
        if op == "insert":
            taken = set(self.rows.values())
            for k, u in batch:
                if k in self.rows:
                    raise gexc.AlreadyExists(f"Row [{k}] in table T already exists")
                if u in taken:
                    raise gexc.AlreadyExists("UNIQUE violation on index TByU")
                taken.add(u)
        else:
            for k, _ in batch:
                if k not in self.rows:
                    raise gexc.NotFound(f"Row [{k}] in table T is missing")
        self.commits += 1
        self.rows.update(batch)

    def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
        self.reads += 1
        return [[k] for k in sorted(set(keys.column("A").to_pylist())) if k in self.rows]


def _keyed_job(op: str, rows: list[tuple[int, int]]) -> Any:
    import pyarrow as pa

    from loader.commit import BatchJob
    from loader.encode import encode_rows
    from loader.types import SpannerType

    keys = pa.array([k for k, _ in rows], pa.int64())
    unique = pa.array([u for _, u in rows], pa.int64())
    n = len(rows)
    return BatchJob(
        "T",
        op,
        ["A", "U"],
        encode_rows([keys, unique], [SpannerType.parse("INT64")] * 2),
        pa.table({"A": keys}),
        pa.table(
            {"source": ["s"] * n, "record": list(range(1, n + 1)), "line": list(range(2, n + 2))}
        ),
        1,
        key_types=(SpannerType.parse("INT64"),),
    )


def _greedy(
    op: str, table: dict[int, int], rows: list[tuple[int, int]]
) -> tuple[dict[int, int], list[int]]:
    """What committing ``rows`` one at a time, in order, leaves: the table, the refused keys."""
    table, refused = dict(table), []
    for k, u in rows:
        if (
            op == "insert"
            and (k in table or u in table.values())
            or op == "update"
            and k not in table
        ):
            refused.append(k)
        else:
            table[k] = u
    return table, refused


class LostReply(KeyedTable):
    """A KeyedTable whose first commit times out, applied (``landed``) or not."""

    def __init__(self, rows: dict[int, int], landed: bool) -> None:
        super().__init__(rows)
        self.landed, self.lost = landed, False

    def commit(self, mutations: Any) -> None:
        if not self.lost:
            self.lost = True
            if self.landed:
                super().commit(mutations)
            raise gexc.DeadlineExceeded("injected: reply lost")
        super().commit(mutations)


@pytest.mark.parametrize("skip", [False, True])
def test_a_lost_reply_then_a_refusal_for_keys_already_there_is_settled_by_reading(
    skip: bool,
) -> None:
    """Insert after a lost reply that did not land, then ALREADY_EXISTS: not every key is there,
    so the commit did not land (it is atomic), and the keys refused are found as for any
    refusal. The halves kept the unknown outcome, and a half whose keys were all there
    before the load was counted as written: those source rows silently not written."""
    there = {k: 9000 + k for k in (0, 1, 2, 3, 9)}
    fake = LostReply(there, landed=False)
    rejects: list[Any] = []
    stats = CommitStats()
    runner = CommitRunner(fake, stats, rejects.append, sleep=lambda s: None, skip_refused_keys=skip)
    runner.run(_keyed_job("insert", [(k, 100 + k) for k in range(12)]))
    assert fake.rows == {**{k: 100 + k for k in range(12)}, **there}
    assert stats.rows_written == 7 and stats.ambiguous_resolved == 0
    refused = sorted(int(r.text[len("key (") :].split(",")[0]) for r in rejects)
    assert (refused, stats.rows_key_skipped) == (([], 5) if skip else ([0, 1, 2, 3, 9], 0))
    landed = LostReply({}, landed=True)  # the lost reply's commit did land: all there, ours
    stats = CommitStats()
    CommitRunner(landed, stats, rejects.append, sleep=lambda s: None).run(
        _keyed_job("insert", [(k, k) for k in range(6)])
    )
    assert stats.rows_written == 6 and stats.ambiguous_resolved == 1


@pytest.mark.parametrize("skip", [False, True])
def test_a_lost_reply_over_keys_all_there_before_is_told_by_the_commit_s_marker(
    skip: bool,
) -> None:
    """Insert after a lost reply, then ALREADY_EXISTS, every key there: they may all have been
    there before the load (a re-run), and the batch was counted as written, its source rows
    not written and not rejected. Its checkpoint marker tells: not there, the commit did not
    land, and the rows are refused (or left out) by their keys; there, it landed."""
    for landed in (False, True):
        there = {} if landed else {k: 9000 + k for k in range(8)}
        fake = LostReply(dict(there), landed=landed)
        asked: list[bytes] = []
        rejects: list[Any] = []
        stats = CommitStats()
        job = _marked_job([(k, 100 + k) for k in range(8)], offset=0, cells=1)
        runner = CommitRunner(
            fake,
            stats,
            rejects.append,
            sleep=lambda s: None,
            skip_refused_keys=skip,
            marker_landed=lambda m, asked=asked, landed=landed: asked.append(m) is None and landed,
        )
        runner.run(job)
        assert asked == [b"0-8-0"]  # the batch's marker, read once
        if landed:
            assert stats.rows_written == 8 and stats.ambiguous_resolved == 1
        else:
            assert stats.rows_written == 0 and fake.rows == there
            assert (len(rejects), stats.rows_key_skipped) == ((0, 8) if skip else (8, 0))


class _Store:
    """An atomic state store in memory: markers as JSON, what ``put`` wrote."""

    atomic = True

    def __init__(self) -> None:
        self.puts: dict[str, Any] = {}

    def marker_mutation(self, run: str, table: str, part: str, value: Any, op: str = "") -> bytes:
        return json.dumps([part, value]).encode()

    def put(self, run: str, table: str, part: str, value: Any) -> None:
        self.puts[part] = value


@pytest.mark.parametrize("offset", [0, 5])
def test_each_refused_row_is_counted_once_in_the_markers_a_resume_sums(offset: int) -> None:
    """The rows refused between runs are counted in the runs' commit's marker, and the batch's
    own marker counts the others; a resumed piece's own marker has the very name of a marker
    of all its runs, and overwrote its count with 0 (a review)."""
    from types import SimpleNamespace

    from loader.resume.checkpoint import Checkpoint, range_part

    store = _Store()
    fake = MarkedTable({3 + offset: 0, 6 + offset: 0, 11 + offset: 0})
    job = _keyed_job("insert", [(offset + k, 100 + k) for k in range(10)])
    job.offset = offset
    batch = "b/00000000/00000001"
    part = batch if offset == 0 else range_part(batch, offset, offset + 10)
    owner = SimpleNamespace(store=store, run_id="r", table="T")
    Checkpoint.attach_marker(owner, job, part, batch)  # type: ignore[arg-type]
    rejects: list[Any] = []
    CommitRunner(fake, CommitStats(), rejects.append, sleep=lambda s: None).run(job)
    committed = dict(json.loads(m) for _, ms in fake.sent for m in ms)
    stored = {**committed, **store.puts}  # the commit's markers, then the batch's own
    assert len(rejects) == 2 and set(committed) == {range_part(batch, offset, offset + 10)}
    assert sum(v.get("rejected", 0) for v in stored.values()) == 2, stored


def test_a_store_without_markers_in_commits_counts_every_reject_in_the_batch_s() -> None:
    """A file store puts no marker in the commit of the runs: the batch's own marker, written
    after, counts the rows refused between them too (it said 0: a review)."""
    fake = KeyedTable({3: 0, 6: 0})
    job = _keyed_job("insert", [(k, 100 + k) for k in range(10)])
    _runner(fake, []).run(job)
    assert job.rejected == 2 and job.marked == {}


def test_a_half_of_a_batch_whose_reply_was_lost_goes_by_its_keys_not_its_own_marker() -> None:
    """The lost commit was the batch's: a half's own marker was never sent, so asking for it
    said "not landed" and rejected rows this run wrote; the half reads its keys."""

    class Landed(KeyedTable):
        def __init__(self) -> None:
            super().__init__({})
            self.calls = 0

        def commit(self, mutations: Any) -> None:
            self.calls += 1
            if self.calls == 1:
                super().commit(mutations)
                raise gexc.DeadlineExceeded("injected: applied, reply lost")
            if self.calls == 2:  # the retry refused for something else first
                raise gexc.FailedPrecondition("injected: another refusal")
            super().commit(mutations)

    fake = Landed()
    asked: list[bytes] = []
    rejects: list[Any] = []
    stats = CommitStats()
    job = _marked_job([(k, 100 + k) for k in range(8)], offset=0, cells=1)
    CommitRunner(
        fake,
        stats,
        rejects.append,
        sleep=lambda s: None,
        marker_landed=lambda m: asked.append(m) is None and False,
    ).run(job)
    assert rejects == [] and stats.rows_written == 8 and asked == []


def test_a_key_read_too_big_for_one_request_is_asked_in_halves_when_skipping() -> None:
    """INVALID_ARGUMENT for a read of many keys (a request over Spanner's size) failed the
    load with skip_existing; the halves ask again, and a lone row's failure still fails it."""

    class Small(KeyedTable):
        def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
            if keys.num_rows > 3:
                raise gexc.InvalidArgument("injected: request too large")
            return super().existing_keys(table, keys)

    fake = Small({1: 1, 5: 5, 6: 6})
    stats = CommitStats()
    rejects: list[Any] = []
    CommitRunner(fake, stats, rejects.append, sleep=lambda s: None, skip_refused_keys=True).run(
        _keyed_job("insert", [(k, 100 + k) for k in range(12)])
    )
    assert (stats.rows_key_skipped, stats.rows_written, rejects) == (3, 9, [])


def test_update_after_a_lost_reply_reads_the_keys_it_is_refused_for() -> None:
    """NOT_FOUND after a lost reply: an update that landed would leave every key there, so
    the keys missing are found by one read (skipped with ``skip_missing``), not by a commit
    per row."""
    fake = LostReply({k: k for k in range(0, 40, 2)}, landed=False)
    stats = CommitStats()
    runner = CommitRunner(fake, stats, lambda r: None, sleep=lambda s: None, skip_refused_keys=True)
    runner.run(_keyed_job("update", [(k, 500 + k) for k in range(40)]))
    assert stats.rows_key_skipped == 20 and stats.rows_written == 20
    assert fake.reads == 1 and fake.attempts <= 3


def test_skipping_needs_the_read_a_transient_failure_is_retried_a_permanent_one_fails() -> None:
    """With ``skip_refused_keys`` only the read tells a row to leave out from a reject: a
    transient failure of it is retried (the rows were rejected: a tryout's UNAVAILABLE), and
    a permanent one fails the load rather than rejecting rows the user asked to skip."""

    class Flaky(KeyedTable):
        def __init__(self, rows: dict[int, int], failures: list[Exception]) -> None:
            super().__init__(rows)
            self.failures = failures

        def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
            if self.failures:
                raise self.failures.pop(0)
            return super().existing_keys(table, keys)

    def run(fake: KeyedTable) -> tuple[CommitStats, list[Any]]:
        stats, rejects = CommitStats(), []  # type: ignore[var-annotated]
        CommitRunner(fake, stats, rejects.append, sleep=lambda s: None, skip_refused_keys=True).run(
            _keyed_job("insert", [(k, 100 + k) for k in range(8)])
        )
        return stats, rejects

    fake = Flaky({1: 1, 3: 3, 5: 5}, [gexc.ServiceUnavailable("read broke")] * 2)
    stats, rejects = run(fake)
    assert (stats.rows_key_skipped, stats.rows_written, rejects) == (3, 5, [])
    with pytest.raises(CommitError, match="to tell the rows to leave out"):
        run(Flaky({1: 1}, [gexc.PermissionDenied("no read access")]))


def test_keys_that_do_not_compare_are_read_again_by_the_halves_when_skipping() -> None:
    """Keys read back in a form that does not match the batch's one to one: with skipping
    on, the halves read again, and a lone row is decided by whether its one key came back."""

    class Odd(KeyedTable):
        def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
            return [[f"k{k[0]}"] for k in super().existing_keys(table, keys)]  # another form

    fake = Odd({2: 2, 5: 5})
    stats = CommitStats()
    rejects: list[Any] = []
    CommitRunner(fake, stats, rejects.append, sleep=lambda s: None, skip_refused_keys=True).run(
        _keyed_job("insert", [(k, 100 + k) for k in range(8)])
    )
    assert (stats.rows_key_skipped, stats.rows_written, rejects) == (2, 6, [])


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(["insert", "update"]),
    there=st.sets(st.integers(0, 59), max_size=60),
    keys=st.lists(st.integers(0, 59), unique=True, min_size=1, max_size=40).map(sorted),
    uniques=st.lists(st.integers(0, 200), min_size=40, max_size=40),
)
def test_keys_found_by_reading_are_refused_exactly_as_bisecting_by_commits_would(
    op: str, there: set[int], keys: list[int], uniques: list[int]
) -> None:
    """Insert's ALREADY_EXISTS and update's NOT_FOUND are settled by reading which keys the
    table holds; the rows committed and refused are those of committing row by row in key
    order (what bisecting by commits gives), unique-value clashes included; and a batch whose
    every key is refused takes no commit at all."""
    table = {k: 1000 + k for k in there}
    rows = list(zip(keys, uniques))
    fake = KeyedTable(table)
    rejects: list[Any] = []
    job = _keyed_job(op, rows)
    _runner(fake, rejects).run(job)
    want_table, want_refused = _greedy(op, table, rows)
    assert fake.rows == want_table
    assert sorted(int(r.text[len("key (") :].split(",")[0]) for r in rejects) == sorted(
        want_refused
    )
    assert job.rejected == len(want_refused)
    if all((k in there) == (op == "insert") for k in keys):
        assert fake.attempts == 1  # every key refused by its key: the one commit, one read


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(["insert", "update"]),
    join_runs=st.booleans(),
    there=st.sets(st.integers(0, 59), max_size=60),
    keys=st.lists(st.integers(0, 59), unique=True, min_size=1, max_size=40).map(sorted),
    uniques=st.lists(st.integers(0, 200), min_size=40, max_size=40),
)
def test_rows_refused_for_their_keys_are_skipped_and_only_those(
    op: str, join_runs: bool, there: set[int], keys: list[int], uniques: list[int]
) -> None:
    """``skip_existing`` / ``skip_missing``: the table ends as committing row by row in key
    order leaves it; a row refused for its key (insert: the table holds it; update: it does
    not) is counted as skipped, never rejected; a row refused for anything else (a unique
    value taken) is still a reject. Also with the runs between refused rows not joined (the
    Beam path: bisection's pieces)."""
    table = {k: 1000 + k for k in there}
    rows = list(zip(keys, uniques))
    fake = KeyedTable(table)
    rejects: list[Any] = []
    stats = CommitStats()
    runner = CommitRunner(
        fake,
        stats,
        rejects.append,
        sleep=lambda s: None,
        join_runs=join_runs,
        skip_refused_keys=True,
    )
    job = _keyed_job(op, rows)
    runner.run(job)
    want_table, refused = _greedy(op, table, rows)
    for_key = [k for k in refused if (k in there) == (op == "insert")]
    assert fake.rows == want_table
    assert stats.rows_key_skipped == len(for_key)
    rejected = sorted(int(r.text[len("key (") :].split(",")[0]) for r in rejects)
    assert rejected == sorted(set(refused) - set(for_key))
    assert job.rejected == len(rejected)
    assert stats.rows_written == len(rows) - len(refused)


def test_an_insert_over_loaded_keys_reads_instead_of_committing_row_by_row() -> None:
    """A re-run in insert mode over 1,000 loaded keys: one read, no commit, 1,000 rejects
    naming the reason; with 510 new keys after 500 loaded ones: one read, one commit."""
    fake = KeyedTable({k: k for k in range(1000)})
    rejects: list[Any] = []
    _runner(fake, rejects).run(_keyed_job("insert", [(k, k + 5000) for k in range(1000)]))
    assert (fake.reads, fake.commits, len(rejects)) == (1, 0, 1000)
    assert rejects[0].reason == (
        "Spanner refused the row: ALREADY_EXISTS: a row with this key is already in table T"
    )
    rows = [(k, k + 5000) for k in range(0, 2020, 2)]  # keys 1000.. new, in one range
    fake = KeyedTable({k: k for k in range(1000)})
    rejects = []
    _runner(fake, rejects).run(_keyed_job("insert", rows))
    assert len(rejects) == 500 and (fake.reads, fake.commits) == (1, 1)
    assert set(fake.rows) == set(range(1000)) | set(range(1000, 2020, 2))


def test_a_lone_row_refused_for_its_key_gets_the_same_reason_as_in_a_batch() -> None:
    """A batch of one row (a resumed gap, a tail) was rejected with Spanner's own text, where
    the same row in a larger batch said "a row with this key is already in table T"."""
    for op, there, reason in (
        ("insert", {7: 7}, "ALREADY_EXISTS: a row with this key is already in table T"),
        ("update", {}, "NOT_FOUND: table T has no row with this key to update"),
    ):
        fake = KeyedTable(there)
        rejects: list[Any] = []
        _runner(fake, rejects).run(_keyed_job(op, [(7, 70)]))
        assert [r.reason for r in rejects] == [f"Spanner refused the row: {reason}"]
        assert fake.reads == 1
    fake = KeyedTable({8: 70})  # a unique value taken: Spanner's text, as before
    rejects = []
    _runner(fake, rejects).run(_keyed_job("insert", [(7, 70)]))
    assert "UNIQUE violation on index TByU" in rejects[0].reason


def test_a_unique_index_clash_is_read_for_once_then_bisected_without_reading() -> None:
    """ALREADY_EXISTS from a unique index, not a key: the batch's read finds no key there and
    the bisection that follows reads no more (a read per halving step cost more than the
    failed commits it saved, on the emulator ~20 ms a read against ~1 ms a commit)."""
    fake = KeyedTable({5000 + i: 7 * i for i in range(20)})  # unique values 0, 7, ... taken
    rejects: list[Any] = []
    rows = [(k, k) for k in range(1000)]  # keys new; 20 unique values clash
    _runner(fake, rejects).run(_keyed_job("insert", rows))
    assert len(rejects) == 20 and fake.reads == 1
    # a key there and a clash: the read settles the key; the run with the clash reads once more
    fake = KeyedTable({3: 3000, 5000: 600})
    rejects = []
    _runner(fake, rejects).run(_keyed_job("insert", [(k, k) for k in range(1000)]))
    assert sorted(int(r.text[len("key (") :].split(",")[0]) for r in rejects) == [3, 600]
    assert fake.reads == 2


def test_a_read_back_that_raises_anything_falls_back_to_bisecting() -> None:
    """Reading the keys back only saves commits: any failure of it (a ValueError from a client
    library, as the base64 one of BYTES keys was) bisects instead of failing the load."""

    class Broken(KeyedTable):
        def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
            raise ValueError("Received a bytes that is not base64 encoded")

    fake = Broken({k: k for k in range(10)})
    rejects: list[Any] = []
    _runner(fake, rejects).run(_keyed_job("insert", [(k, k + 1000) for k in range(20)]))
    assert len(rejects) == 10 and set(fake.rows) == set(range(20))


class MarkedTable(KeyedTable):
    """A KeyedTable that keeps each commit's row count and its markers (``extra``)."""

    def __init__(self, rows: dict[int, int]) -> None:
        super().__init__(rows)
        self.sent: list[tuple[int, list[bytes]]] = []

    def commit(self, mutations: Any) -> None:
        super().commit(mutations)
        from google.cloud.spanner_v1 import Mutation

        m = Mutation.pb()()
        m.ParseFromString(mutations[0])
        self.sent.append((len(getattr(m, m.WhichOneof("operation")).values), list(mutations[1:])))


def _marked_job(rows: list[tuple[int, int]], offset: int, cells: int) -> Any:
    job = _keyed_job("insert", rows)
    job.offset = offset
    job.range_marker = lambda lo, hi, rejected: [f"{lo}-{hi}-{rejected}".encode()]
    job.extra = job.range_marker(offset, offset + len(rows), 0)
    job.marker_cells, job.marker_bytes = cells, 512
    return job


def test_the_runs_between_refused_rows_go_in_one_commit_with_one_marker() -> None:
    """Every tenth key there: the 900 other rows in one commit (not 100, as a commit per run
    took), carrying one marker for the rows from the first run to the last, at the batch's
    offset (a resumed batch's rows start at its first row not yet committed), which counts
    the 99 refused rows between them as rejected (the marker a run each took 100 markers,
    60% of a commit's mutations where runs are short)."""
    fake = MarkedTable({k: k for k in range(0, 1000, 10)})
    rejects: list[Any] = []
    job = _marked_job([(k, k + 5000) for k in range(1000)], offset=40, cells=1)
    CommitRunner(
        fake, CommitStats(), rejects.append, sleep=lambda s: None, budget=(20_000, 4 << 20)
    ).run(job)
    assert (fake.reads, fake.commits, len(rejects)) == (1, 1, 100)
    rows, markers = fake.sent[0]
    assert rows == 900
    assert markers == [b"41-1040-99"]
    assert job.split and job.rejected == 100 and job.marked == {(41, 1040): 99}


@settings(max_examples=100, deadline=None)
@given(
    there=st.sets(st.integers(0, 199)),
    cost=st.integers(1, 12),
    cells=st.integers(1, 12),
    skip=st.booleans(),
    budget=st.sampled_from([0, 60, 300]),
)
def test_runs_committed_together_stay_within_budget_and_are_marked_exactly(
    there: set[int], cost: int, cells: int, skip: bool, budget: int
) -> None:
    """A commit of several runs never counts more mutations than the batch it came from
    (its rows and its one marker), or the budget, whatever a row and a marker count; its
    marker names the rows from its first run to its last; every row not refused is in
    exactly one marker, and each marker counts as rejected exactly the refused rows it spans
    (none when they are skipped), which the job's own marker does not count again."""
    fake = MarkedTable({k: k for k in there})
    job = _marked_job([(k, k + 5000) for k in range(200)], offset=0, cells=cells)
    job.cost_per_row = cost
    runner = CommitRunner(
        fake,
        CommitStats(),
        lambda r: None,
        sleep=lambda s: None,
        budget=(budget, 4 << 20),
        skip_refused_keys=skip,
    )
    runner.run(job)
    for rows, markers in fake.sent:
        assert len(markers) == 1
        assert rows * cost + cells <= max(budget, 200 * cost + cells)
    marked = sorted(tuple(map(int, m.decode().split("-"))) for _, ms in fake.sent for m in ms)
    spans = [k for lo, hi, _ in marked for k in range(lo, hi)]
    assert spans == sorted(set(spans))  # no row in two markers
    assert set(range(200)) - there <= set(spans)
    for lo, hi, rejected in marked:
        assert rejected == (0 if skip else len(there & set(range(lo, hi))))
    assert sum(job.marked.values()) == sum(r for _, _, r in marked)
    assert job.rejected == (0 if skip else len(there))


def test_a_refused_commit_of_runs_is_halved_not_sent_run_by_run() -> None:
    """Every other key there and one unique clash among the new rows: the commit of the 500
    runs is refused, and its halves are committed so (a run alone settles the clash), where a
    commit per run took 500 commits."""
    fake = KeyedTable({k: 10_000 + k for k in range(0, 1000, 2)} | {5000: 777})
    rejects: list[Any] = []
    job = _marked_job([(k, 777 if k == 501 else 20_000 + k) for k in range(1000)], 0, cells=1)
    CommitRunner(
        fake, CommitStats(), rejects.append, sleep=lambda s: None, budget=(20_000, 4 << 20)
    ).run(job)
    assert len(rejects) == 501 and 501 in {
        int(r.text[len("key (") :].split(",")[0]) for r in rejects
    }
    assert set(fake.rows) == set(range(1000)) - {501} | {5000}
    assert fake.commits <= 12 and fake.attempts <= 30, (fake.commits, fake.attempts)


class ChildTable:
    """An interleaved child table in memory, keyed (P, C), whose parent table holds the keys
    ``parents``: any write of a row whose parent row is missing is refused (NOT_FOUND), an
    insert of a key it holds too (ALREADY_EXISTS)."""

    def __init__(
        self, parents: set[int], rows: set[tuple[int, int]], parent_read_fails: bool = False
    ) -> None:
        self.parents, self.rows = parents, set(rows)
        self.parent_read_fails = parent_read_fails
        self.commits = self.attempts = 0
        self.read: list[tuple[str, list[Any]]] = []

    def commit(self, mutations: Any) -> None:
        from google.cloud.spanner_v1 import Mutation

        self.attempts += 1
        m = Mutation.pb()()
        m.ParseFromString(mutations[0])
        op = m.WhichOneof("operation")
        batch = [tuple(int(v.string_value) for v in r.values) for r in getattr(m, op).values]
        for p, c in batch:
            if p not in self.parents:
                raise gexc.NotFound("Insert failed because key was not found in parent table")
            if op == "insert" and (p, c) in self.rows:
                raise gexc.AlreadyExists(f"Row [{p}, {c}] in table Child already exists")
        self.commits += 1
        self.rows.update(batch)  # type: ignore[arg-type]

    def existing_keys(self, table: str, keys: Any) -> list[list[Any]]:
        asked = [tuple(k.values()) for k in keys.to_pylist()]
        self.read.append((table, asked))
        if table == "Parent":
            assert keys.column_names == ["P"]
            if self.parent_read_fails:
                raise gexc.ServiceUnavailable("the read broke")
            return [[p] for (p,) in asked if p in self.parents]
        return [list(k) for k in asked if k in self.rows]


def _child_job(op: str, keys: list[tuple[int, int]]) -> Any:
    import pyarrow as pa

    from loader.commit import BatchJob
    from loader.encode import encode_rows
    from loader.types import SpannerType

    p = pa.array([k[0] for k in keys], pa.int64())
    c = pa.array([k[1] for k in keys], pa.int64())
    n = len(keys)
    from loader.commit.jobs import OPS

    return BatchJob(
        "Child",
        OPS[op],
        ["P", "C"],
        encode_rows([p, c], [SpannerType.parse("INT64")] * 2),
        pa.table({"P": p, "C": c}),
        pa.table(
            {"source": ["s"] * n, "record": list(range(1, n + 1)), "line": list(range(2, n + 2))}
        ),
        2,
        key_types=(SpannerType.parse("INT64"),) * 2,
        parent=("Parent", 1),
    )


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(["insert", "upsert", "replace"]),
    parents=st.sets(st.integers(0, 9), max_size=10),
    there=st.sets(st.tuples(st.integers(0, 9), st.integers(0, 5)), max_size=20),
    keys=st.sets(st.tuples(st.integers(0, 9), st.integers(0, 5)), min_size=1).map(sorted),
    fails=st.booleans(),
)
def test_rows_whose_parent_row_is_missing_are_found_by_reading_the_parent_keys_once(
    op: str,
    parents: set[int],
    there: set[tuple[int, int]],
    keys: list[tuple[int, int]],
    fails: bool,
) -> None:
    """NOT_FOUND for a missing parent row is settled by one read of the batch's distinct
    parent keys: the rows written and refused are those of committing row by row, a missing
    parent's rows rejected with a reason that names the parent table (never skipped, not
    even with ``skip_existing``); a batch whose only refusals are missing parents takes one
    read and no commit beyond its refused one and those of its runs. When the parent read
    fails, bisecting finds the same rows, and a row refused for its key is still skipped (a
    tryout: the halves had stopped reading, and rejected it)."""
    there = {k for k in there if k[0] in parents}
    fake = ChildTable(parents, there, parent_read_fails=fails)
    rejects: list[Any] = []
    stats = CommitStats()
    skip = op == "insert"
    runner = CommitRunner(fake, stats, rejects.append, sleep=lambda s: None, skip_refused_keys=skip)
    runner.run(_child_job(op, keys))
    orphans = [k for k in keys if k[0] not in parents]
    existing = [k for k in keys if k in there and op == "insert"]
    assert fake.rows == there | {k for k in keys if k[0] in parents}
    assert (
        sorted(tuple(int(x) for x in r.text[len("key (") : -1].split(", ")) for r in rejects)
        == orphans
    )
    if not fails:
        assert {r.reason for r in rejects} <= {
            "Spanner refused the row: NOT_FOUND: table Parent has no parent row for this key"
        }
    assert stats.rows_key_skipped == len(existing)
    parent_reads = [asked for table, asked in fake.read if table == "Parent"]
    for asked in parent_reads:
        assert len(asked) == len(set(asked))  # each parent key once
    if orphans and not existing and not fails:
        assert len(parent_reads) == 1 and len(fake.read) == 1
