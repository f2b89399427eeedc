"""Parse: CSV bytes in some dialect -> blocks of string columns named by table column.

The stage lives in :mod:`loader.parse.blocks` for now (being split into modules).
"""

from .blocks import _SCAN_STEP as _SCAN_STEP  # private names the tests use
from .blocks import (
    MAX_CSV_COLUMNS,
    PRESETS,
    READAHEAD_BLOCKS,
    Dialect,
    ParsedBlock,
    dialect_from_preset,
    read_blocks,
    release_readers,
    resolve_columns,
)
from .blocks import _all_utf8 as _all_utf8
from .blocks import _may_contain_newline as _may_contain_newline
from .blocks import _Transcoder as _Transcoder

__all__ = [
    "MAX_CSV_COLUMNS",
    "PRESETS",
    "READAHEAD_BLOCKS",
    "Dialect",
    "ParsedBlock",
    "dialect_from_preset",
    "read_blocks",
    "release_readers",
    "resolve_columns",
]
