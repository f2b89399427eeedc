"""loader/_native.c, the compiled row encoder: the same bytes as the numpy path of
loader.encode for any table, and a clear ValueError (never a crash) for a malformed column.

tests/test_encode.py runs all of its checks (the client's own encoding, the protobuf round trip,
the emulator) against both encoders; this file holds the two side by side.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from conftest import native_parts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_encode import column, tables

from loader import native as loader_native
from loader.encode import encode_rows
from loader.types import SpannerType

T = SpannerType.parse


@pytest.fixture(autouse=True, scope="module")
def built() -> Iterator[str]:
    """Skipped without the extension (failed where SPANNER_LOADER_REQUIRE_NATIVE=1)."""
    yield from native_parts("native")


native: Any = loader_native._module


def both(cols: list[Any], types: list[SpannerType], **kw: Any) -> tuple[pa.Array, pa.Array]:
    return encode_rows(cols, types, native=True, **kw), encode_rows(cols, types, native=False, **kw)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(0, 3))
def test_same_bytes_as_the_numpy_path(table: tuple[list[str], list[list[Any]]], skip: int) -> None:
    type_texts, rows = table
    padded = rows[-1:] * skip + rows  # sliced away: buffers with an offset
    cols = [column([r[j] for r in padded], t).slice(skip) for j, t in enumerate(type_texts)]
    ours, reference = both(cols, [T(t) for t in type_texts])
    assert ours.type == reference.type
    assert ours.to_pylist() == reference.to_pylist()


@pytest.mark.slow
def test_many_rows_with_nulls_and_extremes() -> None:
    rng = np.random.default_rng(11)
    n = 20_000
    ints = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    ints[:4] = [0, -1, 2**63 - 1, -(2**63)]
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
    floats[:5] = [np.nan, np.inf, -np.inf, -0.0, 5e-324]
    days = rng.integers(-719162, 2932896, n, endpoint=True).astype(np.int32)
    lo = rng.integers(0, 2**63, n, dtype=np.uint64)
    hi = rng.integers(-(2**40), 2**40, n, dtype=np.int64)  # magnitudes beyond 2**64 too
    raw = np.empty((n, 2), dtype="<u8")
    raw[:, 0], raw[:, 1] = lo, hi.view(np.uint64)
    mask = rng.random(n) < 0.2
    validity = pa.array(~mask).buffers()[1]
    numeric = pa.Array.from_buffers(
        pa.decimal128(38, 9), n, [validity, pa.py_buffer(raw.tobytes())]
    )
    with np.errstate(over="ignore"):  # the large ones become +-inf: wanted
        singles = floats.astype(np.float32)
    words = rng.choice(["", "a", "é😀", "x" * 200, "y" * 20_000], n)
    cols = [
        pa.array(ints, mask=mask),
        pa.array(floats, mask=mask[::-1].copy()),
        pa.array(singles),
        pa.array(days, pa.date32(), mask=mask),
        numeric,
        pa.array(words, pa.string(), mask=mask),
        pa.array(rng.random(n) < 0.5, mask=mask),
        pa.array([w.encode() for w in words], pa.binary(), mask=mask),
    ]
    types = [T(t) for t in ("INT64", "FLOAT64", "FLOAT32", "DATE", "NUMERIC")]
    types += [T("STRING(MAX)"), T("BOOL"), T("BYTES(MAX)")]
    for start, length in ((0, n), (7, 1000), (n - 3, 3)):
        part = [c.slice(start, length) for c in cols]
        ours, reference = both(part, types)
        assert ours.equals(reference)


def test_numeric_text_lengths_at_every_digit_boundary() -> None:
    # the writer puts all nine fraction digits down and leaves the trailing zeros off the
    # length: every count of fraction zeros, and integer parts either side of each power of
    # ten and of 2**64 / 10**9
    from decimal import Decimal

    fractions = [0] + [d * 10**z for z in range(9) for d in (1, 7, 123)]
    fractions = [f for f in fractions if f < 10**9]
    integers = [0, 1, 2**64 // 10**9, 2**64 // 10**9 + 1, 10**29 - 1]
    integers += [p + e for k in range(1, 29) for p in (10**k,) for e in (-1, 0)]
    values = [
        sign * (Decimal(i) + Decimal(f).scaleb(-9))
        for i in integers
        for f in fractions
        for sign in (1, -1)
        if Decimal(i) + Decimal(f).scaleb(-9) < Decimal(10) ** 29
    ]
    col = pa.array(values + [None], pa.decimal128(38, 9))
    ours, reference = both([col], [T("NUMERIC")])
    assert ours.equals(reference)


def test_row_lengths_across_varint_sizes() -> None:
    # each row's length is written before its cells; the encoder guesses its byte count from
    # the row before and moves the cells over when wrong: lengths crossing 127/128 and
    # 16383/16384 both ways, and runs of each
    # (string payloads of 118/119 and 16,372/16,373 bytes put the length at 127/128 and
    # 16,383/16,384 with the one-digit INT64 beside them)
    sizes = [0, 118, 119, 118, 16_372, 16_373, 16_372, 119, 300_000, 0]
    col = pa.array(["x" * k for k in sizes], pa.string())
    ints = pa.array(range(len(sizes)), pa.int64())
    ours, reference = both([col, ints], [T("STRING(MAX)"), T("INT64")])
    assert ours.equals(reference)
    assert {len(v) for v in ours.to_pylist()} >= {1 + 1 + 127, 1 + 2 + 128, 1 + 2 + 16_383}
    assert 1 + 3 + 16_384 in {len(v) for v in ours.to_pylist()}


def test_rows_at_their_longest() -> None:
    # every cell at the longest text of its type: the buffer is sized by those bounds
    from decimal import Decimal

    n = 5000
    numeric = Decimal("-99999999999999999999999999999.999999999")  # 29 + 9 digits, signed
    cols = [
        pa.array([-(2**63)] * n, pa.int64()),
        pa.array([float("-inf")] * n, pa.float64()),
        pa.array([float("-inf")] * n, pa.float32()),
        pa.array([numeric] * n, pa.decimal128(38, 9)),
        pa.array([2932896] * n, pa.date32()),
        pa.array([True] * n),
        pa.array(["\u00e9" * 40] * n, pa.string()),
    ]
    types = [T("INT64"), T("FLOAT64"), T("FLOAT32"), T("NUMERIC"), T("DATE"), T("BOOL")]
    types += [T("STRING(MAX)")]
    ours, reference = both(cols, types)
    assert ours.equals(reference)


def test_large_string_columns() -> None:
    values = ["a", None, "é" * 300, ""]
    ours, reference = both([pa.array(values, pa.large_string())], [T("STRING(MAX)")])
    assert ours.equals(reference)


def test_int64_text_is_not_needed() -> None:
    ints = pa.array([5, None, -12], pa.int64())
    text = pa.array(["5", None, "-12"])
    ours, reference = both([ints], [T("INT64")], int_texts=[text])
    assert ours.equals(reference)


def test_date_out_of_range_is_the_same_error() -> None:
    for days in (-719163, 2932897):
        with pytest.raises(ValueError, match="DATE outside"):
            encode_rows([pa.array([0, days], pa.date32())], [T("DATE")], native=True)
    # a NULL slot may hold any day
    masked = pa.array([0, 2932897], pa.date32(), mask=np.array([False, True]))
    ours, reference = both([masked], [T("DATE")])
    assert ours.equals(reference)


def _int_descriptor(values: list[int], n: int) -> tuple[Any, ...]:
    return (2, None, pa.array(values, pa.int64()).buffers()[1], None, 0, 0)


@pytest.mark.parametrize(
    ("descriptor", "n", "message"),
    [
        (_int_descriptor([1, 2], 2), 3, "data buffer holds 16 bytes, 24 needed"),
        ((99, None, b"x", None, 0, 0), 1, "unknown kind"),
        ((2, None, b"12345678", None, -1, 0), 1, "negative offset"),
        ((1, None, b"abc", None, 0, 4), 1, "without offsets"),
        ((1, None, b"abc", np.array([0, 2, 1], np.int32).tobytes(), 0, 4), 2, "decrease"),
        ((1, None, b"abc", np.array([0, 4], np.int32).tobytes(), 0, 4), 1, "data buffer"),
        ((1, None, b"abc", np.array([0, 3], np.int32).tobytes(), 0, 4), 2, "offsets buffer"),
        ((0, b"\xff", b"abc", np.array([0, 3], np.int32).tobytes(), 0, 4), 1, "cannot be NULL"),
        ((5, b"", b"\x01", None, 0, 0), 1, "validity buffer"),
    ],
)
def test_malformed_columns_raise(descriptor: tuple[Any, ...], n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        native.encode_rows([descriptor], n, 0x1A, pa.allocate_buffer)


def test_bad_arguments_raise() -> None:
    good = _int_descriptor([1], 1)
    with pytest.raises(ValueError, match="one byte"):
        native.encode_rows([good], 1, 0x1FF, pa.allocate_buffer)
    with pytest.raises(ValueError, match="negative row count"):
        native.encode_rows([good], -1, 0x1A, pa.allocate_buffer)
    with pytest.raises(ValueError, match="needed"):  # an allocator handing back too little
        native.encode_rows([good], 1, 0x1A, lambda size: bytearray(1))
    with pytest.raises(BufferError):  # a read-only "buffer"
        native.encode_rows([good], 1, 0x1A, lambda size: bytes(size))
    with pytest.raises(TypeError):
        native.encode_rows([(2, None)], 1, 0x1A, pa.allocate_buffer)


def test_the_stub_names_every_function_and_constant_of_the_module() -> None:
    import ast
    from pathlib import Path

    stub = ast.parse((Path(loader_native.__file__).parent / "_native.pyi").read_text())
    named = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)} | {
        n.target.id
        for n in stub.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    public = {n for n in dir(native) if not n.startswith("_")}
    assert named == public


def test_one_kind_table_the_modules_and_every_kind_the_encoder_names_is_in_it() -> None:
    from loader.encode import _NATIVE_KINDS

    assert set(native.KINDS) == {
        "CELLS",
        "STRING",
        "INT64",
        "FLOAT64",
        "FLOAT32",
        "BOOL",
        "NUMERIC",
        "DATE",
        "BYTES",
    }
    assert set(_NATIVE_KINDS.values()) | {"CELLS"} == set(native.KINDS)
    assert len(set(native.KINDS.values())) == len(native.KINDS)


def test_built_for_the_stable_abi_with_native_128_bit_integers_here() -> None:
    """The build CI tests (scripts/native_check.sh covers the portable fallback)."""
    import sysconfig

    assert (0 if sysconfig.get_config_var("Py_GIL_DISABLED") else 1) == native.LIMITED_API
    assert native.INT128 == 1
    assert "in use" in loader_native.status()
