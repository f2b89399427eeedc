"""Progress output: a redrawn bar on a terminal, plain periodic lines otherwise, none with -q."""

from __future__ import annotations

import io

from loader.pipeline import Progress
from loader.progress import ProgressPrinter, make_progress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def event(rows: int) -> Progress:
    return Progress("Orders", rows * 100, 100_000, rows, rows, 0, 0, rows // 10)


def test_not_a_terminal_gets_periodic_lines_without_a_bar_redraw() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=False, interval=10, clock=clock)
    for i in range(100):
        clock.t = i * 0.5
        p(event(i * 10))
    p.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert 4 <= len(lines) <= 7 and all(x.startswith("progress: Orders [") for x in lines)
    assert "ETA" in lines[-1] and "rows/s" in lines[-1]


def test_terminal_gets_a_redrawn_bar() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressPrinter(out, tty=True, clock=clock)
    for i in range(10):
        clock.t = i
        p(event(i * 100))
    p.close()
    assert out.getvalue().count("\r\x1b[2K") >= 10 and out.getvalue().endswith("\n")


def test_quiet_prints_nothing_and_pipes_are_not_terminals() -> None:
    out = io.StringIO()
    q = make_progress(quiet=True, stream=out)
    q(event(5))
    q.close()
    assert out.getvalue() == ""
    p = make_progress(quiet=False, stream=out)
    assert isinstance(p, ProgressPrinter) and p.tty is False
