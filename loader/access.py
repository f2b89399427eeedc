"""What a load needs from its database, and the two ways it gets it.

:class:`DatabaseAccess` is the whole of it up to and during the commits: a query on a
single-use snapshot (the schema read, the checkpoint table's parts), a read of rows by key
(a checkpoint row, the keys of an insert-mode commit whose reply was lost), a blind-write
commit of mutation wire bytes (the checkpoint rows, the lease), and a committer for the
batches. Everything else (DDL, the admin calls of ``--emulator``, deferred indexes, the
PostgreSQL dialect's schema read, Beam) takes the google-cloud-spanner ``Database`` from
:attr:`DatabaseAccess.client`.

* :class:`ClientAccess` does it all through google-cloud-spanner (what a caller that hands
  the loader a client ``Database`` gets);
* :class:`loader.wire.WireAccess` speaks Spanner's gRPC protocol itself, so that a load reaches
  its first commit without importing the client library, which costs more than the rest of
  the start-up together (benchmarks/README.md, "Start-up"); its ``client`` is made on first
  use.

Functions that take a database (:func:`loader.schema_reader.read_catalog`,
:class:`loader.resume.stores.SpannerStateStore`) take either: :func:`access_of`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:
    from .commit.runner import Committer


class DatabaseAccess:
    """The base of both ways (a base class, not a runtime-checkable Protocol: an
    ``isinstance`` check of one of those reads every member, ``client`` included, which
    would import the client library)."""

    name: str
    """projects/P/instances/I/databases/D"""

    @property
    def client(self) -> Any:
        """The google-cloud-spanner ``Database`` (for everything but the data path)."""
        raise NotImplementedError

    def query(self, sql: str, params: Optional[dict[str, str]] = None) -> list[list[Any]]:
        """The rows of one query (in the database's dialect) on a strong single-use
        snapshot; ``params`` are STRING parameters (``@name``; ``$1`` is ``p1``)."""
        raise NotImplementedError

    def read(
        self, table: str, columns: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> list[list[Any]]:
        """The rows of ``table`` with these primary keys (those that exist), on a strong
        single-use snapshot."""
        raise NotImplementedError

    def write(self, mutations: Sequence[bytes]) -> None:
        """Commit these ``Mutation`` wire bytes in one blind-write transaction (no options)."""
        raise NotImplementedError

    def committer(
        self,
        *,
        priority: Optional[str] = None,
        max_commit_delay_ms: Optional[int] = None,
        tag: Optional[str] = None,
    ) -> Committer:
        """The committer of the load's batches (it has ``notes`` for the load report)."""
        raise NotImplementedError


def access_of(database: Any) -> DatabaseAccess:
    """``database`` as a :class:`DatabaseAccess`: itself, or a client ``Database`` wrapped."""
    if isinstance(database, DatabaseAccess):
        return database
    return ClientAccess(database)


def client_of(database: Any) -> Any:
    """The google-cloud-spanner ``Database`` behind ``database`` (an access or the client's)."""
    return database.client if isinstance(database, DatabaseAccess) else database


class ClientAccess(DatabaseAccess):
    """:class:`DatabaseAccess` through google-cloud-spanner's public API (the committer: the
    loader's :class:`~loader.commit.SpannerCommitter` on the client's channel)."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self.name = getattr(database, "name", "the database")

    @property
    def client(self) -> Any:
        return self.database

    def query(self, sql: str, params: Optional[dict[str, str]] = None) -> list[list[Any]]:
        from google.cloud.spanner_v1 import param_types

        types = {k: param_types.STRING for k in params or {}}
        with self.database.snapshot() as snap:
            rows = snap.execute_sql(sql, params=params or None, param_types=types or None)
            return [list(r) for r in rows]

    def read(
        self, table: str, columns: Sequence[str], keys: Sequence[Sequence[Any]]
    ) -> list[list[Any]]:
        from google.cloud.spanner_v1 import KeySet

        with self.database.snapshot() as snap:
            rows = snap.read(table, list(columns), KeySet(keys=[list(k) for k in keys]))
            return [list(r) for r in rows]

    def write(self, mutations: Sequence[bytes]) -> None:
        from .commit.spanner import add_mutation

        with self.database.batch() as batch:
            for m in mutations:
                add_mutation(batch, m)

    def committer(
        self,
        *,
        priority: Optional[str] = None,
        max_commit_delay_ms: Optional[int] = None,
        tag: Optional[str] = None,
    ) -> Committer:
        from .commit.spanner import SpannerCommitter

        return SpannerCommitter(
            self.database, priority=priority, max_commit_delay_ms=max_commit_delay_ms, tag=tag
        )
