"""Pre-splitting: split points for a new table (and its indexes) from the sources' own keys.

An empty table is one split; Spanner splits it as the load goes, which takes time, so a
multi-node instance is not fully used at first (SPANNER_FACTS.md, "Pre-splitting"). Split
points added ahead of the load (``DatabaseAdmin.AddSplitPoints``) give the table its splits
before the first commit. Google's guidance: about 10 split points per node, none for small
instances, and add them hours ahead, since they take effect over time. So the ``presplit``
command, run ahead of the load, is the main path; ``load --presplit`` does the same at the start
of the load, best-effort.

How the points are found: the sources' rows are sampled (loader/sample.py) through the load's
own parse and convert stages, sorted in Spanner's key order (loader/sort.py: DESC parts and
NULLs as Spanner orders them) and de-duplicated; the points are the keys at evenly spaced
quantiles. A table's point is its primary key; an index's is the index key and the table key
behind it (as ``gcloud spanner databases splits add`` sends an ``INDEX ... TableKey (...)``
line: two ``Key`` s in one ``SplitPoints``). Key values are encoded by the loader's own encoder
(loader/encode.py), exactly as a mutation carries them.

What happens to them: every request holds at most 100 points; the points are recorded in the
job's state (part ``split_points``) and, when the load has finished, expired (sent again with
``expire_time`` now) unless ``keep_split_points``; if nothing expires them, Spanner drops them
at their ``expire_time`` (``split_expiry`` days, 10 by default, at most 30). Where the API
answers UNIMPLEMENTED (the emulator), PERMISSION_DENIED (the caller lacks
``spanner.databases.addSplitPoints``), RESOURCE_EXHAUSTED (the instance's split-point quota) or
the client predates the method (google-cloud-spanner < 3.53), one note says so and the load goes
on without them.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Optional, Sequence

import numpy as np
import pyarrow as pa

from .config import LoadConfig, TableJob
from .encode import encode_rows
from .errors import option
from .schema import Index, KeyPart, TableSchema
from .sort import duplicate_key_mask, sort_indices, take_table

POINTS_PER_NODE = 10
MAX_POINTS_PER_REQUEST = 100
INITIATOR = "spanner-loader"
STATE_PART = "split_points"
REQUEST_TIMEOUT = 60.0
"""Seconds per AddSplitPoints attempt; UNAVAILABLE and DEADLINE_EXCEEDED are retried for at
most :data:`RETRY_TIMEOUT` (the client's own default retries them for an hour)."""
RETRY_TIMEOUT = 120.0

Say = Callable[[str], None]
TableKeys = Callable[[TableSchema, Any, int], Optional[pa.Table]]
"""(schema, its :class:`loader.sample.Sample`, the points it is given) -> its split points'
keys, None for the sample's quantiles."""


@dataclass(frozen=True)
class SplitObject:
    """The split points of one table, or of one index of it."""

    table: str
    index: Optional[str]
    points: tuple[tuple[bytes, ...], ...]
    """Each point's ``ListValue`` wire bytes, in key order: (table key,) for a table, (index key,
    table key) for an index."""

    @property
    def name(self) -> str:
        return f"{self.table} index {self.index}" if self.index else self.table

    def to_state(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "index": self.index,
            "points": [[base64.b64encode(k).decode() for k in p] for p in self.points],
        }

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> SplitObject:
        points = tuple(tuple(base64.b64decode(k) for k in p) for p in d.get("points", []))
        return cls(str(d["table"]), d.get("index"), points)


# -- choosing the points ------------------------------------------------------------------------


def list_values(table: pa.Table, columns: Sequence[str], schema: TableSchema) -> list[bytes]:
    """Each row of ``table[columns]`` as ``ListValue`` wire bytes (loader/encode.py's rows are
    ``1a <varint length> <ListValue>``: the tag and length are cut off)."""
    if not columns:
        return [b""] * table.num_rows
    rows = encode_rows(
        [table.column(c) for c in columns], [schema.column(c).type for c in columns]
    ).to_pylist()
    out = []
    for row in rows:
        i = 1
        while row[i] & 0x80:  # the length's varint
            i += 1
        out.append(bytes(row[i + 1 :]))
    return out


def quantile_rows(rows: pa.Table, key: Sequence[KeyPart], count: int) -> pa.Table:
    """``count`` rows of ``rows`` (fewer when it has fewer distinct keys) at evenly spaced
    quantiles of its distinct keys in Spanner's key order, in that order; never the first key
    (a split there would leave an empty split before it)."""
    if count <= 0 or rows.num_rows < 2:
        return rows.slice(0, 0)
    ordered = take_table(rows, sort_indices(rows, key))
    distinct = ordered.filter(pa.array(~duplicate_key_mask(ordered, key)))
    m = distinct.num_rows
    n = min(count, m - 1)
    if n <= 0:
        return rows.slice(0, 0)
    picks = np.array([(i + 1) * m // (n + 1) for i in range(n)], dtype=np.int64)
    return distinct.take(pa.array(picks))


def splittable_indexes(schema: TableSchema, written: Sequence[str]) -> list[Index]:
    """Secondary indexes that can be split from the sampled columns (not search or vector
    indexes, which AddSplitPoints refuses, and not those over a column the load does not
    write)."""
    have = set(written)
    return [
        ix for ix in schema.indexes if ix.kind == "INDEX" and all(c in have for c in ix.columns)
    ]


def table_points(
    schema: TableSchema, rows: pa.Table, count: int, chosen: Optional[pa.Table] = None
) -> Optional[SplitObject]:
    """``count`` split points of a table from its sampled ``rows``, or the keys of ``chosen``
    (distinct, in key order: a Beam load's key-range boundaries); None: no point found."""
    picked = quantile_rows(rows, schema.primary_key, count) if chosen is None else chosen
    if not picked.num_rows:
        return None
    keys = list_values(picked, [p.name for p in schema.primary_key], schema)
    return SplitObject(schema.name, None, tuple((k,) for k in keys))


def index_points(
    schema: TableSchema, rows: pa.Table, ix: Index, count: int
) -> Optional[SplitObject]:
    """``count`` split points of index ``ix``: its entries' keys (index key, then the table
    key) at quantiles in the index's order; a NULL_FILTERED index has no entry for a row with
    a NULL in its key."""
    pk = [p.name for p in schema.primary_key]
    # aliases: the same column may be in both keys
    renamed = {f"i{n}": c for n, c in enumerate(ix.columns)}
    renamed.update({f"p{n}": c for n, c in enumerate(pk)})
    helper = pa.table({alias: rows.column(c) for alias, c in renamed.items()})
    if ix.null_filtered and ix.columns:
        valid = np.ones(helper.num_rows, dtype=bool)
        for n in range(len(ix.columns)):
            col = helper.column(f"i{n}").is_valid()
            valid &= np.asarray(col.to_numpy(zero_copy_only=False), dtype=bool)
        helper = helper.filter(pa.array(valid))
    key = [KeyPart(f"i{n}", c in ix.descending) for n, c in enumerate(ix.columns)]
    key += [KeyPart(f"p{n}", p.desc) for n, p in enumerate(schema.primary_key)]
    picked = quantile_rows(helper, key, count)
    if not picked.num_rows:
        return None
    width = len(ix.columns)
    ix_table = picked.select(list(range(width))).rename_columns(list(ix.columns))
    pk_table = picked.select(list(range(width, picked.num_columns))).rename_columns(pk)
    ix_keys = list_values(ix_table, ix.columns, schema)
    pk_keys = list_values(pk_table, pk, schema)
    return SplitObject(schema.name, ix.name, tuple(zip(ix_keys, pk_keys)))


def shares(weights: Sequence[float], total: int) -> list[int]:
    """``total`` split points shared in proportion to ``weights`` (largest remainders)."""
    w = sum(weights)
    if total <= 0 or w <= 0:
        return [0] * len(weights)
    exact = [total * x / w for x in weights]
    out = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: out[i] - exact[i])[: total - sum(out)]:
        out[i] += 1
    return out


# -- the requests -------------------------------------------------------------------------------


def chunks(objects: Sequence[SplitObject]) -> list[list[SplitObject]]:
    """The objects cut into requests of at most :data:`MAX_POINTS_PER_REQUEST` points, in
    order; a table's points may continue in the next request."""
    out: list[list[SplitObject]] = [[]]
    room = MAX_POINTS_PER_REQUEST
    for obj in objects:
        points = list(obj.points)
        while points:
            if room == 0:
                out.append([])
                room = MAX_POINTS_PER_REQUEST
            take, points = points[:room], points[room:]
            out[-1].append(SplitObject(obj.table, obj.index, tuple(take)))
            room -= len(take)
    return [c for c in out if c]


def request(database: str, objects: Sequence[SplitObject], expire: dt.datetime) -> Any:
    """One ``AddSplitPointsRequest`` (protobuf) for ``objects`` (at most 100 points): a table's
    points in one ``SplitPoints``, each index point in its own (index key, table key)."""
    from google.cloud.spanner_admin_database_v1 import AddSplitPointsRequest

    req = AddSplitPointsRequest.pb()(database=database, initiator=INITIATOR)
    for obj in objects:
        groups = [obj.points] if obj.index is None else [(p,) for p in obj.points]
        for group in groups:
            sp = req.split_points.add(table=obj.table)
            if obj.index:
                sp.index = obj.index
            for point in group:
                for key in point:
                    sp.keys.add().key_parts.MergeFromString(key)
            sp.expire_time.FromDatetime(expire)
    return req


class SplitPointsUnavailable(Exception):
    """The split points could not be added (or expired); ``str()`` is the one-line note."""

    def __init__(self, note: str, kind: str) -> None:
        super().__init__(note)
        self.kind = kind
        """unimplemented (the emulator), permission, quota, client (the method is missing) or
        failed (any other error: an invalid request, a network failure)."""


def admin_api(project: str) -> Any:
    """The public ``DatabaseAdminClient`` of a client for ``project`` (the emulator's, under
    SPANNER_EMULATOR_HOST)."""
    from .connection import make_client

    return make_client(project).database_admin_api


def send(
    admin: Any, database: str, objects: Sequence[SplitObject], expire: dt.datetime
) -> tuple[int, Optional[SplitPointsUnavailable]]:
    """Send the points in requests of at most 100; how many were sent, and why not all."""
    from google.api_core import exceptions as gexc

    from .commit.spanner import client_version

    method = getattr(admin, "add_split_points", None)
    try:
        from google.cloud.spanner_admin_database_v1 import AddSplitPointsRequest
    except ImportError:
        method = None
    if method is None:
        return 0, SplitPointsUnavailable(
            f"split points not added: google-cloud-spanner {client_version()} lacks "
            "DatabaseAdmin.add_split_points (3.53 and later have it)",
            "client",
        )
    from google.api_core.retry import Retry, if_exception_type

    retry = Retry(
        predicate=if_exception_type(gexc.ServiceUnavailable, gexc.DeadlineExceeded),
        initial=1.0,
        maximum=32.0,
        multiplier=1.3,
        timeout=RETRY_TIMEOUT,
    )
    sent = 0
    total = sum(len(o.points) for o in objects)
    for chunk in chunks(objects):
        req = AddSplitPointsRequest.wrap(request(database, chunk, expire))
        try:
            method(request=req, retry=retry, timeout=REQUEST_TIMEOUT)
        except gexc.MethodNotImplemented:
            return sent, SplitPointsUnavailable(
                "split points not added: the server does not implement AddSplitPoints "
                "(the emulator has no splits)",
                "unimplemented",
            )
        except gexc.PermissionDenied as e:
            return sent, SplitPointsUnavailable(
                f"split points not added: permission denied ({_first_line(e)}); AddSplitPoints "
                "needs spanner.databases.addSplitPoints (roles/spanner.databaseAdmin has it, "
                "roles/spanner.databaseUser does not)",
                "permission",
            )
        except gexc.ResourceExhausted as e:
            return sent, SplitPointsUnavailable(
                f"split points: the instance's split-point quota is used up after {sent} of "
                f"{total} ({_first_line(e)}); the rest were not added",
                "quota",
            )
        except gexc.GoogleAPICallError as e:
            return sent, SplitPointsUnavailable(
                f"split points not added: AddSplitPoints failed after {sent} of {total}: "
                f"{_first_line(e)}",
                "failed",
            )
        sent += sum(len(o.points) for o in chunk)
    return sent, None


def _first_line(e: Exception) -> str:
    text = str(getattr(e, "message", "") or e)
    return text.splitlines()[0] if text else type(e).__name__


# -- a job's split points, from sampling to expiry -----------------------------------------------


def _points(n: int) -> str:
    return f"{n:,} split point{'' if n == 1 else 's'}"


@dataclass
class ObjectReport:
    table: str
    index: Optional[str]
    points: int

    @property
    def name(self) -> str:
        return f"{self.table} index {self.index}" if self.index else self.table

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "index": self.index, "points": self.points}


@dataclass
class SplitReport:
    """What pre-splitting did: the points per table and index, when they expire, and notes."""

    nodes: Optional[float] = None
    objects: list[ObjectReport] = field(default_factory=list)
    sent: int = 0
    expire_time: Optional[str] = None
    expired: int = 0
    """Points expired after the load."""
    kept: bool = False
    notes: list[str] = field(default_factory=list)
    error: Optional[SplitPointsUnavailable] = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "planned": sum(o.points for o in self.objects),
            "sent": self.sent,
            "expire_time": self.expire_time,
            "expired": self.expired,
            "kept": self.kept,
            "objects": [o.to_dict() for o in self.objects],
        }

    def render(self) -> str:
        out = [f"{o.name}: {_points(o.points)}" for o in self.objects]
        total = sum(o.points for o in self.objects)
        out.append(
            f"{self.sent:,} of {total:,} split points sent"
            + (f", expiring {self.expire_time}" if self.sent and self.expire_time else "")
        )
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out)


def instance_nodes(config: LoadConfig) -> float:
    """The instance's size in nodes (processing units / 1000), read with the public client."""
    from .connection import make_client

    instance = make_client(config.target.project).instance(config.target.instance)
    instance.reload()
    units = getattr(instance, "processing_units", 0) or 0
    return units / 1000 if units else float(getattr(instance, "node_count", 0) or 0)


def plan(
    config: LoadConfig,
    schemas: dict[str, TableSchema],
    jobs: Sequence[TableJob],
    report: SplitReport,
    *,
    storage_client: Any = None,
    read_streams: bool = True,
    say: Say = lambda _line: None,
    deferred: Collection[str] = (),
    table_keys: Optional[TableKeys] = None,
) -> list[SplitObject]:
    """Sample every job's sources and choose its tables' and indexes' split points; indexes
    named in ``deferred`` (dropped for the load, re-created after it) get none.
    ``table_keys`` chooses a table's points instead of the sample's quantiles (``load --runner``:
    its key-range boundaries, loader/beam/splits.py)."""
    from .sample import sample_table

    nodes = config.nodes
    if nodes is None:
        try:
            nodes = instance_nodes(config)
        except Exception as e:  # noqa: BLE001 - any failure: the user gives --nodes
            report.notes.append(
                f"split points not added: cannot read the instance's size ({_first_line(e)}); "
                f"give its node count as {option('nodes')}"
            )
            return []
    report.nodes = nodes
    if nodes < 1:
        report.notes.append(
            f"no split points: the instance has {nodes:g} nodes, and Google's guidance is that "
            f"instances under one node need none ({option('nodes')} sizes them anyway)"
        )
        return []
    sampled = []
    for job in jobs:
        schema = schemas[job.table]
        if any(p.name in config.convert.commit_timestamp_columns for p in schema.primary_key):
            report.notes.append(f"{schema.name}: no split points (its key holds a commit time)")
            continue
        wanted = [p.name for p in schema.primary_key]
        for ix in schema.indexes:
            wanted += [c for c in ix.columns if c not in wanted]
        wanted = [c for c in wanted if c not in config.convert.commit_timestamp_columns]
        say(f"presplit: sampling the keys of {schema.name}")
        sample = sample_table(
            config,
            job,
            schema,
            wanted,
            storage_client=storage_client,
            read_streams=read_streams,
        )
        report.notes.extend(sample.notes)
        have = sample.rows.column_names
        if sample.rows.num_rows == 0 and sample.rejected:
            report.notes.append(
                f"{schema.name}: no keys sampled, {sample.rejected:,} sampled row(s) rejected "
                f"(the first: {sample.first_reject}); the load will reject them too"
            )
        if any(p.name not in have for p in schema.primary_key):
            continue  # nothing sampled (an empty input, or only pipes left out)
        indexes = [ix for ix in splittable_indexes(schema, have) if ix.name not in deferred]
        sampled.append((schema, sample, indexes))
    weights = []
    for _schema, sample, indexes in sampled:
        w = float(sample.bytes_total or sample.rows.num_rows)
        weights += [w] * (1 + len(indexes))
    counts = iter(shares(weights, round(POINTS_PER_NODE * nodes)))
    objects: list[SplitObject] = []
    for schema, sample, indexes in sampled:
        count = next(counts)
        chosen = table_keys(schema, sample, count) if table_keys is not None else None
        found = [table_points(schema, sample.rows, count, chosen)]
        found += [index_points(schema, sample.rows, ix, next(counts)) for ix in indexes]
        objects += [o for o in found if o is not None]
    for obj in objects:
        report.objects.append(ObjectReport(obj.table, obj.index, len(obj.points)))
    return objects


def add(
    config: LoadConfig,
    objects: Sequence[SplitObject],
    report: SplitReport,
    *,
    admin: Any = None,
    now: Optional[dt.datetime] = None,
    say: Say = lambda _line: None,
) -> list[SplitObject]:
    """Send ``objects`` with an expire time ``split_expiry`` days ahead; the objects whose
    points were sent (all of them, or those before a refusal)."""
    if not objects:
        return []
    now = now or dt.datetime.now(dt.timezone.utc)
    expire = now + dt.timedelta(days=config.split_expiry)
    if admin is None:
        admin = admin_api(config.target.project)
    sent, why = send(admin, config.target.path, objects, expire)
    report.sent = sent
    if sent:
        report.expire_time = expire.isoformat(timespec="seconds")
        for o in report.objects:
            say(f"presplit: {o.name}: {_points(o.points)}")
        say(f"presplit: {_points(sent)} sent, expiring {report.expire_time}")
    if why is not None:  # the report says it (one line)
        report.notes.append(str(why))
        report.error = why
    return _first(objects, sent)


def _first(objects: Sequence[SplitObject], n: int) -> list[SplitObject]:
    """The objects holding the first ``n`` points."""
    out = []
    for obj in objects:
        if n <= 0:
            break
        out.append(SplitObject(obj.table, obj.index, obj.points[:n]))
        n -= len(obj.points)
    return out


def expire(
    config: LoadConfig,
    objects: Sequence[SplitObject],
    report: SplitReport,
    *,
    admin: Any = None,
    now: Optional[dt.datetime] = None,
) -> None:
    """Send the points again with ``expire_time`` now: Spanner drops them at once."""
    if not objects:
        return
    if admin is None:
        admin = admin_api(config.target.project)
    sent, why = send(admin, config.target.path, objects, now or dt.datetime.now(dt.timezone.utc))
    report.expired += sent
    if why is not None:
        report.notes.append(str(why).replace("not added", "not expired"))
