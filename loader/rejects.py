"""Rejected rows: what was wrong with them and where they go.

A reject file is JSON Lines, one object per rejected row::

    {"source": "gs://b/orders.csv", "line": 17, "record": 16, "column": "Amount",
     "reason": "not a NUMERIC: '1.2.3'", "text": "17,1.2.3,...", "table": "Orders",
     "load_id": "20261124T094700Z-3f9a2c"}

``line`` is the 1-based physical line where the row starts in the (decompressed) source,
``record`` the 1-based data record number (header excluded), ``column`` is null for a row-level
problem (wrong field count, a row over a commit budget, a commit Spanner refused). A ``text``
longer than :data:`MAX_TEXT` characters is cut, with ``"text_length"`` giving its length.
The file is appended to across runs; ``load_id`` (also in the load report) tells one
invocation's lines from another's.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import re
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Optional

from .errors import ConfigError, TooManyBadRows
from .outfiles import check_writable, path_problem

MAX_TEXT = 1024
"""Characters of a rejected row's or field's text kept in the reject file; a longer text is
cut there and its full length given as ``text_length``."""


def new_load_id(now: dt.datetime) -> str:
    """An id for one invocation of a load: its UTC start time and a random suffix."""
    return now.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)


@dataclass(frozen=True)
class Reject:
    """One rejected row."""

    source: str
    line: Optional[int]
    record: Optional[int]
    column: Optional[str]
    reason: str
    text: Optional[str] = None
    table: Optional[str] = None


class RejectWriter:
    """Appends rejects to a JSON Lines file, opened lazily on the first reject; thread-safe."""

    def __init__(
        self,
        path: Optional[Path],
        load_id: Optional[str] = None,
        speak: Optional[Callable[[str], str]] = None,
    ) -> None:
        self.path = path
        self.load_id = load_id
        self.speak = speak
        """Rewrites a reason as the file says it (the options it names as the CLI's flags)."""
        self.count = 0
        self._fh: Optional[IO[str]] = None
        self._lock = threading.Lock()

    def check(self) -> None:
        """Fail before anything is loaded if the reject file cannot be created or appended to.

        Creates missing parent folders; a file that did not exist is removed again, so a load
        without rejects still leaves none. A full disk only shows on a write: see :meth:`write`.
        """
        if self.path is None:
            return
        try:
            check_writable(self.path)
        except OSError as e:
            raise self._error(e, started=False) from e

    def write(self, reject: Reject) -> None:
        with self._lock:
            self.count += 1
            if self.path is None:
                return
            try:
                if self._fh is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fh = open(self.path, "a", encoding="utf-8")
                line = dict(reject.__dict__)  # plain values: no deep copy (asdict's) needed
                if self.speak is not None and "`" in reject.reason:
                    line["reason"] = self.speak(reject.reason)
                text = line.get("text")
                if text is not None and len(text) > MAX_TEXT:
                    # a 100 MB field is not copied whole: its start and its length say enough
                    line["text"] = text[:MAX_TEXT]
                    line["text_length"] = len(text)
                if self.load_id is not None:
                    line["load_id"] = self.load_id
                self._fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                self._fh.flush()
            except OSError as e:
                raise self._error(e) from e

    def _error(self, e: OSError, started: bool = True) -> ConfigError:
        """``started``: the load has begun (a re-run resumes it); else nothing was read."""
        full = e.errno in (errno.ENOSPC, errno.EDQUOT)
        return ConfigError(
            f"cannot write the reject file {self.path}: {path_problem(e, self.path)}",
            hint=("free disk space, or choose" if full else "choose")
            + " a writable path with `rejects`"
            + (" (a re-run resumes where this one stopped)" if started else ""),
        )

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                fh, self._fh = self._fh, None
                try:
                    fh.close()
                except OSError:
                    pass  # its flush failed: already reported by write()


_UNIQUE_INDEX = re.compile(
    r"(?i)unique (?:index )?violation on index [`\"]?([A-Za-z_][A-Za-z0-9_]*)"
)
"""The unique index an ALREADY_EXISTS names (the emulator's "UNIQUE violation on index X",
Spanner's "Unique index violation on index X")."""
FIX_ADVICE = (
    "fix the data or raise `max_bad_rows` (a load of a fixed file runs again with "
    "`restart=True`: a changed file is not resumed)"
)
"""The end of the hint for rows the loader itself refused (not Spanner): the runner that
knows nothing is committed says instead that the fixed file loads as it is (the error's
``generic_advice`` tells it this advice was given)."""


INSERT_FIX_ADVICE = (
    "fix the data or raise `max_bad_rows` (a fixed file is not resumed: load it again with "
    "`restart=True` and `skip_existing=True`, which leaves out the rows committed before)"
)
""":data:`FIX_ADVICE` in insert mode, where a restart would refuse the rows committed."""

NO_STATE_FIX_ADVICE = (
    "fix the data or raise `max_bad_rows` (the load keeps no checkpoints: the same command "
    "loads the fixed file from its start)"
)
""":data:`FIX_ADVICE` of a load without checkpoints (``state=False``): nothing to restart."""

NO_STATE_INSERT_FIX_ADVICE = (
    "fix the data or raise `max_bad_rows` (the load keeps no checkpoints: load the fixed file "
    "again with `skip_existing=True`, which leaves out the rows committed before)"
)
""":data:`NO_STATE_FIX_ADVICE` in insert mode, where the rows committed would be refused."""

DRY_RUN_FIX_ADVICE = "fix the data or raise `max_bad_rows`"
""":data:`FIX_ADVICE` of a dry run (``validate``): nothing was written, nothing to restart."""


def fix_advice_for(dry_run: bool, stateful: bool, insert: bool) -> str:
    """How a fixed file is loaded again, for a load that stops over ``max_bad_rows``:
    ``stateful``, it keeps checkpoints (a changed file is then not resumed: restart it);
    ``insert``, it refuses rows whose key the table holds."""
    if dry_run:
        return DRY_RUN_FIX_ADVICE
    if not stateful:
        return NO_STATE_INSERT_FIX_ADVICE if insert else NO_STATE_FIX_ADVICE
    return INSERT_FIX_ADVICE if insert else FIX_ADVICE


def nothing_committed_hint(rejects: object, table: str) -> str:
    """The hint of a load stopped over ``max_bad_rows`` before it committed anything of
    ``table``: its checkpoint holds nothing to resume, so the fixed file loads as it is
    (:data:`FIX_ADVICE`'s `restart=True` is for a job that committed part of a file). Named by
    its table: in a run of several tables others may be committed, and a re-run leaves those."""
    where = f"see the reject file {rejects}; " if rejects else ""
    return (
        f"{where}fix the data and run the same command again (nothing of {table} is "
        "committed, so a changed file is loaded as it is), or raise `max_bad_rows`"
    )


class RejectBudget:
    """Counts rejects against ``max_bad_rows`` and writes them to the reject file; called from
    the reading thread and from commit threads (rows Spanner refused), so under a lock.

    ``carried``: rows an interrupted run of the same job rejected before its last checkpoint
    (they are not read again on resume), so a resumed load gets no fresh allowance.
    """

    def __init__(
        self,
        writer: RejectWriter,
        max_bad_rows: int,
        verify: bool = False,
        insert: bool = False,
        fix_advice: Optional[str] = None,
        expected: Optional[Callable[[Reject, str], bool]] = None,
        advice_for: Optional[Callable[[Reject, str], Optional[str]]] = None,
    ) -> None:
        self.writer = writer
        self.max_bad_rows = max_bad_rows
        self.verify = verify
        """Counting a verify's bad source rows: nothing is written or resumed."""
        self.insert = insert
        """Insert mode, which refuses rows committed before: a re-run leaves them out."""
        self.fix_advice = fix_advice or (INSERT_FIX_ADVICE if insert else FIX_ADVICE)
        """How a fixed file is loaded again (``insert``: a restart refuses the rows committed
        before, unless they are left out; see :func:`fix_advice_for`)."""
        self.expected = expected
        """verify: the rejects a load's reject file lists (given with ``rejects``), which do
        not count toward ``max_bad_rows``."""
        self.advice_for = advice_for
        """verify: what to say of a reject over the limit that the reject file knows of (a
        line of a load not asked for lists it); None: the usual advice."""
        self.expected_count = 0
        self.lagging: set[str] = set()
        """Tables whose run resumes one recorded in a state file (not in the commits): its
        last commits may have landed after their record was saved (a kill with commits in
        flight), so the keys first refused as existing are likely that run's rows."""
        self.per_table: dict[str, int] = {}
        self.carried = 0
        """Rejects of earlier runs of the jobs this run resumes or finds loaded (each table's
        report counts its own: ``rows_rejected_before``, which decides the exit code too)."""
        self.past: Optional[str] = None
        """Where the reject past the limit was (the first: tables side by side may each meet
        another before they stop)."""
        self._lock = threading.Lock()

    def carry(self, rejects: int) -> None:
        """Count a job's rejects from before, toward ``max_bad_rows``."""
        with self._lock:  # tables side by side open their checkpoints at the same time
            self.carried += rejects

    def __call__(self, r: Reject, table: Optional[str] = None) -> None:
        name = table or r.table or ""
        with self._lock:
            self.writer.write(r if r.table else Reject(**{**r.__dict__, "table": name}))
            self.per_table[name] = self.per_table.get(name, 0) + 1
            if self.expected is not None and self.expected(r, name):
                self.expected_count += 1
            over = self.writer.count - self.expected_count + self.carried > self.max_bad_rows
            where = f"{r.source}:{r.line}" if r.line else r.source
            first = over and self.past is None
            if first:
                self.past = where
        if over:
            before = (
                f" ({self.carried:,} of them by an earlier run of this job)" if self.carried else ""
            )
            unique = _UNIQUE_INDEX.search(r.reason) if "ALREADY_EXISTS" in r.reason else None
            if unique is not None:
                advice = (
                    f"; two rows have the same value in the unique index {unique.group(1)} "
                    "(two source rows, or one and a row already in the table; NULLs count as "
                    "equal unless the index is NULL_FILTERED): " + self.fix_advice
                )
            elif "Foreign key" in r.reason and "constraint violation" in r.reason:
                advice = (
                    "; the row names a key its table did not hold when the row's batch was "
                    "committed: a missing row, or one committed later (rows are written in key "
                    "order, batch by batch, and tables in turn, so a table that references "
                    "itself, or a cycle of tables, refuses rows whose referenced rows come "
                    "later): `defer_foreign_keys=True` drops the foreign key for the load and "
                    "re-creates it after, which checks every row at once"
                )
            elif "Cannot write and delete the row" in r.reason:
                advice = (
                    "; replace mode deletes and inserts each row in one commit, which Spanner "
                    "refuses in a table that an ON DELETE CASCADE foreign key references: load "
                    "it with `mode='upsert'`"
                )
            elif "ALREADY_EXISTS" in r.reason and name in self.lagging and not self.verify:
                advice = (
                    "; this run resumes one whose checkpoints are in a state file, saved after "
                    "each commit: if that run was killed (kill -9, a lost machine), a commit "
                    "in flight then landed without its record, and these rows are likely that "
                    "run's; else the table held them before (an earlier load, another writer): "
                    "re-run with `skip_existing=True` to leave out the rows whose key is there, "
                    "or with `mode='upsert'` to overwrite them (the default state table "
                    "records each commit in the commit itself)"
                )
            elif "ALREADY_EXISTS" in r.reason:
                advice = (
                    "; the table holds rows with these keys already (an earlier or "
                    "interrupted run, or another writer): re-run with `skip_existing=True` "
                    "to keep those rows as they are and load the others, with "
                    "`mode='upsert'` to overwrite them with the source rows, or empty the "
                    "table first"
                )
            elif "has no row with this key to update" in r.reason:
                advice = (
                    "; update mode changes rows the table holds, and it holds none with these "
                    "keys: re-run with `skip_missing=True` to leave those rows out, or with "
                    "`mode='upsert'` to insert them"
                )
            elif "has no parent row for this key" in r.reason:
                advice = (
                    "; the parent table holds no row with the row's parent key (the export of "
                    "a database without foreign keys, whose deleted rows left children behind, "
                    "or a parent not loaded first): load the parent rows, then this table "
                    "again with `restart=True` (a resume reads on after the rows it rejected)"
                    + (" and `skip_existing=True`" if self.insert else "")
                    + ", or raise `max_bad_rows` to leave such rows out"
                )
            elif self.advice_for and (told := self.advice_for(r, name)):
                advice = "; " + told
            elif self.verify:  # the table is not expected to hold them
                advice = "; or raise `max_bad_rows` to compare the other rows with the table"
            elif r.source == "-":  # stdin is never resumed: nothing to restart
                advice = "; fix the data or raise `max_bad_rows`"
            else:
                advice = "; " + self.fix_advice
            past = (
                f"the one past the limit, {where}"
                if first
                else f"one more after the limit (passed at {self.past}), at {where}"
            )
            err = TooManyBadRows(
                f"more than {self.max_bad_rows:,} bad row{'s' if self.max_bad_rows != 1 else ''}"
                f"{before}; {past}: {r.reason}",
                hint=(
                    f"see the reject file {self.writer.path}"
                    if self.writer.path
                    else "spanner-loader validate lists every bad row"  # verify keeps no reject file
                )
                + advice,
            )
            err.generic_advice = advice == "; " + self.fix_advice
            raise err
