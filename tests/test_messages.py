"""Messages speak the words of whoever reads them (#17): the core names options as a library
user sets them (`max_bad_rows`, `restart=True`), the CLI rewrites those into the flags of the
command that ran (loader/cli/flags.py)."""

from __future__ import annotations

import pytest

from loader.cli import cli
from loader.cli.flags import speak_flags
from loader.errors import option

load_command = cli.commands["load"]


# -- the translation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "library, flags",
    [
        ("more than `max_bad_rows` (10)", "more than --max-bad-rows (10)"),
        ("re-run with `restart=True`", "re-run with --restart"),
        ("again with `mode='upsert'` (rows", "again with --mode upsert (rows"),
        ("drop `state=False`", "drop --no-state"),
        ("`header=False`, `header=True`", "--no-header, --header"),
        ("`adaptive=False`", "--fixed-concurrency"),
        ("lower `concurrency` or `concurrency=4`", "lower --concurrency or --concurrency 4"),
        ("exclude it with `ignore`", "exclude it with --ignore"),
        ("`max_commit_delay_ms` must be", "--max-commit-delay must be"),
        ("`batch_rows=None`", "no --max-batch-rows"),
        ("`max_retry_time=600.0`", "--max-retry-time 600"),
        ("`timezone='Europe/Berlin'`", "--timezone Europe/Berlin"),
        ("`timestamp_format='%d %m'`", "--timestamp-format '%d %m'"),
        ("`null_markers=('', 'NULL')`", "--null-marker '' --null-marker NULL"),
        ("`skip_rows=50`", "--skip-rows 50"),
        ("check `project`/`instance`/`database`", "check --project/--instance/--database"),
    ],
)
def test_marked_options_become_the_flags_of_load(library: str, flags: str) -> None:
    assert speak_flags(library, load_command) == flags


@pytest.mark.parametrize(
    "text",
    [
        "give jobs: at least one TableJob",
        "run `spanner-loader emulator start` first",
        "run `gcloud auth application-default login`",
        "`jobs` and `sources` are not flags",
        "a bare `state` cannot say which way",  # --no-state would say the opposite
        "`restart='soon'` is no value of a flag",
        "`max_bad_rows=oops` is no Python value",
        "an unclosed `max_bad_rows",
    ],
)
def test_what_no_flag_of_load_says_stays_as_it_is(text: str) -> None:
    assert speak_flags(text, load_command) == text


def test_each_command_speaks_only_its_own_flags() -> None:
    verify, bench = cli.commands["verify"], cli.commands["bench"]
    text = "`max_bad_rows` and `restart=True` and `priority='low'`"
    assert speak_flags(text, verify) == "--max-bad-rows and `restart=True` and `priority='low'`"
    assert speak_flags(text, bench) == "`max_bad_rows` and `restart=True` and --priority low"
    start = cli.commands["emulator"].commands["start"]  # type: ignore[attr-defined]
    assert speak_flags("or choose another `port`", start) == "or choose another --port"
    assert speak_flags("`max_bad_rows`", None) == "`max_bad_rows`"


def test_option_writes_what_the_cli_reads() -> None:
    assert option("restart", True) == "`restart=True`"
    assert option("mode", "upsert") == "`mode='upsert'`"
    assert option("max_bad_rows") == "`max_bad_rows`"
    assert speak_flags(option("mode", "insert"), load_command) == "--mode insert"
