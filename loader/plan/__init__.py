"""Plan: split plain CSV files into record-aligned byte ranges that can be read apart (by
Beam workers, or by threads of one process), each knowing where its records start in the file.

:func:`plan_ranges` / :func:`plan_file` give :class:`ByteRange` s (:mod:`loader.plan.ranges`),
found by a numpy scan of the file (:mod:`loader.plan.scan`). Nothing here imports Beam.
"""

from __future__ import annotations

from .ranges import DEFAULT_RANGE_SIZE, ByteRange, plan_file, plan_ranges, splittable

__all__ = ["DEFAULT_RANGE_SIZE", "ByteRange", "plan_file", "plan_ranges", "splittable"]
