"""Messages speak the words of whoever reads them (#17): the core names options as a library
user sets them (`max_bad_rows`, `restart=True`), the CLI rewrites those into the flags of the
command that ran (loader/cli/flags.py)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np
import pytest

from loader import LoadConfig, LoaderError, TableJob, Target
from loader.batch import Budget, plan_batches
from loader.cli import _run, cli
from loader.cli.flags import MARKED, find_option, flag_text, speak_flags
from loader.connection import connect
from loader.convert import ConvertOptions
from loader.errors import option
from loader.parse import dialect_from_preset
from loader.rejects import Reject, RejectBudget, RejectWriter
from loader.resume.checkpoint import LAYOUT_OPTIONS
from loader.resume.stores import GcsStateStore

LOADER = Path(__file__).resolve().parent.parent / "loader"
FLAG = re.compile(r"(?<![\w-])--[a-z]")
"""A command-line flag in a text (not a `--` SQL comment or an em dash in prose)."""

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
        # a tryout: re-runs named `quote_char` and `escape_char` (the flags are shorter)
        ('`quote_char` the default -> "\'"', '--quote the default -> "\'"'),
        ("`escape_char='\\\\'`", "--escape '\\'"),
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


def test_each_command_speaks_its_own_flags_and_names_the_loads() -> None:
    """A flag another command lacks is load's, said so (verify's note named `skip_existing`,
    a tryout: the CLI speaks flags)."""
    verify, bench = cli.commands["verify"], cli.commands["bench"]
    text = "`max_bad_rows` and `restart=True` and `priority='low'`"
    assert speak_flags(text, verify) == "--max-bad-rows and load --restart and load --priority low"
    assert speak_flags(text, bench) == "load --max-bad-rows and load --restart and --priority low"
    start = cli.commands["emulator"].commands["start"]  # type: ignore[attr-defined]
    assert speak_flags("or choose another `port`", start) == "or choose another --port"
    assert speak_flags("`max_bad_rows`", None) == "`max_bad_rows`"


def test_option_writes_what_the_cli_reads() -> None:
    assert option("restart", True) == "`restart=True`"
    assert option("mode", "upsert") == "`mode='upsert'`"
    assert option("max_bad_rows") == "`max_bad_rows`"
    assert speak_flags(option("mode", "insert"), load_command) == "--mode insert"


# -- no marked name can rot ----------------------------------------------------------------------


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def marked_in_core() -> list[tuple[str, str, str | None]]:
    """(where, name, value) of every option a core message names: marked text in a string
    (docstrings aside), every ``option("name", ...)`` call, and the checkpoint layout's."""
    found: list[tuple[str, str, str | None]] = []
    for path in sorted(LOADER.rglob("*.py")):
        rel = path.relative_to(LOADER.parent)
        if rel.parts[1] == "cli" or rel.name == "configfile.py":  # they speak flags
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docs:
                    found += [(where, m.group(1), m.group(2)) for m in MARKED.finditer(node.value)]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "option"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.append((where, str(node.args[0].value), None))
    found += [("loader/resume/checkpoint.py", name, None) for name in LAYOUT_OPTIONS.values()]
    return found


ALSO_FOR = {
    # the core of `bench`, `verify` and `emulator start` may name their options too
    "loader/bench.py": cli.commands["bench"],
    "loader/verify.py": cli.commands["verify"],
    "loader/emulator.py": cli.commands["emulator"].commands["start"],  # type: ignore[attr-defined]
}


def test_every_option_a_core_message_names_is_an_option_of_load() -> None:
    found = marked_in_core()
    assert len(found) > 30, found  # the scan sees the messages
    for where, name, value in found:
        commands = [load_command, ALSO_FOR.get(where.partition(":")[0], load_command)]
        mapped = [c for c in commands if find_option(c, name) is not None]
        assert mapped, f"{where}: `{name}` is no option"
        assert flag_text(mapped[0], name, value) is not None, f"{where}: `{name}={value}`"


def test_every_option_of_load_config_the_cli_sets_has_a_flag() -> None:
    """Names made up at run time (config.py's loop over the throttles) come from here."""
    library_only = {"target", "jobs", "dialect", "convert", "mapping"}
    for name in LoadConfig.__dataclass_fields__:
        if name not in library_only:
            assert find_option(load_command, name) is not None, name
    for name in ("emulator", "ddl", "connect_timeout", "project", "instance", "database"):
        assert find_option(load_command, name) is not None, name


# -- the library speaks no flags ---------------------------------------------------------------


def _config(**kw: Any) -> LoadConfig:
    dialect = dialect_from_preset("csv")
    return LoadConfig(
        target=kw.pop("target", Target("p", "i", "d")),
        jobs=(TableJob("T", ("a.csv",)),),
        dialect=dialect,
        convert=ConvertOptions.from_dialect(dialect),
        **kw,
    )


def _too_many_bad_rows() -> None:
    budget = RejectBudget(RejectWriter(None), 0)
    budget(Reject("a.csv", 2, 1, "Id", "not an INT64: 'x'"), "T")


def _refused_after_a_state_file_resume() -> None:
    """A tryout: an insert-mode resume from a state file met the killed run's last commit,
    which landed without its record, and was told of "an earlier or interrupted run, or
    another writer"."""
    budget = RejectBudget(RejectWriter(None), 0, insert=True)
    budget.lagging.add("T")
    reason = "Spanner refused the row: ALREADY_EXISTS: a row with this key is already in table T"
    try:
        budget(Reject("a.csv", 2, 1, None, reason), "T")
    except LoaderError as e:
        assert "landed without its record" in str(e.hint) and "`skip_existing=True`" in str(e.hint)
        raise


def _connect_with_ddl_only() -> None:
    with connect(Target("p", "i", "d", ddl=(Path("schema.sql"),))):
        pass


CORE_ERRORS: list[Callable[[], Any]] = [
    lambda: _config(max_mutations=0),
    lambda: _config(max_batch_bytes=10),
    lambda: _config(batch_rows=0),
    lambda: _config(concurrency=0),
    lambda: _config(max_retry_time=-1.0),
    lambda: _config(max_commit_delay_ms=900),
    lambda: _config(max_bad_rows=-1),
    lambda: _config(buffer_size=1),
    lambda: _config(block_size=1),
    lambda: _config(max_rows_per_second=0.0),
    lambda: _config(incremental=True, state=False),
    lambda: _config(runner="DirectRunner", dry_run=True),
    lambda: _config(runner="DirectRunner", state=False),
    lambda: _config(nodes=0.0),
    lambda: _config(split_expiry=31.0),
    lambda: Target("p", "i", "d", connect_timeout=0),
    lambda: Budget(max_mutations=0),
    lambda: plan_batches(np.array([1]), 25_000, Budget(), table="T"),
    lambda: plan_batches(np.array([1]), 1, Budget(max_bytes=1024), overhead_bytes=2048),
    _too_many_bad_rows,
    _refused_after_a_state_file_resume,
    lambda: GcsStateStore("gs://bucket-only", storage_client=object()),
    _connect_with_ddl_only,
]


@pytest.mark.parametrize("make", CORE_ERRORS)
def test_library_errors_name_options_not_flags(make: Callable[[], Any]) -> None:
    with pytest.raises(LoaderError) as e:
        make()
    text = f"{e.value}\n{e.value.hint or ''}"
    assert not FLAG.search(text), text
    assert MARKED.search(text), text  # and they do name the option


def test_a_library_message_reads_as_python() -> None:
    with pytest.raises(LoaderError) as e:
        _config(incremental=True, state=False)
    assert str(e.value) == "`incremental=True` needs the state store"
    assert e.value.hint == "drop `state=False`"


# -- the command line speaks flags ---------------------------------------------------------------


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, list[str]]:
    monkeypatch.setattr(sys, "argv", ["spanner-loader", *args])
    code = _run()
    return code, capsys.readouterr().err.splitlines()


LOAD = ("a.csv", "--table", "T", "--emulator", "--database", "d")


@pytest.mark.parametrize(
    "args, error, hint",
    [
        (
            ("load", *LOAD, "--max-mutations", "0"),
            "error: --max-mutations must be between 1 and 80,000",
            "hint: Spanner allows at most 80,000 mutations per commit, indexes included",
        ),
        (
            ("load", *LOAD, "--incremental", "--no-state"),
            "error: --incremental needs the state store",
            "hint: drop --no-state",
        ),
        (
            ("validate", *LOAD, "--max-commit-delay", "900"),
            "error: --max-commit-delay must be between 0 and 500 ms",
            "hint: Spanner lets a commit wait at most 500 ms for others to batch with it",
        ),
        (
            ("verify", *LOAD, "--connect-timeout", "0"),
            "error: --connect-timeout must be above 0 seconds, not 0.0",
            "hint: e.g. --connect-timeout 20",
        ),
        (
            ("bench", "--emulator", "--database", "d", "--connect-timeout", "0"),
            "error: --connect-timeout must be above 0 seconds, not 0.0",
            "hint: e.g. --connect-timeout 20",
        ),
        (
            ("-v", "load", *LOAD, "--max-batch-rows", "0"),
            "error: --max-batch-rows must be at least 1",
            "hint: see `spanner-loader load --help`",
        ),
    ],
)
def test_the_command_line_names_its_flags(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    error: str,
    hint: str,
) -> None:
    monkeypatch.delenv("SPANNER_EMULATOR_HOST", raising=False)
    code, lines = run_cli(monkeypatch, capsys, *args)
    assert code == 2
    assert lines[-2:] == [error, hint]


def test_the_load_report_names_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Notes and the error of the report the CLI prints are translated too (the JSON as well)."""
    from loader.cli import load_validate
    from loader.report import LoadReport

    report = LoadReport(database="d", mode="upsert", dry_run=False, started_at="", load_id="x")
    report.notes = ["T: already loaded; nothing to do (`restart=True` loads it again)"]
    report.error = "more than 0 bad rows; fix the data or raise `max_bad_rows`"
    with click.Context(load_command):
        load_validate._emit_report(report, {"as_json": True})
    out = capsys.readouterr().out
    assert "(--restart loads it again)" in out and "raise --max-bad-rows" in out


def test_bench_speaks_its_own_flags_and_recommends_one_of_load() -> None:
    from loader.bench import parse_steps

    with pytest.raises(LoaderError) as e:
        parse_steps("1,x")
    assert e.value.hint == "e.g. `steps='1,2,4,8,16'`"
    assert speak_flags(e.value.hint, cli.commands["bench"]) == "e.g. --steps 1,2,4,8,16"
    # the report's recommendation is for `load` (cli/bench.py speaks it with load's flags)
    line = f"90% of it from concurrency 4 ({option('concurrency', 4)})"
    assert speak_flags(line, load_command) == "90% of it from concurrency 4 (--concurrency 4)"


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--report", "cannot write the report x.csv/deeper/out.json"),
        ("--rejects", "cannot write the reject file x.csv/deeper/out.json"),
        ("--state-file", "cannot write the state file x.csv/deeper/out.json (nor its lock"),
    ],
)
def test_a_path_under_a_file_says_which_file_is_not_a_folder(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    spanner_emulator: str,
    flag: str,
    message: str,
) -> None:
    """mkdir says "File exists" and open "Not a directory" for a path whose folder is a file;
    the message names that file. A --report path is checked before the load starts (its
    report would be lost at the end)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("a\n1\n")
    (tmp_path / "t.sql").write_text("CREATE TABLE T (a INT64) PRIMARY KEY (a)")
    args = ("load", "x.csv", "--table", "T", "--emulator", "--database", "paths", "--ddl", "t.sql")
    code, lines = run_cli(monkeypatch, capsys, *args, flag, "x.csv/deeper/out.json")
    assert code == 2
    assert lines[-2].startswith("error: " + message), lines
    assert lines[-2].endswith(": x.csv is a file, not a folder"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.sql", "x.csv"]
