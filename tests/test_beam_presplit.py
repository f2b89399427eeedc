"""``load --runner R --presplit``: the table's split points are its key-range boundaries
(loader/beam/splits.py), stored for the pipeline to reuse. The AddSplitPoints requests are
checked on the recording server (tests/capture_spanner.py), as in tests/test_presplit.py; on
the emulator (UNIMPLEMENTED) it is one note and the Beam load is exact (needs apache-beam:
scripts/beam_check.sh).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import pytest
from capture_spanner import CaptureSpanner
from conftest import HAVE_BEAM, read_table, small_load_config
from test_presplit import SCHEMA, config_for, needs_split_api, sent_points, write_orders

from loader import load
from loader.beam.work import BOUNDS_PART, bounds_from_state
from loader.pipeline import job_id
from loader.presplit import list_values
from loader.presplit_job import LoadSplits
from loader.resume.stores import FileStateStore


def _splits(config: Any, store: Any, notes: list[str]) -> LoadSplits:
    job = config.jobs[0]
    return LoadSplits(config, store, {"Orders": SCHEMA}, {"Orders": job}, notes=notes)


def _runner(config: Any) -> Any:
    """A Beam load's config: it keeps its state in the database's table."""
    return dataclasses.replace(config, state=True, state_file=None, runner="DirectRunner")


def _wire(bounds: Any) -> list[tuple[Any, ...]]:
    """Boundary rows as the points' wire values (what sent_points decodes)."""
    from google.protobuf import struct_pb2

    out = []
    for raw in list_values(bounds, ["Region", "Id"], SCHEMA):
        lv = struct_pb2.ListValue.FromString(raw)
        out.append(
            tuple(
                None if v.WhichOneof("kind") == "null_value" else getattr(v, v.WhichOneof("kind"))
                for v in lv.values
            )
        )
    return out


def test_runner_presplit_sends_the_key_range_boundaries(tmp_path: Path, monkeypatch: Any) -> None:
    needs_split_api()
    source = tmp_path / "orders.csv"
    write_orders(source, rows=2000)
    # the Beam load's state is its database's table; the store is the same protocol
    store = FileStateStore(tmp_path / "state.json")
    config = _runner(config_for(source, presplit=True, nodes=2))
    run_id = job_id(config, config.jobs[0], "Orders")
    notes: list[str] = []
    try:
        with CaptureSpanner() as server:
            monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
            summary = _splits(config, store, notes).before()
            first = list(server.split_requests)
            stored = store.get(run_id, "Orders", BOUNDS_PART)
            assert stored is not None
            # 2 nodes: 20 points, the table's share 7 (of three equal weights): 8 key ranges
            assert (stored["key_ranges"], stored["boundaries"]) == (8, 7)
            bounds = bounds_from_state(stored)
            sent = sent_points(first)
            table_keys = [k for _t, ix, keys in sent if not ix for k in keys]
            assert table_keys == _wire(bounds)
            assert {ix for _t, ix, _k in sent if ix} == {"OrdersByCustomer", "OrdersByAmount"}
            assert summary is not None and summary["sent"] == 20

            # a resume with another --key-ranges: the stored boundaries, sent again as they were
            store.delete_prefix(run_id, "Orders", "split_points")
            again = _runner(config_for(source, presplit=True, nodes=2, key_ranges=3))
            _splits(again, store, notes).before()
            resent = sent_points(server.split_requests[len(first) :])
            assert [k for _t, ix, keys in resent if not ix for k in keys] == table_keys
    finally:
        store.close()


def test_without_runner_the_points_are_the_quantiles(tmp_path: Path, monkeypatch: Any) -> None:
    needs_split_api()
    source = tmp_path / "orders.csv"
    write_orders(source, rows=500)
    store = FileStateStore(tmp_path / "state.json")
    config = config_for(source, presplit=True, nodes=1)
    try:
        with CaptureSpanner() as server:
            monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.address)
            _splits(config, store, []).before()
            assert server.split_requests
        assert store.get(job_id(config, config.jobs[0], "Orders"), "Orders", BOUNDS_PART) is None
    finally:
        store.close()


@pytest.mark.skipif(not HAVE_BEAM, reason="apache-beam is not installed (scripts/beam_check.sh)")
def test_runner_presplit_on_the_emulator_is_a_note_and_the_pipeline_reuses_the_boundaries(
    make_database: Callable[..., Any], tmp_path: Path
) -> None:
    ddl = (
        "CREATE TABLE Orders (Region STRING(16), Id INT64 NOT NULL, Customer INT64, "
        "Amount FLOAT64) PRIMARY KEY (Region, Id DESC)",
        "CREATE INDEX OrdersByCustomer ON Orders(Customer DESC)",
        "CREATE NULL_FILTERED INDEX OrdersByAmount ON Orders(Amount)",
    )
    db = make_database(ddl)
    source = tmp_path / "orders.csv"
    rows = write_orders(source, rows=600)
    config = small_load_config(
        db, "Orders", [source], presplit=True, nodes=2, runner="DirectRunner"
    )
    report = load(config, database=db)
    notes = [n for n in report.notes if "split point" in n]
    assert len(notes) == 1, report.notes
    assert "does not implement AddSplitPoints" in notes[0] or "lacks" in notes[0]
    # the boundaries cut from the presplit sample, stored before the pipeline ran, are its own
    assert any("from its --presplit sample" in n for n in report.notes), report.notes
    got = read_table(db, "Orders", ["Region", "Id", "Customer", "Amount"])
    assert sorted(got, key=repr) == sorted(rows, key=repr)
    assert report.split_points is not None and report.split_points["sent"] == 0
