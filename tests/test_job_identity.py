"""A job is its database, table, mode and source patterns, whatever way a path is spelled: a
re-run that names the same files as ``x.csv``, ``./x.csv``, ``file://x.csv`` or by their
absolute path finds the checkpoint of the first (an insert-mode re-run would otherwise fail on
every key it wrote). Checkpoints written under the id of the patterns as typed (loaders before
this one) are still found."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, ROOT
from test_load_e2e import TABLES, shop_config

from loader import load
from loader.config import TableJob
from loader.errors import ExitCode
from loader.resume.checkpoint import _job_digest, job_id
from loader.source import canonical_pattern


@pytest.mark.parametrize(
    "spelling",
    ["x.csv", "./x.csv", "d/../x.csv", ".//x.csv", "file://x.csv", "file://./x.csv", "{cwd}/x.csv"],
)
def test_spellings_of_one_local_file_are_one_pattern(
    spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert canonical_pattern(spelling.format(cwd=tmp_path)) == str(tmp_path / "x.csv")


def test_what_is_kept_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert canonical_pattern("-") == "-"
    assert canonical_pattern("gs://b/./x.csv") == "gs://b/./x.csv"  # an object may be named so
    assert canonical_pattern("data/") == str(tmp_path / "data") + "/"  # the folder's files
    assert canonical_pattern("./data/*.csv") == str(tmp_path / "data" / "*.csv")
    assert canonical_pattern("/") == "/"


def _jobs(spell: str) -> tuple[TableJob, ...]:
    return tuple(TableJob(t, (spell.format(t=t),)) for t in TABLES)


def test_a_re_run_with_another_spelling_is_the_same_job(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    rel = os.path.relpath(EXAMPLES, ROOT)
    db = make_database()
    state = tmp_path / "state.json"
    first = load(
        shop_config(db, jobs=_jobs(rel + "/{t}.csv"), mode="insert", state_file=str(state)),
        database=db,
    )
    assert first.exit_code == ExitCode.OK
    for spell in (
        "./" + rel + "/{t}.csv",
        str(EXAMPLES) + "/{t}.csv",
        "file://" + rel + "/{t}.csv",
    ):
        again = load(
            shop_config(db, jobs=_jobs(spell), mode="insert", state_file=str(state)), database=db
        )
        assert again.exit_code == ExitCode.OK, again.error
        assert sum(t.rows_written for t in again.tables) == 0
        assert all(any(f"{t}: already loaded" in n for n in again.notes) for t in TABLES)
        assert again.run_ids == first.run_ids


def test_a_checkpoint_under_the_typed_patterns_id_is_still_found(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a loader before canonical patterns left it: the rows keyed by the digest of the
    patterns as typed. The same command finds them (no reload, no duplicate keys)."""
    monkeypatch.chdir(ROOT)
    rel = os.path.relpath(EXAMPLES, ROOT) + "/{t}.csv"
    db = make_database()
    state = tmp_path / "state.json"
    cfg = shop_config(db, jobs=_jobs(rel), mode="insert", state_file=str(state))
    assert load(cfg, database=db).exit_code == ExitCode.OK
    typed = {j.table: _job_digest(cfg, j, j.table, list(j.sources)) for j in cfg.jobs}
    assert all(typed[j.table] != job_id(cfg, j, j.table) for j in cfg.jobs)
    rows = json.loads(state.read_text())
    moved = {}
    for key, value in rows.items():
        run, table, part = key.split("\x1f")
        moved["\x1f".join([typed.get(table, run), table, part])] = value
    state.write_text(json.dumps(moved))

    again = load(cfg, database=db)
    assert again.exit_code == ExitCode.OK, again.error
    assert sum(t.rows_written for t in again.tables) == 0
    assert again.run_ids == typed


def test_the_report_takes_each_run_id_from_its_load(
    make_database: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Beam tryout: Spanner went down mid-load, and the report's run ids were asked of the
    state store again after the failure; that read failed too and hid the CommitError (exit
    1, "unexpected", no report). Each table's run id is found once, when its load opens it."""
    import loader.pipeline as pipeline

    monkeypatch.chdir(ROOT)
    rel = os.path.relpath(EXAMPLES, ROOT) + "/{t}.csv"
    db = make_database()
    found: list[str] = []
    real = pipeline.job_id

    def counted(*args: Any, **kwargs: Any) -> str:
        found.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "job_id", counted)
    cfg = shop_config(db, jobs=_jobs(rel), mode="insert", state_file=str(tmp_path / "s.json"))
    report = load(cfg, database=db)
    assert report.exit_code == ExitCode.OK, report.error
    assert sorted(found) == sorted(TABLES)
    assert report.run_ids == {t: real(cfg, j, t) for t, j in zip(TABLES, cfg.jobs)}
