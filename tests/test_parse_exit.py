"""A process that used the CSV reader exits with its own code, never an abort (exit 134).

Arrow's threads take the GIL to read from the Python stream, to call the invalid-row handler
and to free what they were given (each chunk read, the stream); one doing so while the
interpreter finalises aborts the process ("terminate called without an active exception").
:func:`loader.parse.release_readers` (at exit, and the CLI before it leaves) must leave none
about to. The race is rare on its own; ``slow_gil.c``, preloaded, delays every GIL acquisition
by Arrow's threads so that a missed one aborts the process in almost every run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

TESTS = Path(__file__).resolve().parent
ROW = b"1,abcdefgh,1.5,2024-01-01T00:00:00Z,true\n"
HEADER = b"Id,Name,Amount,At,Ok\n"

PRELUDE = f"""
import io, sys, time
sys.path.insert(0, {str(TESTS.parent)!r})
sys.path.insert(0, {str(TESTS)!r})
from test_parse import ORDERS
from loader.parse import Dialect, read_blocks

class Slow:
    '''A source whose every read takes a while: a read is in progress when the process ends.'''
    def __init__(self, f):
        self.f = f
    def read(self, n=-1):
        time.sleep(0.02)
        return self.f.read(n)
"""

SCENARIOS = {
    # a block iterator left open after two blocks (Arrow's thread waits in the gate)
    "left-open": "it = read_blocks(open(SRC, 'rb'), 'src', ORDERS, Dialect(), block_size=8192)\n"
    "next(it); next(it)\nkept = it",
    # read to the end: Arrow's threads free the last chunks after the consumer saw the end
    "read-to-end": "n = sum(1 for _ in read_blocks(open(SRC, 'rb'), 'src', ORDERS, Dialect(), "
    "block_size=8192))",
    # rows with the wrong field count: Arrow's threads call the invalid-row handler
    "bad-rows": "it = read_blocks(open(BAD, 'rb'), 'src', ORDERS, Dialect(), block_size=4096)\n"
    "next(it)\nkept = it",
    # a slow source: a read is in progress on Arrow's thread at exit
    "slow-source": "it = read_blocks(Slow(open(SRC, 'rb')), 'src', ORDERS, Dialect(), "
    "block_size=8192)\nnext(it)\nkept = it",
    # an error raised by the consumer mid-read, never caught: exit 1 with its traceback
    "error-mid-read": "it = read_blocks(open(SRC, 'rb'), 'src', ORDERS, Dialect(), "
    "block_size=8192)\nnext(it)\nraise ValueError('boom')",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exit")
    src = root / "big.csv"
    src.write_bytes(HEADER + ROW * 50_000)
    bad = root / "bad.csv"
    bad.write_bytes(HEADER + (ROW + b"2,short\n") * 5_000)
    return {"SRC": src, "BAD": bad}


@pytest.fixture(scope="module")
def slow_gil(tmp_path_factory: pytest.TempPathFactory) -> Optional[Path]:
    """slow_gil.c built as a shared library, or None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not sys.platform.startswith("linux"):
        return None
    out = tmp_path_factory.mktemp("shim") / "slow_gil.so"
    built = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(TESTS / "slow_gil.c"), "-ldl"],
        capture_output=True,
    )
    return out if built.returncode == 0 else None


def _run(script: str, files: dict[str, Path], preload: Optional[Path] = None) -> Any:
    env = dict(os.environ)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    head = "".join(f"{k} = {str(v)!r}\n" for k, v in files.items())
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + head + script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _expected(scenario: str) -> int:
    return 1 if scenario == "error-mid-read" else 0


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_process_that_read_csv_exits_with_its_own_code(
    scenario: str, files: dict[str, Path]
) -> None:
    for _ in range(3):
        p = _run(SCENARIOS[scenario], files)
        assert p.returncode == _expected(scenario), p.stderr[-2000:]
        assert "terminate called" not in p.stderr and "Fatal Python" not in p.stderr


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_arrow_thread_is_left_to_take_the_gil_at_exit(
    scenario: str, files: dict[str, Path], slow_gil: Optional[Path]
) -> None:
    """With Arrow's GIL acquisitions delayed, any left pending at exit would abort the
    process (before the fix: 8 runs in 10 of "left-open")."""
    if slow_gil is None:
        pytest.skip("no C compiler to build slow_gil.c")
    for _ in range(3):
        p = _run(SCENARIOS[scenario], files, preload=slow_gil)
        assert p.returncode == _expected(scenario), p.stderr[-2000:]
        assert "terminate called" not in p.stderr and "Fatal Python" not in p.stderr


def test_the_cli_leaves_with_its_code_with_gil_delayed(
    files: dict[str, Path], slow_gil: Optional[Path]
) -> None:
    """cli/app.py's _leave releases the readers and waits for Arrow's threads before
    ``os._exit``: an open reader neither aborts the process nor changes the code."""
    script = (
        "from loader.cli.app import _leave\n"
        "it = read_blocks(open(SRC, 'rb'), 'src', ORDERS, Dialect(), block_size=8192)\n"
        "next(it)\n_leave(3)"
    )
    for preload in (None, slow_gil):
        p = _run(script, files, preload=preload)
        assert p.returncode == 3, p.stderr[-2000:]


# The paths a user takes out of a read, through the CLI (spanner_emulator: the session's).

CUSTOMER = b"%d,name %d,a@b.c,1.5,true,2024-01-01T00:00:00Z\n"
CUSTOMERS_HEADER = b"CustomerId,Name,Email,Balance,Active,CreatedAt\n"


def _cli(
    args: list[str],
    preload: Optional[Path],
    cwd: Path,
    stdin: Any = None,
    database: str = "exitdb",
) -> Any:
    """The CLI in a process of its own, in ``cwd`` (where its default reject file goes)."""
    from conftest import ROOT, SHOP_DDL

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if preload is not None:
        # 2 ms: Arrow's thread takes the GIL for every bad row (the invalid-row handler)
        env.update(LD_PRELOAD=str(preload), SLOWGIL_US="2000")
    return subprocess.Popen(
        [sys.executable, "-m", "loader", *args, "--emulator", "--database", database]
        + ["--ddl", str(SHOP_DDL), "--block-size", "16KiB"],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )


def _no_abort(code: int, err: bytes, expected: int) -> None:
    text = err.decode("utf-8", "replace")
    assert code == expected, text[-2000:]
    assert "terminate called" not in text and "Fatal Python" not in text
    assert "Traceback" not in text, text[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("last", "code"),
    [
        (b'9,"open', 3),  # the last record's quote never closed: a reject
        (b'9,"open\n1,2', 2),  # and the line after it swallowed: the source is refused
    ],
)
def test_validate_of_a_file_with_an_open_quote_exits_cleanly(
    spanner_emulator: str, tmp_path: Path, slow_gil: Optional[Path], last: bytes, code: int
) -> None:
    src = tmp_path / "c.csv"
    src.write_bytes(CUSTOMERS_HEADER + b"".join(CUSTOMER % (i, i) for i in range(5_000)) + last)
    for preload in (None, slow_gil):
        p = _cli(["validate", str(src), "--table", "Customers"], preload, tmp_path)
        _, err = p.communicate(timeout=300)
        _no_abort(p.returncode, err, code)


@pytest.mark.slow
def test_a_load_stopped_by_its_reject_limit_mid_read_exits_4(
    spanner_emulator: str, tmp_path: Path, slow_gil: Optional[Path]
) -> None:
    src = tmp_path / "c.csv"
    rows = b"".join((b"x,bad\n" if i % 50 == 7 else CUSTOMER % (i, i)) for i in range(20_000))
    src.write_bytes(CUSTOMERS_HEADER + rows)
    for preload in (None, slow_gil):
        p = _cli(
            ["load", str(src), "--table", "Customers", "--max-bad-rows", "5"], preload, tmp_path
        )
        _, err = p.communicate(timeout=300)
        _no_abort(p.returncode, err, 4)


@pytest.mark.slow
def test_sigint_while_the_reader_waits_on_stdin_exits_5(
    spanner_emulator: str, slow_gil: Optional[Path], tmp_path: Path
) -> None:
    """The producer is still there but silent: Arrow's thread is inside a read of stdin."""
    import signal
    import time

    for preload in (None, slow_gil):
        p = _cli(["load", "-", "--table", "Customers"], preload, tmp_path, stdin=subprocess.PIPE)
        assert p.stdin is not None
        p.stdin.write(CUSTOMERS_HEADER + b"".join(CUSTOMER % (i, i) for i in range(3_000)))
        p.stdin.flush()
        time.sleep(3)
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=60)
        finally:
            p.kill()
        _no_abort(p.returncode, err, 5)


@pytest.mark.slow
def test_stdin_ending_mid_record_when_its_producer_dies_exits_with_its_code(
    spanner_emulator: str, slow_gil: Optional[Path], tmp_path: Path
) -> None:
    for preload in (None, slow_gil):
        p = _cli(
            ["validate", "-", "--table", "Customers"], preload, tmp_path, stdin=subprocess.PIPE
        )
        rows = b"".join(CUSTOMER % (i, i) for i in range(3_000))
        # written, then the pipe closed: the producer is gone
        _, err = p.communicate(CUSTOMERS_HEADER + rows + b'1,"cut off', timeout=300)
        _no_abort(p.returncode, err, 3)
