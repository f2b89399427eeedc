"""SpannerCommitter's public path: with a google-cloud-spanner release that lacks one of the
client internals the committer uses, commits go through ``database.batch()``, send exactly
what the client's own batch sends for the same mutations, and a load still lands exactly, with
a note in its report saying so.

A missing internal is simulated by hiding one (monkeypatch) while the committer is built.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable, Optional

import pyarrow as pa
import pytest
from capture_spanner import CaptureSpanner
from conftest import INSTANCE, PROJECT, read_table
from google.cloud.spanner_v1 import CommitRequest, Mutation, RequestOptions
from test_commit_request import CASES, PRIORITY, job

from loader.commit import SpannerCommitter
from loader.commit.spanner import client_version, missing_internals

PUBLIC = "commits use the client's public batch API (slower)"


def _hide(m: pytest.MonkeyPatch, database: Any, what: str) -> None:
    """Make ``database``'s client look like a release without ``what``."""
    from google.cloud.spanner_v1.database import Database

    if what == "Database.metadata_with_request_id":
        m.delattr(Database, "metadata_with_request_id", raising=False)
    elif what == "Database._route_to_leader_enabled":
        m.delattr(database, "_route_to_leader_enabled", raising=False)
    elif what == "Database.sessions_manager":
        m.delattr(Database, "sessions_manager", raising=False)
    else:
        raise AssertionError(what)


@pytest.mark.parametrize(
    "hidden",
    [
        "Database.metadata_with_request_id",
        "Database._route_to_leader_enabled",
        "Database.sessions_manager",
    ],
)
@pytest.mark.parametrize("mode,priority,tag,delay,marker", CASES[1:4])
def test_public_path_sends_what_batch_commit_sends(
    monkeypatch: pytest.MonkeyPatch,
    hidden: str,
    mode: str,
    priority: Optional[str],
    tag: Optional[str],
    delay: Optional[int],
    marker: bool,
) -> None:
    """The mutations' wire bytes decoded into the client's values and committed through
    ``database.batch()`` make the very request the client sends for those mutations."""
    from google.cloud import spanner

    mutations = list(job(mode, [3, 1, 2, 10], marker).mutations())
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        options = RequestOptions(
            priority=PRIORITY[priority] if priority else None, transaction_tag=tag
        )
        max_delay = dt.timedelta(milliseconds=delay) if delay else None
        with database.batch(request_options=options, max_commit_delay=max_delay) as batch:
            batch._mutations.extend(Mutation.deserialize(m) for m in mutations)
        with monkeypatch.context() as m:
            _hide(m, database, hidden)
            ours = SpannerCommitter(database, priority=priority, tag=tag, max_commit_delay_ms=delay)
        assert ours.public_path
        (note,) = ours.notes
        assert note.startswith(f"google-cloud-spanner {client_version()} lacks ")
        assert hidden in note and note.endswith(f": {PUBLIC}")
        ours.commit(mutations)
        theirs_sent, ours_sent = server.commits

    request = CommitRequest.deserialize(ours_sent.request)
    assert request == CommitRequest.deserialize(theirs_sent.request)
    assert [Mutation.serialize(m) for m in request.mutations] == mutations
    assert request.request_options.transaction_tag == (tag or "")


def test_public_path_commits_land_on_the_emulator(
    monkeypatch: pytest.MonkeyPatch, make_database: Callable[..., Any]
) -> None:
    from decimal import Decimal

    from google.cloud.spanner_v1.database import Database

    db = make_database(
        ["CREATE TABLE Items (Id INT64 NOT NULL, Name STRING(MAX), Price NUMERIC) PRIMARY KEY (Id)"]
    )
    with monkeypatch.context() as m:
        m.delattr(Database, "metadata_with_request_id", raising=False)
        committer = SpannerCommitter(db)
    assert committer.public_path
    committer.commit(job("insert", [1, 2, 3, 4]).mutations())
    committer.commit(job("upsert", [4, 5]).mutations())
    rows = read_table(db, "Items", ["Id", "Name", "Price"])
    assert rows == [
        (1, "item 1", Decimal("0.25")),
        (2, "item 2", Decimal("0.5")),
        (3, None, Decimal("0.75")),
        (4, "item 4", Decimal("1")),
        (5, "item 5", Decimal("1.25")),
    ]
    found = committer.existing_keys("Items", pa.table({"Id": pa.array([1, 2, 5, 6])}))
    assert sorted(k for (k,) in found) == [1, 2, 5]


def test_this_client_needs_no_public_path(make_database: Callable[..., Any]) -> None:
    if tuple(int(p) for p in client_version().split(".")[:2]) < (3, 55):
        pytest.skip("an older google-cloud-spanner: the public path is expected")
    assert missing_internals(make_database()) == []


def test_a_load_through_the_public_path_lands_exactly(
    monkeypatch: pytest.MonkeyPatch, make_database: Callable[..., Any]
) -> None:
    """The shop example (every column type) through ``database.batch()``: the note is in the
    report and every table equals its CSV."""
    from test_load_e2e import EXAMPLES, TABLES, assert_table_equals_csv, shop_config

    from loader import load
    from loader.errors import ExitCode

    db = make_database()
    db.spanner_api  # noqa: B018 - built now, with the client info it needs
    # what a client library without it would look like to the committer
    monkeypatch.delattr(db._instance._client, "_client_info", raising=False)
    report = load(shop_config(db), database=db)
    assert report.exit_code == ExitCode.OK
    (note,) = [n for n in report.notes if PUBLIC in n]
    assert note.startswith(f"google-cloud-spanner {client_version()} lacks ")
    assert "Client._client_info" in note
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")
    assert report.rows_written == report.rows_read == 2435
