"""The benchmark suite (benchmarks/run.py) still runs end to end, at a tiny size.

No timing is asserted: the point is that every section (emulator, null server, batching,
scaling subprocesses) keeps working as the loader changes. The suite's own asserts check that
every variant wrote exactly the rows of its file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.null_spanner import NullSpanner
from benchmarks.run import main


@pytest.mark.slow
def test_suite_runs_at_a_tiny_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the suite starts its own emulator; an outer one (conftest) must not be picked up instead
    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    out = tmp_path / "results.json"
    rc = main(
        [
            "--rows", "3000",
            "--e2e-rows", "1500",
            "--scaling-sizes", "1000,3000",
            "--client-sample", "500",
            "--single-row-cap", "50",
            "--naive-null-cap", "2000",
            "--repeat", "1",
            "--data-dir", str(tmp_path / "data"),
            "--json", str(out),
        ]
    )  # fmt: skip
    assert rc == 0
    results = json.loads(out.read_text())
    sections = {f["section"] for f in results["figures"]}
    assert sections == {"pipeline", "emulator", "null", "batching", "scaling", "wide", "startup"}
    names = {r["name"] for r in results["ratios"]}
    assert "ours (1 core) / raw parse (1 core)" in names
    assert "batching: mean splits per commit, ours" in names
    assert any(n.startswith("wide: ours (") and "/ raw parse (" in n for n in names)
    # issue #18 scope 5, for both reference tables: the all-cores ratio over the 1-core one
    assert any(n.startswith("the ") and n.endswith("-core ratio / the 1-core ratio") for n in names)
    assert any(n.startswith("wide: the ") and n.endswith("/ the 1-core ratio") for n in names)
    assert results["info"]["wide_ratio_1_core"] > 0
    for f in results["figures"]:
        assert f["rows"] > 0
    assert results["info"]["startup"]["ours commit"] > 0
    batching = results["info"]["batching"]
    # sorted batches never touch more splits than unsorted ones
    assert batching["our_mean_splits"] <= batching["naive_mean_splits"]


def test_null_server_counts_rows_of_a_client_commit() -> None:
    import os

    from google.cloud import spanner

    with NullSpanner() as server:
        saved = os.environ.get("SPANNER_EMULATOR_HOST")
        os.environ["SPANNER_EMULATOR_HOST"] = server.address
        try:
            db = spanner.Client(project="p").instance("i").database("d")
            with db.batch() as batch:
                batch.insert_or_update("T", ["a", "b"], [[1, "x"], [2, "y"], [3, None]])
        finally:
            if saved is None:
                os.environ.pop("SPANNER_EMULATOR_HOST", None)
            else:
                os.environ["SPANNER_EMULATOR_HOST"] = saved
        counts = server.counts()
    assert (counts.commits, counts.rows, counts.mutations) == (1, 3, 1)


def test_micro_benchmarks_run_at_a_tiny_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import micro
    from loader import native

    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    args = ["--rows", "3000", "--repeat", "1", "--data-dir", str(tmp_path), "--cpu-time"]
    assert micro.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[[i for i, line in enumerate(lines) if line.startswith("step")][0] + 1 :]
    steps = [line.split("  ")[0] for line in table]
    compiled = [
        "encode rows (8 columns)",
        "TIMESTAMP fast path",
        "NUMERIC text -> decimal",
        "INT64 text -> int64",
        "DATE text -> date32",
        "sort keys (2 INT64 columns)",
        "sort keys (INT64) as bytes",
        "sort keys (STR, INT64 DESC)",
    ]
    compiled = compiled if native.built() else []
    # the last flush's take at one thread and at all (only with the compiled parts and cores)
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threaded = ["take encoded rows, wall"] if native.available() and (cpus or 1) > 1 else []
    assert steps == [
        "INT64 cells (1 column)",
        "TIMESTAMP gate + format",
        "take encoded rows",
        *compiled,
        *threaded,
        "write 100 MiB (Arrow pool)",
    ]


@pytest.mark.slow
def test_cores_benchmark_runs_at_a_tiny_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/cores.py on this checkout alone: one line per table, both core counts."""
    from benchmarks import cores

    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    root = Path(__file__).resolve().parent.parent
    args = ["--rows", "2000", "--rounds", "1", "--repeat", "1", "--data-dir", str(tmp_path)]
    assert cores.main([*args, str(root)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "1 core:" in line]
    assert [line.split()[0] for line in lines] == ["Orders", "Accounts"]
    assert all("1 core: load" in line and "all cores: load" in line for line in lines)


def test_spill_benchmark_runs_at_a_tiny_size(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.spill import main as spill_main

    assert spill_main(["--rows", "3000", "--runs", "3", "--repeat", "1"]) == 0
    assert "3 runs written + merged" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(
    not {0, 1} <= os.sched_getaffinity(0), reason="benchmarks.ceiling pins to CPUs 0 and 1"
)
def test_ceiling_benchmark_runs_at_a_tiny_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/ceiling.py: per table, the load, the raw parse and the claim's baseline,
    then the ceiling."""
    from benchmarks import ceiling

    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    args = ["--rows", "4000", "--rounds", "1", "--repeat", "1", "--data-dir", str(tmp_path)]
    assert ceiling.main(args) == 0
    out = capsys.readouterr().out
    for table in ("Orders", "Accounts"):
        lines = [line for line in out.splitlines() if line.startswith(table)]
        assert [line.split()[1] for line in lines] == ["dry-run", "raw", "the", "ceiling"]


def test_timeline_runs_at_a_tiny_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/timeline.py: every stage shows, with its thread and kernel CPU."""
    from benchmarks import timeline
    from loader import buffer, table_load

    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    # it wraps these in place: recorded here, they are put back after the test
    for owner, name in (
        (table_load, "read_deferred_blocks"),
        (table_load, "_finish_and_convert"),
        (table_load, "encode_stage"),
        (table_load.TableLoad, "flush"),
        (buffer.Buffer, "take"),
        (buffer.Flush, "commits"),
    ):
        monkeypatch.setattr(owner, name, getattr(owner, name))
    args = ["--rows", "3000", "--loads", "1", "--data-dir", str(tmp_path)]
    assert timeline.main(args) == 0
    out = capsys.readouterr().out
    stages = {line.split()[1] for line in out.splitlines() if line.startswith("loader-")}
    assert stages == {"parse", "convert", "encode"}
    assert "thread CPU s per stage (of it sys): parse" in out and "cores busy" in out


def test_refused_benchmark_runs_at_a_tiny_size(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.refused import main as refused

    refused(["--rows", "200", "--repeat", "1"])
    out = capsys.readouterr().out
    assert (
        out.count(" runs, ") == 4 and "every other key there    skip   200 rows, 100 runs, " in out
    )


def test_orphans_benchmark_runs_at_a_tiny_size(
    spanner_emulator: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.orphans import ROOT
    from benchmarks.orphans import main as orphans

    orphans(["--parents", "40", "--children", "300", "--every", "4", "--rounds", "1", str(ROOT)])
    out = capsys.readouterr().out.splitlines()
    orphaned = int(out[0].split(": ")[1].split()[0])
    written, rejected, commits = (int(x.replace(",", "")) for x in out[2].split()[2:5])
    assert (written + rejected, rejected) == (300, orphaned) and 0 < orphaned < 300
    assert commits == 1  # one batch: refused once, read, committed in one piece
