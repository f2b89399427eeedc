"""Progress display for the CLI: a live bar on a terminal, periodic log lines otherwise.

The core only calls a ``Progress -> None`` callback; everything about drawing is here.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from typing import Callable, Optional, TextIO


@dataclass(frozen=True)
class Progress:
    """A progress event; the CLI draws it, the library default ignores it.

    A table's load is done when every row read is written, rejected, superseded (a later row
    of the same key won) or skipped (committed by an interrupted run): :attr:`rows_done`
    against :attr:`rows_read` once ``reading_done``; while reading, the total is estimated
    from the bytes read so far (see loader/progress.py). Events come as blocks are read, as
    commits finish and, with ``final`` set, once after a table's last commit.
    """

    table: str
    bytes_read: int
    bytes_total: int
    """Size of the table's sources (0 when unknown, e.g. stdin)."""
    rows_read: int
    rows_written: int
    rows_rejected: int
    retries: int
    commits: int
    rows_skipped: int = 0
    rows_superseded: int = 0
    rows_key_skipped: int = 0
    """Rows left out for their keys (``skip_existing``, ``skip_missing``)."""
    bytes_skipped: int = 0
    """Of ``bytes_read``, those before where a resumed run started (their rows not read)."""
    reading_done: bool = False
    """Every source is read: ``rows_read`` is the table's total."""
    final: bool = False
    """The table's last event: every commit of it has finished."""
    elapsed_s: Optional[float] = None
    """Seconds the table has been loading, when the event knows (a Beam table's one event,
    sent when its pipeline ends); else the printer times it from the table's first event."""

    @property
    def rows_done(self) -> int:
        """Rows that need nothing more: written, rejected, superseded or skipped."""
        return (
            self.rows_written
            + self.rows_rejected
            + self.rows_superseded
            + self.rows_skipped
            + self.rows_key_skipped
        )


ProgressFn = Callable[[Progress], None]


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


@dataclass(frozen=True)
class Estimate:
    """How far a table's load is: rows done against the (estimated) total."""

    done: int
    """Rows written, rejected, superseded or skipped."""
    total: Optional[int]
    """Rows in the table's sources: exact once they are read, else estimated from the bytes
    read so far (None when that cannot be estimated: nothing read yet, or sizes unknown)."""
    estimated: bool
    """``total`` is an estimate (drawn with a ``~``)."""

    @property
    def fraction(self) -> Optional[float]:
        """Share done, 0..1; below 1 until the total is known and every row is done."""
        if self.total is None:
            return None
        if self.total <= 0:
            return 1.0 if not self.estimated else 0.0
        frac = min(self.done / self.total, 1.0)
        if self.estimated or self.done < self.total:
            frac = min(frac, 0.999)  # 100% only when every row is known to be done
        return frac


def estimate(p: Progress) -> Estimate:
    """The load's progress in rows: commits finish long after the reader (a whole input may
    fit in one buffer), so bytes read say little about what is left to do."""
    done = p.rows_done
    if p.reading_done:
        return Estimate(done, p.rows_read, False)
    read = p.bytes_read - p.bytes_skipped
    if p.bytes_total > 0 and read > 0 and p.rows_read > 0:
        ratio = max((p.bytes_total - p.bytes_skipped) / read, 1.0)
        total = max(round(p.rows_read * ratio), p.rows_read, done)
        return Estimate(done, total, True)
    return Estimate(done, None, True)


class ProgressPrinter:
    """Renders progress events; ``tty`` selects redrawn bars versus periodic lines.

    Percent and ETA follow the rows done (written, rejected, superseded, skipped) against the
    table's rows, estimated while its sources are being read (marked ``~``). A table's final
    event is always drawn. Tables loading side by side (loader/waves.py) each get a line: on
    a terminal one bar per table still loading, redrawn together (each cut to the terminal's
    width so the block can be redrawn in place), and when stderr is not a terminal, every
    ``interval`` seconds a line for each table that moved since its last one. A dry run
    (``validate``, ``--dry-run``) says its rows were validated, not written, and shows no
    commits or retries.
    """

    def __init__(
        self,
        stream: TextIO,
        tty: bool,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        columns: Optional[int] = None,
        dry_run: bool = False,
    ) -> None:
        self.stream = stream
        self.dry_run = dry_run
        self.tty = tty
        self.interval = interval if not tty else 0.2
        self.clock = clock
        self.columns = columns
        """The terminal's width (None: asked when drawing)."""
        self.started: dict[str, float] = {}
        self.last_draw: Optional[float] = None  # the first event is drawn at once
        self.last: Optional[Progress] = None
        self.loading: dict[str, Progress] = {}
        """The latest event of each table still loading, in the order they started."""
        self.drawn: dict[str, Progress] = {}
        """The event last drawn for each table."""
        self.live = 0
        """Lines of the bars being redrawn on the terminal (the cursor is on the last)."""

    def line(self, p: Progress) -> str:
        now = self.clock()
        t0 = self.started.setdefault(p.table, now)
        elapsed = max(now - t0 if p.elapsed_s is None else p.elapsed_s, 1e-9)
        est = estimate(p)
        # rows a resumed run skips (its interrupted run committed them) take no time: a rate
        # that counted them sped up the start and made the ETA grow as the writing went on
        worked = max(est.done - p.rows_skipped, 0)
        rate = worked / elapsed
        # a rate over the first half second is noise, but a table's last line has its own
        rate_text = f"{rate:,.0f} rows/s" if elapsed >= 0.5 or p.final else "-- rows/s"
        frac = est.fraction
        eta: Optional[float] = None
        if est.total is not None and frac is not None:
            left = max(est.total - est.done, 0)
            if not left and frac >= 1.0:
                eta = 0.0
            elif worked > 0 and elapsed >= 0.5:
                eta = left / rate
        width = 24
        filled = int(width * (frac or 0.0))
        bar = "#" * filled + "-" * (width - filled)
        mark = "~" if est.estimated else ""
        pct = f"{mark}{frac * 100:.1f}%" if frac is not None else "--.-%"
        total = f"{mark}{est.total:,}" if est.total is not None else "?"
        size = (
            f"{_fmt_bytes(p.bytes_read)}/{_fmt_bytes(p.bytes_total)}"
            if p.bytes_total
            else (_fmt_bytes(p.bytes_read))
        )
        done = "validated" if self.dry_run else "written"
        commits = "" if self.dry_run else f"commits {p.commits:,} retries {p.retries:,} "
        return (
            f"{p.table} [{bar}] {pct:>7} rows {est.done:,}/{total} "
            f"({done} {p.rows_written:,} rejected {p.rows_rejected:,}) "
            f"read {p.rows_read:,} {size} {rate_text} {commits}ETA {_fmt_eta(eta)}"
        )

    def __call__(self, p: Progress) -> None:
        self.last = p
        now = self.clock()
        self.started.setdefault(p.table, now)
        if p.final:
            self.loading.pop(p.table, None)
        else:
            self.loading[p.table] = p
        if not p.final and self.last_draw is not None and now - self.last_draw < self.interval:
            return
        self.last_draw = now
        self._draw(p if p.final else None)

    def _draw(self, final: Optional[Progress] = None) -> None:
        """Draw ``final`` (a table's last event) and the tables still loading."""
        if self.tty:
            self._redraw(final)
        else:
            moved = [e for t, e in self.loading.items() if self.drawn.get(t) is not e]
            for e in [final] if final is not None else moved:
                self.drawn[e.table] = e
                self.stream.write("progress: " + self.line(e) + "\n")
        self.stream.flush()

    def _redraw(self, final: Optional[Progress]) -> None:
        events = ([final] if final is not None else []) + list(self.loading.values())
        lines = [self.line(e) for e in events]
        if len(lines) > 1:  # a wrapped line would break the redraw in place
            cols = self.columns or shutil.get_terminal_size().columns
            lines = [x[: max(cols - 1, 20)] for x in lines]
        up = f"\x1b[{self.live - 1}A" if self.live > 1 else ""
        self.stream.write("\r" + up + "\n".join("\x1b[2K" + x for x in lines))
        for e in events:
            self.drawn[e.table] = e
        # a final line stays; the next bars start on the line after it
        self.live = len(lines) - (final is not None)
        if final is not None and not self.live:
            self.stream.write("\n")

    def message(self, text: str) -> None:
        """A line of its own (a step that is not a table's rows: pre-splitting)."""
        if self.tty and self.live:
            self.stream.write("\n")  # below the bars; they are drawn again under it
            self.live = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Draw the events that were not, and end a terminal's bars."""
        if any(self.drawn.get(t) is not e for t, e in self.loading.items()):
            self._draw()
        if self.tty and self.live:
            self.stream.write("\n")
            self.stream.flush()
        self.live = 0


class _Silent:
    def __call__(self, p: Progress) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def make_progress(
    quiet: bool, stream: Optional[TextIO] = None, dry_run: bool = False
) -> ProgressPrinter | _Silent:
    """A bar on a terminal stderr, periodic lines when stderr is not a terminal, or nothing."""
    if quiet:
        return _Silent()
    stream = stream or sys.stderr
    return ProgressPrinter(stream, tty=stream.isatty(), dry_run=dry_run)
