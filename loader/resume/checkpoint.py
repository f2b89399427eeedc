"""Where a table's load resumes: one job's checkpoint, read when a run starts and written as
its flushes are committed (the records themselves are described in :mod:`.stores`).

A job is one table of one load: its database, table, source patterns and mode (the run id).
Its ``run`` record holds

* the **fingerprint**: what is written (the sources' identities, the mode, and every option
  that changes a value or a column, canonically). A run whose fingerprint differs is refused
  (:meth:`Checkpoint.changed` names the source or option), since resuming it would mix two
  different loads;
* the **layout**: the options that decide how rows group into flushes and batches, hence the
  names of the batch markers. They matter only for the batches an interrupted flush committed
  (see :meth:`Checkpoint._layout_changed`): tuning options may change between runs;
* the **resume point**: the source index and the records of it up to which every row is
  committed or rejected, the flush count, and the rejects up to there (``--max-bad-rows``
  covers the whole job).

:meth:`Checkpoint.open` decides where a run starts (with ``--incremental``, from which sources:
:mod:`.incremental`); :meth:`Checkpoint.moved` records that a
flush is committed; :meth:`Checkpoint.finish` that the job is done; :meth:`attach_marker`
makes each batch carry (or, for a file store, be followed by) the marker that lets a resume
skip it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..config import LoadConfig, TableJob, default_block_size
from ..errors import StateError, option
from ..parse.dialect import PRESETS
from ..source import SourceInfo, canonical_pattern
from .incremental import SEND_AGAIN, STREAM_KINDS, IncrementalListing, again
from .lease import PREFIX as LEASE_PREFIX
from .lease import Lease
from .stores import StateStore, batch_part, canonical, digest

BATCHING_VERSION = 3
"""How this loader cuts batches, recorded in each checkpoint's layout: raised whenever the
planning changes, so a resume never skips batches by markers that named other rows (2: a row
over --max-batch-bytes gets a batch of its own instead of being rejected; 3: the mutations
of a row count generated, unwritten DEFAULT and every index's columns, and BYTES and ARRAY
cells are held to the cell limit as stored, so a flush may hold rows it refused before)."""

LAYOUT_OPTIONS = {
    "max_mutations": "max_mutations",
    "max_batch_bytes": "max_batch_bytes",
    "max_batch_rows": "batch_rows",
    "buffer_size": "buffer_size",
    "block_size": "block_size",
    "buffer_share": "parallel_tables",  # tables side by side share the buffer
}
"""Each key of a checkpoint's layout (:meth:`Checkpoint.layout`) and the option it records."""


def _follows_buffer(key: str, was: dict[str, Any], new: dict[str, Any]) -> bool:
    """A block size that changed only because it follows the buffer size (not named)."""
    return key == "block_size" and all(
        isinstance(v.get("buffer_size"), int)
        and v.get("block_size") == default_block_size(v["buffer_size"])
        for v in (was, new)
    )


def job_id(
    config: LoadConfig, job: TableJob, table: str, store: Optional[StateStore] = None
) -> str:
    """The run id of a job: its checkpoint's key (database, table, source patterns, mode).

    Patterns count as :func:`~loader.source.canonical_pattern` spells them, so ``x.csv``,
    ``./x.csv`` and its absolute path are one job. With ``store``: a job whose checkpoint was
    written under the id of the patterns as typed (loaders before this one) keeps that id, so
    an interrupted run still resumes and a loaded one is still loaded."""
    run = _job_digest(config, job, table, [canonical_pattern(p) for p in job.sources])
    if store is None:
        return run
    typed = _job_digest(config, job, table, list(job.sources))
    if typed == run or store.get(run, table, "run") is not None:  # absolute paths, gs://: no read
        return run
    return typed if store.get(typed, table, "run") is not None else run


def _job_digest(config: LoadConfig, job: TableJob, table: str, sources: list[str]) -> str:
    return digest(
        {"database": config.target.path, "table": table, "sources": sources, "mode": config.mode}
    )


@dataclass
class Opened:
    """What :meth:`Checkpoint.open` found."""

    sources: list[SourceInfo]
    """The sources to read (``--incremental``: those no earlier run loaded)."""
    nothing_to_do: bool = False
    already_loaded: bool = False
    """The job was loaded by an earlier run (``nothing_to_do`` then holds too)."""
    source: int = 0
    """Where reading starts: this source index, after ``record`` of its records."""
    record: int = 0
    flushes: int = 0
    skip_parts: set[str] = field(default_factory=set)
    """Markers of the batches of the interrupted flush that landed (skipped on resume)."""
    carried_rejects: int = 0
    """Rows rejected before: they count toward --max-bad-rows and are not read again."""
    resumed: bool = False
    """An interrupted run is resumed (its rejects then decide the exit code too)."""
    earlier_load_ids: tuple[str, ...] = ()
    """The ``load_id`` s of the earlier runs whose rows count for this one (a resumed job's
    runs, or the runs that loaded a finished job): their reject lines are this job's too."""


@dataclass
class Checkpoint(IncrementalListing):
    """One job's checkpoint in a state store (``--incremental``'s choice of sources:
    :class:`~.incremental.IncrementalListing`)."""

    lease: Optional[Lease] = None
    """Checked at every save: a run that lost the job's lease stops there."""
    saved_rejects: int = 0
    """The ``rejects`` of the last recorded resume point."""
    buffer_share: int = 1
    """The table's sort buffer is this part of ``buffer_size`` (tables side by side)."""
    load_id: str = ""
    """This invocation's ``load_id`` (its reject lines carry it), recorded with the runs'."""
    earlier_load_ids: tuple[str, ...] = ()
    """Set by :meth:`open`: see :attr:`Opened.earlier_load_ids`."""
    rejects_file: str = ""
    """Where this invocation's rejects go, recorded with the runs' once it rejects a row."""
    earlier_reject_files: tuple[str, ...] = ()
    """Set by :meth:`open`: the reject files of the earlier runs that rejected rows."""
    _rejects_before: int = 0
    finished: History = field(default_factory=lambda: History())
    """What the finished runs of the job before this run (and the runs it resumes) rejected
    (``--incremental``: each run loads new sources of the job, and a later run that finds it
    loaded counts them all). Kept in every record, whatever becomes of an interrupted run."""
    _files_unknown: bool = False
    """The run resumed rejected rows but its record names no file (a loader from before
    they were kept): a list of this run's file alone would hide that run's."""
    reach: Optional[tuple[int, int]] = (0, 0)
    """Where the rows of the last flush handed to the commits end, by this run or the one it
    resumes (source index, record): no commit of the job wrote a row of a source after it.
    Recorded before that flush's first batch is sent; None when not known (a checkpoint from
    before it was recorded)."""
    _saved: tuple[str, tuple[int, int], int] = ("running", (0, 0), 0)

    # -- what a checkpoint records ----------------------------------------------------------

    def identities(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.sources]

    def fingerprint(self) -> str:
        """What is written: the sources, the mode, and every option that changes a value or
        a column, canonically (the same in every process and after an upgrade that adds an
        option at its default). Tuning options are not in it (see :meth:`layout`)."""
        return digest(
            {"sources": self.identities(), "mode": self.config.mode, **self.written_options()}
        )

    def recorded_options(self) -> dict[str, Any]:
        """:meth:`written_options` as a record holds them (JSON: lists, not tuples)."""
        result: dict[str, Any] = json.loads(json.dumps(self.written_options()))
        return result

    def written_options(self) -> dict[str, Any]:
        """The options that change what is written, canonically (those in the fingerprint,
        recorded beside it so that a refusal can name the one that changed)."""
        cfg = self.config
        return {
            "dialect": canonical(cfg.dialect),
            "convert": canonical(cfg.convert),
            "columns": {
                "map": sorted(cfg.mapping),
                "ignore": sorted(cfg.ignore),
                "by_position": list(self.job.columns) if self.job.columns else None,
            },
        }

    def legacy_fingerprint(self) -> str:
        """The fingerprint checkpoints recorded before the canonical one (layout included):
        a job interrupted before an upgrade still resumes."""
        cfg = self.config
        return digest(
            {
                "sources": self.identities(),
                "mode": cfg.mode,
                "budgets": [cfg.max_mutations, cfg.max_batch_bytes, cfg.batch_rows],
                "buffer": [cfg.buffer_size, cfg.block_size],
                "dialect": repr(cfg.dialect),
                "convert": repr(cfg.convert),
                "columns": [cfg.mapping, cfg.ignore, self.job.columns],
            }
        )

    def layout(self) -> dict[str, Any]:
        """The options that decide how rows group into flushes and batches, hence the names
        of the batch markers: they must match only to skip the batches an interrupted flush
        committed."""
        cfg = self.config
        return {
            "batching": BATCHING_VERSION,
            "max_mutations": cfg.max_mutations,
            "max_batch_bytes": cfg.max_batch_bytes,
            "max_batch_rows": cfg.batch_rows,
            "buffer_size": cfg.buffer_size,
            "block_size": cfg.block_size,
            # recorded only when shared, so a checkpoint from before tables loaded side by
            # side keeps its layout
            **({"buffer_share": self.buffer_share} if self.buffer_share > 1 else {}),
        }

    def _rows_cap(self) -> Optional[float]:
        """``max_rows_per_second`` when it sets the batch rows (see LoadConfig)."""
        rate = self.config.max_rows_per_second
        capped = rate is not None and self.config.batch_rows == max(1, int(rate))
        return rate if capped else None

    def _same_content(self, row: dict[str, Any]) -> bool:
        if "layout" in row:
            return bool(row.get("fingerprint") == self.fingerprint())
        return bool(row.get("fingerprint") == self.legacy_fingerprint())

    # -- where a run starts ------------------------------------------------------------------

    def open(self, sources: list[SourceInfo]) -> Opened:
        """Decide from the stored state where this run starts (``sources``: as listed now)."""
        store, cfg, name = self.store, self.config, self.table
        self.sources = list(sources)
        if cfg.restart:
            # all but the lease this run holds (its renewal would find it gone, and stop)
            store.delete_prefix(self.run_id, name, "", keep=LEASE_PREFIX)
        row = store.get(self.run_id, name, "run")
        # kept whether the run resumes or not, while the job runs incrementally: a run that
        # reads every source rejects again what the finished runs did
        self.finished = History.finished_before(row) if cfg.incremental else History()
        if cfg.incremental:
            interrupted = row if row is not None and row.get("status") != "done" else None
            if not (interrupted and self._resume_listing(interrupted, self._loaded(None))):
                if not self._keep_new(None if interrupted else row, first=row is None):
                    return Opened(self.sources, nothing_to_do=True)
                if row is not None and interrupted is None:  # a finished run: history now
                    self.finished = History.of_job(row)
                row = None
        if row is not None and not committed_any(store, self.run_id, name, row):
            # an earlier run stopped before it committed anything (e.g. at a column the
            # loader asked to --ignore): nothing to resume, so any options go
            row = None
        if row is not None and any(s.kind in STREAM_KINDS for s in self.sources):
            self._stream_not_trusted(row)
            row = None
        if row is not None and row.get("status") == "done":
            gone = 0 if self._same_content(row) else self._loaded_before(row)
            if gone is not None:
                job = History.of_job(row)
                earlier = job.rejects
                self.note(already_loaded(name, earlier, gone, job.reject_files, len(job.load_ids)))
                return Opened(
                    self.sources,
                    nothing_to_do=True,
                    already_loaded=True,
                    carried_rejects=earlier,
                    earlier_load_ids=job.load_ids,
                )
            raise self.changed(row)
        opened = Opened(self.sources)
        if row is not None:  # an interrupted run
            reach = row.get("reach")
            self.reach = (int(reach[0]), int(reach[1])) if isinstance(reach, list) else None
            if not self._same_content(row):
                unread = self._changed_unread(row)
                if unread is None:
                    raise self.changed(row)
                shown = ", ".join(unread[:3]) + (", ..." if len(unread) > 3 else "")
                self.note(
                    f"{name}: {len(unread):,} source(s) the interrupted run had not begun to "
                    f"write changed, came or went since ({shown}): resumed with the sources as "
                    "they are now"
                )
            opened.source, opened.record = int(row["source"]), int(row["record"])
            opened.flushes = int(row["flushes"])
            prefix = batch_part(opened.flushes, 0)[:11]
            markers = store.parts(self.run_id, name, prefix)
            # a checkpoint from before layouts were recorded matched its options through the
            # fingerprint; its batches were cut the first way
            layout = row.get("layout", {**self.layout(), "batching": 1})
            if markers and layout != self.layout():
                markers = self._layout_changed(
                    layout, markers, prefix, row.get("max_rows_per_second")
                )
            opened.skip_parts = set(markers)
            self.saved_rejects = int(row.get("rejects", 0))
            opened.carried_rejects = self.saved_rejects + sum(
                int(m.get("rejected", 0)) for m in markers.values()
            )
            opened.resumed = True
            opened.earlier_load_ids = self.earlier_load_ids = _load_ids(row)
            self.earlier_reject_files = _reject_files(row)
            self._rejects_before = opened.carried_rejects  # (its batches' refused rows too)
            self._files_unknown = "reject_files" not in row and opened.carried_rejects > 0
            self.note(
                f"{name}: resuming run {self.run_id}"
                + (
                    f" (load_id {', '.join(self.earlier_load_ids)} before)"
                    if self.earlier_load_ids
                    else ""
                )
                + _resumed_where(opened.source, opened.record, len(self.sources))
                + (
                    f" (its last buffer's rows are read again; the {_batches(markers):,} "
                    "batch(es) of them it committed are not written again)"
                    if markers
                    else ""
                )
                + (
                    f"; {opened.carried_rejects:,} row(s) rejected before count toward "
                    "`max_bad_rows`"
                    if opened.carried_rejects
                    else ""
                )
            )
        self.save("running", (opened.source, opened.record), opened.flushes)
        return opened

    def _stream_not_trusted(self, row: dict[str, Any]) -> None:
        """An earlier run of a job that reads stdin or a pipe: its record says nothing of what
        that run read (a stream has no generation, size or date), so today's input may be
        other rows. Neither "already loaded" nor skipping what it committed is safe: the job
        starts over. Upsert, replace and update write rows again harmlessly; insert mode
        would refuse the rows the interrupted run wrote as duplicates, so it asks for
        upsert."""
        name = self.table
        if row.get("status") != "done":
            if self.config.refuses_rewrites:
                raise StateError(
                    f"{name}: an interrupted run {self.run_id} of this job read a pipe or "
                    "stdin, whose content cannot be compared with this run's; insert mode "
                    "would refuse the rows that run wrote as existing keys",
                    hint=f"load it with {SEND_AGAIN}",
                )
            self.note(
                f"{name}: not resuming the interrupted run {self.run_id}: it read a pipe or "
                f"stdin, whose content cannot be compared; every row is {again(self.config)}"
            )
        self.store.delete_prefix(self.run_id, name, batch_part(0, 0)[:2])

    def _layout_changed(
        self,
        layout: dict[str, Any],
        markers: dict[str, Any],
        prefix: str,
        rows_per_second: Optional[float] = None,
    ) -> dict[str, Any]:
        """The batches an interrupted flush committed were cut with other budgets or buffer
        sizes: their markers name other batches than this run's. Idempotent modes write those
        rows again (harmless) and forget the markers; insert mode would refuse them as
        duplicates, so it must resume with the interrupted run's values. ``rows_per_second``
        is the interrupted run's throttle when it capped the batch rows (the option the user
        gave)."""
        now = self.layout()
        # a layout without buffer_share had the whole buffer (tables one after another)
        was, new = {"buffer_share": 1, **layout}, {"buffer_share": 1, **now}
        differ = [
            option(name, was.get(key))
            + (
                f", one second of {option('max_rows_per_second', rows_per_second)}"
                if key == "max_batch_rows" and rows_per_second is not None
                else ""
            )
            for key, name in LAYOUT_OPTIONS.items()
            if was.get(key) != new[key] and not _follows_buffer(key, was, new)
        ]
        if layout.get("batching", 1) != now["batching"]:
            differ = ["the batches were cut by an earlier version of the loader", *differ]
            if self.config.refuses_rewrites:
                raise StateError(
                    f"{self.table}: the interrupted run {self.run_id} was made by an "
                    "earlier version of the loader, which cut batches differently; insert "
                    f"mode cannot tell which of the {_batches(markers):,} batch(es) it committed "
                    "hold which rows",
                    hint="finish the job with the loader version that started it, or load it "
                    f"again with {SEND_AGAIN}",
                )
        if self.config.refuses_rewrites:
            raise StateError(
                f"{self.table}: the interrupted run {self.run_id} had committed "
                f"{_batches(markers):,} batch(es) of its last buffer with other batch options, "
                "which insert mode cannot write again",
                hint=f"resume with the interrupted run's values ({'; '.join(differ)}), or add "
                "`skip_existing=True`, which leaves out the rows it wrote",
            )
        self.store.delete_prefix(self.run_id, self.table, prefix)
        self.note(
            f"{self.table}: batch options changed since the interrupted run (it had "
            f"{'; '.join(differ)}): the rows of its last buffer are {again(self.config)}"
        )
        return {}

    def _loaded_before(self, row: dict[str, Any]) -> Optional[int]:
        """After a finished run over other sources (``row``): when every source listed now
        was loaded by an earlier run as it is now, with the options of this run (a file of
        the job's folder deleted since; a plain run after ``incremental=True`` runs, whose
        record lists only the sources the last one read), how many sources loaded before are
        not listed now; else None."""
        options = self.recorded_options()
        loaded = self._loaded_with(digest(options))
        if "options" in row and not _options_change(row["options"], options):
            loaded.update({d["uri"]: d for d in row.get("sources", [])})  # the newest record
        return only_gone(loaded, {s.uri: s.to_dict() for s in self.sources})

    def _changed_unread(self, row: dict[str, Any]) -> Optional[list[str]]:
        """For an interrupted run (``row``) whose sources differ from those listed now, with
        the options as they were: the URIs that differ (changed, new or gone) when each lies
        past every row that run handed to a commit (a glob's file fixed after the load
        stopped at it); None when any other does, or the record cannot tell."""
        if self.reach is None or not isinstance(row.get("sources"), list):
            return None
        old: list[dict[str, Any]] = row["sources"]
        same_options = {"sources": old, "mode": self.config.mode, **self.written_options()}
        if digest(same_options) != row.get("fingerprint"):
            return None  # an option changed too, or a checkpoint of another layout
        source, record = self.reach
        begun = source + (1 if record > 0 else 0)  # sources some commit may have rows of
        new = self.identities()
        if len(old) < begun or len(new) < begun or old[:begun] != new[:begun]:
            return None
        before = {d["uri"]: d for d in old[begun:]}
        now = {d["uri"]: d for d in new[begun:]}
        return sorted(u for u in set(before) | set(now) if before.get(u) != now.get(u))

    def reaching(self, position: tuple[int, int]) -> None:
        """A flush whose rows end at ``position`` is about to be sent: recorded first, so that
        a resume knows which sources no commit wrote rows of (see :meth:`_changed_unread`)."""
        if self.reach is None or position <= self.reach:
            return
        self.reach = position
        status, resume_at, flushes = self._saved
        self.save(status, resume_at, flushes)

    def changed(self, row: dict[str, Any]) -> StateError:
        """The error for a run whose sources or options differ from the recorded ones."""
        done = row.get("status") == "done"
        # after a finished run, those of earlier incremental runs count too (its record wins)
        old = {
            **(self._loaded(None) if done else {}),
            **{d["uri"]: d for d in row.get("sources", [])},
        }
        new = {s.uri: s.to_dict() for s in self.sources}
        # a source rewritten in place still holds the rows loaded before (insert refuses them)
        rewritten = any(u in new and new[u] != d for u, d in old.items())
        for uri in sorted(set(old) | set(new)):
            if done and uri not in new:
                continue  # gone since a finished run: nothing to load (the options differ)
            if old.get(uri) != new.get(uri):
                a, b = old.get(uri), new.get(uri)
                what = (
                    "is new"
                    if a is None
                    else "is gone"
                    if b is None
                    else f"changed ({identity_change(a, b)})"
                )
                hint = "re-run with `restart=True` to load from scratch"
                if not done and self.config.refuses_rewrites:
                    hint = (
                        "list the sources as the interrupted run did to resume it (put back "
                        "what changed, take away what is new), or re-run with `restart=True` "
                        "and `skip_existing=True` (insert mode would refuse the rows the "
                        "interrupted run committed; `skip_existing` leaves them out)"
                    )
                if done and not self.config.incremental:
                    # a file added to a folder a job loads night after night, or one rewritten
                    # in place by each night's export
                    hint = (
                        "re-run with `incremental=True`, which loads only the sources no "
                        "earlier run loaded as they are now (new or changed ones; from then on "
                        "the job keeps track of them)"
                        + (
                            " and `skip_existing=True` (insert mode would refuse the keys a "
                            "changed source still holds)"
                            if rewritten and self.config.refuses_rewrites
                            else ""
                        )
                        + ", or with `restart=True`, which loads every source again"
                        + (" (with `skip_existing=True`)" if self.config.refuses_rewrites else "")
                    )
                if row.get("incremental") and not self.config.incremental:
                    hint = (
                        "that run was incremental: re-run with `incremental=True` to "
                        + ("load what is new" if done else "resume it")
                        + ", or with `restart=True` to load every source again"
                    )
                return StateError(
                    f"{self.table}: source {uri} {what} since run {self.run_id} "
                    + ("was loaded" if done else "stopped before its end"),
                    hint=hint,
                )
        options = self.recorded_options()
        if done and "options" in row and not _options_change(row["options"], options):
            # every source as loaded before, the last run's options these: one of them was
            # loaded by an earlier incremental run with other options
            same = self._loaded_with(digest(options))
            mine = {d["uri"] for d in row.get("sources", [])}
            other = sorted(u for u in new if u not in same and u not in mine)
            if other:
                return StateError(
                    f"{self.table}: source {other[0]} was loaded by an earlier run of this job "
                    "with other options that change what is written (the dialect, value "
                    "conversions or column mapping)",
                    hint="re-run with `restart=True` to load every source again with these options",
                )
        what = (
            "options that change what is written (the dialect, value conversions or column mapping)"
        )
        if "options" in row:
            differ = _options_change(row["options"], options)
            if differ:
                what = "options that change what is written (" + "; ".join(differ) + ")"
        return StateError(
            f"{self.table}: {what} differ from those of run "
            f"{self.run_id}, which was {'loaded' if done else 'interrupted'}",
            hint=(
                "the same options as that run find it loaded; "
                "`restart=True` loads it again with these"
                if done
                else "resume with the same options, or re-run with `restart=True` to start over"
            ),
        )

    # -- recording progress ------------------------------------------------------------------

    def save(
        self,
        status: str,
        resume_at: tuple[int, int],
        flushes: int,
        rejects: Optional[int] = None,
    ) -> None:
        """Record the resume point; ``rejects``: those of the rows before it (default: as
        recorded when this run started, i.e. no new checkpoint has been reached)."""
        if self.lease is not None:
            self.lease.check()
        if rejects is not None:
            self.saved_rejects = rejects
        cap = self._rows_cap()  # the throttle that capped the batch rows, named if they change
        self._saved = (status, resume_at, flushes)
        if self.reach is not None and resume_at > self.reach:
            self.reach = resume_at
        self.store.put(
            self.run_id,
            self.table,
            "run",
            {
                "status": status,
                "fingerprint": self.fingerprint(),
                "options": self.written_options(),
                "layout": self.layout(),
                "sources": self.identities(),
                "source": resume_at[0],
                "record": resume_at[1],
                "flushes": flushes,
                "rejects": self.saved_rejects,
                **self.finished.recorded(),
                "load_ids": [*self.earlier_load_ids, *([self.load_id] if self.load_id else [])],
                **self._reject_files_recorded(),
                **({"reach": list(self.reach)} if self.reach is not None else {}),
                **({"incremental": True} if self.config.incremental else {}),
                **({"max_rows_per_second": cap} if cap else {}),
            },
        )

    def _reject_files_recorded(self) -> dict[str, list[str]]:
        """The reject files of the runs that rejected rows of the job, this one's included
        once it has, for a later run's note (a tryout's "see its reject file": which?)."""
        if self._files_unknown:
            return {}
        files = list(self.earlier_reject_files)
        mine = self.rejects_file and self.saved_rejects > self._rejects_before
        if mine and self.rejects_file not in files:
            files.append(self.rejects_file)
        return {"reject_files": files} if files else {}

    def moved(self, flush: int, resume_at: tuple[int, int], flushes: int, rejects: int) -> None:
        """Flush ``flush`` is committed: the resume point moves past it, and its batch markers
        are no longer needed."""
        self.save("running", resume_at, flushes, rejects)
        self.store.delete_prefix(self.run_id, self.table, batch_part(flush, 0)[:11])

    def finish(self, flushes: int, rejects: int) -> None:
        """Every source is loaded (``--incremental``: each one is recorded as loaded, first,
        so that a run stopped in between still finds them)."""
        if self.config.incremental:
            options = digest(self.recorded_options())
            for d in self.identities():
                if d.get("kind") not in STREAM_KINDS:
                    part = {"identity": d, "options": options}
                    self.store.put(self.run_id, self.table, "src/" + d["uri"], part)
        self.save("done", (len(self.sources), 0), flushes, rejects)

    def attach_marker(self, job: Any, part: str, batch: str) -> None:
        """Make ``job`` (a :class:`loader.commit.BatchJob`) record its marker ``part`` (the
        batch ``batch``, or a range of it on resume): inside its commit for an atomic store,
        after it for a file store."""
        store, run, table = self.store, self.run_id, self.table
        if store.atomic:
            from ..buffer import MARKER_BYTES
            from .stores import STATE_COLUMNS

            job.extra = [store.marker_mutation(run, table, part, {"rows": len(job)})]

            def range_marker(lo: int, hi: int, rejected: int) -> list[bytes]:
                piece = range_part(batch, lo, hi)
                value = {"rows": hi - lo, **({"rejected": rejected} if rejected else {})}
                return [store.marker_mutation(run, table, piece, value)]

            job.range_marker = range_marker
            job.marker_cells = len(STATE_COLUMNS)  # the room the planner left for it
            job.marker_bytes = MARKER_BYTES

        def done(j: Any) -> None:
            if not store.atomic or j.split:
                # rows Spanner refused here are not read again on resume: carry their count,
                # those a marker of its runs' commit carries already aside (unless under this
                # very name, a resumed piece's: that marker is overwritten here)
                own = None if part == batch else (j.offset, j.offset + len(j))
                rejected = j.rejected - sum(n for at, n in j.marked.items() if at != own)
                store.put(run, table, part, {"rows": len(j), "rejected": rejected})

        job.on_done = done


def _batches(markers: Any) -> int:
    """How many batches these markers name: a batch's, or its pieces' (``b/<flush>/<batch>``
    and ``b/<flush>/<batch>/<lo>-<hi>`` are one batch)."""
    return len({"/".join(part.split("/")[:3]) for part in markers})


def only_gone(loaded: dict[str, Any], now: dict[str, Any]) -> Optional[int]:
    """How many sources of ``loaded`` (identities by URI) are not in ``now`` when every one
    of ``now`` is there as it is (none new or changed); None otherwise."""
    if not now or any(loaded.get(uri) != identity for uri, identity in now.items()):
        return None
    return len(set(loaded) - set(now))


def committed_any(store: Any, run_id: str, table: str, row: dict[str, Any]) -> bool:
    """Whether the run that left the record ``row`` committed anything of the job (a run
    that stopped before its first commit leaves nothing to resume)."""
    return (
        row.get("status") == "done"
        or (int(row.get("source", 0)), int(row.get("record", 0))) != (0, 0)
        or int(row.get("flushes", 0)) != 0
        or bool(store.parts(run_id, table, batch_part(0, 0)[:11]))
    )


def listed(row: dict[str, Any], key: str) -> tuple[str, ...]:
    """The texts a state record lists under ``key`` (none when it lists none: a record from
    before the list was kept)."""
    items = row.get(key)
    return tuple(str(i) for i in items) if isinstance(items, list) else ()


def _load_ids(row: dict[str, Any]) -> tuple[str, ...]:
    """The ``load_id`` s a run record names (none in a record from before they were kept)."""
    return listed(row, "load_ids")


@dataclass(frozen=True)
class History:
    """The rows a job's finished runs rejected, their ``load_id`` s and reject files: a record
    holds them for the runs before the one it records (``finished_*``), beside that run's."""

    rejects: int = 0
    load_ids: tuple[str, ...] = ()
    reject_files: tuple[str, ...] = ()

    @staticmethod
    def finished_before(row: Optional[dict[str, Any]]) -> History:
        """The history a record keeps of the finished runs before the run it records."""
        if row is None:
            return History()
        return History(
            int(row.get("finished_rejects", 0)),
            listed(row, "finished_load_ids"),
            listed(row, "finished_reject_files"),
        )

    @staticmethod
    def of_job(row: dict[str, Any]) -> History:
        """The whole history of a job whose record is of a finished run: the runs before it,
        and it (the runs it resumed included)."""
        before = History.finished_before(row)
        files = [*before.reject_files]
        files += [f for f in _reject_files(row) if f not in files]
        return History(
            before.rejects + int(row.get("rejects", 0)),
            (*before.load_ids, *_load_ids(row)),
            tuple(files),
        )

    def recorded(self) -> dict[str, Any]:
        """The record's ``finished_*`` fields (none when there is no history)."""
        out: dict[str, Any] = {}
        if self.rejects:
            out["finished_rejects"] = self.rejects
        if self.load_ids:
            out["finished_load_ids"] = list(self.load_ids)
        if self.reject_files:
            out["finished_reject_files"] = list(self.reject_files)
        return out


def _reject_files(row: dict[str, Any]) -> tuple[str, ...]:
    """The reject files a run record names (none in a record from before they were kept)."""
    return listed(row, "reject_files")


def already_loaded(
    table: str, rejects: int, gone: int = 0, files: Sequence[str] = (), runs: int = 1
) -> str:
    """The note of a run that finds its job loaded by an earlier one, or ``runs`` of them
    (``--incremental`` runs; ``gone``: sources they loaded that are not listed now; ``files``:
    the reject files of its runs)."""
    where = "its reject file"
    if files:
        where = ("its reject file " if len(files) == 1 else "its reject files ") + ", ".join(files)
    by, that = ("earlier runs", "those runs") if runs > 1 else ("an earlier run", "that run")
    return (
        f"{table}: already loaded by {by} of this job"
        + (f" ({gone:,} source(s) {that} loaded are gone since)" if gone else "")
        + "; nothing to do "
        + (f"({that} rejected {rejects:,} row(s): see {where}; " if rejects else "(")
        + "`restart=True` loads it again)"
    )


def range_part(batch: str, lo: int, hi: int) -> str:
    """The marker of rows [lo, hi) of a batch (a piece committed while bisecting it)."""
    return f"{batch}/{lo}-{hi}"


def committed_ranges(parts: set[str], batch: str) -> list[tuple[int, int]]:
    """The row ranges of ``batch`` that pieces committed while bisecting it cover."""
    head = batch + "/"
    out = []
    for p in parts:
        if p.startswith(head):
            lo, _, hi = p[len(head) :].partition("-")
            out.append((int(lo), int(hi)))
    return out


def gaps(n: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges of [0, n) that no range of ``covered`` includes, in order."""
    out, at = [], 0
    for lo, hi in sorted(covered):
        if lo > at:
            out.append((at, lo))
        at = max(at, hi)
    if at < n:
        out.append((at, n))
    return out


def _resumed_where(source: int, record: int, sources: int) -> str:
    """Where a run resumes, for its note (a tryout read "after record 0" as nothing kept)."""
    if source >= sources:
        return " with every source read (it stopped before recording its end)"
    if record == 0:
        return f" from the start of source {source + 1}"
    return f" at source {source + 1}, after record {record:,}"


def _options_change(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each recorded option that differs, as "`name` old -> new" (a field of the dialect or
    of the value conversions, named as a library caller sets it; unset: its default)."""
    out: list[str] = []
    seen: set[str] = set()
    # a preset one run read with and the other not (or another): said first, by its name,
    # and the fields it explains not again (`array_syntax`, `backslash_escapes` and such
    # are no flag of the command line); a field either run set over its preset still is
    a, b = old.get("dialect") or {}, new.get("dialect") or {}
    was, now = _preset_of(a), _preset_of(b)
    if was != now:
        if was is not None and now is not None:
            out.append(
                f"that run read the files with {option('dialect', was)}, this one with "
                f"{option('dialect', now)}"
            )
        elif was is not None:
            out.append(f"that run read the files with {option('dialect', was)}, this one not")
        else:
            out.append(f"this run reads the files with {option('dialect', now)}, that one did not")
        set_was, set_now = _preset_set(was), _preset_set(now)
        for key in set(a) | set(b):
            if _set(a, key) == _set(set_was, key) and _set(b, key) == _set(set_now, key):
                seen.add(key)
    for group in ("dialect", "convert"):  # the conversions repeat some of the dialect's
        a, b = old.get(group) or {}, new.get(group) or {}
        for key in sorted(set(a) | set(b)):
            if _set(a, key) != _set(b, key) and key not in seen:
                seen.add(key)
                out.append(f"`{key}` {_shown(a, key)} -> {_shown(b, key)}")
    names = {"map": "map", "ignore": "ignore", "by_position": "columns"}
    a, b = old.get("columns") or {}, new.get("columns") or {}
    for key, name in names.items():
        if (a.get(key) or None) != (b.get(key) or None):  # none and empty alike
            out.append(f"`{name}` {_shown_columns(a, key)} -> {_shown_columns(b, key)}")
    return out


def _shown_columns(values: dict[str, Any], key: str) -> str:
    """A recorded column option as its flags take it: ``map`` as CSV=TABLE pairs, ``ignore``
    and ``by_position`` as names (a tryout read "[] -> [['Nmae', 'Name']]")."""
    value = values.get(key)
    if not value:
        return "none"
    if key == "map":
        return ", ".join(
            f"{pair[0]}={pair[1]}" if isinstance(pair, list) and len(pair) == 2 else str(pair)
            for pair in value
        )
    return ",".join(str(name) for name in value) if key == "by_position" else ", ".join(value)


def _set(values: dict[str, Any], key: str) -> tuple[bool, str]:
    """A recorded option as compared: whether it is set, and its value as JSON (a record
    leaves out an option at its default, so an option set to None is not the default: a
    tryout's `--quote ''` after a run with quotes was found 'already loaded')."""
    return key in values, json.dumps(values.get(key), sort_keys=True)


def _preset_of(dialect: dict[str, Any]) -> Optional[str]:
    """The preset a recorded dialect was read with, by the fields only that preset sets:
    ``postgres-text`` PostgreSQL's escapes, ``mysql`` backslash escapes, ``postgres`` its
    array text (``postgresql`` is ``postgres``; ``csv``, ``bigquery`` and ``excel`` are the
    defaults)."""
    if dialect.get("escape_style") == "postgres":
        return "postgres-text"
    if dialect.get("backslash_escapes"):
        return "mysql"
    if dialect.get("array_syntax") == "postgres":
        return "postgres"
    return None


def _preset_set(preset: Optional[str]) -> dict[str, Any]:
    """The fields ``preset`` sets, as a record holds them (none: the defaults)."""
    if preset is None:
        return {}
    result: dict[str, Any] = json.loads(json.dumps(canonical(PRESETS[preset])))
    return result


def _shown(values: dict[str, Any], key: str) -> str:
    if key not in values:
        return "the default"
    return "none" if values[key] is None else repr(values[key])


def identity_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two source identities, e.g. "size 120 -> 180, modified
    2026-11-24 09:40:01 UTC -> 2026-11-24 09:47:12 UTC"."""

    def show(key: str, v: Any) -> str:
        if v is None:
            return "none"
        if key == "mtime_ns":  # to the nanosecond: two times may differ by less than 1 us
            seconds, ns = divmod(int(v), 10**9)
            t = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
            return f"{t:%Y-%m-%d %H:%M:%S}.{ns:09d} UTC"
        return f"{v:,}" if key == "size" else str(v)

    names = {"generation": "generation", "size": "size", "mtime_ns": "modified"}
    diffs = [
        f"{label} {show(key, old.get(key))} -> {show(key, new.get(key))}"
        for key, label in names.items()
        if old.get(key) != new.get(key)
    ]
    diffs += [
        f"{k} {old.get(k)} -> {new.get(k)}"
        for k in sorted(set(old) | set(new))
        if k not in names and old.get(k) != new.get(k)
    ]
    return ", ".join(diffs) or "its identity differs"
