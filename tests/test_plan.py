"""The range planner (loader/plan): any CSV, any range size, any read chunk: the ranges' records,
read apart, are the file's records, none twice, in order, with their record and line numbers."""

from __future__ import annotations

import csv
import io
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gcs_server import gcs_emulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.errors import SourceError
from loader.parse import Dialect, dialect_from_preset
from loader.plan import plan_file, plan_ranges, splittable
from loader.plan.ranges import ranges_from_scan, scan_stream
from loader.source import SourceInfo, expand_sources, make_storage_client, open_source


@dataclass
class Written:
    data: bytes
    records: list[list[str]]  # data records (header excluded)
    starts: list[int]  # byte offset where each data record starts
    lines: list[int]  # 1-based line where each data record starts
    boundaries: dict[int, int]  # offsets after a record-ending LF -> line there


def _quote(field: str, force: bool) -> str:
    if force or any(c in field for c in ',"\r\n') or field == "":
        return '"' + field.replace('"', '""') + '"'
    return field


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[Written, Dialect]:
    header = draw(st.booleans())
    skip = draw(st.integers(0, 2))
    text = st.text(alphabet='ab,"\r\n é', max_size=6)
    n_cols = draw(st.integers(1, 3))
    rows = draw(st.lists(st.lists(text, min_size=n_cols, max_size=n_cols), max_size=12))
    out = bytearray()
    for _ in range(skip):
        out += draw(st.text(alphabet='ab,"', max_size=5)).encode() + b"\n"
    line = 1 + skip
    records: list[list[str]] = []
    starts, lines = [], []
    boundaries: dict[int, int] = {}
    all_rows = ([[f"c{i}" for i in range(n_cols)]] if header else []) + rows
    for i, row in enumerate(all_rows):
        while draw(st.integers(0, 5)) == 0:  # blank lines
            out += draw(st.sampled_from([b"\n", b"\r\n"]))
            line += 1
            boundaries[len(out)] = line
        is_data = not header or i > 0
        if is_data:
            records.append(row)
            starts.append(len(out))
            lines.append(line)
        body = ",".join(_quote(f, draw(st.booleans())) for f in row)
        out += body.encode()
        line += body.count("\n")
        last = i == len(all_rows) - 1
        if not last or draw(st.booleans()):
            out += draw(st.sampled_from([b"\n", b"\r\n"]))
            line += 1
            boundaries[len(out)] = line
    return Written(bytes(out), records, starts, lines, boundaries), Dialect(
        header=header, skip_rows=skip
    )


def _parse(data: bytes) -> list[list[str]]:
    return [r for r in csv.reader(io.StringIO(data.decode(), newline="")) if r]


def _check(w: Written, dialect: Dialect, target: int, chunk: int) -> None:
    buf = io.BytesIO(w.data)
    res = scan_stream(buf.read, dialect, target, chunk)
    info = SourceInfo(uri="/x.csv", kind="file", name="/x.csv", size=len(w.data))
    ranges = ranges_from_scan(info, res)
    got: list[list[str]] = []
    for r in ranges:
        if r.index:
            assert r.start in w.boundaries, (r, w.boundaries)  # never inside a record
            assert r.first_line == w.boundaries[r.start]
            assert r.start >= r.data_start
        part = w.data[r.start : r.stop]
        if r.index == 0:
            # the first range holds the skipped rows and the header
            part = part[len(w.data[: res.data_start]) :] if res.data_start else part
            skipped = w.data[: res.data_start].split(b"\n")
            assert len(skipped) - 1 >= dialect.skip_rows
        recs = _parse(part)
        mine = [
            i for i, s in enumerate(w.starts) if s >= r.start and (r.stop is None or s < r.stop)
        ]
        assert recs == [w.records[i] for i in mine]
        if mine:
            assert r.first_record == mine[0] + 1
        got.extend(recs)
    assert got == w.records
    assert res.records == len(w.records)
    # the header (and skipped rows) end where the data starts
    if w.records:
        assert res.data_start <= w.starts[0]
        assert res.prefix_lines < w.lines[0]


@given(csv_files(), st.integers(1, 40), st.integers(1, 17))
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_ranges_hold_every_record_once(
    case: tuple[Written, Dialect], target: int, chunk: int
) -> None:
    w, dialect = case
    _check(w, dialect, target, chunk)


@st.composite
def mysql_files(draw: st.DrawFn) -> tuple[bytes, list[list[str]]]:
    text = st.text(alphabet="ab\t\n\\\r", max_size=5)  # a CR is written as it is
    # but for one ending a line's last value, which CR LF would end (loader.parse.escapes)
    row = st.lists(text, min_size=2, max_size=2).filter(lambda r: not r[-1].endswith("\r"))
    rows = draw(st.lists(row, max_size=10))
    out = bytearray()
    for row in rows:
        esc = [f.replace("\\", "\\\\").replace("\t", "\\\t").replace("\n", "\\\n") for f in row]
        out += ("\t".join(esc) + "\n").encode()
    return bytes(out), rows


def _unescape_mysql(data: bytes) -> list[list[str]]:
    rows, fields, cur, i, s = [], [], [], 0, data.decode()
    while i < len(s):
        c = s[i]
        if c == "\\":
            cur.append(s[i + 1])
            i += 2
            continue
        if c == "\t":
            fields.append("".join(cur))
            cur = []
        elif c == "\n":
            fields.append("".join(cur))
            rows.append(fields)
            fields, cur = [], []
        else:
            cur.append(c)
        i += 1
    return rows


@given(mysql_files(), st.integers(1, 30), st.integers(1, 9))
@settings(max_examples=200, deadline=None)
def test_backslash_escaped_newlines_are_never_cut(
    case: tuple[bytes, list[list[str]]], target: int, chunk: int
) -> None:
    data, rows = case
    dialect = dialect_from_preset("mysql")
    res = scan_stream(io.BytesIO(data).read, dialect, target, chunk)
    info = SourceInfo(uri="/x.tsv", kind="file", name="/x.tsv", size=len(data))
    got = []
    for r in ranges_from_scan(info, res):
        part = _unescape_mysql(data[r.start : r.stop])
        if part:
            assert r.first_record == len(got) + 1
        got.extend(part)
    assert got == rows
    assert res.records == len(rows)


def test_stray_quote_keeps_the_file_whole(tmp_path: Path) -> None:
    path = os.path.join(tmp_path, "inches.csv")
    data = b"id,size\n" + b"".join(b'%d,5"\n' % i for i in range(200))
    with open(path, "wb") as fh:
        fh.write(data)
    st_ = os.stat(path)
    info = SourceInfo(uri=path, kind="file", name=path, size=st_.st_size, mtime_ns=st_.st_mtime_ns)
    ranges = plan_file(info, Dialect(), target=100, chunk=64)
    assert [(r.start, r.stop) for r in ranges] == [(0, None)]


def test_a_local_file_is_split_with_the_header_in_front(tmp_path: Path) -> None:
    path = os.path.join(tmp_path, "big.csv")
    data = b"id,note\n" + b"".join(b'%d,"line\nbreak"\r\n' % i for i in range(300))
    with open(path, "wb") as fh:
        fh.write(data)
    st_ = os.stat(path)
    info = SourceInfo(uri=path, kind="file", name=path, size=st_.st_size, mtime_ns=st_.st_mtime_ns)
    ranges = plan_file(info, Dialect(), target=500, chunk=256)
    assert len(ranges) > 5
    assert ranges[0].start == 0 and not ranges[0].header_skipped
    for a, b in zip(ranges, ranges[1:]):
        assert a.stop == b.start and b.header_skipped
        assert b.data_start == len(b"id,note\n") and b.prefix_lines == 1
        assert data[b.start - 1] == 0x0A
        assert data[b.start :].startswith(b"%d," % (b.first_record - 1))
        assert b.first_line == 2 + 2 * (b.first_record - 1)
    assert ranges[-1].stop is None


@pytest.mark.parametrize(
    ("info", "dialect", "why"),
    [
        (SourceInfo("/a.gz", "file", name="/a.gz", size=9, compression="gzip"), Dialect(), "gzip"),
        (SourceInfo("-", "stdin"), Dialect(), "stdin"),
        (SourceInfo("/a", "file", name="/a", size=9), Dialect(escape_char="\\"), "escape_char"),
        (SourceInfo("/a", "file", name="/a", size=9), Dialect(encoding="utf-16"), "ASCII"),
    ],
)
def test_what_is_read_whole(info: SourceInfo, dialect: Dialect, why: str) -> None:
    reason = splittable(info, dialect)
    assert reason is not None and why in reason
    assert [(r.start, r.stop) for r in plan_file(info, dialect, target=1)] == [(0, None)]


# -- ranged reads, local and gs:// ------------------------------------------------------------


@pytest.fixture(scope="module")
def gcs_client() -> Iterator[Any]:
    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        yield make_storage_client()


def _ranged_cases(size: int) -> list[tuple[int, int | None]]:
    return [(0, None), (0, 1), (3, 17), (5, None), (size - 1, None), (size - 1, size), (0, size)]


def test_ranged_reads_local(tmp_path: Path) -> None:
    data = bytes(range(256)) * 3
    path = tmp_path / "r.bin"
    path.write_bytes(data)
    st_ = os.stat(path)
    info = SourceInfo(str(path), "file", name=str(path), size=st_.st_size, mtime_ns=st_.st_mtime_ns)
    for start, stop in _ranged_cases(len(data)):
        with open_source(info, start=start, stop=stop) as f:
            assert f.read() == data[start:stop]


def test_ranged_reads_gcs(gcs_client: Any) -> None:
    data = bytes(range(256)) * 3
    bucket = gcs_client.create_bucket(f"b-{uuid.uuid4().hex[:12]}")
    bucket.blob("r.csv").upload_from_string(data)
    (info,), _ = expand_sources([f"gs://{bucket.name}/r.csv"], storage_client=gcs_client)
    for chunk in (7, 1 << 20):
        for start, stop in _ranged_cases(len(data)):
            with open_source(
                info, storage_client=gcs_client, chunk_size=chunk, start=start, stop=stop
            ) as f:
                assert f.read() == data[start:stop], (chunk, start, stop)


def test_ranged_read_refuses_compressed() -> None:
    info = SourceInfo("/a.gz", "file", name="/a.gz", size=9, compression="gzip")
    with pytest.raises(SourceError, match="ranges"):
        open_source(info, start=1)


def test_gcs_object_planned_and_read(gcs_client: Any) -> None:
    data = b"id,note\n" + b"".join(b'%d,"a\nb"\n' % i for i in range(100))
    bucket = gcs_client.create_bucket(f"b-{uuid.uuid4().hex[:12]}")
    bucket.blob("p.csv").upload_from_string(data)
    (info,), _ = expand_sources([f"gs://{bucket.name}/p.csv"], storage_client=gcs_client)
    ranges = plan_ranges([info], Dialect(), target=200, storage_client=gcs_client, chunk=64)
    assert len(ranges) > 3
    assert b"".join(_read(r, gcs_client) for r in ranges) == data
    assert all(data[r.start - 1 : r.start] == b"\n" for r in ranges[1:])


def _read(r: Any, client: Any) -> bytes:
    with open_source(r.source, storage_client=client, start=r.start, stop=r.stop) as f:
        return bytes(f.read())


@pytest.mark.slow
def test_planner_benchmark_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.plan import main

    assert (
        main(
            ["--rows", "2000", "--wide-rows", "500", "--repeat", "1"]
            + ["--data-dir", str(tmp_path)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "every field quoted" in out and "wide" in out
