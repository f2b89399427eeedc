"""loader.verify's comparable forms: a source value and the client's read-back of it agree."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.api_core.datetime_helpers import DatetimeWithNanoseconds

from loader.convert import ConvertOptions, convert_column
from loader.types import SpannerType
from loader.verify import canonical

TIMESTAMP = SpannerType.parse("TIMESTAMP")


@pytest.mark.parametrize(
    ("text", "read_back"),
    [
        ("0001-01-01T00:00:00Z", DatetimeWithNanoseconds(1, 1, 1, tzinfo=dt.timezone.utc)),
        (
            "0999-12-31T23:59:59.000000005Z",
            DatetimeWithNanoseconds(999, 12, 31, 23, 59, 59, nanosecond=5, tzinfo=dt.timezone.utc),
        ),
        (
            "2024-02-29T12:00:00.5Z",
            DatetimeWithNanoseconds(2024, 2, 29, 12, tzinfo=dt.timezone.utc, nanosecond=500000000),
        ),
        ("1969-07-20T20:17:40Z", dt.datetime(1969, 7, 20, 20, 17, 40, tzinfo=dt.timezone.utc)),
    ],
)
def test_timestamp_source_and_read_back_compare_equal(text: str, read_back: dt.datetime) -> None:
    converted, errors = convert_column(pa.array([text]), TIMESTAMP, ConvertOptions())
    assert errors == {}
    source = canonical(converted[0].as_py(), TIMESTAMP)
    assert source == canonical(read_back, TIMESTAMP, from_client=True)
    assert source.startswith(text[:4])  # four-digit year on both sides


def test_the_postgresql_dialect_is_told_by_the_enum_not_its_text() -> None:
    """On Python 3.11+ str(DatabaseDialect.POSTGRESQL) is '2': a text test missed it and every
    table of a PostgreSQL-dialect database was reported missing."""
    import contextlib
    from types import SimpleNamespace

    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    from loader.schema_reader import _schema_filter, is_postgresql

    pg = SimpleNamespace(database_dialect=DatabaseDialect.POSTGRESQL)
    gsql = SimpleNamespace(database_dialect=DatabaseDialect.GOOGLE_STANDARD_SQL)
    assert is_postgresql(pg) and _schema_filter(pg) == "'public'"
    assert not is_postgresql(gsql) and _schema_filter(gsql) == "''"
    # unspecified (the emulator's admin API, for either dialect): the database is asked

    def answering(answer: str, asked: list[str]) -> Any:
        snap = SimpleNamespace(execute_sql=lambda sql, **_: asked.append(sql) or [[answer]])
        return SimpleNamespace(
            database_dialect=DatabaseDialect.DATABASE_DIALECT_UNSPECIFIED,
            snapshot=lambda: contextlib.nullcontext(snap),
        )

    for answer, expected in (("POSTGRESQL", True), ("GOOGLE_STANDARD_SQL", False)):
        asked: list[str] = []
        assert is_postgresql(answering(answer, asked)) is expected
        assert asked and "information_schema.database_options" in asked[0]


def test_verify_is_a_core_function_that_needs_no_cli(make_database: Any, tmp_path: Path) -> None:
    """verify(config) from Python: the same check the command runs, its report and exit code."""
    from conftest import small_load_config

    from loader import load
    from loader.errors import ExitCode
    from loader.verify import verify

    db = make_database(["CREATE TABLE V (Id INT64 NOT NULL, S STRING(MAX)) PRIMARY KEY (Id)"])
    src = tmp_path / "v.csv"
    src.write_text("Id,S\n1,a\n2,b\n")
    cfg = small_load_config(db, "V", [src])
    load(cfg, database=db)
    report = verify(cfg, database=db)
    assert report.ok and report.exit_code == ExitCode.OK
    assert "V: ok: source 2 rows, table 2 rows" in report.render()
    src.write_text("Id,S\n1,a\n2,c\n")
    changed = verify(cfg, database=db)
    assert not changed.ok and changed.exit_code == ExitCode.VERIFY_MISMATCH
    out = changed.to_dict()
    assert out["tables"][0]["different_keys"] == [[2]]  # parts of the key, not Python text
    assert (out["schema_version"], out["status"], out["exit_code"]) == (1, "differs", 6)
    assert "different keys: (2,)" in changed.render()
    assert "reject file" not in changed.render()
    src.write_text("Id,S\n1,a\n2,b\n3,c\n")  # a row the table lacks (a load's reject)
    missing = verify(cfg, database=db).render()
    assert "missing keys: (3,)" in missing and "its reject file" in missing


def test_a_key_set_to_the_commit_time_cannot_be_verified(
    make_database: Any, tmp_path: Path
) -> None:
    """The source does not hold such a key: verify says so (a ConfigError, exit 2), where it
    failed inside with "ValueError: 'Ts' is not in list"."""
    from conftest import small_load_config

    from loader import load
    from loader.errors import ConfigError
    from loader.verify import verify

    db = make_database(
        [
            "CREATE TABLE E (Src STRING(MAX) NOT NULL, Ts TIMESTAMP NOT NULL OPTIONS "
            "(allow_commit_timestamp=true), V INT64) PRIMARY KEY (Src, Ts DESC)"
        ]
    )
    src = tmp_path / "e.csv"
    src.write_text("Src,V\na,1\nb,2\n")
    cfg = small_load_config(
        db, "E", [src], convert=ConvertOptions(commit_timestamp_columns=frozenset({"Ts"}))
    )
    load(cfg, database=db)
    with pytest.raises(ConfigError, match="key column Ts is set to the commit time"):
        verify(cfg, database=db)


@pytest.mark.parametrize(
    ("source", "stored"),
    [
        ('{"a": 1, "a": 2}', '{"a":1}'),  # Spanner keeps the first of duplicate keys
        ('{"n": 10000}', '{"n":1e+4}'),  # and may write a number another way
        ('{"n": 1.0, "m": 1.50}', '{"m":1.5,"n":1}'),
        ("[18446744073709551615, -0.0]", "[18446744073709551615,-0]"),
        ('{"b": 1, "a": [1e24]}', '{"a":[1000000000000000000000000],"b":1}'),
    ],
)
def test_json_compares_as_spanner_keeps_it(source: str, stored: str) -> None:
    json_type = SpannerType.parse("JSON")
    assert canonical(source, json_type) == canonical(stored, json_type, from_client=True)


def test_json_values_that_differ_still_differ() -> None:
    json_type = SpannerType.parse("JSON")
    assert canonical('{"a": 1, "a": 2}', json_type) != canonical('{"a":2}', json_type)
    assert canonical('{"n": 1}', json_type) != canonical('{"n": 1.5}', json_type)


@pytest.mark.parametrize(
    ("source", "stored"),
    [
        # jsonb keeps the digits; the client reads them back as doubles (a tryout's DIFFERS)
        ("[0.99999999999999999999, 12345678901234567890.5]", "[1.0, 1.2345678901234567e+19]"),
        ('{"f": 1.00000000000000000001}', '{"f": 1.0}'),
        ('{"a": 1, "a": 2}', '{"a": 2}'),  # jsonb keeps the last of duplicate keys
    ],
)
def test_jsonb_compares_as_the_client_reads_it_back(source: str, stored: str) -> None:
    jsonb = SpannerType.parse("jsonb", postgresql=True)
    assert canonical(source, jsonb) == canonical(stored, jsonb, from_client=True)


def test_verify_leaves_out_the_rows_the_load_s_reject_file_lists(
    make_database: Any, tmp_path: Path
) -> None:
    """Rows Spanner refused at commit time (here: children without a parent row) are in the
    source and not in the table; given the load's reject file, verify does not expect them,
    over several flushes, and says how many it left out and what it made of the file."""
    from conftest import small_load_config

    from loader import load
    from loader.errors import ExitCode, TooManyBadRows
    from loader.verify import verify

    db = make_database(
        [
            "CREATE TABLE P (Id INT64 NOT NULL) PRIMARY KEY (Id)",
            "CREATE TABLE C (Id INT64 NOT NULL, Seq INT64 NOT NULL, V STRING(MAX)) "
            "PRIMARY KEY (Id, Seq), INTERLEAVE IN PARENT P ON DELETE CASCADE",
        ]
    )
    parents = tmp_path / "p.csv"
    parents.write_text("Id\n" + "".join(f"{i}\n" for i in range(100) if i % 7))
    children = tmp_path / "c.csv"
    rows = [f"{i % 100},{i},{'v' * (i % 50)}\n" for i in range(3000)]
    rows[10] = "3,not-a-number,x\n"  # rejected on reading: verify rejects it itself
    children.write_text("Id,Seq,V\n" + "".join(rows))
    refused = sum(1 for i in range(3000) if i != 10 and (i % 100) % 7 == 0)
    rejects = tmp_path / "rejects.jsonl"
    load(small_load_config(db, "P", [parents]), database=db)
    cfg = small_load_config(db, "C", [children], max_bad_rows=10_000, rejects=rejects)
    loaded = load(cfg, database=db)
    assert loaded.exit_code == ExitCode.REJECTED_ROWS
    assert loaded.tables[0].rows_rejected == refused + 1

    plain = verify(cfg, database=db)
    assert plain.exit_code == ExitCode.VERIFY_MISMATCH
    assert "`rejects` names it" in plain.render()
    given = verify(cfg, database=db, rejects=rejects)
    assert given.exit_code == ExitCode.OK, given.render()
    table = given.tables[0]
    assert (table.left_out, table.bad_rows) == (refused, 1)
    assert table.source_rows == table.table_rows == 3000 - 1 - refused
    assert f"C: {refused:,} source row(s) the reject file lists" in given.render()
    assert given.to_dict()["tables"][0]["rejected_rows_left_out"] == refused
    assert given.notes == []
    assert verify(cfg, database=db, rejects=rejects, load_ids=[loaded.load_id]).ok

    other = verify(cfg, database=db, rejects=rejects, load_ids=["20200101T000000Z-000000"])
    assert other.exit_code == ExitCode.VERIFY_MISMATCH
    assert other.notes == [f"no line of {rejects} has the load_id '20200101T000000Z-000000'"]
    # a bad row over the limit that the lines of a load not asked for list: that load is named
    strict = small_load_config(db, "C", [children], rejects=rejects)
    with pytest.raises(TooManyBadRows) as e:
        verify(strict, database=db, rejects=rejects, load_ids=["20200101T000000Z-000000"])
    assert f"lists this row under load_id {loaded.load_id}, which `load_ids`" in str(e.value.hint)
    # a second load's lines, and a line cut short by a crash: used, and told
    with rejects.open("a") as f:
        f.write(rejects.read_text().splitlines()[0].replace(loaded.load_id, "x") + "\n")
        f.write('{"source": "c.csv", "li')
    again = verify(cfg, database=db, rejects=rejects)
    assert again.ok
    assert [n.split(":")[0] for n in again.notes] == [
        f"{rejects} lists C rows rejected by 2 loads",
        "1 line(s) of " + str(rejects) + " are not reject records",
    ]
    missing = verify(cfg, database=db, rejects=tmp_path / "none.jsonl")
    assert not missing.ok and missing.notes == [
        f"no reject file {tmp_path / 'none.jsonl'}: no rows left out"
    ]
    # the same rows read under another name: the file's lines name a source not read
    moved = tmp_path / "moved.csv"
    moved.write_bytes(children.read_bytes())
    elsewhere = verify(
        small_load_config(db, "C", [moved], max_bad_rows=10_000), database=db, rejects=rejects
    )
    assert not elsewhere.ok
    assert any("source(s) this verify does not read" in n for n in elsewhere.notes)


def test_verify_rejects_checks_keys_and_takes_the_load_s_mode(
    make_database: Any, tmp_path: Path
) -> None:
    """A CI tryout of verify --rejects: (1) an old reject file's line for record 3 hid a good
    row that now sits there (false pass); (2) after --mode insert with repeated keys verify
    expected the last row of a key, and left it out; (3) bad rows the file lists still
    counted toward max_bad_rows; (4) API quirks."""
    import dataclasses

    from conftest import small_load_config

    from loader import load
    from loader.errors import ConfigError, ExitCode
    from loader.verify import verify

    db = make_database(
        [
            "CREATE TABLE I (Id INT64 NOT NULL, V STRING(MAX), N INT64, "
            "CONSTRAINT pos CHECK (N >= 0)) PRIMARY KEY (Id)"
        ]
    )
    src, rejects = tmp_path / "i.csv", tmp_path / "r.jsonl"
    src.write_text("Id,V,N\n1,a,1\n2,b,2\n1,c,3\n3,d,-1\n4,e,x\n5,f,5\n")
    cfg = small_load_config(db, "I", [src], mode="insert", max_bad_rows=5, rejects=rejects)
    assert load(cfg, database=db).exit_code == ExitCode.REJECTED_ROWS  # dup, CHECK, bad N
    strict = dataclasses.replace(cfg, max_bad_rows=0)
    # (2), (3): the first row of a key expected; the listed rows count toward no limit
    ok = verify(strict, database=db, rejects=rejects)
    assert ok.ok, ok.render()
    assert (ok.tables[0].left_out, ok.tables[0].bad_rows) == (1, 2)
    with pytest.raises(Exception, match="more than 0 bad rows"):  # not listed: counted
        verify(strict, database=db)
    # (1): record 4 now holds another key, which the table lacks: compared, and told
    src.write_text("Id,V,N\n1,a,1\n2,b,2\n1,c,3\n9,z,9\n4,e,x\n5,f,5\n")
    stale = verify(strict, database=db, rejects=rejects)
    assert not stale.ok and stale.tables[0].missing == [(9,)]
    assert any("names another key than the source has there now" in n for n in stale.notes)
    # a file of another table's rows says so
    other = tmp_path / "other.jsonl"
    other.write_text('{"table": "J", "source": "x.csv", "record": 1, "reason": "r"}\n')
    src.write_text("Id,V,N\n1,a,1\n2,b,2\n5,f,5\n")
    told = verify(cfg, database=db, rejects=other)
    assert told.notes == [f"{other} lists rows of J only, none of I: no rows left out"]
    # (4) one id given as a string is one id; ids without a file are refused
    one = verify(cfg, database=db, rejects=rejects, load_ids="20200101T000000Z-000000")
    assert one.notes == [f"no line of {rejects} has the load_id '20200101T000000Z-000000'"]
    with pytest.raises(ConfigError, match="`load_ids` picks lines of a reject file"):
        verify(cfg, database=db, load_ids=["x"])


def test_verify_rejects_compares_a_row_refused_because_its_key_is_there(
    make_database: Any, tmp_path: Path
) -> None:
    """A review: insert mode run twice over one file; the second run's rows are refused as
    existing, and verify --rejects then expected their keys missing (the table holds them)."""
    from conftest import small_load_config

    from loader import load
    from loader.errors import ExitCode
    from loader.verify import verify

    db = make_database(["CREATE TABLE E (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"])
    src, rejects = tmp_path / "e.csv", tmp_path / "r.jsonl"
    src.write_text("Id,V\n1,a\n2,b\n3,c\n")
    cfg = small_load_config(db, "E", [src], mode="insert", state=False, rejects=rejects)
    load(cfg, database=db)
    again = load(dataclasses_replace(cfg, max_bad_rows=10), database=db)
    assert again.exit_code == ExitCode.REJECTED_ROWS
    assert "already in table E" in rejects.read_text()
    assert verify(cfg, database=db, rejects=rejects).ok
    src.write_text("Id,V\n1,a\n2,changed\n3,c\n")  # the table's row and the source's differ
    assert verify(cfg, database=db, rejects=rejects).tables[0].different == [(2,)]


def test_verify_rejects_leaves_out_a_repeated_key_the_load_refused_in_a_later_flush(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout: insert mode over a file whose keys repeat far apart; the load, flushing
    between them, had Spanner refuse the repeats (ALREADY_EXISTS), and `verify --rejects`,
    reading the file in one flush, found them duplicates and stopped at its bad-row limit
    (exit 4): its result depended on the load's buffer size."""
    from conftest import small_load_config

    from loader import load
    from loader.errors import ExitCode
    from loader.verify import verify

    db = make_database(["CREATE TABLE E (Id INT64 NOT NULL, V STRING(MAX)) PRIMARY KEY (Id)"])
    src, rejects = tmp_path / "e.csv", tmp_path / "r.jsonl"
    rows = [f"{i},first{i}" for i in range(1, 20001)] + [f"{i},second{i}" for i in (1, 7, 19999)]
    src.write_text("Id,V\n" + "\n".join(rows) + "\n")
    cfg = small_load_config(
        db, "E", [src], mode="insert", state=False, rejects=rejects, max_bad_rows=10,
        buffer_size=64 << 10, block_size=4 << 10,
    )  # fmt: skip
    loaded = load(cfg, database=db)
    assert loaded.exit_code == ExitCode.REJECTED_ROWS
    text = rejects.read_text()  # (1 and 7 refused by Spanner, 19999 in its first's flush)
    assert text.count("already in table E") == 2 and text.count("duplicate primary key") == 1
    strict = dataclasses_replace(cfg, max_bad_rows=0, buffer_size=64 << 20)
    checked = verify(strict, database=db, rejects=rejects)
    assert checked.ok and checked.tables[0].bad_rows == 3, checked.render()
    # the table holding another row of that key is still a difference
    rows[6] = "7,changed"
    src.write_text("Id,V\n" + "\n".join(rows) + "\n")
    assert verify(strict, database=db, rejects=rejects).tables[0].different == [(7,)]


def dataclasses_replace(obj: Any, **kw: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **kw)


def test_sources_of_other_column_sets_compare_the_columns_all_of_them_write(
    make_database: Any, tmp_path: Path
) -> None:
    """A tryout: `verify a.csv b.csv` where b.csv has no Active column failed with KeyError
    (a traceback's text, exit 1), and `verify b.csv a.csv` compared only b.csv's columns,
    saying nothing of Active."""
    from conftest import small_load_config

    from loader import load
    from loader.verify import verify

    db = make_database(
        ["CREATE TABLE T (Id INT64 NOT NULL, Name STRING(10), Active BOOL) PRIMARY KEY (Id)"]
    )
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("Id,Name,Active\n1,a,true\n2,b,false\n")
    b.write_text("Id,Name\n3,c\n")
    load(small_load_config(db, "T", [a, b]), database=db)
    for order in ([a, b], [b, a]):
        report = verify(small_load_config(db, "T", order), database=db)
        assert report.ok, report.render()
        assert report.tables[0].skipped_columns == ["Active"]
        assert report.notes == [
            "T: column(s) Active not compared: some of its sources do not write them (their "
            "rows keep what the table held there)"
        ]
    a.write_text("Id,Name,Active\n1,z,true\n2,b,false\n")
    assert not verify(small_load_config(db, "T", [b, a]), database=db).ok


def test_a_table_whose_sources_hold_no_rows_verifies(make_database: Any, tmp_path: Path) -> None:
    """A review: the column check of sources with several column sets took the first flush's
    columns before asking whether there was one: a header-only source failed (IndexError)."""
    from conftest import small_load_config

    from loader import load
    from loader.verify import verify

    db = make_database(["CREATE TABLE E (Id INT64 NOT NULL, S STRING(MAX)) PRIMARY KEY (Id)"])
    src = tmp_path / "e.csv"
    src.write_text("Id,S\n")
    cfg = small_load_config(db, "E", [src])
    load(cfg, database=db)
    report = verify(cfg, database=db)
    assert report.ok and report.tables[0].source_rows == report.tables[0].table_rows == 0
