"""Parse: CSV bytes in some dialect -> blocks of string columns named by table column.

This stage knows how a file *looks* (delimiter, quoting, escapes, header, encoding, NULL
markers); :mod:`loader.convert` knows what the values *mean*. Parsing is pyarrow's streaming
CSV reader (:func:`pyarrow.csv.open_csv`) with every column read as ``binary`` so that neither
type inference nor a stray invalid UTF-8 byte can fail a whole block; UTF-8 is then validated
column by column and only a block that fails is searched for the offending rows.

Public API
----------
``Dialect``             frozen description of a CSV dialect; ``PRESETS`` / ``dialect_from_preset``
                        give the ``mysql``, ``postgres``, ``bigquery``, ``excel`` and ``csv`` ones.
``resolve_columns``     map the CSV's columns onto the table's (``mapping`` / ``ignore``), raising
                        :class:`~loader.errors.SchemaError` for unknown, generated or missing ones.
``read_blocks``         stream a source as :class:`ParsedBlock` s (string columns + record and line
                        numbers + the rows rejected while parsing).
``release_readers``     release every CSV reader still open (at exit, and by the CLI before it
                        leaves).

The modules
-----------
:mod:`~loader.parse.dialect`   how a file is written: ``Dialect``, the presets, NULL markers.
:mod:`~loader.parse.columns`   which table column each CSV column writes (``resolve_columns``).
:mod:`~loader.parse.escapes`   backslash escapes (MySQL's, PostgreSQL's text format): rewritten
                               in the byte stream, undone in the columns.
:mod:`~loader.parse.stream`    the stream Arrow reads: transcoding, ``skip_rows``, the header
                               measured (``MAX_CSV_COLUMNS``) before Arrow parses it.
:mod:`~loader.parse.nul`       NUL bytes kept away from Arrow (a private-use marker in the
                               stream, put back in the parsed blocks).
:mod:`~loader.parse.gate`      how far Arrow reads ahead, and the readers' teardown
                               (``release_readers``).
:mod:`~loader.parse.reader`    ``read_blocks``: the source through Arrow, batch by batch.
:mod:`~loader.parse.blocks`    ``ParsedBlock`` and how a batch becomes one: record and line
                               numbers, rows rejected while parsing, UTF-8 checks, a quote
                               never closed.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .blocks import ParsedBlock
    from .columns import resolve_columns
    from .dialect import PRESETS, Dialect, dialect_from_preset
    from .gate import READAHEAD_BLOCKS, release_readers
    from .reader import read_blocks
    from .stream import MAX_CSV_COLUMNS

# imported when first used: the command line needs the presets for its options, not Arrow
_WHERE = {
    "MAX_CSV_COLUMNS": ".stream",
    "PRESETS": ".dialect",
    "READAHEAD_BLOCKS": ".gate",
    "Dialect": ".dialect",
    "ParsedBlock": ".blocks",
    "dialect_from_preset": ".dialect",
    "read_blocks": ".reader",
    "release_readers": ".gate",
    "resolve_columns": ".columns",
}

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


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'loader.parse' has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
