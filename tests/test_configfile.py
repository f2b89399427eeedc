"""--config FILE: TOML options under the command line (loader/configfile.py). No emulator needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from loader.configfile import config_option, default_map_from_toml
from loader.errors import ConfigError, ExitCode


@click.command()
@config_option()
@click.argument("sources", nargs=-1)
@click.option("--table", "-t")
@click.option("--max-bad-rows", type=int, default=0)
@click.option("--null-marker", "null_markers", multiple=True)
@click.option("--priority", type=click.Choice(["low", "medium", "high"]))
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--header/--no-header", default=None)
@click.option("--incremental", is_flag=True)
@click.option("--max-retry-time", type=float, default=600.0)
def tiny(**kw: Any) -> None:
    """A stand-in for `load` with one option of each kind."""
    click.echo(json.dumps({k: (str(v) if isinstance(v, Path) else v) for k, v in kw.items()}))


def write(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(tiny, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.output)
    return out


def error(path: Path, command: click.Command = tiny) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        default_map_from_toml(path, command)
    return info.value


JOB = """
sources = ["gs://exports/orders/*.csv"]
table = "Orders"
max-bad-rows = 10
null_marker = ["\\\\N", "NULL"]
priority = "low"
header = false
incremental = true
max_retry_time = 30
"""


def test_file_supplies_every_kind_of_option(tmp_path: Path) -> None:
    cfg = write(tmp_path, JOB)
    out = run("--config", str(cfg))
    assert out == {
        "sources": ["gs://exports/orders/*.csv"],
        "table": "Orders",
        "max_bad_rows": 10,
        "null_markers": ["\\N", "NULL"],
        "priority": "low",
        "report_path": None,
        "header": False,
        "incremental": True,
        "max_retry_time": 30.0,
    }


def test_command_line_overrides_file(tmp_path: Path) -> None:
    cfg = write(tmp_path, JOB)
    out = run(
        "local.csv",
        "--config",
        str(cfg),
        "--max-bad-rows",
        "0",
        "--null-marker",
        "",
        "--priority",
        "high",
        "--header",
    )
    # Every value given on the command line wins; a repeatable option replaces the file's list.
    assert out["sources"] == ["local.csv"]
    assert out["max_bad_rows"] == 0
    assert out["null_markers"] == [""]
    assert out["priority"] == "high"
    assert out["header"] is True
    # What the command line does not mention still comes from the file.
    assert out["table"] == "Orders"
    assert out["incremental"] is True


def test_command_line_option_before_config_still_wins(tmp_path: Path) -> None:
    cfg = write(tmp_path, "table = 'FromFile'\n")
    assert run("-t", "FromCli", "--config", str(cfg))["table"] == "FromCli"


def test_without_config_defaults_apply() -> None:
    out = run()
    assert out["max_bad_rows"] == 0 and out["sources"] == [] and out["null_markers"] == []


def test_single_string_for_a_list_option(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'sources = "gs://b/one.csv"\nnull-marker = "NULL"\n')
    out = run("--config", str(cfg))
    assert out["sources"] == ["gs://b/one.csv"]
    assert out["null_markers"] == ["NULL"]


def test_relative_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    cfg = write(
        tmp_path / "jobs",
        'sources = ["data/a.csv", "gs://b/x.csv", "-"]\nreport = "out/report.json"\n',
    )
    got = default_map_from_toml(cfg, tiny)
    base = (tmp_path / "jobs").resolve()
    assert got["sources"] == (str(base / "data/a.csv"), "gs://b/x.csv", "-")
    assert got["report_path"] == base / "out/report.json"


def test_parameter_name_spelling_is_accepted(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'null_markers = ["x"]\nreport_path = "/tmp/r.json"\n')
    got = default_map_from_toml(cfg, tiny)
    assert got == {"null_markers": ("x",), "report_path": Path("/tmp/r.json")}


def test_unknown_key_names_the_file_the_key_and_the_closest_option(tmp_path: Path) -> None:
    cfg = write(tmp_path, "max-bad-row = 10\n")
    e = error(cfg)
    assert e.message == f"{cfg}: unknown option 'max-bad-row' (did you mean 'max-bad-rows'?)"
    assert e.hint == (
        "keys are the options of `tiny` without the leading -- (see `tiny --help`), "
        "and `sources` for SOURCE"
    )
    assert e.exit_code == ExitCode.USAGE


def test_unknown_key_with_underscores_suggests_the_option(tmp_path: Path) -> None:
    e = error(write(tmp_path, "nul_marker = ['x']\n"))
    assert "(did you mean 'null-marker'?)" in e.message


def test_unknown_key_without_a_close_match(tmp_path: Path) -> None:
    e = error(write(tmp_path, "zzzz = 1\n"))
    assert e.message.endswith("unknown option 'zzzz'")


def test_the_config_option_itself_cannot_be_set_from_the_file(tmp_path: Path) -> None:
    assert "unknown option 'config'" in error(write(tmp_path, "config = 'other.toml'\n")).message


def test_bad_value_uses_the_option_type_message(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'max-bad-rows = "ten"\n')
    assert error(cfg).message == f"{cfg}: max-bad-rows: 'ten' is not a valid integer."
    e = error(write(tmp_path, 'priority = "urgent"\n'))
    assert "priority: 'urgent' is not one of 'low', 'medium', 'high'." in e.message


def test_bool_for_a_non_flag_is_refused(tmp_path: Path) -> None:
    e = error(write(tmp_path, "max-bad-rows = true\n"))
    assert e.message.endswith("max-bad-rows = true is not a valid value")


def test_list_for_a_single_valued_option_is_refused(tmp_path: Path) -> None:
    e = error(write(tmp_path, 'table = ["A", "B"]\n'))
    assert e.message.endswith("table takes one value, not a list")


def test_tables_are_refused(tmp_path: Path) -> None:
    e = error(write(tmp_path, "[load]\ntable = 'A'\n"))
    assert e.message.endswith("unknown option 'load'")
    assert e.hint is not None and "no [sections]" in e.hint
    e = error(write(tmp_path, "[priority]\nlevel = 'low'\n"))
    assert e.message.endswith("priority must be a value, not a table")


def test_the_same_option_twice_is_refused(tmp_path: Path) -> None:
    e = error(write(tmp_path, "max-bad-rows = 1\nmax_bad_rows = 2\n"))
    assert "'max_bad_rows' and 'max-bad-rows' set the same option" in e.message


def test_toml_syntax_error_gives_the_line(tmp_path: Path) -> None:
    cfg = write(tmp_path, 'table = "Orders"\n\npriority = low\n')
    e = error(cfg)
    assert e.message.startswith(f"{cfg}, line 3: not valid TOML: ")
    assert "(at line" not in e.message


def test_missing_file(tmp_path: Path) -> None:
    e = error(tmp_path / "nope.toml")
    assert "does not exist" in e.message


def test_errors_reach_the_cli_as_config_errors(tmp_path: Path) -> None:
    cfg = write(tmp_path, "max-bad-row = 10\n")
    result = CliRunner().invoke(tiny, ["--config", str(cfg)])
    assert isinstance(result.exception, ConfigError)


def test_every_load_option_can_come_from_a_file(tmp_path: Path) -> None:
    """The real `load` command: each option's long name is a valid key."""
    from loader.cli import load

    lines = []
    for p in load.params:
        if p.name in ("config", "help"):
            continue
        if isinstance(p, click.Option):
            long = next(o[2:] for o in p.opts if o.startswith("--"))
            lines.append(f"{long} = {'[]' if p.multiple else _sample(p)}")
        else:
            lines.append(f"{p.name} = []")
    cfg = write(tmp_path, "\n".join(lines) + "\n")
    got = default_map_from_toml(cfg, load)
    assert set(got) == {p.name for p in load.params if p.name not in ("config", "help")}


def _sample(p: click.Parameter) -> str:
    t = p.type
    if isinstance(t, click.types.BoolParamType):
        return "true"
    if isinstance(t, click.Choice):
        return json.dumps(str(t.choices[0]))
    if isinstance(t, (click.types.IntParamType, click.types.FloatParamType)):
        return "1"
    if t.name == "SIZE":
        return '"4MiB"'
    return '"x"'


def test_a_file_shared_by_sibling_commands(tmp_path: Path) -> None:
    """load, validate and verify read one job file; each skips the others' options."""

    @click.group()
    def grp() -> None:
        pass

    @grp.command("load")
    @config_option(shared_with=("load", "check"))
    @click.option("--table")
    @click.option("--mode")
    def load_cmd(**kw: Any) -> None:
        click.echo(json.dumps(kw))

    @grp.command("check")
    @config_option(shared_with=("load", "check"))
    @click.option("--table")
    def check_cmd(**kw: Any) -> None:
        click.echo(json.dumps(kw))

    @grp.command("strict")
    @config_option()
    @click.option("--table")
    def strict_cmd(**kw: Any) -> None:
        click.echo(json.dumps(kw))

    cfg = write(tmp_path, 'table = "Orders"\nmode = "insert"\n')
    runner = CliRunner()
    out = runner.invoke(grp, ["check", "--config", str(cfg)], catch_exceptions=False).output
    assert json.loads(out) == {"table": "Orders"}
    out = runner.invoke(grp, ["load", "--config", str(cfg)], catch_exceptions=False).output
    assert json.loads(out) == {"table": "Orders", "mode": "insert"}
    # Not shared: mode is nobody else's business here.
    result = runner.invoke(grp, ["strict", "--config", str(cfg)])
    assert isinstance(result.exception, ConfigError)
    assert "unknown option 'mode'" in result.exception.message
    # A typo is still a typo when the file is shared.
    typo = write(tmp_path, 'tabel = "Orders"\n', "typo.toml")
    result = runner.invoke(grp, ["check", "--config", str(typo)])
    assert isinstance(result.exception, ConfigError)
    assert "did you mean 'table'?" in result.exception.message


# --------------------------------------------------------------------------------------------
# the nightly-job example (examples/nightly/): its job file and its exit-code wrapper

NIGHTLY = Path(__file__).resolve().parent.parent / "examples" / "nightly"

FAKE_LOADER = """#!/usr/bin/env bash
# Stands in for spanner-loader: records its arguments, writes a report, exits with FAKE_RC.
printf '%s\\n' "$@" > "$FAKE_ARGS"
report=""
while [[ $# -gt 0 ]]; do
    if [[ "$1" == "--report" ]]; then report="$2"; fi
    shift
done
if [[ "$FAKE_RC" != 2 && -n "$report" ]]; then
    printf '{"rows_written": 990, "rows_rejected": 10, "error": %s}\\n' "$FAKE_ERROR" > "$report"
fi
echo "the loader's report table"
exit "$FAKE_RC"
"""


def test_nightly_job_file_is_a_valid_load_config() -> None:
    from loader.cli import load

    got = default_map_from_toml(NIGHTLY / "job.toml", load)
    assert got["sources"] == ("gs://exports/orders/*.csv",)
    assert got["table"] == "Orders" and got["incremental"] is True
    assert got["priority"] == "low" and got["max_rows_per_second"] == 20000
    assert got["null_markers"] == ("", "\\N")
    assert got["report_path"] == NIGHTLY / "reports" / "orders.json"
    assert got["rejects"] == NIGHTLY / "reports" / "orders.rejects.jsonl"


def _nightly(tmp_path: Path, rc: int, *args: str, **env: str) -> tuple[int, str, str, list[str]]:
    import os
    import subprocess
    import sys

    fake = tmp_path / "fake-loader"
    fake.write_text(FAKE_LOADER, encoding="utf-8")
    fake.chmod(0o755)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("NIGHTLY_")}
    run_env = {
        **inherited,
        "SPANNER_LOADER": str(fake),
        "PYTHON": sys.executable,
        "NIGHTLY_REPORT_DIR": str(tmp_path / "reports"),
        "FAKE_ARGS": str(tmp_path / "args"),
        "FAKE_RC": str(rc),
        "FAKE_ERROR": json.dumps("boom" if rc in (1, 4) else None),
        **env,
    }
    p = subprocess.run(
        ["bash", str(NIGHTLY / "nightly.sh"), *args],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return p.returncode, p.stdout, p.stderr, (tmp_path / "args").read_text().splitlines()


def test_nightly_ok(tmp_path: Path) -> None:
    rc, out, err, args = _nightly(tmp_path, 0, "--restart")
    assert rc == 0 and err == ""
    assert "ok: 990 rows written" in out and "the loader's report table" in out
    assert args[:3] == ["load", "--config", str(NIGHTLY / "job.toml")]
    assert args[3] == "--report" and args[5] == "--rejects" and args[-1] == "--restart"
    assert Path(args[4]).parent == tmp_path / "reports" and Path(args[4]).exists()


def test_nightly_rejected_rows_warn_but_succeed(tmp_path: Path) -> None:
    rc, out, err, _ = _nightly(tmp_path, 3)
    assert rc == 0
    assert "WARNING: 990 rows written, 10 rows rejected" in err
    rc, _, _, _ = _nightly(tmp_path, 3, NIGHTLY_STRICT="1")
    assert rc == 3


@pytest.mark.parametrize(
    "loader_rc, expected",
    [
        (4, "FAILED: stopped after more than the allowed bad rows"),
        (1, "FAILED: the load failed (exit 1): boom"),
        (2, "FAILED: configuration or source error"),
        (5, "FAILED: interrupted after 990 rows"),
        (8, "FAILED: rows loaded, but an index or foreign key deferred by the load is not back"),
        (7, "SKIPPED: another run of job holds it"),  # exit 75, as the flock's
    ],
)
def test_nightly_failures_are_loud(tmp_path: Path, loader_rc: int, expected: str) -> None:
    alerts = tmp_path / "alerts"
    rc, _, err, _ = _nightly(tmp_path, loader_rc, NIGHTLY_ALERT_CMD=f"cat >> {alerts}")
    assert rc == (75 if loader_rc == 7 else loader_rc)
    assert expected in err
    assert expected in alerts.read_text()


def test_block_size_follows_the_buffer_unless_given() -> None:
    from loader.config import LoadConfig, TableJob, Target, default_block_size
    from loader.convert import ConvertOptions
    from loader.parse import Dialect

    def cfg(**kw: Any) -> LoadConfig:
        return LoadConfig(
            Target("p", "i", "d"), (TableJob("T", ("a.csv",)),), Dialect(), ConvertOptions(), **kw
        )

    assert default_block_size(80 << 20) == 2 << 20
    assert default_block_size(1 << 20) == 1 << 20
    assert default_block_size(8 << 30) == 16 << 20
    assert cfg(buffer_size=80 << 20).block_size == 2 << 20
    assert cfg(buffer_size=64 << 20, block_size=8 << 20).block_size == 8 << 20
    with pytest.raises(ConfigError, match="`block_size`"):
        cfg(block_size=100)


def test_state_file_uri_is_kept_and_a_local_one_is_relative(tmp_path: Path) -> None:
    from loader.cli import load

    cfg = write(tmp_path, 'state-file = "gs://ops/state/orders.json"\n')
    assert default_map_from_toml(cfg, load)["state_file"] == "gs://ops/state/orders.json"
    cfg = write(tmp_path, 'state-file = "state/orders.json"\n', name="local.toml")
    got = default_map_from_toml(cfg, load)["state_file"]
    assert got == str(tmp_path.resolve() / "state/orders.json")


# -- the [beam] table --------------------------------------------------------------------------

BEAM_JOB = """
sources = ["orders.csv"]
table = "Orders"
database = "shop"
emulator = true

[beam]
runner = "DataflowRunner"
region = "europe-west1"
num_workers = 4
save_main_session = true
use_public_ips = false
experiments = ["a", "b"]
setup_file = "setup.py"
"""


def _load_config_of(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The LoadConfig `load` builds from ``args`` (the load itself is not run)."""
    from loader.cli import load
    from loader.cli import load_validate as lv

    got: list[Any] = []
    real = lv._build_config

    def capture(kw: dict[str, Any], dry_run: bool) -> Any:
        got.append(real(kw, dry_run))
        raise click.exceptions.Exit(0)

    monkeypatch.setattr(lv, "_build_config", capture)
    result = CliRunner().invoke(load, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return got[0]


def test_beam_table_becomes_runner_and_beam_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = write(tmp_path, BEAM_JOB)
    config = _load_config_of(["--config", str(cfg)], monkeypatch)
    assert config.runner == "DataflowRunner"
    assert config.beam_options == (
        ("region", "europe-west1"),
        ("num_workers", "4"),
        ("save_main_session", ""),  # true: a bare flag; false: left out
        ("experiments", "a"),
        ("experiments", "b"),
        ("setup_file", str(tmp_path.resolve() / "setup.py")),  # relative to the file
    )


def test_command_line_beam_options_add_to_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = write(tmp_path, BEAM_JOB)
    args = ["--config", str(cfg), "--runner", "DirectRunner", "--beam-option", "num_workers=9"]
    config = _load_config_of(args, monkeypatch)
    assert config.runner == "DirectRunner"  # the command line wins
    assert config.beam_options[-1] == ("num_workers", "9")  # after the file's: Beam takes it
    assert ("region", "europe-west1") in config.beam_options


def test_beam_table_conflicts_and_shapes(tmp_path: Path) -> None:
    from loader.cli import load
    from loader.cli.load_validate import validate
    from loader.cli.verify import verify

    e = error(write(tmp_path, 'runner = "X"\n[beam]\nrunner = "Y"\n'), load)
    assert "'runner' and '[beam] runner' set the same option" in e.message
    e = error(write(tmp_path, 'beam-option = ["a=1"]\n[beam]\nregion = "r"\n'), load)
    assert "both set Beam options" in e.message
    e = error(write(tmp_path, "[beam]\n[beam.nested]\nx = 1\n"), load)
    assert "[beam] nested must be a value or a list of values" in e.message
    e = error(write(tmp_path, '[beam]\nregion = "r"\n'))  # a command without Beam options
    assert "[beam] is for `load --runner`" in e.message
    # validate and verify share the job file: they skip the table
    shared = write(tmp_path, 'table = "T"\n[beam]\nrunner = "DataflowRunner"\nregion = "r"\n')
    assert default_map_from_toml(shared, validate, shared_with=[load]) == {"table": "T"}
    assert default_map_from_toml(shared, verify, shared_with=[load, validate]) == {"table": "T"}


def test_an_on_off_option_the_file_turns_on_the_command_line_turns_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "a one-off run can change anything without editing the file": --incremental and the
    other flags had no --no- form."""
    cfg = write(
        tmp_path,
        'table = "Orders"\nsources = ["orders.csv"]\ndatabase = "shop"\nemulator = true\n'
        "incremental = true\ndry-run = true\n",
    )
    on = _load_config_of(["--config", str(cfg)], monkeypatch)
    assert on.incremental and on.dry_run and on.target.emulator
    monkeypatch.undo()  # the helper patches the config builder it then calls
    off = _load_config_of(["--config", str(cfg), "--no-incremental", "--no-dry-run"], monkeypatch)
    assert not off.incremental and not off.dry_run and off.target.emulator
    monkeypatch.undo()
    stateless = write(
        tmp_path,
        'table = "Orders"\nsources = ["o.csv"]\nemulator = true\ndatabase = "d"\nno-state = true\n',
    )
    assert not _load_config_of(["--config", str(stateless)], monkeypatch).state
    monkeypatch.undo()
    assert _load_config_of(["--config", str(stateless), "--state"], monkeypatch).state
