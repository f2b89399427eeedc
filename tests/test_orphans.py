"""Rows of an interleaved table whose parent row is missing (an export of a database that
kept no foreign keys, with orders deleted and their items left): found by one read of the
batch's parent keys, each once, not by bisecting the batch commit by commit."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES
from test_load_e2e import assert_table_equals_csv, shop_config

from loader import TableJob, load
from loader.errors import ExitCode, TooManyBadRows


def _records(name: str) -> tuple[str, list[tuple[int, list[str], str]]]:
    """The header line and each record of an example file: the line it starts on, its
    fields, and its text as written (a quoted empty string is not an empty field)."""
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    reader = csv.reader(io.StringIO(text, newline=""))
    next(reader)
    records, line = [], 2
    for record in reader:
        records.append((line, record, "".join(lines[line - 1 : reader.line_num])))
        line = reader.line_num + 1
    return lines[0], records


def _write(path: Path, header: str, records: list[tuple[int, list[str], str]]) -> None:
    path.write_text(header + "".join(text for _, _, text in records), encoding="utf-8")


ORDERS = _records("Orders.csv")
ITEMS = _records("OrderItems.csv")


@pytest.mark.parametrize("mode", ["upsert", "insert", "replace"])
def test_rows_whose_parent_row_is_missing_are_rejected_after_one_read(
    make_database: Any, tmp_path: Path, mode: str
) -> None:
    db = make_database()
    kept = [r for i, r in enumerate(ORDERS[1]) if i % 5]  # every fifth order deleted
    orders = tmp_path / "Orders.csv"
    _write(orders, ORDERS[0], kept)
    parents = shop_config(
        db,
        jobs=(
            TableJob("Customers", (str(EXAMPLES / "Customers.csv"),)),
            TableJob("Orders", (str(orders),)),
        ),
    )
    assert load(parents, database=db).exit_code == ExitCode.OK
    there = {tuple(r[:2]) for _, r, _ in kept}
    orphans = [line for line, r, _ in ITEMS[1] if tuple(r[:2]) not in there]
    assert 100 < len(orphans) < len(ITEMS[1]) // 2
    rejects = tmp_path / "rejects.jsonl"
    items = shop_config(
        db,
        jobs=(TableJob("OrderItems", (str(EXAMPLES / "OrderItems.csv"),)),),
        mode=mode,
        max_bad_rows=len(orphans),
        rejects=rejects,
        batch_rows=500,
    )
    report = load(items, database=db)
    assert report.exit_code == ExitCode.REJECTED_ROWS, report.error
    table = report.tables[0]
    assert table.rows_rejected == len(orphans)
    lines = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["line"] for r in lines) == orphans
    assert {r["reason"] for r in lines} == {
        "Spanner refused the row: NOT_FOUND: table Orders has no parent row for this key"
    }
    # 4 batches of at most 500 rows, each refused once, read, and committed in one piece:
    # bisecting took about two commits per orphan per halving
    assert table.commits <= 8, table.commits
    good = tmp_path / "good.csv"
    _write(good, ITEMS[0], [x for x in ITEMS[1] if tuple(x[1][:2]) in there])
    assert_table_equals_csv(db, "OrderItems", good)


def test_a_stop_over_a_missing_parent_row_says_what_is_missing(
    make_database: Any, tmp_path: Path
) -> None:
    db = make_database()
    items = shop_config(db, jobs=(TableJob("OrderItems", (str(EXAMPLES / "OrderItems.csv"),)),))
    with pytest.raises(TooManyBadRows) as e:
        load(items, database=db)  # no order loaded: every item is an orphan
    assert "NOT_FOUND: table Orders has no parent row for this key" in str(e.value)
    hint = str(e.value.hint)
    assert "load the parent rows, then this table again with `restart=True`" in hint
    # following it loads every row (a resume would read on after the rows it rejected)
    parents = ("Customers", "Orders")
    jobs = tuple(TableJob(t, (str(EXAMPLES / f"{t}.csv"),)) for t in parents)
    assert load(shop_config(db, jobs=jobs), database=db).exit_code == ExitCode.OK
    again = load(dataclasses.replace(items, restart=True), database=db)
    assert again.exit_code == ExitCode.OK, again.error
    assert_table_equals_csv(db, "OrderItems", EXAMPLES / "OrderItems.csv")
