"""With MySQL's backslash escapes \\N is NULL whatever other NULL markers are given: a
`--null-marker` added for MySQL's zero dates loaded \\N as the text 'N'."""

from __future__ import annotations

import io

from click.testing import CliRunner

from loader.cli import cli
from loader.parse import dialect_from_preset, read_blocks
from loader.schema import Column, KeyPart, TableSchema
from loader.types import SpannerType

TABLE = TableSchema(
    "Vals",
    (
        Column("Id", SpannerType.parse("INT64"), nullable=False),
        Column("S", SpannerType.parse("STRING(MAX)")),
        Column("D", SpannerType.parse("DATE")),
    ),
    (KeyPart("Id"),),
)


def test_backslash_n_stays_null_beside_another_marker() -> None:
    dialect = dialect_from_preset("mysql", columns=("Id", "S", "D"), null_markers=("0000-00-00",))
    assert set(dialect.null_markers) == {"0000-00-00", "\\N"}
    data = b"1\t\\N\t0000-00-00\n2\t\\\\N\t2024-01-01\n3\tN\t\\N\n"
    rows = []
    for block in read_blocks(io.BytesIO(data), "src", TABLE, dialect):
        rows += block.strings.to_pylist()
    assert [(r["S"], r["D"]) for r in rows] == [
        (None, None),
        ("\\N", "2024-01-01"),  # an escaped backslash, then N: the text \N
        ("N", None),
    ]


def test_the_help_says_so() -> None:
    out = CliRunner().invoke(cli, ["load", "--help"], terminal_width=200).output
    assert "stays NULL beside any marker" in " ".join(out.split())
