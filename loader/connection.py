"""Connect to the target database: a real instance with Application Default Credentials, or
the emulator (SPANNER_EMULATOR_HOST, or one we start for the run with ``--emulator``)."""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from .access import DatabaseAccess
from .config import Target
from .emulator import EMULATOR_HOST_ENV, EmulatorProcess, ensure_database, start_emulator
from .errors import ConfigError, ConnectError, Interrupted, not_spanner

SPANNER_ENDPOINT = "spanner.googleapis.com:443"
SPANNER_DATA_SCOPE = "https://www.googleapis.com/auth/spanner.data"
_POLL_S = 0.2
"""How often a wait for an endpoint looks at the stop event (a first Ctrl-C)."""


def split_host_port(address: str, what: str) -> tuple[str, int]:
    """'host:port' (or '[v6]:port') -> (host, port); ConfigError naming ``what`` otherwise."""
    host, sep, port = address.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{what}={address!r} is not host:port",
            hint=f"e.g. {what}=localhost:9010 (no scheme), or unset it",
        )
    return host, int(port)


def reach(
    host: str, port: int, label: str, timeout: float, hint: str, plaintext: bool = False
) -> None:
    """Resolve the host and open a TCP connection: a name that does not resolve and a port
    that refuses are told at once, not after the whole timeout; and with ``plaintext`` (the
    emulator), a server that answers HTTP/2's preface as another kind of server."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise ConnectError(
            f"cannot resolve the host of {label}: {e.strerror or e}",
            hint="check the host name and the network",
        ) from None
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        # (a longer wait does not help a port that refuses)
        hint = hint.replace(", or raise `connect_timeout`", "").replace(
            " or raise `connect_timeout`", ""
        )
        raise ConnectError(f"{label} refused the connection", hint=hint) from None
    except OSError:
        return  # a timeout or another failure: the gRPC wait below tells it, and honours stop
    with conn:
        if plaintext:
            other = _not_http2(conn, min(timeout, 0.5))
            if other is not None:
                raise ConnectError(
                    f"{label} is not a gRPC server: it answered {other!r}",
                    hint="point it at the emulator's gRPC port (9010 by default; 9020 is its "
                    "REST port)",
                )


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""HTTP/2's client connection preface and an empty SETTINGS frame."""


def _not_http2(conn: socket.socket, timeout: float) -> Optional[str]:
    """What a plaintext server answered to HTTP/2's preface when that is not HTTP/2 (its
    first line: an HTTP/1 server's "HTTP/1.1 400 Bad Request"); None when it answers with
    a SETTINGS frame, as a gRPC server does, or says nothing in time (the gRPC wait decides)."""
    try:
        conn.settimeout(timeout)
        conn.sendall(_H2_PREFACE)
        data = conn.recv(256)
    except OSError:
        return None
    if len(data) < 9 or data[3] == 0x04:  # nothing, a closed connection, or SETTINGS
        return None
    first = data.split(b"\n", 1)[0].strip()
    return first[:80].decode("utf-8", "replace") or repr(data[:16])


def _endpoint() -> tuple[str, str, str, bool]:
    """(gRPC target, label, hint, is the emulator) of the Spanner endpoint in use."""
    emulator = os.environ.get(EMULATOR_HOST_ENV)
    if emulator:
        split_host_port(emulator, EMULATOR_HOST_ENV)
        label = f"the Spanner emulator at {emulator} ({EMULATOR_HOST_ENV})"
        hint = (
            f"start one (spanner-loader emulator start) and point {EMULATOR_HOST_ENV} at it, "
            f"or raise `connect_timeout` (with `emulator=True` and {EMULATOR_HOST_ENV} unset, "
            "a load starts an emulator of its own; without `emulator=True`, unsetting it sends "
            "the load to Spanner itself)"
        )
        return emulator.strip(), label, hint, True
    label = f"Spanner at {SPANNER_ENDPOINT}"
    hint = "check the network (a proxy or firewall?), or raise `connect_timeout`"
    return SPANNER_ENDPOINT, label, hint, False


def probe_spanner(timeout: float, stop: Optional[threading.Event] = None) -> None:
    """Fail fast when the Spanner endpoint does not answer: the emulator named by
    SPANNER_EMULATOR_HOST, else Spanner's public endpoint.

    The client library would retry an unreachable endpoint for up to an hour, silently; here a
    gRPC channel must become ready (TCP, TLS for Spanner, and the HTTP/2 handshake, which a
    server of another kind never completes) within ``timeout`` seconds. Setting ``stop`` ends
    the wait at once with :class:`Interrupted`.
    """
    import grpc

    target, _, _, emulator = reach_endpoint(timeout)
    channel = (
        grpc.insecure_channel(target)
        if emulator
        else grpc.secure_channel(target, grpc.ssl_channel_credentials())
    )
    try:
        wait_ready(channel, timeout, stop)
    finally:
        _close_later(channel)


def reach_endpoint(timeout: float) -> tuple[str, str, str, bool]:
    """:func:`reach` the endpoint in use (a name that does not resolve, a port that refuses:
    told at once); returns :func:`_endpoint`'s answer."""
    endpoint = target, label, hint, emulator = _endpoint()
    host, port = split_host_port(target, EMULATOR_HOST_ENV if emulator else "endpoint")
    reach(host, port, label, min(timeout, 5.0), hint, plaintext=emulator)
    return endpoint


def wait_ready(channel: Any, timeout: float, stop: Optional[threading.Event] = None) -> None:
    """Wait until ``channel`` (to the endpoint in use) is ready: ConnectError after
    ``timeout`` seconds, Interrupted as soon as ``stop`` is set."""
    import grpc

    _, label, hint, _ = _endpoint()
    ready = grpc.channel_ready_future(channel)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                ready.result(timeout=max(0.0, min(_POLL_S, deadline - time.monotonic())))
                return
            except grpc.FutureTimeoutError:
                if stop is not None and stop.is_set():
                    raise Interrupted(
                        f"stopped while connecting to {label}; nothing was written",
                        hint="run the same command again",
                    ) from None
                if time.monotonic() >= deadline:
                    raise ConnectError(
                        f"{label} did not answer as a gRPC server within {timeout:g} s",
                        hint=hint,
                    ) from None
    finally:
        ready.cancel()


def open_channel() -> Any:
    """A gRPC channel to the Spanner endpoint in use: plain to the emulator; to Spanner,
    TLS with Application Default Credentials (scope spanner.data) on every call."""
    import grpc

    target, _, _, emulator = _endpoint()
    # no size limits on messages (a commit may be up to 100 MiB), and a keepalive ping every
    # 2 minutes (a connection idle between waves is not silently dropped), as the client sets
    options = [
        ("grpc.max_send_message_length", -1),
        ("grpc.max_receive_message_length", -1),
        ("grpc.keepalive_time_ms", 120000),
    ]
    if emulator:
        return grpc.insecure_channel(target, options=options)
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from google.auth.transport.grpc import secure_authorized_channel
    from google.auth.transport.requests import Request

    try:
        credentials, _ = google.auth.default(scopes=[SPANNER_DATA_SCOPE])
    except DefaultCredentialsError as e:
        raise _no_credentials() from e
    return secure_authorized_channel(credentials, Request(), target, options=options)


def _close_later(channel: Any) -> None:
    """Close a probe channel without waiting for it: grpc's close blocks until the channel's
    connectivity poll wakes up (up to 0.2 s), time a load would otherwise spend before its
    first commit."""
    threading.Thread(target=channel.close, name="probe-close", daemon=True).start()


def _probe_beside(timeout: float, stop: Optional[threading.Event]) -> Callable[[], None]:
    """Start :func:`probe_spanner` on a thread; the returned function waits for it and
    raises what it raised. The probe mostly waits on the network, so the client library is
    imported and set up meanwhile instead of after it."""
    # what the probe imports, imported here: the thread then imports nothing while this one
    # imports the client library
    import grpc._channel  # noqa: F401
    import grpc._utilities  # noqa: F401
    import grpc.experimental  # noqa: F401

    failure: list[BaseException] = []

    def probe() -> None:
        try:
            probe_spanner(timeout, stop)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            failure.append(e)

    thread = threading.Thread(target=probe, name="spanner-probe", daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if failure:
            raise failure[0]

    return wait


def make_client(project: str) -> Any:
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import spanner

    try:
        return spanner.Client(project=project)
    except DefaultCredentialsError as e:
        raise _no_credentials() from e


def _no_credentials() -> ConfigError:
    return ConfigError(
        "no Google Cloud credentials found",
        hint="run `gcloud auth application-default login`, set "
        "GOOGLE_APPLICATION_CREDENTIALS, or use `emulator=True` / SPANNER_EMULATOR_HOST",
    )


@contextmanager
def _emulator_for(target: Target, notes: Optional[list[str]]) -> Iterator[None]:
    """With ``target.emulator`` and no SPANNER_EMULATOR_HOST: an emulator started for the
    run, named in SPANNER_EMULATOR_HOST while it runs."""
    started: Optional[EmulatorProcess] = None
    if (target.ddl or target.ddl_dialect) and not target.emulator:
        raise ConfigError(
            f"`{'ddl' if target.ddl else 'ddl_dialect'}` is only applied with `emulator=True`",
            hint="apply schema changes to a real database with gcloud or your migration tool",
        )
    if target.emulator and not os.environ.get(EMULATOR_HOST_ENV):
        started = start_emulator()
        os.environ[EMULATOR_HOST_ENV] = started.address
        if notes is not None:
            notes.append(
                f"started a Spanner emulator at {started.address} for this run; it stops (and "
                "its data is gone) when the run ends. Keep one running with "
                "`spanner-loader emulator start` to inspect the data afterwards"
            )
    try:
        yield
    finally:
        if started is not None:
            os.environ.pop(EMULATOR_HOST_ENV, None)
            started.stop()


@contextmanager
def connect_access(
    target: Target,
    notes: Optional[list[str]] = None,
    stop: Optional[threading.Event] = None,
    max_retry_time: Optional[float] = None,
) -> Iterator[DatabaseAccess]:
    """Yield the load's :class:`~loader.access.DatabaseAccess` for the target: Spanner's
    gRPC protocol spoken directly (:class:`loader.wire.WireAccess`), its client library made
    only when something asks for it. ``target.emulator`` (creating the instance and database,
    applying DDL: admin calls) makes the client at once. Fails as :func:`connect` does when
    the endpoint does not answer. ``max_retry_time``: how long a read or CreateSession is
    retried (the load's `max_retry_time`; the wire default when None)."""
    from .wire import WireAccess

    with _emulator_for(target, notes):
        reach_endpoint(target.connect_timeout)
        channel = open_channel()
        try:
            wait_ready(channel, target.connect_timeout, stop)
            # the emulator's admin calls need the client library now; otherwise it waits
            client = _client_database(target) if target.emulator else None
            access = WireAccess(
                target.path, channel, functools.partial(_client_database, target), client=client
            )
            if max_retry_time is not None:
                access.max_retry_time = max_retry_time
            yield access
        finally:
            _close_later(channel)


def _client_database(target: Target, client: Any = None, create: bool = True) -> Any:
    """The client library's ``Database`` of the target (``client``: made if not given);
    with ``target.emulator`` the instance and database are created if missing and the DDL
    files applied (not with ``create`` False: one that is missing is an error)."""
    if client is None:
        client = make_client(target.project)
    if target.emulator and not create:
        database = client.instance(target.instance).database(target.database)
        try:
            exists = database.exists()
        except Exception as e:
            hint = not_spanner(e)
            if hint is None:
                raise
            where = os.environ.get(EMULATOR_HOST_ENV, "the emulator")
            raise ConnectError(
                f"cannot look up database {target.database} on the emulator at {where}: "
                f"{getattr(e, 'message', e)}",
                hint=hint,
            ) from None
        if not exists:
            where = os.environ.get(EMULATOR_HOST_ENV, "the emulator")
            raise ConfigError(
                f"database {target.database} does not exist on the emulator at {where}",
                hint="check the database name (and SPANNER_EMULATOR_HOST: the emulator the "
                "load used)",
            )
        return database
    if target.emulator:
        return ensure_database(
            client, target.instance, target.database, target.ddl, dialect=target.ddl_dialect
        )
    return client.instance(target.instance).database(target.database)


@contextmanager
def connect(
    target: Target,
    notes: Optional[list[str]] = None,
    stop: Optional[threading.Event] = None,
    create: bool = True,
) -> Iterator[Any]:
    """Yield a google.cloud.spanner Database for the target.

    With ``target.emulator``: use the emulator named by SPANNER_EMULATOR_HOST, or start one for
    the duration of the run; create the instance and database if needed and apply the DDL files
    (not with ``create`` False, for a command that only reads: a missing one is an error).
    An endpoint that does not answer within ``target.connect_timeout`` raises
    :class:`~loader.errors.ConnectError` (see :func:`probe_spanner`).
    """
    with _emulator_for(target, notes):
        probed = _probe_beside(target.connect_timeout, stop)
        try:
            client = make_client(target.project)
        finally:
            probed()  # an endpoint that does not answer is told first, as before
        yield _client_database(target, client, create)
