"""Connect to the target database: a real instance with Application Default Credentials, or
the emulator (SPANNER_EMULATOR_HOST, or one we start for the run with ``--emulator``)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from .config import Target
from .emulator import EMULATOR_HOST_ENV, EmulatorProcess, ensure_database, start_emulator
from .errors import ConfigError


def make_client(project: str) -> Any:
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import spanner

    try:
        return spanner.Client(project=project)
    except DefaultCredentialsError as e:
        raise ConfigError(
            "no Google Cloud credentials found",
            hint="run `gcloud auth application-default login`, set "
            "GOOGLE_APPLICATION_CREDENTIALS, or use --emulator / SPANNER_EMULATOR_HOST",
        ) from e


@contextmanager
def connect(target: Target, notes: Optional[list[str]] = None) -> Iterator[Any]:
    """Yield a google.cloud.spanner Database for the target.

    With ``target.emulator``: use the emulator named by SPANNER_EMULATOR_HOST, or start one for
    the duration of the run; create the instance and database if needed and apply the DDL files.
    """
    started: Optional[EmulatorProcess] = None
    if target.ddl and not target.emulator:
        raise ConfigError(
            "--ddl is only applied with --emulator",
            hint="apply schema changes to a real database with gcloud or your migration tool",
        )
    if target.emulator and not os.environ.get(EMULATOR_HOST_ENV):
        started = start_emulator()
        os.environ[EMULATOR_HOST_ENV] = started.address
        if notes is not None:
            notes.append(
                f"started a Spanner emulator at {started.address} for this run; it stops (and "
                "its data is gone) when the run ends. Keep one running with "
                "`spanner-loader emulator start` to inspect the data afterwards"
            )
    try:
        client = make_client(target.project)
        if target.emulator:
            database = ensure_database(client, target.instance, target.database, target.ddl)
        else:
            database = client.instance(target.instance).database(target.database)
        yield database
    finally:
        if started is not None:
            os.environ.pop(EMULATOR_HOST_ENV, None)
            started.stop()
