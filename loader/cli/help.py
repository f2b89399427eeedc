"""``--help`` of the commands with many options: the options in named sections (Input, CSV
format, Target, ...) instead of one flat list, as ``gh`` and ``bq`` show theirs."""

from __future__ import annotations

from typing import Any

import click

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Input", ("config", "table", "manifest")),
    (
        "CSV format",
        (
            "dialect",
            "delimiter",
            "quote",
            "escape",
            "header",
            "columns",
            "skip_rows",
            "encoding",
            "null_markers",
        ),
    ),
    (
        "Columns and values",
        (
            "mappings",
            "ignored",
            "timezone",
            "timestamp_format",
            "bytes_encoding",
            "commit_timestamp_columns",
        ),
    ),
    (
        "Target",
        ("project", "instance", "database", "emulator", "ddl", "ddl_dialect", "connect_timeout"),
    ),
    ("Writing", ("mode", "skip_existing", "skip_missing", "priority", "max_commit_delay_ms")),
    ("Bad rows", ("max_bad_rows", "rejects")),
    (
        "Batching and speed",
        (
            "max_mutations",
            "max_batch_bytes",
            "batch_rows",
            "buffer_size",
            "block_size",
            "concurrency",
            "parallel_tables",
            "adaptive",
            "max_rows_per_second",
            "max_bytes_per_second",
            "max_retry_time",
            "defer_indexes",
            "defer_foreign_keys",
        ),
    ),
    ("Resume", ("no_state", "state_file", "restart", "incremental")),
    ("Pre-splitting", ("presplit", "nodes", "split_expiry", "keep_split_points")),
    ("Beyond one machine", ("runner", "beam_options", "range_size", "key_ranges", "beam_results")),
    ("Output", ("as_json", "report_path", "quiet", "dry_run", "help")),
)
"""Option sections by parameter name, in the order shown; anything else goes under "Other"."""


class SectionedCommand(click.Command):
    """A command whose options are listed by section; ``hide`` names options it accepts (a
    shared config file may set them) but does not list, because they do not apply to it."""

    def __init__(self, *args: Any, hide: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for p in self.params:
            if p.name in hide and isinstance(p, click.Option):
                p.hidden = True

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records: dict[str, tuple[str, str]] = {}
        for p in self.get_params(ctx):
            rec = p.get_help_record(ctx)
            if isinstance(p, click.Option) and rec is not None and p.name is not None:
                records["help" if p is self.get_help_option(ctx) else p.name] = rec
        placed: set[str] = set()
        for title, names in SECTIONS:
            rows = [records[n] for n in names if n in records]
            placed.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [rec for name, rec in records.items() if name not in placed]
        if rest:
            with formatter.section("Other"):
                formatter.write_dl(rest)
