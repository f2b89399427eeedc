"""Value and input messages at the command line (#16 defects 16 and 7): each bad input ends
in one ``error:`` line naming what is wrong and one ``hint:`` line, never a traceback."""

from __future__ import annotations

import sys

import pytest

from loader.cli import _run


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """(exit code, stderr) of the command line, in process (no emulator needed)."""
    monkeypatch.setattr(sys, "argv", ["spanner-loader", *args])
    code = _run()
    return code, capsys.readouterr().err


def test_bench_refuses_a_negative_payload_size_as_such(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_cli(
        monkeypatch, capsys, "bench", "--emulator", "--database", "b", "--payload-bytes", "-5"
    )
    lines = err.splitlines()
    assert code == 2
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    assert "--payload-bytes" in lines[0] and "-5 is not in the range x>=0" in lines[0]
    assert "2 GiB" not in err
