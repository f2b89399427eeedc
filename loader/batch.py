"""Count mutations, cut sorted rows into commits that fit the budgets, and order tables.

Where mutations are counted: :func:`mutation_cost_per_row`.
Where commits are sized: :func:`plan_batches`. Where tables are ordered: :func:`load_order`.

Spanner limits a commit to 80,000 mutations (secondary-index entries included) and 100 MiB;
the loader's defaults are far below both (20,000 and 4 MiB, see :class:`Budget`), which is the
safety margin SPANNER_FACTS.md asks for, since the exact index rule is not published. The byte
budget is a batching target, not a limit on rows: a valid row larger than it is committed in a
batch of its own, up to :data:`COMMIT_CEILING_BYTES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import pyarrow as pa

from .errors import ConfigError, SchemaError, option
from .schema import TableSchema
from .types import one_array

__all__ = [
    "SPANNER_MAX_MUTATIONS",
    "SPANNER_MAX_COMMIT_BYTES",
    "COMMIT_HEADROOM_BYTES",
    "COMMIT_CEILING_BYTES",
    "Budget",
    "BatchPlan",
    "mutation_cost_per_row",
    "plan_batches",
    "oversize_reason",
    "format_bytes",
    "load_order",
    "dependency_cycles",
]

#: Spanner's hard per-commit limits (Quotas and limits page).
SPANNER_MAX_MUTATIONS = 80_000
SPANNER_MAX_COMMIT_BYTES = 100 << 20
#: Room kept below Spanner's commit limit for what the request carries besides the rows and
#: their Write header: the session name, transaction and request options (a tag), and a
#: checkpoint marker (reserved separately by the pipeline, too). Those are a few KiB at most;
#: 1 MiB also absorbs a difference between our encoded size and the server's accounting.
COMMIT_HEADROOM_BYTES = 1 << 20
#: The most a single commit of ours may carry: a row larger than --max-batch-bytes is
#: committed alone up to this size; only a row over it is rejected.
COMMIT_CEILING_BYTES = SPANNER_MAX_COMMIT_BYTES - COMMIT_HEADROOM_BYTES


# --------------------------------------------------------------------------------------------
# Mutation counting


def _index_refs(table: TableSchema) -> dict[str, int]:
    """Lower-cased column name -> number of secondary indexes that list it (key or STORING)."""
    refs: dict[str, int] = {}
    for index in table.indexes:
        # A column named both as key and STORING in one index is still one entry of that index.
        for name in {c.lower() for c in (*index.columns, *index.storing)}:
            refs[name] = refs.get(name, 0) + 1
    return refs


def mutation_cost_per_row(table: TableSchema, written: Sequence[str], mode: str = "upsert") -> int:
    """Mutations one write of a row in ``mode`` (insert, upsert, replace, update) costs.

    Apache Beam SpannerIO's rule (SPANNER_FACTS.md "How mutations are counted"): each written
    column counts once, plus once for every secondary index (FK-backing ones included) that
    lists it among its key or STORING columns. Key columns are always written, whether or not
    ``written`` names them. Names match case-insensitively, like GoogleSQL identifiers.

    Spanner writes more than the columns sent, and the rule is not published, so the count
    keeps a margin where the row touches more (a tryout's table went over the budget): a
    generated column is counted as written (Spanner computes a stored one on each write of
    a column it reads), and unless ``mode`` is update, which changes rows in place, a row may
    be new: it is then in every index, whichever columns it names, and a column with a
    DEFAULT that the CSV leaves out is filled; so every index's columns count, and such
    columns too.
    """
    refs = _index_refs(table)
    inserts = mode != "update"
    seen: set[str] = set()
    cost = 0
    for name in (*table.key_names, *written):
        folded = name.lower()
        if folded in seen:
            continue
        if table.find_column(name) is None:
            raise SchemaError(
                f"table {table.name} has no column {name!r}",
                hint="columns: " + ", ".join(c.name for c in table.columns),
            )
        seen.add(folded)
        cost += 1 + (0 if inserts else refs.get(folded, 0))
    for col in table.columns:
        folded = col.name.lower()
        if folded not in seen and (col.generated or (inserts and col.has_default)):
            seen.add(folded)
            cost += 1 + (0 if inserts else refs.get(folded, 0))
    if inserts:  # every index entry of a new row
        cost += sum(refs.values())
    return cost


# --------------------------------------------------------------------------------------------
# Batch planning


def format_bytes(n: float) -> str:
    """Human size, e.g. ``5.2 MiB``; whole numbers print without a fraction (``4 MiB``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(n)} bytes"


@dataclass(frozen=True)
class Budget:
    """Per-commit limits a batch must respect."""

    max_mutations: int = 20_000
    """Mutations per commit, index entries included (Spanner's hard limit is 80,000)."""
    max_bytes: int = 4 << 20
    """Encoded bytes per commit request, batch header included (Spanner allows 100 MiB).
    A soft budget: a row larger than it is committed alone, up to ``ceiling_bytes``."""
    max_rows: Optional[int] = None
    """Optional cap on rows per commit."""
    ceiling_bytes: int = COMMIT_CEILING_BYTES
    """The hard limit on one commit (a lone row, batch header included); a row over it, or
    over ``max_bytes`` if that is higher, cannot be committed at all."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_mutations <= SPANNER_MAX_MUTATIONS:
            raise ConfigError(
                f"{option('max_mutations', self.max_mutations)} is out of range",
                hint=f"Spanner allows 1 to {SPANNER_MAX_MUTATIONS:,} mutations per commit",
            )
        if not 1 <= self.max_bytes <= SPANNER_MAX_COMMIT_BYTES:
            raise ConfigError(
                f"{option('max_batch_bytes', self.max_bytes)} is out of range",
                hint=f"Spanner allows commits up to {format_bytes(SPANNER_MAX_COMMIT_BYTES)}; "
                "1-5 MiB is the recommended size",
            )
        if self.max_rows is not None and self.max_rows < 1:
            raise ConfigError(
                f"{option('batch_rows', self.max_rows)} is out of range",
                hint="use a positive number",
            )
        if not 1 <= self.ceiling_bytes <= SPANNER_MAX_COMMIT_BYTES:
            raise ValueError(f"ceiling_bytes must be 1..{SPANNER_MAX_COMMIT_BYTES}")

    @property
    def hard_bytes(self) -> int:
        """Bytes a commit of one row may hold: the ceiling, or the budget when that is higher."""
        return max(self.max_bytes, self.ceiling_bytes)


@dataclass(frozen=True, eq=False)
class BatchPlan:
    """Contiguous row ranges, one per commit, plus rows too big for any commit.

    Batch ``i`` is rows ``starts[i]:ends[i]`` (end exclusive) of the sorted buffer; ranges are
    in ascending order and disjoint. Every row is in exactly one batch or in ``oversize``. A
    batch over the byte budget holds a single row (one larger than the budget on its own).
    """

    starts: np.ndarray
    """int64 first row of each batch."""
    ends: np.ndarray
    """int64 one past the last row of each batch."""
    oversize: np.ndarray
    """int64 indices of rows that alone exceed the hard per-commit limit (to be rejected)."""
    nbytes: np.ndarray
    """int64 encoded bytes of each batch, header overhead included."""
    cost_per_row: int
    """Mutations per row the plan was made with."""

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """The batches as ``(start, end)`` pairs, end exclusive."""
        return list(zip(self.starts.tolist(), self.ends.tolist()))

    @property
    def rows(self) -> np.ndarray:
        """Rows in each batch."""
        return self.ends - self.starts

    @property
    def mutations(self) -> np.ndarray:
        """Mutations in each batch."""
        return self.rows * self.cost_per_row


def oversize_reason(row_bytes: int, budget: Budget, overhead_bytes: int = 0) -> str:
    """Reject reason for a row that cannot fit in any commit, e.g. ``row is 120 MiB encoded,
    over the 99 MiB one commit may carry (Spanner's limit is 100 MiB per commit)``."""
    extra = f" plus {format_bytes(overhead_bytes)} of batch header" if overhead_bytes else ""
    if budget.max_bytes > budget.ceiling_bytes:
        limit = f"{format_bytes(budget.max_bytes)} `max_batch_bytes` budget"
    else:
        limit = f"{format_bytes(budget.ceiling_bytes)} one commit may carry"
    return (
        f"row is {format_bytes(row_bytes)} encoded{extra}, over the {limit} (Spanner's limit "
        f"is {format_bytes(SPANNER_MAX_COMMIT_BYTES)} per commit)"
    )


def plan_batches(
    row_bytes: Union[np.ndarray, pa.Array, pa.ChunkedArray, Sequence[int]],
    cost_per_row: int,
    budget: Budget,
    overhead_bytes: int = 0,
    table: Optional[str] = None,
) -> BatchPlan:
    """Split sorted rows into contiguous batches, each as large as the budgets allow.

    ``row_bytes[i]`` is row ``i``'s encoded size; a batch of rows ``s:e`` costs
    ``sum(row_bytes[s:e]) + overhead_bytes`` bytes (the overhead is the Write header: table
    and column names), ``(e - s) * cost_per_row`` mutations and ``e - s`` rows, and every batch
    stays within all three budgets. Greedy: a batch ends only where the next row would break a
    budget, so there are as few commits as contiguity permits.

    ``budget.max_bytes`` is a target, not a limit on rows: a row whose size plus the overhead
    alone exceeds it is committed in a batch of its own (the batches on either side are cut
    around it, key order kept), as long as it stays within ``budget.hard_bytes`` (a bit under
    Spanner's 100 MiB per commit). Only a row over that is put in ``oversize`` (the caller
    rejects it, see :func:`oversize_reason`); batches continue on either side of it. A row costing more mutations than ``budget.max_mutations`` is a
    configuration problem and raises :class:`ConfigError`.

    Vectorised: one cumulative sum, then one ``searchsorted`` per batch.
    """
    if cost_per_row < 0:
        raise ValueError(f"cost_per_row must be >= 0, got {cost_per_row}")
    where = f" of {table}" if table else ""
    if cost_per_row > budget.max_mutations:
        raise ConfigError(
            f"one row{where} costs {cost_per_row:,} mutations (columns written plus their "
            "secondary-index entries), over the `max_mutations` budget of "
            f"{budget.max_mutations:,}",
            hint=f"raise `max_mutations` (Spanner allows up to {SPANNER_MAX_MUTATIONS:,} per "
            "commit), write fewer columns, or create secondary indexes after the load",
        )
    if overhead_bytes < 0:
        raise ValueError(f"overhead_bytes must be >= 0, got {overhead_bytes}")
    if overhead_bytes >= budget.max_bytes:
        raise ConfigError(
            f"the batch header{where} alone is {format_bytes(overhead_bytes)}, not under the "
            f"{format_bytes(budget.max_bytes)} `max_batch_bytes` budget",
            hint="raise `max_batch_bytes`",
        )

    if isinstance(row_bytes, pa.ChunkedArray):
        row_bytes = one_array(row_bytes)
    if isinstance(row_bytes, pa.Array):
        sizes = np.asarray(row_bytes.to_numpy(zero_copy_only=False))
    else:
        sizes = np.asarray(row_bytes)
    if sizes.dtype.kind not in "iu":
        sizes = sizes.astype(np.int64)
    if sizes.ndim != 1:
        raise ValueError("row_bytes must be one-dimensional")
    if sizes.size and int(sizes.min()) < 0:
        raise ValueError("row_bytes must be non-negative")
    n = int(sizes.shape[0])

    room = budget.max_bytes - overhead_bytes  # payload bytes a batch may hold
    hard_room = budget.hard_bytes - overhead_bytes  # payload bytes a lone row may have
    rows_cap = budget.max_mutations // cost_per_row if cost_per_row else n
    if budget.max_rows is not None:
        rows_cap = min(rows_cap, budget.max_rows)
    rows_cap = max(rows_cap, 1)

    # the sizes keep their own integer type (binary_length gives int32): no widened copy
    top = int(np.iinfo(sizes.dtype).max)
    too_big = sizes > room if room < top else np.zeros(n, dtype=bool)
    oversize = np.zeros(0, dtype=np.int64)
    alone: Optional[np.ndarray] = None  # rows over the budget but committable: each alone
    if too_big.any():
        if hard_room < top:
            oversize = np.flatnonzero(sizes > hard_room).astype(np.int64)
        alone = too_big.copy()
        alone[oversize] = False
    cum = np.empty(n + 1, dtype=np.int64)
    cum[0] = 0
    next_ok: Optional[np.ndarray] = None
    if alone is not None:
        # next_ok[i]: first row >= i that can be committed (n if none); lets the loop jump
        # over a run of oversize rows in one step.
        ok = np.ones(n, dtype=bool)
        ok[oversize] = False
        idx = np.where(ok, np.arange(n, dtype=np.int64), n)
        next_ok = np.append(np.minimum.accumulate(idx[::-1])[::-1], n)
        # Rows over the budget are given a size no batch can hold, so searchsorted stops
        # before them; each is then a batch of its own (its real size goes into nbytes).
        np.cumsum(np.where(too_big, room + 1, sizes), out=cum[1:])
    else:
        np.cumsum(sizes, out=cum[1:])

    starts: list[int] = []
    ends: list[int] = []
    pos = 0 if next_ok is None or not n else int(next_ok[0])
    while pos < n:
        if alone is not None and alone[pos]:
            end = pos + 1  # over the budget on its own: a commit of its own
        else:
            # Largest end with cum[end] - cum[pos] <= room; at least pos + 1 (row pos fits).
            end = int(np.searchsorted(cum, cum[pos] + room, side="right")) - 1
            end = min(end, pos + rows_cap, n)
        assert end > pos, "row pos fits on its own, so a batch holds at least it"
        starts.append(pos)
        ends.append(end)
        pos = end if next_ok is None or end >= n else int(next_ok[end])

    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    nbytes = (cum[e] - cum[s] + overhead_bytes).astype(np.int64)
    if alone is not None and s.size:
        lone = alone[s]
        nbytes[lone] = sizes[s[lone]].astype(np.int64) + overhead_bytes
    return BatchPlan(s, e, oversize, nbytes, cost_per_row)


# --------------------------------------------------------------------------------------------
# Table order


def _dependencies(schemas: Mapping[str, TableSchema]) -> dict[str, list[str]]:
    """Requested name -> requested names that must load before it (parents, FK targets)."""
    by_folded: dict[str, str] = {}
    for requested, schema in schemas.items():
        by_folded.setdefault(schema.name.lower(), requested)
        by_folded.setdefault(requested.lower(), requested)
    deps: dict[str, list[str]] = {}
    for requested, schema in schemas.items():
        wanted = ([schema.parent] if schema.parent else []) + list(schema.references)
        found = [by_folded.get(w.lower()) for w in wanted]
        # Tables outside this load already hold their rows; a self-reference needs no order.
        deps[requested] = list(dict.fromkeys(d for d in found if d is not None and d != requested))
    return deps


def _reach(deps: Mapping[str, list[str]]) -> dict[str, set[str]]:
    """Table -> every table it transitively depends on."""
    out: dict[str, set[str]] = {}
    for start in deps:
        seen: set[str] = set()
        stack = list(deps[start])
        while stack:
            t = stack.pop()
            if t not in seen:
                seen.add(t)
                stack.extend(deps[t])
        out[start] = seen
    return out


def _components(schemas: Mapping[str, TableSchema]) -> tuple[dict[str, list[str]], list[str]]:
    """(dependencies, component representative per table); a component is a dependency cycle."""
    deps = _dependencies(schemas)
    reach = _reach(deps)
    names = list(schemas)
    rep: dict[str, str] = {}
    for t in names:
        if t in rep:
            continue
        for u in names:
            if u == t or (u in reach[t] and t in reach[u]):
                rep[u] = t
    return deps, [rep[t] for t in names]


def _interleave_depth(schemas: Mapping[str, TableSchema], name: str) -> int:
    by_folded = {s.name.lower(): s for s in schemas.values()}
    depth, parent = 0, schemas[name].parent
    while parent and depth < 64:  # 64 > Spanner's interleave depth of 7; guards bad input
        depth += 1
        p = by_folded.get(parent.lower())
        parent = p.parent if p else None
    return depth


def load_order(schemas: Mapping[str, TableSchema]) -> list[list[str]]:
    """Group tables into waves: every table loads after its parent and its FK targets.

    Returns the mapping's keys in waves. A table's INTERLEAVE IN PARENT parent
    (``TableSchema.parent``) and the tables it references (``TableSchema.references``) are in
    earlier waves when they are part of this load (tables outside it are taken to be loaded
    already). Tables in one wave do not depend on each other and may load concurrently,
    except for a dependency cycle (foreign keys can form one): its tables share one wave,
    listed parents first, then in the mapping's order. :func:`dependency_cycles` names the
    cycles so the caller can warn that they cannot be ordered. Within a wave, tables keep the
    mapping's order, so the result is deterministic.
    """
    names = list(schemas)
    position = {t: i for i, t in enumerate(names)}
    deps, reps = _components(schemas)
    rep_of = dict(zip(names, reps))
    level: dict[str, int] = {}

    def comp_level(r: str) -> int:
        if r in level:
            return level[r]
        members = [t for t in names if rep_of[t] == r]
        preds = {rep_of[d] for t in members for d in deps[t]} - {r}
        lv = 0
        for p in preds:  # the condensation is acyclic, so this recursion ends
            lv = max(lv, comp_level(p) + 1)
        level[r] = lv
        return lv

    waves: dict[int, list[str]] = {}
    for t in names:
        waves.setdefault(comp_level(rep_of[t]), []).append(t)
    out: list[list[str]] = []
    for lv in sorted(waves):
        wave = waves[lv]
        wave.sort(
            key=lambda t: (
                position[rep_of[t]],
                _interleave_depth(schemas, t),
                position[t],
            )
        )
        out.append(wave)
    return out


def dependency_cycles(schemas: Mapping[str, TableSchema]) -> list[list[str]]:
    """Groups of tables in this load that depend on each other in a cycle (through foreign
    keys), in :func:`load_order`'s order; empty when the tables can be fully ordered."""
    names = list(schemas)
    deps, reps = _components(schemas)
    groups: dict[str, list[str]] = {}
    for t, r in zip(names, reps):
        groups.setdefault(r, []).append(t)
    order = [t for wave in load_order(schemas) for t in wave]
    rank = {t: i for i, t in enumerate(order)}
    cycles = [g for g in groups.values() if len(g) > 1]
    return sorted((sorted(g, key=rank.__getitem__) for g in cycles), key=lambda g: rank[g[0]])
