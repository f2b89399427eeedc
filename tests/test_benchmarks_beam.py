"""benchmarks/beam.py still runs end to end at a tiny size (the Beam path against the emulator
and the null server), and says why when apache-beam is missing. No timing is asserted; the
benchmark itself checks that every load wrote exactly the rows of its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.beam import beam_missing, main


def test_without_beam_it_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    if beam_missing() is None:
        pytest.skip("apache-beam is installed here")
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("skipped: apache_beam is not importable")
    assert ".venv-beam" in out


@pytest.mark.slow
def test_runs_at_a_tiny_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("apache_beam", reason="the [beam] extra (scripts/beam_check.sh)")
    # the benchmark starts its own emulator; an outer one (conftest) must not be picked up
    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    args = ["--repeat", "1", "--emulator-rows", "800", "--null-rows", "1500"]
    args += ["--data-dir", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    for target in ("emulator", "null"):
        assert f"{target:10s} Beam (DirectRunner) / single process:" in out
