"""The README's demo: a real load of the example shop through the real CLI.

1. starts a GCS emulator (gcp-storage-emulator) and uploads examples/shop/*.csv to
   gs://shop-export/ (OrderItems gzipped, as exports often are);
2. starts the official Cloud Spanner Emulator;
3. runs ``spanner-loader load --manifest ... --emulator --ddl schemas/shop.sql`` against them
   and prints its report;
4. runs ``spanner-loader verify`` on the same manifest, which reads every table back and
   compares it with the source files.

Run it with ``scripts/demo.sh`` (which makes the virtualenv first). Everything it starts is
stopped and its scratch folder removed when it ends; it closes with the commands to run the
same load yourself.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "examples" / "shop"
BUCKET = "shop-export"
TABLES = ["Customers", "Orders", "OrderItems", "Products"]


NEXT = """
demo: done (emulators stopped, scratch files removed). The same load from local files, yourself:
  source .venv/bin/activate
  eval "$(spanner-loader emulator start --database shop --ddl schemas/shop.sql)"
  spanner-loader load --manifest examples/shop/manifest.json --emulator --database shop
  spanner-loader verify --manifest examples/shop/manifest.json --emulator --database shop
  spanner-loader emulator stop"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"demo: nothing listens on port {port} after {timeout}s")


def main() -> int:
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="spanner-loader-demo-") as scratch:
        return demo(Path(scratch))


def shown(cmd: list[str], work: Path) -> str:
    """A command as printed: the scratch folder (gone after the demo) as <demo>."""
    return "$ " + " ".join(cmd).replace(str(work), "<demo>").replace(str(ROOT) + "/", "")


def demo(work: Path) -> int:
    from loader.emulator import start_emulator

    gcs_port = free_port()
    gcs_exe = shutil.which("gcp-storage-emulator") or str(
        Path(sys.executable).parent / "gcp-storage-emulator"
    )
    gcs = subprocess.Popen(
        [gcs_exe, "start", "--host", "127.0.0.1", "--port", str(gcs_port), "--in-memory", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    spanner_em = None
    try:
        wait_port(gcs_port)
        env = dict(os.environ, STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{gcs_port}")
        os.environ.update(env)
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(project="demo-project", credentials=AnonymousCredentials())
        bucket = client.create_bucket(BUCKET)
        manifest = {"tables": []}
        for table in TABLES:
            data = (SHOP / f"{table}.csv").read_bytes()
            name = f"shop/{table}.csv"
            if table == "OrderItems":
                name += ".gz"
                data = gzip.compress(data, mtime=0)
            bucket.blob(name).upload_from_string(data, content_type="text/csv")
            pattern = f"gs://{BUCKET}/shop/{table}.csv*"
            manifest["tables"].append({"table_name": table, "file_patterns": [pattern]})
        manifest_path = work / "manifest.json"
        manifest_path.write_text(json.dumps(manifest, indent=2))
        print(f"demo: GCS emulator on 127.0.0.1:{gcs_port} serving gs://{BUCKET}/shop/", flush=True)

        spanner_em = start_emulator()
        env["SPANNER_EMULATOR_HOST"] = spanner_em.address
        print(f"demo: Spanner emulator on {spanner_em.address}", flush=True)
        common = ["--manifest", str(manifest_path), "--emulator", "--database", "shop"]
        load_cmd = [
            "spanner-loader",
            "load",
            *common,
            "--ddl",
            str(ROOT / "schemas" / "shop.sql"),
            "--rejects",
            str(work / "rejects.jsonl"),
        ]
        print("demo: " + shown(load_cmd, work), flush=True)
        rc = subprocess.call(load_cmd, env=env)
        if rc != 0:
            print(f"demo: the load exited with {rc}", file=sys.stderr)
            return rc
        verify_cmd = ["spanner-loader", "verify", *common]
        print("demo: " + shown(verify_cmd, work), flush=True)
        rc = subprocess.call(verify_cmd, env=env)
        if rc == 0:
            print(NEXT, flush=True)
        return rc
    finally:
        if spanner_em is not None:
            spanner_em.stop()
        os.killpg(gcs.pid, signal.SIGTERM)
        gcs.wait(timeout=10)


if __name__ == "__main__":
    raise SystemExit(main())
