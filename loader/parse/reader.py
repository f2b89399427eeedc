"""Reading: :func:`read_blocks` streams a source through Arrow's CSV reader
(:func:`pyarrow.csv.open_csv`, every column read as ``binary`` so that neither type inference
nor a stray invalid UTF-8 byte can fail a whole block) and yields :class:`~loader.parse.ParsedBlock` s.

The stream Arrow reads is prepared in :mod:`~loader.parse.stream` and gated in
:mod:`~loader.parse.gate`; each batch becomes a block in :mod:`~loader.parse.blocks`; the header's
names are resolved against the table in :mod:`~loader.parse.columns`.
"""

from __future__ import annotations

import codecs
import functools
import logging
import re
from collections.abc import Callable, Collection, Generator, Mapping
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import AGAIN_WHEN_FIXED, LoaderError, SchemaError, SourceError, option
from ..schema import TableSchema
from .blocks import (
    _OPEN_QUOTE,
    DeferredBlock,
    ParsedBlock,
    _BadRow,
    _finish_block,
    _number_block,
    _open_quote_at_end,
    _record_left_open,
    _reject_open_quote,
    _rejects_only,
)
from .columns import folded_name, looks_like_value, resolve_columns
from .dialect import Dialect
from .escapes import _PUA_LF, _unescape_backslashes
from .gate import READAHEAD_BLOCKS, _ReadaheadGate, lend
from .nul import _NulGuard, restore_nul, restore_text
from .quotes import QuoteWatch, StrayQuote, watches
from .stream import (
    _HEAD_CHUNK,
    _UTF8_BOM,
    MAX_CSV_COLUMNS,
    Readable,
    _check_header,
    _Head,
    _too_large,
    _too_wide,
    _Transcoder,
    one_field_line,
    split_fields,
)

log = logging.getLogger("loader.parse")


def read_blocks(
    stream: Readable,
    source_name: str,
    table: TableSchema,
    dialect: Dialect,
    *,
    mapping: Optional[Mapping[str, str]] = None,
    ignore: Collection[str] = (),
    filled: Collection[str] = (),
    update: bool = False,
    block_size: int = 16 << 20,
    on_note: Optional[Callable[[str], None]] = None,
    file_start: bool = True,
    lines_before: int = 0,
    records_before: int = 0,
) -> Generator[ParsedBlock, None, None]:
    """Stream ``stream`` as parsed blocks of about ``block_size`` bytes.

    The CSV's columns are resolved against ``table`` with :func:`resolve_columns` (``mapping``,
    ``ignore``, ``filled``, ``update``) before the first block is returned. Rows with the wrong number of
    fields or invalid UTF-8 (in a written column) become :class:`~loader.rejects.Reject` s in
    the block that covers their record number. Raises SchemaError / ConfigError for column
    problems (a header wider than MAX_CSV_COLUMNS included) and SourceError for an unreadable
    source, or a record larger than a parse block. A source whose lines all fall within
    ``dialect.skip_rows``, or that holds nothing but line ends (and a UTF-8 byte-order mark)
    after them, is an empty input: no blocks, and a note for the report given to ``on_note``
    (logged as a warning without one); one with a header and no records gives no rows.
    """
    blocks = read_deferred_blocks(
        stream,
        source_name,
        table,
        dialect,
        mapping=mapping,
        ignore=ignore,
        filled=filled,
        update=update,
        block_size=block_size,
        on_note=on_note,
        file_start=file_start,
        lines_before=lines_before,
        records_before=records_before,
    )
    try:
        for block in blocks:
            yield block.finish()
    finally:
        blocks.close()


def _input_bytes(batch: pa.RecordBatch) -> int:
    """About how many input bytes a batch of binary columns was parsed from: each value's
    bytes and one delimiter or line end after it. From the offsets' ends: no pass over the
    values (this runs on the reading thread, the load's serial stage)."""
    total = batch.num_rows * batch.num_columns
    for col in batch.columns:
        offsets = col.buffers()[1] if pa.types.is_binary(col.type) else None
        if offsets is not None and len(col):
            ends = np.frombuffer(offsets, dtype=np.int32, count=col.offset + len(col) + 1)
            total += int(ends[-1]) - int(ends[col.offset])
    return total


def _header_like(line: bytes, dialect: Dialect, names: Collection[str]) -> Optional[str]:
    """``line`` shown short when its fields (two at least) are ``names``, in any case, but
    for a third at most: a header, where the dialect expects a record (a tryout's
    PostgreSQL export had one column more than the table). None otherwise."""
    line = line.removeprefix(_UTF8_BOM).rstrip(b"\r\n")
    fields = split_fields(line, dialect) or []
    if dialect.trailing_delimiter and fields and fields[-1] == "":
        fields = fields[:-1]
    # as the columns are named, but for case, underscores and dashes (a PostgreSQL export's
    # snake_case header of a CamelCase table: country_name for CountryName)
    known = {folded_name(n) for n in names}
    named = sum(folded_name(f) in known for f in fields)
    if len(fields) < 2 or named < 2 or (len(fields) - named) * 3 > len(fields):
        return None
    if any(folded_name(f) not in known and looks_like_value(f) for f in fields):
        return None  # a number or a date among the names: a row (1,name,email)
    text = line.decode("utf-8", "replace")
    return text if len(text) <= 60 else text[:57] + "..."


def read_deferred_blocks(
    stream: Readable,
    source_name: str,
    table: TableSchema,
    dialect: Dialect,
    *,
    mapping: Optional[Mapping[str, str]] = None,
    ignore: Collection[str] = (),
    filled: Collection[str] = (),
    update: bool = False,
    block_size: int = 16 << 20,
    on_note: Optional[Callable[[str], None]] = None,
    file_start: bool = True,
    lines_before: int = 0,
    records_before: int = 0,
) -> Generator[DeferredBlock, None, None]:
    """:func:`read_blocks`, each block handed on as soon as it is read and numbered: the rest
    of its making (its rows' checks, their rejects, the text views) waits for
    :meth:`DeferredBlock.finish`, which touches nothing the reading does, so that another
    thread can do it while this one reads on (the reading is a load's one serial stage).

    ``file_start``: the stream starts where the file does (not a range of it), so a first line
    read as a record that names the columns is worth a note (a header the dialect reads as
    data). ``lines_before``, ``records_before``: lines and records of the file before the
    stream's (a range's) records, for the numbers a refusal made while reading gives (the
    blocks' own are shifted by the caller)."""
    enc = codecs.lookup(dialect.encoding).name
    transcode = None if enc in ("utf-8", "utf-8-sig") else dialect.encoding
    src: Any = stream
    if transcode or dialect.backslash_escapes:
        src = _Transcoder(stream, transcode, dialect, source_name, lines_before)
    invalid_label = "UTF-8" if transcode is None else dialect.encoding

    head = _Head(src, min(_HEAD_CHUNK, block_size))
    if dialect.skip_rows:
        lines = head.skip_lines(dialect.skip_rows)
        if head.at_end():
            note = (
                f"{source_name}: skipped: its {lines} line{'s' if lines != 1 else ''} "
                f"{'are' if lines != 1 else 'is'} all within {option('skip_rows', dialect.skip_rows)}"
            )
            (on_note or log.warning)(note)
            return
    utf16_marks = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
    if transcode is None and head.first_line(block_size)[0].startswith(utf16_marks):
        # read as UTF-8, every other byte a NUL: the names or rows make no sense
        raise SourceError(
            f"{source_name}: starts with a UTF-16 byte-order mark, but is read as UTF-8",
            hint=f"give {option('encoding', 'utf-16')}",
        )
    if head.only_blank(max(block_size, _HEAD_CHUNK)):
        what = "object" if source_name.startswith("gs://") else "file"
        what = "input" if source_name == "-" else what
        (on_note or log.warning)(f"{source_name}: skipped an empty {what}")
        return
    header_line = b""
    if dialect.header:
        _check_header(head, dialect, source_name, dialect.skip_rows + 1, block_size)
        header_line = head.first_line(block_size)[0]
        one_field = one_field_line(header_line, dialect) is True
    else:
        one_field = len(dialect.columns or table.writable_columns) == 1 and not (
            dialect.trailing_delimiter
        )
        if file_start:
            names = [*(c.name for c in table.columns), *(mapping or {}), *ignore]
            seen = _header_like(head.first_line(block_size)[0], dialect, names)
            if seen is not None:
                (on_note or log.warning)(
                    f"{source_name}: its first line ({seen}) names columns of {table.name}, but "
                    "the files are read as having no header row, so it is read as a "
                    f"row, and likely rejected: "
                    + (
                        "set `skip_rows=1` if it is a header (`columns` name the fields)"
                        if dialect.columns
                        else "set `header=True` if it is the header"
                    )
                )
    # A blank line is a record of one empty field where a record has one field (a NULL, or an
    # empty string where "" is not a NULL marker: MySQL writes '' so): Arrow's reader skips
    # blank lines, which there would drop rows without a word. Elsewhere it cannot be a row.
    keep_blank = not dialect.skip_blank_lines or one_field
    # Arrow is never handed a NUL byte (pyarrow < 26 drops or merges rows around one)
    guard = _NulGuard(head)
    src = guard
    # a stray quote closing on a later line joins rows without an error (loader.parse.quotes)
    watch = None
    if watches(dialect):
        src = watch = QuoteWatch(guard, dialect, dialect.skip_rows + 1 + lines_before)

    def restored(block: DeferredBlock) -> DeferredBlock:
        if not guard.active:
            return block
        marks = guard.marks  # as it is now: the guard reads on
        return block.then(lambda b: restore_nul(b, marks))

    pending: list[_BadRow] = []
    header_rows = 1 if dialect.header else 0
    record_base = header_rows  # pyarrow row numbers count the header

    def on_invalid(row: Any) -> str:
        number = row.number
        if number is None or number < 0:  # never with a serial reader; keep going regardless
            number = record_base + 1
        reason = _field_count_reason(row.expected_columns, row.actual_columns, row.text, dialect)
        pending.append(_BadRow(number - record_base, row.text, reason))
        return "skip"

    def resolved(names: list[str]) -> list[Optional[str]]:
        try:
            return resolve_columns(
                table, names, mapping, ignore, filled, update=update, named=targets_named
            )
        except LoaderError as e:  # of several files, say which one
            raise e.of(source_name) from None

    trailing = dialect.trailing_delimiter
    targets: Optional[list[Optional[str]]] = None
    used: list[tuple[int, str]] = []
    targets_named = not dialect.header and bool(dialect.columns)
    header_at = dialect.skip_rows + 1 if dialect.header and file_start else None
    if dialect.header:
        read_opts = pacsv.ReadOptions(
            use_threads=False,
            block_size=block_size,
            autogenerate_column_names=True,
        )
        n_fields: Optional[int] = None
    else:
        csv_names = list(dialect.columns or [c.name for c in table.writable_columns])
        # now, not at the first row: a name that is no column is the options' fault, not
        # each row's (with a wrong field count every row would be rejected instead)
        targets = resolved(csv_names)
        used = [(i, t) for i, t in enumerate(targets) if t is not None]
        n_fields = len(csv_names) + (1 if trailing else 0)
        read_opts = pacsv.ReadOptions(
            use_threads=False,
            block_size=block_size,
            column_names=[f"f{i}" for i in range(n_fields)],
        )
    convert_opts = pacsv.ConvertOptions(
        column_types={f"f{i}": pa.binary() for i in range(MAX_CSV_COLUMNS)},
        null_values=list(dialect.null_markers),
        strings_can_be_null=bool(dialect.null_markers),
        quoted_strings_can_be_null=False,
    )
    gate = _ReadaheadGate(src, READAHEAD_BLOCKS)
    try:
        try:
            gate.reader = gate.call(
                pacsv.open_csv,
                gate.for_arrow(),
                read_options=read_opts,
                # made here, held by Arrow only: see lend
                parse_options=_parse_options(
                    dialect, lend(functools.partial(on_invalid)), keep_blank=keep_blank
                ),
                convert_options=convert_opts,
            )
        except pa.ArrowInvalid as e:
            if "Empty CSV file" in str(e):
                if dialect.header:
                    raise _no_header(source_name, watch) from None
                return
            if "straddl" in str(e):  # the first record (no header) is larger than a block
                first = dialect.skip_rows + 1 + lines_before
                raise _too_large(source_name, 1 + records_before, first, block_size) from None
            undecodable = _undecodable_row(e, source_name, record_base - records_before, dialect)
            raise undecodable or SourceError(f"{source_name}: cannot parse as CSV: {e}") from None

        newline_markers = ["\n"] + ([_PUA_LF] if dialect.backslash_escapes else [])
        count_newlines = dialect.newlines_in_values or dialect.backslash_escapes
        next_record = 1
        next_line = dialect.skip_rows + 1
        held: Optional[DeferredBlock] = None
        held_last: Optional[tuple[Optional[bytes], int, int]] = None

        def as_text(col: pa.Array) -> pa.Array:
            # For header names only: invalid bytes are replaced, not fatal.
            return pa.array(
                [None if v is None else v.decode("utf-8", "replace") for v in col.to_pylist()],
                pa.string(),
            )

        while True:
            try:
                batch = gate.next_batch()
            except StopIteration:
                batch = None
            except pa.ArrowInvalid as e:
                if watch is not None and watch.stray is not None:
                    # a stray quote read on to the record too large: the quote is the cause
                    raise _stray_quote(source_name, watch.stray, dialect, header_at) from None
                if "straddl" in str(e):
                    # Every record before it was handed on, or waits in pending (a wrong
                    # field count, found ahead of the batches): the next one is too large.
                    record, line = next_record, next_line
                    if targets is None and dialect.header:
                        line += 1  # the header, not yet counted
                    for bad in sorted(pending, key=lambda b: b.record):
                        if bad.record == record:
                            record += 1
                            line += 1 + bad.text.count("\n")
                    raise _too_large(
                        source_name, record + records_before, line + lines_before, block_size
                    ) from None
                raise _undecodable_row(
                    e, source_name, record_base - records_before, dialect
                ) or SourceError(
                    f"{source_name}: cannot parse as CSV near record "
                    f"{next_record + records_before}: {e}"
                ) from None
            gate.took_batch()
            if watch is not None and watch.stray is not None:
                raise _stray_quote(source_name, watch.stray, dialect, header_at)
            if watch is not None and watch.escaped_null is not None:
                raise _escaped_null(source_name, watch.escaped_null, dialect)
            if batch is None:
                if targets is None and dialect.header:
                    raise _no_header(source_name, watch)
                if watch is not None and watch.text_null is not None:
                    (on_note or log.warning)(_text_null_note(source_name, watch.text_null))
                tail = b"".join(gate.tail)
                if pending:
                    last = max(pending, key=lambda b: b.record)
                    text = last.text.encode("utf-8", "replace")
                    if _open_quote_at_end(
                        tail, text, dialect, None, gate.tail_is_all
                    ) or _record_left_open(tail, text, dialect):
                        last.reason = _OPEN_QUOTE
                if held is not None:
                    if not pending and held_last is not None:
                        value, last_record, width = held_last
                        held = held.then(
                            functools.partial(
                                _reject_open_quote,
                                value=value,
                                last_record=last_record,
                                tail=tail,
                                dialect=dialect,
                                source=source_name,
                                table=table.name,
                                first_field=width == 1,
                                tail_is_all=gate.tail_is_all,
                                ended_line=gate.ended_line,
                            )
                        )
                    yield restored(held)
                if pending:
                    only = _rejects_only(pending, next_record, next_line, source_name, table, used)
                    yield restored(DeferredBlock.ready(only))
                return
            if targets is None:
                if dialect.header:
                    if batch.num_rows == 0:
                        continue
                    if batch.num_columns > MAX_CSV_COLUMNS:  # a header over several lines
                        raise _too_wide(source_name, f"{batch.num_columns:,}")
                    head = batch.slice(0, 1)
                    names_arr = [
                        as_text(head.column(i))[0].as_py() for i in range(head.num_columns)
                    ]
                    if None in names_arr:
                        # a name spelt as a NULL marker (`null_markers` apply to every line,
                        # the header's too): its text as the line has it
                        written = split_fields(header_line.removeprefix(_UTF8_BOM), dialect)
                        if written is not None and len(written) == len(names_arr):
                            names_arr = [w if n is None else n for n, w in zip(names_arr, written)]
                    if dialect.backslash_escapes:
                        names_arr = _unescape_backslashes(
                            pa.array(names_arr, pa.string()), dialect
                        ).to_pylist()
                    names = [restore_text(n) or "" for n in names_arr]
                    nl = sum(n.count("\n") for n in names)
                    next_line += 1 + nl
                    if trailing is None:
                        trailing = len(names) > 1 and names[-1] == ""
                    if trailing:
                        if names[-1] != "":
                            raise SchemaError(
                                f"{source_name}: trailing delimiter expected, but the header's "
                                f"last column is {names[-1]!r}"
                            )
                        names = names[:-1]
                    csv_names = names
                    n_fields = len(names) + (1 if trailing else 0)
                    batch = batch.slice(1)
                targets = resolved(csv_names)
                used = [(i, t) for i, t in enumerate(targets) if t is not None]
            numbered, n_records, n_lines = _number_block(
                batch, pending, next_record, next_line, newline_markers if count_newlines else []
            )
            block = DeferredBlock(
                functools.partial(
                    _finish_block,
                    numbered,
                    source_name,
                    table,
                    dialect,
                    used,
                    n_fields if trailing else None,
                    invalid_label,
                ),
                _input_bytes(batch),
            )
            next_record += n_records
            next_line += n_lines
            # One block is held back until the next one is read: at the end of the input its
            # last record may turn out to hold a quote that is never closed (Arrow's reader
            # takes the end of the input as the end of the field).
            if held is not None:
                yield restored(held)
            held = block
            held_last = (
                (
                    batch.column(batch.num_columns - 1)[-1].as_py(),
                    next_record - 1,
                    batch.num_columns,
                )
                if batch.num_rows
                else None
            )

    finally:
        gate.release()


_TAB_SEPARATED = (
    f"MySQL's INTO OUTFILE reads with {option('dialect', 'mysql')}, PostgreSQL's COPY text "
    f"format with {option('dialect', 'postgres-text')}, other tab-separated files with a tab "
    f"as the {option('delimiter')}, which reads no backslash escapes and no \\N NULLs"
)
"""What a tab-separated file read with another delimiter is read with instead."""


def _field_count_reason(expected: int, actual: int, text: Optional[str], dialect: Dialect) -> str:
    """The reject reason of a record of ``actual`` fields where ``expected`` were due (``text``:
    the record as read), with what the text suggests went wrong."""
    reason = f"expected {expected} field{'s' if expected != 1 else ''}, found {actual}"
    text = text or ""
    if actual == 1 and text.rstrip("\r\n") == "\\.":
        # psql's end of a COPY block, left in a file read as CSV (a tryout's export)
        reason += (
            " (PostgreSQL's end-of-data line, \\. alone, which a CSV file does not "
            "need: leave it out of the file)"
        )
    elif actual == 1 and dialect.delimiter != "\t" and "\t" in text:
        reason += f" (the fields are tab-separated: {_TAB_SEPARATED})"
    elif dialect.delimiter != "\t" and "\t" in text and text.count("\t") + 1 == expected:
        # commas inside the values split it into some other count (a tryout's MySQL file)
        reason += f" (split on tabs it has {expected}: {_TAB_SEPARATED})"
    elif (
        actual == 1
        and dialect.delimiter == "\t"
        and "," in text
        and text.count(",") + 1 == expected
    ):
        # a comma-separated file read as tab-separated (`dialect='mysql'` on a CSV export)
        reason += (
            f" (split on commas it has {expected}: give a comma as the "
            f"{option('delimiter')}, or leave out {option('dialect', 'mysql')} for a CSV file)"
        )
    quoted = dialect.quote_char is not None and dialect.quote_char in text and "\n" in text
    joined = text.rstrip("\r\n").split("\n") if quoted else []
    lines = len(joined)
    if lines > 1 and any(dialect.delimiter in line for line in joined[1:]):
        # a stray quote joins the lines up to the next quote into one record: say so, or
        # the lines it took look like one row with a field too many
        reason += (
            f" (a record of {lines} lines: a quote in it may be a stray one, joining the "
            "lines after it up to the next quote into this record)"
        )
    return reason


_INVALID_ROW = re.compile(r"Row #(\d+): Expected (\d+) columns, got (\d+): (.*)", re.DOTALL)


def _undecodable_row(
    e: Exception, source_name: str, record_base: int, dialect: Dialect
) -> Optional[SourceError]:
    """The refusal of a record with the wrong field count that is not UTF-8 either: Arrow's
    reader hands such a record to the reject handler as text, decoding it first, and stops the
    source when that fails (pyarrow's own error names the row). None for other errors."""
    m = _INVALID_ROW.search(str(e))
    text = m.group(4) if m is not None else ""
    if m is None or ("\ufffd" not in text and not text.endswith(" ...")):
        return None  # the whole record shown, and decoded: the handler failed some other way
    number, expected, actual = (int(g) for g in m.groups()[:3])
    reason = _field_count_reason(expected, actual, m.group(4), dialect)
    return SourceError(
        f"{source_name}: record {number - record_base:,} holds bytes that are not UTF-8 and "
        f"has the wrong field count, {reason}; Arrow's reader cannot set such a record aside "
        "as a reject, so the source stops there",
        hint="fix that record, or read the file in its own encoding (e.g. "
        f"{option('encoding', 'latin-1')}) or with the dialect it was written in"
        + AGAIN_WHEN_FIXED,
    )


def _no_header(source_name: str, watch: Optional[QuoteWatch]) -> SourceError:
    """No header where one is expected: an empty file, or a quote in the header that is never
    closed (the header then takes the whole file into its last name)."""
    opened = watch.left_open() if watch is not None else None
    if opened is None:
        return SourceError(f"{source_name}: empty file, expected a header")
    return SourceError(
        f"{source_name}: a quote opened at line {opened:,} (the header) is never closed, so "
        "the header would take in the whole file",
        hint="close the quote (or escape it) in the header, then run the load again",
    )


def _text_null_note(source_name: str, line: int) -> str:
    """The note of a field ``\\N`` read with a tab as the delimiter and no escapes."""
    marker = option("null_markers", ("\\N",))
    return (
        f"{source_name}: line {line:,} holds \\N as a field, read as the text \\N: "
        "PostgreSQL's COPY text format and MySQL's INTO OUTFILE write NULL so, and backslash "
        f"escapes, which {option('dialect', 'postgres-text')} and {option('dialect', 'mysql')} "
        f"read (a NULL marker alone, {marker}, reads no escapes)"
    )


def _escaped_null(source_name: str, line: int, dialect: Dialect) -> SourceError:
    """A field ``\\N`` read with a backslash as the escape character: the text N, where the
    export (MySQL's FIELDS ESCAPED BY) meant NULL."""
    return SourceError(
        f"{source_name}: line {line:,} holds \\N as a field, MySQL's NULL, which a backslash "
        "as the escape character would read as the text N",
        hint=f"read a MySQL export with {option('dialect', 'mysql')} (adding "
        f"{option('quote_char', dialect.quote_char)} and "
        f"{option('delimiter', dialect.delimiter)} for FIELDS ENCLOSED BY and TERMINATED BY), "
        "or export NULL some other way",
    )


def _stray_quote(
    source_name: str, stray: StrayQuote, dialect: Dialect, header_at: Optional[int] = None
) -> SourceError:
    """The refusal of a stray quote (``header_at``: the header's line, if it has one)."""
    lines = stray.closed - stray.opened + 1
    quote = dialect.quote_char or '"'
    header = stray.opened == header_at
    return SourceError(
        f"{source_name}: a quote opened at line {stray.opened:,}"
        + (" (the header)" if header else "")
        + f" closes at line {stray.closed:,} with text after it ({stray.after!r}), so the "
        f"{lines:,} lines from one to the other would be one "
        + ("column name" if header else "field of one row"),
        hint=f"a quote that starts a value is taken as opening a quoted field: double it "
        f"({quote}{quote}) or quote the whole value in the file, or read it with the quote "
        "character its export used (an empty one for none)"
        + (
            f" (and {dialect.escape_char!r}, the escape character, just before a quote makes "
            "that quote data: a value ending in it does not close)"
            if dialect.escape_char
            else ""
        )
        + AGAIN_WHEN_FIXED,
    )


def _parse_options(
    dialect: Dialect, on_invalid: Callable[[Any], str], keep_blank: bool = False
) -> pacsv.ParseOptions:
    return pacsv.ParseOptions(
        delimiter=dialect.delimiter,
        quote_char=dialect.quote_char or False,
        double_quote=dialect.double_quote,
        escape_char=dialect.escape_char or False,
        newlines_in_values=dialect.newlines_in_values,
        ignore_empty_lines=dialect.skip_blank_lines and not keep_blank,
        invalid_row_handler=on_invalid,
    )
