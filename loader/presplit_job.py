"""A job's split points over its life: added by ``presplit`` ahead of the load (or by
``load --presplit`` at its start), recorded in the job's state, expired when the load is done.

The record is the part ``split_points`` of each table's job (loader/resume/stores.py), holding
the points as sent (their ``ListValue`` bytes), so the load that follows, in another process
and maybe days later, can expire exactly those. A load without a state store (``--no-state``)
still expires the points it added itself.
"""

from __future__ import annotations

from typing import Any, Collection, Optional

from .config import LoadConfig, TableJob
from .errors import LoaderError
from .presplit import (
    STATE_PART,
    Say,
    SplitObject,
    SplitReport,
    TableKeys,
    add,
    expire,
    plan,
)
from .resume.checkpoint import job_id
from .resume.stores import StateStore, open_state_store
from .schema import TableSchema, read_schemas


def record(
    store: StateStore,
    config: LoadConfig,
    jobs: dict[str, TableJob],
    objects: list[SplitObject],
    expire_time: Optional[str],
) -> None:
    """Record the points sent, under each table's job."""
    for table, job in jobs.items():
        mine = [o.to_state() for o in objects if o.table == table]
        if mine:
            value = {"expire_time": expire_time, "objects": mine}
            store.put(job_id(config, job, table, store), table, STATE_PART, value)


def recorded(
    store: StateStore, config: LoadConfig, jobs: dict[str, TableJob]
) -> dict[str, list[SplitObject]]:
    """The points recorded for each table's job (tables without any left out)."""
    out = {}
    for table, job in jobs.items():
        row = store.get(job_id(config, job, table, store), table, STATE_PART)
        if row and row.get("objects"):
            out[table] = [SplitObject.from_state(o) for o in row["objects"]]
    return out


def run_presplit(
    config: LoadConfig,
    *,
    database: Any = None,
    schemas: Optional[dict[str, TableSchema]] = None,
    storage_client: Any = None,
    admin: Any = None,
    say: Say = lambda _line: None,
) -> SplitReport:
    """What ``spanner-loader presplit`` runs: sample the sources, add the split points and
    record them in each job's state (unless ``--no-state``) for the load to expire."""
    from .connection import connect

    def run(db: Any) -> SplitReport:
        report = SplitReport()
        given = schemas if schemas is not None else read_schemas(db, [j.table for j in config.jobs])
        jobs = {given[j.table].name: j for j in config.jobs}
        objects = plan(
            config,
            given,
            list(config.jobs),
            report,
            storage_client=storage_client,
            read_streams=True,
            say=say,
        )
        sent = add(config, objects, report, admin=admin, say=say)
        if sent and (config.state or config.state_file):
            store = open_state_store(config.state_file, db, storage_client)
            try:
                record(store, config, jobs, sent, report.expire_time)
                store.sync()
            finally:
                store.close()
        return report

    if database is not None:
        return run(database)
    with connect(config.target) as db:
        return run(db)


class LoadSplits:
    """The load's part: :meth:`before` the first table (``--presplit``: add the points unless
    a ``presplit`` run recorded some for the job), :meth:`after` the last (expire them, unless
    ``--keep-split-points``)."""

    def __init__(
        self,
        config: LoadConfig,
        store: Optional[StateStore],
        schemas: dict[str, TableSchema],
        jobs: dict[str, TableJob],
        *,
        storage_client: Any = None,
        notes: list[str],
        progress: Any = None,
        admin: Any = None,
        deferred: Collection[str] = (),
    ) -> None:
        self.config = config
        self.store = store
        self.schemas = schemas
        self.jobs = jobs
        self.storage_client = storage_client
        self.notes = notes
        self.say: Say = getattr(progress, "message", None) or (lambda _line: None)
        self.admin = admin
        self.deferred = deferred
        """Indexes the load drops and re-creates after it: not split."""
        self.report = SplitReport()
        self.objects: list[SplitObject] = []
        """Every point this job has: recorded by an earlier run, or added by this one."""

    @property
    def active(self) -> bool:
        return not self.config.dry_run

    def before(self) -> Optional[dict[str, Any]]:
        """Add the split points (``--presplit``); the report's ``split_points`` entry."""
        if not self.active:
            return None
        found = recorded(self.store, self.config, self.jobs) if self.store is not None else {}
        for objs in found.values():
            self.objects += objs
        if not self.config.presplit:
            return self.summary() if self.objects else None
        todo = {table: job for table, job in self.jobs.items() if table not in found}
        if found:
            self.notes.append(
                "split points recorded by an earlier run of "
                + ", ".join(sorted(found))
                + " are in place: not added again"
            )
        if todo:
            try:
                objects = plan(
                    self.config,
                    {job.table: self.schemas[table] for table, job in todo.items()},
                    list(todo.values()),
                    self.report,
                    storage_client=self.storage_client,
                    read_streams=False,
                    say=self.say,
                    deferred=self.deferred,
                    table_keys=self._key_ranges(),
                )
            except LoaderError as e:  # best-effort: the load reads the sources itself
                self.notes.append(f"split points not added: {e.message}")
                return self.summary()
            sent = add(self.config, objects, self.report, admin=self.admin, say=self.say)
            self.notes.extend(self.report.notes)
            self.report.notes = []
            self.objects += sent
            if sent and self.store is not None:
                record(self.store, self.config, self.jobs, sent, self.report.expire_time)
        return self.summary()

    def _key_ranges(self) -> Optional[TableKeys]:
        """``load --runner``: each table's points are its key-range boundaries
        (loader/beam/splits.py), stored for the pipeline to reuse."""
        store = self.store
        if self.config.runner is None or store is None:
            return None
        from .beam.splits import key_range_points

        by_name = {self.schemas[t].name: job for t, job in self.jobs.items() if t in self.schemas}

        def keys(schema: TableSchema, sample: Any, count: int) -> Any:
            job = by_name.get(schema.name)
            if job is None:
                return None
            run_id = job_id(self.config, job, schema.name, store)
            return key_range_points(self.config, store, run_id, schema, sample, count)

        return keys

    def after(self) -> Optional[dict[str, Any]]:
        """Expire the points (``--keep-split-points``: leave them); the report's entry."""
        if not self.active or not self.objects:
            return None
        if self.config.keep_split_points:
            self.report.kept = True
            return self.summary()
        expire(self.config, self.objects, self.report, admin=self.admin)
        self.notes.extend(self.report.notes)
        self.report.notes = []
        if self.report.expired:
            self.say(f"presplit: {self.report.expired:,} split points expired after the load")
            if self.store is not None:
                for table, job in self.jobs.items():
                    self.store.delete_prefix(
                        job_id(self.config, job, table, self.store), table, STATE_PART
                    )
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """The report's ``split_points``: what this run planned and sent, and the points in
        place for the load (``points``, ``objects``: sent now or recorded by an earlier run)."""
        d = self.report.to_dict()
        d["points"] = sum(len(o.points) for o in self.objects)
        d["objects"] = [
            {"table": o.table, "index": o.index, "points": len(o.points)} for o in self.objects
        ]
        return d
