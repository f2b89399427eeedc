"""Beyond one machine: one table's load as an Apache Beam pipeline (``--runner``).

The launcher side (this module) expands the sources, plans the byte ranges
(:mod:`loader.plan`), makes sure the marker table exists and runs the pipeline
(:mod:`loader.beam.pipeline`, which alone imports ``apache_beam``: the base install never
does); the steps' work is in :mod:`loader.beam.work`. Without ``apache-beam`` installed,
asking for a runner is a one-line :class:`~loader.errors.ConfigError` with the pip hint.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

from ..batch import format_bytes
from ..config import LoadConfig, TableJob
from ..emulator import EMULATOR_HOST_ENV
from ..errors import ConfigError, Interrupted, LoaderError, TooManyBadRows
from ..plan import plan_ranges
from ..rejects import Reject, nothing_committed_hint
from ..report import SourceReport, TableReport
from ..resume.checkpoint import already_loaded
from ..resume.lease import Lease
from ..schema import TableSchema
from ..source import expand_sources, read_retry
from ..source.gcs import EMULATOR_ENV as STORAGE_EMULATOR_ENV
from .limits import committers, share_note
from .resume import (
    check_options,
    check_sources,
    committed_batches,
    finished,
    forget_run,
    forget_streams,
    record_finished,
    runs_before,
)

SAMPLE_PER_RANGE = 256
"""Sampled keys wanted per key range (the sample decides the boundaries)."""
ROW_BYTES_GUESS = 100
"""Bytes per CSV row assumed when sizing the sample from the input's size."""


def _import_pipeline() -> Any:
    try:
        from . import pipeline
    except ImportError as e:
        if "apache_beam" not in str(e) and getattr(e, "name", "") != "apache_beam":
            raise
        raise ConfigError(
            "--runner needs Apache Beam, which is not installed",
            hint="pip install 'spanner-loader[beam]'",
        ) from None
    return pipeline


def auto_key_ranges(config: LoadConfig, sources: Sequence[Any], byte_ranges: int) -> int:
    """Key ranges when ``--key-ranges`` is not given: one per byte range, more when the input
    would not fit in the per-key-range budget (``--buffer-size``) otherwise
    (:func:`loader.beam.spill.key_ranges_for`)."""
    from .spill import key_ranges_for

    plain = sum(s.size or 0 for s in sources if not s.compression)
    packed = sum(s.size or 0 for s in sources if s.compression)
    return key_ranges_for(plain, packed, config.buffer_size, byte_ranges)


def held_note(table: str, held: int, max_bad_rows: int, store: Any, run_id: str) -> str:
    """The report's note when the read step's rejects stopped every commit; it says what an
    earlier run of the same job left committed (a resume commits nothing more either)."""
    earlier = committed_batches(store, run_id, table)
    before = (
        f"; {earlier:,} batch(es) an earlier run of this job committed stay in the table"
        if earlier
        else ""
    )
    return (
        f"{table}: nothing committed by this run: more than {max_bad_rows:,} "
        f"row{'s were' if max_bad_rows != 1 else ' was'} rejected "
        f"while reading, so none of its {held} key range(s) committed{before}"
    )


@contextlib.contextmanager
def _leased(store: Any, run_id: str, table: str, notes: Optional[list[str]]) -> Iterator[Lease]:
    """The job's lease, held while its pipeline runs: one run of a job at a time, as on the
    single-process path (loader.resume.lease); a second run stops with exit 7 instead of
    running the pipeline beside the first."""
    lease = Lease(store, run_id, table)
    lease.acquire()
    if notes is not None:
        notes.extend(lease.notes)
    try:
        yield lease
    finally:
        lease.release()


_STEP = re.compile(r"( \[while running '[^']*'\])+$")
"""What Beam adds to the message of an error raised in a step, which names its own parts."""


def _without_step(e: LoaderError) -> LoaderError:
    """``e`` as the loader raised it in a worker: its message without Beam's step name (a
    tryout: "... not in table Items: 'Notes' [while running 'Read/ParDo(_Read)']")."""
    message = _STEP.sub("", e.message or "")
    if message == e.message:
        return e
    out = copy.copy(e)
    out.message = message
    out.args = (message, *e.args[1:])
    return out


def pipeline_failed(e: Exception, table: str, again: str) -> LoaderError:
    """One line for a pipeline that failed on a worker: runners re-raise a worker's error as
    text (a RuntimeError naming its class), so a loader error keeps its exit code by name, and
    a second Ctrl-C (KeyboardInterrupt inside a step) is an interruption (exit 5)."""
    from .. import errors

    text = (str(e) or type(e).__name__).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    if "KeyboardInterrupt" in line:
        return Interrupted(
            f"stopped by a signal while the Beam pipeline loaded {table} (run {again} to resume)",
            hint=f"batches committed are recorded; running {again} skips them",
        )
    hint = f"run {again} to resume (batches committed are skipped); -v shows the workers' log"
    if isinstance(e, LoaderError):  # the worker's own error, copied by the runner
        out = copy.copy(e)
        out.message = f"{table}: the Beam pipeline failed: {line}"
        out.args = (out.message, *e.args[1:])
        out.hint = e.hint or hint
        return out
    name = line.split(":", 1)[0].strip()
    cls = getattr(errors, name, None)
    out = (
        cls(f"{table}: the Beam pipeline failed: {line}")
        if isinstance(cls, type) and issubclass(cls, LoaderError)
        else LoaderError(f"{table}: the Beam pipeline failed: {line}")
    )
    out.hint = hint
    return out


def check_beam(config: Optional[LoadConfig] = None) -> None:
    """ConfigError (with the pip hint) unless Apache Beam can be imported; with ``config``,
    also unless its runner, Beam options and results folder make sense (loader/beam/checks.py)."""
    _import_pipeline()
    if config is not None and config.runner is not None:
        from . import checks

        checks.check_runner(config.runner)
        checks.check_options(config.runner, config.beam_options)
        checks.check_results(config.beam_results)


def load_table(
    config: LoadConfig,
    job: TableJob,
    schema: TableSchema,
    database: Any,
    run_id: str,
    treport: TableReport,
    reject: Callable[[Reject], None],
    storage_client: Any = None,
    notes: Optional[list[str]] = None,
    load_id: str = "",
    starting: Optional[Callable[[], None]] = None,
) -> None:
    """Load ``job`` (one table) with the Beam runner ``config.runner``; fill ``treport``
    (``load_id``: this invocation's, recorded with the job's runs; ``starting``: called just
    before the pipeline runs, once the job is found to need it)."""
    from ..resume.stores import SpannerStateStore
    from .results import default_location, launch_folder
    from .work import BOUNDS_PART

    beam_pipeline = _import_pipeline()
    assert config.runner is not None
    location = default_location(config.runner, config.beam_options, config.beam_results)
    retry = read_retry(config.max_retry_time)
    sources, found_notes = expand_sources(job.sources, storage_client=storage_client, retry=retry)
    if notes is not None:
        notes.extend(found_notes)
    from .checks import check_readable

    check_readable(config.runner, sources)
    dialect = config.dialect_of(job)
    ranges = plan_ranges(sources, dialect, target=config.range_size, storage_client=storage_client)
    treport.sources = [
        SourceReport(
            uri=s.uri, generation=None if s.generation is None else str(s.generation), size=s.size
        )
        for s in sources
    ]
    store = SpannerStateStore(database)
    store.ensure()  # the marker table, before any worker commits
    with _leased(store, run_id, schema.name, notes) as lease:
        if config.restart:  # from scratch: the batch markers and the stored boundaries go
            store.delete_prefix(run_id, schema.name, "beam/")
        forget_streams(store, run_id, schema.name, config.refuses_rewrites, sources, notes)
        check_sources(store, run_id, schema.name, sources)  # a resume over changed data: refused
        check_options(store, run_id, schema.name, config, job)  # and over other options
        earlier = finished(store, run_id, schema.name, config, job, sources)
        if earlier is not None:  # as a single-process checkpoint finds a finished job
            if notes is not None:
                notes.append(
                    already_loaded(schema.name, earlier.rejects, earlier.gone, earlier.reject_files)
                )
            treport.rows_rejected_before = earlier.rejects  # the exit code tells them again
            treport.earlier_load_ids = list(earlier.load_ids)
            for s in treport.sources:
                s.status = "done"
            return
        before = runs_before(store, run_id, schema.name, load_id)
        batches = committed_batches(store, run_id, schema.name)
        if batches:  # a resume
            treport.earlier_load_ids = list(before)
            if notes is not None:
                notes.append(
                    f"{schema.name}: resuming run {run_id}"
                    + (f" (load_id {', '.join(before)} before)" if before else "")
                    + ": the batches earlier runs committed are not written again"
                )
        total = sum(s.size or 0 for s in sources)
        key_ranges = config.key_ranges or auto_key_ranges(config, sources, len(ranges))
        stored = store.get(run_id, schema.name, BOUNDS_PART)
        if stored is not None:  # a resume: the first run's boundaries, so its batches keep names
            key_ranges = int(stored.get("key_ranges", key_ranges))
            if notes is not None:
                notes.append(
                    f"{schema.name}: {key_ranges} key range(s) as stored by the job's first run "
                    "(or from its --presplit sample): their boundaries are reused"
                )
        sample_every = max(1, total // ROW_BYTES_GUESS // (key_ranges * SAMPLE_PER_RANGE))
        committing = committers(config.runner, config.beam_options, key_ranges)
        if notes is not None and (config.max_rows_per_second or config.max_bytes_per_second):
            notes.append(share_note(schema.name, config, committing, key_ranges))
        bjob = beam_pipeline.BeamJob(
            config=config,
            schema=schema,
            sources=tuple(s.uri for s in sources),
            run_id=run_id,
            columns=job.columns,
            sample_every=sample_every,
            key_ranges=key_ranges,
            emulator_host=os.environ.get(EMULATOR_HOST_ENV),
            fail_after_commit=os.environ.get("SPANNER_LOADER_BEAM_FAULT"),
            results=launch_folder(location, run_id, schema.name) if location else "",
            storage_emulator_host=os.environ.get(STORAGE_EMULATOR_ENV),
            stored_bounds=stored,
            committing=committing,
        )
        index = {s.uri: i for i, s in enumerate(sources)}
        if starting is not None:
            starting()
        try:
            outcome = beam_pipeline.run(
                bjob,
                ranges,
                index,
                config.runner,
                config.beam_options,
                storage_client=storage_client,
            )
        except LoaderError as e:
            raise _without_step(e) from None
        except Exception as e:  # noqa: BLE001 - a worker's error, as the runner re-raises it
            raise pipeline_failed(e, schema.name, config.again(schema)) from e
        # a run that committed nothing is none of the job's runs (as a checkpoint's); not
        # asked after a failure, whose store may not answer (a review)
        if load_id and committed_batches(store, run_id, schema.name) == batches:
            forget_run(store, run_id, schema.name, before)
        over: Optional[TooManyBadRows] = None
        for r in outcome.rejects:  # every one goes to the reject file, the first over the limit
            try:  # is the error's
                reject(r)
            except TooManyBadRows as e:
                over = over or e
        c = outcome.counters
        treport.rows_read = c.get("rows_read", 0)
        treport.rows_written = c.get("rows_written", 0)
        treport.rows_skipped = c.get("rows_skipped", 0)
        treport.rows_superseded = c.get("rows_superseded", 0)
        treport.count_key_skips(config.mode, c.get("rows_key_skipped", 0))
        treport.commits = c.get("commits", 0)
        treport.retries = c.get("retries", 0)
        treport.mutations = list(outcome.mutations)
        treport.latencies_s = list(outcome.commits.latencies_s)
        treport.bytes = outcome.commits.bytes
        treport.concurrency = outcome.commits.concurrency
        held = c.get("ranges_held", 0)
        if held and notes is not None:
            notes.append(held_note(schema.name, held, config.max_bad_rows, store, run_id))
        if over is not None:
            if held and not committed_batches(store, run_id, schema.name):
                # nothing of the job is committed: the same command loads a fixed file as it is
                over.hint = nothing_committed_hint(config.rejects, schema.name)
            raise over
        lease.check()  # a run that lost the lease (paused past it) does not record the end
        record_finished(
            store, run_id, schema.name, config, job, sources, len(outcome.rejects), load_id
        )
        for i, s in enumerate(treport.sources):
            s.status = "done"
            s.rows = c.get(f"{beam_pipeline.SOURCE_ROWS}{i}", 0)
        if c.get("spilled_runs") and notes is not None:
            notes.append(
                f"{schema.name}: key ranges over the {format_bytes(config.buffer_size)} "
                f"--buffer-size were sorted in {c['spilled_runs']} run(s) on the workers' local "
                "disk (more --key-ranges, or a larger --buffer-size, keeps them in memory)"
            )
        if notes is not None:
            notes.append(
                f"{schema.name}: {len(ranges)} byte range(s), {key_ranges} key range(s) on "
                f"{config.runner}"
            )
