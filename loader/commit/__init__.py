"""Commit stage: send batches to Spanner, in parallel, retrying only what is safe to repeat.

One module per concept:

* ``errors``: the one table of Google errors (transient, ambiguous, data, schema, session not
  found, push-back) that the runner, loader/throttle.py and loader/bench.py all use;
* ``spanner``: :class:`SpannerCommitter`, the only code that touches google-cloud-spanner's
  internals (hand-built ``CommitRequest`` wire bytes on the client's own channel, or the
  client's public ``database.batch()`` when an internal is missing): the committer of a load
  given a client ``Database``. A load that connects itself commits through
  :class:`loader.wire.WireCommitter` instead (the same request bytes, on its own channel and
  session, without the client library);
* ``jobs``: :class:`BatchJob` (one sorted key range of one table, encoded), :class:`Reordered`,
  :class:`CommitStats`;
* ``runner``: :class:`CommitRunner` (retry, insert-mode read-back, bisection of bad rows) and
  the :class:`Committer` interface it commits through;
* ``pool``: :class:`CommitPool`, the bounded commit threads.

Who retries what (see SPANNER_FACTS.md):

* Nothing below us retries a commit: the client's gapic layer, which retried the Commit RPC on
  UNAVAILABLE and RESOURCE_EXHAUSTED, and its ``Batch.commit``, which retried ABORTED for 30 s
  with 2^n-second sleeps (far too slow for the emulator, which aborts every concurrent
  commit), are both bypassed. Every error reaches :class:`CommitRunner` at once. (Not on the
  public path, when the client lacks an internal the committer uses: there ``Batch.commit``
  retries first, as it would for any application.)
* ABORTED, UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, INTERNAL (e.g. RST_STREAM) and
  CANCELLED are retried here with short jittered exponential backoff, honouring the server's
  RetryInfo delay when there is one, for up to ``--max-retry-time``.
* DEADLINE_EXCEEDED, INTERNAL, CANCELLED and UNAVAILABLE leave the outcome unknown: the commit
  may have been applied. For upsert / replace / update that is harmless (re-applying writes
  the same values). For insert, a re-sent batch that was already applied fails with
  ALREADY_EXISTS; we then read the batch's keys back and count it as written when every key is
  present (a commit is atomic, so all or none of its rows landed).
* NOT_FOUND for the session itself (a session the server dropped) is not about the data: the
  committer replaces the session and sends the commit again (it was not applied).
* Everything else is permanent. A permanent error caused by the data (a value Spanner rejects, a
  missing interleave parent, a duplicate key in insert mode) is isolated by bisecting the batch:
  every good row is committed and each bad row goes to the reject file with Spanner's reason.
  Insert mode's ALREADY_EXISTS and update mode's NOT_FOUND read the batch's keys back first:
  the rows whose key the table holds (lacks) are rejected and the rest committed, with no
  commit per row.
"""

from typing import Any

from . import errors
from .errors import is_session_not_found, is_transient, server_retry_delay
from .jobs import OPS, BatchJob, CommitStats, Gathered, Reordered, rows_of
from .pool import CommitPool
from .runner import CommitRunner, Committer, RetryPolicy
from .spanner import SpannerCommitter

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
    "Gathered",
    "Reordered",
    "RetryPolicy",
    "SpannerCommitter",
    "is_session_not_found",
    "is_transient",
    "rows_of",
    "server_retry_delay",
]


def __getattr__(name: str) -> Any:
    """``AMBIGUOUS``, ``DATA_ERRORS``, ``TRANSIENT``: made on first use (loader/commit/errors.py)."""
    if name in ("AMBIGUOUS", "DATA_ERRORS", "TRANSIENT"):
        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
