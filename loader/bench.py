"""Step-load benchmark: how fast can this database take writes, and at what concurrency?

The method cloud database teams use to tell sustained from peak throughput: write the same
amount of data at increasing concurrency (1, 2, 4, ... N commits in flight) and watch rows/s and
commit latency per step. Throughput grows with concurrency until the database (its nodes, its
splits) is the bottleneck; past that knee more concurrency only adds latency and ABORTED
push-back. The smallest concurrency that reaches ~90% of the peak is what ``--concurrency``
should be for a load that keeps latency down for everyone else.

What a step does is what a load's commit stage does, minus reading files:

* rows are generated in columnar form (numpy), with keys spread over the whole INT64 range (a
  multiplicative hash of a counter: unique, and not monotonic, so writes do not all land on the
  last split, as Spanner's schema guidance asks);
* they are sorted by key and cut into batches of ``batch_rows`` contiguous keys, so each commit
  touches few splits (Spanner's bulk-loading advice);
* encoded with :func:`loader.encode.encode_rows` / :func:`~loader.encode.write_mutation` and sent
  as ``insert_or_update`` through :class:`loader.commit.SpannerCommitter` from a thread pool of
  the step's size;
* ABORTED (and other transient errors: an upsert is safe to repeat) are retried with a short
  jittered sleep and counted; the emulator aborts every concurrent commit, a busy instance
  some.

Steps write disjoint keys into a scratch table (:data:`BENCH_TABLE`, created with
``update_ddl``, dropped at the end unless ``keep=True``); at the end its rows are counted, so
the report proves every generated row was written exactly once.

Caveat: a new table starts as one split and Spanner splits it under load, so the first steps of
a small bench run on fewer splits than a long load would (use ``warmup_rows`` or large steps to
measure the sustained figure on a real instance). The emulator runs one read-write transaction
at a time: its numbers only check the machinery, they say nothing about Spanner.
"""

from __future__ import annotations

import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np
import pyarrow as pa

from .commit import Committer, SpannerCommitter
from .commit.errors import TRANSIENT, is_aborted
from .encode import encode_rows, write_mutation
from .errors import CommitError, ConfigError, option
from .report import percentile
from .types import SpannerType

__all__ = [
    "BENCH_TABLE",
    "BenchReport",
    "StepResult",
    "bench_ddl",
    "cost_per_million_rows",
    "default_steps",
    "generate_rows",
    "parse_steps",
    "run_bench",
    "run_step",
]

#: The scratch table's default name (the loader's own tables are named SpannerLoader*).
BENCH_TABLE = "SpannerLoaderBench"
BENCH_COLUMNS = ("Id", "Step", "Amount", "Label", "Payload")
_LABEL_CHARS = 16
_MAX_MUTATIONS = 80_000  # Spanner's per-commit limit (SPANNER_FACTS.md)
# An odd 64-bit constant (2^64 / golden ratio): i -> i * K mod 2^63 is a bijection, so keys
# are unique while consecutive counters land far apart in the key space.
_SPREAD = np.uint64(0x9E3779B97F4A7C15)
_MASK63 = np.uint64((1 << 63) - 1)
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")


def bench_ddl(table: str = BENCH_TABLE) -> str:
    """CREATE TABLE statement of the scratch table."""
    return (
        f"CREATE TABLE {table} (Id INT64 NOT NULL, Step INT64 NOT NULL, Amount FLOAT64, "
        f"Label STRING({_LABEL_CHARS}), Payload STRING(MAX)) PRIMARY KEY (Id)"
    )


_TYPES = (
    SpannerType("INT64"),
    SpannerType("INT64"),
    SpannerType("FLOAT64"),
    SpannerType("STRING", _LABEL_CHARS),
    SpannerType("STRING"),
)


def default_steps(max_concurrency: int) -> list[int]:
    """1, 2, 4, ... up to and including ``max_concurrency``."""
    if max_concurrency < 1:
        raise ConfigError("the bench's maximum concurrency must be at least 1")
    steps = []
    c = 1
    while c < max_concurrency:
        steps.append(c)
        c *= 2
    steps.append(max_concurrency)
    return steps


def parse_steps(text: str) -> list[int]:
    """``"1,8,16"`` -> [1, 8, 16] (the CLI's --steps); ConfigError for anything else."""
    try:
        steps = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        steps = []
    if not steps or any(c < 1 for c in steps):
        raise ConfigError(
            f"not a list of concurrency steps: {text!r}", hint="e.g. `steps='1,2,4,8,16'`"
        )
    return steps


def cost_per_million_rows(
    rows_per_s: float, node_count: Optional[float], node_hour_price: Optional[float]
) -> Optional[float]:
    """What writing a million rows costs at this rate: node-hours used x price per node-hour.

    ``node_hour_price * node_count / (rows_per_s * 3600) * 1e6``; None without a price, a node
    count or a positive rate.
    """
    if node_count is None or node_hour_price is None or rows_per_s <= 0:
        return None
    return node_hour_price * node_count / (rows_per_s * 3600) * 1e6


def _random_text(rng: np.random.Generator, n: int, width: int) -> pa.Array:
    """n random lower-case ASCII strings of ``width`` characters, built from two buffers."""
    data = rng.integers(ord("a"), ord("z") + 1, size=n * width, dtype=np.uint8)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    return pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    ).cast(pa.string())


def generate_rows(
    first: int, n: int, step: int, payload_bytes: int, rng: np.random.Generator
) -> pa.Table:
    """Rows ``first .. first+n-1`` of the bench, sorted by their (spread) key."""
    seq = np.arange(first, first + n, dtype=np.uint64)
    ids = np.sort(((seq * _SPREAD) & _MASK63).astype(np.int64))
    return pa.table(
        {
            "Id": ids,
            "Step": np.full(n, step, dtype=np.int64),
            "Amount": rng.random(n) * 1000,
            "Label": _random_text(rng, n, _LABEL_CHARS),
            "Payload": _random_text(rng, n, payload_bytes),
        }
    )


@dataclass
class StepResult:
    """One step: ``rows`` written by ``concurrency`` commit threads in ``elapsed_s``."""

    concurrency: int
    rows: int
    commits: int
    elapsed_s: float
    aborted: int = 0
    """Commit attempts answered ABORTED (each was retried)."""
    retries: int = 0
    """Commit attempts retried, for any transient error (ABORTED included)."""
    latencies_s: list[float] = field(default_factory=list, repr=False)
    """Latency of each successful commit attempt."""
    node_count: Optional[float] = None
    node_hour_price: Optional[float] = None

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def rows_per_s_per_node(self) -> Optional[float]:
        return self.rows_per_s / self.node_count if self.node_count else None

    @property
    def cost_per_million_rows(self) -> Optional[float]:
        return cost_per_million_rows(self.rows_per_s, self.node_count, self.node_hour_price)

    def latency_ms(self, q: float) -> float:
        """Commit latency percentile (nearest rank), in milliseconds."""
        return percentile(self.latencies_s, q) * 1000

    def line(self) -> str:
        """One line for progress output."""
        return (
            f"concurrency {self.concurrency}: {self.rows_per_s:,.0f} rows/s, commit p50 "
            f"{self.latency_ms(50):.1f} ms, p99 {self.latency_ms(99):.1f} ms, "
            f"{self.aborted:,} aborted"
        )

    def to_dict(self) -> dict[str, Any]:
        per_node = self.rows_per_s_per_node
        cost = self.cost_per_million_rows
        return {
            "concurrency": self.concurrency,
            "rows": self.rows,
            "commits": self.commits,
            "elapsed_s": round(self.elapsed_s, 3),
            "rows_per_s": round(self.rows_per_s, 1),
            "rows_per_s_per_node": None if per_node is None else round(per_node, 1),
            "commit_latency_ms": {
                "p50": round(self.latency_ms(50), 2),
                "p99": round(self.latency_ms(99), 2),
            },
            "aborted": self.aborted,
            "retries": self.retries,
            "cost_per_million_rows": None if cost is None else round(cost, 6),
        }


@dataclass
class BenchReport:
    """Every step of a bench run, and what the table held at the end."""

    table: str
    rows_per_step: int
    batch_rows: int
    steps: list[StepResult] = field(default_factory=list)
    node_count: Optional[float] = None
    node_hour_price: Optional[float] = None
    warmup_rows: int = 0
    table_rows: Optional[int] = None
    """Rows counted in the scratch table after the last step, warm-up included."""
    dropped: bool = False
    notes: list[str] = field(default_factory=list)
    """E.g. that commits went through the client's public batch API (see commit/spanner.py)."""

    @property
    def rows_written(self) -> int:
        return sum(s.rows for s in self.steps)

    @property
    def peak(self) -> Optional[StepResult]:
        """The step with the highest rows/s."""
        return max(self.steps, key=lambda s: s.rows_per_s, default=None)

    @property
    def knee(self) -> Optional[StepResult]:
        """The lowest-concurrency step within 90% of the peak: the concurrency to use."""
        peak = self.peak
        if peak is None:
            return None
        good = [s for s in self.steps if s.rows_per_s >= 0.9 * peak.rows_per_s]
        return min(good, key=lambda s: s.concurrency)

    def to_dict(self) -> dict[str, Any]:
        peak, knee = self.peak, self.knee
        return {
            "schema_version": 1,
            "table": self.table,
            "rows_per_step": self.rows_per_step,
            "batch_rows": self.batch_rows,
            "node_count": self.node_count,
            "node_hour_price": self.node_hour_price,
            "rows_written": self.rows_written,
            "warmup_rows": self.warmup_rows,
            "table_rows": self.table_rows,
            "dropped": self.dropped,
            "peak": None
            if peak is None
            else {"concurrency": peak.concurrency, "rows_per_s": round(peak.rows_per_s, 1)},
            "recommended_concurrency": None if knee is None else knee.concurrency,
            "steps": [s.to_dict() for s in self.steps],
            "notes": list(self.notes),
        }

    def render(self) -> str:
        """A table of the steps, then the peak and the recommended concurrency."""
        with_nodes = self.node_count is not None
        with_cost = with_nodes and self.node_hour_price is not None
        head = ["concurrency", "rows", "commits", "seconds", "rows/s"]
        if with_nodes:
            head.append("rows/s/node")
        head += ["p50 ms", "p99 ms", "aborted", "retries"]
        if with_cost:
            head.append("$/M rows")
        body = []
        for s in self.steps:
            row = [
                str(s.concurrency),
                f"{s.rows:,}",
                f"{s.commits:,}",
                f"{s.elapsed_s:.2f}",
                f"{s.rows_per_s:,.0f}",
            ]
            if with_nodes:
                row.append(f"{s.rows_per_s_per_node or 0:,.0f}")
            row += [f"{s.latency_ms(50):.1f}", f"{s.latency_ms(99):.1f}"]
            row += [f"{s.aborted:,}", f"{s.retries:,}"]
            if with_cost:
                cost = s.cost_per_million_rows
                row.append("-" if cost is None else f"{cost:.4f}")
            body.append(row)
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        lines = [
            f"bench: {self.rows_per_step:,} rows per step, {self.batch_rows:,} rows per commit, "
            f"table {self.table}" + (f", {self.node_count:g} node(s)" if with_nodes else ""),
            "  ".join(h.rjust(w) for h, w in zip(head, widths)),
        ]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in body]
        peak, knee = self.peak, self.knee
        if peak is not None and knee is not None:
            lines.append(
                f"peak {peak.rows_per_s:,.0f} rows/s at concurrency {peak.concurrency}; "
                f"90% of it from concurrency {knee.concurrency} "
                f"({option('concurrency', knee.concurrency)})"
            )
        if self.table_rows is not None:
            expected = self.rows_written + self.warmup_rows
            state = "ok" if self.table_rows == expected else "MISMATCH"
            lines.append(f"rows in table: {self.table_rows:,} of {expected:,} written ({state})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


class _Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.commits = 0
        self.aborted = 0
        self.retries = 0
        self.latencies: list[float] = []


def run_step(
    committer: Committer,
    table: str,
    rows: pa.Table,
    *,
    concurrency: int,
    batch_rows: int,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rng: Optional[random.Random] = None,
    max_retry_time: float = 120.0,
) -> StepResult:
    """Commit ``rows`` (sorted by key) in batches of ``batch_rows`` from ``concurrency`` threads.

    Each batch is one ``insert_or_update`` mutation; transient errors are retried with a short
    jittered sleep for up to ``max_retry_time`` per batch (then CommitError); permanent ones
    propagate. Elapsed time runs from the first submit to the last reply.
    """
    rng = rng or random.Random()
    columns = list(rows.column_names)
    encoded = encode_rows(rows.columns, list(_TYPES[: len(columns)]))
    counters = _Counters()

    def commit(start: int, n: int) -> None:
        # Building the Mutation in the worker keeps memory at one batch per thread; it costs
        # microseconds against a commit's milliseconds.
        mutation = write_mutation("insert_or_update", table, columns, encoded.slice(start, n))
        give_up = clock() + max_retry_time
        attempt = 0
        while True:
            t0 = clock()
            try:
                committer.commit([mutation])
            except TRANSIENT as e:
                attempt += 1
                with counters.lock:
                    counters.retries += 1
                    counters.aborted += is_aborted(e)
                if clock() >= give_up:
                    raise CommitError(
                        f"bench commit kept failing for {max_retry_time:.0f}s: "
                        f"{type(e).__name__}: {getattr(e, 'message', e)}",
                        hint="the database is overloaded; lower the bench's concurrency",
                    ) from e
                # Full jitter, capped low: the emulator aborts every concurrent commit, and
                # Spanner's ABORTED is about lock order, not load, so a long wait buys nothing.
                sleep(rng.uniform(0, min(0.2, 0.002 * 2**attempt)))
                continue
            latency = clock() - t0
            with counters.lock:
                counters.commits += 1
                counters.latencies.append(latency)
            return

    n = len(rows)
    started = clock()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench") as pool:
        futures = [pool.submit(commit, a, min(batch_rows, n - a)) for a in range(0, n, batch_rows)]
        try:
            for f in futures:
                f.result()
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    elapsed = clock() - started
    return StepResult(
        concurrency=concurrency,
        rows=n,
        commits=counters.commits,
        elapsed_s=elapsed,
        aborted=counters.aborted,
        retries=counters.retries,
        latencies_s=counters.latencies,
    )


def _table_columns(database: Any, table: str) -> Optional[tuple[str, ...]]:
    """The table's column names in order, or None when there is no such table."""
    from google.cloud.spanner_v1 import param_types

    with database.snapshot() as snap:
        rows = list(
            snap.execute_sql(
                "select column_name from information_schema.columns "
                "where table_schema = '' and table_name = @t order by ordinal_position",
                params={"t": table},
                param_types={"t": param_types.STRING},
            )
        )
    return tuple(r[0] for r in rows) or None


def _count_rows(database: Any, table: str) -> int:
    with database.snapshot() as snap:
        return int(next(iter(snap.execute_sql(f"select count(*) from {table}")))[0])


def run_bench(
    database: Any,
    *,
    rows_per_step: int,
    max_concurrency: int,
    steps: Optional[Sequence[int]] = None,
    batch_rows: int = 1000,
    node_count: Optional[float] = None,
    node_hour_price: Optional[float] = None,
    payload_bytes: int = 100,
    warmup_rows: int = 0,
    table: str = BENCH_TABLE,
    keep: bool = False,
    priority: Optional[str] = None,
    committer: Optional[Committer] = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    seed: Optional[int] = None,
    progress: Optional[Callable[[StepResult], None]] = None,
    max_retry_time: float = 120.0,
) -> BenchReport:
    """Step-load bench: write ``rows_per_step`` rows at each concurrency in ``steps``.

    ``database`` is a google-cloud-spanner Database. Creates the scratch table ``table`` (an
    existing one of that name is dropped first: it is the bench's own), optionally writes
    ``warmup_rows`` unmeasured rows at ``max_concurrency`` so Spanner starts splitting, runs
    each step (default 1, 2, 4, ... ``max_concurrency``) with fresh keys, counts the table's
    rows, and drops it unless ``keep``. ``node_count`` (nodes; 0.1 per 100 processing units)
    adds rows/s per node and, with ``node_hour_price``, the cost per million rows.
    ``progress`` is called with each finished step. ``committer`` replaces the
    SpannerCommitter (tests); DDL and the row count still go through ``database``.
    """
    plan = list(steps) if steps else default_steps(max_concurrency)
    if any(c < 1 for c in plan):
        raise ConfigError("bench concurrency steps must be at least 1")
    if rows_per_step < 1 or batch_rows < 1:
        raise ConfigError("rows per step and rows per commit must be at least 1")
    if batch_rows * len(BENCH_COLUMNS) > _MAX_MUTATIONS:
        raise ConfigError(
            f"{batch_rows:,} rows per commit is {batch_rows * len(BENCH_COLUMNS):,} mutations; "
            f"Spanner allows {_MAX_MUTATIONS:,}",
            hint=f"use at most {_MAX_MUTATIONS // len(BENCH_COLUMNS):,} rows per commit",
        )
    if payload_bytes < 0:
        raise ConfigError(f"payload bytes must be >= 0, not {payload_bytes}")
    if max(rows_per_step, warmup_rows) * payload_bytes >= 1 << 31:
        raise ConfigError("payload bytes x rows per step must stay under 2 GiB")
    if not _IDENT.match(table):
        raise ConfigError(f"not a table name: {table!r}", hint="letters, digits and _")
    if node_count is not None and node_count <= 0:
        raise ConfigError("node count must be positive (0.1 per 100 processing units)")

    from google.api_core.exceptions import GoogleAPICallError

    rng = np.random.default_rng(seed)
    jitter = random.Random(seed)
    sender = committer or SpannerCommitter(database, priority=priority, tag="spanner-loader-bench")
    report = BenchReport(
        table=table,
        rows_per_step=rows_per_step,
        batch_rows=batch_rows,
        node_count=node_count,
        node_hour_price=node_hour_price,
        warmup_rows=warmup_rows,
    )
    report.notes.extend(getattr(sender, "notes", []))
    existing = _table_columns(database, table)
    if existing is not None:
        if existing != BENCH_COLUMNS:
            raise ConfigError(
                f"table {table} exists and is not a bench table (columns {', '.join(existing)})",
                hint="the bench creates and drops its own scratch table: give an unused name",
            )
        # A scratch table left by an interrupted run or keep=True.
        database.update_ddl([f"DROP TABLE {table}"]).result(600)
    database.update_ddl([bench_ddl(table)]).result(600)
    try:
        first = 0

        def step(concurrency: int, n: int, label: int) -> StepResult:
            nonlocal first
            rows = generate_rows(first, n, label, payload_bytes, rng)
            first += n
            return run_step(
                sender,
                table,
                rows,
                concurrency=concurrency,
                batch_rows=batch_rows,
                clock=clock,
                sleep=sleep,
                rng=jitter,
                max_retry_time=max_retry_time,
            )

        if warmup_rows:
            step(max(plan), warmup_rows, 0)
        for concurrency in plan:
            result = step(concurrency, rows_per_step, concurrency)
            result.node_count = node_count
            result.node_hour_price = node_hour_price
            report.steps.append(result)
            if progress is not None:
                progress(result)
        report.table_rows = _count_rows(database, table)
    finally:
        if not keep:
            try:
                database.update_ddl([f"DROP TABLE {table}"]).result(600)
                report.dropped = True
            except GoogleAPICallError:
                # Do not hide the bench's own failure behind a cleanup one; the next run
                # drops the table before it starts.
                pass
    return report
