"""The one table of Google errors: which a commit retries, which leave its outcome unknown,
which a row can cause, which mean the schema changed, which are Spanner's push-back.

Every module that classifies a ``google.api_core`` exception (the commit runner, the adaptive
limiter in loader/throttle.py, the benchmark in loader/bench.py) asks here (see
SPANNER_FACTS.md, "Errors on commit"). google.api_core itself is imported only when something
is classified, so a load that meets no error does without it (issue #18).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional

from ..errors import ConfigError

if TYPE_CHECKING:
    from google.api_core import exceptions as gexc
else:

    class _Exceptions:
        """``google.api_core.exceptions``, imported on the first read of one of its names.

        Nothing here needs the classes before an error is raised (an exception of a class
        from a module never imported cannot have been raised, and ``except gexc.Aborted:``
        reads its class only when something is raised), so a load that meets no error never
        imports google.api_core. Modules on a load's path import ``gexc`` from here.
        """

        def __getattr__(self, name: str) -> Any:
            from google.api_core import exceptions

            return getattr(exceptions, name)

    gexc = _Exceptions()

ErrorClasses = tuple[type[Exception], ...]

TRANSIENT: ErrorClasses
"""Retried with backoff: Spanner's push-back and dropped or stalled connections."""
AMBIGUOUS: ErrorClasses
"""Transient errors after which we cannot know whether the commit was applied."""
DATA_ERRORS: ErrorClasses
"""Permanent errors that a particular row can cause (bisect to find it)."""
PUSH_BACK: ErrorClasses
"""Spanner pushing back on load: ABORTED and RESOURCE_EXHAUSTED, and DEADLINE_EXCEEDED (a
commit that took longer than we allow: latency off the scale). The adaptive limiter lowers its
limit on these."""


@functools.cache
def _tables() -> dict[str, ErrorClasses]:
    from google.api_core import exceptions as g

    return {
        "TRANSIENT": (
            g.Aborted,
            g.ServiceUnavailable,
            g.DeadlineExceeded,
            g.ResourceExhausted,
            g.InternalServerError,
            g.Cancelled,
        ),
        "AMBIGUOUS": (g.DeadlineExceeded, g.InternalServerError, g.Cancelled, g.ServiceUnavailable),
        "DATA_ERRORS": (
            g.FailedPrecondition,
            g.InvalidArgument,
            g.OutOfRange,
            g.NotFound,
            g.AlreadyExists,
        ),
        "PUSH_BACK": (g.Aborted, g.ResourceExhausted, g.DeadlineExceeded),
    }


def __getattr__(name: str) -> ErrorClasses:
    """The tables above, made on first use (read them as ``errors.TRANSIENT`` in an
    ``except`` clause, not imported by name, to keep google.api_core out of an error-free
    run)."""
    if name not in ("TRANSIENT", "AMBIGUOUS", "DATA_ERRORS", "PUSH_BACK"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _tables()[name]


#: The status names Spanner's own messages use, for reject reasons.
_CODE_NAMES = {
    "FailedPrecondition": "FAILED_PRECONDITION",
    "InvalidArgument": "INVALID_ARGUMENT",
    "OutOfRange": "OUT_OF_RANGE",
    "NotFound": "NOT_FOUND",
    "AlreadyExists": "ALREADY_EXISTS",
}
_SESSION_RESOURCE = "type.googleapis.com/google.spanner.v1.Session"


_PLUGIN_FAILED = "getting metadata from plugin failed"


def is_credentials_failure(exc: BaseException) -> bool:
    """UNAVAILABLE from gRPC itself because the call's auth metadata plugin raised (expired or
    revoked credentials, no network to the token endpoint): the request never left, so it is
    not Spanner being unreachable and the outcome is known (nothing was sent)."""
    return isinstance(exc, gexc.ServiceUnavailable) and _PLUGIN_FAILED in str(exc).lower()


def from_grpc(e: Any) -> Exception:
    """The exception for a ``grpc.RpcError``: google.api_core's (as the gapic layer raises),
    but a credentials failure (:func:`is_credentials_failure`) is a permanent ConfigError."""
    error: Exception = gexc.from_grpc_error(e)  # type: ignore[no-untyped-call]
    return credentials_error(error) if is_credentials_failure(error) else error


def credentials_error(exc: BaseException) -> ConfigError:
    """The ConfigError for a credentials failure (:func:`is_credentials_failure`)."""
    from ..connection import _no_credentials

    message = str(getattr(exc, "message", exc)).splitlines()[0]
    return ConfigError(f"Google Cloud credentials failed: {message}", hint=_no_credentials().hint)


_RESUMABLE_INTERNAL = ("RST_STREAM", "Received unexpected EOS on DATA frame")


def is_retryable_read(exc: BaseException) -> bool:
    """Worth asking a read-only stream again (from its last resume token; reads are
    idempotent): UNAVAILABLE, ABORTED, RESOURCE_EXHAUSTED, and INTERNAL for a stream the
    transport broke (as google-cloud-spanner's snapshot reads retry)."""
    if is_credentials_failure(exc):
        return False
    if isinstance(exc, (gexc.ServiceUnavailable, gexc.Aborted, gexc.ResourceExhausted)):
        return True
    return isinstance(exc, gexc.InternalServerError) and any(
        m in str(exc) for m in _RESUMABLE_INTERNAL
    )


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, _tables()["TRANSIENT"]) and not is_credentials_failure(exc)


def is_aborted(exc: BaseException) -> bool:
    """ABORTED: a lock conflict (the emulator aborts every concurrent commit)."""
    return isinstance(exc, gexc.Aborted)


def is_push_back(exc: BaseException) -> bool:
    return isinstance(exc, _tables()["PUSH_BACK"])


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
    if not isinstance(exc, gexc.NotFound):
        return False
    from google.rpc.error_details_pb2 import ResourceInfo

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
