"""Rejected rows: what was wrong with them and where they go.

A reject file is JSON Lines, one object per rejected row::

    {"source": "gs://b/orders.csv", "line": 17, "record": 16, "column": "Amount",
     "reason": "not a NUMERIC: '1.2.3'", "text": "17,1.2.3,..."}

``line`` is the 1-based physical line where the row starts in the (decompressed) source,
``record`` the 1-based data record number (header excluded), ``column`` is null for a row-level
problem (wrong field count, a row over a commit budget, a commit Spanner refused).
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Optional

from .errors import ConfigError


@dataclass(frozen=True)
class Reject:
    """One rejected row."""

    source: str
    line: Optional[int]
    record: Optional[int]
    column: Optional[str]
    reason: str
    text: Optional[str] = None
    table: Optional[str] = None


class RejectWriter:
    """Appends rejects to a JSON Lines file, opened lazily on the first reject; thread-safe."""

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self.count = 0
        self._fh: Optional[IO[str]] = None
        self._lock = threading.Lock()

    def write(self, reject: Reject) -> None:
        with self._lock:
            self.count += 1
            if self.path is None:
                return
            if self._fh is None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fh = open(self.path, "a", encoding="utf-8")
                except OSError as e:
                    raise ConfigError(
                        f"cannot write the reject file {self.path}: {e.strerror}",
                        hint="choose a writable path with --rejects",
                    ) from e
            try:
                self._fh.write(json.dumps(asdict(reject), ensure_ascii=False) + "\n")
                self._fh.flush()
            except OSError as e:
                raise ConfigError(
                    f"cannot write the reject file {self.path}: {e.strerror}",
                    hint="free disk space or choose another path with --rejects",
                ) from e

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
