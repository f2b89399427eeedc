"""loader/wire: Spanner's gRPC protocol spoken by hand.

* what it decodes equals what google-cloud-spanner decodes from the same PartialResultSet
  bytes, however the values are chunked (Hypothesis);
* the requests it sends (CreateSession, Commit, a resumed streamed read) and their metadata,
  on the recording server (tests/capture_spanner.py): the emulator cannot show a request;
* against the emulator: the schema read and the state store through the wire equal the
  client's, a load through the wire path writes exactly the rows and resumes.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from pathlib import Path
from typing import Any, Iterator, Optional

import grpc
import pytest
from capture_spanner import CaptureSpanner
from conftest import INSTANCE, PROJECT, SHOP_DDL, read_table, small_load_config
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.access import ClientAccess
from loader.encode import encode_rows, write_mutation
from loader.types import SpannerType
from loader.wire import WireAccess, WireCommitter
from loader.wire.results import ResultStream

ROOT = Path(__file__).resolve().parent.parent

# -- decoding: ours equals the client's, chunked any way ------------------------------------

SCALARS = ["STRING", "INT64", "BOOL", "FLOAT64", "BYTES", "TIMESTAMP", "DATE", "NUMERIC"]


def _type_pb(t: Any) -> Any:
    from google.cloud.spanner_v1 import StructType, Type, TypeCode

    if isinstance(t, str):
        return Type(code=TypeCode[t])
    if t[0] == "ARRAY":
        return Type(code=TypeCode.ARRAY, array_element_type=_type_pb(t[1]))
    fields = [StructType.Field(name=f"f{i}", type_=_type_pb(ft)) for i, ft in enumerate(t[1])]
    return Type(code=TypeCode.STRUCT, struct_type=StructType(fields=fields))


types = st.recursive(
    st.sampled_from(SCALARS),
    lambda inner: (
        st.tuples(st.just("ARRAY"), inner)
        | st.tuples(st.just("STRUCT"), st.lists(inner, min_size=1, max_size=3))
    ),
    max_leaves=4,
).filter(lambda t: not (isinstance(t, tuple) and t[0] == "STRUCT"))  # no STRUCT columns
# (Spanner returns a STRUCT only inside an ARRAY; ARRAY<STRUCT> stays in)


def wire_values(t: Any) -> st.SearchStrategy[Any]:
    """Values of type ``t`` in their google.protobuf.Value form (plain Python), or None."""
    if isinstance(t, str):
        scalar: st.SearchStrategy[Any] = {
            "STRING": st.text(max_size=8),
            "INT64": st.integers(-(2**63), 2**63 - 1).map(str),
            "BOOL": st.booleans(),
            "FLOAT64": st.floats(allow_nan=False).map(
                lambda f: f if math.isfinite(f) else ("Infinity" if f > 0 else "-Infinity")
            ),
            "BYTES": st.binary(max_size=6).map(
                lambda b: __import__("base64").b64encode(b).decode()
            ),
            "TIMESTAMP": st.datetimes(
                min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)
            ).map(lambda d: d.isoformat(timespec="microseconds") + "Z"),
            "DATE": st.dates().map(dt.date.isoformat),
            "NUMERIC": st.decimals(places=9, allow_nan=False, allow_infinity=False).map(str),
        }[t]
        return st.none() | scalar
    if t[0] == "ARRAY":
        return st.none() | st.lists(wire_values(t[1]), max_size=3)
    return st.tuples(*(wire_values(ft) for ft in t[1])).map(list)


def to_pb(v: Any) -> struct_pb2.Value:
    out = struct_pb2.Value()
    if v is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(v, bool):
        out.bool_value = v
    elif isinstance(v, float):
        out.number_value = v
    elif isinstance(v, str):
        out.string_value = v
    else:
        out.list_value.values.extend(to_pb(x) for x in v)
    return out


def split(draw: Any, v: Any) -> Optional[tuple[Any, Any]]:
    """``v`` cut into a chunk and its continuation, as a server may send it; None when it
    cannot be cut (a number, a bool, null, an empty list)."""
    if isinstance(v, str):
        k = draw(st.integers(0, len(v)))
        return v[:k], v[k:]
    if isinstance(v, list) and v:
        i = draw(st.integers(0, len(v) - 1))
        inner = split(draw, v[i])
        if inner is None and isinstance(v[i], list):
            # a list that cannot be cut there (e.g. an empty ARRAY): a cut after it is not one
            # a server makes (the client's type-directed merge would fold the next element
            # into the empty ARRAY and lose it; the protocol's rule concatenates)
            return None
        if inner is None and isinstance(v[i], float) and draw(st.booleans()):
            # after a FLOAT64, a server may mark the list's continuation with an empty string
            # (the client's _merge_float64 drops it)
            return v[: i + 1], ["", *v[i + 1 :]]
        if inner is None:  # the list is cut after an element that cannot merge
            return v[: i + 1], v[i + 1 :]
        return [*v[:i], inner[0]], [inner[1], *v[i + 1 :]]
    return None


@st.composite
def streams(draw: Any) -> tuple[list[Any], list[bytes]]:
    """A row type, and PartialResultSet messages carrying some rows of it, values chunked."""
    from google.cloud.spanner_v1 import PartialResultSet, ResultSetMetadata, StructType

    row_type = draw(st.lists(types, min_size=1, max_size=3))
    rows = draw(st.lists(st.tuples(*(wire_values(t) for t in row_type)), max_size=4))
    fields = [StructType.Field(name=f"c{i}", type_=_type_pb(t)) for i, t in enumerate(row_type)]
    metadata = ResultSetMetadata(row_type=StructType(fields=fields))
    messages: list[tuple[list[Any], bool]] = []
    current: list[Any] = []
    for v in [v for row in rows for v in row]:
        how = draw(st.sampled_from(["same", "new", "chunk"]))
        cut = split(draw, v) if how == "chunk" else None
        if cut is not None:
            messages.append(([*current, cut[0]], True))
            current = [cut[1]]
            continue
        if how == "new" and current:
            messages.append((current, False))
            current = []
        current.append(v)
    messages.append((current, False))
    out = []
    for i, (values, chunked) in enumerate(messages):
        pb = PartialResultSet.pb()(values=[to_pb(v) for v in values], chunked_value=chunked)
        if i == 0:
            pb.metadata.CopyFrom(ResultSetMetadata.pb(metadata))
        out.append(pb.SerializeToString())
    return row_type, out


def prs(
    values: list[Any], *, chunked: bool = False, token: bytes = b"", row_type: Any = None
) -> bytes:
    """PartialResultSet bytes; ``row_type``: a list of column type names (the first message)."""
    from google.cloud.spanner_v1 import PartialResultSet, ResultSetMetadata, StructType, Type

    pb = PartialResultSet.pb()(
        values=[to_pb(v) for v in values], chunked_value=chunked, resume_token=token
    )
    if row_type is not None:
        fields = [
            StructType.Field(name=f"c{i}", type_=Type(code=t)) for i, t in enumerate(row_type)
        ]
        pb.metadata.CopyFrom(
            ResultSetMetadata.pb(ResultSetMetadata(row_type=StructType(fields=fields)))
        )
    return pb.SerializeToString()


def client_rows(messages: list[bytes]) -> list[list[Any]]:
    from google.cloud.spanner_v1 import PartialResultSet
    from google.cloud.spanner_v1.streamed import StreamedResultSet

    parsed = (PartialResultSet.deserialize(m) for m in messages)
    return [list(row) for row in StreamedResultSet(parsed)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_rows_equal_the_client_decoding_of_the_same_chunked_stream(
    stream: tuple[list[Any], list[bytes]],
) -> None:
    _, messages = stream
    ours = ResultStream()
    for m in messages:
        ours.add(m)
    assert ours.rows() == client_rows(messages)


def test_a_float_list_continued_after_an_empty_string_mark() -> None:
    messages = [
        prs([[1.0, 2.0]], chunked=True, row_type=["ARRAY"]),
        prs([["", 3.0]]),
    ]
    from google.cloud.spanner_v1 import PartialResultSet, ResultSetMetadata, StructType, Type

    first = PartialResultSet.pb().FromString(messages[0])
    array = Type(code="ARRAY", array_element_type=Type(code="FLOAT64"))
    row_type = StructType(fields=[StructType.Field(name="c0", type_=array)])
    first.metadata.CopyFrom(ResultSetMetadata.pb(ResultSetMetadata(row_type=row_type)))
    messages[0] = first.SerializeToString()
    ours = ResultStream()
    for m in messages:
        ours.add(m)
    assert ours.rows() == client_rows(messages) == [[[1.0, 2.0, 3.0]]]


def test_a_rewind_drops_what_came_after_the_last_resume_token() -> None:
    stream = ResultStream()
    stream.add(prs(["a", "b"], chunked=True, token=b"t1", row_type=["STRING"]))  # "b" goes on
    stream.add(prs(["c", "d"]))  # no token: lost with a broken stream
    assert stream.rewind() == b"t1"
    stream.add(prs(["x", "y"]))
    assert stream.rows() == [["a"], ["bx"], ["y"]]


# -- request shapes, on the recording server ------------------------------------------------

NAME = f"projects/{PROJECT}/instances/{INSTANCE}/databases/capture"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[CaptureSpanner]:
    with CaptureSpanner() as s:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", s.address)
        yield s


@pytest.fixture
def wire(server: CaptureSpanner) -> Iterator[WireAccess]:
    channel = grpc.insecure_channel(server.address)
    yield WireAccess(NAME, channel, sleep=lambda s: None)
    channel.close()


def _mutations() -> list[bytes]:
    t = SpannerType.parse
    import pyarrow as pa

    rows = encode_rows([pa.array([1, 2]), pa.array(["a", None])], [t("INT64"), t("STRING(MAX)")])
    return [write_mutation("insert_or_update", "Items", ["Id", "Name"], rows)]


def test_one_multiplexed_session_with_the_client_metadata(
    server: CaptureSpanner, wire: WireAccess
) -> None:
    from google.cloud.spanner_v1 import CreateSessionRequest

    wire.write(_mutations())
    wire.write(_mutations())
    (created,) = server.session_requests  # one session for every RPC
    request = CreateSessionRequest.deserialize(created.request)
    assert request.database == NAME and request.session.multiplexed
    assert created.header("google-cloud-resource-prefix") == [NAME]
    assert created.header("x-goog-spanner-route-to-leader") == ["true"]
    assert created.header("x-goog-request-params") == [f"database={NAME}"]
    (api_client,) = created.header("x-goog-api-client")
    assert api_client.startswith("gl-python/") and " grpc/" in api_client


@pytest.mark.parametrize(
    "priority,tag,delay", [(None, None, None), ("low", "nightly", 10), ("high", None, 1500)]
)
def test_commit_bytes_and_headers_equal_the_client_committers(
    server: CaptureSpanner,
    wire: WireAccess,
    priority: Optional[str],
    tag: Optional[str],
    delay: Optional[int],
) -> None:
    """The same CommitRequest bytes as loader.commit.SpannerCommitter (whose bytes
    tests/test_commit_request.py holds equal to the client's Batch.commit), and its headers
    but the client's request id."""
    from google.cloud import spanner

    from loader.commit import SpannerCommitter

    database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
    theirs = SpannerCommitter(database, priority=priority, tag=tag, max_commit_delay_ms=delay)
    if theirs.public_path:
        pytest.skip(theirs.notes[0])
    ours = wire.committer(priority=priority, tag=tag, max_commit_delay_ms=delay)
    assert isinstance(ours, WireCommitter)
    session = NAME + "/sessions/s1"
    assert ours.request(session, _mutations()) == theirs.request(session, _mutations())

    theirs.commit(_mutations())
    ours.commit(_mutations())
    sent_theirs, sent_ours = server.commits
    keys = {k for k, _ in sent_theirs.metadata}
    keys -= {"x-goog-spanner-request-id", "x-goog-spanner-enable-afe-server-timing"}
    assert keys <= {k for k, _ in sent_ours.metadata}
    for key in keys - {"x-goog-api-client", "x-goog-request-params"}:
        assert sent_ours.header(key) == sent_theirs.header(key), key
    (params,) = sent_ours.header("x-goog-request-params")
    assert params == "session=" + wire.session()


@pytest.mark.parametrize("path", ["wire", "client"])
@pytest.mark.parametrize("reply", ["precommit token", "no timestamp"])
def test_a_commit_answered_without_committing_is_retryable(
    server: CaptureSpanner, wire: WireAccess, path: str, reply: str
) -> None:
    """A CommitResponse with a precommit token (or no commit timestamp) means nothing was
    committed: both committers raise ABORTED, which the runner sends again."""
    from google.cloud.spanner_v1 import types as t

    from loader.commit import SpannerCommitter
    from loader.commit.errors import AMBIGUOUS, gexc, is_transient

    if path == "wire":
        committer: Any = wire.committer()
    else:
        from google.cloud import spanner

        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        committer = SpannerCommitter(database)
        if committer.public_path:
            pytest.skip(committer.notes[0])
    answer = t.CommitResponse.pb()()
    if reply == "precommit token":
        answer.commit_timestamp.GetCurrentTime()  # even with a timestamp
        answer.precommit_token.precommit_token = b"again"
        answer.precommit_token.seq_num = 2
    server.commit_replies = [answer]
    with pytest.raises(gexc.Aborted) as caught:
        committer.commit(_mutations())
    assert is_transient(caught.value) and not isinstance(caught.value, AMBIGUOUS)
    committer.commit(_mutations())  # the next reply has a commit timestamp
    assert len(server.commits) == 2


def test_credentials_that_fail_are_a_permanent_config_error_not_overload() -> None:
    """An auth metadata plugin that raises: gRPC answers UNAVAILABLE without sending the
    request. That is a credentials error with the no-credentials hint, neither retried nor
    an unknown commit outcome."""
    from loader.commit.errors import from_grpc, gexc, is_transient
    from loader.errors import ConfigError

    def plugin(context: Any, callback: Any) -> None:
        raise RuntimeError("Reauthentication is needed")

    creds = grpc.composite_channel_credentials(
        grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP),
        grpc.metadata_call_credentials(plugin),
    )
    with CaptureSpanner(local_credentials=True) as server:
        channel = grpc.secure_channel(server.address, creds)
        wire = WireAccess(NAME, channel, sleep=lambda s: None)
        with pytest.raises(ConfigError) as caught:
            wire.write(_mutations())
        channel.close()
        assert not server.session_requests and not server.commits  # nothing left
    assert "Reauthentication is needed" in str(caught.value)
    assert "gcloud auth application-default login" in (caught.value.hint or "")
    raw = caught.value.__cause__
    assert isinstance(raw, grpc.RpcError) and raw.code() == grpc.StatusCode.UNAVAILABLE
    assert not is_transient(gexc.from_grpc_error(raw))  # for the client library's paths too
    assert isinstance(from_grpc(raw), ConfigError)


def test_a_session_the_server_lost_is_replaced_and_the_commit_sent_again(
    server: CaptureSpanner, wire: WireAccess
) -> None:
    from google.cloud.spanner_v1 import CommitRequest

    first = wire.session()
    server.lost_sessions.add(first)
    wire.write(_mutations())
    lost, kept = (CommitRequest.deserialize(c.request).session for c in server.commits)
    assert lost == first and kept != first and kept == wire.session()
    assert len(server.session_requests) == 2


def test_a_query_broken_by_unavailable_resumes_from_its_token(
    server: CaptureSpanner, wire: WireAccess
) -> None:
    from google.cloud.spanner_v1 import ExecuteSqlRequest
    from google.rpc import code_pb2, status_pb2

    unavailable = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="try again")
    server.streams = [
        [prs(["1", "2"], token=b"after-2", row_type=["INT64"]), prs(["3"]), unavailable],
        [prs(["3", "4"])],
    ]
    rows = wire.query("select n from t where s = @s", {"s": "x"})
    assert rows == [[1], [2], [3], [4]]
    first, resumed = (ExecuteSqlRequest.deserialize(r.request) for r in server.reads)
    assert first.resume_token == b"" and resumed.resume_token == b"after-2"
    assert first.sql == resumed.sql == "select n from t where s = @s"
    assert first.params["s"] == "x" and first.param_types["s"].code == 6  # STRING
    assert first.transaction.single_use.read_only.strong
    for r in server.reads:
        assert r.header("x-goog-spanner-route-to-leader") == []  # a read: any replica
        assert r.header("google-cloud-resource-prefix") == [NAME]


class FakeClock:
    """An injected clock that the injected sleep moves on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _status(code: str, message: str) -> Any:
    from google.rpc import code_pb2, status_pb2

    return status_pb2.Status(code=getattr(code_pb2, code), message=message)


def test_a_read_is_retried_with_backoff_on_each_retryable_failure(
    server: CaptureSpanner,
) -> None:
    """UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED and INTERNAL for a reset stream, one after
    another, each resumed from the last resume token, with growing jittered sleeps under the
    cap; CreateSession refused UNAVAILABLE twice is asked again."""
    from google.cloud.spanner_v1 import ExecuteSqlRequest

    from loader.wire.access import RETRY_CAP

    failures = [
        _status("UNAVAILABLE", "try again"),
        _status("ABORTED", "aborted"),
        _status("RESOURCE_EXHAUSTED", "busy"),
        _status("INTERNAL", "Received RST_STREAM with error code 2"),
        _status("INTERNAL", "Received unexpected EOS on DATA frame from server"),
    ]
    first = [prs(["1"], token=b"t1", row_type=["INT64"]), prs(["2"]), failures[0]]
    server.streams = [first, *([f] for f in failures[1:]), [prs(["2", "3"])]]
    server.session_refusals = [_status("UNAVAILABLE", "no")] * 2
    clock = FakeClock()
    channel = grpc.insecure_channel(server.address)
    wire = WireAccess(NAME, channel, sleep=clock.sleep, clock=clock)
    assert wire.query("select n from t") == [[1], [2], [3]]
    channel.close()
    assert len(server.session_requests) == 3 and wire.sessions_created == 1
    tokens = [ExecuteSqlRequest.deserialize(r.request).resume_token for r in server.reads]
    assert tokens == [b"", *[b"t1"] * 5]
    reads = clock.sleeps[2:]  # after the two for CreateSession
    assert len(reads) == 5 and all(0 < s <= RETRY_CAP for s in reads)
    assert reads[-1] > reads[0]  # doubling: even jittered to half, the fifth beats the first


def test_a_read_gives_up_after_max_retry_time_or_on_a_permanent_error(
    server: CaptureSpanner,
) -> None:
    from loader.commit.errors import gexc
    from loader.wire.access import RETRY_CAP

    clock = FakeClock()
    channel = grpc.insecure_channel(server.address)
    wire = WireAccess(NAME, channel, sleep=clock.sleep, clock=clock, max_retry_time=300)
    server.streams = [[_status("UNAVAILABLE", "down")]] * 1000
    with pytest.raises(gexc.ServiceUnavailable):
        wire.query("select 1")
    assert 300 <= clock.now < 300 + RETRY_CAP and max(clock.sleeps) <= RETRY_CAP
    server.streams = [[_status("INTERNAL", "a bug")], [prs(["1"], row_type=["INT64"])]]
    with pytest.raises(gexc.InternalServerError):
        wire.query("select 1")  # INTERNAL without a reset stream: not asked again
    channel.close()


def test_a_read_by_key_sends_the_keys_as_the_client_does(
    server: CaptureSpanner, wire: WireAccess
) -> None:
    from google.cloud.spanner_v1 import ReadRequest

    # the client's own encoding of key values (private: skip a release without it)
    helpers = pytest.importorskip("google.cloud.spanner_v1._helpers")

    keys = [["run", "T", "b/1"], [1, 2.5, None, True, dt.date(2020, 1, 2), float("inf")]]
    wire.read("SpannerLoaderState", ["Value"], keys + [[b"\x00\xff"]])
    (sent,) = server.reads
    request = ReadRequest.pb(ReadRequest.deserialize(sent.request))
    assert request.table == "SpannerLoaderState" and list(request.columns) == ["Value"]
    *sent_keys, raw = request.key_set.keys
    assert sent_keys == list(helpers._make_list_value_pbs(keys))
    # a BYTES key as the loader's Arrow columns hold it (raw bytes) goes out base64-encoded
    # (the client takes bytes that are base64 text already)
    assert raw.values[0].string_value == "AP8="


# -- against the emulator -------------------------------------------------------------------


@pytest.fixture
def emulator_wire(spanner_emulator: str) -> Iterator[Any]:
    channel = grpc.insecure_channel(spanner_emulator)

    def make(db: Any) -> WireAccess:
        return WireAccess(db.name, channel, client=db)

    yield make
    channel.close()


def test_the_schema_read_through_the_wire_equals_the_clients(
    make_database: Any, emulator_wire: Any
) -> None:
    from loader.schema_reader import read_catalog

    db = make_database([SHOP_DDL, ROOT / "schemas" / "wide.sql"])
    tables = ["Customers", "Orders", "Products", "Accounts", "AccountEvents"]
    assert read_catalog(emulator_wire(db), tables) == read_catalog(db, tables)


def test_queries_and_reads_through_the_wire_equal_the_clients(
    make_database: Any, emulator_wire: Any
) -> None:
    db = make_database([ROOT / "schemas" / "wide.sql"])
    wire, client = emulator_wire(db), ClientAccess(db)
    with db.batch() as b:
        b.insert(
            "Accounts",
            ["Region", "AccountId", "Owner", "Balance", "Rate", "Active", "Opened", "UpdatedAt"]
            + ["Avatar", "Tags", "Counts", "Score"],
            [
                ["eu", 1, "ann", 1, 1.5, True, dt.date(2020, 1, 2), dt.datetime(2021, 1, 1)]
                + [base64.b64encode(b"\x00\x01"), ["a", None], [1, 2], 0.5],
                ["us", 2, "bob"] + [None] * 9,
            ],
        )
    sql = (
        "select Region, AccountId, Owner, Balance, Rate, Active, Opened, UpdatedAt, Avatar, "
        "Tags, Counts, Score, ARRAY(select as struct Region, AccountId) from Accounts "
        "where Owner != @o order by Region"
    )
    assert wire.query(sql, {"o": "zed"}) == client.query(sql, {"o": "zed"})
    keys = [["eu", 1], ["us", 2], ["xx", 3]]
    cols = ["Region", "AccountId", "Owner", "Tags"]
    assert wire.read("Accounts", cols, keys) == client.read("Accounts", cols, keys)


def test_the_state_store_through_the_wire_sees_what_the_clients_wrote(
    make_database: Any, emulator_wire: Any
) -> None:
    from loader.resume.stores import SpannerStateStore

    db = make_database()
    by_client, by_wire = SpannerStateStore(db), SpannerStateStore(emulator_wire(db))
    by_client.put("r", "T", "run", {"a": 1})
    by_wire.put("r", "T", "b/00000001/00000001", {"n": 2})
    assert by_wire.get("r", "T", "run") == {"a": 1}
    assert (
        by_client.parts("r", "T", "b/")
        == by_wire.parts("r", "T", "b/")
        == {"b/00000001/00000001": {"n": 2}}
    )
    assert by_wire.claim("r", "T", "lease/1", {})
    assert not by_client.claim("r", "T", "lease/1", {"owner": "another"})
    by_wire.delete_prefix("r", "T", "b/")
    assert by_client.parts("r", "T", "") == {"lease/1": {}, "run": {"a": 1}}


def test_a_load_through_the_wire_writes_exactly_the_rows_and_resumes(
    make_database: Any, tmp_path: Path
) -> None:
    """``load`` with no database given connects through loader/wire; killed after some
    commits (stop), a second run resumes and the table holds each row once."""
    import threading

    from loader import load
    from loader.errors import Interrupted

    db = make_database()
    src = tmp_path / "customers.csv"
    n = 400
    src.write_text(
        "CustomerId,Name,Email\n" + "".join(f"{i},name {i},c{i}@x.example\n" for i in range(n)),
        encoding="utf-8",
    )
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.commits >= 2:
            stop.set()

    config = small_load_config(db, "Customers", [src])
    with pytest.raises(Interrupted):
        load(config, stop=stop, progress=progress)
    partial = read_table(db, "Customers", ["CustomerId"])
    assert 0 < len(partial) < n
    report = load(config)
    (table,) = report.tables
    assert table.rows_written == n - len(partial) and table.rows_skipped == len(partial)
    rows = read_table(db, "Customers", ["CustomerId", "Name", "Email"])
    assert rows == [(i, f"name {i}", f"c{i}@x.example") for i in range(n)]


def test_the_channel_has_the_clients_keepalive_and_no_size_limits(
    server: CaptureSpanner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.connection import open_channel

    opened: list[Any] = []
    real = grpc.insecure_channel

    def record(target: str, options: Any = None) -> Any:
        opened.append(dict(options or ()))
        return real(target, options=options)

    monkeypatch.setattr(grpc, "insecure_channel", record)
    open_channel().close()
    (options,) = opened
    assert options["grpc.keepalive_time_ms"] == 120000
    assert options["grpc.max_send_message_length"] == -1


def test_a_loads_max_retry_time_bounds_its_wire_reads(
    server: CaptureSpanner, tmp_path: Path
) -> None:
    """``connect_access`` hands the load's `max_retry_time` to the wire access (the bound
    on retrying a read or CreateSession); without it, the wire's own default holds."""
    from loader import Target
    from loader.connection import connect_access
    from loader.wire.access import MAX_RETRY_TIME

    target = Target(PROJECT, INSTANCE, "db", connect_timeout=5)
    with connect_access(target, max_retry_time=7.5) as access:
        assert isinstance(access, WireAccess) and access.max_retry_time == 7.5
    with connect_access(target) as access:
        assert isinstance(access, WireAccess) and access.max_retry_time == MAX_RETRY_TIME


@pytest.mark.parametrize(
    "raw,micro,nanos",
    [
        ("2024-01-01T00:00:00.123456789Z", 123456, 123456789),
        ("2024-01-01T00:00:00.000000001Z", 0, 1),
        ("2024-01-01T00:00:00.5Z", 500000, None),
        ("2024-01-01T00:00:00Z", 0, None),
    ],
)
def test_a_timestamp_read_back_keeps_its_nanoseconds(raw: str, micro: int, nanos: Any) -> None:
    """As the client library's DatetimeWithNanoseconds does: a key read back is matched to
    the one sent (loader.commit.runner), which a cut to the microsecond made impossible."""
    import datetime as dt

    from loader.verify import _timestamp_text
    from loader.wire.results import timestamp

    v = timestamp(raw)
    assert v.microsecond == micro and v.tzinfo == dt.timezone.utc
    assert getattr(v, "nanosecond", None) == nanos
    assert _timestamp_text(v) == raw.replace(".5Z", ".500000000Z").replace(":00Z", ":00.000000000Z")
