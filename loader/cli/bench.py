"""``bench``: a step-load test of write throughput."""

from __future__ import annotations

import os
from typing import Any

import click

from ..emulator import EMULATOR_HOST_ENV
from .app import cli
from .flags import speak_flags
from .options import _target_options, target_from


@cli.command()
@_target_options
@click.option(
    "--rows-per-step",
    type=int,
    default=100_000,
    show_default=True,
    help="Rows written at each concurrency step.",
)
@click.option(
    "--max-concurrency",
    type=int,
    default=None,
    help="Last step: steps are 1, 2, 4, ... up to it [default: 32; 4 on the emulator].",
)
@click.option("--steps", help="Concurrency steps instead, comma-separated, e.g. 1,8,16,32.")
@click.option(
    "--batch-rows",
    type=int,
    default=1000,
    show_default=True,
    help="Rows per commit (5 mutations each).",
)
@click.option(
    "--payload-bytes",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Size of each row's STRING payload.",
)
@click.option(
    "--warmup-rows",
    type=int,
    default=0,
    show_default=True,
    help="Rows written first, unmeasured, so Spanner starts splitting the table.",
)
@click.option(
    "--nodes",
    "node_count",
    type=float,
    help="The instance's node count (0.1 per 100 processing units): adds rows/s/node.",
)
@click.option(
    "--node-hour-price",
    type=float,
    help="Price of a node-hour (with --nodes): adds the cost per million rows.",
)
@click.option(
    "--priority",
    type=click.Choice(["low", "medium", "high"]),
    help="Request priority of the commits.",
)
@click.option("--keep", is_flag=True, help="Keep the scratch table SpannerLoaderBench.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def bench(**kw: Any) -> None:
    """Measure write throughput at increasing concurrency (a step-load test).

    Writes --rows-per-step generated rows at 1, 2, 4, ... commits in flight into a scratch
    table (created, then dropped), and reports rows/s, commit latency p50/p99 and ABORTED
    retries per step, the peak, and the smallest concurrency within 90% of it.

    \b
    Example:
      spanner-loader bench --database shop --nodes 3 --node-hour-price 0.90 \\
          --rows-per-step 200000 --max-concurrency 64
    """
    import json as _json

    from ..bench import parse_steps, run_bench
    from ..connection import connect

    target = target_from(kw)
    on_emulator = target.emulator or bool(os.environ.get(EMULATOR_HOST_ENV))
    with connect(target) as database:
        report = run_bench(
            database,
            rows_per_step=kw["rows_per_step"],
            max_concurrency=kw["max_concurrency"] or (4 if on_emulator else 32),
            steps=parse_steps(kw["steps"]) if kw["steps"] else None,
            batch_rows=kw["batch_rows"],
            payload_bytes=kw["payload_bytes"],
            warmup_rows=kw["warmup_rows"],
            node_count=kw["node_count"],
            node_hour_price=kw["node_hour_price"],
            priority=kw["priority"],
            keep=kw["keep"],
            progress=lambda step: click.echo(step.line(), err=True),
        )
    if kw["as_json"]:
        click.echo(_json.dumps(report.to_dict(), indent=2))
    else:  # it recommends a concurrency for `load`: named as load's flag
        click.echo(speak_flags(report.render(), cli.commands["load"]))
