"""The load report: what happened, per table, as a human table or as versioned JSON.

JSON schema (``schema_version`` 1)::

    {"schema_version": 1, "status": "ok" | "rejected_rows" | "too_many_bad_rows" | "failed"
                                     | "interrupted" | "not_restored"
                                     | "busy" (another run holds the job: exit 7),
     "exit_code": int, "dry_run": bool, "database": str, "mode": str,
     "started_at": RFC 3339, "load_id": str (this invocation; its reject lines carry it),
     "elapsed_s": float, "rows_per_s": float,
     "rows_read": int, "rows_written": int, "rows_rejected": int,
     "rows_rejected_before": int (by earlier runs of the jobs this run resumed or found
                     loaded: in their reject files, and in the exit code),
     "rejects_file": str | null (only when this run rejected a row),
     "error": str | null, "hint": str | null (what to do about the error, when it says),
     "notes": [str], "run_ids": {table: str},
     "compiled_parts": bool (loader/_native.c built and in use; a note says so when not),
     "rows_superseded": int, "rows_skipped": int, "rows_existing": int, "rows_missing": int,
     "split_points": null | {"nodes": float | null, "planned": int, "sent": int (this run:
                     --presplit), "expire_time": RFC 3339 | null, "points": int (in place for
                     the load: sent now or by a `presplit` run), "expired": int (after the
                     load), "kept": bool (--keep-split-points),
                     "objects": [{"table": str, "index": str | null, "points": int}]},
     "tables": [{"table": str, "rows_read": int, "rows_written": int, "rows_rejected": int,
                 "rows_rejected_before": int, "earlier_load_ids": [str] (the load_ids of
                 those earlier runs: their reject lines are this job's too, for `verify
                 --load-id`), "rows_superseded": int (upsert/replace/update: rows whose key a later row of
                 the same buffer flush has too, so only the later one was written; a key
                 repeated across flushes is written twice, the later row winning, and is not
                 counted), "rows_skipped": int (rows an earlier, interrupted run of the job
                 had committed: read again, not written again), "rows_existing": int
                 (--skip-existing: rows left out because the table held their keys),
                 "rows_missing": int (--skip-missing: rows left out because the table did not
                 hold their keys), "commits": int, "retries": int, "bytes": int, "elapsed_s": float,
                 "rows_per_s": float, "mutations_per_commit": {"p50": int, "max": int},
                 "concurrency": float | null (settled commits in flight; for tables
                 loaded side by side, of the ceiling they share),
                 "commit_latency_ms": {"p50": float, "p95": float, "p99": float},
                 "sources": [{"uri": str, "generation": str | null, "size": int | null,
                              "rows": int, "status": "done" | "partial" | "not_started"}]}]}
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

from .errors import ExitCode

SCHEMA_VERSION = 1


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


@dataclass
class SourceReport:
    uri: str
    generation: Optional[str] = None
    size: Optional[int] = None
    rows: int = 0
    """Rows read from it by this run (a resumed run skips what was loaded before)."""
    status: str = "not_started"
    """"done": every row of it is committed (or rejected); "partial": some are, or may be (a
    flush in flight when a load failed); "not_started": none are. After a stop this says what
    is committed, not what was read: rows still in the sort buffer are not loaded."""


@dataclass
class TableReport:
    table: str
    rows_read: int = 0
    rows_written: int = 0
    rows_rejected: int = 0
    rows_rejected_before: int = 0
    """Rows earlier runs of the job rejected (a resumed run's, or a finished job's)."""
    earlier_load_ids: list[str] = field(default_factory=list)
    """The ``load_id`` s of those earlier runs (their reject lines carry them)."""
    rows_superseded: int = 0
    """Rows dropped because a later row of the same flush has the same key (last one wins)."""
    rows_skipped: int = 0
    """Rows read again on resume whose batches an earlier run had committed."""
    rows_existing: int = 0
    """Insert mode with ``skip_existing``: rows left out because their key was there."""
    rows_missing: int = 0
    """Update mode with ``skip_missing``: rows left out because their key was not there."""
    commits: int = 0
    retries: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0
    mutations: list[int] = field(default_factory=list, repr=False)
    latencies_s: list[float] = field(default_factory=list, repr=False)
    sources: list[SourceReport] = field(default_factory=list)
    concurrency: Optional[float] = None
    """Commits in flight the adaptive limiter settled on (shared by tables side by side)."""

    def count_key_skips(self, mode: str, rows: int) -> None:
        """Rows the commit stage left out for their keys, as this mode names them."""
        if mode == "update":
            self.rows_missing = rows
        else:
            self.rows_existing = rows

    @property
    def rows_per_s(self) -> float:
        done = self.rows_read if self.commits == 0 else self.rows_written
        return done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "rows_read": self.rows_read,
            "rows_written": self.rows_written,
            "rows_rejected": self.rows_rejected,
            "rows_rejected_before": self.rows_rejected_before,
            "earlier_load_ids": list(self.earlier_load_ids),
            "rows_superseded": self.rows_superseded,
            "rows_skipped": self.rows_skipped,
            "rows_existing": self.rows_existing,
            "rows_missing": self.rows_missing,
            "commits": self.commits,
            "retries": self.retries,
            "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 3),
            "rows_per_s": round(self.rows_per_s, 1),
            "mutations_per_commit": {
                "p50": int(percentile(self.mutations, 50)),
                "max": max(self.mutations, default=0),
            },
            "commit_latency_ms": {
                f"p{q}": round(percentile(self.latencies_s, q) * 1000, 2) for q in (50, 95, 99)
            },
            "concurrency": self.concurrency,
            "sources": [asdict(s) for s in self.sources],
        }


@dataclass
class LoadReport:
    database: str
    mode: str
    dry_run: bool = False
    started_at: str = ""
    load_id: str = ""
    """This invocation of the load (each of its reject lines carries it as ``load_id``)."""
    elapsed_s: float = 0.0
    tables: list[TableReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rejects_file: Optional[str] = None
    error: Optional[str] = None
    hint: Optional[str] = None
    """What to do about ``error``, when the error says (the CLI's ``hint:`` line)."""
    exit_code: ExitCode = ExitCode.OK
    run_ids: dict[str, str] = field(default_factory=dict)
    """Checkpoint run id per table (resume state)."""
    compiled_parts: bool = True
    """Whether the compiled parts of the hot path ran (loader.native)."""
    split_points: Optional[dict[str, Any]] = None
    """Pre-splitting (loader/presplit.py): points added and expired; None when none."""

    @property
    def rows_read(self) -> int:
        return sum(t.rows_read for t in self.tables)

    @property
    def rows_written(self) -> int:
        return sum(t.rows_written for t in self.tables)

    @property
    def rows_rejected(self) -> int:
        return sum(t.rows_rejected for t in self.tables)

    @property
    def rows_rejected_before(self) -> int:
        return sum(t.rows_rejected_before for t in self.tables)

    @property
    def rows_superseded(self) -> int:
        return sum(t.rows_superseded for t in self.tables)

    @property
    def rows_skipped(self) -> int:
        return sum(t.rows_skipped for t in self.tables)

    @property
    def rows_existing(self) -> int:
        return sum(t.rows_existing for t in self.tables)

    @property
    def rows_missing(self) -> int:
        return sum(t.rows_missing for t in self.tables)

    @property
    def status(self) -> str:
        return {
            ExitCode.OK: "ok",
            ExitCode.REJECTED_ROWS: "rejected_rows",
            ExitCode.TOO_MANY_BAD_ROWS: "too_many_bad_rows",
            ExitCode.INTERRUPTED: "interrupted",
            ExitCode.NOT_RESTORED: "not_restored",
            ExitCode.BUSY: "busy",
        }.get(self.exit_code, "failed")

    def to_dict(self) -> dict[str, Any]:
        rows = self.rows_read if self.dry_run else self.rows_written
        return {
            "schema_version": SCHEMA_VERSION,
            "status": self.status,
            "exit_code": int(self.exit_code),
            "dry_run": self.dry_run,
            "database": self.database,
            "mode": self.mode,
            "started_at": self.started_at,
            "load_id": self.load_id,
            "elapsed_s": round(self.elapsed_s, 3),
            "rows_per_s": round(rows / self.elapsed_s, 1) if self.elapsed_s > 0 else 0.0,
            "rows_read": self.rows_read,
            "rows_written": self.rows_written,
            "rows_rejected": self.rows_rejected,
            "rows_rejected_before": self.rows_rejected_before,
            "rows_superseded": self.rows_superseded,
            "rows_skipped": self.rows_skipped,
            "rows_existing": self.rows_existing,
            "rows_missing": self.rows_missing,
            # named only when this run wrote a row to it
            "rejects_file": self.rejects_file if self.rows_rejected else None,
            "error": self.error,
            "hint": self.hint,
            "notes": list(self.notes),
            "run_ids": dict(self.run_ids),
            "compiled_parts": self.compiled_parts,
            "split_points": self.split_points,
            "tables": [t.to_dict() for t in self.tables],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def render(self) -> str:
        """A human summary: one line per table, then totals."""
        head = [
            "table",
            "read",
            "written",
            "rejected",
            "commits",
            "retries",
            "mut/commit",
            "p50 ms",
            "p99 ms",
            "elapsed",
            "rows/s",
        ]
        body = []
        for t in self.tables:
            d = t.to_dict()
            body.append(
                [
                    t.table,
                    f"{t.rows_read:,}",
                    f"{t.rows_written:,}",
                    f"{t.rows_rejected:,}",
                    f"{t.commits:,}",
                    f"{t.retries:,}",
                    f"{d['mutations_per_commit']['p50']:,}/{d['mutations_per_commit']['max']:,}",
                    f"{d['commit_latency_ms']['p50']:.1f}",
                    f"{d['commit_latency_ms']['p99']:.1f}",
                    f"{t.elapsed_s:.2f}s",
                    f"{t.rows_per_s:,.0f}",
                ]
            )
        if self.dry_run:  # nothing is written or committed: the batches a load would send
            head = ["table", "read", "rejected", "batches", "mut/batch", "elapsed", "rows/s"]
            body = [[r[0], r[1], r[3], f"{len(t.mutations):,}", r[6], r[9], r[10]]
                    for r, t in zip(body, self.tables)]  # fmt: skip
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

        def line(cells: list[str]) -> str:
            return "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()

        out = [line(head), *(line(r) for r in body)]
        d = self.to_dict()
        verb = "validated (dry run, nothing written)" if self.dry_run else "written"
        out.append("")
        out.append(
            f"{self.status}: {self.rows_read:,} row{'' if self.rows_read == 1 else 's'} read, "
            f"{(self.rows_read - self.rows_rejected) if self.dry_run else self.rows_written:,} "
            f"{verb}, {self.rows_rejected:,} rejected"
            + (
                f" (and {self.rows_rejected_before:,} by an earlier run)"
                if self.rows_rejected_before
                else ""
            )
            + f", in {self.elapsed_s:.2f}s "
            f"({d['rows_per_s']:,.0f} rows/s) into {self.database}"
        )
        if self.rejects_file and self.rows_rejected:
            out.append(f"rejected rows: {self.rejects_file}")
        if self.rows_superseded:
            out.append(
                f"superseded: {self.rows_superseded:,} rows had the key of a later row of the "
                "same input, which was written instead (last one wins)"
            )
        if self.rows_skipped:
            out.append(
                f"skipped: {self.rows_skipped:,} rows read again were committed (or rejected) "
                "by an earlier run of this job and not sent again"
            )
        if self.rows_existing:
            out.append(
                f"existing: {self.rows_existing:,} left out (--skip-existing), their keys "
                "already in the table, whose rows stay as they were"
            )
        if self.rows_missing:
            out.append(
                f"missing: {self.rows_missing:,} left out (--skip-missing), their keys not in "
                "the table"
            )
        sp = self.split_points
        if sp and sp.get("points"):
            after = (
                "kept after the load"
                if sp.get("kept")
                else f"{sp.get('expired', 0):,} expired after the load"
            )
            out.append(f"split points: {sp['points']:,} in place for the load, {after}")
        for n in self.notes:
            out.append(f"note: {n}")
        # a failure's error is the CLI's one `error:` line on stderr (and `error` in the JSON)
        return "\n".join(out)
