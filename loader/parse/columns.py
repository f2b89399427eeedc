"""Columns: which table column each CSV column writes (``mapping`` / ``ignore``), checked
against the table: unknown, generated, doubly written and missing columns are refused."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping
from typing import Optional

from ..errors import ConfigError, SchemaError, option
from ..schema import TableSchema, spelt_as

_TAB_HINT = (
    "PostgreSQL's COPY text format (\\N for NULL, backslash escapes) reads with "
    f"{option('dialect', 'postgres-text')} and {option('header', True)}, MySQL's INTO OUTFILE "
    f"with {option('dialect', 'mysql')} and {option('header', True)}; other tab-separated "
    f"files take a tab as the {option('delimiter')} (written \\t), which reads no escapes"
)
"""The hint of a header whose names are separated by tabs: a tab delimiter alone would read
an export's escapes and NULL markers as text."""


def resolve_columns(
    table: TableSchema,
    csv_names: list[str],
    mapping: Optional[Mapping[str, str]] = None,
    ignore: Collection[str] = (),
    filled: Collection[str] = (),
    *,
    update: bool = False,
    named: bool = False,
) -> list[Optional[str]]:
    """Table column written from each CSV column (None: ignored), checked against the table.

    CSV names match table names exactly, else case-insensitively; ``mapping`` renames CSV
    columns, ``ignore`` drops them (their CSV names match the same way). ``filled`` names table columns the converter fills itself
    (commit timestamps): they count as present and must not also come from the CSV.
    SchemaError for an unknown or generated column, a column written twice, a key column or a
    NOT NULL column without default that nothing writes (``update``: update mode, where a
    row keeps the values of the columns not written, needs only the key); ConfigError for a
    mapping or ignore entry naming no CSV column. ``named``: ``csv_names`` are the dialect's
    ``columns`` (a file without a header), which the hint for an unknown one then points at.
    """
    # CSV names as the file spells them: an exact match, else the one that differs in case
    mapping = {_spelt(k, csv_names): v for k, v in (mapping or {}).items()}
    ignore = {_spelt(k, csv_names) for k in ignore}
    all_names = ", ".join(c.name for c in table.columns)
    for name in list(mapping) + sorted(ignore):
        if name not in csv_names:
            raise ConfigError(
                f"CSV column {name!r} (in the column mapping or ignore list) is not in the file",
                hint="the file's columns: " + ", ".join(csv_names),
            )
    targets: list[Optional[str]] = []
    unknown: list[str] = []
    for name in csv_names:
        if name in ignore:
            targets.append(None)
            continue
        col = table.find_column(mapping.get(name, name))
        if col is None and name in mapping:
            # the mapping's target is the table's side: the CSV column is there
            raise SchemaError(
                f"table {table.name} has no column {mapping[name]!r} "
                f"(mapped from the CSV column {name!r})",
                hint=f"columns of {table.name}: {all_names}",
            )
        if col is None:
            kind = _unsupported(table, mapping.get(name, name))
            if kind is not None:
                raise SchemaError(
                    f"column {kind[0]} of table {table.name} has type {kind[1]}, which the "
                    "loader does not support",
                    hint=f"ignore the CSV column {name!r}",
                )
            unknown.append(name)
            targets.append(None)
            continue
        if col.generated:
            raise SchemaError(
                f"column {col.name} of table {table.name} is generated and cannot be written",
                hint=f"ignore the CSV column {name!r}",
            )
        if col.name in filled:
            raise SchemaError(
                f"column {col.name} is filled with the commit timestamp but the CSV has it too",
                hint=f"ignore the CSV column {name!r}",
            )
        targets.append(col.name)
    if unknown:
        alike = _alike(table, unknown, set(targets))
        for sep, what in (("\t", "a tab"), (",", "a comma"), (";", "';'"), ("|", "'|'")):
            if len(csv_names) == 1 and sep in csv_names[0]:
                fields = [f.strip() for f in csv_names[0].split(sep)]
                if all(spelt_as(f, [c.name for c in table.columns]) for f in fields):
                    raise SchemaError(
                        f"CSV column(s) not in table {table.name}: {csv_names[0]!r}, a header "
                        f"of {len(fields)} names separated by {what}",
                        hint=_TAB_HINT
                        if sep == "\t"
                        else f"give {what} as the {option('delimiter')}",
                    )
        if not any(targets) and any(looks_like_value(n) for n in unknown):
            # no name is a column's, and some is a number or a date, not a name: a file
            # without a header row, read as having one (a tryout's export)
            raise SchemaError(
                f"CSV column(s) not in table {table.name}: " + ", ".join(map(repr, unknown)),
                hint="the first line looks like a row, not a header: read the files as having "
                f"no header row ({option('header', False)}; their fields then go to the "
                f"table's columns in order, {all_names}, or name them with {option('columns')})",
            )
        raise SchemaError(
            f"CSV column(s) not in table {table.name}: " + ", ".join(map(repr, unknown)),
            hint=f"columns of {table.name}: {all_names}; " + _unknown_hint(unknown, alike, named),
        )
    written = [t for t in targets if t is not None]
    dupes = sorted({t for t in written if written.count(t) > 1})
    if dupes:
        raise SchemaError(f"more than one CSV column writes column(s) {', '.join(dupes)}")
    present = set(written) | set(filled)
    keys = set(table.key_names)
    for col in table.writable_columns:
        if col.name in present:
            continue
        if col.name in keys:
            raise SchemaError(
                f"key column {col.name} of table {table.name} is missing from the CSV"
                + (
                    " (it has a DEFAULT, but a load sorts and batches rows by their key "
                    "before Spanner would fill it)"
                    if col.has_default
                    else ""
                ),
                hint="the CSV must hold every key column"
                + (" (e.g. export the generated ids with the rows)" if col.has_default else "")
                + ("; map a CSV column to it if it has another name" if csv_names else ""),
            )
        if not col.nullable and not col.has_default and not update:
            raise SchemaError(
                f"NOT NULL column {col.name} of table {table.name} is missing from the CSV",
                hint="map a CSV column to it",
            )
    return targets


_VALUE = re.compile(r"[-+]?\.?\d")
"""The start of a header name that is a value, not a name: a number or a date."""


def looks_like_value(field: str) -> bool:
    """Whether ``field`` starts as a number or a date does: a value, not a column's name."""
    return bool(_VALUE.match(field.strip()))


def folded_name(name: str) -> str:
    """``name`` lower-cased, without what is not a letter or digit (``in_stock``: instock)."""
    return "".join(c for c in name.lower() if c.isalnum())


def _alike(table: TableSchema, unknown: list[str], taken: set[Optional[str]]) -> dict[str, str]:
    """The free table column each unknown CSV column likely means: one whose name is the
    same but for case, underscores and dashes (a snake_case export of CamelCase tables:
    in_stock, InStock), else one a slip of typing away (Nmae, Name)."""
    free = {folded_name(c.name): c.name for c in table.writable_columns if c.name not in taken}
    out: dict[str, str] = {}
    for name in unknown:
        folded = folded_name(name)
        close = [folded] if folded in free else difflib.get_close_matches(folded, free, 1, 0.75)
        if close and free[close[0]] not in out.values():
            out[name] = free[close[0]]
    return out


def _unknown_hint(unknown: list[str], alike: dict[str, str], named: bool) -> str:
    """What to do about CSV columns no table column has (after the table's columns)."""
    others = len(alike) < len(unknown)
    if named:  # the names are the options' own: fix them there
        return (
            f"name each field after its column in {option('columns')}"
            + (" (" + ", ".join(f"{k}: {v}?" for k, v in alike.items()) + ")" if alike else "")
            + f", or leave a field out with {option('ignore')}"
        )
    if not alike:
        return (
            f"load each into a column with {option('map')} CSV_COLUMN=TABLE_COLUMN, "
            f"or leave it out with {option('ignore')}"
        )
    return (
        "give "
        + " ".join(option("map", f"{k}={v}") for k, v in alike.items())
        + (f", and {option('map')} for the others" if others else "")
        + f", or leave a column out with {option('ignore')}"
    )


def _unsupported(table: TableSchema, name: str) -> Optional[tuple[str, str]]:
    """The table's column of a type the loader does not support that ``name`` names."""
    return next((c for c in table.unsupported if c[0].lower() == name.lower()), None)


def _spelt(name: str, csv_names: list[str]) -> str:
    """``name`` as the CSV header spells it, matched as header names are matched to the
    table's (:func:`~loader.schema.spelt_as`); as given when none matches."""
    return spelt_as(name, csv_names) or name
