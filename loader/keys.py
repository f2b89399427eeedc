"""Primary-key values as Python tuples, for the few places that need them row by row
(reading a batch's keys back, naming a rejected row). Never used on the hot path."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def key_tuples(keys: pa.Table) -> list[list[Any]]:
    """Each row of ``keys`` as a list of Python values the Spanner client can encode."""
    columns = [keys.column(i).to_pylist() for i in range(keys.num_columns)]
    return [list(row) for row in zip(*columns)]
