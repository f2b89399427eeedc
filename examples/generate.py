"""Generate the example online-shop data (schemas/shop.sql) as CSV, deterministically.

Small runs produce the committed files under examples/shop/; large runs produce benchmark inputs::

    python examples/generate.py --out examples/shop                      # the committed examples
    python examples/generate.py --orders 10000000 --tables Orders --out /tmp/big [--gzip]

Every value is a pure function of ``(seed, table, column, row number)``: a counter-based hash
(splitmix64), not a stateful random generator. So the output does not depend on the chunk size,
on the numpy version, or on which other tables are generated, and a child table generated on its
own still references exactly the parents that a separate run of the parent table writes (given
the same ``--seed``, ``--customers``, ``--orders`` and ``--products``).

Keys are pseudo-random positive 63-bit INT64 values (a bijective mix of the row number, so they
are unique without bookkeeping) and rows are written in generation order, not key order.

The CSV dialect is the loader's default: UTF-8, comma, a header row, ``"`` quoting with doubled
quotes where a field needs it; NULL is an empty unquoted field and an empty string is ``""``.

Only numpy, pyarrow and the standard library are used; all per-row work is columnar.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import io
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Tables in load order: parents before children.
TABLES = ("Customers", "Orders", "OrderItems", "Products")

#: CSV header of each table: the column names of schemas/shop.sql, in DDL order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "Customers": (
        "CustomerId",
        "Name",
        "Email",
        "Balance",
        "Active",
        "CreatedAt",
        "Tags",
        "Avatar",
        "Profile",
        "Birthday",
        "Score",
    ),
    "Orders": (
        "CustomerId",
        "OrderId",
        "OrderDate",
        "Status",
        "Amount",
        "Currency",
        "Weight",
        "PlacedAt",
    ),
    "OrderItems": (
        "CustomerId",
        "OrderId",
        "LineNo",
        "ProductId",
        "Quantity",
        "UnitPrice",
        "Discount",
        "Note",
    ),
    "Products": (
        "ProductId",
        "Name",
        "Category",
        "Price",
        "Weight",
        "InStock",
        "Attributes",
        "Sizes",
    ),
}

DEFAULT_SEED = 20240301
DEFAULT_CUSTOMERS = 200
ORDERS_PER_CUSTOMER = 3
DEFAULT_PRODUCTS = 100
MAX_LINES_PER_ORDER = 4
#: Rows per generated chunk: bounds memory (~15 MB of CSV text per chunk for Orders).
CHUNK_ROWS = 1 << 17

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
_MASK63 = (1 << 63) - 1
_EPOCH = dt.date(1970, 1, 1)


def _days(d: dt.date) -> int:
    return (d - _EPOCH).days


# ---------------------------------------------------------------------------------------------
# Counter-based randomness


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection on uint64 that scrambles every bit (wraps mod 2**64)."""
    x = x ^ (x >> _U64(30))
    x = x * _U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U64(27))
    x = x * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _mix63(x: np.ndarray) -> np.ndarray:
    """The same construction modulo 2**63: a bijection on [0, 2**63) that maps only 0 to 0."""
    mask = _U64(_MASK63)
    x = x ^ (x >> _U64(30))
    x = (x * _U64(0xBF58476D1CE4E5B9)) & mask
    x = x ^ (x >> _U64(27))
    x = (x * _U64(0x94D049BB133111EB)) & mask
    return x ^ (x >> _U64(31))


def _scalar_mix(*parts: int) -> int:
    """Mix a few small integers into one 64-bit key (Python ints: no numpy overflow warnings)."""
    h = 0x243F6A8885A308D3
    for p in parts:
        h = ((h ^ (p & _MASK64)) * 0x9E3779B97F4A7C15) & _MASK64
        h ^= h >> 29
    return h


@dataclass(frozen=True)
class _Rand:
    """Independent pseudo-random streams for one table, addressed by row counter."""

    seed: int
    table: int

    def u64(self, stream: int, idx: np.ndarray) -> np.ndarray:
        key = _U64(_scalar_mix(self.seed, self.table, stream))
        return _mix64(idx * _U64(0x9E3779B97F4A7C15) + key)

    def below(self, stream: int, idx: np.ndarray, n: int) -> np.ndarray:
        """Integers in [0, n); the modulo bias is far below anything a test could see."""
        return (self.u64(stream, idx) % _U64(n)).astype(np.int64)

    def uniform(self, stream: int, idx: np.ndarray) -> np.ndarray:
        """Floats in [0, 1) with 53 random bits."""
        return (self.u64(stream, idx) >> _U64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def chance(self, stream: int, idx: np.ndarray, p: float) -> np.ndarray:
        return self.uniform(stream, idx) < p


def _ids(seed: int, table: int, idx: np.ndarray) -> np.ndarray:
    """Unique, well-spread positive INT64 ids for row numbers ``idx`` (< 2**40)."""
    salt = _scalar_mix(seed, table, 0x1D) & ((1 << 62) - 1)
    # idx + 1 + salt is never 0 and stays below 2**63, and _mix63 only maps 0 to 0.
    return _mix63(idx + _U64(salt + 1)).astype(np.int64)


_T_CUSTOMERS, _T_ORDERS, _T_ITEMS, _T_PRODUCTS = 1, 2, 3, 4


def customer_ids(seed: int, idx: np.ndarray) -> np.ndarray:
    """CustomerId of customer rows ``idx`` (uint64 row numbers)."""
    return _ids(seed, _T_CUSTOMERS, idx)


def order_ids(seed: int, idx: np.ndarray) -> np.ndarray:
    """OrderId of order rows ``idx``; unique over all orders, not only per customer."""
    return _ids(seed, _T_ORDERS, idx)


def order_customers(seed: int, idx: np.ndarray, n_customers: int) -> np.ndarray:
    """Row number of the customer that placed each order in ``idx``."""
    return _Rand(seed, _T_ORDERS).below(0, idx, n_customers)


def order_line_counts(seed: int, idx: np.ndarray) -> np.ndarray:
    """Number of OrderItems of each order in ``idx`` (1..MAX_LINES_PER_ORDER)."""
    return 1 + _Rand(seed, _T_ITEMS).below(0, idx, MAX_LINES_PER_ORDER)


def product_ids(seed: int, idx: np.ndarray) -> pa.StringArray:
    """ProductId of product rows ``idx``: lower-case UUID-shaped hex strings (36 characters)."""
    hi = _ids(seed, _T_PRODUCTS, idx).astype(np.uint64)
    lo = _Rand(seed, _T_PRODUCTS).u64(0, idx)
    raw = np.stack([hi.astype(">u8"), lo.astype(">u8")], axis=1).view(np.uint8)  # (n, 16)
    hexed = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[
        np.stack([raw >> 4, raw & 15], axis=2).reshape(len(idx), 32)
    ]
    dash = np.full((len(idx), 1), ord("-"), dtype=np.uint8)
    parts = [hexed[:, 0:8], dash, hexed[:, 8:12], dash, hexed[:, 12:16], dash]
    parts += [hexed[:, 16:20], dash, hexed[:, 20:32]]
    text = np.ascontiguousarray(np.concatenate(parts, axis=1))
    return _fixed_width_strings(text)


def product_price_cents(seed: int, idx: np.ndarray) -> np.ndarray:
    """Price of product rows ``idx`` in cents; OrderItems.UnitPrice repeats it."""
    r = _Rand(seed, _T_PRODUCTS)
    whole = r.below(50, idx, 250)
    cents = np.array([99, 0, 50, 95], dtype=np.int64)[r.below(51, idx, 4)]
    return (1 + whole) * 100 + cents


# ---------------------------------------------------------------------------------------------
# Columnar formatting of CSV fields. Every helper returns a string array whose nulls mean NULL.

_STR = pa.string()
_NEEDS_QUOTES = r'[",\r\n]|^$'


def _fixed_width_strings(text: np.ndarray) -> pa.StringArray:
    """A (n, w) uint8 matrix of UTF-8 bytes as n strings of w bytes each."""
    n, width = text.shape
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * width).tobytes())
    return pa.StringArray.from_buffers(n, offsets, pa.py_buffer(text.tobytes()))


def _pick(values: Sequence[str], idx: np.ndarray) -> pa.StringArray:
    return pa.array(list(values), type=_STR).take(pa.array(idx))


def _null_where(arr: pa.Array, mask: np.ndarray) -> pa.Array:
    return pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)


def _concat(*parts: pa.Array | str) -> pa.Array:
    """Element-wise concatenation; a NULL part makes the result NULL."""
    return pc.binary_join_element_wise(*parts, "")


def _int_text(values: np.ndarray) -> pa.StringArray:
    return pa.array(values, type=pa.int64()).cast(_STR)


def _decimal_text(nanos: np.ndarray, min_fraction_digits: int = 2) -> pa.StringArray:
    """NUMERIC text from integer nano-units: ``-12.5`` -> ``-12.50``, 9 fraction digits at most."""
    neg = nanos < 0
    mag = np.abs(nanos)
    whole = _int_text(mag // 1_000_000_000)
    frac = pc.utf8_lpad(_int_text(mag % 1_000_000_000), 9, "0")
    frac = pc.utf8_rtrim(frac, "0")
    frac = pc.utf8_rpad(frac, min_fraction_digits, "0")
    sign = pc.if_else(pa.array(neg), "-", "")
    return _concat(sign, whole, ".", frac)


def _date_text(days: np.ndarray) -> pa.StringArray:
    return pa.array(days.astype(np.int32), type=pa.date32()).cast(_STR)


def _timestamp_text(seconds: np.ndarray, nanos: np.ndarray, precision: np.ndarray) -> pa.Array:
    """RFC 3339 UTC text; ``precision`` 0/1/2 writes whole seconds / micro- / nanoseconds."""
    base = pc.strftime(pa.array(seconds, type=pa.timestamp("s")), format="%Y-%m-%dT%H:%M:%S")
    micros = pc.utf8_lpad(_int_text(nanos // 1000), 6, "0")
    nanos9 = pc.utf8_lpad(_int_text(nanos), 9, "0")
    frac = pc.if_else(
        pa.array(precision == 0),
        "",
        pc.if_else(pa.array(precision == 1), _concat(".", micros), _concat(".", nanos9)),
    )
    return _concat(base, frac, "Z")


def _json_array_text(elements: Sequence[pa.Array], length: np.ndarray) -> pa.Array:
    """``["a","b"]`` from already JSON-encoded element arrays; ``length`` of each array."""
    # Not binary_join_element_wise(null_handling="skip"): pyarrow 26 drops rows whose
    # inputs are all NULL, shortening the result.
    parts = [
        pc.if_else(pa.array(length > i), e if i == 0 else _concat(",", e), "")
        for i, e in enumerate(elements)
    ]
    return _concat("[", *parts, "]")


def _base64_text(data: np.ndarray) -> pa.StringArray:
    """Standard base64 with padding of each row of a (n, L) uint8 matrix."""
    n, length = data.shape
    groups = -(-length // 3)
    padded = np.zeros((n, groups * 3), dtype=np.uint8)
    padded[:, :length] = data
    b = padded.reshape(n, groups, 3).astype(np.uint32)
    word = (b[:, :, 0] << 16) | (b[:, :, 1] << 8) | b[:, :, 2]
    sextets = np.stack([(word >> s) & 63 for s in (18, 12, 6, 0)], axis=2).reshape(n, groups * 4)
    alphabet = np.frombuffer(
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
    )
    text = alphabet[sextets]
    pad = groups * 3 - length
    if pad:
        text[:, -pad:] = ord("=")
    return _fixed_width_strings(np.ascontiguousarray(text))


def _random_bytes(rand: _Rand, stream: int, idx: np.ndarray, length: int) -> np.ndarray:
    words = -(-length // 8)
    cols = [rand.u64(stream + w, idx) for w in range(words)]
    raw = np.stack(cols, axis=1).astype("<u8").view(np.uint8) if cols else np.zeros((len(idx), 0))
    return np.ascontiguousarray(raw[:, :length].astype(np.uint8))


def _csv_field(arr: pa.Array, quote: bool) -> pa.StringArray:
    """CSV text of one column: NULL -> empty, and quoted with doubled quotes where needed."""
    text = arr if arr.type == _STR else arr.cast(_STR)
    if quote:
        needs = pc.fill_null(pc.match_substring_regex(text, _NEEDS_QUOTES), False)
        quoted = _concat('"', pc.replace_substring(text, '"', '""'), '"')
        text = pc.if_else(needs, quoted, text)
    return pc.fill_null(text, "")


def _csv_lines(fields: Sequence[pa.Array]) -> pa.Buffer:
    """Join already-formatted fields into CSV rows; return the bytes of all rows."""
    last = _concat(fields[-1], "\n")
    lines = pc.binary_join_element_wise(*fields[:-1], last, ",") if len(fields) > 1 else last
    offsets = np.frombuffer(
        lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4
    )
    start, stop = int(offsets[0]), int(offsets[-1])
    return lines.buffers()[2].slice(start, stop - start)


# ---------------------------------------------------------------------------------------------
# Tables. Each chunk function returns the CSV fields (in COLUMNS order) of rows [start, stop).

_FIRST = (
    "Anna",
    "Ben",
    "Chloé",
    "David",
    "Émile",
    "Fatima",
    "Günther",
    "Hana",
    "Ingrid",
    "José",
    "Kenji",
    "Lars",
    "María",
    "Nils",
    "Olivia",
    "Priya",
    "Quentin",
    "Rosa",
    "Søren",
    "Tomás",
    "Ulrike",
    "Viktor",
    "Wei",
    "Xenia",
    "Yuki",
    "Zoë",
)
_LAST = (
    "Müller",
    "Weiß",
    "García",
    "O'Brien",
    "Nakamura",
    "Dubois",
    "Smith",
    "Kowalski",
    "Jensen",
    "Rossi",
    "Nguyen",
    "Schmidt",
    "Öztürk",
    "Ivanova",
    "Haddad",
    "Fernández",
    "Straße",
)
_CJK_NAMES = ("山田 太郎", "佐藤 花子", "王 伟", "김 민준", "日本 一郎")
#: Rare name suffixes: a comma, quotes, an emoji, an embedded newline (CSV edge cases).
_NAME_SUFFIX = ("", ", Jr.", ' "Ace"', " 🚀", "\nc/o Acme GmbH")
_TAGS = ("vip", "newsletter", "b2b", "früh", "日本", "wholesale", "returns", 'say "hi"', "a,b")
_LANGS = ("de", "en", "fr", "ja", "es")
_CITIES = ("Zürich", "東京", "São Paulo", "New York, NY", "Berlin")
_STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled", "returned")
_CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF")
_NOTES = (
    "Gift wrap, please",
    'Label says "fragile"',
    "Ring twice\nthen wait",
    "Merci ! 🎁",
    "",
    "お届けは午前中に",
    "Leave at the door",
)
_ADJECTIVES = ("Classic", "Eco", "Deluxe", "Mini", "Pro", "Vintage", "Smart", "Crème")
_NOUNS = (
    "Mug",
    "Kettle",
    "Garden Hose",
    "Rubber Duck 🦆",
    'Poster "Wave"',
    "Hammer, 500 g",
    "日本茶 (sencha)",
    "Notebook",
    "Lamp",
    "Backpack",
    "Brûlée Set",
)
_CATEGORIES = ("Kitchen", "Garden", "Toys", "Books", "Tools", "Café & Tea")
_COLORS = ("red", "green", "blue", "black", "weiß")
_SIZES = ("S", "M", "L", "XL")
_AVATAR_LENGTHS = (0, 3, 16, 20)  # empty, no padding, "==" padding, "=" padding

_TS_2015 = _days(dt.date(2015, 1, 1)) * 86400
_TS_2025 = _days(dt.date(2025, 1, 1)) * 86400
_DAY_2019 = _days(dt.date(2019, 1, 1))
_DAY_2025 = _days(dt.date(2025, 1, 1))
_DAY_1940 = _days(dt.date(1940, 1, 1))
_DAY_2007 = _days(dt.date(2007, 1, 1))


def _json_strings(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(json.dumps(v, ensure_ascii=False) for v in values)


def _timestamps(rand: _Rand, stream: int, idx: np.ndarray, seconds: np.ndarray) -> pa.Array:
    nanos = rand.below(stream, idx, 1_000_000_000)
    precision = rand.below(stream + 1, idx, 3)
    return _timestamp_text(seconds, nanos, precision)


@dataclass(frozen=True)
class Sizes:
    """Row counts of the parent tables; children are derived from them."""

    customers: int
    orders: int
    products: int


def _customers(seed: int, sizes: Sizes, idx: np.ndarray) -> list[pa.Array]:
    r = _Rand(seed, _T_CUSTOMERS)
    n = len(idx)
    suffix_roll = r.uniform(3, idx)
    suffix = np.select(
        [suffix_roll < 0.03, suffix_roll < 0.05, suffix_roll < 0.07, suffix_roll < 0.085],
        [1, 2, 3, 4],
        0,
    )
    western = _concat(
        _pick(_FIRST, r.below(1, idx, len(_FIRST))), " ", _pick(_LAST, r.below(2, idx, len(_LAST)))
    )
    cjk = _pick(_CJK_NAMES, r.below(4, idx, len(_CJK_NAMES)))
    name = _concat(
        pc.if_else(pa.array(r.chance(5, idx, 0.08)), cjk, western), _pick(_NAME_SUFFIX, suffix)
    )

    email = _concat("customer", _int_text(idx.astype(np.int64)), "@example.com")
    email_roll = r.uniform(6, idx)
    email = pc.if_else(pa.array(email_roll < 0.02), "", email)  # a few empty strings
    email = _null_where(email, email_roll > 0.9)

    cents = r.below(7, idx, 2_000_01) - 500_00
    nanos = np.where(r.chance(8, idx, 0.1), r.below(9, idx, 10**12) - 10**11, cents * 10**7)
    balance = _null_where(_decimal_text(nanos), r.chance(10, idx, 0.08))

    active_roll = r.uniform(11, idx)
    active = _null_where(pa.array(active_roll < 0.7), active_roll > 0.95)

    created_s = _TS_2015 + r.below(12, idx, _TS_2025 - _TS_2015)
    created = _null_where(_timestamps(r, 13, idx, created_s), r.chance(15, idx, 0.03))

    tag_len = r.below(16, idx, 4)
    tag_json = _json_strings(_TAGS)
    tags = _json_array_text(
        [_pick(tag_json, r.below(17 + i, idx, len(_TAGS))) for i in range(3)], tag_len
    )
    tags = _null_where(tags, r.chance(20, idx, 0.15))

    avatar_len = r.below(21, idx, len(_AVATAR_LENGTHS))
    avatar = pa.nulls(n, _STR)
    for k, length in enumerate(_AVATAR_LENGTHS):  # one pass per length: a handful per chunk
        encoded = (
            _base64_text(_random_bytes(r, 30, idx, length)) if length else _pick([""], idx * 0)
        )
        avatar = pc.if_else(pa.array(avatar_len == k), encoded, avatar)
    avatar = _null_where(avatar, r.chance(22, idx, 0.4))

    lang = _pick(_json_strings(_LANGS), r.below(23, idx, len(_LANGS)))
    newsletter = pa.array(r.chance(24, idx, 0.5)).cast(_STR)
    city = _pick(_json_strings(_CITIES), r.below(25, idx, len(_CITIES)))
    address = pc.if_else(
        pa.array(r.chance(26, idx, 0.3)), _concat(',"address":{"city":', city, "}"), ""
    )
    profile = _concat(
        '{"lang":',
        lang,
        ',"newsletter":',
        newsletter,
        ',"visits":',
        _int_text(r.below(27, idx, 500)),
        address,
        "}",
    )
    profile = _null_where(profile, r.chance(28, idx, 0.2))

    birthday = _date_text(_DAY_1940 + r.below(29, idx, _DAY_2007 - _DAY_1940))
    birthday = _null_where(birthday, r.chance(40, idx, 0.1))

    score_roll = r.uniform(41, idx)
    raw = r.uniform(42, idx) * 200.0 - 100.0
    score = np.where(score_roll < 0.1, raw, np.round(raw, 3))  # some need all 17 digits
    score = np.where(score_roll > 0.95, np.round(raw), score)  # some integral
    score_text = _null_where(pa.array(score).cast(_STR), r.chance(43, idx, 0.1))

    return [
        _csv_field(_int_text(customer_ids(seed, idx)), False),
        _csv_field(name, True),
        _csv_field(email, True),
        _csv_field(balance, False),
        _csv_field(active, False),
        _csv_field(created, False),
        _csv_field(tags, True),
        _csv_field(avatar, True),
        _csv_field(profile, True),
        _csv_field(birthday, False),
        _csv_field(score_text, False),
    ]


def _orders(seed: int, sizes: Sizes, idx: np.ndarray) -> list[pa.Array]:
    r = _Rand(seed, _T_ORDERS)
    cust = customer_ids(seed, order_customers(seed, idx, sizes.customers).astype(np.uint64))
    day = _DAY_2019 + r.below(1, idx, _DAY_2025 - _DAY_2019)
    placed_s = day * 86400 + r.below(2, idx, 86400)
    placed = _null_where(_timestamps(r, 3, idx, placed_s), r.chance(5, idx, 0.03))
    amount = _null_where(
        _decimal_text((1_00 + r.below(6, idx, 5000_00)) * 10**7), r.chance(7, idx, 0.02)
    )
    currency = _null_where(
        _pick(_CURRENCIES, r.below(8, idx, len(_CURRENCIES))), r.chance(9, idx, 0.05)
    )
    weight = (1 + r.below(10, idx, 50_000)) / 1000.0
    weight_text = _null_where(pa.array(weight).cast(_STR), r.chance(11, idx, 0.05))
    return [
        _csv_field(_int_text(cust), False),
        _csv_field(_int_text(order_ids(seed, idx)), False),
        _csv_field(_date_text(day), False),
        _csv_field(_pick(_STATUSES, r.below(12, idx, len(_STATUSES))), False),
        _csv_field(amount, False),
        _csv_field(currency, False),
        _csv_field(weight_text, False),
        _csv_field(placed, False),
    ]


def _order_items(seed: int, sizes: Sizes, order_idx: np.ndarray) -> list[pa.Array]:
    r = _Rand(seed, _T_ITEMS)
    counts = order_line_counts(seed, order_idx)
    parent = np.repeat(order_idx, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    line_no = np.arange(len(parent), dtype=np.int64) - starts + 1
    # Address item streams by (order, line) so an item does not depend on the chunking.
    idx = parent * _U64(MAX_LINES_PER_ORDER + 1) + line_no.astype(np.uint64)
    cust = customer_ids(seed, order_customers(seed, parent, sizes.customers).astype(np.uint64))
    product = r.below(1, idx, sizes.products).astype(np.uint64)
    discount = _pick(("0.05", "0.1", "0.15", "0.25", "0.5"), r.below(2, idx, 5))
    discount = _null_where(discount, r.chance(3, idx, 0.7))
    note = _null_where(_pick(_NOTES, r.below(4, idx, len(_NOTES))), r.chance(5, idx, 0.9))
    return [
        _csv_field(_int_text(cust), False),
        _csv_field(_int_text(order_ids(seed, parent)), False),
        _csv_field(_int_text(line_no), False),
        _csv_field(product_ids(seed, product), False),
        _csv_field(_int_text(1 + r.below(6, idx, 5)), False),
        _csv_field(_decimal_text(product_price_cents(seed, product) * 10**7), False),
        _csv_field(discount, False),
        _csv_field(note, True),
    ]


def _products(seed: int, sizes: Sizes, idx: np.ndarray) -> list[pa.Array]:
    r = _Rand(seed, _T_PRODUCTS)
    name = _concat(
        _pick(_ADJECTIVES, r.below(1, idx, len(_ADJECTIVES))),
        " ",
        _pick(_NOUNS, r.below(2, idx, len(_NOUNS))),
        " ",
        _int_text(1 + r.below(3, idx, 999)),
    )
    category = _null_where(
        _pick(_CATEGORIES, r.below(4, idx, len(_CATEGORIES))), r.chance(5, idx, 0.1)
    )
    weight = np.where(r.chance(6, idx, 0.1), 0.005, (1 + r.below(7, idx, 20_000)) / 1000.0)
    weight_text = _null_where(pa.array(weight).cast(_STR), r.chance(8, idx, 0.1))
    color = _pick(_json_strings(_COLORS), r.below(9, idx, len(_COLORS)))
    dims = _concat(
        '{"w":',
        pa.array(r.below(10, idx, 500) / 10.0).cast(_STR),
        ',"h":',
        _int_text(1 + r.below(11, idx, 50)),
        "}",
    )
    eco = pc.if_else(pa.array(r.chance(12, idx, 0.3)), ',"labels":["eco","fair trade"]', "")
    attributes = _null_where(
        _concat('{"color":', color, ',"dims":', dims, eco, "}"), r.chance(13, idx, 0.3)
    )
    size_json = _json_strings(_SIZES)
    sizes_text = _json_array_text(
        [_pick(size_json, r.below(14 + i, idx, len(_SIZES))) for i in range(3)],
        r.below(17, idx, 4),
    )
    sizes_text = _null_where(sizes_text, r.chance(18, idx, 0.4))
    return [
        _csv_field(product_ids(seed, idx), False),
        _csv_field(name, True),
        _csv_field(category, True),
        _csv_field(_decimal_text(product_price_cents(seed, idx) * 10**7), False),
        _csv_field(weight_text, False),
        _csv_field(pa.array(r.chance(19, idx, 0.85)), False),
        _csv_field(attributes, True),
        _csv_field(sizes_text, True),
    ]


_ChunkFn = Callable[[int, Sizes, np.ndarray], list[pa.Array]]
#: Each table's chunk function and the row count it iterates over (OrderItems iterates orders).
_GENERATORS: dict[str, tuple[_ChunkFn, Callable[[Sizes], int]]] = {
    "Customers": (_customers, lambda s: s.customers),
    "Orders": (_orders, lambda s: s.orders),
    "OrderItems": (_order_items, lambda s: s.orders),
    "Products": (_products, lambda s: s.products),
}


# ---------------------------------------------------------------------------------------------
# Driver


def resolve_sizes(
    customers: Optional[int] = None, orders: Optional[int] = None, products: Optional[int] = None
) -> Sizes:
    """Fill in unspecified counts: 200 customers, 3 orders per customer, 100 products."""
    if customers is None:
        customers = (
            DEFAULT_CUSTOMERS if orders is None else max(1, -(-orders // ORDERS_PER_CUSTOMER))
        )
    if orders is None:
        orders = customers * ORDERS_PER_CUSTOMER
    if products is None:
        products = DEFAULT_PRODUCTS
    if customers < 1 or products < 1 or orders < 0:
        raise ValueError("need at least one customer and one product, and orders >= 0")
    if max(customers, orders, products) >= 1 << 39:
        raise ValueError("at most 2**39 rows per table")
    return Sizes(customers, orders, products)


def write_table(
    table: str, path: Path, sizes: Sizes, seed: int = DEFAULT_SEED, chunk_rows: int = CHUNK_ROWS
) -> int:
    """Write one table's CSV (gzip-compressed if ``path`` ends in .gz); return the row count."""
    chunk_fn, count = _GENERATORS[table]
    total = count(sizes)
    rows = 0
    with open(path, "wb") as raw:
        sink: io.BufferedIOBase = raw
        if path.suffix == ".gz":
            # Level 1: at benchmark sizes gzip dominates the run time and level 6 saves little.
            # mtime=0 and no file name keep the compressed bytes deterministic too.
            sink = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=1, mtime=0)
        sink.write((",".join(COLUMNS[table]) + "\n").encode())
        for start in range(0, total, chunk_rows):
            idx = np.arange(start, min(start + chunk_rows, total), dtype=np.uint64)
            fields = chunk_fn(seed, sizes, idx)
            rows += len(fields[0])
            sink.write(_csv_lines(fields))
        sink.close()  # flushes the gzip trailer before the file closes
    return rows


def generate(
    out: Path | str,
    customers: Optional[int] = None,
    orders: Optional[int] = None,
    products: Optional[int] = None,
    tables: Sequence[str] = TABLES,
    seed: int = DEFAULT_SEED,
    compress: bool = False,
) -> dict[str, int]:
    """Write ``<out>/<Table>.csv[.gz]`` for ``tables`` plus a manifest.json; return row counts.

    The manifest (Dataflow "GCS Text to Cloud Spanner" format) lists the written files,
    parents before children, by bare file name: the loader resolves relative patterns against
    the manifest's own directory, so the manifest works from any working directory.
    """
    unknown = [t for t in tables if t not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown tables {unknown}; choose from {', '.join(TABLES)}")
    sizes = resolve_sizes(customers, orders, products)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ext = ".csv.gz" if compress else ".csv"
    counts: dict[str, int] = {}
    manifest = []
    for table in (t for t in TABLES if t in tables):
        counts[table] = write_table(table, out_dir / f"{table}{ext}", sizes, seed)
        manifest.append({"table_name": table, "file_patterns": [f"{table}{ext}"]})
    text = json.dumps({"tables": manifest}, indent=2) + "\n"
    (out_dir / "manifest.json").write_text(text, encoding="utf-8")
    return counts


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command line entry point; see the module docstring."""
    parser = argparse.ArgumentParser(
        description="Generate the example shop CSVs (schemas/shop.sql) deterministically.",
        epilog="example: python examples/generate.py --orders 10000000 --tables Orders "
        "--out /tmp/big --gzip",
    )
    parser.add_argument("--out", default="examples/shop", help="output directory")
    parser.add_argument("--customers", type=int, help="default 200, or orders/3 if --orders")
    parser.add_argument("--orders", type=int, help="default 3 per customer")
    parser.add_argument("--products", type=int, help=f"default {DEFAULT_PRODUCTS}")
    parser.add_argument(
        "--tables",
        nargs="+",
        default=list(TABLES),
        help="tables to write (space or comma separated); default all. OrderItems has "
        f"1-{MAX_LINES_PER_ORDER} lines per order",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--gzip", action="store_true", help="write .csv.gz files")
    args = parser.parse_args(argv)
    tables = [t for arg in args.tables for t in arg.split(",") if t]
    unknown = [t for t in tables if t not in COLUMNS]
    if unknown:
        parser.error(f"unknown tables {unknown}; choose from {', '.join(TABLES)}")
    try:
        resolve_sizes(args.customers, args.orders, args.products)
    except ValueError as exc:
        parser.error(str(exc))
    counts = generate(
        args.out, args.customers, args.orders, args.products, tables, args.seed, args.gzip
    )
    for table, n in counts.items():
        print(f"{table}: {n} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
