"""Blank lines: in a file whose records have one field a blank line is a record (an empty
field: a NULL where "" is a NULL marker, else an empty string), never dropped; where records
have more fields a blank line cannot be one and is skipped, as before."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loader.parse import Dialect, dialect_from_preset, read_blocks
from loader.plan import plan_file
from loader.schema import Column, KeyPart, TableSchema
from loader.source import SourceInfo
from loader.types import SpannerType


def _table(*names: str, key_nullable: bool = True) -> TableSchema:
    cols = tuple(
        Column(n, SpannerType.parse("STRING(MAX)"), nullable=key_nullable or i > 0)
        for i, n in enumerate(names)
    )
    return TableSchema("T", cols, (KeyPart(names[0]),))


TAG = _table("Tag")
TWO = _table("a", "b")


def _read(
    data: bytes, table: TableSchema, dialect: Dialect, block_size: int = 1 << 20
) -> tuple[list[Optional[str]], list[int], list[int]]:
    """The first column's values, their record numbers and their line numbers."""
    values: list[Optional[str]] = []
    records: list[int] = []
    lines: list[int] = []
    for block in read_blocks(io.BytesIO(data), "src", table, dialect, block_size=block_size):
        values += block.strings.column(0).to_pylist()
        records += block.record_numbers.to_pylist()
        assert block.line_numbers is not None
        lines += block.line_numbers.to_pylist()
    return values, records, lines


def test_a_blank_line_under_a_header_of_one_column_is_a_null() -> None:
    values, records, lines = _read(b"Tag\nx\n\ny\n", TAG, Dialect())
    assert values == ["x", None, "y"]
    assert records == [1, 2, 3] and lines == [2, 3, 4]


def test_mysql_writes_an_empty_string_as_a_blank_line() -> None:
    """SELECT ... INTO OUTFILE of 'a', '', 'b', NULL: NULL is \\N, '' a blank line."""
    dialect = dialect_from_preset("mysql", columns=("Tag",))
    values, _, lines = _read(b"a\n\nb\n\\N\n", TAG, dialect)
    assert values == ["a", "", "b", None] and lines == [1, 2, 3, 4]


def test_postgres_csv_writes_a_null_as_a_blank_line() -> None:
    """COPY ... CSV of 'a', NULL, 'b', '': NULL is an empty unquoted field, '' is quoted."""
    dialect = dialect_from_preset("postgres", columns=("Tag",))
    values, _, _ = _read(b'a\n\nb\n""\n', TAG, dialect)
    assert values == ["a", None, "b", ""]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_blank_lines_at_the_end_of_a_one_column_file_are_records(ending: bytes) -> None:
    data = ending.join([b"Tag", b"x", b"", b""]) + ending
    values, _, _ = _read(data, TAG, Dialect())
    assert values == ["x", None, None]


def test_a_blank_line_where_records_have_two_fields_is_still_skipped() -> None:
    values, records, _ = _read(b"a,b\n1,x\n\n2,y\n\n", TWO, Dialect())
    assert values == ["1", "2"] and records == [1, 2]


def test_a_trailing_delimiter_makes_two_fields() -> None:
    """`Tag,` then `x,`: two fields (the second always empty), so a blank line is not a row."""
    values, _, _ = _read(b"Tag,\nx,\n\ny,\n", TAG, Dialect())
    assert values == ["x", "y"]


_VALUE = st.text(alphabet="ab \t\u00e9", max_size=3)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_VALUE, max_size=40), header=st.booleans(), crlf=st.booleans())
def test_every_line_of_a_one_column_file_is_a_record(
    values: list[str], header: bool, crlf: bool
) -> None:
    """Property: whatever lines are blank, one column reads back line for line ("" is not a
    NULL marker here, so a blank line is an empty string), at any block size."""
    end = "\r\n" if crlf else "\n"
    text = (["Tag"] if header else []) + values
    data = "".join(v + end for v in text).encode()
    dialect = Dialect(null_markers=(), header=header)
    expected: list[Any] = list(values)
    if values and not header and all(v == "" for v in values):
        expected = []  # only line ends: an empty input (skipped, with a note)
    for block_size in (4 << 10, 1 << 20):
        got, records, lines = _read(data, TAG, dialect, block_size)
        assert got == expected
        assert records == list(range(1, len(expected) + 1))
        assert lines == [i + 1 + header for i in range(len(expected))]


@pytest.mark.parametrize(
    "data",
    [
        b"Tag\n" + b"".join(b"v%d\n" % i if i % 3 else b"\n" for i in range(300)),
        b"".join(b"v%d\n" % i if i % 3 else b"\n" for i in range(300)),  # no header
        b"\n" + b"".join(b"%d,x\n" % i for i in range(300)),  # a blank first line
    ],
)
def test_the_planner_does_not_split_a_file_that_may_have_one_field(
    tmp_path: Path, data: bytes
) -> None:
    """The Beam path's planner counts records without blank lines: a file whose first line
    is blank or has no delimiter is read as one range, so its record numbers stay exact."""
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    s = os.stat(path)
    info = SourceInfo(
        uri=str(path), kind="file", name=str(path), size=s.st_size, mtime_ns=s.st_mtime_ns
    )
    assert len(plan_file(info, Dialect(), target=200, chunk=64)) == 1


def test_the_planner_still_splits_a_file_of_two_fields(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\n" + b"".join(b"%d,x\n" % i for i in range(300)))
    s = os.stat(path)
    info = SourceInfo(
        uri=str(path), kind="file", name=str(path), size=s.st_size, mtime_ns=s.st_mtime_ns
    )
    assert len(plan_file(info, Dialect(), target=200, chunk=3)) > 1
