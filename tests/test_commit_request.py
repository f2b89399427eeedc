"""loader.commit.SpannerCommitter: the CommitRequest bytes it sends are what google-cloud-spanner's
Batch.commit sends; errors come back as google.api_core exceptions the runner understands; a
session the server lost does not fail the load.

The byte comparison runs both paths against a recording gRPC server (tests/capture_spanner.py):
the emulator cannot show a request. Everything else runs against the emulator.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any, Callable, Optional

import pyarrow as pa
import pytest
from capture_spanner import CaptureSpanner
from conftest import INSTANCE, PROJECT, read_table
from google.api_core import exceptions as gexc
from google.cloud.spanner_v1 import CommitRequest, Mutation, RequestOptions

from loader.commit import (
    OPS,
    BatchJob,
    CommitRunner,
    CommitStats,
    SpannerCommitter,
    server_retry_delay,
)
from loader.encode import encode_rows
from loader.resume.stores import SpannerStateStore
from loader.types import SpannerType

T = SpannerType.parse
DDL = "CREATE TABLE Items (Id INT64 NOT NULL, Name STRING(MAX), Price NUMERIC) PRIMARY KEY (Id)"
COLUMNS = ["Id", "Name", "Price"]
TYPES = [T("INT64"), T("STRING(MAX)"), T("NUMERIC")]
AFE_TIMING = "x-goog-spanner-enable-afe-server-timing"
API_CLIENT = "x-goog-api-client"
PRIORITY = {
    "low": RequestOptions.Priority.PRIORITY_LOW,
    "medium": RequestOptions.Priority.PRIORITY_MEDIUM,
    "high": RequestOptions.Priority.PRIORITY_HIGH,
}


def raw_path(committer: SpannerCommitter) -> SpannerCommitter:
    """Skip a test of the raw Commit path with a client that lacks an internal it needs (the
    committer then uses the public path: tests/test_commit_fallback.py)."""
    if committer.public_path:
        pytest.skip(committer.notes[0])
    return committer


def job(op: str, ids: list[int], marker: bool = False) -> BatchJob:
    """A job as the pipeline builds it: encoded rows, plus a checkpoint marker if asked."""
    from decimal import Decimal

    cols = [
        pa.array(ids, pa.int64()),
        pa.array([f"item {i}" if i % 3 else None for i in ids], pa.string()),
        pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(38, 9)),
    ]
    extra = ()
    if marker:  # marker_mutation makes no RPC
        store = SpannerStateStore(database=None)
        extra = (store.marker_mutation("run-1", "Items", "b/00000000/00000001", {"rows": 3}),)
    return BatchJob(
        table="Items",
        op=OPS[op],
        columns=COLUMNS,
        rows=encode_rows(cols, TYPES),
        keys=pa.table({"Id": cols[0]}),
        provenance=pa.table({}),
        cost_per_row=len(COLUMNS),
        extra=extra,
    )


CASES = [
    # mode, priority, transaction tag, max commit delay (ms), marker
    ("upsert", None, None, None, False),
    ("insert", "low", None, None, True),
    ("replace", None, "nightly-load", 100, False),
    ("update", "high", "t", 500, True),
    ("upsert", "medium", None, 1, True),
]


@pytest.mark.parametrize("mode,priority,tag,delay,marker", CASES)
def test_request_bytes_and_metadata_equal_the_clients(
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    priority: Optional[str],
    tag: Optional[str],
    delay: Optional[int],
    marker: bool,
) -> None:
    from google.cloud import spanner

    mutations = job(mode, [3, 1, 2, 10], marker).mutations()
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        # the client's path: what `with database.batch(...)` sends for the same mutations
        options = RequestOptions(
            priority=PRIORITY[priority] if priority else None, transaction_tag=tag
        )
        max_delay = dt.timedelta(milliseconds=delay) if delay else None
        with database.batch(request_options=options, max_commit_delay=max_delay) as batch:
            batch._mutations.extend(Mutation.deserialize(m) for m in mutations)
        ours = raw_path(
            SpannerCommitter(database, priority=priority, tag=tag, max_commit_delay_ms=delay)
        )
        ours.commit(mutations)
        theirs_sent, ours_sent = server.commits

    assert ours_sent.request == theirs_sent.request
    request = CommitRequest.deserialize(ours_sent.request)
    assert request == CommitRequest.deserialize(theirs_sent.request)
    assert request.session.startswith(database.name + "/sessions/")
    assert [Mutation.serialize(m) for m in request.mutations] == mutations
    assert request.single_use_transaction.read_write is not None
    assert request.request_options.transaction_tag == (tag or "")
    assert request.request_options.priority == (PRIORITY[priority] if priority else 0)
    assert request.max_commit_delay == (max_delay or dt.timedelta(0))

    # the same headers, with the same values except the request id's sequence number; not
    # the one asking the front end for server timing, which only feeds the client's metrics
    request_id = "x-goog-spanner-request-id"
    theirs_keys = {k for k, _ in theirs_sent.metadata} - {AFE_TIMING}
    assert {k for k, _ in ours_sent.metadata} == theirs_keys
    for key in theirs_keys - {request_id, API_CLIENT}:
        assert ours_sent.header(key) == theirs_sent.header(key), key
    # On the emulator the client builds its transport without its own ClientInfo, so the
    # gapic default goes out ("gapic/V pb/V"); against Spanner it is the Client's ("gccl/V"),
    # which is what we send everywhere. The library versions named are the same.
    (ours_agent,) = ours_sent.header(API_CLIENT)
    (theirs_agent,) = theirs_sent.header(API_CLIENT)
    assert ours_agent == database._instance._client._client_info.to_user_agent()
    assert ours_agent.split()[:3] == theirs_agent.split()[:3]  # python, grpc, api-core
    assert ours_sent.header("google-cloud-resource-prefix") == [database.name]
    assert ours_sent.header("x-goog-request-params") == ["session=" + request.session]
    assert ours_sent.header("x-goog-spanner-route-to-leader") == ["true"]
    (ours_id,) = ours_sent.header(request_id)
    (theirs_id,) = theirs_sent.header(request_id)
    assert ours_id.split(".")[:3] == theirs_id.split(".")[:3]  # version, process, client


def test_resource_exhausted_and_its_retry_delay_reach_the_runner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gapic layer used to retry RESOURCE_EXHAUSTED itself; on the raw path the runner
    gets it, as a google.api_core exception carrying the server's RetryInfo, and waits as
    long as the server asked before the retry."""
    from google.cloud import spanner
    from google.protobuf import any_pb2
    from google.rpc import code_pb2, status_pb2
    from google.rpc.error_details_pb2 import RetryInfo

    info = RetryInfo()
    info.retry_delay.seconds, info.retry_delay.nanos = 1, 500_000_000
    detail = any_pb2.Any()
    detail.Pack(info)
    push_back = status_pb2.Status(
        code=code_pb2.RESOURCE_EXHAUSTED, message="too busy", details=[detail]
    )
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        committer = raw_path(SpannerCommitter(database))
        server.refusals.append(push_back)
        with pytest.raises(gexc.ResourceExhausted) as e:
            committer.commit(job("upsert", [1]).mutations())
        assert e.value.message == "too busy"
        assert server_retry_delay(e.value) == 1.5

        server.refusals.append(push_back)
        slept: list[float] = []
        stats = CommitStats()
        runner = CommitRunner(committer, stats, reject=lambda r: None, sleep=slept.append)
        runner.run(job("upsert", [1, 2]))
        assert slept == [1.5] and stats.retries == 1 and stats.rows_written == 2
        assert len(server.commits) == 3


def test_commits_land_on_the_emulator(make_database: Callable[..., Any]) -> None:
    database = make_database([DDL])
    committer = SpannerCommitter(database, priority="low", max_commit_delay_ms=10)
    committer.commit(job("insert", [1, 2, 3]).mutations())
    committer.commit(job("upsert", [3, 4]).mutations())
    got = read_table(database, "Items", ["Id", "Name"])
    assert got == [(1, "item 1"), (2, "item 2"), (3, None), (4, "item 4")]


def test_spanner_errors_come_back_as_api_core_exceptions(
    make_database: Callable[..., Any],
) -> None:
    database = make_database([DDL])
    committer = SpannerCommitter(database)
    committer.commit(job("insert", [1]).mutations())
    with pytest.raises(gexc.AlreadyExists) as dup:
        committer.commit(job("insert", [1, 2]).mutations())
    assert "already exists" in dup.value.message.lower()
    missing = job("insert", [5])
    missing.table = "NoSuchTable"
    with pytest.raises(gexc.NotFound) as nf:
        committer.commit(missing.mutations())
    assert "table not found" in nf.value.message.lower()  # not taken for a lost session
    assert read_table(database, "Items", ["Id"]) == [(1,)]


def test_aborted_reaches_the_runner_and_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no client retry below it, ABORTED reaches the runner at once and is retried
    (a recording server refuses the first commit: deterministic, unlike the emulator)."""
    from google.cloud import spanner
    from google.rpc import code_pb2, status_pb2

    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        server.refusals.append(status_pb2.Status(code=code_pb2.ABORTED, message="aborted"))
        slept: list[float] = []
        stats = CommitStats()
        runner = CommitRunner(
            SpannerCommitter(database),
            stats,
            reject=lambda r: None,
            sleep=slept.append,
            rng=random.Random(1),
        )
        runner.run(job("upsert", [7, 8]))
        assert len(slept) == 1 and stats.retries == 1 and stats.rows_written == 2
        assert len(server.commits) == 2


def test_a_commit_beside_an_open_transaction_lands_on_the_emulator(
    make_database: Callable[..., Any],
) -> None:
    """The emulator runs one read/write transaction at a time: a commit while another is
    open is usually ABORTED (sometimes the emulator aborts the other one instead). Either
    way the rows land, and every ABORTED was retried by the runner; the test closes the
    blocking transaction in the runner's (injected) sleep."""
    database = make_database([DDL])
    session = database.session()
    session.create()
    blocker = session.transaction()
    blocker.begin()
    list(blocker.execute_sql("SELECT Id FROM Items"))
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if blocker.committed is None and not blocker.rolled_back:
            blocker.rollback()

    stats = CommitStats()
    runner = CommitRunner(
        SpannerCommitter(database), stats, reject=lambda r: None, sleep=sleep, rng=random.Random(1)
    )
    runner.run(job("upsert", [7, 8]))
    assert len(slept) == stats.retries <= 1
    assert stats.rows_written == 2
    assert read_table(database, "Items", ["Id"]) == [(7,), (8,)]


def test_a_lost_multiplexed_session_is_replaced(
    make_database: Callable[..., Any], spanner_client: Any
) -> None:
    """The emulator deletes a multiplexed session on request (the client itself never does),
    then answers NOT_FOUND for it: every later commit must still land."""
    database = make_database([DDL])
    committer = raw_path(SpannerCommitter(database))
    from google.cloud.spanner_v1.database_sessions_manager import TransactionType

    committer.commit(job("upsert", [1]).mutations())
    session = database.sessions_manager.get_session(TransactionType.READ_WRITE)
    if not session.is_multiplexed:  # e.g. 3.55: multiplexed read/write sessions not by default
        pytest.skip("this client commits in pool sessions (test_a_lost_pool_session_...)")
    database.spanner_api.delete_session(
        name=session.name, metadata=[("google-cloud-resource-prefix", database.name)]
    )
    committer.commit(job("upsert", [2]).mutations())
    committer.commit(job("upsert", [3]).mutations())
    # the client's own reads would still use the lost session: read through a new handle
    fresh = spanner_client.instance(INSTANCE).database(database.database_id)
    assert read_table(fresh, "Items", ["Id"]) == [(1,), (2,), (3,)]


def test_a_lost_pool_session_is_replaced_in_the_pool(
    make_database: Callable[..., Any], spanner_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without multiplexed sessions the commit takes a pool session. PingingPool hands out a
    session it pinged less than ping_interval ago without checking it, so a session deleted
    behind its back comes out; the commit must land, and a live session take the lost one's
    place in the pool."""
    from google.cloud.spanner_v1.pool import PingingPool

    monkeypatch.setenv("GOOGLE_CLOUD_SPANNER_MULTIPLEXED_SESSIONS_FOR_RW", "false")
    created = make_database([DDL])
    pool = PingingPool(size=1)
    database = spanner_client.instance(INSTANCE).database(created.database_id, pool=pool)
    lost = pool.get()
    lost.delete()
    pool.put(lost)
    raw_path(SpannerCommitter(database)).commit(job("upsert", [1, 2]).mutations())
    assert read_table(created, "Items", ["Id"]) == [(1,), (2,)]
    replacement = pool.get()
    assert replacement.name != lost.name and replacement.exists()
