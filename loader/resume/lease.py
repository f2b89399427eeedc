"""One run at a time per load job: a lease in the job's checkpoint state.

Two runs of the same job (same database, table, sources and mode) share one checkpoint. Run
side by side, the second would resume from the first one's resume point, write the same rows
again (false duplicate-key rejects in insert mode) and overwrite the first one's progress. So
a run takes the job's lease before it reads the checkpoint and keeps it while it loads:

* The lease lives in the state store as ``lease/<term>`` rows (the term zero-padded, so one
  term's part is never a prefix of another's). A run takes term ``n + 1`` with an *insert*
  that fails when the row exists (:meth:`StateStore.claim`): of two runs that start at the same
  moment, one gets it and the other stops.
* The holder renews its row every ``ttl / 3`` seconds from a background thread. A run finds the
  lease free when its newest term was released, has expired (``expires``, wall-clock seconds),
  or names a process on this host that no longer runs (a run killed with -9 on this machine
  is taken over at once; one on another machine after ``ttl`` seconds).
* A holder that sees a newer term than its own (it was paused past its expiry and another run
  took over) has lost the lease: :meth:`check`, called at every checkpoint, stops it.

A local ``--state-file`` is also locked as a whole with ``flock`` (see
:class:`loader.state.FileStateStore`), since two processes would rewrite each other's copy.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from ..errors import LeaseHeld, LoaderError, StateError
from .stores import StateStore

PREFIX = "lease/"
_LIVE: set[str] = set()
"""Owners of the leases this process holds now (acquired, not yet released)."""
DEFAULT_TTL = 90.0
RELEASE_TIMEOUT = 15.0
"""Seconds :meth:`Lease.release` waits for the store before leaving the lease to lapse."""


def _term_part(term: int) -> str:
    return f"{PREFIX}{term:010d}"


def _process_start(pid: int) -> Optional[str]:
    """The start time of ``pid`` in clock ticks since boot (Linux), to tell a live process from
    a later one that reused its pid; None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: alive
        pass
    return True


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass
class Lease:
    """The lease of one table of one job; ``acquire`` before loading, ``release`` after."""

    store: StateStore
    run: str
    table: str
    ttl: float = DEFAULT_TTL
    release_timeout: float = RELEASE_TIMEOUT
    clock: Callable[[], float] = time.time
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    term: int = 0
    notes: list[str] = field(default_factory=list)
    _lost: Optional[LoaderError] = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None
    _started: float = 0.0

    def _value(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "process_start": _process_start(self.pid),
            "started": self._started,
            "expires": self.clock() + self.ttl,
        }

    def _newest(self) -> tuple[int, Optional[dict[str, Any]]]:
        terms = self.store.parts(self.run, self.table, PREFIX)
        best, value = 0, None
        for part, v in terms.items():
            try:
                n = int(part[len(PREFIX) :])
            except ValueError:
                continue
            if n > best:
                best, value = n, v
        return best, value

    def _free(self, holder: dict[str, Any]) -> Optional[str]:
        """Why ``holder``'s lease no longer holds (a note), or None while it does."""
        if holder.get("released"):
            return ""
        if float(holder.get("expires", 0)) <= self.clock():
            return f"took over the lease of a run that stopped renewing it ({_desc(holder)})"
        if holder.get("host") == self.host and isinstance(holder.get("pid"), int):
            pid = int(holder["pid"])
            if pid == self.pid and holder.get("process_start") == _process_start(pid):
                # this very process: held while another load() of it holds the lease; one
                # that ended without writing its release (its store failed) holds nothing
                if holder.get("owner") in _LIVE:
                    return None
                return "took over the lease of an earlier load in this process that ended"
            if not _pid_alive(pid) or (
                holder.get("process_start") is not None
                and holder.get("process_start") != _process_start(pid)
            ):
                return (
                    f"took over the lease of a run on this host that no longer runs "
                    f"({_desc(holder)})"
                )
        return None

    def acquire(self) -> None:
        """Take the lease, or raise :class:`LeaseHeld` naming the run that holds it."""
        self._started = self.clock()
        newest, holder = self._newest()
        if holder is not None:
            why = self._free(holder)
            if why is None:
                raise self._held(holder)
            if why:
                self.notes.append(f"{self.table}: {why}")
        term = newest + 1
        if not self.store.claim(self.run, self.table, _term_part(term), self._value()):
            _, holder = self._newest()
            raise self._held(holder or {})
        self.term = term
        _LIVE.add(self.owner)
        for n in range(max(1, newest - 2), term):  # older terms, now meaningless
            self.store.delete_prefix(self.run, self.table, _term_part(n))
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"lease-{self.table}", daemon=True
        )
        self._thread.start()

    def _held(self, holder: dict[str, Any]) -> LeaseHeld:
        until = float(holder.get("expires", 0))
        return LeaseHeld(
            f"{self.table}: another run of this job is loading it ({_desc(holder)}); two runs "
            "would write the same rows and overwrite each other's progress",
            hint="wait for that run to end, then run this command again (it resumes from the "
            f"recorded progress); if that run was killed on another machine, its lease lapses "
            f"at {_utc(until)}",
        )

    def _renew_loop(self) -> None:
        period = self.ttl / 3
        while not self._stop.wait(period):
            try:
                self.renew()
            except Exception:  # noqa: BLE001 - a missed renewal is retried; only a newer
                continue  # term (or, for a gs:// state file, its generation check) ends a run
            if self._lost is not None:
                return

    def renew(self) -> None:
        """Extend the lease; records it lost if another run took a newer term."""
        newest, holder = self._newest()
        if newest != self.term:
            self._lost = StateError(
                f"{self.table}: this run lost the job's lease to another run "
                f"({_desc(holder or {})}) while it was loading",
                hint="let that run finish the load; this run's committed rows are kept",
            )
            return
        self.store.put(self.run, self.table, _term_part(self.term), self._value())

    def check(self) -> None:
        """Raise when the lease was lost (called at each checkpoint)."""
        if self._lost is not None:
            raise self._lost

    def release(self) -> None:
        """Stop renewing and give the lease up (a later run need not wait for it to lapse).

        Best effort and bounded: the state store's reads do not end while the Spanner endpoint
        is down (the client restarts a streamed read on UNAVAILABLE without limit), so the
        renewal thread and the release write get ``release_timeout`` seconds together, on a
        daemon thread; an unreleased lease lapses by itself."""
        _LIVE.discard(self.owner)
        self._stop.set()
        thread, self._thread = self._thread, None
        term, self.term = self.term, 0

        def give_up() -> None:
            if thread is not None:
                thread.join()
            if term and self._lost is None:
                try:
                    newest, _ = self._newest()
                    if newest == term:
                        self.store.put(
                            self.run,
                            self.table,
                            _term_part(term),
                            {**self._value(), "released": True},
                        )
                except Exception:  # noqa: BLE001 - an unreleased lease lapses by itself
                    pass

        if thread is None and not term:
            return
        releasing = threading.Thread(
            target=give_up, name=f"lease-release-{self.table}", daemon=True
        )
        releasing.start()
        releasing.join(self.release_timeout)


def _desc(holder: dict[str, Any]) -> str:
    started = holder.get("started")
    when = f", started {_utc(float(started))}" if started else ""
    return f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}{when}"
