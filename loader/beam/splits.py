"""``load --runner R --presplit``: a table's split points are its key-range boundaries.

The launcher samples the sources for pre-splitting as a single-process load does
(loader/presplit.py, loader/sample.py). For a Beam load, the table's points are then not the
sample's own quantiles but the job's key-range boundaries: the ones an earlier run stored
(part ``beam/bounds``, a resume), else boundaries cut from that same sample and stored now, so
the pipeline reuses them instead of sampling again and each key range a worker commits
starts on a split of its own. The number of key ranges is then ``--key-ranges``, else the
larger of the points the table's share of ``--nodes`` gives it plus one and the count its
input's size asks for (:func:`loader.beam.spill.key_ranges_for`). Index points stay the
sample's quantiles. Nothing here imports Beam.

With ``--restart`` the points are the sample's quantiles and nothing is stored: the load
deletes the job's earlier boundaries and the pipeline samples afresh.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from ..config import LoadConfig
from ..schema import TableSchema
from ..sort import duplicate_key_mask
from .spill import key_ranges_for
from .work import BOUNDS_PART, boundaries, bounds_from_state, keep_bounds


def key_range_points(
    config: LoadConfig, store: Any, run_id: str, schema: TableSchema, sample: Any, count: int
) -> Optional[pa.Table]:
    """The keys of ``schema``'s split points for a Beam load (None: the sample's quantiles)."""
    if config.restart:
        return None
    stored = store.get(run_id, schema.name, BOUNDS_PART)
    if stored is not None:
        bounds = bounds_from_state(stored)
    else:
        total = int(getattr(sample, "bytes_total", 0) or 0)
        key_ranges = config.key_ranges or max(
            count + 1,
            key_ranges_for(
                total, 0, config.buffer_size, math.ceil(total / config.range_size) if total else 1
            ),
        )
        names = list(schema.key_names)
        keys = (
            sample.rows.select(names) if all(n in sample.rows.column_names for n in names) else None
        )
        if keys is None or not keys.num_rows:
            return None
        bounds = keep_bounds(
            store, run_id, schema.name, boundaries([keys], schema, key_ranges), key_ranges
        )
    if bounds is None or not bounds.num_rows:
        return None  # one key range (--key-ranges 1): the sample's quantiles
    distinct = ~duplicate_key_mask(bounds, schema.primary_key)
    return bounds.filter(pa.array(np.asarray(distinct)))
