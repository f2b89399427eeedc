"""NUL bytes in CSV input: no row lost or merged at any block size (pyarrow < 26 mis-reads them,
apache/arrow#50481; loader/parse/nul.py), in the single-process read, the planner's ranges and
a load into the emulator (then verify)."""

from __future__ import annotations

import csv
import importlib.util
import io
import os
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.parse import Dialect, read_blocks
from loader.parse.nul import _MARK, _NulGuard, restore_text
from loader.plan import plan_file
from loader.plan.read import parse_range
from loader.schema import Column, KeyPart, TableSchema
from loader.source import SourceInfo
from loader.types import SpannerType


def _strings(*names: str) -> TableSchema:
    cols = tuple(
        Column(n, SpannerType.parse("STRING(MAX)"), nullable=i > 0) for i, n in enumerate(names)
    )
    return TableSchema("T", cols, (KeyPart(names[0]),))


AB = _strings("a", "b")
ABC = _strings("a", "b", "c")
RAW = Dialect(null_markers=())
"""No NULL markers: every field is its text (the reference parse has no NULLs)."""


def _read(data: bytes, table: TableSchema, dialect: Dialect, block_size: int) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for block in read_blocks(io.BytesIO(data), "src", table, dialect, block_size=block_size):
        assert not block.rejects, block.rejects
        rows += [list(r.values()) for r in block.strings.to_pylist()]
    return rows


REPRO = b'a,b\n"' + b"z" * 1021 + b'",1\n' + b'"a\x00b",1\n"x\ny",2\n' * 3
"""The tryout's case: pyarrow 25.0.1 reads 4 rows of these 7 with 1 KiB blocks, silently."""


@pytest.mark.parametrize("block_size", [1024, 1025, 1100, 1500, 2048, 4096, 1 << 20])
def test_the_tryout_case_at_any_block_size(block_size: int) -> None:
    expected = [["z" * 1021, "1"]] + [["a\x00b", "1"], ["x\ny", "2"]] * 3
    assert _read(REPRO, AB, RAW, block_size) == expected


def test_nul_next_to_every_block_edge() -> None:
    """A NUL in every other record, quoted newlines between: no parse error, no row lost."""
    data = b"a,b\n" + b"".join(b'"v%05d\x00w",%d\n"p\nq",0\n' % (i, i) for i in range(300))
    expected = [r for i in range(300) for r in ([f"v{i:05d}\x00w", str(i)], ["p\nq", "0"])]
    for block_size in (1024, 1031, 2000, 4093):
        assert _read(data, AB, RAW, block_size) == expected


class _NoCrAtEnd(io.BytesIO):
    """Reads that never end in CR while more follows, as the loader's sources give them."""

    def read(self, n: Optional[int] = -1) -> bytes:
        out = super().read(n)
        if len(out) > 1 and out.endswith(b"\r") and self.tell() < len(self.getbuffer()):
            self.seek(-1, io.SEEK_CUR)
            out = out[:-1]
        return out


@given(st.binary(max_size=300), st.integers(2, 40))
def test_the_guard_hands_arrow_no_nul_and_restores_exactly(data: bytes, size: int) -> None:
    """Through the guard, at any read size: no NUL, no read longer than asked or ending in CR
    before more data (apache/arrow#51368), and the text restores to the input."""
    data = data.replace(b"\x01", b"\x00").replace(b"\x02", _MARK.encode()).replace(b"\x03", b"\r")
    guard = _NulGuard(_NoCrAtEnd(data))
    chunks = []
    while True:
        chunk = guard.read(size)
        if not chunk:
            break
        assert len(chunk) <= size
        chunks.append(chunk)
    out = b"".join(chunks)
    assert b"\x00" not in out
    assert all(not c.endswith(b"\r") for c in chunks[:-1])
    text = out.decode("utf-8", "surrogateescape")
    assert restore_text(text) == data.decode("utf-8", "surrogateescape")
    assert guard.active == (b"\x00" in data or _MARK.encode() in data)


def test_input_without_nul_passes_through_untouched() -> None:
    stream = io.BytesIO(b"a,b\n" + b"x,y\n" * 100)
    guard = _NulGuard(stream)
    first = guard.read(50)
    assert first == b"a,b\n" + b"x,y\n" * 11 + b"x," and not guard.active


# -- the property: any CSV with NULs parses as Python's csv module parses it ---------------------

_PLAIN = st.text(alphabet=["a", "b", " ", "\x00", _MARK, "é"], max_size=12)
_QUOTED = st.lists(
    st.sampled_from(["a", ",", '"', "\n", "\r\n", "\x00", _MARK, "\\", "bbbbbbb"]), max_size=12
).map("".join)


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[bytes, Dialect, list[list[str]], int]:
    kind = draw(st.sampled_from(["double_quote", "escape", "no_quoting"]))
    rows = [["a", "b", "c"]]
    lines = []
    for i in range(draw(st.integers(1, 40))):
        fields = [f"k{i}"] + [draw(_PLAIN if kind == "no_quoting" else _QUOTED) for _ in range(2)]
        written = []
        for f in fields:
            if kind == "no_quoting" or (not draw(st.booleans()) and f.isalnum()):
                written.append(f)
            elif kind == "double_quote":
                written.append('"' + f.replace('"', '""') + '"')
            else:
                written.append('"' + f.replace("\\", "\\\\").replace('"', '\\"') + '"')
        rows.append(fields)
        lines.append(",".join(written) + draw(st.sampled_from(["\n", "\r\n"])))
    if draw(st.booleans()):  # the last record without its line end
        lines[-1] = lines[-1].rstrip("\r\n")
    data = ("a,b,c\n" + "".join(lines)).encode()
    dialect = Dialect(
        null_markers=(),
        quote_char=None if kind == "no_quoting" else '"',
        escape_char="\\" if kind == "escape" else None,
        double_quote=kind == "double_quote",
        newlines_in_values=kind != "no_quoting",
    )
    reference = list(
        csv.reader(
            io.StringIO(data.decode(), newline=""),
            quoting=csv.QUOTE_NONE if kind == "no_quoting" else csv.QUOTE_MINIMAL,
            escapechar="\\" if kind == "escape" else None,
            doublequote=kind == "double_quote",
            strict=True,
        )
    )
    assert reference == rows  # the generator writes what it means
    return data, dialect, rows[1:], max(len(line.encode()) for line in lines)


@given(csv_files(), st.integers(0, 3000))
@settings(max_examples=300, deadline=None)
def test_any_csv_with_nuls_parses_like_the_csv_module(
    case: tuple[bytes, Dialect, list[list[str]], int], extra: int
) -> None:
    data, dialect, expected, longest = case
    # a record must fit in a parse block (each NUL is read as 4 bytes)
    block_size = 8 * longest + 64 + extra
    assert _read(data, ABC, dialect, block_size) == expected


# -- the planner's ranges (the Beam path reads these) ---------------------------------------------


def _info(path: Path) -> SourceInfo:
    s = os.stat(path)
    return SourceInfo(
        uri=str(path), kind="file", name=str(path), size=s.st_size, mtime_ns=s.st_mtime_ns
    )


RANGE_TABLE = TableSchema(
    "T",
    (
        Column("Id", SpannerType.parse("INT64"), nullable=False),
        Column("S", SpannerType.parse("STRING(MAX)")),
    ),
    (KeyPart("Id"),),
)


def _nul_file(n: int, extra: str = "") -> tuple[bytes, list[tuple[int, Optional[str]]]]:
    """``n`` records ``Id,S`` (plus the ``extra`` fields) with NULs and quoted line ends in S."""
    out = ["Id,S" + ("" if not extra else ",V") + "\n"]
    rows: list[tuple[int, Optional[str]]] = []
    for i in range(n):
        s = ["pad" * 300 + f"\x00{i}", f'x\x00"\n"\x00{i}', f"\x00\r\n{_MARK}0{i}"][i % 3]
        field = '"' + s.replace('"', '""') + '"'
        out.append(f"{i},{field}{extra}" + ("\r\n" if i % 2 else "\n"))
        rows.append((i, s))
    return "".join(out).encode(), rows


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(200, 20000), st.sampled_from([4 << 10, 5000, 1 << 20]))
def test_planned_ranges_of_a_file_with_nuls_read_every_row_once(
    tmp_path: Path, target: int, block_size: int
) -> None:
    data, expected = _nul_file(60)
    path = tmp_path / "n.csv"
    path.write_bytes(data)
    ranges = plan_file(_info(path), Dialect(), target=target, chunk=512)
    assert len(ranges) > 1 or target > len(data) // 2
    got = []
    for r in ranges:
        for block in parse_range(r, RANGE_TABLE, Dialect(), block_size=block_size):
            assert not block.rejects
            ids = block.strings.column("Id").to_pylist()
            got += list(zip(map(int, ids), block.strings.column("S").to_pylist()))
            assert block.record_numbers.to_pylist() == [int(i) + 1 for i in ids]
    assert sorted(got) == expected


# -- a load into the emulator, then verify ---------------------------------------------------------


def test_load_and_verify_a_file_with_nuls(make_database: Any, tmp_path: Path) -> None:
    """STRING keeps U+0000 as it is (Spanner takes and returns it); an INT64 field holding a
    NUL is rejected with its line and reason; verify then finds the table equal to the file."""
    from conftest import read_table, small_load_config

    from loader import load
    from loader.verify import verify

    db = make_database(
        ["CREATE TABLE N (Id INT64 NOT NULL, S STRING(MAX), V INT64) PRIMARY KEY (Id)"]
    )
    body, expected = _nul_file(150, ",7")
    bad = b'150,"bad\x00row",1\x002\n'
    src = tmp_path / "n.csv"
    src.write_bytes(body + bad)
    rejects = tmp_path / "rejects.jsonl"
    cfg = small_load_config(db, "N", [src], block_size=4 << 10, rejects=rejects, max_bad_rows=1)
    load(cfg, database=db)
    assert read_table(db, "N", ["Id", "S", "V"]) == [(i, s, 7) for i, s in expected]
    import json

    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert len(lines) == 1
    line_no = body.count(b"\n") + 1
    assert lines[0]["line"] == line_no and lines[0]["column"] == "V", lines[0]
    report = verify(cfg, database=db)
    assert report.ok, report.render()


def test_the_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: Any) -> None:
    """benchmarks/nul.py (no timing asserted): the rows read with and without the guard."""
    from benchmarks import nul

    assert nul.main(["--rows", "300", "--repeat", "1", "--data-dir", str(tmp_path)]) == 0
    assert "with the guard, NUL in 1% rows" in capsys.readouterr().out


@pytest.mark.skipif(
    importlib.util.find_spec("apache_beam") is None,
    reason="apache-beam is not installed (scripts/beam_check.sh runs this)",
)
def test_direct_runner_loads_a_file_with_nuls_exactly(make_database: Any, tmp_path: Path) -> None:
    """The Beam path: planned ranges of a file with NULs and quoted line ends, every row once."""
    from conftest import read_table, small_load_config

    from loader import load

    db = make_database(["CREATE TABLE N (Id INT64 NOT NULL, S STRING(MAX)) PRIMARY KEY (Id)"])
    data, expected = _nul_file(120)
    src = tmp_path / "n.csv"
    src.write_bytes(data)
    # ranges of several 4 KiB parse blocks: Arrow's chunker cuts inside each range
    config = small_load_config(
        db, "N", [src], runner="DirectRunner", range_size=40000, key_ranges=3, block_size=4 << 10
    )
    report = load(config)
    assert read_table(db, "N", ["Id", "S"]) == expected
    assert (report.tables[0].rows_written, report.tables[0].rows_rejected) == (120, 0)
