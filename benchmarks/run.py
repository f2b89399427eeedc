"""The speed claims, measured side by side in one run (issue "Speed").

    python -m benchmarks.run [--rows N] [--e2e-rows N] [--json out.json] [--quick]

Sections (see benchmarks/README.md for what each one means):

1. pipeline: raw pyarrow CSV parse vs our dry-run load vs google-cloud-spanner's own encoder
2. end to end against the Spanner emulator: 1 row/commit, naive 1,000-row batches, ours, and
   the emulator's own commit ceiling
3. end to end against a null Spanner server (benchmarks/null_spanner.py): ours at concurrency
   1/4/8 vs the naive loader, plus the commit path alone: ours (CommitRequest bytes) and the
   client's Batch.commit
4. batching quality: distinct key-range splits touched per commit, sorted vs unsorted batches
5. scaling: rows/s and peak RSS of the dry-run pipeline at 0.1M, 1M and 10M rows
6. the wide reference table (schemas/wide.sql, benchmarks/wide.py): raw parse vs our dry run,
   beside section 1's Orders figures
7. start-up (benchmarks/startup.py): process start to first commit of a one-row file against
   the emulator, and --help, beside ``python -c pass``; with --startup-baseline, another
   source tree's figures in the same run

Every figure comes from the same run on the same machine, and the headline claims are
reported as ratios, because a small shared machine drifts by 10-20 % between runs.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import os
import pickle
import platform
import pstats
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from benchmarks.wide import TABLE as WIDE_TABLE
from benchmarks.wide import WIDE_DDL, wide_file

ROOT = Path(__file__).resolve().parent.parent
SHOP_DDL = ROOT / "schemas" / "shop.sql"
GENERATE = ROOT / "examples" / "generate.py"
PROJECT, INSTANCE = "bench-project", "bench"
TABLE = "Orders"
NAIVE_BATCH = 1_000
SPLITS = 100


def orders_ddl() -> str:
    """Orders and its indexes from schemas/shop.sql, without INTERLEAVE IN PARENT Customers: the
    end-to-end sections load Orders alone, and an interleaved child needs its parent rows."""
    from loader.emulator import split_ddl

    keep = []
    for stmt in split_ddl(SHOP_DDL.read_text(encoding="utf-8")):
        if re.match(r"CREATE\s+TABLE\s+Orders\b", stmt):
            keep.append(re.sub(r",\s*INTERLEAVE\s+IN\s+PARENT\s+\w+[^;]*$", "", stmt))
        elif re.match(r"CREATE\s+(UNIQUE\s+)?(NULL_FILTERED\s+)?INDEX\s+\w+\s+ON\s+Orders\b", stmt):
            keep.append(stmt)
    return ";\n".join(keep) + ";\n"


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class Figure:
    """One measured variant."""

    section: str
    name: str
    rows: int
    seconds: float
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


@dataclass
class Ratio:
    """A claim: ``value`` (a ratio of two figures of this run) against its ``target``."""

    name: str
    value: float
    target: float
    higher_is_better: bool = True

    @property
    def met(self) -> bool:
        return self.value >= self.target if self.higher_is_better else self.value <= self.target


@dataclass
class Results:
    figures: list[Figure] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def add(self, fig: Figure) -> Figure:
        self.figures.append(fig)
        print(f"  {fig.section:<10} {fig.name:<52} {_rate(fig.rows_per_s):>12}", flush=True)
        return fig

    def ratio(self, name: str, value: float, target: float, higher: bool = True) -> None:
        r = Ratio(name, value, target, higher)
        self.ratios.append(r)
        print(f"  ratio      {name:<52} {value:>12.2f}  ({_target(r)})", flush=True)

    def to_json(self) -> dict[str, Any]:
        return {
            "info": self.info,
            "figures": [{**asdict(f), "rows_per_s": round(f.rows_per_s, 1)} for f in self.figures],
            "ratios": [{**asdict(r), "met": r.met} for r in self.ratios],
        }

    def render(self) -> str:
        lines = [
            f"{'section':<10} {'variant':<52} {'rows':>10} {'seconds':>9} {'rows/s':>12}  note",
            "-" * 110,
        ]
        for f in self.figures:
            lines.append(
                f"{f.section:<10} {f.name:<52} {f.rows:>10,} {_secs(f.seconds):>9} "
                f"{_rate(f.rows_per_s):>12}  {f.note}".rstrip()
            )
        lines += ["", f"{'claim':<63} {'value':>10}  target", "-" * 90]
        for r in self.ratios:
            lines.append(f"{r.name:<63} {r.value:>10.2f}  {_target(r)}")
        return "\n".join(lines)


def _secs(v: float) -> str:
    return "-" if v != v else f"{v:.3f}"


def _rate(v: float) -> str:
    return "-" if v != v else f"{v:,.0f}"


def _target(r: Ratio) -> str:
    op = ">=" if r.higher_is_better else "<="
    return f"{op} {r.target:g}: {'met' if r.met else 'NOT met'}"


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``repeat`` runs (the least disturbed by other load on the machine)."""
    best, out = float("inf"), None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


@contextmanager
def pyarrow_threads(n: Optional[int]) -> Iterator[None]:
    """Run with pyarrow's CPU pool at ``n`` threads (None: leave it as it is)."""
    before = pa.cpu_count()
    if n is not None:
        pa.set_cpu_count(n)
    try:
        yield
    finally:
        pa.set_cpu_count(before)


# ---------------------------------------------------------------------------------------------
# Inputs


def orders_file(data_dir: Path, rows: int) -> Path:
    """examples/generate.py's Orders table with ``rows`` rows (deterministic, so cached)."""
    out = data_dir / f"orders-{rows}"
    path = out / "Orders.csv"
    if not path.exists():
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, str(GENERATE), "--orders", str(rows), "--tables", TABLE]
            + ["--out", str(out)],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        print(f"  generated {path} in {time.perf_counter() - t0:.1f}s", flush=True)
    return path


def load_config(path: Path | str, table: str = TABLE, **kw: Any) -> Any:
    """A LoadConfig for one file (or URI) of ``table`` (Orders by default); checkpoints off (a
    benchmark never resumes)."""
    from loader import LoadConfig, TableJob, Target
    from loader.convert import ConvertOptions
    from loader.parse import Dialect

    names = {f.name for f in fields(LoadConfig)}
    if "state" in names:
        kw.setdefault("state", False)
    return LoadConfig(
        target=Target(PROJECT, INSTANCE, kw.pop("database_id", "bench")),
        jobs=(TableJob(table, (str(path),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        **kw,
    )


def typed_orders(path: Path, limit: Optional[int] = None) -> pa.Table:
    """The file read by pyarrow with the Orders column types (for the client baselines)."""
    types = {
        "CustomerId": pa.int64(),
        "OrderId": pa.int64(),
        "OrderDate": pa.date32(),
        "Status": pa.string(),
        "Amount": pa.decimal128(38, 9),
        "Currency": pa.string(),
        "Weight": pa.float64(),
        "PlacedAt": pa.timestamp("ns", tz="UTC"),
    }
    table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types))
    if limit is not None:
        table = table.slice(0, limit)
    # the client takes datetime (microseconds); truncating the nanoseconds is the client's limit
    return table.set_column(
        7, "PlacedAt", table.column("PlacedAt").cast(pa.timestamp("us", tz="UTC"), safe=False)
    )


def python_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows as the Python values google-cloud-spanner takes (int, date, str, Decimal, ...)."""
    return list(zip(*(c.to_pylist() for c in table.columns)))


@dataclass
class Encoded:
    """A file run through the loader's flush (sort, encode, plan) without committing."""

    table: pa.Table
    columns: list[str]
    rows: pa.Array
    starts: np.ndarray
    ends: np.ndarray
    cost: int
    overhead: int

    def mutations(self) -> list[bytes]:
        from loader.commit import OPS
        from loader.encode import write_mutation

        return [
            write_mutation(OPS["upsert"], TABLE, self.columns, self.rows.slice(s, e - s))
            for s, e in zip(self.starts.tolist(), self.ends.tolist())
        ]


def encode_like_flush(
    path: Path, schema: Any, stages: Optional[dict[str, float]] = None
) -> Encoded:
    """Parse, convert, sort, encode and plan the whole file as one flush of the pipeline.

    ``stages``, when given, receives the seconds spent in each stage.
    """
    from loader.batch import Budget, mutation_cost_per_row, plan_batches
    from loader.commit import OPS
    from loader.convert import ConvertOptions, convert_block
    from loader.encode import encode_rows, write_mutation
    from loader.parse import Dialect, read_blocks
    from loader.sort import sort_table
    from loader.source import expand_sources, open_source

    took = stages if stages is not None else {}
    clock = time.perf_counter
    infos, _ = expand_sources((str(path),))
    parts: list[pa.Table] = []
    took["parse (read_blocks)"] = took["convert (convert_block)"] = 0.0
    for info in infos:
        with open_source(info) as stream:
            blocks = read_blocks(stream, info.uri, schema, Dialect())
            while True:
                t0 = clock()
                block = next(blocks, None)
                t1 = clock()
                took["parse (read_blocks)"] += t1 - t0
                if block is None:
                    break
                parts.append(convert_block(block, schema, ConvertOptions(), info.uri).table)
                took["convert (convert_block)"] += clock() - t1
    t0 = clock()
    table = sort_table(pa.concat_tables(parts), schema.primary_key)
    t1 = clock()
    cols = list(table.column_names)
    rows = encode_rows([table.column(c) for c in cols], [schema.column(c).type for c in cols])
    t2 = clock()
    cost = mutation_cost_per_row(schema, cols)
    overhead = len(write_mutation(OPS["upsert"], TABLE, cols, rows.slice(0, 0)))
    plan = plan_batches(pc.binary_length(rows), cost, Budget(), overhead_bytes=overhead)
    t3 = clock()
    took["sort (sort_table)"] = t1 - t0
    took["encode (encode_rows)"] = t2 - t1
    took["plan (plan_batches)"] = t3 - t2
    return Encoded(table, cols, rows, plan.starts, plan.ends, cost, overhead)


# ---------------------------------------------------------------------------------------------
# Spanner handles


def spanner_database(database_id: str, ddl_text: Optional[str] = None) -> Any:
    """A database on the emulator named by SPANNER_EMULATOR_HOST, created with ``ddl_text``
    (default: schemas/shop.sql)."""
    from google.cloud import spanner

    from loader.emulator import ensure_database

    client = spanner.Client(project=PROJECT)
    if ddl_text is None:
        return ensure_database(client, INSTANCE, database_id, [SHOP_DDL])
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(ddl_text)
    try:
        return ensure_database(client, INSTANCE, database_id, [Path(f.name)])
    finally:
        os.unlink(f.name)


def null_database() -> Any:
    """A Database handle for the server named by SPANNER_EMULATOR_HOST; makes no RPC."""
    from google.cloud import spanner

    return spanner.Client(project=PROJECT).instance(INSTANCE).database("null")


def naive_load(database: Any, path: Path, limit: Optional[int], batch_rows: int) -> int:
    """What a first attempt looks like: read the CSV into Python rows, then commit them in file
    order, ``batch_rows`` per ``database.batch()`` with the client's own encoder."""
    rows = python_rows(typed_orders(path, limit))
    cols = list(typed_cols())
    for i in range(0, len(rows), batch_rows):
        with database.batch() as batch:
            batch.insert_or_update(TABLE, cols, rows[i : i + batch_rows])
    return len(rows)


def typed_cols() -> tuple[str, ...]:
    """The Orders columns, as examples/generate.py writes them."""
    sys.path.insert(0, str(GENERATE.parent))
    from generate import COLUMNS  # type: ignore[import-not-found]

    return tuple(COLUMNS[TABLE])


def commit_all(committer: Any, mutations: Sequence[bytes], concurrency: int) -> None:
    """Commit pre-encoded mutations as fast as ``concurrency`` threads can (no parsing)."""
    if concurrency == 1:
        for m in mutations:
            committer.commit([m])
        return
    it = iter(mutations)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                m = next(it, None)
            if m is None:
                return
            try:
                committer.commit([m])
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)
                return

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


class ClientBatchCommitter:
    """The loader's commit path before it sent CommitRequest bytes itself: the client's
    ``Batch.commit``, our wire bytes parsed into proto-plus ``Mutation`` objects for it.

    Kept here as the baseline of the "commit path only" figures."""

    def __init__(self, database: Any) -> None:
        self.database = database

    def commit(self, mutations: Sequence[bytes]) -> None:
        from google.cloud.spanner_v1 import Mutation
        from google.cloud.spanner_v1.batch import Batch
        from google.cloud.spanner_v1.database_sessions_manager import TransactionType

        manager = self.database.sessions_manager
        session = manager.get_session(TransactionType.READ_WRITE)
        try:
            batch = Batch(session)
            batch._mutations.extend(Mutation.deserialize(m) for m in mutations)
            batch.commit(timeout_secs=0)  # ABORTED raised at once, as the loader had it
        finally:
            manager.put_session(session)


# ---------------------------------------------------------------------------------------------
# Sections


def section_pipeline(
    res: Results, path: Path, rows: int, schema: Any, schema_path: Path, a: argparse.Namespace
) -> None:
    """1. raw parse vs our dry run vs the client's encoder."""
    from google.cloud.spanner_v1._helpers import _make_list_value_pbs

    from loader import load

    print("1. pipeline", flush=True)
    cpus = len(os.sched_getaffinity(0))
    ours_by_threads: dict[str, float] = {}
    raw_by_threads: dict[str, float] = {}
    for label, n in (("1 thread", 1), (f"{cpus} threads", None)):
        with pyarrow_threads(n):
            opts = pacsv.ReadOptions(use_threads=n is None, block_size=16 << 20)
            t, table = best_of(
                a.repeat + 1,
                lambda opts=opts: pacsv.read_csv(path, read_options=opts),  # type: ignore[misc]
            )
            assert table.num_rows == rows
            del table
            raw_by_threads[label] = res.add(
                Figure("pipeline", f"raw pyarrow.csv.read_csv ({label})", rows, t)
            ).rows_per_s
    # One core: a fresh process pinned to one CPU, so the loader's stage threads share it; the
    # raw parse is timed in the same process, alternating with the loads, for the ratio.
    child = dry_run_in_child(path, schema_path, one_core=True, repeat=a.repeat + 1, raw=True)
    assert child["rows"] == rows
    raw_one_core = res.add(
        Figure(
            "pipeline",
            "raw pyarrow.csv.read_csv (pinned to 1 core)",
            rows,
            child["raw_seconds"],
            note="same process as below",
        )
    ).rows_per_s
    ours_by_threads["1 thread"] = res.add(
        Figure(
            "pipeline",
            "ours: load dry run (pinned to 1 core)",
            rows,
            child["seconds"],
            note="best run",
            extra={"cpu_s_whole_child": child["cpu_s"]},
        )
    ).rows_per_s
    res.add(
        Figure(
            "pipeline",
            "ours: load dry run (pinned to 1 core), first run",
            rows,
            child["first_seconds"],
            note="fresh memory",
        )
    )
    cfg = load_config(path, dry_run=True)
    t, report = best_of(a.repeat, lambda: load(cfg, database=object(), schemas={TABLE: schema}))
    assert report.tables[0].rows_read == rows
    ours_by_threads[f"{cpus} threads"] = res.add(
        Figure("pipeline", f"ours: load dry run ({cpus} cores)", rows, t)
    ).rows_per_s
    stage_times: dict[str, float] = {}
    with pyarrow_threads(1):
        for _ in range(max(1, a.repeat)):
            took: dict[str, float] = {}
            encode_like_flush(path, schema, took)
            for k, v in took.items():
                stage_times[k] = min(stage_times.get(k, v), v)
    for stage, t in stage_times.items():
        res.add(Figure("pipeline", f"  stage {stage} (1 thread)", rows, t))
    res.info["stages_1_thread_s"] = stage_times
    sample_n = min(rows, a.client_sample)
    sample = typed_orders(path, sample_n)
    t_rows, py = best_of(1, lambda: python_rows(sample))
    t_enc, _ = best_of(a.repeat, lambda: _make_list_value_pbs(py))
    client = res.add(
        Figure(
            "pipeline",
            "client encoder: _make_list_value_pbs",
            sample_n,
            t_enc,
            note="Python rows given; encode only",
        )
    )
    client_path = res.add(
        Figure(
            "pipeline",
            "client: Arrow -> Python rows + encoder",
            sample_n,
            t_rows + t_enc,
            note="CSV parse not counted",
        )
    )
    one_core = ours_by_threads["1 thread"] / raw_one_core
    all_cores = ours_by_threads[f"{cpus} threads"] / raw_by_threads[f"{cpus} threads"]
    res.ratio("ours (1 core) / raw parse (1 core)", one_core, 0.45)  # issue #18
    res.ratio(f"ours ({cpus} cores) / raw parse ({cpus} threads)", all_cores, 1 / 3)
    # issue #18 scope 5: the stages overlap as well as Arrow's own parse spreads over cores
    res.ratio(f"the {cpus}-core ratio / the 1-core ratio", all_cores / one_core, 1.0)
    res.ratio("ours (1 core) / client encoder", ours_by_threads["1 thread"] / client.rows_per_s, 25)
    # the same, against the path a loader built on the client takes: typed Arrow rows turned
    # into Python values, then the client's encoder (the CSV parse still not counted)
    res.ratio(
        "ours (1 core) / client path (Arrow -> rows + encoder)",
        ours_by_threads["1 thread"] / client_path.rows_per_s,
        25,
    )
    res.ratio(
        f"ours ({cpus} cores) / client encoder",
        ours_by_threads[f"{cpus} threads"] / client.rows_per_s,
        25,
    )
    encode_rate = rows / stage_times["encode (encode_rows)"]
    res.ratio("encode stage alone (1 thread) / client encoder", encode_rate / client.rows_per_s, 25)


def section_wide(
    res: Results, path: Path, rows: int, schema: Any, schema_path: Path, a: argparse.Namespace
) -> None:
    """6. the wide reference table (schemas/wide.sql): raw parse vs our dry run, as section 1
    does for Orders, in the same run: pinned to one core in a child, and on every core."""
    from loader import load

    print("6. wide table", flush=True)
    cpus = len(os.sched_getaffinity(0))
    cfg = load_config(path, table=WIDE_TABLE, dry_run=True)
    parse = raw_parse_options(WIDE_TABLE)
    child = dry_run_in_child(
        path, schema_path, one_core=True, repeat=a.repeat + 1, raw=True, table=WIDE_TABLE
    )
    assert child["rows"] == rows
    raw_one = res.add(
        Figure(
            "wide",
            "raw pyarrow.csv.read_csv (pinned to 1 core)",
            rows,
            child["raw_seconds"],
            note="same process as below",
        )
    )
    ours_one = res.add(
        Figure("wide", "ours: load dry run (pinned to 1 core)", rows, child["seconds"])
    )
    one_core = ours_one.rows_per_s / raw_one.rows_per_s
    res.info["wide_ratio_1_core"] = one_core
    print(f"  {'wide':<10} {'ours (1 core) / raw parse (1 core)':<52} {one_core:>12.2f}")
    with pyarrow_threads(None):
        opts = pacsv.ReadOptions(use_threads=True, block_size=16 << 20)
        t, table = best_of(
            a.repeat + 1,
            lambda: pacsv.read_csv(path, read_options=opts, parse_options=parse),
        )
        assert table.num_rows == rows
        del table
        raw = res.add(Figure("wide", f"raw pyarrow.csv.read_csv ({cpus} threads)", rows, t))
        t, report = best_of(
            a.repeat, lambda: load(cfg, database=object(), schemas={WIDE_TABLE: schema})
        )
        assert report.tables[0].rows_read == rows and report.tables[0].rows_rejected == 0
        ours = res.add(Figure("wide", f"ours: load dry run ({cpus} cores)", rows, t))
    all_cores = ours.rows_per_s / raw.rows_per_s
    res.ratio(f"wide: ours ({cpus} cores) / raw parse ({cpus} threads)", all_cores, 0.40)
    # issue #18 scope 5: the stages overlap as well as Arrow's own parse spreads over cores
    res.ratio(f"wide: the {cpus}-core ratio / the 1-core ratio", all_cores / one_core, 1.0)


def section_emulator(res: Results, path: Path, rows: int, a: argparse.Namespace) -> None:
    """2. end to end against the emulator; a fresh database per variant."""
    from loader import load
    from loader.commit import SpannerCommitter
    from loader.schema import read_schemas

    print("2. emulator", flush=True)
    stamp = f"{os.getpid() % 10000}-{int(time.time()) % 100000}"

    one = min(rows, a.single_row_cap)
    db = spanner_database(f"e2e-single-{stamp}", orders_ddl())
    t, _ = best_of(1, lambda: naive_load(db, path, one, 1))
    single = res.add(
        Figure("emulator", "1 row per commit", one, t, note=f"first {one:,} rows; rate holds")
    )

    db = spanner_database(f"e2e-naive-{stamp}", orders_ddl())
    t, _ = best_of(1, lambda: naive_load(db, path, rows, NAIVE_BATCH))
    naive = res.add(
        Figure("emulator", f"naive: {NAIVE_BATCH:,} unsorted rows/commit, client encoder", rows, t)
    )

    db = spanner_database(f"e2e-ours-{stamp}", orders_ddl())
    cfg = load_config(path, concurrency=1)
    t, report = best_of(1, lambda: load(cfg, database=db))
    written = report.tables[0].rows_written
    assert written == rows, (written, rows)
    ours = res.add(
        Figure(
            "emulator",
            "ours: loader.load, concurrency 1",
            rows,
            t,
            note=f"{report.tables[0].commits} commits",
        )
    )

    db = spanner_database(f"e2e-ceiling-{stamp}", orders_ddl())
    schema = read_schemas(db, [TABLE])[TABLE]
    enc = encode_like_flush(path, schema)
    mutations = enc.mutations()
    t, _ = best_of(1, lambda: commit_all(SpannerCommitter(db), mutations, 1))
    ceiling = res.add(
        Figure(
            "emulator",
            "ceiling: pre-encoded batches, commit loop only",
            rows,
            t,
            note=f"{len(mutations)} commits",
        )
    )
    res.ratio("emulator: ours / naive 1,000-row batches", ours.rows_per_s / naive.rows_per_s, 1)
    res.ratio("emulator: ours / 1 row per commit", ours.rows_per_s / single.rows_per_s, 1)
    res.ratio("emulator: ours / emulator ceiling", ours.rows_per_s / ceiling.rows_per_s, 0.5)


def section_null(res: Results, path: Path, rows: int, schema: Any, a: argparse.Namespace) -> None:
    """3. end to end against the null server, plus where the commit path spends its time."""
    from benchmarks.null_spanner import NullSpanner
    from loader import load
    from loader.commit import SpannerCommitter

    print("3. null server", flush=True)
    saved = os.environ.get("SPANNER_EMULATOR_HOST")
    enc = encode_like_flush(path, schema)
    mutations = enc.mutations()
    try:
        with NullSpanner() as server:
            os.environ["SPANNER_EMULATOR_HOST"] = server.address
            best: Optional[Figure] = None
            variants: list[tuple[str, dict[str, Any]]] = [
                (f"ours: loader.load, concurrency {c}", {"concurrency": c}) for c in (1, 4, 8)
            ]
            variants.append(
                (
                    "ours: concurrency 4, --buffer-size 64MiB",
                    {"concurrency": 4, "buffer_size": 64 << 20},
                )
            )
            for name, kw in variants:
                server.reset()
                db = null_database()
                cfg = load_config(path, **kw)
                t, report = best_of(1, lambda: load(cfg, database=db, schemas={TABLE: schema}))  # noqa: B023
                got = server.counts()
                assert got.rows == rows == report.tables[0].rows_written, (got, rows)
                fig = res.add(
                    Figure("null", name, rows, t, note=f"{got.commits} commits", extra=asdict(got))
                )
                if best is None or fig.rows_per_s > best.rows_per_s:
                    best = fig

            naive_n = min(rows, a.naive_null_cap)
            server.reset()
            db = null_database()
            t, _ = best_of(1, lambda: naive_load(db, path, naive_n, NAIVE_BATCH))
            assert server.counts().rows == naive_n
            naive = res.add(
                Figure(
                    "null",
                    f"naive: {NAIVE_BATCH:,} unsorted rows/commit, client encoder",
                    naive_n,
                    t,
                )
            )

            paths: list[tuple[str, Callable[[Any], Any], str]] = [
                (
                    "client Batch.commit",
                    ClientBatchCommitter,
                    "proto-plus Mutation + CommitRequest",
                ),
                ("ours (SpannerCommitter)", SpannerCommitter, "CommitRequest bytes, raw channel"),
            ]
            path_rate: dict[str, float] = {}
            for label, make, note in paths:
                for c in (1, 4):
                    server.reset()
                    committer = make(null_database())
                    t, _ = best_of(1, lambda: commit_all(committer, mutations, c))  # noqa: B023
                    assert server.counts().rows == rows
                    fig = res.add(
                        Figure(
                            "null",
                            f"commit path only: {label}, {c} thread(s)",
                            rows,
                            t,
                            note=f"pre-encoded; {note}",
                        )
                    )
                    if c == 1:
                        path_rate[label] = fig.rows_per_s
            sample = mutations[: max(1, len(mutations) // 2)]
            res.info["commit_path_profile"] = {}
            for label, make, _note in paths:
                profile = profile_commit_path(
                    make(null_database()), sample, _PROFILE_BUCKETS[label]
                )
                res.info["commit_path_profile"][label] = profile
                print(f"  commit path profile ({label}, 1 thread):", flush=True)
                for k, v in profile["shares"].items():
                    print(f"    {k:<48} {v:6.1%}", flush=True)
    finally:
        if saved is None:
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
        else:
            os.environ["SPANNER_EMULATOR_HOST"] = saved
    assert best is not None
    res.ratio("null server: best of ours, rows/s (millions)", best.rows_per_s / 1e6, 0.5)
    res.ratio("null server: best of ours / naive", best.rows_per_s / naive.rows_per_s, 1)
    res.ratio(
        "commit path only, 1 thread: ours / client Batch.commit",
        path_rate["ours (SpannerCommitter)"] / path_rate["client Batch.commit"],
        1,
    )


#: Where a commit spends its time, per commit path: cumulative time of these functions.
_PROFILE_BUCKETS = {
    "client Batch.commit": {
        "Batch.commit, all of it": ("batch.py", "commit"),
        "parse bytes into a Mutation": ("message.py", "deserialize"),
        "proto-plus __init__ (copies mutations in)": ("message.py", "__init__"),
        "proto-plus serialize of the CommitRequest": ("message.py", "serialize"),
        "grpc _blocking (send, server, reply)": ("_channel.py", "_blocking"),
    },
    "ours (SpannerCommitter)": {
        "SpannerCommitter.commit, all of it": ("loader/commit.py", "commit"),
        "request bytes (SpannerCommitter.request)": ("loader/commit.py", "request"),
        "request id header": ("database.py", "metadata_with_request_id"),
        "sessions_manager.get_session": ("database_sessions_manager.py", "get_session"),
        "grpc _blocking (send, server, reply)": ("_channel.py", "_blocking"),
    },
}


def profile_commit_path(
    committer: Any, mutations: Sequence[bytes], buckets: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """cProfile one thread committing pre-encoded batches through ``committer``."""
    committer.commit([])  # the session is created outside the measurement
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    commit_all(committer, mutations, 1)
    prof.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    shares: dict[str, float] = {}
    for label, (file_end, func) in buckets.items():
        cum = max(
            (v[3] for (f, _line, fn), v in raw.items() if f.endswith(file_end) and fn == func),
            default=0.0,
        )
        shares[label] = cum / total if total else 0.0
    top = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:12]
    return {
        "commits": len(mutations),
        "seconds": total,
        "shares": shares,
        "top_tottime": [
            {"function": f"{Path(f).name}:{line}:{fn}", "tottime": round(v[2], 4)}
            for (f, line, fn), v in top
        ],
    }


def section_batching(res: Results, path: Path, rows: int, schema: Any) -> None:
    """4. distinct key-range splits per commit: our sorted batches vs 1,000-row file order."""
    print("4. batching quality", flush=True)
    enc = encode_like_flush(path, schema)
    width = (1 << 63) // SPLITS + 1
    split_sorted = enc.table.column("CustomerId").to_numpy() // width
    ours = _mean_distinct(split_sorted, enc.starts, enc.ends)
    raw = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(
            include_columns=["CustomerId"], column_types={"CustomerId": pa.int64()}
        ),
    )
    split_file = raw.column("CustomerId").to_numpy() // width
    starts = np.arange(0, rows, NAIVE_BATCH, dtype=np.int64)
    ends = np.minimum(starts + NAIVE_BATCH, rows)
    naive = _mean_distinct(split_file, starts, ends)
    res.info["batching"] = {
        "splits": SPLITS,
        "our_commits": len(enc.starts),
        "our_rows_per_commit": float(np.mean(enc.ends - enc.starts)),
        "our_mean_splits": ours,
        "naive_commits": len(starts),
        "naive_mean_splits": naive,
    }
    res.add(
        Figure(
            "batching",
            f"ours: {len(enc.starts)} commits of ~{int(np.mean(enc.ends - enc.starts)):,} rows",
            rows,
            float("nan"),
            note=f"mean splits per commit {ours:.2f}",
        )
    )
    res.add(
        Figure(
            "batching",
            f"naive: {len(starts)} commits of {NAIVE_BATCH:,} unsorted rows",
            rows,
            float("nan"),
            note=f"mean splits per commit {naive:.2f}",
        )
    )
    res.ratio("batching: mean splits per commit, ours", ours, 2, higher=False)
    res.ratio("batching: mean splits per commit, naive", naive, 90)


def _mean_distinct(split: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> float:
    """Mean over batches ``[starts[i], ends[i])`` of the number of distinct values of split."""
    batch = np.repeat(np.arange(len(starts)), ends - starts)
    rows = np.concatenate([np.arange(s, e) for s, e in zip(starts.tolist(), ends.tolist())])
    pairs = np.unique(batch.astype(np.int64) * (SPLITS + 1) + split[rows])
    return float(len(pairs) / len(starts))


def pin_first(cpu: Optional[int]) -> str:
    """Python code that pins its process to ``cpu`` (nothing for None), to run first in a
    child: every thread the child makes inherits the pin. A ``preexec_fn`` would do it in the
    forked copy of a parent with threads (a test worker's), which Python documents as unsafe
    (the child can deadlock before it runs the command)."""
    return "" if cpu is None else f"import os; os.sched_setaffinity(0, {{{cpu}}})\n"


def pinned_module(cpu: Optional[int], module: str, args: list[str]) -> list[str]:
    """The command ``python -m module args``, pinned to ``cpu`` from its first statement."""
    if cpu is None:
        return [sys.executable, "-m", module, *args]
    code = pin_first(cpu) + (
        f"import runpy, sys; sys.argv[0] = {module!r}; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", code, *args]


def dry_run_in_child(
    path: Path,
    schema_path: Path,
    one_core: bool = False,
    repeat: int = 1,
    raw: bool = False,
    table: str = TABLE,
) -> dict[str, Any]:
    """Dry-run loads in a fresh process (see :func:`child_dry_run`): rows, seconds (best and
    first run), peak RSS (KiB), CPU seconds of the whole child, and with ``raw`` the best raw
    parse beside them.

    ``one_core``: the process is pinned to a single CPU from its start (every thread it makes,
    Arrow's pools and the loader's stage threads included, inherits that), so the figure is
    what one core does however the pipeline's threads are arranged.
    """
    proc = subprocess.Popen(
        pinned_module(
            min(os.sched_getaffinity(0)) if one_core else None,
            "benchmarks.run",
            ["--child-dry-run", str(path), "--child-schema", str(schema_path)]
            + ["--child-repeat", str(repeat)]
            + (["--child-raw"] if raw else [])
            + ["--child-table", table],
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"the dry-run child for {path} failed ({proc.returncode})")
    child: dict[str, Any] = json.loads(out)
    child["cpu_s"] = usage.ru_utime + usage.ru_stime
    return child


def section_scaling(
    res: Results, data_dir: Path, schema_path: Path, sizes: Sequence[int], a: argparse.Namespace
) -> None:
    """5. the dry-run pipeline in a fresh process per size: rows/s and peak RSS."""
    print("5. scaling", flush=True)
    per_row: list[float] = []
    for n in sizes:
        child = dry_run_in_child(orders_file(data_dir, n), schema_path)
        rss_mib = child["hwm_kib"] / 1024
        res.add(
            Figure(
                "scaling",
                f"ours: load dry run, {n:,} rows, own process",
                child["rows"],
                child["seconds"],
                note=f"peak RSS {rss_mib:,.0f} MiB",
                extra={"peak_rss_mib": rss_mib, "cpu_s": child["cpu_s"]},
            )
        )
        per_row.append(child["seconds"] / child["rows"])
    if len(per_row) >= 2:
        res.ratio(
            "scaling: cost per row, largest / smallest size", per_row[-1] / per_row[0], 1.5, False
        )


def raw_parse_options(table: str) -> pacsv.ParseOptions:
    """How the raw ``read_csv`` a table's dry run is measured against parses its file: the
    wide table's has quoted newlines, which Arrow reads only when told to."""
    return pacsv.ParseOptions(newlines_in_values=table == WIDE_TABLE)


def child_dry_run(
    path: Path, schema_path: Path, repeat: int = 1, raw: bool = False, table: str = TABLE
) -> None:
    """Child: ``repeat`` dry-run loads of ``table`` (with ``raw``, each after a raw
    single-threaded ``read_csv`` of the same file, :func:`raw_parse_options`), timings printed
    as JSON on stdout.

    The first load of a process runs on memory the process has never touched, which costs
    much more on these VMs than reusing it (see benchmarks/README.md "Fresh memory"); it is
    reported apart (``first_seconds``) from the best run (``seconds``).
    """
    from loader import load

    schema = pickle.loads(schema_path.read_bytes())
    cfg = load_config(path, table=table, dry_run=True)
    parse = raw_parse_options(table)
    runs: list[float] = []
    raws: list[float] = []
    rows = 0
    with pyarrow_threads(1 if raw else None):
        for _ in range(max(1, repeat)):
            if raw:
                opts = pacsv.ReadOptions(use_threads=False, block_size=16 << 20)
                t0 = time.perf_counter()
                parsed = pacsv.read_csv(path, read_options=opts, parse_options=parse)
                raws.append(time.perf_counter() - t0)
                del parsed
            t0 = time.perf_counter()
            report = load(cfg, database=object(), schemas={table: schema})
            runs.append(time.perf_counter() - t0)
            rows = report.tables[0].rows_read
    out: dict[str, Any] = {
        "rows": rows,
        "seconds": min(runs),
        "first_seconds": runs[0],
        "hwm_kib": _vm_hwm(),
    }
    if raw:
        out["raw_seconds"] = min(raws)
    print(json.dumps(out))


def _vm_hwm() -> int:
    """This process's peak RSS in KiB (VmHWM: unlike ru_maxrss it is not inherited from the
    parent across fork + exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


# ---------------------------------------------------------------------------------------------
# Driver


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__.splitlines()[0]
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="rows for sections 1, 3 and 4")
    p.add_argument("--e2e-rows", type=int, default=50_000, help="rows for section 2 (emulator)")
    p.add_argument("--json", type=Path, help="write the results here as JSON")
    p.add_argument("--quick", action="store_true", help="skip the 10M-row scaling point")
    p.add_argument(
        "--scaling-sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        help="comma-separated row counts for section 5 (default 100000,1000000,10000000)",
    )
    p.add_argument("--sections", default="1,2,3,4,5,6,7", help="which sections to run, e.g. 1,4")
    p.add_argument(
        "--startup-baseline",
        type=Path,
        help="section 7: also measure this source tree (e.g. a worktree of main)",
    )
    p.add_argument("--repeat", type=int, default=2, help="best of N for the in-process timings")
    p.add_argument("--client-sample", type=int, default=100_000, help="rows for the client encoder")
    p.add_argument("--single-row-cap", type=int, default=2_000, help="rows for 1 row per commit")
    p.add_argument("--naive-null-cap", type=int, default=200_000, help="naive rows, null server")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "spanner-loader-bench",
        help="where generated CSVs are kept between runs",
    )
    p.add_argument("--child-dry-run", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-schema", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--child-repeat", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--child-raw", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-table", default=TABLE, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run(a: argparse.Namespace) -> Results:
    """Run the selected sections; return every figure and ratio."""
    from loader.emulator import start_emulator
    from loader.schema import read_schemas

    sections = {int(s) for s in a.sections.split(",") if s}
    res = Results()
    res.info = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "cpus": os.cpu_count(),
        "pyarrow_cpu_count": pa.cpu_count(),
        "machine": platform.machine(),
        "load_average_at_start": os.getloadavg(),
        "rows": a.rows,
        "e2e_rows": a.e2e_rows,
    }
    a.data_dir.mkdir(parents=True, exist_ok=True)
    path = orders_file(a.data_dir, a.rows)
    saved = os.environ.get("SPANNER_EMULATOR_HOST")
    emulator = start_emulator()
    try:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
        # the reference schema, read back from the emulator as a real load would
        shop = spanner_database(f"shop-{os.getpid() % 10000}")
        schema = read_schemas(shop, [TABLE])[TABLE]
        # the emulator's Orders has no interleave parent; the pipeline sections use shop.sql's
        schema_path = a.data_dir / f"orders-schema-{os.getpid()}.pickle"
        schema_path.write_bytes(pickle.dumps(schema))
        if 1 in sections:
            section_pipeline(res, path, a.rows, schema, schema_path, a)
        if 2 in sections:
            section_emulator(res, orders_file(a.data_dir, a.e2e_rows), a.e2e_rows, a)
        if 6 in sections:
            wide = spanner_database(f"wide-{os.getpid() % 10000}", WIDE_DDL.read_text())
            wide_schema = read_schemas(wide, [WIDE_TABLE])[WIDE_TABLE]
            wide_schema_path = a.data_dir / f"wide-schema-{os.getpid()}.pickle"
            wide_schema_path.write_bytes(pickle.dumps(wide_schema))
            try:
                section_wide(
                    res, wide_file(a.data_dir, a.rows), a.rows, wide_schema, wide_schema_path, a
                )
            finally:
                wide_schema_path.unlink(missing_ok=True)
        if 7 in sections:
            from benchmarks.startup import STARTUP_DDL, section_startup

            startup = spanner_database(f"startup-{os.getpid() % 10000}", STARTUP_DDL)
            section_startup(res, startup, a.data_dir, a.repeat, a.startup_baseline)
    finally:
        emulator.stop()
        if saved is None:
            os.environ.pop("SPANNER_EMULATOR_HOST", None)
        else:
            os.environ["SPANNER_EMULATOR_HOST"] = saved
    try:
        if 3 in sections:
            section_null(res, path, a.rows, schema, a)
        if 4 in sections:
            section_batching(res, path, a.rows, schema)
        if 5 in sections:
            sizes = a.scaling_sizes or [100_000, 1_000_000] + ([] if a.quick else [10_000_000])
            section_scaling(res, a.data_dir, schema_path, sizes, a)
    finally:
        schema_path.unlink(missing_ok=True)
    res.info["load_average_at_end"] = os.getloadavg()
    return res


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parse_args(argv)
    if a.child_dry_run:
        child_dry_run(a.child_dry_run, a.child_schema, a.child_repeat, a.child_raw, a.child_table)
        # Its figures are out: leave without interpreter teardown, which aborted this child
        # once in CI ("terminate called without an active exception", Arrow's threads winding
        # down; apache/arrow#34314), as it did test_source's measuring child.
        sys.stdout.flush()
        os._exit(0)
    res = run(a)
    print()
    print(res.render())
    if a.json:
        a.json.write_text(json.dumps(res.to_json(), indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
