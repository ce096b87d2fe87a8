"""Liveness and readiness of a real ``herald serve``: /healthz says the process answers, /readyz
that its store does too; every 503 tells clients when to retry."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import asyncpg
import httpx
import pytest

from tests.conftest import POSTGRES_ADMIN_URL
from tests.herald_process import HeraldProcess

WAIT_S = 30


def admin_sql(sql: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(POSTGRES_ADMIN_URL)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture
def database() -> Iterator[str]:
    """A database of its own: the test cuts it off, which no other test may share."""
    name = f"herald_ready_{uuid.uuid4().hex[:12]}"
    admin_sql(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        admin_sql(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cut_off(database: str) -> None:
    """The store goes away for real: its connections are closed and new ones refused."""
    admin_sql(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
    admin_sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        f" WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    )


def wait_for(check: Callable[[], httpx.Response], status: int) -> httpx.Response:
    deadline = time.monotonic() + WAIT_S
    while True:
        response = check()
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.05)  # a poll interval, not a synchronisation: the deadline bounds the wait


def assert_retry_later(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "store_unavailable"
    assert response.json()["error"]["message"]
    assert int(response.headers["retry-after"]) > 0


def test_readyz_is_ready_on_sqlite(herald: HeraldProcess) -> None:
    with herald.client() as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


def test_readyz_gives_up_on_a_store_that_hangs(database: str) -> None:
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    herald = HeraldProcess(f"{base}/{database}")

    async def hold_a_lock_during_readyz() -> httpx.Response:
        conn = await asyncpg.connect(f"{base}/{database}")
        try:
            async with conn.transaction():
                # Every read of the settings table now waits for this transaction.
                await conn.execute("LOCK TABLE settings IN ACCESS EXCLUSIVE MODE")
                async with httpx.AsyncClient(base_url=herald.url, timeout=30) as client:
                    return await client.get("/readyz")
        finally:
            await conn.close()

    try:
        response = asyncio.run(hold_a_lock_during_readyz())
        assert_retry_later(response)
        assert "did not answer within" in response.json()["error"]["message"]
        with herald.client() as client:
            assert wait_for(lambda: client.get("/readyz"), 200).status_code == 200
    finally:
        herald.stop()


def test_readyz_follows_the_store_while_healthz_stays_up(database: str) -> None:
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    herald = HeraldProcess(f"{base}/{database}")
    try:
        with herald.client() as client, herald.client(herald.admin_key) as admin:
            ready = client.get("/readyz")
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}

            cut_off(database)
            assert_retry_later(wait_for(lambda: client.get("/readyz"), 503))
            assert client.get("/healthz").status_code == 200
            assert_retry_later(admin.get("/v1/agents"))

            admin_sql(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
            ready = wait_for(lambda: client.get("/readyz"), 200)
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}
            assert admin.get("/v1/agents").status_code == 200
    finally:
        herald.stop()
