"""Find, start and stop the official Cloud Spanner Emulator; create its instance and database.

The emulator binds with SO_REUSEPORT, so a leftover emulator on the same port silently takes
half of the connections: we always start on a port that was free a moment ago and stop the
process by its id.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from .errors import ConfigError, SchemaError, not_spanner

EMULATOR_HOST_ENV = "SPANNER_EMULATOR_HOST"
EMULATOR_BIN_ENV = "SPANNER_EMULATOR_BIN"
INSTALL_HINT = (
    "install the Google Cloud CLI with its emulator component "
    "(`gcloud components install cloud-spanner-emulator`, or Debian's "
    "google-cloud-cli-spanner-emulator package), set SPANNER_EMULATOR_BIN to the emulator_main "
    "binary, or run the gcr.io/cloud-spanner-emulator/emulator container and set "
    "SPANNER_EMULATOR_HOST=localhost:9010"
)


def find_emulator_binary() -> Optional[Path]:
    """The emulator_main binary: $SPANNER_EMULATOR_BIN, else under the Cloud SDK's bin/."""
    explicit = os.environ.get(EMULATOR_BIN_ENV)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    roots: list[Path] = []
    gcloud = shutil.which("gcloud")
    if gcloud:
        # .../google-cloud-sdk/bin/gcloud -> .../google-cloud-sdk
        roots.append(Path(os.path.realpath(gcloud)).parent.parent)
    roots += [
        Path("/usr/lib/google-cloud-sdk"),
        Path("/usr/share/google-cloud-sdk"),
        Path.home() / "google-cloud-sdk",
        Path("/opt/google-cloud-sdk"),
    ]
    for root in roots:
        candidate = root / "bin" / "cloud_spanner_emulator" / "emulator_main"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ConfigError(
                f"the Spanner emulator exited at start with code {proc.returncode}",
                hint="see its log; " + INSTALL_HINT,
            )
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ConfigError(f"the Spanner emulator did not listen on {host}:{port} in {timeout:.0f}s")


@dataclass
class EmulatorProcess:
    """A running emulator started by us."""

    host: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_emulator(
    timeout: float = 30.0, log_dir: Optional[Path] = None, port: Optional[int] = None
) -> EmulatorProcess:
    """Start emulator_main on a loopback port (``port``, else a free one) and wait until it
    accepts connections."""
    binary = find_emulator_binary()
    if binary is None:
        raise ConfigError("no Cloud Spanner Emulator found on this machine", hint=INSTALL_HINT)
    host = "127.0.0.1"
    if port is None:
        port = free_port()
    else:
        _check_port_free(host, port)
    log_dir = log_dir or Path(tempfile.gettempdir())
    log_path = log_dir / f"spanner-emulator-{port}.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [str(binary), "--host_port", f"{host}:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not the emulator's
    )
    log.close()
    try:
        _wait_for_port(host, port, proc, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return EmulatorProcess(host, port, proc, log_path)


def _bind_error(host: str, port: int, reuse_address: bool = False) -> Optional[OSError]:
    """Why a server could not listen on ``host:port`` now (None: it could)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse_address:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e
    return None


def _check_port_free(host: str, port: int) -> None:
    e = _bind_error(host, port, reuse_address=True)  # as the server binds: TIME_WAIT is free
    if e is not None:
        raise ConfigError(
            f"cannot start the emulator on {host}:{port}: {e.strerror}",
            hint="another process listens there (an emulator started earlier? "
            "`spanner-loader emulator stop --port "
            f"{port}` stops one started by spanner-loader); or choose another `port`",
        )


def _registry() -> Path:
    """Where ``emulator start`` records the emulators it leaves running, one file per port."""
    return Path(tempfile.gettempdir()) / "spanner-loader-emulators"


def record_started(em: EmulatorProcess) -> Path:
    """Note a background emulator so that ``emulator stop`` can find it."""
    folder = _registry()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{em.port}.pid"
    path.write_text(f"{em.process.pid}\n", encoding="ascii")
    return path


def _is_our_emulator(pid: int, port: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"emulator_main" in a for a in cmdline[:1]) and f":{port}".encode() in b" ".join(
        cmdline
    )


def stop_started(port: Optional[int] = None) -> list[tuple[int, int]]:
    """Stop the background emulators ``emulator start`` recorded (the one on ``port``, or all
    of them); returns (port, pid) of each one stopped. A record whose process is gone, or is
    no longer an emulator on that port (its pid reused), is dropped without a signal."""
    folder = _registry()
    records = sorted(folder.glob("*.pid")) if folder.is_dir() else []
    stopped: list[tuple[int, int]] = []
    for rec in records:
        try:
            rec_port, pid = int(rec.stem), int(rec.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            rec.unlink(missing_ok=True)
            continue
        if port is not None and rec_port != port:
            continue
        if _is_our_emulator(pid, rec_port):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            else:
                deadline = time.monotonic() + 10
                while _is_our_emulator(pid, rec_port) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _is_our_emulator(pid, rec_port):
                    os.kill(pid, signal.SIGKILL)
                # a process loses its memory (and /proc cmdline) before its sockets: a big
                # emulator's port stays taken a while after it looks gone
                while (
                    _bind_error("127.0.0.1", rec_port, reuse_address=True)
                    and time.monotonic() < deadline + 10
                ):
                    time.sleep(0.05)
                stopped.append((rec_port, pid))
        rec.unlink(missing_ok=True)
    return stopped


def split_ddl(text: str, postgresql: bool = False) -> list[str]:
    """Split a DDL file into statements: on each ';' outside a quoted string or name and
    outside a comment, which is left out; a statement that is all blank or comment is none.
    GoogleSQL: '...', "...", triple quotes and `...`, a backslash escaping the next
    character; comments ``--`` and ``#`` to the line's end and ``/* ... */``. PostgreSQL
    (``postgresql``): '...' and "..." with the quote doubled inside, no backslash escape,
    ``$tag$ ... $tag$``; comments ``--`` and ``/* ... */``."""
    statements: list[str] = []
    out: list[str] = []
    i, n = 0, len(text)
    dollar = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")
    while i < n:
        c = text[i]
        m = dollar.match(text, i) if postgresql and c == "$" else None
        if m is not None:
            end = text.find(m.group(0), m.end())
            end = n if end < 0 else end + len(m.group(0))
            out.append(text[i:end])
            i = end
        elif c in ("'\"" if postgresql else "'\"`"):
            triple = not postgresql and text[i : i + 3] in ("'''", '"""')
            quote = text[i : i + 3] if triple else c
            end = i + len(quote)
            while end < n and text[end : end + len(quote)] != quote:
                end += 2 if text[end] == "\\" and c != "`" and not postgresql else 1
            end = min(end + len(quote), n)  # ('' inside a PostgreSQL string: two strings)
            out.append(text[i:end])
            i = end
        elif text.startswith("--", i) or (c == "#" and not postgresql):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            out.append(" ")
            i = n if end < 0 else end + 2
        elif c == ";":
            statements.append("".join(out))
            out = []
            i += 1
        else:
            out.append(c)
            i += 1
    statements.append("".join(out))
    return [s.strip() for s in statements if s.strip()]


def ensure_database(
    client: Any,
    instance_id: str,
    database_id: str,
    ddl_files: Sequence[Path] = (),
    timeout: float = 120.0,
    dialect: Optional[str] = None,
) -> Any:
    """On an emulator: create the instance and database if missing and apply DDL files.

    Statements whose object already exists are skipped, so a smoke load can be re-run. A
    database created here has ``dialect`` ("googlesql" unless "postgresql"); one that exists
    must have it when it is given. When a statement fails, a database created here is dropped
    again (a re-run, the DDL fixed, starts from no database, of whatever dialect).
    """
    from google.api_core import exceptions as gexc
    from google.cloud.spanner_admin_database_v1 import DatabaseDialect

    texts: list[str] = []
    for path in ddl_files:
        try:
            texts.append(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"cannot read DDL file {path}: {e.strerror}") from e

    instance = client.instance(
        instance_id,
        configuration_name=f"{client.project_name}/instanceConfigs/emulator-config",
        display_name=instance_id,
        node_count=1,
    )
    pg = dialect == "postgresql"
    database = instance.database(database_id)  # of the dialect it has, if it exists
    created = False
    try:
        if not instance.exists():
            try:
                instance.create().result(timeout)
            except gexc.AlreadyExists:
                pass
        if not database.exists():
            as_pg = DatabaseDialect.POSTGRESQL if pg else DatabaseDialect.GOOGLE_STANDARD_SQL
            database = instance.database(database_id, database_dialect=as_pg)
            try:
                database.create().result(timeout)
                created = True
            except gexc.AlreadyExists:
                pass
    except gexc.GoogleAPICallError as e:
        raise ConfigError(
            f"cannot create {instance_id}/{database_id} on the emulator: {e.message}",
            hint=not_spanner(e)
            or "a database id is 2 to 30 characters (an instance id 2 to 64): lower-case "
            "letters, digits, '-' and '_', starting with a letter and not ending in '-' or '_'",
        ) from e
    if not created and dialect is not None:
        from .schema_reader import is_postgresql

        if is_postgresql(database) != pg:
            has = "GoogleSQL" if pg else "PostgreSQL"
            raise ConfigError(
                f"the emulator's database {database_id} exists as a {has} database, not {dialect}",
                hint="name another `database` (a new one is created with `ddl_dialect`), or "
                f"leave `ddl_dialect` out to load the {has} one",
            )
    if texts and not created and dialect is None:  # the database's own dialect
        from .schema_reader import is_postgresql

        pg = is_postgresql(database)
    statements = [stmt for text in texts for stmt in split_ddl(text, postgresql=pg)]
    if not created and not pg:
        statements = _leave_deferred(database, statements)
    try:
        for stmt in statements:
            _apply_ddl(database, stmt, timeout, pg, fresh=created)
    except ConfigError as e:
        if not created:
            raise
        try:
            database.drop()
        except gexc.GoogleAPICallError:
            raise e from e.__cause__
        dropped = f"{e.message} (the database {database_id}, created for it, was dropped again)"
        raise ConfigError(dropped, hint=e.hint) from e.__cause__
    return database


def _created_name(stmt: str) -> Optional[str]:
    """The name (lower case) of the index, or of the foreign key an ``ALTER TABLE ... ADD``
    names, that ``stmt`` creates, read as the deferral reads Spanner's DDL (loader/ddl.py);
    None for any other statement."""
    from .ddl import parse_foreign_keys, parse_index

    try:
        index = parse_index(stmt)
        if index is not None:
            return index.name.lower()
        if stmt.lstrip()[:5].upper() == "ALTER":  # (a CREATE TABLE's own are not deferred)
            named = [fk.name for fk in parse_foreign_keys(stmt) if fk.name]
            return named[0].lower() if named else None
    except SchemaError:  # not read: applied as it is
        return None
    return None


def _leave_deferred(database: Any, statements: list[str]) -> list[str]:
    """``statements`` without those creating an object an interrupted load deferred (dropped
    until it ends, and recorded): the DDL file would bring it back before the load resumed,
    so its rows would be counted without it and a duplicate under a unique index fail the
    statement here, not the re-creation at the end. The load re-creates it when it ends."""
    named = [(s, name) for s in statements if (name := _created_name(s)) is not None]
    if not named:
        return statements
    from .deferred import recorded

    try:
        deferred = {str(i.name).lower() for _, i in recorded(database, database.name) if i.name}
    except Exception:  # noqa: BLE001 - no record read: the statements as they are
        return statements
    left = {s for s, name in named if name in deferred}
    return [s for s in statements if s not in left]


#: How long a DDL statement waits for the emulator's one transaction at a time to be free.
DDL_BUSY_WAIT_S = 30.0


def _one_line(e: Exception) -> str:
    """The emulator's error, which quotes the whole statement, newlines and all, as one line."""
    return " ".join(str(getattr(e, "message", e)).split())


_POSTGRES_WORDS = re.compile(
    r"[(,]\s*(?:\w+|\"[^\"]*\")\s+(bigint|varchar|character varying|text|boolean|bytea|jsonb|"
    r"double precision|timestamptz|timestamp with time zone|real|serial|bigserial)\b"
    r"|primary key\s*\([^)]*\)\s*,?\s*\)",
    re.IGNORECASE,
)
"""PostgreSQL DDL that GoogleSQL DDL does not use (for the hint of a statement a GoogleSQL
database cannot parse): a column of a PostgreSQL-only type (the type word where a column
definition has its type, so a GoogleSQL column *named* Text or Real is not taken for one), or
the key inside the table's parentheses."""


def reads_as_postgresql(stmt: str) -> bool:
    return _POSTGRES_WORDS.search(stmt) is not None


def _apply_ddl(
    database: Any, stmt: str, timeout: float, pg: bool = False, fresh: bool = False
) -> None:
    """Apply one statement, skipping it when its object exists, unless the database is
    ``fresh`` (created for these statements: an object there is an earlier statement's, whose
    name this one repeats, ignoring case as Spanner's names do). The emulator refuses a schema
    change while any read-write transaction runs (another load into the same database): that
    is waited out for up to :data:`DDL_BUSY_WAIT_S` seconds."""
    from google.api_core import exceptions as gexc

    deadline = time.monotonic() + DDL_BUSY_WAIT_S
    first = stmt.splitlines()[0]
    while True:
        try:
            database.update_ddl([stmt]).result(timeout)
            return
        except (gexc.FailedPrecondition, gexc.AlreadyExists, gexc.InvalidArgument) as e:
            text = str(e)
            if ("Duplicate name" in text or "already exists" in text) and not fresh:
                return
            if "Duplicate name" in text:  # two objects of one name in the file
                raise ConfigError(
                    f"DDL statement failed: {first}: {_one_line(e)}",
                    hint="an earlier statement of the `ddl` files creates an object of that "
                    "name (Spanner's names are the same whatever their case): rename one",
                ) from e
            if "concurrent schema change" in text:
                if time.monotonic() < deadline:
                    time.sleep(0.25)
                    continue
                raise ConfigError(
                    f"DDL statement not applied: {first}: the emulator was busy with another "
                    f"transaction for {DDL_BUSY_WAIT_S:.0f} s",
                    hint="another load or schema change is running on this emulator database "
                    "(the emulator runs one at a time); run again when it has ended",
                ) from e
            reason = _one_line(e)
            hint = "fix the statement in the `ddl` file"
            if "uniqueness violation" in reason.lower():  # the statement is right, the rows not
                hint = (
                    "the table holds rows that clash under the index: remove them; if a load "
                    "with `defer_indexes='all'` dropped it and stopped, run that load again "
                    "without `ddl` (it re-creates the index when it ends, naming the clash)"
                )
            elif not pg and "Error parsing" in reason and reads_as_postgresql(stmt):
                hint += (
                    "; it reads as PostgreSQL DDL: a database for it is created with "
                    "`ddl_dialect='postgresql'`"
                )
            raise ConfigError(f"DDL statement failed: {first}: {reason}", hint=hint) from e
        except (gexc.InternalServerError, gexc.Unknown, gexc.MethodNotImplemented) as e:
            # what the emulator cannot do yet (a UUID column): an internal check fails
            reason = _one_line(e)
            raise ConfigError(
                f"DDL statement failed: {first}: the emulator could not apply it ({reason})",
                hint="the emulator may not support this statement yet (see its release notes); "
                "leave it out of the `ddl` file for the emulator",
            ) from e
