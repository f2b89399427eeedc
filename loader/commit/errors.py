"""The one table of Google errors: which a commit retries, which leave its outcome unknown,
which a row can cause, which mean the schema changed, which are Spanner's push-back.

Every module that classifies a ``google.api_core`` exception (the commit runner, the adaptive
limiter in loader/throttle.py, the benchmark in loader/bench.py) asks here (see
SPANNER_FACTS.md, "Errors on commit").
"""

from __future__ import annotations

from typing import Optional

from google.api_core import exceptions as gexc

#: Retried with backoff: Spanner's push-back and dropped or stalled connections.
TRANSIENT = (
    gexc.Aborted,
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.ResourceExhausted,
    gexc.InternalServerError,
    gexc.Cancelled,
)
#: Transient errors after which we cannot know whether the commit was applied.
AMBIGUOUS = (
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.Cancelled,
    gexc.ServiceUnavailable,
)
#: Permanent errors that a particular row can cause (bisect to find it).
DATA_ERRORS = (
    gexc.FailedPrecondition,
    gexc.InvalidArgument,
    gexc.OutOfRange,
    gexc.NotFound,
    gexc.AlreadyExists,
)
#: Spanner pushing back on load: ABORTED and RESOURCE_EXHAUSTED, and DEADLINE_EXCEEDED (a commit
#: that took longer than we allow: latency off the scale). The adaptive limiter lowers its
#: limit on these.
PUSH_BACK = (gexc.Aborted, gexc.ResourceExhausted, gexc.DeadlineExceeded)

#: The status names Spanner's own messages use, for reject reasons.
_CODE_NAMES = {
    "FailedPrecondition": "FAILED_PRECONDITION",
    "InvalidArgument": "INVALID_ARGUMENT",
    "OutOfRange": "OUT_OF_RANGE",
    "NotFound": "NOT_FOUND",
    "AlreadyExists": "ALREADY_EXISTS",
}
_SESSION_RESOURCE = "type.googleapis.com/google.spanner.v1.Session"


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, TRANSIENT)


def is_aborted(exc: BaseException) -> bool:
    """ABORTED: a lock conflict (the emulator aborts every concurrent commit)."""
    return isinstance(exc, gexc.Aborted)


def is_push_back(exc: BaseException) -> bool:
    return isinstance(exc, PUSH_BACK)


def server_retry_delay(exc: BaseException) -> Optional[float]:
    """The RetryInfo delay a server attached to an error, in seconds, if any."""
    from google.rpc.error_details_pb2 import RetryInfo

    for detail in getattr(exc, "details", None) or ():
        if isinstance(detail, RetryInfo):
            return detail.retry_delay.seconds + detail.retry_delay.nanos / 1e9
    errors = getattr(exc, "errors", None) or ()
    for cause in errors:
        md = getattr(cause, "trailing_metadata", None)
        if callable(md):
            try:
                blob = dict(md() or ()).get("google.rpc.retryinfo-bin")
            except Exception:  # noqa: BLE001 - metadata of a foreign error object
                blob = None
            if blob:
                info = RetryInfo()
                info.ParseFromString(blob)
                return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return None


def is_session_not_found(exc: BaseException) -> bool:
    """NOT_FOUND about the session the request ran in (not about a table, column or row).

    Spanner names the missing resource in a ResourceInfo detail; its message starts
    "Session not found" (the emulator says the same).
    """
    from google.rpc.error_details_pb2 import ResourceInfo

    if not isinstance(exc, gexc.NotFound):
        return False
    for detail in exc.details or ():
        if isinstance(detail, ResourceInfo) and detail.resource_type == _SESSION_RESOURCE:
            return True
    return "session not found" in str(exc.message).lower()


def is_schema_error(e: BaseException) -> bool:
    """NOT_FOUND for a table or column is about the schema, not about one row."""
    msg = str(getattr(e, "message", e)).lower()
    return isinstance(e, gexc.NotFound) and (
        "table not found" in msg or "column not found" in msg or "database not found" in msg
    )


def _reason(e: BaseException) -> str:
    """``CODE: first line of Spanner's message``, for a reject file."""
    code = type(e).__name__
    msg = str(getattr(e, "message", e)).splitlines()[0] if str(e) else ""
    return f"{_CODE_NAMES.get(code, code)}: {msg}"
