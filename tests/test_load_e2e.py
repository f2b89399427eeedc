"""End-to-end loads against the emulator, compared exactly with the CSV source.

The comparison reads the CSV with pyarrow as plain strings (an empty unquoted field is NULL,
``""`` is an empty string) and checks each value against what Spanner returns with Python's
own parsers: it shares no code with the loader's converter.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import random
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from conftest import EXAMPLES, read_table
from google.api_core import exceptions as gexc

from loader import LoadConfig, TableJob, Target, load
from loader.commit import SpannerCommitter
from loader.convert import ConvertOptions
from loader.errors import ExitCode, TooManyBadRows
from loader.parse import Dialect
from loader.schema import read_schema

TABLES = ["Customers", "Orders", "OrderItems", "Products"]


def csv_strings(path: Path) -> pa.Table:
    with open(path, encoding="utf-8") as f:
        names = f.readline().rstrip("\r\n").split(",")
    return pacsv.read_csv(
        path,
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def _parse_ts(s: str) -> tuple[dt.datetime, int]:
    head, _, frac = s.rstrip("Z").partition(".")
    base = dt.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    return base, int((frac or "0").ljust(9, "0"))


def same(text: str | None, value: Any, spanner_type: str) -> bool:
    """Does the CSV text mean the value Spanner returned?"""
    if text is None:
        return value is None
    t = spanner_type
    if t == "INT64":
        return int(text) == value
    if t == "FLOAT64":
        return float(text) == value
    if t == "NUMERIC":
        return decimal.Decimal(text) == value
    if t == "BOOL":
        return {"true": True, "false": False}[text] == value
    if t.startswith("STRING"):
        return text == value
    if t.startswith("BYTES"):
        return base64.b64decode(text) == base64.b64decode(value)
    if t == "DATE":
        return dt.date.fromisoformat(text) == value
    if t == "TIMESTAMP":
        base, nanos = _parse_ts(text)
        got_nanos = getattr(value, "nanosecond", value.microsecond * 1000)
        return base == value.replace(microsecond=0) and nanos == got_nanos
    if t == "JSON":
        return json.loads(text) == json.loads(json.dumps(value))
    if t.startswith("ARRAY"):
        return json.loads(text) == list(value)
    raise AssertionError(f"no comparison for {t}")


def assert_table_equals_csv(database: Any, table: str, path: Path) -> None:
    schema = read_schema(database, table)
    src = csv_strings(path)
    columns = src.column_names
    types = {c.name: str(c.type) for c in schema.columns}
    rows = read_table(database, table, columns)
    key_pos = [columns.index(k) for k in schema.key_names]
    by_key = {tuple(r[i] for i in key_pos): r for r in rows}
    source = list(zip(*(src.column(c).to_pylist() for c in columns)))
    assert len(rows) == len(source), f"{table}: {len(rows)} rows in Spanner, {len(source)} in CSV"
    for srow in source:
        key = tuple(int(srow[i]) if types[columns[i]] == "INT64" else srow[i] for i in key_pos)
        assert key in by_key, f"{table}: key {key} missing"
        got = by_key[key]
        for c, text, value in zip(columns, srow, got):
            assert same(text, value, types[c]), f"{table}{key}.{c}: CSV {text!r} != {value!r}"


def shop_config(database: Any, **kw: Any) -> LoadConfig:
    jobs = tuple(TableJob(t, (str(EXAMPLES / f"{t}.csv"),)) for t in TABLES)
    defaults: dict[str, Any] = dict(
        target=Target("test-project", "test-instance", database.database_id, emulator=True),
        jobs=jobs,
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        rejects=None,
    )
    defaults.update(kw)
    return LoadConfig(**defaults)


class RecordingCommitter:
    """Wraps the real committer; records every mutation it sends (for budget checks) and can
    inject faults, including 'applied, but the reply was lost'."""

    def __init__(self, inner: SpannerCommitter, fault_rate: float = 0.0, seed: int = 7) -> None:
        self.inner = inner
        self.sent: list[Any] = []
        self.fault_rate = fault_rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.faults = 0

    def commit(self, mutations: Any) -> None:
        with self.lock:
            roll = self.rng.random()
            kind = self.rng.choice(["aborted", "unavailable", "deadline_after", "internal_after"])
        if roll < self.fault_rate:
            with self.lock:
                self.faults += 1
            if kind == "aborted":
                raise gexc.Aborted("injected abort")
            if kind == "unavailable":
                raise gexc.ServiceUnavailable("injected unavailable")
            self.inner.commit(mutations)  # applied ...
            with self.lock:
                self.sent.append(mutations)
            if kind == "deadline_after":  # ... but the reply was lost
                raise gexc.DeadlineExceeded("injected: applied, reply lost")
            raise gexc.InternalServerError("injected RST_STREAM after apply")
        self.inner.commit(mutations)
        with self.lock:
            self.sent.append(mutations)

    def existing_keys(self, table: str, keys: Any) -> Any:
        return self.inner.existing_keys(table, keys)


def test_shop_loads_exactly(make_database: Any) -> None:
    db = make_database()
    report = load(shop_config(db), database=db)
    assert report.exit_code == ExitCode.OK
    order = [t.table for t in report.tables]
    assert order.index("Customers") < order.index("Orders") < order.index("OrderItems")
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")
    assert report.rows_written == report.rows_read == 2435


def test_budgets_contiguous_ranges_and_concurrency_16(make_database: Any) -> None:
    """Small budgets force many commits; at concurrency 16 the emulator aborts concurrent
    commits, and every row still lands exactly once, each commit within both budgets and
    covering one contiguous key range."""
    from google.cloud.spanner_v1 import Mutation

    from loader.batch import mutation_cost_per_row

    db = make_database()
    rec = RecordingCommitter(SpannerCommitter(db))
    cfg = shop_config(db, concurrency=16, max_mutations=600, max_batch_bytes=8 << 10)
    report = load(cfg, database=db, committer=rec)
    assert report.exit_code == ExitCode.OK
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")
    assert len(rec.sent) > 30
    schemas = {t: read_schema(db, t) for t in TABLES}
    # position of every key in Spanner's own order (a read returns rows in key order)
    position = {
        t: {tuple(r): i for i, r in enumerate(read_table(db, t, schemas[t].key_names))}
        for t in TABLES
    }
    covered: dict[str, list[int]] = {t: [] for t in TABLES}
    for sent in rec.sent:
        parse = Mutation.pb().FromString  # the committer sends wire bytes
        write = parse(sent[0]).insert_or_update
        schema = schemas[write.table]
        cost = mutation_cost_per_row(schema, list(write.columns))
        # the checkpoint marker row rides in the same commit and counts against the budgets
        marker = [parse(m).insert_or_update for m in sent[1:]]
        assert len(write.values) * cost + sum(len(w.columns) for w in marker) <= 600
        assert sum(len(m) for m in sent) <= 8 << 10
        cols = list(write.columns)
        key_idx = [cols.index(k) for k in schema.key_names]
        types = [str(schema.column(k).type) for k in schema.key_names]
        pos = []
        for row in write.values:
            key = tuple(
                int(row.values[i].string_value) if ty == "INT64" else row.values[i].string_value
                for i, ty in zip(key_idx, types)
            )
            pos.append(position[write.table][key])
        assert pos == list(range(pos[0], pos[0] + len(pos))), "not one contiguous key range"
        covered[write.table] += pos
    for t in TABLES:  # every row exactly once across the commits
        assert sorted(covered[t]) == list(range(len(position[t])))


def test_transient_faults_and_lost_replies_still_exact(make_database: Any) -> None:
    db = make_database()
    rec = RecordingCommitter(SpannerCommitter(db), fault_rate=0.10, seed=3)
    cfg = shop_config(db, max_mutations=800)
    report = load(cfg, database=db, committer=rec, sleep=lambda s: None)
    assert rec.faults > 0
    assert report.exit_code == ExitCode.OK
    assert sum(t.retries for t in report.tables) >= rec.faults
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")


def test_insert_mode_lost_reply_is_resolved_not_doubled(make_database: Any) -> None:
    db = make_database()
    rec = RecordingCommitter(SpannerCommitter(db), fault_rate=0.25, seed=11)
    cfg = shop_config(db, mode="insert", max_mutations=800)
    report = load(cfg, database=db, committer=rec, sleep=lambda s: None)
    assert report.exit_code == ExitCode.OK, report.render()
    assert report.rows_rejected == 0
    for t in TABLES:
        assert_table_equals_csv(db, t, EXAMPLES / f"{t}.csv")


CHILD_DDL = """
CREATE TABLE P (Id INT64 NOT NULL, Name STRING(20)) PRIMARY KEY (Id);
CREATE TABLE C (Id INT64 NOT NULL, N INT64 NOT NULL, V STRING(20)) PRIMARY KEY (Id, N),
  INTERLEAVE IN PARENT P ON DELETE CASCADE;
"""


def test_rows_spanner_refuses_are_isolated_by_bisection(make_database: Any, tmp_path: Path) -> None:
    db = make_database([CHILD_DDL])
    with db.batch() as b:
        b.insert("P", ["Id", "Name"], [[i, f"p{i}"] for i in range(0, 100, 2)])  # even parents
    src = tmp_path / "c.csv"
    src.write_text("Id,N,V\n" + "".join(f"{i},1,v{i}\n" for i in range(100)))
    rejects = tmp_path / "rejects.jsonl"
    cfg = LoadConfig(
        target=Target("test-project", "test-instance", db.database_id, emulator=True),
        jobs=(TableJob("C", (str(src),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        max_bad_rows=100,
        rejects=rejects,
    )
    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.REJECTED_ROWS
    assert report.rows_written == 50 and report.rows_rejected == 50
    rows = read_table(db, "C", ["Id"])
    assert sorted(r[0] for r in rows) == list(range(0, 100, 2))
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert sorted(r["record"] for r in lines) == [i + 1 for i in range(1, 100, 2)]
    first = lines[0]
    assert first["source"] == str(src) and first["line"] == first["record"] + 1
    assert first["reason"].startswith("Spanner refused the row: NOT_FOUND")

    # and with the default --max-bad-rows 0 the load stops at the first one
    db2 = make_database([CHILD_DDL])
    with pytest.raises(TooManyBadRows) as err:
        load(LoadConfig(**{**cfg.__dict__, "max_bad_rows": 0, "rejects": None}), database=db2)
    assert "more than 0 bad rows" in str(err.value)


DUP_DDL = "CREATE TABLE D (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"


def _d_config(db: Any, src: Path, rejects: Path, **kw: Any) -> LoadConfig:
    """Table D from ``src`` into the emulator, one commit at a time, rejects to a file."""
    return LoadConfig(
        target=Target("test-project", "test-instance", db.database_id, emulator=True),
        jobs=(TableJob("D", (str(src),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        rejects=rejects,
        **{"max_bad_rows": 10, **kw},
    )


def test_a_load_stopped_at_max_bad_rows_reports_the_rows_it_read(
    make_database: Any, tmp_path: Path
) -> None:
    """The partial report of a load stopped by one bad row too many counts the rows read up
    to it (it said "0 rows read, 0 written, 1 rejected")."""
    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{i},v\n" for i in range(100)) + "x,bad\n")
    with pytest.raises(TooManyBadRows) as err:
        load(_d_config(db, src, tmp_path / "r.jsonl", max_bad_rows=0), database=db)
    report = err.value.report
    assert report.rows_read == 101 and report.rows_rejected == 1
    assert "101 rows read" in report.render()


@pytest.mark.parametrize("mode", ["upsert", "insert"])
def test_repeated_keys_in_one_flush(make_database: Any, tmp_path: Path, mode: str) -> None:
    """A key repeated in the source: upsert keeps the last row, insert the first and rejects
    the later ones with their own line numbers."""
    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    ids = [5, 3, 5, 9, 3, 5, 1]
    src.write_text("Id,V\n" + "".join(f"{k},row{n}\n" for n, k in enumerate(ids, 1)))
    rejects = tmp_path / "rejects.jsonl"
    report = load(_d_config(db, src, rejects, mode=mode), database=db)
    got = dict(read_table(db, "D", ["Id", "V"]))
    if mode == "upsert":
        assert got == {1: "row7", 3: "row5", 5: "row6", 9: "row4"}
        assert report.rows_rejected == 0
    else:
        assert got == {1: "row7", 3: "row2", 5: "row1", 9: "row4"}
        lines = [json.loads(x) for x in rejects.read_text().splitlines()]
        assert sorted((r["record"], r["line"]) for r in lines) == [(3, 4), (5, 6), (6, 7)]
        assert all(r["reason"].startswith("duplicate primary key") for r in lines)
        by_line = {r["line"]: r["reason"] for r in lines}
        assert by_line[4].endswith(f"(Id=5; first read at {src}:2)")
        assert by_line[6].endswith(f"(Id=3; first read at {src}:3)")
        assert by_line[7].endswith(f"(Id=5; first read at {src}:2)")


@pytest.mark.parametrize("mode", ["upsert", "insert"])
def test_a_unique_index_violation_names_the_index_not_the_mode(
    make_database: Any, tmp_path: Path, mode: str
) -> None:
    """Two rows with one value under a UNIQUE index: the hint named `mode='upsert'` (already the
    mode) as if the keys were in the table; it names the index and what counts as equal."""
    db = make_database([DUP_DDL, "CREATE UNIQUE INDEX DByV ON D (V)"])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n1,same\n2,same\n")
    with pytest.raises(TooManyBadRows) as e:
        load(_d_config(db, src, tmp_path / "r.jsonl", max_bad_rows=0, mode=mode), database=db)
    hint = e.value.hint or ""
    assert "two rows have the same value in the unique index DByV" in hint, hint
    assert "NULL_FILTERED" in hint and "mode='upsert'" not in hint


def test_valid_row_over_the_byte_budget_is_committed_alone(
    make_database: Any, tmp_path: Path
) -> None:
    """#16 defect 10: --max-batch-bytes is a batching target, not a row limit. A 5 MiB row
    (two 2.6M-character strings, which Spanner accepts) under the default 4 MiB budget loads
    in a commit of its own; its neighbour loads too, and nothing is rejected."""
    db = make_database(
        ["CREATE TABLE W (Id INT64 NOT NULL, A STRING(MAX), B STRING(MAX)) PRIMARY KEY (Id)"]
    )
    src = tmp_path / "big.csv"
    a, b = "x" * 2_600_000, "y" * 2_600_000
    src.write_text(f"Id,A,B\n1,{a},{b}\n2,b,c\n0,s,t\n")
    rejects = tmp_path / "rejects.jsonl"
    cfg = dataclasses.replace(
        _d_config(db, src, rejects), jobs=(TableJob("W", (str(src),)),), max_bad_rows=0
    )
    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.OK and report.rows_rejected == 0
    assert not rejects.exists()
    got = {k: (x, y) for k, x, y in read_table(db, "W", ["Id", "A", "B"])}
    assert got == {0: ("s", "t"), 1: (a, b), 2: ("b", "c")}
    t = report.tables[0]
    assert t.rows_written == 3 and t.commits == 3  # [0], [1] alone, [2]: key order kept


def test_row_over_the_commit_ceiling_is_rejected_and_the_rest_land(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a row over the hard per-commit ceiling (99 MiB: Spanner's 100 MiB less headroom,
    lowered here so the test stays small) is rejected, with a reason naming that limit; rows
    over --max-batch-bytes but under it land, as do the rows on either side."""
    monkeypatch.setattr(
        "loader.buffer.COMMIT_CEILING_BYTES", 8 << 10
    )  # where a flush plans its commits
    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    values = {1: "a", 2: "b" * 3000, 3: "c", 4: "d" * 10, 5: "e" * 9000}
    src.write_text("Id,V\n" + "".join(f"{k},{v}\n" for k, v in values.items()))
    rejects = tmp_path / "rejects.jsonl"
    report = load(_d_config(db, src, rejects, max_batch_bytes=2048), database=db)
    assert dict(read_table(db, "D", ["Id", "V"])) == {k: v for k, v in values.items() if k != 5}
    assert report.rows_rejected == 1
    (r,) = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert (r["record"], r["line"]) == (5, 6)
    assert r["reason"].startswith("row is 8.8 KiB encoded plus ")
    assert r["reason"].endswith(
        "over the 8 KiB one commit may carry (Spanner's limit is 100 MiB per commit)"
    )


def test_progress_follows_rows_written_and_reaches_100_only_at_the_end(
    make_database: Any, tmp_path: Path
) -> None:
    """#16 defect 11: the whole input fits in one buffer, so the reader is done long before
    the commits; the progress lines (as printed when stderr is not a terminal) still never
    go backwards in rows written, never say 100.0% before the last commit, and the table's
    final line says 100.0% with every row written."""
    import io
    import re

    from loader.progress import ProgressPrinter

    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},v{k}\n" for k in range(2_000)))
    out = io.StringIO()
    printer = ProgressPrinter(out, tty=False, interval=0)
    events: list[Any] = []

    def progress(p: Any) -> None:
        events.append(p)
        printer(p)

    report = load(
        _d_config(db, src, tmp_path / "r.jsonl", batch_rows=100), database=db, progress=progress
    )
    printer.close()
    assert report.tables[0].rows_written == 2_000 and report.tables[0].commits == 20
    lines = out.getvalue().splitlines()
    early = [x for x in lines if "100.0%" in x and "written 2,000 " not in x]
    assert not early, "100% before the last commit"
    parsed = [
        (float(m.group(1)), int(m.group(2).replace(",", "")))
        for m in (re.search(r"(\d+\.\d)% .*\(written ([\d,]+) ", x) for x in lines)
        if m
    ]
    assert len(parsed) == len(lines) > 20  # a line after every commit, at the least
    written = [w for _, w in parsed]
    assert written == sorted(written) and written[0] < 2_000 and written[-1] == 2_000
    percents = [pct for pct, _ in parsed]
    assert percents == sorted(percents)
    assert percents[-1] == 100.0
    assert all(pct < 100.0 for pct, w in parsed if w < 2_000), "100% before the last commit"
    assert any(e.reading_done and e.rows_written == 0 for e in events), (
        "the case of the defect: everything read, nothing written yet"
    )
    assert events[-1].final and sum(e.final for e in events) == 1


def test_a_load_given_up_at_once_reports_what_it_did_and_resumes_exactly(
    make_database: Any, tmp_path: Path
) -> None:
    """A second Ctrl-C raises KeyboardInterrupt out of the load: its report said nothing
    (no load id, no start time, no tables, every count 0), though rows had landed. The
    partial report now rides on the exception, and a re-run resumes to exactly the rows."""
    from loader.pipeline import ABORTED

    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},v{k}\n" for k in range(3_000)))
    main = threading.main_thread()

    def progress(p: Any) -> None:  # where the signal handler raises: the main thread
        if p.rows_written >= 500 and threading.current_thread() is main:
            raise KeyboardInterrupt

    config = _d_config(db, src, tmp_path / "r.jsonl", batch_rows=100)
    with pytest.raises(KeyboardInterrupt) as err:
        load(config, database=db, progress=progress)
    report = err.value.report  # type: ignore[attr-defined]
    assert report.exit_code == ExitCode.INTERRUPTED and report.error == ABORTED
    assert report.load_id and report.started_at and report.status == "interrupted"
    (table,) = report.tables
    assert table.table == "D" and 500 <= table.rows_written < 3_000
    assert table.rows_written == table.commits * 100
    again = load(config, database=db)
    assert again.exit_code == ExitCode.OK
    assert read_table(db, "D", ["Id", "V"]) == [(k, f"v{k}") for k in range(3_000)]


def test_a_second_signal_during_the_wait_for_commits_in_flight_still_reports_them(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Ctrl-C waits for the commits in flight; a second one during that wait cut
    short the copy of the table's counts into the report: 0 written, 0 commits, though
    100k rows had landed (a tryout, 3 times in 7)."""
    from loader.commit import CommitPool

    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},v{k}\n" for k in range(2_000)))
    real_close = CommitPool.close

    def second_signal(self: Any, wait: bool = True) -> None:
        real_close(self, wait=wait)
        raise KeyboardInterrupt  # as the handler raises it, here at the end of the wait

    monkeypatch.setattr(CommitPool, "close", second_signal)
    import loader.pipeline

    synced: list[Any] = []
    real_sync = loader.pipeline._sync_quietly
    monkeypatch.setattr(
        loader.pipeline, "_sync_quietly", lambda store: synced.append(store) or real_sync(store)
    )
    with pytest.raises(KeyboardInterrupt) as err:
        load(_d_config(db, src, tmp_path / "r.jsonl", batch_rows=100), database=db)
    (table,) = err.value.report.tables  # type: ignore[attr-defined]
    assert table.rows_written == 2_000 and table.commits == 20
    assert len(synced) == 1  # the markers a store holds back are written (a review)


@pytest.mark.parametrize("mode", ["insert", "update"])
def test_keys_the_table_holds_or_lacks_are_found_by_reading(
    make_database: Any, tmp_path: Path, mode: str
) -> None:
    """Insert over keys already loaded (a block, scattered keys) and update of keys not there:
    the refused rows are found by reading the batch's keys, not by a commit per row; every
    other row lands, the loaded rows keep their values, each refused row is in the reject
    file with its line; in insert mode a unique index clash among the rest is still isolated
    (in update mode the clashing row is one the table lacks)."""
    db = make_database([DUP_DDL, "CREATE UNIQUE NULL_FILTERED INDEX DByV ON D (V)"])
    there = set(range(100, 400)) | set(range(0, 1000, 37)) | {999}
    with db.batch() as b:
        b.insert("D", ["Id", "V"], [[k, f"old{k}"] for k in sorted(there)])
    src = tmp_path / "d.csv"
    clash = 500 if 500 not in there else 501
    rows = [(k, "old100" if k == clash else f"new{k}") for k in range(1000)]
    src.write_text("Id,V\n" + "".join(f"{k},{v}\n" for k, v in rows))
    rejects = tmp_path / "rejects.jsonl"
    report = load(
        _d_config(db, src, rejects, mode=mode, max_bad_rows=1000, max_mutations=300), database=db
    )
    got = dict(read_table(db, "D", ["Id", "V"]))
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    refused = {r["line"] - 2 for r in lines}
    if mode == "insert":
        want = {k: (f"old{k}" if k in there else f"new{k}") for k in range(1000) if k != clash}
        assert refused == there | {clash}
        assert {r["reason"] for r in lines if r["line"] - 2 != clash} == {
            "Spanner refused the row: ALREADY_EXISTS: a row with this key is already in table D"
        }
    else:
        want = {k: f"new{k}" for k in there}
        assert refused == set(range(1000)) - there
        assert {r["reason"] for r in lines} == {
            "Spanner refused the row: NOT_FOUND: table D has no row with this key to update"
        }
    assert got == want
    written = len(want) - len(there) if mode == "insert" else len(there)
    assert report.rows_rejected == len(refused) and report.rows_written == written
    commits = report.tables[0].commits
    assert commits < 60, commits  # bisecting by commits took over 1,000


@pytest.mark.parametrize("mode", ["insert", "update"])
def test_skip_existing_and_skip_missing_leave_out_rows_refused_for_their_keys(
    make_database: Any, tmp_path: Path, mode: str
) -> None:
    """``skip_existing`` (insert) and ``skip_missing`` (update): the rows the table refuses for
    their keys are left out and counted, not rejected; the rows already there keep their
    values; a unique index clash among the rest is still a reject with its line; exit code 3
    for that reject alone. A re-run of the same command changes nothing and exits 0 with no
    reject (insert mode, re-runnable)."""
    db = make_database([DUP_DDL, "CREATE UNIQUE NULL_FILTERED INDEX DByV ON D (V)"])
    there = set(range(100, 400)) | set(range(0, 1000, 37)) | {999}
    with db.batch() as b:
        b.insert("D", ["Id", "V"], [[k, f"old{k}"] for k in sorted(there)])
    src = tmp_path / "d.csv"
    clash = 500 if 500 not in there else 501
    rows = [(k, "old100" if k == clash else f"new{k}") for k in range(1000)]
    src.write_text("Id,V\n" + "".join(f"{k},{v}\n" for k, v in rows))
    rejects = tmp_path / "rejects.jsonl"
    skip = {"skip_existing": True} if mode == "insert" else {"skip_missing": True}
    config = _d_config(db, src, rejects, mode=mode, max_bad_rows=10, max_mutations=300, **skip)
    report = load(config, database=db)
    text = rejects.read_text() if rejects.exists() else ""
    lines = [json.loads(x) for x in text.splitlines()]
    table = report.tables[0]
    if mode == "insert":
        want = {k: (f"old{k}" if k in there else f"new{k}") for k in range(1000) if k != clash}
        assert [r["line"] - 2 for r in lines] == [clash]
        assert "UNIQUE" in lines[0]["reason"] or "already exists" in lines[0]["reason"]
        assert (table.rows_existing, table.rows_missing) == (len(there), 0)
        assert report.exit_code == ExitCode.REJECTED_ROWS
        assert f"existing: {len(there):,} left out (--skip-existing), their keys" in (
            report.render()
        )
    else:
        want = {k: f"new{k}" for k in there}
        assert lines == []
        assert (table.rows_existing, table.rows_missing) == (0, 1000 - len(there))
        assert report.exit_code == ExitCode.OK
        assert report.to_dict()["rows_missing"] == 1000 - len(there)
    assert dict(read_table(db, "D", ["Id", "V"])) == want
    assert table.rows_written == (1000 - len(there) - 1 if mode == "insert" else len(there))
    assert table.commits < 60, table.commits
    if mode == "insert":  # the same command again: every row there, or the one reject
        src.write_text("Id,V\n" + "".join(f"{k},{v}\n" for k, v in rows if k != clash))
        again = load(dataclasses.replace(config, restart=True), database=db)
        assert again.exit_code == ExitCode.OK and again.rows_written == 0
        assert again.tables[0].rows_existing == 999
        assert dict(read_table(db, "D", ["Id", "V"])) == want


ALL_KEYS_DDL = """CREATE TABLE K (
  S STRING(MAX) NOT NULL, B BYTES(MAX) NOT NULL, T TIMESTAMP NOT NULL, N NUMERIC NOT NULL,
  D DATE NOT NULL, F FLOAT64 NOT NULL, G FLOAT32 NOT NULL, O BOOL NOT NULL, I INT64 NOT NULL,
  V STRING(MAX)
) PRIMARY KEY (S DESC, B, T DESC, N, D, F DESC, G, O, I)"""


def _keyed_load(db: Any, src: Path, table: str, mode: str, through: str) -> Any:
    """``src`` into ``table`` in ``mode``, through the client library's committer or the
    loader's own (it connects itself), rejects beside ``src``."""
    cfg = LoadConfig(
        target=Target("test-project", "test-instance", db.database_id, emulator=True),
        jobs=(TableJob(table, (str(src),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        mode=mode,
        max_bad_rows=1000,
        rejects=src.with_suffix(".rejects.jsonl"),
    )
    return load(cfg, database=db) if through == "client" else load(cfg)


def _reject_lines(src: Path) -> list[dict[str, Any]]:
    path = src.with_suffix(".rejects.jsonl")
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("through", ["client", "wire"])
@pytest.mark.parametrize("nanos", [False, True])
@pytest.mark.parametrize("mode", ["insert", "update"])
def test_refused_keys_of_every_type_are_matched_when_read_back(
    make_database: Any, tmp_path: Path, through: str, nanos: bool, mode: str
) -> None:
    """Insert over loaded keys, update of keys not there, a key of every type a key can have
    (DESC parts, non-ASCII, bytes, timestamps with an offset, NUMERIC written two ways, NaN,
    FLOAT32): the keys read back are matched to the batch's (TIMESTAMPs to the nanosecond),
    through the client library's committer and the loader's own."""
    db = make_database([ALL_KEYS_DDL])
    frac = ".123456789" if nanos else ".123456"

    def row(i: int, value: str) -> str:
        s = ["ä", 'b,"x"', "Ω", ""][i % 4]
        ts = f"2024-0{1 + i % 9}-1{i % 10}T1{i % 10}:00:00{frac}+05:30"
        num = ["1.5", "1.50", "-0.000000001", "99999999999999999999999999999.999999999"][i % 4]
        f = ["NaN", "-0.5", "1e300", "2.25"][i % 4]
        g = ["NaN", "-0.5", "3.4e38", "1.25"][i % 4]
        b = base64.b64encode(bytes([i % 7, 255])).decode()
        o = str(i % 3 == 0).lower()
        return f'"{s}",{b},{ts},{num},2020-02-{10 + i % 19},{f},{g},{o},{i},{value}{i}\n'

    header = "S,B,T,N,D,F,G,O,I,V\n"
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    there = list(range(0, 200, 3))
    first.write_text(header + "".join(row(i, "v") for i in there))
    second.write_text(header + "".join(row(i, "w") for i in range(200)))
    assert _keyed_load(db, first, "K", "insert", through).rows_written == len(there)
    report = _keyed_load(db, second, "K", mode, through)
    lines = _reject_lines(second)
    refused = there if mode == "insert" else sorted(set(range(200)) - set(there))
    assert sorted(r["line"] - 2 for r in lines) == refused
    assert report.rows_written == 200 - len(refused) and report.rows_rejected == len(refused)
    got = dict(read_table(db, "K", ["I", "V"]))
    if mode == "insert":
        assert got == {i: f"{'v' if i in there else 'w'}{i}" for i in range(200)}
    else:
        assert got == {i: f"w{i}" for i in there}
    assert {r["reason"].split(": ", 2)[2] for r in lines} == {
        "a row with this key is already in table K"
        if mode == "insert"
        else "table K has no row with this key to update"
    }


@pytest.mark.parametrize("through", ["client", "wire"])
@pytest.mark.parametrize("mode", ["insert", "update"])
def test_timestamp_keys_apart_by_nanoseconds_are_told_apart(
    make_database: Any, tmp_path: Path, through: str, mode: str
) -> None:
    """Keys that differ below the microsecond, one of them in the table: the loader's own
    reader cut the key read back to the microsecond, which then matched the other key, so
    insert rejected the new row and update rejected the one that was there (a review)."""
    db = make_database(["CREATE TABLE TK (T TIMESTAMP NOT NULL, V STRING(8)) PRIMARY KEY (T)"])
    a, b = "2024-01-01T00:00:00.123456789Z", "2024-01-01T00:00:00.123456Z"
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text(f"T,V\n{a},old\n")
    second.write_text(f"T,V\n{a},new\n{b},new\n")
    _keyed_load(db, first, "TK", "insert", through)
    report = _keyed_load(db, second, "TK", mode, through)
    lines = _reject_lines(second)
    assert report.rows_written == 1 and report.rows_rejected == 1
    if mode == "insert":  # a is there: refused; b is new: written
        assert [r["line"] for r in lines] == [2]
        assert sorted(v for (v,) in read_table(db, "TK", ["V"])) == ["new", "old"]
    else:  # a is there: updated; b is not: refused
        assert [r["line"] for r in lines] == [3]
        assert [v for (v,) in read_table(db, "TK", ["V"])] == ["new"]


def test_a_lost_reply_in_insert_mode_is_resolved_for_a_bytes_key(
    make_database: Any, tmp_path: Path
) -> None:
    """The read back of a commit whose reply was lost, for a table keyed by BYTES: the client
    library refused the raw key bytes ("not base64 encoded") and the load failed."""
    db = make_database(["CREATE TABLE BK (K BYTES(16) NOT NULL, V INT64) PRIMARY KEY (K)"])
    src = tmp_path / "bk.csv"
    src.write_text(
        "K,V\n" + "".join(f"{base64.b64encode(bytes([i, 0])).decode()},{i}\n" for i in range(50))
    )

    class LostFirstReply:
        def __init__(self) -> None:
            self.inner, self.lost = SpannerCommitter(db), False

        def commit(self, mutations: Any) -> None:
            self.inner.commit(mutations)
            if not self.lost:
                self.lost = True
                raise gexc.DeadlineExceeded("injected: applied, reply lost")

        def existing_keys(self, table: str, keys: Any) -> Any:
            return self.inner.existing_keys(table, keys)

    cfg = LoadConfig(
        target=Target("test-project", "test-instance", db.database_id, emulator=True),
        jobs=(TableJob("BK", (str(src),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        mode="insert",
        rejects=None,
        state=False,  # no checkpoint marker to read back: the keys are read
    )
    report = load(cfg, database=db, committer=LostFirstReply(), sleep=lambda s: None)
    assert report.exit_code == ExitCode.OK and report.rows_written == 50
    assert sorted(v for (v,) in read_table(db, "BK", ["V"])) == list(range(50))


@pytest.mark.parametrize("skip", [False, True])
def test_an_insert_re_run_whose_reply_was_lost_is_told_by_its_marker(
    make_database: Any, tmp_path: Path, skip: bool
) -> None:
    """An insert re-run over rows all loaded before, a commit's reply lost before it was
    applied: every key is there, so the batch was counted as written, its source rows neither
    written nor rejected. The batch's checkpoint marker, read back, says it did not land: the
    rows are rejected (or left out with skip_existing). And one whose commit did land (new
    keys) is counted as written once."""
    db = make_database([DUP_DDL])
    with db.batch() as b:
        b.insert("D", ["Id", "V"], [[k, f"old{k}"] for k in range(100)])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},new{k}\n" for k in range(150)))

    class LostReply:
        def __init__(self, apply_first: bool) -> None:
            self.inner, self.lost, self.apply_first = SpannerCommitter(db), False, apply_first

        def commit(self, mutations: Any) -> None:
            if not self.lost:
                self.lost = True
                if self.apply_first:
                    self.inner.commit(mutations)
                raise gexc.DeadlineExceeded("injected: reply lost")
            self.inner.commit(mutations)

        def existing_keys(self, table: str, keys: Any) -> Any:
            return self.inner.existing_keys(table, keys)

    skips = {"skip_existing": True} if skip else {}
    cfg = _d_config(db, src, tmp_path / "r.jsonl", mode="insert", batch_rows=50, max_bad_rows=100)
    report = load(
        dataclasses.replace(cfg, **skips),
        database=db,
        committer=LostReply(False),
        sleep=lambda s: None,
    )
    t = report.tables[0]
    assert t.rows_written == 50
    assert (t.rows_rejected, t.rows_existing) == ((0, 100) if skip else (100, 0))
    want = {k: f"old{k}" if k < 100 else f"new{k}" for k in range(150)}
    assert dict(read_table(db, "D", ["Id", "V"])) == want
    fresh = make_database([DUP_DDL])
    cfg = _d_config(fresh, src, tmp_path / "r2.jsonl", mode="insert", batch_rows=50)
    landed = LostReply(True)
    landed.inner = SpannerCommitter(fresh)
    report = load(dataclasses.replace(cfg, **skips), database=fresh, committer=landed)
    t = report.tables[0]
    assert (t.rows_written, t.rows_rejected, t.rows_existing) == (150, 0, 0)
    assert dict(read_table(fresh, "D", ["Id", "V"])) == {k: f"new{k}" for k in range(150)}


def test_an_insert_stopped_by_keys_already_there_points_at_skip_existing(
    make_database: Any, tmp_path: Path
) -> None:
    """Insert over rows already there stops at --max-bad-rows 0; the hint names
    --skip-existing, which keeps those rows and loads the others, and that run does so."""
    db = make_database([DUP_DDL])
    with db.batch() as b:
        b.insert("D", ["Id", "V"], [[k, f"old{k}"] for k in range(0, 100, 10)])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},new{k}\n" for k in range(100)))
    config = _d_config(db, src, tmp_path / "r.jsonl", mode="insert", max_bad_rows=0)
    with pytest.raises(TooManyBadRows) as err:
        load(config, database=db)
    assert "re-run with `skip_existing=True` to keep those rows" in (err.value.hint or "")
    report = load(dataclasses.replace(config, skip_existing=True), database=db)
    assert report.exit_code == ExitCode.OK and report.tables[0].rows_existing == 10
    want = {k: (f"old{k}" if k % 10 == 0 else f"new{k}") for k in range(100)}
    assert dict(read_table(db, "D", ["Id", "V"])) == want


def test_the_reported_mutations_per_commit_count_the_checkpoint_marker(
    make_database: Any, tmp_path: Path
) -> None:
    """Each commit carries its checkpoint marker's mutations, which count against the budget:
    the report's mutations per commit left them out (19,994 of a 20,000 budget)."""
    from loader.resume.stores import STATE_COLUMNS

    db = make_database([DUP_DDL])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},v{k}\n" for k in range(1_000)))
    report = load(_d_config(db, src, tmp_path / "r.jsonl", batch_rows=100), database=db)
    t = report.tables[0]
    assert t.commits == 10 and t.mutations == [100 * 2 + len(STATE_COLUMNS)] * 10
    budget = load(
        _d_config(db, src, tmp_path / "r.jsonl", max_mutations=300, restart=True), database=db
    ).tables[0]
    marker = len(STATE_COLUMNS)
    assert max(budget.mutations) == (300 - marker) // 2 * 2 + marker  # the budget, filled


def test_an_update_stopped_by_keys_not_there_points_at_skip_missing(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database([DUP_DDL])
    with db.batch() as b:
        b.insert("D", ["Id", "V"], [[k, f"old{k}"] for k in range(0, 100, 2)])
    src = tmp_path / "d.csv"
    src.write_text("Id,V\n" + "".join(f"{k},new{k}\n" for k in range(100)))
    config = _d_config(db, src, tmp_path / "r.jsonl", mode="update", max_bad_rows=0)
    with pytest.raises(TooManyBadRows) as err:
        load(config, database=db)
    assert "re-run with `skip_missing=True` to leave those rows out" in (err.value.hint or "")
    report = load(dataclasses.replace(config, skip_missing=True), database=db)
    assert report.exit_code == ExitCode.OK and report.tables[0].rows_missing == 50
    assert dict(read_table(db, "D", ["Id", "V"])) == {k: f"new{k}" for k in range(0, 100, 2)}


def test_files_without_a_header_or_columns_say_they_take_the_table_s_order(
    make_database: Any, tmp_path: Path
) -> None:
    """A MySQL tryout: the export had Title before Sku, the table Sku before Title; both
    STRING, so the load wrote them swapped, exit 0, with no word of the order it used."""
    db = make_database([DUP_DDL])
    src = tmp_path / "d.txt"
    src.write_text("1\tx\n2\ty\n", encoding="utf-8")
    mysql = Dialect(delimiter="\t", header=False, quote_char=None)
    cfg = shop_config(db, jobs=(TableJob("D", (str(src),)),), dialect=mysql, state=False)
    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.OK
    (note,) = [n for n in report.notes if "no header row" in n]
    assert note.startswith("D: its files have no header row, so their fields are read in the "
                           "table's column order (Id, V); if the export's order differs")  # fmt: skip
    jobs = (TableJob("D", (str(src),), columns=("Id", "V")),)
    named = shop_config(db, jobs=jobs, dialect=mysql, state=False)
    assert not [n for n in load(named, database=db).notes if "no header row" in n]


def test_only_the_first_reject_past_the_limit_is_called_so() -> None:
    """A MySQL tryout's manifest: three tables side by side each met a bad row after the limit
    and each was "the one past the limit"."""
    from loader.errors import TooManyBadRows
    from loader.rejects import Reject, RejectBudget, RejectWriter

    budget = RejectBudget(RejectWriter(None), 1)
    messages = []
    for line, table in ((2, "A"), (3, "B"), (4, "C")):
        try:
            budget(Reject("f.csv", line, line - 1, None, "bad", "x", table))
        except TooManyBadRows as e:
            messages.append(e.message)
    assert messages == [
        "more than 1 bad row; the one past the limit, f.csv:3: bad",
        "more than 1 bad row; one more after the limit (passed at f.csv:3), at f.csv:4: bad",
    ]


def test_a_later_table_s_header_that_does_not_fit_fails_the_run_before_any_write(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout's manifest: its first table loaded, then the second's tab-separated file
    failed ("not in table", exit 2), which a script reads as nothing written. Every table's
    first source is now read up to its header before any table is written."""
    from conftest import read_table, small_load_config

    from loader import TableJob, load
    from loader.errors import SchemaError

    db = make_database(
        [
            "CREATE TABLE A (Id INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (Id)",
            "CREATE TABLE B (Id INT64 NOT NULL, Title STRING(MAX)) PRIMARY KEY (Id)",
        ]
    )
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("Id,Name\n1,x\n")
    b.write_text("Id\tTitle\n1\ty\n")
    jobs = (TableJob("A", (str(a),)), TableJob("B", (str(b),)))
    cfg = small_load_config(db, "A", [a], jobs=jobs)
    with pytest.raises(SchemaError, match="separated by a tab"):
        load(cfg, database=db)
    assert read_table(db, "A", ["Id"]) == []
    # a record longer than the head read is the load's to judge: it fits its own block
    b.write_text("Id,Title\n1," + "t" * (2 << 20) + "\n")
    report = load(small_load_config(db, "A", [a], jobs=jobs, block_size=4 << 20), database=db)
    assert report.rows_written == 2


def test_the_header_pre_flight_leaves_pipes_and_begun_jobs_alone(
    make_database: Any, tmp_path: Path
) -> None:
    """A review: the pre-flight opened a named pipe, which then lost its writer, and the
    load hung; and it read the first source of a job an earlier run had loaded, whose header
    no longer fits a table altered since (a re-run found nothing to do before)."""
    import os
    import threading

    from conftest import read_table, small_load_config

    from loader import TableJob, load
    from loader.errors import SchemaError

    db = make_database(
        [
            "CREATE TABLE A (Id INT64 NOT NULL, Name STRING(MAX), W INT64) PRIMARY KEY (Id)",
            "CREATE TABLE B (Id INT64 NOT NULL) PRIMARY KEY (Id)",
        ]
    )
    fifo, b = tmp_path / "a.fifo", tmp_path / "b.csv"
    os.mkfifo(fifo)
    b.write_text("Id\n1\n")

    def feed() -> None:
        with open(fifo, "w") as f:
            f.write("Id,Name,W\n" + "".join(f"{i},n{i},{i}\n" for i in range(5000)))

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    piped = (TableJob("A", (str(fifo),)), TableJob("B", (str(b),)))
    report = load(small_load_config(db, "A", [fifo], jobs=piped, state=False), database=db)
    writer.join(timeout=30)
    assert report.rows_written == 5001
    # a job loaded before is not read again by the pre-flight
    a = tmp_path / "a.csv"
    a.write_text("Id,Name,W\n1,x,1\n")
    jobs = (TableJob("A", (str(a),)), TableJob("B", (str(b),)))
    assert load(small_load_config(db, "A", [a], jobs=jobs), database=db).exit_code == 0
    op = db.update_ddl(["ALTER TABLE A DROP COLUMN W"])
    op.result(120)
    again = load(small_load_config(db, "A", [a], jobs=jobs), database=db)
    assert again.exit_code == 0 and again.rows_written == 0
    assert len(read_table(db, "A", ["Id"])) == 5000
    # but a restart forgets the earlier run: its header is checked before any table is written
    b.write_text("Id\n1\n2\n")
    jobs = (TableJob("B", (str(b),)), TableJob("A", (str(a),)))
    with pytest.raises(SchemaError, match="W"):
        load(small_load_config(db, "A", [a], jobs=jobs, restart=True), database=db)
    assert read_table(db, "B", ["Id"]) == [(1,)]


def test_a_glob_resumes_over_a_file_fixed_after_the_load_stopped_at_it(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout: a glob's second file had a tab-separated header; the load wrote the first
    and stopped there (exit 2); once the file was fixed, the same command was refused ("source
    changed": only --restart, which loads every file again). No commit held a row of that
    file, nor of any after it: the run resumes with them as they are now. A change to a file
    some commit has rows of is still refused."""
    from conftest import read_table, small_load_config

    from loader import load
    from loader.errors import SchemaError, StateError

    db = make_database(["CREATE TABLE G (Id INT64 NOT NULL, S STRING(MAX)) PRIMARY KEY (Id)"])
    folder = tmp_path / "g"
    folder.mkdir()
    one, two, three = (folder / f"{i}.csv" for i in (1, 2, 3))
    one.write_text("Id,S\n" + "".join(f"{i},a\n" for i in range(3000)))
    two.write_text("Id\tS\n" + "".join(f"{i}\tb\n" for i in range(3000, 3100)))
    three.write_text("Id,S\n" + "".join(f"{i},c\n" for i in range(5000, 5100)))
    cfg = small_load_config(db, "G", [folder / "*.csv"])
    with pytest.raises(SchemaError, match="separated by a tab"):
        load(cfg, database=db)
    written = len(read_table(db, "G", ["Id"]))
    assert 0 < written <= 3000

    two.write_text("Id,S\n" + "".join(f"{i},b\n" for i in range(3000, 3100)))
    (folder / "4.csv").write_text("Id,S\n7000,d\n")  # a file added since: never read either
    report = load(cfg, database=db)
    assert report.exit_code == 0, report.error
    assert report.tables[0].rows_written + written >= 3201  # the flush in flight: read again
    assert any("2 source(s) the interrupted run had not begun to write" in n for n in report.notes)
    rows = read_table(db, "G", ["Id", "S"])
    assert len(rows) == 3201 and rows[-1] == (7000, "d")

    # a file some commit has rows of: refused, as before
    (folder / "4.csv").write_text("Id,S\n7000,d\n")
    three.write_text("Id\tS\n")
    with pytest.raises(SchemaError):
        load(small_load_config(db, "G", [folder / "*.csv"], restart=True), database=db)
    one.write_text("Id,S\n" + "".join(f"{i},z\n" for i in range(3000)))
    with pytest.raises(StateError, match="changed"):
        load(cfg, database=db)


def test_a_run_that_committed_nothing_is_not_told_as_interrupted(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout: a load stopped at its header (exit 2); a dry run with the delimiter fixed
    then said the job "was interrupted at source 1, after record 0" and that the load
    would resume it, where the load starts afresh (nothing was committed)."""
    import dataclasses

    from conftest import small_load_config

    from loader import load
    from loader.errors import SchemaError

    db = make_database(["CREATE TABLE T (Id INT64 NOT NULL, S STRING(MAX)) PRIMARY KEY (Id)"])
    src = tmp_path / "semi.csv"
    src.write_text("Id;S\n1;a\n")
    cfg = small_load_config(db, "T", [src])
    with pytest.raises(SchemaError):
        load(cfg, database=db)
    fixed = dataclasses.replace(
        cfg, dialect=dataclasses.replace(cfg.dialect, delimiter=";"), dry_run=True
    )
    report = load(fixed, database=db)
    assert report.exit_code == 0 and report.rows_read == 1
    assert not [n for n in report.notes if "interrupted" in n], report.notes


def test_a_dry_run_plans_the_commits_the_load_sends(make_database: Any, tmp_path: Path) -> None:
    """A tryout's dry run said 20,000 mutations a batch where the load sent 19,997 (rows of
    4, and the checkpoint marker's 5 in each commit): the dry run leaves the marker room too."""
    from conftest import small_load_config

    db = make_database(
        ["CREATE TABLE K (Id INT64 NOT NULL, A INT64, B INT64, C INT64) PRIMARY KEY (Id)"]
    )
    src = tmp_path / "k.csv"
    src.write_text("Id,A,B,C\n" + "".join(f"{i},1,2,3\n" for i in range(12000)))
    cfg = small_load_config(db, "K", [src], max_mutations=20000, batch_rows=None)
    dry = load(dataclasses.replace(cfg, dry_run=True), database=db).tables[0]
    real = load(cfg, database=db).tables[0]
    assert dry.mutations == real.mutations and max(real.mutations) <= 20000, (dry, real)
