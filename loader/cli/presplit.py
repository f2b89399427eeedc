"""``presplit``: split points for new tables from the sources' keys, ahead of the load; and the
pre-splitting options ``load`` shares."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..configfile import config_option
from ..errors import ExitCode
from .app import cli
from .flags import speak_flags
from .help import SectionedCommand
from .options import (
    WRITE_ONLY,
    _apply,
    _build_config,
    _input_options,
    _strategy_options,
    _target_options,
)


def split_options(*, on_load: bool) -> Any:
    """The pre-splitting options: ``load`` has ``--presplit`` and ``--keep-split-points`` too."""

    def decorate(f: Any) -> Any:
        opts = []
        if on_load:
            opts.append(
                click.option(
                    "--presplit",
                    is_flag=True,
                    help="Before loading, sample the sources' keys and add split points "
                    "(about 10 per node) to the tables and their indexes; best-effort, since "
                    "split points take effect over hours: `spanner-loader presplit` ahead of "
                    "the load is the main path.",
                )
            )
        opts += [
            click.option(
                "--nodes",
                type=float,
                metavar="N",
                help="Size the split points for this many nodes (about 10 points per node) "
                "[default: the instance's own size].",
            ),
            click.option(
                "--split-expiry",
                type=float,
                default=10.0,
                show_default=True,
                metavar="DAYS",
                help="Spanner drops the split points after this many days (at most 30) unless "
                "the load expires them first.",
            ),
        ]
        if on_load:
            opts.append(
                click.option(
                    "--keep-split-points",
                    is_flag=True,
                    help="Leave the split points in place after the load (by default the load "
                    "expires those of its job once it has finished).",
                )
            )
        return _apply(opts, f)

    return decorate


_NOT_HERE = tuple(
    n
    for n in (
        *WRITE_ONLY,
        "commit_timestamp_columns",
        "incremental",
        "max_mutations",
        "max_batch_bytes",
        "batch_rows",
        "buffer_size",
        "max_bad_rows",
        "rejects",
    )
    if n not in ("no_state", "state_file")
)
"""``load`` options ``presplit`` accepts (a shared config file may set them) but does not list."""


@cli.command(cls=SectionedCommand, hide=_NOT_HERE)
@click.argument("sources", nargs=-1, metavar="[SOURCE]...")
@config_option(shared_with=("load", "validate", "verify"))
@_input_options
@_target_options
@_strategy_options
@split_options(on_load=False)
@click.option("--json/--no-json", "as_json", default=False, help="Print the result as JSON.")
@click.option("--quiet/--no-quiet", "-q", default=False, help="No progress lines.")
def presplit(**kw: Any) -> None:
    """Add split points to new tables, from the sources' keys, ahead of a load.

    Takes the same source options as load. Samples the primary keys (and the keys of the
    secondary indexes) of evenly spread parts of every source, and adds split points at
    quantiles of them in Spanner's key order: about 10 per node (--nodes, or the instance's
    size), none for an instance under one node. Google's guidance is to add them hours before
    a large load into new tables; they are recorded in the job's state, and the load (same
    options) expires them when it has finished, unless --keep-split-points.

    Needs spanner.databases.addSplitPoints (roles/spanner.databaseAdmin). The emulator has no
    splits: there a note says so and nothing is added.

    \b
    Example:
      spanner-loader presplit 'gs://shop-export/orders/*.csv' --table Orders \\
          --database shop --nodes 5
      # hours later
      spanner-loader load 'gs://shop-export/orders/*.csv' --table Orders --database shop

    Exit codes: 0 added (or nothing to add, or the emulator), 1 AddSplitPoints failed or
    refused (permission, quota), 2 usage or configuration error.
    """
    from ..presplit_job import run_presplit

    config = _build_config(kw, dry_run=False)

    def say(line: str) -> None:
        if not kw["quiet"]:
            click.echo(line, err=True)

    report = run_presplit(config, say=say)
    command = click.get_current_context().command
    report.notes = [speak_flags(n, command) for n in report.notes]
    if kw["as_json"]:
        click.echo(json.dumps({**report.to_dict(), "notes": report.notes}, indent=2))
    else:
        click.echo(report.render())
    refused = report.error is not None and report.error.kind != "unimplemented"
    sys.exit(int(ExitCode.FAILED if refused else ExitCode.OK))
