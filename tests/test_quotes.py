"""A stray quote that closes on a later line (loader/parse/quotes.py): the scans agree, a
well-formed file never trips the watch, and a load refuses such a source at its lines."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pytest
from conftest import native_parts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_parse import K, load

from loader import native
from loader.errors import SourceError
from loader.parse import Dialect
from loader.parse.quotes import QuoteWatch, Scan, scan_numpy, scan_reference, watches

Scanner = Callable[[bytes, int, int, int, int, int, int], Scan]


def _compiled(
    data: bytes, quote: int, delim: int, state: int, span_nl: int, escape: int, doubled: int
) -> Scan:
    return native.module().quote_scan(data, quote, delim, state, span_nl, escape, doubled)


def _chunks(
    scanner: Scanner, data: bytes, cuts: list[int], escape: int = -1, doubled: int = 1
) -> list[Scan]:
    state, span_nl, out, prev = 0, 0, [], 0
    for cut in [*cuts, len(data)]:
        chunk, prev = data[prev:cut], cut
        if not chunk:
            continue
        res = scanner(chunk, ord('"'), ord(","), state, span_nl, escape, doubled)
        out.append(res)
        state, span_nl = res[0], res[1]
        if res[5] >= 0:
            break
    return out


@pytest.fixture(params=["native", "numpy"])
def parts(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from native_parts(request.param)


_BYTES = st.one_of(
    st.lists(st.sampled_from(b'ab",\n\r\\'), max_size=300),
    st.lists(st.sampled_from(b'aaaaaab,,\n"'), max_size=300),  # quotes rarer: 64-byte steps
).map(bytes)


def _csv_text(rows: list[list[str]], crlf: bool, flips: list[tuple[int, int]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n" if crlf else "\n").writerows(rows)
    data = bytearray(out.getvalue().encode())
    for at, byte in flips:  # a few bytes changed: stray quotes, lost delimiters
        if data:
            data[at % len(data)] = byte
    return bytes(data)


_CSV = st.builds(
    _csv_text,
    st.lists(st.lists(st.text(alphabet='ab ",\n\r', max_size=12), min_size=3, max_size=3)),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.sampled_from(b'"a,\n')), max_size=2),
)


@given(
    st.one_of(_BYTES, _CSV),
    st.data(),
    st.sampled_from([-1, ord("\\")]),
    st.sampled_from([1, 0]),
)
@settings(max_examples=800, deadline=None)
def test_the_scans_agree_whatever_the_bytes_and_chunks(
    data: bytes, draw: Any, escape: int, doubled: int
) -> None:
    """The compiled scan (64 bytes a step where the quotes alternate) and the numpy one equal
    the reference, chunk by chunk, whatever the bytes and wherever the chunks end, with an
    escape character or none, quotes doubled or not."""
    cuts = sorted(
        draw.draw(st.lists(st.integers(1, max(len(data) - 1, 1)), max_size=4, unique=True))
    )
    want = _chunks(scan_reference, data, cuts, escape, doubled)
    assert _chunks(scan_numpy, data, cuts, escape, doubled) == want
    if native.built():
        assert _chunks(_compiled, data, cuts, escape, doubled) == want


def _watched(data: bytes, read: int, dialect: Optional[Dialect] = None) -> QuoteWatch:
    watch = QuoteWatch(io.BytesIO(data), dialect or Dialect(), first_line=1)
    while watch.read(read):
        pass
    return watch


_VALUES = st.text(alphabet='ab ",\n\r\u00e9', max_size=12)


@given(st.lists(st.lists(_VALUES, min_size=2, max_size=2), max_size=8), st.integers(1, 40))
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_well_formed_file_never_trips_the_watch(
    parts: str, rows: list[list[str]], read: int
) -> None:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([["A", "B"], *rows])
    assert _watched(out.getvalue().encode(), read).stray is None
    # with a backslash as the escape character, quotes escaped rather than doubled
    out = io.StringIO()
    csv.writer(out, lineterminator="\n", escapechar="\\", doublequote=False).writerows(rows)
    escaped = Dialect(escape_char="\\", double_quote=False)
    assert _watched(out.getvalue().encode(), read, escaped).stray is None


@pytest.mark.parametrize("read", [1, 2, 3, 5, 1 << 20])
def test_the_watch_finds_the_lines_in_any_reads(parts: str, read: int) -> None:
    data = b'Id,V\n1,a\n2,"b\n3,c\n4,"d\n5,e\n'
    stray = _watched(data, read).stray
    assert stray is not None and (stray.opened, stray.closed) == (3, 5)
    assert stray.after == "d"


def test_quoting_with_or_without_an_escape_character_is_watched() -> None:
    assert watches(Dialect()) and watches(Dialect(escape_char="\\", double_quote=False))
    assert not watches(Dialect(quote_char=None))
    assert not watches(Dialect(backslash_escapes=True, quote_char=None))
    assert not watches(Dialect(newlines_in_values=False))


@pytest.mark.parametrize(
    "data,where",
    [
        # a tryout, with --escape '\\': a Windows path ending in a backslash escaped its
        # closing quote, and rows 2 and 3 became part of row 1's value
        (b'id,V\n1,"C:\\dir\\"\n2,b\n3,"c"\n4,d\n', "opened at line 2 closes at line 4"),
        (b'id,V\n1,"abc\n2,def\n3,g"hi\n4,j\n', "opened at line 2 closes at line 4"),
    ],
)
def test_a_stray_quote_with_an_escape_character_is_refused(
    parts: str, data: bytes, where: str
) -> None:
    with pytest.raises(SourceError, match=f"a quote {where} with text after it"):
        load(data, table=K, dialect=Dialect(escape_char="\\"))


@pytest.mark.parametrize(
    "data,where",
    [
        # a tryout's reproduction: rows 3 and 4 were read into row 2's V, without a reject
        (b'Id,V\n1,a\n2,"b\n3,c\n4,"d\n5,e\n', "opened at line 3 closes at line 5"),
        (b'Id,V\r\n1,"a\r\n2,b"c\r\n', "opened at line 2 closes at line 3"),
        (b'\xef\xbb\xbf"Id","V"\n1,"x\n\n2,"y\n', "opened at line 2 closes at line 4"),
        # a CR alone ends a line, as the reader takes it (a review: lines 1 and 1)
        (b'Id,V\r1,a\r2,"b\r3,c\r4,"d\r5,e\r', "opened at line 3 closes at line 5"),
    ],
)
def test_a_stray_quote_closing_on_a_later_line_refuses_the_source(
    parts: str, data: bytes, where: str
) -> None:
    with pytest.raises(SourceError) as e:
        load(data, table=K)
    assert f"src: a quote {where} with text after it" in str(e.value)
    assert "double it" in str(e.value.hint)


def test_the_lines_count_skipped_rows_and_the_header() -> None:
    data = b'junk\nmore junk\nId,V\n1,a\n2,"b\n3,c"d\n'
    with pytest.raises(SourceError, match="opened at line 5 closes at line 6"):
        load(data, table=K, dialect=Dialect(skip_rows=2))


def test_text_after_a_closing_quote_on_one_line_is_read_as_before(parts: str) -> None:
    """``"a"b`` reads as ``ab``, as Arrow reads it: sloppy, but no line is joined."""
    rows, rejects, _, _ = load(b'Id,V\n1,"a"b\n2,"x\ny"\n', table=K)
    assert [r["V"] for r in rows] == ["ab", "x\ny"] and not rejects


def test_a_stray_quote_is_named_before_the_record_it_makes_too_large() -> None:
    """A review: the stray quote read on into a record larger than a parse block, and the
    refusal said to raise the block size, though the quote was known by then."""
    body = b"".join(b"%d,v%d\n" % (i, i) for i in range(3, 1200))  # 10 KiB, read ahead
    data = b'Id,V\n1,a\n2,"b\n' + body + b'3000,"d\n3001,e\n'
    with pytest.raises(SourceError, match="a quote opened at line 3 closes at line 1,201 with"):
        load(data, table=K, block_size=4096)


def test_a_quote_never_closed_in_the_header_says_so() -> None:
    """A tryout: `id,"s` as the header was 'empty file, expected a header'."""
    with pytest.raises(SourceError, match=r"a quote opened at line 1 \(the header\) is never"):
        load(b'Id,"V\n1,a\n2,b\n', table=K)


def test_a_stray_quote_in_the_header_closing_later_says_so() -> None:
    """A review: `Id,"V` as the header, the quote closed on the next line, was said to make
    "one field of one row"; it makes one column name of the two lines."""
    for data, dialect, line in (
        (b'Id,"V\n1,a" x\n2,b\n', Dialect(), 1),
        (b'junk\nId,"V\n1,a" x\n2,b\n', Dialect(skip_rows=1), 2),
    ):
        with pytest.raises(SourceError) as e:
            load(data, table=K, dialect=dialect)
        assert f"opened at line {line} (the header) closes at line {line + 1}" in str(e.value)
        assert str(e.value).endswith("would be one column name")
    with pytest.raises(SourceError, match=r"at line 2 closes at line 3 .* one field of one row"):
        load(b'Id,V\n1,"a\n2,b" x\n', table=K)


def test_the_hint_doubles_the_quote_the_files_use() -> None:
    with pytest.raises(SourceError) as e:
        load(
            b"Id;V\n1;a\n2;'b\n3;c\n4;'d\n", table=K, dialect=Dialect(delimiter=";", quote_char="'")
        )
    assert "double it ('')" in str(e.value.hint) and "`restart=True`" in str(e.value.hint)


def test_mysql_null_read_with_a_backslash_escape_is_refused() -> None:
    """A tryout: `--escape '\\'` on a MySQL export (FIELDS ENCLOSED BY '"' ESCAPED BY '\\')
    loaded each \\N as the text N, without a word."""
    with pytest.raises(SourceError, match=r"line 3 holds \\N as a field, MySQL's NULL") as e:
        load(b'Id,V\n1,"a"\n2,\\N\n', table=K, dialect=Dialect(escape_char="\\"))
    assert "`dialect='mysql'`" in str(e.value.hint)
    with pytest.raises(SourceError, match=r"line 3 holds \\N as a field"):  # no last line end
        load(b'Id,V\n1,"a"\n2,\\N', table=K, dialect=Dialect(escape_char="\\"))
    rows, _, _, _ = load(b'Id,V\n1,a\\Nb\n2,"\\\\N"\n', table=K, dialect=Dialect(escape_char="\\"))
    assert [r["V"] for r in rows] == ["aNb", "\\N"]  # not a field of its own: data


class _Reads:
    """A stream handing out the given reads, then the end."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = list(parts)

    def read(self, n: int = -1) -> bytes:
        return self.parts.pop(0) if self.parts else b""


@pytest.mark.parametrize(
    "reads,line",
    [
        ([b'Id,V\n1,"a"\n2,\\N', b"\n3,z\n"], 3),  # ends one read: the next byte decides
        ([b'Id,V\n1,"a"\n2,\\', b"N\n3,z\n"], 3),  # split inside it
        ([b'Id,V\n1,"a"\n2,', b"\\N\n"], 3),  # starts a read
        ([b'Id,V\n1,"a"\n2,\\N'], 3),  # the input's last field, no line end after it
        ([b'Id,V\n1,"a"\n2,\\N', b"abc\n"], None),  # \Nabc: no field of its own
    ],
)
def test_a_null_field_is_seen_across_reads(reads: list[bytes], line: Optional[int]) -> None:
    """A review: a field \\N at either end of one read was passed over (it had been taken for
    a field at a read's end even when `abc` followed in the next), so the last field of a file
    without a final line end loaded as the text N without a word."""
    w = QuoteWatch(_Reads(reads), Dialect(escape_char="\\"))
    while w.read(1 << 16):
        pass
    assert w.escaped_null == line
    tabs = [r.replace(b",", b"\t").replace(b'"a"', b"a") for r in reads]
    w = QuoteWatch(_Reads(tabs), Dialect(delimiter="\t"))
    while w.read(1 << 16):
        pass
    assert w.text_null == line
