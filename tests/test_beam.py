"""The Beam path (loader/beam), against the emulator.

The work of each step (loader/beam/work.py) is tested without Beam: key-range assignment, and
a key range committed twice (a replayed bundle) in insert mode, including a replay that races
past the marker check and fails on the marker. The pipeline itself runs on the DirectRunner
when apache-beam is installed (the ``[beam]`` extra); without it those tests are skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import HAVE_BEAM, needs_beam, read_table, small_load_config

from loader import load
from loader.beam import work
from loader.commit import SpannerCommitter
from loader.errors import CommitError
from loader.plan import plan_ranges
from loader.resume.stores import SpannerStateStore
from loader.schema import read_schemas
from loader.source import expand_sources

DDL = """
CREATE TABLE Notes (
  Id INT64 NOT NULL,
  Tag STRING(20),
  Body STRING(MAX),
) PRIMARY KEY (Id);
CREATE INDEX NotesByTag ON Notes (Tag);
"""


def _write_files(
    tmp_path: Path, n_files: int = 3, rows: int = 60, seed: int = 1
) -> dict[int, tuple[str, str]]:
    """CSV files whose quoted fields hold newlines (CRLF too) and doubled quotes, ids shuffled
    across files (so every file feeds every key range)."""
    rnd = random.Random(seed)
    ids = list(range(n_files * rows))
    rnd.shuffle(ids)
    expected: dict[int, tuple[str, str]] = {}
    for f in range(n_files):
        lines = ["Id,Tag,Body\n"]
        for i in ids[f * rows : (f + 1) * rows]:
            tag = f"t{i % 7}"
            body = f'line one of {i}\nline "two"\r\nend' if i % 2 else f"plain {i}"
            expected[i] = (tag, body)
            quoted = '"' + body.replace('"', '""') + '"'
            lines.append(f"{i},{tag},{quoted}\n")
        (tmp_path / f"notes-{f}.csv").write_text("".join(lines), newline="")
    return expected


def _rows(db: Any) -> dict[int, tuple[str, str]]:
    return {r[0]: (r[1], r[2]) for r in read_table(db, "Notes", ["Id", "Tag", "Body"])}


# -- the steps, without Beam ------------------------------------------------------------------


def _blocks(config: Any, schema: Any) -> list[work.Block]:
    sources, _ = expand_sources(list(config.jobs[0].sources))
    out = []
    for i, rng in enumerate(plan_ranges(sources, config.dialect, target=config.range_size)):
        index = [s.uri for s in sources].index(rng.source.uri)
        out.extend(b for b, _ in work.read_blocks_of(index, rng, schema, config) if b is not None)
        assert i >= 0
    return out


def test_key_ranges_split_rows_in_key_order(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    _write_files(tmp_path)
    config = small_load_config(db, "Notes", sorted(tmp_path.glob("*.csv")), range_size=500)
    schema = read_schemas(db, ["Notes"])["Notes"]
    blocks = _blocks(config, schema)
    bounds = work.boundaries([work.sample_keys(b, schema, 3) for b in blocks], schema, 4)
    assert bounds is not None and bounds.num_rows == 3
    b_ids = bounds.column("Id").to_pylist()
    assert b_ids == sorted(b_ids)
    per_range: dict[int, list[int]] = {}
    for b in blocks:
        for r, part in work.split_block(b, bounds, schema):
            per_range.setdefault(r, []).extend(part.table.column("Id").to_pylist())
    # disjoint, and in key order from one range to the next
    assert sorted(x for ids in per_range.values() for x in ids) == list(range(180))
    for r, ids in per_range.items():
        lo = b_ids[r - 1] if r else -1
        hi = b_ids[r] if r < len(b_ids) else 10**9
        assert all(lo <= i < hi for i in ids), r


def test_key_samples_follow_no_pattern_of_the_rows() -> None:
    """Every 8th record was sampled: rows whose first key part repeats every 4 rows (a
    round-robin export) were sampled in one region only, and the key ranges all cut inside
    it (a Beam tryout: one range had 46 of 63 batches). A hash of the record picks them."""
    import collections

    import numpy as np
    import pyarrow as pa

    n = 40_000
    table = pa.table({"Region": np.array(list("ABCD"))[np.arange(n) % 4], "Id": np.arange(n)})
    block = work.Block(0, 1, (), table, pa.array(np.arange(1, n + 1)), None)

    class Keys:
        key_names = ("Region", "Id")

    sampled = work.sample_keys(block, Keys, 8)  # type: ignore[arg-type]
    counts = collections.Counter(sampled.column("Region").to_pylist())
    assert sorted(counts) == list("ABCD")
    assert 0.8 * n / 32 < min(counts.values()) and max(counts.values()) < 1.2 * n / 32
    assert work.sample_keys(block, Keys, 8).equals(sampled)  # the same rows every attempt
    assert work.sample_keys(block, Keys, 1).num_rows == n  # type: ignore[arg-type]


def test_a_replayed_key_range_is_harmless_in_insert_mode(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    expected = _write_files(tmp_path)
    config = small_load_config(
        db, "Notes", sorted(tmp_path.glob("*.csv")), mode="insert", range_size=400, max_mutations=60
    )
    schema = read_schemas(db, ["Notes"])["Notes"]
    blocks = _blocks(config, schema)
    store = SpannerStateStore(db)
    store.ensure()
    committer = SpannerCommitter(db)
    sources = tuple(sorted(str(p) for p in tmp_path.glob("*.csv")))
    args = dict(
        schema=schema, config=config, sources=sources, committer=committer, store=store, run_id="r1"
    )

    first = work.commit_range(0, blocks, **args)  # type: ignore[arg-type]
    assert first.rows_written == 180 and not first.rejects
    # every commit within the budget, the marker's cells included
    assert first.mutations and max(first.mutations) <= 60  # markers counted
    assert _rows(db) == expected

    # the same bundle again, blocks in another order: every batch is found done
    again = work.commit_range(0, list(reversed(blocks)), **args)  # type: ignore[arg-type]
    assert (again.rows_written, again.rows_skipped, again.commits) == (0, 180, 0)

    # a replay that missed the markers (racing the first attempt): each commit fails on its
    # marker (insert), atomically, and the marker read back confirms it
    monkeypatch.setattr(store, "parts", lambda *a: {})
    race = work.commit_range(0, blocks, **args)  # type: ignore[arg-type]
    assert race.rows_written == 0 and race.rows_skipped == 180 and not race.rejects
    assert _rows(db) == expected


def test_a_real_duplicate_is_still_rejected(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    _write_files(tmp_path, n_files=1, rows=20)
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], [[5, "old", "old"]])
    config = small_load_config(db, "Notes", sorted(tmp_path.glob("*.csv")), mode="insert")
    schema = read_schemas(db, ["Notes"])["Notes"]
    store = SpannerStateStore(db)
    store.ensure()
    res = work.commit_range(
        0,
        _blocks(config, schema),
        schema=schema,
        config=config,
        sources=tuple(str(p) for p in tmp_path.glob("*.csv")),
        committer=SpannerCommitter(db),
        store=store,
        run_id="r2",
    )
    assert res.rows_written == 19
    assert [r.text for r in res.rejects] == ["key (5,)"]


def test_skip_existing_on_the_beam_path_reads_a_refused_batch(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """With ``skip_existing`` a refused batch's keys are read: the rows whose keys are there
    are left out and counted, and the row that clashes only on a unique index is still
    rejected (its run, refused, is bisected)."""
    db = make_database([DDL, "CREATE UNIQUE INDEX NotesByBody ON Notes (Body)"])
    expected = _write_files(tmp_path, n_files=1, rows=40)
    held = {5: ("old", "old five"), 17: ("old", "old seventeen")}
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], [[k, *v] for k, v in held.items()])
        b.insert("Notes", ["Id", "Tag", "Body"], [[1000, "x", expected[9][1]]])  # 9 clashes
    config = small_load_config(
        db, "Notes", sorted(tmp_path.glob("*.csv")), mode="insert", skip_existing=True
    )
    schema = read_schemas(db, ["Notes"])["Notes"]
    store = SpannerStateStore(db)
    store.ensure()
    res = work.commit_range(
        0,
        _blocks(config, schema),
        schema=schema,
        config=config,
        sources=tuple(str(p) for p in tmp_path.glob("*.csv")),
        committer=SpannerCommitter(db),
        store=store,
        run_id="r3",
    )
    assert (res.rows_written, res.key_skipped) == (37, 2)
    assert [r.text for r in res.rejects] == ["key (9,)"]
    rows = _rows(db)
    assert {k: rows[k] for k in held} == held and 9 not in rows and len(rows) == 40


class _Counting:
    """A committer that counts what it is asked, and fails once ``fail_after`` commits have
    landed (a worker lost mid-bundle)."""

    def __init__(self, inner: Any, fail_after: int = -1) -> None:
        self.inner = inner
        self.fail_after = fail_after
        self.commits = self.landed = self.reads = 0

    def commit(self, mutations: Any) -> None:
        if self.landed == self.fail_after:
            raise RuntimeError("worker lost")
        self.commits += 1
        self.inner.commit(mutations)
        self.landed += 1

    def existing_keys(self, table: str, keys: Any) -> Any:
        self.reads += 1
        return self.inner.existing_keys(table, keys)


def _range_args(db: Any, tmp_path: Path, run_id: str, **kw: Any) -> dict[str, Any]:
    kw = {"mode": "insert", **kw}
    config = small_load_config(db, "Notes", sorted(tmp_path.glob("*.csv")), **kw)
    schema = read_schemas(db, ["Notes"])["Notes"]
    store = SpannerStateStore(db)
    store.ensure()
    return dict(
        blocks=_blocks(config, schema),
        schema=schema,
        config=config,
        sources=tuple(sorted(str(p) for p in tmp_path.glob("*.csv"))),
        store=store,
        run_id=run_id,
    )


def test_an_insert_over_rows_already_there_reads_each_batch_once(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """Every key of the file is in the table (a load run again under another run id): each
    batch is refused once and read once, and every row rejected once; nothing is bisected."""
    db = make_database([DDL])
    _write_files(tmp_path, n_files=1, rows=120)
    first = work.commit_range(0, committer=SpannerCommitter(db), **_range_args(db, tmp_path, "a"))
    assert first.rows_written == 120
    counting = _Counting(SpannerCommitter(db))
    again = work.commit_range(0, committer=counting, **_range_args(db, tmp_path, "b"))
    batches = -(-120 // 50)  # 50-row batches
    assert (counting.commits, counting.reads) == (batches, batches)
    assert (again.rows_written, again.commits) == (0, 0)
    assert sorted(int(r.text[5:-2]) for r in again.rejects) == list(range(120))


def test_a_replay_after_a_worker_lost_mid_batch_finds_the_refused_rows_again(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """A batch's read finds rows 5 and 17 there; the attempt commits one run between them and
    is lost. The replay commits the rest, and rejects both rows again (the failed attempt's
    rejects are lost with it): no marker covers a refused row."""
    db = make_database([DDL])
    expected = _write_files(tmp_path, n_files=1, rows=40)
    held = {5: ("old", "old five"), 17: ("old", "old seventeen")}
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], [[k, *v] for k, v in held.items()])
    lost = _Counting(SpannerCommitter(db), fail_after=1)
    with pytest.raises(CommitError, match="worker lost"):
        work.commit_range(0, committer=lost, **_range_args(db, tmp_path, "r"))
    assert lost.landed == 1
    replay = work.commit_range(0, committer=SpannerCommitter(db), **_range_args(db, tmp_path, "r"))
    assert sorted(r.text for r in replay.rejects) == ["key (17,)", "key (5,)"]
    assert replay.rows_written + replay.rows_skipped == 38
    assert replay.rows_skipped > 0  # the run the lost attempt committed
    assert _rows(db) == {**expected, **held}


def test_a_replay_racing_an_earlier_attempt_leaves_its_rows_alone(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The earlier attempt cut the refused batch by its read (runs between rows 5 and 17); a
    replay that missed its markers at the start (racing it) is refused, reads every key there,
    and tells the earlier attempt's rows by their markers: only 5 and 17 are rejects."""
    db = make_database([DDL])
    expected = _write_files(tmp_path, n_files=1, rows=40)
    held = {5: ("old", "old five"), 17: ("old", "old seventeen")}
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], [[k, *v] for k, v in held.items()])
    args = _range_args(db, tmp_path, "r")
    first = work.commit_range(0, committer=SpannerCommitter(db), **args)
    assert first.rows_written == 38 and len(first.rejects) == 2
    store = args["store"]
    parts = store.parts
    calls: list[str] = []

    def missed_at_start(run: str, table: str, prefix: str) -> dict[str, Any]:
        calls.append(prefix)
        return {} if len(calls) == 1 else parts(run, table, prefix)

    monkeypatch.setattr(store, "parts", missed_at_start)
    race = work.commit_range(0, committer=SpannerCommitter(db), **args)
    assert (race.rows_written, race.rows_skipped) == (0, 38)
    assert sorted(r.text for r in race.rejects) == ["key (17,)", "key (5,)"]
    assert _rows(db) == {**expected, **held}


class _Gated:
    """A committer that calls ``hook`` with each commit's number before sending it."""

    def __init__(self, inner: Any, hook: Callable[[int], None]) -> None:
        self.inner, self.hook, self.n = inner, hook, 0

    def commit(self, mutations: Any) -> None:
        self.n += 1
        self.hook(self.n)
        self.inner.commit(mutations)

    def existing_keys(self, table: str, keys: Any) -> Any:
        return self.inner.existing_keys(table, keys)


@pytest.mark.parametrize("mode", ["insert", "update"])
@pytest.mark.parametrize("start", ["missed", "sees"])
@pytest.mark.parametrize("a_stops, b_waits", [(2, 2), (3, 7), (4, 3), (6, 2), (9, 4), (12, 3)])
def test_two_attempts_interleaved_commit_each_row_once(
    tmp_path: Path,
    make_database: Callable[..., Any],
    mode: str,
    start: str,
    a_stops: int,
    b_waits: int,
) -> None:
    """Attempt A (a worker thought lost) stops before its ``a_stops``-th commit; replay B,
    which missed A's markers at its start or saw those landed by then (so it cuts the batch
    from another start), lets A finish just before its own ``b_waits``-th. Row 5's key is
    there (insert) or missing (update) and row 30 clashes on a unique index, so each attempt
    reads, then bisects a piece. B must reject 5 and 30 only and account for every row once,
    and so must a third attempt after both (reviews' sweeps: pieces cut by runs between
    refused rows differed between the attempts, and B rejected A's rows; so did pieces cut
    from different starts, where a piece refused by the unique index was bisected without a
    look at the markers)."""
    import threading

    db = make_database([DDL, "CREATE UNIQUE INDEX NotesByBody ON Notes (Body)"])
    expected = _write_files(tmp_path, n_files=1, rows=40)
    held = [[1000, "x", expected[30][1]]]
    if mode == "insert":
        held.append([5, "old", "old five"])
    else:
        held += [[i, "pre", f"pre {i}"] for i in range(40) if i != 5]
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], held)
    a_args = _range_args(db, tmp_path, "r", mode=mode)
    b_args = _range_args(db, tmp_path, "r", mode=mode)
    go_on, a_stopped = threading.Event(), threading.Event()
    a_out: list[Any] = []

    def a_hook(n: int) -> None:
        if n == a_stops:
            a_stopped.set()
            assert go_on.wait(60)

    def run_a() -> None:
        try:
            a_out.append(
                work.commit_range(0, committer=_Gated(SpannerCommitter(db), a_hook), **a_args)
            )
        finally:
            a_stopped.set()

    a = threading.Thread(target=run_a)
    a.start()
    assert a_stopped.wait(60)
    store = b_args["store"]
    parts, calls = store.parts, []

    def missed_at_start(run: str, table: str, prefix: str) -> dict[str, Any]:
        calls.append(prefix)
        return {} if len(calls) == 1 else parts(run, table, prefix)

    if start == "missed":
        store.parts = missed_at_start

    def b_hook(n: int) -> None:
        if n == b_waits:
            go_on.set()
            a.join(60)

    try:
        race = work.commit_range(0, committer=_Gated(SpannerCommitter(db), b_hook), **b_args)
    finally:
        go_on.set()
        a.join(60)
    assert a_out and sorted(r.text for r in a_out[0].rejects) == ["key (30,)", "key (5,)"]
    assert sorted(r.text for r in race.rejects) == ["key (30,)", "key (5,)"]
    assert race.rows_written + race.rows_skipped == 38
    third = work.commit_range(
        0, committer=SpannerCommitter(db), **_range_args(db, tmp_path, "r", mode=mode)
    )
    assert third.rows_written + third.rows_skipped + len(third.rejects) == 40
    rows = _rows(db)
    assert {k: rows[k] for k in expected if k not in (5, 30)} == {
        k: v for k, v in expected.items() if k not in (5, 30)
    }


def test_a_lost_reply_over_keys_already_there_is_settled_by_the_marker(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """A batch's first commit fails with DEADLINE_EXCEEDED, unsent (its outcome unknown), and
    every key of the batch was there before the load: the retry's ALREADY_EXISTS was settled
    by the keys, all there, so the batch counted as written (a review). Its marker is not
    there: the rows are rejects."""
    from google.api_core import exceptions as gexc

    db = make_database([DDL])
    _write_files(tmp_path, n_files=1, rows=40)
    first = work.commit_range(0, committer=SpannerCommitter(db), **_range_args(db, tmp_path, "a"))
    assert first.rows_written == 40
    inner, lost = SpannerCommitter(db), []

    class LostOnce:
        def commit(self, mutations: Any) -> None:
            if not lost:
                lost.append(1)
                raise gexc.DeadlineExceeded("lost")
            inner.commit(mutations)

        def existing_keys(self, table: str, keys: Any) -> Any:
            return inner.existing_keys(table, keys)

    again = work.commit_range(0, committer=LostOnce(), **_range_args(db, tmp_path, "b"))
    assert lost and again.rows_written == 0
    assert len(again.rejects) == 40


def test_a_transient_failure_reading_the_markers_is_retried(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """With ``skip_existing`` the bundle failed ("could not read back the keys") when the
    markers' read after the keys' met one UNAVAILABLE (a review)."""
    from google.api_core import exceptions as gexc

    db = make_database([DDL])
    _write_files(tmp_path, n_files=1, rows=40)
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], [[5, "old", "old five"]])
    args = _range_args(db, tmp_path, "r", skip_existing=True)
    store = args["store"]
    parts, calls = store.parts, []

    def flaky(run: str, table: str, prefix: str) -> dict[str, Any]:
        calls.append(prefix)
        if len(calls) == 2:  # the markers' read of the refused batch
            raise gexc.ServiceUnavailable("blip")
        return parts(run, table, prefix)

    store.parts = flaky
    res = work.commit_range(0, committer=SpannerCommitter(db), **args)
    assert (res.rows_written, res.key_skipped, res.rejects) == (39, 1, [])
    assert len(calls) > 2


# -- the pipeline on the DirectRunner ---------------------------------------------------------


@needs_beam
def test_direct_runner_loads_multi_file_input_exactly(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    expected = _write_files(tmp_path)
    bad = tmp_path / "notes-bad.csv"
    bad.write_text('Id,Tag,Body\n900,x,"ok"\nnot-a-number,x,y\n', newline="")
    expected[900] = ("x", "ok")
    seen: list[work.RangeResult] = []
    real = work.commit_range

    def spy(*a: Any, **k: Any) -> work.RangeResult:
        res = real(*a, **k)
        seen.append(res)
        return res

    monkeypatch.setattr(work, "commit_range", spy)  # the DirectRunner runs in this process
    config = small_load_config(
        db,
        "Notes",
        sorted(tmp_path.glob("*.csv")),
        runner="DirectRunner",
        range_size=300,
        key_ranges=4,
        max_mutations=60,
        max_bad_rows=5,
        rejects=tmp_path / "rejects.jsonl",
    )
    report = load(config)
    assert _rows(db) == expected
    t = report.tables[0]
    assert (t.rows_written, t.rows_rejected) == (181, 1)
    assert len(seen) == 4
    assert all(m <= 60 for r in seen for m in r.mutations)  # markers counted
    assert sorted(t.mutations) == sorted(m for r in seen for m in r.mutations)
    rejects = (tmp_path / "rejects.jsonl").read_text()
    assert "notes-bad.csv" in rejects and '"line": 3' in rejects


@needs_beam
def test_direct_runner_fault_after_commit_then_resume(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_database([DDL])
    expected = _write_files(tmp_path, seed=2)
    config = small_load_config(
        db,
        "Notes",
        sorted(tmp_path.glob("*.csv")),
        runner="DirectRunner",
        mode="insert",
        range_size=300,
        key_ranges=3,
    )
    fault = tmp_path / "fault"
    monkeypatch.setenv("SPANNER_LOADER_BEAM_FAULT", str(fault))
    with pytest.raises(Exception, match="injected fault") as e:
        load(config)
    first = e.value.report.load_id  # type: ignore[attr-defined]
    assert fault.exists()
    assert 0 < len(_rows(db)) <= 180  # at least the failed bundle's range landed
    report = load(config)  # the fault file exists now: no more faults
    assert _rows(db) == expected
    t = report.tables[0]
    assert t.rows_skipped > 0 and t.rows_written + t.rows_skipped == 180 and t.rows_rejected == 0
    # the run it resumes is named, as a single-process resume names it (a Beam tryout: [])
    assert t.earlier_load_ids == [first]
    assert any(
        f"resuming run {report.run_ids['Notes']} (load_id {first} before)" in n
        for n in report.notes
    ), report.notes
    again = load(config)
    assert again.tables[0].earlier_load_ids == [first, report.load_id]


def test_runner_without_beam_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from loader.beam import _import_pipeline
    from loader.errors import ConfigError

    monkeypatch.setitem(sys.modules, "apache_beam", None)  # import fails as if absent
    monkeypatch.delitem(sys.modules, "loader.beam.pipeline", raising=False)
    import loader.beam

    monkeypatch.delattr(loader.beam, "pipeline", raising=False)
    with pytest.raises(ConfigError, match="needs Apache Beam") as e:
        _import_pipeline()
    assert "pip install 'spanner-loader[beam]'" in (e.value.hint or "")


def test_the_base_install_does_not_import_beam() -> None:
    import subprocess
    import sys

    code = "import loader, loader.cli, loader.beam, loader.plan, sys; print('apache_beam' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(HAVE_BEAM, reason="checks the message shown when apache-beam is absent")
def test_cli_runner_without_beam(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = tmp_path / "n.csv"
    src.write_text("Id,Tag,Body\n1,a,b\n")
    args = ["load", str(src), "--table", "Notes", "--emulator", "--database", "nob"]
    p = subprocess.run(
        [sys.executable, "-m", "loader", *args, "--runner", "DirectRunner"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert p.stderr.splitlines()[0] == "error: --runner needs Apache Beam, which is not installed"
    assert "pip install 'spanner-loader[beam]'" in p.stderr and "Traceback" not in p.stderr


@needs_beam
def test_cli_direct_runner(tmp_path: Path, make_database: Callable[..., Any]) -> None:
    import json
    import subprocess
    import sys

    db = make_database([DDL])
    expected = _write_files(tmp_path, n_files=2, rows=30)
    args = ["load", *sorted(str(p) for p in tmp_path.glob("*.csv")), "--table", "Notes"]
    args += ["--emulator", "--database", db.database_id, "--json", "--max-mutations", "50"]
    args += ["--runner", "DirectRunner", "--beam-option", "direct_num_workers=1"]
    p = subprocess.run([sys.executable, "-m", "loader", *args], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["tables"][0]["rows_written"] == 60
    assert _rows(db) == expected


@needs_beam
def test_shop_manifest_on_the_direct_runner_verifies(make_database: Callable[..., Any]) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    db = make_database()  # schemas/shop.sql
    common = ["--manifest", str(root / "examples/shop/manifest.json"), "--emulator"]
    common += ["--database", db.database_id]
    p = subprocess.run(
        [sys.executable, "-m", "loader", "load", *common, "--runner", "DirectRunner"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert p.returncode == 0, p.stderr
    v = subprocess.run(
        [sys.executable, "-m", "loader", "verify", *common],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert v.returncode == 0, v.stdout + v.stderr
    assert v.stdout.count(": ok:") == 4


# -- key-range boundaries in the job's state ----------------------------------------------------


def test_boundaries_round_trip_through_the_state_value() -> None:
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    bounds = pa.table(
        {
            "I": pa.array([-(2**63), 7], pa.int64()),
            "S": pa.array(["", 'é\n"x'], pa.string()),
            "B": pa.array([b"\x00\xff", b""], pa.binary()),
            "T": pa.array(
                [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)],
                pa.timestamp("us", tz="UTC"),
            ),
            "N": pa.array([Decimal("-1.000000001"), None], pa.decimal128(38, 9)),
            "D": pa.array([dt.date(2020, 2, 29), dt.date(1, 1, 1)], pa.date32()),
        }
    )
    value = work.bounds_to_state(bounds, 3)
    assert value["key_ranges"] == 3 and value["boundaries"] == 2
    assert work.bounds_from_state(value).equals(bounds)
    assert work.bounds_from_state(work.bounds_to_state(None, 1)) is None


def test_the_first_boundaries_stored_are_kept(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    _write_files(tmp_path)
    config = small_load_config(db, "Notes", sorted(tmp_path.glob("*.csv")), range_size=500)
    schema = read_schemas(db, ["Notes"])["Notes"]
    blocks = _blocks(config, schema)
    samples = [work.sample_keys(b, schema, 3) for b in blocks]
    first = work.boundaries(samples, schema, 4)
    other = work.boundaries(samples, schema, 6)
    store = SpannerStateStore(db)
    store.ensure()
    assert work.keep_bounds(store, "run", "Notes", first, 4) is first
    # a later run (or a re-run step) computing other boundaries gets the first ones back
    kept = work.keep_bounds(store, "run", "Notes", other, 6)
    assert kept is not None and first is not None and kept.equals(first)
    stored = store.get("run", "Notes", work.BOUNDS_PART)
    assert stored is not None and stored["key_ranges"] == 4


@needs_beam
def test_direct_runner_resume_reuses_the_stored_boundaries(
    tmp_path: Path, make_database: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after some key ranges committed, then run again with another --key-ranges: the
    first run's boundaries (and count) are reused, so every batch keeps its name and insert
    mode writes nothing twice."""
    from loader.pipeline import job_id

    db = make_database([DDL])
    expected = _write_files(tmp_path, seed=3)
    files = sorted(tmp_path.glob("*.csv"))
    common: dict[str, Any] = dict(runner="DirectRunner", mode="insert", range_size=300)
    config = small_load_config(db, "Notes", files, key_ranges=3, **common)
    fault = tmp_path / "fault"
    monkeypatch.setenv("SPANNER_LOADER_BEAM_FAULT", str(fault))
    with pytest.raises(Exception, match="injected fault"):
        load(config)
    store = SpannerStateStore(db)
    run_id = job_id(config, config.jobs[0], "Notes")
    stored = store.get(run_id, "Notes", work.BOUNDS_PART)
    assert stored is not None and (stored["key_ranges"], stored["boundaries"]) == (3, 2)

    seen: list[int] = []
    real = work.commit_range

    def spy(range_id: int, *a: Any, **k: Any) -> work.RangeResult:
        seen.append(range_id)
        return real(range_id, *a, **k)

    monkeypatch.setattr(work, "commit_range", spy)
    again = small_load_config(db, "Notes", files, key_ranges=7, **common)
    report = load(again)
    assert _rows(db) == expected
    t = report.tables[0]
    assert t.rows_rejected == 0 and t.rows_written + t.rows_skipped == 180 and t.rows_skipped > 0
    assert sorted(seen) == [0, 1, 2]  # the stored three key ranges, not seven
    assert any("stored by the job's first run" in n for n in report.notes)
    assert store.get(run_id, "Notes", work.BOUNDS_PART) == stored


@needs_beam
def test_direct_runner_counts_rows_left_out_by_skip_existing(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    """A Beam load in insert mode with ``skip_existing`` over rows partly there: the report
    counts them as existing (a worker metric), not as rejects; the rows there keep their
    values; exit code OK."""
    db = make_database([DDL])
    expected = _write_files(tmp_path, n_files=2, rows=30, seed=5)
    held = {k: ("old", f"old {k}") for k in range(0, 60, 3)}
    with db.batch() as b:
        b.insert("Notes", ["Id", "Tag", "Body"], [[k, *v] for k, v in held.items()])
    files = sorted(tmp_path.glob("*.csv"))
    config = small_load_config(
        db, "Notes", files, runner="DirectRunner", mode="insert", skip_existing=True, key_ranges=2
    )
    report = load(config)
    t = report.tables[0]
    assert (t.rows_written, t.rows_existing, t.rows_rejected) == (40, 20, 0)
    assert report.exit_code == 0 and report.to_dict()["rows_existing"] == 20
    assert _rows(db) == {**expected, **held}


@needs_beam
def test_direct_runner_restart_starts_over(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    from loader.pipeline import job_id

    db = make_database([DDL])
    expected = _write_files(tmp_path, n_files=2, rows=30, seed=4)
    files = sorted(tmp_path.glob("*.csv"))
    config = small_load_config(db, "Notes", files, runner="DirectRunner", key_ranges=2)
    assert load(config).tables[0].rows_written == 60
    again = load(config)  # the same job, finished: nothing to do
    assert (again.tables[0].rows_written, again.tables[0].rows_skipped) == (0, 0)
    assert any("Notes: already loaded by an earlier run" in n for n in again.notes)
    fresh = small_load_config(db, "Notes", files, runner="DirectRunner", key_ranges=3, restart=True)
    t = load(fresh).tables[0]
    assert (t.rows_written, t.rows_skipped) == (60, 0)
    assert _rows(db) == expected
    stored = SpannerStateStore(db).get(
        job_id(fresh, fresh.jobs[0], "Notes"), "Notes", work.BOUNDS_PART
    )
    assert stored is not None and stored["key_ranges"] == 3  # sampled again, stored anew
