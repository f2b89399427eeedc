"""Found by a new user's tryout of the CLI and left by its first round of fixes: each test is
one thing that broke, run through the real command (or the library) against the emulator."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from conftest import INSTANCE, ROOT, read_table, small_load_config
from test_cli import assert_clean_error, run

from loader.errors import ExitCode

PG_DDL = [
    "create table singers (singer_id bigint primary key, first_name varchar(20))",
    'create table "MixedCase" ("Id" bigint primary key, "Name" text)',
]


@pytest.fixture(scope="module")
def pg_db(make_module_database: Callable[..., Any], spanner_client: Any) -> Iterator[Any]:
    """A PostgreSQL-dialect database on the emulator, made with the client's admin API (the
    emulator's GetDatabase reports no dialect for it)."""
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    make_module_database(ddl=[])  # (creates the instance when missing)
    db = spanner_client.instance(INSTANCE).database(
        "trypg", database_dialect=DatabaseDialect.POSTGRESQL
    )
    db.create().result(120)
    db.update_ddl(PG_DDL).result(120)
    yield db
    db.drop()


def test_a_postgresql_database_on_the_emulator_loads_and_verifies(
    pg_db: Any, tmp_path: Path
) -> None:
    """ "table 'singers' does not exist ... existing tables: (none)": the emulator reports no
    dialect, so the loader read the GoogleSQL schema '' of a PostgreSQL-dialect database."""
    src = tmp_path / "singers.csv"
    src.write_text("singer_id,first_name\n1,Ann\n2,Bob\n", encoding="utf-8")
    args = [str(src), "--table", "singers", "--emulator", "--database", "trypg"]
    p = run("load", *args, "-q", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows_written"] == 2
    p = run("verify", *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert read_table(pg_db, "singers", ["singer_id", "first_name"]) == [(1, "Ann"), (2, "Bob")]


def test_a_quoted_mixed_case_pg_table_loads_and_verifies(pg_db: Any, tmp_path: Path) -> None:
    src = tmp_path / "m.csv"
    src.write_text("Id,Name\n7,x\n", encoding="utf-8")
    args = [str(src), "--table", "MixedCase", "--emulator", "--database", "trypg"]
    p = run("load", *args, "-q", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows_written"] == 1
    p = run("verify", *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert read_table(pg_db, "MixedCase", ["Id", "Name"]) == [(7, "x")]
    # quoted as PostgreSQL quotes it: that name exactly (it said "does not exist")
    quoted = [str(src), "--table", '"MixedCase"', *args[3:]]
    p = run("verify", *quoted)
    assert p.returncode == 0, (p.stdout, p.stderr)
    p = run("verify", str(src), "--table", '"mixedcase"', *args[3:])
    assert p.returncode == 2 and "does not exist" in p.stderr, p.stderr


def test_the_client_path_sees_the_pg_dialect_on_the_emulator(pg_db: Any, tmp_path: Path) -> None:
    """A library caller's client ``Database`` (ClientAccess) on the same database."""
    from loader import load
    from loader.access import ClientAccess
    from loader.schema_reader import is_postgresql, read_catalog

    assert is_postgresql(pg_db) and is_postgresql(ClientAccess(pg_db))
    schemas, catalog = read_catalog(pg_db, ["mixedcase"])
    assert catalog.postgresql and schemas["mixedcase"].name == "MixedCase"
    src = tmp_path / "m.csv"
    src.write_text("Id,Name\n8,y\n", encoding="utf-8")
    report = load(small_load_config(pg_db, "MixedCase", [src]), database=pg_db)
    assert report.rows_written == 1
    assert (8, "y") in read_table(pg_db, "MixedCase", ["Id", "Name"])


def test_a_googlesql_database_on_the_emulator_is_not_taken_for_pg(
    make_database: Callable[..., Any],
) -> None:
    from loader.schema_reader import is_postgresql

    assert not is_postgresql(make_database(ddl=[]))


# -- empty inputs: one rule (README "An empty input is skipped with a note") -----------------

KV_DDL = "CREATE TABLE KV (Id INT64 NOT NULL, Name STRING(10)) PRIMARY KEY (Id);\n"
EMPTY_INPUTS = {
    "zero.csv": b"",
    "empty.csv.gz": gzip.compress(b"", mtime=0),
    "bom.csv": b"\xef\xbb\xbf",
    "newline.csv": b"\n",
    "blank.csv": b"\r\n\n\r\n",
    "blank.csv.gz": gzip.compress(b"\xef\xbb\xbf\n\n", mtime=0),
}


PG_FILE_DDL = "create table t (id bigint not null, name varchar(20), primary key (id));\n"


def test_ddl_dialect_postgresql_makes_the_emulator_database_for_pg_ddl(
    spanner_client: Any, tmp_path: Path
) -> None:
    """`--ddl` made GoogleSQL databases only: PostgreSQL DDL failed to parse, with no way out
    but the admin API. `--ddl-dialect postgresql` creates the database in that dialect; a
    database that exists in the other one is refused, naming its dialect."""
    ddl, src = tmp_path / "pg.sql", tmp_path / "t.csv"
    ddl.write_text(PG_FILE_DDL, encoding="utf-8")
    src.write_text("id,name\n1,Ann\n2,Bob\n", encoding="utf-8")
    args = [str(src), "--table", "t", "--emulator", "--database", "ddlpg", "--ddl", str(ddl)]
    try:
        p = run("load", *args, "--ddl-dialect", "postgresql", "-q", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["rows_written"] == 2
        p = run("load", *args, "--ddl-dialect", "googlesql", "-q")
        assert_clean_error(p, 2, "database ddlpg exists as a PostgreSQL database, not googlesql")
        p = run("verify", *args)  # the flag left out: the database's own dialect
        assert p.returncode == 0, (p.stdout, p.stderr)
    finally:
        spanner_client.instance(INSTANCE).database("ddlpg").drop()


def test_pg_ddl_on_a_googlesql_database_names_the_flag_and_leaves_no_database(
    spanner_client: Any, tmp_path: Path
) -> None:
    """The statement failed to parse, with "fix the statement" for a hint, and the empty
    GoogleSQL database stayed: a re-run with the flag met it. Now the hint names the flag, and
    the database the run created for the DDL is dropped again."""
    ddl, src = tmp_path / "pg.sql", tmp_path / "t.csv"
    ddl.write_text(PG_FILE_DDL, encoding="utf-8")
    src.write_text("id,name\n1,Ann\n", encoding="utf-8")
    args = [str(src), "--table", "t", "--emulator", "--database", "ddlpg2", "--ddl", str(ddl)]
    p = run("load", *args, "-q")
    assert_clean_error(p, 2, "DDL statement failed", "dropped again", "--ddl-dialect postgresql")
    assert not spanner_client.instance(INSTANCE).database("ddlpg2").exists()
    p = run("load", *args, "--ddl-dialect", "postgresql", "-q")
    try:
        assert p.returncode == 0, p.stderr
    finally:
        spanner_client.instance(INSTANCE).database("ddlpg2").drop()


def test_ddl_dialect_without_the_emulator_is_refused(tmp_path: Path) -> None:
    p = run("load", "x.csv", "--table", "t", "--project", "p", "--instance", "i",
            "--database", "d", "--ddl-dialect", "postgresql")  # fmt: skip
    assert_clean_error(p, 2, "--ddl-dialect is only applied with --emulator")


def _kv(tmp_path: Path, database: str) -> list[str]:
    ddl = tmp_path / "kv.sql"
    ddl.write_text(KV_DDL, encoding="utf-8")
    return ["--table", "KV", "--emulator", "--ddl", str(ddl), "--database", database]


@pytest.mark.parametrize("name", sorted(EMPTY_INPUTS))
def test_an_empty_input_is_skipped_with_a_note_wherever_it_comes_from(
    spanner_emulator: str, tmp_path: Path, name: str
) -> None:
    """Only the 0-byte file was skipped; an empty .gz, a BOM or line ends only were "empty
    file, expected a header", exit 2. Loaded beside a real file, and through a manifest."""
    (tmp_path / name).write_bytes(EMPTY_INPUTS[name])
    (tmp_path / "one.csv").write_text("Id,Name\n1,a\n", encoding="utf-8")
    kv = _kv(tmp_path, "tryempty")
    for cmd in ("load", "validate"):
        p = run(cmd, str(tmp_path / name), str(tmp_path / "one.csv"), *kv, "-q", "--json")
        assert p.returncode == 0, p.stderr
        report = json.loads(p.stdout)
        assert report["rows_read"] == 1 and report["rows_rejected"] == 0
        assert any(n.endswith(f"{name}: skipped an empty file") for n in report["notes"]), report
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"tables": [{"table_name": "KV", "file_patterns": [name]}]}))
    p = run("load", "--manifest", str(manifest), *kv[2:], "-q", "--json")
    assert p.returncode == 0, p.stderr
    assert any(n.endswith(f"{name}: skipped an empty file") for n in json.loads(p.stdout)["notes"])
    p = run(
        "verify",
        str(tmp_path / name),
        str(tmp_path / "one.csv"),
        *kv[:-2],
        "--database",
        "tryempty",
    )
    assert p.returncode == 0, (p.stdout, p.stderr)


# ids from the values: a gzip header holds its time unless mtime is set, and pytest-xdist's
# workers must collect the same ids
@pytest.mark.parametrize("data", [b"", b"\xef\xbb\xbf\r\n", gzip.compress(b"", mtime=0)])
def test_empty_stdin_is_an_empty_input(spanner_emulator: str, tmp_path: Path, data: bytes) -> None:
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "loader", "load", "-", *_kv(tmp_path, "tryempty"), "-q", "--json"],
        input=data,
        capture_output=True,
        env=e,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["rows_read"] == 0
    assert "-: skipped an empty input" in report["notes"], report


def test_a_header_without_records_loads_no_rows_without_a_note(
    spanner_emulator: str, tmp_path: Path
) -> None:
    (tmp_path / "h.csv").write_text("Id,Name\n", encoding="utf-8")
    p = run("load", str(tmp_path / "h.csv"), *_kv(tmp_path, "tryempty"), "-q", "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["rows_read"] == 0 and not any("empty" in n for n in report["notes"])


def test_an_empty_gs_object_is_skipped_with_a_note(spanner_emulator: str, tmp_path: Path) -> None:
    from gcs_server import gcs_emulator

    from loader.source import make_storage_client

    with gcs_emulator() as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", url)
        bucket = make_storage_client().create_bucket("tryempty")
        bucket.blob("e/blank.csv").upload_from_string(b"\xef\xbb\xbf\n", content_type="text/csv")
        bucket.blob("e/empty.csv.gz").upload_from_string(gzip.compress(b""))
        bucket.blob("e/one.csv").upload_from_string(b"Id,Name\n1,a\n", content_type="text/csv")
        p = run(
            "load",
            "gs://tryempty/e/",
            *_kv(tmp_path, "tryempty"),
            "-q",
            "--json",
            env={"STORAGE_EMULATOR_HOST": url},
        )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["rows_read"] == 1
    for name in ("blank.csv", "empty.csv.gz"):
        assert f"gs://tryempty/e/{name}: skipped an empty object" in report["notes"], report


# -- small things ---------------------------------------------------------------------------


def test_columns_with_header_is_refused_in_one_line(tmp_path: Path) -> None:
    """`--columns a,b --header` read the header and ignored --columns without a word."""
    (tmp_path / "kv.csv").write_text("Id,Name\n1,a\n", encoding="utf-8")
    args = [str(tmp_path / "kv.csv"), "--table", "KV", "--columns", "Id,Name", "--header"]
    p = run("load", *args, "--project", "p", "--instance", "i", "--database", "d")
    assert_clean_error(p, 2, "--columns names the fields of files without a header", "--header")
    assert "hint: drop --header (every row is then data) or --columns" in p.stderr


def test_a_dialect_with_columns_and_a_header_is_refused() -> None:
    from loader.errors import ConfigError
    from loader.parse import Dialect

    with pytest.raises(ConfigError, match="`columns` names the fields of files without a header"):
        Dialect(columns=("Id", "Name"))
    assert Dialect(columns=("Id",), header=False).columns == ("Id",)
    assert Dialect().with_columns(("Id",)).header is False


def test_emulator_start_whose_ddl_fails_leaves_no_pid_record(tmp_path: Path) -> None:
    """The emulator was stopped, but its record in $TMPDIR/spanner-loader-emulators/ stayed."""
    from test_cli import assert_clean_error

    ddl = tmp_path / "bad.sql"
    ddl.write_text("CREATE TABLE Bad (Id INT64 NOT NULL,\n", encoding="utf-8")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp), "SPANNER_EMULATOR_HOST": ""}
    p = run("emulator", "start", "--database", "bad", "--ddl", str(ddl), env=env)
    assert_clean_error(p, 2, "DDL statement failed")
    assert list((tmp / "spanner-loader-emulators").glob("*.pid")) == []
    assert list(tmp.glob("spanner-emulator-*.log"))  # it did start (and was stopped)


def test_a_second_signal_still_prints_the_json_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second Ctrl-C gives up at once: --json printed nothing and --report wrote no file, so
    a script's JSON parse failed (a tryout). Both now hold an "interrupted" report."""
    import signal

    import loader.pipeline
    from loader.cli import app

    def abort(*args: Any, **kw: Any) -> Any:
        raise KeyboardInterrupt  # what the second signal's handler raises

    monkeypatch.setattr(loader.pipeline, "load", abort)
    src = tmp_path / "c.csv"
    src.write_text("Id\n1\n")
    report = tmp_path / "r.json"
    argv = ["spanner-loader", "load", str(src), "--table", "T", "--project", "p"]
    argv += ["--instance", "i", "--database", "d", "--json", "--report", str(report)]
    monkeypatch.setattr(sys, "argv", argv)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert app._run() == 5
    finally:  # the command installs its own
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["status"] == "interrupted" and printed["exit_code"] == 5
    assert "aborted by a second signal" in printed["error"]
    assert json.loads(report.read_text()) == printed
    assert err.strip().endswith("aborted")


def test_a_second_signal_prints_what_the_load_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report of a load given up at once had every count 0 and no load id (a tryout): the
    CLI now prints the partial report the load hands on, as text and as --report JSON."""
    import signal

    import loader.pipeline
    from loader.cli import app
    from loader.report import LoadReport, TableReport

    def abort(config: Any, **kw: Any) -> Any:
        e = KeyboardInterrupt()
        e.report = LoadReport(  # type: ignore[attr-defined]
            database="projects/p/instances/i/databases/d",
            mode="upsert",
            dry_run=False,
            started_at="2026-11-27T18:00:00+00:00",
            load_id="20261127T180000-abc",
            error=loader.pipeline.ABORTED,
            exit_code=ExitCode.INTERRUPTED,
            tables=[TableReport(table="T", rows_read=3_000, rows_written=700, commits=7)],
        )
        raise e

    monkeypatch.setattr(loader.pipeline, "load", abort)
    src = tmp_path / "c.csv"
    src.write_text("Id\n1\n")
    report = tmp_path / "r.json"
    argv = ["spanner-loader", "load", str(src), "--table", "T", "--project", "p"]
    argv += ["--instance", "i", "--database", "d", "--report", str(report)]
    monkeypatch.setattr(sys, "argv", argv)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert app._run() == 5
    finally:  # the command installs its own
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    out, err = capsys.readouterr()
    assert "interrupted: 3,000 rows read, 700 written" in out
    assert "run the same command again to resume" in err
    saved = json.loads(report.read_text())
    assert saved["load_id"] == "20261127T180000-abc" and saved["tables"][0]["rows_written"] == 700


def test_a_proxy_answering_for_spanner_gets_a_hint_that_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An address a proxy answers with HTTP/2 404 passed the connect probe, and the schema
    read's error said only "see --help" (a tryout)."""
    from google.api_core import exceptions as gexc

    from loader.schema_reader import _translate

    e = gexc.ServiceUnavailable("Received http2 header with status: 404")
    monkeypatch.setenv("SPANNER_EMULATOR_HOST", "10.255.255.1:9010")
    err = _translate(e, object())
    assert "Received http2 header with status: 404" in str(err)
    assert "SPANNER_EMULATOR_HOST (10.255.255.1:9010) is no Spanner emulator" in (err.hint or "")
    monkeypatch.delenv("SPANNER_EMULATOR_HOST")
    assert "HTTPS_PROXY" in (_translate(e, object()).hint or "")


def test_a_grpc_server_of_another_kind_is_named_as_no_spanner(tmp_path: Path) -> None:
    """A tryout pointed SPANNER_EMULATOR_HOST at a gRPC server with no Spanner service:
    `load --emulator` was told of database ids, `verify --emulator` exited 1 with "this is
    unexpected", `load` without `--emulator` was sent to --help."""
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        host = f"127.0.0.1:{port}"
        (tmp_path / "e.csv").write_text("Id,Name\n1,a\n", encoding="utf-8")
        src = str(tmp_path / "e.csv")
        told = f"the server at SPANNER_EMULATOR_HOST ({host}) is no Spanner emulator"
        for args in (
            ["load", src, "--table", "T", "--emulator", "--database", "shop"],
            ["verify", src, "--table", "T", "--emulator", "--database", "shop"],
            ["load", src, "--table", "T", "--project", "p", "--instance", "i", "--database", "d"],
        ):
            p = run(*args, env={"SPANNER_EMULATOR_HOST": host})
            assert_clean_error(p, 2, told, "Method not found")
            assert "request_id" not in p.stderr
    finally:
        server.stop(None)


@pytest.mark.parametrize(
    "args, hint",
    [
        (["--skip-existing"], "add --mode insert, or leave out --skip-existing (upsert writes"),
        (["--mode", "update", "--skip-existing"], "--skip-missing is update mode's counterpart"),
        (["--mode", "insert", "--skip-missing"], "--skip-existing is insert mode's counterpart"),
        (["--mode", "replace", "--skip-missing"], "add --mode update, or leave out --skip-missing"),
        (
            ["--mode", "insert", "--skip-existing", "--skip-missing"],
            "add --mode update, or leave out --skip-missing",
        ),
    ],
)
def test_a_skip_flag_with_another_mode_is_a_usage_error(
    tmp_path: Path, args: list[str], hint: str
) -> None:
    src = tmp_path / "c.csv"
    src.write_text("Id\n1\n")
    p = run("load", str(src), "--table", "T", "--project", "p", "--instance", "i",
            "--database", "d", *args)  # fmt: skip
    assert_clean_error(p, 2, "is for --mode")
    assert f"hint: {hint}" in p.stderr


def test_a_config_file_s_skip_flag_is_turned_off_on_the_command_line(tmp_path: Path) -> None:
    """`skip-existing = true` in a job file could not be undone for one run: --mode upsert
    was refused, naming a flag the user never typed, and there was no --no-skip-existing."""
    from loader.cli import cli
    from loader.cli.options import _build_config

    job = tmp_path / "job.toml"
    job.write_text('mode = "insert"\nskip-existing = true\n')
    args = ["d.csv", "--table", "D", "--project", "p", "--instance", "i", "--database", "d"]
    args += ["--config", str(job), "--mode", "upsert", "--no-skip-existing"]
    with cli.commands["load"].make_context("load", args) as ctx:
        config = _build_config(ctx.params, False)
    assert (config.mode, config.skip_existing) == ("upsert", False)


@pytest.mark.parametrize("value", ["1", "0", "2.5"])
def test_a_number_for_an_on_off_option_in_a_config_file_is_one_line(
    tmp_path: Path, value: str
) -> None:
    """`skip-existing = 1` (or `emulator = 1`) in a job file was an AttributeError reported
    as unexpected, exit 1; now one line naming the file and key, exit 2."""
    job = tmp_path / "job.toml"
    job.write_text(f"skip-existing = {value}\n")
    src = tmp_path / "c.csv"
    src.write_text("Id\n1\n")
    p = run("load", str(src), "--table", "T", "--project", "p", "--instance", "i",
            "--database", "d", "--config", str(job))  # fmt: skip
    assert_clean_error(p, 2, f"skip-existing: {value} is not true or false")
    assert "hint: write skip-existing = true or skip-existing = false" in p.stderr


@pytest.mark.parametrize(
    ("stmt", "pg"),
    [
        (PG_FILE_DDL, True),
        ('CREATE TABLE t ("Id" bigint, x text)', True),
        ("create table t (id serial primary key)", True),
        ("create table t (at timestamp with time zone, d double precision)", True),
        # GoogleSQL columns named like PostgreSQL types got the PostgreSQL hint
        ("CREATE TABLE T (Id INT64, Text STRING(MAX), Real FLOAT64,) PRIMARY KEY (Id)", False),
        ("CREATE TABLE Text (Id INT64 NOT NULL, Boolean BOOL) PRIMARY KEY (Id)", False),
        ("CREATE TABLE C (A INT64, B INT64) PRIMARY KEY (A, B), INTERLEAVE IN PARENT P", False),
    ],
)
def test_the_postgresql_hint_reads_types_where_a_column_has_its_type(stmt: str, pg: bool) -> None:
    from loader.emulator import reads_as_postgresql

    assert reads_as_postgresql(stmt) is pg


@pytest.mark.parametrize("flag", ["--incremental", "-q", "--priority"])
def test_a_load_flag_given_to_verify_is_named_as_load_s(tmp_path: Path, flag: str) -> None:
    """A tryout pasted the nightly load's command line into verify: "No such option", with
    the help for a hint. (--mode was one; verify takes it since, for insert mode's keys.)"""
    extra = [flag, "low"] if flag == "--priority" else [flag]
    p = run("verify", "x.csv", "--table", "t", "--database", "d", *extra)
    assert_clean_error(p, 2, f"No such option '{flag}'")
    assert f"hint: {flag} is an option of `spanner-loader load`, not of verify" in p.stderr


def test_input_piped_in_without_a_source_names_dash() -> None:
    """A tryout: `cat f | spanner-loader load --table T` said "no SOURCE given" with no word
    of `-`."""
    p = subprocess.run(
        [sys.executable, "-m", "loader", "load", "--table", "T", "--database", "d", "--emulator"],
        input="Id\n1\n",
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert_clean_error(p, 2, "no SOURCE given")
    assert "input piped in is read with - as the SOURCE" in p.stderr


def test_the_python_api_takes_one_source_and_paths_as_text() -> None:
    """A tryout of the Python API: TableJob("Books", "b.csv") read the string's characters as
    sources ("permission denied reading /proc/1/cwd"), and LoadConfig(rejects="x.jsonl") was
    an AttributeError traceback."""
    from loader import LoadConfig, TableJob, Target
    from loader.convert import ConvertOptions
    from loader.errors import ConfigError
    from loader.parse import Dialect

    job = TableJob("Books", "b.csv")  # type: ignore[arg-type]
    assert job.sources == ("b.csv",)
    assert TableJob("Books", [Path("a.csv"), "b.csv"]).sources == ("a.csv", "b.csv")  # type: ignore[arg-type]
    cfg = LoadConfig(Target("p", "i", "d"), job, Dialect(), ConvertOptions(), rejects="x.jsonl")  # type: ignore[arg-type]
    assert cfg.jobs == (job,) and cfg.rejects == Path("x.jsonl")
    with pytest.raises(ConfigError, match="`columns` of Books is one string"):
        TableJob("Books", "b.csv", columns="Id,Name")  # type: ignore[arg-type]


SEMI_DDL = """-- tickets; the CI fixture
CREATE TABLE Tickets (
  Id INT64 NOT NULL, -- the id; never reused
  Status STRING(40) NOT NULL DEFAULT ('open; untriaged'),
  Note STRING(MAX) DEFAULT ("it's; \\"fine\\""), /* a; block */
) PRIMARY KEY (Id);
CREATE INDEX TicketsByStatus ON Tickets(Status);
"""


def test_a_semicolon_in_a_string_or_a_comment_does_not_end_the_ddl_statement() -> None:
    """A CI tryout: a DEFAULT ('open; untriaged') and a `-- the id; never reused` comment cut
    the statement there (exit 2, "fix the statement in the --ddl file", of a valid file)."""
    from loader.emulator import split_ddl

    first, second = split_ddl(SEMI_DDL)
    assert "DEFAULT ('open; untriaged')" in first and 'DEFAULT ("it\'s; \\"fine\\"")' in first
    assert "never reused" not in first and "a; block" not in first
    assert first.endswith(") PRIMARY KEY (Id)")
    assert second == "CREATE INDEX TicketsByStatus ON Tickets(Status)"
    assert split_ddl("-- only a comment;\n/* and; another */\n ; ;") == []
    pg = "create table t (s text default 'a''b;c', \"we;ird\" bigint primary key);"
    assert split_ddl(pg) == [pg[:-1]]


def test_the_emulator_applies_a_ddl_file_with_semicolons_in_strings(
    spanner_client: Any, tmp_path: Path
) -> None:
    ddl, src = tmp_path / "semi.sql", tmp_path / "t.csv"
    ddl.write_text(SEMI_DDL, encoding="utf-8")
    src.write_text("Id\n1\n", encoding="utf-8")
    args = [str(src), "--table", "Tickets", "--emulator", "--database", "semi", "--ddl", str(ddl)]
    try:
        p = run("load", *args, "-q", "--json")
        assert p.returncode == 0, p.stderr
        (row,) = read_table(spanner_client.instance(INSTANCE).database("semi"), "Tickets",
                            ["Id", "Status", "Note"])  # fmt: skip
        assert list(row) == [1, "open; untriaged", 'it\'s; "fine"']
    finally:
        spanner_client.instance(INSTANCE).database("semi").drop()


def test_verify_creates_nothing_and_needs_the_load_s_emulator(
    spanner_client: Any, tmp_path: Path
) -> None:
    """A CI tryout: `verify --emulator --database nosuchdb` said "the database has no tables"
    and left the database made (with --ddl, its tables too); without SPANNER_EMULATOR_HOST it
    started an emulator of its own, empty, and compared the files with that."""
    src = tmp_path / "t.csv"
    src.write_text("Id,Name\n1,a\n", encoding="utf-8")
    args = [str(src), "--table", "Customers", "--emulator", "--database", "nosuchdb"]
    p = run("verify", *args, "--ddl", str(ROOT / "schemas" / "shop.sql"))
    assert_clean_error(p, 2, "database nosuchdb does not exist on the emulator at")
    assert not spanner_client.instance(INSTANCE).database("nosuchdb").exists()
    p = run("verify", *args, "--json")  # it printed nothing on stdout (load --json does)
    out = json.loads(p.stdout)
    assert p.returncode == 2 and out["status"] == "failed" and out["exit_code"] == 2
    assert out["error"].startswith("database nosuchdb does not exist") and out["hint"]
    env = {k: v for k, v in os.environ.items() if k != "SPANNER_EMULATOR_HOST"}
    p = subprocess.run(
        [sys.executable, "-m", "loader", "verify", *args],
        capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120,
    )  # fmt: skip
    assert_clean_error(p, 2, "without SPANNER_EMULATOR_HOST: an emulator started for verify")


def test_verify_rejects_leaves_out_the_rows_a_load_refused(
    spanner_client: Any, tmp_path: Path
) -> None:
    """A CI script: a load that Spanner refused a row of exits 3; verify then always exited
    6 (the row is missing). With the load's reject file it compares the rest, and its notes
    name the flags as the command line has them."""
    ddl = tmp_path / "s.sql"
    ddl.write_text(
        "CREATE TABLE Vp (Id INT64 NOT NULL) PRIMARY KEY (Id);\n"
        "CREATE TABLE Vc (Id INT64 NOT NULL, Seq INT64 NOT NULL) PRIMARY KEY (Id, Seq),\n"
        "  INTERLEAVE IN PARENT Vp ON DELETE CASCADE;\n"
    )
    parents, children = tmp_path / "p.csv", tmp_path / "c.csv"
    parents.write_text("Id\n1\n2\n")
    children.write_text("Id,Seq\n1,1\n3,1\n2,1\n")
    rejects = tmp_path / "r.jsonl"
    target = ["--emulator", "--database", "vrej"]
    try:
        p = run("load", str(parents), "--table", "Vp", *target, "--ddl", str(ddl))
        assert p.returncode == 0, p.stderr
        c = [str(children), "--table", "Vc", *target]
        p = run("load", *c, "--max-bad-rows", "5", "--rejects", str(rejects), "--json")
        assert p.returncode == 3, p.stderr
        load_id = json.loads(p.stdout)["load_id"]
        p = run("verify", *c)
        assert p.returncode == 6 and "(--rejects names it" in p.stdout, p.stdout
        p = run("verify", *c, "--rejects", str(rejects), "--load-id", load_id)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Vc: ok: source 2 rows, table 2 rows" in p.stdout
        assert "Vc: 1 source row(s) the reject file lists" in p.stdout
        p = run("verify", *c, "--rejects", str(rejects), "--json")
        assert json.loads(p.stdout)["tables"][0]["rejected_rows_left_out"] == 1
        assert_clean_error(run("verify", *c, "--load-id", load_id), 2, "--load-id picks lines")
    finally:
        spanner_client.instance(INSTANCE).database("vrej").drop()


def test_sizes_past_what_the_reader_or_the_machine_holds_are_usage_errors() -> None:
    """A tryout: --block-size 2GiB failed with "OverflowError ... this is unexpected", exit 1
    (and passed on a job already loaded); --buffer-size 100TiB was taken on a 2-core VM."""
    from loader import LoadConfig, TableJob, Target
    from loader.config import MAX_BLOCK_SIZE, physical_memory
    from loader.convert import ConvertOptions
    from loader.errors import ConfigError
    from loader.parse import Dialect

    def cfg(**kw: Any) -> LoadConfig:
        return LoadConfig(
            target=Target("p", "i", "d"),
            jobs=(TableJob("T", ("a.csv",)),),
            dialect=Dialect(),
            convert=ConvertOptions(),
            **kw,
        )

    assert cfg(block_size=MAX_BLOCK_SIZE).block_size == MAX_BLOCK_SIZE
    with pytest.raises(ConfigError, match="`block_size` must be at most 1GiB"):
        cfg(block_size=2 << 30)
    memory = physical_memory()
    assert memory
    with pytest.raises(ConfigError, match="more than this machine's memory"):
        cfg(buffer_size=memory + 1)
    # a Beam runner's workers are other machines
    assert cfg(buffer_size=memory + 1, runner="DataflowRunner").buffer_size == memory + 1
    p = run("validate", "a.csv", "--table", "T", "--block-size", "2GiB", "--emulator",
            "--database", "d")  # fmt: skip
    assert_clean_error(p, 2, "--block-size must be at most 1GiB")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPANNER_")}
    p = subprocess.run(
        [sys.executable, "-m", "loader", "validate", "a.csv", "--table", "T"],
        capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT),
        "SPANNER_PROJECT": "p", "SPANNER_INSTANCE": "i"}, timeout=120,
    )  # fmt: skip
    assert_clean_error(p, 2, "missing --database")
    assert "hint: give it as an option or set SPANNER_DATABASE;" in p.stderr


def test_reject_reasons_name_options_as_the_command_line_does(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """A tryout: a NOT NULL column with a DEFAULT, NULL in a row: the reject file said
    "`ignore` it", where the command line's own messages say "--ignore it"."""
    ddl = tmp_path / "d.sql"
    ddl.write_text(
        'CREATE TABLE D (Id INT64 NOT NULL, S STRING(10) NOT NULL DEFAULT ("x")) PRIMARY KEY (Id);'
    )
    src, rejects = tmp_path / "d.csv", tmp_path / "r.jsonl"
    src.write_text("Id,S\n1,a\n2,\n")
    p = run(
        "load", str(src), "--table", "D", "--emulator", "--ddl", str(ddl), "--database",
        "tryreasons", "--rejects", str(rejects), "--max-bad-rows", "5", "-q",
    )  # fmt: skip
    assert p.returncode == 3, p.stderr
    (line,) = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert "--ignore it to have the DEFAULT in every row" in line["reason"], line
