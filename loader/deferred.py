"""Deferred secondary indexes and foreign keys (``--defer-indexes``, ``--defer-foreign-keys``).

Every index entry is one more mutation in every commit and one more write; Spanner's
bulk-loading guidance is to create secondary indexes (and foreign keys, which are backed by
indexes) after the data is in. So, before a load's first commit:

1. read the database's DDL as Spanner reports it (GetDatabaseDdl) and pick the loaded tables'
   secondary indexes (non-unique ones, or all with ``--defer-indexes=all``) and the foreign
   keys on or pointing at the loaded tables;
2. record each one's statements in the job state (one ``defer`` row per loaded table, under a
   run id of the database: :func:`run_id`), **before** anything is dropped;
3. drop them in one DDL batch (foreign keys first: a unique index may back one).

The load then counts mutations without them (the schema is read again). After the last table,
they are re-created in one DDL batch (indexes first, then foreign keys, each in the order
Spanner printed them) while a progress line follows the backfill, and the records go.

A load that crashes, is interrupted or fails after the drop leaves the records: the next run
of a load of those tables (with or without the flags) re-creates what is still missing when it
ends, and ``verify`` lists it meanwhile. A re-creation that fails (a duplicate key under a
unique index, a row a foreign key refuses) is :class:`~loader.errors.NotRestored`, naming the
object; the rows stay loaded and the record stays, so the next run tries again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from .config import LoadConfig, TableJob
from .errors import ConfigError, LoaderError, NotRestored, SchemaError
from .resume.checkpoint import job_id
from .resume.stores import STATE_TABLE, StateStore, digest
from .schema import TableSchema

if TYPE_CHECKING:  # the DDL parser is imported when something is deferred or restored
    from .ddl import ForeignKeyDef, IndexDef, Schema

PART = "defer"
"""The state row of a loaded table that lists what a load deferred for it."""


def run_id(config: LoadConfig) -> str:
    """The run id deferral records are kept under: the database's, not one job's, so a
    later run whose sources or options differ still finds (and restores) them."""
    return run_id_of(config.target.path)


def run_id_of(path: str) -> str:
    """:func:`run_id` of the database ``projects/.../databases/...``."""
    return "defer-" + digest({"database": path})


def database_ddl(database: Any) -> list[str]:
    """GetDatabaseDdl: the schema's statements as Spanner prints them."""
    from google.api_core import exceptions as gexc

    try:
        database.reload()
    except gexc.GoogleAPICallError as e:
        raise SchemaError(
            f"cannot read the DDL of {getattr(database, 'name', 'the database')}: "
            f"{getattr(e, 'message', e)}",
            hint="deferring indexes needs spanner.databases.getDdl (roles/spanner.databaseReader)",
        ) from e
    return list(database.ddl_statements)


def read_schema(database: Any) -> Schema:
    """:func:`database_ddl`, parsed (loader/ddl.py is imported here: only a load that defers
    something, or finds something deferred, reads the DDL)."""
    from .ddl import read_ddl

    return read_ddl(database_ddl(database))


@dataclass(frozen=True)
class Item:
    """One deferred object, as recorded."""

    kind: str
    """``index`` or ``fk``."""
    table: str
    """The table it is declared on."""
    create: str
    """The statement that re-creates it."""
    drop: str
    """The statement that drops it."""
    name: Optional[str] = None
    """Its name as the DDL prints it (None: an unnamed foreign key)."""
    definition: str = ""
    """A foreign key's definition text (how an unnamed one is recognised)."""
    unique: bool = False

    @property
    def label(self) -> str:
        what = "index" if self.kind == "index" else "foreign key"
        return f"{what} {self.name or self.definition} on {self.table}"

    def key(self) -> tuple[str, ...]:
        if self.kind == "index":
            return ("index", str(self.name).lower())
        return ("fk", self.table.lower(), self.definition)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Item:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _index_item(ix: IndexDef) -> Item:
    return Item("index", ix.table, ix.create, ix.drop, ix.name, unique=ix.unique)


def present(item: Item, schema: Schema) -> bool:
    """Whether the object exists in the DDL ``schema``."""
    if item.kind == "index":
        return any(ix.name.lower() == str(item.name).lower() for ix in schema.indexes)
    return any(
        fk.table.lower() == item.table.lower() and fk.definition == item.definition
        for fk in schema.foreign_keys
    )


@dataclass
class Deferral:
    """What one load defers and restores (see the module docstring)."""

    config: LoadConfig
    database: Any
    store: Optional[StateStore]
    notes: list[str]
    say: Callable[[str], None] = lambda line: None
    """A live progress line (the CLI prints it on stderr)."""
    sleep: Callable[[float], None] = lambda s: None
    clock: Callable[[], float] = lambda: 0.0
    poll_s: float = 1.0
    say_every_s: float = 10.0
    items: dict[str, list[Item]] = field(default_factory=dict)
    """Per loaded table: what is deferred for it (recorded)."""
    dropped: set[str] = field(default_factory=set)
    """Names of the indexes dropped (for the schema the batches are counted with)."""
    nothing_new: set[str] = field(default_factory=set)
    """Tables whose ``--incremental`` job has nothing new to read: nothing is deferred for
    them."""

    @property
    def client(self) -> Any:
        """The client library's ``Database`` (``database`` may be the load's
        :class:`~loader.access.DatabaseAccess`, whose client is made on first use)."""
        from .access import client_of

        return client_of(self.database)

    @property
    def wanted(self) -> bool:
        return self.config.defer_indexes != "off" or self.config.defer_foreign_keys

    def _all(self) -> list[Item]:
        return [i for items in self.items.values() for i in items]

    # -- before the first commit -----------------------------------------------------------

    def begin(self, jobs: dict[str, TableJob]) -> bool:
        """Record, then drop, what this load defers (``jobs``: the loaded tables by name);
        returns whether anything is dropped now or still dropped from an earlier run (the
        tables' schemas must be read again)."""
        tables = list(jobs)
        from .schema_reader import is_postgresql

        if self.wanted and is_postgresql(self.client):
            raise ConfigError(
                "`defer_indexes` and `defer_foreign_keys` support GoogleSQL databases only",
                hint="load this PostgreSQL-dialect database without them, and create its "
                "indexes after the load by hand",
            )
        store, run = self.store, run_id(self.config)
        if store is not None:  # (no dialect check here: that is an RPC, needless without flags)
            for t in tables:
                row = store.get(run, t, PART)
                if row and row.get("objects"):
                    self.items[t] = [Item.from_dict(d) for d in row["objects"]]
        if not self.wanted and not self.items:
            return False
        ddl = read_schema(self.client)
        self._settle_restored(ddl)
        pending = self._all()
        if pending:
            unique = [str(i.name) for i in pending if i.unique and not present(i, ddl)]
            self.notes.append(
                f"{len(pending)} object(s) deferred by an earlier run are re-created when "
                "this load ends: "
                + ", ".join(i.label for i in pending)
                + (
                    f" (until then Spanner refuses no row for a clash under the unique index "
                    f"{', '.join(unique)}: such a row is written, and fails the re-creation)"
                    if unique
                    else ""
                )
            )
        finished = [t for t, job in jobs.items() if self._finished(t, job)]
        if finished and self.wanted:
            self.notes.append(
                f"{', '.join(finished)}: "
                + (
                    "nothing new since the last run"
                    if self.config.incremental
                    else "loaded by an earlier run of the job"
                )
                + f", so nothing is deferred for {'it' if len(finished) == 1 else 'them'} "
                "(no index is rebuilt for nothing)"
            )
        fresh = self._plan(ddl, [t for t in tables if t not in finished])
        known = {i.key() for i in pending}
        fresh = [(t, i) for t, i in fresh if i.key() not in known]
        if self.config.dry_run or store is None:
            if fresh:
                self.notes.append(
                    "dry run: would drop before the load and re-create after it: "
                    + ", ".join(i.label for _, i in fresh)
                )
            absent = [i for i in pending if not present(i, ddl)] + [i for _, i in fresh]
            self.dropped = {str(i.name) for i in absent if i.kind == "index"}
            return bool(absent)
        for t, i in fresh:
            self.items.setdefault(t, []).append(i)
        for t in {t for t, _ in fresh}:
            store.put(run, t, PART, {"objects": [i.to_dict() for i in self.items[t]]})
        store.sync()
        # what the flags ask for and exists now: this run's, and an earlier run's that a
        # crash caught between its record and its drop
        drops = [i for i in self._all() if present(i, ddl) and self._covers(i)]
        drops.sort(key=lambda i: i.kind != "fk")  # a unique index may back a foreign key
        if drops:
            self._ddl([i.drop for i in drops], "dropping", drops)
            self.notes.append(
                f"deferred {len(drops)} object(s) until the load ends: "
                + ", ".join(i.label for i in drops)
            )
        # the batches are counted without the indexes that are gone, and only those
        gone = [i for i in self._all() if i in drops or not present(i, ddl)]
        self.dropped = {str(i.name) for i in gone if i.kind == "index"}
        return bool(self.items)

    def _settle_restored(self, ddl: Schema) -> None:
        """An object an earlier run deferred that exists again (created by hand, or by a DDL
        file) and that this run does not defer: its record goes, and it is counted in every
        commit (it was counted as gone: commits over Spanner's mutation limit)."""
        back = [
            (t, i) for t, items in self.items.items() for i in items
            if present(i, ddl) and not (self.wanted and self._covers(i))
        ]  # fmt: skip
        if not back:
            return
        for t, i in back:
            self.items[t].remove(i)
        self.notes.append(
            f"{len(back)} object(s) deferred by an earlier run exist again, so they are "
            "counted in every commit and no longer deferred: " + ", ".join(i.label for _, i in back)
        )
        run, store = run_id(self.config), self.store
        for t in {t for t, _ in back}:
            left = self.items[t]
            if not left:
                del self.items[t]
            if self.config.dry_run or store is None:
                continue
            if left:
                store.put(run, t, PART, {"objects": [i.to_dict() for i in left]})
            else:
                store.delete_prefix(run, t, PART)
        if not self.config.dry_run and store is not None:
            store.sync()

    def _finished(self, table: str, job: TableJob) -> bool:
        """Whether the job's checkpoint says it is done: the run writes nothing (a change of
        its sources is refused), unless it starts over or looks for new sources."""
        if self.config.incremental:  # done, and no source new since (see the pipeline)
            return table in self.nothing_new  # (a dry run's too: it tells what a load does)
        if self.store is None or self.config.restart:
            return False
        run = job_id(self.config, job, table, self.store)
        if self.config.runner is not None:  # a Beam job records its end apart
            from .beam.resume import DONE_PART

            return self.store.get(run, table, DONE_PART) is not None
        row = self.store.get(run, table, "run")
        return bool(row and row.get("status") == "done")

    def _covers(self, item: Item) -> bool:
        if item.kind == "fk":
            return self.config.defer_foreign_keys
        return self.config.defer_indexes == "all" or (
            self.config.defer_indexes != "off" and not item.unique
        )

    def _plan(self, ddl: Schema, tables: Sequence[str]) -> list[tuple[str, Item]]:
        """(loaded table, item) for each object the flags defer, in the DDL's order."""
        by_lower = {t.lower(): t for t in tables}
        out: list[tuple[str, Item]] = []
        for ix in ddl.indexes:
            item = _index_item(ix)
            if ix.table.lower() in by_lower and self._covers(item):
                out.append((by_lower[ix.table.lower()], item))
        if self.config.defer_foreign_keys:
            names: Optional[dict[tuple[str, str], list[str]]] = None
            for fk in ddl.foreign_keys:
                owner = by_lower.get(fk.table.lower()) or by_lower.get(fk.references.lower())
                if owner is None:
                    continue
                name = fk.name
                if name is None:
                    if names is None:
                        names = self._unnamed_fk_names(ddl)
                    name = self._generated_name(fk, ddl, names)
                out.append(
                    (
                        owner,
                        Item("fk", fk.table, fk.add, fk.drop_as(name), fk.name, fk.definition),
                    )
                )
        return out

    def _unnamed_fk_names(self, ddl: Schema) -> dict[tuple[str, str], list[str]]:
        """(table, referenced table) -> the generated names of its foreign keys that the DDL
        prints without a name (from INFORMATION_SCHEMA)."""
        sql = (
            "select tc.constraint_name, tc.table_name, ctu.table_name "
            "from information_schema.table_constraints tc "
            "join information_schema.constraint_table_usage ctu "
            "on tc.constraint_name = ctu.constraint_name "
            "and tc.constraint_schema = ctu.constraint_schema "
            "where tc.constraint_type = 'FOREIGN KEY'"
        )
        named = {(fk.table.lower(), str(fk.name).lower()) for fk in ddl.foreign_keys if fk.name}
        out: dict[tuple[str, str], list[str]] = {}
        with self.client.snapshot() as snap:
            for name, table, target in snap.execute_sql(sql):
                if (table.lower(), name.lower()) not in named:
                    out.setdefault((table.lower(), target.lower()), []).append(name)
        return out

    def _generated_name(
        self, fk: ForeignKeyDef, ddl: Schema, names: dict[tuple[str, str], list[str]]
    ) -> str:
        pair = (fk.table.lower(), fk.references.lower())
        same = [
            f
            for f in ddl.foreign_keys
            if f.name is None and (f.table.lower(), f.references.lower()) == pair
        ]
        found = names.get(pair, [])
        if len(same) == 1 and len(found) == 1:
            return found[0]
        raise SchemaError(
            f"table {fk.table} has {len(same)} unnamed foreign keys to {fk.references}, "
            "which `defer_foreign_keys` cannot tell apart",
            hint=f"give them names (ALTER TABLE {fk.table} DROP CONSTRAINT <generated name>, "
            f"then ALTER TABLE {fk.table} ADD CONSTRAINT <name> FOREIGN KEY ...)",
        )

    def schemas(self, schemas: dict[str, TableSchema]) -> dict[str, TableSchema]:
        """The tables' schemas without the dropped indexes (for a dry run, or schemas given
        by the caller; a load reads them again instead)."""
        import dataclasses

        gone = {n.lower() for n in self.dropped}
        return {
            k: dataclasses.replace(
                s, indexes=tuple(ix for ix in s.indexes if ix.name.lower() not in gone)
            )
            for k, s in schemas.items()
        }

    # -- after the last table --------------------------------------------------------------

    def finish(self) -> None:
        """Re-create what is deferred and missing; forget the records of what is back."""
        if self.config.dry_run or self.store is None or not self.items:
            return
        ddl = read_schema(self.client)
        todo = [i for i in self._all() if not present(i, ddl)]
        todo.sort(key=lambda i: i.kind != "index")
        failed: list[tuple[Item, str]] = []
        while todo:
            # (after a refusal, the rest again: a tryout read "re-creating 4", then "3", unsaid)
            after = f" (the rest, after {failed[-1][0].label} was refused)" if failed else ""
            try:
                self._ddl([i.create for i in todo], "re-creating", todo, after)
                todo = []
            except _DdlFailed as e:
                ddl = read_schema(self.client)
                left = [i for i in todo if not present(i, ddl)]
                if not left:
                    break
                failed.append((left[0], e.message))  # a batch stops at its failing statement
                todo = left[1:]
        if not failed:
            self.notes.append(f"re-created {len(self._all())} deferred object(s)")
        run = run_id(self.config)
        keep = {i.key() for i, _ in failed}
        for t, items in self.items.items():
            left_items = [i for i in items if i.key() in keep]
            if left_items:
                self.store.put(run, t, PART, {"objects": [i.to_dict() for i in left_items]})
            else:
                self.store.delete_prefix(run, t, PART)
        self.store.sync()
        if failed:
            first, why = failed[0]
            more = f" (and {', '.join(i.label for i, _ in failed[1:])})" if len(failed) > 1 else ""
            again = _again(self.config.runner is not None)
            raise NotRestored(
                f"the rows are loaded, but {first.label} could not be re-created{more}: {why}",
                hint="fix the rows it refuses, in the table or in the sources, then run the "
                f"load again (it re-creates what is missing; {again}), or run the statement "
                "yourself: " + first.create,
            )

    def failed_note(self) -> None:
        """The load failed: say what stays dropped until a load of these tables runs again."""
        items = self._all()
        if items and not self.config.dry_run and self.store is not None:
            self.notes.append(
                f"{len(items)} deferred object(s) stay dropped until this load is run again "
                "(verify lists them): " + ", ".join(i.label for i in items)
            )

    def _ddl(self, statements: list[str], doing: str, items: list[Item], after: str = "") -> None:
        """One DDL batch, waited for with a progress line every ``say_every_s`` (``after``:
        said after its first line)."""
        from google.api_core import exceptions as gexc

        try:
            op = self.client.update_ddl(statements)
            t0 = last = self.clock()
            self.say(f"{doing} {len(statements)} deferred object(s){after}")
            while not op.done():
                self.sleep(self.poll_s)
                now = self.clock()
                if now - last >= self.say_every_s:
                    last = now
                    self.say(_progress_line(doing, op, items, now - t0))
            op.result()
        except gexc.GoogleAPICallError as e:
            if doing == "dropping":
                try:
                    self.finish()  # put back whatever the batch dropped before it failed
                except LoaderError:
                    pass  # the records stay: the next run tries again
                raise SchemaError(
                    f"cannot drop the objects to defer: {getattr(e, 'message', e)}",
                    hint="leave out `defer_indexes` / `defer_foreign_keys`, or grant "
                    "roles/spanner.databaseAdmin",
                ) from e
            raise _DdlFailed(str(getattr(e, "message", e))) from e


def _again(beam: bool) -> str:
    """How a load over sources fixed after a refused re-creation loads them again (a Beam
    job reads every source: `incremental` is not for it, a tryout found)."""
    if beam:
        return "with `restart=True`, which loads the fixed sources again"
    return "over fixed sources with `incremental=True`, which loads the changed ones"


class _DdlFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _progress_line(doing: str, op: Any, items: list[Item], elapsed: float) -> str:
    """E.g. "re-creating deferred objects: 1/3 done, index B on T 40% (12 s)"."""
    meta = getattr(op, "metadata", None)
    progress = list(getattr(meta, "progress", []) or [])
    done = len(list(getattr(meta, "commit_timestamps", []) or []))
    text = f"{doing} deferred objects: {done}/{len(items)} done"
    if done < len(items) and done < len(progress):
        text += f", {items[done].label} {progress[done].progress_percent}%"
    return text + f" ({elapsed:.0f} s)"


def recorded(database: Any, path: str) -> list[tuple[str, Item]]:
    """(table, object) of every deferral record in the state table of the GoogleSQL database
    at ``path`` (read only: a database without the table has none)."""
    with database.snapshot(multi_use=True) as snap:
        exists = list(
            snap.execute_sql(
                "select table_name from information_schema.tables "
                f"where table_schema = '' and table_name = '{STATE_TABLE}'"
            )
        )
        if not exists:
            return []
        from google.cloud.spanner_v1 import param_types

        rows = list(
            snap.execute_sql(
                f"select TableName, Value from {STATE_TABLE} where RunId = @r and Part = @p",
                params={"r": run_id_of(path), "p": PART},
                param_types={"r": param_types.STRING, "p": param_types.STRING},
            )
        )
    return [
        (table, Item.from_dict(d))
        for table, value in rows
        for d in json.loads(value or "{}").get("objects", [])
    ]


def left_behind(database: Any, config: LoadConfig, tables: Sequence[str]) -> dict[str, list[str]]:
    """Per table: the deferred objects no load has re-created yet, as recorded in the state
    table of the target database (read only: a database without one has none)."""
    from .schema_reader import is_postgresql

    if is_postgresql(database):
        return {}
    wanted = {t.lower() for t in tables}
    records = [(t, i) for t, i in recorded(database, config.target.path) if t.lower() in wanted]
    if not records:
        return {}
    ddl = read_schema(database)
    out: dict[str, list[str]] = {}
    for table, item in records:
        if not present(item, ddl):
            out.setdefault(table, []).append(item.label)
    return out
