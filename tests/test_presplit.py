"""Pre-splitting (loader/presplit.py, loader/sample.py, loader/presplit_job.py).

The AddSplitPoints requests are checked on a recording gRPC server (tests/capture_spanner.py):
the emulator does not implement the method. There: chunks of at most 100 points, the table's
points at the expected quantiles in Spanner's key order (a DESC part, NULLs), index points as
(index key, table key), the expire time, the record in the job's state, and the expiring call
after the load. Against the emulator: its UNIMPLEMENTED is a one-line note and the load is
exact.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any, Optional

import pyarrow as pa
import pytest
from capture_spanner import CaptureSpanner
from conftest import INSTANCE, PROJECT, read_table, small_load_config
from google.protobuf import struct_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from loader import LoadConfig, TableJob, Target, load
from loader.convert import ConvertOptions
from loader.parse import Dialect
from loader.presplit import (
    MAX_POINTS_PER_REQUEST,
    SplitObject,
    chunks,
    list_values,
    quantile_rows,
    shares,
)
from loader.presplit_job import run_presplit
from loader.resume.stores import FileStateStore
from loader.schema import Column, Index, KeyPart, TableSchema
from loader.types import SpannerType

T = SpannerType.parse
SCHEMA = TableSchema(
    name="Orders",
    columns=(
        Column("Region", T("STRING(16)")),
        Column("Id", T("INT64"), nullable=False),
        Column("Customer", T("INT64")),
        Column("Amount", T("FLOAT64")),
    ),
    primary_key=(KeyPart("Region"), KeyPart("Id", desc=True)),
    indexes=(
        Index("OrdersByCustomer", ("Customer",), descending=("Customer",)),
        Index("OrdersByAmount", ("Amount",), null_filtered=True),
    ),
)
ROWS = 3000


def needs_split_api() -> None:
    from google.cloud.spanner_admin_database_v1 import types

    if not hasattr(types, "AddSplitPointsRequest"):
        pytest.skip("google-cloud-spanner < 3.53 has no AddSplitPoints (the fallback is tested)")


def write_orders(path: Path, rows: int = ROWS, seed: int = 7) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    ids = rnd.sample(range(1, 10 * rows), rows)
    out = []
    lines = ["Region,Id,Customer,Amount"]
    for i in ids:
        region = rnd.choice([None, "eu", "us", "ap", "sa"])
        customer = None if rnd.random() < 0.1 else rnd.randrange(500)
        amount = None if rnd.random() < 0.1 else round(rnd.uniform(0, 1000), 2)
        out.append((region, i, customer, amount))
        lines.append(",".join("" if v is None else str(v) for v in (region, i, customer, amount)))
    path.write_text("\n".join(lines) + "\n")
    return out


def config_for(source: Path, *, state: Optional[Path] = None, **split: Any) -> LoadConfig:
    return LoadConfig(
        target=Target(PROJECT, INSTANCE, "capture"),
        jobs=(TableJob("Orders", (str(source),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        rejects=None,
        state=state is not None,
        state_file=state,
        **split,
    )


def values(list_value: Any) -> tuple[Any, ...]:
    out = []
    for v in list_value.values:
        kind = v.WhichOneof("kind")
        out.append(None if kind == "null_value" else getattr(v, kind))
    return tuple(out)


def spanner_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Python sort key of an Orders primary key (wire values) in Spanner's order: Region ASC
    with NULL first, Id DESC."""
    region, ident = key
    return ((0, "") if region is None else (1, region), -int(ident))


def sent_points(requests: list[Any]) -> list[tuple[str, str, list[tuple[Any, ...]]]]:
    """(table, index, keys) of every SplitPoints sent, in order."""
    return [
        (sp.table, sp.index, [values(k.key_parts) for k in sp.keys])
        for req in requests
        for sp in req.split_points
    ]


def points_in(req: Any) -> int:
    return sum(len(sp.keys) if not sp.index else 1 for sp in req.split_points)


# -- the parts ------------------------------------------------------------------------------------


def test_chunks_hold_at_most_100_points_in_order() -> None:
    objects = [
        SplitObject("A", None, tuple((bytes([i]),) for i in range(150))),
        SplitObject("A", "IxA", tuple((bytes([i]), b"t") for i in range(70))),
        SplitObject("B", None, tuple((bytes([i]),) for i in range(5))),
    ]
    cut = chunks(objects)
    assert [sum(len(o.points) for o in c) for c in cut] == [100, 100, 25]
    flat = [(o.table, o.index, p) for c in cut for o in c for p in o.points]
    assert flat == [(o.table, o.index, p) for o in objects for p in o.points]


def test_shares_add_up() -> None:
    assert shares([1, 1, 1], 120) == [40, 40, 40]
    assert sum(shares([3, 1, 7], 10)) == 10
    assert shares([0, 0], 10) == [0, 0]
    assert shares([5], 0) == [0]


def test_list_values_are_the_encoders_bytes() -> None:
    table = pa.table(
        {
            "Region": pa.array([None, "eu"], pa.string()),
            "Id": pa.array([5, -3], pa.int64()),
            "Amount": pa.array([float("nan"), 1.5]),
        }
    )
    cols = ["Region", "Id", "Amount"]
    got = [values(struct_pb2.ListValue.FromString(b)) for b in list_values(table, cols, SCHEMA)]
    assert got[0][:2] == (None, "5") and got[0][2] == "NaN"
    assert got[1] == ("eu", "-3", 1.5)


def test_quantiles_follow_spanner_key_order() -> None:
    regions = [None, "b", "a", None, "c", "a", "b", "c", None, "a"] * 10
    ids = list(range(100))
    rows = pa.table({"Region": pa.array(regions, pa.string()), "Id": pa.array(ids, pa.int64())})
    picked = quantile_rows(rows, SCHEMA.primary_key, 9)
    keys = list(zip(picked.column("Region").to_pylist(), picked.column("Id").to_pylist()))
    everything = sorted(zip(regions, ids), key=lambda k: spanner_order((k[0], k[1])))
    assert keys == [everything[(i + 1) * 100 // 10] for i in range(9)]
    # fewer distinct keys than points asked: one point between each two
    few = pa.table({"Region": pa.array(["a", "a", "b"]), "Id": pa.array([1, 1, 2])})
    assert quantile_rows(few, SCHEMA.primary_key, 50).num_rows == 1


# -- the requests, on a recording server --------------------------------------------------------


def test_presplit_requests_then_load_expires_them(tmp_path: Path, monkeypatch: Any) -> None:
    """The command's requests, recorded in the job's state; the load expires exactly them."""
    needs_split_api()
    from google.cloud import spanner

    source = tmp_path / "orders.csv"
    rows = write_orders(source)
    state = tmp_path / "state.json"
    config = config_for(source, state=state, nodes=12)
    before = dt.datetime.now(dt.timezone.utc)
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        lines: list[str] = []
        report = run_presplit(
            config, database=database, schemas={"Orders": SCHEMA}, say=lines.append
        )
        added = list(server.split_requests)
        assert not server.commits
        load_report = load(config, database=database, schemas={"Orders": SCHEMA})
        expiring = server.split_requests[len(added) :]
        calls = list(server.calls)
    after = dt.datetime.now(dt.timezone.utc)

    # 12 nodes: 120 points, shared by the table and its two indexes (equal weights)
    assert report.sent == 120 and [o.points for o in report.objects] == [40, 40, 40]
    assert [points_in(r) for r in added] == [100, 20]
    assert all(points_in(r) <= MAX_POINTS_PER_REQUEST for r in added)
    for req in added:
        assert req.database == database.name
        assert req.initiator == "spanner-loader"
        for sp in req.split_points:
            expires = sp.expire_time.ToDatetime(tzinfo=dt.timezone.utc)
            assert before + dt.timedelta(days=10) - dt.timedelta(seconds=5) <= expires
            assert expires <= after + dt.timedelta(days=10)
    sent = sent_points(added)
    # the table's points: the keys at the 40 quantiles of the distinct keys, in Spanner's order
    table_keys = [k for t, ix, keys in sent if not ix for k in keys]
    ordered = sorted({(r, str(i)) for r, i, _c, _a in rows}, key=spanner_order)
    m = len(ordered)
    assert table_keys == [ordered[(i + 1) * m // 41] for i in range(40)]
    # index points: one per SplitPoints, (index key, table key), named with the base table
    for name in ("OrdersByCustomer", "OrdersByAmount"):
        mine = [keys for t, ix, keys in sent if ix == name]
        assert len(mine) == 40
        assert all(len(keys) == 2 for keys in mine)
        assert {t for t, ix, _k in sent if ix == name} == {"Orders"}
        index_keys = [keys[0] for keys in mine]
        if name == "OrdersByCustomer":  # DESC: NULLs last, the largest first
            order = [(1 if k[0] is None else 0, -int(k[0] or 0)) for k in index_keys]
        else:  # NULL_FILTERED: no NULL entries
            assert all(k[0] is not None for k in index_keys)
            order = [(0, float(k[0])) for k in index_keys]
        assert order == sorted(order)
    assert any("40 split points" in line for line in lines)

    # the load: commits, then one expiring call per request, the same points, expire time now
    assert calls[: len(added)] == ["AddSplitPoints"] * len(added)
    assert calls[-len(expiring) :] == ["AddSplitPoints"] * len(expiring)
    assert "Commit" in calls[len(added) : -len(expiring)]
    assert sent_points(expiring) == sent
    for req in expiring:
        for sp in req.split_points:
            assert sp.expire_time.ToDatetime(tzinfo=dt.timezone.utc) <= after
    assert load_report.rows_written == ROWS
    assert load_report.split_points is not None
    assert load_report.split_points["expired"] == 120
    # the record is gone with them
    store = FileStateStore(state)
    try:
        assert not any(
            store.get(run, "Orders", "split_points") for run in load_report.run_ids.values()
        )
    finally:
        store.close()


def test_load_presplit_without_state_adds_and_expires(tmp_path: Path, monkeypatch: Any) -> None:
    """``load --presplit`` with --no-state: the points it adds are expired at its end."""
    needs_split_api()
    from google.cloud import spanner

    source = tmp_path / "orders.csv"
    write_orders(source, rows=500)
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        report = load(
            config_for(source, presplit=True, nodes=2),
            database=database,
            schemas={"Orders": SCHEMA},
        )
        calls = list(server.calls)
        requests = list(server.split_requests)
    assert calls[0] == "AddSplitPoints" and calls[-1] == "AddSplitPoints"
    assert calls.count("AddSplitPoints") == 2
    assert sent_points(requests[:1]) == sent_points(requests[1:])
    assert points_in(requests[0]) == 20
    assert report.split_points is not None and report.split_points["expired"] == 20


def test_keep_split_points_sends_no_expiry(tmp_path: Path, monkeypatch: Any) -> None:
    needs_split_api()
    from google.cloud import spanner

    source = tmp_path / "orders.csv"
    write_orders(source, rows=300)
    state = tmp_path / "state.json"
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        report = load(
            config_for(source, state=state, presplit=True, nodes=1, keep_split_points=True),
            database=database,
            schemas={"Orders": SCHEMA},
        )
        calls = list(server.calls)
    assert calls.count("AddSplitPoints") == 1 and calls[0] == "AddSplitPoints"
    assert report.split_points is not None and report.split_points["kept"]
    recorded = json.loads(state.read_text())
    assert "split_points" in json.dumps(recorded)


@pytest.mark.parametrize(
    ("code", "expect"),
    [(7, "permission denied"), (8, "quota is used up after 0 of 10")],
)
def test_a_refusal_is_one_note_and_the_load_goes_on(
    tmp_path: Path, monkeypatch: Any, code: int, expect: str
) -> None:
    """PERMISSION_DENIED and RESOURCE_EXHAUSTED: a note, the rows still loaded, nothing to
    expire afterwards."""
    needs_split_api()
    from google.cloud import spanner
    from google.rpc import status_pb2

    source = tmp_path / "orders.csv"
    write_orders(source, rows=200)
    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        server.split_refusals.append(status_pb2.Status(code=code, message="no"))
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        report = load(
            config_for(source, presplit=True, nodes=1),
            database=database,
            schemas={"Orders": SCHEMA},
        )
        calls = list(server.calls)
    assert calls.count("AddSplitPoints") == 1
    assert report.rows_written == 200
    notes = [n for n in report.notes if "split point" in n]
    assert len(notes) == 1 and expect in notes[0] and "\n" not in notes[0]


def test_a_client_without_the_method_is_a_note(tmp_path: Path) -> None:
    """google-cloud-spanner before 3.53 has no add_split_points: the note names the release."""
    from loader.presplit import SplitReport, add

    report = SplitReport()
    objects = [SplitObject("Orders", None, ((b"",),))]
    sent = add(config_for(tmp_path / "x.csv", nodes=1), objects, report, admin=object())
    assert sent == []
    assert report.error is not None and report.error.kind == "client"
    assert "lacks DatabaseAdmin.add_split_points" in report.notes[0]


# -- the emulator -------------------------------------------------------------------------------


def test_emulator_unimplemented_is_a_note_and_the_load_is_exact(
    make_database: Any, tmp_path: Path
) -> None:
    ddl = (
        "CREATE TABLE Orders (Region STRING(16), Id INT64 NOT NULL, Customer INT64, "
        "Amount FLOAT64) PRIMARY KEY (Region, Id DESC)",
        "CREATE INDEX OrdersByCustomer ON Orders(Customer DESC)",
        "CREATE NULL_FILTERED INDEX OrdersByAmount ON Orders(Amount)",
    )
    db = make_database(ddl)
    source = tmp_path / "orders.csv"
    rows = write_orders(source, rows=400)
    config = small_load_config(db, "Orders", [source], presplit=True, nodes=2)
    report = load(config, database=db)
    notes = [n for n in report.notes if "split point" in n]
    assert len(notes) == 1, report.notes
    # the emulator answers UNIMPLEMENTED; a client before 3.53 has no method to call
    assert "does not implement AddSplitPoints" in notes[0] or "lacks" in notes[0]
    got = read_table(db, "Orders", ["Region", "Id", "Customer", "Amount"])
    assert sorted(got, key=repr) == sorted(rows, key=repr)
    assert report.split_points is not None and report.split_points["sent"] == 0


# -- sampling -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gcs_client() -> Any:
    """A GCS emulator for this module's tests (STORAGE_EMULATOR_HOST points at it)."""
    from gcs_server import gcs_emulator

    from loader.source import make_storage_client

    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        yield make_storage_client()


@pytest.mark.parametrize("where", ["file", "gcs"])
def test_windows_sample_a_large_source_evenly(
    tmp_path: Path, monkeypatch: Any, request: Any, where: str
) -> None:
    """Past WINDOWS * WINDOW_BYTES a file or object is read in evenly spread windows, each
    behind the source's own skipped line and header; every sampled key is a real one, from
    start to end, and two runs sample the same rows. A quoted field spanning lines is at worst
    a lost row."""
    import loader.sample as sample

    monkeypatch.setattr(sample, "WINDOWS", 8)
    monkeypatch.setattr(sample, "WINDOW_BYTES", 2048)
    lines = ["exported by a test", "Id,Region,Note"]
    for i in range(4000):
        note = '"two\nlines"' if i % 97 == 0 else "plain"
        lines.append(f"{i},r{i % 7},{note}")
    data = ("\n".join(lines) + "\n").encode()
    client = None
    if where == "file":
        uri = str(tmp_path / "notes.csv")
        Path(uri).write_bytes(data)
    else:
        client = request.getfixturevalue("gcs_client")
        bucket = client.create_bucket(f"presplit-{random.randrange(1 << 40):x}")
        bucket.blob("notes.csv").upload_from_string(data, content_type="text/csv")
        uri = f"gs://{bucket.name}/notes.csv"
    schema = TableSchema(
        "Notes",
        (Column("Id", T("INT64"), nullable=False), Column("Region", T("STRING(8)")),
         Column("Note", T("STRING(MAX)"))),
        (KeyPart("Id"),),
    )  # fmt: skip
    config = LoadConfig(
        target=Target(PROJECT, INSTANCE, "capture"),
        jobs=(TableJob("Notes", (uri,)),),
        dialect=Dialect(skip_rows=1),
        convert=ConvertOptions(),
        rejects=None,
    )
    job = config.jobs[0]
    first = sample.sample_table(config, job, schema, ["Id", "Region"], storage_client=client)
    again = sample.sample_table(config, job, schema, ["Id", "Region"], storage_client=client)
    assert first.rows.equals(again.rows)
    ids = first.rows.column("Id").to_pylist()
    assert 0 < len(ids) < 4000  # windows, not the whole source
    assert min(ids) == 0 and max(ids) == 3999  # from the first line to the last
    regions = first.rows.column("Region").to_pylist()
    assert all(r == f"r{i % 7}" for i, r in zip(ids, regions))
    # eight windows spread over the source: every eighth of the ids is represented
    assert {i * 8 // 4000 for i in ids} == set(range(8))
    assert first.bytes_total == len(data)


def test_a_streamed_sample_is_thinned_evenly(tmp_path: Path, monkeypatch: Any) -> None:
    import loader.sample as sample

    monkeypatch.setattr(sample, "MAX_SAMPLE_ROWS", 100)
    source = tmp_path / "orders.csv"
    write_orders(source, rows=1000)
    config = config_for(source)
    config = LoadConfig(**{**config.__dict__, "block_size": 4096})
    got = sample.sample_table(config, config.jobs[0], SCHEMA, ["Region", "Id"])
    assert 50 <= got.rows.num_rows <= 100
    order = [line.split(",")[1] for line in source.read_text().splitlines()[1:]]
    positions = sorted(order.index(str(i)) for i in got.rows.column("Id").to_pylist())
    assert positions[0] < 50 and positions[-1] > 900  # spread over the whole input


# -- the command line ---------------------------------------------------------------------------


def test_cli_presplit_and_load_presplit_on_the_emulator(
    tmp_path: Path, spanner_emulator: str
) -> None:
    """`presplit` and `load --presplit` against the emulator: one note, exit 0, rows exact."""
    import os
    import subprocess
    import sys

    from conftest import EXAMPLES, ROOT, SHOP_DDL

    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPANNER_EMULATOR_HOST": spanner_emulator}
    base = ["--emulator", "--database", "presplit", "--ddl", str(SHOP_DDL), "--nodes", "3"]
    manifest = str(EXAMPLES / "manifest.json")

    def run(*args: str) -> Any:
        return subprocess.run(
            [sys.executable, "-m", "loader", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )

    p = run("presplit", "--manifest", manifest, *base, "--no-state")
    assert "Traceback" not in p.stderr
    notes = [line for line in p.stdout.splitlines() if "split point" in line and "note" in line]
    assert len(notes) == 1, p.stdout
    if "lacks" in notes[0]:  # google-cloud-spanner < 3.53: the command could not do its work
        assert p.returncode == 1, (p.stdout, p.stderr)
    else:  # the emulator: nothing to split there
        assert p.returncode == 0 and "does not implement" in notes[0], (p.stdout, p.stderr)
    p = run("load", "--manifest", manifest, *base, "--presplit", "--json", "-q")
    assert p.returncode == 0, (p.stdout, p.stderr)
    report = json.loads(p.stdout)
    notes = [n for n in report["notes"] if "split point" in n]
    assert len(notes) == 1, report["notes"]
    assert report["split_points"]["sent"] == 0
    assert report["rows_written"] == report["rows_read"] > 0


def _float_order(f: Optional[float]) -> tuple[int, float]:
    if f is None:
        return (0, 0.0)
    if f != f:
        return (1, 0.0)
    return (2, f + 0.0)  # -0.0 and 0.0 are one key


@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.text(alphabet="abé\U0001f600", max_size=2)),
            st.one_of(st.none(), st.floats(allow_nan=True, width=64)),
        ),
        max_size=60,
    ),
    count=st.integers(0, 70),
)
@settings(max_examples=150, deadline=None)
def test_quantiles_are_distinct_keys_in_spanner_order(
    rows: list[tuple[Optional[str], Optional[float]]], count: int
) -> None:
    """Whatever the keys (NULLs, NaN, -0.0, a DESC part): the points are distinct keys of the
    input, strictly increasing in Spanner's order, min(count, distinct - 1) of them."""
    key = (KeyPart("S"), KeyPart("F", desc=True))
    table = pa.table(
        {"S": pa.array([r[0] for r in rows], pa.string()),
         "F": pa.array([r[1] for r in rows], pa.float64())}
    )  # fmt: skip

    def order(k: tuple[Optional[str], Optional[float]]) -> tuple[Any, ...]:
        cls, value = _float_order(k[1])
        return ((0, "") if k[0] is None else (1, k[0]), -cls, -value)

    distinct = {order(r) for r in rows}
    picked = quantile_rows(table, key, count)
    got = [order(k) for k in zip(picked.column("S").to_pylist(), picked.column("F").to_pylist())]
    assert got == sorted(set(got)) and len(got) == len(set(got))
    assert set(got) <= distinct
    assert len(got) == max(0, min(count, len(distinct) - 1))
    assert not got or got[0] != min(distinct)  # never a split before the first key


def test_an_interrupted_load_keeps_its_points_for_the_resume(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """``load --presplit`` stopped by a signal: the points stay (recorded in the job's state);
    the run that resumes it adds none again and expires those at its end."""
    import threading

    needs_split_api()
    from google.cloud import spanner

    from loader.errors import Interrupted

    source = tmp_path / "orders.csv"
    write_orders(source, rows=2000)
    state = tmp_path / "state.json"
    base = config_for(source, state=state, presplit=True, nodes=3)
    config = LoadConfig(**{**base.__dict__, "batch_rows": 50, "buffer_size": 64 << 10})
    stop = threading.Event()

    def progress(p: Any) -> None:
        if p.commits:
            stop.set()

    with CaptureSpanner() as server:
        monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
        database = spanner.Client(project=PROJECT).instance(INSTANCE).database("capture")
        with pytest.raises(Interrupted):
            load(
                config, database=database, schemas={"Orders": SCHEMA}, stop=stop,
                progress=progress,
            )  # fmt: skip
        first_calls = list(server.calls)
        added = list(server.split_requests)
        report = load(config, database=database, schemas={"Orders": SCHEMA})
        second_calls = server.calls[len(first_calls) :]
        expiring = server.split_requests[len(added) :]
    assert first_calls[0] == "AddSplitPoints" and first_calls.count("AddSplitPoints") == 1
    assert "Commit" in first_calls
    assert second_calls[-1] == "AddSplitPoints" and second_calls.count("AddSplitPoints") == 1
    assert sent_points(expiring) == sent_points(added) and points_in(added[0]) == 30
    assert any("not added again" in n for n in report.notes), report.notes
    assert report.split_points is not None and report.split_points["expired"] == 30


def test_plan_shares_points_and_leaves_deferred_indexes_out(tmp_path: Path) -> None:
    """10 points per node, shared by the table and the indexes that stay in place; an index
    the load drops for its duration (deferred) gets none, and neither does a small instance."""
    from loader.presplit import SplitReport, plan

    source = tmp_path / "orders.csv"
    write_orders(source, rows=400)
    config = config_for(source, nodes=3)
    report = SplitReport()
    objects = plan(config, {"Orders": SCHEMA}, config.jobs, report, deferred={"OrdersByAmount"})
    assert [(o.table, o.index, len(o.points)) for o in objects] == [
        ("Orders", None, 15),
        ("Orders", "OrdersByCustomer", 15),
    ]
    small = SplitReport()
    assert plan(config_for(source, nodes=0.5), {"Orders": SCHEMA}, config.jobs, small) == []
    assert "under one node" in small.notes[0]


def test_a_source_whose_sampled_rows_are_all_rejected_says_so(tmp_path: Path) -> None:
    from loader.presplit import SplitReport, plan

    source = tmp_path / "orders.csv"
    write_orders(source, rows=3)
    lines = source.read_text().splitlines()
    source.write_text(lines[0] + "\n" + "".join(f"{i},one field too few\n" for i in range(3)))
    config = config_for(source, nodes=3)
    report = SplitReport()
    assert plan(config, {"Orders": SCHEMA}, config.jobs, report) == []
    [note] = [n for n in report.notes if "no keys sampled" in n]
    assert note.startswith("Orders: no keys sampled") and f"{source} line 2" in note, note
