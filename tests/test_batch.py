"""Mutation counting, budgeted batch planning (Hypothesis invariants) and table load order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.batch import (
    COMMIT_CEILING_BYTES,
    SPANNER_MAX_COMMIT_BYTES,
    BatchPlan,
    Budget,
    dependency_cycles,
    format_bytes,
    load_order,
    mutation_cost_per_row,
    oversize_reason,
    plan_batches,
)
from loader.errors import ConfigError, ExitCode, SchemaError
from loader.schema import Column, Index, KeyPart, TableSchema
from loader.types import SpannerType

INT64 = SpannerType.parse("INT64")


def _table(
    name: str,
    cols: str = "A B C D E",
    key: str = "A",
    indexes: tuple[Index, ...] = (),
    parent: str | None = None,
    references: tuple[str, ...] = (),
) -> TableSchema:
    return TableSchema(
        name=name,
        columns=tuple(Column(c, INT64) for c in cols.split()),
        primary_key=tuple(KeyPart(k) for k in key.split()),
        parent=parent,
        indexes=indexes,
        references=references,
    )


# ---------------------------------------------------------------------------------------------
# Mutation counting


def test_cost_without_indexes_counts_written_and_key_columns():
    t = _table("T", key="A B")
    assert mutation_cost_per_row(t, ["C", "D"]) == 4  # A, B always written
    assert mutation_cost_per_row(t, ["A", "B", "C"]) == 3  # key named explicitly: no double count
    assert mutation_cost_per_row(t, []) == 2


def test_cost_with_indexes_storing_and_a_column_in_several_indexes():
    t = _table(
        "T",
        key="A B",
        indexes=(
            Index("ByC", columns=("C",), storing=("D",)),
            Index("ByCA", columns=("C", "A")),
            Index("IDX_FK_D", columns=("D",)),  # an FK-backing index counts like any other
        ),
    )
    # A: 1 + ByCA; B: 1; C: 1 + ByC + ByCA; D: 1 + ByC (STORING) + IDX_FK_D; E: 1
    assert mutation_cost_per_row(t, ["C", "D"]) == 2 + 1 + 3 + 3
    assert mutation_cost_per_row(t, ["C", "D", "E"]) == 10


def test_cost_column_both_key_and_storing_of_one_index_counts_once_for_it():
    t = _table("T", indexes=(Index("I", columns=("B",), storing=("B", "C")),))
    assert mutation_cost_per_row(t, ["B"], "update") == 1 + 2
    # a row that may be new is in the index with all its columns, C (not written) too
    assert mutation_cost_per_row(t, ["B"]) == 1 + 1 + 2


def test_cost_counts_what_spanner_writes_beside_the_columns_sent():
    """A tryout's table: a STORED generated column, a DEFAULT column the CSV leaves out, and
    indexes on them were not counted (about 18 mutations a row counted as 16)."""
    int64 = SpannerType.parse("INT64")
    t = TableSchema(
        "T",
        columns=(
            Column("A", int64, nullable=False),
            Column("B", int64),
            Column("G", int64, generated=True),  # AS (B * 2) STORED
            Column("S", int64, has_default=True),  # DEFAULT (0), not in the CSV
            Column("N", int64),  # nullable, not in the CSV
        ),
        primary_key=(KeyPart("A"),),
        indexes=(
            Index("ByG", columns=("G",)),
            Index("ByS", columns=("S",), storing=("B",)),
            Index("ByN", columns=("N",)),
        ),
    )
    # A, B written; G computed, S filled; a new row is in all three indexes (4 entries' columns)
    for mode in ("insert", "upsert", "replace"):
        assert mutation_cost_per_row(t, ["B"], mode) == 2 + 2 + 4
    # update changes rows in place: B and the index that stores it; G, which may read B
    assert mutation_cost_per_row(t, ["B"], "update") == (1 + 1 + 1) + (1 + 1)


def test_cost_names_are_case_insensitive_and_unknown_ones_raise():
    t = _table("T", indexes=(Index("I", columns=("c",)),))
    assert mutation_cost_per_row(t, ["C", "a"]) == 1 + 2
    with pytest.raises(SchemaError, match="table T has no column 'Nope'") as e:
        mutation_cost_per_row(t, ["Nope"])
    assert e.value.hint == "columns: A, B, C, D, E"


# ---------------------------------------------------------------------------------------------
# Batch planning: unit tests


def test_plan_splits_by_mutations_bytes_and_rows():
    sizes = np.full(10, 100, dtype=np.int64)
    # 7 mutations per row, 20 allowed: 2 rows per batch.
    plan = plan_batches(sizes, 7, Budget(max_mutations=20))
    assert plan.ranges == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert plan.mutations.tolist() == [14] * 5
    # 350 bytes with a 40-byte header: 3 rows (340 bytes) per batch.
    plan = plan_batches(sizes, 1, Budget(max_bytes=350), overhead_bytes=40)
    assert plan.ranges == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert plan.nbytes.tolist() == [340, 340, 340, 140]
    plan = plan_batches(sizes, 1, Budget(max_rows=4))
    assert plan.ranges == [(0, 4), (4, 8), (8, 10)]
    assert plan.rows.tolist() == [4, 4, 2]
    assert len(plan) == 3


def test_row_over_the_budget_is_committed_alone_and_neighbours_batch_normally():
    """#16 defect 10: --max-batch-bytes is a batching target; a valid row over it gets a
    commit of its own (key order kept) instead of being rejected as bad data."""
    sizes = np.array([10, 10, 10, 5 << 20, 10, 10, 6 << 20, 7 << 20, 10])
    plan = plan_batches(sizes, 3, Budget(max_bytes=4 << 20), overhead_bytes=40)
    assert plan.oversize.tolist() == []
    assert plan.ranges == [(0, 3), (3, 4), (4, 6), (6, 7), (7, 8), (8, 9)]
    assert plan.nbytes.tolist() == [70, (5 << 20) + 40, 60, (6 << 20) + 40, (7 << 20) + 40, 50]
    assert plan.mutations.tolist() == [9, 3, 6, 3, 3, 3]
    # the mutation budget still cuts the neighbours
    plan = plan_batches(sizes, 3, Budget(max_mutations=6, max_bytes=4 << 20))
    assert plan.ranges == [(0, 2), (2, 3), (3, 4), (4, 6), (6, 7), (7, 8), (8, 9)]


def test_only_a_row_over_the_hard_ceiling_is_oversize():
    sizes = np.array([10, 10, 500, 10, 600, 700, 10, 10])
    plan = plan_batches(sizes, 1, Budget(max_bytes=100, ceiling_bytes=650))
    assert plan.oversize.tolist() == [5]
    assert plan.ranges == [(0, 2), (2, 3), (3, 4), (4, 5), (6, 8)]
    # the default ceiling is Spanner's 100 MiB less 1 MiB of headroom for the request
    assert COMMIT_CEILING_BYTES == SPANNER_MAX_COMMIT_BYTES - (1 << 20) == 99 << 20
    sizes = np.array([1, (99 << 20) - 100, (99 << 20) - 99, 1])
    plan = plan_batches(sizes, 1, Budget(), overhead_bytes=100)
    assert plan.oversize.tolist() == [2]
    assert plan.ranges == [(0, 1), (1, 2), (3, 4)]
    assert plan.nbytes.tolist() == [101, 99 << 20, 101]
    # a budget above the ceiling is its own hard limit
    plan = plan_batches(sizes, 1, Budget(max_bytes=100 << 20), overhead_bytes=100)
    assert plan.oversize.tolist() == [] and plan.ranges == [(0, 2), (2, 4)]


def test_everything_oversize_and_empty_input():
    plan = plan_batches(np.array([5, 6]), 1, Budget(max_bytes=4, ceiling_bytes=4))
    assert plan.ranges == [] and plan.oversize.tolist() == [0, 1]
    plan = plan_batches(np.array([], dtype=np.int64), 3, Budget())
    assert plan.ranges == [] and plan.oversize.tolist() == [] and len(plan) == 0


def test_arrow_sizes_accepted():
    sizes = pa.chunked_array([pa.array([1, 2], pa.int32()), pa.array([3], pa.int32())])
    assert plan_batches(sizes, 1, Budget(max_bytes=3)).ranges == [(0, 2), (2, 3)]
    assert plan_batches(pa.array([1, 2, 3]), 1, Budget(max_rows=2)).ranges == [(0, 2), (2, 3)]


def test_oversize_reason_text():
    assert oversize_reason(120 << 20, Budget()) == (
        "row is 120 MiB encoded, over the 99 MiB one commit may carry "
        "(Spanner's limit is 100 MiB per commit)"
    )
    assert oversize_reason(99 << 20, Budget(), overhead_bytes=120) == (
        "row is 99 MiB encoded plus 120 bytes of batch header, over the 99 MiB one commit "
        "may carry (Spanner's limit is 100 MiB per commit)"
    )
    assert oversize_reason(101 << 20, Budget(max_bytes=100 << 20)) == (
        "row is 101 MiB encoded, over the 100 MiB `max_batch_bytes` budget "
        "(Spanner's limit is 100 MiB per commit)"
    )
    assert format_bytes(1536) == "1.5 KiB"


def test_row_costing_more_than_the_budget_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        plan_batches(np.array([1]), 25_000, Budget(), table="Orders")
    assert str(e.value) == (
        "one row of Orders costs 25,000 mutations (columns written plus their secondary-index "
        "entries), over the `max_mutations` budget of 20,000"
    )
    assert e.value.hint is not None and "80,000" in e.value.hint
    assert e.value.exit_code == ExitCode.USAGE


def test_header_over_byte_budget_is_a_config_error():
    with pytest.raises(ConfigError, match="batch header of T alone is 100 bytes"):
        plan_batches(np.array([1]), 1, Budget(max_bytes=100), overhead_bytes=100, table="T")


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"max_mutations": 0}, "`max_mutations=0` is out of range"),
        ({"max_mutations": 80_001}, "`max_mutations=80001` is out of range"),
        ({"max_bytes": 0}, "`max_batch_bytes=0` is out of range"),
        ({"max_bytes": (100 << 20) + 1}, "`max_batch_bytes=104857601` is out of range"),
        ({"max_rows": 0}, "`batch_rows=0` is out of range"),
    ],
)
def test_budget_validation(kwargs, text):
    with pytest.raises(ConfigError, match=text):
        Budget(**kwargs)


def test_bad_arguments():
    with pytest.raises(ValueError, match="non-negative"):
        plan_batches(np.array([1, -1]), 1, Budget())
    with pytest.raises(ValueError, match="cost_per_row"):
        plan_batches(np.array([1]), -1, Budget())


def test_many_rows():
    rng = np.random.default_rng(7)
    sizes = rng.integers(50, 5_000, 200_000)
    sizes[[10, 99_999]] = 5 << 20
    plan = plan_batches(sizes, 9, Budget())
    _check_plan(plan, sizes, 9, Budget(), 0)


# ---------------------------------------------------------------------------------------------
# Batch planning: invariants under Hypothesis


def _check_plan(plan: BatchPlan, sizes: np.ndarray, cost: int, budget: Budget, overhead: int):
    n = len(sizes)
    hard = max(budget.max_bytes, budget.ceiling_bytes)
    starts, ends = plan.starts.tolist(), plan.ends.tolist()
    oversize = set(plan.oversize.tolist())
    assert oversize == {i for i in range(n) if sizes[i] + overhead > hard}
    alone = {i for i in range(n) if budget.max_bytes < sizes[i] + overhead <= hard}
    seen: list[int] = []
    prev_end = 0
    for s, e, nbytes in zip(starts, ends, plan.nbytes.tolist()):
        assert s < e, "empty batch"
        assert s >= prev_end, "batches overlap or are out of order"
        # Contiguous cover: only oversize rows may sit between two batches.
        assert set(range(prev_end, s)) <= oversize
        prev_end = e
        total = int(sizes[s:e].sum()) + overhead
        assert nbytes == total
        assert total <= hard
        # over the soft budget only as a batch of one row, and such a row is always alone
        assert total <= budget.max_bytes or (e - s == 1 and s in alone)
        assert not alone & set(range(s, e)) or e - s == 1
        assert (e - s) * cost <= budget.max_mutations
        assert budget.max_rows is None or e - s <= budget.max_rows
        seen.extend(range(s, e))
        # Greedy maximality: taking the next row too would break a budget.
        if e < n:
            assert (
                e in oversize
                or total + sizes[e] > budget.max_bytes
                or (e - s + 1) * cost > budget.max_mutations
                or (budget.max_rows is not None and e - s + 1 > budget.max_rows)
            )
    assert set(range(prev_end, n)) <= oversize
    assert sorted(seen + sorted(oversize)) == list(range(n)), "a row lost or duplicated"
    assert not set(seen) & oversize


@st.composite
def plans(draw: st.DrawFn) -> tuple[np.ndarray, int, Budget, int]:
    max_bytes = draw(st.integers(1, 2_000))
    ceiling = draw(st.integers(1, 3 * max_bytes))
    overhead = draw(st.integers(0, max_bytes - 1))
    max_mutations = draw(st.integers(1, 200))
    cost = draw(st.one_of(st.sampled_from([0, 1]), st.integers(0, max_mutations)))
    max_rows = draw(st.one_of(st.none(), st.integers(1, 300)))
    fits = st.integers(0, max(1, max_bytes // 4)) | st.integers(0, max_bytes)
    if draw(st.booleans()):
        fits = st.integers(0, 3)  # tiny rows: long batches, cut by mutations or rows
    n = draw(st.integers(0, draw(st.sampled_from([20, 400]))))
    sizes = np.array(draw(st.lists(fits, min_size=n, max_size=n)), dtype=np.int64)
    # A few rows over the byte budget, anywhere (including adjacent ones): some under the
    # hard ceiling (committed alone), some over it (oversize).
    if n:
        where = draw(st.lists(st.integers(0, n - 1), max_size=max(1, n // 10)))
        sizes[where] = draw(st.integers(max_bytes, 4 * max_bytes))
    return sizes, cost, Budget(max_mutations, max_bytes, max_rows, ceiling), overhead


@settings(max_examples=500, deadline=None, derandomize=True)
@given(plans(), st.booleans())
def test_plan_invariants(case, as_arrow):
    sizes, cost, budget, overhead = case
    arg = pa.array(sizes, pa.int64()) if as_arrow else sizes
    plan = plan_batches(arg, cost, budget, overhead_bytes=overhead)
    _check_plan(plan, sizes, cost, budget, overhead)


# ---------------------------------------------------------------------------------------------
# Load order


def test_load_order_parents_and_fk_targets_first():
    schemas = {
        "OrderItems": _table("OrderItems", parent="Orders", references=("Products",)),
        "Orders": _table("Orders", parent="Customers"),
        "Products": _table("Products"),
        "Customers": _table("Customers"),
    }
    assert load_order(schemas) == [["Products", "Customers"], ["Orders"], ["OrderItems"]]
    assert dependency_cycles(schemas) == []


def test_load_order_ignores_tables_outside_the_load_and_self_references():
    schemas = {
        "Orders": _table("Orders", parent="Customers", references=("Orders", "Elsewhere")),
    }
    assert load_order(schemas) == [["Orders"]]
    assert load_order({}) == []


def test_load_order_matches_names_case_insensitively_and_returns_requested_names():
    schemas = {
        "orders": _table("Orders", parent="CUSTOMERS"),
        "customers": _table("Customers"),
    }
    assert load_order(schemas) == [["customers"], ["orders"]]


def test_load_order_fk_cycle_shares_a_wave():
    schemas = {
        "C": _table("C", references=("A",)),
        "B": _table("B", references=("A",)),
        "A": _table("A", references=("B",)),
        "D": _table("D"),
    }
    assert load_order(schemas) == [["B", "A", "D"], ["C"]]
    assert dependency_cycles(schemas) == [["B", "A"]]


def test_load_order_cycle_through_an_interleaved_child_lists_the_parent_first():
    schemas = {
        "Child": _table("Child", parent="Parent"),
        "Parent": _table("Parent", references=("Child",)),
    }
    assert load_order(schemas) == [["Parent", "Child"]]
    assert dependency_cycles(schemas) == [["Parent", "Child"]]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.data())
def test_load_order_invariants(data):
    n = data.draw(st.integers(1, 8))
    names = [f"T{i}" for i in range(n)]
    schemas = {}
    for i, name in enumerate(names):
        parent = data.draw(st.one_of(st.none(), st.sampled_from(names[:i]))) if i else None
        refs = tuple(data.draw(st.lists(st.sampled_from(names), max_size=3)))
        schemas[name] = _table(name, parent=parent, references=refs)
    waves = load_order(schemas)
    flat = [t for w in waves for t in w]
    assert sorted(flat) == sorted(names)
    wave_of = {t: i for i, w in enumerate(waves) for t in w}
    in_cycle = {t: frozenset(c) for c in dependency_cycles(schemas) for t in c}
    for name, s in schemas.items():
        for dep in ([s.parent] if s.parent else []) + list(s.references):
            if dep == name:
                continue
            if name in in_cycle and dep in in_cycle[name]:
                assert wave_of[dep] == wave_of[name]
                if dep == s.parent:
                    assert flat.index(dep) < flat.index(name)
            else:
                assert wave_of[dep] < wave_of[name]
    assert load_order(schemas) == waves  # deterministic
