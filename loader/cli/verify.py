"""``verify``: do the tables hold exactly the source rows?"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..config import MODES
from ..configfile import config_option
from ..errors import ExitCode, LoaderError
from .app import cli
from .help import SectionedCommand
from .options import _build_config, _input_options, _read_target_options


@cli.command(cls=SectionedCommand)
@click.argument("sources", nargs=-1, metavar="[SOURCE]...")
@config_option(shared_with=("load", "validate", "verify"))
@_input_options
@_read_target_options
@click.option(
    "--max-bad-rows",
    type=int,
    default=0,
    show_default=True,
    help="Bad source rows tolerated (they are not expected in the table).",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="upsert",
    show_default=True,
    help="The load's mode: where keys repeat, insert keeps the first row of a key (the "
    "others are its rejects), the other modes the last.",
)
@click.option(
    "--rejects",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A load's reject file: the source rows it lists (by table, source and record) were "
    "rejected, so they are not expected in the table and not compared.",
)
@click.option(
    "--load-id",
    "load_ids",
    multiple=True,
    metavar="ID",
    help="Only the --rejects lines of this load (its report's load_id; repeatable, a resumed "
    "load has one per run) [default: every line].",
)
@click.option("--json/--no-json", "as_json", default=False, help="Print the result as JSON.")
def verify(**kw: Any) -> None:
    """Check that tables hold exactly the source rows.

    Reads the sources as a load would (same options), reads each table at one read timestamp,
    and compares row counts and an order-independent checksum of the loaded columns; when
    they differ, lists the first keys that are missing, unexpected or different.
    Exits 0 when every table matches, 6 when one does not,
    8 when an index or foreign key a load deferred (--defer-indexes) is not back yet (6
    when a table differs as well),
    4 when the sources hold more bad rows than --max-bad-rows, 2 for a usage error or a
    missing table. Rows a load refused at commit time are missing from its table: --rejects
    with its reject file leaves them out of the comparison.

    \b
    Example:
      spanner-loader verify --manifest examples/shop/manifest.json --database shop
    """
    from ..verify import verify as verify_tables

    try:
        config = _build_config({**kw, "no_state": True}, dry_run=True)
        report = verify_tables(config, rejects=kw["rejects"], load_ids=kw["load_ids"])
    except LoaderError as e:
        if kw["as_json"]:  # a script that asked for JSON gets it, as from load --json
            click.echo(json.dumps(_failed(e), indent=2))
        raise
    from .flags import speak_flags

    command = click.get_current_context().command
    report.notes = [speak_flags(n, command) for n in report.notes]
    click.echo(
        json.dumps(report.to_dict(), indent=2)
        if kw["as_json"]
        else speak_flags(report.render(), command)
    )
    sys.exit(int(report.exit_code))


def _failed(e: LoaderError) -> dict[str, Any]:
    """The JSON of a verify that stopped before its result (the error line says it too)."""
    from .flags import speak_flags

    command = click.get_current_context().command
    code = e.exit_code
    return {
        "schema_version": 1,
        "status": "too_many_bad_rows" if code == ExitCode.TOO_MANY_BAD_ROWS else "failed",
        "exit_code": int(code),
        "ok": False,
        "error": speak_flags(e.message, command),
        "hint": speak_flags(e.hint, command) if e.hint else None,
        "tables": [],
        "not_restored": {},
    }
