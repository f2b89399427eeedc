"""Progress display for the CLI: a live bar on a terminal, periodic log lines otherwise.

The core only calls a ``Progress -> None`` callback; everything about drawing is here.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

from .pipeline import Progress


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}TiB"


def _fmt_eta(seconds: Optional[float]) -> str:
    if seconds is None or seconds < 0 or seconds > 360000:
        return "--:--"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class ProgressPrinter:
    """Renders progress events; ``tty`` selects a redrawn bar versus periodic lines."""

    def __init__(
        self,
        stream: TextIO,
        tty: bool,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.tty = tty
        self.interval = interval if not tty else 0.2
        self.clock = clock
        self.started: dict[str, float] = {}
        self.last_draw = 0.0
        self.last: Optional[Progress] = None

    def line(self, p: Progress) -> str:
        now = self.clock()
        t0 = self.started.setdefault(p.table, now)
        elapsed = max(now - t0, 1e-9)
        done_rows = p.rows_written or p.rows_read
        rate_text = f"{done_rows / elapsed:,.0f} rows/s" if elapsed >= 0.5 else "-- rows/s"
        frac = p.bytes_read / p.bytes_total if p.bytes_total else 0.0
        eta = (elapsed / frac - elapsed) if frac > 0.001 else None
        width = 24
        filled = int(width * min(frac, 1.0))
        bar = "#" * filled + "-" * (width - filled)
        return (
            f"{p.table} [{bar}] {frac * 100:5.1f}% {_fmt_bytes(p.bytes_read)}/"
            f"{_fmt_bytes(p.bytes_total)} read {p.rows_read:,} written {p.rows_written:,} "
            f"{rate_text} commits {p.commits:,} retries {p.retries:,} "
            f"rejected {p.rows_rejected:,} ETA {_fmt_eta(eta)}"
        )

    def __call__(self, p: Progress) -> None:
        self.last = p
        now = self.clock()
        self.started.setdefault(p.table, now)
        if now - self.last_draw < self.interval:
            return
        self.last_draw = now
        self._draw(p)

    def _draw(self, p: Progress) -> None:
        text = self.line(p)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write("progress: " + text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.last is not None:
            self._draw(self.last)
            if self.tty:
                self.stream.write("\n")
                self.stream.flush()


class _Silent:
    def __call__(self, p: Progress) -> None:
        pass

    def close(self) -> None:
        pass


def make_progress(quiet: bool, stream: Optional[TextIO] = None) -> ProgressPrinter | _Silent:
    """A bar on a terminal stderr, periodic lines when stderr is not a terminal, or nothing."""
    if quiet:
        return _Silent()
    stream = stream or sys.stderr
    return ProgressPrinter(stream, tty=stream.isatty())
