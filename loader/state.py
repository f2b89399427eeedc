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

Drop it at any time (``DROP TABLE SpannerLoaderState``) to forget every checkpoint.

* ``run``: the job's fingerprint (source identities and the options that shape batches), the
  resume point (source index and records consumed) after the last fully committed buffer
  flush, the flush count, reject count, and status.
* ``b/<flush>/<batch>``: written in the *same atomic commit* as the batch it names, so a
  committed batch always has its marker and an uncommitted one never has. On resume the
  batches of the interrupted flush that have a marker are skipped; an insert-mode commit whose
  reply was lost is resolved by reading its marker. Markers of a finished flush are deleted.
* ``src/<uri>``: a source fully loaded by an ``--incremental`` job, with its generation.

With ``--state-file PATH`` the same rows live in a local JSON file instead (markers are then
written after the commit is acknowledged, not in it; insert-mode resolution falls back to
reading the batch's keys back).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Optional, Protocol

from .errors import StateError

STATE_TABLE = "SpannerLoaderState"
STATE_DDL = f"""CREATE TABLE {STATE_TABLE} (
  RunId STRING(64) NOT NULL,
  TableName STRING(MAX) NOT NULL,
  Part STRING(MAX) NOT NULL,
  Value STRING(MAX),
  UpdatedAt TIMESTAMP OPTIONS (allow_commit_timestamp=true),
) PRIMARY KEY (RunId, TableName, Part)"""
STATE_COLUMNS = ("RunId", "TableName", "Part", "Value", "UpdatedAt")


def digest(obj: Any, n: int = 16) -> str:
    """A short stable hash of a JSON-able object."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def batch_part(flush: int, batch: int) -> str:
    return f"b/{flush:08d}/{batch:08d}"


class StateStore(Protocol):
    atomic: bool
    """True when batch markers can ride in the batch's own commit."""

    def get(self, run: str, table: str, part: str) -> Optional[dict[str, Any]]: ...

    def put(self, run: str, table: str, part: str, value: dict[str, Any]) -> None: ...

    def parts(self, run: str, table: str, prefix: str) -> dict[str, dict[str, Any]]: ...

    def delete_prefix(self, run: str, table: str, prefix: str) -> None: ...

    def marker_mutation(self, run: str, table: str, part: str, value: dict[str, Any]) -> Any:
        """A Mutation that writes the marker inside a batch's commit (atomic stores only)."""
        ...


class SpannerStateStore:
    """State rows in the target database (see the module docstring)."""

    atomic = True

    def __init__(self, database: Any) -> None:
        self.database = database
        self._ready = False
        self._lock = threading.Lock()

    def ensure(self) -> None:
        from google.api_core import exceptions as gexc

        with self._lock:
            if self._ready:
                return
            try:
                with self.database.snapshot() as snap:
                    rows = list(
                        snap.execute_sql(
                            "select table_name from information_schema.tables "
                            f"where table_schema = '' and table_name = '{STATE_TABLE}'"
                        )
                    )
                if not rows:
                    self.database.update_ddl([STATE_DDL]).result(600)
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
            "checkpoints in a local file with --state-file PATH, or disable with --no-state",
        )

    def get(self, run: str, table: str, part: str) -> Optional[dict[str, Any]]:
        from google.cloud.spanner_v1 import KeySet

        self.ensure()
        with self.database.snapshot() as snap:
            for row in snap.read(STATE_TABLE, ["Value"], KeySet(keys=[[run, table, part]])):
                return dict(json.loads(row[0] or "{}"))
        return None

    def parts(self, run: str, table: str, prefix: str) -> dict[str, dict[str, Any]]:
        self.ensure()
        out: dict[str, dict[str, Any]] = {}
        with self.database.snapshot() as snap:
            rows = snap.execute_sql(
                f"select Part, Value from {STATE_TABLE} where RunId = @r and TableName = @t "
                "and starts_with(Part, @p)",
                params={"r": run, "t": table, "p": prefix},
                param_types=_string_types("r", "t", "p"),
            )
            for part, value in rows:
                out[part] = json.loads(value or "{}")
        return out

    def put(self, run: str, table: str, part: str, value: dict[str, Any]) -> None:
        from google.cloud.spanner_v1 import COMMIT_TIMESTAMP

        self.ensure()
        with self.database.batch() as b:
            b.insert_or_update(
                STATE_TABLE,
                STATE_COLUMNS,
                [[run, table, part, json.dumps(value, sort_keys=True), COMMIT_TIMESTAMP]],
            )

    def delete_prefix(self, run: str, table: str, prefix: str) -> None:
        # a snapshot read, then one blind delete commit: no read-write transaction that spans
        # RPCs, so a loader killed here leaves no transaction (and no locks) behind
        from google.cloud.spanner_v1 import KeySet

        parts = self.parts(run, table, prefix)
        if not parts:
            return
        with self.database.batch() as b:
            b.delete(STATE_TABLE, KeySet(keys=[[run, table, part] for part in parts]))

    def marker_mutation(self, run: str, table: str, part: str, value: dict[str, Any]) -> Any:
        from google.cloud.spanner_v1 import COMMIT_TIMESTAMP, Mutation
        from google.cloud.spanner_v1._helpers import _make_list_value_pbs

        write = Mutation.Write(
            table=STATE_TABLE,
            columns=list(STATE_COLUMNS),
            values=_make_list_value_pbs(
                [[run, table, part, json.dumps(value, sort_keys=True), COMMIT_TIMESTAMP]]
            ),
        )
        return Mutation(insert_or_update=write)


def _string_types(*names: str) -> dict[str, Any]:
    from google.cloud.spanner_v1 import param_types

    return {n: param_types.STRING for n in names}


class FileStateStore:
    """State rows in a local JSON file, rewritten atomically (write + rename) on each change."""

    atomic = False

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            try:
                self._rows = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                raise StateError(
                    f"cannot read the state file {self.path}: {e}",
                    hint="restore it, or start over with --restart",
                ) from e

    @staticmethod
    def _key(run: str, table: str, part: str) -> str:
        return f"{run}\x1f{table}\x1f{part}"

    def _save(self) -> None:
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
                f"cannot write the state file {self.path}: {e.strerror}",
                hint="free disk space or choose another path with --state-file",
            ) from e

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
            self._save()

    def delete_prefix(self, run: str, table: str, prefix: str) -> None:
        head = self._key(run, table, prefix)
        with self._lock:
            self._rows = {k: v for k, v in self._rows.items() if not k.startswith(head)}
            self._save()

    def marker_mutation(self, run: str, table: str, part: str, value: dict[str, Any]) -> Any:
        raise NotImplementedError("file state is not atomic with commits")
