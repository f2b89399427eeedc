"""A Beam job run again resumes from its batch markers (``beam/<range>/<set>/<batch>``), which
name batches by position in a key range's sorted rows: they stay true only while the sources
are the ones the committed batches were read from.

The common way to meet a change is the ``max_bad_rows`` one: a run stops (exit 4), the user
fixes the file and runs the same command again, which is the same job (same run id). When
the stopped run committed nothing (the read step's rejects were over the limit, so no key
range committed), the fixed sources are simply recorded and the job goes on. When an earlier
run did commit batches, resuming over other data would skip rows by position: refused, with
the ``restart`` hint, as the single-process checkpoint refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import StateError
from ..resume.checkpoint import identity_change
from ..source.identity import SourceInfo

SOURCES_PART = "beam/sources"
"""The job's state part holding the identities of the sources its batches were read from."""


def committed_batches(store: Any, run_id: str, table: str) -> int:
    """How many batch markers earlier runs of the job left (its bookkeeping parts aside)."""
    from .work import BOUNDS_PART

    own = (BOUNDS_PART, SOURCES_PART)
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
    raise StateError(
        f"{table}: {what} since an earlier run of job {run_id} committed {batches:,} "
        "batch(es) of it",
        hint="re-run with `restart=True` to load from scratch",
    )
