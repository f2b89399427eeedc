"""One table's load as an Apache Beam pipeline (imported only when ``--runner`` is given).

    ranges (planned here) -> read + convert + encode each range (elements are blocks)
      -> sample keys (deterministic) -> key-range boundaries (a side input)
      -> each block's rows keyed by key range -> GroupByKey
      -> per key range: sort, de-duplicate, batch (Buffer), commit exactly once (markers)

The steps' work is in :mod:`loader.beam.work`; this module only wires it into Beam.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from ..config import LoadConfig
from ..plan import ByteRange
from ..rejects import Reject
from ..schema import TableSchema
from ..source.gcs import EMULATOR_ENV as STORAGE_EMULATOR_ENV
from . import limits, work
from .results import ResultFolder

NAMESPACE = "spanner-loader"
REJECTS = "rejects"
RANGES = "ranges"
READ_REJECTS = "read_rejects"


@dataclass(frozen=True)
class BeamJob:
    """Everything a worker needs (pickled with the pipeline)."""

    config: LoadConfig
    schema: TableSchema
    sources: tuple[str, ...]
    run_id: str
    columns: Optional[tuple[str, ...]]
    sample_every: int
    key_ranges: int
    emulator_host: Optional[str]
    fail_after_commit: Optional[str] = None
    """Tests: a file; while it does not exist, the first key range committed creates it and
    raises (a bundle that fails after its commits landed)."""
    stored_bounds: Optional[dict[str, Any]] = None
    """The key-range boundaries an earlier run stored (:data:`work.BOUNDS_PART`): reused, not
    sampled again."""
    results: str = ""
    """This launch's results folder (:mod:`loader.beam.results`), local or ``gs://``."""
    storage_emulator_host: Optional[str] = None
    committing: int = 1
    """Key ranges that may commit at once: the throttle's share is the job's limits divided
    by this (:func:`loader.beam.limits.committers`)."""


def _worker_env(job: BeamJob) -> None:
    """A worker talks to the emulators the launcher was pointed at (tests, local runs)."""
    if job.emulator_host:
        os.environ.setdefault("SPANNER_EMULATOR_HOST", job.emulator_host)
    if job.storage_emulator_host:
        os.environ.setdefault(STORAGE_EMULATOR_ENV, job.storage_emulator_host)


SOURCE_ROWS = "rows_read/"
"""The counter of one source's rows read: this, then its index."""


class _Read(beam.DoFn):  # type: ignore[misc]
    def __init__(self, job: BeamJob) -> None:
        self.job = job
        self.rows = Metrics.counter(NAMESPACE, "rows_read")

    def setup(self) -> None:
        _worker_env(self.job)
        self.results = ResultFolder(self.job.results)

    def process(self, element: tuple[int, ByteRange]) -> Iterator[Any]:
        index, rng = element
        found: list[Reject] = []
        of_source = Metrics.counter(NAMESPACE, f"{SOURCE_ROWS}{index}")  # the report's per file
        for block, rejects in work.read_blocks_of(
            index, rng, self.job.schema, self.job.config, self.job.columns
        ):
            read = (block.table.num_rows if block else 0) + len(rejects)
            self.rows.inc(read)
            of_source.inc(read)
            found.extend(rejects)
            if block is not None:
                yield block
        if found:  # named after the range: a re-run bundle overwrites its own file
            name = f"{REJECTS}-read-{index:06d}-{rng.index:06d}.jsonl"
            self.results.write(name, [asdict(r) for r in found])
            # counted before the GroupByKey: the commit step knows the total before it writes
            yield beam.pvalue.TaggedOutput(READ_REJECTS, len(found))


def _connect(job: BeamJob) -> Any:
    _worker_env(job)
    from ..connection import make_client

    t = job.config.target
    return make_client(t.project).instance(t.instance).database(t.database)


class _Commit(beam.DoFn):  # type: ignore[misc]
    def __init__(self, job: BeamJob) -> None:
        self.job = job
        self.written = Metrics.counter(NAMESPACE, "rows_written")
        self.skipped = Metrics.counter(NAMESPACE, "rows_skipped")
        self.commits = Metrics.counter(NAMESPACE, "commits")
        self.retries = Metrics.counter(NAMESPACE, "retries")
        self.superseded = Metrics.counter(NAMESPACE, "rows_superseded")
        self.key_skipped = Metrics.counter(NAMESPACE, "rows_key_skipped")
        self.runs = Metrics.counter(NAMESPACE, "spilled_runs")
        self.max_mutations = Metrics.distribution(NAMESPACE, "mutations_per_commit")
        self.latency_ms = Metrics.distribution(NAMESPACE, "commit_latency_ms")
        self.held = Metrics.counter(NAMESPACE, "ranges_held")

    def setup(self) -> None:
        from ..commit import SpannerCommitter
        from ..resume.stores import SpannerStateStore

        cfg = self.job.config
        self.database = _connect(self.job)
        self.committer = SpannerCommitter(
            self.database, priority=cfg.priority, max_commit_delay_ms=cfg.max_commit_delay_ms
        )
        self.store = SpannerStateStore(self.database)
        self.results = ResultFolder(self.job.results)
        self.throttle, self.limiter = limits.worker_brakes(
            _brakes_key(self.job), cfg, self.job.committing
        )

    def process(
        self, element: tuple[int, Iterable[work.Block]], read_rejects: int = 0
    ) -> Iterator[Any]:
        key_range, blocks = element
        job = self.job
        if limits.over_limit(read_rejects, job.config.max_bad_rows):
            self.held.inc()  # over max_bad_rows before any commit: this range commits nothing
            return
        result = work.commit_range(
            key_range,
            blocks,  # iterated once: a key range over the budget is sorted in runs on disk
            schema=job.schema,
            config=job.config,
            sources=job.sources,
            committer=self.committer,
            store=self.store,
            run_id=job.run_id,
            concurrency=job.config.concurrency or 1,
            throttle=self.throttle,
            limiter=self.limiter,
        )
        self.written.inc(result.rows_written)
        self.skipped.inc(result.rows_skipped)
        self.commits.inc(result.commits)
        self.retries.inc(result.retries)
        self.superseded.inc(result.superseded)
        self.key_skipped.inc(result.key_skipped)
        self.runs.inc(result.runs)
        for m in result.mutations:
            self.max_mutations.update(m)
        for s in result.latencies:
            self.latency_ms.update(int(round(s * 1000)))
        if job.fail_after_commit and not os.path.exists(job.fail_after_commit):
            Path(job.fail_after_commit).write_text(str(key_range))
            raise RuntimeError(f"injected fault after key range {key_range}'s commits")
        if result.rejects:
            name = f"{REJECTS}-commit-{key_range:06d}.jsonl"
            self.results.write(name, [asdict(r) for r in result.rejects])
        settled = round(self.limiter.stats().settled, 1) if result.commits else None
        record = limits.range_record(
            key_range, result.mutations, result.latencies, result.bytes, settled
        )
        self.results.write(f"{RANGES}-{key_range:06d}.jsonl", [record])
        yield key_range


def _brakes_key(job: BeamJob) -> tuple[Any, ...]:
    """One launch's table (its results folder is its own): one throttle and one limiter per
    worker process for it."""
    return (job.run_id, job.schema.name, job.results)


def _boundaries(samples: list[Any], schema: TableSchema, ranges: int) -> Any:
    return work.boundaries(samples, schema, ranges)


def _keep_boundaries(bounds: Any, job: BeamJob) -> Any:
    """The boundaries, stored in the job's state (the first run's are kept and reused)."""
    from ..resume.stores import SpannerStateStore

    store = SpannerStateStore(_connect(job))
    return work.keep_bounds(store, job.run_id, job.schema.name, bounds, job.key_ranges)


def _stored_boundaries(_: Any, stored: dict[str, Any]) -> Any:
    return work.bounds_from_state(stored)


def pipeline_options(runner: str, options: Sequence[tuple[str, str]]) -> PipelineOptions:
    """Beam options from ``--runner`` and ``--beam-option k=v``. The DirectRunner is kept off
    Prism (a binary it would download) unless an option says otherwise: ``allow_unsafe_triggers``
    is what makes Beam 2.77's DirectRunner skip it (this pipeline has no triggers). Local file
    options (``setup_file``, ``requirements_file``) are made absolute: Beam's stager changes into
    the setup file's folder, which for a bare ``setup.py`` is the empty string."""
    options = [(k, _local_path(v) if k in PATH_OPTIONS else v) for k, v in options]
    args = [f"--runner={runner}"] + [f"--{k}={v}" if v != "" else f"--{k}" for k, v in options]
    if runner == "DirectRunner" and not any(k.startswith("allow_unsafe") for k, _ in options):
        args.append("--allow_unsafe_triggers")
    return PipelineOptions(args)


PATH_OPTIONS = ("setup_file", "requirements_file")


def _local_path(value: str) -> str:
    return value if "://" in value or not value else os.path.abspath(value)


@dataclass
class BeamOutcome:
    counters: dict[str, int]
    mutations: list[int]
    """Mutations of each commit (rows x cells, without the marker)."""
    rejects: list[Reject]
    commits: limits.CommitTotals = field(default_factory=limits.CommitTotals)
    """The key ranges' commit latencies, bytes and settled concurrency, merged."""


def run(
    job: BeamJob,
    ranges: Sequence[ByteRange],
    source_index: dict[str, int],
    runner: str,
    options: Sequence[tuple[str, str]] = (),
    storage_client: Any = None,
) -> BeamOutcome:
    """Build and run the pipeline for one table; its counters, and the rejects and commit
    counts its workers left in ``job.results`` (or, when that is empty, a temporary directory
    of this process: local runners only)."""
    with tempfile.TemporaryDirectory(prefix="spanner-loader-beam-") as tmp:
        if not job.results:
            job = replace(job, results=tmp)
        results = ResultFolder(job.results, storage_client)
        try:
            counters = _run(job, ranges, source_index, runner, options)
            rejects = [Reject(**d) for d in results.read(f"{REJECTS}-")]
            totals = limits.merge(results.read(f"{RANGES}-"))
        finally:
            results.delete()
            limits.forget_brakes(_brakes_key(job))  # a local runner's workers are this process
    rejects.sort(key=lambda r: (source_index.get(r.source, 0), r.record or 0))
    return BeamOutcome(counters, totals.mutations, rejects, totals)


def _run(
    job: BeamJob,
    ranges: Sequence[ByteRange],
    source_index: dict[str, int],
    runner: str,
    options: Sequence[tuple[str, str]],
) -> dict[str, int]:
    schema = job.schema
    p = beam.Pipeline(options=pipeline_options(runner, options))
    elements = [(source_index[r.source.uri], r) for r in ranges]
    read = (
        p
        | "Ranges" >> beam.Create(elements)
        | "Spread" >> beam.Reshuffle()
        | "Read" >> beam.ParDo(_Read(job)).with_outputs(READ_REJECTS, main="blocks")
    )
    blocks = read.blocks
    read_rejects = read[READ_REJECTS] | "ReadRejects" >> beam.CombineGlobally(sum)
    if job.stored_bounds is not None:
        bounds = (
            p
            | "Stored" >> beam.Create([0])
            | "StoredBoundaries" >> beam.Map(_stored_boundaries, job.stored_bounds)
        )
    else:
        bounds = (
            blocks
            | "Sample" >> beam.Map(work.sample_keys, schema, job.sample_every)
            | "Samples" >> beam.combiners.ToList()
            | "Boundaries" >> beam.Map(_boundaries, schema, job.key_ranges)
            | "KeepBoundaries" >> beam.Map(_keep_boundaries, job)
        )
    _ = (
        blocks
        | "ByKeyRange"
        >> beam.FlatMap(
            lambda b, bounds: work.split_block(b, bounds, schema),
            bounds=beam.pvalue.AsSingleton(bounds),
        )
        | "Group" >> beam.GroupByKey()
        | "Commit" >> beam.ParDo(_Commit(job), read_rejects=beam.pvalue.AsSingleton(read_rejects))
    )
    result = p.run()
    result.wait_until_finish()
    counters: dict[str, int] = {}
    for c in result.metrics().query()["counters"]:
        if c.key.metric.namespace == NAMESPACE:
            name = c.key.metric.name
            counters[name] = counters.get(name, 0) + int(c.committed or c.attempted or 0)
    return counters
