"""``subscriptions/listen`` on 2026-07-28, in process: ``herald://inbox`` updates when the
agent's inbox changes (an event for it, an acknowledgement), only what herald sends is
acknowledged, and ``notifications/events/list_changed`` follows a catalogue change."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pydantic
import pytest
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.subscriptions import ResourceUpdated, Subscription
from mcp.server.lowlevel import Server

from herald import Hub
from herald.config import EventsConfig
from herald.delivery.engine import Notifier
from herald.delivery.fanout import Fanout
from herald.mcp import create_server
from herald.mcp.events import SUBSCRIPTION_ID
from herald.mcp.resources import INBOX_URI
from herald.models import Agent
from herald.testing import ManualClock
from mcp import Client
from tests.mcp.conftest import Received, connect

pytestmark = pytest.mark.anyio
EVENTS_LIST_CHANGED = "notifications/events/list_changed"


async def next_update(subscription: Subscription) -> object:
    async with asyncio.timeout(10):
        return await anext(subscription)


async def test_the_inbox_updates_when_an_event_comes_and_when_one_is_acknowledged(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    async with (
        connect(notifier, alice, mode="auto") as (client, _),
        client.listen(resource_subscriptions=[INBOX_URI]) as subscription,
    ):
        assert client.protocol_version == "2026-07-28"
        published = await hub.publish("alice", "t", "new")
        assert await next_update(subscription) == ResourceUpdated(INBOX_URI)
        await client.call_tool("ack", {"ids": [published.event.id]})
        assert await next_update(subscription) == ResourceUpdated(INBOX_URI)


def quick_checks(notifier: Notifier, agent: Agent) -> Server[Any]:
    """A server that reads the listened inboxes every 50 ms."""

    async def identify(ctx: Any) -> Agent:
        return agent

    config = EventsConfig(inbox_check_s=0.05)
    return create_server(notifier, identify=identify, transport="memory", events_config=config)


async def test_the_inbox_updates_when_an_event_in_it_expires(
    hub: Hub, notifier: Notifier, clock: ManualClock
) -> None:
    alice, _ = await hub.create_agent("alice")
    await hub.publish("alice", "t", "short-lived", ttl_s=10)
    server = quick_checks(notifier, alice)
    async with (
        connect(notifier, alice, mode="auto", server=server) as (client, _),
        client.listen(resource_subscriptions=[INBOX_URI]) as subscription,
    ):
        clock.advance(11)  # nothing wakes the stream: the look at its inbox finds the change
        assert await next_update(subscription) == ResourceUpdated(INBOX_URI)


async def test_the_inbox_updates_when_another_process_acknowledges(
    postgres_database_url: str,
) -> None:
    async with (
        Hub.from_url(postgres_database_url) as other,
        Hub.from_url(postgres_database_url) as here,
    ):
        alice, _ = await other.create_agent("alice")
        published = await other.publish("alice", "t", "read elsewhere")
        notifier = Notifier(here)
        try:
            async with (
                connect(notifier, alice, mode="auto", server=quick_checks(notifier, alice)) as (
                    client,
                    _,
                ),
                client.listen(resource_subscriptions=[INBOX_URI]) as subscription,
            ):
                await other.ack(alice, ids=[published.event.id])  # no wake-up reaches here
                assert await next_update(subscription) == ResourceUpdated(INBOX_URI)
        finally:
            await notifier.close()


async def test_only_what_herald_sends_is_acknowledged(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    async with (
        connect(notifier, alice, mode="auto") as (client, _),
        client.listen(
            tools_list_changed=True, resource_subscriptions=[INBOX_URI, "file:///etc/passwd"]
        ) as subscription,
    ):
        honoured = subscription.honored.model_dump(by_alias=True, exclude_none=True)
    assert honoured == {"resourceSubscriptions": [INBOX_URI]}


class AnyParams(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")


class ListChanged(ClientExtension):
    """Lets the SDK client receive ``notifications/events/list_changed``."""

    identifier = "test/events-list-changed"

    def __init__(self, received: Received) -> None:
        self.received = received

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def handler(params: AnyParams) -> None:
            self.received.put(EVENTS_LIST_CHANGED, params)

        return [
            NotificationBinding(method=EVENTS_LIST_CHANGED, params_type=AnyParams, handler=handler)
        ]


class ListenRequest(types.Request[AnyParams, str]):
    """``subscriptions/listen`` with a filter field the SDK's model has no keyword for."""


@contextlib.asynccontextmanager
async def raw_listen(
    notifier: Notifier, agent: Agent, notifications: dict[str, Any]
) -> AsyncIterator[Received]:
    """A listen stream opened by hand, with what the client is sent in ``Received``."""

    async def identify(ctx: Any) -> Agent:
        return agent

    received = Received()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.Notification):
            received.put(message.method, message.params)

    server = create_server(notifier, identify=identify, transport="memory")
    async with Client(
        server,
        mode="auto",
        client_info=types.Implementation(name="listen-test", version="1.0"),
        extensions=[ListChanged(received)],
        message_handler=on_message,
    ) as client:
        request = ListenRequest(
            method="subscriptions/listen", params=AnyParams(notifications=notifications)
        )
        listening = asyncio.create_task(
            client.session.send_request(request, pydantic.TypeAdapter(dict[str, Any]))
        )
        try:
            yield received
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening


async def test_a_catalogue_change_is_told_to_a_stream_that_asked(
    hub: Hub, notifier: Notifier
) -> None:
    alice, _ = await hub.create_agent("alice")
    async with raw_listen(notifier, alice, {"eventsListChanged": True}) as received:
        method, params = await received.next()
        assert method == "notifications/subscriptions/acknowledged"
        assert params["notifications"] == {"eventsListChanged": True}
        await hub.event_types.put("build.failed", "A build failed", None)
        method, params = await received.next()
    assert method == EVENTS_LIST_CHANGED
    assert params["_meta"][SUBSCRIPTION_ID] is not None


async def test_a_stream_ends_gracefully_when_herald_stops(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")

    async def identify(ctx: Any) -> Agent:
        return alice

    fanout = Fanout(hub)
    server = create_server(notifier, identify=identify, transport="memory", fanout=fanout)
    async with (
        connect(notifier, alice, mode="auto", server=server) as (client, _),
        client.listen(resource_subscriptions=[INBOX_URI]) as subscription,
    ):
        await fanout.close()  # what herald serve does first when it stops
        async with asyncio.timeout(10):
            assert [update async for update in subscription] == []


async def test_discovery_declares_what_this_era_is_sent(hub: Hub, notifier: Notifier) -> None:
    alice, _ = await hub.create_agent("alice")
    async with connect(notifier, alice, mode="auto") as (client, _):
        capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
    assert "logging" not in capabilities  # no notifications/message on 2026-07-28
    assert capabilities["resources"] == {"subscribe": True, "listChanged": False}
    assert capabilities["tools"] == {"listChanged": False}
