"""loader.encode: our columnar wire bytes against google-cloud-spanner's own per-value encoder,
a Hypothesis round trip through protobuf, and commits to the emulator."""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import native_parts
from google.cloud.spanner_v1 import Mutation
from google.cloud.spanner_v1._helpers import _make_list_value_pbs
from google.cloud.spanner_v1.batch import _make_write_pb
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader.commit import SpannerCommitter
from loader.encode import (
    encode_rows,
    write_mutation,
)
from loader.types import COMMIT_TIMESTAMP, SpannerType, arrow_type

T = SpannerType.parse


@pytest.fixture(autouse=True, scope="module", params=["numpy", "native"])
def encoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs against both encoders: the numpy path and loader/_native.c."""
    yield from native_parts(request.param)


MAX_NUMERIC = Decimal("99999999999999999999999999999.999999999")
MIN_NUMERIC = Decimal("-99999999999999999999999999999.999999999")  # not -MAX: 28-digit context


def column(values: list[Any], type_text: str) -> pa.Array:
    return pa.array(values, arrow_type(T(type_text)))


def list_values(rows: pa.Array) -> list[bytes]:
    """Strip each row's ``1a <len>`` to get the ListValue bytes."""
    out = []
    for raw in rows.to_pylist():
        assert raw[0] == 0x1A
        pos, length, shift = 1, 0, 0
        while True:
            b = raw[pos]
            length |= (b & 0x7F) << shift
            shift += 7
            pos += 1
            if b < 0x80:
                break
        assert pos + length == len(raw)
        out.append(raw[pos:])
    return out


def client_bytes(rows: list[list[Any]]) -> list[bytes]:
    return [pb.SerializeToString() for pb in _make_list_value_pbs(rows)]


def b64(values: list[Any]) -> list[Any]:
    """What the client expects for BYTES: base64 text, already encoded by the caller."""
    if values is None:
        return None
    return [None if v is None else base64.b64encode(v) for v in values]


LONG = "x" * 200 + "é" * 8000 + "😀" * 100  # multi-byte varint lengths (> 16383 bytes)

# (Spanner type, values for Arrow, the same values as the client wants them); the client's
# encoding of the latter must be byte-identical to ours.
IDENTICAL: list[tuple[str, list[Any], str | None]] = [
    ("INT64", [0, 1, -1, 127, 128, 2**63 - 1, -(2**63), None], None),
    (
        "FLOAT64",
        [
            0.0,
            -0.0,
            1.5,
            -2.25,
            5e-324,
            2.2250738585072014e-308,
            1.7976931348623157e308,
            math.nan,
            math.inf,
            -math.inf,
            1e-300,
            None,
        ],
        None,
    ),
    (
        "FLOAT32",
        [0.0, -0.0, 0.1, 3.4028234663852886e38, 1e-45, math.nan, math.inf, -math.inf, None],
        "as_stored",
    ),
    ("BOOL", [True, False, None], None),
    (
        "STRING(MAX)",
        [
            "",
            "a",
            "é",
            "😀 emoji",
            "x" * 127,
            "x" * 128,
            "y" * 16383,
            "y" * 16384,
            LONG,
            "z" * 2_100_000,
            None,
        ],
        None,
    ),
    ("JSON", ['{"a": [1, 2.5, null]}', "[]", '"é"', None], None),
    (
        "TIMESTAMP",
        [
            "0001-01-01T00:00:00.000000000Z",
            "9999-12-31T23:59:59.999999999Z",
            "2024-02-29T12:34:56.123456789Z",
            COMMIT_TIMESTAMP,
            None,
        ],
        None,
    ),
    (
        "DATE",
        [
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
            dt.date(1970, 1, 1),
            dt.date(1969, 12, 31),
            dt.date(2000, 2, 29),
            dt.date(1900, 3, 1),
            dt.date(99, 7, 4),
            None,
        ],
        None,
    ),
    (
        "BYTES(MAX)",
        [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", bytes(range(256)), b"\xff" * 100_000, None],
        "b64",
    ),
    (
        "NUMERIC",
        [
            Decimal("1.5"),
            Decimal("-1.5"),
            Decimal("0"),
            Decimal("100"),
            Decimal("0.123456789"),
            Decimal("-0.1"),
            Decimal("12345678901234567890"),
            Decimal("18446744073.709551616"),
            Decimal("-18446744073.709551617"),
            MAX_NUMERIC,
            MIN_NUMERIC,
            Decimal("123456789012345678.5"),
            None,
        ],
        None,
    ),
    ("ARRAY<INT64>", [[1, None, -3], [], None, [2**63 - 1]], None),
    ("ARRAY<FLOAT64>", [[1.5, math.nan, -math.inf, None, -0.0], [], None], None),
    ("ARRAY<FLOAT32>", [[0.1, None, math.inf], [], None], "as_stored"),
    ("ARRAY<BOOL>", [[True, False, None], [], None], None),
    ("ARRAY<STRING(MAX)>", [["a", "", None, LONG], [], None, [None]], None),
    ("ARRAY<JSON>", [['{"k": 1}', None], [], None], None),
    ("ARRAY<TIMESTAMP>", [["2024-02-29T12:34:56.123456789Z", None], [], None], None),
    ("ARRAY<DATE>", [[dt.date(1, 1, 1), None, dt.date(9999, 12, 31)], [], None], None),
    ("ARRAY<NUMERIC>", [[Decimal("1.25"), None, Decimal("-7")], [], None], None),
    ("ARRAY<BYTES(MAX)>", [[b"a", b"", None, b"xyz!"], [], None], "b64"),
]


@pytest.mark.parametrize(
    ("type_text", "values", "client_form"), IDENTICAL, ids=[c[0] for c in IDENTICAL]
)
def test_byte_identical_to_the_client(type_text: str, values: list[Any], client_form: Any) -> None:
    t = T(type_text)
    if client_form == "b64":
        expected_values = [b64(v) if t.code == "ARRAY" else b64([v])[0] for v in values]
    elif client_form == "as_stored":  # FLOAT32: the float32 value, widened to a Python float
        expected_values = column(values, type_text).to_pylist()
    else:
        expected_values = values
    ours = list_values(encode_rows([column(values, type_text)], [t]))
    assert ours == client_bytes([[v] for v in expected_values])


def test_numeric_text_is_plain_and_shortest() -> None:
    """Where the client's str(Decimal) depends on the exponent, we send the plain short form."""
    values = [
        Decimal("1.500000000"),
        Decimal("100.000000000"),
        Decimal("0E-9"),
        Decimal("1E-9"),
        Decimal("-1E-9"),
        Decimal("1E-7"),
        Decimal("1E+20"),
        Decimal("-0.5"),
    ]
    ours = list_values(encode_rows([column(values, "NUMERIC")], [T("NUMERIC")]))
    texts = [struct_pb2.ListValue.FromString(b).values[0].string_value for b in ours]
    assert texts == [
        "1.5",
        "100",
        "0",
        "0.000000001",
        "-0.000000001",
        "0.0000001",
        "100000000000000000000",
        "-0.5",
    ]
    # Same values as the client's text (which would be e.g. "1E-9" or "1.500000000").
    client = [
        struct_pb2.ListValue.FromString(b).values[0].string_value
        for b in client_bytes([[v] for v in values])
    ]
    assert [Decimal(x) for x in texts] == [Decimal(x) for x in client]


def test_timestamp_same_instant_as_the_clients_datetime_form() -> None:
    from google.api_core.datetime_helpers import DatetimeWithNanoseconds

    canonical = "2024-02-29T12:34:56.123456789Z"
    ours = list_values(encode_rows([column([canonical], "TIMESTAMP")], [T("TIMESTAMP")]))
    text = struct_pb2.ListValue.FromString(ours[0]).values[0].string_value
    value = DatetimeWithNanoseconds(
        2024, 2, 29, 12, 34, 56, nanosecond=123456789, tzinfo=dt.timezone.utc
    )
    client = struct_pb2.ListValue.FromString(client_bytes([[value]])[0]).values[0].string_value
    assert DatetimeWithNanoseconds.from_rfc3339(text) == DatetimeWithNanoseconds.from_rfc3339(
        client
    )


ALL_TYPES = [
    "INT64",
    "FLOAT64",
    "FLOAT32",
    "BOOL",
    "NUMERIC",
    "STRING(MAX)",
    "BYTES(MAX)",
    "DATE",
    "TIMESTAMP",
    "JSON",
    "ARRAY<INT64>",
    "ARRAY<STRING(MAX)>",
    "ARRAY<BYTES(MAX)>",
    "ARRAY<DATE>",
]


def sample_rows() -> list[list[Any]]:
    return [
        [
            1,
            1.5,
            0.25,
            True,
            Decimal("12.5"),
            "héllo",
            b"\x00\x01\x02\x03",
            dt.date(2024, 1, 2),
            "2024-01-02T03:04:05.000000006Z",
            '{"a":1}',
            [1, None],
            ["x", None],
            [b"ab", None],
            [dt.date(1, 1, 1)],
        ],
        [None] * len(ALL_TYPES),
        [
            -(2**63),
            math.nan,
            -math.inf,
            False,
            Decimal("-0.5"),
            "",
            b"",
            dt.date(1, 1, 1),
            COMMIT_TIMESTAMP,
            "null",
            [],
            [],
            [],
            [],
        ],
    ]


def arrow_columns(rows: list[list[Any]], types: list[str]) -> list[pa.Array]:
    return [column([r[j] for r in rows], t) for j, t in enumerate(types)]


def client_rows(rows: list[list[Any]], types: list[str]) -> list[list[Any]]:
    out = []
    for row in rows:
        conv = []
        for v, t in zip(row, types):
            if "BYTES" in t:
                v = b64(v) if t.startswith("ARRAY") else b64([v])[0]
            conv.append(v)
        out.append(conv)
    return out


def test_whole_rows_and_mutations_match_the_client() -> None:
    rows = sample_rows()
    types = [T(t) for t in ALL_TYPES]
    names = [f"c{j}" for j in range(len(ALL_TYPES))]
    encoded = encode_rows(arrow_columns(rows, ALL_TYPES), types)
    expected_rows = client_rows(rows, ALL_TYPES)
    assert list_values(encoded) == client_bytes(expected_rows)
    for op in ("insert", "update", "insert_or_update", "replace"):
        ours = write_mutation(op, "Tbl", names, encoded)
        theirs = Mutation(**{op: _make_write_pb("Tbl", names, expected_rows)})
        assert ours == Mutation.serialize(theirs)
        assert Mutation.deserialize(ours) == theirs
    # A slice of the encoded rows is the mutation of those rows only.
    ours = write_mutation("insert", "Tbl", names, encoded.slice(1, 2))
    assert ours == Mutation.serialize(
        Mutation(insert=_make_write_pb("Tbl", names, expected_rows[1:]))
    )
    with pytest.raises(ValueError, match="unknown write op"):
        write_mutation("upsert", "Tbl", names, encoded)


def test_sliced_chunked_and_cast_inputs() -> None:
    rows = sample_rows() * 3
    types = [T(t) for t in ALL_TYPES]
    full = arrow_columns([rows[-1], *rows, rows[0]], ALL_TYPES)
    sliced = [c.slice(1, len(rows)) for c in full]
    chunked = [pa.chunked_array([c.slice(0, 4), c.slice(4)]) for c in sliced]
    expected = client_bytes(client_rows(rows, ALL_TYPES))
    assert list_values(encode_rows(sliced, types)) == expected
    assert list_values(encode_rows(chunked, types)) == expected
    # Not the loader's Arrow type: cast first.
    small_ints = pa.array([1, None, 3], pa.int32())
    assert list_values(encode_rows([small_ints], [T("INT64")])) == client_bytes([[1], [None], [3]])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.none()
        | st.integers(-(2**63), 2**63 - 1)
        | st.sampled_from([0, -1, 2**63 - 1, -(2**63)]),
        min_size=1,
        max_size=40,
    )
)
def test_int64_text_given_encodes_as_the_integers(values: list[Any]) -> None:
    """The converter's kept source text (``str(int)``) stands in for the int-to-text cast."""
    ints = pa.array(values, pa.int64())
    text = pa.array([None if v is None else str(v) for v in values], pa.string())
    names = pa.array(["a"] * len(values))
    types = [T("INT64"), T("STRING(MAX)")]
    expected = encode_rows([ints, names], types)
    assert encode_rows([ints, names], types, int_texts=[text, None]).equals(expected)
    assert list_values(expected) == client_bytes([[v, "a"] for v in values])


def test_int64_text_that_does_not_match_the_column_is_refused() -> None:
    ints = pa.array([1, None, 3], pa.int64())
    with pytest.raises(ValueError, match="does not match"):
        encode_rows([ints], [T("INT64")], int_texts=[pa.array(["1", "2", "3"])])
    with pytest.raises(ValueError, match="int_texts"):
        encode_rows([ints], [T("INT64")], int_texts=[])


def test_varying_varint_widths_in_one_batch() -> None:
    """Rows whose cells straddle the 1/2/3-byte varint boundaries in the same batch."""
    lengths = [0, 1, 120, 125, 126, 127, 128, 129, 200, 16380, 16383, 16384, 20000, 2**21 + 3]
    values = ["é" * (n // 2) + "a" * (n % 2) for n in lengths]
    numbers = list(range(len(values)))
    cols = [pa.array(numbers), pa.array(values), pa.array(values[::-1])]
    types = [T("INT64"), T("STRING(MAX)"), T("STRING(MAX)")]
    expected = client_bytes([[i, a, b] for i, a, b in zip(numbers, values, values[::-1])])
    assert list_values(encode_rows(cols, types)) == expected


def test_empty_inputs_and_errors() -> None:
    assert len(encode_rows([pa.array([], pa.int64())], [T("INT64")])) == 0
    assert encode_rows([], []).to_pylist() == []
    assert write_mutation(
        "insert", "T", ["A"], encode_rows([pa.array([], pa.int64())], [T("INT64")])
    ) == Mutation.serialize(Mutation(insert=_make_write_pb("T", ["A"], [])))
    with pytest.raises(ValueError, match="differ in length"):
        encode_rows([pa.array([1]), pa.array([1, 2])], [T("INT64"), T("INT64")])
    with pytest.raises(ValueError, match="DATE outside"):
        encode_rows([pa.array([-719163], pa.date32())], [T("DATE")])


# ---------------------------------------------------------------------------------------------
# Property: random typed tables -> encode -> parse with protobuf -> decode -> the input.

_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "INT64": st.integers(-(2**63), 2**63 - 1),
    "FLOAT64": st.floats(),
    "FLOAT32": st.floats(width=32),
    "BOOL": st.booleans(),
    "NUMERIC": st.decimals(
        min_value=MIN_NUMERIC,
        max_value=MAX_NUMERIC,
        places=9,
        allow_nan=False,
        allow_infinity=False,
    ),
    "STRING(MAX)": st.text(max_size=300),
    "JSON": st.dictionaries(st.text(max_size=5), st.integers()).map(json.dumps),
    "BYTES(MAX)": st.binary(max_size=300),
    "DATE": st.dates(),
    "TIMESTAMP": st.builds(
        lambda d, ns: f"{d.year:04d}-{d:%m-%dT%H:%M:%S}.{ns:09d}Z",
        st.datetimes(),
        st.integers(0, 999_999_999),
    ),
}


@st.composite
def tables(draw: Callable[..., Any]) -> tuple[list[str], list[list[Any]]]:
    names = sorted(_SCALARS)
    types = draw(
        st.lists(st.sampled_from(names + [f"ARRAY<{n}>" for n in names]), min_size=1, max_size=5)
    )
    cells = []
    for t in types:
        elem = _SCALARS[t[6:-1]] if t.startswith("ARRAY<") else _SCALARS[t]
        value = st.lists(st.none() | elem, max_size=5) if t.startswith("ARRAY<") else elem
        cells.append(st.none() | value)
    rows = draw(st.lists(st.tuples(*cells).map(list), min_size=1, max_size=30))
    return types, rows


def decode(v: struct_pb2.Value, t: SpannerType) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "null_value":
        assert v.null_value == 0
        return None
    if t.code == "ARRAY":
        assert kind == "list_value" and t.element is not None
        return [decode(x, t.element) for x in v.list_value.values]
    if t.code == "BOOL":
        assert kind == "bool_value"
        return v.bool_value
    if t.code in ("FLOAT64", "FLOAT32"):
        if kind == "string_value":
            assert v.string_value in ("NaN", "Infinity", "-Infinity")
            return float(v.string_value)
        assert kind == "number_value"
        return v.number_value
    assert kind == "string_value"
    s = v.string_value
    if t.code == "INT64":
        assert s == str(int(s))
        return int(s)
    if t.code == "NUMERIC":
        assert "E" not in s and ("." not in s or not s.endswith(("0", "."))), s
        return Decimal(s)
    if t.code == "BYTES":
        return base64.b64decode(s, validate=True)
    if t.code == "DATE":
        return dt.date.fromisoformat(s)
    return s


def same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(0, 3))
def test_roundtrip_through_protobuf(table: tuple[list[str], list[list[Any]]], skip: int) -> None:
    type_texts, rows = table
    types = [T(t) for t in type_texts]
    # Pad with rows we slice away, so buffers with offsets are exercised too.
    padded = rows[-1:] * skip + rows
    cols = [column([r[j] for r in padded], t).slice(skip) for j, t in enumerate(type_texts)]
    expected = [[c[i].as_py() for c in cols] for i in range(len(rows))]  # FLOAT32 rounded
    encoded = encode_rows(cols, types)
    names = [f"c{j}" for j in range(len(types))]
    mutation = Mutation.pb().FromString(write_mutation("replace", "T", names, encoded))
    write = mutation.replace
    assert write.table == "T" and list(write.columns) == names
    decoded = [[decode(v, t) for v, t in zip(lv.values, types)] for lv in write.values]
    assert same(decoded, expected)
    assert pc.sum(pc.binary_length(encoded)).as_py() == sum(
        lv.ByteSize() + 1 + len(_varint(lv.ByteSize())) for lv in write.values
    )


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_large_batches_use_the_whole_machine_word_paths() -> None:
    """Many rows with and without NULLs: the fast paths agree with the client too."""
    rng = np.random.default_rng(7)
    n = 5000
    ints = rng.integers(-(10**12), 10**12, n)
    floats = rng.standard_normal(n) * 1e6
    days = rng.integers(-719162, 2932896, n).astype(np.int32)
    mask = rng.random(n) < 0.1
    cols = [
        pa.array(ints, mask=mask),
        pa.array(floats),
        pa.array(days, pa.date32()),
        pa.array(ints, mask=mask).cast(pa.decimal128(38, 9)),
    ]
    types = [T("INT64"), T("FLOAT64"), T("DATE"), T("NUMERIC")]
    py = [c.to_pylist() for c in cols]
    expected = client_bytes(
        [
            [py[0][i], py[1][i], py[2][i], None if py[3][i] is None else py[3][i].normalize()]
            for i in range(n)
        ]
    )
    got = list_values(encode_rows(cols, types))
    # NUMERIC integers: our text is "123", the client's for Decimal("1.23E+2") is "1.23E+2".
    mismatched = [i for i in range(n) if got[i] != expected[i]]
    for i in mismatched:
        ours = struct_pb2.ListValue.FromString(got[i]).values
        theirs = struct_pb2.ListValue.FromString(expected[i]).values
        assert ours[:3] == theirs[:3]
        assert Decimal(ours[3].string_value) == Decimal(theirs[3].string_value)


# ---------------------------------------------------------------------------------------------
# The emulator accepts what we send and stores exactly the values.

EMULATOR_DDL = """
CREATE TABLE AllTypes (
  Id INT64 NOT NULL,
  I INT64, F FLOAT64, F32 FLOAT32, B BOOL, N NUMERIC, S STRING(MAX), Byt BYTES(MAX), D DATE,
  T TIMESTAMP, J JSON,
  TC TIMESTAMP OPTIONS (allow_commit_timestamp = true),
  AI ARRAY<INT64>, AF ARRAY<FLOAT64>, AF32 ARRAY<FLOAT32>, AB ARRAY<BOOL>, AN ARRAY<NUMERIC>,
  ASTR ARRAY<STRING(MAX)>, ABY ARRAY<BYTES(MAX)>, AD ARRAY<DATE>, ATs ARRAY<TIMESTAMP>,
  AJ ARRAY<JSON>
) PRIMARY KEY (Id)
"""
EMULATOR_COLUMNS = [
    ("Id", "INT64"),
    ("I", "INT64"),
    ("F", "FLOAT64"),
    ("F32", "FLOAT32"),
    ("B", "BOOL"),
    ("N", "NUMERIC"),
    ("S", "STRING(MAX)"),
    ("Byt", "BYTES(MAX)"),
    ("D", "DATE"),
    ("T", "TIMESTAMP"),
    ("J", "JSON"),
    ("TC", "TIMESTAMP"),
    ("AI", "ARRAY<INT64>"),
    ("AF", "ARRAY<FLOAT64>"),
    ("AF32", "ARRAY<FLOAT32>"),
    ("AB", "ARRAY<BOOL>"),
    ("AN", "ARRAY<NUMERIC>"),
    ("ASTR", "ARRAY<STRING(MAX)>"),
    ("ABY", "ARRAY<BYTES(MAX)>"),
    ("AD", "ARRAY<DATE>"),
    ("ATs", "ARRAY<TIMESTAMP>"),
    ("AJ", "ARRAY<JSON>"),
]
EMULATOR_ROWS: list[list[Any]] = [
    [
        1,
        2**63 - 1,
        1.5,
        0.25,
        True,
        MAX_NUMERIC,
        "héllo 😀",
        bytes(range(256)),
        dt.date(1, 1, 1),
        "0001-01-01T00:00:00.000000001Z",
        '{"a": [1, 2]}',
        COMMIT_TIMESTAMP,
        [1, None, -1],
        [math.nan, math.inf, -math.inf, -0.0, None],
        [0.5, None],
        [True, None],
        [Decimal("-0.000000001"), None],
        ["", None, "x" * 20000],
        [b"", b"ab", None],
        [dt.date(9999, 12, 31), None],
        ["9999-12-31T23:59:59.999999999Z", None],
        ['"s"', None],
    ],
    [2] + [None] * (len(EMULATOR_COLUMNS) - 1),
    [
        3,
        -(2**63),
        math.nan,
        math.inf,
        False,
        Decimal("-12345.6789"),
        "",
        b"",
        dt.date(2024, 2, 29),
        "2024-02-29T12:34:56.123456789Z",
        "[]",
        None,
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
        [],
    ],
]


def _normalise(value: Any, type_text: str) -> Any:
    """Client-read values in the form our input uses."""
    if value is None:
        return None
    if type_text.startswith("ARRAY<"):
        return [_normalise(v, type_text[6:-1]) for v in value]
    if type_text == "TIMESTAMP":  # DatetimeWithNanoseconds (its rfc3339() drops year zeros)
        assert value.utcoffset() == dt.timedelta(0)
        return f"{value.year:04d}-{value:%m-%dT%H:%M:%S}.{value.nanosecond:09d}Z"
    if type_text.startswith("BYTES"):  # the client returns the base64 text as bytes
        return base64.b64decode(value, validate=True)
    if type_text == "JSON":
        return json.loads(value.serialize() if hasattr(value, "serialize") else value)
    return value


def test_emulator_round_trip(make_database: Callable[..., Any]) -> None:
    database = make_database([EMULATOR_DDL])
    names = [c for c, _ in EMULATOR_COLUMNS]
    type_texts = [t for _, t in EMULATOR_COLUMNS]
    encoded = encode_rows(arrow_columns(EMULATOR_ROWS, type_texts), [T(t) for t in type_texts])
    committer = SpannerCommitter(database)
    committer.commit(
        [
            write_mutation("insert", "AllTypes", names, encoded.slice(0, 2)),
            write_mutation("insert_or_update", "AllTypes", names, encoded.slice(2)),
        ]
    )
    with database.snapshot() as snap:
        got = [
            list(r)
            for r in snap.execute_sql("SELECT " + ", ".join(names) + " FROM AllTypes ORDER BY Id")
        ]
    assert len(got) == len(EMULATOR_ROWS)
    commit_ts = got[0][names.index("TC")]
    assert commit_ts is not None
    for row_in, row_out in zip(EMULATOR_ROWS, got):
        for name, t, a, b in zip(names, type_texts, row_in, row_out):
            if name == "TC" and a == COMMIT_TIMESTAMP:
                continue
            if t == "JSON" or t == "ARRAY<JSON>":
                a = (
                    None
                    if a is None
                    else (
                        json.loads(a)
                        if t == "JSON"
                        else [None if x is None else json.loads(x) for x in a]
                    )
                )
            if t == "FLOAT32" or t == "ARRAY<FLOAT32>":
                a = column([a], t).to_pylist()[0]  # rounded to float32, as stored
            assert same(_normalise(b, t), a), (name, a, b)


def test_null_slots_holding_bytes_are_ignored() -> None:
    """Arrow allows a NULL string slot to span data; it must not leak into the payload."""
    validity = pa.array([True, False, True]).buffers()[1]
    offsets = pa.array([0, 1, 4, 5], pa.int32()).buffers()[1]
    strings = pa.Array.from_buffers(pa.string(), 3, [validity, offsets, pa.py_buffer(b"abcde")])
    binary = strings.view(pa.binary())
    expected = client_bytes([["a"], [None], ["e"]])
    assert list_values(encode_rows([strings], [T("STRING(MAX)")])) == expected
    assert list_values(encode_rows([binary], [T("BYTES(MAX)")])) == client_bytes(
        [[base64.b64encode(b"a")], [None], [base64.b64encode(b"e")]]
    )


def test_without_the_compiled_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without a C compiler: the numpy path, and a clear error if asked for more."""
    from loader import native

    monkeypatch.setattr(native, "_module", None)
    assert not native.available()
    rows = encode_rows([pa.array([1, None])], [T("INT64")])
    assert list_values(rows) == client_bytes([[1], [None]])
    with pytest.raises(RuntimeError, match="not built"):
        encode_rows([pa.array([1])], [T("INT64")], native=True)


def test_a_postgresql_numeric_is_sent_as_the_text_it_holds() -> None:
    """A PostgreSQL numeric, kept as its plain text: the same string_value as GoogleSQL's
    NUMERIC sends for the same value (and digits no NUMERIC(38, 9) holds), also as ARRAY."""
    pg = T("numeric", postgresql=True)
    texts = ["1.5", "-0.000000001", "100", "1.1234567891", "9" * 60, None]
    ours = list_values(encode_rows([pa.array(texts, pa.string())], [pg]))
    sent = [struct_pb2.ListValue.FromString(b).values[0] for b in ours]
    assert [v.string_value for v in sent[:-1]] == texts[:-1]
    assert sent[-1].WhichOneof("kind") == "null_value"
    google = list_values(
        encode_rows([column([Decimal(t) for t in texts[:3]], "NUMERIC")], [T("NUMERIC")])
    )
    assert ours[:3] == google
    arr = T("numeric[]", postgresql=True)
    cells = pa.array([["1.5", None, "1.1234567891"], None], pa.list_(pa.string()))
    (first, second) = [
        struct_pb2.ListValue.FromString(b).values[0]
        for b in list_values(encode_rows([cells], [arr]))
    ]
    assert [v.string_value for v in first.list_value.values] == ["1.5", "", "1.1234567891"]
    assert first.list_value.values[1].WhichOneof("kind") == "null_value"
    assert second.WhichOneof("kind") == "null_value"
