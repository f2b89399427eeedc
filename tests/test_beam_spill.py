"""A key range over the worker's memory budget (loader/beam/spill.py): sorted in runs on local
disk, merged in key order, cut into the very batches an in-memory sort cuts (so the
exactly-once markers still hold), with the rows held at once bounded. The steps run without
Beam against the emulator; one DirectRunner load needs apache-beam (scripts/beam_check.sh).
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from conftest import HAVE_BEAM, read_table, small_load_config
from hypothesis import given, settings
from hypothesis import strategies as st

from loader import load
from loader.beam import spill, work
from loader.buffer import RECORD_COL, SOURCE_COL
from loader.commit import SpannerCommitter
from loader.commit.jobs import rows_of
from loader.plan import plan_ranges
from loader.resume.stores import SpannerStateStore
from loader.schema import Column, KeyPart, TableSchema, read_schemas
from loader.sort import duplicate_key_mask, sort_order, take_table
from loader.source import expand_sources
from loader.types import SpannerType

DDL = """
CREATE TABLE Notes (
  Id INT64 NOT NULL,
  Tag STRING(20),
  Body STRING(MAX),
) PRIMARY KEY (Id);
CREATE INDEX NotesByTag ON Notes (Tag);
"""


BODIES: dict[str, dict[int, list[str]]] = {}
"""Each written file set's bodies per id, in source order."""


def _write_files(tmp_path: Path, n_files: int = 3, rows: int = 200, seed: int = 3) -> list[str]:
    """Files of shuffled ids, every 10th id repeated in a later file (a duplicate key whose
    rows land in different runs)."""
    rnd = random.Random(seed)
    ids = list(range(n_files * rows))
    rnd.shuffle(ids)
    paths = []
    bodies = BODIES.setdefault(str(tmp_path), {})
    for f in range(n_files):
        lines = ["Id,Tag,Body\n"]
        mine = ids[f * rows : (f + 1) * rows]
        if f:
            mine += [i for i in ids[: f * rows] if i % 10 == 0][:15]
        for i in mine:
            body = f"body of {i} from file {f}, some padding"
            bodies.setdefault(i, []).append(body)
            lines.append(f'{i},t{i % 7},"{body}"\n')
        path = tmp_path / f"notes-{f}.csv"
        path.write_text("".join(lines))
        paths.append(str(path))
    return paths


def _blocks(config: Any, schema: Any) -> list[work.Block]:
    sources, _ = expand_sources(list(config.jobs[0].sources))
    uris = [s.uri for s in sources]
    out: list[work.Block] = []
    for rng in plan_ranges(sources, config.dialect, target=config.range_size):
        index = uris.index(rng.source.uri)
        out.extend(b for b, _ in work.read_blocks_of(index, rng, schema, config) if b is not None)
    return out


class _Recorded:
    """What ``commit_range`` submits: each job's marker part, keys and size."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.jobs: list[tuple[str, list[int]]] = []
        recorded = self
        real = work.CommitPool

        class Pool(real):  # type: ignore[misc, valid-type]
            def submit(self, job: Any) -> None:
                part = re.search(rb"beam/[0-9/]+", bytes(job.extra[0]))
                assert part is not None
                ids = rows_of(job.keys).column("Id").to_pylist()
                recorded.jobs.append((part.group().decode(), ids))
                super().submit(job)

        monkeypatch.setattr(work, "CommitPool", Pool)


def _commit(db: Any, config: Any, schema: Any, blocks: Any, run: str, **kw: Any) -> Any:
    store = SpannerStateStore(db)
    store.ensure()
    return work.commit_range(
        0,
        blocks,
        schema=schema,
        config=config,
        sources=tuple(config.jobs[0].sources),
        committer=SpannerCommitter(db),
        store=store,
        run_id=run,
        **kw,
    )


def test_a_key_range_over_the_budget_loads_the_same_batches_in_runs(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _write_files(tmp_path)
    mem_db, spill_db = make_database([DDL]), make_database([DDL])
    config = small_load_config(
        mem_db, "Notes", paths, mode="insert", range_size=2000, max_mutations=90
    )
    schema = read_schemas(mem_db, ["Notes"])["Notes"]
    blocks = _blocks(config, schema)
    total = sum(b.table.num_rows for b in blocks)
    assert total == 630

    rec = _Recorded(monkeypatch)
    in_memory = _commit(mem_db, config, schema, blocks, "r", budget=1 << 40)
    assert in_memory.runs == 0 and in_memory.peak_rows == total
    memory_jobs, rec.jobs = rec.jobs, []

    budget = 4 << 10  # Arrow bytes: a few dozen rows
    shuffled = list(blocks)
    random.Random(5).shuffle(shuffled)  # the engine may deliver them in any order
    spilled = _commit(spill_db, config, schema, shuffled, "r", budget=budget)
    assert spilled.runs > 5
    # the same batches (marker names, rows), so the markers mean the same on either path
    assert rec.jobs == memory_jobs
    ids = [i for _part, batch in rec.jobs for i in batch]
    assert ids == sorted(set(ids)) == list(range(600))  # commits in key order, each key once
    assert (spilled.rows_written, len(spilled.rejects)) == (600, 30)
    assert [r.reason for r in spilled.rejects] == [r.reason for r in in_memory.rejects]
    assert sorted((r.source, r.line) for r in spilled.rejects) == sorted(
        (r.source, r.line) for r in in_memory.rejects
    )
    # insert mode keeps the first row of a key: file 0's
    got = read_table(spill_db, "Notes", ["Id", "Tag", "Body"])
    assert got == read_table(mem_db, "Notes", ["Id", "Tag", "Body"])
    assert [b for _i, _t, b in got] == [v[0] for _k, v in sorted(BODIES[str(tmp_path)].items())]
    # within the budgets, the marker's cells included
    assert spilled.mutations and max(spilled.mutations) <= 90  # markers counted
    # the rows held at once: a fraction of the key range
    assert spilled.peak_rows < total // 4, spilled.peak_rows

    # a replayed bundle: every batch found done, nothing written twice
    rec.jobs = []
    again = _commit(spill_db, config, schema, blocks, "r", budget=budget)
    assert (again.rows_written, again.rows_skipped, again.commits) == (0, 600, 0)
    # a replay racing the first attempt (it missed the markers): each commit fails on its
    # marker, atomically, and the marker read back confirms it as done
    store_parts = SpannerStateStore.parts
    monkeypatch.setattr(SpannerStateStore, "parts", lambda self, *a: {})
    race = _commit(spill_db, config, schema, list(reversed(blocks)), "r", budget=budget)
    monkeypatch.setattr(SpannerStateStore, "parts", store_parts)
    assert rec.jobs == memory_jobs
    assert (race.rows_written, race.rows_skipped) == (0, 600)
    assert read_table(spill_db, "Notes", ["Id", "Tag", "Body"]) == got


def test_upsert_keeps_the_last_row_of_a_key_across_runs(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    paths = _write_files(tmp_path, seed=4)
    db = make_database([DDL])
    config = small_load_config(db, "Notes", paths, range_size=1500)
    schema = read_schemas(db, ["Notes"])["Notes"]
    res = _commit(db, config, schema, _blocks(config, schema), "u", budget=3 << 10)
    assert res.runs > 5 and res.rows_written == 600 and res.superseded == 30
    assert not res.rejects
    got = read_table(db, "Notes", ["Id", "Body"])
    assert got == [(i, v[-1]) for i, v in sorted(BODIES[str(tmp_path)].items())]


def test_column_sets_and_lone_large_rows_cut_the_same_batches_when_spilled(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files writing other columns (a second column set, numbered by its first row) and rows
    over the byte budget (each a batch of its own): spilled or not, the same batches."""
    rnd = random.Random(9)
    ids = list(range(400))
    rnd.shuffle(ids)
    (tmp_path / "a.csv").write_text(
        "Id,Tag,Body\n"
        + "".join(f"{i},t,{'x' * (3000 if i % 37 == 0 else 20)}\n" for i in ids[:250])
    )
    (tmp_path / "b.csv").write_text("Id,Tag\n" + "".join(f"{i},u\n" for i in ids[250:]))
    paths = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    mem_db, spill_db = make_database([DDL]), make_database([DDL])
    config = small_load_config(
        mem_db, "Notes", paths, range_size=1500, max_batch_bytes=2048, max_bad_rows=10
    )
    schema = read_schemas(mem_db, ["Notes"])["Notes"]
    blocks = _blocks(config, schema)
    rec = _Recorded(monkeypatch)
    in_memory = _commit(mem_db, config, schema, blocks, "c", budget=1 << 40)
    memory_jobs, rec.jobs = rec.jobs, []
    spilled = _commit(spill_db, config, schema, list(reversed(blocks)), "c", budget=3 << 10)
    assert spilled.runs > 3 and in_memory.runs == 0
    assert rec.jobs == memory_jobs
    assert {part.rsplit("/", 1)[0] for part, _ids in rec.jobs} == {"beam/0/0", "beam/0/1"}
    assert any(len(batch) == 1 for _part, batch in rec.jobs)  # a lone large row
    assert spilled.rows_written == in_memory.rows_written == 400
    cols = ["Id", "Tag", "Body"]
    assert read_table(spill_db, "Notes", cols) == read_table(mem_db, "Notes", cols)


# -- the merge, as a property -------------------------------------------------------------------

SCHEMA = TableSchema(
    name="T",
    columns=(
        Column("Region", SpannerType.parse("STRING(8)")),
        Column("Id", SpannerType.parse("INT64"), nullable=False),
    ),
    primary_key=(KeyPart("Region"), KeyPart("Id", desc=True)),
)

keys = st.tuples(st.sampled_from([None, "", "a", "ab", "b"]), st.integers(-3, 3))


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(keys, min_size=1, max_size=80),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    piece=st.integers(1, 9),
    generic=st.booleans(),
)
def test_merged_runs_are_the_stable_key_order(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[Any],
    cuts: list[int],
    piece: int,
    generic: bool,
) -> None:
    """Keys compared as their bytes, or (``generic``: no compiled part) by the key sort."""
    n = len(rows)
    table = pa.table(
        {
            "Region": pa.array([r for r, _ in rows], pa.string()),
            "Id": pa.array([i for _, i in rows], pa.int64()),
            SOURCE_COL: pa.array([k // 7 for k in range(n)], pa.int32()),
            RECORD_COL: pa.array([k % 7 for k in range(n)], pa.int64()),
        }
    )
    order, _ = sort_order(table.select(["Region", "Id"]), SCHEMA.primary_key)
    expected = take_table(table, order)  # stable: equal keys in source order
    folder = tmp_path_factory.mktemp("runs")
    bounds = sorted({0, n, *(c for c in cuts if c < n)})
    paths = []
    for j, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        part = table.slice(lo, hi - lo)
        o, _ = sort_order(part.select(["Region", "Id"]), SCHEMA.primary_key)
        path = folder / f"run-{j}.arrow"
        spill.write_run(path, take_table(part, o), 64)
        paths.append(path)
    held = spill.Held()
    no_bytes = mock.patch.object(spill, "encode_keys", lambda *a: None)
    with no_bytes if generic else contextlib.nullcontext():
        chunks = list(spill.merge_runs(paths, SCHEMA, piece, held))
    assert held.now == 0
    got = []
    for chunk in chunks:  # each chunk sorted as the buffer sorts it (stable, by key)
        o, _ = sort_order(chunk.select(["Region", "Id"]), SCHEMA.primary_key)
        got.append(take_table(chunk, o))
    merged = pa.concat_tables(got) if got else table.slice(0, 0)
    assert merged.to_pylist() == expected.to_pylist()
    # no key's rows are split between chunks (de-duplicating a chunk is exact)
    for a, b in zip(got, got[1:]):
        pair = pa.concat_tables([a.slice(a.num_rows - 1), b.slice(0, 1)])
        assert not duplicate_key_mask(pair.select(["Region", "Id"]), SCHEMA.primary_key)[1]


def test_key_ranges_follow_the_input_size_against_the_budget() -> None:
    mib = 1 << 20
    assert spill.key_ranges_for(0, 0, 64 * mib, 1) == 1
    assert spill.key_ranges_for(10 * mib, 0, 64 * mib, 3) == 3  # one per byte range
    # 1 GiB of CSV, about 2 GiB as rows, in halves of a 256 MiB budget
    assert spill.key_ranges_for(1024 * mib, 0, 256 * mib, 8) == 16
    assert spill.key_ranges_for(0, 100 * mib, 256 * mib, 1) == 8  # gzip counted as 5x


# -- on the DirectRunner ------------------------------------------------------------------------


@pytest.mark.skipif(not HAVE_BEAM, reason="apache-beam is not installed (scripts/beam_check.sh)")
def test_direct_runner_sorts_a_large_key_range_in_runs(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    paths = _write_files(tmp_path, rows=1500, seed=6)
    config = small_load_config(
        db, "Notes", paths, runner="DirectRunner", mode="insert", key_ranges=1, max_bad_rows=100
    )
    report = load(config)
    t = report.tables[0]
    assert (t.rows_written, t.rows_rejected) == (4500, 30)
    got = read_table(db, "Notes", ["Id"])
    assert [i for (i,) in got] == list(range(4500))
    assert any("run(s) on the workers' local disk" in n for n in report.notes), report.notes
    # without --key-ranges, the input's size against the 64 KiB budget asks for more ranges
    db2 = make_database([DDL])
    auto = small_load_config(
        db2, "Notes", paths, runner="DirectRunner", mode="insert", max_bad_rows=100
    )
    report = load(auto)
    assert report.tables[0].rows_written == 4500
    ranges = [n for n in report.notes if "key range(s) on DirectRunner" in n]
    assert ranges and int(ranges[0].split(", ")[1].split()[0]) > 3, report.notes
