"""What every type's converter shares: reasons' wording, NULLing rows, finding the values a
whole-column kernel refuses (:func:`_bisect`), and the compiled plain-form parsers."""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import native
from ..bad_values import failing_positions
from ..types import value_offsets

# -- helpers -----------------------------------------------------------------------------------

_Errors = dict[int, str]
"""Row index -> human reason, for one column."""


def _show(value: Optional[str], limit: int = 60) -> str:
    if value is None:
        return "NULL"
    if len(value) > limit:
        value = value[:limit] + "..."
    return repr(value)


def _article(type_name: str) -> str:
    return "an" if type_name[0] in "AEIOU" else "a"


def _np_bool(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _null_out(arr: pa.Array, rows: list[int] | np.ndarray) -> pa.Array:
    """``arr`` with the given rows set to NULL."""
    if len(rows) == 0:
        return arr
    mask = np.zeros(len(arr), dtype=bool)
    mask[np.asarray(rows, dtype=np.int64)] = True
    return pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)


def _bisect(
    arr: pa.Array, fn: Callable[[pa.Array], pa.Array], reason: Callable[[str], str]
) -> tuple[pa.Array, _Errors]:
    """Apply a whole-column ``fn``; if it raises, find the values that make it raise.

    ``fn`` must work value by value (a cast, a parse). The search splits failing slices in
    halves, so k bad values in n cost O(k log n) calls of ``fn``.
    """
    try:
        return fn(arr), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError):
        pass

    def fails(lo: int, hi: int) -> bool:
        try:
            fn(arr.slice(lo, hi - lo))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError):
            return True
        return False

    bad = failing_positions(len(arr), fails)
    errors = {i: reason(arr[i].as_py()) for i in bad}
    return fn(_null_out(arr, bad)), errors


def _not_a(type_name: str) -> Callable[[str], str]:
    return lambda v: f"not {_article(type_name)} {type_name}: {_show(v)}"


def _plain_native(arr: pa.Array, kind: str, target: pa.DataType) -> Optional[pa.Array]:
    """The compiled parse (loader/_native.c ``plain_int64s`` / ``plain_dates`` /
    ``plain_numerics``) of a column whose every value is in the plain form (``-?D{1,19}`` in
    range; ``YYYY-MM-DD`` in 0001-9999; ``-?D{1,29}(.D{1,9})?``): the same values as Arrow's
    cast; None (the cast) for any other column."""
    if not (native.available() and pa.types.is_string(arr.type) and arr.null_count < len(arr)):
        return None
    parse = getattr(native.module(), kind)
    data = parse(native.string_descriptor(arr), len(arr), pa.allocate_buffer)
    if data is None:
        return None
    bitmap = native.same_validity(arr)
    return pa.Array.from_buffers(target, len(arr), [bitmap, data], null_count=arr.null_count)


def _max_value_bytes(arr: pa.Array) -> int:
    """The longest value of a string or binary column, in bytes, from its offsets alone."""
    if len(arr) == 0:
        return 0
    offsets = value_offsets(arr)
    if offsets[-1] - offsets[0] <= 0:
        return 0
    return int(np.diff(offsets).max())  # a NULL with a span only makes this larger


def _decimal(text: str) -> Optional[decimal.Decimal]:
    """``text`` as a decimal; None where Python's decimal refuses it: for a number's text, an
    exponent beyond its reach (10^18 and more either way: :func:`_huge_exponent` tells more)."""
    try:
        return decimal.Decimal(text)
    except decimal.InvalidOperation:
        return None


def _huge_exponent(text: str) -> tuple[bool, bool]:
    """Of a number's text whose exponent Python's decimal cannot hold (``1e-99999999999999999999``):
    whether its digits are all zero (the number is 0 then) and whether the exponent is positive
    (its digits run past any type's integer digits; else past its fraction digits)."""
    digits, _, exponent = text.lower().partition("e")
    return decimal.Decimal(digits).is_zero(), not exponent.startswith("-")


def _digits_around_point(d: decimal.Decimal) -> tuple[int, int]:
    """How many digits a finite decimal has before its point and after it, as written out
    plainly (``1.50``: 1 and 2; ``1e3``: 4 and 0; ``1.5e-3``: 1 and 4)."""
    return max(d.adjusted() + 1, 0), max(-int(d.as_tuple().exponent), 0)
