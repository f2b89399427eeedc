"""Peak memory of a real load of large GCS objects (issues "Stream CSV from GCS" and "Speed").

    PYTHONPATH=. python -m benchmarks.memory [--sizes-mb 50,5000] [--buffer-size 256MiB]
                                             [--json out.json]

For each size it generates an Orders CSV of about that many MB (examples/generate.py, cached
in $TMPDIR/spanner-loader-bench/), uploads it to a GCS emulator (gcp-storage-emulator, objects
on disk) as ``gs://memory-bench/orders-N.csv``, (or, with ``--source local``, uses the file as it is) and loads it in a fresh process with
``loader.load``: streamed from the emulator over HTTP, parsed, converted, sorted, encoded,
batched and committed over gRPC to the null Spanner server (benchmarks/null_spanner.py), which
acknowledges every commit. The child prints its peak RSS (VmHWM) and the rows the server got.

The claim: peak RSS does not grow with the object (a 5 GB object costs what a 50 MB one
does) and stays within ``--buffer-size`` + 300 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "memory-bench"
BYTES_PER_ROW = 103  # examples/generate.py Orders rows, measured on the 10M-row file
BOUND_SLACK = 300 << 20


def _size(text: str) -> int:
    from loader.config import parse_size

    return parse_size(text)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__)
    p.add_argument("--sizes-mb", default="50,5000", help="object sizes in MB, comma-separated")
    p.add_argument("--buffer-size", default="256MiB", type=_size)
    p.add_argument("--concurrency", default=4, type=int)
    p.add_argument(
        "--source",
        choices=("gcs", "local"),
        default="gcs",
        help="gcs: upload to the GCS emulator and load gs://...; local: load the file itself "
        "(gcp-storage-emulator reads a whole object for every ranged read, so multi-GB objects "
        "are measured from local disk: the same stream code after opening)",
    )
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "spanner-loader-bench",
    )
    p.add_argument("--child", nargs=2, metavar=("URI", "SCHEMA"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(uri: str, schema_path: Path, a: argparse.Namespace) -> None:
    """One load in this (fresh) process; prints rows, seconds and VmHWM as JSON."""
    from benchmarks.run import TABLE, _vm_hwm, load_config, null_database
    from loader import load

    schema = pickle.loads(schema_path.read_bytes())
    cfg = load_config(uri, buffer_size=a.buffer_size, concurrency=a.concurrency)
    t0 = time.perf_counter()
    report = load(cfg, database=null_database(), schemas={TABLE: schema})
    seconds = time.perf_counter() - t0
    table = report.tables[0]
    print(
        json.dumps(
            {
                "rows_read": table.rows_read,
                "rows_written": table.rows_written,
                "seconds": seconds,
                "hwm_kib": _vm_hwm(),
                "block_size": cfg.block_size,
            }
        )
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parse_args(argv)
    if a.child:
        child(a.child[0], Path(a.child[1]), a)
        return 0
    sys.path.insert(0, str(ROOT / "tests"))
    from gcs_server import gcs_emulator  # tests/gcs_server.py: the same server the tests use

    from benchmarks.null_spanner import NullSpanner
    from benchmarks.run import TABLE, orders_file, spanner_database
    from loader.emulator import start_emulator
    from loader.schema import read_schemas
    from loader.source import make_storage_client

    a.data_dir.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in a.sizes_mb.split(",") if s]
    emulator = start_emulator()
    try:
        os.environ["SPANNER_EMULATOR_HOST"] = emulator.address
        schema = read_schemas(spanner_database(f"mem-{os.getpid() % 10000}"), [TABLE])[TABLE]
    finally:
        emulator.stop()
    schema_path = a.data_dir / f"orders-schema-mem-{os.getpid()}.pickle"
    schema_path.write_bytes(pickle.dumps(schema))
    results: list[dict[str, Any]] = []
    try:
        with (
            tempfile.TemporaryDirectory(dir=a.data_dir) as gcs_dir,
            gcs_emulator(data_dir=gcs_dir) as url,
            NullSpanner() as server,
        ):
            env = dict(
                os.environ,
                STORAGE_EMULATOR_HOST=url,
                SPANNER_EMULATOR_HOST=server.address,
                PYTHONPATH=str(ROOT),
            )
            os.environ["STORAGE_EMULATOR_HOST"] = url
            bucket = make_storage_client().create_bucket(BUCKET)
            for mb in sizes:
                rows = max(1000, mb * 1_000_000 // BYTES_PER_ROW)
                path = orders_file(a.data_dir, rows)
                name = f"orders-{rows}.csv"
                blob = None
                uri = str(path)
                if a.source == "gcs":
                    t0 = time.perf_counter()
                    blob = bucket.blob(name, chunk_size=64 << 20)
                    blob.upload_from_filename(str(path))
                    uri = f"gs://{BUCKET}/{name}"
                    print(
                        f"  uploaded {path.stat().st_size / 1e6:,.0f} MB as {uri} "
                        f"in {time.perf_counter() - t0:.0f}s",
                        flush=True,
                    )
                server.reset()
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.memory", "--child", uri]
                    + [str(schema_path), "--buffer-size", str(a.buffer_size)]
                    + ["--concurrency", str(a.concurrency)],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if out.returncode:
                    print(out.stderr[-3000:], file=sys.stderr)
                    raise RuntimeError(f"the load of {name} failed ({out.returncode})")
                got = json.loads(out.stdout.strip().splitlines()[-1])
                committed = server.counts().rows
                if not (got["rows_read"] == rows == committed):
                    raise RuntimeError(f"{name}: {rows} rows, read {got}, server got {committed}")
                results.append(
                    {
                        "source": a.source,
                        "object_bytes": path.stat().st_size,
                        "rows": rows,
                        "seconds": got["seconds"],
                        "rows_per_s": rows / got["seconds"],
                        "peak_rss_mib": got["hwm_kib"] / 1024,
                        "buffer_size_mib": a.buffer_size / (1 << 20),
                        "block_size_mib": got["block_size"] / (1 << 20),
                        "bound_mib": (a.buffer_size + BOUND_SLACK) / (1 << 20),
                        "server_rows": committed,
                    }
                )
                if blob is not None:
                    blob.delete()
    finally:
        schema_path.unlink(missing_ok=True)
    print()
    print(
        f"{'object':>12} {'rows':>12} {'seconds':>8} {'rows/s':>10} {'peak RSS':>10} {'bound':>8}"
    )
    for r in results:
        print(
            f"{r['object_bytes'] / 1e6:>10,.0f}MB {r['rows']:>12,} {r['seconds']:>8.1f} "
            f"{r['rows_per_s']:>10,.0f} {r['peak_rss_mib']:>7,.0f}MiB {r['bound_mib']:>5,.0f}MiB"
        )
    ok = all(r["peak_rss_mib"] <= r["bound_mib"] for r in results)
    print(f"peak RSS within --buffer-size + 300 MB for every size: {'yes' if ok else 'NO'}")
    if a.json:
        a.json.write_text(json.dumps({"results": results, "within_bound": ok}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
