"""``emulator start`` / ``emulator stop``: a local Cloud Spanner Emulator kept between
commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import click

from ..emulator import EMULATOR_HOST_ENV
from .app import cli
from .options import EMULATOR_DEFAULTS, _target_options


@cli.group()
def emulator() -> None:
    """Run a local Cloud Spanner Emulator for smoke loads and experiments."""


@emulator.command("start")
@_target_options
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Loopback port to listen on [default: a free one].",
)
def emulator_start(
    project: Optional[str],
    instance: Optional[str],
    database: Optional[str],
    emulator: bool,
    ddl: tuple[Path, ...],
    connect_timeout: float,
    ddl_dialect: Optional[str],
    port: Optional[int],
) -> None:
    """Start an emulator in the background and print the line to export.

    With --database (and --ddl), also create that database (and its tables) in it.
    `spanner-loader emulator stop` stops it again.

    \b
    Example:
      eval "$(spanner-loader emulator start --database shop --ddl schemas/shop.sql)"
      spanner-loader load examples/shop/Customers.csv --table Customers --database shop \\
          --emulator
      spanner-loader emulator stop
    """
    from ..connection import make_client
    from ..emulator import ensure_database, record_started, start_emulator

    em = start_emulator(port=port)
    record = record_started(em)
    os.environ[EMULATOR_HOST_ENV] = em.address
    try:
        if database:
            client = make_client(project or EMULATOR_DEFAULTS["project"])
            instance = instance or EMULATOR_DEFAULTS["instance"]
            ensure_database(client, instance, database, ddl, dialect=ddl_dialect)
    except BaseException:
        em.stop()
        record.unlink(missing_ok=True)  # (no emulator left for `emulator stop` to find)
        raise
    click.echo(f"export {EMULATOR_HOST_ENV}={em.address}")
    click.echo(
        f"# emulator pid {em.process.pid}, log {em.log_path}; "
        f"stop it with: spanner-loader emulator stop --port {em.port}"
    )


# the shared target options' --emulator means nothing here: the command is the emulator's
for _param in emulator_start.params:
    if _param.name == "emulator":
        _param.hidden = True  # type: ignore[attr-defined]


@emulator.command("stop")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Stop the one on this port [default: the one SPANNER_EMULATOR_HOST names, else every "
    "emulator that `emulator start` left running].",
)
def emulator_stop(port: Optional[int]) -> None:
    """Stop emulators started with `spanner-loader emulator start`.

    Only those: an emulator started another way (gcloud, a container) is left alone. Stopping
    none is not an error.

    \b
    Example:
      eval "$(spanner-loader emulator start --port 9010)"
      spanner-loader emulator stop --port 9010
    """
    from ..emulator import stop_started

    if port is None and os.environ.get(EMULATOR_HOST_ENV, "").rpartition(":")[2].isdigit():
        port = int(os.environ[EMULATOR_HOST_ENV].rpartition(":")[2])
    stopped = stop_started(port)
    for p, pid in stopped:
        click.echo(f"stopped the emulator on 127.0.0.1:{p} (pid {pid})")
    if not stopped:
        where = f" on port {port}" if port is not None else ""
        click.echo(f"no emulator started by spanner-loader is running{where}", err=True)
    if stopped and os.environ.get(EMULATOR_HOST_ENV):
        click.echo(f"# and: unset {EMULATOR_HOST_ENV}")
