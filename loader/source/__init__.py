"""Sources (moved into a package; the next commit splits it into one module per concept)."""

from .patterns import (
    DEFAULT_CHUNK_SIZE,
    SourceInfo,
    SourceStream,
    expand_sources,
    glob_to_regex,
    make_storage_client,
    open_source,
    probe_storage,
    read_retry,
    total_bytes,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "SourceInfo",
    "SourceStream",
    "expand_sources",
    "glob_to_regex",
    "make_storage_client",
    "open_source",
    "probe_storage",
    "read_retry",
    "total_bytes",
]
