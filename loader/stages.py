"""The per-block work of the two prefetch threads (loader/prefetch.py) between the parser and
the buffer: :func:`convert_stage` types a parsed block, :func:`encode_stage` turns it into
each row's Mutation bytes plus its key columns (:class:`Encoded`), ready for
:meth:`loader.buffer.Buffer.add`. Rows committed before an interruption are dropped here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

from .buffer import ROW_COL
from .convert import ConvertedBlock, ConvertOptions, convert_block
from .encode import encode_rows
from .parse import ParsedBlock
from .rejects import Reject
from .schema import TableSchema


def last_record(block: Any) -> Optional[int]:
    """The highest record number a parsed block covers (good rows or rejects)."""
    last = None
    if len(block.record_numbers):
        last = int(pc.max(block.record_numbers).as_py())
    for r in block.rejects:
        if r.record is not None and (last is None or r.record > last):
            last = r.record
    return last


Converted = tuple[Optional[int], Optional[tuple[list[Reject], ConvertedBlock]]]


def convert_stage(
    block: ParsedBlock, *, schema: TableSchema, options: ConvertOptions, source: str, skip: int
) -> Converted:
    """The first prefetch thread's work on one parsed block: its last record number, and the
    block typed, with the parser's rejects (the parsed text itself is dropped here); None when
    every record of it was committed before an interruption (only its position matters)."""
    last = last_record(block)
    if last is not None and last <= skip:
        return last, None
    return last, (block.rejects, convert_block(block, schema, options, source))


@dataclass
class Encoded:
    """A converted block ready for the buffer: the key columns, each row's encoded bytes
    (:data:`ROW_COL`), or all typed columns when ``keep_values``, in source order."""

    table: pa.Table
    columns: tuple[str, ...]
    """The table columns the CSV gives, in the order the encoded rows hold them."""
    records: pa.Array
    lines: Optional[pa.Array]
    rejects: list[Reject]
    """The block's rejected rows: the parser's, then the converter's."""


def encode_stage(
    item: Converted,
    *,
    schema: TableSchema,
    skip: int,
    keep_values: bool,
) -> tuple[Optional[int], Optional[Encoded]]:
    """The second prefetch thread's work: drop rows committed before an interruption, then
    encode each row into its Mutation bytes (rows are independent, so encoding before the
    sort is the same as after; the flush then only reorders the encoded rows)."""
    last, both = item
    if both is None:
        return last, None
    parse_rejects, converted = both
    table, records, lines = converted.table, converted.record_numbers, converted.line_numbers
    int_texts = converted.int_texts
    if skip:
        keep = pc.greater(records, skip)
        table, records = table.filter(keep), records.filter(keep)
        lines = lines.filter(keep) if lines is not None else None
        int_texts = {name: text.filter(keep) for name, text in int_texts.items()}
    columns = tuple(table.column_names)
    # a block of rejects only (e.g. every row of a header-less file with a wrong field count)
    # may have no columns at all: nothing to encode
    if not keep_values and table.num_columns:
        keys = table.select(list(schema.key_names))
        types = [schema.column(c).type for c in columns]
        rows = encode_rows(
            [table.column(c) for c in columns],
            types,
            int_texts=[int_texts.get(c) for c in columns],
        )
        table = keys.append_column(ROW_COL, rows)
    rejects = [*parse_rejects, *converted.rejects]
    return last, Encoded(table, columns, records, lines, rejects)
