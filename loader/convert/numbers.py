"""INT64, FLOAT64 / FLOAT32, NUMERIC and BOOL text -> typed columns."""

from __future__ import annotations

import decimal
import re
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..types import SpannerType
from .common import (
    _bisect,
    _decimal,
    _digits_around_point,
    _Errors,
    _huge_exponent,
    _not_a,
    _np_bool,
    _null_out,
    _plain_native,
    _show,
)
from .options import ConvertOptions

_INT64_TEXT = r"^[+-]?[0-9]+$"
"""The one INT64 form: an optional sign, then decimal digits (ASCII)."""
_HEX_TEXT = re.compile(r"[+-]?0[xX][0-9a-fA-F]*")


def _why_malformed(v: str) -> str:
    """What a malformed number's text does wrong, when it is one of the common slips."""
    if any(c.isspace() for c in v):
        return " (spaces are not allowed)"
    if _HEX_TEXT.fullmatch(v):
        return " (decimal digits only, no hex)"
    return ""


def _convert_int64(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    plain = _plain_native(arr, "plain_int64s", pa.int64())
    if plain is not None:
        return plain, {}
    # The shape first: Arrow's cast also takes "0x.." hex and refuses a "+" sign, and the rule
    # (README "Values") is one for every path: [+-]?digits, within int64.
    shaped = pc.match_substring_regex(arr, _INT64_TEXT)
    malformed = np.flatnonzero(_np_bool(pc.and_(pc.is_valid(arr), pc.invert(shaped))))
    errors: _Errors = {}
    for i in malformed.tolist():
        v = arr[i].as_py()
        errors[i] = f"not an INT64: {_show(v)}{_why_malformed(v)}"
    digits = pc.replace_substring_regex(_null_out(arr, malformed), r"^\+", "")
    out, out_of_range = _bisect(
        digits, lambda a: pc.cast(a, pa.int64()), lambda v: "INT64 out of range"
    )
    errors.update({i: f"INT64 out of range: {_show(arr[i].as_py())}" for i in out_of_range})
    return out, errors


def _convert_float(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    target = pa.float64() if t.code == "FLOAT64" else pa.float32()
    # Arrow's parser takes "nan"/"inf"/"infinity" in any case, like Spanner.
    out, errors = _bisect(arr, lambda a: pc.cast(a, target), _not_a(t.code))
    inf = _np_bool(pc.is_inf(out))
    if inf.any():
        # A finite text that overflowed to infinity would silently change the value.
        spelled = _np_bool(pc.match_substring_regex(arr, r"(?i)^[+-]?inf(inity)?$"))
        over = np.flatnonzero(inf & ~spelled)
        if len(over):
            errors.update(
                {int(i): f"{t.code} out of range: {_show(arr[int(i)].as_py())}" for i in over}
            )
            out = _null_out(out, over)
    zeros = np.flatnonzero(_np_bool(pc.equal(out, 0)))
    if len(zeros):
        # A text with a non-zero digit that underflowed to zero (1e-400; 1e-46 in FLOAT32)
        # would silently change the value too. Only an exponent or 40 characters and more
        # can write so small a number (FLOAT32's least is 1.4e-45): the other zeros are zeros.
        texts = arr.take(pa.array(zeros))
        maybe = _np_bool(
            pc.or_(
                pc.match_substring(texts, "e", ignore_case=True),
                pc.greater_equal(pc.binary_length(texts), 40),
            )
        )
        suspects = zeros[maybe]
        written_zero = _np_bool(
            pc.match_substring_regex(
                arr.take(pa.array(suspects)), r"^[+-]?(?:0+\.?0*|\.0+)(?:[eE][+-]?[0-9]+)?$"
            )
        )
        under = suspects[~written_zero]
        if len(under):
            errors.update(
                {
                    int(i): f"{t.code} out of range: {_show(arr[int(i)].as_py())} (too small: "
                    f"it would be 0)"
                    for i in under
                }
            )
            out = _null_out(out, under)
    return out, errors


def _numeric_reason(v: str) -> str:
    m = re.fullmatch(r"[+-]?([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,18}))?", v)
    if not m or not (m.group(1) or m.group(2)):
        return f"not a NUMERIC: {_show(v)}{_why_malformed(v)}"
    # Fraction digits of the value, exponent included ("1e-10" has 10, "1.5e1" has 0).
    digits = (m.group(1) or "") + (m.group(2) or "")
    exponent = int(m.group(3) or 0) - len(m.group(2) or "")
    if -(exponent + len(digits) - len(digits.rstrip("0"))) > 9:
        return f"NUMERIC would round: {_show(v)} has more than 9 fraction digits"
    return f"NUMERIC out of range: {_show(v)} has more than 29 integer digits"


def _convert_numeric(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    if t.numeric_text:
        return _convert_pg_numeric(arr, t, o)
    # plain "-?D+(.D{1,9})?" text, all of it: the compiled parser, exact; else the cast
    plain = _plain_native(arr, "plain_numerics", pa.decimal128(38, 9))
    if plain is not None:
        return plain, {}
    # Arrow's string -> decimal128(38, 9) cast refuses exactly what NUMERIC refuses: lost
    # fraction digits ("would cause data loss") and more than 38 - 9 integer digits; but it
    # parses the text at its own scale first, so zeros past the ninth fraction digit (which
    # lose nothing) go first: 29 integer digits and ten fraction digits are 39, over 38.
    exact = pc.replace_substring_regex(arr, r"^([+-]?[0-9]*\.[0-9]{9})0+$", r"\1")
    out, errors = _bisect(exact, lambda a: pc.cast(a, pa.decimal128(38, 9)), _numeric_reason)
    # ... but not all of them: some texts of 30 to 38 digits overflow the 128 bits as the cast
    # scales them, and come out as another number, no error (pyarrow 26: 31 ones give
    # 90264010348295720720987288815.695365632). Such a text is 1e29 or more (below, the
    # scaled value fits): over 29 integer digits, or an exponent that makes it so.
    wide = _np_bool(pc.match_substring_regex(arr, r"^[+-]?0*[1-9][0-9]{29}"))
    exp = _np_bool(pc.match_substring(arr, "e", ignore_case=True))
    over = [i for i in np.flatnonzero(wide & ~exp).tolist() if i not in errors]
    over += _too_large(arr, [i for i in np.flatnonzero(exp).tolist() if i not in errors])
    # and an exponent that takes a value below the ninth fraction digit comes out as 0, no
    # error ("1e-48"; "1e-10" is refused): a zero whose digits before the exponent are not
    if exp.any():
        zero = _np_bool(pc.equal(out, pa.scalar(0, out.type)))
        digits = _np_bool(pc.match_substring_regex(arr, r"^[^eE]*[1-9]"))
        over += [i for i in np.flatnonzero(exp & zero & digits).tolist() if i not in errors]
    if over:
        errors.update({i: "" for i in over})
        out = _null_out(out, np.asarray(sorted(over), dtype=np.int64))
    return out, {i: _numeric_reason(arr[i].as_py()) for i in errors}


def _too_large(arr: pa.Array, rows: list[int]) -> list[int]:
    """Of ``rows`` of ``arr`` (NUMERIC text with an exponent that the cast took), those whose
    value is 1e29 or more: told by the text as a double, columnwise; the few within a hair of
    1e29, where a double cannot tell, exactly."""
    if not rows:
        return []
    texts = arr.take(pa.array(rows, pa.int64()))
    try:
        size = np.abs(pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a form the double cast refuses
        size = np.full(len(rows), 1e29)  # each one checked exactly
    limit = decimal.Decimal(10) ** 29
    return [
        i
        for i, v, text in zip(rows, size, texts.to_pylist())
        if v >= 1e29 * (1 + 1e-9)
        or (v > 1e29 * (1 - 1e-9) and (_decimal(text) or decimal.Decimal(0)).copy_abs() >= limit)
    ]


def _bool_words(o: ConvertOptions) -> Optional[bytes]:
    """The words as loader/_native.c ``bool_values`` takes them (``1true\\0 0false\\0 ...``);
    None when one is not short ASCII text (then Python's and Arrow's lowercasing may differ)."""
    pairs = [("1", w) for w in o.true_words] + [("0", w) for w in o.false_words]
    if not all(w.isascii() and 0 < len(w) <= 15 and "\0" not in w for _, w in pairs):
        return None
    return b"".join((flag + w.lower()).encode() + b"\0" for flag, w in pairs)


def _bool_native(arr: pa.Array, o: ConvertOptions) -> Optional[pa.Array]:
    """The compiled match (loader/_native.c ``bool_values``) of a column whose every value is
    one of the words in ASCII, in any case: the same values as :func:`_convert_bool`'s Arrow
    path; None (that path) for any other column."""
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    words = _bool_words(o)
    if words is None:
        return None
    data = native.module().bool_values(
        native.string_descriptor(arr), len(arr), pa.allocate_buffer, words
    )
    if data is None:
        return None
    bitmap = native.same_validity(arr)
    return pa.Array.from_buffers(pa.bool_(), len(arr), [bitmap, data], null_count=arr.null_count)


def _convert_bool(arr: pa.Array, t: SpannerType, o: ConvertOptions) -> tuple[pa.Array, _Errors]:
    fast = _bool_native(arr, o)
    if fast is not None:
        return fast, {}
    lower = pc.utf8_lower(arr)
    is_true = pc.is_in(lower, value_set=pa.array([w.lower() for w in o.true_words], pa.string()))
    is_false = pc.is_in(lower, value_set=pa.array([w.lower() for w in o.false_words], pa.string()))
    neither = _np_bool(pc.and_(pc.is_valid(arr), pc.invert(pc.or_(is_true, is_false))))
    drop = neither | ~_np_bool(pc.is_valid(arr))
    out = pc.if_else(pa.array(drop), pa.scalar(None, pa.bool_()), is_true)
    errors = {int(i): f"not a BOOL: {_show(arr[int(i)].as_py())}" for i in np.flatnonzero(neither)}
    return out, errors


PG_NUMERIC_DIGITS = (131_072, 16_383)
"""The integer and fraction digits a PostgreSQL-dialect ``numeric`` holds ("Work with NUMERIC
data"): no Arrow decimal does, so the loader keeps its text."""
_PLAIN_DECIMAL = r"^-?[0-9]+(\.[0-9]+)?$"


def _convert_pg_numeric(
    arr: pa.Array, t: SpannerType, o: ConvertOptions
) -> tuple[pa.Array, _Errors]:
    """A PostgreSQL ``numeric`` column: plain decimal text as it is (no longer than either
    limit can be passed); every other form NUMERIC takes (``+1.5``, ``.5``, ``1e3``) written
    out plainly, and ``NaN``, per distinct value; the rest, and values over the limits,
    rejects."""
    plain = pc.and_(
        pc.match_substring_regex(arr, _PLAIN_DECIMAL),
        pc.less_equal(pc.utf8_length(arr), PG_NUMERIC_DIGITS[1]),
    )
    other = _np_bool(pc.and_(pc.is_valid(arr), pc.invert(plain.fill_null(True))))
    if not other.any():
        return arr, {}
    rows = np.flatnonzero(other)
    encoded = pc.dictionary_encode(arr.take(pa.array(rows)))
    written: list[Optional[str]] = []
    why: dict[int, str] = {}
    for code, v in enumerate(encoded.dictionary.to_pylist()):
        text, reason = _pg_numeric_text(v)
        written.append(text)
        if reason is not None:
            why[code] = reason
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    values = pa.array([written[c] for c in codes], pa.string())
    out = pc.replace_with_mask(arr, pa.array(other), values)
    errors = {int(rows[i]): why[int(c)] for i, c in enumerate(codes) if int(c) in why}
    return (_null_out(out, sorted(errors)), errors) if errors else (out, {})


def _pg_numeric_text(v: str) -> tuple[Optional[str], Optional[str]]:
    """One PostgreSQL ``numeric`` value's plain text, or why it is not one (``NaN``, in any
    case, is one: Spanner's PostgreSQL numeric takes it, as PostgreSQL's does)."""
    if v.lower() == "nan":
        return "NaN", None
    m = re.fullmatch(r"[+-]?([0-9]*)(?:\.([0-9]*))?(?:[eE][+-]?[0-9]+)?", v)
    if not m or not (m.group(1) or m.group(2)):
        return None, f"not a NUMERIC: {_show(v)}{_why_malformed(v)}"
    d = _decimal(v)
    if d is None:  # an exponent of 19 digits or more
        zero, positive = _huge_exponent(v)
        if zero and positive:
            return "0", None
        before, after = (PG_NUMERIC_DIGITS[0] + 1, 0) if positive else (0, PG_NUMERIC_DIGITS[1] + 1)
        zero = False
    else:
        before, after = _digits_around_point(d)
        zero = d.is_zero()
    if after > PG_NUMERIC_DIGITS[1]:
        return None, (
            f"NUMERIC would round: {_show(v)} has more than {PG_NUMERIC_DIGITS[1]:,} fraction "
            "digits (PostgreSQL's numeric)"
        )
    if not zero and before > PG_NUMERIC_DIGITS[0]:
        return None, (
            f"NUMERIC out of range: {_show(v)} has more than {PG_NUMERIC_DIGITS[0]:,} integer "
            "digits (PostgreSQL's numeric)"
        )
    assert d is not None  # refused above when its exponent is too big for it
    return format(d, "f"), None
