"""A quote left open at the very end of the input is a reject (file, line, reason); a closed
quoted field at the end is a row, even when its value ends like its own closing (``"\\n"`` then
a line end): loader/parse/blocks.py ``_open_quote_at_end``. Through read_blocks, against
Python's csv module, and through the planner's range reads (the Beam path)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.errors import SourceError
from loader.parse import Dialect, read_blocks
from loader.parse.blocks import _OPEN_QUOTE
from loader.plan import plan_file
from loader.plan.read import parse_range
from loader.rejects import Reject
from loader.schema import Column, KeyPart, TableSchema
from loader.source import SourceInfo
from loader.types import SpannerType


def _strings(*names: str) -> TableSchema:
    cols = tuple(
        Column(n, SpannerType.parse("STRING(MAX)"), nullable=i > 0) for i, n in enumerate(names)
    )
    return TableSchema("T", cols, (KeyPart(names[0]),))


A = _strings("a")
ABC = _strings("a", "b", "c")
DOUBLE = Dialect(null_markers=())
ESCAPE = Dialect(null_markers=(), escape_char="\\", double_quote=False)


def _read(
    data: bytes, table: TableSchema, dialect: Dialect, block_size: int = 1 << 20
) -> tuple[list[list[Any]], list[Reject]]:
    rows: list[list[Any]] = []
    rejects: list[Reject] = []
    for block in read_blocks(io.BytesIO(data), "src", table, dialect, block_size=block_size):
        rows += [list(r.values()) for r in block.strings.to_pylist()]
        rejects += block.rejects
    return rows, rejects


CLOSED = [
    (b'k0,x,"\n"\n', "\n"),  # the case found: the value is one line end
    (b'k0,x,"\n"', "\n"),
    (b'k0,x,"\r\n"\r\n', "\r\n"),
    (b'k0,x,"\r\n"', "\r\n"),
    (b'k0,x,"\n"\r\n', "\n"),
    (b'k0,x,""\n', ""),
    (b'k0,x,""', ""),
    (b'k0,x,"a\n"\n', "a\n"),
    (b'k0,x,"\n\n"\n', "\n\n"),
    (b'k0,x,"\n\n"', "\n\n"),
    (b'k0,x,""""\n', '"'),
    (b'k0,x,""""', '"'),
    (b'k0,x,"\n""\n"\n', '\n"\n'),
]


@pytest.mark.parametrize("header", [b"a,b,c\n", b"a,b,c\r\n"])
@pytest.mark.parametrize("before", [b"", b'p,q,"r\ns"\n', b'p,q,"\n"\n'])
@pytest.mark.parametrize(("last", "value"), CLOSED)
def test_a_closed_quoted_last_field_is_a_row(
    header: bytes, before: bytes, last: bytes, value: str
) -> None:
    rows, rejects = _read(header + before + last, ABC, DOUBLE)
    assert not rejects
    assert rows[-1] == ["k0", "x", value]
    assert len(rows) == 1 + (before != b"")


@pytest.mark.parametrize(
    ("data", "value"),
    [
        (b'k0,x,"\n"\n', "\n"),
        (b'k0,x,"\\"\n"\n', '"\n'),
        (b'k0,x,"\\\\\n"\n', "\\\n"),
        (b'k0,x,"\r\n"', "\r\n"),
        (b'k0,x,""\n', ""),
    ],
)
def test_a_closed_quoted_last_field_with_an_escape_char(data: bytes, value: str) -> None:
    rows, rejects = _read(b"a,b,c\n" + data, ABC, ESCAPE)
    assert not rejects and rows == [["k0", "x", value]]


OPEN = [b'k0,x,"\n', b'k0,x,"\n\n', b'k0,x,"\r\n', b'k0,x,"abc', b'k0,x,"""']


@pytest.mark.parametrize("before", [b"", b'p,q,"\n"\n'])
@pytest.mark.parametrize("last", OPEN)
def test_a_quote_left_open_at_the_end_is_a_reject(before: bytes, last: bytes) -> None:
    rows, rejects = _read(b"a,b,c\n" + before + last, ABC, DOUBLE)
    assert rows == ([["p", "q", "\n"]] if before else [])
    assert [(r.source, r.line, r.record, r.reason) for r in rejects] == [
        ("src", 2 + before.count(b"\n"), 1 + (before != b""), _OPEN_QUOTE)
    ]


@pytest.mark.parametrize("before", [b"", b'p,q,"\n"\n'])
def test_a_quote_left_open_over_several_lines_refuses_the_source(before: bytes) -> None:
    """The lines after the one the quote opened in may be rows: one reject would drop them
    all as one bad row (a tryout lost 49,900 rows so, exit 3)."""
    line = 2 + before.count(b"\n")
    with pytest.raises(SourceError, match=f"opened at line {line} is never"):
        _read(b"a,b,c\n" + before + b'k0,x,"a\n""\n', ABC, DOUBLE)


def test_an_open_quote_s_reject_text_is_what_the_file_holds() -> None:
    """A tryout: a file ending `T2` with no line end had the reject text "T2\n", a line end
    the reader was given after the file, not one of the file's."""
    for data, text in (
        (b'a,b,c\nk0,x,"T2', "T2"),
        (b'a,b,c\nk0,x,"T2\n', "T2\n"),
        (b'a,b,c\nk0,x,"T2\n\n', "T2\n\n"),
    ):
        _, rejects = _read(data, ABC, DOUBLE)
        assert [(r.reason, r.text) for r in rejects] == [(_OPEN_QUOTE, text)], data


@pytest.mark.parametrize("last", [b'k0,x,"\n', b'k0,x,"\\"\n', b'k0,x,"\\\n'])
def test_a_quote_left_open_with_an_escape_char_is_a_reject(last: bytes) -> None:
    rows, rejects = _read(b"a,b,c\n" + last, ABC, ESCAPE)
    assert rows == [] and [r.reason for r in rejects] == [_OPEN_QUOTE]


@pytest.mark.parametrize(
    ("data", "rows", "open_line"),
    [
        (b'"\n"\n', [["\n"]], None),  # the only record, no header
        (b'"\n"', [["\n"]], None),
        (b'a\n"\n"\n', [["\n"]], None),
        (b'a\n"\r\n"\r\n', [["\r\n"]], None),
        (b'a\n"\n"\n"\n"\n', [["\n"], ["\n"]], None),
        (b'a\n"\n', [], 2),
        (b'"\n', [], 1),
        (b'a\n"\n"\n"\n', [["\n"]], 4),  # read as a closed field then an open one
        (b'a\n"\r\n"\r\n"\r\n', [["\r\n"]], 4),
        (b'a\nx\n"\n', [["x"]], 3),
    ],
)
def test_a_file_of_one_column(data: bytes, rows: list[list[str]], open_line: Optional[int]) -> None:
    header = data.startswith(b"a")
    got, rejects = _read(data, A, Dialect(null_markers=(), header=header))
    assert got == rows
    assert [r.line for r in rejects] == ([] if open_line is None else [open_line])


def test_a_file_of_one_column_at_small_blocks() -> None:
    """Past the parse's last two reads the end is not scanned again: a closed field still
    loads (a field of one line end that might also be an open one is taken as closed)."""
    data = b"a\n" + b'"r\nx"\n' * 2000 + b'"\n"\n'
    rows, rejects = _read(data, A, DOUBLE, block_size=4 << 10)
    assert not rejects and rows == [["r\nx"]] * 2000 + [["\n"]]
    rows, rejects = _read(data[:-3], A, DOUBLE, block_size=4 << 10)
    assert rows == [["r\nx"]] * 2000 and [r.reason for r in rejects] == [_OPEN_QUOTE]


# -- the property: the last record's last field is quoted newlines and quotes ----------------------

_BODY = st.lists(st.sampled_from(["\n", "\r\n", '"', "a", ","]), max_size=8).map("".join)
_LAST = st.lists(st.sampled_from(["\n", "\r\n", '"']), max_size=5).map("".join)


def _quote(value: str, escape: Any) -> str:
    """``value`` quoted; ``escape``: True for an escape char, "more" to escape ``a`` and LF
    too (any character may be escaped)."""
    if escape:
        value = value.replace("\\", "\\\\").replace('"', '\\"')
        if escape == "more":
            value = value.replace("a", "\\a").replace("\n", "\\\n")
        return '"' + value + '"'
    return '"' + value.replace('"', '""') + '"'


@st.composite
def files(draw: st.DrawFn) -> tuple[bytes, TableSchema, Dialect, list[list[str]], Optional[int]]:
    """A CSV whose last field is a quoted string of line ends and quotes, closed or (one time
    in four) left open; the rows and the line of the open quote, from Python's csv module."""
    escape: Any = draw(st.booleans())
    if escape and draw(st.booleans()):
        escape = "more"  # ordinary characters written escaped too
    width = draw(st.sampled_from([1, 3]))
    names = ["a", "b", "c"][:width]
    lines = [",".join(names) + "\n"]
    for i in range(draw(st.integers(0, 6))):
        fields = [f"k{i}"] + [draw(_BODY) for _ in range(width - 1)]
        if width == 1 and draw(st.booleans()):
            fields = [draw(_BODY)]
        written = [f if f.isalnum() else _quote(f, escape) for f in fields]
        lines.append(",".join(written) + draw(st.sampled_from(["\n", "\r\n"])))
    last = [f"k{len(lines)}"] + [draw(_BODY) for _ in range(width - 2)]
    value = draw(_LAST)
    opened = draw(st.integers(0, 3)) == 0
    field = _quote(value, escape)[: -1 if opened else None]
    end = draw(st.sampled_from(["\n", "\r\n", ""]))
    last_line = ",".join([_quote(f, escape) for f in last[: width - 1]] + [field]) + end
    text = "".join(lines) + last_line
    dialect = Dialect(
        null_markers=(), escape_char="\\" if escape else None, double_quote=not escape
    )
    reader = csv.reader(
        io.StringIO(text, newline=""),
        escapechar="\\" if escape else None,
        doublequote=not escape,
        strict=True,
    )
    rows: list[list[str]] = []
    open_line = None
    try:
        for row in reader:
            rows.append(row)
    except csv.Error:
        open_line = "".join(lines).count("\n") + 1
    table = ABC if width == 3 else A
    return text.encode(), table, dialect, rows[1:], open_line


@given(files())
@settings(max_examples=400, deadline=None)
def test_the_last_field_reads_as_the_csv_module_reads_it(
    case: tuple[bytes, TableSchema, Dialect, list[list[str]], Optional[int]],
) -> None:
    data, table, dialect, rows, open_line = case
    try:
        got, rejects = _read(data, table, dialect)
    except SourceError as e:  # the open quote swallowed a line end and more: refused
        assert open_line is not None
        assert f"a quote opened at line {open_line} is never closed" in str(e)
        return
    assert got == rows
    assert [(r.line, r.reason) for r in rejects] == (
        [] if open_line is None else [(open_line, _OPEN_QUOTE)]
    )


# -- the planner's ranges (the Beam path reads these) ---------------------------------------------


def _info(path: Path) -> SourceInfo:
    s = os.stat(path)
    return SourceInfo(
        uri=str(path), kind="file", name=str(path), size=s.st_size, mtime_ns=s.st_mtime_ns
    )


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.integers(100, 1000),
    st.sampled_from([b'"\n"\n', b'"\n"', b'"\r\n"\r\n', b'""\n', b'"\n\n"', b'""""\n', b'"\n']),
    st.sampled_from([1 << 12, 1 << 20]),
)
def test_planned_ranges_read_the_last_field_as_the_whole_file_does(
    tmp_path: Path, target: int, last: bytes, block_size: int
) -> None:
    body = b"a,b,c\n" + b"".join(b'k%d,x,"v\n%d"\n' % (i, i) for i in range(200))
    data = body + b"k200,x," + last
    path = tmp_path / "q.csv"
    path.write_bytes(data)
    whole_rows, whole_rejects = _read(data, ABC, DOUBLE, block_size)
    ranges = plan_file(_info(path), DOUBLE, target=target, chunk=512)
    assert len(ranges) > 1
    rows: list[list[Any]] = []
    rejects: list[tuple[Optional[int], Optional[int], str]] = []
    for r in ranges:
        for block in parse_range(r, ABC, DOUBLE, block_size=block_size):
            rows += [list(x.values()) for x in block.strings.to_pylist()]
            rejects += [(x.line, x.record, x.reason) for x in block.rejects]
    assert rows == whole_rows
    assert rejects == [(x.line, x.record, x.reason) for x in whole_rejects]
    assert len(rows) + len(rejects) == 201
    assert (rejects == []) == (last != b'"\n')


@pytest.mark.parametrize(
    "data",
    [
        b'a,b,c\nk0,"open,y,z\n',  # the rest of the record read into field b: two fields
        b'a,b,c\nk0,x,y\n"k1,p,q\n',  # opened in the first field: one field
        b'a,b,c\nk0,"op""en,y,z',  # a doubled quote inside does not close it
        b'a,b,c\nk0,"open,y,z\n\n',
    ],
)
def test_a_quote_never_closed_before_the_last_field_is_told_as_such(data: bytes) -> None:
    """Opened in a field before the last, the quote swallows the rest of the input into that
    field, and the record then has too few fields: its reject says the quote was never closed
    (a wrong field count would send the user looking for a missing delimiter)."""
    rows, rejects = _read(data, ABC, DOUBLE)
    assert len(rejects) == 1 and rejects[0].reason == _OPEN_QUOTE
    assert rejects[0].record == data.count(b"\n", 0, data.index(b'"')) and rows == (
        [["k0", "x", "y"]] if data.startswith(b"a,b,c\nk0,x,y") else []
    )


@pytest.mark.parametrize(
    "data,reason",
    [
        (b"a,b,c\nk0,x\n", "expected 3 fields, found 2"),
        (b'a,b,c\nk0,"x",y,z\n', "expected 3 fields, found 4"),
        (b'a,b,c\nk0,"x\n"\n', "expected 3 fields, found 2"),  # closed: a line end in b
        (b'a,b,c\nk0,"x",y\nk1,p\n', "expected 3 fields, found 2"),
    ],
)
def test_a_wrong_field_count_with_its_quotes_closed_keeps_its_reason(
    data: bytes, reason: str
) -> None:
    _, rejects = _read(data, ABC, DOUBLE)
    assert [r.reason for r in rejects] == [reason]
