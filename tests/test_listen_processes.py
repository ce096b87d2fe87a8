"""``subscriptions/listen`` across two ``herald serve`` processes on one PostgreSQL database: a
client listening at one is told of its inbox changed by the other (an acknowledgement, an
expiry by maintenance) and of the catalogue changed there. The processes read listened inboxes
only once an hour (``--inbox-check``), so what reaches the client is what each process heard
from the other, not what a look at the inbox found."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from mcp.client.subscriptions import Subscription
from mcp.shared.subscriptions import ResourceUpdated

from herald.mcp.events import SUBSCRIPTION_ID
from herald.mcp.resources import INBOX_URI
from mcp import Client
from tests.conftest import scratch_database
from tests.herald_process import HeraldProcess
from tests.http.test_mcp import new_agent, publish, session
from tests.http.test_mcp_events import MODERN, agent_http, stream_messages
from tests.http.test_mcp_listen import envelope, headers_for

pytestmark = pytest.mark.anyio

ONLY_WHAT_IS_HEARD = ("--inbox-check", "1h")
WAIT_S = 30.0
"""Bounds each wait: maintenance expires events every 5 s."""


@pytest.fixture(scope="module")
def processes() -> Iterator[tuple[HeraldProcess, HeraldProcess]]:
    """Two processes on one database, for the module's tests: each test has agents of its own."""
    with scratch_database() as url:
        one = HeraldProcess(url, extra_args=ONLY_WHAT_IS_HEARD)
        try:
            two = HeraldProcess(url, extra_args=ONLY_WHAT_IS_HEARD)
            try:
                yield one, two
            finally:
                two.stop()
        finally:
            one.stop()


@contextlib.asynccontextmanager
async def listening(herald: HeraldProcess, key: str) -> AsyncIterator[tuple[Client, Subscription]]:
    """The MCP SDK's client on 2026-07-28, listening to the agent's inbox."""
    async with (
        session(herald, key, "listen-test") as (client, _),
        client.listen(resource_subscriptions=[INBOX_URI]) as updates,
    ):
        assert client.protocol_version == MODERN
        assert updates.honored.resource_subscriptions == [INBOX_URI]
        yield client, updates


async def inbox_ids(client: Client) -> list[str]:
    (contents,) = (await client.read_resource(INBOX_URI)).contents
    return [event["id"] for event in json.loads(contents.text)["events"]]  # type: ignore[union-attr]


async def told_until_empty(client: Client, updates: Subscription) -> None:
    """Wait (bounded) for updates of the inbox until, read after one, it is empty."""
    async with asyncio.timeout(WAIT_S):
        while True:
            update = await anext(updates)
            assert update == ResourceUpdated(uri=INBOX_URI)
            if not await inbox_ids(client):
                return


async def test_an_acknowledgement_at_one_process_updates_the_inbox_listened_at_the_other(
    processes: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = processes
    agent = new_agent(one)
    event_id = publish(one, agent["handle"], "read me elsewhere")
    async with listening(one, agent["api_key"]) as (client, updates):
        assert await inbox_ids(client) == [event_id]
        with two.client(agent["api_key"]) as http:
            acked = http.post("/channel/ack", json={"ids": [event_id]})
        assert acked.status_code == 200 and acked.json()["acked"] == 1, acked.text
        await told_until_empty(client, updates)


async def test_an_expiry_by_the_other_processs_maintenance_updates_the_inbox(
    processes: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = processes
    agent = new_agent(one)
    async with listening(one, agent["api_key"]) as (client, updates):
        with two.client(two.admin_key) as admin:
            short = {"to": agent["handle"], "type": "t", "text": "soon gone", "ttl_s": 1}
            assert admin.post("/v1/events", json=short).status_code == 202
        # Its publish is told first (heard from the other process); once it expires, the inbox
        # is told again, and is empty then.
        await told_until_empty(client, updates)
        with one.client(one.admin_key) as admin:
            shown = admin.get("/v1/events", params={"agent": agent["id"]}).json()
        assert [event["status"] for event in shown["events"]] == ["expired"]


async def test_a_catalogue_change_at_one_process_reaches_a_listen_stream_at_the_other(
    processes: tuple[HeraldProcess, HeraldProcess],
) -> None:
    one, two = processes
    agent = new_agent(one)
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": "listen-catalogue",
        "method": "subscriptions/listen",
        "params": {"_meta": envelope(), "notifications": {"eventsListChanged": True}},
    }
    async with (
        agent_http(one, agent["api_key"]) as http,
        stream_messages(http, body, headers_for("subscriptions/listen")) as messages,
    ):
        async with asyncio.timeout(WAIT_S):
            acknowledged = await anext(messages)
            assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
            with two.client(two.admin_key) as admin:
                declared = {"description": "declared at the other process"}
                assert admin.put("/v1/event-types/deploy.done", json=declared).is_success
            changed = await anext(messages)
        assert changed["method"] == "notifications/events/list_changed"
        assert changed["params"]["_meta"] == {SUBSCRIPTION_ID: "listen-catalogue"}
