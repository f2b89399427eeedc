"""Start and stop a real GCS emulator (the ``gcp-storage-emulator`` package) for tests.

The emulator runs in its own process, so the test process's memory and threads are its own
(the peak-memory test depends on that). It listens on a loopback port that was free a moment
ago and is stopped by its process id.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Optional


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def gcs_emulator(data_dir: Optional[str] = None, startup_timeout: float = 30.0) -> Iterator[str]:
    """Run ``gcp-storage-emulator`` on a free loopback port; yield its URL ``http://127.0.0.1:P``.

    Objects live in memory unless ``data_dir`` is given (then on disk there, which keeps the
    emulator's own memory flat for very large objects). Set ``STORAGE_EMULATOR_HOST`` to the
    yielded URL to point google-cloud-storage at it.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="gcs-emulator-") as work:
        cmd = [sys.executable, "-m", "gcp_storage_emulator"]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        cmd += ["start", "--host", "127.0.0.1", "--port", str(port), "--quiet"]
        if not data_dir:
            cmd.append("--in-memory")
        log_path = os.path.join(work, "emulator.log")
        with open(log_path, "wb") as log:
            # cwd: the emulator creates ./.cloudstorage even when it keeps objects in memory.
            env = dict(os.environ, STORAGE_BASE=work)
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + startup_timeout
            while not _healthy(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    with open(log_path, "rb") as f:
                        output = f.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"gcp-storage-emulator did not start on {url}:\n{output}")
                time.sleep(0.05)
            yield url
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
