"""A Beam job run again resumes from its batch markers (``beam/<range>/<set>/<batch>``), which
name batches by position in a key range's sorted rows: they stay true only while the sources
are the ones the committed batches were read from.

The common way to meet a change is the ``max_bad_rows`` one: a run stops (exit 4), the user
fixes the file and runs the same command again, which is the same job (same run id). When
the stopped run committed nothing (the read step's rejects were over the limit, so no key
range committed), the fixed sources are simply recorded and the job goes on. When an earlier
run did commit batches, resuming over other data would skip rows by position: refused, with
the ``restart`` hint, as the single-process checkpoint refuses it.

The same holds for the options that change what is written (dialect, value conversions,
column mapping: as in the single-process checkpoint's fingerprint) and for the batch budgets
that cut a key range's batches (``max_mutations``, ``max_batch_bytes``, ``batch_rows``):
part ``beam/job`` records them; a later run with other ones, while batches are committed, is
refused naming them (:func:`check_options`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..config import LoadConfig, TableJob
from ..errors import StateError
from ..resume.checkpoint import BATCHING_VERSION, STREAM_KINDS, identity_change, listed, only_gone
from ..resume.incremental import SEND_AGAIN
from ..resume.stores import canonical, digest
from ..source.identity import SourceInfo

SOURCES_PART = "beam/sources"
"""The job's state part holding the identities of the sources its batches were read from."""
OPTIONS_PART = "beam/job"
"""The job's state part holding what its options write and how they cut batches."""
DONE_PART = "beam/done"
"""The job's state part a run that loaded every row leaves: its sources, options, rejects."""
RUNS_PART = "beam/runs"
"""The job's state part listing the ``load_id`` s of its runs since it began (or restarted)."""


def forget_run(store: Any, run_id: str, table: str, before: Sequence[str]) -> None:
    """Leave this run out of the job's runs again (``before``: the runs listed before it), as
    one that committed nothing; best effort (the run is over, and may be failing)."""
    try:
        if before:
            store.put(run_id, table, RUNS_PART, {"load_ids": list(before)})
        else:
            store.delete_prefix(run_id, table, RUNS_PART)
    except Exception:  # noqa: BLE001 - a run listed that committed nothing: only a note
        pass


def runs_before(store: Any, run_id: str, table: str, load_id: str) -> tuple[str, ...]:
    """The ``load_id`` s of the runs of the job before this one (``load_id``), now recorded
    with it: a resumed run's report names them, as a single-process resume does (their
    reject lines are the job's too: rows refused at commit are not read again)."""
    before = listed(store.get(run_id, table, RUNS_PART) or {}, "load_ids")
    if load_id:
        store.put(run_id, table, RUNS_PART, {"load_ids": [*before, load_id]})
    return before


@dataclass(frozen=True)
class Finished:
    """What :func:`finished` finds of an earlier run that loaded the job to its end."""

    rejects: int
    gone: int
    """Sources it loaded that are not listed now."""
    load_ids: tuple[str, ...] = ()
    """Its ``load_id`` (none in a record from before they were kept)."""
    reject_files: tuple[str, ...] = ()
    """Its reject file, when it rejected rows into one."""


def finished(
    store: Any, run_id: str, table: str, config: LoadConfig, job: TableJob,
    sources: Sequence[SourceInfo],
) -> Optional[Finished]:  # fmt: skip
    """The earlier run that loaded these sources with these options to the end (the job is
    loaded: nothing to do), or None. Streams have no identity: never loaded."""
    if any(s.kind in STREAM_KINDS for s in sources):
        return None
    done = store.get(run_id, table, DONE_PART)
    if done is None:
        return None
    now = _done_state(config, job, sources)
    gone = _only_gone(done.get("sources") or [], now["sources"])
    if done.get("options") != now["options"] or gone is None:
        return None
    return Finished(
        int(done.get("rejects", 0)), gone, listed(done, "load_ids"), listed(done, "reject_files")
    )


def _only_gone(loaded: list[Any], now: list[Any]) -> Optional[int]:
    """:func:`~loader.resume.checkpoint.only_gone` of two lists of source identities."""
    return only_gone({d["uri"]: d for d in loaded}, {d["uri"]: d for d in now})


def record_finished(
    store: Any, run_id: str, table: str, config: LoadConfig, job: TableJob,
    sources: Sequence[SourceInfo], rejects: int, load_id: str = "",
) -> None:  # fmt: skip
    """What :func:`finished` finds: this run (``load_id``) loaded every row of ``sources``,
    rejecting ``rejects`` (a Beam run reads every source again, so its reject file holds all
    of the job's)."""
    state = {**_done_state(config, job, sources), "rejects": rejects}
    runs = listed(store.get(run_id, table, RUNS_PART) or {}, "load_ids")
    if runs or load_id:  # the runs it took, this one the last
        state["load_ids"] = list(runs or (load_id,))
    if rejects and config.rejects is not None:
        state["reject_files"] = [str(config.rejects)]
    store.put(run_id, table, DONE_PART, state)


def _done_state(config: LoadConfig, job: TableJob, sources: Sequence[SourceInfo]) -> Any:
    state = {"sources": [s.to_dict() for s in sources], "options": job_options(config, job)}
    return json.loads(json.dumps(state, sort_keys=True))  # as the store hands it back


def committed_batches(store: Any, run_id: str, table: str) -> int:
    """How many batch markers earlier runs of the job left (its bookkeeping parts aside)."""
    from .work import BOUNDS_PART

    own = (BOUNDS_PART, SOURCES_PART, OPTIONS_PART, DONE_PART, RUNS_PART)
    return sum(1 for p in store.parts(run_id, table, "beam/") if p not in own)


def check_sources(store: Any, run_id: str, table: str, sources: Sequence[SourceInfo]) -> None:
    """Record the sources' identities on the job's first run; on a later run, a StateError if
    they changed while batches of the earlier data are committed (else the new ones are
    recorded)."""
    now = {"sources": [s.to_dict() for s in sources]}
    if store.claim(run_id, table, SOURCES_PART, now):
        return
    stored = store.get(run_id, table, SOURCES_PART) or {}
    if stored.get("sources") == now["sources"]:
        return
    done = store.get(run_id, table, DONE_PART)
    if done is not None and _only_gone(stored.get("sources") or [], now["sources"]):
        return  # sources of a finished job gone since, the others as loaded: nothing to do
    batches = committed_batches(store, run_id, table)
    if not batches:
        store.put(run_id, table, SOURCES_PART, now)
        return
    old = {d["uri"]: d for d in stored.get("sources", [])}
    new = {d["uri"]: d for d in now["sources"]}
    what = "changed"
    for uri in sorted(set(old) | set(new)):
        a, b = old.get(uri), new.get(uri)
        if a != b:
            what = (
                f"source {uri} is new"
                if a is None
                else f"source {uri} is gone"
                if b is None
                else f"source {uri} changed ({identity_change(a, b)})"
            )
            break
    if done is not None:  # a nightly file rewritten in place
        raise StateError(
            f"{table}: {what} since job {run_id} loaded it (its last run finished)",
            hint="a job with `runner` loads all of its sources on every run: re-run with "
            "`restart=True` to load them again (upsert writes over the loaded rows; insert "
            "with `skip_existing=True` leaves them as they are), or load without `runner` "
            "with `incremental=True` to load only new and changed sources",
        )
    raise StateError(
        f"{table}: {what} since an earlier run of job {run_id} committed {batches:,} "
        "batch(es) of it",
        hint="re-run with `restart=True` to load from scratch",
    )


_BUDGETS = {"max_mutations": "max_mutations", "max_batch_bytes": "max_batch_bytes"}
_BUDGETS["max_batch_rows"] = "batch_rows"  # the layout's key -> the option


def job_options(config: LoadConfig, job: TableJob) -> dict[str, Any]:
    """What a run's batches depend on besides its sources: the options that change a value or
    a column (digested, as the single-process fingerprint does) and the batch budgets."""
    written = digest(
        {
            "mode": config.mode,
            "dialect": canonical(config.dialect),
            "convert": canonical(config.convert),
            "columns": {
                "map": sorted(config.mapping),
                "ignore": sorted(config.ignore),
                "by_position": list(job.columns) if job.columns else None,
            },
        }
    )
    layout = {"batching": BATCHING_VERSION}
    layout.update({k: getattr(config, option) for k, option in _BUDGETS.items()})
    return {"written": written, "layout": layout}


def check_options(store: Any, run_id: str, table: str, config: LoadConfig, job: TableJob) -> None:
    """Record the job's options on its first run; on a later run, a StateError if they differ
    while batches cut with the earlier ones are committed (else the new ones are recorded)."""
    now = job_options(config, job)
    if store.claim(run_id, table, OPTIONS_PART, now):
        return
    stored = store.get(run_id, table, OPTIONS_PART) or {}
    if stored == now:
        return
    batches = committed_batches(store, run_id, table)
    if not batches:
        store.put(run_id, table, OPTIONS_PART, now)
        return
    since = f"since an earlier run of job {run_id} committed {batches:,} batch(es) of it"
    if stored.get("written") != now["written"]:
        raise StateError(
            f"{table}: options that change what is written (the dialect, value conversions "
            f"or column mapping) differ {since}",
            hint="run it with the earlier options, or re-run with `restart=True` to load it "
            "again with these",
        )
    old = stored.get("layout") or {}
    differ = [
        f"`{option}={old[k]!r}`"
        for k, option in _BUDGETS.items()
        if k in old and old[k] != now["layout"].get(k)
    ]
    raise StateError(
        f"{table}: the batch options differ {since}, whose markers name other rows with these",
        hint="run it with the earlier values ("
        + (", ".join(differ) or "this loader's version")
        + "), or re-run with `restart=True` to load from scratch",
    )


def forget_streams(
    store: Any,
    run_id: str,
    table: str,
    refuses_rewrites: bool,
    sources: Sequence[SourceInfo],
    notes: Optional[list[str]] = None,
) -> None:
    """A job reading stdin or a pipe is never resumed (as in a single-process load): nothing
    identifies a stream's content, so an earlier run's markers may name other rows. Its state
    goes and every row is written again; insert mode (``refuses_rewrites``), which would refuse
    the rows an earlier run wrote, asks for upsert instead while batches are committed."""
    if not any(s.kind in STREAM_KINDS for s in sources):
        return
    batches = committed_batches(store, run_id, table)
    if batches and refuses_rewrites:
        raise StateError(
            f"{table}: an earlier run of job {run_id} committed {batches:,} batch(es) from a "
            "pipe or stdin, whose content cannot be compared with this run's; insert mode "
            "cannot load it again without refusing the rows that run wrote",
            hint=f"load it with {SEND_AGAIN}; or `restart=True` if the earlier run's rows are "
            "not in it",
        )
    if batches and notes is not None:
        notes.append(
            f"{table}: not resuming the earlier run of job {run_id}: it read a pipe or stdin, "
            "whose content cannot be compared; every row is written again"
        )
    store.delete_prefix(run_id, table, "beam/")
