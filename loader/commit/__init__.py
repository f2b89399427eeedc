"""Commit stage: send batches to Spanner, in parallel, retrying only what is safe to repeat."""

from .runner import (
    AMBIGUOUS,
    DATA_ERRORS,
    OPS,
    TRANSIENT,
    BatchJob,
    CommitPool,
    CommitRunner,
    CommitStats,
    Committer,
    Reordered,
    RetryPolicy,
    SpannerCommitter,
    is_session_not_found,
    is_transient,
    rows_of,
    server_retry_delay,
)

__all__ = [
    "AMBIGUOUS",
    "DATA_ERRORS",
    "OPS",
    "TRANSIENT",
    "BatchJob",
    "CommitPool",
    "CommitRunner",
    "CommitStats",
    "Committer",
    "Reordered",
    "RetryPolicy",
    "SpannerCommitter",
    "is_session_not_found",
    "is_transient",
    "rows_of",
    "server_retry_delay",
]
