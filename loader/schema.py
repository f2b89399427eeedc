"""The target table's shape, read from the live database's INFORMATION_SCHEMA."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Optional, Sequence

from .errors import SchemaError
from .types import SpannerType

if TYPE_CHECKING:
    from .schema_reader import Catalog


@dataclass(frozen=True)
class Column:
    name: str
    type: SpannerType
    nullable: bool = True
    generated: bool = False
    """IS_GENERATED = 'ALWAYS': never written."""
    allow_commit_timestamp: bool = False
    has_default: bool = False


@dataclass(frozen=True)
class KeyPart:
    name: str
    desc: bool = False


@dataclass(frozen=True)
class Index:
    """A secondary index (FK-backing ones included)."""

    name: str
    columns: tuple[str, ...]
    """Key columns of the index, in order."""
    storing: tuple[str, ...] = ()
    unique: bool = False
    null_filtered: bool = False
    descending: tuple[str, ...] = ()
    """Key columns of the index in DESC order (the others are ASC)."""
    kind: str = "INDEX"
    """INFORMATION_SCHEMA.INDEXES.INDEX_TYPE: INDEX (search and vector indexes have others)."""


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[KeyPart, ...]
    parent: Optional[str] = None
    """INTERLEAVE IN PARENT table, if any."""
    parent_key: int = 0
    """How many key columns the parent table has: the first ones of this table's key."""
    indexes: tuple[Index, ...] = ()
    references: tuple[str, ...] = ()
    """Tables this one has foreign keys to (they load first)."""
    children: tuple[str, ...] = ()
    """Tables interleaved in this one."""
    descendants: tuple[str, ...] = ()
    """Tables interleaved in this one, and in those, all the way down (a replace deletes
    their rows too)."""
    references_itself: bool = False
    """A foreign key of the table names the table itself (not in ``references``)."""
    unsupported: tuple[tuple[str, str], ...] = ()
    """(name, type) of the columns of a type the loader cannot write and nothing has to write
    (generated, nullable or with a default: a search index's TOKENLIST): left out of
    ``columns``."""
    _by_name: dict[str, Column] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({c.name: c for c in self.columns})

    def column(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise SchemaError(
                f"table {self.name} has no column {name!r}",
                hint="columns: " + ", ".join(c.name for c in self.columns),
            ) from None

    def find_column(self, name: str) -> Optional[Column]:
        """Exact match first, then case-insensitive (GoogleSQL names are case-insensitive)."""
        spelt = spelt_as(name, self._by_name)
        return None if spelt is None else self._by_name[spelt]

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.primary_key)

    @property
    def writable_columns(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.generated)


def spelt_as(name: str, names: Collection[str]) -> Optional[str]:
    """``name`` as ``names`` spell it: itself when it is one of them, else the one name that
    differs from it in case only (GoogleSQL names are case-insensitive); None otherwise."""
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def quote_ident(name: str, dialect: str = "GOOGLE_STANDARD_SQL") -> str:
    """Quote an identifier for SQL text (backticks for GoogleSQL, double quotes for PostgreSQL)."""
    if dialect == "POSTGRESQL":
        return '"' + name.replace('"', '""') + '"'
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def read_schema(database: Any, table: str) -> TableSchema:
    """Read one table's schema; raise SchemaError listing the existing tables if it is missing."""
    return read_schemas(database, [table])[table]


def read_schemas(database: Any, tables: Sequence[str]) -> dict[str, TableSchema]:
    """Read several tables' schemas in one read-only snapshot.

    Keys of the result are the names as requested; a name is matched case-insensitively when
    no exact match exists.
    """
    from .schema_reader import read_information_schema

    return read_information_schema(database, tables)


def read_catalog(database: Any, tables: Sequence[str]) -> tuple[dict[str, TableSchema], Catalog]:
    """:func:`read_schemas`, and what the same read learnt of the database (every table's
    name, the dialect): a load opens its checkpoint table without asking again."""
    from .schema_reader import read_catalog as read

    return read(database, tables)
