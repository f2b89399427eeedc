"""Per-type convert + encode cost on the wide table, each type's compiled path against the path
it replaced (issue #18, "every type at columnar speed"), side by side in one process.

    PYTHONPATH=. python -m benchmarks.types [--rows N] [--repeat N]

Each column of benchmarks/wide.py's Accounts rows (string columns, NULLs as the parser gives
them) is converted (``convert_column``) and encoded alone (``encode_rows``, the compiled
encoder), best of ``--repeat``, with pyarrow at one thread. "before" switches off only the
paths issue #18 added (BYTES decoded and encoded in loader/_native.c, ARRAY cells framed
there, TIMESTAMP text with
offsets parsed there, BOOL words matched, JSON validated and flat JSON arrays split there),
so it is the loader as it was; "after" is the loader as it is. JSON and
ARRAY are also timed with every value distinct (the generator repeats 64 and 24 texts), since
their validation runs once per distinct value; the arrays also as PostgreSQL's array text
(``--dialect postgres``: "before" is its parser per distinct value). Results: benchmarks/README.md ("Per type").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from benchmarks.run import pyarrow_threads
from benchmarks.wide import accounts
from loader import encode as E
from loader.convert import ConvertOptions, convert_column
from loader.convert import json_array as convert_json
from loader.convert import numbers as convert_numbers
from loader.convert import text as convert_text
from loader.convert import time as convert_time
from loader.encode import encode_rows
from loader.types import SpannerType

TYPES = {
    "Region": "STRING(8)",
    "AccountId": "INT64",
    "Balance": "NUMERIC",
    "Rate": "FLOAT64",
    "Score": "FLOAT32",
    "Active": "BOOL",
    "Opened": "DATE",
    "UpdatedAt": "TIMESTAMP",
    "Avatar": "BYTES(MAX)",
    "Meta": "JSON",
    "Tags": "ARRAY<STRING(MAX)>",
    "Counts": "ARRAY<INT64>",
}


@contextlib.contextmanager
def before_issue_18() -> Iterator[None]:
    """The per-type paths issue #18 added, switched off: BYTES decoded by numpy and encoded
    as numpy-made cells, ARRAY cells made by numpy, TIMESTAMP text with offsets through the general Arrow path, BOOL
    words through Arrow's lowercase + is_in, JSON and ARRAY text through json.loads once per
    distinct value."""
    patched = [
        (convert_text, "_base64_native"),
        (convert_time, "_timestamp_offsets_native"),
        (convert_json, "_json_checks_native"),
        (convert_json, "_array_native"),
        (convert_numbers, "_bool_native"),
    ]
    saved = [getattr(module, name) for module, name in patched]
    kind = E._NATIVE_KINDS.pop("BYTES")
    list_cells = E._native_list_cells
    for module, name in patched:
        setattr(module, name, lambda *args, **kwargs: None)
    E._native_list_cells = E._numpy_cells
    try:
        yield
    finally:
        for (module, name), fn in zip(patched, saved):
            setattr(module, name, fn)
        E._NATIVE_KINDS["BYTES"] = kind
        E._native_list_cells = list_cells


def _best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _column_cost(
    arr: pa.Array, t: SpannerType, repeat: int, options: ConvertOptions
) -> tuple[float, float]:
    tc, (typed, errors) = _best(repeat, lambda: convert_column(arr, t, options))
    assert not errors, list(errors.items())[:3]
    te, _ = _best(repeat, lambda: encode_rows([typed], [t]))
    return tc, te


def _distinct_columns(rows: int) -> dict[str, tuple[str, pa.Array]]:
    """JSON and ARRAY columns whose every value differs (the worst case for their loops), the
    arrays also as PostgreSQL's array text (read with the postgres dialect's options)."""
    meta = [json.dumps({"tier": i % 7, "id": i, "note": f"n{i}"}) for i in range(rows)]
    tags = [json.dumps([f"t{i}", "b", f"c{i % 97}"]) for i in range(rows)]
    counts = [f"[{i},{-i},null]" for i in range(rows)]
    pg_tags = [f'{{t{i},"b c",NULL,"say \\"x{i % 97}\\""}}' for i in range(rows)]
    pg_counts = [f"{{{i},{-i},NULL}}" for i in range(rows)]
    return {
        "Meta, distinct": ("JSON", pa.array(meta, pa.string())),
        "Tags, distinct": ("ARRAY<STRING(MAX)>", pa.array(tags, pa.string())),
        "Counts, distinct": ("ARRAY<INT64>", pa.array(counts, pa.string())),
        "Tags, pg distinct": ("ARRAY<STRING(MAX)>", pa.array(pg_tags, pa.string())),
        "Counts, pg distinct": ("ARRAY<INT64>", pa.array(pg_counts, pa.string())),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    table = accounts(a.rows)
    columns: dict[str, tuple[str, pa.Array]] = {
        name: (type_text, table.column(name).combine_chunks()) for name, type_text in TYPES.items()
    }
    columns.update(_distinct_columns(a.rows))
    scale = 1e6 / a.rows * 1000  # ms per million rows
    print(f"{a.rows:,} rows, ms per million rows, convert + encode, best of {a.repeat}")
    head = f"{'column':19s} {'type':20s} {'before':>22s} {'after':>22s} {'after/before':>13s}"
    print(head)
    totals = [0.0, 0.0]
    with pyarrow_threads(1):
        for name, (type_text, arr) in columns.items():
            t = SpannerType.parse(type_text)
            options = ConvertOptions(array_syntax="postgres" if ", pg" in name else "json")
            with before_issue_18():
                bc, be = _column_cost(arr, t, a.repeat, options)
            ac, ae = _column_cost(arr, t, a.repeat, options)
            if "distinct" not in name:
                totals[0] += bc + be
                totals[1] += ac + ae
            print(
                f"{name:19s} {type_text:20s} "
                f"{bc * scale:9.1f} + {be * scale:8.1f}   {ac * scale:9.1f} + {ae * scale:8.1f}"
                f"   {(ac + ae) / (bc + be):10.2f}"
            )
    print(
        f"{'wide, all columns':40s} {totals[0] * scale:22.1f} {totals[1] * scale:22.1f}"
        f"   {totals[1] / totals[0]:10.2f}"
    )


if __name__ == "__main__":
    main()
