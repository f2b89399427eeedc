"""Verify: does a table hold exactly the source rows?

The source goes through the same read, convert, sort and de-duplicate path as a load; the
table is read in one snapshot at a single read timestamp (a consistent view that blocks no
writer). Each row becomes a canonical tuple of Python values; the two sides are compared by
row count and by an order-independent checksum (the sum of 64-bit BLAKE2 digests of the rows,
modulo 2^64), and when they differ the first differing keys are listed.

Columns filled with the commit timestamp (``--commit-timestamp``) are not compared, nor
columns some of a table's sources do not write (their rows keep what the table held there; a
note names them).

Memory: both sides are held as hashes keyed by primary key, about 100 bytes per row; verify is
meant for the sizes a test, a smoke load or a nightly batch has, not for a multi-TB table.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Collection, Iterable, Optional, Sequence

import pyarrow as pa

from .config import LoadConfig
from .convert.json_array import INT64_MIN, UINT64_MAX, first_keys
from .errors import ConfigError, ExitCode, option
from .schema import TableSchema
from .types import COMMIT_TIMESTAMP, SpannerType

if TYPE_CHECKING:
    from .rejects import Reject

MAX_DIFFS = 10


@dataclass
class TableVerification:
    table: str
    source_rows: int = 0
    table_rows: int = 0
    source_checksum: str = ""
    table_checksum: str = ""
    missing: list[tuple[Any, ...]] = field(default_factory=list)
    """Keys in the source but not in the table (first few), each a tuple of its parts."""
    unexpected: list[tuple[Any, ...]] = field(default_factory=list)
    """Keys in the table but not in the source (first few)."""
    different: list[tuple[Any, ...]] = field(default_factory=list)
    """Keys whose values differ (first few)."""
    skipped_columns: list[str] = field(default_factory=list)
    repeated: int = 0
    """Source rows whose key a later source row has (verify expects the last of them)."""
    bad_rows: int = 0
    """Source rows a load rejects before it writes (not compared)."""
    left_out: int = 0
    """Source rows the given reject file lists: a load rejected them (not compared)."""

    @property
    def ok(self) -> bool:
        return (
            self.source_rows == self.table_rows
            and self.source_checksum == self.table_checksum
            and not (self.missing or self.unexpected or self.different)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "ok": self.ok,
            "source_rows": self.source_rows,
            "table_rows": self.table_rows,
            "source_checksum": self.source_checksum,
            "table_checksum": self.table_checksum,
            # each key a list of its parts, as verify compares them (JSON, not Python text)
            "missing_keys": [_json_key(k) for k in self.missing],
            "unexpected_keys": [_json_key(k) for k in self.unexpected],
            "different_keys": [_json_key(k) for k in self.different],
            "skipped_columns": self.skipped_columns,
            "repeated_source_rows": self.repeated,
            "bad_source_rows": self.bad_rows,
            "rejected_rows_left_out": self.left_out,
        }


def _json_key(key: Any) -> list[Any]:
    """A key's parts as JSON takes them (bytes as base64 text, anything else not JSON as its
    text)."""
    import base64

    parts = key if isinstance(key, tuple) else (key,)
    out: list[Any] = []
    for p in parts:
        if isinstance(p, bytes):
            out.append(base64.b64encode(p).decode())
        elif p is None or isinstance(p, (bool, int, float, str)):
            out.append(p)
        else:
            out.append(str(p))
    return out


def canonical(value: Any, t: SpannerType, from_client: bool = False) -> Any:
    """One value, from the source's Arrow form or (``from_client``) the Spanner client's
    Python form, made comparable."""
    if value is None:
        return None
    code = t.code
    if code == "ARRAY":
        assert t.element is not None
        return tuple(canonical(v, t.element, from_client) for v in value)
    if code in ("FLOAT64", "FLOAT32"):
        f = float(value)
        if math.isnan(f):
            return "NaN"
        if code == "FLOAT32":
            import struct

            f = struct.unpack("f", struct.pack("f", f))[0]
        return f
    if code == "NUMERIC":
        d = decimal.Decimal(str(value))
        return "0" if d.is_zero() else format(d.normalize(), "f")
    if code == "TIMESTAMP":
        return _timestamp_text(value)
    if code == "JSON":
        text = value if isinstance(value, str) else json.dumps(_json_plain(value))
        try:
            # JSONB keeps the last of duplicate keys (and its numbers' digits, which the
            # client's JSON reader does not: numbers are compared as a double holds them)
            return json.dumps(
                json.loads(
                    text,
                    parse_int=_json_number,
                    parse_float=_json_number,
                    object_pairs_hook=None if t.postgres else first_keys,
                ),
                sort_keys=True,
                separators=(",", ":"),
            )
        except ValueError:
            return text
    if code == "DATE":
        return value.isoformat() if isinstance(value, dt.date) else str(value)
    if code == "BYTES":
        # the client hands BYTES back as their base64 text
        return base64.b64decode(value) if from_client else bytes(value)
    return value


def _json_number(text: str) -> Any:
    """A JSON number as Spanner keeps it and the client reads it back, whichever way it is
    written (``10000``, ``1e+4``, ``1.0``): an integer literal of Spanner's range as that
    int; any other as the double it is, and a whole one as its int (the client reads
    ``1.0`` back as 1.0, a jsonb's ``0.99999999999999999999`` as 1.0, and writes both out
    as ``1.0``)."""
    if not any(c in text for c in ".eE"):
        value = int(text)
        if INT64_MIN <= value <= UINT64_MAX:
            return value
    f = float(text)
    if f.is_integer() and INT64_MIN <= f <= UINT64_MAX:
        return int(f)
    return f


def _json_plain(v: Any) -> Any:
    # google.cloud.spanner_v1.JsonObject is a dict subclass with extra state: a JSON null,
    # array or scalar is an (almost) empty dict beside its flag, so the flags come first
    if getattr(v, "_is_null", False):
        return None
    if getattr(v, "_is_array", False):
        return [_json_plain(x) for x in getattr(v, "_array_value", [])]
    if getattr(v, "_is_scalar_value", False):
        return _json_plain(getattr(v, "_simple_value", None))
    if isinstance(v, dict):
        return {k: _json_plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_plain(x) for x in v]
    return v


def _timestamp_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    nanos = getattr(v, "nanosecond", None)
    if v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc)
    frac = nanos if nanos is not None and nanos else v.microsecond * 1000
    # the year by hand: strftime's %Y does not zero-pad years before 1000 on glibc ("1-01-01")
    return f"{v.year:04d}" + v.strftime("-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _digest(row: tuple[Any, ...]) -> int:
    return int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "little")


def _fold(rows: Iterable[tuple[tuple[Any, ...], tuple[Any, ...]]]) -> tuple[dict[Any, int], int]:
    by_key: dict[Any, int] = {}
    total = 0
    for key, row in rows:
        h = _digest(row)
        by_key[key] = h
        total = (total + h) % (1 << 64)
    return by_key, total


def compare(
    schema: TableSchema,
    columns: Sequence[str],
    source: Iterable[pa.Table],
    table_rows: Iterable[Sequence[Any]],
) -> TableVerification:
    """Compare source tables (typed, sorted, de-duplicated) with rows read from Spanner."""
    types = [schema.column(c).type for c in columns]
    key_pos = [list(columns).index(k) for k in schema.key_names]
    result = TableVerification(table=schema.name)
    # a source value spanner.commit_timestamp() is whatever time its commit had: that column
    # of that row compares equal to any timestamp the table holds (not to NULL)
    stamp_pos = [i for i, c in enumerate(columns) if schema.column(c).allow_commit_timestamp]
    stamped: dict[tuple[Any, ...], list[int]] = {}

    def canon_rows(
        rows: Iterable[Sequence[Any]], from_client: bool
    ) -> Iterable[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        for r in rows:
            row = tuple(canonical(v, t, from_client) for v, t in zip(r, types))
            key = tuple(row[i] for i in key_pos)
            if stamp_pos and not from_client:
                at = [i for i in stamp_pos if row[i] == COMMIT_TIMESTAMP]
                if any(i in key_pos for i in at):
                    raise _keys_unknown(
                        schema, f"a source row's key column {columns[at[0]]} is "
                        f"{COMMIT_TIMESTAMP}, the time of its commit"
                    )  # fmt: skip
                if at:
                    stamped[key] = at
            elif key in stamped:
                row = tuple(
                    COMMIT_TIMESTAMP if i in stamped[key] and v is not None else v
                    for i, v in enumerate(row)
                )
            yield key, row

    def source_rows() -> Iterable[Sequence[Any]]:
        for t in source:
            cols = [t.column(c).to_pylist() for c in columns]
            yield from zip(*cols)

    src, src_sum = _fold(canon_rows(source_rows(), False))
    dst, dst_sum = _fold(canon_rows(table_rows, True))
    result.source_rows, result.table_rows = len(src), len(dst)
    result.repeated = sum(len(t) for t in source) - len(src) if isinstance(source, list) else 0
    result.source_checksum, result.table_checksum = f"{src_sum:016x}", f"{dst_sum:016x}"
    if src_sum != dst_sum or len(src) != len(dst):
        for k, h in src.items():
            if k not in dst:
                if len(result.missing) < MAX_DIFFS:
                    result.missing.append(k)
            elif dst[k] != h and len(result.different) < MAX_DIFFS:
                result.different.append(k)
        for k in dst:
            if k not in src and len(result.unexpected) < MAX_DIFFS:
                result.unexpected.append(k)
    return result


def _keys_unknown(schema: TableSchema, why: str) -> ConfigError:
    """A table whose rows' keys the source does not hold (a commit time in the key)."""
    return ConfigError(
        f"cannot verify {schema.name}: {why}, so the source does not hold the keys the rows have",
        hint=f"verify the other tables without {schema.name}, or compare its row count "
        "(SELECT COUNT(*)) with the load's report",
    )


def read_table(database: Any, schema: TableSchema, columns: Sequence[str]) -> Iterable[list[Any]]:
    """Every row of the table, at one read timestamp."""
    from google.cloud.spanner_v1 import KeySet

    with database.snapshot() as snap:  # a strong read: one timestamp for the whole read
        yield from snap.read(schema.name, list(columns), KeySet(all_=True))


@dataclass
class RejectList:
    """The rows a reject file lists, for :func:`verify` to leave out."""

    path: str
    records: dict[str, dict[str, dict[int, Optional[set[str]]]]] = field(default_factory=dict)
    """By table, source URI and record number: the keys the lines name (``key (...)``, the
    text of a row Spanner refused), or None when a line names none (a row rejected before
    it was written: its text is the row as read)."""
    existing: dict[str, dict[str, set[int]]] = field(default_factory=dict)
    """By table and source URI: the records Spanner refused because the table held their key
    (insert mode). Compared with the table's row, unless the source has an earlier row of
    that key: the load wrote that one in an earlier flush, and verify, reading the source in
    one, finds this one a duplicate, as the load would have in one flush."""
    loads: dict[str, set[str]] = field(default_factory=dict)
    """The ``load_id`` s of the lines used, by table."""
    wanted: tuple[str, ...] = ()
    found: set[str] = field(default_factory=set)
    """Of ``wanted`` (the load ids asked for), those some line of the file has."""
    elsewhere: dict[str, dict[str, dict[int, set[str]]]] = field(default_factory=dict)
    """By table, source URI and record number: the ``load_id`` s of lines ``wanted`` left
    out (a bad row they list is then told where it is listed)."""
    unreadable: int = 0
    """Lines that are not a reject's JSON object (one cut short by a crash, say)."""
    missing: bool = False
    """No such file (a load that rejects no row writes none)."""

    @classmethod
    def read(cls, path: os.PathLike[str] | str, load_ids: Collection[str] = ()) -> RejectList:
        from .commit.runner import KEY_EXISTS
        from .outfiles import path_problem

        if isinstance(load_ids, str):  # one id, not its characters
            load_ids = (load_ids,)
        out = cls(str(path), wanted=tuple(load_ids))
        wanted = set(load_ids)
        try:
            f = open(path, encoding="utf-8", errors="replace")
        except FileNotFoundError:
            out.missing = True  # a load that rejects nothing writes none
            return out
        except OSError as e:
            raise ConfigError(
                f"{option('rejects')}: cannot read {path}: {path_problem(e, path)}",
                hint="give the reject file the load wrote (spanner-loader.rejects.jsonl in "
                f"the directory it ran in, unless its {option('rejects')} or "
                f"{option('report_path')} put it elsewhere)",
            ) from None
        with f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    table, source, record = r["table"], r["source"], r["record"]
                    load_id = r.get("load_id")
                except (ValueError, KeyError, TypeError):
                    out.unreadable += 1
                    continue
                if load_id in wanted:
                    out.found.add(load_id)
                elif wanted:
                    if isinstance(table, str) and isinstance(record, int):
                        out.elsewhere.setdefault(table, {}).setdefault(str(source), {}).setdefault(
                            record, set()
                        ).add(str(load_id))
                    continue
                if not isinstance(table, str) or not isinstance(record, int) or record < 1:
                    continue
                if KEY_EXISTS in str(r.get("reason")):
                    # refused because the table holds its key: the table's row is compared
                    # with it, not expected missing (see `existing`)
                    out.existing.setdefault(table, {}).setdefault(str(source), set()).add(record)
                    continue
                text = r.get("text")
                by_record = out.records.setdefault(table, {}).setdefault(str(source), {})
                named = by_record.get(record, set())
                if named is not None and isinstance(text, str) and text.startswith("key ("):
                    named.add(text)
                    by_record[record] = named
                else:
                    by_record[record] = None
                out.loads.setdefault(table, set()).add(str(load_id))
        return out

    def advice(self, r: Reject, table: str) -> Optional[str]:
        """For a bad row over the limit that lines of loads not asked for list: name them."""
        ids = self.elsewhere.get(table, {}).get(r.source, {}).get(r.record or 0)
        if not ids:
            return None
        return (
            f"the reject file lists this row under load_id {', '.join(sorted(ids))}, which "
            f"{option('load_ids')} leaves out: give that load too (a resumed load's earlier "
            "runs are its report's earlier_load_ids)"
        )

    def notes(self, read_uris: dict[str, set[str]]) -> list[str]:
        """What a user should know of how the file was used; ``read_uris``: the sources
        verify read, by table."""
        if self.missing:
            return [f"no reject file {self.path}: no rows left out"]
        out = []
        for wanted in self.wanted:
            if wanted not in self.found:
                out.append(f"no line of {self.path} has the load_id {wanted!r}")
        for table, loads in sorted(self.loads.items()):
            if table not in read_uris:
                continue  # not verified
            if len(loads) > 1 and not self.wanted:
                out.append(
                    f"{self.path} lists {table} rows rejected by {len(loads)} loads: all of "
                    f"them are left out ({option('load_ids')} keeps those of one load, the "
                    "load report's load_id and, for a resumed load, its tables' earlier_load_ids)"
                )
            unread = sorted(set(self.records.get(table, {})) - read_uris.get(table, set()))
            if unread:
                shown = ", ".join(unread[:3]) + (", ..." if len(unread) > 3 else "")
                out.append(
                    f"{self.path} lists {table} rows of {len(unread)} source(s) this verify "
                    f"does not read ({shown}): give the sources as the load was given them"
                )
        verified = set(read_uris)
        if self.records and not verified & set(self.records):
            out.append(
                f"{self.path} lists rows of {', '.join(sorted(self.records))} only, none of "
                f"{', '.join(sorted(verified))}: no rows left out"
            )
        if self.unreadable:
            out.append(
                f"{self.unreadable:,} line(s) of {self.path} are not reject records: skipped"
            )
        return out


def verify_table(
    database: Any,
    schema: TableSchema,
    source_tables: Iterable[pa.Table],
    columns: Sequence[str],
    skip: Optional[Sequence[str]] = None,
) -> TableVerification:
    """Compare one table with its source; ``columns`` are the loaded (written) columns."""
    skip = list(skip or [])
    cols = [c for c in columns if c not in skip]
    result = compare(schema, cols, source_tables, read_table(database, schema, cols))
    result.skipped_columns = skip
    return result


@dataclass
class VerifyReport:
    """What :func:`verify` found, per table."""

    tables: list[TableVerification] = field(default_factory=list)
    not_restored: dict[str, list[str]] = field(default_factory=dict)
    """Per table: indexes and foreign keys a load deferred and no load has re-created yet
    (see loader/deferred.py)."""
    notes: list[str] = field(default_factory=list)
    """What verify noticed about its input (the reject file it was given)."""
    reject_file_given: bool = False

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables) and not self.not_restored

    @property
    def exit_code(self) -> ExitCode:
        if not all(t.ok for t in self.tables):
            return ExitCode.VERIFY_MISMATCH
        return ExitCode.NOT_RESTORED if self.not_restored else ExitCode.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "status": {
                ExitCode.OK: "ok",
                ExitCode.VERIFY_MISMATCH: "differs",
                ExitCode.NOT_RESTORED: "not_restored",
            }[self.exit_code],
            "exit_code": int(self.exit_code),
            "ok": self.ok,
            "tables": [t.to_dict() for t in self.tables],
            "not_restored": self.not_restored,
            "notes": list(self.notes),
        }

    def render(self) -> str:
        out = []
        for r in self.tables:
            state = "ok" if r.ok else "DIFFERS"
            out.append(
                f"{r.table}: {state}: source {r.source_rows:,} rows, table "
                f"{r.table_rows:,} rows, checksum {r.source_checksum} / {r.table_checksum}"
            )
            for label, keys in (
                ("missing", r.missing),
                ("unexpected", r.unexpected),
                ("different", r.different),
            ):
                if keys:
                    out.append(f"  {label} keys: {', '.join(repr(k) for k in keys)}")
        for count, what in (
            (
                "left_out",
                "source row(s) the reject file lists, which a load rejected: not compared",
            ),
            (
                "bad_rows",
                "bad source row(s), which a load rejects: not compared (the load's reject file "
                "lists them)",
            ),
        ):
            counted = [(r.table, getattr(r, count)) for r in self.tables if getattr(r, count)]
            if counted:
                each = ", ".join(f"{table}: {n:,}" for table, n in counted)
                out.append(f"note: {each} {what}")
        stale = [r.table for r in self.tables if r.unexpected and r.left_out]
        if stale:
            out.append(
                f"note: {', '.join(stale)}: a row the reject file lists is left out, so a key "
                "the table holds is unexpected if a later run wrote that row (a line of an "
                f"earlier load): {option('load_ids')} keeps the lines of the loads that count"
            )
        repeated = [r for r in self.tables if r.different and r.repeated]
        if repeated:
            out.append(
                "note: "
                + ", ".join(f"{r.table} has {r.repeated:,} source row(s)" for r in repeated)
                + " whose key a later source row repeats: verify expects the last of them (the "
                "last source in listing order, its last row); a table that took another differs "
                "there (a run with `incremental=True` that loaded an older source again after "
                "a newer one, or insert mode, which keeps the first: verify it with "
                f"{option('mode', 'insert')})"
            )
        if any(r.missing for r in self.tables):
            out.append(
                "note: the rows of an unfinished load, and those a load rejected or left out "
                "(`skip_existing`, `skip_missing`), are missing from its table; its reject "
                "file lists those it rejected, each with the reason"
                + (
                    ""
                    if self.reject_file_given
                    else f" ({option('rejects')} names it: the rows it lists are not compared)"
                )
            )
        out.extend(f"note: {n}" for n in self.notes)
        for table, labels in self.not_restored.items():
            out.append(
                f"{table}: deferred by a load and not re-created yet: {', '.join(labels)} "
                "(run the load again: it re-creates them)"
            )
        return "\n".join(out)


def verify(
    config: LoadConfig,
    *,
    database: Any = None,
    rejects: Optional[os.PathLike[str] | str] = None,
    load_ids: Collection[str] = (),
) -> VerifyReport:
    """Check that each table of ``config`` holds exactly its source rows (read as ``load``
    would read them with the same options); nothing is written. ``database`` may be injected;
    by default it comes from ``config.target``.

    ``rejects``: a reject file a load wrote; the source rows it lists for these tables (by
    table, source and record number) were rejected, so they are not expected in the table and
    not compared. ``load_ids``: only the lines of these loads (each line's ``load_id``, the
    load report's ``load_id``); by default every line of the file."""
    from .connection import connect
    from .deferred import left_behind
    from .pipeline import read_source_tables

    if load_ids and not rejects:
        raise ConfigError(
            f"{option('load_ids')} picks lines of a reject file: give it as {option('rejects')}"
        )
    listed = RejectList.read(rejects, load_ids) if rejects else None

    def run(db: Any) -> VerifyReport:
        report = VerifyReport(reject_file_given=listed is not None)
        counts: dict[str, Any] = {}
        left_out: dict[str, tuple[int, int]] = {}
        read = read_source_tables(
            config,
            db,
            reports=counts,
            leave_out=listed.records if listed else None,
            existing=listed.existing if listed else None,
            left_out=left_out,
            bad_row_advice=listed.advice if listed else None,
        )
        for schema, tables in read.values():
            # each flush holds one column set; sources that write fewer columns leave the
            # others as the table had them: only the columns every source writes compare
            every = [set(t.column_names) for t in tables]
            columns = (
                [c for c in tables[0].column_names if all(c in e for e in every)]
                if tables
                else list(schema.key_names)
            )
            partial = sorted(set().union(*every) - set(columns))
            if partial:
                report.notes.append(
                    f"{schema.name}: column(s) {', '.join(partial)} not compared: some of its "
                    "sources do not write them (their rows keep what the table held there)"
                )
            skip = [c for c in columns if c in config.convert.commit_timestamp_columns]
            in_key = [k for k in schema.key_names if k in config.convert.commit_timestamp_columns]
            if in_key:
                raise _keys_unknown(schema, f"its key column {in_key[0]} is set to the commit time")
            checked = verify_table(db, schema, tables, columns, skip)
            checked.skipped_columns += partial
            if schema.name in counts:
                checked.repeated += counts[schema.name].rows_superseded
                checked.bad_rows = counts[schema.name].rows_rejected
            checked.left_out, other_keys = left_out.get(schema.name, (0, 0))
            if other_keys:
                report.notes.append(
                    f"{schema.name}: {other_keys:,} row(s) the reject file lists were compared: "
                    "its line names another key than the source has there now (a line of an "
                    "earlier load of a source since changed)"
                )
            report.tables.append(checked)
        report.not_restored = left_behind(db, config, [t.table for t in report.tables])
        if listed is not None:
            read_uris = {name: {s.uri for s in c.sources} for name, c in counts.items()}
            report.notes.extend(listed.notes(read_uris))
        return report

    if database is not None:
        return run(database)
    from .emulator import EMULATOR_HOST_ENV

    if config.target.emulator and not os.environ.get(EMULATOR_HOST_ENV):
        raise ConfigError(
            f"`emulator=True` without {EMULATOR_HOST_ENV}: an emulator started for verify would "
            "hold no data to compare",
            hint=f"point {EMULATOR_HOST_ENV} at the emulator the load wrote to (one kept "
            "running with `spanner-loader emulator start`)",
        )
    # nothing is created or changed: a database name mistyped is told as such
    with connect(config.target, create=False) as db:
        return run(db)
