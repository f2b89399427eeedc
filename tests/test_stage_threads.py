"""The stage threads of a table's load: blocks parsed on a thread of their own, and every
flush's compiled kernels on Arrow's pool size (loader/table_load.py, loader/native.spread).

Apart from tests/test_native_threads.py because these run whole loads, with Arrow's own
thread pool, which scripts/native_check.sh's ThreadSanitizer leg leaves out (TSan reports
Arrow's uninstrumented futures and shared pointers as races in libarrow)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from loader import native as loader_native


def _small_load(tmp_path: Any) -> None:
    """A dry run of 3,000 rows in 16 KiB parse blocks whose buffer flushes mid-read (at 128
    KiB: after the second block), then at the end, with Arrow's pool at 2 threads."""
    from loader import LoadConfig, TableJob, Target, load
    from loader.convert import ConvertOptions
    from loader.parse import Dialect
    from loader.schema import Column, KeyPart, TableSchema
    from loader.types import SpannerType

    path = tmp_path / "T.csv"
    path.write_text("Id,Name\n" + "".join(f"{i},name{i}\n" for i in range(3000)))
    columns = (
        Column("Id", SpannerType.parse("INT64"), False),
        Column("Name", SpannerType.parse("STRING(MAX)")),
    )
    schema = TableSchema("T", columns, (KeyPart("Id"),))
    cfg = LoadConfig(
        target=Target("p", "i", "d"),
        jobs=(TableJob("T", (str(path),)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        dry_run=True,
        state=False,
        buffer_size=2 << 20,
        block_size=16 << 10,
    )
    before = pa.cpu_count()
    try:
        pa.set_cpu_count(2)
        report = load(cfg, database=object(), schemas={"T": schema})
    finally:
        pa.set_cpu_count(before)
    assert report.tables[0].rows_read == 3000


def test_every_flush_spreads(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each flush, mid-read or last, runs with the compiled kernels free to use Arrow's pool
    size (what it takes: key columns to de-duplicate, verify's values): the stage threads
    wait for it."""
    from loader import buffer as loader_buffer

    seen: list[int] = []
    sort_order = loader_buffer.sort_order

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(loader_native.threads())
        return sort_order(*args, **kwargs)

    monkeypatch.setattr(loader_buffer, "sort_order", spy)
    _small_load(tmp_path)
    assert len(seen) > 1 and seen == [2] * len(seen)


def test_blocks_are_parsed_on_a_thread_of_their_own(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader is advanced (Arrow parses a block when asked) on the parse thread, not on
    the thread that converts, so the next block is parsed while one is converted; the
    block's checks and text are made on the convert thread, so the parse thread only reads."""
    import threading

    from loader import table_load
    from loader.parse import reader

    parsed_on: set[str] = set()
    finished_on: set[str] = set()
    converted_on: set[str] = set()
    read_blocks, convert_stage = table_load.read_deferred_blocks, table_load.convert_stage
    finish_block = reader._finish_block

    def reading(*args: Any, **kwargs: Any) -> Any:
        for block in read_blocks(*args, **kwargs):
            parsed_on.add(threading.current_thread().name)
            yield block

    def finishing(*args: Any, **kwargs: Any) -> Any:
        finished_on.add(threading.current_thread().name)
        return finish_block(*args, **kwargs)

    def converting(*args: Any, **kwargs: Any) -> Any:
        converted_on.add(threading.current_thread().name)
        return convert_stage(*args, **kwargs)

    monkeypatch.setattr(table_load, "read_deferred_blocks", reading)
    monkeypatch.setattr(reader, "_finish_block", finishing)
    monkeypatch.setattr(table_load, "convert_stage", converting)
    _small_load(tmp_path)
    assert parsed_on == {"loader-parse"}
    assert finished_on == converted_on == {"loader-convert"}
