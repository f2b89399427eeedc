"""The wide reference table (schemas/wide.sql, benchmarks/wide.py) loads exactly: every type a
CSV carries, hostile strings, NULLs everywhere allowed, a STRING-led key with a DESC part, three
indexes and an interleaved child. The table the loader was not tuned on, end to end against the
emulator, checked by verify and by the mutation budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import small_load_config

from benchmarks.wide import CHILD, TABLE, WIDE_DDL, accounts, events, write
from loader import load
from loader.verify import verify


def test_the_wide_table_and_its_child_load_exactly_within_the_budget(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database([WIDE_DDL])
    parents = accounts(1500, seed=3)
    parent_csv = write(parents, tmp_path / f"{TABLE}.csv")
    child_csv = write(events(parents.slice(0, 300), per_parent=3), tmp_path / f"{CHILD}.csv")
    budget = 2000
    for table, path in ((TABLE, parent_csv), (CHILD, child_csv)):
        cfg = small_load_config(
            db, table, [path], batch_rows=None, max_mutations=budget, buffer_size=256 << 10
        )
        report = load(cfg, database=db)
        t = report.tables[0]
        assert t.rows_rejected == 0 and t.rows_written == t.rows_read, report.notes
        # columns written plus index entries: never over the budget (the emulator enforces none)
        assert t.commits > 1 and max(t.mutations) <= budget
        checked = verify(cfg, database=db)
        assert checked.ok, checked.render()
