"""Found by a new user's tryout of schemas and values nobody designed for (session 15): each
test is one thing that broke, run through the real command against the emulator."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import read_table
from test_cli import run


def _ddl(tmp_path: Path, text: str) -> str:
    ddl = tmp_path / "schema.sql"
    ddl.write_text(text, encoding="utf-8")
    return str(ddl)


def _db(name: str) -> object:
    from google.cloud import spanner

    return spanner.Client(project="test-project").instance("test-instance").database(name)


def test_columns_named_like_the_loaders_own_verify(spanner_emulator: str, tmp_path: Path) -> None:
    """A table with columns __source, __record and __row: verify stopped on "Field
    '__source' exists 2 times" (the loader's provenance columns had those names)."""
    ddl = _ddl(
        tmp_path,
        "CREATE TABLE Weird (Id INT64 NOT NULL, __row INT64, __source STRING(MAX), "
        "__record INT64, __line INT64) PRIMARY KEY (Id);\n",
    )
    src = tmp_path / "w.csv"
    src.write_text("Id,__row,__source,__record,__line\n1,100,src,7,3\n2,200,s2,8,4\n")
    args = [str(src), "--table", "Weird", "--emulator", "--database", "tryweird"]
    assert run("load", *args, "--ddl", ddl, "-q").returncode == 0
    p = run("verify", *args)
    assert p.returncode == 0, (p.stdout, p.stderr)
    cols = ["Id", "__row", "__source", "__record", "__line"]
    assert read_table(_db("tryweird"), "Weird", cols) == [
        (1, 100, "src", 7, 3),
        (2, 200, "s2", 8, 4),
    ]


def test_json_is_checked_and_compared_as_spanner_keeps_it(
    spanner_emulator: str, tmp_path: Path
) -> None:
    """Duplicate keys: Spanner keeps the first; ARRAY<JSON> elements kept the last, and verify
    said DIFFERS for a JSON column loaded right. A number Spanner refuses (the emulator rounds
    it) loaded with exit 0, then verify said DIFFERS."""
    ddl = _ddl(
        tmp_path, "CREATE TABLE J (Id INT64 NOT NULL, V JSON, A ARRAY<JSON>) PRIMARY KEY (Id);\n"
    )
    src = tmp_path / "j.csv"
    src.write_text(
        'Id,V,A\n1,"{""a"":1,""a"":2}","[{""a"":1,""a"":2}]"\n'
        '2,"{""n"":123456789012345678901234567890}",\n3,"{""n"":10000}",\n'
    )
    args = [str(src), "--table", "J", "--emulator", "--database", "tryjsondup"]
    rejects = tmp_path / "r.jsonl"
    p = run("load", *args, "--ddl", ddl, "-q", "--max-bad-rows", "1", "--rejects", str(rejects))
    assert p.returncode == 3, p.stderr
    (reject,) = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert reject["line"] == 3 and reject["reason"].startswith(
        "JSON number '123456789012345678901234567890' has more digits than a FLOAT64 holds"
    )
    p = run("verify", *args, "--max-bad-rows", "1")
    assert p.returncode == 0, (p.stdout, p.stderr)
    (a,) = [r[0] for r in read_table(_db("tryjsondup"), "J", ["A"]) if r[0] is not None]
    assert [json.loads(json.dumps(x)) for x in a] == [{"a": 1}]
