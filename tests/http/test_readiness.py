"""Liveness and readiness of a real ``herald serve``: /healthz says the process answers, /readyz
that its store does too; every 503 tells clients when to retry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg
import httpx

from tests.conftest import run_admin_sql
from tests.herald_process import HeraldProcess
from tests.waiting import wait_until


def allow_connections(url: str, allowed: bool) -> None:
    """Without, the store goes away for real: its connections are closed, new ones refused."""
    database = url.rsplit("/", 1)[1]
    run_admin_sql(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allowed).lower()}')
    if not allowed:
        run_admin_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE datname = '{database}' AND pid <> pg_backend_pid()"
        )


def wait_for(check: Callable[[], httpx.Response], status: int) -> httpx.Response:
    """The first answer of ``check`` with ``status`` (a bounded wait)."""
    return wait_until(
        lambda: answer if (answer := check()).status_code == status else None, f"a {status}"
    )


def assert_retry_later(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "store_unavailable"
    assert response.json()["error"]["message"]
    assert int(response.headers["retry-after"]) > 0


def test_readyz_is_ready_on_sqlite(herald: HeraldProcess) -> None:
    with herald.client() as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}


def test_readyz_gives_up_on_a_store_that_hangs(postgres_database_url: str) -> None:
    herald = HeraldProcess(postgres_database_url)

    async def hold_a_lock_during_readyz() -> httpx.Response:
        conn = await asyncpg.connect(postgres_database_url)
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


def test_readyz_follows_the_store_while_healthz_stays_up(postgres_database_url: str) -> None:
    herald = HeraldProcess(postgres_database_url)
    try:
        with herald.client() as client, herald.client(herald.admin_key) as admin:
            ready = client.get("/readyz")
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}

            allow_connections(postgres_database_url, False)
            assert_retry_later(wait_for(lambda: client.get("/readyz"), 503))
            assert client.get("/healthz").status_code == 200
            assert_retry_later(admin.get("/v1/agents"))

            allow_connections(postgres_database_url, True)
            ready = wait_for(lambda: client.get("/readyz"), 200)
            assert ready.status_code == 200 and ready.json() == {"status": "ready"}
            assert admin.get("/v1/agents").status_code == 200
    finally:
        allow_connections(postgres_database_url, True)
        herald.stop()


def test_mcp_refuses_as_json_rpc_while_the_store_is_away(postgres_database_url: str) -> None:
    herald = HeraldProcess(postgres_database_url)
    initialize = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "outage", "version": "1"},
        },
    }
    headers = {"accept": "application/json, text/event-stream"}
    try:
        with herald.client(herald.admin_key) as admin:
            agent = admin.post("/v1/agents", json={"handle": "mcp-outage"}).json()
        allow_connections(postgres_database_url, False)
        with herald.client(agent["api_key"]) as client:
            assert_retry_later(wait_for(lambda: client.get("/readyz"), 503))
            # The key was never used: it must be looked up in the store, which is away.
            refused = client.post("/mcp", json=initialize, headers=headers)
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) > 0
        body = refused.json()
        assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", 7, -32603)
        assert body["error"]["data"] == {"code": "store_unavailable"}
        assert body["error"]["message"]
    finally:
        allow_connections(postgres_database_url, True)
        herald.stop()
