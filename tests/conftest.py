"""Shared fixtures: the official Spanner emulator (started on a free loopback port unless
SPANNER_EMULATOR_HOST names a running one) and a fresh database per test module."""

from __future__ import annotations

import importlib.util
import itertools
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from loader import native
from loader.emulator import INSTALL_HINT, ensure_database, split_ddl, start_emulator
from loader.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
SHOP_DDL = ROOT / "schemas" / "shop.sql"
EXAMPLES = ROOT / "examples" / "shop"
PROJECT = "test-project"
INSTANCE = "test-instance"
_db_counter = itertools.count(1)


HAVE_BEAM = importlib.util.find_spec("apache_beam") is not None
"""apache-beam is installed (scripts/beam_check.sh's venv); the main venv runs without it."""
needs_beam = pytest.mark.skipif(
    not HAVE_BEAM, reason="apache-beam is not installed (pip install -e '.[beam]')"
)


@pytest.fixture(scope="session")
def spanner_emulator() -> Iterator[str]:
    """host:port of a Spanner emulator for the whole session."""
    existing = os.environ.get("SPANNER_EMULATOR_HOST")
    if existing:
        yield existing
        return
    try:
        em = start_emulator()
    except ConfigError as e:
        pytest.fail(
            f"the Spanner tests need the Cloud Spanner Emulator: {e}. To get one: {INSTALL_HINT}",
            pytrace=False,
        )
    os.environ["SPANNER_EMULATOR_HOST"] = em.address
    try:
        yield em.address
    finally:
        os.environ.pop("SPANNER_EMULATOR_HOST", None)
        em.stop()


@pytest.fixture(scope="session")
def spanner_client(spanner_emulator: str) -> Any:
    from google.cloud import spanner

    return spanner.Client(project=PROJECT)


def _database_factory(client: Any, made: list[Any]) -> Callable[..., Any]:
    """Factory: a fresh, uniquely named database with the given DDL (files or statements),
    remembered in ``made`` so that its fixture drops it afterwards."""

    def make(ddl: Sequence[str | Path] = (SHOP_DDL,), name: str | None = None) -> Any:
        db_id = name or f"db{os.getpid() % 10000}-{next(_db_counter)}"
        files = [Path(d) for d in ddl if isinstance(d, Path)]
        database = ensure_database(client, INSTANCE, db_id, files)
        if all(d.database_id != database.database_id for d in made):
            made.append(database)
        stmts = [s for d in ddl if isinstance(d, str) for s in split_ddl(d)]
        if stmts:
            database.update_ddl(stmts).result(120)
        return database

    return make


def _drop_all(made: list[Any]) -> None:
    """Drop the databases a fixture made: the emulator holds at most 100 per instance, and
    the suite makes more than that."""
    for database in made:
        try:
            database.drop()
        except Exception:  # noqa: BLE001 - gone already (a test dropped it), or the emulator is
            pass


@pytest.fixture
def make_database(spanner_client: Any) -> Iterator[Callable[..., Any]]:
    """Factory of fresh databases (see :func:`_database_factory`), dropped after the test."""
    made: list[Any] = []
    yield _database_factory(spanner_client, made)
    _drop_all(made)


@pytest.fixture(scope="module")
def make_module_database(spanner_client: Any) -> Iterator[Callable[..., Any]]:
    """The same for a module's fixtures: the databases are dropped after the module."""
    made: list[Any] = []
    yield _database_factory(spanner_client, made)
    _drop_all(made)


@pytest.fixture(scope="module")
def shop_db(make_module_database: Callable[..., Any]) -> Any:
    """A fresh database with schemas/shop.sql for each test module."""
    return make_module_database()


def small_load_config(db: Any, table: str, sources: Sequence[Any], **kw: Any) -> Any:
    """A LoadConfig for the emulator database ``db`` that flushes and checkpoints often: 50-row
    batches, 16 KiB parse blocks, a 64 KiB buffer, one commit at a time, no reject file
    (``kw`` overrides any of it)."""
    from loader import LoadConfig, TableJob, Target
    from loader.convert import ConvertOptions
    from loader.parse import Dialect

    base: dict[str, Any] = dict(
        target=Target("test-project", "test-instance", db.database_id, emulator=True),
        jobs=(TableJob(table, tuple(str(s) for s in sources)),),
        dialect=Dialect(),
        convert=ConvertOptions(),
        concurrency=1,
        batch_rows=50,
        block_size=16 << 10,
        buffer_size=64 << 10,
        rejects=None,
    )
    base.update(kw)
    return LoadConfig(**base)


def read_table(database: Any, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Every row of a table (all given columns), in primary key order."""
    from google.cloud.spanner_v1 import KeySet

    with database.snapshot() as snap:
        return [tuple(r) for r in snap.read(table, list(columns), KeySet(all_=True))]


def read_back_timestamp_text(v: Any) -> str:
    """A TIMESTAMP as the client reads it back, as ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`` (the
    tests' own formatting, kept apart from loader.verify's)."""
    nanos = getattr(v, "nanosecond", 0) or v.microsecond * 1000
    return f"{v.year:04d}" + v.strftime("-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def native_parts(param: str) -> Iterator[str]:
    """For a fixture parametrized over the compiled parts ("native") and their numpy/pyarrow
    paths: switches loader/_native.c on or off for the tests it covers. Without the extension the
    "native" case is skipped, or fails where SPANNER_LOADER_REQUIRE_NATIVE=1 (CI, which has a
    C compiler)."""
    if param == "native" and not native.built():
        if os.environ.get("SPANNER_LOADER_REQUIRE_NATIVE") == "1":
            pytest.fail("the compiled loader._native is not built")
        pytest.skip("the compiled loader._native is not built")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(native.NATIVE_ENV, "1" if param == "native" else "0")
        yield param
