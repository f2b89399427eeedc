"""Durable load progress: checkpoints for resume, and the record of loaded sources for
``--incremental`` runs.

Stored by default in a small table of the target database, created on demand::

    CREATE TABLE SpannerLoaderState (
      RunId STRING(64) NOT NULL,      -- one load job: database, table, source patterns, mode
      TableName STRING(MAX) NOT NULL,
      Part STRING(MAX) NOT NULL,      -- "run", "b/<flush>/<batch>", "src/<uri>"
      Value STRING(MAX),              -- JSON
      UpdatedAt TIMESTAMP OPTIONS (allow_commit_timestamp=true),
    ) PRIMARY KEY (RunId, TableName, Part)

In a PostgreSQL-dialect database the same table is created with PostgreSQL DDL
(:data:`STATE_DDL_PG`: quoted names, so that they keep their case and the same mutations
write them; ``varchar``; a ``spanner.commit_timestamp`` column) in schema ``public``.

Drop it at any time (``DROP TABLE SpannerLoaderState``; PostgreSQL dialect:
``DROP TABLE "SpannerLoaderState"``) to forget every checkpoint.

* ``run``: the job's fingerprint (source identities and the options that shape batches), the
  resume point (source index and records consumed) after the last fully committed buffer
  flush, the flush count, reject count, and status.
* ``b/<flush>/<batch>``: written in the *same atomic commit* as the batch it names, so a
  committed batch always has its marker and an uncommitted one never has. On resume the
  batches of the interrupted flush that have a marker are skipped. (An insert-mode commit
  whose reply was lost is resolved within the run by reading the batch's keys back, see
  loader/commit.py.) Markers of a finished flush are deleted.
* ``b/<flush>/<batch>/<lo>-<hi>``: rows lo..hi-1 of that batch, committed as one piece while
  the batch was bisected to isolate a row Spanner refused (the piece's commit carries it). A
  resume sends only the rows of the batch no such marker covers, so in insert mode a crash
  mid-bisection does not turn rows that landed into duplicate-key rejects. A bisected batch
  whose pieces are all committed or rejected gets its own marker, with its reject count.
* ``src/<uri>``: a source fully loaded by an ``--incremental`` job, with its generation.

With ``--state-file PATH`` the same rows live in a local JSON file instead, and with
``--state-file gs://bucket/name.json`` in one Cloud Storage object (see :class:`GcsStateStore`).
Markers are then written after the commit is acknowledged, not in it, and a bisected batch
gets no piece markers: a crash between a commit and its marker makes a resume send those rows
again, which is harmless in upsert, replace and update modes but in insert mode reports them
as duplicate keys (insert-mode loads that may be killed should keep the default state table).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from ..errors import ConfigError, LeaseHeld, LoaderError, StateError
from ..outfiles import path_problem
from ..types import COMMIT_TIMESTAMP

if TYPE_CHECKING:
    from ..schema_reader import Catalog

STATE_TABLE = "SpannerLoaderState"
ABORT_RETRY_SECONDS = 60.0
"""How long a state write is repeated while Spanner aborts it (see SpannerStateStore._commit)."""
STATE_DDL = f"""CREATE TABLE {STATE_TABLE} (
  RunId STRING(64) NOT NULL,
  TableName STRING(MAX) NOT NULL,
  Part STRING(MAX) NOT NULL,
  Value STRING(MAX),
  UpdatedAt TIMESTAMP OPTIONS (allow_commit_timestamp=true),
) PRIMARY KEY (RunId, TableName, Part)"""
STATE_COLUMNS = ("RunId", "TableName", "Part", "Value", "UpdatedAt")
# The PostgreSQL dialect folds unquoted names to lower case; quoted, they are the GoogleSQL
# table's, so mutations (put, claim, the markers committed with the batches) are the same.
STATE_DDL_PG = f"""CREATE TABLE "{STATE_TABLE}" (
  "RunId" varchar(64) NOT NULL,
  "TableName" varchar NOT NULL,
  "Part" varchar NOT NULL,
  "Value" varchar,
  "UpdatedAt" spanner.commit_timestamp,
  PRIMARY KEY ("RunId", "TableName", "Part")
)"""


def digest(obj: Any, n: int = 16) -> str:
    """A short stable hash of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def canonical(obj: Any) -> Any:
    """A JSON-able form of an options object that does not depend on the process: a
    dataclass becomes a dict of only the fields that differ from their defaults (so a field a
    later version adds, at its default, changes nothing), sets become sorted lists, tuples
    lists, and every dict is sorted by key when dumped (:func:`digest`)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = dataclasses.MISSING
            if value != default:
                out[f.name] = canonical(value)
        return out
    if isinstance(obj, (set, frozenset)):
        return sorted((canonical(v) for v in obj), key=repr)
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def batch_part(flush: int, batch: int) -> str:
    return f"b/{flush:08d}/{batch:08d}"


class StateStore(Protocol):
    atomic: bool
    """True when batch markers can ride in the batch's own commit."""

    def get(self, run: str, table: str, part: str) -> Optional[dict[str, Any]]: ...

    def put(self, run: str, table: str, part: str, value: dict[str, Any]) -> None: ...

    def parts(self, run: str, table: str, prefix: str) -> dict[str, dict[str, Any]]: ...

    def delete_prefix(self, run: str, table: str, prefix: str, keep: str = "") -> None:
        """Delete the rows whose part starts with ``prefix``, but for those starting with
        ``keep`` (when given)."""
        ...

    def claim(self, run: str, table: str, part: str, value: dict[str, Any]) -> bool:
        """Write the row only if it does not exist yet; False if it does (see
        loader/resume/lease.py). Spanner's store also answers True when the row holds this
        very value (its own claim, repeated after a lost reply): callers make each claimer's
        value its own (the lease names its owner)."""
        ...

    def sync(self) -> None:
        """Make every change so far durable (stores that defer batch markers write them)."""
        ...

    def close(self) -> None:
        """Release what the store holds (a local state file's lock)."""
        ...

    def marker_mutation(
        self, run: str, table: str, part: str, value: dict[str, Any], op: str = "insert_or_update"
    ) -> bytes:
        """Wire bytes of a Mutation that writes the marker inside a batch's commit (atomic
        stores only); ``op="insert"`` makes a second commit of the same marker fail."""
        ...

    def marker_landed(self, mutation: bytes) -> bool:
        """Whether the marker of ``mutation`` (:meth:`marker_mutation`'s) is stored: the
        commit that carried it landed (atomic stores only)."""
        ...


class SpannerStateStore:
    """State rows in the target database (see the module docstring)."""

    atomic = True

    def __init__(self, database: Any, catalog: Optional[Catalog] = None) -> None:
        self.database = database
        """A :class:`~loader.access.DatabaseAccess` (reads and writes go through it, DDL
        through its client) or a client ``Database``."""
        self._ready = False
        self._pg = False
        """A PostgreSQL-dialect database (known after :meth:`ensure`)."""
        self._lock = threading.Lock()
        self._catalog = catalog
        """What the load's schema read saw: with it, :meth:`ensure` asks nothing more."""

    def ensure(self) -> None:
        from ..access import client_of
        from ..commit.errors import gexc
        from ..schema_reader import is_postgresql

        with self._lock:
            if self._ready:
                return
            try:
                if self._catalog is not None:
                    self._pg = self._catalog.postgresql
                    exists = STATE_TABLE in self._catalog.tables
                else:  # opened on its own (no schema read before): ask
                    self._pg = is_postgresql(self.database)
                    schema = "public" if self._pg else ""
                    exists = bool(
                        self._access.query(
                            "select table_name from information_schema.tables where "
                            f"table_schema = '{schema}' and table_name = '{STATE_TABLE}'"
                        )
                    )
                if not exists:
                    ddl = STATE_DDL_PG if self._pg else STATE_DDL
                    client_of(self.database).update_ddl([ddl]).result(600)
            except gexc.FailedPrecondition as e:
                if "Duplicate name" not in str(e):
                    raise self._error(e) from e
            except gexc.GoogleAPICallError as e:
                raise self._error(e) from e
            self._ready = True

    def _error(self, e: Exception) -> StateError:
        return StateError(
            f"cannot create or use the checkpoint table {STATE_TABLE}: {getattr(e, 'message', e)}",
            hint="grant the loader DDL rights (roles/spanner.databaseAdmin), or keep "
            "checkpoints in a local file with `state_file`, or disable them with `state=False`",
        )

    @property
    def _access(self) -> Any:
        from ..access import access_of

        return access_of(self.database)

    def get(self, run: str, table: str, part: str) -> Optional[dict[str, Any]]:
        self.ensure()
        for row in self._access.read(STATE_TABLE, ["Value"], [[run, table, part]]):
            return dict(json.loads(row[0] or "{}"))
        return None

    def parts(self, run: str, table: str, prefix: str) -> dict[str, dict[str, Any]]:
        self.ensure()
        out: dict[str, dict[str, Any]] = {}
        if self._pg:  # quoted names (see STATE_DDL_PG), positional parameters $1 = p1 ...
            sql = (
                f'select "Part", "Value" from "{STATE_TABLE}" where "RunId" = $1 '
                'and "TableName" = $2 and starts_with("Part", $3)'
            )
            names = ("p1", "p2", "p3")
        else:
            sql = (
                f"select Part, Value from {STATE_TABLE} where RunId = @r and TableName = @t "
                "and starts_with(Part, @p)"
            )
            names = ("r", "t", "p")
        for part, value in self._access.query(sql, dict(zip(names, (run, table, prefix)))):
            out[part] = json.loads(value or "{}")
        return out

    def put(self, run: str, table: str, part: str, value: dict[str, Any]) -> None:
        self.ensure()
        self._commit(self.marker_mutation(run, table, part, value))

    def claim(self, run: str, table: str, part: str, value: dict[str, Any]) -> bool:
        from ..commit.errors import gexc

        self.ensure()
        try:  # an insert: refused if another run wrote it first
            self._commit(self.marker_mutation(run, table, part, value, op="insert"))
        except gexc.AlreadyExists:
            # or this claim wrote it: an attempt applied whose reply was lost (UNAVAILABLE),
            # repeated by _commit. The value names its owner, so equal means ours.
            return self.get(run, table, part) == json.loads(json.dumps(value, sort_keys=True))
        return True

    def close(self) -> None:
        """Nothing held."""

    def delete_prefix(self, run: str, table: str, prefix: str, keep: str = "") -> None:
        # a snapshot read, then one blind delete commit: no read-write transaction that spans
        # RPCs, so a loader killed here leaves no transaction (and no locks) behind
        from ..wire.proto import field, list_value

        parts = [p for p in self.parts(run, table, prefix) if not (keep and p.startswith(keep))]
        if not parts:
            return
        # Mutation.delete = 5: Delete {table = 1, key_set = 2 (KeySet.keys = 1)}
        keys = b"".join(field(1, list_value([run, table, part])) for part in parts)
        self._commit(field(5, field(1, STATE_TABLE) + field(2, keys)))

    def _commit(self, mutation: bytes) -> None:
        """One blind-write commit of the state rows, again when Spanner aborts it: an aborted
        commit wrote nothing, so it is safe to repeat (an insert included). Tables loading side
        by side write their state at the same time, and the emulator aborts every transaction
        but one (newer clients retry that themselves, 3.50 does not). UNAVAILABLE is repeated
        too, as the client's gapic layer repeats a Commit it gets (the wire path has no such
        layer below it)."""
        from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

        from ..commit.errors import gexc

        for attempt in Retrying(
            retry=retry_if_exception(
                lambda e: isinstance(e, (gexc.Aborted, gexc.ServiceUnavailable))
            ),
            wait=wait_random_exponential(multiplier=0.02, max=1.0),
            stop=stop_after_delay(ABORT_RETRY_SECONDS),
            reraise=True,
        ):
            with attempt:
                self._access.write([mutation])

    def sync(self) -> None:
        """Nothing to do: every change is committed when it is made."""

    def marker_landed(self, mutation: bytes) -> bool:
        # read back by its key, decoded from the mutation with the loader's own reader
        from ..wire.proto import fields, value

        for _, write in fields(mutation):  # the one operation: a Write
            for number, row in fields(write):
                if number == 3:  # its first (only) row: run, table, part, ...
                    run, table, part = [value(v) for n, v in fields(row) if n == 1][:3]
                    return self.get(run, table, part) is not None
        raise ValueError("not a marker mutation")

    def marker_mutation(
        self, run: str, table: str, part: str, value: dict[str, Any], op: str = "insert_or_update"
    ) -> bytes:
        # built by the loader's own encoder, as the rows it rides with (the committer sends
        # mutations as wire bytes); the commit timestamp is the client's sentinel text
        import pyarrow as pa

        from ..encode import encode_rows, write_mutation
        from ..types import SpannerType

        cells = [run, table, part, json.dumps(value, sort_keys=True), COMMIT_TIMESTAMP]
        text = SpannerType.parse("STRING(MAX)")
        rows = encode_rows([pa.array([c], pa.string()) for c in cells], [text] * len(cells))
        return write_mutation(op, STATE_TABLE, STATE_COLUMNS, rows)


class _JsonStateStore:
    """State rows held in memory and saved whole, as one JSON document, after each change."""

    atomic = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {}

    @staticmethod
    def _key(run: str, table: str, part: str) -> str:
        return f"{run}\x1f{table}\x1f{part}"

    def _save(self, force: bool) -> None:
        """Persist ``self._rows`` (called under the lock); ``force``: not a batch marker."""
        raise NotImplementedError

    def get(self, run: str, table: str, part: str) -> Optional[dict[str, Any]]:
        with self._lock:
            v = self._rows.get(self._key(run, table, part))
            return dict(v) if v is not None else None

    def parts(self, run: str, table: str, prefix: str) -> dict[str, dict[str, Any]]:
        head = self._key(run, table, prefix)
        with self._lock:
            return {
                k.split("\x1f", 2)[2]: dict(v) for k, v in self._rows.items() if k.startswith(head)
            }

    def put(self, run: str, table: str, part: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._rows[self._key(run, table, part)] = value
            self._save(force=not part.startswith("b/"))

    def delete_prefix(self, run: str, table: str, prefix: str, keep: str = "") -> None:
        head = self._key(run, table, prefix)
        kept = self._key(run, table, keep) if keep else None
        with self._lock:
            self._rows = {
                k: v
                for k, v in self._rows.items()
                if not k.startswith(head) or (kept is not None and k.startswith(kept))
            }
            self._save(force=not prefix.startswith("b/"))

    def claim(self, run: str, table: str, part: str, value: dict[str, Any]) -> bool:
        with self._lock:
            if self._key(run, table, part) in self._rows:
                return False
            self._rows[self._key(run, table, part)] = value
            self._save(force=True)
            return True

    def sync(self) -> None:
        """Write whatever :meth:`_save` deferred."""

    def close(self) -> None:
        """Nothing held."""

    def marker_mutation(
        self, run: str, table: str, part: str, value: dict[str, Any], op: str = "insert_or_update"
    ) -> bytes:
        raise NotImplementedError("file state is not atomic with commits")

    def marker_landed(self, mutation: bytes) -> bool:
        raise NotImplementedError("file state is not atomic with commits")


def _state_rows(data: str, where: str) -> dict[str, dict[str, Any]]:
    """A state file's rows; StateError (with a hint that works) for anything else."""
    hint = (
        f"move {where} away or delete it (its checkpoints are lost: the next run loads "
        "from the start), or name another `state_file`"
    )
    try:
        rows = json.loads(data)
    except ValueError as e:
        raise StateError(f"the state file {where} is not JSON ({e})", hint=hint) from None
    if not isinstance(rows, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in rows.items()
    ):
        raise StateError(
            f"the state file {where} is JSON but not a spanner-loader state file "
            f"(a {type(rows).__name__} where an object of checkpoint rows belongs)",
            hint=hint,
        )
    return rows


class _Snapshot(_JsonStateStore):
    """A state file's rows as one read found them, without its lock (a dry run only looks:
    nothing saves them)."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        super().__init__()
        self._rows = rows


def peek_state_store(location: Any, database: Any, catalog: Optional[Catalog]) -> Any:
    """The checkpoints a load would find, to read only, with nothing created or locked (for
    a dry run); None when there are none to read here: no state table yet (or no catalog to
    say), no state file, or one on Cloud Storage."""
    if location is None:
        if catalog is None or STATE_TABLE not in catalog.tables:
            return None
        return SpannerStateStore(database, catalog)
    if str(location).startswith("gs://"):
        return None
    try:
        data = Path(location).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return _Snapshot(_state_rows(data, str(location)))


class FileStateStore(_JsonStateStore):
    """State rows in a local JSON file, rewritten atomically (write + rename) on each change.

    The file is locked for the store's life (``flock`` on ``<name>.lock`` beside it, released by
    the kernel when the process ends, even by kill -9): two processes would each rewrite the
    whole file from their own copy, so a second run sharing it stops at once."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._lock_fd: Optional[int] = None
        self._take_lock()
        try:
            self._read()
        except BaseException:
            self.close()
            raise

    def _take_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock (the lease rows still fence the job)
            return
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StateError(
                f"cannot write the state file {self.path} (nor its lock file {lock.name} "
                f"beside it): {path_problem(e, self.path)}",
                hint="check the folder's permissions, or name another `state_file`",
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            finally:
                os.close(fd)
            raise LeaseHeld(
                f"the state file {self.path} is in use by another run (pid {holder}); two "
                "runs would overwrite each other's progress",
                hint="wait for that run to end, then run this command again (it resumes from "
                "the recorded progress), or give this run another `state_file`",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode("ascii"))
        self._lock_fd = fd

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _read(self) -> None:
        if self.path.exists():
            try:
                text = self.path.read_text(encoding="utf-8")
            except (OSError, ValueError) as e:
                raise StateError(
                    f"cannot read the state file {self.path}: {e}",
                    hint="check its permissions, or name another `state_file`",
                ) from e
            self._rows = _state_rows(text, str(self.path))

    def _save(self, force: bool) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self._rows, f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                tmp.unlink()
            except OSError:
                pass
            raise StateError(
                f"cannot write the state file {self.path}: {path_problem(e, self.path)}",
                hint="free disk space or choose another path with `state_file`",
            ) from e


class GcsStateStore(_JsonStateStore):
    """State rows in one Cloud Storage object (``--state-file gs://bucket/name.json``).

    Each save uploads a whole new object with ``ifGenerationMatch`` set to the generation this
    store last read or wrote (0 when there was none: the object must not exist yet), so two
    runs sharing the object cannot overwrite each other's progress: the second writer gets a
    412 and stops with a clear error. A 412 that answers our own retried upload (the first
    attempt's reply was lost) is recognised by reading the object back.

    GCS accepts about one update per second to one object, so batch markers (which only let a
    resume skip batches; losing one means a batch is committed again) are saved at most every
    ``min_interval`` seconds; resume points, status and ``--incremental`` records are saved at
    once, and :meth:`sync` writes anything deferred.
    """

    def __init__(
        self,
        uri: str,
        *,
        storage_client: Any = None,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        from ..source import make_storage_client

        self.uri = uri
        bucket, _, name = uri[len("gs://") :].partition("/")
        if not bucket or not name or name.endswith("/"):
            raise ConfigError(
                f"`state_file` {uri} does not name an object",
                hint="give gs://BUCKET/PATH/NAME.json",
            )
        self.bucket = bucket
        self.min_interval = min_interval
        self.clock = clock
        self._last_write = float("-inf")
        self._dirty = False
        client = storage_client if storage_client is not None else make_storage_client()
        self._blob = client.bucket(bucket).blob(name)
        self._generation = 0  # ifGenerationMatch=0: the object must not exist yet
        try:
            found = client.bucket(bucket).get_blob(name)
            if found is not None:
                generation = int(found.generation)
                data = found.download_as_bytes(if_generation_match=generation)
                self._generation = generation
                self._rows = _state_rows(data.decode("utf-8", "replace"), uri)
        except StateError:
            raise
        except Exception as e:  # noqa: BLE001 - storage, auth and transport errors
            raise self._error(e, "reading") from e

    def _save(self, force: bool) -> None:
        if not force and self.clock() - self._last_write < self.min_interval:
            self._dirty = True
            return
        self._write()

    def sync(self) -> None:
        with self._lock:
            if self._dirty:
                self._write()

    def _write(self) -> None:
        from google.api_core import exceptions as gexc

        data = json.dumps(self._rows, sort_keys=True).encode("utf-8")
        try:
            try:
                self._blob.upload_from_string(
                    data, content_type="application/json", if_generation_match=self._generation
                )
                generation = int(self._blob.generation)
            except gexc.PreconditionFailed:
                ours = self._is_ours(data)
                if ours is None:
                    raise
                generation = ours
        except gexc.PreconditionFailed as e:
            raise StateError(
                f"the state file {self.uri} was changed by another run (this run last saw "
                f"generation {self._generation or 'none'}): it owns this job's progress",
                hint="do not run two loads with the same `state_file`; once the other run has "
                "ended, re-run this command: it resumes from the recorded progress",
            ) from e
        except Exception as e:  # noqa: BLE001 - storage, auth and transport errors
            raise self._error(e, "writing") from e
        self._generation = generation
        self._last_write = self.clock()
        self._dirty = False

    def _is_ours(self, data: bytes) -> Optional[int]:
        """After a 412: the object's generation if it is the one we just uploaded (the client
        retried our upload after its first reply was lost), else None."""
        from google.api_core import exceptions as gexc

        try:
            self._blob.reload()
            generation = int(self._blob.generation)
            if self._blob.download_as_bytes(if_generation_match=generation) == data:
                return generation
        except gexc.GoogleAPICallError:
            pass
        return None

    def _error(self, e: BaseException, action: str) -> LoaderError:
        from google.api_core import exceptions as gexc

        if isinstance(e, LoaderError):
            return e
        cause = e.cause if isinstance(e, gexc.RetryError) and e.cause is not None else e
        msg = " ".join(str(getattr(cause, "message", None) or cause).split())[:300]
        if isinstance(cause, gexc.NotFound):
            return StateError(
                f"cannot write the state file {self.uri}: bucket gs://{self.bucket} does not exist",
                hint=f"create it (`gcloud storage buckets create gs://{self.bucket}`) or choose "
                "another `state_file`",
            )
        if isinstance(cause, (gexc.Forbidden, gexc.Unauthorized)):
            return StateError(
                f"permission denied {action} the state file {self.uri}: {msg}",
                hint=f"the credentials need storage.objects.get, create and delete on "
                f"gs://{self.bucket} (roles/storage.objectUser); or use a local `state_file`",
            )
        return StateError(
            f"cannot {'read' if action == 'reading' else 'write'} the state file {self.uri}: "
            f"{type(cause).__name__}: {msg}",
            hint="check connectivity to Cloud Storage and re-run (progress is kept), or use a "
            "local `state_file`",
        )


def open_state_store(
    location: Any, database: Any, storage_client: Any = None, catalog: Optional[Catalog] = None
) -> StateStore:
    """The store for ``--state-file`` (a local path or ``gs://bucket/name``, through
    ``storage_client`` when given), else the table (``catalog``: what the load's schema read
    saw of the database, so that opening the table costs no further request)."""
    if location is None:
        return SpannerStateStore(database, catalog)
    if str(location).startswith("gs://"):
        return GcsStateStore(str(location), storage_client=storage_client)
    return FileStateStore(Path(location))
