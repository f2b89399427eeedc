"""The request messages a load sends, framed by hand (google/spanner/v1/spanner.proto)."""

from __future__ import annotations

from typing import Optional, Sequence

from .proto import encode_value, field, field_varint, list_value, varint

# TransactionSelector.single_use = 1 of TransactionOptions.read_only = 2 of ReadOnly
# {strong = 1}: what the client's database.snapshot() sends for a single-use read
SINGLE_USE_STRONG = field(1, field(2, field_varint(1, 1)))
# TransactionOptions.read_write = 1 (empty ReadWrite): a blind-write commit's transaction
READ_WRITE = field(1, b"")
PRIORITIES = {"low": 1, "medium": 2, "high": 3}
"""RequestOptions.Priority: PRIORITY_LOW = 1, PRIORITY_MEDIUM = 2, PRIORITY_HIGH = 3."""
TYPE_STRING = 6
_TAG_MUTATION = b"\x22"  # CommitRequest.mutations = 4, length-delimited
"""google.spanner.v1.TypeCode.STRING"""


def create_session(database: str, multiplexed: bool = True) -> bytes:
    """CreateSessionRequest: database = 1, session = 2 (Session.multiplexed = 6)."""
    return field(1, database) + field(2, field_varint(6, 1) if multiplexed else b"")


def execute_sql(
    session: str, sql: str, params: Optional[dict[str, str]] = None, resume_token: bytes = b""
) -> bytes:
    """ExecuteSqlRequest: session = 1, transaction = 2, sql = 3, params = 4 (a Struct: map
    entries key = 1, value = 2 under fields = 1), param_types = 5 (map entries of Type
    {code = 1}), resume_token = 6. Parameters are STRING."""
    out = [field(1, session), field(2, SINGLE_USE_STRONG), field(3, sql)]
    if params:
        entries = b"".join(
            field(1, field(1, k) + field(2, encode_value(v))) for k, v in params.items()
        )
        out.append(field(4, entries))
        for k in params:
            out.append(field(5, field(1, k) + field(2, field_varint(1, TYPE_STRING))))
    if resume_token:
        out.append(field(6, resume_token))
    return b"".join(out)


def read(
    session: str,
    table: str,
    columns: Sequence[str],
    keys: Sequence[Sequence[object]],
    resume_token: bytes = b"",
) -> bytes:
    """ReadRequest: session = 1, transaction = 2, table = 3, columns = 5, key_set = 6
    (KeySet.keys = 1, each a ListValue), resume_token = 9."""
    out = [field(1, session), field(2, SINGLE_USE_STRONG), field(3, table)]
    out += [field(5, c) for c in columns]
    out.append(field(6, b"".join(field(1, list_value(k)) for k in keys)))
    if resume_token:
        out.append(field(9, resume_token))
    return b"".join(out)


def commit_head() -> bytes:
    """What follows the session in a blind-write CommitRequest: single_use_transaction = 3."""
    return field(3, READ_WRITE)


def commit_tail(
    priority: Optional[str] = None, tag: Optional[str] = None, max_commit_delay_ms: int = 0
) -> bytes:
    """What follows the mutations: request_options = 6 (priority = 1, transaction_tag = 3;
    always sent, empty when there are none, as the client's Batch.commit does) and
    max_commit_delay = 8 (a Duration: seconds = 1, nanos = 2)."""
    opts = b""
    if priority:
        opts += field_varint(1, PRIORITIES[priority])
    if tag:
        opts += field(3, tag)
    out = field(6, opts)
    if max_commit_delay_ms:
        seconds, ms = divmod(max_commit_delay_ms, 1000)
        delay = (field_varint(1, seconds) if seconds else b"") + (
            field_varint(2, ms * 1_000_000) if ms else b""
        )
        out += field(8, delay)
    return out


def commit(session: str, head: bytes, mutations: Sequence[bytes], tail: bytes) -> bytes:
    """CommitRequest: session = 1, ``head``, mutations = 4 (the wire bytes as they are),
    ``tail``; protobuf's own field order, so the bytes equal the client's."""
    parts = [field(1, session), head]
    for m in mutations:  # each mutation's bytes copied once, into the joined request
        parts += (_TAG_MUTATION, varint(len(m)), m)
    parts.append(tail)
    return b"".join(parts)
