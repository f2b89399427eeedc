"""Rows out of a stream of ``PartialResultSet`` messages (ExecuteStreamingSql, StreamingRead).

Spanner streams a result as values in row order, the row type in the first message's
metadata. A value too large for one message is split (``chunked_value``): the last value of
a message continues in the first of the next, merged as google/spanner/v1/result_set.proto
says: strings are concatenated; lists are concatenated, their boundary elements merged
(recursively) when both are strings or both are lists; other values never split (an empty
string continuing a number is a list's continuation mark, dropped as the client drops it).

:class:`ResultStream` takes the messages' bytes one at a time and keeps what a resume needs:
the values up to the last ``resume_token``, so that a stream broken by UNAVAILABLE is asked
again from there and what came after the token is dropped, not counted twice.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

from ..commit.errors import gexc
from .proto import fields, text, value

# google.spanner.v1.TypeCode
BOOL, INT64, FLOAT64, TIMESTAMP, DATE, STRING, BYTES, ARRAY, STRUCT, NUMERIC, JSON = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
)  # fmt: skip
FLOAT32 = 15


@dataclass(frozen=True)
class SpannerWireType:
    """A ``google.spanner.v1.Type``: its code, an ARRAY's element type, a STRUCT's fields."""

    code: int
    element: Optional[SpannerWireType] = None
    fields: tuple[tuple[str, SpannerWireType], ...] = ()


def parse_type(buf: memoryview) -> SpannerWireType:
    """Type: code = 1, array_element_type = 2, struct_type = 3 (StructType.fields = 1, each
    Field: name = 1, type = 2)."""
    code, element, members = 0, None, []
    for number, v in fields(buf):
        if number == 1:
            code = v
        elif number == 2:
            element = parse_type(v)
        elif number == 3:
            members = parse_struct_type(v)
    return SpannerWireType(code, element, tuple(members))


def parse_struct_type(buf: memoryview) -> list[tuple[str, SpannerWireType]]:
    out = []
    for number, f in fields(buf):
        if number == 1:
            name, ftype = "", SpannerWireType(0)
            for n, v in fields(f):
                if n == 1:
                    name = text(v)
                elif n == 2:
                    ftype = parse_type(v)
            out.append((name, ftype))
    return out


def merge(left: Any, right: Any) -> Any:
    """The value a chunk ``left`` and its continuation ``right`` make together. A number
    (FLOAT64) does not split: an empty string after one only marks that the list it ends
    goes on (google-cloud-spanner's merge reads it so), and is dropped."""
    if isinstance(left, str) and isinstance(right, str):
        return left + right
    if _is_number(left) and right == "":
        return left
    if isinstance(left, list) and isinstance(right, list):
        if left and right and _mergeable(left[-1], right[0]):
            return [*left[:-1], merge(left[-1], right[0]), *right[1:]]
        return left + right
    raise ValueError(f"a chunked {type(left).__name__} cannot continue in a {type(right).__name__}")


def _mergeable(a: Any, b: Any) -> bool:
    return (
        (isinstance(a, str) and isinstance(b, str))
        or (isinstance(a, list) and isinstance(b, list))
        or (_is_number(a) and b == "")
    )


def _is_number(v: Any) -> bool:
    return isinstance(v, float)  # a number_value (bools are bool, integers are text)


def convert(raw: Any, t: SpannerWireType) -> Any:
    """A merged value as Python, by its Spanner type, as google-cloud-spanner gives it:
    INT64 int, FLOAT64 float, BOOL bool, STRING str, BYTES the base64 text as bytes (not
    decoded: the client's form), NUMERIC Decimal, DATE date,
    TIMESTAMP an aware UTC datetime (its nanoseconds kept, see :func:`timestamp`), ARRAY a list, STRUCT a list of its
    fields' values. JSON stays its text (the client wraps it in a JsonObject)."""
    if raw is None:
        return None
    code = t.code
    if code in (STRING, JSON):
        return raw
    if code == INT64:
        return int(raw)
    if code == BOOL:
        return bool(raw)
    if code in (FLOAT64, FLOAT32):
        return float(raw)  # a number, or "NaN" / "Infinity" / "-Infinity"
    if code == BYTES:
        return raw.encode()  # still base64, as the client gives it
    if code == ARRAY:
        assert t.element is not None
        return [convert(x, t.element) for x in raw]
    if code == STRUCT:
        return [convert(x, ft) for x, (_, ft) in zip(raw, t.fields)]
    if code == TIMESTAMP:
        return timestamp(raw)
    if code == DATE:
        return dt.date.fromisoformat(raw)
    if code == NUMERIC:
        return Decimal(raw)
    return raw


class Nanoseconds(dt.datetime):
    """A datetime that keeps its nanoseconds in ``nanosecond`` (what the client library's
    ``DatetimeWithNanoseconds`` offers; its microseconds are the first six digits)."""

    nanosecond: int


def timestamp(raw: str) -> dt.datetime:
    """An RFC 3339 UTC timestamp as Spanner writes it (``...Z``, up to nine fractional
    digits) as an aware datetime; with digits past the microsecond, a :class:`Nanoseconds`
    that keeps them (a key read back is matched to the one sent, loader.commit.runner)."""
    body = raw.rstrip("Zz")
    head, _, frac = body.partition(".")
    out = dt.datetime.fromisoformat(head).replace(tzinfo=dt.timezone.utc)
    if not frac:
        return out
    nanos = int(frac[:9].ljust(9, "0"))
    if nanos % 1000 == 0:
        return out.replace(microsecond=nanos // 1000)
    kept = Nanoseconds(*out.timetuple()[:6], nanos // 1000, tzinfo=dt.timezone.utc)
    kept.nanosecond = nanos
    return kept


class ResultStream:
    """Rows of one streamed result, fed ``PartialResultSet`` bytes by :meth:`add`.

    PartialResultSet: metadata = 1 (ResultSetMetadata.row_type = 1), values = 2,
    chunked_value = 3, resume_token = 4."""

    def __init__(self) -> None:
        self.row_type: Optional[list[tuple[str, SpannerWireType]]] = None
        self.values: list[Any] = []
        self.open = False
        """The last value continues in the next message."""
        self.token = b""
        self._saved: tuple[int, Any, bool] = (0, None, False)

    def add(self, message: bytes) -> None:
        chunked, token, got = False, b"", []
        for number, v in fields(message):
            if number == 1:
                for n, x in fields(v):
                    if n == 1:
                        self.row_type = parse_struct_type(x)
            elif number == 2:
                got.append(value(v))
            elif number == 3:
                chunked = bool(v)
            elif number == 4:
                token = bytes(v)
        if got:
            if self.open:
                self.values[-1] = merge(self.values[-1], got[0])
                got = got[1:]
            self.values += got
            self.open = chunked
        if token:
            self.token = token
            last = self.values[-1] if self.values else None
            self._saved = (len(self.values), last, self.open)

    def rewind(self) -> bytes:
        """Drop what came after the last resume token; return the token to resume from
        (empty: start again)."""
        n, last, was_open = self._saved
        del self.values[n:]
        if n:
            self.values[-1] = last
        self.open = was_open
        return self.token

    def rows(self) -> list[list[Any]]:
        """The rows, converted by the row type (after the whole stream)."""
        if self.open:
            raise ValueError("the result stream ended inside a chunked value")
        types = [t for _, t in self.row_type or ()]
        width = len(types)
        if not width:
            return []
        if len(self.values) % width:
            raise ValueError(f"{len(self.values)} values do not make rows of {width}")
        vals = self.values
        return [
            [convert(vals[i + j], types[j]) for j in range(width)]
            for i in range(0, len(vals), width)
        ]


def check_commit_reply(reply: bytes | memoryview) -> None:
    """Raise ABORTED (retried: nothing was written) unless this ``CommitResponse`` says the
    commit happened.

    CommitResponse: commit_timestamp = 1, precommit_token = 4 (of the ``MultiplexedSessionRetry``
    oneof). On a multiplexed session Spanner may answer a precommit token instead: the
    transaction has not committed yet and the commit is to be sent again; a reply without a
    commit timestamp is taken the same way."""
    stamped = False
    for number, _ in fields(reply):
        if number == 4:
            raise gexc.Aborted(
                "Spanner answered the commit with a precommit token: not committed yet"
            )
        if number == 1:
            stamped = True
    if not stamped:
        raise gexc.Aborted("Spanner answered the commit without a commit timestamp")
