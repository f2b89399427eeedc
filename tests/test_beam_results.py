"""Where the Beam path's workers leave rejects and commit counts (loader/beam/results.py): its
default location per runner, local and gs:// folders (GCS emulator), and a DirectRunner load
whose results travel through a gs:// folder."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import HAVE_BEAM, small_load_config
from gcs_server import gcs_emulator

from loader.beam.results import ResultFolder, default_location, launch_folder
from loader.errors import ConfigError
from loader.source import make_storage_client


def test_default_location_per_runner() -> None:
    assert default_location("DirectRunner", (), None) is None  # the launcher's temp dir
    assert default_location("PrismRunner", (("temp_location", "gs://b/t"),), None) is None
    got = default_location("DataflowRunner", (("temp_location", "gs://b/tmp/"),), None)
    assert got == "gs://b/tmp/spanner-loader-results"
    assert default_location("DataflowRunner", (), "gs://c/r") == "gs://c/r"
    assert default_location("DirectRunner", (), "gs://c/r") == "gs://c/r"
    with pytest.raises(ConfigError, match="needs a location") as e:
        default_location("DataflowRunner", (("region", "x"),), None)
    assert "temp_location=gs://" in (e.value.hint or "")


def test_launch_folders_are_distinct() -> None:
    a, b = (launch_folder("gs://b/r/", "run1", "T") for _ in range(2))
    assert a != b and a.startswith("gs://b/r/run1/T-")


@pytest.fixture(scope="module")
def gcs() -> Iterator[tuple[str, Any]]:
    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        yield url, make_storage_client()


def _roundtrip(folder: ResultFolder) -> None:
    folder.write("rejects-a.jsonl", [{"x": 1}, {"x": 2}])
    folder.write("rejects-b.jsonl", [{"x": 3}])
    folder.write("ranges-0.jsonl", [{"m": [1]}])
    folder.write("rejects-a.jsonl", [{"x": 1}, {"x": 2}])  # a re-run bundle: overwritten
    assert list(folder.read("rejects-")) == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert list(folder.read("ranges-")) == [{"m": [1]}]
    folder.delete()
    assert list(folder.read("")) == []


def test_result_folder_local(tmp_path: Path) -> None:
    _roundtrip(ResultFolder(str(tmp_path / "res")))


def test_result_folder_gcs(gcs: tuple[str, Any]) -> None:
    _, client = gcs
    bucket = client.create_bucket(f"r-{uuid.uuid4().hex[:12]}")
    other = bucket.blob("res-other/keep.jsonl")
    other.upload_from_string(b"{}\n")  # a sibling with the same name prefix survives delete
    _roundtrip(ResultFolder(f"gs://{bucket.name}/res", client))
    assert [b.name for b in client.list_blobs(bucket.name)] == ["res-other/keep.jsonl"]


@pytest.mark.skipif(not HAVE_BEAM, reason="apache-beam is not installed (scripts/beam_check.sh)")
def test_direct_runner_results_through_gcs(
    tmp_path: Path,
    make_database: Callable[..., Any],
    gcs: tuple[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_beam import DDL, _rows, _write_files

    from loader import load
    from loader.beam import results

    url, client = gcs
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    bucket = client.create_bucket(f"r-{uuid.uuid4().hex[:12]}")
    written: list[tuple[str, str]] = []
    real_write = results.ResultFolder.write

    def spy(self: ResultFolder, name: str, records: Any) -> None:
        written.append((self.folder, name))
        real_write(self, name, records)

    monkeypatch.setattr(results.ResultFolder, "write", spy)  # the DirectRunner is in-process
    db = make_database([DDL])
    expected = _write_files(tmp_path, n_files=2, rows=30)
    (tmp_path / "notes-bad.csv").write_text("Id,Tag,Body\n1000,x,y\nnope,x,y\n", newline="")
    expected[1000] = ("x", "y")
    config = small_load_config(
        db,
        "Notes",
        sorted(tmp_path.glob("*.csv")),
        runner="DirectRunner",
        range_size=300,
        key_ranges=3,
        max_bad_rows=5,
        rejects=tmp_path / "rejects.jsonl",
        beam_results=f"gs://{bucket.name}/results",
    )
    report = load(config)
    assert _rows(db) == expected
    t = report.tables[0]
    assert (t.rows_written, t.rows_rejected) == (61, 1)
    assert t.mutations and sum(t.mutations) > 0  # per-commit counts came back through GCS
    assert '"line": 3' in (tmp_path / "rejects.jsonl").read_text()
    folders = {f for f, _ in written}
    assert len(folders) == 1 and next(iter(folders)).startswith(f"gs://{bucket.name}/results/")
    names = [n for _, n in written]
    assert sum(n.startswith("ranges-") for n in names) == 3
    assert sum(n.startswith("rejects-read-") for n in names) == 1
    assert list(client.list_blobs(bucket.name)) == []  # the launch folder is removed after


@pytest.mark.skipif(not HAVE_BEAM, reason="apache-beam is not installed (scripts/beam_check.sh)")
def test_cli_dataflow_without_a_temp_location_is_a_one_line_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    src = tmp_path / "n.csv"
    src.write_text("Id\n1\n")
    args = [str(src), "--table", "Notes", "--emulator", "--database", "nodb"]
    args += ["--runner", "DataflowRunner", "--beam-option", "region=europe-west1"]
    p = subprocess.run(
        [sys.executable, "-m", "loader", "load", *args], capture_output=True, text=True
    )
    assert p.returncode == 2, p.stderr
    # (importing apache_beam may log a warning of its own first)
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: --runner DataflowRunner needs a")
    assert "temp_location=gs://" in p.stderr and "Traceback" not in p.stderr
