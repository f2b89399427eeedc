"""``--incremental``: which sources a run of a job reads, from what its earlier runs loaded.

Each source a run of the job loaded is recorded as a ``src/<uri>`` part of the job's
checkpoint, with its identity (generation, size, date); a run reads only the sources whose
identity is not recorded. A run without ``--incremental`` leaves its sources only in its
``run`` record; they are recorded as ``src/`` when the first incremental run starts. An
interrupted incremental run is resumed with the sources it had listed, whatever was listed
since waiting for the next run (:meth:`IncrementalListing._resume_listing`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..config import LoadConfig, TableJob
from ..errors import StateError
from ..source import SourceInfo
from .stores import StateStore, batch_part, digest

STREAM_KINDS = ("stdin", "pipe")
"""Sources read as a stream: nothing identifies their content between runs."""


SEND_AGAIN = (
    "`mode='upsert'`, which writes exactly the source rows whatever an earlier run wrote (and "
    "overwrites rows that were there before), or with `skip_existing=True`, which leaves out "
    "every row whose key is there"
)
"""The ways to load rows again that insert mode would refuse as written by an earlier run."""


def again(config: LoadConfig) -> str:
    """What becomes of rows an interrupted run may have written, sent again in this mode."""
    if config.mode == "insert":  # with skip_existing: the only insert that sends them again
        return "sent again (those already in the table left out)"
    return "written again"


@dataclass
class IncrementalListing:
    """The job a :class:`~.checkpoint.Checkpoint` is of, and its ``--incremental`` part: it
    keeps in ``sources`` what this run reads."""

    store: StateStore
    run_id: str
    table: str
    config: LoadConfig
    job: TableJob
    note: Callable[[str], None]
    sources: list[SourceInfo] = field(default_factory=list)
    """The sources this run reads (``--incremental``: those no earlier run loaded)."""

    def preview(self, sources: list[SourceInfo]) -> bool:
        """A dry run of an ``--incremental`` job, over a store it only reads: keep in
        ``sources`` those the load would read, as :meth:`~.checkpoint.Checkpoint.open` picks
        them (an interrupted run's listing, else the sources no finished run loaded; with
        ``restart``, all of them); False when none is left."""
        self.sources = list(sources)
        if self.config.restart:
            return True
        row = self.store.get(self.run_id, self.table, "run")
        interrupted = row if row is not None and row.get("status") != "done" else None
        if interrupted and self._resume_listing(interrupted, self._loaded(None)):
            return True
        return self._keep_new(None if interrupted else row, first=row is None)

    def _keep_new(self, done: Optional[dict[str, Any]], first: bool) -> bool:
        """``--incremental``: keep the sources no finished run loaded (``done``: the last
        finished run's record; ``first``: the job has no record); False when none is left."""
        loaded = self._loaded(done)
        if first and not loaded:
            self._first_incremental_run()
        before = len(self.sources)
        self.sources = [
            s
            for s in self.sources
            if s.kind in STREAM_KINDS  # a stream's content has no identity to match
            or loaded.get(s.uri) != s.to_dict()
        ]
        if before - len(self.sources):
            self.note(
                f"{self.table}: {before - len(self.sources)} source(s) loaded by earlier runs "
                "skipped"
            )
        changed = [s.uri for s in self.sources if s.uri in loaded and s.kind not in STREAM_KINDS]
        if changed:
            self.note(
                f"{self.table}: {len(changed)} source(s) changed since an earlier run loaded "
                f"them (first {changed[0]}): loaded again as they are now"
                + (
                    " (insert mode refuses the rows they held before as existing keys: "
                    "`skip_existing=True` leaves those out)"
                    if self.config.refuses_rewrites
                    else ""
                )
            )
        if not self.sources:
            self.note(f"{self.table}: no new sources since the last run; nothing to do")
            return False
        return True

    def _first_incremental_run(self) -> None:
        """Say that every source is new; and where the patterns name files one by one (a
        shell's expansion of an unquoted glob), that the next list is another job."""
        literal = [
            p
            for p in self.job.sources
            if p != "-" and not any(c in p for c in "*?[") and not p.endswith("/")
        ]
        note = f"{self.table}: the first run of this job: every source is new"
        if len(literal) > 1 and len(literal) == len(self.job.sources):
            note += (
                f" (its {len(literal)} patterns each name one file, as a shell writes an "
                "unquoted glob: a job is its patterns, so a later run over another list of "
                "files is another job, which loads them all; quote the glob, e.g. 'dir/*.csv')"
            )
        self.note(note)

    def _loaded(self, done: Optional[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The identity of each source (by uri) an earlier run of the job loaded: the
        ``src/`` records of ``--incremental`` runs, and the sources of the last finished run
        (``done``), which a run without ``--incremental`` leaves only there. Those are
        recorded as ``src/`` now, since this run's record will replace that run's."""
        loaded = self._loaded_with(None)
        if done is not None:
            options = {"options": digest(done["options"])} if "options" in done else {}
            for d in done.get("sources", []):
                if d.get("kind") not in STREAM_KINDS and loaded.get(d["uri"]) != d:
                    loaded[d["uri"]] = d
                    self.store.put(
                        self.run_id, self.table, "src/" + d["uri"], {"identity": d, **options}
                    )
        return loaded

    def _loaded_with(self, options: Optional[str]) -> dict[str, dict[str, Any]]:
        """The identity of each source (by uri) of the ``src/`` records; with ``options``,
        only those loaded with the written options of that digest (a record from before they
        were kept is none of them)."""
        return {
            part[len("src/") :]: dict(v.get("identity") or {})
            for part, v in self.store.parts(self.run_id, self.table, "src/").items()
            if options is None or v.get("options") == options
        }

    def _resume_listing(self, row: dict[str, Any], loaded: dict[str, dict[str, Any]]) -> bool:
        """``--incremental`` over an interrupted run: that run's sources (in its order) are
        resumed, and what was listed since waits for the next run. Adding new sources to
        its list would change where its last flush ended, hence which rows its recorded
        batches hold. False when a source of its list is gone or changed: that run cannot
        be resumed, so upsert, replace and update drop it (what it wrote is written again if
        still in the sources) and this run loads what is new, as after a finished run;
        insert mode cannot, and refuses."""
        now = {s.uri: s for s in self.sources}
        recorded = [d for d in row.get("sources", []) if d.get("kind") not in STREAM_KINDS]
        moved = [d for d in recorded if d["uri"] not in now or now[d["uri"]].to_dict() != d]
        if moved:
            uri = moved[0]["uri"]
            what = "is gone" if uri not in now else "changed"
            if self.config.refuses_rewrites:
                raise StateError(
                    f"{self.table}: source {uri} {what} since run {self.run_id} stopped "
                    "before its end, and insert mode cannot write that run's rows again",
                    hint="put the source back as it was to resume the run; or re-run with "
                    "`restart=True`, which forgets every source this job loaded and loads them "
                    "all again (into an emptied table: insert mode refuses existing keys); or "
                    "add `skip_existing=True`: this run then loads what is new, leaving out "
                    "the rows there",
                )
            self.note(
                f"{self.table}: source {uri} {what} since run {self.run_id} stopped before "
                "its end: that run is not resumed; this one loads every source no finished run "
                f"loaded (rows the stopped run wrote are {again(self.config)} where still in "
                "them)"
            )
            self.store.delete_prefix(self.run_id, self.table, batch_part(0, 0)[:2])
            return False
        listed = {d["uri"] for d in row.get("sources", [])}
        later = [s for s in self.sources if s.uri not in listed]
        self.sources = [now[d["uri"]] for d in row.get("sources", []) if d["uri"] in now] + [
            s for s in later if s.kind in STREAM_KINDS
        ]
        later = [
            s for s in later if s.kind not in STREAM_KINDS and loaded.get(s.uri) != s.to_dict()
        ]
        if later:
            self.note(
                f"{self.table}: resuming the interrupted run first; {len(later)} source(s) "
                "listed since it are left for the next run"
            )
        return True


class ReadOnly:
    """A store's rows for a dry run to look at: what it would write is dropped (the
    ``src/`` records a listing adds as it reads the last run's)."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def get(self, run: str, table: str, part: str) -> Optional[dict[str, Any]]:
        return self._store.get(run, table, part)  # type: ignore[no-any-return]

    def parts(self, run: str, table: str, prefix: str) -> dict[str, dict[str, Any]]:
        return self._store.parts(run, table, prefix)  # type: ignore[no-any-return]

    def put(self, run: str, table: str, part: str, value: dict[str, Any]) -> None:
        pass

    def delete_prefix(self, run: str, table: str, prefix: str, keep: str = "") -> None:
        pass
