"""PostgreSQL's COPY text format (``--dialect postgres-text``): a tryout loaded such a file
with ``--dialect mysql`` and got form feeds and vertical tabs as the letters f and v, without
a reject; with ``--escape`` its ``\\N`` became the text N."""

from __future__ import annotations

import dataclasses
import io

import pytest
from test_parse import _table, load

from loader.errors import ConfigError, SourceError
from loader.parse import Dialect, dialect_from_preset, read_blocks

PG = dialect_from_preset("postgres-text")
T = _table("Id INT64; V STRING(MAX); B BYTES(MAX); A ARRAY<STRING(MAX)>")


def test_what_copy_writes_reads_back() -> None:
    data = (
        b'1\tff\\fvt\\v cr\\r end\\n\\ttab \\\\ back\t\\\\x0102\t{"a b",NULL}\n'
        b"2\t\t\\N\t\\N\n"
        b"3\t\\\\N\t\\\\x\t{}\n"
    )
    rows, rejects, _, _ = load(data, T, PG)
    assert not rejects
    assert rows == [
        {"Id": 1, "V": "ff\fvt\v cr\r end\n\ttab \\ back", "B": b"\x01\x02", "A": ["a b", None]},
        {"Id": 2, "V": "", "B": None, "A": None},
        {"Id": 3, "V": "\\N", "B": b"", "A": []},
    ]


def test_octal_and_hex_escapes_are_bytes_and_a_delimiter_made_so_stays_data() -> None:
    data = b"1\t\\101\\x42\\303\\251\\011x\\012y\\134z\\x5cN\n2\t\\377\n"
    rows, rejects, _, _ = load(data, _table("Id INT64; V STRING(MAX)"), PG)
    assert [r["V"] for r in rows] == ["AB\u00e9\tx\ny\\z\\N"]
    assert [(r[1], r[3][:28]) for r in rejects] == [(2, "invalid UTF-8 in column V (a")]


@pytest.mark.parametrize("piece", [1, 2, 3, 5])
def test_escapes_cut_by_short_reads(piece: int) -> None:
    """A read may end inside ``\\303`` or ``\\x4``: the rest is in the next read."""
    # (a review: after an escaped backslash, \\0\\146 was cut as \\0\\14 + 6)
    data = b"1\t\\303\\251\\x41\\x4\\\\x\\t\\12\n2\t\\\\\\101\\\\0\\146\\146\n" * 3

    class Trickle(io.BytesIO):
        def read(self, n: int = -1) -> bytes:  # a pipe: short reads
            return super().read(piece)

    table = _table("Id INT64; V STRING(MAX)")
    want = ["\u00e9A\x04\\x\t\n", "\\A\\0ff"] * 3
    for stream in (io.BytesIO(data), Trickle(data)):
        got = [
            v
            for block in read_blocks(stream, "src", table, PG.with_columns(("Id", "V")))
            for v in block.strings.column("V").to_pylist()
        ]
        assert got == want


def test_a_carriage_return_alone_ends_a_line_as_postgresql_reads_it() -> None:
    rows, rejects, _, _ = load(b"1\ta\r2\tb\r\n", _table("Id INT64; V STRING(MAX)"), PG)
    assert [r["V"] for r in rows] == ["a", "b"] and not rejects


def test_a_null_marker_holding_the_escape_character_is_refused() -> None:
    with pytest.raises(ConfigError, match="never matches") as e:
        Dialect(delimiter="\t", escape_char="\\", null_markers=("\\N",))
    assert "`dialect='postgres-text'`" in str(e.value.hint)


def test_escapes_that_spell_a_private_use_marker_stay_that_character() -> None:
    """A review: U+E005 and U+E006 written as escapes came out as a backslash or U+E001 (the
    reader's own markers), depending on the other values of the block."""
    table = _table("Id INT64; V STRING(MAX)")
    rows, _, _, _ = load(b"1\t\\xee\\x80\\x85\n2\ta\\\\b\n", table, PG)
    assert [r["V"] for r in rows] == ["\ue005", "a\\b"]
    rows, _, _, _ = load(b"1\t\\\\\\356\\200\\206a\n", table, PG)
    assert [r["V"] for r in rows] == ["\\\ue006a"]


def test_escaped_bytes_are_of_the_files_encoding() -> None:
    """PostgreSQL reads an octal escape's byte in the file's encoding (a tryout's latin-1
    file: \\351 was rejected as invalid)."""
    latin1 = dataclasses.replace(PG, encoding="latin-1")
    rows, rejects, _, _ = load(b"1\tcaf\\351\n", _table("Id INT64; V STRING(MAX)"), latin1)
    assert [r["V"] for r in rows] == ["caf\u00e9"] and not rejects


@pytest.mark.parametrize("piece", [1, 2, 3, 1 << 20])
def test_the_end_of_data_line_ends_the_rows(piece: int) -> None:
    """A tryout: COPY's `\\.` line (a pg_dump's block ends with it) loaded as a row `.` into
    a one-column table, and as a reject elsewhere."""

    class Trickle(io.BytesIO):
        def read(self, n: int = -1) -> bytes:
            return super().read(piece)

    one = _table("V STRING(MAX)", not_null=())
    for data, want in (
        (b"apple\r\nbanana\n\\.\n\n", ["apple", "banana"]),
        (b"\\.x\n\\.", ["\\.x"[1:]]),  # \\.x is a value (the text .x); \\. at the very end
        (b"b\\\n\\.\n\\.\n", ["b\n."]),  # after an escaped line end: data
    ):
        got = [
            v
            for block in read_blocks(Trickle(data), "src", one, PG.with_columns(("V",)))
            for v in block.strings.column("V").to_pylist()
        ]
        assert got == want, data
    with pytest.raises(SourceError, match="src: more data after PostgreSQL's end-of-data line"):
        list(read_blocks(Trickle(b"a\n\\.\nb\n"), "src", one, PG.with_columns(("V",))))
    # the end's line is named (a tryout: which of a dump's \. lines?), a header, an escaped
    # line end and CR-only ends counted as physical lines
    for data, line in (
        (b"V\na\nb\\\nc\n\\.\nd\n", 5),
        (b"V\ra\rb\\\rc\r\\.\rd\r", 5),
        (b"V\r\na\r\n\r\n\\.\r\nd\r\n", 4),
    ):
        with pytest.raises(SourceError, match=rf"line \(line {line}, a \\\. alone\)"):
            list(read_blocks(Trickle(data), "src", one, dataclasses.replace(PG, header=True)))
