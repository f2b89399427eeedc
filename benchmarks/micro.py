"""Side-by-side timings of single hot-path steps, each against the way it was done before.

    PYTHONPATH=. python -m benchmarks.micro [--rows N] [--repeat N] [--cpu-time]

Each line times two ways of doing one step on the same input in this process, with pyarrow at
one thread, best of ``--repeat``; the input is the reference Orders file that benchmarks.run
generates (cached in $TMPDIR/spanner-loader-bench/). Results and what they decided are in
benchmarks/README.md ("Hot-path steps").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from benchmarks.run import TABLE, orders_file, spanner_database
from benchmarks.wide import accounts
from loader import convert as C
from loader import encode as E
from loader import native
from loader import sort as S
from loader.convert import time as convert_time
from loader.parse import Dialect, read_blocks
from loader.schema import KeyPart
from loader.sort import sort_indices, take_column


@contextlib.contextmanager
def _native_switch(flag: str) -> Iterator[None]:
    """Turn the compiled parts on ("1") or off ("0") for the block."""
    before = os.environ.get(native.NATIVE_ENV)
    os.environ[native.NATIVE_ENV] = flag
    try:
        yield
    finally:
        if before is None:
            del os.environ[native.NATIVE_ENV]
        else:
            os.environ[native.NATIVE_ENV] = before


#: The clock steps are timed by: the wall clock, or with ``--cpu-time`` this thread's CPU time
#: (every step runs on the calling thread: pyarrow at one thread, the compiled parts in the
#: caller), which a shared machine's other processes disturb less.
_clock: Callable[[], float] = time.perf_counter


def _best(repeat: int, fn: Callable[[], Any], clock: Optional[Callable[[], float]] = None) -> float:
    clock = clock or _clock
    best = float("inf")
    for _ in range(repeat):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def _line(step: str, before: str, t_before: float, after: str, t_after: float, rows: int) -> str:
    scale = 1e6 / rows * 1000  # ms per million rows
    return (
        f"{step:28s} {before:34s} {t_before * scale:8.1f}   {after:34s} {t_after * scale:8.1f}"
        f"   x{t_before / t_after:5.1f}"
    )


def _schema() -> Any:
    """The reference Orders schema, read from an emulator created from schemas/shop.sql."""
    from loader.emulator import start_emulator
    from loader.schema import read_schemas

    emulator = start_emulator()
    try:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
        db = spanner_database(f"micro-{os.getpid() % 10000}")
        return read_schemas(db, [TABLE])[TABLE]
    finally:
        emulator.stop()
        os.environ.pop("SPANNER_EMULATOR_HOST", None)


def _wide_keys(rows: int) -> tuple[pa.Table, list[KeyPart]]:
    """The key columns of benchmarks/wide.py's Accounts rows, typed as the converter makes
    them, and the table's key (schemas/wide.sql)."""
    text = accounts(rows).select(["Region", "AccountId"])
    table = pa.table(
        {
            "Region": text.column("Region").combine_chunks(),
            "AccountId": text.column("AccountId").combine_chunks().cast(pa.int64()),
        }
    )
    return table, [KeyPart("Region"), KeyPart("AccountId", desc=True)]


def run(rows: int, repeat: int, data_dir: Path, schema: Any) -> list[str]:
    pa.set_cpu_count(1)

    # 0. Fresh memory: writing 100 MiB the process has never touched, against writing it
    # again (first, before any step has freed memory the pool could hand out again).
    def fresh(size: int = 100 << 20) -> tuple[float, float]:
        buf = pa.allocate_buffer(size)
        view = np.frombuffer(buf, dtype=np.uint8)
        t0 = time.perf_counter()
        view[:] = 1
        t1 = time.perf_counter()
        view[:] = 2
        return t1 - t0, time.perf_counter() - t1

    first, again = fresh()
    fresh_line = (
        f"{'write 100 MiB (Arrow pool)':28s} {'fresh memory':34s} {first * 1000:8.1f}   "
        f"{'the same memory again':34s} {again * 1000:8.1f}   x{first / again:5.1f}  (ms)"
    )
    path = orders_file(data_dir, rows)
    blocks = []
    with open(path, "rb") as f:
        for b in read_blocks(f, str(path), schema, Dialect(), block_size=16 << 20):
            blocks.append(b)
    converted = [
        C.convert_block(b, schema, C.ConvertOptions(), str(path), int_texts=True) for b in blocks
    ]
    cols = converted[0].table.column_names
    types = [schema.column(c).type for c in cols]
    n = sum(c.table.num_rows for c in converted)
    out = [
        f"{'step (ms per 1M rows)':28s} {'before':34s} {'ms':>8s}   {'after':34s} {'ms':>8s}",
    ]

    # 1. INT64 cells: the integers cast back to text, or the converter's kept source text.
    ints = [c.table.column("CustomerId") for c in converted]
    texts = [c.int_texts["CustomerId"] for c in converted]
    t_cast = _best(repeat, lambda: [E._int64_cells(E._column(i, types[0])) for i in ints])
    t_text = _best(
        repeat,
        lambda: [(C._is_int_text(t, i.chunk(0)), E._string_cells(t)) for t, i in zip(texts, ints)],
    )
    out.append(
        _line("INT64 cells (1 column)", "int -> text cast", t_cast, "kept text + check", t_text, n)
    )

    # 2. TIMESTAMP fast path: the regex gate and per-part gathers, or the separator check and
    # packed words (the regex-gated variant is timed through the general entry point's gate).
    strings = [b.strings.column("PlacedAt").combine_chunks() for b in blocks]

    def regex_gated() -> None:
        check, convert_time._strict_zulu = convert_time._strict_zulu, lambda arr, valid: False
        try:
            for s in strings:
                C._timestamp_fast(s)
        finally:
            convert_time._strict_zulu = check

    def numpy_fast() -> None:
        with _native_switch("0"):
            for s in strings:
                C._timestamp_fast(s)

    with _native_switch("0"):
        t_regex = _best(repeat, regex_gated)
    t_fast = _best(repeat, numpy_fast)
    out.append(_line("TIMESTAMP gate + format", "regex gate", t_regex, "separator gate", t_fast, n))

    # 3. The flush's take of encoded rows in key order: from the ChunkedArray (Arrow resolves
    # each index to its chunk, then the result is combined: a second copy) or from its one
    # chunk. Best of repeat only: a first call's time is mostly fresh memory (line 0), and
    # whichever variant runs first pays it.
    keys_and_rows = pa.concat_tables(
        [
            c.table.select(list(schema.key_names)).append_column(
                "__row",
                E.encode_rows(
                    [c.table.column(x) for x in cols],
                    types,
                    int_texts=[c.int_texts.get(x) for x in cols],
                ),
            )
            for c in converted
        ]
    ).combine_chunks()
    order = sort_indices(keys_and_rows, schema.primary_key)
    row_col = keys_and_rows.column("__row")
    best_c = _best(repeat, lambda: row_col.take(order).combine_chunks())
    best_a = _best(repeat, lambda: take_column(row_col, order))
    before, after = "ChunkedArray.take + combine", "take_column (compiled when built)"
    out.append(_line("take encoded rows", before, best_c, after, best_a, n))

    # 4. Encoding whole rows (all 8 columns): the numpy path or the compiled encoder.
    def encode_all(native: bool) -> None:
        for c in converted:
            E.encode_rows(
                [c.table.column(x) for x in cols],
                types,
                int_texts=[c.int_texts.get(x) for x in cols],
                native=native,
            )

    # 5. The flush's key sort (CustomerId, OrderId): pyarrow's multi-column sort_indices, or
    # the compiled radix sort.
    def sort_keys(flag: str) -> None:
        with _native_switch(flag):
            sort_indices(keys_and_rows, schema.primary_key)

    if native.built():
        t_numpy = _best(repeat, lambda: encode_all(False))
        t_native = _best(repeat, lambda: encode_all(True))
        before, after = "numpy path (kept INT64 text)", "compiled (loader/_native.c)"
        out.append(_line("encode rows (8 columns)", before, t_numpy, after, t_native, n))
        t_native_ts = _best(repeat, lambda: [C._timestamp_fast(s) for s in strings])
        before, after = "separator gate + cast (numpy)", "compiled strict-Zulu pass"
        out.append(_line("TIMESTAMP fast path", before, t_fast, after, t_native_ts, n))
        amounts = [b.strings.column("Amount").combine_chunks() for b in blocks]
        numeric_t = schema.column("Amount").type

        def numeric(flag: str) -> None:
            with _native_switch(flag):
                for a in amounts:
                    C._convert_numeric(a, numeric_t, C.ConvertOptions())

        t_cast = _best(repeat, lambda: numeric("0"))
        t_plain = _best(repeat, lambda: numeric("1"))
        before, after = "Arrow cast to decimal128(38, 9)", "compiled plain-text parse"
        out.append(_line("NUMERIC text -> decimal", before, t_cast, after, t_plain, n))
        for name, label, convert in (
            ("CustomerId", "INT64 text -> int64", C._convert_int64),
            ("OrderDate", "DATE text -> date32", C._convert_date),
        ):
            texts_of = [b.strings.column(name).combine_chunks().cast(pa.string()) for b in blocks]
            col_t = schema.column(name).type

            def parse(
                flag: str, texts_of: Any = texts_of, convert: Any = convert, col_t: Any = col_t
            ) -> None:
                with _native_switch(flag):
                    for a in texts_of:
                        convert(a, col_t, C.ConvertOptions())

            t_cast = _best(repeat, lambda: parse("0"))
            t_plain = _best(repeat, lambda: parse("1"))
            out.append(_line(label, "Arrow cast", t_cast, "compiled plain-text parse", t_plain, n))
        t_arrow = _best(repeat, lambda: sort_keys("0"))
        t_radix = _best(repeat, lambda: sort_keys("1"))
        before, after = "pyarrow sort_indices (2 columns)", "compiled radix sort"
        out.append(_line("sort keys (2 INT64 columns)", before, t_arrow, after, t_radix, n))
        # 6. Any key as key bytes (encode_keys + sort_binary): the Orders key (which keeps the
        # radix sort above) and the wide table's (Region STRING, AccountId INT64 DESC), both
        # against pyarrow's multi-column sort, the path such keys took before.
        keys = keys_and_rows.select(list(schema.key_names))
        t_bytes = _best(repeat, lambda: S._sort_encoded_keys(keys, schema.primary_key))
        before, after = "pyarrow sort_indices (2 columns)", "key bytes (encode + byte sort)"
        out.append(_line("sort keys (INT64) as bytes", before, t_arrow, after, t_bytes, n))
        wide_keys, wide_key = _wide_keys(n)

        def sort_wide(flag: str) -> None:
            with _native_switch(flag):
                sort_indices(wide_keys, wide_key)

        t_arrow = _best(repeat, lambda: sort_wide("0"))
        t_bytes = _best(repeat, lambda: sort_wide("1"))
        out.append(_line("sort keys (STR, INT64 DESC)", before, t_arrow, after, t_bytes, n))

    # 7. The last flush's take on threads: at one thread, and at as many as this process may
    # use (pyarrow.cpu_count(), which loader.native.threads() follows within native.spread()).
    # Timed by the wall clock even with --cpu-time (the second thread's CPU time is not the
    # caller's), so on a shared machine run it often.
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if native.available() and cpus and cpus > 1:
        by_threads: dict[int, float] = {}
        with native.spread():  # as in a table's last flush (loader/table_load.py)
            for threads in (1, cpus):
                pa.set_cpu_count(threads)
                try:
                    by_threads[threads] = _best(
                        repeat, lambda: take_column(row_col, order), time.perf_counter
                    )
                finally:
                    pa.set_cpu_count(1)
        step, many = "take encoded rows, wall", f"{cpus} threads"
        out.append(_line(step, "1 thread", by_threads[1], many, by_threads[cpus], n))

    out.append(fresh_line)
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "spanner-loader-bench"
    )
    p.add_argument(
        "--cpu-time",
        action="store_true",
        help="time by this thread's CPU time instead of the wall clock (a shared machine)",
    )
    a = p.parse_args(argv)
    global _clock
    _clock = time.thread_time if a.cpu_time else time.perf_counter
    a.data_dir.mkdir(parents=True, exist_ok=True)
    for line in run(a.rows, a.repeat, a.data_dir, _schema()):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
