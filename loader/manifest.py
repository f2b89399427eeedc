"""Multi-table manifests.

The Dataflow "GCS Text to Cloud Spanner" import manifest is accepted unchanged::

    {"tables": [{"table_name": "Orders",
                 "file_patterns": ["gs://bucket/orders/*.csv"],
                 "columns": [{"column_name": "OrderId", "type_name": "INT64"}, ...]}]}

``columns``, when given, names the file's fields by position: the files have no header row
(as the Dataflow template reads them); without it the dialect decides (a header row by
default). Its ``type_name`` s are not read: values are read as the table's column types. Relative local file patterns are resolved against the manifest's own directory.
Tables may be listed in any order: the loader orders them by interleaving and foreign keys
itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import TableJob
from .errors import ConfigError


def read_manifest(path: Path) -> list[TableJob]:
    """Parse a manifest file into table jobs."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read manifest {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"manifest {path} is not valid JSON: {e.msg} at line {e.lineno}",
            hint='expected {"tables": [{"table_name": ..., "file_patterns": [...]}]}',
        ) from e
    tables = data.get("tables") if isinstance(data, dict) else None
    if not isinstance(tables, list) or not tables:
        raise ConfigError(
            f'manifest {path} has no "tables" list',
            hint='expected {"tables": [{"table_name": ..., "file_patterns": [...]}]}',
        )
    base = Path(path).resolve().parent
    jobs = []
    for i, entry in enumerate(tables):
        jobs.append(_job(entry, i, base, path))
    names = [j.table.lower() for j in jobs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"manifest {path} lists table(s) twice: {', '.join(dupes)}")
    return jobs


def _job(entry: Any, i: int, base: Path, path: Path) -> TableJob:
    if not isinstance(entry, dict) or not isinstance(entry.get("table_name"), str):
        raise ConfigError(f'manifest {path}: tables[{i}] needs a "table_name" string')
    patterns = entry.get("file_patterns")
    if (
        not isinstance(patterns, list)
        or not patterns
        or not all(isinstance(p, str) for p in patterns)
    ):
        raise ConfigError(
            f'manifest {path}: table {entry["table_name"]} needs a non-empty "file_patterns" list'
        )
    columns = None
    if entry.get("columns") is not None:
        cols = entry["columns"]
        if not isinstance(cols, list) or not all(
            isinstance(c, dict) and isinstance(c.get("column_name"), str) for c in cols
        ):
            raise ConfigError(
                f"manifest {path}: columns of {entry['table_name']} must be "
                '[{"column_name": ..., "type_name": ...}]'
            )
        columns = tuple(c["column_name"] for c in cols)
    return TableJob(
        table=entry["table_name"],
        sources=tuple(_resolve(p, base) for p in patterns),
        columns=columns,
    )


def _resolve(pattern: str, base: Path) -> str:
    if pattern == "-" or "://" in pattern or Path(pattern).is_absolute():
        return pattern
    return str(base / pattern)
