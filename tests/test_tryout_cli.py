"""Found by using the CLI as a new user would (inputs nobody designed for): each test is one
thing that broke, run through the real command against the emulator."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import read_table
from test_cli import assert_clean_error, run

KV_DDL = "CREATE TABLE KV (Id INT64 NOT NULL, Name STRING(10) NOT NULL, Note STRING(MAX)) PRIMARY KEY (Id);\n"


def _kv(tmp_path: Path, database: str) -> list[str]:
    ddl = tmp_path / "kv.sql"
    ddl.write_text(KV_DDL, encoding="utf-8")
    return ["--emulator", "--ddl", str(ddl), "--database", database]


def test_a_manifest_tables_columns_name_the_fields_of_header_less_files(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """README: a table's `columns` name the fields by position (files without a header, as the
    Dataflow template reads them). The first record was taken for a header instead: exit 2,
    "CSV column(s) not in table KV: '1', 'a'"."""
    (tmp_path / "kv.csv").write_text("1,a,x\n2,b,\n", encoding="utf-8")
    cols = [
        {"column_name": "Id", "type_name": "INT64"},
        {"column_name": "Name", "type_name": "STRING"},
        {"column_name": "Note", "type_name": "STRING"},
    ]
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps({"tables": [{"table_name": "KV", "file_patterns": ["kv.csv"], "columns": cols}]})
    )
    args = ["--manifest", str(manifest), *_kv(tmp_path, "trymanifestcols")]
    p = run("load", *args, "-q", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rows_written"] == 2
    p = run("verify", "--manifest", str(manifest), "--emulator", "--database", "trymanifestcols")
    assert p.returncode == 0, (p.stdout, p.stderr)
    from google.cloud import spanner

    db = spanner.Client(project="test-project").instance("test-instance")
    rows = read_table(db.database("trymanifestcols"), "KV", ["Id", "Name", "Note"])
    assert rows == [(1, "a", "x"), (2, "b", None)]


def test_a_bad_ddl_statement_is_one_line(spanner_emulator: str, tmp_path: Path) -> None:
    """The emulator quotes the whole statement in its error: the message was several lines."""
    ddl = tmp_path / "bad.sql"
    ddl.write_text("CREATE TABLE Bad (\n  Id INT64 NOT NULL,\n  X STRING(MAX),\n", encoding="utf-8")
    src = tmp_path / "a.csv"
    src.write_text("Id\n1\n", encoding="utf-8")
    p = run(
        "load", str(src), "--table", "Bad", "--emulator", "--ddl", str(ddl), "--database", "tryddl"
    )
    assert_clean_error(p, 2, "DDL statement failed: CREATE TABLE Bad (")
    error, hint = p.stderr.rstrip("\n").split("\n")[-2:]
    assert error.startswith("error: ") and "Syntax error" in error, p.stderr
    assert hint.startswith("hint: "), p.stderr


def test_a_bad_config_value_names_the_flag(tmp_path: Path) -> None:
    """The hint said `--max_bad_rows` (the file's key) for a flag spelled --max-bad-rows."""
    cfg = tmp_path / "job.toml"
    cfg.write_text('sources = ["a.csv"]\ntable = "T"\nmax_bad_rows = "x"\n', encoding="utf-8")
    p = run("load", "--config", str(cfg))
    assert_clean_error(p, 2, "max_bad_rows", "takes what --max-bad-rows takes on the command line")
    assert "--max_bad_rows" not in p.stderr


def test_verify_over_its_bad_row_limit_does_not_point_at_a_reject_file(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """verify keeps no reject file, yet its hint said "see the reject file"."""
    src = tmp_path / "kv.csv"
    src.write_text("Id,Name,Note\n1,a,x\n2,,y\n", encoding="utf-8")
    args = [str(src), "--table", "KV", *_kv(tmp_path, "tryverifyhint")]
    p = run("load", *args, "-q", "--max-bad-rows", "1", "--rejects", str(tmp_path / "r.jsonl"))
    assert p.returncode == 3, p.stderr
    p = run("verify", str(src), "--table", "KV", "--emulator", "--database", "tryverifyhint")
    assert_clean_error(p, 4, "NULL in NOT NULL column Name")
    assert "reject file" not in p.stderr and "validate" in p.stderr, p.stderr


def test_verify_reads_back_json_scalars_arrays_and_null(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """The client hands JSON back as a dict subclass even for a scalar, an array or a JSON
    null (an empty dict beside a flag): verify compared {} with the source's value and
    reported every such row as different (exit 6) although the load had written it right."""
    ddl = tmp_path / "j.sql"
    ddl.write_text(
        "CREATE TABLE J (Id INT64 NOT NULL, V JSON, A ARRAY<JSON>) PRIMARY KEY (Id);\n",
        encoding="utf-8",
    )
    src = tmp_path / "j.csv"
    src.write_text(
        'Id,V,A\n1,"""str""",\n2,1,\n3,true,\n4,"{""a"": [1, null]}",\n5,null,\n'
        '6,"[1,""x""]",\n7,,"[1, ""s"", [2], {""k"": null}, null]"\n',
        encoding="utf-8",
    )
    args = [str(src), "--table", "J", "--emulator", "--database", "tryjson"]
    p = run("load", *args, "--ddl", str(ddl), "-q")
    assert p.returncode == 0, p.stderr
    p = run("verify", *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "J: ok: source 7 rows, table 7 rows" in p.stdout


def test_a_stop_over_max_bad_rows_names_the_table_nothing_of_which_is_committed(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """A manifest's first table loaded, its second stopped over --max-bad-rows before a
    commit: the hint said "nothing of this job is committed", with the first table's rows in
    the database (a tryout). It names the table; the same command then loads the fixed file
    and leaves the loaded table."""
    ddl = tmp_path / "two.sql"
    ddl.write_text(KV_DDL + KV_DDL.replace("KV", "KV2"), encoding="utf-8")
    (tmp_path / "kv.csv").write_text("Id,Name\n1,a\n2,b\n", encoding="utf-8")
    (tmp_path / "kv2.csv").write_text("Id,Name\n1,a\nx,b\n3,c\n", encoding="utf-8")
    manifest = tmp_path / "m.json"
    tables = [
        {"table_name": "KV", "file_patterns": ["kv.csv"]},
        {"table_name": "KV2", "file_patterns": ["kv2.csv"]},
    ]
    manifest.write_text(json.dumps({"tables": tables}), encoding="utf-8")
    args = ["--manifest", str(manifest), "--emulator", "--ddl", str(ddl)]
    args += ["--database", "trytwostop", "--max-bad-rows", "0"]
    p = run("load", *args, "-q")
    assert_clean_error(p, 4, "more than 0 bad rows")
    assert "nothing of KV2 is committed, so a changed file is loaded as it is" in p.stderr
    assert "nothing of this job" not in p.stderr
    (tmp_path / "kv2.csv").write_text("Id,Name\n1,a\n2,b\n3,c\n", encoding="utf-8")
    p = run("load", *args, "-q", "--json")
    assert p.returncode == 0, p.stderr
    # KV2's three rows, and KV's two again if the stop came before KV's commit (the two tables
    # load side by side: which ends first is the machine's timing)
    assert json.loads(p.stdout)["rows_written"] in (3, 5)
    from google.cloud import spanner

    db = spanner.Client(project="test-project").instance("test-instance").database("trytwostop")
    assert read_table(db, "KV", ["Id", "Name"]) == [(1, "a"), (2, "b")]
    assert read_table(db, "KV2", ["Id", "Name"]) == [(1, "a"), (2, "b"), (3, "c")]


def test_verify_help_says_it_reads_and_applies_no_ddl() -> None:
    """verify --help said --emulator "creates the instance and database if missing" and --ddl
    is applied "before loading": verify does neither (a PostgreSQL tryout)."""
    p = run("verify", "--help")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "Read from the Spanner emulator at SPANNER_EMULATOR_HOST (none is started" in text
    assert "verify applies no DDL" in text
    assert "Creates the instance" not in text and "before loading" not in text
    load_help = " ".join(run("load", "--help").stdout.split())
    assert "Creates the instance and database if missing" in load_help


def test_a_ddl_file_naming_one_table_twice_in_two_cases_is_refused(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """CREATE TABLE Singers, then CREATE TABLE singers (other columns) in one file: the
    emulator answered "Duplicate name in schema", taken for an object that exists, so the
    second was skipped without a word into a database created for the file (a PostgreSQL
    tryout). On a database that held the object before, a statement is still skipped."""
    ddl = tmp_path / "mixed.sql"
    first = "CREATE TABLE Singers (SingerId INT64 NOT NULL) PRIMARY KEY (SingerId);\n"
    ddl.write_text(
        first + "CREATE TABLE singers (singer_id INT64 NOT NULL) PRIMARY KEY (singer_id);\n",
        encoding="utf-8",
    )
    src = tmp_path / "s.csv"
    src.write_text("SingerId\n1\n", encoding="utf-8")
    args = [str(src), "--table", "Singers", "--emulator", "--ddl", str(ddl)]
    p = run("load", *args, "--database", "trydupname")
    assert_clean_error(p, 2, "DDL statement failed: CREATE TABLE singers")
    assert "Duplicate name in schema" in p.stderr and "rename one" in p.stderr
    ddl.write_text(first, encoding="utf-8")
    assert run("load", *args, "--database", "trydupname", "-q").returncode == 0
    ddl.write_text(first + first.replace("Singers", "SINGERS"), encoding="utf-8")
    p = run("load", *args, "--database", "trydupname", "-q")  # it exists: skipped as before
    assert p.returncode == 0, p.stderr
