"""Reading ranges (loader/plan/read.py): every range of a file read apart through the loader's
stages, concatenated, is exactly what the single-process path makes of the whole file: the
same encoded rows, record and line numbers, and rejects."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from loader.convert import ConvertOptions
from loader.errors import SourceError
from loader.parse import Dialect, dialect_from_preset, read_blocks
from loader.plan import plan_file
from loader.plan.read import read_range
from loader.rejects import Reject
from loader.schema import Column, KeyPart, TableSchema
from loader.source import SourceInfo, open_source
from loader.stages import Encoded, convert_stage, encode_stage
from loader.types import SpannerType

TABLE = TableSchema(
    "T",
    (
        Column("Id", SpannerType.parse("INT64"), nullable=False),
        Column("Name", SpannerType.parse("STRING(MAX)")),
        Column("Amount", SpannerType.parse("NUMERIC")),
    ),
    (KeyPart("Id"),),
)
OPTIONS = ConvertOptions()


def _info(path: Path) -> SourceInfo:
    st_ = os.stat(path)
    return SourceInfo(
        uri=str(path), kind="file", name=str(path), size=st_.st_size, mtime_ns=st_.st_mtime_ns
    )


def _whole(
    info: SourceInfo, dialect: Dialect, block_size: int = 16 << 20, table: Any = None
) -> list[Encoded]:
    """What the single-process load does with the file (table_load.TableLoad._run), into
    ``table`` (TABLE by default)."""
    table = table or TABLE
    out = []
    with open_source(info) as stream:
        for block in read_blocks(stream, info.uri, table, dialect, block_size=block_size):
            c = convert_stage(block, schema=table, options=OPTIONS, source=info.uri, skip=0)
            _, e = encode_stage(c, schema=table, skip=0, keep_values=False)
            assert e is not None
            out.append(e)
    return out


def _flat(encoded: list[Encoded]) -> tuple[Any, list[int], list[Any], list[Reject]]:
    tables = [e.table for e in encoded if e.table.num_rows]
    table = pa.concat_tables(tables).to_pylist() if tables else []
    records = [r for e in encoded for r in e.records.to_pylist()]
    lines = [x for e in encoded if e.lines is not None for x in e.lines.to_pylist()]
    rejects = sorted((r for e in encoded for r in e.rejects), key=lambda r: r.record or 0)
    return table, records, lines, rejects


def _field(text: str, force: bool) -> str:
    if force or any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


@st.composite
def files(draw: st.DrawFn) -> bytes:
    header = draw(st.booleans())
    out = "Id,Name,Amount\n" if header else ""
    n = draw(st.integers(0, 40))
    for i in range(n):
        kind = draw(st.integers(0, 9))
        name = draw(st.text(alphabet='ab,"\r\n é', max_size=8))
        amount = draw(st.sampled_from(["1.5", "", "-3", "x1"]))  # x1: not a NUMERIC
        fields = [str(i), _field(name, draw(st.booleans())), amount]
        if kind == 0:
            fields.append("extra")  # a wrong field count
        out += ",".join(fields) + draw(st.sampled_from(["\n", "\r\n"]))
    if not header:
        out = "#skipped\n" + out
    return out.encode()


@given(files(), st.integers(1, 200), st.booleans())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_ranges_read_apart_equal_the_whole_file(
    tmp_path: Path, data: bytes, target: int, header: bool
) -> None:
    header = data.startswith(b"Id,")
    dialect = Dialect(header=header, skip_rows=0 if header else 1)
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    info = _info(path)
    whole = _flat(_whole(info, dialect, 1 << 20))
    ranges = plan_file(info, dialect, target=target, chunk=64)
    parts: list[Encoded] = []
    for r in ranges:
        parts.extend(read_range(r, TABLE, dialect, OPTIONS, block_size=1 << 20))
    assert _flat(parts) == whole


def test_mysql_ranges(tmp_path: Path) -> None:
    rows = [f"{i}\tline\r\\\nbreak {i}\\\\\t{i}.5\n" for i in range(200)]  # CR as MySQL writes it
    path = tmp_path / "t.tsv"
    path.write_bytes("".join(rows).encode())
    dialect = dialect_from_preset("mysql")
    info = _info(path)
    ranges = plan_file(info, dialect, target=300, chunk=100)
    assert len(ranges) > 5
    parts: list[Encoded] = []
    for r in ranges:
        parts.extend(read_range(r, TABLE, dialect, OPTIONS))
    got = _flat(parts)
    assert got == _flat(_whole(info, dialect, 1 << 20))
    assert got[1] == list(range(1, 201)) and got[2] == list(range(1, 401, 2))
    assert not got[3]


def test_postgres_text_ranges(tmp_path: Path) -> None:
    """PostgreSQL's text format: a CR alone ends a line (CRLF and LF too), escaped ones are
    data, as the whole-file read takes them (the rows; line numbers after a lone CR are not
    exact in either read, as in test_any_bytes_stray_quotes_included)."""
    ends = ["\n", "\r\n", "\r"]
    rows = [f"{i}\tline\\r\\\nbreak {i}\\\\\t{i}.5{ends[i % 3]}" for i in range(200)]
    path = tmp_path / "t.tsv"
    path.write_bytes("".join(rows).encode())
    dialect = dialect_from_preset("postgres-text")
    info = _info(path)
    ranges = plan_file(info, dialect, target=300, chunk=100)
    assert len(ranges) > 5
    parts: list[Encoded] = []
    for r in ranges:
        parts.extend(read_range(r, TABLE, dialect, OPTIONS))
    got, whole = _flat(parts), _flat(_whole(info, dialect, 1 << 20))
    # line numbers apart: after a lone CR neither read counts lines exactly (see above)
    assert (got[0], got[1], got[3]) == (whole[0], whole[1], whole[3])
    assert got[1] == list(range(1, 201)) and not got[3]


STRINGS = TableSchema(
    "S",
    (
        Column("A", SpannerType.parse("STRING(MAX)"), nullable=False),
        Column("B", SpannerType.parse("STRING(MAX)")),
    ),
    (KeyPart("A"),),
)


@given(
    st.text(alphabet='a1,"\r\n', max_size=120),
    st.integers(1, 50),
    st.booleans(),
)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_bytes_stray_quotes_included(
    tmp_path: Path, text: str, target: int, header: bool
) -> None:
    """Whatever the bytes (stray quotes, lone CRs, blank lines, open quotes at the end), the
    ranges hold what the whole file holds; line numbers are compared only without blank lines
    or lone CRs (the whole-file read does not count those exactly, a range's start does)."""
    # a quote left open at the end of an input that ends in two lone CRs: the whole-file
    # read stops with "does not fit in a parse block" where the ranges reject the record
    # (test_open_quote_then_two_lone_crs_at_the_end, a known divergence)
    assume(not text.endswith("\r\r"))
    dialect = Dialect(header=header, columns=None)
    path = tmp_path / "s.csv"
    data = (("A,B\n" if header else "") + text).encode()
    path.write_bytes(data)
    info = _info(path)

    def run(read: Any) -> tuple[Any, ...]:
        try:
            return _flat(read())
        except Exception as e:  # the same error either way
            return (type(e).__name__,)

    def whole() -> list[Encoded]:
        return _whole(info, dialect, table=STRINGS)

    def apart() -> list[Encoded]:
        return [
            e
            for r in plan_file(info, dialect, target=target, chunk=16)
            for e in read_range(r, STRINGS, dialect, OPTIONS)
        ]

    a, b = run(whole), run(apart)
    lone_cr = "\r" in text.replace("\r\n", "")
    blank = "\n\n" in "\n" + text.replace("\r\n", "\n")
    if (blank or lone_cr) and len(a) == 4 and len(b) == 4:
        a, b = (a[0], a[1], a[3]), (b[0], b[1], b[3])
        a = (a[0], a[1], [(r.record, r.reason, r.text) for r in a[2]])
        b = (b[0], b[1], [(r.record, r.reason, r.text) for r in b[2]])
    assert b == a


@pytest.mark.xfail(strict=True, reason="known: Arrow's streaming reader stops on it (session 15)")
def test_open_quote_then_two_lone_crs_at_the_end(tmp_path: Path) -> None:
    """Found by the property test above: a quote left open at the end of the input, which
    ends in two lone CRs (`A,B\\n\\n"\\r\\r`). Arrow's streaming reader reports a
    record straddling two blocks, which the whole-file read turns into "record 1 (line 2)
    does not fit in a parse block of 16 MiB"; a range read of the same bytes rejects the
    record with the open-quote reason, which is right. Passing, this test is to be unmarked."""
    path = tmp_path / "s.csv"
    path.write_bytes(b'A,B\n\n"\r\r')
    info = _info(path)
    dialect = Dialect(header=True, columns=None)
    table, records, lines, rejects = _flat(_whole(info, dialect, table=STRINGS))
    assert (table, records) == ([], [])
    assert [r.reason[:30] for r in rejects] == ["a quote opened in this record"]


def test_a_headerless_file_of_rejects_only(tmp_path: Path) -> None:
    """Every row of a header-less file with a wrong field count: the block of rejects has no
    columns, and encoding it gives nothing (it raised KeyError before)."""
    path = tmp_path / "bad.csv"
    path.write_bytes(b"1,a,2,extra\n2,b,3,extra\n")
    table, records, lines, rejects = _flat(_whole(_info(path), Dialect(header=False), 1 << 20))
    assert (table, records, lines) == ([], [], [])
    assert [(r.record, r.line) for r in rejects] == [(1, 1), (2, 2)]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # pyarrow's decode
@pytest.mark.parametrize("header,skip", [(True, 0), (False, 0), (True, 2), (False, 1)])
def test_a_refusal_made_while_a_range_reads_numbers_the_record_as_the_file_does(
    tmp_path: Path, header: bool, skip: int
) -> None:
    """A record of the wrong field count that is not UTF-8 stops its source; read as a Beam
    range, the refusal said "record 29" for the file's record 200, numbered from the range's
    start (a review): the reader now knows the records before the range, as it knew its lines."""
    lines = ["#junk\n"] * skip + (["Id,Name,Amount\n"] if header else [])
    lines += [f"{i},n{i},1.5\n" for i in range(1, 200)]
    p = tmp_path / "t.csv"
    p.write_bytes("".join(lines).encode() + b"200,caf\xe9,1.5,extra\n201,x,1\n")
    dialect = Dialect(header=header, skip_rows=skip)
    info = _info(p)
    with pytest.raises(SourceError) as whole:
        _whole(info, dialect, 1 << 20)
    assert "record 200 holds bytes that are not UTF-8" in str(whole.value)
    ranges = plan_file(info, dialect, target=1000, chunk=64)
    assert len(ranges) > 1
    with pytest.raises(SourceError) as part:
        for r in ranges:
            list(read_range(r, TABLE, dialect, OPTIONS, block_size=1 << 20))
    assert str(part.value) == str(whole.value)
