"""The Beam path (``--runner``) tried as a new user would: inputs and flags nobody tuned for.

A run of a job skips each batch whose marker is there, so a job whose sources or options
changed since its first run must be refused (as a single-process checkpoint refuses it), not
load with the old markers: batch ``n`` of key range ``r`` would then hold other rows, skipped
as done. The pipeline tests need apache-beam (``scripts/beam_check.sh``); without it they skip.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import read_table, small_load_config

from loader import load
from loader.errors import ConfigError, ExitCode, StateError

HAVE_BEAM = importlib.util.find_spec("apache_beam") is not None
needs_beam = pytest.mark.skipif(
    not HAVE_BEAM, reason="apache-beam is not installed (pip install -e '.[beam]')"
)

DDL = """
CREATE TABLE Notes (
  Id INT64 NOT NULL,
  Body STRING(MAX),
) PRIMARY KEY (Id)
"""


def _write(path: Path, ids: range) -> None:
    path.write_text("Id,Body\n" + "".join(f'{i},"note\n{i}"\n' for i in ids), newline="")


def _ids(db: Any) -> list[int]:
    return [r[0] for r in read_table(db, "Notes", ["Id"])]


@needs_beam
def test_a_new_file_under_the_glob_is_refused_not_skipped(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    _write(tmp_path / "a.csv", range(0, 100, 2))
    glob = str(tmp_path / "*.csv")
    config = small_load_config(db, "Notes", [glob], runner="DirectRunner")
    assert load(config).tables[0].rows_written == 50
    _write(tmp_path / "b.csv", range(1, 100, 2))  # its rows fall into the same batches
    with pytest.raises(StateError) as e:
        load(config)
    assert "b.csv is new since an earlier run" in str(e.value) and "restart=True" in (
        e.value.hint or ""
    )
    assert e.value.exit_code == ExitCode.USAGE
    assert _ids(db) == list(range(0, 100, 2))  # nothing written by the refused run
    t = load(small_load_config(db, "Notes", [glob], runner="DirectRunner", restart=True))
    assert t.tables[0].rows_written == 100 and _ids(db) == list(range(100))


@needs_beam
def test_a_changed_file_is_refused_and_the_same_one_resumes(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(50))
    config = small_load_config(db, "Notes", [src], runner="DirectRunner")
    assert load(config).tables[0].rows_written == 50
    again = load(config).tables[0]  # unchanged: every batch is skipped, as before
    assert (again.rows_written, again.rows_skipped) == (0, 50)
    _write(src, range(50, 120))
    with pytest.raises(StateError, match=r"a\.csv changed \(size .* since an earlier run"):
        load(config)
    assert _ids(db) == list(range(50))


@needs_beam
def test_changed_conversions_or_batch_budgets_are_refused(
    tmp_path: Path, make_database: Callable[..., Any]
) -> None:
    from loader.parse import Dialect

    db = make_database([DDL])
    src = tmp_path / "a.csv"
    _write(src, range(60))
    config = small_load_config(db, "Notes", [src], runner="DirectRunner")
    load(config)
    other = small_load_config(
        db, "Notes", [src], runner="DirectRunner", dialect=Dialect(null_markers=("x",))
    )
    with pytest.raises(StateError, match="options that change what is written"):
        load(other)
    smaller = small_load_config(db, "Notes", [src], runner="DirectRunner", batch_rows=7)
    with pytest.raises(StateError, match="batch options differ") as e:
        load(smaller)
    assert "`batch_rows=50`" in (e.value.hint or "")


def test_incremental_with_a_runner_is_a_config_error(make_database: Callable[..., Any]) -> None:
    db = make_database([DDL])
    with pytest.raises(ConfigError, match="`incremental=True` is not supported with `runner`"):
        small_load_config(db, "Notes", ["x.csv"], runner="DirectRunner", incremental=True)
