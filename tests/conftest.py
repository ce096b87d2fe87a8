"""Fixtures shared by the whole suite: a store of each backend, in a place of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from herald import Hub, Notifier, open_store
from herald.delivery.cascade import PushReport
from herald.store import Store
from herald.testing import ManualClock
from tests.serve_launcher import LAUNCHER

POSTGRES_ADMIN_URL = os.environ.get(
    "HERALD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


POSTGRES_FIXTURES = {"postgres_server_url", "postgres_database_url"}
"""The fixtures that make a PostgreSQL database: a test that asks for one needs the server."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test that needs PostgreSQL ``postgres``: one that asks for a database, or runs
    on the "postgres" backend (a ``store_url`` or a ``BACKENDS`` parameter); a test that makes
    one another way carries the mark itself. Then makes sure no two tests share a node id (with
    ``pytest -n`` the main process does, from what each worker collected)."""
    for item in items:
        params = getattr(item, "callspec", None)
        on_postgres = params is not None and "postgres" in params.params.values()
        if on_postgres or POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
    if not hasattr(config, "workerinput"):  # what pytest-xdist gives a worker's config
        refuse_shared_ids([item.nodeid for item in items])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The launcher of this test process's ``herald serve`` processes ends with it: waited for,
    its CPU is counted with the run's (``/usr/bin/time``)."""
    LAUNCHER.close()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    refuse_shared_ids(ids)


def refuse_shared_ids(ids: list[str]) -> None:
    """pytest-xdist runs tests by their node ids: of two tests with one id it runs one, and
    the other is lost without a word."""
    shared = sorted(nodeid for nodeid, count in Counter(ids).items() if count > 1)
    if shared:
        raise pytest.UsageError(f"tests that share a node id: {', '.join(shared)}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run_admin_sql(sql: str) -> None:
    """One statement as PostgreSQL's admin: databases are made, changed and dropped so."""

    async def run() -> None:
        conn = await asyncpg.connect(POSTGRES_ADMIN_URL)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """The URL of a PostgreSQL database made for the caller, dropped when it is done. It fails
    (never skips) when the server cannot be reached: CI must not pass without PostgreSQL."""
    name = f"herald_test_{uuid.uuid4().hex[:12]}"
    try:
        run_admin_sql(f'CREATE DATABASE "{name}"')
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(f"PostgreSQL at {POSTGRES_ADMIN_URL} is needed for these tests: {exc}")
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        run_admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """A database created for this test run and dropped after it."""
    with scratch_database() as url:
        yield url


@pytest.fixture
def postgres_database_url() -> Iterator[str]:
    """A database of this test's own, dropped after it: for a test that cuts its store off, or
    runs herald on it beside another store."""
    with scratch_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty store, on each backend in turn."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'herald.db'}"
        return
    server_url: str = request.getfixturevalue("postgres_server_url")
    schema_free_url = server_url
    yield schema_free_url

    async def wipe() -> None:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        finally:
            await conn.close()

    asyncio.run(wipe())


@pytest.fixture(params=["sqlite", "postgres"])
def own_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty store no other test's herald shares while this test runs (on
    PostgreSQL a database of its own: ``store_url``'s is the run's, which a module's herald may
    be serving meanwhile), on each backend in turn: for a test that reads every agent's events."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'herald.db'}"
    url: str = request.getfixturevalue("postgres_database_url")
    return url


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(store_url: str, clock: ManualClock) -> AsyncIterator[Store]:
    opened = await open_store(store_url, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    """A hub on a fresh SQLite file."""
    async with Hub.from_url(f"sqlite:///{tmp_path / 'h.db'}") as opened:
        yield opened


@pytest.fixture
def reports(notifier: Notifier) -> asyncio.Queue[PushReport]:
    """Every attempt the test's ``notifier`` records, once its outcome is in the store."""
    queue: asyncio.Queue[PushReport] = asyncio.Queue()
    notifier.observe(queue.put_nowait)
    return queue


async def next_report(reports: asyncio.Queue[PushReport]) -> PushReport:
    async with asyncio.timeout(10):
        return await reports.get()
