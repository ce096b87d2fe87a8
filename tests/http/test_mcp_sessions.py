"""herald's count of the MCP sessions of each key on ``/mcp``, kept around the SDK's session
manager: the route in process, the SDK's manager and transport real, driven over ASGI."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from herald import Hub
from herald.delivery.engine import Notifier
from herald.http import mcp as mcp_route
from herald.http.mcp import McpRoute

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "sessions-test", "version": "1.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

pytestmark = pytest.mark.anyio


@pytest.fixture
async def notifier(hub: Hub) -> AsyncIterator[Notifier]:
    service = Notifier(hub)
    yield service
    await service.close()


@contextlib.asynccontextmanager
async def mcp(route: McpRoute) -> AsyncIterator[httpx.AsyncClient]:
    async with route.running():
        transport = httpx.ASGITransport(app=route)
        async with httpx.AsyncClient(transport=transport, base_url="http://herald") as client:
            yield client


def headers(key: str, session_id: str | None = None) -> dict[str, str]:
    said = {**MCP_HEADERS, "authorization": f"Bearer {key}"}
    if session_id is not None:
        said.update({"mcp-session-id": session_id, "mcp-protocol-version": VERSION})
    return said


async def open_session(client: httpx.AsyncClient, key: str) -> str:
    """A session of ``key``, initialized (so herald's notifier has it)."""
    opened = await client.post("/mcp", json=INITIALIZE, headers=headers(key))
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    done = await client.post("/mcp", json=INITIALIZED, headers=headers(key, session_id))
    assert done.status_code == 202, done.text
    return session_id


async def test_a_session_ended_with_delete_leaves_the_notifier_and_frees_its_slot(
    hub: Hub, notifier: Notifier
) -> None:
    alice, key = await hub.create_agent("alice")
    async with mcp(McpRoute(notifier, sessions_per_key=1)) as client:
        session_id = await open_session(client, key)
        await notifier.wait_for_sessions(alice.id, 1)
        refused = await client.post("/mcp", json=INITIALIZE, headers=headers(key))
        assert refused.status_code == 429
        assert "--sessions-per-key" in refused.json()["error"]["message"]
        ended = await client.delete("/mcp", headers=headers(key, session_id))
        assert ended.status_code == 200
        await notifier.wait_for_sessions(alice.id, 0)
        await open_session(client, key)


async def test_a_session_the_sdk_ended_when_idle_frees_its_slot(
    hub: Hub, notifier: Notifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_route, "IDLE_TIMEOUT_S", 0.2)
    alice, key = await hub.create_agent("alice")
    async with mcp(McpRoute(notifier, sessions_per_key=1)) as client:
        session_id = await open_session(client, key)
        await notifier.wait_for_sessions(alice.id, 1)
        await notifier.wait_for_sessions(alice.id, 0)  # the SDK ended it, idle
        gone = await client.post(
            "/mcp", json={**INITIALIZE, "id": 2}, headers=headers(key, session_id)
        )
        assert gone.status_code == 404
        await open_session(client, key)


async def test_a_session_idle_for_the_idle_time_frees_its_slot_with_no_request_after(
    hub: Hub, notifier: Notifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_route, "IDLE_TIMEOUT_S", 0.2)
    alice, key = await hub.create_agent("alice")
    route = McpRoute(notifier, sessions_per_key=1)
    async with mcp(route) as client:
        await open_session(client, key)
        await notifier.wait_for_sessions(alice.id, 0)  # the SDK ended it, idle
        async with asyncio.timeout(5):  # herald's own clock ends it no sooner than the SDK's
            while route.sessions.live(alice.id):
                await asyncio.sleep(0.01)
        await open_session(client, key)


async def test_sessions_opened_at_once_pass_the_limit_no_further_together(
    hub: Hub, notifier: Notifier
) -> None:
    _, key = await hub.create_agent("alice")
    _, other = await hub.create_agent("bob")
    async with mcp(McpRoute(notifier, sessions_per_key=2)) as client:

        async def initialize(key: str) -> Any:
            return await client.post("/mcp", json=INITIALIZE, headers=headers(key))

        answers = await asyncio.gather(*(initialize(key) for _ in range(5)), initialize(other))
        statuses = sorted(answer.status_code for answer in answers[:5])
        assert statuses == [200, 200, 429, 429, 429]
        assert answers[5].status_code == 200  # another key is unaffected


async def test_another_keys_request_on_a_session_is_not_found_and_ends_nothing(
    hub: Hub, notifier: Notifier
) -> None:
    """A session id is no credential: sent with another agent's key, the session is not found
    (as if it did not exist), a DELETE ends nothing, and the owner's slot stays taken."""
    alice, alice_key = await hub.create_agent("alice")
    _, mallory_key = await hub.create_agent("mallory")
    async with mcp(McpRoute(notifier, sessions_per_key=1)) as client:
        session_id = await open_session(client, alice_key)
        await notifier.wait_for_sessions(alice.id, 1)
        listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        taken = await client.post("/mcp", json=listed, headers=headers(mallory_key, session_id))
        assert taken.status_code == 404, taken.text
        ended = await client.delete("/mcp", headers=headers(mallory_key, session_id))
        assert ended.status_code == 404, ended.text
        assert notifier.session(session_id) is not None
        refused = await client.post("/mcp", json=INITIALIZE, headers=headers(alice_key))
        assert refused.status_code == 429  # her one session is still hers and still live
        still = await client.post("/mcp", json=listed, headers=headers(alice_key, session_id))
        assert still.status_code == 200, still.text
