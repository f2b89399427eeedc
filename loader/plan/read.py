"""Reading one :class:`~loader.plan.ByteRange` through the loader's own stages: parse
(:func:`loader.parse.read_blocks`), convert and encode (:mod:`loader.stages`), giving the same
rows, rejects, record and line numbers as a read of the whole file gives for those records.

A range that does not hold the file's header is read behind the file's prefix (skipped rows
and header, ``[0, data_start)``), so the parser resolves the columns exactly as it does for
the whole file; its record and line numbers are then moved to where the range starts.

Line numbers: exact at each range's start. Within a range, as for a whole file, blank lines are
not counted (see :mod:`loader.parse.blocks`), so a range's lines can only be closer to the
true lines than the whole file's read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from .. import parse
from ..convert import ConvertOptions
from ..parse import ParsedBlock, read_blocks
from ..schema import TableSchema
from ..source import open_source
from ..source.gcs import ClientArg
from ..stages import Encoded, convert_stage, encode_stage
from .ranges import ByteRange

if TYPE_CHECKING:
    from google.api_core.retry import Retry


class _Joined:
    """Two byte streams read one after the other (the file's prefix, then the range)."""

    def __init__(self, first: Any, second: Any) -> None:
        self._parts = [first, second]
        self.closed = False

    def read(self, size: int = -1, /) -> bytes:
        while self._parts:
            data = self._parts[0].read(size)
            if data:
                return bytes(data)
            self._parts.pop(0)
        return b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def _shift(block: ParsedBlock, records: int, lines: int) -> ParsedBlock:
    """``block`` with its record numbers moved by ``records`` and line numbers by ``lines``."""
    if not records and not lines:
        return block
    line_numbers = block.line_numbers
    if line_numbers is not None and lines:
        line_numbers = pc.add(line_numbers, pa.scalar(lines, pa.int64()))
    rejects = [
        dataclasses.replace(
            r,
            record=None if r.record is None else r.record + records,
            line=None if r.line is None else r.line + lines,
        )
        for r in block.rejects
    ]
    return ParsedBlock(
        block.strings,
        pc.add(block.record_numbers, pa.scalar(records, pa.int64())),
        line_numbers,
        rejects,
    )


def parse_range(
    rng: ByteRange,
    table: TableSchema,
    dialect: parse.Dialect,
    *,
    mapping: Optional[Mapping[str, str]] = None,
    ignore: Collection[str] = (),
    filled: Collection[str] = (),
    update: bool = False,
    block_size: int = 16 << 20,
    storage_client: ClientArg = None,
    retry: Optional[Retry] = None,
    on_note: Optional[Callable[[str], None]] = None,
) -> Iterator[ParsedBlock]:
    """The parsed blocks of ``rng``'s records (see :func:`loader.parse.read_blocks`), with the
    record and line numbers a read of the whole file gives them."""
    info = rng.source
    with open_source(
        info, storage_client=storage_client, retry=retry, start=rng.start, stop=rng.stop
    ) as body:
        stream: Any = body
        prefix = None
        if rng.header_skipped and rng.data_start:
            prefix = open_source(
                info, storage_client=storage_client, retry=retry, stop=rng.data_start
            )
            stream = _Joined(prefix, body)
        try:
            records = rng.first_record - 1
            lines = rng.first_line - (rng.prefix_lines + 1) if rng.header_skipped else 0
            for block in read_blocks(
                stream,
                info.uri,
                table,
                dialect,
                mapping=mapping,
                ignore=ignore,
                filled=filled,
                update=update,
                block_size=block_size,
                on_note=on_note if not rng.header_skipped else (lambda _n: None),
                file_start=rng.start == 0,
                lines_before=lines,
                records_before=records,
            ):
                yield _shift(block, records, lines)
        finally:
            if prefix is not None:
                prefix.close()


def read_range(
    rng: ByteRange,
    table: TableSchema,
    dialect: parse.Dialect,
    options: ConvertOptions,
    *,
    keep_values: bool = False,
    **parse_args: Any,
) -> Iterator[Encoded]:
    """``rng``'s records parsed, converted and encoded as the single-process load does
    (:func:`loader.stages.convert_stage` then :func:`~loader.stages.encode_stage`): one
    :class:`~loader.stages.Encoded` per parsed block, rejects included. ``parse_args`` go to
    :func:`parse_range`."""
    for block in parse_range(rng, table, dialect, **parse_args):
        converted = convert_stage(
            block, schema=table, options=options, source=rng.source.uri, skip=0
        )
        _last, encoded = encode_stage(converted, schema=table, skip=0, keep_values=keep_values)
        if encoded is not None:
            yield encoded
